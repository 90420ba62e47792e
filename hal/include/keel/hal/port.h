// hal::Port — a network port as the datapath sees it: bursts in, bursts out.
//
// Per-burst calls are virtual (one indirect call per up to 32 packets, the
// DPDK burst contract); per-packet work stays inline in the backends.
//
// Life cycle: a Backend opens a port (may fail: clear Status), start() (may
// fail), then rx()/tx() from PMD threads, then stop() (never fails) and
// destruction. rx/tx never fail as calls: packets that can't be sent are
// released and counted as tx_dropped.
//
// MTU (Open vSwitch's Interface mtu_request; default 1500, kMinMtu..kMaxMtu):
// set_mtu() on the control thread, at any time. tx() drops and counts
// (tx_dropped and tx_mtu_exceeded_drops, as netdev-dpdk counts them) every
// frame longer than the port's limit for its MTU. The limit is the
// backend's: sim ports follow netdev-dummy (MTU + 14, + 4 more when the
// outer EtherType is 802.1Q 0x8100), DPDK ports follow netdev-dpdk (MTU +
// 14 + 4 whatever the frame). rx does not check the MTU: neither does
// Open vSwitch (a dummy port forwards a 9000-byte frame received on a
// 1500-byte port; a NIC enforces its own receive limit in hardware).
// Cost: tx finds the longest frame of the burst in the loop that already
// sums the bytes (one compare per packet); only a burst with an oversized
// frame takes the out-of-line filtering path.
//
// Link (set_link(), Open vSwitch's netdev up/down; `port-link PORT up|down`):
// a sim port keeps a flag that link() reports; while it is down rx() hands
// out nothing (a pcap replay waits: no record is read or lost) and tx()
// releases every packet, counted as tx_dropped and tx_link_down_drops (one
// relaxed load per burst each). A DPDK port asks the device
// (rte_eth_dev_set_link_up/down) and link() reports what the device says;
// a driver without the operation is an error.
//
// Hardware address (mac()): a DPDK port's is the device's
// (rte_eth_macaddr_get at open); any other port's is derived from its
// datapath port number as Open vSwitch's dummy ports number theirs,
// aa:55:aa:55:HH:LL (a locally administered unicast address).
//
// Thread-safety: queue q of a port is used by one thread at a time. rx queue
// q is polled by exactly one PMD. tx queue q is owned by one PMD; when a port
// has fewer tx queues than PMDs, the datapath serialises tx on a shared queue
// itself (as Open vSwitch does with its dynamic txqs). Counters are per queue,
// single writer (the thread using the queue), read by anyone with relaxed
// loads; counters() sums them. The one exception, tx_hw_dropped (frames a
// hardware rule of another port forwarded here and could not send), is
// counted by whichever PMD runs that port's HwIngress: a relaxed
// fetch_add, on that rare path only. Port::rx also marks each packet it
// returns (Packet::mark_received: its rx port and fate token, for the
// datapath's drop accounting). set_link() runs on the control thread; the
// sim flag is a relaxed atomic the rx/tx paths load once per burst (a
// burst in flight finishes under the old state). mac() is immutable once
// the port is in the datapath (set_mac() at open; the id when added).
//
// Hardware offload (flow.h): flow_engine() is the port's rte_flow-shaped
// flow engine (nullptr: none; control path, the offload thread only). A
// port whose "hardware" is modelled in software (the sim NIC) has a
// HwIngress hook: rx() hands it each non-empty burst after rx_burst(), and
// it keeps only what the PMD must see (what full-offload rules forwarded or
// dropped is counted in rx_hw_forwarded / rx_hw_dropped; rx_packets and
// rx_bytes still count everything the port received). Cost on the fast
// path: one acquire load and a predictable null test per burst when no hook
// is set. set_hw_ingress() is for the backend, before the port is polled or
// while the datapath has it quiesced; the hook must outlive the port's use.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "keel/hal/packet.h"

namespace keel::hal {

class Backend;
class FlowEngine;
class HwIngress;

enum class PortRole : uint8_t { uplink, host_representor, vf, internal };
const char* to_string(PortRole r);

struct LinkState {
  bool up = false;
  uint32_t speed_mbps = 0;
  bool full_duplex = true;
};

struct PortCounters {
  uint64_t rx_packets = 0, rx_bytes = 0, rx_dropped = 0;
  uint64_t tx_packets = 0, tx_bytes = 0, tx_dropped = 0;
  uint64_t tx_mtu_exceeded_drops = 0;  // longer than the MTU allows; also in tx_dropped
  uint64_t tx_link_down_drops = 0;     // sent while the (sim) link was set down; also in tx_dropped
  // Received packets a full-offload hardware rule forwarded / dropped
  // without a PMD seeing them (sim NIC model; in rx_packets too).
  uint64_t rx_hw_forwarded = 0, rx_hw_dropped = 0;
  // Frames a full-offload hardware rule sent to this port that the
  // hardware could not send (link down, over the MTU, refused): not in
  // tx_packets nor tx_dropped, which count this port's own tx queues.
  uint64_t tx_hw_dropped = 0;
};

using MacAddr = std::array<uint8_t, 6>;
std::string format_mac(const MacAddr& m);  // "aa:55:aa:55:00:01"

// The longest frame tx() sends for a given MTU: `untagged` for any frame,
// `tagged` for one whose outer EtherType is 802.1Q (tagged >= untagged).
struct TxFrameLimit {
  uint32_t untagged;
  uint32_t tagged;
};

// Whether a port's input can run out (a pcap file read N times) and has.
enum class InputState : uint8_t { live, pending, drained };

class Port {
 public:
  static constexpr unsigned kMaxQueues = 16;

  Port(std::string name, std::string kind) : name_(std::move(name)), kind_(std::move(kind)) {}
  virtual ~Port() = default;
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  const std::string& name() const { return name_; }
  const std::string& kind() const { return kind_; }  // "pcap", "ring", "tap", "dpdk", ...
  uint16_t n_rxq() const { return n_rxq_; }
  uint16_t n_txq() const { return n_txq_; }
  uint16_t id() const { return id_; }  // datapath port number, set by the datapath
  void set_id(uint16_t id) { id_ = id; }
  // The backend that opened the port (set by Backend::open_port; it outlives
  // the port): where a copy of a packet that leaves through this port is
  // best taken from (an mbuf for a DPDK port, which then sends it without
  // another copy). Null for a port made by hand (tests).
  Backend* backend() const { return backend_; }
  void set_backend(Backend* b) { backend_ = b; }

  // Receives up to out.size() (<= kMaxBurst) packets from rx queue q. The
  // packets' in_port is set to id(). Ownership passes to the caller.
  uint16_t rx(uint16_t q, std::span<Packet*> out) noexcept {
    if (link_down_.load(std::memory_order_relaxed)) [[unlikely]]
      return 0;  // a down sim link receives nothing (its input waits)
    uint16_t n = rx_burst(q, out);
    uint64_t bytes = 0;
    for (uint16_t i = 0; i < n; ++i) {
      out[i]->mark_received(id_);  // in_port, rx_port and the fate token
      bytes += out[i]->len();
    }
    if (n) bump(rxc_[q].packets, n), bump(rxc_[q].bytes, bytes);
    HwIngress* hw = hw_ingress_.load(std::memory_order_acquire);
    if (hw != nullptr && n != 0)
      n = run_hw_ingress(*hw, q, out.first(n));
    return n;
  }

  // Sends the packets on tx queue q and takes ownership of all of them: what
  // the queue refuses, and frames longer than the MTU allows, are released
  // and counted as tx_dropped.
  uint16_t tx(uint16_t q, std::span<Packet* const> pkts) noexcept {
    if (pkts.empty()) return 0;
    if (link_down_.load(std::memory_order_relaxed)) [[unlikely]]
      return tx_link_down(q, pkts);
    // Relaxed: set_mtu() may change it between bursts; a burst uses one value.
    const uint32_t max_len = tx_max_len_.load(std::memory_order_relaxed);
    uint64_t bytes = 0;
    uint32_t longest = 0;
    for (Packet* p : pkts) {
      bytes += p->len();
      longest = p->len() > longest ? p->len() : longest;
    }
    if (longest > max_len) [[unlikely]]
      return tx_over_mtu(q, pkts);
    return tx_fitting(q, pkts, bytes);
  }

  // Counts a packet received on queue q that the datapath could not handle.
  void count_rx_dropped(uint16_t q, uint64_t n) noexcept { bump(rxc_[q].dropped, n); }
  // Called by a HwIngress on the thread polling another port's rx queue:
  // frames a hardware rule forwarded here that could not be sent. Several
  // such threads may count at once: a locked add, on this rare path only.
  void count_hw_tx_dropped(uint64_t n) noexcept { hw_tx_dropped_.fetch_add(n, std::memory_order_relaxed); }
  // Called by a HwIngress (on the thread polling rx queue q): packets of
  // the burst the hardware forwarded / dropped.
  void count_rx_hw(uint16_t q, uint64_t forwarded, uint64_t dropped) noexcept {
    if (forwarded) bump(rxc_[q].hw_forwarded, forwarded);
    if (dropped) bump(rxc_[q].hw_dropped, dropped);
  }

  // --- hardware offload (flow.h; see the top) ---
  // The port's flow engine, nullptr when it has none. Control path only;
  // the engine lives as long as the port (the offload engine must drop its
  // pointer before the port is removed from the datapath and destroyed).
  virtual FlowEngine* flow_engine() { return nullptr; }
  void set_hw_ingress(HwIngress* hw) { hw_ingress_.store(hw, std::memory_order_release); }
  HwIngress* hw_ingress() const { return hw_ingress_.load(std::memory_order_acquire); }

  // --- MTU (control thread) ---
  uint32_t mtu() const { return mtu_.load(std::memory_order_relaxed); }
  // Sets the MTU: checks the range, lets the backend apply it to the device
  // (apply_mtu), then moves tx's frame limit. On any error nothing changed.
  Status set_mtu(uint32_t mtu);
  // The frame limit tx() applies now (for tests and `show ports`).
  TxFrameLimit tx_frame_limit() const {
    return {tx_max_len_.load(std::memory_order_relaxed), tx_max_len_tagged_.load(std::memory_order_relaxed)};
  }

  PortCounters counters() const;
  void clear_counters();  // only while no PMD polls the port

  virtual LinkState link() const = 0;
  // Takes the link down or up (see the top). Control thread. Errors leave
  // the link as it was.
  Status set_link(bool up);
  // Whether set_link(false) holds a sim port's link down.
  bool link_forced_down() const { return link_down_.load(std::memory_order_relaxed); }

  // The port's hardware address (see the top).
  MacAddr mac() const;
  virtual InputState input_state() const { return InputState::live; }

  // --- offline runs (datapath.h: every input replays a file) ---
  // What rx receives from: nothing (an output-only port), a finite replay
  // of a capture (known timestamps, runs out), or live traffic (the
  // default: a NIC, a TAP, a ring, an endless replay).
  enum class InputKind : uint8_t { none, finite_replay, live };
  virtual InputKind input_kind() const { return InputKind::live; }
  static constexpr uint64_t kNoRecord = ~uint64_t{0};
  // finite_replay only, called by the thread polling rx queue q, once per
  // burst: the timestamp (ns) of the record rx(q) would hand out next
  // (kNoRecord when none is left), and how many of queue q's next records,
  // at most `max`, are stamped before `limit_ns` (or at it, if
  // `inclusive`). Each queue's answers concern its own records only, so
  // two threads polling two queues may ask concurrently.
  virtual uint64_t next_rx_timestamp_ns(uint16_t q) const noexcept {
    (void)q;
    return kNoRecord;
  }
  virtual unsigned rx_records_before(uint16_t q, uint64_t limit_ns, bool inclusive,
                                     unsigned max) const noexcept {
    (void)q, (void)limit_ns, (void)inclusive;
    return max;
  }
  // Offline with one reader, before the first rx (control thread): makes
  // rx queue 0 hand out the whole input in arrival order, so that one
  // reader merging inputs by timestamp keeps that order, and returns how
  // many rx queues are left to poll (1). A port that cannot merge its
  // queues returns n_rxq() and keeps them (a single-queue port has nothing
  // to merge). Not called when the queues go to several readers.
  virtual uint16_t merge_rx_queues() noexcept { return n_rxq(); }
  virtual std::string describe() const = 0;  // e.g. "pcap in=a.pcap out=b.pcap"

  virtual void stop() noexcept {}  // flushes outputs; idempotent

  // --- queue count at run time (Open vSwitch's options:n_rxq / n_txq) ---
  // Restarts the device with n_rx rx and n_tx tx queues (1..kMaxQueues):
  // a DPDK port is stopped, reconfigured (RSS over the rx queues) and
  // started again; a sim port spreads its input over n_rx queues by RSS.
  // The caller (the datapath) guarantees that no thread polls or sends on
  // the port meanwhile. Flows stay (they name the port, not its queues).
  // n_rx is what the port gets or the call fails; n_tx is a request, as at
  // open: a port may give fewer tx queues (a pcap writer is one stream: 1),
  // so read n_txq() afterwards. On error the port keeps its queues and
  // still works. The default refuses a change (a port kind with a fixed
  // number of queues: TAP, null, sample).
  Status set_queue_count(uint16_t n_rx, uint16_t n_tx);

 protected:
  // Backends implement the raw burst functions.
  virtual uint16_t rx_burst(uint16_t q, std::span<Packet*> out) noexcept = 0;
  // Returns how many of pkts[0..] were taken (a prefix); the rest stay the caller's.
  virtual uint16_t tx_burst(uint16_t q, std::span<Packet* const> pkts) noexcept = 0;

  // set_mtu()'s backend hook: applies `mtu` to the device (a TAP device's
  // kernel MTU, rte_eth_dev_set_mtu). An error leaves the port unchanged.
  virtual Status apply_mtu(uint32_t /*mtu*/) { return {}; }
  // set_link()'s backend hook: a device's own link operation. The default
  // (every sim port) is the flag rx()/tx() look at.
  virtual Status apply_link(bool up) {
    link_down_.store(!up, std::memory_order_relaxed);
    return {};
  }
  // A backend that knows the device's address sets it at open.
  void set_mac(const MacAddr& m) {
    mac_ = m;
    has_mac_ = true;
  }
  // The frame limit for an MTU; the default is Open vSwitch's netdev-dummy
  // rule (lib/netdev-dummy.c, netdev_dummy_send).
  virtual TxFrameLimit frame_limit_for(uint32_t mtu) const {
    return {mtu + kEthHeaderLen, mtu + kEthHeaderLen + kVlanHeaderLen};
  }
  // A backend whose frame_limit_for() differs calls this from its
  // constructor (virtual calls do not reach it from Port's).
  void init_frame_limit() { store_frame_limit(frame_limit_for(mtu())); }

  // set_queue_count()'s backend hook, called with counts in range of which
  // one at least differs from the current; it may lower n_tx to what the
  // port can give. On success the port then reports n_rx and n_tx.
  virtual Status apply_queue_count(uint16_t n_rx, uint16_t& n_tx) {
    (void)n_rx, (void)n_tx;
    return error(Errc::unsupported, "port " + name_ + " (" + kind_ + "): the number of queues is fixed");
  }

  void set_queues(uint16_t nrx, uint16_t ntx) {
    n_rxq_ = nrx;
    n_txq_ = ntx;
  }

 private:
  uint16_t tx_fitting(uint16_t q, std::span<Packet* const> pkts, uint64_t bytes) noexcept {
    uint16_t sent = tx_burst(q, pkts);
    if (sent < pkts.size()) {
      for (size_t i = sent; i < pkts.size(); ++i) {
        bytes -= pkts[i]->len();
        release(pkts[i]);
      }
      bump(txc_[q].dropped, pkts.size() - sent);
    }
    if (sent) bump(txc_[q].packets, sent), bump(txc_[q].bytes, bytes);
    return sent;
  }
  // tx() of a burst holding a frame over the limit (port.cpp): drops and
  // counts those, sends the rest in order.
  uint16_t tx_over_mtu(uint16_t q, std::span<Packet* const> pkts) noexcept;
  // rx()'s call of the hook (port.cpp, out of line).
  uint16_t run_hw_ingress(HwIngress& hw, uint16_t q, std::span<Packet*> pkts) noexcept;
  // tx() while the sim link is down (port.cpp): releases and counts all.
  uint16_t tx_link_down(uint16_t q, std::span<Packet* const> pkts) noexcept;
  void store_frame_limit(TxFrameLimit l) {
    tx_max_len_.store(l.untagged, std::memory_order_relaxed);
    tx_max_len_tagged_.store(l.tagged, std::memory_order_relaxed);
  }

  struct alignas(64) QueueCounters {
    std::atomic<uint64_t> packets{0}, bytes{0}, dropped{0};
    std::atomic<uint64_t> mtu_dropped{0};   // tx only: part of `dropped`
    std::atomic<uint64_t> link_dropped{0};  // tx only: part of `dropped`
    std::atomic<uint64_t> hw_forwarded{0};  // rx only: part of `packets`
    std::atomic<uint64_t> hw_dropped{0};    // rx only: part of `packets`
  };
  // Single writer per queue: a relaxed load+store is enough and costs no
  // locked instruction; readers may see a value one burst old.
  static void bump(std::atomic<uint64_t>& c, uint64_t n) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  std::string name_;
  std::string kind_;
  uint16_t n_rxq_ = 1, n_txq_ = 1;
  uint16_t id_ = kInvalidPort;
  Backend* backend_ = nullptr;
  std::atomic<bool> link_down_{false};  // sim link (apply_link's default)
  std::atomic<HwIngress*> hw_ingress_{nullptr};  // sim NIC model's hook (set_hw_ingress)
  std::atomic<uint64_t> hw_tx_dropped_{0};        // count_hw_tx_dropped (several writers)
  MacAddr mac_{};
  bool has_mac_ = false;
  // Written by set_mtu() (control thread), read by tx() with relaxed loads:
  // a burst in flight may still use the old limit.
  std::atomic<uint32_t> mtu_{kDefaultMtu};
  std::atomic<uint32_t> tx_max_len_{kDefaultMtu + kEthHeaderLen};
  std::atomic<uint32_t> tx_max_len_tagged_{kDefaultMtu + kEthHeaderLen + kVlanHeaderLen};
  std::array<QueueCounters, kMaxQueues> rxc_{};
  std::array<QueueCounters, kMaxQueues> txc_{};
};

}  // namespace keel::hal

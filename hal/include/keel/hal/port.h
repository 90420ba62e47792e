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
// Thread-safety: queue q of a port is used by one thread at a time. rx queue
// q is polled by exactly one PMD. tx queue q is owned by one PMD; when a port
// has fewer tx queues than PMDs, the datapath serialises tx on a shared queue
// itself (as Open vSwitch does with its dynamic txqs). Counters are per queue,
// single writer (the thread using the queue), read by anyone with relaxed
// loads; counters() sums them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>

#include "keel/hal/packet.h"

namespace keel::hal {

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

  // Receives up to out.size() (<= kMaxBurst) packets from rx queue q. The
  // packets' in_port is set to id(). Ownership passes to the caller.
  uint16_t rx(uint16_t q, std::span<Packet*> out) noexcept {
    uint16_t n = rx_burst(q, out);
    uint64_t bytes = 0;
    for (uint16_t i = 0; i < n; ++i) {
      out[i]->set_in_port(id_);
      bytes += out[i]->len();
    }
    if (n) bump(rxc_[q].packets, n), bump(rxc_[q].bytes, bytes);
    return n;
  }

  // Sends the packets on tx queue q and takes ownership of all of them: what
  // the queue refuses is released and counted as tx_dropped.
  uint16_t tx(uint16_t q, std::span<Packet* const> pkts) noexcept {
    if (pkts.empty()) return 0;
    uint64_t bytes = 0;
    for (Packet* p : pkts) bytes += p->len();
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

  // Counts a packet received on queue q that the datapath could not handle.
  void count_rx_dropped(uint16_t q, uint64_t n) noexcept { bump(rxc_[q].dropped, n); }

  PortCounters counters() const;
  void clear_counters();  // only while no PMD polls the port

  virtual LinkState link() const = 0;
  virtual InputState input_state() const { return InputState::live; }

  // --- offline runs (datapath.h: every input replays a file) ---
  // What rx receives from: nothing (an output-only port), a finite replay
  // of a capture (known timestamps, runs out), or live traffic (the
  // default: a NIC, a TAP, a ring, an endless replay).
  enum class InputKind : uint8_t { none, finite_replay, live };
  virtual InputKind input_kind() const { return InputKind::live; }
  static constexpr uint64_t kNoRecord = ~uint64_t{0};
  // finite_replay only, called by the thread polling rx queue 0, once per
  // burst: the timestamp (ns) of the record rx would hand out next
  // (kNoRecord when none is left), and how many of the next records, at
  // most `max`, are stamped before `limit_ns` (or at it, if `inclusive`).
  virtual uint64_t next_rx_timestamp_ns() const noexcept { return kNoRecord; }
  virtual unsigned rx_records_before(uint64_t limit_ns, bool inclusive, unsigned max) const noexcept {
    (void)limit_ns, (void)inclusive;
    return max;
  }
  virtual std::string describe() const = 0;  // e.g. "pcap in=a.pcap out=b.pcap"

  virtual void stop() noexcept {}  // flushes outputs; idempotent

 protected:
  // Backends implement the raw burst functions.
  virtual uint16_t rx_burst(uint16_t q, std::span<Packet*> out) noexcept = 0;
  // Returns how many of pkts[0..] were taken (a prefix); the rest stay the caller's.
  virtual uint16_t tx_burst(uint16_t q, std::span<Packet* const> pkts) noexcept = 0;

  void set_queues(uint16_t nrx, uint16_t ntx) {
    n_rxq_ = nrx;
    n_txq_ = ntx;
  }

 private:
  struct alignas(64) QueueCounters {
    std::atomic<uint64_t> packets{0}, bytes{0}, dropped{0};
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
  std::array<QueueCounters, kMaxQueues> rxc_{};
  std::array<QueueCounters, kMaxQueues> txc_{};
};

}  // namespace keel::hal

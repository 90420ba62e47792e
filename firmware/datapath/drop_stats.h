// Drop accounting — what became of every packet the datapath received, and
// every packet it dropped, by reason (`show drops`, `coverage-show`).
//
// The bookkeeping is per received packet. Port::rx marks each packet it
// hands out with its rx port and the packet's one *fate token*
// (hal::Packet::has_fate_token). Whatever the actions do — flood it to
// several ports, clone it, recirculate it, decapsulate it, send it up —
// the received packet's fate is counted exactly once, at the port it came
// in on, when it is decided:
//
//   forwarded  at least one instance of it (the packet or a copy) was
//              queued for transmission on a port in the pass that decided
//              it (what the port then did with it is the port's: its tx
//              counters and tx drops);
//   slow path  consumed by keel's control plane with no output: a
//              userspace() packet the slow path took (packet-in to the
//              controller queue, a LACPDU, an ARP for a bridge address);
//   dropped    no instance went anywhere: counted under the reason of the
//              instance that held the token (DropReason);
//   in flight  the token is in an upcall record (or, offline, in the PMD's
//              held packets): `in_flight`, a gauge.
//
// So for every port, at any instant the datapath is idle:
//   received (Port rx_packets) = forwarded + slow path + dropped (all
//   reasons) + in flight,
// where the readers (show drops) add what a full-offload hardware rule did
// without a PMD: its forwards (rx_hw_forwarded) to forwarded, its drops
// (rx_hw_dropped) to dropped as kHwDrop — the one reason no PMD counts.
// While it forwards, a burst being processed shows in none of the terms.
//
// How the token moves (execute.cpp): a pass's copies carry no token; when
// the pass ends, a received packet with any instance queued for output is
// forwarded (the token instance, if it went on to a recirculation or the
// slow path, loses it); otherwise the token goes on with the instance that
// holds it, or, when that one was dropped, with one of its copies that
// went on (a clone's recirculation); otherwise the packet is dropped under
// its token instance's reason. A packet split into several recirculations
// is decided by the one that carries the token (its copies' later outputs
// and drops are counted per instance only). Recirculation and tnl_pop keep
// the token and the rx port, so a packet is never counted twice.
//
// Besides the fates, every buffer the datapath drops (copies too) is
// counted once per reason in the PMD's instance counters: that is what
// `coverage-show` and the per-PMD lines of `show drops` print (Open
// vSwitch's datapath_drop_* / drop_action_* coverage counters count the
// same way: per packet instance).
//
// Layout: one DropStats per PMD (alignas(64) rows, one per datapath port,
// each forwarded / slow path / in flight / one counter per reason), about
// 100 KB per PMD of which only the rows of ports that receive are touched.
//
// Thread-safety: a DropStats is written by its PMD's thread alone (relaxed
// load + store, no locked instruction: Open vSwitch's per-thread coverage
// counters), and by the control thread only while that PMD is not running
// (Datapath::drop_pending_upcalls, a removed PMD's retirement); anyone
// reads it with relaxed loads (a total may be a burst old, and the terms
// of one port are not one instant). DropTotals is a plain snapshot.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "keel/hal/packet.h"
#include "packet/tunnel_header.h"

namespace keel::datapath {

// Why a packet was dropped. Names (drop_reason_name) are the keys of `show
// drops --format json`; the coverage names (drop_reason_coverage) are Open
// vSwitch's where it counts the same event.
enum class DropReason : uint8_t {
  kNone = 0,
  // Received and dropped before classification.
  kRunt,              // shorter than an Ethernet header (datapath_drop_rx_invalid_packet)
  // Misses and userspace(): the slow path.
  kUpcallLost,        // a miss with no upcall record / budget, or no slow path (datapath_drop_upcall_error)
  kUserspaceLost,     // a userspace() packet with no upcall record or slow-path queue room
  kTranslateError,    // the slow path answered without actions (translation failed, or it stopped)
  // The flow's actions send it nowhere: the translation's reason (Megaflow::drop_reason).
  kDropAction,        // the rules or NORMAL drop it, or a hand-made drop flow (drop_action_of_pipeline)
  kNoBridge,          // its port is in no bridge (drop_action_bridge_not_found)
  kTnlNoPort,         // decapsulated, and no tunnel port takes it (unknown VNI, key or remote)
  kRecursionTooDeep,  // resubmits nested too deep (drop_action_recursion_too_deep)
  kTooManyResubmit,   // too many resubmits (drop_action_too_many_resubmit)
  kNoRecircContext,   // recirc_id no bond or tunnel knows (drop_action_no_recirculation_context)
  kActionsTooLong,    // the datapath action list grew too long
  kInvalidTunnelMetadata,  // Geneve options the TLV map refuses (drop_action_invalid_tunnel_metadata)
  kTnlNeighMiss,      // tunnel output: next hop not in the neighbour cache (request sent)
  kTnlOutputFailed,   // tunnel output: no route, no bridge address, header not built
  // The executor and the PMD.
  kRecircTooDeep,     // recirculated more than kMaxRecircDepth times (datapath_drop_recirc_error)
  kRecircQueueFull,   // a burst's recirculation queue full
  kTxBatchFull,       // an output batch full with no flush (the executor without a PMD)
  kInvalidPort,       // output to a port that does not exist (datapath_drop_invalid_port)
  kInvalidBond,       // lb_output to a bond with no table (datapath_drop_invalid_bond)
  kBondNoMember,      // lb_output bucket with no live member (every member down)
  kTnlPushNoHeadroom, // tnl_push without room for the header (datapath_drop_tunnel_push_error)
  kVlanNoHeadroom,    // push_vlan without 4 bytes of headroom
  kPoolExhausted,     // a copy (clone, flood) found no free buffer
  kUnsupportedAction, // an action this build cannot run
  kStopped,           // discarded when its PMD or the slow path stopped with it up
  kControllerQueueFull,  // a packet-in the controller queue had no room for (packet_in_overflow)
  kHwDrop,            // a full-offload hardware rule dropped it (the port's rx_hw_dropped; no PMD saw it)
  // tnl_pop refused the frame: one reason per packet::TnlPopResult from
  // kTruncated on (datapath_drop_tunnel_pop_error; no_vport:
  // datapath_drop_invalid_tnl_port).
  kTnlPopFirst,
  kCount = kTnlPopFirst + packet::kTnlPopResults - 1
};
inline constexpr unsigned kDropReasons = static_cast<unsigned>(DropReason::kCount);

inline constexpr DropReason tnl_pop_drop_reason(packet::TnlPopResult r) noexcept {
  return static_cast<DropReason>(static_cast<unsigned>(DropReason::kTnlPopFirst) + static_cast<unsigned>(r) - 1);
}

// "runt", "upcall_lost", ..., "tnl_pop_truncated" ("none" for kNone).
std::string_view drop_reason_name(DropReason r);
// Open vSwitch's coverage counter for the event ("datapath_drop_upcall_error"),
// or keel's own ("drop_tnl_no_port") where Open vSwitch has none.
std::string_view drop_reason_coverage(DropReason r);
// What it means, one line (for `show drops` text and the README).
std::string_view drop_reason_help(DropReason r);

inline constexpr unsigned kDropStatsPorts = 256;  // datapath port ids (flow_table.h's kMaxDpPorts)

// A snapshot (summed over PMDs by Datapath::drop_totals).
struct DropTotals {
  struct Port {
    uint64_t forwarded = 0, slow_path = 0, in_flight = 0;
    std::array<uint64_t, kDropReasons> dropped{};
    uint64_t dropped_total() const {
      uint64_t s = 0;
      for (uint64_t d : dropped) s += d;
      return s;
    }
  };
  std::vector<Port> ports = std::vector<Port>(kDropStatsPorts);  // by datapath port id
  std::array<uint64_t, kDropReasons> instances{};  // every buffer dropped, by reason
  void add(const DropTotals& o);
};

class DropStats {
 public:
  DropStats() : ports_(std::make_unique<Row[]>(kDropStatsPorts + 1)) {}

  // --- the owning PMD's thread (see the top) ---
  // A received packet's fate.
  void forwarded(uint16_t port, uint64_t n = 1) noexcept { bump(row(port).forwarded, n); }
  void slow_path(uint16_t port, uint64_t n = 1) noexcept { bump(row(port).slow_path, n); }
  void dropped(uint16_t port, DropReason r, uint64_t n = 1) noexcept {
    bump(row(port).dropped[static_cast<unsigned>(r)], n);
  }
  // Any buffer dropped (copies too).
  void instance(DropReason r, uint64_t n = 1) noexcept { bump(instances_[static_cast<unsigned>(r)], n); }
  // A buffer dropped and released: its instance, and its packet's fate when
  // it holds the token.
  void drop(hal::Packet* p, DropReason r) noexcept {
    instance(r);
    if (p->has_fate_token()) dropped(p->rx_port(), r);
    hal::release(p);
  }
  // The token goes up (an upcall record, the offline held list) / comes back.
  void up(const hal::Packet* p) noexcept {
    if (p->has_fate_token()) up(p->rx_port());
  }
  void down(const hal::Packet* p) noexcept {
    if (p->has_fate_token()) down(p->rx_port());
  }
  // The same for a token whose buffer is gone (an upcall record carrying
  // the frame itself, upcall.h): by its rx port.
  void up(uint16_t rx_port) noexcept { bump(row(rx_port).in_flight, 1); }
  void down(uint16_t rx_port) noexcept {
    std::atomic<uint64_t>& g = row(rx_port).in_flight;
    g.store(g.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }

  // --- anyone ---
  // Adds this PMD's counts to `out`.
  void read(DropTotals& out) const;

 private:
  struct alignas(64) Row {
    std::atomic<uint64_t> forwarded{0}, slow_path{0}, in_flight{0};
    std::array<std::atomic<uint64_t>, kDropReasons> dropped{};
  };
  static void bump(std::atomic<uint64_t>& c, uint64_t n) noexcept {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // An id beyond the table (hal::kInvalidPort: never on a packet that
  // holds a token) goes to an extra row that read() leaves out.
  Row& row(uint16_t port) noexcept { return ports_[port < kDropStatsPorts ? port : kDropStatsPorts]; }

  std::unique_ptr<Row[]> ports_;
  std::array<std::atomic<uint64_t>, kDropReasons> instances_{};
};

}  // namespace keel::datapath

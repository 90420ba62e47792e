// OfRule — one OpenFlow rule of a bridge's table: the classifier entry
// (match + priority, ClsRule is its base), the flow-mod's keys, the parsed
// actions, and the counters the revalidator pushes to it.
//
// Life cycle (bridge.h): a flow-mod builds a new OfRule, inserts it into its
// table's classifier at version N and, for a modify or replace, removes the
// old one at the same version; publish(N) makes the whole change visible at
// once. A rule is never changed in place while readers may see it (its
// actions included): mod-flows makes a new rule that carries the old one's
// counters and creation time. Removed rules are erased and freed through
// the Rcu once no reader can hold them.
//
// Thread-safety: every field but the counters is immutable once the rule is
// inserted. Counters: added to by the upcall handler (the packet that missed,
// credited when its upcall is translated, as Open vSwitch does) and by the
// revalidator (the megaflows' later packets) — two writers, so each add is
// an atomic read-modify-write (relaxed: the counters order nothing); read by
// anyone. Neither adds per packet on the fast path: the handler once per
// upcall, the revalidator once per rule per run of flows.
#pragma once

#include <atomic>
#include <cstdint>

#include "flow/of_actions.h"
#include "ofproto/classifier.h"

namespace keel::ofproto {

inline constexpr unsigned kNumTables = 255;  // tables 0..254

struct OfRule : ClsRule {
  OfRule(const flow::Match& m, uint16_t prio) : ClsRule(m, prio) {}

  uint8_t table_id = 0;
  uint64_t cookie = 0;
  uint16_t idle_timeout = 0;  // seconds; 0 = none
  uint16_t hard_timeout = 0;
  uint16_t importance = 0;
  bool send_flow_rem = false, no_packet_counts = false, no_byte_counts = false;
  // Its flow-mod needs OpenFlow 1.1+ (it pushes a VLAN tag), so ovs-ofctl
  // sends it in OpenFlow 1.3 and Open vSwitch stores what that carries
  // (bridge.cpp): it shows in dump-flows' text.
  bool of11 = false;
  flow::OfActions actions;
  uint64_t created_ns = 0;   // hal::now_ns() of the add (kept across modify)
  uint64_t modified_ns = 0;  // hard_timeout counts from here (OVS: from add or modify)

  std::atomic<uint64_t> packets{0}, bytes{0};
  std::atomic<uint64_t> used_ns{0};  // last packet; 0 = never

  void add_stats(uint64_t pkts, uint64_t nbytes, uint64_t used) noexcept {
    packets.fetch_add(pkts, std::memory_order_relaxed);
    bytes.fetch_add(nbytes, std::memory_order_relaxed);
    uint64_t was = used_ns.load(std::memory_order_relaxed);
    while (used > was && !used_ns.compare_exchange_weak(was, used, std::memory_order_relaxed)) {
    }
  }
};

}  // namespace keel::ofproto

// OfRule — one OpenFlow rule of a bridge's table: the classifier entry
// (match + priority, ClsRule is its base), the flow-mod's keys, the parsed
// actions, and the counters the revalidator pushes to it.
//
// Life cycle (bridge.h): a flow-mod builds a new OfRule, inserts it into its
// table's classifier at version N and, for a modify or replace, removes the
// old one at the same version; publish(N) makes the whole change visible at
// once. A rule is never changed in place while readers may see it (its
// actions included): mod-flows makes a new rule that carries the old one's
// creation time, and at commit the old rule forwards to it (successor):
// its counters move to the new rule and every later add to the old rule
// (a ukey not yet re-translated) lands on the new one, so no packet is
// lost across a modify (Open vSwitch's rule->new_rule). Removed rules are
// erased and freed through the Rcu once no reader can hold them.
//
// Thread-safety: every field but the counters is immutable once the rule is
// inserted. Counters: added to by the upcall handler (the packet that missed,
// credited when its upcall is translated, as Open vSwitch does) and by the
// revalidator (the megaflows' later packets) — two writers, so each add is
// an atomic read-modify-write (relaxed: the counters order nothing); read by
// anyone (a forwarded rule's read 0). Neither adds per packet on the fast path: the handler once per
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
  // The rule that replaced this one keeping its counters (a modify, or an
  // add over an identical rule, without reset_counts); set once, at commit.
  std::atomic<OfRule*> successor{nullptr};

  // Credits the rule's current incarnation: the end of the successor chain.
  // Ukeys keep pointing at the rules their translation ran until the
  // revalidator re-translates them, so a modified rule's later packets
  // arrive here on the old rule and are forwarded, as Open vSwitch's
  // rule_dpif_credit_stats() follows rule->new_rule.
  void add_stats(uint64_t pkts, uint64_t nbytes, uint64_t used) noexcept {
    OfRule* r = this;
    while (OfRule* n = r->successor.load(std::memory_order_seq_cst)) r = n;
    r->add_own(pkts, nbytes, used);
    r->drain();
  }

  // Makes `next` this rule's successor and moves the counters to it. An add
  // racing with it either lands before the move (and is moved) or sees the
  // successor after its add (and moves what it added itself, drain()):
  // seq_cst on both sides, so the store-buffering pattern cannot strand one.
  void forward_to(OfRule* next) noexcept {
    successor.store(next, std::memory_order_seq_cst);
    drain();
  }

 private:
  void add_own(uint64_t pkts, uint64_t nbytes, uint64_t used) noexcept {
    packets.fetch_add(pkts, std::memory_order_seq_cst);
    bytes.fetch_add(nbytes, std::memory_order_seq_cst);
    uint64_t was = used_ns.load(std::memory_order_relaxed);
    while (used > was && !used_ns.compare_exchange_weak(was, used, std::memory_order_relaxed)) {
    }
  }
  // Counters left on a rule that has a successor go down the chain.
  void drain() noexcept {
    OfRule* r = this;
    while (OfRule* n = r->successor.load(std::memory_order_seq_cst)) {
      const uint64_t p = r->packets.exchange(0, std::memory_order_seq_cst);
      const uint64_t b = r->bytes.exchange(0, std::memory_order_seq_cst);
      n->add_own(p, b, r->used_ns.load(std::memory_order_relaxed));
      r = n;
    }
  }
};

}  // namespace keel::ofproto

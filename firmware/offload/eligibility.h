// Eligibility — what of a datapath flow a NIC's flow tables can carry, and
// the hal rule (pattern + actions) that says it. Pure functions: the engine
// (offload.cpp) calls them when it decides and builds rules; decide()
// (offload.h) and the unit tests (tests/unit/offload_eligibility_test.cpp)
// use them without a device.
//
// Match side. A hardware rule must match no packet its megaflow would not
// (it forwards without the PMD ever seeing the packet), so every field the
// megaflow's mask touches must be one the table carries:
//   * exact-match table: the MicroKey fields (datapath/offload_hooks.h):
//     in_port, eth dst/src/type, the outer VLAN tag (TCI but DEI), IPv4/IPv6
//     src, dst, proto, tos/tclass, ttl/hop limit, "not a fragment", TCP/UDP
//     ports, ICMP/ICMPv6 type and code. An exact rule matches all of them,
//     exactly, with the values of one hot microflow (whole fields only:
//     the VLAN TCI with DEI 0; no IPv4 fragment bits when an L4 item
//     follows — see exact_pattern());
//   * masked table: the same fields with the megaflow's masks, plus TCP
//     flags and the IPv6 flow label (rte_flow's tcp and ipv6 items have
//     them); fragment matching only as "not a fragment" (frag=no).
//   Neither carries tunnel metadata, conntrack, skb_priority/skb_mark,
//   dp_hash, an inner VLAN tag, ARP or ND fields; recirculated flows
//   (recirc_id != 0) never reach the hardware's tables, which see wire
//   packets; and a vport in_port (the inner packet after tnl_pop) has no
//   hardware at all.
//
// Action side (translate_actions). The NIC does: output to one hal port
// with a flow engine (port_id), drop (the empty list or an explicit drop),
// push_vlan (of_push_vlan + of_set_vlan_vid + of_set_vlan_pcp; TPID 0x8100
// or 0x88a8), pop_vlan, and whole-field sets: Ethernet src/dst, IPv4
// src/dst/ttl and DSCP (tos mask 0xfc), IPv6 src/dst/hop limit and DSCP
// (tclass mask 0xfc), TCP/UDP src/dst. A count action is always added (the
// terse stats read it). Everything else needs the Arm cores and makes the
// flow partial (MARK + queue): lb_output, hash, recirc, tnl_push, tnl_pop,
// clone, userspace, trunc, meter, sets of ARP/SCTP/ICMP, a set with a
// partial mask, output to a vport or to a port with no flow engine, more
// than one output, an action after the output. The reason names the first
// such action.
//
// Thread-safety: pure functions on values; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "datapath/offload_hooks.h"
#include "flow/match.h"
#include "keel/hal/flow.h"
#include "offload/offload.h"

namespace keel::offload {

enum class Table : uint8_t { exact, masked };
const char* table_name(Table t);  // "exact-match", "masked"

// The first field of `match`'s mask that `t` does not carry (Open vSwitch's
// field name: "ct_state", "tunnel", "dp_hash", "tcp_flags", "arp_sha",
// ...), or nullopt when it carries every one. recirc_id and in_port are not
// reported here (decide() gives them their own reasons).
std::optional<std::string> uncarried_field(const flow::Match& match, Table t);

// The exact-match pattern of one microflow: eth [/ vlan] [/ ipv4|ipv6
// [/ tcp|udp|icmp|icmp6]], every field fully masked (VLAN DEI aside).
// nullopt (with `why`) for a key the table cannot hold exactly (an IP
// fragment; an L4 protocol with ports but no item).
std::optional<hal::FlowPattern> exact_pattern(const datapath::MicroKey& key, std::string* why = nullptr);

// The masked pattern of a megaflow (its mask as rte_flow masks); nullopt
// with `why` when the masked table can't say it (uncarried_field, a
// fragment match other than frag=no).
std::optional<hal::FlowPattern> masked_pattern(const flow::Match& match, std::string* why = nullptr);

// The microflow key a megaflow's own key gives when it is exact on every
// MicroKey field (tests, trace): not needed by the engine.

// dp actions -> hal actions.
struct ActionPlan {
  bool full = false;        // the NIC does every action
  Reason reason = Reason::ok;  // when !full: arm_action or output_vport
  std::string detail;       // the action that needs the Arm cores
  hal::FlowActions actions;    // when full: the rule's actions, count included
  uint32_t out_port = 0;    // when full and forwarding: the output port (0: drop)
};
ActionPlan translate_actions(std::span<const uint8_t> actions, const PortCapsFn& caps);

// The actions of a partial (MARK) rule: mark `mark`, then the queue the
// PMD polls (`queue` >= 0) or RSS over the port's queues, and count.
hal::FlowActions partial_actions(uint32_t mark, int queue, unsigned n_rxq);

// The MicroKey of a flow key (what the PMD would post for a packet with
// this key): tests and trace; the engine gets keys from the PMDs.
datapath::MicroKey micro_key_of(const flow::FlowKey& k);

}  // namespace keel::offload

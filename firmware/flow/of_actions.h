// OpenFlow actions — the `actions=` part of an ovs-ofctl flow, as a list of
// small structs that the rule tables store and translation (xlate) walks,
// and its text both ways:
//
//   output:2,mod_vlan_vid:10,load:0x5->NXM_NX_REG0[4..11],resubmit(,3)
//
// Representation. An OfActions is a std::vector<OfAction>; OfAction is a
// std::variant of one struct per action kind, with the arguments as values
// (ports and tables as numbers, addresses as FlowKey types, fields as
// of_fields.h ids). The empty list is `drop`.
//
// Canonical form. The text is printed the way Open vSwitch 3.1's
// `ovs-ofctl dump-flows` prints a flow (OpenFlow 1.0 + NXM, the default),
// and the parser stores what that dump would show, so that
// parse(format(x)) == x for every x the parser returns and printing a
// parsed line gives OVS's spelling:
//   * set_field of a whole field that OpenFlow 1.0 has an action for becomes
//     that action: eth_src -> mod_dl_src, ip_src -> mod_nw_src, nw_tos and
//     ip_dscp -> mod_nw_tos, tcp/udp ports -> mod_tp_src/dst, vlan_vid ->
//     mod_vlan_vid, vlan_pcp -> mod_vlan_pcp, vlan_tci -> mod_vlan_vid +
//     mod_vlan_pcp (CFI set) or strip_vlan (CFI clear);
//   * every other set_field, load, mod_nw_ttl and mod_nw_ecn becomes NXM
//     reg_loads (OfLoad): one per contiguous run of mask bits, at most 64
//     bits each, lowest bits first ("set_field:fe80::1->ipv6_src" is
//     load:0x1->NXM_NX_IPV6_SRC[0..63],load:0xfe80000000000000->NXM_NX_IPV6_SRC[64..127]);
//   * pop_vlan is strip_vlan; controller(...) with only max_len is
//     CONTROLLER:N (an OfOutput to kOfppController); dec_ttl() is dec_ttl;
//     note data is zero-padded to 6, 14, 22, ... bytes; set_tunnel with a
//     value over 32 bits is set_tunnel64.
//   Where OpenFlow 1.0 cannot carry an action at all (push_vlan,
//   goto_table) it prints as Open vSwitch prints it under OpenFlow 1.1+
//   (push_vlan:0x8100, goto_table:3). A masked set_field on a field with an
//   OpenFlow 1.0 action is a reg_load, not the 1.0 action (OVS 3.1 would
//   drop the mask there).
//
// Actions: output:P (P a number, a reserved name or a port name), a bare
// port, NORMAL FLOOD ALL IN_PORT LOCAL TABLE, CONTROLLER, controller:N,
// controller(reason=R,max_len=N,id=N), drop, resubmit:P, resubmit(P,T),
// goto_table:T, mod_vlan_vid, mod_vlan_pcp, strip_vlan, pop_vlan,
// push_vlan:0x8100|0x88a8, mod_dl_src, mod_dl_dst, mod_nw_src, mod_nw_dst,
// mod_nw_tos, mod_nw_ecn, mod_nw_ttl, mod_tp_src, mod_tp_dst,
// set_field:V[/M]->F, load:V->F[..], move:F[..]->F[..], dec_ttl,
// dec_ttl(ids), note:hex, set_tunnel, set_tunnel64,
// bundle(fields,basis,algorithm,ofport,members:P,...) (OfBundle, bundle.h;
// printed as ovs-ofctl prints it: lower-case names, `members:`, ports as
// output prints them; `slaves:` is read as `members:`), and the OpenFlow 1.1+
// instructions clear_actions, write_actions(A,...) and write_metadata:V[/M]
// (in OVS's order: actions, clear_actions, write_actions, write_metadata,
// goto_table; each instruction once). Action names are
// case-insensitive (as in OVS); field names are not. Values are decimal or
// 0x-hex. Other actions of Open vSwitch (ct, group, learn, ...) are refused
// by name ("unsupported action 'ct' at column 9").
//
// Errors name the token and its column: "unknown action 'foo' at column 12",
// "out-of-range value '4096' at column 14: VLAN VID must be 0..4095". The
// parser also refuses what ovs-ofctl refuses while parsing: drop with other
// actions, an action after goto_table, resubmit with neither port nor table,
// a load value wider than its subfield, a move between subfields of
// different widths, set_field/load into a read-only field.
//
// check_of_actions() is the consistency check Open vSwitch runs when a flow
// is added (ofpacts_check): prerequisites of what the actions write, given
// the match and what earlier actions did to the flow (push_vlan makes a tag
// present, strip_vlan removes it), output ports, goto_table. See its comment.
//
// Thread-safety: value types and stateless functions; the callbacks in the
// options are called on the caller's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"
#include "flow/bundle.h"
#include "flow/flow_key.h"
#include "flow/match.h"
#include "flow/of_fields.h"
#include "flow/of_match_syntax.h"

namespace keel::flow {

// Packet-in reasons of controller(reason=...), OpenFlow's numbering.
enum class OfPacketInReason : uint8_t {
  no_match = 0,
  action = 1,
  invalid_ttl = 2,
  action_set = 3,
  group = 4,
  packet_out = 5,
};

inline constexpr uint8_t kOfTableNone = 255;  // resubmit: "this table"

// output:P, NORMAL, FLOOD, ALL, IN_PORT, LOCAL, TABLE, CONTROLLER:N.
struct OfOutput {
  uint32_t port = 0;     // OpenFlow 1.0 port number; reserved ports are kOfpp*
  uint16_t max_len = 0;  // kOfppController only: bytes sent (65535: all); else 0
  bool operator==(const OfOutput&) const = default;
};
// output:FIELD[bits] (Open vSwitch's output_reg): output to the port the
// subfield holds when the packet is translated; a value above 0xffff
// outputs nothing. Not in an action set (ovs-vswitchd refuses it there).
struct OfOutputReg {
  OfSubfield src;
  bool operator==(const OfOutputReg&) const = default;
};
// controller(...) with a reason other than `action` or an id.
struct OfController {
  uint16_t max_len = 0xffff;
  uint16_t id = 0;
  OfPacketInReason reason = OfPacketInReason::action;
  bool operator==(const OfController&) const = default;
};
struct OfResubmit {
  uint32_t port = kOfppInPort;   // kOfppInPort: the packet's in_port
  uint8_t table = kOfTableNone;  // kOfTableNone: the current table
  bool operator==(const OfResubmit&) const = default;
};
struct OfGotoTable {
  uint8_t table = 0;
  bool operator==(const OfGotoTable&) const = default;
};
// mod_vlan_vid: sets the VID, pushing an 802.1Q tag first if there is none.
struct OfSetVlanVid {
  uint16_t vid = 0;  // 0..4095
  // Parsed from set_field: the prerequisite Open vSwitch checks for that
  // field (OfPrereq::none: the OpenFlow 1.0 action, which has none).
  // Not part of the value: it prints as the OpenFlow 1.0 action.
  OfPrereq need = OfPrereq::none;
  // With the OfSetVlanPcp after it: parsed from set_field:V->vlan_tci (CFI
  // set); an OpenFlow 1.1+ flow stores that set_field. Not part of the value.
  bool from_tci = false;
  bool operator==(const OfSetVlanVid& o) const { return vid == o.vid; }
};
// mod_vlan_pcp: sets the PCP, pushing a tag first if there is none.
struct OfSetVlanPcp {
  uint8_t pcp = 0;  // 0..7
  // Parsed from set_field: the prerequisite Open vSwitch checks for that
  // field (OfPrereq::none: the OpenFlow 1.0 action, which has none).
  // Not part of the value: it prints as the OpenFlow 1.0 action.
  OfPrereq need = OfPrereq::none;
  bool operator==(const OfSetVlanPcp& o) const { return pcp == o.pcp; }
};
struct OfStripVlan {
  // Parsed from set_field:0->vlan_tci: no prerequisite, and in an OpenFlow
  // 1.1+ flow it is stored as that set_field (of_actions_as_stored()). Not
  // part of the value.
  bool from_tci = false;
  bool operator==(const OfStripVlan&) const { return true; }
};
struct OfPushVlan {
  uint16_t tpid = 0x8100;  // 0x8100 or 0x88a8
  bool operator==(const OfPushVlan&) const = default;
};
struct OfSetEthSrc {
  EthAddr mac{};
  bool operator==(const OfSetEthSrc&) const = default;
};
struct OfSetEthDst {
  EthAddr mac{};
  bool operator==(const OfSetEthDst&) const = default;
};
struct OfSetIpv4Src {
  be32 addr = 0;
  // Parsed from set_field: the prerequisite Open vSwitch checks for that
  // field (OfPrereq::none: the OpenFlow 1.0 action, which has none).
  // Not part of the value: it prints as the OpenFlow 1.0 action.
  OfPrereq need = OfPrereq::none;
  bool operator==(const OfSetIpv4Src& o) const { return addr == o.addr; }
};
struct OfSetIpv4Dst {
  be32 addr = 0;
  // Parsed from set_field: the prerequisite Open vSwitch checks for that
  // field (OfPrereq::none: the OpenFlow 1.0 action, which has none).
  // Not part of the value: it prints as the OpenFlow 1.0 action.
  OfPrereq need = OfPrereq::none;
  bool operator==(const OfSetIpv4Dst& o) const { return addr == o.addr; }
};
// mod_nw_tos: the DSCP bits of the TOS byte, in place (a multiple of 4).
struct OfSetIpDscp {
  uint8_t tos = 0;
  // Parsed from set_field: the prerequisite Open vSwitch checks for that
  // field (OfPrereq::none: the OpenFlow 1.0 action, which has none).
  // Not part of the value: it prints as the OpenFlow 1.0 action.
  OfPrereq need = OfPrereq::none;
  bool operator==(const OfSetIpDscp& o) const { return tos == o.tos; }
};
// mod_tp_src / mod_tp_dst: the TCP, UDP or SCTP port (host order).
struct OfSetL4Src {
  uint16_t port = 0;
  // Parsed from set_field: the prerequisite Open vSwitch checks for that
  // field (OfPrereq::none: the OpenFlow 1.0 action, which has none).
  // Not part of the value: it prints as the OpenFlow 1.0 action.
  OfPrereq need = OfPrereq::none;
  bool operator==(const OfSetL4Src& o) const { return port == o.port; }
};
struct OfSetL4Dst {
  uint16_t port = 0;
  // Parsed from set_field: the prerequisite Open vSwitch checks for that
  // field (OfPrereq::none: the OpenFlow 1.0 action, which has none).
  // Not part of the value: it prints as the OpenFlow 1.0 action.
  OfPrereq need = OfPrereq::none;
  bool operator==(const OfSetL4Dst& o) const { return port == o.port; }
};
// load:VALUE->DST: NXM reg_load of at most 64 bits (dst.n_bits <= 64, value
// fits in dst.n_bits).
struct OfLoad {
  OfSubfield dst;
  uint64_t value = 0;
  // Stored for set_field:V->vlan_tci in an OpenFlow 1.1+ flow
  // (of_actions_as_stored()): an OpenFlow 1.0 reply carries it as
  // mod_vlan_vid + mod_vlan_pcp, or strip_vlan (Open vSwitch's
  // set_field_to_legacy_openflow()). Not part of the value.
  bool from_set_field = false;
  // Another 64-bit part of the same write as the OfLoad before it (a
  // set_field or load to tun_metadataN, which Open vSwitch carries as one
  // NXAST_REG_LOAD2 and prints as one set_field). Not part of the value.
  bool continues = false;
  bool operator==(const OfLoad& o) const { return dst == o.dst && value == o.value; }
};
// move:SRC->DST (src.n_bits == dst.n_bits).
struct OfMove {
  OfSubfield src;
  OfSubfield dst;
  bool operator==(const OfMove&) const = default;
};
// dec_ttl, or dec_ttl(id,...): controller ids told when the TTL runs out.
struct OfDecTtl {
  std::vector<uint16_t> controller_ids;  // empty: plain dec_ttl (controller id 0)
  bool operator==(const OfDecTtl&) const = default;
};
struct OfNote {
  std::vector<uint8_t> data;  // 6, 14, 22, ... bytes (zero-padded)
  bool operator==(const OfNote&) const = default;
};
// set_tunnel / set_tunnel64: sets tun_id.
struct OfSetTunnel {
  uint64_t tun_id = 0;
  bool wide = false;  // prints as set_tunnel64 (always, when tun_id > 0xffffffff)
  bool operator==(const OfSetTunnel&) const = default;
};

// --- OpenFlow 1.1+ instructions -------------------------------------------
//
// They are list members like the actions, in the order Open vSwitch requires
// (and prints): the apply-actions, then clear_actions, write_actions(...),
// write_metadata, goto_table, each at most once.

struct OfActionSet;  // below: the actions inside write_actions(...)
// write_actions(A,...): adds A... to the packet's action set, which runs when
// the pipeline ends (OVS's ofpacts_execute_action_set() order). Never empty:
// write_actions() and write_actions(drop) parse to nothing, as OVS stores them.
struct OfWriteActions {
  std::shared_ptr<const OfActionSet> set;  // immutable, never null
  bool operator==(const OfWriteActions& o) const;
};
// clear_actions: empties the action set.
struct OfClearActions {
  bool operator==(const OfClearActions&) const = default;
};
// write_metadata:V[/M]: metadata = (metadata & ~M) | (V & M).
struct OfWriteMetadata {
  uint64_t value = 0;
  uint64_t mask = UINT64_MAX;
  bool operator==(const OfWriteMetadata&) const = default;
};

using OfAction = std::variant<OfOutput, OfOutputReg, OfController, OfResubmit, OfGotoTable, OfSetVlanVid, OfSetVlanPcp,
                              OfStripVlan, OfPushVlan, OfSetEthSrc, OfSetEthDst, OfSetIpv4Src, OfSetIpv4Dst,
                              OfSetIpDscp, OfSetL4Src, OfSetL4Dst, OfLoad, OfMove, OfDecTtl, OfNote,
                              OfSetTunnel, OfWriteActions, OfClearActions, OfWriteMetadata, OfBundle>;
using OfActions = std::vector<OfAction>;

struct OfActionSet {
  OfActions actions;  // as written (printed in this order); run in action-set order
};
inline bool OfWriteActions::operator==(const OfWriteActions& o) const {
  return set == o.set || (set && o.set && set->actions == o.set->actions);
}
inline OfWriteActions make_write_actions(OfActions a) {
  return OfWriteActions{std::make_shared<const OfActionSet>(OfActionSet{std::move(a)})};
}

// ofpacts_execute_action_set(): the action list an action set runs, in
// OpenFlow 1.1+'s order: strip_vlan, push_vlan, dec_ttl (the last of each),
// then every set/load/move/set_tunnel/mod_vlan_* in the order written, then
// one final action: the last output (an output to any port, including
// CONTROLLER) unless a resubmit, which OVS ranks before output, is later in
// its ranking (resubmit < output). Nothing runs without a final action.
OfActions of_action_set_list(const OfActions& set);

// Parses the text after "actions=". `column` is the 1-based column of
// text[0] in the whole line (OfFlow::actions_column) so that errors point
// into the line; options.port_number resolves port names.
Result<OfActions> parse_of_actions(std::string_view text, const OfParseOptions& options = {},
                                   size_t column = 1);

// As dump-flows prints them; "drop" for the empty list. options.port_name
// names ports below 0xff00.
std::string format_of_actions(const OfActions& actions, const OfFormatOptions& options = {});
// One action.
std::string format_of_action(const OfAction& action, const OfFormatOptions& options = {});

// The checks Open vSwitch makes when a flow with these actions and this
// match is added to table `table_id` (255: unknown, skips the table check):
//   * output: a port below 0xff00 or IN_PORT, TABLE, NORMAL, FLOOD, ALL,
//     CONTROLLER, LOCAL (not ANY/NONE, not 0xff00-0xfff7);
//   * goto_table: only last, and to a later table;
//   * mod_nw_*, mod_tp_*, dec_ttl, strip_vlan: see below;
//     load and move need their fields' prerequisites (ip_src: ip, tcp_dst:
//     tcp, vlan_pcp: a VLAN tag, ...; a load into vlan_vid needs a tag too,
//     as OVS's set_field check, a move into it does not), a writable
//     destination and bit ranges inside the fields;
//   * push_vlan: at most two tags;
//   * bundle: every member NONE or a valid output port (as output), never
//     CONTROLLER (bundle_check()).
// The flow is followed through the list as OVS does: push_vlan,
// mod_vlan_vid and mod_vlan_pcp make a tag present, strip_vlan pops one,
// a load into vlan_tci sets it.
// What it accepts is what `ovs-ofctl add-flow` of OVS 3.1 accepts (observed;
// the table in tests/unit/of_actions_test.cpp): keel has no version
// negotiation, so a flow OpenFlow 1.0 can carry is checked as ovs-ofctl's
// default protocol checks it, and a flow only OpenFlow 1.1+ carries
// (instructions, push_vlan) as `-O OpenFlow13` does:
//   * OpenFlow 1.0: mod_nw_src/dst, mod_nw_tos, mod_tp_src/dst, dec_ttl and
//     strip_vlan have no prerequisites (on a packet without the header they
//     do nothing: mod_nw_src on an ARP flow is a no-op);
//   * OpenFlow 1.1+: those actions need their headers in the match (OVS
//     narrows such flows to OpenFlow 1.0, which can't carry the flow);
//   * inside write_actions: mod_nw_src/dst need ip and mod_nw_tos ip or ipv6
//     (they are set_fields there), the others are not checked;
//   * set_field always needs its field's prerequisites (set_field into
//     vlan_vid or vlan_pcp needs a tag), however it is printed (OfSet*::need).
Status check_of_actions(const OfActions& actions, const Match& match, uint8_t table_id);

// What Open vSwitch stores for a flow it was sent, and so how it behaves: a
// flow OpenFlow 1.0 can carry is kept as is (mod_vlan_vid and mod_vlan_pcp
// push a tag only when the packet has none); in a flow only OpenFlow 1.1+
// carries (instructions, push_vlan), OVS sends a mod_vlan_vid/mod_vlan_pcp
// applied where the match, as the earlier actions left it, has no tag as
// push_vlan:0x8100 followed by the set (encode_SET_VLAN_VID()), also
// inside write_actions: on a tagged packet that pushes a second tag.
// Call after check_of_actions() succeeded; the rule tables store this.
OfActions of_actions_as_stored(const OfActions& actions, const Match& match);

// For translation: the field write an action performs, if it is a plain
// field write (mod_dl_*, mod_nw_src/dst, mod_nw_tos, mod_tp_*, load,
// set_tunnel): field, value and mask as write_field() takes them. mod_tp_*
// use tcp_src/tcp_dst (every L4 protocol's port lives in tp_src/tp_dst).
struct OfFieldWrite {
  OfFieldId field;
  OfValue value;
  OfValue mask;
};
std::optional<OfFieldWrite> of_action_field_write(const OfAction& action);

}  // namespace keel::flow

// OpenFlow match syntax — a Match as `ovs-ofctl add-flow` reads it and
// `ovs-ofctl dump-flows` prints it, both ways, with the rule's own keys:
//
//   priority=100,udp,in_port=1,nw_dst=10.1.0.0/16,tp_dst=1008,actions=output:2
//
// keel's `add-flow` and running-config use this. A line is a list of
// `key=value` (or `key:value`) and bare shorthand words separated by commas
// or white space; `actions=` (or `action=`) ends the match and everything
// after it is the actions text, returned unparsed (OpenFlow actions are
// parsed elsewhere). Whether a line must or must not have actions, and
// whether a cookie mask is allowed (not in an add, as ovs-ofctl says), is
// the caller's rule: the parser reports what the line has.
//
// Match fields (OVS names and aliases; values decimal or 0x-hex; "/mask"
// where Open vSwitch allows one):
//   in_port (number or LOCAL, IN_PORT, NORMAL, ...)   metadata  reg0..reg7
//   pkt_mark recirc_id dp_hash skb_priority
//   tun_id (tunnel_id) tun_src tun_dst tun_ipv6_src tun_ipv6_dst tun_tos
//   tun_ttl tun_flags tun_metadata0..7 (value[/mask] in hex, or a bare
//   name: present with any value; flow/tun_metadata.h has the layout)
//   dl_src dl_dst (eth_src eth_dst) dl_type (eth_type) dl_vlan dl_vlan_pcp
//   vlan_tci
//   nw_src nw_dst (ip_src ip_dst) nw_proto (ip_proto) nw_tos nw_ecn (ip_ecn)
//   ip_dscp nw_ttl ip_frag (nw_frag)
//   tp_src tp_dst, tcp_src tcp_dst udp_src udp_dst sctp_src sctp_dst,
//   tcp_flags (+syn-ack, syn|ack, 0x002/0x012)
//   icmp_type icmp_code icmpv6_type icmpv6_code
//   arp_spa arp_tpa arp_sha arp_tha arp_op
//   ipv6_src ipv6_dst ipv6_label nd_target nd_sll nd_tll
// Shorthands: ip ipv4 ip4 ipv6 ip6 icmp icmp6 tcp tcp6 udp udp6 sctp sctp6
// arp rarp (and `eth`, which is every keel packet).
// Rule keys (RuleMeta): priority table cookie[/mask] idle_timeout
// hard_timeout importance send_flow_rem check_overlap reset_counts
// no_packet_counts no_byte_counts. The statistics dump-flows prints
// (duration n_packets n_bytes idle_age hard_age) are read and ignored, so a
// dump-flows line parses.
//
// Prerequisites are checked after the whole line is read (so order does not
// matter), as Open vSwitch's meta-flow prerequisites: nw_src needs ip or arp,
// tp_dst needs tcp, udp or sctp (and not ip_frag=later), nd_target needs
// icmp6 with icmp_type 135 or 136, and so on. (ovs-ofctl itself leaves the
// check to the switch, which refuses the flow-mod; keel refuses the line.)
// A key given twice takes its last value, as in ovs-ofctl.
//
// Values are stored as match.h describes: icmp_type=8 is tp_src=htons(8)
// with mask htons(0x00ff), the mask a megaflow has, so a rule and its
// megaflow compare equal.
//
// Printing follows match_format(): priority, pkt_mark, recirc_id, dp_hash,
// skb_priority, the shorthand (tcp, udp6, arp, ...), registers, tunnel,
// metadata, in_port, VLAN, dl_src, dl_dst, dl_type, L3, L4; a wildcarded
// field is left out. Round trip: for every result of this parser,
// parse(format(x)) == x. Fields the syntax cannot carry (conntrack,
// tunnel UDP ports, ...) are not printed. tun_metadataN prints as
// tun_metadata_match_format(): after tun_flags, `tun_metadataN=0xV[/0xM]`,
// `=NP` for "not present", the bare name for "present, any value".
//
// Thread-safety: stateless functions; the callbacks in the options are
// called on the caller's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "flow/match.h"

namespace keel::flow {

class TlvTable;  // flow/tun_metadata.h

// OpenFlow 1.0 reserved port numbers (Open vSwitch's ofp_port_t values).
inline constexpr uint32_t kOfppMax = 0xff00;  // ports below this are physical/logical
inline constexpr uint32_t kOfppInPort = 0xfff8;
inline constexpr uint32_t kOfppTable = 0xfff9;
inline constexpr uint32_t kOfppNormal = 0xfffa;
inline constexpr uint32_t kOfppFlood = 0xfffb;
inline constexpr uint32_t kOfppAll = 0xfffc;
inline constexpr uint32_t kOfppController = 0xfffd;
inline constexpr uint32_t kOfppLocal = 0xfffe;
inline constexpr uint32_t kOfppNone = 0xffff;  // also "ANY"

inline constexpr uint16_t kOfDefaultPriority = 32768;

// The parts of a flow line that are not match fields.
struct RuleMeta {
  uint16_t priority = kOfDefaultPriority;
  std::optional<uint8_t> table;  // table=N (0..254); absent: the caller's default
  bool has_cookie = false;       // cookie=V[/M]
  uint64_t cookie = 0;
  uint64_t cookie_mask = 0;  // all-ones when no mask was given
  uint16_t idle_timeout = 0, hard_timeout = 0, importance = 0;
  // Flow-mod flags, as words in the line.
  bool send_flow_rem = false, check_overlap = false, reset_counts = false;
  bool no_packet_counts = false, no_byte_counts = false;

  bool operator==(const RuleMeta&) const = default;
};

// One line of ovs-ofctl flow syntax.
struct OfFlow {
  Match match;
  RuleMeta meta;
  bool has_actions = false;   // the line had "actions="
  std::string actions;        // the text after "actions=", unparsed, trimmed
  size_t actions_column = 0;  // 1-based column of that text in the input
};

struct OfParseOptions {
  // Resolves a port name in in_port=; reserved names (LOCAL, ...) and
  // numbers are handled without it.
  std::function<std::optional<uint32_t>(std::string_view)> port_number;
  // The bridge's TLV map (ofproto/tlv_map.h). With one, tun_metadataN must
  // be mapped and its value/mask fit the mapped length (OVS's switch-side
  // check); without one, any value up to the slot's 32 bytes is taken.
  // (ofproto::switch_tlv_maps().table(bridge) gives a bridge's snapshot.)
  std::shared_ptr<const TlvTable> tlv;
};

struct OfFormatOptions {
  // Names a port number for in_port=; nullopt (or no callback) prints the
  // number, or the reserved name (LOCAL, ...).
  std::function<std::optional<std::string>(uint32_t)> port_name;
  // ICMP type/code as the 16-bit tp_src/tp_dst they live in: exact only
  // under 0xffff, else value/mask in hex — how Open vSwitch's match_format()
  // prints a megaflow (ofproto/trace's Megaflow:), whose ICMP masks are
  // 0x00ff ("icmp_type=0x8/0xff"). Off: the low byte decides (rules).
  bool icmp_16bit = false;
  // The bridge's TLV map: a tun_metadataN mask of all ones over the mapped
  // length prints as exact (as OVS, which knows the length); without one,
  // only a mask over the whole slot does.
  std::shared_ptr<const TlvTable> tlv;
};

// Parses a whole flow line: match fields, rule keys, and "actions=...".
Result<OfFlow> parse_of_flow(std::string_view text, const OfParseOptions& options = {});

// Parses match fields only: rule keys and actions are errors.
Result<Match> parse_of_match(std::string_view text, const OfParseOptions& options = {});

// The match as dump-flows prints it ("tcp,in_port=1,nw_dst=10.0.0.0/8,tp_dst=80");
// empty for a match-everything Match.
std::string format_of_match(const Match& match, const OfFormatOptions& options = {});

// A flow line that parse_of_flow() reads back: rule keys (cookie, table,
// timeouts, importance, flags), priority, the match, then ",actions=...".
std::string format_of_flow(const OfFlow& flow, const OfFormatOptions& options = {});

}  // namespace keel::flow

// Datapath flow syntax — a Match as Open vSwitch 3.1 writes a datapath flow
// key and mask (`ovs-appctl dpctl/dump-flows`, `dpctl/add-flow`), both ways:
//
//   recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth(src=02:00:00:00:00:01,
//   dst=02:00:00:00:00:02),eth_type(0x0800),ipv4(src=10.0.0.1,
//   dst=10.0.1.0/255.255.255.0,proto=17,frag=no),udp(src=1000,dst=2000)
//
// keel's `flow-dump` prints megaflows this way and `trace`/`add-flow` on the
// datapath read them. The key is a list of attributes, each `name(...)`;
// a field inside is `field=value` or `field=value/mask`. Printing follows
// odp_flow_format(): attributes in the order Open vSwitch emits them
// (skb_priority, tunnel, skb_mark, recirc_id, dp_hash, in_port, eth, VLAN
// levels, eth_type, L3, L4, tcp_flags, nd), numbers in the same bases, a
// field or attribute that is fully wildcarded left out — or, with
// DpFormatOptions::verbose (`dump-flows -m`), printed as `value/0`.
//
// Attributes and where they land in the FlowKey:
//   recirc_id dp_hash skb_priority skb_mark(pkt_mark) in_port   u32, host order
//   tunnel(tun_id= src= dst= ipv6_src= ipv6_dst= tos= ttl= tp_src= tp_dst=
//          geneve({class=0xffff,type=0x80,len=4,0xa[/0xf]}...) flags(df|csum|key|oam))
//     geneve(): the raw Geneve options of tun_opts/tun_opt_len
//     (flow/tun_metadata.h's raw form), printed as format_geneve_opts():
//     each option's class/type/len and data left out when masked to zero;
//     printed whenever mask.tun_opt_len is set (0xff: a Geneve packet's
//     megaflow), so a Geneve packet without options shows geneve(). Parsing
//     takes scan_geneve()'s syntax; an option without data has its data
//     wildcarded (OVS would match zeros), so the printed text reads back.
//   eth(src= dst=)   eth_type(0xNNNN)
//   eth_type(0x8100|0x88a8),vlan(vid= pcp= cfi=),encap(...)   -> vlans[0],
//     and one more level inside encap for QinQ -> vlans[1]; the innermost
//     eth_type is dl_type (as in Open vSwitch's struct flow).
//   ipv4(src= dst= proto= tos= ttl= frag=no|first|later)
//   ipv6(src= dst= label= proto= tclass= hlimit= frag=)
//   tcp(src= dst=) udp(..) sctp(..) tcp_flags(syn|ack or +syn-ack)
//   icmp(type= code=) icmpv6(type= code=) -> low byte of tp_src/tp_dst
//   arp(sip= tip= op= sha= tha=)  nd(target= sll= tll=)
// Also read and ignored, so that a whole dump-flows line parses: a leading
// `ufid:...`, `packet_type(ns=0,id=0)` (Ethernet, the only packet type keel
// has), conntrack attributes that are fully wildcarded (`ct_state(0/0)` from
// -m), and the statistics after the key (`packets:`, `bytes:`, `used:`,
// `flags:`, `dp:`, `offloaded:`, `dp-extra-info:`). The key ends at
// `actions:`; the text after it is returned unparsed (datapath actions are
// parsed elsewhere), up to a `dp-extra-info:` that -m prints after it.
//
// Prerequisites are checked as Open vSwitch's odp_flow_key_to_flow() does,
// because a field's attribute is chosen from them when printing: ipv4()
// needs eth_type(0x0800), tcp() needs ipv4/ipv6 with proto=6 and not
// frag=later, nd() needs icmpv6 type 135/136 with code 0, and so on.
// Attributes may come in any order inside a level; each at most once.
//
// Printing details: keel's packets are Ethernet, so packet_type(ns=0,id=0)
// is always printed (after in_port, where odp_flow_format() puts it) and
// eth(...) is left out when both MACs are wildcarded, as Open vSwitch does
// for a key with a packet type. Verbose also prints the conntrack
// attributes keel does not match, `ct_state(0/0),ct_zone(0/0),ct_mark(0/0),
// ct_label(0/0)`, in Open vSwitch's place. Extensions that Open vSwitch's
// parser does not take but keel's printer may need: a mask on recirc_id,
// `cfi=0/0` in vlan() when the CFI bit is wildcarded, and an IPv4/IPv6 mask
// written as a prefix length (`dst=10.0.0.0/8`) on input.
//
// Values under masks: the key printed may hold bits outside the mask (a
// datapath flow's unmasked key, Megaflow::shown_key): they are printed as
// they are, `ipv4(src=10.0.0.1/0.0.0.0,dst=10.1.2.3/255.0.0.0)`, as
// odp_flow_format() prints a flow's key under its mask, and the attribute
// structure follows the key's values (the L4 attribute of the key's
// nw_proto even when nw_proto is wildcarded: `udp(src=1024/0,dst=4000/0)`).
// The parser keeps the values as written too (DpFlow::key_as_written) and
// checks prerequisites on them, so that a -m line reads back; a matched L4
// field still needs its prerequisites matched exactly.
//
// Round trip: for every Match this parser produces, parse(format(m)) == m,
// verbose or not (and for a key with bits outside its mask, the parse of its
// text is the same masked Match, key_as_written the same key). Fields of a
// Match the syntax cannot carry (conntrack, GBP, MPLS, ...) are not printed.
//
// Thread-safety: stateless functions; the callbacks in the options are
// called on the caller's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "flow/match.h"

namespace keel::flow {

struct DpParseOptions {
  // Resolves `in_port(name)`; without it only numbers are accepted.
  std::function<std::optional<uint32_t>(std::string_view)> port_number;
};

struct DpFormatOptions {
  bool verbose = false;  // like `dpctl/dump-flows -m`: wildcarded fields as value/0
  // Names an exactly matched in_port; nullopt (or no callback) prints the number.
  std::function<std::optional<std::string>(uint32_t)> port_name;
  // 0: keel's own VLAN levels, from the mask (what parse_dp_flow() reads
  // back exactly). 1 or 2: a megaflow as Open vSwitch's dpctl/dump-flows
  // shows it under that vlan-limit — levels from the tags in the key, an
  // untagged packet without vlan(), a tag cut short as
  // eth_type(0x8100),vlan(...),encap() (flow-dump).
  unsigned ovs_vlan_limit = 0;
};

// A datapath flow as written on one line: key/mask, then maybe actions.
struct DpFlow {
  Match match;                // key & mask
  FlowKey key_as_written{};   // the key's values as written, bits outside the mask too
  std::string ufid;           // "ufid:<uuid>" if the line started with one, else empty
  bool has_actions = false;   // the line had "actions:"
  std::string actions;        // the text after "actions:", unparsed, trimmed
  size_t actions_column = 0;  // 1-based column of that text in the input
};

// Parses a key/mask, optionally followed by dump-flows statistics and
// "actions:<text>" (separated by ',' or white space).
Result<DpFlow> parse_dp_flow(std::string_view text, const DpParseOptions& options = {});

// Parses a key/mask only: statistics and actions are errors.
Result<Match> parse_dp_match(std::string_view text, const DpParseOptions& options = {});

// The key/mask as dpctl/dump-flows prints it.
std::string format_dp_match(const Match& match, const DpFormatOptions& options = {});

// format_dp_match(), then ", actions:<actions>" when the flow has actions.
std::string format_dp_flow(const DpFlow& flow, const DpFormatOptions& options = {});

}  // namespace keel::flow

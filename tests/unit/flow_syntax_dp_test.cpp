// Datapath flow syntax (dpctl/dump-flows): every attribute, masks, verbose
// (-m) output, whole dump-flows lines, round trips and error messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "flow/dp_flow_syntax.h"
#include "flow/flow_text.h"
#include "flow/of_match_syntax.h"

using namespace keel::flow;
using keel::flow::text::hton16;
using keel::flow::text::hton32;
using keel::flow::text::hton64;

namespace {

Match parse_ok(const std::string& s) {
  auto r = parse_dp_match(s);
  INFO("input: " << s);
  INFO("error: " << r.status().message());
  REQUIRE(r.ok());
  return *r;
}

std::string parse_err(const std::string& s) {
  auto r = parse_dp_match(s);
  INFO("input: " << s);
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

// parse(s) prints back as s, and print -> parse gives the same match, in
// both the terse and the verbose form.
void check_canonical(const std::string& s) {
  Match m = parse_ok(s);
  CHECK(format_dp_match(m) == s);
  Match again = parse_ok(format_dp_match(m));
  CHECK(again == m);
  DpFormatOptions verbose;
  verbose.verbose = true;
  std::string v = format_dp_match(m, verbose);
  INFO("verbose: " << v);
  CHECK(parse_ok(v) == m);
}

const char* kBriefExample =
    "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth(src=02:00:00:00:00:01,dst=02:00:00:00:00:02),"
    "eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.0.1.0/255.255.255.0,proto=17,frag=no),udp(src=1000,dst=2000)";

}  // namespace

TEST_CASE("dp: the dump-flows example parses into the right fields and prints back") {
  Match m = parse_ok(kBriefExample);
  CHECK(m.key.recirc_id == 0);
  CHECK(m.mask.recirc_id == 0xffffffff);
  CHECK(m.key.in_port == 1);
  CHECK(m.mask.in_port == 0xffffffff);
  CHECK(m.key.dl_src == EthAddr{{2, 0, 0, 0, 0, 1}});
  CHECK(m.key.dl_dst == EthAddr{{2, 0, 0, 0, 0, 2}});
  CHECK(m.key.dl_type == hton16(0x0800));
  CHECK(m.mask.dl_type == 0xffff);
  CHECK(m.key.nw_src == hton32(0x0a000001));
  CHECK(m.mask.nw_src == 0xffffffff);
  CHECK(m.key.nw_dst == hton32(0x0a000100));
  CHECK(m.mask.nw_dst == hton32(0xffffff00));
  CHECK(m.key.nw_proto == 17);
  CHECK(m.mask.nw_frag == (kFragAny | kFragLater));
  CHECK(m.key.nw_frag == 0);
  CHECK(m.key.tp_src == hton16(1000));
  CHECK(m.key.tp_dst == hton16(2000));
  CHECK(m.mask.tp_dst == 0xffff);
  CHECK(m.mask.nw_tos == 0);
  CHECK(m.mask.nw_ttl == 0);
  CHECK(format_dp_match(m) == kBriefExample);
}

TEST_CASE("dp: verbose (-m) prints wildcarded fields as /0 and reads back") {
  Match m = parse_ok(kBriefExample);
  DpFormatOptions o;
  o.verbose = true;
  CHECK(format_dp_match(m, o) ==
        "skb_priority(0/0),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),ct_mark(0/0),ct_label(0/0),"
        "recirc_id(0),dp_hash(0/0),in_port(1),packet_type(ns=0,id=0),"
        "eth(src=02:00:00:00:00:01,dst=02:00:00:00:00:02),eth_type(0x0800),"
        "ipv4(src=10.0.0.1,dst=10.0.1.0/255.255.255.0,proto=17,tos=0/0,ttl=0/0,frag=no),"
        "udp(src=1000,dst=2000)");
  CHECK(parse_ok(format_dp_match(m, o)) == m);
}

TEST_CASE("dp: canonical lines for every attribute print back unchanged") {
  // Long lines are split into adjacent literals on purpose.
  // NOLINTBEGIN(bugprone-suspicious-missing-comma)
  const std::vector<std::string> lines = {
      // metadata, hex as %#x, masks
      "skb_priority(0x5),skb_mark(0x10/0xff),recirc_id(0x1),dp_hash(0xab/0xff),in_port(3),packet_type(ns=0,"
      "id=0)",
      "in_port(1/0xff),packet_type(ns=0,id=0)",
      "recirc_id(0x2),dp_hash(0/0xf),packet_type(ns=0,id=0)",
      // tunnel, IPv4 and IPv6 underlays, flags both ways
      "tunnel(tun_id=0x5,src=172.31.1.1,dst=172.31.1.100,ttl=64,tp_dst=4789,flags(-df-csum+key)),"
      "recirc_id(0),in_port(3),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no)",
      "tunnel(tun_id=0x0/0xff,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::/ffff:ffff::,tos=0x10,ttl=64/0xf0,"
      "tp_src=768/0xff00,flags(df|csum|key)),in_port(1),packet_type(ns=0,id=0)",
      "tunnel(src=10.0.0.0/255.255.255.0,flags(0)),packet_type(ns=0,id=0)",
      "tunnel(flags(+oam)),packet_type(ns=0,id=0)",
      // Ethernet with masks
      "packet_type(ns=0,id=0),eth(src=02:00:00:00:00:00/ff:00:00:00:00:00,"
      "dst=01:00:00:00:00:00/01:00:00:00:00:00)",
      "packet_type(ns=0,id=0),eth(dst=ff:ff:ff:ff:ff:ff),eth_type(0x88cc)",
      "packet_type(ns=0,id=0),eth_type(0x0800/0xff00)",
      // VLAN, QinQ, partial VLAN masks, CFI
      "in_port(1),packet_type(ns=0,id=0),eth(src=00:00:00:00:00:01,dst=ff:ff:ff:ff:ff:ff),eth_type(0x8100),"
      "vlan(vid=10,pcp=0),"
      "encap(eth_type(0x0800),ipv4(src=10.0.0.1,proto=6,frag=no),tcp(dst=80))",
      "packet_type(ns=0,id=0),eth_type(0x88a8),vlan(vid=100),encap(eth_type(0x8100),vlan(vid=10,pcp=3),"
      "encap(eth_type(0x0800),ipv4(frag=no)))",
      "packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=16/0xff0,pcp=4/0x4),encap(eth_type(0x86dd))",
      "packet_type(ns=0,id=0),eth_type(0x8100),vlan(),encap()",
      "packet_type(ns=0,id=0),eth_type(0x8100),vlan(cfi=0),encap()",
      "packet_type(ns=0,id=0),vlan(vid=5,cfi=0/0),encap(eth_type(0x0806))",
      "packet_type(ns=0,id=0),eth_type(0x8100)",
      // IPv4 / IPv6 fields
      "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(src=1.2.3.4,dst=5.6.7.0/255.255.255.128,proto=47,"
      "tos=0x4/0xfc,ttl=64/0xf0,"
      "frag=later)",
      "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(tos=0)",
      "packet_type(ns=0,id=0),eth_type(0x86dd),ipv6(src=2001:db8::1,dst=2001:db8::/ffff:ffff::,label=0x12345,"
      "proto=17,"
      "tclass=0x10,hlimit=64,frag=first),udp(src=53)",
      "packet_type(ns=0,id=0),eth_type(0x86dd),ipv6(label=0/0xff,proto=132,frag=no),sctp(src=16/0xfff0,"
      "dst=2)",
      "packet_type(ns=0,id=0),eth_type(0x86dd),ipv6(src=::ffff:1.2.3.4)",
      // L4
      "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(proto=6,frag=no),tcp(src=16/0xfff0,dst=80),"
      "tcp_flags(+syn-ack)",
      "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(proto=6),tcp_flags(syn|ack)",
      "packet_type(ns=0,id=0),eth_type(0x86dd),ipv6(proto=6),tcp(dst=443),tcp_flags(0)",
      "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(proto=6),"
      "tcp_flags(fin|syn|rst|psh|ack|urg|ece|cwr|ns|[200]|[400]|[800])",
      "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(proto=17,frag=first),udp(dst=4789)",
      "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(proto=132),sctp(src=9)",
      "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(proto=1,frag=no),icmp(type=8,code=0)",
      "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(proto=1),icmp(type=48/0xf0)",
      "packet_type(ns=0,id=0),eth_type(0x86dd),ipv6(proto=58,frag=no),icmpv6(type=135,code=0),"
      "nd(target=fe80::1,sll=00:11:22:33:44:55)",
      "packet_type(ns=0,id=0),eth_type(0x86dd),ipv6(proto=58),icmpv6(type=136),"
      "nd(target=fe80::/ffff:ffff:ffff:ffff::,"
      "tll=00:11:22:00:00:00/ff:ff:ff:00:00:00)",
      "packet_type(ns=0,id=0),eth_type(0x86dd),ipv6(proto=58),icmpv6(type=128)",
      // ARP, RARP
      "packet_type(ns=0,id=0),eth(src=00:11:22:33:44:55),eth_type(0x0806),arp(sip=10.0.0.1,"
      "tip=10.0.0.0/255.255.255.0,op=1,"
      "sha=00:11:22:33:44:55,tha=00:00:00:00:00:00)",
      "packet_type(ns=0,id=0),eth_type(0x8035),arp(op=3/0xf)",
  };
  // NOLINTEND(bugprone-suspicious-missing-comma)
  for (const std::string& s : lines) {
    CAPTURE(s);
    check_canonical(s);
  }
}

TEST_CASE("dp: fields land where FlowKey keeps them") {
  Match m = parse_ok(
      "tunnel(tun_id=0x1234,src=1.1.1.1,dst=2.2.2.2,tos=0x8,ttl=3,tp_src=5,tp_dst=6,flags(df|key)),"
      "skb_priority(0x7),skb_mark(0x9),dp_hash(0x11/0xff),in_port(4),eth(),eth_type(0x8100),"
      "vlan(vid=10,pcp=5),encap(eth_type(0x86dd),ipv6(label=0xabcde,tclass=0x20,hlimit=9,proto=58),"
      "icmpv6(type=135,code=0),nd(target=::2,sll=aa:bb:cc:dd:ee:ff))");
  CHECK(m.key.tun_id == hton64(0x1234));
  CHECK(m.key.tun_ipv4_src == hton32(0x01010101));
  CHECK(m.key.tun_ipv4_dst == hton32(0x02020202));
  CHECK(m.key.tun_tos == 8);
  CHECK(m.key.tun_ttl == 3);
  CHECK(m.key.tun_tp_src == hton16(5));
  CHECK(m.key.tun_tp_dst == hton16(6));
  CHECK(m.key.tun_flags == (kTunDontFragment | kTunKey));
  CHECK(m.mask.tun_flags == text::kTunFlagsMax);
  CHECK(m.key.skb_priority == 7);
  CHECK(m.key.pkt_mark == 9);
  CHECK(m.key.dp_hash == 0x11);
  CHECK(m.mask.dp_hash == 0xff);
  CHECK(m.key.in_port == 4);
  CHECK(m.key.vlans[0].tpid == hton16(0x8100));
  CHECK(m.key.vlans[0].tci == hton16(0x1000 | (5 << 13) | 10));
  CHECK(m.mask.vlans[0].tci == 0xffff);
  CHECK(m.key.dl_type == hton16(0x86dd));
  CHECK(m.key.ipv6_label == hton32(0xabcde));
  CHECK(m.key.nw_tos == 0x20);
  CHECK(m.key.nw_ttl == 9);
  CHECK(m.key.tp_src == hton16(135));
  CHECK(m.mask.tp_src == hton16(0x00ff));  // ICMP type: exact = low byte (match.h)
  CHECK(m.key.nd_target.b[15] == 2);
  CHECK(m.key.arp_sha == EthAddr{{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}});

  Match a = parse_ok("eth(),eth_type(0x0806),arp(op=2,sha=00:00:00:00:00:01)");
  CHECK(a.key.nw_proto == 2);
  CHECK(a.mask.nw_proto == 0xff);
  CHECK(a.mask.arp_sha == EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}});
  Match f = parse_ok("eth(),eth_type(0x0800),ipv4(proto=6),tcp_flags(+syn-ack)");
  CHECK(f.key.tcp_flags == hton16(0x002));
  CHECK(f.mask.tcp_flags == hton16(0x012));
}

TEST_CASE("dp: the key is stored masked") {
  Match m = parse_ok(
      "in_port(0xff/0xf),eth(src=ff:ff:ff:ff:ff:ff/0f:00:00:00:00:00),eth_type(0x0800),"
      "ipv4(src=255.255.255.255/255.0.0.0)");
  CHECK(m.key.in_port == 0xf);
  CHECK(m.key.dl_src == EthAddr{{0x0f, 0, 0, 0, 0, 0}});
  CHECK(m.key.nw_src == hton32(0xff000000));
  Match copy = m;
  copy.apply_mask();
  CHECK(copy == m);
}

TEST_CASE("dp: non-canonical inputs print in canonical form") {
  struct Case {
    const char* in;
    const char* out;
  };
  const Case cases[] = {
      {"in_port(1), eth_type(0x0800) ,eth(), ipv4(frag=no)",
       "in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no)"},
      {"udp(dst=53),ipv4(proto=17),eth_type(2048)",
       "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(proto=17),udp(dst=53)"},
      {"eth_type(0x0800),ipv4(dst=10.0.0.0/8)",
       "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(dst=10.0.0.0/255.0.0.0)"},
      {"", "packet_type(ns=0,id=0)"},
      {"recirc_id(0x0),in_port(0x10)", "recirc_id(0),in_port(16),packet_type(ns=0,id=0)"},
      {"packet_type(ns=0,id=0),eth()", "packet_type(ns=0,id=0)"},
      {"eth_type(0x0800),ipv4(proto=6),tcp_flags(0x002/0x012)",
       "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(proto=6),tcp_flags(+syn-ack)"},
      {"eth_type(0x0800),ipv4(proto=6),tcp_flags(syn|0x10)",
       "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(proto=6),tcp_flags(syn|ack)"},
      {"tunnel(tun_id=0x1,flags(df|0x8))", "tunnel(tun_id=0x1,flags(df|key)),packet_type(ns=0,id=0)"},
      {"eth_type(0x8100),vlan(vid=5/0xfff,pcp=0/0),encap()",
       "packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=5),encap()"},
      {"eth_type(0x0806),arp(op=1/0xffff)", "packet_type(ns=0,id=0),eth_type(0x0806),arp(op=1)"},
      {"skb_mark(0x5/0xffffffff)", "skb_mark(0x5),packet_type(ns=0,id=0)"},
      {"tunnel()", "packet_type(ns=0,id=0)"},
  };
  for (const Case& c : cases) {
    std::string in = c.in;
    CAPTURE(in);
    Match m = parse_ok(c.in);
    CHECK(format_dp_match(m) == c.out);
    CHECK(parse_ok(c.out) == m);
  }
}

TEST_CASE("dp: a whole dump-flows line: ufid, statistics, actions") {
  const std::string line =
      "ufid:b7f0c6d0-1234-4a52-8a3b-0123456789ab recirc_id(0),in_port(2),packet_type(ns=0,id=0),"
      "eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02),eth_type(0x0800),ipv4(frag=no), packets:10, "
      "bytes:600, used:0.512s, flags:S, actions:3,push_vlan(vid=5,pcp=0)";
  auto r = parse_dp_flow(line);
  INFO(r.status().message());
  REQUIRE(r.ok());
  CHECK(r->ufid == "ufid:b7f0c6d0-1234-4a52-8a3b-0123456789ab");
  CHECK(r->has_actions);
  CHECK(r->actions == "3,push_vlan(vid=5,pcp=0)");
  CHECK(line.substr(r->actions_column - 1) == r->actions);
  CHECK(format_dp_flow(*r) ==
        "ufid:b7f0c6d0-1234-4a52-8a3b-0123456789ab recirc_id(0),in_port(2),packet_type(ns=0,id=0),"
        "eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02),eth_type(0x0800),ipv4(frag=no), "
        "actions:3,push_vlan(vid=5,pcp=0)");
  auto again = parse_dp_flow(format_dp_flow(*r));
  REQUIRE(again.ok());
  CHECK(again->match == r->match);
  CHECK(again->actions == r->actions);

  // dpctl/dump-flows -m from a userspace datapath: conntrack fields are
  // printed fully wildcarded, plus dp:, offloaded:, dp-extra-info:.
  const std::string verbose =
      "ufid:1e2c3a4b-0000-4000-8000-000000000001, skb_priority(0/0),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),"
      "ct_mark(0/0),ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(1),packet_type(ns=0,id=0),"
      "eth(src=02:00:00:00:00:01,dst=02:00:00:00:00:02),eth_type(0x0800),"
      "ipv4(src=10.0.0.1,dst=10.0.1.5/255.255.255.0,proto=17,tos=0/0,ttl=64/0,frag=no),"
      "udp(src=1000,dst=2000), packets:0, bytes:0, used:never, dp:ovs, offloaded:no, "
      "dp-extra-info:miniflow_bits(5,1), actions:2";
  auto v = parse_dp_flow(verbose);
  INFO(v.status().message());
  REQUIRE(v.ok());
  CHECK(v->actions == "2");
  CHECK(format_dp_match(v->match) == kBriefExample);

  // Actions after white space only, and a line without actions.
  auto w = parse_dp_flow("in_port(1) actions:drop");
  REQUIRE(w.ok());
  CHECK(w->actions == "drop");
  CHECK(w->actions_column == 20);
  auto n = parse_dp_flow("in_port(1)");
  REQUIRE(n.ok());
  CHECK_FALSE(n->has_actions);
  CHECK(format_dp_flow(*n) == "in_port(1),packet_type(ns=0,id=0)");
}

TEST_CASE("dp: port names through the callbacks") {
  DpParseOptions po;
  po.port_number = [](std::string_view name) -> std::optional<uint32_t> {
    if (name == "dpdk0") return 7;
    return std::nullopt;
  };
  auto r = parse_dp_match("in_port(dpdk0),packet_type(ns=0,id=0)", po);
  REQUIRE(r.ok());
  CHECK(r->key.in_port == 7);
  DpFormatOptions fo;
  fo.port_name = [](uint32_t p) -> std::optional<std::string> {
    if (p == 7) return "dpdk0";
    return std::nullopt;
  };
  CHECK(format_dp_match(*r, fo) == "in_port(dpdk0),packet_type(ns=0,id=0)");
  CHECK(format_dp_match(*r) == "in_port(7),packet_type(ns=0,id=0)");
  CHECK(parse_err("in_port(dpdk0)") == "unknown port 'dpdk0' at column 9");
}

TEST_CASE("dp: errors name the token and its column") {
  CHECK(parse_err("in_port(1),foo(2)") == "unknown attribute 'foo' at column 12");
  CHECK(parse_err("eth_type(0x0800),ipv4(src=10.0.0.300)") == "bad IPv4 address '10.0.0.300' at column 27");
  CHECK(parse_err("eth_type(0x0800),ipv4(proto=6),tcp(dst=70000)") ==
        "out-of-range value '70000' at column 40: dst must be 0..65535");
  CHECK(parse_err("eth_type(0x0800),ipv4(proto=256)") ==
        "out-of-range value '256' at column 29: proto must be 0..255");
  CHECK(parse_err("eth_type(0x0800),ipv4(proto=6/0x1ff)") ==
        "out-of-range value '0x1ff' at column 31: proto mask must be 0..255");
  CHECK(parse_err("ipv4(src=1.2.3.4)") == "attribute 'ipv4' at column 1: ipv4() needs eth_type(0x0800)");
  CHECK(parse_err("eth_type(0x0800),ipv4(proto=17),tcp(dst=1)") ==
        "attribute 'tcp' at column 33: needs ipv4(proto=6) or ipv6(proto=6)");
  CHECK(parse_err("eth_type(0x0800),ipv4(proto=17,frag=later),udp(dst=1)") ==
        "attribute 'udp' at column 44: a later fragment (frag=later) has no L4 header");
  CHECK(parse_err("eth_type(0x86dd),ipv6(proto=58),icmpv6(type=1),nd(target=::1)") ==
        "attribute 'nd' at column 48: nd() needs icmpv6(type=135,code=0) or icmpv6(type=136,code=0)");
  CHECK(parse_err("eth_type(0x86dd),ipv6(proto=1),icmp(type=1)").find("icmp() needs ipv4(proto=1)") !=
        std::string::npos);
  CHECK(parse_err("eth_type(0x0800),arp(op=1)").find("arp() needs") != std::string::npos);
  CHECK(parse_err("in_port(1),in_port(2)") ==
        "duplicate attribute 'in_port' at column 12: each attribute may appear once per level");
  CHECK(parse_err("eth_type(0x8100),vlan(vid=1),ipv4(src=1.1.1.1)") ==
        "attribute 'ipv4' at column 30: must be inside encap() after vlan()");
  CHECK(parse_err("eth_type(0x0800),vlan(vid=1)") ==
        "bad VLAN eth_type '0x0800' at column 10: before vlan() it must be 0x8100 or 0x88a8");
  CHECK(parse_err("encap(eth_type(0x0800))") ==
        "attribute 'encap' at column 1: encap() needs vlan() or a VLAN eth_type at the same level");
  CHECK(parse_err("vlan(),encap(vlan(),encap(vlan(),encap()))") ==
        "too many VLAN headers at 'vlan' at column 27: keel matches on two");
  CHECK(parse_err("vlan(vid=4096)") == "out-of-range value '4096' at column 10: vid must be 0..4095");
  CHECK(parse_err("vlan(),encap(in_port(1))") ==
        "attribute 'in_port' at column 14: not allowed inside encap()");
  CHECK(parse_err("eth(src=00:11:22:33:44)") == "bad Ethernet address '00:11:22:33:44' at column 9");
  CHECK(parse_err("eth(src=00:11:22:33:44:55/zz)") == "bad Ethernet mask 'zz' at column 27");
  CHECK(parse_err("eth(srcx=00:11:22:33:44:55)") == "unknown field 'srcx' at column 5: not a field of eth()");
  CHECK(parse_err("eth(src=00:11:22:33:44:55,)") ==
        "empty field in 'eth' at column 1: two commas in a row, or a trailing comma");
  CHECK(parse_err("eth(src") == "unbalanced '(' 'eth(src' at column 1: no matching ')'");
  CHECK(parse_err("in_port(1))") == "unexpected character ')' at column 11: expected an attribute name");
  CHECK(parse_err("in_port") == "unknown attribute 'in_port' at column 1: expected 'name(...)'");
  CHECK(parse_err("eth_type(0x86dd),ipv6(src=2001:db8::g)") == "bad IPv6 address '2001:db8::g' at column 27");
  CHECK(parse_err("eth_type(0x86dd),ipv6(src=::1/129)") ==
        "bad IPv6 mask '129' at column 31: a prefix length is 0..128");
  CHECK(parse_err("eth_type(0x86dd),ipv6(label=0x100000)") ==
        "out-of-range value '0x100000' at column 29: label must be 0..1048575");
  CHECK(parse_err("eth_type(0x0800),ipv4(frag=maybe)") ==
        "bad frag value 'maybe' at column 28: expected no, first or later");
  CHECK(parse_err("eth_type(0x0800),ipv4(ttl=abc)") ==
        "bad ttl value 'abc' at column 27: expected a decimal or 0x-hex number");
  CHECK(parse_err("eth_type(0x0800),ipv4(proto=6),tcp_flags(+syn+bogus)") ==
        "unknown tcp_flags flag 'bogus' at column 47");
  CHECK(parse_err("eth_type(0x0800),ipv4(proto=6),tcp_flags(+syn+syn)") ==
        "repeated tcp_flags flag 'syn' at column 47");
  CHECK(parse_err("tunnel(flags(bogus))") == "unknown tunnel flags flag 'bogus' at column 14");
  CHECK(parse_err("tunnel(vxlan(gbp(id=1)))") ==
        "unsupported tunnel field 'vxlan' at column 8: keel matches tunnel flags() and geneve() options");
  CHECK(parse_err("eth_type(0x0806),arp(op=256)") ==
        "out-of-range value '256' at column 25: ARP op must be 0..255");
  CHECK(parse_err("ct_state(+trk)") ==
        "unsupported attribute 'ct_state' at column 1: keel does not match on conntrack state yet");
  CHECK(parse_err("mpls(label=1)") == "unsupported attribute 'mpls' at column 1: keel does not match on it");
  CHECK(parse_err("packet_type(ns=1,id=0x800)") ==
        "unsupported packet type '1' at column 16: keel handles Ethernet (ns=0,id=0) only");
  CHECK(parse_err("in_port(1),actions:drop") ==
        "unexpected 'actions' at column 12: expected a flow key attribute, not 'name:'");
  CHECK(parse_dp_flow("in_port(1), bogus:1").status().message() == "unknown field 'bogus' at column 13");
  CHECK(parse_dp_flow("in_port(1), packets:1, eth()").status().message() ==
        "attribute 'eth' at column 24: flow key attributes must come before statistics");
}

namespace {

// A random, valid datapath flow line built from the pieces below.
std::string random_dp_line(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<const char*> xs) {
    std::vector<const char*> v(xs);
    return std::string(v[rng() % v.size()]);
  };
  auto maybe = [&] { return rng() % 2 == 0; };
  std::vector<std::string> attrs;
  if (maybe()) attrs.push_back("recirc_id(" + pick({"0", "0x1", "7/0xf"}) + ")");
  if (maybe()) attrs.push_back("in_port(" + pick({"1", "2", "3/0x3"}) + ")");
  if (maybe()) attrs.push_back("skb_mark(" + pick({"0x1", "0/0xff"}) + ")");
  if (maybe()) attrs.push_back("dp_hash(" + pick({"0x1/0xff", "0x1234"}) + ")");
  if (maybe()) {
    attrs.push_back("tunnel(" + pick({"tun_id=0x1", "tun_id=0x5/0xff"}) + "," +
                    pick({"src=1.1.1.1,dst=2.2.2.2", "ipv6_src=::1", "ttl=64"}) + "," +
                    pick({"flags(-df+csum)", "flags(key)", "tp_dst=4789"}) + ")");
  }
  if (maybe()) {
    attrs.push_back("eth(" +
                    pick({"src=00:00:00:00:00:01", "dst=01:00:00:00:00:00/01:00:00:00:00:00",
                          "src=00:00:00:00:00:01,dst=00:00:00:00:00:02", ""}) +
                    ")");
  }
  std::string inner;
  switch (rng() % 6) {
    case 0:
      inner = "eth_type(0x0800),ipv4(src=10.0.0." + std::to_string(rng() % 256) + ",proto=6," +
              pick({"frag=no", "frag=first", "ttl=64"}) + "),tcp(" + pick({"dst=80", "src=1/0xff00", ""}) +
              ")" + pick({"", ",tcp_flags(+syn-ack)", ",tcp_flags(syn)"});
      break;
    case 1:
      inner = "eth_type(0x86dd),ipv6(dst=2001:db8::/ffff::,proto=17,label=0x" + std::to_string(rng() % 9) +
              "),udp(dst=" + std::to_string(rng() % 65536) + ")";
      break;
    case 2:
      inner = "eth_type(0x0806),arp(sip=1.2.3.4,op=" + std::to_string(rng() % 256) + ")";
      break;
    case 3:
      inner = "eth_type(0x86dd),ipv6(proto=58),icmpv6(type=136,code=0),nd(tll=00:11:22:33:44:55)";
      break;
    case 4:
      inner = "eth_type(0x0800),ipv4(proto=1,frag=later)";
      break;
    default:
      inner = "eth_type(0x0800),ipv4(proto=1),icmp(type=" + std::to_string(rng() % 256) + ")";
      break;
  }
  switch (rng() % 3) {
    case 0:
      attrs.push_back(inner);
      break;
    case 1:
      attrs.push_back("eth_type(0x8100),vlan(vid=" + std::to_string(rng() % 4096) + "),encap(" + inner + ")");
      break;
    default:
      attrs.push_back("eth_type(0x88a8),vlan(pcp=" + std::to_string(rng() % 8) +
                      "),encap(eth_type(0x8100),vlan(vid=1/0xff),encap(" + inner + "))");
  }
  std::shuffle(attrs.begin(), attrs.end(), rng);
  std::string out;
  for (const std::string& a : attrs) out += (out.empty() ? "" : ",") + a;
  return out;
}

}  // namespace

TEST_CASE("dp: random valid lines: print -> parse is the identity, terse and verbose") {
  std::mt19937 rng(1234);
  DpFormatOptions verbose;
  verbose.verbose = true;
  for (int i = 0; i < 3000; ++i) {
    std::string line = random_dp_line(rng);
    CAPTURE(line);
    Match m = parse_ok(line);
    std::string printed = format_dp_match(m);
    CAPTURE(printed);
    Match back = parse_ok(printed);
    REQUIRE(back == m);
    REQUIRE(format_dp_match(back) == printed);
    REQUIRE(parse_ok(format_dp_match(m, verbose)) == m);
  }
}

TEST_CASE("dp: OpenFlow matches print as datapath flows that read back the same") {
  // The megaflow a rule turns into carries the rule's fields; printing an
  // OpenFlow match in datapath syntax must keep them.
  for (std::string of :
       {"udp,in_port=1,nw_dst=10.1.0.0/16,tp_dst=1008", "tcp6,ipv6_src=2001:db8::/32,tp_dst=443",
        "icmp,icmp_type=8,icmp_code=0", "arp,arp_spa=10.0.0.1,arp_op=1",
        "icmp6,icmp_type=135,nd_target=fe80::1", "tun_id=0x5,tun_src=1.1.1.1,in_port=2",
        "dl_vlan=10,ip,nw_ttl=3", "tcp,tcp_flags=+syn-ack"}) {
    CAPTURE(of);
    auto m = parse_of_match(of);
    REQUIRE(m.ok());
    std::string dp = format_dp_match(*m);
    CAPTURE(dp);
    CHECK(parse_ok(dp) == *m);
  }
}

// A megaflow as the upcall handler masks it (ofproto/udpif.cpp): key = the
// parsed packet under the mask; each tag's TPID exact up to the first absent
// one, an unmatched outer TCI exact in VID and CFI.
Match megaflow_of(std::initializer_list<VlanHdr> tags, uint16_t dl_type, VlanHdr inner_mask = {}) {
  Match m;
  m.mask.in_port = 0xffffffffu;
  m.mask.recirc_id = 0xffffffffu;
  m.key.in_port = 1;
  m.mask.dl_type = 0xffff;
  m.key.dl_type = hton16(dl_type);
  m.mask.vlans[0].tci = hton16(0x1fff);
  m.mask.vlans[1] = inner_mask;
  unsigned i = 0;
  for (const VlanHdr& t : tags) m.key.vlans[i++] = {hton16(t.tpid), hton16(t.tci)};
  for (unsigned l = 0; l < 2; ++l) {
    m.mask.vlans[l].tpid = 0xffff;
    if (l >= tags.size()) break;
  }
  m.apply_mask();
  return m;
}

TEST_CASE("dp: Open vSwitch's datapath view of VLAN stacks (flow-dump), per vlan-limit") {
  // The expected strings are what ovs-vswitchd 3.1 printed for the same
  // packets (dpctl/dump-flows, a catch-all rule), packet_type aside.
  auto ovs = [](const Match& m, unsigned limit) {
    DpFormatOptions o;
    o.ovs_vlan_limit = limit;
    return format_dp_match(m, o);
  };
  const Match untagged = megaflow_of({}, 0x0800);
  CHECK(ovs(untagged, 1) == "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800)");
  const Match one = megaflow_of({{0x8100, 0x100a}}, 0x0800);
  CHECK(ovs(one, 1) == "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=10),encap(eth_type(0x0800))");
  CHECK(ovs(one, 2) == ovs(one, 1));
  // vlan-limit 1: a QinQ frame's inner TPID is the EtherType.
  const Match qinq1 = megaflow_of({{0x88a8, 0x100a}}, 0x8100);
  CHECK(ovs(qinq1, 1) == "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x88a8),vlan(vid=10),encap(eth_type(0x8100))");
  // vlan-limit 2: the inner level, no vlan() when no TCI bit is matched...
  const Match qinq2 = megaflow_of({{0x88a8, 0x100a}, {0x8100, 0x1014}}, 0x0800);
  CHECK(ovs(qinq2, 2) ==
        "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x88a8),vlan(vid=10),encap(eth_type(0x8100),encap(eth_type(0x0800)))");
  // ... and vlan() when some are (a rule on the inner tag after pop_vlan).
  const Match qinq2_vid = megaflow_of({{0x88a8, 0x100a}, {0x8100, 0x1014}}, 0x0800, {0, hton16(0xffff)});
  CHECK(ovs(qinq2_vid, 2) == "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x88a8),vlan(vid=10),encap(eth_type(0x8100),"
                             "vlan(vid=20,pcp=0),encap(eth_type(0x0800)))");
  // A tag cut short: within the limit eth_type(TPID),vlan(...),encap();
  // beyond it the TPID is just the inner EtherType.
  const Match cut = megaflow_of({}, 0x8100);
  CHECK(ovs(cut, 1) == "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=0,cfi=0),encap()");
  const Match cut_inner = megaflow_of({{0x8100, 0x100a}}, 0x8100);
  CHECK(ovs(cut_inner, 2) == "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=10),encap(eth_type(0x8100),encap())");
  CHECK(ovs(cut_inner, 1) == "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=10),encap(eth_type(0x8100))");
  // Open vSwitch's inner level without vlan() reads back as a tag whose TCI
  // is wildcarded.
  auto inner = parse_dp_match("in_port(1),eth_type(0x88a8),vlan(vid=10),encap(eth_type(0x8100),encap(eth_type(0x0800)))");
  REQUIRE(inner.ok());
  CHECK(inner->key.vlans[1].tpid == hton16(0x8100));
  CHECK(inner->mask.vlans[1].tpid == 0xffff);
  CHECK(inner->mask.vlans[1].tci == 0);
  CHECK(inner->key.dl_type == hton16(0x0800));
  CHECK(ovs(*inner, 2) == "in_port(1),packet_type(ns=0,id=0),eth_type(0x88a8),vlan(vid=10),encap(eth_type(0x8100),encap(eth_type(0x0800)))");
  CHECK_FALSE(parse_dp_match("eth_type(0x8100),encap(eth_type(0x8100),encap(eth_type(0x8100),encap()))").ok());
  CHECK_FALSE(parse_dp_match("eth_type(0x8100),encap(eth_type(0x0800)),ipv4()").ok());
  // keel's own text (the default) still shows the levels its mask has: the
  // tags' presence, which Open vSwitch's view leaves implied.
  CHECK(format_dp_match(untagged) == "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0000),vlan(vid=0,cfi=0),"
                                     "encap(eth_type(0x0800))");
}

TEST_CASE("dp: a key with values outside its mask prints them, as Open vSwitch prints a flow's key") {
  // The upcall's packet key under the megaflow's mask (flow-dump).
  DpFlow f;
  {
    auto r = parse_dp_flow(
        "recirc_id(0),in_port(1),eth(src=00:00:00:00:00:01/00:00:00:00:00:00,"
        "dst=00:00:00:00:00:02/00:00:00:00:00:00),"
        "eth_type(0x0800),ipv4(src=10.0.0.1/0.0.0.0,dst=10.1.2.3/255.0.0.0,proto=17/0,tos=0/0,ttl=64/0,"
        "frag=no),"
        "udp(src=1024/0,dst=4000/0)");
    INFO(r.status().message());
    REQUIRE(r.ok());
    f = *r;
  }
  // The match is masked; the values as written are kept apart.
  CHECK(f.match.key.nw_src == 0);
  CHECK(f.match.key.nw_dst == hton32(0x0a000000));
  CHECK(f.match.mask.nw_proto == 0);
  CHECK(f.match.mask.tp_src == 0);
  CHECK(f.key_as_written.nw_src == hton32(0x0a000001));
  CHECK(f.key_as_written.nw_dst == hton32(0x0a010203));
  CHECK(f.key_as_written.nw_proto == 17);
  CHECK(f.key_as_written.tp_dst == hton16(4000));
  Match shown{f.key_as_written, f.match.mask};
  CHECK(format_dp_match(shown) ==
        "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(dst=10.1.2.3/255.0.0.0,frag=no)");
  DpFormatOptions v;
  v.verbose = true;
  const std::string verbose = format_dp_match(shown, v);
  CHECK(verbose ==
        "skb_priority(0/0),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),ct_mark(0/0),ct_label(0/0),recirc_id(0),"
        "dp_hash(0/0),in_port(1),packet_type(ns=0,id=0),"
        "eth(src=00:00:00:00:00:01/00:00:00:00:00:00,dst=00:00:00:00:00:02/00:00:00:00:00:00),"
        "eth_type(0x0800),"
        "ipv4(src=10.0.0.1/0.0.0.0,dst=10.1.2.3/255.0.0.0,proto=17/0,tos=0/0,ttl=64/0,frag=no),"
        "udp(src=1024/0,dst=4000/0)");
  // Reads back to the same match and the same values.
  auto again = parse_dp_flow(verbose);
  REQUIRE(again.ok());
  CHECK(again->match == f.match);
  CHECK(again->key_as_written == shown.key);

  // TCP: -m prints tcp_flags(0/0) when the flags are not matched, whatever
  // the packet's (format_flags_masked()).
  Match t = parse_ok("eth_type(0x0800),ipv4(proto=6,frag=no),tcp(dst=80)");
  t.key.tcp_flags = hton16(0x002);
  CHECK(format_dp_match(t, v).find("tcp(src=0/0,dst=80),tcp_flags(0/0)") != std::string::npos);
  CHECK(format_dp_match(t).find("tcp_flags") == std::string::npos);
}

TEST_CASE("dp: a matched L4 field still needs its prerequisite matched exactly") {
  CHECK(parse_err("eth_type(0x0800),ipv4(proto=17/0),udp(dst=53)") ==
        "attribute 'udp' at column 35: matching an L4 field needs ipv4/ipv6 proto= matched exactly");
  CHECK(parse_err("eth_type(0x0800),ipv4(proto=6/0),udp(dst=53/0)") ==
        "attribute 'udp' at column 34: udp() needs ipv4(proto=17) or ipv6(proto=17)");
  // Written values satisfy the prerequisite of a wildcarded attribute.
  CHECK(parse_ok("eth_type(0x86dd),ipv6(proto=58/0),icmpv6(type=135/0,code=0/0),nd(target=::/::)").mask.nw_proto == 0);
}

TEST_CASE("dp: a whole flow-dump -m line: dp-extra-info after the actions is not an action") {
  auto r = parse_dp_flow(
      "ufid:98c0c1df-32c5-4443-bee9-8025e4b2e2e4, skb_priority(0/0),recirc_id(0),in_port(1),"
      "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), packets:2, bytes:124, used:0.501s, "
      "offloaded:partial, dp:ovs, actions:2,3, dp-extra-info:miniflow_bits(4,2)");
  INFO(r.status().message());
  REQUIRE(r.ok());
  CHECK(r->actions == "2,3");
}

// OpenFlow actions (ovs-ofctl actions syntax) and the OpenFlow field
// registry: every action parses and prints back as Open vSwitch 3.1's
// dump-flows prints it, round trips, errors name their token and column,
// check_of_actions(), and the field read/write/unwildcard helpers.
#include "flow/of_actions.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "flow/flow_text.h"
#include "flow/of_fields.h"
#include "flow/of_match_syntax.h"

using namespace keel::flow;
using keel::Status;
using keel::flow::text::hton16;
using keel::flow::text::hton32;

namespace {

OfActions parse_ok(const std::string& s, const OfParseOptions& o = {}) {
  auto r = parse_of_actions(s, o);
  INFO("input: " << s);
  INFO("error: " << r.status().message());
  REQUIRE(r.ok());
  return *r;
}

std::string parse_err(const std::string& s) {
  auto r = parse_of_actions(s);
  INFO("input: " << s);
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

// format(parse(s)), and parse(format(x)) == x.
std::string canon(const std::string& s) {
  OfActions a = parse_ok(s);
  std::string text = format_of_actions(a);
  if (text != "drop") CHECK(parse_ok(text) == a);
  return text;
}

Match match_ok(const std::string& s) {
  if (s.empty()) return Match{};
  auto r = parse_of_match(s);
  INFO("match: " << s << " error: " << r.status().message());
  REQUIRE(r.ok());
  return *r;
}

std::string check(const std::string& match, const std::string& actions, uint8_t table = 0) {
  Status st = check_of_actions(parse_ok(actions), match_ok(match), table);
  return st.ok() ? "ok" : st.message();
}

struct Case {
  const char* match;   // a match that satisfies the actions' prerequisites
  const char* input;   // what a user writes
  const char* dumped;  // what `ovs-ofctl parse-flow` of OVS 3.1.0 printed for it
};

// Generated with ovs-ofctl 3.1.0: ovs-ofctl parse-flow "MATCH,actions=INPUT".
const Case kCases[] = {
    {"", "output:3", "output:3"},
    {"", "3", "output:3"},
    {"", "output:65534", "LOCAL"},
    {"", "in_port", "IN_PORT"},
    {"", "IN_PORT", "IN_PORT"},
    {"", "NORMAL", "NORMAL"},
    {"", "normal", "NORMAL"},
    {"", "FLOOD", "FLOOD"},
    {"", "ALL", "ALL"},
    {"", "LOCAL", "LOCAL"},
    {"", "output:LOCAL", "LOCAL"},
    {"", "CONTROLLER", "CONTROLLER:65535"},
    {"", "controller", "CONTROLLER:65535"},
    {"", "controller:100", "CONTROLLER:100"},
    {"", "controller(max_len=200)", "CONTROLLER:200"},
    {"", "output(port=2,max_len=100)", "output(port=2,max_len=100)"},
    {"", "controller(reason=no_match)", "controller(reason=no_match)"},
    {"", "controller(reason=invalid_ttl,max_len=100,id=3)",
     "controller(reason=invalid_ttl,max_len=100,id=3)"},
    {"", "controller(id=7)", "controller(id=7)"},
    {"", "drop", "drop"},
    {"", "resubmit:3", "resubmit:3"},
    {"", "resubmit(,2)", "resubmit(,2)"},
    {"", "resubmit(3,4)", "resubmit(3,4)"},
    {"", "resubmit(in_port,3)", "resubmit(,3)"},
    {"", "resubmit(IN_PORT,4)", "resubmit(,4)"},
    {"", "resubmit(LOCAL,1)", "resubmit(LOCAL,1)"},
    {"", "resubmit:65534", "resubmit:LOCAL"},
    {"", "resubmit(5)", "resubmit:5"},
    {"vlan_tci=0x1000/0x1000", "mod_vlan_vid:10", "mod_vlan_vid:10"},
    {"", "mod_vlan_vid:4095", "mod_vlan_vid:4095"},
    {"", "mod_vlan_pcp:7", "mod_vlan_pcp:7"},
    {"vlan_tci=0x1000/0x1000", "strip_vlan", "strip_vlan"},
    {"vlan_tci=0x1000/0x1000", "pop_vlan", "strip_vlan"},
    {"", "mod_dl_src:00:11:22:33:44:55", "mod_dl_src:00:11:22:33:44:55"},
    {"", "mod_dl_dst:AA:BB:CC:DD:EE:FF", "mod_dl_dst:aa:bb:cc:dd:ee:ff"},
    {"", "mod_dl_src:1:2:3:4:5:6", "mod_dl_src:01:02:03:04:05:06"},
    {"ip", "mod_nw_src:10.0.0.1", "mod_nw_src:10.0.0.1"},
    {"ip", "mod_nw_dst:192.168.1.255", "mod_nw_dst:192.168.1.255"},
    {"ip", "mod_nw_tos:184", "mod_nw_tos:184"},
    {"ip", "mod_nw_tos:0x10", "mod_nw_tos:16"},
    {"ip", "mod_nw_ttl:64", "load:0x40->NXM_NX_IP_TTL[]"},
    {"ip", "mod_nw_ecn:2", "load:0x2->NXM_NX_IP_ECN[]"},
    {"tcp", "mod_tp_src:80", "mod_tp_src:80"},
    {"udp", "mod_tp_dst:0x35", "mod_tp_dst:53"},
    {"sctp", "mod_tp_dst:9", "mod_tp_dst:9"},
    {"ip", "dec_ttl", "dec_ttl"},
    {"ip", "dec_ttl(1,2,3)", "dec_ttl(1,2,3)"},
    {"ip", "dec_ttl(0)", "dec_ttl(0)"},
    {"ipv6", "dec_ttl()", "dec_ttl"},
    {"", "load:5->NXM_NX_REG0[]", "load:0x5->NXM_NX_REG0[]"},
    {"", "load:0x5->reg0[4..11]", "load:0x5->NXM_NX_REG0[4..11]"},
    {"", "load:0->NXM_NX_REG1[0..3]", "load:0->NXM_NX_REG1[0..3]"},
    {"", "load:1->NXM_NX_REG2[31]", "load:0x1->NXM_NX_REG2[31]"},
    {"", "load:0xffffffff->NXM_NX_REG7[]", "load:0xffffffff->NXM_NX_REG7[]"},
    {"", "load:0x1234->NXM_NX_TUN_ID[0..31]", "load:0x1234->NXM_NX_TUN_ID[0..31]"},
    {"", "load:0xffffffffffffffff->NXM_NX_TUN_ID[]", "load:0xffffffffffffffff->NXM_NX_TUN_ID[]"},
    {"", "load:0x123456789abc->NXM_OF_ETH_DST[]", "load:0x123456789abc->NXM_OF_ETH_DST[]"},
    {"", "load:0x1->OXM_OF_METADATA[3]", "load:0x1->OXM_OF_METADATA[3]"},
    {"", "load:0x2->metadata[]", "load:0x2->OXM_OF_METADATA[]"},
    {"", "load:7->pkt_mark[]", "load:0x7->NXM_NX_PKT_MARK[]"},
    {"", "load:3->NXM_OF_IN_PORT[]", "load:0x3->NXM_OF_IN_PORT[]"},
    {"", "load:0x1001->NXM_OF_VLAN_TCI[]", "load:0x1001->NXM_OF_VLAN_TCI[]"},
    {"arp", "load:2->NXM_OF_ARP_OP[]", "load:0x2->NXM_OF_ARP_OP[]"},
    {"arp", "load:0xa000001->NXM_OF_ARP_SPA[]", "load:0xa000001->NXM_OF_ARP_SPA[]"},
    {"ipv6", "load:0xfe800000000000000000000000000001->NXM_NX_IPV6_SRC[]",
     "load:0x1->NXM_NX_IPV6_SRC[0..63],load:0xfe80000000000000->NXM_NX_IPV6_SRC[64..127]"},
    {"", "move:NXM_NX_REG0[]->NXM_NX_REG1[]", "move:NXM_NX_REG0[]->NXM_NX_REG1[]"},
    {"", "move:reg0[0..15]->reg1[16..31]", "move:NXM_NX_REG0[0..15]->NXM_NX_REG1[16..31]"},
    {"", "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]", "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]"},
    {"arp", "move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[]", "move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[]"},
    {"arp", "move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]", "move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]"},
    {"tcp", "move:NXM_OF_TCP_SRC[]->NXM_NX_REG3[0..15]", "move:NXM_OF_TCP_SRC[]->NXM_NX_REG3[0..15]"},
    {"", "move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG4[]", "move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG4[]"},
    {"", "move:NXM_OF_IN_PORT[]->NXM_NX_REG5[0..15]", "move:NXM_OF_IN_PORT[]->NXM_NX_REG5[0..15]"},
    {"", "move:NXM_OF_VLAN_TCI[0..11]->OXM_OF_VLAN_VID[]", "move:NXM_OF_VLAN_TCI[0..11]->OXM_OF_VLAN_VID[]"},
    {"ip", "move:NXM_OF_IP_SRC[]->NXM_OF_IP_DST[]", "move:NXM_OF_IP_SRC[]->NXM_OF_IP_DST[]"},
    {"", "move:tun_id[]->metadata[]", "move:NXM_NX_TUN_ID[]->OXM_OF_METADATA[]"},
    {"", "set_field:00:11:22:33:44:55->eth_src", "mod_dl_src:00:11:22:33:44:55"},
    {"", "set_field:00:11:22:33:44:55->dl_dst", "mod_dl_dst:00:11:22:33:44:55"},
    {"ip", "set_field:1.2.3.4->ip_src", "mod_nw_src:1.2.3.4"},
    {"ip", "set_field:1.2.3.4->nw_dst", "mod_nw_dst:1.2.3.4"},
    {"ip", "set_field:46->ip_dscp", "mod_nw_tos:184"},
    {"ip", "set_field:0x10->nw_tos", "mod_nw_tos:16"},
    {"ip", "set_field:2->ip_ecn", "load:0x2->NXM_NX_IP_ECN[]"},
    {"ip", "set_field:9->nw_ttl", "load:0x9->NXM_NX_IP_TTL[]"},
    {"tcp", "set_field:1->tcp_src", "mod_tp_src:1"},
    {"tcp", "set_field:2->tp_dst", "mod_tp_dst:2"},
    {"udp", "set_field:53->udp_dst", "mod_tp_dst:53"},
    {"sctp", "set_field:1->sctp_src", "load:0x1->OXM_OF_SCTP_SRC[]"},
    {"vlan_tci=0x1000/0x1000", "set_field:10->vlan_vid", "mod_vlan_vid:10"},
    {"vlan_tci=0x1000/0x1000", "set_field:0x100a->vlan_vid", "mod_vlan_vid:10"},
    {"vlan_tci=0x1000/0x1000", "set_field:5->vlan_pcp", "mod_vlan_pcp:5"},
    {"", "set_field:0x1005->vlan_tci", "mod_vlan_vid:5,mod_vlan_pcp:0"},
    {"", "set_field:0x0->vlan_tci", "strip_vlan"},
    {"", "set_field:5->reg3", "load:0x5->NXM_NX_REG3[]"},
    {"", "set_field:5/0xf->reg3", "load:0x5->NXM_NX_REG3[0..3]"},
    {"", "set_field:5/0x5->reg0", "load:0x1->NXM_NX_REG0[0],load:0x1->NXM_NX_REG0[2]"},
    {"", "set_field:0x12->metadata", "load:0x12->OXM_OF_METADATA[]"},
    {"", "set_field:0x12/0xff->metadata", "load:0x12->OXM_OF_METADATA[0..7]"},
    {"", "set_field:0x1234->tun_id", "load:0x1234->NXM_NX_TUN_ID[]"},
    {"", "set_field:1.1.1.1->tun_src", "load:0x1010101->NXM_NX_TUN_IPV4_SRC[]"},
    {"", "set_field:5->pkt_mark", "load:0x5->NXM_NX_PKT_MARK[]"},
    {"", "set_field:3->in_port", "load:0x3->NXM_OF_IN_PORT[]"},
    {"", "set_field:LOCAL->in_port", "load:0xfffe->NXM_OF_IN_PORT[]"},
    {"ipv6", "set_field:fe80::1->ipv6_src",
     "load:0x1->NXM_NX_IPV6_SRC[0..63],load:0xfe80000000000000->NXM_NX_IPV6_SRC[64..127]"},
    {"ipv6", "set_field:2001:db8::/32->ipv6_dst", "load:0x20010db8->NXM_NX_IPV6_DST[96..127]"},
    {"udp6", "set_field:0x12345->ipv6_label", "load:0x12345->NXM_NX_IPV6_LABEL[]"},
    {"arp", "set_field:2->arp_op", "load:0x2->NXM_OF_ARP_OP[]"},
    {"", "note:01.02", "note:01.02.00.00.00.00"},
    {"", "note:", "note:00.00.00.00.00.00"},
    {"", "note:0102030405060708", "note:01.02.03.04.05.06.07.08.00.00.00.00.00.00"},
    {"", "set_tunnel:5", "set_tunnel:0x5"},
    {"", "set_tunnel:0x100000000", "set_tunnel64:0x100000000"},
    {"", "set_tunnel64:5", "set_tunnel64:0x5"},
    {"", "set_tunnel:0", "set_tunnel:0"},
    {"", "output:1,output:2,NORMAL", "output:1,output:2,NORMAL"},
    {"vlan_tci=0x1000/0x1000", "strip_vlan,output:1", "strip_vlan,output:1"},
    {"", "mod_vlan_vid:10,output:2", "mod_vlan_vid:10,output:2"},
    {"", "set_field:5->reg0,resubmit(,1)", "load:0x5->NXM_NX_REG0[],resubmit(,1)"},
    {"", "output:NXM_NX_REG0[0..15]", "output:NXM_NX_REG0[0..15]"},
    {"", "output:NXM_NX_REG1[]", "output:NXM_NX_REG1[]"},
    {"", "output:NXM_OF_ETH_SRC[]", "output:NXM_OF_ETH_SRC[]"},
    {"ip", "output:NXM_OF_IP_SRC[0..15]", "output:NXM_OF_IP_SRC[0..15]"},
    {"", "output:65529", "TABLE"},
    {"", "output:4294967294", "LOCAL"},
    {"", "output:4294967292", "ALL"},
};

}  // namespace

TEST_CASE("of_actions: every action prints as OVS 3.1 dump-flows and round-trips") {
  for (const Case& c : kCases) {
    CAPTURE(c.input);
    OfActions a = parse_ok(c.input);
    CHECK(format_of_actions(a) == c.dumped);
    OfActions back = parse_ok(c.dumped);
    CHECK(back == a);
    CHECK(format_of_actions(back) == c.dumped);
    Status st = check_of_actions(a, match_ok(c.match), 0);
    CHECK_MESSAGE(st.ok(), st.message());
  }
}

TEST_CASE("of_actions: structure of parsed actions") {
  CHECK(parse_ok("drop").empty());
  CHECK(parse_ok("").empty());
  CHECK(format_of_actions({}) == "drop");
  CHECK(parse_ok("output:3") == OfActions{OfOutput{3, 0}});
  CHECK(parse_ok("CONTROLLER") == OfActions{OfOutput{kOfppController, 0xffff}});
  CHECK(parse_ok("controller(reason=no_match,id=2)") ==
        OfActions{OfController{0xffff, 2, OfPacketInReason::no_match}});
  CHECK(parse_ok("resubmit(,3)") == OfActions{OfResubmit{kOfppInPort, 3}});
  CHECK(parse_ok("resubmit:7") == OfActions{OfResubmit{7, kOfTableNone}});
  CHECK(parse_ok("mod_nw_src:10.0.0.1") == OfActions{OfSetIpv4Src{hton32(0x0a000001)}});
  CHECK(parse_ok("mod_tp_dst:80") == OfActions{OfSetL4Dst{80}});
  CHECK(parse_ok("load:0x5->reg0[4..11]") == OfActions{OfLoad{{OfFieldId::reg0, 4, 8}, 5}});
  CHECK(parse_ok("move:reg0[0..15]->tcp_dst[]") ==
        OfActions{OfMove{{OfFieldId::reg0, 0, 16}, {OfFieldId::tcp_dst, 0, 16}}});
  CHECK(parse_ok("set_field:0x1005->vlan_tci") == OfActions{OfSetVlanVid{5}, OfSetVlanPcp{0}});
}

TEST_CASE("of_actions: decisions where keel prints differently from OVS's OpenFlow 1.0 dump") {
  // OpenFlow 1.0 has no goto_table or push_vlan; OVS 1.1+ spelling is kept.
  CHECK(format_of_actions(parse_ok("output:1,goto_table:3")) == "output:1,goto_table:3");
  CHECK(format_of_actions(parse_ok("push_vlan:0x8100,mod_vlan_vid:5")) == "push_vlan:0x8100,mod_vlan_vid:5");
  CHECK(format_of_actions(parse_ok("push_vlan:0x88a8")) == "push_vlan:0x88a8");
  // A masked set_field keeps its mask (OVS 3.1's OpenFlow 1.0 encoding drops it).
  CHECK(format_of_actions(parse_ok("set_field:1.2.3.4/255.255.0.0->ip_src")) ==
        "load:0x102->NXM_OF_IP_SRC[16..31]");
  CHECK(format_of_actions(parse_ok("set_field:00:00:00:00:00:01/00:00:00:00:00:ff->eth_dst")) ==
        "load:0x1->NXM_OF_ETH_DST[0..7]");
}

TEST_CASE("of_actions: port names both ways") {
  OfParseOptions po;
  po.port_number = [](std::string_view n) -> std::optional<uint32_t> {
    if (n == "p0") return 1;
    if (n == "vf7") return 17;
    return std::nullopt;
  };
  OfFormatOptions fo;
  fo.port_name = [](uint32_t p) -> std::optional<std::string> {
    if (p == 1) return "p0";
    if (p == 17) return "vf7";
    return std::nullopt;
  };
  OfActions a = parse_ok("output:p0,vf7,resubmit(p0,2),resubmit:vf7,output:3,LOCAL", po);
  CHECK(a == parse_ok("output:1,output:17,resubmit(1,2),resubmit:17,output:3,LOCAL"));
  CHECK(format_of_actions(a, fo) == "output:p0,output:vf7,resubmit(p0,2),resubmit:vf7,output:3,LOCAL");
  CHECK(format_of_actions(a) == "output:1,output:17,resubmit(1,2),resubmit:17,output:3,LOCAL");
  CHECK(parse_ok(format_of_actions(a, fo), po) == a);
  CHECK(parse_err("output:p0") == "unknown port 'p0' at column 8");
}

TEST_CASE("of_actions: reserved and out-of-range port numbers") {
  CHECK(format_of_actions(parse_ok("output:65529")) == "TABLE");
  CHECK(format_of_actions(parse_ok("output:4294967294")) == "LOCAL");
  CHECK(format_of_actions(parse_ok("output:0xfffffffc")) == "ALL");
  CHECK(format_of_actions(parse_ok("65280")) == "65280");  // parses; check_of_actions refuses it
  CHECK(parse_ok("65280") == OfActions{OfOutput{0xff00, 0}});
  CHECK(parse_err("output:65536") ==
        "out-of-range port '65536' at column 8: a port is 0..65535 or 0xffffff00..0xffffffff");
  CHECK(parse_err("70000") ==
        "out-of-range port '70000' at column 1: a port is 0..65535 or 0xffffff00..0xffffffff");
}

TEST_CASE("of_actions: errors name the token and its column") {
  struct E {
    const char* input;
    const char* message;
  };
  const E cases[] = {
      {"output:1,foo", "unknown action 'foo' at column 10"},
      {"output:1, bar:3", "unknown action 'bar' at column 11"},
      {"ct(commit)", "unsupported action 'ct' at column 1: keel does not implement it"},
      {"output:1,group:5", "unsupported action 'group' at column 10: keel does not implement it"},
      {"mod_vlan_vid:4096", "out-of-range value '4096' at column 14: VLAN VID must be 0..4095"},
      {"mod_vlan_pcp:8", "out-of-range value '8' at column 14: VLAN PCP must be 0..7"},
      {"mod_vlan_vid:x", "bad VLAN VID value 'x' at column 14: expected a decimal or 0x-hex number"},
      {"goto_table:255", "out-of-range value '255' at column 12: table must be 0..254"},
      {"resubmit(,300)", "out-of-range value '300' at column 11: table must be 0..254"},
      {"resubmit(in_port,)",
       "bad resubmit 'in_port,' at column 10: give a port or a table (in_port alone "
       "resubmits nowhere new)"},
      {"resubmit(1,2,ct)", "unsupported resubmit option 'ct' at column 14: keel has no conntrack"},
      {"mod_dl_src:00:11:22:33:44", "bad Ethernet address '00:11:22:33:44' at column 12"},
      {"mod_nw_dst:10.0.0.300", "bad IPv4 address '10.0.0.300' at column 12"},
      {"mod_nw_tos:17", "bad TOS value '17' at column 12: mod_nw_tos sets the DSCP bits, a multiple of 4"},
      {"mod_nw_ecn:4", "out-of-range value '4' at column 12: ECN must be 0..3"},
      {"mod_tp_src:65536", "out-of-range value '65536' at column 12: port must be 0..65535"},
      {"push_vlan:0x800", "bad VLAN ethertype '0x800' at column 11: push_vlan takes 0x8100 or 0x88a8"},
      {"load:0x100->NXM_NX_REG0[0..7]",
       "out-of-range value '0x100' at column 6: the value does not fit into 8 bits"},
      {"load:1->NXM_NX_REG0[40]", "bad bit range '40' at column 21: reg0 is only 32 bits wide"},
      {"load:1->NXM_NX_REG0[5..2]",
       "bad bit range '5..2' at column 21: the starting bit is after the ending bit"},
      {"load:1->NXM_NX_FOO[]", "unknown field 'NXM_NX_FOO' at column 9"},
      {"load:1->NXM_OF_ETH_TYPE[]",
       "read-only field 'NXM_OF_ETH_TYPE[]' at column 9: eth_type cannot be written"},
      {"load:xyz->reg0[]", "bad load value 'xyz' at column 6: expected a decimal or 0x-hex number"},
      {"load:1", "missing '->' in '1' at column 6"},
      {"load:1->", "missing field after '->' in '1->' at column 6"},
      {"move:reg0[]->reg1[0..15]",
       "mismatched widths in 'reg0[]->reg1[0..15]' at column 6: the source is 32 bits wide but the "
       "destination is "
       "16"},
      {"move:reg0[]->nw_proto[0..31]", "bad bit range '0..31' at column 23: nw_proto is only 8 bits wide"},
      {"move:NXM_NX_REG0[]->NXM_NX_TCP_FLAGS[]",
       "read-only field 'NXM_NX_TCP_FLAGS[]' at column 21: tcp_flags cannot be written"},
      {"set_field:1->foo", "unknown field 'foo' at column 14"},
      {"set_field:1->nw_proto", "read-only field 'nw_proto' at column 14: nw_proto cannot be written"},
      {"set_field:1/1->nw_ttl", "unexpected mask in '1/1' at column 11: nw_ttl is not maskable"},
      {"set_field:0x100000000->reg0",
       "out-of-range value '0x100000000' at column 11: reg0 must be 0..4294967295"},
      {"set_field:zz->eth_src", "bad Ethernet address 'zz' at column 11"},
      {"set_field:5->nw_tos", "bad nw_tos value '5' at column 11: nw_tos is the DSCP field, a multiple of 4"},
      {"output:1,drop", "unexpected 'drop' at column 10: drop must not be accompanied by any other action"},
      {"goto_table:2,output:1",
       "action after goto_table 'output' at column 14: goto_table must be the last action"},
      {"output", "missing value for 'output' at column 1"},
      {"output(port=1,max_len=10)",
       "bad max_len 'port=1,max_len=10' at column 8: max_len 10 is less than the minimum value 14"},
      {"output(port=1)", "incomplete output 'port=1' at column 8: output(port=N,max_len=M) needs both"},
      {"output:NXM_NX_REG9[]", "unknown field 'NXM_NX_REG9' at column 8"},
      {"controller(foo=1)", "unknown controller option 'foo' at column 12: expected reason, max_len or id"},
      {"controller(reason=bar)",
       "unknown controller reason 'bar' at column 19: expected no_match, action, invalid_ttl, action_set, "
       "group or "
       "packet_out"},
      {"controller(userdata=01)",
       "unsupported controller option 'userdata' at column 12: keel implements reason, max_len and id"},
      {"controller:70000", "out-of-range value '70000' at column 12: max_len must be 0..65535"},
      {"dec_ttl(1,x)", "bad controller id value 'x' at column 11: expected a decimal or 0x-hex number"},
      {"note:1", "bad hex digit in note '1' at column 6: write bytes as pairs of hex digits: note:01.ab.ff"},
      {"output:(1", "unbalanced parenthesis '(1' at column 8: no matching ')'"},
      {"output:1)", "unmatched parenthesis ')' at column 9"},
      {"resubmit(1,2)x", "unexpected text after ')' 'x' at column 14: separate actions with ','"},
      {"strip_vlan:1", "unexpected argument '1' at column 12: strip_vlan takes none"},
  };
  for (const E& e : cases) {
    CAPTURE(e.input);
    CHECK(parse_err(e.input) == e.message);
  }
}

TEST_CASE("of_actions: columns count from the start of the flow line") {
  std::string line = "priority=10,in_port=1,actions=output:2,mod_vlan_vid:5000";
  auto flow = parse_of_flow(line);
  REQUIRE(flow.ok());
  auto r = parse_of_actions(flow->actions, {}, flow->actions_column);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "out-of-range value '5000' at column 53: VLAN VID must be 0..4095");
  CHECK(line.substr(52, 4) == "5000");
}

TEST_CASE("of_actions: check_of_actions") {
  // Prerequisites of what the actions write: the OpenFlow 1.0 actions
  // mod_nw_*, mod_tp_* and dec_ttl have none (Open vSwitch 3.1 loads them and
  // they do nothing on a packet without the header); their set_field
  // spellings do (see the table-driven case below).
  CHECK(check("ip", "mod_nw_src:1.2.3.4") == "ok");
  CHECK(check("", "mod_nw_src:1.2.3.4") == "ok");
  CHECK(check("arp", "mod_nw_src:1.2.3.4") == "ok");
  CHECK(check("", "set_field:1.2.3.4->ip_src") ==
        "action 1 'mod_nw_src:1.2.3.4': set_field ip_src requires ip (dl_type=0x0800) in the match");
  CHECK(check("tcp", "mod_tp_dst:80") == "ok");
  CHECK(check("udp6", "mod_tp_src:80") == "ok");
  CHECK(check("sctp", "mod_tp_src:80") == "ok");
  CHECK(check("icmp", "mod_tp_dst:80") == "ok");
  CHECK(check("ip", "output:1,set_field:80->tcp_dst") ==
        "action 2 'mod_tp_dst:80': set_field tcp_dst requires tcp or tcp6 (nw_proto=6), not a later fragment "
        "in "
        "the match");
  CHECK(check("tcp,ip_frag=later", "set_field:80->tcp_dst") != "ok");
  CHECK(check("ipv6", "dec_ttl") == "ok");
  CHECK(check("arp", "dec_ttl") == "ok");
  CHECK(check("ip", "mod_nw_tos:16") == "ok");
  CHECK(check("", "set_field:16->nw_tos") != "ok");
  // A flow only OpenFlow 1.1+ carries checks them as OVS does there.
  CHECK(check("", "mod_nw_src:1.2.3.4,goto_table:1") ==
        "action 1 'mod_nw_src:1.2.3.4': set_field ip_src requires ip (dl_type=0x0800) in the match");
  CHECK(check("ip", "output:1,mod_tp_dst:80,goto_table:1") ==
        "action 2 'mod_tp_dst:80': mod_tp_dst requires tcp, udp or sctp (not a later fragment) in the match");
  CHECK(check("", "mod_dl_src:00:00:00:00:00:01,set_tunnel:5,note:00") == "ok");
  // load / set_field / move: the fields' prerequisites.
  CHECK(check("tcp", "set_field:1->tcp_dst") == "ok");
  CHECK(check("", "load:1->NXM_OF_TCP_DST[]") ==
        "action 1 'load:0x1->NXM_OF_TCP_DST[]': tcp_dst requires tcp or tcp6 (nw_proto=6), not a later "
        "fragment in "
        "the match");
  CHECK(check("udp", "load:1->NXM_OF_TCP_DST[]") != "ok");
  CHECK(check("", "load:1->NXM_NX_REG0[],move:NXM_NX_REG0[]->NXM_NX_REG1[]") == "ok");
  CHECK(check("", "move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]") ==
        "action 1 'move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]': ip_src requires ip (dl_type=0x0800) in the match");
  CHECK(check("arp",
              "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],load:2->NXM_OF_ARP_OP[],"
              "move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]") == "ok");
  CHECK(check("ip", "load:2->NXM_OF_ARP_OP[]") != "ok");
  CHECK(check("ipv6", "set_field:fe80::1->ipv6_src") == "ok");
  CHECK(check("ip", "set_field:fe80::1->ipv6_src") != "ok");
  CHECK(check("icmp6,icmp_type=135,icmp_code=0", "load:1->NXM_NX_ND_SLL[0..7]") == "ok");
  CHECK(check("icmp6,icmp_type=136,icmp_code=0", "load:1->NXM_NX_ND_SLL[0..7]") != "ok");
  // VLAN: vlan_vid/vlan_pcp subfields need a tag; push_vlan / mod_vlan_vid make one.
  CHECK(check("", "load:1->OXM_OF_VLAN_VID[]") != "ok");
  CHECK(check("dl_vlan=5", "load:1->OXM_OF_VLAN_VID[]") == "ok");
  CHECK(check("", "push_vlan:0x8100,load:1->OXM_OF_VLAN_VID[]") == "ok");
  CHECK(check("", "mod_vlan_vid:3,move:NXM_NX_REG0[0..2]->OXM_OF_VLAN_PCP[]") == "ok");
  CHECK(check("dl_vlan=5", "strip_vlan,load:1->OXM_OF_VLAN_VID[]") != "ok");
  CHECK(check("", "load:0x1005->NXM_OF_VLAN_TCI[],load:1->OXM_OF_VLAN_VID[]") == "ok");
  CHECK(check("", "push_vlan:0x88a8,push_vlan:0x8100") == "ok");
  CHECK(check("", "push_vlan:0x88a8,push_vlan:0x8100,push_vlan:0x8100") ==
        "action 3 'push_vlan:0x8100': a packet has at most two VLAN tags");
  CHECK(check("", "strip_vlan,output:1") == "ok");  // OpenFlow 1.0 accepts it: a no-op untagged
  // Output ports.
  CHECK(check("", "output:1,output:65279,IN_PORT,TABLE,NORMAL,FLOOD,ALL,CONTROLLER:64,LOCAL") == "ok");
  CHECK(
      check("", "65280") ==
      "action 1 '65280': invalid output port (ports are below 0xff00, or IN_PORT, TABLE, NORMAL, FLOOD, ALL, "
      "CONTROLLER, LOCAL)");
  CHECK(check("", "output:65535") != "ok");
  CHECK(check("", "output:4294967295") != "ok");
  CHECK(check("", "output:0xfff7") != "ok");
  // goto_table: last, and to a later table.
  CHECK(check("", "output:1,goto_table:3", 2) == "ok");
  CHECK(check("", "goto_table:3", 255) == "ok");
  CHECK(check("", "goto_table:2", 2) ==
        "action 1 'goto_table:2': goto_table must go to a later table than this flow's table 2");
  CHECK(check("", "goto_table:1", 2) != "ok");
  OfActions bad{OfGotoTable{5}, OfOutput{1, 0}};
  CHECK(check_of_actions(bad, Match{}, 0).message() ==
        "action 1 'goto_table:5': goto_table must be the last action");
  // Programmatically built lists are checked too.
  OfActions wide{OfLoad{{OfFieldId::reg0, 0, 4}, 0x10}};
  CHECK_FALSE(check_of_actions(wide, Match{}, 0).ok());
  OfActions ro{OfLoad{{OfFieldId::nw_proto, 0, 8}, 1}};
  CHECK(check_of_actions(ro, match_ok("ip"), 0).message() ==
        "action 1 'load:0x1->NXM_OF_IP_PROTO[]': nw_proto is read-only");
}

TEST_CASE("of_fields: registry names and lookups") {
  CHECK(find_of_field("eth_src") == &of_field(OfFieldId::eth_src));
  CHECK(find_of_field("dl_src") == &of_field(OfFieldId::eth_src));
  CHECK(find_of_field("tp_dst") == &of_field(OfFieldId::tcp_dst));
  CHECK(find_of_field("NXM_OF_ETH_SRC") == nullptr);
  CHECK(find_of_field_any("NXM_OF_ETH_SRC") == &of_field(OfFieldId::eth_src));
  CHECK(find_of_field_any("OXM_OF_ETH_SRC") == &of_field(OfFieldId::eth_src));
  CHECK(find_of_field_any("reg5") == &of_field(OfFieldId::reg5));
  CHECK(find_of_field_any("") == nullptr);
  for (const OfFieldInfo& f : of_fields()) {
    CAPTURE(f.name);
    CHECK(&of_field(f.id) == &f);
    CHECK(find_of_field(f.name) == &f);
    CHECK(find_of_field_any(f.nxm) == &f);
    CHECK(f.n_bits >= 1);
    CHECK(f.n_bits <= 128);
    // The printed subfield reads back.
    OfSubfield sf = OfSubfield::whole(f.id), back;
    std::string s;
    format_of_subfield(s, sf);
    REQUIRE(parse_of_subfield(s, 1, back).ok());
    CHECK(back == sf);
  }
  OfSubfield sf;
  REQUIRE(parse_of_subfield("reg0[4..11]", 1, sf).ok());
  CHECK(sf == OfSubfield{OfFieldId::reg0, 4, 8});
  REQUIRE(parse_of_subfield("NXM_NX_REG0[7]", 1, sf).ok());
  CHECK(sf == OfSubfield{OfFieldId::reg0, 7, 1});
  REQUIRE(parse_of_subfield("tun_id", 1, sf).ok());
  CHECK(sf == OfSubfield{OfFieldId::tun_id, 0, 64});
  std::string s;
  format_of_subfield(s, {OfFieldId::ipv6_src, 64, 64});
  CHECK(s == "NXM_NX_IPV6_SRC[64..127]");
}

TEST_CASE("of_fields: OfValue bit operations") {
  OfValue v = OfValue::from_u64(0x8000000000000001ull);
  CHECK(v.bit(0));
  CHECK(v.bit(63));
  CHECK_FALSE(v.bit(64));
  CHECK((v << 1).bit(64));
  CHECK((v << 1).low64() == 2);
  CHECK((v << 64).high64() == 0x8000000000000001ull);
  CHECK((v << 64).low64() == 0);
  CHECK(((OfValue::from_u64(0x1234) << 100) >> 100) == OfValue::from_u64(0x1234));
  CHECK(OfValue::ones(4, 8).low64() == 0xff0);
  CHECK(OfValue::ones(0, 128) == ~OfValue{});
  CHECK(OfValue::ones(60, 8).high64() == 0xf);
  CHECK(OfValue::ones(60, 8).low64() == 0xf000000000000000ull);
  CHECK(v.bit_width() == 64);
  CHECK((v << 3).bit_width() == 67);
  CHECK(OfValue{}.bit_width() == 0);
}

TEST_CASE("of_fields: read, write and unwildcard respect how FlowKey stores each field") {
  FlowKey k{};
  // reg0[4..11]: host order, bits in place.
  k.regs[0] = 0xffff000f;
  write_subfield(k, {OfFieldId::reg0, 4, 8}, OfValue::from_u64(0xab));
  CHECK(k.regs[0] == 0xffff0abf);
  CHECK(read_subfield(k, {OfFieldId::reg0, 4, 8}).low64() == 0xab);
  CHECK(read_field(k, OfFieldId::reg0).low64() == 0xffff0abf);
  FlowKey m{};
  unwildcard_subfield(m, {OfFieldId::reg0, 4, 8});
  CHECK(m.regs[0] == 0x00000ff0);
  CHECK(m.regs[1] == 0);
  // 128-bit fields: IPv6 addresses in network order, bit 0 = last byte's LSB.
  In6Addr a{};
  REQUIRE(text::parse_ipv6("fe80::1:2", a));
  write_field(
      k, OfFieldId::ipv6_src,
      [&] {
        OfValue v;
        std::memcpy(v.b.data(), a.b, 16);
        return v;
      }(),
      OfValue::ones(0, 128));
  CHECK(k.ipv6_src == a);
  CHECK(read_subfield(k, {OfFieldId::ipv6_src, 0, 32}).low64() == 0x00010002);
  CHECK(read_subfield(k, {OfFieldId::ipv6_src, 112, 16}).low64() == 0xfe80);
  CHECK(read_subfield(k, {OfFieldId::ipv6_src, 60, 8}).low64() == 0);
  write_subfield(k, {OfFieldId::ipv6_src, 60, 8}, OfValue::from_u64(0xa5));
  CHECK(k.ipv6_src.b[7] == 0x0a);
  CHECK(k.ipv6_src.b[8] == 0x50);
  CHECK(read_subfield(k, {OfFieldId::ipv6_src, 60, 8}).low64() == 0xa5);
  unwildcard_subfield(m, {OfFieldId::ipv6_dst, 60, 8});
  CHECK(m.ipv6_dst.b[7] == 0x0f);
  CHECK(m.ipv6_dst.b[8] == 0xf0);
  CHECK(m.ipv6_dst.b[6] == 0);
  CHECK(m.ipv6_dst.b[9] == 0);
  // Ports and other packet fields: network order.
  write_field(k, OfFieldId::tcp_dst, OfValue::from_u64(80), OfValue::ones(0, 16));
  CHECK(k.tp_dst == hton16(80));
  CHECK(read_field(k, OfFieldId::udp_dst).low64() == 80);
  write_subfield(k, {OfFieldId::ip_src, 24, 8}, OfValue::from_u64(10));
  CHECK(k.nw_src == hton32(0x0a000000));
  write_field(k, OfFieldId::eth_dst, OfValue::from_u64(0x0123456789ab), OfValue::ones(0, 48));
  CHECK(k.dl_dst == EthAddr{{0x01, 0x23, 0x45, 0x67, 0x89, 0xab}});
  write_field(k, OfFieldId::tun_id, OfValue::from_u64(0x1122), OfValue::ones(0, 64));
  CHECK(k.tun_id == text::hton64(0x1122));
  write_field(k, OfFieldId::metadata, OfValue::from_u64(7), OfValue::ones(0, 64));
  CHECK(k.metadata == text::hton64(7));
  // in_port: 16 bits of a host-order uint32.
  write_field(k, OfFieldId::in_port, OfValue::from_u64(0xfffe), OfValue::ones(0, 16));
  CHECK(k.in_port == 0xfffe);
  // VLAN: vlan_vid and vlan_pcp set CFI; vlan_tci is the whole TCI.
  FlowKey v{};
  write_field(v, OfFieldId::vlan_vid, OfValue::from_u64(100), OfValue::ones(0, 12));
  CHECK(v.vlans[0].tci == hton16(0x1000 | 100));
  write_field(v, OfFieldId::vlan_pcp, OfValue::from_u64(5), OfValue::ones(0, 3));
  CHECK(v.vlans[0].tci == hton16(0xb000 | 100));
  CHECK(read_field(v, OfFieldId::vlan_pcp).low64() == 5);
  CHECK(read_field(v, OfFieldId::vlan_vid).low64() == 100);
  CHECK(read_field(v, OfFieldId::vlan_tci).low64() == 0xb064);
  write_field(v, OfFieldId::vlan_tci, OfValue{}, OfValue::ones(0, 16));
  CHECK(v.vlans[0].tci == 0);
  FlowKey vm{};
  unwildcard_field(vm, OfFieldId::vlan_vid, OfValue::ones(0, 12));
  CHECK(vm.vlans[0].tci == hton16(0x1fff));
  // nw_tos (DSCP in place), ip_dscp (shifted), nw_ecn share the TOS byte.
  FlowKey t{};
  t.nw_tos = 0x03;
  write_field(t, OfFieldId::ip_dscp, OfValue::from_u64(46), OfValue::ones(0, 6));
  CHECK(t.nw_tos == (184 | 3));
  CHECK(read_field(t, OfFieldId::nw_tos).low64() == 184);
  CHECK(read_field(t, OfFieldId::nw_ecn).low64() == 3);
  write_field(t, OfFieldId::nw_tos, OfValue::from_u64(0xff), OfValue::ones(0, 8));
  CHECK(t.nw_tos == 0xff);  // ECN bits kept, DSCP all ones
  write_field(t, OfFieldId::nw_ecn, OfValue{}, OfValue::ones(0, 2));
  CHECK(t.nw_tos == 0xfc);
  FlowKey tm{};
  unwildcard_field(tm, OfFieldId::nw_tos, OfValue::ones(0, 8));
  CHECK(tm.nw_tos == 0xfc);
  CHECK(field_valid_bits(OfFieldId::nw_tos).low64() == 0xfc);
  // ICMP type/code: the low byte of tp_src/tp_dst; arp_op: nw_proto.
  write_field(t, OfFieldId::icmp_type, OfValue::from_u64(8), OfValue::ones(0, 8));
  CHECK(t.tp_src == hton16(8));
  write_field(t, OfFieldId::arp_op, OfValue::from_u64(2), OfValue::ones(0, 16));
  CHECK(t.nw_proto == 2);
  CHECK(read_field(t, OfFieldId::arp_op).low64() == 2);
  // A zero mask writes nothing.
  FlowKey before = t;
  write_field(t, OfFieldId::reg3, OfValue::from_u64(5), OfValue{});
  CHECK(t == before);
}

TEST_CASE("of_fields: writing a field equals matching it in the match syntax") {
  struct C {
    OfFieldId id;
    uint64_t value;
    const char* match;  // the same value as an ovs-ofctl match
    const char* prereq;
  };
  const C cases[] = {
      {OfFieldId::reg3, 0xdeadbeef, "reg3=0xdeadbeef", ""},
      {OfFieldId::pkt_mark, 7, "pkt_mark=7", ""},
      {OfFieldId::metadata, 0x1122334455667788ull, "metadata=0x1122334455667788", ""},
      {OfFieldId::tun_id, 0x55, "tun_id=0x55", ""},
      {OfFieldId::tun_src, 0x01020304, "tun_src=1.2.3.4", ""},
      {OfFieldId::eth_src, 0x0000000000ab, "dl_src=00:00:00:00:00:ab", ""},
      {OfFieldId::eth_dst, 0x112233445566, "dl_dst=11:22:33:44:55:66", ""},
      {OfFieldId::vlan_tci, 0x1064, "vlan_tci=0x1064", ""},
      {OfFieldId::ip_src, 0x0a000001, "nw_src=10.0.0.1", "ip,"},
      {OfFieldId::ip_dst, 0x0a000002, "nw_dst=10.0.0.2", "ip,"},
      {OfFieldId::nw_tos, 184, "nw_tos=184", "ip,"},
      {OfFieldId::ip_dscp, 46, "ip_dscp=46", "ip,"},
      {OfFieldId::nw_ecn, 2, "nw_ecn=2", "ip,"},
      {OfFieldId::nw_ttl, 9, "nw_ttl=9", "ip,"},
      {OfFieldId::tcp_src, 80, "tcp_src=80", "tcp,"},
      {OfFieldId::udp_dst, 53, "udp_dst=53", "udp,"},
      {OfFieldId::sctp_dst, 9, "sctp_dst=9", "sctp,"},
      {OfFieldId::icmp_type, 8, "icmp_type=8", "icmp,"},
      {OfFieldId::icmp_code, 3, "icmp_code=3", "icmp,"},
      {OfFieldId::arp_op, 2, "arp_op=2", "arp,"},
      {OfFieldId::arp_spa, 0x0a000001, "arp_spa=10.0.0.1", "arp,"},
      {OfFieldId::arp_tha, 0x1, "arp_tha=00:00:00:00:00:01", "arp,"},
      {OfFieldId::ipv6_label, 0x12345, "ipv6_label=0x12345", "ipv6,"},
      {OfFieldId::tcp_flags, 0x012, "tcp_flags=0x012/0xfff", "tcp,"},
  };
  for (const C& c : cases) {
    INFO("match: " << c.match);
    Match base =
        match_ok(std::string(c.prereq).empty() ? "" : std::string(c.prereq).substr(0, strlen(c.prereq) - 1));
    Match want = match_ok(std::string(c.prereq) + c.match);
    Match got = base;
    OfValue all = field_valid_bits(c.id);
    write_field(got.key, c.id, OfValue::from_u64(c.value), all);
    unwildcard_field(got.mask, c.id, all);
    CHECK(got == want);
    CHECK(read_field(want.key, c.id).low64() == c.value);
  }
  // in_port: the match syntax matches all 32 bits of FlowKey::in_port; the
  // field (NXM_OF_IN_PORT) is 16 bits wide, so unwildcard marks those.
  {
    Match want = match_ok("in_port=5");
    FlowKey k{}, mk{};
    write_field(k, OfFieldId::in_port, OfValue::from_u64(5), OfValue::ones(0, 16));
    unwildcard_field(mk, OfFieldId::in_port, OfValue::ones(0, 16));
    CHECK(k == want.key);
    CHECK(mk.in_port == 0xffff);
  }
  // 128-bit: ipv6_src / nd_target.
  Match want = match_ok("ipv6,ipv6_src=2001:db8::1");
  Match got = match_ok("ipv6");
  In6Addr a{};
  REQUIRE(text::parse_ipv6("2001:db8::1", a));
  OfValue v;
  std::memcpy(v.b.data(), a.b, 16);
  write_field(got.key, OfFieldId::ipv6_src, v, OfValue::ones(0, 128));
  unwildcard_field(got.mask, OfFieldId::ipv6_src, OfValue::ones(0, 128));
  CHECK(got == want);
}

TEST_CASE("of_actions: of_action_field_write for translation") {
  auto w = of_action_field_write(OfSetL4Dst{443});
  REQUIRE(w);
  FlowKey k{};
  write_field(k, w->field, w->value, w->mask);
  CHECK(k.tp_dst == hton16(443));
  w = of_action_field_write(parse_ok("load:0xab->reg0[4..11]")[0]);
  REQUIRE(w);
  write_field(k, w->field, w->value, w->mask);
  CHECK(k.regs[0] == 0xab0);
  w = of_action_field_write(OfSetIpDscp{184});
  REQUIRE(w);
  k.nw_tos = 1;
  write_field(k, w->field, w->value, w->mask);
  CHECK(k.nw_tos == 185);
  w = of_action_field_write(OfSetIpv4Dst{hton32(0x0a000001)});
  REQUIRE(w);
  write_field(k, w->field, w->value, w->mask);
  CHECK(k.nw_dst == hton32(0x0a000001));
  w = of_action_field_write(OfSetEthSrc{{{1, 2, 3, 4, 5, 6}}});
  REQUIRE(w);
  write_field(k, w->field, w->value, w->mask);
  CHECK(k.dl_src == EthAddr{{1, 2, 3, 4, 5, 6}});
  CHECK_FALSE(of_action_field_write(OfOutput{1, 0}));
  CHECK_FALSE(of_action_field_write(OfSetVlanVid{1}));
}

TEST_CASE("of_actions: long lists round-trip") {
  std::string all;
  for (const Case& c : kCases) {
    if (std::string(c.input).find("drop") != std::string::npos) continue;
    if (!all.empty()) all += ',';
    all += c.input;
  }
  OfActions a = parse_ok(all);
  std::string printed = format_of_actions(a);
  CHECK(parse_ok(printed) == a);
  CHECK(format_of_actions(parse_ok(printed)) == printed);
  // White space separates actions too.
  CHECK(parse_ok(" output:1  output:2\tNORMAL ") == parse_ok("output:1,output:2,NORMAL"));
}

// What `ovs-ofctl add-flow` of Open vSwitch 3.1 accepts and refuses, observed
// on a private ovs-vswitchd (netdev bridge, dummy ports): flows OpenFlow 1.0
// can carry with the default protocol, the others with -O OpenFlow13.
// Refused at parse time or by the consistency check; keel must agree.
struct AcceptCase {
  const char* match;
  const char* actions;
  bool accepted;
};
const AcceptCase kAcceptCases[] = {
    // OpenFlow 1.0 actions: no prerequisites.
    {"arp", "mod_nw_src:1.2.3.4", true},
    {"arp", "mod_nw_dst:1.2.3.4", true},
    {"arp", "mod_nw_tos:4", true},
    {"arp", "mod_tp_src:1", true},
    {"arp", "dec_ttl", true},
    {"", "mod_nw_src:1.2.3.4", true},
    {"", "mod_nw_tos:4", true},
    {"", "mod_tp_dst:1", true},
    {"", "dec_ttl", true},
    {"ipv6", "mod_nw_src:1.2.3.4", true},
    {"ipv6", "mod_nw_tos:4", true},
    {"ipv6", "dec_ttl", true},
    {"ip", "mod_tp_src:1", true},
    {"icmp", "mod_tp_src:1", true},
    {"tcp,nw_frag=later", "mod_tp_dst:1", true},
    {"rarp", "mod_nw_src:1.2.3.4", true},
    {"dl_type=0x8847", "mod_nw_src:1.2.3.4", true},
    {"", "mod_vlan_pcp:5", true},
    {"", "strip_vlan", true},
    {"", "mod_vlan_vid:5,set_field:5->vlan_pcp", true},
    // mod_nw_ttl and mod_nw_ecn are NXM loads: they need ip.
    {"", "mod_nw_ttl:3", false},
    {"", "mod_nw_ecn:1", false},
    {"arp", "mod_nw_ttl:3", false},
    {"ip", "mod_nw_ttl:3", true},
    {"ip", "mod_nw_ecn:1", true},
    // set_field / load / move: the field's prerequisites.
    {"arp", "set_field:1.2.3.4->ip_src", false},
    {"arp", "load:1->NXM_OF_IP_SRC[]", false},
    {"arp", "load:1->NXM_OF_ARP_TPA[]", true},
    {"arp", "set_field:1.2.3.4->arp_spa", true},
    {"arp", "move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]", true},
    {"rarp", "load:1->NXM_OF_ARP_TPA[]", true},
    {"ip", "load:1->NXM_OF_ARP_TPA[]", false},
    {"tcp", "set_field:1->udp_src", false},
    {"tcp", "load:1->NXM_OF_UDP_SRC[]", false},
    {"", "set_field:1->tcp_src", false},
    {"ip", "set_field:1->tcp_src", false},
    {"", "set_field:5->vlan_pcp", false},
    {"", "set_field:4101->vlan_vid", false},
    {"", "strip_vlan,set_field:5->vlan_pcp", false},
    {"vlan_tci=0x1000/0x1000", "set_field:5->vlan_pcp", true},
    {"", "set_field:0x1005->vlan_tci", true},
    {"", "load:5->NXM_OF_VLAN_TCI[0..11]", true},
    {"", "load:5->OXM_OF_VLAN_VID[]", false},
    {"", "move:NXM_NX_REG0[0..11]->OXM_OF_VLAN_VID[]", true},
    {"", "set_field:00:00:00:00:00:01->eth_src", true},
    {"", "set_field:1->ip_dscp", false},
    {"ip", "set_field:1->ip_dscp", true},
    {"ip", "set_field:1->ip_ecn", true},
    {"", "set_field:4->nw_tos", false},
    {"ip", "set_field:1->nw_tos", false},  // not a multiple of 4
    {"", "load:1->NXM_NX_IP_TTL[]", false},
    {"ipv6", "set_field:::1->ipv6_src", true},
    {"ip", "set_field:::1->ipv6_src", false},
    {"icmp", "set_field:1->icmp_type", true},
    {"icmp6", "set_field:1->icmpv6_type", true},
    {"ip", "move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]", true},
    {"", "move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]", false},
    {"", "move:NXM_NX_REG0[]->NXM_OF_IP_SRC[]", false},
    {"arp", "move:NXM_NX_ARP_SHA[]->NXM_OF_ETH_SRC[]", true},
    {"arp", "set_field:00:00:00:00:00:01->arp_sha", true},
    {"ip", "set_field:00:00:00:00:00:01->arp_sha", false},
    {"", "push_vlan:0x8100,set_field:5->vlan_pcp", true},
    {"", "push_vlan:0x8100,push_vlan:0x8100,push_vlan:0x8100", false},
    // Flows only OpenFlow 1.1+ carries (-O OpenFlow13): the OpenFlow 1.0
    // actions need their headers.
    {"", "strip_vlan,goto_table:1", false},
    {"", "set_field:0x0->vlan_tci,push_vlan:0x8100", true},  // conformance case 1-2-rewrite
    // set_field:0->vlan_tci zeroes the outer TCI and keeps the tag under it:
    // a third push is one too many (OFPBAC_BAD_TAG; conformance 2-634-rewrite).
    {"dl_vlan=10", "push_vlan:0x8100,set_field:0->vlan_tci,push_vlan:0x88a8,output:2", false},
    {"dl_vlan=10", "set_field:0->vlan_tci,push_vlan:0x88a8,output:2", true},
    {"", "output:NXM_OF_IP_SRC[0..15]", false},
    {"ip", "output:NXM_OF_IP_SRC[0..15]", true},
    {"", "mod_nw_src:1.1.1.1,goto_table:1", false},
    {"arp", "mod_nw_src:1.1.1.1,goto_table:1", false},
    {"ipv6", "mod_nw_src:1.1.1.1,goto_table:1", false},
    {"", "dec_ttl,goto_table:1", false},
    {"", "mod_tp_src:1,goto_table:1", false},
    {"ip", "mod_tp_src:1,goto_table:1", false},
    {"icmp", "mod_tp_src:1,goto_table:1", false},
    {"", "mod_nw_tos:4,goto_table:1", false},
    {"", "mod_nw_src:1.1.1.1,clear_actions", false},
    {"", "mod_nw_src:1.1.1.1,write_metadata:1", false},
    {"", "push_vlan:0x8100,mod_nw_src:1.1.1.1", false},
    {"", "mod_vlan_pcp:1,goto_table:1", true},
    {"", "mod_vlan_vid:1,goto_table:1", true},
    {"", "push_vlan:0x8100,strip_vlan", true},
    {"", "mod_dl_src:00:00:00:00:00:01,goto_table:1", true},
    {"", "set_tunnel:1,goto_table:1", true},
    {"", "load:1->NXM_NX_REG0[],goto_table:1", true},
    {"", "push_vlan:0x8100,set_field:5->vlan_pcp,goto_table:1", true},
    {"", "mod_vlan_vid:1,set_field:5->vlan_pcp,goto_table:1", true},
    // Inside write_actions: mod_nw_* are set_fields, the rest unchecked.
    {"", "write_actions(strip_vlan)", true},
    {"", "write_actions(dec_ttl)", true},
    {"", "write_actions(dec_ttl(1,2))", true},
    {"", "write_actions(mod_tp_src:1)", true},
    {"ip", "write_actions(mod_tp_src:1)", true},
    {"tcp", "write_actions(mod_tp_src:1)", true},
    {"", "write_actions(mod_vlan_vid:3)", true},
    {"", "write_actions(mod_vlan_pcp:1)", true},
    {"ipv6", "write_actions(mod_nw_tos:4)", true},
    {"ip", "write_actions(mod_nw_src:1.1.1.1)", true},
    {"", "write_actions(mod_nw_tos:4)", false},
    {"arp", "write_actions(mod_nw_dst:1.1.1.1)", false},
    {"", "write_actions(set_field:1.1.1.1->ip_src)", false},
    {"", "write_actions(set_field:1->tcp_src)", false},
    {"", "write_actions(load:1->NXM_NX_IP_TTL[])", false},
    {"", "write_actions(push_vlan:0x8100,set_field:5->vlan_pcp)", true},
    {"", "write_actions(push_vlan:0x8100,push_vlan:0x8100,push_vlan:0x8100)", false},
    {"", "push_vlan:0x8100,set_field:4097->vlan_vid,write_actions(set_field:1->vlan_pcp)", true},
    {"vlan_tci=0x1000/0x1000", "strip_vlan,write_actions(set_field:3->vlan_pcp)", false},
    // Instructions: syntax, order, what an action set may hold.
    {"", "output:2,clear_actions,write_actions(mod_vlan_vid:3,output:3),write_metadata:0x5/0xff,goto_table:2",
     true},
    {"", "write_actions(output:3,mod_dl_src:00:00:00:00:00:01,output:2)", true},
    {"", "write_actions(set_field:1->reg0,load:2->NXM_NX_REG0[])", true},
    {"", "write_actions(resubmit(,2))", true},
    {"", "write_actions(resubmit(,2),output:3)", true},
    {"", "write_actions(IN_PORT)", true},
    {"", "write_actions(controller)", true},
    {"", "clear_actions", true},
    {"", "write_actions(drop)", true},
    {"", "write_actions()", true},
    {"", "write_actions", true},
    {"", "write_metadata:0x5/0xff", true},
    {"", "WRITE_METADATA:3", true},
    {"", "write_metadata:0x5,output:2", false},
    {"", "write_actions(output:2),write_actions(output:3)", false},
    {"", "goto_table:2,output:1", false},
    {"", "clear_actions,output:1", false},
    {"", "write_actions(output:1),clear_actions", false},
    {"", "write_metadata:1,write_actions(output:1)", false},
    {"", "write_metadata:1,write_metadata:2", false},
    {"", "clear_actions,clear_actions", false},
    {"", "write_metadata:0x1/0x1/0x2", false},
    {"", "write_metadata:zz", false},
    {"", "write_metadata", false},
    {"", "write_metadata:0x10000000000000000", false},
    {"", "drop,clear_actions", false},
    {"", "write_actions(output:2,drop)", false},
    {"", "write_actions(note:00)", false},
    {"", "write_actions(goto_table:1)", false},
    {"", "write_actions(controller(reason=no_match))", false},
    {"", "write_actions(write_metadata:1)", false},
};

TEST_CASE("of_actions: accepts and refuses what ovs-ofctl add-flow of Open vSwitch 3.1 does") {
  for (const AcceptCase& c : kAcceptCases) {
    CAPTURE(c.match);
    CAPTURE(c.actions);
    auto a = parse_of_actions(c.actions);
    const bool accepted = a.ok() && check_of_actions(a.value(), match_ok(c.match), 0).ok();
    CHECK(accepted == c.accepted);
  }
  // table=1,actions=clear_actions,goto_table:1: OFPBIC_BAD_TABLE_ID.
  CHECK(check("", "clear_actions,goto_table:1", 1) != "ok");
}

TEST_CASE("of_actions: instructions print as dump-flows -O OpenFlow13 shows them and round-trip") {
  // OVS prints the nested actions in OpenFlow 1.3 spelling (set_field:...->
  // eth_src); keel prints every action in its one canonical spelling.
  CHECK(canon("output:2,clear_actions,write_actions(mod_vlan_vid:3,output:3),write_metadata:0x5/0xff,"
              "goto_table:2") ==
        "output:2,clear_actions,write_actions(mod_vlan_vid:3,output:3),write_metadata:0x5/0xff,goto_table:2");
  CHECK(canon("write_metadata:0x5") == "write_metadata:0x5");
  CHECK(canon("write_metadata:0/0x1") == "write_metadata:0/0x1");
  CHECK(canon("write_metadata:0x13/0x3") == "write_metadata:0x3/0x3");
  CHECK(canon("write_actions(controller)") == "write_actions(CONTROLLER:65535)");
  CHECK(canon("write_actions(drop)") == "drop");
  CHECK(canon("write_actions()") == "drop");
  CHECK(canon("write_actions(set_field:00:00:00:00:00:01->eth_src,output:2)") ==
        "write_actions(mod_dl_src:00:00:00:00:00:01,output:2)");
  CHECK(parse_err("write_metadata:1,write_metadata:2") ==
        "duplicate instruction 'write_metadata' at column 18: write_metadata may appear only once");
  CHECK(parse_err("write_actions(output:1),clear_actions") ==
        "invalid instruction ordering at 'clear_actions' at column 25: clear_actions must appear before "
        "write_actions");
  CHECK(parse_err("write_actions(note:00)").find("disallowed action in action set 'note'") == 0);
}

TEST_CASE("of_actions: the action set runs in OpenFlow 1.1's order, one action of each kind") {
  auto list = [](const std::string& set) { return format_of_actions(of_action_set_list(parse_ok(set))); };
  // Observed with ofproto/trace ("action set is: ...").
  CHECK(list("output:3,mod_nw_dst:9.9.9.9,push_vlan:0x8100,output:2") ==
        "push_vlan:0x8100,mod_nw_dst:9.9.9.9,output:2");
  CHECK(list("output:3,dec_ttl,mod_dl_src:00:00:00:00:00:01,strip_vlan,push_vlan:0x88a8,output:2") ==
        "strip_vlan,push_vlan:0x88a8,dec_ttl,mod_dl_src:00:00:00:00:00:01,output:2");
  CHECK(list("mod_dl_src:00:00:00:00:00:01") == "drop");  // no output, nothing runs
  CHECK(list("output:2,resubmit(,2)") == "output:2");     // output outranks resubmit
  CHECK(list("resubmit(,2),resubmit(,3)") == "resubmit(,3)");
  CHECK(list("load:1->NXM_NX_REG0[],load:2->NXM_NX_REG0[],IN_PORT") ==
        "load:0x1->NXM_NX_REG0[],load:0x2->NXM_NX_REG0[],IN_PORT");
}

TEST_CASE("of_actions: what the rule tables store (OVS's OpenFlow 1.1+ encoding of mod_vlan_*)") {
  auto stored = [](const std::string& match, const std::string& actions) {
    return format_of_actions(of_actions_as_stored(parse_ok(actions), match_ok(match)));
  };
  CHECK(stored("", "mod_vlan_vid:10,output:2") == "mod_vlan_vid:10,output:2");  // OpenFlow 1.0: as is
  CHECK(stored("", "mod_vlan_vid:10,goto_table:1") == "push_vlan:0x8100,mod_vlan_vid:10,goto_table:1");
  CHECK(stored("", "mod_vlan_pcp:1,goto_table:1") == "push_vlan:0x8100,mod_vlan_pcp:1,goto_table:1");
  CHECK(stored("dl_vlan=5", "mod_vlan_vid:10,goto_table:1") == "mod_vlan_vid:10,goto_table:1");
  CHECK(stored("", "push_vlan:0x88a8,mod_vlan_vid:10,goto_table:1") ==
        "push_vlan:0x88a8,mod_vlan_vid:10,goto_table:1");
  CHECK(stored("", "mod_vlan_vid:10,mod_vlan_pcp:2,goto_table:1") ==
        "push_vlan:0x8100,mod_vlan_vid:10,mod_vlan_pcp:2,goto_table:1");
  CHECK(stored("dl_vlan=5", "strip_vlan,mod_vlan_vid:7,goto_table:1") ==
        "strip_vlan,push_vlan:0x8100,mod_vlan_vid:7,goto_table:1");
  CHECK(stored("", "load:0x1005->NXM_OF_VLAN_TCI[],mod_vlan_pcp:2,goto_table:1") ==
        "load:0x1005->NXM_OF_VLAN_TCI[],mod_vlan_pcp:2,goto_table:1");
  CHECK(stored("", "write_actions(mod_vlan_vid:3,output:3)") ==
        "write_actions(push_vlan:0x8100,mod_vlan_vid:3,output:3)");
  // set_field into vlan_tci stays a write of the TCI there (OVS keeps the
  // set_field; 0 makes a packet untagged however many tags it has).
  CHECK(stored("", "set_field:0x0->vlan_tci,push_vlan:0x8100") ==
        "load:0->NXM_OF_VLAN_TCI[],push_vlan:0x8100");
  CHECK(stored("", "push_vlan:0x88a8,set_field:0x0->vlan_tci") ==
        "push_vlan:0x88a8,load:0->NXM_OF_VLAN_TCI[]");
  CHECK(stored("", "set_field:0x1005->vlan_tci,goto_table:1") ==
        "load:0x1005->NXM_OF_VLAN_TCI[],goto_table:1");
  CHECK(stored("", "set_field:0x0->vlan_tci,output:1") == "strip_vlan,output:1");  // OpenFlow 1.0: strip_vlan
  // Stored twice is stored once.
  OfActions once = of_actions_as_stored(parse_ok("mod_vlan_vid:10,goto_table:1"), Match{});
  CHECK(of_actions_as_stored(once, Match{}) == once);
}

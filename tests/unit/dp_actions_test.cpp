// Datapath actions: text -> encoding -> text round trips (Open vSwitch 3.1's
// forms, from tests/odp.at where it has them), the forms that print
// differently from how they were typed, errors with their columns, the
// builder, the validator and for_each_output_port().
#include "flow/dp_actions.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "flow/dp_flow_syntax.h"
#include "flow/flow_text.h"

using namespace keel;
using namespace keel::flow;

namespace {

std::string round_trip(std::string_view in) {
  auto a = parse_dp_actions(in);
  if (!a.ok()) return "ERROR: " + a.status().message();
  // Whatever parses must validate, and print text that parses to the same bytes.
  CHECK(validate_dp_actions(a->bytes()).ok());
  std::string out = format_dp_actions(*a);
  auto b = parse_dp_actions(out);
  REQUIRE(b.ok());
  CHECK(*b == *a);
  return out;
}

std::string error_of(std::string_view in, size_t column = 1) {
  auto a = parse_dp_actions(in, column);
  if (a.ok()) return "no error; prints " + format_dp_actions(*a);
  return a.status().message();
}

}  // namespace

TEST_CASE("actions that print back exactly as written") {
  const char* cases[] = {
      "2",
      "drop",
      "1,2,3",
      "4294967295",
      "push_vlan(vid=10,pcp=0),2",
      "push_vlan(vid=12,pcp=0)",
      "push_vlan(vid=13,pcp=5,cfi=0)",
      "push_vlan(tpid=0x9100,vid=13,pcp=5)",
      "push_vlan(tpid=0x88a8,vid=4095,pcp=7,cfi=0)",
      "pop_vlan",
      "pop_vlan,3",
      "set(eth(src=00:01:02:03:04:05,dst=10:11:12:13:14:15))",
      "set(eth(src=00:01:02:03:04:05,dst=10:11:12:13:14:15/ff:ff:ff:00:00:00))",
      "set(eth(dst=10:11:12:13:14:15))",
      "set(ipv4(src=35.8.2.41,dst=172.16.0.20,proto=5,tos=0x80,ttl=128,frag=no))",
      "set(ipv4(src=35.8.2.41,dst=172.16.0.20,proto=5,ttl=128,frag=no))",
      "set(ipv4(src=35.8.2.41/255.255.255.0,dst=172.16.0.20,proto=5,tos=0x80,ttl=128,frag=no))",
      "set(ipv4(src=35.8.2.41/255.255.255.0,tos=0x80,ttl=128,frag=no))",
      "set(ipv4(tos=0/0x3))",
      "set(ipv4(tos=0x80/0xfc))",
      "set(ipv4(ttl=128,frag=no))",
      "set(ipv4(frag=no))",
      "set(ipv4(frag=first))",
      "set(ipv4(frag=later))",
      "set(ipv4(src=10.0.0.9,ttl=63)),hash(l4(0)),recirc(0x5)",
      "set(ipv4())",
      "set(tcp(src=80,dst=8080))",
      "set(tcp(src=80/0xff00,dst=8080))",
      "set(tcp(src=80))",
      "set(tcp(dst=8080))",
      "set(udp(src=81,dst=6632))",
      "set(udp(src=81/0xff00,dst=6632))",
      "set(udp(src=81))",
      "set(udp(dst=6633))",
      "set(arp(tip=1.2.3.4))",
      "set(sctp(src=1,dst=2))",
      "set(icmp(type=8,code=0))",
      "set(icmpv6(type=128,code=144))",
      "set(sctp(dst=443/0xff))",
      "set(arp(sip=9.9.9.9,tip=0.0.3.4/0.0.255.255,op=2,sha=00:00:00:00:00:09,tha=00:00:00:00:00:07))",
      "set(ipv6(src=::1,dst=::2,label=0,proto=10,tclass=0x70,hlimit=128,frag=no))",
      "set(ipv6(src=::1,dst=::2))",
      "set(ipv6(label=0,proto=10,tclass=0x70,hlimit=128,frag=no))",
      "set(ipv6(label=0,proto=10,hlimit=128))",
      "set(ipv6(label=0/0xfff,proto=10,tclass=0x70/0x70))",
      "set(ipv6(label=0))",
      "set(ipv6(label=0xfffff))",
      "set(ipv6(src=2001:db8::1/ffff:ffff::,hlimit=1/0x3))",
      "hash(l4(0))",
      "hash(l4(4294967295))",
      "recirc(0)",
      "recirc(0x1)",
      "recirc(0xffffffff)",
      "lb_output(1)",
      "lb_output(255)",
      "hash(l4(0)),lb_output(7)",
      "clone(lb_output(3)),2",
      "clone(1)",
      "clone(clone(push_vlan(vid=12,pcp=0),2),1)",
      "clone(pop_vlan,3),2",
      "clone(drop)",
      "clone(set(ipv4(ttl=1)),trunc(200),7),clone(userspace(pid=3)),2",
      "trunc(100)",
      "trunc(100),2",
      "trunc(100),2,3",
      "userspace(pid=0)",
      "userspace(pid=7,userdata())",
      "userspace(pid=1234567,userdata(0102030405060708090a0b0c0d0e0f),actions)",
      "userspace(pid=1234567,userdata(0102030405060708090a0b0c0d0e0f),tunnel_out_port=10)",
      "userspace(pid=9,actions,tunnel_out_port=4294967295)",
      "meter(0)",
      "meter(3),2",
      "2,drop",
      "drop,drop",
      "push_vlan(vid=10,pcp=3),set(eth(src=02:00:00:00:00:09)),set(ipv4(dst=192.168.0.1)),set(udp(dst=53)),4",
  };
  for (const char* c : cases) {
    CAPTURE(c);
    CHECK(round_trip(c) == c);
  }
}

TEST_CASE("actions that print in Open vSwitch's canonical form") {
  struct Case {
    const char* in;
    const char* out;
  } cases[] = {
      {"", "drop"},
      {"DROP", "drop"},
      {" drop ", "drop"},
      {"1 2\t3", "1,2,3"},
      {" 1, 2 ", "1,2"},
      {"1,,2", "1,2"},
      {"0x10", "16"},
      {"recirc(5)", "recirc(0x5)"},
      {"recirc(0x0)", "recirc(0)"},
      {"push_vlan(vid=10,pcp=0,cfi=1)", "push_vlan(vid=10,pcp=0)"},
      {"push_vlan(tpid=0x8100,vid=10,pcp=0)", "push_vlan(vid=10,pcp=0)"},
      {"push_vlan(pcp=2,vid=0xa)", "push_vlan(vid=10,pcp=2)"},
      {"push_vlan(tpid=37120,vid=1,pcp=0)", "push_vlan(tpid=0x9100,vid=1,pcp=0)"},
      {"set(ipv4(src=10.0.0.0/24))", "set(ipv4(src=10.0.0.0/255.255.255.0))"},
      {"set(ipv4(src=10.0.0.1/32))", "set(ipv4(src=10.0.0.1))"},
      {"set(ipv4(ttl=5/0))", "set(ipv4())"},
      {"set(ipv4(dst=1.2.3.4,src=5.6.7.8))", "set(ipv4(src=5.6.7.8,dst=1.2.3.4))"},
      {"set(ipv4(ttl=64/0xff,tos=16))", "set(ipv4(tos=0x10,ttl=64))"},
      {"set(ipv6(src=2001:db8::1/32))", "set(ipv6(src=2001:db8::1/ffff:ffff::))"},
      {"set(ipv6(src=2001:0db8:0:0::1))", "set(ipv6(src=2001:db8::1))"},
      {"set(ipv6(label=0x12345/0xfffff))", "set(ipv6(label=0x12345))"},
      {"set(ipv6(tclass=0))", "set(ipv6(tclass=0))"},
      {"set(eth(src=2:0:0:0:0:1))", "set(eth(src=02:00:00:00:00:01))"},
      {"set(eth(src=02:00:00:00:00:01/ff:ff:ff:ff:ff:ff))", "set(eth(src=02:00:00:00:00:01))"},
      {"set(tcp(src=80/0xffff))", "set(tcp(src=80))"},
      {"set(udp(dst=0x35))", "set(udp(dst=53))"},
      {"clone()", "clone(drop)"},
      {"clone( drop )", "clone(drop)"},
      {"clone(1 2)", "clone(1,2)"},
      {"userspace(actions,pid=3)", "userspace(pid=3,actions)"},
      {"userspace(pid=3,userdata(ABCDEF))", "userspace(pid=3,userdata(abcdef))"},
      {"trunc(0x64)", "trunc(100)"},
      {"hash(l4(0x10))", "hash(l4(16))"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.in);
    CHECK(round_trip(c.in) == c.out);
  }
}

TEST_CASE("errors name the token and its column") {
  struct Case {
    const char* in;
    const char* err;
  } cases[] = {
      {"2,foo", "unknown action 'foo' at column 3"},
      {"2,foo(1)", "unknown action 'foo(1)' at column 3"},
      {"set(ipv4(src=10.0.0.300))", "bad IPv4 address '10.0.0.300' at column 14"},
      {"push_vlan(vid=4096,pcp=0)", "out-of-range value '4096' at column 15: vid must be 0..4095"},
      {"push_vlan(vid=1,pcp=8)", "out-of-range value '8' at column 21: pcp must be 0..7"},
      {"push_vlan(vid=1)", "incomplete push_vlan 'push_vlan(vid=1)' at column 1: vid= and pcp= are required"},
      {"push_vlan(vid=1,pcp=0,dei=1)",
       "unknown push_vlan field 'dei' at column 23: expected tpid, vid, pcp or cfi"},
      {"push_vlan(vid=1,vid=2,pcp=0)", "duplicate push_vlan field 'vid' at column 17"},
      {"clone(2", "unbalanced '(' 'clone(2' at column 1: no matching ')'"},
      {"2)", "unexpected text ')' at column 2: after action '2'"},
      {"2,)", "unbalanced ')' ')' at column 3"},
      {"pop_vlan;3", "unexpected text ';3' at column 9: after action 'pop_vlan'"},
      {"ct(commit),2", "unsupported action 'ct(commit)' at column 1: keel's datapath does not implement ct"},
      {"1,lb_output(0)", "out-of-range value '0' at column 13: bond id must be 1..255"},
      {"lb_output(256)", "out-of-range value '256' at column 11: bond id must be 1..255"},
      {"lb_output(99999999999999999999999)",
       "out-of-range value '99999999999999999999999' at column 11: bond id must be 1..255"},
      {"lb_output(0x1)", "bad bond id '0x1' at column 11: expected a decimal number; bond id must be 1..255"},
      {"lb_output(-1)", "bad bond id '-1' at column 11: expected a decimal number; bond id must be 1..255"},
      {"lb_output()", "bad bond id '' at column 11: expected a decimal number; bond id must be 1..255"},
      {"lb_output", "missing arguments 'lb_output' at column 1: expected lb_output(N)"},
      {"check_pkt_len(size=200,gt(1),le(2))",
       "unsupported action 'check_pkt_len(size=200,gt(1),le(2))' at column 1: keel's datapath does not implement "
       "check_pkt_len"},
      {"set(vlan(vid=5))",
       "unsupported set field 'vlan' at column 5: keel sets eth, ipv4, ipv6, tcp, udp, sctp, icmp, icmpv6 and arp"},
      {"set(bogus(x=1))", "unknown set field 'bogus' at column 5"},
      {"set(ipv4(src=1.1.1.1)),set(ipv4(foo=1))", "unknown field 'foo' at column 33: in set(ipv4(...))"},
      {"set(ipv4(src=1.1.1.1,src=1.1.1.2))", "duplicate field 'src' at column 22"},
      {"set(ipv4(src))", "bad field 'src' at column 10: expected name=value"},
      {"set(ipv4(ttl=256))", "out-of-range value '256' at column 14: ttl must be 0..255"},
      {"set(ipv4(frag=maybe))", "bad frag value 'maybe' at column 15: expected no, first or later"},
      {"set(ipv6(label=0x100000))", "out-of-range value '0x100000' at column 16: label must be 0..1048575"},
      {"set(ipv6(src=::1/129))", "bad IPv6 mask '129' at column 18: a prefix length is 0..128"},
      {"set(eth(src=02:00:00:00:00))", "bad Ethernet address '02:00:00:00:00' at column 13"},
      {"set(tcp(src=65536))", "out-of-range value '65536' at column 13: src must be 0..65535"},
      {"set(ipv4(ttl=1),tcp(src=1))", "unexpected text ',tcp(src=1)' at column 16: set() takes one header"},
      {"set(ipv4)", "bad set 'set(ipv4)' at column 1: expected set(header(field=value,...))"},
      {"hash(sym_l4(0))", "unsupported hash algorithm 'sym_l4' at column 6: keel implements l4 only"},
      {"hash(l3(0))", "unknown hash algorithm 'l3' at column 6: expected l4"},
      {"hash(l4(x))", "bad hash basis value 'x' at column 9: expected a decimal or 0x-hex number"},
      {"userspace(pid=1,sFlow(vid=9,pcp=7,output=10))",
       "unsupported userspace cookie 'sFlow(vid=9,pcp=7,output=10)' at column 17: keel carries opaque "
       "userdata(hex) "
       "only"},
      {"userspace(pid=1,slow_path(cfm))",
       "unsupported userspace cookie 'slow_path(cfm)' at column 17: keel carries opaque userdata(hex) only"},
      {"userspace(userdata(01))", "missing pid 'userspace(userdata(01))' at column 1: userspace needs pid=N"},
      {"userspace(pid=1,userdata(0))", "bad userdata '0' at column 26: expected pairs of hex digits"},
      {"userspace(pid=1,userdata(zz))", "bad userdata 'zz' at column 26: expected pairs of hex digits"},
      {"userspace(pid=1,pid=2)", "duplicate userspace field 'pid' at column 17"},
      {"pop_vlan(1)", "unexpected arguments 'pop_vlan(1)' at column 1: pop_vlan takes none"},
      {"3(1)", "unexpected arguments '3(1)' at column 1: 3 takes none"},
      {"recirc", "missing arguments 'recirc' at column 1: expected recirc(N)"},
      {"trunc(abc)", "bad length value 'abc' at column 7: expected a decimal or 0x-hex number"},
      {"meter(4294967296)", "out-of-range value '4294967296' at column 7: meter id must be 0..4294967295"},
      {"4294967296", "out-of-range value '4294967296' at column 1: port must be 0..4294967295"},
      {"2x", "bad port value '2x' at column 1: expected a decimal or 0x-hex number"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.in);
    CHECK(error_of(c.in) == c.err);
  }
}

TEST_CASE("errors count columns from where the actions start in the line") {
  CHECK(error_of("2,foo", 40) == "unknown action 'foo' at column 42");

  // A whole dump-flows line: the flow parser hands over the actions and their column.
  const std::string line =
      "recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no), packets:0, bytes:0, used:never, "
      "actions:set(ipv4(ttl=300)),2";
  auto flow = parse_dp_flow(line);
  REQUIRE(flow.ok());
  REQUIRE(flow->has_actions);
  auto acts = parse_dp_actions(flow->actions, flow->actions_column);
  REQUIRE(!acts.ok());
  const size_t col = line.find("300") + 1;
  CHECK(acts.status().message() ==
        "out-of-range value '300' at column " + std::to_string(col) + ": ttl must be 0..255");

  auto ok = parse_dp_flow("in_port(1),eth(),eth_type(0x0800),ipv4(frag=no), actions:clone(pop_vlan,3),2");
  REQUIRE(ok.ok());
  auto parsed = parse_dp_actions(ok->actions, ok->actions_column);
  REQUIRE(parsed.ok());
  CHECK(format_dp_actions(*parsed) == "clone(pop_vlan,3),2");
}

TEST_CASE("clone nesting and list length are bounded") {
  std::string deep = "1";
  for (unsigned i = 0; i < kMaxCloneDepth; ++i) deep.insert(0, "clone(").append(")");
  CHECK(round_trip(deep) == deep);
  std::string too_deep = "clone(" + deep + ")";
  CHECK(error_of(too_deep).starts_with("clone nested too deeply 'clone(1)' at column " +
                                       std::to_string(6 * kMaxCloneDepth + 1)));

  std::string many;
  for (size_t i = 0; i < kMaxDpActionsLen / 8; ++i) many += std::to_string(i % 100) + ",";
  auto ok = parse_dp_actions(many);
  REQUIRE(ok.ok());
  CHECK(ok->size() == kMaxDpActionsLen);
  std::string one_more = many + "7";
  CHECK(error_of(one_more) == "cannot add action '7' at column " + std::to_string(many.size() + 1) +
                                  ": datapath actions longer than 32768 bytes");
}

TEST_CASE("the encoding is compact and 8-byte aligned") {
  auto a = parse_dp_actions("2");
  REQUIRE(a.ok());
  CHECK(a->size() == 8);
  CHECK(reinterpret_cast<uintptr_t>(a->bytes().data()) % 8 == 0);
  DpActionHeader h = load_action_header(a->bytes().data());
  CHECK(h.type == DpActionType::kOutput);
  CHECK(h.len == 8);
  CHECK(h.arg == 2);

  auto s = parse_dp_actions(
      "set(ipv4(src=10.0.0.9,ttl=63)),set(ipv6(hlimit=1)),set(tcp(src=1)),set(eth(src=1:2:3:4:5:6))");
  REQUIRE(s.ok());
  CHECK(s->size() == 32 + 88 + 16 + 32);

  auto e = parse_dp_actions("drop");
  REQUIRE(e.ok());
  CHECK(e->empty());
  CHECK(format_dp_actions(*e) == "drop");

  auto c = parse_dp_actions("clone(pop_vlan,3),2");
  REQUIRE(c.ok());
  CHECK(c->size() == 8 + 16 + 8);
  DpActionReader r(c->bytes());
  DpAction first = r.next();
  CHECK(first.type == DpActionType::kClone);
  CHECK(first.nested().size() == 16);
  CHECK(!r.done());
  DpAction second = r.next();
  CHECK(second.type == DpActionType::kOutput);
  CHECK(second.port() == 2);
  CHECK(r.done());
}

TEST_CASE("builder: what translation emits equals what the parser reads") {
  DpActionsBuilder b;
  b.push_vlan(0x8100, 0x1000 | 10);
  SetIpv4 k{}, m{};
  k.src = text::hton32(0x0a000009);
  m.src = 0xffffffff;
  k.ttl = 63;
  m.ttl = 0xff;
  k.tos = 0x55;  // mask 0: the builder zeroes it
  b.set_ipv4(k, m);
  b.hash_l4(0);
  b.begin_clone();
  b.pop_vlan();
  b.output(3);
  b.end_clone();
  b.trunc(100);
  b.output(2);
  const uint8_t ud[] = {0xde, 0xad};
  const uint32_t tun = 5;
  b.userspace(7, ud, true, true, &tun);
  b.meter(1);
  b.recirc(5);
  auto built = b.finish();
  REQUIRE(built.ok());
  const char* text =
      "push_vlan(vid=10,pcp=0),set(ipv4(src=10.0.0.9,ttl=63)),hash(l4(0)),clone(pop_vlan,3),trunc(100),2,"
      "userspace(pid=7,userdata(dead),actions,tunnel_out_port=5),meter(1),recirc(0x5)";
  CHECK(format_dp_actions(*built) == text);
  auto parsed = parse_dp_actions(text);
  REQUIRE(parsed.ok());
  CHECK(*parsed == *built);
  CHECK(validate_dp_actions(built->bytes()).ok());

  auto copy = DpActions::from_bytes(built->bytes());
  REQUIRE(copy.ok());
  CHECK(*copy == *built);
}

TEST_CASE("builder errors") {
  {
    DpActionsBuilder b;
    b.begin_clone();
    b.output(1);
    auto r = b.finish();
    REQUIRE(!r.ok());
    CHECK(r.status().message() == "clone() not closed");
  }
  {
    DpActionsBuilder b;
    b.end_clone();
    CHECK(!b.ok());
  }
  {
    DpActionsBuilder b;
    for (unsigned i = 0; i <= kMaxCloneDepth; ++i) b.begin_clone();
    CHECK(b.status().message() == "clone() nested more than 8 deep");
  }
  {
    DpActionsBuilder b;
    std::vector<uint8_t> big(kMaxUserdataLen + 1);
    b.userspace(1, big);
    CHECK(!b.ok());
  }
  {
    DpActionsBuilder b;
    SetIpv4 k{}, m{};
    k.frag = 3;
    m.frag = 0xff;
    b.set_ipv4(k, m);
    CHECK(!b.ok());
  }
}

TEST_CASE("validate_dp_actions refuses malformed encodings") {
  auto a = parse_dp_actions("set(ipv4(src=10.0.0.9)),clone(userspace(pid=1,userdata(01))),2");
  REQUIRE(a.ok());
  std::vector<uint8_t> bytes(a->bytes().begin(), a->bytes().end());
  CHECK(validate_dp_actions(bytes).ok());

  auto corrupt = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> c = bytes;
    c[at] = v;
    return validate_dp_actions(c);
  };
  CHECK(!corrupt(0, 99).ok());                                           // unknown type
  CHECK(!corrupt(0, static_cast<uint8_t>(DpActionType::kTnlPop)).ok());  // tnl_pop has no payload
  CHECK(!corrupt(2, 33).ok());                                           // length not a multiple of 8
  CHECK(!corrupt(2, 24).ok());                                           // wrong set length
  CHECK(!corrupt(1, 9).ok());                                            // unknown set header
  CHECK(!corrupt(8 + 8, 1).ok());                                        // tos key with a zero mask
  CHECK(!corrupt(32 + 8 + 8 + 7, 1).ok());                               // pad byte of the userspace args
  CHECK(!corrupt(32 + 8 + 8 + 8 + 1, 1).ok());                           // userdata padding
  CHECK(!validate_dp_actions(std::span<const uint8_t>(bytes.data(), 12)).ok());
  std::vector<uint8_t> without_output(bytes.begin(), bytes.end() - 8);
  CHECK(validate_dp_actions(without_output).ok());
  std::vector<uint8_t> cut_in_clone(bytes.begin(), bytes.begin() + 40);
  CHECK(!validate_dp_actions(cut_in_clone).ok());  // the clone's length runs past the end
}

TEST_CASE("lb_output: builder, parser and validator agree on 1..255") {
  DpActionsBuilder b;
  b.hash_l4(0);
  b.lb_output(9);
  auto built = b.finish();
  REQUIRE(built.ok());
  CHECK(format_dp_actions(*built) == "hash(l4(0)),lb_output(9)");
  auto parsed = parse_dp_actions("hash(l4(0)),lb_output(9)");
  REQUIRE(parsed.ok());
  CHECK(*parsed == *built);
  DpActionReader r(built->bytes());
  r.next();
  DpAction lb = r.next();
  CHECK(lb.type == DpActionType::kLbOutput);
  CHECK(lb.bond_id() == 9);

  for (uint32_t bad : {0u, 256u, 0xffffffffu}) {
    DpActionsBuilder e;
    e.lb_output(bad);
    CHECK(!e.ok());
    CHECK(!e.finish().ok());
  }

  // An encoded lb_output: 8 bytes, no sub, bond id 1..255.
  std::vector<uint8_t> bytes(built->bytes().begin(), built->bytes().end());
  CHECK(validate_dp_actions(bytes).ok());
  auto corrupt = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> c = bytes;
    c[at] = v;
    return validate_dp_actions(c);
  };
  CHECK(!corrupt(8 + 4, 0).ok());   // bond id 0
  CHECK(!corrupt(8 + 5, 1).ok());   // bond id 265
  CHECK(!corrupt(8 + 1, 1).ok());   // sub set
  CHECK(!corrupt(8 + 2, 16).ok());  // payload
}

TEST_CASE("for_each_output_port sees nested outputs, in order") {
  auto a = parse_dp_actions("1,clone(2,clone(3),recirc(0x1)),userspace(pid=4),5");
  REQUIRE(a.ok());
  std::vector<uint32_t> ports;
  for_each_output_port(a->bytes(), [&](uint32_t p) { ports.push_back(p); });
  CHECK(ports == std::vector<uint32_t>{1, 2, 3, 5});
}

TEST_CASE("port names both ways, as dpctl with names (flow-dump -m)") {
  const DpPortNumber number = [](std::string_view n) -> std::optional<uint32_t> {
    if (n == "p1") return 1;
    if (n == "dpdk0") return 7;
    return std::nullopt;
  };
  const DpPortName name = [](uint32_t p) -> std::optional<std::string> {
    if (p == 1) return "p1";
    if (p == 7) return "dpdk0";
    return std::nullopt;
  };
  auto a = parse_dp_actions("push_vlan(vid=5,pcp=0),dpdk0,clone(pop_vlan,p1),9", 1, &number);
  INFO(a.status().message());
  REQUIRE(a.ok());
  CHECK(format_dp_actions(*a) == "push_vlan(vid=5,pcp=0),7,clone(pop_vlan,1),9");
  CHECK(format_dp_actions(*a, &name) == "push_vlan(vid=5,pcp=0),dpdk0,clone(pop_vlan,p1),9");
  // Without the callback a name is no action; an unknown name neither.
  CHECK_FALSE(parse_dp_actions("dpdk0").ok());
  CHECK_FALSE(parse_dp_actions("nope", 1, &number).ok());
  // Keywords still read as actions when they name no port.
  auto d = parse_dp_actions("pop_vlan,drop", 1, &number);
  REQUIRE(d.ok());
  CHECK(format_dp_actions(*d, &name) == "pop_vlan,drop");
}

TEST_CASE("keel's slow-path cookie prints and reads as Open vSwitch's slow_path(lacp)") {
  auto a = flow::parse_dp_actions("userspace(pid=0,slow_path(lacp))");
  REQUIRE(a.ok());
  CHECK(flow::format_dp_actions(a.value()) == "userspace(pid=0,slow_path(lacp))");
  auto hex = flow::parse_dp_actions("userspace(pid=0,userdata(0201000000000000))");
  REQUIRE(hex.ok());
  CHECK(hex.value() == a.value());  // the same bytes
  // Any other userdata stays hex; other cookies and reasons are refused by name.
  auto other = flow::parse_dp_actions("userspace(pid=0,userdata(0201000000000001))");
  REQUIRE(other.ok());
  CHECK(flow::format_dp_actions(other.value()) == "userspace(pid=0,userdata(0201000000000001))");
  CHECK(!flow::parse_dp_actions("userspace(pid=0,slow_path(stp))").ok());
  CHECK(!flow::parse_dp_actions("userspace(pid=0,slow_path(lacp),slow_path(lacp))").ok());
  // The bridge-address reply cookie (ARP / NS for an own address).
  auto act = flow::parse_dp_actions("userspace(pid=0,slow_path(action))");
  REQUIRE(act.ok());
  CHECK(flow::format_dp_actions(act.value()) == "userspace(pid=0,slow_path(action))");
  auto act_hex = flow::parse_dp_actions("userspace(pid=0,userdata(0202000000000000))");
  REQUIRE(act_hex.ok());
  CHECK(act_hex.value() == act.value());
  CHECK(flow::format_dp_actions(flow::parse_dp_actions("userspace(pid=0,userdata(0203000000000000))").value()) ==
        "userspace(pid=0,userdata(0203000000000000))");
}

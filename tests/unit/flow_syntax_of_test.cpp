// OpenFlow match syntax (ovs-ofctl add-flow / dump-flows): every field,
// masks, shorthands, rule keys, actions text, prerequisites, round trips,
// error messages, and every rule of the benchmark scenarios.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "flow/flow_text.h"
#include "flow/of_match_syntax.h"

using namespace keel::flow;
using keel::flow::text::hton16;
using keel::flow::text::hton32;
using keel::flow::text::hton64;

namespace {

Match parse_ok(const std::string& s) {
  auto r = parse_of_match(s);
  INFO("input: " << s);
  INFO("error: " << r.status().message());
  REQUIRE(r.ok());
  return *r;
}

OfFlow parse_flow_ok(const std::string& s) {
  auto r = parse_of_flow(s);
  INFO("input: " << s);
  INFO("error: " << r.status().message());
  REQUIRE(r.ok());
  return *r;
}

std::string parse_err(const std::string& s) {
  auto r = parse_of_flow(s);
  INFO("input: " << s);
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

void check_canonical(const std::string& s) {
  Match m = parse_ok(s);
  CHECK(format_of_match(m) == s);
  CHECK(parse_ok(format_of_match(m)) == m);
}

}  // namespace

TEST_CASE("of: every rule of the benchmark scenarios parses and round-trips") {
  // tests/unit/data/scenario_flows.txt is a copy of
  // ../shared/bench/scenarios/*/flows*.txt (see its header).
  const std::filesystem::path file =
      std::filesystem::path(__FILE__).parent_path() / "data" / "scenario_flows.txt";
  std::ifstream in(file);
  REQUIRE_MESSAGE(in.good(), "cannot open " << file.string());
  std::string line;
  int rules = 0;
  while (std::getline(in, line)) {
    size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    CAPTURE(line);
    OfFlow f = parse_flow_ok(line);
    CHECK(f.has_actions);
    CHECK_FALSE(f.actions.empty());
    // The match part: print -> parse gives the same match.
    std::string printed = format_of_match(f.match);
    CAPTURE(printed);
    CHECK(parse_ok(printed) == f.match);
    // These lines are written canonically, so the whole line prints back.
    CHECK(format_of_flow(f) == line);
    OfFlow again = parse_flow_ok(format_of_flow(f));
    CHECK(again.match == f.match);
    CHECK(again.meta == f.meta);
    CHECK(again.actions == f.actions);
    ++rules;
  }
  CHECK(rules == 25);
}

TEST_CASE("of: a scenario rule's fields") {
  OfFlow f = parse_flow_ok("priority=100,udp,in_port=1,nw_dst=10.9.0.0/16,tp_dst=1008,actions=output:2");
  CHECK(f.meta.priority == 100);
  CHECK(f.actions == "output:2");
  const Match& m = f.match;
  CHECK(m.key.dl_type == hton16(0x0800));
  CHECK(m.mask.dl_type == 0xffff);
  CHECK(m.key.nw_proto == 17);
  CHECK(m.mask.nw_proto == 0xff);
  CHECK(m.key.in_port == 1);
  CHECK(m.key.nw_dst == hton32(0x0a090000));
  CHECK(m.mask.nw_dst == hton32(0xffff0000));
  CHECK(m.key.tp_dst == hton16(1008));
  CHECK(m.mask.tp_dst == 0xffff);
  CHECK(m.mask.nw_src == 0);
  CHECK(parse_flow_ok("in_port=LOCAL,actions=output:1").match.key.in_port == kOfppLocal);
  OfFlow n = parse_flow_ok("actions=NORMAL");
  CHECK(n.match.is_catchall());
  CHECK(n.meta.priority == kOfDefaultPriority);
  CHECK(format_of_match(n.match).empty());
}

TEST_CASE("of: canonical matches for every field print back unchanged") {
  const std::vector<std::string> lines = {
      "tcp,in_port=1,nw_dst=10.0.0.0/8,tp_dst=80",
      "pkt_mark=0x10/0xff,recirc_id=0x1,dp_hash=0x5/0xf,skb_priority=0x3,ip,reg0=0x1,reg7=0x5/"
      "0xff,tun_id=0x10,"
      "tun_src=10.0.0.1,tun_dst=10.0.0.0/24,tun_ipv6_src=2001:db8::1,tun_ipv6_dst=2001:db8::/64,tun_tos=16,"
      "tun_ttl=64,tun_flags=+oam,metadata=0x1234/0xffff,in_port=LOCAL,dl_vlan=10,dl_vlan_pcp=3,"
      "dl_src=00:11:22:33:44:55,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,nw_src=192.168.0.0/255.255.0.255,"
      "nw_dst=10.1.2.3,nw_proto=47,nw_tos=16,nw_ecn=1,nw_ttl=64,nw_frag=first",
      "reg1=0,reg2=0xffffffff,reg3=0/0x1,reg4=0x4,reg5=0x5,reg6=0x6",
      "tun_id=0,tun_flags=df|key",
      "tun_id=0x1/0xff,tun_flags=-df+csum",
      "tcp6,ipv6_src=2001:db8::/32,ipv6_dst=::1,ipv6_label=0x12345,tp_src=0x400/"
      "0xfc00,tp_dst=443,tcp_flags=+syn-ack",
      "udp6,ipv6_src=::/ffff::ff,ipv6_label=0x00001/0x0000f,tp_dst=53",
      "sctp6,tp_src=1",
      "ipv6,nw_proto=47,nw_ttl=1",
      "icmp,icmp_type=8,icmp_code=0",
      "icmp6,icmp_type=135,icmp_code=0,nd_target=fe80::1,nd_sll=00:11:22:33:44:55",
      "icmp6,icmp_type=136,nd_target=fe80::/64,nd_tll=00:11:22:00:00:00/ff:ff:ff:00:00:00",
      "icmp6,icmp_type=128",
      "arp,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/24,arp_op=1,arp_sha=00:11:22:33:44:55,arp_tha=00:00:00:00:00:00",
      "rarp,arp_op=3",
      "sctp,tp_src=1,tp_dst=2",
      "udp,tp_dst=0x50/0xfff0",
      "tcp,tcp_flags=syn|ack",
      "tcp,tcp_flags=0",
      "tcp,tp_dst=22,tcp_flags=-fin-syn-rst+ack",
      "dl_type=0x88cc",
      "dl_type=0x8100",
      "vlan_tci=0x1000/0x1000",
      "vlan_tci=0x0000",
      "vlan_tci=0x0005/0x0fff",
      "dl_vlan_pcp=7",
      "dl_vlan=4095",
      "ip,nw_frag=yes",
      "ip,nw_frag=not_later",
      "ip,nw_frag=later",
      "ipv6,nw_frag=no",
      "ip,nw_ecn=3",
      "ip,nw_tos=252",
      "in_port=0",
      "in_port=65279",
      "in_port=IN_PORT",
      "in_port=CONTROLLER",
      "in_port=ANY",
      "dl_src=00:00:00:00:00:00/01:00:00:00:00:00",
  };
  for (const std::string& s : lines) {
    CAPTURE(s);
    check_canonical(s);
  }
}

TEST_CASE("of: fields land where FlowKey keeps them") {
  Match m = parse_ok(
      "tcp6,tun_id=0x1234,tun_src=1.1.1.1,tun_tos=8,tun_ttl=3,tun_flags=key,metadata=0x55,reg3=7,"
      "pkt_mark=9,dl_vlan=10,dl_vlan_pcp=5,ipv6_label=0xabcde,nw_tos=32,nw_ecn=2,nw_ttl=9,tcp_flags=+syn,"
      "tp_src=1000/0xff00");
  CHECK(m.key.tun_id == hton64(0x1234));
  CHECK(m.key.tun_ipv4_src == hton32(0x01010101));
  CHECK(m.key.tun_tos == 8);
  CHECK(m.key.tun_ttl == 3);
  CHECK(m.key.tun_flags == kTunKey);
  CHECK(m.key.metadata == hton64(0x55));
  CHECK(m.key.regs[3] == 7);
  CHECK(m.mask.regs[3] == 0xffffffff);
  CHECK(m.key.pkt_mark == 9);
  CHECK(m.key.vlans[0].tci == hton16(0x1000 | (5 << 13) | 10));
  CHECK(m.mask.vlans[0].tci == 0xffff);
  CHECK(m.mask.vlans[0].tpid == 0);
  CHECK(m.key.ipv6_label == hton32(0xabcde));
  CHECK(m.key.nw_tos == 34);
  CHECK(m.mask.nw_tos == 0xff);
  CHECK(m.key.tcp_flags == hton16(0x002));
  CHECK(m.mask.tcp_flags == hton16(0x002));
  CHECK(m.key.tp_src == hton16(0x0300));
  CHECK(m.mask.tp_src == hton16(0xff00));

  Match icmp = parse_ok("icmp,icmp_type=3,icmp_code=1");
  CHECK(icmp.key.tp_src == hton16(3));
  CHECK(icmp.mask.tp_src == hton16(0x00ff));  // as a megaflow keeps it (match.h)
  CHECK(icmp.key.tp_dst == hton16(1));
  Match arp = parse_ok("arp,arp_op=2,nw_src=10.0.0.1");
  CHECK(arp.key.nw_proto == 2);
  CHECK(arp.key.nw_src == hton32(0x0a000001));
  Match novlan = parse_ok("dl_vlan=0xffff");
  CHECK(novlan.key.vlans[0].tci == 0);
  CHECK(novlan.mask.vlans[0].tci == 0xffff);
  Match frag = parse_ok("ip,ip_frag=not_later");
  CHECK(frag.key.nw_frag == 0);
  CHECK(frag.mask.nw_frag == kFragLater);
}

TEST_CASE("of: non-canonical inputs print as dump-flows does") {
  struct Case {
    const char* in;
    const char* out;
  };
  const Case cases[] = {
      {"in_port=1,ip,nw_dst=10.0.0.0/8,tcp,tp_dst=80", "tcp,in_port=1,nw_dst=10.0.0.0/8,tp_dst=80"},
      {"tp_dst=80 tcp in_port=1", "tcp,in_port=1,tp_dst=80"},
      {"dl_type=0x0800,nw_proto=6", "tcp"},
      {"dl_type=2048", "ip"},
      {"eth_type=0x86dd,ip_proto=58", "icmp6"},
      {"ip,nw_dst=10.0.0.0/255.0.0.0", "ip,nw_dst=10.0.0.0/8"},
      {"ip,nw_dst=10.0.0.1/8", "ip,nw_dst=10.0.0.0/8"},
      {"ip,nw_dst=10.0.0.1/32", "ip,nw_dst=10.0.0.1"},
      {"ip,nw_dst=10.0.0.1/0", "ip"},
      {"tcp,tcp_flags=0x002/0x012", "tcp,tcp_flags=+syn-ack"},
      {"tcp,tcp_flags=0x012", "tcp,tcp_flags=syn|ack"},
      {"tcp,tcp_dst=80", "tcp,tp_dst=80"},
      {"udp,udp_src=1", "udp,tp_src=1"},
      {"sctp6,sctp_dst=9", "sctp6,tp_dst=9"},
      {"in_port=local", "in_port=LOCAL"},
      {"in_port=0xfffffffe", "in_port=LOCAL"},
      {"in_port=NONE", "in_port=ANY"},
      {"dl_vlan=0xffff", "vlan_tci=0x0000"},
      {"vlan_tci=0x100a/0x1fff", "dl_vlan=10"},
      {"ip,ip_dscp=4", "ip,nw_tos=16"},
      {"ip,ip_ecn=2", "ip,nw_ecn=2"},
      {"ip,ip_frag=no", "ip,nw_frag=no"},
      {"arp,nw_src=10.0.0.1,nw_proto=2", "arp,arp_spa=10.0.0.1,arp_op=2"},
      {"icmp6,icmpv6_type=128,icmpv6_code=0", "icmp6,icmp_type=128,icmp_code=0"},
      {"eth_src=00:00:00:00:00:01,eth_dst=00:00:00:00:00:02",
       "dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02"},
      {"tunnel_id=5", "tun_id=0x5"},
      {"ipv4,ip_src=1.2.3.4,ip_dst=5.6.7.8", "ip,nw_src=1.2.3.4,nw_dst=5.6.7.8"},
      {"ip4", "ip"},
      {"ip6", "ipv6"},
      {"eth,ip", "ip"},
      {"tcp,udp", "udp"},  // last one wins, as in ovs-ofctl
      {"nw_ttl=5/0xff,ip", "ip,nw_ttl=5"},
      {"in_port:3", "in_port=3"},
      {"reg0=0xffffffff/0xffffffff", "reg0=0xffffffff"},
      {"metadata=0/0", ""},
      {"udp,tp_dst=0x50/0xffff", "udp,tp_dst=80"},
  };
  for (const Case& c : cases) {
    std::string in = c.in;
    CAPTURE(in);
    Match m = parse_ok(c.in);
    CHECK(format_of_match(m) == c.out);
    CHECK(parse_ok(c.out) == m);
  }
}

TEST_CASE("of: rule keys, flags, actions and dump-flows lines") {
  const std::string canonical =
      "cookie=0x1/0xff,table=3,idle_timeout=10,hard_timeout=20,importance=5,send_flow_rem,check_overlap,"
      "reset_counts,no_packet_counts,no_byte_counts,priority=7,ip,actions=drop";
  OfFlow f = parse_flow_ok(canonical);
  CHECK(f.meta.has_cookie);
  CHECK(f.meta.cookie == 1);
  CHECK(f.meta.cookie_mask == 0xff);
  CHECK(f.meta.table == 3);
  CHECK(f.meta.idle_timeout == 10);
  CHECK(f.meta.hard_timeout == 20);
  CHECK(f.meta.importance == 5);
  CHECK(f.meta.send_flow_rem);
  CHECK(f.meta.check_overlap);
  CHECK(f.meta.reset_counts);
  CHECK(f.meta.no_packet_counts);
  CHECK(f.meta.no_byte_counts);
  CHECK(f.meta.priority == 7);
  CHECK(f.actions == "drop");
  CHECK(format_of_flow(f) == canonical);

  OfFlow c = parse_flow_ok("cookie=0x5,ip,actions=drop");
  CHECK(c.meta.cookie_mask == ~uint64_t{0});
  CHECK(parse_flow_ok("cookie=0x5/-1,ip,actions=drop").meta.cookie_mask == ~uint64_t{0});
  CHECK(format_of_flow(c) == "cookie=0x5,ip,actions=drop");

  // ovs-ofctl dump-flows output, statistics included, actions after a space.
  const std::string dump =
      " cookie=0x0, duration=12.345s, table=0, n_packets=10, n_bytes=600, idle_timeout=60, idle_age=3, "
      "priority=100,udp,in_port=1,nw_dst=10.1.0.0/16 actions=output:2,mod_vlan_vid:5";
  OfFlow d = parse_flow_ok(dump);
  CHECK(d.meta.cookie == 0);
  CHECK(d.meta.table == 0);
  CHECK(d.meta.idle_timeout == 60);
  CHECK(d.meta.priority == 100);
  CHECK(d.actions == "output:2,mod_vlan_vid:5");
  CHECK(dump.substr(d.actions_column - 1) == d.actions);
  CHECK(format_of_flow(d) ==
        "cookie=0x0,table=0,idle_timeout=60,priority=100,udp,in_port=1,nw_dst=10.1.0.0/16,"
        "actions=output:2,mod_vlan_vid:5");

  // Actions keep their own commas and parentheses, unparsed.
  OfFlow a = parse_flow_ok("ip actions=ct(commit,zone=5,nat(src=10.0.0.1)),output:3  ");
  CHECK(a.actions == "ct(commit,zone=5,nat(src=10.0.0.1)),output:3");
  CHECK(a.actions_column == 12);
  CHECK(parse_flow_ok("ip,action=drop").actions == "drop");  // ovs-ofctl takes "action=" too
  // A line without actions= has none; parse_of_match refuses rule keys.
  CHECK_FALSE(parse_flow_ok("priority=5,ip").has_actions);
  CHECK(parse_of_match("priority=5,ip").status().message() ==
        "unexpected 'priority' at column 1: priority is not a match field");
  CHECK(parse_of_match("ip,actions=drop").status().message() ==
        "unexpected 'actions' at column 4: a match has no actions");
}

TEST_CASE("of: port names through the callbacks") {
  OfParseOptions po;
  po.port_number = [](std::string_view name) -> std::optional<uint32_t> {
    if (name == "p0") return 5;
    return std::nullopt;
  };
  auto r = parse_of_match("in_port=p0", po);
  REQUIRE(r.ok());
  CHECK(r->key.in_port == 5);
  OfFormatOptions fo;
  fo.port_name = [](uint32_t p) -> std::optional<std::string> {
    if (p == 5) return "p0";
    return std::nullopt;
  };
  CHECK(format_of_match(*r, fo) == "in_port=p0");
  CHECK(format_of_match(*r) == "in_port=5");
  CHECK(parse_err("in_port=p0") == "unknown port 'p0' at column 9");
}

TEST_CASE("of: ICMP type/code as a megaflow prints them (icmp_16bit)") {
  // A rule's icmp_type=8 has mask 0x00ff (the low byte) and prints exact; a
  // megaflow's ICMP masks are 0x00ff too, and Open vSwitch's match_format()
  // prints those as the 16-bit fields they live in: icmp_type=0x8/0xff.
  auto r = parse_of_match("icmp,icmp_type=8,icmp_code=0");
  REQUIRE(r.ok());
  OfFormatOptions mega;
  mega.icmp_16bit = true;
  CHECK(format_of_match(*r) == "icmp,icmp_type=8,icmp_code=0");
  CHECK(format_of_match(*r, mega) == "icmp,icmp_type=0x8/0xff,icmp_code=0x0/0xff");
  Match m = *r;
  m.mask.tp_src = hton16(0x00f8);  // a ports-trie miss: icmp_type=0x0/0xf8
  m.key.tp_src = 0;
  m.mask.tp_dst = 0;
  m.key.tp_dst = 0;
  CHECK(format_of_match(m, mega) == "icmp,icmp_type=0x0/0xf8");
  auto n = parse_of_match("icmp6,icmp_type=135,nd_target=fe80::1");
  REQUIRE(n.ok());
  CHECK(format_of_match(*n, mega) == "icmp6,icmp_type=0x87/0xff,nd_target=fe80::1");
}

TEST_CASE("of: errors name the token and its column") {
  CHECK(parse_err("in_port=1,nw_dstt=1.2.3.4") == "unknown field 'nw_dstt' at column 11");
  CHECK(parse_err("ip,nw_dst=10.0.0.300") == "bad IPv4 address '10.0.0.300' at column 11");
  CHECK(parse_err("udp,tp_dst=70000") == "out-of-range value '70000' at column 12: tp_dst must be 0..65535");
  CHECK(parse_err("udp,tp_dst=99999999999999999999999") ==
        "out-of-range value '99999999999999999999999' at column 12: tp_dst must be 0..65535");
  CHECK(parse_err("udp,tp_dst=80/0x1ffff") ==
        "out-of-range value '0x1ffff' at column 15: tp_dst mask must be 0..65535");
  CHECK(parse_err("udp,tp_dst=eighty") ==
        "bad tp_dst value 'eighty' at column 12: expected a decimal or 0x-hex number");
  CHECK(parse_err("tp_dst=80") ==
        "missing prerequisite for 'tp_dst' at column 1: tp_dst requires tcp, udp or sctp (nw_proto=6, 17 or "
        "132)");
  CHECK(parse_err("ip,tp_src=80") ==
        "missing prerequisite for 'tp_src' at column 4: tp_src requires tcp, udp or sctp (nw_proto=6, 17 or "
        "132)");
  CHECK(
      parse_err("nw_src=1.2.3.4") ==
      "missing prerequisite for 'nw_src' at column 1: nw_src requires ip or arp (dl_type=0x0800 or 0x0806)");
  CHECK(parse_err("ipv6,nw_src=1.2.3.4").find("nw_src requires ip or arp") != std::string::npos);
  CHECK(parse_err("udp,tcp_dst=1") ==
        "missing prerequisite for 'tcp_dst' at column 5: tcp_dst requires tcp or tcp6 (nw_proto=6)");
  CHECK(parse_err("tcp,udp_src=1").find("udp_src requires udp or udp6") != std::string::npos);
  CHECK(parse_err("tcp,sctp_src=1").find("sctp_src requires sctp or sctp6") != std::string::npos);
  CHECK(parse_err("udp,tcp_flags=+syn").find("tcp_flags requires tcp") != std::string::npos);
  CHECK(
      parse_err("udp,ip_frag=later,tp_dst=1") ==
      "missing prerequisite for 'tp_dst' at column 19: tp_dst cannot match a later fragment (ip_frag=later)");
  CHECK(parse_err("nw_ttl=1").find("nw_ttl requires ip or ipv6") != std::string::npos);
  CHECK(parse_err("arp,nw_tos=4").find("nw_tos requires ip or ipv6") != std::string::npos);
  CHECK(parse_err("nw_proto=6").find("nw_proto requires ip, ipv6 or arp") != std::string::npos);
  CHECK(parse_err("ip,ipv6_src=::1").find("ipv6_src requires ipv6") != std::string::npos);
  CHECK(parse_err("ip,arp_op=1").find("arp_op requires arp or rarp") != std::string::npos);
  CHECK(parse_err("udp,icmp_type=1").find("icmp_type requires icmp or icmp6") != std::string::npos);
  CHECK(parse_err("icmp,icmpv6_type=1").find("icmpv6_type requires icmp6") != std::string::npos);
  CHECK(parse_err("icmp6,nd_target=::1") ==
        "missing prerequisite for 'nd_target' at column 7: nd_target requires icmp6 with icmp_type=135 or "
        "136 and "
        "icmp_code=0");
  CHECK(parse_err("icmp6,icmp_type=135,icmp_code=1,nd_target=::1").find("nd_target requires") !=
        std::string::npos);
  CHECK(parse_err("icmp6,icmp_type=135,nd_tll=00:00:00:00:00:01")
            .find("nd_tll requires icmp6 with icmp_type=136") != std::string::npos);
  CHECK(parse_err("icmp6,icmp_type=136,nd_sll=00:00:00:00:00:01")
            .find("nd_sll requires icmp6 with icmp_type=135") != std::string::npos);
  CHECK(parse_err("in_port=1/0xff") == "unexpected mask '0xff' at column 11: in_port does not take a mask");
  CHECK(parse_err("ip,nw_ttl=1/0xf") == "unexpected mask '0xf' at column 13: nw_ttl does not take a mask");
  CHECK(parse_err("in_port=70000") ==
        "out-of-range port '70000' at column 9: in_port must be 0..65535 or 0xffffff00..0xffffffff");
  CHECK(parse_err("ip,nw_tos=5") ==
        "bad nw_tos value '5' at column 11: nw_tos is the DSCP field, a multiple of 4 (use nw_ecn for ECN)");
  CHECK(parse_err("ip,nw_ecn=4") == "out-of-range value '4' at column 11: nw_ecn must be 0..3");
  CHECK(parse_err("ip,ip_dscp=64") == "out-of-range value '64' at column 12: ip_dscp must be 0..63");
  CHECK(parse_err("dl_vlan=4096") ==
        "out-of-range value '4096' at column 9: dl_vlan must be 0..4095 (or 0xffff: none)");
  CHECK(parse_err("dl_vlan_pcp=8") == "out-of-range value '8' at column 13: dl_vlan_pcp must be 0..7");
  CHECK(parse_err("ip,ip_frag=maybe") ==
        "bad ip_frag value 'maybe' at column 12: expected no, yes, first, later or not_later");
  CHECK(parse_err("tcp,actions") == "missing '=' after 'actions' at column 5: write actions=<actions>");
  CHECK(parse_err("tcp,tcp_flags=+syn+bogus") == "unknown tcp_flags flag 'bogus' at column 20");
  CHECK(parse_err("tcp,tcp_flags=syn|bogus") == "unknown tcp_flags flag 'bogus' at column 19");
  CHECK(parse_err("tcp,tcp_flags=0x1000") == "out-of-range tcp_flags '0x1000' at column 15");
  CHECK(parse_err("tcp,tcp_flags=syn+ack") == "unknown tcp_flags flag 'syn+ack' at column 15");
  CHECK(parse_err("tun_flags=+bogus") == "unknown tun_flags flag 'bogus' at column 12");
  CHECK(parse_err("table=255") == "out-of-range value '255' at column 7: table must be 0..254");
  CHECK(parse_err("priority=65536") == "out-of-range value '65536' at column 10: priority must be 0..65535");
  CHECK(parse_err("ip,nw_ttl=256") == "out-of-range value '256' at column 11: nw_ttl must be 0..255");
  CHECK(parse_err("arp,arp_op=256") == "out-of-range value '256' at column 12: arp_op must be 0..255");
  CHECK(parse_err("tcp=1") == "unexpected value '1' at column 5: tcp takes no value");
  CHECK(parse_err("send_flow_rem=1") == "unexpected value '1' at column 15: send_flow_rem takes no value");
  CHECK(parse_err("dl_src=00:11:22:33:44") == "bad Ethernet address '00:11:22:33:44' at column 8");
  CHECK(parse_err("dl_src=00:11:22:33:44:555") == "bad Ethernet address '00:11:22:33:44:555' at column 8");
  CHECK(parse_err("ipv6,ipv6_src=2001:db8::1/129") ==
        "bad IPv6 mask '129' at column 27: a prefix length is 0..128");
  CHECK(parse_err("ip,nw_src=10.0.0.0/33") == "bad IPv4 mask '33' at column 20: a prefix length is 0..32");
  CHECK(parse_err("ip,nw_src=10.0.0.0/255.0.0.256") == "bad IPv4 mask '255.0.0.256' at column 20");
  CHECK(parse_err("ip,nw_src=10.0.0") == "bad IPv4 address '10.0.0' at column 11");
  CHECK(parse_err("ip,nw_src=") ==
        "missing value for field 'nw_src' at column 4: nw_src needs nw_src=<value>");
  CHECK(parse_err("ip,nw_src") ==
        "missing value for field 'nw_src' at column 4: nw_src needs nw_src=<value>");
  CHECK(parse_err("priority") == "missing value for 'priority' at column 1: priority needs priority=<value>");
  CHECK(parse_err("ip,=5") == "unexpected character '=' at column 4: expected a field name");
  CHECK(parse_err("ip,reg8=1") == "unknown field 'reg8' at column 4");
  CHECK(parse_err("ipv6,ipv6_label=0x100000") ==
        "out-of-range value '0x100000' at column 17: ipv6_label must be 0..1048575");
  CHECK(parse_err("metadata(1)") == "unexpected '(' after 'metadata' at column 1: expected field=value");
  CHECK(parse_err("mpls") == "unknown field 'mpls' at column 1");
  CHECK(parse_err(std::string("ipv6,ipv6_src=::1\0x", 19)).find("bad IPv6 address") != std::string::npos);
  CHECK(parse_err("udp,dl_type=0x88cc") ==
        "missing prerequisite for 'udp' at column 1: nw_proto requires ip, ipv6 or arp");
}

namespace {

// A random, valid flow line from the pieces below.
std::string random_of_line(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<const char*> xs) {
    std::vector<const char*> v(xs);
    return std::string(v[rng() % v.size()]);
  };
  auto maybe = [&] { return rng() % 2 == 0; };
  std::vector<std::string> parts;
  std::string proto =
      pick({"ip", "tcp", "udp", "sctp", "icmp", "ipv6", "tcp6", "udp6", "icmp6", "arp", "rarp", ""});
  if (!proto.empty()) parts.push_back(proto);
  bool v4 = proto == "ip" || proto == "tcp" || proto == "udp" || proto == "sctp" || proto == "icmp";
  bool v6 = proto == "ipv6" || proto == "tcp6" || proto == "udp6" || proto == "icmp6";
  bool l4 = proto == "tcp" || proto == "udp" || proto == "sctp" || proto == "tcp6" || proto == "udp6";
  bool is_arp = proto == "arp" || proto == "rarp";
  if (maybe()) parts.push_back("in_port=" + pick({"1", "LOCAL", "65000", "controller"}));
  if (maybe()) parts.push_back("priority=" + std::to_string(rng() % 65536));
  if (maybe())
    parts.push_back("reg" + std::to_string(rng() % 8) + "=" + std::to_string(rng()) + pick({"", "/0xff"}));
  if (maybe()) parts.push_back("metadata=" + pick({"0x1", "0x1234/0xff00", "0"}));
  if (maybe()) parts.push_back("tun_id=" + pick({"0x1", "5/0xf", "0"}));
  if (maybe())
    parts.push_back("tun_dst=10.0.0." + std::to_string(rng() % 256) + pick({"", "/24", "/255.0.255.0"}));
  if (maybe())
    parts.push_back(pick({"dl_vlan=5", "dl_vlan_pcp=2", "vlan_tci=0x1000/0x1000", "dl_vlan=0xffff"}));
  if (maybe())
    parts.push_back("dl_src=00:00:00:00:00:" + std::to_string(10 + rng() % 90) +
                    pick({"", "/ff:ff:ff:00:00:ff"}));
  if (maybe()) parts.push_back("pkt_mark=" + std::to_string(rng() % 1000));
  if (v4 && maybe())
    parts.push_back("nw_src=" + std::to_string(rng() % 256) + ".0.0.0/" + std::to_string(rng() % 33));
  if (v4 && maybe()) parts.push_back("nw_tos=" + std::to_string((rng() % 64) * 4));
  if ((v4 || v6) && maybe()) parts.push_back("nw_ecn=" + std::to_string(rng() % 4));
  if ((v4 || v6) && maybe()) parts.push_back("ip_frag=" + pick({"no", "yes", "first", "not_later"}));
  if (v6 && maybe())
    parts.push_back("ipv6_dst=2001:db8::" + std::to_string(rng() % 100) + "/" + std::to_string(rng() % 129));
  if (v6 && maybe()) parts.push_back("ipv6_label=" + std::to_string(rng() % 0x100000));
  if (l4 && maybe()) parts.push_back("tp_dst=" + std::to_string(rng() % 65536) + pick({"", "/0xff00"}));
  if (l4 && maybe()) parts.push_back("tp_src=" + std::to_string(rng() % 65536));
  if ((proto == "tcp" || proto == "tcp6") && maybe())
    parts.push_back("tcp_flags=" + pick({"+syn-ack", "syn|fin", "0x3/0x7"}));
  if (proto == "icmp" && maybe()) parts.push_back("icmp_type=" + std::to_string(rng() % 256));
  if (proto == "icmp6" && maybe()) {
    parts.push_back("icmp_type=" + pick({"135", "136"}));
    parts.push_back("nd_target=fe80::" + std::to_string(rng() % 100));
  }
  if (is_arp && maybe()) parts.push_back("arp_op=" + std::to_string(rng() % 256));
  if (is_arp && maybe()) parts.push_back("arp_tha=00:11:22:33:44:" + std::to_string(10 + rng() % 90));
  std::shuffle(parts.begin(), parts.end(), rng);
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ",") + p;
  if (maybe()) out += (out.empty() ? "" : ",") + std::string("actions=drop");
  return out;
}

}  // namespace

TEST_CASE("of: random valid lines: print -> parse is the identity") {
  std::mt19937 rng(4321);
  for (int i = 0; i < 3000; ++i) {
    std::string line = random_of_line(rng);
    CAPTURE(line);
    OfFlow f = parse_flow_ok(line);
    std::string printed = format_of_flow(f);
    CAPTURE(printed);
    OfFlow back = parse_flow_ok(printed);
    REQUIRE(back.match == f.match);
    REQUIRE(back.meta == f.meta);
    REQUIRE(back.has_actions == f.has_actions);
    REQUIRE(back.actions == f.actions);
    REQUIRE(format_of_flow(back) == printed);
  }
}

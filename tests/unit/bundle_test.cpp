// The OpenFlow bundle() action: parse and print as ovs-ofctl 3.1 does
// (cases observed with `ovs-ofctl parse-flow` and add-flow + dump-flows on
// a private Open vSwitch 3.1), refusals with the token and column,
// check_of_actions()' member check, and bundle_execute(): active_backup
// takes the first enabled member, hrw the highest random weight, and the
// megaflow mask gets exactly the hash fields OVS unwildcards.
#include "flow/bundle.h"

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>

#include "flow/flow_text.h"
#include "flow/of_actions.h"
#include "flow/of_match_syntax.h"

using namespace keel::flow;
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

std::string canon(const std::string& s) {
  OfActions a = parse_ok(s);
  std::string text = format_of_actions(a);
  CHECK(parse_ok(text) == a);  // parse(format(x)) == x
  return text;
}

FlowKey zero_key() {
  FlowKey k;
  std::memset(&k, 0, sizeof k);
  return k;
}

FlowKey tcp4(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, uint8_t proto = 6) {
  FlowKey k = zero_key();
  k.dl_type = hton16(0x0800);
  k.nw_src = hton32(src);
  k.nw_dst = hton32(dst);
  k.nw_proto = proto;
  k.tp_src = hton16(sport);
  k.tp_dst = hton16(dport);
  k.dl_src = EthAddr{{0, 0, 0, 0, 0, 1}};
  k.dl_dst = EthAddr{{0, 0, 0, 0, 0, 2}};
  return k;
}

bool all_ones(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != 0xff) return false;
  return true;
}
bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

}  // namespace

TEST_CASE("bundle: prints as ovs-ofctl 3.1 prints it") {
  struct Case {
    const char* input;
    const char* dumped;  // ovs-ofctl parse-flow "actions=INPUT" (3.1.0)
  };
  const Case cases[] = {
      {"bundle(eth_src,0,hrw,ofport,members:1,2)", "bundle(eth_src,0,hrw,ofport,members:1,2)"},
      {"bundle(symmetric_l4,60,hrw,ofport,slaves:2,3)", "bundle(symmetric_l4,60,hrw,ofport,members:2,3)"},
      {"BUNDLE(nw_src,65535,HRW,OFPORT,MEMBERS:4)", "bundle(nw_src,65535,hrw,ofport,members:4)"},
      {"bundle(symmetric_l3,0,hrw,ofport,members:)", "bundle(symmetric_l3,0,hrw,ofport,members:)"},
      {"bundle(symmetric_l3,0,hrw,ofport,members:LOCAL,IN_PORT)",
       "bundle(symmetric_l3,0,hrw,ofport,members:LOCAL,IN_PORT)"},
      {"bundle(eth_src,0,hrw,ofport,members:1,2),output:3",
       "bundle(eth_src,0,hrw,ofport,members:1,2),output:3"},
      {"bundle(eth_src,0,hrw,ofport,members:[1,2])", "bundle(eth_src,0,hrw,ofport,members:1,2)"},
      {"bundle(eth_src,0,hrw,ofport,members:1 2)", "bundle(eth_src,0,hrw,ofport,members:1,2)"},
      {"bundle(eth_src,0,hrw,ofport,members:1,,2)", "bundle(eth_src,0,hrw,ofport,members:1,2)"},
      {"bundle(eth_src,0,hrw,ofport,members:none)", "bundle(eth_src,0,hrw,ofport,members:ANY)"},
      {"bundle(eth_src,0,hrw,ofport,members:65535)", "bundle(eth_src,0,hrw,ofport,members:ANY)"},
      {"bundle(eth_src,0,hrw,ofport,members:65528)", "bundle(eth_src,0,hrw,ofport,members:IN_PORT)"},
      {"bundle(eth_src,0,hrw,ofport,members:in_port)", "bundle(eth_src,0,hrw,ofport,members:IN_PORT)"},
      {"bundle(eth_src,0,hrw,ofport,members:NORMAL,FLOOD,ALL,TABLE)",
       "bundle(eth_src,0,hrw,ofport,members:NORMAL,FLOOD,ALL,TABLE)"},
      {"bundle(eth_src,0,hrw,ofport,members:0)", "bundle(eth_src,0,hrw,ofport,members:0)"},
      {"bundle(eth_src 0 hrw ofport members:1)", "bundle(eth_src,0,hrw,ofport,members:1)"},
      {"bundle(eth_src,0,hrw,ofport,members 1)", "bundle(eth_src,0,hrw,ofport,members:1)"},
      {"bundle(symmetric_l3l4+udp,65535,active_backup,ofport,slaves:2,3)",
       "bundle(symmetric_l3l4+udp,65535,active_backup,ofport,members:2,3)"},
      {"bundle(symmetric_l3l4,9,active_backup,ofport,members:7)",
       "bundle(symmetric_l3l4,9,active_backup,ofport,members:7)"},
      {"bundle(nw_dst,1,hrw,ofport,members:1)", "bundle(nw_dst,1,hrw,ofport,members:1)"},
  };
  for (const Case& c : cases) {
    INFO("input: " << c.input);
    CHECK(canon(c.input) == c.dumped);
  }
}

TEST_CASE("bundle: the parsed value") {
  OfActions a = parse_ok("bundle(symmetric_l3l4+udp,50,active_backup,ofport,members:3,1,LOCAL)");
  REQUIRE(a.size() == 1);
  const auto* b = std::get_if<OfBundle>(&a[0]);
  REQUIRE(b);
  CHECK(b->fields == HashFields::symmetric_l3l4_udp);
  CHECK(b->basis == 50);
  CHECK(b->algorithm == BundleAlgorithm::active_backup);
  CHECK(b->members == std::vector<uint32_t>{3, 1, kOfppLocal});
}

TEST_CASE("bundle: port names both ways, as dump-flows --names") {
  OfParseOptions po;
  po.port_number = [](std::string_view n) -> std::optional<uint32_t> {
    if (n == "p2") return 2;
    if (n == "p3") return 3;
    return std::nullopt;
  };
  OfFormatOptions fo;
  fo.port_name = [](uint32_t p) -> std::optional<std::string> {
    if (p == 2) return "p2";
    if (p == 3) return "p3";
    return std::nullopt;
  };
  OfActions a = parse_ok("bundle(symmetric_l3l4+udp,65535,active_backup,ofport,slaves:p2,p3)", po);
  CHECK(format_of_actions(a) == "bundle(symmetric_l3l4+udp,65535,active_backup,ofport,members:2,3)");
  CHECK(format_of_actions(a, fo) == "bundle(symmetric_l3l4+udp,65535,active_backup,ofport,members:p2,p3)");
  // A number that names no port stays a number (OVS: members:5).
  CHECK(format_of_actions(parse_ok("bundle(eth_src,0,hrw,ofport,members:5)"), fo) ==
        "bundle(eth_src,0,hrw,ofport,members:5)");
}

TEST_CASE("bundle: refusals name the token") {
  // ovs-ofctl: "eth_src,0,hrw,ofport: not enough arguments to bundle action"
  CHECK(parse_err("bundle(eth_src,0,hrw,ofport)").find("not enough arguments to bundle action") !=
        std::string::npos);
  CHECK(parse_err("bundle(eth_src,0,hrw)").find("not enough arguments") != std::string::npos);
  CHECK(parse_err("bundle()").find("not enough arguments") != std::string::npos);
  // ovs-ofctl: "missing member delimiter, expected `members', got `ports'"
  CHECK(parse_err("bundle(eth_src,0,hrw,ofport,ports:1)") ==
        "missing member delimiter, expected `members', got 'ports' at column 29: "
        "bundle(fields,basis,algorithm,ofport,members:PORT,...)");
  // strtok_r()'s reading of spaces around commas, as ovs-ofctl: got `,'.
  CHECK(parse_err("bundle(symmetric_l3l4+udp, 50 , active_backup , ofport , members: 1)").find("got ','") !=
        std::string::npos);
  CHECK(parse_err("bundle(foo,0,hrw,ofport,members:1)").find("unknown bundle fields 'foo' at column 8") == 0);
  CHECK(
      parse_err("bundle(eth_src,0,rr,ofport,members:1)").find("unknown bundle algorithm 'rr' at column 18") ==
      0);
  CHECK(parse_err("bundle(eth_src,0,hrw,port,members:1)").find("unknown member_type 'port' at column 22") ==
        0);
  CHECK(parse_err("bundle(eth_src,0,hrw,ofport,members:p1)").find("bad port number 'p1' at column 37") == 0);
  CHECK(parse_err("bundle(eth_src,0,hrw,ofport,members:65536)").find("bad port number '65536'") == 0);
  CHECK(parse_err("bundle(eth_src,0,hrw,ofport,members:1):").find("at column") != std::string::npos);
  // keel refuses what ovs-ofctl's atoi() would silently misread.
  CHECK(parse_err("bundle(eth_src,abc,hrw,ofport,members:1)").find("bad bundle basis 'abc' at column 16") ==
        0);
  CHECK(parse_err("bundle(eth_src,0x10,hrw,ofport,members:1)").find("bad bundle basis") == 0);
  CHECK(parse_err("bundle(eth_src,65536,hrw,ofport,members:1)").find("bad bundle basis") == 0);
  CHECK(parse_err("bundle(eth_src,-1,hrw,ofport,members:1)").find("bad bundle basis") == 0);
  std::string many = "bundle(eth_src,0,hrw,ofport,members:";
  for (int i = 1; i <= 2049; ++i) many += std::to_string(i) + ",";
  many += ")";
  CHECK(parse_err(many).find("too many bundle members") == 0);
  // Not in parentheses; bundle_load is refused by name.
  CHECK(parse_err("bundle:eth_src").find("bundle takes its arguments in parentheses") == 0);
  CHECK(parse_err("bundle_load(eth_src,0,hrw,ofport,NXM_NX_REG0[],members:1,2)")
            .find("unsupported action 'bundle_load' at column 1") == 0);
  // Not in an action set (OVS: "disallowed action in action set").
  CHECK(parse_err("write_actions(bundle(eth_src,0,hrw,ofport,members:1,2))")
            .find("disallowed action in action set") == 0);
}

TEST_CASE("bundle: check_of_actions() as bundle_check()") {
  auto check = [](const std::string& actions) {
    keel::Status st = check_of_actions(parse_ok(actions), Match{}, 0);
    return st.ok() ? std::string("ok") : st.message();
  };
  CHECK(check("bundle(eth_src,0,hrw,ofport,members:1,2)") == "ok");
  CHECK(check("bundle(eth_src,0,hrw,ofport,members:0)") == "ok");
  CHECK(check("bundle(eth_src,0,hrw,ofport,members:LOCAL,IN_PORT,NONE,NORMAL,FLOOD,ALL,TABLE)") == "ok");
  CHECK(check("bundle(eth_src,0,hrw,ofport,members:)") == "ok");
  // OVS: "unsupported controller member" (OFPBAC_BAD_OUT_PORT).
  CHECK(check("bundle(symmetric_l3,0,hrw,ofport,members:CONTROLLER)").find("unsupported controller member") !=
        std::string::npos);
  // OVS: "invalid member 65280" (OFPBAC_BAD_OUT_PORT).
  CHECK(check("bundle(eth_src,0,hrw,ofport,members:65280)").find("invalid member 65280") !=
        std::string::npos);
  CHECK(check("bundle(eth_src,0,hrw,ofport,members:1,0xfff7)").find("invalid member 65527") !=
        std::string::npos);
}

TEST_CASE("bundle_execute: active_backup takes the first enabled member, in the listed order") {
  OfBundle b{HashFields::eth_src, 0, BundleAlgorithm::active_backup, {3, 1, 2}};
  FlowKey f = tcp4(1, 2, 3, 4);
  FlowKey wc = zero_key();
  std::set<uint32_t> up = {1, 2, 3};
  auto enabled = [&](uint32_t p) { return up.count(p) > 0; };
  CHECK(bundle_execute(b, f, &wc, enabled) == 3u);
  up.erase(3);
  CHECK(bundle_execute(b, f, &wc, enabled) == 1u);
  up.erase(1);
  CHECK(bundle_execute(b, f, &wc, enabled) == 2u);
  up.clear();
  CHECK_FALSE(bundle_execute(b, f, &wc, enabled).has_value());
  // active_backup reads no packet field.
  CHECK(wc == zero_key());
}

TEST_CASE(
    "bundle_execute: hrw spreads flows, keeps a flow's member, and moves only the flows of a failed member") {
  OfBundle b{HashFields::symmetric_l4, 0, BundleAlgorithm::hrw, {1, 2, 3, 4}};
  std::set<uint32_t> up = {1, 2, 3, 4};
  auto enabled = [&](uint32_t p) { return up.count(p) > 0; };
  std::map<uint32_t, int> count;
  std::map<int, uint32_t> chosen;
  for (int i = 0; i < 4000; ++i) {
    FlowKey f = tcp4(0x0a000001 + i, 0x0a100001, static_cast<uint16_t>(1000 + i), 80);
    auto m = bundle_execute(b, f, nullptr, enabled);
    REQUIRE(m.has_value());
    CHECK(bundle_execute(b, f, nullptr, enabled) == m);  // deterministic
    ++count[*m];
    chosen[i] = *m;
  }
  for (uint32_t p : b.members) CHECK(count[p] > 800);  // ~1000 each
  // Member 2 fails: its flows go elsewhere, nobody else's move (HRW).
  up.erase(2);
  for (int i = 0; i < 4000; ++i) {
    FlowKey f = tcp4(0x0a000001 + i, 0x0a100001, static_cast<uint16_t>(1000 + i), 80);
    auto m = bundle_execute(b, f, nullptr, enabled);
    REQUIRE(m.has_value());
    CHECK(*m != 2u);
    if (chosen[i] != 2) CHECK(*m == chosen[i]);
  }
  up.clear();
  CHECK_FALSE(bundle_execute(b, tcp4(1, 2, 3, 4), nullptr, enabled).has_value());
}

TEST_CASE("bundle_execute: the basis changes the choice, symmetric fields give both directions one member") {
  auto all = [](uint32_t) { return true; };
  OfBundle b{HashFields::symmetric_l3l4, 0, BundleAlgorithm::hrw, {1, 2, 3, 4, 5, 6, 7, 8}};
  int same_dir = 0, moved = 0;
  for (int i = 0; i < 200; ++i) {
    FlowKey fwd = tcp4(0x0a000001 + i, 0x0a100001, static_cast<uint16_t>(1000 + i), 80);
    FlowKey rev = tcp4(0x0a100001, 0x0a000001 + i, 80, static_cast<uint16_t>(1000 + i));
    same_dir += bundle_execute(b, fwd, nullptr, all) == bundle_execute(b, rev, nullptr, all);
    OfBundle b2 = b;
    b2.basis = 1;
    moved += bundle_execute(b, fwd, nullptr, all) != bundle_execute(b2, fwd, nullptr, all);
  }
  CHECK(same_dir == 200);
  CHECK(moved > 100);  // ~7/8 of them
}

TEST_CASE("flow_mask_hash_fields: what the megaflow matches, as Open vSwitch's") {
  auto mask = [](const FlowKey& f, HashFields h) {
    FlowKey wc = zero_key();
    OfBundle b{h, 0, BundleAlgorithm::hrw, {1, 2}};
    (void)bundle_execute(b, f, &wc, [](uint32_t) { return true; });
    return wc;
  };
  const FlowKey tcp = tcp4(1, 2, 3, 4, 6), udp = tcp4(1, 2, 3, 4, 17), icmp = tcp4(1, 2, 8, 0, 1);

  SUBCASE("eth_src: dl_src only") {
    FlowKey wc = mask(tcp, HashFields::eth_src);
    CHECK(all_ones(&wc.dl_src, 6));
    wc.dl_src = EthAddr{};
    CHECK(wc == zero_key());
  }
  SUBCASE("symmetric_l3l4: addresses, proto, TCP ports; not UDP ports") {
    FlowKey wc = mask(tcp, HashFields::symmetric_l3l4);
    CHECK(wc.nw_src == 0xffffffffu);
    CHECK(wc.nw_dst == 0xffffffffu);
    CHECK(wc.nw_proto == 0xff);
    CHECK(wc.tp_src == 0xffff);
    CHECK(wc.tp_dst == 0xffff);
    CHECK(all_zero(&wc.dl_src, 6));
    FlowKey wu = mask(udp, HashFields::symmetric_l3l4);
    CHECK(wu.nw_proto == 0xff);
    CHECK(wu.tp_src == 0);
  }
  SUBCASE("symmetric_l3l4+udp: UDP ports too, not in a fragment") {
    CHECK(mask(udp, HashFields::symmetric_l3l4_udp).tp_src == 0xffff);
    FlowKey frag = udp;
    frag.nw_frag = kFragAny;
    CHECK(mask(frag, HashFields::symmetric_l3l4_udp).tp_src == 0);
    FlowKey tfrag = tcp;
    tfrag.nw_frag = kFragAny;
    CHECK(mask(tfrag, HashFields::symmetric_l3l4_udp).tp_dst == 0);
  }
  SUBCASE("symmetric_l3l4 on a non-IP flow: nothing (OVS hashes L2 without unwildcarding it)") {
    FlowKey arp = zero_key();
    arp.dl_type = hton16(0x0806);
    CHECK(mask(arp, HashFields::symmetric_l3l4) == zero_key());
  }
  SUBCASE("symmetric_l4: both MACs, VLAN VID+CFI, addresses, proto, ports (ICMP: 8 bits; UDP: none)") {
    FlowKey wc = mask(tcp, HashFields::symmetric_l4);
    CHECK(all_ones(&wc.dl_src, 6));
    CHECK(all_ones(&wc.dl_dst, 6));
    CHECK(wc.vlans[0].tci == hton16(0x1fff));
    CHECK(wc.vlans[1].tci == hton16(0x1fff));
    CHECK(wc.tp_src == 0xffff);
    FlowKey wi = mask(icmp, HashFields::symmetric_l4);
    CHECK(wi.tp_src == hton16(0x00ff));
    CHECK(mask(udp, HashFields::symmetric_l4).tp_src == 0);
  }
  SUBCASE("nw_src, nw_dst, symmetric_l3: the addresses") {
    FlowKey s = mask(tcp, HashFields::nw_src);
    CHECK(s.nw_src == 0xffffffffu);
    CHECK(s.nw_dst == 0);
    FlowKey d = mask(tcp, HashFields::nw_dst);
    CHECK(d.nw_dst == 0xffffffffu);
    CHECK(d.nw_src == 0);
    FlowKey l3 = mask(tcp, HashFields::symmetric_l3);
    CHECK(l3.nw_src == 0xffffffffu);
    CHECK(l3.nw_dst == 0xffffffffu);
    CHECK(l3.nw_proto == 0);
  }
  SUBCASE("IPv6 addresses") {
    FlowKey v6 = zero_key();
    v6.dl_type = hton16(0x86dd);
    v6.nw_proto = 6;
    FlowKey wc = mask(v6, HashFields::symmetric_l3l4);
    CHECK(all_ones(&wc.ipv6_src, 16));
    CHECK(all_ones(&wc.ipv6_dst, 16));
    CHECK(wc.nw_src == 0);
  }
  SUBCASE("one member: nothing is consulted") {
    FlowKey wc = zero_key();
    OfBundle one{HashFields::symmetric_l4, 0, BundleAlgorithm::hrw, {1}};
    CHECK(bundle_execute(one, tcp, &wc, [](uint32_t) { return true; }) == 1u);
    CHECK(wc == zero_key());
  }
}

TEST_CASE("flow hashes: what each one reads") {
  FlowKey a = tcp4(1, 2, 3, 4);
  FlowKey b = a;
  b.dl_dst = EthAddr{{9, 9, 9, 9, 9, 9}};
  CHECK(flow_hash_fields(a, HashFields::eth_src, 0) == flow_hash_fields(b, HashFields::eth_src, 0));
  CHECK(flow_hash_fields(a, HashFields::eth_src, 0) != flow_hash_fields(a, HashFields::eth_src, 1));
  CHECK(flow_hash_fields(a, HashFields::symmetric_l4, 0) != flow_hash_fields(b, HashFields::symmetric_l4, 0));
  // UDP ports are left out of symmetric_l3l4, kept in symmetric_l3l4+udp.
  FlowKey u1 = tcp4(1, 2, 3, 4, 17), u2 = tcp4(1, 2, 5, 6, 17);
  CHECK(flow_hash_fields(u1, HashFields::symmetric_l3l4, 0) ==
        flow_hash_fields(u2, HashFields::symmetric_l3l4, 0));
  CHECK(flow_hash_fields(u1, HashFields::symmetric_l3l4_udp, 0) !=
        flow_hash_fields(u2, HashFields::symmetric_l3l4_udp, 0));
  // nw_src / nw_dst of a non-IP flow: the basis.
  FlowKey arp = zero_key();
  arp.dl_type = hton16(0x0806);
  CHECK(flow_hash_fields(arp, HashFields::nw_src, 77) == 77u);
  // 5-tuple: not symmetric, ports of TCP/UDP/SCTP/ICMP.
  CHECK(flow_hash_5tuple(tcp4(1, 2, 3, 4), 0) != flow_hash_5tuple(tcp4(2, 1, 4, 3), 0));
  CHECK(flow_hash_5tuple(tcp4(1, 2, 3, 4), 0) != flow_hash_5tuple(tcp4(1, 2, 3, 5), 0));
  CHECK(flow_hash_5tuple(tcp4(1, 2, 3, 4, 47), 0) ==
        flow_hash_5tuple(tcp4(1, 2, 3, 5, 47), 0));  // GRE: no ports
  CHECK(hash_mac(a.dl_src, 1, 0) != hash_mac(a.dl_src, 2, 0));
  CHECK(hash_mac(a.dl_src, 1, 0) != hash_mac(a.dl_src, 1, 5));
}

TEST_CASE("hash fields and algorithm names") {
  for (HashFields f :
       {HashFields::eth_src, HashFields::symmetric_l4, HashFields::symmetric_l3l4,
        HashFields::symmetric_l3l4_udp, HashFields::nw_src, HashFields::nw_dst, HashFields::symmetric_l3})
    CHECK(parse_hash_fields(to_string(f)) == f);
  CHECK(parse_hash_fields("SYMMETRIC_L3L4+UDP") == HashFields::symmetric_l3l4_udp);
  CHECK_FALSE(parse_hash_fields("l4").has_value());
  CHECK(parse_bundle_algorithm("Active_Backup") == BundleAlgorithm::active_backup);
  CHECK(std::string(to_string(BundleAlgorithm::hrw)) == "hrw");
}

TEST_CASE(
    "bundle: any mix of its tokens parses to something that prints back the same, or to a clear error") {
  const char* fields[] = {"eth_src", "SYMMETRIC_L4", "symmetric_l3l4+udp", "nw_dst", "x", ""};
  const char* bases[] = {"0", "1", "65535", "65536", "0x10", "-1", ""};
  const char* algs[] = {"hrw", "active_backup", "HRW", "rr", ""};
  const char* types[] = {"ofport", "OFPORT", "port", ""};
  const char* delims[] = {"members:", "slaves:", "members", "Members: ", "ports:", ":", ""};
  const char* ports[] = {"1",       "0",  "65535",  "65536",      "LOCAL", "none",
                         "in_port", "p1", "0xfff7", "CONTROLLER", ""};
  const char* seps[] = {",", " ", ", ", " , ", ",,", "[", "]", ":"};
  uint32_t seed = 12345;
  auto rnd = [&](size_t n) {
    seed = seed * 1103515245u + 12345u;
    return (seed >> 8) % n;
  };
#define PICK(a) a[rnd(sizeof a / sizeof *a)]
  int ok = 0;
  for (int n = 0; n < 20000; ++n) {
    std::string s = "bundle(";
    s += PICK(fields);
    s += rnd(4) ? "," : PICK(seps);
    s += PICK(bases);
    s += rnd(4) ? "," : PICK(seps);
    s += PICK(algs);
    s += rnd(4) ? "," : PICK(seps);
    s += PICK(types);
    s += rnd(4) ? "," : PICK(seps);
    s += PICK(delims);
    const size_t np = rnd(5);
    for (size_t i = 0; i < np; ++i) {
      if (i) s += rnd(3) ? "," : PICK(seps);
      s += PICK(ports);
    }
    s += ")";
    if (rnd(4) == 0) s += ",output:2";
    auto r = parse_of_actions(s);
    if (!r.ok()) {
      CHECK_FALSE(r.status().message().empty());
      continue;
    }
    ++ok;
    const std::string text = format_of_actions(*r);
    auto back = parse_of_actions(text);
    INFO(s << " -> " << text);
    REQUIRE(back.ok());
    CHECK(*back == *r);
    CHECK(format_of_actions(*back) == text);
    (void)check_of_actions(*r, Match{}, 0);
  }
#undef PICK
  CHECK(ok > 200);  // 322 of the 20000 with this seed
}

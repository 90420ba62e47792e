// tnl_push / tnl_pop datapath actions: Open vSwitch 3.1's text (tests/odp.at,
// tests/tunnel-push-pop.at, tests/tunnel-push-pop-ipv6.at) round-trips
// byte-exact; the header bytes the text parser builds equal what
// packet::build_tunnel_header() builds for the same tunnel; bad texts and
// bad encodings are refused with a reason.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "flow/dp_actions.h"
#include "flow/flow_text.h"
#include "packet/tunnel_header.h"

using namespace keel;
using namespace keel::flow;
using keel::flow::text::parse_ipv4;
using keel::flow::text::parse_ipv6;

namespace {

std::string round_trip(std::string_view in) {
  auto a = parse_dp_actions(in);
  if (!a.ok()) return "ERROR: " + a.status().message();
  CHECK(validate_dp_actions(a->bytes()).ok());
  std::string out = format_dp_actions(*a);
  auto b = parse_dp_actions(out);
  REQUIRE(b.ok());
  CHECK(*b == *a);
  return out;
}

std::string error_of(std::string_view in) {
  auto a = parse_dp_actions(in);
  if (a.ok()) return "no error; prints " + format_dp_actions(*a);
  return a.status().message();
}

const char* const kOvsTexts[] = {
    // tests/odp.at
    "tnl_pop(4)",
    "tnl_push(tnl_port(4),header(size=42,type=3,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,dl_type=0x0800),"
    "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),gre((flags=0x2000,proto=0x6558),key=0x1e241)),"
    "out_port(1))",
    "tnl_push(tnl_port(4),header(size=46,type=3,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,dl_type=0x0800),"
    "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),gre((flags=0xa000,proto=0x6558),csum=0x0,"
    "key=0x1e241)),out_port(1))",
    "tnl_push(tnl_port(6),header(size=50,type=4,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,dl_type=0x0800),"
    "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),"
    "vxlan(flags=0x8000000,vni=0x1c7)),out_port(1))",
    "tnl_push(tnl_port(6),header(size=50,type=5,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,dl_type=0x0800),"
    "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=6081,csum=0x0),"
    "geneve(oam,vni=0x1c7)),out_port(1))",
    "tnl_push(tnl_port(6),header(size=58,type=5,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,dl_type=0x0800),"
    "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=6081,csum=0x0),"
    "geneve(crit,vni=0x1c7,options({class=0xffff,type=0x80,len=4,0xa}))),out_port(1))",
    "tnl_push(tnl_port(6),header(size=50,type=5,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,dl_type=0x0800),"
    "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=6081,csum=0xffff),"
    "geneve(vni=0x1c7)),out_port(1))",
    "tnl_push(tnl_port(4),header(size=62,type=109,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,dl_type=0x86dd),"
    "ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=47,tclass=0x0,hlimit=64),gre((flags=0x2000,"
    "proto=0x6558),key=0x1e241)),out_port(1))",
    "tnl_push(tnl_port(4),header(size=66,type=109,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,dl_type=0x86dd),"
    "ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=47,tclass=0x0,hlimit=64),gre((flags=0xa000,"
    "proto=0x6558),csum=0x0,key=0x1e241)),out_port(1))",
    "tnl_push(tnl_port(6),header(size=70,type=4,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,dl_type=0x86dd),"
    "ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=17,tclass=0x0,hlimit=64),udp(src=0,dst=4789,"
    "csum=0x0),vxlan(flags=0x8000000,vni=0x1c7)),out_port(1))",
    "tnl_push(tnl_port(6),header(size=70,type=5,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,dl_type=0x86dd),"
    "ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=17,tclass=0x0,hlimit=64),udp(src=0,dst=6081,"
    "csum=0x0),geneve(oam,vni=0x1c7)),out_port(1))",
    "tnl_push(tnl_port(6),header(size=78,type=5,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,dl_type=0x86dd),"
    "ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=17,tclass=0x0,hlimit=64),udp(src=0,dst=6081,"
    "csum=0x0),geneve(crit,vni=0x1c7,options({class=0xffff,type=0x80,len=4,0xa}))),out_port(1))",
    // tests/tunnel-push-pop.at, tunnel-push-pop-ipv6.at
    "tnl_push(tnl_port(4789),header(size=50,type=4,eth(dst=f8:bc:12:44:34:b7,src=aa:55:aa:55:00:00,dl_type=0x0800),"
    "ipv4(src=1.1.2.88,dst=1.1.2.93,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0xffff),"
    "vxlan(flags=0x8000000,vni=0x7c)),out_port(100))",
    "tnl_push(tnl_port(6),header(size=58,type=109,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x86dd),"
    "ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=47,tclass=0x0,hlimit=64),gre((flags=0x0,"
    "proto=0x6558))),out_port(100))",
    "tnl_push(tnl_port(6081),header(size=78,type=5,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,"
    "dl_type=0x86dd),ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=17,tclass=0x0,hlimit=64),udp(src=0,"
    "dst=6081,csum=0xffff),geneve(crit,vni=0x7b,options({class=0xffff,type=0x80,len=4,0xa}))),out_port(100))",
};

}  // namespace

TEST_CASE("tnl_push / tnl_pop: Open vSwitch 3.1's texts round-trip byte-exact") {
  for (const char* t : kOvsTexts) {
    CAPTURE(t);
    CHECK(round_trip(t) == t);
  }
  // In a list, inside clone(), as translation emits it.
  const std::string combined = std::string("clone(") + kOvsTexts[3] + ",2),3";
  CHECK(round_trip(combined) == combined);
}

TEST_CASE("tnl_push: forms that print differently from how they were typed") {
  // tos= is read as %i and printed as %#x; GENEVE options' data right-aligned and printed without leading zeros.
  CHECK(round_trip("tnl_push(tnl_port(6),header(size=50,type=4,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,"
                   "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=16,ttl=64,frag=0x0),udp(src=0,"
                   "dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x1c7)),out_port(1))") ==
        "tnl_push(tnl_port(6),header(size=50,type=4,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,"
        "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0x10,ttl=64,frag=0x0),udp(src=0,dst=4789,"
        "csum=0x0),vxlan(flags=0x8000000,vni=0x1c7)),out_port(1))");
  CHECK(round_trip("tnl_push(tnl_port(6),header(size=66,type=5,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,"
                   "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,"
                   "dst=6081,csum=0x0),geneve(vni=123,options({class=0x102,type=0x3,len=8,0x000a0b}"
                   "{class=0,type=0,len=0}))),out_port(1))") ==
        "tnl_push(tnl_port(6),header(size=66,type=5,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,"
        "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=6081,"
        "csum=0x0),geneve(vni=0x7b,options({class=0x102,type=0x3,len=8,0xa0b}{class=0,type=0,len=0}))),"
        "out_port(1))");
}

TEST_CASE("tnl_push: the text builds the header build_tunnel_header() builds") {
  auto a = parse_dp_actions(kOvsTexts[3]);  // VXLAN over IPv4, vni 0x1c7
  REQUIRE(a.ok());
  DpActionReader r(a->bytes());
  DpAction act = r.next();
  REQUIRE(act.type == DpActionType::kTnlPush);
  CHECK(act.tnl_port() == 6);
  CHECK(act.tnl_push_args().out_port == 1);
  CHECK(act.tnl_push_args().tnl_type == 4);
  packet::TunnelHeaderSpec spec;
  spec.type = packet::TnlType::kVxlan;
  spec.eth_dst = {{0xf8, 0xbc, 0x12, 0x44, 0x34, 0xb6}};
  spec.eth_src = {{0xf8, 0xbc, 0x12, 0x46, 0x58, 0xe0}};
  REQUIRE(parse_ipv4("1.1.2.88", spec.ipv4_src));
  REQUIRE(parse_ipv4("1.1.2.92", spec.ipv4_dst));
  spec.key = 0x1c7;
  auto h = packet::build_tunnel_header(spec);
  REQUIRE(h.ok());
  const std::span<const uint8_t> th = act.tnl_header();
  CHECK(std::vector<uint8_t>(th.begin(), th.end()) == std::vector<uint8_t>(h->span().begin(), h->span().end()));

  // GENEVE with a critical option over IPv6 (udp csum 0xffff: always over IPv6).
  auto g = parse_dp_actions(kOvsTexts[14]);
  REQUIRE(g.ok());
  DpAction ga = DpActionReader(g->bytes()).next();
  packet::TunnelHeaderSpec gs;
  gs.type = packet::TnlType::kGeneve;
  gs.ipv6 = true;
  gs.eth_dst = {{0xf8, 0xbc, 0x12, 0x44, 0x34, 0xb6}};
  gs.eth_src = {{0xaa, 0x55, 0xaa, 0x55, 0x00, 0x00}};
  REQUIRE(parse_ipv6("2001:cafe::88", gs.ipv6_src));
  REQUIRE(parse_ipv6("2001:cafe::92", gs.ipv6_dst));
  gs.key = 0x7b;
  const uint8_t opts[] = {0xff, 0xff, 0x80, 0x01, 0, 0, 0, 0x0a};
  gs.geneve_opts = opts;
  auto gh = packet::build_tunnel_header(gs);
  REQUIRE(gh.ok());
  CHECK(gh->len == 78);
  const std::span<const uint8_t> gth = ga.tnl_header();
  CHECK(std::vector<uint8_t>(gth.begin(), gth.end()) ==
        std::vector<uint8_t>(gh->span().begin(), gh->span().end()));

  // The builder API gives the same list as the text.
  DpActionsBuilder b;
  b.tnl_push(6, 1, 4, h->span());
  auto built = b.finish();
  REQUIRE(built.ok());
  CHECK(*built == *a);
}

TEST_CASE("tnl_push / tnl_pop: bad texts are refused with a reason") {
  const std::string vx_head =
      "tnl_push(tnl_port(6),header(size=50,type=4,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,"
      "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),";
  CHECK(error_of("tnl_pop") == "missing arguments 'tnl_pop' at column 1: expected tnl_pop(N)");
  CHECK(error_of("tnl_pop(x)").find("bad tnl_pop port value 'x'") == 0);
  // size= and type= must match the header read.
  CHECK(error_of("tnl_push(tnl_port(6),header(size=51,type=4,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,"
                 "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),"
                 "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x1c7)),out_port(1))")
            .find("size=51 but the header is 50 bytes") != std::string::npos);
  CHECK(error_of("tnl_push(tnl_port(6),header(size=50,type=5,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,"
                 "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),"
                 "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x1c7)),out_port(1))")
            .find("type=5 but the header is of type 4") != std::string::npos);
  CHECK(error_of(vx_head + "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x1c7)),out_port(1)").find(
            "unbalanced '('") == 0);
  CHECK(error_of(vx_head + "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x1c7)),out_port(1),2)") ==
            "unexpected text ',2' at column 248: after out_port(...)");
  CHECK(error_of(vx_head + "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x1000000)),out_port(1))")
            .find("out-of-range value") == 0);
  CHECK(error_of(vx_head + "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x1c7)),out_port(1))x")
            .find("unexpected text") == 0);
  CHECK(error_of(vx_head + "tcp(src=0,dst=4789)),out_port(1))").find("expected udp(...) or gre(...)") !=
        std::string::npos);
  // A UDP header behind IP protocol 47 is not consistent.
  CHECK(error_of("tnl_push(tnl_port(6),header(size=50,type=4,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,"
                 "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),"
                 "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x1c7)),out_port(1))")
            .find("needs IP protocol 17") != std::string::npos);
  // GRE features keel does not implement: sequence numbers, non-Ethernet payloads.
  CHECK(error_of("tnl_push(tnl_port(3),header(size=46,type=3,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,"
                 "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),"
                 "gre((flags=0x3000,proto=0x6558),key=0x1c8,seq=0x0)),out_port(100))")
            .find("GRE sequence numbers") != std::string::npos);
  CHECK(error_of("tnl_push(tnl_port(3),header(size=42,type=3,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,"
                 "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),"
                 "gre((flags=0x2000,proto=0x800),key=0x1c8)),out_port(100))")
            .find("GRE protocol must be 0x6558") != std::string::npos);
  // A GENEVE option whose data is longer than its len.
  CHECK(error_of("tnl_push(tnl_port(6),header(size=58,type=5,eth(dst=f8:bc:12:44:34:b6,src=f8:bc:12:46:58:e0,"
                 "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),"
                 "udp(src=0,dst=6081,csum=0x0),geneve(vni=0x1c7,options({class=0xffff,type=0x80,len=4,"
                 "0x1122334455}))),out_port(1))")
            .find("longer than its len") != std::string::npos);
}

TEST_CASE("validate_dp_actions checks a tnl_push's header against its layers") {
  auto a = parse_dp_actions(kOvsTexts[3]);
  REQUIRE(a.ok());
  std::vector<uint8_t> bytes(a->bytes().begin(), a->bytes().end());
  REQUIRE(validate_dp_actions(bytes).ok());
  auto corrupt = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> c = bytes;
    c[at] = v;
    return validate_dp_actions(c);
  };
  constexpr size_t kHdr = 16;                 // action header + TnlPushArgs
  CHECK(!corrupt(8 + 6, 5).ok());             // tnl_type 5 (geneve) over a VXLAN header
  CHECK(!corrupt(8 + 7, 1).ok());             // pad
  CHECK(!corrupt(8 + 4, 49).ok());            // header_len 49
  CHECK(!corrupt(kHdr + 12, 0x86).ok());      // dl_type 0x8600
  CHECK(!corrupt(kHdr + 14, 0x46).ok());      // IPv4 with options
  CHECK(!corrupt(kHdr + 14 + 9, 47).ok());    // GRE protocol in front of a UDP header
  CHECK(!corrupt(kHdr + 42, 0).ok());         // VXLAN without its I flag
  CHECK(!corrupt(kHdr + 50, 1).ok());         // non-zero padding after the 50 header bytes
  // tnl_pop takes no payload.
  auto p = parse_dp_actions("tnl_pop(4)");
  REQUIRE(p.ok());
  std::vector<uint8_t> pb(p->bytes().begin(), p->bytes().end());
  pb[1] = 1;
  CHECK(!validate_dp_actions(pb).ok());
}

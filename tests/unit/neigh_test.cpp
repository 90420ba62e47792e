// The neighbour cache (ofproto/tunnel.h NeighborCache; OVS
// lib/tnl-neigh-cache.c): static and learned entries, 15 min aging with an
// injected clock, snooping ARP replies / gratuitous ARP / ND adverts with
// OVS's wildcards, `tnl/neigh/show`'s text; and the ARP / ND frames keel
// sends (compose_*), byte-checked against frames written out here.
#include <doctest/doctest.h>

#include <cstring>

#include "ofproto/tunnel.h"
#include "flow/miniflow.h"
#include "packet/parser.h"

using namespace keel;
using namespace keel::ofproto;
using keel::flow::FlowKey;

namespace {

IpAddr ip(const char* s) {
  auto a = IpAddr::parse(s);
  REQUIRE(a.has_value());
  return *a;
}
flow::EthAddr mac(const char* s) {
  auto m = parse_mac(s);
  REQUIRE(m.has_value());
  return *m;
}

std::vector<uint8_t> hex(const char* s) {
  std::vector<uint8_t> v;
  for (; *s; ++s) {
    if (*s == ' ') continue;
    unsigned x;
    sscanf(s, "%2x", &x);
    v.push_back(static_cast<uint8_t>(x));
    ++s;
  }
  return v;
}

}  // namespace

TEST_CASE("neighbour cache: static entries never age, learned ones after 15 min, show as OVS") {
  uint64_t now = 1000;
  NeighborCache c([&now] { return now; });
  c.set_static("br-phy", ip("1.1.2.92"), mac("f8:bc:12:44:34:b6"));
  c.learn("br-phy", ip("2001:cafe::92"), mac("f8:bc:12:44:34:b7"));
  CHECK(c.lookup("br-phy", ip("1.1.2.92")) == mac("f8:bc:12:44:34:b6"));
  CHECK_FALSE(c.lookup("br-int", ip("1.1.2.92")));  // per bridge
  // The layout ovs-vswitchd 3.1 printed for the same two tnl/neigh/set (live).
  CHECK(c.format() ==
        "IP                                            MAC                 Bridge\n"
        "==========================================================================\n"
        "1.1.2.92                                      f8:bc:12:44:34:b6   br-phy\n"
        "2001:cafe::92                                 f8:bc:12:44:34:b7   br-phy\n");
  now += NeighborCache::kNeighIdleMs - 1;
  CHECK(c.lookup("br-phy", ip("2001:cafe::92")));
  // Re-learning the same MAC refreshes it.
  c.learn("br-phy", ip("2001:cafe::92"), mac("f8:bc:12:44:34:b7"));
  now += 10;
  CHECK(c.lookup("br-phy", ip("2001:cafe::92")));
  now += NeighborCache::kNeighIdleMs;
  CHECK_FALSE(c.lookup("br-phy", ip("2001:cafe::92")));
  CHECK(c.format().find("f8:bc:12:44:34:b7   br-phy STALE\n") != std::string::npos);
  CHECK(c.lookup("br-phy", ip("1.1.2.92")));  // static
  CHECK(c.age() == 1);
  CHECK(c.entries().size() == 1);
  // A learned entry never overrides a static one.
  c.learn("br-phy", ip("1.1.2.92"), mac("00:00:00:00:00:01"));
  CHECK(c.lookup("br-phy", ip("1.1.2.92")) == mac("f8:bc:12:44:34:b6"));
  CHECK(c.static_entries().size() == 1);
  // A new MAC replaces a learned one.
  c.learn("br-phy", ip("1.1.2.93"), mac("00:00:00:00:00:01"));
  c.learn("br-phy", ip("1.1.2.93"), mac("00:00:00:00:00:02"));
  CHECK(c.lookup("br-phy", ip("1.1.2.93")) == mac("00:00:00:00:00:02"));
  c.learn("br-int", ip("1.1.2.93"), mac("00:00:00:00:00:03"));
  c.flush("br-phy");
  CHECK(c.entries().size() == 1);
  c.flush();
  CHECK(c.entries().empty());
}

TEST_CASE("neighbour snoop: ARP reply, gratuitous ARP, ND advert — with OVS's wildcards") {
  uint64_t now = 0;
  NeighborCache c([&now] { return now; });
  auto arp = [](uint8_t op, const char* spa, const char* tpa, const char* sha) {
    FlowKey f{};
    f.dl_type = __builtin_bswap16(0x0806);
    f.nw_proto = op;
    f.nw_src = ip(spa).v4_addr();
    f.nw_dst = ip(tpa).v4_addr();
    f.arp_sha = mac(sha);
    return f;
  };
  FlowKey wc{};
  CHECK(c.snoop(arp(2, "1.1.2.92", "1.1.2.88", "f8:bc:12:44:34:b6"), &wc, "br-phy", true));
  CHECK(c.lookup("br-phy", ip("1.1.2.92")) == mac("f8:bc:12:44:34:b6"));
  CHECK(wc.nw_proto == 0xff);
  CHECK(wc.nw_src == ~uint32_t{0});
  CHECK(wc.arp_sha == flow::EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}});
  // A request is not learned, unless gratuitous (spa == tpa).
  CHECK_FALSE(c.snoop(arp(1, "1.1.2.93", "1.1.2.88", "f8:bc:12:44:34:b7"), nullptr, "br-phy", true));
  CHECK_FALSE(c.lookup("br-phy", ip("1.1.2.93")));
  CHECK(c.snoop(arp(1, "1.1.2.94", "1.1.2.94", "f8:bc:12:44:34:b8"), nullptr, "br-phy", true));
  CHECK(c.lookup("br-phy", ip("1.1.2.94")));
  // A zero sha is not learned; allow_update=false only says "it is one".
  CHECK_FALSE(c.snoop(arp(2, "1.1.2.95", "1.1.2.88", "00:00:00:00:00:00"), nullptr, "br-phy", true));
  CHECK(c.snoop(arp(2, "1.1.2.96", "1.1.2.88", "f8:bc:12:44:34:b9"), nullptr, "br-phy", false));
  CHECK_FALSE(c.lookup("br-phy", ip("1.1.2.96")));

  auto nd = [](uint16_t type, const char* target, const char* tll) {
    FlowKey f{};
    f.dl_type = __builtin_bswap16(0x86dd);
    f.nw_proto = 58;
    f.tp_src = __builtin_bswap16(type);
    f.tp_dst = 0;
    f.nd_target = ip(target).a;
    f.arp_tha = mac(tll);
    return f;
  };
  FlowKey w6{};
  CHECK(c.snoop(nd(136, "2001:cafe::92", "f8:bc:12:44:34:c0"), &w6, "br-phy", true));
  CHECK(c.lookup("br-phy", ip("2001:cafe::92")) == mac("f8:bc:12:44:34:c0"));
  CHECK(w6.tp_src == 0xffff);
  CHECK(w6.nd_target.b[0] == 0xff);
  CHECK(w6.arp_tha == flow::EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}});
  CHECK_FALSE(c.snoop(nd(135, "2001:cafe::93", "f8:bc:12:44:34:c1"), nullptr, "br-phy", true));
  CHECK_FALSE(c.snoop(nd(136, "2001:cafe::93", "00:00:00:00:00:00"), nullptr, "br-phy", true));
  FlowKey ipv4{};
  ipv4.dl_type = __builtin_bswap16(0x0800);
  CHECK_FALSE(c.snoop(ipv4, nullptr, "br-phy", true));
}

TEST_CASE("ARP request and reply bytes") {
  const flow::EthAddr me = mac("aa:55:aa:55:00:00");
  auto req = compose_arp_request(me, ip("1.1.2.88").v4_addr(), ip("1.1.2.92").v4_addr());
  CHECK(req == hex("ffffffffffff aa55aa550000 0806 0001 0800 06 04 0001 aa55aa550000 01010258 "
                   "000000000000 0101025c"));
  auto rep = compose_arp_reply(me, ip("1.1.2.88").v4_addr(), mac("f8:bc:12:44:34:b6"), ip("1.1.2.92").v4_addr());
  CHECK(rep == hex("f8bc124434b6 aa55aa550000 0806 0001 0800 06 04 0002 aa55aa550000 01010258 "
                   "f8bc124434b6 0101025c"));
  // The parser keys them as snoop expects.
  FlowKey f{};
  packet::PacketMetadata md{};
  flow::Miniflow mf;
  packet::LayerOffsets ofs;
  REQUIRE(packet::parse_frame(rep.data(), static_cast<uint32_t>(rep.size()), md, mf, ofs));
  flow::expand(mf, f);
  NeighborCache c([] { return uint64_t{0}; });
  CHECK(c.snoop(f, nullptr, "br", true));
  CHECK(c.lookup("br", ip("1.1.2.88")) == me);
}

TEST_CASE("ND solicit and advert bytes (RFC 4861, as OVS compose_nd_ns / compose_nd_na)") {
  const flow::EthAddr me = mac("aa:55:aa:55:00:00");
  const flow::In6Addr src = ip("2001:cafe::88").a, dst = ip("2001:cafe::92").a;
  auto ns = compose_nd_solicit(me, src, dst);
  REQUIRE(ns.size() == 86);
  // The bytes scapy (python3-scapy 2.5) builds for the same NS / NA.
  CHECK(ns == hex("3333ff000092 aa55aa550000 86dd 60000000 0020 3a ff "
                  "2001cafe000000000000000000000088 ff0200000000000000000001ff000092 "
                  "87 00 4d48 00000000 2001cafe000000000000000000000092 01 01 aa55aa550000"));
  auto na = compose_nd_advert(me, src, mac("f8:bc:12:44:34:b6"), dst);
  REQUIRE(na.size() == 86);
  CHECK(na == hex("f8bc124434b6 aa55aa550000 86dd 60000000 0020 3a ff "
                  "2001cafe000000000000000000000088 2001cafe000000000000000000000092 "
                  "88 00 fe56 60000000 2001cafe000000000000000000000088 02 01 aa55aa550000"));
}

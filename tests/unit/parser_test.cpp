// Parser: per header type, the flow key (expanded from the miniflow), the
// exact set of words pushed, the layer offsets and the hash; metadata and
// tunnel words; the burst API and its counters. Bad input is in
// parser_malformed_test.cpp.
#include "packet/parser.h"

#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "flow/flow_hash.h"
#include "hal/sim/pool.h"
#include "keel/hal/packet.h"
#include "packet/frame_builder.h"

using namespace keel;
using namespace keel::packet;
using flow::FlowKey;

namespace {

constexpr flow::EthAddr kMacA{{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
constexpr flow::EthAddr kMacB{{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}};
constexpr flow::EthAddr kMacC{{0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f}};
constexpr flow::EthAddr kZeroMac{};
constexpr uint32_t kIpA = 0x0a000001, kIpB = 0x0a000002;  // 10.0.0.1, 10.0.0.2
constexpr uint16_t kNone = LayerOffsets::kNone;

flow::In6Addr v6(uint16_t first, uint8_t last) {
  flow::In6Addr a{};
  a.b[0] = static_cast<uint8_t>(first >> 8);
  a.b[1] = static_cast<uint8_t>(first);
  a.b[15] = last;
  return a;
}

template <typename Rnd>
flow::In6Addr v6_addr(Rnd& rnd) {
  flow::In6Addr a{};
  for (auto& b : a.b) b = static_cast<uint8_t>(rnd(256));
  return a;
}

std::vector<unsigned> words_of(const flow::Miniflow& mf) {
  std::vector<unsigned> w;
  mf.map.for_each([&](unsigned i) { w.push_back(i); });
  return w;
}

hal::sim::Pool& pool() {
  static std::shared_ptr<hal::sim::Pool> p = hal::sim::Pool::create(8).value();
  return *p;
}

struct Parsed {
  bool ok;
  ParsedPacket pp;
  FlowKey key;
  std::vector<unsigned> words;
};

// Parses `f` from a sim-pool packet (the datapath's way) and, as a
// cross-check, from a heap buffer of exactly its length with parse_frame
// (AddressSanitizer sees any read past the end). Both must agree.
Parsed parse_with(const FrameBuilder& f, const PacketMetadata* md, void (*tweak)(hal::Packet&) = nullptr,
                  unsigned vlan_limit = kDefaultVlanLimit) {
  hal::Packet* p = pool().alloc();
  REQUIRE(p);
  std::memcpy(p->data(), f.data(), f.size());
  REQUIRE(p->set_len(f.size()));
  p->set_in_port(3);
  if (tweak) tweak(*p);
  Parsed r{};
  r.ok = md ? parse(*p, *md, r.pp, vlan_limit) : parse(*p, r.pp, vlan_limit);
  CHECK(r.ok == !r.pp.malformed);
  const PacketMetadata meta = md ? *md : PacketMetadata::of(*p);
  hal::release(p);

  std::unique_ptr<uint8_t[]> exact(new uint8_t[f.size()]);
  std::memcpy(exact.get(), f.data(), f.size());
  flow::Miniflow mf;
  LayerOffsets ofs;
  CHECK(parse_frame(exact.get(), f.size(), meta, mf, ofs, vlan_limit) == r.ok);
  CHECK(mf == r.pp.key);
  CHECK(ofs == r.pp.ofs);

  flow::expand(r.pp.key, r.key);
  r.words = words_of(r.pp.key);
  return r;
}
Parsed parse_frame_of(const FrameBuilder& f, unsigned vlan_limit = kDefaultVlanLimit) {
  return parse_with(f, nullptr, nullptr, vlan_limit);
}

FrameBuilder ipv4_udp(uint16_t sport = 1234, uint16_t dport = 4789) {
  FrameBuilder f;
  f.eth(kMacB, kMacA, kEthTypeIpv4).ipv4(kIpA, kIpB, kIpProtoUdp).udp(sport, dport).payload(18).finish();
  return f;
}

}  // namespace

TEST_CASE("Ethernet/IPv4/UDP, 64 bytes: fields, words, offsets, software hash") {
  FrameBuilder f = ipv4_udp();
  REQUIRE(f.size() == 60);
  Parsed r = parse_frame_of(f);
  CHECK(r.ok);
  const FlowKey& k = r.key;
  CHECK(k.in_port == 3);
  CHECK(k.recirc_id == 0);
  CHECK(k.dl_dst == kMacB);
  CHECK(k.dl_src == kMacA);
  CHECK(k.dl_type == hton16(0x0800));
  CHECK(k.vlans[0].tci == 0);
  CHECK(k.nw_src == hton32(kIpA));
  CHECK(k.nw_dst == hton32(kIpB));
  CHECK(k.nw_proto == 17);
  CHECK(k.nw_ttl == 64);
  CHECK(k.nw_tos == 0);
  CHECK(k.nw_frag == 0);
  CHECK(k.ipv6_label == 0);
  CHECK(k.tp_src == hton16(1234));
  CHECK(k.tp_dst == hton16(4789));
  CHECK(k.tcp_flags == 0);
  CHECK(r.words == std::vector<unsigned>{50, 59, 60, 64, 69, 74});
  CHECK(r.pp.ofs == LayerOffsets{0, kNone, 14, 34, 42, 0});
  CHECK(r.pp.hash == flow::miniflow_hash(r.pp.key));
}

TEST_CASE("IPv4: ToS/ECN, TTL, options skipped via IHL, Ethernet padding") {
  FrameBuilder f;
  f.eth(kMacB, kMacA, kEthTypeIpv4)
      .ipv4(kIpA, kIpB, kIpProtoUdp, {.tos = 0xb9, .ttl = 7, .option_words = 2})
      .udp(53, 5353)
      .finish()
      .pad_to(60);
  Parsed r = parse_frame_of(f);
  CHECK(r.ok);
  CHECK(r.key.nw_tos == 0xb9);
  CHECK(r.key.nw_ttl == 7);
  CHECK(r.key.tp_src == hton16(53));
  CHECK(r.key.tp_dst == hton16(5353));
  CHECK(r.pp.ofs.l4 == 14 + 28);
  CHECK(r.pp.ofs.payload == 14 + 28 + 8);
  CHECK(r.pp.ofs.l2_pad == 60 - (14 + 28 + 8));
}

TEST_CASE("TCP: ports, the 12 flag bits, data offset with options") {
  FrameBuilder f;
  const uint16_t flags = kTcpSyn | kTcpAck | kTcpEce | kTcpCwr | kTcpNs;
  f.eth(kMacB, kMacA, kEthTypeIpv4)
      .ipv4(kIpA, kIpB, kIpProtoTcp)
      .tcp(40000, 443, flags, 8)
      .payload(5)
      .finish();
  Parsed r = parse_frame_of(f);
  CHECK(r.ok);
  CHECK(r.key.nw_proto == 6);
  CHECK(r.key.tp_src == hton16(40000));
  CHECK(r.key.tp_dst == hton16(443));
  CHECK(r.key.tcp_flags == hton16(flags));
  CHECK(r.key.arp_sha == kZeroMac);
  CHECK(r.words == std::vector<unsigned>{50, 59, 60, 64, 69, 72, 74});
  CHECK(r.pp.ofs.l4 == 34);
  CHECK(r.pp.ofs.payload == 34 + 32);

  SUBCASE("the three reserved bits are kept, the data offset is not") {
    FrameBuilder g;
    g.eth(kMacB, kMacA, kEthTypeIpv4).ipv4(kIpA, kIpB, kIpProtoTcp).tcp(1, 2, 0xe00 | kTcpFin).finish();
    Parsed s = parse_frame_of(g);
    CHECK(s.ok);
    CHECK(s.key.tcp_flags == hton16(0x0e01));
  }
}

TEST_CASE("SCTP ports, ICMPv4 type/code as 16-bit network order, other protocols") {
  SUBCASE("SCTP") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv4).ipv4(kIpA, kIpB, kIpProtoSctp).sctp(2905, 2906).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nw_proto == 132);
    CHECK(r.key.tp_src == hton16(2905));
    CHECK(r.key.tp_dst == hton16(2906));
    CHECK(r.pp.ofs.payload == 34 + 12);
  }
  SUBCASE("ICMP") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv4).ipv4(kIpA, kIpB, kIpProtoIcmp).icmp(3, 4).payload(28).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nw_proto == 1);
    CHECK(r.key.tp_src == hton16(3));
    CHECK(r.key.tp_dst == hton16(4));
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 64, 69, 74});
  }
  SUBCASE("GRE: no ports, not malformed") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv4).ipv4(kIpA, kIpB, 47).payload(24).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nw_proto == 47);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 64, 69});
    CHECK(r.pp.ofs.l4 == 34);
    CHECK(r.pp.ofs.payload == kNone);
  }
}

TEST_CASE("IPv4 fragments: first has L4, later ones have none") {
  auto frag = [](uint16_t frag_off) {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv4)
        .ipv4(kIpA, kIpB, kIpProtoUdp, {.frag_off = frag_off})
        .udp(7, 8)
        .payload(16)
        .finish();
    return parse_frame_of(f);
  };
  Parsed first = frag(kIpv4MoreFragments);
  CHECK(first.ok);
  CHECK(first.key.nw_frag == flow::kFragAny);
  CHECK(first.key.tp_src == hton16(7));

  Parsed middle = frag(kIpv4MoreFragments | 100);
  CHECK(middle.ok);
  CHECK(middle.key.nw_frag == (flow::kFragAny | flow::kFragLater));
  CHECK(middle.key.nw_proto == 17);
  CHECK(middle.words == std::vector<unsigned>{50, 59, 60, 64, 69});
  CHECK(middle.pp.ofs.l4 == 34);
  CHECK(middle.pp.ofs.payload == kNone);

  Parsed last = frag(200);
  CHECK(last.key.nw_frag == (flow::kFragAny | flow::kFragLater));
  CHECK(last.key.tp_src == 0);

  Parsed df = frag(0x4000);  // Don't Fragment is not a fragment
  CHECK(df.key.nw_frag == 0);
  CHECK(df.key.tp_src == hton16(7));
}

TEST_CASE("VLAN: one tag, QinQ, a third tag, priority tag") {
  SUBCASE("802.1Q") {
    FrameBuilder f;
    f.eth(kMacB, kMacA).vlan(0xa064).ethertype(kEthTypeIpv4).ipv4(kIpA, kIpB, kIpProtoUdp).udp(1, 2).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.vlans[0].tpid == hton16(0x8100));
    CHECK(r.key.vlans[0].tci == hton16(0xa064 | kVlanCfi));
    CHECK(r.key.vlans[1].tpid == 0);
    CHECK(r.key.vlans[1].tci == 0);
    CHECK(r.key.dl_type == hton16(0x0800));
    CHECK(r.key.tp_dst == hton16(2));
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 61, 64, 69, 74});
    CHECK(r.pp.ofs == LayerOffsets{0, 12, 18, 38, 46, 0});
  }
  SUBCASE("802.1ad outer + 802.1Q inner, vlan-limit 2 or 0 (no limit): both tags, outer first") {
    FrameBuilder f;
    f.eth(kMacB, kMacA)
        .vlan(100, kEthTypeQinQ)
        .vlan(0x2005)
        .ethertype(kEthTypeIpv6)
        .ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoUdp)
        .udp(5, 6)
        .finish();
    for (unsigned limit : {2u, 0u, 3u}) {  // above 2: the key's two (as OVS's flow_limit_vlans())
      CAPTURE(limit);
      Parsed r = parse_frame_of(f, limit);
      CHECK(r.ok);
      CHECK(r.key.vlans[0].tpid == hton16(0x88a8));
      CHECK(r.key.vlans[0].tci == hton16(100 | kVlanCfi));
      CHECK(r.key.vlans[1].tpid == hton16(0x8100));
      CHECK(r.key.vlans[1].tci == hton16(0x2005 | kVlanCfi));
      CHECK(r.key.dl_type == hton16(0x86dd));
      CHECK(r.key.tp_src == hton16(5));
      CHECK(r.pp.ofs.l2_5 == 12);
      CHECK(r.pp.ofs.l3 == 22);
    }
  }
  SUBCASE("QinQ and double 0x8100 under the default vlan-limit 1: the outer tag, dl_type = the inner TPID") {
    for (uint16_t outer : {kEthTypeQinQ, kEthTypeVlan}) {
      CAPTURE(outer);
      FrameBuilder f;
      f.eth(kMacB, kMacA)
          .vlan(100, outer)
          .vlan(0x2005)
          .ethertype(kEthTypeIpv4)
          .ipv4(kIpA, kIpB, kIpProtoUdp)
          .udp(5, 6)
          .finish();
      for (unsigned limit : {kDefaultVlanLimit, 1u}) {
        Parsed r = parse_frame_of(f, limit);
        CHECK(r.ok);  // not malformed: an EtherType the parser does not go past
        CHECK(r.key.vlans[0].tpid == hton16(outer));
        CHECK(r.key.vlans[0].tci == hton16(100 | kVlanCfi));
        CHECK(r.key.vlans[1].tpid == 0);
        CHECK(r.key.vlans[1].tci == 0);
        CHECK(r.key.dl_type == hton16(0x8100));
        CHECK(r.words == std::vector<unsigned>{50, 59, 60, 61});
        CHECK(r.pp.ofs == LayerOffsets{0, 12, 18, kNone, kNone, 0});
      }
      // The same frame under limit 2 keys the inner tag and IPv4/UDP.
      Parsed two = parse_frame_of(f, 2);
      CHECK(two.key.vlans[1].tci == hton16(0x2005 | kVlanCfi));
      CHECK(two.key.dl_type == hton16(0x0800));
      CHECK(two.words == std::vector<unsigned>{50, 59, 60, 61, 64, 69, 74});
    }
  }
  SUBCASE("only 0x8100 and 0x88a8 are TPIDs: 0x9100 is an EtherType") {
    FrameBuilder f;
    f.eth(kMacB, kMacA).vlan(10, 0x9100).vlan(20).ethertype(kEthTypeIpv4).ipv4(kIpA, kIpB, kIpProtoUdp).udp(1, 2);
    f.finish();
    for (unsigned limit : {0u, 1u, 2u}) {
      Parsed r = parse_frame_of(f, limit);
      CHECK(r.ok);
      CHECK(r.key.dl_type == hton16(0x9100));
      CHECK(r.words == std::vector<unsigned>{50, 59, 60});
      CHECK(r.pp.ofs.l2_5 == kNone);
    }
  }
  SUBCASE("a third tag is not keyed: its TPID is the dl_type") {
    FrameBuilder f;
    f.eth(kMacB, kMacA)
        .vlan(1)
        .vlan(2)
        .vlan(3)
        .ethertype(kEthTypeIpv4)
        .ipv4(kIpA, kIpB, kIpProtoUdp)
        .udp(1, 2)
        .finish();
    Parsed r = parse_frame_of(f, 2);
    CHECK(r.ok);
    CHECK(r.key.dl_type == hton16(0x8100));
    CHECK(r.key.vlans[1].tci == hton16(2 | kVlanCfi));
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 61});
    CHECK(r.pp.ofs.l3 == 22);
    Parsed one = parse_frame_of(f);
    CHECK(one.key.vlans[1].tci == 0);
    CHECK(one.pp.ofs.l3 == 18);
  }
  SUBCASE("priority tag (VID 0, PCP 0) is still present") {
    FrameBuilder f;
    f.eth(kMacB, kMacA).vlan(0).ethertype(0x88cc).payload(30);
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.vlans[0].tci == hton16(kVlanCfi));
    CHECK(r.key.dl_type == hton16(0x88cc));
  }
}

TEST_CASE("802.3 frames: LLC -> dl_type 0x05ff, LLC/SNAP with OUI 0 -> the SNAP type") {
  SUBCASE("plain LLC (STP)") {
    FrameBuilder f;
    f.eth(kMacB, kMacA).u16(38).bytes({0x42, 0x42, 0x03}).payload(35);
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.dl_type == hton16(kDlTypeNone));
    CHECK(r.words == std::vector<unsigned>{50, 59, 60});
    CHECK(r.pp.ofs.l3 == 14);
  }
  SUBCASE("SNAP, OUI 0, IPv4 inside") {
    FrameBuilder f;
    f.eth(kMacB, kMacA).llc_snap(50, kEthTypeIpv4).ipv4(kIpA, kIpB, kIpProtoUdp).udp(9, 10).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.dl_type == hton16(0x0800));
    CHECK(r.key.tp_dst == hton16(10));
    CHECK(r.pp.ofs.l3 == 22);
  }
  SUBCASE("SNAP with a vendor OUI") {
    FrameBuilder f;
    f.eth(kMacB, kMacA).llc_snap(50, 0x2000, 0x00000c).payload(40);
    Parsed r = parse_frame_of(f);
    CHECK(r.key.dl_type == hton16(kDlTypeNone));
    CHECK(r.pp.ofs.l3 == 14);
  }
  SUBCASE("SNAP, OUI 0, type below 0x600") {
    FrameBuilder f;
    f.eth(kMacB, kMacA).llc_snap(50, 0x0100).payload(40);
    Parsed r = parse_frame_of(f);
    CHECK(r.key.dl_type == hton16(kDlTypeNone));
    CHECK(r.pp.ofs.l3 == 22);
  }
  SUBCASE("802.3 too short for LLC/SNAP") {
    FrameBuilder f;
    f.eth(kMacB, kMacA).u16(3).bytes({0xaa, 0xaa, 0x03});
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.dl_type == hton16(kDlTypeNone));
  }
}

TEST_CASE("ARP: opcode in nw_proto, spa/tpa, sha/tha") {
  FrameBuilder f;
  f.eth(flow::EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}, kMacA, kEthTypeArp)
      .arp(1, kMacA, kIpA, kZeroMac, kIpB)
      .pad_to(60);
  Parsed r = parse_frame_of(f);
  CHECK(r.ok);
  CHECK(r.key.dl_type == hton16(0x0806));
  CHECK(r.key.nw_proto == 1);
  CHECK(r.key.nw_src == hton32(kIpA));
  CHECK(r.key.nw_dst == hton32(kIpB));
  CHECK(r.key.arp_sha == kMacA);
  CHECK(r.key.arp_tha == kZeroMac);
  CHECK(r.key.nw_ttl == 0);
  CHECK(r.words == std::vector<unsigned>{50, 59, 60, 64, 69, 72, 73});
  CHECK(r.pp.ofs.l3 == 14);
  CHECK(r.pp.ofs.l4 == kNone);

  SUBCASE("RARP reply") {
    FrameBuilder g;
    g.eth(kMacA, kMacB, kEthTypeRarp).arp(4, kMacB, kIpB, kMacC, kIpA);
    Parsed s = parse_frame_of(g);
    CHECK(s.key.nw_proto == 4);
    CHECK(s.key.arp_tha == kMacC);
  }
  SUBCASE("opcode above 255: no nw_proto word (as OVS)") {
    FrameBuilder g;
    g.eth(kMacA, kMacB, kEthTypeArp).arp(0x101, kMacB, kIpB, kMacC, kIpA);
    Parsed s = parse_frame_of(g);
    CHECK(s.ok);
    CHECK(s.words == std::vector<unsigned>{50, 59, 60, 64, 72, 73});
  }
  SUBCASE("non-Ethernet hardware type: not keyed, not malformed") {
    FrameBuilder g;
    g.eth(kMacA, kMacB, kEthTypeArp).arp(1, kMacB, kIpB, kMacC, kIpA);
    g.put16(14, 6);  // IEEE 802
    Parsed s = parse_frame_of(g);
    CHECK(s.ok);
    CHECK(s.words == std::vector<unsigned>{50, 59, 60});
  }
}

TEST_CASE("IPv6/UDP and IPv6/TCP: addresses, traffic class, flow label, hop limit") {
  FrameBuilder f;
  f.eth(kMacB, kMacA, kEthTypeIpv6)
      .ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoUdp,
            {.tclass = 0xb9, .flow_label = 0x12345, .hop_limit = 9})
      .udp(1000, 2000)
      .payload(4)
      .finish();
  Parsed r = parse_frame_of(f);
  CHECK(r.ok);
  CHECK(r.key.dl_type == hton16(0x86dd));
  CHECK(r.key.ipv6_src == v6(0x2001, 1));
  CHECK(r.key.ipv6_dst == v6(0x2001, 2));
  CHECK(r.key.nw_tos == 0xb9);
  CHECK(r.key.ipv6_label == hton32(0x12345));
  CHECK(r.key.nw_ttl == 9);
  CHECK(r.key.nw_proto == 17);
  CHECK(r.key.nw_src == 0);
  CHECK(r.key.tp_src == hton16(1000));
  CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68, 69, 74});
  CHECK(r.pp.ofs == LayerOffsets{0, kNone, 14, 54, 62, 0});

  FrameBuilder g;
  g.eth(kMacB, kMacA, kEthTypeIpv6)
      .ipv6(v6(0xfe80, 1), v6(0xfe80, 2), kIpProtoTcp)
      .tcp(22, 50000, kTcpPsh | kTcpAck)
      .finish();
  Parsed s = parse_frame_of(g);
  CHECK(s.ok);
  CHECK(s.key.tcp_flags == hton16(kTcpPsh | kTcpAck));
  CHECK(s.key.tp_src == hton16(22));
  CHECK(s.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68, 69, 72, 74});
}

TEST_CASE("IPv6 extension headers are walked to the upper-layer protocol") {
  SUBCASE("hop-by-hop, routing, destination options, then TCP") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6)
        .ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoHopOpts)
        .ipv6_ext(kIpProtoRouting)
        .ipv6_ext(kIpProtoDstOpts, 1)
        .ipv6_ext(kIpProtoTcp)
        .tcp(80, 8080, kTcpSyn)
        .finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nw_proto == 6);
    CHECK(r.key.nw_frag == 0);
    CHECK(r.key.tp_dst == hton16(8080));
    CHECK(r.pp.ofs.l4 == 54 + 8 + 16 + 8);
    CHECK(r.pp.ofs.payload == 54 + 32 + 20);
  }
  SUBCASE("AH, then UDP") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6)
        .ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoAh)
        .ipv6_ah(kIpProtoUdp, 4)
        .udp(3, 4)
        .finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nw_proto == 17);
    CHECK(r.pp.ofs.l4 == 54 + 24);
    CHECK(r.key.tp_src == hton16(3));
  }
  SUBCASE("first fragment: frag=any, L4 parsed") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6)
        .ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoFragment)
        .ipv6_frag(kIpProtoUdp, 0, true)
        .udp(3, 4)
        .payload(8)
        .finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nw_frag == flow::kFragAny);
    CHECK(r.key.nw_proto == 17);
    CHECK(r.key.tp_src == hton16(3));
  }
  SUBCASE("later fragment: frag=any|later, nw_proto 44 (as OVS), no L4") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6)
        .ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoHopOpts)
        .ipv6_ext(kIpProtoFragment)
        .ipv6_frag(kIpProtoUdp, 10, false)
        .payload(16)
        .finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nw_frag == (flow::kFragAny | flow::kFragLater));
    CHECK(r.key.nw_proto == 44);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68, 69});
    CHECK(r.pp.ofs.l4 == 54 + 16);
    CHECK(r.pp.ofs.payload == kNone);
  }
  SUBCASE("atomic fragment (offset 0, no M): not a fragment") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6)
        .ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoFragment)
        .ipv6_frag(kIpProtoUdp, 0, false)
        .udp(3, 4)
        .finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.key.nw_frag == 0);
    CHECK(r.key.tp_src == hton16(3));
  }
  SUBCASE("no next header") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6).ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoNone).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nw_proto == 59);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68, 69});
  }
}

TEST_CASE("ICMPv6: echo, Neighbor Solicitation/Advertisement with link-layer options") {
  auto icmp6 = [](uint8_t type, uint8_t code) {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6)
        .ipv6(v6(0xfe80, 1), v6(0xff02, 1), kIpProtoIcmpv6, {.hop_limit = 255})
        .icmp6(type, code);
    return f;
  };
  SUBCASE("echo request") {
    FrameBuilder f = icmp6(128, 0);
    f.payload(8).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nw_proto == 58);
    CHECK(r.key.tp_src == hton16(128));
    CHECK(r.key.tp_dst == 0);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68, 69, 74});
    CHECK(r.pp.ofs.payload == 54 + 8);
  }
  SUBCASE("NS with source link-layer address") {
    FrameBuilder f = icmp6(kIcmp6NeighborSolicit, 0);
    f.nd_target(v6(0xfe80, 2)).nd_ll_option(kNdOptSourceLinkAddr, kMacA).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nd_target == v6(0xfe80, 2));
    CHECK(r.key.arp_sha == kMacA);
    CHECK(r.key.arp_tha == kZeroMac);
    CHECK(r.key.tcp_flags == hton16(kNdOptSourceLinkAddr));
    CHECK(r.key.tp_src == hton16(135));
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74});
  }
  SUBCASE("NA with target link-layer address") {
    FrameBuilder f = icmp6(kIcmp6NeighborAdvert, 0);
    f.nd_target(v6(0xfe80, 2)).nd_ll_option(kNdOptTargetLinkAddr, kMacC).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nd_target == v6(0xfe80, 2));
    CHECK(r.key.arp_sha == kZeroMac);
    CHECK(r.key.arp_tha == kMacC);
    CHECK(r.key.tcp_flags == hton16(kNdOptTargetLinkAddr));
    CHECK(r.key.tp_src == hton16(136));
  }
  SUBCASE("NS with an unknown option, then both addresses; the first type is kept") {
    FrameBuilder f = icmp6(kIcmp6NeighborSolicit, 0);
    f.nd_target(v6(0xfe80, 2)).u8(14).u8(2).fill(14).nd_ll_option(kNdOptTargetLinkAddr, kMacC);
    f.nd_ll_option(kNdOptSourceLinkAddr, kMacA).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.arp_sha == kMacA);
    CHECK(r.key.arp_tha == kMacC);
    CHECK(r.key.tcp_flags == hton16(kNdOptTargetLinkAddr));
  }
  SUBCASE("NS without options") {
    FrameBuilder f = icmp6(kIcmp6NeighborSolicit, 0);
    f.nd_target(v6(0xfe80, 2)).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.nd_target == v6(0xfe80, 2));
    CHECK(r.key.tcp_flags == 0);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74});
  }
  SUBCASE("NS with a non-zero code is plain ICMPv6") {
    FrameBuilder f = icmp6(kIcmp6NeighborSolicit, 1);
    f.nd_target(v6(0xfe80, 2)).nd_ll_option(kNdOptSourceLinkAddr, kMacA).finish();
    Parsed r = parse_frame_of(f);
    CHECK(r.ok);
    CHECK(r.key.tp_dst == hton16(1));
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68, 69, 74});
  }
}

TEST_CASE("metadata words: in_port and recirc_id always, 48/49 only when non-zero") {
  FrameBuilder f = ipv4_udp();
  SUBCASE("from the packet") {
    Parsed r = parse_with(f, nullptr, [](hal::Packet& p) {
      p.meta().recirc_id = 7;
      p.meta().dp_hash = 0xdeadbeef;
      p.meta().pkt_mark = 42;
    });
    CHECK(r.key.in_port == 3);
    CHECK(r.key.recirc_id == 7);
    CHECK(r.key.dp_hash == 0xdeadbeef);
    CHECK(r.key.pkt_mark == 42);
    CHECK(r.key.skb_priority == 0);
    CHECK(r.words == std::vector<unsigned>{48, 49, 50, 59, 60, 64, 69, 74});
  }
  SUBCASE("explicit metadata") {
    PacketMetadata md;
    md.in_port = 100000;
    md.skb_priority = 5;
    Parsed r = parse_with(f, &md);
    CHECK(r.key.in_port == 100000);
    CHECK(r.key.skb_priority == 5);
    CHECK(r.key.pkt_mark == 0);
    CHECK(r.words == std::vector<unsigned>{48, 50, 59, 60, 64, 69, 74});
    md.skb_priority = 0;
    md.dp_hash = 1;
    CHECK(parse_with(f, &md).words == std::vector<unsigned>{49, 50, 59, 60, 64, 69, 74});
  }
}

TEST_CASE("tunnel metadata: words 0-7 only for a decapsulated packet") {
  FrameBuilder inner = ipv4_udp(5000, 80);
  PacketMetadata md;
  md.in_port = 9;
  SUBCASE("all zero: none") {
    CHECK(parse_with(inner, &md).words == std::vector<unsigned>{50, 59, 60, 64, 69, 74});
  }
  SUBCASE("a tun_id without an outer destination is not a tunnel") {
    md.tunnel.tun_id = 5;
    CHECK(parse_with(inner, &md).words == std::vector<unsigned>{50, 59, 60, 64, 69, 74});
  }
  SUBCASE("VXLAN over IPv4") {
    md.tunnel.tun_id = flow::be64{hton32(0x123456)} << 32;
    md.tunnel.ipv4_src = hton32(0xc0a80001);
    md.tunnel.ipv4_dst = hton32(0xc0a80002);
    md.tunnel.flags = flow::kTunKey;
    md.tunnel.tos = 0x10;
    md.tunnel.ttl = 63;
    md.tunnel.tp_src = hton16(49152);
    md.tunnel.tp_dst = hton16(4789);
    Parsed r = parse_with(inner, &md);
    CHECK(r.ok);
    CHECK(r.words == std::vector<unsigned>{0, 1, 2, 3, 4, 5, 6, 7, 50, 59, 60, 64, 69, 74});
    CHECK(r.key.tun_id == md.tunnel.tun_id);
    CHECK(r.key.tun_ipv4_src == hton32(0xc0a80001));
    CHECK(r.key.tun_ipv4_dst == hton32(0xc0a80002));
    CHECK(r.key.tun_flags == flow::kTunKey);
    CHECK(r.key.tun_tos == 0x10);
    CHECK(r.key.tun_ttl == 63);
    CHECK(r.key.tun_tp_src == hton16(49152));
    CHECK(r.key.tun_tp_dst == hton16(4789));
    CHECK(r.key.in_port == 9);
    CHECK(r.key.tp_dst == hton16(80));
  }
  SUBCASE("over IPv6") {
    md.tunnel.ipv6_src = v6(0x2001, 0xa);
    md.tunnel.ipv6_dst = v6(0x2001, 0xb);
    Parsed r = parse_with(inner, &md);
    CHECK(r.key.tun_ipv6_src == v6(0x2001, 0xa));
    CHECK(r.key.tun_ipv6_dst == v6(0x2001, 0xb));
    CHECK(r.words.size() == 14);
  }
}

TEST_CASE("hash: the RSS hash when it describes the packet, else miniflow_hash") {
  FrameBuilder f = ipv4_udp();
  auto with_rss = [](hal::Packet& p) { p.set_rss_hash(0x1234abcd); };
  Parsed plain = parse_frame_of(f);
  CHECK(plain.pp.hash == flow::miniflow_hash(plain.pp.key));
  Parsed rss = parse_with(f, nullptr, with_rss);
  CHECK(rss.pp.hash == 0x1234abcd);
  CHECK(rss.pp.key == plain.pp.key);

  PacketMetadata md;
  md.in_port = 3;
  md.recirc_id = 1;
  Parsed recirc = parse_with(f, &md, with_rss);
  CHECK(recirc.pp.hash == flow::miniflow_hash(recirc.pp.key));
  md.recirc_id = 0;
  md.tunnel.ipv4_dst = hton32(1);
  Parsed tnl = parse_with(f, &md, with_rss);
  CHECK(tnl.pp.hash == flow::miniflow_hash(tnl.pp.key));

  // Two packets of one flow: equal miniflows and hashes; another flow differs.
  CHECK(parse_frame_of(ipv4_udp()).pp.hash == plain.pp.hash);
  CHECK(parse_frame_of(ipv4_udp(1235)).pp.hash != plain.pp.hash);
}

TEST_CASE("parse_burst: one result per packet, counters, per-packet metadata") {
  std::vector<FrameBuilder> frames;
  for (unsigned i = 0; i < hal::kMaxBurst; ++i) {
    FrameBuilder f = ipv4_udp(static_cast<uint16_t>(1000 + i));
    if (i % 8 == 5) f.put8(14, 0x44);  // IHL 4: malformed
    frames.push_back(f);
  }
  auto big = hal::sim::Pool::create(hal::kMaxBurst);
  REQUIRE(big.ok());
  std::vector<hal::Packet*> pkts;
  for (unsigned i = 0; i < hal::kMaxBurst; ++i) {
    hal::Packet* p = big.value()->alloc();
    REQUIRE(p);
    std::memcpy(p->data(), frames[i].data(), frames[i].size());
    REQUIRE(p->set_len(frames[i].size()));
    p->set_in_port(1);
    if (i % 2) p->set_rss_hash(i);
    pkts.push_back(p);
  }
  std::vector<ParsedPacket> out(hal::kMaxBurst);
  ParserCounters c;
  CHECK(parse_burst(pkts, out, c) == 4);
  auto s = c.read();
  CHECK(s.packets == 32);
  CHECK(s.malformed == 4);
  CHECK(s.sw_hashes == 16);
  for (unsigned i = 0; i < hal::kMaxBurst; ++i) {
    ParsedPacket one;
    CHECK(parse(*pkts[i], one) == !out[i].malformed);
    CHECK(one.key == out[i].key);
    CHECK(one.hash == out[i].hash);
    CHECK(one.ofs == out[i].ofs);
    CHECK(out[i].malformed == (i % 8 == 5));
    if (i % 2) CHECK(out[i].hash == i);
  }

  std::vector<PacketMetadata> md(hal::kMaxBurst);
  for (unsigned i = 0; i < hal::kMaxBurst; ++i) {
    md[i].in_port = 1;
    md[i].recirc_id = i;
  }
  CHECK(parse_burst(std::span<hal::Packet* const>(pkts.data(), 10), md, out, c) == 1);
  s = c.read();
  CHECK(s.packets == 42);
  CHECK(s.malformed == 5);
  for (unsigned i = 0; i < 10; ++i) {
    FlowKey k;
    flow::expand(out[i].key, k);
    CHECK(k.recirc_id == i);
    CHECK(k.in_port == 1);
    if (i > 0) CHECK(out[i].hash == flow::miniflow_hash(out[i].key));  // recirculated: RSS not used
  }
  hal::release_burst(pkts);
}

TEST_CASE("parse_burst keys a burst of QinQ frames under the vlan-limit it is given") {
  FrameBuilder f;
  f.eth(kMacB, kMacA).vlan(7, kEthTypeQinQ).vlan(8).ethertype(kEthTypeIpv4).ipv4(kIpA, kIpB, kIpProtoUdp);
  f.udp(1, 2).payload(10).finish();
  std::vector<hal::Packet*> pkts;
  for (unsigned i = 0; i < 4; ++i) {
    hal::Packet* p = pool().alloc();
    REQUIRE(p);
    std::memcpy(p->data(), f.data(), f.size());
    REQUIRE(p->set_len(f.size()));
    p->set_in_port(1);
    pkts.push_back(p);
  }
  std::vector<ParsedPacket> out(pkts.size());
  ParserCounters c;
  for (unsigned limit : {0u, 1u, 2u}) {
    CAPTURE(limit);
    CHECK(parse_burst(pkts, out, c, limit) == 0);
    for (const ParsedPacket& pp : out) {
      FlowKey k;
      flow::expand(pp.key, k);
      CHECK(k.vlans[0].tci == hton16(7 | kVlanCfi));
      CHECK(k.vlans[1].tci == (limit == 1 ? 0 : hton16(8 | kVlanCfi)));
      CHECK(k.dl_type == hton16(limit == 1 ? 0x8100 : 0x0800));
      CHECK(k.tp_dst == (limit == 1 ? 0 : hton16(2)));
    }
  }
  CHECK(parse_burst(pkts, out, c) == 0);  // the default is Open vSwitch's: 1
  FlowKey k;
  flow::expand(out[0].key, k);
  CHECK(k.dl_type == hton16(0x8100));
  hal::release_burst(pkts);
}

TEST_CASE("FrameBuilder: lengths and IPv4 header checksum are filled in") {
  FrameBuilder f = ipv4_udp();
  const uint8_t* ip = f.data() + 14;
  CHECK(((ip[2] << 8) | ip[3]) == 46);
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (ip[i] << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  CHECK(sum == 0xffff);
  CHECK(((ip[24] << 8) | ip[25]) == 26);  // UDP length
  CHECK_FALSE(f.overflowed());
}

TEST_CASE("the fast paths and the generic path agree on random frames") {
  // parse() takes a specialized path for plain (untagged or one-tag) IPv4
  // or IPv6 with UDP or TCP and the generic one otherwise; parse_frame() is
  // always generic. Random headers around the fast paths' edges: tags, IHL,
  // lengths, fragments, extension headers, TCP data offset, protocol,
  // padding, truncation, metadata.
  uint64_t seed = 12345;
  auto rnd = [&seed](uint32_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>((seed >> 33) % n);
  };
  auto pool2 = hal::sim::Pool::create(1);
  REQUIRE(pool2.ok());
  unsigned with_ports = 0;
  for (int iter = 0; iter < 30000; ++iter) {
    FrameBuilder f;
    const uint8_t proto = rnd(4) == 0 ? static_cast<uint8_t>(rnd(256)) : (rnd(2) ? kIpProtoUdp : kIpProtoTcp);
    f.eth(kMacB, kMacA);
    for (uint32_t tags = rnd(4) == 0 ? 1 + rnd(2) : 0; tags > 0; --tags)
      f.vlan(static_cast<uint16_t>(rnd(0x10000)), rnd(2) ? kEthTypeVlan : kEthTypeQinQ);
    const bool v6 = rnd(3) == 0;
    const uint32_t l3 = f.size() + 2;
    uint32_t l4 = 0;
    if (v6) {
      f.ethertype(rnd(16) == 0 ? kEthTypeIpv4 : kEthTypeIpv6);
      const bool ext = rnd(6) == 0;
      f.ipv6(v6_addr(rnd), v6_addr(rnd), ext ? kIpProtoDstOpts : proto,
             {.tclass = static_cast<uint8_t>(rnd(256)),
              .flow_label = rnd(0x100000),
              .hop_limit = static_cast<uint8_t>(rnd(256))});
      if (ext) f.ipv6_ext(proto);
      l4 = f.size();
    } else {
      f.ethertype(rnd(16) == 0 ? kEthTypeIpv6 : kEthTypeIpv4);
      FrameBuilder::Ipv4Opts o;
      o.tos = static_cast<uint8_t>(rnd(256));
      o.ttl = static_cast<uint8_t>(rnd(256));
      o.option_words = rnd(4) == 0 ? static_cast<uint8_t>(rnd(4)) : 0;
      o.frag_off = rnd(8) == 0 ? static_cast<uint16_t>(rnd(0x10000)) : 0;
      f.ipv4(rnd(0xffffffff), rnd(0xffffffff), proto, o);
      l4 = f.size();
    }
    if (proto == kIpProtoTcp)
      f.tcp(static_cast<uint16_t>(rnd(0x10000)), static_cast<uint16_t>(rnd(0x10000)),
            static_cast<uint16_t>(rnd(0x1000)), static_cast<uint8_t>(5 + rnd(3)));
    else
      f.udp(static_cast<uint16_t>(rnd(0x10000)), static_cast<uint16_t>(rnd(0x10000)));
    f.payload(rnd(20)).finish().pad_to(rnd(2) ? 60 : 0);
    if (rnd(8) == 0) f.put8(l3, static_cast<uint8_t>((v6 ? 0x60 : 0x40) | rnd(16)));    // IHL / traffic class
    if (rnd(8) == 0) f.put16(l3 + (v6 ? 4 : 2), static_cast<uint16_t>(rnd(f.size())));  // length
    if (rnd(8) == 0 && proto == kIpProtoTcp) f.put8(l4 + 12, static_cast<uint8_t>(rnd(256)));  // data offset
    const uint32_t len = rnd(4) == 0 ? rnd(f.size() + 1) : f.size();

    hal::Packet* p = pool2.value()->alloc();
    REQUIRE(p);
    std::memcpy(p->data(), f.data(), len);
    REQUIRE(p->set_len(len));
    p->set_in_port(static_cast<uint16_t>(rnd(4)));
    if (rnd(4) == 0) p->meta().recirc_id = rnd(3);
    if (rnd(8) == 0) p->meta().dp_hash = rnd(3);
    if (rnd(2)) p->set_rss_hash(rnd(0xffffffff));
    const unsigned vlan_limit = rnd(3);  // 0 (no limit), 1 (the default), 2
    ParsedPacket pp;
    const bool ok = parse(*p, pp, vlan_limit);
    flow::Miniflow mf;
    LayerOffsets ofs;
    const bool ok_generic = parse_frame(p->data(), len, PacketMetadata::of(*p), mf, ofs, vlan_limit);
    REQUIRE(ok == ok_generic);
    REQUIRE(pp.key == mf);
    REQUIRE(pp.ofs == ofs);
    if (p->has_rss_hash() && p->meta().recirc_id == 0)
      REQUIRE(pp.hash == p->rss_hash());
    else
      REQUIRE(pp.hash == flow::miniflow_hash(mf));
    with_ports += ok && mf.map.test(KEEL_FLOW_WORD(tp_src));
    hal::release(p);
  }
  CHECK(with_ports > 10000);
}

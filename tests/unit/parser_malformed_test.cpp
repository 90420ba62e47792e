// Parser on bad input: every frame is parsed from a heap buffer of exactly
// its length (the asan preset turns any read past the end into a failure),
// the result is flagged malformed, and the key holds what could be parsed
// and nothing above it. Truncation at every byte offset of TCP, IPv6 and ND
// frames, with the IP length fields left as they were and with them
// rewritten to match the cut.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "flow/flow_hash.h"
#include "keel/hal/packet.h"
#include "packet/frame_builder.h"
#include "packet/parser.h"

using namespace keel;
using namespace keel::packet;
using flow::FlowKey;

namespace {

constexpr flow::EthAddr kMacA{{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
constexpr flow::EthAddr kMacB{{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}};
constexpr uint32_t kIpA = 0x0a000001, kIpB = 0x0a000002;
constexpr uint16_t kNone = LayerOffsets::kNone;

flow::In6Addr v6(uint16_t first, uint8_t last) {
  flow::In6Addr a{};
  a.b[0] = static_cast<uint8_t>(first >> 8);
  a.b[1] = static_cast<uint8_t>(first);
  a.b[15] = last;
  return a;
}

std::vector<unsigned> words_of(const flow::Miniflow& mf) {
  std::vector<unsigned> w;
  mf.map.for_each([&](unsigned i) { w.push_back(i); });
  return w;
}

struct Parsed {
  bool ok;
  ParsedPacket pp;
  FlowKey key;
  std::vector<unsigned> words;
};

// Parses the first n bytes of `bytes` from an exact-size heap buffer, both
// through a hal::Packet over that buffer and through parse_frame, under
// `vlan_limit`.
Parsed parse_exact(const uint8_t* bytes, uint32_t n, unsigned vlan_limit = kDefaultVlanLimit) {
  std::unique_ptr<uint8_t[]> buf(new uint8_t[n]);
  if (n) std::memcpy(buf.get(), bytes, n);
  hal::Packet p;
  p.reset(hal::BufferSource::sim, nullptr, buf.get(), n, buf.get(), n);
  p.set_in_port(1);
  Parsed r{};
  r.ok = parse(p, r.pp, vlan_limit);
  CHECK(r.ok == !r.pp.malformed);
  flow::Miniflow mf;
  LayerOffsets ofs;
  CHECK(parse_frame(buf.get(), n, PacketMetadata::of(p), mf, ofs, vlan_limit) == r.ok);
  CHECK(mf == r.pp.key);
  CHECK(r.pp.hash == flow::miniflow_hash(r.pp.key));
  flow::expand(r.pp.key, r.key);
  r.words = words_of(r.pp.key);
  return r;
}
Parsed parse_exact(const FrameBuilder& f, unsigned vlan_limit = kDefaultVlanLimit) {
  return parse_exact(f.data(), f.size(), vlan_limit);
}

FrameBuilder ipv4_tcp() {
  FrameBuilder f;
  f.eth(kMacB, kMacA, kEthTypeIpv4)
      .ipv4(kIpA, kIpB, kIpProtoTcp, {.option_words = 1})
      .tcp(1000, 80, kTcpSyn, 8)
      .payload(6)
      .finish();
  return f;
}

FrameBuilder ipv6_ext_tcp() {
  FrameBuilder f;
  f.eth(kMacB, kMacA)
      .vlan(10)
      .ethertype(kEthTypeIpv6)
      .ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoHopOpts)
      .ipv6_ext(kIpProtoRouting, 1)
      .ipv6_frag(kIpProtoDstOpts, 0, true)
      .ipv6_ext(kIpProtoTcp)
      .tcp(1000, 80, kTcpAck, 6)
      .payload(5)
      .finish();
  return f;
}

FrameBuilder ipv6_ns() {
  FrameBuilder f;
  f.eth(kMacB, kMacA, kEthTypeIpv6)
      .ipv6(v6(0xfe80, 1), v6(0xff02, 1), kIpProtoIcmpv6)
      .icmp6(kIcmp6NeighborSolicit, 0)
      .nd_target(v6(0xfe80, 2))
      .nd_ll_option(kNdOptSourceLinkAddr, kMacA)
      .nd_ll_option(kNdOptTargetLinkAddr, kMacB)
      .finish();
  return f;
}

bool subset(const std::vector<unsigned>& a, const std::vector<unsigned>& b) {
  for (unsigned w : a)
    if (std::find(b.begin(), b.end(), w) == b.end()) return false;
  return true;
}

// Truncates `full` at every length and checks that the parser (a) never
// reads past the cut (ASan), (b) flags every cut before `malformed_before`
// (default: the end of the L4 header), (c) keys only words the full frame
// has, with the same MAC and L3 values, and (d) with the lengths fixed, keys a
// cut at or after `same_key_from` (default: the end of the L4 header)
// exactly as the whole frame. With `fix_lengths`, the IPv4 total length /
// IPv6 payload length are rewritten to end at the cut, so the cut reaches
// the L4 and extension-header checks instead of stopping at the IP length
// check.
void truncate_everywhere(const FrameBuilder& full, bool fix_lengths, uint32_t malformed_before = 0,
                         uint32_t same_key_from = 0, unsigned vlan_limit = kDefaultVlanLimit) {
  const Parsed whole = parse_exact(full, vlan_limit);
  REQUIRE(whole.ok);
  REQUIRE(whole.pp.ofs.payload != kNone);
  const uint32_t headers_end = malformed_before ? malformed_before : whole.pp.ofs.payload;
  const uint32_t same_from = same_key_from ? same_key_from : whole.pp.ofs.payload;
  for (uint32_t n = 0; n <= full.size(); ++n) {
    CAPTURE(n);
    std::vector<uint8_t> bytes(full.data(), full.data() + n);
    const uint32_t ip4 = full.ipv4_offset(), ip6 = full.ipv6_offset();
    if (fix_lengths && ip4 != FrameBuilder::kNone && n >= ip4 + 4) {
      bytes[ip4 + 2] = static_cast<uint8_t>((n - ip4) >> 8);
      bytes[ip4 + 3] = static_cast<uint8_t>(n - ip4);
    }
    if (fix_lengths && ip6 != FrameBuilder::kNone && n >= ip6 + 40) {
      bytes[ip6 + 4] = static_cast<uint8_t>((n - ip6 - 40) >> 8);
      bytes[ip6 + 5] = static_cast<uint8_t>(n - ip6 - 40);
    }
    const Parsed r = parse_exact(bytes.data(), n, vlan_limit);
    if (n < headers_end) CHECK_FALSE(r.ok);
    if (n == full.size()) CHECK(r.ok);
    if (!fix_lengths && n < full.size()) CHECK_FALSE(r.ok);  // the IP length now runs past the frame
    if (fix_lengths && n >= same_from) {
      CHECK(r.ok);
      CHECK(r.pp.key == whole.pp.key);
    }
    CHECK(subset(r.words, whole.words));
    // Same values for the words that do not depend on where the cut is
    // (a tag cut short leaves its TPID as dl_type: words 60-61 may differ).
    for (unsigned w : r.words)
      if (w < KEEL_FLOW_WORD(nd_target) && w != KEEL_FLOW_WORD(dl_type) && w != KEEL_FLOW_WORD(vlans))
        CHECK(r.key.words()[w] == whole.key.words()[w]);
    // Offsets never point past the cut.
    for (uint16_t o : {r.pp.ofs.l2, r.pp.ofs.l2_5, r.pp.ofs.l3, r.pp.ofs.l4, r.pp.ofs.payload})
      if (o != kNone) CHECK(o <= n);
  }
}

}  // namespace

TEST_CASE("runts: fewer than 14 bytes keep only the metadata word") {
  FrameBuilder f = ipv4_tcp();
  for (uint32_t n = 0; n < 14; ++n) {
    CAPTURE(n);
    Parsed r = parse_exact(f.data(), n);
    CHECK_FALSE(r.ok);
    CHECK(r.words == std::vector<unsigned>{50});
    CHECK(r.pp.ofs == LayerOffsets{});
  }
  Parsed r = parse_exact(f.data(), 14);  // a bare Ethernet header of type IPv4
  CHECK_FALSE(r.ok);
  CHECK(r.words == std::vector<unsigned>{50, 59, 60});
  CHECK(r.key.dl_type == hton16(0x0800));
}

TEST_CASE("a VLAN tag cut short, under every vlan-limit: no tag keyed, dl_type is its TPID (as OVS)") {
  for (uint16_t tpid : {kEthTypeVlan, kEthTypeQinQ}) {
    FrameBuilder f;
    f.eth(kMacB, kMacA).vlan(0x0123, tpid).ethertype(kEthTypeIpv4).ipv4(kIpA, kIpB, kIpProtoUdp).udp(1, 2);
    f.finish();
    for (unsigned limit : {0u, 1u, 2u}) {
      for (uint32_t n = 14; n < 18; ++n) {  // the TPID, then 0-3 bytes of TCI and EtherType
        CAPTURE(tpid);
        CAPTURE(limit);
        CAPTURE(n);
        Parsed r = parse_exact(f.data(), n, limit);
        CHECK_FALSE(r.ok);
        CHECK(r.words == std::vector<unsigned>{50, 59, 60});
        CHECK(r.key.dl_type == hton16(tpid));
        CHECK(r.key.vlans[0].tci == 0);
      }
      Parsed r = parse_exact(f.data(), 18, limit);  // the whole tag and the EtherType: L2 + tag, IPv4 cut short
      CHECK_FALSE(r.ok);
      CHECK(r.words == std::vector<unsigned>{50, 59, 60, 61});
      CHECK(r.key.vlans[0].tci == hton16(0x0123 | kVlanCfi));
      CHECK(r.key.dl_type == hton16(kEthTypeIpv4));
    }
  }
}

TEST_CASE("IPv4: bad IHL, total length past the frame or below the header: L2 only") {
  auto check_l2_only = [](const FrameBuilder& f) {
    Parsed r = parse_exact(f);
    CHECK_FALSE(r.ok);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60});
    CHECK(r.key.dl_type == hton16(0x0800));
    CHECK(r.pp.ofs.l3 == 14);
    CHECK(r.pp.ofs.l4 == kNone);
  };
  SUBCASE("IHL < 5") {
    FrameBuilder f = ipv4_tcp();
    for (uint8_t ihl = 0; ihl < 5; ++ihl) {
      f.put8(14, static_cast<uint8_t>(0x40 | ihl));
      check_l2_only(f);
    }
  }
  SUBCASE("IHL past the frame") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv4).ipv4(kIpA, kIpB, kIpProtoUdp).finish();  // 20-byte datagram
    f.put8(14, 0x4f);                                                          // claims 60 bytes of header
    check_l2_only(f);
  }
  SUBCASE("IHL past the total length") {
    FrameBuilder f = ipv4_tcp();
    f.put16(16, 22);  // tot_len 22 < IHL 24
    check_l2_only(f);
  }
  SUBCASE("total length past the frame") {
    FrameBuilder f = ipv4_tcp();
    f.put16(16, static_cast<uint16_t>(f.size() - 14 + 1));
    check_l2_only(f);
    f.put16(16, 0xffff);
    check_l2_only(f);
  }
}

TEST_CASE("IPv6: payload length past the frame; extension chain off the end") {
  SUBCASE("payload length") {
    FrameBuilder f = ipv6_ext_tcp();
    f.put16(f.ipv6_offset() + 4, static_cast<uint16_t>(f.size() - f.ipv6_offset() - 40 + 1));
    Parsed r = parse_exact(f);
    CHECK_FALSE(r.ok);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 61});
  }
  SUBCASE("an extension header longer than what is left: addresses, no word 69") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6)
        .ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoHopOpts)
        .ipv6_ext(kIpProtoTcp, 0);
    f.tcp(1, 2, kTcpSyn).finish();
    f.put8(54 + 1, 10);  // hop-by-hop claims 88 bytes
    Parsed r = parse_exact(f);
    CHECK_FALSE(r.ok);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68});
    CHECK(r.key.ipv6_src == v6(0x2001, 1));
    CHECK(r.pp.ofs.l4 == kNone);
  }
  SUBCASE("fewer than 8 bytes for the next extension header") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6).ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoDstOpts).fill(7).finish();
    Parsed r = parse_exact(f);
    CHECK_FALSE(r.ok);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68});
  }
  SUBCASE("AH length past the end") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6)
        .ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoAh)
        .ipv6_ah(kIpProtoUdp, 1)
        .finish();
    f.put8(54 + 1, 200);
    CHECK_FALSE(parse_exact(f).ok);
  }
  SUBCASE("a long chain of empty destination-options headers ends") {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6).ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoDstOpts);
    for (int i = 0; i < 150; ++i) f.ipv6_ext(kIpProtoDstOpts);
    f.finish();
    Parsed r = parse_exact(f);
    CHECK_FALSE(r.ok);  // the chain never reaches an upper layer
    CHECK_FALSE(f.overflowed());
  }
}

TEST_CASE("TCP: data offset below 5 or past the datagram: L3 kept, no L4 words") {
  auto check_no_l4 = [](const FrameBuilder& f) {
    Parsed r = parse_exact(f);
    CHECK_FALSE(r.ok);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 64, 69});
    CHECK(r.key.nw_proto == 6);
    CHECK(r.key.tp_src == 0);
    CHECK(r.pp.ofs.l4 == 38);
    CHECK(r.pp.ofs.payload == kNone);
  };
  FrameBuilder f = ipv4_tcp();
  const uint32_t ctl = 38 + 12;
  for (uint8_t doff = 0; doff < 5; ++doff) {
    f.put8(ctl, static_cast<uint8_t>(doff << 4));
    check_no_l4(f);
  }
  f.put8(ctl, 15 << 4);  // 60 bytes: past the 38-byte segment
  check_no_l4(f);

  SUBCASE("past the datagram but inside the Ethernet padding") {
    FrameBuilder g;
    g.eth(kMacB, kMacA, kEthTypeIpv4)
        .ipv4(kIpA, kIpB, kIpProtoTcp)
        .tcp(1, 2, kTcpSyn)
        .finish()
        .pad_to(60 + 40);
    g.put8(34 + 12, 8 << 4);  // 32 bytes of header in a 20-byte segment; the padding must not count
    Parsed r = parse_exact(g);
    CHECK_FALSE(r.ok);
    CHECK(r.key.tp_src == 0);
  }
}

TEST_CASE("short L4 headers: UDP, SCTP, ICMP, ICMPv6") {
  struct Case {
    uint8_t proto;
    uint32_t need;
  };
  for (Case c :
       {Case{kIpProtoUdp, 8}, Case{kIpProtoSctp, 12}, Case{kIpProtoIcmp, 8}, Case{kIpProtoTcp, 20}}) {
    CAPTURE(c.proto);
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv4).ipv4(kIpA, kIpB, c.proto).fill(c.need - 1).finish().pad_to(60);
    Parsed r = parse_exact(f);
    CHECK_FALSE(r.ok);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 64, 69});
  }
  FrameBuilder f;
  f.eth(kMacB, kMacA, kEthTypeIpv6).ipv6(v6(0x2001, 1), v6(0x2001, 2), kIpProtoIcmpv6).fill(7).finish();
  Parsed r = parse_exact(f);
  CHECK_FALSE(r.ok);
  CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68, 69});
}

TEST_CASE("VLAN tag without the EtherType after it; short ARP") {
  FrameBuilder f;
  f.eth(kMacB, kMacA).vlan(5).u8(0x08);  // 17 bytes: the tag, half an EtherType
  Parsed r = parse_exact(f);
  CHECK_FALSE(r.ok);
  CHECK(r.key.dl_type == hton16(0x8100));
  CHECK(r.words == std::vector<unsigned>{50, 59, 60});

  FrameBuilder q;
  q.eth(kMacB, kMacA).vlan(5, kEthTypeQinQ).vlan(6).u8(0x08);  // second tag cut short
  for (unsigned limit : {0u, 2u}) {  // the second tag is parsed: malformed
    CAPTURE(limit);
    r = parse_exact(q, limit);
    CHECK_FALSE(r.ok);
    CHECK(r.key.vlans[0].tci == hton16(5 | kVlanCfi));
    CHECK(r.key.vlans[1].tci == 0);
    CHECK(r.key.dl_type == hton16(0x8100));
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 61});
  }
  // vlan-limit 1 (the default): the inner TPID is just the EtherType, the
  // frame is whole (as OVS: nothing is parsed after an unknown EtherType).
  r = parse_exact(q);
  CHECK(r.ok);
  CHECK(r.key.vlans[0].tci == hton16(5 | kVlanCfi));
  CHECK(r.key.dl_type == hton16(0x8100));
  CHECK(r.pp.ofs.l3 == 18);

  FrameBuilder a;
  a.eth(kMacB, kMacA, kEthTypeArp).arp(1, kMacA, kIpA, kMacB, kIpB);
  r = parse_exact(a.data(), a.size() - 1);
  CHECK_FALSE(r.ok);
  CHECK(r.words == std::vector<unsigned>{50, 59, 60});
}

TEST_CASE("ND: truncated target, bad option length, repeated option") {
  auto ns = []() {
    FrameBuilder f;
    f.eth(kMacB, kMacA, kEthTypeIpv6)
        .ipv6(v6(0xfe80, 1), v6(0xff02, 1), kIpProtoIcmpv6)
        .icmp6(kIcmp6NeighborSolicit, 0);
    return f;
  };
  SUBCASE("target cut short: ports and empty addresses, no target") {
    FrameBuilder f = ns();
    f.fill(15).finish();
    Parsed r = parse_exact(f);
    CHECK_FALSE(r.ok);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68, 69, 72, 73, 74});
    CHECK(r.key.tp_src == hton16(135));
  }
  SUBCASE("option of length 0: what came before is kept") {
    FrameBuilder f = ns();
    f.nd_target(v6(0xfe80, 2)).nd_ll_option(kNdOptSourceLinkAddr, kMacA).bytes({2, 0}).fill(6).finish();
    Parsed r = parse_exact(f);
    CHECK_FALSE(r.ok);
    CHECK(r.key.nd_target == v6(0xfe80, 2));
    CHECK(r.key.arp_sha == kMacA);
  }
  SUBCASE("option longer than the message") {
    FrameBuilder f = ns();
    f.nd_target(v6(0xfe80, 2)).bytes({1, 2}).fill(6).finish();
    Parsed r = parse_exact(f);
    CHECK_FALSE(r.ok);
    CHECK(r.key.arp_sha == flow::EthAddr{});
  }
  SUBCASE("repeated source link-layer option: no target, no addresses (as OVS)") {
    FrameBuilder f = ns();
    f.nd_target(v6(0xfe80, 2))
        .nd_ll_option(kNdOptSourceLinkAddr, kMacA)
        .nd_ll_option(kNdOptSourceLinkAddr, kMacB);
    f.finish();
    Parsed r = parse_exact(f);
    CHECK_FALSE(r.ok);
    CHECK(r.words == std::vector<unsigned>{50, 59, 60, 65, 66, 67, 68, 69, 72, 73, 74});
    CHECK(r.key.arp_sha == flow::EthAddr{});
    CHECK(r.key.tcp_flags == 0);
    CHECK(r.key.tp_src == hton16(135));
  }
}

TEST_CASE("truncation at every byte offset: IPv4 + options / TCP + options") {
  truncate_everywhere(ipv4_tcp(), false);
  truncate_everywhere(ipv4_tcp(), true);
}

TEST_CASE("truncation at every byte offset: VLAN / IPv6 + hop-by-hop, routing, fragment, dst-opts / TCP") {
  truncate_everywhere(ipv6_ext_tcp(), false);
  truncate_everywhere(ipv6_ext_tcp(), true);
}

TEST_CASE("truncation at every byte offset: QinQ / IPv4 / UDP and IPv6 Neighbor Solicitation") {
  FrameBuilder f;
  f.eth(kMacB, kMacA)
      .vlan(1, kEthTypeQinQ)
      .vlan(2)
      .ethertype(kEthTypeIpv4)
      .ipv4(kIpA, kIpB, kIpProtoUdp)
      .udp(1, 2);
  f.payload(3).finish();
  for (unsigned limit : {0u, 2u}) {  // both tags keyed, IPv4/UDP above them
    CAPTURE(limit);
    truncate_everywhere(f, false, 0, 0, limit);
    truncate_everywhere(f, true, 0, 0, limit);
  }
  // ND: a cut inside the target is malformed; bytes after the target that do
  // not make a whole option are ignored (as OVS), so only the whole message
  // keys both addresses.
  const FrameBuilder nd = ipv6_ns();
  const uint32_t target_end = 14 + 40 + 8 + 16;
  truncate_everywhere(nd, false, target_end, nd.size());
  truncate_everywhere(nd, true, target_end, nd.size());
}

TEST_CASE("frames longer than kMaxParsedLen are parsed over their head") {
  FrameBuilder f;
  f.eth(kMacB, kMacA, kEthTypeIpv4).ipv4(kIpA, kIpB, kIpProtoUdp).udp(1, 2).finish();
  std::vector<uint8_t> big(70000, 0);
  std::memcpy(big.data(), f.data(), f.size());
  flow::Miniflow mf;
  LayerOffsets ofs;
  CHECK(parse_frame(big.data(), static_cast<uint32_t>(big.size()), PacketMetadata{}, mf, ofs));
  CHECK(ofs.l2_pad == kMaxParsedLen - f.size());
  FlowKey k;
  flow::expand(mf, k);
  CHECK(k.tp_dst == hton16(2));
}

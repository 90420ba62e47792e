// packet/tunnel_header: the outer headers built for VXLAN, GENEVE and GRE
// compared with bytes written out here from the RFCs (7348, 8926, 2784/2890)
// and Open vSwitch's conventions; finish_tunnel_push's lengths and checksums
// recomputed from scratch; parse_tunnel_header on good packets (the
// metadata it fills) and on every way a packet can be bad, including every
// truncation.
#include "packet/tunnel_header.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "flow/flow_text.h"

using namespace keel;
using namespace keel::packet;

namespace {

using Bytes = std::vector<uint8_t>;

constexpr flow::EthAddr kDst{{0xf8, 0xbc, 0x12, 0x44, 0x34, 0xb6}};
constexpr flow::EthAddr kSrc{{0xaa, 0x55, 0xaa, 0x55, 0x00, 0x00}};

be32 ip4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  const uint8_t x[4] = {a, b, c, d};
  be32 v;
  std::memcpy(&v, x, 4);
  return v;
}
flow::In6Addr ip6(uint8_t last) {
  flow::In6Addr a{};
  a.b[0] = 0x20, a.b[1] = 0x01, a.b[2] = 0xca, a.b[3] = 0xfe, a.b[15] = last;
  return a;
}

uint16_t get16(const Bytes& f, size_t o) { return static_cast<uint16_t>(f[o] << 8 | f[o + 1]); }
void put16(Bytes& f, size_t o, uint16_t v) {
  f[o] = static_cast<uint8_t>(v >> 8);
  f[o + 1] = static_cast<uint8_t>(v);
}
uint32_t be_sum(const uint8_t* p, size_t n, uint32_t s = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) s += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  if (n & 1) s += static_cast<uint32_t>(p[n - 1] << 8);
  return s;
}
uint16_t fin(uint32_t s) {
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(~s & 0xffff);
}

TunnelHeaderSpec vxlan4() {
  TunnelHeaderSpec s;
  s.type = TnlType::kVxlan;
  s.eth_dst = kDst;
  s.eth_src = kSrc;
  s.ipv4_src = ip4(1, 1, 2, 88);
  s.ipv4_dst = ip4(1, 1, 2, 92);
  s.key = 0x7b;
  return s;
}

// An inner Ethernet frame of n bytes.
Bytes inner(size_t n = 60) {
  Bytes f(n);
  for (size_t i = 0; i < n; ++i) f[i] = static_cast<uint8_t>(i * 7 + 1);
  f[12] = 0x08, f[13] = 0x00;
  return f;
}

// header + inner, finished as tnl_push does.
Bytes push(const TunnelHeader& h, const Bytes& in, uint32_t hash = 0x12345678) {
  Bytes f(h.span().begin(), h.span().end());
  f.insert(f.end(), in.begin(), in.end());
  finish_tunnel_push(f.data(), static_cast<uint32_t>(f.size()), h.type, h.len, hash);
  return f;
}

TnlPopResult pop(TnlPopKind k, uint16_t port, const Bytes& f, TnlPopInfo& info) {
  // A copy exactly as long as the frame: a read past it is a sanitizer error.
  std::vector<uint8_t> exact(f);
  return parse_tunnel_header(k, port, exact.data(), static_cast<uint32_t>(exact.size()), info);
}

}  // namespace

TEST_CASE("build_tunnel_header: VXLAN over IPv4, byte for byte (RFC 7348, OVS's placeholders)") {
  auto h = build_tunnel_header(vxlan4());
  REQUIRE(h.ok());
  Bytes want = {
      0xf8, 0xbc, 0x12, 0x44, 0x34, 0xb6, 0xaa, 0x55, 0xaa, 0x55, 0x00, 0x00, 0x08, 0x00,  // eth
      0x45, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00,              // ipv4: len 0, DF
      1,    1,    2,    88,   1,    1,    2,    92,                                        // src, dst
      0x00, 0x00, 0x12, 0xb5, 0x00, 0x00, 0x00, 0x00,                                      // udp: src 0, 4789
      0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7b, 0x00,                                      // vxlan: I, vni
  };
  // The IPv4 checksum over the header with total length 0 (OVS's trick).
  put16(want, 24, fin(be_sum(&want[14], 20)));
  CHECK(h->len == 50);
  CHECK(h->type == TnlType::kVxlan);
  CHECK(Bytes(h->span().begin(), h->span().end()) == want);
  CHECK(check_tunnel_header(TnlType::kVxlan, h->span()).ok());
}

TEST_CASE("build_tunnel_header: GENEVE with options, GRE with key and checksum, IPv6 underlays") {
  SUBCASE("GENEVE over IPv4 with a critical option and OAM") {
    TunnelHeaderSpec s = vxlan4();
    s.type = TnlType::kGeneve;
    s.oam = true;
    const uint8_t opts[] = {0xff, 0xff, 0x80, 0x01, 0x00, 0x00, 0x00, 0x0a};
    s.geneve_opts = opts;
    auto h = build_tunnel_header(s);
    REQUIRE(h.ok());
    REQUIRE(h->len == 14 + 20 + 8 + 8 + 8);
    const Bytes g(h->span().begin() + 42, h->span().end());
    // ver 0, opt len 2 words; O and C; proto 0x6558; vni 0x7b; then the TLV.
    CHECK(g == Bytes{0x02, 0xc0, 0x65, 0x58, 0x00, 0x00, 0x7b, 0x00, 0xff, 0xff, 0x80, 0x01, 0, 0, 0, 0x0a});
    CHECK(get16(Bytes(h->span().begin(), h->span().end()), 36) == 6081);
  }
  SUBCASE("GRE over IPv4 with checksum and key (RFC 2890)") {
    TunnelHeaderSpec s = vxlan4();
    s.type = TnlType::kGre;
    s.csum = true;
    s.key = 0x1c8;
    auto h = build_tunnel_header(s);
    REQUIRE(h.ok());
    const Bytes b(h->span().begin(), h->span().end());
    REQUIRE(b.size() == 14 + 20 + 12);
    CHECK(b[23] == 47);
    CHECK(Bytes(b.begin() + 34, b.end()) == Bytes{0xa0, 0x00, 0x65, 0x58, 0, 0, 0, 0, 0, 0, 0x01, 0xc8});
  }
  SUBCASE("GRE without key over IPv6 is type 109") {
    TunnelHeaderSpec s;
    s.type = TnlType::kGre;
    s.ipv6 = true;
    s.key_present = false;
    s.ipv6_src = ip6(0x88);
    s.ipv6_dst = ip6(0x92);
    s.tos = 0x28;
    s.ttl = 9;
    auto h = build_tunnel_header(s);
    REQUIRE(h.ok());
    CHECK(h->type == TnlType::kIp6Gre);
    const Bytes b(h->span().begin(), h->span().end());
    REQUIRE(b.size() == 14 + 40 + 4);
    CHECK(get16(b, 12) == 0x86dd);
    CHECK(Bytes(b.begin() + 14, b.begin() + 22) == Bytes{0x62, 0x80, 0x00, 0x00, 0x00, 0x00, 47, 9});
    CHECK(Bytes(b.begin() + 54, b.end()) == Bytes{0x00, 0x00, 0x65, 0x58});
  }
  SUBCASE("VXLAN over IPv6: the UDP checksum is always on (0xffff placeholder)") {
    TunnelHeaderSpec s = vxlan4();
    s.ipv6 = true;
    s.ipv6_src = ip6(1);
    s.ipv6_dst = ip6(2);
    auto h = build_tunnel_header(s);
    REQUIRE(h.ok());
    const Bytes b(h->span().begin(), h->span().end());
    REQUIRE(b.size() == 70);
    CHECK(get16(b, 54 + 6) == 0xffff);
  }
  SUBCASE("bad specs are refused") {
    TunnelHeaderSpec s = vxlan4();
    s.key = 0x1000000;
    CHECK(!build_tunnel_header(s).ok());
    s = vxlan4();
    const uint8_t bad[] = {0xff, 0xff, 0x80, 0x02, 0, 0, 0, 0};  // says 8 data bytes, has 4
    s.type = TnlType::kGeneve;
    s.geneve_opts = bad;
    CHECK(!build_tunnel_header(s).ok());
    s = vxlan4();
    s.geneve_opts = std::span<const uint8_t>(bad, 4);
    CHECK(!build_tunnel_header(s).ok());  // options on VXLAN
  }
}

TEST_CASE("finish_tunnel_push: lengths, IPv4 and UDP/GRE checksums, UDP source port from the hash") {
  const Bytes in = inner(75);
  SUBCASE("VXLAN/IPv4, no UDP checksum") {
    auto h = build_tunnel_header(vxlan4());
    REQUIRE(h.ok());
    const Bytes f = push(*h, in, 0xdeadbeef);
    CHECK(get16(f, 16) == f.size() - 14);
    CHECK(fin(be_sum(&f[14], 20)) == 0);  // a valid IPv4 header checksum
    CHECK(get16(f, 34) == ((uint64_t{0xdeadbeef} * (61000 - 32768)) >> 32) + 32768);
    CHECK(get16(f, 38) == f.size() - 34);
    CHECK(get16(f, 40) == 0);
    CHECK(Bytes(f.begin() + 50, f.end()) == in);
  }
  SUBCASE("the source port range is OVS's 32768..60999") {
    CHECK(tunnel_udp_src_port(0) == 32768);
    CHECK(tunnel_udp_src_port(0xffffffff) == 60999);
  }
  for (bool v6 : {false, true}) {
    CAPTURE(v6);
    TunnelHeaderSpec s = vxlan4();
    s.csum = true;
    s.ipv6 = v6;
    s.ipv6_src = ip6(1);
    s.ipv6_dst = ip6(2);
    auto h = build_tunnel_header(s);
    REQUIRE(h.ok());
    const Bytes f = push(*h, in);
    const size_t l3 = 14, l4 = v6 ? 54 : 34;
    const size_t ulen = f.size() - l4;
    uint32_t ps = v6 ? be_sum(&f[l3 + 8], 32) : be_sum(&f[l3 + 12], 8);
    ps += static_cast<uint32_t>(ulen) + 17;
    CHECK(fin(be_sum(&f[l4], ulen, ps)) == 0);  // the UDP checksum verifies
    CHECK(get16(f, l4 + 6) != 0);
    if (v6) CHECK(get16(f, 18) == f.size() - 54);
  }
  SUBCASE("GRE checksum over the GRE header and payload") {
    TunnelHeaderSpec s = vxlan4();
    s.type = TnlType::kGre;
    s.csum = true;
    auto h = build_tunnel_header(s);
    REQUIRE(h.ok());
    const Bytes f = push(*h, in);
    CHECK(fin(be_sum(&f[34], f.size() - 34)) == 0);
    CHECK(get16(f, 38) != 0);
  }
}

TEST_CASE("parse_tunnel_header: good packets give the tunnel metadata and the outer length") {
  const Bytes in = inner();
  TnlPopInfo info;
  SUBCASE("VXLAN") {
    TunnelHeaderSpec s = vxlan4();
    s.tos = 0x10;
    s.ttl = 33;
    auto h = build_tunnel_header(s);
    REQUIRE(h.ok());
    const Bytes f = push(*h, in);
    REQUIRE(pop(TnlPopKind::kVxlan, 4789, f, info) == TnlPopResult::kOk);
    CHECK(info.outer_len == 50);
    CHECK(info.tunnel.ipv4_src == ip4(1, 1, 2, 88));
    CHECK(info.tunnel.ipv4_dst == ip4(1, 1, 2, 92));
    CHECK(info.tunnel.tun_id == flow::text::hton64(0x7b));
    CHECK(info.tunnel.tos == 0x10);
    CHECK(info.tunnel.ttl == 33);
    CHECK(info.tunnel.flags == flow::kTunKey);  // DF does not set df on receive (OVS 3.1)
    CHECK(info.tunnel.tp_dst == hton16(4789));
    CHECK(info.tunnel.tp_src == hton16(get16(f, 34)));
  }
  SUBCASE("GENEVE with options and a UDP checksum, over IPv6") {
    TunnelHeaderSpec s = vxlan4();
    s.type = TnlType::kGeneve;
    s.ipv6 = true;
    s.ipv6_src = ip6(1);
    s.ipv6_dst = ip6(2);
    s.oam = true;
    const uint8_t opts[] = {0xff, 0xff, 0x80, 0x01, 0x00, 0x00, 0x00, 0x0a};
    s.geneve_opts = opts;
    auto h = build_tunnel_header(s);
    REQUIRE(h.ok());
    const Bytes f = push(*h, in);
    REQUIRE(pop(TnlPopKind::kGeneve, 6081, f, info) == TnlPopResult::kOk);
    CHECK(info.outer_len == 14 + 40 + 8 + 8 + 8);
    CHECK(info.tunnel.ipv6_dst == ip6(2));
    CHECK(info.tunnel.flags == (flow::kTunKey | flow::kTunCsum | flow::kTunOam));
    CHECK(info.tunnel.opt_len == 8);
    CHECK(std::memcmp(info.opts, opts, 8) == 0);
  }
  SUBCASE("GRE with checksum and key") {
    TunnelHeaderSpec s = vxlan4();
    s.type = TnlType::kGre;
    s.csum = true;
    s.key = 0xabcdef01;
    auto h = build_tunnel_header(s);
    REQUIRE(h.ok());
    const Bytes f = push(*h, in);
    REQUIRE(pop(TnlPopKind::kGre, 0, f, info) == TnlPopResult::kOk);
    CHECK(info.outer_len == 46);
    CHECK(info.tunnel.tun_id == flow::text::hton64(0xabcdef01));
    CHECK(info.tunnel.flags == (flow::kTunKey | flow::kTunCsum));
  }
}

TEST_CASE("parse_tunnel_header: every drop reason, and every truncation") {
  const Bytes in = inner();
  TnlPopInfo info;
  TunnelHeaderSpec s = vxlan4();
  s.csum = true;
  auto h = build_tunnel_header(s);
  REQUIRE(h.ok());
  const Bytes good = push(*h, in);
  REQUIRE(pop(TnlPopKind::kVxlan, 4789, good, info) == TnlPopResult::kOk);
  auto with = [&](size_t at, uint8_t v) {
    Bytes f = good;
    f[at] = v;
    return f;
  };
  // The IPv4 checksum is fixed up where a test changes the IP header on purpose.
  auto fix_ip = [](Bytes f) {
    put16(f, 24, 0);
    put16(f, 24, fin(be_sum(&f[14], (f[14] & 0xfu) * 4u)));  // over the header's IHL
    return f;
  };
  CHECK(pop(TnlPopKind::kVxlan, 4789, with(12, 0x81), info) == TnlPopResult::kNotIp);
  CHECK(pop(TnlPopKind::kVxlan, 4789, fix_ip(with(14, 0x55)), info) == TnlPopResult::kBadIpHeader);
  CHECK(pop(TnlPopKind::kVxlan, 4789, fix_ip(with(14, 0x46)), info) == TnlPopResult::kBadIpHeader);
  CHECK(pop(TnlPopKind::kVxlan, 4789, with(22, 63), info) == TnlPopResult::kBadIpChecksum);
  CHECK(pop(TnlPopKind::kVxlan, 4789, fix_ip(with(20, 0x20)), info) == TnlPopResult::kIpFragment);
  CHECK(pop(TnlPopKind::kVxlan, 4789, fix_ip(with(23, 6)), info) == TnlPopResult::kWrongProto);
  CHECK(pop(TnlPopKind::kGre, 0, good, info) == TnlPopResult::kWrongProto);
  CHECK(pop(TnlPopKind::kVxlan, 4790, good, info) == TnlPopResult::kWrongPort);
  CHECK(pop(TnlPopKind::kVxlan, 4789, with(good.size() - 1, good.back() ^ 1), info) ==
        TnlPopResult::kBadUdpChecksum);
  // VXLAN flags: with the UDP checksum off so that it does not catch them first.
  TunnelHeaderSpec nc = vxlan4();
  auto hn = build_tunnel_header(nc);
  REQUIRE(hn.ok());
  const Bytes plain = push(*hn, in);
  auto pwith = [&](size_t at, uint8_t v) {
    Bytes f = plain;
    f[at] = v;
    return f;
  };
  CHECK(pop(TnlPopKind::kVxlan, 4789, pwith(42, 0x00), info) == TnlPopResult::kBadVxlanFlags);
  CHECK(pop(TnlPopKind::kVxlan, 4789, pwith(43, 0x01), info) == TnlPopResult::kBadVxlanFlags);
  CHECK(pop(TnlPopKind::kVxlan, 4789, pwith(49, 0x01), info) == TnlPopResult::kBadVxlanFlags);
  // GENEVE: version, protocol, option length beyond the packet, a TLV overrunning it, too many options.
  TunnelHeaderSpec gs = vxlan4();
  gs.type = TnlType::kGeneve;
  const uint8_t opts[] = {0xff, 0xff, 0x80, 0x01, 0, 0, 0, 0x0a};
  gs.geneve_opts = opts;
  auto gh = build_tunnel_header(gs);
  REQUIRE(gh.ok());
  const Bytes gen = push(*gh, in);
  auto gwith = [&](size_t at, uint8_t v) {
    Bytes f = gen;
    f[at] = v;
    return f;
  };
  REQUIRE(pop(TnlPopKind::kGeneve, 6081, gen, info) == TnlPopResult::kOk);
  CHECK(pop(TnlPopKind::kGeneve, 6081, gwith(42, 0x42), info) == TnlPopResult::kBadGeneve);
  CHECK(pop(TnlPopKind::kGeneve, 6081, gwith(44, 0x08), info) == TnlPopResult::kBadGeneve);
  CHECK(pop(TnlPopKind::kGeneve, 6081, gwith(42, 0x3f), info) == TnlPopResult::kBadGeneveOpts);
  CHECK(pop(TnlPopKind::kGeneve, 6081, gwith(53, 0x02), info) == TnlPopResult::kBadGeneveOpts);
  {
    TunnelHeaderSpec big = gs;
    uint8_t many[72] = {};
    for (size_t o = 0; o < sizeof many; o += 8) many[o + 3] = 1;  // nine 8-byte options
    big.geneve_opts = many;
    auto bh = build_tunnel_header(big);
    REQUIRE(bh.ok());
    CHECK(pop(TnlPopKind::kGeneve, 6081, push(*bh, in), info) == TnlPopResult::kGeneveOptsTooLong);
  }
  // GRE: version, unknown flags (routing), protocol, checksum.
  TunnelHeaderSpec rs = vxlan4();
  rs.type = TnlType::kGre;
  rs.csum = true;
  auto rh = build_tunnel_header(rs);
  REQUIRE(rh.ok());
  const Bytes gre = push(*rh, in);
  auto rwith = [&](size_t at, uint8_t v) {
    Bytes f = gre;
    f[at] = v;
    return f;
  };
  REQUIRE(pop(TnlPopKind::kGre, 0, gre, info) == TnlPopResult::kOk);
  CHECK(pop(TnlPopKind::kGre, 0, rwith(35, 0x01), info) == TnlPopResult::kBadGre);
  CHECK(pop(TnlPopKind::kGre, 0, rwith(34, 0xc0), info) == TnlPopResult::kBadGre);
  CHECK(pop(TnlPopKind::kGre, 0, rwith(37, 0x00), info) == TnlPopResult::kBadGre);
  CHECK(pop(TnlPopKind::kGre, 0, rwith(gre.size() - 1, gre.back() ^ 0x10), info) == TnlPopResult::kBadGreChecksum);

  // Every truncation of each good packet is refused (never kOk, never a read past the end).
  for (const Bytes* f : {&good, &plain, &gen, &gre}) {
    const TnlPopKind k = f == &gen ? TnlPopKind::kGeneve : f == &gre ? TnlPopKind::kGre : TnlPopKind::kVxlan;
    const uint16_t port = f == &gen ? 6081 : 4789;
    for (size_t n = 0; n < f->size(); ++n) {
      CAPTURE(n);
      const Bytes cut(f->begin(), f->begin() + static_cast<std::ptrdiff_t>(n));
      CHECK(pop(k, port, cut, info) != TnlPopResult::kOk);
    }
  }
  CHECK(std::string(tnl_pop_result_name(TnlPopResult::kBadGeneveOpts)) == "bad_geneve_opts");
}

// Tunnel outer headers: build (slow path), finish per packet (tnl_push),
// parse and validate per packet (tnl_pop). See tunnel_header.h; the byte
// layouts and every rule here follow Open vSwitch 3.1's
// lib/netdev-native-tnl.c (cited per function).
//
// Checksums: one's complement sums over bytes as they sit in memory (the
// result is stored as it was summed, so the code is the same on either
// byte order): packet/checksum.h, which the executor's set actions use too.
//
// Thread-safety: pure functions; any thread.
#include "packet/tunnel_header.h"

#include <string>

#include "packet/checksum.h"

namespace keel::packet {

namespace {

constexpr uint32_t kEth = sizeof(EthHeader);
constexpr uint32_t kIp4 = sizeof(Ipv4Header);
constexpr uint32_t kIp6 = sizeof(Ipv6Header);
constexpr uint32_t kUdp = sizeof(UdpHeader);

using csum::fold;
using csum::sum_bytes;
uint32_t add16(uint32_t sum, be16 v) { return sum + v; }
uint16_t finish(uint32_t sum) { return static_cast<uint16_t>(~fold(sum)); }

// Pseudo-header sums (memory order), for the L4 segment of `l4_len` bytes.
uint32_t pseudo4(const uint8_t* ip, uint8_t proto, uint32_t l4_len) {
  uint32_t s = sum_bytes(ip + offsetof(Ipv4Header, src), 8);
  s = add16(s, hton16(proto));
  return add16(s, hton16(static_cast<uint16_t>(l4_len)));
}
uint32_t pseudo6(const uint8_t* ip6, uint8_t proto, uint32_t l4_len) {
  uint32_t s = sum_bytes(ip6 + offsetof(Ipv6Header, src), 32);
  s = add16(s, hton16(static_cast<uint16_t>(l4_len >> 16)));
  s = add16(s, hton16(static_cast<uint16_t>(l4_len)));
  return add16(s, hton16(proto));
}

template <typename T>
void put(uint8_t* p, const T& v) {
  std::memcpy(p, &v, sizeof v);
}

// A 32-bit network-order value widened to 64 bits, network order (OVS's
// be32_to_be64): the VNI / GRE key as tun_id.
be64 hton64_of32(be32 v) {
  uint8_t b[8] = {0, 0, 0, 0};
  std::memcpy(b + 4, &v, 4);
  be64 r;
  std::memcpy(&r, b, 8);
  return r;
}

uint32_t gre_header_len(uint16_t flags) {
  return 4 + (flags & kGreCsum ? 4 : 0) + (flags & kGreKey ? 4 : 0) + (flags & kGreSeq ? 4 : 0);
}

// GENEVE options: a sequence of whole TLVs filling exactly `n` bytes.
bool geneve_opts_ok(const uint8_t* p, size_t n) {
  size_t off = 0;
  while (off < n) {
    if (n - off < sizeof(GeneveOptHeader)) return false;
    const size_t len = sizeof(GeneveOptHeader) + size_t{static_cast<uint8_t>(p[off + 3] & 0x1f)} * 4;
    if (len > n - off) return false;
    off += len;
  }
  return true;
}

}  // namespace

// As netdev_tnl_ip_build_header + udp_build_header / netdev_gre_build_header
// + netdev_{vxlan,geneve}_build_header.
Result<TunnelHeader> build_tunnel_header(const TunnelHeaderSpec& spec) {
  TunnelHeader h;
  const bool gre = spec.type == TnlType::kGre || spec.type == TnlType::kIp6Gre;
  if (spec.type != TnlType::kGre && spec.type != TnlType::kIp6Gre && spec.type != TnlType::kVxlan &&
      spec.type != TnlType::kGeneve)
    return invalid("tunnel header: unknown type " + std::to_string(static_cast<unsigned>(spec.type)));
  if (spec.type == TnlType::kIp6Gre && !spec.ipv6) return invalid("tunnel header: type 109 is GRE over IPv6");
  if (!gre && spec.key > 0xffffff)
    return invalid("tunnel header: VNI " + std::to_string(spec.key) + " is more than 24 bits");
  if (spec.type == TnlType::kGeneve) {
    if (spec.geneve_opts.size() > kMaxGeneveOptsLen || spec.geneve_opts.size() % 4 ||
        !geneve_opts_ok(spec.geneve_opts.data(), spec.geneve_opts.size()))
      return invalid("tunnel header: GENEVE options are not whole TLVs of at most " +
                     std::to_string(kMaxGeneveOptsLen) + " bytes");
  } else if (!spec.geneve_opts.empty() || spec.oam || spec.critical) {
    return invalid("tunnel header: GENEVE options on a non-GENEVE tunnel");
  }
  h.type = gre && spec.ipv6 ? TnlType::kIp6Gre : spec.type;
  uint8_t* p = h.bytes.data();
  // Ethernet.
  std::memcpy(p, spec.eth_dst.b, 6);
  std::memcpy(p + 6, spec.eth_src.b, 6);
  put(p + 12, hton16(spec.ipv6 ? kEthTypeIpv6 : kEthTypeIpv4));
  uint32_t off = kEth;
  const uint8_t proto = gre ? kIpProtoGre : kIpProtoUdp;
  if (!spec.ipv6) {
    Ipv4Header ip{};
    ip.ver_ihl = 0x45;
    ip.tos = spec.tos;
    ip.ttl = spec.ttl;
    ip.proto = proto;
    ip.src = spec.ipv4_src;
    ip.dst = spec.ipv4_dst;
    ip.frag_off = spec.dont_fragment ? hton16(0x4000) : 0;
    ip.csum = 0;
    ip.csum = finish(sum_bytes(reinterpret_cast<const uint8_t*>(&ip), kIp4));  // total length 0 (see the top)
    put(p + off, ip);
    off += kIp4;
  } else {
    Ipv6Header ip6{};
    ip6.vtc_flow = hton32(6u << 28 | uint32_t{spec.tos} << 20);
    ip6.next_header = proto;
    ip6.hop_limit = spec.ttl;
    std::memcpy(ip6.src, &spec.ipv6_src, 16);
    std::memcpy(ip6.dst, &spec.ipv6_dst, 16);
    put(p + off, ip6);
    off += kIp6;
  }
  if (gre) {
    uint16_t flags = (spec.csum ? kGreCsum : 0) | (spec.key_present ? kGreKey : 0);
    put(p + off, hton16(flags));
    put(p + off + 2, hton16(kEthTypeTeb));
    off += 4;
    if (spec.csum) {
      put(p + off, uint32_t{0});
      off += 4;
    }
    if (spec.key_present) {
      put(p + off, hton32(spec.key));
      off += 4;
    }
  } else {
    UdpHeader udp{};
    const uint16_t port =
        spec.udp_dst ? spec.udp_dst : (spec.type == TnlType::kVxlan ? kVxlanDefaultPort : kGeneveDefaultPort);
    udp.dst = hton16(port);
    // 0xffff marks "compute the checksum" (it is transparent to the sum);
    // always on over IPv6 (udp_build_header).
    udp.csum = spec.ipv6 || spec.csum ? 0xffff : 0;
    put(p + off, udp);
    off += kUdp;
    if (spec.type == TnlType::kVxlan) {
      put(p + off, VxlanHeader{hton32(kVxlanFlagI), hton32(spec.key << 8)});
      off += sizeof(VxlanHeader);
    } else {
      GeneveHeader g{};
      g.ver_optlen = static_cast<uint8_t>(spec.geneve_opts.size() / 4);
      // C: an option is critical (its type's top bit), as tun_metadata_to_geneve_header's crit_opt.
      bool crit = spec.critical;
      for (size_t o = 0; o < spec.geneve_opts.size(); o += 4 + (spec.geneve_opts[o + 3] & 0x1fu) * 4)
        crit |= (spec.geneve_opts[o + 2] & 0x80) != 0;
      g.flags = (spec.oam ? kGeneveFlagOam : 0) | (crit ? kGeneveFlagCrit : 0);
      g.proto = hton16(kEthTypeTeb);
      g.vni = hton32(spec.key << 8);
      put(p + off, g);
      off += sizeof(GeneveHeader);
      if (!spec.geneve_opts.empty()) std::memcpy(p + off, spec.geneve_opts.data(), spec.geneve_opts.size());
      off += static_cast<uint32_t>(spec.geneve_opts.size());
    }
  }
  h.len = static_cast<uint16_t>(off);
  return h;
}

Status check_tunnel_header(TnlType type, std::span<const uint8_t> header) {
  const uint8_t* p = header.data();
  const size_t n = header.size();
  if (n > kMaxTunnelHeaderLen)
    return invalid("header longer than " + std::to_string(kMaxTunnelHeaderLen) + " bytes");
  if (n < kEth) return invalid("header shorter than an Ethernet header");
  const uint16_t dl_type = ntoh16(load<be16>(p + 12));
  const bool gre = type == TnlType::kGre || type == TnlType::kIp6Gre;
  if (type != TnlType::kGre && type != TnlType::kIp6Gre && type != TnlType::kVxlan && type != TnlType::kGeneve)
    return invalid("header type " + std::to_string(static_cast<unsigned>(type)) + " is not 3 (gre), 4 (vxlan), "
                   "5 (geneve) or 109 (ip6gre)");
  uint32_t off = kEth;
  uint8_t proto;
  if (dl_type == kEthTypeIpv4) {
    if (type == TnlType::kIp6Gre) return invalid("type 109 (ip6gre) needs an IPv6 header");
    if (n < off + kIp4) return invalid("header too short for its IPv4 header");
    if (p[off] != 0x45) return invalid("IPv4 header: version 4 with no options expected");
    proto = p[off + offsetof(Ipv4Header, proto)];
    off += kIp4;
  } else if (dl_type == kEthTypeIpv6) {
    if (type == TnlType::kGre) return invalid("type 3 (gre) needs an IPv4 header (109 for IPv6)");
    if (n < off + kIp6) return invalid("header too short for its IPv6 header");
    if ((p[off] >> 4) != 6) return invalid("IPv6 header: version 6 expected");
    proto = p[off + offsetof(Ipv6Header, next_header)];
    off += kIp6;
  } else {
    return invalid("dl_type must be 0x0800 or 0x86dd");
  }
  if (gre) {
    if (proto != kIpProtoGre) return invalid("GRE header needs IP protocol 47");
    if (n < off + 4) return invalid("header too short for its GRE header");
    const uint16_t flags = ntoh16(load<be16>(p + off));
    if (flags & kGreSeq) return invalid("GRE sequence numbers (flags 0x1000) are not supported");
    if (flags & ~(kGreCsum | kGreKey)) return invalid("GRE flags other than csum (0x8000) and key (0x2000)");
    if (load<be16>(p + off + 2) != be16_const(kEthTypeTeb))
      return invalid("GRE protocol must be 0x6558 (keel tunnels Ethernet frames only)");
    if (n != off + gre_header_len(flags)) return invalid("size does not match the GRE header's flags");
    return {};
  }
  if (proto != kIpProtoUdp) return invalid("VXLAN/GENEVE header needs IP protocol 17");
  if (n < off + kUdp + 8) return invalid("header too short for its UDP and tunnel headers");
  off += kUdp;
  if (type == TnlType::kVxlan) {
    if (n != off + sizeof(VxlanHeader)) return invalid("size does not match a VXLAN header");
    if (!(ntoh32(load<be32>(p + off)) & kVxlanFlagI)) return invalid("VXLAN flags without the I flag (0x8000000)");
    return {};
  }
  const uint32_t opts = (p[off] & 0x3f) * 4u;
  if (p[off] >> 6) return invalid("GENEVE version must be 0");
  if (n != off + sizeof(GeneveHeader) + opts) return invalid("size does not match the GENEVE option length");
  if (load<be16>(p + off + 2) != be16_const(kEthTypeTeb)) return invalid("GENEVE protocol must be 0x6558");
  if (!geneve_opts_ok(p + off + sizeof(GeneveHeader), opts)) return invalid("GENEVE options are not whole TLVs");
  return {};
}

// As netdev_tnl_push_ip_header + netdev_tnl_push_udp_header /
// netdev_gre_push_header.
void finish_tunnel_push(uint8_t* frame, uint32_t len, TnlType type, uint32_t header_len, uint32_t hash) noexcept {
  (void)header_len;
  uint8_t* ip = frame + kEth;
  const bool v6 = load<be16>(frame + 12) == be16_const(kEthTypeIpv6);
  uint32_t l4_off;
  if (!v6) {
    const uint16_t tot = static_cast<uint16_t>(len - kEth);
    put(ip + offsetof(Ipv4Header, tot_len), hton16(tot));
    // recalc_csum16(csum, 0, tot_len): ~(~csum + ~0 + tot) = ~(~csum + tot).
    uint16_t c = load<uint16_t>(ip + offsetof(Ipv4Header, csum));
    uint32_t s = static_cast<uint16_t>(~c);
    s += hton16(tot);
    put(ip + offsetof(Ipv4Header, csum), static_cast<uint16_t>(~fold(s)));
    l4_off = kEth + kIp4;
  } else {
    put(ip + offsetof(Ipv6Header, payload_len), hton16(static_cast<uint16_t>(len - kEth - kIp6)));
    l4_off = kEth + kIp6;
  }
  uint8_t* l4 = frame + l4_off;
  const uint32_t l4_len = len - l4_off;
  if (type == TnlType::kGre || type == TnlType::kIp6Gre) {
    if (ntoh16(load<be16>(l4)) & kGreCsum) {
      put(l4 + 4, uint16_t{0});
      put(l4 + 4, finish(sum_bytes(l4, l4_len)));
    }
    return;
  }
  put(l4 + offsetof(UdpHeader, src), hton16(tunnel_udp_src_port(hash)));
  put(l4 + offsetof(UdpHeader, len), hton16(static_cast<uint16_t>(l4_len)));
  if (load<uint16_t>(l4 + offsetof(UdpHeader, csum)) != 0) {
    put(l4 + offsetof(UdpHeader, csum), uint16_t{0});
    uint32_t s = v6 ? pseudo6(ip, kIpProtoUdp, l4_len) : pseudo4(ip, kIpProtoUdp, l4_len);
    uint16_t c = finish(sum_bytes(l4, l4_len, s));
    put(l4 + offsetof(UdpHeader, csum), c ? c : uint16_t{0xffff});
  }
}

const char* tnl_pop_result_name(TnlPopResult r) noexcept {
  switch (r) {
    case TnlPopResult::kOk: return "ok";
    case TnlPopResult::kTruncated: return "truncated";
    case TnlPopResult::kNotIp: return "not_ip";
    case TnlPopResult::kBadIpHeader: return "bad_ip_header";
    case TnlPopResult::kBadIpChecksum: return "bad_ip_csum";
    case TnlPopResult::kIpFragment: return "ip_fragment";
    case TnlPopResult::kWrongProto: return "wrong_proto";
    case TnlPopResult::kWrongPort: return "wrong_port";
    case TnlPopResult::kBadUdpChecksum: return "bad_udp_csum";
    case TnlPopResult::kNoVport: return "no_vport";
    case TnlPopResult::kBadVxlanFlags: return "bad_vxlan_flags";
    case TnlPopResult::kBadGeneve: return "bad_geneve";
    case TnlPopResult::kBadGeneveOpts: return "bad_geneve_opts";
    case TnlPopResult::kBadGre: return "bad_gre";
    case TnlPopResult::kBadGreChecksum: return "bad_gre_csum";
    case TnlPopResult::kGeneveOptsTooLong: return "geneve_opts_too_long";
    case TnlPopResult::kCount: break;
  }
  return "?";
}

// As netdev_tnl_ip_extract_tnl_md + udp_extract_tnl_md / parse_gre_header
// + netdev_{vxlan,geneve,gre}_pop_header. Differences: an outer VLAN tag,
// IPv6 extension headers and IPv4 fragments are refused (OVS would misparse
// or fail later); GENEVE TLVs are checked here (OVS fails the upcall's
// translation on them instead); GRE carries Ethernet only (protocol 0x6558:
// keel has no packet_type). As OVS 3.1, DF in the outer header does not set
// kTunDontFragment on receive (tunnel-push-pop.at: flags(-df-csum+key)).
TnlPopResult parse_tunnel_header(TnlPopKind kind, uint16_t udp_port, const uint8_t* frame, uint32_t len,
                                 TnlPopInfo& out) noexcept {
  out.tunnel = TunnelMetadata{};
  out.outer_len = 0;
  if (len < kEth) return TnlPopResult::kTruncated;
  const be16 dl_type = load<be16>(frame + 12);
  const uint8_t* ip = frame + kEth;
  const uint32_t l3_size = len - kEth;
  uint32_t l4_off, l4_len;
  uint8_t proto;
  bool v6;
  if (dl_type == be16_const(kEthTypeIpv4)) {
    v6 = false;
    if (l3_size < kIp4) return TnlPopResult::kTruncated;
    const uint8_t vi = ip[0];
    if ((vi >> 4) != 4 || (vi & 0xf) < 5) return TnlPopResult::kBadIpHeader;
    const uint32_t ihl = (vi & 0xf) * 4u;
    if (ihl > l3_size) return TnlPopResult::kTruncated;
    if (finish(sum_bytes(ip, ihl)) != 0) return TnlPopResult::kBadIpChecksum;
    const uint32_t tot = ntoh16(load<be16>(ip + offsetof(Ipv4Header, tot_len)));
    if (tot > l3_size) return TnlPopResult::kTruncated;
    if (ihl != kIp4 || tot < ihl) return TnlPopResult::kBadIpHeader;  // options: not on tunnel packets (as OVS)
    if (ntoh16(load<be16>(ip + offsetof(Ipv4Header, frag_off))) & (kIpv4MoreFragments | kIpv4FragOffsetMask))
      return TnlPopResult::kIpFragment;
    proto = ip[offsetof(Ipv4Header, proto)];
    out.tunnel.ipv4_src = load<be32>(ip + offsetof(Ipv4Header, src));
    out.tunnel.ipv4_dst = load<be32>(ip + offsetof(Ipv4Header, dst));
    out.tunnel.tos = ip[offsetof(Ipv4Header, tos)];
    out.tunnel.ttl = ip[offsetof(Ipv4Header, ttl)];
    l4_off = kEth + kIp4;
    l4_len = tot - kIp4;
  } else if (dl_type == be16_const(kEthTypeIpv6)) {
    v6 = true;
    if (l3_size < kIp6) return TnlPopResult::kTruncated;
    const uint32_t vtc = ntoh32(load<be32>(ip));
    if ((vtc >> 28) != 6) return TnlPopResult::kBadIpHeader;
    const uint32_t plen = ntoh16(load<be16>(ip + offsetof(Ipv6Header, payload_len)));
    if (plen > l3_size - kIp6) return TnlPopResult::kTruncated;
    proto = ip[offsetof(Ipv6Header, next_header)];
    std::memcpy(&out.tunnel.ipv6_src, ip + offsetof(Ipv6Header, src), 16);
    std::memcpy(&out.tunnel.ipv6_dst, ip + offsetof(Ipv6Header, dst), 16);
    out.tunnel.tos = static_cast<uint8_t>(vtc >> 20);
    out.tunnel.ttl = ip[offsetof(Ipv6Header, hop_limit)];
    l4_off = kEth + kIp6;
    l4_len = plen;
  } else {
    return TnlPopResult::kNotIp;
  }
  const uint8_t* l4 = frame + l4_off;

  if (kind == TnlPopKind::kGre) {
    if (proto != kIpProtoGre) return TnlPopResult::kWrongProto;
    if (l4_len < 4) return TnlPopResult::kTruncated;
    const uint16_t flags = ntoh16(load<be16>(l4));
    if (flags & ~(kGreCsum | kGreKey | kGreSeq)) return TnlPopResult::kBadGre;  // version bits too
    const uint32_t glen = gre_header_len(flags);
    if (glen > l4_len) return TnlPopResult::kTruncated;
    if (load<be16>(l4 + 2) != be16_const(kEthTypeTeb)) return TnlPopResult::kBadGre;
    uint32_t opt = 4;
    if (flags & kGreCsum) {
      if (finish(sum_bytes(l4, l4_len)) != 0) return TnlPopResult::kBadGreChecksum;
      out.tunnel.flags = flow::kTunCsum;
      opt += 4;
    }
    if (flags & kGreKey) {
      out.tunnel.tun_id = hton64_of32(load<be32>(l4 + opt));
      out.tunnel.flags |= flow::kTunKey;
    }
    out.outer_len = l4_off + glen;
    return TnlPopResult::kOk;
  }

  if (proto != kIpProtoUdp) return TnlPopResult::kWrongProto;
  if (l4_len < kUdp + 8) return TnlPopResult::kTruncated;
  if (ntoh16(load<be16>(l4 + offsetof(UdpHeader, dst))) != udp_port) return TnlPopResult::kWrongPort;
  if (load<uint16_t>(l4 + offsetof(UdpHeader, csum)) != 0) {
    const uint32_t s = v6 ? pseudo6(ip, kIpProtoUdp, l4_len) : pseudo4(ip, kIpProtoUdp, l4_len);
    if (finish(sum_bytes(l4, l4_len, s)) != 0) return TnlPopResult::kBadUdpChecksum;
    out.tunnel.flags |= flow::kTunCsum;
  }
  out.tunnel.tp_src = load<be16>(l4 + offsetof(UdpHeader, src));
  out.tunnel.tp_dst = load<be16>(l4 + offsetof(UdpHeader, dst));
  const uint8_t* t = l4 + kUdp;
  if (kind == TnlPopKind::kVxlan) {
    if (load<be32>(t) != be32{hton32(kVxlanFlagI)} || (ntoh32(load<be32>(t + 4)) & 0xff))
      return TnlPopResult::kBadVxlanFlags;
    out.tunnel.tun_id = hton64_of32(hton32(ntoh32(load<be32>(t + 4)) >> 8));
    out.tunnel.flags |= flow::kTunKey;
    out.outer_len = l4_off + kUdp + sizeof(VxlanHeader);
    return TnlPopResult::kOk;
  }
  // GENEVE.
  const uint32_t opts = (t[0] & 0x3f) * 4u;
  if (kUdp + sizeof(GeneveHeader) + opts > l4_len) return TnlPopResult::kBadGeneveOpts;
  if ((t[0] >> 6) != 0 || load<be16>(t + 2) != be16_const(kEthTypeTeb)) return TnlPopResult::kBadGeneve;
  if (!geneve_opts_ok(t + sizeof(GeneveHeader), opts)) return TnlPopResult::kBadGeneveOpts;
  if (opts > kMaxKeyedTunOptWords * 8) return TnlPopResult::kGeneveOptsTooLong;
  if (t[1] & kGeneveFlagOam) out.tunnel.flags |= flow::kTunOam;
  out.tunnel.tun_id = hton64_of32(hton32(ntoh32(load<be32>(t + 4)) >> 8));
  out.tunnel.flags |= flow::kTunKey;
  out.tunnel.opt_len = opts;
  std::memset(out.opts, 0, (opts + 7) & ~7u);
  std::memcpy(out.opts, t + sizeof(GeneveHeader), opts);
  out.outer_len = l4_off + kUdp + sizeof(GeneveHeader) + opts;
  return TnlPopResult::kOk;
}

}  // namespace keel::packet

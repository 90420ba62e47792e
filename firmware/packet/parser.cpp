// The parser's implementation: specialized paths for the common shapes and
// one generic path for everything, as STYLE.md's "specialize at compile
// time, keep one generic path, test each against it".
//
//   * parse_fast_shape<kSwHash, kTagged, kIpv6>: Ethernet II with no tag or
//     one tag, IPv4 (options allowed, not a fragment) or IPv6 without
//     extension headers, a whole UDP or TCP header, no tunnel and no
//     metadata beyond in_port/recirc_id. Every check comes first, then
//     straight-line loads and pushes (IPv4/UDP: words 50, 59, 60, 64, 69,
//     74). parse_fast() picks the shape from the EtherType(s); anything it
//     does not cover returns false before writing anything that counts.
//     Every vlan-limit keys at least one tag and a fast shape's inner
//     EtherType is IP, so the fast paths do not depend on the limit; only
//     the generic path takes it (a second TPID is never a fast shape).
//   * extract() (the generic path): every header the parser knows, any
//     metadata, every malformed case; out of line (parse_generic) in the
//     burst loop so that the loop stays small. parse_frame() is the generic
//     path only, so the tests and the fuzzer compare the two on every frame.
//   * KeyBuilder<kHash>: MiniflowBuilder plus, when the NIC gave no usable
//     RSS hash, flow::miniflow_hash computed on the way — one CRC32 step per
//     word as soon as it is known, so the chain of dependent CRC32s (3
//     cycles each, 8 for IPv4/UDP) runs alongside the parsing instead of
//     after it.
//
// Measured on the bench VM (TSC cycles per 64-byte IPv4/UDP packet, burst
// of 32, min of 2000 rounds): one loop parsing then hashing ~62; hash
// interleaved ~27. Two things mattered as much as the algorithm: every
// push must inline (GCC left MiniflowBuilder::push and small lambdas out of
// line once the burst function grew — 200+ calls — hence [[gnu::flatten]]
// on the entry points), and one fast path with run-time shape flags was
// 1.5-2x slower than the per-shape instantiations (49 cycles against
// 26-32). A tunnel on the fast path cost the common shapes ~10% and gained
// the VXLAN case little, so decapsulated packets take the generic path.
//
// Per packet in a burst: one prefetch of the frame two packets ahead (about
// a cycle when the headers are already cached, an L3/DRAM miss saved when
// they come straight from the NIC), the fast path, and the generic path
// when the fast one declines. No allocation, lock or call on the fast path.
//
// Words are composed with shifts at each field's byte position in the
// FlowKey word (KEEL_FIELD_SHIFT below), which is the memory layout on a
// little-endian CPU — both of keel's targets (x86-64, AArch64) are. Cold
// helpers (ND options, IPv6 extension headers) return their words by value
// instead of pushing, so the builder never escapes into a call.
//
// Thread-safety: pure functions (see parser.h); ParserCounters are written
// only by their owner, once per burst.
#include "packet/parser.h"

#include <algorithm>
#include <bit>
#include <cassert>

#include "flow/flow_hash.h"
#include "packet/headers.h"

namespace keel::packet {

static_assert(std::endian::native == std::endian::little,
              "flow key words are composed with shifts that assume the little-endian layout of x86-64 "
              "and AArch64; a big-endian port must redo KEEL_FIELD_SHIFT");

namespace {

using flow::FlowKey;
using flow::MiniflowBuilder;

// Bit position of a FlowKey field inside its 64-bit word.
#define KEEL_FIELD_SHIFT(field) ((offsetof(::keel::flow::FlowKey, field) % 8) * 8)

constexpr unsigned kWordSkbPriority = KEEL_FLOW_WORD(skb_priority);
constexpr unsigned kWordDpHash = KEEL_FLOW_WORD(dp_hash);
constexpr unsigned kWordInPort = KEEL_FLOW_WORD(in_port);
constexpr unsigned kWordEthDst = KEEL_FLOW_WORD(dl_dst);
constexpr unsigned kWordEthSrcType = KEEL_FLOW_WORD(dl_type);
constexpr unsigned kWordVlans = KEEL_FLOW_WORD(vlans);
constexpr unsigned kWordNwAddrs = KEEL_FLOW_WORD(nw_src);
constexpr unsigned kWordIpv6Src = KEEL_FLOW_WORD(ipv6_src);
constexpr unsigned kWordIpv6Dst = KEEL_FLOW_WORD(ipv6_dst);
constexpr unsigned kWordNw = KEEL_FLOW_WORD(nw_proto);
constexpr unsigned kWordNdTarget = KEEL_FLOW_WORD(nd_target);
constexpr unsigned kWordArpSha = KEEL_FLOW_WORD(arp_sha);
constexpr unsigned kWordArpTha = KEEL_FLOW_WORD(arp_tha);
constexpr unsigned kWordPorts = KEEL_FLOW_WORD(tp_src);

static_assert(kWordInPort == KEEL_FLOW_WORD(recirc_id) && kWordSkbPriority == KEEL_FLOW_WORD(pkt_mark),
              "metadata pairs share a word");
static_assert(kWordEthDst + 1 == kWordEthSrcType && offsetof(FlowKey, dl_src) == kWordEthDst * 8 + 6,
              "word 59 is the frame's first 8 bytes; word 60 bytes 0-3 are frame bytes 8-11");
static_assert(kWordIpv6Dst == kWordIpv6Src + 2 && kWordNw == KEEL_FLOW_WORD(ipv6_label) &&
                  kWordArpSha == KEEL_FLOW_WORD(tcp_flags) && KEEL_FLOW_WORD(tp_dst) == kWordPorts,
              "the words the parser composes");
static_assert(KEEL_FIELD_SHIFT(tp_src) == 0 && KEEL_FIELD_SHIFT(tp_dst) == 16,
              "word 74 starts with the ports, as TCP/UDP/SCTP headers do: one 4-byte load");
static_assert(KEEL_FIELD_SHIFT(nw_src) == 0 && KEEL_FIELD_SHIFT(nw_dst) == 32,
              "word 64 is src then dst, as in the IPv4 header: one 8-byte load");
static_assert(KEEL_FIELD_SHIFT(vlans) == 0 && sizeof(flow::VlanHdr) == sizeof(VlanTag),
              "word 61 holds the tags as on the wire (tpid, tci), outer first");

// CFI bit (0x1000 of the TCI) in a tag loaded as it sits in memory.
constexpr uint32_t kTagCfi = uint32_t{be16_const(kVlanCfi)} << (8 * offsetof(VlanTag, tci));

// Frames are parsed over at most kMaxParsedLen bytes, so every offset fits
// a uint16_t below LayerOffsets::kNone.
static_assert(kMaxParsedLen < LayerOffsets::kNone, "offsets fit a uint16_t with kNone to spare");

constexpr bool is_vlan_tpid(be16 t) { return t == be16_const(kEthTypeVlan) || t == be16_const(kEthTypeQinQ); }

constexpr bool is_ipv6_ext(uint8_t proto) {
  constexpr uint64_t kExt = (uint64_t{1} << kIpProtoHopOpts) | (uint64_t{1} << kIpProtoRouting) |
                            (uint64_t{1} << kIpProtoFragment) | (uint64_t{1} << kIpProtoAh) |
                            (uint64_t{1} << kIpProtoDstOpts);
  return proto < 64 && ((kExt >> proto) & 1);
}

// A MAC as the low 48 bits of a word (arp_sha / arp_tha / nd_sll / nd_tll).
inline uint64_t load_mac(const uint8_t* p) {
  return load<uint32_t>(p) | (uint64_t{load<uint16_t>(p + 4)} << 32);
}

// Word 69: ipv6_label, nw_frag, nw_tos, nw_ttl, nw_proto.
inline uint64_t nw_word(be32 label, uint8_t frag, uint8_t tos, uint8_t ttl, uint8_t proto) {
  return (uint64_t{label} << KEEL_FIELD_SHIFT(ipv6_label)) | (uint64_t{frag} << KEEL_FIELD_SHIFT(nw_frag)) |
         (uint64_t{tos} << KEEL_FIELD_SHIFT(nw_tos)) | (uint64_t{ttl} << KEEL_FIELD_SHIFT(nw_ttl)) |
         (uint64_t{proto} << KEEL_FIELD_SHIFT(nw_proto));
}

// ICMP type/code as OVS keys them: 16-bit network-order tp_src / tp_dst.
inline uint64_t icmp_ports(uint8_t type, uint8_t code) {
  return (uint64_t{be16_const(type)} << KEEL_FIELD_SHIFT(tp_src)) |
         (uint64_t{be16_const(code)} << KEEL_FIELD_SHIFT(tp_dst));
}

// 802.3 frame: the EtherType of LLC/SNAP with OUI 0, else kDlTypeNone.
// `off` is just past the length field; advanced past the LLC/SNAP header
// when there is one (as OVS, even when its type is < 0x600).
[[gnu::always_inline]] inline be16 parse_llc_snap(const uint8_t* frame, uint32_t len, uint32_t& off) {
  if (len - off < sizeof(LlcSnapHeader)) return be16_const(kDlTypeNone);
  const uint8_t* p = frame + off;
  if (p[0] != kLlcSapSnap || p[1] != kLlcSapSnap || p[2] != kLlcControlUi || (p[3] | p[4] | p[5]) != 0)
    return be16_const(kDlTypeNone);
  off += sizeof(LlcSnapHeader);
  const be16 type = load<be16>(p + offsetof(LlcSnapHeader, type));
  return ntoh16(type) >= kEthTypeMin ? type : be16_const(kDlTypeNone);
}

// What a Neighbor Solicitation / Advertisement adds to the key.
struct NdWords {
  uint64_t target[2];
  uint64_t sll_and_type;  // word 72: nd_sll, tcp_flags = first link-layer option type (OVS: nd_options_type)
  uint64_t tll;           // word 73
  bool have_target;
  bool ok;
};

// The body of an NS/NA (code 0) after its Icmp6Header, `rem` bytes: the
// target and the link-layer address options, as OVS's parse_icmpv6().
// Cold, and returns its words rather than pushing them so that the
// MiniflowBuilder of the fast path never escapes (its counter stays in a
// register).
[[gnu::noinline]] NdWords parse_nd(const uint8_t* p, uint32_t rem) {
  NdWords nd{};
  nd.ok = true;
  nd.have_target = rem >= sizeof(NdTarget);
  if (!nd.have_target) {
    nd.ok = false;  // truncated target
    return nd;
  }
  nd.target[0] = load<uint64_t>(p);
  nd.target[1] = load<uint64_t>(p + 8);
  p += sizeof(NdTarget);
  rem -= sizeof(NdTarget);
  uint64_t sll = 0, tll = 0;
  uint8_t opt_type = 0;
  bool seen_sll = false, seen_tll = false;
  while (rem >= kNdOptUnit) {  // each option >= 8 bytes: at most rem/8 rounds
    const uint32_t opt_len = uint32_t{p[offsetof(NdLinkLayerOption, len)]} * kNdOptUnit;
    if (opt_len == 0 || opt_len > rem) {  // keep what was parsed (as OVS), but count it
      nd.ok = false;
      break;
    }
    const uint8_t opt = p[offsetof(NdLinkLayerOption, type)];
    if (opt_len == sizeof(NdLinkLayerOption) &&
        (opt == kNdOptSourceLinkAddr || opt == kNdOptTargetLinkAddr)) {
      bool& seen = opt == kNdOptSourceLinkAddr ? seen_sll : seen_tll;
      if (seen) {  // a repeated option invalidates the message: key neither target nor addresses (as OVS)
        nd.ok = nd.have_target = false;
        return nd;
      }
      seen = true;
      (opt == kNdOptSourceLinkAddr ? sll : tll) = load_mac(p + offsetof(NdLinkLayerOption, mac));
      if (opt_type == 0) opt_type = opt;
    }
    p += opt_len;
    rem -= opt_len;
  }
  nd.sll_and_type = sll | (uint64_t{be16_const(opt_type)} << KEEL_FIELD_SHIFT(tcp_flags));
  nd.tll = tll;
  return nd;
}

// ICMPv6 (at least sizeof(Icmp6Header) bytes at l4): word 74, and for
// NS/NA words 70-73.
template <typename Builder>
[[gnu::always_inline]] inline bool extract_icmpv6(const uint8_t* l4, uint32_t size, Builder& b) {
  const uint8_t type = l4[offsetof(Icmp6Header, type)];
  const uint8_t code = l4[offsetof(Icmp6Header, code)];
  const uint64_t ports = icmp_ports(type, code);
  if (code != 0 || (type != kIcmp6NeighborSolicit && type != kIcmp6NeighborAdvert)) {
    b.push(kWordPorts, ports);
    return true;
  }
  const NdWords nd = parse_nd(l4 + sizeof(Icmp6Header), size - sizeof(Icmp6Header));
  if (nd.have_target) {
    b.push(kWordNdTarget, nd.target[0]);
    b.push(kWordNdTarget + 1, nd.target[1]);
  }
  b.push(kWordArpSha, nd.sll_and_type);
  b.push(kWordArpTha, nd.tll);
  b.push(kWordPorts, ports);
  return nd.ok;
}

// L4 header at frame+off with `size` bytes of IP payload: word 72 (TCP
// flags) and 74 (ports / ICMP type, code).
template <typename Builder>
[[gnu::always_inline]] inline bool extract_l4(uint8_t proto, const uint8_t* frame, uint32_t off,
                                              uint32_t size, Builder& b, LayerOffsets& ofs) {
  const uint8_t* l4 = frame + off;
  if (proto == kIpProtoUdp) [[likely]] {
    if (size < sizeof(UdpHeader)) [[unlikely]]
      return false;
    b.push(kWordPorts, load<uint32_t>(l4));
    ofs.payload = static_cast<uint16_t>(off + sizeof(UdpHeader));
    return true;
  }
  if (proto == kIpProtoTcp) [[likely]] {
    if (size < kTcpMinHeaderLen) [[unlikely]]
      return false;
    const be16 ctl = load<be16>(l4 + offsetof(TcpHeader, ctl));
    const uint32_t hdr_len = (ntoh16(ctl) >> 12) * 4u;
    if (hdr_len < kTcpMinHeaderLen || hdr_len > size) [[unlikely]]
      return false;
    b.push(kWordArpSha,
           uint64_t{static_cast<be16>(ctl & be16_const(kTcpFlagsMask))} << KEEL_FIELD_SHIFT(tcp_flags));
    b.push(kWordPorts, load<uint32_t>(l4));
    ofs.payload = static_cast<uint16_t>(off + hdr_len);
    return true;
  }
  switch (proto) {
    case kIpProtoSctp:
      if (size < sizeof(SctpHeader)) return false;
      b.push(kWordPorts, load<uint32_t>(l4));
      ofs.payload = static_cast<uint16_t>(off + sizeof(SctpHeader));
      return true;
    case kIpProtoIcmp:
      if (size < sizeof(IcmpHeader)) return false;
      b.push(kWordPorts, icmp_ports(l4[offsetof(IcmpHeader, type)], l4[offsetof(IcmpHeader, code)]));
      ofs.payload = static_cast<uint16_t>(off + sizeof(IcmpHeader));
      return true;
    case kIpProtoIcmpv6:
      if (size < sizeof(Icmp6Header)) return false;
      ofs.payload = static_cast<uint16_t>(off + sizeof(Icmp6Header));
      return extract_icmpv6(l4, size, b);
    default:
      return true;  // a protocol without ports: nothing more to parse
  }
}

template <typename Builder>
[[gnu::always_inline]] inline bool extract_ipv4(const uint8_t* frame, uint32_t off, uint32_t size, Builder& b,
                                                LayerOffsets& ofs) {
  const uint8_t* l3 = frame + off;
  if (size < kIpv4MinHeaderLen) [[unlikely]]
    return false;
  const uint32_t ihl = (l3[offsetof(Ipv4Header, ver_ihl)] & 0x0fu) * 4u;
  const uint32_t tot_len = ntoh16(load<be16>(l3 + offsetof(Ipv4Header, tot_len)));
  if (ihl < kIpv4MinHeaderLen || ihl > size || tot_len > size || tot_len < ihl) [[unlikely]]
    return false;
  ofs.l2_pad = static_cast<uint16_t>(size - tot_len);

  b.push(kWordNwAddrs, load<uint64_t>(l3 + offsetof(Ipv4Header, src)));
  const be16 frag_off = load<be16>(l3 + offsetof(Ipv4Header, frag_off));
  uint8_t frag = 0;
  if (frag_off & be16_const(kIpv4MoreFragments | kIpv4FragOffsetMask)) [[unlikely]] {
    frag = flow::kFragAny;
    if (frag_off & be16_const(kIpv4FragOffsetMask)) frag |= flow::kFragLater;
  }
  const uint8_t proto = l3[offsetof(Ipv4Header, proto)];
  b.push(kWordNw, nw_word(0, frag, l3[offsetof(Ipv4Header, tos)], l3[offsetof(Ipv4Header, ttl)], proto));

  off += ihl;
  ofs.l4 = static_cast<uint16_t>(off);
  if (frag & flow::kFragLater) [[unlikely]]
    return true;  // later fragments carry no L4 header
  return extract_l4(proto, frame, off, tot_len - ihl, b, ofs);
}

// Where the IPv6 extension headers end.
struct Ipv6Upper {
  uint32_t off;   // the upper-layer header
  uint32_t size;  // bytes of payload from there
  uint8_t proto;  // upper-layer protocol (44 for a later fragment, as OVS)
  uint8_t frag;   // nw_frag
  bool ok;        // false: a header runs off the end
};

// Walks IPv6 extension headers from frame+off (`size` bytes of payload
// left) to the upper-layer protocol, as OVS's parse_ipv6_ext_hdrs__(). A
// later fragment stops the walk with proto = 44 (Fragment), as OVS keys it.
// Cold; returns by value so the fast path's locals never escape.
[[gnu::noinline]] Ipv6Upper walk_ipv6_ext(const uint8_t* frame, uint32_t off, uint32_t size, uint8_t proto) {
  Ipv6Upper r{off, size, proto, 0, false};
  while (is_ipv6_ext(r.proto)) {  // each header >= 8 bytes: at most size/8 rounds
    if (r.size < sizeof(Ipv6ExtHeader)) return r;
    const uint8_t* h = frame + r.off;
    const uint8_t next = h[offsetof(Ipv6ExtHeader, next_header)];
    uint32_t hdr_len;
    if (r.proto == kIpProtoFragment) {
      hdr_len = sizeof(Ipv6FragHeader);
      const be16 offlg = load<be16>(h + offsetof(Ipv6FragHeader, offlg));
      if (offlg != 0) {
        r.frag = flow::kFragAny;
        if (offlg & be16_const(kIpv6FragOffsetMask)) {
          r.frag |= flow::kFragLater;
          r.off += hdr_len;
          r.size -= hdr_len;
          r.ok = true;
          return r;  // proto stays 44: the upper layer is in the first fragment
        }
      }
    } else if (r.proto == kIpProtoAh) {
      hdr_len = (uint32_t{h[offsetof(Ipv6ExtHeader, len)]} + 2) * 4;
    } else {
      hdr_len = (uint32_t{h[offsetof(Ipv6ExtHeader, len)]} + 1) * 8;
    }
    if (hdr_len > r.size) return r;
    r.off += hdr_len;
    r.size -= hdr_len;
    r.proto = next;
  }
  r.ok = true;
  return r;
}

template <typename Builder>
[[gnu::always_inline]] inline bool extract_ipv6(const uint8_t* frame, uint32_t off, uint32_t size, Builder& b,
                                                LayerOffsets& ofs) {
  const uint8_t* l3 = frame + off;
  if (size < sizeof(Ipv6Header)) [[unlikely]]
    return false;
  const uint32_t plen = ntoh16(load<be16>(l3 + offsetof(Ipv6Header, payload_len)));
  if (plen > size - sizeof(Ipv6Header)) [[unlikely]]
    return false;
  ofs.l2_pad = static_cast<uint16_t>(size - sizeof(Ipv6Header) - plen);

  const uint8_t* src = l3 + offsetof(Ipv6Header, src);
  b.push(kWordIpv6Src, load<uint64_t>(src));
  b.push(kWordIpv6Src + 1, load<uint64_t>(src + 8));
  b.push(kWordIpv6Dst, load<uint64_t>(src + 16));
  b.push(kWordIpv6Dst + 1, load<uint64_t>(src + 24));

  const be32 vtc_flow = load<be32>(l3 + offsetof(Ipv6Header, vtc_flow));
  const uint8_t tos = static_cast<uint8_t>(ntoh32(vtc_flow) >> 20);
  const be32 label = vtc_flow & hton32(kIpv6FlowLabelMask);
  const uint8_t ttl = l3[offsetof(Ipv6Header, hop_limit)];
  uint8_t proto = l3[offsetof(Ipv6Header, next_header)];
  uint8_t frag = 0;
  off += sizeof(Ipv6Header);
  size = plen;
  if (is_ipv6_ext(proto)) [[unlikely]] {
    const Ipv6Upper up = walk_ipv6_ext(frame, off, size, proto);
    if (!up.ok) return false;  // no word 69, as OVS
    off = up.off;
    size = up.size;
    proto = up.proto;
    frag = up.frag;
  }
  b.push(kWordNw, nw_word(label, frag, tos, ttl, proto));
  ofs.l4 = static_cast<uint16_t>(off);
  if (frag & flow::kFragLater) [[unlikely]]
    return true;
  return extract_l4(proto, frame, off, size, b, ofs);
}

// ARP/RARP for Ethernet/IPv4; other hardware/protocol types are not keyed
// (not malformed either). Always inlined: the fast path's builder must not
// escape into a call.
template <typename Builder>
[[gnu::always_inline]] inline bool extract_arp(const uint8_t* l3, uint32_t size, Builder& b) {
  if (size < sizeof(ArpEthHeader)) return false;
  if (load<be16>(l3 + offsetof(ArpEthHeader, hrd)) != be16_const(kArpHrdEthernet) ||
      load<be16>(l3 + offsetof(ArpEthHeader, pro)) != be16_const(kEthTypeIpv4) ||
      l3[offsetof(ArpEthHeader, hln)] != kEthAddrLen || l3[offsetof(ArpEthHeader, pln)] != 4)
    return true;
  b.push(kWordNwAddrs, load<uint32_t>(l3 + offsetof(ArpEthHeader, spa)) |
                           (uint64_t{load<uint32_t>(l3 + offsetof(ArpEthHeader, tpa))} << 32));
  const uint16_t op = ntoh16(load<be16>(l3 + offsetof(ArpEthHeader, op)));
  if (op <= 0xff)
    b.push(kWordNw, nw_word(0, 0, 0, 0, static_cast<uint8_t>(op)));  // OVS keys the low 8 bits only
  b.push(kWordArpSha, load_mac(l3 + offsetof(ArpEthHeader, sha)));
  b.push(kWordArpTha, load_mac(l3 + offsetof(ArpEthHeader, tha)));
  return true;
}

// The frame (L2 and up) after the metadata words.
// `max_vlans` (1 or kMaxVlanTags, see vlan_tags()) is how many tags are
// keyed; the TPID after them is dl_type, as OVS's parse_vlan() under its
// vlan-limit.
template <typename Builder>
[[gnu::always_inline]] inline bool extract_frame(const uint8_t* frame, uint32_t len, Builder& b,
                                                 LayerOffsets& ofs, unsigned max_vlans) {
  ofs = LayerOffsets{};
  if (len < sizeof(EthHeader)) [[unlikely]]
    return false;  // a runt: metadata only
  ofs.l2 = 0;

  uint32_t off = offsetof(EthHeader, type);
  be16 type = load<be16>(frame + off);
  uint64_t vlans = 0;
  bool ok = true;
  if (is_vlan_tpid(type)) [[unlikely]] {
    ofs.l2_5 = static_cast<uint16_t>(off);
    unsigned n = 0;
    do {
      if (len - off < sizeof(VlanTag) + sizeof(be16)) {  // the tag and the EtherType after it
        ok = false;                                      // dl_type stays the TPID, as OVS
        break;
      }
      vlans |= uint64_t{load<uint32_t>(frame + off) | kTagCfi} << (32 * n);
      off += sizeof(VlanTag);
      type = load<be16>(frame + off);
    } while (++n < max_vlans && is_vlan_tpid(type));
    // A tag beyond the limit is not keyed: its TPID becomes dl_type (as OVS).
  }
  off += sizeof(be16);
  if (ntoh16(type) < kEthTypeMin) [[unlikely]]
    type = parse_llc_snap(frame, len, off);

  b.push(kWordEthDst, load<uint64_t>(frame));
  b.push(kWordEthSrcType, load<uint32_t>(frame + 8) | (uint64_t{type} << KEEL_FIELD_SHIFT(dl_type)));
  if (vlans) [[unlikely]]
    b.push(kWordVlans, vlans);
  ofs.l3 = static_cast<uint16_t>(off);
  if (!ok) [[unlikely]]
    return false;

  if (type == be16_const(kEthTypeIpv4)) [[likely]]
    return extract_ipv4(frame, off, len - off, b, ofs);
  if (type == be16_const(kEthTypeIpv6)) return extract_ipv6(frame, off, len - off, b, ofs);
  if (type == be16_const(kEthTypeArp) || type == be16_const(kEthTypeRarp))
    return extract_arp(frame + off, len - off, b);
  return true;
}

// The metadata words, as plain values (so the rx path reads them straight
// from the hal::Packet without building a PacketMetadata).
struct MetaWords {
  uint32_t in_port, recirc_id, skb_priority, pkt_mark, dp_hash;
  const TunnelMetadata* tunnel;  // nullptr: not decapsulated
  const uint8_t* tun_opts;       // GENEVE option bytes (tunnel->opt_len), or nullptr
};

[[gnu::always_inline]] inline MetaWords meta_words(const PacketMetadata& md) {
  const bool tun = md.tunnel.is_set();
  return {md.in_port, md.recirc_id, md.skb_priority, md.pkt_mark, md.dp_hash, tun ? &md.tunnel : nullptr,
          tun ? md.tun_opts : nullptr};
}

[[gnu::always_inline]] inline MetaWords meta_words(const hal::Packet& p) {
  const hal::PacketMeta& m = p.meta();
  return {p.in_port(), m.recirc_id, 0, m.pkt_mark, m.dp_hash, nullptr, nullptr};
}

// A MiniflowBuilder that, with kHash, also runs flow::miniflow_hash as it
// goes: one CRC step per pushed word as soon as the word is known (so the
// chain of dependent CRC32s, 3 cycles each, overlaps the parsing instead of
// trailing it), the map kept in a register (a constant once inlined into a
// fast path). hash() adds the map and the length exactly as miniflow_hash
// does (tests compare them). push() must inline (see the top of the file).
template <bool kHash>
class KeyBuilder {
 public:
  explicit KeyBuilder(flow::Miniflow& mf) : b_(mf) {}
  [[gnu::always_inline]] void push(unsigned w, uint64_t v) {
    b_.push(w, v);
    if constexpr (kHash) {
      map_.set(w);
      h_ = hash_add64(h_, v);
    }
  }
  [[gnu::always_inline]] uint32_t hash() const {
    static_assert(kHash);
    uint32_t h = hash_add64(h_, map_.u0);
    h = hash_add64(h, map_.u1);
    return hash_finish(h, (map_.count() + 2) * 8);
  }

 private:
  MiniflowBuilder b_;
  flow::FlowMap map_;
  uint32_t h_ = 0;
};

// The generic path: metadata words, then the frame.
template <typename Builder>
[[gnu::always_inline]] inline bool extract(const uint8_t* frame, uint32_t len, const MetaWords& md,
                                           Builder& b, LayerOffsets& ofs, unsigned max_vlans) {
  if (md.tunnel) [[unlikely]] {
    const uint64_t* w = md.tunnel->words();
    for (unsigned i = 0; i < TunnelMetadata::kWords; ++i) b.push(i, w[i]);
    if (md.tun_opts && md.tunnel->opt_len) {
      // GENEVE options: words 8.. (zero words too: the option length is in word 7).
      const unsigned n = std::min<unsigned>((md.tunnel->opt_len + 7) / 8, kMaxKeyedTunOptWords);
      for (unsigned i = 0; i < n; ++i) {
        uint64_t v;
        std::memcpy(&v, md.tun_opts + 8 * i, 8);
        b.push(TunnelMetadata::kWords + i, v);
      }
    }
  }
  if (md.skb_priority | md.pkt_mark) [[unlikely]]
    b.push(kWordSkbPriority, md.skb_priority | (uint64_t{md.pkt_mark} << KEEL_FIELD_SHIFT(pkt_mark)));
  if (md.dp_hash) [[unlikely]]
    b.push(kWordDpHash, md.dp_hash);
  b.push(kWordInPort, md.in_port | (uint64_t{md.recirc_id} << KEEL_FIELD_SHIFT(recirc_id)));
  return extract_frame(frame, std::min(len, kMaxParsedLen), b, ofs, max_vlans);
}

// Whether the NIC's RSS hash can serve as the EMC/SMC hash (see parser.h).
[[gnu::always_inline]] inline bool rss_usable(const hal::Packet& p, const MetaWords& md) {
  return p.has_rss_hash() && md.recirc_id == 0 && md.tunnel == nullptr;
}

// The generic path for one packet: any shape, any metadata. Returns true
// when the hash was computed in software. Takes the metadata's source (the
// packet itself on the rx path, or a PacketMetadata) rather than MetaWords,
// so the burst loop never has to build MetaWords in memory for the call.
template <typename MetaSrc>
[[gnu::noinline, gnu::flatten]] bool parse_generic(const hal::Packet& p, const MetaSrc& src,
                                                   ParsedPacket& out, unsigned max_vlans) {
  const MetaWords md = meta_words(src);
  if (rss_usable(p, md)) {
    KeyBuilder<false> b(out.key);
    out.malformed = !extract(p.data(), p.len(), md, b, out.ofs, max_vlans);
    out.hash = p.rss_hash();
    return false;
  }
  KeyBuilder<true> b(out.key);
  out.malformed = !extract(p.data(), p.len(), md, b, out.ofs, max_vlans);
  out.hash = b.hash();
  return true;
}

// The specialized paths for the common shapes, one straight-line
// instantiation each: Ethernet II with no tag or one 802.1Q/802.1ad tag
// (kTagged), IPv4 with options but not a fragment, or IPv6 without
// extension headers (kIpv6); a whole UDP or TCP header; no tunnel and no
// metadata beyond in_port and recirc_id. Every check comes first; anything
// else returns false having written nothing that counts, and the caller
// takes the generic path. It must produce exactly what the generic path
// produces: tests compare the two on every frame they build, and so does
// the fuzzer.
//
// kSwHash: compute flow::miniflow_hash on the way (KeyBuilder<true>).
template <bool kSwHash, bool kTagged, bool kIpv6>
[[gnu::always_inline]] inline bool parse_fast_shape(const hal::Packet& p, const MetaWords& md,
                                                    ParsedPacket& out) {
  constexpr uint32_t kTypeOff = offsetof(EthHeader, type) + (kTagged ? sizeof(VlanTag) : 0);
  constexpr uint32_t kL3 = kTypeOff + sizeof(be16);
  const uint8_t* const frame = p.data();
  const uint32_t len = p.len();
  const uint8_t* const ip = frame + kL3;
  const uint32_t size = len - kL3;  // the caller checked len >= kL3
  uint32_t l4_off, l4_size, pad;
  uint8_t proto;
  if constexpr (!kIpv6) {
    if (size < kIpv4MinHeaderLen) return false;
    const uint32_t ihl = (ip[offsetof(Ipv4Header, ver_ihl)] & 0x0fu) * 4u;
    const uint32_t tot_len = ntoh16(load<be16>(ip + offsetof(Ipv4Header, tot_len)));
    if (ihl < kIpv4MinHeaderLen || tot_len > size || tot_len < ihl) return false;
    if (load<be16>(ip + offsetof(Ipv4Header, frag_off)) &
        be16_const(kIpv4MoreFragments | kIpv4FragOffsetMask))
      return false;
    proto = ip[offsetof(Ipv4Header, proto)];
    l4_off = kL3 + ihl;
    l4_size = tot_len - ihl;
    pad = size - tot_len;
  } else {
    if (size < sizeof(Ipv6Header)) return false;
    const uint32_t plen = ntoh16(load<be16>(ip + offsetof(Ipv6Header, payload_len)));
    if (plen > size - sizeof(Ipv6Header)) return false;
    proto = ip[offsetof(Ipv6Header, next_header)];  // UDP or TCP below: no extension headers
    l4_off = kL3 + sizeof(Ipv6Header);
    l4_size = plen;
    pad = size - sizeof(Ipv6Header) - plen;
  }
  const uint8_t* const l4 = frame + l4_off;
  uint32_t l4_len;
  be16 tcp_flags = 0;
  if (proto == kIpProtoUdp) [[likely]] {
    if (l4_size < sizeof(UdpHeader)) return false;
    l4_len = sizeof(UdpHeader);
  } else if (proto == kIpProtoTcp) {
    if (l4_size < kTcpMinHeaderLen) return false;
    const be16 ctl = load<be16>(l4 + offsetof(TcpHeader, ctl));
    l4_len = (ntoh16(ctl) >> 12) * 4u;
    if (l4_len < kTcpMinHeaderLen || l4_len > l4_size) return false;
    tcp_flags = static_cast<be16>(ctl & be16_const(kTcpFlagsMask));
  } else {
    return false;
  }

  // Checked: push the words in order (and hash them on the way).
  KeyBuilder<kSwHash> b(out.key);
  b.push(kWordInPort, md.in_port | (uint64_t{md.recirc_id} << KEEL_FIELD_SHIFT(recirc_id)));
  b.push(kWordEthDst, load<uint64_t>(frame));
  const be16 type = load<be16>(frame + kTypeOff);
  b.push(kWordEthSrcType, load<uint32_t>(frame + 8) | (uint64_t{type} << KEEL_FIELD_SHIFT(dl_type)));
  if constexpr (kTagged) b.push(kWordVlans, load<uint32_t>(frame + offsetof(EthHeader, type)) | kTagCfi);
  if constexpr (!kIpv6) {
    b.push(kWordNwAddrs, load<uint64_t>(ip + offsetof(Ipv4Header, src)));
    b.push(kWordNw, nw_word(0, 0, ip[offsetof(Ipv4Header, tos)], ip[offsetof(Ipv4Header, ttl)], proto));
  } else {
    const uint8_t* src = ip + offsetof(Ipv6Header, src);
    b.push(kWordIpv6Src, load<uint64_t>(src));
    b.push(kWordIpv6Src + 1, load<uint64_t>(src + 8));
    b.push(kWordIpv6Dst, load<uint64_t>(src + 16));
    b.push(kWordIpv6Dst + 1, load<uint64_t>(src + 24));
    const be32 vtc_flow = load<be32>(ip + offsetof(Ipv6Header, vtc_flow));
    b.push(kWordNw,
           nw_word(vtc_flow & hton32(kIpv6FlowLabelMask), 0, static_cast<uint8_t>(ntoh32(vtc_flow) >> 20),
                   ip[offsetof(Ipv6Header, hop_limit)], proto));
  }
  if (proto == kIpProtoTcp) b.push(kWordArpSha, uint64_t{tcp_flags} << KEEL_FIELD_SHIFT(tcp_flags));
  b.push(kWordPorts, load<uint32_t>(l4));

  out.ofs = {0,
             kTagged ? static_cast<uint16_t>(offsetof(EthHeader, type)) : LayerOffsets::kNone,
             kL3,
             static_cast<uint16_t>(l4_off),
             static_cast<uint16_t>(l4_off + l4_len),
             static_cast<uint16_t>(pad)};
  out.malformed = false;
  if constexpr (kSwHash) {
    out.hash = b.hash();
  } else {
    out.hash = p.rss_hash();
  }
  return true;
}

// Picks the specialization for the frame's L2/L3 shape; false when none
// applies (the generic path then parses the packet).
template <bool kSwHash>
[[gnu::always_inline]] inline bool parse_fast(const hal::Packet& p, const MetaWords& md, ParsedPacket& out) {
  if (md.tunnel != nullptr || (md.skb_priority | md.pkt_mark | md.dp_hash) != 0) return false;
  const uint32_t len = p.len();
  constexpr uint32_t kTagged = sizeof(EthHeader) + sizeof(VlanTag);
  if (len < kTagged || len > kMaxParsedLen) [[unlikely]]
    return false;  // < 18: too short for IP anyway
  const uint8_t* const frame = p.data();
  const be16 type = load<be16>(frame + offsetof(EthHeader, type));
  if (type == be16_const(kEthTypeIpv4)) [[likely]]
    return parse_fast_shape<kSwHash, false, false>(p, md, out);
  if (type == be16_const(kEthTypeIpv6)) return parse_fast_shape<kSwHash, false, true>(p, md, out);
  if (!is_vlan_tpid(type)) return false;
  const be16 inner = load<be16>(frame + offsetof(EthHeader, type) + sizeof(VlanTag));
  if (inner == be16_const(kEthTypeIpv4)) return parse_fast_shape<kSwHash, true, false>(p, md, out);
  if (inner == be16_const(kEthTypeIpv6)) return parse_fast_shape<kSwHash, true, true>(p, md, out);
  return false;
}

// One packet, fast path first; true when hashed in software. `src` is
// where the metadata comes from: the packet (rx path) or a PacketMetadata.
template <typename MetaSrc>
[[gnu::always_inline]] inline bool parse_one(const hal::Packet& p, const MetaSrc& src, ParsedPacket& out,
                                             unsigned max_vlans) {
  const MetaWords md = meta_words(src);
  if (rss_usable(p, md)) {
    if (parse_fast<false>(p, md, out)) [[likely]]
      return false;
  } else {
    if (parse_fast<true>(p, md, out)) [[likely]]
      return true;
  }
  return parse_generic(p, src, out, max_vlans);
}

// The burst loop; meta_of(i, p) gives packet i's metadata source.
template <typename MetaOf>
[[gnu::always_inline]] inline unsigned parse_burst_impl(std::span<hal::Packet* const> pkts,
                                                        std::span<ParsedPacket> out, ParserCounters& counters,
                                                        unsigned max_vlans, MetaOf meta_of) {
  assert(pkts.size() <= hal::kMaxBurst && out.size() >= pkts.size());
  const size_t n = pkts.size();
  unsigned bad = 0, sw = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i + 2 < n) __builtin_prefetch(pkts[i + 2]->data());
    const hal::Packet& p = *pkts[i];
    sw += parse_one(p, meta_of(i, p), out[i], max_vlans);
    bad += out[i].malformed;
  }
  counters.add(n, bad, sw);
  return bad;
}

}  // namespace

[[gnu::flatten]] bool parse_frame(const uint8_t* frame, uint32_t len, const PacketMetadata& md,
                                  flow::Miniflow& key, LayerOffsets& ofs, unsigned vlan_limit) noexcept {
  KeyBuilder<false> b(key);
  return extract(frame, len, meta_words(md), b, ofs, vlan_tags(vlan_limit));
}

[[gnu::flatten]] bool parse(const hal::Packet& p, const PacketMetadata& md, ParsedPacket& out,
                            unsigned vlan_limit) noexcept {
  parse_one(p, md, out, vlan_tags(vlan_limit));
  return !out.malformed;
}

[[gnu::flatten]] bool parse(const hal::Packet& p, ParsedPacket& out, unsigned vlan_limit) noexcept {
  parse_one(p, p, out, vlan_tags(vlan_limit));
  return !out.malformed;
}

[[gnu::flatten]] unsigned parse_burst(std::span<hal::Packet* const> pkts, std::span<ParsedPacket> out,
                                      ParserCounters& counters, unsigned vlan_limit) noexcept {
  return parse_burst_impl(pkts, out, counters, vlan_tags(vlan_limit),
                          [](size_t, const hal::Packet& p) -> const hal::Packet& { return p; });
}

[[gnu::flatten]] unsigned parse_burst(std::span<hal::Packet* const> pkts, std::span<const PacketMetadata> md,
                                      std::span<ParsedPacket> out, ParserCounters& counters,
                                      unsigned vlan_limit) noexcept {
  assert(md.size() >= pkts.size());
  return parse_burst_impl(pkts, out, counters, vlan_tags(vlan_limit),
                          [md](size_t i, const hal::Packet&) -> const PacketMetadata& { return md[i]; });
}

}  // namespace keel::packet

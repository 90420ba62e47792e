// Header layouts: the wire formats the parser reads and the actions rewrite.
//
// Each header is a packed struct whose fields sit at their wire offsets
// (checked below with static_asserts), holding multi-byte fields in network
// byte order exactly as on the wire. Code that reads a frame never casts a
// frame pointer to these structs: it loads a field with
// `load<T>(p + offsetof(Header, field))` (a memcpy the compiler turns into one
// unaligned load), so nothing depends on the frame's alignment or on the
// aliasing rules. Code that builds a header (tnl_push, header builders) may
// fill a struct and memcpy it out.
//
// Byte order: `be16`/`be32` values stay in network order end to end (the
// flow key stores them as on the wire). Compare them against `be16_const()`
// constants rather than swapping every loaded field; swap with `ntoh16()`
// only where a value is used as a number (lengths, offsets).
//
// Covered: Ethernet II and 802.3 LLC/SNAP, 802.1Q / 802.1ad tags, ARP
// (Ethernet/IPv4), IPv4, IPv6 and its extension headers (hop-by-hop,
// routing, fragment, destination options, AH), TCP, UDP, SCTP (common
// header), ICMPv4, ICMPv6 and Neighbor Discovery (NS/NA + link-layer
// address options).
//
// Thread-safety: constants and plain value types.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "flow/flow_key.h"

namespace keel::packet {

using flow::be16;
using flow::be32;
using flow::be64;

// --- byte order and unaligned loads --------------------------------------

constexpr uint16_t bswap16(uint16_t v) { return static_cast<uint16_t>((v >> 8) | (v << 8)); }
constexpr uint32_t bswap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

// Network order <-> host order.
constexpr uint16_t ntoh16(be16 v) { return std::endian::native == std::endian::little ? bswap16(v) : v; }
constexpr uint32_t ntoh32(be32 v) { return std::endian::native == std::endian::little ? bswap32(v) : v; }
constexpr be16 hton16(uint16_t v) { return ntoh16(v); }
constexpr be32 hton32(uint32_t v) { return ntoh32(v); }
// A network-order constant, for comparing against loaded fields unswapped.
constexpr be16 be16_const(uint16_t v) { return hton16(v); }

// Loads a T from p (any alignment), bytes kept as in memory.
template <typename T>
inline T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// --- Ethernet --------------------------------------------------------------

inline constexpr unsigned kEthAddrLen = 6;
inline constexpr uint16_t kEthTypeMin = 0x0600;  // below: an 802.3 length field
inline constexpr uint16_t kEthTypeIpv4 = 0x0800;
inline constexpr uint16_t kEthTypeArp = 0x0806;
inline constexpr uint16_t kEthTypeRarp = 0x8035;
inline constexpr uint16_t kEthTypeVlan = 0x8100;  // 802.1Q C-tag
inline constexpr uint16_t kEthTypeQinQ = 0x88a8;  // 802.1ad S-tag
inline constexpr uint16_t kEthTypeIpv6 = 0x86dd;
// dl_type of an 802.3 frame that is not LLC/SNAP-encapsulated Ethernet
// (Open vSwitch's FLOW_DL_TYPE_NONE).
inline constexpr uint16_t kDlTypeNone = 0x05ff;

struct [[gnu::packed]] EthHeader {
  uint8_t dst[kEthAddrLen];
  uint8_t src[kEthAddrLen];
  be16 type;  // EtherType, a VLAN TPID, or an 802.3 length (< 0x600)
};
static_assert(sizeof(EthHeader) == 14 && offsetof(EthHeader, type) == 12, "Ethernet II: 14 bytes");

// An 802.1Q/802.1ad tag as it sits in the frame: its TPID takes the place of
// the EtherType, then the TCI, then the next EtherType.
struct [[gnu::packed]] VlanTag {
  be16 tpid;
  be16 tci;  // PCP(3) DEI(1) VID(12)
};
static_assert(sizeof(VlanTag) == 4, "802.1Q tag: 4 bytes");
inline constexpr uint16_t kVlanCfi = 0x1000;  // set in the flow key's tci to mean "a tag is present"
inline constexpr unsigned kMaxVlanTags = 2;   // tags the flow key holds (vlans[0] outer, vlans[1] inner)

// 802.2 LLC + SNAP header after an 802.3 length field.
struct [[gnu::packed]] LlcSnapHeader {
  uint8_t dsap;     // 0xaa
  uint8_t ssap;     // 0xaa
  uint8_t control;  // 0x03 (UI)
  uint8_t oui[3];   // 00-00-00: the type is an EtherType
  be16 type;
};
static_assert(sizeof(LlcSnapHeader) == 8, "LLC (3) + SNAP (5)");
inline constexpr uint8_t kLlcSapSnap = 0xaa;
inline constexpr uint8_t kLlcControlUi = 0x03;

// --- ARP (Ethernet hardware, IPv4 protocol addresses) ---------------------

struct [[gnu::packed]] ArpEthHeader {
  be16 hrd;     // 1 = Ethernet
  be16 pro;     // 0x0800
  uint8_t hln;  // 6
  uint8_t pln;  // 4
  be16 op;
  uint8_t sha[kEthAddrLen];
  be32 spa;
  uint8_t tha[kEthAddrLen];
  be32 tpa;
};
static_assert(sizeof(ArpEthHeader) == 28 && offsetof(ArpEthHeader, spa) == 14 &&
                  offsetof(ArpEthHeader, tpa) == 24,
              "ARP for Ethernet/IPv4: 28 bytes");
inline constexpr uint16_t kArpHrdEthernet = 1;

// --- IPv4 ------------------------------------------------------------------

struct [[gnu::packed]] Ipv4Header {
  uint8_t ver_ihl;  // version(4) IHL(4), IHL in 32-bit words
  uint8_t tos;      // DSCP(6) ECN(2)
  be16 tot_len;
  be16 id;
  be16 frag_off;  // flags(3: reserved, DF, MF) offset(13)
  uint8_t ttl;
  uint8_t proto;
  be16 csum;
  be32 src;
  be32 dst;
};
static_assert(sizeof(Ipv4Header) == 20 && offsetof(Ipv4Header, src) == 12, "IPv4 without options: 20 bytes");
inline constexpr unsigned kIpv4MinHeaderLen = 20;
inline constexpr uint16_t kIpv4MoreFragments = 0x2000;
inline constexpr uint16_t kIpv4FragOffsetMask = 0x1fff;

// IP protocol numbers (IPv4 protocol / IPv6 next header).
inline constexpr uint8_t kIpProtoHopOpts = 0;
inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoTcp = 6;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoRouting = 43;
inline constexpr uint8_t kIpProtoFragment = 44;
inline constexpr uint8_t kIpProtoAh = 51;
inline constexpr uint8_t kIpProtoIcmpv6 = 58;
inline constexpr uint8_t kIpProtoNone = 59;  // IPv6 "no next header"
inline constexpr uint8_t kIpProtoDstOpts = 60;
inline constexpr uint8_t kIpProtoSctp = 132;

// --- IPv6 ------------------------------------------------------------------

struct [[gnu::packed]] Ipv6Header {
  be32 vtc_flow;  // version(4) traffic class(8) flow label(20)
  be16 payload_len;
  uint8_t next_header;
  uint8_t hop_limit;
  uint8_t src[16];
  uint8_t dst[16];
};
static_assert(sizeof(Ipv6Header) == 40 && offsetof(Ipv6Header, src) == 8 && offsetof(Ipv6Header, dst) == 24,
              "IPv6 fixed header: 40 bytes");
inline constexpr uint32_t kIpv6FlowLabelMask = 0x000fffff;

// Hop-by-hop options, routing and destination options share this start;
// their length is `(len + 1) * 8` bytes. AH shares it too, with a length
// of `(len + 2) * 4` bytes. Every extension header is at least 8 bytes.
struct [[gnu::packed]] Ipv6ExtHeader {
  uint8_t next_header;
  uint8_t len;
  uint8_t data[6];
};
static_assert(sizeof(Ipv6ExtHeader) == 8, "the smallest IPv6 extension header: 8 bytes");

struct [[gnu::packed]] Ipv6FragHeader {
  uint8_t next_header;
  uint8_t reserved;
  be16 offlg;  // offset(13) reserved(2) M(1)
  be32 id;
};
static_assert(sizeof(Ipv6FragHeader) == 8, "IPv6 fragment header: 8 bytes");
inline constexpr uint16_t kIpv6FragOffsetMask = 0xfff8;

// --- L4 --------------------------------------------------------------------

struct [[gnu::packed]] TcpHeader {
  be16 src;
  be16 dst;
  be32 seq;
  be32 ack;
  be16 ctl;  // data offset(4) flags(12: 3 reserved, NS, CWR, ECE, URG, ACK, PSH, RST, SYN, FIN)
  be16 window;
  be16 csum;
  be16 urg;
};
static_assert(sizeof(TcpHeader) == 20 && offsetof(TcpHeader, ctl) == 12, "TCP without options: 20 bytes");
inline constexpr unsigned kTcpMinHeaderLen = 20;
inline constexpr uint16_t kTcpFlagsMask = 0x0fff;  // the 12 flag bits the flow key keeps (as OVS)
inline constexpr uint16_t kTcpFin = 0x001, kTcpSyn = 0x002, kTcpRst = 0x004, kTcpPsh = 0x008;
inline constexpr uint16_t kTcpAck = 0x010, kTcpUrg = 0x020, kTcpEce = 0x040, kTcpCwr = 0x080;
inline constexpr uint16_t kTcpNs = 0x100;

struct [[gnu::packed]] UdpHeader {
  be16 src;
  be16 dst;
  be16 len;
  be16 csum;
};
static_assert(sizeof(UdpHeader) == 8, "UDP: 8 bytes");

struct [[gnu::packed]] SctpHeader {  // SCTP common header
  be16 src;
  be16 dst;
  be32 vtag;
  be32 csum;
};
static_assert(sizeof(SctpHeader) == 12, "SCTP common header: 12 bytes");

struct [[gnu::packed]] IcmpHeader {
  uint8_t type;
  uint8_t code;
  be16 csum;
  be32 rest;  // echo id/seq, unused, MTU, ...
};
static_assert(sizeof(IcmpHeader) == 8, "ICMPv4 header: 8 bytes");

struct [[gnu::packed]] Icmp6Header {
  uint8_t type;
  uint8_t code;
  be16 csum;
  be32 data;  // echo id/seq; ND: R/S/O flags + reserved
};
static_assert(sizeof(Icmp6Header) == 8, "ICMPv6 header with its first data word: 8 bytes");
inline constexpr uint8_t kIcmp6NeighborSolicit = 135;
inline constexpr uint8_t kIcmp6NeighborAdvert = 136;

// NS/NA body after the Icmp6Header: the target address, then options.
struct [[gnu::packed]] NdTarget {
  uint8_t target[16];
};
static_assert(sizeof(NdTarget) == 16, "ND target address");

// An ND option; `len` counts 8-byte units (0 is invalid). The link-layer
// address options for Ethernet are exactly 8 bytes: type, len=1, MAC.
struct [[gnu::packed]] NdLinkLayerOption {
  uint8_t type;
  uint8_t len;
  uint8_t mac[kEthAddrLen];
};
static_assert(sizeof(NdLinkLayerOption) == 8, "ND Ethernet link-layer address option: 8 bytes");
inline constexpr uint8_t kNdOptSourceLinkAddr = 1;
inline constexpr uint8_t kNdOptTargetLinkAddr = 2;
inline constexpr unsigned kNdOptUnit = 8;

}  // namespace keel::packet

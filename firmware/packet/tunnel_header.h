// TunnelHeader — the outer headers of a VXLAN, GENEVE or GRE tunnel: built
// once per flow on the slow path (the bytes a tnl_push action carries), and
// finished and stripped per packet by the datapath's executor.
//
// Three halves, one file, because they must agree byte for byte:
//
//  * build_tunnel_header(spec): the complete outer header, Ethernet + IPv4
//    or IPv6 + UDP (VXLAN, GENEVE) or GRE + the tunnel header, exactly as
//    Open vSwitch 3.1's tnl_port_build_header / netdev_*_build_header
//    write it: UDP source port 0 (the datapath fills it per packet), IPv4
//    id 0, IPv4 total length 0 and the IPv4 header checksum computed over
//    that zero length (the datapath adds the real length incrementally,
//    OVS's trick), UDP checksum 0xffff when checksums are on ("compute"),
//    0 when off; GRE checksum field 0 when the C flag is set.
//    Translation (ofproto/xlate, tnl-xl) calls it; tests too.
//
//  * finish_tunnel_push(frame, ...): after the executor has prepended those
//    bytes: writes the IPv4 total length and fixes its checksum, or the
//    IPv6 payload length; the UDP length, the UDP source port from the
//    packet's hash (tunnel_udp_src_port(), as netdev_tnl_get_src_port), the
//    UDP checksum when the header's is non-zero, the GRE checksum when the
//    C flag is set. Per packet, no allocation.
//
//  * parse_tunnel_header(...) (decap, tnl_pop): validates the outer layers
//    of a received frame for one tunnel type / UDP port and fills the
//    TunnelMetadata (+ GENEVE option bytes); says how many bytes to strip.
//    Every way a frame can be refused is a TnlPopResult, never a read past
//    `len`. Per packet, no allocation.
//
// Type numbers are Open vSwitch's OVS_VPORT_TYPE_* (what `header(type=N)`
// prints): GRE 3, VXLAN 4, GENEVE 5, and 109 (OVS_VPORT_TYPE_IP6GRE) for
// GRE over an IPv6 underlay.
//
// Thread-safety: pure functions of their arguments; any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/status.h"
#include "flow/flow_key.h"
#include "packet/headers.h"
#include "packet/packet_metadata.h"

namespace keel::packet {

// OVS_VPORT_TYPE_* numbers (the `type=` of tnl_push's header()).
enum class TnlType : uint8_t { kGre = 3, kVxlan = 4, kGeneve = 5, kIp6Gre = 109 };

// The longest outer header a tnl_push carries (flow/dp_actions.h's
// kMaxTnlHeaderLen). Open vSwitch allows 512 (TNL_PUSH_HEADER_SIZE); keel's
// executor needs the header's length in headroom (hal::kHeadroom, 128), so
// a longer header is only ever dropped (tnl_push_no_headroom): 256 leaves
// room for a larger headroom without changing the encoding.
inline constexpr size_t kMaxTunnelHeaderLen = 256;
inline constexpr size_t kMaxGeneveOptsLen = 252;

inline constexpr uint16_t kVxlanDefaultPort = 4789;
inline constexpr uint16_t kGeneveDefaultPort = 6081;
inline constexpr uint8_t kIpProtoGre = 47;
inline constexpr uint16_t kEthTypeTeb = 0x6558;  // GRE protocol: transparent Ethernet bridging

// Tunnel header layouts (network order, wire offsets).
struct [[gnu::packed]] VxlanHeader {
  be32 flags;  // 0x08000000: I (VNI valid)
  be32 vni;    // VNI << 8
};
static_assert(sizeof(VxlanHeader) == 8, "VXLAN: 8 bytes (RFC 7348)");
inline constexpr uint32_t kVxlanFlagI = 0x08000000;

struct [[gnu::packed]] GeneveHeader {
  uint8_t ver_optlen;  // version(2) = 0, option length(6) in 4-byte words
  uint8_t flags;       // O(1) C(1) reserved(6)
  be16 proto;          // 0x6558
  be32 vni;            // VNI << 8
};
static_assert(sizeof(GeneveHeader) == 8, "GENEVE: 8 bytes before its options (RFC 8926)");
inline constexpr uint8_t kGeneveFlagOam = 0x80;
inline constexpr uint8_t kGeneveFlagCrit = 0x40;

// One GENEVE option header; `len` (low 5 bits) counts 4-byte words of data.
struct [[gnu::packed]] GeneveOptHeader {
  be16 opt_class;
  uint8_t type;
  uint8_t len;  // reserved(3) length(5)
};
static_assert(sizeof(GeneveOptHeader) == 4, "GENEVE option header: 4 bytes");

// GRE flags (first 16 bits, host order).
inline constexpr uint16_t kGreCsum = 0x8000;
inline constexpr uint16_t kGreKey = 0x2000;
inline constexpr uint16_t kGreSeq = 0x1000;
inline constexpr uint16_t kGreVersionMask = 0x0007;

// What the slow path knows about one tunnel output: everything the outer
// header holds except the per-packet fields (lengths, UDP source port,
// checksums).
struct TunnelHeaderSpec {
  TnlType type = TnlType::kVxlan;  // kGre with ipv6 = true builds kIp6Gre
  bool ipv6 = false;               // underlay family
  flow::EthAddr eth_dst{}, eth_src{};
  be32 ipv4_src = 0, ipv4_dst = 0;
  flow::In6Addr ipv6_src{}, ipv6_dst{};
  uint8_t tos = 0;   // IPv4 TOS / IPv6 traffic class
  uint8_t ttl = 64;  // IPv4 TTL / IPv6 hop limit
  bool dont_fragment = true;  // IPv4 DF (frag=0x4000); ignored for IPv6
  uint16_t udp_dst = 0;       // host order; 0: the type's default port
  bool csum = false;          // UDP checksum (VXLAN/GENEVE) / GRE C flag
  bool key_present = true;    // GRE: the K flag (VXLAN/GENEVE always carry a VNI)
  uint32_t key = 0;           // host order: VNI (24 bits) or GRE key (32 bits)
  bool oam = false;           // GENEVE O bit
  bool critical = false;      // GENEVE C bit; also set when an option's type has its critical bit (0x80)
  std::span<const uint8_t> geneve_opts{};  // raw TLVs, a multiple of 4, <= kMaxGeneveOptsLen
};

struct TunnelHeader {
  TnlType type = TnlType::kVxlan;
  uint16_t len = 0;
  std::array<uint8_t, kMaxTunnelHeaderLen> bytes{};

  std::span<const uint8_t> span() const { return {bytes.data(), len}; }
};

// The header for `spec`. Errors: VNI beyond 24 bits, GENEVE options not a
// multiple of 4 / too long / a malformed TLV, a type the family does not
// allow. Control path.
Result<TunnelHeader> build_tunnel_header(const TunnelHeaderSpec& spec);

// Checks that `header` is a header of `type` whose layers (Ethernet,
// IPv4/IPv6 without options, UDP/GRE, VXLAN/GENEVE with its options, GRE
// with its optional fields) add up to exactly header.size() bytes: what
// validate_dp_actions() requires of a tnl_push before the executor trusts
// it. The error says which layer is wrong. Control path.
Status check_tunnel_header(TnlType type, std::span<const uint8_t> header);

// Outer UDP source port from a packet hash, as Open vSwitch's
// netdev_tnl_get_src_port: ((hash * (max - min)) >> 32) + min with
// tnl_udp_port_min/max = 32768/61000, so 32768..60999. Host order.
inline constexpr uint16_t kTnlUdpPortMin = 32768;
inline constexpr uint16_t kTnlUdpPortMax = 61000;
constexpr uint16_t tunnel_udp_src_port(uint32_t hash) {
  return static_cast<uint16_t>(((uint64_t{hash} * (kTnlUdpPortMax - kTnlUdpPortMin)) >> 32) + kTnlUdpPortMin);
}

// Per packet, after `header_len` header bytes (as built) were prepended to
// the frame (`frame`, `len` bytes in all): lengths, checksums, UDP source
// port from `hash`. `type` is the tnl_push's header type.
void finish_tunnel_push(uint8_t* frame, uint32_t len, TnlType type, uint32_t header_len, uint32_t hash) noexcept;

// Why tnl_pop refused a frame (the counters' reasons; kOk first).
enum class TnlPopResult : uint8_t {
  kOk = 0,
  kTruncated,       // shorter than the headers it announces
  kNotIp,           // outer EtherType neither IPv4 nor IPv6 (or a VLAN tag)
  kBadIpHeader,     // IPv4 IHL < 5 / version, IPv6 version, or total/payload length beyond the frame
  kBadIpChecksum,   // outer IPv4 header checksum wrong
  kIpFragment,      // outer IPv4 fragment (MF or offset): never reassembled
  kWrongProto,      // not UDP (VXLAN, GENEVE) / not GRE for this vport
  kWrongPort,       // UDP destination port is not the vport's
  kBadUdpChecksum,  // non-zero UDP checksum that does not verify
  kNoVport,         // tnl_pop(N) with N not (or no longer) a tunnel vport
  kBadVxlanFlags,   // VXLAN flags other than I, or reserved bits in the VNI word
  kBadGeneve,       // GENEVE version != 0 or protocol not 0x6558
  kBadGeneveOpts,   // GENEVE option length beyond the packet or a TLV overrunning it
  kBadGre,          // GRE version != 0, unknown flags (routing, ...), or protocol not 0x6558
  kBadGreChecksum,  // GRE checksum present and wrong
  kGeneveOptsTooLong,  // more GENEVE option bytes than a flow key carries (kMaxKeyedTunOptWords * 8)
  kCount
};
inline constexpr unsigned kTnlPopResults = static_cast<unsigned>(TnlPopResult::kCount);
// "truncated", "not_ip", ... (counter names; "ok" for kOk).
const char* tnl_pop_result_name(TnlPopResult r) noexcept;

// What a successful decap found.
struct TnlPopInfo {
  TunnelMetadata tunnel;   // tun_id, src/dst, tos, ttl, tp_src/dst, flags, opt_len
  uint32_t outer_len = 0;  // bytes to strip: Ethernet + IP + UDP/GRE + tunnel header (+ options)
  alignas(8) uint8_t opts[kMaxGeneveOptsLen + 4];  // GENEVE option bytes (tunnel.opt_len), zero-padded to 8
};

// Which tunnel a vport decapsulates: VXLAN/GENEVE with its UDP port (host
// order), or GRE (IPv4 or IPv6 underlay; udp_port ignored).
enum class TnlPopKind : uint8_t { kVxlan, kGeneve, kGre };

// Validates `frame` as a `kind` tunnel packet to `udp_port` and fills
// `out`. Reads only frame[0..len). Per packet.
TnlPopResult parse_tunnel_header(TnlPopKind kind, uint16_t udp_port, const uint8_t* frame, uint32_t len,
                                 TnlPopInfo& out) noexcept;

}  // namespace keel::packet

// FlowKey — every field keel can match on, laid out as 64-bit words.
//
// The key is the expanded form; packets, masks and subtable keys travel as
// Miniflows (miniflow.h): two 64-bit maps saying which words are present,
// then only those words. Map `u0` covers words 0..63, `u1` words 64..127.
// The layout puts the tunnel, conntrack and metadata words and L2 in u0, and
// L3/L4 in u1, so a typical megaflow touches a handful of words in each half
// (that pair of counts is its "shape", which picks the dpcls lookup
// function). Packet header fields are stored in network byte order exactly
// as on the wire (the parser copies, never swaps); metadata is host order.
//
// Word map (u0 = words 0..63, u1 = words 64..127):
//
//   word  contents                                           group
//   ----  -------------------------------------------------  ---------
//    0    tun_id (be64)                                      tunnel
//    1    tun_ipv4_src, tun_ipv4_dst                         tunnel
//    2-3  tun_ipv6_src                                       tunnel
//    4-5  tun_ipv6_dst                                       tunnel
//    6    tun_flags(16) tun_tos tun_ttl tun_tp_src tun_tp_dst tunnel
//    7    tun_gbp_id(16) tun_gbp_flags pad(8) tun_opt_len(32) tunnel
//    8-39 tun_opts[256]: Geneve options (reserved space)     tunnel
//   40    ct_state(16) ct_zone(16) ct_mark(32)               conntrack (reserved)
//   41-42 ct_label[16]                                       conntrack (reserved)
//   43-47 reserved                                           -
//   48    skb_priority, pkt_mark                             metadata
//   49    dp_hash, conj_id                                   metadata
//   50    in_port, recirc_id   (every megaflow matches both) metadata
//   51    metadata (OpenFlow 64-bit metadata)                metadata
//   52-55 regs[8] (OpenFlow registers, 32-bit each)          metadata
//   56-58 reserved                                           -
//   59    dl_dst[6], dl_src[0..1]                            L2
//   60    dl_src[2..5], dl_type(be16), pad(16)               L2
//   61    vlans[0] (tpid, tci), vlans[1] (tpid, tci)         L2
//   62-63 reserved (MPLS label stack)                        L2
//   64    nw_src, nw_dst    (IPv4; ARP spa, tpa)             L3
//   65-66 ipv6_src                                           L3
//   67-68 ipv6_dst                                           L3
//   69    ipv6_label(be32) nw_frag nw_tos nw_ttl nw_proto    L3
//   70-71 nd_target (ICMPv6 ND)                              L3
//   72    arp_sha[6] / nd_sll, tcp_flags(be16)               L3/L4
//   73    arp_tha[6] / nd_tll, pad(16)                       L3
//   74    tp_src, tp_dst (be16; ICMP type, code), pad(32)    L4
//   75    reserved                                           -
//
// nw_proto also holds the ARP opcode (low 8 bits), as in Open vSwitch.
//
// Geneve options (tun_opt_len, tun_opts) have two forms, as Open vSwitch's
// flow_tnl.metadata (present.len in "udpif" form, present.map otherwise);
// flow/tun_metadata.h describes both. Datapath keys and megaflows hold the
// raw form (tun_opt_len = bytes of wire options); rules and translation's
// flow the metadata form (tun_opt_len = present bitmap of tun_metadata0..7,
// tun_metadataN right-aligned in tun_opts[32N..32N+32)).
//
// Thread-safety: a plain value type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace keel::flow {

using be16 = uint16_t;  // network byte order
using be32 = uint32_t;
using be64 = uint64_t;

struct EthAddr {
  uint8_t b[6];
  bool operator==(const EthAddr&) const = default;
};
struct In6Addr {
  uint8_t b[16];
  bool operator==(const In6Addr&) const = default;
};

struct VlanHdr {
  be16 tpid;  // 0 when no tag
  be16 tci;   // PCP(3) DEI/CFI(1) VID(12); OVS sets CFI (0x1000) to mean "present"
  bool operator==(const VlanHdr&) const = default;
};

// nw_frag bits (as Open vSwitch).
inline constexpr uint8_t kFragAny = 1 << 0;    // a fragment
inline constexpr uint8_t kFragLater = 1 << 1;  // not the first fragment

// tun_flags bits.
inline constexpr uint16_t kTunDontFragment = 1 << 1;
inline constexpr uint16_t kTunCsum = 1 << 2;
inline constexpr uint16_t kTunKey = 1 << 3;
inline constexpr uint16_t kTunOam = 1 << 0;

inline constexpr unsigned kFlowWords = 76;
inline constexpr unsigned kFlowU0Words = 64;

struct alignas(8) FlowKey {
  // --- tunnel (words 0-39) ---
  be64 tun_id;
  be32 tun_ipv4_src, tun_ipv4_dst;
  In6Addr tun_ipv6_src, tun_ipv6_dst;
  uint16_t tun_flags;
  uint8_t tun_tos, tun_ttl;
  be16 tun_tp_src, tun_tp_dst;
  be16 tun_gbp_id;
  uint8_t tun_gbp_flags, pad_tun;
  uint32_t tun_opt_len;
  uint8_t tun_opts[256];
  // --- conntrack, reserved (words 40-47) ---
  uint16_t ct_state, ct_zone;
  uint32_t ct_mark;
  uint8_t ct_label[16];
  uint64_t reserved_43[5];
  // --- metadata (words 48-58) ---
  uint32_t skb_priority, pkt_mark;
  uint32_t dp_hash, conj_id;
  uint32_t in_port, recirc_id;
  be64 metadata;
  uint32_t regs[8];
  uint64_t reserved_56[3];
  // --- L2 (words 59-63) ---
  EthAddr dl_dst, dl_src;
  be16 dl_type;
  uint16_t pad_l2;
  VlanHdr vlans[2];
  uint64_t reserved_62[2];
  // --- L3 (words 64-73) ---
  be32 nw_src, nw_dst;
  In6Addr ipv6_src, ipv6_dst;
  be32 ipv6_label;
  uint8_t nw_frag, nw_tos, nw_ttl, nw_proto;
  In6Addr nd_target;
  EthAddr arp_sha;
  be16 tcp_flags;
  EthAddr arp_tha;
  uint16_t pad_l3;
  // --- L4 (words 74-75) ---
  be16 tp_src, tp_dst;
  uint32_t pad_l4;
  uint64_t reserved_75;

  const uint64_t* words() const { return reinterpret_cast<const uint64_t*>(this); }
  uint64_t* words() { return reinterpret_cast<uint64_t*>(this); }
  bool operator==(const FlowKey& o) const { return std::memcmp(this, &o, sizeof *this) == 0; }
};

// The word of a field, for the word map above (checked at compile time).
#define KEEL_FLOW_WORD(field) (offsetof(::keel::flow::FlowKey, field) / 8)

static_assert(sizeof(FlowKey) == size_t{kFlowWords} * 8, "the word map above lists every word");
static_assert(KEEL_FLOW_WORD(tun_opts) == 8 && KEEL_FLOW_WORD(ct_state) == 40, "tunnel = words 0-39");
static_assert(KEEL_FLOW_WORD(skb_priority) == 48 && KEEL_FLOW_WORD(in_port) == 50, "metadata words");
static_assert(offsetof(FlowKey, recirc_id) / 8 == 50, "in_port and recirc_id share word 50");
static_assert(KEEL_FLOW_WORD(regs) == 52 && KEEL_FLOW_WORD(dl_dst) == 59, "metadata then L2");
static_assert(KEEL_FLOW_WORD(vlans) == 61, "vlans: word 61");
static_assert(offsetof(FlowKey, nw_src) == size_t{kFlowU0Words} * 8, "L3 starts the u1 half");
static_assert(KEEL_FLOW_WORD(ipv6_label) == 69 && offsetof(FlowKey, nw_proto) / 8 == 69, "word 69");
static_assert(KEEL_FLOW_WORD(arp_sha) == 72 && offsetof(FlowKey, tcp_flags) / 8 == 72, "word 72");
static_assert(KEEL_FLOW_WORD(tp_src) == 74, "L4: word 74");

}  // namespace keel::flow

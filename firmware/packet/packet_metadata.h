// PacketMetadata and TunnelMetadata — what the datapath knows about a packet
// that is not in its bytes: the port it came in on, its recirculation id,
// marks, the dp_hash, and for a decapsulated packet the outer (tunnel)
// header it arrived in.
//
// The parser turns these into the metadata words of the flow key (see the
// word map in flow/flow_key.h):
//
//   word  0-7   tunnel       only when tunnel.is_set() (a decapsulated packet)
//   word  48    skb_priority, pkt_mark   only when either is non-zero
//   word  49    dp_hash (conj_id 0)      only when non-zero
//   word  50    in_port, recirc_id       always (every megaflow matches both)
//
// TunnelMetadata has exactly the layout of FlowKey words 0-7 (checked
// below), so pushing it is eight word copies. GENEVE options (tnl_pop's,
// as Open vSwitch's udpif form: the raw TLVs) are words 8.. of the key:
// PacketMetadata::tun_opts points to tunnel.opt_len bytes, 8-byte aligned
// and zero-padded to a whole word, and the parser pushes those words
// (at most kMaxKeyedTunOptWords of them: tnl_pop refuses more).
//
// A packet fresh from a port needs no PacketMetadata object: the parser's
// rx-path entry points read in_port and hal::PacketMeta (recirc_id, dp_hash,
// pkt_mark) from the hal::Packet. Recirculated and decapsulated packets
// carry a PacketMetadata beside them (tnl_pop fills `tunnel`, recirc sets
// `recirc_id`), because the 64-byte hal::Packet descriptor has no room for
// an outer header.
//
// Thread-safety: plain value types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "flow/flow_key.h"
#include "keel/hal/packet.h"

namespace keel::packet {

// The outer header of a decapsulated packet. All zero means "not tunnelled";
// a tunnel is present when its outer destination is set (as Open vSwitch's
// flow_tnl_dst_is_set), since every decapsulated packet has one.
struct alignas(8) TunnelMetadata {
  flow::be64 tun_id = 0;  // VNI / key, network order
  flow::be32 ipv4_src = 0, ipv4_dst = 0;
  flow::In6Addr ipv6_src{}, ipv6_dst{};
  uint16_t flags = 0;  // flow::kTunKey, kTunCsum, kTunDontFragment, kTunOam (host order)
  uint8_t tos = 0, ttl = 0;
  flow::be16 tp_src = 0, tp_dst = 0;  // outer UDP ports (VXLAN, Geneve)
  flow::be16 gbp_id = 0;              // VXLAN group policy
  uint8_t gbp_flags = 0, pad = 0;
  uint32_t opt_len = 0;  // Geneve option bytes (options themselves not carried yet)

  static constexpr unsigned kWords = 8;  // FlowKey words 0-7

  bool is_set() const noexcept {
    uint64_t v6[2];
    static_assert(sizeof v6 == sizeof ipv6_dst);
    std::memcpy(v6, &ipv6_dst, sizeof v6);
    return ipv4_dst != 0 || (v6[0] | v6[1]) != 0;
  }
  const uint64_t* words() const noexcept { return reinterpret_cast<const uint64_t*>(this); }
  bool operator==(const TunnelMetadata&) const = default;
};
static_assert(sizeof(TunnelMetadata) == TunnelMetadata::kWords * size_t{8}, "tunnel metadata = FlowKey words 0-7");
static_assert(offsetof(TunnelMetadata, tun_id) == offsetof(flow::FlowKey, tun_id) &&
                  offsetof(TunnelMetadata, ipv4_dst) == offsetof(flow::FlowKey, tun_ipv4_dst) &&
                  offsetof(TunnelMetadata, ipv6_src) == offsetof(flow::FlowKey, tun_ipv6_src) &&
                  offsetof(TunnelMetadata, ipv6_dst) == offsetof(flow::FlowKey, tun_ipv6_dst) &&
                  offsetof(TunnelMetadata, flags) == offsetof(flow::FlowKey, tun_flags) &&
                  offsetof(TunnelMetadata, tos) == offsetof(flow::FlowKey, tun_tos) &&
                  offsetof(TunnelMetadata, ttl) == offsetof(flow::FlowKey, tun_ttl) &&
                  offsetof(TunnelMetadata, tp_src) == offsetof(flow::FlowKey, tun_tp_src) &&
                  offsetof(TunnelMetadata, tp_dst) == offsetof(flow::FlowKey, tun_tp_dst) &&
                  offsetof(TunnelMetadata, gbp_id) == offsetof(flow::FlowKey, tun_gbp_id) &&
                  offsetof(TunnelMetadata, gbp_flags) == offsetof(flow::FlowKey, tun_gbp_flags) &&
                  offsetof(TunnelMetadata, opt_len) == offsetof(flow::FlowKey, tun_opt_len),
              "the parser copies TunnelMetadata into FlowKey words 0-7 word by word");

// GENEVE option words a key may carry: a Miniflow holds kMiniflowMaxWords
// (40); a parsed packet's own words are at most ~30 (flow/miniflow.h).
inline constexpr unsigned kMaxKeyedTunOptWords = 8;  // 64 bytes of options

struct PacketMetadata {
  uint32_t in_port = 0;  // datapath port number (the HAL port id for a physical port)
  uint32_t recirc_id = 0;
  uint32_t skb_priority = 0;
  uint32_t pkt_mark = 0;
  uint32_t dp_hash = 0;
  TunnelMetadata tunnel{};  // all zero: not decapsulated
  // tunnel.opt_len bytes of GENEVE options (8-byte aligned, zero-padded to
  // a word), or null when opt_len is 0. Owned by whoever built this.
  const uint8_t* tun_opts = nullptr;

  // The metadata of a packet as it came off a port: its in_port and its
  // hal::PacketMeta, no tunnel.
  static PacketMetadata of(const hal::Packet& p) noexcept {
    PacketMetadata md;
    md.in_port = p.in_port();
    md.recirc_id = p.meta().recirc_id;
    md.pkt_mark = p.meta().pkt_mark;
    md.dp_hash = p.meta().dp_hash;
    return md;
  }
};

}  // namespace keel::packet

// The sim NIC flow-engine model (design and thread-safety: sim_flow.h).
#include "sim_flow.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <exception>
#include <new>

#include "core/hash.h"
#include "keel/hal/backend.h"
#include "keel/hal/cpu.h"

namespace keel::hal::sim {

namespace {

// ------------------------------------------------------------ helpers ---

inline uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t rd32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
inline void wr16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void wr32(uint8_t* p, uint32_t v) {
  wr16(p, static_cast<uint16_t>(v >> 16));
  wr16(p + 2, static_cast<uint16_t>(v));
}

using KeyWords = std::array<uint64_t, kSimKeyWords>;
inline KeyWords words(const SimKey& k) { return std::bit_cast<KeyWords>(k); }

inline bool masked_equal(const KeyWords& pkt, const KeyWords& key, const KeyWords& mask) {
  uint64_t diff = 0;
  for (unsigned i = 0; i < kSimKeyWords; ++i) diff |= (pkt[i] ^ key[i]) & mask[i];
  return diff == 0;
}

inline uint32_t hash_words(const KeyWords& w, uint32_t basis) {
  uint32_t h = basis;
  for (uint64_t x : w) h = hash_add64(h, x);
  return hash_finish(h, sizeof(SimKey));
}

// Busy-waits ns nanoseconds (the device's time), outside every lock.
void spend(uint64_t ns) noexcept {
  if (ns == 0) return;
  const uint64_t end = now_ns() + ns;
  while (now_ns() < end) {
  }
}

// One's-complement checksum update for a 16-bit word changing from old to
// nw (values as read big-endian; RFC 1624 eqn. 3, Open vSwitch's
// recalc_csum16).
inline uint16_t csum16(uint16_t csum, uint16_t old, uint16_t nw) {
  uint32_t s = static_cast<uint16_t>(~csum) + static_cast<uint32_t>(static_cast<uint16_t>(~old)) + nw;
  s = (s & 0xffff) + (s >> 16);
  s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(~s);
}
inline uint16_t csum32(uint16_t csum, uint32_t old, uint32_t nw) {
  return csum16(csum16(csum, static_cast<uint16_t>(old >> 16), static_cast<uint16_t>(nw >> 16)),
                static_cast<uint16_t>(old), static_cast<uint16_t>(nw));
}

// The L4 checksum field's offset (from l4) for a protocol, -1 none.
inline int l4_csum_offset(uint8_t proto) {
  switch (proto) {
    case 6:
      return 16;
    case 17:
      return 6;
    case 58:
      return 2;
    default:
      return -1;
  }
}

// Updates the L4 checksum of a pseudo-header change (address) or a port.
void update_l4_csum(Packet& p, const WireLayout& lay, uint32_t old32, uint32_t new32, bool is32) {
  if (lay.l4 == 0 || lay.later_fragment) return;
  const int off = l4_csum_offset(lay.l4_proto);
  if (off < 0 || lay.l4 + off + 2u > p.len()) return;
  uint8_t* c = p.data() + lay.l4 + off;
  const uint16_t old_c = rd16(c);
  if (lay.l4_proto == 17 && old_c == 0) return;  // UDP without checksum stays so
  uint16_t n = is32 ? csum32(old_c, old32, new32)
                    : csum16(old_c, static_cast<uint16_t>(old32), static_cast<uint16_t>(new32));
  if (lay.l4_proto == 17 && n == 0) n = 0xffff;
  wr16(c, n);
}

// ---------------------------------------------------- pattern compiling ---

struct FieldDesc {
  uint16_t off, size;
};
#define KEEL_F(f) FieldDesc{static_cast<uint16_t>(offsetof(SimKey, f)), sizeof(SimKey::f)}
constexpr std::array kFields{
    KEEL_F(group),   KEEL_F(mark),     KEEL_F(meta),      KEEL_F(in_port),   KEEL_F(eth_dst),
    KEEL_F(eth_src), KEEL_F(eth_type), KEEL_F(vlan_tci),  KEEL_F(ip4_src),   KEEL_F(ip4_dst),
    KEEL_F(ip6_src), KEEL_F(ip6_dst),  KEEL_F(ip6_flow),  KEEL_F(ip4_frag),  KEEL_F(ip_proto),
    KEEL_F(ip_tos),  KEEL_F(ip_ttl),   KEEL_F(tcp_flags), KEEL_F(icmp_type), KEEL_F(icmp_code),
    KEEL_F(tp_src),  KEEL_F(tp_dst),   KEEL_F(vni),       KEEL_F(vxlan_flags),
};
#undef KEEL_F

// Merges a field's spec/mask into key/mask (only the masked bits of spec).
template <typename T>
void put(T& key, T& mask, T spec, T m) {
  key = static_cast<T>((key & ~m) | (spec & m));
  mask = static_cast<T>(mask | m);
}
template <size_t N>
void put(std::array<uint8_t, N>& key, std::array<uint8_t, N>& mask, const std::array<uint8_t, N>& spec,
         const std::array<uint8_t, N>& m) {
  for (size_t i = 0; i < N; ++i) put(key[i], mask[i], spec[i], m[i]);
}
void put_layer(SimKey& key, SimKey& mask, uint16_t bits, uint16_t value) { put(key.layers, mask.layers, value, bits); }

}  // namespace

void parse_wire(const uint8_t* d, uint32_t len, SimKey& k, WireLayout& lay) noexcept {
  lay = WireLayout{};
  if (len < 14) return;
  k.layers |= kLayerEth;
  std::memcpy(k.eth_dst.data(), d, 6);
  std::memcpy(k.eth_src.data(), d + 6, 6);
  uint32_t off = 12;
  uint16_t type = rd16(d + off);
  off += 2;
  while ((type == 0x8100 || type == 0x88a8) && off + 4 <= len && lay.vlans < 2) {
    if (lay.vlans == 0) k.vlan_tci = rd16(d + off);
    ++lay.vlans;
    type = rd16(d + off + 2);
    off += 4;
  }
  if (lay.vlans) k.layers |= kLayerVlan;
  if (lay.vlans > 1 || type == 0x8100 || type == 0x88a8) k.layers |= kLayerQinQ;
  k.eth_type = type;
  uint32_t l4 = 0;
  uint8_t proto = 0;
  if (type == 0x0800 && off + 20 <= len) {
    const uint8_t* ip = d + off;
    const uint32_t ihl = (ip[0] & 0x0f) * 4u;
    if ((ip[0] >> 4) != 4 || ihl < 20 || off + ihl > len) return;
    k.layers |= kLayerIpv4;
    lay.ipv4 = true;
    lay.l3 = static_cast<uint16_t>(off);
    k.ip_tos = ip[1];
    k.ip4_frag = rd16(ip + 6);
    k.ip_ttl = ip[8];
    k.ip_proto = proto = ip[9];
    k.ip4_src = rd32(ip + 12);
    k.ip4_dst = rd32(ip + 16);
    if ((k.ip4_frag & 0x1fff) != 0) {
      lay.later_fragment = true;
      return;
    }
    l4 = off + ihl;
  } else if (type == 0x86dd && off + 40 <= len) {
    const uint8_t* ip = d + off;
    if ((ip[0] >> 4) != 6) return;
    k.layers |= kLayerIpv6;
    lay.ipv6 = true;
    lay.l3 = static_cast<uint16_t>(off);
    const uint32_t w = rd32(ip);
    k.ip_tos = static_cast<uint8_t>(w >> 20);
    k.ip6_flow = w & 0xfffff;
    k.ip_proto = proto = ip[6];
    k.ip_ttl = ip[7];
    std::memcpy(k.ip6_src.data(), ip + 8, 16);
    std::memcpy(k.ip6_dst.data(), ip + 24, 16);
    if (proto == 44) {
      k.layers |= kLayerIp6Frag;
      return;  // L4 after extension headers: not matched by the model
    }
    l4 = off + 40;
  } else {
    return;
  }
  const uint8_t* p = d + l4;
  if (proto == 6 && l4 + 20 <= len) {
    k.layers |= kLayerTcp;
    k.tp_src = rd16(p);
    k.tp_dst = rd16(p + 2);
    k.tcp_flags = p[13];
  } else if (proto == 17 && l4 + 8 <= len) {
    k.layers |= kLayerUdp;
    k.tp_src = rd16(p);
    k.tp_dst = rd16(p + 2);
    if (k.tp_dst == 4789 && l4 + 16 <= len) {
      k.layers |= kLayerVxlan;
      k.vxlan_flags = p[8];
      k.vni = rd32(p + 12) >> 8;
    }
  } else if (proto == 1 && lay.ipv4 && l4 + 4 <= len) {
    k.layers |= kLayerIcmp;
    k.icmp_type = p[0];
    k.icmp_code = p[1];
  } else if (proto == 58 && lay.ipv6 && l4 + 4 <= len) {
    k.layers |= kLayerIcmp6;
    k.icmp_type = p[0];
    k.icmp_code = p[1];
  } else {
    return;
  }
  lay.l4 = static_cast<uint16_t>(l4);
  lay.l4_proto = proto;
}

bool mask_is_exact(const SimKey& mask) noexcept {
  const auto* b = reinterpret_cast<const uint8_t*>(&mask);
  for (const FieldDesc& f : kFields) {
    bool all_zero = true, all_ones = true;
    for (unsigned i = 0; i < f.size; ++i) {
      all_zero &= b[f.off + i] == 0;
      all_ones &= b[f.off + i] == 0xff;
    }
    if (!all_zero && !all_ones) return false;
  }
  return true;  // layers: independent one-bit fields
}

Status compile_pattern(const FlowAttr& attr, const FlowPattern& pattern, uint16_t owner, SimKey& key,
                       SimKey& mask, FlowError* err, const std::string& port, const char* op) {
  std::memset(&key, 0, sizeof key);
  std::memset(&mask, 0, sizeof mask);
  auto fail = [&](int errnum, int index, std::string msg) {
    const int type = index >= 0 && index < pattern.count ? static_cast<int>(pattern.items[index].type) : -1;
    return flow_fail(err, op, port, errnum, index >= 0 ? FlowErrorWhere::item : FlowErrorWhere::attr, index, type,
                     std::move(msg));
  };
  if (pattern.overflow) return fail(EINVAL, kMaxFlowItems, "more than 8 items");
  if (attr.egress) return fail(ENOTSUP, -1, "egress rules are not modelled");
  if (!attr.ingress && !attr.transfer) return fail(EINVAL, -1, "a rule must be ingress or transfer");
  key.group = attr.group;
  mask.group = ~0u;
  if (!attr.transfer) {
    if (owner == kInvalidPort) return fail(ENODEV, -1, "the port has no datapath number yet");
    key.in_port = owner;
    mask.in_port = 0xffff;
  }
  // Stages: 1 eth, 2 vlan, 3 L3, 4 L4, 5 vxlan; each item must come after
  // the previous stage (port, mark and meta items go anywhere).
  int stage = 0;
  uint16_t l3 = 0;  // kLayerIpv4 / kLayerIpv6 of the L3 item
  bool eth_type_masked = false;
  for (int i = 0; i < pattern.count; ++i) {
    const FlowItem& it = pattern.items[i];
    auto at = [&](int s) -> Status {
      if (stage >= 5) return fail(ENOTSUP, i, "the model does not match headers inside a tunnel");
      if (s == 2 && stage == 2) return fail(ENOTSUP, i, "the model matches one VLAN tag");
      if (s <= stage) return fail(EINVAL, i, "item out of order");
      stage = s;
      return {};
    };
    switch (it.type) {
      case FlowItemType::eth: {
        if (auto s = at(1); !s) return s;
        const FlowEth &sp = it.spec.eth, &m = it.mask.eth;
        put_layer(key, mask, kLayerEth, kLayerEth);
        put(key.eth_dst, mask.eth_dst, sp.dst, m.dst);
        put(key.eth_src, mask.eth_src, sp.src, m.src);
        put(key.eth_type, mask.eth_type, sp.type, m.type);
        eth_type_masked = m.type != 0;
        if (m.has_vlan) put_layer(key, mask, kLayerVlan, sp.has_vlan ? kLayerVlan : 0);
        break;
      }
      case FlowItemType::vlan: {
        if (auto s = at(2); !s) return s;
        const FlowVlan &sp = it.spec.vlan, &m = it.mask.vlan;
        if ((mask.layers & kLayerVlan) && !(key.layers & kLayerVlan))
          return fail(EINVAL, i, "vlan item after an eth item with has_vlan 0");
        put_layer(key, mask, kLayerVlan | kLayerQinQ, kLayerVlan);
        put(key.vlan_tci, mask.vlan_tci, sp.tci, m.tci);
        if (m.inner_type) {
          if (eth_type_masked && ((key.eth_type ^ sp.inner_type) & mask.eth_type & m.inner_type))
            return fail(EINVAL, i, "vlan inner_type contradicts the eth type");
          put(key.eth_type, mask.eth_type, sp.inner_type, m.inner_type);
        }
        break;
      }
      case FlowItemType::ipv4: {
        if (auto s = at(3); !s) return s;
        const FlowIpv4 &sp = it.spec.ipv4, &m = it.mask.ipv4;
        l3 = kLayerIpv4;
        put_layer(key, mask, kLayerIpv4 | kLayerIpv6, kLayerIpv4);
        put(key.ip_tos, mask.ip_tos, sp.tos, m.tos);
        put(key.ip_ttl, mask.ip_ttl, sp.ttl, m.ttl);
        put(key.ip_proto, mask.ip_proto, sp.proto, m.proto);
        put(key.ip4_frag, mask.ip4_frag, sp.frag, m.frag);
        put(key.ip4_src, mask.ip4_src, sp.src, m.src);
        put(key.ip4_dst, mask.ip4_dst, sp.dst, m.dst);
        break;
      }
      case FlowItemType::ipv6: {
        if (auto s = at(3); !s) return s;
        const FlowIpv6 &sp = it.spec.ipv6, &m = it.mask.ipv6;
        l3 = kLayerIpv6;
        put_layer(key, mask, kLayerIpv4 | kLayerIpv6, kLayerIpv6);
        put(key.ip_tos, mask.ip_tos, sp.tclass, m.tclass);
        put(key.ip6_flow, mask.ip6_flow, sp.flow_label & 0xfffff, m.flow_label & 0xfffff);
        put(key.ip_proto, mask.ip_proto, sp.proto, m.proto);
        put(key.ip_ttl, mask.ip_ttl, sp.hop_limit, m.hop_limit);
        if (m.has_frag_ext) put_layer(key, mask, kLayerIp6Frag, sp.has_frag_ext ? kLayerIp6Frag : 0);
        put(key.ip6_src, mask.ip6_src, sp.src, m.src);
        put(key.ip6_dst, mask.ip6_dst, sp.dst, m.dst);
        break;
      }
      case FlowItemType::tcp:
      case FlowItemType::udp:
      case FlowItemType::icmp:
      case FlowItemType::icmp6: {
        if (auto s = at(4); !s) return s;
        constexpr uint16_t kL4 = kLayerTcp | kLayerUdp | kLayerIcmp | kLayerIcmp6;
        if (it.type == FlowItemType::tcp) {
          put_layer(key, mask, kL4, kLayerTcp);
          put(key.tp_src, mask.tp_src, it.spec.tcp.src, it.mask.tcp.src);
          put(key.tp_dst, mask.tp_dst, it.spec.tcp.dst, it.mask.tcp.dst);
          put(key.tcp_flags, mask.tcp_flags, it.spec.tcp.flags, it.mask.tcp.flags);
        } else if (it.type == FlowItemType::udp) {
          put_layer(key, mask, kL4, kLayerUdp);
          put(key.tp_src, mask.tp_src, it.spec.udp.src, it.mask.udp.src);
          put(key.tp_dst, mask.tp_dst, it.spec.udp.dst, it.mask.udp.dst);
        } else {
          const bool v4 = it.type == FlowItemType::icmp;
          if (l3 == (v4 ? kLayerIpv6 : kLayerIpv4))
            return fail(EINVAL, i, v4 ? "icmp after ipv6 (icmp6 is ICMPv6)" : "icmp6 after ipv4");
          put_layer(key, mask, kL4, v4 ? kLayerIcmp : kLayerIcmp6);
          put(key.icmp_type, mask.icmp_type, it.spec.icmp.type, it.mask.icmp.type);
          put(key.icmp_code, mask.icmp_code, it.spec.icmp.code, it.mask.icmp.code);
        }
        break;
      }
      case FlowItemType::vxlan: {
        if (!(key.layers & mask.layers & kLayerUdp)) return fail(EINVAL, i, "vxlan must follow udp");
        if (auto s = at(5); !s) return s;
        put_layer(key, mask, kLayerVxlan, kLayerVxlan);
        put(key.vni, mask.vni, it.spec.vxlan.vni & 0xffffff, it.mask.vxlan.vni & 0xffffff);
        put(key.vxlan_flags, mask.vxlan_flags, it.spec.vxlan.flags, it.mask.vxlan.flags);
        break;
      }
      case FlowItemType::mark:
        put(key.mark, mask.mark, it.spec.mark.id, it.mask.mark.id);
        break;
      case FlowItemType::meta:
        put(key.meta, mask.meta, it.spec.meta.data, it.mask.meta.data);
        break;
      case FlowItemType::port_id:
      case FlowItemType::represented_port: {
        const uint32_t id = it.spec.port.id & it.mask.port.id;
        if (id > 0xffff) return fail(ENODEV, i, "no port " + std::to_string(id));
        if (!attr.transfer) {
          if (id != owner) return fail(EINVAL, i, "an ingress rule matches only its own port; use transfer");
        } else {
          put(key.in_port, mask.in_port, static_cast<uint16_t>(id), static_cast<uint16_t>(0xffff));
        }
        break;
      }
      default:
        return fail(ENOTSUP, i, "unknown item");
    }
  }
  return {};
}

bool apply_edits(Packet& p, const SimActions& a) noexcept {
  SimKey k{};
  WireLayout lay;
  parse_wire(p.data(), p.len(), k, lay);
  for (unsigned i = 0; i < a.n_edits; ++i) {
    const FlowAction& e = a.edits[i];
    uint8_t* d = p.data();
    uint8_t* ip = d + lay.l3;
    switch (e.type) {
      case FlowActionType::set_mac_src:
        if (p.len() >= 12) std::memcpy(d + 6, e.conf.mac.data(), 6);
        break;
      case FlowActionType::set_mac_dst:
        if (p.len() >= 6) std::memcpy(d, e.conf.mac.data(), 6);
        break;
      case FlowActionType::set_ipv4_src:
      case FlowActionType::set_ipv4_dst: {
        if (!lay.ipv4) break;
        uint8_t* f = ip + (e.type == FlowActionType::set_ipv4_src ? 12 : 16);
        const uint32_t old = rd32(f), nw = e.conf.ipv4;
        wr32(f, nw);
        wr16(ip + 10, csum32(rd16(ip + 10), old, nw));
        update_l4_csum(p, lay, old, nw, true);
        break;
      }
      case FlowActionType::set_ipv4_dscp:
      case FlowActionType::set_ipv4_ttl: {
        if (!lay.ipv4) break;
        const bool dscp = e.type == FlowActionType::set_ipv4_dscp;
        uint8_t* w = ip + (dscp ? 0 : 8);
        const uint16_t old = rd16(w);
        if (dscp)
          w[1] = static_cast<uint8_t>((e.conf.dscp & 0x3f) << 2 | (w[1] & 3));
        else
          w[0] = e.conf.ttl;
        wr16(ip + 10, csum16(rd16(ip + 10), old, rd16(w)));
        break;
      }
      case FlowActionType::set_ipv6_src:
      case FlowActionType::set_ipv6_dst: {
        if (!lay.ipv6) break;
        uint8_t* f = ip + (e.type == FlowActionType::set_ipv6_src ? 8 : 24);
        for (unsigned w = 0; w < 16; w += 4) {
          const uint32_t old = rd32(f + w);
          const uint32_t nw = rd32(e.conf.ipv6.data() + w);
          wr32(f + w, nw);
          update_l4_csum(p, lay, old, nw, true);
        }
        break;
      }
      case FlowActionType::set_ipv6_dscp: {
        if (!lay.ipv6) break;
        uint32_t w = rd32(ip);
        const uint32_t tc = (w >> 20) & 0xff;
        const uint32_t ntc = (uint32_t{e.conf.dscp} & 0x3f) << 2 | (tc & 3);
        w = (w & ~(0xffu << 20)) | ntc << 20;
        wr32(ip, w);
        break;
      }
      case FlowActionType::set_ipv6_hop:
        if (lay.ipv6) ip[7] = e.conf.ttl;
        break;
      case FlowActionType::set_tp_src:
      case FlowActionType::set_tp_dst: {
        if (lay.l4 == 0 || (lay.l4_proto != 6 && lay.l4_proto != 17)) break;
        uint8_t* f = d + lay.l4 + (e.type == FlowActionType::set_tp_src ? 0 : 2);
        const uint16_t old = rd16(f);
        wr16(f, e.conf.tp_port);
        update_l4_csum(p, lay, old, e.conf.tp_port, false);
        break;
      }
      case FlowActionType::of_push_vlan: {
        const uint16_t tci = 0;  // the of_set_vlan_* that follow fill it (see sim_flow.h)
        uint8_t* nd = p.push_front(4);
        if (nd == nullptr) return false;
        std::memmove(nd, nd + 4, 12);
        wr16(nd + 12, e.conf.ethertype);
        wr16(nd + 14, tci);
        parse_wire(p.data(), p.len(), k, lay);
        break;
      }
      case FlowActionType::of_pop_vlan: {
        if (!lay.vlans) break;
        std::memmove(d + 4, d, 12);
        (void)p.pull_front(4);
        k = SimKey{};
        parse_wire(p.data(), p.len(), k, lay);
        break;
      }
      case FlowActionType::of_set_vlan_vid:
        if (lay.vlans) wr16(d + 14, static_cast<uint16_t>((rd16(d + 14) & 0xf000) | (e.conf.vid & 0x0fff)));
        break;
      case FlowActionType::of_set_vlan_pcp:
        if (lay.vlans) wr16(d + 14, static_cast<uint16_t>((rd16(d + 14) & 0x1fff) | (e.conf.pcp & 7) << 13));
        break;
      default:
        break;
    }
  }
  return true;
}

void RwSpin::lock_shared() noexcept {
  for (;;) {
    uint32_t s = state_.load(std::memory_order_relaxed);
    if (!(s & kWriter) && state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire))
      return;
    cpu_relax();
  }
}

void RwSpin::lock() noexcept {
  for (;;) {  // take the writer bit (one writer at a time)...
    uint32_t s = state_.load(std::memory_order_relaxed);
    if (!(s & kWriter) && state_.compare_exchange_weak(s, s | kWriter, std::memory_order_acquire)) break;
    cpu_relax();
  }
  while (state_.load(std::memory_order_acquire) != kWriter) cpu_relax();  // ...then let readers drain
}

// ---------------------------------------------------------------- model ---

namespace {

struct SimRule {
  uint32_t seq = 0;    // bumped on every free: stale handles don't match
  bool live = false;   // allocated (a handle exists)
  bool in_table = false;
  bool exact = false;
  uint8_t shape = 0;  // exact only
  uint16_t owner = kInvalidPort;
  uint32_t table = 0;  // template table + 1, 0: sync rule
  uint32_t priority = 0;
  uint64_t order = 0;  // creation order (ties)
  uint64_t created_ns = 0;  // when it went into a table (AGE counts from there until a hit)
  SimKey key{}, mask{};
  SimActions act;
  std::atomic<uint64_t> hits{0}, bytes{0}, last_hit_ns{0};
};

constexpr unsigned kChunkBits = 12;  // 4096 rules per chunk
constexpr uint32_t kChunk = 1u << kChunkBits;

struct Shape {
  SimKey mask{};
  uint32_t rules = 0;
  bool used = false;
};

struct ExactEntry {
  uint32_t hash = 0;
  uint32_t slot1 = 0;  // slot + 1; 0 empty
};

struct PatternTemplate {
  FlowTemplateAttr attr;
  FlowPattern pattern;
  bool live = false;
};
struct ActionsTemplate {
  FlowTemplateAttr attr;
  FlowActions actions;
  bool live = false;
};
struct TemplateTable {
  FlowAttr attr;
  uint32_t capacity = 0, rules = 0;
  std::vector<FlowTemplateId> ptpls, atpls;
  bool live = false;
};

struct AsyncOp {
  bool create = true;
  uint64_t user_data = 0;
  FlowHandle handle = kNoFlow;
};
// pending + done never exceed the queue size, and both are reserved to
// it at configure(): queueing and completing allocate nothing.
struct AsyncQueue {
  std::vector<AsyncOp> pending;
  std::vector<FlowOpResult> done;  // completions from done_head on
  size_t done_head = 0;
  size_t done_count() const { return done.size() - done_head; }
  // Drops the completions already pulled, so that appending stays within
  // the reserved capacity.
  void compact() {
    if (done_head == 0) return;
    done.erase(done.begin(), done.begin() + static_cast<std::ptrdiff_t>(done_head));
    done_head = 0;
  }
};

struct Fault {
  std::atomic<unsigned> left{0};
  std::atomic<int> errnum{0};
  // Takes one failure if armed; returns its errno or 0.
  int take() noexcept {
    unsigned n = left.load(std::memory_order_relaxed);
    while (n != 0 && !left.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
    }
    return n != 0 ? errnum.load(std::memory_order_relaxed) : 0;
  }
};

inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

}  // namespace

class SimPortEngine;

class SimNicModel final : public SimNic, public HwIngress {
 public:
  explicit SimNicModel(uint32_t capacity)
      : board_capacity_(capacity),
        exact_capacity_(capacity - std::max<uint32_t>(capacity / 16, 1)),
        masked_capacity_(std::max<uint32_t>(capacity / 16, 1)) {
    resize_exact(exact_capacity_);
    chunks_.reserve((1u << 24) / kChunk);  // growing it never reallocates under the write lock
    set_costs(kDefaultCosts);
  }

  // --- SimNic (control) ---
  SimNicCosts costs() const override {
    return {cost_sync_create_.load(relaxed), cost_sync_destroy_.load(relaxed), cost_batch_.load(relaxed),
            cost_rule_.load(relaxed), cost_query_.load(relaxed)};
  }
  void set_costs(const SimNicCosts& c) override {
    cost_sync_create_.store(c.sync_create_ns, relaxed);
    cost_sync_destroy_.store(c.sync_destroy_ns, relaxed);
    cost_batch_.store(c.async_batch_ns, relaxed);
    cost_rule_.store(c.async_rule_ns, relaxed);
    cost_query_.store(c.query_ns, relaxed);
  }
  void set_async_api(bool on) override { async_api_.store(on, relaxed); }
  void set_keep_order(bool on) override { keep_order_.store(on, relaxed); }
  void fail_next_creates(unsigned n, int errnum) override { arm(create_fault_, n, errnum); }
  void fail_next_destroys(unsigned n, int errnum) override { arm(destroy_fault_, n, errnum); }
  void fail_next_queries(unsigned n, int errnum) override { arm(query_fault_, n, errnum); }
  void set_table_full(bool on) override { table_full_.store(on, relaxed); }
  Status set_capacity(uint32_t exact, uint32_t masked) override {
    if (exact > board_capacity_ || masked > board_capacity_)
      return error(Errc::invalid_argument, "capacity above the board's offload_flows (" +
                                               std::to_string(board_capacity_) + ")");
    std::lock_guard g(ctl_);
    try {
      std::vector<ExactEntry> nb(bucket_count_for(std::max(exact, exact_rules_)));
      tables_.lock();
      rehash_into(nb);
      exact_capacity_.store(exact, relaxed);
      masked_capacity_.store(masked, relaxed);
      tables_.unlock();
    } catch (const std::bad_alloc&) {
      return error(Errc::resource_exhausted, "out of memory resizing the exact-match table");
    }
    return {};
  }
  void reset() override;
  void clear_faults() override {
    for (Fault* f : {&create_fault_, &destroy_fault_, &query_fault_}) f->left.store(0, relaxed);
    table_full_.store(false, relaxed);
  }
  std::string describe() const override;
  SimNicStats stats() const override;

  // --- HwIngress (PMD) ---
  uint16_t ingress(Port& in, uint16_t q, std::span<Packet*> pkts) noexcept override;

  // --- attach/detach (control thread) ---
  void attach(Port& port, SimNicPort& hw);
  void detach(SimNicPort& hw) noexcept;

  // --- engine entry points (SimPortEngine) ---
  FlowEngineInfo info() const {
    FlowEngineInfo i;
    i.async_api = async_api_.load(relaxed);
    i.max_queues = kMaxFlowQueues;
    i.queue_size = kMaxQueueSize;
    i.max_counters = board_capacity_;
    i.max_aging = board_capacity_;
    i.exact_capacity = exact_capacity_.load(relaxed);
    i.masked_capacity = masked_capacity_.load(relaxed);
    i.reset_generation = generation_.load(relaxed);
    return i;
  }
  bool async_on() const { return async_api_.load(relaxed); }

  // A rule compiled and checked, not yet in a table.
  struct Prepared {
    SimKey key, mask;
    SimActions act;
    uint32_t priority = 0;
    uint32_t table = 0;
  };
  Status prepare(const SimPortEngine& e, const FlowAttr& attr, const FlowPattern& pattern, const FlowActions& actions,
                 Prepared& out, FlowError* err, const char* op);
  // Reserves a slot for a rule and returns its handle (ctl_ held).
  Result<FlowHandle> reserve(const SimPortEngine& e, const Prepared& p);
  // Puts a reserved rule in its table (capacity, faults); 0 or an errno and
  // the rule freed (ctl_ held).
  int install(FlowHandle h, std::string* why);
  // Removes and frees a rule; 0 or an errno (ctl_ held).
  int remove(FlowHandle h, uint16_t owner);
  // Reads a rule's counters (ctl_ held).
  bool read(FlowHandle h, uint16_t owner, FlowQuery& q);
  // Removes every rule of owner (flush) (ctl_ held).
  void remove_owned(uint16_t owner);
  Port* port_by_id(uint32_t id, SimNicPort** hw) const;
  uint64_t generation() const { return generation_.load(relaxed); }

  mutable std::mutex ctl_;  // engine calls of every port (see sim_flow.h)
  std::atomic<uint64_t> cost_sync_create_{0}, cost_sync_destroy_{0}, cost_batch_{0}, cost_rule_{0},
      cost_query_{0};
  Fault create_fault_, destroy_fault_, query_fault_;
  std::atomic<uint64_t> st_creates_{0}, st_create_failures_{0}, st_destroys_{0}, st_destroy_failures_{0},
      st_queries_{0}, st_query_failures_{0}, st_injected_{0}, st_async_pending_{0};
  std::atomic<uint64_t> st_fwd_{0}, st_drop_{0}, st_marked_{0}, st_to_pmd_{0}, st_tx_drop_{0};

 private:
  static constexpr auto relaxed = std::memory_order_relaxed;

  static void arm(Fault& f, unsigned n, int errnum) {
    f.errnum.store(errnum, relaxed);
    f.left.store(n, relaxed);
  }
  static size_t bucket_count_for(uint32_t cap) { return std::bit_ceil<size_t>(std::max<size_t>(64, size_t{cap} * 2)); }
  void resize_exact(uint32_t cap) {
    exact_.assign(bucket_count_for(cap), ExactEntry{});
  }
  SimRule& rule(uint32_t slot) const { return chunks_[slot >> kChunkBits][slot & (kChunk - 1)]; }
  static uint32_t slot_of(FlowHandle h) { return static_cast<uint32_t>(h & 0xffffff); }
  static uint32_t seq_of(FlowHandle h) { return static_cast<uint32_t>((h >> 24) & 0xffffff); }
  static uint64_t gen_of(FlowHandle h) { return h >> 48; }
  FlowHandle handle_of(uint32_t slot) const {
    return (generation_.load(relaxed) & 0xffff) << 48 | uint64_t{rule(slot).seq & 0xffffff} << 24 | slot;
  }
  // The live rule of a handle (ctl_ held), or null with *why an errno.
  SimRule* lookup_handle(FlowHandle h, int* why) const {
    if (h == kNoFlow) return *why = EINVAL, nullptr;
    if (gen_of(h) != (generation_.load(relaxed) & 0xffff)) return *why = ENODEV, nullptr;
    const uint32_t s = slot_of(h);
    if (s >= n_slots_) return *why = ENOENT, nullptr;
    SimRule& r = rule(s);
    if (!r.live || (r.seq & 0xffffff) != seq_of(h)) return *why = ENOENT, nullptr;
    return &r;
  }
  void free_slot_locked(uint32_t s) {
    SimRule& r = rule(s);
    r.live = r.in_table = false;
    r.seq = (r.seq + 1) & 0xffffff;
    if (r.seq == 0) r.seq = 1;
    free_.push_back(s);  // capacity reserved when the slot was made
  }
  void rehash_into(std::vector<ExactEntry>& nb) {
    const size_t m = nb.size() - 1;
    for (const ExactEntry& e : exact_) {
      if (!e.slot1) continue;
      size_t i = e.hash & m;
      while (nb[i].slot1) i = (i + 1) & m;
      nb[i] = e;
    }
    exact_.swap(nb);
  }
  void exact_insert(uint32_t slot, uint32_t hash) {
    const size_t m = exact_.size() - 1;
    size_t i = hash & m;
    while (exact_[i].slot1) i = (i + 1) & m;
    exact_[i] = {hash, slot + 1};
  }
  // Linear probing with backward-shift deletion (no tombstones).
  void exact_erase(uint32_t slot, uint32_t hash) {
    const size_t m = exact_.size() - 1;
    size_t i = hash & m;
    while (exact_[i].slot1 != slot + 1) {
      if (!exact_[i].slot1) return;
      i = (i + 1) & m;
    }
    size_t j = i;
    for (;;) {
      j = (j + 1) & m;
      if (!exact_[j].slot1) break;
      const size_t home = exact_[j].hash & m;
      // Move j back to i unless its home lies cyclically in (i, j].
      const bool keep = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (keep) continue;
      exact_[i] = exact_[j];
      i = j;
    }
    exact_[i] = ExactEntry{};
  }
  uint32_t exact_hash(const SimRule& r) const { return hash_words(words(r.key), r.shape); }
  int find_shape(const SimKey& mask) const {
    for (unsigned i = 0; i < shapes_.size(); ++i)
      if (shapes_[i].used && std::memcmp(&shapes_[i].mask, &mask, sizeof mask) == 0) return static_cast<int>(i);
    return -1;
  }
  void rebuild_active_shapes() {
    n_shapes_active_ = 0;
    for (unsigned i = 0; i < shapes_.size(); ++i)
      if (shapes_[i].used) active_shapes_[n_shapes_active_++] = static_cast<uint8_t>(i);
  }
  // Packet lookup in one group (tables_ read-locked).
  SimRule* lookup(const SimKey& pk) const noexcept;
  void send_batch(SimNicPort* hw, Port* out, std::span<Packet*> pkts) noexcept;

  const uint32_t board_capacity_;
  std::atomic<uint32_t> exact_capacity_, masked_capacity_;
  std::atomic<bool> async_api_{true}, keep_order_{false}, table_full_{false};
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint32_t> active_{0};  // rules in tables (ingress skips the lock at 0)

  // Tables: written under tables_ (write) with ctl_ held, read by PMDs under
  // tables_ (read); ctl_ holders read them without tables_.
  mutable RwSpin tables_;
  std::vector<std::unique_ptr<SimRule[]>> chunks_;
  uint32_t n_slots_ = 0;
  std::vector<uint32_t> free_;  // free slots (ctl_)
  std::vector<ExactEntry> exact_;
  uint32_t exact_rules_ = 0;
  std::array<Shape, kMaxExactShapes> shapes_{};
  std::array<uint8_t, kMaxExactShapes> active_shapes_{};
  unsigned n_shapes_active_ = 0;
  std::vector<uint32_t> masked_;  // slots in (group, priority, order) order
  uint64_t next_order_ = 0;

  struct Attached {
    Port* port;
    SimNicPort* hw;
  };
  std::vector<Attached> ports_;  // (ctl_; read by PMDs never)
  std::vector<SimPortEngine*> engines_;

 public:
  // Template tables are per engine; the model counts their rules (ctl_).
  friend class SimPortEngine;
};

// ----------------------------------------------------------- port engine ---

class SimPortEngine final : public FlowEngine {
 public:
  SimPortEngine(SimNicModel& nic, Port& port) : nic_(nic), port_(port) {}

  FlowEngineInfo info() const override { return nic_.info(); }
  const std::string& port_name() const override { return port_.name(); }
  uint16_t owner() const { return port_.id(); }
  Port& port() const { return port_; }

  Status validate(const FlowAttr& attr, const FlowPattern& pattern, const FlowActions& actions,
                  FlowError* err) override {
    std::lock_guard g(nic_.ctl_);
    SimNicModel::Prepared p;
    return nic_.prepare(*this, attr, pattern, actions, p, err, "validate");
  }

  Result<FlowHandle> create(const FlowAttr& attr, const FlowPattern& pattern, const FlowActions& actions,
                            FlowError* err) override {
    Result<FlowHandle> r = do_create(attr, pattern, actions, err);
    spend(nic_.cost_sync_create_.load(std::memory_order_relaxed));  // the device's time, success or not
    return r;
  }

  Status destroy(FlowHandle h, FlowError* err) override {
    int e;
    {
      std::lock_guard g(nic_.ctl_);
      e = nic_.destroy_fault_.take();
      if (e) bump(nic_.st_injected_);
      else e = nic_.remove(h, owner());
    }
    spend(nic_.cost_sync_destroy_.load(std::memory_order_relaxed));
    if (e) return handle_error(err, "destroy", e);
    return {};
  }

  Status query(FlowHandle h, FlowQuery& q, FlowError* err) override {
    const int e = query_one(h, q);
    spend(nic_.cost_query_.load(std::memory_order_relaxed));
    if (e) return handle_error(err, "query", e);
    return {};
  }

  unsigned query_bulk(std::span<const FlowHandle> handles, std::span<FlowQuery> out) override {
    unsigned ok = 0;
    const size_t n = std::min(handles.size(), out.size());
    for (size_t i = 0; i < n; ++i) ok += query_one(handles[i], out[i]) == 0;
    spend(nic_.cost_query_.load(std::memory_order_relaxed) * n);
    return ok;
  }

  Status flush(FlowError*) override {
    std::lock_guard g(nic_.ctl_);
    nic_.remove_owned(owner());
    return {};
  }

  // --- template + queue API ---
  Status configure(uint16_t n_queues, uint32_t queue_size, FlowError* err) override {
    if (!nic_.async_on()) return no_async("configure", err);
    if (n_queues == 0 || n_queues > kMaxFlowQueues || queue_size == 0 || queue_size > kMaxQueueSize)
      return flow_fail(err, "configure", port_name(), EINVAL, FlowErrorWhere::queue, -1, -1,
                       "queues 1.." + std::to_string(kMaxFlowQueues) + " of 1.." + std::to_string(kMaxQueueSize) +
                           " operations");
    std::lock_guard g(nic_.ctl_);
    for (const AsyncQueue& q : queues_)
      if (!q.pending.empty() || q.done_count())
        return flow_fail(err, "configure", port_name(), EBUSY, FlowErrorWhere::queue, -1, -1,
                         "operations still queued");
    try {
      std::vector<AsyncQueue> qs(n_queues);
      for (AsyncQueue& q : qs) q.pending.reserve(queue_size), q.done.reserve(queue_size);
      queues_.swap(qs);
    } catch (const std::bad_alloc&) {
      return flow_fail(err, "configure", port_name(), ENOMEM, FlowErrorWhere::device, -1, -1, "out of memory");
    }
    queue_size_ = queue_size;
    return {};
  }

  Result<FlowTemplateId> pattern_template(const FlowTemplateAttr& attr, const FlowPattern& pattern,
                                          FlowError* err) override {
    if (!nic_.async_on()) return no_async("pattern_template", err);
    std::lock_guard g(nic_.ctl_);
    if (auto s = check_configured("pattern_template", err); !s) return s;
    SimKey k, m;
    FlowAttr a;
    a.ingress = attr.ingress, a.egress = attr.egress, a.transfer = attr.transfer;
    if (auto s = compile_pattern(a, pattern, owner(), k, m, err, port_name(), "pattern_template"); !s) return s;
    ptpls_.push_back({attr, pattern, true});
    return static_cast<FlowTemplateId>(ptpls_.size());
  }

  Result<FlowTemplateId> actions_template(const FlowTemplateAttr& attr, const FlowActions& actions,
                                          const FlowActions& masks, FlowError* err) override {
    if (!nic_.async_on()) return no_async("actions_template", err);
    std::lock_guard g(nic_.ctl_);
    if (auto s = check_configured("actions_template", err); !s) return s;
    if (masks.count != actions.count)
      return flow_fail(err, "actions_template", port_name(), EINVAL, FlowErrorWhere::action, masks.count, -1,
                       "masks and actions differ in length");
    for (unsigned i = 0; i < actions.count; ++i)
      if (masks.actions[i].type != actions.actions[i].type)
        return flow_fail(err, "actions_template", port_name(), EINVAL, FlowErrorWhere::action, static_cast<int>(i),
                         static_cast<int>(masks.actions[i].type), "mask type differs from the action's");
    atpls_.push_back({attr, actions, true});
    return static_cast<FlowTemplateId>(atpls_.size());
  }

  Result<FlowTableId> template_table(const FlowAttr& attr, uint32_t capacity,
                                     std::span<const FlowTemplateId> pattern_templates,
                                     std::span<const FlowTemplateId> actions_templates, FlowError* err) override {
    if (!nic_.async_on()) return no_async("template_table", err);
    std::lock_guard g(nic_.ctl_);
    if (auto s = check_configured("template_table", err); !s) return s;
    auto bad = [&](std::string msg) {
      return flow_fail(err, "template_table", port_name(), EINVAL, FlowErrorWhere::table, -1, -1, std::move(msg));
    };
    if (capacity == 0) return bad("a table holds at least one rule");
    if (capacity > nic_.board_capacity_)
      return flow_fail(err, "template_table", port_name(), ENOSPC, FlowErrorWhere::table, -1, -1,
                       "capacity " + std::to_string(capacity) + " above the device's " +
                           std::to_string(nic_.board_capacity_));
    if (pattern_templates.empty() || actions_templates.empty()) return bad("a table needs pattern and actions templates");
    for (FlowTemplateId t : pattern_templates)
      if (t == 0 || t > ptpls_.size() || !ptpls_[t - 1].live) return bad("no pattern template " + std::to_string(t));
    for (FlowTemplateId t : actions_templates)
      if (t == 0 || t > atpls_.size() || !atpls_[t - 1].live) return bad("no actions template " + std::to_string(t));
    TemplateTable tt;
    tt.attr = attr;
    tt.capacity = capacity;
    tt.ptpls.assign(pattern_templates.begin(), pattern_templates.end());
    tt.atpls.assign(actions_templates.begin(), actions_templates.end());
    tt.live = true;
    tables_.push_back(std::move(tt));
    return static_cast<FlowTableId>(tables_.size());
  }

  Status destroy_template_table(FlowTableId t, FlowError* err) override {
    std::lock_guard g(nic_.ctl_);
    if (t == 0 || t > tables_.size() || !tables_[t - 1].live)
      return flow_fail(err, "destroy_template_table", port_name(), ENOENT, FlowErrorWhere::table, -1, -1,
                       "no table " + std::to_string(t));
    if (tables_[t - 1].rules)
      return flow_fail(err, "destroy_template_table", port_name(), EBUSY, FlowErrorWhere::table, -1, -1,
                       "the table still holds " + std::to_string(tables_[t - 1].rules) + " rules");
    tables_[t - 1].live = false;
    return {};
  }
  Status destroy_pattern_template(FlowTemplateId t, FlowError* err) override {
    return drop_template(ptpls_, t, "destroy_pattern_template", err, true);
  }
  Status destroy_actions_template(FlowTemplateId t, FlowError* err) override {
    return drop_template(atpls_, t, "destroy_actions_template", err, false);
  }

  Status async_create(uint16_t queue, FlowTableId table, const FlowPattern& pattern, uint8_t ptpl_index,
                      const FlowActions& actions, uint8_t atpl_index, bool postpone, uint64_t user_data,
                      FlowHandle* out, FlowError* err) override {
    if (out) *out = kNoFlow;
    if (!nic_.async_on()) return no_async("async_create", err);
    {
      std::lock_guard g(nic_.ctl_);
      if (auto s = check_queue("async_create", queue, err); !s) return s;
      auto bad = [&](FlowErrorWhere w, int idx, int type, std::string msg) {
        return flow_fail(err, "async_create", port_name(), EINVAL, w, idx, type, std::move(msg));
      };
      if (table == 0 || table > tables_.size() || !tables_[table - 1].live)
        return bad(FlowErrorWhere::table, -1, -1, "no table " + std::to_string(table));
      TemplateTable& tt = tables_[table - 1];
      if (ptpl_index >= tt.ptpls.size()) return bad(FlowErrorWhere::table, -1, -1, "no pattern template index");
      if (atpl_index >= tt.atpls.size()) return bad(FlowErrorWhere::table, -1, -1, "no actions template index");
      const FlowPattern& tp = ptpls_[tt.ptpls[ptpl_index] - 1].pattern;
      const FlowActions& ta = atpls_[tt.atpls[atpl_index] - 1].actions;
      if (pattern.count != tp.count)
        return bad(FlowErrorWhere::item, std::min(pattern.count, tp.count), -1, "items differ from the pattern template");
      // The template's masks apply to the rule's values (rte_flow's template API).
      FlowPattern eff = pattern;
      for (unsigned i = 0; i < pattern.count; ++i) {
        if (pattern.items[i].type != tp.items[i].type)
          return bad(FlowErrorWhere::item, static_cast<int>(i), static_cast<int>(pattern.items[i].type),
                     std::string("item differs from the template's (") + to_string(tp.items[i].type) + ")");
        eff.items[i].mask = tp.items[i].mask;
      }
      if (actions.count != ta.count)
        return bad(FlowErrorWhere::action, std::min(actions.count, ta.count), -1, "actions differ from the template");
      for (unsigned i = 0; i < actions.count; ++i)
        if (actions.actions[i].type != ta.actions[i].type)
          return bad(FlowErrorWhere::action, static_cast<int>(i), static_cast<int>(actions.actions[i].type),
                     std::string("action differs from the template's (") + to_string(ta.actions[i].type) + ")");
      AsyncQueue& aq = queues_[queue];
      if (aq.pending.size() + aq.done_count() >= queue_size_)
        return flow_fail(err, "async_create", port_name(), EAGAIN, FlowErrorWhere::queue, -1, -1,
                         "queue " + std::to_string(queue) + " full: push and pull first");
      SimNicModel::Prepared p;
      if (auto s = nic_.prepare(*this, tt.attr, eff, actions, p, err, "async_create"); !s) return s;
      p.table = table;
      auto h = nic_.reserve(*this, p);
      if (!h) return flow_fail(err, "async_create", port_name(), ENOMEM, FlowErrorWhere::device, -1, -1,
                               h.status().message());
      aq.pending.push_back({true, user_data, h.value()});  // reserved: no allocation
      bump(nic_.st_async_pending_);
      if (out) *out = h.value();
    }
    if (!postpone) return push(queue, err);
    return {};
  }

  Status async_destroy(uint16_t queue, FlowHandle h, bool postpone, uint64_t user_data, FlowError* err) override {
    if (!nic_.async_on()) return no_async("async_destroy", err);
    {
      std::lock_guard g(nic_.ctl_);
      if (auto s = check_queue("async_destroy", queue, err); !s) return s;
      AsyncQueue& aq = queues_[queue];
      if (aq.pending.size() + aq.done_count() >= queue_size_)
        return flow_fail(err, "async_destroy", port_name(), EAGAIN, FlowErrorWhere::queue, -1, -1,
                         "queue " + std::to_string(queue) + " full: push and pull first");
      aq.pending.push_back({false, user_data, h});
      bump(nic_.st_async_pending_);
    }
    if (!postpone) return push(queue, err);
    return {};
  }

  Status push(uint16_t queue, FlowError* err) override {
    if (!nic_.async_on()) return no_async("push", err);
    size_t n = 0;
    {
      std::lock_guard g(nic_.ctl_);
      if (auto s = check_queue("push", queue, err); !s) return s;
      AsyncQueue& aq = queues_[queue];
      aq.compact();
      n = aq.pending.size();
      for (const AsyncOp& op : aq.pending) {
        FlowOpResult r{op.user_data, true, 0, op.handle};
        if (op.create) {
          std::string why;
          const int e = nic_.install(op.handle, &why);
          if (e) r.ok = false, r.errnum = e;
        } else {
          int e = nic_.destroy_fault_.take();
          if (e) bump(nic_.st_injected_);
          else e = nic_.remove(op.handle, owner());
          if (e) r.ok = false, r.errnum = e;
        }
        aq.done.push_back(r);
      }
      aq.pending.clear();
      nic_.st_async_pending_.fetch_sub(n, std::memory_order_relaxed);
    }
    if (n) spend(nic_.cost_batch_.load(std::memory_order_relaxed) + n * nic_.cost_rule_.load(std::memory_order_relaxed));
    return {};
  }

  unsigned pull(uint16_t queue, std::span<FlowOpResult> out, FlowError* err) override {
    if (!nic_.async_on()) {
      (void)no_async("pull", err);
      return 0;
    }
    std::lock_guard g(nic_.ctl_);
    if (!check_queue("pull", queue, err)) return 0;
    AsyncQueue& aq = queues_[queue];
    unsigned n = 0;
    while (n < out.size() && aq.done_head < aq.done.size()) out[n++] = aq.done[aq.done_head++];
    if (aq.done_head == aq.done.size()) aq.done.clear(), aq.done_head = 0;  // keeps the capacity
    return n;
  }

  // A device reset (ctl_ held): queued operations complete with ENODEV;
  // template tables are emptied.
  void on_reset() {
    for (AsyncQueue& aq : queues_) {
      aq.compact();
      for (const AsyncOp& op : aq.pending) aq.done.push_back({op.user_data, false, ENODEV, op.handle});
      nic_.st_async_pending_.fetch_sub(aq.pending.size(), std::memory_order_relaxed);
      aq.pending.clear();
    }
    for (TemplateTable& t : tables_) t.rules = 0;
  }
  void table_rules_changed(uint32_t table, int delta) {
    if (table && table <= tables_.size()) tables_[table - 1].rules += delta;
  }
  bool table_has_room(uint32_t table) const {
    return table == 0 || table > tables_.size() || tables_[table - 1].rules < tables_[table - 1].capacity;
  }

 private:
  Result<FlowHandle> do_create(const FlowAttr& attr, const FlowPattern& pattern, const FlowActions& actions,
                               FlowError* err) {
    std::lock_guard g(nic_.ctl_);
    SimNicModel::Prepared p;
    if (auto s = nic_.prepare(*this, attr, pattern, actions, p, err, "create"); !s) {
      bump(nic_.st_create_failures_);
      return s;
    }
    auto h = nic_.reserve(*this, p);
    if (!h) {
      bump(nic_.st_create_failures_);
      return flow_fail(err, "create", port_name(), ENOMEM, FlowErrorWhere::device, -1, -1, h.status().message());
    }
    std::string why;
    if (const int e = nic_.install(h.value(), &why))
      return flow_fail(err, "create", port_name(), e, FlowErrorWhere::device, -1, -1, why);
    return h.value();
  }

  int query_one(FlowHandle h, FlowQuery& q) {
    q = FlowQuery{};
    std::lock_guard g(nic_.ctl_);
    bump(nic_.st_queries_);
    int e = nic_.query_fault_.take();
    if (e) {
      bump(nic_.st_injected_);
    } else if (!nic_.read(h, owner(), q)) {
      e = q.errnum;
    }
    if (e) {
      bump(nic_.st_query_failures_);
      q.ok = false;
      q.errnum = e;
    }
    return e;
  }

  Status handle_error(FlowError* err, const char* op, int e) const {
    std::string msg = e == ENODEV ? "the device was reset: the rule is gone"
                      : e == ENOENT ? "no such rule"
                      : e == ENOTSUP ? "the rule has no count action"
                                     : "injected fault";
    return flow_fail(err, op, port_name(), e, FlowErrorWhere::handle, -1, -1, std::move(msg));
  }
  Status check_configured(const char* op, FlowError* err) const {
    if (queues_.empty())
      return flow_fail(err, op, port_name(), EINVAL, FlowErrorWhere::device, -1, -1, "configure() the port first");
    return {};
  }
  Status check_queue(const char* op, uint16_t queue, FlowError* err) const {
    if (queues_.empty())
      return flow_fail(err, op, port_name(), EINVAL, FlowErrorWhere::queue, -1, -1, "configure() the port first");
    if (queue >= queues_.size())
      return flow_fail(err, op, port_name(), EINVAL, FlowErrorWhere::queue, -1, -1,
                       "no queue " + std::to_string(queue) + " (configured " + std::to_string(queues_.size()) + ")");
    return {};
  }
  template <typename T>
  Status drop_template(std::vector<T>& v, FlowTemplateId t, const char* op, FlowError* err, bool pattern) {
    std::lock_guard g(nic_.ctl_);
    if (t == 0 || t > v.size() || !v[t - 1].live)
      return flow_fail(err, op, port_name(), ENOENT, FlowErrorWhere::table, -1, -1, "no template " + std::to_string(t));
    for (const TemplateTable& tt : tables_) {
      if (!tt.live) continue;
      const auto& ids = pattern ? tt.ptpls : tt.atpls;
      if (std::find(ids.begin(), ids.end(), t) != ids.end())
        return flow_fail(err, op, port_name(), EBUSY, FlowErrorWhere::table, -1, -1, "a table uses the template");
    }
    v[t - 1].live = false;
    return {};
  }

  SimNicModel& nic_;
  Port& port_;
  std::vector<AsyncQueue> queues_;
  uint32_t queue_size_ = 0;
  std::vector<PatternTemplate> ptpls_;
  std::vector<ActionsTemplate> atpls_;
  std::vector<TemplateTable> tables_;
};

// ------------------------------------------------------ model, control ---

void SimNicModel::reset() {
  std::lock_guard g(ctl_);
  tables_.lock();  // empties the tables; PMDs then reach no rule
  std::fill(exact_.begin(), exact_.end(), ExactEntry{});
  masked_.clear();
  for (Shape& sh : shapes_) sh = Shape{};
  n_shapes_active_ = 0;
  exact_rules_ = 0;
  active_.store(0, relaxed);
  generation_.fetch_add(1, relaxed);
  tables_.unlock();
  for (uint32_t s = 0; s < n_slots_; ++s) {
    SimRule& r = rule(s);
    if (r.live) free_slot_locked(s);
  }
  for (auto& e : engines_) e->on_reset();
}

Port* SimNicModel::port_by_id(uint32_t id, SimNicPort** hw) const {
  for (const Attached& a : ports_)
    if (a.port->id() == id) {
      if (hw) *hw = a.hw;
      return a.port;
    }
  return nullptr;
}

Status SimNicModel::prepare(const SimPortEngine& e, const FlowAttr& attr, const FlowPattern& pattern,
                            const FlowActions& actions, Prepared& out, FlowError* err, const char* op) {
  const std::string& pn = e.port_name();
  if (auto s = compile_pattern(attr, pattern, e.owner(), out.key, out.mask, err, pn, op); !s) return s;
  out.priority = attr.priority;
  SimActions& a = out.act;
  a = SimActions{};
  auto fail = [&](int errnum, int index, std::string msg) {
    const int type = index >= 0 && index < actions.count ? static_cast<int>(actions.actions[index].type) : -1;
    return flow_fail(err, op, pn, errnum, FlowErrorWhere::action, index, type, std::move(msg));
  };
  if (actions.overflow) return fail(EINVAL, kMaxFlowActions, "more than 16 actions");
  bool fate = false;
  const uint16_t lk = out.key.layers, lm = out.mask.layers;
  auto has_layer = [&](uint16_t bits) { return (lm & bits) && (lk & bits); };
  bool vlan = has_layer(kLayerVlan);
  for (int i = 0; i < actions.count; ++i) {
    const FlowAction& ac = actions.actions[i];
    auto set_fate = [&](SimFate f) -> Status {
      if (fate) {
        const bool mirror = f == SimFate::port && a.fate == SimFate::port;
        return fail(ENOTSUP, i, mirror ? "the model forwards to one port (no mirroring)" : "a second fate action");
      }
      fate = true;
      a.fate = f;
      return {};
    };
    auto edit = [&](uint16_t need, const char* what) -> Status {
      if (need && !has_layer(need)) return fail(EINVAL, i, std::string("the pattern does not match ") + what);
      a.edits[a.n_edits++] = ac;
      return {};
    };
    Status s;
    switch (ac.type) {
      case FlowActionType::port_id:
      case FlowActionType::represented_port: {
        SimNicPort* hw = nullptr;
        Port* p = port_by_id(ac.conf.port, &hw);
        if (!p) return fail(ENODEV, i, "no sim port " + std::to_string(ac.conf.port));
        s = set_fate(SimFate::port);
        a.out_port = static_cast<uint16_t>(ac.conf.port);
        a.out = p;
        a.out_hw = hw;
        break;
      }
      case FlowActionType::drop:
        s = set_fate(SimFate::drop);
        break;
      case FlowActionType::jump:
        if (ac.conf.group == attr.group) return fail(EINVAL, i, "jump to the rule's own group");
        s = set_fate(SimFate::jump);
        a.jump_group = ac.conf.group;
        break;
      case FlowActionType::queue:
        if (ac.conf.queue >= e.port().n_rxq())
          return fail(EINVAL, i, "no rx queue " + std::to_string(ac.conf.queue) + " on " + pn);
        s = set_fate(SimFate::to_pmd);
        a.queue = ac.conf.queue;
        break;
      case FlowActionType::rss:
        if (ac.conf.rss.n_queues == 0 || ac.conf.rss.n_queues > kMaxRssQueues)
          return fail(EINVAL, i, "rss needs 1..16 queues");
        for (unsigned k = 0; k < ac.conf.rss.n_queues; ++k)
          if (ac.conf.rss.queues[k] >= e.port().n_rxq())
            return fail(EINVAL, i, "no rx queue " + std::to_string(ac.conf.rss.queues[k]) + " on " + pn);
        s = set_fate(SimFate::to_pmd);
        a.queue = ac.conf.rss.queues[0];
        break;
      case FlowActionType::mark:
        if (ac.conf.mark > 0xffffff) return fail(ENOTSUP, i, "marks are 24 bits");
        a.has_mark = true;
        a.mark = ac.conf.mark;
        break;
      case FlowActionType::count:
        a.has_count = true;
        break;
      case FlowActionType::age:
        if (ac.conf.age_timeout == 0) return fail(EINVAL, i, "age timeout 0");
        a.age_ns = uint64_t{ac.conf.age_timeout} * 1000000000u;
        break;
      case FlowActionType::set_mac_src:
      case FlowActionType::set_mac_dst:
        s = edit(kLayerEth, "Ethernet");
        break;
      case FlowActionType::set_ipv4_src:
      case FlowActionType::set_ipv4_dst:
      case FlowActionType::set_ipv4_dscp:
      case FlowActionType::set_ipv4_ttl:
        s = edit(kLayerIpv4, "IPv4");
        break;
      case FlowActionType::set_ipv6_src:
      case FlowActionType::set_ipv6_dst:
      case FlowActionType::set_ipv6_dscp:
      case FlowActionType::set_ipv6_hop:
        s = edit(kLayerIpv6, "IPv6");
        break;
      case FlowActionType::set_tp_src:
      case FlowActionType::set_tp_dst:
        if (!has_layer(kLayerTcp) && !has_layer(kLayerUdp)) return fail(EINVAL, i, "the pattern does not match TCP or UDP");
        s = edit(0, "");
        break;
      case FlowActionType::of_push_vlan:
        if (ac.conf.ethertype != 0x8100 && ac.conf.ethertype != 0x88a8)
          return fail(EINVAL, i, "push_vlan ethertype must be 0x8100 or 0x88a8");
        s = edit(0, "");
        vlan = true;
        break;
      case FlowActionType::of_pop_vlan:
        if (!vlan) return fail(EINVAL, i, "the pattern does not match a VLAN tag");
        s = edit(0, "");
        vlan = false;
        break;
      case FlowActionType::of_set_vlan_vid:
      case FlowActionType::of_set_vlan_pcp:
        if (!vlan) return fail(EINVAL, i, "no VLAN tag to set (match one or push one first)");
        s = edit(0, "");
        break;
      default:
        return fail(ENOTSUP, i, "unknown action");
    }
    if (!s) return s;
  }
  if (!fate) return fail(EINVAL, actions.count, "no fate action (port_id, represented_port, drop, jump, queue or rss)");
  return {};
}

Result<FlowHandle> SimNicModel::reserve(const SimPortEngine& e, const Prepared& p) {
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    if (n_slots_ >= (1u << 24)) return error(Errc::resource_exhausted, "the model's 16M rule slots are in use");
    if ((n_slots_ & (kChunk - 1)) == 0) {
      try {
        auto chunk = std::make_unique<SimRule[]>(kChunk);
        for (uint32_t i = 0; i < kChunk; ++i) chunk[i].seq = 1;
        free_.reserve(size_t{n_slots_} + kChunk);  // free_slot never allocates
        tables_.lock();  // chunks_ is read by PMDs
        chunks_.push_back(std::move(chunk));
        tables_.unlock();
      } catch (const std::bad_alloc&) {
        return error(Errc::resource_exhausted, "out of memory for rule slots");
      }
    }
    slot = n_slots_++;
  }
  SimRule& r = rule(slot);
  r.live = true;
  r.in_table = false;
  r.owner = e.owner();
  r.table = p.table;
  r.priority = p.priority;
  r.key = p.key;
  r.mask = p.mask;
  r.act = p.act;
  r.exact = false;
  r.hits.store(0, relaxed);
  r.bytes.store(0, relaxed);
  r.last_hit_ns.store(0, relaxed);
  return handle_of(slot);
}

int SimNicModel::install(FlowHandle h, std::string* why) {
  int e = 0;
  SimRule* r = lookup_handle(h, &e);
  if (!r) {
    *why = e == ENODEV ? "the device was reset" : "no such rule";
    bump(st_create_failures_);
    return e;
  }
  SimPortEngine* eng = nullptr;
  for (SimPortEngine* x : engines_)
    if (x->owner() == r->owner) eng = x;
  auto refuse = [&](int errnum, std::string msg) {
    *why = std::move(msg);
    free_slot_locked(slot_of(h));
    bump(st_create_failures_);
    return errnum;
  };
  if (const int f = create_fault_.take()) {
    bump(st_injected_);
    return refuse(f, "injected fault");
  }
  if (table_full_.load(relaxed)) {
    bump(st_injected_);
    return refuse(ENOSPC, "table full (injected)");
  }
  if (eng && !eng->table_has_room(r->table)) return refuse(ENOSPC, "template table full");
  // Which table: exact when every field is matched whole and a shape is free.
  int shape = -1;
  if (mask_is_exact(r->mask)) {
    shape = find_shape(r->mask);
    if (shape < 0)
      for (unsigned i = 0; i < shapes_.size(); ++i)
        if (!shapes_[i].used) {
          shape = static_cast<int>(i);
          break;
        }
  }
  const bool exact = shape >= 0;
  const uint32_t ecap = exact_capacity_.load(relaxed), mcap = masked_capacity_.load(relaxed);
  if (exact ? exact_rules_ >= ecap : masked_.size() >= mcap)
    return refuse(ENOSPC, exact ? "exact-match table full (" + std::to_string(ecap) + " rules)"
                                : "masked table full (" + std::to_string(mcap) + " rules)");
  const uint32_t slot = slot_of(h);
  r->order = next_order_++;
  r->created_ns = now_ns();
  if (exact) {
    r->exact = true;
    r->shape = static_cast<uint8_t>(shape);
    // The key as the table stores it: masked (the same rule twice is EEXIST).
    KeyWords kw = words(r->key), mw = words(r->mask);
    for (unsigned i = 0; i < kSimKeyWords; ++i) kw[i] &= mw[i];
    r->key = std::bit_cast<SimKey>(kw);
    const uint32_t hash = exact_hash(*r);
    const size_t m = exact_.size() - 1;
    for (size_t i = hash & m; exact_[i].slot1; i = (i + 1) & m) {
      const SimRule& o = rule(exact_[i].slot1 - 1);
      if (exact_[i].hash == hash && o.shape == r->shape && std::memcmp(&o.key, &r->key, sizeof o.key) == 0 &&
          o.priority == r->priority)
        return refuse(EEXIST, "the same rule is already in the exact-match table");
    }
    tables_.lock();
    Shape& sh = shapes_[shape];
    if (!sh.used) {
      sh.used = true;
      sh.mask = r->mask;
      rebuild_active_shapes();
    }
    ++sh.rules;
    exact_insert(slot, hash);
    ++exact_rules_;
    r->in_table = true;
    active_.fetch_add(1, relaxed);
    tables_.unlock();
  } else {
    try {
      masked_.reserve(masked_.size() + 1);
    } catch (const std::bad_alloc&) {
      return refuse(ENOMEM, "out of memory");
    }
    auto before = [this](uint32_t a, uint32_t b) {
      const SimRule &x = rule(a), &y = rule(b);
      if (x.key.group != y.key.group) return x.key.group < y.key.group;
      if (x.priority != y.priority) return x.priority < y.priority;
      return x.order < y.order;
    };
    tables_.lock();
    masked_.insert(std::upper_bound(masked_.begin(), masked_.end(), slot, before), slot);
    r->in_table = true;
    active_.fetch_add(1, relaxed);
    tables_.unlock();
  }
  if (eng) eng->table_rules_changed(r->table, +1);
  bump(st_creates_);
  return 0;
}

int SimNicModel::remove(FlowHandle h, uint16_t owner) {
  int e = 0;
  SimRule* r = lookup_handle(h, &e);
  if (!r || r->owner != owner) {
    bump(st_destroy_failures_);
    return r ? ENOENT : e;
  }
  const uint32_t slot = slot_of(h);
  if (r->in_table) {
    tables_.lock();
    if (r->exact) {
      exact_erase(slot, exact_hash(*r));
      --exact_rules_;
      Shape& sh = shapes_[r->shape];
      if (--sh.rules == 0) {
        sh.used = false;
        rebuild_active_shapes();
      }
    } else {
      masked_.erase(std::find(masked_.begin(), masked_.end(), slot));
    }
    active_.fetch_sub(1, relaxed);
    r->in_table = false;
    tables_.unlock();
    for (SimPortEngine* x : engines_)
      if (x->owner() == r->owner) x->table_rules_changed(r->table, -1);
  }
  free_slot_locked(slot);
  bump(st_destroys_);
  return 0;
}

bool SimNicModel::read(FlowHandle h, uint16_t owner, FlowQuery& q) {
  int e = 0;
  SimRule* r = lookup_handle(h, &e);
  if (r && r->owner != owner) r = nullptr, e = ENOENT;
  if (r && !r->in_table) r = nullptr, e = ENOENT;  // reserved, not yet pushed
  if (r && !r->act.has_count) r = nullptr, e = ENOTSUP;
  if (!r) {
    q.ok = false;
    q.errnum = e;
    return false;
  }
  q.ok = true;
  q.hits = r->hits.load(relaxed);
  q.bytes = r->bytes.load(relaxed);
  q.last_hit_ns = r->last_hit_ns.load(relaxed);
  if (r->act.age_ns) {
    const uint64_t since = q.last_hit_ns ? q.last_hit_ns : r->created_ns;
    q.aged = now_ns() - since > r->act.age_ns;
  }
  return true;
}

void SimNicModel::remove_owned(uint16_t owner) {
  for (uint32_t s = 0; s < n_slots_; ++s) {
    SimRule& r = rule(s);
    if (r.live && r.owner == owner) (void)remove(handle_of(s), owner);
  }
}

void SimNicModel::attach(Port& port, SimNicPort& hw) {
  std::lock_guard g(ctl_);
  ports_.push_back({&port, &hw});
  hw.nic_ = this;
  hw.engine_ = std::make_unique<SimPortEngine>(*this, port);
  engines_.push_back(hw.engine_.get());
  port.set_hw_ingress(this);
}

void SimNicModel::detach(SimNicPort& hw) noexcept {
  std::lock_guard g(ctl_);
  Port* port = nullptr;
  for (const Attached& a : ports_)
    if (a.hw == &hw) port = a.port;
  if (!port) return;
  port->set_hw_ingress(nullptr);
  // Rules of the port, and rules that send to it, go (their handles then
  // answer ENOENT). remove() takes the write lock: a PMD in the middle of a
  // hardware tx to the port finishes first.
  for (uint32_t s = 0; s < n_slots_; ++s) {
    SimRule& r = rule(s);
    if (!r.live) continue;
    if (r.owner == port->id() || r.act.out == port) (void)remove(handle_of(s), r.owner);
  }
  tables_.lock();  // no PMD still inside ingress() with this port
  tables_.unlock();
  ports_.erase(std::remove_if(ports_.begin(), ports_.end(), [&](const Attached& a) { return a.hw == &hw; }),
               ports_.end());
  engines_.erase(std::remove(engines_.begin(), engines_.end(), hw.engine_.get()), engines_.end());
}

std::string SimNicModel::describe() const {
  auto fault = [](const Fault& f) {
    const unsigned n = f.left.load(relaxed);
    return n ? std::to_string(n) + " x " + errno_name(f.errnum.load(relaxed)) : std::string("none");
  };
  return "create: " + fault(create_fault_) + ", destroy: " + fault(destroy_fault_) + ", query: " +
         fault(query_fault_) + ", table-full: " + (table_full_.load(relaxed) ? "on" : "off") + ", capacity " +
         std::to_string(exact_capacity_.load(relaxed)) + "+" + std::to_string(masked_capacity_.load(relaxed)) + ", async " +
         (async_api_.load(relaxed) ? "on" : "off") + ", keep-order " + (keep_order_.load(relaxed) ? "on" : "off") +
         ", resets " + std::to_string(generation_.load(relaxed));
}

SimNicStats SimNicModel::stats() const {
  SimNicStats s;
  {
    std::lock_guard g(ctl_);
    s.exact_rules = exact_rules_;
    s.masked_rules = static_cast<uint32_t>(masked_.size());
    s.exact_capacity = exact_capacity_.load(relaxed);
    s.masked_capacity = masked_capacity_.load(relaxed);
  }
  s.reset_generation = generation_.load(relaxed);
  s.creates = st_creates_.load(relaxed);
  s.create_failures = st_create_failures_.load(relaxed);
  s.destroys = st_destroys_.load(relaxed);
  s.destroy_failures = st_destroy_failures_.load(relaxed);
  s.queries = st_queries_.load(relaxed);
  s.query_failures = st_query_failures_.load(relaxed);
  s.async_pending = st_async_pending_.load(relaxed);
  s.hw_forwarded = st_fwd_.load(relaxed);
  s.hw_dropped = st_drop_.load(relaxed);
  s.hw_marked = st_marked_.load(relaxed);
  s.hw_to_pmd = st_to_pmd_.load(relaxed);
  s.hw_tx_dropped = st_tx_drop_.load(relaxed);
  s.injected_failures = st_injected_.load(relaxed);
  return s;
}

// ------------------------------------------------------- model, ingress ---

SimRule* SimNicModel::lookup(const SimKey& pk) const noexcept {
  const KeyWords pw = words(pk);
  SimRule* best = nullptr;
  const size_t m = exact_.size() - 1;
  for (unsigned si = 0; si < n_shapes_active_; ++si) {
    const unsigned sh = active_shapes_[si];
    const KeyWords mw = words(shapes_[sh].mask);
    KeyWords kw;
    for (unsigned i = 0; i < kSimKeyWords; ++i) kw[i] = pw[i] & mw[i];
    const uint32_t hash = hash_words(kw, sh);
    for (size_t i = hash & m; exact_[i].slot1; i = (i + 1) & m) {
      if (exact_[i].hash != hash) continue;
      SimRule& r = rule(exact_[i].slot1 - 1);
      if (r.shape != sh || words(r.key) != kw) continue;
      if (!best || r.priority < best->priority || (r.priority == best->priority && r.order < best->order)) best = &r;
    }
  }
  if (best) return best;
  for (uint32_t slot : masked_) {
    SimRule& r = rule(slot);
    if (r.key.group < pk.group) continue;
    if (r.key.group > pk.group) break;
    if (masked_equal(pw, words(r.key), words(r.mask))) return &r;
  }
  return nullptr;
}

void SimNicModel::send_batch(SimNicPort* hw, Port* out, std::span<Packet*> pkts) noexcept {
  if (pkts.empty()) return;
  // The egress port's link and MTU, as its own tx would apply them.
  const TxFrameLimit lim = out->tx_frame_limit();
  const bool down = out->link_forced_down();
  size_t n = 0;
  for (Packet* p : pkts) {
    const bool tagged = p->len() >= 14 && rd16(p->data() + 12) == 0x8100;
    if (down || p->len() > (tagged ? lim.tagged : lim.untagged)) {
      hal::release(p);
    } else {
      pkts[n++] = p;
    }
  }
  const uint16_t sent = n ? hw->hw_tx(pkts.first(n)) : 0;
  for (size_t i = sent; i < n; ++i) hal::release(pkts[i]);
  if (pkts.size() > sent) {
    bump(st_tx_drop_, pkts.size() - sent);
    out->count_hw_tx_dropped(pkts.size() - sent);  // the egress port's tx drops (show drops)
  }
}

uint16_t SimNicModel::ingress(Port& in, uint16_t q, std::span<Packet*> pkts) noexcept {
  if (active_.load(relaxed) == 0) return static_cast<uint16_t>(pkts.size());  // no rule: no lock
  const bool keep_order = keep_order_.load(relaxed);
  const uint64_t now = now_ns();
  uint16_t kept = 0;
  uint64_t fwd = 0, dropped = 0, marked = 0, to_pmd = 0;
  // Forwarded packets, batched per run of one egress port (order kept).
  std::array<Packet*, kMaxBurst> batch;
  unsigned nb = 0;
  Port* batch_out = nullptr;
  SimNicPort* batch_hw = nullptr;
  bool hw_path = true;
  tables_.lock_shared();
  for (Packet* p : pkts) {
    if (keep_order && !hw_path) {
      pkts[kept++] = p;
      continue;
    }
    SimKey k{};
    k.in_port = in.id();
    WireLayout lay;
    parse_wire(p->data(), p->len(), k, lay);
    const uint32_t len = p->len();
    SimFate fate = SimFate::to_pmd;
    const SimActions* act = nullptr;
    bool miss = true, mark = false;
    uint32_t mark_id = 0;
    for (unsigned depth = 0; depth < kMaxJumps; ++depth) {
      SimRule* r = lookup(k);
      if (!r) break;
      miss = false;
      r->hits.fetch_add(1, relaxed);
      r->bytes.fetch_add(len, relaxed);
      r->last_hit_ns.store(now, relaxed);
      act = &r->act;
      if (act->has_mark) mark = true, mark_id = act->mark;
      if (act->n_edits && !apply_edits(*p, *act)) {
        fate = SimFate::drop;
        break;
      }
      fate = act->fate;
      if (fate != SimFate::jump) break;
      const uint32_t g = act->jump_group;
      const uint32_t mk = mark ? mark_id : 0;
      k = SimKey{};
      k.in_port = in.id();
      k.group = g;
      k.mark = mk;
      parse_wire(p->data(), p->len(), k, lay);
      fate = SimFate::to_pmd;  // a jump into nothing: the packet goes on to the PMD
    }
    if (miss) {
      hw_path = false;
      pkts[kept++] = p;
      continue;
    }
    if (fate == SimFate::port && act->out == batch_out && nb < batch.size()) {
      batch[nb++] = p;
      ++fwd;
      continue;
    }
    if (nb) send_batch(batch_hw, batch_out, std::span(batch.data(), nb));
    nb = 0;
    batch_out = nullptr;
    switch (fate) {
      case SimFate::port:
        batch_out = act->out;
        batch_hw = act->out_hw;
        batch[nb++] = p;
        ++fwd;
        break;
      case SimFate::drop:
        hal::release(p);
        ++dropped;
        break;
      case SimFate::to_pmd:
      case SimFate::jump:
        if (mark) {
          p->set_flow_mark(mark_id);
          ++marked;
        }
        ++to_pmd;
        hw_path = false;
        pkts[kept++] = p;
        break;
    }
  }
  if (nb) send_batch(batch_hw, batch_out, std::span(batch.data(), nb));
  tables_.unlock_shared();
  if (fwd || dropped) in.count_rx_hw(q, fwd, dropped);
  if (fwd) bump(st_fwd_, fwd);
  if (dropped) bump(st_drop_, dropped);
  if (marked) bump(st_marked_, marked);
  if (to_pmd) bump(st_to_pmd_, to_pmd);
  return kept;
}

// ------------------------------------------------------------ glue ---

SimNicPort::SimNicPort() = default;
SimNicPort::~SimNicPort() = default;

FlowEngine* SimNicPort::nic_engine() const noexcept { return engine_.get(); }

void SimNicPort::detach_from_nic() noexcept {
  if (nic_) nic_->detach(*this);
  nic_ = nullptr;
  nic_owner_.reset();  // the last owner when the backend went first
}

SimNicPtr make_sim_nic(uint32_t offload_flows) { return SimNicPtr(new SimNicModel(offload_flows)); }
void attach_port(const SimNicPtr& nic, Port& port, SimNicPort& hw) {
  nic->attach(port, hw);
  hw.nic_owner_ = nic;
}
SimNic& as_control(SimNicModel& nic) { return nic; }

}  // namespace keel::hal::sim

// The action executor: see execute.h.
//
// Layout of this file: the queues (output batches, release_all); header
// access helpers (which L3/L4 a packet has, read from its bytes at the
// LayerOffsets — the key may be absent and is never updated); the
// per-packet rewrites (VLAN push/pop, the five set headers); copying a
// batch; and the Executor, which walks one list for one batch (<= 32
// packets) and recurses into clone().
//
// Every list the executor runs owns its batch ("steal" in Open vSwitch's
// words): the top level because execute_actions() takes ownership, a
// clone() because it runs on copies or, as the last action, on the
// originals. So the last output/recirc/userspace of a list moves the
// packets, and an earlier one sends copies.
#include "datapath/execute.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/hash.h"
#include "packet/checksum.h"
#include "flow/flow_hash.h"
#include "packet/headers.h"

namespace keel::datapath {

namespace csum = packet::csum;

// --- queues -------------------------------------------------------------------

OutputBatch* OutputBatches::slot(uint32_t port) noexcept {
  for (unsigned i = 0; i < n_; ++i)
    if (batches_[i].port == port) return &batches_[i];
  if (n_ == kExecMaxOutputPorts) {
    if (!flush_) return nullptr;
    flush_all();
  }
  OutputBatch& b = batches_[n_++];
  b.port = port;
  b.n = 0;
  return &b;
}

void OutputBatches::flush_all() noexcept {
  for (unsigned i = 0; i < n_; ++i)
    if (batches_[i].n) flush_(flush_arg_, batches_[i].port, batches_[i].packets());
  n_ = 0;
}

void OutputBatches::push(uint32_t port, std::span<hal::Packet* const> pkts, uint64_t& overflow) noexcept {
  if (pkts.empty()) return;
  OutputBatch* b = slot(port);
  if (!b) [[unlikely]] {
    hal::release_burst(pkts);
    overflow += pkts.size();
    return;
  }
  for (hal::Packet* p : pkts) {
    if (b->n == kExecOutputBatchCap) [[unlikely]] {
      if (!flush_) {
        hal::release(p);
        ++overflow;
        continue;
      }
      flush_(flush_arg_, port, b->packets());
      b->n = 0;
    }
    b->pkts[b->n++] = p;
  }
}

void ExecContext::release_all() noexcept {
  for (OutputBatch& b : tx.active()) hal::release_burst(b.packets());
  tx.clear();
  hal::release_burst(recirc.packets());
  recirc.clear();
  for (const UpcallRequest& r : upcalls.requests()) hal::release(r.pkt);
  upcalls.clear();
}

namespace {

using flow::DpAction;
using flow::DpActionType;
using packet::be16_const;
using packet::LayerOffsets;
using packet::load;

constexpr uint16_t kNone = LayerOffsets::kNone;
constexpr uint32_t kEthHeaderLen = 14;
constexpr uint32_t kVlanLen = 4;

template <typename T>
inline void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// --- what a packet has ----------------------------------------------------

// The EtherType just before L3 (after any VLAN tags or LLC/SNAP header).
inline bool l3_is(const uint8_t* d, uint32_t len, const LayerOffsets& o, uint16_t ethertype,
                  uint32_t min_len) {
  return o.l3 != kNone && o.l3 >= 2 && o.l3 + min_len <= len &&
         load<flow::be16>(d + o.l3 - 2) == be16_const(ethertype);
}
inline bool has_ipv4(const uint8_t* d, uint32_t len, const LayerOffsets& o) {
  return l3_is(d, len, o, packet::kEthTypeIpv4, packet::kIpv4MinHeaderLen) && (d[o.l3] >> 4) == 4;
}
inline bool has_ipv6(const uint8_t* d, uint32_t len, const LayerOffsets& o) {
  return l3_is(d, len, o, packet::kEthTypeIpv6, sizeof(packet::Ipv6Header)) && (d[o.l3] >> 4) == 6;
}
// The parser read the whole L4 header (so not a later fragment) and it lies
// inside the frame.
inline bool has_l4(uint32_t len, const LayerOffsets& o) {
  return o.l4 != kNone && o.payload != kNone && o.payload <= len && o.l4 < o.payload;
}

// The upper-layer protocol of an IPv6 packet (after its extension headers, up
// to the parser's L4 offset) and whether a routing header with segments left
// is on the way (then the pseudo-header's destination is not ip6_dst).
// Open vSwitch's packet_rh_present().
struct Ipv6Upper {
  uint8_t proto;
  bool routing;
};
inline Ipv6Upper ipv6_upper(const uint8_t* ip, const LayerOffsets& o) {
  uint8_t nh = ip[offsetof(packet::Ipv6Header, next_header)];
  uint32_t p = sizeof(packet::Ipv6Header);
  const uint32_t end = o.l4 - o.l3;
  while (p < end) {
    if (nh != packet::kIpProtoHopOpts && nh != packet::kIpProtoRouting && nh != packet::kIpProtoDstOpts &&
        nh != packet::kIpProtoAh && nh != packet::kIpProtoFragment)
      break;
    if (end - p < 8) break;
    const uint8_t* e = ip + p;
    uint32_t n;
    if (nh == packet::kIpProtoFragment) {
      n = 8;
    } else if (nh == packet::kIpProtoAh) {
      n = (e[1] + 2u) * 4;
    } else {
      if (nh == packet::kIpProtoRouting && e[3] > 0) return {e[0], true};
      n = (e[1] + 1u) * 8;
    }
    nh = e[0];
    p += n;
  }
  return {nh, false};
}

// The L4 protocol of an IPv4 or IPv6 packet whose L4 header is whole; 0 otherwise.
inline uint8_t l4_proto(const uint8_t* d, uint32_t len, const LayerOffsets& o) {
  if (!has_l4(len, o)) return 0;
  if (has_ipv4(d, len, o)) return d[o.l3 + offsetof(packet::Ipv4Header, proto)];
  if (has_ipv6(d, len, o)) return ipv6_upper(d + o.l3, o).proto;
  return 0;
}

inline void shift_offsets(LayerOffsets& o, int delta) {
  auto adj = [delta](uint16_t& v) {
    if (v != kNone) v = static_cast<uint16_t>(v + delta);
  };
  adj(o.l3);
  adj(o.l4);
  adj(o.payload);
}

inline bool is_vlan_tpid(flow::be16 t) {
  return t == be16_const(packet::kEthTypeVlan) || t == be16_const(packet::kEthTypeQinQ);
}

// --- rewrites -------------------------------------------------------------

// The checksum update for an L4 header covering a pseudo-header address:
// TCP always, UDP unless it carries none (0), ICMPv6 always.
inline void l4_addr_csum32(uint8_t* d, const LayerOffsets& o, uint8_t proto, uint32_t old_a, uint32_t new_a) {
  if (proto == packet::kIpProtoTcp) {
    uint8_t* c = d + o.l4 + offsetof(packet::TcpHeader, csum);
    store<uint16_t>(c, csum::recalc32(load<uint16_t>(c), old_a, new_a));
  } else if (proto == packet::kIpProtoUdp) {
    uint8_t* c = d + o.l4 + offsetof(packet::UdpHeader, csum);
    uint16_t v = load<uint16_t>(c);
    if (v) {
      v = csum::recalc32(v, old_a, new_a);
      store<uint16_t>(c, v ? v : 0xffff);
    }
  }
}

inline void l4_addr_csum128(uint8_t* d, const LayerOffsets& o, uint8_t proto, const uint8_t* old_a,
                            const uint8_t* new_a) {
  size_t at;
  if (proto == packet::kIpProtoTcp) {
    at = offsetof(packet::TcpHeader, csum);
  } else if (proto == packet::kIpProtoUdp) {
    at = offsetof(packet::UdpHeader, csum);
  } else if (proto == packet::kIpProtoIcmpv6) {
    at = offsetof(packet::Icmp6Header, csum);
  } else {
    return;
  }
  uint8_t* c = d + o.l4 + at;
  uint16_t v = load<uint16_t>(c);
  if (proto == packet::kIpProtoUdp) {
    if (!v) return;
    v = csum::recalc128(v, old_a, new_a);
    store<uint16_t>(c, v ? v : 0xffff);
  } else {
    store<uint16_t>(c, csum::recalc128(v, old_a, new_a));
  }
}

template <typename T>
inline T masked(T old_v, T key, T mask) {
  return static_cast<T>((old_v & ~mask) | (key & mask));
}

inline bool set_eth(hal::Packet& p, const LayerOffsets& o, const flow::SetEth& k, const flow::SetEth& m) {
  if (o.l2 == kNone || p.len() < kEthHeaderLen) return false;
  uint8_t* d = p.data();
  const uint8_t* kb = reinterpret_cast<const uint8_t*>(&k);
  const uint8_t* mb = reinterpret_cast<const uint8_t*>(&m);
  static_assert(offsetof(flow::SetEth, dst) == 0 && offsetof(flow::SetEth, src) == 6,
                "SetEth is in wire order");
  for (unsigned i = 0; i < sizeof(flow::SetEth); ++i) d[i] = masked<uint8_t>(d[i], kb[i], mb[i]);
  return true;
}

// An Ethernet/IPv4 ARP or RARP body (the parser reads ARP fields only from
// those): op at 6, sha 8, spa 14, tha 18, tpa 24; no checksum to fix.
inline bool set_arp(hal::Packet& p, const LayerOffsets& o, const flow::SetArp& k, const flow::SetArp& m) {
  uint8_t* d = p.data();
  const uint32_t len = p.len();
  if (!l3_is(d, len, o, packet::kEthTypeArp, 28) && !l3_is(d, len, o, packet::kEthTypeRarp, 28)) return false;
  uint8_t* arp = d + o.l3;
  auto put = [](uint8_t* at, const void* key, const void* mask, size_t n) {
    const uint8_t* kb = static_cast<const uint8_t*>(key);
    const uint8_t* mb = static_cast<const uint8_t*>(mask);
    for (size_t i = 0; i < n; ++i) at[i] = masked<uint8_t>(at[i], kb[i], mb[i]);
  };
  put(arp + 6, &k.op, &m.op, 2);
  put(arp + 8, k.sha.b, m.sha.b, 6);
  put(arp + 14, &k.sip, &m.sip, 4);
  put(arp + 18, k.tha.b, m.tha.b, 6);
  put(arp + 24, &k.tip, &m.tip, 4);
  return true;
}

inline bool set_ipv4(hal::Packet& p, const LayerOffsets& o, const flow::SetIpv4& k, const flow::SetIpv4& m) {
  uint8_t* d = p.data();
  const uint32_t len = p.len();
  if (!has_ipv4(d, len, o)) return false;
  using H = packet::Ipv4Header;
  uint8_t* ip = d + o.l3;
  uint8_t* csum_p = ip + offsetof(H, csum);
  uint16_t ip_csum = load<uint16_t>(csum_p);
  const uint8_t proto = has_l4(len, o) ? ip[offsetof(H, proto)] : 0;

  if (m.src | m.dst) {
    const size_t offs[2] = {offsetof(H, src), offsetof(H, dst)};
    const flow::be32 keys[2] = {k.src, k.dst}, masks[2] = {m.src, m.dst};
    for (int i = 0; i < 2; ++i) {
      if (!masks[i]) continue;
      const uint32_t old_a = load<uint32_t>(ip + offs[i]);
      const uint32_t new_a = masked(old_a, keys[i], masks[i]);
      if (old_a == new_a) continue;
      l4_addr_csum32(d, o, proto, old_a, new_a);
      ip_csum = csum::recalc32(ip_csum, old_a, new_a);
      store<uint32_t>(ip + offs[i], new_a);
    }
  }
  if (m.tos) {
    // The 16-bit word (version/IHL, TOS).
    const uint16_t old_w = load<uint16_t>(ip);
    uint8_t w[2] = {ip[0], masked(ip[offsetof(H, tos)], k.tos, m.tos)};
    const uint16_t new_w = load<uint16_t>(w);
    if (old_w != new_w) {
      ip_csum = csum::recalc16(ip_csum, old_w, new_w);
      ip[offsetof(H, tos)] = w[1];
    }
  }
  if (m.ttl) {
    // The 16-bit word (TTL, protocol).
    const uint16_t old_w = load<uint16_t>(ip + offsetof(H, ttl));
    uint8_t w[2] = {masked(ip[offsetof(H, ttl)], k.ttl, m.ttl), ip[offsetof(H, proto)]};
    const uint16_t new_w = load<uint16_t>(w);
    if (old_w != new_w) {
      ip_csum = csum::recalc16(ip_csum, old_w, new_w);
      ip[offsetof(H, ttl)] = w[0];
    }
  }
  store<uint16_t>(csum_p, ip_csum);
  return true;
}

inline void set_ipv6_addr(uint8_t* d, const LayerOffsets& o, uint8_t* field, const uint8_t* k,
                          const uint8_t* m, uint8_t proto, bool update_l4) {
  uint8_t n[16];
  bool changed = false;
  for (unsigned i = 0; i < 16; ++i) {
    n[i] = masked(field[i], k[i], m[i]);
    changed |= n[i] != field[i];
  }
  if (!changed) return;
  if (update_l4) l4_addr_csum128(d, o, proto, field, n);
  std::memcpy(field, n, 16);
}

inline bool set_ipv6(hal::Packet& p, const LayerOffsets& o, const flow::SetIpv6& k, const flow::SetIpv6& m) {
  uint8_t* d = p.data();
  const uint32_t len = p.len();
  if (!has_ipv6(d, len, o)) return false;
  using H = packet::Ipv6Header;
  uint8_t* ip = d + o.l3;
  static const flow::In6Addr kZero{};
  const bool src = !(m.src == kZero), dst = !(m.dst == kZero);
  if (src || dst) {
    Ipv6Upper up{0, false};
    const bool l4 = has_l4(len, o);
    if (l4) up = ipv6_upper(ip, o);
    if (src) set_ipv6_addr(d, o, ip + offsetof(H, src), k.src.b, m.src.b, up.proto, l4);
    if (dst) set_ipv6_addr(d, o, ip + offsetof(H, dst), k.dst.b, m.dst.b, up.proto, l4 && !up.routing);
  }
  if (m.tclass | m.label) {
    // version(4) tclass(8) label(20), host order for the arithmetic.
    const uint32_t w = packet::ntoh32(load<uint32_t>(ip));
    const uint32_t tc = masked<uint32_t>((w >> 20) & 0xff, k.tclass, m.tclass);
    const uint32_t lm = packet::ntoh32(m.label) & packet::kIpv6FlowLabelMask;
    const uint32_t label = masked<uint32_t>(w & packet::kIpv6FlowLabelMask, packet::ntoh32(k.label), lm);
    store<uint32_t>(ip, packet::hton32((w & 0xf0000000u) | tc << 20 | label));
  }
  if (m.hlimit) ip[offsetof(H, hop_limit)] = masked(ip[offsetof(H, hop_limit)], k.hlimit, m.hlimit);
  return true;
}

inline bool set_l4(hal::Packet& p, const LayerOffsets& o, uint8_t want, const flow::SetL4& k,
                   const flow::SetL4& m) {
  uint8_t* d = p.data();
  if (l4_proto(d, p.len(), o) != want) return false;
  uint8_t* l4 = d + o.l4;
  // TCP and UDP both start with src, dst; their checksums sit apart.
  uint8_t* c = l4 + (want == packet::kIpProtoTcp ? offsetof(packet::TcpHeader, csum)
                                                 : offsetof(packet::UdpHeader, csum));
  uint16_t sum = load<uint16_t>(c);
  const bool update = want == packet::kIpProtoTcp || sum != 0;  // UDP without a checksum keeps none
  const flow::be16 keys[2] = {k.src, k.dst}, masks[2] = {m.src, m.dst};
  for (size_t i = 0; i < 2; ++i) {
    if (!masks[i]) continue;
    const uint16_t old_p = load<uint16_t>(l4 + 2 * i);
    const uint16_t new_p = masked(old_p, keys[i], masks[i]);
    if (old_p == new_p) continue;
    if (update) sum = csum::recalc16(sum, old_p, new_p);
    store<uint16_t>(l4 + 2 * i, new_p);
  }
  if (update) {
    if (want == packet::kIpProtoUdp && sum == 0) sum = 0xffff;
    store<uint16_t>(c, sum);
  }
  return true;
}

// SCTP's CRC32c (RFC 4960 appendix B: reflected Castagnoli, all-ones in and
// out) over the SCTP packet, as the 32-bit value OVS's crc32c() returns and
// stores unswapped. One crc32 instruction per 8 bytes (core/hash.h), bitwise
// for the last < 8: about 200 instructions for a 1500-byte packet.
inline uint32_t sctp_crc32c(const uint8_t* p, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    crc = crc32c_u64(crc, w);
  }
  for (; n; ++p, --n) {
    crc ^= *p;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// set(sctp(...)): the ports, and the checksum moved by the change (OVS's
// set_sctp_port(): a wrong checksum stays wrong by the same amount).
inline bool set_sctp(hal::Packet& p, const LayerOffsets& o, const flow::SetL4& k, const flow::SetL4& m) {
  uint8_t* d = p.data();
  const uint32_t len = p.len();
  if (l4_proto(d, len, o) != packet::kIpProtoSctp || !has_l4(len, o)) return false;
  const uint32_t end = len - std::min<uint32_t>(o.l2_pad, len);
  if (o.l4 + sizeof(packet::SctpHeader) > end) return false;
  uint8_t* sh = d + o.l4;
  const size_t n = end - o.l4;
  uint8_t* c = sh + offsetof(packet::SctpHeader, csum);
  uint32_t old_csum;
  std::memcpy(&old_csum, c, 4);
  std::memset(c, 0, 4);
  const uint32_t old_correct = sctp_crc32c(sh, n);
  const flow::be16 keys[2] = {k.src, k.dst}, masks[2] = {m.src, m.dst};
  for (size_t i = 0; i < 2; ++i)
    if (masks[i]) store<uint16_t>(sh + 2 * i, masked(load<uint16_t>(sh + 2 * i), keys[i], masks[i]));
  const uint32_t new_correct = sctp_crc32c(sh, n);
  const uint32_t csum = old_csum ^ old_correct ^ new_correct;
  std::memcpy(c, &csum, 4);
  return true;
}

// set(icmp(...)) / set(icmpv6(...)): type and code, and the checksum moved
// by the change of their 16-bit word (OVS's packet_set_icmp(): for ICMPv6
// the pseudo-header is unchanged, so the same incremental update holds).
inline bool set_icmp(hal::Packet& p, const LayerOffsets& o, uint8_t want, const flow::SetIcmp& k,
                     const flow::SetIcmp& m) {
  uint8_t* d = p.data();
  const uint32_t len = p.len();
  if (l4_proto(d, len, o) != want || !has_l4(len, o) || o.l4 + 4u > len) return false;
  uint8_t* ih = d + o.l4;
  const uint16_t old_tc = load<uint16_t>(ih);
  ih[0] = masked<uint8_t>(ih[0], k.type, m.type);
  ih[1] = masked<uint8_t>(ih[1], k.code, m.code);
  const uint16_t new_tc = load<uint16_t>(ih);
  if (old_tc != new_tc) store<uint16_t>(ih + 2, csum::recalc16(load<uint16_t>(ih + 2), old_tc, new_tc));
  return true;
}

// --- copies ---------------------------------------------------------------

inline void copy_meta(hal::Packet& to, const hal::Packet& from) {
  to.set_in_port(from.in_port());
  to.set_rx_port(from.rx_port());  // a copy: the rx port, never the fate token
  to.meta() = from.meta();
  if (from.has_rss_hash()) to.set_rss_hash(from.rss_hash());
  if (from.has_flow_mark()) to.set_flow_mark(from.meta().flow_mark);
}

// A batch being executed: at most kMaxBurst packets, owned by the list that
// runs on it, and the pending trunc (0: none).
struct Batch {
  ExecPacket* pk;
  unsigned n;
  uint32_t max_len;
};

class Executor {
 public:
  explicit Executor(ExecContext& ctx) : ctx_(ctx), c_(ctx.counters) {}

  void run(Batch& b, std::span<const uint8_t> list) noexcept;

  // Drop accounting (execute.h, drop_stats.h) for one batch of at most
  // kMaxBurst packets: begin() before running it (slots numbered, tokens
  // noted), settle() after (each token's fate decided or passed on).
  void begin(ExecPacket* pk, unsigned n) noexcept;
  void settle() noexcept;

 private:
  // Copies b's packets (at most `limit` bytes each, 0: whole) into fresh
  // buffers of `from` (null: ctx.backend); returns how many copies were
  // made (failures counted).
  unsigned copy(const Batch& b, uint32_t limit, ExecPacket* out, LayerOffsets* ofs,
                hal::Backend* from = nullptr) noexcept;
  // The backend for copies that leave through `port`.
  hal::Backend* backend_for(uint32_t port) const noexcept {
    hal::Backend* b = ctx_.port_backend ? ctx_.port_backend(ctx_.port_backend_arg, port) : nullptr;
    return b ? b : ctx_.backend;
  }

  // The batch's packets are dropped for `why`.
  void release(Batch& b, uint64_t& counter, DropReason why) noexcept {
    for (unsigned i = 0; i < b.n; ++i) lost(b.pk[i], why);
    counter += b.n;
    b.n = 0;
  }
  // One packet dropped for `why`: released and accounted (the caller
  // counts it in its ExecCounters field).
  void lost(const ExecPacket& e, DropReason why) noexcept {
    noted_lost(e, why);
    hal::release(e.pkt);
  }
  // The accounting of lost() for a packet already released (or about to
  // be, by the caller): its reason, and its token's.
  void noted_lost(const ExecPacket& e, DropReason why) noexcept {
    if (!ctx_.drops) return;
    ctx_.drops->instance(why);
    if (e.pkt->has_fate_token()) tok_reason_[e.slot] = why;
  }
  // An instance queued for output: its packet is forwarded.
  void went_out(const ExecPacket& e) noexcept { out_mask_ |= 1u << e.slot; }
  // An instance queued for another pass or the slow path: it may carry
  // its packet's token on.
  void went_on(const ExecPacket& e) noexcept {
    const uint32_t bit = 1u << e.slot;
    if (e.pkt->has_fate_token()) {
      tok_on_mask_ |= bit;
      tok_on_[e.slot] = e.pkt;
    } else if (!(alt_mask_ & bit)) {
      alt_mask_ |= bit;
      alt_[e.slot] = e.pkt;
    }
  }
  static void truncate(Batch& b) noexcept {
    if (!b.max_len) return;
    for (unsigned i = 0; i < b.n; ++i)
      if (b.pk[i].pkt->len() > b.max_len) (void)b.pk[i].pkt->set_len(b.max_len);
  }

  // The consuming actions: give b's packets (or copies, when the action is
  // not the list's last) to a queue.
  template <typename Sink>
  void consume(Batch& b, bool last, bool use_trunc, hal::Backend* from, Sink&& sink) noexcept;

  void to_tx(std::span<const ExecPacket> pk, uint32_t port) noexcept;
  // One packet to `port`'s batch, accounted whether it fits or not.
  void to_tx_one(const ExecPacket& e, uint32_t port) noexcept;
  void to_recirc(std::span<const ExecPacket> pk, uint32_t id) noexcept;
  void to_slow_path(std::span<const ExecPacket> pk, const DpAction& a) noexcept;
  void to_bond(std::span<const ExecPacket> pk, uint32_t bond_id) noexcept;
  // lb_output's table for `bond_id` (null: none) and the member of the
  // batch's first packet (for its copies' backend).
  const BondMembers* bond_table(uint32_t bond_id) const noexcept {
    return ctx_.bonds && bond_id <= kMaxBondId
               ? (*ctx_.bonds)[bond_id].members.load(std::memory_order_relaxed)
               : nullptr;
  }

  void push_vlan(Batch& b, const DpAction& a) noexcept;
  void pop_vlan(Batch& b) noexcept;
  void tnl_push(Batch& b, const DpAction& a) noexcept;
  void tnl_pop(Batch& b, uint32_t vport) noexcept;
  bool queue_recirc(const ExecPacket& e) noexcept;
  void set(Batch& b, const DpAction& a) noexcept;
  void clone(Batch& b, std::span<const uint8_t> nested, bool last) noexcept;

  ExecContext& ctx_;
  ExecCounters& c_;
  // Accounting state of the current batch (begin/settle), by slot.
  uint32_t tok_mask_ = 0;     // packets that came in holding a fate token
  uint32_t out_mask_ = 0;     // an instance went to an output batch
  uint32_t tok_on_mask_ = 0;  // the token instance went on (recirc, slow path): tok_on_[slot]
  uint32_t alt_mask_ = 0;     // a copy without the token went on: alt_[slot]
  bool one_port_ = true;      // the packets all came in on one port, port0_; else rx_port_[slot]
  uint16_t port0_ = 0;
  uint16_t rx_port_[hal::kMaxBurst];
  DropReason tok_reason_[hal::kMaxBurst];  // set when the token instance is dropped
  hal::Packet* tok_on_[hal::kMaxBurst];
  hal::Packet* alt_[hal::kMaxBurst];
};

void Executor::begin(ExecPacket* pk, unsigned n) noexcept {
  // Locals, stored once: a byte store (slot) may alias the members. The
  // rx ports are kept per packet only when they differ (rarely: a batch
  // is one port's, or one vport's after tnl_pop of several ports' frames).
  uint32_t tok = 0;
  bool one_port = true;
  const uint16_t port0 = n ? pk[0].pkt->rx_port() : 0;
  for (unsigned i = 0; i < n; ++i) {
    pk[i].slot = static_cast<uint8_t>(i);
    const hal::Packet& p = *pk[i].pkt;
    tok |= static_cast<uint32_t>(p.has_fate_token()) << i;
    one_port &= p.rx_port() == port0;
  }
  if (!one_port) [[unlikely]]
    for (unsigned i = 0; i < n; ++i) rx_port_[i] = pk[i].pkt->rx_port();
  tok_mask_ = tok;
  out_mask_ = tok_on_mask_ = alt_mask_ = 0;
  one_port_ = one_port;
  port0_ = port0;
}

void Executor::settle() noexcept {
  if (!ctx_.drops || !tok_mask_) return;
  // The common cases first: every packet forwarded, from one port (a
  // batch is usually one port's), and every packet gone on whole.
  if (!(tok_mask_ & ~out_mask_) && !tok_on_mask_ && one_port_) {
    ctx_.count_forwarded(port0_, static_cast<uint32_t>(std::popcount(tok_mask_)));
    return;
  }
  if (!out_mask_ && !(tok_mask_ & ~tok_on_mask_)) return;  // decided in a later pass, or by the slow path
  for (uint32_t m = tok_mask_; m; m &= m - 1) {
    const unsigned s = static_cast<unsigned>(std::countr_zero(m));
    const uint32_t bit = 1u << s;
    const uint16_t port = one_port_ ? port0_ : rx_port_[s];
    if (out_mask_ & bit) {
      ctx_.count_forwarded(port, 1);
      if (tok_on_mask_ & bit) tok_on_[s]->set_fate_token(false);  // decided: its later passes are copies
    } else if (tok_on_mask_ & bit) {
      // Still on its way: decided in a later pass, or by the slow path.
    } else if (alt_mask_ & bit) {
      alt_[s]->set_fate_token(true);  // the token instance was dropped; a copy carries the packet on
    } else {
      ctx_.drops->dropped(port, tok_reason_[s]);  // set where it was dropped (lost, to_tx_one)
    }
  }
}

// The first port a list outputs to, looking into nested clones; false when
// it outputs nowhere.
bool first_output(std::span<const uint8_t> list, uint32_t& port) noexcept {
  flow::DpActionReader r(list);
  while (!r.done()) {
    const DpAction a = r.next();
    if (a.type == DpActionType::kOutput) {
      port = a.port();
      return true;
    }
    if (a.type == DpActionType::kClone && first_output(a.nested(), port)) return true;
  }
  return false;
}

unsigned Executor::copy(const Batch& b, uint32_t limit, ExecPacket* out, LayerOffsets* ofs,
                        hal::Backend* from) noexcept {
  hal::Packet* fresh[hal::kMaxBurst];
  // Buffers that hold the longest copy of the batch: jumbo ones when a
  // frame is over 2 KB (hal::Backend::alloc_burst picks the class).
  uint32_t longest = 0;
  for (unsigned i = 0; i < b.n; ++i) {
    const uint32_t l = limit && limit < b.pk[i].pkt->len() ? limit : b.pk[i].pkt->len();
    longest = l > longest ? l : longest;
  }
  if (!from) from = ctx_.backend;
  const unsigned got = from ? from->alloc_burst({fresh, b.n}, longest) : 0;
  unsigned n = 0;
  for (unsigned i = 0; i < got; ++i) {
    const hal::Packet& from = *b.pk[i].pkt;
    hal::Packet* c = fresh[i];
    const uint32_t len = limit && limit < from.len() ? limit : from.len();
    if (!c->set_len(len)) [[unlikely]] {  // longer than a fresh buffer holds
      hal::release(c);
      continue;
    }
    std::memcpy(c->data(), from.data(), len);
    copy_meta(*c, from);
    ofs[n] = *b.pk[i].ofs;
    out[n] = {c, &ofs[n], b.pk[i].key, b.pk[i].slot};
    ++n;
  }
  c_.copy_failed += b.n - n;
  // A copy not made is a packet not sent where it was to go: counted, the
  // original's fate unchanged.
  if (b.n != n && ctx_.drops) ctx_.drops->instance(DropReason::kPoolExhausted, b.n - n);
  return n;
}

template <typename Sink>
void Executor::consume(Batch& b, bool last, bool use_trunc, hal::Backend* from, Sink&& sink) noexcept {
  if (last) {
    if (use_trunc) truncate(b);
    sink(std::span<const ExecPacket>(b.pk, b.n));
    b.n = 0;
    return;
  }
  ExecPacket cpk[hal::kMaxBurst];
  LayerOffsets cofs[hal::kMaxBurst];
  const unsigned n = copy(b, use_trunc ? b.max_len : 0, cpk, cofs, from);
  sink(std::span<const ExecPacket>(cpk, n));
}

void Executor::to_tx(std::span<const ExecPacket> pk, uint32_t port) noexcept {
  if (ctx_.tx.may_overflow()) [[unlikely]] {
    // No flush function (not a PMD's context): one at a time, so that
    // what does not fit is known.
    for (const ExecPacket& e : pk) to_tx_one(e, port);
    return;
  }
  hal::Packet* pkts[hal::kMaxBurst];
  for (size_t i = 0; i < pk.size(); ++i) {
    pkts[i] = pk[i].pkt;
    went_out(pk[i]);
  }
  ctx_.tx.push(port, {pkts, pk.size()}, c_.tx_overflow);  // with a flush function nothing overflows
  c_.outputs += pk.size();
}

bool Executor::queue_recirc(const ExecPacket& e) noexcept {
  RecircQueue& q = ctx_.recirc;
  if (q.n == kExecRecircCap) [[unlikely]] {
    lost(e, DropReason::kRecircQueueFull);
    ++c_.recirc_overflow;
    return false;
  }
  q.pkts[q.n] = e.pkt;
  ++c_.recirculated;
  went_on(e);
  return true;
}

void Executor::to_recirc(std::span<const ExecPacket> pk, uint32_t id) noexcept {
  RecircQueue& q = ctx_.recirc;
  for (const ExecPacket& e : pk) {
    e.pkt->meta().recirc_id = id;
    const unsigned at = q.n;
    if (!queue_recirc(e)) continue;
    ++q.n;
    // The tunnel the key has (a pass after tnl_pop) goes on with the packet.
    RecircTunnel& t = q.tun[at];
    const flow::Miniflow* key = e.key;
    if (key && (key->get(1) | key->get(4) | key->get(5))) [[unlikely]] {
      uint64_t w[packet::TunnelMetadata::kWords];
      for (unsigned i = 0; i < packet::TunnelMetadata::kWords; ++i) w[i] = key->get(i);
      std::memcpy(&t.tunnel, w, sizeof w);
      const unsigned nw = std::min<unsigned>((t.tunnel.opt_len + 7) / 8, packet::kMaxKeyedTunOptWords);
      for (unsigned i = 0; i < nw; ++i) {
        const uint64_t v = key->get(packet::TunnelMetadata::kWords + i);
        std::memcpy(t.opts + 8 * i, &v, 8);
      }
      q.any_tunnel = true;
    } else {
      t.tunnel = packet::TunnelMetadata{};
    }
  }
}

void Executor::tnl_push(Batch& b, const DpAction& a) noexcept {
  const flow::TnlPushArgs args = a.tnl_push_args();
  const uint8_t* hdr = a.payload + sizeof(flow::TnlPushArgs);
  const uint32_t hlen = args.header_len;
  const auto type = static_cast<packet::TnlType>(args.tnl_type);
  const bool v6 = load<flow::be16>(hdr + 12) == packet::be16_const(packet::kEthTypeIpv6);
  const uint16_t l4 = static_cast<uint16_t>(kEthHeaderLen + (v6 ? sizeof(packet::Ipv6Header) : sizeof(packet::Ipv4Header)));
  const bool gre = type == packet::TnlType::kGre || type == packet::TnlType::kIp6Gre;
  unsigned kept = 0;
  for (unsigned i = 0; i < b.n; ++i) {
    ExecPacket e = b.pk[i];
    hal::Packet& p = *e.pkt;
    // OVS's netdev_tnl_get_src_port: the packet's RSS hash, which its
    // datapath set from the 5-tuple when the NIC gave none.
    const uint32_t hash = p.has_rss_hash() ? p.rss_hash() : e.key ? flow::hash_l4(*e.key, 0) : 0;
    uint8_t* d = p.push_front(hlen);
    if (!d) [[unlikely]] {
      lost(e, DropReason::kTnlPushNoHeadroom);
      ++c_.tnl_push_no_headroom;
      continue;
    }
    std::memcpy(d, hdr, hlen);
    packet::finish_tunnel_push(d, p.len(), type, hlen, hash);
    *e.ofs = LayerOffsets{};
    e.ofs->l2 = 0;
    e.ofs->l3 = kEthHeaderLen;
    e.ofs->l4 = l4;
    e.ofs->payload = gre ? LayerOffsets::kNone : static_cast<uint16_t>(l4 + sizeof(packet::UdpHeader));
    ++c_.tnl_pushed;
    b.pk[kept++] = e;
  }
  b.n = kept;
}

void Executor::tnl_pop(Batch& b, uint32_t vport) noexcept {
  const uint32_t info = ctx_.vports && vport < kExecMaxVports ? ctx_.vports[vport].load(std::memory_order_acquire) : 0;
  const unsigned type = info >> 16;  // 1 + VportType: 2 vxlan, 3 geneve, 4 gre (datapath.h)
  const auto udp_port = static_cast<uint16_t>(info);
  packet::TnlPopKind kind = packet::TnlPopKind::kVxlan;
  bool ok_type = true;
  switch (type) {
    case 2: kind = packet::TnlPopKind::kVxlan; break;
    case 3: kind = packet::TnlPopKind::kGeneve; break;
    case 4: kind = packet::TnlPopKind::kGre; break;
    default: ok_type = false; break;
  }
  RecircQueue& q = ctx_.recirc;
  for (unsigned i = 0; i < b.n; ++i) {
    hal::Packet& p = *b.pk[i].pkt;
    packet::TnlPopResult r = packet::TnlPopResult::kNoVport;
    RecircTunnel* t = q.n < kExecRecircCap ? &q.tun[q.n] : nullptr;
    packet::TnlPopInfo info_out;
    if (ok_type) r = packet::parse_tunnel_header(kind, udp_port, p.data(), p.len(), info_out);
    if (r != packet::TnlPopResult::kOk) [[unlikely]] {
      lost(b.pk[i], tnl_pop_drop_reason(r));
      ++c_.tnl_pop_errors;
      ++c_.tnl_pop_reasons[static_cast<unsigned>(r)];
      continue;
    }
    (void)p.pull_front(info_out.outer_len);
    p.set_in_port(static_cast<uint16_t>(vport));  // its rx port (and token) stay: one received packet
    p.meta().recirc_id = 0;
    p.clear_rss_hash();
    ++c_.tnl_popped;
    if (!queue_recirc(b.pk[i])) continue;
    t->tunnel = info_out.tunnel;
    std::memcpy(t->opts, info_out.opts, (info_out.tunnel.opt_len + 7) & ~7u);
    ++q.n;
    q.any_tunnel = true;
  }
  b.n = 0;
}

void Executor::to_slow_path(std::span<const ExecPacket> pk, const DpAction& a) noexcept {
  SlowPathQueue& q = ctx_.upcalls;
  const flow::UserspaceArgs args = a.userspace_args();
  const std::span<const uint8_t> ud = a.userdata();
  for (const ExecPacket& e : pk) {
    if (q.n == kExecUpcallCap) [[unlikely]] {
      lost(e, DropReason::kUserspaceLost);
      ++c_.upcall_overflow;
      continue;
    }
    q.reqs[q.n++] = {e.pkt, e.key, ud, a.pid(), args.tunnel_out_port, a.sub};
    ++c_.upcalls;
    went_on(e);
  }
}

void Executor::to_bond(std::span<const ExecPacket> pk, uint32_t bond_id) noexcept {
  const BondMembers* t = bond_table(bond_id);
  if (!t) [[unlikely]] {
    for (const ExecPacket& e : pk) lost(e, DropReason::kInvalidBond);
    c_.bond_drops += pk.size();
    return;
  }
  BondBucketCounters* cnt = (*ctx_.bonds)[bond_id].counters.load(std::memory_order_relaxed);
  for (const ExecPacket& e : pk) {
    const uint32_t bucket = e.pkt->meta().dp_hash & kBondBucketMask;
    const uint16_t member = (*t)[bucket];
    if (member == kNoBondMember) [[unlikely]] {
      lost(e, DropReason::kBondNoMember);
      ++c_.bond_drops;
      continue;
    }
    if (cnt) [[likely]] {
      // Single writer (this PMD): no locked instruction.
      std::atomic<uint64_t>& np = cnt->packets[bucket];
      std::atomic<uint64_t>& nb = cnt->bytes[bucket];
      np.store(np.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      nb.store(nb.load(std::memory_order_relaxed) + e.pkt->len(), std::memory_order_relaxed);
    }
    to_tx_one(e, member);
  }
}

void Executor::to_tx_one(const ExecPacket& e, uint32_t port) noexcept {
  hal::Packet* p = e.pkt;
  const bool token = p->has_fate_token();  // before push() may release it
  const uint64_t before = c_.tx_overflow;
  ctx_.tx.push(port, {&p, 1}, c_.tx_overflow);
  if (c_.tx_overflow == before) {
    ++c_.outputs;
    went_out(e);
    return;
  }
  if (!ctx_.drops) return;  // released by push() (no flush function)
  ctx_.drops->instance(DropReason::kTxBatchFull);
  if (token) tok_reason_[e.slot] = DropReason::kTxBatchFull;
}

void Executor::push_vlan(Batch& b, const DpAction& a) noexcept {
  const flow::be16 tpid = packet::hton16(a.vlan_tpid());
  const flow::be16 tci = packet::hton16(static_cast<uint16_t>(a.vlan_tci() & ~packet::kVlanCfi));
  unsigned kept = 0;
  for (unsigned i = 0; i < b.n; ++i) {
    ExecPacket e = b.pk[i];
    if (e.ofs->l2 == kNone || e.pkt->len() < kEthHeaderLen) [[unlikely]] {
      ++c_.header_missing;
    } else if (uint8_t* d = e.pkt->push_front(kVlanLen)) [[likely]] {
      std::memmove(d, d + kVlanLen, 2 * size_t{packet::kEthAddrLen});
      store(d + 12, tpid);
      store(d + 14, tci);
      e.ofs->l2 = 0;
      e.ofs->l2_5 = 12;
      shift_offsets(*e.ofs, kVlanLen);
    } else {
      lost(e, DropReason::kVlanNoHeadroom);
      ++c_.no_headroom;
      continue;
    }
    b.pk[kept++] = e;
  }
  b.n = kept;
}

void Executor::pop_vlan(Batch& b) noexcept {
  for (unsigned i = 0; i < b.n; ++i) {
    hal::Packet& p = *b.pk[i].pkt;
    LayerOffsets& o = *b.pk[i].ofs;
    uint8_t* d = p.data();
    if (o.l2 == kNone || p.len() < kEthHeaderLen + kVlanLen || !is_vlan_tpid(load<flow::be16>(d + 12)))
        [[unlikely]] {
      ++c_.header_missing;
      continue;
    }
    std::memmove(d + kVlanLen, d, 2 * size_t{packet::kEthAddrLen});
    (void)p.pull_front(kVlanLen);
    d = p.data();
    shift_offsets(o, -static_cast<int>(kVlanLen));
    o.l2_5 = p.len() >= kEthHeaderLen + kVlanLen && is_vlan_tpid(load<flow::be16>(d + 12)) ? 12 : kNone;
  }
}

void Executor::set(Batch& b, const DpAction& a) noexcept {
  unsigned missing = 0;
  switch (a.set_header()) {
    case flow::SetHeader::kEth: {
      flow::SetEth k, m;
      a.set_fields(k, m);
      for (unsigned i = 0; i < b.n; ++i) missing += !set_eth(*b.pk[i].pkt, *b.pk[i].ofs, k, m);
      break;
    }
    case flow::SetHeader::kIpv4: {
      flow::SetIpv4 k, m;
      a.set_fields(k, m);
      for (unsigned i = 0; i < b.n; ++i) missing += !set_ipv4(*b.pk[i].pkt, *b.pk[i].ofs, k, m);
      break;
    }
    case flow::SetHeader::kIpv6: {
      flow::SetIpv6 k, m;
      a.set_fields(k, m);
      for (unsigned i = 0; i < b.n; ++i) missing += !set_ipv6(*b.pk[i].pkt, *b.pk[i].ofs, k, m);
      break;
    }
    case flow::SetHeader::kTcp:
    case flow::SetHeader::kUdp: {
      flow::SetL4 k, m;
      a.set_fields(k, m);
      const uint8_t proto =
          a.set_header() == flow::SetHeader::kTcp ? packet::kIpProtoTcp : packet::kIpProtoUdp;
      for (unsigned i = 0; i < b.n; ++i) missing += !set_l4(*b.pk[i].pkt, *b.pk[i].ofs, proto, k, m);
      break;
    }
    case flow::SetHeader::kSctp: {
      flow::SetL4 k, m;
      a.set_fields(k, m);
      for (unsigned i = 0; i < b.n; ++i) missing += !set_sctp(*b.pk[i].pkt, *b.pk[i].ofs, k, m);
      break;
    }
    case flow::SetHeader::kIcmp:
    case flow::SetHeader::kIcmpv6: {
      flow::SetIcmp k, m;
      a.set_fields(k, m);
      const uint8_t proto =
          a.set_header() == flow::SetHeader::kIcmp ? packet::kIpProtoIcmp : packet::kIpProtoIcmpv6;
      for (unsigned i = 0; i < b.n; ++i) missing += !set_icmp(*b.pk[i].pkt, *b.pk[i].ofs, proto, k, m);
      break;
    }
    case flow::SetHeader::kArp: {
      flow::SetArp k, m;
      a.set_fields(k, m);
      for (unsigned i = 0; i < b.n; ++i) missing += !set_arp(*b.pk[i].pkt, *b.pk[i].ofs, k, m);
      break;
    }
  }
  c_.header_missing += missing;
}

void Executor::clone(Batch& b, std::span<const uint8_t> nested, bool last) noexcept {
  if (last) {
    run(b, nested);  // the originals: no copy needed
    return;
  }
  ExecPacket cpk[hal::kMaxBurst];
  LayerOffsets cofs[hal::kMaxBurst];
  uint32_t port = 0;
  hal::Backend* from = first_output(nested, port) ? backend_for(port) : nullptr;
  Batch c{cpk, copy(b, 0, cpk, cofs, from), b.max_len};
  b.max_len = 0;  // the copies carry the pending trunc; the originals lose it
  if (c.n) run(c, nested);
}

void Executor::run(Batch& b, std::span<const uint8_t> list) noexcept {
  flow::DpActionReader r(list);
  while (b.n && !r.done()) {
    const DpAction a = r.next();
    const bool last = r.done();
    switch (a.type) {
      case DpActionType::kOutput:
        consume(b, last, true, last ? nullptr : backend_for(a.port()),
                [&](std::span<const ExecPacket> pk) { to_tx(pk, a.port()); });
        b.max_len = 0;
        break;
      case DpActionType::kRecirc:
        consume(b, last, false, nullptr,
                [&](std::span<const ExecPacket> pk) { to_recirc(pk, a.recirc_id()); });
        b.max_len = 0;
        break;
      case DpActionType::kUserspace:
        consume(b, last, true, nullptr, [&](std::span<const ExecPacket> pk) { to_slow_path(pk, a); });
        b.max_len = 0;
        break;
      case DpActionType::kLbOutput: {
        // Copies (not the last action) from the backend of the member the
        // first packet goes to: a bond's members share one in practice.
        hal::Backend* from = nullptr;
        if (!last) {
          const BondMembers* t = bond_table(a.bond_id());
          const uint16_t m = t ? (*t)[b.pk[0].pkt->meta().dp_hash & kBondBucketMask] : kNoBondMember;
          from = m != kNoBondMember ? backend_for(m) : nullptr;
        }
        consume(b, last, true, from, [&](std::span<const ExecPacket> pk) { to_bond(pk, a.bond_id()); });
        b.max_len = 0;
        break;
      }
      case DpActionType::kDrop:
        release(b, c_.dropped, ctx_.drop_reason);
        return;
      case DpActionType::kPushVlan:
        push_vlan(b, a);
        break;
      case DpActionType::kPopVlan:
        pop_vlan(b);
        break;
      case DpActionType::kSet:
        set(b, a);
        break;
      case DpActionType::kHash:
        for (unsigned i = 0; i < b.n; ++i) {
          hal::Packet& p = *b.pk[i].pkt;
          if (p.has_rss_hash()) {
            p.meta().dp_hash = hash_int(p.rss_hash(), a.basis());  // odp-execute: the NIC's hash, mixed
          } else if (const flow::Miniflow* key = b.pk[i].key) [[likely]] {
            p.meta().dp_hash = flow::hash_l4(*key, a.basis());
          } else {
            ++c_.header_missing;
          }
        }
        break;
      case DpActionType::kTrunc:
        b.max_len = std::max<uint32_t>(a.max_len(), kEthHeaderLen);
        break;
      case DpActionType::kClone:
        clone(b, a.nested(), last);
        break;
      case DpActionType::kMeter:
        c_.meter_ignored += b.n;
        break;
      case DpActionType::kTnlPush:
        tnl_push(b, a);
        break;
      case DpActionType::kTnlPop:
        // On the packets themselves: copies first unless it is the last action.
        if (last) {
          tnl_pop(b, a.tnl_pop_port());
        } else {
          ExecPacket cpk[hal::kMaxBurst];
          LayerOffsets cofs[hal::kMaxBurst];
          Batch c{cpk, copy(b, 0, cpk, cofs), 0};
          if (c.n) tnl_pop(c, a.tnl_pop_port());
        }
        break;
      default:
        release(b, c_.unsupported, DropReason::kUnsupportedAction);
        return;
    }
  }
  if (b.n) release(b, c_.dropped, ctx_.drop_reason);  // the list sent them nowhere
}

}  // namespace

void execute_actions(ExecContext& ctx, std::span<const ExecPacket> batch,
                     std::span<const uint8_t> actions) noexcept {
  Executor ex(ctx);
  ctx.counters.packets += batch.size();
  ExecPacket pk[hal::kMaxBurst];
  for (size_t at = 0; at < batch.size(); at += hal::kMaxBurst) {
    const auto n = static_cast<unsigned>(std::min<size_t>(hal::kMaxBurst, batch.size() - at));
    std::copy_n(batch.begin() + static_cast<std::ptrdiff_t>(at), n, pk);
    ex.begin(pk, n);
    Batch b{pk, n, 0};
    ex.run(b, actions);
    ex.settle();
  }
}

}  // namespace keel::datapath

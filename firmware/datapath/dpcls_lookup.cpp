// The table of specialized subtable lookups and the generic fallback.
//
// Which shapes, and why. With keel's word map (flow/flow_key.h) every
// megaflow has u0 >= 1 (word 50: in_port + recirc_id), and:
//   u0: + 60 (dl_type), + 59 (eth src/dst), + 61 (VLAN), + 48 (skb_priority/
//       pkt_mark), + 49 (dp_hash) -> 1..6; an IPv4 tunnel megaflow after
//       tnl_pop has 0 (tun_id), 1 (tun addresses), 6 (tun flags/ports) + 50,
//       60 (+59) -> 5..6;
//   u1: IPv4/ARP use 64 (addresses), 69 (proto/frag/tos/ttl), 72 (tcp_flags,
//       arp_sha), 73 (arp_tha), 74 (ports) -> 0..5; IPv6 with prefix masks
//       (one or two words per address) + 69 + 74 -> up to 6.
// So the grid u0 in 1..6 x u1 in 0..6 (42 shapes) covers every megaflow
// our parser and translation produce except full 128-bit IPv6 5-tuples with
// ND or tunnel + L2 + VLAN together; Open vSwitch's own list adds (8,1),
// (9,1) and (9,4) — (5,3) (5,2) (5,1) (4,1) (4,0) are in the grid — for 45.
// The rest take the generic function, which is correct for any shape.
// Cost of a specialization: 0.7-1.6 KB of text (x86-64 -O2; all 45 plus the
// generic function 52 KB, 77 KB on aarch64); only the shapes a PMD's
// subtables use are ever in its i-cache, and the table is read only when a
// subtable is created. Gain: the generic function takes 12-26 % longer per
// packet (tests/bench/RESULTS.md).
#include "datapath/dpcls_lookup.h"

#include <array>

namespace keel::datapath {

namespace {

struct Shape {
  uint8_t u0, u1;
};

inline constexpr unsigned kGridU0Min = 1, kGridU0Max = 6;
inline constexpr unsigned kGridU1Max = 6;
inline constexpr Shape kOvsExtraShapes[] = {{8, 1}, {9, 1}, {9, 4}};
inline constexpr unsigned kShapeCount =
    (kGridU0Max - kGridU0Min + 1) * (kGridU1Max + 1) + std::size(kOvsExtraShapes);

constexpr std::array<Shape, kShapeCount> make_shapes() {
  std::array<Shape, kShapeCount> s{};
  unsigned i = 0;
  for (unsigned u0 = kGridU0Min; u0 <= kGridU0Max; ++u0)
    for (unsigned u1 = 0; u1 <= kGridU1Max; ++u1)
      s[i++] = {static_cast<uint8_t>(u0), static_cast<uint8_t>(u1)};
  for (const Shape& x : kOvsExtraShapes) s[i++] = x;
  return s;
}
inline constexpr std::array<Shape, kShapeCount> kShapes = make_shapes();

constexpr bool shapes_distinct() {
  for (unsigned i = 0; i < kShapeCount; ++i)
    for (unsigned j = i + 1; j < kShapeCount; ++j)
      if (kShapes[i].u0 == kShapes[j].u0 && kShapes[i].u1 == kShapes[j].u1) return false;
  return true;
}
static_assert(shapes_distinct(), "each shape is specialized once (the OVS extras lie outside the grid)");
static_assert(kShapeCount == 45, "6 x 7 grid + (8,1) (9,1) (9,4): update the comment above when changing");

template <size_t... I>
constexpr std::array<DpclsLookupImpl, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {DpclsLookupImpl{kShapes[I].u0, kShapes[I].u1, true,
                          &dpcls_subtable_lookup<kShapes[I].u0, kShapes[I].u1>}...};
}
// The specializations, instantiated here from the one template.
constexpr std::array<DpclsLookupImpl, kShapeCount> kTable =
    make_table(std::make_index_sequence<kShapeCount>{});

constexpr DpclsLookupImpl kGeneric{0, 0, false,
                                   &dpcls_subtable_lookup<dpcls_detail::kRuntime, dpcls_detail::kRuntime>};

}  // namespace

std::string DpclsLookupImpl::name() const {
  if (!specialized) return "generic";
  return "specialized(" + std::to_string(u0) + "," + std::to_string(u1) + ")";
}

std::span<const DpclsLookupImpl> dpcls_lookup_specializations() noexcept { return kTable; }

const DpclsLookupImpl& dpcls_lookup_generic() noexcept { return kGeneric; }

const DpclsLookupImpl& dpcls_lookup_select(unsigned u0, unsigned u1) noexcept {
  for (const DpclsLookupImpl& impl : kTable)
    if (impl.u0 == u0 && impl.u1 == u1) return impl;
  return kGeneric;
}

namespace dpcls_detail {

DpclsRule* probe_after(const DpclsSubtable& st, uint32_t hash, const uint64_t* blk, uint32_t b,
                       unsigned e) noexcept {
  const unsigned n = st.n_words;
  for (;;) {
    const DpclsBucket& bkt = st.buckets[b];
    for (++e; e < DpclsBucket::kEntries; ++e) {
      DpclsRule* r = bkt.rules[e];
      if (!r || bkt.hashes[e] != hash) continue;
      uint64_t diff = 0;
      for (unsigned i = 0; i < n; ++i) diff |= blk[i] ^ r->values()[i];
      if (diff == 0) return r;
    }
    if (bkt.overflow == 0) return nullptr;
    b = (b + 1) & st.bucket_mask;
    e = ~0u;  // ++e -> entry 0 of the next bucket
  }
}

}  // namespace dpcls_detail

}  // namespace keel::datapath

// Miniflow — a FlowKey (or a mask) with only the words that matter.
//
// `map.u0` bit i says word i of the FlowKey is present, `map.u1` bit i says
// word 64+i is; `values` holds the present words in that order (u0 words
// ascending, then u1 words ascending). An absent word reads as zero. Masks
// are Miniflows too: a mask's map has a bit for every word with at least one
// mask bit set, and its values are the mask words.
//
// A packet's miniflow is built by the parser with MiniflowBuilder, in
// ascending word order; the same packet always yields the same map and
// values, so two packets of one flow compare equal word for word (EMC).
//
// Thread-safety: plain value types.
#pragma once

#include <bit>
#include <cassert>
#include <cstdint>
#include <cstring>

#include "flow/flow_key.h"

namespace keel::flow {

struct FlowMap {
  uint64_t u0 = 0, u1 = 0;

  static constexpr FlowMap of_word(unsigned w) {
    return w < 64 ? FlowMap{uint64_t{1} << w, 0} : FlowMap{0, uint64_t{1} << (w - 64)};
  }
  constexpr bool test(unsigned w) const { return w < 64 ? (u0 >> w) & 1 : (u1 >> (w - 64)) & 1; }
  constexpr void set(unsigned w) {
    if (w < 64) u0 |= uint64_t{1} << w;
    else u1 |= uint64_t{1} << (w - 64);
  }
  constexpr unsigned count() const { return std::popcount(u0) + std::popcount(u1); }
  constexpr unsigned count_u0() const { return std::popcount(u0); }
  constexpr unsigned count_u1() const { return std::popcount(u1); }
  constexpr bool empty() const { return (u0 | u1) == 0; }
  // Index of word w among the present words (w need not be present).
  constexpr unsigned index_of(unsigned w) const {
    return w < 64 ? std::popcount(u0 & ((uint64_t{1} << w) - 1))
                  : std::popcount(u0) + std::popcount(u1 & ((uint64_t{1} << (w - 64)) - 1));
  }
  // Is every word of `o` also in this map?
  constexpr bool contains(const FlowMap& o) const { return (o.u0 & ~u0) == 0 && (o.u1 & ~u1) == 0; }
  constexpr FlowMap operator|(const FlowMap& o) const { return {u0 | o.u0, u1 | o.u1}; }
  constexpr FlowMap operator&(const FlowMap& o) const { return {u0 & o.u0, u1 & o.u1}; }
  constexpr bool operator==(const FlowMap&) const = default;

  // Calls f(word) for every present word, in order.
  template <typename F>
  constexpr void for_each(F&& f) const {
    for (uint64_t m = u0; m; m &= m - 1) f(static_cast<unsigned>(std::countr_zero(m)));
    for (uint64_t m = u1; m; m &= m - 1) f(64 + static_cast<unsigned>(std::countr_zero(m)));
  }
};

// Most words a Miniflow can hold. A parsed packet has at most ~30 (tunnel
// without options + metadata + L2 + IPv6 + ND + L4); masks over tunnel
// options would need more and are refused at configuration time.
inline constexpr unsigned kMiniflowMaxWords = 40;

struct alignas(8) Miniflow {
  FlowMap map;
  uint64_t values[kMiniflowMaxWords];

  unsigned n_words() const { return map.count(); }
  uint64_t get(unsigned w) const { return map.test(w) ? values[map.index_of(w)] : 0; }

  bool operator==(const Miniflow& o) const {
    return map == o.map && std::memcmp(values, o.values, n_words() * 8) == 0;
  }
};

// Builds a miniflow word by word, in ascending word order.
class MiniflowBuilder {
 public:
  explicit MiniflowBuilder(Miniflow& mf) : mf_(mf) { mf_.map = {}; }
  void push(unsigned w, uint64_t value) {
    assert(n_ < kMiniflowMaxWords);
    assert(n_ == 0 || w > last_);
    mf_.map.set(w);
    mf_.values[n_++] = value;
#ifndef NDEBUG
    last_ = w;
#endif
  }
  unsigned size() const { return n_; }

 private:
  Miniflow& mf_;
  unsigned n_ = 0;
#ifndef NDEBUG
  unsigned last_ = 0;
#endif
};

// FlowKey <-> Miniflow.
void expand(const Miniflow& mf, FlowKey& out);  // absent words become zero
// Keeps the non-zero words; false if more than kMiniflowMaxWords are non-zero.
bool compress(const FlowKey& key, Miniflow& out);
// Keeps exactly the words of `map` (zero or not); false if map is too big.
bool compress(const FlowKey& key, const FlowMap& map, Miniflow& out);

// (key & mask) == target, where target holds the masked words in mask's map.
inline bool equal_masked(const Miniflow& key, const Miniflow& mask, const Miniflow& target) {
  if (!(target.map == mask.map)) return false;
  unsigned i = 0;
  bool eq = true;
  mask.map.for_each([&](unsigned w) {
    eq &= (key.get(w) & mask.values[i]) == target.values[i];
    ++i;
  });
  return eq;
}

// Builds the masked copy of `key` in mask's map: what a subtable stores.
inline void mask_miniflow(const Miniflow& key, const Miniflow& mask, Miniflow& out) {
  out.map = mask.map;
  unsigned i = 0;
  mask.map.for_each([&](unsigned w) {
    out.values[i] = key.get(w) & mask.values[i];
    ++i;
  });
}

}  // namespace keel::flow

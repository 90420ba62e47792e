// Subtable lookup functions: one template over the mask's shape (U0, U1),
// instantiated for the shapes in the table of dpcls_lookup.cpp, and the
// generic function — the same template with runtime counts — for any other
// shape. DpclsSubtable::create() picks one through dpcls_lookup_select();
// `dpcls-show` names it ("specialized(2,2)" or "generic").
//
// What specializing buys: per key, for each of the mask's words, the lookup
// tests the key's map bit, finds the value by a popcount of the key's map
// below that bit (absent -> 0), ANDs the mask word and feeds the hash; then
// it compares the masked words with the candidate rule's. With U0 and U1
// known at compile time those per-word loops are unrolled, the mask words
// are read at constant offsets and the key's block stride is a constant; the
// generic function runs the same steps in loops over the subtable's runtime
// counts. (Open vSwitch measured ~10-15 % for the same change, its
// lib/dpif-netdev-lookup-generic.c; our figures: tests/bench/RESULTS.md.)
//
// The three stages run over the whole burst before the next starts, so the
// memory accesses of one key overlap the work on the others:
//   1. extract + hash every key, prefetch its home bucket;
//   2. probe every key's bucket chain for the first entry with its hash,
//      prefetch that rule;
//   3. verify every candidate (masked words equal); on a mismatch (two
//      masked keys with one 32-bit hash: rare) continue that key's probe.
// Cost (tests/bench/RESULTS.md, "dpcls"; 2.45 GHz EPYC, shared): one probe
// of a 100k-rule subtable ~65 ns/key specialized vs ~77 generic; the
// 16-mask scenario (8.5 probes per hit) ~260 ns/pkt in cache, ~610 with
// 100k rules; the generic function takes 12-26 % longer. Per mask word: a
// popcount, a (predicted) branch, a load, an AND and a crc32 (3-cycle
// latency, chained per key); per probe a bucket line, and a rule line on a
// hash match.
//
// No allocation, lock, exception or syscall; every access is inside the
// subtable, the keys, the rules and the scratch.
//
// Thread-safety: pure functions of their arguments (the subtable is read,
// out[] and the scratch are written), called by the Dpcls owner thread.
#pragma once

#include <bit>
#include <cassert>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "core/hash.h"
#include "datapath/dpcls_subtable.h"
#include "flow/miniflow.h"

namespace keel::datapath {

// A lookup function and the shape it is for.
struct DpclsLookupImpl {
  uint8_t u0, u1;  // shape (0, 0 for the generic function, which takes any)
  bool specialized;
  DpclsLookupFn fn;
  std::string name() const;  // "specialized(U0,U1)" or "generic"
};

// The specializations, in the order of the table (dpcls_lookup.cpp).
std::span<const DpclsLookupImpl> dpcls_lookup_specializations() noexcept;
// The generic function: any shape.
const DpclsLookupImpl& dpcls_lookup_generic() noexcept;
// The specialization for (u0, u1), or the generic function.
const DpclsLookupImpl& dpcls_lookup_select(unsigned u0, unsigned u1) noexcept;

namespace dpcls_detail {

// U0 = U1 = kRuntime instantiates the generic function.
inline constexpr unsigned kRuntime = ~0u;

// f(0) ... f(n-1): unrolled when N is a compile-time count, a loop otherwise.
template <unsigned N, typename F>
[[gnu::always_inline]] inline void repeat(unsigned n, F&& f) {
  if constexpr (N == kRuntime) {
    for (unsigned i = 0; i < n; ++i) f(i);
  } else {
    [&]<unsigned... I>(std::integer_sequence<unsigned, I...>) __attribute__((always_inline)) { (f(I), ...); }
    (std::make_integer_sequence<unsigned, N>{});
  }
}

inline constexpr uint64_t kZeroWord = 0;

// Continues key k's probe after entry `e` of bucket `b` (where a candidate
// with the key's hash failed to verify); the rule it matches or nullptr.
// Out of line: only reached when two masked keys share a 32-bit hash.
DpclsRule* probe_after(const DpclsSubtable& st, uint32_t hash, const uint64_t* blk, uint32_t b,
                       unsigned e) noexcept;

}  // namespace dpcls_detail

// The lookup for masks of shape (U0, U1); <kRuntime, kRuntime> is the
// generic function. Contract: DpclsLookupFn (dpcls_subtable.h).
template <unsigned U0, unsigned U1>
uint32_t dpcls_subtable_lookup(const DpclsSubtable& st, uint32_t keys_map, const flow::Miniflow* const* keys,
                               DpclsRule** out, DpclsScratch& scratch) noexcept {
  using dpcls_detail::kRuntime;
  using dpcls_detail::repeat;
  constexpr bool kGeneric = U0 == kRuntime;
  static_assert(kGeneric == (U1 == kRuntime), "both counts fixed, or both runtime (generic)");
  static_assert(kGeneric || U0 + U1 <= flow::kMiniflowMaxWords, "a mask has at most kMiniflowMaxWords words");
  constexpr unsigned N = kGeneric ? kRuntime : U0 + U1;
  const unsigned n_u0 = kGeneric ? st.n_u0 : U0;
  const unsigned n_u1 = kGeneric ? st.n_u1 : U1;
  const unsigned n = n_u0 + n_u1;
  assert(n_u0 == st.n_u0 && n_u1 == st.n_u1);
  const DpclsSubtable::Word* const words = st.words;
  const DpclsBucket* const buckets = st.buckets;
  const uint32_t bucket_mask = st.bucket_mask;

  // Stage 1: masked words and hash of every key; prefetch its home bucket.
  for (uint32_t m = keys_map; m; m &= m - 1) {
    const unsigned k = static_cast<unsigned>(std::countr_zero(m));
    const flow::Miniflow& key = *keys[k];
    uint64_t* const blk = scratch.blocks + k * n;
    const uint64_t map0 = key.map.u0, map1 = key.map.u1;
    const uint64_t* const vals1 = key.values + std::popcount(map0);
    uint32_t h = 0;
    // The word's value if the key has it (index = present words below it),
    // else 0 (read from kZeroWord: nothing outside the key's values is
    // read). Compilers make the ?: a branch; it predicts well, since the
    // packets that reach a subtable mostly share their map. A branch-free
    // select (masking the two addresses) measured slower: it puts three more
    // operations between the popcount and the load.
    repeat<U0>(
        n_u0, [&](unsigned i) __attribute__((always_inline)) {
          const uint64_t bit = words[i].bit;
          const uint64_t* v =
              (map0 & bit) ? &key.values[std::popcount(map0 & (bit - 1))] : &dpcls_detail::kZeroWord;
          blk[i] = *v & words[i].mask;
          h = hash_add64(h, blk[i]);
        });
    repeat<U1>(
        n_u1, [&](unsigned j) __attribute__((always_inline)) {
          const unsigned i = n_u0 + j;
          const uint64_t bit = words[i].bit;
          const uint64_t* v =
              (map1 & bit) ? &vals1[std::popcount(map1 & (bit - 1))] : &dpcls_detail::kZeroWord;
          blk[i] = *v & words[i].mask;
          h = hash_add64(h, blk[i]);
        });
    h = hash_finish(h, n * 8);
    scratch.hashes[k] = h;
    __builtin_prefetch(&buckets[h & bucket_mask]);
  }

  // Stage 2: first entry with the key's hash in its bucket chain; prefetch
  // that rule. A key left out of probe_map has no entry with its hash: a miss.
  DpclsRule* cand[kDpclsMaxBurst];
  uint32_t cand_bucket[kDpclsMaxBurst];
  uint8_t cand_entry[kDpclsMaxBurst];
  uint32_t probe_map = 0;
  for (uint32_t m = keys_map; m; m &= m - 1) {
    const unsigned k = static_cast<unsigned>(std::countr_zero(m));
    const uint32_t h = scratch.hashes[k];
    uint32_t b = h & bucket_mask;
    for (;;) {
      const DpclsBucket& bkt = buckets[b];
      unsigned match = 0;
      repeat<DpclsBucket::kEntries>(
          DpclsBucket::kEntries, [&](unsigned e) __attribute__((always_inline)) {
            match |= static_cast<unsigned>((bkt.hashes[e] == h) & (bkt.rules[e] != nullptr)) << e;
          });
      if (match) {
        const unsigned e = static_cast<unsigned>(std::countr_zero(match));
        cand[k] = bkt.rules[e];
        cand_bucket[k] = b;
        cand_entry[k] = static_cast<uint8_t>(e);
        probe_map |= 1u << k;
        __builtin_prefetch(cand[k]);
        break;
      }
      if (bkt.overflow == 0) break;
      b = (b + 1) & bucket_mask;
    }
  }

  // Stage 3: verify the candidates.
  uint32_t found = 0;
  for (uint32_t m = probe_map; m; m &= m - 1) {
    const unsigned k = static_cast<unsigned>(std::countr_zero(m));
    const uint64_t* const blk = scratch.blocks + k * n;
    const uint64_t* const rv = cand[k]->values();
    uint64_t diff = 0;
    repeat<N>(
        n, [&](unsigned i) __attribute__((always_inline)) { diff |= blk[i] ^ rv[i]; });
    DpclsRule* rule = cand[k];
    if (diff != 0) [[unlikely]] {
      rule = dpcls_detail::probe_after(st, scratch.hashes[k], blk, cand_bucket[k], cand_entry[k]);
      if (!rule) continue;
    }
    out[k] = rule;
    found |= 1u << k;
  }
  return found;
}

}  // namespace keel::datapath

// DpclsSubtable — the rules of one megaflow mask, in a hash table keyed by
// the masked key's hash; the unit the dpcls (dpcls.h) searches one at a time.
//
// Every megaflow with mask M lives in M's subtable as a DpclsRule holding
// its masked key (only the words of M's map, already ANDed with M) and that
// key's hash, masked_hash(key, M) (flow/flow_hash.h). A packet matches rule R
// of the subtable iff (packet & M) == R's words, so a lookup computes
// masked_hash(packet, M) — the same function, which gives the same value for
// the packet and for the stored key — probes the table with it and compares
// the masked words. How the words are extracted and hashed depends only on
// the mask's *shape* (n_u0, n_u1: how many words it has in each half of the
// flow key), so the lookup function is specialized per shape and chosen when
// the subtable is created (dpcls_lookup.h).
//
// Layout (what a lookup touches, in order):
//   DpclsSubtable: first line = lookup function, bucket array, bucket mask,
//       shape; then `words[i]` = {bit of mask word i in its half of the map,
//       mask word i}, 16 B per word, so masks of up to 4 words fit one line.
//   DpclsBucket (64 B, one cache line): 5 entries of {32-bit hash, rule*}
//       and an overflow count. Open addressing with linear probing over
//       buckets; `overflow` counts the rules whose probe sequence passed
//       through this bucket (home here or before, stored after), so a search
//       stops at the first bucket whose count is 0 and removal needs no
//       tombstones (the scheme of folly's F14). The table is a power of two
//       of buckets, at most 3/4 full, doubled by insert().
//   DpclsRule (64-B aligned): flow*, subtable*, hash, then the masked words;
//       with up to 5 words the whole rule is one cache line, so verifying a
//       hit and reading `flow` cost one miss.
//
// Costs: a probe that misses reads the subtable's first two lines and one
// bucket line per key; a hit adds the rule's line. insert() is amortised
// O(1) (rehash of every rule when the table doubles, an allocation when it
// grows and one per rule); remove() is O(probe length) and frees the rule at
// once. No lookup allocates.
//
// Thread-safety: none of its own. A subtable belongs to one Dpcls and is
// read and written only by that Dpcls's owner thread (see dpcls.h); `hits`
// is a relaxed atomic so that a statistics reader never sees a torn value.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "flow/miniflow.h"

namespace keel::datapath {

// Most keys one lookup() takes: a burst.
inline constexpr unsigned kDpclsMaxBurst = 32;

struct DpclsSubtable;
struct DpclsScratch;
struct DpclsRule;

// A subtable's lookup over a burst: for each key whose bit is set in
// `keys_map` (bit i = keys[i]), finds the rule of `st` it matches, writes it
// to out[i] and sets bit i of the result; leaves out[i] alone when no rule
// matches. Writes scratch.hashes[i] = masked_hash(*keys[i], st.mask) for
// every key of keys_map. Called once per subtable per burst, through a
// pointer (an indirect call per burst, never per packet).
using DpclsLookupFn = uint32_t (*)(const DpclsSubtable& st, uint32_t keys_map,
                                   const flow::Miniflow* const* keys, DpclsRule** out,
                                   DpclsScratch& scratch) noexcept;

// One megaflow's entry: allocated by DpclsSubtable::insert with room for the
// subtable's n_words masked words right after it (64-B aligned, so a rule of
// up to 5 words is one cache line), freed by remove().
struct DpclsRule {
  void* flow;               // the owning megaflow; opaque to the classifier
  DpclsSubtable* subtable;  // the subtable (mask) it belongs to
  uint32_t hash;            // masked_hash(masked key, subtable->mask)
  uint32_t pad_;

  // The masked key's words, in the mask's map order.
  const uint64_t* values() const { return reinterpret_cast<const uint64_t*>(this + 1); }
  uint64_t* values() { return reinterpret_cast<uint64_t*>(this + 1); }
  // The masked key as a Miniflow in the mask's map (control path: dumps).
  void masked_key(flow::Miniflow& out) const;
};
static_assert(sizeof(DpclsRule) == 24 && alignof(DpclsRule) == 8,
              "a rule's header + 5 words = one 64-B line; values() follow the header");

struct alignas(64) DpclsBucket {
  static constexpr unsigned kEntries = 5;
  DpclsRule* rules[kEntries];  // nullptr: free entry
  uint32_t hashes[kEntries];   // rules[i]->hash, kept here to probe without touching rules
  uint32_t overflow;           // rules whose probe passed this bucket (see top)
};
static_assert(sizeof(DpclsBucket) == 64,
              "a bucket is one cache line: 5 x (8 B rule* + 4 B hash) + 4 B count");

// Per-burst working space of one lookup: each key's hash and masked words.
// One per Dpcls (10.4 KB); the lookup functions write it, nothing keeps it.
struct alignas(64) DpclsScratch {
  uint32_t hashes[kDpclsMaxBurst];
  // Key k's masked words at blocks[k * n_words ...], n_words = the subtable's.
  uint64_t blocks[kDpclsMaxBurst * flow::kMiniflowMaxWords];
};

struct alignas(64) DpclsSubtable {
  // --- read by every lookup: one cache line ---
  DpclsLookupFn lookup;  // picked by shape at create(), see dpcls_lookup.h
  DpclsBucket* buckets;  // bucket_mask + 1 buckets
  uint32_t bucket_mask;
  uint8_t n_u0, n_u1;          // the mask's shape
  uint8_t n_words;             // n_u0 + n_u1
  bool specialized;            // `lookup` is a specialization (else the generic function)
  std::atomic<uint64_t> hits;  // keys matched here; owner writes (load+store), anyone reads

  // --- per mask word, in map order (u0 words, then u1 words) ---
  struct Word {
    uint64_t bit;   // the word's bit in its half of the map (u0, or u1 for i >= n_u0)
    uint64_t mask;  // the mask word
  };
  alignas(64) Word words[flow::kMiniflowMaxWords];

  // --- control path ---
  flow::Miniflow mask;  // canonical: exactly the words with a mask bit set
  uint32_t n_rules;
  uint64_t hits_at_resort;  // `hits` when Dpcls::resort() last ranked this subtable

  // Makes an empty subtable for `mask` (whose map must list only words with a
  // mask bit set; Dpcls canonicalizes), with the lookup function its shape
  // selects, or the generic one if `force_generic`. nullptr if out of memory.
  static DpclsSubtable* create(const flow::Miniflow& mask, bool force_generic) noexcept;
  // Frees the subtable and every rule still in it.
  static void destroy(DpclsSubtable* st) noexcept;

  // Adds the rule (key & mask) -> flow. `key` may be in any map (absent words
  // read as zero) and need not be masked. nullptr if a rule with the same
  // masked key is already here (megaflows do not overlap), or out of memory;
  // the subtable is unchanged then.
  DpclsRule* insert(const flow::Miniflow& key, void* flow) noexcept;
  // Takes `rule` (one of this subtable's) out and frees it.
  void remove(DpclsRule* rule) noexcept;
  // The rule whose masked key equals (key & mask), or nullptr (control path).
  DpclsRule* find(const flow::Miniflow& key) const noexcept;

  // Points `lookup` at the function the shape selects, or the generic one.
  void select_lookup(bool force_generic) noexcept;

  DpclsSubtable() = default;
  DpclsSubtable(const DpclsSubtable&) = delete;
  DpclsSubtable& operator=(const DpclsSubtable&) = delete;

 private:
  bool grow() noexcept;  // doubles the bucket array; false if out of memory
  void place(DpclsRule* rule) noexcept;
};

}  // namespace keel::datapath

// Emc — the exact-match cache: per PMD, 8192 entries, full packet key.
//
// An entry holds a packet miniflow (as the parser built it), its hash and
// the megaflow it hit. Lookup probes two entries (from two slices of the
// hash, as Open vSwitch's EMC does), compares hash, then map and words, and
// checks the megaflow is still alive; a hit skips dpcls entirely. Insertion
// after a dpcls/SMC hit happens with probability 1/emc-insert-inv-prob
// (default 100; 0 disables the EMC) so a flood of short flows doesn't thrash
// it; it takes the free or dead entry of the two, else the one with the
// smaller hash (a cheap, unbiased victim).
//
// Cost: one or two cache-line reads of the entry plus the key compare
// (~n_words 8-byte compares); about 400 KB per PMD.
//
// Thread-safety: owned by one PMD, which is its only reader and writer
// (lookup, insert, sweep, clear, set_insert_inv_prob: the PMD reloads the
// probability from its own relaxed atomic at housekeeping; the control
// thread may call them only while the PMD is not running). No Rcu: a
// megaflow an entry points to is freed by the control thread only after the
// owning PMD removed it (marking it `dead`, so a lookup that still finds it
// misses and the entry is replaced) and then swept every entry twice
// (generation() >= the flow's death generation + 2: no entry can point to
// it any more), and handed it over through its flow table's reclaim ring
// (flow_table.h). The entries allocate nothing after construction.
#pragma once

#include <cstdint>
#include <memory>

#include "flow/miniflow.h"

namespace keel::datapath {

struct Megaflow;

class Emc {
 public:
  static constexpr unsigned kEntries = 8192;
  static constexpr unsigned kMask = kEntries - 1;
  static constexpr unsigned kSecondShift = 13;  // log2(kEntries): second probe uses the next bits
  static_assert((kEntries & kMask) == 0, "power of two");

  Emc() : entries_(std::make_unique<Entry[]>(kEntries)) {}

  Megaflow* lookup(const flow::Miniflow& key, uint32_t hash) const noexcept;
  // Starts loading the two entries lookup(.., hash) will probe (their first
  // line: hash, flow and the key's maps), so a burst's misses overlap.
  void prefetch(uint32_t hash) const noexcept {
    __builtin_prefetch(&entries_[hash & kMask]);
    __builtin_prefetch(&entries_[(hash >> kSecondShift) & kMask]);
  }
  // Caches key -> flow (subject to the insertion probability, decided by
  // the caller with should_insert()).
  void insert(const flow::Miniflow& key, uint32_t hash, Megaflow* flow) noexcept;
  // Forgets every entry that points to `flow` (slow: a full scan; used when
  // a flow is deleted so a stale pointer is never followed).
  void forget(const Megaflow* flow) noexcept;
  void clear() noexcept;

  // Insertion probability 1/inv_prob; 0 disables the EMC.
  void set_insert_inv_prob(uint32_t inv_prob) noexcept { inv_prob_ = inv_prob; }
  uint32_t insert_inv_prob() const noexcept { return inv_prob_; }
  bool enabled() const noexcept { return inv_prob_ != 0; }
  // A cheap per-PMD pseudo-random draw (xorshift): true with 1/inv_prob.
  bool should_insert() noexcept {
    if (inv_prob_ <= 1) return inv_prob_ == 1;
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 17;
    rng_ ^= rng_ << 5;
    return rng_ % inv_prob_ == 0;
  }

  unsigned occupied() const noexcept;

  // Incremental sweep: clears the entries of dead flows among the next `n`
  // entries. generation() counts completed passes over the whole cache: a
  // flow that died at generation G is referenced by no entry once
  // generation() >= G + 2 (the pass running at G may have passed its entry).
  void sweep(unsigned n) noexcept;
  uint64_t generation() const noexcept { return generation_; }

 private:
  struct Entry {
    Megaflow* flow = nullptr;
    uint32_t hash = 0;
    flow::Miniflow key;
  };
  const Entry* probe(const flow::Miniflow& key, uint32_t hash) const noexcept;

  std::unique_ptr<Entry[]> entries_;
  uint32_t inv_prob_ = 100;
  uint32_t rng_ = 0x9e3779b9u;
  unsigned sweep_pos_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace keel::datapath

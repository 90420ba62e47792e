// Dpcls — the megaflow classifier of one (PMD, input port): the third stage
// of the fast path, after the EMC and the SMC (ARCHITECTURE.md, idea 1).
//
// A megaflow is a mask and a masked key. The classifier keeps one subtable
// per distinct mask (dpcls_subtable.h), each a hash table of the rules with
// that mask, and a lookup function specialized for the mask's shape picked
// when the subtable is created (dpcls_lookup.h). Megaflows do not overlap
// (translation makes each one's wildcards exactly what it consulted, and a
// packet matches at most one), so there are no priorities: the first match
// wins, and subtables are searched in rank order — most hits since the last
// resort() first, which the PMD calls every N iterations — so the average
// number of subtables probed per hit stays low.
//
// lookup() is burst-oriented: for each subtable in rank order it runs the
// subtable's function over every key still unmatched (extract + hash all,
// probe all, verify all), then moves on, and stops once every key matched.
// One indirect call per subtable per burst; no lock, allocation, exception
// or syscall. Cost: see dpcls_lookup.h and tests/bench/RESULTS.md ("dpcls").
//
// Life cycle: insert() may fail (nullptr: out of memory, or a rule with the
// same mask and masked key exists — find() tells which) and then changes
// nothing. remove() cannot fail; it frees the rule at once, and the subtable
// with it when that was its last rule. A DpclsRule* is valid from insert()
// to remove(); the classifier never frees a rule on its own, except all of
// them in its destructor. `flow` is the caller's: never dereferenced here.
//
// Memory: insert() allocates on the owner's thread, between bursts (a rule,
// and for a new mask a subtable; a subtable's table doubles when 3/4 full;
// the subtable array starts at 64 entries with the first subtable and
// doubles when full), all with nothrow allocations: a failure
// is a nullptr, never an exception. lookup(), remove(), resort() and info()
// allocate nothing.
//
// Thread-safety: one Dpcls belongs to one PMD thread, which is its only
// writer and its only reader: insert(), remove(), resort(), lookup(),
// find(), info() and force_generic_lookup() run on that thread (other
// threads post requests to the PMD's ring; it applies them between bursts),
// so nothing here takes a lock or needs epochs — a rule or subtable freed by
// remove() can not be held by anyone else. Other threads (control, for
// statistics) may call counters() at any time: it reads relaxed atomics that
// only the owner writes (plain load + store, no read-modify-write), so they
// see a recent value, never a torn one, and order nothing else.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "datapath/dpcls_subtable.h"
#include "flow/miniflow.h"

namespace keel::datapath {

// Totals since creation; readable from any thread (relaxed).
struct DpclsCounters {
  uint64_t n_subtables = 0;
  uint64_t n_rules = 0;
  uint64_t lookups = 0;           // keys looked up
  uint64_t hits = 0;              // keys matched
  uint64_t subtables_probed = 0;  // sum over matched keys of the rank of the subtable that matched
};

// One subtable, for `dpcls-show`: plain data, filled by the owner thread
// into an array its reader allocated (see info()); the reader formats it.
struct SubtableInfo {
  uint32_t in_port = 0;     // the classifier's port (set by whoever collects several: the PMD)
  flow::Miniflow mask;      // canonical mask: its map and mask words
  unsigned u0 = 0, u1 = 0;  // shape
  uint32_t n_rules = 0;
  uint64_t hits = 0;         // keys matched here since creation
  bool specialized = false;  // a lookup specialized for (u0, u1), else the generic one
  // "specialized(U0,U1)" or "generic" (allocates: not for the owner thread).
  std::string lookup_name() const;
};

class alignas(64) Dpcls {
 public:
  Dpcls() = default;
  ~Dpcls();
  Dpcls(const Dpcls&) = delete;
  Dpcls& operator=(const Dpcls&) = delete;

  // Adds the megaflow (mask, key & mask) -> flow. `mask` is canonicalized
  // (map words whose mask is 0 are dropped), `key` may be in any map and
  // need not be masked. Creates the mask's subtable, ranked last, if it is
  // new. nullptr if out of memory or if a rule with the same mask and masked
  // key exists (find() returns it); nothing changes then.
  [[nodiscard]] DpclsRule* insert(const flow::Miniflow& mask, const flow::Miniflow& key, void* flow) noexcept;

  // Removes and frees `rule` (from this classifier's insert()); removes and
  // frees its subtable if it was the last rule.
  void remove(DpclsRule* rule) noexcept;

  // The rule with exactly this mask (canonicalized) and masked key, or
  // nullptr. Control path: a linear search of the subtables' masks.
  DpclsRule* find(const flow::Miniflow& mask, const flow::Miniflow& key) const noexcept;

  // Classifies a burst: keys.size() <= kDpclsMaxBurst. out[i] = the rule
  // keys[i] matches, or nullptr; bit i of the result is set iff keys[i]
  // matched. If subtables_probed is not null it receives the sum, over the
  // matched keys, of the rank (1 = first) of the subtable that matched —
  // divided by the hits it is "subtable lookups per hit", as Open vSwitch's
  // pmd-perf-show. Also counts hits per subtable and the totals.
  uint32_t lookup(std::span<const flow::Miniflow* const> keys, DpclsRule** out,
                  uint32_t* subtables_probed) noexcept;

  // Ranks the subtables by hits since the previous resort(), most first
  // (ties keep their order). An insertion sort of the subtable pointers: no
  // allocation; O(n) when the ranking has not changed.
  void resort() noexcept;

  // The subtables in rank order into `out` (owner thread, or while it is
  // stopped): fills min(out.size(), n_subtables()) entries and returns
  // n_subtables(). No allocation.
  size_t info(std::span<SubtableInfo> out) const noexcept;

  // Any thread.
  DpclsCounters counters() const noexcept;

  size_t n_subtables() const noexcept { return n_subtables_; }
  size_t n_rules() const noexcept { return counters_.n_rules.load(std::memory_order_relaxed); }

  // Test/bench hook: every subtable (now and later) uses the generic lookup
  // function instead of its shape's specialization; false restores them.
  void force_generic_lookup(bool on) noexcept;

 private:
  DpclsSubtable* find_subtable(const flow::Miniflow& canonical_mask) const noexcept;
  std::span<DpclsSubtable* const> subtables() const noexcept { return {subtables_.get(), n_subtables_}; }
  // Room for one more subtable pointer; false when out of memory.
  bool reserve_one() noexcept;

  // Owner-written counters on their own line, so a statistics reader does
  // not pull the line with the subtable list away from the PMD.
  struct alignas(64) Counters {
    std::atomic<uint64_t> n_subtables{0}, n_rules{0};
    std::atomic<uint64_t> lookups{0}, hits{0}, subtables_probed{0};
  };

  // Rank order; a plain array grown with a nothrow allocation (no
  // exception path on the PMD).
  static constexpr size_t kInitialSubtables = 64;
  std::unique_ptr<DpclsSubtable*[]> subtables_;
  size_t n_subtables_ = 0, cap_subtables_ = 0;
  bool force_generic_ = false;
  Counters counters_;
  DpclsScratch scratch_;
};

}  // namespace keel::datapath

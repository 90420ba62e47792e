// Dpcls: subtables in rank order, burst lookup, resort. See dpcls.h.
#include "datapath/dpcls.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <new>

#include "datapath/dpcls_lookup.h"

namespace keel::datapath {

namespace {

// Single-writer counter bump: the owner is the only writer, so a relaxed
// load + store is exact and avoids a locked read-modify-write.
inline void bump(std::atomic<uint64_t>& c, uint64_t n) noexcept {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// The mask without its all-zero words: two masks that wildcard the same bits
// share one subtable, and the shape counts only words that matter.
void canonicalize(const flow::Miniflow& mask, flow::Miniflow& out) noexcept {
  out.map = {};
  unsigned i = 0, o = 0;
  mask.map.for_each([&](unsigned w) {
    const uint64_t m = mask.values[i++];
    if (m == 0) return;
    out.map.set(w);
    out.values[o++] = m;
  });
}

}  // namespace

Dpcls::~Dpcls() {
  for (DpclsSubtable* st : subtables()) DpclsSubtable::destroy(st);
}

bool Dpcls::reserve_one() noexcept {
  if (n_subtables_ < cap_subtables_) return true;
  const size_t cap = cap_subtables_ ? cap_subtables_ * 2 : kInitialSubtables;
  DpclsSubtable** a = new (std::nothrow) DpclsSubtable*[cap];
  if (!a) return false;
  std::copy_n(subtables_.get(), n_subtables_, a);
  subtables_.reset(a);
  cap_subtables_ = cap;
  return true;
}

DpclsSubtable* Dpcls::find_subtable(const flow::Miniflow& canonical_mask) const noexcept {
  for (DpclsSubtable* st : subtables())
    if (st->mask == canonical_mask) return st;
  return nullptr;
}

DpclsRule* Dpcls::find(const flow::Miniflow& mask, const flow::Miniflow& key) const noexcept {
  flow::Miniflow cm;
  canonicalize(mask, cm);
  const DpclsSubtable* st = find_subtable(cm);
  return st ? st->find(key) : nullptr;
}

DpclsRule* Dpcls::insert(const flow::Miniflow& mask, const flow::Miniflow& key, void* flow) noexcept {
  flow::Miniflow cm;
  canonicalize(mask, cm);
  DpclsSubtable* st = find_subtable(cm);
  const bool created = st == nullptr;
  if (created) {
    if (!reserve_one()) return nullptr;
    st = DpclsSubtable::create(cm, force_generic_);
    if (!st) return nullptr;
    subtables_[n_subtables_++] = st;
  }
  DpclsRule* rule = st->insert(key, flow);
  if (!rule) {
    if (created) {  // leave nothing behind
      --n_subtables_;
      DpclsSubtable::destroy(st);
    }
    return nullptr;
  }
  bump(counters_.n_rules, 1);
  counters_.n_subtables.store(n_subtables_, std::memory_order_relaxed);
  return rule;
}

void Dpcls::remove(DpclsRule* rule) noexcept {
  DpclsSubtable* st = rule->subtable;
  st->remove(rule);
  counters_.n_rules.store(counters_.n_rules.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  if (st->n_rules > 0) return;
  for (size_t i = 0; i < n_subtables_; ++i) {
    if (subtables_[i] != st) continue;
    // Keeps the rank order; no allocation.
    std::copy(&subtables_[i + 1], &subtables_[n_subtables_], &subtables_[i]);
    --n_subtables_;
    DpclsSubtable::destroy(st);
    counters_.n_subtables.store(n_subtables_, std::memory_order_relaxed);
    return;
  }
  assert(false && "rule of another classifier");
}

uint32_t Dpcls::lookup(std::span<const flow::Miniflow* const> keys, DpclsRule** out,
                       uint32_t* subtables_probed) noexcept {
  const size_t n = keys.size();
  assert(n <= kDpclsMaxBurst);
  for (size_t i = 0; i < n; ++i) out[i] = nullptr;
  const uint32_t all = n >= 32 ? ~0u : (uint32_t{1} << n) - 1;
  uint32_t left = all;
  uint32_t probed = 0;
  uint32_t rank = 0;
  if (left) {
    for (DpclsSubtable* st : subtables()) {
      ++rank;
      const uint32_t found = st->lookup(*st, left, keys.data(), out, scratch_);
      if (found) {
        const unsigned c = static_cast<unsigned>(std::popcount(found));
        bump(st->hits, c);
        probed += rank * c;
        left &= ~found;
        if (!left) break;
      }
    }
  }
  const uint32_t hit_map = all & ~left;
  bump(counters_.lookups, n);
  bump(counters_.hits, static_cast<unsigned>(std::popcount(hit_map)));
  bump(counters_.subtables_probed, probed);
  if (subtables_probed) *subtables_probed = probed;
  return hit_map;
}

void Dpcls::resort() noexcept {
  // Hits since the last resort, per subtable; then a stable insertion sort
  // on them, most first. Subtables number tens, rarely hundreds.
  auto recent = [](const DpclsSubtable* st) {
    return st->hits.load(std::memory_order_relaxed) - st->hits_at_resort;
  };
  for (size_t i = 1; i < n_subtables_; ++i) {
    DpclsSubtable* st = subtables_[i];
    const uint64_t r = recent(st);
    size_t j = i;
    for (; j > 0 && recent(subtables_[j - 1]) < r; --j) subtables_[j] = subtables_[j - 1];
    subtables_[j] = st;
  }
  for (DpclsSubtable* st : subtables()) st->hits_at_resort = st->hits.load(std::memory_order_relaxed);
}

size_t Dpcls::info(std::span<SubtableInfo> out) const noexcept {
  const size_t n = std::min(out.size(), n_subtables_);
  for (size_t k = 0; k < n; ++k) {
    const DpclsSubtable* st = subtables_[k];
    SubtableInfo& i = out[k];
    i.mask = st->mask;
    i.u0 = st->n_u0;
    i.u1 = st->n_u1;
    i.n_rules = st->n_rules;
    i.hits = st->hits.load(std::memory_order_relaxed);
    i.specialized = st->specialized;
  }
  return n_subtables_;
}

std::string SubtableInfo::lookup_name() const {
  return specialized ? dpcls_lookup_select(u0, u1).name() : dpcls_lookup_generic().name();
}

DpclsCounters Dpcls::counters() const noexcept {
  DpclsCounters c;
  c.n_subtables = counters_.n_subtables.load(std::memory_order_relaxed);
  c.n_rules = counters_.n_rules.load(std::memory_order_relaxed);
  c.lookups = counters_.lookups.load(std::memory_order_relaxed);
  c.hits = counters_.hits.load(std::memory_order_relaxed);
  c.subtables_probed = counters_.subtables_probed.load(std::memory_order_relaxed);
  return c;
}

void Dpcls::force_generic_lookup(bool on) noexcept {
  force_generic_ = on;
  for (DpclsSubtable* st : subtables()) st->select_lookup(on);
}

}  // namespace keel::datapath

// DpclsSubtable: creation, the bucket table (insert / remove / grow / find).
// Control-path code run by the Dpcls owner between bursts; see the header.
#include "datapath/dpcls_subtable.h"

#include <cassert>
#include <cstring>
#include <new>

#include "datapath/dpcls_lookup.h"
#include "flow/flow_hash.h"

namespace keel::datapath {

namespace {

constexpr std::align_val_t kLine{64};

DpclsBucket* alloc_buckets(uint32_t n) noexcept {
  void* p = ::operator new(sizeof(DpclsBucket) * n, kLine, std::nothrow);
  if (!p) return nullptr;
  std::memset(p, 0, sizeof(DpclsBucket) * n);  // all entries free, overflow 0
  return static_cast<DpclsBucket*>(p);
}
void free_buckets(DpclsBucket* b) noexcept { ::operator delete(b, kLine); }

void free_rule(DpclsRule* r) noexcept {
  r->~DpclsRule();
  ::operator delete(r, kLine);
}

// Rules a table of n_buckets holds before it doubles: 3/4 of its entries.
constexpr uint64_t capacity(uint64_t n_buckets) { return n_buckets * DpclsBucket::kEntries * 3 / 4; }
static_assert(capacity(1) >= 1, "a one-bucket table holds a rule before growing");

}  // namespace

void DpclsRule::masked_key(flow::Miniflow& out) const {
  out.map = subtable->mask.map;
  std::memcpy(out.values, values(), subtable->n_words * sizeof(uint64_t));
}

DpclsSubtable* DpclsSubtable::create(const flow::Miniflow& mask, bool force_generic) noexcept {
  auto* st = new (std::nothrow) DpclsSubtable;
  if (!st) return nullptr;
  st->buckets = alloc_buckets(1);
  if (!st->buckets) {
    delete st;
    return nullptr;
  }
  st->bucket_mask = 0;
  st->n_u0 = static_cast<uint8_t>(mask.map.count_u0());
  st->n_u1 = static_cast<uint8_t>(mask.map.count_u1());
  st->n_words = static_cast<uint8_t>(st->n_u0 + st->n_u1);
  st->hits.store(0, std::memory_order_relaxed);
  st->mask.map = mask.map;
  std::memcpy(st->mask.values, mask.values, st->n_words * sizeof(uint64_t));
  unsigned i = 0;
  for (uint64_t m = mask.map.u0; m; m &= m - 1, ++i) st->words[i] = {m & -m, mask.values[i]};
  for (uint64_t m = mask.map.u1; m; m &= m - 1, ++i) st->words[i] = {m & -m, mask.values[i]};
  st->n_rules = 0;
  st->hits_at_resort = 0;
  st->select_lookup(force_generic);
  return st;
}

void DpclsSubtable::destroy(DpclsSubtable* st) noexcept {
  if (!st) return;
  for (uint32_t b = 0; b <= st->bucket_mask; ++b)
    for (DpclsRule* r : st->buckets[b].rules)
      if (r) free_rule(r);
  free_buckets(st->buckets);
  delete st;
}

void DpclsSubtable::select_lookup(bool force_generic) noexcept {
  const DpclsLookupImpl& impl = force_generic ? dpcls_lookup_generic() : dpcls_lookup_select(n_u0, n_u1);
  lookup = impl.fn;
  specialized = impl.specialized;
}

// Stores `rule` in the first free entry of its probe sequence, counting the
// full buckets it passes. The table has a free entry (load <= 3/4).
void DpclsSubtable::place(DpclsRule* rule) noexcept {
  uint32_t b = rule->hash & bucket_mask;
  for (;;) {
    DpclsBucket& bkt = buckets[b];
    for (unsigned e = 0; e < DpclsBucket::kEntries; ++e) {
      if (!bkt.rules[e]) {
        bkt.rules[e] = rule;
        bkt.hashes[e] = rule->hash;
        return;
      }
    }
    ++bkt.overflow;
    b = (b + 1) & bucket_mask;
  }
}

bool DpclsSubtable::grow() noexcept {
  const uint32_t old_n = bucket_mask + 1;
  if (old_n > (uint32_t{1} << 30)) return false;
  DpclsBucket* nb = alloc_buckets(old_n * 2);
  if (!nb) return false;
  DpclsBucket* old = buckets;
  buckets = nb;
  bucket_mask = old_n * 2 - 1;
  for (uint32_t b = 0; b < old_n; ++b)
    for (DpclsRule* r : old[b].rules)
      if (r) place(r);
  free_buckets(old);
  return true;
}

DpclsRule* DpclsSubtable::find(const flow::Miniflow& key) const noexcept {
  uint64_t blk[flow::kMiniflowMaxWords];
  unsigned i = 0;
  mask.map.for_each([&](unsigned w) {
    blk[i] = key.get(w) & mask.values[i];
    ++i;
  });
  const uint32_t hash = flow::masked_hash(key, mask);
  uint32_t b = hash & bucket_mask;
  for (;;) {
    const DpclsBucket& bkt = buckets[b];
    for (unsigned e = 0; e < DpclsBucket::kEntries; ++e) {
      DpclsRule* r = bkt.rules[e];
      if (r && bkt.hashes[e] == hash && std::memcmp(r->values(), blk, n_words * sizeof(uint64_t)) == 0)
        return r;
    }
    if (bkt.overflow == 0) return nullptr;
    b = (b + 1) & bucket_mask;
  }
}

DpclsRule* DpclsSubtable::insert(const flow::Miniflow& key, void* flow) noexcept {
  if (find(key)) return nullptr;
  if (n_rules + 1 > capacity(uint64_t{bucket_mask} + 1) && !grow()) return nullptr;
  void* mem = ::operator new(sizeof(DpclsRule) + n_words * sizeof(uint64_t), kLine, std::nothrow);
  if (!mem) return nullptr;
  auto* rule = new (mem) DpclsRule{flow, this, flow::masked_hash(key, mask), 0};
  unsigned i = 0;
  mask.map.for_each([&](unsigned w) {
    rule->values()[i] = key.get(w) & mask.values[i];
    ++i;
  });
  place(rule);
  ++n_rules;
  return rule;
}

void DpclsSubtable::remove(DpclsRule* rule) noexcept {
  assert(rule && rule->subtable == this);
  const uint32_t home = rule->hash & bucket_mask;
  // Find the rule on its probe sequence, then undo the overflow counts that
  // place() added to the buckets it passed before that one.
  for (uint32_t b = home, steps = 0; steps <= bucket_mask; b = (b + 1) & bucket_mask, ++steps) {
    DpclsBucket& bkt = buckets[b];
    for (unsigned e = 0; e < DpclsBucket::kEntries; ++e) {
      if (bkt.rules[e] != rule) continue;
      bkt.rules[e] = nullptr;
      bkt.hashes[e] = 0;
      for (uint32_t p = home; p != b; p = (p + 1) & bucket_mask) --buckets[p].overflow;
      --n_rules;
      free_rule(rule);
      return;
    }
  }
  assert(false && "rule not in its subtable");
}

}  // namespace keel::datapath

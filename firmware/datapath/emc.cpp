// Emc: two-probe lookup, insertion, the incremental sweep. See emc.h.
//
// Thread-safety: the owning PMD only, as emc.h says; nothing here is atomic
// but the megaflow's `dead` flag it reads (relaxed: the same thread set it).
// No allocation: the entries are allocated with the Emc.
#include "datapath/emc.h"

#include <cstring>

#include "datapath/megaflow.h"

namespace keel::datapath {

namespace {
inline bool same_key(const flow::Miniflow& a, const flow::Miniflow& b) noexcept {
  if (!(a.map == b.map)) return false;
  return std::memcmp(a.values, b.values, a.n_words() * 8) == 0;
}
}  // namespace

const Emc::Entry* Emc::probe(const flow::Miniflow& key, uint32_t hash) const noexcept {
  for (uint32_t h = hash, i = 0; i < 2; ++i, h >>= kSecondShift) {
    const Entry& e = entries_[h & kMask];
    if (e.hash == hash && e.flow && same_key(e.key, key)) return &e;
  }
  return nullptr;
}

Megaflow* Emc::lookup(const flow::Miniflow& key, uint32_t hash) const noexcept {
  const Entry* e = probe(key, hash);
  return e && e->flow->alive() ? e->flow : nullptr;
}

void Emc::insert(const flow::Miniflow& key, uint32_t hash, Megaflow* flow) noexcept {
  Entry* victim = nullptr;
  for (uint32_t h = hash, i = 0; i < 2; ++i, h >>= kSecondShift) {
    Entry& e = entries_[h & kMask];
    if (e.flow && e.hash == hash && same_key(e.key, key)) {
      e.flow = flow;  // same packet key: refresh the flow it points to
      return;
    }
    if (!e.flow || !e.flow->alive()) {
      victim = &e;
      break;
    }
    if (!victim || e.hash < victim->hash) victim = &e;
  }
  victim->flow = flow;
  victim->hash = hash;
  victim->key.map = key.map;
  std::memcpy(victim->key.values, key.values, key.n_words() * 8);
}

void Emc::forget(const Megaflow* flow) noexcept {
  for (unsigned i = 0; i < kEntries; ++i)
    if (entries_[i].flow == flow) entries_[i].flow = nullptr;
}

void Emc::clear() noexcept {
  for (unsigned i = 0; i < kEntries; ++i) entries_[i].flow = nullptr;
}

void Emc::sweep(unsigned n) noexcept {
  for (unsigned i = 0; i < n; ++i) {
    Entry& e = entries_[sweep_pos_];
    if (e.flow && !e.flow->alive()) e.flow = nullptr;
    if (++sweep_pos_ == kEntries) {
      sweep_pos_ = 0;
      ++generation_;
    }
  }
}

unsigned Emc::occupied() const noexcept {
  unsigned n = 0;
  for (unsigned i = 0; i < kEntries; ++i) n += entries_[i].flow != nullptr;
  return n;
}

}  // namespace keel::datapath

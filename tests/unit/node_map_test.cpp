// NodeMap (core/node_map.h), the ukey table's index: against
// std::unordered_map under random inserts, look-ups and erases (with hashes
// that collide and runs that wrap around the end of the slot table, where
// erasing has to move later slots back); entries that never move; erase_if
// deciding once for each entry.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "core/node_map.h"

using keel::NodeMap;

namespace {

// Few distinct hashes, all in the last slots of a small table: long runs
// that wrap from the end of the table to its start.
struct CollidingHash {
  size_t operator()(uint64_t k) const { return ~size_t{0} - (k % 5); }
};
struct GoodHash {
  size_t operator()(uint64_t k) const { return k * 0x9e3779b97f4a7c15ull ^ (k >> 29); }
};

template <typename Hash>
void differential(unsigned keys, unsigned ops, uint32_t seed) {
  NodeMap<uint64_t, uint64_t, Hash> m;
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937 rng(seed);
  for (unsigned i = 0; i < ops; ++i) {
    const uint64_t k = rng() % keys;
    switch (rng() % 4) {
      case 0:
      case 1: {
        auto [n, inserted] = m.try_emplace(k);
        const bool ref_inserted = ref.try_emplace(k, i).second;
        REQUIRE(inserted == ref_inserted);
        REQUIRE(n->key == k);
        if (inserted) n->value = i;
        REQUIRE(n->value == ref[k]);
        break;
      }
      case 2: {
        auto* n = m.find(k);
        const auto it = ref.find(k);
        REQUIRE((n != nullptr) == (it != ref.end()));
        if (n) {
          REQUIRE(n->value == it->second);
          m.erase(n);  // by node
          ref.erase(it);
        }
        break;
      }
      case 3:
        REQUIRE(m.erase(k) == (ref.erase(k) == 1));  // by key
        break;
    }
    REQUIRE(m.size() == ref.size());
  }
  // Every key, present or not, answers as the reference does.
  for (uint64_t k = 0; k < keys; ++k) {
    const auto* n = m.find(k);
    const auto it = ref.find(k);
    REQUIRE((n != nullptr) == (it != ref.end()));
    if (n) CHECK(n->value == it->second);
  }
  size_t seen = 0;
  m.for_each([&](const auto& e) {
    ++seen;
    CHECK(ref.count(e.key) == 1);
  });
  CHECK(seen == ref.size());
}

}  // namespace

TEST_CASE("NodeMap answers as std::unordered_map under random inserts, finds and erases") {
  differential<GoodHash>(5000, 200000, 1);
  differential<GoodHash>(40, 20000, 2);  // a small table, full of erases
  // Every key on one of five hashes at the very end of the table: each
  // erase moves back entries of runs that wrapped to the table's start.
  differential<CollidingHash>(300, 30000, 3);
}

TEST_CASE("NodeMap: an entry stays where it is while others come and go (the revalidator's pointers)") {
  NodeMap<uint64_t, uint64_t, GoodHash> m;
  auto [first, inserted] = m.try_emplace(7);
  REQUIRE(inserted);
  first->value = 42;
  const size_t slots_before = m.slot_count();
  for (uint64_t k = 100; k < 100000; ++k) m.try_emplace(k).first->value = k;
  CHECK(m.slot_count() > slots_before);  // it grew (rehashed) meanwhile
  for (uint64_t k = 100; k < 100000; k += 2) REQUIRE(m.erase(k));
  CHECK(m.find(7) == first);
  CHECK(first->value == 42);
  CHECK(m.size() == 1 + (100000 - 100) / 2);
  // At most half full: reserve() makes room for that many without growing.
  NodeMap<uint64_t, uint64_t, GoodHash> r;
  r.reserve(1000);
  const size_t reserved = r.slot_count();
  CHECK(reserved >= 2000);
  for (uint64_t k = 0; k < 1000; ++k) r.try_emplace(k);
  CHECK(r.slot_count() == reserved);
  r.reserve(10);  // never shrinks
  CHECK(r.slot_count() == reserved);
}

TEST_CASE("NodeMap::erase_if decides once for each entry, then erases") {
  NodeMap<uint64_t, uint64_t, CollidingHash> m;
  for (uint64_t k = 0; k < 500; ++k) m.try_emplace(k).first->value = k;
  std::unordered_map<uint64_t, int> asked;
  const size_t gone = m.erase_if([&](const auto& e) {
    ++asked[e.key];
    return e.value % 3 == 0;
  });
  CHECK(asked.size() == 500);
  for (const auto& [k, n] : asked) CHECK(n == 1);
  CHECK(gone == 167);
  CHECK(m.size() == 500 - 167);
  for (uint64_t k = 0; k < 500; ++k) CHECK((m.find(k) != nullptr) == (k % 3 != 0));
  m.clear();
  CHECK(m.empty());
  CHECK(m.find(1) == nullptr);
}

// SlabPool, SlabAllocator (core/) and PackedMatch (flow/): what the slow
// path keeps per datapath flow, in slabs and in the bytes it needs.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/slab_allocator.h"
#include "core/slab_pool.h"
#include "flow/packed_match.h"

using namespace keel;

namespace {
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;  // objects are plain operator new (slab_pool.h)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif
}  // namespace

TEST_CASE("SlabPool: aligned, distinct, writable objects across slabs; freed ones reused newest first") {
  SlabPool pool(200, 64);
  CHECK(pool.object_size() == 256);  // the size rounded up to the alignment
  const size_t n = 3 * SlabPool::kSlabBytes / pool.object_size() + 7;  // into a fourth slab
  std::vector<void*> objs;
  std::set<uintptr_t> seen;
  for (size_t i = 0; i < n; ++i) {
    void* p = pool.alloc();
    REQUIRE(p);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    std::memset(p, static_cast<int>(i), 200);
    objs.push_back(p);
    seen.insert(reinterpret_cast<uintptr_t>(p));
  }
  CHECK(seen.size() == n);
  CHECK(pool.in_use() == n);
  for (size_t i = 0; i < n; ++i) CHECK(static_cast<unsigned char*>(objs[i])[199] == static_cast<unsigned char>(i));
  if (!kAsan) CHECK(pool.bytes() == 4 * SlabPool::kSlabBytes);
  pool.release(objs[10]);
  pool.release(objs[20]);
  CHECK(pool.in_use() == n - 2);
  void* a = pool.alloc();
  void* b = pool.alloc();
  if (!kAsan) {
    CHECK(a == objs[20]);
    CHECK(b == objs[10]);
    CHECK(pool.bytes() == 4 * SlabPool::kSlabBytes);  // reused, nothing new taken
  }
  objs[10] = a;
  objs[20] = b;
  for (void* p : objs) pool.release(p);
  CHECK(pool.in_use() == 0);
  pool.release(nullptr);
  CHECK(pool.in_use() == 0);
}

TEST_CASE("SlabAllocator: single objects from the type's pool, arrays not; a hash table on it works") {
  struct Obj {
    uint64_t v[5];
  };
  SlabAllocator<Obj> alloc;
  SlabPool& pool = SlabAllocator<Obj>::pool();
  const size_t base = pool.in_use();
  Obj* one = alloc.allocate(1);
  CHECK(pool.in_use() == base + 1);
  Obj* many = alloc.allocate(9);
  CHECK(pool.in_use() == base + 1);  // an array: std::allocator
  many[8].v[4] = 1;
  one->v[4] = 2;
  alloc.deallocate(many, 9);
  alloc.deallocate(one, 1);
  CHECK(pool.in_use() == base);
  CHECK(SlabAllocator<Obj>() == SlabAllocator<int>());

  using Map = std::unordered_map<uint64_t, std::array<uint64_t, 8>, std::hash<uint64_t>, std::equal_to<uint64_t>,
                                 SlabAllocator<std::pair<const uint64_t, std::array<uint64_t, 8>>>>;
  Map m;
  for (uint64_t i = 0; i < 50000; ++i) m[i * 7919].fill(i);
  for (uint64_t i = 0; i < 50000; i += 2) m.erase(i * 7919);
  CHECK(m.size() == 25000);
  for (uint64_t i = 1; i < 50000; i += 2) {
    auto it = m.find(i * 7919);
    REQUIRE(it != m.end());
    CHECK(it->second[7] == i);
  }
  CHECK(m.find(2 * 7919) == m.end());
}

namespace {
flow::Match random_match(std::mt19937_64& rng, unsigned n_words) {
  flow::Match m;
  uint64_t* mw = m.mask.words();
  uint64_t* kw = m.key.words();
  std::vector<unsigned> all(flow::kFlowWords);
  for (unsigned i = 0; i < flow::kFlowWords; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  for (unsigned i = 0; i < n_words; ++i) {
    mw[all[i]] = rng() | 1;  // never zero
    kw[all[i]] = rng();
  }
  m.apply_mask();
  return m;
}
}  // namespace

TEST_CASE("PackedMatch: unpacks byte for byte, inline and on the heap; equals; copies and moves") {
  std::mt19937_64 rng(18);
  for (unsigned n : {0u, 1u, 5u, 16u, 17u, 40u, flow::kFlowWords}) {
    CAPTURE(n);
    const flow::Match m = random_match(rng, n);
    const flow::PackedMatch p(m);
    CHECK(p.unpack() == m);
    CHECK(p.equals(m));
    if (n) {
      flow::Match other = m;
      const unsigned w = [&] {
        for (unsigned i = 0;; ++i)
          if (m.mask.words()[i]) return i;
      }();
      other.mask.words()[w] ^= 1;  // one mask bit fewer or more
      other.apply_mask();
      CHECK_FALSE(p.equals(other));
    }
    if (n < flow::kFlowWords) {
      flow::Match other = m;
      for (unsigned i = 0; i < flow::kFlowWords; ++i)
        if (!m.mask.words()[i]) {
          other.mask.words()[i] = 1;  // a word the packed map has not
          break;
        }
      CHECK_FALSE(p.equals(other));
    }
    flow::PackedMatch copy(p);
    CHECK(copy.unpack() == m);
    flow::PackedMatch moved(std::move(copy));
    CHECK(moved.unpack() == m);
    flow::PackedMatch assigned;
    assigned = moved;
    CHECK(assigned.unpack() == m);
    assigned = flow::PackedMatch(random_match(rng, 3));
    CHECK(assigned.equals(assigned.unpack()));
  }
  CHECK(flow::PackedMatch().unpack() == flow::Match{});
}

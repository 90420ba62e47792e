// Subtable lookup functions: every specialization and the generic function
// against each other and against the definition (masked_hash, equal_masked
// over every rule), on the same random masks, rules and keys; plus the
// bucket table's overflow chains, hash collisions and the shape table.
#include "datapath/dpcls_lookup.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "datapath/dpcls_subtable.h"
#include "flow/flow_hash.h"

using namespace keel::datapath;
using keel::flow::FlowMap;
using keel::flow::kMiniflowMaxWords;
using keel::flow::Miniflow;

namespace {

using Rng = std::mt19937_64;

// A Miniflow from word -> value (any order).
Miniflow make_mf(const std::map<unsigned, uint64_t>& words) {
  Miniflow mf;
  keel::flow::MiniflowBuilder b(mf);
  for (const auto& [w, v] : words) b.push(w, v);
  return mf;
}

std::map<unsigned, uint64_t> words_of(const Miniflow& mf) {
  std::map<unsigned, uint64_t> m;
  unsigned i = 0;
  mf.map.for_each([&](unsigned w) { m[w] = mf.values[i++]; });
  return m;
}

// n distinct words in [base, base + 64).
std::vector<unsigned> pick_words(Rng& rng, unsigned n, unsigned base) {
  std::vector<unsigned> all(64);
  for (unsigned i = 0; i < 64; ++i) all[i] = base + i;
  std::shuffle(all.begin(), all.end(), rng);
  // Bias towards the words keel's key really has (u0: 48..63, u1: 64..75).
  if (rng() % 2) {
    std::stable_partition(all.begin(), all.end(),
                          [&](unsigned w) { return base == 0 ? (w >= 48 && w < 64) : (w < 76); });
  }
  all.resize(n);
  return all;
}

// A non-zero mask word: exact, a prefix, a field, or random bits.
uint64_t mask_word(Rng& rng) {
  switch (rng() % 5) {
    case 0:
      return ~uint64_t{0};
    case 1:
      return ~uint64_t{0} << (rng() % 64);  // keeps at least the top bit
    case 2:
      return uint64_t{0xffffffff} << (32 * (rng() % 2));
    case 3:
      return uint64_t{0xff} << (8 * (rng() % 8));
    default: {
      uint64_t m = rng() & rng();
      return m ? m : 1;
    }
  }
}

Miniflow random_mask(Rng& rng, unsigned u0, unsigned u1) {
  std::map<unsigned, uint64_t> w;
  for (unsigned x : pick_words(rng, u0, 0)) w[x] = mask_word(rng);
  for (unsigned x : pick_words(rng, u1, 64)) w[x] = mask_word(rng);
  return make_mf(w);
}

// A key with every word of `mask` (values drawn from a small set so that
// masked keys repeat and partial masks collide), and a few extra words.
Miniflow random_key(Rng& rng, const Miniflow& mask, unsigned extra) {
  std::map<unsigned, uint64_t> w;
  mask.map.for_each([&](unsigned x) {
    const uint64_t choices[] = {0, 1, ~uint64_t{0}, 0x0a000001, rng(), rng() & 0xffff};
    w[x] = choices[rng() % std::size(choices)];
  });
  for (unsigned i = 0; i < extra && w.size() < kMiniflowMaxWords; ++i) w[rng() % 128] = rng();
  return make_mf(w);
}

// A key derived from `src` that still matches it under `mask`: unmasked bits
// changed, words outside the mask added or removed, and mask words whose
// masked value is 0 sometimes removed (absent reads as 0).
Miniflow matching_variant(Rng& rng, const Miniflow& src, const Miniflow& mask) {
  auto w = words_of(src);
  auto m = words_of(mask);
  for (auto it = w.begin(); it != w.end();) {
    auto mi = m.find(it->first);
    if (mi == m.end()) {
      if (rng() % 3 == 0) {
        it = w.erase(it);
        continue;
      }
      it->second = rng();
    } else {
      it->second ^= rng() & ~mi->second;
      if ((it->second & mi->second) == 0 && rng() % 2) {
        it = w.erase(it);
        continue;
      }
    }
    ++it;
  }
  for (unsigned i = rng() % 4; i > 0 && w.size() < kMiniflowMaxWords; --i) {
    const unsigned x = rng() % 128;
    if (!m.count(x)) w[x] = rng();
  }
  return make_mf(w);
}

// One masked bit of one mask word flipped (the key keeps the word).
Miniflow near_miss(Rng& rng, const Miniflow& src, const Miniflow& mask) {
  auto w = words_of(src);
  auto m = words_of(mask);
  auto mi = m.begin();
  std::advance(mi, static_cast<long>(rng() % m.size()));
  uint64_t bit;
  do bit = uint64_t{1} << (rng() % 64);
  while (!(mi->second & bit));
  w[mi->first] ^= bit;
  return make_mf(w);
}

struct Fixture {
  DpclsSubtable* st = nullptr;
  std::vector<Miniflow> sources;  // keys the rules were inserted from
  std::vector<DpclsRule*> rules;
  std::vector<Miniflow> rule_keys;  // masked keys (Miniflow in the mask's map)
  ~Fixture() { DpclsSubtable::destroy(st); }
};

// The definition: the rule whose masked key equals key & mask (at most one).
DpclsRule* oracle(const Fixture& f, const Miniflow& key) {
  DpclsRule* found = nullptr;
  for (size_t i = 0; i < f.rules.size(); ++i) {
    if (keel::flow::equal_masked(key, f.st->mask, f.rule_keys[i])) {
      REQUIRE(found == nullptr);  // masked keys in one subtable are distinct
      found = f.rules[i];
    }
  }
  return found;
}

struct Tally {
  uint64_t lookups = 0, hits = 0, runs = 0;
};

// Runs `fns` over bursts of keys against the oracle; each fn sees the same
// keys, keys_map and starts from the same out[] sentinel.
void check_bursts(Rng& rng, const Fixture& f, const std::vector<const DpclsLookupImpl*>& fns,
                  unsigned n_bursts, Tally& tally) {
  static DpclsScratch scratch;
  auto* const kSentinel = reinterpret_cast<DpclsRule*>(uintptr_t{0x5a5a5a5a5a5a5a58});
  for (unsigned burst = 0; burst < n_bursts; ++burst) {
    const unsigned n = 1 + static_cast<unsigned>(rng() % kDpclsMaxBurst);
    std::vector<Miniflow> keys(n);
    for (auto& k : keys) {
      const unsigned kind = static_cast<unsigned>(rng() % 4);
      if (f.rules.empty() || kind == 0) {
        k = random_key(rng, f.st->mask, static_cast<unsigned>(rng() % 6));
      } else {
        const Miniflow& src = f.sources[rng() % f.sources.size()];
        const bool can_miss = !f.st->mask.map.empty();  // an empty mask matches everything
        k = kind == 3 && can_miss ? near_miss(rng, src, f.st->mask) : matching_variant(rng, src, f.st->mask);
      }
    }
    std::vector<const Miniflow*> ptrs(n);
    for (unsigned i = 0; i < n; ++i) ptrs[i] = &keys[i];
    uint32_t keys_map = n == 32 ? ~0u : (1u << n) - 1;
    if (rng() % 4 == 0)
      keys_map &= static_cast<uint32_t>(rng());  // a partial burst (earlier subtables matched some)

    for (const DpclsLookupImpl* impl : fns) {
      DpclsRule* out[kDpclsMaxBurst];
      std::fill(std::begin(out), std::end(out), kSentinel);
      const uint32_t found = impl->fn(*f.st, keys_map, ptrs.data(), out, scratch);
      CAPTURE(impl->name());
      CHECK((found & ~keys_map) == 0);
      for (unsigned i = 0; i < kDpclsMaxBurst; ++i) {
        if (!(keys_map >> i & 1)) {
          REQUIRE(out[i] == kSentinel);
          continue;
        }
        CAPTURE(i);
        REQUIRE(scratch.hashes[i] == keel::flow::masked_hash(keys[i], f.st->mask));
        DpclsRule* want = oracle(f, keys[i]);
        REQUIRE(((found >> i) & 1) == (want != nullptr));
        REQUIRE(out[i] == (want ? want : kSentinel));
        ++tally.lookups;
        tally.hits += want != nullptr;
      }
    }
    ++tally.runs;
  }
}

// A subtable with n_rules random rules (duplicates of an existing masked key
// are refused by insert and skipped here).
void fill(Rng& rng, Fixture& f, const Miniflow& mask, unsigned n_rules) {
  f.st = DpclsSubtable::create(mask, false);
  REQUIRE(f.st != nullptr);
  for (unsigned r = 0; r < n_rules; ++r) {
    Miniflow src = random_key(rng, mask, static_cast<unsigned>(rng() % 4));
    DpclsRule* rule = f.st->insert(src, reinterpret_cast<void*>(uintptr_t{r + 1}));
    if (!rule) {
      REQUIRE(f.st->find(src) != nullptr);  // refused only as a duplicate
      continue;
    }
    Miniflow mk;
    keel::flow::mask_miniflow(src, mask, mk);
    Miniflow stored;
    rule->masked_key(stored);
    REQUIRE(stored == mk);
    REQUIRE(rule->hash == keel::flow::masked_hash(src, mask));
    f.sources.push_back(src);
    f.rules.push_back(rule);
    f.rule_keys.push_back(mk);
  }
  REQUIRE(f.st->n_rules == f.rules.size());
}

}  // namespace

TEST_CASE(
    "the table specializes OVS's shapes and the u0 1..6 x u1 0..6 grid; others take the generic function") {
  std::set<std::pair<unsigned, unsigned>> shapes;
  for (const DpclsLookupImpl& impl : dpcls_lookup_specializations()) {
    CHECK(impl.specialized);
    CHECK((impl.fn != dpcls_lookup_generic().fn));
    CHECK(shapes.insert({impl.u0, impl.u1}).second);
    CHECK(&dpcls_lookup_select(impl.u0, impl.u1) == &impl);
    CHECK(impl.name() == "specialized(" + std::to_string(impl.u0) + "," + std::to_string(impl.u1) + ")");
  }
  for (auto s : {std::pair{9u, 4u}, {9u, 1u}, {8u, 1u}, {5u, 3u}, {5u, 2u}, {5u, 1u}, {4u, 1u}, {4u, 0u}})
    CHECK(shapes.count(s));
  for (unsigned u0 = 1; u0 <= 6; ++u0)
    for (unsigned u1 = 0; u1 <= 6; ++u1) CHECK(shapes.count({u0, u1}));
  CHECK(shapes.count({2, 2}));  // recirc_id,in_port,eth_type,ipv4(dst,frag)
  CHECK(shapes.size() == 45);
  CHECK_FALSE(dpcls_lookup_generic().specialized);
  CHECK(dpcls_lookup_generic().name() == "generic");
  for (auto s : {std::pair{0u, 0u}, {0u, 3u}, {7u, 0u}, {10u, 10u}, {20u, 20u}})
    CHECK(&dpcls_lookup_select(s.first, s.second) == &dpcls_lookup_generic());
}

TEST_CASE("property: every specialization == generic == definition, on the same masks, rules and keys") {
  Rng rng(0xd9c1);
  Tally tally;
  const unsigned kMasksPerShape = 10;
  const unsigned kBurstsPerMask = 16;
  for (const DpclsLookupImpl& impl : dpcls_lookup_specializations()) {
    CAPTURE(impl.name());
    for (unsigned m = 0; m < kMasksPerShape; ++m) {
      Fixture f;
      const Miniflow mask = random_mask(rng, impl.u0, impl.u1);
      const unsigned n_rules_choices[] = {0, 1, 7, 60, 400};
      fill(rng, f, mask, n_rules_choices[m % std::size(n_rules_choices)] + static_cast<unsigned>(rng() % 8));
      REQUIRE(f.st->n_u0 == impl.u0);
      REQUIRE(f.st->n_u1 == impl.u1);
      REQUIRE((f.st->lookup == impl.fn));  // create() picked this specialization
      check_bursts(rng, f, {&impl, &dpcls_lookup_generic()}, kBurstsPerMask, tally);
    }
  }
  MESSAGE("specializations: " << tally.runs << " bursts, " << tally.lookups
                              << " (function, key) results checked, " << tally.hits << " hits");
  CHECK(tally.hits > tally.lookups / 8);  // both outcomes well represented
  CHECK(tally.hits < tally.lookups * 7 / 8);
}

TEST_CASE("property: the generic function on shapes without a specialization") {
  Rng rng(0x6e4e);
  Tally tally;
  const std::pair<unsigned, unsigned> shapes[] = {{0, 0},  {0, 1}, {0, 5},   {7, 0},   {7, 3},  {8, 2},
                                                  {10, 6}, {3, 9}, {12, 12}, {20, 20}, {30, 10}};
  for (const auto& shape : shapes) {
    const unsigned u0 = shape.first, u1 = shape.second;  // (clang 14: no lambda capture of bindings)
    CAPTURE(u0);
    CAPTURE(u1);
    for (unsigned m = 0; m < 4; ++m) {
      Fixture f;
      const Miniflow mask = random_mask(rng, u0, u1);  // draws in a fixed order: same inputs on every target
      fill(rng, f, mask, 1 + static_cast<unsigned>(rng() % 100));
      REQUIRE((f.st->lookup == dpcls_lookup_generic().fn));
      REQUIRE_FALSE(f.st->specialized);
      check_bursts(rng, f, {&dpcls_lookup_generic()}, 10, tally);
    }
  }
  MESSAGE("generic-only shapes: " << tally.lookups << " (function, key) results checked");
}

TEST_CASE("rules sharing a home bucket: overflow chains, removal in any order, counts back to zero") {
  Rng rng(0x0f10);
  const Miniflow mask = make_mf({{50, ~uint64_t{0}}, {64, 0xffffffff00000000}});
  Fixture f;
  f.st = DpclsSubtable::create(mask, false);
  REQUIRE(f.st != nullptr);
  // 40 keys whose hashes agree in the low 12 bits: one home bucket for any
  // table of up to 4096 buckets, so the chain runs over 8+ buckets.
  std::vector<Miniflow> keys;
  uint32_t low = 0;
  for (uint64_t v = 1; keys.size() < 40; ++v) {
    Miniflow k = make_mf({{50, v}, {64, v << 32}});
    const uint32_t h = keel::flow::masked_hash(k, mask);
    if (keys.empty()) low = h & 0xfff;
    if ((h & 0xfff) == low) keys.push_back(k);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    DpclsRule* r = f.st->insert(keys[i], reinterpret_cast<void*>(uintptr_t{i + 1}));
    REQUIRE(r != nullptr);
    f.rules.push_back(r);
    f.sources.push_back(keys[i]);
    Miniflow mk;
    keel::flow::mask_miniflow(keys[i], mask, mk);
    f.rule_keys.push_back(mk);
  }
  CHECK(f.st->insert(keys[3], nullptr) == nullptr);  // duplicate
  Tally tally;
  check_bursts(rng, f, {&dpcls_lookup_select(1, 1), &dpcls_lookup_generic()}, 50, tally);
  // Remove in random order; after each removal the rest are still found.
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i : order) {
    auto pos = std::find(f.rules.begin(), f.rules.end(), f.st->find(keys[i]));
    REQUIRE(pos != f.rules.end());
    const size_t at = static_cast<size_t>(pos - f.rules.begin());
    f.st->remove(*pos);
    f.rules.erase(pos);
    f.sources.erase(f.sources.begin() + static_cast<long>(at));
    f.rule_keys.erase(f.rule_keys.begin() + static_cast<long>(at));
    CHECK(f.st->find(keys[i]) == nullptr);
    check_bursts(rng, f, {&dpcls_lookup_select(1, 1), &dpcls_lookup_generic()}, 2, tally);
  }
  CHECK(f.st->n_rules == 0);
  for (uint32_t b = 0; b <= f.st->bucket_mask; ++b) {
    CHECK(f.st->buckets[b].overflow == 0);
    for (DpclsRule* r : f.st->buckets[b].rules) CHECK(r == nullptr);
  }
}

TEST_CASE("two masked keys with one 32-bit hash: each key finds its own rule") {
  // Birthday search over one full-mask word for two values with equal hashes
  // (random 64-bit values: CRC32-C is injective on values below 2^32).
  const Miniflow mask = make_mf({{50, ~uint64_t{0}}});
  Rng rng(0xb1d);
  std::unordered_map<uint32_t, uint64_t> seen;
  uint64_t a = 0, b = 0;
  for (unsigned i = 0; i < (1u << 22) && !b; ++i) {
    const uint64_t v = rng();
    const uint32_t h = keel::flow::masked_hash(make_mf({{50, v}}), mask);
    auto [it, fresh] = seen.emplace(h, v);
    if (!fresh && it->second != v) a = it->second, b = v;
  }
  REQUIRE(b != 0);
  Fixture f;
  f.st = DpclsSubtable::create(mask, false);
  REQUIRE(f.st != nullptr);
  const Miniflow ka = make_mf({{50, a}}), kb = make_mf({{50, b}});
  DpclsRule* ra = f.st->insert(ka, nullptr);
  DpclsRule* rb = f.st->insert(kb, nullptr);
  REQUIRE(ra != nullptr);
  REQUIRE(rb != nullptr);
  REQUIRE(ra->hash == rb->hash);
  const Miniflow kc = make_mf({{50, a ^ b ^ 1}});  // a third key (misses)
  const Miniflow* keys[] = {&ka, &kb, &kc};
  for (const DpclsLookupImpl* impl : {&dpcls_lookup_select(1, 0), &dpcls_lookup_generic()}) {
    DpclsScratch scratch;
    DpclsRule* out[3] = {};
    CHECK(impl->fn(*f.st, 0b111, keys, out, scratch) == 0b011);
    CHECK(out[0] == ra);
    CHECK(out[1] == rb);
    CHECK(out[2] == nullptr);
  }
  f.st->remove(ra);
  DpclsScratch scratch;
  DpclsRule* out[3] = {};
  CHECK(dpcls_lookup_select(1, 0).fn(*f.st, 0b111, keys, out, scratch) == 0b010);
  CHECK(out[1] == rb);
}

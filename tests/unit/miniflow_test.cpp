// Miniflow: map arithmetic, expand/compress round trips, (masked) equality.
#include <doctest/doctest.h>

#include <random>

#include "flow/miniflow.h"

using namespace keel::flow;

TEST_CASE("FlowMap: bits, counts, index_of, both halves") {
  FlowMap m;
  m.set(0);
  m.set(50);
  m.set(63);
  m.set(64);
  m.set(74);
  CHECK(m.count() == 5);
  CHECK(m.count_u0() == 3);
  CHECK(m.count_u1() == 2);
  CHECK(m.index_of(50) == 1);
  CHECK(m.index_of(64) == 3);
  CHECK(m.index_of(74) == 4);
  CHECK(m.index_of(70) == 4);
  CHECK(m.test(74));
  CHECK_FALSE(m.test(73));
  std::vector<unsigned> words;
  m.for_each([&](unsigned w) { words.push_back(w); });
  CHECK(words == std::vector<unsigned>{0, 50, 63, 64, 74});
  CHECK(FlowMap::of_word(64) == FlowMap{0, 1});
  CHECK(m.contains(FlowMap::of_word(63) | FlowMap::of_word(74)));
  CHECK_FALSE(m.contains(FlowMap::of_word(1)));
}

TEST_CASE("expand(compress(key)) == key for random sparse keys") {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 2000; ++iter) {
    FlowKey k{};
    int n = static_cast<int>(rng() % kMiniflowMaxWords);
    for (int i = 0; i < n; ++i) k.words()[rng() % kFlowWords] = rng();
    Miniflow mf;
    REQUIRE(compress(k, mf));
    FlowKey back;
    expand(mf, back);
    REQUIRE(back == k);
    for (unsigned w = 0; w < kFlowWords; ++w) REQUIRE(mf.get(w) == k.words()[w]);
  }
}

TEST_CASE("compress refuses a key with too many words") {
  FlowKey k{};
  for (unsigned w = 0; w < kMiniflowMaxWords + 1; ++w) k.words()[w] = 1;
  Miniflow mf;
  CHECK_FALSE(compress(k, mf));
}

TEST_CASE("a built miniflow equals the compressed key; present zero words are kept") {
  FlowKey k{};
  k.in_port = 1;
  k.dl_type = 0x0008;
  Miniflow built;
  MiniflowBuilder b(built);
  b.push(KEEL_FLOW_WORD(in_port), k.words()[KEEL_FLOW_WORD(in_port)]);
  b.push(KEEL_FLOW_WORD(dl_dst), 0);
  b.push(KEEL_FLOW_WORD(dl_type), k.words()[KEEL_FLOW_WORD(dl_type)]);
  CHECK(b.size() == 3);
  FlowKey back;
  expand(built, back);
  CHECK(back == k);
  Miniflow same;
  MiniflowBuilder b2(same);
  b2.push(KEEL_FLOW_WORD(in_port), k.words()[KEEL_FLOW_WORD(in_port)]);
  b2.push(KEEL_FLOW_WORD(dl_dst), 0);
  b2.push(KEEL_FLOW_WORD(dl_type), k.words()[KEEL_FLOW_WORD(dl_type)]);
  CHECK(built == same);
  same.values[1] = 5;
  CHECK_FALSE(built == same);
}

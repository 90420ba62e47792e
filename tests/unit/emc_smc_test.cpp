// EMC and SMC: hits, misses, dead flows, insertion probability, collisions.
#include <doctest/doctest.h>

#include <random>

#include "datapath/emc.h"
#include "datapath/megaflow.h"
#include "datapath/smc.h"
#include "flow/flow_hash.h"

using namespace keel;
using namespace keel::datapath;

namespace {
flow::Miniflow key_of(uint32_t ip, uint16_t port) {
  flow::FlowKey k{};
  k.in_port = 1;
  k.dl_type = 0x0008;
  k.nw_dst = ip;
  k.tp_dst = port;
  flow::Miniflow mf;
  REQUIRE(flow::compress(k, mf));
  return mf;
}
}  // namespace

TEST_CASE("EMC: exact hits, misses on any other key, dead flows miss") {
  auto emc = std::make_unique<Emc>();
  Megaflow a, b;
  auto ka = key_of(1, 80), kb = key_of(2, 80);
  uint32_t ha = flow::miniflow_hash(ka), hb = flow::miniflow_hash(kb);
  CHECK(emc->lookup(ka, ha) == nullptr);
  emc->insert(ka, ha, &a);
  emc->insert(kb, hb, &b);
  CHECK(emc->lookup(ka, ha) == &a);
  CHECK(emc->lookup(kb, hb) == &b);
  CHECK(emc->lookup(key_of(1, 81), ha) == nullptr);  // same hash forced, other key
  CHECK(emc->occupied() == 2);
  a.dead.store(true);
  CHECK(emc->lookup(ka, ha) == nullptr);
  emc->forget(&b);
  CHECK(emc->lookup(kb, hb) == nullptr);
}

TEST_CASE("EMC: a key is cached in one of its two slots; a third key evicts") {
  auto emc = std::make_unique<Emc>();
  Megaflow f[3];
  // Three keys forced onto the same two slots via the same hash.
  const uint32_t h = 0x12345678;
  auto k0 = key_of(10, 1), k1 = key_of(11, 1), k2 = key_of(12, 1);
  emc->insert(k0, h, &f[0]);
  emc->insert(k1, h, &f[1]);
  CHECK(emc->lookup(k0, h) == &f[0]);
  CHECK(emc->lookup(k1, h) == &f[1]);
  emc->insert(k2, h, &f[2]);
  CHECK(emc->lookup(k2, h) == &f[2]);
  CHECK((emc->lookup(k0, h) == nullptr) != (emc->lookup(k1, h) == nullptr));
}

TEST_CASE("EMC insertion probability") {
  auto emc = std::make_unique<Emc>();
  emc->set_insert_inv_prob(0);
  CHECK_FALSE(emc->enabled());
  int yes = 0;
  for (int i = 0; i < 1000; ++i) yes += emc->should_insert();
  CHECK(yes == 0);
  emc->set_insert_inv_prob(1);
  yes = 0;
  for (int i = 0; i < 1000; ++i) yes += emc->should_insert();
  CHECK(yes == 1000);
  emc->set_insert_inv_prob(100);
  yes = 0;
  for (int i = 0; i < 100000; ++i) yes += emc->should_insert();
  CHECK(yes > 700);
  CHECK(yes < 1300);
}

TEST_CASE("SMC: signature hits, replacement, big indexes are not cached") {
  auto smc = std::make_unique<Smc>();
  CHECK(smc->lookup(0xabcd0001) == Smc::kNone);
  smc->insert(0xabcd0001, 7);
  CHECK(smc->lookup(0xabcd0001) == 7);
  smc->insert(0xabcd0001, 9);  // same signature: replaced
  CHECK(smc->lookup(0xabcd0001) == 9);
  CHECK(smc->lookup(0xabce0001) == Smc::kNone);  // other signature, same bucket
  // Fill the bucket's four ways and a fifth: the newest is always found.
  for (uint32_t s = 0; s < 5; ++s) smc->insert((s + 1) << 16 | 0x42, 100 + s);
  CHECK(smc->lookup(5u << 16 | 0x42) == 104);
  smc->insert(0x00010099, 70000);
  CHECK(smc->lookup(0x00010099) == Smc::kNone);
  smc->clear();
  CHECK(smc->lookup(0xabcd0001) == Smc::kNone);
}

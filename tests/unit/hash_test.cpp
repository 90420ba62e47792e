// The CRC32-C step: the instruction path and the portable table agree, and
// both match the published CRC-32C check values.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>

#include "core/hash.h"
#include "flow/flow_hash.h"

using namespace keel;

namespace {
// Standard CRC-32C over bytes (init ~0, final ~0) built from the 64-bit step,
// for the check value of RFC 3720 / the "123456789" test vector.
uint32_t crc32c_bytes(const uint8_t* p, size_t n, uint32_t (*step)(uint32_t, uint64_t)) {
  uint32_t crc = ~0u;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    crc = step(crc, v);
  }
  for (; i < n; ++i) {  // bytewise tail, reflected polynomial
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
  }
  return ~crc;
}
uint32_t step_fast(uint32_t c, uint64_t v) { return crc32c_u64(c, v); }
uint32_t step_portable(uint32_t c, uint64_t v) { return hash_portable::crc32c_u64(c, v); }
}  // namespace

TEST_CASE("CRC32-C check values") {
  const char* s = "123456789";
  CHECK(crc32c_bytes(reinterpret_cast<const uint8_t*>(s), 9, step_portable) == 0xE3069283u);
  CHECK(crc32c_bytes(reinterpret_cast<const uint8_t*>(s), 9, step_fast) == 0xE3069283u);
  uint8_t zeros[32] = {};
  CHECK(crc32c_bytes(zeros, 32, step_portable) == 0x8A9136AAu);  // RFC 3720 B.4
  CHECK(crc32c_bytes(zeros, 32, step_fast) == 0x8A9136AAu);
  uint8_t ones[32];
  std::memset(ones, 0xff, sizeof ones);
  CHECK(crc32c_bytes(ones, 32, step_portable) == 0x62A8AB43u);
}

TEST_CASE("the instruction and the portable table give identical values") {
  const std::string which = kHashHasCrcInstruction ? "yes" : "no (portable)";
  MESSAGE("CRC instruction in this build: " << which);
  std::mt19937_64 rng(42);
  for (int i = 0; i < 100000; ++i) {
    uint32_t c = static_cast<uint32_t>(rng());
    uint64_t v = rng();
    REQUIRE(crc32c_u64(c, v) == hash_portable::crc32c_u64(c, v));
  }
}

TEST_CASE("hash_finish spreads single-bit differences") {
  // Every output bit flips for roughly half of the one-bit input changes.
  int flips[32] = {};
  for (int b = 0; b < 64; ++b) {
    uint64_t w = 0x0123456789abcdefull;
    uint32_t h1 = hash_words64(&w, 1, 0);
    w ^= uint64_t{1} << b;
    uint32_t h2 = hash_words64(&w, 1, 0);
    for (int o = 0; o < 32; ++o) flips[o] += ((h1 ^ h2) >> o) & 1;
  }
  for (int o = 0; o < 32; ++o) {
    CAPTURE(o);
    CHECK(flips[o] > 10);
    CHECK(flips[o] < 54);
  }
}

TEST_CASE("masked_hash of a key equals the hash of its masked copy") {
  using namespace keel::flow;
  FlowKey k{};
  k.in_port = 3;
  k.nw_src = 0x0100000a;
  k.nw_dst = 0x0201000a;
  k.tp_src = 0x5000;
  Miniflow key;
  REQUIRE(compress(k, key));
  FlowKey m{};
  m.in_port = 0xffffffff;
  m.nw_dst = 0x00ffffff;  // 10.0.x.0/24 in network order
  Miniflow mask;
  REQUIRE(compress(m, mask));
  Miniflow masked;
  mask_miniflow(key, mask, masked);
  CHECK(masked_hash(key, mask, 7) == masked_hash(masked, mask, 7));
  CHECK(equal_masked(key, mask, masked));
  // A key that differs only outside the mask hashes and matches the same.
  FlowKey k2 = k;
  k2.nw_src = 0x0300000a;
  k2.nw_dst = 0xff01000a;
  Miniflow key2;
  REQUIRE(compress(k2, key2));
  CHECK(masked_hash(key2, mask, 7) == masked_hash(key, mask, 7));
  CHECK(equal_masked(key2, mask, masked));
  k2.nw_dst = 0x0202000a;
  REQUIRE(compress(k2, key2));
  CHECK_FALSE(equal_masked(key2, mask, masked));
}

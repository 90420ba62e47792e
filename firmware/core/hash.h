// The hash: CRC32-C steps over 64-bit words, then a murmur3-style finish.
//
// One function family serves EMC, SMC and dpcls (via flow/flow_hash.h) and
// the hash(l4) action. hash_int() is apart: Open vSwitch's hash_int() of
// its generic (murmur3) build, bit for bit, for hash(l4) on a packet that
// carries the NIC's RSS hash. The CRC step uses the CPU instruction where there is
// one — ARMv8 `crc32cx` (__crc32cd, built with +crc) and x86 SSE4.2
// `crc32q` (built with -msse4.2) — and a table-driven fallback otherwise.
// All three give identical values (tests/unit/hash_test.cpp), so a flow hashes
// the same on the NIC's Arm cores and on a developer's laptop.
//
// Cost: one crc32 instruction per word (3 cycles latency on x86, 2 on A72)
// plus ~5 cycles to finish.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#define KEEL_HASH_CRC_HW 1
#elif defined(__x86_64__) && defined(__SSE4_2__)
#include <nmmintrin.h>
#define KEEL_HASH_CRC_HW 1
#else
#define KEEL_HASH_CRC_HW 0
#endif

namespace keel {

namespace hash_portable {
// Table-driven CRC32-C (Castagnoli, reflected 0x82F63B78), 8 bytes at a time.
uint32_t crc32c_u64(uint32_t crc, uint64_t v) noexcept;
}  // namespace hash_portable

inline uint32_t crc32c_u64(uint32_t crc, uint64_t v) noexcept {
#if defined(__aarch64__) && KEEL_HASH_CRC_HW
  return __crc32cd(crc, v);
#elif defined(__x86_64__) && KEEL_HASH_CRC_HW
  return static_cast<uint32_t>(_mm_crc32_u64(crc, v));
#else
  return hash_portable::crc32c_u64(crc, v);
#endif
}

inline constexpr bool kHashHasCrcInstruction = KEEL_HASH_CRC_HW;

// Adds one 64-bit word to a running hash.
inline uint32_t hash_add64(uint32_t h, uint64_t w) noexcept { return crc32c_u64(h, w); }

// Finishes a hash over n_bytes of input (murmur3's fmix32 after mixing in the
// length): spreads the CRC's bits so that any subset of them indexes a table.
inline constexpr uint32_t hash_finish(uint32_t h, uint32_t n_bytes) noexcept {
  h ^= n_bytes;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

// Open vSwitch's hash_int(x, basis) as its generic build computes it
// (lib/hash.h without SSE4.2/Arm CRC: Debian's x86-64 package):
// mhash_finish(mhash_add(mhash_add(x, 0), basis) ^ 8). Pure ALU, no CRC.
// hash(l4(B)) sets dp_hash = hash_int(rss, B) when the packet has an RSS
// hash, as odp-execute does, so a bond's bucket of a flow is the one
// Open vSwitch would pick for the same RSS hash and basis.
namespace ovs_murmur {
constexpr uint32_t rot(uint32_t x, int k) noexcept { return (x << k) | (x >> (32 - k)); }
constexpr uint32_t add(uint32_t h, uint32_t data) noexcept {
  if (data) {
    data *= 0xcc9e2d51u;
    data = rot(data, 15);
    data *= 0x1b873593u;
    h ^= data;
  }
  h = rot(h, 13);
  return h * 5 + 0xe6546b64u;
}
constexpr uint32_t finish(uint32_t h) noexcept {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}
}  // namespace ovs_murmur

constexpr uint32_t hash_int(uint32_t x, uint32_t basis) noexcept {
  return ovs_murmur::finish(ovs_murmur::add(ovs_murmur::add(x, 0), basis) ^ 8u);
}
// Values of Open vSwitch 3.1's generic hash_2words() (lib/hash.h compiled
// without SSE4.2); hash_boolean's P0/P1 comments there predate murmur3.
static_assert(hash_int(1, 0) == 0xea95647du && hash_int(2, 0) == 0xa1cba8ceu &&
                  hash_int(0x12345678u, 7) == 0xc154f9a8u,
              "hash_int is Open vSwitch's");

inline uint32_t hash_words64(const uint64_t* w, size_t n, uint32_t basis) noexcept {
  uint32_t h = basis;
  for (size_t i = 0; i < n; ++i) h = hash_add64(h, w[i]);
  return hash_finish(h, static_cast<uint32_t>(n * 8));
}

}  // namespace keel

// The hash: CRC32-C steps over 64-bit words, then a murmur3-style finish.
//
// One function family serves EMC, SMC and dpcls (via flow/flow_hash.h) and
// the hash(l4) action. The CRC step uses the CPU instruction where there is
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

inline uint32_t hash_words64(const uint64_t* w, size_t n, uint32_t basis) noexcept {
  uint32_t h = basis;
  for (size_t i = 0; i < n; ++i) h = hash_add64(h, w[i]);
  return hash_finish(h, static_cast<uint32_t>(n * 8));
}

}  // namespace keel

#include "core/hash.h"

#include <array>

namespace keel::hash_portable {

namespace {
// Slicing-by-8 tables for the reflected Castagnoli polynomial.
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  return t;
}
constexpr auto kTables = make_tables();
}  // namespace

uint32_t crc32c_u64(uint32_t crc, uint64_t v) noexcept {
  // Same as the instructions: no pre/post inversion, little-endian byte order.
  uint64_t x = v ^ crc;
  return kTables[7][x & 0xff] ^ kTables[6][(x >> 8) & 0xff] ^ kTables[5][(x >> 16) & 0xff] ^
         kTables[4][(x >> 24) & 0xff] ^ kTables[3][(x >> 32) & 0xff] ^ kTables[2][(x >> 40) & 0xff] ^
         kTables[1][(x >> 48) & 0xff] ^ kTables[0][(x >> 56) & 0xff];
}

}  // namespace keel::hash_portable

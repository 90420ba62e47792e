// hal RSS (keel/hal/rss.h): the table-driven Toeplitz hash and the frame
// walk that finds its input.
//
// Table: kTable[i][b] is the hash contribution of byte value b at input byte
// i, i.e. the XOR of the 32-bit key windows starting at bits 8i + j for every
// set bit j of b (j = 0 the most significant). The hash of an input is then
// the XOR of kTable[i][input[i]], which equals the bit-by-bit definition
// (toeplitz_hash_reference; a unit test checks both on the Microsoft
// verification vectors and on random inputs).
//
// Thread-safety: pure functions over a constant table; any thread.
#include "keel/hal/rss.h"

#include <cstring>

namespace keel::hal {

namespace {

// The 32 key bits starting at bit `bit` (0 = most significant bit of byte 0).
constexpr uint32_t key_window(const std::array<uint8_t, kRssKeyLen>& key, unsigned bit) {
  uint64_t w = 0;
  const unsigned byte = bit / 8;
  for (unsigned k = 0; k < 5; ++k) w = (w << 8) | (byte + k < kRssKeyLen ? key[byte + k] : 0);
  return static_cast<uint32_t>(w >> (8 - bit % 8));
}

using Table = std::array<std::array<uint32_t, 256>, kRssMaxInput>;

constexpr Table make_table(const std::array<uint8_t, kRssKeyLen>& key) {
  Table t{};
  for (unsigned i = 0; i < kRssMaxInput; ++i) {
    std::array<uint32_t, 8> win{};
    for (unsigned j = 0; j < 8; ++j) win[j] = key_window(key, i * 8 + j);
    for (unsigned b = 0; b < 256; ++b) {
      uint32_t h = 0;
      for (unsigned j = 0; j < 8; ++j)
        if (b & (0x80u >> j)) h ^= win[j];
      t[i][b] = h;
    }
  }
  return t;
}

constexpr Table kTable = make_table(kDefaultRssKey);

constexpr uint16_t kEthIpv4 = 0x0800, kEthIpv6 = 0x86dd, kEthVlan = 0x8100, kEthQinQ = 0x88a8;
constexpr uint8_t kIpTcp = 6, kIpUdp = 17;

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

}  // namespace

uint32_t toeplitz_hash(std::span<const uint8_t> input) noexcept {
  const size_t n = input.size() < kRssMaxInput ? input.size() : kRssMaxInput;
  uint32_t h = 0;
  for (size_t i = 0; i < n; ++i) h ^= kTable[i][input[i]];
  return h;
}

uint32_t toeplitz_hash_reference(std::span<const uint8_t> key, std::span<const uint8_t> input) noexcept {
  uint32_t h = 0;
  for (size_t bit = 0; bit < input.size() * 8; ++bit) {
    if (!(input[bit / 8] & (0x80u >> (bit % 8)))) continue;
    uint32_t w = 0;
    for (unsigned k = 0; k < 32; ++k) {
      const size_t kb = bit + k;
      const bool set = kb / 8 < key.size() && (key[kb / 8] & (0x80u >> (kb % 8)));
      w = (w << 1) | (set ? 1u : 0u);
    }
    h ^= w;
  }
  return h;
}

bool rss_hash_frame(const uint8_t* f, uint32_t len, uint32_t& hash) noexcept {
  uint32_t ofs = 12;
  if (len < ofs + 2) return false;
  uint16_t type = be16(f + ofs);
  for (int tags = 0; (type == kEthVlan || type == kEthQinQ) && tags < 2; ++tags) {
    ofs += 4;
    if (len < ofs + 2) return false;
    type = be16(f + ofs);
  }
  ofs += 2;
  uint8_t in[kRssMaxInput];
  size_t n;
  uint8_t proto;
  uint32_t l4;
  bool ports_allowed = true;
  if (type == kEthIpv4) {
    if (len < ofs + 20) return false;
    const uint8_t* ip = f + ofs;
    const uint32_t ihl = (ip[0] & 0x0f) * 4u;
    if ((ip[0] >> 4) != 4 || ihl < 20 || len < ofs + ihl) return false;
    std::memcpy(in, ip + 12, 8);
    n = 8;
    proto = ip[9];
    l4 = ofs + ihl;
    // Any fragment (more fragments set, or an offset): addresses only.
    ports_allowed = (be16(ip + 6) & 0x3fff) == 0;
  } else if (type == kEthIpv6) {
    if (len < ofs + 40) return false;
    const uint8_t* ip = f + ofs;
    if ((ip[0] >> 4) != 6) return false;
    std::memcpy(in, ip + 8, 32);
    n = 32;
    proto = ip[6];
    l4 = ofs + 40;
  } else {
    return false;
  }
  if (ports_allowed && (proto == kIpTcp || proto == kIpUdp) && len >= l4 + 4) {
    std::memcpy(in + n, f + l4, 4);
    n += 4;
  }
  hash = toeplitz_hash({in, n});
  return true;
}

}  // namespace keel::hal

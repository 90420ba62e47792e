// Internet checksum (RFC 1071) arithmetic for the set actions: incremental
// updates (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')) when a header field
// changes, and a from-scratch sum for the slow path, tests and the tunnel
// headers (tunnel_header.cpp).
//
// The executor (datapath/execute.cpp) rewrites IPv4 addresses, TOS and TTL, IPv6
// addresses and L4 ports in place; each rewrite patches the checksums that
// cover the field (IPv4 header checksum; TCP/UDP/ICMPv6 checksums through
// the pseudo-header for addresses; TCP/UDP for ports) without reading the
// payload. Same formulas as Open vSwitch's recalc_csum16/32/128
// (lib/csum.c).
//
// Byte order: every 16-bit value here is taken exactly as it sits in the
// frame (network order, loaded with memcpy). One's complement addition is
// byte-order independent (RFC 1071 section 2(B)), so nothing is swapped and
// the result is stored back as is.
//
// Cost: recalc32 is ~6 adds and two folds; recalc128 ~18 adds.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace keel::packet::csum {

// Folds a 32-bit one's complement accumulator to 16 bits.
constexpr uint16_t fold(uint32_t sum) {
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

constexpr uint32_t add32(uint32_t sum, uint32_t v) { return sum + (v & 0xffff) + (v >> 16); }

// The checksum after one 16-bit word of the covered data went from old_v to new_v.
constexpr uint16_t recalc16(uint16_t csum, uint16_t old_v, uint16_t new_v) {
  uint32_t sum = static_cast<uint16_t>(~csum);
  sum += static_cast<uint16_t>(~old_v);
  sum += new_v;
  return static_cast<uint16_t>(~fold(sum));
}

// ... after a 32-bit word (an IPv4 address) went from old_v to new_v.
constexpr uint16_t recalc32(uint16_t csum, uint32_t old_v, uint32_t new_v) {
  uint32_t sum = static_cast<uint16_t>(~csum);
  sum = add32(sum, ~old_v);
  sum = add32(sum, new_v);
  return static_cast<uint16_t>(~fold(sum));
}

// ... after 16 bytes (an IPv6 address) went from old_v to new_v.
inline uint16_t recalc128(uint16_t csum, const uint8_t* old_v, const uint8_t* new_v) {
  uint32_t sum = static_cast<uint16_t>(~csum);
  for (unsigned i = 0; i < 16; i += 4) {
    uint32_t o, n;
    std::memcpy(&o, old_v + i, 4);
    std::memcpy(&n, new_v + i, 4);
    sum = add32(sum, ~o);
    sum = add32(sum, n);
    sum = (sum & 0xffff) + (sum >> 16);  // keep room for the next round
  }
  return static_cast<uint16_t>(~fold(sum));
}

// One's complement sum of n bytes (an odd last byte is padded with zero),
// added to `sum`; not folded, not complemented. For from-scratch checksums:
// ~fold(sum_bytes(...)) over a header with its checksum field zero.
inline uint32_t sum_bytes(const uint8_t* p, size_t n, uint32_t sum = 0) {
  size_t i = 0;
  for (; i + 1 < n; i += 2) {
    uint16_t w;
    std::memcpy(&w, p + i, 2);
    sum += w;
    if (sum & 0x80000000u) sum = (sum & 0xffff) + (sum >> 16);
  }
  if (i < n) {
    uint8_t last[2] = {p[i], 0};
    uint16_t w;
    std::memcpy(&w, last, 2);
    sum += w;
  }
  return sum;
}

// The checksum of n bytes whose checksum field is zero.
inline uint16_t compute(const uint8_t* p, size_t n, uint32_t sum = 0) {
  return static_cast<uint16_t>(~fold(sum_bytes(p, n, sum)));
}

}  // namespace keel::packet::csum

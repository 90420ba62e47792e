// hal RSS — what a NIC's receive-side scaling does to a received frame: the
// Toeplitz hash of its addresses (and ports), and the redirection table that
// turns the hash into an rx queue. The sim "NIC" (hal/sim) applies it to
// multi-queue ports so that they spread flows over queues as hardware does,
// and stores the hash as the packet's RSS hash (hal::Packet::rss_hash), which
// the datapath then uses for its EMC/SMC hash as it does a NIC's.
//
//   Toeplitz (Microsoft RSS spec, "Verifying the RSS Hash Calculation"):
//   for every set bit i of the input (most significant first), XOR in the
//   32 bits of the key starting at bit i. keel uses the standard 40-byte key
//   that mlx5, ixgbe/i40e and the Microsoft spec use by default
//   (kDefaultRssKey). The input is, in network byte order,
//     IPv4:        src addr, dst addr                   (8 bytes)
//     IPv4 + L4:   src addr, dst addr, src port, dst port (12 bytes)
//     IPv6:        src addr, dst addr                   (32 bytes)
//     IPv6 + L4:   src addr, dst addr, src port, dst port (36 bytes)
//   with L4 = TCP or UDP (the default RSS types of those NICs: ip, tcp,
//   udp). A first IPv4 fragment and later ones hash the addresses only, so
//   the fragments of one datagram stay on one queue; an IPv6 packet with an
//   extension header hashes its addresses only.
//
// rss_hash_frame() finds those fields in an Ethernet frame: Ethernet II
// with up to two VLAN tags (802.1Q 0x8100, 802.1ad 0x88a8), IPv4 (IHL >= 5,
// header inside the frame) or IPv6 (40-byte header inside the frame), and
// TCP/UDP ports when the first 4 bytes of the L4 header are present.
// Anything else (ARP, a runt, a truncated header, MPLS, ...) has no RSS
// hash; a NIC delivers it unhashed on queue 0.
//
// Cost: the hash is table-driven — one 32-bit XOR per input byte from a
// 36 x 256 table computed at compile time for the default key (36 KB) — so
// a 12-byte IPv4/UDP input is 12 loads and XORs; no allocation, no branch
// per bit. rss_hash_frame() on 64-byte IPv4/UDP frames (1024 distinct, hot
// in cache) takes about 14 ns per frame on the shared 2-core dev VM (g++ -O2,
// a loop over rss_hash_frame; noisy: other builds ran). Where it is paid:
// a pcap port computes its records' hashes once at open, so a replay pays
// nothing per packet; a ring port hashes in inject(), on the injecting
// thread (the "wire"), not the PMD.
//
// Thread-safety: pure functions over constant tables; any thread. An
// RssReta is written by its owner before the port is polled and only read
// afterwards.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace keel::hal {

inline constexpr size_t kRssKeyLen = 40;
inline constexpr std::array<uint8_t, kRssKeyLen> kDefaultRssKey = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};
// The longest input: IPv6 addresses and two ports.
inline constexpr size_t kRssMaxInput = 36;
// A 40-byte key covers 320 - 32 + 1 input bits: 36 bytes need 36*8 + 31.
static_assert(kRssMaxInput * 8 + 31 <= kRssKeyLen * 8, "the key must be long enough for an IPv6 + L4 input");

// The Toeplitz hash of `input` (at most kRssMaxInput bytes; the rest is
// ignored) with kDefaultRssKey.
uint32_t toeplitz_hash(std::span<const uint8_t> input) noexcept;

// The bit-by-bit definition with any key (for tests; slow).
uint32_t toeplitz_hash_reference(std::span<const uint8_t> key, std::span<const uint8_t> input) noexcept;

// The RSS hash of an Ethernet frame (see above); false when the frame has
// none (not IPv4/IPv6, or a header cut short).
bool rss_hash_frame(const uint8_t* frame, uint32_t len, uint32_t& hash) noexcept;

// The redirection table: 128 entries, entry i = i % n_queues (the default
// RETA of mlx5/ixgbe); queue_for(hash) = entry[hash % 128].
class RssReta {
 public:
  static constexpr unsigned kSize = 128;
  explicit RssReta(unsigned n_queues = 1) noexcept { reset(n_queues); }
  void reset(unsigned n_queues) noexcept {
    for (unsigned i = 0; i < kSize; ++i) entry_[i] = static_cast<uint8_t>(n_queues ? i % n_queues : 0);
  }
  uint16_t queue_for(uint32_t hash) const noexcept { return entry_[hash & (kSize - 1)]; }

 private:
  std::array<uint8_t, kSize> entry_{};
};

}  // namespace keel::hal

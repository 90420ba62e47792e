// Smc — the signature match cache: per PMD, 2^20 entries in 4-way buckets,
// each a 16-bit signature of the packet hash and the 16-bit index of a
// megaflow in the PMD's flow table (as Open vSwitch's SMC). Off by default
// (`smc-enable`). It is 4 MB instead of the EMC's 400 KB per 8192 flows, so
// it holds ~100x more flows; a hit is only a candidate: the caller verifies
// it against the megaflow's mask and key (a signature may collide), which
// costs about what one dpcls subtable probe costs, instead of ~8 of them.
//
// Flows whose table index doesn't fit 16 bits are not cached here.
//
// Thread-safety: owned by one PMD, its only reader and writer. Indexes of
// removed flows may linger; the flow table returns null or a dead flow for
// them and the verification fails.
#pragma once

#include <cstdint>
#include <memory>

namespace keel::datapath {

class Smc {
 public:
  static constexpr unsigned kEntries = 1u << 20;
  static constexpr unsigned kWays = 4;
  static constexpr unsigned kBuckets = kEntries / kWays;
  static constexpr uint32_t kMaxIndex = 0xfffe;  // 0xffff marks an empty way
  static constexpr uint32_t kNone = 0xffffffff;

  Smc() : buckets_(std::make_unique<Bucket[]>(kBuckets)) { clear(); }

  // The flow index cached for this hash, or kNone.
  uint32_t lookup(uint32_t hash) const noexcept {
    const Bucket& b = buckets_[hash & (kBuckets - 1)];
    const uint16_t sig = static_cast<uint16_t>(hash >> 16);
    for (unsigned w = 0; w < kWays; ++w)
      if (b.sig[w] == sig && b.index[w] != kEmpty) return b.index[w];
    return kNone;
  }

  // Starts loading the bucket of `hash` (one line of four): a burst
  // prefetches all its buckets before looking any up, so the cache misses
  // into the 4 MB table overlap instead of stalling one packet at a time.
  void prefetch(uint32_t hash) const noexcept { __builtin_prefetch(&buckets_[hash & (kBuckets - 1)]); }

  // Caches hash -> flow index: the way with the same signature, else an
  // empty way, else a way chosen from the hash's low bits.
  void insert(uint32_t hash, uint32_t index) noexcept {
    if (index > kMaxIndex) return;
    Bucket& b = buckets_[hash & (kBuckets - 1)];
    const uint16_t sig = static_cast<uint16_t>(hash >> 16);
    unsigned way = kWays;
    for (unsigned w = 0; w < kWays && way == kWays; ++w)
      if (b.sig[w] == sig) way = w;
    for (unsigned w = 0; w < kWays && way == kWays; ++w)
      if (b.index[w] == kEmpty) way = w;
    if (way == kWays) way = (hash >> 8) & (kWays - 1);
    b.sig[way] = sig;
    b.index[way] = static_cast<uint16_t>(index);
  }

  void clear() noexcept {
    for (unsigned i = 0; i < kBuckets; ++i)
      for (unsigned w = 0; w < kWays; ++w) buckets_[i].sig[w] = 0, buckets_[i].index[w] = kEmpty;
  }

 private:
  static constexpr uint16_t kEmpty = 0xffff;
  struct Bucket {
    uint16_t sig[kWays];
    uint16_t index[kWays];
  };
  static_assert(sizeof(Bucket) == 16, "four buckets per cache line");
  std::unique_ptr<Bucket[]> buckets_;
};

}  // namespace keel::datapath

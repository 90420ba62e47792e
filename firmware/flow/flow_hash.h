// Hashes over flow keys: the one hash of a miniflow (EMC, SMC, dpcls), and
// the L4 5-tuple hash of the hash(l4) action. See core/hash.h for the step.
//
// Thread-safety: pure functions.
#pragma once

#include "core/hash.h"
#include "flow/miniflow.h"

namespace keel::flow {

// Hash of a packet's miniflow: its present words, then its map. Two packets
// with equal miniflows hash equal.
inline uint32_t miniflow_hash(const Miniflow& mf, uint32_t basis = 0) noexcept {
  uint32_t h = basis;
  const unsigned n = mf.n_words();
  for (unsigned i = 0; i < n; ++i) h = hash_add64(h, mf.values[i]);
  h = hash_add64(h, mf.map.u0);
  h = hash_add64(h, mf.map.u1);
  return hash_finish(h, (n + 2) * 8);
}

// Hash of the words of `key` selected by `mask`, masked: what a dpcls
// subtable computes for a packet, and what it stored for each rule (the
// stored side hashes its already-masked values with the same function).
inline uint32_t masked_hash(const Miniflow& key, const Miniflow& mask, uint32_t basis = 0) noexcept {
  uint32_t h = basis;
  unsigned i = 0;
  mask.map.for_each([&](unsigned w) {
    h = hash_add64(h, key.get(w) & mask.values[i]);
    ++i;
  });
  return hash_finish(h, i * 8);
}

// Symmetric-free L4 hash (src/dst addresses, protocol, ports) for hash(l4):
// the same 5-tuple always gives the same value, whatever else the packet has.
uint32_t hash_l4(const Miniflow& key, uint32_t basis) noexcept;

}  // namespace keel::flow

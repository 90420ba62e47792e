// Bond bucket tables of the fast path (ARCHITECTURE.md, idea 2): for every
// balance-tcp bond that uses the `lb_output` action, each PMD holds a table
// of kBondBuckets buckets -> member datapath port. The action list
// `hash(l4(0)),lb_output(ID)` sets the packet's dp_hash (the NIC's RSS hash
// when the packet has one, mixed with the basis, as Open vSwitch's
// odp-execute does; else the 5-tuple hash) and lb_output sends it to
// buckets[dp_hash & kBondBucketMask] of bond ID, counting the packet and its
// bytes in that bucket. One megaflow serves any number of L4 flows; no
// second pass through the classifier.
//
// Who writes what: ofproto's bonds compute the tables (rebalancing, member
// up/down) and hand them to Datapath::bond_set(), which posts them to every
// PMD's request ring; each PMD swaps in its own copy between bursts (it is
// the only writer of its tables and of their counters). Per-bucket counters
// are relaxed atomics the PMD alone writes and anyone reads (the
// rebalancer, pmd-bond-show, bond-show's loads); they belong to the
// (PMD, bond id) slot, not to one table, so a replaced table keeps counting
// where the old one left off; bond_del() and a bond_set() that creates the
// id start them at zero.
//
// In a PMD (pmd.h): an array of kMaxBondId + 1 PmdBondSlots indexed by bond
// id (slot 0 unused). A slot points to an immutable BondMembers table and to
// the slot's BondBucketCounters; both are allocated by the poster
// (Datapath::bond_set, on the control thread), installed by the PMD between
// bursts through its request ring (FlowRequest::Op::bond_set / bond_del),
// and what the PMD swapped out goes back in the request for the poster to
// free once the PMD answered: nothing is allocated or freed on the PMD.
// The executor (execute.h) reads a slot's two pointers with relaxed loads
// (the PMD wrote them itself) and bumps the counters with a relaxed load +
// store (single writer, no locked instruction). Other threads read the
// pointers with acquire loads and the counters with relaxed loads, only
// while holding the Datapath's bond mutex, which every free of a table or
// counter block is done under (so what they read is never freed under
// them).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace keel::datapath {

inline constexpr unsigned kBondBuckets = 256;  // Open vSwitch's BOND_BUCKETS
inline constexpr uint32_t kBondBucketMask = kBondBuckets - 1;
// Bond ids are 1..kMaxBondId (lb_output's argument); 0 is never a bond.
inline constexpr uint32_t kMaxBondId = 255;
// A bucket with no member: packets hashed to it are dropped and counted
// (PmdCounters::bond_drops). A bond with every member down has only these.
inline constexpr uint16_t kNoBondMember = 0xffff;

using BondMembers = std::array<uint16_t, kBondBuckets>;  // bucket -> datapath port (or kNoBondMember)

// Per-bucket traffic of one bond, summed over the PMDs (or of one PMD).
struct BondBucketStats {
  std::array<uint64_t, kBondBuckets> packets{};
  std::array<uint64_t, kBondBuckets> bytes{};
};

// The per-bucket counters of one (PMD, bond id) slot: written by that PMD
// alone (relaxed load + store), read by anyone (relaxed).
struct BondBucketCounters {
  std::array<std::atomic<uint64_t>, kBondBuckets> packets{};
  std::array<std::atomic<uint64_t>, kBondBuckets> bytes{};
};

// One bond id in one PMD (see the top). Null members: no such bond.
struct PmdBondSlot {
  std::atomic<const BondMembers*> members{nullptr};
  std::atomic<BondBucketCounters*> counters{nullptr};
};
using PmdBondSlots = std::array<PmdBondSlot, kMaxBondId + 1>;

// One PMD's copy of one bond's table (pmd-bond-show).
struct PmdBondView {
  unsigned pmd = 0;   // Pmd::index()
  int core = 0;       // Pmd::display_core()
  uint32_t bond_id = 0;
  BondMembers members{};
};

}  // namespace keel::datapath

// FlowTable — one PMD's megaflows: a slot array (the index SMC entries
// carry), one dpcls per input port, and the flows waiting to be freed.
//
// Life of a megaflow: the control thread builds it (key, mask, actions,
// ufid) and asks the owning PMD to install it (request ring, see pmd.h);
// the PMD inserts it into the dpcls of its in_port and publishes its slot.
// Removal, on request: the PMD unpublishes the slot, removes the dpcls rule
// and marks the flow dead, so EMC and SMC entries that still lead to it
// miss; it keeps the flow on its dead list until its EMC sweep has passed
// every entry twice since (no EMC entry can point to it any more), then
// hands it to the control thread through the reclaim ring, which frees it.
// Actions are replaced the same way: the PMD swaps the pointer between
// bursts and returns the old list to the requester to free.
//
// Memory: nothing the owner does between bursts grows a container. The slot
// array, the free slot list and the dead list are allocated with the table
// (capacity entries each: a slot below the high-water mark is on the free
// list or holds a flow, slots above it were never used; the dead list
// holds what was removed and not yet handed over, and a remove that finds it
// full is refused with FlowResult::busy, counted by the caller, until the
// sweep catches up), but committed only as they are used: the slots are a
// LazyArray (core/lazy_array.h) filled from index 0 up, and the two lists
// are reserved, not written, so a table sized for a million flows costs its
// address space (~20 bytes a slot) and the pages its flows touched (8 bytes
// a flow for the slot; a list entry per flow removed and not yet reused or
// handed over); a flow that the reclaim ring has no room for stays on
// the dead list and goes at the next release_swept(). install() allocates
// in the dpcls only (nothrow, see dpcls.h) and the Dpcls of a new in_port
// (nothrow). Failures are FlowResult codes: the owner builds no message;
// flow_result_status() turns a code into a Status on the requester's thread.
//
// Thread-safety: the owning PMD is the only writer (or the control thread
// while the PMD is not running): install, remove, release_swept, find,
// dpcls(). The control thread reads slots with acquire loads (for_each:
// pairs with the PMD's release store on publish) and the flows' immutable
// fields and relaxed statistics (for_each walks the slots below the
// high-water mark, an acquire load that pairs with the owner's release store
// after the slot's publish), and drains the reclaim ring (reclaim(), one
// thread at a time: the datapath's flow mutex). A flow the control thread
// reached through a slot is not freed under it: only the control thread
// frees flows (reclaim(), clear()), and a flow reaches the reclaim ring only
// after its removal, which the control thread requested and waited for.
// size() is a relaxed atomic anyone may read. clear(): the owner stopped.
// published(): the control thread's (and the offload engine's, under the
// flow mutex) view of one slot, as for_each.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/lazy_array.h"
#include "core/ring.h"
#include "core/status.h"
#include "datapath/dpcls.h"
#include "datapath/megaflow.h"
#include "datapath/simple_match.h"

namespace keel::datapath {

inline constexpr unsigned kMaxDpPorts = 256;

// The outcome of a table change made on the owner's thread: a code, so that
// the PMD builds no string (see flow_result_status()).
enum class FlowResult : uint8_t {
  ok,
  bad_in_port,  // in_port >= kMaxDpPorts
  table_full,   // every slot holds a flow
  exists,       // a flow with the same mask and masked key is installed
  no_memory,    // the classifier could not allocate
  not_found,    // remove/modify: no such flow
  busy,         // remove: the dead list is full (the EMC sweep has not caught up)
};
// The requester's Status for a code (allocates: not on the PMD).
Status flow_result_status(FlowResult r, uint32_t capacity);

class FlowTable {
 public:
  explicit FlowTable(uint32_t capacity);
  ~FlowTable();
  FlowTable(const FlowTable&) = delete;
  FlowTable& operator=(const FlowTable&) = delete;

  uint32_t capacity() const { return capacity_; }
  uint32_t size() const { return n_flows_.load(std::memory_order_relaxed); }

  // --- owner ---
  // Installs `f` (built by the caller). On ok the table owns it; on a
  // failure nothing changed and the caller keeps it. No exception.
  FlowResult install(Megaflow* f) noexcept;
  // The installed flow with f's mask and masked key on f's in_port, if any.
  Megaflow* find(const Megaflow& f) const;
  // ok, or busy (nothing changed) when the dead list is full.
  FlowResult remove(Megaflow* f, uint64_t emc_generation) noexcept;
  // Moves dead flows that no EMC entry can reach any more to the reclaim
  // ring (those it has no room for stay dead until the next call).
  void release_swept(uint64_t emc_generation) noexcept;
  bool has_dead() const { return !dead_.empty(); }

  Megaflow* at(uint32_t index) const noexcept { return slot(index).load(std::memory_order_relaxed); }
  // The simple-match view of the same flows (simple_match.h).
  const SimpleMatch& simple() const noexcept { return *simple_; }
  // Owner: f's actions were swapped.
  void actions_changed(const Megaflow* f) { simple_->actions_changed(f); }

  Dpcls* dpcls(uint32_t in_port) noexcept { return in_port < kMaxDpPorts ? dpcls_[in_port].get() : nullptr; }
  const Dpcls* dpcls(uint32_t in_port) const noexcept {
    return in_port < kMaxDpPorts ? dpcls_[in_port].get() : nullptr;
  }

  // --- control thread ---
  // The flow published in `index` (acquire: pairs with the owner's
  // publish), or null; the caller holds the datapath's flow mutex.
  Megaflow* published(uint32_t index) const noexcept {
    return index < capacity_ ? slot(index).load(std::memory_order_acquire) : nullptr;
  }
  template <typename F>
  void for_each(F&& f) const {
    const uint32_t used = high_water_.load(std::memory_order_acquire);
    // The flow kAhead slots on starts loading (its first two lines: the ufid
    // and the statistics a terse dump reads) while this one is handled:
    // flows are scattered over the slab pool, one or two misses each.
    constexpr uint32_t kAhead = 8;
    for (uint32_t i = 0; i < used; ++i) {
      if (i + kAhead < used)
        if (const Megaflow* a = slot(i + kAhead).load(std::memory_order_relaxed)) {
          __builtin_prefetch(a);
          __builtin_prefetch(reinterpret_cast<const char*>(a) + 64);
        }
      if (Megaflow* m = slot(i).load(std::memory_order_acquire)) f(*m);
    }
  }
  // Slots ever used (the high-water mark): what for_each walks.
  uint32_t slots_used() const { return high_water_.load(std::memory_order_relaxed); }
  // Frees what the owner has handed over; returns how many.
  size_t reclaim();
  // Frees everything (owner stopped).
  void clear();

 private:
  std::atomic_ref<Megaflow*> slot(uint32_t i) const noexcept { return std::atomic_ref<Megaflow*>(slots_[i]); }

  const uint32_t capacity_;
  // Every access through slot(): an atomic_ref, so that the array can be
  // plain zero pages (an std::atomic would be written by its constructor).
  mutable LazyArray<Megaflow*> slots_;
  std::atomic<uint32_t> high_water_{0};  // slots [0, high_water_) have been used; owner writes
  std::vector<uint32_t> free_;  // owner only: slots below the high-water mark that are free; capacity_ reserved
  std::atomic<uint32_t> n_flows_{0};
  std::array<std::unique_ptr<Dpcls>, kMaxDpPorts> dpcls_;
  std::unique_ptr<SimpleMatch> simple_ = std::make_unique<SimpleMatch>();
  std::vector<Megaflow*> dead_;  // owner only; capacity_ reserved, never exceeded
  MpmcRing<Megaflow*> reclaim_;
};

void free_megaflow(Megaflow* f);

}  // namespace keel::datapath

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
// Thread-safety: the owning PMD is the only writer (or the control thread
// while the PMD is not running). The control thread reads slots with
// acquire loads (pairs with the PMD's release store on publish) and the
// flows' immutable fields and relaxed statistics; a flow it can reach is not
// freed under it because the control thread is the one that frees flows, and
// removals are requested by the control thread itself.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/ring.h"
#include "core/status.h"
#include "datapath/dpcls.h"
#include "datapath/megaflow.h"
#include "datapath/simple_match.h"

namespace keel::datapath {

inline constexpr unsigned kMaxDpPorts = 256;

class FlowTable {
 public:
  explicit FlowTable(uint32_t capacity);
  ~FlowTable();
  FlowTable(const FlowTable&) = delete;
  FlowTable& operator=(const FlowTable&) = delete;

  uint32_t capacity() const { return capacity_; }
  uint32_t size() const { return n_flows_.load(std::memory_order_relaxed); }

  // --- owner ---
  // Installs `f` (built by the caller; the table owns it from now on, also
  // on failure, when it is returned for the caller to free: nullptr = ok).
  Status install(Megaflow* f);
  // The installed flow with f's mask and masked key on f's in_port, if any.
  Megaflow* find(const Megaflow& f) const;
  void remove(Megaflow* f, uint64_t emc_generation);
  // Moves dead flows that no EMC entry can reach any more to the reclaim ring.
  void release_swept(uint64_t emc_generation);
  bool has_dead() const { return !dead_.empty(); }

  Megaflow* at(uint32_t index) const noexcept { return slots_[index].load(std::memory_order_relaxed); }
  // The simple-match view of the same flows (simple_match.h).
  const SimpleMatch& simple() const noexcept { return *simple_; }
  // Owner: f's actions were swapped.
  void actions_changed(const Megaflow* f) { simple_->actions_changed(f); }

  Dpcls* dpcls(uint32_t in_port) noexcept { return in_port < kMaxDpPorts ? dpcls_[in_port].get() : nullptr; }
  const Dpcls* dpcls(uint32_t in_port) const noexcept {
    return in_port < kMaxDpPorts ? dpcls_[in_port].get() : nullptr;
  }

  // --- control thread ---
  template <typename F>
  void for_each(F&& f) const {
    for (uint32_t i = 0; i < capacity_; ++i)
      if (Megaflow* m = slots_[i].load(std::memory_order_acquire)) f(*m);
  }
  // Frees what the owner has handed over; returns how many.
  size_t reclaim();
  // Frees everything (owner stopped).
  void clear();

 private:
  const uint32_t capacity_;
  std::unique_ptr<std::atomic<Megaflow*>[]> slots_;
  std::vector<uint32_t> free_;  // owner only
  std::atomic<uint32_t> n_flows_{0};
  std::array<std::unique_ptr<Dpcls>, kMaxDpPorts> dpcls_;
  std::unique_ptr<SimpleMatch> simple_ = std::make_unique<SimpleMatch>();
  std::vector<Megaflow*> dead_;  // owner only
  MpmcRing<Megaflow*> reclaim_;
  std::vector<Megaflow*> overflow_;  // owner only: reclaim ring full
};

void free_megaflow(Megaflow* f);

}  // namespace keel::datapath

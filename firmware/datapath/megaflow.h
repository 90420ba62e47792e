// Megaflow — a datapath flow: a masked key, the actions for packets that
// match it, and its statistics. What `flow-dump` prints and what dpcls, SMC
// and EMC point to.
//
// Thread-safety: a megaflow belongs to one PMD (it lives in that PMD's flow
// table, `index` is its slot there). Key, mask(), ufid, in_port, shown_key
// and drop_reason are immutable after install. `actions` is swapped by the owning PMD when
// the flow is modified, between bursts (an acq_rel exchange; the PMD loads
// it relaxed, the control thread acquire); the old list goes back to the
// requester, which frees it as soon as the PMD answered: no burst of the
// PMD still holds it, and the other readers (flow-dump, flow-stats) hold the
// datapath's flow mutex, as the requester does. Statistics are written by
// the owning PMD (relaxed load + store) and read by anyone with relaxed
// loads. `dead` is set by the owning PMD when the flow is removed: caches
// that still point to it (EMC, SMC) see it and miss; `dead_sweep`,
// `dpcls_rule` are the owner's. The flow itself is freed by the control
// thread, under the datapath's flow mutex, once the owner's EMC sweep has
// passed every entry twice since (flow_table.h); a dumper holding that mutex
// may read every field of a flow it reached through a slot.
// Offload (offload_hooks.h): `offload` (a FlowOffload) and `hw_want` are
// written by the offload engine's thread through Datapath::set_flow_offload
// (relaxed stores under the flow mutex) and read relaxed by anyone: the
// owning PMD loads hw_want once per group of packets of the flow (whether to
// sample its microflows). `hw_packets`, `hw_bytes`, `hw_used_ns` (what the
// hardware rules of this flow counted) are written by the engine's thread
// under the flow mutex (Datapath::add_hw_stats) and read relaxed by anyone;
// flow_stats/flow_dump add them to the software counts. `mark` is the
// owning PMD's (its mark table's entry for this flow, 0 = none: set and
// cleared by set_flow_mark/clear_flow_mark requests and when the flow dies);
// others read it under the flow mutex (a relaxed atomic, for the readers).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "flow/miniflow.h"

namespace keel::flow {
class DpActions;  // encoded datapath actions (flow/dp_actions.h)
}

namespace keel::datapath {

// The 128-bit flow id (UFID) of Open vSwitch.
struct Ufid {
  uint64_t hi = 0, lo = 0;
  bool operator==(const Ufid&) const = default;
};

struct alignas(64) Megaflow {
  Ufid ufid;
  uint32_t in_port = 0;
  uint32_t index = 0;       // slot in the owning PMD's flow table
  void* dpcls_rule = nullptr;
  uint64_t dead_sweep = 0;  // owning PMD: EMC sweep generation when it died
  std::atomic<bool> dead{false};
  std::atomic<const flow::DpActions*> actions{nullptr};  // owned by the flow

  std::atomic<uint64_t> packets{0}, bytes{0};
  std::atomic<uint64_t> used_ns{0};  // hal::now_ns() of the last hit, 0 = never
  std::atomic<uint16_t> tcp_flags{0};

  // Offload (see the top): a FlowOffload; 0 nothing / 1 sample hot microflows.
  std::atomic<uint8_t> offload{0};
  std::atomic<uint8_t> hw_want{0};
  // Why packets this flow's actions send nowhere are dropped: a DropReason
  // (drop_stats.h) the slow path sets from its translation before the
  // install (0: kDropAction); immutable once installed.
  uint8_t drop_reason = 0;
  std::atomic<uint32_t> mark{0};  // owning PMD; 0 = none
  std::atomic<uint64_t> hw_packets{0}, hw_bytes{0};
  std::atomic<uint64_t> hw_used_ns{0};  // hal::now_ns() of the last hardware hit, 0 = never

 private:
  const flow::Miniflow* mask_ = &kNoMask;  // interned (set_mask) or kNoMask; beside the key: read with it

 public:
  flow::Miniflow key;  // masked key, in mask()'s map
  // The unmasked key that made this flow, as Open vSwitch keeps a datapath
  // flow's `struct flow` beside its mask: the upcall's packet key, or the key
  // as written for `dp-flow add`. flow-dump prints its values under the
  // mask (`ipv4(src=10.0.0.1/0.0.0.0,...)`). Owned; null: show `key`.
  // Cold: a separate allocation, so lookups never touch it.
  const flow::Miniflow* shown_key = nullptr;

  // Owning PMD only: accounts a batch of packets that hit this flow.
  void account(uint64_t n, uint64_t nbytes, uint16_t flags, uint64_t now) noexcept {
    packets.store(packets.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    bytes.store(bytes.load(std::memory_order_relaxed) + nbytes, std::memory_order_relaxed);
    used_ns.store(now, std::memory_order_relaxed);
    if (flags) tcp_flags.store(tcp_flags.load(std::memory_order_relaxed) | flags, std::memory_order_relaxed);
  }
  bool alive() const noexcept { return !dead.load(std::memory_order_relaxed); }

  // The subtable mask. One copy is shared by every megaflow with the same
  // mask (interned by set_mask): a mask serves thousands of flows, and its
  // own 336 bytes were 40 % of each megaflow, in a miss storm whose upcall
  // handler spent more time on the kernel zeroing new pages than on
  // anything else (tests/bench/RESULTS.md). Until set_mask: no word.
  const flow::Miniflow& mask() const noexcept { return *mask_; }
  // Interns `m` in a process-wide pool under a mutex: any thread but a
  // PMD's (PMDs neither build nor free flows). Before the flow is
  // published; replaces (and lets go of) a mask set before.
  void set_mask(const flow::Miniflow& m);

  Megaflow() = default;
  ~Megaflow();
  Megaflow(const Megaflow&) = delete;
  Megaflow& operator=(const Megaflow&) = delete;

  // Storage from one process-wide slab pool (core/slab_pool.h): a miss storm
  // that sets up a million flows takes no malloc and few page faults per
  // flow. Any thread but a PMD's (PMDs neither build nor free flows).
  static void* operator new(std::size_t n);
  static void* operator new(std::size_t n, std::align_val_t);
  static void operator delete(void* p) noexcept;
  static void operator delete(void* p, std::align_val_t) noexcept;

 private:
  static const flow::Miniflow kNoMask;  // map empty
};

}  // namespace keel::datapath

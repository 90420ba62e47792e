// Megaflow — a datapath flow: a masked key, the actions for packets that
// match it, and its statistics. What `flow-dump` prints and what dpcls, SMC
// and EMC point to.
//
// Thread-safety: a megaflow belongs to one PMD (it lives in that PMD's flow
// table, `index` is its slot there). Key, mask, ufid and in_port are
// immutable after install. `actions` is swapped by the owning PMD when the
// flow is modified (release store; readers on the same PMD load relaxed, the
// control thread loads acquire); the old actions are freed after every PMD
// has quiesced. Statistics are written by the owning PMD (relaxed load +
// store) and read by anyone with relaxed loads. `dead` is set by the owning
// PMD when the flow is removed: caches that still point to it (EMC, SMC)
// see it and miss. `shown_key` is control-plane data, immutable after
// install and never read by the PMD: `flow-dump` reads it under the same
// guarantee as key and mask (the flow is freed only after every PMD
// quiesced and the dumper holds the datapath's flow mutex).
#pragma once

#include <atomic>
#include <cstdint>

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

  flow::Miniflow mask;  // the subtable mask
  flow::Miniflow key;   // masked key, in mask's map
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
};

}  // namespace keel::datapath

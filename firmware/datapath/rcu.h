// Rcu — quiescent-state-based reclamation: memory that PMDs may still be
// reading is freed only after every PMD has passed a quiescent point.
//
// Each PMD thread owns a slot and calls quiesce() once per poll-loop
// iteration, between bursts, when it holds no pointer into shared state
// (one relaxed load of the global epoch and one release store of its own).
// A thread that stops polling goes offline() and stops holding anything up.
// The control thread retires objects with retire(); reclaim() frees those
// whose retirement epoch every online slot has passed; synchronize() bumps
// the epoch and waits for that. Open vSwitch's ovsrcu is the model.
//
// Thread-safety: quiesce/offline/online: the slot's owner only. retire,
// reclaim, synchronize, register_slot: the control thread only (one thread).
// Protocol: retire() reads epoch E then bumps the global epoch to E+1 (a
// seq_cst RMW); a PMD whose slot shows an epoch > E has loaded the global
// epoch after the bump, i.e. after the object was unpublished (the caller
// unpublishes before retiring), so it can no longer reach it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace keel::datapath {

class Rcu {
 public:
  static constexpr unsigned kMaxSlots = 64;
  static constexpr uint64_t kOffline = UINT64_MAX;

  Rcu() = default;
  Rcu(const Rcu&) = delete;
  Rcu& operator=(const Rcu&) = delete;
  // No reader can be inside once the Rcu goes (their threads are joined):
  // what still waits is freed now (callbacks may retire more).
  ~Rcu() {
    while (!pending_.empty()) {
      std::vector<Pending> now;
      now.swap(pending_);
      for (auto& p : now) p.free_fn();
    }
  }

  // Control thread, before the slot's thread starts.
  unsigned register_slot() {
    unsigned s = n_slots_.load(std::memory_order_relaxed);
    slots_[s].seen.store(kOffline, std::memory_order_relaxed);
    n_slots_.store(s + 1, std::memory_order_release);
    return s;
  }

  // --- slot owner (a PMD) ---
  void quiesce(unsigned slot) noexcept {
    slots_[slot].seen.store(epoch_.load(std::memory_order_acquire), std::memory_order_release);
  }
  void online(unsigned slot) noexcept { quiesce(slot); }
  void offline(unsigned slot) noexcept { slots_[slot].seen.store(kOffline, std::memory_order_release); }

  // --- control thread ---
  // Frees `free_fn` once every online slot has quiesced after this call.
  // The object must already be unreachable for new readers.
  void retire(std::function<void()> free_fn) {
    uint64_t e = epoch_.fetch_add(1, std::memory_order_seq_cst);
    pending_.push_back({e, std::move(free_fn)});
  }

  // Runs the frees that are safe now; returns how many are still pending.
  size_t reclaim() {
    const uint64_t min_seen = min_seen_epoch();
    size_t kept = 0;
    for (auto& p : pending_) {
      if (p.epoch < min_seen) p.free_fn();
      else pending_[kept++] = std::move(p);
    }
    pending_.resize(kept);
    return kept;
  }

  // Waits until everything retired so far can be freed, and frees it.
  void synchronize() {
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    while (reclaim() != 0) std::this_thread::yield();
  }

  uint64_t epoch() const noexcept { return epoch_.load(std::memory_order_relaxed); }

 private:
  uint64_t min_seen_epoch() const noexcept {
    uint64_t m = kOffline;
    const unsigned n = n_slots_.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; ++i) {
      uint64_t s = slots_[i].seen.load(std::memory_order_acquire);
      if (s < m) m = s;
    }
    return m;
  }

  struct alignas(64) Slot {
    std::atomic<uint64_t> seen{kOffline};
  };
  struct Pending {
    uint64_t epoch;
    std::function<void()> free_fn;
  };
  alignas(64) std::atomic<uint64_t> epoch_{1};
  std::atomic<unsigned> n_slots_{0};
  std::array<Slot, kMaxSlots> slots_{};
  std::vector<Pending> pending_;
};

}  // namespace keel::datapath

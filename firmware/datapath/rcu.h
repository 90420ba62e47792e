// Rcu — quiescent-state-based reclamation (QSBR): memory that readers may
// still be reading is freed only after every online reader has passed a
// quiescent point. Open vSwitch's ovsrcu and liburcu's urcu-qsbr are the
// models.
//
// The readers are the slow-path threads that walk the OpenFlow tables
// (ofproto.h: the upcall handlers and the revalidators; the PMDs are not Rcu
// readers — their flow tables have a single writer, see flow_table.h). Each
// reader owns a slot and calls quiesce() between batches, when it holds no
// pointer into shared state (one acquire load of the global epoch and one
// release store of its own). A reader that sleeps goes offline() and holds
// nothing up; online() when it wakes (with a full fence, see below). The
// writer retires objects with retire(); reclaim() frees those whose
// retirement epoch every online slot has passed; synchronize() bumps the
// epoch and waits for that.
//
// Thread-safety: quiesce/offline/online: the slot's owner only. retire,
// reclaim, synchronize: one writer thread at a time (Ofproto's writers, the
// control and maintenance threads, serialise on its writer_mutex);
// register_slot: a writer, before the slot's owner starts. The pending list is the
// writer's alone; slots and the epoch are atomics.
// Protocol: retire() reads epoch E then bumps the global epoch to E+1 (a
// seq_cst RMW); a reader whose slot shows an epoch > E has loaded the global
// epoch after the bump (acquire: it synchronizes with the RMW), i.e. after
// the object was unpublished (the caller unpublishes before retiring), so it
// can no longer reach it. A slot showing an epoch <= E holds it up.
// Going online is the one store a later load must not pass: online() is
// "store my epoch, then read shared pointers" and the reclaimer's scan is
// "unpublish, then read the slots" — the store-buffering pattern, where a
// release store followed by loads lets both sides miss each other's store
// (the reclaimer sees the slot still offline and frees what the reader has
// just loaded). So online() issues a full fence (seq_cst) after its store
// and the reclaimer a full fence before it reads the slots (min_seen_epoch),
// as liburcu's qsbr rcu_thread_online() and synchronize_rcu() do with
// cmm_smp_mb(): with the two fences, either the reclaimer sees the slot
// online or the reader sees the object unpublished. quiesce() needs no
// fence: while online, a delayed store only shows an older epoch, which
// holds more up, never less. offline() is a release store: every load of
// the read side happens before it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace keel::datapath {

namespace rcu_detail {
// A full fence (liburcu's cmm_smp_mb()). ThreadSanitizer does not model
// standalone fences and GCC warns about them under -fsanitize=thread
// (-Wtsan, an error with KEEL_WERROR); TSan executes each thread in program
// order, so the store-buffering reordering the fence forbids cannot occur
// under it anyway.
inline void full_fence() noexcept {
#if defined(__SANITIZE_THREAD__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
  std::atomic_thread_fence(std::memory_order_seq_cst);
#if defined(__SANITIZE_THREAD__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}
}  // namespace rcu_detail

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

  // The writer, before the slot's thread starts.
  unsigned register_slot() {
    unsigned s = n_slots_.load(std::memory_order_relaxed);
    slots_[s].seen.store(kOffline, std::memory_order_relaxed);
    n_slots_.store(s + 1, std::memory_order_release);
    return s;
  }

  // --- slot owner (a reader thread) ---
  void quiesce(unsigned slot) noexcept {
    slots_[slot].seen.store(epoch_.load(std::memory_order_acquire), std::memory_order_release);
  }
  // The store must be visible before any load that follows (see the top).
  void online(unsigned slot) noexcept {
    quiesce(slot);
    rcu_detail::full_fence();
  }
  void offline(unsigned slot) noexcept { slots_[slot].seen.store(kOffline, std::memory_order_release); }

  // --- the writer (one at a time) ---
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
    // Pairs with online()'s fence: the unpublication (and the epoch bump)
    // before the slots are read (see the top).
    rcu_detail::full_fence();
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

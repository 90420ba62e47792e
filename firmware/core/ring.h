// Bounded lock-free rings for hand-offs between threads.
//
// MpmcRing<T> is Dmitry Vyukov's bounded multi-producer multi-consumer queue:
// each slot carries a sequence number that says whether it is free for the
// producer of lap N or full for the consumer of lap N. Capacity is a power of
// two fixed at construction (the only allocation); push/pop never allocate,
// never block and fail (return false / 0) when the ring is full / empty, so a
// PMD that can't hand something off counts a drop instead of waiting.
//
// Thread-safety: any number of producers and consumers. Each successful push
// publishes the element with a release store of the slot sequence; the
// consumer's acquire load of the same sequence makes the element visible.
// The bulk forms are loops over the single-element operations: not atomic as
// a group, and they stop at the first full/empty slot.
//
// SpscRing<T> (below) is Lamport's ring for one producer and one consumer at
// a time: no per-slot sequence, no compare-and-swap (a relaxed load, a store
// and, when the cached index of the other side says full/empty, one acquire
// load per operation). Its slots are an anonymous mapping (LazyArray), so a large ring
// costs address space and only the pages it has filled.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/lazy_array.h"

namespace keel {

inline constexpr std::size_t kCacheLine = 64;

template <typename T>
class MpmcRing {
 public:
  explicit MpmcRing(std::size_t min_capacity)
      : mask_(std::bit_ceil(min_capacity < 2 ? std::size_t{2} : min_capacity) - 1),
        slots_(std::make_unique<Slot[]>(mask_ + 1)) {
    for (std::size_t i = 0; i <= mask_; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
  }
  MpmcRing(const MpmcRing&) = delete;
  MpmcRing& operator=(const MpmcRing&) = delete;

  std::size_t capacity() const { return mask_ + 1; }

  bool push(const T& value) noexcept {
    std::size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Slot& s = slots_[pos & mask_];
      // acquire: pairs with the consumer's release that freed this slot.
      std::size_t seq = s.seq.load(std::memory_order_acquire);
      auto diff = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos);
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          s.value = value;
          s.seq.store(pos + 1, std::memory_order_release);  // publish to consumer
          return true;
        }
      } else if (diff < 0) {
        return false;  // full
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  bool pop(T& out) noexcept {
    std::size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Slot& s = slots_[pos & mask_];
      std::size_t seq = s.seq.load(std::memory_order_acquire);  // pairs with push's release
      auto diff = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos + 1);
      if (diff == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          out = s.value;
          s.seq.store(pos + mask_ + 1, std::memory_order_release);  // free for next lap
          return true;
        }
      } else if (diff < 0) {
        return false;  // empty
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

  std::size_t push_bulk(std::span<const T> values) noexcept {
    std::size_t n = 0;
    while (n < values.size() && push(values[n])) ++n;
    return n;
  }

  std::size_t pop_bulk(std::span<T> out) noexcept {
    std::size_t n = 0;
    while (n < out.size() && pop(out[n])) ++n;
    return n;
  }

  // Approximate under concurrency; exact when quiescent. Counts slots a
  // producer has claimed but not yet published, so a pop right after can
  // still find the ring empty: use ready() for what a consumer can take.
  std::size_t size() const noexcept {
    auto t = tail_.load(std::memory_order_acquire);
    auto h = head_.load(std::memory_order_acquire);
    return t >= h ? t - h : 0;
  }

  // Elements published in order from the head: with no other consumer, that
  // many pops succeed. O(n); for tests and diagnostics, not the fast path.
  std::size_t ready() const noexcept {
    const std::size_t h = head_.load(std::memory_order_acquire);
    std::size_t n = 0;
    while (n <= mask_ && slots_[(h + n) & mask_].seq.load(std::memory_order_acquire) == h + n + 1) ++n;
    return n;
  }

 private:
  struct Slot {
    std::atomic<std::size_t> seq;
    T value;
  };
  const std::size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  alignas(kCacheLine) std::atomic<std::size_t> head_{0};
  alignas(kCacheLine) std::atomic<std::size_t> tail_{0};
};

// One producer and one consumer at a time (either may be replaced by another
// thread, provided the handover orders the two: a thread join/start, a
// mutex). T: trivially copyable. Capacity: a power of two fixed at
// construction; push fails when full, pop when empty; nothing allocates after
// construction.
//
// Thread-safety: the producer's release store of tail_ publishes the slot it
// wrote; the consumer's acquire load of tail_ sees it. The consumer's release
// store of head_ frees a slot; the producer's acquire load of head_ (only
// when its cached copy says full) orders its next write after the read.
// head_cache_ is the producer's, tail_cache_ the consumer's.
template <typename T>
class SpscRing {
 public:
  explicit SpscRing(std::size_t min_capacity)
      : mask_(std::bit_ceil(min_capacity < 2 ? std::size_t{2} : min_capacity) - 1),
        slots_(mask_ + 1) {}  // an anonymous mapping: untouched pages until used
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  std::size_t capacity() const { return mask_ + 1; }

  bool push(const T& value) noexcept {
    const std::size_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_cache_ > mask_) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (t - head_cache_ > mask_) return false;  // full
    }
    slots_[t & mask_] = value;
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }
  bool pop(T& out) noexcept {
    const std::size_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_cache_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (h == tail_cache_) return false;  // empty
    }
    out = slots_[h & mask_];
    head_.store(h + 1, std::memory_order_release);
    return true;
  }
  // Approximate under concurrency; exact when quiescent.
  std::size_t size() const noexcept {
    const auto t = tail_.load(std::memory_order_acquire);
    const auto h = head_.load(std::memory_order_acquire);
    return t >= h ? t - h : 0;
  }

 private:
  const std::size_t mask_;
  LazyArray<T> slots_;
  alignas(kCacheLine) std::atomic<std::size_t> head_{0};
  std::size_t tail_cache_ = 0;  // consumer
  alignas(kCacheLine) std::atomic<std::size_t> tail_{0};
  std::size_t head_cache_ = 0;  // producer
};

}  // namespace keel

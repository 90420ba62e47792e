// sim::RxPacer — when a paced software source (the sample port) has packets
// for its reader, modelled on a NIC's rx ring.
//
// A source sending `pps` packets per second has, at time t since it opened,
// floor(t * pps / 1e9) packets due. What is due and not yet taken waits in
// an rx ring of kRxRing descriptors, as on a NIC: a poller that was
// descheduled finds up to kRxRing packets waiting and takes them in bursts
// (so the long-run rate is pps whatever the poller's timing), and what
// arrives while the ring is full is dropped and counted, as a NIC counts
// imissed. pps = 0 means "as fast as asked": every request is met in full.
//
// The pacer does arithmetic only: the caller passes the clock reading, so
// its behaviour is a function of the times it is given (tests give their
// own; the port passes hal::now_ns(), one read per burst).
//
// Thread-safety: none; one instance belongs to the thread polling its queue.
#pragma once

#include <algorithm>
#include <cstdint>

namespace keel::hal::sim {

class RxPacer {
 public:
  // Descriptors of the modelled rx ring (DPDK's common default ring size).
  static constexpr uint64_t kRxRing = 1024;

  RxPacer(uint64_t pps, uint64_t start_ns) : pps_(pps), start_ns_(start_ns) {}

  // Packets the reader may take at now_ns, at most `want`. Packets that no
  // longer fit the ring are counted in dropped() first.
  uint64_t ready(uint64_t now_ns, uint64_t want) noexcept {
    if (pps_ == 0) return want;
    const uint64_t due = due_at(now_ns);
    if (due <= taken_ + dropped_) return 0;
    const uint64_t waiting = due - taken_ - dropped_;
    if (waiting > kRxRing) dropped_ += waiting - kRxRing;
    return std::min(want, std::min(waiting, kRxRing));
  }

  // The reader took n packets (n <= the last ready(); fewer if it ran out of
  // buffers: the rest stay in the ring).
  void took(uint64_t n) noexcept { taken_ += n; }

  // Packets due at now_ns since the start (0 for an unpaced source).
  uint64_t due_at(uint64_t now_ns) const noexcept {
    if (pps_ == 0 || now_ns <= start_ns_) return 0;
    // 128-bit: elapsed ns * pps overflows 64 bits after minutes at Mpps.
    return static_cast<uint64_t>((unsigned __int128)(now_ns - start_ns_) * pps_ / 1'000'000'000u);
  }

  uint64_t taken() const noexcept { return taken_; }
  uint64_t dropped() const noexcept { return dropped_; }

 private:
  const uint64_t pps_;
  const uint64_t start_ns_;
  uint64_t taken_ = 0;    // packets handed to the reader
  uint64_t dropped_ = 0;  // packets that found the ring full
};

}  // namespace keel::hal::sim

// sim::Pool — the software NIC's packet buffers.
//
// One allocation made up front holds `buffers` fixed-size buffers, each laid
// out as
//
//   [ hal::Packet (64 B) | headroom (kHeadroom) | frame (kBufferSize) ]
//
// so a buffer is 64 + 128 + 2048 = 2240 bytes, a whole number of cache lines,
// and the descriptor sits on the line just before the bytes the parser reads
// first. The free list is a keel::MpmcRing<Packet*> sized to hold every
// buffer: alloc is a pop, free is a push, neither locks, allocates nor makes
// a syscall, and a push can never find the ring full (short of freeing a
// packet twice, which is a bug the ring does not detect).
//
// Life cycle: create() (may fail: no memory), then alloc/free from any
// thread, then destruction once every buffer is back. Ports and the backend
// hold the pool by shared_ptr so whichever is destroyed last frees it; a
// packet still out at that point dangles — release every packet before
// dropping the last port and the backend. hal::release() finds the pool
// through Packet::owner().
//
// Thread-safety: alloc/alloc_burst/free from any number of threads at once
// (the ring's release/acquire on each slot publishes the pointer; the bytes
// of a freed packet were written by the freeing thread before its push).
// available() is approximate while others allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/ring.h"
#include "core/status.h"
#include "keel/hal/packet.h"

namespace keel::hal::sim {

class Pool {
 public:
  static constexpr uint32_t kBufLen = kHeadroom + kBufferSize;  // bytes after the descriptor
  static constexpr size_t kStride = sizeof(Packet) + kBufLen;
  static_assert(kStride % 64 == 0, "buffers must start on a cache line: the descriptor is alignas(64)");

  // Allocates `buffers` buffers (zero-filled) and puts them all on the free list.
  static Result<std::shared_ptr<Pool>> create(unsigned buffers);

  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // One empty packet (len 0, data at kHeadroom), or nullptr when none is free.
  Packet* alloc() noexcept {
    Packet* p;
    if (!free_.pop(p)) return nullptr;
    init(p);
    return p;
  }

  // Up to out.size() empty packets; returns how many (fewer when the pool runs out).
  unsigned alloc_burst(std::span<Packet*> out) noexcept {
    auto n = static_cast<unsigned>(free_.pop_bulk(out));
    for (unsigned i = 0; i < n; ++i) init(out[i]);
    return n;
  }

  // Returns a packet of this pool to the free list.
  void free(Packet* p) noexcept { (void)free_.push(p); }

  unsigned buffers() const { return buffers_; }
  size_t available() const noexcept { return free_.size(); }

  // Whether p points at a descriptor of this pool (for debug checks and tests).
  bool owns(const Packet* p) const noexcept;

 private:
  Pool(unsigned buffers, uint8_t* mem);

  void init(Packet* p) noexcept {
    uint8_t* buf = reinterpret_cast<uint8_t*>(p) + sizeof(Packet);
    p->reset(BufferSource::sim, this, buf, kBufLen, buf + kHeadroom, 0);
  }

  const unsigned buffers_;
  uint8_t* const mem_;  // buffers_ * kStride bytes, 64-byte aligned
  MpmcRing<Packet*> free_;
};

}  // namespace keel::hal::sim

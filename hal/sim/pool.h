// sim::Pool — the software NIC's packet buffers.
//
// One allocation made up front holds two classes of fixed-size buffers:
//
//   standard (`buffers` of them):  [ hal::Packet (64 B) | headroom (kHeadroom) | frame (kBufferSize) ]
//   jumbo (`jumbo` of them):       [ hal::Packet (64 B) | headroom (kHeadroom) | frame (kJumboBufferSize) ]
//
// A standard buffer is 64 + 128 + 2048 = 2240 bytes, a jumbo one 64 + 128 +
// 9280 = 9472 bytes; both are whole numbers of cache lines, and the
// descriptor sits on the line just before the bytes the parser reads first.
//
// Why two classes (the MTU decision): a frame longer than a standard
// buffer exists only on ports whose mtu_request is above 2030
// (kStandardBufferMtu), and MTUs are set by configuration after the pool is
// made and may change at run time. Sizing every buffer for the largest MTU
// would cost 8192 x 9472 B = 74 MiB for the default pool whatever the
// ports; multi-buffer (chained) frames would make every datapath stage
// handle discontiguous bytes. Instead a fixed jumbo class takes the frames
// that do not fit a standard buffer: the default 1024 jumbo buffers cost
// 9.25 MiB on top of the standard class's 17.5 MiB, and only ports that
// carry jumbo frames use them. Whoever knows a frame's length asks for a
// buffer that holds it (alloc(len), alloc_burst(out, len)): the pcap port per
// record, the TAP port from its MTU, the datapath's copies from the longest
// frame of the batch. A request over kJumboBufferSize gets nothing.
//
// Each class's free list is a keel::MpmcRing<Packet*> sized to hold every
// buffer of the class: alloc is a pop, free is a push (to the class the
// address says), neither locks, allocates nor makes a syscall, and a push
// can never find the ring full (short of freeing a packet twice, which is a
// bug the ring does not detect).
//
// Per-thread caches (as DPDK's mempool cache): a thread that will
// allocate and free many standard buffers — every PMD, through the sim
// backend's thread_init() — attaches a cache of up to kCacheMax buffers,
// which alloc and free use first: a PMD that receives into buffers and
// frees them when it sends (or drops) touches the shared ring only once per
// kCacheBulk buffers it runs short of or over, instead of once per packet
// (each a compare-and-swap on a cache line every PMD writes: with two PMDs
// that ring was the bottleneck). detach_cache() gives the cached buffers
// back; a thread must detach before it ends (thread_exit()). Jumbo buffers
// are not cached. available() does not count cached buffers.
//
// Fault injection (core/fault.h, `debug fault pool-exhausted`): while the
// point is armed every alloc and alloc_burst fails as if the pool were
// empty (each call one relaxed load of a false flag otherwise), so the
// ports and the datapath take the paths they take when the buffers have
// run out: a replay waits, a live port's frames overflow its rx ring
// (rx_dropped), a copy is not made (counted by the executor).
//
// Life cycle: create() (may fail: no memory), then alloc/free from any
// thread, then destruction once every buffer is back. Ports and the backend
// hold the pool by shared_ptr so whichever is destroyed last frees it; a
// packet still out at that point dangles — release every packet before
// dropping the last port and the backend. hal::release() finds the pool
// through Packet::owner().
//
// Thread-safety: alloc/alloc_burst/free from any number of threads at once
// (a thread's cache is thread_local, its own alone)
// (the ring's release/acquire on each slot publishes the pointer; the bytes
// of a freed packet were written by the freeing thread before its push).
// available() is approximate while others allocate.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/fault.h"
#include "core/ring.h"
#include "core/status.h"
#include "keel/hal/packet.h"

namespace keel::hal::sim {

class Pool;
// A thread's buffer cache (see the top; at most one per thread).
inline constexpr unsigned kPoolCacheMax = 512;  // buffers a thread may hold
struct PoolCache {
  Pool* pool = nullptr;
  unsigned n = 0;
  Packet* objs[kPoolCacheMax];
};
inline thread_local PoolCache pool_cache;

class Pool {
 public:
  static constexpr uint32_t kBufLen = kHeadroom + kBufferSize;  // bytes after the descriptor
  static constexpr size_t kStride = sizeof(Packet) + kBufLen;
  static constexpr uint32_t kJumboBufLen = kHeadroom + kJumboBufferSize;
  static constexpr size_t kJumboStride = sizeof(Packet) + kJumboBufLen;
  static_assert(kStride % 64 == 0, "buffers must start on a cache line: the descriptor is alignas(64)");
  static_assert(kJumboStride % 64 == 0, "jumbo buffers follow the standard ones and must stay aligned");
  static constexpr unsigned kDefaultJumboBuffers = 1024;

  // Allocates `buffers` standard and `jumbo` jumbo buffers (zero-filled)
  // and puts them all on the free lists. `jumbo` may be 0 (no frame over
  // kBufferSize can then be held).
  static Result<std::shared_ptr<Pool>> create(unsigned buffers, unsigned jumbo = kDefaultJumboBuffers);

  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // One empty packet (len 0, data at kHeadroom) whose tailroom holds `len`
  // bytes, or nullptr when none of that class is free (or len > kJumboBufferSize).
  Packet* alloc(uint32_t len = 0) noexcept {
    if (fault::hit(fault::Point::pool_exhausted)) [[unlikely]]
      return nullptr;
    Packet* p;
    if (len <= kBufferSize) {
      Cache& c = cache();
      if (c.pool == this) {
        if (c.n == 0 && !refill(c)) return nullptr;
        p = c.objs[--c.n];
      } else if (!free_.pop(p)) {
        return nullptr;
      }
      init(p, kBufLen);
    } else {
      if (len > kJumboBufferSize || !jumbo_free_.pop(p)) return nullptr;
      init(p, kJumboBufLen);
    }
    return p;
  }

  // Up to out.size() empty packets that hold `len` bytes each; returns how
  // many (fewer when that class runs out).
  unsigned alloc_burst(std::span<Packet*> out, uint32_t len = 0) noexcept {
    if (fault::hit(fault::Point::pool_exhausted)) [[unlikely]]
      return 0;
    if (len > kBufferSize) {
      if (len > kJumboBufferSize) return 0;
      auto n = static_cast<unsigned>(jumbo_free_.pop_bulk(out));
      for (unsigned i = 0; i < n; ++i) init(out[i], kJumboBufLen);
      return n;
    }
    unsigned n = 0;
    Cache& c = cache();
    if (c.pool == this) {
      while (n < out.size() && (c.n != 0 || refill(c))) {
        const unsigned take = std::min<unsigned>(c.n, static_cast<unsigned>(out.size()) - n);
        for (unsigned i = 0; i < take; ++i) out[n + i] = c.objs[c.n - 1 - i];
        c.n -= take;
        n += take;
      }
    } else {
      n = static_cast<unsigned>(free_.pop_bulk(out));
    }
    for (unsigned i = 0; i < n; ++i) init(out[i], kBufLen);
    return n;
  }

  // Returns a packet of this pool to its class's free list.
  void free(Packet* p) noexcept {
    if (reinterpret_cast<const uint8_t*>(p) >= jumbo_mem_) {
      (void)jumbo_free_.push(p);
      return;
    }
    Cache& c = cache();
    if (c.pool != this) {
      (void)free_.push(p);
      return;
    }
    if (c.n == kCacheMax) spill(c);
    c.objs[c.n++] = p;
  }

  // The calling thread's cache (see the top): attach before its first
  // alloc, detach (the buffers go back) before it ends. A thread has at
  // most one cache: attaching to another pool detaches the first.
  void attach_cache() noexcept;
  void detach_cache() noexcept;
  static constexpr unsigned kCacheMax = kPoolCacheMax;
  static constexpr unsigned kCacheBulk = kPoolCacheMax / 2;  // taken from / given to the ring at once

  unsigned buffers() const { return buffers_; }
  unsigned jumbo_buffers() const { return jumbo_; }
  size_t available() const noexcept { return free_.size(); }
  size_t jumbo_available() const noexcept { return jumbo_free_.size(); }

  // Whether p points at a descriptor of this pool (for debug checks and tests).
  bool owns(const Packet* p) const noexcept;

 private:
  Pool(unsigned buffers, unsigned jumbo, uint8_t* mem);

  using Cache = PoolCache;
  static Cache& cache() noexcept { return pool_cache; }
  // Takes up to kCacheBulk buffers from the ring; false when none was free.
  bool refill(Cache& c) noexcept {
    c.n = static_cast<unsigned>(free_.pop_bulk(std::span<Packet*>(c.objs, kCacheBulk)));
    return c.n != 0;
  }
  // Gives the oldest kCacheBulk cached buffers back to the ring.
  void spill(Cache& c) noexcept {
    (void)free_.push_bulk(std::span<Packet* const>(c.objs, kCacheBulk));
    std::copy(c.objs + kCacheBulk, c.objs + c.n, c.objs);
    c.n -= kCacheBulk;
  }

  void init(Packet* p, uint32_t buf_len) noexcept {
    uint8_t* buf = reinterpret_cast<uint8_t*>(p) + sizeof(Packet);
    p->reset(BufferSource::sim, this, buf, buf_len, buf + kHeadroom, 0);
  }

  const unsigned buffers_;
  const unsigned jumbo_;
  uint8_t* const mem_;        // buffers_ * kStride + jumbo_ * kJumboStride bytes, 64-byte aligned
  uint8_t* const jumbo_mem_;  // mem_ + buffers_ * kStride: the first jumbo buffer
  MpmcRing<Packet*> free_;
  MpmcRing<Packet*> jumbo_free_;
};

}  // namespace keel::hal::sim

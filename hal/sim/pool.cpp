// sim::Pool (pool.h): the one up-front allocation and sim::release().
//
// Thread-safety: create() and the destructor run on the control thread;
// release() is called from any thread (see pool.h).
#include "pool.h"

#include <cstring>
#include <new>
#include <string>

namespace keel::hal::sim {

namespace {
constexpr std::align_val_t kAlign{64};
}

Pool::Pool(unsigned buffers, unsigned jumbo, uint8_t* mem)
    : buffers_(buffers),
      jumbo_(jumbo),
      mem_(mem),
      jumbo_mem_(mem + size_t{buffers} * kStride),
      free_(buffers),
      jumbo_free_(jumbo) {
  for (unsigned i = 0; i < buffers_; ++i) {
    Packet* p = new (mem_ + size_t{i} * kStride) Packet();
    (void)free_.push(p);  // capacity >= buffers_: cannot fail
  }
  for (unsigned i = 0; i < jumbo_; ++i) {
    Packet* p = new (jumbo_mem_ + size_t{i} * kJumboStride) Packet();
    (void)jumbo_free_.push(p);  // capacity >= jumbo_: cannot fail
  }
}

Pool::~Pool() {
  // Packet is trivially destructible; the storage goes back in one piece.
  ::operator delete[](mem_, kAlign);
}

Result<std::shared_ptr<Pool>> Pool::create(unsigned buffers, unsigned jumbo) {
  if (buffers == 0) return invalid("sim pool: needs at least one buffer");
  const size_t bytes = size_t{buffers} * kStride + size_t{jumbo} * kJumboStride;
  auto* mem = static_cast<uint8_t*>(::operator new[](bytes, kAlign, std::nothrow));
  if (!mem) {
    return error(Errc::resource_exhausted, "sim pool: cannot allocate " + std::to_string(buffers) + " + " +
                                               std::to_string(jumbo) + " jumbo buffers (" +
                                               std::to_string(bytes >> 20) + " MiB)");
  }
  std::memset(mem, 0, bytes);
  // The free-list ring allocates too; setup-time code, so a failure there is
  // caught and reported like the first.
  try {
    return std::shared_ptr<Pool>(new Pool(buffers, jumbo, mem));
  } catch (const std::bad_alloc&) {
    ::operator delete[](mem, kAlign);
    return error(Errc::resource_exhausted, "sim pool: cannot allocate the free list");
  }
}

void Pool::attach_cache() noexcept {
  Cache& c = cache();
  if (c.pool == this) return;
  if (c.pool) c.pool->detach_cache();
  c.pool = this;
  c.n = 0;
}

void Pool::detach_cache() noexcept {
  Cache& c = cache();
  if (c.pool != this) return;
  (void)free_.push_bulk(std::span<Packet* const>(c.objs, c.n));  // the ring holds every buffer: never full
  c.n = 0;
  c.pool = nullptr;
}

bool Pool::owns(const Packet* p) const noexcept {
  auto a = reinterpret_cast<uintptr_t>(p);
  auto base = reinterpret_cast<uintptr_t>(mem_);
  if (a >= base && a < base + size_t{buffers_} * kStride) return (a - base) % kStride == 0;
  auto jbase = reinterpret_cast<uintptr_t>(jumbo_mem_);
  return a >= jbase && a < jbase + size_t{jumbo_} * kJumboStride && (a - jbase) % kJumboStride == 0;
}

// Declared in keel/hal/packet.h: hal::release() calls this for sim buffers.
void release(Packet* p) noexcept { static_cast<Pool*>(p->owner())->free(p); }

}  // namespace keel::hal::sim

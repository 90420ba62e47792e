// SlabPool: see slab_pool.h.
#include "core/slab_pool.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define KEEL_SLAB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KEEL_SLAB_ASAN 1
#endif
#endif

namespace keel {

namespace {
#ifdef KEEL_SLAB_ASAN
constexpr bool kPlainNew = true;  // every object ASan's (slab_pool.h)
#else
constexpr bool kPlainNew = false;
#endif

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// 2 MiB of address space aligned to 2 MiB (huge-page eligible).
void* map_slab() {
  const size_t want = SlabPool::kSlabBytes * 2;
  void* p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = round_up(base, SlabPool::kSlabBytes);
  if (aligned > base) ::munmap(p, aligned - base);
  const uintptr_t tail = aligned + SlabPool::kSlabBytes;
  if (base + want > tail) ::munmap(reinterpret_cast<void*>(tail), base + want - tail);
  void* slab = reinterpret_cast<void*>(aligned);
  (void)::madvise(slab, SlabPool::kSlabBytes, MADV_HUGEPAGE);  // a hint: fine if refused
  return slab;
}
}  // namespace

SlabPool::SlabPool(size_t size, size_t align)
    : size_(round_up(size < sizeof(FreeObj) ? sizeof(FreeObj) : size,
                     align < alignof(FreeObj) ? alignof(FreeObj) : align)),
      align_(align < alignof(FreeObj) ? alignof(FreeObj) : align) {}

SlabPool::~SlabPool() {
  for (void* s : slabs_) ::munmap(s, kSlabBytes);
}

void* SlabPool::alloc() {
  if constexpr (kPlainNew) {
    void* p = ::operator new(size_, std::align_val_t{align_});
    in_use_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(size_, std::memory_order_relaxed);
    return p;
  }
  std::lock_guard lock(mu_);
  if (FreeObj* f = free_) {
    free_ = f->next;
    in_use_.fetch_add(1, std::memory_order_relaxed);
    return f;
  }
  if (static_cast<size_t>(end_ - cur_) < size_) {
    slabs_.reserve(slabs_.size() + 1);  // before the mapping: nothing to undo if this throws
    void* s = map_slab();
    slabs_.push_back(s);
    cur_ = static_cast<char*>(s);
    end_ = cur_ + kSlabBytes;
    bytes_.fetch_add(kSlabBytes, std::memory_order_relaxed);
  }
  void* p = cur_;
  cur_ += size_;
  in_use_.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void SlabPool::release(void* p) noexcept {
  if (!p) return;
  if constexpr (kPlainNew) {
    ::operator delete(p, std::align_val_t{align_});
    in_use_.fetch_sub(1, std::memory_order_relaxed);
    bytes_.fetch_sub(size_, std::memory_order_relaxed);
    return;
  }
  std::lock_guard lock(mu_);
  auto* f = static_cast<FreeObj*>(p);
  f->next = free_;
  free_ = f;
  in_use_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace keel

// SlabAllocator — a standard allocator whose single objects come from a
// SlabPool (core/slab_pool.h), one pool per element type for the process:
// the nodes of a node-based container (the ukey table's hash nodes), so
// that inserting a million of them neither searches malloc's bins nor faults
// a page every few nodes. Arrays (a hash table's buckets) come from
// std::allocator.
//
// Thread-safety: as SlabPool (any thread); the allocator itself is
// stateless, every instance equal.
#pragma once

#include <cstddef>
#include <memory>

#include "core/slab_pool.h"

namespace keel {

template <typename T>
class SlabAllocator {
 public:
  using value_type = T;

  SlabAllocator() noexcept = default;
  template <typename U>
  SlabAllocator(const SlabAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor): rebinding, as std::allocator

  T* allocate(size_t n) {
    if (n == 1) return static_cast<T*>(pool().alloc());
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n == 1)
      pool().release(p);
    else
      std::allocator<T>().deallocate(p, n);
  }

  // Never destroyed: a container may go with another static's destructor.
  static SlabPool& pool() {
    // T may be a pointer (a container's bucket type): its size is the object's.
    static SlabPool* const p = new SlabPool(sizeof(T), alignof(T));  // NOLINT(bugprone-sizeof-expression): see above
    return *p;
  }

  template <typename U>
  bool operator==(const SlabAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace keel

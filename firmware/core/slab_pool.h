// SlabPool — objects of one size carved from 2 MiB slabs and reused through a
// free list: the storage of what the slow path creates per datapath flow
// (megaflows, ukeys), so that a miss storm that sets up a million flows
// neither searches malloc's bins per flow nor takes a page fault every one
// or two flows.
//
// Why: in flow-setup (1M new flows) the upcall handler spent half its time
// in malloc: a quarter in `_int_malloc`/`_int_memalign` walking bins, a
// quarter in page faults growing its arena 4 KiB at a time (perf,
// tests/bench/RESULTS.md "Slab pools for megaflows and ukeys"). A slab is an
// anonymous mapping aligned to 2 MiB and marked MADV_HUGEPAGE, so where the
// kernel has transparent huge pages (the `madvise` mode, Debian's default)
// one fault backs a whole slab; elsewhere it faults 4 KiB pages as any
// mapping would. Freed objects are reused first, newest first; slabs go
// back to the system only with the pool (the pools below live as long as
// the process, as a malloc arena does).
//
// Cost: alloc/release take the pool's mutex (uncontended in practice: a
// handler allocates, the control thread and revalidators free). Never on
// the fast path: PMDs neither build nor free flows (flow_table.h).
//
// Under AddressSanitizer every object is an ordinary operator new/delete,
// so ASan keeps its use-after-free quarantine and LeakSanitizer keeps
// seeing (and scanning) each object; the slab code runs in the other
// builds (unit.slab_pool).
//
// Thread-safety: alloc() and release() from any thread (mu_). bytes() and
// in_use() are relaxed reads.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

namespace keel {

class SlabPool {
 public:
  static constexpr size_t kSlabBytes = size_t{2} << 20;

  // Objects of `size` bytes aligned to `align` (a power of two, at most 4096).
  SlabPool(size_t size, size_t align);
  ~SlabPool();
  SlabPool(const SlabPool&) = delete;
  SlabPool& operator=(const SlabPool&) = delete;

  // Uninitialised storage for one object; throws std::bad_alloc when the
  // system has no address space left (as operator new).
  void* alloc();
  void release(void* p) noexcept;

  size_t object_size() const { return size_; }
  // Memory taken from the system so far (slabs; under ASan: objects' bytes),
  // and objects handed out now.
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  size_t in_use() const { return in_use_.load(std::memory_order_relaxed); }

 private:
  struct FreeObj {
    FreeObj* next;
  };
  const size_t size_;
  const size_t align_;
  std::mutex mu_;
  FreeObj* free_ = nullptr;  // under mu_
  char* cur_ = nullptr;      // the newest slab's part never handed out (under mu_)
  char* end_ = nullptr;      // under mu_
  std::vector<void*> slabs_;  // under mu_
  std::atomic<size_t> bytes_{0}, in_use_{0};
};

}  // namespace keel

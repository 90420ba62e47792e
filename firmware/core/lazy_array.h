// LazyArray — a fixed array of n elements that start as all-zero bytes, in
// an anonymous private mapping: the kernel commits its pages one by one on
// first write, so an array sized for its largest use (a PMD's flow table
// slots for a million flows) costs its address space only until it is
// used, and what is used costs the pages it touched. For plain types whose
// all-zero bytes are their empty value (pointers, integers, aggregates of
// them); an element shared between threads is accessed through
// std::atomic_ref.
//
// Thread-safety: as a plain array. Construction and destruction (mmap,
// munmap) are the owner's, never on a fast path.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace keel {

template <typename T>
class LazyArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "all-zero bytes must be a T, and nothing to destroy");

 public:
  LazyArray() = default;
  // Throws std::bad_alloc when the address space can't be had.
  explicit LazyArray(size_t n) : n_(n) {
    if (!n_) return;
    void* p = ::mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    p_ = static_cast<T*>(p);
  }
  ~LazyArray() { release(); }
  LazyArray(LazyArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  LazyArray& operator=(LazyArray&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  LazyArray(const LazyArray&) = delete;
  LazyArray& operator=(const LazyArray&) = delete;

  T& operator[](size_t i) noexcept { return p_[i]; }
  const T& operator[](size_t i) const noexcept { return p_[i]; }
  T* data() noexcept { return p_; }
  const T* data() const noexcept { return p_; }
  size_t size() const noexcept { return n_; }

 private:
  // T may itself be a pointer (an array of pointers): its size is the element size wanted.
  size_t bytes() const { return n_ * sizeof(T); }  // NOLINT(bugprone-sizeof-expression): see above
  void release() noexcept {
    if (p_) ::munmap(p_, bytes());
    p_ = nullptr;
    n_ = 0;
  }

  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace keel

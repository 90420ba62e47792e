// CPU and clock: a cheap cycle counter, wall time, and thread pinning.
//
// cycles() is the TSC on x86-64 and CNTVCT_EL0 (the generic timer, which
// ticks at cntfrq, not the core clock) on AArch64; cycles_per_second() says
// how fast it ticks. Both are safe to call from any thread; cycles() is a
// single instruction and meant for the PMD loop's busy/idle accounting.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace keel::hal {

inline uint64_t cycles() noexcept {
#if defined(__x86_64__)
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (uint64_t{hi} << 32) | lo;
#elif defined(__aarch64__)
  uint64_t v;
  __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
#error "keel supports x86-64 and AArch64"
#endif
}

// A spin-wait hint (PAUSE / YIELD): in a loop that waits for another core
// to release a lock, so the waiter yields the pipeline to its sibling
// thread and does not flood the lock's cache line.
inline void cpu_relax() noexcept {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield" ::: "memory");
#endif
}

// Ticks of cycles() per second (measured once, then cached).
uint64_t cycles_per_second();

// Monotonic nanoseconds.
uint64_t now_ns() noexcept;

// Pins the calling thread to one core; fails with a message if the core does
// not exist or is not in the process's allowed set.
Status pin_current_thread(unsigned core);

// Lets the calling thread run on every core the process could use when it
// started (undoes pinning inherited from a pinned creator, e.g. DPDK's EAL
// pins the main thread to its main lcore).
Status unpin_current_thread();

// Names the calling thread (visible in top/gdb); truncated to 15 characters.
void name_current_thread(const std::string& name);

unsigned online_cores();

// The CPU the calling thread runs on now (sched_getcpu(): glibc reads it
// from rseq or the vDSO, normally without a system call), or -1 if the
// kernel can't say. A snapshot: an unpinned thread may move right after.
int current_cpu() noexcept;

}  // namespace keel::hal

// CPU and clock helpers (cpu.h): the cycle counter's rate, monotonic time,
// thread pinning and naming.
//
// cycles_per_second(): on AArch64 the generic timer publishes its frequency
// in CNTFRQ_EL0, so it is read, not measured. On x86-64 the TSC rate is
// measured once against CLOCK_MONOTONIC over about 20 ms (invariant TSC is
// assumed, as DPDK does), each end a TSC read bracketed by two clock reads
// (retried when preempted); the first caller pays the 20 ms, everyone after
// reads a cached value. Call it at setup time, not from a PMD's first burst.
//
// Thread-safety: every function may be called from any thread. The
// calibration is a function-local static, whose initialisation C++
// guarantees to run once even when threads race to it.
#include "keel/hal/cpu.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "core/sys_error.h"

namespace keel::hal {

namespace {

uint64_t mono_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no syscall
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

#if defined(__x86_64__)
// A TSC reading and the monotonic time it was taken at, to within `spread`
// ns: the two clock reads around it. A read the scheduler preempted has a
// wide spread and is tried again; the tightest of a few tries is kept, so a
// loaded machine costs tries, not accuracy.
struct TscSample {
  uint64_t ns, tsc, spread;
};
TscSample tsc_sample() {
  TscSample best{0, 0, UINT64_MAX};
  for (int i = 0; i < 1000 && best.spread > 1000; ++i) {
    const uint64_t a = mono_ns();
    const uint64_t c = cycles();
    const uint64_t b = mono_ns();
    if (b - a < best.spread) best = {a + (b - a) / 2, c, b - a};
  }
  return best;
}

uint64_t calibrate_tsc() {
  constexpr uint64_t kWindowNs = 20'000'000;  // 20 ms: with ~1 us spreads, error ~0.01%
  const TscSample s0 = tsc_sample();
  for (uint64_t t; (t = mono_ns()) - s0.ns < kWindowNs;) {
    timespec ts{0, static_cast<long>(kWindowNs - (t - s0.ns))};
    nanosleep(&ts, nullptr);  // may wake early (signal); the loop re-checks
  }
  const TscSample s1 = tsc_sample();
  // (tsc1 - tsc0) ticks in (ns1 - ns0) ns; 128-bit so a fast TSC cannot overflow.
  return static_cast<uint64_t>((unsigned __int128)(s1.tsc - s0.tsc) * 1'000'000'000u / (s1.ns - s0.ns));
}
#endif

// "0-3,8,10-11": the cores of a set, for messages.
std::string format_cpuset(const cpu_set_t& set) {
  std::string out;
  int run_start = -1;
  for (int c = 0; c <= CPU_SETSIZE; ++c) {
    bool in = c < CPU_SETSIZE && CPU_ISSET(c, &set);
    if (in && run_start < 0) run_start = c;
    if (!in && run_start >= 0) {
      if (!out.empty()) out += ',';
      out += std::to_string(run_start);
      if (c - 1 > run_start) out += '-' + std::to_string(c - 1);
      run_start = -1;
    }
  }
  return out.empty() ? "none" : out;
}

// The process's affinity before anything (DPDK's EAL) pinned the main thread:
// captured during static initialisation, i.e. before main().
struct InitialAffinity {
  cpu_set_t set;
  bool ok;
  InitialAffinity() { ok = sched_getaffinity(0, sizeof(set), &set) == 0; }
};
const InitialAffinity g_initial_affinity;

}  // namespace

Status unpin_current_thread() {
  if (!g_initial_affinity.ok) return {};
  int rc = pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t), &g_initial_affinity.set);
  if (rc != 0) return error(Errc::internal, "unpinning thread: " + errno_text(rc));
  return {};
}

uint64_t cycles_per_second() {
#if defined(__aarch64__)
  static const uint64_t hz = [] {
    uint64_t v;
    __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(v));
    return v;
  }();
#else
  static const uint64_t hz = calibrate_tsc();
#endif
  return hz;
}

uint64_t now_ns() noexcept { return mono_ns(); }

int current_cpu() noexcept { return sched_getcpu(); }

Status pin_current_thread(unsigned core) {
  long configured = sysconf(_SC_NPROCESSORS_CONF);
  if (core >= CPU_SETSIZE || (configured > 0 && core >= static_cast<unsigned long>(configured))) {
    return error(Errc::invalid_argument, "core " + std::to_string(core) +
                                             " does not exist (this machine has " +
                                             std::to_string(configured > 0 ? configured : 0) + " cores)");
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  // The kernel checks the core against the cpuset the process may use (not
  // against this thread's current mask), which is the check we want.
  int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc == 0) return {};
  if (rc == EINVAL) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    std::string hint;
    if (sched_getaffinity(getpid(), sizeof(allowed), &allowed) == 0) {
      hint = " (allowed: " + format_cpuset(allowed) + ")";
    }
    return error(Errc::invalid_argument,
                 "core " + std::to_string(core) + " is not in this process's allowed cores" + hint);
  }
  return error(Errc::internal, "pinning to core " + std::to_string(core) + ": " + errno_text(rc));
}

void name_current_thread(const std::string& name) {
  // The kernel keeps 15 characters and a NUL; longer names fail with ERANGE.
  std::string n = name.substr(0, 15);
  (void)pthread_setname_np(pthread_self(), n.c_str());
}

unsigned online_cores() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

}  // namespace keel::hal

// hal cpu/clock helpers: the cycle counter's rate agrees with the monotonic
// clock, pinning works on an allowed core and fails clearly on a missing one.
#include <doctest/doctest.h>
#include <sched.h>

#include <chrono>
#include <string>
#include <thread>

#include "keel/hal/cpu.h"

using namespace keel::hal;

TEST_CASE("cpu helpers") {
  uint64_t hz = cycles_per_second();
  CHECK(hz >= 1'000'000);            // >= 1 MHz (the aarch64 generic timer may be slow)
  CHECK(hz <= 10'000'000'000ull);    // <= 10 GHz
  CHECK(cycles_per_second() == hz);  // cached
  // Each cycle read is bracketed by two clock reads, so the ticks between the
  // two cycle reads took between (t1a - t0b) and (t1b - t0a) ns: the rate
  // lies in [lo, hi] however long the scheduler kept this thread away, and a
  // right hz must fall inside (within 10 %).
  const uint64_t t0a = now_ns(), c0 = cycles(), t0b = now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const uint64_t t1a = now_ns(), c1 = cycles(), t1b = now_ns();
  REQUIRE(t1a - t0b >= 20'000'000);
  const double lo = double(c1 - c0) * 1e9 / double(t1b - t0a);
  const double hi = double(c1 - c0) * 1e9 / double(t1a - t0b);
  CHECK(lo <= 1.1 * double(hz));
  CHECK(hi >= 0.9 * double(hz));

  CHECK(online_cores() >= 1);
  keel::Status s = pin_current_thread(100000);
  CHECK_FALSE(s.ok());
  CHECK(s.message().find("core 100000 does not exist") != std::string::npos);
  name_current_thread("keel-test-thread-with-a-long-name");  // truncated, not an error
}

TEST_CASE("pinning a thread to an allowed core") {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  int core = -1;
  for (int c = 0; c < CPU_SETSIZE && core < 0; ++c)
    if (CPU_ISSET(c, &allowed)) core = c;
  REQUIRE(core >= 0);
  std::thread t([&] {
    keel::Status s = pin_current_thread(static_cast<unsigned>(core));
    CHECK_MESSAGE(s.ok(), s.message());
    if (s.ok()) CHECK(sched_getcpu() == core);
  });
  t.join();
}

// Waiting for another thread in a unit test without depending on the load.
//
// A test that waits for a PMD, a handler or the kernel asks "did it happen
// yet?" every millisecond until it did, or until a deadline so far away
// (kPatience) that only a hang reaches it: a passing test costs what the
// work costs, a loaded machine or an emulator only makes it slower, and a
// broken one fails instead of hanging. Never use a short deadline as an
// assertion about speed: performance lives in tests/bench.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace keel::test {

inline constexpr std::chrono::seconds kPatience{120};
inline constexpr uint64_t kPatienceNs = 120'000'000'000ull;  // for loops on hal::now_ns()
inline constexpr uint64_t kPatienceMs = 120'000;             // for wait_drained()

// Calls pred() until it returns true (true) or kPatience has passed (false).
template <class Pred>
bool eventually(Pred&& pred, std::chrono::milliseconds patience = kPatience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace keel::test

// offload placement: rates from counter deltas, hysteresis, minimum
// residency, idle demotion, table full, backoff — with made-up clocks.
#include <doctest/doctest.h>

#include <cerrno>
#include <vector>

#include "offload/placement.h"

using namespace keel::offload;

namespace {
constexpr uint64_t kSec = 1'000'000'000ull;
constexpr uint64_t kMs = 1'000'000ull;
}  // namespace

TEST_CASE("rate meter: packets per second from cumulative counters, smoothed") {
  RateMeter m;
  m.start(0, 0);
  uint64_t total = 0;
  for (int i = 1; i <= 20; ++i) {
    total += 1000;  // 1000 packets every 100 ms = 10 kpps
    m.update(uint64_t(i) * 100 * kMs, total);
  }
  CHECK(m.rate() > 6000);
  CHECK(m.rate() < 10001);
  // Traffic stops: the rate falls, halving about every second.
  const double before = m.rate();
  m.update(2 * kSec + 1 * kSec, total);
  CHECK(m.rate() < before * 0.6);
  CHECK(m.rate() > before * 0.4);
  // A counter that went backwards (a device reset) counts as no packets.
  RateMeter r;
  r.start(0, 100);
  r.update(kSec, 50);
  r.update(2 * kSec, 10);
  CHECK(r.rate() >= 0);
  CHECK(r.total() == 10);
}

TEST_CASE("a fresh rule starts at the rate the PMD measured") {
  RateMeter m;
  m.start(5 * kSec, 1234);
  CHECK(m.rate() == doctest::Approx(1234));
}

TEST_CASE("idle: no hardware hit for the idle time, from the install when never hit") {
  PlacementPolicy p;
  p.idle_ns = 2 * kSec;
  Resident r{1, 0, 10 * kSec, 0};
  CHECK(!is_idle(r, 11 * kSec, p));
  CHECK(is_idle(r, 12 * kSec, p));
  r.last_hit_ns = 11 * kSec;
  CHECK(!is_idle(r, 12 * kSec, p));
  CHECK(is_idle(r, 13 * kSec, p));
  p.idle_ns = 0;  // never demote
  CHECK(!is_idle(r, 100 * kSec, p));
}

TEST_CASE("minimum residency and hysteresis") {
  PlacementPolicy p;
  p.evict_factor = 2.0;
  p.min_residency_ns = kSec;
  Resident r{1, 100, 10 * kSec, 10 * kSec};
  CHECK(!evictable(r, 10 * kSec + 500 * kMs, p));
  CHECK(evictable(r, 11 * kSec, p));
  CHECK(!beats(150, r, p));  // 1.5x: not enough
  CHECK(!beats(200, r, p));  // exactly the factor: still no
  CHECK(beats(201, r, p));
  Resident cold{2, 0, 0, 0};
  CHECK(!beats(0, cold, p));  // an unmeasured candidate never displaces
  CHECK(beats(1, cold, p));
}

TEST_CASE("placement: free slots to the hottest, then swaps only past the factor") {
  PlacementPolicy p;
  p.evict_factor = 2.0;
  p.min_residency_ns = kSec;
  const uint64_t now = 100 * kSec;
  std::vector<Resident> res = {{1, 10, 0, 0}, {2, 1000, 0, 0}, {3, 50, 0, 0}};
  SUBCASE("room: no eviction, hottest candidates first") {
    std::vector<Candidate> c = {{10, 5}, {11, 500}, {12, 50}};
    auto plan = plan_placement(res, c, 5, now, p);
    CHECK(plan.evict.empty());
    CHECK(plan.insert == std::vector<uint64_t>{11, 12});
    CHECK(plan.refuse == std::vector<uint64_t>{10});
  }
  SUBCASE("full: the coldest go for candidates that beat them by the factor") {
    std::vector<Candidate> c = {{10, 15}, {11, 500}, {12, 101}};
    auto plan = plan_placement(res, c, 3, now, p);
    // 500 beats 10 (x2); 101 beats 50 (x2.02); 15 does not beat 1000.
    CHECK(plan.evict == std::vector<uint64_t>{1, 3});
    CHECK(plan.insert == std::vector<uint64_t>{11, 12});
    CHECK(plan.refuse == std::vector<uint64_t>{10});
  }
  SUBCASE("no thrashing: two equal flows never swap back and forth") {
    std::vector<Resident> one = {{1, 100, 0, 0}};
    std::vector<Candidate> c = {{2, 100}};
    for (int round = 0; round < 10; ++round) {
      auto plan = plan_placement(one, c, 1, now + uint64_t(round) * kSec, p);
      CHECK(plan.evict.empty());
      CHECK(plan.refuse == std::vector<uint64_t>{2});
    }
  }
  SUBCASE("residency protects a new rule even from a much hotter candidate") {
    std::vector<Resident> young = {{1, 1, now - 100 * kMs, 0}};
    std::vector<Candidate> c = {{2, 1e6}};
    auto plan = plan_placement(young, c, 1, now, p);
    CHECK(plan.evict.empty());
    CHECK(plan.insert.empty());
  }
}

TEST_CASE("retry backoff and transient errors") {
  CHECK(backoff_ns(0, 10 * kMs, 2 * kSec) == 10 * kMs);
  CHECK(backoff_ns(1, 10 * kMs, 2 * kSec) == 20 * kMs);
  CHECK(backoff_ns(3, 10 * kMs, 2 * kSec) == 80 * kMs);
  CHECK(backoff_ns(10, 10 * kMs, 2 * kSec) == 2 * kSec);
  CHECK(backoff_ns(63, 10 * kMs, 2 * kSec) == 2 * kSec);
  CHECK(transient_errno(EBUSY));
  CHECK(transient_errno(EAGAIN));
  CHECK(!transient_errno(ENOSPC));
  CHECK(!transient_errno(ENOTSUP));
  CHECK(!transient_errno(EEXIST));
}

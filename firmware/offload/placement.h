// Placement — which flows deserve the NIC's limited tables: packet rates
// from hardware counter deltas, hysteresis against thrashing, minimum
// residency, idle demotion. Pure functions and small value types: the
// engine (offload.cpp) feeds them what it measured and applies what they
// say; the unit tests (tests/unit/offload_placement_test.cpp) drive them
// with made-up clocks.
//
// The policy, as the issue states it:
//   * a rule's rate is an exponentially weighted moving average of its
//     packets per second, updated from each stats round's counter delta
//     (RateMeter; half-life kRateHalfLifeNs), so one burst neither makes a
//     flow hot forever nor a pause makes it cold at once;
//   * a candidate (a hot microflow or flow waiting for room) may take a
//     full table's slot only if its rate beats the coldest evictable
//     rule's by `evict_factor` (default 2: an equal pair never swaps back
//     and forth) and that rule has been resident for `min_residency`;
//   * a rule with no hardware hit for `idle` is demoted (its slot freed;
//     the flow goes back to sampling), whatever the table's occupancy.
//
// Thread-safety: none needed: values and pure functions (the engine thread
// that owns a shard is the only user of its meters).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace keel::offload {

inline constexpr uint64_t kRateHalfLifeNs = 1'000'000'000;  // 1 s

// Packets per second of one rule from its cumulative hardware counter.
class RateMeter {
 public:
  // A new rule (installed at `now_ns`) starts at `initial_pps` — the rate
  // the PMD measured when it promoted the microflow — so a fresh rule is
  // not the coldest one the moment it lands.
  void start(uint64_t now_ns, double initial_pps) {
    last_ns_ = now_ns;
    rate_ = initial_pps;
    started_ = true;
  }
  // Cumulative packets as of `now_ns` (the counter's value, not a delta).
  void update(uint64_t now_ns, uint64_t total_packets);
  // The same, reusing the EWMA weight of the last call with the same
  // interval (a stats round updates 100k meters, most with one interval:
  // one exp2() a round instead of one a rule).
  void update(uint64_t now_ns, uint64_t total_packets, uint64_t& cached_dt, double& cached_alpha);
  double rate() const { return rate_; }
  uint64_t total() const { return total_; }

 private:
  uint64_t last_ns_ = 0, total_ = 0;
  double rate_ = 0;
  bool started_ = false;
};

struct PlacementPolicy {
  double evict_factor = 2.0;
  uint64_t min_residency_ns = 1'000'000'000;
  uint64_t idle_ns = 2'000'000'000;  // 0: never demote
};

// An installed rule as placement sees it.
struct Resident {
  uint64_t id = 0;  // the engine's rule id
  double rate = 0;
  uint64_t installed_ns = 0;
  uint64_t last_hit_ns = 0;  // 0: never hit
};

// A rule that wants in.
struct Candidate {
  uint64_t id = 0;
  double rate = 0;
};

// No hardware hit for the policy's idle time (counted from the install
// when it never hit)?
bool is_idle(const Resident& r, uint64_t now_ns, const PlacementPolicy& p);

// May `r` be evicted now (resident long enough)?
bool evictable(const Resident& r, uint64_t now_ns, const PlacementPolicy& p);

// Does a candidate of rate `candidate` beat the resident `victim`?
bool beats(double candidate, const Resident& victim, const PlacementPolicy& p);

// One placement pass over a table of `capacity` rules holding `residents`,
// with `candidates` waiting (any order). Says which residents to evict
// (coldest first) and which candidates to insert (hottest first): free
// slots go to the hottest candidates; then, while the hottest remaining
// candidate beats the coldest evictable resident, they swap. Idle
// residents are not considered here (the engine demotes them first).
struct PlacementPlan {
  std::vector<uint64_t> evict;   // resident ids
  std::vector<uint64_t> insert;  // candidate ids
  std::vector<uint64_t> refuse;  // candidates left out (table full)
};
PlacementPlan plan_placement(std::span<const Resident> residents, std::span<const Candidate> candidates,
                             uint64_t capacity, uint64_t now_ns, const PlacementPolicy& p);

// Retry backoff: base << attempt, capped (attempt 0 = the first retry).
uint64_t backoff_ns(unsigned attempt, uint64_t base_ns, uint64_t max_ns);

// Errors worth retrying (transient): EAGAIN, EBUSY, ENOMEM, ETIMEDOUT, EINTR.
bool transient_errno(int errnum);

}  // namespace keel::offload

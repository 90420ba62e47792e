// Placement — see placement.h.
#include "offload/placement.h"

#include <algorithm>
#include <cerrno>
#include <cmath>

namespace keel::offload {

void RateMeter::update(uint64_t now_ns, uint64_t total_packets) {
  uint64_t dt = UINT64_MAX;
  double a = 0;
  update(now_ns, total_packets, dt, a);
}

void RateMeter::update(uint64_t now_ns, uint64_t total_packets, uint64_t& cached_dt, double& cached_alpha) {
  if (!started_) {
    start(now_ns, 0);
    total_ = total_packets;
    return;
  }
  if (now_ns <= last_ns_) {
    total_ = std::max(total_, total_packets);
    return;
  }
  const uint64_t dt = now_ns - last_ns_;
  const uint64_t dp = total_packets >= total_ ? total_packets - total_ : 0;  // a reset counter restarts
  const double inst = static_cast<double>(dp) * 1e9 / static_cast<double>(dt);
  // EWMA with a half-life in time, so the weight does not depend on how
  // often the rounds come: alpha = 1 - 2^(-dt/half_life).
  if (dt != cached_dt) {
    cached_dt = dt;
    cached_alpha = 1.0 - std::exp2(-static_cast<double>(dt) / static_cast<double>(kRateHalfLifeNs));
  }
  const double alpha = cached_alpha;
  rate_ += alpha * (inst - rate_);
  total_ = total_packets;
  last_ns_ = now_ns;
}

bool is_idle(const Resident& r, uint64_t now_ns, const PlacementPolicy& p) {
  if (p.idle_ns == 0) return false;
  const uint64_t since = r.last_hit_ns ? std::max(r.last_hit_ns, r.installed_ns) : r.installed_ns;
  return now_ns > since && now_ns - since >= p.idle_ns;
}

bool evictable(const Resident& r, uint64_t now_ns, const PlacementPolicy& p) {
  return now_ns >= r.installed_ns && now_ns - r.installed_ns >= p.min_residency_ns;
}

bool beats(double candidate, const Resident& victim, const PlacementPolicy& p) {
  // A candidate with no measured rate never displaces anything.
  return candidate > 0 && candidate > victim.rate * p.evict_factor;
}

PlacementPlan plan_placement(std::span<const Resident> residents, std::span<const Candidate> candidates,
                             uint64_t capacity, uint64_t now_ns, const PlacementPolicy& p) {
  PlacementPlan plan;
  std::vector<Candidate> cands(candidates.begin(), candidates.end());
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.rate > b.rate; });
  uint64_t used = residents.size();
  size_t ci = 0;
  while (ci < cands.size() && used < capacity) {
    plan.insert.push_back(cands[ci++].id);
    ++used;
  }
  std::vector<const Resident*> victims;
  for (const Resident& r : residents)
    if (evictable(r, now_ns, p)) victims.push_back(&r);
  std::stable_sort(victims.begin(), victims.end(), [](const Resident* a, const Resident* b) { return a->rate < b->rate; });
  size_t vi = 0;
  while (ci < cands.size() && vi < victims.size() && beats(cands[ci].rate, *victims[vi], p)) {
    plan.evict.push_back(victims[vi++]->id);
    plan.insert.push_back(cands[ci++].id);
  }
  for (; ci < cands.size(); ++ci) plan.refuse.push_back(cands[ci].id);
  return plan;
}

uint64_t backoff_ns(unsigned attempt, uint64_t base_ns, uint64_t max_ns) {
  if (attempt >= 40) return max_ns;
  const uint64_t v = base_ns << attempt;
  return std::min(v, max_ns);
}

bool transient_errno(int errnum) {
  return errnum == EAGAIN || errnum == EBUSY || errnum == ENOMEM || errnum == ETIMEDOUT || errnum == EINTR;
}

}  // namespace keel::offload

// Coverage (coverage.h): Open vSwitch's coverage_run() / coverage_read().
#include "control/coverage.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace keel::control {

Coverage::History& Coverage::history(const std::string& name) {
  for (auto& [n, h] : hist_)
    if (n == name) return h;
  hist_.emplace_back(name, History{});
  return hist_.back().second;
}

void Coverage::run(uint64_t now_ms, const std::vector<Counter>& totals) {
  std::lock_guard lock(mu_);
  if (next_run_ms_ == 0) {
    // The first look: the baseline (what came before keel counts nowhere).
    for (const Counter& c : totals) history(c.name).last_total = c.total;
    next_run_ms_ = now_ms + kRunIntervalMs;
    return;
  }
  if (now_ms < next_run_ms_) return;
  // Slots that passed (a late call closes several; the growth is spread).
  const uint64_t slots = (now_ms - next_run_ms_) / kRunIntervalMs + 1;
  constexpr unsigned kRing = kMinAvgLen * kHrAvgLen;
  for (const Counter& c : totals) {
    History& h = history(c.name);
    const uint64_t count = c.total >= h.last_total ? c.total - h.last_total : 0;
    h.last_total = c.total;
    const uint64_t portion = count / slots;
    unsigned idx = idx_;
    // More than an hour's slots: only the last hour's matter.
    const uint64_t n = std::min<uint64_t>(slots, kRing);
    for (uint64_t j = slots - n; j < slots; ++j) {
      const unsigned m = idx % kMinAvgLen, hr = idx / kMinAvgLen;
      h.min[m] = static_cast<uint32_t>(portion + (j == slots - 1 ? count % slots : 0));
      h.hr[hr] = m == 0 ? h.min[m] : h.hr[hr] + h.min[m];
      idx = (idx + 1) % kRing;
    }
  }
  idx_ = static_cast<unsigned>((idx_ + std::min<uint64_t>(slots, kRing)) % kRing);
  next_run_ms_ = now_ms + kRunIntervalMs;
}

std::vector<Coverage::Line> Coverage::read(const std::vector<Counter>& totals) const {
  std::lock_guard lock(mu_);
  std::vector<Line> out;
  for (const Counter& c : totals) {
    Line l{c.name, 0, 0, 0, c.total};
    for (const auto& [n, h] : hist_) {
      if (n != c.name) continue;
      const unsigned last = (idx_ + kMinAvgLen * kHrAvgLen - 1) % kMinAvgLen;
      l.last_rate = h.min[last] * 1000.0 / static_cast<double>(kRunIntervalMs);
      uint64_t m = 0, hr = 0;
      for (uint32_t v : h.min) m += v;
      for (uint32_t v : h.hr) hr += v;
      l.minute_rate = static_cast<double>(m) / 60.0;
      l.hour_rate = static_cast<double>(hr) / 3600.0;
      break;
    }
    out.push_back(l);
  }
  return out;
}

std::string Coverage::format(const std::vector<Line>& lines) {
  // coverage_hash(): the names of the counters hit, grouped by equal
  // totals in descending order, with each group's rank. (The same
  // purpose as Open vSwitch's: a set of events seen before hashes alike;
  // the value is keel's, an FNV-1a of the same material.)
  std::vector<const Line*> hit;
  for (const Line& l : lines)
    if (l.total) hit.push_back(&l);
  std::sort(hit.begin(), hit.end(),
            [](const Line* a, const Line* b) { return a->total != b->total ? a->total > b->total : a->name < b->name; });
  uint32_t hash = 2166136261u;
  auto mix = [&hash](uint32_t v) {
    for (int k = 0; k < 4; ++k) hash = (hash ^ ((v >> (8 * k)) & 0xff)) * 16777619u;
  };
  uint32_t groups = 0;
  for (size_t i = 0; i < hit.size();) {
    ++groups;
    mix(static_cast<uint32_t>(i));
    size_t j = i;
    for (; j < hit.size() && hit[j]->total == hit[i]->total; ++j)
      for (char ch : hit[j]->name) hash = (hash ^ static_cast<uint8_t>(ch)) * 16777619u;
    i = j;
  }
  mix(groups);

  char buf[160];
  std::snprintf(buf, sizeof buf,
                "Event coverage, avg rate over last: %d seconds, last minute, last hour,  hash=%08" PRIx32 ":\n",
                static_cast<int>(kRunIntervalMs / 1000), hash);
  std::string out = buf;
  size_t never = 0;
  for (const Line& l : lines) {
    if (!l.total) {
      ++never;
      continue;
    }
    std::snprintf(buf, sizeof buf, "%-24s %5.1f/sec %9.3f/sec %13.4f/sec   total: %" PRIu64 "\n", l.name.c_str(),
                  l.last_rate, l.minute_rate, l.hour_rate, l.total);
    out += buf;
  }
  out += std::to_string(never) + " events never hit\n";
  return out;
}

}  // namespace keel::control

// Coverage — the rates `coverage-show` prints beside each event counter, as
// Open vSwitch's lib/coverage.c keeps them: every 5 s (COVERAGE_RUN_INTERVAL)
// the growth of each counter's total goes into a ring of 12 slots (the last
// minute), and each minute's sum into a ring of 60 (the last hour). A
// counter's line then shows the last slot's rate (/sec over 5 s), the
// minute's average and the hour's, and its total.
//
// keel's counters are not kept here: the caller samples them (totals by
// name, in a fixed order) and hands them to run() — the console's periodic
// work does, about once a second; run() closes the 5 s slots that passed
// since the last call (a pause spreads its growth evenly over them, as
// coverage_run() does). A counter first seen later starts with empty slots.
//
// Thread-safety: run() and read() from any thread; one mutex (the control
// path only; no PMD ever touches it).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace keel::control {

class Coverage {
 public:
  static constexpr uint64_t kRunIntervalMs = 5000;  // COVERAGE_RUN_INTERVAL
  static constexpr unsigned kMinAvgLen = 12;        // MIN_AVG_LEN: slots of a minute
  static constexpr unsigned kHrAvgLen = 60;         // HR_AVG_LEN: minutes of an hour

  struct Counter {
    std::string name;
    uint64_t total = 0;
  };
  struct Line {
    std::string name;
    double last_rate = 0, minute_rate = 0, hour_rate = 0;  // per second
    uint64_t total = 0;
  };

  // Takes the counters' current totals at `now_ms` (a monotonic clock).
  void run(uint64_t now_ms, const std::vector<Counter>& totals);
  // The rates as of the last slot closed, with `totals` (read now) as the
  // totals, in their order.
  std::vector<Line> read(const std::vector<Counter>& totals) const;

  // Open vSwitch's layout (coverage_read): the header with a hash of which
  // counters have which totals, one line per counter that was ever hit
  // ("%-24s %5.1f/sec %9.3f/sec %13.4f/sec   total: %llu"), then "N events
  // never hit".
  static std::string format(const std::vector<Line>& lines);

 private:
  struct History {
    uint64_t last_total = 0;
    uint32_t min[kMinAvgLen] = {};
    uint32_t hr[kHrAvgLen] = {};
  };
  History& history(const std::string& name);

  mutable std::mutex mu_;
  std::vector<std::pair<std::string, History>> hist_;  // by name, first-seen order
  uint64_t next_run_ms_ = 0;                           // 0: not started
  unsigned idx_ = 0;                                   // slots closed, mod kMinAvgLen * kHrAvgLen
};

}  // namespace keel::control

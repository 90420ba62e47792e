// Rx queue scheduling — which PMD polls which rx queue, as Open vSwitch
// 3.1's dpif-netdev decides it (pmd-rxq-assign, pmd-rxq-affinity,
// pmd-rxq-isolate), and the automatic load balancer's decision
// (pmd-auto-lb: rebalance only when the estimated variance of the PMDs'
// loads improves enough).
//
// Pure functions and a small state machine on their arguments: the
// datapath gathers the inputs (queues, their measured cycles, the PMDs'
// loads) and applies the plan (datapath.h, Datapath::reschedule()).
//
// Threads: any thread; AutoLb is one caller's (the control thread's).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace keel::datapath {

enum class RxqAssignMode : uint8_t { cycles, roundrobin, group };
std::optional<RxqAssignMode> parse_rxq_assign(std::string_view s);
std::string_view to_string(RxqAssignMode m);

// One rx queue to place, in port order then queue order (the order
// roundrobin walks, and ties in the other modes).
struct SchedRxq {
  uint16_t port = 0;  // datapath port id
  uint16_t queue = 0;
  std::string port_name;
  uint64_t cycles = 0;  // measured processing cycles (the load history's sum)
  int affinity = -1;    // other_config:pmd-rxq-affinity core for this queue, -1: none
};

struct SchedConfig {
  std::vector<int> pmd_cores;  // the PMDs (Datapath PMD index -> core; -1 unpinned)
  RxqAssignMode mode = RxqAssignMode::cycles;
  bool isolate = true;  // pmd-rxq-isolate: a PMD with a pinned queue takes no other
};

struct SchedPlan {
  std::vector<int> pmd_of;            // per input rxq: PMD index, or -1 (polled by none)
  std::vector<bool> isolated;         // per PMD (pmd-rxq-show's "isolated : true")
  std::vector<std::string> messages;  // what Open vSwitch logs (e.g. a pinned core with no PMD)
};

SchedPlan plan_rxqs(std::span<const SchedRxq> rxqs, const SchedConfig& cfg);

// pmd-cpu-mask: a hexadecimal core mask ("0x3", "3", "F0", as Open
// vSwitch takes it) to the cores it names, lowest first; an error text for
// a mask that names none or a core >= max_cores.
struct CpuMask {
  std::vector<int> cores;
  std::string error;  // empty: ok
};
CpuMask parse_cpu_mask(std::string_view s, unsigned max_cores);
// The cores as a mask ("0x6"); unpinned entries (-1) are not shown.
std::string format_cpu_mask(std::span<const int> cores);

// --- pmd-auto-lb (Open vSwitch's names and defaults) ---
struct AutoLbConfig {
  bool enabled = false;                     // pmd-auto-lb
  unsigned load_threshold_pct = 95;         // pmd-auto-lb-load-threshold
  unsigned improvement_threshold_pct = 25;  // pmd-auto-lb-improvement-threshold
  uint64_t rebal_interval_ms = 60'000;      // pmd-auto-lb-rebal-interval (minutes in OVS's column; ms here)
};

// A PMD's measured load (the newest closed intervals).
struct PmdLoadSample {
  uint64_t window_cycles = 0;  // 0: not measured yet
  uint64_t busy_cycles = 0;
  bool isolated = false;
};

// The dry run: the variance of the PMDs' estimated loads now and under a
// fresh plan, and whether the improvement reaches the threshold.
struct AutoLbEstimate {
  uint64_t current_variance = 0, new_variance = 0;
  unsigned improvement_pct = 0;
  bool rebalance = false;
};
AutoLbEstimate auto_lb_dry_run(std::span<const SchedRxq> rxqs, std::span<const int> current_pmd_of,
                               std::span<const PmdLoadSample> pmds, const SchedConfig& cfg,
                               const AutoLbConfig& lb);

// The control thread's periodic check: tick() about once a second; true
// when a rebalance should run now (a non-isolated PMD over the load
// threshold, the interval since the last rebalance passed, and the dry run
// says it improves enough). last() is the latest dry run.
class AutoLb {
 public:
  void configure(const AutoLbConfig& c) { cfg_ = c; }
  const AutoLbConfig& config() const { return cfg_; }
  bool tick(uint64_t now_ms, std::span<const SchedRxq> rxqs, std::span<const int> current_pmd_of,
            std::span<const PmdLoadSample> pmds, const SchedConfig& cfg);
  void rebalanced(uint64_t now_ms) { last_rebalance_ms_ = now_ms; }
  const AutoLbEstimate& last() const { return last_; }

 private:
  AutoLbConfig cfg_;
  uint64_t last_rebalance_ms_ = 0;
  AutoLbEstimate last_;
};

}  // namespace keel::datapath

// Rx queue scheduling — which PMD polls which rx queue, as Open vSwitch
// 3.1's dpif-netdev decides it (pmd-rxq-assign, pmd-rxq-affinity,
// pmd-rxq-isolate), and the automatic load balancer's decision
// (pmd-auto-lb: rebalance only when the estimated variance of the PMDs'
// loads improves enough).
//
// Pure functions and a small state machine on their arguments: the
// datapath gathers the inputs (queues, their measured cycles, the PMDs'
// loads) and applies the plan (datapath.h, Datapath::reschedule()).
// Open vSwitch's structure is kept: its sched_numa_list (PMDs per NUMA
// node, each node with its own round-robin walk) has one node here, node
// 0, so every "numa" in the messages is 0; the cross-numa fallback and the
// dry run's cross-numa check have nothing to do. What each step mirrors is
// cited at the step in rxq_sched.cpp (lib/dpif-netdev.c of v3.1.0).
//
// Data: the PMDs are the indices of SchedConfig::pmd_cores; Open vSwitch
// walks them sorted by core id (sort_numa_list_pmds()), and so does
// plan_rxqs(), whatever order the datapath keeps them in. The rx queues are
// the caller's span, in the order the datapath's ports and queues are
// walked (ascending port id, then queue id — what Open vSwitch's port hmap
// gave for ports 1..3 in the live runs recorded in rxq_sched_test.cpp).
//
// Thread-safety: the free functions touch only their arguments and may run
// on any thread; an AutoLb object belongs to one caller (the control
// thread's periodic check), unsynchronized.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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
  // The core each PMD's log lines name (Pmd::display_core(): an unpinned
  // PMD's CPU); empty: pmd_cores. Messages only.
  std::vector<int> shown_cores;
};

// pmd-rxq-isolate=false only holds with pmd-rxq-assign=group: Open vSwitch
// (dpif_netdev_set_config()) forces isolation on in the other modes and logs
// rxq_isolate_warning() each time it reads that configuration. plan_rxqs()
// applies the effective value; the warning is the configuring side's to log.
bool rxq_isolate_effective(const SchedConfig& cfg);
std::string_view rxq_isolate_warning(const SchedConfig& cfg);  // empty: nothing to warn about

struct SchedPlan {
  std::vector<int> pmd_of;     // per input rxq: PMD index, or -1 (polled by none)
  std::vector<bool> isolated;  // per PMD (pmd-rxq-show's "isolated : true")
  // What Open vSwitch logs at WARN (a pinned core with no PMD, an unpolled
  // queue) and at INFO ("Core  1 on numa node 0 assigned port ..."), in order.
  std::vector<std::string> messages;
  std::vector<std::string> info;
  // Per PMD: the cycles of the queues the plan gives it (pmd_proc_cycles).
  std::vector<uint64_t> pmd_cycles;
};

SchedPlan plan_rxqs(std::span<const SchedRxq> rxqs, const SchedConfig& cfg);

// other_config:pmd-rxq-affinity ("0:3,1:7": queue:core pairs), parsed as
// Open vSwitch's parse_affinity_list(): pairs separated by commas or white
// space, "queue:core", "queue=core" or "queue(core)", each number as
// strtol base 0 reads it ("0x3", "010" is 8, "+1", "-0"), both >= 0. An
// empty list pins nothing. A later pair for the same queue overrides an
// earlier one; a queue the port doesn't have is ignored (Open vSwitch
// accepts it too), so is one above 65535 (no port has it). Any bad pair
// rejects the whole value: the port keeps its previous affinity (Open
// vSwitch logs "port_set_config failed (Invalid argument)").
struct RxqAffinity {
  std::vector<std::pair<uint16_t, int>> pairs;  // (queue, core), in the order written
  std::string error;                            // empty: ok
};
RxqAffinity parse_rxq_affinity(std::string_view s);
// Per queue of a port with n_rxq queues: the pinned core, or -1 (the
// SchedRxq::affinity values; Open vSwitch's core_ids[]).
std::vector<int> rxq_affinity_cores(const RxqAffinity& a, unsigned n_rxq);

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

// Open vSwitch's PMD_INTERVAL_MAX: a PMD counts as overloaded after this
// many intervals in a row at or over the load threshold (kPmdIntervalMax
// in pmd.h; rxq_sched_test.cpp checks they agree).
inline constexpr unsigned kAutoLbOverloadIntervals = 12;

// Open vSwitch's reading of the columns (dpif_netdev_set_config()), for
// the CLI: pmd-auto-lb-rebal-interval in minutes, 0 or above 20000 -> the
// default 1 minute; a threshold above 100 -> its default (95 load, 25
// improvement). Open vSwitch accepts these silently.
uint64_t auto_lb_rebal_interval_ms(uint64_t minutes);
unsigned auto_lb_load_threshold_pct(uint64_t pct);
unsigned auto_lb_improvement_threshold_pct(uint64_t pct);

// A PMD's measured load, Pmd::load() and friends.
struct PmdLoadSample {
  // The load window (Pmd::load(kPmdIntervalMax)): the last interval's
  // length times the intervals, as Open vSwitch's intrvl_cycles *
  // PMD_INTERVAL_MAX — the denominator of the dry run's busy %. 0: not
  // measured yet (the PMD then counts as 0 % busy, as in Open vSwitch).
  uint64_t window_cycles = 0;
  // Processing cycles in the window (informational: the dry run weighs the
  // queues' cycles, as Open vSwitch).
  uint64_t busy_cycles = 0;
  bool isolated = false;  // as pmd-rxq-show says now (the current plan's isolated[])
  // The overload check (dp_netdev_pmd_try_optimize()): at each interval's
  // close a non-isolated PMD is overloaded for it when busy * 100 / total
  // >= pmd-auto-lb-load-threshold. intervals_closed is Pmd::intervals_closed();
  // the two figures are the newest closed interval's (Pmd::load(1)). AutoLb
  // looks at each new interval once; a count that goes back (the PMD
  // restarted) starts the PMD's overload run again, as a PMD reload does.
  uint32_t intervals_closed = 0;
  uint64_t interval_cycles = 0;       // the interval's length (idle + busy + sleep)
  uint64_t interval_busy_cycles = 0;  // its processing cycles
};

// The dry run: the variance of the PMDs' estimated loads now and under a
// fresh plan, and whether the improvement reaches the threshold.
struct AutoLbEstimate {
  uint64_t current_variance = 0, new_variance = 0;
  unsigned improvement_pct = 0;
  bool rebalance = false;
};
// pmd_rebalance_dry_run(): current = the queues where current_pmd_of puts
// them (a PMD holding a pinned queue counts as isolated when isolation is
// on, as sched_numa_list_assignments() has it), estimate = plan_rxqs(); each
// side's variance over its non-isolated PMDs of cycles * 100 /
// window_cycles; improvement = (current - new) * 100 / current when new <
// current, else 0; rebalance = improvement >= the improvement threshold.
AutoLbEstimate auto_lb_dry_run(std::span<const SchedRxq> rxqs, std::span<const int> current_pmd_of,
                               std::span<const PmdLoadSample> pmds, const SchedConfig& cfg,
                               const AutoLbConfig& lb);

// pmd_rebalance_dry_run_needed(): a dry run can only help when the mode is
// not roundrobin and at least two non-isolated PMDs exist, one of them
// polling more than one queue. reason: Open vSwitch's debug text when not.
bool auto_lb_dry_run_needed(std::span<const int> current_pmd_of, std::span<const PmdLoadSample> pmds,
                            const SchedConfig& cfg, std::string* reason = nullptr);

// Open vSwitch's integer variance() of the PMDs' busy percentages.
uint64_t sched_variance(std::span<const uint64_t> values);

// The control thread's periodic check (the pmd-auto-lb part of
// dpif_netdev_run()): tick() about once a second, at least once per load
// interval; true when a rebalance should run now. Each tick takes in the
// PMDs' newly closed intervals (the overload runs); the first tick after
// enabling starts the rebalance timer; once more than rebal_interval_ms
// passed since the timer's start the timer restarts and, if some PMD was
// overloaded kAutoLbOverloadIntervals intervals in a row, the dry run is
// considered (auto_lb_dry_run_needed(), auto_lb_dry_run()). last() is the
// latest dry run. The datapath must not act on true while a reconfiguration
// is pending (Open vSwitch also checks !dp_netdev_is_reconf_required() and
// !ports_require_restart()).
class AutoLb {
 public:
  // Disabling stops the timer (set_pmd_auto_lb()); the thresholds apply
  // from the next tick.
  void configure(const AutoLbConfig& c);
  const AutoLbConfig& config() const { return cfg_; }
  bool tick(uint64_t now_ms, std::span<const SchedRxq> rxqs, std::span<const int> current_pmd_of,
            std::span<const PmdLoadSample> pmds, const SchedConfig& cfg);
  // A rebalance (automatic or pmd-rxq-rebalance) ran: the PMDs reload,
  // which in Open vSwitch restarts every reloaded PMD's overload run
  // (pmd_thread_main(): pmd_overloaded = 0). The timer is not restarted
  // (Open vSwitch restarts it only at its own checks).
  void rebalanced(uint64_t now_ms);
  const AutoLbEstimate& last() const { return last_; }
  uint64_t last_rebalance_ms() const { return last_rebalance_ms_; }
  // Per PMD: intervals in a row at or over the load threshold (pmd_overloaded).
  std::span<const unsigned> overloaded_intervals() const { return overloaded_; }

 private:
  AutoLbConfig cfg_;
  uint64_t last_rebalance_ms_ = 0;
  AutoLbEstimate last_;
  bool timer_running_ = false;  // rebalance_poll_timer != 0
  uint64_t timer_ms_ = 0;       // rebalance_poll_timer
  std::vector<unsigned> overloaded_;
  std::vector<uint32_t> seen_intervals_;
};

}  // namespace keel::datapath

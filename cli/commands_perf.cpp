// `pmd-perf-show`: Open vSwitch 3.1's `ovs-appctl dpif-netdev/pmd-perf-show`
// summary, one section per PMD (Open vSwitch prints no main-thread section
// here, unlike pmd-stats-show), in its layout, captured from a live
// ovs-vswitchd 3.1 (dummy-pmd ports) and checked by tests/conformance/layout:
//
//   <blank>
//   Time: HH:MM:SS.mmm                     (UTC, as OVS's xastrftime_msec(.., true))
//   Measurement duration: S.sss s          (since the PMD started or pmd-stats-clear)
//   <blank>
//   pmd thread numa_id 0 core_id N:
//   <blank>
//     Iterations / Used TSC cycles / idle, busy, sleep iterations / Sleep time
//     Rx packets, Datapath passes, PHWOL / MFEX Opt / Simple Match / EMC / SMC /
//     Megaflow hits, Upcalls, Lost upcalls   (only once packets came)
//     Tx packets, Tx batches                 (Tx batches only once packets went)
//
// What the figures are, in keel's counters (datapath/pmd.h):
//   * used cycles = busy + idle cycles less the sleeps (keel's idle cycles
//     include the idle sleep, as pmd-stats-show shows them; Open vSwitch's
//     "used" cycles leave the sleep out and print it as Sleep time);
//     "% of total cycles" is used cycles over the measurement's wall clock.
//   * busy iterations: iterations that received packets; idle the others.
//   * sleep iterations / Sleep time: keel's idle back-off on host boards
//     (Open vSwitch's pmd-maxsleep); 0 on a board whose PMDs never sleep.
//   * PHWOL hits: packets that came with a hardware flow mark of a live
//     flow of the PMD (partial offload: no parse, no lookup; PmdCounters::
//     phwol_hits), over the passes as Open vSwitch. MFEX Opt hits: keel has
//     no miniflow-extract variants: 0, which Open vSwitch prints for a
//     switch without them. Simple Match: cross-connect plus simple-path
//     hits, as in pmd-stats-show.
//   * Upcalls: misses handed to the slow path (with the followers that rode
//     on them), Lost: misses that could not go up, both over the passes.
//     us/upcall: Open vSwitch measures upcall cycles only with
//     pmd-perf-metrics=true and prints 0.0 otherwise; keel does not measure
//     them, so 0.0.
//   * Tx packets / batches: the PMD's output batches (tx_batch_packets,
//     tx_batches).
// The histograms, iteration and millisecond histories that Open vSwitch adds
// with pmd-perf-metrics=true are not kept (they cost per-iteration work).
//
// `--keel` adds keel's tx queue figures after each PMD's summary: bursts
// sent on a tx queue shared with other PMDs (the port has fewer tx queues
// than there are PMDs; pmd.h's XPS steering), how many of them waited for
// the queue's lock and the cycles spent waiting, and how often the PMD chose
// a queue. `--pmd CORE` (OVS's -pmd): only the PMD on that core. `--format
// json`: the same figures by name.
//
// Thread-safety: control thread; reads the PMDs' relaxed counters (a figure
// may be one burst old, and the lines of one section are not one instant).
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "datapath/datapath.h"
#include "datapath/pmd.h"
#include "keel/hal/cpu.h"

namespace keel::cli {
namespace {

std::string perf_printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string perf_printf(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return std::string(buf, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof(buf) - 1));
}

// One PMD's figures, derived as the top says.
struct PerfFigures {
  double duration_s = 0;
  uint64_t duration_ms = 0;
  uint64_t iterations = 0, busy_iterations = 0, idle_iterations = 0, sleep_iterations = 0;
  uint64_t used_cycles = 0, busy_cycles = 0, idle_cycles = 0;  // idle: without the sleeps
  uint64_t sleep_cycles = 0;
  double us_per_iteration = 0;
  double sleep_us = 0, used_pct = 0, idle_pct = 0, busy_pct = 0, sleep_pct = 0, sleep_us_per_iter = 0;
  uint64_t rx = 0, passes = 0, phwol = 0, simple = 0, emc = 0, smc = 0, megaflow = 0, upcalls = 0, lost = 0;
  double subtbl_per_hit = 0, rx_kpps = 0, cycles_per_pkt = 0;
  uint64_t tx = 0, tx_batches = 0;
  double tx_kpps = 0, pkts_per_batch = 0;
  datapath::PmdPerfCounters perf;
};

PerfFigures perf_figures(const datapath::Pmd& pmd, uint64_t now_ns) {
  PerfFigures f;
  const datapath::PmdCounters c = pmd.counters();
  f.perf = pmd.perf_counters();
  const uint64_t since = pmd.counters_since_ns();
  f.duration_ms = since && now_ns > since ? (now_ns - since) / 1'000'000 : 0;
  f.duration_s = static_cast<double>(f.duration_ms) / 1000.0;
  const double hz = static_cast<double>(hal::cycles_per_second());
  const double us_per_cycle = hz > 0 ? 1e6 / hz : 0;
  f.iterations = c.iterations;
  f.busy_iterations = std::min(f.perf.busy_iterations, f.iterations);
  f.sleep_cycles = std::min(f.perf.sleep_cycles, c.idle_cycles);
  f.idle_iterations = f.iterations - f.busy_iterations;
  f.sleep_iterations = f.perf.sleep_iterations;
  const uint64_t sleep = f.sleep_cycles;
  f.busy_cycles = c.busy_cycles;
  f.idle_cycles = c.idle_cycles - sleep;
  f.used_cycles = f.busy_cycles + f.idle_cycles;
  const double used = static_cast<double>(f.used_cycles);
  f.used_pct = f.duration_s > 0 && hz > 0 ? 100.0 * (used / f.duration_s) / hz : 0;
  f.idle_pct = used > 0 ? 100.0 * static_cast<double>(f.idle_cycles) / used : 0;
  f.busy_pct = used > 0 ? 100.0 * static_cast<double>(f.busy_cycles) / used : 0;
  f.sleep_pct =
      f.iterations ? 100.0 * static_cast<double>(f.sleep_iterations) / static_cast<double>(f.iterations) : 0;
  f.sleep_us = static_cast<double>(sleep) * us_per_cycle;
  f.sleep_us_per_iter = f.sleep_iterations ? f.sleep_us / static_cast<double>(f.sleep_iterations) : 0;
  f.us_per_iteration = f.iterations ? static_cast<double>(f.used_cycles + sleep) * us_per_cycle /
                                          static_cast<double>(f.iterations)
                                    : 0;
  f.rx = c.rx_packets;
  f.phwol = c.phwol_hits;
  f.passes = c.rx_packets + c.recirculations;
  f.simple = c.xconnect_hits + c.simple_hits;
  f.emc = c.emc_hits;
  f.smc = c.smc_hits;
  f.megaflow = c.megaflow_hits;
  f.upcalls = c.upcalls + c.upcall_followers;
  f.lost = c.lost;
  f.subtbl_per_hit =
      c.megaflow_hits ? static_cast<double>(c.subtable_lookups) / static_cast<double>(c.megaflow_hits) : 0;
  f.rx_kpps = f.duration_s > 0 ? static_cast<double>(f.rx) / f.duration_s / 1000 : 0;
  f.cycles_per_pkt = f.rx ? static_cast<double>(c.busy_cycles) / static_cast<double>(f.rx) : 0;
  f.tx = c.tx_batch_packets;
  f.tx_batches = c.tx_batches;
  f.tx_kpps = f.duration_s > 0 ? static_cast<double>(f.tx) / f.duration_s / 1000 : 0;
  f.pkts_per_batch = f.tx_batches ? static_cast<double>(f.tx) / static_cast<double>(f.tx_batches) : 0;
  return f;
}

// "HH:MM:SS.mmm" in UTC.
std::string perf_time_of_day(uint64_t wall_ns) {
  const time_t secs = static_cast<time_t>(wall_ns / 1'000'000'000);
  tm t{};
  gmtime_r(&secs, &t);
  return perf_printf("%02d:%02d:%02d.%03u", t.tm_hour, t.tm_min, t.tm_sec,
                     static_cast<unsigned>(wall_ns / 1'000'000 % 1000));
}

double pct(uint64_t a, uint64_t b) { return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0; }

void perf_text(std::string& out, const datapath::Pmd& pmd, const PerfFigures& f, const std::string& time_str,
               bool keel_extras) {
  out += "\nTime: " + time_str + "\n";
  out += perf_printf("Measurement duration: %.3f s\n\n", f.duration_s);
  out += "pmd thread numa_id 0 core_id " + std::to_string(pmd.display_core()) + ":\n\n";
  if (f.duration_s == 0) return;  // Open vSwitch prints no figures for a zero duration
  out += perf_printf("  Iterations:         %12" PRIu64 "  (%.2f us/it)\n", f.iterations, f.us_per_iteration);
  out += perf_printf("  - Used TSC cycles:  %12" PRIu64 "  (%5.1f %% of total cycles)\n", f.used_cycles,
                     f.used_pct);
  out += perf_printf("  - idle iterations:  %12" PRIu64 "  (%5.1f %% of used cycles)\n", f.idle_iterations,
                     f.idle_pct);
  out += perf_printf("  - busy iterations:  %12" PRIu64 "  (%5.1f %% of used cycles)\n", f.busy_iterations,
                     f.busy_pct);
  out += perf_printf("  - sleep iterations: %12" PRIu64 "  (%5.1f %% of iterations)\n", f.sleep_iterations,
                     f.sleep_pct);
  out += perf_printf("  Sleep time (us):    %12.0f  (%3.0f us/iteration avg.)\n", f.sleep_us,
                     f.sleep_us_per_iter);
  if (f.rx > 0) {
    out += perf_printf("  Rx packets:         %12" PRIu64 "  (%.0f Kpps, %.0f cycles/pkt)\n", f.rx, f.rx_kpps,
                       f.cycles_per_pkt);
    out += perf_printf("  Datapath passes:    %12" PRIu64 "  (%.2f passes/pkt)\n", f.passes,
                       static_cast<double>(f.passes) / static_cast<double>(f.rx));
    out += perf_printf("  - PHWOL hits:       %12" PRIu64 "  (%5.1f %%)\n", f.phwol, pct(f.phwol, f.passes));
    out += perf_printf("  - MFEX Opt hits:    %12" PRIu64 "  (%5.1f %%)\n", uint64_t{0}, 0.0);
    out +=
        perf_printf("  - Simple Match hits:%12" PRIu64 "  (%5.1f %%)\n", f.simple, pct(f.simple, f.passes));
    out += perf_printf("  - EMC hits:         %12" PRIu64 "  (%5.1f %%)\n", f.emc, pct(f.emc, f.passes));
    out += perf_printf("  - SMC hits:         %12" PRIu64 "  (%5.1f %%)\n", f.smc, pct(f.smc, f.passes));
    out += perf_printf("  - Megaflow hits:    %12" PRIu64 "  (%5.1f %%, %.2f subtbl lookups/hit)\n",
                       f.megaflow, pct(f.megaflow, f.passes), f.subtbl_per_hit);
    out += perf_printf("  - Upcalls:          %12" PRIu64 "  (%5.1f %%, %.1f us/upcall)\n", f.upcalls,
                       pct(f.upcalls, f.passes), 0.0);
    out += perf_printf("  - Lost upcalls:     %12" PRIu64 "  (%5.1f %%)\n", f.lost, pct(f.lost, f.passes));
  } else {
    out += perf_printf("  Rx packets:         %12d\n", 0);
  }
  if (f.tx > 0) {
    out += perf_printf("  Tx packets:         %12" PRIu64 "  (%.0f Kpps)\n", f.tx, f.tx_kpps);
    out += perf_printf("  Tx batches:         %12" PRIu64 "  (%.2f pkts/batch)\n", f.tx_batches,
                       f.pkts_per_batch);
  } else {
    out += perf_printf("  Tx packets:         %12d\n\n", 0);
  }
  if (keel_extras) {
    const datapath::PmdPerfCounters& p = f.perf;
    out += "  keel: tx bursts on shared queues: " + std::to_string(p.txq_shared_bursts) + " (lock waits " +
           std::to_string(p.txq_lock_waits) +
           perf_printf(", %.1f %%", pct(p.txq_lock_waits, p.txq_shared_bursts)) + ", wait cycles " +
           std::to_string(p.txq_wait_cycles) + ")\n";
    out += "  keel: tx queue choices (XPS): " + std::to_string(p.txq_steers) + "\n";
  }
}

// The PMDs by core id; only the one on core `only` when given.
std::vector<const datapath::Pmd*> perf_pmds(const datapath::Datapath& dp, const std::string& only) {
  std::vector<const datapath::Pmd*> v;
  for (const auto& pmd : dp.pmds())
    if (only.empty() || static_cast<long long>(std::stoull(only)) == pmd->display_core())
      v.push_back(pmd.get());
  std::stable_sort(v.begin(), v.end(), [](const datapath::Pmd* a, const datapath::Pmd* b) {
    return a->display_core() < b->display_core();
  });
  return v;
}

}  // namespace

void add_perf_commands(CommandTree::Impl& t) {
  // Declarations (command_tree_impl.h: CommandDecl).
  t.declare("pmd-perf-show", control::Access::show);

  auto* perf =
      t.app.add_subcommand("pmd-perf-show", "PMD performance summary (like dpif-netdev/pmd-perf-show)");
  perf->add_flag("--keel", t.flag_keel, "keel's tx queue figures (shared queues, lock waits) after each PMD");
  perf->add_option("--pmd", t.arg2, "only the PMD on this core (OVS's -pmd)")
      ->check(CLI::Range(0.0, 4294967295.0));
  t.add_format(perf);
  perf->callback([&t] {
    const auto pmds = perf_pmds(t.sys.datapath(), t.arg2);
    const uint64_t now = hal::now_ns();
    if (t.format == "json") {
      Json j;
      j.begin_object().begin_array("pmds");
      for (const datapath::Pmd* pmd : pmds) {
        const PerfFigures f = perf_figures(*pmd, now);
        j.begin_object()
            .field("pmd", pmd->index())
            .field("core", static_cast<int64_t>(pmd->display_core()))
            .field("duration_ms", f.duration_ms)
            .field("iterations", f.iterations)
            .field("idle_iterations", f.idle_iterations)
            .field("busy_iterations", f.busy_iterations)
            .field("sleep_iterations", f.sleep_iterations)
            .field("used_cycles", f.used_cycles)
            .field("idle_cycles", f.idle_cycles)
            .field("busy_cycles", f.busy_cycles)
            .field("sleep_cycles", f.sleep_cycles)
            .field("rx_packets", f.rx)
            .field("datapath_passes", f.passes)
            .field("phwol_hits", f.phwol)
            .field("simple_match_hits", f.simple)
            .field("emc_hits", f.emc)
            .field("smc_hits", f.smc)
            .field("megaflow_hits", f.megaflow)
            .field("upcalls", f.upcalls)
            .field("lost_upcalls", f.lost)
            .field("tx_packets", f.tx)
            .field("tx_batches", f.tx_batches)
            .field("txq_shared_bursts", f.perf.txq_shared_bursts)
            .field("txq_lock_waits", f.perf.txq_lock_waits)
            .field("txq_wait_cycles", f.perf.txq_wait_cycles)
            .field("txq_steers", f.perf.txq_steers)
            .end_object();
      }
      j.end_array().end_object();
      t.print(j.str() + "\n");
      return;
    }
    std::string out;
    const auto wall = std::chrono::system_clock::now().time_since_epoch();
    const std::string when = perf_time_of_day(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count()));
    for (const datapath::Pmd* pmd : pmds) perf_text(out, *pmd, perf_figures(*pmd, now), when, t.flag_keel);
    t.print(out);
  });
}

}  // namespace keel::cli

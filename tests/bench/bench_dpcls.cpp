// bench_dpcls — the megaflow classifier's lookup, per packet, in bursts of
// 32: shape-specialized subtable lookups against the generic function
// (ARCHITECTURE.md idea 1), on the same classifier, rules and keys.
//
// Scenarios (rules inserted once; every key matches exactly one rule):
//   16masks_100k  the dpcls-16masks scenario (../shared/bench/scenarios):
//                 16 masks = nw_dst /16../23 without (UDP) and with (TCP +
//                 exact tp_dst) the L4 port, i.e. subtables of shape (2,2)
//                 and (2,3); 100k rules, 6250 per subtable; traffic spread
//                 evenly, so a hit probes 8.5 subtables on average (OVS
//                 measured the same 8.5 in BASELINE.md). Rules and buckets
//                 (~9 MB) live in L2/L3, as on a busy PMD.
//   16masks_1k    the same masks, 64 rules each: everything in L1/L2, so
//                 the figure is the lookup's compute alone.
//   1mask_100k    one (2,2) subtable (nw_dst /24) with 100k rules: one
//                 probe per key.
// Megaflows do not overlap (as translation makes them): the top 3 bits of
// nw_dst say the prefix length, and the TCP masks differ from the UDP ones by
// nw_proto, so each key has one answer whatever the subtable order.
//
// Two ways of measuring each scenario:
//   BM_dpcls/<scenario>_{specialized,generic}: separate benchmarks; per
//     benchmark ns_per_pkt, Mpps and subtables probed per hit, and at the end
//     median and spread (min..max) of CPU ns/pkt over the repetitions;
//   BM_dpcls_paired/<scenario>: alternating timed blocks of both variants in
//     one run, the median of the per-pair ratios — the figure to quote on a
//     shared machine, where separate runs see different interference.
// Run (see tests/bench/RESULTS.md, "dpcls"):
//   ./build/host/tests/bench/bench_dpcls --benchmark_repetitions=10
//       --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2  (one line)
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "datapath/dpcls.h"
#include "flow/flow_key.h"

using namespace keel;
using namespace keel::datapath;

namespace {

constexpr unsigned kBurst = kDpclsMaxBurst;
constexpr unsigned kKeys = 8192;  // distinct packet keys cycled over
static_assert(kKeys % kBurst == 0, "whole bursts");

enum class Scenario { masks16_100k, masks16_1k, mask1_100k };

struct Group {
  unsigned plen;
  bool tcp;  // TCP + exact tp_dst (shape (2,3)); else UDP (2,2)
};

flow::FlowKey mask_of(const Group& g) {
  flow::FlowKey m{};
  m.in_port = ~0u;
  m.recirc_id = ~0u;
  m.dl_type = 0xffff;
  m.nw_dst = htonl(~0u << (32 - g.plen));
  m.nw_frag = 0xff;
  m.nw_proto = 0xff;
  if (g.tcp) m.tp_dst = 0xffff;
  return m;
}

// The packet of rule `r` of group `gi`: its prefix, random bits elsewhere.
flow::FlowKey packet(const Group& g, unsigned gi, uint32_t r, std::mt19937_64& rng) {
  flow::FlowKey k{};
  k.in_port = 1;
  k.dl_dst = {{0x02, 0, 0, 0, 0, 1}};
  k.dl_src = {{0x02, 0, 0, 0, 0, 2}};
  k.dl_type = htons(0x0800);
  k.nw_src = htonl(0x0a000000 | static_cast<uint32_t>(rng() & 0xffffff));
  // nw_dst: 3 bits of prefix length (gi % 8), then the rule's plen-3 bits,
  // then random host bits.
  const unsigned host_bits = 32 - g.plen;
  const uint32_t prefix = ((gi % 8) << (g.plen - 3)) | (r & ((1u << (g.plen - 3)) - 1));
  k.nw_dst = htonl((prefix << host_bits) | static_cast<uint32_t>(rng() & ((1u << host_bits) - 1)));
  k.nw_proto = g.tcp ? 6 : 17;
  k.nw_ttl = 64;
  k.tp_src = htons(static_cast<uint16_t>(1024 + rng() % 16));
  k.tp_dst = htons(g.tcp ? static_cast<uint16_t>(1000 + r % 16) : static_cast<uint16_t>(2000 + rng() % 8));
  return k;
}

struct Fixture {
  std::unique_ptr<Dpcls> cls = std::make_unique<Dpcls>();
  std::vector<flow::Miniflow> keys;
  std::vector<const flow::Miniflow*> ptrs;
  size_t n_rules = 0;

  explicit Fixture(Scenario s) {
    std::vector<Group> groups;
    for (unsigned i = 0; i < 16; ++i) groups.push_back({16 + i % 8, i >= 8});
    if (s == Scenario::mask1_100k) groups = {{24, false}};  // 21 free prefix bits: room for 100k rules
    const uint32_t per_group = s == Scenario::masks16_1k ? 64 : 100000 / static_cast<uint32_t>(groups.size());
    std::mt19937_64 rng(16);
    flow::Miniflow mf;
    for (unsigned gi = 0; gi < groups.size(); ++gi) {
      flow::Miniflow mask;
      (void)flow::compress(mask_of(groups[gi]), mask);
      // Rule r: prefix bits r (13+ bits: 8192 distinct for /16); TCP rules
      // also r % 16 in tp_dst. Odd multiplier: distinct, scattered prefixes.
      for (uint32_t i = 0; i < per_group; ++i) {
        const uint32_t r = i * 2654435761u;
        (void)flow::compress(packet(groups[gi], gi, r, rng), mf);
        if (cls->insert(mask, mf, reinterpret_cast<void*>(uintptr_t{1} + n_rules))) ++n_rules;
      }
    }
    keys.resize(kKeys);
    for (auto& k : keys) {
      const unsigned gi = static_cast<unsigned>(rng() % groups.size());
      const uint32_t r = static_cast<uint32_t>(rng() % per_group) * 2654435761u;
      (void)flow::compress(packet(groups[gi], gi, r, rng), k);
    }
    for (auto& k : keys) ptrs.push_back(&k);
  }
};

Fixture& fixture(Scenario s) {
  static std::map<Scenario, std::unique_ptr<Fixture>> cache;
  auto& f = cache[s];
  if (!f) f = std::make_unique<Fixture>(s);
  return *f;
}

void BM_dpcls(benchmark::State& state, Scenario s, bool generic) {
  Fixture& fx = fixture(s);
  fx.cls->force_generic_lookup(generic);
  alignas(64) DpclsRule* out[kBurst];
  unsigned next = 0;
  uint64_t packets = 0, hits = 0, probed = 0;
  for (auto _ : state) {
    uint32_t p = 0;
    const uint32_t found = fx.cls->lookup(std::span(&fx.ptrs[next], kBurst), out, &p);
    benchmark::DoNotOptimize(out);
    benchmark::DoNotOptimize(found);
    hits += static_cast<unsigned>(std::popcount(found));
    probed += p;
    next = (next + kBurst) % kKeys;
    packets += kBurst;
  }
  fx.cls->force_generic_lookup(false);
  if (hits != packets) state.SkipWithError("a key missed: the scenario's rules are wrong");
  state.SetItemsProcessed(static_cast<int64_t>(packets));
  state.counters["ns_per_pkt"] = benchmark::Counter(
      static_cast<double>(packets) / 1e9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["Mpps"] =
      benchmark::Counter(static_cast<double>(packets) / 1e6, benchmark::Counter::kIsRate);
  state.counters["probes_per_hit"] = hits ? static_cast<double>(probed) / static_cast<double>(hits) : 0;
  state.counters["rules"] = static_cast<double>(fx.n_rules);
  state.counters["subtables"] = static_cast<double>(fx.cls->n_subtables());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// This thread's CPU time: time slices given to other processes stay out.
double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Paired: each iteration times one block of kPairBursts bursts with the
// specialized functions and one with the generic function (alternating
// which goes first; keys continue from block to block), so both see the
// same interference from whatever else runs on the core (and thread CPU
// time leaves out the time slices it loses). Reports the median
// ns/pkt of each and the median of the per-pair ratios generic/specialized
// -- the robust figure on a shared machine.
void BM_dpcls_paired(benchmark::State& state, Scenario s) {
  constexpr unsigned kPairBursts = 32;
  Fixture& fx = fixture(s);
  alignas(64) DpclsRule* out[kBurst];
  unsigned next = 0;
  bool all_hit = true;
  auto block = [&](bool generic) {
    fx.cls->force_generic_lookup(generic);
    const double t0 = thread_cpu_ns();
    for (unsigned b = 0; b < kPairBursts; ++b) {
      const uint32_t found = fx.cls->lookup(std::span(&fx.ptrs[next], kBurst), out, nullptr);
      benchmark::DoNotOptimize(out);
      all_hit &= found == ~0u;
      next = (next + kBurst) % kKeys;
    }
    return (thread_cpu_ns() - t0) / (kPairBursts * kBurst);
  };
  std::vector<double> spec, gen, ratio;
  uint64_t packets = 0;
  for (auto _ : state) {
    const bool generic_first = spec.size() & 1;
    double a, b;
    if (generic_first) {
      b = block(true);
      a = block(false);
    } else {
      a = block(false);
      b = block(true);
    }
    spec.push_back(a);
    gen.push_back(b);
    ratio.push_back(b / a);
    packets += 2 * kPairBursts * kBurst;
  }
  fx.cls->force_generic_lookup(false);
  if (!all_hit) state.SkipWithError("a key missed: the scenario's rules are wrong");
  state.SetItemsProcessed(static_cast<int64_t>(packets));
  state.counters["spec_ns_per_pkt"] = median(spec);
  state.counters["generic_ns_per_pkt"] = median(gen);
  state.counters["gain_pct"] = (median(ratio) - 1) * 100;
  state.counters["pairs"] = static_cast<double>(ratio.size());
}

// Console output as usual, plus per scenario: median and spread of ns/pkt
// (CPU time, like the counters: a shared machine's preemption stays out)
// for both variants, and the gain. Uses the median/min/max aggregates when
// the run has repetitions (with or without --benchmark_report_aggregates_only),
// else the single run.
class GainReporter : public benchmark::ConsoleReporter {
 public:
  GainReporter() : ConsoleReporter(OO_Tabular) {}  // plain text: pasted into RESULTS.md
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const std::string& name = r.run_name.function_name;  // "BM_dpcls/16masks_100k_generic"
      if (name.rfind("BM_dpcls_paired/", 0) == 0) {
        if (r.run_type == Run::RT_Iteration || r.aggregate_name == "median") {
          auto c = r.counters;  // by value: operator[] on a const map
          paired_[name.substr(name.find('/') + 1)] = {c["spec_ns_per_pkt"].value,
                                                      c["generic_ns_per_pkt"].value, c["gain_pct"].value,
                                                      c["pairs"].value};
        }
        continue;
      }
      const size_t slash = name.find('/'), us = name.rfind('_');
      if (slash == std::string::npos || us == std::string::npos || us < slash) continue;
      Figures& f = figures_[name.substr(slash + 1, us - slash - 1)][name.substr(us + 1)];
      const double ns = r.GetAdjustedCPUTime() / kBurst;
      if (r.run_type == Run::RT_Iteration)
        f.single = ns;
      else if (r.aggregate_name == "median")
        f.median = ns;
      else if (r.aggregate_name == "min")
        f.min = ns;
      else if (r.aggregate_name == "max")
        f.max = ns;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\ndpcls lookup, CPU ns per packet (bursts of %u): median (min..max) over repetitions\n",
                kBurst);
    for (auto& [scenario, variants] : figures_) {
      if (!variants.count("specialized") || !variants.count("generic")) continue;
      const Figures s = variants["specialized"].resolved(), g = variants["generic"].resolved();
      std::printf("  %-14s specialized %6.1f (%.1f..%.1f)  generic %6.1f (%.1f..%.1f)  gain %+.1f %%\n",
                  scenario.c_str(), s.median, s.min, s.max, g.median, g.min, g.max,
                  (g.median / s.median - 1) * 100);
    }
    if (paired_.empty()) return;
    std::printf(
        "paired blocks (CPU ns per packet, medians over pairs; gain = median of generic/specialized)\n");
    for (const auto& [scenario, p] : paired_)
      std::printf("  %-14s specialized %6.1f  generic %6.1f  gain %+.1f %%  (%.0f pairs)\n", scenario.c_str(),
                  p[0], p[1], p[2], p[3]);
  }

 private:
  struct Figures {
    double single = 0, median = 0, min = 0, max = 0;
    Figures resolved() const {
      if (median > 0) return *this;
      return {single, single, single, single};
    }
  };
  std::map<std::string, std::map<std::string, Figures>> figures_;
  std::map<std::string, std::array<double, 4>> paired_;  // spec ns, generic ns, gain %, pairs
};

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

BENCHMARK_CAPTURE(BM_dpcls, 16masks_100k_specialized, Scenario::masks16_100k, false)
    ->Unit(benchmark::kNanosecond)
    ->ComputeStatistics("min", min_of)
    ->ComputeStatistics("max", max_of);
BENCHMARK_CAPTURE(BM_dpcls, 16masks_100k_generic, Scenario::masks16_100k, true)
    ->Unit(benchmark::kNanosecond)
    ->ComputeStatistics("min", min_of)
    ->ComputeStatistics("max", max_of);
BENCHMARK_CAPTURE(BM_dpcls, 16masks_1k_specialized, Scenario::masks16_1k, false)
    ->Unit(benchmark::kNanosecond)
    ->ComputeStatistics("min", min_of)
    ->ComputeStatistics("max", max_of);
BENCHMARK_CAPTURE(BM_dpcls, 16masks_1k_generic, Scenario::masks16_1k, true)
    ->Unit(benchmark::kNanosecond)
    ->ComputeStatistics("min", min_of)
    ->ComputeStatistics("max", max_of);
BENCHMARK_CAPTURE(BM_dpcls, 1mask_100k_specialized, Scenario::mask1_100k, false)
    ->Unit(benchmark::kNanosecond)
    ->ComputeStatistics("min", min_of)
    ->ComputeStatistics("max", max_of);
BENCHMARK_CAPTURE(BM_dpcls, 1mask_100k_generic, Scenario::mask1_100k, true)
    ->Unit(benchmark::kNanosecond)
    ->ComputeStatistics("min", min_of)
    ->ComputeStatistics("max", max_of);

BENCHMARK_CAPTURE(BM_dpcls_paired, 16masks_100k, Scenario::masks16_100k)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_dpcls_paired, 16masks_1k, Scenario::masks16_1k)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_dpcls_paired, 1mask_100k, Scenario::mask1_100k)->MinTime(1.0);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  GainReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}

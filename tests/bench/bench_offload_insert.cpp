// Insertion rate into the sim NIC model (hal/sim/sim_flow.h): exact-match
// rules (the 5-tuple of a hot microflow -> port + count) created through the
// synchronous API one by one, and through the template/queue API in batches
// (async_create postponed, one push, one pull per batch).
//
// Two cost settings per path:
//   model  the model's default device costs (kDefaultCosts: sync create
//          20 us; async 2 us per push + 0.5 us per rule; orders of
//          magnitude, see sim_flow.h) — what the offload engine can expect
//          from the hardware;
//   zero   every device cost 0 — the same code path's own CPU per insert
//          (facade, pattern compile, handle, hash insert): keel's cost.
// Each iteration inserts one rule (sync) or one batch (async); when the
// exact table is near full the timer pauses and every rule is flushed.
//
//   build/host/tests/bench/bench_offload_insert --benchmark_min_time=1
// Figures: flows_per_s (rate), ns_per_flow (its inverse), on CPU time (the
// model's device costs are busy-waits, so they are CPU time too).
//
// Measured 2026-12-02, host preset (-O2), 2-core x86 VM shared with five
// other builds (load ~10: wall times are 2x the CPU times; CPU figures):
//   sync   model        ~45k flows/s   22.5 us/flow (20 us of it the model's device cost)
//   sync   zero         ~2.3-2.5M/s    0.39-0.43 us/flow  <- keel's own CPU per sync insert
//   async  model b=1    ~210-280k/s    3.6-4.8 us/flow
//   async  model b=16   ~520-690k/s    1.4-1.9 us/flow
//   async  model b=64   ~480-710k/s    1.4-2.1 us/flow
//   async  model b=256  ~680-790k/s    1.3-1.5 us/flow
//   async  zero  b=64   ~1.3-1.5M/s    0.69-0.78 us/flow  <- keel's own CPU per async insert
// (ranges: two runs.) The async path costs keel more CPU per rule than the
// sync one (template checks, the queue and the completion round trip), but
// with device costs batching wins ~15x over sync: the doorbell and
// completion cost is shared by the batch.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <vector>

#include "keel/hal/backend.h"
#include "keel/hal/flow.h"
#include "keel/hal/sim_nic.h"

using namespace keel;
using namespace keel::hal;

namespace {

constexpr uint32_t kOffloadFlows = 65536;  // host-sim's board
constexpr uint32_t kFill = 60000;          // flush below the exact table's 61440

struct Rig {
  std::unique_ptr<Backend> be;
  std::unique_ptr<Port> p1, p2;
  sim::SimNic* nic = nullptr;
  FlowEngine* e = nullptr;
  FlowPattern pattern;
  FlowActions actions;
  uint32_t n = 0;  // rules in the table now
  uint64_t seq = 0;

  explicit Rig(bool zero_cost) {
    auto b = make_sim_backend({.buffers = 256, .jumbo_buffers = 0, .offload_flows = kOffloadFlows});
    if (!b) std::abort();
    be = std::move(b).value();
    p1 = open("p1", 1);
    p2 = open("p2", 2);
    nic = sim::sim_nic(*be);
    e = p1->flow_engine();
    if (!nic || !e) std::abort();
    if (zero_cost) nic->set_costs({});
    FlowEth eth{}, ethm = flow_eth_mask_all();
    eth.dst = {2, 0, 0, 0, 0, 2}, eth.src = {2, 0, 0, 0, 0, 1}, eth.type = 0x0800;
    FlowIpv4 ip{}, ipm{};
    ip.src = 0x0a000001, ip.dst = 0x0a000002, ip.proto = 17;
    ipm.src = ipm.dst = ~0u, ipm.proto = 0xff;
    pattern.eth(eth, ethm).ipv4(ip, ipm).udp(FlowUdp{1, 2}, FlowUdp{0xffff, 0xffff});
    actions.port(2).count_hits();
  }
  std::unique_ptr<Port> open(const char* name, uint16_t id) {
    auto s = parse_port_spec(name, "ring:size=64");
    auto p = be->open_port(s.value(), 1, 1);
    if (!p) std::abort();
    p.value()->set_id(id);
    return std::move(p).value();
  }
  // The next distinct microflow (a few stores: part of what is measured).
  const FlowPattern& next() {
    ++seq;
    pattern.items[1].spec.ipv4.src = 0x0a000000u | static_cast<uint32_t>(seq >> 16);
    pattern.items[2].spec.udp.src = static_cast<uint16_t>(seq);
    pattern.items[2].spec.udp.dst = static_cast<uint16_t>(seq >> 8);
    return pattern;
  }
  void flush_if_full(benchmark::State& st, uint32_t room) {
    if (n + room <= kFill) return;
    st.PauseTiming();
    (void)e->flush(nullptr);
    n = 0;
    st.ResumeTiming();
  }
};

void report(benchmark::State& st, uint64_t flows) {
  st.SetItemsProcessed(static_cast<int64_t>(flows));
  st.counters["flows_per_s"] = benchmark::Counter(static_cast<double>(flows), benchmark::Counter::kIsRate);
  st.counters["ns_per_flow"] = benchmark::Counter(static_cast<double>(flows) / 1e9,
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_insert_sync(benchmark::State& st, bool zero_cost) {
  Rig r(zero_cost);
  const FlowAttr attr;
  uint64_t flows = 0;
  for (auto _ : st) {
    r.flush_if_full(st, 1);
    auto h = r.e->create(attr, r.next(), r.actions, nullptr);
    if (!h) {
      st.SkipWithError(h.status().message().c_str());
      break;
    }
    benchmark::DoNotOptimize(h.value());
    ++r.n;
    ++flows;
  }
  report(st, flows);
}

void BM_insert_async(benchmark::State& st, bool zero_cost) {
  const auto batch = static_cast<uint32_t>(st.range(0));
  Rig r(zero_cost);
  if (!r.e->configure(1, 4096, nullptr)) std::abort();
  auto pt = r.e->pattern_template({}, r.pattern, nullptr);
  auto at = r.e->actions_template({}, r.actions, r.actions, nullptr);
  if (!pt || !at) std::abort();
  const std::array pts{pt.value()};
  const std::array ats{at.value()};
  auto tbl = r.e->template_table(FlowAttr{}, kFill, pts, ats, nullptr);
  if (!tbl) std::abort();
  std::vector<FlowOpResult> res(batch);
  uint64_t flows = 0;
  for (auto _ : st) {
    r.flush_if_full(st, batch);
    for (uint32_t i = 0; i < batch; ++i) {
      FlowHandle h;
      if (!r.e->async_create(0, tbl.value(), r.next(), 0, r.actions, 0, true, i, &h, nullptr)) std::abort();
    }
    if (!r.e->push(0, nullptr)) std::abort();
    uint32_t done = 0;
    while (done < batch) done += r.e->pull(0, std::span(res).subspan(done), nullptr);
    for (const FlowOpResult& o : res)
      if (!o.ok) {
        st.SkipWithError("an async create failed");
        return;
      }
    r.n += batch;
    flows += batch;
  }
  report(st, flows);
}

}  // namespace

BENCHMARK_CAPTURE(BM_insert_sync, model, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_insert_sync, zero, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_insert_async, model, false)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_insert_async, zero, true)->Arg(64)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();

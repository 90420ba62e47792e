// bench_offload_revalidate — the hardware part of one revalidation round
// over N offloaded flows (default 100k), terse vs full.
//
// A Datapath with one unpinned PMD (flow table of 256k), sim ring ports on a
// sim backend whose NIC model holds 2M rules (bluefield3's offload_flows),
// N exact megaflows `in_port(1),eth_type(0x0800),ipv4(dst=10.x.y.z,
// proto=17,frag=no)` -> output 2 (installed with flow_put, as dpctl/add-flow),
// and the offload engine in its default mode (exact-match rules for hot
// microflows) with offload-promote-packets 1: one packet per flow makes its
// microflow hot and the engine inserts one exact rule per flow. Then, per
// round pair: one packet per flow (the NIC forwards it: every rule's
// counters move, so every round has N deltas to merge into N megaflows), a
// terse round (Offload::sync_stats(false): query_bulk of every rule by
// handle, deltas merged with Datapath::add_hw_stats), another packet per
// flow, a full round (sync_stats(true): one query per rule and, per rule,
// the flow read back from the datapath and its pattern re-built and
// compared — what reading rules back costs). Also the revalidator's whole
// terse dump (Datapath::flow_stats: the hook, then the PMDs' counters).
// The model's query cost: its default (hal/sim/sim_flow.h kDefaultCosts)
// unless `--zero-cost` (keel's own cost only).
//
//   bench_offload_revalidate [FLOWS] [ROUND_PAIRS] [--zero-cost]   (100000, 7)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "datapath/datapath.h"
#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "keel/hal/cpu.h"
#include "keel/hal/sim_nic.h"
#include "offload/offload.h"

using namespace keel;
using namespace std::chrono_literals;

namespace {

// Ethernet/IPv4/UDP, 60 bytes, to 10.x.y.z from i.
void fill(hal::Packet* p, uint32_t i) {
  uint8_t f[60] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0,
                   10, 0, 0, 1, 10, static_cast<uint8_t>(i >> 16), static_cast<uint8_t>(i >> 8),
                   static_cast<uint8_t>(i), 0x04, 0x00, 0x0f, 0xa0, 0, 26, 0, 0};
  std::memcpy(p->data(), f, sizeof f);
  (void)p->set_len(sizeof f);
}

bool check(bool ok, const char* what) {
  if (!ok) fprintf(stderr, "bench_offload_revalidate: %s\n", what);
  return ok;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

double ms_since(uint64_t t0) { return static_cast<double>(hal::now_ns() - t0) / 1e6; }

}  // namespace

int main(int argc, char** argv) {
  uint32_t n_flows = 100000;
  int pairs = 7;
  bool zero_cost = false;
  int pos = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--zero-cost") {
      zero_cost = true;
    } else if (pos++ == 0) {
      n_flows = static_cast<uint32_t>(std::strtoul(argv[i], nullptr, 10));
    } else {
      pairs = std::atoi(argv[i]);
    }
  }

  hal::SimOptions so;
  so.buffers = 8192;
  so.offload_flows = 2097152;
  auto be = hal::make_sim_backend(so);
  if (!check(be.ok(), "sim backend")) return 1;
  std::unique_ptr<hal::Backend> backend = std::move(be.value());
  hal::sim::SimNic* nic = hal::sim::sim_nic(*backend);
  if (!check(nic != nullptr, "no sim NIC model")) return 1;
  if (zero_cost) nic->set_costs({});
  const hal::sim::SimNicCosts costs = nic->costs();

  datapath::DatapathConfig cfg;
  cfg.pmd_cores = {-1};
  cfg.pmd.flow_capacity = 1u << 18;
  datapath::Datapath dp(cfg);
  auto open = [&](const char* name) -> hal::sim::RingPort* {
    auto spec = hal::parse_port_spec(name, "ring:size=4096");
    auto port = backend->open_port(*spec, 1, 1);
    auto* raw = dynamic_cast<hal::sim::RingPort*>(port->get());
    (void)dp.add_port(std::move(port.value()));
    return raw;
  };
  hal::sim::RingPort* in = open("p0");
  hal::sim::RingPort* out = open("p1");
  if (!check(dp.start({backend.get()}).ok(), "datapath start")) return 1;

  // N megaflows, one per destination address.
  const flow::DpActions to2 = flow::parse_dp_actions("2").value();
  const uint64_t t_put = hal::now_ns();
  for (uint32_t i = 0; i < n_flows; ++i) {
    char text[160];
    snprintf(text, sizeof text, "recirc_id(0),in_port(1),eth_type(0x0800),ipv4(dst=10.%u.%u.%u,proto=17,frag=no)",
             (i >> 16) & 255, (i >> 8) & 255, i & 255);
    auto m = flow::parse_dp_match(text);
    if (!check(m.ok() && dp.flow_put(*m, to2, std::nullopt, false).ok(), "flow_put")) return 1;
  }
  printf("megaflows installed: %zu in %.1f s\n", dp.flow_count(), ms_since(t_put) / 1000);

  offload::OffloadConfig ocfg;
  ocfg.enabled = true;
  ocfg.mode = offload::Mode::exact;
  ocfg.promote_packets = 1;
  ocfg.idle_ms = 0;  // nothing demoted between rounds
  ocfg.batch = 256;
  offload::Offload off(dp, ocfg);
  if (!check(off.start().ok(), "offload start")) return 1;
  if (!check(off.settle(60000), "offload engine did not settle")) return 1;

  auto drain = [&] {
    hal::Packet* got[32];
    size_t m, total = 0;
    while ((m = out->collect(got)) > 0) {
      for (size_t k = 0; k < m; ++k) hal::release(got[k]);
      total += m;
    }
    return total;
  };
  auto send = [&](uint32_t n, uint32_t window) {
    hal::Packet* pkts[32];
    size_t sent = 0, back = 0;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (sent < n) {
      back += drain();
      if (sent - back >= window) {
        if (std::chrono::steady_clock::now() > deadline) back = sent;
        std::this_thread::yield();
        continue;
      }
      unsigned k = backend->alloc_burst(std::span(pkts, std::min<size_t>(32, n - sent)));
      if (!k) {
        std::this_thread::yield();
        continue;
      }
      for (unsigned j = 0; j < k; ++j) fill(pkts[j], static_cast<uint32_t>(sent) + j);
      sent += in->inject(std::span(pkts, k));
    }
    for (int i = 0; i < 500 && back < sent; ++i) {
      std::this_thread::sleep_for(1ms);
      back += drain();
    }
  };
  auto rules = [&] {
    uint64_t n = 0;
    for (const auto& p : off.stats().ports) n += p.rules_full;
    return n;
  };

  // 1. Offload: one packet per flow per pass until every flow has its rule
  // (a microflow whose sampling slot another one held is posted next pass).
  const uint64_t t_off = hal::now_ns();
  for (int pass = 0; pass < 30 && rules() < n_flows; ++pass) {
    send(n_flows, 1024);
    (void)off.settle(60000);
  }
  const double off_s = ms_since(t_off) / 1000;
  const uint64_t n_rules = rules();
  printf("rules offloaded: %lu of %u in %.1f s (%.0f rules/s incl. traffic); model costs: query %lu ns, async rule %lu ns, "
         "push %lu ns, sync create %lu ns\n",
         static_cast<unsigned long>(n_rules), n_flows, off_s, static_cast<double>(n_rules) / off_s,
         static_cast<unsigned long>(costs.query_ns), static_cast<unsigned long>(costs.async_rule_ns),
         static_cast<unsigned long>(costs.async_batch_ns), static_cast<unsigned long>(costs.sync_create_ns));
  if (!check(n_rules >= n_flows, "not every flow offloaded")) return 1;

  // 2. Round pairs.
  std::vector<double> terse, full, dump;
  for (int r = 0; r < pairs; ++r) {
    send(n_flows, 1024);
    uint64_t t0 = hal::now_ns();
    (void)off.sync_stats(false, 60000);
    const double t = ms_since(t0);
    send(n_flows, 1024);
    t0 = hal::now_ns();
    (void)off.sync_stats(true, 60000);
    const double f = ms_since(t0);
    send(n_flows, 1024);
    std::vector<datapath::FlowStats> st;
    t0 = hal::now_ns();
    dp.flow_stats(st);  // the revalidator's whole terse dump: hook (terse hw round) + PMD counters
    const double d = ms_since(t0);
    terse.push_back(t);
    full.push_back(f);
    dump.push_back(d);
    uint64_t hw = 0;
    for (const auto& s : st) hw += s.packets;
    printf("pair %d: terse %.1f ms, full %.1f ms (%.1fx); flow_stats with the hw round %.1f ms; packets in flows %lu\n",
           r + 1, t, f, f / t, d, static_cast<unsigned long>(hw));
  }
  printf("bench_offload_revalidate flows=%lu zero_cost=%d terse_ms_median=%.1f terse_ms_min=%.1f terse_ms_max=%.1f "
         "full_ms_median=%.1f full_ms_min=%.1f full_ms_max=%.1f full_over_terse=%.2f flow_stats_ms_median=%.1f\n",
         static_cast<unsigned long>(n_rules), zero_cost ? 1 : 0, median(terse),
         *std::min_element(terse.begin(), terse.end()), *std::max_element(terse.begin(), terse.end()), median(full),
         *std::min_element(full.begin(), full.end()), *std::max_element(full.begin(), full.end()),
         median(full) / median(terse), median(dump));

  off.stop();
  dp.stop();
  dp.flow_flush();
  drain();
  return 0;
}

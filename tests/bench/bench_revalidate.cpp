// bench_revalidate — one revalidation round over N installed datapath flows
// (default 100k, Open vSwitch's revalidate-100k scenario; 1000000 for issue
// 18's million flows), terse vs full.
//
// A Datapath with one unpinned PMD with the default flow table (1M slots,
// committed as used; more when N asks), sim ring ports, and a
// Udpif with megaflows off and a stand-in translator (as
// tests/unit/udpif_test.cpp: in_port -> output:2, one rule) install one
// exact-match flow per UDP 5-tuple through real upcalls. Then, per round
// pair: one packet per flow (so every round has statistics to push to the
// rule, as when traffic keeps the flows alive), a terse round
// (Udpif::revalidate_now(true): flow ids and counters only), another packet
// per flow, a full round (revalidate_now(false): the flow dump with keys,
// masks and actions formatted). Prints every round and the medians. Before
// those, rule changes (issue 18): ROUND_PAIRS times a steady terse round and the
// round right after a flow-mod no flow can match (`in_port=65000`: nothing
// may be re-translated; the ratio of the two is the goal's, <= 1.2), and
// at the end the round after one that takes every flow (a higher priority
// rule for in_port 1 that drops: every flow re-translated and modified).
// The configured flow limit is max(N, 1000000) (`set flow-limit 1000000`).
// A round of more than 1.3 s adapts the flow limit down (Open vSwitch's
// rule) and the next round would delete flows down to it; each round is
// therefore run from the configured limit (Udpif::reset_flow_limit(), what
// `set flow-limit` and Open vSwitch's upcall/set-flow-limit do), and the
// limit that round left is printed (`limit after`).
//
// Memory (printed after the install): the process's resident set and the
// heap in use (glibc mallinfo2) before and after installing N flows, per
// flow; at the end the heap the ukeys held (given back when the Udpif goes,
// with its revalidators' per-round buffers) per ukey, and the rest of the
// install's heap per datapath flow (megaflow, actions, dpcls rule); the
// table's slot (8 bytes a flow, mapped, not heap) is in the resident set.
// The stand-in translator looks table 0 up as xlate does (its mask, its
// winner, the lookup recorded for the revalidator) and outputs to the
// port the winner's first action names, or drops; it is cheaper than
// xlate, so the overlapping round is a lower bound for keel's.
//
//   bench_revalidate [FLOWS] [ROUND_PAIRS]      (100000, 7)
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "datapath/datapath.h"
#include "flow/dp_actions.h"
#include "flow/of_actions.h"
#include "flow/of_match_syntax.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "ofproto/bridge.h"
#include "ofproto/udpif.h"

using namespace keel;
using namespace std::chrono_literals;

namespace {

// Ethernet/IPv4/UDP, 60 bytes; flow i: dst 10.x.y.z from i, sport from i.
void fill(hal::Packet* p, uint32_t i) {
  uint8_t f[60] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0,
                   10, 0, 0, 1, 10, static_cast<uint8_t>(i >> 16), static_cast<uint8_t>(i >> 8),
                   static_cast<uint8_t>(i), static_cast<uint8_t>(0x04 + (i >> 24)), static_cast<uint8_t>(i & 7),
                   0x0f, 0xa0, 0, 26, 0, 0};
  std::memcpy(p->data(), f, sizeof f);
  (void)p->set_len(sizeof f);
}

bool check(bool ok, const char* what) {
  if (!ok) fprintf(stderr, "bench_revalidate: %s\n", what);
  return ok;
}

// Resident bytes of this process (/proc/self/statm).
size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  if (!(f >> pages >> resident)) return 0;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Heap bytes in use (small chunks and mmapped ones).
size_t heap_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

}  // namespace

int main(int argc, char** argv) {
  const uint32_t n_flows = argc > 1 ? static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10)) : 100000;
  const int pairs = argc > 2 ? std::atoi(argv[2]) : 7;

  auto be = hal::make_sim_backend({.buffers = 8192});
  if (!check(be.ok(), "sim backend")) return 1;
  std::unique_ptr<hal::Backend> backend = std::move(be.value());
  datapath::DatapathConfig cfg;
  cfg.pmd_cores = {-1};
  if (n_flows > cfg.pmd.flow_capacity) cfg.pmd.flow_capacity = std::bit_ceil(n_flows);
  const uint32_t flow_limit = std::max<uint32_t>(n_flows, 1000000);
  datapath::Datapath dp(cfg);
  datapath::Rcu rcu;
  ofproto::Bridge bridge{"br0", &rcu};
  auto open = [&](const char* name) -> hal::sim::RingPort* {
    auto spec = hal::parse_port_spec(name, "ring:size=4096");
    auto port = backend->open_port(*spec, 1, 1);
    auto* raw = dynamic_cast<hal::sim::RingPort*>(port->get());
    (void)dp.add_port(std::move(port.value()));
    return raw;
  };
  hal::sim::RingPort* in = open("p0");
  hal::sim::RingPort* out = open("p1");
  auto add_rule = [&](const char* text) {
    auto f = flow::parse_of_flow(text);
    auto a = flow::parse_of_actions(f->actions, {}, f->actions_column);
    ofproto::FlowMod fm;
    fm.flow = *f;
    fm.actions = *a;
    return check(bridge.flow_mod(fm).ok(), text);
  };
  if (!add_rule("priority=1,in_port=1,actions=output:2")) return 1;

  ofproto::Udpif::set_megaflows_enabled(dp, false);
  auto udpif_ptr = std::make_unique<ofproto::Udpif>(
      dp, rcu,
      [&](const flow::FlowKey& key, bool, ofproto::Translation& t) {
        t.bridge = &bridge;
        t.rules_gen = bridge.rules_generation();
        t.wc.in_port = 0xffffffffu;
        t.wc.dl_type = 0xffff;
        const auto* rule =
            static_cast<const ofproto::OfRule*>(bridge.table(0).lookup(key, bridge.version(), &t.wc));
        t.deps.note(&bridge, 0, key, &key, rule);  // ports: OpenFlow N = datapath N here
        flow::DpActionsBuilder b;
        const auto* out = rule && !rule->actions.empty() ? std::get_if<flow::OfOutput>(&rule->actions[0]) : nullptr;
        if (out) b.output(out->port);
        t.actions = b.finish().value();
        if (rule) t.rules = {rule};
        return Status{};
      },
      nullptr,
      // Rounds only when asked (an hour between the thread's own): a round
      // of its own during a long install (1M flows: minutes on a loaded
      // machine) could be slow, adapt the limit down and delete flows.
      ofproto::UdpifKnobs{[flow_limit] { return flow_limit; }, [] { return uint32_t{3600000}; },
                          [] { return uint32_t{3600000}; }});
  ofproto::Udpif& udpif = *udpif_ptr;
  if (!check(dp.start({backend.get()}).ok(), "datapath start")) return 1;
  udpif.start();

  auto drain = [&] {
    hal::Packet* got[32];
    size_t m, total = 0;
    while ((m = out->collect(got)) > 0) {
      for (size_t k = 0; k < m; ++k) hal::release(got[k]);
      total += m;
    }
    return total;
  };
  // Sends flows [first, first + n) once, `window` packets in flight at most.
  auto send = [&](uint32_t first, uint32_t n, uint32_t window) {
    hal::Packet* pkts[32];
    size_t sent = 0, back = 0;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (sent < n) {
      back += drain();
      if (sent - back >= window) {
        if (std::chrono::steady_clock::now() > deadline) back = sent;  // lost ones: move on
        std::this_thread::yield();
        continue;
      }
      unsigned k = backend->alloc_burst(std::span(pkts, std::min<size_t>(32, n - sent)));
      if (!k) {
        std::this_thread::yield();
        continue;
      }
      for (unsigned j = 0; j < k; ++j) fill(pkts[j], first + static_cast<uint32_t>(sent) + j);
      sent += in->inject(std::span(pkts, k));
    }
    for (int i = 0; i < 200 && back < sent; ++i) {
      std::this_thread::sleep_for(1ms);
      back += drain();
    }
  };

  // 1. Install: every flow through an upcall (a few passes for the misses
  // the PMD dropped while its upcall records were all in flight).
  const size_t rss0 = resident_bytes(), heap0 = heap_bytes();
  const auto t_fill = std::chrono::steady_clock::now();
  for (int pass = 0; pass < 20 && dp.flow_count() < n_flows; ++pass) send(0, n_flows, 256);
  const double fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_fill).count();
  const ofproto::UdpifStats s0 = udpif.stats();
  printf("flows installed: %zu of %u in %.1f s (%lu upcalls, %.0f installs/s)\n", dp.flow_count(), n_flows, fill_s,
         static_cast<unsigned long>(s0.upcalls), s0.installs / fill_s);
  if (!check(dp.flow_count() >= n_flows, "not every flow installed")) return 1;
  const size_t n_installed = dp.flow_count();
  const double rss_per_flow = static_cast<double>(resident_bytes() - rss0) / static_cast<double>(n_installed);
  const double heap_per_flow = static_cast<double>(heap_bytes() - heap0) / static_cast<double>(n_installed);
  printf("memory: %.0f bytes a flow resident (%.1f MB for %zu flows), %.0f bytes a flow of heap\n", rss_per_flow,
         static_cast<double>(resident_bytes() - rss0) / 1e6, n_installed, heap_per_flow);

  // Every measured round starts from the configured limit (see the top);
  // what the round left it at is printed.
  auto timed_round = [&](bool terse) {
    udpif.reset_flow_limit();
    return udpif.revalidate_now(terse) / 1000.0;
  };
  std::vector<uint32_t> limits_after_full;

  // 2. Rule changes (first: full rounds on a loaded machine can take seconds, and
  // the flow limit then adapts down and deletes flows): per pair a steady terse round, then the round after
  // a flow-mod no flow can match; at the end one that takes every flow.
  std::vector<double> steady, nonoverlap, change_ratio;
  auto round_after = [&](const char* rule_text) {
    if (rule_text) (void)add_rule(rule_text);
    send(0, n_flows, 1024);
    const double ms = timed_round(true);
    return std::make_pair(ms, udpif.stats().last_round);
  };
  uint64_t nonoverlap_retranslated = 0;
  for (int r = 0; r < pairs; ++r) {
    const double st = round_after(nullptr).first;
    char text[64];
    snprintf(text, sizeof text, "priority=1,in_port=%d,actions=drop", 65000 + r);
    const auto [ms, lr] = round_after(text);
    steady.push_back(st);
    nonoverlap.push_back(ms);
    change_ratio.push_back(ms / st);
    nonoverlap_retranslated += lr.revalidated;
    printf("pair %d: steady %.1f ms, after a non-overlapping flow-mod %.1f ms (%.2fx; rules changed for %lu, "
           "lookups read %lu, re-translated %lu)\n",
           r + 1, st, ms, ms / st, static_cast<unsigned long>(lr.checked), static_cast<unsigned long>(lr.checked_deep),
           static_cast<unsigned long>(lr.revalidated));
  }

  // 3. Round pairs: traffic on every flow, terse round; traffic, full round.
  std::vector<double> terse, full, ratio;
  for (int r = 0; r < pairs; ++r) {
    send(0, n_flows, 1024);
    const double t = timed_round(true);
    const uint32_t lim_t = udpif.stats().flow_limit;
    send(0, n_flows, 1024);
    const double f = timed_round(false);
    const uint32_t lim_f = udpif.stats().flow_limit;
    limits_after_full.push_back(lim_f);
    terse.push_back(t);
    full.push_back(f);
    ratio.push_back(f / t);
    printf("pair %d: terse %.1f ms (limit after %u), full %.1f ms (limit after %u) (%.1fx); flows %zu\n", r + 1, t,
           lim_t, f, lim_f, f / t, dp.flow_count());
  }

  // 4. The flow-mod every flow overlaps (last: its flows drop afterwards).
  const auto [overlap_ms, ov] = round_after("priority=2,in_port=1,actions=drop");
  const uint32_t lim_ov = udpif.stats().flow_limit;
  printf("after an overlapping flow-mod: %.1f ms (re-translated %lu, modified %lu, deleted %lu; flows %zu; limit "
         "after %u)\n",
         overlap_ms, static_cast<unsigned long>(ov.revalidated), static_cast<unsigned long>(ov.modified),
         static_cast<unsigned long>(ov.deleted()), dp.flow_count(), lim_ov);
  printf("bench_revalidate flows=%zu terse_ms_median=%.1f terse_ms_min=%.1f terse_ms_max=%.1f full_ms_median=%.1f "
         "full_ms_min=%.1f full_ms_max=%.1f full_over_terse_median=%.2f steady_ms_median=%.1f "
         "nonoverlap_ms_median=%.1f nonoverlap_over_steady_median=%.2f nonoverlap_retranslated=%lu "
         "overlap_ms=%.1f overlap_retranslated=%lu overlap_modified=%lu overlap_limit_after=%u "
         "rss_bytes_per_flow=%.0f heap_bytes_per_flow=%.0f\n",
         dp.flow_count(), median(terse), *std::min_element(terse.begin(), terse.end()),
         *std::max_element(terse.begin(), terse.end()), median(full), *std::min_element(full.begin(), full.end()),
         *std::max_element(full.begin(), full.end()), median(ratio), median(steady), median(nonoverlap),
         median(change_ratio), static_cast<unsigned long>(nonoverlap_retranslated), overlap_ms,
         static_cast<unsigned long>(ov.revalidated), static_cast<unsigned long>(ov.modified), lim_ov, rss_per_flow,
         heap_per_flow);

  // 5. Memory by part: the ukeys' heap goes with the Udpif.
  udpif.stop();
  const size_t n_ukeys = udpif.stats().ukeys, n_dp = dp.flow_count();
  const size_t heap_a = heap_bytes();
  udpif_ptr.reset();
  const size_t heap_b = heap_bytes();
  const double ukey_b = n_ukeys ? static_cast<double>(heap_a - heap_b) / static_cast<double>(n_ukeys) : 0;
  printf("bench_revalidate_memory flows=%zu ukeys=%zu rss_bytes_per_flow=%.0f heap_bytes_per_flow=%.0f "
         "ukey_heap_bytes=%.0f datapath_heap_bytes_per_flow=%.0f table_slot_bytes=%zu megaflow_struct_bytes=%zu\n",
         n_dp, n_ukeys, rss_per_flow, heap_per_flow, ukey_b, heap_per_flow - ukey_b, sizeof(datapath::Megaflow*),
         sizeof(datapath::Megaflow));

  dp.stop();
  dp.drop_pending_upcalls();
  dp.flow_flush();
  drain();
  return 0;
}

// Flows installed, modified and removed from the control thread while a PMD
// forwards: nothing crashes and every packet is accounted for (forwarded,
// dropped by an action, lost on a miss, or dropped by a full tx ring). Run
// under TSan by the tsan preset.
#include <doctest/doctest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "datapath/datapath.h"
#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "eventually.h"

using namespace keel;

namespace {

flow::Match parse_match(const char* text) {
  auto m = flow::parse_dp_match(text);
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  return *m;
}

flow::DpActions parse_actions(const char* text) {
  auto a = flow::parse_dp_actions(text);
  REQUIRE_MESSAGE(a.ok(), a.status().message());
  return *a;
}

// An Ethernet/IPv4/UDP frame to 10.0.0.(i % 4).
void fill(hal::Packet* p, unsigned i) {
  uint8_t f[64] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0,
                   10, 0, 0, 1, 10, 0, 0, static_cast<uint8_t>(i % 4), 0x03, 0xe8, 0x07, 0xd0, 0, 30, 0, 0};
  std::memcpy(p->data(), f, sizeof f);
  (void)p->set_len(sizeof f);
}

}  // namespace

TEST_CASE("flow changes while a PMD forwards") {
  auto be = hal::make_sim_backend({.buffers = 4096});
  REQUIRE(be.ok());
  hal::Backend& backend = **be;
  datapath::Datapath dp({.pmd_cores = {-1}});
  auto open = [&](const char* name) {
    auto spec = hal::parse_port_spec(name, "ring:size=1024");
    REQUIRE(spec.ok());
    auto port = backend.open_port(*spec, 1, 1);
    REQUIRE(port.ok());
    auto* raw = dynamic_cast<hal::sim::RingPort*>(port->get());
    REQUIRE(raw != nullptr);
    REQUIRE(dp.add_port(std::move(port.value())).ok());
    return raw;
  };
  hal::sim::RingPort* in = open("p0");
  hal::sim::RingPort* out = open("p1");
  REQUIRE(dp.start({&backend}).ok());

  const flow::Match wide = parse_match("in_port(1),eth_type(0x0800),ipv4(frag=no)");
  const flow::Match narrow = parse_match("in_port(1),eth_type(0x0800),ipv4(dst=10.0.0.1,frag=no)");
  const flow::DpActions to_p1 = parse_actions("2");
  const flow::DpActions drop = parse_actions("drop");

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> injected{0}, collected{0};
  std::thread traffic([&] {
    hal::Packet* pkts[32];
    unsigned i = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      unsigned n = backend.alloc_burst(pkts);
      for (unsigned k = 0; k < n; ++k) fill(pkts[k], i++);
      size_t took = in->inject(std::span(pkts, n));
      for (size_t k = took; k < n; ++k) hal::release(pkts[k]);
      injected.fetch_add(took, std::memory_order_relaxed);
      hal::Packet* got[32];
      size_t m = out->collect(got);
      for (size_t k = 0; k < m; ++k) hal::release(got[k]);
      collected.fetch_add(m, std::memory_order_relaxed);
    }
  });

  // Control thread: churn the flow table.
  for (int round = 0; round < 300; ++round) {
    REQUIRE(dp.flow_put(wide, to_p1, std::nullopt, false).ok());
    REQUIRE(dp.flow_put(narrow, drop, std::nullopt, false).ok());
    REQUIRE(dp.flow_put(wide, drop, std::nullopt, true).ok());
    REQUIRE(dp.flow_put(wide, to_p1, std::nullopt, true).ok());
    CHECK(dp.flow_dump().size() == 2);
    REQUIRE(dp.flow_del(narrow).ok());
    if (round % 2) REQUIRE(dp.flow_del(wide).ok());
    else dp.flow_flush();
    dp.reclaim();
  }
  stop = true;
  traffic.join();
  // Let the PMD finish what is in the rx ring, with no flows: misses. Once
  // the ring is empty, wait_drained() waits until the PMD has handled what it
  // read last.
  REQUIRE(keel::test::eventually([&] { return in->rx_pending() == 0; }));
  REQUIRE(dp.wait_drained(keel::test::kPatienceMs));
  dp.stop();
  hal::Packet* got[32];
  size_t m;
  while ((m = out->collect(got)) > 0) {
    for (size_t k = 0; k < m; ++k) hal::release(got[k]);
    collected += m;
  }
  const datapath::PmdCounters c = dp.pmds()[0]->counters();
  MESSAGE("injected " << injected.load() << ", forwarded " << collected.load() << ", lost " << c.lost
                      << ", dropped by actions " << c.exec_dropped);
  CHECK(c.rx_packets == injected.load());
  CHECK(c.rx_packets == c.simple_hits + c.emc_hits + c.smc_hits + c.megaflow_hits + c.misses);
  const uint64_t tx_full = out->counters().tx_dropped;  // p1's ring full: counted by the port
  CHECK(collected.load() + c.exec_dropped + c.lost + tx_full == injected.load());
  CHECK(injected.load() > 0);
  dp.flow_flush();
  dp.reclaim();
}

TEST_CASE("an unpinned PMD is named by a CPU its thread may run on (display_core)") {
  auto be = hal::make_sim_backend({.buffers = 256});
  REQUIRE(be.ok());
  datapath::Datapath dp({.pmd_cores = {-1}});
  auto spec = hal::parse_port_spec("p0", "ring:size=64");
  REQUIRE(spec.ok());
  auto port = (*be)->open_port(*spec, 1, 1);
  REQUIRE(port.ok());
  REQUIRE(dp.add_port(std::move(port.value())).ok());
  const datapath::Pmd& pmd = *dp.pmds()[0];
  CHECK(pmd.core() < 0);
  CHECK(pmd.display_core() == 0);  // before its thread ever ran
  REQUIRE(dp.start({be->get()}).ok());
  // Sampled by the PMD thread as it starts: a CPU of the process's set.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  const int cpu = pmd.display_core();
  CHECK(cpu >= 0);
  CHECK(CPU_ISSET(cpu, &allowed));
  // flow-dump's header names the same core.
  const flow::Match m = parse_match("in_port(1),eth_type(0x0800)");
  REQUIRE(dp.flow_put(m, parse_actions("drop"), std::nullopt, false).ok());
  auto flows = dp.flow_dump();
  REQUIRE(flows.size() == 1);
  CHECK(flows[0].pmd_core == pmd.display_core());
  dp.stop();
}

// flow_dump_each hands every flow through one reused view (the revalidator's
// full round reads its counters without holding ~2 KB a flow): nothing of one
// flow may show through in the next, a drop flow after one with actions
// included. flow_dump() is built on it; flow_del(ufid) finds through it.
TEST_CASE("flow_dump_each: one reused view, each flow its own actions; flow_del by ufid") {
  auto be = hal::make_sim_backend({.buffers = 256});
  REQUIRE(be.ok());
  datapath::Datapath dp({.pmd_cores = {-1}});
  for (const char* name : {"p1", "p2", "p3"}) {
    auto spec = hal::parse_port_spec(name, "ring:size=64");
    REQUIRE(spec.ok());
    auto port = (*be)->open_port(*spec, 1, 1);
    REQUIRE(port.ok());
    REQUIRE(dp.add_port(std::move(port.value())).ok());
  }
  constexpr unsigned kFlows = 8;
  const char* matches[kFlows] = {"in_port(1),eth_type(0x0800)", "in_port(1),eth_type(0x0806)",
                                 "in_port(1),eth_type(0x86dd)", "in_port(1),eth_type(0x8847)",
                                 "in_port(2),eth_type(0x0800)", "in_port(2),eth_type(0x0806)",
                                 "in_port(2),eth_type(0x86dd)", "in_port(2),eth_type(0x8847)"};
  const char* actions[kFlows] = {"2", "drop", "3,2", "drop", "1", "drop", "3", "drop"};
  for (unsigned i = 0; i < kFlows; ++i)
    REQUIRE_MESSAGE(dp.flow_put(parse_match(matches[i]), parse_actions(actions[i]), std::nullopt, false).ok(), i);
  auto expect = [&](const datapath::FlowView& v) {
    for (unsigned i = 0; i < kFlows; ++i) {
      flow::Match m = parse_match(matches[i]);
      m.mask.recirc_id = 0xffffffffu;  // as flow_put makes it
      m.apply_mask();
      if (v.match == m) {
        const flow::DpActions a = parse_actions(actions[i]);
        CHECK(std::vector<uint8_t>(a.bytes().begin(), a.bytes().end()) == v.action_bytes);
        CHECK(v.actions == (a.bytes().empty() ? std::string("drop") : flow::format_dp_actions(a)));
        CHECK(v.shown_key == v.match.key);  // none given to flow_put: the masked key
        return i;
      }
    }
    FAIL("a flow nobody put");
    return kFlows;
  };
  unsigned seen = 0;
  std::vector<datapath::Ufid> ufids;
  dp.flow_dump_each([&](const datapath::FlowView& v) {
    seen |= 1u << expect(v);
    ufids.push_back(v.ufid);
  });
  CHECK(seen == (1u << kFlows) - 1);
  const auto views = dp.flow_dump();
  REQUIRE(views.size() == kFlows);
  for (const auto& v : views) expect(v);

  REQUIRE(dp.flow_del(ufids[1]).ok());
  CHECK(dp.flow_count() == kFlows - 1);
  const Status again = dp.flow_del(ufids[1]);
  CHECK(again.code() == Errc::not_found);
  for (const auto& v : dp.flow_dump()) CHECK(v.ufid != ufids[1]);
  dp.flow_flush();
  dp.reclaim();
  CHECK(dp.flow_count() == 0);
}

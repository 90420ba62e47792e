// The offload engine end to end: a running Datapath with sim ring ports,
// the sim backend's NIC model (hal/sim/sim_flow.h) and the engine's thread.
// A hot microflow gets an exact-match rule and later packets are forwarded
// by the "hardware" (the PMD stops counting them, the rule's counters
// advance, flow_dump totals stay exact); a flow whose actions need the Arm
// cores gets a MARK rule and its packets skip classification; each
// injected fault (insert refused, transient errors, table full, query
// failures, device reset) leaves forwarding correct and is counted, and a
// reset re-offloads what is still hot.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "datapath/datapath.h"
#include "eventually.h"
#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "keel/hal/sim_nic.h"
#include "offload/offload.h"
#include "sim_test_util.h"

using namespace keel;
using namespace keel::offload;

namespace {

using Bytes = std::vector<uint8_t>;

using test::parse_actions;
using test::parse_match;

// An IPv4/UDP frame from 10.0.0.1:sport to 10.0.0.2:2000 (checksum right).
Bytes udp_frame(uint16_t sport) {
  Bytes f = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00,  // eth
             0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0,                    // ipv4
             10, 0, 0, 1, 10, 0, 0, 2,                                    //
             static_cast<uint8_t>(sport >> 8), static_cast<uint8_t>(sport), 0x07, 0xd0, 0, 30, 0, 0};
  f.resize(64, 0xab);
  uint32_t s = 0;
  for (int k = 14; k < 34; k += 2) s += static_cast<uint32_t>(f[k] << 8 | f[k + 1]);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  f[24] = static_cast<uint8_t>(~s >> 8), f[25] = static_cast<uint8_t>(~s);
  return f;
}

const char* kMatch = "recirc_id(0),in_port(1),eth_type(0x0800),ipv4(proto=17,frag=no)";

struct Rig {
  std::unique_ptr<hal::Backend> backend = test::sim_backend(8192);
  datapath::Datapath dp{datapath::DatapathConfig{.pmd_cores = {-1}}};
  hal::sim::RingPort* in;
  hal::sim::RingPort* out;
  hal::sim::RingPort* out2;
  hal::sim::SimNic* nic = nullptr;
  std::unique_ptr<Offload> off;
  uint64_t received_out = 0, received_out2 = 0;

  explicit Rig(const char* actions = "2", Mode mode = Mode::exact) {
    in = test::add_sim_port(*backend, dp, "in");
    out = test::add_sim_port(*backend, dp, "out");
    out2 = test::add_sim_port(*backend, dp, "out2");
    nic = hal::sim::sim_nic(*backend);
    REQUIRE(nic != nullptr);
    nic->set_costs({});  // no modelled latency: the test waits for the engine, not the model
    REQUIRE(dp.flow_put(parse_match(kMatch), parse_actions(actions), std::nullopt, false).ok());
    REQUIRE(dp.start({backend.get()}).ok());
    OffloadConfig cfg;
    cfg.enabled = true;
    cfg.mode = mode;
    cfg.promote_packets = 4;
    cfg.idle_ms = 0;  // no demotion unless a test asks
    cfg.retry_base_ms = 1;
    off = std::make_unique<Offload>(dp, cfg);
    REQUIRE(off->start().ok());
  }
  ~Rig() {
    off->stop();
    dp.stop();
    drain();
  }
  void inject(uint16_t sport, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      const Bytes f = udp_frame(sport);
      hal::Packet* p = nullptr;
      REQUIRE(backend->alloc_burst({&p, 1}) == 1);
      REQUIRE(p->set_len(static_cast<uint32_t>(f.size())));
      std::memcpy(p->data(), f.data(), f.size());
      while (in->inject(std::span(&p, 1)) != 1) std::this_thread::yield();
    }
  }
  static uint64_t count(hal::sim::RingPort* r) {
    uint64_t n = 0;
    hal::Packet* got[32];
    size_t m;
    while ((m = r->collect(got)) > 0) {
      for (size_t i = 0; i < m; ++i) hal::release(got[i]);
      n += m;
    }
    return n;
  }
  void drain() {
    received_out += count(out);
    received_out2 += count(out2);
  }
  // Waits until `n` packets left through out (and out2 when `both`).
  bool wait_out(uint64_t n, bool both = false) {
    return test::eventually([&] {
      drain();
      return received_out >= n && (!both || received_out2 >= n);
    });
  }
  datapath::FlowView flow() {
    auto v = dp.flow_dump();  // runs the offload sync first: hardware counters included
    REQUIRE(v.size() == 1);
    return v[0];
  }
  FlowState state() {
    auto v = dp.flow_dump();
    REQUIRE(v.size() == 1);
    return off->flow_state(v[0].pmd, v[0].ufid);
  }
  bool wait_rules(uint32_t n) {
    return test::eventually([&] { return state().hw_rules == n; });
  }
  datapath::PmdCounters pmd() const { return dp.pmds()[0]->counters(); }
  PortOffloadStats port_stats(uint16_t port) {
    for (const auto& p : off->stats().ports)
      if (p.port == port) return p;
    FAIL("no such port");
    return {};
  }
  uint64_t failed(uint16_t port, const std::string& why) {
    for (const auto& f : port_stats(port).failed)
      if (f.reason == why) return f.count;
    return 0;
  }
};

}  // namespace

TEST_CASE("a hot microflow goes to the NIC; later packets bypass the PMD; totals stay exact") {
  Rig r;
  CHECK(r.state().reason == Reason::not_hot);
  r.inject(1000, 8);  // over the promotion threshold (4)
  REQUIRE(r.wait_out(8));
  REQUIRE(r.wait_rules(1));
  const FlowState st = r.state();
  CHECK(st.offload == datapath::FlowOffload::full);
  CHECK(st.decision == Decision::full_exact);
  CHECK(st.reason == Reason::ok);
  const uint64_t pmd_before = r.pmd().rx_packets;
  const datapath::FlowView before = r.flow();
  CHECK(before.packets == 8);

  r.inject(1000, 100);
  REQUIRE(r.wait_out(108));
  // The PMD saw none of them; the hardware counted them all.
  CHECK(r.pmd().rx_packets == pmd_before);
  const datapath::FlowView after = r.flow();
  CHECK(after.packets == 108);
  CHECK(after.hw_packets == 100 + before.hw_packets);
  CHECK(after.bytes == 108 * 64);
  CHECK(after.offload == datapath::FlowOffload::full);
  CHECK(r.in->counters().rx_hw_forwarded == after.hw_packets);
  CHECK(r.nic->stats().exact_rules == 1);
  auto offl = r.off->offloaded_flows();
  REQUIRE(offl.size() == 1);
  CHECK(offl[0].hw_packets == after.hw_packets);
  CHECK(r.port_stats(1).rules_full == 1);
  CHECK(r.port_stats(1).tables[0].inserted == 1);

  SUBCASE("another microflow of the same megaflow gets its own rule") {
    r.inject(1001, 8);
    REQUIRE(r.wait_out(116));
    REQUIRE(r.wait_rules(2));
    CHECK(r.nic->stats().exact_rules == 2);
  }
  SUBCASE("disable removes every rule; the PMD forwards again") {
    REQUIRE(r.off->set_enabled(false).ok());
    CHECK(r.nic->stats().exact_rules == 0);
    CHECK(r.flow().offload == datapath::FlowOffload::none);
    CHECK(r.off->flow_state(0, r.flow().ufid).reason == Reason::disabled);
    r.inject(1000, 10);
    REQUIRE(r.wait_out(118));
    CHECK(r.pmd().rx_packets == pmd_before + 10);
    CHECK(r.flow().packets == 118);
  }
  SUBCASE("idle rules are demoted") {
    REQUIRE(r.off->set_idle_ms(20).ok());
    REQUIRE(r.wait_rules(0));
    CHECK(r.state().reason == Reason::idle_demoted);
    CHECK(r.port_stats(1).tables[0].demoted == 1);
    CHECK(r.nic->stats().exact_rules == 0);
    CHECK(r.flow().packets == 108);  // nothing lost in the demotion
  }
}

TEST_CASE("megaflow mode: one masked rule, installed without waiting for hot microflows") {
  Rig r("2", Mode::megaflow);
  REQUIRE(r.wait_rules(1));
  CHECK(r.state().decision == Decision::full_masked);
  CHECK(r.nic->stats().masked_rules == 1);
  r.inject(7, 20);
  r.inject(8, 20);
  REQUIRE(r.wait_out(40));
  CHECK(r.pmd().rx_packets == 0);
  CHECK(r.flow().packets == 40);
  CHECK(r.flow().hw_packets == 40);
}

TEST_CASE("partial offload: actions that need the Arm cores get a MARK; the PMD skips classification") {
  Rig r("2,3");  // two outputs: not a hardware action list
  // keep_order stops the model's rule processing of a burst at the first
  // packet it leaves to the PMD, marked ones included: off, so every packet
  // of a burst gets its mark (the order is the PMD's anyway: all go there).
  r.nic->set_keep_order(false);
  CHECK(r.state().decision == Decision::partial);
  CHECK(r.state().text() == "not hot yet: actions need the Arm cores: output to several ports");
  r.inject(1000, 8);
  REQUIRE(r.wait_out(8, true));
  REQUIRE(r.wait_rules(1));
  const FlowState st = r.state();
  CHECK(st.offload == datapath::FlowOffload::partial);
  CHECK(st.mark != 0);
  CHECK(st.text() == "offloaded: actions need the Arm cores: output to several ports");
  const uint64_t hits0 = r.pmd().phwol_hits;
  r.inject(1000, 50);
  REQUIRE(r.wait_out(58, true));
  // Every later packet reached the PMD marked and skipped parse/EMC/dpcls.
  CHECK(r.pmd().phwol_hits == hits0 + 50);
  CHECK(r.flow().packets == 58);
  CHECK(r.received_out2 == 58);
}

TEST_CASE("faults: forwarding stays right, each is counted") {
  SUBCASE("insert refused (ENOTSUP): stays on the Arm path, the driver's words kept") {
    Rig r;
    r.nic->fail_next_creates(1, ENOTSUP);
    r.inject(1000, 8);
    REQUIRE(r.wait_out(8));
    REQUIRE(test::eventually([&] { return r.state().reason == Reason::refused; }));
    CHECK(r.state().hw_rules == 0);
    CHECK(r.state().offload == datapath::FlowOffload::none);
    CHECK(r.state().text().rfind("refused by the driver: ", 0) == 0);
    CHECK(r.failed(1, "refused by the driver") == 1);
    CHECK(!r.port_stats(1).last_error.empty());
    r.inject(1000, 20);
    REQUIRE(r.wait_out(28));
    CHECK(r.flow().packets == 28);
    CHECK(r.flow().hw_packets == 0);
  }
  SUBCASE("transient errors (EBUSY): retried with backoff, then offloaded") {
    Rig r;
    r.nic->fail_next_creates(2, EBUSY);
    r.inject(1000, 8);
    REQUIRE(r.wait_out(8));
    REQUIRE(r.wait_rules(1));
    CHECK(r.state().reason == Reason::ok);
    CHECK(r.nic->stats().injected_failures == 2);
  }
  SUBCASE("table full (ENOSPC): counted, forwarding on the PMD") {
    Rig r;
    r.nic->set_table_full(true);
    r.inject(1000, 8);
    REQUIRE(r.wait_out(8));
    REQUIRE(test::eventually([&] { return r.state().reason == Reason::table_full; }));
    CHECK(r.failed(1, "table full") == 1);
    r.inject(1000, 20);
    REQUIRE(r.wait_out(28));
    CHECK(r.flow().packets == 28);
  }
  SUBCASE("queries fail: counted; the next good round catches the counters up") {
    Rig r;
    r.inject(1000, 8);
    REQUIRE(r.wait_out(8));
    REQUIRE(r.wait_rules(1));
    r.nic->fail_next_queries(3, EBUSY);
    r.inject(1000, 30);
    REQUIRE(r.wait_out(38));
    REQUIRE(test::eventually([&] { return r.nic->stats().query_failures >= 3 && r.flow().packets == 38; }));
    CHECK(r.failed(1, "query failed") >= 3);
  }
  SUBCASE("device reset: rules forgotten, counted, what is still hot re-offloaded") {
    Rig r;
    r.inject(1000, 8);
    REQUIRE(r.wait_out(8));
    REQUIRE(r.wait_rules(1));
    r.inject(1000, 20);
    REQUIRE(r.wait_out(28));
    REQUIRE(r.flow().packets == 28);  // synced: nothing counted only in the device
    CHECK(r.port_stats(1).hw_uncounted_reset == 0);
    // Forwarded in hardware, perhaps not yet read by a stats round when the
    // device forgets its rules and their counters: what no rule answered
    // for is counted as lost at the reset, so the two add up.
    r.inject(1000, 20);
    REQUIRE(r.wait_out(48));
    r.nic->reset();
    REQUIRE(test::eventually([&] { return r.port_stats(1).resets == 1; }));
    CHECK(r.failed(1, "device reset") >= 1);
    const uint64_t lost = r.port_stats(1).hw_uncounted_reset;
    CHECK(lost <= 20);
    CHECK(r.flow().packets + lost == 48);
    // Still hot: back in the NIC without new promotion.
    REQUIRE(r.wait_rules(1));
    CHECK(r.nic->stats().exact_rules == 1);
    r.inject(1000, 20);
    REQUIRE(r.wait_out(68));
    CHECK(r.flow().packets + lost == 68);
    CHECK(r.port_stats(1).hw_uncounted_flow_gone == 0);
  }
  SUBCASE("a rule removed between stats rounds hands what it counted last to its flow") {
    Rig r;
    r.inject(1000, 8);
    REQUIRE(r.wait_out(8));
    REQUIRE(r.wait_rules(1));
    const datapath::FlowView v = r.dp.flow_dump().at(0);  // (a dump reads the counters first)
    r.inject(1000, 100);
    REQUIRE(r.wait_out(108));
    // New actions: the engine takes the flow's rule out (and decides anew).
    const uint64_t destroys = r.nic->stats().destroys;
    REQUIRE(r.dp.flow_modify(v.pmd, v.match, parse_actions("3")).ok());
    REQUIRE(test::eventually([&] { return r.nic->stats().destroys > destroys; }));
    CHECK(r.flow().packets == 108);
    const PortOffloadStats ps = r.port_stats(1);
    CHECK(ps.hw_uncounted_reset == 0);
    CHECK(ps.hw_uncounted_flow_gone == 0);
  }
}

TEST_CASE("flows the NIC can't take say why") {
  Rig r;
  SUBCASE("a recirculated flow") {
    REQUIRE(r.dp.flow_put(parse_match("recirc_id(0x5),in_port(1),eth_type(0x0800)"), parse_actions("2"), std::nullopt, false)
                .ok());
    REQUIRE(test::eventually([&] {
      for (const auto& v : r.dp.flow_dump())
        if (v.match.key.recirc_id == 5) return r.off->flow_state(v.pmd, v.ufid).text() == "recirculated flow";
      return false;
    }));
  }
  SUBCASE("explain (trace's line): the pure decision with this datapath's ports") {
    const auto d = r.off->explain(parse_match(kMatch), parse_actions("2").bytes());
    CHECK(d.decision == Decision::full_exact);
    const auto lb = r.off->explain(parse_match(kMatch), parse_actions("trunc(10),2").bytes());
    CHECK(lb.decision == Decision::partial);
    CHECK(lb.text() == "actions need the Arm cores: trunc");
    REQUIRE(r.off->set_enabled(false).ok());
    CHECK(r.off->explain(parse_match(kMatch), parse_actions("2").bytes()).text() == "offload disabled");
  }
  SUBCASE("config errors change nothing") {
    CHECK(!r.off->set_threads(0).ok());
    CHECK(!r.off->set_threads(99).ok());
    CHECK(!r.off->set_promote_packets(0).ok());
    CHECK(!r.off->set_idle_ms(5).ok());
    CHECK(r.off->config().threads == 1);
    CHECK(r.off->config().promote_packets == 4);
  }
}

TEST_CASE("two offload threads share the flows by ufid") {
  Rig r;
  REQUIRE(r.off->set_threads(2).ok());
  CHECK(r.off->config().threads == 2);
  r.inject(1000, 8);
  REQUIRE(r.wait_out(8));
  REQUIRE(r.wait_rules(1));
  r.inject(1000, 10);
  REQUIRE(r.wait_out(18));
  CHECK(r.flow().packets == 18);
}

// The datapath's reconfiguration while forwarding (issue 13): PMDs added
// and removed at run time (set_pmd_cores) while a 4-queue port's traffic
// flows, every packet forwarded exactly once with each flow's order kept;
// a queue's load history follows it to its new PMD; a PMD with no queue
// sleeps (idle cycles only); a port's queue count changes at run time with
// every PMD parked (a test-only port kind that supports it), and a refused
// change leaves the port as it was, polled again; a PMD that can't start
// is an error and the old cores come back; pmd-auto-lb rebalances an
// overloaded PMD from the control thread's ticks (needs rxq_sched's full
// implementation: the first cut's AutoLb never says rebalance).
// The interval clock is driven with Pmd::end_interval(), never by sleeping,
// and auto-lb's clock through auto_lb_tick's argument.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <thread>

#include "core/ring.h"
#include "datapath/datapath.h"
#include "eventually.h"
#include "sim_test_util.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "keel/hal/rss.h"

using namespace keel;
using keel::test::eventually;

namespace {

constexpr uint64_t kDay = 86'400'000'000'000ull;

// A UDP frame of flow `flow` whose payload carries (flow, seq).
void fill(hal::Packet* p, uint32_t flow, uint32_t seq) {
  uint8_t f[64] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00,
                   0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0,
                   10, 1, static_cast<uint8_t>(flow >> 8), static_cast<uint8_t>(flow),
                   10, 2, 0, static_cast<uint8_t>(flow * 7)};
  f[34] = static_cast<uint8_t>((1024 + flow) >> 8), f[35] = static_cast<uint8_t>(1024 + flow);
  f[36] = 0x0f, f[37] = 0xa0, f[38] = 0, f[39] = 30;
  std::memcpy(f + 42, &flow, 4);
  std::memcpy(f + 46, &seq, 4);
  std::memcpy(p->data(), f, sizeof f);
  (void)p->set_len(sizeof f);
}

struct Rig {
  std::unique_ptr<hal::Backend> backend;
  datapath::Datapath dp;
  hal::sim::RingPort* in = nullptr;   // p0: 4 rx queues (RSS), cross-connected to p1
  hal::sim::RingPort* out = nullptr;  // p1
  uint16_t in_id = 0, out_id = 0;
  std::map<uint32_t, uint32_t> next_seq;  // per flow: the seq expected next at the output
  uint64_t received = 0, duplicates_or_reordered = 0;

  explicit Rig(std::vector<int> cores)
      : dp({.pmd_cores = std::move(cores), .pmd_idle_sleep_us = 50, .pmd = {.load_interval_ns = kDay}}) {
    auto be = hal::make_sim_backend({.buffers = 16384});
    REQUIRE(be.ok());
    backend = std::move(be.value());
    in = open("p0", "ring:size=4096,rxq=4", in_id);
    out = open("p1", "ring:size=8192", out_id);
    dp.set_xconnect(in_id, out_id);
  }
  hal::sim::RingPort* open(const char* name, const char* spec_text, uint16_t& id) {
    return test::add_sim_port(*backend, dp, name, spec_text, 4, &id);
  }
  // Injects `rounds` rounds over `flows` flows (seq = round).
  uint64_t sent = 0;
  uint32_t round = 0;
  void inject_round(uint32_t flows) {
    hal::Packet* pkts[32];
    for (uint32_t f = 0; f < flows;) {
      const unsigned k = backend->alloc_burst(std::span(pkts, std::min(32u, flows - f)));
      REQUIRE(k > 0);
      for (unsigned j = 0; j < k; ++j) fill(pkts[j], f + j, round);
      size_t done = 0;
      while (done < k) {
        done += in->inject(std::span(pkts + done, k - done));
        if (done < k) {
          drain_out();
          std::this_thread::yield();
        }
      }
      f += k;
      sent += k;
    }
    ++round;
  }
  void drain_out() {
    hal::Packet* got[64];
    size_t m;
    while ((m = out->collect(got)) > 0) {
      for (size_t k = 0; k < m; ++k) {
        uint32_t flow, seq;
        std::memcpy(&flow, got[k]->data() + 42, 4);
        std::memcpy(&seq, got[k]->data() + 46, 4);
        uint32_t& want = next_seq[flow];
        if (seq != want) ++duplicates_or_reordered;
        want = seq + 1;
        ++received;
        hal::release(got[k]);
      }
    }
  }
  bool all_out() {
    drain_out();
    return received >= sent;
  }
  void close_interval(datapath::Pmd& pmd) {
    const uint32_t before = pmd.intervals_closed();
    pmd.end_interval();
    REQUIRE(eventually([&] { return pmd.intervals_closed() > before; }));
  }
  // Which PMD polls (port, queue), or -1.
  int pmd_of(uint16_t port, uint16_t q) {
    for (const auto& pmd : dp.pmds())
      for (const auto& rq : pmd->rx_queues())
        if (rq.port->id() == port && rq.queue == q) return static_cast<int>(pmd->index());
    return -1;
  }
};

}  // namespace

TEST_CASE("reconf: PMDs added and removed while a 4-queue port forwards: every packet once, flow order kept") {
  Rig r({-1});
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  constexpr uint32_t kFlows = 64;
  // 1 PMD -> 2 -> 1 -> 3 -> 2, with traffic before, between and after.
  const std::vector<std::vector<int>> steps = {{-1, -1}, {-1}, {-1, -1, -1}, {-1, -1}};
  for (int i = 0; i < 10; ++i) r.inject_round(kFlows);
  for (const auto& cores : steps) {
    // Changed while packets are still queued on the port's rx rings.
    std::vector<unsigned> forgotten;
    REQUIRE(r.dp.set_pmd_cores(cores, &forgotten).ok());
    CHECK(r.dp.pmds().size() == cores.size());
    // Every queue is polled by exactly one PMD.
    for (uint16_t q = 0; q < 4; ++q) CHECK(r.pmd_of(r.in_id, q) >= 0);
    size_t polled = 0;
    for (const auto& pmd : r.dp.pmds()) polled += pmd->rx_queues().size();
    CHECK(polled == 5);  // p0's 4 queues and p1's one
    for (int i = 0; i < 10; ++i) r.inject_round(kFlows);
  }
  REQUIRE(eventually([&] { return r.all_out(); }));
  r.dp.stop();
  r.drain_out();
  CHECK(r.received == r.sent);
  CHECK(r.duplicates_or_reordered == 0);
  CHECK(r.next_seq.size() == kFlows);
  for (const auto& [flow, next] : r.next_seq) CHECK(next == r.round);
}

TEST_CASE("reconf: a new PMD that can't start (no such core) is an error and the old PMDs poll everything") {
  Rig r({-1});
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  Status st = r.dp.set_pmd_cores({-1, 4095});
  CHECK(!st.ok());
  CHECK(st.message().find("pmd1") != std::string::npos);
  REQUIRE(r.dp.pmds().size() == 1);
  CHECK(r.dp.pmd_cores() == std::vector<int>{-1});
  CHECK(r.dp.pmds()[0]->running());
  for (uint16_t q = 0; q < 4; ++q) CHECK(r.pmd_of(r.in_id, q) == 0);
  for (int i = 0; i < 5; ++i) r.inject_round(32);
  REQUIRE(eventually([&] { return r.all_out(); }));
  r.dp.stop();
  CHECK(r.duplicates_or_reordered == 0);
}

TEST_CASE("reconf: a queue's load history follows it to another PMD") {
  Rig r({-1});
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  for (int i = 0; i < 20; ++i) r.inject_round(64);
  REQUIRE(eventually([&] { return r.all_out(); }));
  datapath::Pmd& first = *r.dp.pmds()[0];
  r.close_interval(first);
  r.close_interval(first);
  // The queues' measured cycles, as the scheduler sees them.
  std::vector<uint64_t> before;
  for (uint16_t q = 0; q < 4; ++q) before.push_back(r.dp.rxq_load(r.in_id, q).sum(datapath::kPmdIntervalMax));
  uint64_t total = 0;
  for (uint64_t c : before) total += c;
  REQUIRE(total > 0);

  REQUIRE(r.dp.set_pmd_cores({-1, -1}).ok());
  // Some queues moved to the new PMD; wherever each queue is, the PMD
  // polling it reports the queue's history (pmd-rxq-show, cycles-based
  // assignment).
  bool moved = false;
  for (uint16_t q = 0; q < 4; ++q) {
    const int k = r.pmd_of(r.in_id, q);
    REQUIRE(k >= 0);
    moved |= k == 1;
    const datapath::Pmd& pmd = *r.dp.pmds()[k];
    for (size_t i = 0; i < pmd.rx_queues().size(); ++i)
      if (pmd.rx_queues()[i].port->id() == r.in_id && pmd.rx_queues()[i].queue == q)
        CHECK(pmd.rxq_cycles(i) == before[q]);
  }
  CHECK(moved);
  const auto sched = r.dp.sched_rxqs();
  for (const auto& s : sched)
    if (s.port == r.in_id) CHECK(s.cycles == before[s.queue]);
  r.dp.stop();
}

TEST_CASE("reconf: a PMD with no rx queue sleeps: idle cycles only, and it still answers requests") {
  // Three PMDs, five queues (p0's 4, p1's 1): round-robin gives each some;
  // with one more PMD than queues, one has none.
  Rig r({-1, -1, -1, -1, -1, -1});
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  const datapath::Pmd* empty = nullptr;
  for (const auto& pmd : r.dp.pmds())
    if (pmd->rx_queues().empty()) empty = pmd.get();
  REQUIRE(empty != nullptr);
  for (int i = 0; i < 5; ++i) r.inject_round(64);
  REQUIRE(eventually([&] { return r.all_out(); }));
  // It keeps iterating (sleeping between looks at its request ring) ...
  const uint64_t it = empty->iterations();
  REQUIRE(eventually([&] { return empty->iterations() > it + 3; }));
  const datapath::PmdCounters c = empty->counters();
  CHECK(c.busy_cycles == 0);
  CHECK(c.idle_cycles > 0);
  CHECK(c.rx_packets == 0);
  // ... and a flow request reaches it (dp-flow add installs in every PMD).
  flow::Match m;
  m.key.in_port = r.in_id;
  m.mask.in_port = 0xffffffffu;
  flow::DpActionsBuilder b;
  b.output(r.out_id);
  auto acts = b.finish();
  REQUIRE(acts.ok());
  REQUIRE(r.dp.flow_put(m, *acts, std::nullopt, false).ok());
  CHECK(r.dp.flow_count() == r.dp.pmds().size());
  r.dp.stop();
}

namespace {

// A port whose queue count can change (the sim backends' apply_queue_count
// is another change): rx from per-queue rings, tx counted and released.
class TestQueuesPort final : public hal::Port {
 public:
  TestQueuesPort() : hal::Port("tq", "test") {
    for (auto& r : rings_) r = std::make_unique<MpmcRing<hal::Packet*>>(1024);
    set_queues(2, 1);
  }
  ~TestQueuesPort() override {
    hal::Packet* p;
    for (auto& r : rings_)
      while (r->pop(p)) hal::release(p);
  }
  bool refuse = false;
  std::atomic<int> applied{0};
  bool inject(uint16_t q, hal::Packet* p) { return rings_[q]->push(p); }
  std::string describe() const override { return "test"; }
  hal::LinkState link() const override { return {.up = true}; }

 protected:
  uint16_t rx_burst(uint16_t q, std::span<hal::Packet*> out) noexcept override {
    // The datapath promises nobody polls a queue the port doesn't have.
    if (q >= n_rxq()) bad_poll.store(true);
    return static_cast<uint16_t>(rings_[q]->pop_bulk(out));
  }
  uint16_t tx_burst(uint16_t, std::span<hal::Packet* const> pkts) noexcept override {
    hal::release_burst(pkts);
    return static_cast<uint16_t>(pkts.size());
  }
  Status apply_queue_count(uint16_t n_rx, uint16_t& n_tx) override {
    if (refuse) return error(Errc::unsupported, "refused by the test");
    applied.fetch_add(1);
    set_queues(n_rx, n_tx);
    return {};
  }

 public:
  std::atomic<bool> bad_poll{false};

 private:
  std::array<std::unique_ptr<MpmcRing<hal::Packet*>>, kMaxQueues> rings_;
};

}  // namespace

TEST_CASE("reconf: a port's rx queue count changes at run time; a refused change leaves it polled as before") {
  auto be = hal::make_sim_backend({.buffers = 4096});
  REQUIRE(be.ok());
  datapath::Datapath dp({.pmd_cores = {-1, -1}, .pmd_idle_sleep_us = 50, .pmd = {.load_interval_ns = kDay}});
  auto owned = std::make_unique<TestQueuesPort>();
  TestQueuesPort* port = owned.get();
  auto id = dp.add_port(std::move(owned));
  REQUIRE(id.ok());
  dp.set_xconnect(*id, *id);  // out the same port (tx counted)
  REQUIRE(dp.start({be.value().get()}).ok());
  auto polled = [&] {
    size_t n = 0;
    for (const auto& pmd : dp.pmds()) n += pmd->rx_queues().size();
    return n;
  };
  CHECK(polled() == 2);

  REQUIRE(dp.set_port_rxqs(*id, 4).ok());
  CHECK(port->n_rxq() == 4);
  CHECK(polled() == 4);
  // Traffic on the new queues is forwarded.
  for (uint16_t q = 0; q < 4; ++q) {
    hal::Packet* p;
    REQUIRE(be.value()->alloc_burst(std::span(&p, 1)) == 1);
    fill(p, q, 0);
    REQUIRE(port->inject(q, p));
  }
  REQUIRE(eventually([&] { return port->counters().tx_packets == 4; }));

  REQUIRE(dp.set_port_rxqs(*id, 1).ok());
  CHECK(polled() == 1);
  CHECK(port->applied.load() == 2);

  port->refuse = true;
  CHECK(!dp.set_port_rxqs(*id, 3).ok());
  CHECK(port->n_rxq() == 1);
  CHECK(polled() == 1);
  hal::Packet* p;
  REQUIRE(be.value()->alloc_burst(std::span(&p, 1)) == 1);
  fill(p, 9, 0);
  REQUIRE(port->inject(0, p));
  REQUIRE(eventually([&] { return port->counters().tx_packets == 5; }));
  CHECK(!dp.set_port_rxqs(*id, 0).ok());
  CHECK(!port->bad_poll.load());
  dp.stop();
}

TEST_CASE("reconf: pmd-auto-lb rebalances an overloaded PMD on the control thread's ticks (driven clock)") {
  // Traffic on queues 0 and 2 of p0 only; roundrobin put both on PMD 0.
  // Thresholds 0 (every interval overloaded, any improvement enough), the
  // clock driven through auto_lb_tick's argument, intervals closed by hand.
  Rig r({-1, -1});
  r.dp.set_rxq_assign(datapath::RxqAssignMode::roundrobin);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  REQUIRE(r.pmd_of(r.in_id, 0) == r.pmd_of(r.in_id, 2));
  r.dp.set_rxq_assign(datapath::RxqAssignMode::cycles);  // no reassignment yet
  r.dp.configure_auto_lb({.enabled = true, .load_threshold_pct = 0, .improvement_threshold_pct = 0,
                          .rebal_interval_ms = 60'000});
  std::vector<uint32_t> busy_flows;  // flows RSS puts on queues 0 and 2
  for (uint32_t f = 0; f < 4096 && busy_flows.size() < 64; ++f) {
    hal::Packet* p;
    REQUIRE(r.backend->alloc_burst(std::span(&p, 1)) == 1);
    fill(p, f, 0);
    uint32_t hash = 0;
    REQUIRE(hal::rss_hash_frame(p->data(), p->len(), hash));
    const uint16_t q = hal::RssReta(4).queue_for(hash);
    hal::release(p);
    if (q == 0 || q == 2) busy_flows.push_back(f);
  }
  REQUIRE(busy_flows.size() == 64);
  CHECK(!r.dp.auto_lb_tick(1'000));  // starts the rebalance timer
  for (unsigned i = 0; i < datapath::kPmdIntervalMax + 1; ++i) {
    hal::Packet* pkts[64];
    REQUIRE(r.backend->alloc_burst(std::span(pkts, 64)) == 64);
    for (unsigned j = 0; j < 64; ++j) fill(pkts[j], busy_flows[j], r.round);
    ++r.round;
    size_t done = 0;
    while (done < 64) done += r.in->inject(std::span(pkts + done, 64 - done));
    r.sent += 64;
    REQUIRE(eventually([&] { return r.all_out(); }));
    for (const auto& pmd : r.dp.pmds()) r.close_interval(*pmd);
    CHECK(!r.dp.auto_lb_tick(2'000 + i));  // the interval (1 minute) has not passed
  }
  CHECK(r.dp.auto_lb_tick(62'000));
  CHECK(r.pmd_of(r.in_id, 0) != r.pmd_of(r.in_id, 2));
  r.dp.stop();
  CHECK(r.duplicates_or_reordered == 0);
}

// Rx queue scheduling (datapath/rxq_sched.h) against Open vSwitch 3.1.0:
// the placements of pmd-rxq-assign cycles / roundrobin / group with and
// without measured cycles, pmd-rxq-affinity with pmd-rxq-isolate true and
// false, a queue pinned to a core without a PMD, queues no PMD may take; the
// pmd-rxq-affinity parser; and pmd-auto-lb's decision (the integer variance,
// the improvement threshold, the rebalance interval, the overload run of
// non-isolated PMDs only).
//
// The "live" cases were run on Open vSwitch 3.1.0 (Debian's ovs-vswitchd,
// userspace datapath, --enable-dummy=override --dummy-numa="0,0,0,0", a
// bridge with datapath_type=netdev and `type=dummy-pmd options:n_rxq=N`
// ports), reading `ovs-appctl dpif-netdev/pmd-rxq-show` and the log. Dummy
// ports measure no cycles, so those cases are the 0-cycle ones; the
// placements with cycles follow the source (lib/dpif-netdev.c) by hand.
#include "datapath/rxq_sched.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "datapath/pmd.h"

using namespace keel::datapath;

static_assert(kAutoLbOverloadIntervals == kPmdIntervalMax,
              "the overload run is PMD_INTERVAL_MAX intervals, the load window's length");

namespace {

SchedRxq rxq(uint16_t port, uint16_t queue, std::string name, uint64_t cycles = 0, int affinity = -1) {
  return SchedRxq{
      .port = port, .queue = queue, .port_name = std::move(name), .cycles = cycles, .affinity = affinity};
}

// n queues of one port (datapath port 1, "p0"), no cycles.
std::vector<SchedRxq> port_queues(unsigned n, std::vector<int> affinity = {}) {
  std::vector<SchedRxq> q;
  for (unsigned i = 0; i < n; ++i)
    q.push_back(rxq(1, static_cast<uint16_t>(i), "p0", 0, i < affinity.size() ? affinity[i] : -1));
  return q;
}

// The queues a PMD polls, as "p0/0 p0/3", in pmd-rxq-show's order (by port
// name, then queue id).
std::string on_pmd(const SchedPlan& plan, const std::vector<SchedRxq>& q, int pmd) {
  std::vector<std::pair<std::string, uint16_t>> polled;
  for (size_t i = 0; i < q.size(); ++i)
    if (plan.pmd_of[i] == pmd) polled.emplace_back(q[i].port_name, q[i].queue);
  std::sort(polled.begin(), polled.end());
  std::string out;
  for (const auto& [name, queue] : polled)
    out += (out.empty() ? "" : " ") + name + "/" + std::to_string(queue);
  return out;
}

SchedConfig config(std::vector<int> cores, RxqAssignMode mode, bool isolate = true) {
  return SchedConfig{.pmd_cores = std::move(cores), .mode = mode, .isolate = isolate};
}

}  // namespace

TEST_CASE("rxq assignment: the three modes place 90/10/10/10 differently") {
  const std::vector<SchedRxq> q = {rxq(1, 0, "p0", 90), rxq(1, 1, "p0", 10), rxq(1, 2, "p0", 10),
                                   rxq(1, 3, "p0", 10)};
  SUBCASE("cycles: largest first, PMDs walked up then down (0,1,1,0)") {
    const SchedPlan p = plan_rxqs(q, config({0, 1}, RxqAssignMode::cycles));
    CHECK(p.pmd_of == std::vector<int>{0, 1, 1, 0});
    CHECK(p.pmd_cycles == std::vector<uint64_t>{100, 20});
  }
  SUBCASE("group: each onto the least loaded PMD") {
    const SchedPlan p = plan_rxqs(q, config({0, 1}, RxqAssignMode::group));
    CHECK(p.pmd_of == std::vector<int>{0, 1, 1, 1});
    CHECK(p.pmd_cycles == std::vector<uint64_t>{90, 30});
  }
  SUBCASE("roundrobin: walk order, cycles ignored") {
    const SchedPlan p = plan_rxqs(q, config({0, 1}, RxqAssignMode::roundrobin));
    CHECK(p.pmd_of == std::vector<int>{0, 1, 0, 1});
  }
}

// Live, 8 queues, no cycles (the same as tests/pmd.at "pmd-cpu-mask/
// distribution of rx queues"):
//   pmd-cpu-mask=0x3 roundrobin  core 0: p0/0 p0/2 p0/4 p0/6   core 1: p0/1 p0/3 p0/5 p0/7
//                    cycles      core 0: p0/0 p0/3 p0/4 p0/7   core 1: p0/1 p0/2 p0/5 p0/6
//                    group       core 0: p0/0 p0/2 p0/4 p0/6   core 1: p0/1 p0/3 p0/5 p0/7
//   pmd-cpu-mask=0x7 cycles      core 0: p0/0 p0/5 p0/6  core 1: p0/1 p0/4 p0/7  core 2: p0/2 p0/3
//                    roundrobin  core 0: p0/0 p0/3 p0/6  core 1: p0/1 p0/4 p0/7  core 2: p0/2 p0/5
//                    group       core 0: p0/0 p0/3 p0/6  core 1: p0/1 p0/4 p0/7  core 2: p0/2 p0/5
TEST_CASE("rxq assignment: 8 queues without cycles, as Open vSwitch placed them live") {
  const std::vector<SchedRxq> q = port_queues(8);
  SUBCASE("2 PMDs") {
    const SchedPlan rr = plan_rxqs(q, config({0, 1}, RxqAssignMode::roundrobin));
    CHECK(on_pmd(rr, q, 0) == "p0/0 p0/2 p0/4 p0/6");
    CHECK(on_pmd(rr, q, 1) == "p0/1 p0/3 p0/5 p0/7");
    const SchedPlan cy = plan_rxqs(q, config({0, 1}, RxqAssignMode::cycles));
    CHECK(on_pmd(cy, q, 0) == "p0/0 p0/3 p0/4 p0/7");
    CHECK(on_pmd(cy, q, 1) == "p0/1 p0/2 p0/5 p0/6");
    // group without cycles: the PMD with the fewest queues.
    const SchedPlan gr = plan_rxqs(q, config({0, 1}, RxqAssignMode::group));
    CHECK(on_pmd(gr, q, 0) == "p0/0 p0/2 p0/4 p0/6");
    CHECK(on_pmd(gr, q, 1) == "p0/1 p0/3 p0/5 p0/7");
    CHECK(cy.isolated == std::vector<bool>{false, false});
    CHECK(cy.messages.empty());
  }
  SUBCASE("3 PMDs") {
    const SchedPlan cy = plan_rxqs(q, config({0, 1, 2}, RxqAssignMode::cycles));
    CHECK(on_pmd(cy, q, 0) == "p0/0 p0/5 p0/6");
    CHECK(on_pmd(cy, q, 1) == "p0/1 p0/4 p0/7");
    CHECK(on_pmd(cy, q, 2) == "p0/2 p0/3");
    for (RxqAssignMode m : {RxqAssignMode::roundrobin, RxqAssignMode::group}) {
      const SchedPlan p = plan_rxqs(q, config({0, 1, 2}, m));
      CHECK(on_pmd(p, q, 0) == "p0/0 p0/3 p0/6");
      CHECK(on_pmd(p, q, 1) == "p0/1 p0/4 p0/7");
      CHECK(on_pmd(p, q, 2) == "p0/2 p0/5");
    }
  }
}

// Live: three 2-queue ports, p0 = datapath port 1, p2 = 2, p1 = 3 (ofport
// 2 got datapath port 3), pmd-cpu-mask=0x7 roundrobin:
//   core 0: p0/0 p2/1   core 1: p0/1 p1/0   core 2: p1/1 p2/0
// (Open vSwitch walked its ports in datapath port order.)
TEST_CASE("rxq assignment: several ports are walked in the order given (datapath port order)") {
  const std::vector<SchedRxq> q = {rxq(1, 0, "p0"), rxq(1, 1, "p0"), rxq(2, 0, "p2"),
                                   rxq(2, 1, "p2"), rxq(3, 0, "p1"), rxq(3, 1, "p1")};
  const SchedPlan p = plan_rxqs(q, config({0, 1, 2}, RxqAssignMode::roundrobin));
  CHECK(on_pmd(p, q, 0) == "p0/0 p2/1");
  CHECK(on_pmd(p, q, 1) == "p0/1 p1/0");
  CHECK(on_pmd(p, q, 2) == "p1/1 p2/0");
}

TEST_CASE("rxq assignment: PMDs are walked by core id, not by their index") {
  const std::vector<SchedRxq> q = port_queues(3);
  // PMD 0 runs on core 5, PMD 1 on core 2: core 2 comes first.
  const SchedPlan rr = plan_rxqs(q, config({5, 2}, RxqAssignMode::roundrobin));
  CHECK(rr.pmd_of == std::vector<int>{1, 0, 1});
  const SchedPlan gr = plan_rxqs(q, config({5, 2}, RxqAssignMode::group));
  CHECK(gr.pmd_of == std::vector<int>{1, 0, 1});
}

TEST_CASE("rxq assignment: equal cycles are ordered by port, then queue") {
  // Given out of order; compare_rxq_cycles() sorts (1,0) (1,1) (2,0) for
  // the up-down walk 0,1,1.
  const std::vector<SchedRxq> q = {rxq(2, 0, "b", 5), rxq(1, 1, "a", 5), rxq(1, 0, "a", 5)};
  const SchedPlan p = plan_rxqs(q, config({0, 1}, RxqAssignMode::cycles));
  CHECK(p.pmd_of == std::vector<int>{1, 1, 0});
  // More cycles still go first whatever the port.
  const std::vector<SchedRxq> q2 = {rxq(1, 0, "a", 1), rxq(2, 0, "b", 7)};
  CHECK(plan_rxqs(q2, config({0, 1}, RxqAssignMode::cycles)).pmd_of == std::vector<int>{1, 0});
}

TEST_CASE("rxq assignment: group weighs a queue without cycles by queue count, one with cycles by cycles") {
  // q0 (100 cycles) -> PMD 0; q1..q3 have none, so each goes to the PMD
  // polling the fewest queues (ties: the lower core), not the one with the
  // fewest cycles (which would put all three on PMD 1).
  const std::vector<SchedRxq> q = {rxq(1, 0, "p0", 100), rxq(1, 1, "p0"), rxq(1, 2, "p0"), rxq(1, 3, "p0")};
  const SchedPlan p = plan_rxqs(q, config({0, 1}, RxqAssignMode::group));
  CHECK(p.pmd_of == std::vector<int>{0, 1, 0, 1});
  // With cycles on all of them the least loaded PMD wins each time.
  const std::vector<SchedRxq> q2 = {rxq(1, 0, "p0", 100), rxq(1, 1, "p0", 1), rxq(1, 2, "p0", 1),
                                    rxq(1, 3, "p0", 1)};
  CHECK(plan_rxqs(q2, config({0, 1}, RxqAssignMode::group)).pmd_of == std::vector<int>{0, 1, 1, 1});
}

// Live, 8 queues, pmd-cpu-mask=0x7, pmd-rxq-affinity="0:1,3:1":
//   cycles                  core 0: p0/1 p0/5 p0/6  core 1 (isolated): p0/0 p0/3  core 2: p0/2 p0/4 p0/7
//   + pmd-rxq-isolate=false (log: "pmd-rxq-isolate can only be set false when using
//                            pmd-rxq-assign=group"): unchanged
//   roundrobin              core 0: p0/1 p0/4 p0/6  core 1 (isolated): p0/0 p0/3  core 2: p0/2 p0/5 p0/7
//   group                   core 0: p0/1 p0/4 p0/6  core 1 (not isolated): p0/0 p0/3 p0/7  core 2: p0/2 p0/5
TEST_CASE("rxq assignment: pinned queues, isolation, as Open vSwitch placed them live") {
  const std::vector<SchedRxq> q = port_queues(8, {1, -1, -1, 1});
  SUBCASE("cycles, isolated: the walk skips the pinned PMD but keeps its turn") {
    const SchedPlan p = plan_rxqs(q, config({0, 1, 2}, RxqAssignMode::cycles));
    CHECK(on_pmd(p, q, 0) == "p0/1 p0/5 p0/6");
    CHECK(on_pmd(p, q, 1) == "p0/0 p0/3");
    CHECK(on_pmd(p, q, 2) == "p0/2 p0/4 p0/7");
    CHECK(p.isolated == std::vector<bool>{false, true, false});
    CHECK(p.messages.empty());
    // The log lines, as Open vSwitch wrote them.
    REQUIRE(p.info.size() == 9);
    CHECK(p.info[0] ==
          "Core  1 on numa node 0 is pinned with port 'p0' rx queue 0 (measured processing cycles 0)");
    CHECK(p.info[2] == "Performing pmd to rx queue assignment using cycles algorithm.");
    CHECK(p.info[3] ==
          "Core  0 on numa node 0 assigned port 'p0' rx queue 1 (measured processing cycles 0).");
  }
  SUBCASE("isolate=false holds only with group") {
    const SchedPlan p = plan_rxqs(q, config({0, 1, 2}, RxqAssignMode::cycles, false));
    CHECK(on_pmd(p, q, 1) == "p0/0 p0/3");
    CHECK(p.isolated == std::vector<bool>{false, true, false});
    CHECK(rxq_isolate_warning(config({0, 1, 2}, RxqAssignMode::cycles, false)) ==
          "pmd-rxq-isolate can only be set false when using pmd-rxq-assign=group");
    CHECK(rxq_isolate_warning(config({0, 1, 2}, RxqAssignMode::group, false)).empty());
    CHECK(rxq_isolate_warning(config({0, 1, 2}, RxqAssignMode::cycles, true)).empty());
  }
  SUBCASE("roundrobin, isolated") {
    const SchedPlan p = plan_rxqs(q, config({0, 1, 2}, RxqAssignMode::roundrobin));
    CHECK(on_pmd(p, q, 0) == "p0/1 p0/4 p0/6");
    CHECK(on_pmd(p, q, 1) == "p0/0 p0/3");
    CHECK(on_pmd(p, q, 2) == "p0/2 p0/5 p0/7");
    CHECK(p.info[0] == "Core  1 on numa node 0 is pinned with port 'p0' rx queue 0");
    CHECK(p.info[3] == "Core  0 on numa node 0 assigned port 'p0' rx queue 1.");
  }
  SUBCASE("group, not isolated: the pinned PMD's queues count in its load") {
    const SchedPlan p = plan_rxqs(q, config({0, 1, 2}, RxqAssignMode::group, false));
    CHECK(on_pmd(p, q, 0) == "p0/1 p0/4 p0/6");
    CHECK(on_pmd(p, q, 1) == "p0/0 p0/3 p0/7");
    CHECK(on_pmd(p, q, 2) == "p0/2 p0/5");
    CHECK(p.isolated == std::vector<bool>{false, false, false});
  }
  SUBCASE("group, isolated") {
    const SchedPlan p = plan_rxqs(q, config({0, 1, 2}, RxqAssignMode::group, true));
    CHECK(on_pmd(p, q, 1) == "p0/0 p0/3");
    CHECK(p.isolated == std::vector<bool>{false, true, false});
  }
}

TEST_CASE("rxq assignment: group without isolation weighs the pinned cycles") {
  // PMD 0 holds a pinned 50-cycle queue and still takes unpinned ones,
  // weighed with the pinned cycles.
  const std::vector<SchedRxq> q = {rxq(1, 0, "p0", 50, 0), rxq(1, 1, "p0", 10), rxq(1, 2, "p0", 10),
                                   rxq(1, 3, "p0", 45)};
  const SchedPlan p = plan_rxqs(q, config({0, 1}, RxqAssignMode::group, false));
  // Sorted q3 (45) -> PMD 1 (0 < 50); q1 (10) -> PMD 1 (45 < 50); q2 (10) -> PMD 0 (50 < 55).
  CHECK(p.pmd_of == std::vector<int>{0, 1, 0, 1});
  CHECK(p.pmd_cycles == std::vector<uint64_t>{60, 55});
}

// Live, 8 queues, pmd-cpu-mask=0x3, pmd-rxq-affinity="0:3,1:1", cycles:
//   core 0: p0/0 p0/2 p0/3 p0/4 p0/5 p0/6 p0/7   core 1 (isolated): p0/1
//   WARN: "Core  3 cannot be pinned with port 'p0' rx queue 0. Use pmd-cpu-mask to enable a pmd
//          on core 3. An alternative core will be assigned."
TEST_CASE("rxq assignment: a queue pinned to a core without a PMD is placed like an unpinned one") {
  const std::vector<SchedRxq> q = port_queues(8, {3, 1});
  const SchedPlan p = plan_rxqs(q, config({0, 1}, RxqAssignMode::cycles));
  CHECK(on_pmd(p, q, 0) == "p0/0 p0/2 p0/3 p0/4 p0/5 p0/6 p0/7");
  CHECK(on_pmd(p, q, 1) == "p0/1");
  CHECK(p.isolated == std::vector<bool>{false, true});
  REQUIRE(p.messages.size() == 1);
  CHECK(p.messages[0] ==
        "Core  3 cannot be pinned with port 'p0' rx queue 0. Use pmd-cpu-mask to enable a pmd on core 3. "
        "An alternative core will be assigned.");
}

// Live, 8 queues, pmd-cpu-mask=0x1, pmd-rxq-affinity="0:0,5:0":
//   core 0 (isolated): p0/0 p0/5; the other six polled by none, each with
//   WARN "No non-isolated pmd on any numa available for port 'p0' rx queue 1
//         (measured processing cycles 0). This rx queue will not be polled."
// and with pmd-cpu-mask=0x3, "0:0,5:1": core 0: p0/0, core 1: p0/5, both
// isolated, the same six warnings.
TEST_CASE("rxq assignment: when every PMD is isolated the other queues are not polled") {
  const std::vector<SchedRxq> q = port_queues(8, {0, -1, -1, -1, -1, 0});
  const SchedPlan p = plan_rxqs(q, config({0}, RxqAssignMode::cycles));
  CHECK(p.pmd_of == std::vector<int>{0, -1, -1, -1, -1, 0, -1, -1});
  CHECK(p.isolated == std::vector<bool>{true});
  REQUIRE(p.messages.size() == 6);
  CHECK(p.messages[0] ==
        "No non-isolated pmd on any numa available for port 'p0' rx queue 1 (measured processing cycles 0). "
        "This rx queue will not be polled.");
  const std::vector<SchedRxq> q2 = port_queues(8, {0, -1, -1, -1, -1, 1});
  const SchedPlan p2 = plan_rxqs(q2, config({0, 1}, RxqAssignMode::roundrobin));
  CHECK(p2.pmd_of == std::vector<int>{0, -1, -1, -1, -1, 1, -1, -1});
  CHECK(p2.isolated == std::vector<bool>{true, true});
  REQUIRE(p2.messages.size() == 6);
  CHECK(p2.messages[5] ==
        "No non-isolated pmd on any numa available for port 'p0' rx queue 7. This rx queue will not be "
        "polled.");
}

TEST_CASE("rxq assignment: no PMD at all") {
  const std::vector<SchedRxq> q = port_queues(2, {4});
  const SchedPlan p = plan_rxqs(q, config({}, RxqAssignMode::cycles));
  CHECK(p.pmd_of == std::vector<int>{-1, -1});
  CHECK(p.isolated.empty());
  // The pin fails, then the queue finds no PMD, as each other queue.
  REQUIRE(p.messages.size() == 3);
  CHECK(p.messages[0].rfind("Core  4 cannot be pinned with port 'p0' rx queue 0.", 0) == 0);
  CHECK(p.messages[1].rfind("No non-isolated pmd on any numa available for port 'p0' rx queue 0", 0) == 0);
}

// Live, on a 2-queue port (valid: the placement follows; invalid: "dpif|WARN|
// netdev@ovs-netdev: port_set_config failed (Invalid argument)" and the old
// affinity stays):
//   valid:   "0(1) 1=1"  "0:0x1,1:-0,7:1"  "0(1"  " ,010:+2,\t"  "0:1,0:0" (queue 0 on core 0)
//            "70000:1,1:0"  "0x1:0X1"  "0:\v1"  "-0:1"  "+1:0"
//   invalid: "0:x"  "0"  "08:1"  "0x:1"  "0:3:4"  "1:2,0"  "0:1 2:"  "-1:3"  "0:-2"
//            "2147483648:1"  "a:1"
TEST_CASE("pmd-rxq-affinity parses as Open vSwitch's parse_affinity_list()") {
  SUBCASE("accepted") {
    RxqAffinity a = parse_rxq_affinity("0:3,1:7");
    CHECK(a.error.empty());
    CHECK(a.pairs == std::vector<std::pair<uint16_t, int>>{{0, 3}, {1, 7}});
    a = parse_rxq_affinity("0(1) 1=1");
    CHECK(a.error.empty());
    CHECK(a.pairs == std::vector<std::pair<uint16_t, int>>{{0, 1}, {1, 1}});
    a = parse_rxq_affinity("0:0x1,1:-0,7:1");
    CHECK(a.error.empty());
    CHECK(rxq_affinity_cores(a, 2) == std::vector<int>{1, 0});  // queue 7: none on this port, ignored
    a = parse_rxq_affinity(" ,010:+2,\t");                      // octal 8
    CHECK(a.error.empty());
    CHECK(a.pairs == std::vector<std::pair<uint16_t, int>>{{8, 2}});
    CHECK(parse_rxq_affinity("").error.empty());
    CHECK(parse_rxq_affinity("").pairs.empty());
    CHECK(rxq_affinity_cores(parse_rxq_affinity("0:1,0:2,3:4"), 4) == std::vector<int>{2, -1, -1, 4});
    a = parse_rxq_affinity("70000:1,2:2");  // no port has queue 70000
    CHECK(a.error.empty());
    CHECK(a.pairs == std::vector<std::pair<uint16_t, int>>{{2, 2}});
    for (const char* good : {"0(1", "0x1:0X1", "0:\v1", "-0:1", "+1:0"}) {
      INFO(std::string(good));
      a = parse_rxq_affinity(good);
      CHECK(a.error.empty());
      CHECK(a.pairs.size() == 1);
    }
    CHECK(rxq_affinity_cores(parse_rxq_affinity("0(1"), 1) == std::vector<int>{1});
    CHECK(rxq_affinity_cores(parse_rxq_affinity("0x1:0X1"), 2) == std::vector<int>{-1, 1});
  }
  SUBCASE("rejected whole (live: \"0:x\" and \"0\": port_set_config failed (Invalid argument))") {
    for (const char* bad : {"0:x", "0", "1:2,0", "-1:3", "0:-2", "0:3:4", "0:1,1:", "a:1", "0x:1", "08:1",
                            "2147483648:1", "0:1 2:"}) {
      const RxqAffinity a = parse_rxq_affinity(bad);
      INFO(std::string(bad));
      CHECK(!a.error.empty());
      CHECK(a.pairs.empty());
    }
    CHECK(parse_rxq_affinity("0:3,1:x").error ==
          "pmd-rxq-affinity: '1:x': 'x' is not a core id (an integer >= 0)");
    CHECK(parse_rxq_affinity("0:3, 5").error == "pmd-rxq-affinity: '5' is not a queue:core pair");
  }
}

TEST_CASE("pmd-auto-lb: Open vSwitch's integer variance") {
  // Integer mean (5/3 = 1), then the mean squared difference, floored:
  // (1 + 1 + 16) / 3 = 6, where the exact variance is 5.56.
  const std::vector<uint64_t> a = {0, 0, 5};
  CHECK(sched_variance(a) == 6);
  const std::vector<uint64_t> b = {80, 20};
  CHECK(sched_variance(b) == 900);
  CHECK(sched_variance(std::vector<uint64_t>{}) == 0);
  CHECK(sched_variance(std::vector<uint64_t>{0, 0}) == 0);
}

TEST_CASE("pmd-auto-lb: the column conversions") {
  CHECK(auto_lb_rebal_interval_ms(1) == 60'000);
  CHECK(auto_lb_rebal_interval_ms(0) == 60'000);
  CHECK(auto_lb_rebal_interval_ms(20'000) == 20'000ull * 60'000);
  CHECK(auto_lb_rebal_interval_ms(20'001) == 60'000);
  CHECK(auto_lb_load_threshold_pct(101) == 95);
  CHECK(auto_lb_load_threshold_pct(100) == 100);
  CHECK(auto_lb_improvement_threshold_pct(101) == 25);
  CHECK(auto_lb_improvement_threshold_pct(0) == 0);
}

namespace {

// Two PMDs on cores 0 and 1, windows of 1000 cycles; queues of 600, 200,
// 100, 100 cycles, now q0+q1 on PMD 0 (80 %) and q2+q3 on PMD 1 (20 %):
// variance 900. cycles would place q0,q3 | q1,q2 (70 % / 30 %, variance
// 400): improvement (900 - 400) * 100 / 900 = 55 %. group would place
// q0 | q1,q2,q3 (60 % / 40 %, variance 100): 88 %.
struct LbRig {
  std::vector<SchedRxq> q = {rxq(1, 0, "p0", 600), rxq(1, 1, "p0", 200), rxq(1, 2, "p0", 100),
                             rxq(1, 3, "p0", 100)};
  std::vector<int> current = {0, 0, 1, 1};
  std::vector<PmdLoadSample> pmds = {PmdLoadSample{.window_cycles = 1000},
                                     PmdLoadSample{.window_cycles = 1000}};
  SchedConfig cfg = config({0, 1}, RxqAssignMode::cycles);
  AutoLb lb;
  uint64_t now = 1'000'000;

  explicit LbRig(unsigned improvement = 25, uint64_t interval_ms = 60'000, unsigned load = 95) {
    lb.configure({.enabled = true,
                  .load_threshold_pct = load,
                  .improvement_threshold_pct = improvement,
                  .rebal_interval_ms = interval_ms});
  }
  // One load interval (5 s) closes with PMD p busy busy_pct %; a tick.
  bool interval(unsigned busy_pct, size_t p = 0) {
    now += 5'000;
    for (size_t i = 0; i < pmds.size(); ++i) {
      pmds[i].intervals_closed++;
      pmds[i].interval_cycles = 1000;
      pmds[i].interval_busy_cycles = i == p ? busy_pct * 10 : 100;
    }
    return lb.tick(now, q, current, pmds, cfg);
  }
};

}  // namespace

TEST_CASE("pmd-auto-lb: the dry run's estimate") {
  LbRig r;
  AutoLbEstimate e = auto_lb_dry_run(r.q, r.current, r.pmds, r.cfg, {.improvement_threshold_pct = 55});
  CHECK(e.current_variance == 900);
  CHECK(e.new_variance == 400);
  CHECK(e.improvement_pct == 55);
  CHECK(e.rebalance);
  e = auto_lb_dry_run(r.q, r.current, r.pmds, r.cfg, {.improvement_threshold_pct = 56});
  CHECK(e.improvement_pct == 55);
  CHECK(!e.rebalance);
  // group estimates its own plan.
  e = auto_lb_dry_run(r.q, r.current, r.pmds, config({0, 1}, RxqAssignMode::group), {});
  CHECK(e.new_variance == 100);
  CHECK(e.improvement_pct == 88);
  // A PMD not measured yet counts as 0 % busy.
  r.pmds[1].window_cycles = 0;
  e = auto_lb_dry_run(r.q, r.current, r.pmds, r.cfg, {});
  CHECK(e.current_variance == 1600);  // 80 % and 0 %
  CHECK(e.new_variance == 1225);      // 70 % and 0 %
  CHECK(e.improvement_pct == 23);
}

TEST_CASE("pmd-auto-lb: a worse estimate is 0 % improvement (which a 0 % threshold still takes)") {
  LbRig r;
  r.current = {0, 1, 1, 1};  // 60 % / 40 %, variance 100; the cycles plan's 70 % / 30 % has 400
  AutoLbEstimate e = auto_lb_dry_run(r.q, r.current, r.pmds, r.cfg, {.improvement_threshold_pct = 1});
  CHECK(e.improvement_pct == 0);
  CHECK(!e.rebalance);
  e = auto_lb_dry_run(r.q, r.current, r.pmds, r.cfg, {.improvement_threshold_pct = 0});
  CHECK(e.rebalance);  // pmd_rebalance_dry_run(): improvement >= threshold, 0 >= 0
}

TEST_CASE("pmd-auto-lb: isolated PMDs are left out of the variance") {
  // PMD 2 (core 2) polls a pinned queue at 90 %; q0 and q1 both on PMD 0.
  const std::vector<SchedRxq> q = {rxq(1, 0, "p0", 600), rxq(1, 1, "p0", 200), rxq(2, 0, "p1", 900, 2)};
  const std::vector<int> current = {0, 0, 2};
  const std::vector<PmdLoadSample> pmds(3, PmdLoadSample{.window_cycles = 1000});
  const AutoLbEstimate e = auto_lb_dry_run(q, current, pmds, config({0, 1, 2}, RxqAssignMode::cycles), {});
  CHECK(e.current_variance == 1600);  // 80 % and 0 %: mean 40 (with PMD 2's 90 % it would be 1622)
  CHECK(e.new_variance == 400);       // 60 % and 20 %
  CHECK(e.improvement_pct == 75);
  CHECK(e.rebalance);
}

TEST_CASE("pmd-auto-lb: the current side counts a PMD holding any pinned queue as isolated") {
  // q0 is pinned to core 5, which has no PMD, so it was placed on PMD 0
  // like an unpinned queue; sched_numa_list_assignments() still marks PMD 0
  // isolated (it tests the queue's core_id), leaving only PMD 1's 0 % in
  // the current variance: 0, nothing to improve.
  const std::vector<SchedRxq> q = {rxq(1, 0, "p0", 600, 5), rxq(1, 1, "p0", 200), rxq(1, 2, "p0", 100)};
  const std::vector<int> current = {0, 0, 0};
  const std::vector<PmdLoadSample> pmds(2, PmdLoadSample{.window_cycles = 1000});
  const AutoLbEstimate e = auto_lb_dry_run(q, current, pmds, config({0, 1}, RxqAssignMode::cycles), {});
  CHECK(e.current_variance == 0);
  CHECK(!e.rebalance);
}

TEST_CASE("pmd-auto-lb: when a dry run is worth it") {
  LbRig r;
  std::string why;
  CHECK(auto_lb_dry_run_needed(r.current, r.pmds, r.cfg, &why));
  CHECK(!auto_lb_dry_run_needed(r.current, r.pmds, config({0, 1}, RxqAssignMode::roundrobin), &why));
  CHECK(why == "PMD auto load balance nothing to do, pmd-rxq-assign=roundrobin assignment type configured.");
  // One queue per PMD: nothing to move.
  CHECK(!auto_lb_dry_run_needed(std::vector<int>{0, 1}, r.pmds, r.cfg, &why));
  CHECK(why == "PMD auto load balance nothing to do, not enough non-isolated PMDs or RxQs.");
  // Only one non-isolated PMD.
  r.pmds[1].isolated = true;
  CHECK(!auto_lb_dry_run_needed(r.current, r.pmds, r.cfg));
}

TEST_CASE(
    "pmd-auto-lb: rebalances after the interval when a PMD stayed overloaded and the estimate improves "
    "enough") {
  LbRig r(55);
  // The first tick starts the timer; 12 intervals at 96 % (>= 95) follow.
  CHECK(!r.lb.tick(r.now, r.q, r.current, r.pmds, r.cfg));
  for (int i = 0; i < 12; ++i) CHECK(!r.interval(96));  // 60 s: the timer needs more than the interval
  CHECK(r.lb.overloaded_intervals()[0] == 12);
  CHECK(r.lb.overloaded_intervals()[1] == 0);
  CHECK(r.interval(96));  // 65 s > 60 s: checked, 55 % >= 55 %
  CHECK(r.lb.last().improvement_pct == 55);
  r.lb.rebalanced(r.now);
  CHECK(r.lb.overloaded_intervals()[0] == 0);
  // The timer restarted at the check: nothing for another minute.
  for (int i = 0; i < 12; ++i) CHECK(!r.interval(96));
  CHECK(r.interval(96));
}

TEST_CASE("pmd-auto-lb: just below the improvement threshold nothing moves") {
  LbRig r(56);
  CHECK(!r.lb.tick(r.now, r.q, r.current, r.pmds, r.cfg));
  for (int i = 0; i < 30; ++i) CHECK(!r.interval(100));
  CHECK(r.lb.last().improvement_pct == 55);  // the dry run ran (twice) and said no
}

TEST_CASE("pmd-auto-lb: not before the rebalance interval passed") {
  LbRig r(25, 120'000);
  CHECK(!r.lb.tick(r.now, r.q, r.current, r.pmds, r.cfg));
  for (int i = 0; i < 24; ++i) CHECK(!r.interval(96));  // 120 s: not more than the interval
  CHECK(r.interval(96));
}

TEST_CASE("pmd-auto-lb: only a PMD overloaded 12 intervals in a row counts") {
  SUBCASE("under the threshold") {
    LbRig r;
    CHECK(!r.lb.tick(r.now, r.q, r.current, r.pmds, r.cfg));
    for (int i = 0; i < 40; ++i) CHECK(!r.interval(94));
    CHECK(r.lb.overloaded_intervals()[0] == 0);
  }
  SUBCASE("at the threshold counts") {
    LbRig r;
    CHECK(!r.lb.tick(r.now, r.q, r.current, r.pmds, r.cfg));
    for (int i = 0; i < 12; ++i) CHECK(!r.interval(95));
    CHECK(r.interval(95));
  }
  SUBCASE("one quiet interval restarts the run") {
    LbRig r;
    CHECK(!r.lb.tick(r.now, r.q, r.current, r.pmds, r.cfg));
    for (int i = 0; i < 5; ++i) CHECK(!r.interval(96));
    CHECK(!r.interval(50));
    for (int i = 0; i < 7; ++i) CHECK(!r.interval(96));  // the check at 65 s: a run of 7
    CHECK(r.lb.overloaded_intervals()[0] == 7);
    // Several ticks per interval see each interval once.
    CHECK(!r.lb.tick(r.now + 1, r.q, r.current, r.pmds, r.cfg));
    CHECK(r.lb.overloaded_intervals()[0] == 7);
  }
  SUBCASE("an isolated PMD is not counted") {
    LbRig r;
    r.pmds[0].isolated = true;
    CHECK(!r.lb.tick(r.now, r.q, r.current, r.pmds, r.cfg));
    for (int i = 0; i < 40; ++i) CHECK(!r.interval(100));
    CHECK(r.lb.overloaded_intervals()[0] == 0);
  }
  SUBCASE("a PMD restarted (its interval count went back) starts again") {
    LbRig r;
    CHECK(!r.lb.tick(r.now, r.q, r.current, r.pmds, r.cfg));
    for (int i = 0; i < 11; ++i) CHECK(!r.interval(96));
    r.pmds[0].intervals_closed = 0;
    CHECK(!r.interval(96));  // 1: the first interval since the restart
    CHECK(r.lb.overloaded_intervals()[0] == 1);
  }
}

TEST_CASE("pmd-auto-lb: off, or with roundrobin, never rebalances") {
  SUBCASE("disabled") {
    LbRig r;
    r.lb.configure({.enabled = false});
    for (int i = 0; i < 40; ++i) CHECK(!r.interval(100));
  }
  SUBCASE("roundrobin") {
    LbRig r;
    r.cfg.mode = RxqAssignMode::roundrobin;
    CHECK(!r.lb.tick(r.now, r.q, r.current, r.pmds, r.cfg));
    for (int i = 0; i < 40; ++i) CHECK(!r.interval(100));
  }
  SUBCASE("disabling stops the timer; enabling starts it at the next tick") {
    LbRig r;
    CHECK(!r.lb.tick(r.now, r.q, r.current, r.pmds, r.cfg));
    for (int i = 0; i < 12; ++i) CHECK(!r.interval(100));
    AutoLbConfig c = r.lb.config();
    c.enabled = false;
    r.lb.configure(c);
    CHECK(!r.interval(100));
    c.enabled = true;
    r.lb.configure(c);
    CHECK(!r.interval(100));                               // starts the timer
    for (int i = 0; i < 12; ++i) CHECK(!r.interval(100));  // a new minute from there
    CHECK(r.interval(100));
  }
}

// The PMD's rx queue load accounting (pmd-rxq-show; what an rx queue
// assignment by cycles weighs): a PMD polling two queues charges the busy
// one with cycles and the idle one with none; nothing is measured until the
// second interval closed (Open vSwitch's NOT AVAIL); a window covers the
// newest intervals only; and display_core() names a CPU even unpinned.
// The interval clock is driven with Pmd::end_interval(), never by sleeping.
#include <doctest/doctest.h>

#include <cstring>

#include "datapath/datapath.h"
#include "eventually.h"
#include "sim_test_util.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"

using namespace keel;
using keel::test::eventually;

namespace {

struct Rig {
  std::unique_ptr<hal::Backend> backend;
  // Intervals close only when the test says so (a day is out of reach).
  datapath::Datapath dp{{.pmd_cores = {-1}, .pmd = {.load_interval_ns = 86'400'000'000'000ull}}};
  hal::sim::RingPort* busy = nullptr;  // p0: receives, cross-connected to p1
  hal::sim::RingPort* idle = nullptr;  // p1: receives nothing
  uint16_t busy_id = 0, idle_id = 0;

  Rig() {
    auto be = hal::make_sim_backend({.buffers = 4096});
    REQUIRE(be.ok());
    backend = std::move(be.value());
    busy = open("p0", busy_id);
    idle = open("p1", idle_id);
    dp.set_xconnect(busy_id, idle_id);
  }
  hal::sim::RingPort* open(const char* name, uint16_t& id) {
    return test::add_sim_port(*backend, dp, name, "ring:size=1024", 1, &id);
  }
  void inject(unsigned n) {
    hal::Packet* pkts[32];
    for (unsigned done = 0; done < n;) {
      const unsigned k = backend->alloc_burst(std::span(pkts, std::min(32u, n - done)));
      REQUIRE(k > 0);
      for (unsigned j = 0; j < k; ++j) {
        uint8_t f[60] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00};
        std::memcpy(pkts[j]->data(), f, sizeof f);
        (void)pkts[j]->set_len(sizeof f);
      }
      REQUIRE(busy->inject(std::span(pkts, k)) == k);
      done += k;
    }
  }
  void drain_out() {
    hal::Packet* got[32];
    size_t m;
    while ((m = idle->collect(got)) > 0)
      for (size_t k = 0; k < m; ++k) hal::release(got[k]);
  }
  datapath::Pmd& pmd() { return *dp.pmds()[0]; }
  // Index of a port's queue in the PMD's rx_queues().
  size_t rxq_of(const hal::Port* p) {
    const auto& q = pmd().rx_queues();
    for (size_t i = 0; i < q.size(); ++i)
      if (q[i].port == p) return i;
    FAIL("port not polled by the PMD");
    return 0;
  }
  void close_interval() {
    const uint32_t before = pmd().intervals_closed();
    pmd().end_interval();
    REQUIRE(eventually([&] { return pmd().intervals_closed() == before + 1; }));
  }
};

}  // namespace

TEST_CASE("pmd load: the busy queue gets the cycles, the idle one none; NOT AVAIL before two closes") {
  Rig r;
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  datapath::Pmd& pmd = r.pmd();
  REQUIRE(pmd.rx_queues().size() == 2);
  const size_t qb = r.rxq_of(r.busy), qi = r.rxq_of(r.idle);

  // Nothing closed yet: no window, nothing charged.
  CHECK(pmd.intervals_closed() == 0);
  CHECK(pmd.load(datapath::kPmdIntervalMax).window_cycles == 0);

  r.inject(500);
  REQUIRE(eventually([&] { return pmd.counters().xconnect_hits == 500; }));
  r.drain_out();

  // First close: the slots are written, but the interval has no start mark,
  // so its length (and so any usage) is not known yet.
  r.close_interval();
  datapath::Pmd::Load first = pmd.load(datapath::kPmdIntervalMax);
  CHECK(first.window_cycles == 0);
  CHECK(pmd.rxq_cycles(qb) > 0);
  CHECK(pmd.rxq_cycles(qi) == 0);

  // Second close: the window is measured; the first interval's cycles
  // are still in a 12-interval window, not in a 1-interval one.
  r.close_interval();
  datapath::Pmd::Load all = pmd.load(datapath::kPmdIntervalMax);
  REQUIRE(all.window_cycles > 0);
  REQUIRE(all.rxq_cycles.size() == 2);
  CHECK(all.rxq_cycles[qb] > 0);
  CHECK(all.rxq_cycles[qi] == 0);
  // Charged within busy iterations only. load() caps busy_cycles at the
  // window (the last interval's length x 12, as Open vSwitch estimates
  // it); this test's second interval is closed right after the first, so
  // it can be far shorter, and then the comparison says nothing.
  if (all.busy_cycles < all.window_cycles) CHECK(all.rxq_cycles[qb] <= all.busy_cycles);
  CHECK(all.busy_cycles <= all.window_cycles);
  datapath::Pmd::Load newest = pmd.load(1);
  CHECK(newest.window_cycles * datapath::kPmdIntervalMax == all.window_cycles);
  CHECK(newest.rxq_cycles[qb] == 0);  // no packet since the first close
  CHECK(newest.rxq_cycles[qi] == 0);

  // Traffic in the third interval shows in the 1-interval window.
  r.inject(200);
  REQUIRE(eventually([&] { return pmd.counters().xconnect_hits == 700; }));
  r.drain_out();
  r.close_interval();
  CHECK(pmd.load(1).rxq_cycles[qb] > 0);
  CHECK(pmd.load(1).rxq_cycles[qi] == 0);
  CHECK(pmd.rxq_cycles(qb, 2) == pmd.load(1).rxq_cycles[qb]);  // the second interval had none

  // After kPmdIntervalMax more closes without traffic, the window forgets.
  for (unsigned i = 0; i < datapath::kPmdIntervalMax; ++i) r.close_interval();
  CHECK(pmd.rxq_cycles(qb) == 0);
  CHECK(pmd.load(datapath::kPmdIntervalMax).busy_cycles <= pmd.load(datapath::kPmdIntervalMax).window_cycles);
  r.dp.stop();
}

TEST_CASE("pmd display_core: the pinned core, or the CPU an unpinned PMD was last seen on") {
  Rig r;
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  CHECK(r.pmd().core() == -1);
  const int cpu = r.pmd().display_core();
  CHECK(cpu >= 0);  // a CPU number, not "unpinned"
  r.dp.stop();

  datapath::Datapath pinned({.pmd_cores = {0}});
  CHECK(pinned.pmds()[0]->display_core() == 0);  // pinned: known before it ran
}

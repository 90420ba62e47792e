// Tx queues per PMD (pmd.h): three PMDs sending to a port with two tx
// queues share them, each steering itself onto the queue fewest PMDs hold
// (XPS) and sticking to it — so the queues end up held 2 and 1 — every
// burst on a shared queue counted, every packet sent once, and the holds
// given back when the PMDs stop; a port with a tx queue per PMD takes no
// lock and counts no shared burst.
//
// Thread-safety: the PMDs run; the test injects on the ring (MPMC) and reads
// relaxed counters, and starts each PMD's first send only after the
// previous PMD's, so the choices are made one after the other.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "datapath/datapath.h"
#include "eventually.h"
#include "sim_test_util.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "keel/hal/rss.h"

using namespace keel;
using keel::test::eventually;

namespace {

constexpr unsigned kPmds = 3;

struct Rig {
  std::unique_ptr<hal::Backend> backend;
  datapath::Datapath dp{{.pmd_cores = {-1, -1, -1}}};
  hal::sim::RingPort* in = nullptr;
  hal::sim::RingPort* out = nullptr;
  uint16_t in_id = 0, out_id = 0;

  explicit Rig(uint16_t out_txq) {
    auto be = hal::make_sim_backend({.buffers = 8192});
    REQUIRE(be.ok());
    backend = std::move(be.value());
    in = open("p0", "ring:size=4096,rxq=3", 1, in_id);
    out = open("p1", "ring:size=8192", out_txq, out_id);
    dp.set_xconnect(in_id, out_id);
  }
  hal::sim::RingPort* open(const char* name, const char* spec, uint16_t ntx, uint16_t& id) {
    return test::add_sim_port(*backend, dp, name, spec, ntx, &id);
  }
  // n IPv4/UDP frames whose RSS hash puts them on rx queue q (of 3).
  void inject(uint16_t q, unsigned n) {
    const hal::RssReta reta(3);
    unsigned done = 0;
    for (uint32_t src = 1; done < n; ++src) {
      uint8_t f[60] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17};
      std::memcpy(&f[26], &src, 4);
      f[30] = 10, f[33] = 1;
      f[34] = 0x04, f[36] = 0x08;
      uint32_t h = 0;
      REQUIRE(hal::rss_hash_frame(f, sizeof f, h));
      if (reta.queue_for(h) != q) continue;
      hal::Packet* p = nullptr;
      REQUIRE(backend->alloc_burst({&p, 1}) == 1);
      std::memcpy(p->data(), f, sizeof f);
      (void)p->set_len(sizeof f);
      REQUIRE(in->inject({&p, 1}) == 1);
      ++done;
    }
  }
  size_t collect_all() {
    size_t total = 0;
    hal::Packet* got[64];
    size_t m;
    while ((m = out->collect(got)) > 0) {
      for (size_t k = 0; k < m; ++k) hal::release(got[k]);
      total += m;
    }
    return total;
  }
  // The PMD polling rx queue q of p0.
  const datapath::Pmd& pmd_of(uint16_t q) {
    for (const auto& pmd : dp.pmds())
      for (const auto& rq : pmd->rx_queues())
        if (rq.port == in && rq.queue == q) return *pmd;
    FAIL("no PMD polls p0 queue " << q);
    return *dp.pmds()[0];
  }
};

}  // namespace

TEST_CASE(
    "three PMDs on two tx queues: XPS spreads them 2 + 1, counts the shared bursts, sends each packet once") {
  Rig r(2);
  REQUIRE(r.out->n_txq() == 2);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  REQUIRE(r.dp.pmds().size() == kPmds);
  size_t sent = 0;
  for (uint16_t q = 0; q < 3; ++q) {
    const datapath::Pmd& pmd = r.pmd_of(q);
    r.inject(q, 500);
    REQUIRE(eventually([&] { return pmd.counters().xconnect_hits == 500; }));
    const datapath::PmdPerfCounters pc = pmd.perf_counters();
    CHECK(pc.txq_steers == 1);  // chose once, then stuck to it
    CHECK(pc.txq_shared_bursts >= 500 / hal::kMaxBurst);
    CHECK(pc.txq_lock_waits <= pc.txq_shared_bursts);
    sent += 500;
  }
  REQUIRE(eventually([&] { return r.out->tx_pending() == sent; }));
  // The first chose queue 0, the second the free queue 1, the third the
  // lowest of two equally held.
  CHECK(r.dp.txq_users(r.out_id, 0).load() == 2);
  CHECK(r.dp.txq_users(r.out_id, 1).load() == 1);
  CHECK(r.collect_all() == sent);
  CHECK(eventually([&] { return r.out->counters().tx_packets == sent; }));  // counted after the burst leaves
  CHECK(r.out->counters().tx_dropped == 0);
  r.dp.stop();
  CHECK(r.dp.txq_users(r.out_id, 0).load() == 0);  // given back
  CHECK(r.dp.txq_users(r.out_id, 1).load() == 0);
}

TEST_CASE("a port with a tx queue per PMD: no shared burst, no steering") {
  Rig r(kPmds);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  for (uint16_t q = 0; q < 3; ++q) r.inject(q, 200);
  REQUIRE(eventually([&] { return r.out->tx_pending() == 600; }));
  for (const auto& pmd : r.dp.pmds()) {
    CHECK(pmd->perf_counters().txq_shared_bursts == 0);
    CHECK(pmd->perf_counters().txq_steers == 0);
  }
  CHECK(r.collect_all() == 600);
  r.dp.stop();
}

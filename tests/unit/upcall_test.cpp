// Upcalls: a miss reaches a handler thread with the key and hash the PMD
// computed; the answer installs a megaflow in that PMD's table and the
// packet is executed; later packets hit the megaflow; with nobody listening,
// or no records left, misses are lost and counted; every record and packet
// comes back. Runs under TSan in the tsan preset.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "datapath/datapath.h"
#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "flow/flow_hash.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "eventually.h"
#include "sim_test_util.h"

using namespace keel;
using namespace std::chrono_literals;
using keel::test::eventually;

namespace {

// An Ethernet/IPv4/UDP frame to 10.0.0.(i % 4), source port 1000 + i / 4:
// a distinct key for every i.
void fill(hal::Packet* p, unsigned i) {
  const unsigned sport = 1000 + i / 4;
  uint8_t f[64] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0,
                   10, 0, 0, 1, 10, 0, 0, static_cast<uint8_t>(i % 4), static_cast<uint8_t>(sport >> 8),
                   static_cast<uint8_t>(sport), 0x07, 0xd0, 0, 30, 0, 0};
  std::memcpy(p->data(), f, sizeof f);
  (void)p->set_len(sizeof f);
}

struct Rig {
  std::unique_ptr<hal::Backend> backend;
  datapath::Datapath dp;
  hal::sim::RingPort* in = nullptr;
  hal::sim::RingPort* out = nullptr;

  // A PMD with `records` upcall records, a sim pool of `buffers` packets.
  explicit Rig(uint32_t records = datapath::kMinUpcallRecords, unsigned buffers = 4096)
      : dp(datapath::DatapathConfig{.pmd_cores = {-1}, .pmd = {.upcall_records = records}}) {
    auto be = hal::make_sim_backend({.buffers = buffers});
    REQUIRE(be.ok());
    backend = std::move(be.value());
    in = open("p0");
    out = open("p1");
  }
  hal::sim::RingPort* open(const char* name) {
    return test::add_sim_port(*backend, dp, name);
  }
  void inject(unsigned n, unsigned first = 0) {
    hal::Packet* pkts[32];
    for (unsigned done = 0; done < n;) {
      unsigned k = backend->alloc_burst(std::span(pkts, std::min(32u, n - done)));
      REQUIRE(k > 0);
      for (unsigned j = 0; j < k; ++j) fill(pkts[j], first + done + j);
      REQUIRE(in->inject(std::span(pkts, k)) == k);
      done += k;
    }
  }
  size_t collect() {
    size_t total = 0, m;
    hal::Packet* got[32];
    while ((m = out->collect(got)) > 0) {
      for (size_t k = 0; k < m; ++k) hal::release(got[k]);
      total += m;
    }
    return total;
  }
};

// Answers a miss with a megaflow matching in_port and dl_type (and nw_dst
// when `per_dst`) exactly -> output:2, installed and executed.
void answer_output2(datapath::Datapath& dp, datapath::UpcallChannel& ch, datapath::Upcall* u, bool per_dst) {
  flow::Match m;
  flow::expand(u->key, m.key);
  m.mask.in_port = m.mask.recirc_id = 0xffffffffu;
  m.mask.dl_type = 0xffff;
  if (per_dst) m.mask.nw_dst = 0xffffffffu;
  m.apply_mask();
  auto acts = flow::parse_dp_actions("2");
  auto f = dp.build_megaflow(m, &acts.value(), {u->hash, 1});
  REQUIRE(f.ok());
  u->install = f.value();
  u->actions = new flow::DpActions(acts.value());
  ch.answer(u);
}

// A handler that answers every miss with "in_port + dl_type + nw_dst exact ->
// output:2", checking that the key and hash it got are the parser's.
struct Handler {
  datapath::Datapath& dp;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> misses{0}, bad_hash{0};
  // Answers this many more misses, then waits (unlimited unless set).
  std::atomic<uint64_t> allowed{~uint64_t{0}};
  std::thread t;

  explicit Handler(datapath::Datapath& d, uint64_t allow = ~uint64_t{0}) : dp(d), allowed(allow) {
    t = std::thread([this] { loop(); });
  }
  ~Handler() { finish(); }
  void finish() {
    if (!t.joinable()) return;
    stop = true;
    t.join();
    drain();
  }
  void drain() {
    for (const auto& pmd : dp.pmds()) {
      datapath::UpcallChannel& ch = pmd->upcall_channel();
      datapath::Upcall* u;
      while (ch.next_spent(u)) {
        if (u->install_failed) datapath::free_megaflow(u->install);
        delete u->actions;
        ch.recycle(u);
      }
    }
  }
  void loop() {
    while (!stop.load()) {
      bool idle = true;
      drain();
      for (const auto& pmd : dp.pmds()) {
        datapath::UpcallChannel& ch = pmd->upcall_channel();
        datapath::Upcall* u;
        while (misses.load() < allowed.load() && ch.next(u)) {
          idle = false;
          ++misses;
          if (flow::miniflow_hash(u->key) != u->hash) ++bad_hash;
          answer_output2(dp, ch, u, true);
        }
      }
      if (idle) std::this_thread::sleep_for(50us);
    }
  }
};

}  // namespace

TEST_CASE("a miss goes up with its key and hash, comes back installed and executed") {
  Rig r;
  r.dp.set_upcalls_enabled(true);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  Handler h(r.dp);
  r.inject(4);  // four destinations: four megaflows
  size_t got = 0;
  CHECK(eventually([&] { return (got += r.collect()) >= 4; }));
  CHECK(got == 4);
  r.inject(400, 4);
  CHECK(eventually([&] { return (got += r.collect()) >= 404; }));
  CHECK(got == 404);
  h.finish();
  r.dp.set_upcalls_enabled(false);
  r.dp.stop();
  got += r.collect();
  const datapath::PmdCounters c = r.dp.pmds()[0]->counters();
  CHECK(c.upcalls == h.misses.load());
  CHECK(h.bad_hash == 0);
  CHECK(c.upcall_installs == 4);
  CHECK(c.lost == 0);
  CHECK(r.dp.flow_dump().size() == 4);
  // Later packets hit the installed flows: at most a burst's worth of misses per flow.
  CHECK(c.upcalls >= 4);
  CHECK(c.upcalls <= 4 + 32 * 4);
  CHECK(c.emc_hits + c.megaflow_hits + c.simple_hits + c.upcalls + c.upcall_followers == 404);
  r.dp.drop_pending_upcalls();
  r.dp.flow_flush();
}

TEST_CASE("misses with the same key while one is up ride on its record, and are executed with it") {
  Rig r;
  r.dp.set_upcalls_enabled(true);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  // No handler yet: 40 packets with one key wait in two records.
  for (int i = 0; i < 40; ++i) r.inject(1, 0);
  REQUIRE(eventually([&] { return r.dp.pmds()[0]->counters().misses >= 40; }));
  CHECK_FALSE(r.dp.wait_drained(100));  // they are up with the slow path
  datapath::PmdCounters c = r.dp.pmds()[0]->counters();
  CHECK(c.upcalls == 2);  // 1 + 31 followers, then a second record
  CHECK(c.upcall_followers == 38);
  CHECK(c.lost == 0);
  Handler h(r.dp);
  size_t got = 0;
  CHECK(eventually([&] { return (got += r.collect()) >= 40; }));
  CHECK(got == 40);
  h.finish();
  r.dp.set_upcalls_enabled(false);
  r.dp.stop();
  r.dp.drop_pending_upcalls();
  r.dp.flow_flush();
}

TEST_CASE("per key, packets leave in order when another key's answer installs a megaflow that covers them") {
  Rig r;
  r.dp.set_upcalls_enabled(true);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  datapath::Datapath& dp = r.dp;
  datapath::UpcallChannel& ch = dp.pmds()[0]->upcall_channel();
  // Packets of keys A (i = 0) and B (i = 1), told apart by a marker in the
  // payload (not part of the key).
  auto send = [&](unsigned i, uint8_t marker) {
    hal::Packet* p = nullptr;
    REQUIRE(r.backend->alloc_burst(std::span(&p, 1)) == 1);
    fill(p, i);
    p->data()[60] = marker;
    REQUIRE(r.in->inject(std::span(&p, 1)) == 1);
  };
  auto classified = [&] {
    const datapath::PmdCounters c = dp.pmds()[0]->counters();
    return c.emc_hits + c.smc_hits + c.megaflow_hits + c.simple_hits + c.misses;
  };
  // The answer: one wide megaflow (in_port and eth_type only) -> output:2.
  auto answer = [&](datapath::Upcall* u) { answer_output2(dp, ch, u, false); };
  send(0, 'a');
  send(1, 'b');
  datapath::Upcall* up[2] = {};
  unsigned n_up = 0;
  REQUIRE(eventually([&] { return (n_up += ch.next(up[n_up]) ? 1 : 0) == 2; }));
  datapath::Upcall* ua = up[0]->frame_bytes()[60] == 'a' ? up[0] : up[1];
  datapath::Upcall* ub = ua == up[0] ? up[1] : up[0];
  // A's answer installs the megaflow that B's packets match too; B's first
  // packet is still up when B's second arrives.
  answer(ua);
  REQUIRE(eventually([&] { return dp.pmds()[0]->counters().upcall_installs == 1; }));
  send(1, 'c');
  REQUIRE(eventually([&] { return classified() == 3; }));
  answer(ub);
  std::vector<uint8_t> order;
  REQUIRE(eventually([&] {
    hal::Packet* got[32];
    for (size_t m; (m = r.out->collect(got)) > 0;)
      for (size_t k = 0; k < m; ++k) {
        order.push_back(got[k]->data()[60]);
        hal::release(got[k]);
      }
    return order.size() == 3;
  }));
  CHECK(order == std::vector<uint8_t>{'a', 'b', 'c'});  // B's second after B's first
  const datapath::PmdCounters c = dp.pmds()[0]->counters();
  CHECK(c.upcalls == 2);
  CHECK(c.upcall_followers == 1);  // B's second rode on B's record
  CHECK(c.lost == 0);
  dp.set_upcalls_enabled(false);
  dp.stop();
  datapath::Upcall* u;
  while (ch.next_spent(u)) {
    if (u->install_failed) datapath::free_megaflow(u->install);
    delete u->actions;
    ch.recycle(u);
  }
  dp.drop_pending_upcalls();
  dp.flow_flush();
}

TEST_CASE("nobody listening: misses are lost and counted, never queued") {
  Rig r;
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  r.inject(100);
  REQUIRE(eventually([&] { return r.in->rx_pending() == 0; }));
  REQUIRE(r.dp.wait_drained(keel::test::kPatienceMs));
  r.dp.stop();
  const datapath::PmdCounters c = r.dp.pmds()[0]->counters();
  CHECK(c.misses == 100);
  CHECK(c.lost == 100);
  CHECK(c.upcalls == 0);
  CHECK(r.collect() == 0);
}

TEST_CASE("a handler that never answers: records run out, the rest is lost, the PMD keeps going") {
  Rig r;
  const unsigned records = r.dp.pmds()[0]->upcall_channel().capacity();
  REQUIRE(records == datapath::kMinUpcallRecords);
  r.dp.set_upcalls_enabled(true);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  // Distinct keys (ports vary with the index), so no miss joins another.
  const unsigned n = (records / 100 + 3) * 100;
  for (unsigned sent = 0; sent < n; sent += 100) {
    r.inject(100, sent);
    // wait_drained() can't help: the records stay up. Wait for the misses.
    CHECK(eventually([&] { return r.dp.pmds()[0]->counters().misses >= sent + 100; }));
  }
  const datapath::PmdCounters c = r.dp.pmds()[0]->counters();
  // Data misses leave the control reserve (a bond's LACP) untouched.
  const unsigned data_records = records - datapath::kUpcallControlReserve;
  CHECK(c.upcalls == data_records);
  CHECK(c.lost == n - data_records);
  r.dp.set_upcalls_enabled(false);
  r.dp.stop();
  r.dp.drop_pending_upcalls();  // releases the queued packets
}

TEST_CASE("a miss storm that took every record still lets a bond's LACPDUs up (the control reserve)") {
  Rig r;
  const unsigned records = r.dp.pmds()[0]->upcall_channel().capacity();
  r.dp.set_upcalls_enabled(true);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  const unsigned n = records + 200;
  for (unsigned sent = 0; sent < n; sent += 100) {
    r.inject(100, sent);
    CHECK(eventually([&] { return r.dp.pmds()[0]->counters().misses >= sent + 100; }));
  }
  const datapath::PmdCounters before = r.dp.pmds()[0]->counters();
  REQUIRE(before.upcalls == records - datapath::kUpcallControlReserve);
  // LACPDUs (slow protocols, 0x8809), untagged and behind an 802.1Q tag,
  // each from another port id so no two share a key: every one goes up.
  hal::Packet* pkts[8];
  const unsigned k = r.backend->alloc_burst(std::span(pkts, 8));
  REQUIRE(k == 8);
  for (unsigned i = 0; i < k; ++i) {
    uint8_t f[128] = {0x01, 0x80, 0xc2, 0, 0, 0x02, 2, 0, 0, 0, 0, static_cast<uint8_t>(i + 1)};
    size_t off = 12;
    if (i % 2) {
      f[off] = 0x81, f[off + 1] = 0x00, f[off + 2] = 0, f[off + 3] = 10;
      off += 4;
    }
    f[off] = 0x88, f[off + 1] = 0x09, f[off + 2] = 1, f[off + 3] = 1;
    std::memcpy(pkts[i]->data(), f, sizeof f);
    (void)pkts[i]->set_len(124);
  }
  REQUIRE(r.in->inject(std::span(pkts, k)) == k);
  CHECK(eventually([&] { return r.dp.pmds()[0]->counters().misses >= before.misses + 8; }));
  const datapath::PmdCounters after = r.dp.pmds()[0]->counters();
  CHECK(after.upcalls == before.upcalls + 8);
  CHECK(after.lost == before.lost);
  // And a data miss after them is still lost: the reserve is not for it.
  r.inject(1, n + 1000);
  CHECK(eventually([&] { return r.dp.pmds()[0]->counters().lost == before.lost + 1; }));
  r.dp.set_upcalls_enabled(false);
  r.dp.stop();
  r.dp.drop_pending_upcalls();
}

// --- drop accounting (datapath/drop_stats.h): the PMD's own drops ------------

namespace {
datapath::DropTotals::Port fate_of(const datapath::Datapath& dp, const hal::Port& p) {
  return dp.drop_totals().ports[p.id()];
}
uint64_t dropped(const datapath::DropTotals::Port& f, datapath::DropReason r) {
  return f.dropped[static_cast<unsigned>(r)];
}
}  // namespace

TEST_CASE("drop accounting: runts and misses nobody takes, each received packet once under its reason") {
  Rig r;
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  hal::Packet* runts[3];
  REQUIRE(r.backend->alloc_burst(std::span(runts, 3)) == 3);
  for (unsigned i = 0; i < 3; ++i) {
    fill(runts[i], i);
    (void)runts[i]->set_len(5 + i * 4);  // 5, 9, 13 bytes: shorter than an Ethernet header
  }
  REQUIRE(r.in->inject(std::span(runts, 3)) == 3);
  r.inject(10);
  REQUIRE(eventually([&] { return r.in->rx_pending() == 0; }));
  REQUIRE(r.dp.wait_drained(keel::test::kPatienceMs));
  r.dp.stop();
  const datapath::DropTotals::Port f = fate_of(r.dp, *r.in);
  CHECK(dropped(f, datapath::DropReason::kRunt) == 3);
  CHECK(dropped(f, datapath::DropReason::kUpcallLost) == 10);
  CHECK(f.dropped_total() == 13);
  CHECK(r.in->counters().rx_packets == f.forwarded + f.slow_path + f.dropped_total() + f.in_flight);
  const datapath::DropTotals t = r.dp.drop_totals();
  CHECK(t.instances[static_cast<unsigned>(datapath::DropReason::kRunt)] == 3);
}

TEST_CASE("drop accounting: misses held up are in flight; a stop discards them under `stopped`") {
  Rig r;
  r.dp.set_upcalls_enabled(true);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  const unsigned records = datapath::kMinUpcallRecords;  // the Rig's
  const unsigned n = (records / 100 + 2) * 100;  // distinct keys: no follower
  for (unsigned sent = 0; sent < n; sent += 100) {
    r.inject(100, sent);
    CHECK(eventually([&] { return r.dp.pmds()[0]->counters().misses >= sent + 100; }));
  }
  const unsigned up = records - datapath::kUpcallControlReserve;
  datapath::DropTotals::Port f = fate_of(r.dp, *r.in);
  CHECK(f.in_flight == up);
  CHECK(dropped(f, datapath::DropReason::kUpcallLost) == n - up);
  CHECK(r.in->counters().rx_packets == f.dropped_total() + f.in_flight);
  r.dp.set_upcalls_enabled(false);
  r.dp.stop();
  r.dp.drop_pending_upcalls();  // nobody will answer them
  f = fate_of(r.dp, *r.in);
  CHECK(f.in_flight == 0);
  CHECK(dropped(f, datapath::DropReason::kStopped) == up);
  CHECK(r.in->counters().rx_packets == f.dropped_total());
}

TEST_CASE("drop accounting: answered misses are forwarded, in flight meanwhile") {
  Rig r(1024);  // records for every miss, however slowly they are answered
  r.dp.set_upcalls_enabled(true);
  Handler h(r.dp);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  r.inject(200);
  REQUIRE(eventually([&] { return r.collect() == 0 && fate_of(r.dp, *r.in).forwarded == 200; }));
  const datapath::DropTotals::Port f = fate_of(r.dp, *r.in);
  CHECK(f.in_flight == 0);
  CHECK(f.dropped_total() == 0);
  r.dp.set_upcalls_enabled(false);
  r.dp.stop();
  h.finish();
}

TEST_CASE("a storm deeper than the buffer pool: short frames travel in the records, every miss goes up and out") {
  // 600 buffers in the pool, 2048 records: 1500 new keys while nobody
  // answers. Their frames wait in the records and the buffers go back, so
  // none is lost for want of a buffer or a record; then each answer is
  // executed from a fresh buffer with the frame it carried.
  Rig r(2048, 600);
  r.dp.set_upcalls_enabled(true);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  const unsigned n = 1500;
  for (unsigned sent = 0; sent < n; sent += 100) {
    r.inject(100, sent);
    REQUIRE(eventually([&] { return r.dp.pmds()[0]->counters().misses >= sent + 100; }));
  }
  datapath::PmdCounters c = r.dp.pmds()[0]->counters();
  CHECK(c.upcalls == n);
  CHECK(c.lost == 0);
  CHECK(r.dp.pmds()[0]->upcall_channel().in_flight() == n);
  // Drop accounting: every token travels with its frame (drop_stats.h).
  CHECK(fate_of(r.dp, *r.in).in_flight == n);
  // Answered 250 at a time, each lot collected before the next (the
  // executed packets take buffers from the same small pool).
  Handler h(r.dp, 0);
  size_t got = 0;
  for (unsigned lot = 250; lot <= n; lot += 250) {
    h.allowed = lot;
    REQUIRE(eventually([&] { return (got += r.collect()) >= lot; }));
  }
  CHECK(got == n);
  h.finish();
  r.dp.set_upcalls_enabled(false);
  r.dp.stop();
  c = r.dp.pmds()[0]->counters();
  CHECK(c.upcall_installs == 4);  // per destination: the rest found the flow installed
  CHECK(c.exec_dropped == 0);
  const datapath::DropTotals::Port f = fate_of(r.dp, *r.in);
  CHECK(f.forwarded == n);
  CHECK(f.in_flight == 0);
  CHECK(f.dropped_total() == 0);
  CHECK(r.in->counters().rx_packets == f.forwarded);
  r.dp.drop_pending_upcalls();
  r.dp.flow_flush();
}

TEST_CASE("a frame that finds no buffer to be executed in is dropped and counted (pool_exhausted), none lost from the books") {
  // 600 buffers, 1000 misses up at once (their frames in the records), then
  // every answer at once while nobody collects the output: the pool runs
  // dry, and each answer without a buffer is a counted drop. (Injected 100
  // at a time, each lot received before the next: the PMD's buffer cache
  // holds at most 512 of the 600, the test thread takes the rest.)
  Rig r(2048, 600);
  r.dp.set_upcalls_enabled(true);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  const unsigned n = 1000;
  for (unsigned sent = 0; sent < n; sent += 100) {
    r.inject(100, sent);
    REQUIRE(eventually([&] { return r.dp.pmds()[0]->counters().misses >= sent + 100; }));
  }
  REQUIRE(r.dp.pmds()[0]->counters().lost == 0);
  Handler h(r.dp);
  REQUIRE(eventually([&] { return h.misses.load() == n && r.dp.pmds()[0]->upcall_channel().in_flight() == 0; }));
  h.finish();
  r.dp.set_upcalls_enabled(false);
  r.dp.stop();
  const size_t out = r.collect();
  const datapath::DropTotals::Port f = fate_of(r.dp, *r.in);
  const uint64_t exhausted = dropped(f, datapath::DropReason::kPoolExhausted);
  CHECK(exhausted > 0);  // the pool could not hold them all
  CHECK(f.in_flight == 0);
  CHECK(f.forwarded + exhausted == n);
  CHECK(f.dropped_total() == exhausted);
  CHECK(out <= f.forwarded);
  CHECK(r.dp.drop_totals().instances[static_cast<unsigned>(datapath::DropReason::kPoolExhausted)] >= exhausted);
  r.dp.drop_pending_upcalls();
  r.dp.flow_flush();
}

TEST_CASE("long frames keep their buffer: at most kUpcallHeldPackets up, the rest lost and counted") {
  Rig r(4096, 4096);
  r.dp.set_upcalls_enabled(true);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  // 256-byte frames (longer than kUpcallFrameInline), distinct keys.
  const unsigned n = datapath::kUpcallHeldPackets + 100;
  hal::Packet* pkts[32];
  for (unsigned sent = 0; sent < n;) {
    const unsigned k = r.backend->alloc_burst(std::span(pkts, std::min(32u, n - sent)));
    REQUIRE(k > 0);
    for (unsigned j = 0; j < k; ++j) {
      fill(pkts[j], sent + j);
      std::memset(pkts[j]->data() + 64, 0, 256 - 64);
      (void)pkts[j]->set_len(256);
    }
    REQUIRE(r.in->inject(std::span(pkts, k)) == k);
    sent += k;
    REQUIRE(eventually([&] { return r.dp.pmds()[0]->counters().misses >= sent; }));
  }
  const datapath::PmdCounters c = r.dp.pmds()[0]->counters();
  CHECK(c.upcalls == datapath::kUpcallHeldPackets);
  CHECK(c.lost == 100);
  r.dp.set_upcalls_enabled(false);
  r.dp.stop();
  r.dp.drop_pending_upcalls();
  // Every buffer came back: the pool hands out all 4096 again.
  std::vector<hal::Packet*> all(4096);
  CHECK(r.backend->alloc_burst(std::span(all)) == 4096);
  hal::release_burst(all);
}

TEST_CASE("records are reused: waves of misses answered carve no new records") {
  Rig r(2048);
  r.dp.set_upcalls_enabled(true);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  Handler h(r.dp);
  size_t got = 0;
  // Waves of 64 new keys, each wave answered and executed before the next;
  // the flows go between waves, so every wave misses again.
  const unsigned waves = 20;
  for (unsigned wave = 0; wave < waves; ++wave) {
    r.inject(64, wave * 64);
    REQUIRE(eventually([&] { return (got += r.collect()) >= 64 * (wave + 1); }));
    r.dp.flow_flush();
  }
  h.finish();
  r.dp.set_upcalls_enabled(false);
  r.dp.stop();
  const datapath::UpcallChannel& ch = r.dp.pmds()[0]->upcall_channel();
  const uint64_t upcalls = r.dp.pmds()[0]->counters().upcalls;
  CHECK(upcalls >= waves * 4);
  // Records come back and are taken again (newest freed first): the pool
  // built about a wave's worth, not one per upcall.
  CHECK(ch.carved() <= 2 * 64);
  CHECK(ch.carved() < upcalls);
  r.dp.drop_pending_upcalls();
  r.dp.flow_flush();
}

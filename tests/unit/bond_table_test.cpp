// The datapath's bond tables (bond_table.h, Datapath::bond_*) with PMDs
// forwarding between sim ring ports: lb_output follows the table a PMD
// holds, a table replaced through the request ring is in force once
// bond_set() returned (no packet to an old member after that), counters and
// drops; control-plane frames (send_packet) before and after start();
// sim links taken down; pmd-bond-show's text.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "cli/command_tree_impl.h"
#include "core/hash.h"
#include "datapath/datapath.h"
#include "eventually.h"
#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "flow/flow_hash.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "sim_test_util.h"

using namespace keel;
using namespace keel::datapath;

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

// An Ethernet/IPv4/UDP frame of flow i (source port i).
void fill(hal::Packet* p, unsigned i) {
  uint8_t f[64] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0,
                   10, 0, 0, 1, 10, 0, 0, 2, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i), 0x07, 0xd0,
                   0, 30, 0, 0};
  std::memcpy(p->data(), f, sizeof f);
  (void)p->set_len(sizeof f);
}

BondMembers all_to(uint16_t m) {
  BondMembers t;
  t.fill(m);
  return t;
}

BondMembers alternating(uint16_t a, uint16_t b) {
  BondMembers t;
  for (unsigned k = 0; k < kBondBuckets; ++k) t[k] = k % 2 ? b : a;
  return t;
}

// in (1) -> hash(l4(0)),lb_output(1) over members a (2) and b (3).
struct Rig {
  std::unique_ptr<hal::Backend> backend = test::sim_backend(8192);
  Datapath dp;
  hal::sim::RingPort* in;
  hal::sim::RingPort* a;
  hal::sim::RingPort* b;
  uint16_t in_id = 0, a_id = 0, b_id = 0;

  explicit Rig(std::vector<int> cores = {-1}) : dp(DatapathConfig{.pmd_cores = std::move(cores)}) {
    in = test::add_sim_port(*backend, dp, "in", "ring:size=1024", 1, &in_id);
    a = test::add_sim_port(*backend, dp, "a", "ring:size=4096", 4, &a_id);
    b = test::add_sim_port(*backend, dp, "b", "ring:size=4096", 4, &b_id);
  }
  ~Rig() {
    dp.stop();
    drain(a);
    drain(b);
  }
  void flow() {
    REQUIRE(dp.flow_put(parse_match("in_port(1),eth_type(0x0800),ipv4(frag=no)"),
                        parse_actions("hash(l4(0)),lb_output(1)"), std::nullopt, false)
                .ok());
  }
  // Injects n frames of flows first..first+n-1; RSS hash = flow number when `rss`.
  void inject(unsigned first, unsigned n, bool rss) {
    for (unsigned i = 0; i < n; ++i) {
      hal::Packet* p = nullptr;
      REQUIRE(backend->alloc_burst({&p, 1}) == 1);
      fill(p, first + i);
      if (rss) p->set_rss_hash(first + i);
      while (in->inject(std::span(&p, 1)) != 1) std::this_thread::yield();
    }
  }
  static std::vector<hal::Packet*> collect(hal::sim::RingPort* r) {
    std::vector<hal::Packet*> out;
    hal::Packet* got[32];
    size_t m;
    while ((m = r->collect(got)) > 0) out.insert(out.end(), got, got + m);
    return out;
  }
  static size_t drain(hal::sim::RingPort* r) {
    auto v = collect(r);
    for (hal::Packet* p : v) hal::release(p);
    return v.size();
  }
  uint64_t sent(hal::sim::RingPort* r) const { return r->counters().tx_packets + r->counters().tx_dropped; }
};

}  // namespace

TEST_CASE("bond_set checks its input and changes nothing on error") {
  Rig r;
  CHECK(r.dp.bond_set(0, all_to(2)).code() == Errc::invalid_argument);
  CHECK(r.dp.bond_set(256, all_to(2)).code() == Errc::invalid_argument);
  BondMembers bad = alternating(2, 3);
  bad[77] = 9;  // no port 9
  Status st = r.dp.bond_set(1, bad);
  CHECK(st.code() == Errc::not_found);
  CHECK(st.message().find("bucket 77: member 9") != std::string::npos);
  CHECK(r.dp.bond_ids().empty());
  CHECK(r.dp.bond_dump().empty());
  CHECK(!r.dp.bond_stats(1));
  CHECK(r.dp.bond_del(1).code() == Errc::not_found);

  BondMembers none;
  none.fill(kNoBondMember);
  REQUIRE(r.dp.bond_set(7, none).ok());  // every member down: allowed
  REQUIRE(r.dp.bond_set(3, alternating(2, 3)).ok());
  CHECK(r.dp.bond_ids() == std::vector<uint32_t>{3, 7});
  REQUIRE(r.dp.bond_set(3, bad).code() == Errc::not_found);
  auto views = r.dp.bond_dump();
  REQUIRE(views.size() == 2);
  CHECK(views[0].bond_id == 3);
  CHECK(views[0].members == alternating(2, 3));  // the bad set changed nothing
  CHECK(views[1].members == none);
  REQUIRE(r.dp.bond_del(7).ok());
  CHECK(r.dp.bond_ids() == std::vector<uint32_t>{3});
}

TEST_CASE("every PMD holds every table, PMDs added later included") {
  Rig r({-1, -1});
  REQUIRE(r.dp.bond_set(1, alternating(2, 3)).ok());
  REQUIRE(r.dp.bond_set(2, all_to(3)).ok());
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  REQUIRE(r.dp.bond_set(2, all_to(2)).ok());  // replaced while running
  auto views = r.dp.bond_dump();
  REQUIRE(views.size() == 4);
  for (const PmdBondView& v : views) CHECK(v.members == (v.bond_id == 1 ? alternating(2, 3) : all_to(2)));
  CHECK(views[0].pmd == 0);
  CHECK(views[2].pmd == 1);
  REQUIRE(r.dp.set_pmd_cores({-1, -1, -1}).ok());  // no slow path runs here
  views = r.dp.bond_dump();
  REQUIRE(views.size() == 6);
  CHECK(views[4].pmd == 2);
  CHECK(views[4].members == alternating(2, 3));
  CHECK(views[5].members == all_to(2));
}

TEST_CASE("lb_output sends each packet to the member of its bucket and counts it per bucket") {
  Rig r;
  const BondMembers t = alternating(r.a_id, r.b_id);
  REQUIRE(r.dp.bond_set(1, t).ok());
  r.flow();
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  r.inject(0, 200, true);     // RSS hash = flow number: bucket hash_int(i, 0) & 255
  r.inject(1000, 200, false);  // no RSS hash: the 5-tuple hash
  REQUIRE(test::eventually([&] { return r.sent(r.a) + r.sent(r.b) == 400; }));
  std::vector<uint64_t> per_bucket(kBondBuckets);
  for (hal::sim::RingPort* port : {r.a, r.b}) {
    const uint16_t id = port == r.a ? r.a_id : r.b_id;
    for (hal::Packet* p : Rig::collect(port)) {
      const uint32_t bucket = p->meta().dp_hash & kBondBucketMask;
      CHECK(t[bucket] == id);
      if (p->has_rss_hash()) CHECK(p->meta().dp_hash == hash_int(p->rss_hash(), 0));
      ++per_bucket[bucket];
      hal::release(p);
    }
  }
  auto stats = r.dp.bond_stats(1);
  REQUIRE(stats);
  for (unsigned k = 0; k < kBondBuckets; ++k) {
    CHECK(stats->packets[k] == per_bucket[k]);
    CHECK(stats->bytes[k] == per_bucket[k] * 64);
  }
  CHECK(r.dp.pmds()[0]->counters().bond_drops == 0);
  CHECK(r.a->counters().tx_packets > 0);
  CHECK(r.b->counters().tx_packets > 0);

  // Gone: lb_output(1) drops, counted.
  REQUIRE(r.dp.bond_del(1).ok());
  CHECK(!r.dp.bond_stats(1));
  r.inject(0, 10, true);
  REQUIRE(test::eventually([&] { return r.dp.pmds()[0]->counters().bond_drops == 10; }));
  // A bucket without a member drops too.
  BondMembers half = all_to(r.a_id);
  for (unsigned k = 0; k < kBondBuckets; k += 2) half[k] = kNoBondMember;
  REQUIRE(r.dp.bond_set(1, half).ok());
  unsigned expect_drops = 0;
  for (unsigned i = 0; i < 20; ++i) expect_drops += half[hash_int(i, 0) & 255] == kNoBondMember;
  const uint64_t a_before = r.sent(r.a), b_before = r.sent(r.b);
  r.inject(0, 20, true);
  REQUIRE(test::eventually([&] {
    return r.dp.pmds()[0]->counters().bond_drops + r.sent(r.a) - a_before == 10 + 20;
  }));
  CHECK(r.dp.pmds()[0]->counters().bond_drops == 10 + expect_drops);
  CHECK(r.sent(r.a) - a_before == 20 - expect_drops);
  CHECK(r.sent(r.b) == b_before);  // b is in no bucket now
}

TEST_CASE("a table replaced while the PMD forwards: no packet to the old member once bond_set returned") {
  Rig r;
  REQUIRE(r.dp.bond_set(1, all_to(r.a_id)).ok());
  r.flow();
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  std::atomic<bool> stop{false};
  std::thread traffic([&] {
    unsigned i = 0;
    hal::Packet* pkts[32];
    while (!stop.load(std::memory_order_relaxed)) {
      const unsigned n = r.backend->alloc_burst(pkts);
      for (unsigned k = 0; k < n; ++k) fill(pkts[k], i++);
      const size_t took = r.in->inject(std::span(pkts, n));
      for (size_t k = took; k < n; ++k) hal::release(pkts[k]);
      Rig::drain(r.a);
      Rig::drain(r.b);
      std::this_thread::yield();
    }
  });
  for (int round = 0; round < 40; ++round) {
    const bool to_a = round % 2 == 1;
    REQUIRE(r.dp.bond_set(1, all_to(to_a ? r.a_id : r.b_id)).ok());
    // Everything the PMD sent to the old member was sent before it took the
    // new table (between bursts), so before bond_set() returned.
    hal::sim::RingPort* old = to_a ? r.b : r.a;
    hal::sim::RingPort* now = to_a ? r.a : r.b;
    const uint64_t old_sent = r.sent(old), now_sent = r.sent(now);
    // Until the PMD has forwarded more to the new member.
    REQUIRE(test::eventually([&] { return r.sent(now) > now_sent + 64; }));
    CHECK(r.sent(old) == old_sent);
  }
  stop = true;
  traffic.join();
  CHECK(r.dp.pmds()[0]->counters().bond_drops == 0);
}

TEST_CASE("send_packet: at once before start(), through the PMD's ring while it runs, refused when full") {
  Rig r;
  uint8_t frame[60] = {0x01, 0x80, 0xc2, 0, 0, 0x02, 0xaa, 0x55, 0, 0, 0, 2, 0x88, 0x09, 0x01};
  CHECK(r.dp.send_packet(r.a_id, std::span(frame, 10)).code() == Errc::invalid_argument);
  CHECK(r.dp.send_packet(42, frame).code() == Errc::not_found);
  REQUIRE(r.dp.send_packet(r.a_id, frame).ok());
  auto got = Rig::collect(r.a);
  REQUIRE(got.size() == 1);
  CHECK(got[0]->len() == sizeof frame);
  CHECK(std::memcmp(got[0]->data(), frame, sizeof frame) == 0);
  hal::release(got[0]);

  REQUIRE(r.dp.start({r.backend.get()}).ok());
  frame[14] = 7;
  REQUIRE(r.dp.send_packet(r.b_id, frame).ok());
  REQUIRE(test::eventually([&] { return r.b->tx_pending() == 1; }));
  got = Rig::collect(r.b);
  REQUIRE(got.size() == 1);
  CHECK(got[0]->data()[14] == 7);
  hal::release(got[0]);
  // The PMD bumps ctl_tx after the burst leaves: the frame can be seen first.
  CHECK(test::eventually([&] { return r.dp.pmds()[0]->counters().ctl_tx == 1; }));
  CHECK(test::eventually([&] { return r.b->counters().tx_packets == 1; }));

  // A parked PMD sends nothing: its ring fills, and the next one is refused.
  r.dp.pmds()[0]->pause();
  for (unsigned i = 0; i < Pmd::kCtlTxRing; ++i) REQUIRE(r.dp.send_packet(r.a_id, frame).ok());
  Status full = r.dp.send_packet(r.a_id, frame);
  CHECK(full.code() == Errc::unavailable);
  CHECK(full.message().find("ring is full") != std::string::npos);
  CHECK(r.dp.pmds()[0]->counters().ctl_tx_full == 1);
  r.dp.pmds()[0]->resume();
  REQUIRE(test::eventually([&] { return r.a->tx_pending() == Pmd::kCtlTxRing; }));
  CHECK(Rig::drain(r.a) == Pmd::kCtlTxRing);
}

TEST_CASE("a sim port's link set down receives nothing and drops what it is given, counted") {
  auto backend = test::sim_backend();
  Datapath dp({.pmd_cores = {-1}});
  uint16_t id = 0;
  hal::sim::RingPort* p = test::add_sim_port(*backend, dp, "p", "ring:size=64", 1, &id);
  CHECK(p->link().up);
  CHECK(hal::format_mac(p->mac()) == "aa:55:aa:55:00:01");
  REQUIRE(p->set_link(false).ok());
  CHECK(!p->link().up);
  hal::Packet* pk[2];
  REQUIRE(backend->alloc_burst(pk) >= 2);
  fill(pk[0], 1);
  fill(pk[1], 2);
  REQUIRE(p->inject(std::span(pk, 1)) == 1);
  hal::Packet* out[4];
  CHECK(p->rx(0, out) == 0);  // nothing received; the packet waits
  CHECK(p->rx_pending() == 1);
  CHECK(p->tx(0, std::span(&pk[1], 1)) == 0);
  CHECK(p->tx_pending() == 0);
  CHECK(p->counters().tx_dropped == 1);
  CHECK(p->counters().tx_link_down_drops == 1);
  REQUIRE(p->set_link(true).ok());
  CHECK(p->link().up);
  REQUIRE(p->rx(0, out) == 1);
  hal::release(out[0]);
  CHECK(p->counters().rx_packets == 1);
}

TEST_CASE("pmd-bond-show: Open vSwitch's dpif-netdev/bond-show layout, and the per-PMD view") {
  CHECK(cli::pmd_bond_show_text({}).empty());  // no bond: nothing at all
  std::vector<PmdBondView> v;
  BondMembers t = alternating(2, 3);
  t[255] = kNoBondMember;
  v.push_back({0, 4, 1, t});
  v.push_back({0, 4, 9, all_to(3)});
  v.push_back({1, 6, 1, t});
  v.push_back({1, 6, 9, all_to(3)});
  const std::string text = cli::pmd_bond_show_text(v);
  CHECK(text.rfind("Bonds:\n  bond-id 1:\n    bucket 0 - member 2\n    bucket 1 - member 3\n", 0) == 0);
  CHECK(text.find("    bucket 254 - member 2\n    bucket 255 - member 4294967295\n  bond-id 9:\n") !=
        std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1 + 2 * (1 + 256));  // each table once

  const std::string per = cli::pmd_bond_show_pmd_text(v);
  CHECK(per.rfind("pmd thread numa_id 0 core_id 4:\n  Bond cache:\n    bond-id 1 :\n      bucket 0 - member 2\n", 0) ==
        0);
  CHECK(per.find("      bucket 255 - member 3\npmd thread numa_id 0 core_id 6:\n  Bond cache:\n    bond-id 1 :\n") !=
        std::string::npos);
  CHECK(std::count(per.begin(), per.end(), '\n') == 2 * (2 + 2 * (1 + 256)));
}

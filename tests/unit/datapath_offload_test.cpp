// The datapath's side of hardware offload (offload_hooks.h), through a
// Datapath with ring ports: events posted when a PMD applies an install /
// modify / remove (none while offload is disabled; a full ring counts them
// lost), hot microflows posted once when a sampled flow's microflow reaches
// the threshold (driven by packets, no clock: the window is set out of
// reach), the MicroKey of a parsed packet, the mark path (marked packets run
// their flow's actions with no lookup: phwol_hits, lookup counters
// unchanged; a stale, unknown or foreign mark is classified as usual:
// phwol_misses), and the hardware counters in flow_stats / flow_dump totals,
// with the sync hook called before each.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "datapath/datapath.h"
#include "eventually.h"
#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "flow/flow_text.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "packet/parser.h"
#include "sim_test_util.h"

using namespace keel;
using namespace keel::datapath;

namespace {

using Bytes = std::vector<uint8_t>;

using test::parse_actions;
using test::parse_match;

// An IPv4/UDP frame 10.0.0.<src> -> 10.0.0.2, UDP sport -> 2000, 64 bytes;
// with `vid`, behind an 802.1Q tag (PCP 3).
Bytes udp_frame(uint8_t src, uint16_t sport, int vid = -1) {
  Bytes f = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01};
  if (vid >= 0) {
    const uint16_t tci = static_cast<uint16_t>(3 << 13 | vid);
    f.insert(f.end(), {0x81, 0x00, static_cast<uint8_t>(tci >> 8), static_cast<uint8_t>(tci)});
  }
  const size_t ip = f.size() + 2;
  f.insert(f.end(), {0x08, 0x00,                                                    // eth_type
                     0x45, 0x28, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, src,   // ipv4, tos 0x28
                     10, 0, 0, 2,                                                   //
                     static_cast<uint8_t>(sport >> 8), static_cast<uint8_t>(sport), 0x07, 0xd0, 0, 30, 0, 0});
  f.resize(ip + 50, 0xab);
  uint32_t s = 0;
  for (size_t k = ip; k < ip + 20; k += 2) s += static_cast<uint32_t>(f[k] << 8 | f[k + 1]);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  f[ip + 10] = static_cast<uint8_t>(~s >> 8), f[ip + 11] = static_cast<uint8_t>(~s);
  return f;
}

struct Rig {
  std::unique_ptr<hal::Backend> backend = test::sim_backend(4096);
  Datapath dp;
  hal::sim::RingPort* in;   // 1
  hal::sim::RingPort* out;  // 2
  hal::sim::RingPort* in3;  // 3

  explicit Rig(uint32_t flow_capacity = 262144)
      : dp(DatapathConfig{.pmd_cores = {-1}, .pmd = PmdConfig{.flow_capacity = flow_capacity}}) {
    in = test::add_sim_port(*backend, dp, "in");
    out = test::add_sim_port(*backend, dp, "out");
    in3 = test::add_sim_port(*backend, dp, "in3");
  }
  ~Rig() {
    dp.stop();
    (void)collect(out);
  }
  void inject(hal::sim::RingPort* r, const Bytes& f, uint32_t mark = 0) {
    hal::Packet* p = nullptr;
    REQUIRE(backend->alloc_burst({&p, 1}) == 1);
    REQUIRE(p->set_len(static_cast<uint32_t>(f.size())));
    std::memcpy(p->data(), f.data(), f.size());
    if (mark) p->set_flow_mark(mark);
    while (r->inject(std::span(&p, 1)) != 1) std::this_thread::yield();
  }
  static std::vector<Bytes> collect(hal::sim::RingPort* r) {
    std::vector<Bytes> v;
    hal::Packet* got[32];
    size_t m;
    while ((m = r->collect(got)) > 0) {
      for (size_t i = 0; i < m; ++i) {
        v.emplace_back(got[i]->data(), got[i]->data() + got[i]->len());
        hal::release(got[i]);
      }
    }
    return v;
  }
  // Waits until `n` more frames left on `out`; returns them.
  std::vector<Bytes> wait_out(size_t n) {
    std::vector<Bytes> got;
    REQUIRE(test::eventually([&] {
      for (Bytes& b : collect(out)) got.push_back(std::move(b));
      return got.size() >= n;
    }));
    CHECK(got.size() == n);
    return got;
  }
  PmdCounters pmd() const { return dp.pmds()[0]->counters(); }
  void put(const std::string& match, const std::string& actions) {
    Status st = dp.flow_put(parse_match(match), parse_actions(actions), std::nullopt, false);
    REQUIRE_MESSAGE(st.ok(), st.message());
  }
  // The one live flow's (slot, ufid) with this match.
  OffloadEvent find(const std::string& match) {
    const flow::Match m = parse_match(match);
    const Ufid u = Datapath::ufid_for(m);
    std::vector<OffloadEvent> all;
    dp.offload_scan(all);
    for (const OffloadEvent& e : all)
      if (e.ufid == u) return e;
    FAIL("no flow " << match);
    return {};
  }
  std::vector<OffloadEvent> events() {
    std::vector<OffloadEvent> ev(8192);
    std::vector<HotMicroflow> hot(16);
    const OffloadPollResult r = dp.offload_poll(ev, hot);
    ev.resize(r.events);
    return ev;
  }
  std::vector<HotMicroflow> hot() {
    std::vector<OffloadEvent> ev(8192);
    std::vector<HotMicroflow> h(64);
    const OffloadPollResult r = dp.offload_poll(ev, h);
    h.resize(r.hot);
    return h;
  }
  const FlowView* view(const std::vector<FlowView>& all, const Ufid& u) {
    for (const FlowView& v : all)
      if (v.ufid == u) return &v;
    return nullptr;
  }
};

const char* kIp1 = "in_port(1),eth_type(0x0800),ipv4(src=10.0.0.1,frag=no)";
const char* kSimple = "in_port(1),eth_type(0x0800),ipv4(frag=no)";

}  // namespace

TEST_CASE("offload events: posted when the PMD applies install / modify / remove, only while enabled") {
  Rig r;
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  r.put(kIp1, "2");
  CHECK(r.events().empty());  // offload disabled: nothing posted

  r.dp.set_offload_enabled(true);
  const char* m2 = "in_port(1),eth_type(0x0800),ipv4(src=10.0.0.3,frag=no)";
  r.put(m2, "2");
  const OffloadEvent f2 = r.find(m2);
  REQUIRE(r.dp.flow_modify(0, parse_match(m2), parse_actions("3")).ok());
  REQUIRE(r.dp.flow_del(parse_match(m2)).ok());
  const auto ev = r.events();
  REQUIRE(ev.size() == 3);
  CHECK(ev[0].op == OffloadEvent::Op::installed);
  CHECK(ev[1].op == OffloadEvent::Op::modified);
  CHECK(ev[2].op == OffloadEvent::Op::removed);
  for (const OffloadEvent& e : ev) {
    CHECK(e.pmd == 0);
    CHECK(e.slot == f2.slot);
    CHECK(e.ufid == Datapath::ufid_for(parse_match(m2)));
  }
  // A refused request posts nothing.
  CHECK(!r.dp.flow_del(parse_match(m2)).ok());
  CHECK(r.events().empty());
  CHECK(r.pmd().offload_events_lost == 0);
}

TEST_CASE("offload events: a full ring drops and counts; offload_scan lists every live flow") {
  Rig r;  // PMD not running: requests apply on this thread, events still posted
  r.dp.set_offload_enabled(true);
  const unsigned n = Pmd::kOffloadEventRing + 10;
  for (unsigned i = 0; i < n; ++i)
    r.put("in_port(1),eth_type(0x0800),ipv4(src=10." + std::to_string(i >> 8) + "." + std::to_string(i & 255) +
              ".9,frag=no)",
          "2");
  CHECK(r.pmd().offload_events_lost == 10);
  CHECK(r.dp.offload_events_lost() == 10);
  CHECK(r.events().size() == Pmd::kOffloadEventRing);
  std::vector<OffloadEvent> all;
  r.dp.offload_scan(all);
  CHECK(all.size() == n);
}

TEST_CASE("hot microflows: posted once at the threshold, per microflow, only for sampled flows") {
  Rig r;
  r.put(kSimple, "2");  // a simple-match flow: its packets are keyed only for the sample
  const OffloadEvent f = r.find(kSimple);
  r.dp.set_offload_enabled(true);
  r.dp.set_offload_promote(16, 3600'000'000'000ull);  // window out of reach: packets decide
  REQUIRE(r.dp.start({r.backend.get()}).ok());

  // Not sampled (hw_want 0): nothing, however many.
  for (int i = 0; i < 40; ++i) r.inject(r.in, udp_frame(1, 1000));
  r.wait_out(40);
  CHECK(r.hot().empty());

  REQUIRE(r.dp.set_flow_offload(0, f.slot, f.ufid, FlowOffload::none, 1));
  for (int i = 0; i < 15; ++i) r.inject(r.in, udp_frame(1, 1000));
  r.wait_out(15);
  CHECK(r.hot().empty());  // 15 < 16
  r.inject(r.in, udp_frame(1, 1000));
  r.wait_out(1);
  auto hot = r.hot();
  REQUIRE(hot.size() == 1);
  CHECK(hot[0].pmd == 0);
  CHECK(hot[0].rxq == 0);
  CHECK(hot[0].slot == f.slot);
  CHECK(hot[0].ufid == f.ufid);
  CHECK(hot[0].packets == 16);
  const MicroKey& k = hot[0].key;
  CHECK(k.in_port == 1);
  CHECK(k.eth_dst == std::array<uint8_t, 6>{0x02, 0, 0, 0, 0, 0x02});
  CHECK(k.eth_src == std::array<uint8_t, 6>{0x02, 0, 0, 0, 0, 0x01});
  CHECK(!k.vlan_present);
  CHECK(k.eth_type == 0x0800);
  CHECK(k.ip_version == 4);
  CHECK(k.ipv4_src == 0x0a000001);
  CHECK(k.ipv4_dst == 0x0a000002);
  CHECK(k.ip_proto == 17);
  CHECK(k.ip_tos == 0x28);
  CHECK(k.ip_ttl == 64);
  CHECK(k.ip_frag == 0);
  CHECK(k.tp_src == 1000);
  CHECK(k.tp_dst == 2000);

  // More of the same microflow: not posted again; another microflow of the
  // same megaflow is counted apart and posted at its own 16th packet.
  for (int i = 0; i < 50; ++i) r.inject(r.in, udp_frame(1, 1000));
  for (int i = 0; i < 15; ++i) r.inject(r.in, udp_frame(1, 1001));
  r.wait_out(65);
  CHECK(r.hot().empty());
  r.inject(r.in, udp_frame(1, 1001));
  r.wait_out(1);
  hot = r.hot();
  REQUIRE(hot.size() == 1);
  CHECK(hot[0].key.tp_src == 1001);
  CHECK(r.pmd().offload_hot_lost == 0);

  // Sampling off again: nothing more.
  REQUIRE(r.dp.set_flow_offload(0, f.slot, f.ufid, FlowOffload::none, 0));
  for (int i = 0; i < 20; ++i) r.inject(r.in, udp_frame(1, 1002));
  r.wait_out(20);
  CHECK(r.hot().empty());
}

TEST_CASE("hot microflows: the full path (parsed keys), a VLAN tag in the key") {
  Rig r;
  const char* m = "in_port(1),eth_type(0x8100),vlan(vid=10,pcp=3),encap(eth_type(0x0800),ipv4(src=10.0.0.7,frag=no))";
  r.put(m, "2");
  const OffloadEvent f = r.find(m);
  r.dp.set_offload_enabled(true);
  r.dp.set_offload_promote(4, 3600'000'000'000ull);
  REQUIRE(r.dp.set_flow_offload(0, f.slot, f.ufid, FlowOffload::none, 1));
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  for (int i = 0; i < 10; ++i) r.inject(r.in, udp_frame(7, 5, 10));
  r.wait_out(10);
  const auto hot = r.hot();
  REQUIRE(hot.size() == 1);
  CHECK(hot[0].key.vlan_present);
  CHECK(hot[0].key.vlan_tci == (3 << 13 | 10));
  CHECK(hot[0].key.eth_type == 0x0800);
  CHECK(hot[0].key.ipv4_src == 0x0a000007);
  CHECK(r.pmd().megaflow_hits + r.pmd().emc_hits == 10);
}

TEST_CASE("make_micro_key: not for tunnel metadata, a recirculation or a second tag") {
  flow::FlowKey k{};
  k.in_port = 3;
  k.dl_type = flow::text::hton16(0x86dd);
  k.ipv6_src.b[15] = 1;
  k.ipv6_dst.b[0] = 0xfe;
  k.nw_proto = 58;
  k.nw_ttl = 255;
  k.tp_src = flow::text::hton16(128);  // ICMPv6 echo request, as the parser keys it
  k.ipv6_label = flow::text::hton32(0x12345);
  flow::Miniflow mf;
  REQUIRE(flow::compress(k, mf));
  MicroKey mk;
  REQUIRE(make_micro_key(mf, &mk));
  CHECK(mk.ip_version == 6);
  CHECK(mk.ipv6_src[15] == 1);
  CHECK(mk.ipv6_dst[0] == 0xfe);
  CHECK(mk.icmp_type == 128);
  CHECK(mk.tp_src == 0);
  CHECK(mk.ip_ttl == 255);

  flow::FlowKey t = k;
  t.tun_ipv4_dst = 0x01020304;
  REQUIRE(flow::compress(t, mf));
  CHECK(!make_micro_key(mf, &mk));
  t = k;
  t.recirc_id = 5;
  REQUIRE(flow::compress(t, mf));
  CHECK(!make_micro_key(mf, &mk));
  t = k;
  t.vlans[0] = {flow::text::hton16(0x88a8), flow::text::hton16(0x1000 | 5)};
  t.vlans[1] = {flow::text::hton16(0x8100), flow::text::hton16(0x1000 | 6)};
  REQUIRE(flow::compress(t, mf));
  CHECK(!make_micro_key(mf, &mk));
}

TEST_CASE("mark path: a marked packet runs its flow's actions with no lookup; stale and foreign marks fall back") {
  Rig r(1024);
  r.put(kIp1, "2");
  const char* m7 = "in_port(1),eth_type(0x0800),ipv4(src=10.0.0.7,frag=no)";
  r.put(m7, "push_vlan(vid=42,pcp=0),2");  // not outputs-only: parsed for the executor
  const OffloadEvent f1 = r.find(kIp1), f7 = r.find(m7);
  REQUIRE(r.dp.start({r.backend.get()}).ok());

  // Errors change nothing.
  CHECK(r.dp.set_flow_mark(0, f1.slot, f1.ufid, 0).code() == Errc::invalid_argument);
  CHECK(r.dp.set_flow_mark(0, f1.slot, f1.ufid, kMaxFlowMark + 1).code() == Errc::invalid_argument);
  CHECK(r.dp.set_flow_mark(3, f1.slot, f1.ufid, 5).code() == Errc::invalid_argument);
  CHECK(r.dp.set_flow_mark(0, f1.slot, f7.ufid, 5).code() == Errc::not_found);
  REQUIRE(r.dp.set_flow_mark(0, f1.slot, f1.ufid, 5).ok());
  CHECK(r.dp.set_flow_mark(0, f1.slot, f1.ufid, 5).ok());                            // again: the same
  CHECK(r.dp.set_flow_mark(0, f1.slot, f1.ufid, 6).code() == Errc::already_exists);  // one mark per flow
  CHECK(r.dp.set_flow_mark(0, f7.slot, f7.ufid, 5 + 1024).code() == Errc::already_exists);  // same entry
  REQUIRE(r.dp.set_flow_mark(0, f7.slot, f7.ufid, 7).ok());
  CHECK(r.dp.offload_flow(0, f1.slot, f1.ufid)->mark == 5);

  for (int i = 0; i < 10; ++i) r.inject(r.in, udp_frame(1, 100), 5);
  for (int i = 0; i < 4; ++i) r.inject(r.in, udp_frame(7, 100), 7);
  auto got = r.wait_out(14);
  for (int i = 0; i < 10; ++i) CHECK(got[i] == udp_frame(1, 100));
  Bytes tagged = udp_frame(7, 100);
  tagged.insert(tagged.begin() + 12, {0x81, 0x00, 0x00, 42});
  for (int i = 10; i < 14; ++i) CHECK(got[i] == tagged);
  PmdCounters c = r.pmd();
  CHECK(c.phwol_hits == 14);
  CHECK(c.phwol_misses == 0);
  CHECK(c.emc_hits + c.smc_hits + c.megaflow_hits + c.simple_hits + c.misses == 0);
  auto dump = r.dp.flow_dump();
  CHECK(r.view(dump, f1.ufid)->packets == 10);
  CHECK(r.view(dump, f7.ufid)->packets == 4);

  // A mark nobody set, and mark 5 on another port: classified as usual.
  r.inject(r.in, udp_frame(1, 100), 9);
  r.inject(r.in3, udp_frame(1, 100), 5);
  r.wait_out(1);  // in3 has no flow: the second one misses (no slow path: lost)
  REQUIRE(test::eventually([&] { return r.pmd().lost == 1; }));
  c = r.pmd();
  CHECK(c.phwol_hits == 14);
  CHECK(c.phwol_misses == 2);
  CHECK(c.emc_hits + c.megaflow_hits == 1);

  // The flow dies: its entry goes with it; mark 5 is stale now.
  REQUIRE(r.dp.flow_del(parse_match(kIp1)).ok());
  r.put(kIp1, "2");  // the same match again: a new flow, no mark
  r.inject(r.in, udp_frame(1, 100), 5);
  r.wait_out(1);
  c = r.pmd();
  CHECK(c.phwol_hits == 14);
  CHECK(c.phwol_misses == 3);
  CHECK(r.dp.offload_flow(0, r.find(kIp1).slot, r.find(kIp1).ufid)->mark == 0);

  // clear_flow_mark: afterwards the mark no longer executes.
  REQUIRE(r.dp.clear_flow_mark(0, 7).ok());
  CHECK(r.dp.clear_flow_mark(0, 7).ok());  // none: still ok
  CHECK(r.dp.offload_flow(0, f7.slot, f7.ufid)->mark == 0);
  REQUIRE(r.dp.set_flow_mark(0, f7.slot, f7.ufid, 5 + 1024).ok());  // the entry is free again
  r.inject(r.in, udp_frame(7, 100), 7);
  CHECK(r.wait_out(1)[0] == tagged);  // classified: the same flow, found by lookup
  CHECK(r.pmd().phwol_hits == 14);
  CHECK(r.pmd().phwol_misses == 4);
  r.inject(r.in, udp_frame(7, 100), 5 + 1024);
  CHECK(r.wait_out(1)[0] == tagged);
  CHECK(r.pmd().phwol_hits == 15);
}

TEST_CASE("hardware counters: in flow_stats and flow_dump totals, the sync hook runs first") {
  Rig r;
  r.put(kIp1, "2");
  const OffloadEvent f = r.find(kIp1);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  for (int i = 0; i < 3; ++i) r.inject(r.in, udp_frame(1, 100));
  r.wait_out(3);

  REQUIRE(r.dp.add_hw_stats(0, f.slot, f.ufid, 100, 6400, 0));
  std::vector<FlowStats> st;
  r.dp.flow_stats(st);
  REQUIRE(st.size() == 1);
  CHECK(st[0].packets == 103);
  CHECK(st[0].bytes == 3 * 64 + 6400);
  const uint64_t sw_used = st[0].used_ns;
  CHECK(sw_used > 0);

  // The hook: terse for flow_stats, full for flow_dump, before the mutex
  // (it may add counts itself).
  std::vector<bool> calls;
  r.dp.set_offload_sync([&](bool full) {
    calls.push_back(full);
    CHECK(r.dp.add_hw_stats(0, f.slot, f.ufid, 1, 64, sw_used + 1000));
  });
  r.dp.flow_stats(st);
  CHECK(st[0].packets == 104);
  CHECK(st[0].used_ns == sw_used + 1000);
  REQUIRE(r.dp.set_flow_offload(0, f.slot, f.ufid, FlowOffload::full, 0));
  auto dump = r.dp.flow_dump();
  REQUIRE(dump.size() == 1);
  CHECK(dump[0].packets == 105);
  CHECK(dump[0].hw_packets == 102);
  CHECK(dump[0].bytes == 3 * 64 + 102 * 64);
  CHECK(dump[0].hw_bytes == 102 * 64);
  CHECK(dump[0].offload == FlowOffload::full);
  CHECK(calls == std::vector<bool>{false, true});
  r.dp.set_offload_sync({});
  r.dp.flow_stats(st);
  CHECK(calls.size() == 2);

  // A flow that is gone (or another ufid in the slot) takes nothing.
  CHECK(!r.dp.add_hw_stats(0, f.slot, Ufid{1, 2}, 1, 1, 0));
  CHECK(!r.dp.add_hw_stats(1, f.slot, f.ufid, 1, 1, 0));
  REQUIRE(r.dp.flow_del(parse_match(kIp1)).ok());
  CHECK(!r.dp.add_hw_stats(0, f.slot, f.ufid, 1, 1, 0));
  CHECK(!r.dp.set_flow_offload(0, f.slot, f.ufid, FlowOffload::partial, 1));
  CHECK(!r.dp.offload_flow(0, f.slot, f.ufid));
}

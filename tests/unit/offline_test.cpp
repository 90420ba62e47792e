// Offline runs (datapath.h): with every input a finite pcap replay and the
// boot's permission, one PMD reads the inputs merged by record timestamp,
// holds packets instead of losing them when the upcall records run out
// (backpressure), and forwards everything in input order — recirculated
// packets' second pass through the slow path included (the Udpif handler
// answers derived records first); a live input, or no permission, keeps
// live mode. Runs under TSan in the tsan preset.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "datapath/datapath.h"
#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "flow/flow_text.h"
#include "hal/sim/pcap_file.h"
#include "keel/hal/backend.h"
#include "ofproto/bridge.h"
#include "ofproto/udpif.h"
#include "eventually.h"
#include "sim_test_util.h"

using namespace keel;
using namespace std::chrono_literals;
using keel::test::eventually;

namespace {

// Ethernet/IPv4/UDP, a distinct key per i (source port), i in the payload.
std::vector<uint8_t> frame(unsigned i) {
  const unsigned sport = 1000 + i;
  std::vector<uint8_t> f = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0,
                            10, 0, 0, 1, 10, 0, 0, 2, static_cast<uint8_t>(sport >> 8), static_cast<uint8_t>(sport),
                            0x07, 0xd0, 0, 30};
  f.resize(64);
  f[60] = static_cast<uint8_t>(i >> 8);
  f[61] = static_cast<uint8_t>(i);
  return f;
}
unsigned index_of(std::span<const uint8_t> f) { return unsigned{f[60]} << 8 | f[61]; }

// Packets i with i % 2 == parity, stamped 1 ms + i us: the two files interleave.
void write_input(const std::string& path, unsigned n, unsigned parity) {
  auto w = hal::sim::PcapWriter::create(path);
  REQUIRE(w.ok());
  for (unsigned i = parity; i < n; i += 2) REQUIRE((*w)->write(frame(i), 1'000'000ull + i * 1000ull));
  REQUIRE((*w)->close().ok());
}

struct Rig {
  keel::test::TempDir dir;
  std::unique_ptr<hal::Backend> backend = keel::test::sim_backend(4096);
  datapath::Datapath dp{{.pmd_cores = {-1, -1}}};
  std::string out_path = dir.file("out.pcap");

  void add(const std::string& name, const std::string& spec) {
    auto s = hal::parse_port_spec(name, spec);
    REQUIRE(s.ok());
    auto port = backend->open_port(*s, 1, 1);
    REQUIRE(port.ok());
    REQUIRE(dp.add_port(std::move(port.value())).ok());
  }
  // p0, p1: the interleaved inputs; p2: the output.
  explicit Rig(unsigned n, bool allow = true) {
    write_input(dir.file("a.pcap"), n, 0);
    write_input(dir.file("b.pcap"), n, 1);
    add("p0", "pcap:in=" + dir.file("a.pcap"));
    add("p1", "pcap:in=" + dir.file("b.pcap"));
    add("p2", "pcap:out=" + out_path);
    dp.allow_offline(allow);
  }
  std::vector<unsigned> output() {
    dp.stop_ports();
    auto r = hal::sim::PcapReader::open(out_path, hal::kBufferSize);
    REQUIRE(r.ok());
    std::vector<unsigned> v;
    for (size_t i = 0; i < r->size(); ++i) v.push_back(index_of(r->frame(i)));
    return v;
  }
};

// Answers every miss with one megaflow for its in_port (eth_type exact) ->
// output:3, once `go` is set: a wide flow, so later packets of that port
// hit it — offline they still go up while an earlier packet is up.
struct Handler {
  datapath::Datapath& dp;
  std::atomic<bool> go{false}, stop{false};
  std::thread t{[this] { loop(); }};
  explicit Handler(datapath::Datapath& d) : dp(d) {}
  ~Handler() {
    stop = true;
    t.join();
    recycle();
  }
  void recycle() {
    datapath::UpcallChannel& ch = dp.pmds()[0]->upcall_channel();
    datapath::Upcall* u;
    while (ch.next_spent(u)) {
      if (u->install_failed) datapath::free_megaflow(u->install);
      delete u->actions;
      ch.recycle(u);
    }
  }
  void loop() {
    datapath::UpcallChannel& ch = dp.pmds()[0]->upcall_channel();
    while (!stop) {
      recycle();
      datapath::Upcall* u;
      if (!go || !ch.next(u)) {
        std::this_thread::sleep_for(20us);
        continue;
      }
      flow::Match m;
      flow::expand(u->key, m.key);
      m.mask.in_port = m.mask.recirc_id = 0xffffffffu;
      m.mask.dl_type = 0xffff;
      m.apply_mask();
      auto acts = flow::parse_dp_actions("3");
      auto f = dp.build_megaflow(m, &acts.value(), datapath::Datapath::ufid_for(m));
      REQUIRE(f.ok());
      u->install = f.value();
      u->actions = new flow::DpActions(acts.value());
      ch.answer(u);
    }
  }
};

std::vector<unsigned> iota(unsigned n) {
  std::vector<unsigned> v(n);
  for (unsigned i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

TEST_CASE("offline: one PMD reads both inputs merged by timestamp; nothing lost when the records run out") {
  const unsigned n = 1200;  // more than the upcall records
  Rig r(n);
  r.dp.set_upcalls_enabled(true);
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  REQUIRE(r.dp.offline());
  CHECK(r.dp.pmds()[0]->rx_queues().size() == 3);
  CHECK(r.dp.pmds()[1]->rx_queues().empty());
  {
    Handler h(r.dp);
    // Nobody answers yet: the records fill up, then the inputs stop.
    REQUIRE(eventually([&] { return r.dp.pmds()[0]->counters().backpressure > 0; }));
    CHECK_FALSE(r.dp.wait_drained(50));
    CHECK(r.dp.pmds()[0]->counters().lost == 0);
    h.go = true;
    REQUIRE(r.dp.wait_drained(keel::test::kPatienceMs));
  }
  r.dp.set_upcalls_enabled(false);
  r.dp.stop();
  const datapath::PmdCounters c = r.dp.pmds()[0]->counters();
  CHECK(c.lost == 0);
  CHECK(c.backpressure >= 1);
  CHECK(c.rx_packets == n);
  CHECK(c.misses + c.ordered_upcalls + c.emc_hits + c.megaflow_hits + c.simple_hits == n);
  CHECK(r.output() == iota(n));  // every packet, in timestamp order across the files
  r.dp.drop_pending_upcalls();
  r.dp.flow_flush();
}

TEST_CASE("offline: hits from the caches keep the order of the merged inputs") {
  // The flows are there from the start: no upcall, every packet a cache hit,
  // still in timestamp order across the two input ports.
  const unsigned n = 300;
  Rig r(n);
  for (const char* in : {"1", "2"}) {
    auto m = flow::parse_dp_flow(std::string("recirc_id(0),in_port(") + in + "),eth_type(0x0800)");
    REQUIRE(m.ok());
    REQUIRE(r.dp.flow_put(m->match, flow::parse_dp_actions("3").value(), std::nullopt, false).ok());
  }
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  REQUIRE(r.dp.offline());
  REQUIRE(r.dp.wait_drained(keel::test::kPatienceMs));
  r.dp.stop();
  const datapath::PmdCounters c = r.dp.pmds()[0]->counters();
  CHECK(c.misses == 0);
  CHECK(c.emc_hits + c.megaflow_hits + c.simple_hits == n);
  CHECK(r.output() == iota(n));
  r.dp.flow_flush();
}

TEST_CASE("live mode: a live input, or no permission from the boot") {
  SUBCASE("a ring port") {
    Rig r(10);
    r.add("p3", "ring:size=64");
    REQUIRE(r.dp.start({r.backend.get()}).ok());
    CHECK_FALSE(r.dp.offline());
    CHECK(r.dp.pmds()[1]->rx_queues().size() == 2);  // round-robin as always
    r.dp.stop();
  }
  SUBCASE("an endless replay") {
    Rig r(10);
    r.add("p3", "pcap:in=" + r.dir.file("a.pcap") + ",loop=0");
    REQUIRE(r.dp.start({r.backend.get()}).ok());
    CHECK_FALSE(r.dp.offline());
    r.dp.stop();
  }
  SUBCASE("not allowed") {
    Rig r(10, false);
    REQUIRE(r.dp.start({r.backend.get()}).ok());
    CHECK_FALSE(r.dp.offline());
    r.dp.stop();
  }
}

TEST_CASE("offline: a recirculating answer's second-pass miss is answered before the records queued behind it") {
  // Every packet is a new flow. Even ones translate to recirc(5), and their
  // second pass (recirc_id 5) misses too and translates to output:3; odd
  // ones go straight to output:3. The misses of later packets are already
  // queued when an even packet's answer recirculates: its second-pass
  // record must still be translated and executed before theirs.
  const unsigned n = 600;
  Rig r(n);
  datapath::Rcu rcu;
  ofproto::Bridge bridge{"br0", &rcu};
  std::atomic<uint64_t> second_passes{0};
  ofproto::Udpif udpif(
      r.dp, rcu,
      [&](const flow::FlowKey& flow, bool, ofproto::Translation& t) {
        t.bridge = &bridge;
        t.rules_gen = bridge.rules_generation();
        t.wc.in_port = 0xffffffffu;
        t.wc.dl_type = 0xffff;
        t.wc.tp_src = 0xffff;
        flow::DpActionsBuilder b;
        const unsigned sport = flow::text::ntoh16(flow.tp_src);
        if (flow.recirc_id == 0 && sport % 2 == 0) {
          b.recirc(5);
        } else {
          if (flow.recirc_id == 5) ++second_passes;
          b.output(3);
        }
        t.actions = b.finish().value();
        return Status{};
      },
      nullptr,
      ofproto::UdpifKnobs{[] { return uint32_t{200000}; }, [] { return uint32_t{10000}; },
                          [] { return uint32_t{60000}; }});
  udpif.start();
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  REQUIRE(r.dp.offline());
  REQUIRE(r.dp.wait_drained(keel::test::kPatienceMs));
  udpif.stop();
  r.dp.stop();
  const datapath::PmdCounters c = r.dp.pmds()[0]->counters();
  CHECK(c.lost == 0);
  CHECK(c.recirculations == n / 2);
  CHECK(second_passes.load() == n / 2);
  CHECK(r.output() == iota(n));
  r.dp.drop_pending_upcalls();
  r.dp.flow_flush();
}

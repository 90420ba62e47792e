// bench_pipeline — pushes N packets through the real PMD pipeline over sim
// ring ports on one configured path, for instruction counting under
// valgrind's cachegrind (tests/bench/instructions.py). Not a timing
// benchmark: it prints what it did and the PMD's counters, so a run can be
// checked to have taken the path it claims.
//
// A Datapath with one unpinned PMD, ring ports p0 (in, port 1) and p1 (out,
// port 2), the path's megaflows installed with Datapath::flow_put (the
// `dp-flow add` of the console) and its tunables set, then N 64-byte UDP
// frames built up front and injected with one bulk push, so the PMD reads
// full bursts of 32 back to back and never idles while packets wait; the
// main thread sleeps (no instructions) until all N have come out of p1.
// Boot, flow installs and shutdown cost the same for every N, so
// (instructions(2N) - instructions(N)) / N is the cost of one packet on the
// path: rx from the ring, parse, lookup, actions, tx to the ring, and the
// PMD's per-iteration work divided over its bursts. Paths:
//
//   xconnect the port cross-connect p0 -> p1 (no parse, no lookup): the floor
//            of ring rx/tx and this driver's own per-packet work
//   simple   1 flow, in_port-only megaflow -> simple match
//   emc      1024 flows, ipv4 dst /16 megaflow, EMC insert 1/1 -> EMC hits
//            (each flow's first packet is an EMC insert: equal for N and 2N)
//   smc      same megaflow and flows, EMC off, SMC on -> SMC hits
//   dpcls1   same, EMC and SMC off -> dpcls, 1 subtable probed
//   dpcls16  the 16 megaflows (16 masks) of shared/bench's dpcls-16masks,
//            traffic round-robin over them, EMC and SMC off -> dpcls, 8.5
//            subtables probed per hit on average
//   lb_output  1024 flows (dst /16 as emc), one megaflow with
//            hash(l4(0)),lb_output(1), bond 1's 256 buckets all on p1
//            (EMC, SMC off): dpcls hit, the 5-tuple hash, the bucket
//   recirc_bond  the same traffic through Open vSwitch's recirculation
//            scheme (lb-output-action=false): hash(l4(0)),recirc(0x1),
//            then one of 256 megaflows recirc_id(1),dp_hash(B/0xff) -> p1:
//            two dpcls passes per packet
//   mark     dpcls1's megaflow and traffic, every packet carrying the NIC
//            MARK the flow was given (Datapath::set_flow_mark, partial
//            offload): the mark table instead of parse + lookup; output
//            only, so no parse at all (phwol_hits)
//   mark_lb  lb_output's megaflow and traffic, marked: the mark table, then
//            a parse for the executor (hash, lb_output), no lookup
//   upcall   every packet a new 5-tuple, megaflows off: miss -> upcall ->
//            handler -> stand-in translation (in_port -> output:2, as
//            bench_revalidate; cheaper than xlate) -> exact-match install ->
//            execute. Packets go in windows of 32 (the upcall records are
//            bounded) so this path includes some PMD idle polling while the
//            handler works; counts include the handler thread.
//
//   bench_pipeline PATH N [CAPACITY]
//
// CAPACITY (default N) sizes the packet pool and the rings: give both runs
// of a pair the same one, so that setting them up costs the same.
// The result line's pps= is N over the wall time from the inject to the
// last packet out: meaningful natively (a rough packets/s of the path on
// one PMD, ring rx/tx included), not under cachegrind.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "datapath/datapath.h"
#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "flow/of_match_syntax.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "ofproto/bridge.h"
#include "ofproto/udpif.h"

using namespace keel;
using namespace std::chrono_literals;

namespace {

// Ethernet/IPv4/UDP, 60 bytes: dst, sport, dport given.
void fill(hal::Packet* p, uint32_t dst, uint16_t sport, uint16_t dport) {
  uint8_t f[60] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0,
                   10, 0, 0, 1, static_cast<uint8_t>(dst >> 24), static_cast<uint8_t>(dst >> 16),
                   static_cast<uint8_t>(dst >> 8), static_cast<uint8_t>(dst), static_cast<uint8_t>(sport >> 8),
                   static_cast<uint8_t>(sport), static_cast<uint8_t>(dport >> 8), static_cast<uint8_t>(dport), 0, 26,
                   0, 0};
  std::memcpy(p->data(), f, sizeof f);
  (void)p->set_len(sizeof f);
}

int fail(const std::string& what) {
  fprintf(stderr, "bench_pipeline: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: bench_pipeline xconnect|simple|emc|smc|dpcls1|dpcls16|lb_output|recirc_bond|mark|mark_lb|upcall N [CAPACITY]\n");
    return 2;
  }
  const std::string path = argv[1];
  const uint32_t n = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10));
  const uint32_t capacity = argc == 4 ? static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10)) : n;
  const bool upcall = path == "upcall";
  if (n == 0 || capacity < n || !(path == "xconnect" || path == "simple" || path == "emc" || path == "smc" || path == "dpcls1" || path == "dpcls16" || path == "mark" || path == "mark_lb" ||
                  path == "lb_output" || path == "recirc_bond" || upcall)) {
    fprintf(stderr, "usage: bench_pipeline xconnect|simple|emc|smc|dpcls1|dpcls16|lb_output|recirc_bond|mark|mark_lb|upcall N [CAPACITY]\n");
    return 2;
  }

  auto be = hal::make_sim_backend({.buffers = capacity + 4096});
  if (!be.ok()) return fail("sim backend: " + be.status().message());
  std::unique_ptr<hal::Backend> backend = std::move(be.value());
  datapath::DatapathConfig cfg;
  cfg.pmd_cores = {-1};
  cfg.pmd_idle_sleep_us = 100;  // an idle PMD sleeps instead of spinning up instructions
  cfg.pmd.emc_insert_inv_prob = path == "emc" ? 1 : 0;
  cfg.pmd.smc_enable = path == "smc";
  datapath::Datapath dp(cfg);
  uint32_t ring_size = 64;  // a power of two holding all N packets
  while (ring_size < capacity + 64) ring_size *= 2;
  const std::string ring = "ring:size=" + std::to_string(ring_size);
  auto open = [&](const char* name) -> hal::sim::RingPort* {
    auto spec = hal::parse_port_spec(name, ring);
    if (!spec) return nullptr;
    auto port = backend->open_port(*spec, 1, 1);
    if (!port.ok()) {
      fprintf(stderr, "bench_pipeline: %s: %s\n", name, port.status().message().c_str());
      return nullptr;
    }
    auto* raw = dynamic_cast<hal::sim::RingPort*>(port->get());
    if (!dp.add_port(std::move(port.value())).ok()) return nullptr;
    return raw;
  };
  hal::sim::RingPort* in = open("p0");
  hal::sim::RingPort* out = open("p1");
  if (!in || !out) return fail("ring ports");

  // The slow path, for the upcall path only.
  datapath::Rcu rcu;
  ofproto::Bridge bridge{"br0", &rcu};
  std::unique_ptr<ofproto::Udpif> udpif;
  if (upcall) {
    auto f = flow::parse_of_flow("priority=1,in_port=1,actions=output:2");
    ofproto::FlowMod fm;
    fm.flow = *f;
    (void)bridge.flow_mod(fm);
    const ofproto::OfRule* rule = bridge.dump(nullptr).front();
    ofproto::Udpif::set_megaflows_enabled(dp, false);
    udpif = std::make_unique<ofproto::Udpif>(
        dp, rcu,
        [&bridge, rule](const flow::FlowKey&, bool, ofproto::Translation& t) {
          t.bridge = &bridge;
          t.rules_gen = bridge.rules_generation();
          t.wc.in_port = 0xffffffffu;
          t.wc.dl_type = 0xffff;
          flow::DpActionsBuilder b;
          b.output(2);
          t.actions = b.finish().value();
          t.rules = {rule};
          return Status{};
        },
        nullptr,
        ofproto::UdpifKnobs{[] { return uint32_t{1000000}; }, [] { return uint32_t{3600000}; },
                            [] { return uint32_t{60000}; }});  // no revalidation round during the run
  }
  // (No string compare per packet: the driver's work is part of the count.)
  const bool one_flow = path == "simple" || path == "xconnect", sixteen = path == "dpcls16";
  auto tuple = [&](uint32_t i, uint32_t& dst, uint16_t& sport, uint16_t& dport) {
    if (one_flow) {
      dst = 0x0a010001, sport = 1024, dport = 2000;
    } else if (sixteen) {
      const uint32_t g = i % 16, k = (i / 16) % 64;  // 1024 5-tuples, 64 per group
      dst = (10u << 24) | ((g + 1) << 16) | k, sport = 1024, dport = static_cast<uint16_t>(g >= 8 ? 1000 + g : 2000);
    } else if (upcall) {
      dst = 0x0a000000u | (i & 0xffffff), sport = static_cast<uint16_t>(1024 + (i >> 24)), dport = 2000;
    } else {
      dst = 0x0a010000u | (i % 1024), sport = 1024, dport = 2000;
    }
  };

  // Build every packet before the PMD starts: while this thread works the
  // PMD polls empty rings, and that must not grow with N. This thread's own
  // work per packet (alloc, fill, collect, release) is part of every path's
  // count; the xconnect path (no lookup at all) shows that floor plus ring
  // rx/tx.
  std::vector<hal::Packet*> pkts(capacity);
  for (uint32_t i = 0; i < n;) {
    unsigned k = backend->alloc_burst(std::span(pkts.data() + i, std::min<size_t>(32, n - i)));
    if (!k) return fail("out of packet buffers");
    for (unsigned j = 0; j < k; ++j) {
      uint32_t dst;
      uint16_t sport, dport;
      tuple(i + j, dst, sport, dport);
      fill(pkts[i + j], dst, sport, dport);
    }
    i += k;
  }

  if (auto st = dp.start({backend.get()}); !st.ok()) return fail("datapath start: " + st.message());
  if (udpif) udpif->start();

  // The path's megaflows.
  std::vector<std::string> flows;
  std::vector<std::string> flow_actions;  // per flow; empty: output:2
  const char* base = "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),";
  if (path == "xconnect") {
    dp.set_xconnect(1, 2);
  } else if (path == "simple") {
    flows.push_back(std::string(base) + "ipv4(frag=no)");
  } else if (path == "emc" || path == "smc" || path == "dpcls1" || path == "mark") {
    flows.push_back(std::string(base) + "ipv4(dst=10.1.0.0/255.255.0.0,frag=no)");
  } else if (path == "lb_output" || path == "recirc_bond" || path == "mark_lb") {
    flows.push_back(std::string(base) + "ipv4(frag=no)");
    if (path != "recirc_bond") {
      datapath::BondMembers t;
      t.fill(2);
      if (auto st = dp.bond_set(1, t); !st.ok()) return fail("bond_set: " + st.message());
      flow_actions.push_back("hash(l4(0)),lb_output(1)");
    } else {
      flow_actions.push_back("hash(l4(0)),recirc(0x1)");
      for (unsigned b = 0; b < datapath::kBondBuckets; ++b) {
        char t[200];
        snprintf(t, sizeof t,
                 "recirc_id(0x1),dp_hash(0x%x/0xff),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no)",
                 b);
        flows.push_back(t);
        flow_actions.push_back("2");
      }
    }
  } else if (path == "dpcls16") {
    // shared/bench/scenarios/dpcls-16masks/flows.txt as Open vSwitch 3.1
    // installs it: group g matches 10.(g+1).0.0/(16 + g%8), g >= 8 also udp dst 1000+g.
    for (unsigned g = 0; g < 16; ++g) {
      const uint32_t plen = 16 + g % 8, mask = 0xffffffffu << (32 - plen);
      char m[32], t[160];
      snprintf(m, sizeof m, "%u.%u.%u.%u", mask >> 24, (mask >> 16) & 255, (mask >> 8) & 255, mask & 255);
      snprintf(t, sizeof t, "ipv4(dst=10.%u.0.0/%s,proto=17,frag=no)%s", g + 1, m,
               g >= 8 ? (",udp(dst=" + std::to_string(1000 + g) + ")").c_str() : "");
      flows.push_back(std::string(base) + t);
    }
  }
  for (size_t f = 0; f < flows.size(); ++f) {
    const std::string& text = flows[f];
    auto m = flow::parse_dp_match(text);
    if (!m.ok()) return fail("flow '" + text + "': " + m.status().message());
    auto a = flow::parse_dp_actions(f < flow_actions.size() ? flow_actions[f] : "2");
    if (!a.ok()) return fail("actions: " + a.status().message());
    if (auto st = dp.flow_put(*m, a.value(), std::nullopt, false); !st.ok())
      return fail("flow_put '" + text + "': " + st.message());
  }

  if (path == "mark" || path == "mark_lb") {
    // Partial offload: the flow's mark in the PMD's table, on every packet.
    std::vector<datapath::OffloadEvent> live;
    dp.offload_scan(live);
    if (live.size() != 1) return fail("mark: expected one flow");
    if (auto st = dp.set_flow_mark(live[0].pmd, live[0].slot, live[0].ufid, 1); !st.ok())
      return fail("set_flow_mark: " + st.message());
    for (uint32_t i = 0; i < n; ++i) pkts[i]->set_flow_mark(1);
  }

  size_t back = 0;
  hal::Packet* got[32];
  auto drain = [&] {
    size_t m;
    while ((m = out->collect(got)) > 0) {
      for (size_t k = 0; k < m; ++k) hal::release(got[k]);
      back += m;
    }
  };
  const auto deadline = std::chrono::steady_clock::now() + 600s;
  const auto t0 = std::chrono::steady_clock::now();
  if (!upcall) {
    if (in->inject(std::span(pkts.data(), n)) != n) return fail("rx ring too small");
    while (back < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
      drain();
    }
  } else {
    for (uint32_t i = 0; i < n && std::chrono::steady_clock::now() < deadline;) {
      const uint32_t k = std::min<uint32_t>(32, n - i);
      if (in->inject(std::span(pkts.data() + i, k)) != k) return fail("rx ring too small");
      i += k;
      while (back < i && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(100us);
        drain();
      }
    }
  }

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  datapath::PmdCounters c = dp.pmds().front()->counters();
  printf("bench_pipeline path=%s packets=%u forwarded=%zu rx=%lu xconnect=%lu simple=%lu emc=%lu smc=%lu megaflow=%lu "
         "subtable_lookups_per_hit=%.2f misses=%lu lost=%lu upcalls=%lu installs=%lu dp_flows=%zu recirc=%lu "
         "bond_drops=%lu phwol=%lu pps=%.0f\n",
         path.c_str(), n, back, static_cast<unsigned long>(c.rx_packets), static_cast<unsigned long>(c.xconnect_hits),
         static_cast<unsigned long>(c.simple_hits),
         static_cast<unsigned long>(c.emc_hits), static_cast<unsigned long>(c.smc_hits),
         static_cast<unsigned long>(c.megaflow_hits),
         c.megaflow_hits ? static_cast<double>(c.subtable_lookups) / static_cast<double>(c.megaflow_hits) : 0.0,
         static_cast<unsigned long>(c.misses), static_cast<unsigned long>(c.lost),
         static_cast<unsigned long>(c.upcalls), static_cast<unsigned long>(c.upcall_installs), dp.flow_count(),
         static_cast<unsigned long>(c.recirculations), static_cast<unsigned long>(c.bond_drops),
         static_cast<unsigned long>(c.phwol_hits), secs > 0 ? static_cast<double>(n) / secs : 0.0);
  const bool ok = back == n;
  if (udpif) udpif->stop();
  dp.stop();
  dp.drop_pending_upcalls();
  // No flow_flush(): with the PMD stopped each removal clears the whole EMC
  // (Pmd::apply), a cost per installed flow that would land in the upcall
  // path's per-packet figure. The process exits here.
  drain();
  if (!ok) return fail("only " + std::to_string(back) + " of " + std::to_string(n) + " packets came out");
  return 0;
}

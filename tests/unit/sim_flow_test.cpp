// The sim NIC flow-engine model (hal/sim/sim_flow.h): exact vs masked
// lookup and priorities, actions applied to the bytes (checksums stay
// valid), exact counters, capacities and ENOSPC, every injected fault, a
// device reset forgetting rules, async completions in order, MARK in the
// packet metadata, transfer and jump rules, ports detaching, and PMD-side
// lookups racing rule changes.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "datapath/datapath.h"
#include "eventually.h"
#include "hal/sim/ring_port.h"
#include "hal/sim/sim_flow.h"
#include "sim_test_util.h"
#include "keel/hal/backend.h"
#include "keel/hal/cpu.h"
#include "keel/hal/flow.h"
#include "keel/hal/sim_nic.h"

using namespace keel;
using namespace keel::hal;

namespace {

struct Nic {
  std::unique_ptr<Backend> be;
  std::unique_ptr<Port> p1, p2;
  sim::SimNic* nic = nullptr;

  explicit Nic(uint32_t offload_flows = 1024, const char* spec1 = "ring:size=256") {
    auto b = make_sim_backend({.buffers = 2048, .jumbo_buffers = 0, .offload_flows = offload_flows});
    REQUIRE(b.ok());
    be = std::move(b).value();
    p1 = open(spec1, "p1", 1);
    p2 = open("ring:size=256", "p2", 2);
    nic = sim::sim_nic(*be);
    REQUIRE(nic != nullptr);
    nic->set_costs({});  // no busy-waits in unit tests
  }
  std::unique_ptr<Port> open(const char* spec, const char* name, uint16_t id) {
    auto s = parse_port_spec(name, spec);
    REQUIRE_MESSAGE(s.ok(), s.status().message());
    auto p = be->open_port(s.value(), 1, 1);
    REQUIRE_MESSAGE(p.ok(), p.status().message());
    p.value()->set_id(id);
    return std::move(p).value();
  }
  FlowEngine& e1() {
    REQUIRE(p1->flow_engine() != nullptr);
    return *p1->flow_engine();
  }
  sim::RingPort& r1() { return *dynamic_cast<sim::RingPort*>(p1.get()); }
  sim::RingPort& r2() { return *dynamic_cast<sim::RingPort*>(p2.get()); }
};

// --- frames ---

uint16_t sum16(const uint8_t* p, size_t n, uint32_t s = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) s += uint32_t{p[i]} << 8 | p[i + 1];
  if (n & 1) s += uint32_t{p[n - 1]} << 8;
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(s);
}

struct Udp4 {
  FlowMac dst{0x02, 0, 0, 0, 0, 0x02}, src{0x02, 0, 0, 0, 0, 0x01};
  uint32_t sip = 0x0a000001, dip = 0x0a000002;
  uint16_t sport = 1000, dport = 2000;
  uint8_t proto = 17, ttl = 64, tos = 0;
  bool vlan = false;
  uint16_t tci = 0;
};

std::vector<uint8_t> frame(const Udp4& f) {
  std::vector<uint8_t> b;
  b.insert(b.end(), f.dst.begin(), f.dst.end());
  b.insert(b.end(), f.src.begin(), f.src.end());
  if (f.vlan) b.insert(b.end(), {0x81, 0x00, static_cast<uint8_t>(f.tci >> 8), static_cast<uint8_t>(f.tci)});
  b.insert(b.end(), {0x08, 0x00});
  const size_t ip = b.size();
  const uint16_t l4len = f.proto == 6 ? 20 : 8;
  const uint16_t payload = 10;
  const uint16_t tot = static_cast<uint16_t>(20 + l4len + payload);
  b.insert(b.end(), {0x45, f.tos, static_cast<uint8_t>(tot >> 8), static_cast<uint8_t>(tot), 0, 1, 0, 0, f.ttl,
                     f.proto, 0, 0});
  for (uint32_t a : {f.sip, f.dip})
    b.insert(b.end(), {static_cast<uint8_t>(a >> 24), static_cast<uint8_t>(a >> 16), static_cast<uint8_t>(a >> 8),
                       static_cast<uint8_t>(a)});
  const uint16_t c = static_cast<uint16_t>(~sum16(&b[ip], 20));
  b[ip + 10] = static_cast<uint8_t>(c >> 8), b[ip + 11] = static_cast<uint8_t>(c);
  const size_t l4 = b.size();
  b.insert(b.end(), {static_cast<uint8_t>(f.sport >> 8), static_cast<uint8_t>(f.sport),
                     static_cast<uint8_t>(f.dport >> 8), static_cast<uint8_t>(f.dport)});
  if (f.proto == 6) {
    b.insert(b.end(), {0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0});
  } else {
    const uint16_t ul = static_cast<uint16_t>(8 + payload);
    b.insert(b.end(), {static_cast<uint8_t>(ul >> 8), static_cast<uint8_t>(ul), 0, 0});
  }
  for (int i = 0; i < payload; ++i) b.push_back(static_cast<uint8_t>(i));
  // L4 checksum over the pseudo header.
  const size_t csum_off = l4 + (f.proto == 6 ? 16 : 6);
  uint32_t ps = sum16(&b[ip + 12], 8) + f.proto + (b.size() - l4);
  uint16_t l4c = static_cast<uint16_t>(~sum16(&b[l4], b.size() - l4, ps));
  if (f.proto == 17 && l4c == 0) l4c = 0xffff;
  b[csum_off] = static_cast<uint8_t>(l4c >> 8), b[csum_off + 1] = static_cast<uint8_t>(l4c);
  return b;
}

// Whether the IPv4 header and L4 checksums of a frame verify.
bool checksums_ok(const uint8_t* d, size_t len) {
  size_t ip = 14;
  if (d[12] == 0x81) ip += 4;
  if (sum16(d + ip, 20) != 0xffff) return false;
  const uint8_t proto = d[ip + 9];
  const size_t l4 = ip + 20;
  uint32_t ps = sum16(d + ip + 12, 8) + proto + (len - l4);
  return sum16(d + l4, len - l4, ps) == 0xffff;
}

Packet* make_pkt(Backend& b, const std::vector<uint8_t>& bytes) {
  Packet* p = nullptr;
  REQUIRE(b.alloc_burst(std::span(&p, 1)) == 1);
  REQUIRE(p->set_len(static_cast<uint32_t>(bytes.size())));
  std::memcpy(p->data(), bytes.data(), bytes.size());
  return p;
}

// Injects the frames into p1, receives them through rx() (the model runs
// there) and returns what the PMD got; the caller releases them.
std::vector<Packet*> receive(Nic& n, const std::vector<std::vector<uint8_t>>& frames) {
  std::vector<Packet*> in;
  for (const auto& f : frames) in.push_back(make_pkt(*n.be, f));
  REQUIRE(n.r1().inject(in) == in.size());
  std::vector<Packet*> got;
  std::array<Packet*, kMaxBurst> burst;
  uint16_t k;
  size_t guard = 0;
  while (n.r1().rx_pending() && ++guard < 1000) {
    k = n.p1->rx(0, burst);
    got.insert(got.end(), burst.begin(), burst.begin() + k);
  }
  return got;
}

std::vector<std::vector<uint8_t>> collect(sim::RingPort& r) {
  std::vector<std::vector<uint8_t>> out;
  std::array<Packet*, kMaxBurst> burst;
  size_t k;
  while ((k = r.collect(burst)) > 0)
    for (size_t i = 0; i < k; ++i) {
      out.emplace_back(burst[i]->data(), burst[i]->data() + burst[i]->len());
      release(burst[i]);
    }
  return out;
}

FlowPattern exact_udp(const Udp4& f) {
  FlowEth eth{}, ethm = flow_eth_mask_all();
  eth.dst = f.dst, eth.src = f.src, eth.type = 0x0800;
  ethm.has_vlan = 1;  // untagged only
  FlowIpv4 ip{}, ipm{};
  ip.src = f.sip, ip.dst = f.dip, ip.proto = f.proto;
  ipm.src = ipm.dst = ~0u, ipm.proto = 0xff;
  FlowUdp u{f.sport, f.dport}, um{0xffff, 0xffff};
  FlowPattern p;
  p.eth(eth, ethm).ipv4(ip, ipm).udp(u, um);
  return p;
}

FlowPattern dst_prefix(uint32_t dst, uint32_t mask) {
  FlowIpv4 ip{}, ipm{};
  ip.dst = dst, ipm.dst = mask;
  FlowPattern p;
  p.eth({}, {}).ipv4(ip, ipm);
  return p;
}

FlowHandle must_create(FlowEngine& e, const FlowPattern& p, const FlowActions& a, FlowAttr attr = {}) {
  FlowError err;
  auto h = e.create(attr, p, a, &err);
  REQUIRE_MESSAGE(h.ok(), h.status().message());
  return h.value();
}

FlowQuery must_query(FlowEngine& e, FlowHandle h) {
  FlowQuery q;
  FlowError err;
  REQUIRE_MESSAGE(e.query(h, q, &err).ok(), err.message);
  return q;
}

void release_all(std::vector<Packet*>& v) {
  release_burst(v);
  v.clear();
}

}  // namespace

TEST_CASE("sim nic: no model without offload_flows, one per backend with it") {
  auto b = make_sim_backend({.buffers = 64, .jumbo_buffers = 0, .offload_flows = 0});
  REQUIRE(b.ok());
  CHECK(sim::sim_nic(*b.value()) == nullptr);
  auto s = parse_port_spec("p", "ring");
  auto p = b.value()->open_port(s.value(), 1, 1);
  REQUIRE(p.ok());
  CHECK(p.value()->flow_engine() == nullptr);
  CHECK(p.value()->hw_ingress() == nullptr);

  Nic n(1024);
  const FlowEngineInfo i = n.e1().info();
  CHECK(i.exact_capacity == 960);  // 15/16
  CHECK(i.masked_capacity == 64);  // 1/16
  CHECK(i.async_api);
  CHECK(i.reset_generation == 0);
  CHECK(n.p2->flow_engine() != n.p1->flow_engine());  // a view per port
}

TEST_CASE("sim nic: an exact rule forwards in hardware with exact counters; misses reach the PMD") {
  Nic n;
  n.nic->set_keep_order(false);
  Udp4 f;
  const FlowHandle h = must_create(n.e1(), exact_udp(f), FlowActions().port(2).count_hits());
  Udp4 other = f;
  other.dport = 2001;
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 40; ++i) frames.push_back(frame(i % 4 == 3 ? other : f));
  auto got = receive(n, frames);
  CHECK(got.size() == 10);  // the misses, to the PMD
  for (Packet* p : got) CHECK_FALSE(p->has_flow_mark());
  release_all(got);
  const auto out = collect(n.r2());
  REQUIRE(out.size() == 30);
  CHECK(out[0] == frame(f));  // no action changed the bytes
  const FlowQuery q = must_query(n.e1(), h);
  CHECK(q.ok);
  CHECK(q.hits == 30);
  CHECK(q.bytes == 30 * frame(f).size());
  CHECK(q.last_hit_ns != 0);
  CHECK(q.last_hit_ns <= now_ns());
  const PortCounters c = n.p1->counters();
  CHECK(c.rx_packets == 40);
  CHECK(c.rx_hw_forwarded == 30);
  CHECK(c.rx_hw_dropped == 0);
  CHECK(n.nic->stats().hw_forwarded == 30);
  CHECK(n.nic->stats().exact_rules == 1);
}

TEST_CASE("sim nic: keep-order leaves the rest of a burst to the PMD after its first miss") {
  Nic n;
  n.nic->set_keep_order(true);
  Udp4 f, other = f;
  other.dport = 9;
  const FlowHandle h = must_create(n.e1(), exact_udp(f), FlowActions().port(2).count_hits());
  // hit, miss, hit: the last one must not overtake the miss.
  auto got = receive(n, {frame(f), frame(other), frame(f)});
  CHECK(got.size() == 2);
  release_all(got);
  CHECK(collect(n.r2()).size() == 1);
  CHECK(must_query(n.e1(), h).hits == 1);  // only what the hardware handled is counted
}

TEST_CASE("sim nic: exact beats masked, masked rules go by priority, then creation") {
  Nic n;
  n.nic->set_keep_order(false);
  Udp4 f;
  FlowAttr hi, lo;
  hi.priority = 0, lo.priority = 5;
  const FlowHandle m_lo = must_create(n.e1(), dst_prefix(0x0a000000, 0xffffff00), FlowActions().drop().count_hits(), lo);
  const FlowHandle m_hi = must_create(n.e1(), dst_prefix(0x0a000000, 0xffff0000), FlowActions().port(2).count_hits(), hi);
  CHECK(n.nic->stats().masked_rules == 2);
  auto got = receive(n, {frame(f)});
  CHECK(got.empty());
  CHECK(must_query(n.e1(), m_hi).hits == 1);  // priority 0 wins though /16 is wider
  CHECK(must_query(n.e1(), m_lo).hits == 0);
  CHECK(collect(n.r2()).size() == 1);

  const FlowHandle ex = must_create(n.e1(), exact_udp(f), FlowActions().drop().count_hits(), lo);
  got = receive(n, {frame(f), frame(f)});
  CHECK(got.empty());
  CHECK(must_query(n.e1(), ex).hits == 2);  // the exact table is looked up first
  CHECK(must_query(n.e1(), m_hi).hits == 1);
  CHECK(n.p1->counters().rx_hw_dropped == 2);
  CHECK(n.nic->stats().hw_dropped == 2);

  // A layer the pattern names must be there: a TCP packet misses a udp rule.
  Udp4 t = f;
  t.proto = 6;
  REQUIRE(n.e1().destroy(m_hi, nullptr).ok());
  REQUIRE(n.e1().destroy(m_lo, nullptr).ok());
  got = receive(n, {frame(t)});
  CHECK(got.size() == 1);
  release_all(got);
}

TEST_CASE("sim nic: rewrite actions change the bytes and keep the checksums valid") {
  Nic n;
  Udp4 f;
  FlowActions a;
  a.set_mac_dst({0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee})
      .set_ipv4_src(0xc0a80101)
      .set_ipv4_ttl(7)
      .set_ipv4_dscp(10)
      .set_tp_dst(53)
      .port(2)
      .count_hits();
  must_create(n.e1(), exact_udp(f), a);
  auto got = receive(n, {frame(f)});
  CHECK(got.empty());
  auto out = collect(n.r2());
  REQUIRE(out.size() == 1);
  Udp4 want = f;
  want.dst = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
  want.sip = 0xc0a80101;
  want.ttl = 7;
  want.tos = 10 << 2;
  want.dport = 53;
  CHECK(out[0] == frame(want));  // the same bytes as a frame built with those fields
  CHECK(checksums_ok(out[0].data(), out[0].size()));

  SUBCASE("tcp ports and address") {
    Udp4 t = f;
    t.proto = 6;
    FlowPattern p;
    FlowIpv4 ip{}, ipm{};
    ip.proto = 6, ipm.proto = 0xff;
    FlowTcp tcp{}, tcpm{};
    tcp.dst = t.dport, tcpm.dst = 0xffff;
    p.eth({}, {}).ipv4(ip, ipm).tcp(tcp, tcpm);
    must_create(n.e1(), p, FlowActions().set_ipv4_dst(0x01020304).set_tp_src(4242).port(2));
    got = receive(n, {frame(t)});
    CHECK(got.empty());
    out = collect(n.r2());
    REQUIRE(out.size() == 1);
    Udp4 w = t;
    w.dip = 0x01020304, w.sport = 4242;
    CHECK(out[0] == frame(w));
    CHECK(checksums_ok(out[0].data(), out[0].size()));
  }
  SUBCASE("push, set and pop a VLAN tag") {
    Udp4 g = f;
    g.dport = 77;
    must_create(n.e1(), exact_udp(g), FlowActions().push_vlan(0x8100).set_vlan_vid(100).set_vlan_pcp(5).port(2));
    got = receive(n, {frame(g)});
    CHECK(got.empty());
    out = collect(n.r2());
    REQUIRE(out.size() == 1);
    Udp4 w = g;
    w.vlan = true, w.tci = 5 << 13 | 100;
    CHECK(out[0] == frame(w));

    FlowEth eth{};
    FlowVlan vl{}, vlm{};
    vl.tci = 100, vlm.tci = 0x0fff;
    FlowPattern p;
    p.eth(eth, {}).vlan(vl, vlm);
    must_create(n.e1(), p, FlowActions().pop_vlan().port(2));
    got = receive(n, {frame(w)});
    CHECK(got.empty());
    out = collect(n.r2());
    REQUIRE(out.size() == 1);
    CHECK(out[0] == frame(g));
  }
}

TEST_CASE("sim nic: MARK rules leave the packet to the PMD with the mark in its metadata") {
  Nic n;
  Udp4 f;
  const FlowHandle h = must_create(n.e1(), exact_udp(f), FlowActions().mark(42).queue(0).count_hits());
  Udp4 other = f;
  other.sport = 1;
  auto got = receive(n, {frame(f), frame(other)});
  REQUIRE(got.size() == 2);
  CHECK(got[0]->has_flow_mark());
  CHECK(got[0]->meta().flow_mark == 42);
  CHECK_FALSE(got[1]->has_flow_mark());
  release_all(got);
  CHECK(must_query(n.e1(), h).hits == 1);
  CHECK(n.nic->stats().hw_marked == 1);
  CHECK(n.p1->counters().rx_hw_forwarded == 0);

  FlowError err;
  auto bad = n.e1().create({}, exact_udp(other), FlowActions().mark(1).queue(3), &err);
  CHECK_FALSE(bad.ok());
  CHECK(err.errnum == EINVAL);
  CHECK(err.where == FlowErrorWhere::action);
  CHECK(err.index == 1);  // no rx queue 3 on a one-queue port
}

TEST_CASE("sim nic: refused patterns and actions name the item or action") {
  Nic n;
  FlowError err;
  FlowPattern p;
  p.ipv4({}, {}).eth({}, {});  // eth after ipv4
  auto r = n.e1().create({}, p, FlowActions().drop(), &err);
  CHECK_FALSE(r.ok());
  CHECK(err.errnum == EINVAL);
  CHECK(err.where == FlowErrorWhere::item);
  CHECK(err.index == 1);
  CHECK(err.message.find("out of order") != std::string::npos);

  err.clear();
  r = n.e1().create({}, exact_udp({}), FlowActions().count_hits(), &err);  // no fate
  CHECK(err.errnum == EINVAL);
  CHECK(err.where == FlowErrorWhere::action);

  err.clear();
  r = n.e1().create({}, exact_udp({}), FlowActions().port(2).port(1), &err);
  CHECK(err.errnum == ENOTSUP);
  CHECK(err.index == 1);  // mirroring

  err.clear();
  r = n.e1().create({}, exact_udp({}), FlowActions().port(77), &err);
  CHECK(err.errnum == ENODEV);
  CHECK(err.index == 0);

  err.clear();
  r = n.e1().create({}, dst_prefix(1, ~0u), FlowActions().set_tp_src(1).drop(), &err);  // no L4 in the pattern
  CHECK(err.errnum == EINVAL);
  CHECK(err.index == 0);

  err.clear();
  CHECK(n.e1().validate({}, p, FlowActions().drop(), &err).code() != Errc::ok);
  CHECK(n.nic->stats().exact_rules + n.nic->stats().masked_rules == 0);  // nothing half-made
}

TEST_CASE("sim nic: capacities, ENOSPC and EEXIST") {
  Nic n(32);  // 30 exact + 2 masked
  CHECK(n.e1().info().exact_capacity == 30);
  CHECK(n.e1().info().masked_capacity == 2);
  std::vector<FlowHandle> hs;
  for (uint16_t i = 0; i < 30; ++i) {
    Udp4 f;
    f.sport = i;
    hs.push_back(must_create(n.e1(), exact_udp(f), FlowActions().drop()));
  }
  Udp4 f;
  f.sport = 30;
  FlowError err;
  auto r = n.e1().create({}, exact_udp(f), FlowActions().drop(), &err);
  CHECK_FALSE(r.ok());
  CHECK(err.errnum == ENOSPC);
  CHECK(err.message.find("exact-match table full") != std::string::npos);
  CHECK(r.status().code() == Errc::resource_exhausted);
  must_create(n.e1(), dst_prefix(1, 0xffffff00), FlowActions().drop());
  must_create(n.e1(), dst_prefix(2, 0xffffff00), FlowActions().drop());
  err.clear();
  CHECK_FALSE(n.e1().create({}, dst_prefix(3, 0xffffff00), FlowActions().drop(), &err).ok());
  CHECK(err.errnum == ENOSPC);
  // A freed slot takes a new rule; the same rule twice is EEXIST.
  REQUIRE(n.e1().destroy(hs[0], nullptr).ok());
  must_create(n.e1(), exact_udp(f), FlowActions().drop());
  REQUIRE(n.e1().destroy(hs[1], nullptr).ok());
  err.clear();
  Udp4 dup;
  dup.sport = 2;
  CHECK_FALSE(n.e1().create({}, exact_udp(dup), FlowActions().drop(), &err).ok());
  CHECK(err.errnum == EEXIST);
  // A destroyed handle is refused.
  err.clear();
  CHECK_FALSE(n.e1().destroy(hs[0], &err).ok());
  CHECK(err.errnum == ENOENT);
  CHECK(n.nic->stats().exact_rules == 29);

  // set_capacity: shrink below the occupancy (rules stay, new ones wait), grow back.
  REQUIRE(n.nic->set_capacity(10, 2).ok());
  CHECK(n.e1().info().exact_capacity == 10);
  Udp4 fresh;
  fresh.sport = 1;  // destroyed above
  err.clear();
  CHECK_FALSE(n.e1().create({}, exact_udp(fresh), FlowActions().drop(), &err).ok());
  CHECK(err.errnum == ENOSPC);
  CHECK_FALSE(n.nic->set_capacity(33, 2).ok());  // above the board's offload_flows
  REQUIRE(n.nic->set_capacity(30, 2).ok());
  must_create(n.e1(), exact_udp(fresh), FlowActions().drop());
}

TEST_CASE("sim nic: injected faults fail exactly the calls asked, then stop") {
  Nic n;
  Udp4 f;
  SUBCASE("creates") {
    n.nic->fail_next_creates(2, EIO);
    FlowError err;
    CHECK_FALSE(n.e1().create({}, exact_udp(f), FlowActions().drop(), &err).ok());
    CHECK(err.errnum == EIO);
    err.clear();
    CHECK_FALSE(n.e1().create({}, exact_udp(f), FlowActions().drop(), &err).ok());
    CHECK(err.errnum == EIO);
    must_create(n.e1(), exact_udp(f), FlowActions().drop());
    CHECK(n.nic->stats().injected_failures == 2);
    CHECK(n.nic->stats().exact_rules == 1);
  }
  SUBCASE("table full") {
    n.nic->set_table_full(true);
    FlowError err;
    CHECK_FALSE(n.e1().create({}, exact_udp(f), FlowActions().drop(), &err).ok());
    CHECK(err.errnum == ENOSPC);
    CHECK(n.nic->describe().find("table-full: on") != std::string::npos);
    n.nic->clear_faults();
    must_create(n.e1(), exact_udp(f), FlowActions().drop());
  }
  SUBCASE("destroys and queries") {
    const FlowHandle h = must_create(n.e1(), exact_udp(f), FlowActions().drop().count_hits());
    n.nic->fail_next_queries(1, EBUSY);
    FlowQuery q;
    FlowError err;
    CHECK_FALSE(n.e1().query(h, q, &err).ok());
    CHECK_FALSE(q.ok);
    CHECK(q.errnum == EBUSY);
    CHECK(must_query(n.e1(), h).ok);
    n.nic->fail_next_queries(1, EIO);
    std::array<FlowHandle, 2> hs{h, h};
    std::array<FlowQuery, 2> qs;
    CHECK(n.e1().query_bulk(hs, qs) == 1);
    CHECK_FALSE(qs[0].ok);
    CHECK(qs[1].ok);
    n.nic->fail_next_destroys(1, EBUSY);
    err.clear();
    CHECK_FALSE(n.e1().destroy(h, &err).ok());
    CHECK(err.errnum == EBUSY);
    CHECK(n.nic->stats().exact_rules == 1);  // still there
    REQUIRE(n.e1().destroy(h, nullptr).ok());
    CHECK(n.nic->stats().exact_rules == 0);
  }
  SUBCASE("a query of a rule without count") {
    const FlowHandle h = must_create(n.e1(), exact_udp(f), FlowActions().drop());
    FlowQuery q;
    CHECK_FALSE(n.e1().query(h, q, nullptr).ok());
    CHECK(q.errnum == ENOTSUP);
  }
}

TEST_CASE("sim nic: destroy_counted returns what the rule counted up to its removal") {
  Nic n;
  Udp4 f;
  const FlowHandle h = must_create(n.e1(), exact_udp(f), FlowActions().port(2).count_hits());
  auto got = receive(n, {frame(f), frame(f), frame(f)});
  CHECK(got.empty());
  CHECK(must_query(n.e1(), h).hits == 3);
  got = receive(n, {frame(f), frame(f)});  // after the last query
  CHECK(got.empty());
  FlowQuery fin;
  REQUIRE(n.e1().destroy_counted(h, fin, nullptr).ok());
  CHECK(fin.ok);
  CHECK(fin.hits == 5);
  CHECK(fin.bytes == 5 * frame(f).size());
  CHECK(n.nic->stats().exact_rules == 0);
  // Gone: a second one fails and reads nothing.
  FlowError err;
  CHECK_FALSE(n.e1().destroy_counted(h, fin, &err).ok());
  CHECK_FALSE(fin.ok);
  // Without a count action: destroyed, nothing read.
  const FlowHandle h2 = must_create(n.e1(), exact_udp(f), FlowActions().drop());
  REQUIRE(n.e1().destroy_counted(h2, fin, nullptr).ok());
  CHECK_FALSE(fin.ok);
}

TEST_CASE("sim nic: a device reset forgets every rule and refuses old handles") {
  Nic n;
  Udp4 f;
  const FlowHandle h = must_create(n.e1(), exact_udp(f), FlowActions().port(2).count_hits());
  auto got = receive(n, {frame(f)});
  CHECK(got.empty());
  n.nic->reset();
  CHECK(n.e1().info().reset_generation == 1);
  CHECK(n.nic->stats().exact_rules == 0);
  got = receive(n, {frame(f)});
  CHECK(got.size() == 1);  // back to the PMD
  release_all(got);
  FlowError err;
  CHECK_FALSE(n.e1().destroy(h, &err).ok());
  CHECK(err.errnum == ENODEV);
  FlowQuery q;
  CHECK_FALSE(n.e1().query(h, q, nullptr).ok());
  CHECK(q.errnum == ENODEV);
  // No new rule until the reset is acknowledged (what the port counted in
  // hardware stays final meanwhile); then the same rule goes in again with
  // a new handle.
  FlowError refused;
  CHECK_FALSE(n.e1().create({}, exact_udp(f), FlowActions().port(2).count_hits(), &refused).ok());
  CHECK(refused.errnum == ENODEV);
  n.e1().reset_acknowledged();
  const FlowHandle h2 = must_create(n.e1(), exact_udp(f), FlowActions().port(2).count_hits());
  CHECK(h2 != h);
  got = receive(n, {frame(f)});
  CHECK(got.empty());
  CHECK(must_query(n.e1(), h2).hits == 1);
  collect(n.r2());
}

TEST_CASE("sim nic: async creates complete at push, in order, through template tables") {
  Nic n;
  FlowEngine& e = n.e1();
  REQUIRE(e.configure(2, 64, nullptr).ok());
  auto pt = e.pattern_template({}, exact_udp({}), nullptr);
  REQUIRE(pt.ok());
  auto at = e.actions_template({}, FlowActions().port(2).count_hits(), FlowActions().port(0).count_hits(), nullptr);
  REQUIRE(at.ok());
  FlowAttr attr;
  const std::array pts{pt.value()};
  const std::array ats{at.value()};
  auto tbl = e.template_table(attr, 3, pts, ats, nullptr);
  REQUIRE(tbl.ok());

  std::array<FlowHandle, 4> hs{};
  for (uint16_t i = 0; i < 4; ++i) {
    Udp4 f;
    f.sport = i;
    FlowError err;
    REQUIRE_MESSAGE(e.async_create(1, tbl.value(), exact_udp(f), 0, FlowActions().port(2).count_hits(), 0, true,
                                   100 + i, &hs[i], &err)
                        .ok(),
                    err.message);
    CHECK(hs[i] != kNoFlow);
  }
  std::array<FlowOpResult, 8> res;
  CHECK(e.pull(1, res, nullptr) == 0);  // postponed: nothing done yet
  CHECK(n.nic->stats().async_pending == 4);
  Udp4 first;
  first.sport = 0;
  auto got = receive(n, {frame(first)});
  CHECK(got.size() == 1);  // not in hardware yet
  release_all(got);
  REQUIRE(e.push(1, nullptr).ok());
  REQUIRE(e.pull(1, res, nullptr) == 4);
  for (unsigned i = 0; i < 3; ++i) {
    CHECK(res[i].user_data == 100 + i);
    CHECK(res[i].ok);
    CHECK(res[i].handle == hs[i]);
  }
  CHECK_FALSE(res[3].ok);  // the table holds 3
  CHECK(res[3].errnum == ENOSPC);
  got = receive(n, {frame(first)});
  CHECK(got.empty());
  CHECK(must_query(e, hs[0]).hits == 1);
  collect(n.r2());

  // A destroy, not postponed: pushed at once.
  REQUIRE(e.async_destroy(0, hs[0], false, 7, nullptr).ok());
  REQUIRE(e.pull(0, res, nullptr) == 1);
  CHECK(res[0].ok);
  CHECK(res[0].user_data == 7);
  CHECK(n.nic->stats().exact_rules == 2);

  // A pattern that differs from the template is refused at once.
  FlowError err;
  FlowPattern wrong;
  wrong.eth({}, {});
  FlowHandle h = kNoFlow;
  CHECK_FALSE(e.async_create(0, tbl.value(), wrong, 0, FlowActions().port(2).count_hits(), 0, true, 1, &h, &err).ok());
  CHECK(err.where == FlowErrorWhere::item);

  // A reset completes what was queued with ENODEV.
  Udp4 g;
  g.sport = 99;
  REQUIRE(e.async_create(0, tbl.value(), exact_udp(g), 0, FlowActions().port(2).count_hits(), 0, true, 5, &h, nullptr)
              .ok());
  n.nic->reset();
  REQUIRE(e.pull(0, res, nullptr) == 1);
  CHECK_FALSE(res[0].ok);
  CHECK(res[0].errnum == ENODEV);
  CHECK_FALSE(e.async_create(0, tbl.value(), exact_udp(g), 0, FlowActions().port(2).count_hits(), 0, true, 6, &h, &err)
                  .ok());
  CHECK(err.errnum == ENODEV);
  e.reset_acknowledged();

  // With the async API off, the calls say so and the sync API remains.
  n.nic->set_async_api(false);
  CHECK_FALSE(e.info().async_api);
  CHECK_FALSE(e.push(0, nullptr).ok());
  must_create(e, exact_udp(g), FlowActions().drop());
}

TEST_CASE("sim nic: the async queue refuses more than its size until pulled") {
  Nic n;
  FlowEngine& e = n.e1();
  REQUIRE(e.configure(1, 2, nullptr).ok());
  auto pt = e.pattern_template({}, exact_udp({}), nullptr);
  auto at = e.actions_template({}, FlowActions().drop(), FlowActions().drop(), nullptr);
  const std::array pts{pt.value()};
  const std::array ats{at.value()};
  auto tbl = e.template_table({}, 100, pts, ats, nullptr);
  REQUIRE(tbl.ok());
  FlowHandle h;
  for (uint16_t i = 0; i < 2; ++i) {
    Udp4 f;
    f.sport = i;
    REQUIRE(e.async_create(0, tbl.value(), exact_udp(f), 0, FlowActions().drop(), 0, false, i, &h, nullptr).ok());
  }
  FlowError err;
  Udp4 f;
  f.sport = 5;
  CHECK_FALSE(e.async_create(0, tbl.value(), exact_udp(f), 0, FlowActions().drop(), 0, false, 5, &h, &err).ok());
  CHECK(err.errnum == EAGAIN);
  std::array<FlowOpResult, 4> res;
  CHECK(e.pull(0, res, nullptr) == 2);
  CHECK(e.async_create(0, tbl.value(), exact_udp(f), 0, FlowActions().drop(), 0, false, 5, &h, nullptr).ok());
}

TEST_CASE("sim nic: transfer rules match the port they name; jumps continue in another group") {
  Nic n;
  n.nic->set_keep_order(false);
  auto p3 = n.open("ring:size=64", "p3", 3);
  auto& r3 = *dynamic_cast<sim::RingPort*>(p3.get());
  FlowAttr tr;
  tr.transfer = true;
  FlowPattern p;
  p.represented_port(3).eth({}, {});
  const FlowHandle h = must_create(n.e1(), p, FlowActions().port(2).count_hits(), tr);
  // From p1: no match (the rule names p3).
  auto got = receive(n, {frame({})});
  CHECK(got.size() == 1);
  release_all(got);
  // From p3: forwarded to p2.
  Packet* pk = make_pkt(*n.be, frame({}));
  REQUIRE(r3.inject(std::span(&pk, 1)) == 1);
  std::array<Packet*, kMaxBurst> burst;
  CHECK(p3->rx(0, burst) == 0);
  CHECK(collect(n.r2()).size() == 1);
  CHECK(must_query(n.e1(), h).hits == 1);

  // Jump: group 0 sends everything to group 1, where a rule forwards.
  FlowAttr g1;
  g1.group = 1;
  const FlowHandle j = must_create(n.e1(), dst_prefix(0, 0), FlowActions().jump(1).count_hits());
  const FlowHandle fw = must_create(n.e1(), exact_udp({}), FlowActions().port(2).count_hits(), g1);
  got = receive(n, {frame({})});
  CHECK(got.empty());
  CHECK(must_query(n.e1(), j).hits == 1);
  CHECK(must_query(n.e1(), fw).hits == 1);
  CHECK(collect(n.r2()).size() == 1);
  FlowError err;
  CHECK_FALSE(n.e1().create(g1, dst_prefix(0, 0), FlowActions().jump(1), &err).ok());  // to itself
}

TEST_CASE("sim nic: a port that goes takes its rules and the rules sending to it") {
  Nic n;
  must_create(n.e1(), exact_udp({}), FlowActions().port(2));
  must_create(n.p2->flow_engine() ? *n.p2->flow_engine() : n.e1(), dst_prefix(1, ~0u), FlowActions().drop());
  CHECK(n.nic->stats().exact_rules + n.nic->stats().masked_rules == 2);
  n.p2.reset();
  CHECK(n.nic->stats().exact_rules + n.nic->stats().masked_rules == 0);
  FlowError err;
  CHECK_FALSE(n.e1().create({}, exact_udp({}), FlowActions().port(2), &err).ok());
  CHECK(err.errnum == ENODEV);
}

TEST_CASE("sim nic: a pcap egress port records what the hardware forwards") {
  // (p1 is a ring; the rule sends to a pcap out= port.)
  Nic n;
  char tmpl[] = "/tmp/keel-simflow-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string out = std::string(tmpl) + "/o.pcap";
  auto pc = n.open(("pcap:out=" + out).c_str(), "pc", 9);
  must_create(n.e1(), exact_udp({}), FlowActions().port(9).count_hits());
  auto got = receive(n, {frame({}), frame({})});
  CHECK(got.empty());
  pc->stop();
  std::FILE* fp = std::fopen(out.c_str(), "rb");
  REQUIRE(fp != nullptr);
  std::fseek(fp, 0, SEEK_END);
  const long size = std::ftell(fp);
  std::fclose(fp);
  CHECK(size == static_cast<long>(24 + 2 * (16 + frame({}).size())));
  std::remove(out.c_str());
  std::remove(tmpl);
}

TEST_CASE("sim nic: PMD lookups race rule inserts and removes without losing a packet") {
  Nic n;
  n.nic->set_keep_order(false);
  std::atomic<bool> stop{false};
  // The "PMD": receives and releases, counting what it saw.
  uint64_t pmd_seen = 0;
  std::thread pmd([&] {
    std::array<Packet*, kMaxBurst> burst;
    while (!stop.load(std::memory_order_relaxed) || n.r1().rx_pending()) {
      const uint16_t k = n.p1->rx(0, burst);
      pmd_seen += k;
      release_burst(std::span(burst.data(), k));
    }
  });
  constexpr int kRounds = 300;
  uint64_t sent = 0;
  for (int i = 0; i < kRounds; ++i) {
    Udp4 f;
    f.sport = static_cast<uint16_t>(i % 8);
    const FlowHandle h = must_create(n.e1(), exact_udp(f), FlowActions().drop().count_hits());
    std::array<Packet*, 4> ps;
    for (Packet*& p : ps) p = make_pkt(*n.be, frame(f));
    // inject() takes a prefix when the ring is nearly full: retry the rest.
    for (size_t done = 0; done < ps.size();) {
      done += n.r1().inject(std::span(ps).subspan(done));
      if (done < ps.size()) cpu_relax();
    }
    sent += ps.size();
    if (i % 2) REQUIRE(n.e1().destroy(h, nullptr).ok());
    else n.nic->reset(), n.e1().reset_acknowledged();
  }
  stop.store(true);
  pmd.join();
  const PortCounters c = n.p1->counters();
  CHECK(c.rx_packets == sent);
  CHECK(pmd_seen + c.rx_hw_dropped == sent);  // each packet either dropped in hardware or seen by the PMD
}

TEST_CASE("sim nic: with a PMD running, offloaded packets bypass it while it sends to the same port") {
  // p0 -> p1 by a cross-connect (the PMD's path); the flows with sport < 8
  // also have an exact rule p0 -> p1 in the model. Both write the same
  // egress ring at once; every packet arrives once and each path counts
  // exactly its own.
  auto be = make_sim_backend({.buffers = 8192, .offload_flows = 1024});
  REQUIRE(be.ok());
  auto backend = std::move(be).value();
  datapath::Datapath dp{{.pmd_cores = {-1}}};
  uint16_t in_id = 0, out_id = 0;
  sim::RingPort* in = test::add_sim_port(*backend, dp, "p0", "ring:size=4096", 1, &in_id);
  sim::RingPort* out = test::add_sim_port(*backend, dp, "p1", "ring:size=8192", 1, &out_id);
  dp.set_xconnect(in_id, out_id);
  sim::SimNic* nic = sim::sim_nic(*backend);
  REQUIRE(nic != nullptr);
  nic->set_costs({});
  nic->set_keep_order(false);  // counts independent of how rx cuts the bursts
  FlowEngine* e = in->flow_engine();
  REQUIRE(e != nullptr);
  std::vector<FlowHandle> hs;
  for (uint16_t sp = 0; sp < 8; ++sp) {
    Udp4 f;
    f.sport = sp;
    hs.push_back(must_create(*e, exact_udp(f), FlowActions().port(out_id).count_hits()));
  }
  REQUIRE(dp.start({backend.get()}).ok());
  constexpr unsigned kPackets = 3000;
  unsigned hw = 0;
  for (unsigned i = 0; i < kPackets; ++i) {
    Udp4 f;
    f.sport = static_cast<uint16_t>(i % 16);
    hw += f.sport < 8;
    Packet* p = make_pkt(*backend, frame(f));
    while (in->inject(std::span(&p, 1)) != 1) cpu_relax();
  }
  REQUIRE(test::eventually([&] { return out->tx_pending() == kPackets; }));
  uint64_t hits = 0;
  for (FlowHandle h : hs) hits += must_query(*e, h).hits;
  CHECK(hits == hw);
  const PortCounters c = in->counters();
  CHECK(c.rx_packets == kPackets);
  CHECK(c.rx_hw_forwarded == hw);
  CHECK(test::eventually([&] { return dp.pmds()[0]->counters().xconnect_hits == kPackets - hw; }));
  CHECK(dp.pmds()[0]->counters().rx_packets == kPackets - hw);  // the PMD never saw the others
  dp.stop();
  std::array<Packet*, kMaxBurst> burst;
  size_t k, got = 0;
  while ((k = out->collect(burst)) > 0) {
    got += k;
    release_burst(std::span(burst.data(), k));
  }
  CHECK(got == kPackets);
}

namespace {
// An IPv6/UDP frame with a valid checksum.
std::vector<uint8_t> frame6(const FlowIpv6Addr& src, const FlowIpv6Addr& dst, uint8_t hop, uint16_t sport) {
  std::vector<uint8_t> b = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd};
  const uint16_t ulen = 8 + 6;
  b.insert(b.end(), {0x60, 0, 0, 0, 0, static_cast<uint8_t>(ulen), 17, hop});
  b.insert(b.end(), src.begin(), src.end());
  b.insert(b.end(), dst.begin(), dst.end());
  const size_t l4 = b.size();
  b.insert(b.end(), {static_cast<uint8_t>(sport >> 8), static_cast<uint8_t>(sport), 0, 53, 0, ulen, 0, 0});
  for (int i = 0; i < 6; ++i) b.push_back(static_cast<uint8_t>(0xa0 + i));
  uint32_t ps = sum16(&b[22], 32) + 17 + ulen;
  uint16_t c = static_cast<uint16_t>(~sum16(&b[l4], ulen, ps));
  if (c == 0) c = 0xffff;
  b[l4 + 6] = static_cast<uint8_t>(c >> 8), b[l4 + 7] = static_cast<uint8_t>(c);
  return b;
}
}  // namespace

TEST_CASE("sim nic: IPv6 rules match the addresses; rewrites keep the UDP checksum valid") {
  Nic n;
  const FlowIpv6Addr a{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const FlowIpv6Addr b{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  const FlowIpv6Addr c{0xfd, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0, 0, 0, 0, 0x12, 0x34};
  FlowIpv6 ip{}, ipm{};
  ip.dst = b, ipm.dst.fill(0xff);
  ip.proto = 17, ipm.proto = 0xff;
  FlowPattern p;
  p.eth({}, {}).ipv6(ip, ipm).udp({}, {});
  const FlowHandle h = must_create(n.e1(), p, FlowActions().set_ipv6_src(c).set_ipv6_hop(9).port(2).count_hits());
  CHECK(n.nic->stats().exact_rules == 1);  // whole fields only
  auto got = receive(n, {frame6(a, b, 64, 7), frame6(b, a, 64, 7)});
  REQUIRE(got.size() == 1);  // the reverse direction misses
  release_all(got);
  const auto out = collect(n.r2());
  REQUIRE(out.size() == 1);
  CHECK(out[0] == frame6(c, b, 9, 7));  // the bytes of a frame built with those fields, checksum included
  CHECK(must_query(n.e1(), h).hits == 1);
  // An IPv6 rewrite needs an IPv6 pattern.
  FlowError err;
  CHECK_FALSE(n.e1().create({}, exact_udp({}), FlowActions().set_ipv6_hop(1).drop(), &err).ok());
  CHECK(err.errnum == EINVAL);
  CHECK(err.index == 0);
}

TEST_CASE("sim nic: push_vlan on a tagged frame writes a new outer tag from the set actions, DEI 0") {
  Nic n;
  Udp4 f;
  f.vlan = true, f.tci = 0x1000 | 7;  // DEI set, VID 7
  FlowVlan vl{}, vlm{};
  vl.tci = 7, vlm.tci = 0x0fff;
  FlowPattern p;
  p.eth({}, {}).vlan(vl, vlm);
  must_create(n.e1(), p, FlowActions().push_vlan(0x88a8).set_vlan_vid(200).set_vlan_pcp(3).port(2));
  auto got = receive(n, {frame(f)});
  CHECK(got.empty());
  const auto out = collect(n.r2());
  REQUIRE(out.size() == 1);
  std::vector<uint8_t> want = frame(f);
  const uint16_t tci = 3 << 13 | 200;
  want.insert(want.begin() + 12, {0x88, 0xa8, static_cast<uint8_t>(tci >> 8), static_cast<uint8_t>(tci)});
  CHECK(out[0] == want);
}

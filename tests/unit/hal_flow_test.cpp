// Tests of the hal flow facade (keel/hal/flow.h) and the Port hooks it adds
// (port.h): the pattern/action builders (zeroed items, fixed capacity,
// overflow refused and visible), testpmd-like to_string(), FlowError's text
// and Errc, FlowEngine's defaults (query_bulk as a loop of query; the
// template/queue API unsupported with a clear error), and Port::rx()
// running a HwIngress: what the hook keeps reaches the caller in order,
// what it forwarded/dropped is counted apart while rx_packets counts all.
//
// Thread-safety: single-threaded.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "keel/hal/backend.h"
#include "keel/hal/flow.h"
#include "keel/hal/port.h"

namespace hal = keel::hal;
using keel::Errc;
using keel::Result;
using keel::Status;

namespace {

hal::FlowEth eth(hal::FlowMac dst, uint16_t type) {
  hal::FlowEth e{};
  e.dst = dst;
  e.type = type;
  return e;
}

}  // namespace

TEST_CASE("pattern builders zero items and chain; equal patterns compare equal byte for byte") {
  hal::FlowPattern a, b;
  hal::FlowEth m{};
  m.dst.fill(0xff);
  m.type = 0xffff;
  hal::FlowIpv4 v4{};
  v4.src = 0x0a000001;
  v4.proto = 17;
  hal::FlowIpv4 v4m{};
  v4m.src = ~0u;
  v4m.proto = 0xff;
  a.eth(eth({2, 0, 0, 0, 0, 1}, 0x0800), m).ipv4(v4, v4m).udp({1000, 53}, {0, 0xffff});
  b.eth(eth({2, 0, 0, 0, 0, 1}, 0x0800), m).ipv4(v4, v4m).udp({1000, 53}, {0, 0xffff});
  CHECK(a.count == 3);
  CHECK_FALSE(a.overflow);
  CHECK(a == b);
  CHECK(a.items[0].type == hal::FlowItemType::eth);
  CHECK(a.items[1].spec.ipv4.src == 0x0a000001);
  CHECK(a.items[2].mask.udp.dst == 0xffff);
  // Unused items stay zero, whatever was there.
  CHECK(a.items[3].spec.ipv6.src == hal::FlowIpv6Addr{});

  b.items[2].spec.udp.dst = 54;
  CHECK_FALSE(a == b);
}

TEST_CASE("a pattern refuses a ninth item and says so; actions refuse a seventeenth") {
  hal::FlowPattern p;
  for (unsigned i = 0; i < hal::kMaxFlowItems; ++i) p.mark(i + 1);
  CHECK(p.count == hal::kMaxFlowItems);
  CHECK_FALSE(p.overflow);
  p.meta(7);
  CHECK(p.count == hal::kMaxFlowItems);
  CHECK(p.overflow);
  CHECK(hal::to_string(p).find("(more items than 8)") != std::string::npos);

  hal::FlowActions a;
  for (unsigned i = 0; i < hal::kMaxFlowActions; ++i) a.count_hits();
  CHECK_FALSE(a.overflow);
  a.drop();
  CHECK(a.overflow);
  CHECK(a.count == hal::kMaxFlowActions);
  CHECK_FALSE(a.has(hal::FlowActionType::drop));

  hal::FlowActions r;
  std::vector<uint16_t> too_many(hal::kMaxRssQueues + 1, 0);
  r.rss(too_many);
  CHECK(r.overflow);
  CHECK(r.count == 0);
}

TEST_CASE("to_string of a pattern reads like testpmd: full masks 'is', partial 'spec/mask', zero nothing") {
  hal::FlowPattern p;
  hal::FlowEth em{};
  em.dst.fill(0xff);
  em.type = 0xffff;
  hal::FlowIpv4 v4{}, v4m{};
  v4.src = 0x0a000001;
  v4.dst = 0x0a010000;
  v4m.src = ~0u;
  v4m.dst = 0xffff0000;
  p.eth(eth({2, 0, 0, 0, 0, 1}, 0x0800), em).ipv4(v4, v4m).udp({0, 53}, {0, 0xffff}).represented_port(3);
  CHECK(hal::to_string(p) ==
        "eth dst is 02:00:00:00:00:01 type is 0x0800 / ipv4 src is 10.0.0.1 dst spec 10.1.0.0 mask 255.255.0.0 / "
        "udp dst is 53 / represented_port ethdev_port_id is 3 / end");

  hal::FlowPattern any;
  any.eth({}, {}).ipv6({}, {});
  CHECK(hal::to_string(any) == "eth / ipv6 / end");

  hal::FlowPattern v6;
  hal::FlowIpv6 s6{};
  s6.src = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  s6.proto = 6;
  hal::FlowIpv6 m6 = hal::flow_ipv6_mask_all();
  m6.tclass = 0, m6.flow_label = 0, m6.hop_limit = 0;
  m6.dst = {};
  v6.ipv6(s6, m6).tcp({80, 0}, {0xffff, 0});
  CHECK(hal::to_string(v6) == "ipv6 src is 2001:db8:0:0:0:0:0:1 proto is 6 / tcp src is 80 / end");
}

TEST_CASE("to_string of actions names every action in rte_flow's words") {
  hal::FlowActions a;
  const uint16_t qs[] = {0, 1};
  a.push_vlan().set_vlan_vid(100).set_vlan_pcp(3).set_mac_dst({2, 0, 0, 0, 0, 9}).set_ipv4_src(0xc0a80001)
      .set_tp_dst(8080).set_ipv4_ttl(9).mark(42).count_hits().represented_port(2).port(1).queue(1)
      .rss(qs, hal::kFlowRssIpv4 | hal::kFlowRssUdp).age(10).jump(2).pop_vlan();
  CHECK(a.count == 16);
  CHECK(hal::to_string(a) ==
        "of_push_vlan ethertype 0x8100 / of_set_vlan_vid vlan_vid 100 / of_set_vlan_pcp vlan_pcp 3 / "
        "set_mac_dst mac_addr 02:00:00:00:00:09 / set_ipv4_src ipv4_addr 192.168.0.1 / set_tp_dst port 8080 / "
        "set_ipv4_ttl ttl_value 9 / mark id 42 / count / represented_port ethdev_port_id 2 / port_id id 1 / "
        "queue index 1 / rss types ipv4 udp end queues 0 1 end / age timeout 10 / jump group 2 / of_pop_vlan / "
        "end");
  hal::FlowActions d;
  d.drop();
  CHECK(hal::to_string(d) == "drop / end");
  CHECK(d.has(hal::FlowActionType::drop));
  CHECK_FALSE(d.has(hal::FlowActionType::count));
}

TEST_CASE("every item and action type has its own rte_flow name") {
  std::map<std::string, int> seen;
  for (unsigned t = 0; t < hal::kFlowItemTypes; ++t) ++seen[hal::to_string(static_cast<hal::FlowItemType>(t))];
  for (unsigned t = 0; t < hal::kFlowActionTypes; ++t)
    ++seen[std::string("a:") + hal::to_string(static_cast<hal::FlowActionType>(t))];
  CHECK(seen.size() == hal::kFlowItemTypes + hal::kFlowActionTypes);
  CHECK(seen.count("unknown") == 0);
  CHECK(seen.count("a:unknown") == 0);
}

TEST_CASE("FlowError::status names the op, port, failing action and the driver's words") {
  hal::FlowError e;
  e.errnum = ENOTSUP;
  e.where = hal::FlowErrorWhere::action;
  e.index = 1;
  e.type = static_cast<int>(hal::FlowActionType::of_push_vlan);
  e.message = "VLAN push not supported";
  e.op = "create";
  e.port = "p0";
  Status st = e.status();
  CHECK(st.code() == Errc::unsupported);
  CHECK(st.message() == "rte_flow create on port p0: action 1 (of_push_vlan): VLAN push not supported (ENOTSUP)");

  hal::FlowError f;
  Status s2 = hal::flow_fail(&f, "create", "p1", ENOSPC, hal::FlowErrorWhere::table, -1, -1, "table full");
  CHECK(s2.code() == Errc::resource_exhausted);
  CHECK(s2.message() == "rte_flow create on port p1: table: table full (ENOSPC)");
  CHECK(f.errnum == ENOSPC);
  CHECK(f.where == hal::FlowErrorWhere::table);

  Status s3 = hal::flow_fail(nullptr, "validate", "p2", EINVAL, hal::FlowErrorWhere::item, 0,
                             static_cast<int>(hal::FlowItemType::eth), "");
  CHECK(s3.message() == "rte_flow validate on port p2: item 0 (eth): no message from the driver (EINVAL)");
  CHECK(s3.code() == Errc::invalid_argument);

  CHECK(hal::flow_errc(EEXIST) == Errc::already_exists);
  CHECK(hal::flow_errc(ENODEV) == Errc::unavailable);
  CHECK(hal::flow_errc(EIO) == Errc::unavailable);
  CHECK(hal::flow_errc(ENOSYS) == Errc::unsupported);
  CHECK(std::string(hal::errno_name(EEXIST)) == "EEXIST");
  CHECK(std::string(hal::errno_name(9999)) == "errno 9999");
  CHECK(hal::FlowError{}.status().ok());
}

namespace {

// A FlowEngine that keeps rules in a map and fails queries of odd handles:
// exercises the defaults.
class MapEngine final : public hal::FlowEngine {
 public:
  hal::FlowEngineInfo info() const override { return {}; }
  const std::string& port_name() const override { return name_; }
  Status validate(const hal::FlowAttr&, const hal::FlowPattern&, const hal::FlowActions&, hal::FlowError*) override {
    return {};
  }
  Result<hal::FlowHandle> create(const hal::FlowAttr&, const hal::FlowPattern&, const hal::FlowActions&,
                                 hal::FlowError*) override {
    rules_[next_] = next_ * 10;
    return next_++;
  }
  Status destroy(hal::FlowHandle h, hal::FlowError*) override {
    rules_.erase(h);
    return {};
  }
  Status query(hal::FlowHandle h, hal::FlowQuery& q, hal::FlowError* err) override {
    if (h % 2)
      return hal::flow_fail(err, "query", name_, EIO, hal::FlowErrorWhere::handle, -1, -1, "odd");
    q.ok = true;
    q.hits = rules_[h];
    return {};
  }
  Status flush(hal::FlowError*) override {
    rules_.clear();
    return {};
  }

 private:
  std::string name_ = "m0";
  std::map<hal::FlowHandle, uint64_t> rules_;
  hal::FlowHandle next_ = 1;
};

}  // namespace

TEST_CASE("query_bulk's default queries each handle and reports each failure in its slot") {
  MapEngine e;
  std::vector<hal::FlowHandle> hs;
  for (int i = 0; i < 4; ++i) hs.push_back(e.create({}, {}, {}, nullptr).value());
  std::vector<hal::FlowQuery> out(4);
  CHECK(e.query_bulk(hs, out) == 2);
  CHECK_FALSE(out[0].ok);
  CHECK(out[0].errnum == EIO);
  CHECK(out[1].ok);
  CHECK(out[1].hits == 20);
  CHECK(out[3].hits == 40);
}

TEST_CASE("the template/queue API is unsupported by default, with a clear error and no handle") {
  MapEngine e;
  hal::FlowError err;
  Status st = e.configure(1, 64, &err);
  CHECK(st.code() == Errc::unsupported);
  CHECK(err.errnum == ENOTSUP);
  CHECK(st.message().find("rte_flow configure on port m0: device: the template/queue API is not supported") == 0);
  hal::FlowHandle h = 77;
  CHECK_FALSE(e.async_create(0, 1, {}, 0, {}, 0, false, 5, &h, &err).ok());
  CHECK(h == hal::kNoFlow);
  hal::FlowOpResult res[4];
  CHECK(e.pull(0, res, &err) == 0);
  CHECK(std::string(err.op) == "pull");
  CHECK_FALSE(e.pattern_template({}, {}, nullptr).ok());
  CHECK_FALSE(e.template_table({}, 10, {}, {}, nullptr).ok());
}

namespace {

// A port whose rx hands out `pending` packets.
class FakePort final : public hal::Port {
 public:
  FakePort() : Port("f0", "fake") { set_id(4); }
  std::vector<hal::Packet*> pending;
  hal::LinkState link() const override { return {true, 0, true}; }
  std::string describe() const override { return "fake"; }

 protected:
  uint16_t rx_burst(uint16_t, std::span<hal::Packet*> out) noexcept override {
    uint16_t n = 0;
    while (n < out.size() && !pending.empty()) {
      out[n++] = pending.front();
      pending.erase(pending.begin());
    }
    return n;
  }
  uint16_t tx_burst(uint16_t, std::span<hal::Packet* const> pkts) noexcept override {
    hal::release_burst(pkts);
    return static_cast<uint16_t>(pkts.size());
  }
};

// "Hardware" that drops packets whose first byte is 1, forwards (releases)
// those with 2, marks those with 3 and keeps the rest.
class ByteIngress final : public hal::HwIngress {
 public:
  uint16_t in_port_seen = 0;
  uint16_t ingress(hal::Port& in, uint16_t q, std::span<hal::Packet*> pkts) noexcept override {
    uint16_t kept = 0;
    uint64_t fwd = 0, drop = 0;
    for (hal::Packet* p : pkts) {
      in_port_seen = p->in_port();
      const uint8_t b = p->data()[0];
      if (b == 1 || b == 2) {
        hal::release(p);
        (b == 1 ? drop : fwd)++;
        continue;
      }
      if (b == 3) p->set_flow_mark(0xabc);
      pkts[kept++] = p;
    }
    in.count_rx_hw(q, fwd, drop);
    return kept;
  }
};

}  // namespace

TEST_CASE("Port::rx runs the HwIngress hook: kept packets in order, forwarded/dropped counted apart") {
  auto b = hal::make_sim_backend(hal::SimOptions{64});
  REQUIRE(b.ok());
  hal::Backend& be = *b.value();
  FakePort port;
  CHECK(port.flow_engine() == nullptr);
  CHECK(port.hw_ingress() == nullptr);
  const uint8_t kinds[] = {0, 1, 2, 3, 0, 2, 9};
  for (uint8_t k : kinds) {
    hal::Packet* p = nullptr;
    REQUIRE(be.alloc_burst(std::span(&p, 1), 60) == 1);
    REQUIRE(p->set_len(60));
    std::memset(p->data(), 0, 60);
    p->data()[0] = k;
    p->data()[1] = static_cast<uint8_t>(port.pending.size());  // arrival order
    port.pending.push_back(p);
  }
  ByteIngress hw;
  port.set_hw_ingress(&hw);
  CHECK(port.hw_ingress() == &hw);
  hal::Packet* out[hal::kMaxBurst];
  const uint16_t n = port.rx(0, out);
  REQUIRE(n == 4);
  CHECK(hw.in_port_seen == 4);  // in_port is set before the hook runs
  CHECK(out[0]->data()[1] == 0);
  CHECK(out[1]->data()[1] == 3);
  CHECK(out[1]->has_flow_mark());
  CHECK(out[1]->meta().flow_mark == 0xabc);
  CHECK(out[2]->data()[1] == 4);
  CHECK(out[3]->data()[1] == 6);
  CHECK_FALSE(out[0]->has_flow_mark());
  hal::release_burst(std::span(out, n));
  hal::PortCounters c = port.counters();
  CHECK(c.rx_packets == 7);
  CHECK(c.rx_bytes == 7 * 60);
  CHECK(c.rx_hw_forwarded == 2);
  CHECK(c.rx_hw_dropped == 1);

  // An empty burst does not call the hook; without a hook rx is as before.
  CHECK(port.rx(0, out) == 0);
  port.set_hw_ingress(nullptr);
  hal::Packet* p = nullptr;
  REQUIRE(be.alloc_burst(std::span(&p, 1), 60) == 1);
  p->data()[0] = 1;
  port.pending.push_back(p);
  REQUIRE(port.rx(0, out) == 1);
  hal::release(out[0]);
  CHECK(port.counters().rx_hw_dropped == 1);
  port.clear_counters();
  CHECK(port.counters().rx_hw_forwarded == 0);
}

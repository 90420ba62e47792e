// Bonds wired into the switch (ofproto/ofproto_bonds.cpp, the bond parts
// of xlate.cpp, port_columns.cpp and mac_learning.cpp): add-bond's column
// words and their round trip, Ofproto::add_bond's refusals leaving the
// bridge as it was, the members' PortConfigs, NORMAL on a bond (one MAC
// port per bond, flooding once per bond and never back into it, output
// through lb_output / recirc / the chosen member), the recirculation
// scheme's second pass, LACPDUs to the slow path, and static MAC entries.
#include <doctest/doctest.h>

#include <mutex>
#include <sstream>

#include "datapath/datapath.h"
#include "flow/dp_actions.h"
#include "flow/of_actions.h"
#include "flow/of_match_syntax.h"
#include "keel/hal/backend.h"
#include "keel/hal/port_spec.h"
#include "ofproto/ofproto.h"
#include "ofproto/port_columns.h"
#include "ofproto/xlate.h"

using namespace keel;
using namespace keel::ofproto;
using keel::flow::FlowKey;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

// A datapath with ring ports p0..p4 (not started) and an Ofproto with br0.
struct Switch {
  std::unique_ptr<hal::Backend> be;
  datapath::Datapath dp{datapath::DatapathConfig{}};
  std::unique_ptr<Ofproto> of;
  Bridge* br = nullptr;
  Switch() {
    auto b = hal::make_sim_backend({.buffers = 256});
    REQUIRE(b.ok());
    be = std::move(b.value());
    for (const char* name : {"p0", "p1", "p2", "p3", "p4"}) {
      auto spec = hal::parse_port_spec(name, "ring:size=64");
      REQUIRE(spec.ok());
      auto port = be->open_port(*spec, 1, 1);
      REQUIRE(port.ok());
      REQUIRE(dp.add_port(std::move(port.value())).ok());
    }
    of = std::make_unique<Ofproto>(dp);
    std::lock_guard lk(of->writer_mutex());
    REQUIRE(of->add_bridge("br0").ok());
    br = of->find_bridge("br0");
    REQUIRE(of->add_port("br0", "p0").ok());
  }
  Status bond(const std::string& name, const std::string& line) {
    std::lock_guard lk(of->writer_mutex());
    std::vector<std::string> w = split(line);
    BondRequest req;
    size_t i = 0;
    for (; i < w.size() && w[i].find('=') == std::string::npos && w[i] != "--"; ++i)
      req.members.push_back(w[i]);
    BondColumns cols;
    std::vector<std::string> rest(w.begin() + static_cast<long>(i), w.end());
    if (Status st = parse_bond_columns(rest, name, req.members, cols); !st.ok()) return st;
    req.settings = cols.settings;
    req.port = cols.port;
    req.ifaces = cols.ifaces;
    return of->add_bond("br0", name, req);
  }
  void flow(const std::string& line) {
    auto f = flow::parse_of_flow(line);
    REQUIRE(f.ok());
    auto a = flow::parse_of_actions(f->actions, {}, f->actions_column);
    REQUIRE(a.ok());
    FlowMod fm;
    fm.flow = f.value();
    fm.actions = a.value();
    REQUIRE(br->flow_mod(fm).ok());
  }
  uint16_t dp_port(const std::string& name) const { return dp.find_port(name)->id(); }
  // A partner's LACPDU on every member of `bond`, then a tick: negotiated.
  void negotiate(const std::string& bond, uint64_t now_ms = 1000) {
    std::lock_guard lk(of->writer_mutex());
    const BondPort* b = of->find_bond(bond);
    REQUIRE(b);
    REQUIRE(b->lacp);
    for (size_t i = 0; i < b->members.size(); ++i) {
      LacpPdu pdu;
      pdu.actor = LacpInfo{65535,
                           flow::EthAddr{{2, 0, 0, 0, 0xaa, 0}},
                           1,
                           255,
                           static_cast<uint16_t>(i + 1),
                           static_cast<uint8_t>(kLacpStateActivity | kLacpStateAggregation | kLacpStateSync |
                                                kLacpStateCollecting | kLacpStateDistributing)};
      REQUIRE(b->lacp->process_packet(i, compose_lacpdu(pdu, flow::EthAddr{{2, 0, 0, 0, 0xaa, 1}}), now_ms));
    }
    of->run_bonds(now_ms);
    REQUIRE(b->bond->lacp_status() == LacpStatus::negotiated);
  }
  // Translates a packet received on datapath port `in` (match syntax for the rest).
  XlateOut x(const std::string& in, const std::string& key, uint64_t now = 1) {
    auto m = flow::parse_of_match(key);
    REQUIRE(m.ok());
    FlowKey k = m->key;
    k.in_port = dp_port(in);
    XlateIn xi{*br, k, br->version(), now, true, false, nullptr};
    auto r = xlate(xi);
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    return r.value();
  }
};

std::string acts(const XlateOut& o) { return flow::format_dp_actions(o.actions); }

}  // namespace

TEST_CASE("bond columns: every setting parses, prints back and parses to the same settings") {
  BondColumns c;
  std::vector<std::string> members{"a1", "a2"};
  REQUIRE(parse_bond_columns(
              split("bond_mode=balance-tcp lacp=active bond_updelay=200 bond_downdelay=100 "
                    "other_config:bond-rebalance-interval=1000 other_config:lb-output-action=false "
                    "other_config:bond-primary=a2 other_config:bond-hash-basis=7 "
                    "other_config:lacp-time=fast other_config:lacp-fallback-ab=true tag=10 "
                    "-- set Interface a2 ofport_request=7 mtu_request=9000"),
              "bond0", members, c)
              .ok());
  CHECK(c.settings.mode == BondMode::balance_tcp);
  CHECK(c.settings.lacp == LacpMode::active);
  CHECK(c.settings.updelay_ms == 200);
  CHECK(c.settings.downdelay_ms == 100);
  CHECK(c.settings.rebalance_interval_ms == 1000);
  CHECK_FALSE(c.settings.lb_output_action);
  CHECK(c.settings.primary == "a2");
  CHECK(c.settings.hash_basis == 7);
  CHECK(c.settings.lacp_fast);
  CHECK(c.settings.lacp_fallback_ab);
  CHECK(c.port.tag == 10);
  REQUIRE(c.ifaces.size() == 2);
  CHECK(c.ifaces[1].ofport == 7u);
  CHECK(c.ifaces[1].mtu_request == 9000u);
  CHECK_FALSE(c.ifaces[0].ofport);

  // Abbreviations and `[]` as in ovs-vsctl.
  BondColumns d;
  REQUIRE(parse_bond_columns(split("bond_m=balance-slb lacp=[]"), "b", members, d).ok());
  CHECK(d.settings.mode == BondMode::balance_slb);
  CHECK(d.settings.lacp == LacpMode::off);
}

TEST_CASE("bond columns: bad words are refused by name and change nothing") {
  std::vector<std::string> members{"a1", "a2"};
  auto err = [&](const std::string& words) {
    BondColumns c;
    c.settings.hash_basis = 99;
    Status st = parse_bond_columns(split(words), "bond0", members, c);
    CHECK(c.settings.hash_basis == 99);
    return st.ok() ? std::string("OK") : std::string(st.message());
  };
  CHECK(err("bond_mode=balance-foo")
            .find("constraint violation: balance-foo is not one of the allowed values") != std::string::npos);
  CHECK(err("other_config:lb-output-action=yes").find("true or false") != std::string::npos);
  CHECK(err("other_config:lacp-time=medium").find("fast or slow") != std::string::npos);
  CHECK(err("other_config:bond-hash-basis=4294967296").find("0..4294967295") != std::string::npos);
  CHECK(err("other_config:bond-hash-basis=3 other_config:nope=1").find("no bond other_config key") !=
        std::string::npos);
  CHECK(err("bond_updelay=-1").find("a delay of") != std::string::npos);
  CHECK(err("-- set Interface a9 mtu_request=9000").find("no row \"a9\" in table Interface") !=
        std::string::npos);
  CHECK(err("-- set Bridge br0 x=1").find("add-bond takes only") != std::string::npos);
  CHECK(err("frobnicate=1").find("Port does not contain a column") != std::string::npos);
}

TEST_CASE("add_bond: members become ports naming their bond; refusals leave the bridge as it was") {
  Switch s;
  const size_t before = s.br->ports()->ports.size();
  CHECK(std::string(s.bond("b", "p1").message()).find("at least 2 interfaces") != std::string::npos);
  CHECK(std::string(s.bond("b", "p1 p0").message()).find("already exists on bridge br0") !=
        std::string::npos);
  CHECK(std::string(s.bond("b", "p1 p9").message()).find("no port 'p9'") != std::string::npos);
  CHECK(std::string(s.bond("p2", "p1 p3").message()).find("a datapath port has that name") !=
        std::string::npos);
  CHECK(std::string(s.bond("b", "p1 p2 -- set Interface p2 ofport_request=1").message())
            .find("OpenFlow port 1 is already p0") != std::string::npos);
  CHECK(s.br->ports()->ports.size() == before);

  REQUIRE(s.bond("bond0", "p1 p2 bond_mode=balance-tcp tag=5").ok());
  auto ports = s.br->ports();
  const PortConfig* p1 = ports->by_name("p1");
  const PortConfig* p2 = ports->by_name("p2");
  REQUIRE(p1);
  REQUIRE(p2);
  CHECK(p1->bond == "bond0");
  CHECK(p1->bond_obj == p2->bond_obj);
  CHECK(p1->bond_obj->id() == 1);
  CHECK(p1->bundle() == p1->ofport);
  CHECK(p2->bundle() == p1->ofport);
  CHECK(p2->tag == 5);
  CHECK(p2->vlan_mode == VlanMode::access);
  CHECK_FALSE(p1->lacp);

  CHECK(std::string(s.bond("bond1", "p3 p1").message()).find("(in bond bond0)") != std::string::npos);
  CHECK(std::string(s.bond("bond0", "p3 p4").message()).find("a port named bond0 already exists") !=
        std::string::npos);
  {
    std::lock_guard lk(s.of->writer_mutex());
    CHECK(std::string(s.of->del_port("br0", "p1").message()).find("is a member of bond bond0") !=
          std::string::npos);
    CHECK(std::string(s.of->add_port("br0", "bond0").message()).find("a bond of bridge br0 has that name") !=
          std::string::npos);
  }
  // A second bond gets the next id; deleting frees it for the next one.
  REQUIRE(s.bond("bond1", "p3 p4 lacp=active").ok());
  CHECK(s.br->ports()->by_name("p3")->bond_obj->id() == 2);
  CHECK(s.br->ports()->by_name("p3")->lacp);
  {
    std::lock_guard lk(s.of->writer_mutex());
    REQUIRE(s.of->del_port("", "bond0").ok());
    CHECK(s.br->ports()->by_name("p1") == nullptr);
    CHECK(s.of->find_bond("bond0") == nullptr);
  }
  REQUIRE(s.bond("bond2", "p1 p2").ok());
  CHECK(s.br->ports()->by_name("p1")->bond_obj->id() == 1);
}

TEST_CASE("NORMAL on a balance-tcp bond: drops without LACP negotiated, as OVS; lb_output; recirc scheme") {
  Switch s;
  REQUIRE(s.bond("bond9", "p3 p4 bond_mode=balance-tcp").ok());  // lacp=off: balance-tcp sends nothing
  s.flow("actions=NORMAL");
  XlateOut o = s.x("p0", "tcp,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02,tp_src=1,tp_dst=2");
  CHECK(acts(o) == "drop");
  {
    std::lock_guard lk(s.of->writer_mutex());
    REQUIRE(s.of->del_port("", "bond9").ok());
  }
  REQUIRE(s.bond("bond0", "p1 p2 bond_mode=balance-tcp lacp=active").ok());
  o = s.x("p0", "tcp,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02,tp_src=1,tp_dst=2");
  CHECK(acts(o) == "drop");  // configured, not negotiated
  s.negotiate("bond0");
  o = s.x("p0", "tcp,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02,tp_src=1,tp_dst=2");
  CHECK(acts(o) == "hash(l4(0)),lb_output(1)");
  CHECK(o.wc.tp_src == 0);
  CHECK(o.wc.tp_dst == 0);
  CHECK(o.wc.nw_src == 0);

  // lb-output-action=false: recirculation, then the bucket's member.
  {
    std::lock_guard lk(s.of->writer_mutex());
    BondSettings st = s.of->find_bond("bond0")->bond->settings();
    st.lb_output_action = false;
    st.hash_basis = 3;
    REQUIRE(s.of->set_bond("bond0", st, PortOptions{}).ok());
  }
  o = s.x("p0", "tcp,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02");
  CHECK(acts(o) == "hash(l4(3)),recirc(0x1)");
  const auto buckets = s.of->find_bond("bond0")->bond->dp_buckets();
  for (unsigned b : {0u, 5u, 255u}) {
    XlateOut r = s.x("p0", "recirc_id=1,dp_hash=" + std::to_string(0x1200 + b) + ",tcp");
    CHECK(r.error == XlateError::ok);
    CHECK(r.wc.dp_hash == 0xffu);
    CHECK(acts(r) == std::to_string(buckets[b]));
  }
  // An id no bond of this bridge has: OVS's "Recirculation context not found".
  CHECK(s.x("p0", "recirc_id=7,tcp").error == XlateError::no_recirc_context);
}

TEST_CASE("NORMAL on an active-backup bond: learned for the bond, flooded once, never back into it") {
  Switch s;
  REQUIRE(s.bond("bond0", "p1 p2").ok());
  s.flow("actions=NORMAL");
  const uint16_t p0 = s.dp_port("p0"), p1 = s.dp_port("p1");
  // Flooding from p0: once into the bond, through its active member.
  XlateOut o = s.x("p0", "ip,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02");
  CHECK(acts(o) == std::to_string(p1));
  // A MAC learned on the active member is learned for the bond (its first
  // member's port) ...
  o = s.x("p1", "ip,dl_src=00:00:00:00:00:02,dl_dst=ff:ff:ff:ff:ff:ff");
  CHECK(acts(o) == std::to_string(p0));  // the flood skips the whole input bond
  bool found = false;
  for (const MacEntry& e : s.br->mac().entries())
    if (e.mac == flow::EthAddr{{0, 0, 0, 0, 0, 2}}) found = e.ofport == s.br->ports()->by_name("p1")->ofport;
  CHECK(found);
  // ... and p0's traffic to it leaves on the bond's active member.
  o = s.x("p0", "ip,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02");
  CHECK(acts(o) == std::to_string(p1));
  // The backup member's input is refused (bond_check_admissibility).
  o = s.x("p2", "ip,dl_src=00:00:00:00:00:03,dl_dst=00:00:00:00:00:01");
  CHECK(acts(o) == "drop");
}

TEST_CASE("LACPDUs on a member of a LACP bond go to the slow path and nowhere else") {
  Switch s;
  REQUIRE(s.bond("bond0", "p1 p2 lacp=active").ok());
  s.flow("actions=NORMAL");
  XlateOut o = s.x("p1", "dl_type=0x8809,dl_dst=01:80:c2:00:00:02,dl_src=00:00:00:00:00:09");
  CHECK(o.slow_path_lacp);
  flow::DpActionReader r(o.actions.bytes());
  REQUIRE_FALSE(r.done());
  flow::DpAction a = r.next();
  CHECK(a.type == flow::DpActionType::kUserspace);
  CHECK(decode_slow_path_userdata(a.userdata()) == SlowPathReason::lacp);
  CHECK(r.done());
  CHECK(o.rules.empty());  // never reached the rule tables
  // Not on a LACP bond's member: an ordinary frame for the rules.
  o = s.x("p0", "dl_type=0x8809,dl_dst=01:80:c2:00:00:02,dl_src=00:00:00:00:00:09");
  CHECK_FALSE(o.slow_path_lacp);
  CHECK(acts(o) == "drop");  // NORMAL: reserved destination
}

TEST_CASE("static MAC entries: never age, learning does not move them, fdb-del removes only them") {
  MacLearning ml(1, 4);
  const flow::EthAddr a{{0, 0, 0, 0, 0, 1}}, b{{0, 0, 0, 0, 0, 2}};
  CHECK_FALSE(ml.add_static(0, a, 3).has_value());
  CHECK_FALSE(ml.learn(0, a, 4, 10));  // not moved
  CHECK(ml.lookup(0, a, 100ull * 1'000'000'000) == 3u);
  CHECK(ml.expire(100ull * 1'000'000'000) == 0);
  REQUIRE(ml.learn(0, b, 4, 0));
  CHECK_FALSE(ml.del_static(0, b));  // dynamic: not fdb-del's
  auto old = ml.add_static(0, b, 5);
  REQUIRE(old.has_value());
  CHECK_FALSE(old->is_static);
  CHECK(old->ofport == 4u);
  CHECK(ml.del_static(0, a));
  CHECK_FALSE(ml.lookup(0, a, 0).has_value());
  // Eviction takes dynamic entries only.
  for (uint8_t i = 10; i < 20; ++i) ml.learn(0, flow::EthAddr{{0, 0, 0, 0, 1, i}}, 1, 0);
  CHECK(ml.lookup(0, b, 0) == 5u);
}

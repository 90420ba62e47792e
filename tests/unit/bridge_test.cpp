// Bridge: OpenFlow flow-mod semantics (add/replace, loose and strict modify
// and delete, cookies, out_port, every-table), bundles (all or nothing),
// version visibility for readers, timeouts, ports; Ofproto's port index,
// controller queue and mtu_request; the dump-flows text.
#include "ofproto/bridge.h"

#include <doctest/doctest.h>

#include "datapath/datapath.h"
#include "datapath/rcu.h"
#include "flow/of_actions.h"
#include "flow/of_match_syntax.h"
#include "keel/hal/backend.h"
#include "keel/hal/cpu.h"
#include "keel/hal/port_spec.h"
#include "ofproto/ofproto.h"

using namespace keel;
using namespace keel::ofproto;

namespace {

FlowMod fm(const std::string& text, FlowMod::Command cmd = FlowMod::Command::add) {
  auto f = flow::parse_of_flow(text);
  REQUIRE_MESSAGE(f.ok(), f.status().message());
  FlowMod m;
  m.command = cmd;
  m.flow = f.value();
  m.cookie_has_mask = text.find("cookie=") != std::string::npos &&
                      text.find('/', text.find("cookie=")) < text.find_first_of(", ", text.find("cookie="));
  if (f->has_actions) {
    auto a = flow::parse_of_actions(f->actions, {}, f->actions_column);
    REQUIRE_MESSAGE(a.ok(), a.status().message());
    m.actions = a.value();
  }
  return m;
}

FlowModResult apply(Bridge& b, const std::string& text, FlowMod::Command cmd = FlowMod::Command::add) {
  auto r = b.flow_mod(fm(text, cmd));
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  return r.value();
}

// A packet's key: the exact values of a match text.
flow::FlowKey pkt(const std::string& match) {
  auto m = flow::parse_of_match(match);
  REQUIRE(m.ok());
  return m->key;
}

const OfRule* lookup(const Bridge& b, const flow::FlowKey& k, uint8_t table = 0, std::optional<Version> v = {}) {
  return static_cast<const OfRule*>(b.table(table).lookup(k, v.value_or(b.version()), nullptr));
}

std::string actions_of(const OfRule* r) { return r ? flow::format_of_actions(r->actions) : "(none)"; }

using C = FlowMod::Command;

}  // namespace

TEST_CASE("add, replace and counters") {
  Bridge b("br0", nullptr);
  CHECK(apply(b, "priority=100,ip,nw_dst=10.0.0.0/8,actions=output:2").added == 1);
  CHECK(b.n_rules() == 1);
  auto* r = b.dump(nullptr)[0];
  const_cast<OfRule*>(r)->add_stats(3, 300, hal::now_ns());
  // Same match and priority: replaced; counters carried (no reset_counts).
  FlowModResult res = apply(b, "priority=100,ip,nw_dst=10.0.0.0/8,actions=output:3");
  CHECK(res.added == 0);
  CHECK(res.modified == 1);
  CHECK(b.n_rules() == 1);
  auto rules = b.dump(nullptr);
  REQUIRE(rules.size() == 1);
  CHECK(actions_of(rules[0]) == "output:3");
  CHECK(rules[0]->packets.load() == 3);
  // reset_counts clears them.
  apply(b, "priority=100,ip,nw_dst=10.0.0.0/8,reset_counts,actions=output:4");
  CHECK(b.dump(nullptr)[0]->packets.load() == 0);
  // Another priority is another rule.
  apply(b, "priority=50,ip,nw_dst=10.0.0.0/8,actions=drop");
  CHECK(b.n_rules() == 2);
  CHECK(actions_of(lookup(b, pkt("ip,nw_dst=10.1.2.3"))) == "output:4");
  CHECK(lookup(b, pkt("ip,nw_dst=11.1.2.3")) == nullptr);
}

TEST_CASE("check_of_actions runs on add and modify") {
  Bridge b("br0", nullptr);
  auto r = b.flow_mod(fm("priority=1,actions=set_field:1.2.3.4->ip_src"));
  CHECK_FALSE(r.ok());
  CHECK(b.n_rules() == 0);
  apply(b, "priority=1,ip,actions=drop");
  apply(b, "priority=1,arp,actions=drop");
  // Loose modify over both: set_field tcp_dst is fine for neither -> nothing changes.
  auto m = b.flow_mod(fm("priority=1,actions=set_field:80->tcp_dst", C::modify));
  CHECK_FALSE(m.ok());
  for (const OfRule* x : b.dump(nullptr)) CHECK(actions_of(x) == "drop");
  // goto_table must go forward.
  CHECK_FALSE(b.flow_mod(fm("table=3,actions=goto_table:2")).ok());
  CHECK(b.flow_mod(fm("table=3,actions=goto_table:4")).ok());
}

TEST_CASE("loose and strict modify") {
  Bridge b("br0", nullptr);
  apply(b, "priority=10,ip,nw_dst=10.0.0.0/8,actions=output:1");
  apply(b, "priority=20,ip,nw_dst=10.1.0.0/16,actions=output:1");
  apply(b, "priority=30,ip,nw_dst=11.0.0.0/8,actions=output:1");
  apply(b, "table=1,priority=20,ip,nw_dst=10.2.0.0/16,actions=output:1");
  // Loose: rules at least as specific as ip,nw_dst=10/8, every table.
  CHECK(apply(b, "ip,nw_dst=10.0.0.0/8,actions=output:9", C::modify).modified == 3);
  int n9 = 0;
  for (const OfRule* r : b.dump(nullptr)) n9 += actions_of(r) == "output:9";
  CHECK(n9 == 3);
  // table=N limits it.
  CHECK(apply(b, "table=1,ip,actions=output:7", C::modify).modified == 1);
  // Strict: exact match and priority only (default priority 32768: none).
  CHECK(apply(b, "ip,nw_dst=10.0.0.0/8,actions=output:5", C::modify_strict).modified == 0);
  CHECK(apply(b, "priority=10,ip,nw_dst=10.0.0.0/8,actions=output:5", C::modify_strict).modified == 1);
  // Modify keeps counters, created time and timeouts; nothing added when no rule matches.
  CHECK(apply(b, "ip,nw_dst=12.0.0.0/8,actions=output:5", C::modify).modified == 0);
  CHECK(b.n_rules() == 4);
}

TEST_CASE("modify keeps counters, creation time and cookie unless told") {
  Bridge b("br0", nullptr);
  apply(b, "priority=10,cookie=0x5,idle_timeout=60,ip,actions=output:1");
  OfRule* r = const_cast<OfRule*>(b.dump(nullptr)[0]);
  r->add_stats(7, 700, hal::now_ns());
  const uint64_t created = r->created_ns;
  apply(b, "ip,actions=output:2", C::modify);
  const OfRule* n = b.dump(nullptr)[0];
  CHECK(n->packets.load() == 7);
  CHECK(n->bytes.load() == 700);
  CHECK(n->created_ns == created);
  CHECK(n->idle_timeout == 60);
  CHECK(n->cookie == 0x5);
  CHECK(n->modified_ns >= created);
  // cookie=V without a mask sets the cookie.
  apply(b, "cookie=0x9,ip,actions=output:3", C::modify);
  CHECK(b.dump(nullptr)[0]->cookie == 0x9);
}

TEST_CASE("packets credited to a modified rule after the modify reach its successor") {
  // A ukey keeps the old rule until the revalidator re-translates it: the
  // stats it pushes then (the megaflow's packets before and after the
  // modify) must land on the rule dump-flows shows, not on the replaced one.
  datapath::Rcu rcu;
  const unsigned slot = rcu.register_slot();
  rcu.online(slot);  // a reader that never quiesces: no rule is freed
  Bridge b("br0", &rcu);
  apply(b, "priority=10,ip,actions=output:1");
  OfRule* old = const_cast<OfRule*>(b.dump(nullptr)[0]);
  old->add_stats(7, 700, hal::now_ns());
  apply(b, "ip,actions=output:2", C::modify);
  const OfRule* mid = b.dump(nullptr)[0];
  REQUIRE(mid != old);
  CHECK(mid->packets.load() == 7);
  old->add_stats(5, 500, hal::now_ns());  // the revalidator's pending delta, pushed late
  CHECK(mid->packets.load() == 12);
  CHECK(mid->bytes.load() == 1200);
  // Twice: the chain is followed; an add over the identical rule carries too.
  apply(b, "ip,actions=output:3", C::modify);
  apply(b, "priority=10,ip,actions=output:4");
  old->add_stats(1, 100, hal::now_ns());
  const_cast<OfRule*>(mid)->add_stats(1, 100, hal::now_ns());
  CHECK(b.dump(nullptr)[0]->packets.load() == 14);
  CHECK(b.dump(nullptr)[0]->bytes.load() == 1400);
  // reset_counts: the new rule starts from 0, the old one's late adds stay behind.
  const OfRule* last = b.dump(nullptr)[0];
  apply(b, "priority=10,ip,reset_counts,actions=output:5");
  const_cast<OfRule*>(last)->add_stats(3, 300, hal::now_ns());
  CHECK(b.dump(nullptr)[0]->packets.load() == 0);
}

TEST_CASE("cookie filters") {
  Bridge b("br0", nullptr);
  apply(b, "priority=1,cookie=0x10,ip,actions=drop");
  apply(b, "priority=2,cookie=0x11,ip,actions=drop");
  apply(b, "priority=3,cookie=0x20,ip,actions=drop");
  // Modify only cookie 0x1X.
  CHECK(apply(b, "cookie=0x10/0xf0,actions=output:4", C::modify).modified == 2);
  // Delete needs a mask.
  CHECK_FALSE(b.flow_mod(fm("cookie=0x20", C::del)).ok());
  CHECK(apply(b, "cookie=0x20/-1", C::del).deleted == 1);
  CHECK(b.n_rules() == 2);
  // Add refuses a mask.
  CHECK_FALSE(b.flow_mod(fm("cookie=0x1/0x1,actions=drop")).ok());
}

TEST_CASE("delete: loose, strict, out_port, every table") {
  Bridge b("br0", nullptr);
  apply(b, "priority=10,ip,nw_dst=10.0.0.0/8,actions=output:1");
  apply(b, "priority=20,ip,nw_dst=10.1.0.0/16,actions=output:2");
  apply(b, "table=5,priority=20,ip,nw_dst=10.3.0.0/16,actions=output:2");
  apply(b, "priority=20,arp,actions=NORMAL");
  // out_port filter.
  FlowMod d = fm("ip", C::del);
  d.out_port = 2;
  auto r = b.flow_mod(d);
  REQUIRE(r.ok());
  CHECK(r->deleted == 2);  // tables 0 and 5
  // strict needs the priority.
  CHECK(apply(b, "ip,nw_dst=10.0.0.0/8", C::del_strict).deleted == 0);
  CHECK(apply(b, "priority=10,ip,nw_dst=10.0.0.0/8", C::del_strict).deleted == 1);
  // Empty: everything, every table.
  apply(b, "table=7,actions=drop");
  CHECK(apply(b, "", C::del).deleted == 2);
  CHECK(b.n_rules() == 0);
}

TEST_CASE("bundle: all or nothing, one version") {
  Bridge b("br0", nullptr);
  apply(b, "priority=1,actions=output:1");
  const Version v0 = b.version();
  std::vector<FlowMod> ok = {fm("priority=2,ip,actions=output:2"), fm("table=1,priority=3,actions=output:3"),
                             fm("priority=1", C::del_strict)};
  auto r = b.bundle(ok);
  REQUIRE(r.ok());
  CHECK(r->added == 2);
  CHECK(r->deleted == 1);
  CHECK(b.version() == v0 + 1);
  CHECK(b.n_rules() == 2);

  std::vector<FlowMod> bad = {fm("priority=5,ip,actions=output:5"), fm("priority=2,ip,actions=output:6"),
                              fm("priority=6,actions=set_field:80->tcp_dst")};  // third: no L4
  size_t failed = 99;
  auto e = b.bundle(bad, &failed);
  CHECK_FALSE(e.ok());
  CHECK(failed == 2);
  CHECK(b.version() == v0 + 1);
  CHECK(b.n_rules() == 2);
  auto rules = b.dump(nullptr);
  REQUIRE(rules.size() == 2);
  CHECK(actions_of(rules[0]) == "output:2");  // the replace in the failed bundle was undone
  CHECK(lookup(b, pkt("ip,nw_dst=1.2.3.4"))->priority == 2);
  // A later flow-mod of a bundle sees the earlier ones.
  std::vector<FlowMod> chain = {fm("priority=9,tcp,actions=output:1"), fm("tcp,actions=output:8", C::modify)};
  auto c = b.bundle(chain);
  REQUIRE(c.ok());
  CHECK(actions_of(lookup(b, pkt("tcp,tp_dst=1"))) == "output:8");
  CHECK(b.n_rules() == 3);
}

TEST_CASE("readers at an old version keep the old rule set until the grace period") {
  datapath::Rcu rcu;
  const unsigned slot = rcu.register_slot();
  rcu.online(slot);
  Bridge b("br0", &rcu);
  apply(b, "priority=10,ip,actions=output:1");
  const Version old = b.version();
  apply(b, "priority=10,ip,actions=output:2");  // replace
  apply(b, "priority=20,ip,nw_dst=10.0.0.0/8,actions=output:3");
  const flow::FlowKey k = pkt("ip,nw_dst=10.1.1.1");
  CHECK(actions_of(lookup(b, k, 0, old)) == "output:1");
  CHECK(actions_of(lookup(b, k)) == "output:3");
  // The reader has not quiesced: reclaiming frees nothing yet.
  rcu.reclaim();
  b.reclaim();
  CHECK(actions_of(lookup(b, k, 0, old)) == "output:1");
  // Reader quiesces twice (erase, then free): the old rule is gone for good.
  rcu.quiesce(slot);
  rcu.reclaim();
  b.reclaim();
  rcu.quiesce(slot);
  rcu.reclaim();
  CHECK(b.table(0).n_rules() == 2);
  CHECK(actions_of(lookup(b, k)) == "output:3");
  rcu.offline(slot);
  rcu.synchronize();
}

TEST_CASE("idle and hard timeouts") {
  Bridge b("br0", nullptr);
  apply(b, "priority=1,idle_timeout=10,ip,actions=drop");
  apply(b, "priority=2,hard_timeout=20,ip,actions=drop");
  apply(b, "priority=3,ip,actions=drop");
  const uint64_t t0 = b.dump(nullptr)[0]->created_ns;
  CHECK(b.expire(t0 + 5'000'000'000ull) == 0);
  // A packet at t0+8s keeps the idle rule alive past t0+10s.
  for (const OfRule* r : b.dump(nullptr))
    if (r->priority == 1) const_cast<OfRule*>(r)->add_stats(1, 64, t0 + 8'000'000'000ull);
  CHECK(b.expire(t0 + 12'000'000'000ull) == 0);
  CHECK(b.expire(t0 + 19'000'000'000ull) == 1);  // idle: 11 s since the packet
  CHECK(b.expire(t0 + 21'000'000'000ull) == 1);  // hard
  CHECK(b.n_rules() == 1);
}

TEST_CASE("check_overlap and the rule limit message") {
  Bridge b("br0", nullptr);
  apply(b, "priority=5,ip,nw_dst=10.0.0.0/8,actions=drop");
  auto r = b.flow_mod(fm("priority=5,check_overlap,ip,nw_src=1.2.3.4,actions=drop"));
  CHECK_FALSE(r.ok());
  CHECK(b.flow_mod(fm("priority=5,check_overlap,arp,actions=drop")).ok());
  CHECK(Bridge::kMaxRules == 1'000'000);
}

TEST_CASE("ports: numbers, names, VLANs") {
  Bridge b("br0", nullptr);
  PortConfig p;
  p.name = "p0";
  p.dp_port = 1;
  REQUIRE(b.add_port(p).ok());
  CHECK(b.ports()->by_name("p0")->ofport == 1);
  p.name = "p1";
  p.dp_port = 2;
  p.ofport = 5;
  REQUIRE(b.add_port(p).ok());
  p.name = "p2";
  p.dp_port = 3;
  p.ofport = 5;
  CHECK_FALSE(b.add_port(p).ok());  // number taken
  p.ofport = 0;
  REQUIRE(b.add_port(p).ok());
  CHECK(b.ports()->by_name("p2")->ofport == 2);
  auto before = b.ports();
  REQUIRE(b.set_port_vlan("p1", VlanMode::access, 10, {}).ok());
  CHECK(before->by_name("p1")->vlan_mode == VlanMode::trunk);  // old snapshot unchanged
  CHECK(b.ports()->by_ofport(5)->tag == 10);
  REQUIRE(b.del_port("p0").ok());
  CHECK(b.ports()->by_dp_port(1) == nullptr);
  CHECK_FALSE(b.del_port("p0").ok());
}

TEST_CASE("dump-flows text follows ovs-ofctl") {
  Bridge b("br0", nullptr);
  apply(b, "priority=100,ip,nw_dst=10.0.0.0/8,actions=output:2");
  apply(b, "table=3,cookie=0x1f,idle_timeout=10,hard_timeout=20,importance=4,send_flow_rem,tcp,tp_dst=80,actions=NORMAL");
  apply(b, "actions=drop");
  auto rules = b.dump(nullptr);
  REQUIRE(rules.size() == 3);
  // Each rule's times are relative to its own creation (rules are added at
  // different moments: never mix two rules' clocks).
  CHECK(format_flow_stats(*rules[1], rules[1]->created_ns + 1'234'000'000) ==
        "cookie=0x0, duration=1.234s, table=0, n_packets=0, n_bytes=0, idle_age=1, "
        "priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2");
  CHECK(format_flow_stats(*rules[0], rules[0]->created_ns + 2'000'000'000) ==
        "cookie=0x0, duration=2s, table=0, n_packets=0, n_bytes=0, idle_age=2, actions=drop");
  const OfRule* r3 = rules[2];
  CHECK(format_flow_stats(*r3, r3->created_ns + 5'000'000) ==
        "cookie=0x1f, duration=0.005s, table=3, n_packets=0, n_bytes=0, idle_timeout=10, hard_timeout=20, "
        "send_flow_rem importance=4, idle_age=0, tcp,tp_dst=80 actions=NORMAL");
  // --no-stats: no cookie when 0, no duration, no table 0, no counters or ages.
  CHECK(format_flow_stats(*rules[1], rules[1]->created_ns + 1'234'000'000, false) ==
        "priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2");
  CHECK(format_flow_stats(*r3, r3->created_ns + 5'000'000, false) ==
        "cookie=0x1f, table=3, idle_timeout=10, hard_timeout=20, send_flow_rem importance=4, tcp,tp_dst=80 "
        "actions=NORMAL");
  // After a modify, hard_age (since the modify) differs from duration.
  apply(b, "table=3,tcp,actions=drop", C::modify);
  const OfRule* m = b.dump(nullptr, 3)[0];
  const_cast<OfRule*>(m)->modified_ns = m->created_ns + 3'000'000'000ull;
  CHECK(format_flow_stats(*m, m->created_ns + 5'000'000'000ull).find("idle_age=5, hard_age=2, tcp") !=
        std::string::npos);
}

TEST_CASE("dump-flows text: the actions and match as ovs-ofctl's OpenFlow 1.0 reply carries them") {
  // Captured from Open vSwitch 3.1 (rules added with -O OpenFlow13, dumped
  // with plain `ovs-ofctl dump-flows`): goto_table travels as resubmit,
  // clear_actions / write_actions / push_vlan are not carried at all, a
  // set_field into vlan_tci travels as mod_vlan_vid + mod_vlan_pcp; a flow
  // that pushes a tag went in OpenFlow 1.3, whose match has no "no tag, any
  // PCP" but VLAN_VID only: vlan_tci=0 comes back as 0x0000/0x1fff.
  Bridge b("br0", nullptr);
  auto text = [&](const std::string& flow, uint16_t prio) {
    apply(b, flow);
    for (const OfRule* r : b.dump(nullptr))
      if (r->priority == prio) {
        std::string s = format_flow_stats(*r, r->created_ns);
        return s.substr(s.find("idle_age=0, ") + 12);
      }
    return std::string("(none)");
  };
  CHECK(text("priority=1,actions=goto_table:2", 1) == "priority=1 actions=resubmit(,2)");
  CHECK(text("priority=2,actions=output:1,write_actions(output:2),goto_table:3", 2) ==
        "priority=2 actions=output:1,resubmit(,3)");
  CHECK(text("priority=3,actions=clear_actions", 3) == "priority=3 actions=drop");
  CHECK(text("priority=4,actions=write_actions(output:2)", 4) == "priority=4 actions=drop");
  CHECK(text("priority=10,ip,vlan_tci=0,actions=push_vlan:0x8100,set_field:4102->vlan_vid,output:2", 10) ==
        "priority=10,ip,vlan_tci=0x0000/0x1fff actions=mod_vlan_vid:6,output:2");
  CHECK(text("priority=11,udp,actions=push_vlan:0x8100,set_field:0x3005->vlan_tci,output:3", 11) ==
        "priority=11,udp actions=mod_vlan_vid:5,mod_vlan_pcp:1,output:3");
  CHECK(text("priority=12,vlan_tci=0,actions=output:4", 12) ==
        "priority=12,vlan_tci=0x0000 actions=output:4");
  CHECK(text("priority=13,sctp,actions=set_field:5->sctp_src,mod_tp_dst:7,output:2", 13) ==
        "priority=13,sctp actions=load:0x5->OXM_OF_SCTP_SRC[],mod_tp_dst:7,output:2");
  CHECK(text("priority=14,sctp,actions=push_vlan:0x8100,mod_tp_src:9,output:3", 14) ==
        "priority=14,sctp actions=load:0x9->OXM_OF_SCTP_SRC[],output:3");
  // The rule itself keeps what it was given (running-config replays it).
  for (const OfRule* r : b.dump(nullptr))
    if (r->priority == 2)
      CHECK(flow::format_of_actions(r->actions) == "output:1,write_actions(output:2),goto_table:3");
}

TEST_CASE("Ofproto: controller queue is bounded and counts drops; bridges; knobs") {
  datapath::Datapath dp(datapath::DatapathConfig{});
  Ofproto of(dp);
  PacketIn pi;
  pi.bridge = "br0";
  pi.data = {1, 2, 3};
  for (size_t i = 0; i < Ofproto::kControllerQueueCapacity + 5; ++i) of.push_packet_in(pi);
  CHECK(of.controller_stats().dropped == 5);
  CHECK(of.controller_stats().depth == Ofproto::kControllerQueueCapacity);
  CHECK(of.packet_ins("br1", true).empty());
  CHECK(of.packet_ins("br0", false).size() == Ofproto::kControllerQueueCapacity);
  CHECK(of.packet_ins("br0", true).size() == Ofproto::kControllerQueueCapacity);
  CHECK(of.controller_stats().depth == 0);

  CHECK(of.flow_limit() == 200'000);
  CHECK(of.max_idle_ms() == 10'000);
  CHECK(of.revalidate_interval_ms() == 500);
  CHECK_FALSE(of.set_flow_limit(0).ok());
  CHECK(of.set_flow_limit(1000).ok());
  CHECK(of.flow_limit() == 1000);

  REQUIRE(of.add_bridge("br0").ok());
  CHECK_FALSE(of.add_bridge("br0").ok());
  CHECK_FALSE(of.add_bridge("bad name").ok());
  REQUIRE(of.add_bridge("a-br").ok());
  REQUIRE(of.bridges().size() == 2);
  CHECK(of.bridges()[0]->name() == "a-br");
  CHECK_FALSE(of.add_port("br0", "nope").ok());
  Bridge* b = of.find_bridge("br0");
  REQUIRE(b);
  REQUIRE(b->flow_mod(fm("priority=1,actions=drop")).ok());
  REQUIRE(of.del_bridge("br0").ok());
  CHECK(of.find_bridge("br0") == nullptr);
  of.reclaim();  // no reader slots: the bridge and its rules are freed
  CHECK(of.port_owner(1).bridge == nullptr);
}

TEST_CASE(
    "Ofproto: mtu_request goes with the port, is undone when the bridge refuses it, reset by del-port") {
  auto be = hal::make_sim_backend({.buffers = 64, .jumbo_buffers = 0});
  REQUIRE(be.ok());
  datapath::Datapath dp(datapath::DatapathConfig{});
  for (const char* n : {"p0", "p1"}) {
    auto spec = hal::parse_port_spec(n, "null");
    REQUIRE(spec.ok());
    auto port = be.value()->open_port(spec.value(), 1, 1);
    REQUIRE(port.ok());
    REQUIRE(dp.add_port(std::move(port).value()).ok());
  }
  Ofproto of(dp);
  REQUIRE(of.add_bridge("br0").ok());
  Bridge* b = of.find_bridge("br0");
  PortOptions o;
  o.mtu_request = 9216;
  o.ofport = 5;
  REQUIRE(of.add_port("br0", "p0", o).ok());
  CHECK(dp.find_port("p0")->mtu() == 9216);
  CHECK(b->ports()->by_name("p0")->mtu_request == 9216u);

  // p1 asks for OpenFlow port 5, which p0 has: refused, and its MTU stays.
  o.mtu_request = 4000;
  CHECK_FALSE(of.add_port("br0", "p1", o).ok());
  CHECK(dp.find_port("p1")->mtu() == 1500);
  o.ofport.reset();
  o.mtu_request = 9217;
  Status st = of.add_port("br0", "p1", o);
  CHECK(st.message() == "mtu_request 9217 is not in keel's range 68 to 9216 (inclusive)");
  CHECK(b->ports()->by_name("p1") == nullptr);
  CHECK(dp.find_port("p1")->mtu() == 1500);

  // set interface: only ports in a bridge; [] keeps the MTU (as OVS).
  CHECK(of.set_mtu_request("p1", 9000).code() == Errc::not_found);
  REQUIRE(of.set_mtu_request("p0", 2000).ok());
  CHECK(dp.find_port("p0")->mtu() == 2000);
  CHECK(b->ports()->by_name("p0")->mtu_request == 2000u);
  CHECK_FALSE(of.set_mtu_request("p0", 20).ok());
  CHECK(dp.find_port("p0")->mtu() == 2000);
  CHECK(b->ports()->by_name("p0")->mtu_request == 2000u);
  REQUIRE(of.set_mtu_request("p0", std::nullopt).ok());
  CHECK(dp.find_port("p0")->mtu() == 2000);
  CHECK_FALSE(b->ports()->by_name("p0")->mtu_request.has_value());

  // Leaving the bridge gives the default back.
  REQUIRE(of.del_port("br0", "p0").ok());
  CHECK(dp.find_port("p0")->mtu() == 1500);
  o.mtu_request = 9000;
  REQUIRE(of.add_port("br0", "p1", o).ok());
  REQUIRE(of.del_bridge("br0").ok());
  CHECK(dp.find_port("p1")->mtu() == 1500);
  of.reclaim();
}

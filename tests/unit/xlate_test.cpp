// Translation (ofproto/xlate.h): datapath actions per OpenFlow action, the
// packet's new fields, NORMAL (learning, flooding, VLAN access/trunk,
// moves, aging), resubmit limits, the megaflow masks (a /8 rule costs 8
// bits of nw_dst; a miss on L4 costs nothing of L4; resubmits accumulate),
// the controller userdata, ofproto/trace's report, and MacLearning itself;
// the overlap rule the revalidator applies to a flow-mod (xlate_deps.h:
// which flow-mods may affect which megaflows, across tables, resubmits,
// NORMAL and bridges), each case checked for soundness by translating again.
#include "ofproto/xlate.h"

#include <doctest/doctest.h>

#include <bit>
#include <string>
#include <vector>

#include "flow/dp_actions.h"
#include "flow/flow_text.h"
#include "flow/of_actions.h"
#include "flow/of_match_syntax.h"
#include "ofproto/bridge.h"
#include "ofproto/mac_learning.h"
#include "ofproto/xlate_deps.h"

using namespace keel;
using namespace keel::ofproto;
using keel::flow::FlowKey;
using keel::flow::text::hton16;
using keel::flow::text::hton32;
using keel::flow::text::ntoh32;

namespace {

constexpr uint64_t kSec = 1'000'000'000ull;

// A bridge with ports p1..p4: OpenFlow port N is datapath port 10+N, so the
// tests see the mapping both ways.
struct Br {
  Bridge br{"br0", nullptr};
  explicit Br(unsigned n = 4) {
    for (unsigned i = 1; i <= n; ++i) {
      PortConfig p;
      p.name = "p" + std::to_string(i);
      p.ofport = i;
      p.dp_port = static_cast<uint16_t>(10 + i);
      REQUIRE(br.add_port(p).ok());
    }
  }
  void flow(const std::string& line) {
    auto f = flow::parse_of_flow(line);
    REQUIRE_MESSAGE(f.ok(), f.status().message());
    auto a = flow::parse_of_actions(f->actions, {}, f->actions_column);
    REQUIRE_MESSAGE(a.ok(), a.status().message());
    FlowMod fm;
    fm.command = FlowMod::Command::add;
    fm.flow = f.value();
    fm.actions = a.value();
    auto r = br.flow_mod(fm);
    REQUIRE_MESSAGE(r.ok(), r.status().message());
  }
  void vlan(const std::string& port, VlanMode m, uint16_t tag, std::vector<uint16_t> trunks = {}) {
    REQUIRE(br.set_port_vlan(port, m, tag, std::move(trunks)).ok());
  }
  // Translates a key given in match syntax (in_port = *datapath* port).
  XlateOut x(const std::string& key, uint64_t now = 0, bool learn = true, std::string* trace = nullptr) {
    FlowKey k = pkt(key);
    XlateIn in{br, k, br.version(), now, learn, false, trace};
    auto r = xlate(in);
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    return r.value();
  }
  static FlowKey pkt(const std::string& key) {
    auto m = flow::parse_of_match(key);
    REQUIRE_MESSAGE(m.ok(), m.status().message());
    FlowKey k = m->key;
    if (k.vlans[0].tci) k.vlans[0].tpid = hton16(0x8100);  // the parser's view of a tagged frame
    return k;
  }
};

std::string acts(const XlateOut& o) { return flow::format_dp_actions(o.actions); }

unsigned bits(uint32_t v) { return static_cast<unsigned>(std::popcount(v)); }

bool wc_l4_clear(const FlowKey& wc) { return wc.tp_src == 0 && wc.tp_dst == 0 && wc.tcp_flags == 0; }

std::optional<ControllerUserdata> userdata_of(const XlateOut& o) {
  flow::DpActionReader r(o.actions.bytes());
  while (!r.done()) {
    flow::DpAction a = r.next();
    if (a.type == flow::DpActionType::kUserspace) return decode_controller_userdata(a.userdata());
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("load, set_field and move into vlan_tci on an untagged packet push an 802.1Q tag, never TPID 0") {
  // Open vSwitch 3.1 (netdev-dummy, tx_pcap): load:0x100a->NXM_OF_VLAN_TCI[]
  // on an untagged frame sends 81 00 00 0a; load:1->NXM_OF_VLAN_TCI[12]
  // sends 81 00 00 00 (mf_set_flow_value()'s flow_fix_vlan_tpid()).
  Br b;
  b.flow("in_port=1,actions=load:0x100a->NXM_OF_VLAN_TCI[],output:2");
  b.flow("in_port=2,actions=load:1->NXM_OF_VLAN_TCI[12],output:1");
  b.flow("in_port=3,actions=load:0x3005->NXM_NX_REG0[0..15],move:NXM_NX_REG0[0..15]->NXM_OF_VLAN_TCI[],output:1");
  b.flow("in_port=4,actions=set_field:0x300a->vlan_tci,output:1");
  XlateOut o = b.x("ip,in_port=11");
  CHECK(acts(o) == "push_vlan(vid=10,pcp=0),12");
  CHECK(o.final_flow.vlans[0].tpid == hton16(0x8100));
  CHECK(acts(b.x("ip,in_port=12")) == "push_vlan(vid=0,pcp=0),11");
  CHECK(acts(b.x("ip,in_port=13")) == "push_vlan(vid=5,pcp=1),11");
  CHECK(acts(b.x("ip,in_port=14")) == "push_vlan(vid=10,pcp=1),11");
  // A tagged frame keeps its TPID: the tag is replaced, not doubled.
  CHECK(acts(b.x("ip,in_port=11,dl_vlan=5")) == "pop_vlan,push_vlan(vid=10,pcp=0),12");
}

TEST_CASE("output maps OpenFlow ports to datapath ports; the mask is OVS's base set") {
  Br b;
  b.flow("in_port=1,actions=output:2");
  XlateOut o = b.x("ip,in_port=11,nw_src=1.2.3.4,nw_dst=5.6.7.8");
  CHECK(acts(o) == "12");
  CHECK(o.in_ofport == 1);
  REQUIRE(o.rules.size() == 1);
  // recirc_id(0),in_port(11),eth_type(0x0800),ipv4(frag=no): nothing else.
  FlowKey want{};
  want.in_port = UINT32_MAX;
  want.recirc_id = UINT32_MAX;
  want.dl_type = 0xffff;
  want.nw_frag = flow::text::kFragMask;
  CHECK(o.wc == want);
  // Non-IP: no nw_frag.
  XlateOut arp = b.x("arp,in_port=11");
  CHECK(arp.wc.nw_frag == 0);
  CHECK(acts(arp) == "12");
}

TEST_CASE("unknown datapath in_port is an error; table miss drops") {
  Br b;
  FlowKey k = Br::pkt("ip,in_port=99");
  XlateIn in{b.br, k, b.br.version(), 0, true, false, nullptr};
  CHECK_FALSE(xlate(in).ok());
  XlateOut o = b.x("ip,in_port=11");
  CHECK(acts(o) == "drop");
  CHECK(o.rules.empty());
}

TEST_CASE("output to the input port is skipped; IN_PORT, FLOOD, ALL, LOCAL") {
  Br b;
  b.flow("in_port=1,actions=output:1");
  b.flow("in_port=2,actions=IN_PORT");
  b.flow("in_port=3,actions=FLOOD");
  b.flow("in_port=4,actions=LOCAL,ALL");
  CHECK(acts(b.x("ip,in_port=11")) == "drop");
  CHECK(acts(b.x("ip,in_port=12")) == "12");
  CHECK(acts(b.x("ip,in_port=13")) == "11,12,14");
  CHECK(acts(b.x("ip,in_port=14")) == "11,12,13");  // no local port: LOCAL outputs nothing
}

TEST_CASE("field writes are committed lazily, once, before the output") {
  Br b;
  b.flow("in_port=1,ip,actions=mod_dl_src:00:00:00:00:00:aa,mod_nw_dst:192.168.0.1,output:2,output:3");
  XlateOut o = b.x("ip,in_port=11,nw_src=1.1.1.1,nw_dst=2.2.2.2,nw_proto=17,nw_ttl=64");
  CHECK(acts(o) == "set(eth(src=00:00:00:00:00:aa)),set(ipv4(dst=192.168.0.1)),12,13");
  CHECK(o.final_flow.nw_dst == hton32(0xc0a80001));
  CHECK(o.final_flow.dl_src.b[5] == 0xaa);
  // What was written is in the mask, exactly.
  CHECK(o.wc.nw_dst == UINT32_MAX);
  CHECK(o.wc.nw_src == 0);
  CHECK(flow::text::is_ones(o.wc.dl_src));
  CHECK(flow::text::is_zero(o.wc.dl_dst));
}

TEST_CASE("a write after an output is committed before the next output only") {
  Br b;
  b.flow("in_port=1,tcp,actions=output:2,mod_tp_dst:8080,output:3,mod_nw_tos:32");
  XlateOut o = b.x("tcp,in_port=11,nw_dst=2.2.2.2,tp_dst=80");
  CHECK(acts(o) == "12,set(tcp(dst=8080)),13");
  CHECK(o.final_flow.nw_tos == 32);
}

TEST_CASE("VLAN actions: mod_vlan_vid pushes, strip_vlan pops, modify is pop+push") {
  Br b;
  b.flow("in_port=1,actions=mod_vlan_vid:10,output:2");
  b.flow("in_port=2,actions=strip_vlan,output:1");
  b.flow("in_port=3,actions=mod_vlan_vid:20,output:1");
  b.flow("in_port=4,actions=push_vlan:0x8100,mod_vlan_vid:30,mod_vlan_pcp:5,output:1");
  CHECK(acts(b.x("ip,in_port=11")) == "push_vlan(vid=10,pcp=0),12");
  XlateOut pop = b.x("ip,in_port=12,dl_vlan=7");
  CHECK(acts(pop) == "pop_vlan,11");
  CHECK((pop.wc.vlans[0].tci & hton16(0x1000)) != 0);
  CHECK(acts(b.x("ip,in_port=13,dl_vlan=7")) == "pop_vlan,push_vlan(vid=20,pcp=0),11");
  CHECK(acts(b.x("ip,in_port=14")) == "push_vlan(vid=30,pcp=5),11");
  // Untagged input: the VLAN bits the actions touched are not in the mask.
  CHECK(b.x("ip,in_port=11").wc.vlans[0].tci == 0);
}

TEST_CASE("load, set_field and move un-wildcard what they read and write") {
  Br b;
  b.flow("in_port=1,actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],output:2");
  b.flow("in_port=2,actions=load:0x5->NXM_NX_REG0[],resubmit(,1)");
  b.flow("table=1,reg0=5,actions=output:3");
  b.flow("in_port=3,ip,actions=set_field:10.9.9.9->ip_src,output:1");
  XlateOut mv = b.x("ip,in_port=11,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02");
  CHECK(acts(mv) == "set(eth(dst=00:00:00:00:00:01)),12");
  CHECK(flow::text::is_ones(mv.wc.dl_src));
  CHECK(flow::text::is_ones(mv.wc.dl_dst));

  XlateOut ld = b.x("ip,in_port=12");
  CHECK(acts(ld) == "13");
  CHECK(ld.rules.size() == 2);
  CHECK(ld.wc.regs[0] == 0);  // registers are not packet fields: never in a megaflow
  CHECK(ld.final_flow.regs[0] == 5);

  CHECK(acts(b.x("ip,in_port=13,nw_src=1.1.1.1,nw_proto=6")) == "set(ipv4(src=10.9.9.9)),11");
}

TEST_CASE("dec_ttl decrements; TTL 1 goes to the controller with invalid_ttl") {
  Br b;
  b.flow("in_port=1,ip,actions=dec_ttl,output:2");
  XlateOut o = b.x("ip,in_port=11,nw_proto=17,nw_ttl=64");
  CHECK(acts(o) == "set(ipv4(ttl=63)),12");
  CHECK(o.wc.nw_ttl == 0xff);
  XlateOut x = b.x("ip,in_port=11,nw_proto=17,nw_ttl=1");
  CHECK(x.to_controller);
  auto u = userdata_of(x);
  REQUIRE(u);
  CHECK(u->reason == flow::OfPacketInReason::invalid_ttl);
  CHECK(u->in_ofport == 1);
  CHECK(acts(x).find("12") == std::string::npos);  // the rest of the rule's actions are skipped
}

TEST_CASE("controller: userdata round trip with table, cookie and reason") {
  Br b;
  b.flow("cookie=0x1234,table=0,in_port=1,actions=resubmit(,5)");
  b.flow("cookie=0xabcd,table=5,actions=mod_dl_dst:00:00:00:00:00:09,controller(reason=no_match,max_len=128,id=7)");
  XlateOut o = b.x("ip,in_port=11");
  CHECK(o.to_controller);
  CHECK(acts(o).rfind("set(eth(dst=00:00:00:00:00:09)),userspace(pid=0,userdata(", 0) == 0);
  auto u = userdata_of(o);
  REQUIRE(u);
  CHECK(u->table_id == 5);
  CHECK(u->cookie == 0xabcd);
  CHECK(u->controller_id == 7);
  CHECK(u->max_len == 128);
  CHECK(u->reason == flow::OfPacketInReason::no_match);

  ControllerUserdata c{flow::OfPacketInReason::action, 3, 1, 65535, 0xfffe, UINT64_MAX};
  uint8_t raw[kControllerUserdataLen];
  encode_controller_userdata(c, raw);
  CHECK(decode_controller_userdata(raw) == c);
  CHECK_FALSE(decode_controller_userdata(std::span<const uint8_t>(raw, 8)));
}

TEST_CASE("mask: a /8 rule un-wildcards only the 8 prefix bits of nw_dst") {
  Br b;
  b.flow("priority=100,ip,nw_dst=10.0.0.0/8,actions=output:2");
  XlateOut hit = b.x("tcp,in_port=11,nw_src=1.2.3.4,nw_dst=10.1.2.3,tp_src=1000,tp_dst=80");
  CHECK(acts(hit) == "12");
  CHECK(ntoh32(hit.wc.nw_dst) == 0xff000000u);
  CHECK(hit.wc.nw_src == 0);
  CHECK(hit.wc.nw_proto == 0);
  CHECK(wc_l4_clear(hit.wc));
  // A miss costs at most the prefix's bits too.
  XlateOut miss = b.x("tcp,in_port=11,nw_dst=192.168.1.1,tp_dst=80");
  CHECK(acts(miss) == "drop");
  CHECK(bits(miss.wc.nw_dst) <= 8);
  CHECK(wc_l4_clear(miss.wc));
}

TEST_CASE("fragments: rules see no L4 ports, also in a first fragment (OVS's frag handling \"normal\")") {
  Br b;
  b.flow("priority=100,tcp,tp_dst=80,actions=output:2");
  b.flow("priority=90,tcp,tp_dst=0,actions=output:3");
  b.flow("priority=1,ip,actions=output:4");
  CHECK(acts(b.x("tcp,in_port=11,nw_dst=10.0.0.1,tp_dst=80")) == "12");
  CHECK(acts(b.x("tcp,in_port=11,nw_dst=10.0.0.1,tp_dst=80,ip_frag=first")) == "13");
  CHECK(acts(b.x("tcp,in_port=11,nw_dst=10.0.0.1,ip_frag=later")) == "13");
}

TEST_CASE("output:FIELD[] outputs to the port the field holds now (OVS's output_reg)") {
  Br b;
  b.flow("priority=1,actions=load:3->NXM_NX_REG0[0..15],output:NXM_NX_REG0[0..15]");
  CHECK(acts(b.x("udp,in_port=11")) == "13");
  // Above 0xffff: no output (OVS: "output port exceeds maximum").
  b.flow("priority=2,udp,actions=load:0x10002->NXM_NX_REG0[],output:NXM_NX_REG0[]");
  CHECK(acts(b.x("udp,in_port=11")) == "drop");
  // A packet field: its bits are consulted, so the megaflow matches them.
  b.flow("priority=3,tcp,actions=output:NXM_OF_TCP_DST[]");
  XlateOut t = b.x("tcp,in_port=11,tp_dst=2");
  CHECK(acts(t) == "12");
  CHECK(t.wc.tp_dst == 0xffff);
  CHECK(acts(b.x("tcp,in_port=11,tp_dst=1")) == "drop");  // port 1 is the input port: skipped
}

TEST_CASE("mask: a table miss on L4 does not un-wildcard L4") {
  Br b;
  b.flow("priority=100,tcp,nw_dst=10.0.0.1,tp_dst=80,actions=output:2");
  XlateOut o = b.x("tcp,in_port=11,nw_dst=10.0.0.2,tp_dst=80");
  CHECK(acts(o) == "drop");
  CHECK(wc_l4_clear(o.wc));
  XlateOut h = b.x("tcp,in_port=11,nw_dst=10.0.0.1,tp_dst=80");
  CHECK(acts(h) == "12");
  CHECK(h.wc.tp_dst == 0xffff);
}

TEST_CASE("mask: in_port-only rule, and resubmit chains accumulate") {
  Br b;
  b.flow("in_port=1,actions=resubmit(,1)");
  b.flow("table=1,priority=10,tcp,tp_dst=80,actions=resubmit(,2)");
  b.flow("table=2,priority=10,ip,nw_src=10.0.0.0/16,actions=output:2");
  XlateOut o = b.x("tcp,in_port=11,nw_src=10.0.5.5,tp_dst=80");
  CHECK(acts(o) == "12");
  CHECK(o.rules.size() == 3);
  CHECK(o.wc.in_port == UINT32_MAX);
  CHECK(o.wc.tp_dst == 0xffff);
  CHECK(o.wc.nw_proto == 0xff);
  CHECK(ntoh32(o.wc.nw_src) == 0xffff0000u);
  CHECK(o.wc.tp_src == 0);
}

TEST_CASE("resubmit(port,table) looks up with that in_port; resubmit loops stop at depth 64") {
  Br b;
  b.flow("in_port=1,actions=resubmit(3,1)");
  b.flow("table=1,in_port=3,actions=IN_PORT");  // IN_PORT is still the real input port
  CHECK(acts(b.x("ip,in_port=11")) == "11");

  b.flow("in_port=2,actions=output:3,resubmit(,0)");
  b.flow("in_port=3,actions=resubmit:3");
  std::string trace;
  XlateOut o = b.x("ip,in_port=13", 0, true, &trace);
  CHECK(o.error == XlateError::recursion_too_deep);
  CHECK(acts(o) == "drop");
  CHECK(trace.find("over max translation depth 64") != std::string::npos);
}

TEST_CASE("goto_table does not deepen: 254 tables chained translate") {
  Br b;
  for (int t = 0; t < 200; ++t)
    b.flow("table=" + std::to_string(t) + ",actions=goto_table:" + std::to_string(t + 1));
  b.flow("table=200,actions=output:2");
  XlateOut o = b.x("ip,in_port=11");
  CHECK(o.error == XlateError::ok);
  CHECK(acts(o) == "12");
}

TEST_CASE("NORMAL: learns, floods unknown, forwards known, drops hairpin") {
  Br b;
  b.flow("actions=NORMAL");
  const std::string a_to_b = "ip,in_port=11,dl_src=00:00:00:00:00:0a,dl_dst=00:00:00:00:00:0b";
  XlateOut o = b.x(a_to_b, 1 * kSec);
  CHECK(o.uses_normal);
  CHECK(o.mac_changed);
  CHECK(acts(o) == "12,13,14");
  CHECK(flow::text::is_ones(o.wc.dl_src));
  CHECK(flow::text::is_ones(o.wc.dl_dst));
  // b answers from p2: a is known, b gets learned.
  XlateOut back = b.x("ip,in_port=12,dl_src=00:00:00:00:00:0b,dl_dst=00:00:00:00:00:0a", 2 * kSec);
  CHECK(acts(back) == "11");
  CHECK(acts(b.x(a_to_b, 3 * kSec)) == "12");
  // Broadcast and multicast flood; multicast sources are not learned.
  CHECK(acts(b.x("ip,in_port=11,dl_src=00:00:00:00:00:0a,dl_dst=ff:ff:ff:ff:ff:ff", 3 * kSec)) == "12,13,14");
  XlateOut mc = b.x("ip,in_port=11,dl_src=01:00:5e:00:00:01,dl_dst=00:00:00:00:00:77", 3 * kSec);
  CHECK_FALSE(mc.mac_changed);
  // Destination learned on the input port: dropped.
  CHECK(acts(b.x("ip,in_port=12,dl_src=00:00:00:00:00:0c,dl_dst=00:00:00:00:00:0b", 3 * kSec)) == "drop");
  // Reserved multicast (STP): dropped.
  CHECK(acts(b.x("ip,in_port=11,dl_src=00:00:00:00:00:0a,dl_dst=01:80:c2:00:00:00", 3 * kSec)) == "drop");
}

TEST_CASE("NORMAL: moves, aging, and no learning when may_learn is off") {
  Br b;
  b.flow("actions=NORMAL");
  b.x("ip,in_port=11,dl_src=00:00:00:00:00:0a,dl_dst=ff:ff:ff:ff:ff:ff", 0);
  const std::string to_a = "ip,in_port=13,dl_src=00:00:00:00:00:0c,dl_dst=00:00:00:00:00:0a";
  CHECK(acts(b.x(to_a, kSec)) == "11");
  // a moves to p2.
  uint64_t gen = b.br.mac().generation();
  XlateOut mv = b.x("ip,in_port=12,dl_src=00:00:00:00:00:0a,dl_dst=ff:ff:ff:ff:ff:ff", 2 * kSec);
  CHECK(mv.mac_changed);
  CHECK(b.br.mac().generation() > gen);
  CHECK(b.br.mac().stats().moved == 1);
  CHECK(acts(b.x(to_a, 3 * kSec)) == "12");
  // After the aging time (300 s) a is unknown again: flood.
  CHECK(acts(b.x(to_a, 303 * kSec, false)) == "11,12,14");
  // may_learn=false (trace, revalidation) learns nothing.
  XlateOut nl = b.x("ip,in_port=14,dl_src=00:00:00:00:00:0d,dl_dst=ff:ff:ff:ff:ff:ff", 4 * kSec, false);
  CHECK_FALSE(nl.mac_changed);
  CHECK_FALSE(b.br.mac().lookup(0, flow::EthAddr{{0, 0, 0, 0, 0, 0x0d}}, 4 * kSec));
}

TEST_CASE("NORMAL: access and trunk ports tag and untag per output port") {
  Br b;
  b.flow("actions=NORMAL");
  b.vlan("p1", VlanMode::access, 10);
  b.vlan("p2", VlanMode::access, 10);
  b.vlan("p3", VlanMode::trunk, 0, {10, 20});
  b.vlan("p4", VlanMode::access, 20);
  // Untagged on access VLAN 10: p2 untagged, p3 tagged 10, not p4.
  XlateOut o = b.x("ip,in_port=11,dl_src=00:00:00:00:00:0a,dl_dst=ff:ff:ff:ff:ff:ff");
  CHECK(acts(o) == "12,push_vlan(vid=10,pcp=0),13");
  // Tagged frames on an access port are dropped.
  CHECK(acts(b.x("ip,in_port=11,dl_vlan=10,dl_src=00:00:00:00:00:0a,dl_dst=ff:ff:ff:ff:ff:ff")) == "drop");
  // Tagged 20 on the trunk: to p4 untagged.
  CHECK(acts(b.x("ip,in_port=13,dl_vlan=20,dl_src=00:00:00:00:00:0c,dl_dst=ff:ff:ff:ff:ff:ff")) == "pop_vlan,14");
  // VLAN 30 is not trunked on p3: dropped; untagged (VLAN 0) neither.
  CHECK(acts(b.x("ip,in_port=13,dl_vlan=30,dl_src=00:00:00:00:00:0c,dl_dst=ff:ff:ff:ff:ff:ff")) == "drop");
  CHECK(acts(b.x("ip,in_port=13,dl_src=00:00:00:00:00:0c,dl_dst=ff:ff:ff:ff:ff:ff")) == "drop");
  // Learned per VLAN: 0a is known in VLAN 10 only.
  CHECK(acts(b.x("ip,in_port=13,dl_vlan=10,dl_src=00:00:00:00:00:0c,dl_dst=00:00:00:00:00:0a")) == "pop_vlan,11");
  CHECK(acts(b.x("ip,in_port=13,dl_vlan=20,dl_src=00:00:00:00:00:0c,dl_dst=00:00:00:00:00:0a")) == "pop_vlan,14");
  // The VID is in the mask of a tagged packet (with CFI); popping the tag
  // makes the whole tag exact (OVS's commit_vlan_action).
  XlateOut t = b.x("ip,in_port=13,dl_vlan=20,dl_src=00:00:00:00:00:0c,dl_dst=00:00:00:00:00:0a");
  CHECK(t.wc.vlans[0].tci == 0xffff);
  b.vlan("p2", VlanMode::trunk, 0);
  XlateOut tt = b.x("ip,in_port=13,dl_vlan=10,dl_src=00:00:00:00:00:0c,dl_dst=ff:ff:ff:ff:ff:ff");
  CHECK(acts(tt) == "pop_vlan,11,push_vlan(vid=10,pcp=0),12");
}

TEST_CASE("NORMAL: native-untagged carries its VLAN untagged") {
  Br b;
  b.flow("actions=NORMAL");
  b.vlan("p1", VlanMode::native_untagged, 5, {7});
  b.vlan("p2", VlanMode::trunk, 0);
  b.vlan("p3", VlanMode::native_tagged, 5);
  b.vlan("p4", VlanMode::access, 7);
  // Untagged on p1 = VLAN 5: trunk p2 tagged, p3 tagged (native-tagged), not p4.
  CHECK(acts(b.x("ip,in_port=11,dl_src=00:00:00:00:00:0a,dl_dst=ff:ff:ff:ff:ff:ff")) ==
        "push_vlan(vid=5,pcp=0),12,13");
  // VLAN 5 tagged from p2: p1 untagged, p3 tagged.
  CHECK(acts(b.x("ip,in_port=12,dl_vlan=5,dl_src=00:00:00:00:00:0b,dl_dst=ff:ff:ff:ff:ff:ff")) ==
        "pop_vlan,11,push_vlan(vid=5,pcp=0),13");
}

TEST_CASE("trace: the /8 rule's report and Megaflow line, as ofproto/trace prints them") {
  Br b;
  b.flow("priority=100,ip,nw_dst=10.0.0.0/8,actions=output:2");
  FlowKey k = Br::pkt("ip,in_port=1,nw_dst=10.1.2.3");
  std::string t = xlate_trace(b.br, k, 0);
  INFO(t);
  CHECK(t.find("bridge(\"br0\")\n-------------\n 0. ip,nw_dst=10.0.0.0/8, priority 100\n    output:2\n") !=
        std::string::npos);
  CHECK(t.find("\nFinal flow: unchanged\n") != std::string::npos);
  CHECK(t.find("\nMegaflow: recirc_id=0,eth,ip,in_port=1,nw_dst=10.0.0.0/8,nw_frag=no\n") != std::string::npos);
  CHECK(t.find("\nDatapath actions: 12\n") != std::string::npos);
  CHECK(t.rfind("Flow: ip,in_port=1,", 0) == 0);
}

TEST_CASE("trace: nested resubmits indent like OVS and learn nothing") {
  Br b;
  b.flow("in_port=1,actions=resubmit(,1),output:3");
  b.flow("table=1,actions=NORMAL");
  FlowKey k = Br::pkt("ip,in_port=1,dl_src=00:00:00:00:00:0a,dl_dst=00:00:00:00:00:0b");
  std::string t = xlate_trace(b.br, k, 0);
  INFO(t);
  CHECK(t.find(" 0. in_port=1, priority 32768\n    resubmit(,1)\n     1. priority 32768\n"
               "            NORMAL\n             -> no learned MAC for destination, flooding\n    output:3\n") !=
        std::string::npos);
  CHECK(b.br.mac().entries().empty());
}

TEST_CASE("MacLearning: LRU eviction, moves, flush, expiry, generation") {
  MacLearning ml(10, 2);
  auto mac = [](uint8_t n) { return flow::EthAddr{{0, 0, 0, 0, 0, n}}; };
  CHECK(ml.learn(1, mac(1), 1, 0));
  CHECK(ml.learn(1, mac(2), 2, 1 * kSec));
  CHECK_FALSE(ml.learn(1, mac(1), 1, 2 * kSec));  // refresh: 1 is now the most recent
  CHECK(ml.learn(1, mac(3), 3, 3 * kSec));         // full: evicts 2, the least recent
  CHECK_FALSE(ml.lookup(1, mac(2), 3 * kSec));
  CHECK(ml.lookup(1, mac(1), 3 * kSec) == 1u);
  CHECK(ml.stats().evicted == 1);
  CHECK_FALSE(ml.lookup(2, mac(1), 3 * kSec));  // per VLAN
  uint64_t g = ml.generation();
  CHECK(ml.learn(1, mac(1), 4, 4 * kSec));  // move
  CHECK(ml.generation() > g);
  CHECK(ml.stats().moved == 1);
  CHECK_FALSE(ml.learn(1, flow::EthAddr{{1, 0, 0, 0, 0, 1}}, 1, 0));  // multicast source
  // Aging: 3 was learned at 3 s, 1 at 4 s; at 13.5 s only 3 has aged.
  CHECK_FALSE(ml.lookup(1, mac(3), 13 * kSec + kSec / 2));
  CHECK(ml.expire(13 * kSec + kSec / 2) == 1);
  CHECK(ml.entries().size() == 1);
  CHECK(ml.stats().expired == 1);
  ml.flush_port(4);
  CHECK(ml.entries().empty());
  ml.learn(3, mac(9), 2, 0);
  ml.learn(1, mac(8), 2, 0);
  ml.set_max_entries(5);
  auto e = ml.entries();
  REQUIRE(e.size() == 2);
  CHECK(e[0].vlan == 1);  // sorted by port, VLAN, MAC
  ml.flush();
  CHECK(ml.entries().empty());
}

// The OpenFlow 1.1+ action set, compared with Open vSwitch 3.1 (the same
// rules through ovs-vswitchd with dummy ports, bytes out of tx_pcap).
TEST_CASE("action set: runs at the end of the pipeline, after apply-actions, with later set_fields visible") {
  Br b;
  b.flow("in_port=1,ip,actions=output:3,write_actions(output:2),goto_table:1");
  b.flow("table=1,ip,actions=mod_nw_dst:9.9.9.9,mod_dl_src:00:00:00:00:00:09");
  XlateOut o = b.x("udp,in_port=11,nw_dst=2.2.2.2");
  CHECK(acts(o) == "13,set(eth(src=00:00:00:00:00:09)),set(ipv4(dst=9.9.9.9)),12");
  REQUIRE(o.rules.size() == 2);
}

TEST_CASE("action set: OpenFlow 1.1 order, one action per kind, a later write replaces") {
  Br b;
  b.flow("in_port=1,ip,actions=write_actions(output:3,mod_dl_src:00:00:00:00:00:01,push_vlan:0x8100,"
         "set_field:4101->vlan_vid,output:2,dec_ttl)");
  b.flow("in_port=2,ip,actions=write_actions(output:2,mod_dl_src:00:00:00:00:00:01),goto_table:1");
  b.flow("table=1,in_port=2,ip,actions=write_actions(output:3,mod_dl_src:00:00:00:00:00:02)");
  b.flow("in_port=3,actions=write_actions(push_vlan:0x8100,strip_vlan,output:2)");
  // push_vlan before the set of vlan_vid, dec_ttl before the sets; output:2 wins.
  CHECK(acts(b.x("udp,in_port=11,nw_ttl=64")) ==
        "set(eth(src=00:00:00:00:00:01)),set(ipv4(ttl=63)),push_vlan(vid=5,pcp=0),12");
  CHECK(acts(b.x("udp,in_port=12")) == "set(eth(src=00:00:00:00:00:02)),13");
  // strip_vlan runs before push_vlan: a tagged packet keeps one (new) tag.
  CHECK(acts(b.x("udp,in_port=13,dl_vlan=5")) == "pop_vlan,push_vlan(vid=0,pcp=0),12");
  CHECK(acts(b.x("udp,in_port=13")) == "push_vlan(vid=0,pcp=0),12");
}

TEST_CASE("action set: clear_actions, goto_table to a table that misses, no final action") {
  Br b;
  b.flow("in_port=1,ip,actions=write_actions(output:2,mod_dl_src:00:00:00:00:00:01),goto_table:1");
  b.flow("table=1,in_port=1,ip,actions=clear_actions");
  b.flow("in_port=2,ip,actions=write_actions(output:3,mod_dl_src:00:00:00:00:00:01),goto_table:1");
  b.flow("table=1,in_port=2,ip,actions=clear_actions,write_actions(output:1)");
  b.flow("in_port=3,ip,actions=write_actions(output:2),goto_table:5");  // table 5 is empty
  b.flow("in_port=4,ip,actions=write_actions(mod_dl_src:00:00:00:00:00:01,load:1->NXM_NX_REG0[])");
  CHECK(acts(b.x("udp,in_port=11")) == "drop");
  CHECK(acts(b.x("udp,in_port=12")) == "11");
  // OVS 3.1, default table-miss: "No match." + drop, then the action set runs.
  CHECK(acts(b.x("udp,in_port=13")) == "12");
  CHECK(acts(b.x("udp,in_port=14")) == "drop");
}

TEST_CASE("action set: resubmit in it and around it, IN_PORT, controller reason action_set") {
  Br b;
  b.flow("in_port=1,ip,actions=write_actions(resubmit(,2))");
  b.flow("table=2,actions=output:3");
  b.flow("in_port=2,ip,actions=write_actions(output:1,resubmit(,2))");  // output outranks resubmit
  b.flow("in_port=3,ip,actions=resubmit(,3),output:2");  // a resubmitted table writes the set
  b.flow("table=3,actions=write_actions(output:4)");
  b.flow("in_port=4,ip,actions=write_actions(IN_PORT)");
  b.flow("in_port=4,arp,actions=write_actions(CONTROLLER:128)");
  CHECK(acts(b.x("udp,in_port=11")) == "13");
  CHECK(acts(b.x("udp,in_port=12")) == "11");
  CHECK(acts(b.x("udp,in_port=13")) == "12,14");
  CHECK(acts(b.x("udp,in_port=14")) == "14");
  XlateOut c = b.x("arp,in_port=14");
  auto u = userdata_of(c);
  REQUIRE(u);
  CHECK(u->reason == flow::OfPacketInReason::action_set);
  CHECK(u->max_len == 128);
}

TEST_CASE("write_metadata: masked write, matched by a later table, cleared from the megaflow") {
  Br b;
  b.flow("in_port=1,ip,actions=write_metadata:0x5/0xff,goto_table:1");
  b.flow("table=1,metadata=0x5,actions=output:2");
  b.flow("table=1,metadata=0x0,actions=output:3");
  b.flow("in_port=2,ip,actions=write_metadata:0x1234,goto_table:1");
  b.flow("table=1,metadata=0x1234/0xffff,actions=output:4");
  XlateOut o = b.x("udp,in_port=11");
  CHECK(acts(o) == "12");
  CHECK(o.final_flow.metadata == flow::text::hton64(5));
  CHECK(o.wc.metadata == 0);
  CHECK(acts(b.x("udp,in_port=12")) == "14");
}

TEST_CASE("trace: write_actions, clear_actions and the action set as ofproto/trace prints them") {
  Br b;
  b.flow("in_port=1,ip,actions=mod_dl_src:00:00:00:00:00:0a,write_actions(output:3,push_vlan:0x8100,output:2),"
         "write_metadata:0x5/0xff,goto_table:1");
  b.flow("table=2,actions=clear_actions");
  FlowKey k = Br::pkt("ip,in_port=1,nw_src=1.1.1.1,nw_dst=3.3.3.3,nw_ttl=64");
  std::string t = xlate_trace(b.br, k, 0);
  CHECK(t.find(" 0. ip,in_port=1, priority 32768\n"
               "    mod_dl_src:00:00:00:00:00:0a\n"
               "    write_actions(output:3,push_vlan:0x8100,output:2)\n"
               "     -> action set is: push_vlan:0x8100,output:2\n"
               "    write_metadata:0x5/0xff\n"
               "    goto_table:1\n"
               "     1. No match.\n"
               "            drop\n"
               "--. Executing action set:\n"
               "    push_vlan:0x8100\n"
               "    output:2\n") != std::string::npos);
  CHECK(t.find("Datapath actions: set(eth(src=00:00:00:00:00:0a)),push_vlan(vid=0,pcp=0),12\n") !=
        std::string::npos);
}

TEST_CASE("ARP rewrites: loads and moves into arp_* become set(arp(...)); mod_nw_* leave ARP alone") {
  // Compared with Open vSwitch 3.1's bytes: load into arp_tpa, set_field
  // arp_spa / arp_sha, move spa->tpa and arp_op all change the ARP body;
  // mod_nw_src, mod_nw_tos, dec_ttl and mod_tp_src on ARP change nothing.
  Br b;
  b.flow("in_port=1,arp,actions=load:0x01020304->NXM_OF_ARP_TPA[],output:2");
  b.flow("in_port=2,arp,actions=move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],load:2->NXM_OF_ARP_OP[],output:1");
  b.flow("in_port=3,arp,actions=set_field:00:00:00:00:00:09->arp_sha,set_field:9.9.9.9->arp_spa,output:1");
  b.flow("in_port=4,arp,actions=mod_nw_src:1.2.3.4,mod_nw_tos:8,dec_ttl,mod_tp_src:5,output:1");
  CHECK(acts(b.x("arp,in_port=11,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.2")) == "set(arp(tip=1.2.3.4)),12");
  CHECK(acts(b.x("arp,in_port=12,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.2")) ==
        "set(arp(tip=10.0.0.1,op=2)),11");
  CHECK(acts(b.x("arp,in_port=13,arp_op=1,arp_spa=10.0.0.1")) ==
        "set(arp(sip=9.9.9.9,sha=00:00:00:00:00:09)),11");
  CHECK(acts(b.x("arp,in_port=14,arp_op=1,arp_spa=10.0.0.1")) == "11");
}

TEST_CASE("mod_vlan_vid/mod_vlan_pcp in a flow only OpenFlow 1.1+ carries push a tag when the match has none") {
  // Open vSwitch 3.1 stores such a flow (sent with -O OpenFlow13) as
  // push_vlan:0x8100,set_field:...->vlan_vid: a tagged packet gets a second
  // tag (bytes compared with its tx_pcap). The same action in an OpenFlow 1.0
  // flow replaces the VID of a tagged packet (the first VLAN test case).
  Br b;
  b.flow("in_port=1,actions=mod_vlan_vid:10,goto_table:1");
  b.flow("table=1,actions=output:2");
  b.flow("in_port=2,actions=write_actions(mod_vlan_vid:3,output:1)");
  b.flow("in_port=3,vlan_tci=0x1000/0x1000,actions=mod_vlan_vid:10,goto_table:1");
  CHECK(acts(b.x("ip,in_port=11")) == "push_vlan(vid=10,pcp=0),12");
  CHECK(acts(b.x("ip,in_port=11,dl_vlan=5")) == "push_vlan(vid=10,pcp=0),12");
  CHECK(acts(b.x("ip,in_port=12,dl_vlan=5")) == "push_vlan(vid=3,pcp=0),11");
  CHECK(acts(b.x("ip,in_port=13,dl_vlan=5")) == "pop_vlan,push_vlan(vid=10,pcp=0),12");
  // dump-flows shows what is stored, as OVS's dump does.
  std::string dumped;
  for (const OfRule* r : b.br.dump(nullptr)) dumped += flow::format_of_actions(r->actions) + "\n";
  CHECK(dumped.find("push_vlan:0x8100,mod_vlan_vid:10,goto_table:1\n") != std::string::npos);
  CHECK(dumped.find("write_actions(push_vlan:0x8100,mod_vlan_vid:3,output:1)\n") != std::string::npos);
}

TEST_CASE("set_field:0->vlan_tci in an OpenFlow 1.1+ flow untags the packet; in an OpenFlow 1.0 flow it is strip_vlan") {
  // Conformance cases 1-51 and 1-137 (OVS 3.1 sends the frame untagged).
  Br b;
  b.flow("in_port=1,actions=push_vlan:0x88a8,set_field:0x0->vlan_tci,output:2");
  b.flow("in_port=2,actions=set_field:0x1005->vlan_tci,goto_table:1");
  b.flow("table=1,actions=output:1");
  CHECK(acts(b.x("ip,in_port=11,dl_vlan=20")) == "pop_vlan,12");
  CHECK(acts(b.x("ip,in_port=11")) == "12");
  CHECK(acts(b.x("ip,in_port=12,dl_vlan=20")) == "pop_vlan,push_vlan(vid=5,pcp=0),11");
  CHECK(acts(b.x("ip,in_port=12")) == "push_vlan(vid=5,pcp=0),11");
}

TEST_CASE("L4 rewrites of SCTP and ICMP: set(sctp(...)), set(icmp(...)) / set(icmpv6(...)) as OVS commits them") {
  // ofproto/trace of OVS 3.1: mod_tp_dst:8080 on ICMPv6 echo gives
  // set(icmpv6(type=128,code=144)) (the code is tp_dst's low byte) and the
  // megaflow matches icmp_type and icmp_code.
  Br b;
  b.flow("in_port=1,actions=mod_tp_dst:8080,output:2");
  b.flow("in_port=2,sctp,actions=mod_tp_src:1,output:1");
  b.flow("in_port=3,icmp,actions=set_field:0->icmp_type,output:1");
  b.flow("in_port=4,icmp,actions=set_field:8->icmp_type,output:1");
  XlateOut o = b.x("icmp6,in_port=11,icmpv6_type=128");
  CHECK(acts(o) == "set(icmpv6(type=128,code=144)),12");
  CHECK(o.wc.tp_src == hton16(0x00ff));
  CHECK(o.wc.tp_dst == hton16(0x00ff));
  CHECK(acts(b.x("icmp,in_port=11,icmp_type=8")) == "set(icmp(type=8,code=144)),12");
  CHECK(acts(b.x("sctp,in_port=12,tp_src=5000,tp_dst=443")) == "set(sctp(src=1)),11");
  CHECK(acts(b.x("icmp,in_port=13,icmp_type=8")) == "set(icmp(type=0,code=0)),11");
  CHECK(acts(b.x("icmp,in_port=14,icmp_type=8")) == "11");  // unchanged: nothing to set
}

TEST_CASE("a move or load into bits of vlan_vid keeps the packet's tag present or absent, as OVS") {
  // OVS 3.1: move:NXM_NX_REG0[0..11]->OXM_OF_VLAN_VID[] leaves an untagged
  // frame untagged and rewrites the VID of a tagged one.
  Br b;
  b.flow("in_port=1,actions=load:0x123->NXM_NX_REG0[0..11],move:NXM_NX_REG0[0..11]->OXM_OF_VLAN_VID[],output:2");
  CHECK(acts(b.x("ip,in_port=11")) == "12");
  CHECK(acts(b.x("ip,in_port=11,dl_vlan=5,dl_vlan_pcp=3")) == "pop_vlan,push_vlan(vid=291,pcp=3),12");
}

// --- the overlap rule (ofproto/xlate_deps.h) -----------------------------------

namespace {

// A bridge set up with `rules`, a megaflow translated from `key` (as a
// handler installs it: key & wc), then `change` ("add ...", "mod ...",
// "del ...", "del-strict ..."): whether the revalidator's overlap rule says
// the change may affect the megaflow (the hot filter, then the lookups).
// Checked on the way, so every case tests the rule's soundness: the filter
// never rules out what the lookups would let through; and when the answer
// is "can't affect", the key and every packet of `same_mf` (packets of the
// same megaflow) still translate to exactly what they did.
bool reaches(const std::vector<std::string>& rules, const std::string& key, const std::string& change,
             const std::vector<std::string>& same_mf = {}) {
  Br b;
  for (const std::string& r : rules) b.flow(r);
  const uint64_t gen = b.br.rules_generation();
  const XlateOut o = b.x(key, 0, /*learn=*/false);
  flow::Match mf;
  mf.key = Br::pkt(key);
  mf.mask = o.wc;
  mf.apply_mask();
  std::vector<std::string> pkts = same_mf;
  pkts.insert(pkts.begin(), key);
  std::vector<std::string> before;
  for (const std::string& p : pkts) {
    flow::Match in;
    in.key = Br::pkt(p);
    in.mask = mf.mask;
    in.apply_mask();
    REQUIRE_MESSAGE(in.key == mf.key, p << " is not a packet of the megaflow");
    before.push_back(acts(b.x(p, 0, false)));
  }

  const size_t sp = change.find(' ');
  const std::string verb = change.substr(0, sp), text = change.substr(sp + 1);
  FlowMod fm;
  if (verb == "mod") {
    fm.command = FlowMod::Command::modify;
  } else if (verb == "del") {
    fm.command = FlowMod::Command::del;
  } else if (verb == "del-strict") {
    fm.command = FlowMod::Command::del_strict;
  } else {
    REQUIRE_MESSAGE(verb == "add", "unknown verb " << verb);
  }
  auto f = flow::parse_of_flow(text);
  REQUIRE_MESSAGE(f.ok(), f.status().message());
  fm.flow = f.value();
  if (fm.flow.has_actions) {
    auto a = flow::parse_of_actions(fm.flow.actions, {}, fm.flow.actions_column);
    REQUIRE_MESSAGE(a.ok(), a.status().message());
    fm.actions = a.value();
  }
  auto r = b.br.flow_mod(fm);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  REQUIRE(b.br.rules_generation() != gen);  // the change happened

  std::vector<Bridge::RuleChange> raw;
  REQUIRE(b.br.changes_since(gen, raw));
  REQUIRE(!raw.empty());
  const DepsFilter filter = o.deps.filter();
  bool affected = false;
  for (const Bridge::RuleChange& rc : raw) {
    const RuleChangeCheck c(rc);
    const bool may = may_affect(c, &b.br, o.deps, mf);
    if (prefilter(c, filter) == Affects::no) CHECK_MESSAGE(!may, "the hot filter ruled out what the lookups let through");
    affected |= may;
  }
  if (!affected)
    for (size_t i = 0; i < pkts.size(); ++i)
      CHECK_MESSAGE(acts(b.x(pkts[i], 0, false)) == before[i], pkts[i] << ": forwarding changed, the change was skipped");
  return affected;
}

}  // namespace

TEST_CASE("overlap rule, table 0: in_port, match overlap, priority against the winner, table miss") {
  const std::vector<std::string> t0 = {"priority=10,in_port=1,ip,actions=output:2"};
  const std::string key = "udp,in_port=11,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1000,tp_dst=80";
  // The megaflow matches in_port and ip only: packets to other addresses and ports are in it too.
  const std::vector<std::string> mf = {"udp,in_port=11,nw_src=10.0.0.1,nw_dst=10.9.9.9,tp_src=1000,tp_dst=81"};
  // Another in_port, another dl_type: no packet of the megaflow matches.
  CHECK_FALSE(reaches(t0, key, "add priority=20,in_port=3,actions=drop", mf));
  CHECK_FALSE(reaches(t0, key, "add priority=1,in_port=65000,actions=drop", mf));
  CHECK_FALSE(reaches(t0, key, "add priority=20,in_port=1,arp,actions=drop", mf));
  // Higher priority, overlapping, on a field the megaflow doesn't match: some packets of it now drop.
  CHECK(reaches(t0, key, "add priority=20,in_port=1,udp,tp_dst=81,actions=drop", mf));
  CHECK(reaches(t0, key, "add priority=20,ip,actions=drop", mf));
  // Lower priority, overlapping: the winner still wins for every packet of the megaflow.
  CHECK_FALSE(reaches(t0, key, "add priority=9,in_port=1,actions=drop", mf));
  CHECK_FALSE(reaches(t0, key, "add priority=0,actions=drop", mf));
  // The same priority may go either way: affected.
  CHECK(reaches(t0, key, "add priority=10,in_port=1,udp,actions=drop", mf));
  // A table miss: any overlapping rule wins there, whatever its priority.
  CHECK(reaches(t0, "udp,in_port=12,nw_dst=10.0.0.2", "add priority=0,actions=drop"));
  CHECK(reaches(t0, "udp,in_port=12,nw_dst=10.0.0.2", "add priority=0,in_port=2,actions=output:1"));
  CHECK_FALSE(reaches(t0, "udp,in_port=12,nw_dst=10.0.0.2", "add priority=0,in_port=3,actions=output:1"));
}

TEST_CASE("overlap rule: a fragment's lookups see no L4 ports, whatever its megaflow's key holds") {
  // A first fragment carries ports, but the rules see 0 (OVS's frag
  // handling "normal"): the megaflow keeps the packet's tp_dst=80 while
  // table 0 looked 0 up.
  const std::vector<std::string> rules = {"priority=10,in_port=1,udp,tp_dst=80,actions=output:2",
                                          "priority=5,in_port=1,ip,actions=output:3"};
  const std::string key = "udp,in_port=11,nw_dst=10.0.0.2,ip_frag=first,tp_dst=80";
  CHECK(reaches(rules, key, "add priority=20,udp,tp_dst=0,actions=drop"));
  CHECK_FALSE(reaches(rules, key, "add priority=20,udp,tp_dst=80,actions=drop"));
  CHECK_FALSE(reaches(rules, key, "del-strict priority=10,in_port=1,udp,tp_dst=80"));  // it didn't win: 0 isn't 80
  CHECK(reaches(rules, key, "del-strict priority=5,in_port=1,ip"));
}

TEST_CASE("overlap rule: a tunnel packet's lookups see ECN CE when the outer header says so") {
  // The inner packet is ECT(1); the outer CE marks it CE before table 0
  // (OVS's tnl_process_ecn): the rules see nw_ecn=3, the megaflow's key 1.
  const std::vector<std::string> rules = {"priority=10,in_port=1,ip,nw_ecn=1,actions=output:2",
                                          "priority=5,in_port=1,ip,actions=output:3"};
  const std::string key = "udp,in_port=11,tun_src=1.1.1.1,tun_dst=2.2.2.2,tun_tos=3,nw_dst=10.0.0.2,nw_ecn=1";
  CHECK(reaches(rules, key, "add priority=20,ip,nw_ecn=3,actions=drop"));
  // Under a tunnel the rule takes the ECN bits as unknown (conservative).
  CHECK(reaches(rules, key, "add priority=20,ip,nw_ecn=2,actions=drop"));
  CHECK_FALSE(reaches(rules, key, "add priority=20,in_port=1,arp,actions=drop"));
}

TEST_CASE("overlap rule: a delete or modify reaches the megaflows whose lookup the rule won, only those") {
  const std::vector<std::string> rules = {"priority=10,in_port=1,ip,actions=output:2",
                                          "priority=30,in_port=1,tcp,actions=drop",
                                          "priority=10,in_port=2,actions=output:1",
                                          "table=5,priority=10,in_port=1,actions=drop"};
  const std::string key = "udp,in_port=11,nw_dst=10.0.0.2,tp_dst=80";
  // The winner goes, or its actions change (OpenFlow modify: a new rule, the old one removed).
  CHECK(reaches(rules, key, "del-strict priority=10,in_port=1,ip"));
  CHECK(reaches(rules, key, "mod in_port=1,ip,actions=output:3"));
  CHECK(reaches(rules, key, "del in_port=1"));
  // A rule that lost (tcp: consulted, didn't match), another in_port's, an unvisited table's.
  CHECK_FALSE(reaches(rules, key, "del-strict priority=30,in_port=1,tcp"));
  CHECK_FALSE(reaches(rules, key, "mod in_port=1,tcp,actions=output:3"));
  CHECK_FALSE(reaches(rules, key, "del in_port=2"));
  CHECK_FALSE(reaches(rules, key, "del table=5"));
  CHECK_FALSE(reaches(rules, key, "mod table=5,in_port=1,actions=output:3"));
}

TEST_CASE("overlap rule across tables: resubmit and goto_table, their in_port, registers, fields the actions changed") {
  // resubmit(,1) keeps in_port; the packet's own fields reach table 1 as the megaflow has them.
  const std::vector<std::string> plain = {"priority=10,in_port=1,ip,nw_dst=10.0.0.0/8,actions=resubmit(,1)",
                                          "table=1,priority=10,ip,actions=output:2"};
  const std::string key = "udp,in_port=11,nw_dst=10.0.0.2,tp_dst=80";
  CHECK(reaches(plain, key, "add table=1,priority=20,ip,nw_dst=10.0.0.0/16,actions=drop"));
  CHECK(reaches(plain, key, "add table=1,priority=20,udp,tp_dst=81,actions=drop"));  // tp_dst: not in the megaflow
  CHECK_FALSE(reaches(plain, key, "add table=1,priority=20,ip,nw_dst=192.168.0.0/16,actions=drop"));
  CHECK_FALSE(reaches(plain, key, "add table=1,priority=20,in_port=2,actions=drop"));
  CHECK_FALSE(reaches(plain, key, "add table=1,priority=5,ip,actions=drop"));  // below table 1's winner
  CHECK_FALSE(reaches(plain, key, "add table=2,priority=20,ip,actions=drop"));  // never looked up
  CHECK(reaches(plain, key, "del table=1"));

  // A field the actions set before the resubmit is no longer the packet's:
  // table 1 sees 192.168.1.1, which the megaflow's nw_dst=10/8 doesn't say.
  const std::vector<std::string> rewritten = {
      "priority=10,in_port=1,ip,nw_dst=10.0.0.0/8,actions=mod_nw_dst:192.168.1.1,resubmit(,1)",
      "table=1,priority=10,ip,actions=output:2"};
  CHECK(reaches(rewritten, key, "add table=1,priority=20,ip,nw_dst=192.168.0.0/16,actions=drop"));

  // resubmit(3,1): table 1 is looked up as from port 3.
  const std::vector<std::string> other_port = {"priority=10,in_port=1,actions=resubmit(3,1)",
                                               "table=1,priority=10,actions=output:2"};
  CHECK(reaches(other_port, key, "add table=1,priority=20,in_port=3,actions=drop"));
  CHECK_FALSE(reaches(other_port, key, "add table=1,priority=20,in_port=1,actions=drop"));

  // goto_table with a register set on the way: table 2 sees reg0=5.
  const std::vector<std::string> regs = {"priority=10,in_port=1,actions=load:5->NXM_NX_REG0[],goto_table:2",
                                         "table=2,priority=10,actions=output:2"};
  CHECK(reaches(regs, key, "add table=2,priority=20,reg0=5,actions=drop"));
  CHECK_FALSE(reaches(regs, key, "add table=2,priority=20,reg0=6,actions=drop"));
  CHECK_FALSE(reaches(regs, key, "add table=2,priority=20,reg1=5,actions=drop"));
  // A table the goto reached and missed: any overlapping rule there wins.
  const std::vector<std::string> miss = {"priority=10,in_port=1,actions=goto_table:3"};
  CHECK(reaches(miss, key, "add table=3,priority=0,actions=output:2"));
  CHECK_FALSE(reaches(miss, key, "add table=3,priority=0,in_port=2,actions=output:1"));
  CHECK_FALSE(reaches(miss, key, "add table=4,priority=0,actions=output:2"));
}

TEST_CASE("overlap rule and NORMAL: only rule changes on the walk count (MAC moves are the MAC table's generation)") {
  const std::vector<std::string> rules = {"priority=10,in_port=1,actions=NORMAL", "priority=10,in_port=2,actions=drop"};
  const std::string key = "udp,in_port=11,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02,nw_dst=10.0.0.2";
  CHECK_FALSE(reaches(rules, key, "add priority=20,in_port=2,actions=NORMAL"));
  CHECK_FALSE(reaches(rules, key, "del in_port=2"));
  CHECK(reaches(rules, key, "add priority=20,in_port=1,dl_dst=00:00:00:00:00:02,actions=drop"));
  CHECK(reaches(rules, key, "mod in_port=1,actions=output:3"));
  // The translation says it used NORMAL: the revalidator re-translates it
  // when the MAC table moves, whatever the rules did.
  Br b;
  b.flow(rules[0]);
  CHECK(b.x(key, 0, false).uses_normal);
}

TEST_CASE("overlap rule: a change in another bridge never reaches a lookup made in this one") {
  Br b0, b1;
  b0.flow("priority=10,in_port=1,actions=output:2");
  b1.flow("priority=10,in_port=1,actions=output:2");
  const XlateOut o = b0.x("udp,in_port=11,nw_dst=10.0.0.2", 0, false);
  flow::Match mf;
  mf.key = Br::pkt("udp,in_port=11,nw_dst=10.0.0.2");
  mf.mask = o.wc;
  mf.apply_mask();
  const uint64_t gen = b1.br.rules_generation();
  b1.flow("priority=20,in_port=1,actions=drop");  // would reach it, in b0
  std::vector<Bridge::RuleChange> raw;
  REQUIRE(b1.br.changes_since(gen, raw));
  REQUIRE(raw.size() == 1);
  const RuleChangeCheck c(raw[0]);
  CHECK_FALSE(may_affect(c, &b1.br, o.deps, mf));
  CHECK(may_affect(c, &b0.br, o.deps, mf));  // the same change made in b0 would
}

TEST_CASE("overlap rule: a walk too long to record counts every change; a port change drops the log") {
  // 70 tables chained by resubmit: more distinct lookups than XlateDeps keeps.
  Br b;
  for (unsigned t = 0; t < 70; ++t)
    b.flow("table=" + std::to_string(t) + ",priority=10,actions=resubmit(," + std::to_string(t + 1) + ")");
  const XlateOut o = b.x("udp,in_port=11,nw_dst=10.0.0.2", 0, false);
  CHECK(o.deps.overflow());
  CHECK(o.deps.filter().all);
  const uint64_t gen = b.br.rules_generation();
  b.flow("table=200,priority=1,in_port=4,arp,actions=drop");
  std::vector<Bridge::RuleChange> raw;
  REQUIRE(b.br.changes_since(gen, raw));
  REQUIRE(raw.size() == 1);
  const RuleChangeCheck c(raw[0]);
  flow::Match mf;
  CHECK(prefilter(c, o.deps.filter()) == Affects::maybe);
  CHECK(may_affect(c, &b.br, o.deps, mf));
  // Ports (and bonds, through invalidate_translations) aren't in the log:
  // a port change makes the log incomplete, so every flow is re-translated.
  PortConfig p;
  p.name = "p9";
  p.ofport = 9;
  p.dp_port = 19;
  REQUIRE(b.br.add_port(p).ok());
  CHECK_FALSE(b.br.changes_since(gen, raw));
}

// offload eligibility: what a NIC's tables carry (every match field, with
// its reason), dp actions -> hal actions (every dp action type, with its
// reason), and decide() on top of both.
#include <doctest/doctest.h>

#include <string>

#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "offload/eligibility.h"
#include "offload/offload.h"

using namespace keel;
using namespace keel::offload;

namespace {

flow::Match M(const std::string& text) {
  auto m = flow::parse_dp_match(text);
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  return m.value();
}

flow::DpActions A(const std::string& text) {
  auto a = flow::parse_dp_actions(text);
  REQUIRE_MESSAGE(a.ok(), a.status().message());
  return a.value();
}

// Ports 1..3 have flow engines, 4 has none, 5 is a vport (vxlan_sys_4789).
PortCaps caps(uint32_t p) {
  PortCaps c;
  if (p >= 1 && p <= 5) c.exists = true;
  if (p >= 1 && p <= 3) c.has_engine = true;
  if (p == 5) c.vport = true;
  return c;
}

const std::string kUdp =
    "recirc_id(0),in_port(1),eth(src=02:00:00:00:00:01,dst=02:00:00:00:00:02),eth_type(0x0800),"
    "ipv4(src=10.0.0.1,dst=10.0.0.2,proto=17,frag=no),udp(src=1000,dst=2000)";

DecideResult D(const std::string& match, const std::string& actions, Mode mode = Mode::exact) {
  const flow::DpActions a = A(actions);
  return decide(M(match), a.bytes(), mode, caps);
}

}  // namespace

TEST_CASE("reason words: what a user reads") {
  CHECK(reason_string(Reason::arm_action, "lb_output") == "actions need the Arm cores: lb_output");
  CHECK(reason_string(Reason::match_field, "ct_state, which the exact-match table does not carry") ==
        "matches ct_state, which the exact-match table does not carry");
  CHECK(std::string(reason_text(Reason::tunnel_in_port)) == "in_port is a tunnel vport");
  CHECK(std::string(reason_text(Reason::recirculated)) == "recirculated flow");
  CHECK(std::string(reason_text(Reason::not_hot)) == "not hot yet");
  CHECK(std::string(reason_text(Reason::table_full)) == "table full");
  CHECK(std::string(reason_text(Reason::evicted)) == "evicted for hotter flows");
  CHECK(reason_string(Reason::refused, "rte_flow create on port p0: boom (ENOTSUP)") ==
        "refused by the driver: rte_flow create on port p0: boom (ENOTSUP)");
  CHECK(reason_string(Reason::retrying, "EBUSY") == "retrying after EBUSY");
  CHECK(std::string(reason_text(Reason::device_reset)) == "device reset");
  CHECK(std::string(reason_text(Reason::disabled)) == "offload disabled");
  CHECK(std::string(reason_text(Reason::no_engine)) == "port has no flow engine");
  CHECK(std::string(reason_text(Reason::idle_demoted)) == "idle: demoted");
  CHECK(parse_mode("both") == Mode::both);
  CHECK(!parse_mode("all"));
  CHECK(std::string(mode_name(Mode::megaflow)) == "megaflow");
}

TEST_CASE("match fields: carried by the exact-match table or not, each named") {
  CHECK(!uncarried_field(M(kUdp), Table::exact));
  CHECK(!uncarried_field(M(kUdp), Table::masked));
  struct Case {
    std::string match;
    const char* field;
  };
  const Case cases[] = {
      {"recirc_id(0),in_port(1),tunnel(tun_id=0x7b,src=1.1.1.1,dst=2.2.2.2),eth_type(0x0800)", "tunnel metadata"},
      {"recirc_id(0),skb_priority(0x1),in_port(1),eth_type(0x0800)", "skb_priority"},
      {"recirc_id(0),skb_mark(0x5),in_port(1),eth_type(0x0800)", "skb_mark"},
      {"recirc_id(0),dp_hash(0x5/0xff),in_port(1),eth_type(0x0800)", "dp_hash"},
      {"recirc_id(0),in_port(1),eth_type(0x0806),arp(sip=10.0.0.1)", "arp_spa"},
      {"recirc_id(0),in_port(1),eth_type(0x0806),arp(tip=10.0.0.1)", "arp_tpa"},
      {"recirc_id(0),in_port(1),eth_type(0x0806),arp(op=1)", "arp_op"},
      {"recirc_id(0),in_port(1),eth_type(0x0806),arp(sha=02:00:00:00:00:01)", "arp_sha"},
      {"recirc_id(0),in_port(1),eth_type(0x0806),arp(tha=02:00:00:00:00:01)", "arp_tha"},
      {"recirc_id(0),in_port(1),eth_type(0x86dd),ipv6(label=0x5,proto=58),icmpv6(type=135,code=0),nd(target=::1)",
       "ipv6_label"},
      {"recirc_id(0),in_port(1),eth_type(0x86dd),ipv6(proto=58),icmpv6(type=135,code=0),nd(target=::1)", "nd_target"},
      {"recirc_id(0),in_port(1),eth_type(0x86dd),ipv6(proto=58),icmpv6(type=136,code=0),nd(tll=02:00:00:00:00:01)",
       "nd_tll"},
      {"recirc_id(0),in_port(1),eth_type(0x0800),ipv4(proto=6,frag=no),tcp(dst=80),tcp_flags(syn)", "tcp_flags"},
      {"recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=later)", "nw_frag"},
      {"recirc_id(0),in_port(1),eth_type(0x0800),ipv4(proto=132,frag=no),sctp(dst=5)", "sctp ports"},
      {"recirc_id(0),in_port(1),eth_type(0x8100),vlan(vid=10),encap(eth_type(0x8100),vlan(vid=20),encap(eth_type(0x0800)))",
       "an inner VLAN tag"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.match);
    auto f = uncarried_field(M(c.match), Table::exact);
    REQUIRE(f);
    CHECK(*f == c.field);
  }
  // The masked table carries TCP flags and the IPv6 label, not the rest.
  CHECK(!uncarried_field(M("recirc_id(0),in_port(1),eth_type(0x0800),ipv4(proto=6,frag=no),tcp(dst=80),tcp_flags(+syn-ack)"),
                         Table::masked));
  // ... but not NS (bit 8), which a plain `tcp_flags(syn)` also matches (as 0).
  CHECK(*uncarried_field(M("recirc_id(0),in_port(1),eth_type(0x0800),ipv4(proto=6,frag=no),tcp(dst=80),tcp_flags(syn)"),
                         Table::masked) == "tcp_flags (NS)");
  CHECK(*uncarried_field(M("recirc_id(0),skb_mark(0x5),in_port(1),eth_type(0x0800)"), Table::masked) == "skb_mark");
  // Carried: VLAN, IPv6, ICMP, ICMPv6, TOS/TTL, partial masks.
  for (const char* ok : {
           "recirc_id(0),in_port(1),eth(dst=02:00:00:00:00:02/ff:ff:ff:00:00:00),eth_type(0x0800),ipv4(src=10.0.0.0/8,tos=0x10,ttl=64,frag=no)",
           "recirc_id(0),in_port(1),eth_type(0x8100),vlan(vid=10,pcp=3),encap(eth_type(0x0800),ipv4(proto=1,frag=no),icmp(type=8,code=0))",
           "recirc_id(0),in_port(1),eth_type(0x86dd),ipv6(src=fe80::1,dst=fe80::2,proto=58,tclass=0,hlimit=64,frag=no),icmpv6(type=128,code=0)",
           "recirc_id(0),in_port(1),eth_type(0x86dd),ipv6(proto=6,frag=no),tcp(src=1,dst=2)",
           "recirc_id(0),in_port(1),eth_type(0x0806)",
       }) {
    CAPTURE(ok);
    CHECK(!uncarried_field(M(ok), Table::exact));
  }
}

TEST_CASE("exact pattern of a microflow: every field exact, in host order") {
  const flow::Match m = M(kUdp);
  datapath::MicroKey k = micro_key_of(m.key);
  k.ip_ttl = 64;
  auto p = exact_pattern(k);
  REQUIRE(p);
  REQUIRE(p->count == 3);
  CHECK(p->items[0].type == hal::FlowItemType::eth);
  CHECK(p->items[0].spec.eth.type == 0x0800);
  CHECK(p->items[0].mask.eth.type == 0xffff);
  CHECK(p->items[0].spec.eth.dst == hal::FlowMac{2, 0, 0, 0, 0, 2});
  CHECK(p->items[0].mask.eth.has_vlan == 1);
  CHECK(p->items[0].spec.eth.has_vlan == 0);
  CHECK(p->items[1].type == hal::FlowItemType::ipv4);
  CHECK(p->items[1].spec.ipv4.src == 0x0a000001u);
  CHECK(p->items[1].spec.ipv4.dst == 0x0a000002u);
  CHECK(p->items[1].spec.ipv4.ttl == 64);
  CHECK(p->items[1].mask.ipv4.ttl == 0xff);
  CHECK(p->items[1].mask.ipv4.frag == 0);  // the udp item excludes later fragments; whole fields only
  CHECK(p->items[2].type == hal::FlowItemType::udp);
  CHECK(p->items[2].spec.udp.src == 1000);
  CHECK(p->items[2].spec.udp.dst == 2000);
  CHECK(p->items[2].mask.udp.dst == 0xffff);

  SUBCASE("VLAN: a vlan item with the inner EtherType, DEI not matched") {
    k.vlan_present = true;
    k.vlan_tci = 0x1000 | (3 << 13) | 10;
    auto v = exact_pattern(k);
    REQUIRE(v);
    REQUIRE(v->count == 4);
    CHECK(v->items[0].spec.eth.has_vlan == 1);
    CHECK(v->items[0].mask.eth.type == 0);
    CHECK(v->items[1].type == hal::FlowItemType::vlan);
    CHECK(v->items[1].spec.vlan.tci == ((3 << 13) | 10));
    CHECK(v->items[1].mask.vlan.tci == 0xffff);  // whole field, DEI 0 in the spec
    CHECK(v->items[1].spec.vlan.inner_type == 0x0800);
  }
  SUBCASE("a fragment can't be an exact rule") {
    k.ip_frag = flow::kFragAny;
    std::string why;
    CHECK(!exact_pattern(k, &why));
    CHECK(why == "an IP fragment");
  }
  SUBCASE("an L4 protocol without an item, with ports: refused") {
    k.ip_proto = 132;
    std::string why;
    CHECK(!exact_pattern(k, &why));
    CHECK(why.find("132") != std::string::npos);
  }
  SUBCASE("ICMP and ICMPv6 type/code") {
    k.ip_proto = 1;
    k.tp_src = k.tp_dst = 0;
    k.icmp_type = 8;
    auto i = exact_pattern(k);
    REQUIRE(i);
    CHECK(i->items[2].type == hal::FlowItemType::icmp);
    CHECK(i->items[2].spec.icmp.type == 8);
    k.ip_version = 6;
    k.eth_type = 0x86dd;
    k.ip_proto = 58;
    k.ipv6_src[15] = 1;
    auto i6 = exact_pattern(k);
    REQUIRE(i6);
    CHECK(i6->items[1].type == hal::FlowItemType::ipv6);
    CHECK(i6->items[1].spec.ipv6.src[15] == 1);
    CHECK(i6->items[1].mask.ipv6.has_frag_ext == 1);
    CHECK(i6->items[2].type == hal::FlowItemType::icmp6);
  }
}

TEST_CASE("masked pattern keeps the megaflow's masks") {
  auto p = masked_pattern(M("recirc_id(0),in_port(1),eth(dst=02:00:00:00:00:02),eth_type(0x0800),"
                            "ipv4(dst=10.1.0.0/255.255.0.0,proto=6,frag=no),tcp(dst=80),tcp_flags(+syn-ack)"));
  REQUIRE(p);
  REQUIRE(p->count == 3);
  CHECK(p->items[0].mask.eth.src == hal::FlowMac{});
  CHECK(p->items[0].mask.eth.dst == hal::FlowMac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  CHECK(p->items[1].spec.ipv4.dst == 0x0a010000u);
  CHECK(p->items[1].mask.ipv4.dst == 0xffff0000u);
  CHECK(p->items[1].mask.ipv4.src == 0);
  CHECK(p->items[1].mask.ipv4.frag == 0x3fff);  // frag=no, as Open vSwitch writes it
  CHECK(p->items[2].type == hal::FlowItemType::tcp);
  CHECK(p->items[2].mask.tcp.src == 0);
  CHECK(p->items[2].spec.tcp.dst == 80);
  CHECK(p->items[2].mask.tcp.flags == 0x12);
  CHECK(p->items[2].spec.tcp.flags == 0x02);
  std::string why;
  CHECK(!masked_pattern(M("recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=first)"), &why));
  CHECK(why == "nw_frag");
}

TEST_CASE("every dp action: done by the NIC, or named as the reason") {
  SUBCASE("output to a port with an engine, count always added") {
    auto p = translate_actions(A("2").bytes(), caps);
    REQUIRE(p.full);
    CHECK(hal::to_string(p.actions) == hal::to_string(hal::FlowActions().port(2).count_hits()));
    CHECK(p.out_port == 2);
  }
  SUBCASE("drop: the empty list and an explicit drop") {
    auto p = translate_actions(A("drop").bytes(), caps);
    REQUIRE(p.full);
    CHECK(p.actions.has(hal::FlowActionType::drop));
    CHECK(p.actions.has(hal::FlowActionType::count));
    auto q = translate_actions(A("pop_vlan,drop").bytes(), caps);
    REQUIRE(q.full);
    CHECK(q.actions.has(hal::FlowActionType::drop));
  }
  SUBCASE("push_vlan -> of_push_vlan + vid + pcp; pop_vlan") {
    auto p = translate_actions(A("push_vlan(vid=10,pcp=3),2").bytes(), caps);
    REQUIRE(p.full);
    REQUIRE(p.actions.count == 5);
    CHECK(p.actions.actions[0].type == hal::FlowActionType::of_push_vlan);
    CHECK(p.actions.actions[0].conf.ethertype == 0x8100);
    CHECK(p.actions.actions[1].conf.vid == 10);
    CHECK(p.actions.actions[2].conf.pcp == 3);
    auto q = translate_actions(A("pop_vlan,2").bytes(), caps);
    REQUIRE(q.full);
    CHECK(q.actions.actions[0].type == hal::FlowActionType::of_pop_vlan);
  }
  SUBCASE("whole-field sets") {
    auto p = translate_actions(A("set(eth(src=02:00:00:00:00:0a,dst=02:00:00:00:00:0b)),"
                                 "set(ipv4(src=10.9.9.9,dst=10.8.8.8,ttl=9)),set(udp(src=7,dst=8)),2")
                                   .bytes(),
                               caps);
    REQUIRE_MESSAGE(p.full, p.detail);
    CHECK(p.actions.has(hal::FlowActionType::set_mac_src));
    CHECK(p.actions.has(hal::FlowActionType::set_mac_dst));
    CHECK(p.actions.has(hal::FlowActionType::set_ipv4_src));
    CHECK(p.actions.has(hal::FlowActionType::set_ipv4_dst));
    CHECK(p.actions.has(hal::FlowActionType::set_ipv4_ttl));
    CHECK(p.actions.has(hal::FlowActionType::set_tp_src));
    CHECK(p.actions.has(hal::FlowActionType::set_tp_dst));
    bool found = false;
    for (const auto& a : p.actions.view())
      if (a.type == hal::FlowActionType::set_ipv4_src) found = a.conf.ipv4 == 0x0a090909u;
    CHECK(found);
    auto q = translate_actions(A("set(ipv6(src=fe80::1,dst=fe80::2,hlimit=5)),set(tcp(dst=81)),2").bytes(), caps);
    REQUIRE_MESSAGE(q.full, q.detail);
    CHECK(q.actions.has(hal::FlowActionType::set_ipv6_src));
    CHECK(q.actions.has(hal::FlowActionType::set_ipv6_hop));
    CHECK(q.actions.has(hal::FlowActionType::set_tp_dst));
    auto d = translate_actions(A("set(ipv4(tos=0x20/0xfc)),2").bytes(), caps);
    REQUIRE_MESSAGE(d.full, d.detail);
    CHECK(d.actions.actions[0].type == hal::FlowActionType::set_ipv4_dscp);
    CHECK(d.actions.actions[0].conf.dscp == 8);
  }
  struct Arm {
    const char* actions;
    Reason reason;
    const char* detail;
  };
  const Arm arms[] = {
      {"hash(l4(0)),recirc(0x5)", Reason::arm_action, "hash"},
      {"recirc(0x5)", Reason::arm_action, "recirc"},
      {"lb_output(1)", Reason::arm_action, "lb_output"},
      {"clone(2),3", Reason::arm_action, "clone"},
      {"trunc(100),2", Reason::arm_action, "trunc"},
      {"userspace(pid=1)", Reason::arm_action, "userspace"},
      {"meter(1),2", Reason::arm_action, "meter"},
      {"tnl_pop(5)", Reason::arm_action, "tnl_pop"},
      {"set(ipv4(src=10.0.0.0/255.0.0.0)),2", Reason::arm_action, "set(ipv4) with a partial mask"},
      {"set(ipv4(tos=0x3)),2", Reason::arm_action, "set(ipv4(tos)) other than DSCP"},
      {"set(eth(src=02:00:00:00:00:00/ff:00:00:00:00:00)),2", Reason::arm_action, "set(eth) with a partial mask"},
      {"set(ipv6(label=5)),2", Reason::arm_action, "set(ipv6(label))"},
      {"set(tcp(src=5/0xff)),2", Reason::arm_action, "set(tcp) with a partial mask"},
      {"set(arp(sip=10.0.0.1)),2", Reason::arm_action, "set(arp)"},
      {"set(sctp(dst=5)),2", Reason::arm_action, "set(sctp)"},
      {"set(icmp(type=0,code=0)),2", Reason::arm_action, "set(icmp)"},
      {"2,3", Reason::arm_action, "output to several ports"},
      {"2,pop_vlan", Reason::arm_action, "an action after the output"},
      {"4", Reason::arm_action, "output to port 4, which has no flow engine"},
      {"9", Reason::arm_action, "output to unknown port 9"},
      {"5", Reason::output_vport, ""},
  };
  for (const Arm& c : arms) {
    CAPTURE(c.actions);
    auto p = translate_actions(A(c.actions).bytes(), caps);
    CHECK(!p.full);
    CHECK(p.reason == c.reason);
    CHECK(p.detail == c.detail);
  }
}

TEST_CASE("partial actions: mark, then queue or RSS, then count") {
  auto a = partial_actions(7, 2, 4);
  REQUIRE(a.count == 3);
  CHECK(a.actions[0].type == hal::FlowActionType::mark);
  CHECK(a.actions[0].conf.mark == 7);
  CHECK(a.actions[1].type == hal::FlowActionType::queue);
  CHECK(a.actions[1].conf.queue == 2);
  CHECK(a.actions[2].type == hal::FlowActionType::count);
  auto r = partial_actions(7, -1, 4);
  CHECK(r.actions[1].type == hal::FlowActionType::rss);
  CHECK(r.actions[1].conf.rss.n_queues == 4);
}

TEST_CASE("decide: full, partial or none, with the reason") {
  CHECK(D(kUdp, "2").decision == Decision::full_exact);
  CHECK(D(kUdp, "2").reason == Reason::ok);
  CHECK(D(kUdp, "drop").decision == Decision::full_exact);
  CHECK(D(kUdp, "2", Mode::megaflow).decision == Decision::full_masked);
  CHECK(D(kUdp, "2", Mode::both).decision == Decision::full_masked);

  auto p = D(kUdp, "hash(l4(0)),lb_output(1)");
  CHECK(p.decision == Decision::partial);
  CHECK(p.text() == "actions need the Arm cores: hash");
  auto lb = D(kUdp, "lb_output(1)");
  CHECK(lb.text() == "actions need the Arm cores: lb_output");
  CHECK(D(kUdp, "5").text() == "actions need the Arm cores: output to a vport");

  auto tun = D("recirc_id(0),in_port(5),eth_type(0x0800)", "2");
  CHECK(tun.decision == Decision::none);
  CHECK(tun.text() == "in_port is a tunnel vport");
  auto rec = D("recirc_id(0x3),in_port(1),eth_type(0x0800)", "2");
  CHECK(rec.decision == Decision::none);
  CHECK(rec.text() == "recirculated flow");
  auto noeng = D("recirc_id(0),in_port(4),eth_type(0x0800)", "2");
  CHECK(noeng.decision == Decision::none);
  CHECK(noeng.text() == "port has no flow engine");

  const std::string syn = "recirc_id(0),in_port(1),eth_type(0x0800),ipv4(proto=6,frag=no),tcp(dst=80),tcp_flags(syn)";
  auto ex = D(syn, "2");
  CHECK(ex.decision == Decision::none);
  CHECK(ex.text() == "matches tcp_flags, which the exact-match table does not carry");
  // The masked table carries TCP flags (CWR..FIN): megaflow and both modes offload it.
  const std::string synack = "recirc_id(0),in_port(1),eth_type(0x0800),ipv4(proto=6,frag=no),tcp(dst=80),tcp_flags(+syn-ack)";
  CHECK(D(synack, "2").text() == "matches tcp_flags, which the exact-match table does not carry");
  CHECK(D(synack, "2", Mode::megaflow).decision == Decision::full_masked);
  CHECK(D(synack, "2", Mode::both).decision == Decision::full_masked);
  auto mark = D("recirc_id(0),skb_mark(0x1),in_port(1),eth_type(0x0800)", "2", Mode::megaflow);
  CHECK(mark.decision == Decision::none);
  CHECK(mark.text() == "matches skb_mark, which the masked table does not carry");
}

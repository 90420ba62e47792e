// Translation of tunnels (ofproto/xlate.h, XlateTunnels): output to a
// tunnel port combined with the underlay bridge's actions in one pass
// (clone(tnl_push(...),<underlay>), no clone when last), exactly as Open
// vSwitch 3.1's native_tunnel_output() prints it for the same config
// (tests/tunnel-push-pop.at's br0 + int-br); the recirculation fallback for
// a truncated output, a controller action in the underlay and
// tunnel-combine false; route and neighbour misses (request sent, nothing
// cacheable); flow-based tunnels (set_field tun_dst / set_tunnel); pop at
// LOCAL (tnl_pop), ARP snooping and ARP requests for an own address; and
// packets from a tunnel vport (the overlay port, tunnel fields in the mask).
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "flow/dp_actions.h"
#include "flow/flow_text.h"
#include "flow/of_actions.h"
#include "flow/of_match_syntax.h"
#include "ofproto/bridge.h"
#include "ofproto/tlv_map.h"
#include "ofproto/xlate.h"

using namespace keel;
using namespace keel::ofproto;
using keel::flow::EthAddr;
using keel::flow::FlowKey;
using keel::flow::In6Addr;
using keel::flow::text::hton16;
using keel::flow::text::hton32;

namespace {

In6Addr v4(const char* s) {
  flow::be32 a = 0;
  REQUIRE(flow::text::parse_ipv4(s, a));
  In6Addr r{};
  r.b[10] = r.b[11] = 0xff;
  std::memcpy(&r.b[12], &a, 4);
  return r;
}
EthAddr mac(const char* s) {
  EthAddr m{};
  REQUIRE(flow::text::parse_mac(s, m));
  return m;
}

// The tunnel state of tests/tunnel-push-pop.at: br0 (the underlay, LOCAL =
// vport 100, 1.1.2.88/24, MAC aa:55:aa:55:00:00, a route 1.1.2.0/24 via br0)
// and int-br's tunnel ports.
struct FakeTunnels : XlateTunnels {
  Bridge* underlay = nullptr;
  std::map<std::string, XlateTunnelPort> ports;  // by port name
  std::map<std::string, EthAddr> neigh;          // "br0 1.1.2.92"
  bool combine_on = true;
  bool has_route = true;
  std::vector<std::string> requests, learned;
  std::vector<XlateListener> listen{{4, 17, 4789}, {3, 17, 6081}, {7, 47, 0}};
  std::optional<XlateTunnelRx> rx;

  static std::string key(const Bridge& b, const In6Addr& ip) {
    std::string s = b.name() + " ";
    flow::text::put_ipv6(s, ip);
    return s;
  }
  std::optional<XlateTunnelPort> tunnel_port(const PortConfig& p) const override {
    auto it = ports.find(p.name);
    if (it == ports.end()) return std::nullopt;
    return it->second;
  }
  std::optional<XlateRoute> route(const In6Addr& dst, uint32_t) const override {
    if (!has_route) return std::nullopt;
    if (!(dst.b[10] == 0xff && dst.b[12] == 1 && dst.b[13] == 1 && dst.b[14] == 2)) return std::nullopt;
    XlateRoute r;
    r.bridge = underlay;
    r.dev = "br0";
    r.local_vport = 100;
    r.src = v4("1.1.2.88");
    return r;
  }
  std::optional<EthAddr> neighbor(const Bridge& br, const In6Addr& ip) const override {
    auto it = neigh.find(key(br, ip));
    if (it == neigh.end()) return std::nullopt;
    return it->second;
  }
  std::optional<EthAddr> bridge_mac(const Bridge& br) const override {
    if (&br != underlay) return std::nullopt;
    return mac("aa:55:aa:55:00:00");
  }
  std::vector<In6Addr> bridge_addrs(const Bridge& br) const override {
    if (&br != underlay) return {};
    return {v4("1.1.2.88")};
  }
  std::vector<XlateListener> listeners() const override { return listen; }
  std::optional<XlateTunnelRx> receive(const FlowKey&) const override { return rx; }
  bool is_tunnel_vport(uint32_t p) const override { return p == 3 || p == 4 || p == 7; }
  Bridge* bridge_of_local_vport(uint32_t v) const override { return v == 100 ? underlay : nullptr; }
  bool combine() const override { return combine_on; }
  void send_neighbor_request(Bridge& br, const EthAddr& smac, const In6Addr& src, const In6Addr& dst) override {
    std::string s = br.name() + " ";
    flow::text::put_mac(s, smac);
    s += " ";
    flow::text::put_ipv6(s, src);
    s += " ";
    flow::text::put_ipv6(s, dst);
    requests.push_back(s);
  }
  void neighbor_learn(Bridge& br, const In6Addr& ip, const EthAddr& m) override {
    std::string s = key(br, ip) + " ";
    flow::text::put_mac(s, m);
    learned.push_back(s);
  }
};

struct World {
  Bridge br0{"br0", nullptr};
  Bridge intbr{"int-br", nullptr};
  FakeTunnels tnl;

  World() {
    tnl.underlay = &br0;
    add(br0, "p0", 1, 1);
    add(br0, "br0", flow::kOfppLocal, 100);
    add(intbr, "p1", 6, 6);
    add(intbr, "t2", 2, 4);
    add(intbr, "t3", 4, 3);
    add(intbr, "t1", 3, 7);
    add(intbr, "t4", 5, 4);
    XlateTunnelPort vx;
    vx.type = XlateTunnelType::vxlan;
    vx.vport = 4;
    vx.dst_port = 4789;
    vx.remote = v4("1.1.2.92");
    vx.out_key = 123;
    vx.out_key_present = true;
    tnl.ports["t2"] = vx;
    XlateTunnelPort ge = vx;
    ge.type = XlateTunnelType::geneve;
    ge.vport = 3;
    ge.dst_port = 6081;
    ge.remote = v4("1.1.2.92");
    ge.out_key = 789;
    tnl.ports["t3"] = ge;
    XlateTunnelPort gre = vx;
    gre.type = XlateTunnelType::gre;
    gre.vport = 7;
    gre.dst_port = 0;
    gre.out_key = 456;
    tnl.ports["t1"] = gre;
    XlateTunnelPort fl = vx;
    fl.remote = In6Addr{};
    fl.remote_flow = true;
    fl.out_key_flow = true;
    fl.out_key = 0;
    tnl.ports["t4"] = fl;
    tnl.neigh[FakeTunnels::key(br0, v4("1.1.2.92"))] = mac("f8:bc:12:44:34:b6");
    tnl.neigh[FakeTunnels::key(br0, v4("1.1.2.93"))] = mac("f8:bc:12:44:34:b7");
    flow(br0, "actions=normal");
  }
  // edit_ports: LOCAL (0xfffe) and tunnel ports sharing a vport are
  // what the Ofproto adds; the snapshot is all translation reads.
  static void add(Bridge& b, const char* name, uint32_t ofport, uint16_t dp) {
    PortConfig p;
    p.name = name;
    p.ofport = ofport;
    p.dp_port = dp;
    REQUIRE(b.edit_ports([&](std::vector<PortConfig>& ps) {
                 ps.push_back(p);
                 return Status{};
               }).ok());
  }
  static void flow(Bridge& b, const std::string& line) {
    auto f = flow::parse_of_flow(line);
    REQUIRE_MESSAGE(f.ok(), f.status().message());
    auto a = flow::parse_of_actions(f->actions, {}, f->actions_column);
    REQUIRE_MESSAGE(a.ok(), a.status().message());
    FlowMod fm;
    fm.command = FlowMod::Command::add;
    fm.flow = f.value();
    fm.actions = a.value();
    auto r = b.flow_mod(fm);
    REQUIRE_MESSAGE(r.ok(), r.status().message());
  }
  // Replaces int-br's rules with one rule of `acts` as OfActions (for
  // actions the text syntax has no form for, as output with max_len).
  static void rule(Bridge& b, flow::OfActions acts) {
    auto f = flow::parse_of_flow("priority=40000,actions=drop");
    REQUIRE(f.ok());
    FlowMod fm;
    fm.command = FlowMod::Command::add;
    fm.flow = f.value();
    fm.actions = std::move(acts);
    REQUIRE(b.flow_mod(fm).ok());
  }
  static FlowKey pkt(const std::string& key) {
    auto m = flow::parse_of_match(key);
    REQUIRE_MESSAGE(m.ok(), m.status().message());
    return m->key;
  }
  XlateOut x(Bridge& b, const std::string& key, bool learn = true, std::string* trace = nullptr,
             uint32_t in_ofport = 0) {
    FlowKey k = pkt(key);
    XlateIn in{b, k, b.version(), 0, learn, false, trace, &tnl, in_ofport};
    auto r = xlate(in);
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    return r.value();
  }
};

std::string acts(const XlateOut& o) { return flow::format_dp_actions(o.actions); }

const char* kPkt = "in_port=6,dl_src=f8:bc:12:44:34:b6,dl_dst=aa:55:aa:55:00:01,ip,nw_src=1.1.3.88,nw_dst=1.1.3.112";
const std::string kVxlanHdr =
    "header(size=50,type=4,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x0800),"
    "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),"
    "vxlan(flags=0x8000000,vni=0x7b))";

}  // namespace

TEST_CASE("vxlan output, last action: tnl_push then the underlay's NORMAL flood, no clone (OVS's text)") {
  World w;
  World::flow(w.intbr, "in_port=6,actions=output:2");
  std::string trace;
  XlateOut o = w.x(w.intbr, kPkt, true, &trace);
  CHECK(acts(o) == "tnl_push(tnl_port(4)," + kVxlanHdr + ",out_port(100)),1");
  CHECK(o.cacheable);
  CHECK_FALSE(o.tnl_recirc);
  CHECK(o.underlay == &w.br0);
  CHECK(o.underlay_uses_normal);
  // The mask is the overlay's: the underlay's lookups consulted outer
  // fields only (OVS translates them with a scratch mask). ECN is inherited.
  CHECK(o.wc.nw_tos == flow::text::kIpEcnMask);
  CHECK(o.wc.dl_src == EthAddr{});
  CHECK(o.wc.nw_dst == 0);
  // The rules of both bridges are credited.
  CHECK(o.rules.size() == 2);
  // ofproto/trace's details, as Open vSwitch 3.1 prints them.
  CHECK(trace.find("     -> output to native tunnel\n"
                   "     -> tunneling to 1.1.2.92 via br0\n"
                   "     -> tunneling from aa:55:aa:55:00:00 1.1.2.88 to f8:bc:12:44:34:b6 1.1.2.92\n"
                   "\n"
                   "bridge(\"br0\")\n"
                   "-------------\n"
                   " 0. priority 32768\n"
                   "    NORMAL\n"
                   "     -> no learned MAC for destination, flooding\n") != std::string::npos);
}

TEST_CASE("tunnel output followed by another action: clone(tnl_push(...),<underlay>), then the rest") {
  World w;
  World::add(w.intbr, "p7", 1, 9);
  World::flow(w.intbr, "in_port=6,actions=output:2,mod_dl_src:00:00:00:00:00:01,output:1");
  XlateOut o = w.x(w.intbr, kPkt);
  // The base flow is restored after the clone: the set is relative to the inner packet.
  CHECK(acts(o) == "clone(tnl_push(tnl_port(4)," + kVxlanHdr + ",out_port(100)),1),set(eth(src=00:00:00:00:00:01)),9");
  CHECK(o.wc.dl_src == mac("ff:ff:ff:ff:ff:ff"));
  // Nothing after it in the end (output to the input port is skipped): a
  // trailing clone() is unwrapped, as OVS's xlate_optimize_odp_actions()
  // (checked against ovs-vswitchd 3.1: "tnl_push(...),1").
  World::flow(w.intbr, "in_port=6,actions=output:2,mod_dl_src:00:00:00:00:00:01,output:6");
  CHECK(acts(w.x(w.intbr, kPkt)) == "tnl_push(tnl_port(4)," + kVxlanHdr + ",out_port(100)),1");
}

TEST_CASE("geneve and gre headers as Open vSwitch prints them") {
  World w;
  World::flow(w.intbr, "in_port=6,actions=output:4");
  CHECK(acts(w.x(w.intbr, kPkt)) ==
        "tnl_push(tnl_port(3),header(size=50,type=5,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x0800),"
        "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=6081,csum=0x0),"
        "geneve(vni=0x315)),out_port(100)),1");
  World::flow(w.intbr, "in_port=6,actions=output:3");
  CHECK(acts(w.x(w.intbr, kPkt)) ==
        "tnl_push(tnl_port(7),header(size=42,type=3,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x0800),"
        "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),gre((flags=0x2000,proto=0x6558),key=0x1c8)),"
        "out_port(100)),1");
}

TEST_CASE("flow-based tunnel: set_field tun_dst and set_tunnel pick the remote and the VNI") {
  World w;
  World::flow(w.intbr, "in_port=6,actions=set_field:1.1.2.93->tun_dst,set_tunnel:0x1c8,output:5");
  XlateOut o = w.x(w.intbr, kPkt);
  CHECK(acts(o) ==
        "tnl_push(tnl_port(4),header(size=50,type=4,eth(dst=f8:bc:12:44:34:b7,src=aa:55:aa:55:00:00,dl_type=0x0800),"
        "ipv4(src=1.1.2.88,dst=1.1.2.93,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),"
        "vxlan(flags=0x8000000,vni=0x1c8)),out_port(100)),1");
  // No tun_dst set: the remote is the packet's own (none), as OVS says.
  World::flow(w.intbr, "in_port=6,actions=output:5");
  std::string trace;
  XlateOut o2 = w.x(w.intbr, kPkt, true, &trace);
  CHECK(acts(o2) == "drop");
  CHECK(trace.find(">> Not tunneling to our own address") != std::string::npos);
}

TEST_CASE("fallbacks: tunnel-combine false, a truncated output, a controller action in the underlay") {
  World w;
  World::flow(w.intbr, "in_port=6,actions=output:2");
  const std::string push = "tnl_push(tnl_port(4)," + kVxlanHdr + ",out_port(100))";
  SUBCASE("tunnel-combine false") {
    w.tnl.combine_on = false;
    std::string trace;
    XlateOut o = w.x(w.intbr, kPkt, true, &trace);
    CHECK(acts(o) == push + ",recirc(0x10064)");
    CHECK(o.tnl_recirc);
    CHECK(o.cacheable);
    CHECK(trace.find("-> tunnel combine: not possible, tunnel-combine is false; recirculating") != std::string::npos);
    CHECK(trace.find("bridge(\"br0\")") == std::string::npos);
    // The second pass: recirc_id 0x10000 + 100 is br0 from LOCAL.
    XlateOut second = w.x(w.br0, "recirc_id=0x10064,in_port=6,dl_src=aa:55:aa:55:00:00,dl_dst=f8:bc:12:44:34:b6,udp,"
                                 "nw_src=1.1.2.88,nw_dst=1.1.2.92,tp_dst=4789",
                          false, nullptr, flow::kOfppLocal);
    CHECK(second.error == XlateError::ok);
    CHECK(acts(second) == "1");
  }
  SUBCASE("output(port=2,max_len=100): trunc, then the fallback") {
    World::rule(w.intbr, {flow::OfOutput{2, 100}});
    std::string trace;
    XlateOut o = w.x(w.intbr, kPkt, true, &trace);
    CHECK(acts(o) == "trunc(100)," + push + ",recirc(0x10064)");
    CHECK(trace.find("tunnel combine: not possible, a trunc action precedes the tunnel output; recirculating") !=
          std::string::npos);
  }
  SUBCASE("the underlay sends to the controller") {
    World::flow(w.br0, "priority=40000,actions=controller");
    std::string trace;
    XlateOut o = w.x(w.intbr, kPkt, true, &trace);
    CHECK(acts(o) == push + ",recirc(0x10064)");
    CHECK_FALSE(o.to_controller);
    CHECK(trace.find("the underlay bridge sends the packet to the controller") != std::string::npos);
  }
  SUBCASE("an underlay that drops: nothing at all (OVS cancels the clone)") {
    World::flow(w.br0, "priority=40000,actions=drop");
    CHECK(acts(w.x(w.intbr, kPkt)) == "drop");
  }
}

TEST_CASE("neighbour miss: the ARP request goes out (packets only), the packet drops, nothing cacheable") {
  World w;
  w.tnl.neigh.clear();
  World::flow(w.intbr, "in_port=6,actions=output:2");
  std::string trace;
  XlateOut o = w.x(w.intbr, kPkt, false, &trace);
  CHECK(acts(o) == "drop");
  CHECK_FALSE(o.cacheable);
  CHECK(o.tnl_neigh_miss);
  CHECK(w.tnl.requests.empty());  // trace / revalidation: no side effect
  CHECK(trace.find("-> neighbor cache miss for 1.1.2.92 on bridge br0, sending ARP request") != std::string::npos);
  XlateOut o2 = w.x(w.intbr, kPkt, true);
  CHECK_FALSE(o2.cacheable);
  REQUIRE(w.tnl.requests.size() == 1);
  CHECK(w.tnl.requests[0] == "br0 aa:55:aa:55:00:00 ::ffff:1.1.2.88 ::ffff:1.1.2.92");
}

TEST_CASE("no route: native tunnel routing failed, drop") {
  World w;
  w.tnl.has_route = false;
  World::flow(w.intbr, "in_port=6,actions=output:2");
  std::string trace;
  XlateOut o = w.x(w.intbr, kPkt, true, &trace);
  CHECK(acts(o) == "drop");
  CHECK(trace.find("     >> native tunnel routing failed\n") != std::string::npos);
}

TEST_CASE("ttl and tos inherit read the inner fields into the mask") {
  World w;
  w.tnl.ports["t2"].ttl_inherit = true;
  w.tnl.ports["t2"].tos_inherit = true;
  World::flow(w.intbr, "in_port=6,actions=output:2");
  XlateOut o = w.x(w.intbr, std::string(kPkt) + ",nw_tos=0x20,nw_ttl=9");
  CHECK(acts(o).find("ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0x20,ttl=9,frag=0x4000)") != std::string::npos);
  CHECK(o.wc.nw_ttl == 0xff);
  CHECK(o.wc.nw_tos == 0xff);
}

TEST_CASE("LOCAL: a VXLAN packet to the bridge's address pops; others are consumed; ARP replies are snooped") {
  World w;
  const char* vx = "in_port=1,dl_src=f8:bc:12:44:34:b6,dl_dst=aa:55:aa:55:00:00,udp,nw_src=1.1.2.92,nw_dst=1.1.2.88,"
                   "tp_src=33333,tp_dst=4789";
  // NORMAL floods (nothing learned): p0 is the input, LOCAL terminates.
  XlateOut o = w.x(w.br0, vx, true);
  CHECK(acts(o) == "tnl_pop(4)");
  // What the lookup consulted: L2 (dl_dst, VLAN), L3 (address, protocol, frag), L4 (tp_dst).
  CHECK(o.wc.nw_dst == 0xffffffff);
  CHECK(o.wc.tp_dst == 0xffff);
  CHECK(o.wc.tp_src == 0);
  // The remote VTEP's MAC is learned from its packets.
  REQUIRE(w.tnl.learned.size() == 1);
  CHECK(w.tnl.learned[0] == "br0 ::ffff:1.1.2.92 f8:bc:12:44:34:b6");
  // GRE.
  CHECK(acts(w.x(w.br0, "in_port=1,dl_src=f8:bc:12:44:34:b6,dl_dst=aa:55:aa:55:00:00,ip,nw_proto=47,"
                        "nw_src=1.1.2.92,nw_dst=1.1.2.88")) == "tnl_pop(7)");
  // Another UDP port: consumed.
  std::string trace;
  XlateOut o3 = w.x(w.br0, "in_port=1,dl_src=f8:bc:12:44:34:b6,dl_dst=aa:55:aa:55:00:00,udp,nw_src=1.1.2.92,"
                           "nw_dst=1.1.2.88,tp_dst=53",
                    false, &trace);
  CHECK(acts(o3) == "drop");
  CHECK(trace.find("LOCAL has no host stack") != std::string::npos);
  // An ARP reply to us: snooped (sha for spa), nothing else.
  w.tnl.learned.clear();
  XlateOut o4 = w.x(w.br0, "in_port=1,dl_src=f8:bc:12:44:34:b9,dl_dst=aa:55:aa:55:00:00,arp,arp_op=2,"
                           "arp_spa=1.1.2.94,arp_tpa=1.1.2.88,arp_sha=f8:bc:12:44:34:b9");
  CHECK(acts(o4) == "drop");
  REQUIRE(w.tnl.learned.size() == 1);
  CHECK(w.tnl.learned[0] == "br0 ::ffff:1.1.2.94 f8:bc:12:44:34:b9");
  CHECK(o4.wc.nw_src == 0xffffffff);
  CHECK(o4.wc.arp_sha == mac("ff:ff:ff:ff:ff:ff"));
}

TEST_CASE("LOCAL: an ARP request for the bridge's address goes to the slow path, which replies") {
  World w;
  XlateOut o = w.x(w.br0, "in_port=1,dl_src=f8:bc:12:44:34:b6,dl_dst=ff:ff:ff:ff:ff:ff,arp,arp_op=1,"
                          "arp_spa=1.1.2.92,arp_tpa=1.1.2.88,arp_sha=f8:bc:12:44:34:b6");
  CHECK(o.slow_path_neigh);
  uint8_t ud[kSlowPathUserdataLen];
  encode_slow_path_userdata(SlowPathReason::action, ud);
  CHECK(decode_slow_path_userdata(ud) == SlowPathReason::action);
  CHECK(acts(o).find("userspace(pid=0") != std::string::npos);
  // For another address: not ours, only flooded (no ports other than LOCAL and the input).
  XlateOut o2 = w.x(w.br0, "in_port=1,dl_src=f8:bc:12:44:34:b6,dl_dst=ff:ff:ff:ff:ff:ff,arp,arp_op=1,"
                           "arp_spa=1.1.2.92,arp_tpa=1.1.2.77,arp_sha=f8:bc:12:44:34:b6");
  CHECK_FALSE(o2.slow_path_neigh);
  CHECK(acts(o2) == "drop");
}

TEST_CASE("from a tunnel vport: the overlay port the translator placed; tunnel fields in the mask") {
  World w;
  World::flow(w.intbr, "in_port=2,actions=output:6");
  FlowKey k = World::pkt("in_port=4,tun_id=0x7b,tun_src=1.1.2.92,tun_dst=1.1.2.88,dl_src=00:00:00:00:00:01,"
                         "dl_dst=00:00:00:00:00:02,ip,nw_src=10.0.0.1,nw_dst=10.0.0.2");
  k.tun_ttl = 64;
  k.tun_tp_src = hton16(40000);
  k.tun_tp_dst = hton16(4789);
  k.tun_flags = flow::kTunKey;
  XlateIn in{w.intbr, k, w.intbr.version(), 0, true, false, nullptr, &w.tnl, 2};
  auto r = xlate(in);
  REQUIRE(r.ok());
  CHECK(acts(r.value()) == "6");
  const FlowKey& wc = r->wc;
  CHECK(wc.tun_id == ~uint64_t{0});
  CHECK(wc.tun_ipv4_src == 0xffffffff);
  CHECK(wc.tun_ipv4_dst == 0xffffffff);
  CHECK(wc.tun_flags == (flow::kTunDontFragment | flow::kTunCsum | flow::kTunKey));
  CHECK(wc.tun_tos == 0xff);
  CHECK(wc.tun_ttl == 0);
  CHECK(wc.tun_tp_src == 0);
  CHECK(wc.tun_tp_dst == 0);
  // The drop flow for an unknown VNI covers exactly that.
  const FlowKey d = tunnel_receive_wc(k);
  CHECK(d.tun_id == ~uint64_t{0});
  CHECK(d.in_port == 0xffffffff);
  CHECK(d.dl_type == 0);
}

TEST_CASE("geneve options from tun_metadata0 through the bridge's TLV map (OVS's text)") {
  World w;
  flow::TlvMapping m;
  m.opt_class = 0xffff;
  m.type = 0x80;
  m.len = 4;
  m.index = 0;
  REQUIRE(switch_tlv_maps().add("int-br", {m}).ok());
  World::flow(w.intbr, "in_port=6,actions=set_field:0xa->tun_metadata0,output:4");
  const std::string a = acts(w.x(w.intbr, kPkt));
  switch_tlv_maps().forget("int-br");
  // Checked against ovs-vswitchd 3.1 (add-tlv-map int-br {class=0xffff,type=0x80,len=4}->tun_metadata0).
  CHECK(a ==
        "tnl_push(tnl_port(3),header(size=58,type=5,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x0800),"
        "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=6081,csum=0x0),"
        "geneve(crit,vni=0x315,options({class=0xffff,type=0x80,len=4,0xa}))),out_port(100)),1");
}

TEST_CASE("from a geneve vport: raw options become tun_metadata0 for the rules; the mask is the raw form's") {
  World w;
  flow::TlvMapping m;
  m.opt_class = 0xffff;
  m.type = 0x80;
  m.len = 4;
  m.index = 0;
  REQUIRE(switch_tlv_maps().add("int-br", {m}).ok());
  World::flow(w.intbr, "tun_metadata0=0xb,actions=output:6");
  FlowKey k = World::pkt("in_port=3,tun_id=0x315,tun_src=1.1.2.92,tun_dst=1.1.2.88,dl_src=00:00:00:00:00:01,"
                         "dl_dst=00:00:00:00:00:02,ip,nw_src=10.0.0.1,nw_dst=10.0.0.2");
  const uint8_t opt[8] = {0xff, 0xff, 0x80, 0x01, 0, 0, 0, 0x0b};
  std::memcpy(k.tun_opts, opt, sizeof opt);
  k.tun_opt_len = 8;
  XlateIn in{w.intbr, k, w.intbr.version(), 0, true, false, nullptr, &w.tnl, 4};
  auto r = xlate(in);
  // Another value: no match, dropped.
  FlowKey k2 = k;
  k2.tun_opts[7] = 0x0c;
  XlateIn in2{w.intbr, k2, w.intbr.version(), 0, true, false, nullptr, &w.tnl, 4};
  auto r2 = xlate(in2);
  // A critical option the map doesn't know: invalid metadata, dropped.
  FlowKey k3 = k;
  k3.tun_opts[2] = 0x81;
  XlateIn in3{w.intbr, k3, w.intbr.version(), 0, true, false, nullptr, &w.tnl, 4};
  auto r3 = xlate(in3);
  switch_tlv_maps().forget("int-br");
  REQUIRE(r.ok());
  CHECK(acts(r.value()) == "6");
  CHECK(r->wc.tun_opt_len == flow::kTunOptLenMaskUdpif);
  CHECK(r->wc.tun_opts[0] == 0xff);  // the option header exactly
  CHECK(r->wc.tun_opts[7] == 0xff);  // and the data the rule consulted
  REQUIRE(r2.ok());
  CHECK(acts(r2.value()) == "drop");
  REQUIRE(r3.ok());
  CHECK(r3->error == XlateError::invalid_tunnel_metadata);
}

// Tunnel ports (ofproto/tunnel.h, ofproto_tunnels.cpp): options with Open
// vSwitch 3.1's names, defaults and errors (netdev-vport.c
// set_tunnel_config), their ovs-vsctl words and dpif/show summary, the
// receive side in tnl_find's order, and the Ofproto wiring: shared tunnel
// vports with reference counts, refusals that change nothing, and the
// LOCAL port's address and MAC.
#include <doctest/doctest.h>

#include <mutex>
#include <sstream>

#include "datapath/datapath.h"
#include "keel/hal/backend.h"
#include "keel/hal/port_spec.h"
#include "ofproto/ofproto.h"
#include "ofproto/port_columns.h"
#include "ofproto/tunnel.h"

using namespace keel;
using namespace keel::ofproto;
using keel::flow::FlowKey;

namespace {

TunnelOptions opts(TunnelType t, std::vector<std::pair<std::string, std::string>> kv, Status* st = nullptr) {
  TunnelOptions o = default_tunnel_options(t);
  for (auto& [k, v] : kv) {
    Status s = apply_tunnel_option("t1", k, v, o);
    if (st) *st = s;
    if (!s.ok()) break;
  }
  return o;
}

IpAddr ip(const char* s) {
  auto a = IpAddr::parse(s);
  REQUIRE(a.has_value());
  return *a;
}

flow::be32 v4(const char* s) { return ip(s).v4_addr(); }

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

}  // namespace

TEST_CASE("tunnel options: OVS defaults and names") {
  TunnelOptions v = default_tunnel_options(TunnelType::vxlan);
  CHECK(v.dst_port == 4789);
  CHECK(v.ttl == 64);
  CHECK(v.tos == 0);
  CHECK(v.df_default);
  CHECK_FALSE(v.csum);
  CHECK_FALSE(v.in_key.present);
  CHECK(default_tunnel_options(TunnelType::geneve).dst_port == 6081);
  CHECK(default_tunnel_options(TunnelType::gre).dst_port == 0);
  CHECK(tunnel_vport_name(TunnelType::vxlan, 4789) == "vxlan_sys_4789");
  CHECK(tunnel_vport_name(TunnelType::geneve, 6081) == "genev_sys_6081");
  CHECK(tunnel_vport_name(TunnelType::gre, 0) == "gre_sys");
  CHECK(ovs_tnl_type(TunnelType::gre, false) == 3);
  CHECK(ovs_tnl_type(TunnelType::vxlan, false) == 4);
  CHECK(ovs_tnl_type(TunnelType::geneve, true) == 5);
  CHECK(ovs_tnl_type(TunnelType::gre, true) == 109);

  Status st;
  TunnelOptions o = opts(TunnelType::vxlan,
                         {{"remote_ip", "1.1.2.92"}, {"key", "123"}, {"tos", "0x10"}, {"ttl", "5"},
                          {"df_default", "false"}, {"csum", "true"}, {"dst_port", "4790"}},
                         &st);
  REQUIRE(st.ok());
  CHECK(o.remote_ip == ip("1.1.2.92"));
  CHECK(o.in_key.present);
  CHECK(o.in_key.value == 123);
  CHECK(o.out_key.value == 123);
  CHECK(o.tos == 0x10);
  CHECK(o.ttl == 5);
  CHECK_FALSE(o.df_default);
  CHECK(o.csum);
  CHECK(o.dst_port == 4790);
  CHECK_FALSE(o.ipv6());
  CHECK(check_tunnel_options("t1", o).ok());
  // ttl=0 is OVS's DEFAULT_TTL.
  CHECK(opts(TunnelType::vxlan, {{"ttl", "0"}}).ttl == 64);
  CHECK(opts(TunnelType::vxlan, {{"ttl", "inherit"}}).ttl_inherit);
  CHECK(opts(TunnelType::vxlan, {{"tos", "inherit"}}).tos_inherit);
  TunnelOptions f = opts(TunnelType::geneve, {{"remote_ip", "flow"}, {"key", "flow"}, {"local_ip", "flow"}});
  CHECK(f.remote_flow);
  CHECK(f.local_flow);
  CHECK(f.in_key.flow);
  CHECK(f.out_key.flow);
  CHECK(check_tunnel_options("t1", f).ok());
  TunnelOptions six = opts(TunnelType::vxlan, {{"remote_ip", "2001:cafe::92"}});
  CHECK(six.ipv6());
}

TEST_CASE("tunnel options: bad values are refused with OVS's words, nothing changed") {
  TunnelOptions o = default_tunnel_options(TunnelType::vxlan);
  const TunnelOptions before = o;
  struct Bad {
    const char *k, *v, *msg;
  } bad[] = {
      {"remote_ip", "1.2.3", "t1: bad vxlan 'remote_ip'"},
      {"remote_ip", "224.0.0.1", "t1: multicast remote_ip=224.0.0.1 not allowed"},
      {"local_ip", "nope", "t1: bad vxlan 'local_ip'"},
      {"tos", "3", "t1: invalid TOS 3"},
      {"tos", "0x100", "t1: invalid TOS 0x100"},
      {"ttl", "256", "invalid TTL"},
      {"dst_port", "0", "invalid dst_port"},
      {"dst_port", "65536", "invalid dst_port"},
      {"csum", "yes", "csum=yes: true or false"},
      {"df_default", "no", "df_default=no"},
      {"key", "0x1000000", "a vxlan key is 0..16777215 or flow"},
      {"key", "x", "a number or flow"},
      {"foo", "1", "t1: unknown vxlan argument 'foo'"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.k);
    CAPTURE(b.v);
    Status st = apply_tunnel_option("t1", b.k, b.v, o);
    CHECK_FALSE(st.ok());
    CHECK(st.message().find(b.msg) != std::string::npos);
    CHECK(o == before);
  }
  // GRE keys are 32 bits; GRE has no dst_port.
  TunnelOptions g = default_tunnel_options(TunnelType::gre);
  CHECK(apply_tunnel_option("t1", "key", "0xffffffff", g).ok());
  CHECK_FALSE(apply_tunnel_option("t1", "key", "0x100000000", g).ok());
  CHECK(apply_tunnel_option("t1", "dst_port", "4789", g).message().find("unknown gre argument 'dst_port'") !=
        std::string::npos);

  Status st = check_tunnel_options("t1", default_tunnel_options(TunnelType::vxlan));
  CHECK(st.message() == "t1: vxlan type requires valid 'remote_ip' argument");
  st = check_tunnel_options("t1", opts(TunnelType::gre, {{"remote_ip", "1.1.1.1"}, {"local_ip", "flow"}}));
  CHECK(st.message() == "t1: gre type requires 'remote_ip=flow' with 'local_ip=flow'");
  st = check_tunnel_options("t1", opts(TunnelType::vxlan, {{"remote_ip", "1.1.1.1"}, {"local_ip", "2001::1"}}));
  CHECK(st.message() == "t1: 'remote_ip' and 'local_ip' has to be of the same address family");
}

TEST_CASE("tunnel options: ovs-vsctl words round-trip; dpif/show summary as OVS 3.1") {
  // The summaries ovs-vswitchd 3.1 printed (dpif/show, live) for the same options.
  CHECK(tunnel_summary(opts(TunnelType::vxlan, {{"remote_ip", "1.1.2.92"}, {"key", "123"}})) ==
        "vxlan: key=123, remote_ip=1.1.2.92");
  CHECK(tunnel_summary(opts(TunnelType::geneve, {{"remote_ip", "flow"},
                                                 {"key", "flow"},
                                                 {"csum", "true"},
                                                 {"tos", "inherit"},
                                                 {"ttl", "5"}})) ==
        "geneve: csum=true, key=flow, remote_ip=flow, tos=inherit, ttl=5");
  CHECK(tunnel_summary(opts(TunnelType::vxlan, {{"remote_ip", "2001:cafe::92"}, {"dst_port", "4790"}})) ==
        "vxlan: dst_port=4790, remote_ip=2001:cafe::92");
  CHECK(tunnel_summary(opts(TunnelType::vxlan, {{"remote_ip", "1.1.2.94"},
                                                {"tos", "0x10"},
                                                {"df_default", "false"},
                                                {"in_key", "5"},
                                                {"out_key", "6"}})) ==
        "vxlan: df_default=false, in_key=5, out_key=6, remote_ip=1.1.2.94, tos=0x10");
  CHECK(tunnel_summary(opts(TunnelType::gre, {{"remote_ip", "1.1.2.93"}})) == "gre: remote_ip=1.1.2.93");

  for (auto kv : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"remote_ip", "1.1.2.92"}, {"key", "123"}},
           {{"remote_ip", "flow"}, {"local_ip", "flow"}, {"key", "flow"}, {"ttl", "inherit"}, {"csum", "true"}},
           {{"remote_ip", "2001:db8::1"}, {"local_ip", "2001:db8::2"}, {"in_key", "1"}, {"out_key", "flow"}},
           {{"remote_ip", "10.0.0.1"}, {"dst_port", "8472"}, {"df_default", "false"}, {"tos", "0xfc"}}}) {
    TunnelOptions o = opts(TunnelType::vxlan, kv);
    TunnelOptions back = default_tunnel_options(TunnelType::vxlan);
    for (const std::string& w : split(format_tunnel_options(o))) {
      REQUIRE(w.rfind("options:", 0) == 0);
      const size_t eq = w.find('=');
      REQUIRE(apply_tunnel_option("t1", w.substr(8, eq - 8), w.substr(eq + 1), back).ok());
    }
    CHECK(back == o);
  }
}

TEST_CASE("TunnelTable::receive follows tnl_find: exact key, exact remote, local_ip cfg/any/flow") {
  auto port = [](const char* name, uint16_t vport, uint32_t ofport, TunnelOptions o) {
    auto p = std::make_shared<TunnelPort>();
    p->name = name;
    p->vport = vport;
    p->ofport = ofport;
    p->options = o;
    return std::shared_ptr<const TunnelPort>(p);
  };
  TunnelTable t({
      port("exact", 3, 1, opts(TunnelType::vxlan, {{"remote_ip", "1.1.2.92"}, {"key", "123"}})),
      port("keyflow", 3, 2, opts(TunnelType::vxlan, {{"remote_ip", "1.1.2.92"}, {"key", "flow"}})),
      port("remoteflow", 3, 3, opts(TunnelType::vxlan, {{"remote_ip", "flow"}, {"key", "123"}})),
      port("local", 3, 4,
           opts(TunnelType::vxlan, {{"remote_ip", "1.1.2.93"}, {"key", "7"}, {"local_ip", "1.1.2.88"}})),
      port("anylocal", 3, 5, opts(TunnelType::vxlan, {{"remote_ip", "1.1.2.93"}, {"key", "7"}})),
      port("both_flow", 3, 6, opts(TunnelType::vxlan, {{"remote_ip", "flow"}, {"key", "flow"}})),
      port("gre", 4, 7, opts(TunnelType::gre, {{"remote_ip", "1.1.2.92"}})),
  });
  auto rx = [&](uint16_t vport, const char* src, const char* dst, uint64_t vni) {
    FlowKey f{};
    f.in_port = vport;
    f.tun_ipv4_src = v4(src);
    f.tun_ipv4_dst = v4(dst);
    f.tun_id = __builtin_bswap64(vni);
    const TunnelReceive r = t.receive(f, nullptr);
    return r ? r.port->name : std::string("none");
  };
  CHECK(rx(3, "1.1.2.92", "1.1.2.88", 123) == "exact");
  CHECK(rx(3, "1.1.2.92", "1.1.2.88", 124) == "keyflow");     // key=flow before remote=flow
  CHECK(rx(3, "1.1.2.99", "1.1.2.88", 123) == "remoteflow");  // exact key, any remote
  CHECK(rx(3, "1.1.2.99", "1.1.2.88", 5) == "both_flow");
  CHECK(rx(3, "1.1.2.93", "1.1.2.88", 7) == "local");     // IP_SRC_CFG before IP_SRC_ANY
  CHECK(rx(3, "1.1.2.93", "1.1.2.89", 7) == "anylocal");
  CHECK(rx(4, "1.1.2.92", "1.1.2.88", 0) == "gre");       // the vport is part of the match
  CHECK(rx(4, "1.1.2.92", "1.1.2.88", 1) == "none");      // key 0 configured: tun_id must be 0
  CHECK(rx(5, "1.1.2.92", "1.1.2.88", 123) == "none");

  // tnl_wc_init's bits, and nothing for a packet not from a tunnel.
  FlowKey f{}, wc{};
  f.in_port = 3;
  f.tun_ipv4_src = v4("1.1.2.92");
  f.tun_ipv4_dst = v4("1.1.2.88");
  f.tun_id = __builtin_bswap64(123);
  CHECK(t.receive(f, &wc).port->name == "exact");
  CHECK(wc.tun_id == ~uint64_t{0});
  CHECK(wc.tun_ipv4_src == ~uint32_t{0});
  CHECK(wc.tun_ipv4_dst == ~uint32_t{0});
  CHECK(wc.tun_flags == (flow::kTunDontFragment | flow::kTunCsum | flow::kTunKey));
  CHECK(wc.tun_tos == 0xff);
  CHECK(wc.tun_ttl == 0);
  CHECK(wc.tun_tp_src == 0);
  FlowKey plain{}, wc2{};
  plain.in_port = 3;
  CHECK_FALSE(t.receive(plain, &wc2));
  CHECK(wc2 == FlowKey{});

  // IPv6 underlay.
  TunnelTable t6({port("v6", 3, 1, opts(TunnelType::vxlan, {{"remote_ip", "2001:cafe::92"}, {"key", "123"}}))});
  FlowKey g{};
  g.in_port = 3;
  g.tun_ipv6_src = ip("2001:cafe::92").a;
  g.tun_ipv6_dst = ip("2001:cafe::88").a;
  g.tun_id = __builtin_bswap64(123);
  CHECK(t6.receive(g, nullptr).port->name == "v6");

  // Duplicates: same type, dst_port, key, remote, local.
  CHECK(t.duplicate_of(opts(TunnelType::vxlan, {{"remote_ip", "1.1.2.92"}, {"key", "123"}}))->name == "exact");
  CHECK(t.duplicate_of(opts(TunnelType::vxlan, {{"remote_ip", "1.1.2.92"}, {"key", "123"}}), "exact") == nullptr);
  CHECK(t.duplicate_of(opts(TunnelType::vxlan, {{"remote_ip", "1.1.2.92"}, {"key", "124"}})) == nullptr);
  CHECK(t.duplicate_of(opts(TunnelType::geneve, {{"remote_ip", "1.1.2.92"}, {"key", "123"}})) == nullptr);
}

namespace {

// A datapath with ring ports p0, p1 and an Ofproto with br-int and br-phy.
struct Switch {
  std::unique_ptr<hal::Backend> be;
  datapath::Datapath dp{datapath::DatapathConfig{}};
  std::unique_ptr<Ofproto> of;
  Switch() {
    auto b = hal::make_sim_backend({.buffers = 256});
    REQUIRE(b.ok());
    be = std::move(b.value());
    for (const char* name : {"p0", "p1"}) {
      auto spec = hal::parse_port_spec(name, "ring:size=64");
      REQUIRE(spec.ok());
      auto port = be->open_port(*spec, 1, 1);
      REQUIRE(port.ok());
      REQUIRE(dp.add_port(std::move(port.value())).ok());
    }
    of = std::make_unique<Ofproto>(dp);
    std::lock_guard lk(of->writer_mutex());
    REQUIRE(of->add_bridge("br-int").ok());
    REQUIRE(of->add_bridge("br-phy").ok());
    REQUIRE(of->add_port("br-phy", "p0").ok());
  }
  Status add(const std::string& port, const std::string& words) {
    std::lock_guard lk(of->writer_mutex());
    PortOptions po;
    const auto w = split(words);
    if (Status st = parse_port_columns(w, port, po); !st.ok()) return st;
    return of->add_port("br-int", port, po);
  }
};

}  // namespace

TEST_CASE("Ofproto: tunnel ports share one vport per (type, dst_port), refcounted") {
  Switch s;
  REQUIRE(s.add("t1", "-- set Interface t1 type=vxlan options:remote_ip=1.1.2.92 options:key=123").ok());
  REQUIRE(s.add("t2", "type=vxlan options:remote_ip=1.1.2.93 options:key=123").ok());
  REQUIRE(s.add("t3", "-- set interface t3 type=gre options:remote_ip=1.1.2.93 ofport_request=7").ok());
  auto st = s.of->tunnel_state();
  REQUIRE(st->vports.size() == 2);
  CHECK(st->vports[0].name == "vxlan_sys_4789");
  CHECK(st->vports[0].refs == 2);
  CHECK(st->vports[1].name == "gre_sys");
  CHECK(st->format_vports() == "Listening ports:\nvxlan_sys_4789 (" + std::to_string(st->vports[0].id) +
                                   ") ref_cnt=2\ngre_sys (" + std::to_string(st->vports[1].id) + ") ref_cnt=1\n");
  auto vx = s.dp.vport(st->vports[0].id);
  REQUIRE(vx.has_value());
  CHECK(vx->name == "vxlan_sys_4789");
  const TunnelPort* t1 = st->tunnels->find("t1");
  REQUIRE(t1);
  CHECK(t1->ofport == 1);
  CHECK(t1->bridge == s.of->find_bridge("br-int"));
  CHECK(st->tunnels->find("t3")->ofport == 7);
  // The bridge's port map has them; the dp-port index does not.
  const PortConfig* pc = s.of->find_bridge("br-int")->ports()->by_name("t1");
  REQUIRE(pc);
  CHECK(pc->tunnel.get() == t1);
  CHECK(pc->dp_port == t1->vport);
  CHECK(s.of->port_owner(t1->vport).bridge == nullptr);
  // The running-config words give the same tunnel back.
  CHECK(format_port_columns(*pc) ==
        "-- set Interface t1 type=vxlan options:remote_ip=1.1.2.92 options:key=123 ofport_request=1");

  {
    std::lock_guard lk(s.of->writer_mutex());
    REQUIRE(s.of->del_port("", "t1").ok());
  }
  st = s.of->tunnel_state();
  CHECK(st->vports[0].refs == 1);
  {
    std::lock_guard lk(s.of->writer_mutex());
    REQUIRE(s.of->del_port("br-int", "t2").ok());
  }
  st = s.of->tunnel_state();
  REQUIRE(st->vports.size() == 1);
  CHECK(st->vports[0].name == "gre_sys");
  CHECK_FALSE(s.dp.find_vport("vxlan_sys_4789").has_value());
  // del-br releases its tunnels' vports.
  {
    std::lock_guard lk(s.of->writer_mutex());
    REQUIRE(s.of->del_bridge("br-int").ok());
  }
  CHECK(s.of->tunnel_state()->vports.empty());
  CHECK(s.dp.vports().empty());
}

TEST_CASE("Ofproto: bad tunnel ports are refused and change nothing") {
  Switch s;
  REQUIRE(s.add("t1", "type=vxlan options:remote_ip=1.1.2.92 options:key=123").ok());
  const auto before = s.of->tunnel_state();
  const auto ports_before = s.of->find_bridge("br-int")->ports();
  struct Bad {
    const char *port, *words, *msg;
  } bad[] = {
      {"t2", "type=vxlan", "t2: vxlan type requires valid 'remote_ip' argument"},
      {"t2", "type=vxlan options:remote_ip=1.1.2.92 options:key=123", "same type, dst_port, key"},
      {"t2", "type=vxlan options:remote_ip=1.1.2.92 options:local_ip=1.1.2.88", "no bridge has that address"},
      {"t2", "type=geneve options:remote_ip=1.1.2.92 options:ttl=x", "invalid TTL"},
      {"t2", "type=gre options:remote_ip=1.1.2.92 options:dst_port=1", "unknown gre argument"},
      {"t2", "type=vxlan options:remote_ip=1.1.2.92 tag=5", "a tunnel port takes options"},
      {"p1", "type=vxlan options:remote_ip=1.1.2.95", "is a --port spec's port"},
      {"t1", "type=vxlan options:remote_ip=1.1.2.96", "already in bridge br-int"},
      {"p1", "options:remote_ip=1.1.2.95", "for a port that is not a tunnel"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.words);
    Status st = s.add(b.port, b.words);
    CHECK_FALSE(st.ok());
    CHECK(st.message().find(b.msg) != std::string::npos);
    CHECK(s.of->tunnel_state()->vports.size() == 1);
    CHECK(s.of->tunnel_state()->vports[0].refs == 1);
    CHECK(s.of->find_bridge("br-int")->ports()->ports.size() == ports_before->ports.size());
  }
  CHECK(s.dp.vports().size() == 1);
  // `set interface` of a tunnel: all or nothing, dst_port moves the port to another vport.
  std::lock_guard lk(s.of->writer_mutex());
  CHECK_FALSE(s.of->set_tunnel_options("t1", {{"ttl", "300"}}).ok());
  CHECK(s.of->tunnel_state()->tunnels->find("t1")->options.ttl == 64);
  REQUIRE(s.of->set_tunnel_options("t1", {{"dst_port", "4790"}, {"ttl", "9"}}).ok());
  const auto st = s.of->tunnel_state();
  CHECK(st->tunnels->find("t1")->options.ttl == 9);
  REQUIRE(st->vports.size() == 1);
  CHECK(st->vports[0].name == "vxlan_sys_4790");
  CHECK(st->tunnels->find("t1")->vport == st->vports[0].id);
}

TEST_CASE("Ofproto: ip-add gives the bridge an internal vport, connected routes; local_ip must be owned") {
  Switch s;
  std::lock_guard lk(s.of->writer_mutex());
  REQUIRE(s.of->ip_add("br-phy", *IpPrefix::parse("1.1.2.88/24")).ok());
  auto st = s.of->tunnel_state();
  const BridgeAddr* b = st->addrs->find("br-phy");
  REQUIRE(b);
  REQUIRE(b->internal_vport != 0);
  auto vp = s.dp.vport(b->internal_vport);
  REQUIRE(vp.has_value());
  CHECK(vp->name == "br-phy");
  CHECK(vp->type == datapath::VportType::internal);
  CHECK(st->addrs->owner(ip("1.1.2.88")) == b);
  CHECK(st->addrs->by_internal_vport(b->internal_vport) == b);
  CHECK_FALSE(st->addrs->is_local(ip("1.1.2.89")));
  CHECK(st->routes->format() ==
        "Route Table:\n"
        "Cached: 1.1.2.88/32 dev br-phy SRC 1.1.2.88 local\n"
        "Cached: 1.1.2.0/24 dev br-phy SRC 1.1.2.88\n");
  // The same address twice, on any bridge: refused.
  CHECK_FALSE(s.of->ip_add("br-int", *IpPrefix::parse("1.1.2.88/16")).ok());
  CHECK_FALSE(s.of->ip_add("nobr", *IpPrefix::parse("1.1.2.1/16")).ok());
  // A tunnel with that local_ip is accepted now, and pins the address.
  PortOptions po;
  po.type = "vxlan";
  po.tunnel_options = {{"remote_ip", "1.1.2.92"}, {"local_ip", "1.1.2.88"}};
  REQUIRE(s.of->add_port("br-int", "t1", po).ok());
  Status del = s.of->ip_del("br-phy", *IpPrefix::parse("1.1.2.88/24"));
  CHECK(del.message().find("tunnel port t1 has local_ip=1.1.2.88") != std::string::npos);
  REQUIRE(s.of->del_port("", "t1").ok());
  REQUIRE(s.of->ip_del("br-phy", *IpPrefix::parse("1.1.2.88/24")).ok());
  st = s.of->tunnel_state();
  CHECK(st->addrs->find("br-phy")->internal_vport == 0);
  CHECK(s.dp.vports().empty());
  CHECK(st->routes->routes().empty());
}

TEST_CASE("Ofproto: bridge MAC — other_config:hwaddr, else the lowest port MAC, else from the name") {
  Switch s;
  std::lock_guard lk(s.of->writer_mutex());
  const hal::MacAddr p0 = s.dp.find_port("p0")->mac();
  flow::EthAddr e0;
  std::copy(p0.begin(), p0.end(), e0.b);
  CHECK(s.of->bridge_mac("br-phy") == e0);
  CHECK(s.of->bridge_mac("br-int") == bridge_default_mac("br-int"));
  CHECK((bridge_default_mac("br-int").b[0] & 3) == 2);  // locally administered unicast
  CHECK_FALSE(bridge_default_mac("br-int") == bridge_default_mac("br-phy"));
  const flow::EthAddr m = *parse_mac("aa:55:aa:55:00:00");
  REQUIRE(s.of->set_bridge_hwaddr("br-phy", m).ok());
  CHECK(s.of->bridge_mac("br-phy") == m);
  CHECK(s.of->tunnel_state()->addrs->find("br-phy")->mac == m);
  CHECK(s.of->tunnel_state()->addrs->find("br-phy")->mac_configured);
  CHECK_FALSE(s.of->set_bridge_hwaddr("br-phy", *parse_mac("01:00:00:00:00:01")).ok());
  CHECK(s.of->bridge_mac("br-phy") == m);
  REQUIRE(s.of->set_bridge_hwaddr("br-phy", std::nullopt).ok());
  CHECK(s.of->bridge_mac("br-phy") == e0);
}

TEST_CASE("Ofproto: tunnel-combine knob in the snapshot") {
  Switch s;
  CHECK(s.of->tunnel_state()->combine);
  std::lock_guard lk(s.of->writer_mutex());
  s.of->set_tunnel_combine(false);
  CHECK_FALSE(s.of->tunnel_state()->combine);
}

TEST_CASE("recirculation ids of the tunnel fallback") {
  CHECK(tnl_recirc_id(3) == 0x10003);
  CHECK(is_tnl_recirc_id(0x10003));
  CHECK_FALSE(is_tnl_recirc_id(0x10000));
  CHECK_FALSE(is_tnl_recirc_id(5));
  CHECK(tnl_recirc_vport(0x10003) == 3);
}

// Tunnel underlay commands (ofproto/tunnel.h): bridge addresses
// (`ip-add` / `ip-del`, as ovs-appctl netdev-dummy/ip4addr and ip6addr give
// a bridge's LOCAL port an address), the bridge MAC (`set bridge BR
// other_config:hwaddr=MAC`), routes (`route-add` / `route-del` /
// `route-show`, as ovs-appctl ovs/route/add, del, show), neighbours
// (`neigh-set` / `neigh-show` / `neigh-flush`, as tnl/neigh/set, show,
// flush), `tnl-ports-show` (tnl/ports/show) and `set tunnel-combine
// true|false`. Tunnel ports themselves are add-port's (type=vxlan|geneve|gre
// with options:*).
//
// Running config: section "tunnels" (300: bridge MACs, addresses, then the
// tunnel ports, whose local_ip must be an address already) and "underlay"
// (400: routes, static neighbours, tunnel-combine).
//
// Threads: inside Control::run; every command holds the Ofproto writer mutex
// (declared locks_ofproto: Control takes it)
// (the neighbour cache has its own lock too: translation learns into it).
#include <mutex>
#include <sstream>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "ofproto/ofproto.h"
#include "ofproto/port_columns.h"
#include "ofproto/udpif.h"

namespace keel::cli {

namespace {

struct TnlArgs {
  std::string a, b, c;
  std::vector<std::string> words;
  void reset() {
    a.clear();
    b.clear();
    c.clear();
    words.clear();
  }
};

Result<ofproto::IpPrefix> prefix_arg(const std::string& s, const char* what) {
  auto p = ofproto::IpPrefix::parse(s);
  if (!p)
    return invalid(std::string(what) + ": '" + s +
                   "' is not ADDR/LEN (an IPv4 address and 0..32, or an IPv6 address and 0..128)");
  return *p;
}

}  // namespace

void add_tunnel_commands(CommandTree::Impl& t) {
  // Declarations (command_tree_impl.h: CommandDecl).
  t.declare("ip-add", control::Access::change, false, kLocksOfproto);
  t.declare("ip-del", control::Access::change, false, kLocksOfproto);
  t.declare("route-add", control::Access::change, false, kLocksOfproto);
  t.declare("route-del", control::Access::change, false, kLocksOfproto);
  t.declare("route-show", control::Access::show, false, kLocksOfproto);
  t.declare("neigh-set", control::Access::change, false, kLocksOfproto);
  t.declare("neigh-show", control::Access::show, false, kLocksOfproto);
  t.declare("neigh-flush", control::Access::change, false, kLocksOfproto);
  t.declare("tnl-ports-show", control::Access::show, false, kLocksOfproto);
  t.declare("set bridge", control::Access::change, false, kLocksOfproto);
  t.declare("set tunnel-combine", control::Access::change, false, kLocksOfproto);

  auto a = std::make_shared<TnlArgs>();
  ofproto::Ofproto& of = t.sys.ofproto();
  auto cmd = [a](CLI::App* parent, const std::string& name, const std::string& help) {
    CLI::App* c = parent->add_subcommand(name, help);
    c->preparse_callback([a](size_t) { a->reset(); });
    return c;
  };
  // Under the writer mutex (Control's); a change wakes the revalidator (translation
  // reads what these change).
  auto run = [&t, &of](auto&& body, bool changes = true) {
    return [&t, &of, body, changes] {
      {
        body();
        of.reclaim();
      }
      if (changes && t.status.ok())
        if (ofproto::Udpif* u = t.sys.udpif()) u->kick();
    };
  };

  // --- bridge addresses ---
  auto* ipadd =
      cmd(&t.app, "ip-add", "give a bridge's LOCAL port an address: ip-add BR ADDR/LEN (IPv4 or IPv6)");
  ipadd->add_option("BR", a->a, "bridge")->required();
  ipadd->add_option("ADDR", a->b, "ADDR/LEN")->required();
  ipadd->callback(run([&t, &of, a] {
    auto p = prefix_arg(a->b, "ip-add");
    if (!p) {
      t.status = std::move(p).take_status();
      return;
    }
    t.status = of.ip_add(a->a, *p);
  }));
  auto* ipdel = cmd(&t.app, "ip-del", "remove a bridge address: ip-del BR ADDR/LEN");
  ipdel->add_option("BR", a->a, "bridge")->required();
  ipdel->add_option("ADDR", a->b, "ADDR/LEN")->required();
  ipdel->callback(run([&t, &of, a] {
    auto p = prefix_arg(a->b, "ip-del");
    if (!p) {
      t.status = std::move(p).take_status();
      return;
    }
    t.status = of.ip_del(a->a, *p);
  }));

  // --- routes ---
  auto* radd =
      cmd(&t.app, "route-add", "add a route (as ovs-appctl ovs/route/add): route-add PREFIX BRIDGE [GW]");
  radd->add_option("PREFIX", a->a, "ADDR/LEN")->required();
  radd->add_option("BRIDGE", a->b,
                   "output bridge (it must own an address on the prefix's or gateway's network)")
      ->required();
  radd->add_option("GW", a->c, "gateway");
  radd->callback(run([&t, &of, a] {
    auto p = ofproto::IpPrefix::parse(a->a);
    if (!p) {
      t.status = invalid("Invalid parameters");
      return;
    }
    ofproto::IpAddr gw{};
    if (!a->c.empty()) {
      auto g = ofproto::IpAddr::parse(a->c);
      if (!g || g->is_v4() != p->addr.is_v4()) {
        t.status =
            invalid(p->addr.is_v4() ? "Invalid pkt_mark or gateway" : "Invalid pkt_mark or IPv6 gateway");
        return;
      }
      gw = *g;
    }
    t.status = of.route_add(*p, a->b, gw);
  }));
  auto* rdel = cmd(&t.app, "route-del", "delete a route added by route-add: route-del PREFIX");
  rdel->add_option("PREFIX", a->a, "ADDR/LEN")->required();
  rdel->callback(run([&t, &of, a] {
    auto p = ofproto::IpPrefix::parse(a->a);
    if (!p) {
      t.status = invalid("Invalid parameters");
      return;
    }
    t.status = of.route_del(*p);
  }));
  auto* rshow = cmd(&t.app, "route-show", "the route table, as ovs-appctl ovs/route/show");
  t.add_format(rshow);
  rshow->callback(run(
      [&t, &of] {
        const auto st = of.tunnel_state();
        if (t.format == "json") {
          Json j;
          j.begin_object().begin_array("routes");
          for (const ofproto::Route& r : st->routes->routes()) {
            j.begin_object()
                .field("prefix", r.prefix.to_string())
                .field("dev", r.bridge)
                .field("gw", r.gw.is_zero() ? std::string() : r.gw.to_string())
                .field("src", r.src.to_string())
                .field("type", r.user ? "user" : "cached")
                .field("local", r.local)
                .field("priority", uint64_t{r.priority()})
                .end_object();
          }
          j.end_array().end_object();
          t.print(j.str() + "\n");
          return;
        }
        t.print(st->routes->format());
      },
      false));

  // --- neighbours ---
  auto* nset =
      cmd(&t.app, "neigh-set", "a static neighbour (as ovs-appctl tnl/neigh/set): neigh-set BR IP MAC");
  nset->add_option("BR", a->a, "bridge")->required();
  nset->add_option("IP", a->b, "IPv4 or IPv6 address")->required();
  nset->add_option("MAC", a->c, "its MAC")->required();
  nset->callback(run([&t, &of, a] {
    auto ip = ofproto::IpAddr::parse(a->b);
    if (!ip) {
      t.status = invalid("bad IP address");
      return;
    }
    auto mac = ofproto::parse_mac(a->c);
    if (!mac) {
      t.status = invalid("bad MAC address");
      return;
    }
    t.status = of.neigh_set(a->a, *ip, *mac);
  }));
  auto* nshow = cmd(&t.app, "neigh-show", "the neighbour cache, as ovs-appctl tnl/neigh/show");
  t.add_format(nshow);
  nshow->callback(run(
      [&t, &of] {
        if (t.format == "json") {
          Json j;
          j.begin_object().begin_array("neighbors");
          for (const auto& e : of.neighbors().entries())
            j.begin_object()
                .field("ip", e.ip.to_string())
                .field("mac", ofproto::format_mac(e.mac))
                .field("bridge", e.bridge)
                .field("static", e.is_static)
                .end_object();
          j.end_array().end_object();
          t.print(j.str() + "\n");
          return;
        }
        t.print(of.neighbors().format());
      },
      false));
  auto* nflush = cmd(&t.app, "neigh-flush", "forget the neighbours (of BR only, with BR), static ones too");
  nflush->add_option("BR", a->a, "bridge");
  nflush->callback(run([&t, &of, a] {
    t.status = of.neigh_flush(a->a);
    if (t.status.ok()) t.print("OK\n");
  }));

  auto* pshow = cmd(&t.app, "tnl-ports-show", "the tunnel vports listening, as ovs-appctl tnl/ports/show");
  t.add_format(pshow);
  pshow->callback(run(
      [&t, &of] {
        const auto st = of.tunnel_state();
        if (t.format == "json") {
          Json j;
          j.begin_object().begin_array("ports");
          for (const auto& v : st->vports)
            j.begin_object()
                .field("name", v.name)
                .field("port", uint64_t{v.id})
                .field("type", ofproto::tunnel_type_name(v.type))
                .field("dst_port", uint64_t{v.dst_port})
                .field("ref_cnt", uint64_t{v.refs})
                .end_object();
          j.end_array().end_object();
          t.print(j.str() + "\n");
          return;
        }
        t.print(st->format_vports());
      },
      false));

  // --- set bridge BR other_config:hwaddr=MAC, set tunnel-combine ---
  if (CLI::App* set = t.app.get_subcommand("set")) {
    auto* sb =
        cmd(set, "bridge",
            "ovs-vsctl set Bridge: set bridge BR other_config:hwaddr=MAC (other_config:hwaddr=[] for the "
            "default: the lowest port MAC)");
    sb->add_option("BR", a->a, "bridge")->required();
    sb->add_option("COLUMNS", a->words, "other_config:hwaddr=MAC")->required();
    sb->callback(run([&t, &of, a] {
      std::optional<std::optional<flow::EthAddr>> mac;
      for (const std::string& w : a->words) {
        static constexpr std::string_view kKey = "other_config:hwaddr=";
        if (w.rfind(kKey, 0) != 0) {
          t.status = invalid("set bridge: '" + w + "': keel takes only other_config:hwaddr=MAC here");
          return;
        }
        std::string v = w.substr(kKey.size());
        if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
        if (v.empty() || v == "[]") {
          mac = std::optional<flow::EthAddr>{};
          continue;
        }
        auto m = ofproto::parse_mac(v);
        if (!m) {
          t.status = invalid("other_config:hwaddr=" + v + ": not a MAC (xx:xx:xx:xx:xx:xx)");
          return;
        }
        mac = m;
      }
      if (mac) t.status = of.set_bridge_hwaddr(a->a, *mac);
    }));
    auto* comb =
        cmd(set, "tunnel-combine",
            "translate a tunnel's underlay in the same pass (true, default: clone(tnl_push(...),...)) or "
            "recirculate after tnl_push (false)");
    comb->add_option("BOOL", a->a, "true or false")->required()->check(CLI::IsMember({"true", "false"}));
    comb->callback(run([&of, a] { of.set_tunnel_combine(a->a == "true"); }));
  }

  // --- running config ---
  t.add_config_section({"tunnels", 300,
                        [&t, &of](std::vector<std::string>& lines) {
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          const auto st = of.tunnel_state();
                          for (const ofproto::BridgeAddr& b : st->addrs->all()) {
                            if (b.mac_configured)
                              lines.push_back("set bridge " + b.bridge_name +
                                              " other_config:hwaddr=" + ofproto::format_mac(b.mac));
                            for (const ofproto::IpPrefix& p : b.addrs)
                              lines.push_back("ip-add " + b.bridge_name + " " + p.to_string());
                          }
                          for (ofproto::Bridge* b : of.bridges())
                            for (const auto& p : b->ports()->ports)
                              if (p.tunnel)
                                lines.push_back("add-port " + b->name() + " " + p.name + " " +
                                                ofproto::format_port_columns(p));
                        },
                        [&t, &of] {
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          for (ofproto::Bridge* b : of.bridges()) {
                            std::vector<std::string> tunnels;
                            for (const auto& p : b->ports()->ports)
                              if (p.tunnel) tunnels.push_back(p.name);
                            for (const auto& n : tunnels) (void)of.del_port(b->name(), n);
                          }
                          const auto st = of.tunnel_state();
                          for (const ofproto::BridgeAddr& b : st->addrs->all()) {
                            for (const ofproto::IpPrefix& p : b.addrs) (void)of.ip_del(b.bridge_name, p);
                            if (b.mac_configured) (void)of.set_bridge_hwaddr(b.bridge_name, std::nullopt);
                          }
                          of.reclaim();
                        }});
  t.add_config_section({"underlay", 400,
                        [&t, &of](std::vector<std::string>& lines) {
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          const auto st = of.tunnel_state();
                          for (const ofproto::Route& r : st->routes->routes())
                            if (r.user)
                              lines.push_back("route-add " + r.prefix.to_string() + " " + r.bridge +
                                              (r.gw.is_zero() ? "" : " " + r.gw.to_string()));
                          for (const auto& e : of.neighbors().static_entries())
                            lines.push_back("neigh-set " + e.bridge + " " + e.ip.to_string() + " " +
                                            ofproto::format_mac(e.mac));
                          if (!st->combine) lines.push_back("set tunnel-combine false");
                        },
                        [&t, &of] {
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          const auto st = of.tunnel_state();
                          for (const ofproto::Route& r : st->routes->routes())
                            if (r.user) (void)of.route_del(r.prefix);
                          of.neighbors().flush();
                          if (!st->combine) of.set_tunnel_combine(true);
                        }});
}

}  // namespace keel::cli

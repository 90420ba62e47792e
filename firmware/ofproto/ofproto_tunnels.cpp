// Ofproto's tunnel and underlay methods (ofproto.h, "tunnels and the
// underlay"): tunnel ports and their shared vports, bridge addresses and
// MACs, routes, neighbours, the tunnel-combine knob, and frames sent out of
// a bridge. Writers hold the writer mutex; every change ends with
// publish_tunnels(), which swaps in a new TunnelState that translation
// reads lock-free (ofproto.h, tunnel.h).
#include <algorithm>

#include "datapath/datapath.h"
#include "keel/hal/port.h"
#include "ofproto/bond.h"
#include "ofproto/ofproto.h"

namespace keel::ofproto {

namespace {

datapath::VportType vport_type(TunnelType t) {
  switch (t) {
    case TunnelType::vxlan:
      return datapath::VportType::vxlan;
    case TunnelType::geneve:
      return datapath::VportType::geneve;
    case TunnelType::gre:
      return datapath::VportType::gre;
  }
  return datapath::VportType::vxlan;
}

}  // namespace

// ------------------------------------------------------------ tunnel ports --

Result<TunnelOptions> Ofproto::tunnel_options_of(std::string_view port, TunnelType type,
                                                 const TunnelOptions* base,
                                                 const std::vector<std::pair<std::string, std::string>>& kv,
                                                 std::string_view except) const {
  TunnelOptions o = base ? *base : default_tunnel_options(type);
  // OVS reads key first and in_key/out_key over it (parse_key looks for
  // in_key/out_key, then key), whatever their order on the command line.
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& [k, v] : kv) {
      if ((k == "key") != (pass == 0)) continue;
      if (Status st = apply_tunnel_option(port, k, v, o); !st.ok()) return st;
    }
  if (Status st = check_tunnel_options(port, o); !st.ok()) return st;
  const auto state = tunnel_state();
  if (o.has_local() && !state->addrs->is_local(o.local_ip))
    return invalid(std::string(port) + ": local_ip=" + o.local_ip.to_string() +
                   ": no bridge has that address (ip-add BR " + o.local_ip.to_string() + "/LEN first)");
  if (const TunnelPort* d = state->tunnels->duplicate_of(o, except))
    return error(Errc::already_exists, std::string(port) +
                                           ": a tunnel with the same type, dst_port, key, remote_ip "
                                           "and local_ip exists: port " +
                                           d->name + " (a received packet could not tell them apart)");
  return o;
}

Result<uint16_t> Ofproto::vport_ref(TunnelType type, uint16_t dst_port) {
  const std::string name = tunnel_vport_name(type, dst_port);
  for (VportRef& v : vports_)
    if (v.name == name) {
      ++v.refs;
      return v.id;
    }
  auto id = dp_.add_vport(name, vport_type(type), type == TunnelType::gre ? 0 : dst_port);
  if (!id) return std::move(id).take_status();
  vports_.push_back(VportRef{name, *id, type, type == TunnelType::gre ? uint16_t{0} : dst_port, 1});
  return *id;
}

void Ofproto::vport_unref(uint16_t id) {
  for (auto it = vports_.begin(); it != vports_.end(); ++it) {
    if (it->id != id) continue;
    if (--it->refs == 0) {
      (void)dp_.del_vport(id);  // ours, added by vport_ref: cannot be missing
      vports_.erase(it);
    }
    return;
  }
}

Status Ofproto::add_tunnel_port(Bridge& b, std::string_view port, const PortOptions& opts) {
  const TunnelType type = *parse_tunnel_type(*opts.type);
  if (dp_.find_port(port))
    return invalid("type=" + *opts.type + ": " + std::string(port) +
                   " is a --port spec's port (a tunnel port is a name no --port spec has)");
  for (Bridge* c : bridges())
    if (c->ports()->by_name(port))
      return error(Errc::already_exists, "port " + std::string(port) + " is already in bridge " + c->name());
  if (opts.ofport && (*opts.ofport == 0 || *opts.ofport >= flow::kOfppMax))
    return invalid("ofport_request " + std::to_string(*opts.ofport) + " out of range (1.." +
                   std::to_string(flow::kOfppMax - 1) + ")");
  if (opts.tag || !opts.trunks.empty() || opts.vlan_mode || opts.mtu_request || opts.n_rxq ||
      opts.rxq_affinity)
    return invalid(std::string(port) +
                   ": a tunnel port takes options:* and ofport_request (no VLAN, MTU or queue columns)");
  auto o = tunnel_options_of(port, type, nullptr, opts.tunnel_options);
  if (!o) return std::move(o).take_status();
  auto vp = vport_ref(type, o->dst_port);
  if (!vp) return std::move(vp).take_status().prefix(std::string(port));
  auto tp = std::make_shared<TunnelPort>();
  tp->name = std::string(port);
  tp->bridge = &b;
  tp->bridge_name = b.name();
  tp->vport = *vp;
  tp->options = *o;
  PortConfig pc;
  pc.name = std::string(port);
  pc.ofport = opts.ofport.value_or(0);
  pc.dp_port = *vp;
  // Bridge::add_port picks the number; the TunnelPort carries it too, so
  // it is completed in the same snapshot.
  Status st = b.add_ports({pc}, [&](std::vector<PortConfig>& ports) -> Status {
    tp->ofport = ports.at(0).ofport;
    ports.at(0).tunnel = tp;
    return {};
  });
  if (!st.ok()) {
    vport_unref(*vp);
    return st;
  }
  publish_tunnels();
  return {};
}

Status Ofproto::set_tunnel_options(std::string_view port,
                                   const std::vector<std::pair<std::string, std::string>>& options) {
  Bridge* b = nullptr;
  const PortConfig* cur = nullptr;
  for (Bridge* c : bridges())
    if (const PortConfig* p = c->ports()->by_name(port)) b = c, cur = p;
  if (!cur) return error(Errc::not_found, "no interface " + std::string(port) + " in any bridge");
  if (!cur->tunnel)
    return invalid("options:" + options.at(0).first +
                   ": keel takes no Interface options but n_rxq for a port that is not a tunnel");
  const TunnelPort old = *cur->tunnel;
  auto o = tunnel_options_of(port, old.options.type, &old.options, options, port);
  if (!o) return std::move(o).take_status();
  uint16_t vp = old.vport;
  if (o->dst_port != old.options.dst_port) {
    auto v = vport_ref(o->type, o->dst_port);
    if (!v) return std::move(v).take_status().prefix(std::string(port));
    vp = *v;
  }
  auto tp = std::make_shared<TunnelPort>(old);
  tp->options = *o;
  tp->vport = vp;
  Status st = b->edit_ports([&](std::vector<PortConfig>& ports) -> Status {
    for (PortConfig& p : ports)
      if (p.name == port) {
        p.tunnel = tp;
        p.dp_port = vp;
      }
    return {};
  });
  if (!st.ok()) {
    if (vp != old.vport) vport_unref(vp);
    return st;
  }
  if (vp != old.vport) vport_unref(old.vport);
  publish_tunnels();
  return {};
}

void Ofproto::tunnel_port_gone(const PortConfig& pc) {
  if (!pc.tunnel) return;
  vport_unref(pc.tunnel->vport);
  publish_tunnels();
}

// --------------------------------------------------------- bridge addresses --

Ofproto::BridgeUnderlay* Ofproto::underlay_of(std::string_view bridge, bool create) {
  for (auto& [n, u] : underlay_)
    if (n == bridge) return &u;
  if (!create) return nullptr;
  underlay_.emplace_back(std::string(bridge), BridgeUnderlay{});
  return &underlay_.back().second;
}

Status Ofproto::ip_add(std::string_view bridge, const IpPrefix& addr) {
  if (!find_bridge(bridge)) return error(Errc::not_found, "no bridge " + std::string(bridge));
  if (addr.addr.is_zero() || (addr.addr.is_v4() && addr.addr.v4_addr() == 0) || addr.addr.is_multicast())
    return invalid("ip-add: " + addr.to_string() + " is not a unicast address");
  if (const BridgeAddr* o = tunnel_state()->addrs->owner(addr.addr))
    return error(Errc::already_exists,
                 "ip-add: " + addr.addr.to_string() + " is already an address of bridge " + o->bridge_name);
  BridgeUnderlay* u = underlay_of(bridge, true);
  if (!u->internal_vport) {
    auto id = dp_.add_vport(std::string(bridge), datapath::VportType::internal, 0);
    if (!id) return std::move(id).take_status().prefix("ip-add " + std::string(bridge));
    u->internal_vport = *id;
  }
  u->addrs.push_back(addr);
  publish_tunnels();
  return {};
}

Status Ofproto::ip_del(std::string_view bridge, const IpPrefix& addr) {
  if (!find_bridge(bridge)) return error(Errc::not_found, "no bridge " + std::string(bridge));
  BridgeUnderlay* u = underlay_of(bridge, false);
  auto it = u ? std::find(u->addrs.begin(), u->addrs.end(), addr) : std::vector<IpPrefix>::iterator{};
  if (!u || it == u->addrs.end())
    return error(Errc::not_found,
                 "ip-del: bridge " + std::string(bridge) + " has no address " + addr.to_string());
  const auto state = tunnel_state();
  for (const auto& tp : state->tunnels->ports())
    if (tp->options.local_ip == addr.addr)
      return invalid("ip-del: tunnel port " + tp->name + " has local_ip=" + addr.addr.to_string() +
                     " (del-port it first)");
  // User routes whose source is this address would be left without one.
  for (const Route& r : routes_->routes())
    if (r.user && r.src == addr.addr)
      return invalid("ip-del: route " + r.prefix.to_string() + " uses " + addr.addr.to_string() +
                     " as its source (route-del it first)");
  u->addrs.erase(it);
  if (u->addrs.empty() && u->internal_vport) {
    (void)dp_.del_vport(u->internal_vport);  // ours, added by ip_add
    u->internal_vport = 0;
  }
  publish_tunnels();
  return {};
}

Status Ofproto::set_bridge_hwaddr(std::string_view bridge, std::optional<flow::EthAddr> mac) {
  if (!find_bridge(bridge)) return error(Errc::not_found, "no bridge " + std::string(bridge));
  if (mac && ((mac->b[0] & 1) || *mac == flow::EthAddr{}))
    return invalid("other_config:hwaddr=" + format_mac(*mac) + ": not a unicast MAC");
  underlay_of(bridge, true)->hwaddr = mac;
  publish_tunnels();
  return {};
}

flow::EthAddr Ofproto::bridge_mac(std::string_view bridge) const {
  // OVS bridge_pick_local_hw_addr: other_config:hwaddr, else the lowest
  // MAC of the bridge's ports (tunnels have none), else one from the name.
  for (const auto& [n, u] : underlay_)
    if (n == bridge && u.hwaddr) return *u.hwaddr;
  std::optional<flow::EthAddr> best;
  if (Bridge* b = find_bridge(bridge))
    for (const PortConfig& pc : b->ports()->ports) {
      if (pc.tunnel) continue;
      hal::Port* p = dp_.port(pc.dp_port);
      if (!p) continue;
      const hal::MacAddr m = p->mac();
      flow::EthAddr e;
      std::copy(m.begin(), m.end(), e.b);
      if (e == flow::EthAddr{} || (e.b[0] & 1)) continue;
      if (!best || std::lexicographical_compare(e.b, e.b + 6, best->b, best->b + 6)) best = e;
    }
  return best ? *best : bridge_default_mac(bridge);
}

// ------------------------------------------------------------------- routes --

Status Ofproto::route_add(const IpPrefix& prefix, std::string_view bridge, const IpAddr& gw) {
  if (!find_bridge(bridge)) return error(Errc::not_found, "route-add: no bridge " + std::string(bridge));
  auto t = RouteTable::add_user(*routes_, prefix, bridge, gw, *tunnel_state()->addrs);
  if (!t) return std::move(t).take_status();
  routes_ = std::make_shared<const RouteTable>(std::move(t.value()));
  publish_tunnels();
  return {};
}

Status Ofproto::route_del(const IpPrefix& prefix) {
  auto t = RouteTable::del_user(*routes_, prefix);
  if (!t) return std::move(t).take_status();
  routes_ = std::make_shared<const RouteTable>(std::move(t.value()));
  publish_tunnels();
  return {};
}

// --------------------------------------------------------------- neighbours --

Status Ofproto::neigh_set(std::string_view bridge, const IpAddr& ip, const flow::EthAddr& mac) {
  if (!find_bridge(bridge)) return error(Errc::not_found, "neigh-set: no bridge " + std::string(bridge));
  neigh_.set_static(bridge, ip, mac);
  return {};
}

Status Ofproto::neigh_flush(std::string_view bridge) {
  if (!bridge.empty() && !find_bridge(bridge))
    return error(Errc::not_found, "neigh-flush: no bridge " + std::string(bridge));
  neigh_.flush(bridge);
  return {};
}

void Ofproto::set_tunnel_combine(bool on) {
  tunnel_combine_ = on;
  publish_tunnels();
  for (Bridge* b : bridges()) b->invalidate_translations();
}

// ----------------------------------------------------------------- publish --

void Ofproto::forget_bridge_underlay(std::string_view bridge) {
  std::erase_if(underlay_, [&](auto& e) {
    if (e.first != bridge) return false;
    if (e.second.internal_vport) (void)dp_.del_vport(e.second.internal_vport);
    return true;
  });
  std::vector<Route> keep;
  for (const Route& r : routes_->routes())
    if (r.user && r.bridge != bridge) keep.push_back(r);
  routes_ = std::make_shared<const RouteTable>(std::move(keep));
  neigh_.flush(bridge);
}

void Ofproto::publish_tunnels() {
  auto s = std::make_shared<TunnelState>();
  std::vector<std::shared_ptr<const TunnelPort>> tps;
  for (Bridge* b : bridges())
    for (const PortConfig& pc : b->ports()->ports)
      if (pc.tunnel) tps.push_back(pc.tunnel);
  s->tunnels = std::make_shared<const TunnelTable>(std::move(tps));
  std::vector<BridgeAddr> addrs;
  for (Bridge* b : bridges()) {
    BridgeAddr a;
    a.bridge_name = b->name();
    a.bridge = b;
    a.mac = bridge_mac(b->name());
    if (const BridgeUnderlay* u = underlay_of_const(b->name())) {
      a.mac_configured = u->hwaddr.has_value();
      a.internal_vport = u->internal_vport;
      a.addrs = u->addrs;
    }
    addrs.push_back(std::move(a));
  }
  s->addrs = std::make_shared<const BridgeAddrs>(std::move(addrs));
  routes_ = std::make_shared<const RouteTable>(RouteTable::with_connected(*routes_, *s->addrs));
  s->routes = routes_;
  s->combine = tunnel_combine_;
  s->generation = ++tunnel_gen_;
  // In creation order, as OVS's tnl-ports list.
  for (const VportRef& v : vports_) s->vports.push_back({v.name, v.id, v.type, v.dst_port, v.refs});
  std::atomic_store(&tunnel_state_, std::shared_ptr<const TunnelState>(std::move(s)));
}

const Ofproto::BridgeUnderlay* Ofproto::underlay_of_const(std::string_view bridge) const {
  for (const auto& [n, u] : underlay_)
    if (n == bridge) return &u;
  return nullptr;
}

// ------------------------------------------------------------- frames out --

Status Ofproto::send_from_bridge(const Bridge& bridge, std::span<const uint8_t> frame,
                                 uint32_t except_ofport) {
  const auto ports = bridge.ports();
  size_t sent = 0, tried = 0;
  Status last;
  std::vector<std::string> bonds_done;
  for (const PortConfig& pc : ports->ports) {
    if (pc.tunnel || pc.ofport == except_ofport) continue;
    uint16_t out = pc.dp_port;
    if (pc.bond_obj) {
      // One member per bond: the one the bond picks for this frame (its
      // active member in active-backup), once.
      if (std::find(bonds_done.begin(), bonds_done.end(), pc.bond) != bonds_done.end()) continue;
      bonds_done.push_back(pc.bond);
      if (except_ofport != flow::kOfppNone && pc.bond_ofport == except_ofport) continue;
      flow::FlowKey k{};
      if (frame.size() >= 14) {
        std::copy(frame.begin(), frame.begin() + 6, k.dl_dst.b);
        std::copy(frame.begin() + 6, frame.begin() + 12, k.dl_src.b);
      }
      auto m = pc.bond_obj->choose_output(k, nullptr, 0);
      if (!m) continue;
      out = m->dp_port;
    }
    ++tried;
    Status st = dp_.send_packet(out, frame);
    if (st.ok())
      ++sent;
    else
      last = std::move(st);
  }
  if (sent) return {};
  if (!tried) return error(Errc::unavailable, "bridge " + bridge.name() + " has no port to send on");
  return last;
}

}  // namespace keel::ofproto

// make_udpif: see slow_path.h.
#include "ofproto/slow_path.h"

#include <cstring>

#include "datapath/datapath.h"
#include "flow/of_match_syntax.h"
#include "keel/hal/cpu.h"
#include "ofproto/xlate.h"

namespace keel::ofproto {

static_assert(XlateTunnels::kRecircBase == kTnlRecircBase, "one tunnel recirculation range");

// --- OfprotoTunnels -----------------------------------------------------------

OfprotoTunnels::OfprotoTunnels(Ofproto& ofp) : ofp_(ofp), st_(ofp.tunnel_state()) {}

bool OfprotoTunnels::active() const {
  return st_ && (!st_->vports.empty() || !st_->addrs->all().empty() || !st_->tunnels->ports().empty());
}

std::optional<XlateTunnelPort> OfprotoTunnels::tunnel_port(const PortConfig& p) const {
  if (!p.tunnel) return std::nullopt;
  const TunnelOptions& o = p.tunnel->options;
  XlateTunnelPort t;
  t.type = o.type == TunnelType::vxlan    ? XlateTunnelType::vxlan
           : o.type == TunnelType::geneve ? XlateTunnelType::geneve
                                          : XlateTunnelType::gre;
  t.vport = p.tunnel->vport;
  t.dst_port = o.type == TunnelType::gre ? 0 : o.dst_port;
  t.remote = o.remote_ip.a;
  t.local = o.local_ip.a;
  t.remote_flow = o.remote_flow;
  t.local_flow = o.local_flow;
  t.out_key = o.out_key.value;
  t.out_key_flow = o.out_key.flow;
  t.out_key_present = o.out_key.present || o.out_key.flow;
  // VXLAN and GENEVE always carry a VNI: OVS sets the key flag for them.
  if (o.type != TunnelType::gre) t.out_key_present = true;
  t.tos = o.tos;
  t.ttl = o.ttl ? o.ttl : 64;
  t.tos_inherit = o.tos_inherit;
  t.ttl_inherit = o.ttl_inherit;
  t.csum = o.csum;
  t.dont_fragment = o.df_default;
  return t;
}

std::optional<XlateRoute> OfprotoTunnels::route(const flow::In6Addr& dst, uint32_t) const {
  std::optional<RouteLookup> r = st_->routes->lookup(IpAddr::v6(dst));
  if (!r) return std::nullopt;
  XlateRoute x;
  x.dev = r->bridge;
  x.gw = r->gw.a;
  x.src = r->src.a;
  if (const BridgeAddr* b = st_->addrs->find(r->bridge)) {
    x.bridge = b->bridge;
    x.local_vport = b->internal_vport;
  }
  if (!x.local_vport) x.bridge = nullptr;  // an underlay bridge has its internal vport
  return x;
}

std::optional<flow::EthAddr> OfprotoTunnels::neighbor(const Bridge& br, const flow::In6Addr& ip) const {
  return ofp_.neighbors().lookup(br.name(), IpAddr::v6(ip));
}

std::optional<flow::EthAddr> OfprotoTunnels::bridge_mac(const Bridge& br) const {
  if (const BridgeAddr* b = st_->addrs->find(br.name())) return b->mac;
  return std::nullopt;
}

std::vector<flow::In6Addr> OfprotoTunnels::bridge_addrs(const Bridge& br) const {
  std::vector<flow::In6Addr> out;
  if (const BridgeAddr* b = st_->addrs->find(br.name()))
    for (const IpPrefix& p : b->addrs) out.push_back(p.addr.a);
  return out;
}

uint16_t OfprotoTunnels::local_vport(const Bridge& br) const {
  const BridgeAddr* b = st_->addrs->find(br.name());
  return b ? b->internal_vport : 0;
}

std::vector<XlateListener> OfprotoTunnels::listeners() const {
  std::vector<XlateListener> out;
  for (const TunnelState::Vport& v : st_->vports) {
    if (!v.refs) continue;
    if (v.type == TunnelType::gre)
      out.push_back({v.id, 47, 0});
    else
      out.push_back({v.id, 17, v.dst_port});
  }
  return out;
}

std::optional<XlateTunnelRx> OfprotoTunnels::receive(const flow::FlowKey& flow) const {
  const TunnelReceive r = st_->tunnels->receive(flow, nullptr);
  if (!r) return std::nullopt;
  return XlateTunnelRx{r.bridge, r.ofport};
}

bool OfprotoTunnels::is_tunnel_vport(uint32_t dp_port) const {
  return dp_port <= UINT16_MAX && st_->vport(static_cast<uint16_t>(dp_port)) != nullptr;
}

Bridge* OfprotoTunnels::bridge_of_local_vport(uint32_t vport) const {
  if (!vport || vport > UINT16_MAX) return nullptr;
  const BridgeAddr* b = st_->addrs->by_internal_vport(static_cast<uint16_t>(vport));
  return b ? b->bridge : nullptr;
}

bool OfprotoTunnels::combine() const { return st_->combine; }

void OfprotoTunnels::send_neighbor_request(Bridge& br, const flow::EthAddr& smac, const flow::In6Addr& src,
                                           const flow::In6Addr& dst) {
  const IpAddr s = IpAddr::v6(src), d = IpAddr::v6(dst);
  const std::vector<uint8_t> frame =
      d.is_v4() ? compose_arp_request(smac, s.v4_addr(), d.v4_addr()) : compose_nd_solicit(smac, src, dst);
  (void)ofp_.send_from_bridge(br, frame);  // no port up: nothing to do (the next packet asks again)
}

void OfprotoTunnels::neighbor_learn(Bridge& br, const flow::In6Addr& ip, const flow::EthAddr& mac) {
  ofp_.neighbors().learn(br.name(), IpAddr::v6(ip), mac);
}

// Every publish bumps the snapshot's generation and every neighbour
// change the cache's; both only grow, so their sum moves whenever either
// does.
uint64_t OfprotoTunnels::generation() const {
  return (st_ ? st_->generation : 0) + ofp_.neighbors().generation();
}

// --- replies for LOCAL (slow_path(action)) ---------------------------------------

std::vector<uint8_t> neighbor_reply_for(const TunnelState& st, const Bridge& bridge, std::span<const uint8_t> f) {
  const BridgeAddr* b = st.addrs->find(bridge.name());
  if (!b || f.size() < 14) return {};
  auto owns = [&](const IpAddr& ip) {
    for (const IpPrefix& p : b->addrs)
      if (p.addr == ip) return true;
    return false;
  };
  const uint16_t type = static_cast<uint16_t>(f[12] << 8 | f[13]);
  if (type == 0x0806 && f.size() >= 42) {  // ARP request, Ethernet/IPv4
    if (f[20] != 0 || f[21] != 1) return {};
    flow::EthAddr sha;
    std::memcpy(sha.b, &f[22], 6);
    flow::be32 spa, tpa;
    std::memcpy(&spa, &f[28], 4);
    std::memcpy(&tpa, &f[38], 4);
    if (!owns(IpAddr::v4(tpa))) return {};
    return compose_arp_reply(b->mac, tpa, sha, spa);
  }
  // IPv6 / ICMPv6 neighbour solicitation (no extension headers).
  if (type == 0x86dd && f.size() >= 14 + 40 + 24 && f[14 + 6] == 58 && f[14 + 40] == 135) {
    flow::In6Addr src, target;
    std::memcpy(src.b, &f[14 + 8], 16);
    std::memcpy(target.b, &f[14 + 40 + 8], 16);
    if (!owns(IpAddr::v6(target))) return {};
    flow::EthAddr to;
    std::memcpy(to.b, &f[6], 6);
    return compose_nd_advert(b->mac, target, to, src);
  }
  return {};
}

std::unique_ptr<Udpif> make_udpif(Ofproto& ofp) {
  Translator translate = [&ofp](const flow::FlowKey& flow, bool may_learn, Translation& out) -> Status {
    OfprotoTunnels tnl(ofp);
    const bool tunnels = tnl.active();
    out.tunnel = tunnels;
    out.tnl_gen = tnl.generation();
    Bridge* brp = nullptr;
    uint32_t in_ofport = 0;
    using datapath::DropReason;
    auto drop_reason = [&out](DropReason r) { out.drop_reason = static_cast<uint8_t>(r); };
    if (tunnels && is_tnl_recirc_id(flow.recirc_id)) {
      // The fallback's second pass: the underlay bridge, from LOCAL.
      brp = tnl.bridge_of_local_vport(tnl_recirc_vport(flow.recirc_id));
      in_ofport = flow::kOfppLocal;
      if (!brp) {  // the bridge lost its address since: drop
        drop_reason(DropReason::kTnlOutputFailed);
        return {};
      }
    } else if (tunnels && tnl.is_tunnel_vport(flow.in_port)) {
      // After tnl_pop: the tunnel port the packet belongs to (OVS tnl_find).
      std::optional<XlateTunnelRx> rx = tnl.receive(flow);
      if (!rx || !rx->bridge) {
        out.tnl_no_port = true;  // unknown VNI / remote / key: a drop flow for just that
        out.wc = tunnel_receive_wc(flow);
        drop_reason(DropReason::kTnlNoPort);
        return {};
      }
      brp = rx->bridge;
      in_ofport = rx->ofport;
    } else {
      const PortOwner owner = ofp.port_owner(static_cast<uint16_t>(flow.in_port));
      brp = owner.bridge;
    }
    if (!brp) {  // not in a bridge: drop, nothing installed (out.bridge stays null)
      drop_reason(DropReason::kNoBridge);
      return {};
    }
    Bridge& br = *brp;
    // Generations first: a change racing with this translation then makes
    // the revalidator look again.
    out.rules_gen = br.rules_generation();
    XlateIn in{br};
    in.flow = flow;
    in.version = br.version();
    in.now_ns = hal::now_ns();
    in.may_learn = may_learn;
    in.tunnels = tunnels ? &tnl : nullptr;
    in.in_ofport = in_ofport;
    auto x = xlate(in);
    if (!x) return std::move(x).take_status();
    out.bridge = &br;
    out.actions = std::move(x->actions);
    out.wc = x->wc;
    out.rules = std::move(x->rules);
    out.uses_normal = x->uses_normal;
    out.deps = std::move(x->deps);
    out.mac_gen = x->mac_generation;
    out.mac_changed = x->mac_changed;
    for (auto& c : x->bond_choices)
      out.bond_accounts.push_back({std::move(c.bond), c.flow, c.vlan, std::move(c.loads), c.bucket});
    out.cacheable = x->cacheable;
    // Why an empty action list drops (show drops): the error, the tunnel
    // output that failed, or else the rules.
    if (out.actions.empty()) {
      switch (x->error) {
        case XlateError::ok:
          if (x->tnl_neigh_miss) drop_reason(DropReason::kTnlNeighMiss);
          else if (x->tnl_output_failed) drop_reason(DropReason::kTnlOutputFailed);
          break;
        case XlateError::recursion_too_deep: drop_reason(DropReason::kRecursionTooDeep); break;
        case XlateError::too_many_resubmits: drop_reason(DropReason::kTooManyResubmit); break;
        case XlateError::no_recirc_context: drop_reason(DropReason::kNoRecircContext); break;
        case XlateError::actions_too_long: drop_reason(DropReason::kActionsTooLong); break;
        case XlateError::invalid_tunnel_metadata: drop_reason(DropReason::kInvalidTunnelMetadata); break;
      }
    }
    if (x->underlay) {
      out.underlay = x->underlay;
      out.underlay_rules_gen = x->underlay_rules_generation;
      out.underlay_mac_gen = x->underlay_mac_generation;
      out.underlay_uses_normal = x->underlay_uses_normal;
      out.underlay_many = x->underlay_many;
    }
    return {};
  };
  // 0: the slow path took the packet (a reply sent, a LACPDU read, a
  // packet-in queued, or nothing it knows to do); else why it was dropped.
  ActionSink sink = [&ofp](const datapath::Upcall& u) -> uint8_t {
    const std::span<const uint8_t> ud(u.userdata, u.userdata_len);
    if (auto sp = decode_slow_path_userdata(ud); sp && *sp == SlowPathReason::action) {
      // An ARP request / neighbour solicitation for an address of the
      // bridge the frame entered (xlate.h): the reply goes back out of it.
      const uint16_t dp_port = static_cast<uint16_t>(u.key.get(KEEL_FLOW_WORD(in_port)) & 0xffffffffu);
      const PortOwner owner = ofp.port_owner(dp_port);
      if (!owner.bridge) return 0;
      const std::shared_ptr<const TunnelState> st = ofp.tunnel_state();
      const std::vector<uint8_t> reply =
          neighbor_reply_for(*st, *owner.bridge, u.frame_bytes());
      if (!reply.empty()) (void)ofp.send_from_bridge(*owner.bridge, reply);
      return 0;
    }
    if (auto sp = decode_slow_path_userdata(ud)) {
      // slow_path(lacp): a LACPDU received on a bond member goes to the
      // bond's Lacp (which counts what it can't parse).
      const uint16_t dp_port = static_cast<uint16_t>(u.key.get(KEEL_FLOW_WORD(in_port)) & 0xffffffffu);
      const PortOwner owner = ofp.port_owner(dp_port);
      if (!owner.bridge) return 0;
      auto ports = owner.bridge->ports();
      const PortConfig* pc = ports->by_dp_port(dp_port);
      if (pc && pc->lacp && *sp == SlowPathReason::lacp) {
        if (pc->lacp->process_packet(pc->bond_member, u.frame_bytes(),
                                     hal::now_ns() / 1'000'000) &&
            pc->bond_obj && pc->lacp->may_enable(pc->bond_member)) {
          // As OVS's process_special(): the member may carry traffic before
          // the next tick runs the bond.
          pc->bond_obj->set_may_enable(pc->bond_member, true);
        }
      }
      return 0;
    }
    auto cu = decode_controller_userdata(ud);
    if (!cu) return 0;  // not ours
    const PortOwner owner = ofp.port_owner(static_cast<uint16_t>(u.key.get(KEEL_FLOW_WORD(in_port)) & 0xffffffffu));
    PacketIn pi;
    pi.bridge = owner.bridge ? owner.bridge->name() : std::string();
    pi.in_port = cu->in_ofport;
    pi.table_id = cu->table_id;
    pi.cookie = cu->cookie;
    pi.reason = cu->reason;
    pi.controller_id = cu->controller_id;
    const std::span<const uint8_t> frame = u.frame_bytes();
    pi.total_len = static_cast<uint32_t>(frame.size());
    const uint32_t n = std::min<uint32_t>(static_cast<uint32_t>(frame.size()), cu->max_len);
    pi.data.assign(frame.data(), frame.data() + n);
    pi.time_ns = hal::now_ns();
    return ofp.push_packet_in(std::move(pi)) ? 0 : static_cast<uint8_t>(datapath::DropReason::kControllerQueueFull);
  };
  UdpifKnobs knobs{[&ofp] { return ofp.flow_limit(); }, [&ofp] { return ofp.max_idle_ms(); },
                   [&ofp] { return ofp.revalidate_interval_ms(); },
                   [&ofp] { return OfprotoTunnels(ofp).generation(); }};
  auto u = std::make_unique<Udpif>(ofp.datapath(), ofp.rcu(), std::move(translate), std::move(sink), std::move(knobs));
  // Bonds changed a decision (maintenance thread): a round now. The
  // System stops the Ofproto's maintenance thread before it destroys this.
  Udpif* raw = u.get();
  ofp.set_revalidate_hook([raw] { raw->kick(); });
  return u;
}

}  // namespace keel::ofproto

// make_udpif: see slow_path.h.
#include "ofproto/slow_path.h"

#include "datapath/datapath.h"
#include "keel/hal/cpu.h"
#include "ofproto/xlate.h"

namespace keel::ofproto {

std::unique_ptr<Udpif> make_udpif(Ofproto& ofp) {
  Translator translate = [&ofp](const flow::FlowKey& flow, bool may_learn, Translation& out) -> Status {
    const PortOwner owner = ofp.port_owner(static_cast<uint16_t>(flow.in_port));
    if (!owner.bridge) return {};  // not in a bridge: drop, nothing installed (out.bridge stays null)
    Bridge& br = *owner.bridge;
    // Generations first: a change racing with this translation then makes
    // the revalidator look again.
    out.rules_gen = br.rules_generation();
    XlateIn in{br};
    in.flow = flow;
    in.version = br.version();
    in.now_ns = hal::now_ns();
    in.may_learn = may_learn;
    auto x = xlate(in);
    if (!x) return std::move(x).take_status();
    out.bridge = &br;
    out.actions = std::move(x->actions);
    out.wc = x->wc;
    out.rules = std::move(x->rules);
    out.uses_normal = x->uses_normal;
    out.tables = x->tables;
    out.mac_gen = x->mac_generation;
    out.mac_changed = x->mac_changed;
    for (auto& c : x->bond_choices)
      out.bond_accounts.push_back({std::move(c.bond), c.flow, c.vlan, std::move(c.loads), c.bucket});
    out.cacheable = true;
    return {};
  };
  ActionSink sink = [&ofp](const datapath::Upcall& u) {
    const std::span<const uint8_t> ud(u.userdata, u.userdata_len);
    if (auto sp = decode_slow_path_userdata(ud)) {
      // slow_path(lacp): a LACPDU received on a bond member goes to the
      // bond's Lacp (which counts what it can't parse).
      const uint16_t dp_port = static_cast<uint16_t>(u.key.get(KEEL_FLOW_WORD(in_port)) & 0xffffffffu);
      const PortOwner owner = ofp.port_owner(dp_port);
      if (!owner.bridge) return;
      auto ports = owner.bridge->ports();
      const PortConfig* pc = ports->by_dp_port(dp_port);
      if (pc && pc->lacp && *sp == SlowPathReason::lacp) {
        if (pc->lacp->process_packet(pc->bond_member, std::span<const uint8_t>(u.pkt->data(), u.pkt->len()),
                                     hal::now_ns() / 1'000'000) &&
            pc->bond_obj && pc->lacp->may_enable(pc->bond_member)) {
          // As OVS's process_special(): the member may carry traffic before
          // the next tick runs the bond.
          pc->bond_obj->set_may_enable(pc->bond_member, true);
        }
      }
      return;
    }
    auto cu = decode_controller_userdata(ud);
    if (!cu) return;  // not ours
    const PortOwner owner = ofp.port_owner(static_cast<uint16_t>(u.key.get(KEEL_FLOW_WORD(in_port)) & 0xffffffffu));
    PacketIn pi;
    pi.bridge = owner.bridge ? owner.bridge->name() : std::string();
    pi.in_port = cu->in_ofport;
    pi.table_id = cu->table_id;
    pi.cookie = cu->cookie;
    pi.reason = cu->reason;
    pi.controller_id = cu->controller_id;
    pi.total_len = u.pkt->len();
    const uint32_t n = std::min<uint32_t>(u.pkt->len(), cu->max_len);
    pi.data.assign(u.pkt->data(), u.pkt->data() + n);
    pi.time_ns = hal::now_ns();
    (void)ofp.push_packet_in(std::move(pi));
  };
  UdpifKnobs knobs{[&ofp] { return ofp.flow_limit(); }, [&ofp] { return ofp.max_idle_ms(); },
                   [&ofp] { return ofp.revalidate_interval_ms(); }};
  auto u = std::make_unique<Udpif>(ofp.datapath(), ofp.rcu(), std::move(translate), std::move(sink), std::move(knobs));
  // Bonds changed a decision (maintenance thread): a round now. The
  // System stops the Ofproto's maintenance thread before it destroys this.
  Udpif* raw = u.get();
  ofp.set_revalidate_hook([raw] { raw->kick(); });
  return u;
}

}  // namespace keel::ofproto

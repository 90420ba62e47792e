// Ofproto's bonds (ofproto.h: add_bond ... run_bonds): configuration of
// bonded ports and their maintenance tick. The bond logic itself is
// Bond's (bond.h) and Lacp's (lacp.h); this file wires them to the bridge
// (each member a PortConfig that names its bond), to the datapath (bucket
// tables, control-plane packets) and to revalidation.
//
// Thread-safety: every function here is a writer (control thread or the
// maintenance thread, under the Ofproto writer mutex). Translation reaches
// the same Bond and Lacp objects through PortConfig::bond_obj / lacp; both
// take their own locks.
#include <algorithm>
#include <cstdio>

#include "core/log.h"
#include "datapath/datapath.h"
#include "keel/hal/cpu.h"
#include "keel/hal/port.h"
#include "ofproto/ofproto.h"

namespace keel::ofproto {

namespace {

KEEL_LOG_MODULE(log_bond, "bond");

uint64_t now_ms() { return hal::now_ns() / 1'000'000; }

// The MAC a member's PDUs and learning packets come from, and bond/show's
// "active member mac": the port's hardware address.
flow::EthAddr port_mac(const hal::Port& p) {
  const hal::MacAddr m = p.mac();
  flow::EthAddr a{};
  for (size_t i = 0; i < 6; ++i) a.b[i] = m[i];
  return a;
}

LacpSettings lacp_settings(std::string_view bond, const BondSettings& s, const flow::EthAddr& sys_id) {
  LacpSettings ls;
  ls.name = std::string(bond);
  ls.sys_id = sys_id;
  ls.active = s.lacp != LacpMode::passive;
  ls.fast = s.lacp_fast;
  ls.fallback_ab = s.lacp_fallback_ab;
  return ls;
}

}  // namespace

const BondPort* Ofproto::find_bond(std::string_view name) const {
  for (const auto& b : bonds_)
    if (b->name == name) return b.get();
  return nullptr;
}

BondPort* Ofproto::find_bond_mut(std::string_view name) {
  for (auto& b : bonds_)
    if (b->name == name) return b.get();
  return nullptr;
}

std::vector<const BondPort*> Ofproto::bonds() const {
  std::vector<const BondPort*> v;
  for (const auto& b : bonds_) v.push_back(b.get());
  std::sort(v.begin(), v.end(), [](const BondPort* a, const BondPort* b) { return a->name < b->name; });
  return v;
}

const BondPort* Ofproto::bond_of_member(std::string_view port) const {
  for (const auto& b : bonds_)
    for (const std::string& m : b->members)
      if (m == port) return b.get();
  return nullptr;
}

Status Ofproto::check_bond_settings(const BondSettings& s, const std::vector<std::string>& members) const {
  (void)members;  // bond-primary may name no member (bond/show says "(no such member)", as OVS)
  if (s.rebalance_interval_ms > INT32_MAX)
    return invalid("other_config:bond-rebalance-interval out of range");
  // balance-tcp with lacp=off is what Open vSwitch accepts too (it then
  // balances without LACP); no other combination is refused.
  return {};
}

Status Ofproto::add_bond(std::string_view bridge, std::string_view bond, const BondRequest& req) {
  Bridge* br = find_bridge(bridge);
  if (!br) return error(Errc::not_found, "no bridge " + std::string(bridge));
  const std::string name(bond);
  if (name.empty() || name.size() > 31) return invalid("bond name '" + name + "': 1 to 31 characters");
  if (find_bond(name))
    return error(Errc::already_exists, "cannot create a port named " + name + " because a port named " +
                                           name + " already exists on bridge " +
                                           find_bond(name)->bridge->name());
  if (dp_.find_port(name))
    return error(Errc::already_exists,
                 "bond " + name + ": a datapath port has that name (a bond needs its own)");
  if (find_bridge(name)) return error(Errc::already_exists, "bond " + name + ": a bridge has that name");
  if (req.members.size() < 2)
    return invalid("add-bond requires at least 2 interfaces, but only " + std::to_string(req.members.size()) +
                   " were specified");
  if (req.members.size() > 32) return invalid("a bond has at most 32 interfaces");
  if (!req.ifaces.empty() && req.ifaces.size() != req.members.size())
    return invalid("add-bond: one set of Interface columns per member");
  for (size_t i = 0; i < req.members.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (req.members[i] == req.members[j])
        return invalid("add-bond: interface " + req.members[i] + " named twice");
  if (Status st = check_bond_settings(req.settings, req.members); !st.ok()) return st;

  // The id: the lowest free one (ids of deleted bonds are reused).
  uint32_t id = 0;
  for (uint32_t c = 1; c <= datapath::kMaxBondId && !id; ++c) {
    bool used = false;
    for (const auto& b : bonds_) used |= b->id == c;
    if (!used) id = c;
  }
  if (!id)
    return error(Errc::resource_exhausted,
                 "too many bonds (at most " + std::to_string(datapath::kMaxBondId) + ")");

  // Every member checked before anything changes (ovs-vsctl's words for
  // one that is taken).
  for (const std::string& m : req.members)
    if (hal::Port* p = dp_.find_port(m))
      if (PortOwner o = port_owner(p->id()); o.bridge) {
        const BondPort* in = bond_of_member(m);
        return error(Errc::already_exists, "cannot create an interface named " + m +
                                               " because an interface named " + m +
                                               " already exists on bridge " + o.bridge->name() +
                                               (in ? " (in bond " + in->name + ")" : ""));
      }
  std::vector<PortConfig> pcs;
  std::vector<std::vector<std::pair<uint16_t, int>>> affinities(req.members.size());
  for (size_t i = 0; i < req.members.size(); ++i) {
    PortOptions po = req.ifaces.empty() ? PortOptions{} : req.ifaces[i];
    po.tag = req.port.tag;
    po.trunks = req.port.trunks;
    po.vlan_mode = req.port.vlan_mode;
    auto pc = prepare_port(req.members[i], po, affinities[i]);
    if (!pc) return std::move(pc).take_status();
    pcs.push_back(std::move(pc.value()));
  }
  // Device settings, undone if anything after fails.
  std::vector<DeviceUndo> undo(pcs.size());
  auto undo_all = [&] {
    for (const DeviceUndo& u : undo) undo_port_device(u);
  };
  for (size_t i = 0; i < pcs.size(); ++i)
    if (Status st = apply_port_device(pcs[i], undo[i]); !st.ok()) {
      undo_all();
      return st.prefix("interface " + pcs[i].name);
    }

  auto bp = std::make_unique<BondPort>();
  bp->name = name;
  bp->bridge = br;
  bp->id = id;
  bp->members = req.members;
  bp->carrier.assign(req.members.size(), -1);
  bp->loads = std::make_shared<BondRecircLoads>();
  const BondSettings settings = req.settings;
  Status st = br->add_ports(pcs, [&](std::vector<PortConfig>& ports) -> Status {
    std::vector<BondMemberConfig> mc;
    std::vector<LacpMemberSettings> lm;
    for (const PortConfig& p : ports) {
      BondMemberConfig m;
      m.name = p.name;
      m.ofport = p.ofport;
      m.dp_port = p.dp_port;
      m.mac = port_mac(*dp_.port(p.dp_port));
      mc.push_back(m);
      LacpMemberSettings l;
      l.name = p.name;
      l.port_id = static_cast<uint16_t>(p.ofport);
      l.mac = m.mac;
      lm.push_back(l);
    }
    bp->bond = std::make_shared<Bond>(name, id, settings, mc, now_ms());
    if (settings.lacp != LacpMode::off)
      bp->lacp = std::make_shared<Lacp>(lacp_settings(name, settings, mc[0].mac), lm);
    for (size_t i = 0; i < ports.size(); ++i) {
      ports[i].bond = name;
      ports[i].bond_obj = bp->bond;
      ports[i].lacp = bp->lacp;
      ports[i].bond_loads = bp->loads;
      ports[i].bond_member = i;
      ports[i].bond_ofport = ports[0].ofport;
    }
    return {};
  });
  if (!st.ok()) {
    undo_all();
    return st;
  }
  for (size_t i = 0; i < pcs.size(); ++i)
    if (!affinities[i].empty()) {
      (void)dp_.set_rxq_affinity(pcs[i].dp_port, std::move(affinities[i]));
      (void)dp_.reschedule();
    }
  bonds_.push_back(std::move(bp));
  publish_index();
  // The first tick polls the links and installs what the bond needs.
  run_bonds(now_ms());
  return {};
}

Status Ofproto::set_bond(std::string_view bond, const BondSettings& s, const PortOptions& vlan) {
  BondPort* bp = find_bond_mut(bond);
  if (!bp) return error(Errc::not_found, "no row \"" + std::string(bond) + "\" in table Port");
  if (Status st = check_bond_settings(s, bp->members); !st.ok()) return st;
  if (vlan.tag && *vlan.tag > 4095)
    return invalid("tag " + std::to_string(*vlan.tag) + " out of range (0..4095)");
  for (uint16_t v : vlan.trunks)
    if (v > 4095) return invalid("trunks: VLAN " + std::to_string(v) + " out of range (0..4095)");
  // LACP comes or goes with lacp=; the Lacp keeps its state otherwise.
  std::shared_ptr<Lacp> lacp = bp->lacp;
  const auto members = bp->bond->members();
  if (s.lacp == LacpMode::off) {
    lacp.reset();
  } else if (!lacp) {
    std::vector<LacpMemberSettings> lm;
    for (const BondMemberConfig& m : members) {
      LacpMemberSettings l;
      l.name = m.name;
      l.port_id = static_cast<uint16_t>(m.ofport);
      l.mac = m.mac;
      lm.push_back(l);
    }
    lacp = std::make_shared<Lacp>(lacp_settings(bp->name, s, members[0].mac), lm);
  } else {
    lacp->reconfigure(lacp_settings(bp->name, s, members[0].mac));
  }
  PortConfig v;
  {
    std::vector<std::pair<uint16_t, int>> unused;
    PortOptions po = vlan;
    // The VLAN fields as add_port computes them (vlan_mode implied by a tag).
    v.vlan_mode = po.vlan_mode.value_or(po.tag ? VlanMode::access : VlanMode::trunk);
    v.vlan_mode_set = po.vlan_mode.has_value();
    v.tag = po.tag.value_or(0);
    v.tag_set = po.tag.has_value();
    v.trunks = po.trunks;
    std::sort(v.trunks.begin(), v.trunks.end());
    v.trunks.erase(std::unique(v.trunks.begin(), v.trunks.end()), v.trunks.end());
  }
  Status st = bp->bridge->edit_ports([&](std::vector<PortConfig>& ports) -> Status {
    for (PortConfig& p : ports)
      if (p.bond == bp->name) {
        p.lacp = lacp;
        p.vlan_mode = v.vlan_mode;
        p.vlan_mode_set = v.vlan_mode_set;
        p.tag = v.tag;
        p.tag_set = v.tag_set;
        p.trunks = v.trunks;
      }
    return {};
  });
  if (!st.ok()) return st;
  bp->lacp = std::move(lacp);
  bp->bond->reconfigure(s, now_ms());
  run_bonds(now_ms());
  return {};
}

void Ofproto::bond_dp_del(BondPort& b) {
  if (!b.dp_installed) return;
  if (Status st = dp_.bond_del(b.id); !st.ok())
    KEEL_LOG(log_bond, warn, "bond %s: removing datapath bond %u: %s", b.name.c_str(), b.id,
             st.message().c_str());
  b.dp_installed = false;
}

Status Ofproto::del_bond(std::string_view bridge, std::string_view bond) {
  auto it = std::find_if(bonds_.begin(), bonds_.end(), [&](const auto& b) { return b->name == bond; });
  if (it == bonds_.end()) return error(Errc::not_found, "no bond " + std::string(bond));
  BondPort& bp = **it;
  if (!bridge.empty() && bp.bridge->name() != bridge)
    return error(Errc::not_found, "bridge " + std::string(bridge) + " has no port " + std::string(bond));
  std::vector<PortConfig> gone;
  for (const PortConfig& p : bp.bridge->ports()->ports)
    if (p.bond == bp.name) gone.push_back(p);
  Status st = bp.bridge->edit_ports([&](std::vector<PortConfig>& ports) -> Status {
    ports.erase(
        std::remove_if(ports.begin(), ports.end(), [&](const PortConfig& p) { return p.bond == bp.name; }),
        ports.end());
    return {};
  });
  if (!st.ok()) return st;
  for (const PortConfig& p : gone) {
    bp.bridge->mac().flush_port(p.ofport);
    reset_mtu(p);
  }
  bond_dp_del(bp);
  bonds_.erase(it);
  publish_index();
  return {};
}

Status Ofproto::bond_enable_member(std::string_view bond, std::string_view member, bool enable) {
  BondPort* bp = find_bond_mut(bond);
  if (!bp) return error(Errc::not_found, "no such bond");
  auto i = bp->bond->member_index(member);
  if (!i) return error(Errc::not_found, "no such member");
  if (Status st = bp->bond->set_admin_enabled(*i, enable); !st.ok()) return st;
  run_bonds(now_ms());
  return {};
}

Status Ofproto::bond_set_active_member(std::string_view bond, std::string_view member, bool* changed) {
  BondPort* bp = find_bond_mut(bond);
  if (!bp) return error(Errc::not_found, "no such bond");
  auto i = bp->bond->member_index(member);
  if (!i) return error(Errc::not_found, "no such member");
  const uint64_t now = now_ms();
  const BondView before = bp->bond->view(now);
  if (i >= before.members.size() || !before.members[*i].enabled)
    return invalid("cannot make disabled member active");
  if (changed) *changed = before.active != i;
  if (before.active == i) return {};
  if (Status st = bp->bond->set_active_member(*i); !st.ok()) return st;
  run_bonds(now);
  bp->bridge->invalidate_translations();
  return {};
}

void Ofproto::run_bonds(uint64_t now) {
  bool revalidate = false;
  for (auto& bpp : bonds_) {
    BondPort& b = *bpp;
    Bond& bond = *b.bond;
    const std::vector<BondMemberConfig> members = bond.members();
    // Links.
    for (size_t i = 0; i < members.size(); ++i) {
      hal::Port* p = dp_.port(members[i].dp_port);
      const bool up = p && p->link().up;
      if (b.carrier[i] != static_cast<int8_t>(up)) {
        b.carrier[i] = static_cast<int8_t>(up);
        bond.set_carrier(i, up);
        if (b.lacp) b.lacp->set_carrier(i, up, now);
      }
    }
    // LACP: PDUs out, its verdicts in.
    if (b.lacp) {
      std::vector<LacpTx> tx;
      b.lacp->run(now, tx);
      for (const LacpTx& t : tx)
        if (t.member < members.size())
          if (Status st = dp_.send_packet(members[t.member].dp_port, t.frame); !st.ok() && b.dp_errors++ == 0)
            KEEL_LOG(log_bond, warn, "bond %s: sending a LACPDU on %s: %s", b.name.c_str(),
                     members[t.member].name.c_str(), st.message().c_str());
      bond.set_lacp_status(b.lacp->status());
      for (size_t i = 0; i < members.size(); ++i) bond.set_may_enable(i, b.lacp->may_enable(i));
    } else {
      bond.set_lacp_status(LacpStatus::off);
      for (size_t i = 0; i < members.size(); ++i) bond.set_may_enable(i, true);
    }
    BondChange ch = bond.run(now);
    // Without a datapath table the flows themselves name members (slb,
    // active-backup, the recirculation scheme's second pass).
    if (ch.tables && !bond.use_lb_output()) ch.revalidate = true;
    if (bond.rebalance_due(now)) {
      if (b.dp_installed) {
        if (auto stats = dp_.bond_stats(b.id); stats && bond.rebalance(*stats, now))
          ch.tables = ch.revalidate = true;
      }
      // The recirculation scheme: the second-pass megaflows' bytes per
      // bucket (the revalidator adds them). balance-slb and a member chosen
      // by translation: Bond::account() fed the loads; the stats are unused.
      else {
        datapath::BondBucketStats st;
        if (bond.use_recirc())
          for (unsigned i = 0; i < datapath::kBondBuckets; ++i) {
            st.bytes[i] = b.loads->bytes[i].load(std::memory_order_relaxed);
            st.packets[i] = b.loads->packets[i].load(std::memory_order_relaxed);
          }
        if (bond.rebalance(st, now)) ch.revalidate = true;
      }
    }
    // The datapath table follows lb_output use.
    if (bond.use_lb_output()) {
      const datapath::BondMembers want = bond.dp_buckets();
      if (!b.dp_installed || want != b.pushed) {
        if (Status st = dp_.bond_set(b.id, want); st.ok()) {
          if (!b.dp_installed) ch.revalidate = true;  // flows may switch to lb_output now
          b.dp_installed = true;
          b.pushed = want;
        } else if (b.dp_errors++ == 0) {
          KEEL_LOG(log_bond, warn, "bond %s: datapath bond %u: %s", b.name.c_str(), b.id,
                   st.message().c_str());
        }
      }
    } else if (b.dp_installed) {
      bond_dp_del(b);
      ch.revalidate = true;
    }
    // Learning packets for the bridge's MACs not learned on this bond.
    if (ch.learning) {
      std::vector<std::pair<uint16_t, flow::EthAddr>> macs;
      for (const MacEntry& e : b.bridge->mac().entries())
        if (e.ofport != members[0].ofport) macs.emplace_back(e.vlan, e.mac);
      for (const LearningPacket& lp : bond.take_learning_due(macs))
        if (Status st = dp_.send_packet(lp.dp_port, lp.frame); !st.ok() && b.dp_errors++ == 0)
          KEEL_LOG(log_bond, warn, "bond %s: sending a learning packet: %s", b.name.c_str(),
                   st.message().c_str());
    }
    if (ch.revalidate) {
      b.bridge->invalidate_translations();
      revalidate = true;
    }
  }
  if (revalidate && revalidate_hook_) revalidate_hook_();
}

}  // namespace keel::ofproto

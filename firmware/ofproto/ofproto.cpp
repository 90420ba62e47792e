// Ofproto — see ofproto.h.
#include "ofproto/ofproto.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>

#include "datapath/datapath.h"
#include "keel/hal/cpu.h"
#include "keel/hal/port.h"
#include "core/log.h"
#include "ofproto/tlv_map.h"
#include "ofproto/port_columns.h"

namespace keel::ofproto {

namespace {

KEEL_LOG_MODULE(log_bridge, "bridge");

Status check_bridge_name(std::string_view name) {
  if (name.empty() || name.size() > 31) return invalid("bridge name '" + std::string(name) + "': 1 to 31 characters");
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return invalid("bridge name '" + std::string(name) + "': only letters, digits, '-', '_' and '.'");
  return {};
}

// The VLAN mode `opts` give `port`, as Open vSwitch's port_configure()
// decides it: vlan_mode, else access with a tag, trunk without. (An access
// port without a tag is on VLAN 0, as in OVS's bundle_set().)
Result<VlanMode> vlan_mode_of(std::string_view port, const PortOptions& opts) {
  const VlanMode mode = opts.vlan_mode.value_or(opts.tag ? VlanMode::access : VlanMode::trunk);
  // An access port ignores its trunks (xlate never reads them); Open
  // vSwitch keeps them in the database and warns when the access mode is
  // implicit, and so does keel.
  if (mode == VlanMode::access && !opts.trunks.empty() && !opts.vlan_mode)
    KEEL_LOG(log_bridge, warn, "port %s: ignoring trunks in favor of implicit vlan", std::string(port).c_str());
  return mode;
}

std::vector<uint16_t> sorted_trunks(std::vector<uint16_t> t) {
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

// The actions as ovs-ofctl's default dump (OpenFlow 1.0 with Nicira
// extensions) carries them back (ofp-actions.c encode_*() for OFP10):
// goto_table:N travels as resubmit(,N); clear_actions, write_actions(...)
// and push_vlan (a side effect of the set that follows, in OpenFlow 1.0)
// are not encoded at all; set_field:V->vlan_tci (stored as a load) travels
// as mod_vlan_vid + mod_vlan_pcp, or strip_vlan for 0
// (set_field_to_legacy_openflow()); a set of an SCTP port has no OpenFlow
// 1.0 action and travels as load:V->OXM_OF_SCTP_SRC[] (or _DST) when it
// is a set_field, or when mod_tp_src/dst came in OpenFlow 1.1+ (which
// sends it as a set_field of the match's L4 protocol). What is left empty
// prints as drop. (write_metadata before a goto_table is the one rule Open
// vSwitch cannot print this way: its decode fails with
// OFPBAC_UNSUPPORTED_ORDER and the dump stops there; keel prints
// write_metadata:V/M,resubmit(,N).)
flow::OfActions of10_view(const OfRule& r, const flow::OfActions& actions) {
  const bool sctp = r.match.mask.nw_proto == 0xff && r.match.key.nw_proto == 132;
  auto sctp_load = [&](flow::OfPrereq need) {
    return need == flow::OfPrereq::sctp || (r.of11 && sctp && need == flow::OfPrereq::none);
  };
  flow::OfActions v;
  v.reserve(actions.size());
  for (const flow::OfAction& a : actions) {
    const auto* l = std::get_if<flow::OfLoad>(&a);
    if (const auto* g = std::get_if<flow::OfGotoTable>(&a)) {
      v.push_back(flow::OfResubmit{flow::kOfppInPort, g->table});
    } else if (const auto* ts = std::get_if<flow::OfSetL4Src>(&a); ts && sctp_load(ts->need)) {
      v.push_back(flow::OfLoad{flow::OfSubfield::whole(flow::OfFieldId::sctp_src), ts->port});
    } else if (const auto* td = std::get_if<flow::OfSetL4Dst>(&a); td && sctp_load(td->need)) {
      v.push_back(flow::OfLoad{flow::OfSubfield::whole(flow::OfFieldId::sctp_dst), td->port});
    } else if (l && l->from_set_field && l->dst == flow::OfSubfield::whole(flow::OfFieldId::vlan_tci)) {
      if (l->value & 0x1000) {  // CFI: a tag
        v.push_back(flow::OfSetVlanVid{static_cast<uint16_t>(l->value & 0x0fff)});
        v.push_back(flow::OfSetVlanPcp{static_cast<uint8_t>(l->value >> 13)});
      } else {
        v.push_back(flow::OfStripVlan{});
      }
    } else if (!std::holds_alternative<flow::OfClearActions>(a) &&
               !std::holds_alternative<flow::OfWriteActions>(a) &&
               !std::holds_alternative<flow::OfPushVlan>(a)) {
      v.push_back(a);
    }
  }
  return v;
}

}  // namespace

std::string format_flow_stats(const OfRule& r, uint64_t now_ns, bool show_stats, const flow::OfFormatOptions* match) {
  auto age_ms = [&](uint64_t t) { return now_ns > t ? (now_ns - t) / 1'000'000 : 0; };
  char buf[160];
  std::string s;
  const uint64_t dur = age_ms(r.created_ns);
  if (show_stats || r.cookie) {
    snprintf(buf, sizeof buf, "cookie=0x%llx, ", static_cast<unsigned long long>(r.cookie));
    s += buf;
  }
  if (show_stats) {
    s += "duration=" + std::to_string(dur / 1000);
    if (dur % 1000) snprintf(buf, sizeof buf, ".%03u", static_cast<unsigned>(dur % 1000)), s += buf;
    s += "s, ";
  }
  if (show_stats || r.table_id) s += "table=" + std::to_string(r.table_id) + ", ";
  if (show_stats) {
    const uint64_t pk = r.packets.load(std::memory_order_relaxed),
                   by = r.bytes.load(std::memory_order_relaxed);
    s += "n_packets=" + (r.no_packet_counts ? std::string("?") : std::to_string(pk)) + ", ";
    s += "n_bytes=" + (r.no_byte_counts ? std::string("?") : std::to_string(by)) + ", ";
  }
  if (r.idle_timeout) s += "idle_timeout=" + std::to_string(r.idle_timeout) + ", ";
  if (r.hard_timeout) s += "hard_timeout=" + std::to_string(r.hard_timeout) + ", ";
  if (r.send_flow_rem) s += "send_flow_rem ";
  if (r.no_packet_counts) s += "no_packet_counts ";
  if (r.no_byte_counts) s += "no_byte_counts ";
  if (r.importance) s += "importance=" + std::to_string(r.importance) + ", ";
  if (show_stats) {
    const uint64_t used = std::max(r.used_ns.load(std::memory_order_relaxed), r.created_ns);
    s += "idle_age=" + std::to_string(age_ms(used) / 1000) + ", ";
    const uint64_t hard_age = age_ms(r.modified_ns) / 1000;
    if (hard_age != dur / 1000) s += "hard_age=" + std::to_string(hard_age) + ", ";
  }
  std::string m = r.priority != flow::kOfDefaultPriority ? "priority=" + std::to_string(r.priority) : "";
  std::string fields = match ? flow::format_of_match(r.match, *match) : flow::format_of_match(r.match);
  if (!fields.empty()) m += (m.empty() ? "" : ",") + fields;
  if (!m.empty()) s += m + " ";
  s += "actions=" + flow::format_of_actions(of10_view(r, r.actions));
  return s;
}

Ofproto::Ofproto(datapath::Datapath& dp)
    : dp_(dp), bridges_(new BridgeList), index_(new PortIndex), dead_(std::make_shared<std::vector<Bridge*>>()) {}

Ofproto::~Ofproto() {
  stop();
  // No reader is left: the threads that registered Rcu slots are joined
  // before the System destroys this. Mark their slots offline (a thread
  // that ended without doing so must not hang shutdown), run what is
  // pending, then free the rest.
  for (unsigned s = 0; s < datapath::Rcu::kMaxSlots; ++s) rcu_.offline(s);
  rcu_.synchronize();
  reclaim();
  rcu_.synchronize();
  delete bridges_.load(std::memory_order_relaxed);
  delete index_.load(std::memory_order_relaxed);
  owned_.clear();
  dying_.clear();
}

void Ofproto::start() {
  if (maint_.joinable()) return;
  maint_stop_ = false;
  maint_ = std::thread([this] {
    std::unique_lock lk(maint_mu_);
    while (!maint_stop_) {
      maint_cv_.wait_for(lk, std::chrono::milliseconds(kMaintenanceMs));
      if (maint_stop_) break;
      lk.unlock();
      {
        std::lock_guard w(writer_mu_);
        run(hal::now_ns());
      }
      lk.lock();
    }
  });
}

void Ofproto::stop() {
  if (!maint_.joinable()) return;
  {
    std::lock_guard lk(maint_mu_);
    maint_stop_ = true;
  }
  maint_cv_.notify_all();
  maint_.join();
}

// --------------------------------------------------------------- bridges --

Bridge* Ofproto::find_bridge(std::string_view name) const {
  for (Bridge* b : bridges_.load(std::memory_order_acquire)->sorted)
    if (b->name() == name) return b;
  return nullptr;
}

std::vector<Bridge*> Ofproto::bridges() const { return bridges_.load(std::memory_order_acquire)->sorted; }

void Ofproto::publish_bridges() {
  auto* l = new BridgeList;
  for (const auto& b : owned_) l->sorted.push_back(b.get());
  std::sort(l->sorted.begin(), l->sorted.end(), [](Bridge* a, Bridge* b) { return a->name() < b->name(); });
  const BridgeList* old = bridges_.exchange(l, std::memory_order_acq_rel);
  rcu_.retire([old] { delete old; });
}

void Ofproto::publish_index() {
  auto* idx = new PortIndex;
  for (const auto& b : owned_)
    for (const PortConfig& p : b->ports()->ports) {
      if (p.tunnel) continue;  // a shared tunnel vport: TunnelTable::receive finds the port
      if (idx->by_dp_port.size() <= p.dp_port) idx->by_dp_port.resize(p.dp_port + 1u);
      idx->by_dp_port[p.dp_port] = {b.get(), p.ofport};
    }
  const PortIndex* old = index_.exchange(idx, std::memory_order_acq_rel);
  rcu_.retire([old] { delete old; });
}

Status Ofproto::add_bridge(std::string_view name) {
  if (Status st = check_bridge_name(name); !st.ok()) return st;
  if (find_bridge(name)) return error(Errc::already_exists, "bridge " + std::string(name) + " already exists");
  if (dp_.find_port(name))
    return error(Errc::already_exists, "bridge " + std::string(name) + ": a port has that name");
  if (owned_.size() >= kMaxBridges)
    return error(Errc::resource_exhausted, "too many bridges (at most " + std::to_string(kMaxBridges) + ")");
  owned_.push_back(std::make_unique<Bridge>(std::string(name), &rcu_));
  owned_.back()->set_link_probe([this](uint16_t id) {
    hal::Port* p = dp_.port(id);
    return p && p->link().up;
  });
  publish_bridges();
  publish_tunnels();  // its BridgeAddr (MAC) for translation
  return {};
}

Status Ofproto::del_bridge(std::string_view name) {
  auto it = std::find_if(owned_.begin(), owned_.end(), [&](const auto& b) { return b->name() == name; });
  if (it == owned_.end()) return error(Errc::not_found, "no bridge " + std::string(name));
  Bridge* b = it->get();
  for (auto bi = bonds_.begin(); bi != bonds_.end();) {
    if ((*bi)->bridge == b) {
      bond_dp_del(**bi);
      bi = bonds_.erase(bi);
    } else {
      ++bi;
    }
  }
  for (const PortConfig& pc : b->ports()->ports) reset_mtu(pc);
  std::vector<uint16_t> tunnel_vports;
  for (const PortConfig& pc : b->ports()->ports)
    if (pc.tunnel) tunnel_vports.push_back(pc.tunnel->vport);
  const std::string bname = b->name();
  dying_.push_back(std::move(*it));
  owned_.erase(it);
  publish_bridges();
  publish_index();
  for (uint16_t v : tunnel_vports) vport_unref(v);
  forget_bridge_underlay(bname);
  switch_tlv_maps().forget(bname);  // a bridge re-created with this name starts with an empty TLV map
  publish_tunnels();
  // Freed in reclaim() once no reader can hold it.
  std::weak_ptr<std::vector<Bridge*>> dead = dead_;
  rcu_.retire([dead, b] {
    if (auto d = dead.lock()) d->push_back(b);
  });
  return {};
}

// ----------------------------------------------------------------- ports --

// The words ovs-vsctl's parser (port_columns.cpp) uses for the same error.
static Status check_mtu_request(uint32_t mtu) {
  if (mtu >= PortOptions::kMinMtuRequest && mtu <= PortOptions::kMaxMtuRequest) return {};
  return invalid("mtu_request " + std::to_string(mtu) + " is not in keel's range " +
                 std::to_string(PortOptions::kMinMtuRequest) + " to " + std::to_string(PortOptions::kMaxMtuRequest) +
                 " (inclusive)");
}

static_assert(PortOptions::kMinMtuRequest == hal::kMinMtu && PortOptions::kMaxMtuRequest == hal::kMaxMtu,
              "the mtu_request range ovs-vsctl's words are checked against is the one ports carry");

Result<PortConfig> Ofproto::prepare_port(std::string_view port, const PortOptions& opts,
                                         std::vector<std::pair<uint16_t, int>>& affinity) const {
  hal::Port* p = dp_.find_port(port);
  if (!p) {
    std::string known;
    for (hal::Port* q : dp_.ports()) known += (known.empty() ? "" : ", ") + q->name();
    return error(Errc::not_found, "no port '" + std::string(port) + "' (ports: " + known + ")");
  }
  if (PortOwner o = port_owner(p->id()); o.bridge) {
    if (const BondPort* b = bond_of_member(port))
      return error(Errc::already_exists,
                   "port " + std::string(port) + " is already in bond " + b->name + " of bridge " + o.bridge->name());
    return error(Errc::already_exists, "port " + std::string(port) + " is already in bridge " + o.bridge->name());
  }
  if (opts.ofport && (*opts.ofport == 0 || *opts.ofport >= flow::kOfppMax))
    return invalid("ofport_request " + std::to_string(*opts.ofport) + " out of range (1.." +
                   std::to_string(flow::kOfppMax - 1) + ")");
  if (opts.tag && *opts.tag > 4095) return invalid("tag " + std::to_string(*opts.tag) + " out of range (0..4095)");
  for (uint16_t v : opts.trunks)
    if (v > 4095) return invalid("trunks: VLAN " + std::to_string(v) + " out of range (0..4095)");
  if (opts.mtu_request)
    if (Status st = check_mtu_request(*opts.mtu_request); !st.ok()) return st;
  if (opts.type)
    if (Status st = check_interface_type(*opts.type, port, p->kind()); !st.ok()) return st;
  auto mode = vlan_mode_of(port, opts);
  if (!mode) return std::move(mode).take_status();
  if (opts.rxq_affinity) {
    auto a = datapath::Datapath::parse_rxq_affinity(*opts.rxq_affinity);
    if (!a) return std::move(a).take_status();
    affinity = std::move(a.value());
  }
  PortConfig pc;
  pc.name = std::string(port);
  pc.ofport = opts.ofport.value_or(0);
  pc.dp_port = p->id();
  pc.vlan_mode = *mode;
  pc.vlan_mode_set = opts.vlan_mode.has_value();
  pc.tag_set = opts.tag.has_value();
  pc.tag = opts.tag.value_or(0);
  pc.trunks = sorted_trunks(opts.trunks);
  pc.mtu_request = opts.mtu_request;
  pc.rxq_affinity = opts.rxq_affinity.value_or("");
  pc.n_rxq = opts.n_rxq;
  return pc;
}

Status Ofproto::apply_port_device(const PortConfig& pc, DeviceUndo& undo) {
  hal::Port* p = dp_.port(pc.dp_port);
  undo.dp_port = pc.dp_port;
  undo.rxq = p->n_rxq();
  undo.mtu = p->mtu();
  // The queue count first (the device may refuse it), then the MTU, both
  // undone if the bridge refuses the port.
  if (pc.n_rxq)
    if (Status st = dp_.set_port_rxqs(p->id(), *pc.n_rxq); !st.ok()) return st.prefix("options:n_rxq");
  if (pc.mtu_request)
    if (Status st = dp_.set_port_mtu(p->id(), *pc.mtu_request); !st.ok()) {
      (void)dp_.set_port_rxqs(p->id(), undo.rxq);
      return st;
    }
  undo.applied = true;
  return {};
}

void Ofproto::undo_port_device(const DeviceUndo& undo) {
  if (!undo.applied) return;
  (void)dp_.set_port_mtu(undo.dp_port, undo.mtu);  // back to a value it had: cannot fail
  (void)dp_.set_port_rxqs(undo.dp_port, undo.rxq);
}

Status Ofproto::add_port(std::string_view bridge, std::string_view port, const PortOptions& opts) {
  Bridge* b = find_bridge(bridge);
  if (!b) return error(Errc::not_found, "no bridge " + std::string(bridge));
  if (find_bond(port))
    return error(Errc::already_exists, "port " + std::string(port) + ": a bond of bridge " +
                                           find_bond(port)->bridge->name() + " has that name");
  if (find_bridge(port))
    return error(Errc::already_exists, "port " + std::string(port) + ": a bridge has that name");
  if (opts.type && parse_tunnel_type(*opts.type)) return add_tunnel_port(*b, port, opts);
  if (!opts.tunnel_options.empty())
    return invalid("options:" + opts.tunnel_options.front().first +
                   ": keel takes no Interface options but n_rxq for a port that is not a tunnel (type=vxlan, "
                   "geneve or gre)");
  datapath::Datapath::RxqAffinity affinity;
  auto pc = prepare_port(port, opts, affinity);
  if (!pc) return std::move(pc).take_status();
  DeviceUndo undo;
  if (Status st = apply_port_device(*pc, undo); !st.ok()) return st;
  if (Status st = b->add_port(*pc); !st.ok()) {
    undo_port_device(undo);
    return st;
  }
  if (!affinity.empty()) {
    (void)dp_.set_rxq_affinity(pc->dp_port, std::move(affinity));
    (void)dp_.reschedule();
  }
  publish_index();
  publish_tunnels();  // the bridge MAC may be this port's
  return {};
}

Status Ofproto::set_port_vlan(std::string_view port, const PortOptions& opts) {
  Bridge* b = nullptr;
  for (Bridge* c : bridges())
    if (c->ports()->by_name(port)) b = c;
  if (!b) return error(Errc::not_found, "no bridge has port " + std::string(port));
  if (opts.tag && *opts.tag > 4095) return invalid("tag " + std::to_string(*opts.tag) + " out of range (0..4095)");
  for (uint16_t v : opts.trunks)
    if (v > 4095) return invalid("trunks: VLAN " + std::to_string(v) + " out of range (0..4095)");
  auto mode = vlan_mode_of(port, opts);
  if (!mode) return std::move(mode).take_status();
  PortConfig vlan;
  vlan.vlan_mode = *mode;
  vlan.vlan_mode_set = opts.vlan_mode.has_value();
  vlan.tag = opts.tag.value_or(0);
  vlan.tag_set = opts.tag.has_value();
  vlan.trunks = sorted_trunks(opts.trunks);
  return b->set_port_vlan(port, vlan);
}

Status Ofproto::set_mtu_request(std::string_view port, std::optional<uint32_t> mtu) {
  hal::Port* p = dp_.find_port(port);
  const PortOwner o = p ? port_owner(p->id()) : PortOwner{};
  if (!o.bridge) return error(Errc::not_found, "no interface " + std::string(port) + " in any bridge");
  // No request: the MTU stays what it is (ovs-vswitchd 3.1 leaves a dummy
  // port at 9000 after `set interface p mtu_request=[]`).
  if (mtu) {
    if (Status st = check_mtu_request(*mtu); !st.ok()) return st;
    if (Status st = dp_.set_port_mtu(p->id(), *mtu); !st.ok()) return st;
  }
  return o.bridge->set_port_mtu_request(port, mtu);  // the port is there: cannot fail
}

Status Ofproto::set_interface_queues(std::string_view port, const PortOptions& opts) {
  if (!opts.tunnel_options.empty()) {
    if (opts.rxq_affinity || opts.n_rxq)
      return invalid("set interface " + std::string(port) + ": a tunnel's options and queue settings apart");
    return set_tunnel_options(port, opts.tunnel_options);
  }
  hal::Port* p = dp_.find_port(port);
  const PortOwner o = p ? port_owner(p->id()) : PortOwner{};
  if (!o.bridge) return error(Errc::not_found, "no interface " + std::string(port) + " in any bridge");
  const PortConfig* cur = o.bridge->ports()->by_name(port);
  if (!cur) return error(Errc::not_found, "no interface " + std::string(port) + " in any bridge");
  std::string text = cur->rxq_affinity;
  std::optional<uint16_t> n_rxq = cur->n_rxq;
  datapath::Datapath::RxqAffinity affinity = dp_.rxq_affinity(p->id());
  if (opts.rxq_affinity) {
    auto a = datapath::Datapath::parse_rxq_affinity(*opts.rxq_affinity);
    if (!a) return std::move(a).take_status();
    affinity = std::move(a.value());
    text = *opts.rxq_affinity;
  }
  if (opts.n_rxq) {
    if (Status st = dp_.set_port_rxqs(p->id(), *opts.n_rxq); !st.ok()) return st.prefix("options:n_rxq");
    n_rxq = opts.n_rxq;
  }
  if (opts.rxq_affinity) {
    (void)dp_.set_rxq_affinity(p->id(), std::move(affinity));
    (void)dp_.reschedule();
  }
  return o.bridge->set_port_queues(port, text, n_rxq);  // the port is there: cannot fail
}

// The MTU a port gets back when it leaves its bridge (del-port, del-br).
void Ofproto::reset_mtu(const PortConfig& pc) {
  if (pc.tunnel) return;  // no device
  (void)dp_.set_port_mtu(pc.dp_port, hal::kDefaultMtu);  // the default: cannot fail
  // Its Interface row goes, and with it the rx queue pinning (the queue
  // count stays what the device has).
  if (!pc.rxq_affinity.empty()) {
    (void)dp_.set_rxq_affinity(pc.dp_port, {});
    (void)dp_.reschedule();
  }
}

Status Ofproto::del_port(std::string_view bridge, std::string_view port) {
  Bridge* b = nullptr;
  if (!bridge.empty()) {
    b = find_bridge(bridge);
    if (!b) return error(Errc::not_found, "no bridge " + std::string(bridge));
  } else {
    for (Bridge* c : bridges())
      if (c->ports()->by_name(port)) b = c;
    if (const BondPort* bp = find_bond(port)) b = bp->bridge;
    if (!b) return error(Errc::not_found, "no bridge has port " + std::string(port));
  }
  if (const BondPort* bp = find_bond(port); bp && bp->bridge == b) return del_bond(b->name(), port);
  const PortConfig* pc = b->ports()->by_name(port);
  if (pc && pc->bond_obj)
    return invalid("port " + std::string(port) + " is a member of bond " + pc->bond + " (del-port " + pc->bond +
                   " removes the bond)");
  const PortConfig gone = pc ? *pc : PortConfig{};
  if (Status st = b->del_port(port); !st.ok()) return st;
  reset_mtu(gone);
  publish_index();
  if (gone.tunnel)
    tunnel_port_gone(gone);
  else
    publish_tunnels();  // the bridge MAC may have been this port's
  return {};
}

PortOwner Ofproto::port_owner(uint16_t dp_port) const noexcept {
  const PortIndex* idx = index_.load(std::memory_order_acquire);
  return dp_port < idx->by_dp_port.size() ? idx->by_dp_port[dp_port] : PortOwner{};
}

// ----------------------------------------------------------- reclamation --

void Ofproto::reclaim() {
  rcu_.reclaim();
  // Bridges whose grace period passed: nobody can reach them.
  if (!dead_->empty()) {
    std::vector<Bridge*> dead;
    dead.swap(*dead_);
    for (Bridge* b : dead) {
      auto it = std::find_if(dying_.begin(), dying_.end(), [&](const auto& d) { return d.get() == b; });
      if (it != dying_.end()) dying_.erase(it);  // ~Bridge frees its rules
    }
  }
  for (const auto& b : owned_) b->reclaim();
}

size_t Ofproto::run(uint64_t now_ns) {
  size_t n = 0;
  for (const auto& b : owned_) n += b->expire(now_ns);
  run_bonds(now_ns / 1'000'000);
  (void)neigh_.age();  // learned neighbours past their 15 min (OVS tnl_neigh_cache_run)
  reclaim();
  return n;
}

// ------------------------------------------------------ controller queue --

bool Ofproto::push_packet_in(PacketIn pi) {
  std::lock_guard lk(queue_mu_);
  if (queue_.size() >= kControllerQueueCapacity) {
    ++dropped_;
    return false;
  }
  queue_.push_back(std::move(pi));
  ++queued_;
  return true;
}

std::vector<PacketIn> Ofproto::packet_ins(std::string_view bridge, bool pop) {
  std::lock_guard lk(queue_mu_);
  std::vector<PacketIn> out;
  std::deque<PacketIn> kept;
  for (PacketIn& pi : queue_) {
    if (bridge.empty() || pi.bridge == bridge) {
      if (pop) out.push_back(std::move(pi));
      else out.push_back(pi);
    } else if (pop) {
      kept.push_back(std::move(pi));
    }
  }
  if (pop) queue_.swap(kept);
  return out;
}

ControllerQueueStats Ofproto::controller_stats() const {
  std::lock_guard lk(queue_mu_);
  return {queued_, dropped_, queue_.size()};
}

// ----------------------------------------------------------------- knobs --

Status Ofproto::set_flow_limit(uint32_t n) {
  if (n < 1 || n > 10'000'000) return invalid("flow-limit " + std::to_string(n) + " out of range (1..10000000)");
  flow_limit_.store(n, std::memory_order_relaxed);
  return {};
}

Status Ofproto::set_max_idle_ms(uint32_t ms) {
  if (ms < 100 || ms > 3'600'000) return invalid("max-idle " + std::to_string(ms) + " out of range (100..3600000 ms)");
  max_idle_ms_.store(ms, std::memory_order_relaxed);
  return {};
}

Status Ofproto::set_revalidate_interval_ms(uint32_t ms) {
  if (ms < 10 || ms > 60'000)
    return invalid("revalidate-interval " + std::to_string(ms) + " out of range (10..60000 ms)");
  revalidate_interval_ms_.store(ms, std::memory_order_relaxed);
  return {};
}

}  // namespace keel::ofproto

// Bridge — see bridge.h. The flow-mod machinery: every change is made at
// version N = version() + 1 in whichever tables it touches, recorded in a
// Txn (rules inserted, rules removed), and either published as a whole
// (commit: version_ = N, removed rules handed to the graveyard) or undone
// (rollback: inserted rules erased, removed rules restored) before any
// reader could see N.
#include "ofproto/bridge.h"

#include <algorithm>
#include <cstring>

#include "datapath/rcu.h"
#include "keel/hal/cpu.h"

namespace keel::ofproto {

// ----------------------------------------------------------------- ports --

const PortConfig* PortMap::by_ofport(uint32_t ofport) const {
  auto it = std::lower_bound(ports.begin(), ports.end(), ofport,
                             [](const PortConfig& p, uint32_t n) { return p.ofport < n; });
  return it != ports.end() && it->ofport == ofport ? &*it : nullptr;
}

const PortConfig* PortMap::by_dp_port(uint16_t dp_port) const {
  for (const PortConfig& p : ports)
    if (p.dp_port == dp_port && !p.tunnel) return &p;  // tunnel ports share their vport
  return nullptr;
}

const PortConfig* PortMap::by_name(std::string_view name) const {
  for (const PortConfig& p : ports)
    if (p.name == name) return &p;
  return nullptr;
}

// Removed rules wait here for their grace period. Shared with the Rcu
// callbacks (which run on the control thread, inside Rcu::reclaim()), so a
// callback that fires after the bridge is gone finds `alive` false and does
// nothing: the bridge's destructor freed those rules itself.
struct Bridge::Graveyard {
  bool alive = true;
  std::vector<OfRule*> ready;  // grace period passed: erase them
};

// One batch of changes at version `v`.
struct Bridge::Txn {
  Version v;
  std::vector<OfRule*> inserted;  // new rules (add_version v)
  std::vector<OfRule*> removed;   // rules remove()d at v (old or new)
  // (old, new): old's counters go to new at commit (OfRule::forward_to).
  std::vector<std::pair<OfRule*, OfRule*>> forwards;
  FlowModResult result;
};

Bridge::Bridge(std::string name, datapath::Rcu* rcu)
    : name_(std::move(name)), rcu_(rcu), ports_(std::make_shared<const PortMap>()),
      graveyard_(std::make_shared<Graveyard>()) {
  // Prefix tracking on nw_dst and nw_src, as Open vSwitch's tables by
  // default: the megaflows of IPv6 rules are Open vSwitch's too.
  for (auto& t : tables_) t = std::make_unique<Classifier>(rcu, kOvsPrefixFields);
}

Bridge::~Bridge() {
  // No reader may be inside (the owner retires a bridge through the Rcu).
  // Every rule still linked, in any version, is ours to free; rules already
  // erased are freed by their pending Rcu callbacks.
  graveyard_->alive = false;
  for (auto& t : tables_) {
    for (ClsRule* r : t->all_rules()) delete static_cast<OfRule*>(r);
    t.reset();
  }
}

Status Bridge::add_port(const PortConfig& port) { return add_ports({port}); }

Status Bridge::add_ports(std::vector<PortConfig> add,
                         const std::function<Status(std::vector<PortConfig>&)>& finish) {
  auto next = std::make_shared<PortMap>(*ports());
  auto taken = [&](uint32_t n) { return next->by_ofport(n) != nullptr; };
  // Requested numbers first, so that a member asking for N is not beaten to
  // it by another member's free pick.
  for (int pass = 0; pass < 2; ++pass)
    for (PortConfig& pc : add) {
      if ((pass == 0) != (pc.ofport != 0)) continue;
      if (next->by_name(pc.name)) return error(Errc::already_exists, "bridge " + name_ + " already has port " + pc.name);
      if (const PortConfig* p = next->by_dp_port(pc.dp_port))
        return error(Errc::already_exists,
                     "bridge " + name_ + ": datapath port of " + pc.name + " is already port " + p->name);
      if (pc.ofport == 0) {
        uint32_t n = 1;
        while (n < flow::kOfppMax && taken(n)) ++n;
        if (n >= flow::kOfppMax)
          return error(Errc::resource_exhausted, "bridge " + name_ + ": no free OpenFlow port number");
        pc.ofport = n;
      } else if (pc.ofport >= flow::kOfppMax) {
        return invalid("OpenFlow port number " + std::to_string(pc.ofport) + " out of range (1.." +
                       std::to_string(flow::kOfppMax - 1) + ")");
      } else if (const PortConfig* p = next->by_ofport(pc.ofport)) {
        return error(Errc::already_exists,
                     "bridge " + name_ + ": OpenFlow port " + std::to_string(pc.ofport) + " is already " + p->name);
      }
      auto at = std::lower_bound(next->ports.begin(), next->ports.end(), pc.ofport,
                                 [](const PortConfig& p, uint32_t n) { return p.ofport < n; });
      next->ports.insert(at, pc);
    }
  if (finish) {
    if (Status st = finish(add); !st.ok()) return st;
    for (const PortConfig& pc : add)
      for (PortConfig& p : next->ports)
        if (p.name == pc.name) p = pc;
  }
  std::atomic_store(&ports_, std::shared_ptr<const PortMap>(std::move(next)));
  port_changed();  // translation may output to them now
  return {};
}

Status Bridge::edit_ports(const std::function<Status(std::vector<PortConfig>&)>& edit) {
  auto next = std::make_shared<PortMap>(*ports());
  if (Status st = edit(next->ports); !st.ok()) return st;
  std::sort(next->ports.begin(), next->ports.end(),
            [](const PortConfig& a, const PortConfig& b) { return a.ofport < b.ofport; });
  std::atomic_store(&ports_, std::shared_ptr<const PortMap>(std::move(next)));
  port_changed();
  return {};
}

Status Bridge::set_port_vlan(std::string_view name, VlanMode mode, uint16_t tag, std::vector<uint16_t> trunks) {
  PortConfig vlan;
  vlan.vlan_mode = mode;
  vlan.tag = tag;
  vlan.trunks = std::move(trunks);
  return set_port_vlan(name, vlan);
}

Status Bridge::set_port_vlan(std::string_view name, const PortConfig& vlan) {
  auto cur = ports();
  if (!cur->by_name(name)) return error(Errc::not_found, "bridge " + name_ + " has no port " + std::string(name));
  if (vlan.tag > 4095) return invalid("VLAN tag " + std::to_string(vlan.tag) + " out of range (0..4095)");
  for (uint16_t v : vlan.trunks)
    if (v > 4095) return invalid("trunk VLAN " + std::to_string(v) + " out of range (0..4095)");
  auto next = std::make_shared<PortMap>(*cur);
  for (PortConfig& p : next->ports)
    if (p.name == name) {
      p.vlan_mode = vlan.vlan_mode;
      p.vlan_mode_set = vlan.vlan_mode_set;
      p.tag = vlan.tag;
      p.tag_set = vlan.tag_set;
      p.trunks = vlan.trunks;
    }
  std::atomic_store(&ports_, std::shared_ptr<const PortMap>(std::move(next)));
  mac_.flush();  // learned entries may sit in VLANs the port left
  port_changed();
  return {};
}

Status Bridge::set_port_mtu_request(std::string_view name, std::optional<uint32_t> mtu) {
  auto cur = ports();
  if (!cur->by_name(name))
    return error(Errc::not_found, "bridge " + name_ + " has no port " + std::string(name));
  auto next = std::make_shared<PortMap>(*cur);
  for (PortConfig& p : next->ports)
    if (p.name == name) p.mtu_request = mtu;
  // Translation does not read it: no port_changed().
  std::atomic_store(&ports_, std::shared_ptr<const PortMap>(std::move(next)));
  return {};
}

Status Bridge::set_port_queues(std::string_view name, const std::string& rxq_affinity,
                               std::optional<uint16_t> n_rxq) {
  auto cur = ports();
  if (!cur->by_name(name))
    return error(Errc::not_found, "bridge " + name_ + " has no port " + std::string(name));
  auto next = std::make_shared<PortMap>(*cur);
  for (PortConfig& p : next->ports)
    if (p.name == name) p.rxq_affinity = rxq_affinity, p.n_rxq = n_rxq;
  // Translation does not read them: no port_changed().
  std::atomic_store(&ports_, std::shared_ptr<const PortMap>(std::move(next)));
  return {};
}

Status Bridge::del_port(std::string_view name) {
  auto cur = ports();
  const PortConfig* p = cur->by_name(name);
  if (!p) return error(Errc::not_found, "bridge " + name_ + " has no port " + std::string(name));
  const uint32_t ofport = p->ofport;
  auto next = std::make_shared<PortMap>(*cur);
  next->ports.erase(next->ports.begin() + (p - cur->ports.data()));
  std::atomic_store(&ports_, std::shared_ptr<const PortMap>(std::move(next)));
  mac_.flush_port(ofport);
  port_changed();
  return {};
}

// ------------------------------------------------------------- flow-mods --

namespace {

// Whether the actions push a VLAN tag (also inside write_actions): the one
// action of keel's that OpenFlow 1.0 cannot carry (parse_PUSH_VLAN: usable
// protocols OpenFlow 1.1+), so ovs-ofctl must send the flow in OpenFlow
// 1.1+ (-O OpenFlow13). Other flows it sends in its default, OpenFlow 1.0
// with NXM, which carries the match as written (goto_table as resubmit).
bool has_push_vlan(const flow::OfActions& actions) {
  for (const flow::OfAction& a : actions) {
    if (std::holds_alternative<flow::OfPushVlan>(a)) return true;
    if (const auto* w = std::get_if<flow::OfWriteActions>(&a); w && has_push_vlan(w->set->actions))
      return true;
  }
  return false;
}

// The outer VLAN match of a flow that only OpenFlow 1.1+ carries, as Open
// vSwitch stores it: ovs-ofctl sends such a flow in OpenFlow 1.3, whose OXM
// match has VLAN_VID (VID and the CFI "present" bit) and VLAN_PCP only with
// a tag present (nx-match.c nx_put_raw: VLAN_PCP is put exact when the VID
// value is non-zero and some PCP bit was matched, never otherwise). So
// vlan_tci=0 (no tag) comes back as vlan_tci=0x0000/0x1fff.
void oxm_vlan_match(flow::Match& m) {
  auto host = [](uint16_t be) { return static_cast<uint16_t>((be >> 8) | (be << 8)); };
  const uint16_t key = host(m.key.vlans[0].tci), mask = host(m.mask.vlans[0].tci);
  uint16_t out = mask & 0x1fff;
  if ((key & mask & 0x1fff) && (mask & 0xe000)) out |= 0xe000;
  m.mask.vlans[0].tci = host(out);
}

std::string table_text(uint8_t t) { return "table " + std::to_string(t); }

bool outputs_to(const OfRule& r, uint32_t port) {
  if (port == flow::kOfppNone) return true;
  for (const flow::OfAction& a : r.actions) {
    if (const auto* o = std::get_if<flow::OfOutput>(&a); o && o->port == port) return true;
    if (std::holds_alternative<flow::OfController>(a) && port == flow::kOfppController) return true;
  }
  return false;
}

// Can one packet match both? (Every bit both care about agrees.)
bool overlaps(const flow::Match& a, const flow::Match& b) {
  const uint64_t *ak = a.key.words(), *am = a.mask.words(), *bk = b.key.words(), *bm = b.mask.words();
  for (unsigned w = 0; w < flow::kFlowWords; ++w)
    if ((ak[w] ^ bk[w]) & am[w] & bm[w]) return false;
  return true;
}

// A copy of `old`'s identity (match, priority, table) with new actions.
OfRule* clone_rule(const OfRule& old) {
  auto* r = new OfRule(old.match, old.priority);
  r->table_id = old.table_id;
  r->cookie = old.cookie;
  r->idle_timeout = old.idle_timeout;
  r->hard_timeout = old.hard_timeout;
  r->importance = old.importance;
  r->send_flow_rem = old.send_flow_rem;
  r->no_packet_counts = old.no_packet_counts;
  r->no_byte_counts = old.no_byte_counts;
  r->created_ns = old.created_ns;
  r->modified_ns = old.modified_ns;
  return r;
}

}  // namespace

Status Bridge::apply(const FlowMod& fm, Txn& txn) {
  const flow::RuleMeta& meta = fm.flow.meta;
  const bool is_add = fm.command == FlowMod::Command::add;
  const bool is_modify = fm.command == FlowMod::Command::modify || fm.command == FlowMod::Command::modify_strict;
  const bool strict = fm.command == FlowMod::Command::modify_strict || fm.command == FlowMod::Command::del_strict;
  const bool cookie_masked = meta.has_cookie && (fm.cookie_has_mask || meta.cookie_mask != UINT64_MAX);
  const uint64_t now = hal::now_ns();

  auto remove_rule = [&](OfRule* r) {
    tables_[r->table_id]->remove(r, txn.v);
    txn.removed.push_back(r);
  };

  if (is_add) {
    if (cookie_masked) return invalid("flow additions cannot use a cookie mask");
    const uint8_t table = meta.table.value_or(0);
    if (table >= kNumTables) return invalid("table " + std::to_string(table) + " out of range (0..254)");
    if (Status st = check_of_actions(fm.actions, fm.flow.match, table); !st.ok()) return st;
    Classifier& cls = *tables_[table];
    flow::Match m = fm.flow.match;
    if (has_push_vlan(fm.actions)) oxm_vlan_match(m);
    m.apply_mask();
    if (meta.check_overlap) {
      bool clash = false;
      cls.for_each_loose(flow::Match{}, txn.v, [&](ClsRule* r) {
        clash |= r->priority == meta.priority && !(r->match == m) && overlaps(r->match, m);
      });
      if (clash) return error(Errc::already_exists, "check_overlap: the rule overlaps another rule of priority " +
                                                        std::to_string(meta.priority) + " in " + table_text(table));
    }
    auto* old = static_cast<OfRule*>(cls.find_exactly(m, meta.priority, txn.v));
    if (!old && n_rules_ + txn.inserted.size() - txn.removed.size() >= kMaxRules)
      return error(Errc::resource_exhausted,
                   "bridge " + name_ + ": too many rules (at most " + std::to_string(kMaxRules) + ")");
    auto* r = new OfRule(m, meta.priority);
    r->table_id = table;
    r->cookie = meta.cookie;
    r->idle_timeout = meta.idle_timeout;
    r->hard_timeout = meta.hard_timeout;
    r->importance = meta.importance;
    r->send_flow_rem = meta.send_flow_rem;
    r->no_packet_counts = meta.no_packet_counts;
    r->no_byte_counts = meta.no_byte_counts;
    r->actions = of_actions_as_stored(fm.actions, fm.flow.match);
    r->of11 = has_push_vlan(fm.actions);
    r->created_ns = r->modified_ns = now;
    if (old) {
      if (!meta.reset_counts) txn.forwards.emplace_back(old, r);
      remove_rule(old);
      ++txn.result.modified;
    } else {
      ++txn.result.added;
    }
    cls.insert(r, txn.v);
    txn.inserted.push_back(r);
    return {};
  }

  // modify / delete: which tables.
  unsigned t_lo = 0, t_hi = kNumTables - 1;
  if (meta.table && *meta.table < kNumTables) t_lo = t_hi = *meta.table;
  if (!is_modify && meta.has_cookie && !cookie_masked)
    return invalid("cannot set cookie in a delete (select rules with cookie=VALUE/MASK)");

  std::vector<OfRule*> hits;
  for (unsigned t = t_lo; t <= t_hi; ++t) {
    Classifier& cls = *tables_[t];
    if (cls.empty()) continue;
    auto take = [&](ClsRule* c) {
      auto* r = static_cast<OfRule*>(c);
      if (cookie_masked && ((r->cookie ^ meta.cookie) & meta.cookie_mask)) return;
      if (!is_modify && !outputs_to(*r, fm.out_port)) return;
      hits.push_back(r);
    };
    if (strict) {
      flow::Match m = fm.flow.match;
      m.apply_mask();
      cls.for_each_strict(m, meta.priority, txn.v, take);
    } else {
      cls.for_each_loose(fm.flow.match, txn.v, take);
    }
  }

  if (!is_modify) {
    for (OfRule* r : hits) remove_rule(r);
    txn.result.deleted += hits.size();
    return {};
  }

  // Check every target before changing anything (the actions may be fine
  // for one rule's match and not for another's).
  for (OfRule* r : hits)
    if (Status st = check_of_actions(fm.actions, r->match, r->table_id); !st.ok())
      return st.prefix("rule '" + flow::format_of_match(r->match) + "' in " + table_text(r->table_id));
  if (hits.empty()) {
    // Nothing to modify; still refuse actions that could never be valid.
    if (Status st = check_of_actions(fm.actions, fm.flow.match, t_lo == t_hi ? static_cast<uint8_t>(t_lo) : 255);
        !st.ok())
      return st;
  }
  for (OfRule* old : hits) {
    OfRule* r = clone_rule(*old);
    r->actions = of_actions_as_stored(fm.actions, old->match);
    r->of11 = has_push_vlan(fm.actions);
    r->modified_ns = now;
    if (meta.has_cookie && !cookie_masked) r->cookie = meta.cookie;
    if (!meta.reset_counts) txn.forwards.emplace_back(old, r);
    remove_rule(old);
    tables_[r->table_id]->insert(r, txn.v);
    txn.inserted.push_back(r);
  }
  txn.result.modified += hits.size();
  return {};
}

void Bridge::port_changed() {
  std::lock_guard lock(changes_mu_);
  changes_floor_ = rules_gen_.fetch_add(1, std::memory_order_release) + 1;
  changes_.clear();
}

bool Bridge::changes_since(uint64_t since, std::vector<RuleChange>& out, uint64_t* upto) const {
  std::lock_guard lock(changes_mu_);
  if (since < changes_floor_) return false;
  out.clear();
  // commit() logs a batch before it bumps rules_gen_: the list may hold
  // changes past `upto` (looked at twice, harmless), never miss one before.
  if (upto) *upto = rules_gen_.load(std::memory_order_acquire);
  for (auto it = changes_.rbegin(); it != changes_.rend() && it->gen > since; ++it) out.push_back(*it);
  return true;
}

void Bridge::commit(Txn& txn) {
  if (txn.inserted.empty() && txn.removed.empty()) return;
  for (auto& t : tables_) t->publish(txn.v);  // keeps Classifier::version() in step (readers use ours)
  version_.store(txn.v, std::memory_order_release);
  // A rule both inserted and removed in this batch is in both lists: net 0.
  n_rules_ = n_rules_ + txn.inserted.size() - txn.removed.size();
  {
    std::lock_guard lock(changes_mu_);
    const uint64_t gen = rules_gen_.load(std::memory_order_relaxed) + 1;
    for (const OfRule* r : txn.inserted) changes_.push_back({gen, r, r->match, r->priority, r->table_id, false});
    for (const OfRule* r : txn.removed) changes_.push_back({gen, r, r->match, r->priority, r->table_id, true});
    while (changes_.size() > kMaxLoggedChanges) {
      changes_floor_ = std::max(changes_floor_, changes_.front().gen);
      changes_.pop_front();
    }
  }
  rules_gen_.fetch_add(1, std::memory_order_release);
  // In order: a rule modified twice in one batch forwards along the chain.
  for (auto [old, next] : txn.forwards) old->forward_to(next);
  bury(std::move(txn.removed));
}

void Bridge::rollback(Txn& txn) {
  // Newest first, so a rule removed and re-added in the batch comes back right.
  for (auto it = txn.removed.rbegin(); it != txn.removed.rend(); ++it)
    if ((*it)->add_version() != txn.v) tables_[(*it)->table_id]->restore(*it);
  for (OfRule* r : txn.inserted) {
    Classifier& cls = *tables_[r->table_id];
    if (r->remove_version() == kVersionNotRemoved) cls.remove(r, txn.v);  // never visible: v == add_version
    cls.erase(r);
    if (rcu_) rcu_->retire([r] { delete r; });  // older lookups may be walking its list node
    else delete r;
  }
}

void Bridge::bury(std::vector<OfRule*> rules) {
  if (rules.empty()) return;
  if (!rcu_) {
    for (OfRule* r : rules) {
      tables_[r->table_id]->erase(r);
      delete r;
    }
    return;
  }
  // Phase 1: once every reader has quiesced, no lookup uses a version in
  // which these rules are visible; reclaim() then erases them (phase 2
  // frees them one grace period later).
  std::weak_ptr<Graveyard> g = graveyard_;
  rcu_->retire([g, rules = std::move(rules)] {
    if (auto gy = g.lock(); gy && gy->alive) gy->ready.insert(gy->ready.end(), rules.begin(), rules.end());
  });
}

void Bridge::reclaim() {
  if (graveyard_->ready.empty()) return;
  std::vector<OfRule*> ready;
  ready.swap(graveyard_->ready);
  for (OfRule* r : ready) tables_[r->table_id]->erase(r);
  rcu_->retire([ready = std::move(ready)] {
    for (OfRule* r : ready) delete r;
  });
}

Result<FlowModResult> Bridge::flow_mod(const FlowMod& fm) { return bundle(std::span<const FlowMod>(&fm, 1)); }

Result<FlowModResult> Bridge::bundle(std::span<const FlowMod> fms, size_t* failed) {
  reclaim();
  Txn txn{version() + 1, {}, {}, {}, {}};
  for (size_t i = 0; i < fms.size(); ++i) {
    Status st = apply(fms[i], txn);
    if (!st.ok()) {
      rollback(txn);
      if (failed) {
        *failed = i;
        return st;
      }
      if (fms.size() > 1) return st.prefix("flow-mod " + std::to_string(i + 1) + " of " + std::to_string(fms.size()));
      return st;
    }
  }
  FlowModResult res = txn.result;
  commit(txn);
  return res;
}

// ------------------------------------------------------------------ dump --

std::vector<const OfRule*> Bridge::dump(const flow::Match* filter, uint8_t table,
                                        std::optional<uint16_t> strict_priority) const {
  const Version v = version();
  std::vector<const OfRule*> out;
  const flow::Match all{};
  flow::Match strict_m;
  if (filter && strict_priority) {
    strict_m = *filter;
    strict_m.apply_mask();
  }
  for (unsigned t = 0; t < kNumTables; ++t) {
    if (table != kOfTableAll && t != table) continue;
    const Classifier& cls = *tables_[t];
    if (cls.empty()) continue;
    auto add = [&](ClsRule* r) { out.push_back(static_cast<const OfRule*>(r)); };
    if (filter && strict_priority) cls.for_each_strict(strict_m, *strict_priority, v, add);
    else cls.for_each_loose(filter ? *filter : all, v, add);
  }
  std::sort(out.begin(), out.end(), [](const OfRule* a, const OfRule* b) {
    if (a->table_id != b->table_id) return a->table_id < b->table_id;
    if (a->priority != b->priority) return a->priority > b->priority;
    int c = std::memcmp(a->match.mask.words(), b->match.mask.words(), sizeof(uint64_t) * flow::kFlowWords);
    if (c) return c < 0;
    return std::memcmp(a->match.key.words(), b->match.key.words(), sizeof(uint64_t) * flow::kFlowWords) < 0;
  });
  return out;
}

size_t Bridge::n_rules() const { return n_rules_; }

// ---------------------------------------------------------------- expiry --

size_t Bridge::expire(uint64_t now_ns) {
  reclaim();
  Txn txn{version() + 1, {}, {}, {}, {}};
  const flow::Match all{};
  for (auto& t : tables_) {
    if (t->empty()) continue;
    t->for_each_loose(all, txn.v, [&](ClsRule* c) {
      auto* r = static_cast<OfRule*>(c);
      if (!r->idle_timeout && !r->hard_timeout) return;
      const uint64_t last = std::max(r->used_ns.load(std::memory_order_relaxed), r->created_ns);
      const bool idle = r->idle_timeout && now_ns >= last && now_ns - last >= uint64_t{r->idle_timeout} * 1'000'000'000;
      const bool hard = r->hard_timeout && now_ns >= r->modified_ns &&
                        now_ns - r->modified_ns >= uint64_t{r->hard_timeout} * 1'000'000'000;
      if (idle || hard) {
        t->remove(r, txn.v);
        txn.removed.push_back(r);
      }
    });
  }
  const size_t n = txn.removed.size();
  commit(txn);
  return n;
}

}  // namespace keel::ofproto

// Udpif: the upcall handler and the revalidator. See udpif.h.
#include "ofproto/udpif.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "flow/flow_text.h"
#include "flow/miniflow.h"
#include "keel/hal/cpu.h"
#include "ofproto/bridge.h"

namespace keel::ofproto {

namespace {

// The megaflow of a translation: the flow's bits under wc, with in_port and
// recirc_id always exact (as every datapath flow).
flow::Match megaflow_match(const flow::FlowKey& flow, const flow::FlowKey& wc) {
  flow::Match m;
  m.key = flow;
  m.mask = wc;
  m.mask.in_port = 0xffffffffu;
  m.mask.recirc_id = 0xffffffffu;
  datapath::Datapath::mask_vlans(m);  // as every datapath flow (see there)
  m.apply_mask();
  return m;
}

// Megaflows off: every word the packet's miniflow has is matched whole.
void exact_words(const flow::Miniflow& key, flow::FlowKey& wc) {
  uint64_t* w = wc.words();
  key.map.for_each([&](unsigned i) { w[i] = ~uint64_t{0}; });
}

// The per-Datapath megaflows setting (see udpif.h) and the live Udpifs.
struct MegaflowRegistry {
  std::mutex mu;
  std::unordered_map<const datapath::Datapath*, bool> enabled;  // absent: true
  std::unordered_map<const datapath::Datapath*, std::vector<std::function<void(bool)>*>> live;
};
MegaflowRegistry& registry() {
  static MegaflowRegistry r;
  return r;
}

void push_stats(const std::vector<const OfRule*>& rules, uint64_t pkts, uint64_t bytes, uint64_t used) {
  if (!pkts) return;
  for (const OfRule* r : rules) const_cast<OfRule*>(r)->add_stats(pkts, bytes, used);
}

}  // namespace

Udpif::Udpif(datapath::Datapath& dp, datapath::Rcu& rcu, Translator translate, ActionSink sink, UdpifKnobs knobs)
    : dp_(dp), rcu_(rcu), translate_(std::move(translate)), sink_(std::move(sink)), knobs_(std::move(knobs)) {
  MegaflowRegistry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.enabled.find(&dp_);
  megaflows_.store(it == r.enabled.end() || it->second);
  on_megaflows_ = [this](bool on) {
    if (megaflows_.exchange(on) != on) {
      flush_.store(true);
      kick();
    }
  };
  r.live[&dp_].push_back(&on_megaflows_);
  ukeys_.reserve(65536);
}

Udpif::~Udpif() {
  stop();
  MegaflowRegistry& r = registry();
  std::lock_guard lock(r.mu);
  auto& v = r.live[&dp_];
  v.erase(std::remove(v.begin(), v.end(), &on_megaflows_), v.end());
  if (v.empty()) {
    // The Datapath goes with its System: a later one at this address starts
    // with the default.
    r.live.erase(&dp_);
    r.enabled.erase(&dp_);
  }
}

void Udpif::set_megaflows_enabled(const datapath::Datapath& dp, bool on) {
  MegaflowRegistry& r = registry();
  std::lock_guard lock(r.mu);
  r.enabled[&dp] = on;
  if (auto it = r.live.find(&dp); it != r.live.end())
    for (auto* f : it->second) (*f)(on);
}

bool Udpif::megaflows_enabled(const datapath::Datapath& dp) {
  MegaflowRegistry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.enabled.find(&dp);
  return it == r.enabled.end() || it->second;
}

void Udpif::start() {
  if (running()) return;
  if (!slots_registered_) {
    handler_slot_ = rcu_.register_slot();
    revalidator_slot_ = rcu_.register_slot();
    slots_registered_ = true;
  }
  quit_.store(false);
  offline_.assign(dp_.pmds().size(), {});  // before the handler runs
  adapted_limit_.store(knobs_.flow_limit ? knobs_.flow_limit() : 200000);
  handler_ = std::thread([this] { handler_main(); });
  revalidator_ = std::thread([this] { revalidator_main(); });
  dp_.set_upcalls_enabled(true);
}

void Udpif::stop() {
  if (!running()) return;
  dp_.set_upcalls_enabled(false);
  quit_.store(true);
  {
    std::lock_guard lock(wake_mu_);
    kicked_ = true;
  }
  wake_cv_.notify_all();
  handler_.join();
  revalidator_.join();
}

bool Udpif::wait_spent(uint64_t timeout_ms) {
  const uint64_t want = answered_total_.load(std::memory_order_relaxed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (recycled_total_.load(std::memory_order_acquire) < want) {
    if (!running() || std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

void Udpif::forget_pmd(unsigned pmd) {
  std::lock_guard lock(mu_);
  for (auto it = ukeys_.begin(); it != ukeys_.end();) it = it->second.pmd == pmd ? ukeys_.erase(it) : std::next(it);
}

void Udpif::kick() {
  {
    std::lock_guard lock(wake_mu_);
    kicked_ = true;
  }
  wake_cv_.notify_all();
}

// --- handler ---

void Udpif::handler_main() {
  hal::name_current_thread("handler");
  rcu_.online(handler_slot_);
  unsigned idle = 0;
  while (!quit_.load(std::memory_order_relaxed)) {
    const bool busy = handle_batch();
    rcu_.quiesce(handler_slot_);
    if (busy) {
      idle = 0;
      continue;
    }
    // Nothing to do: poll again soon, then back off (the PMDs don't wake us).
    rcu_.offline(handler_slot_);
    std::this_thread::sleep_for(std::chrono::microseconds(++idle < 100 ? 20 : 200));
    rcu_.online(handler_slot_);
  }
  // Stopping: what is still queued is answered "drop" so the PMDs free it.
  for (size_t i = 0; i < dp_.pmds().size(); ++i) {
    datapath::UpcallChannel& ch = dp_.pmds()[i]->upcall_channel();
    datapath::Upcall* u;
    for (datapath::Upcall* b : offline_[i].backlog) ch.answer(b);
    offline_[i].backlog.clear();
    offline_[i].wait_for = nullptr;
    while (ch.next(u)) ch.answer(u);
  }
  rcu_.offline(handler_slot_);
}

bool Udpif::recycle_spent(datapath::UpcallChannel& ch, OfflineQueue& oq) {
  bool any = false;
  datapath::Upcall* u;
  // Records the PMD has executed: free what the answers allocated.
  while (ch.next_spent(u)) {
    ++oq.spent;
    if (u == oq.wait_for) oq.wait_for = nullptr;
    if (u->install_failed) {
      datapath::free_megaflow(u->install);
      std::lock_guard lock(mu_);
      ++stats_.install_failed;
    }
    if (u->uncounted_packets) credit_uncounted(*u);
    delete u->actions;
    ch.recycle(u);
    recycled_total_.fetch_add(1, std::memory_order_release);  // after the credit (wait_spent)
    any = true;
  }
  return any;
}

void Udpif::credit_uncounted(const datapath::Upcall& u) {
  // Packets the PMD executed with an answer and counted on no megaflow:
  // the followers of a miss that installed nothing (at the flow limit, an
  // uncacheable translation; answer() credited the miss itself). Each would
  // have been an upcall of its own in Open vSwitch, translated and credited
  // when it came. Translated again (without learning) for the rules to
  // credit; rare, off the PMDs.
  flow::FlowKey flow;
  flow::expand(u.key, flow);
  Translation t;
  if (!translate_(flow, /*may_learn=*/false, t).ok()) return;
  push_stats(t.rules, u.uncounted_packets, u.uncounted_bytes, hal::now_ns());
}

bool Udpif::handle_batch() {
  bool any = false;
  for (size_t i = 0; i < dp_.pmds().size(); ++i) {
    datapath::UpcallChannel& ch = dp_.pmds()[i]->upcall_channel();
    OfflineQueue& oq = offline_[i];
    any |= recycle_spent(ch, oq);
    datapath::Upcall* u;
    const bool got = ch.next(u);
    // Read after a pop: a record comes from a PMD started after
    // Datapath::start() decided (ring push release, pop acquire).
    if (!dp_.offline()) {
      for (unsigned n = 0; got; ++n) {
        answer(ch, u, nullptr);
        ++oq.answered;
        answered_total_.fetch_add(1, std::memory_order_relaxed);
        any = true;
        if (n + 1 == 64 || !ch.next(u)) break;
      }
      continue;
    }
    // Offline: in order, derived records (sent up while an earlier answer
    // was executed) before the others already queued.
    for (bool more = got; more; more = ch.next(u)) {
      if (u->derived) {
        auto at = oq.backlog.begin();
        while (at != oq.backlog.end() && (*at)->derived) ++at;
        oq.backlog.insert(at, u);
      } else {
        oq.backlog.push_back(u);
      }
      any = true;
    }
    for (unsigned n = 0; n < 64 && !oq.wait_for && !oq.backlog.empty(); ++n) {
      u = oq.backlog.front();
      oq.backlog.pop_front();
      answer(ch, u, &oq);
      ++oq.answered;
      answered_total_.fetch_add(1, std::memory_order_relaxed);
      // The answer recirculates: what its packets send up again must be
      // translated before the records behind it (they come back derived).
      // Only this thread pops `spent`, so u stays valid until then.
      if (u->type == datapath::Upcall::Type::miss && u->actions && has_recirc(u->actions->bytes())) oq.wait_for = u;
    }
  }
  return any;
}

bool Udpif::has_recirc(std::span<const uint8_t> actions) {
  flow::DpActionReader r(actions);
  while (!r.done()) {
    const flow::DpAction a = r.next();
    if (a.type == flow::DpActionType::kRecirc) return true;
    if (a.type == flow::DpActionType::kClone && has_recirc(a.nested())) return true;
  }
  return false;
}

void Udpif::answer(datapath::UpcallChannel& ch, datapath::Upcall* u, OfflineQueue* oq) {
  if (u->type == datapath::Upcall::Type::action) {
    if (sink_) sink_(*u);
    std::lock_guard lock(mu_);
    ++stats_.action_upcalls;
    ch.answer(u);  // no actions: the packet is consumed
    return;
  }
  flow::FlowKey flow;
  flow::expand(u->key, flow);
  Translation t;
  Status st = translate_(flow, /*may_learn=*/true, t);
  if (oq && st.ok() && t.mac_changed) {
    // Offline: the MAC table moved, so megaflows installed before may be
    // stale. Once every earlier answer is installed, a revalidation round
    // fixes them before this answer lets the PMD classify later packets (as
    // Open vSwitch with revalidator/purge between packets).
    while (oq->spent != oq->answered && !quit_.load(std::memory_order_relaxed)) {
      if (!recycle_spent(ch, *oq)) std::this_thread::sleep_for(std::chrono::microseconds(5));
    }
    (void)round(true, handler_slot_);
    std::lock_guard lock(mu_);
    ++stats_.offline_revalidations;
  }
  std::lock_guard lock(mu_);
  ++stats_.upcalls;
  stats_.last_upcall_ns = hal::now_ns();
  if (!stats_.first_upcall_ns) stats_.first_upcall_ns = stats_.last_upcall_ns;
  if (!st.ok()) {
    ++stats_.translate_errors;
    ch.answer(u);  // drop
    return;
  }
  u->actions = new flow::DpActions(t.actions);
  const uint32_t limit = adapted_limit_.load(std::memory_order_relaxed);
  // Dropped: its port is in no bridge (counted here unless a drop flow
  // installed earlier counts it, account_existing below).
  if (!t.bridge) ++stats_.no_bridge_drops;
  if (!t.cacheable) {
    push_stats(t.rules, 1, u->pkt->len(), hal::now_ns());
  } else if (std::max(dp_.flow_count(), ukeys_.size()) >= limit) {  // ukeys: answered, maybe not installed yet
    ++stats_.limit_hits;
    push_stats(t.rules, 1, u->pkt->len(), hal::now_ns());
  } else {
    const bool exact = !megaflows_.load(std::memory_order_relaxed);
    if (exact) exact_words(u->key, t.wc);
    const flow::Match m = megaflow_match(flow, t.wc);
    const datapath::Ufid ufid = datapath::Datapath::ufid_for(m);
    if (ukeys_.count({u->pmd, ufid})) {
      // An earlier miss of this megaflow was answered first (both missed
      // before its install): the install would fail, and a second ukey
      // would reset the first one's pushed counters. The PMD counts the
      // packet (and those riding with it) on the installed megaflow, from
      // where the revalidator pushes them to the rules (as Open vSwitch's
      // PMD would have found that flow by lookup).
      u->account_existing = true;
      if (!t.bridge) --stats_.no_bridge_drops;  // the drop flow counts it
      ch.answer(u);
      return;
    }
    auto f = dp_.build_megaflow(m, &t.actions, ufid, &u->key);  // flow-dump shows the packet's key
    if (f) {
      // As Open vSwitch's handler (xlate with resubmit_stats): the packet
      // whose upcall installs the megaflow is credited to its rules now;
      // the megaflow counts only what the PMD forwards on it (this one's
      // followers, later hits), which the revalidator pushes (should the
      // install fail, the PMD counts only the followers on the flow there).
      push_stats(t.rules, 1, u->pkt->len(), hal::now_ns());
      u->install = f.value();
      Ukey& k = ukeys_[{u->pmd, ufid}];
      k.cold = std::make_unique<UkeyCold>();
      k.pmd = u->pmd;
      k.cold->match = m;
      k.cold->actions = t.actions;
      k.bridge = t.bridge;
      k.cold->rules = std::move(t.rules);
      k.rule1 = k.cold->rules.size() == 1 ? k.cold->rules[0] : nullptr;
      k.rules_gen = t.rules_gen;
      k.uses_normal = t.uses_normal;
      k.mac_gen = t.mac_gen;
      k.cold->tables = t.tables;
      k.packets = k.bytes = 0;
      k.created_ns = hal::now_ns();
      k.seen_round = 0;
      k.exact = exact;
      ++stats_.installs;
    } else {
      ++stats_.translate_errors;
    }
  }
  ch.answer(u);
}

// --- revalidator ---

struct Udpif::ChangeCache {
  struct Entry {
    bool complete;
    std::vector<Bridge::RuleChange> list;
  };
  std::map<std::pair<const Bridge*, uint64_t>, Entry> by_since;
};

bool Udpif::rules_may_matter(const Ukey& k, ChangeCache& cache) {
  auto [it, fresh] = cache.by_since.try_emplace({k.bridge, k.rules_gen});
  if (fresh) it->second.complete = k.bridge->changes_since(k.rules_gen, it->second.list);
  if (!it->second.complete) return true;
  for (const Bridge::RuleChange& c : it->second.list) {
    if (!k.cold->tables.test(c.table)) continue;
    if (c.table != 0) return true;  // later tables see a flow the actions may have changed
    // Table 0 sees the packet's own fields: a rule matters if some packet of
    // the megaflow could match it. in_port differs in kind (OpenFlow port
    // in the rule, datapath port in the megaflow): treated as overlapping.
    flow::FlowKey a = c.match.key, am = c.match.mask, b = k.cold->match.key, bm = k.cold->match.mask;
    am.in_port = bm.in_port = 0;
    const uint64_t* aw = a.words();
    const uint64_t* amw = am.words();
    const uint64_t* bw = b.words();
    const uint64_t* bmw = bm.words();
    bool overlap = true;
    for (unsigned w = 0; w < flow::kFlowWords && overlap; ++w) overlap = ((aw[w] ^ bw[w]) & amw[w] & bmw[w]) == 0;
    if (overlap) return true;
  }
  return false;
}

void Udpif::revalidator_main() {
  hal::name_current_thread("revalidator");
  revalidator_tid_.store(static_cast<int>(gettid()), std::memory_order_relaxed);
  // The revalidator is an Rcu reader from start to stop and quiesces only
  // between rounds: its ukeys hold rule pointers across the sleep. A removed
  // rule is freed two grace periods after its removal (Bridge::bury), so
  // only after a whole round that started after the change has
  // re-translated the ukeys that pointed to it.
  rcu_.online(revalidator_slot_);
  while (!quit_.load(std::memory_order_relaxed)) {
    const uint32_t interval = knobs_.revalidate_interval_ms ? knobs_.revalidate_interval_ms() : 500;
    {
      std::unique_lock lock(wake_mu_);
      wake_cv_.wait_for(lock, std::chrono::milliseconds(interval), [this] { return kicked_; });
      kicked_ = false;
    }
    if (quit_.load(std::memory_order_relaxed)) break;
    (void)round(true, revalidator_slot_);
    rcu_.quiesce(revalidator_slot_);
  }
  rcu_.offline(revalidator_slot_);
}

uint64_t Udpif::revalidate_now(bool terse) {
  // The caller's thread is not an Rcu reader; borrow the revalidator's slot
  // only when its thread isn't running.
  if (running()) {
    // The revalidator thread runs it: the first round that starts after
    // this call (full if asked); wait for that one.
    uint64_t want;
    {
      std::lock_guard lock(mu_);
      want = started_seq_ + 1;
      if (want_seq_ < want) {
        want_seq_ = want;
        want_full_ = !terse;
      } else {
        want_full_ |= !terse;  // another caller waits for the same round
      }
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      kick();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard lock(mu_);
      if (done_seq_ >= want) return done_seq_ == want ? want_us_ : stats_.last_round_us;
      if (std::chrono::steady_clock::now() > deadline) return stats_.last_round_us;
    }
  }
  if (!slots_registered_) {
    handler_slot_ = rcu_.register_slot();
    revalidator_slot_ = rcu_.register_slot();
    slots_registered_ = true;
  }
  rcu_.online(revalidator_slot_);
  const uint64_t us = round(terse, revalidator_slot_);
  rcu_.offline(revalidator_slot_);
  return us;
}

uint64_t Udpif::round(bool terse, unsigned rcu_slot) {
  (void)rcu_slot;
  std::lock_guard round_lock(round_mu_);
  uint64_t my_seq;
  {
    std::lock_guard lock(mu_);
    my_seq = ++started_seq_;
    if (my_seq == want_seq_ && want_full_) terse = false;
  }
  const bool flush = flush_.exchange(false);
  const uint64_t t0 = hal::now_ns();
  const uint64_t max_idle_ns = uint64_t{knobs_.max_idle_ms ? knobs_.max_idle_ms() : 10000} * 1'000'000;

  // 1. What the datapath has: terse (ids + stats) or, for comparison, full
  // (keys, masks and actions formatted, as a dump that carries everything).
  std::vector<datapath::FlowStats> dump;
  if (terse) {
    dp_.flow_stats(dump);
  } else {
    for (const datapath::FlowView& v : dp_.flow_dump())
      dump.push_back({v.pmd, v.ufid, v.packets, v.bytes, v.used_ns, v.tcp_flags});
  }

  std::vector<datapath::PmdFlowRef> to_delete;
  struct Fix {
    unsigned pmd;
    flow::Match match;
    flow::DpActions actions;
  };
  std::vector<Fix> to_modify;
  const uint32_t limit = adapted_limit_.load(std::memory_order_relaxed);
  const uint64_t round_id = ++round_seq_;
  std::vector<std::pair<uint64_t, UkeyId>> by_age;  // for the flow limit
  ChangeCache changes;
  const bool track_age = dump.size() > limit;         // only then can ours exceed it
  // Statistics pushed to rules, summed while consecutive flows have the same
  // single rule (the common case: one rule, many flows), so a rule's
  // counters are written once per run instead of once per flow.
  const OfRule* agg_rule = nullptr;
  uint64_t agg_pkts = 0, agg_bytes = 0, agg_used = 0;
  auto flush_agg = [&] {
    if (agg_rule && agg_pkts) const_cast<OfRule*>(agg_rule)->add_stats(agg_pkts, agg_bytes, agg_used);
    agg_rule = nullptr;
    agg_pkts = agg_bytes = agg_used = 0;
  };
  auto push = [&](const Ukey& k, uint64_t pkts, uint64_t bytes, uint64_t used) {
    if (!pkts) return;
    if (!k.bridge) {  // a port in no bridge: its drop flow's packets (mu_ is held)
      stats_.no_bridge_drops += pkts;
      return;
    }
    if (k.rule1) {
      if (k.rule1 != agg_rule) {
        flush_agg();
        agg_rule = k.rule1;
      }
      agg_pkts += pkts;
      agg_bytes += bytes;
      agg_used = std::max(agg_used, used);
      return;
    }
    push_stats(k.cold->rules, pkts, bytes, used);
  };
  // Flows whose translation may have changed: translated after the pass,
  // outside the lock, so the handler keeps answering upcalls meanwhile.
  struct Recheck {
    size_t i;  // in dump
    flow::FlowKey key;
  };
  std::vector<Recheck> rechecks;
  size_t seen = 0;  // ukeys found in the dump
  // The ukey table is locked per chunk of flows (not per flow: the lock and
  // unlock would cost more than the work; not for the whole pass: the
  // handler would wait for it).
  constexpr size_t kChunk = 256;
  for (size_t base = 0; base < dump.size(); base += kChunk) {
    std::lock_guard lock(mu_);
    for (size_t i = base; i < std::min(dump.size(), base + kChunk); ++i) {
      const datapath::FlowStats& s = dump[i];
      const UkeyId id{s.pmd, s.ufid};
      auto it = ukeys_.find(id);
      if (it == ukeys_.end()) continue;  // not ours (dp-flow add): left alone
      ++seen;
      Ukey& k = it->second;
      k.seen_round = round_id;
      const uint64_t used = s.used_ns ? s.used_ns : k.created_ns;
      if (flush || (t0 > used && t0 - used > max_idle_ns)) {  // megaflows switched, or idle
        push(k, s.packets - std::min(s.packets, k.packets), s.bytes - std::min(s.bytes, k.bytes), s.used_ns);
        to_delete.push_back({s.pmd, k.cold->match});
        ukeys_.erase(it);
        ++(flush ? stats_.deleted_changed : stats_.deleted_idle);
        continue;
      }
      // Re-translate only what may have changed.
      bool recheck = false;
      if (k.bridge && k.bridge->rules_generation() != k.rules_gen) {
        const uint64_t gen = k.bridge->rules_generation();
        recheck = rules_may_matter(k, changes);
        if (!recheck) k.rules_gen = gen;  // nothing relevant: the translation stands
      }
      recheck |= k.uses_normal && k.bridge && k.bridge->mac().generation() != k.mac_gen;
      recheck |= !k.bridge;  // a drop flow of a port in no bridge: has the port joined one?
      if (!recheck) {
        if (s.packets > k.packets) {
          push(k, s.packets - k.packets, s.bytes - std::min(s.bytes, k.bytes), s.used_ns);
          k.packets = s.packets;
          k.bytes = s.bytes;
        }
        if (track_age) by_age.push_back({used, id});
        continue;
      }
      rechecks.push_back({i, k.cold->match.key});
    }
    flush_agg();
  }
  for (const Recheck& rc : rechecks) {
    const datapath::FlowStats& s = dump[rc.i];
    const UkeyId id{s.pmd, s.ufid};
    const flow::FlowKey& key = rc.key;
    Translation t;
    Status st = translate_(key, /*may_learn=*/false, t);
    std::lock_guard lock(mu_);
    ++stats_.revalidated;
    auto it = ukeys_.find(id);
    if (it == ukeys_.end()) continue;
    Ukey& k = it->second;
    if (st.ok() && k.exact) {  // installed with megaflows off: the same whole-key mask
      uint64_t* w = t.wc.words();
      const uint64_t* m = k.cold->match.mask.words();
      for (unsigned i = 0; i < flow::kFlowWords; ++i) w[i] |= m[i];
    }
    const flow::Match m = st.ok() ? megaflow_match(key, t.wc) : flow::Match{};
    // The stats so far belong to the old translation's rules.
    push(k, s.packets - std::min(s.packets, k.packets), s.bytes - std::min(s.bytes, k.bytes), s.used_ns);
    k.packets = std::max(k.packets, s.packets);
    k.bytes = std::max(k.bytes, s.bytes);
    if (!st.ok() || !t.cacheable || !t.bridge != !k.bridge || !(m == k.cold->match)) {
      to_delete.push_back({s.pmd, k.cold->match});
      ukeys_.erase(it);
      ++stats_.deleted_changed;
      flush_agg();
      continue;
    }
    if (!(t.actions == k.cold->actions)) {
      to_modify.push_back({s.pmd, k.cold->match, t.actions});
      k.cold->actions = t.actions;
      ++stats_.modified;
    }
    flush_agg();  // k's rules change now
    k.cold->rules = std::move(t.rules);
    k.rule1 = k.cold->rules.size() == 1 ? k.cold->rules[0] : nullptr;
    k.rules_gen = t.rules_gen;
    k.uses_normal = t.uses_normal;
    k.mac_gen = t.mac_gen;
    k.cold->tables = t.tables;
    if (track_age) by_age.push_back({s.used_ns ? s.used_ns : k.created_ns, id});
  }
  flush_agg();
  {
    std::lock_guard lock(mu_);
    // Over the limit (it shrank): the least recently used go.
    if (by_age.size() > limit) {
      std::sort(by_age.begin(), by_age.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (size_t i = 0; i < by_age.size() - limit; ++i) {
        auto it = ukeys_.find(by_age[i].second);
        if (it == ukeys_.end()) continue;
        to_delete.push_back({it->second.pmd, it->second.cold->match});
        ukeys_.erase(it);
        ++stats_.deleted_limit;
      }
    }
    // Ukeys whose flow is gone (deleted by hand, install failed): forgotten
    // once they were in a dump before, or are old enough to have been.
    // Nothing to look for when every ukey was in this dump.
    for (auto it = seen == ukeys_.size() ? ukeys_.end() : ukeys_.begin(); it != ukeys_.end();) {
      const Ukey& k = it->second;
      const bool gone = k.seen_round != round_id && k.created_ns < t0 &&
                        (k.seen_round != 0 || t0 - k.created_ns > 2'000'000'000ull);
      it = gone ? ukeys_.erase(it) : std::next(it);
    }
  }
  for (const Fix& f : to_modify) (void)dp_.flow_modify(f.pmd, f.match, f.actions);
  if (!to_delete.empty()) (void)dp_.flows_del(to_delete);

  // 2. How long it took adapts the flow limit (Open vSwitch's rule).
  const uint64_t us = (hal::now_ns() - t0) / 1000;
  const uint64_t ms = us / 1000;
  const uint32_t configured = knobs_.flow_limit ? knobs_.flow_limit() : 200000;
  uint64_t lim = adapted_limit_.load(std::memory_order_relaxed);
  const size_t n_flows = dump.size();
  if (ms > 2000) {
    lim /= ms / 1000;
  } else if (ms > 1300) {
    lim = lim * 3 / 4;
  } else if (ms < 1000 && n_flows > 2000 && lim < n_flows * 1000 / std::max<uint64_t>(ms, 1)) {
    lim += 1000;
  }
  lim = std::min<uint64_t>(configured, std::max<uint64_t>(lim, 1000));
  adapted_limit_.store(static_cast<uint32_t>(lim), std::memory_order_relaxed);

  std::lock_guard lock(mu_);
  done_seq_ = my_seq;
  if (my_seq == want_seq_) want_us_ = us;
  ++stats_.rounds;
  stats_.last_dump_ms = ms;
  stats_.last_round_us = us;
  stats_.max_dump_ms = std::max(stats_.max_dump_ms, ms);
  stats_.avg_dump_ms = (stats_.avg_dump_ms * (stats_.rounds - 1) + ms) / stats_.rounds;
  stats_.dump_duration_ms = std::max<uint64_t>(ms, 1);  // OVS: MAX(time_msec() - start_time, 1)
  stats_.max_n_flows = std::max<uint64_t>(stats_.max_n_flows, n_flows);
  stats_.avg_n_flows = (stats_.avg_n_flows + n_flows) / 2;
  return us;
}

UdpifStats Udpif::stats() const {
  std::lock_guard lock(mu_);
  UdpifStats s = stats_;
  s.flow_limit = adapted_limit_.load(std::memory_order_relaxed);
  s.revalidator_tid = revalidator_tid_.load(std::memory_order_relaxed);
  s.ukeys = ukeys_.size();
  s.flows = dp_.flow_count();
  return s;
}

}  // namespace keel::ofproto

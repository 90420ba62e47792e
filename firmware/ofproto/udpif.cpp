// Udpif: the upcall handler and the revalidator. See udpif.h.
#include "ofproto/udpif.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/fault.h"
#include "core/slab_pool.h"
#include "flow/flow_text.h"
#include "flow/miniflow.h"
#include "keel/hal/cpu.h"
#include "ofproto/bond.h"
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
  // Open vSwitch's datapath key leaves out the tunnel attributes that are
  // zero (odp-util's tun_key_to_attr: no ToS, source address or transport
  // ports when 0), and a mask attribute without its key attribute is
  // dropped: such fields are wildcarded whatever translation consulted.
  // Same megaflows here (a decapsulated packet with ToS 0 matches any ToS).
  if (m.key.tun_tos == 0) m.mask.tun_tos = 0;
  if (m.key.tun_ipv4_src == 0) m.mask.tun_ipv4_src = 0;
  if (m.key.tun_tp_src == 0) m.mask.tun_tp_src = 0;
  if (m.key.tun_tp_dst == 0) m.mask.tun_tp_dst = 0;
  m.apply_mask();
  return m;
}

// Megaflows off: every word the packet's miniflow has is matched whole.
void exact_words(const flow::Miniflow& key, flow::FlowKey& wc) {
  uint64_t* w = wc.words();
  key.map.for_each([&](unsigned i) { w[i] = ~uint64_t{0}; });
}

// The per-Datapath settings (see udpif.h) and the live Udpifs.
struct Settings {
  bool megaflows = true;
  unsigned handlers = 0, revalidators = 0;  // 0: default
};
struct MegaflowRegistry {
  std::mutex mu;
  std::unordered_map<const datapath::Datapath*, Settings> settings;  // absent: defaults
  std::unordered_map<const datapath::Datapath*, std::vector<std::function<void(bool)>*>> live;
  std::unordered_map<const datapath::Datapath*, std::vector<Udpif*>> live_udpifs;
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

// The rule changes since one generation of one bridge, prepared once per
// share of a round for every ukey that was translated at that generation
// (most ukeys of a bridge share a few generations: the last entry used is
// kept at hand).
namespace {
// Never destroyed: a ukey may go with another static's destructor.
SlabPool& ukey_cold_pool(size_t size, size_t align) {
  static SlabPool* const pool = new SlabPool(size, align);
  return *pool;
}
}  // namespace

void* Udpif::UkeyCold::operator new(std::size_t n) {
  if (n != sizeof(UkeyCold)) throw std::bad_alloc();  // nothing derives from it
  return ukey_cold_pool(sizeof(UkeyCold), alignof(UkeyCold)).alloc();
}
void Udpif::UkeyCold::operator delete(void* p) noexcept {
  ukey_cold_pool(sizeof(UkeyCold), alignof(UkeyCold)).release(p);
}

struct Udpif::ChangeCache {
  struct Entry {
    bool complete = false;  // false: the log doesn't reach back (or a port changed): everything may matter
    uint64_t upto = 0;      // the list is complete up to this generation
    std::vector<RuleChangeCheck> list;
  };
  std::map<std::pair<const Bridge*, uint64_t>, Entry> by_since;
  const Bridge* last_br = nullptr;
  uint64_t last_since = 0;
  Entry* last = nullptr;
  // The last verdict the hot filters alone gave (no change can reach the
  // ukey): most ukeys of a bridge share their generation and their filter
  // (same in_port, same tables), so the next one with both equal takes it
  // without walking the changes.
  struct Cleared {
    const Bridge* br = nullptr;
    uint64_t since = 0, upto = 0;
    DepsFilter filter;
  } cleared;

  Entry& get(const Bridge& br, uint64_t since) {
    if (last && last_br == &br && last_since == since) return *last;
    auto [it, fresh] = by_since.try_emplace({&br, since});
    if (fresh) {
      std::vector<Bridge::RuleChange> raw;
      it->second.complete = br.changes_since(since, raw, &it->second.upto);
      it->second.list.reserve(raw.size());
      for (const Bridge::RuleChange& r : raw) it->second.list.emplace_back(r);
    }
    last_br = &br;
    last_since = since;
    last = &it->second;
    return it->second;
  }
};

// What every revalidator reads in a round: the dump, filed by ukey shard.
struct Udpif::RoundCtx {
  std::vector<datapath::FlowStats> dump;
  std::array<std::vector<uint32_t>, kUkeyShards> by_shard;  // indices into dump
  bool flush = false;
  bool track_age = false;  // the dump exceeds the limit: collect ages
  uint64_t t0 = 0, max_idle_ns = 0, round_id = 0;
  // Each shard's insert count (UkeyShard::inserted) read just before the
  // dump: the ukeys up to it existed when the datapath was dumped.
  std::array<uint64_t, kUkeyShards> inserted_before{};
};

// What one revalidator decided on its share of a round (the leader merges).
struct Udpif::Share {
  // A deleted ukey's rules and the counts pushed to them (its flow's at the
  // dump): what its flow counts beyond them when it goes is theirs too.
  struct Gone {
    std::vector<const OfRule*> rules;
    uint64_t packets, bytes;
  };
  std::vector<datapath::PmdFlowRef> to_delete;
  std::vector<Gone> gone;  // to_delete[i]'s
  std::vector<datapath::PmdFlowMod> to_modify;
  std::vector<std::pair<uint64_t, UkeyId>> by_age;  // for the flow limit
  uint64_t revalidated = 0, modified = 0, deleted_idle = 0, deleted_changed = 0, no_bridge_drops = 0, tnl_no_port = 0;
  uint64_t looked_at = 0, checked = 0, checked_deep = 0;  // UdpifStats::Round
  void clear() {
    to_delete.clear();
    gone.clear();
    to_modify.clear();
    by_age.clear();
    revalidated = modified = deleted_idle = deleted_changed = no_bridge_drops = tnl_no_port = 0;
    looked_at = checked = checked_deep = 0;
  }
};

Udpif::Udpif(datapath::Datapath& dp, datapath::Rcu& rcu, Translator translate, ActionSink sink, UdpifKnobs knobs)
    : dp_(dp), rcu_(rcu), translate_(std::move(translate)), sink_(std::move(sink)), knobs_(std::move(knobs)) {
  MegaflowRegistry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.settings.find(&dp_);
  const Settings set = it == r.settings.end() ? Settings{} : it->second;
  megaflows_.store(set.megaflows);
  want_handlers_ = set.handlers;
  want_revalidators_ = set.revalidators;
  on_megaflows_ = [this](bool on) {
    if (megaflows_.exchange(on) != on) {
      flush_.store(true);
      kick();
    }
  };
  r.live[&dp_].push_back(&on_megaflows_);
  r.live_udpifs[&dp_].push_back(this);
  for (unsigned i = 0; i < kMaxRevalidators; ++i) shares_.push_back(std::make_unique<Share>());
  size_shards(knobs_.flow_limit ? knobs_.flow_limit() : 200000);
}

void Udpif::size_shards(uint32_t limit) {
  // At most a million flows' worth up front (32 MB): a larger limit grows
  // the slot table as flows come.
  const size_t per_shard = std::max<size_t>(1024, std::min<uint32_t>(limit, kUkeyReserveMax) / kUkeyShards);
  for (unsigned i = 0; i < kUkeyShards; ++i) {
    UkeyShard& sh = shards_[i];
    std::lock_guard lock(sh.mu);
    sh.map.reserve(per_shard);  // never shrinks
  }
}

Udpif::~Udpif() {
  stop();
  MegaflowRegistry& r = registry();
  std::lock_guard lock(r.mu);
  auto& v = r.live[&dp_];
  v.erase(std::remove(v.begin(), v.end(), &on_megaflows_), v.end());
  auto& u = r.live_udpifs[&dp_];
  u.erase(std::remove(u.begin(), u.end(), this), u.end());
  if (v.empty()) {
    // The Datapath goes with its System: a later one at this address starts
    // with the defaults.
    r.live.erase(&dp_);
    r.live_udpifs.erase(&dp_);
    r.settings.erase(&dp_);
  }
}

void Udpif::set_megaflows_enabled(const datapath::Datapath& dp, bool on) {
  MegaflowRegistry& r = registry();
  std::lock_guard lock(r.mu);
  r.settings[&dp].megaflows = on;
  if (auto it = r.live.find(&dp); it != r.live.end())
    for (auto* f : it->second) (*f)(on);
}

bool Udpif::megaflows_enabled(const datapath::Datapath& dp) {
  MegaflowRegistry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.settings.find(&dp);
  return it == r.settings.end() || it->second.megaflows;
}

Status Udpif::set_threads(const datapath::Datapath& dp, unsigned n_handlers, unsigned n_revalidators) {
  if (n_handlers > kMaxHandlers)
    return error(Errc::invalid_argument, "n-handler-threads: at most " + std::to_string(kMaxHandlers));
  if (n_revalidators > kMaxRevalidators)
    return error(Errc::invalid_argument, "n-revalidator-threads: at most " + std::to_string(kMaxRevalidators));
  std::vector<Udpif*> live;
  {
    MegaflowRegistry& r = registry();
    std::lock_guard lock(r.mu);
    r.settings[&dp].handlers = n_handlers;
    r.settings[&dp].revalidators = n_revalidators;
    if (auto it = r.live_udpifs.find(&dp); it != r.live_udpifs.end()) live = it->second;
  }
  // Control thread: the Udpifs of this datapath live until it returns.
  for (Udpif* u : live) u->apply_threads(n_handlers, n_revalidators);
  return {};
}

unsigned Udpif::configured_handlers(const datapath::Datapath& dp) {
  MegaflowRegistry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.settings.find(&dp);
  return it == r.settings.end() ? 0 : it->second.handlers;
}

unsigned Udpif::configured_revalidators(const datapath::Datapath& dp) {
  MegaflowRegistry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.settings.find(&dp);
  return it == r.settings.end() ? 0 : it->second.revalidators;
}

unsigned Udpif::handler_slot(unsigned i) {
  while (handler_slots_.size() <= i) handler_slots_.push_back(rcu_.register_slot());
  return handler_slots_[i];
}

unsigned Udpif::revalidator_slot(unsigned i) {
  while (revalidator_slots_.size() <= i) revalidator_slots_.push_back(rcu_.register_slot());
  return revalidator_slots_[i];
}

void Udpif::start() {
  if (running()) return;
  offline_.assign(dp_.pmds().size(), {});  // before the handler runs
  adapted_limit_.store(knobs_.flow_limit ? knobs_.flow_limit() : 200000);
  running_ = true;
  const size_t n_pmds = dp_.pmds().size();
  start_handlers(want_handlers_ ? want_handlers_ : default_handlers(n_pmds));
  start_revalidators(want_revalidators_ ? want_revalidators_ : default_revalidators(n_pmds));
  dp_.set_upcalls_enabled(true);
}

void Udpif::apply_threads(unsigned n_handlers, unsigned n_revalidators) {
  want_handlers_ = n_handlers;
  want_revalidators_ = n_revalidators;
  if (!running()) return;
  const size_t n_pmds = dp_.pmds().size();
  const unsigned h = dp_.offline() ? 1 : n_handlers ? n_handlers : default_handlers(n_pmds);
  const unsigned v = n_revalidators ? n_revalidators : default_revalidators(n_pmds);
  if (h != n_handlers_run_.load(std::memory_order_relaxed)) {
    stop_handlers();
    start_handlers(h);
  }
  if (v != n_revalidators_run_.load(std::memory_order_relaxed)) {
    stop_revalidators();
    start_revalidators(v);
  }
}

void Udpif::start_handlers(unsigned n) {
  if (dp_.offline()) n = 1;  // one handler sees each PMD's records in order (udpif.h)
  n = std::clamp(n, 1u, kMaxHandlers);
  // The PMDs push to queue[hash % n] from now on; a record pushed under
  // the old count is still polled (handler h takes every q % n == h).
  for (const auto& pmd : dp_.pmds()) pmd->upcall_channel().set_queues(n);
  handlers_quit_.store(false);
  n_handlers_run_.store(n, std::memory_order_relaxed);
  // Every slot registered before a thread runs (the vector may grow).
  for (unsigned h = 0; h < n; ++h) (void)handler_slot(h);
  for (unsigned h = 0; h < n; ++h) {
    const unsigned slot = handler_slots_[h];
    handlers_.emplace_back([this, h, n, slot] { handler_main(h, n, slot); });
  }
}

void Udpif::stop_handlers() {
  handlers_quit_.store(true);
  for (std::thread& t : handlers_) t.join();
  handlers_.clear();
}

void Udpif::start_revalidators(unsigned n) {
  n = std::clamp(n, 1u, kMaxRevalidators);
  revalidators_quit_.store(false);
  uint64_t gen;
  {
    std::lock_guard lock(share_mu_);
    shares_left_ = 0;
    gen = share_gen_;  // before any thread runs: the leader may hand out a round at once
  }
  n_revalidators_run_.store(n, std::memory_order_relaxed);
  for (unsigned i = 0; i < n; ++i) (void)revalidator_slot(i);  // before a thread runs (the vector may grow)
  for (unsigned i = 0; i < n; ++i) {
    const unsigned slot = revalidator_slots_[i];
    revalidators_.emplace_back([this, i, n, gen, slot] { revalidator_main(i, n, gen, slot); });
  }
}

void Udpif::stop_revalidators() {
  revalidators_quit_.store(true);
  {
    std::lock_guard lock(wake_mu_);
    kicked_ = true;
  }
  wake_cv_.notify_all();
  {
    std::lock_guard lock(share_mu_);  // the others and the leader check the flag under it (round())
  }
  share_cv_.notify_all();
  for (std::thread& t : revalidators_) t.join();
  revalidators_.clear();
  for (unsigned i = 0; i < kMaxRevalidators; ++i) revalidator_tids_[i].store(0, std::memory_order_relaxed);
}

void Udpif::stop() {
  if (!running()) return;
  dp_.set_upcalls_enabled(false);
  stop_handlers();
  stop_revalidators();
  running_ = false;
  n_handlers_run_.store(0, std::memory_order_relaxed);
  n_revalidators_run_.store(0, std::memory_order_relaxed);
  // What is still queued is answered "drop" so the PMDs free it.
  for (size_t i = 0; i < dp_.pmds().size(); ++i) {
    datapath::UpcallChannel& ch = dp_.pmds()[i]->upcall_channel();
    datapath::Upcall* u;
    if (i < offline_.size()) {
      for (datapath::Upcall* b : offline_[i].backlog) {
        b->drop_reason = static_cast<uint8_t>(datapath::DropReason::kStopped);  // show drops
        ch.answer(b);
      }
      offline_[i].backlog.clear();
      offline_[i].wait_for = nullptr;
    }
    while (ch.next(u)) {
      u->drop_reason = static_cast<uint8_t>(datapath::DropReason::kStopped);  // show drops
      ch.answer(u);
    }
  }
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

void Udpif::adopt(Ukey& k, Translation& t) {
  k.cold->rules = std::move(t.rules);
  k.rule1 = k.cold->rules.size() == 1 ? k.cold->rules[0] : nullptr;
  k.rules_gen = t.rules_gen;
  k.uses_normal = t.uses_normal;
  k.mac_gen = t.mac_gen;
  k.cold->deps = std::move(t.deps);
  k.deps_filter = k.cold->deps.filter();
  k.underlay_many = t.underlay_many;
  k.cold->bond_accounts = std::move(t.bond_accounts);
  k.bond_accounts = !k.cold->bond_accounts.empty();
  k.underlay = t.underlay;
  k.underlay_rules_gen = t.underlay_rules_gen;
  k.underlay_mac_gen = t.underlay_mac_gen;
  k.underlay_uses_normal = t.underlay_uses_normal;
  k.tunnel = t.tunnel;
  k.tnl_gen = t.tnl_gen;
  k.tnl_no_port = t.tnl_no_port;
}

void Udpif::forget_pmd(unsigned pmd) {
  // Not during a round (a `revalidate` on another thread): a revalidator
  // holds pointers to its share's ukeys outside the shard locks.
  std::lock_guard round_lock(round_mu_);
  for (unsigned s = 0; s < kUkeyShards; ++s) {
    UkeyShard& sh = shards_[s];
    std::lock_guard lock(sh.mu);
    const size_t n = sh.map.erase_if([pmd](const auto& e) { return e.value.pmd == pmd; });
    n_ukeys_.fetch_sub(n, std::memory_order_relaxed);
  }
}

void Udpif::kick() {
  {
    std::lock_guard lock(wake_mu_);
    kicked_ = true;
  }
  wake_cv_.notify_all();
}

// --- handlers ---

void Udpif::handler_main(unsigned h, unsigned n, unsigned slot) {
  hal::name_current_thread("handler" + std::to_string(h + 1));
  HandlerCounters& hc = hcounters_[h];
  rcu_.online(slot);
  unsigned idle = 0;
  while (!handlers_quit_.load(std::memory_order_relaxed)) {
    fault::stall(fault::Point::handler_stall);  // `debug fault handler-stall` (core/fault.h)
    const bool busy = handle_batch(h, n, hc);
    rcu_.quiesce(slot);
    if (busy) {
      idle = 0;
      continue;
    }
    // Nothing to do: poll again soon, then back off (the PMDs don't wake us).
    rcu_.offline(slot);
    std::this_thread::sleep_for(std::chrono::microseconds(++idle < 100 ? 20 : 200));
    rcu_.online(slot);
  }
  rcu_.offline(slot);
}

bool Udpif::recycle_spent(datapath::UpcallChannel& ch, unsigned h, unsigned n, OfflineQueue* oq,
                          HandlerCounters& hc) {
  bool any = false;
  datapath::Upcall* u;
  // Records the PMD has executed (handler h's lanes): free what the answers
  // allocated.
  for (unsigned q = h; q < datapath::kMaxUpcallQueues; q += n)
  while (ch.next_spent(q, u)) {
    if (oq) {
      ++oq->spent;
      if (u == oq->wait_for) oq->wait_for = nullptr;
    }
    if (u->install_failed) {
      datapath::free_megaflow(u->install);
      bump(hc.install_failed);
    }
    if (u->uncounted_packets) credit_uncounted(*u);
    if (!u->actions_shared) delete u->actions;
    ch.recycle(u);
    recycled_total_.fetch_add(1, std::memory_order_release);  // after the credit (wait_spent)
    any = true;
  }
  return any;
}

void Udpif::credit_uncounted(const datapath::Upcall& u) {
  // Packets the PMD executed with an answer and counted on no megaflow:
  // the followers of a miss that installed nothing (at the flow limit, an
  // uncacheable translation; answer() credited the miss itself), or a miss
  // answered account_existing before the other handler's install of the
  // same megaflow reached the PMD. Each would have been an upcall of its
  // own in Open vSwitch, translated and credited when it came. Translated
  // again (without learning) for the rules to credit; rare, off the PMDs.
  flow::FlowKey flow;
  flow::expand(u.key, flow);
  Translation t;
  if (!translate_(flow, /*may_learn=*/false, t).ok()) return;
  push_stats(t.rules, u.uncounted_packets, u.uncounted_bytes, hal::now_ns());
}

bool Udpif::handle_batch(unsigned h, unsigned n, HandlerCounters& hc) {
  bool any = false;
  // Read per batch: the Udpif starts before Datapath::start() decides.
  // Offline, the PMDs submit to queue 0 alone and handler 0 alone takes
  // records (and spent ones: OfflineQueue is its own); the others idle.
  const bool offline = dp_.offline();
  if (offline && h != 0) return false;
  const auto& pmds = dp_.pmds();
  if (offline && offline_.size() < pmds.size()) offline_.resize(pmds.size());  // handler 0 alone
  for (size_t i = 0; i < pmds.size(); ++i) {
    datapath::UpcallChannel& ch = pmds[i]->upcall_channel();
    // A PMD that started after the handlers did gets their queue count.
    if (h == 0 && ch.queues() != n) ch.set_queues(n);
    OfflineQueue* oq = offline ? &offline_[i] : nullptr;
    any |= recycle_spent(ch, h, n, oq, hc);
    datapath::Upcall* u;
    if (!offline) {
      // Read after a pop: a record comes from a PMD started after
      // Datapath::start() decided (ring push release, pop acquire).
      for (unsigned q = h; q < datapath::kMaxUpcallQueues; q += n) {
        for (unsigned k = 0; k < 64 && ch.next(q, u); ++k) {
          answer(ch, u, nullptr, hc);
          answered_total_.fetch_add(1, std::memory_order_relaxed);
          any = true;
        }
      }
      continue;
    }
    // Offline (one handler, one queue): in order, derived records (sent up
    // while an earlier answer was executed) before the others already queued.
    while (ch.next(0, u)) {
      if (u->derived) {
        auto at = oq->backlog.begin();
        while (at != oq->backlog.end() && (*at)->derived) ++at;
        oq->backlog.insert(at, u);
      } else {
        oq->backlog.push_back(u);
      }
      any = true;
    }
    for (unsigned k = 0; k < 64 && !oq->wait_for && !oq->backlog.empty(); ++k) {
      u = oq->backlog.front();
      oq->backlog.pop_front();
      answer(ch, u, oq, hc);
      ++oq->answered;
      answered_total_.fetch_add(1, std::memory_order_relaxed);
      // The answer recirculates: what its packets send up again must be
      // translated before the records behind it (they come back derived).
      // Only this thread pops `spent`, so u stays valid until then.
      if (u->type == datapath::Upcall::Type::miss && u->actions && has_recirc(u->actions->bytes())) oq->wait_for = u;
    }
  }
  return any;
}

bool Udpif::has_recirc(std::span<const uint8_t> actions) {
  flow::DpActionReader r(actions);
  while (!r.done()) {
    const flow::DpAction a = r.next();
    // tnl_pop recirculates too: the decapsulated packet comes back derived.
    if (a.type == flow::DpActionType::kRecirc || a.type == flow::DpActionType::kTnlPop) return true;
    if (a.type == flow::DpActionType::kClone && has_recirc(a.nested())) return true;
  }
  return false;
}

void Udpif::answer(datapath::UpcallChannel& ch, datapath::Upcall* u, OfflineQueue* oq, HandlerCounters& hc) {
  if (u->type == datapath::Upcall::Type::action) {
    if (sink_) u->drop_reason = sink_(*u);  // handler 0's: userspace() records have hash 0 (upcall.h)
    bump(hc.action_upcalls);
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
    while (oq->spent != oq->answered && !handlers_quit_.load(std::memory_order_relaxed)) {
      if (!recycle_spent(ch, 0, 1, oq, hc)) std::this_thread::sleep_for(std::chrono::microseconds(5));
    }
    (void)round(true, /*parallel=*/false);
    bump(hc.offline_revalidations);
  }
  bump(hc.upcalls);
  const uint64_t now = hal::now_ns();
  hc.last_ns.store(now, std::memory_order_relaxed);
  if (!hc.first_ns.load(std::memory_order_relaxed)) hc.first_ns.store(now, std::memory_order_relaxed);
  if (!st.ok()) {
    bump(hc.translate_errors);
    ch.answer(u);  // drop
    return;
  }
  u->drop_reason = t.drop_reason;  // show drops: why these actions may send it nowhere
  // The actions to run the packet with: a copy of their own, or (below) the
  // megaflow's when this answer installs one.
  auto own_actions = [&] { u->actions = new flow::DpActions(t.actions); };
  const uint32_t limit = adapted_limit_.load(std::memory_order_relaxed);
  if (!t.cacheable) {
    if (!t.bridge) bump(t.tnl_no_port ? hc.tnl_no_port : hc.no_bridge_drops);
    push_stats(t.rules, 1, u->frame_length(), now);
    own_actions();
    ch.answer(u);
    return;
  }
  // ukeys: answered, maybe not installed yet.
  if (std::max(dp_.flow_count(), n_ukeys_.load(std::memory_order_relaxed)) >= limit) {
    if (!t.bridge) bump(t.tnl_no_port ? hc.tnl_no_port : hc.no_bridge_drops);
    bump(hc.limit_hits);
    ch.set_shallow(true);  // its misses can't become flows: don't queue them deep (upcall.h)
    push_stats(t.rules, 1, u->frame_length(), now);
    own_actions();
    ch.answer(u);
    return;
  }
  ch.set_shallow(false);  // below the limit again
  const bool exact = !megaflows_.load(std::memory_order_relaxed);
  if (exact) exact_words(u->key, t.wc);
  const flow::Match m = megaflow_match(flow, t.wc);
  const datapath::Ufid ufid = datapath::Datapath::ufid_for(m);
  UkeyShard& sh = shards_[shard_of(ufid)];
  // The shard lock covers the look-up and the insert: of two handlers
  // answering misses of one megaflow (two keys, one mask), one installs.
  std::lock_guard lock(sh.mu);
  // One look-up: the ukey is made here and taken back if the install can't be.
  const auto [node, inserted] = sh.map.try_emplace(UkeyId{u->pmd, ufid});
  if (!inserted) {
    // An earlier miss of this megaflow was answered first (both missed
    // before its install): the install would fail, and a second ukey
    // would reset the first one's pushed counters. The PMD counts the
    // packet (and those riding with it) on the installed megaflow, from
    // where the revalidator pushes them to the rules (as Open vSwitch's
    // PMD would have found that flow by lookup); not installed yet (another
    // handler's answer still on its way): credited when spent. A port in
    // no bridge: its drop flow counts it.
    u->account_existing = true;
    own_actions();
    ch.answer(u);
    return;
  }
  // Dropped: its port is in no bridge (counted here; later packets on the
  // port's drop flow are counted by the revalidator).
  if (!t.bridge) bump(t.tnl_no_port ? hc.tnl_no_port : hc.no_bridge_drops);
  auto f = dp_.build_megaflow(m, &t.actions, ufid, &u->key);  // flow-dump shows the packet's key
  if (!f) {
    sh.map.erase(node);
    --sh.inserted;  // as if never inserted (under the same lock)
    bump(hc.translate_errors);
    own_actions();
    ch.answer(u);
    return;
  }
  f.value()->drop_reason = t.drop_reason;
  // As Open vSwitch's handler (xlate with resubmit_stats): the packet
  // whose upcall installs the megaflow is credited to its rules now;
  // the megaflow counts only what the PMD forwards on it (this one's
  // followers, later hits), which the revalidator pushes (should the
  // install fail, the PMD counts only the followers on the flow there).
  push_stats(t.rules, 1, u->frame_length(), now);
  u->install = f.value();
  if (oq) {
    own_actions();  // handle_batch reads them after the answer (offline)
  } else {
    // The megaflow's own list: nothing changes or frees it before the PMD
    // has executed this answer (it installs the flow first; a modify or a
    // removal reaches it only through its request ring, between bursts),
    // and a failed install's megaflow is freed only once the record is
    // spent. One copy and one free less per new flow.
    u->actions = f.value()->actions.load(std::memory_order_relaxed);
    u->actions_shared = true;
  }
  Ukey& k = node->value;
  k.seq = ++sh.inserted;
  n_ukeys_.fetch_add(1, std::memory_order_relaxed);
  k.cold = std::make_unique<UkeyCold>();
  k.pmd = u->pmd;
  k.cold->match = flow::PackedMatch(m);
  k.cold->actions = std::move(t.actions);  // copied for the answer and the megaflow above
  k.bridge = t.bridge;
  adopt(k, t);
  k.packets = k.bytes = 0;
  k.created_ns = now;
  k.seen_round = 0;
  k.exact = exact;
  bump(hc.installs);
  ch.answer(u);
}

// --- revalidators ---

void Udpif::revalidator_main(unsigned i, unsigned n, uint64_t seen_gen, unsigned slot) {
  hal::name_current_thread("revalidator" + std::to_string(i + 1));
  revalidator_tids_[i].store(static_cast<int>(gettid()), std::memory_order_relaxed);
  // A revalidator is an Rcu reader from start to stop and quiesces only
  // between rounds (the leader) or shares of a round (the others): its
  // ukeys hold rule pointers across the sleep. A removed rule is freed two
  // grace periods after its removal (Bridge::bury), so only after every
  // revalidator finished a whole share of a round that started after the
  // change, which re-translated the ukeys that pointed to it.
  rcu_.online(slot);
  if (i != 0) {
    // The others: their share of each round the leader hands out after
    // seen_gen (the count when the threads were started).
    for (;;) {
      const RoundCtx* ctx;
      {
        std::unique_lock lock(share_mu_);
        share_cv_.wait(lock, [&] { return share_gen_ != seen_gen || revalidators_quit_.load(); });
        if (share_gen_ == seen_gen) break;  // quit, nothing handed out
        seen_gen = share_gen_;
        ctx = share_ctx_;
      }
      run_share(*ctx, i, n, *shares_[i]);
      rcu_.quiesce(slot);
      std::lock_guard lock(share_mu_);
      if (--shares_left_ == 0) shares_done_cv_.notify_all();
    }
    rcu_.offline(slot);
    return;
  }
  while (!revalidators_quit_.load(std::memory_order_relaxed)) {
    const uint32_t interval = knobs_.revalidate_interval_ms ? knobs_.revalidate_interval_ms() : 500;
    {
      std::unique_lock lock(wake_mu_);
      wake_cv_.wait_for(lock, std::chrono::milliseconds(interval), [this] { return kicked_; });
      kicked_ = false;
    }
    if (revalidators_quit_.load(std::memory_order_relaxed)) break;
    (void)round(true, /*parallel=*/true);
    rcu_.quiesce(slot);
  }
  rcu_.offline(slot);
}

uint64_t Udpif::revalidate_now(bool terse) {
  // The caller's thread is not an Rcu reader; borrow the first
  // revalidator's slot only when the threads aren't running.
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
    // One kick starts it (or, mid-round, the round after); kicking on while
    // waiting would start a second round right after ours, which then
    // overwrites last_round. Kicked again only if no round started for a
    // while (the revalidators were restarted meanwhile).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    kick();
    for (unsigned i = 1;; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard lock(mu_);
      if (done_seq_ >= want) return done_seq_ == want ? want_us_ : stats_.last_round_us;
      if (std::chrono::steady_clock::now() > deadline) return stats_.last_round_us;
      if (i % 500 == 0 && started_seq_ < want) kick();
    }
  }
  const unsigned slot = revalidator_slot(0);
  rcu_.online(slot);
  const uint64_t us = round(terse, /*parallel=*/false);
  rcu_.offline(slot);
  return us;
}

void Udpif::run_share(const RoundCtx& c, unsigned self, unsigned n, Share& out) {
  out.clear();
  const uint64_t tnl_gen = knobs_.tunnel_generation ? knobs_.tunnel_generation() : 0;
  ChangeCache changes;
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
    if (!k.bridge) {  // a port in no bridge (or no tunnel port): its drop flow's packets
      (k.tnl_no_port ? out.tnl_no_port : out.no_bridge_drops) += pkts;
      return;
    }
    if (k.bond_accounts)
      for (const BondAccounting& b : k.cold->bond_accounts) {
        if (b.loads) {  // relaxed: the maintenance tick reads them, one writer per flow
          b.loads->bytes[b.bucket & 255].fetch_add(bytes, std::memory_order_relaxed);
          b.loads->packets[b.bucket & 255].fetch_add(pkts, std::memory_order_relaxed);
        } else {
          b.bond->account(b.flow, b.vlan, bytes);
        }
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
  // Flows whose translation may have changed: translated after the pass
  // over the shard, outside its lock, so the handlers keep answering
  // upcalls meanwhile. The ukey stays put: handlers only insert (a node
  // never moves), and only this thread changes or erases the shard's ukeys
  // during its share.
  struct Recheck {
    uint32_t i;  // in dump
    Ukey* k;
  };
  std::vector<Recheck> rechecks;
  const uint64_t t0 = c.t0;
  for (unsigned sidx = self; sidx < kUkeyShards; sidx += n) {
    UkeyShard& sh = shards_[sidx];
    const std::vector<uint32_t>& idx = c.by_shard[sidx];
    size_t seen = 0;  // ukeys of the shard found in the dump
    // For the sweep below: of those, the ones that existed at the dump
    // (seq up to inserted_before) and were erased since, and the ones
    // inserted after it and erased since.
    const uint64_t before = c.inserted_before[sidx];
    size_t pre_seen = 0, pre_erased = 0, post_erased = 0;
    auto erased = [&](const Ukey& k) { ++(k.seq <= before ? pre_erased : post_erased); };
    rechecks.clear();
    // The shard is locked per chunk of flows (not per flow: the lock and
    // unlock would cost more than the work; not for the whole pass: the
    // handlers would wait for it).
    constexpr size_t kChunk = 256;
    // Look-ahead (cache misses overlapped, not waited for one by one): the
    // dump entry kAhead * 3 flows on, the ukey's slot kAhead * 2 on (its id
    // read from that entry, loaded by then), the ukey kAhead on (from that
    // slot). Without it a share spent ~80 % of its time waiting for the
    // slot and the ukey of each flow in turn (perf, bench_revalidate).
    constexpr size_t kAhead = 8;
    auto ahead_id = [&](size_t j) {
      const datapath::FlowStats& a = c.dump[idx[j]];
      return UkeyId{a.pmd, a.ufid};
    };
    for (size_t j = 0; j < std::min(idx.size(), 3 * kAhead); ++j) __builtin_prefetch(&c.dump[idx[j]]);
    for (size_t base = 0; base < idx.size(); base += kChunk) {
      std::lock_guard lock(sh.mu);
      for (size_t j = base; j < std::min(idx.size(), base + kChunk); ++j) {
        if (j + 3 * kAhead < idx.size()) __builtin_prefetch(&c.dump[idx[j + 3 * kAhead]]);
        if (j + 2 * kAhead < idx.size()) sh.map.prefetch_slot(ahead_id(j + 2 * kAhead));
        if (j + kAhead < idx.size()) sh.map.prefetch_node(ahead_id(j + kAhead));
        const datapath::FlowStats& s = c.dump[idx[j]];
        const UkeyId id{s.pmd, s.ufid};
        auto* node = sh.map.find(id);
        if (!node) continue;  // not ours (dp-flow add): left alone
        ++seen;
        Ukey& k = node->value;
        pre_seen += k.seq <= before;
        k.seen_round = c.round_id;
        const uint64_t used = s.used_ns ? s.used_ns : k.created_ns;
        if (c.flush || (t0 > used && t0 - used > c.max_idle_ns)) {  // megaflows switched, or idle
          push(k, s.packets - std::min(s.packets, k.packets), s.bytes - std::min(s.bytes, k.bytes), s.used_ns);
          out.to_delete.push_back({s.pmd, k.cold->match.unpack()});
          out.gone.push_back({std::move(k.cold->rules), std::max(s.packets, k.packets), std::max(s.bytes, k.bytes)});
          erased(k);
          sh.map.erase(node);
          n_ukeys_.fetch_sub(1, std::memory_order_relaxed);
          ++(c.flush ? out.deleted_changed : out.deleted_idle);
          continue;
        }
        // Re-translate only what may have changed. Rule changes: only those
        // the overlap rule lets reach one of the ukey's lookups (when none
        // does, its generation moves up and nothing else is touched).
        bool recheck = false, checked = false;
        if (k.bridge && k.bridge->rules_generation() != k.rules_gen) {
          checked = true;
          recheck = rules_may_matter(k, *k.bridge, k.rules_gen, changes, out.checked_deep);
        }
        recheck |= k.uses_normal && k.bridge && k.bridge->mac().generation() != k.mac_gen;
        // Tunnels: the underlay bridge a tunnel output was translated in,
        // and the tunnel state (ports, routes, neighbours, addresses).
        if (k.underlay) {
          if (!recheck && k.underlay->rules_generation() != k.underlay_rules_gen) {
            checked = true;
            recheck = rules_may_matter(k, *k.underlay, k.underlay_rules_gen, changes, out.checked_deep);
          }
          recheck |= k.underlay_uses_normal && k.underlay->mac().generation() != k.underlay_mac_gen;
        }
        out.checked += checked;
        recheck |= k.underlay_many;
        recheck |= k.tunnel && tnl_gen != k.tnl_gen;
        recheck |= !k.bridge;  // a drop flow of a port in no bridge: has the port joined one?
        if (!recheck) {
          if (s.packets > k.packets) {
            push(k, s.packets - k.packets, s.bytes - std::min(s.bytes, k.bytes), s.used_ns);
            k.packets = s.packets;
            k.bytes = s.bytes;
          }
          if (c.track_age) out.by_age.push_back({used, id});
          continue;
        }
        rechecks.push_back({idx[j], &k});
      }
      flush_agg();
    }
    for (const Recheck& rc : rechecks) {
      const datapath::FlowStats& s = c.dump[rc.i];
      const UkeyId id{s.pmd, s.ufid};
      Ukey& k = *rc.k;
      const flow::Match old = k.cold->match.unpack();
      const flow::FlowKey& key = old.key;
      Translation t;
      Status st = translate_(key, /*may_learn=*/false, t);
      ++out.revalidated;
      if (st.ok() && k.exact) {  // installed with megaflows off: the same whole-key mask
        uint64_t* w = t.wc.words();
        const uint64_t* m = old.mask.words();
        for (unsigned i = 0; i < flow::kFlowWords; ++i) w[i] |= m[i];
      }
      const flow::Match m = st.ok() ? megaflow_match(key, t.wc) : flow::Match{};
      // The stats so far belong to the old translation's rules.
      push(k, s.packets - std::min(s.packets, k.packets), s.bytes - std::min(s.bytes, k.bytes), s.used_ns);
      k.packets = std::max(k.packets, s.packets);
      k.bytes = std::max(k.bytes, s.bytes);
      if (!st.ok() || !t.cacheable || !t.bridge != !k.bridge || !(m == old)) {
        out.to_delete.push_back({s.pmd, old});
        out.gone.push_back({std::move(k.cold->rules), k.packets, k.bytes});
        flush_agg();
        erased(k);
        std::lock_guard lock(sh.mu);
        sh.map.erase(id);
        n_ukeys_.fetch_sub(1, std::memory_order_relaxed);
        ++out.deleted_changed;
        continue;
      }
      if (!(t.actions == k.cold->actions)) {
        // The leader posts it after the shares, before anything erases
        // this ukey (round()): the pointers stay good until then.
        k.cold->actions = std::move(t.actions);
        out.to_modify.push_back({s.pmd, s.slot, s.ufid, &k.cold->actions});
        ++out.modified;
      }
      flush_agg();  // k's rules change now
      adopt(k, t);
      if (c.track_age) out.by_age.push_back({s.used_ns ? s.used_ns : k.created_ns, id});
    }
    flush_agg();
    out.looked_at += seen;
    // Ukeys whose flow is gone (deleted by hand, install failed): forgotten
    // once they were in a dump before, or are old enough to have been.
    // Nothing to look for when every ukey of the shard that existed at the
    // dump was in it: those still here are the map less the ones inserted
    // since (a storm inserts all the time, and walking a million ukeys a
    // round for nothing took a quarter of the revalidator's time in
    // flow-setup).
    std::lock_guard lock(sh.mu);
    const uint64_t post_here = sh.inserted - before - post_erased;
    const bool all_seen = post_here <= sh.map.size() && sh.map.size() - post_here == pre_seen - pre_erased;
    if (!all_seen) {
      const size_t gone = sh.map.erase_if([&](const auto& e) {
        const Ukey& k = e.value;
        return k.seen_round != c.round_id && k.created_ns < t0 &&
               (k.seen_round != 0 || t0 - k.created_ns > 2'000'000'000ull);
      });
      n_ukeys_.fetch_sub(gone, std::memory_order_relaxed);
    }
  }
  flush_agg();
}

bool Udpif::rules_may_matter(Ukey& k, const Bridge& br, uint64_t& since, ChangeCache& cache, uint64_t& deep) {
  ChangeCache::Cleared& cl = cache.cleared;
  if (cl.br == &br && cl.since == since && cl.filter == k.deps_filter) {
    since = cl.upto;
    return false;
  }
  ChangeCache::Entry& e = cache.get(br, since);
  if (!e.complete) return true;
  bool read_cold = false;
  std::optional<flow::Match> match;  // unpacked only when a lookup must be read
  for (const RuleChangeCheck& c : e.list) {
    if (prefilter(c, k.deps_filter) == Affects::no) continue;  // the hot summary rules it out
    if (!read_cold) {
      read_cold = true;
      ++deep;
      match.emplace(k.cold->match.unpack());
    }
    if (may_affect(c, &br, k.cold->deps, *match)) return true;
  }
  if (!read_cold) cl = {&br, since, e.upto, k.deps_filter};
  since = e.upto;  // nothing up to there can change the translation: it stands
  return false;
}

uint64_t Udpif::round(bool terse, bool parallel) {
  std::lock_guard round_lock(round_mu_);
  uint64_t my_seq;
  {
    std::lock_guard lock(mu_);
    my_seq = ++started_seq_;
    if (my_seq == want_seq_ && want_full_) terse = false;
  }
  // The context of the previous round, emptied: its buffers (48 bytes a
  // flow for the dump) keep their pages, where a fresh vector per round
  // took ~25k page faults at a million flows growing to its size.
  if (!round_ctx_) round_ctx_ = std::make_unique<RoundCtx>();
  RoundCtx& c = *round_ctx_;
  c.dump.clear();
  for (std::vector<uint32_t>& v : c.by_shard) v.clear();
  c.track_age = false;
  c.flush = flush_.exchange(false);
  c.t0 = hal::now_ns();
  const uint64_t t0 = c.t0;
  c.max_idle_ns = uint64_t{knobs_.max_idle_ms ? knobs_.max_idle_ms() : 10000} * 1'000'000;

  // 1. What the datapath has: terse (ids + stats) or, for comparison, full
  // (keys, masks and actions formatted, as a dump that carries everything).
  // The leader dumps; every revalidator takes the flows of its shards.
  for (unsigned i = 0; i < kUkeyShards; ++i) {
    std::lock_guard lock(shards_[i].mu);
    c.inserted_before[i] = shards_[i].inserted;
  }
  if (terse) {
    dp_.flow_stats(c.dump);
  } else {
    // Every flow expanded and its actions formatted, one at a time.
    dp_.flow_dump_each([&](const datapath::FlowView& v) {
      c.dump.push_back({v.pmd, v.ufid, v.packets, v.bytes, v.used_ns, v.tcp_flags, v.slot});
    });
  }
  fault::stall(fault::Point::revalidator_slow);  // `debug fault revalidator-slow`: a slow dump (core/fault.h)
  for (uint32_t i = 0; i < c.dump.size(); ++i) c.by_shard[shard_of(c.dump[i].ufid)].push_back(i);
  const uint32_t limit = adapted_limit_.load(std::memory_order_relaxed);
  c.round_id = ++round_seq_;
  c.track_age = c.dump.size() > limit;  // only then can ours exceed it

  // 2. The shares: on the revalidator threads (the leader takes share 0),
  // or all on this thread (revalidate_now without threads, an offline
  // handler's round).
  const unsigned n = parallel ? std::max(1u, n_revalidators_run_.load(std::memory_order_relaxed)) : 1;
  if (n > 1) {
    bool handed = false;
    {
      // Stopping: the others may have left already (they leave when they
      // see the flag with nothing handed out, under this lock), so the
      // leader takes every share itself.
      std::lock_guard lock(share_mu_);
      if (!revalidators_quit_.load()) {
        share_ctx_ = &c;
        shares_left_ = n - 1;
        ++share_gen_;
        handed = true;
      }
    }
    if (handed) {
      share_cv_.notify_all();
      run_share(c, 0, n, *shares_[0]);
      std::unique_lock lock(share_mu_);
      shares_done_cv_.wait(lock, [&] { return shares_left_ == 0; });
      share_ctx_ = nullptr;
    } else {
      for (unsigned i = 0; i < n; ++i) run_share(c, i, n, *shares_[i]);
    }
  } else {
    run_share(c, 0, 1, *shares_[0]);
  }

  // 3. The leader merges, enforces the flow limit, applies the changes.
  std::vector<datapath::PmdFlowRef> to_delete;
  std::vector<Share::Gone> gone;
  std::vector<std::pair<uint64_t, UkeyId>> by_age;
  Share total;
  for (unsigned i = 0; i < n; ++i) {
    Share& sh = *shares_[i];
    to_delete.insert(to_delete.end(), std::make_move_iterator(sh.to_delete.begin()),
                     std::make_move_iterator(sh.to_delete.end()));
    gone.insert(gone.end(), std::make_move_iterator(sh.gone.begin()), std::make_move_iterator(sh.gone.end()));
    by_age.insert(by_age.end(), sh.by_age.begin(), sh.by_age.end());
    total.revalidated += sh.revalidated;
    total.modified += sh.modified;
    total.deleted_idle += sh.deleted_idle;
    total.deleted_changed += sh.deleted_changed;
    total.no_bridge_drops += sh.no_bridge_drops;
    total.tnl_no_port += sh.tnl_no_port;
    total.looked_at += sh.looked_at;
    total.checked += sh.checked;
    total.checked_deep += sh.checked_deep;
  }
  // New actions, posted in batches (a flow-mod may change every flow's);
  // before the flow limit erases any ukey (they point into the ukeys).
  for (unsigned i = 0; i < n; ++i)
    if (!shares_[i]->to_modify.empty()) (void)dp_.flows_modify(shares_[i]->to_modify);
  uint64_t deleted_limit = 0;
  // Over the limit (it shrank): the least recently used go.
  if (by_age.size() > limit) {
    std::sort(by_age.begin(), by_age.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < by_age.size() - limit; ++i) {
      UkeyShard& sh = shards_[shard_of(by_age[i].second.ufid)];
      std::lock_guard lock(sh.mu);
      auto* node = sh.map.find(by_age[i].second);
      if (!node) continue;
      to_delete.push_back({node->value.pmd, node->value.cold->match.unpack()});
      gone.push_back({std::move(node->value.cold->rules), node->value.packets, node->value.bytes});
      sh.map.erase(node);
      n_ukeys_.fetch_sub(1, std::memory_order_relaxed);
      ++deleted_limit;
    }
  }

  if (!to_delete.empty()) {
    // The packets that hit a flow between the dump and its removal are its
    // rules' too (Open vSwitch pushes the stats its flow_del returns).
    std::vector<datapath::FlowFinal> finals;
    (void)dp_.flows_del(to_delete, &finals);
    const uint64_t now = hal::now_ns();
    for (size_t i = 0; i < gone.size() && i < finals.size(); ++i)
      if (finals[i].packets > gone[i].packets)
        push_stats(gone[i].rules, finals[i].packets - gone[i].packets,
                   finals[i].bytes - std::min(finals[i].bytes, gone[i].bytes), now);
  }

  // 4. How long it took adapts the flow limit (Open vSwitch's rule).
  const uint64_t us = (hal::now_ns() - t0) / 1000;
  const uint64_t ms = us / 1000;
  const uint32_t configured = knobs_.flow_limit ? knobs_.flow_limit() : 200000;
  const size_t n_flows = c.dump.size();
  adapted_limit_.store(adapt_flow_limit(adapted_limit_.load(std::memory_order_relaxed), configured, ms, n_flows),
                       std::memory_order_relaxed);

  std::lock_guard lock(mu_);
  stats_.revalidated += total.revalidated;
  stats_.modified += total.modified;
  stats_.deleted_idle += total.deleted_idle;
  stats_.deleted_changed += total.deleted_changed;
  stats_.deleted_limit += deleted_limit;
  stats_.no_bridge_drops += total.no_bridge_drops;
  stats_.tnl_no_port += total.tnl_no_port;
  stats_.last_round = {.dumped = c.dump.size(), .looked_at = total.looked_at, .checked = total.checked,
                       .checked_deep = total.checked_deep, .revalidated = total.revalidated,
                       .modified = total.modified, .deleted_idle = total.deleted_idle,
                       .deleted_changed = total.deleted_changed, .deleted_limit = deleted_limit,
                       .duration_us = us};
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

uint32_t Udpif::adapt_flow_limit(uint32_t limit, uint32_t configured, uint64_t duration_ms, uint64_t n_flows) {
  const uint64_t ms = std::max<uint64_t>(duration_ms, 1);  // OVS: MAX(time_msec() - start_time, 1)
  uint64_t lim = limit;
  if (ms > 2000) {
    lim /= ms / 1000;
  } else if (ms > 1300) {
    lim = lim * 3 / 4;
  } else if (ms < 1000 && n_flows > 2000 && lim < n_flows * 1000 / ms) {
    lim += 1000;
  }
  return static_cast<uint32_t>(std::min<uint64_t>(configured, std::max<uint64_t>(lim, 1000)));
}

void Udpif::reset_flow_limit() {
  const uint32_t configured = knobs_.flow_limit ? knobs_.flow_limit() : 200000;
  size_shards(configured);
  adapted_limit_.store(configured, std::memory_order_relaxed);
}

UdpifStats Udpif::stats() const {
  UdpifStats s;
  {
    std::lock_guard lock(mu_);
    s = stats_;
  }
  // The handlers' counters (every index: a stopped handler's counts stay).
  for (unsigned h = 0; h < kMaxHandlers; ++h) {
    const HandlerCounters& c = hcounters_[h];
    auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    s.upcalls += ld(c.upcalls);
    s.action_upcalls += ld(c.action_upcalls);
    s.installs += ld(c.installs);
    s.install_failed += ld(c.install_failed);
    s.limit_hits += ld(c.limit_hits);
    s.translate_errors += ld(c.translate_errors);
    s.no_bridge_drops += ld(c.no_bridge_drops);
    s.tnl_no_port += ld(c.tnl_no_port);
    s.offline_revalidations += ld(c.offline_revalidations);
    if (const uint64_t f = ld(c.first_ns); f && (!s.first_upcall_ns || f < s.first_upcall_ns)) s.first_upcall_ns = f;
    s.last_upcall_ns = std::max(s.last_upcall_ns, ld(c.last_ns));
  }
  s.flow_limit = adapted_limit_.load(std::memory_order_relaxed);
  s.handlers = dp_.offline() ? std::min(1u, n_handlers_run_.load(std::memory_order_relaxed))
                             : n_handlers_run_.load(std::memory_order_relaxed);
  for (unsigned h = 0; h < s.handlers; ++h) s.handler_upcalls.push_back(hcounters_[h].upcalls.load(std::memory_order_relaxed));
  const unsigned n = n_revalidators_run_.load(std::memory_order_relaxed);
  s.ukeys = 0;
  for (unsigned i = 0; i < std::max(n, 1u); ++i) s.revalidators.push_back({revalidator_tids_[i].load(std::memory_order_relaxed), 0});
  for (unsigned sidx = 0; sidx < kUkeyShards; ++sidx) {
    UkeyShard& sh = shards_[sidx];
    std::lock_guard lock(sh.mu);
    s.revalidators[sidx % s.revalidators.size()].keys += sh.map.size();
    s.ukeys += sh.map.size();
  }
  s.revalidator_tid = s.revalidators[0].tid;
  s.flows = dp_.flow_count();
  return s;
}

}  // namespace keel::ofproto

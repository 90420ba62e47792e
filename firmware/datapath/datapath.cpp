// Datapath: port table, PMD threads, rx-queue assignment, datapath flow
// requests, drain detection.
#include "datapath/datapath.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/hash.h"
#include "flow/flow_text.h"
#include "core/log.h"
#include "keel/hal/cpu.h"

namespace keel::datapath {

KEEL_LOG_MODULE(log_dpif, "dpif_netdev");

namespace {
// rxq_sched.h grows with its full implementation (the newest closed
// interval per PMD for auto-lb's overload check; the plan's INFO lines
// apart from its WARN ones): filled / logged when the header has them, so
// this file builds against the interface's first cut and the full one.
template <class Sample>
void fill_interval(Sample& s, const Pmd& pmd) {
  if constexpr (requires { s.intervals_closed; s.interval_cycles; s.interval_busy_cycles; }) {
    const Pmd::Load newest = pmd.load(1);
    s.intervals_closed = pmd.intervals_closed();
    s.interval_cycles = newest.window_cycles;
    s.interval_busy_cycles = newest.busy_cycles;
  }
}
void log_plan(const SchedPlan& plan) {
  for (const std::string& m : plan.messages) KEEL_LOG(log_dpif, warn, "%s", m.c_str());
  for (const std::string& m : plan.info) KEEL_LOG(log_dpif, info, "%s", m.c_str());
}
}  // namespace

std::string format_ufid(const Ufid& u) {
  char buf[64];
  snprintf(buf, sizeof buf, "ufid:%08x-%04x-%04x-%04x-%04x%08x", static_cast<unsigned>(u.hi >> 32),
           static_cast<unsigned>((u.hi >> 16) & 0xffff), static_cast<unsigned>(u.hi & 0xffff),
           static_cast<unsigned>(u.lo >> 48), static_cast<unsigned>((u.lo >> 32) & 0xffff),
           static_cast<unsigned>(u.lo & 0xffffffff));
  return buf;
}

std::optional<Ufid> parse_ufid(std::string_view s) {
  if (s.substr(0, 5) == "ufid:") s.remove_prefix(5);
  std::string hex;
  for (char c : s) {
    if (c == '-') continue;
    if (!isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    hex += c;
  }
  if (hex.size() != 32) return std::nullopt;
  Ufid u;
  u.hi = std::stoull(hex.substr(0, 16), nullptr, 16);
  u.lo = std::stoull(hex.substr(16), nullptr, 16);
  return u;
}

Datapath::Datapath(DatapathConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.pmd_cores.empty()) cfg_.pmd_cores.push_back(-1);
  for (auto& x : xconnect_) x.store(0, std::memory_order_relaxed);
  txq_locks_ = std::make_unique<std::atomic_flag[]>(kMaxPorts * hal::Port::kMaxQueues);
  txq_users_ = std::make_unique<std::atomic<uint32_t>[]>(kMaxPorts * hal::Port::kMaxQueues);
  for (unsigned i = 0; i < cfg_.pmd_cores.size(); ++i)
    pmds_.push_back(std::make_unique<Pmd>(*this, i, cfg_.pmd_cores[i], cfg_.pmd_idle_sleep_us, cfg_.pmd));
}

Status Datapath::set_pmd_cores(std::vector<int> cores, std::vector<unsigned>* forgotten) {
  if (cores.empty()) return invalid("at least one PMD core");
  if (running_ && offline()) return error(Errc::unavailable, "the PMD cores can't change in an offline run");
  if (cores == cfg_.pmd_cores) return {};
  const std::vector<int> old = cfg_.pmd_cores;
  Status st;
  std::lock_guard bonds(bond_mu_);  // pmds_ changes (send_packet, bond_*: see the top)
  {
    std::lock_guard lock(flow_mu_);  // nobody else should be here (see the top), but flows stay consistent
    st = change_pmds(std::move(cores), forgotten);
  }
  if (!st.ok() && running_) {
    // A new PMD could not start (its core refused the pinning): back to the
    // cores there were, so that every queue is polled again (PMDs removed
    // meanwhile come back with empty flow tables, and every bond table).
    std::lock_guard lock(flow_mu_);
    (void)change_pmds(old, forgotten);
  }
  return st;
}

Status Datapath::change_pmds(std::vector<int> cores, std::vector<unsigned>* forgotten) {
  // New PMDs take the tunables the others have (every PMD is set alike).
  PmdConfig pcfg = cfg_.pmd;
  pcfg.emc_insert_inv_prob = pmds_[0]->emc_insert_inv_prob();
  pcfg.smc_enable = pmds_[0]->smc_enabled();
  // While forwarding: every PMD parked (no rx, no tx) until the new set runs.
  if (running_)
    for (auto& p : pmds_) p->pause();
  const size_t old_n = pmds_.size();
  std::vector<std::unique_ptr<Pmd>> next;
  for (int core : cores) {
    std::unique_ptr<Pmd> keep;
    for (auto& p : pmds_)
      if (p && p->core() == core && !keep) keep = std::move(p);
    next.push_back(std::move(keep));
  }
  // A PMD's index is fixed (upcall records, ukeys and flow stats name it):
  // one whose index would change is rebuilt (its flows go).
  std::vector<std::unique_ptr<Pmd>> gone;
  for (auto& p : pmds_)
    if (p) gone.push_back(std::move(p));
  for (unsigned i = 0; i < next.size(); ++i)
    if (next[i] && next[i]->index() != i) gone.push_back(std::move(next[i]));
  for (auto& p : gone) {
    // Parked: its last burst is done; stopping releases what it held. Its
    // queues are handed to the others below, before anyone polls again.
    p->stop();
    drop_pending_upcalls(*p);
    p->drops().read(drops_retired_);  // show drops keeps what it counted
    if (forgotten) forgotten->push_back(p->index());
  }
  std::vector<unsigned> fresh;
  for (unsigned i = 0; i < next.size(); ++i) {
    if (next[i]) continue;
    next[i] = std::make_unique<Pmd>(*this, i, cores[i], cfg_.pmd_idle_sleep_us, pcfg);
    next[i]->hold_rx(rx_held_);
    install_bonds(*next[i]);  // every bond table, fresh counters (bond_mu_ is held)
    fresh.push_back(i);
    if (forgotten && i < old_n) forgotten->push_back(i);
  }
  pmds_ = std::move(next);
  cfg_.pmd_cores = std::move(cores);
  for (auto& p : gone) retire_bond_counters(*p);  // bond_stats() keeps their counts
  gone.clear();  // their megaflows are freed with their tables, and their bond tables
  if (!running_) return {};

  // The queues of the removed PMDs move to the others, the new ones get
  // some; the tx queue table is redone for the new count.
  compute_txqs();
  Status st = reschedule_parked(true);
  for (unsigned i : fresh) {
    if (Status s = pmds_[i]->start(backends_); !s.ok() && st.ok()) st = s;
  }
  for (auto& p : pmds_) p->resume();
  return st;
}

void Datapath::hold_rx(bool on) {
  rx_held_ = on;
  for (auto& p : pmds_) p->hold_rx(on);
}

bool Datapath::wait_upcalls_idle(uint64_t timeout_ms) {
  const uint64_t deadline = hal::now_ns() + timeout_ms * 1'000'000;
  // Two iterations each: whatever burst was under way when the hold began
  // has been processed (and went up, if it missed).
  std::vector<uint64_t> seen;
  for (auto& pmd : pmds_) seen.push_back(pmd->iterations());
  for (size_t i = 0; i < pmds_.size(); ++i)
    while (pmds_[i]->running() && pmds_[i]->iterations() < seen[i] + 2) {
      if (hal::now_ns() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  for (auto& pmd : pmds_)
    while (pmd->upcall_channel().in_flight() != 0) {
      if (hal::now_ns() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  return true;
}

Result<Datapath::RxqAffinity> Datapath::parse_rxq_affinity(std::string_view text) {
  // Open vSwitch's parse_affinity_list() (rxq_sched.h); a later pair for a
  // queue overrides an earlier one, and a queue no port can have is
  // ignored, as there.
  const datapath::RxqAffinity parsed = datapath::parse_rxq_affinity(text);
  if (!parsed.error.empty()) return invalid("pmd-rxq-affinity \"" + std::string(text) + "\": " + parsed.error);
  RxqAffinity out;
  for (const auto& [q, c] : parsed.pairs) {
    if (q >= hal::Port::kMaxQueues) continue;
    std::erase_if(out, [q = q](const auto& e) { return e.first == q; });
    out.emplace_back(q, c);
  }
  return out;
}

std::string Datapath::format_rxq_affinity(const RxqAffinity& a) {
  std::string s;
  for (auto& [q, c] : a) s += (s.empty() ? "" : ",") + std::to_string(q) + ":" + std::to_string(c);
  return s;
}

Status Datapath::set_rxq_affinity(uint16_t id, RxqAffinity a) {
  if (!port(id)) return error(Errc::not_found, "no datapath port " + std::to_string(id));
  affinity_[id] = std::move(a);
  return {};
}

std::vector<SchedRxq> Datapath::sched_rxqs() const {
  std::vector<SchedRxq> v;
  for (hal::Port* p : ports()) {
    for (uint16_t q = 0; q < p->n_rxq(); ++q) {
      SchedRxq r;
      r.port = p->id();
      r.queue = q;
      r.port_name = p->name();
      r.cycles = rxq_load(p->id(), q).sum(kPmdIntervalMax);
      for (auto& [aq, core] : affinity_[p->id()])
        if (aq == q) r.affinity = core;
      v.push_back(std::move(r));
    }
  }
  return v;
}

std::vector<int> Datapath::current_pmd_of(std::span<const SchedRxq> rxqs) const {
  std::vector<int> v(rxqs.size(), -1);
  for (size_t i = 0; i < rxqs.size(); ++i)
    for (const auto& pmd : pmds_)
      for (const Pmd::RxQueue& q : pmd->rx_queues())
        if (q.port->id() == rxqs[i].port && q.queue == rxqs[i].queue) v[i] = static_cast<int>(pmd->index());
  return v;
}

void Datapath::apply_plan(std::span<const SchedRxq> rxqs, const SchedPlan& plan, bool parked) {
  // Open vSwitch's dpif_netdev_set_config() warning (isolation stays on).
  if (!sched_isolate_ && sched_mode_ != RxqAssignMode::group)
    KEEL_LOG(log_dpif, warn, "pmd-rxq-isolate can only be set false when using pmd-rxq-assign=group");
  log_plan(plan);
  std::vector<std::vector<Pmd::RxQueue>> lists(pmds_.size());
  for (size_t i = 0; i < rxqs.size() && i < plan.pmd_of.size(); ++i) {
    const int k = plan.pmd_of[i];
    if (k < 0 || static_cast<size_t>(k) >= pmds_.size()) continue;
    lists[k].push_back({port(rxqs[i].port), rxqs[i].queue, &rxq_load(rxqs[i].port, rxqs[i].queue)});
  }
  // Every PMD that loses or gains a queue is parked before any list
  // changes: a moving queue is never polled by two PMDs.
  std::vector<Pmd*> changed;
  for (size_t k = 0; k < pmds_.size(); ++k) {
    pmds_[k]->set_isolated(k < plan.isolated.size() && plan.isolated[k]);
    if (lists[k] != pmds_[k]->rx_queues()) changed.push_back(pmds_[k].get());
  }
  if (!parked)
    for (Pmd* p : changed) p->pause();
  for (Pmd* p : changed) p->set_rx_queues(std::move(lists[p->index()]));
  if (!parked)
    for (Pmd* p : changed) p->resume();
}

Status Datapath::reschedule_parked(bool parked) {
  const std::vector<SchedRxq> rxqs = sched_rxqs();
  const SchedPlan plan = plan_rxqs(rxqs, sched_config());
  apply_plan(rxqs, plan, parked);
  // The PMDs reloaded: auto-lb's overload runs start again (AutoLb::rebalanced).
  auto_lb_.rebalanced(hal::now_ns() / 1'000'000);
  return {};
}

Status Datapath::reschedule() {
  if (offline()) return error(Errc::unavailable, "the rx queues can't be reassigned in an offline run");
  if (!running_) return {};  // start() assigns them
  return reschedule_parked(false);
}

void Datapath::configure_auto_lb(const AutoLbConfig& c) {
  const AutoLbConfig old = auto_lb_.config();
  auto_lb_.configure(c);
  // Open vSwitch's dpif_netdev_set_config() / set_pmd_auto_lb() messages:
  // each parameter that changed, then the state when it or any changed.
  bool changed = false;
  if (c.rebal_interval_ms != old.rebal_interval_ms) {
    KEEL_LOG(log_dpif, info, "PMD auto load balance interval set to %llu mins",
             static_cast<unsigned long long>(c.rebal_interval_ms / 60'000));
    changed = true;
  }
  if (c.improvement_threshold_pct != old.improvement_threshold_pct) {
    KEEL_LOG(log_dpif, info, "PMD auto load balance improvement threshold set to %u%%", c.improvement_threshold_pct);
    changed = true;
  }
  if (c.load_threshold_pct != old.load_threshold_pct) {
    KEEL_LOG(log_dpif, info, "PMD auto load balance load threshold set to %u%%", c.load_threshold_pct);
    changed = true;
  }
  if (!changed && c.enabled == old.enabled) return;
  if (c.enabled)
    KEEL_LOG(log_dpif, info,
             "PMD auto load balance is enabled, interval %llu mins, pmd load threshold %u%%, "
             "improvement threshold %u%%.",
             static_cast<unsigned long long>(c.rebal_interval_ms / 60'000), c.load_threshold_pct,
             c.improvement_threshold_pct);
  else
    KEEL_LOG(log_dpif, info, "PMD auto load balance is disabled.");
}

bool Datapath::auto_lb_tick(uint64_t now_ms) {
  if (!running_ || offline() || !auto_lb_.config().enabled) return false;
  const std::vector<SchedRxq> rxqs = sched_rxqs();
  const std::vector<int> cur = current_pmd_of(rxqs);
  std::vector<PmdLoadSample> loads;
  for (const auto& pmd : pmds_) {
    const Pmd::Load l = pmd->load(kPmdIntervalMax);
    PmdLoadSample sample;
    sample.window_cycles = l.window_cycles;
    sample.busy_cycles = l.busy_cycles;
    sample.isolated = pmd->isolated();
    fill_interval(sample, *pmd);
    loads.push_back(sample);
  }
  if (!auto_lb_.tick(now_ms, rxqs, cur, loads, sched_config())) return false;
  // Open vSwitch's pmd_rebalance_dry_run() messages (keel has one NUMA node).
  const AutoLbEstimate& e = auto_lb_.last();
  KEEL_LOG(log_dpif, dbg, "PMD auto load balance performing dry run.");
  KEEL_LOG(log_dpif, dbg, "Numa node 0. Current variance %llu Estimated variance %llu. Variance improvement %u%%.",
           static_cast<unsigned long long>(e.current_variance), static_cast<unsigned long long>(e.new_variance),
           e.improvement_pct);
  KEEL_LOG(log_dpif, dbg, "PMD load variance improvement threshold %u%% is met.",
           auto_lb_.config().improvement_threshold_pct);
  KEEL_LOG(log_dpif, info, "PMD auto load balance dry run. Requesting datapath reconfigure.");
  (void)reschedule_parked(false);
  return true;
}

Status Datapath::set_port_rxqs(uint16_t id, uint16_t n_rx) {
  hal::Port* p = port(id);
  if (!p) return error(Errc::not_found, "no datapath port " + std::to_string(id));
  if (n_rx < 1 || n_rx > hal::Port::kMaxQueues)
    return invalid("n_rxq " + std::to_string(n_rx) + ": 1.." + std::to_string(hal::Port::kMaxQueues));
  if (n_rx == p->n_rxq()) return {};
  if (running_ && offline()) return error(Errc::unavailable, "a port's queues can't change in an offline run");
  // Nobody polls or sends on the port while it restarts.
  if (running_)
    for (auto& pmd : pmds_) pmd->pause();
  Status st = p->set_queue_count(n_rx, p->n_txq());
  if (st.ok() && running_) {
    compute_txqs();
    (void)reschedule_parked(true);
  }
  if (running_)
    for (auto& pmd : pmds_) pmd->resume();
  return st;
}

Datapath::~Datapath() {
  stop();
  stop_ports();
  pmds_.clear();
}

Result<uint16_t> Datapath::add_port(std::unique_ptr<hal::Port> port) {
  if (running_) return error(Errc::unavailable, "ports can't be added while forwarding");
  if (find_port(port->name())) return error(Errc::already_exists, "port " + port->name() + " exists");
  if (find_vport(port->name())) return error(Errc::already_exists, "port " + port->name() + " exists");
  // The lowest id neither a port nor a vport holds (vports share the space).
  uint16_t id = 0;
  {
    std::lock_guard lk(vport_mu_);
    for (uint16_t i = 1; i < kMaxPorts - 1u && id == 0; ++i)
      if (!ports_[i] && !vports_[i]) id = i;
  }
  if (id == 0) return error(Errc::resource_exhausted, "too many ports");
  if (id > n_ports_) n_ports_ = id;
  port->set_id(id);
  rxq_loads_[id] = std::make_unique<std::array<RxqLoad, hal::Port::kMaxQueues>>();
  ports_[id] = std::move(port);
  return id;
}

hal::Port* Datapath::port(uint16_t id) const { return id < kMaxPorts ? ports_[id].get() : nullptr; }

hal::Port* Datapath::find_port(std::string_view name) const {
  for (uint16_t i = 1; i <= n_ports_; ++i)
    if (ports_[i] && ports_[i]->name() == name) return ports_[i].get();
  return nullptr;
}

Status Datapath::set_port_mtu(uint16_t id, uint32_t mtu) {
  hal::Port* p = port(id);
  if (!p) return error(Errc::not_found, "no datapath port " + std::to_string(id));
  return p->set_mtu(mtu);
}

std::vector<hal::Port*> Datapath::ports() const {
  std::vector<hal::Port*> v;
  for (uint16_t i = 1; i <= n_ports_; ++i)
    if (ports_[i]) v.push_back(ports_[i].get());
  return v;
}

void Datapath::set_xconnect(uint16_t in, std::optional<uint16_t> out) {
  xconnect_[in].store(out.value_or(0), std::memory_order_release);
}

std::optional<uint16_t> Datapath::xconnect(uint16_t in) const {
  uint16_t v = xconnect_[in].load(std::memory_order_acquire);
  return v ? std::optional<uint16_t>(v) : std::nullopt;
}

DropTotals Datapath::drop_totals() const {
  DropTotals t = drops_retired_;
  for (const auto& pmd : pmds_) pmd->drops().read(t);
  return t;
}

void Datapath::drop_pending_upcalls() {
  for (const auto& pmd : pmds_) drop_pending_upcalls(*pmd);
}

void Datapath::drop_pending_upcalls(Pmd& pmd) {
  UpcallChannel& ch = pmd.upcall_channel();
  Upcall* u;
  while (ch.next(u)) {
    // The PMD is stopped: its DropStats is this thread's to write now.
    pmd.release_record_packets(u, DropReason::kStopped);
    ch.recycle(u);
  }
  while (ch.next_spent(u)) {
    if (!u->actions_shared) delete u->actions;
    if (u->install_failed) free_megaflow(u->install);
    ch.recycle(u);
  }
}

void Datapath::mask_vlans(flow::Match& m) {
  using flow::text::hton16;
  constexpr uint16_t cfi = hton16(flow::text::kVlanCfi);
  auto is_tpid = [](uint16_t t) {
    return t == hton16(flow::text::kEthTypeVlan) || t == hton16(flow::text::kEthTypeQinQ);
  };
  auto tag = [&](int i) {  // a tag at level i
    return (m.key.vlans[i].tci & m.mask.vlans[i].tci & cfi) != 0 ||
           (m.key.vlans[i].tpid & m.mask.vlans[i].tpid) != 0;
  };
  // The cut-short tag of Open vSwitch's text: a TPID, no CFI, nothing
  // inside (a megaflow's tag always has an exact EtherType inside it).
  for (int i = 0; i < 2; ++i) {
    flow::VlanHdr& k = m.key.vlans[i];
    const flow::VlanHdr& mk = m.mask.vlans[i];
    if (is_tpid(k.tpid & mk.tpid) && !(k.tci & cfi) && m.mask.dl_type == 0 && (i == 1 || !tag(1))) {
      m.key.dl_type = k.tpid;
      m.mask.dl_type = 0xffff;
      k = {};
      break;
    }
    if (!tag(i)) break;
  }
  if (!m.mask.vlans[0].tci) m.mask.vlans[0].tci = hton16(flow::text::kVlanVidMask | flow::text::kVlanCfi);
  for (int i = 0; i < 2; ++i) {
    const bool present = (m.key.vlans[i].tci & cfi) != 0 || (m.key.vlans[i].tpid & m.mask.vlans[i].tpid) != 0;
    m.mask.vlans[i].tpid = 0xffff;
    if (!present) break;
  }
}

Result<Megaflow*> Datapath::build_megaflow(const flow::Match& match, const flow::DpActions* actions,
                                           const Ufid& ufid, const flow::Miniflow* shown_key) const {
  if (match.mask.in_port != 0xffffffffu) return invalid("in_port must be matched exactly");
  // A hal port, or a vport (packets after tnl_pop arrive with its id).
  const uint16_t in = static_cast<uint16_t>(std::min<uint32_t>(match.key.in_port, kMaxPorts - 1));
  if (match.key.in_port == 0 || match.key.in_port >= kMaxPorts || (!port(in) && !is_vport(in)))
    return error(Errc::not_found, "in_port(" + std::to_string(match.key.in_port) + "): no such port");
  flow::Match m = match;
  m.mask.recirc_id = 0xffffffffu;  // the datapath always matches recirc_id exactly
  m.apply_mask();
  auto f = std::make_unique<Megaflow>();
  flow::Miniflow mask;
  if (!flow::compress(m.mask, mask)) return invalid("mask matches too many fields");
  if (!flow::compress(m.key, mask.map, f->key)) return invalid("key matches too many fields");
  f->set_mask(mask);
  f->in_port = m.key.in_port;
  f->ufid = ufid;
  if (actions) f->actions.store(new flow::DpActions(*actions), std::memory_order_relaxed);
  // The key as it came, only where flow-dump would show something else than
  // the masked key (with megaflows off it never does: the mask is the key's
  // every word).
  if (shown_key) {
    bool differs = false;
    (f->key.map | shown_key->map).for_each([&](unsigned w) { differs |= f->key.get(w) != shown_key->get(w); });
    if (differs) f->shown_key = new flow::Miniflow(*shown_key);
  }
  return f.release();
}

namespace {
Ufid ufid_of(const flow::Match& m);
}  // namespace

Ufid Datapath::ufid_for(const flow::Match& match) { return ufid_of(match); }

namespace {
// A hash of what makes the megaflow: which words its mask keeps, those
// mask words, and the key under them. Only the kept words are hashed (a
// 5-tuple megaflow keeps about a fifth of the key's words; hashing all of
// them, four times, was 4-5 % of an upcall handler's time in flow-setup).
Ufid ufid_of(const flow::Match& m) {
  const uint64_t* k = m.key.words();
  const uint64_t* w = m.mask.words();
  std::array<uint64_t, flow::kFlowWords> kv, mv;
  std::array<uint64_t, (flow::kFlowWords + 63) / 64> map{};
  size_t n = 0;
  for (unsigned i = 0; i < flow::kFlowWords; ++i)
    if (w[i]) {
      kv[n] = k[i] & w[i];
      mv[n] = w[i];
      map[i / 64] |= uint64_t{1} << (i % 64);
      ++n;
    }
  uint32_t a = hash_words64(kv.data(), n, hash_words64(map.data(), map.size(), 0x6b65656c));
  uint32_t b = hash_words64(mv.data(), n, a);
  uint32_t c = hash_words64(kv.data(), n, b);
  uint32_t d = hash_words64(mv.data(), n, c);
  return {uint64_t{a} << 32 | b, uint64_t{c} << 32 | d};
}
}  // namespace

Status Datapath::flow_put(const flow::Match& match, const flow::DpActions& actions, std::optional<Ufid> ufid,
                          bool modify, const flow::FlowKey* key_as_written) {
  std::lock_guard lock(flow_mu_);
  reclaim_locked();
  // Every output port must exist.
  Status bad_port;
  flow::for_each_output_port(actions.bytes(), [&](uint32_t p) {
    if (!bad_port.ok()) return;
    if (p < kMaxPorts && is_vport(static_cast<uint16_t>(p)))
      bad_port = invalid("action output:" + std::to_string(p) + ": a virtual port (" +
                         vport(static_cast<uint16_t>(p)).value_or(Vport{}).name + ") never transmits");
    else if (p >= kMaxPorts || !port(static_cast<uint16_t>(p)))
      bad_port = error(Errc::not_found, "action output:" + std::to_string(p) + ": no such port");
  });
  if (!bad_port.ok()) return bad_port;

  if (modify) {
    auto tmpl = build_megaflow(match, nullptr, {});
    if (!tmpl) return std::move(tmpl).take_status();
    std::unique_ptr<Megaflow> t(*tmpl);
    Status result;
    for (auto& pmd : pmds_) {
      FlowRequest req;
      req.op = FlowRequest::Op::modify;
      req.flow = t.get();
      req.actions = new flow::DpActions(actions);
      Status st = pmd->request(req);
      delete req.actions;  // the old list (or the new one, if refused)
      if (!st.ok()) result = st;
    }
    return result.ok() ? Status{} : result.prefix("dp-flow mod");
  }

  const Ufid id = ufid.value_or(ufid_of(match));
  // The key as written, if it fits a miniflow (else flow-dump shows the
  // masked key); in_port and recirc_id as the flow has them.
  std::optional<flow::Miniflow> shown;
  if (key_as_written) {
    flow::FlowKey k = *key_as_written;
    k.in_port = match.key.in_port;
    k.recirc_id = match.mask.recirc_id ? match.key.recirc_id : 0;
    if (flow::Miniflow mf; flow::compress(k, mf)) shown = mf;
  }
  for (size_t i = 0; i < pmds_.size(); ++i) {
    auto f = build_megaflow(match, &actions, id, shown ? &*shown : nullptr);
    if (!f) return std::move(f).take_status();
    FlowRequest req;
    req.op = FlowRequest::Op::install;
    req.flow = *f;
    Status st = pmds_[i]->request(req);
    if (!st.ok()) {
      free_megaflow(*f);
      // All or nothing: take back the copies already installed.
      auto tmpl = build_megaflow(match, nullptr, {});
      for (size_t j = 0; j < i && tmpl; ++j) {
        FlowRequest undo;
        undo.op = FlowRequest::Op::remove;
        undo.flow = *tmpl;
        (void)pmds_[j]->request(undo);
      }
      if (tmpl) free_megaflow(*tmpl);
      return st;
    }
  }
  return {};
}

Status Datapath::flow_del(const flow::Match& match) {
  std::lock_guard lock(flow_mu_);
  Status st = flow_del_locked(match);
  if (st.code() != Errc::not_found) return st;
  // Not as written: maybe as Open vSwitch's text means it (flow-dump's line
  // of a megaflow the upcall handler installed, see mask_vlans()).
  flow::Match m = match;
  mask_vlans(m);
  return m == match ? st : flow_del_locked(m);
}

Status Datapath::flow_del_locked(const flow::Match& match) {
  reclaim_locked();
  auto tmpl = build_megaflow(match, nullptr, {});
  if (!tmpl) return std::move(tmpl).take_status();
  std::unique_ptr<Megaflow> t(*tmpl);
  bool any = false;
  for (auto& pmd : pmds_) {
    FlowRequest req;
    req.op = FlowRequest::Op::remove;
    req.flow = t.get();
    any |= pmd->request(req).ok();
  }
  reclaim_locked();
  return any ? Status{} : error(Errc::not_found, "no such flow");
}

Status Datapath::flow_del(const Ufid& ufid) {
  std::lock_guard lock(flow_mu_);
  std::optional<flow::Match> match;
  flow_dump_each_locked([&](const FlowView& v) {
    if (!match && v.ufid == ufid) match = v.match;
  });
  if (match) return flow_del_locked(*match);
  return error(Errc::not_found, "no flow " + format_ufid(ufid));
}

std::vector<FlowView> Datapath::flow_dump() const {
  if (offload_sync_) offload_sync_(true);  // before the mutex: the engine takes it to add its counts
  std::lock_guard lock(flow_mu_);
  return flow_dump_locked();
}

void Datapath::flow_stats(std::vector<FlowStats>& out) const {
  if (offload_sync_) offload_sync_(false);
  std::lock_guard lock(flow_mu_);
  out.clear();
  // Room for every flow at once, and half as many again (the caller keeps
  // the vector between rounds): a table that a storm grows would otherwise
  // be copied through every doubling, round after round.
  size_t n = 0;
  for (const auto& pmd : pmds_) n += pmd->flows().slots_used();
  if (n > out.capacity()) out.reserve(n + n / 2);
  for (const auto& pmd : pmds_) {
    pmd->flows().for_each([&](const Megaflow& m) {
      out.push_back({pmd->index(), m.ufid,
                     m.packets.load(std::memory_order_relaxed) + m.hw_packets.load(std::memory_order_relaxed),
                     m.bytes.load(std::memory_order_relaxed) + m.hw_bytes.load(std::memory_order_relaxed),
                     std::max(m.used_ns.load(std::memory_order_relaxed), m.hw_used_ns.load(std::memory_order_relaxed)),
                     m.tcp_flags.load(std::memory_order_relaxed), m.index});
    });
  }
}

size_t Datapath::flow_count() const {
  size_t n = 0;
  for (const auto& pmd : pmds_) n += pmd->flows().size();
  return n;
}

// A batch of flow requests to several PMDs: posted, then waited for. A
// full ring (another poster) is retried: the PMD drains it every
// iteration. The wait spins a little first: a PMD answers within an
// iteration (tens of us), and a poster that sleeps per batch on a loaded
// core waits a scheduler slice each time (a round that changes 100k flows
// posts ~800 batches).
void Datapath::post_flow_batch(std::span<const std::pair<Pmd*, FlowRequest*>> batch) {
  for (auto& [pmd, req] : batch) {
    const uint64_t deadline = hal::now_ns() + 5'000'000'000ull;
    bool posted;
    while (!(posted = pmd->request_async(*req)) && hal::now_ns() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (!posted) {
      req->result = FlowResult::not_found;
      req->done.store(true, std::memory_order_release);
    }
  }
  const uint64_t spin_until = hal::now_ns() + 500'000;
  for (auto& [pmd, req] : batch)
    while (!req->done.load(std::memory_order_acquire) && hal::now_ns() < spin_until) hal::cpu_relax();
  for (auto& [pmd, req] : batch) (void)pmd->wait(*req);
}

size_t Datapath::flows_del(std::span<const PmdFlowRef> flows, std::vector<FlowFinal>* finals) {
  std::lock_guard lock(flow_mu_);
  reclaim_locked();
  if (finals) finals->assign(flows.size(), FlowFinal{});
  size_t removed = 0;
  // Templates and requests in batches that fit a PMD's request ring.
  std::vector<std::unique_ptr<Megaflow>> tmpls;
  std::vector<FlowRequest> reqs(kFlowBatch);
  std::vector<std::pair<Pmd*, FlowRequest*>> batch;
  for (size_t off = 0; off < flows.size(); off += kFlowBatch) {
    const size_t n = std::min(kFlowBatch, flows.size() - off);
    tmpls.clear();
    batch.clear();
    for (size_t i = 0; i < n; ++i) {
      const PmdFlowRef& r = flows[off + i];
      if (r.pmd >= pmds_.size()) continue;
      auto t = build_megaflow(r.match, nullptr, {});
      if (!t) continue;
      tmpls.emplace_back(*t);
      FlowRequest& req = reqs[i];
      req.op = FlowRequest::Op::remove;
      req.flow = tmpls.back().get();
      req.result = {};
      req.final_packets = req.final_bytes = 0;
      batch.emplace_back(pmds_[r.pmd].get(), &req);
    }
    post_flow_batch(batch);
    for (auto& [pmd, req] : batch) {
      const bool ok = req->result == FlowResult::ok;
      removed += ok;
      if (ok && finals) (*finals)[off + static_cast<size_t>(req - reqs.data())] = {req->final_packets, req->final_bytes};
    }
  }
  reclaim_locked();
  return removed;
}

size_t Datapath::flows_modify(std::span<const PmdFlowMod> mods) {
  std::lock_guard lock(flow_mu_);
  // Per PMD, its flows in order; then rounds of one request per PMD.
  std::vector<std::vector<const PmdFlowMod*>> by_pmd(pmds_.size());
  for (const PmdFlowMod& m : mods)
    if (m.pmd < pmds_.size()) by_pmd[m.pmd].push_back(&m);
  std::vector<std::vector<FlowRequest::SlotMod>> lists(pmds_.size());
  std::vector<FlowRequest> reqs(pmds_.size());
  std::vector<std::pair<Pmd*, FlowRequest*>> batch;
  size_t changed = 0;
  for (size_t off = 0;; off += FlowRequest::kMaxSlotMods) {
    batch.clear();
    for (size_t p = 0; p < pmds_.size(); ++p) {
      if (off >= by_pmd[p].size()) continue;
      const size_t n = std::min(FlowRequest::kMaxSlotMods, by_pmd[p].size() - off);
      std::vector<FlowRequest::SlotMod>& l = lists[p];
      l.resize(n);
      for (size_t i = 0; i < n; ++i) {
        const PmdFlowMod& m = *by_pmd[p][off + i];
        l[i] = {m.slot, m.ufid, new flow::DpActions(*m.actions), FlowResult::ok};
      }
      FlowRequest& req = reqs[p];
      req.op = FlowRequest::Op::modify_slots;
      req.slot_mods = l.data();
      req.n_slot_mods = static_cast<uint32_t>(n);
      req.result = {};
      batch.emplace_back(pmds_[p].get(), &req);
    }
    if (batch.empty()) break;
    post_flow_batch(batch);
    for (auto& [pmd, req] : batch) {
      for (uint32_t i = 0; i < req->n_slot_mods; ++i) {
        FlowRequest::SlotMod& m = req->slot_mods[i];
        changed += req->result == FlowResult::ok && m.result == FlowResult::ok;
        delete m.actions;  // the old list (or the new one, if not found or not posted)
      }
    }
  }
  return changed;
}

Status Datapath::flow_modify(unsigned pmd, const flow::Match& match, const flow::DpActions& actions) {
  std::lock_guard lock(flow_mu_);
  if (pmd >= pmds_.size()) return invalid("no pmd " + std::to_string(pmd));
  auto tmpl = build_megaflow(match, nullptr, {});
  if (!tmpl) return std::move(tmpl).take_status();
  std::unique_ptr<Megaflow> t(*tmpl);
  FlowRequest req;
  req.op = FlowRequest::Op::modify;
  req.flow = t.get();
  req.actions = new flow::DpActions(actions);
  Status st = pmds_[pmd]->request(req);
  delete req.actions;  // the old list (or the new one, if refused)
  return st;
}

std::vector<FlowView> Datapath::flow_dump_locked() const {
  std::vector<FlowView> out;
  flow_dump_each_locked([&](const FlowView& v) { out.push_back(v); });
  return out;
}

void Datapath::flow_dump_each(const std::function<void(const FlowView&)>& fn) const {
  if (offload_sync_) offload_sync_(true);  // before the mutex, as flow_dump
  std::lock_guard lock(flow_mu_);
  flow_dump_each_locked(fn);
}

void Datapath::flow_dump_each_locked(const std::function<void(const FlowView&)>& fn) const {
  FlowView v;
  for (const auto& pmd : pmds_) {
    pmd->flows().for_each([&](const Megaflow& m) {
      v.pmd = pmd->index();
      v.ufid = m.ufid;
      flow::expand(m.mask(), v.match.mask);
      flow::expand(m.key, v.match.key);
      if (m.shown_key)
        flow::expand(*m.shown_key, v.shown_key);
      else
        v.shown_key = v.match.key;
      v.pmd_core = pmd->display_core();
      const flow::DpActions* a = m.actions.load(std::memory_order_acquire);
      v.actions = a ? flow::format_dp_actions(*a) : "drop";
      if (a)
        v.action_bytes.assign(a->bytes().begin(), a->bytes().end());
      else
        v.action_bytes.clear();
      v.offload = static_cast<FlowOffload>(m.offload.load(std::memory_order_relaxed));
      v.hw_packets = m.hw_packets.load(std::memory_order_relaxed);
      v.hw_bytes = m.hw_bytes.load(std::memory_order_relaxed);
      v.packets = m.packets.load(std::memory_order_relaxed) + v.hw_packets;
      v.bytes = m.bytes.load(std::memory_order_relaxed) + v.hw_bytes;
      v.used_ns = std::max(m.used_ns.load(std::memory_order_relaxed), m.hw_used_ns.load(std::memory_order_relaxed));
      v.tcp_flags = m.tcp_flags.load(std::memory_order_relaxed);
      v.mask_u0 = m.mask().map.count_u0();
      v.mask_u1 = m.mask().map.count_u1();
      v.slot = m.index;
      fn(v);
    });
  }
}

void Datapath::flow_flush() {
  std::lock_guard lock(flow_mu_);
  for (const FlowView& v : flow_dump_locked()) (void)flow_del_locked(v.match);
  reclaim_locked();
}

void Datapath::reclaim() {
  std::lock_guard lock(flow_mu_);
  reclaim_locked();
}

void Datapath::reclaim_locked() {
  for (auto& pmd : pmds_) pmd->flows().reclaim();
}

Status Datapath::start(const std::vector<hal::Backend*>& backends) {
  if (running_) return {};
  const unsigned n = static_cast<unsigned>(pmds_.size());

  // Offline when allowed and every port with input replays a capture.
  bool any_input = false, all_replay = true;
  for (hal::Port* p : ports()) {
    const hal::Port::InputKind k = p->input_kind();
    any_input |= k != hal::Port::InputKind::none;
    all_replay &= k != hal::Port::InputKind::live;
  }
  const bool offline = offline_allowed_ && any_input && all_replay;
  offline_.store(offline, std::memory_order_relaxed);

  backends_ = backends;
  if (offline) {
    // --- offline: as assign_offline_rxqs() says. No reconfiguration afterwards.
    assign_offline_rxqs();
  } else {
    // --- live: the scheduler's plan (pmd-rxq-assign, affinity, isolate).
    const std::vector<SchedRxq> rxqs = sched_rxqs();
    apply_plan(rxqs, plan_rxqs(rxqs, sched_config()), /*parked=*/true);
  }
  for (auto& pmd : pmds_) pmd->set_offline(offline);
  (void)n;
  compute_txqs();

  for (auto& pmd : pmds_) {
    Status st = pmd->start(backends);
    if (!st.ok()) {
      for (auto& other : pmds_) other->stop();
      return st;
    }
  }
  running_ = true;
  return {};
}

// Offline rx queues (see the top, "Offline runs"). One reader, PMD 0, for
// every single-queue input and, with one PMD, for every input, a
// multi-queue replay merged into one queue in file order
// (merge_rx_queues): the inputs are read merged by timestamp, so outputs get
// Open vSwitch's order. With several PMDs, a multi-queue replay (the user
// asked for an RSS spread) keeps its queues and queue q goes to PMD q % n:
// a 5-tuple's records are all in one queue, so each flow is read by one PMD
// in file order, and every PMD merges its own queues by timestamp.
void Datapath::assign_offline_rxqs() {
  const size_t n = pmds_.size();
  for (hal::Port* p : ports()) {
    if (n == 1 || p->n_rxq() <= 1) {
      const uint16_t nq = p->merge_rx_queues();
      for (uint16_t q = 0; q < nq; ++q) pmds_[0]->add_rx_queue({p, q, &rxq_load(p->id(), q)});
      continue;
    }
    for (uint16_t q = 0; q < p->n_rxq(); ++q) pmds_[q % n]->add_rx_queue({p, q, &rxq_load(p->id(), q)});
  }
}

void Datapath::compute_txqs() {
  // tx queue q = pmd % n_txq; shared when the port has fewer queues than PMDs.
  const unsigned n = static_cast<unsigned>(pmds_.size());
  txqs_.assign(n, {});
  for (hal::Port* p : ports())
    for (unsigned i = 0; i < n; ++i) txqs_[i][p->id()] = {static_cast<uint16_t>(i % p->n_txq()), p->n_txq() < n};
}

void Datapath::stop() {
  for (auto& pmd : pmds_) pmd->stop();
  running_ = false;
}

void Datapath::stop_ports() {
  for (hal::Port* p : ports()) p->stop();
}

void Datapath::lock_txq(uint16_t id, uint16_t q) {
  auto& f = txq_locks_[id * hal::Port::kMaxQueues + q];
  // Test and test-and-set: wait reading (the line stays shared) until the
  // holder lets go, then try again.
  while (f.test_and_set(std::memory_order_acquire)) {
    while (f.test(std::memory_order_relaxed)) hal::cpu_relax();
  }
}

void Datapath::unlock_txq(uint16_t id, uint16_t q) {
  txq_locks_[id * hal::Port::kMaxQueues + q].clear(std::memory_order_release);
}

bool Datapath::wait_drained(uint64_t timeout_ms) {
  const uint64_t deadline = hal::now_ns() + timeout_ms * 1'000'000;
  // Inputs not drained yet, or packets still with the slow path (their
  // answers are executed by the PMDs and may send more).
  auto pending = [this] {
    for (hal::Port* p : ports())
      if (p->input_state() == hal::InputState::pending) return true;
    for (auto& pmd : pmds_) {
      if (upcalls_enabled() && pmd->upcall_channel().in_flight() != 0) return true;
      if (pmd->held() != 0) return true;  // offline: received, waiting for an upcall record
    }
    return false;
  };
  for (;;) {
    while (pending()) {
      if (hal::now_ns() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Every PMD must finish two more iterations: the first may have started
    // before the last packet was read, the second then began after it.
    std::vector<uint64_t> seen;
    for (auto& pmd : pmds_) seen.push_back(pmd->iterations());
    for (size_t i = 0; i < pmds_.size(); ++i) {
      while (pmds_[i]->iterations() < seen[i] + 2) {
        if (hal::now_ns() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    // Those iterations may have sent packets up: drained only if nothing is.
    if (!pending()) break;
  }
  return true;
}

// --- hardware offload (offload_hooks.h) ---

void Datapath::set_offload_promote(uint32_t packets, uint64_t window_ns) {
  promote_packets_.store(packets ? packets : 1, std::memory_order_relaxed);
  promote_window_ns_.store(window_ns, std::memory_order_relaxed);
}

OffloadPollResult Datapath::offload_poll(std::span<OffloadEvent> events, std::span<HotMicroflow> hot) {
  std::lock_guard lock(flow_mu_);  // pmds_ is stable under it (set_pmd_cores holds it)
  OffloadPollResult r;
  for (const auto& p : pmds_) {
    r.events += p->pop_offload_events(events.subspan(r.events));
    r.hot += p->pop_hot_microflows(hot.subspan(r.hot));
  }
  return r;
}

uint64_t Datapath::offload_events_lost() const {
  std::lock_guard lock(flow_mu_);
  uint64_t n = 0;
  for (const auto& p : pmds_) n += p->counters().offload_events_lost;
  return n;
}

uint64_t Datapath::offload_hot_lost() const {
  std::lock_guard lock(flow_mu_);
  uint64_t n = 0;
  for (const auto& p : pmds_) n += p->counters().offload_hot_lost;
  return n;
}

void Datapath::offload_scan(std::vector<OffloadEvent>& out) const {
  std::lock_guard lock(flow_mu_);
  for (const auto& p : pmds_)
    p->flows().for_each([&](const Megaflow& f) {
      if (f.alive())
        out.push_back({OffloadEvent::Op::installed, static_cast<uint8_t>(p->index()), f.index, f.ufid});
    });
}

Megaflow* Datapath::offload_find_locked(unsigned pmd, uint32_t slot, const Ufid& ufid) const {
  if (pmd >= pmds_.size()) return nullptr;
  Megaflow* f = pmds_[pmd]->flows().published(slot);
  return f && f->alive() && f->ufid == ufid ? f : nullptr;
}

std::optional<OffloadFlowInfo> Datapath::offload_flow(unsigned pmd, uint32_t slot, const Ufid& ufid) const {
  std::lock_guard lock(flow_mu_);
  const Megaflow* f = offload_find_locked(pmd, slot, ufid);
  if (!f) return std::nullopt;
  OffloadFlowInfo info;
  flow::expand(f->mask(), info.match.mask);
  flow::expand(f->key, info.match.key);
  if (f->shown_key)
    flow::expand(*f->shown_key, info.shown_key);
  else
    info.shown_key = info.match.key;
  if (const flow::DpActions* a = f->actions.load(std::memory_order_acquire))
    info.action_bytes.assign(a->bytes().begin(), a->bytes().end());
  info.in_port = f->in_port;
  info.mark = f->mark.load(std::memory_order_relaxed);
  return info;
}

bool Datapath::add_hw_stats(unsigned pmd, uint32_t slot, const Ufid& ufid, uint64_t dpackets, uint64_t dbytes,
                            uint64_t used_ns) {
  std::lock_guard lock(flow_mu_);
  Megaflow* f = offload_find_locked(pmd, slot, ufid);
  if (!f) return false;
  // One writer (the engine, under the mutex): load + store.
  f->hw_packets.store(f->hw_packets.load(std::memory_order_relaxed) + dpackets, std::memory_order_relaxed);
  f->hw_bytes.store(f->hw_bytes.load(std::memory_order_relaxed) + dbytes, std::memory_order_relaxed);
  if (used_ns > f->hw_used_ns.load(std::memory_order_relaxed)) f->hw_used_ns.store(used_ns, std::memory_order_relaxed);
  return true;
}

bool Datapath::set_flow_offload(unsigned pmd, uint32_t slot, const Ufid& ufid, FlowOffload where, uint8_t hw_want) {
  std::lock_guard lock(flow_mu_);
  Megaflow* f = offload_find_locked(pmd, slot, ufid);
  if (!f) return false;
  f->offload.store(static_cast<uint8_t>(where), std::memory_order_relaxed);
  f->hw_want.store(hw_want, std::memory_order_relaxed);
  return true;
}

Status Datapath::mark_request(unsigned pmd, FlowRequest& req) {
  std::lock_guard lock(flow_mu_);  // pmds_ stable; the PMD answers without it
  if (pmd >= pmds_.size()) return invalid("no pmd " + std::to_string(pmd));
  if (req.mark == 0 || req.mark > kMaxFlowMark)
    return invalid("flow mark " + std::to_string(req.mark) + " out of range 1.." + std::to_string(kMaxFlowMark));
  if (!pmds_[pmd]->request_async(req)) return error(Errc::unavailable, "pmd" + std::to_string(pmd) + ": request ring full");
  Status st = pmds_[pmd]->wait(req);
  if (st.ok() || st.code() == Errc::unavailable) return st;
  switch (req.result) {
    case FlowResult::not_found:
      return error(Errc::not_found, "pmd" + std::to_string(pmd) + ": no flow " + format_ufid(req.ufid) + " in slot " +
                                        std::to_string(req.slot));
    case FlowResult::exists:
      return error(Errc::already_exists, "pmd" + std::to_string(pmd) + ": mark " + std::to_string(req.mark) +
                                             " collides with another mark, or the flow has a mark already");
    default:
      return st;
  }
}

Status Datapath::set_flow_mark(unsigned pmd, uint32_t slot, const Ufid& ufid, uint32_t mark) {
  FlowRequest req;
  req.op = FlowRequest::Op::set_mark;
  req.slot = slot;
  req.ufid = ufid;
  req.mark = mark;
  return mark_request(pmd, req);
}

Status Datapath::clear_flow_mark(unsigned pmd, uint32_t mark) {
  FlowRequest req;
  req.op = FlowRequest::Op::clear_mark;
  req.mark = mark;
  return mark_request(pmd, req);
}

void Datapath::set_offload_sync(std::function<void(bool full)> fn) { offload_sync_ = std::move(fn); }

}  // namespace keel::datapath

// Offload — the flow engine; see offload.h for what it is and promises.
//
// Layout. The Engine holds the ports' hardware (PortHw: the hal engine,
// its info, a mutex serialising calls into it, the async tables), the mark
// allocator and N Shards. A Shard owns the flows whose ufid hashes to it
// (FlowRec: what the datapath said about the flow, the decision, its marks
// and hardware rules) and the rules (Rule: pattern, actions, handle, state;
// an installed rule's counters and rate meter live in a dense per-port
// array of RuleStat, which the stats rounds walk) and runs one thread:
//
//   loop:  control commands (enable, disable, mode, flush) -> poll the
//          datapath's rings (the shard whose turn it is routes what it
//          drained to each flow's shard) -> events (decide; masked and mark
//          rules queued) -> hot microflows (exact rules queued; placement
//          when the table is full) -> inserts due (batches; async when the
//          port has the template API) -> every kStatsIntervalNs a terse
//          stats round (unless one just ran), idle demotion, reset
//          detection, placement of table-full candidates -> stats requests
//          (sync_stats) -> sleep up to kIdleWaitNs if nothing happened.
//
// Thread-safety. Each Shard's state is guarded by its `mu`, held by its
// thread for an iteration and by the views (stats(), flow_state(), ...)
// for a copy; commands and stats requests are handed over under it and
// waited for on `cv`. A PortHw's `mu` is taken around every call into its
// hal::FlowEngine (several shards may use one port; the hal engine wants
// one caller at a time). Lock order: Shard::mu -> PortHw::mu -> the
// datapath's flow mutex (add_hw_stats, offload_flow, set_flow_offload) and
// its PMD request rings (set_flow_mark); nothing here is ever taken with
// the datapath's flow mutex held (sync_stats is called by flow_stats() /
// flow_dump() before they lock it). marks_mu guards the mark allocator
// (a leaf). No PMD takes any of these.
#include "offload/offload.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <tuple>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "core/log.h"
#include "keel/hal/cpu.h"
#include "keel/hal/flow.h"
#include "offload/eligibility.h"
#include "offload/placement.h"

namespace keel::offload {

KEEL_LOG_MODULE(log_offload, "offload");

// ------------------------------------------------------------ words ---

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::exact: return "exact";
    case Mode::megaflow: return "megaflow";
    case Mode::both: return "both";
  }
  return "?";
}

std::optional<Mode> parse_mode(std::string_view s) {
  if (s == "exact") return Mode::exact;
  if (s == "megaflow") return Mode::megaflow;
  if (s == "both") return Mode::both;
  return std::nullopt;
}

const char* decision_name(Decision d) {
  switch (d) {
    case Decision::none: return "none";
    case Decision::full_exact: return "full (exact-match)";
    case Decision::full_masked: return "full (masked)";
    case Decision::partial: return "partial (mark)";
  }
  return "?";
}

const char* reason_text(Reason r) {
  switch (r) {
    case Reason::ok: return "offloaded";
    case Reason::disabled: return "offload disabled";
    case Reason::no_engine: return "port has no flow engine";
    case Reason::arm_action: return "actions need the Arm cores";
    case Reason::match_field: return "matches a field the table does not carry";
    case Reason::tunnel_in_port: return "in_port is a tunnel vport";
    case Reason::recirculated: return "recirculated flow";
    case Reason::output_vport: return "actions need the Arm cores: output to a vport";
    case Reason::not_hot: return "not hot yet";
    case Reason::table_full: return "table full";
    case Reason::evicted: return "evicted for hotter flows";
    case Reason::refused: return "refused by the driver";
    case Reason::pending: return "pending";
    case Reason::retrying: return "retrying";
    case Reason::device_reset: return "device reset";
    case Reason::idle_demoted: return "idle: demoted";
    case Reason::mask_refused: return "mask not accepted by the masked table";
  }
  return "?";
}

std::string reason_string(Reason r, std::string_view detail) {
  if (detail.empty()) return reason_text(r);
  switch (r) {
    case Reason::match_field: return "matches " + std::string(detail);
    case Reason::retrying: return "retrying after " + std::string(detail);
    case Reason::no_engine:
    case Reason::tunnel_in_port:
    case Reason::output_vport: return reason_text(r);
    default: return std::string(reason_text(r)) + ": " + std::string(detail);
  }
}

DecideResult decide(const flow::Match& match, std::span<const uint8_t> actions, Mode mode, const PortCapsFn& caps) {
  DecideResult d;
  const uint32_t in = match.key.in_port;
  const PortCaps pc = caps ? caps(in) : PortCaps{};
  if (!pc.exists) {
    d.reason = Reason::no_engine;
    return d;
  }
  if (pc.vport) {
    d.reason = Reason::tunnel_in_port;
    return d;
  }
  if (!pc.has_engine) {
    d.reason = Reason::no_engine;
    return d;
  }
  if (match.mask.recirc_id && match.key.recirc_id) {
    d.reason = Reason::recirculated;
    return d;
  }
  const std::optional<std::string> exact_bad = uncarried_field(match, Table::exact);
  std::string masked_why;
  const bool masked_ok = pc.masked_table && masked_pattern(match, &masked_why).has_value();
  const bool exact_ok = pc.exact_table && !exact_bad;
  Table t = Table::exact;
  switch (mode) {
    case Mode::exact:
      if (!exact_ok) {
        d.reason = Reason::match_field;
        d.detail = (exact_bad ? *exact_bad : std::string("anything")) + ", which the exact-match table does not carry";
        return d;
      }
      t = Table::exact;
      break;
    case Mode::megaflow:
      if (!masked_ok) {
        d.reason = Reason::match_field;
        d.detail = (masked_why.empty() ? std::string("anything") : masked_why) + ", which the masked table does not carry";
        return d;
      }
      t = Table::masked;
      break;
    case Mode::both:
      if (masked_ok) {
        t = Table::masked;
      } else if (exact_ok) {
        t = Table::exact;
      } else {
        d.reason = Reason::match_field;
        d.detail = (exact_bad ? *exact_bad : masked_why) + ", which neither table carries";
        return d;
      }
      break;
  }
  const ActionPlan ap = translate_actions(actions, caps);
  if (ap.full) {
    d.decision = t == Table::exact ? Decision::full_exact : Decision::full_masked;
    d.reason = Reason::ok;
  } else {
    d.decision = Decision::partial;
    d.reason = ap.reason;
    d.detail = ap.detail;
  }
  return d;
}

// ----------------------------------------------------------- engine ---

namespace {

// The engine's own terse round (rates, idleness, reset detection), unless a
// round asked by the revalidator or a dump ran meanwhile.
constexpr uint64_t kStatsIntervalNs = 250'000'000;
constexpr uint64_t kIdleWaitNs = 1'000'000;         // poll period when idle
constexpr uint64_t kAsyncWaitNs = 2'000'000'000;    // bound on waiting for completions
constexpr size_t kPollBatch = 512;
constexpr size_t kMaxWaiting = 4096;  // refused candidates kept per shard for placement

struct FlowId {
  unsigned pmd;
  datapath::Ufid ufid;
  bool operator==(const FlowId&) const = default;
};
struct FlowIdHash {
  size_t operator()(const FlowId& f) const noexcept {
    return static_cast<size_t>(f.ufid.hi ^ (f.ufid.lo * 0x9e3779b97f4a7c15ull) ^ f.pmd);
  }
};
struct MicroKeyHash {
  size_t operator()(const datapath::MicroKey& k) const noexcept {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](const void* p, size_t n) {
      const auto* b = static_cast<const uint8_t*>(p);
      for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    };
    mix(&k.in_port, 4);
    mix(k.eth_dst.data(), 6);
    mix(k.eth_src.data(), 6);
    mix(&k.eth_type, 2);
    mix(&k.vlan_tci, 2);
    mix(&k.ipv4_src, 4);
    mix(&k.ipv4_dst, 4);
    mix(k.ipv6_src.data(), 16);
    mix(k.ipv6_dst.data(), 16);
    mix(&k.tp_src, 2);
    mix(&k.tp_dst, 2);
    mix(&k.ip_proto, 1);
    return static_cast<size_t>(h);
  }
};

enum class RuleKind : uint8_t { exact, masked };
enum class RuleState : uint8_t { queued, installed };

struct Rule {
  uint64_t id = 0;
  FlowId flow{};
  uint16_t port = 0;  // the engine's port (the flow's in_port)
  RuleKind kind = RuleKind::exact;
  bool partial = false;
  datapath::MicroKey key{};  // exact rules
  hal::FlowPattern pattern;
  hal::FlowActions actions;
  hal::FlowHandle handle = hal::kNoFlow;
  RuleState state = RuleState::queued;
  unsigned attempts = 0;
  uint64_t next_try_ns = 0;
  uint64_t gen = 0;  // the device's reset generation when installed
  double initial_rate = 0;
  size_t pos = SIZE_MAX;      // index in the shard's installed list of its port (installed only)
  struct FlowRec* fr = nullptr;  // its flow (rules always go before their flow)
};

// An installed rule's counters, kept dense per port (Shard::installed_), so
// that a stats round walks one array, not 100k scattered Rules.
struct RuleStat {
  hal::FlowHandle handle = hal::kNoFlow;
  uint64_t hits = 0, bytes = 0;  // cumulative, as last read from the device
  uint64_t last_hit_ns = 0;
  uint64_t installed_ns = 0;
  Rule* rule = nullptr;
  struct FlowRec* fr = nullptr;
  datapath::Ufid ufid;
  uint32_t slot = 0;
  uint8_t pmd = 0;
  bool partial = false;
  RateMeter meter;
};

struct FlowRec {
  FlowId id{};
  uint32_t slot = 0;
  uint32_t in_port = 0;
  flow::Match match;
  std::vector<uint8_t> actions;
  DecideResult dec;
  Reason reason = Reason::pending;  // the state a user sees
  std::string detail;
  datapath::FlowOffload where = datapath::FlowOffload::none;
  uint8_t hw_want = 0;
  uint32_t mark = 0;
  std::unordered_set<uint64_t> rules;  // rule ids
  std::unordered_set<datapath::MicroKey, MicroKeyHash> keys;  // exact rules' keys (dedupe)
  uint64_t hw_packets = 0, hw_bytes = 0;
};

struct PortCounters {
  uint64_t inserted[2] = {0, 0}, deleted[2] = {0, 0}, failed[2] = {0, 0}, evicted[2] = {0, 0}, demoted[2] = {0, 0};
  uint64_t rules[2] = {0, 0}, rules_full = 0, rules_partial = 0;
  std::map<std::string, uint64_t> failed_by_reason;
  std::string last_error;
  uint64_t last_error_ns = 0;
  uint64_t resets = 0;
};

// Async tables: one per pattern shape and actions shape.
struct TplKey {
  std::array<uint8_t, hal::kMaxFlowItems> items{};
  uint8_t n_items = 0;
  std::array<uint8_t, hal::kMaxFlowActions> acts{};
  uint8_t n_acts = 0;
  std::string mask_bytes;  // the pattern's masks: a template fixes which fields are matched
  bool masked = false;
  bool operator<(const TplKey& o) const {
    return std::tie(items, n_items, acts, n_acts, mask_bytes, masked) <
           std::tie(o.items, o.n_items, o.acts, o.n_acts, o.mask_bytes, o.masked);
  }
};

}  // namespace

struct PortHw {
  uint16_t id = 0;
  std::string name;
  hal::Port* port = nullptr;
  hal::FlowEngine* fe = nullptr;
  unsigned n_rxq = 1;
  std::mutex mu;  // around every call into fe
  hal::FlowEngineInfo info{};
  bool async = false;       // template API in use
  bool configured = false;  // configure() done
  uint16_t n_queues = 1;    // queues configured (one per shard, at most max_queues)
  uint64_t gen_seen = 0;    // the reset generation the rules were made in
  std::map<TplKey, hal::FlowTableId> tables;
  // Where the port's hardware-handled packets (rx_hw_forwarded +
  // rx_hw_dropped, what full-offload rules forwarded or dropped) were
  // counted, all under `mu`: read from a full rule's counters (hw_read;
  // hw_orphaned of those came after their megaflow had gone, so no flow
  // took them), or lost with the rules' counters in a device reset
  // (hw_lost_at_reset: what the port counted that no rule answered for,
  // taken when the reset is handled, before the engine is told it may add
  // rules again: nothing forwards in hardware meanwhile). rx_hw_base: the
  // port's count when the engine first saw it (no rule yet).
  uint64_t rx_hw_base = 0;
  uint64_t hw_read = 0, hw_orphaned = 0, hw_lost_at_reset = 0;
  // Views (read under the shard mutexes by each shard's own copy: see
  // Shard::ports).
};

class Shard;

class Engine {
 public:
  Engine(datapath::Datapath& dp, OffloadConfig cfg) : dp_(dp), cfg_(cfg) {}
  ~Engine() {
    stop();
    if (hook_set_) dp_.set_offload_sync({});
  }

  Status start();
  void stop();
  bool running() const { return running_.load(std::memory_order_acquire); }

  datapath::Datapath& dp() { return dp_; }
  OffloadConfig cfg() const {
    std::lock_guard lk(cfg_mu_);
    return cfg_;
  }
  void set_cfg(const OffloadConfig& c) {
    std::lock_guard lk(cfg_mu_);
    cfg_ = c;
  }
  const OffloadConfig& cfg_ref() const { return cfg_; }

  PortHw* port_hw(uint32_t id) {
    auto it = ports_.find(id);
    return it == ports_.end() ? nullptr : it->second.get();
  }
  template <class F>
  void for_each_port(F&& f) {
    for (auto& [id, ph] : ports_) f(*ph);
  }
  PortCaps caps(uint32_t id) const;
  PortCapsFn caps_fn() const {
    return [this](uint32_t p) { return caps(p); };
  }

  // Marks: 24 bits, never 0, not reused until released.
  uint32_t alloc_mark();
  void free_mark(uint32_t m);

  std::vector<std::unique_ptr<Shard>>& shards() { return shards_; }
  Shard& shard_of(const FlowId& f) {
    return *shards_[FlowIdHash{}(f) % shards_.size()];
  }

  // Drains the datapath (one caller at a time) and routes to the shards.
  bool poll_and_route();

  // Posts a command to every shard and waits (bounded).
  enum class Cmd : uint8_t { none, enable, disable, remode, flush, stats_terse, stats_full };
  bool command_all(Cmd c, uint64_t timeout_ms);

  Status sync_stats(bool full, uint64_t timeout_ms);
  bool settle(uint64_t timeout_ms);

  void discover_ports();

 private:
  datapath::Datapath& dp_;
  mutable std::mutex cfg_mu_;
  OffloadConfig cfg_;
  std::map<uint32_t, std::unique_ptr<PortHw>> ports_;  // built in start(); immutable while running
  std::vector<std::unique_ptr<Shard>> shards_;
  std::mutex poll_mu_;
  uint64_t lost_seen_ = 0;
  std::mutex marks_mu_;
  uint32_t next_mark_ = 1;
  std::vector<uint32_t> free_marks_;
  // start()/stop() hold it exclusively; sync_stats (any thread: the
  // datapath's hook) shared, so the shards it talks to can't go meanwhile.
  mutable std::shared_mutex life_mu_;
  std::atomic<bool> running_{false};
  bool hook_set_ = false;
  friend class Shard;

 public:
  std::atomic<uint64_t> events{0}, hot{0}, sync_terse{0}, sync_full{0}, last_sync_us{0};
};

class Shard {
 public:
  Shard(Engine& e, unsigned index) : e_(e), index_(index) {}
  ~Shard() { join(); }

  void start() { th_ = std::thread([this] { run(); }); }
  void request_stop() {
    std::lock_guard lk(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  void join() {
    if (th_.joinable()) {
      request_stop();
      th_.join();
    }
  }

  // Routed items (from whichever shard polled).
  void post(const datapath::OffloadEvent& ev) {
    std::lock_guard lk(in_mu_);
    in_events_.push_back(ev);
  }
  void post(const datapath::HotMicroflow& h) {
    std::lock_guard lk(in_mu_);
    in_hot_.push_back(h);
  }
  void wake() { cv_.notify_all(); }

  // Command hand-off: returns the sequence number to wait for.
  uint64_t post_cmd(Engine::Cmd c) {
    std::lock_guard lk(mu_);
    cmds_.push_back({c, ++cmd_seq_});
    cv_.notify_all();
    return cmd_seq_;
  }
  bool wait_cmd(uint64_t seq, uint64_t timeout_ms) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return cmd_done_ >= seq || exited_; }) &&
           cmd_done_ >= seq;
  }
  bool idle_now() {
    std::lock_guard lk(mu_);
    std::lock_guard lk2(in_mu_);
    if (!in_events_.empty() || !in_hot_.empty() || !cmds_.empty()) return false;
    if (!ready_.empty()) return false;
    const uint64_t now = hal::now_ns();
    for (uint64_t id : retry_) {
      auto it = rules_.find(id);
      if (it != rules_.end() && it->second.state == RuleState::queued && it->second.next_try_ns <= now + 50'000'000ull)
        return false;
    }
    return true;
  }

  // Views (control thread).
  void add_stats(std::map<uint32_t, PortOffloadStats>& ports, OffloadStats& s) const;
  std::optional<FlowState> flow_state(const FlowId& f) const;
  void offloaded(std::vector<OffloadedFlow>& out) const;

  // Run on the shard's thread (also by Engine::stop through a command).
 private:
  void run();
  bool iterate();
  void run_cmd(Engine::Cmd c);
  void handle_event(const datapath::OffloadEvent& ev);
  void handle_hot(const datapath::HotMicroflow& h);
  void flow_installed(const FlowId& f, uint32_t slot);
  void flow_removed(const FlowId& f, Reason why);
  void decide_flow(FlowRec& fr);
  void drop_rules(FlowRec& fr, Reason why, bool count_as_demote, bool count_as_evict);
  uint64_t queue_rule(FlowRec& fr, RuleKind kind, bool partial, const datapath::MicroKey* key,
                      const hal::FlowPattern& pat, const hal::FlowActions& acts, double rate);
  bool do_inserts(uint64_t now);
  void insert_sync(PortHw& ph, std::vector<Rule*>& batch, uint64_t now);
  bool insert_async(PortHw& ph, std::vector<Rule*>& batch, uint64_t now);
  void insert_done(Rule& r, bool ok, int errnum, const std::string& msg, hal::FlowHandle h, uint64_t now);
  void destroy_rule(Rule& r);
  // The installed list of each port (what a stats round reads, densely).
  void set_installed(Rule& r, uint64_t now) {
    auto& v = installed_[r.port];
    r.pos = v.size();
    RuleStat st;
    st.handle = r.handle;
    st.installed_ns = now;
    st.rule = &r;
    st.fr = r.fr;
    st.ufid = r.flow.ufid;
    st.pmd = static_cast<uint8_t>(r.flow.pmd);
    st.slot = r.fr ? r.fr->slot : 0;
    st.partial = r.partial;
    st.meter.start(now, r.initial_rate);
    v.push_back(st);
  }
  void clear_installed(Rule& r) {
    if (r.pos == SIZE_MAX) return;
    auto& v = installed_[r.port];
    v[r.pos] = v.back();
    v[r.pos].rule->pos = r.pos;
    v.pop_back();
    r.pos = SIZE_MAX;
  }
  RuleStat& stat(const Rule& r) { return installed_[r.port][r.pos]; }  // installed only
  void stats_round(bool full, uint64_t now);
  void housekeeping(uint64_t now);
  void device_reset(PortHw& ph, uint64_t now);
  void place_exact(PortHw& ph, uint64_t now);
  void update_flow_state(FlowRec& fr);
  void set_where(FlowRec& fr);
  void count_fail(uint16_t port, RuleKind k, Reason r, const std::string& detail);
  uint64_t table_rules(uint16_t port, RuleKind k) const { return pc(port).rules[static_cast<int>(k)]; }
  PortCounters& pc(uint16_t port) { return port_counters_[port]; }
  const PortCounters& pc(uint16_t port) const {
    static const PortCounters none;
    auto it = port_counters_.find(port);
    return it == port_counters_.end() ? none : it->second;
  }

  Engine& e_;
  unsigned index_;
  std::thread th_;
  mutable std::mutex mu_;  // the shard's state (see the top)
  std::condition_variable cv_;
  bool stop_ = false, exited_ = false;
  struct CmdItem {
    Engine::Cmd c;
    uint64_t seq;
  };
  std::deque<CmdItem> cmds_;
  uint64_t cmd_seq_ = 0, cmd_done_ = 0;

  std::mutex in_mu_;  // leaf: routed items
  std::vector<datapath::OffloadEvent> in_events_;
  std::vector<datapath::HotMicroflow> in_hot_;

  bool enabled_ = false;
  Mode mode_ = Mode::exact;
  std::unordered_map<FlowId, FlowRec, FlowIdHash> flows_;
  std::unordered_map<uint64_t, Rule> rules_;
  uint64_t next_rule_ = 1;
  // Refused exact candidates (table full), kept for the next placement pass.
  struct Waiting {
    FlowId flow;
    datapath::MicroKey key;
    double rate;
    uint64_t since_ns;
  };
  std::deque<Waiting> waiting_;
  // Rules to insert: ready now (FIFO), and retries waiting for their time.
  // Ids of rules gone or installed meanwhile are skipped when met.
  std::deque<uint64_t> ready_;
  std::vector<uint64_t> retry_;
  std::map<uint16_t, std::vector<RuleStat>> installed_;
  // Stats round scratch (kept to avoid reallocating 100k entries a round).
  std::vector<hal::FlowHandle> handles_;
  std::vector<hal::FlowQuery> queries_;
  struct Moved {
    const RuleStat* st;
    uint64_t dp, db, used;
  };
  std::vector<Moved> moved_;  // valid within one stats_round (no install/remove meanwhile)
  uint64_t last_round_ns_ = 0;
  std::map<uint16_t, PortCounters> port_counters_;
  uint64_t last_stats_ns_ = 0;
  struct Rates {
    uint64_t t_ns = 0;
    uint64_t ins = 0, del = 0;
    double ins_rate = 0, del_rate = 0;
  };
  std::map<uint16_t, Rates> rates_;
};

// ------------------------------------------------------ Engine impl ---

PortCaps Engine::caps(uint32_t id) const {
  PortCaps c;
  if (id < datapath::kMaxPorts && dp_.is_vport(static_cast<uint16_t>(id))) {
    c.exists = true;
    c.vport = true;
    return c;
  }
  auto it = ports_.find(id);
  if (it == ports_.end()) {
    c.exists = id < datapath::kMaxPorts && dp_.port(static_cast<uint16_t>(id)) != nullptr;
    return c;
  }
  c.exists = true;
  c.has_engine = it->second->fe != nullptr;
  // A capacity of 0 means "unknown" (hal::FlowEngineInfo): assume the table.
  c.exact_table = true;
  c.masked_table = true;
  return c;
}

void Engine::discover_ports() {
  for (hal::Port* p : dp_.ports()) {
    if (ports_.count(p->id())) continue;
    auto ph = std::make_unique<PortHw>();
    ph->id = p->id();
    ph->name = p->name();
    ph->port = p;
    ph->fe = p->flow_engine();
    ph->n_rxq = p->n_rxq();
    if (ph->fe) {
      ph->info = ph->fe->info();
      ph->gen_seen = ph->info.reset_generation;
      const hal::PortCounters pc = p->counters();
      ph->rx_hw_base = pc.rx_hw_forwarded + pc.rx_hw_dropped;
    }
    ports_.emplace(p->id(), std::move(ph));
  }
}

uint32_t Engine::alloc_mark() {
  std::lock_guard lk(marks_mu_);
  if (!free_marks_.empty()) {
    const uint32_t m = free_marks_.back();
    free_marks_.pop_back();
    return m;
  }
  if (next_mark_ > datapath::kMaxFlowMark) return 0;
  return next_mark_++;
}

void Engine::free_mark(uint32_t m) {
  if (m == 0) return;
  std::lock_guard lk(marks_mu_);
  free_marks_.push_back(m);
}

Status Engine::start() {
  std::unique_lock life(life_mu_);
  if (running_) return {};
  discover_ports();
  const OffloadConfig c = cfg();
  // Async (template API) ports: one queue per shard.
  for (auto& [id, ph] : ports_) {
    if (!ph->fe || !ph->info.async_api) continue;
    if (ph->configured) {  // a restart (set_threads, set_pmd_cores): the tables are there
      ph->async = true;
      continue;
    }
    const uint16_t nq = static_cast<uint16_t>(std::max<unsigned>(1, std::min<unsigned>(c.threads, std::max<uint16_t>(ph->info.max_queues, 1))));
    const uint32_t qs = ph->info.queue_size ? std::min<uint32_t>(ph->info.queue_size, 1024) : 256;
    hal::FlowError err;
    std::lock_guard lk(ph->mu);
    if (ph->fe->configure(nq, qs, &err).ok()) {
      ph->configured = true;
      ph->async = true;
      ph->n_queues = nq;
    } else {
      KEEL_LOG(log_offload, warn, "port %s: template API configure failed, using the sync API: %s", ph->name.c_str(),
               err.status().message().c_str());
    }
  }
  shards_.clear();
  for (unsigned i = 0; i < c.threads; ++i) shards_.push_back(std::make_unique<Shard>(*this, i));
  for (auto& s : shards_) s->start();
  running_ = true;
  dp_.set_offload_promote(c.promote_packets, c.promote_window_ns);
  // Registered once, before the first start, and cleared by ~Engine (the
  // datapath wants it set while no dump runs); while stopped it is a no-op.
  if (!hook_set_) {
    dp_.set_offload_sync([this](bool full) { (void)sync_stats(full, 1000); });
    hook_set_ = true;
  }
  if (c.enabled) {
    dp_.set_offload_enabled(true);
    command_all(Cmd::enable, 5000);
  }
  return {};
}

void Engine::stop() {
  std::unique_lock life(life_mu_);
  if (!running_) return;
  dp_.set_offload_enabled(false);
  command_all(Cmd::flush, 10000);
  for (auto& s : shards_) s->join();
  shards_.clear();
  running_ = false;
}

bool Engine::command_all(Cmd c, uint64_t timeout_ms) {
  std::vector<uint64_t> seqs;
  for (auto& s : shards_) seqs.push_back(s->post_cmd(c));
  bool ok = true;
  for (size_t i = 0; i < shards_.size(); ++i) ok = shards_[i]->wait_cmd(seqs[i], timeout_ms) && ok;
  return ok;
}

Status Engine::sync_stats(bool full, uint64_t timeout_ms) {
  std::shared_lock life(life_mu_);
  if (!running_) return {};
  const uint64_t t0 = hal::now_ns();
  if (!command_all(full ? Cmd::stats_full : Cmd::stats_terse, timeout_ms))
    return error(Errc::unavailable, "offload: hardware statistics not read within " + std::to_string(timeout_ms) +
                                        " ms (the offload thread is busy)");
  last_sync_us.store((hal::now_ns() - t0) / 1000, std::memory_order_relaxed);
  (full ? sync_full : sync_terse).fetch_add(1, std::memory_order_relaxed);
  return {};
}

bool Engine::settle(uint64_t timeout_ms) {
  if (!running_) return true;
  const uint64_t deadline = hal::now_ns() + timeout_ms * 1'000'000ull;
  // Two consecutive idle observations after a round trip of every shard.
  int quiet = 0;
  while (hal::now_ns() < deadline) {
    const uint64_t left_ms = std::max<uint64_t>(1, (deadline - hal::now_ns()) / 1'000'000ull);
    if (!command_all(Cmd::none, left_ms)) return false;
    bool idle = true;
    for (auto& s : shards_) idle = s->idle_now() && idle;
    if (idle && ++quiet >= 2) return true;
    if (!idle) quiet = 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

bool Engine::poll_and_route() {
  std::unique_lock lk(poll_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return false;
  std::array<datapath::OffloadEvent, kPollBatch> evs;
  std::array<datapath::HotMicroflow, kPollBatch> hot_items;
  bool any = false;
  for (int round = 0; round < 8; ++round) {
    const datapath::OffloadPollResult r = dp_.offload_poll(evs, hot_items);
    if (r.events == 0 && r.hot == 0) break;
    any = true;
    events.fetch_add(r.events, std::memory_order_relaxed);
    hot.fetch_add(r.hot, std::memory_order_relaxed);
    for (size_t i = 0; i < r.events; ++i) shard_of({evs[i].pmd, evs[i].ufid}).post(evs[i]);
    for (size_t i = 0; i < r.hot; ++i) shard_of({hot_items[i].pmd, hot_items[i].ufid}).post(hot_items[i]);
    if (r.events < evs.size() && r.hot < hot_items.size()) break;
  }
  // Lost events: reconcile with a scan (every live flow as `installed`;
  // the shards drop what they know that the scan does not list).
  const uint64_t lost = dp_.offload_events_lost();
  if (lost != lost_seen_) {
    lost_seen_ = lost;
    std::vector<datapath::OffloadEvent> all;
    dp_.offload_scan(all);
    for (const auto& ev : all) shard_of({ev.pmd, ev.ufid}).post(ev);
    any = true;
  }
  if (any)
    for (auto& s : shards_) s->wake();
  return any;
}

// ------------------------------------------------------- Shard impl ---

void Shard::run() {
  std::unique_lock lk(mu_);
  while (!stop_) {
    bool busy = false;
    // Commands.
    while (!cmds_.empty()) {
      const CmdItem ci = cmds_.front();
      cmds_.pop_front();
      run_cmd(ci.c);
      cmd_done_ = ci.seq;
      cv_.notify_all();
      busy = true;
    }
    busy = iterate() || busy;
    if (!busy) cv_.wait_for(lk, std::chrono::nanoseconds(kIdleWaitNs));
  }
  // Stopping: everything that was asked is answered (waiters see exited_).
  while (!cmds_.empty()) {
    run_cmd(cmds_.front().c);
    cmd_done_ = cmds_.front().seq;
    cmds_.pop_front();
  }
  exited_ = true;
  cv_.notify_all();
}

bool Shard::iterate() {
  bool busy = false;
  if (e_.poll_and_route()) busy = true;
  std::vector<datapath::OffloadEvent> evs;
  std::vector<datapath::HotMicroflow> hot;
  {
    std::lock_guard lk(in_mu_);
    evs.swap(in_events_);
    hot.swap(in_hot_);
  }
  if (enabled_) {
    for (const auto& ev : evs) handle_event(ev);
    for (const auto& h : hot) handle_hot(h);
  }
  busy = busy || !evs.empty() || !hot.empty();
  const uint64_t now = hal::now_ns();
  if (enabled_ && do_inserts(now)) busy = true;
  if (enabled_ && now - last_stats_ns_ >= kStatsIntervalNs) {
    last_stats_ns_ = now;
    if (now - last_round_ns_ >= kStatsIntervalNs) stats_round(false, now);
    housekeeping(now);
  }
  return busy;
}

void Shard::run_cmd(Engine::Cmd c) {
  const OffloadConfig cfg = e_.cfg();
  switch (c) {
    case Engine::Cmd::none:
      break;
    case Engine::Cmd::enable: {
      enabled_ = true;
      mode_ = cfg.mode;
      // Flows that exist already: a scan (this shard's share).
      std::vector<datapath::OffloadEvent> all;
      e_.dp().offload_scan(all);
      for (const auto& ev : all)
        if (&e_.shard_of({ev.pmd, ev.ufid}) == this) handle_event(ev);
      break;
    }
    case Engine::Cmd::disable:
    case Engine::Cmd::flush: {
      std::vector<FlowId> ids;
      for (auto& [id, fr] : flows_) ids.push_back(id);
      for (const FlowId& id : ids) {
        auto it = flows_.find(id);
        if (it == flows_.end()) continue;
        FlowRec& fr = it->second;
        drop_rules(fr, Reason::disabled, false, false);
        if (fr.mark) {
          (void)e_.dp().clear_flow_mark(fr.id.pmd, fr.mark);
          e_.free_mark(fr.mark);
          fr.mark = 0;
        }
        fr.hw_want = 0;
        fr.where = datapath::FlowOffload::none;
        (void)e_.dp().set_flow_offload(fr.id.pmd, fr.slot, fr.id.ufid, datapath::FlowOffload::none, 0);
      }
      for (auto& [rid, r] : rules_) destroy_rule(r);  // none should be left: belt and braces
      rules_.clear();
      installed_.clear();
      flows_.clear();
      waiting_.clear();
      ready_.clear();
      retry_.clear();
      enabled_ = false;
      break;
    }
    case Engine::Cmd::remode: {
      mode_ = cfg.mode;
      if (!enabled_) break;
      for (auto& [id, fr] : flows_) {
        drop_rules(fr, Reason::pending, false, false);
        decide_flow(fr);
      }
      waiting_.clear();
      break;
    }
    case Engine::Cmd::stats_terse:
    case Engine::Cmd::stats_full:
      if (enabled_) stats_round(c == Engine::Cmd::stats_full, hal::now_ns());
      break;
  }
}

void Shard::handle_event(const datapath::OffloadEvent& ev) {
  const FlowId f{ev.pmd, ev.ufid};
  switch (ev.op) {
    case datapath::OffloadEvent::Op::installed:
      flow_installed(f, ev.slot);
      break;
    case datapath::OffloadEvent::Op::removed:
      flow_removed(f, Reason::pending);
      break;
    case datapath::OffloadEvent::Op::modified: {
      auto it = flows_.find(f);
      auto info = e_.dp().offload_flow(ev.pmd, ev.slot, ev.ufid);
      if (!info) {
        flow_removed(f, Reason::pending);
        break;
      }
      if (it == flows_.end()) {
        flow_installed(f, ev.slot);
        break;
      }
      FlowRec& fr = it->second;
      if (fr.actions == info->action_bytes) break;  // nothing the hardware holds changed
      // Re-offload only this flow: its rules go, the decision is made again.
      drop_rules(fr, Reason::pending, false, false);
      fr.actions = info->action_bytes;
      fr.match = info->match;
      decide_flow(fr);
      break;
    }
  }
}

void Shard::flow_installed(const FlowId& f, uint32_t slot) {
  auto info = e_.dp().offload_flow(f.pmd, slot, f.ufid);
  if (!info) return;
  auto it = flows_.find(f);
  if (it != flows_.end()) {
    if (it->second.slot == slot && it->second.actions == info->action_bytes) return;  // known (scan)
    drop_rules(it->second, Reason::pending, false, false);
    if (it->second.mark) {
      (void)e_.dp().clear_flow_mark(f.pmd, it->second.mark);
      e_.free_mark(it->second.mark);
    }
    flows_.erase(it);
  }
  FlowRec& fr = flows_[f];
  fr.id = f;
  fr.slot = slot;
  fr.in_port = info->in_port;
  fr.match = info->match;
  fr.actions = std::move(info->action_bytes);
  decide_flow(fr);
}

void Shard::flow_removed(const FlowId& f, Reason why) {
  auto it = flows_.find(f);
  if (it == flows_.end()) return;
  FlowRec& fr = it->second;
  drop_rules(fr, why, false, false);
  if (fr.mark) {
    // The PMD dropped its entry when the flow died; the mark is free once
    // the hardware rules that set it are gone (above) and the PMD confirmed.
    (void)e_.dp().clear_flow_mark(f.pmd, fr.mark);
    e_.free_mark(fr.mark);
  }
  std::erase_if(waiting_, [&f](const Waiting& w) { return w.flow == f; });
  flows_.erase(it);
}

uint64_t Shard::queue_rule(FlowRec& fr, RuleKind kind, bool partial, const datapath::MicroKey* key,
                           const hal::FlowPattern& pat, const hal::FlowActions& acts, double rate) {
  const uint64_t id = (static_cast<uint64_t>(index_) << 56) | next_rule_++;
  Rule& r = rules_[id];
  r.id = id;
  r.flow = fr.id;
  r.port = static_cast<uint16_t>(fr.in_port);
  r.kind = kind;
  r.partial = partial;
  if (key) r.key = *key;
  r.pattern = pat;
  r.actions = acts;
  r.initial_rate = rate;
  r.fr = &fr;
  r.next_try_ns = 0;
  ready_.push_back(id);
  fr.rules.insert(id);
  if (key) fr.keys.insert(*key);
  return id;
}

void Shard::decide_flow(FlowRec& fr) {
  fr.dec = decide(fr.match, fr.actions, mode_, e_.caps_fn());
  fr.hw_want = 0;
  switch (fr.dec.decision) {
    case Decision::none:
      fr.reason = fr.dec.reason;
      fr.detail = fr.dec.detail;
      break;
    case Decision::full_exact:
      fr.hw_want = 1;
      fr.reason = Reason::not_hot;
      fr.detail.clear();
      break;
    case Decision::partial:
    case Decision::full_masked: {
      const bool partial = fr.dec.decision == Decision::partial;
      if (partial && !fr.mark) {
        fr.mark = e_.alloc_mark();
        if (fr.mark == 0) {
          fr.reason = Reason::table_full;
          fr.detail = "no free mark";
          break;
        }
        Status st = e_.dp().set_flow_mark(fr.id.pmd, fr.slot, fr.id.ufid, fr.mark);
        if (!st.ok()) {
          e_.free_mark(fr.mark);
          fr.mark = 0;
          fr.reason = Reason::refused;
          fr.detail = st.message();
          break;
        }
      }
      // Which table: the masked one (megaflow/both mode, its match carried)
      // or exact rules for hot microflows.
      const bool masked = fr.dec.decision == Decision::full_masked ||
                          (partial && mode_ != Mode::exact && masked_pattern(fr.match).has_value());
      if (!masked) {
        fr.hw_want = 1;
        fr.reason = Reason::not_hot;
        fr.detail = partial ? reason_string(fr.dec.reason, fr.dec.detail) : std::string();
        break;
      }
      auto pat = masked_pattern(fr.match);
      hal::FlowActions acts;
      if (partial) {
        PortHw* ph = e_.port_hw(fr.in_port);
        acts = partial_actions(fr.mark, -1, ph ? ph->n_rxq : 1);
      } else {
        acts = translate_actions(fr.actions, e_.caps_fn()).actions;
      }
      queue_rule(fr, RuleKind::masked, partial, nullptr, *pat, acts, 0);
      fr.reason = Reason::pending;
      fr.detail.clear();
      break;
    }
  }
  set_where(fr);
}

void Shard::set_where(FlowRec& fr) {
  datapath::FlowOffload w = datapath::FlowOffload::none;
  for (uint64_t id : fr.rules) {
    const Rule& r = rules_.at(id);
    if (r.state != RuleState::installed) continue;
    w = r.partial ? datapath::FlowOffload::partial : datapath::FlowOffload::full;
    break;
  }
  fr.where = w;
  (void)e_.dp().set_flow_offload(fr.id.pmd, fr.slot, fr.id.ufid, w, fr.hw_want);
}

void Shard::handle_hot(const datapath::HotMicroflow& h) {
  auto it = flows_.find({h.pmd, h.ufid});
  if (it == flows_.end()) return;
  FlowRec& fr = it->second;
  if (fr.hw_want != 1 || h.key.in_port != fr.in_port) return;
  if (fr.keys.count(h.key)) return;  // a rule exists or is queued
  std::string why;
  auto pat = exact_pattern(h.key, &why);
  if (!pat) {
    count_fail(static_cast<uint16_t>(fr.in_port), RuleKind::exact, Reason::match_field, why);
    return;
  }
  hal::FlowActions acts;
  const bool partial = fr.dec.decision == Decision::partial;
  if (partial)
    acts = partial_actions(fr.mark, h.rxq, 1);
  else
    acts = translate_actions(fr.actions, e_.caps_fn()).actions;
  const OffloadConfig cfg = e_.cfg();
  const double rate = static_cast<double>(h.packets) * 1e9 / static_cast<double>(std::max<uint64_t>(cfg.promote_window_ns, 1));
  queue_rule(fr, RuleKind::exact, partial, &h.key, *pat, acts, rate);
  if (fr.where == datapath::FlowOffload::none) {
    fr.reason = Reason::pending;
    fr.detail.clear();
  }
}

bool Shard::do_inserts(uint64_t now) {
  const OffloadConfig cfg = e_.cfg();
  // Due rules per port, up to a batch each.
  // Retries that are due join the ready queue (in the order they failed).
  if (!retry_.empty()) {
    std::vector<uint64_t> later;
    for (uint64_t id : retry_) {
      auto it = rules_.find(id);
      if (it == rules_.end() || it->second.state != RuleState::queued) continue;
      if (it->second.next_try_ns <= now)
        ready_.push_back(id);
      else
        later.push_back(id);
    }
    retry_.swap(later);
  }
  // Up to a batch per port, FIFO (a queue, not a scan: 100k queued rules
  // cost what their inserts cost).
  std::map<uint16_t, std::vector<Rule*>> due;
  size_t taken = 0;
  while (!ready_.empty() && taken < size_t{cfg.batch} * 4) {
    const uint64_t id = ready_.front();
    auto it = rules_.find(id);
    if (it == rules_.end() || it->second.state != RuleState::queued) {
      ready_.pop_front();
      continue;
    }
    auto& v = due[it->second.port];
    if (v.size() >= cfg.batch) break;  // the next batch
    ready_.pop_front();
    v.push_back(&it->second);
    ++taken;
  }
  if (due.empty()) return false;
  for (auto& [port, batch] : due) {
    PortHw* ph = e_.port_hw(port);
    if (!ph || !ph->fe) {
      for (Rule* r : batch) insert_done(*r, false, ENODEV, "port has no flow engine", hal::kNoFlow, now);
      continue;
    }
    // Table full: don't knock, place (exact rules compete by rate).
    std::sort(batch.begin(), batch.end(), [](const Rule* a, const Rule* b) { return a->id < b->id; });
    if (ph->async) {
      if (!insert_async(*ph, batch, now)) insert_sync(*ph, batch, now);
    } else {
      insert_sync(*ph, batch, now);
    }
  }
  return true;
}

void Shard::insert_sync(PortHw& ph, std::vector<Rule*>& batch, uint64_t now) {
  hal::FlowAttr attr;
  attr.ingress = true;
  for (Rule* r : batch) {
    if (r->state != RuleState::queued) continue;
    hal::FlowError err;
    Result<hal::FlowHandle> h = [&] {
      std::lock_guard lk(ph.mu);
      return ph.fe->create(attr, r->pattern, r->actions, &err);
    }();
    if (h.ok())
      insert_done(*r, true, 0, "", h.value(), now);
    else
      insert_done(*r, false, err.errnum ? err.errnum : EIO, h.status().message(), hal::kNoFlow, now);
  }
}

bool Shard::insert_async(PortHw& ph, std::vector<Rule*>& batch, uint64_t now) {
  const uint16_t q = static_cast<uint16_t>(index_ % std::max<uint16_t>(ph.n_queues, 1));
  std::lock_guard lk(ph.mu);
  // Tables per template shape, made on first use.
  std::vector<std::pair<Rule*, hal::FlowTableId>> todo;
  for (Rule* r : batch) {
    TplKey k;
    for (unsigned i = 0; i < r->pattern.count; ++i) k.items[i] = static_cast<uint8_t>(r->pattern.items[i].type);
    k.n_items = r->pattern.count;
    for (unsigned i = 0; i < r->actions.count; ++i) k.acts[i] = static_cast<uint8_t>(r->actions.actions[i].type);
    k.n_acts = r->actions.count;
    k.masked = r->kind == RuleKind::masked;
    for (unsigned i = 0; i < r->pattern.count; ++i)
      k.mask_bytes.append(reinterpret_cast<const char*>(&r->pattern.items[i].mask), sizeof(hal::FlowItemData));
    auto it = ph.tables.find(k);
    if (it == ph.tables.end()) {
      hal::FlowError err;
      hal::FlowTemplateAttr ta;
      // The template fixes the masks; spec values come with each rule.
      hal::FlowPattern tp = r->pattern;
      auto pt = ph.fe->pattern_template(ta, tp, &err);
      if (!pt.ok()) {
        ph.async = false;  // the sync API from now on
        KEEL_LOG(log_offload, warn, "port %s: pattern template refused, using the sync API: %s", ph.name.c_str(),
                 pt.status().message().c_str());
        return false;
      }
      hal::FlowActions masks;  // zero: each rule gives every action's value
      for (unsigned i = 0; i < r->actions.count; ++i) {
        hal::FlowAction a{};
        a.type = r->actions.actions[i].type;
        masks.add(a);
      }
      auto at = ph.fe->actions_template(ta, r->actions, masks, &err);
      if (!at.ok()) {
        ph.async = false;
        KEEL_LOG(log_offload, warn, "port %s: actions template refused, using the sync API: %s", ph.name.c_str(),
                 at.status().message().c_str());
        return false;
      }
      hal::FlowAttr attr;
      const uint32_t cap = k.masked ? ph.info.masked_capacity : ph.info.exact_capacity;
      const hal::FlowTemplateId pts[1] = {pt.value()}, ats[1] = {at.value()};
      auto tb = ph.fe->template_table(attr, cap ? cap : 65536, pts, ats, &err);
      if (!tb.ok()) {
        ph.async = false;
        KEEL_LOG(log_offload, warn, "port %s: template table refused, using the sync API: %s", ph.name.c_str(),
                 tb.status().message().c_str());
        return false;
      }
      it = ph.tables.emplace(k, tb.value()).first;
    }
    todo.emplace_back(r, it->second);
  }
  std::unordered_map<uint64_t, Rule*> inflight;
  for (size_t i = 0; i < todo.size(); ++i) {
    Rule* r = todo[i].first;
    hal::FlowError err;
    hal::FlowHandle h = hal::kNoFlow;
    const bool last = i + 1 == todo.size();
    Status st = ph.fe->async_create(q, todo[i].second, r->pattern, 0, r->actions, 0, !last, r->id, &h, &err);
    if (!st.ok()) {
      insert_done(*r, false, err.errnum ? err.errnum : EIO, st.message(), hal::kNoFlow, now);
      continue;
    }
    r->handle = h;
    inflight.emplace(r->id, r);
  }
  {
    hal::FlowError err;
    (void)ph.fe->push(q, &err);
  }
  std::array<hal::FlowOpResult, 64> res;
  const uint64_t deadline = hal::now_ns() + kAsyncWaitNs;
  while (!inflight.empty() && hal::now_ns() < deadline) {
    hal::FlowError err;
    const unsigned n = ph.fe->pull(q, res, &err);
    for (unsigned i = 0; i < n; ++i) {
      auto it = inflight.find(res[i].user_data);
      if (it == inflight.end()) continue;
      Rule* r = it->second;
      inflight.erase(it);
      insert_done(*r, res[i].ok, res[i].errnum, res[i].ok ? "" : std::string("async create: ") + hal::errno_name(res[i].errnum),
                  res[i].handle != hal::kNoFlow ? res[i].handle : r->handle, now);
    }
    if (n == 0) {
      if (err.errnum) break;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  for (auto& [id, r] : inflight) insert_done(*r, false, ETIMEDOUT, "async create: no completion", hal::kNoFlow, now);
  return true;
}

void Shard::insert_done(Rule& r, bool ok, int errnum, const std::string& msg, hal::FlowHandle h, uint64_t now) {
  auto fit = flows_.find(r.flow);
  const int k = static_cast<int>(r.kind);
  PortCounters& c = pc(r.port);
  if (ok) {
    r.state = RuleState::installed;
    r.handle = h;
    set_installed(r, now);
    r.attempts = 0;
    PortHw* ph = e_.port_hw(r.port);
    r.gen = ph ? ph->gen_seen : 0;
    c.inserted[k]++;
    c.rules[k]++;
    (r.partial ? c.rules_partial : c.rules_full)++;
    if (fit != flows_.end()) {
      fit->second.reason = Reason::ok;
      fit->second.detail = r.partial ? reason_string(fit->second.dec.reason, fit->second.dec.detail) : std::string();
      set_where(fit->second);
    } else {
      destroy_rule(r);  // the flow went while we inserted
      rules_.erase(r.id);
    }
    return;
  }
  // Failed: transient -> retry with backoff; ENOSPC -> table full; a reset
  // -> the reset path; anything else -> refused, stays on the Arm path.
  const OffloadConfig cfg = e_.cfg();
  Reason why;
  std::string detail = msg;
  if (transient_errno(errnum) && r.attempts < cfg.max_retries) {
    r.next_try_ns = now + backoff_ns(r.attempts, uint64_t{cfg.retry_base_ms} * 1'000'000ull,
                                     uint64_t{cfg.retry_max_ms} * 1'000'000ull);
    r.attempts++;
    retry_.push_back(r.id);
    if (fit != flows_.end() && fit->second.where == datapath::FlowOffload::none) {
      fit->second.reason = Reason::retrying;
      fit->second.detail = hal::errno_name(errnum);
    }
    c.last_error = msg;
    c.last_error_ns = now;
    return;
  }
  if (errnum == ENODEV || errnum == EIO) {
    PortHw* ph = e_.port_hw(r.port);
    if (ph && r.attempts < cfg.max_retries) {
      // The device is resetting: retry later (what is hot is re-offloaded).
      r.next_try_ns = now + backoff_ns(r.attempts, uint64_t{cfg.retry_base_ms} * 1'000'000ull,
                                       uint64_t{cfg.retry_max_ms} * 1'000'000ull);
      r.attempts++;
      retry_.push_back(r.id);
      if (fit != flows_.end()) {
        fit->second.reason = Reason::device_reset;
        fit->second.detail.clear();
      }
      c.last_error = msg;
      c.last_error_ns = now;
      return;
    }
    why = Reason::device_reset;
  } else if (errnum == ENOSPC || errnum == ENOMEM) {
    why = Reason::table_full;
    detail.clear();
    if (r.kind == RuleKind::exact && fit != flows_.end() && waiting_.size() < kMaxWaiting)
      waiting_.push_back({r.flow, r.key, r.initial_rate, now});
  } else {
    why = Reason::refused;
  }
  c.failed[k]++;
  c.failed_by_reason[reason_text(why)]++;
  c.last_error = msg;
  c.last_error_ns = now;
  if (fit != flows_.end()) {
    FlowRec& fr = fit->second;
    fr.rules.erase(r.id);
    if (r.kind == RuleKind::exact) fr.keys.erase(r.key);
    if (fr.where == datapath::FlowOffload::none || fr.rules.empty()) {
      fr.reason = why;
      fr.detail = why == Reason::refused ? detail : std::string();
    }
    set_where(fr);
  }
  rules_.erase(r.id);
}

void Shard::destroy_rule(Rule& r) {
  if (r.state != RuleState::installed) return;
  const RuleStat before = stat(r);
  clear_installed(r);
  PortHw* ph = e_.port_hw(r.port);
  const int k = static_cast<int>(r.kind);
  PortCounters& c = pc(r.port);
  if (ph && ph->fe && r.gen == ph->gen_seen) {
    hal::FlowError err;
    hal::FlowQuery fin;
    Status st;
    uint64_t dp = 0, db = 0;
    {
      std::lock_guard lk(ph->mu);
      st = ph->fe->destroy_counted(r.handle, fin, &err);
      // What it counted since the last round: its flow's too (a full
      // rule's; a partial rule's packets went on to the PMD).
      if (fin.ok && !before.partial) {
        dp = fin.hits > before.hits ? fin.hits - before.hits : 0;
        db = fin.bytes > before.bytes ? fin.bytes - before.bytes : 0;
        ph->hw_read += dp;
      }
    }
    if (dp || db) {
      const uint64_t used = fin.last_hit_ns ? fin.last_hit_ns : hal::now_ns();
      if (e_.dp().add_hw_stats(before.pmd, before.slot, before.ufid, dp, db, used)) {
        if (auto fit = flows_.find(r.flow); fit != flows_.end())
          fit->second.hw_packets += dp, fit->second.hw_bytes += db;
      } else {
        std::lock_guard lk(ph->mu);
        ph->hw_orphaned += dp;
      }
    }
    if (!st.ok()) {
      c.last_error = st.message();
      c.last_error_ns = hal::now_ns();
    }
  }
  c.deleted[k]++;
  if (c.rules[k]) c.rules[k]--;
  uint64_t& n = r.partial ? c.rules_partial : c.rules_full;
  if (n) n--;
  r.state = RuleState::queued;
  r.handle = hal::kNoFlow;
}

void Shard::drop_rules(FlowRec& fr, Reason why, bool count_as_demote, bool count_as_evict) {
  for (uint64_t id : fr.rules) {
    auto it = rules_.find(id);
    if (it == rules_.end()) continue;
    Rule& r = it->second;
    if (r.state == RuleState::installed) {
      if (count_as_demote) pc(r.port).demoted[static_cast<int>(r.kind)]++;
      if (count_as_evict) pc(r.port).evicted[static_cast<int>(r.kind)]++;
    }
    destroy_rule(r);
    rules_.erase(it);
  }
  fr.rules.clear();
  fr.keys.clear();
  fr.reason = why;
  fr.detail.clear();
}

void Shard::stats_round(bool full, uint64_t now) {
  // Terse: every installed rule of a port queried in bulk by handle, from
  // the shard's dense installed list; deltas summed per flow through the
  // rule's flow pointer, then one add_hw_stats per flow that moved. Full:
  // one query per rule, and per rule the flow read back from the datapath
  // and its pattern re-built and compared (what reading rules back costs).
  // Cost (bench_offload_revalidate): tens of ns per rule besides the
  // device's query time; nothing allocated once the scratch vectors grew.
  last_round_ns_ = now;
  moved_.clear();
  std::vector<uint16_t> reset_ports;
  // A reset of a port with no installed rule here (its inserts refused
  // until the reset is handled) is seen by its generation alone.
  e_.for_each_port([&](PortHw& ph) {
    if (!ph.fe) return;
    if (auto it = installed_.find(ph.id); it != installed_.end() && !it->second.empty()) return;  // below
    std::lock_guard lk(ph.mu);
    if (ph.fe->info().reset_generation != ph.gen_seen) reset_ports.push_back(ph.id);
  });
  for (auto& [port, list] : installed_) {
    if (list.empty()) continue;
    PortHw* ph = e_.port_hw(port);
    if (!ph || !ph->fe) continue;
    // The port's engine lock for the whole port: what is read from its
    // rules is in hw_read before a reset can be accounted (device_reset).
    std::lock_guard port_lk(ph->mu);
    // A reset the device reports by its generation.
    if (ph->fe->info().reset_generation != ph->gen_seen) {
      reset_ports.push_back(port);
      continue;
    }
    const size_t n = list.size();
    handles_.resize(n);
    queries_.assign(n, hal::FlowQuery{});
    for (size_t i = 0; i < n; ++i) handles_[i] = list[i].handle;
    if (!full) {
      ph->fe->query_bulk(std::span<const hal::FlowHandle>(handles_.data(), n), std::span<hal::FlowQuery>(queries_.data(), n));
    } else {
      for (size_t i = 0; i < n; ++i) {
        hal::FlowError err;
        (void)ph->fe->query(handles_[i], queries_[i], &err);
        Rule& r = *list[i].rule;
        if (!r.fr) continue;
        if (auto info = e_.dp().offload_flow(r.flow.pmd, r.fr->slot, r.flow.ufid)) {
          hal::FlowPattern p = r.kind == RuleKind::exact ? exact_pattern(r.key).value_or(hal::FlowPattern{})
                                                         : masked_pattern(info->match).value_or(hal::FlowPattern{});
          if (!(p == r.pattern))
            KEEL_LOG(log_offload, warn, "rule %llu: pattern differs from its flow's", static_cast<unsigned long long>(r.id));
        }
      }
    }
    bool reset = false;
    uint64_t query_failed = 0;
    int last_errnum = 0;
    // Cached EWMA weight: most rules were last updated at the same round.
    uint64_t alpha_dt = UINT64_MAX;
    double alpha = 0;
    for (size_t i = 0; i < n; ++i) {
      RuleStat& r = list[i];
      const hal::FlowQuery& q = queries_[i];
      if (!q.ok) {
        if (q.errnum == ENODEV) reset = true;  // the handle died with the device's state
        ++query_failed;
        last_errnum = q.errnum;
        continue;
      }
      const uint64_t dp = q.hits >= r.hits ? q.hits - r.hits : 0;
      const uint64_t db = q.bytes >= r.bytes ? q.bytes - r.bytes : 0;
      r.hits = std::max(r.hits, q.hits);
      r.bytes = std::max(r.bytes, q.bytes);
      // The device's last hit when it knows one (the sim does; DPDK only
      // with AGE), else now: when we saw the counter move.
      uint64_t used = 0;
      if (dp) used = q.last_hit_ns && q.last_hit_ns <= now ? q.last_hit_ns : now;
      if (used > r.last_hit_ns) r.last_hit_ns = used;
      r.meter.update(now, r.hits, alpha_dt, alpha);
      // A partial (MARK) rule's packets reach the PMD, which counts them in
      // the megaflow already: its counter only feeds the rate and idleness.
      // add_hw_stats adds: one call per rule that moved (a flow with
      // several exact rules gets several), with what it needs copied into
      // the dense RuleStat, so the loop touches no Rule and no FlowRec.
      if (!r.partial && (dp || db)) {
        ph->hw_read += dp;
        moved_.push_back({&r, dp, db, used});
      }
    }
    if (query_failed) {
      PortCounters& c = pc(port);
      c.failed_by_reason["query failed"] += query_failed;
      c.last_error = std::string("rte_flow query on port ") + ph->name + ": " + hal::errno_name(last_errnum);
      c.last_error_ns = now;
    }
    if (reset) reset_ports.push_back(port);
  }
  for (const Moved& m : moved_) {
    if (!e_.dp().add_hw_stats(m.st->pmd, m.st->slot, m.st->ufid, m.dp, m.db, m.used)) {
      // Its megaflow went after the query: counted, but by no flow.
      if (PortHw* ph = e_.port_hw(m.st->rule->port)) {
        std::lock_guard lk(ph->mu);
        ph->hw_orphaned += m.dp;
      }
      continue;
    }
    if (m.st->fr) {
      m.st->fr->hw_packets += m.dp;
      m.st->fr->hw_bytes += m.db;
    }
  }
  moved_.clear();
  for (uint16_t port : reset_ports)
    if (PortHw* ph = e_.port_hw(port)) device_reset(*ph, now);
  // Insert / delete rates per port, per second since the last round.
  for (auto& [port, c] : port_counters_) {
    Rates& rt = rates_[port];
    const uint64_t ins = c.inserted[0] + c.inserted[1], del = c.deleted[0] + c.deleted[1];
    if (rt.t_ns && now > rt.t_ns) {
      const double dt = static_cast<double>(now - rt.t_ns) / 1e9;
      if (dt >= 0.05) {
        rt.ins_rate = static_cast<double>(ins - rt.ins) / dt;
        rt.del_rate = static_cast<double>(del - rt.del) / dt;
        rt.t_ns = now, rt.ins = ins, rt.del = del;
      }
    } else {
      rt.t_ns = now, rt.ins = ins, rt.del = del;
    }
  }
}

void Shard::device_reset(PortHw& ph, uint64_t now) {
  // The device forgot every rule: handles are void. Re-offload what is
  // still hot (a hit within the idle time); the rest goes back to sampling.
  const OffloadConfig cfg = e_.cfg();
  const uint64_t idle_ns = cfg.idle_ms ? uint64_t{cfg.idle_ms} * 1'000'000ull : 2'000'000'000ull;
  {
    std::lock_guard lk(ph.mu);
    // Templates and template tables are configuration: a driver re-applies
    // them after a reset (the sim model keeps them), so they stay.
    const uint64_t gen = ph.fe->info().reset_generation;
    if (gen != ph.gen_seen) {
      // The rules' counters died with them: what the port counted in
      // hardware that no rule answered for is lost to the flows' counts.
      // Final: no rule forwards until the engine is told below.
      const hal::PortCounters pcnt = ph.port->counters();
      const uint64_t hw = pcnt.rx_hw_forwarded + pcnt.rx_hw_dropped - ph.rx_hw_base;
      const uint64_t known = ph.hw_read + ph.hw_lost_at_reset;
      if (hw > known) ph.hw_lost_at_reset += hw - known;
      ph.gen_seen = gen;
    }
    ph.fe->reset_acknowledged();
  }
  PortCounters& c = pc(ph.id);
  c.resets++;
  c.failed_by_reason[reason_text(Reason::device_reset)]++;
  c.last_error = "device reset on port " + ph.name;
  c.last_error_ns = now;
  std::vector<uint64_t> gone;
  std::vector<Rule*> was;
  for (const RuleStat& st : installed_[ph.id]) was.push_back(st.rule);
  for (Rule* rp : was) {
    Rule& r = *rp;
    const uint64_t id = r.id;
    const RuleStat st = stat(r);
    clear_installed(r);
    const int k = static_cast<int>(r.kind);
    if (c.rules[k]) c.rules[k]--;
    uint64_t& n = r.partial ? c.rules_partial : c.rules_full;
    if (n) n--;
    const bool hot = st.last_hit_ns && now - st.last_hit_ns < idle_ns;
    if (hot || r.kind == RuleKind::masked) {
      r.state = RuleState::queued;  // insert again
      r.handle = hal::kNoFlow;
      r.attempts = 0;
      r.next_try_ns = now;
      r.initial_rate = st.meter.rate();
      ready_.push_back(id);
    } else {
      gone.push_back(id);
    }
  }
  for (uint64_t id : gone) {
    Rule& r = rules_.at(id);
    auto fit = flows_.find(r.flow);
    if (fit != flows_.end()) {
      fit->second.rules.erase(id);
      fit->second.keys.erase(r.key);
    }
    rules_.erase(id);
  }
  for (auto& [id, fr] : flows_) {
    if (fr.in_port != ph.id) continue;
    fr.where = datapath::FlowOffload::none;
    if (fr.rules.empty() && fr.dec.decision != Decision::none) {
      fr.reason = Reason::device_reset;
      fr.detail.clear();
    } else if (!fr.rules.empty()) {
      fr.reason = Reason::pending;
    }
    set_where(fr);
  }
}

void Shard::housekeeping(uint64_t now) {
  const OffloadConfig cfg = e_.cfg();
  PlacementPolicy pol;
  pol.evict_factor = cfg.evict_factor;
  pol.min_residency_ns = uint64_t{cfg.min_residency_ms} * 1'000'000ull;
  pol.idle_ns = uint64_t{cfg.idle_ms} * 1'000'000ull;
  // Idle demotion: a rule with no hardware hit for idle_ms.
  std::vector<uint64_t> idle;
  for (const auto& [port, list] : installed_)
    for (const RuleStat& r : list) {
      const Resident res{r.rule->id, r.meter.rate(), r.installed_ns, r.last_hit_ns};
      if (is_idle(res, now, pol)) idle.push_back(r.rule->id);
    }
  for (uint64_t id : idle) {
    Rule& r = rules_.at(id);
    pc(r.port).demoted[static_cast<int>(r.kind)]++;
    const FlowId f = r.flow;
    const datapath::MicroKey key = r.key;
    const bool exact = r.kind == RuleKind::exact;
    destroy_rule(r);
    rules_.erase(id);
    auto fit = flows_.find(f);
    if (fit == flows_.end()) continue;
    FlowRec& fr = fit->second;
    fr.rules.erase(id);
    if (exact) fr.keys.erase(key);
    if (fr.rules.empty()) {
      fr.reason = Reason::idle_demoted;
      fr.detail.clear();
      // A masked rule that was demoted comes back only when the flow is
      // re-decided (it is installed again by a modify or re-enable); exact
      // flows go back to sampling their microflows.
    }
    set_where(fr);
  }
  // Placement of refused exact candidates: per port, evict colder rules
  // when a waiting candidate beats them by the hysteresis factor.
  if (!waiting_.empty()) {
    std::map<uint16_t, bool> ports;
    for (const Waiting& w : waiting_) ports[static_cast<uint16_t>(w.key.in_port)] = true;
    for (auto& [port, unused] : ports) {
      PortHw* ph = e_.port_hw(port);
      if (ph) place_exact(*ph, now);
    }
  }
}

void Shard::place_exact(PortHw& ph, uint64_t now) {
  const OffloadConfig cfg = e_.cfg();
  PlacementPolicy pol;
  pol.evict_factor = cfg.evict_factor;
  pol.min_residency_ns = uint64_t{cfg.min_residency_ms} * 1'000'000ull;
  pol.idle_ns = uint64_t{cfg.idle_ms} * 1'000'000ull;
  std::vector<Resident> res;
  for (const RuleStat& r : installed_[ph.id])
    if (r.rule->kind == RuleKind::exact) res.push_back({r.rule->id, r.meter.rate(), r.installed_ns, r.last_hit_ns});
  // Candidates: the waiting ones of this port, their promote rate decayed
  // by the time they waited (they were hot then; are they still?).
  std::vector<Candidate> cands;
  std::vector<Waiting> mine;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->key.in_port != ph.id) {
      ++it;
      continue;
    }
    const double age = static_cast<double>(now - it->since_ns) / static_cast<double>(kRateHalfLifeNs);
    const double rate = it->rate * std::exp2(-age);
    if (rate < 1.0 || !flows_.count(it->flow)) {
      it = waiting_.erase(it);
      continue;
    }
    cands.push_back({mine.size(), rate});
    mine.push_back(*it);
    ++it;
  }
  if (cands.empty()) return;
  // The table is full (that is why they wait): capacity = what is resident.
  const PlacementPlan plan = plan_placement(res, cands, res.size(), now, pol);
  for (uint64_t id : plan.evict) {
    Rule& r = rules_.at(id);
    pc(r.port).evicted[static_cast<int>(r.kind)]++;
    const FlowId f = r.flow;
    const datapath::MicroKey key = r.key;
    destroy_rule(r);
    rules_.erase(id);
    auto fit = flows_.find(f);
    if (fit == flows_.end()) continue;
    fit->second.rules.erase(id);
    fit->second.keys.erase(key);
    if (fit->second.rules.empty()) {
      fit->second.reason = Reason::evicted;
      fit->second.detail.clear();
    }
    set_where(fit->second);
  }
  for (uint64_t ci : plan.insert) {
    const Waiting& w = mine[ci];
    std::erase_if(waiting_, [&w](const Waiting& x) { return x.flow == w.flow && x.key == w.key; });
    auto fit = flows_.find(w.flow);
    if (fit == flows_.end()) continue;
    FlowRec& fr = fit->second;
    if (fr.keys.count(w.key)) continue;
    auto pat = exact_pattern(w.key);
    if (!pat) continue;
    const bool partial = fr.dec.decision == Decision::partial;
    hal::FlowActions acts =
        partial ? partial_actions(fr.mark, -1, ph.n_rxq) : translate_actions(fr.actions, e_.caps_fn()).actions;
    queue_rule(fr, RuleKind::exact, partial, &w.key, *pat, acts, cands[ci].rate);
  }
}

void Shard::count_fail(uint16_t port, RuleKind k, Reason r, const std::string& detail) {
  PortCounters& c = pc(port);
  c.failed[static_cast<int>(k)]++;
  c.failed_by_reason[reason_string(r, detail)]++;
}

void Shard::add_stats(std::map<uint32_t, PortOffloadStats>& ports, OffloadStats& s) const {
  std::lock_guard lk(mu_);
  for (const auto& [port, c] : port_counters_) {
    PortOffloadStats& ps = ports[port];
    ps.rules_full += c.rules_full;
    ps.rules_partial += c.rules_partial;
    for (int k = 0; k < 2; ++k) {
      TableStats& t = ps.tables[k];
      t.rules += c.rules[k];
      t.inserted += c.inserted[k];
      t.deleted += c.deleted[k];
      t.failed += c.failed[k];
      t.evicted += c.evicted[k];
      t.demoted += c.demoted[k];
    }
    auto rit = rates_.find(port);
    if (rit != rates_.end()) {
      ps.tables[0].insert_rate += rit->second.ins_rate;
      ps.tables[0].delete_rate += rit->second.del_rate;
    }
    for (const auto& [reason, n] : c.failed_by_reason) {
      const auto& why = reason;  // clang 14 can't capture a structured binding
      auto it = std::find_if(ps.failed.begin(), ps.failed.end(), [&why](const FailedCount& f) { return f.reason == why; });
      if (it == ps.failed.end())
        ps.failed.push_back({why, n});
      else
        it->count += n;
    }
    ps.resets = std::max(ps.resets, c.resets);
    if (c.last_error_ns >= ps.last_error_ns && !c.last_error.empty()) {
      ps.last_error = c.last_error;
      ps.last_error_ns = c.last_error_ns;
    }
  }
  for (const auto& [id, r] : rules_) {
    if (r.state != RuleState::queued) continue;
    PortOffloadStats& ps = ports[r.port];
    ps.pending++;
    ps.tables[static_cast<int>(r.kind)].pending++;
  }
  for (const auto& [id, fr] : flows_) {
    if (fr.where == datapath::FlowOffload::full) s.flows_full++;
    if (fr.where == datapath::FlowOffload::partial) s.flows_partial++;
  }
}

std::optional<FlowState> Shard::flow_state(const FlowId& f) const {
  std::lock_guard lk(mu_);
  auto it = flows_.find(f);
  if (it == flows_.end()) return std::nullopt;
  const FlowRec& fr = it->second;
  FlowState s;
  s.offload = fr.where;
  s.decision = fr.dec.decision;
  s.reason = fr.reason;
  s.detail = fr.detail;
  s.mark = fr.mark;
  for (uint64_t id : fr.rules) {
    auto r = rules_.find(id);
    if (r != rules_.end() && r->second.state == RuleState::installed) s.hw_rules++;
  }
  return s;
}

void Shard::offloaded(std::vector<OffloadedFlow>& out) const {
  std::lock_guard lk(mu_);
  for (const auto& [id, fr] : flows_) {
    OffloadedFlow o;
    for (uint64_t rid : fr.rules) {
      auto r = rules_.find(rid);
      if (r != rules_.end() && r->second.state == RuleState::installed) o.hw_rules++;
    }
    if (!o.hw_rules) continue;
    o.pmd = id.pmd;
    o.ufid = id.ufid;
    o.offload = fr.where;
    o.hw_packets = fr.hw_packets;
    o.hw_bytes = fr.hw_bytes;
    out.push_back(o);
  }
}

// ----------------------------------------------------- Offload facade ---

Offload::Offload(datapath::Datapath& dp, OffloadConfig cfg) : dp_(dp), engine_(std::make_unique<Engine>(dp, cfg)) {}
Offload::~Offload() { stop(); }

Status Offload::start() { return engine_->start(); }
void Offload::stop() { engine_->stop(); }
bool Offload::running() const { return engine_->running(); }
const OffloadConfig& Offload::config() const { return engine_->cfg_ref(); }

Status Offload::set_enabled(bool on) {
  OffloadConfig c = engine_->cfg();
  if (c.enabled == on) return {};
  c.enabled = on;
  engine_->set_cfg(c);
  if (!engine_->running()) return {};
  if (on) {
    dp_.set_offload_enabled(true);
    if (!engine_->command_all(Engine::Cmd::enable, 5000))
      return error(Errc::unavailable, "the offload thread did not answer");
  } else {
    dp_.set_offload_enabled(false);
    if (!engine_->command_all(Engine::Cmd::disable, 10000))
      return error(Errc::unavailable, "the offload thread did not answer");
  }
  return {};
}

Status Offload::set_mode(Mode m) {
  OffloadConfig c = engine_->cfg();
  if (c.mode == m) return {};
  c.mode = m;
  engine_->set_cfg(c);
  if (engine_->running() && !engine_->command_all(Engine::Cmd::remode, 10000))
    return error(Errc::unavailable, "the offload thread did not answer");
  return {};
}

Status Offload::set_threads(unsigned n) {
  if (n < 1 || n > kMaxOffloadThreads)
    return invalid(std::to_string(n) + " is out of range 1.." + std::to_string(kMaxOffloadThreads));
  OffloadConfig c = engine_->cfg();
  if (c.threads == n) return {};
  if (!engine_->running()) {
    c.threads = n;
    engine_->set_cfg(c);
    return {};
  }
  // Restart: every rule is removed and the flows re-decided by the new shards.
  engine_->stop();
  c.threads = n;
  engine_->set_cfg(c);
  return engine_->start();
}

Status Offload::set_promote_packets(uint32_t n) {
  if (n < 1 || n > kMaxPromotePackets)
    return invalid(std::to_string(n) + " is out of range 1.." + std::to_string(kMaxPromotePackets));
  OffloadConfig c = engine_->cfg();
  c.promote_packets = n;
  engine_->set_cfg(c);
  dp_.set_offload_promote(c.promote_packets, c.promote_window_ns);
  return {};
}

Status Offload::set_promote_window_ms(uint32_t ms) {
  if (ms < 1 || ms > 3600u * 1000u)
    return invalid(std::to_string(ms) + " is out of range 1..3600000");
  OffloadConfig c = engine_->cfg();
  c.promote_window_ns = uint64_t{ms} * 1'000'000ull;
  engine_->set_cfg(c);
  dp_.set_offload_promote(c.promote_packets, c.promote_window_ns);
  return {};
}

Status Offload::set_idle_ms(uint32_t ms) {
  if (ms != 0 && (ms < 10 || ms > kMaxIdleMs))
    return invalid(std::to_string(ms) + " is out of range (0, or 10.." + std::to_string(kMaxIdleMs) + ")");
  OffloadConfig c = engine_->cfg();
  c.idle_ms = ms;
  engine_->set_cfg(c);
  return {};
}

Status Offload::sync_stats(bool full, uint64_t timeout_ms) { return engine_->sync_stats(full, timeout_ms); }
bool Offload::settle(uint64_t timeout_ms) { return engine_->settle(timeout_ms); }

OffloadStats Offload::stats() const {
  OffloadStats s;
  const OffloadConfig c = engine_->cfg();
  s.enabled = c.enabled;
  s.mode = c.mode;
  s.threads = c.threads;
  std::map<uint32_t, PortOffloadStats> ports;
  for (hal::Port* p : dp_.ports()) {
    PortOffloadStats& ps = ports[p->id()];
    ps.port = p->id();
    ps.name = p->name();
  }
  for (auto& [id, ps] : ports) {
    ps.tables.resize(2);
    ps.tables[0].table = "exact";
    ps.tables[1].table = "masked";
    if (PortHw* ph = engine_->port_hw(id)) {
      ps.has_engine = ph->fe != nullptr;
      ps.async_api = ph->async;
      ps.tables[0].capacity = ph->info.exact_capacity;
      ps.tables[1].capacity = ph->info.masked_capacity;
      std::lock_guard lk(ph->mu);
      ps.hw_uncounted_reset = ph->hw_lost_at_reset;
      ps.hw_uncounted_flow_gone = ph->hw_orphaned;
    }
  }
  for (auto& sh : engine_->shards()) sh->add_stats(ports, s);
  for (auto& [id, ps] : ports) {
    std::sort(ps.failed.begin(), ps.failed.end(), [](const FailedCount& a, const FailedCount& b) { return a.reason < b.reason; });
    s.ports.push_back(std::move(ps));
  }
  s.events = engine_->events.load(std::memory_order_relaxed);
  s.hot_microflows = engine_->hot.load(std::memory_order_relaxed);
  s.events_lost = dp_.offload_events_lost();
  s.sync_terse = engine_->sync_terse.load(std::memory_order_relaxed);
  s.sync_full = engine_->sync_full.load(std::memory_order_relaxed);
  s.last_sync_us = engine_->last_sync_us.load(std::memory_order_relaxed);
  return s;
}

FlowState Offload::flow_state(unsigned pmd, const datapath::Ufid& ufid) const {
  const OffloadConfig c = engine_->cfg();
  FlowState s;
  if (!c.enabled || !engine_->running()) {
    s.reason = Reason::disabled;
    return s;
  }
  if (auto st = engine_->shard_of({pmd, ufid}).flow_state({pmd, ufid})) return *st;
  s.reason = Reason::pending;
  return s;
}

std::vector<OffloadedFlow> Offload::offloaded_flows() const {
  std::vector<OffloadedFlow> out;
  if (!engine_->running()) return out;
  for (auto& sh : engine_->shards()) sh->offloaded(out);
  std::sort(out.begin(), out.end(), [](const OffloadedFlow& a, const OffloadedFlow& b) {
    return std::tie(a.pmd, a.ufid.hi, a.ufid.lo) < std::tie(b.pmd, b.ufid.hi, b.ufid.lo);
  });
  return out;
}

DecideResult Offload::explain(const flow::Match& match, std::span<const uint8_t> actions) const {
  const OffloadConfig c = engine_->cfg();
  if (!engine_->running()) engine_->discover_ports();
  DecideResult d = decide(match, actions, c.mode, engine_->caps_fn());
  if (!c.enabled) {
    d.decision = Decision::none;
    d.reason = Reason::disabled;
    d.detail.clear();
  }
  return d;
}

}  // namespace keel::offload

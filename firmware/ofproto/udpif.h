// Udpif — the slow path's threads between the datapath and the rules: the
// upcall handlers and the revalidators (Open vSwitch's ofproto-dpif-upcall).
//
// Thread counts (Open vSwitch's other_config:n-handler-threads and
// n-revalidator-threads; 0 = the default): handlers default to one per two
// PMDs (at least 1: host-sim's one PMD has one), revalidators to 1 + one
// per eight PMDs, counted when the threads start. Both change at run time
// (set_threads): the threads of the kind that changes are stopped (each
// finishes what it took) and the new count started; what is queued stays
// in the PMDs' rings and is taken by the new threads (upcall.h: handler h
// of n polls every queue q with q % n == h).
//
// Handlers: an upcall goes to the handler its key hash picks (upcall.h),
// so duplicates of one key on one PMD still meet on one record; two keys
// of one megaflow may reach two handlers, the ukey table decides which one
// installs (the other answers account_existing). Each handler: takes the PMDs' upcalls (datapath/upcall.h) — the parsed key and
// its hash travel with the packet, so nothing is parsed or hashed again
// (there is no code path that parses here: no re-parse counter either) —
// translates each (Translator: xlate through the packet's bridge), and
// answers with the megaflow to install in the PMD that missed (key & mask
// exactly as translation consulted, in_port and recirc_id exact) and the
// actions to run on the packet. At the flow limit it answers with the
// actions only (the packet is forwarded, nothing installed). A packet of a
// port in no bridge is dropped and its port gets a drop flow (in_port
// exact, no actions; counted in stats().no_bridge_drops), re-translated
// every round so that it goes once the port joins a bridge. Userspace()
// packets (the `controller` action) go to the ActionSink (the controller
// queue) and are consumed. Every installed megaflow gets a ukey: its key,
// mask, actions, the rules its translation ran and the generations it saw.
// Packets executed with an answer that no megaflow counted (the followers
// of a miss at the flow limit) are credited to the rules when the PMD hands
// the record back spent (Upcall::uncounted_packets).
//
// Revalidator: every revalidate_interval_ms a round over the terse dump
// (flow ids and statistics only, Datapath::flow_stats):
//   * statistics deltas are pushed to the rules of the flow's ukey;
//   * flows idle longer than max_idle_ms are deleted (and so are flows
//     beyond the flow limit, least recently used first);
//   * flows whose translation may have changed — a rule change in their
//     bridge or underlay bridge (Bridge::changes_since) that the overlap
//     rule (xlate_deps.h) says can reach one of their lookups, a port or
//     bond change (the change log's floor), the MAC table moved for a
//     NORMAL flow, tunnel state — are translated again from their ukey's
//     key: same actions and mask: kept; new actions, same mask: modified in
//     place; different mask or error: deleted (the next packet upcalls
//     again). Only those flows are re-translated; the others keep their
//     ukey untouched. The work follows the change, not the table: the
//     changes since a ukey's generation are fetched and prepared once per
//     (bridge, generation) per round, and each ukey is first checked
//     against its 16-byte DepsFilter in the hot part, so a flow-mod that
//     can't reach a flow costs it a few compares and no cold-part access.
//   * the round's counts (flows looked at, re-translated, modified,
//     deleted) are kept per round (UdpifStats::last_round) besides the
//     totals;
//   * the round's duration adapts the flow limit as Open vSwitch 3.1's
//     udpif_revalidator does (adapt_flow_limit: > 2 s: divided by the
//     whole seconds; > 1.3 s: 3/4; < 1 s with more than 2000 flows and the
//     limit below what this pace could dump in a second: +1000; never
//     below 1000 nor above the configured limit). Two differences, on
//     purpose: the adapted limit starts at the configured one (Open
//     vSwitch: at most 10000, +1000 a round), and `set flow-limit` sets
//     both (reset_flow_limit(): Open vSwitch's other_config:flow-limit and
//     upcall/set-flow-limit, which the benchmarks set together), so that
//     `set flow-limit 1000000` admits a million flows at once; and above
//     the limit the least recently used flows go down to it (Open vSwitch
//     deletes the flows idle for 100 ms, all of them above twice the
//     limit).
// Rule changes therefore reach forwarding within one round.
//
// Megaflows can be turned off (Open vSwitch's upcall/disable-megaflows, for
// the flow-setup and revalidate-100k benchmarks): every installed flow then
// matches the missed packet's whole key — every word its miniflow has, all
// bits — plus whatever translation consulted. Switching flushes the flows
// this Udpif installed at the next round. The setting belongs to the
// Datapath (set_megaflows_enabled(dp, on)), because the console applies the
// boot config before System::start() creates the Udpif.
//
// Offline runs (Datapath::offline(), datapath/pmd.h): one handler thread
// works, whatever the setting (an offline PMD submits to queue 0 alone,
// which handler 0 alone polls; the others idle), so that it sees each
// PMD's records in the order they were sent; it answers in
// input order — records marked `derived` (sent up while an earlier answer
// was executed) before those queued ahead of them; after answering a miss
// whose actions recirculate it takes nothing more until the PMD has
// executed that answer (its recirculated packets come back derived); and a
// translation that changed the MAC table (a new or moved MAC) waits until
// every earlier answer is installed, then runs a revalidation round on the
// handler thread before answering, so no stale NORMAL megaflow serves a
// later packet (stats().offline_revalidations).
//
// Thread-safety: start()/stop(), set_threads() and the setters are
// control-thread calls. The threads share the ukey table, sharded by ufid,
// each shard under its own mutex that no PMD takes (a handler holds the
// shard of the flow it installs; a revalidator its shards, per chunk of
// flows; stats() reads each shard from the control thread the same way).
// A revalidator re-translates the ukeys of its share that need it after
// its pass over the shard, outside the lock, through pointers to them: a
// ukey node never moves (core/node_map.h), handlers only insert new
// ukeys and never touch an existing one, and only the revalidator whose
// share holds the shard changes or erases its ukeys during the round
// (forget_pmd takes round_mu_, so never mid-round). mu_ guards the revalidators' statistics and the round sequence numbers.
// A round's shares are handed out and collected under share_mu_ (the
// leader waits for every share before it merges). Translation runs on the handler/revalidator
// threads as Rcu readers (one slot per thread index, registered once and
// reused). Each handler counts in its own HandlerCounters (one writer,
// relaxed atomics; stats() sums them). The per-PMD OfflineQueue is handler
// 0's alone (offline runs have no other handler). The revalidators' thread
// ids are relaxed atomics each stores when it starts (stats() reads them).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/node_map.h"
#include "core/status.h"
#include "datapath/datapath.h"
#include "datapath/rcu.h"
#include "datapath/upcall.h"
#include "flow/dp_actions.h"
#include "flow/flow_key.h"
#include "flow/packed_match.h"
#include "ofproto/rule.h"
#include "ofproto/xlate_deps.h"

namespace keel::ofproto {

class Bridge;
class Bond;
struct BondRecircLoads;

// A flow whose bond member translation chose (balance-slb; balance-tcp
// without lb_output or recirculation): the revalidator adds the flow's new
// bytes to the bond's bucket loads (Bond::account, OVS's XC_BOND entry).
struct BondAccounting {
  std::shared_ptr<Bond> bond;
  flow::FlowKey flow{};
  uint16_t vlan = 0;
  // Set for a recirculation second pass: its bytes go to this bucket.
  std::shared_ptr<BondRecircLoads> loads;
  unsigned bucket = 0;
};

// What translation gives the slow path for one flow.
struct Translation {
  Bridge* bridge = nullptr;              // null: the port belongs to no bridge (a drop flow on in_port)
  flow::DpActions actions;               // empty: drop
  flow::FlowKey wc{};                    // the bits translation consulted
  std::vector<const OfRule*> rules;      // rules whose actions ran (for statistics)
  uint64_t rules_gen = 0;                // bridge->rules_generation() it saw
  bool uses_normal = false;
  uint64_t mac_gen = 0;                  // bridge->mac().generation() it saw
  // Every rule-table lookup, in any bridge: which rule changes can alter
  // this translation (xlate_deps.h). Empty: none can (a stand-in
  // translator that reads no table); set_all(): every one can.
  XlateDeps deps;
  bool cacheable = true;                 // false: execute only, never install
  bool mac_changed = false;              // NORMAL learned a new MAC or a move
  std::vector<BondAccounting> bond_accounts;  // bonds whose loads the flow's bytes count in
  // Tunnels. A combined tunnel output was also translated in `underlay`
  // (its rules and, when NORMAL ran there, MAC table generations as seen);
  // `tunnel`: the translation read tunnel state (ports, routes, neighbours,
  // addresses) at generation tnl_gen (UdpifKnobs::tunnel_generation), and
  // is re-translated when that moves. tnl_no_port: a packet from a tunnel
  // vport that no tunnel port takes (bridge null: a drop flow, counted in
  // stats().tnl_no_port instead of no_bridge_drops).
  Bridge* underlay = nullptr;
  uint64_t underlay_rules_gen = 0, underlay_mac_gen = 0;
  bool underlay_uses_normal = false;
  bool underlay_many = false;  // a second underlay too: re-translated every round (see xlate.h)
  bool tunnel = false;
  uint64_t tnl_gen = 0;
  bool tnl_no_port = false;
  // Why what `actions` send nowhere is dropped (a datapath::DropReason; 0:
  // the rules drop it): given to the megaflow and the answer (show drops).
  uint8_t drop_reason = 0;
};

// Translates `flow` (in_port = datapath port). may_learn: NORMAL may learn
// (false for revalidation). The caller is an Rcu reader.
using Translator = std::function<Status(const flow::FlowKey& flow, bool may_learn, Translation& out)>;
// Receives a userspace() packet (the frame and the action's userdata);
// returns 0 when it took it, else the datapath::DropReason it was dropped
// for (show drops: a packet-in the controller queue had no room for).
using ActionSink = std::function<uint8_t(const datapath::Upcall& u)>;
// Knobs read each round (the Ofproto's).
struct UdpifKnobs {
  std::function<uint32_t()> flow_limit, max_idle_ms, revalidate_interval_ms;
  // The tunnel state's generation (null: none; see Translation::tunnel).
  std::function<uint64_t()> tunnel_generation;
};

struct UdpifStats {
  uint64_t upcalls = 0, action_upcalls = 0, installs = 0, install_failed = 0, limit_hits = 0;
  uint64_t translate_errors = 0;
  // Packets of ports in no bridge, dropped: the upcalled ones and those the
  // port's drop flow (in_port exact, no actions) counted since.
  uint64_t no_bridge_drops = 0;
  // Packets from a tunnel vport that no tunnel port matched (unknown VNI,
  // remote or key), dropped: upcalled ones and their drop flows' since.
  uint64_t tnl_no_port = 0;
  uint64_t offline_revalidations = 0;  // offline: rounds run because a translation moved the MAC table
  uint64_t rounds = 0, revalidated = 0, modified = 0, deleted_idle = 0, deleted_changed = 0,
           deleted_limit = 0;
  // The last round alone: the datapath flows it dumped, the ukeys it looked
  // at (ours in the dump), the ukeys whose bridge's rules had changed since
  // their translation and so were checked against the changes (`checked`;
  // `checked_deep`: of those, how many the hot filter couldn't clear, so
  // the lookups were read), re-translated, modified and deleted (idle,
  // changed, over the limit), and how long it took.
  struct Round {
    uint64_t dumped = 0, looked_at = 0, checked = 0, checked_deep = 0, revalidated = 0, modified = 0,
             deleted_idle = 0, deleted_changed = 0, deleted_limit = 0, duration_us = 0;
    uint64_t deleted() const { return deleted_idle + deleted_changed + deleted_limit; }
  } last_round;
  uint64_t last_dump_ms = 0, avg_dump_ms = 0, max_dump_ms = 0, last_round_us = 0;
  // As Open vSwitch's upcall/show: the last round's duration, at least 1 ms
  // (0 before the first round); the datapath flows each round started
  // with: the most, and a running average (avg = (avg + n) / 2 per round,
  // integer, as OVS's revalidator leader keeps it).
  uint64_t dump_duration_ms = 0;
  uint64_t max_n_flows = 0, avg_n_flows = 0;
  // Per revalidator running: its Linux thread id (what `top -H` shows; 0
  // until it ran) and the ukeys of its share: upcall-show's per-revalidator
  // line, where Open vSwitch prints its revalidator's thread number.
  struct Revalidator {
    int tid = 0;
    size_t keys = 0;
  };
  std::vector<Revalidator> revalidators;
  std::vector<uint64_t> handler_upcalls;  // misses each running handler answered (index: handler)
  int revalidator_tid = 0;  // the first one's (the leader)
  unsigned handlers = 0;    // handler threads running
  // hal::now_ns() of the first and the latest miss upcall answered (0: none):
  // the handler's busy span, for upcalls per second over a burst of misses.
  uint64_t first_upcall_ns = 0, last_upcall_ns = 0;
  uint32_t flow_limit = 0;  // the adapted limit
  size_t flows = 0, ukeys = 0;
};

class Udpif {
 public:
  Udpif(datapath::Datapath& dp, datapath::Rcu& rcu, Translator translate, ActionSink sink, UdpifKnobs knobs);
  ~Udpif();
  Udpif(const Udpif&) = delete;
  Udpif& operator=(const Udpif&) = delete;

  // After the datapath started: registers the threads' Rcu slots, starts
  // them, and turns upcalls on. stop() turns upcalls off, joins, and
  // answers what is queued with "drop".
  void start();
  void stop();
  bool running() const { return running_; }

  static constexpr unsigned kMaxHandlers = datapath::kMaxUpcallQueues;
  static constexpr unsigned kMaxRevalidators = 16;
  // The thread counts for the Udpif of `dp` (0: the default, see the top),
  // now and for one created later; a running Udpif restarts the threads
  // whose count changes. Out of range: an error, nothing changed.
  static Status set_threads(const datapath::Datapath& dp, unsigned n_handlers, unsigned n_revalidators);
  // As configured (0: default) for `dp`.
  static unsigned configured_handlers(const datapath::Datapath& dp);
  static unsigned configured_revalidators(const datapath::Datapath& dp);
  // The defaults for a datapath with n_pmds PMDs (see the top).
  static unsigned default_handlers(size_t n_pmds) { return std::max<size_t>(1, std::min<size_t>(kMaxHandlers, n_pmds / 2)); }
  static unsigned default_revalidators(size_t n_pmds) { return std::min<size_t>(kMaxRevalidators, 1 + n_pmds / 8); }
  // The threads running now (an offline run: handler 0 alone works).
  unsigned n_handlers() const { return n_handlers_run_.load(std::memory_order_relaxed); }
  unsigned n_revalidators() const { return n_revalidators_run_.load(std::memory_order_relaxed); }

  // Runs one revalidation round now on the caller's thread (tests, the
  // `revalidate` command); `terse` false reads full flow dumps instead
  // (the benchmark's comparison). Returns the round's duration in us.
  // With the threads running, the revalidator thread runs the round (the
  // first one that starts after this call, full if asked) and this waits.
  uint64_t revalidate_now(bool terse = true);
  // Megaflows on (default) or off for the Udpif of `dp`, now and for one
  // created later. Switching makes the next round delete the flows this
  // Udpif installed (as Open vSwitch flushes on upcall/enable-megaflows).
  static void set_megaflows_enabled(const datapath::Datapath& dp, bool on);
  static bool megaflows_enabled(const datapath::Datapath& dp);
  // Waits until every record answered so far came back spent and was
  // freed (so what its packets owe the rules is credited: see above); with
  // the PMDs drained (Datapath::wait_drained) that is soon. False: not
  // within timeout_ms, or the threads are not running.
  bool wait_spent(uint64_t timeout_ms);
  // Wakes the revalidator for a round as soon as possible (after a rule change).
  void kick();
  // The configured flow limit changed (`set flow-limit`): the adapted limit
  // starts again from it, as Open vSwitch's upcall/set-flow-limit sets its
  // udpif's flow_limit (and the next round adapts from there).
  void reset_flow_limit();
  // Open vSwitch 3.1's rule (udpif_revalidator): the flow limit after a
  // round that took `duration_ms` (at least 1) over `n_flows` flows.
  static uint32_t adapt_flow_limit(uint32_t limit, uint32_t configured, uint64_t duration_ms, uint64_t n_flows);
  // The datapath removed or replaced PMD `pmd` (Datapath::set_pmd_cores at
  // run time): its ukeys go (its flows went with it). Only while stopped.
  void forget_pmd(unsigned pmd);
  // Applies the configured thread counts (set_threads) to the running threads.
  void apply_threads(unsigned n_handlers, unsigned n_revalidators);

  UdpifStats stats() const;

 private:
  // A ukey is split so that a terse round touches little memory: the hot
  // part (what every round reads and writes, ~130 bytes) lives in the hash
  // node, so 100k nodes are ~13 MB of slab-consecutive memory; the cold part
  // (key & mask packed, actions, rules: ~450 bytes) only when a flow is
  // re-translated, deleted, or has more than one rule. Both come from slab
  // pools (core/slab_pool.h): a storm of new flows takes no malloc for them.
  struct UkeyCold {
    flow::PackedMatch match;  // key & mask as installed
    flow::DpActions actions;
    std::vector<const OfRule*> rules;
    XlateDeps deps;  // the translation's lookups (xlate_deps.h)
    std::vector<BondAccounting> bond_accounts;
    // Storage from a slab pool (core/slab_pool.h, udpif.cpp): a storm of
    // new flows takes no malloc and few page faults for them.
    static void* operator new(std::size_t n);
    static void operator delete(void* p) noexcept;
  };
  struct Ukey {
    // What every round reads and writes, together (56 bytes: one cache
    // line of the node, or two): the counters pushed so far, the round
    // that last saw the flow, and what decides whether to re-translate —
    // after a flow-mod each ukey checks its DepsFilter (xlate_deps.h), the
    // hot summary of cold->deps, and moves rules_gen; its cold part stays
    // untouched.
    uint64_t packets = 0, bytes = 0;  // pushed to rules so far
    uint64_t seen_round = 0;  // last round whose dump had the flow (0: none yet)
    uint64_t seq = 0;  // its shard's `inserted` count once it was inserted
    uint64_t rules_gen = 0;
    Bridge* bridge = nullptr;
    DepsFilter deps_filter;
    uint64_t created_ns = 0;
    Bridge* underlay = nullptr;  // see Translation
    const OfRule* rule1 = nullptr;  // the only rule, when cold->rules has exactly one
    std::unique_ptr<UkeyCold> cold;
    unsigned pmd = 0;
    bool uses_normal = false;
    bool exact = false;  // installed with megaflows off (mask: the whole key)
    bool bond_accounts = false;  // cold->bond_accounts is not empty
    bool underlay_uses_normal = false, tunnel = false, tnl_no_port = false;
    bool underlay_many = false;  // a second underlay too: re-translated every round
    uint64_t mac_gen = 0;
    uint64_t underlay_rules_gen = 0, underlay_mac_gen = 0, tnl_gen = 0;
  };
  struct UkeyId {
    unsigned pmd;
    datapath::Ufid ufid;
    bool operator==(const UkeyId&) const = default;
  };
  // The low bits index the shard's slot table (core/node_map.h): hi's low
  // half is a hash of its own, already through hash_finish's mixing.
  struct UkeyIdHash {
    size_t operator()(const UkeyId& k) const { return k.ufid.hi ^ (k.ufid.lo * 31) ^ k.pmd; }
  };

  // Ukeys are sharded by ufid (Open vSwitch's umaps): a handler locks the
  // shard of the flow it installs, revalidator i of M owns the shards s
  // with s % M == i (its share of every round: upcall-show's "keys").
  static constexpr unsigned kUkeyShards = 64;
  static_assert(kUkeyShards >= kMaxRevalidators, "every revalidator owns a shard");
  struct alignas(64) UkeyShard {
    std::mutex mu;  // map and inserted (handlers, revalidators, control; never a PMD)
    uint64_t inserted = 0;  // ukeys a handler inserted so far (a round's sweep test, udpif.cpp)
    // Slots for the configured flow limit (up to kUkeyReserveMax), at
    // most half full (size_shards): a new flow's look-up reads one slot, and
    // a storm never rehashes a shard (core/node_map.h: the chain walk of
    // std::unordered_map was 33-38 % of the handler's time at 1M flows).
    // Nodes from a slab pool: a storm of new flows takes no malloc for them.
    NodeMap<UkeyId, Ukey, UkeyIdHash> map;
  };
  static constexpr uint32_t kUkeyReserveMax = 1'000'000;
  // Grows every shard's slot table to hold `limit` ukeys in all (at most
  // kUkeyReserveMax), never shrinks it: 32 bytes a flow of the limit,
  // allocated when the limit is set.
  void size_shards(uint32_t limit);
  static unsigned shard_of(const datapath::Ufid& u) { return static_cast<unsigned>(u.lo >> 32) % kUkeyShards; }

  // One handler's counters: written by that handler thread only (relaxed
  // load + store), read by stats().
  struct alignas(64) HandlerCounters {
    std::atomic<uint64_t> upcalls{0}, action_upcalls{0}, installs{0}, install_failed{0}, limit_hits{0},
        translate_errors{0}, no_bridge_drops{0}, offline_revalidations{0}, first_ns{0}, last_ns{0}, tnl_no_port{0};
  };
  static void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  // Per PMD, offline runs only (handler 0's; sized by start()): records
  // taken from the queue and not answered yet, in the order they are to be
  // answered, the recirculating answer to wait for, and answers given and
  // come back spent.
  struct OfflineQueue {
    std::deque<datapath::Upcall*> backlog;
    datapath::Upcall* wait_for = nullptr;
    uint64_t answered = 0, spent = 0;
  };
  void start_handlers(unsigned n);
  void stop_handlers();
  void start_revalidators(unsigned n);
  void stop_revalidators();
  unsigned handler_slot(unsigned i);
  unsigned revalidator_slot(unsigned i);
  // What a translation says about the ukey's rules and generations, into k
  // (an install and a re-translation alike); t.rules is moved.
  static void adopt(Ukey& k, Translation& t);
  void handler_main(unsigned h, unsigned n, unsigned rcu_slot);
  bool handle_batch(unsigned h, unsigned n, HandlerCounters& hc);
  bool recycle_spent(datapath::UpcallChannel& ch, unsigned h, unsigned n, OfflineQueue* oq, HandlerCounters& hc);
  void credit_uncounted(const datapath::Upcall& u);
  void answer(datapath::UpcallChannel& ch, datapath::Upcall* u, OfflineQueue* oq, HandlerCounters& hc);
  static bool has_recirc(std::span<const uint8_t> actions);
  void revalidator_main(unsigned i, unsigned n, uint64_t seen_gen, unsigned rcu_slot);
  uint64_t round(bool terse, bool parallel);
  // One round as the revalidators share it: the dump (filed by shard), and
  // what each revalidator decided on its share.
  struct RoundCtx;
  struct Share;
  void run_share(const RoundCtx& c, unsigned i, unsigned n, Share& out);
  // Whether the rule changes in `br` since generation `since` (the ukey's
  // for that bridge) may change the ukey's translation (the overlap rule,
  // xlate_deps.h); when not, `since` moves up to what was checked. `cache`
  // holds the prepared change list per (bridge, generation) for the share;
  // `deep` counts the ukeys whose lookups had to be read.
  struct ChangeCache;
  static bool rules_may_matter(Ukey& k, const Bridge& br, uint64_t& since, ChangeCache& cache, uint64_t& deep);

  datapath::Datapath& dp_;
  datapath::Rcu& rcu_;
  Translator translate_;
  ActionSink sink_;
  UdpifKnobs knobs_;
  // Rcu slots by thread index, registered on first use and reused (the Rcu
  // has a fixed number): control thread.
  std::vector<unsigned> handler_slots_, revalidator_slots_;
  bool running_ = false;
  unsigned want_handlers_ = 0, want_revalidators_ = 0;  // configured (0: default)

  std::vector<OfflineQueue> offline_;  // handler 0 only (offline runs)
  std::unique_ptr<HandlerCounters[]> hcounters_ = std::make_unique<HandlerCounters[]>(kMaxHandlers);
  // Records answered and recycled (written by the handlers; wait_spent reads).
  std::atomic<uint64_t> answered_total_{0}, recycled_total_{0};
  std::vector<std::thread> handlers_, revalidators_;
  std::atomic<unsigned> n_handlers_run_{0}, n_revalidators_run_{0};
  std::atomic<bool> handlers_quit_{false}, revalidators_quit_{false};
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool kicked_ = false;
  // The leader (revalidator 0) hands the others their share of a round:
  // share_gen_ counts rounds handed out, shares_left_ those not done yet.
  std::mutex share_mu_;
  std::condition_variable share_cv_, shares_done_cv_;
  uint64_t share_gen_ = 0;
  unsigned shares_left_ = 0;
  const RoundCtx* share_ctx_ = nullptr;  // under share_mu_
  std::vector<std::unique_ptr<Share>> shares_;  // one per revalidator (kMaxRevalidators)

  std::unique_ptr<UkeyShard[]> shards_ = std::make_unique<UkeyShard[]>(kUkeyShards);
  std::atomic<size_t> n_ukeys_{0};
  std::array<std::atomic<int>, kMaxRevalidators> revalidator_tids_{};

  mutable std::mutex mu_;  // stats_ and the round sequence numbers below
  UdpifStats stats_;
  std::atomic<uint32_t> adapted_limit_{0};
  std::mutex round_mu_;  // one round at a time
  std::unique_ptr<RoundCtx> round_ctx_;  // under round_mu_: the round's, reused (udpif.cpp)
  uint64_t round_seq_ = 0;  // under round_mu_
  // Megaflows setting (mirrors the per-Datapath one) and the flush it asks for.
  std::atomic<bool> megaflows_{true};
  std::atomic<bool> flush_{false};
  std::function<void(bool)> on_megaflows_;  // registered per Datapath (udpif.cpp)
  // revalidate_now() with the threads running (under mu_): the round with
  // sequence number want_seq_ runs full if want_full_, and reports want_us_.
  uint64_t started_seq_ = 0, want_seq_ = 0, done_seq_ = 0, want_us_ = 0;
  bool want_full_ = false;
};

}  // namespace keel::ofproto

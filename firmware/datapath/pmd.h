// Pmd — one poll-mode thread: polls its rx queues in bursts of up to 32 and
// runs each burst to completion:
//
//   rx -> runts (< 14 bytes) dropped and counted, as Open vSwitch's datapath
//      -> [xconnect? -> tx]                      port cross-connect (no lookup)
//      -> parse (key + hash) -> EMC -> SMC -> dpcls -> execute actions -> tx
//                                                  miss -> upcall (upcall.h):
//                                                  the slow path translates and
//                                                  answers with a megaflow to
//                                                  install and actions to run;
//                                                  live: no record free -> lost
//                                                  (the last kUpcallControlReserve
//                                                  only for LACP frames, upcall.h);
//                                                  offline: the input waits
//      recirc(id) re-enters the pipeline with the new recirc_id, at most
//      kMaxRecircDepth times per packet; tnl_pop(N) re-enters it with
//      in_port N, recirc_id 0 and the tunnel metadata. The recirculation
//      queue is split into runs of one in_port (first-seen order) because a
//      pass looks up one port's dpcls; packets carrying a tunnel are parsed
//      with a PacketMetadata (recirc_md_, one slice per depth, PMD-owned),
//      so words 0-7 (+ GENEVE options) of their key hold it.
//
// Packets every iteration; between bursts the PMD applies flow requests
// posted to its ring (install, remove, modify: it is the only writer of its
// flow table, EMC and SMC; bond_set, bond_del: its lb_output tables,
// bond_table.h), sends the control-plane frames posted to its tx ring
// (post_tx(): LACPDUs, learning packets), and every kHousekeepingEvery iterations it
// re-ranks its dpcls subtables, sweeps its EMC for dead flows, notes which
// CPU it runs on (display_core()) and closes the load interval when due.
//
// Reload (Open vSwitch's PMD reload): the control thread changes a PMD's
// poll list, the datapath's tx queue table or a port's queue count only
// while the PMD is parked (pause()/resume()): at the start of an iteration
// the PMD sees the request, publishes `parked`, and until resumed only
// applies flow requests, sleeping 50 us between looks; the time parked is
// idle. Nothing received is held across it: every burst is processed and
// its outputs flushed within its iteration. A PMD with no rx queue (or
// whose polling is held, hold_rx()) sleeps 1 ms per iteration instead of
// spinning, its housekeeping runs every iteration, and all its cycles are
// idle.
//
// Rx queue load (pmd-rxq-show, and what cycle-based rx queue assignment
// weighs), as Open vSwitch 3.1's dpif-netdev measures it: each poll of a
// queue that returns packets adds the cycles from the end of the previous
// non-empty burst of the same iteration (or the iteration's first rx call)
// to the end of its own burst's processing (a cycle-counter read before
// the queues are polled and one after each non-empty burst, none per
// packet: so the empty polls just before a busy queue's count for it, tens
// of cycles against the thousands of a burst; offline, a poll counts for
// the input it read) to the queue's current interval. Every kPmdIntervalNs (PMD_INTERVAL_LEN) the
// housekeeping closes the interval (or, after end_interval(), the next
// iteration): each queue's cycles go into the queue's own ring of
// kPmdIntervalMax (PMD_INTERVAL_MAX) slots (RxqLoad: it moves with the
// queue to another PMD, as Open vSwitch keeps it on the rxq), the PMD's
// busy cycles of the interval into its ring, and the interval's length in cycles (wall
// clock, sleeping included) is kept — from the second close on, as Open
// vSwitch (the first one has no start mark). A window of N intervals is
// then the newest N slots against N times the last length; usage = a
// queue's cycles over that, overhead = the busy cycles no queue was
// charged with (the upcall answers executed between polls, flow requests,
// housekeeping, empty polls in busy iterations). See load().
//
// Drop accounting (drop_stats.h): every packet the PMD releases goes
// through its DropStats with a DropReason (runts, lost upcalls, recirc too
// deep, the executor's drops, answers without actions, what a stop
// discards), and each received packet's fate is settled once, by the
// instance holding its token: the executor for what it runs, the PMD for
// what it drops itself, cross-connects and slow-path consumption. The
// token going into an upcall record or the offline held list (and back)
// moves the in-flight gauge.
//
// Thread-safety: the PMD thread is the only writer of its caches, flow
// table and counters (its DropStats too; Datapath::drop_pending_upcalls
// writes it on the control thread once the PMD is stopped). Counters are relaxed atomics written by the PMD alone
// (load + store, no locked instruction), a few times per burst, and read by
// anyone (PmdPerfCounters too); clear_counters() and the baselines it keeps
// are the control thread's, and so is counters_since_ns() (a relaxed atomic
// the control thread stores at start() and clear_counters()). Other
// threads talk to it only through post()/request() (a bounded MPMC ring;
// the poster waits for `done`, which the PMD sets with a release store
// after filling `result`, a FlowResult code, and for dpcls_info the
// poster's own array: the PMD allocates and formats nothing). Before
// start() and after stop(), request() applies on the caller's thread.
// set_emc_insert_inv_prob / set_smc_enable: relaxed atomics, any thread (the
// PMD reads the SMC flag per burst and the EMC probability at housekeeping);
// end_interval(): any thread (a relaxed counter each iteration compares).
// add_rx_queue(), set_offline(): the control thread, before start();
// set_rx_queues(): the control thread, before start() or while parked
// (pause() returns after an acquire load of the PMD's release store of
// `parked`; resume()'s release store of `pause_` is acquired by the PMD
// before it polls again: the new list is seen whole). rx_queues() is read
// by the control thread and the PMD thread only. hold_rx(): a relaxed
// atomic, any thread. isolated(): control thread.
// A queue's load history is its RxqLoad (the Datapath's, above): the PMD
// polling it adds to `curr` and closes its slots; it changes PMD only while
// both PMDs are parked.
// The offline state (held packets, records up, marks) is the PMD thread's
// alone; held() is its count published with a release store at the end of
// each iteration, before `iterations` (wait_drained reads both).
// The load figures are written by the PMD thread alone at an interval's
// close — the slots first, then the interval count with a release store —
// and read by anyone after an acquire load of the count; a reader racing a
// close may see the oldest slot of a full window half rewritten (as Open
// vSwitch's readers). The CPU last seen (display_core()) is one relaxed
// atomic int the PMD thread stores at start and at housekeeping.
// Tx queues (send()): a port with at least as many tx queues as PMDs gives
// each PMD its own (no lock, Datapath::txq()). Otherwise the PMD steers
// itself onto a shared queue as Open vSwitch's XPS does (dynamic txqs): the
// first burst to a port, or the first after kXpsTimeoutNs without one,
// takes the queue fewest PMDs hold (Datapath::txq_users, a relaxed atomic
// count per queue; ties: the lowest), and the PMD sticks to it while it
// keeps sending; a PMD that stops releases what it holds. The queue's
// spinlock is taken per burst slice (never per packet): a try first, and
// when another PMD holds it the wait is counted (PmdTxCounters: bursts on a
// shared queue, waits, the cycles spent waiting; one cycle-counter read
// before and after a wait, none otherwise). The steering state is the PMD
// thread's alone; the per-queue counts are a hint (relaxed), read by the
// other PMDs when they choose. The datapath's VLAN limit is read with one relaxed atomic load
// per burst. Runts are dropped with a length check per packet and counted
// once per burst, no lock. The PMD is no Rcu reader (rcu.h): the megaflows
// it reaches are freed only after it handed them over (flow_table.h).
// Between bursts nothing is allocated: install answers allocate only in the
// dpcls, nothrow (dpcls.h), and failures are codes plus counters
// (install_failed, request_failed).
// Bond tables (bond_table.h): the PMD's PmdBondSlots, one per bond id, are
// written by the PMD thread alone (bond_set/bond_del requests, between
// bursts; on the caller's thread when the PMD is not running) and read by
// its executor; the tables and counter blocks a request swaps out go back
// in the request for the poster to free. Other threads read the slots
// (bonds()) only under the Datapath's bond mutex (datapath.h). The
// counters they point to are single-writer relaxed atomics.
// Control-plane tx (post_tx()): a bounded MPMC ring of (port, packet) that
// any thread pushes to and the PMD pops between bursts, sending each on
// the port with its own tx queue (as its outputs: XPS and the shared-queue
// lock included); a full ring refuses (the caller keeps the packet and
// counts it, ctl_tx_full: a relaxed fetch_add by the poster). stop()
// releases what is left after the thread has joined.
//
// Hardware offload (offload_hooks.h; while Datapath::offload_enabled(),
// one relaxed load per burst, with the promotion thresholds): when it
// applies an install, remove or modify (request or upcall answer) the PMD
// pushes an OffloadEvent to its event ring, and for flows whose hw_want the
// engine set (one relaxed load per group of a burst's packets of a flow) it
// counts depth-0 packets per microflow in its sampler (kHotSamples entries,
// kHotWays-way set-associative by a hash of the MicroKey words; a key-less packet of the
// simple-match path is parsed for it) and pushes a HotMicroflow once when
// one reaches the threshold within the window (again only after a further
// window). Both rings are bounded MPMC rings the PMD alone pushes to and
// the engine alone pops (Datapath::offload_poll); a full ring drops the
// item and counts it (offload_events_lost / offload_hot_lost). The mark
// table (partial offload) and the sampler are the PMD thread's alone: the
// mark table changes only through set_mark/clear_mark requests, and when a
// flow is removed (its entry goes before its `removed` event is posted).
// A live burst from a port (offline runs read no marks) is checked for marks
// only while the table holds any (one branch per burst otherwise): a packet whose mark names a live flow
// of this PMD with that in_port executes the flow's actions with no
// EMC/SMC/dpcls lookup (outputs-only flows: no parse either; others are
// parsed for the executor), counted in phwol_hits, before the rest of the
// burst (so the one burst in which a flow's rule goes in may reorder that
// flow's packets); the others (phwol_misses) are classified as usual.
// Offline mode (datapath.h; set before start(), then fixed, on every PMD):
// this PMD polls its rx queues — every input with one PMD; with several, a
// multi-queue replay's queues are spread over the PMDs (datapath.h) — each
// a queue of a pcap replay, merged by record timestamp: each poll reads
// from the queue whose next record is oldest only the records older than
// every other queue's next one (ties: the lower port, then queue, first),
// two virtual calls per queue per burst. It asks a port only about its own
// queues (hal::Port::next_rx_timestamp_ns(q)), so PMDs reading queues of
// one input never share a cursor; all the state below is per PMD (records
// up, held packets, marks), and so is the order it keeps: with several
// PMDs, per output port, each PMD's packets are in its inputs' order
// (hence per-flow order), not the PMDs' packets among each other.
// Processing keeps the input order:
//   * a run of consecutive packets with the same megaflow executes at once,
//     with its recirculations and slow-path requests, before the next run
//     (live mode groups a burst's packets by megaflow instead);
//   * misses go up one after the other without waiting (the handler
//     translates them in order and the answers come back in order); a hit
//     read behind a miss still up waits, with everything after it, until
//     nothing is up, and is looked up again then (the miss's translation
//     may have changed what it hits: a new megaflow, or MAC learning that
//     the handler's revalidation has applied to the installed ones — as
//     Open vSwitch with revalidator/purge between packets). Packets of an
//     answer being executed (recirculation, userspace()) are earlier than
//     anything else up and can't wait: once one of them went up the others
//     go up too, hits included, marked `derived`, and the handler takes
//     them first;
//   * when no upcall record is free (64 are kept for derived packets), the
//     rest of the burst is held the same way until one is, and no input is
//     read while fewer than a burst's worth are left (userspace() packets
//     take records too): backpressure, counted in `backpressure`. Held
//     packets are kept parsed, in order; no input is read while any are
//     held. `lost` stays 0 unless derived packets find no record (the
//     reserve exhausted).
// Costs nothing in live mode but a predictable branch per burst.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "core/lazy_array.h"
#include "core/ring.h"
#include "datapath/drop_stats.h"
#include "datapath/emc.h"
#include "datapath/execute.h"
#include "datapath/flow_table.h"
#include "datapath/offload_hooks.h"
#include "datapath/smc.h"
#include "datapath/upcall.h"
#include "keel/hal/backend.h"
#include "keel/hal/port.h"
#include "packet/parser.h"

namespace keel::datapath {

class Datapath;

inline constexpr unsigned kMaxRecircDepth = 6;  // as Open vSwitch's MAX_RECIRC_DEPTH
// Fewest upcall records a PMD has (an offline run keeps a window of them).
inline constexpr uint32_t kMinUpcallRecords = 128;
// Answers a PMD executes per iteration at most (a storm's answers don't
// starve its rx queues; the rest wait for the next iteration).
inline constexpr unsigned kAnswersPerIteration = 256;

// Rx queue load intervals: Open vSwitch 3.1's PMD_INTERVAL_LEN (5 s) and
// PMD_INTERVAL_MAX (12), so pmd-rxq-show covers the last 60 s.
inline constexpr uint64_t kPmdIntervalNs = 5'000'000'000ull;
inline constexpr unsigned kPmdIntervalMax = 12;

// pmd-stats-show counters.
struct PmdCounters {
  uint64_t iterations = 0;
  uint64_t rx_packets = 0;        // packets received
  uint64_t recirculations = 0;    // extra datapath passes
  uint64_t xconnect_hits = 0;     // forwarded by a port cross-connect, no lookup
  uint64_t simple_hits = 0;       // found by the simple-match path (simple_match.h)
  uint64_t emc_hits = 0;
  uint64_t smc_hits = 0;
  uint64_t megaflow_hits = 0;     // dpcls
  uint64_t subtable_lookups = 0;  // sum of the rank of the subtable that matched
  uint64_t misses = 0;            // no megaflow
  uint64_t lost = 0;              // misses that could not go to the slow path
  uint64_t recirc_too_deep = 0;   // dropped: recirculated more than kMaxRecircDepth times
  uint64_t malformed = 0;         // parsed with a partial key, or a runt (dropped, below)
  uint64_t runts = 0;             // of which runts: frames < 14 bytes, dropped unparsed (as OVS)
  uint64_t tx_batches = 0, tx_batch_packets = 0;  // output batches sent
  uint64_t invalid_port = 0;      // output to a port that doesn't exist
  uint64_t exec_dropped = 0;      // by the executor (drop action, queue overflow, no headroom ...)
  // Cycles of the iterations that received packets, and of the others
  // (their sleep included, as Open vSwitch counts them).
  uint64_t busy_cycles = 0;
  uint64_t idle_cycles = 0;
  uint64_t upcalls = 0;          // misses handed to the slow path ("miss with success upcall")
  uint64_t action_upcalls = 0;   // userspace() packets handed to the slow path
  uint64_t upcall_installs = 0;  // megaflows the slow path installed in this PMD
  uint64_t upcall_followers = 0; // misses that joined an identical miss already up
  uint64_t install_failed = 0;   // megaflows from the slow path not installed (table full, exists, no memory)
  uint64_t request_failed = 0;   // flow requests refused (install/remove/modify: no such flow, full, busy)
  // Offline mode only:
  uint64_t ordered_upcalls = 0;  // hits of derived packets sent up behind an upcall (input order)
  uint64_t backpressure = 0;     // times inputs stopped: offline, for want of an upcall record; live, an rx queue whose misses hold too many followers (upcall.h) or whose bursts are mostly lost misses (kStormBackoffMax)
  // Bonds and control-plane frames (keel only):
  uint64_t bond_drops = 0;   // lb_output: no table for the bond, or its bucket has no member
  uint64_t ctl_tx = 0;       // control-plane frames sent (post_tx: LACPDUs, learning packets)
  uint64_t ctl_tx_full = 0;  // control-plane frames refused: the PMD's tx ring was full
  // Tunnels (the executor's counts, execute.h):
  uint64_t tnl_pushed = 0;            // packets encapsulated by tnl_push
  uint64_t tnl_push_no_headroom = 0;  // tnl_push drops: less headroom than the header
  uint64_t tnl_popped = 0;            // packets decapsulated by tnl_pop (and recirculated)
  uint64_t tnl_pop_errors = 0;        // tnl_pop drops, all reasons
  uint64_t tnl_pop_reasons[packet::kTnlPopResults] = {};  // by packet::TnlPopResult (tnl_pop_result_name)
  // Hardware offload (offload_hooks.h):
  uint64_t phwol_hits = 0;           // marked packets executed through the mark table (no parse, no lookup)
  uint64_t phwol_misses = 0;         // marked packets whose mark named no live flow: classified normally
  uint64_t offload_events_lost = 0;  // OffloadEvents not posted: the ring was full
  uint64_t offload_hot_lost = 0;     // HotMicroflows not posted: the ring was full
};

// Counters pmd-perf-show adds to PmdCounters: the idle sleeps and the
// shared tx queues. Plain fields in the snapshot; relaxed atomics written
// by the PMD alone.
struct PmdPerfCounters {
  uint64_t busy_iterations = 0;    // iterations that received packets (the others are idle)
  uint64_t sleep_iterations = 0;   // idle iterations that ended in a sleep (host boards)
  uint64_t sleep_cycles = 0;       // cycles spent asleep (part of idle_cycles)
  uint64_t txq_shared_bursts = 0;  // tx bursts sent on a queue shared with other PMDs (locked)
  uint64_t txq_lock_waits = 0;     // of which found the queue's lock held by another PMD
  uint64_t txq_wait_cycles = 0;    // cycles spent waiting for those locks
  uint64_t txq_steers = 0;         // times the PMD (re)chose a shared queue (XPS)
};

// Open vSwitch's XPS_TIMEOUT: a PMD that has not sent on a port for this
// long gives its shared tx queue back and chooses again on its next burst.
inline constexpr uint64_t kXpsTimeoutNs = 500'000'000;

// A flow request from another thread (see FlowTable for the life cycle).
// What the PMD writes back is plain data (codes, a POD array the requester
// allocated): it builds no string and allocates nothing to answer.
struct FlowRequest {
  enum class Op : uint8_t { install, remove, modify, modify_slots, dpcls_info, bond_set, bond_del, set_mark, clear_mark };
  Op op = Op::install;
  Megaflow* flow = nullptr;  // install: the new flow; remove/modify: a template (in_port, mask, key)
  const flow::DpActions* actions = nullptr;  // modify: the new list; afterwards the old one
  // dpcls_info: the requester's array (info_cap entries); the PMD fills
  // min(info_cap, total) entries, in_port order then rank order, and sets
  // info_n to the total (more than info_cap: ask again with a bigger one).
  SubtableInfo* info = nullptr;
  size_t info_cap = 0, info_n = 0;
  // bond_set / bond_del (bond_table.h): the bond id (1..kMaxBondId, else
  // not_found). bond_set: the new table, and the slot's counter block when
  // the set creates the id (null: the slot keeps its counters); bond_del:
  // both null. Afterwards both hold what the PMD swapped out (null when
  // nothing), which the poster frees.
  uint32_t bond_id = 0;
  const BondMembers* bond_members = nullptr;
  BondBucketCounters* bond_counters = nullptr;
  // set_mark: the flow in slot `slot` with ufid `ufid` gets `mark`;
  // clear_mark: `mark`'s entry goes (offload_hooks.h).
  uint32_t slot = 0, mark = 0;
  Ufid ufid;
  // modify_slots (Datapath::flows_modify): n_slot_mods flows, each found by
  // slot and ufid, get new actions; afterwards each entry holds the old list
  // (or its new one back, with result not_found). At most kMaxSlotMods per
  // request: what a PMD does between two bursts stays bounded (~256 cache
  // misses).
  struct SlotMod {
    uint32_t slot;
    Ufid ufid;
    const flow::DpActions* actions;
    FlowResult result;
  };
  static constexpr size_t kMaxSlotMods = 256;
  SlotMod* slot_mods = nullptr;
  uint32_t n_slot_mods = 0;
  FlowResult result = FlowResult::ok;
  // remove: the flow's counts when it went (software and hardware), which
  // no dump saw if packets hit it after the last one.
  uint64_t final_packets = 0, final_bytes = 0;
  std::atomic<bool> done{false};
};

struct PmdConfig {
  // Megaflows per PMD: room for `set flow-limit 1000000` on one PMD. The
  // table's slots (and the offload mark table, sized alike) are committed
  // as flows use them (flow_table.h: ~20 bytes a slot of address space,
  // 8 bytes a flow once used), so an idle capacity costs no memory. The SMC
  // caches only the first 65535 slots (16-bit index).
  uint32_t flow_capacity = 1u << 20;
  uint32_t upcall_budget = 32;  // misses per burst handed to the slow path; the rest are lost
  // Upcall records (upcall.h): how many misses may be up at once before
  // the rest are lost (live mode). Memory is taken only as a storm uses
  // records; at least kMinUpcallRecords.
  uint32_t upcall_records = kDefaultUpcallRecords;
  uint32_t emc_insert_inv_prob = 100;
  bool smc_enable = false;
  // How long a load interval lasts (pmd-rxq-show). Tests that drive the
  // interval clock with Pmd::end_interval() set it out of reach.
  uint64_t load_interval_ns = kPmdIntervalNs;
};

// One rx queue's load history: the cycles the PMDs polling it measured in
// the newest closed intervals (Open vSwitch keeps them on the rxq, so they
// follow the queue to another PMD). Owned by the Datapath, one per (port,
// queue), never freed while PMDs run. `curr` (the current interval's
// cycles) is the polling PMD's alone; a queue changes PMD only while both
// are parked (Pmd::pause()), which orders the old PMD's writes before the
// new one's. The slots and `idx` are written by the polling PMD when it
// closes an interval (slots first, then idx with a release store) and read
// by anyone after an acquire load of idx.
struct RxqLoad {
  std::array<std::atomic<uint64_t>, kPmdIntervalMax> slots{};
  std::atomic<uint32_t> idx{0};  // intervals closed; the next slot is idx % kPmdIntervalMax
  uint64_t curr = 0;
  // The newest `intervals` slots (slots never written are 0).
  uint64_t sum(unsigned intervals) const {
    intervals = std::min(intervals, kPmdIntervalMax);
    const uint32_t closed = idx.load(std::memory_order_acquire);
    uint64_t s = 0;
    for (unsigned k = 1; k <= intervals; ++k)
      s += slots[(closed + kPmdIntervalMax - k) % kPmdIntervalMax].load(std::memory_order_relaxed);
    return s;
  }
  void close() noexcept {
    const uint32_t i = idx.load(std::memory_order_relaxed);
    slots[i % kPmdIntervalMax].store(curr, std::memory_order_relaxed);
    curr = 0;
    idx.store(i + 1, std::memory_order_release);
  }
};

class Pmd {
 public:
  struct RxQueue {
    hal::Port* port;
    uint16_t queue;
    RxqLoad* load;  // the Datapath's; never null
    bool operator==(const RxQueue&) const = default;
  };

  Pmd(Datapath& dp, unsigned index, int core, uint32_t idle_sleep_us, const PmdConfig& cfg);
  ~Pmd();
  Pmd(const Pmd&) = delete;
  Pmd& operator=(const Pmd&) = delete;

  unsigned index() const { return index_; }
  int core() const { return core_; }  // the core it is pinned to; -1: unpinned
  // The core the show commands name (Open vSwitch always prints a number):
  // core() when pinned, otherwise the CPU the PMD thread was last seen on,
  // sampled with hal::current_cpu() by the PMD thread itself when it starts
  // and in its periodic housekeeping (never per packet), kept in a relaxed
  // atomic; 0 before the thread first ran (always a number, as scripts
  // parsing `core_id N` expect).
  int display_core() const {
    if (core_ >= 0) return core_;
    const int seen = last_cpu_.load(std::memory_order_relaxed);
    return seen >= 0 ? seen : 0;
  }
  const std::vector<RxQueue>& rx_queues() const { return rxqs_; }

  // Before start() only.
  void add_rx_queue(const RxQueue& q) { rxqs_.push_back(q); }
  // A new poll list (control thread). While the PMD runs the caller must
  // have parked it (pause()); the PMD polls the new list once resumed.
  void set_rx_queues(std::vector<RxQueue> q) {
    rxqs_ = std::move(q);
    rxq_paused_ = 0;
    rxq_skip_ = {};
    rxq_backoff_ = {};
  }

  // --- reload handshake (control thread) ---
  // pause(): returns once the PMD thread is parked between two iterations
  // (after its last burst was processed and its outputs flushed): it then
  // neither receives nor sends, and only applies flow requests (so that a
  // revalidator waiting on one is answered). The caller may then change its
  // poll list, the datapath's tx queues or a port's queues. resume() lets it
  // go on. A PMD that is not running is "parked" already. Nested calls are
  // not counted: one pause, one resume.
  void pause();
  void resume();
  // hold_rx(true): the PMD stops polling its rx queues but goes on
  // executing the slow path's answers and flow requests (so the upcalls in
  // flight can drain before the slow path is stopped); any thread.
  void hold_rx(bool on) { hold_rx_.store(on, std::memory_order_relaxed); }
  // pmd-rxq-show's "isolated : true" (set by the datapath's scheduler).
  bool isolated() const { return isolated_; }
  void set_isolated(bool on) { isolated_ = on; }

  // --- rx queue load (see the top) ---
  // Cycles spent on rx_queues()[i] in the newest `intervals` closed
  // intervals (at most kPmdIntervalMax; all of them: the figure an rx queue
  // assignment by cycles sorts by, as Open vSwitch's).
  uint64_t rxq_cycles(size_t i, unsigned intervals = kPmdIntervalMax) const;
  // The window of the newest `intervals` intervals (pmd-rxq-show).
  struct Load {
    uint64_t window_cycles = 0;  // last interval's length x intervals; 0: not measured yet (NOT AVAIL)
    uint64_t busy_cycles = 0;    // processing cycles in the window, at most window_cycles
    std::vector<uint64_t> rxq_cycles;  // per rx_queues() index
  };
  Load load(unsigned intervals) const;
  // Intervals closed since start().
  uint32_t intervals_closed() const { return intrvl_idx_.load(std::memory_order_acquire); }
  // Closes the current interval at the PMD's next iteration instead of
  // when kPmdIntervalNs have passed (tests drive the interval clock with
  // it, instead of sleeping); a PMD that is not running closes it at once.
  void end_interval();

  Status start(std::vector<hal::Backend*> backends);
  void stop();  // asks the thread to finish and joins it; idempotent
  bool running() const { return thread_.joinable(); }

  // Another thread's flow request: applied by the PMD between bursts, or at
  // once on the caller's thread when the PMD is not running. Returns the
  // request's result; false from post() means the ring was full.
  Status request(FlowRequest& req);
  // The same in two halves, so that many requests can be in flight: post
  // (false: ring full — then wait() is not to be called), then wait.
  // A PMD that is not running applies the request in request_async().
  bool request_async(FlowRequest& req);
  Status wait(FlowRequest& req);

  // A control-plane frame to send on datapath port `port` between bursts
  // (see the top): false when the ring is full (counted in ctl_tx_full;
  // the packet is still the caller's). Any thread, while the PMD runs.
  bool post_tx(uint16_t port, hal::Packet* pkt) noexcept;
  static constexpr unsigned kCtlTxRing = 64;

  // The lb_output tables (bond_table.h): read by other threads only under
  // the Datapath's bond mutex.
  const PmdBondSlots& bonds() const { return *bonds_; }

  // Completed loop iterations; a reader that sees N+2 after seeing N knows a
  // whole iteration ran after its first read (used to wait for a drain).
  uint64_t iterations() const { return c_.iterations.load(std::memory_order_acquire); }
  PmdCounters counters() const;
  PmdPerfCounters perf_counters() const;
  // When the counters were last cleared (or the PMD started): hal::now_ns()
  // (pmd-perf-show's measurement duration). Relaxed atomic.
  uint64_t counters_since_ns() const { return since_ns_.load(std::memory_order_relaxed); }
  // Offline mode (see the top): before start() only.
  void set_offline(bool on) { offline_ = on; }
  bool offline() const { return offline_; }
  // Offline: packets received and held for want of an upcall record, as of
  // the end of the last iteration (0 in live mode).
  uint32_t held() const { return held_pub_.load(std::memory_order_acquire); }
  void clear_counters();  // resets the reported values (baseline kept by the reader side)

  // The offload rings (offload_hooks.h): the PMD pushes, one consumer (the
  // offload engine's thread, through Datapath::offload_poll) pops.
  static constexpr unsigned kOffloadEventRing = 4096;
  static constexpr unsigned kHotMicroflowRing = 1024;
  size_t pop_offload_events(std::span<OffloadEvent> out) noexcept { return offload_events_.pop_bulk(out); }
  size_t pop_hot_microflows(std::span<HotMicroflow> out) noexcept { return offload_hot_.pop_bulk(out); }

  // The slow path's end of this PMD's upcall rings (upcall.h).
  UpcallChannel& upcall_channel() { return *upcalls_; }
  // Drops a record's packets for r (the packet or the frame the record
  // carries, its followers; their block goes back) without executing them:
  // the PMD thread, or the control thread while the PMD is stopped
  // (Datapath::drop_pending_upcalls).
  void release_record_packets(Upcall* u, DropReason r) noexcept;

  FlowTable& flows() { return table_; }
  const FlowTable& flows() const { return table_; }
  // Drop accounting (drop_stats.h): written by this PMD's thread (by the
  // control thread only while it is not running); read by anyone.
  DropStats& drops() { return drops_; }
  const DropStats& drops() const { return drops_; }
  const packet::ParserCounters& parser_counters() const { return parser_; }

  void set_emc_insert_inv_prob(uint32_t v) { emc_insert_inv_prob_.store(v, std::memory_order_relaxed); }
  void set_smc_enable(bool on) { smc_enable_.store(on, std::memory_order_relaxed); }
  uint32_t emc_insert_inv_prob() const { return emc_insert_inv_prob_.load(std::memory_order_relaxed); }
  bool smc_enabled() const { return smc_enable_.load(std::memory_order_relaxed); }

 private:
  struct AtomicCounters {
    std::atomic<uint64_t> iterations{0}, rx_packets{0}, recirculations{0}, xconnect_hits{0}, simple_hits{0},
        emc_hits{0}, smc_hits{0}, megaflow_hits{0}, subtable_lookups{0}, misses{0}, lost{0},
        recirc_too_deep{0}, malformed{0}, runts{0}, tx_batches{0}, tx_batch_packets{0}, invalid_port{0},
        exec_dropped{0}, busy_cycles{0}, idle_cycles{0}, upcalls{0}, action_upcalls{0}, upcall_installs{0},
        upcall_followers{0}, ordered_upcalls{0}, backpressure{0}, install_failed{0}, request_failed{0},
        bond_drops{0}, ctl_tx{0};
    // The executor's tunnel counters, copied once per iteration when they
    // changed: tnl_pushed, tnl_push_no_headroom, tnl_popped, tnl_pop_errors,
    // then the reasons.
    std::array<std::atomic<uint64_t>, 4 + packet::kTnlPopResults> tnl{};
  };
  // Which packets of a burst each cache stage found (bit i: packet i).
  struct LookupHits {
    uint32_t emc = 0, smc = 0, megaflow = 0;
  };

  void run();
  void apply(FlowRequest& req);
  void apply_mark(FlowRequest& req) noexcept;
  // New actions for a flow of this PMD (modify, modify_slots): `actions` gets the old list.
  void set_actions(Megaflow& f, const flow::DpActions*& actions) noexcept;
  void drain_requests();
  // Sends what post_tx() queued (PMD thread).
  void drain_ctl_tx() noexcept;
  void housekeeping();
  // The parked state of pause() (PMD thread).
  void park();
  // Closes the load interval at cycle counter `now` (see the top).
  void close_interval(uint64_t now) noexcept;
  void receive(hal::Port& in, uint16_t q, std::span<hal::Packet*> pkts);
  // Drops and counts the frames shorter than an Ethernet header (no NIC
  // delivers them; tnl_pop could make one); returns the packets left,
  // compacted in order.
  unsigned drop_runts(std::span<hal::Packet*> pkts) noexcept;
  // `md` (may be null): the packets' metadata when they carry a tunnel.
  void process(std::span<hal::Packet* const> pkts, unsigned depth, const packet::PacketMetadata* md = nullptr);
  // First pass of a burst from a port on the simple-match path; what it
  // can't decide is classified the full way.
  void process_simple(uint32_t port, std::span<hal::Packet* const> pkts);
  // Parse, EMC, SMC, dpcls: flows[i] = the megaflow of pkts[i], or null for
  // a miss (the packet is then handled and must not be touched again).
  void classify(std::span<hal::Packet* const> pkts, const packet::PacketMetadata* md, packet::ParsedPacket* parsed,
                Megaflow** flows,
                unsigned depth);
  // classify's cache stages on a parsed burst (no upcalls, no counters but
  // subtable_lookups): flows[i] = the megaflow of pkts[i] or null.
  void lookup(std::span<hal::Packet* const> pkts, const packet::ParsedPacket* parsed, Megaflow** flows,
              unsigned depth, LookupHits& hits);
  // --- offline mode (see the top) ---
  // One poll: the held packets, else a burst of the oldest input. Returns
  // how many packets were received.
  unsigned offline_poll(std::span<hal::Packet*> burst);
  void resume_held();
  // Takes a parsed burst in order; returns how many packets it handled (the
  // rest are untouched: no upcall record for them).
  unsigned process_offline(std::span<hal::Packet* const> pkts, packet::ParsedPacket* parsed, unsigned depth);
  // Executes n consecutive packets of one megaflow, then their recirculations.
  void execute_run(Megaflow* f, hal::Packet* const* pkts, packet::ParsedPacket* parsed, unsigned n,
                   unsigned depth);
  void execute_run(Megaflow* f, const ExecPacket* batch, unsigned n, uint16_t tcp_flags, unsigned depth);
  // Sends one packet up; false when no record may be taken (backpressure).
  bool upcall_offline(hal::Packet* pkt, const packet::ParsedPacket& pp, unsigned depth);
  // A miss: to the slow path if it listens and the budget allows, else lost.
  void upcall_miss(hal::Packet* pkt, const packet::ParsedPacket& pp, unsigned depth);
  // Rides on the record `up` of the same key already up; false when it is full.
  bool follow(Upcall* up, hal::Packet* pkt, const packet::ParsedPacket& pp) noexcept;
  // Fills record `u` for a miss, files it in pending_ and hands it to the slow path.
  void submit_miss(Upcall* u, hal::Packet* pkt, const packet::ParsedPacket& pp, unsigned depth,
                   bool derived) noexcept;
  // The slow path's answers: install, then execute.
  void handle_answers();
  // depth 0 (packets off the wire, no tunnel metadata): microflows of
  // flows with hw_want are sampled.
  void execute_grouped(unsigned n, Megaflow* const* flows, const ExecPacket* ep, const uint16_t* flags,
                       unsigned depth = 1);
  // Slow-path requests and recirculation after a pass at `depth`.
  void after_pass(unsigned depth);
  void send(uint32_t port, std::span<hal::Packet* const> pkts) noexcept;
  // send() without the output-batch counters (control-plane frames).
  void send_on(hal::Port& out, uint16_t id, std::span<hal::Packet* const> pkts) noexcept;
  // The shared tx queue this PMD uses on `port` (XPS, see the top).
  uint16_t steer_txq(uint16_t port, uint16_t n_txq, uint64_t now) noexcept;
  void release_txqs() noexcept;
  void flush_outputs();
  static void flush_cb(void* arg, uint32_t port, std::span<hal::Packet* const> pkts) noexcept;

  Datapath& dp_;
  const unsigned index_;
  const int core_;
  const uint32_t idle_sleep_us_;
  std::vector<RxQueue> rxqs_;
  std::vector<hal::Backend*> backends_;
  std::thread thread_;
  std::atomic<bool> quit_{false};
  Status start_status_;
  std::atomic<int> started_{0};  // 0 starting, 1 running, -1 failed

  FlowTable table_;
  std::unique_ptr<Emc> emc_;
  std::unique_ptr<Smc> smc_;
  std::atomic<uint32_t> emc_insert_inv_prob_;
  std::atomic<bool> smc_enable_;
  MpmcRing<FlowRequest*> requests_{256};
  struct CtlTx {
    hal::Packet* pkt;
    uint16_t port;
  };
  MpmcRing<CtlTx> ctl_tx_{kCtlTxRing};
  std::atomic<uint64_t> ctl_tx_full_{0};  // posters (fetch_add)
  // lb_output tables by bond id (bond_table.h); the executor reads them.
  std::unique_ptr<PmdBondSlots> bonds_ = std::make_unique<PmdBondSlots>();
  uint64_t bond_drops_seen_ = 0;  // exec_->counters.bond_drops already in c_.bond_drops
  uint64_t tnl_seen_ = 0;         // sum of the executor's tunnel counters already in c_.tnl
  void sync_tnl_counters() noexcept;
  // Recirculated packets' metadata (tunnel + GENEVE options), one slice of
  // kExecRecircCap per recirculation depth (after_pass(d) fills slice d + 1).
  struct RecircMeta {
    packet::PacketMetadata md;
    alignas(8) uint8_t opts[packet::kMaxKeyedTunOptWords * 8];
  };
  std::unique_ptr<RecircMeta[]> recirc_md_;
  std::unique_ptr<UpcallChannel> upcalls_;
  uint32_t upcall_budget_ = 32;
  uint32_t upcalls_left_ = 0;  // in this burst
  // Live mode: packet buffers held by records up besides the followers
  // (frames too long to travel in the record): at most kUpcallHeldPackets
  // (upcall.h).
  uint32_t held_bufs_ = 0;
  // Follower blocks (upcall.h), PMD-private: a free list over one array.
  std::unique_ptr<FollowerBlock[]> follower_blocks_;
  FollowerBlock* free_blocks_ = nullptr;
  // Miss records up in the slow path, by hash: each slot a list, newest
  // first (Upcall::pending_next); at least as many slots as records, so
  // lists stay short, and a bit per slot saying whether its list is empty
  // (the bitmap stays in cache when the table does not: a storm's records
  // cost established flows one bit test per packet). A later miss with the
  // same key joins the newest record of its key instead of taking another.
  // And while a key has a record up, its packets take the miss path even
  // when a cache would hit: a megaflow that another key's answer installed
  // must not send them ahead of their key's packets still waiting in that
  // record (they join it, or follow it up; answers come back in the order
  // the records went up). So per key, packets leave in the order they came.
  // Costs one branch per burst while nothing is up. Memory: untouched until
  // a storm fills the slots.
  LazyArray<Upcall*> pending_;
  std::unique_ptr<uint64_t[]> pending_bits_;
  uint32_t pending_mask_ = 0;
  unsigned misses_up_ = 0;  // records in pending_
  // The newest miss record up with pp's key at this depth, or null.
  Upcall* pending_for(const packet::ParsedPacket& pp, unsigned depth) const noexcept;
  void pending_remove(Upcall* u) noexcept;
  void pending_clear() noexcept;
  // Live mode: keeps a short frame in the record and gives its buffer back
  // (upcall.h); false when the frame must stay in its buffer.
  bool stash_frame(Upcall* u, hal::Packet* pkt) noexcept;
  // A fresh buffer with the frame a record carries (answer execution); null
  // when the pool has none (the packet is then dropped and counted).
  hal::Packet* unstash_frame(Upcall* u) noexcept;
  // pkt goes up in record u (its fate token in flight, drop_stats.h; its
  // frame stashed when it fits).
  void record_up(Upcall* u, hal::Packet* pkt) noexcept;
  // The record's tokens are back from the slow path (not in flight).
  void record_down(Upcall* u) noexcept;
  void release_followers(Upcall* u, DropReason r) noexcept;
  // Offline mode state (PMD thread only; see the top).
  bool offline_ = false;
  static constexpr unsigned kOfflineReserve = 64;  // records only derived packets may take
  static_assert(kOfflineReserve + hal::kMaxBurst < kMinUpcallRecords && kMinUpcallRecords <= kOfflineRecords,
                "records must remain for the inputs");
  uint32_t offline_window_ = kOfflineRecords;  // records up at most while reading inputs (<= capacity)
  uint64_t submitted_ = 0;  // miss records ever sent up
  uint32_t up_ = 0;         // miss records up, not executed yet
  // Packets may execute from the caches only while submitted_ == mark_:
  // nothing earlier than them is up. Set when a context starts: reading the
  // inputs (submitted_ - up_: all that is up is earlier), executing a packet
  // (submitted_: what is up is later than it).
  uint64_t mark_ = 0;
  unsigned in_exec_ = 0;     // nesting of packet execution (0: reading the inputs)
  bool in_answer_ = false;   // executing a slow-path answer: what goes up is `derived`
  Upcall* last_up_ = nullptr;  // the miss record sent up last in this context (may take followers)
  unsigned held_followers_ = 0;  // followers on the records up (live: at most kUpcallHeldFollowers)
  // Live: the poll list's queues (bit i: rxqs_[i], the first 64) paused
  // while held_followers_ is over half of kUpcallHeldFollowers (upcall.h);
  // the poll list slot being read (kNoSlot outside the poll loop).
  uint64_t rxq_paused_ = 0;
  // Live: a miss storm's queue is polled less often. A burst of which half
  // or more were misses lost (no record, or past the per-burst budget) makes
  // its queue sit out the next `backoff` polls of the loop, the backoff
  // doubling up to kStormBackoffMax while its bursts stay so and reset by
  // the first burst that isn't: the PMD's time goes to the queues whose
  // packets it can forward, and the storm's excess waits in its NIC ring
  // (counted there as Rx-drop when it overflows) instead of each packet
  // costing a full lookup before it is lost anyway. Counted in backpressure.
  static constexpr uint8_t kStormBackoffMax = 32;
  std::array<uint8_t, 64> rxq_skip_{}, rxq_backoff_{};
  static constexpr size_t kNoSlot = ~size_t{0};
  size_t poll_slot_ = kNoSlot;
  std::array<hal::Packet*, hal::kMaxBurst> held_pkts_{};
  std::unique_ptr<packet::ParsedPacket[]> held_parsed_;
  unsigned held_head_ = 0, n_held_ = 0;
  bool held_for_order_ = false;  // held behind an upcall (else: for want of a record)
  bool rx_paused_ = false;       // the inputs wait for records (counted once per pause)
  std::atomic<uint32_t> held_pub_{0};
  packet::ParserCounters parser_;
  // Drop accounting (drop_stats.h): the fates of the packets this PMD
  // received and the buffers it dropped; the executor's context points here.
  DropStats drops_;
  // A packet that was up (an upcall record, the held list) dropped.
  void drop_up(hal::Packet* p, DropReason r) noexcept {
    drops_.down(p);
    drops_.drop(p, r);
  }
  // Megaflow/Upcall::drop_reason as a DropReason (0: the rules drop it).
  static DropReason flow_drop_reason(uint8_t r) noexcept {
    return r ? static_cast<DropReason>(r) : DropReason::kDropAction;
  }
  std::unique_ptr<ExecContext> exec_;
  // Per recirculation depth: the parsed burst (keys must outlive execution).
  std::unique_ptr<packet::ParsedPacket[]> parsed_;

  // Reload handshake (see pause()).
  std::atomic<bool> pause_{false};   // control thread -> PMD (release / acquire)
  std::atomic<bool> parked_{false};  // PMD -> control thread (release / acquire)
  std::atomic<bool> hold_rx_{false};
  bool isolated_ = false;  // control thread

  // Rx queue load (see the top). PMD thread: the marks; published: the
  // PMD's busy slots, the count, the last interval's length. The queues'
  // own history is in their RxqLoad (the Datapath's).
  using IntervalSlots = std::array<std::atomic<uint64_t>, kPmdIntervalMax>;
  IntervalSlots busy_intrvl_{};
  std::atomic<uint32_t> intrvl_idx_{0};      // intervals closed; the next slot is this % kPmdIntervalMax
  std::atomic<uint64_t> intrvl_cycles_{0};   // length of the last closed interval (0: none measured)
  const uint64_t intrvl_ns_;                 // PmdConfig::load_interval_ns
  uint64_t intrvl_len_ = 0;                  // the same in cycles (start())
  uint64_t intrvl_start_ = 0;                // cycle counter at the last close (0: none yet)
  uint64_t intrvl_due_ = 0;                  // cycle counter at which the current interval closes
  uint64_t intrvl_busy_mark_ = 0;            // busy_cycles at the last close
  std::atomic<uint32_t> intrvl_kicks_{0};    // end_interval() calls (any thread)
  uint32_t intrvl_kicks_seen_ = 0;           // PMD thread
  size_t offline_rxq_ = 0;                   // offline: the queue the last read (or held packets) came from
  std::atomic<int> last_cpu_{-1};

  // XPS state per output port (PMD thread only): the shared queue held and
  // the cycle counter at its last burst.
  struct TxSteer {
    uint64_t last_used = 0;
    uint16_t queue = 0;
    bool held = false;
  };
  std::array<TxSteer, kMaxDpPorts> steer_{};
  uint64_t xps_timeout_cycles_ = 0;  // kXpsTimeoutNs in cycles (start())

  alignas(64) AtomicCounters c_;
  struct AtomicPerfCounters {
    std::atomic<uint64_t> busy_iterations{0}, sleep_iterations{0}, sleep_cycles{0}, txq_shared_bursts{0},
        txq_lock_waits{0}, txq_wait_cycles{0}, txq_steers{0};
  } pc_;
  // --- offload (offload_hooks.h; PMD thread unless said) ---
  MpmcRing<OffloadEvent> offload_events_{kOffloadEventRing};
  MpmcRing<HotMicroflow> offload_hot_{kHotMicroflowRing};
  std::atomic<uint64_t> phwol_hits_{0}, phwol_misses_{0}, offload_events_lost_{0}, offload_hot_lost_{0};
  // The mark table: direct-mapped by mark (marks_mask_ + 1 entries, a
  // power of two >= the flow capacity), each entry the full mark and its
  // flow; `light`: the flow's actions are outputs/drop only, so its
  // packets need no parse (see process_marked).
  struct MarkEntry {
    uint32_t mark = 0;
    bool light = false;
    Megaflow* flow = nullptr;
  };
  LazyArray<MarkEntry> marks_;
  uint32_t marks_mask_ = 0;
  uint32_t n_marks_ = 0;
  // The hot-microflow sampler: kHotWays-way set-associative by the
  // microflow hash (kHotSamples entries), an entry per (hash, megaflow slot)
  // counting its packets in the current window. A new microflow takes the
  // set's entry whose window expired, else the one with the fewest packets:
  // with many concurrent microflows (10k 5-tuples through one megaflow) a
  // direct-mapped table reset a count at every collision and few ever got
  // to the threshold.
  struct HotSample {
    uint32_t hash = 0, slot = ~0u, packets = 0;
    uint64_t start_ns = 0, posted_ns = 0;  // window start; when last posted (0: never)
  };
  static constexpr unsigned kHotSamples = 16384;
  static constexpr unsigned kHotWays = 4;
  static_assert((kHotSamples / kHotWays & (kHotSamples / kHotWays - 1)) == 0, "sets: a power of two");
  std::unique_ptr<HotSample[]> samples_;
  std::unique_ptr<packet::ParsedPacket> sample_pp_;  // a key-less packet parsed for its sample
  // Per burst (receive()): whether offload is on, its thresholds, the rx queue.
  bool offload_on_ = false;
  uint32_t promote_packets_ = kDefaultPromotePackets;
  uint64_t promote_window_ns_ = kDefaultPromoteWindowNs;
  uint16_t cur_rxq_ = 0;
  void post_offload_event(OffloadEvent::Op op, const Megaflow& f) noexcept;
  // Executes the packets of `pkts` whose mark names a live flow of this PMD
  // from `in`; returns the others, compacted in order.
  unsigned process_marked(hal::Port& in, std::span<hal::Packet*> pkts);
  // Counts n packets of f (a flow with hw_want) per microflow; posts the
  // ones that cross the threshold.
  void sample_hot(Megaflow& f, const ExecPacket* batch, unsigned n, uint64_t now) noexcept;
  // f's mark entry goes (f died or its mark is cleared).
  void forget_mark(Megaflow& f) noexcept;

  PmdCounters baseline_;  // control thread: subtracted by counters() after clear
  PmdPerfCounters perf_baseline_;
  std::atomic<uint64_t> since_ns_{0};
};

}  // namespace keel::datapath

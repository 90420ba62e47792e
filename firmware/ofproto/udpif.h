// Udpif — the slow path's two threads between the datapath and the rules:
// the upcall handler and the revalidator (Open vSwitch's ofproto-dpif-upcall).
//
// Handler: takes the PMDs' upcalls (datapath/upcall.h) — the parsed key and
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
//   * flows whose translation may have changed — their bridge's rules
//     changed in a way that overlaps the megaflow (Bridge::changes_since),
//     or the MAC table moved for a NORMAL flow — are translated again from
//     their ukey's key: same actions and mask: kept; new actions, same mask:
//     modified in place; different mask or error: deleted (the next packet
//     upcalls again). Only those flows are re-translated.
//   * the round's duration adapts the flow limit as Open vSwitch does
//     (> 2 s: divided; > 1.3 s: 3/4; < 1 s with many flows: +1000).
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
// Offline runs (Datapath::offline(), datapath/pmd.h): the handler answers in
// input order — records marked `derived` (sent up while an earlier answer
// was executed) before those queued ahead of them; after answering a miss
// whose actions recirculate it takes nothing more until the PMD has
// executed that answer (its recirculated packets come back derived); and a
// translation that changed the MAC table (a new or moved MAC) waits until
// every earlier answer is installed, then runs a revalidation round on the
// handler thread before answering, so no stale NORMAL megaflow serves a
// later packet (stats().offline_revalidations).
//
// Thread-safety: start()/stop() and the setters are control-thread calls.
// The two threads share the ukey table under a mutex that no PMD takes;
// stats() and the dump functions read it from the control thread the same
// way. Translation runs on the handler/revalidator threads as Rcu readers.
// The revalidator's thread id is one relaxed atomic it stores when it
// starts (stats() reads it).
#pragma once

#include <atomic>
#include <bitset>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "datapath/datapath.h"
#include "datapath/rcu.h"
#include "datapath/upcall.h"
#include "flow/dp_actions.h"
#include "flow/flow_key.h"
#include "ofproto/rule.h"

namespace keel::ofproto {

class Bridge;

// What translation gives the slow path for one flow.
struct Translation {
  Bridge* bridge = nullptr;              // null: the port belongs to no bridge (a drop flow on in_port)
  flow::DpActions actions;               // empty: drop
  flow::FlowKey wc{};                    // the bits translation consulted
  std::vector<const OfRule*> rules;      // rules whose actions ran (for statistics)
  uint64_t rules_gen = 0;                // bridge->rules_generation() it saw
  bool uses_normal = false;
  uint64_t mac_gen = 0;                  // bridge->mac().generation() it saw
  std::bitset<256> tables;               // tables looked up (a change elsewhere can't matter)
  bool cacheable = true;                 // false: execute only, never install
  bool mac_changed = false;              // NORMAL learned a new MAC or a move
};

// Translates `flow` (in_port = datapath port). may_learn: NORMAL may learn
// (false for revalidation). The caller is an Rcu reader.
using Translator = std::function<Status(const flow::FlowKey& flow, bool may_learn, Translation& out)>;
// Receives a userspace() packet (the frame and the action's userdata).
using ActionSink = std::function<void(const datapath::Upcall& u)>;
// Knobs read each round (the Ofproto's).
struct UdpifKnobs {
  std::function<uint32_t()> flow_limit, max_idle_ms, revalidate_interval_ms;
};

struct UdpifStats {
  uint64_t upcalls = 0, action_upcalls = 0, installs = 0, install_failed = 0, limit_hits = 0;
  uint64_t translate_errors = 0;
  // Packets of ports in no bridge, dropped: the upcalled ones and those the
  // port's drop flow (in_port exact, no actions) counted since.
  uint64_t no_bridge_drops = 0;
  uint64_t offline_revalidations = 0;  // offline: rounds run because a translation moved the MAC table
  uint64_t rounds = 0, revalidated = 0, modified = 0, deleted_idle = 0, deleted_changed = 0,
           deleted_limit = 0;
  uint64_t last_dump_ms = 0, avg_dump_ms = 0, max_dump_ms = 0, last_round_us = 0;
  // As Open vSwitch's upcall/show: the last round's duration, at least 1 ms
  // (0 before the first round); the datapath flows each round started
  // with: the most, and a running average (avg = (avg + n) / 2 per round,
  // integer, as OVS's revalidator leader keeps it).
  uint64_t dump_duration_ms = 0;
  uint64_t max_n_flows = 0, avg_n_flows = 0;
  // The revalidator thread's Linux thread id (what `top -H` shows; 0 until
  // it ran): upcall-show's per-revalidator line, where Open vSwitch prints
  // its revalidator's thread number.
  int revalidator_tid = 0;
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
  // them, and turns upcalls on. stop() turns upcalls off, answers what is
  // queued with "drop", and joins.
  void start();
  void stop();
  bool running() const { return handler_.joinable(); }

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
  // The datapath removed or replaced PMD `pmd` (Datapath::set_pmd_cores at
  // run time): its ukeys go (its flows went with it). Only while stopped.
  void forget_pmd(unsigned pmd);

  UdpifStats stats() const;

 private:
  // A ukey is split so that a terse round touches little memory: the hot
  // part (what every round reads and writes, ~90 bytes) lives in the hash
  // node, so 100k nodes are ~13 MB of mostly consecutive allocations; the
  // cold part (key & mask, actions, rules: ~1.3 KB) only when a flow is
  // re-translated, deleted, or has more than one rule.
  struct UkeyCold {
    flow::Match match;  // key & mask as installed
    flow::DpActions actions;
    std::vector<const OfRule*> rules;
    std::bitset<256> tables;  // looked up by the translation
  };
  struct Ukey {
    uint64_t packets = 0, bytes = 0;  // pushed to rules so far
    uint64_t created_ns = 0;
    uint64_t seen_round = 0;  // last round whose dump had the flow (0: none yet)
    uint64_t rules_gen = 0;
    uint64_t mac_gen = 0;
    Bridge* bridge = nullptr;
    const OfRule* rule1 = nullptr;  // the only rule, when cold->rules has exactly one
    std::unique_ptr<UkeyCold> cold;
    unsigned pmd = 0;
    bool uses_normal = false;
    bool exact = false;  // installed with megaflows off (mask: the whole key)
  };
  struct UkeyId {
    unsigned pmd;
    datapath::Ufid ufid;
    bool operator==(const UkeyId&) const = default;
  };
  // Not noexcept on purpose: libstdc++ then caches each node's hash, so a
  // lookup walking a bucket compares cached hashes instead of touching
  // (cache-missing) the next nodes' keys.
  struct UkeyIdHash {
    size_t operator()(const UkeyId& k) const { return k.ufid.hi ^ (k.ufid.lo * 31) ^ k.pmd; }
  };

  // Per PMD (handler thread only; sized by start()): answers given and come
  // back spent (both modes), and offline: records taken from the queue and
  // not answered yet, in the order they are to be answered, and the
  // recirculating answer to wait for.
  struct OfflineQueue {
    std::deque<datapath::Upcall*> backlog;
    datapath::Upcall* wait_for = nullptr;
    uint64_t answered = 0, spent = 0;
  };
  void handler_main();
  bool handle_batch();
  bool recycle_spent(datapath::UpcallChannel& ch, OfflineQueue& oq);
  void credit_uncounted(const datapath::Upcall& u);
  void answer(datapath::UpcallChannel& ch, datapath::Upcall* u, OfflineQueue* oq);
  static bool has_recirc(std::span<const uint8_t> actions);
  void revalidator_main();
  uint64_t round(bool terse, unsigned rcu_slot);
  // Whether rule changes since the ukey's translation may change it: a
  // change in a table it looked up; in table 0 (which sees the packet as
  // it came) only a rule that overlaps the megaflow. `cache` holds one
  // change list per (bridge, generation) for the round.
  struct ChangeCache;
  bool rules_may_matter(const Ukey& k, ChangeCache& cache);

  datapath::Datapath& dp_;
  datapath::Rcu& rcu_;
  Translator translate_;
  ActionSink sink_;
  UdpifKnobs knobs_;
  unsigned handler_slot_ = 0, revalidator_slot_ = 0;
  bool slots_registered_ = false;

  std::vector<OfflineQueue> offline_;  // handler thread only
  // Records answered and recycled (written by the handler; wait_spent reads).
  std::atomic<uint64_t> answered_total_{0}, recycled_total_{0};
  std::thread handler_, revalidator_;
  std::atomic<bool> quit_{false};
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool kicked_ = false;

  mutable std::mutex mu_;  // ukeys_ and stats_ (handler, revalidator, control; never a PMD)
  std::unordered_map<UkeyId, Ukey, UkeyIdHash> ukeys_;
  UdpifStats stats_;
  std::atomic<uint32_t> adapted_limit_{0};
  std::atomic<int> revalidator_tid_{0};
  std::mutex round_mu_;  // one round at a time
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

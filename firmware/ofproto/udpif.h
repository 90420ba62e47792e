// Udpif — the slow path's two threads between the datapath and the rules:
// the upcall handler and the revalidator (Open vSwitch's ofproto-dpif-upcall).
//
// Handler: takes the PMDs' upcalls (datapath/upcall.h) — the parsed key and
// its hash travel with the packet, so nothing is parsed or hashed again
// (stats().reparses stays 0: there is no code path that parses here) —
// translates each (Translator: xlate through the packet's bridge), and
// answers with the megaflow to install in the PMD that missed (key & mask
// exactly as translation consulted, in_port and recirc_id exact) and the
// actions to run on the packet. At the flow limit it answers with the
// actions only (the packet is forwarded, nothing installed). Userspace()
// packets (the `controller` action) go to the ActionSink (the controller
// queue) and are consumed. Every installed megaflow gets a ukey: its key,
// mask, actions, the rules its translation ran and the generations it saw.
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
// Thread-safety: start()/stop() and the setters are control-thread calls.
// The two threads share the ukey table under a mutex that no PMD takes;
// stats() and the dump functions read it from the control thread the same
// way. Translation runs on the handler/revalidator threads as Rcu readers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
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
  Bridge* bridge = nullptr;              // null: the port belongs to no bridge (drop, no install)
  flow::DpActions actions;               // empty: drop
  flow::FlowKey wc{};                    // the bits translation consulted
  std::vector<const OfRule*> rules;      // rules whose actions ran (for statistics)
  uint64_t rules_gen = 0;                // bridge->rules_generation() it saw
  bool uses_normal = false;
  uint64_t mac_gen = 0;                  // bridge->mac().generation() it saw
  bool cacheable = true;                 // false: execute only, never install
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
  uint64_t translate_errors = 0, reparses = 0;
  uint64_t rounds = 0, revalidated = 0, modified = 0, deleted_idle = 0, deleted_changed = 0,
           deleted_limit = 0;
  uint64_t last_dump_ms = 0, avg_dump_ms = 0, max_dump_ms = 0, last_round_us = 0;
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
  uint64_t revalidate_now(bool terse = true);
  // Wakes the revalidator for a round as soon as possible (after a rule change).
  void kick();

  UdpifStats stats() const;

 private:
  struct Ukey {
    unsigned pmd = 0;
    flow::Match match;  // key & mask as installed
    flow::DpActions actions;
    Bridge* bridge = nullptr;
    std::vector<const OfRule*> rules;
    uint64_t rules_gen = 0;
    bool uses_normal = false;
    uint64_t mac_gen = 0;
    uint64_t packets = 0, bytes = 0;  // pushed to rules so far
    uint64_t created_ns = 0;
    uint64_t seen_round = 0;  // last round whose dump had the flow (0: none yet)
  };
  struct UkeyId {
    unsigned pmd;
    datapath::Ufid ufid;
    bool operator==(const UkeyId&) const = default;
  };
  struct UkeyIdHash {
    size_t operator()(const UkeyId& k) const noexcept { return k.ufid.hi ^ (k.ufid.lo * 31) ^ k.pmd; }
  };

  void handler_main();
  bool handle_batch();
  void answer(datapath::UpcallChannel& ch, datapath::Upcall* u);
  void revalidator_main();
  uint64_t round(bool terse, unsigned rcu_slot);

  datapath::Datapath& dp_;
  datapath::Rcu& rcu_;
  Translator translate_;
  ActionSink sink_;
  UdpifKnobs knobs_;
  unsigned handler_slot_ = 0, revalidator_slot_ = 0;
  bool slots_registered_ = false;

  std::thread handler_, revalidator_;
  std::atomic<bool> quit_{false};
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool kicked_ = false;

  mutable std::mutex mu_;  // ukeys_ and stats_ (handler, revalidator, control; never a PMD)
  std::unordered_map<UkeyId, Ukey, UkeyIdHash> ukeys_;
  UdpifStats stats_;
  std::atomic<uint32_t> adapted_limit_{0};
  std::mutex round_mu_;  // one round at a time
  uint64_t round_seq_ = 0;  // under round_mu_
};

}  // namespace keel::ofproto

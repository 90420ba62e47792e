// Offload — the flow engine: which datapath flows go to the NIC's flow
// tables (rte_flow through hal::FlowEngine), as what, and why not.
//
// What it is. One object per System (created at boot with the datapath,
// started with it, stopped first at shutdown). Its thread(s) — never a
// PMD — drain the datapath's offload events (a megaflow installed, removed,
// modified) and hot microflows (datapath/offload_hooks.h), decide per flow
// (decide() below: full exact-match rules for the hot microflows, one full
// masked rule, a partial MARK rule, or nothing, always with a Reason), and
// insert/delete hardware rules in batches (the template/async API when the
// port's engine reports it, hal::FlowEngineInfo::async_api, else the sync
// calls), with retries and backoff on transient errors, table-full
// placement (placement.h: keep the highest packet rates, evict cold rules
// with hysteresis, demote idle ones) and re-offload after a device reset.
//
// A flow's forwarding never depends on the offload: the PMD forwards a flow
// until the hardware confirmed its rule, and a failed insert leaves it on
// the Arm path, counted by reason. Hardware counters are merged into the
// megaflow's (Datapath::add_hw_stats) by sync_stats(), which the datapath
// calls before every terse stats round and every dump
// (Datapath::set_offload_sync), so flow-dump and dump-flows totals stay
// exact.
//
// Relation to its neighbours: datapath/ knows nothing of this layer except
// the hooks it offers (offload_poll, offload_flow, add_hw_stats,
// set_flow_offload, set_flow_mark, set_offload_sync); the hardware is
// reached only through hal/include/keel/hal/flow.h; control::System owns the
// object; cli/ reads the views (stats(), flow_state(), offloaded_flows()) and
// calls the setters. ofproto does not link it.
//
// Thread-safety: the public methods are for the control thread (consoles,
// running config) except sync_stats(), which any thread may call (the
// revalidator, a dumper): it hands the request to the engine thread(s) and
// waits, bounded, for the answer (a mutex + condition variable no PMD
// touches). The views copy state under the engine's mutex. Each engine
// thread owns a shard of the flows (by ufid) and is the only caller of the
// hal::FlowEngine of every port for its shard's rules: hal engines are
// driven by one thread at a time (the shards take the engine's per-port
// lock around their calls). PMDs only see the results through the
// datapath's atomics and request rings.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "datapath/datapath.h"
#include "flow/match.h"

namespace keel::offload {

// `set offload-mode`: exact-match rules for hot microflows (default),
// one masked rule per megaflow (what Open vSwitch does), or both (masked
// first; exact rules for the hot microflows of a megaflow the masked table
// refused).
enum class Mode : uint8_t { exact, megaflow, both };
const char* mode_name(Mode m);                    // "exact", "megaflow", "both"
std::optional<Mode> parse_mode(std::string_view s);

// What decide() says a flow gets.
enum class Decision : uint8_t {
  none,         // stays on the Arm path, nothing in hardware
  full_exact,   // exact-match rules for its hot microflows (forwarded by the NIC)
  full_masked,  // one masked rule (forwarded by the NIC)
  partial,      // MARK + queue: the PMD skips parse and classification
};
const char* decision_name(Decision d);  // "none", "full (exact-match)", "full (masked)", "partial (mark)"

// Why a flow is (not) offloaded: what a user sees in flow-dump -m
// (`offload-reason:"..."`), offload-show and trace.
enum class Reason : uint8_t {
  ok,               // offloaded as decided
  disabled,         // "offload disabled"
  no_engine,        // "port has no flow engine"
  arm_action,       // "actions need the Arm cores: <action>"
  match_field,      // "matches <field>, which the <table> table does not carry"
  tunnel_in_port,   // "in_port is a tunnel vport"
  recirculated,     // "recirculated flow"
  output_vport,     // "actions need the Arm cores: output to a vport"
  not_hot,          // "not hot yet"
  table_full,       // "table full"
  evicted,          // "evicted for hotter flows"
  refused,          // "refused by the driver: <message>"
  pending,          // "pending"
  retrying,         // "retrying after <error>"
  device_reset,     // "device reset"
  idle_demoted,     // "idle: demoted"
  mask_refused,     // "mask not accepted by the masked table: <field>"
};
const char* reason_text(Reason r);
// reason_text(r) with its detail where it has one ("actions need the Arm
// cores: lb_output"; "refused by the driver: rte_flow create on port p0:
// ...").
std::string reason_string(Reason r, std::string_view detail);

// What decide() needs to know about a datapath port.
struct PortCaps {
  bool exists = false;      // a hal port or vport of the datapath
  bool vport = false;       // a vport (tunnel / internal): no hardware
  bool has_engine = false;  // hal::Port::flow_engine() != nullptr
  bool exact_table = true;  // the engine has an exact-match table (capacity > 0)
  bool masked_table = true; // ... and a masked one
};
using PortCapsFn = std::function<PortCaps(uint32_t dp_port)>;

struct DecideResult {
  Decision decision = Decision::none;
  Reason reason = Reason::ok;
  std::string detail;  // the action or field named by the reason
  std::string text() const { return reason_string(reason, detail); }
};

// The pure decision for one megaflow (what trace prints and unit tests
// check): its match, its encoded datapath actions, the mode, and the ports'
// capabilities. Says full when the NIC can do every action (outputs to
// hal ports with engines, drop, push/pop VLAN, whole-field sets of
// Ethernet/IPv4/IPv6/TCP/UDP), partial (MARK) when an action needs the Arm
// cores or the match has something the table does not carry, none when
// the in_port has no engine, is a vport, or the flow is recirculated.
DecideResult decide(const flow::Match& match, std::span<const uint8_t> actions, Mode mode, const PortCapsFn& caps);

// Engine settings (the `set offload-*` commands; defaults as below).
struct OffloadConfig {
  bool enabled = false;  // `offload enable|disable`
  Mode mode = Mode::exact;
  unsigned threads = 1;                 // n-offload-threads, 1..kMaxOffloadThreads
  uint32_t promote_packets = 16;        // offload-promote-packets
  uint64_t promote_window_ns = 1000000000ull;
  uint32_t idle_ms = 2000;              // offload-idle-ms: no hw hit this long -> demoted
  double evict_factor = 2.0;            // a candidate must beat the coldest rule's rate by this
  uint32_t min_residency_ms = 1000;     // an offloaded rule is not evicted before this
  uint32_t retry_base_ms = 10;          // backoff: base << attempt, capped
  uint32_t retry_max_ms = 2000;
  uint32_t max_retries = 6;             // then: failed, stays on the Arm path
  uint32_t batch = 64;                  // inserts per push (async) / per pass (sync)
};
inline constexpr unsigned kMaxOffloadThreads = 8;
inline constexpr uint32_t kMaxPromotePackets = 1u << 20;
inline constexpr uint32_t kMaxIdleMs = 3600u * 1000u;

// One table of one port's flow engine, as offload-show prints it.
struct TableStats {
  std::string table;  // "exact", "masked", "mark"
  uint64_t rules = 0;       // installed now
  uint64_t capacity = 0;    // 0: unknown / none
  uint64_t pending = 0;     // inserts in flight (async) or queued
  uint64_t inserted = 0, deleted = 0, failed = 0, evicted = 0, demoted = 0;
  double insert_rate = 0, delete_rate = 0;  // per second, over the last stats interval
};

struct FailedCount {
  std::string reason;  // reason_text() words
  uint64_t count = 0;
};

struct PortOffloadStats {
  uint16_t port = 0;
  std::string name;
  bool has_engine = false;
  bool async_api = false;
  uint64_t rules_full = 0, rules_partial = 0, pending = 0;
  std::vector<TableStats> tables;
  std::vector<FailedCount> failed;  // by reason, nonzero only
  uint64_t resets = 0;              // device resets seen
  // Packets full-offload rules forwarded or dropped (the port's
  // rx_hw_forwarded + rx_hw_dropped) that are in no megaflow's counts, so
  // in no rule's: lost with the rules' counters at a device reset, or read
  // from a rule after its megaflow had gone.
  uint64_t hw_uncounted_reset = 0, hw_uncounted_flow_gone = 0;
  std::string last_error;           // empty: none
  uint64_t last_error_ns = 0;
};

struct OffloadStats {
  bool enabled = false;
  Mode mode = Mode::exact;
  unsigned threads = 1;
  std::vector<PortOffloadStats> ports;  // port-id order, every hal port
  uint64_t flows_full = 0, flows_partial = 0;  // megaflows with >= 1 hw rule
  uint64_t events = 0, events_lost = 0, hot_microflows = 0;
  uint64_t sync_terse = 0, sync_full = 0;  // stats rounds served
  uint64_t last_sync_us = 0;               // how long the last round took
};

// One megaflow's offload state (flow-dump -m's offloaded:/offload-reason:).
struct FlowState {
  datapath::FlowOffload offload = datapath::FlowOffload::none;
  Decision decision = Decision::none;
  Reason reason = Reason::disabled;
  std::string detail;
  uint32_t hw_rules = 0;  // hardware rules serving it now
  uint32_t mark = 0;      // partial: its mark, else 0
  std::string text() const { return reason_string(reason, detail); }
};

// A megaflow with hardware rules (flow-dump --offloaded).
struct OffloadedFlow {
  unsigned pmd = 0;
  datapath::Ufid ufid;
  datapath::FlowOffload offload = datapath::FlowOffload::none;
  uint32_t hw_rules = 0;
  uint64_t hw_packets = 0, hw_bytes = 0;
};

class Engine;  // offload.cpp: the threads and the per-flow state

class Offload {
 public:
  // Refers to `dp` for its whole life; the datapath must outlive it.
  explicit Offload(datapath::Datapath& dp, OffloadConfig cfg = {});
  ~Offload();  // stop()
  Offload(const Offload&) = delete;
  Offload& operator=(const Offload&) = delete;

  // Starts the engine thread(s) and registers sync_stats with the datapath.
  Status start();
  // Stops the threads after destroying every hardware rule it installed
  // (marks cleared, flows back to FlowOffload::none). Idempotent.
  void stop();
  bool running() const;

  // --- config (control thread; each applies whole or returns an error that
  // names the value and the range; the caller names the setting) ---
  Status set_enabled(bool on);  // disable removes every rule (flows stay on the Arm path)
  Status set_mode(Mode m);      // re-decides every flow
  Status set_threads(unsigned n);           // 1..kMaxOffloadThreads; restarts the threads
  Status set_promote_packets(uint32_t n);   // 1..kMaxPromotePackets
  Status set_promote_window_ms(uint32_t ms);
  Status set_idle_ms(uint32_t ms);          // 0: never demote; else 10..kMaxIdleMs
  const OffloadConfig& config() const;

  // Hardware counters -> megaflows. `full`: also read each rule back
  // (per-rule query and re-building pattern and actions; the comparison
  // mode). Runs on the engine thread; returns when done or after
  // `timeout_ms` (then an error: the engine is busy). Any thread.
  Status sync_stats(bool full, uint64_t timeout_ms = 1000);

  // Waits until the engine has drained everything posted so far and has
  // nothing pending or retrying that is due within `timeout_ms` (tests,
  // `offload-show --settle`): true if it got there.
  bool settle(uint64_t timeout_ms);

  // --- views ---
  OffloadStats stats() const;
  FlowState flow_state(unsigned pmd, const datapath::Ufid& ufid) const;
  std::vector<OffloadedFlow> offloaded_flows() const;
  // decide() with this datapath's ports and the current mode, plus the
  // `offload disabled` / `port has no flow engine` words (trace).
  DecideResult explain(const flow::Match& match, std::span<const uint8_t> actions) const;

 private:
  datapath::Datapath& dp_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace keel::offload

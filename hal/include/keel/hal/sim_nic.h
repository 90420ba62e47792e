// hal::sim::SimNic — the sim backend's model of a NIC flow engine, as the
// control plane sees it: costs, injected faults and what the model counted.
//
// What it is: one SimNic per sim backend (an e-switch shared by every port
// that backend opened). Each sim port's Port::flow_engine() is a per-port
// view of it (hal/sim/sim_flow.h: rules are per ingress port unless
// FlowAttr::transfer), and each sim port's rx hands its bursts to the model
// (hal::HwIngress, flow.h), which forwards or drops what a full-offload rule
// matches, marks what a MARK rule matches and leaves the rest to the PMD.
// The rule tables, their capacities and the cost model are described in
// hal/sim/sim_flow.h. This header is the sim-only control API that
// control/ and cli/ reach (`debug offload-fault ...`) through sim_nic().
//
// Life cycle: made by make_sim_backend() when SimOptions::offload_flows > 0
// (otherwise sim ports have no flow engine and sim_nic() is null); lives as
// long as the backend, which outlives its ports.
//
// Thread-safety: every call here is for the control thread (console, tests)
// and may run while PMDs poll the ports and the offload thread drives the
// engines: costs and faults are relaxed atomics read by the engine calls;
// reset() and set_capacity() take the model's table lock like any rule
// change (see sim_flow.h); stats() reads relaxed counters.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace keel::hal {
class Backend;
}

namespace keel::hal::sim {

// What the model charges for each operation, busy-waited on the calling
// (offload) thread so that a benchmark measures it; 0 = free (a benchmark of
// keel's own CPU cost per insert). Defaults: see kDefaultCosts in sim_flow.h
// for where each figure comes from.
struct SimNicCosts {
  uint64_t sync_create_ns = 0;   // rte_flow_create (one rule, waits for the device)
  uint64_t sync_destroy_ns = 0;  // rte_flow_destroy
  uint64_t async_batch_ns = 0;   // one push(): the doorbell and the completion write-back
  uint64_t async_rule_ns = 0;    // each queued create/destroy a push() hands the device
  uint64_t query_ns = 0;         // each rule read by query()/query_bulk()
};

// What the model counted since it was made (reset() does not clear it).
struct SimNicStats {
  uint32_t exact_rules = 0, masked_rules = 0;        // occupancy now
  uint32_t exact_capacity = 0, masked_capacity = 0;  // current capacities
  uint64_t reset_generation = 0;                     // resets so far
  uint64_t creates = 0, create_failures = 0;         // sync + async
  uint64_t destroys = 0, destroy_failures = 0;
  uint64_t queries = 0, query_failures = 0;
  uint64_t async_pending = 0;      // queued, not yet pushed (all queues)
  uint64_t hw_forwarded = 0;       // packets a rule sent out of a port
  uint64_t hw_dropped = 0;         // packets a drop rule dropped
  uint64_t hw_marked = 0;          // packets left to the PMD with a MARK
  uint64_t hw_to_pmd = 0;          // packets a queue/rss rule left to the PMD (marked or not)
  uint64_t hw_tx_dropped = 0;      // forwarded, but the egress refused them (link down, MTU, full)
  uint64_t injected_failures = 0;  // calls failed by an injected fault
};

class SimNic {
 public:
  virtual ~SimNic() = default;

  virtual SimNicCosts costs() const = 0;
  virtual void set_costs(const SimNicCosts& c) = 0;

  // Whether the ports' engines offer the template + queue API
  // (FlowEngineInfo::async_api; default true, as on mlx5). With false the
  // async calls answer ENOTSUP and the offload engine uses the sync API.
  virtual void set_async_api(bool on) = 0;

  // Burst order across the hardware/PMD split. A NIC forwards what its rules
  // match at once, so within one rx burst a packet the hardware sends can
  // overtake an earlier one of another flow that the PMD sends after rx()
  // returns (each flow keeps its own order): the default, as a NIC. With
  // keep_order on (`debug offload-fault keep-order on`: a capture of many
  // flows into one port then compares byte for byte with a run without
  // offload) the model handles a burst's packets in hardware only up to
  // the first one it leaves to the PMD; the rest of that burst goes to the
  // PMD too (still correct: the PMD has the same flows), not counted as
  // hardware hits. Not the default: with thousands of concurrent
  // microflows almost every burst holds a miss early, so the rules of the
  // others would see few hits and be demoted as idle (p2p-10kflows: 73 of
  // 10,000 flows stayed in hardware).
  virtual void set_keep_order(bool on) = 0;

  // --- injected faults (each is also counted in stats().injected_failures) ---
  // The next n creates (sync, or async at push()) fail with errnum
  // (positive errno: ENOTSUP, EEXIST, EIO, ...); n = 0 cancels.
  virtual void fail_next_creates(unsigned n, int errnum) = 0;
  virtual void fail_next_destroys(unsigned n, int errnum) = 0;
  virtual void fail_next_queries(unsigned n, int errnum) = 0;
  // Every create fails with ENOSPC ("table full") while on, whatever the
  // occupancy.
  virtual void set_table_full(bool on) = 0;
  // Shrinks or grows the tables (rules already in stay; new ones need room).
  // Fails (invalid_argument) when either exceeds the board's offload_flows.
  virtual Status set_capacity(uint32_t exact, uint32_t masked) = 0;
  // Device reset: forgets every rule and every queued operation (their
  // completions report ENODEV), bumps the reset generation. Handles from
  // before the reset then fail with ENODEV. Templates and tables survive
  // (the model keeps the configuration, as a driver re-applies it).
  virtual void reset() = 0;
  // Cancels every injected fault (and table_full); keeps the capacities.
  virtual void clear_faults() = 0;

  // "create: 3 x EIO, destroy: none, query: none, table-full: off,
  //  capacity 61440+4096, async on, resets 1"
  virtual std::string describe() const = 0;
  virtual SimNicStats stats() const = 0;
};

// The sim backend's model, or nullptr when `b` is not a sim backend or the
// sim backend was made with offload_flows = 0.
SimNic* sim_nic(Backend& b);

}  // namespace keel::hal::sim

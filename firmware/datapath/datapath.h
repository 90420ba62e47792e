// Datapath — the ports, the PMD threads, and the control-thread API to the
// forwarding state: cross-connects and datapath flows (megaflows).
//
// Life cycle: add_port() for every port; flows and cross-connects may be set
// at any time; start() assigns rx queues round-robin and starts the PMDs;
// stop() joins them; stop_ports() flushes outputs. Ports cannot be added
// after start() yet.
//
// Flows: a datapath flow is installed in every PMD's table (as Open
// vSwitch's dpctl/add-flow does), all or nothing: if one PMD refuses, the
// copies already installed are removed again.
//
// Thread-safety: the flow methods (flow_*, flows_del, reclaim) may be called
// from the control thread and the revalidator: they serialise on a mutex
// that no PMD ever takes. The other methods except the "PMD side" ones are
// for the control thread only. The cross-connect table is written by the control thread and
// read by the PMDs: one atomic port number per entry, release store /
// relaxed load (the port object it names is immutable while PMDs run).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "datapath/pmd.h"
#include "flow/dp_actions.h"
#include "flow/match.h"
#include "keel/hal/backend.h"
#include "keel/hal/port.h"

namespace keel::datapath {

inline constexpr unsigned kMaxPorts = kMaxDpPorts;

struct DatapathConfig {
  std::vector<int> pmd_cores;  // one PMD per entry; -1 = unpinned
  uint32_t pmd_idle_sleep_us = 0;
  PmdConfig pmd;
};

// A megaflow's statistics by flow id: the terse dump (no key, no actions).
struct FlowStats {
  unsigned pmd;
  Ufid ufid;
  uint64_t packets, bytes, used_ns;
  uint16_t tcp_flags;
};

// One flow of one PMD, for batch removal / modification.
struct PmdFlowRef {
  unsigned pmd;
  flow::Match match;
};

// A megaflow as the control thread sees it (one per PMD that holds it).
struct FlowView {
  unsigned pmd;
  Ufid ufid;
  flow::Match match;
  std::string actions;  // datapath actions text
  uint64_t packets, bytes, used_ns;
  uint16_t tcp_flags;
  unsigned mask_u0, mask_u1;  // miniflow_bits of the mask
};

class Datapath {
 public:
  explicit Datapath(DatapathConfig cfg);
  ~Datapath();

  // Port numbers start at 1 (0 is reserved, as for Open vSwitch's LOCAL).
  Result<uint16_t> add_port(std::unique_ptr<hal::Port> port);
  hal::Port* port(uint16_t id) const;
  hal::Port* find_port(std::string_view name) const;
  std::vector<hal::Port*> ports() const;
  // Sets a port's MTU (hal::Port::set_mtu: kMinMtu..kMaxMtu, applied to
  // the device; nothing changes on error). Control thread, while PMDs run:
  // the PMDs' tx picks the new frame limit up at their next burst.
  Status set_port_mtu(uint16_t id, uint32_t mtu);

  // Every packet received on `in` leaves through `out` without lookup;
  // nullopt removes it.
  void set_xconnect(uint16_t in, std::optional<uint16_t> out);
  std::optional<uint16_t> xconnect(uint16_t in) const;

  // --- datapath flows ---
  // Installs a megaflow (in_port must be exact; recirc_id is made exact).
  // With `modify`, an existing flow with the same key/mask gets the new
  // actions instead (error if there is none, like dpctl/mod-flow).
  Status flow_put(const flow::Match& match, const flow::DpActions& actions, std::optional<Ufid> ufid,
                  bool modify);
  Status flow_del(const flow::Match& match);
  Status flow_del(const Ufid& ufid);
  std::vector<FlowView> flow_dump() const;
  // The terse dump: flow ids and statistics only (what the revalidator
  // reads every round).
  void flow_stats(std::vector<FlowStats>& out) const;
  size_t flow_count() const;
  // Removes these flows (each from its PMD), requests posted in batches;
  // returns how many were found and removed.
  size_t flows_del(std::span<const PmdFlowRef> flows);
  // New actions for one PMD's flow.
  Status flow_modify(unsigned pmd, const flow::Match& match, const flow::DpActions& actions);
  void flow_flush();
  // Frees flows the PMDs have retired (called by the control thread).
  void reclaim();

  Status start(std::vector<hal::Backend*> backends);
  bool running() const { return running_; }
  void stop();
  void stop_ports();

  const std::vector<std::unique_ptr<Pmd>>& pmds() const { return pmds_; }

  // Waits until every port whose input can run out has drained and every PMD
  // has finished a whole iteration after that, so everything received has
  // been forwarded. Returns false if `timeout_ms` passed first.
  bool wait_drained(uint64_t timeout_ms);

  // --- slow path (ofproto's handler thread) ---
  // While on, PMDs hand misses and userspace() packets to their upcall
  // channels (upcall.h); while off they drop them as lost.
  void set_upcalls_enabled(bool on) { upcalls_enabled_.store(on, std::memory_order_release); }
  bool upcalls_enabled() const { return upcalls_enabled_.load(std::memory_order_relaxed); }
  // A megaflow for an upcall answer (or a test): in_port must be exact and
  // name a port; recirc_id is made exact. Allocates; free with free_megaflow().
  Result<Megaflow*> build_megaflow(const flow::Match& match, const flow::DpActions* actions,
                                   const Ufid& ufid) const;
  // The flow id dp-flow add gives a match without an explicit ufid.
  static Ufid ufid_for(const flow::Match& match);
  // Releases the packets of records queued for the slow path that nobody
  // will answer (the handler stopped): call after the handler has stopped.
  void drop_pending_upcalls();

  // --- PMD side ---
  uint16_t xconnect_fast(uint16_t in) const { return xconnect_[in].load(std::memory_order_relaxed); }
  hal::Port* port_fast(uint16_t id) const { return ports_[id].get(); }
  struct TxQueue {
    uint16_t queue = 0;
    bool shared = false;
  };
  TxQueue txq(unsigned pmd, uint16_t id) const { return txqs_[pmd][id]; }
  void lock_txq(uint16_t id, uint16_t q);
  void unlock_txq(uint16_t id, uint16_t q);

 private:
  Status flow_del_locked(const flow::Match& match);
  std::vector<FlowView> flow_dump_locked() const;
  void reclaim_locked();

  DatapathConfig cfg_;
  std::atomic<bool> upcalls_enabled_{false};
  mutable std::mutex flow_mu_;  // control thread vs revalidator; never a PMD
  std::array<std::unique_ptr<hal::Port>, kMaxPorts> ports_{};
  uint16_t n_ports_ = 0;
  std::array<std::atomic<uint16_t>, kMaxPorts> xconnect_{};
  std::vector<std::unique_ptr<Pmd>> pmds_;
  std::vector<std::array<TxQueue, kMaxPorts>> txqs_;
  // One spinlock per (port, tx queue), used only for shared queues.
  std::unique_ptr<std::atomic_flag[]> txq_locks_;
  bool running_ = false;
};

// UFID text "ufid:xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" both ways.
std::string format_ufid(const Ufid& u);
std::optional<Ufid> parse_ufid(std::string_view s);

}  // namespace keel::datapath

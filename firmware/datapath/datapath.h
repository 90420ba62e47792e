// Datapath — the ports, the PMD threads, and the control-thread API to the
// forwarding state: cross-connects and datapath flows (megaflows).
//
// Life cycle: add_port() for every port; flows and cross-connects may be set
// at any time; start() assigns the rx queues (rxq_sched.h's plan_rxqs) and
// starts the PMDs; stop() joins them; stop_ports() flushes outputs. Ports
// cannot be added after start() yet.
//
// Reconfiguration while forwarding, as Open vSwitch reloads its PMDs:
// reschedule() (pmd-rxq-rebalance, a change of pmd-rxq-assign /
// pmd-rxq-isolate / a port's pmd-rxq-affinity, the auto load balancer)
// computes a new poll list per PMD from the queues' measured cycles and
// hands it to each PMD whose list changes: every such PMD is parked first
// (Pmd::pause(): between two iterations, its last burst processed and sent,
// nothing held), then the lists are swapped, then they resume — so no two
// PMDs ever poll one queue and no packet received is dropped. A queue's
// load history is an RxqLoad per (port, queue) the Datapath owns: it
// follows the queue to its new PMD. set_pmd_cores() at run time parks every
// PMD, stops and joins the removed ones (their megaflows are freed with
// them), starts the new ones (empty tables), recomputes the tx queues and
// reschedules; the slow path must be stopped around it (see
// Thread-safety; control::System::set_pmd_cores does it). set_port_rxqs()
// parks every PMD while the port restarts with its new queue count.
//
// Offline runs: when the boot allows it (allow_offline(), for keel
// --exit-when-drained) and every port that receives anything replays a
// finite capture (hal::Port::InputKind::finite_replay: a pcap in= with
// loop>=1), start() puts the datapath in offline mode, for the run's life:
// keel is then a what-if tool rather than a NIC. Every PMD with rx queues
// reads its inputs merged by record timestamp (ties in port order), never
// drops a packet for want of an upcall record (it stops reading instead:
// backpressure), and emits, per output port, its packets in the order
// their inputs arrived, as Open vSwitch processing them one at a time
// would (pmd.h, "Offline mode"; the handler's part is in ofproto/udpif.h).
// Which PMD reads what (assign_offline_rxqs()):
//   * single-queue inputs, and every input when there is one PMD: PMD 0,
//     a multi-queue replay merged into its queue 0 first, in file order
//     (hal::Port::merge_rx_queues). One reader: the exact Open vSwitch
//     order on every output port (what tests/conformance relies on);
//   * with several PMDs, a multi-queue replay (`pcap:in=X,rxq=N`: the user
//     asked for an RSS spread) keeps its queues, queue q on PMD q % n. A
//     5-tuple hashes to one queue, so per-flow order is kept on every
//     output port; the order across flows read by different PMDs is not
//     (as on a NIC), and neither is the timestamp merge across PMDs. Still
//     lossless: each PMD applies backpressure to its own queues only.
// Otherwise (any live input) nothing changes: PMDs never wait; what the
// slow path can't take is dropped and counted.
//
// Flows: a datapath flow is installed in every PMD's table (as Open
// vSwitch's dpctl/add-flow does), all or nothing: if one PMD refuses, the
// copies already installed are removed again.
//
// Thread-safety: the flow methods (flow_*, flows_del, reclaim) may be called
// from the control thread and the revalidator: they serialise on a mutex
// that no PMD ever takes. The other methods except the "PMD side" ones are
// for the control thread only. pmds() — the vector and the PMD objects in
// it — changes only in set_pmd_cores(), on the control thread, while no
// other thread looks at it: before start(), or with the slow path (the
// Udpif's handler and revalidator, the only other threads that iterate
// pmds() or call the flow methods) stopped and joined; a removed PMD is
// destroyed only after it was stopped and its upcall records released.
// The PMDs' poll lists, the tx queue table (txq()) and a port's queue count
// change only while every PMD that could read them is parked
// (Pmd::pause(): a release/acquire handshake, no lock on the fast path).
// The cross-connect table is written by the control thread and read by the
// PMDs: one atomic port number per entry, release store /
// relaxed load (the port object it names is immutable while PMDs run). The
// VLAN limit is one atomic the control thread stores and each PMD loads
// (relaxed) once per burst; a burst is parsed under one limit.
// offline() is an atomic written by start() before the PMDs start and read
// by the slow path's handler (after it popped a record from a PMD).
// Bonds (bond_*) and send_packet() serialise on bond_mu_, a mutex no PMD
// takes (PMDs see bond tables only through their request rings:
// bond_table.h); set_pmd_cores() holds it too while it changes pmds(), so
// send_packet() may come from any thread. bond_mu_ is never held with
// flow_mu_ except by set_pmd_cores() (bond_mu_ first).
// Vports (add_vport/del_vport) are added and removed by the control thread;
// their table is guarded by vport_mu_ (no PMD takes it; any thread may call
// vport()/vports()), and each id's packed type+port (vport_fast()) is one
// atomic the PMDs load (acquire) when they run tnl_pop or check an in_port.
// Offload (the engine's API above): offload_enabled and the promotion
// thresholds are relaxed atomics any thread stores and each PMD loads once
// per burst. Every engine-facing method takes flow_mu_ (the engine's
// thread is one more flow-method caller, and pmds_ cannot change under it:
// set_pmd_cores holds it): offload_poll() pops the PMDs' offload rings
// (bounded MPMC rings used single-producer: the PMD pushes; one consumer at
// a time, the engine's thread); offload_scan and offload_flow read flows
// as flow_dump does; add_hw_stats and set_flow_offload store the engine's
// Megaflow fields (one writer: whoever holds the mutex); set_flow_mark and
// clear_flow_mark post to the PMD's request ring and wait, holding it, as
// flow_put does (the PMD owns the mark table and Megaflow::mark).
// offload_sync_ is written by the control thread while no dump runs and
// called by flow_stats()/flow_dump() before they lock flow_mu_, on the
// caller's thread: the hook may take flow_mu_ (add_hw_stats) but must not
// be called from a thread holding it, nor from the engine's own thread if
// it waits for that thread (the engine never dumps through these).
// The scheduling settings (pmd-rxq-assign, -isolate, affinities) and the
// AutoLb are the control thread's; the RxqLoads are allocated by add_port()
// and freed with the Datapath (pmd.h says who writes them).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "datapath/bond_table.h"
#include "datapath/offload_hooks.h"
#include "datapath/pmd.h"
#include "datapath/rxq_sched.h"
#include "flow/dp_actions.h"
#include "flow/match.h"
#include "keel/hal/backend.h"
#include "keel/hal/port.h"

namespace keel::datapath {

inline constexpr unsigned kMaxPorts = kMaxDpPorts;
static_assert(kExecMaxVports == kMaxPorts, "tnl_pop indexes the vport table by port id");

struct DatapathConfig {
  std::vector<int> pmd_cores;  // one PMD per entry; -1 = unpinned
  uint32_t pmd_idle_sleep_us = 0;
  PmdConfig pmd;
};

// Virtual ports (vports): datapath ports with no hal::Port, in the same id
// space as the hal ports (1..kMaxPorts-1, lowest free id), as Open
// vSwitch's dpif-netdev has its tunnel and internal ports:
//   internal  a bridge's LOCAL port (named as the bridge; `ip-add` creates
//             it): the out_port(M) a tnl_push continues from;
//   vxlan, geneve, gre   one per (type, UDP destination port), named as
//             Open vSwitch names them (vxlan_sys_4789, genev_sys_6081,
//             gre_sys); tnl_pop(N) decapsulates per N's type and port.
// A vport never transmits: a megaflow may have one as in_port (packets after
// tnl_pop), but an output to one is refused by flow_put/build_megaflow.
enum class VportType : uint8_t { internal, vxlan, geneve, gre };
const char* vport_type_name(VportType t);  // "internal", "vxlan", "geneve", "gre"

struct Vport {
  uint16_t id = 0;
  std::string name;
  VportType type = VportType::internal;
  uint16_t udp_port = 0;  // vxlan/geneve: the UDP destination port it listens on (host order); else 0
};

// Open vSwitch's name for a tunnel vport: "vxlan_sys_4789", "genev_sys_6081", "gre_sys".
std::string tunnel_vport_name(VportType t, uint16_t udp_port);

// A megaflow's statistics by flow id: the terse dump (no key, no actions).
// packets/bytes include what its hardware rules counted (Megaflow::hw_*),
// used_ns is the later of the software and hardware last hits.
struct FlowStats {
  unsigned pmd;
  Ufid ufid;
  uint64_t packets, bytes, used_ns;
  uint16_t tcp_flags;
  uint32_t slot;  // the flow's slot in its PMD's table (Megaflow::index): flows_modify finds it there
};

// One flow of one PMD, for batch removal / modification.
struct PmdFlowRef {
  unsigned pmd;
  flow::Match match;
};
// New actions for one flow of one PMD (flows_modify), found by its slot
// and ufid as a dump reported them (gone or replaced since: not changed).
// The caller keeps `actions` alive during the call.
struct PmdFlowMod {
  unsigned pmd;
  uint32_t slot;
  Ufid ufid;
  const flow::DpActions* actions;
};

// A removed flow's counts when it went (flows_del).
struct FlowFinal {
  uint64_t packets = 0, bytes = 0;
};

// Where a datapath flow runs, as dpctl/dump-flows -m says it
// (`offloaded:partial, dp:ovs` / `offloaded:yes, dp:dpdk`). Every flow is
// `none` until the offload issue sets the others.
enum class FlowOffload : uint8_t { none, partial, full };

// A megaflow as the control thread sees it (one per PMD that holds it).
struct FlowView {
  unsigned pmd;
  int pmd_core = 0;  // the PMD's Pmd::display_core() (flow-dump's header)
  Ufid ufid;
  flow::Match match;                  // key & mask (what the flow matches)
  flow::FlowKey shown_key;            // the unmasked key that made it (Megaflow::shown_key), else match.key
  std::string actions;                // datapath actions text, ports as numbers
  std::vector<uint8_t> action_bytes;  // the encoded actions (empty: drop), e.g. to print port names
  FlowOffload offload = FlowOffload::none;  // Megaflow::offload
  // Totals: the PMD's counts plus the hardware's (hw_packets, hw_bytes of
  // them); used_ns the later of the two last hits.
  uint64_t packets, bytes, used_ns;
  uint64_t hw_packets = 0, hw_bytes = 0;
  uint16_t tcp_flags;
  unsigned mask_u0, mask_u1;  // miniflow_bits of the mask
  uint32_t slot = 0;          // Megaflow::index (see FlowStats)
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
  // --- virtual ports (see VportType) ---
  // Adds a vport; any time, also while forwarding (the PMDs see it through
  // an atomic per id). Errors: a port or vport of that name exists, no free
  // id, a tunnel type without a UDP port (vxlan, geneve) or with one (gre,
  // internal).
  Result<uint16_t> add_vport(std::string name, VportType type, uint16_t udp_port = 0);
  // Removes a vport: flows with it as in_port or popping to it should be
  // gone first (the caller's: the revalidator removes them); a packet that
  // still reaches tnl_pop(id) afterwards is dropped and counted.
  Status del_vport(uint16_t id);
  std::optional<Vport> vport(uint16_t id) const;
  std::optional<Vport> find_vport(std::string_view name) const;
  std::vector<Vport> vports() const;  // id order
  bool is_vport(uint16_t id) const { return id < kMaxPorts && vport_fast(id) != 0; }

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
  // `key_as_written` (may be null): the unmasked key flow-dump shows for it
  // (Megaflow::shown_key); null shows match.key.
  Status flow_put(const flow::Match& match, const flow::DpActions& actions, std::optional<Ufid> ufid,
                  bool modify, const flow::FlowKey* key_as_written = nullptr);
  Status flow_del(const flow::Match& match);
  Status flow_del(const Ufid& ufid);
  std::vector<FlowView> flow_dump() const;
  // The same dump, one flow at a time into one FlowView the callback may
  // read but not keep (its strings and vectors are reused): what a caller
  // that takes a few fields of each flow uses, instead of holding ~2 KB of
  // views per flow at once. `fn` runs under the flow mutex: it must not call
  // back into the datapath's flow functions.
  void flow_dump_each(const std::function<void(const FlowView&)>& fn) const;
  // The terse dump: flow ids and statistics only (what the revalidator
  // reads every round).
  void flow_stats(std::vector<FlowStats>& out) const;
  size_t flow_count() const;
  // Removes these flows (each from its PMD), requests posted in batches;
  // returns how many were found and removed.
  // `finals`, when given, gets each flow's counts when it went, in the
  // order of `flows` (zero for one not found): the packets that hit it
  // after the caller's last look still reach its rules.
  size_t flows_del(std::span<const PmdFlowRef> flows, std::vector<FlowFinal>* finals = nullptr);
  // New actions for one PMD's flow.
  Status flow_modify(unsigned pmd, const flow::Match& match, const flow::DpActions& actions);
  // The same for many flows, by slot (a round after a flow-mod may change
  // every flow): each PMD gets one request of up to
  // FlowRequest::kMaxSlotMods flows at a time, all PMDs at once; returns
  // how many were found and changed.
  size_t flows_modify(std::span<const PmdFlowMod> mods);
  void flow_flush();
  // Frees flows the PMDs have retired (called by the control thread).
  void reclaim();

  // --- bonds: lb_output bucket tables (bond_table.h; ARCHITECTURE idea 2) ---
  // Installs or replaces bond `id`'s table (1..kMaxBondId) in every PMD,
  // through each PMD's request ring (a PMD not running takes it at once);
  // every member must be a datapath port or kNoBondMember. A PMD started
  // later (set_pmd_cores) gets every table. Control thread (any writer
  // holding the Ofproto writer mutex); all or nothing.
  Status bond_set(uint32_t id, const BondMembers& members);
  // Removes it from every PMD (lb_output(id) then drops, counted); its
  // counters go with it. No such bond: not_found.
  Status bond_del(uint32_t id);
  // The bond ids installed, ascending.
  std::vector<uint32_t> bond_ids() const;
  // Per-bucket packets and bytes summed over the PMDs since the bond was
  // created (relaxed reads of the PMDs' counters; a PMD removed by
  // set_pmd_cores() leaves its counts behind, so the sums never go down);
  // nullopt: no such bond.
  std::optional<BondBucketStats> bond_stats(uint32_t id) const;
  // What every PMD holds now, PMD order then bond id (pmd-bond-show).
  std::vector<PmdBondView> bond_dump() const;

  // --- packets from the control plane (LACPDUs, learning packets) ---
  // Copies `frame` into a buffer of the port's backend and hands it to a
  // PMD (the first running one), which sends it on `port` between bursts
  // with its own tx queue (Pmd::post_tx; counted as a tx of that port and
  // in the PMD's ctl_tx). Never waits for the PMD: a full hand-off ring is
  // an error (counted: ctl_tx_full). A frame shorter than 14 bytes, no such
  // port, no free buffer: an error, nothing sent. Any thread. Before
  // start() / after stop(): sent at once on the caller's thread (tx queue 0).
  Status send_packet(uint16_t port, std::span<const uint8_t> frame);

  // Before start(): whether an all-replay run may go offline (see above).
  void allow_offline(bool on) { offline_allowed_ = on; }
  Status start(const std::vector<hal::Backend*>& backends);
  bool running() const { return running_; }
  // Decided by start(); fixed until stop().
  // Relaxed: written before the PMDs start; whoever learns of a packet from
  // them (a ring pop) sees it.
  bool offline() const { return offline_.load(std::memory_order_relaxed); }
  void stop();
  void stop_ports();

  const std::vector<std::unique_ptr<Pmd>>& pmds() const { return pmds_; }
  // Drop accounting (drop_stats.h) summed over the PMDs, those removed by
  // set_pmd_cores included (control thread, while pmds() cannot change).
  DropTotals drop_totals() const;
  // The PMD threads, one per core (-1: unpinned), as Open vSwitch's
  // pmd-cpu-mask sets them. A PMD whose core and index stay keeps its
  // flows; a new one (or one whose index changes: indices are dense, in
  // core-list order) starts with an empty table. While running: the slow
  // path must be stopped (see Thread-safety); `forgotten` gets the PMD
  // indices whose PMD is gone or new (the slow path forgets their ukeys).
  // Refused in an offline run.
  Status set_pmd_cores(std::vector<int> cores, std::vector<unsigned>* forgotten = nullptr);
  const std::vector<int>& pmd_cores() const { return cfg_.pmd_cores; }
  // Every PMD stops (or starts again) polling its rx queues, new PMDs
  // included, and keeps executing the slow path's answers; then
  // wait_upcalls_idle() waits until nothing is in flight to the slow path
  // (false: not within timeout_ms). Used around stopping the slow path.
  void hold_rx(bool on);
  bool wait_upcalls_idle(uint64_t timeout_ms);

  // --- rx queue scheduling (rxq_sched.h; Open vSwitch's other_config) ---
  void set_rxq_assign(RxqAssignMode m) { sched_mode_ = m; }
  RxqAssignMode rxq_assign() const { return sched_mode_; }
  void set_rxq_isolate(bool on) { sched_isolate_ = on; }
  bool rxq_isolate() const { return sched_isolate_; }
  // A port's other_config:pmd-rxq-affinity, "0:3,1:7" (queue:core, as
  // Open vSwitch's parse_affinity_list; empty: none). Takes effect at the
  // next reschedule().
  using RxqAffinity = std::vector<std::pair<uint16_t, int>>;
  static Result<RxqAffinity> parse_rxq_affinity(std::string_view text);
  static std::string format_rxq_affinity(const RxqAffinity& a);
  Status set_rxq_affinity(uint16_t port, RxqAffinity a);
  const RxqAffinity& rxq_affinity(uint16_t port) const { return affinity_[port]; }
  // Assigns every rx queue again now (while running; before start() the
  // assignment is start()'s). Logs what Open vSwitch logs (plan messages).
  // Refused in an offline run.
  Status reschedule();
  // The queues as the scheduler sees them (port order, queue order), with
  // their measured cycles; and which PMD polls each now (-1: none).
  std::vector<SchedRxq> sched_rxqs() const;
  std::vector<int> current_pmd_of(std::span<const SchedRxq> rxqs) const;
  SchedConfig sched_config() const {
    SchedConfig c{cfg_.pmd_cores, sched_mode_, sched_isolate_, {}};
    for (const auto& p : pmds_) c.shown_cores.push_back(p->display_core());
    return c;
  }
  // pmd-auto-lb: the control thread calls auto_lb_tick() about once a
  // second; it rebalances when AutoLb::tick says so. True if it did.
  AutoLb& auto_lb() { return auto_lb_; }
  void configure_auto_lb(const AutoLbConfig& c);
  bool auto_lb_tick(uint64_t now_ms);
  // The load history of a port's rx queue (the Datapath's, see the top).
  RxqLoad& rxq_load(uint16_t port, uint16_t q) const { return (*rxq_loads_[port])[q]; }

  // A port's rx queue count (Open vSwitch's options:n_rxq): every PMD is
  // parked while the port restarts (hal::Port::set_queue_count, tx queues
  // as they are), then the queues are scheduled again. On error nothing
  // changes (the port keeps its queues and is polled again). Its flows stay.
  Status set_port_rxqs(uint16_t id, uint16_t n_rx);

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
  // `shown_key` (may be null) becomes Megaflow::shown_key: the upcall's
  // packet key, or a key as written (anything outside the mask is kept).
  Result<Megaflow*> build_megaflow(const flow::Match& match, const flow::DpActions* actions, const Ufid& ufid,
                                   const flow::Miniflow* shown_key = nullptr) const;
  // VLAN tags in a datapath flow, as Open vSwitch's userspace datapath has
  // them (the upcall handler's megaflows; flow_del() and dp-flow get fall
  // back to it, so that flow-dump's text of such a flow finds it; dp-flow
  // add takes its match as written):
  //  * a netlink flow key cannot wildcard whether there is a tag, so an
  //    outer TCI nothing matched is exact in VID and CFI
  //    (dpif_netdev_flow_put(): "vlan(vid=10)" in every tagged megaflow);
  //  * each tag's TPID is the EtherType of its level, always exact. keel's
  //    key holds the innermost EtherType in dl_type and the tags apart, so
  //    the TPID of every tag up to and including the first absent one is
  //    exact (0 for the absent one): whether each tag is there is matched,
  //    and a flow set up under one vlan-limit never matches a key parsed
  //    under another;
  //  * Open vSwitch's text for a tag cut short,
  //    "eth_type(0x8100),vlan(vid=0,cfi=0),encap()" (or, inner,
  //    "eth_type(0x8100),encap()"), is keel's key of such a frame: dl_type
  //    the TPID, no tag.
  // Idempotent; the key may hold bits outside the mask (a packet's key).
  static void mask_vlans(flow::Match& m);
  // The flow id dp-flow add gives a match without an explicit ufid.
  static Ufid ufid_for(const flow::Match& match);
  // Releases the packets of records queued for the slow path that nobody
  // will answer (the handler stopped): call after the handlers and the
  // PMDs have stopped (a record's follower block is its PMD's).
  void drop_pending_upcalls();

  // How many VLAN tags the PMDs' parser keys (Open vSwitch's vlan-limit:
  // 0 = no limit, i.e. the key's two; default 1; see packet/parser.h). Set
  // by the control thread, read by each PMD once per burst (relaxed). A
  // change needs no flush: every megaflow matches exactly which tags its
  // packet had up to the first absent one (ofproto/udpif.cpp), so a flow
  // set up under one limit never matches a key parsed under another
  // differently.
  void set_vlan_limit(unsigned n) { vlan_limit_.store(n, std::memory_order_relaxed); }
  unsigned vlan_limit() const { return vlan_limit_.load(std::memory_order_relaxed); }

  // --- hardware offload (offload_hooks.h; the offload engine's thread) ---
  // While enabled, every PMD posts an OffloadEvent when it applies an
  // install, remove or modify of a megaflow (request or upcall answer), and
  // samples the microflows of flows with hw_want == 1. One relaxed load per
  // burst. Any thread.
  void set_offload_enabled(bool on) { offload_enabled_.store(on, std::memory_order_relaxed); }
  bool offload_enabled() const { return offload_enabled_.load(std::memory_order_relaxed); }
  // A microflow of a sampled flow is posted once (HotMicroflow) when it
  // reaches `packets` packets within `window_ns` (defaults 16 and 1 s;
  // packets 0 is taken as 1). Any thread; the PMDs read it per burst.
  void set_offload_promote(uint32_t packets, uint64_t window_ns);
  uint32_t offload_promote_packets() const { return promote_packets_.load(std::memory_order_relaxed); }
  uint64_t offload_promote_window_ns() const { return promote_window_ns_.load(std::memory_order_relaxed); }
  // Drains every PMD's event and hot-microflow rings into the spans (as many
  // as fit, PMD order); the counts. One consumer at a time (the engine).
  OffloadPollResult offload_poll(std::span<OffloadEvent> events, std::span<HotMicroflow> hot);
  // Items the PMDs could not post (ring full), summed over the PMDs: after
  // a loss the engine reconciles with offload_scan().
  uint64_t offload_events_lost() const;
  uint64_t offload_hot_lost() const;
  // Every live flow of every PMD, as `installed` events (under the flow mutex).
  void offload_scan(std::vector<OffloadEvent>& out) const;
  // PMD `pmd`'s flow in `slot` if it is still the flow `ufid` (under the
  // flow mutex); nullopt: gone.
  std::optional<OffloadFlowInfo> offload_flow(unsigned pmd, uint32_t slot, const Ufid& ufid) const;
  // Adds what the flow's hardware rules counted since the last call
  // (dpackets, dbytes) and raises hw_used_ns to used_ns (0: no hit). Under
  // the flow mutex; false when the flow is gone.
  bool add_hw_stats(unsigned pmd, uint32_t slot, const Ufid& ufid, uint64_t dpackets, uint64_t dbytes,
                    uint64_t used_ns);
  // Where the flow runs now (flow-dump -m) and whether its PMD samples its
  // microflows (hw_want: 0 no, 1 yes). Under the flow mutex; false: gone.
  bool set_flow_offload(unsigned pmd, uint32_t slot, const Ufid& ufid, FlowOffload where, uint8_t hw_want);
  // The PMD's mark table (partial offload): packets arriving with `mark`
  // (1..kMaxFlowMark) on the flow's in_port execute the flow's actions
  // without classification. The table is direct-mapped by mark (as many
  // entries as the PMD has flow slots, rounded up to a power of two): the
  // engine allocates marks densely from 1 and rarely sees a collision.
  // Posted to the PMD's request ring and waited for. Errors: bad mark,
  // no such flow (not_found), the mark's table entry holds another mark
  // (exists: choose another), the flow has a mark already (exists).
  // clear_flow_mark removes `mark`'s entry (ok if there is none): once it
  // returns, no packet of the PMD executes through it any more; a flow that
  // dies loses its entry first (before its `removed` event is posted).
  Status set_flow_mark(unsigned pmd, uint32_t slot, const Ufid& ufid, uint32_t mark);
  Status clear_flow_mark(unsigned pmd, uint32_t mark);
  // Called by flow_stats() and flow_dump() first, on the caller's thread,
  // before they take the flow mutex (full: flow_dump), so that they report
  // the hardware's counters of now. Set while no dump runs (the engine
  // registers it before it starts and clears it, with an empty function,
  // after it stopped); control thread.
  void set_offload_sync(std::function<void(bool full)> fn);

  // --- PMD side ---
  uint16_t xconnect_fast(uint16_t in) const { return xconnect_[in].load(std::memory_order_relaxed); }
  // A vport's type and UDP port, packed: 0 = no vport; else
  // (1 + VportType) << 16 | udp_port. Acquire: pairs with add_vport's
  // release store (the id's other tables are set before).
  uint32_t vport_fast(uint16_t id) const { return vport_info_[id].load(std::memory_order_acquire); }
  const std::atomic<uint32_t>* vport_table() const { return vport_info_.data(); }
  hal::Port* port_fast(uint16_t id) const { return ports_[id].get(); }
  struct TxQueue {
    uint16_t queue = 0;
    bool shared = false;
  };
  TxQueue txq(unsigned pmd, uint16_t id) const { return txqs_[pmd][id]; }
  void lock_txq(uint16_t id, uint16_t q);
  bool try_lock_txq(uint16_t id, uint16_t q) {
    return !txq_locks_[id * hal::Port::kMaxQueues + q].test_and_set(std::memory_order_acquire);
  }
  void unlock_txq(uint16_t id, uint16_t q);
  // How many PMDs steer onto shared tx queue q of port id (pmd.h, XPS):
  // changed by the PMDs with relaxed RMWs, a hint for the next to choose.
  std::atomic<uint32_t>& txq_users(uint16_t id, uint16_t q) {
    return txq_users_[id * hal::Port::kMaxQueues + q];
  }

 private:
  Status flow_del_locked(const flow::Match& match);
  // flows_del / flows_modify: requests per batch (fits a PMD's request ring
  // beside other posters), and posting one batch and waiting for it.
  static constexpr size_t kFlowBatch = 128;
  void post_flow_batch(std::span<const std::pair<Pmd*, FlowRequest*>> batch);
  std::vector<FlowView> flow_dump_locked() const;
  void flow_dump_each_locked(const std::function<void(const FlowView&)>& fn) const;
  // Offload: PMD pmd's live flow `ufid` in `slot`, or null (under flow_mu_).
  Megaflow* offload_find_locked(unsigned pmd, uint32_t slot, const Ufid& ufid) const;
  // Posts a set_mark / clear_mark request and waits (messages built here).
  Status mark_request(unsigned pmd, FlowRequest& req);
  void reclaim_locked();
  // start(), offline: which PMD polls which rx queue (see the top).
  void assign_offline_rxqs();
  void compute_txqs();
  // set_pmd_cores()'s change, under flow_mu_.
  Status change_pmds(std::vector<int> cores, std::vector<unsigned>* forgotten);
  // Hands each PMD its list of `plan` (the PMDs already parked when
  // `parked`; new PMDs not running yet are simply set).
  void apply_plan(std::span<const SchedRxq> rxqs, const SchedPlan& plan, bool parked);
  Status reschedule_parked(bool parked);
  static void drop_pending_upcalls(Pmd& pmd);
  // Bonds (bond_api.cpp), under bond_mu_: adds a PMD's counters of bond
  // `id` to `s`; keeps a PMD's counts before it goes (retired); gives a
  // new PMD (not running) every table.
  static void add_bond_counters(const Pmd& pmd, uint32_t id, BondBucketStats& s);
  void retire_bond_counters(const Pmd& pmd);
  void install_bonds(Pmd& pmd);

  DatapathConfig cfg_;
  std::atomic<bool> upcalls_enabled_{false};
  std::atomic<unsigned> vlan_limit_{packet::kDefaultVlanLimit};
  mutable std::mutex flow_mu_;  // control thread vs revalidator; never a PMD
  mutable std::mutex bond_mu_;  // bonds, send_packet, pmds_ changes; never a PMD
  // The bond tables as installed (what a new PMD gets), and the counts of
  // PMDs removed since each bond was created (bond_stats()).
  std::array<std::unique_ptr<BondMembers>, kMaxBondId + 1> bonds_{};
  std::array<std::unique_ptr<BondBucketStats>, kMaxBondId + 1> bond_retired_{};
  // What removed PMDs counted (drop_totals()): control thread (change_pmds).
  DropTotals drops_retired_;
  std::array<std::unique_ptr<hal::Port>, kMaxPorts> ports_{};
  uint16_t n_ports_ = 0;
  std::array<std::atomic<uint16_t>, kMaxPorts> xconnect_{};
  // Vports: the control thread's table (names), and the packed info the
  // PMDs read (vport_fast()). Written on the control thread only.
  mutable std::mutex vport_mu_;  // vports_ (slow-path readers vs control thread); never a PMD
  std::array<std::optional<Vport>, kMaxPorts> vports_{};
  std::array<std::atomic<uint32_t>, kMaxPorts> vport_info_{};
  std::vector<std::unique_ptr<Pmd>> pmds_;
  std::vector<std::array<TxQueue, kMaxPorts>> txqs_;
  // One spinlock per (port, tx queue), used only for shared queues.
  std::unique_ptr<std::atomic_flag[]> txq_locks_;
  std::unique_ptr<std::atomic<uint32_t>[]> txq_users_;
  bool running_ = false;
  std::vector<hal::Backend*> backends_;  // start()'s, for PMDs started later
  bool rx_held_ = false;
  RxqAssignMode sched_mode_ = RxqAssignMode::cycles;
  bool sched_isolate_ = true;
  std::array<RxqAffinity, kMaxPorts> affinity_{};
  std::array<std::unique_ptr<std::array<RxqLoad, hal::Port::kMaxQueues>>, kMaxPorts> rxq_loads_{};
  AutoLb auto_lb_;
  bool offline_allowed_ = false;
  std::atomic<bool> offline_{false};
  // Offload (see set_offload_enabled and below).
  std::atomic<bool> offload_enabled_{false};
  std::atomic<uint32_t> promote_packets_{kDefaultPromotePackets};
  std::atomic<uint64_t> promote_window_ns_{kDefaultPromoteWindowNs};
  std::function<void(bool)> offload_sync_;
};

// UFID text "ufid:xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" both ways.
std::string format_ufid(const Ufid& u);
std::optional<Ufid> parse_ufid(std::string_view s);

}  // namespace keel::datapath

// sim::SimNicModel — a software model of a NIC's rte_flow engine (what an
// mlx5 / BlueField e-switch does with the rules keel gives it), so that the
// offload engine, the datapath's MARK path and the commands are tested on
// any machine, with packets, counters and faults.
//
// How it relates to its neighbours: keel/hal/flow.h is the facade it
// implements (FlowEngine per port, HwIngress on rx); keel/hal/sim_nic.h is
// its control API (costs, faults, stats); sim_backend.cpp makes one model per
// backend and attaches every port it opens (SimNicPort below). The offload
// engine (firmware/offload) is its only caller on the control side; the
// PMDs reach it only through Port::rx() -> ingress().
//
// Tables (capacities from the board's offload_flows, SimOptions):
//   * exact-match table, 15/16 of offload_flows: the NIC's big hash tables.
//     A rule goes here when every field it matches is matched whole (each
//     field's mask all ones or zero: what the exact-match rules of hot
//     microflows are, and what an mlx5 hash matcher takes). Rules are
//     grouped by mask shape (tuple space, up to kMaxExactShapes shapes; a
//     rule of a further shape goes to the masked table) and found by a hash
//     of the masked key: one probe per shape per packet.
//   * masked table, the remaining 1/16 (at least 1): a TCAM-like list in
//     (group, priority, creation) order, scanned in order; rules with a
//     partial mask (an address prefix, some bits of a field) go here.
//   A packet is looked up in group 0: exact table first (among several exact
//   hits, the lowest priority number, then the oldest rule), then the masked
//   table; a jump continues in the named group with the rewritten packet (at
//   most kMaxJumps). A miss leaves the packet to the PMD untouched.
//
// Matching (parse_wire below): the model parses the wire packet as a NIC
// does: Ethernet, up to two VLAN tags (one is matched: a second vlan item is
// refused), IPv4 (options skipped; L4 only for a first fragment) or IPv6
// (L4 right after the fixed header only; a fragment header sets
// has_frag_ext), TCP/UDP/ICMP/ICMPv6, VXLAN on UDP port 4789. FlowEth::type
// is the EtherType after the tags (flow.h), as is FlowVlan::inner_type. An
// item that is present fixes which layer the packet has (eth / ipv4 / udp
// match only IPv4 UDP); a pattern that stops early matches any upper layer;
// eth without has_vlan in its mask and without a vlan item matches tagged
// and untagged frames (mlx5's reading). Rules on a port's engine match what
// that port receives; transfer rules match any port of the model, or the
// one their port_id / represented_port item names.
//
// Actions: one fate per rule (port_id / represented_port: forwarded by the
// "hardware" out of that sim port; drop; jump; queue / rss: left to the PMD)
// and, before it, in list order: set_mac_*, set_ipv4_* (IPv4 and L4
// checksums updated incrementally, as Open vSwitch's packet_set_* do: a zero
// UDP checksum stays zero), set_ipv6_* (L4 checksum), set_tp_*,
// of_push_vlan (a new outer tag with TCI 0, which the of_set_vlan_vid /
// pcp that follow fill: the tag Open vSwitch's push_vlan(vid,pcp) writes,
// DEI 0, whatever tag was there before), of_set_vlan_vid / pcp,
// of_pop_vlan; mark (delivered in the
// packet's metadata when the PMD gets the packet), count, age. A queue or
// rss action cannot move a packet to another rx queue after rx (the sim
// port already chose it): the model notes it and leaves the packet on the
// queue it came from. Mirroring (two port actions) is refused (ENOTSUP).
//
// Counters: every rule counts packets, bytes (the frame as received, before
// rewrites) and the last hit (hal::now_ns(), one clock read per burst), with
// relaxed fetch_add (a port's rx queues may be polled by several PMDs), so
// the counts are exact; query() reads them relaxed. Rules without a count
// action answer query() with ENOTSUP, as rte_flow does.
//
// Costs (SimNicCosts, busy-waited on the calling thread, outside every
// lock; kDefaultCosts below): a sync create/destroy costs one device round
// trip; the async API queues operations (no device cost), and push() hands
// the queue's batch to the device for async_batch_ns + n * async_rule_ns;
// the completions are then ready for pull(), in the order queued.
// postpone = false pushes the queue at once.
//
// Faults (sim_nic.h): the next N creates / destroys / queries fail with an
// errno, the table is full, the capacities shrink, the device resets (every
// rule and queued operation is forgotten, the reset generation moves, old
// handles answer ENODEV, and each port's engine refuses new rules with
// ENODEV until its reset_acknowledged(): what the rules forwarded stays as
// the ports counted it until the offload thread has taken stock).
//
// destroy_counted() removes a rule and reads its counters under the same
// lock: no hit between the last query and the removal goes uncounted.
//
// validate() checks what create() would refuse about the rule itself
// (items, actions, ports, queues), not the capacity or an injected fault:
// like a driver's, it is a hint, and create() decides.
//
// Handles: generation (16 bits) | slot sequence (24) | slot (24), never 0:
// a handle from before a reset, or of a destroyed rule whose slot was
// reused, is recognised and refused.
//
// Hardware tx (a rule's port action): the PMD polling the ingress queue runs
// the model, so the model sends on the egress port while that port's own
// PMD may be sending too. Each sim port's hw_tx() is safe against its
// tx_burst(): ring ports push onto their multi-producer tx ring, TAP ports
// write(2) one frame per call (atomic per frame), null and sample ports
// release, and pcap ports serialise their writer with a spin lock that
// tx_burst() and stop() take as well (one uncontended lock per burst). An
// egress port whose link is down, or a frame over its MTU limit, drops the
// packet (counted hw_tx_dropped). Hardware-forwarded packets are counted in
// the ingress port's rx_hw_forwarded and in the model's stats, not in the
// egress port's tx counters (those belong to its tx queues' owners).
//
// Thread-safety: the rule tables are read by PMDs (ingress(), once per
// burst, under the read side of a reader-writer spin lock) and changed by
// the offload thread (create / destroy / push / reset, under its write side,
// held only for the table update: no busy-wait, no allocation for a rule
// slot that already exists). A PMD can therefore wait for at most one table
// update (a hash insert or a masked-list insert of at most masked_capacity
// entries) — the model stands for hardware that arbitrates its own tables;
// nothing else is shared with PMDs. A burst with no rule at all in the
// model takes no lock (one relaxed load). Engine calls of all ports are
// serialised by one control mutex (several offload threads may drive
// engines of the same model); costs are busy-waited outside it. Faults,
// costs and flags are relaxed atomics; stats are relaxed counters.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "keel/hal/flow.h"
#include "keel/hal/port.h"
#include "keel/hal/sim_nic.h"

namespace keel::hal::sim {

class SimNicModel;
class SimPortEngine;

// Where each default cost comes from. None of these is a measurement of
// ours; they are orders of magnitude, settable (`SimNic::set_costs`, 0 for
// benchmarks of keel's own cost):
//   * sync create 20 us, destroy 10 us: rte_flow_create on mlx5 with the
//     synchronous (software/firmware steering) path is a round trip to the
//     device's firmware per rule; Open vSwitch's offload thread is commonly
//     reported in the tens of thousands of rules per second (assumed
//     ~50k/s).
//   * async 0.5 us per rule + 2 us per push: the template/queue API
//     (hardware steering, DPDK 22.11 mlx5 dv_flow_en=2) writes rules
//     through a send queue without firmware calls; NVIDIA presents it as
//     "millions of rules per second" (assumed ~2M/s in large batches).
//   * query 0.1 us per rule: mlx5 answers counter queries from a host
//     memory copy its bulk counter read refreshes (assumed).
inline constexpr SimNicCosts kDefaultCosts{
    .sync_create_ns = 20000,
    .sync_destroy_ns = 10000,
    .async_batch_ns = 2000,
    .async_rule_ns = 500,
    .query_ns = 100,
};

inline constexpr unsigned kMaxExactShapes = 32;
inline constexpr unsigned kMaxJumps = 8;
inline constexpr uint16_t kMaxFlowQueues = 16;    // FlowEngineInfo::max_queues
inline constexpr uint32_t kMaxQueueSize = 4096;   // FlowEngineInfo::queue_size

// Layer bits of SimKey::layers.
enum : uint16_t {
  kLayerEth = 1 << 0,
  kLayerVlan = 1 << 1,   // at least one tag
  kLayerQinQ = 1 << 2,   // two tags or more
  kLayerIpv4 = 1 << 3,
  kLayerIpv6 = 1 << 4,
  kLayerIp6Frag = 1 << 5,
  kLayerTcp = 1 << 6,
  kLayerUdp = 1 << 7,
  kLayerIcmp = 1 << 8,
  kLayerIcmp6 = 1 << 9,
  kLayerVxlan = 1 << 10,
};

// What the model matches on, for a packet (values) and a rule (key + mask of
// the same layout). Host byte order; no implicit padding (compared and
// hashed as 12 words).
struct SimKey {
  uint32_t group;
  uint32_t mark;
  uint32_t meta;
  uint16_t in_port;
  uint16_t layers;
  std::array<uint8_t, 6> eth_dst;
  std::array<uint8_t, 6> eth_src;
  uint16_t eth_type;  // after the VLAN tags
  uint16_t vlan_tci;  // outer tag
  uint32_t ip4_src;
  uint32_t ip4_dst;
  std::array<uint8_t, 16> ip6_src;
  std::array<uint8_t, 16> ip6_dst;
  uint32_t ip6_flow;  // 20-bit flow label
  uint16_t ip4_frag;  // flags + offset
  uint8_t ip_proto;
  uint8_t ip_tos;  // IPv4 TOS / IPv6 traffic class
  uint8_t ip_ttl;  // IPv4 TTL / IPv6 hop limit
  uint8_t tcp_flags;
  uint8_t icmp_type;
  uint8_t icmp_code;
  uint16_t tp_src;
  uint16_t tp_dst;
  uint32_t vni;
  uint8_t vxlan_flags;
  std::array<uint8_t, 3> pad;  // always zero
};
static_assert(sizeof(SimKey) == 96, "12 words, no implicit padding: keys compare and hash as words");
inline constexpr unsigned kSimKeyWords = sizeof(SimKey) / 8;

// Offsets of the parsed wire packet that the rewrite actions need.
struct WireLayout {
  uint16_t l3 = 0, l4 = 0;  // offsets (0: absent)
  uint8_t vlans = 0;        // tags seen (up to 2)
  bool ipv4 = false, ipv6 = false;
  bool later_fragment = false;  // IPv4 fragment with a non-zero offset
  uint8_t l4_proto = 0;         // 6, 17, 1, 58 when l4 != 0
};

// Parses a frame into a key (group/mark/meta/in_port left as given) and its
// layout. Never reads past len. Pure (unit-tested).
void parse_wire(const uint8_t* data, uint32_t len, SimKey& key, WireLayout& lay) noexcept;

// A pattern (and attributes) as key + mask: errors name the item. owner is
// the hal port id of the engine (the in_port of a non-transfer rule).
Status compile_pattern(const FlowAttr& attr, const FlowPattern& pattern, uint16_t owner, SimKey& key,
                       SimKey& mask, FlowError* err, const std::string& port, const char* op);
// Whether every field of the mask is all ones or zero (the exact table's).
bool mask_is_exact(const SimKey& mask) noexcept;

enum class SimFate : uint8_t { to_pmd, port, drop, jump };

struct SimActions {
  SimFate fate = SimFate::to_pmd;
  uint16_t out_port = kInvalidPort;  // hal id, fate port
  Port* out = nullptr;
  class SimNicPort* out_hw = nullptr;
  uint32_t jump_group = 0;
  bool has_mark = false, has_count = false;
  uint32_t mark = 0;
  uint16_t queue = 0;  // queue/rss: noted (see the top)
  uint64_t age_ns = 0;
  uint8_t n_edits = 0;
  std::array<FlowAction, kMaxFlowActions> edits{};  // set_*, push/pop/set vlan, in order
};

// Applies the rewrite actions to the frame (offsets re-derived after each
// VLAN push/pop). False when a push found no headroom (the packet is then
// dropped by the caller). Pure on the packet (unit-tested).
bool apply_edits(Packet& p, const SimActions& a) noexcept;

class SimNicModel;
using SimNicPtr = std::shared_ptr<SimNicModel>;  // see make_sim_nic()

// A sim port's side of the model: every sim port class derives from it.
class SimNicPort {
 public:
  SimNicPort();
  virtual ~SimNicPort();  // out of line: SimPortEngine is complete in sim_flow.cpp
  // Sends on behalf of the model's hardware; safe against the port's own
  // tx_burst() on any thread (see the top). Returns how many were taken (a
  // prefix); the caller releases the rest.
  virtual uint16_t hw_tx(std::span<Packet* const> pkts) noexcept = 0;

 protected:
  // The port's view of the model, nullptr when not attached.
  FlowEngine* nic_engine() const noexcept;
  // Each sim port's destructor calls this first, before its members go:
  // the model stops using the port (its rules are removed, a PMD in the
  // middle of a hardware tx to it is waited for).
  void detach_from_nic() noexcept;

 private:
  friend class SimNicModel;
  friend void attach_port(const SimNicPtr& nic, Port& port, SimNicPort& hw);
  SimNicModel* nic_ = nullptr;
  std::shared_ptr<SimNicModel> nic_owner_;  // keeps the model alive while attached
  std::unique_ptr<SimPortEngine> engine_;
};

// Reader-writer spin lock: readers (PMDs) share, one writer (the offload
// thread) excludes them. Writer-preferring: a waiting writer stops new
// readers. Neither side sleeps.
class RwSpin {
 public:
  void lock_shared() noexcept;
  void unlock_shared() noexcept { state_.fetch_sub(1, std::memory_order_release); }
  void lock() noexcept;
  void unlock() noexcept { state_.fetch_and(~kWriter, std::memory_order_release); }

 private:
  static constexpr uint32_t kWriter = 1u << 31;
  std::atomic<uint32_t> state_{0};  // writer bit | readers
};

// Makes the model of a sim backend (capacity: offload_flows, > 0). Shared:
// the backend and every attached port own it, because a port may outlive
// its backend (as it keeps the buffer pool alive, sim_ring_test) and
// detaches from the model in its destructor.
SimNicPtr make_sim_nic(uint32_t offload_flows);
// Attaches a just-opened sim port (control thread, before it is polled):
// gives it a flow engine and the model's HwIngress; the port keeps `nic`.
void attach_port(const SimNicPtr& nic, Port& port, SimNicPort& hw);
SimNic& as_control(SimNicModel& nic);

}  // namespace keel::hal::sim

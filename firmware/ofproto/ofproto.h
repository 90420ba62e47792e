// Ofproto — the OpenFlow side of the switch: its bridges, which datapath
// port belongs to which bridge (and under which OpenFlow port number), the
// Rcu that protects everything the slow-path threads read, the controller
// queue (packet-ins of the `controller` action) and the knobs of the upcall
// handler and revalidator. control::System owns one, built after the
// datapath; the CLI (cli/commands_ofproto.cpp) drives it.
//
// Threads:
//   * control thread (consoles, config) and the maintenance thread (expiry,
//     reclamation, the bonds' tick: run_bonds(), every kMaintenanceMs): the
//     writers. They serialise on
//     writer_mutex(): every call to a writer method below, and to a Bridge
//     writer method, holds it. (The CLI takes it per command; start() runs
//     the maintenance thread, which takes it per tick.)
//   * the upcall handler and revalidator threads: readers. Each registers
//     an Rcu slot (rcu().register_slot(), from the control thread before it
//     starts), calls rcu().quiesce(slot) between batches and goes offline
//     while it sleeps. Between two quiescent points it may use what
//     port_owner(), find_bridge() and Bridge's reader methods return.
//   * controller queue: any thread pushes, the control thread pops; its own
//     mutex (no PMD ever touches it).
//   * knobs: relaxed atomics, set by the control thread, read by anyone.
//
// Bonds (add_bond): the Ofproto owns each bond's BondPort (writers only)
// and shares its Bond and Lacp with the members' PortConfigs, through which
// translation reaches them lock-free (their methods take their own
// mutexes, never held by a PMD). The maintenance tick feeds them link
// state, sends their LACPDUs and learning packets (Datapath::send_packet),
// pushes bucket tables (Datapath::bond_set / bond_del) and asks for a
// revalidation round when a decision translation made may have changed
// (Bridge::invalidate_translations, then the revalidate hook).
//
// Life cycle: a deleted bridge leaves the index and the bridge list at
// once and is freed after a grace period; so are replaced index snapshots.
// A deleted bond's members leave the bridge at once; its Bond and Lacp go
// with the last snapshot that names them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/status.h"
#include "datapath/bond_table.h"
#include "datapath/rcu.h"
#include "flow/of_actions.h"
#include "ofproto/bond.h"
#include "ofproto/bridge.h"
#include "ofproto/lacp.h"
#include "ofproto/tunnel.h"

namespace keel::datapath {
class Datapath;
}

namespace keel::ofproto {

// Where a datapath port lives in OpenFlow terms.
struct PortOwner {
  Bridge* bridge = nullptr;
  uint32_t ofport = 0;
};

// add_port's options: ovs-vsctl's Port columns tag, trunks, vlan_mode and
// Interface columns ofport_request, mtu_request, type
// (ofproto/port_columns.h parses them from ovs-vsctl's words).
struct PortOptions {
  static constexpr uint32_t kMinMtuRequest = 68, kMaxMtuRequest = 9216;
  std::optional<uint32_t> ofport;        // ofport_request; absent: the lowest free number
  std::optional<VlanMode> vlan_mode;     // absent: access if tag is set, else trunk
  std::optional<uint16_t> tag;           // 0..4095
  std::vector<uint16_t> trunks;          // empty: every VLAN (ignored by an access port, as in OVS)
  // Interface mtu_request, 68..9216 (the parser checks the range); absent:
  // the port's default MTU. Stored in PortConfig and printed back by the
  // running config; what it does to the port is the MTU code's business.
  std::optional<uint32_t> mtu_request;
  // Interface type as ovs-vsctl spells it ("", "system", "internal",
  // "dummy", "tap", "dpdk"); absent: any. Not stored: keel's port types are
  // its --port specs, so add_port only checks the port is of this type
  // (check_interface_type in ofproto/port_columns.h).
  std::optional<std::string> type;
  // Interface other_config:pmd-rxq-affinity ("0:3,1:7": rx queue 0 on the
  // PMD of core 3 ...; "" removes it) and options:n_rxq (1..16): applied to
  // the datapath port (Datapath::set_rxq_affinity, set_port_rxqs), stored in
  // PortConfig and printed back by the running config.
  std::optional<std::string> rxq_affinity;
  std::optional<uint16_t> n_rxq;
  // Interface options:KEY=VALUE of a tunnel (type=vxlan|geneve|gre), as
  // given and in order; add_port reads them with apply_tunnel_option()
  // once the type is known (ofproto/tunnel.h). Only a tunnel takes them.
  std::vector<std::pair<std::string, std::string>> tunnel_options;
};

// add_bond's request: ovs-vsctl add-bond's Port columns (BondSettings and
// the VLAN columns tag/trunks/vlan_mode in `port`), the member interfaces
// in order, and each member's Interface columns (ofport_request,
// mtu_request, type, options:n_rxq, other_config:pmd-rxq-affinity).
struct BondRequest {
  BondSettings settings;
  PortOptions port;
  std::vector<std::string> members;
  std::vector<PortOptions> ifaces;  // empty, or one per member
};

// A bond as the Ofproto runs it. Written by the writers (under the writer
// mutex): the control thread (configuration, bond-* commands) and the
// maintenance thread (ticks); show commands read it under the writer mutex.
// Translation never reads this: it reaches the Bond and Lacp through the
// members' PortConfigs.
struct BondPort {
  std::string name;
  Bridge* bridge = nullptr;
  uint32_t id = 0;                 // 1..kMaxBondId: lb_output(id), recirc(id), bond/show's Recirc-ID
  std::shared_ptr<Bond> bond;
  std::shared_ptr<Lacp> lacp;      // null: lacp=off
  std::shared_ptr<BondRecircLoads> loads;  // the recirculation scheme's bucket counters
  std::vector<std::string> members;
  // Maintenance state.
  bool dp_installed = false;       // Datapath::bond_set() done for id (lb_output in use)
  datapath::BondMembers pushed{};  // what the datapath holds then
  std::vector<int8_t> carrier;     // last link state polled per member (-1: never)
  uint64_t dp_errors = 0;          // bond_set/bond_del/send_packet failures (logged once each kind)
};

// One packet sent to the controller.
struct PacketIn {
  std::string bridge;
  uint32_t in_port = 0;
  uint8_t table_id = 0;
  uint64_t cookie = 0;
  flow::OfPacketInReason reason = flow::OfPacketInReason::action;
  uint16_t controller_id = 0;
  uint32_t total_len = 0;      // the packet's length
  std::vector<uint8_t> data;   // at most max_len bytes of it
  uint64_t time_ns = 0;
};

struct ControllerQueueStats {
  uint64_t queued = 0;   // pushed and accepted
  uint64_t dropped = 0;  // pushed while full
  size_t depth = 0;      // waiting now
};

// One rule as `ovs-ofctl dump-flows` (Open vSwitch 3.1, lib/ofp-flow.c
// ofputil_flow_stats_format) prints it, without the leading space:
// "cookie=0x0, duration=1.234s, table=0, n_packets=0, n_bytes=0,
// idle_age=1, priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2".
// Port numbers stay numbers (ovs-ofctl without --names). The actions as
// ovs-ofctl's default protocol (OpenFlow 1.0 + NXM) carries them: goto_table
// as resubmit(,N), no clear_actions, write_actions or push_vlan (they have
// no OpenFlow 1.0 encoding), as Open vSwitch prints them.
// show_stats false: ovs-ofctl --no-stats (no cookie when 0, no duration,
// no table 0, no counters, no ages; ofputil_flow_stats_format()).
// `match` (may be null): how the match prints (the bridge's TLV map, so a
// tun_metadataN mask over its mapped length prints as exact, as OVS).
std::string format_flow_stats(const OfRule& rule, uint64_t now_ns, bool show_stats = true,
                              const flow::OfFormatOptions* match = nullptr);

class Ofproto {
 public:
  static constexpr size_t kMaxBridges = 64;
  static constexpr size_t kControllerQueueCapacity = 1024;
  static constexpr uint32_t kMaintenanceMs = 100;

  explicit Ofproto(datapath::Datapath& dp);
  ~Ofproto();
  Ofproto(const Ofproto&) = delete;
  Ofproto& operator=(const Ofproto&) = delete;

  // Starts / stops the maintenance thread (rule expiry, reclamation).
  void start();
  void stop();

  // Writers hold this (see the top of the file).
  std::mutex& writer_mutex() { return writer_mu_; }

  // --- bridges (writer) ---
  Status add_bridge(std::string_view name);
  Status del_bridge(std::string_view name);  // its ports leave it; its rules go
  // --- bridges (anyone on the control thread; readers within a grace period) ---
  Bridge* find_bridge(std::string_view name) const;
  std::vector<Bridge*> bridges() const;  // sorted by name

  // --- ports (writer) ---
  // Maps datapath port `port` to an OpenFlow port of `bridge`. A datapath
  // port belongs to at most one bridge.
  Status add_port(std::string_view bridge, std::string_view port, const PortOptions& opts = {});
  // Replaces the VLAN settings (tag, trunks, vlan_mode) of `port`, on
  // whichever bridge has it, checked as add_port checks them; opts' other
  // fields are not read.
  Status set_port_vlan(std::string_view port, const PortOptions& opts);
  // bridge empty: whichever bridge has it. The datapath port's MTU goes
  // back to 1500 (as a re-created Open vSwitch netdev starts at its default).
  Status del_port(std::string_view bridge, std::string_view port);
  // `set interface PORT mtu_request=N|[]`. Absent ([]): only the request
  // goes, the port keeps its MTU until it leaves the bridge (what
  // ovs-vswitchd 3.1 does; the running config then no longer names an MTU,
  // so a reboot brings 1500). The port must be in a bridge, as an OVS
  // Interface row is. Out of range or refused by the device: an error and
  // no change.
  Status set_mtu_request(std::string_view port, std::optional<uint32_t> mtu);
  // `set interface PORT other_config:pmd-rxq-affinity=... options:n_rxq=N`
  // for a port on a bridge: the fields of opts that are set (rxq_affinity,
  // n_rxq), all or nothing.
  Status set_interface_queues(std::string_view port, const PortOptions& opts);
  // --- bonds (writer) ---
  // ovs-vsctl add-bond BR BOND IFACE...: every member becomes a port of
  // the bridge (its own OpenFlow port) carrying the bond's VLAN settings,
  // all or none. Errors (nothing changed): fewer than two members, a member
  // named twice, unknown, already in a bridge (and so in a bond), a bond
  // name that is a port or another bond, no free bond id, a bad setting.
  Status add_bond(std::string_view bridge, std::string_view bond, const BondRequest& req);
  // `set port BOND COLUMN=VALUE...`: new settings and VLAN columns (all of
  // them: the caller starts from the current ones). LACP created or
  // dropped as lacp= says; the buckets stay where they are.
  Status set_bond(std::string_view bond, const BondSettings& s, const PortOptions& vlan);
  // del-port [BR] BOND (del_port() calls it for a bond's name).
  Status del_bond(std::string_view bridge, std::string_view bond);
  // bond-enable-member / bond-disable-member / bond-set-active-member
  // (errors in Open vSwitch's words: "no such bond", "no such member",
  // "cannot make disabled member active"). set_active_member: *changed
  // says whether it was another member before ("done" / "no change").
  Status bond_enable_member(std::string_view bond, std::string_view member, bool enable);
  Status bond_set_active_member(std::string_view bond, std::string_view member, bool* changed);
  // (writer / show commands under the writer mutex)
  const BondPort* find_bond(std::string_view name) const;
  std::vector<const BondPort*> bonds() const;  // sorted by name
  // The bond a port of a bridge is a member of (nullptr: none).
  const BondPort* bond_of_member(std::string_view port) const;
  // Called (maintenance thread, writer mutex held) when bonds changed what
  // translation decides: the Udpif's kick (make_udpif sets it).
  void set_revalidate_hook(std::function<void()> f) { revalidate_hook_ = std::move(f); }

  // --- ports (readers, lock-free) ---
  // A hal port's owner; a tunnel vport or internal vport has none here
  // (tunnel_state()->tunnels->receive() / addrs->by_internal_vport()).
  PortOwner port_owner(uint16_t dp_port) const noexcept;

  // --- tunnels and the underlay (ofproto/tunnel.h) ---
  // A tunnel port is added by add_port() with opts.type vxlan|geneve|gre
  // and opts.tunnel_options: no hal port; the bridge's PortConfig gets
  // dp_port = the tunnel vport of (type, dst_port) — created on the first
  // such port (Datapath::add_vport, named tunnel_vport_name()), shared and
  // reference-counted, deleted with the last — and `tunnel` set. Errors
  // (nothing changed): bad options, no remote_ip, a local_ip no bridge
  // owns, the same receive match as another tunnel port.
  // `set interface T options:K=V...` of a tunnel port: the options
  // re-read from the current ones plus these (all or nothing).
  Status set_tunnel_options(std::string_view port,
                            const std::vector<std::pair<std::string, std::string>>& options);
  // Readers (translation), lock-free: one snapshot for a whole translation.
  std::shared_ptr<const TunnelState> tunnel_state() const { return std::atomic_load(&tunnel_state_); }
  // The neighbour cache (its own mutex; slow path only, never a PMD).
  NeighborCache& neighbors() { return neigh_; }
  const NeighborCache& neighbors() const { return neigh_; }
  // ip-add BR ADDR/LEN: the bridge's LOCAL port gets the address (its
  // internal vport, named as the bridge, is created with the first one)
  // and the connected routes. Errors: no such bridge, a bad prefix, an
  // address some bridge already has.
  Status ip_add(std::string_view bridge, const IpPrefix& addr);
  // ip-del BR ADDR/LEN: the address and its connected routes go (the
  // internal vport with the last address, unless a tunnel's local_ip or
  // a user route still needs it: then an error).
  Status ip_del(std::string_view bridge, const IpPrefix& addr);
  // `set bridge BR other_config:hwaddr=MAC` (nullopt: `remove` / back to
  // the default: the lowest hal port MAC, else bridge_default_mac()).
  Status set_bridge_hwaddr(std::string_view bridge, std::optional<flow::EthAddr> mac);
  // The bridge's MAC as the underlay uses it (bridge_pick_local_hw_addr).
  flow::EthAddr bridge_mac(std::string_view bridge) const;
  // route-add PREFIX BRIDGE [GW] / route-del PREFIX (RouteTable::add_user).
  Status route_add(const IpPrefix& prefix, std::string_view bridge, const IpAddr& gw);
  Status route_del(const IpPrefix& prefix);
  // neigh-set BR IP MAC (a static entry; BR must exist), neigh-flush [BR].
  Status neigh_set(std::string_view bridge, const IpAddr& ip, const flow::EthAddr& mac);
  Status neigh_flush(std::string_view bridge);
  // `set tunnel-combine true|false` (default true): whether translation
  // emits clone(tnl_push(...), underlay actions) or recirculates.
  void set_tunnel_combine(bool on);
  // Sends `frame` out of every port of `bridge` that can transmit — not
  // tunnel ports, one enabled member per bond, not `except_ofport` —
  // through Datapath::send_packet (an ARP / ND request or reply keel
  // makes). Any thread that may read the bridge (a reader between
  // quiescent points, or a writer). Error when no port took it.
  Status send_from_bridge(const Bridge& bridge, std::span<const uint8_t> frame,
                          uint32_t except_ofport = flow::kOfppNone);

  // --- reclamation ---
  datapath::Rcu& rcu() { return rcu_; }
  // Runs the Rcu callbacks that are due and what they made ready (writer).
  void reclaim();
  // Expires timed-out rules of every bridge, runs the bonds (run_bonds),
  // then reclaims (writer).
  size_t run(uint64_t now_ns);
  // One maintenance tick of every bond (writer): link state of each member
  // (hal::Port::link()), LACP (PDUs out through Datapath::send_packet),
  // Bond::run, rebalancing when due (Datapath::bond_stats -> Bond::rebalance),
  // the datapath's bucket table (bond_set / bond_del as lb_output use
  // changes), learning packets, and a revalidation request when the
  // bond's decisions changed (Bridge::invalidate_translations + the hook).
  void run_bonds(uint64_t now_ms);

  // --- controller queue ---
  bool push_packet_in(PacketIn pi);  // false: queue full (counted)
  // The packet-ins of `bridge` (empty: all), oldest first; pop removes them.
  std::vector<PacketIn> packet_ins(std::string_view bridge, bool pop);
  ControllerQueueStats controller_stats() const;

  // --- knobs of the upcall handler and the revalidator ---
  static constexpr uint32_t kDefaultFlowLimit = 200'000;
  static constexpr uint32_t kDefaultMaxIdleMs = 10'000;
  static constexpr uint32_t kDefaultRevalidateIntervalMs = 500;
  uint32_t flow_limit() const { return flow_limit_.load(std::memory_order_relaxed); }
  uint32_t max_idle_ms() const { return max_idle_ms_.load(std::memory_order_relaxed); }
  uint32_t revalidate_interval_ms() const { return revalidate_interval_ms_.load(std::memory_order_relaxed); }
  Status set_flow_limit(uint32_t n);              // 1..10,000,000
  Status set_max_idle_ms(uint32_t ms);            // 100..3,600,000
  Status set_revalidate_interval_ms(uint32_t ms); // 10..60,000

  datapath::Datapath& datapath() { return dp_; }

 private:
  void reset_mtu(const PortConfig& pc);  // a port leaving its bridge gets 1500 back
  // add_port's steps, shared with add_bond: checks (no side effect), then
  // the device settings (queue count, MTU) with what undoes them.
  Result<PortConfig> prepare_port(std::string_view port, const PortOptions& opts,
                                  std::vector<std::pair<uint16_t, int>>& affinity) const;
  struct DeviceUndo {
    uint16_t dp_port = 0, rxq = 0;
    uint32_t mtu = 0;
    bool applied = false;
  };
  Status apply_port_device(const PortConfig& pc, DeviceUndo& undo);
  void undo_port_device(const DeviceUndo& undo);
  BondPort* find_bond_mut(std::string_view name);
  void bond_dp_del(BondPort& b);          // drops the datapath table, if any
  Status check_bond_settings(const BondSettings& s, const std::vector<std::string>& members) const;

  // dp port id -> owner; immutable once published.
  struct PortIndex {
    std::vector<PortOwner> by_dp_port;
  };
  struct BridgeList {
    std::vector<Bridge*> sorted;  // by name
  };
  void publish_index();     // from the bridges' port maps
  void publish_bridges();

  datapath::Datapath& dp_;
  datapath::Rcu rcu_;
  std::mutex writer_mu_;
  std::vector<std::unique_ptr<Bridge>> owned_;  // writer only
  std::atomic<const BridgeList*> bridges_;
  std::atomic<const PortIndex*> index_;
  std::vector<std::unique_ptr<Bridge>> dying_;  // waiting for a grace period
  std::shared_ptr<std::vector<Bridge*>> dead_;  // grace period passed (Rcu callbacks add)

  mutable std::mutex queue_mu_;
  std::deque<PacketIn> queue_;
  uint64_t queued_ = 0, dropped_ = 0;

  std::atomic<uint32_t> flow_limit_{kDefaultFlowLimit};
  std::atomic<uint32_t> max_idle_ms_{kDefaultMaxIdleMs};
  std::atomic<uint32_t> revalidate_interval_ms_{kDefaultRevalidateIntervalMs};

  std::vector<std::unique_ptr<BondPort>> bonds_;  // writer only

  // Tunnels: the writer's working copy, published as tunnel_state_.
  struct VportRef {
    std::string name;
    uint16_t id = 0;
    TunnelType type = TunnelType::vxlan;
    uint16_t dst_port = 0;
    uint32_t refs = 0;
  };
  struct BridgeUnderlay {
    std::optional<flow::EthAddr> hwaddr;  // other_config:hwaddr
    uint16_t internal_vport = 0;
    std::vector<IpPrefix> addrs;
  };
  std::vector<VportRef> vports_;                                  // writer only
  std::vector<std::pair<std::string, BridgeUnderlay>> underlay_;  // by bridge name; writer only
  std::shared_ptr<const RouteTable> routes_ = std::make_shared<RouteTable>();
  bool tunnel_combine_ = true;
  std::shared_ptr<const TunnelState> tunnel_state_ = std::make_shared<TunnelState>();
  NeighborCache neigh_;
  void publish_tunnels();
  uint64_t tunnel_gen_ = 0;  // TunnelState::generation of the last publish (writer)  // rebuilds tunnel_state_ from the above and the bridges' tunnel ports
  // The options of tunnel `port` from `base` (null: the type's defaults)
  // and option words, checked (local_ip owned, no duplicate but `except`).
  Result<TunnelOptions> tunnel_options_of(std::string_view port, TunnelType type, const TunnelOptions* base,
                                          const std::vector<std::pair<std::string, std::string>>& kv,
                                          std::string_view except = {}) const;
  Result<uint16_t> vport_ref(TunnelType type, uint16_t dst_port);  // creates on first use
  void vport_unref(uint16_t id);                                     // deletes with the last
  Status add_tunnel_port(Bridge& b, std::string_view port, const PortOptions& opts);
  void tunnel_port_gone(const PortConfig& pc);  // a tunnel port left its bridge
  BridgeUnderlay* underlay_of(std::string_view bridge, bool create);
  const BridgeUnderlay* underlay_of_const(std::string_view bridge) const;
  void forget_bridge_underlay(std::string_view bridge);  // del-br: addresses, vport, routes, neighbours
  std::function<void()> revalidate_hook_;

  std::thread maint_;
  std::mutex maint_mu_;
  std::condition_variable maint_cv_;
  bool maint_stop_ = false;
};

}  // namespace keel::ofproto

// Translation (xlate) — turns a packet's flow key into what the datapath
// should do with every packet like it: a datapath action list, and the
// megaflow mask of exactly the key bits the decision consulted. The slow
// path's core: the upcall handler calls it for every miss, the revalidator
// to re-check installed megaflows after rule or MAC table changes, and
// `trace` to explain a decision. Semantics are Open vSwitch 3.1's
// ofproto-dpif-xlate.c (plus commit_odp_actions() of lib/odp-util.c):
//
//   * the datapath in_port of the key is mapped to its OpenFlow port
//     (PortMap::by_dp_port); rules see OpenFlow port numbers;
//   * lookup starts in table 0; a miss drops (keel has no controller
//     connection, so OVS's default miss behaviour is "No match." + drop);
//   * actions are walked in order; field writes change a working copy of the
//     flow and are committed lazily — just before an output, a controller
//     action or the end — as set/masked-set, push_vlan and pop_vlan actions
//     computing the difference from what was last committed (OVS's
//     base_flow), so `mod_dl_src:..,output:1,output:2` sets once;
//   * write_actions adds to the OpenFlow 1.1+ action set, clear_actions
//     empties it, write_metadata writes flow.metadata; when the pipeline
//     ends (also after a goto_table miss) the set runs as OVS's
//     xlate_action_set() runs it (flow::of_action_set_list(); an output to
//     CONTROLLER from it has reason action_set);
//   * ARP field writes commit as set(arp(...)) (ARP, not RARP), SCTP port
//     writes as set(sctp(...)), ICMP type/code (tp_src/tp_dst on ICMP) as
//     set(icmp(...)) / set(icmpv6(...)), as commit_set_arp_action(),
//     commit_set_port_action() and commit_set_icmp_action();
//   * a load/set_field/move into the VLAN TCI that creates a tag makes it
//     802.1Q (flow_fix_vlan_tpid());
//   * resubmit and goto_table recurse; a resubmit to a table <= the current
//     one deepens the recursion; depth >= kMaxResubmitDepth (64) or more than
//     kMaxResubmits (4096) table actions in all stops translation with an
//     error: the packet is dropped (empty actions) and the trace says why;
//   * NORMAL is an L2 learning switch with VLAN access/trunk/native ports
//     (Bridge::mac(), PortConfig::vlan_mode), as OVS's xlate_normal();
//   * bonds (PortConfig::bond_obj) as OVS's bundles: a MAC learned on any
//     member is learned for the bond (PortConfig::bundle()); input on a
//     member passes Bond::check_admissibility first; flooding skips the
//     whole input bond and outputs once per bond; output to a bond is the
//     member Bond::choose_output picks (active-backup, balance-slb), or
//     for balance-tcp `hash(l4(basis)),lb_output(id)` (Bond::use_lb_output)
//     or `hash(l4(basis)),recirc(id)` (use_recirc), whose second pass
//     (recirc_id == the bond's id) matches dp_hash/0xff and outputs to the
//     bucket's member; no usable member drops;
//   * LACPDUs received on a member of a bond with LACP are sent to the
//     slow path (see "slow path" below) and nothing else happens to them.
//   * tunnels (XlateIn::tunnels, below), as OVS's native tunnelling:
//     output to a tunnel port sets the outer fields (tnl_port_send():
//     remote/local/key from the port or, =flow, from tun_dst/tun_src/tun_id;
//     TTL/TOS fixed or inherited, ECN always), looks up the route of the
//     remote (-> the underlay bridge, source IP, gateway) and the next hop's
//     neighbour, builds the outer header (packet/tunnel_header.h) and then
//     translates the outer packet in the underlay bridge as received on its
//     LOCAL port, in the same pass: `clone(tnl_push(tnl_port(N),header(..),
//     out_port(M)),<underlay actions>)`, no clone() when nothing follows
//     (OVS's native_tunnel_output() and xlate_optimize_odp_actions()). The
//     underlay's lookups consult outer fields only: their mask is dropped,
//     as OVS does (the megaflow is the overlay's); its rules are credited.
//     Where the pass can't be combined — a truncating output, the underlay
//     sending to the controller, `set tunnel-combine false` — it is
//     `clone(tnl_push(...),recirc(0x10000 + M))`, and that recirc id's
//     second pass is the underlay bridge from LOCAL. No route: "native tunnel
//     routing failed"; no neighbour: the ARP request / NS goes out (only
//     with may_learn), the packet drops and nothing may be cached
//     (XlateOut::cacheable). What reaches LOCAL is terminated
//     (terminate_native_tunnel(): tnl_pop(vport) for a listening tunnel's
//     packets to a bridge address, neighbour snooping) or, since keel has
//     no host stack, consumed, except ARP requests / NS for an own address
//     (slow_path(action): the slow path replies). A key from a Geneve
//     tunnel has its raw options turned into tun_metadataN per the bridge's
//     TLV map, and the megaflow's mask back (flow/tun_metadata.h).
//
// The mask (XlateOut::wc). It starts as OVS's xlate_wc_init(): in_port,
// recirc_id, dl_type, and nw_frag for IP; the classifier ORs in what each
// lookup consulted (staged lookup, prefix tracking: a /8 rule costs ~8 bits
// of nw_dst); actions OR in what they read or write; and it ends as OVS's
// xlate_wc_finish(): metadata/registers/conj_id cleared, ICMP type/code
// limited to 8 bits, VLAN CFI added where a TCI bit is matched, L4 ports
// cleared for later fragments, VLAN and tunnel masks cleared when the
// packet had no tag / no tunnel. NOTE for the installer: exactly like OVS,
// the mask of an untagged packet does not cover vlans[]; OVS's datapath
// reads a missing VLAN mask as "exact match on no VLAN" when it installs
// the flow (odp_flow_key_to_mask). Whoever builds the megaflow from this
// mask must do the same (set vlans[0] exact when the key has no tag) or a
// megaflow for untagged packets would also match tagged ones.
//
// Life cycle and thread-safety: xlate() is re-entrant; it reads the bridge
// lock-free (ports() snapshot, table(i).lookup(flow, version)) and may
// learn into the bridge's MacLearning (its own mutex) when in.may_learn.
// The caller must hold an Rcu reader slot and keep the returned rule
// pointers only until its next quiescent point. Never called on a PMD.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "flow/dp_actions.h"
#include "flow/flow_key.h"
#include "flow/match.h"
#include "flow/of_actions.h"
#include "ofproto/bridge.h"
#include "ofproto/classifier.h"
#include "ofproto/rule.h"
#include "ofproto/xlate_deps.h"

namespace keel::ofproto {

class Bond;

// --- tunnels: what translation reads of the tunnel and underlay state ------
//
// The tunnel ports, routes, neighbours, bridge addresses and MACs belong to
// ofproto/tunnel.h (TunnelTable, routes, NeighborCache); translation reaches
// them only through this interface so that it can be tested with a fake and
// so that the slow path (slow_path.cpp) is the one place that adapts the
// real tables. IP addresses are IPv6 or IPv4-mapped IPv6 (::ffff:a.b.c.d),
// as Open vSwitch's tunnel code keeps them.
//
// Thread-safety: the getters are called by translation on handler,
// revalidator and control threads at once; they read lock-free snapshots
// (or the neighbour cache's own mutex, never a PMD's). The two side-effect
// methods are called only when XlateIn::may_learn (an upcall for a packet,
// not trace or revalidation).
enum class XlateTunnelType : uint8_t { vxlan, geneve, gre };

// A tunnel port's settings as Open vSwitch's tnl_port_send() reads them.
struct XlateTunnelPort {
  XlateTunnelType type = XlateTunnelType::vxlan;
  uint16_t vport = 0;             // the shared tunnel vport (tnl_port(N) of tnl_push)
  uint16_t dst_port = 4789;       // UDP destination (host order; 0 for GRE)
  flow::In6Addr remote{}, local{};  // local all-zero: not configured
  bool remote_flow = false, local_flow = false;
  uint64_t out_key = 0;           // host order
  bool out_key_flow = false, out_key_present = false;
  uint8_t tos = 0, ttl = 64;
  bool tos_inherit = false, ttl_inherit = false;
  bool csum = false, dont_fragment = true;
};

// A route to a tunnel remote (ovs_router_lookup + the bridge its device is).
struct XlateRoute {
  Bridge* bridge = nullptr;       // the underlay bridge (the route's device); null: device is no bridge
  std::string dev;                // the route's device name
  uint16_t local_vport = 0;       // the underlay bridge's internal vport: out_port(M)
  flow::In6Addr src{}, gw{};      // gw all-zero: on link
};

// A packet received from a tunnel vport, as TunnelTable::receive (OVS's
// tnl_find) places it.
struct XlateTunnelRx {
  Bridge* bridge = nullptr;
  uint32_t ofport = 0;
};

// A listening tunnel vport (OVS's tnl-ports map entry).
struct XlateListener {
  uint16_t vport = 0;
  uint8_t nw_proto = 17;          // 17 UDP, 47 GRE
  uint16_t tp_dst = 0;            // host order; 0 for GRE
};

class XlateTunnels {
 public:
  virtual ~XlateTunnels() = default;
  // recirc ids kRecircBase + M: "encapsulated, translate in the bridge whose
  // internal vport is M as received on LOCAL" (the fallback's second pass).
  static constexpr uint32_t kRecircBase = 0x10000;

  virtual std::optional<XlateTunnelPort> tunnel_port(const PortConfig& p) const = 0;
  virtual std::optional<XlateRoute> route(const flow::In6Addr& dst, uint32_t pkt_mark) const = 0;
  virtual std::optional<flow::EthAddr> neighbor(const Bridge& br, const flow::In6Addr& ip) const = 0;
  virtual std::optional<flow::EthAddr> bridge_mac(const Bridge& br) const = 0;
  virtual std::vector<flow::In6Addr> bridge_addrs(const Bridge& br) const = 0;
  // The bridge's internal (LOCAL) vport; 0: none (no address). When the
  // bridge's port map has no LOCAL port, translation adds one for it.
  virtual uint16_t local_vport(const Bridge& br) const { (void)br; return 0; }
  virtual std::vector<XlateListener> listeners() const = 0;
  // The overlay port for a packet whose in_port is a tunnel vport (flow's
  // tunnel fields as tnl_pop set them); nullopt: no tunnel port matches.
  virtual std::optional<XlateTunnelRx> receive(const flow::FlowKey& flow) const = 0;
  virtual bool is_tunnel_vport(uint32_t dp_port) const = 0;
  // The bridge whose internal (LOCAL) vport is `vport`; null: none.
  virtual Bridge* bridge_of_local_vport(uint32_t vport) const = 0;
  virtual bool combine() const = 0;  // `set tunnel-combine` (default true)
  // Side effects (may_learn only): an ARP request (src IPv4-mapped) or an
  // IPv6 neighbour solicitation sent out of `br`; a learned neighbour.
  virtual void send_neighbor_request(Bridge& br, const flow::EthAddr& smac, const flow::In6Addr& src,
                                     const flow::In6Addr& dst) = 0;
  virtual void neighbor_learn(Bridge& br, const flow::In6Addr& ip, const flow::EthAddr& mac) = 0;
  // Moves whenever something above changes (the revalidator re-translates
  // flows that read tunnel state then).
  virtual uint64_t generation() const { return 0; }
};

// The megaflow mask of a packet from a tunnel vport that no tunnel port
// takes: in_port, recirc_id and the tunnel fields tnl_find() reads (OVS's
// tnl_wc_init()), so the drop flow covers only that tunnel key / remote.
flow::FlowKey tunnel_receive_wc(const flow::FlowKey& flow);

inline constexpr unsigned kMaxResubmitDepth = 64;                                    // OVS MAX_DEPTH
inline constexpr unsigned kMaxResubmits = kMaxResubmitDepth * kMaxResubmitDepth;  // OVS MAX_RESUBMITS

struct XlateIn {
  Bridge& bridge;
  // The packet's key as the fast path parsed it. in_port is the datapath
  // port id (as the upcall's key has it), unless in_port_is_ofport.
  flow::FlowKey flow{};
  Version version = kVersionMin;  // bridge.version(), taken once
  uint64_t now_ns = 0;            // for MAC learning and aging
  bool may_learn = true;          // NORMAL may learn source MACs (false: trace, revalidation)
  bool in_port_is_ofport = false; // flow.in_port is already an OpenFlow port (trace)
  // When non-null, the tree of tables, rules and actions visited is
  // appended here in ofproto/trace's layout (see xlate_trace()).
  std::string* trace = nullptr;
  // Tunnel and underlay state (null: no tunnels; tunnel ports then drop).
  XlateTunnels* tunnels = nullptr;
  // Non-zero: the OpenFlow input port to use whatever flow.in_port is (a
  // packet from a tunnel vport placed by XlateTunnels::receive; LOCAL for
  // the second pass of a tunnel recirculation). flow.in_port stays the
  // datapath port the megaflow matches.
  uint32_t in_ofport = 0;
};

enum class XlateError : uint8_t {
  ok = 0,
  recursion_too_deep,   // resubmit depth reached kMaxResubmitDepth
  too_many_resubmits,   // kMaxResubmits table actions
  no_recirc_context,    // recirc_id != 0 and no bond of the bridge has that id
  actions_too_long,     // the action list outgrew kMaxDpActionsLen
  invalid_tunnel_metadata,  // Geneve options the bridge's TLV map refuses (wrong length, unknown critical)
};
const char* to_string(XlateError e);

struct XlateOut {
  flow::DpActions actions;  // empty = drop
  // Megaflow mask over the *datapath* key: the in_port bits are all ones
  // (they stand for the datapath port, which maps 1:1 to the OpenFlow one).
  flow::FlowKey wc{};
  flow::FlowKey final_flow{};        // the flow after the actions (in_port: OpenFlow port)
  std::vector<const OfRule*> rules;  // every rule whose actions ran, in order (stats go to them)
  XlateError error = XlateError::ok;  // set: actions are empty (drop), the reason is in the trace
  bool uses_normal = false;    // NORMAL ran: revalidate when the MAC table's generation moves
  bool to_controller = false;  // a controller userspace() action was emitted
  bool slow_path_lacp = false; // a LACPDU on a LACP bond member: userspace(slow path) and nothing else
  // Bonds whose member translation chose, with the flow and VLAN it chose
  // for: the revalidator counts the flow's bytes in their bucket loads.
  struct BondChoice {
    std::shared_ptr<Bond> bond;
    flow::FlowKey flow{};
    uint16_t vlan = 0;
    // The recirculation scheme's second pass: the bucket's counters instead.
    std::shared_ptr<BondRecircLoads> loads;
    unsigned bucket = 0;
  };
  std::vector<BondChoice> bond_choices;
  bool mac_changed = false;    // NORMAL learned a new MAC or a move
  uint64_t mac_generation = 0; // MacLearning::generation() when NORMAL looked (0 if no NORMAL)
  uint32_t in_ofport = 0;      // the OpenFlow input port
  // Tunnels. cacheable false: execute the actions, install no megaflow (a
  // neighbour cache miss: the request went out, the packet is dropped).
  bool cacheable = true;
  bool tnl_no_port = false;     // from a tunnel vport, and no tunnel port matches: dropped
  bool tnl_neigh_miss = false;  // a tunnel output found no neighbour
  bool tnl_output_failed = false;  // a tunnel output found no route, bridge address or header
  bool slow_path_neigh = false; // an ARP request / NS for an own address: userspace(slow_path(action))
  bool tnl_recirc = false;      // a tunnel output fell back to tnl_push + recirculation
  // A tunnel output consulted this underlay bridge too (the combined pass,
  // or the dry run that decided not to combine): its rules and MAC table
  // (when NORMAL ran there) matter for revalidation. underlay_many: a
  // second, different underlay bridge was consulted as well (tunnel outputs
  // routed through two bridges): the revalidator then re-translates the
  // flow every round, having only one underlay's generations.
  Bridge* underlay = nullptr;
  uint64_t underlay_rules_generation = 0, underlay_mac_generation = 0;
  bool underlay_uses_normal = false;
  bool underlay_many = false;
  // Every rule-table lookup, in every bridge (hit or miss): what a rule
  // change must overlap to change this translation (xlate_deps.h).
  XlateDeps deps;
};

// Translates in.flow through in.bridge. Errors (Status): the datapath
// in_port is not a port of this bridge. Translation problems (resubmit
// loops...) are not errors: they give XlateOut::error and a drop.
Result<XlateOut> xlate(const XlateIn& in);

// key & wc: the megaflow match to install for `key` (the datapath key the
// translation started from).
flow::Match xlate_megaflow(const flow::FlowKey& key, const flow::FlowKey& wc);

// ofproto/trace: translates `flow` (in_port = OpenFlow port number, fields
// not given zero) without side effects (no MAC learning, no counters) and
// returns the report:
//
//   Flow: ip,in_port=1,vlan_tci=0x0000,dl_src=...,nw_dst=10.1.2.3,...
//
//   bridge("br0")
//   -------------
//    0. ip,nw_dst=10.0.0.0/8, priority 100
//       output:2
//
//   Final flow: unchanged
//   Megaflow: recirc_id=0,eth,ip,in_port=1,nw_dst=10.0.0.0/8,nw_frag=no
//   Datapath actions: 2
//
// With `tunnels`, tunnel outputs, LOCAL and tunnel recirculations are
// translated (and traced) as the upcall handler does: "tunneling to ... via
// BR", the underlay bridge's nested bridge("...") section, or the reason a
// tunnel output falls back to recirculation.
std::string xlate_trace(Bridge& bridge, const flow::FlowKey& flow, uint64_t now_ns, XlateTunnels* tunnels = nullptr);

// --- controller actions --------------------------------------------------
//
// `controller`, `CONTROLLER:N`, `controller(...)` and dec_ttl's TTL
// exception become `userspace(pid=0,userdata(<24 bytes>))` after the field
// changes so far are committed, so the packet comes back to the slow path as
// an action upcall (datapath/upcall.h, Type::action) in the state the
// controller should see. The userdata, all multi-byte fields big-endian:
//
//   byte  0      kUserdataController (1): what this userdata is
//   byte  1      reason (flow::OfPacketInReason: 1 action, 2 invalid_ttl...)
//   byte  2      table id of the rule that sent it
//   byte  3      0 (reserved)
//   bytes 4-5    controller id
//   bytes 6-7    max_len (bytes of the packet to send; 65535: all)
//   bytes 8-11   OpenFlow in_port of the packet
//   bytes 12-15  0 (reserved)
//   bytes 16-23  cookie of the rule that sent it (all ones: no rule)
inline constexpr uint8_t kUserdataController = 1;
inline constexpr size_t kControllerUserdataLen = 24;

struct ControllerUserdata {
  flow::OfPacketInReason reason = flow::OfPacketInReason::action;
  uint8_t table_id = 0;
  uint16_t controller_id = 0;
  uint16_t max_len = 0xffff;
  uint32_t in_ofport = 0;
  uint64_t cookie = UINT64_MAX;
  bool operator==(const ControllerUserdata&) const = default;
};

void encode_controller_userdata(const ControllerUserdata& c, uint8_t (&out)[kControllerUserdataLen]);

// --- slow path (Open vSwitch's slow_path(REASON) userspace cookie) --------
//
// A frame the slow path itself must process: today LACPDUs (slow-protocol
// frames, dl_type 0x8809, as OVS's process_special() recognises them)
// received on a member of a bond that runs LACP. Translation emits
// `userspace(pid=0,slow_path(lacp))` and nothing else (such frames never
// reach NORMAL or the rule tables), as Open vSwitch does; the handler's
// sink (ofproto/slow_path.cpp) hands the frame to the bond of the upcall's
// input port, whose Lacp processes it. The cookie's bytes are
// flow/dp_actions.h's (so flow-dump prints them as Open vSwitch does):
//
//   byte  0      kUserdataSlowPath (2)
//   byte  1      reason (SlowPathReason: 1 lacp)
//   bytes 2-7    0
inline constexpr uint8_t kUserdataSlowPath = flow::kUserdataKindSlowPath;
inline constexpr size_t kSlowPathUserdataLen = flow::kSlowPathUserdataBytes;
//
// Reason `action` (2): an ARP request or IPv6 neighbour solicitation for an
// address of the bridge it reached through LOCAL (keel has no host stack):
// the sink composes the reply and sends it out of the bridge of the
// upcall's input port (the frame entered that bridge and reached LOCAL).
enum class SlowPathReason : uint8_t { lacp = flow::kSlowPathReasonLacp, action = flow::kSlowPathReasonAction };
void encode_slow_path_userdata(SlowPathReason r, uint8_t (&out)[kSlowPathUserdataLen]);
std::optional<SlowPathReason> decode_slow_path_userdata(std::span<const uint8_t> userdata);
// nullopt: not a controller userdata (wrong length or type).
std::optional<ControllerUserdata> decode_controller_userdata(std::span<const uint8_t> userdata);

}  // namespace keel::ofproto

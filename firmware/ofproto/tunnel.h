// Tunnels, the slow-path side: tunnel ports (ovs-vsctl's type=vxlan|geneve|
// gre with their options:), the underlay state that output to a tunnel
// needs — the bridges' own addresses and MACs (ip-add), the route table
// (route-add, and the connected routes of ip-add), the neighbour cache
// (neigh-set, and what translation snoops from ARP replies / ND adverts) —
// and the ARP / ND frames keel sends and answers with.
//
// Open vSwitch 3.1 is the reference: lib/netdev-vport.c set_tunnel_config
// (option names, defaults, errors), ofproto/tunnel.c tnl_find (which port a
// received tunnel packet belongs to), lib/ovs-router.c (routes and their
// `ovs/route/show` text), lib/tnl-neigh-cache.c (`tnl/neigh/show`, snoop,
// 15 min aging), lib/tnl-ports.c (`tnl/ports/show`).
//
// Addresses are kept as Open vSwitch keeps them: IPv6, an IPv4 address as
// its v4-mapped form ::ffff:a.b.c.d (IpAddr), printed back as a.b.c.d.
//
// Who uses what:
//   * ofproto (Ofproto, tnl-ofp) builds the snapshots below on the control
//     thread and publishes them together as one TunnelState;
//   * translation (xlate, tnl-xl) takes Ofproto::tunnel_state() once per
//     translation and reads it without locks: TunnelTable::receive for a
//     packet after tnl_pop, TunnelPort for output to a tunnel port,
//     RouteTable::lookup and BridgeAddrs for the underlay; the
//     NeighborCache (Ofproto::neighbors()) is a mutex-guarded table, slow
//     path only;
//   * the compose_* functions build the ARP / ND frames (pure).
//
// Thread-safety: TunnelOptions, TunnelPort, TunnelTable, RouteTable,
// BridgeAddrs and TunnelState are immutable once published (shared_ptr to
// const; a writer builds a new one and swaps it atomically: readers keep
// what they loaded alive). The Bridge* inside them are valid while the
// reader is between two Rcu quiescent points, as every Bridge* from
// Ofproto. NeighborCache: every method takes its own mutex; never called
// on a PMD. The free functions are pure: any thread.
#pragma once

#include <array>
#include <compare>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "flow/flow_key.h"

namespace keel::ofproto {

class Bridge;

// --- addresses -------------------------------------------------------------

// An IPv4 or IPv6 address, IPv4 as ::ffff:a.b.c.d (OVS's in6_addr_mapped_ipv4).
struct IpAddr {
  flow::In6Addr a{};
  bool operator==(const IpAddr&) const = default;
  auto operator<=>(const IpAddr& o) const { return std::memcmp(a.b, o.a.b, 16) <=> 0; }

  static IpAddr v4(flow::be32 addr);  // network order
  static IpAddr v6(const flow::In6Addr& addr);
  bool is_v4() const;          // v4-mapped
  flow::be32 v4_addr() const;  // network order; 0 unless is_v4()
  bool is_zero() const;        // :: (and 0.0.0.0 is ::ffff:0.0.0.0, not zero)
  bool is_multicast() const;
  // "1.2.3.4" or an IPv6 text (inet_pton); nullopt otherwise.
  static std::optional<IpAddr> parse(std::string_view s);
  // As OVS's ipv6_format_mapped: dotted quad for v4-mapped, else inet_ntop.
  std::string to_string() const;
};

// ADDR/LEN (IPv4 len 0..32, IPv6 0..128); `plen` is in the family's terms.
struct IpPrefix {
  IpAddr addr;
  uint8_t plen = 0;
  bool operator==(const IpPrefix&) const = default;
  static std::optional<IpPrefix> parse(std::string_view s);  // "10.0.0.1/24", "2001:db8::1/64"
  std::string to_string() const;                             // as given: the host bits kept
  IpPrefix network() const;                                  // host bits cleared
  bool contains(const IpAddr& ip) const;
};

std::optional<flow::EthAddr> parse_mac(std::string_view s);  // "aa:bb:cc:dd:ee:ff"
std::string format_mac(const flow::EthAddr& m);              // lower case, as ETH_ADDR_FMT

// --- tunnel ports ----------------------------------------------------------

enum class TunnelType : uint8_t { vxlan, geneve, gre };

std::string_view tunnel_type_name(TunnelType t);  // "vxlan", "geneve", "gre"
std::optional<TunnelType> parse_tunnel_type(std::string_view s);
// The tnl_push header(type=N) numbers of Open vSwitch (OVS_VPORT_TYPE_*):
// gre 3, vxlan 4, geneve 5; GRE over IPv6 is ip6gre, 109.
inline constexpr uint8_t kOvsTnlTypeGre = 3, kOvsTnlTypeVxlan = 4, kOvsTnlTypeGeneve = 5,
                         kOvsTnlTypeIp6Gre = 109;
uint8_t ovs_tnl_type(TunnelType t, bool ipv6_underlay);
// dst_port's default: 4789 vxlan, 6081 geneve, 0 gre (no UDP).
uint16_t default_dst_port(TunnelType t);
// The datapath vport the tunnel ports of (type, dst_port) share, named as
// Open vSwitch names it: vxlan_sys_4789, genev_sys_6081, gre_sys.
std::string tunnel_vport_name(TunnelType t, uint16_t dst_port);

// A tunnel key (in_key / out_key / key): absent (0, no key flag on
// receive for GRE), a number, or `flow` (taken from / put in tun_id).
struct TunnelKey {
  bool present = false;  // the option was given (OVS in_key_present / out_key_present)
  bool flow = false;     // key=flow
  uint64_t value = 0;    // host order; VXLAN/GENEVE use the low 24 bits
  bool operator==(const TunnelKey&) const = default;
};

// The options: of one tunnel Interface, with Open vSwitch 3.1's names and
// defaults (netdev-vport.c set_tunnel_config).
struct TunnelOptions {
  TunnelType type = TunnelType::vxlan;
  // remote_ip=IP|flow (required); local_ip=IP|flow (local_ip=flow needs
  // remote_ip=flow, as OVS says). Absent local_ip: the route's source.
  bool remote_flow = false, local_flow = false;
  IpAddr remote_ip{}, local_ip{};  // zero when absent or flow
  bool has_remote() const { return remote_flow || !remote_ip.is_zero(); }
  bool has_local() const { return !local_ip.is_zero(); }
  TunnelKey in_key, out_key;  // key=X sets both; in_key / out_key override
  uint16_t dst_port = 4789;   // vxlan 4789, geneve 6081; gre: none (0)
  bool tos_inherit = false;
  uint8_t tos = 0;  // a DSCP value (OVS: tos == tos & 0xfc)
  bool ttl_inherit = false;
  uint8_t ttl = 64;        // OVS DEFAULT_TTL; ttl=0 means 64 too
  bool csum = false;       // csum=true (OVS: only "true" sets it); IPv6 UDP always computes
  bool df_default = true;  // df_default=false clears DF
  bool ipv6() const;       // the underlay family (remote's, else local's; flow: IPv4)
  bool operator==(const TunnelOptions&) const = default;
};

// Defaults for a tunnel of type t (dst_port).
TunnelOptions default_tunnel_options(TunnelType t);

// Applies one `options:KEY=VALUE` (KEY without "options:") to `o`, as
// set_tunnel_config reads it. Errors name the port, in OVS's words where
// OVS refuses too ("t1: bad vxlan 'remote_ip'", "t1: multicast
// remote_ip=224.0.0.1 not allowed", "t1: invalid TOS 3"), and where OVS
// only warns or ignores keel refuses ("t1: unknown vxlan argument 'foo'",
// a bad ttl, dst_port, csum, df_default or key). On error `o` is unchanged.
Status apply_tunnel_option(std::string_view port, std::string_view key, std::string_view value,
                           TunnelOptions& o);
// The checks set_tunnel_config makes once every option is read: a remote
// ("t1: vxlan type requires valid 'remote_ip' argument"), local_ip=flow
// only with remote_ip=flow, remote and local of one family.
Status check_tunnel_options(std::string_view port, const TunnelOptions& o);
// The options as ovs-vsctl words, the non-default ones in OVS's
// get_tunnel_config order: "options:remote_ip=1.1.2.92 options:key=123 ..."
// (parsing them back gives `o`).
std::string format_tunnel_options(const TunnelOptions& o);
// dpif/show's summary: "vxlan: key=123, remote_ip=1.1.2.92" (keys sorted,
// as OVS's smap).
std::string tunnel_summary(const TunnelOptions& o);

// One tunnel port: an OpenFlow port of `bridge` with no hal port, whose
// output goes through the tunnel vport `vport` (shared by every tunnel port
// of the same type and dst_port). Immutable.
struct TunnelPort {
  std::string name;
  Bridge* bridge = nullptr;
  std::string bridge_name;
  uint32_t ofport = 0;
  uint16_t vport = 0;  // Datapath vport id: tnl_push(tnl_port(vport)), tnl_pop(vport)
  TunnelOptions options;
};

// What TunnelTable::receive found.
struct TunnelReceive {
  const TunnelPort* port = nullptr;  // null: no tunnel port takes the packet
  Bridge* bridge = nullptr;
  uint32_t ofport = 0;
  explicit operator bool() const { return port != nullptr; }
};

// Every tunnel port, for the receive side (an immutable snapshot).
class TunnelTable {
 public:
  TunnelTable() = default;
  explicit TunnelTable(std::vector<std::shared_ptr<const TunnelPort>> ports);

  // The tunnel port a packet decapsulated by vport flow.in_port belongs
  // to, in Open vSwitch's tnl_find order: exact key before key=flow, then
  // exact remote before remote=flow, then local_ip (exact, flow, any) —
  // matching in_port (the vport), tun_id against in_key, tun_src against
  // remote_ip, tun_dst against local_ip. `wc` (may be null) gets the bits
  // consulted, as OVS's tnl_wc_init un-wildcards them for a packet that
  // came from a tunnel: tun_id, tun_src/dst (the family's), tun_flags
  // df|csum|key, tun_tos; tp_src/tp_dst and ttl stay wildcarded.
  // Not a tunnel packet (no tun_dst): nothing found, wc untouched.
  TunnelReceive receive(const flow::FlowKey& flow, flow::FlowKey* wc) const;

  // by name / by (bridge, ofport) for output, all ports (sorted by name).
  const TunnelPort* find(std::string_view name) const;
  const TunnelPort* find(const Bridge* bridge, uint32_t ofport) const;
  const std::vector<std::shared_ptr<const TunnelPort>>& ports() const { return ports_; }

  // The port whose (type, dst_port, in_key, remote, local) receive match
  // equals o's (OVS's "same config as port"), ignoring port `except`.
  const TunnelPort* duplicate_of(const TunnelOptions& o, std::string_view except = {}) const;

 private:
  std::vector<std::shared_ptr<const TunnelPort>> ports_;  // sorted by name
};

// --- bridge addresses (ip-add) ----------------------------------------------

// One bridge's LOCAL port as the underlay sees it.
struct BridgeAddr {
  std::string bridge_name;
  Bridge* bridge = nullptr;
  flow::EthAddr mac{};          // other_config:hwaddr, else the lowest hal port MAC, else from the name
  bool mac_configured = false;  // other_config:hwaddr was set
  uint16_t internal_vport = 0;  // the bridge's `internal` vport (0: no address yet): out_port(M)
  std::vector<IpPrefix> addrs;  // in the order added
};

// Every bridge's addresses (immutable snapshot).
class BridgeAddrs {
 public:
  BridgeAddrs() = default;
  explicit BridgeAddrs(std::vector<BridgeAddr> bridges);
  const BridgeAddr* find(std::string_view bridge) const;
  // The bridge whose internal vport is `vport`.
  const BridgeAddr* by_internal_vport(uint16_t vport) const;
  // The bridge that owns `ip` (nullptr: none): what local_ip must name,
  // and what terminates tunnels.
  const BridgeAddr* owner(const IpAddr& ip) const;
  bool is_local(const IpAddr& ip) const { return owner(ip) != nullptr; }
  const std::vector<BridgeAddr>& all() const { return bridges_; }

 private:
  std::vector<BridgeAddr> bridges_;  // sorted by name
};

// The MAC a bridge with no other_config:hwaddr and no hal port gets: a
// locally administered unicast address from a hash of its name (fixed
// across reboots).
flow::EthAddr bridge_default_mac(std::string_view bridge);

// --- routes ----------------------------------------------------------------

struct Route {
  IpPrefix prefix;     // network (host bits cleared)
  std::string bridge;  // output bridge ("dev")
  IpAddr gw{};         // zero: directly connected
  IpAddr src{};        // the bridge's address used as the source
  bool local = false;  // ip-add's own /32 (/128): "local"
  bool user = false;   // route-add ("User:"), else ip-add's ("Cached:")
  // OVS's classifier priority: plen (v6-mapped terms) for connected
  // routes, plen + 32 user, plen + 64 local: longest prefix first, then
  // local > user > cached.
  uint32_t priority() const;
};

struct RouteLookup {
  std::string bridge;
  IpAddr gw{};  // zero: the destination itself is the next hop
  IpAddr src{};
};

// The route table (immutable snapshot; Ofproto builds a new one per change).
class RouteTable {
 public:
  RouteTable() = default;
  explicit RouteTable(std::vector<Route> routes);

  // Longest prefix match (priority order); nullopt: no route.
  std::optional<RouteLookup> lookup(const IpAddr& dst) const;
  // `ovs-appctl ovs/route/show`: "Route Table:\n" then one line per route,
  // "Cached: 1.1.2.0/24 dev br0 SRC 1.1.2.88", "User: 10.0.0.0/8 dev br0
  // GW 1.1.2.1 SRC 1.1.2.88", "Cached: 1.1.2.88/32 dev br0 SRC 1.1.2.88
  // local", highest priority first.
  std::string format() const;
  const std::vector<Route>& routes() const { return routes_; }  // priority order

  // Editing (control thread; returns the new table, this one unchanged).
  // add_user: route-add PREFIX BRIDGE [GW]: the bridge must own an address
  // of the family that the prefix (or the gateway) is on — OVS's "Error
  // while inserting route." otherwise, as src_addr: src is that address.
  // A route with the same prefix replaces the old user route.
  static Result<RouteTable> add_user(const RouteTable& t, const IpPrefix& prefix, std::string_view bridge,
                                     const IpAddr& gw, const BridgeAddrs& addrs);
  // route-del PREFIX: the user route for it ("Not found" otherwise).
  static Result<RouteTable> del_user(const RouteTable& t, const IpPrefix& prefix);
  // The connected routes of the bridges' addresses (ip-add), rebuilt from
  // `addrs`, keeping t's user routes.
  static RouteTable with_connected(const RouteTable& t, const BridgeAddrs& addrs);

 private:
  std::vector<Route> routes_;
};

// --- neighbours ------------------------------------------------------------

// The neighbour cache (OVS tnl-neigh-cache): (bridge, IP) -> MAC. Learned
// entries (snoop) expire kNeighIdleMs after they were last confirmed, as
// OVS's NEIGH_ENTRY_DEFAULT_IDLE_TIME; static ones (neigh-set) never do.
// The clock is injected (ms).
class NeighborCache {
 public:
  static constexpr uint64_t kNeighIdleMs = 15 * 60 * 1000;

  // now_ms: the clock (default: CLOCK_MONOTONIC in ms).
  explicit NeighborCache(std::function<uint64_t()> now_ms = nullptr);

  struct Entry {
    IpAddr ip;
    flow::EthAddr mac;
    std::string bridge;
    bool is_static = false;
    uint64_t expires_ms = 0;  // learned entries
  };

  void set_static(std::string_view bridge, const IpAddr& ip, const flow::EthAddr& mac);
  // A learned entry (refreshes one with the same MAC; replaces another MAC;
  // never overrides a static entry's MAC).
  void learn(std::string_view bridge, const IpAddr& ip, const flow::EthAddr& mac);
  std::optional<flow::EthAddr> lookup(std::string_view bridge, const IpAddr& ip) const;
  // neigh-flush [BR]: every entry (of BR), static or learned.
  void flush(std::string_view bridge = {});
  // Removes expired learned entries; returns how many (maintenance).
  size_t age();
  // OVS tnl_neigh_snoop: an ARP reply, a gratuitous ARP (request or
  // reply with spa == tpa) with a non-zero sha, or an ND neighbour advert
  // with a target link-layer address: learned on `bridge` (when
  // allow_update), and `wc` un-wildcarded as OVS does (nw_proto, arp_sha,
  // nw_src/nw_dst for ARP; ipv6_src/dst, nd_target, arp_tha, tp_src for
  // ND). Returns whether the flow was one of those.
  bool snoop(const flow::FlowKey& flow, flow::FlowKey* wc, std::string_view bridge, bool allow_update);
  // `ovs-appctl tnl/neigh/show`: the header, then "IP" padded to 46
  // columns, the MAC, three spaces, the bridge, " STALE" when expired.
  std::string format() const;
  std::vector<Entry> entries() const;  // sorted by bridge, IP
  // Static entries, for the running config (sorted by bridge, IP).
  std::vector<Entry> static_entries() const;
  // Bumped whenever what lookup() answers may change: an entry added,
  // removed (flush, age) or given another MAC (a refresh with the same MAC
  // does not count). Any thread (relaxed atomic).
  uint64_t generation() const { return gen_.load(std::memory_order_relaxed); }

 private:
  void changed() { gen_.fetch_add(1, std::memory_order_relaxed); }
  std::atomic<uint64_t> gen_{0};
  std::function<uint64_t()> now_ms_;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;  // small: the underlay's next hops
};

// Open vSwitch's tnl_wc_init(): for a packet that came from a tunnel
// (tun_dst set), the tunnel bits matching it to its port consult — tun_id,
// tun_src/tun_dst of its family, tun_flags df|csum|key, tun_tos, and the
// inner ECN bits when the outer ToS is CE; ttl and the UDP ports stay
// wildcarded. Not a tunnel packet: wc untouched. TunnelTable::receive and
// translation (xlate) both start from it.
void tnl_wc_init(const flow::FlowKey& flow, flow::FlowKey& wc);

// --- the snapshot translation reads ------------------------------------------

// Recirculation ids kTnlRecircBase + M (M: the underlay bridge's internal
// vport) mean "this packet was just encapsulated: translate it in the
// bridge of internal vport M as received on its LOCAL port" (the fallback
// of combined tunnel output).
inline constexpr uint32_t kTnlRecircBase = 0x10000;
inline constexpr uint32_t tnl_recirc_id(uint16_t internal_vport) { return kTnlRecircBase + internal_vport; }
inline constexpr bool is_tnl_recirc_id(uint32_t id) {
  return id > kTnlRecircBase && id <= kTnlRecircBase + 0xffff;
}
inline constexpr uint16_t tnl_recirc_vport(uint32_t id) { return static_cast<uint16_t>(id - kTnlRecircBase); }

// Everything about tunnels that translation reads, published as one.
struct TunnelState {
  std::shared_ptr<const TunnelTable> tunnels = std::make_shared<TunnelTable>();
  std::shared_ptr<const BridgeAddrs> addrs = std::make_shared<BridgeAddrs>();
  std::shared_ptr<const RouteTable> routes = std::make_shared<RouteTable>();
  bool combine = true;  // `set tunnel-combine true|false`
  // Bumped by every publish (Ofproto::publish_tunnels): with
  // NeighborCache::generation(), what a tunnel megaflow's ukey remembers so
  // the revalidator re-translates it after any tunnel, route, address or
  // neighbour change (a counter, never an address that could be reused).
  uint64_t generation = 0;
  // One listening vport (tnl-ports-show): name, UDP port (GRE: 0), type, refs.
  struct Vport {
    std::string name;
    uint16_t id = 0;
    TunnelType type = TunnelType::vxlan;
    uint16_t dst_port = 0;
    uint32_t refs = 0;
  };
  std::vector<Vport> vports;  // in creation order (OVS's tnl/ports/show order)
  const Vport* vport(uint16_t id) const;
  // `ovs-appctl tnl/ports/show`: "Listening ports:\n" then
  // "vxlan_sys_4789 (ID) ref_cnt=N" per vport (ID: the datapath vport id,
  // as OVS prints its odp port).
  std::string format_vports() const;
};

// --- ARP / ND frames ---------------------------------------------------------

// An ARP request from (src_mac, src_ip) for target_ip, broadcast (OVS
// tnl_send_arp_request: eth dst ff:ff:ff:ff:ff:ff, tha 0). 42 bytes.
std::vector<uint8_t> compose_arp_request(const flow::EthAddr& src_mac, flow::be32 src_ip,
                                         flow::be32 target_ip);
// An ARP reply from (mac, ip) to the request's sender (eth dst = sha).
std::vector<uint8_t> compose_arp_reply(const flow::EthAddr& mac, flow::be32 ip, const flow::EthAddr& to_mac,
                                       flow::be32 to_ip);
// A neighbour solicitation for target from (src_mac, src_ip), to the
// target's solicited-node multicast address (33:33:ff:xx:xx:xx), hop
// limit 255, with the source link-layer address option (OVS
// compose_nd_ns). 86 bytes.
std::vector<uint8_t> compose_nd_solicit(const flow::EthAddr& src_mac, const flow::In6Addr& src_ip,
                                        const flow::In6Addr& target);
// A neighbour advertisement for `ip` (ours) answering a solicitation from
// (to_mac, to_ip): flags solicited|override (router clear), the target
// link-layer address option, hop limit 255 (OVS compose_nd_na). 86 bytes.
std::vector<uint8_t> compose_nd_advert(const flow::EthAddr& mac, const flow::In6Addr& ip,
                                       const flow::EthAddr& to_mac, const flow::In6Addr& to_ip);

}  // namespace keel::ofproto

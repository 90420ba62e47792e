// hal flow facade — rte_flow-shaped hardware flow rules, whatever the NIC.
//
// What it is: the seam between keel's offload engine (firmware/offload) and a
// NIC's flow engine. A rule is a FlowAttr, a FlowPattern (items, each a spec
// and a mask, rte_flow's words: eth, vlan, ipv4, ...) and FlowActions
// (represented_port, drop, set_*, of_push_vlan, mark, count, ...). Two
// backends implement FlowEngine: hal/dpdk (dpdk_flow.h: real rte_flow calls)
// and hal/sim (sim_flow.h: a model of the NIC's exact-match and masked
// tables). A port that has one returns it from Port::flow_engine(); every
// other port returns nullptr (the engine then says "port has no flow engine").
//
// Data layout: every item, action, pattern and action list is a
// fixed-size, trivially copyable value (no allocation: a bench of millions of
// inserts measures keel, not malloc). Fields are in HOST byte order; MAC and
// IPv6 addresses are byte arrays in wire order. The DPDK backend converts to
// network order. A pattern holds up to kMaxFlowItems items, an action list up
// to kMaxFlowActions actions; the builders refuse more and set `overflow`,
// which every engine then reports as an EINVAL error on the item/action
// past the end (nothing is silently cut). Builders zero whole items first,
// so two equal patterns are equal byte for byte (the sim hashes them).
//
// Ports: items and actions name ports by hal::Port::id() (the datapath port
// number the datapath sets on every hal port). A backend maps them to its own
// ids (DPDK: the ethdev port id of the DpdkPort with that hal id); an id the
// backend doesn't know is an error on that item/action.
//
// Life cycle of a rule: validate() (a hint only: some drivers only parse —
// net_tap never asks the kernel — so keel never trusts a validate alone;
// create() is what decides) -> create() -> query()* -> destroy(). With the
// template API (info().async_api; DPDK: only mlx5, i.e. BlueField hardware):
// configure() once, pattern_template()/actions_template(), template_table()
// sized at creation, then async_create()/async_destroy() enqueue operations
// on a queue (postpone = don't ring the doorbell yet), push() rings it, pull()
// returns completions. A handle from async_create() is valid at once for
// async_destroy() on the same queue, but the rule exists only once its
// completion says ok. After a device reset (FlowEngineInfo::reset_generation
// moved, or calls fail with ENODEV/EIO) every handle is gone.
//
// Errors: every fallible call takes a FlowError* (may be null) that says
// which item/action failed (where + index), the errno and the driver's own
// message; FlowError::status() renders it for a human.
//
// Thread-safety: a FlowEngine is used by one thread at a time (the offload
// thread that owns it); it is control-path code and is never called by a
// PMD. The value types here are plain data, safe to copy between threads.
// HwIngress::ingress() runs on the PMD thread polling the rx queue (inside
// Port::rx()); see port.h for its cost.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "core/status.h"
#include "keel/hal/packet.h"

namespace keel::hal {

class Port;

inline constexpr unsigned kMaxFlowItems = 8;
inline constexpr unsigned kMaxFlowActions = 16;
inline constexpr unsigned kMaxRssQueues = 16;

using FlowMac = std::array<uint8_t, 6>;
using FlowIpv6Addr = std::array<uint8_t, 16>;

// ---------------------------------------------------------------- items ---

enum class FlowItemType : uint8_t {
  eth,
  vlan,
  ipv4,
  ipv6,
  tcp,
  udp,
  icmp,
  icmp6,
  vxlan,
  mark,
  meta,
  port_id,
  represented_port,
};
inline constexpr unsigned kFlowItemTypes = 13;
const char* to_string(FlowItemType t);  // rte_flow's (testpmd's) word: "eth", "represented_port"

// Each item's spec and mask have the same struct; a mask bit 1 means "match
// this bit". rte_flow's meaning of an item with no mask (the default mask)
// is not used: keel always gives both.
struct FlowEth {
  FlowMac dst, src;
  uint16_t type;  // EtherType of what follows (the inner one after VLAN tags: see FlowVlan)
  uint8_t has_vlan;  // rte_flow_item_eth::has_vlan (1: tagged)
};
struct FlowVlan {
  uint16_t tci;         // PCP, DEI, VID
  uint16_t inner_type;  // EtherType after the tag
};
struct FlowIpv4 {
  uint8_t tos;
  uint8_t ttl;
  uint8_t proto;
  uint16_t frag;  // flags + fragment offset, as in the header (host order)
  uint32_t src, dst;
};
struct FlowIpv6 {
  uint8_t tclass;
  uint32_t flow_label;  // 20 bits
  uint8_t proto;        // next header
  uint8_t hop_limit;
  uint8_t has_frag_ext;  // rte_flow_item_ipv6::has_frag_ext
  FlowIpv6Addr src, dst;
};
struct FlowTcp {
  uint16_t src, dst;
  uint8_t flags;
};
struct FlowUdp {
  uint16_t src, dst;
};
struct FlowIcmp {
  uint8_t type, code;
};
struct FlowVxlan {
  uint32_t vni;  // 24 bits
  uint8_t flags;
};
struct FlowMarkItem {
  uint32_t id;
};
struct FlowMetaItem {
  uint32_t data;
};
struct FlowPortItem {
  uint32_t id;  // hal::Port::id()
};

union FlowItemData {
  FlowEth eth;
  FlowVlan vlan;
  FlowIpv4 ipv4;
  FlowIpv6 ipv6;
  FlowTcp tcp;
  FlowUdp udp;
  FlowIcmp icmp;  // icmp and icmp6
  FlowVxlan vxlan;
  FlowMarkItem mark;
  FlowMetaItem meta;
  FlowPortItem port;  // port_id and represented_port
};

struct FlowItem {
  FlowItemType type;
  FlowItemData spec;
  FlowItemData mask;
};

// Full masks, for builders and tests.
FlowEth flow_eth_mask_all();
FlowIpv4 flow_ipv4_mask_all();
FlowIpv6 flow_ipv6_mask_all();

struct FlowPattern {
  std::array<FlowItem, kMaxFlowItems> items;
  uint8_t count = 0;
  bool overflow = false;  // a builder was refused: more than kMaxFlowItems

  FlowPattern() { std::memset(static_cast<void*>(items.data()), 0, sizeof items); }

  std::span<const FlowItem> view() const { return {items.data(), count}; }
  // Appends an item (zeroed first, then spec and mask copied); false and
  // `overflow` when full.
  bool add(const FlowItem& it);
  // Builders (chainable): spec and mask of the item's own type.
  FlowPattern& eth(const FlowEth& spec, const FlowEth& mask);
  FlowPattern& vlan(const FlowVlan& spec, const FlowVlan& mask);
  FlowPattern& ipv4(const FlowIpv4& spec, const FlowIpv4& mask);
  FlowPattern& ipv6(const FlowIpv6& spec, const FlowIpv6& mask);
  FlowPattern& tcp(const FlowTcp& spec, const FlowTcp& mask);
  FlowPattern& udp(const FlowUdp& spec, const FlowUdp& mask);
  FlowPattern& icmp(const FlowIcmp& spec, const FlowIcmp& mask);
  FlowPattern& icmp6(const FlowIcmp& spec, const FlowIcmp& mask);
  FlowPattern& vxlan(const FlowVxlan& spec, const FlowVxlan& mask);
  FlowPattern& mark(uint32_t id, uint32_t mask = ~0u);
  FlowPattern& meta(uint32_t data, uint32_t mask = ~0u);
  FlowPattern& port_id(uint32_t hal_port);                // exact
  FlowPattern& represented_port(uint32_t hal_port);       // exact
};
bool operator==(const FlowPattern& a, const FlowPattern& b);  // same items (bytes), same count

// -------------------------------------------------------------- actions ---

enum class FlowActionType : uint8_t {
  port_id,
  represented_port,
  drop,
  set_mac_src,
  set_mac_dst,
  set_ipv4_src,
  set_ipv4_dst,
  set_ipv4_dscp,
  set_ipv4_ttl,
  set_ipv6_src,
  set_ipv6_dst,
  set_ipv6_dscp,
  set_ipv6_hop,
  set_tp_src,
  set_tp_dst,
  of_push_vlan,
  of_set_vlan_vid,
  of_set_vlan_pcp,
  of_pop_vlan,
  mark,
  count,
  age,
  jump,
  queue,
  rss,
};
inline constexpr unsigned kFlowActionTypes = 25;
const char* to_string(FlowActionType t);  // "of_push_vlan", "represented_port", ...

// RSS hash types (FlowActionConf::rss.types); the DPDK backend maps them
// to RTE_ETH_RSS_*.
inline constexpr uint32_t kFlowRssIpv4 = 1, kFlowRssIpv6 = 2, kFlowRssTcp = 4, kFlowRssUdp = 8;

struct FlowRss {
  uint32_t types;  // kFlowRss* bits; 0: the device's default
  uint8_t level;   // 0: default, 1: outermost
  uint8_t n_queues;
  std::array<uint16_t, kMaxRssQueues> queues;
};

union FlowActionConf {
  uint32_t port;         // port_id, represented_port: hal::Port::id()
  FlowMac mac;           // set_mac_src/dst
  uint32_t ipv4;         // set_ipv4_src/dst
  FlowIpv6Addr ipv6;     // set_ipv6_src/dst
  uint8_t dscp;          // set_ipv4_dscp/set_ipv6_dscp (6 bits)
  uint8_t ttl;           // set_ipv4_ttl, set_ipv6_hop
  uint16_t tp_port;      // set_tp_src/dst
  uint16_t ethertype;    // of_push_vlan (0x8100, 0x88a8)
  uint16_t vid;          // of_set_vlan_vid (12 bits)
  uint8_t pcp;           // of_set_vlan_pcp (3 bits)
  uint32_t mark;         // mark (24 bits used by keel, never 0)
  uint32_t counter_id;   // count (0: a counter of the rule's own)
  uint32_t age_timeout;  // age: seconds without a hit before the rule ages
  uint32_t group;        // jump
  uint16_t queue;        // queue
  FlowRss rss;           // rss
};

struct FlowAction {
  FlowActionType type;
  FlowActionConf conf;
};

struct FlowActions {
  std::array<FlowAction, kMaxFlowActions> actions;
  uint8_t count = 0;
  bool overflow = false;

  FlowActions() { std::memset(static_cast<void*>(actions.data()), 0, sizeof actions); }

  std::span<const FlowAction> view() const { return {actions.data(), count}; }
  bool add(const FlowAction& a);
  bool has(FlowActionType t) const;
  // Builders (chainable).
  FlowActions& port(uint32_t hal_port);              // port_id
  FlowActions& represented_port(uint32_t hal_port);  // represented_port
  FlowActions& drop();
  FlowActions& set_mac_src(const FlowMac& m);
  FlowActions& set_mac_dst(const FlowMac& m);
  FlowActions& set_ipv4_src(uint32_t a);
  FlowActions& set_ipv4_dst(uint32_t a);
  FlowActions& set_ipv4_dscp(uint8_t d);
  FlowActions& set_ipv4_ttl(uint8_t t);
  FlowActions& set_ipv6_src(const FlowIpv6Addr& a);
  FlowActions& set_ipv6_dst(const FlowIpv6Addr& a);
  FlowActions& set_ipv6_dscp(uint8_t d);
  FlowActions& set_ipv6_hop(uint8_t h);
  FlowActions& set_tp_src(uint16_t p);
  FlowActions& set_tp_dst(uint16_t p);
  FlowActions& push_vlan(uint16_t ethertype = 0x8100);  // of_push_vlan
  FlowActions& set_vlan_vid(uint16_t vid);
  FlowActions& set_vlan_pcp(uint8_t pcp);
  FlowActions& pop_vlan();
  FlowActions& mark(uint32_t id);
  FlowActions& count_hits(uint32_t counter_id = 0);  // count ("count" is the size field)
  FlowActions& age(uint32_t timeout_s);
  FlowActions& jump(uint32_t group);
  FlowActions& queue(uint16_t q);
  FlowActions& rss(std::span<const uint16_t> queues, uint32_t types = 0, uint8_t level = 0);
};
bool operator==(const FlowActions& a, const FlowActions& b);

// testpmd-like text for logs and offload-show:
//   "eth dst is 02:00:00:00:00:01 type is 0x0800 / ipv4 src is 10.0.0.1 / udp dst is 53 / end"
// A field with a full mask prints "is V", a partial mask "spec V mask M", a
// zero mask nothing ("eth / ipv4 / end" for items matching anything).
//   "port_id id 2 / count / end", "of_push_vlan ethertype 0x8100 / ..."
std::string to_string(const FlowItem& it);
std::string to_string(const FlowPattern& p);
std::string to_string(const FlowAction& a);
std::string to_string(const FlowActions& a);

// ------------------------------------------------------------ attributes ---

struct FlowAttr {
  uint32_t group = 0;
  uint32_t priority = 0;  // 0 is the highest
  bool ingress = true;
  bool egress = false;
  bool transfer = false;  // e-switch rule (BlueField: the rule sees every port)
};

// ---------------------------------------------------------------- errors ---

// Where an error comes from (rte_flow_error_type, folded).
enum class FlowErrorWhere : uint8_t { none, attr, item, action, handle, device, queue, table };
const char* to_string(FlowErrorWhere w);

struct FlowError {
  int errnum = 0;  // positive errno (ENOTSUP, ENOSPC, EEXIST, ENODEV, ...)
  FlowErrorWhere where = FlowErrorWhere::none;
  int index = -1;        // the failing item/action index in the pattern/actions; -1 none
  std::string message;   // the driver's (or the model's) own words
  // Context for status(), filled by the engine that failed:
  const char* op = "";   // "create", "validate", "destroy", "query", "async_create", ...
  std::string port;      // the port's name
  int type = -1;         // the FlowItemType/FlowActionType (as int) at `index`, -1 unknown

  // "rte_flow create on port p0: action 1 (of_push_vlan): <message> (ENOTSUP)"
  Status status() const;
  void clear() { *this = FlowError{}; }
};

// "ENOTSUP", "ENOSPC", ... (or "errno 123").
const char* errno_name(int errnum);
// The Errc a flow errno maps to (ENOSPC -> resource_exhausted, ENOTSUP/ENOSYS
// -> unsupported, EEXIST -> already_exists, ENODEV/EIO/EBUSY/EAGAIN ->
// unavailable, ENOENT -> not_found, EINVAL -> invalid_argument).
Errc flow_errc(int errnum);
// Fills `err` (when not null) and returns its status(): a helper for engines.
Status flow_fail(FlowError* err, const char* op, const std::string& port, int errnum, FlowErrorWhere where,
                 int index, int type, std::string message);

// --------------------------------------------------------------- engine ---

using FlowHandle = uint64_t;
inline constexpr FlowHandle kNoFlow = 0;

struct FlowQuery {
  bool ok = false;
  int errnum = 0;          // when !ok
  uint64_t hits = 0;       // packets (cumulative since the rule was created)
  uint64_t bytes = 0;
  uint64_t last_hit_ns = 0;  // steady-clock ns of the last hit; 0: never or unknown (DPDK: from AGE, else 0)
  bool aged = false;         // the AGE action fired
};

struct FlowEngineInfo {
  bool async_api = false;  // the template/queue API works (DPDK: rte_flow_info_get succeeded)
  uint16_t max_queues = 0;
  uint32_t queue_size = 0;
  uint32_t max_counters = 0, max_aging = 0;
  uint32_t exact_capacity = 0;   // exact-match rules the device holds (0: unknown)
  uint32_t masked_capacity = 0;  // masked rules (0: unknown)
  uint64_t reset_generation = 0;  // moves when the device forgot every rule (reset)
};

using FlowTemplateId = uint32_t;  // pattern or actions template (per engine)
using FlowTableId = uint32_t;

struct FlowTemplateAttr {
  bool relaxed_matching = false;
  bool ingress = true, egress = false, transfer = false;
};

struct FlowOpResult {
  uint64_t user_data = 0;
  bool ok = false;
  int errnum = 0;
  FlowHandle handle = kNoFlow;
};

class FlowEngine {
 public:
  virtual ~FlowEngine() = default;

  virtual FlowEngineInfo info() const = 0;
  // The port this engine belongs to (for messages).
  virtual const std::string& port_name() const = 0;

  // --- synchronous API (every engine) ---
  // A hint: a driver may only parse (see the top); create() decides.
  virtual Status validate(const FlowAttr& attr, const FlowPattern& pattern, const FlowActions& actions,
                          FlowError* err) = 0;
  virtual Result<FlowHandle> create(const FlowAttr& attr, const FlowPattern& pattern, const FlowActions& actions,
                                    FlowError* err) = 0;
  virtual Status destroy(FlowHandle h, FlowError* err) = 0;
  // destroy() that also reads the rule's counters as the device last
  // counted them (final.ok false when they could not be read: no count
  // action, or the read failed), so that no hit is left uncounted. An
  // engine that removes a rule and reads its counters in one step (the sim)
  // is exact; the default queries just before destroying (rte_flow has no
  // such call: a hit between the two is not seen).
  virtual Status destroy_counted(FlowHandle h, FlowQuery& final, FlowError* err);
  // After a device reset (info().reset_generation moved) an engine may
  // refuse new rules (ENODEV) until its user has taken stock of what the
  // reset lost and calls this, as a DPDK application calls
  // rte_eth_dev_reset() after RTE_ETH_EVENT_INTR_RESET. Default: nothing.
  virtual void reset_acknowledged() {}
  // Counters of a rule with a count action (and age when it has one).
  // Fills q (q.ok false and q.errnum on failure) and returns the status.
  virtual Status query(FlowHandle h, FlowQuery& q, FlowError* err) = 0;
  // query() of many rules: out[i] for handles[i] (out.size() >= handles.size()).
  // Returns how many succeeded; each failure is in its out[i]. The default
  // is a loop of query() (DPDK 22.11 has no bulk query of plain rules).
  virtual unsigned query_bulk(std::span<const FlowHandle> handles, std::span<FlowQuery> out);
  // Destroys every rule of the port.
  virtual Status flush(FlowError* err) = 0;

  // --- template + queue API (info().async_api; default: unsupported) ---
  virtual Status configure(uint16_t n_queues, uint32_t queue_size, FlowError* err);
  virtual Result<FlowTemplateId> pattern_template(const FlowTemplateAttr& attr, const FlowPattern& pattern,
                                                  FlowError* err);
  // `masks`: which action fields are fixed by the template (non-zero
  // fields) and which each rule gives; same types in the same order.
  virtual Result<FlowTemplateId> actions_template(const FlowTemplateAttr& attr, const FlowActions& actions,
                                                  const FlowActions& masks, FlowError* err);
  virtual Result<FlowTableId> template_table(const FlowAttr& attr, uint32_t capacity,
                                             std::span<const FlowTemplateId> pattern_templates,
                                             std::span<const FlowTemplateId> actions_templates, FlowError* err);
  virtual Status destroy_template_table(FlowTableId t, FlowError* err);
  virtual Status destroy_pattern_template(FlowTemplateId t, FlowError* err);
  virtual Status destroy_actions_template(FlowTemplateId t, FlowError* err);
  // Enqueues a create on `queue`; *out is the handle at once (see the top).
  virtual Status async_create(uint16_t queue, FlowTableId table, const FlowPattern& pattern, uint8_t ptpl_index,
                              const FlowActions& actions, uint8_t atpl_index, bool postpone, uint64_t user_data,
                              FlowHandle* out, FlowError* err);
  virtual Status async_destroy(uint16_t queue, FlowHandle h, bool postpone, uint64_t user_data, FlowError* err);
  virtual Status push(uint16_t queue, FlowError* err);
  // Completions of `queue` (up to out.size()); 0 on error (err says why).
  virtual unsigned pull(uint16_t queue, std::span<FlowOpResult> out, FlowError* err);

 protected:
  // The "unsupported" answer of the template API defaults.
  Status no_async(const char* op, FlowError* err) const;
};

// ----------------------------------------------------- hardware ingress ---

// The sim model's seam: what a NIC's flow engine does to received packets
// before a PMD sees them (a DPDK NIC does it itself; nothing here runs for
// DPDK ports). Port::rx() calls ingress() after rx_burst() with the burst
// (in_port set): the hook forwards or drops the packets a full-offload rule
// matched (they are gone: transmitted or released; it counts them with
// Port::count_rx_hw()), sets set_flow_mark() on the ones a MARK rule matched,
// compacts the rest in order at the front of `pkts` and returns how many
// remain for the PMD. Runs on the PMD thread polling queue q: noexcept, no
// allocation, no lock a PMD waits on for long.
class HwIngress {
 public:
  virtual ~HwIngress() = default;
  virtual uint16_t ingress(Port& in, uint16_t q, std::span<Packet*> pkts) noexcept = 0;
};

}  // namespace keel::hal

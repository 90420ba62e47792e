// hal/dpdk flow engine: facade -> rte_flow conversion and the calls
// (dpdk_flow.h has the design, the driver traps and the thread-safety rule).
//
// The template/queue API (rte_flow_info_get, rte_flow_configure, templates,
// tables, async ops) is experimental in DPDK 22.11: this file, and only
// this file, opts in before any DPDK header is read.
#define ALLOW_EXPERIMENTAL_API 1
#include "dpdk/dpdk_flow.h"

#include <rte_byteorder.h>
#include <rte_errno.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace keel::hal::dpdk {

namespace {

uint64_t steady_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

rte_flow_item_type rte_item_type(FlowItemType t) {
  switch (t) {
    case FlowItemType::eth: return RTE_FLOW_ITEM_TYPE_ETH;
    case FlowItemType::vlan: return RTE_FLOW_ITEM_TYPE_VLAN;
    case FlowItemType::ipv4: return RTE_FLOW_ITEM_TYPE_IPV4;
    case FlowItemType::ipv6: return RTE_FLOW_ITEM_TYPE_IPV6;
    case FlowItemType::tcp: return RTE_FLOW_ITEM_TYPE_TCP;
    case FlowItemType::udp: return RTE_FLOW_ITEM_TYPE_UDP;
    case FlowItemType::icmp: return RTE_FLOW_ITEM_TYPE_ICMP;
    case FlowItemType::icmp6: return RTE_FLOW_ITEM_TYPE_ICMP6;
    case FlowItemType::vxlan: return RTE_FLOW_ITEM_TYPE_VXLAN;
    case FlowItemType::mark: return RTE_FLOW_ITEM_TYPE_MARK;
    case FlowItemType::meta: return RTE_FLOW_ITEM_TYPE_META;
    case FlowItemType::port_id: return RTE_FLOW_ITEM_TYPE_PORT_ID;
    case FlowItemType::represented_port: return RTE_FLOW_ITEM_TYPE_REPRESENTED_PORT;
  }
  return RTE_FLOW_ITEM_TYPE_VOID;
}

rte_flow_action_type rte_action_type(FlowActionType t) {
  switch (t) {
    case FlowActionType::port_id: return RTE_FLOW_ACTION_TYPE_PORT_ID;
    case FlowActionType::represented_port: return RTE_FLOW_ACTION_TYPE_REPRESENTED_PORT;
    case FlowActionType::drop: return RTE_FLOW_ACTION_TYPE_DROP;
    case FlowActionType::set_mac_src: return RTE_FLOW_ACTION_TYPE_SET_MAC_SRC;
    case FlowActionType::set_mac_dst: return RTE_FLOW_ACTION_TYPE_SET_MAC_DST;
    case FlowActionType::set_ipv4_src: return RTE_FLOW_ACTION_TYPE_SET_IPV4_SRC;
    case FlowActionType::set_ipv4_dst: return RTE_FLOW_ACTION_TYPE_SET_IPV4_DST;
    case FlowActionType::set_ipv4_dscp: return RTE_FLOW_ACTION_TYPE_SET_IPV4_DSCP;
    case FlowActionType::set_ipv4_ttl: return RTE_FLOW_ACTION_TYPE_SET_TTL;
    case FlowActionType::set_ipv6_src: return RTE_FLOW_ACTION_TYPE_SET_IPV6_SRC;
    case FlowActionType::set_ipv6_dst: return RTE_FLOW_ACTION_TYPE_SET_IPV6_DST;
    case FlowActionType::set_ipv6_dscp: return RTE_FLOW_ACTION_TYPE_SET_IPV6_DSCP;
    case FlowActionType::set_ipv6_hop: return RTE_FLOW_ACTION_TYPE_SET_TTL;  // TTL or hop limit, by the pattern
    case FlowActionType::set_tp_src: return RTE_FLOW_ACTION_TYPE_SET_TP_SRC;
    case FlowActionType::set_tp_dst: return RTE_FLOW_ACTION_TYPE_SET_TP_DST;
    case FlowActionType::of_push_vlan: return RTE_FLOW_ACTION_TYPE_OF_PUSH_VLAN;
    case FlowActionType::of_set_vlan_vid: return RTE_FLOW_ACTION_TYPE_OF_SET_VLAN_VID;
    case FlowActionType::of_set_vlan_pcp: return RTE_FLOW_ACTION_TYPE_OF_SET_VLAN_PCP;
    case FlowActionType::of_pop_vlan: return RTE_FLOW_ACTION_TYPE_OF_POP_VLAN;
    case FlowActionType::mark: return RTE_FLOW_ACTION_TYPE_MARK;
    case FlowActionType::count: return RTE_FLOW_ACTION_TYPE_COUNT;
    case FlowActionType::age: return RTE_FLOW_ACTION_TYPE_AGE;
    case FlowActionType::jump: return RTE_FLOW_ACTION_TYPE_JUMP;
    case FlowActionType::queue: return RTE_FLOW_ACTION_TYPE_QUEUE;
    case FlowActionType::rss: return RTE_FLOW_ACTION_TYPE_RSS;
  }
  return RTE_FLOW_ACTION_TYPE_VOID;
}

// One side (spec or mask) of an item into rte_flow's struct, network order.
// `port_dpdk`: the mapped ethdev id for port items (spec side), or the mask.
void item_side(FlowItemType t, const FlowItemData& d, uint32_t port_value, RteFlowRule::ItemStore& o) {
  std::memset(static_cast<void*>(&o), 0, sizeof o);
  switch (t) {
    case FlowItemType::eth:
      std::memcpy(o.eth.hdr.dst_addr.addr_bytes, d.eth.dst.data(), 6);
      std::memcpy(o.eth.hdr.src_addr.addr_bytes, d.eth.src.data(), 6);
      o.eth.hdr.ether_type = rte_cpu_to_be_16(d.eth.type);
      o.eth.has_vlan = d.eth.has_vlan & 1;
      break;
    case FlowItemType::vlan:
      o.vlan.hdr.vlan_tci = rte_cpu_to_be_16(d.vlan.tci);
      o.vlan.hdr.eth_proto = rte_cpu_to_be_16(d.vlan.inner_type);
      break;
    case FlowItemType::ipv4:
      o.ipv4.hdr.type_of_service = d.ipv4.tos;
      o.ipv4.hdr.time_to_live = d.ipv4.ttl;
      o.ipv4.hdr.next_proto_id = d.ipv4.proto;
      o.ipv4.hdr.fragment_offset = rte_cpu_to_be_16(d.ipv4.frag);
      o.ipv4.hdr.src_addr = rte_cpu_to_be_32(d.ipv4.src);
      o.ipv4.hdr.dst_addr = rte_cpu_to_be_32(d.ipv4.dst);
      break;
    case FlowItemType::ipv6:
      // vtc_flow: version (4 bits, not matched) | traffic class (8) | flow label (20).
      o.ipv6.hdr.vtc_flow =
          rte_cpu_to_be_32((uint32_t{d.ipv6.tclass} << 20) | (d.ipv6.flow_label & 0xfffff));
      o.ipv6.hdr.proto = d.ipv6.proto;
      o.ipv6.hdr.hop_limits = d.ipv6.hop_limit;
      std::memcpy(o.ipv6.hdr.src_addr, d.ipv6.src.data(), 16);
      std::memcpy(o.ipv6.hdr.dst_addr, d.ipv6.dst.data(), 16);
      o.ipv6.has_frag_ext = d.ipv6.has_frag_ext & 1;
      break;
    case FlowItemType::tcp:
      o.tcp.hdr.src_port = rte_cpu_to_be_16(d.tcp.src);
      o.tcp.hdr.dst_port = rte_cpu_to_be_16(d.tcp.dst);
      o.tcp.hdr.tcp_flags = d.tcp.flags;
      break;
    case FlowItemType::udp:
      o.udp.hdr.src_port = rte_cpu_to_be_16(d.udp.src);
      o.udp.hdr.dst_port = rte_cpu_to_be_16(d.udp.dst);
      break;
    case FlowItemType::icmp:
      o.icmp.hdr.icmp_type = d.icmp.type;
      o.icmp.hdr.icmp_code = d.icmp.code;
      break;
    case FlowItemType::icmp6:
      o.icmp6.type = d.icmp.type;
      o.icmp6.code = d.icmp.code;
      break;
    case FlowItemType::vxlan:
      o.vxlan.flags = d.vxlan.flags;
      o.vxlan.vni[0] = static_cast<uint8_t>(d.vxlan.vni >> 16);
      o.vxlan.vni[1] = static_cast<uint8_t>(d.vxlan.vni >> 8);
      o.vxlan.vni[2] = static_cast<uint8_t>(d.vxlan.vni);
      break;
    case FlowItemType::mark:
      o.mark.id = d.mark.id;
      break;
    case FlowItemType::meta:
      o.meta.data = d.meta.data;
      break;
    case FlowItemType::port_id:
      o.port_id.id = port_value;
      break;
    case FlowItemType::represented_port:
      o.ethdev.port_id = static_cast<uint16_t>(port_value);
      break;
  }
}

template <typename T>
int index_in(const void* cause, const T* base, size_t n) {
  const auto* c = static_cast<const unsigned char*>(cause);
  const auto* b = reinterpret_cast<const unsigned char*>(base);
  if (c < b || c >= b + n * sizeof(T)) return -1;
  return static_cast<int>(static_cast<size_t>(c - b) / sizeof(T));
}

}  // namespace

RteFlowRule::RteFlowRule() {
  std::memset(static_cast<void*>(&attr), 0, sizeof attr);
  std::memset(static_cast<void*>(items.data()), 0, sizeof items);
  std::memset(static_cast<void*>(spec.data()), 0, sizeof spec);
  std::memset(static_cast<void*>(mask.data()), 0, sizeof mask);
  std::memset(static_cast<void*>(actions.data()), 0, sizeof actions);
  std::memset(static_cast<void*>(conf.data()), 0, sizeof conf);
  std::memset(static_cast<void*>(rss_queues.data()), 0, sizeof rss_queues);
  items[0].type = RTE_FLOW_ITEM_TYPE_END;
  actions[0].type = RTE_FLOW_ACTION_TYPE_END;
}

int RteFlowRule::item_index_of(const void* cause) const {
  if (cause == nullptr) return -1;
  int i = index_in(cause, items.data(), n_items);
  if (i < 0) i = index_in(cause, spec.data(), n_items);
  if (i < 0) i = index_in(cause, mask.data(), n_items);
  return i;
}

int RteFlowRule::action_index_of(const void* cause) const {
  if (cause == nullptr) return -1;
  int i = index_in(cause, actions.data(), n_actions);
  if (i < 0) i = index_in(cause, conf.data(), n_actions);
  if (i < 0) {
    const int r = index_in(cause, rss_queues.data(), n_actions);
    if (r >= 0) i = r;
  }
  return i;
}

Status convert_attr(const FlowAttr& a, rte_flow_attr& out) {
  std::memset(static_cast<void*>(&out), 0, sizeof out);
  out.group = a.group;
  out.priority = a.priority;
  out.ingress = a.ingress ? 1 : 0;
  out.egress = a.egress ? 1 : 0;
  out.transfer = a.transfer ? 1 : 0;
  return {};
}

uint64_t rss_types_to_dpdk(uint32_t types) {
  uint64_t t = 0;
  if (types & kFlowRssIpv4) t |= RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_FRAG_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_OTHER;
  if (types & kFlowRssIpv6) t |= RTE_ETH_RSS_IPV6 | RTE_ETH_RSS_FRAG_IPV6 | RTE_ETH_RSS_NONFRAG_IPV6_OTHER;
  if (types & kFlowRssTcp) t |= RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_NONFRAG_IPV6_TCP;
  if (types & kFlowRssUdp) t |= RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_NONFRAG_IPV6_UDP;
  return t;
}

Status convert_pattern(const FlowPattern& p, const PortMap& ports, RteFlowRule& out, FlowError* err) {
  out.n_items = 0;
  out.items[0].type = RTE_FLOW_ITEM_TYPE_END;
  if (p.overflow || p.count > kMaxFlowItems)
    return flow_fail(err, "convert", "", EINVAL, FlowErrorWhere::item, static_cast<int>(kMaxFlowItems), -1,
                     "more than " + std::to_string(kMaxFlowItems) + " pattern items");
  for (unsigned i = 0; i < p.count; ++i) {
    const FlowItem& it = p.items[i];
    uint32_t spec_port = 0, mask_port = 0;
    if (it.type == FlowItemType::port_id || it.type == FlowItemType::represented_port) {
      const std::optional<uint16_t> dp = ports ? ports(it.spec.port.id) : std::nullopt;
      if (!dp)
        return flow_fail(err, "convert", "", ENODEV, FlowErrorWhere::item, static_cast<int>(i),
                         static_cast<int>(it.type),
                         "port " + std::to_string(it.spec.port.id) + " is not a DPDK port of this process");
      spec_port = *dp;
      mask_port = it.mask.port.id == 0 ? 0 : (it.type == FlowItemType::port_id ? ~0u : 0xffffu);
    }
    item_side(it.type, it.spec, spec_port, out.spec[i]);
    item_side(it.type, it.mask, mask_port, out.mask[i]);
    rte_flow_item& r = out.items[i];
    r.type = rte_item_type(it.type);
    r.spec = &out.spec[i];
    r.mask = &out.mask[i];
    r.last = nullptr;
  }
  out.n_items = p.count;
  out.items[p.count].type = RTE_FLOW_ITEM_TYPE_END;
  out.items[p.count].spec = out.items[p.count].mask = out.items[p.count].last = nullptr;
  return {};
}

Status convert_actions(const FlowActions& a, const PortMap& ports, RteFlowRule& out, FlowError* err) {
  out.n_actions = 0;
  out.actions[0].type = RTE_FLOW_ACTION_TYPE_END;
  if (a.overflow || a.count > kMaxFlowActions)
    return flow_fail(err, "convert", "", EINVAL, FlowErrorWhere::action, static_cast<int>(a.count), -1,
                     "more than " + std::to_string(kMaxFlowActions) + " actions (or an rss list over " +
                         std::to_string(kMaxRssQueues) + " queues)");
  for (unsigned i = 0; i < a.count; ++i) {
    const FlowAction& x = a.actions[i];
    const FlowActionConf& c = x.conf;
    RteFlowRule::ActionStore& o = out.conf[i];
    std::memset(static_cast<void*>(&o), 0, sizeof o);
    const void* conf = &o;
    switch (x.type) {
      case FlowActionType::port_id:
      case FlowActionType::represented_port: {
        const std::optional<uint16_t> dp = ports ? ports(c.port) : std::nullopt;
        if (!dp)
          return flow_fail(err, "convert", "", ENODEV, FlowErrorWhere::action, static_cast<int>(i),
                           static_cast<int>(x.type),
                           "port " + std::to_string(c.port) + " is not a DPDK port of this process");
        if (x.type == FlowActionType::port_id)
          o.port_id.id = *dp;
        else
          o.ethdev.port_id = *dp;
        break;
      }
      case FlowActionType::drop:
      case FlowActionType::of_pop_vlan:
        conf = nullptr;
        break;
      case FlowActionType::set_mac_src:
      case FlowActionType::set_mac_dst:
        std::memcpy(o.mac.mac_addr, c.mac.data(), 6);
        break;
      case FlowActionType::set_ipv4_src:
      case FlowActionType::set_ipv4_dst:
        o.ipv4.ipv4_addr = rte_cpu_to_be_32(c.ipv4);
        break;
      case FlowActionType::set_ipv6_src:
      case FlowActionType::set_ipv6_dst:
        std::memcpy(o.ipv6.ipv6_addr, c.ipv6.data(), 16);
        break;
      case FlowActionType::set_ipv4_dscp:
      case FlowActionType::set_ipv6_dscp:
        o.dscp.dscp = c.dscp & 0x3f;
        break;
      case FlowActionType::set_ipv4_ttl:
      case FlowActionType::set_ipv6_hop:
        o.ttl.ttl_value = c.ttl;
        break;
      case FlowActionType::set_tp_src:
      case FlowActionType::set_tp_dst:
        o.tp.port = rte_cpu_to_be_16(c.tp_port);
        break;
      case FlowActionType::of_push_vlan:
        o.push_vlan.ethertype = rte_cpu_to_be_16(c.ethertype);
        break;
      case FlowActionType::of_set_vlan_vid:
        o.vid.vlan_vid = rte_cpu_to_be_16(c.vid & 0xfff);
        break;
      case FlowActionType::of_set_vlan_pcp:
        o.pcp.vlan_pcp = c.pcp & 7;
        break;
      case FlowActionType::mark:
        o.mark.id = c.mark;
        break;
      case FlowActionType::count:
        o.count.id = c.counter_id;
        break;
      case FlowActionType::age:
        o.age.timeout = c.age_timeout & 0xffffff;
        o.age.context = nullptr;  // rte_flow's default: the rule itself
        break;
      case FlowActionType::jump:
        o.jump.group = c.group;
        break;
      case FlowActionType::queue:
        o.queue.index = c.queue;
        break;
      case FlowActionType::rss: {
        if (c.rss.n_queues == 0 || c.rss.n_queues > kMaxRssQueues)
          return flow_fail(err, "convert", "", EINVAL, FlowErrorWhere::action, static_cast<int>(i),
                           static_cast<int>(x.type),
                           "rss needs 1.." + std::to_string(kMaxRssQueues) + " queues, got " +
                               std::to_string(c.rss.n_queues));
        for (unsigned q = 0; q < c.rss.n_queues; ++q) out.rss_queues[i][q] = c.rss.queues[q];
        o.rss.func = RTE_ETH_HASH_FUNCTION_DEFAULT;
        o.rss.level = c.rss.level;
        o.rss.types = rss_types_to_dpdk(c.rss.types);
        o.rss.key_len = 0;
        o.rss.key = nullptr;
        o.rss.queue_num = c.rss.n_queues;
        o.rss.queue = out.rss_queues[i].data();
        break;
      }
    }
    out.actions[i].type = rte_action_type(x.type);
    out.actions[i].conf = conf;
  }
  out.n_actions = a.count;
  out.actions[a.count].type = RTE_FLOW_ACTION_TYPE_END;
  out.actions[a.count].conf = nullptr;
  return {};
}

Status convert(const FlowAttr& attr, const FlowPattern& p, const FlowActions& a, const PortMap& ports,
               RteFlowRule& out, FlowError* err) {
  if (Status st = convert_attr(attr, out.attr); !st.ok()) return st;
  if (Status st = convert_pattern(p, ports, out, err); !st.ok()) return st;
  return convert_actions(a, ports, out, err);
}

FlowError translate_error(const rte_flow_error& e, int errnum, const RteFlowRule* rule, const FlowPattern* p,
                          const FlowActions* a, const char* op, const std::string& port) {
  FlowError f;
  f.errnum = errnum > 0 ? errnum : (errnum < 0 ? -errnum : EIO);
  f.op = op;
  f.port = port;
  f.message = e.message != nullptr ? e.message : "";
  switch (e.type) {
    case RTE_FLOW_ERROR_TYPE_NONE:
    case RTE_FLOW_ERROR_TYPE_UNSPECIFIED:
      f.where = FlowErrorWhere::none;
      break;
    case RTE_FLOW_ERROR_TYPE_HANDLE:
      f.where = FlowErrorWhere::handle;
      break;
    case RTE_FLOW_ERROR_TYPE_ATTR_GROUP:
    case RTE_FLOW_ERROR_TYPE_ATTR_PRIORITY:
    case RTE_FLOW_ERROR_TYPE_ATTR_INGRESS:
    case RTE_FLOW_ERROR_TYPE_ATTR_EGRESS:
    case RTE_FLOW_ERROR_TYPE_ATTR_TRANSFER:
    case RTE_FLOW_ERROR_TYPE_ATTR:
      f.where = FlowErrorWhere::attr;
      break;
    case RTE_FLOW_ERROR_TYPE_ITEM_NUM:
    case RTE_FLOW_ERROR_TYPE_ITEM_SPEC:
    case RTE_FLOW_ERROR_TYPE_ITEM_LAST:
    case RTE_FLOW_ERROR_TYPE_ITEM_MASK:
    case RTE_FLOW_ERROR_TYPE_ITEM:
      f.where = FlowErrorWhere::item;
      if (rule) f.index = rule->item_index_of(e.cause);
      if (p && f.index >= 0 && f.index < p->count) f.type = static_cast<int>(p->items[f.index].type);
      break;
    case RTE_FLOW_ERROR_TYPE_ACTION_NUM:
    case RTE_FLOW_ERROR_TYPE_ACTION_CONF:
    case RTE_FLOW_ERROR_TYPE_ACTION:
      f.where = FlowErrorWhere::action;
      if (rule) f.index = rule->action_index_of(e.cause);
      if (a && f.index >= 0 && f.index < a->count) f.type = static_cast<int>(a->actions[f.index].type);
      break;
    default:  // RTE_FLOW_ERROR_TYPE_STATE and later additions
      f.where = FlowErrorWhere::device;
      break;
  }
  return f;
}

// --------------------------------------------------------------- engine ---

namespace {

// rte_errno after a failed call, or the negative return value.
int last_errno(int rc) {
  if (rc < 0) return -rc;
  return rte_errno != 0 ? rte_errno : EIO;
}

// A conversion (facade -> rte_flow) refused what it was given: the error
// names the operation and the port, as the driver's errors do.
Status conversion_failed(FlowError* err, const Status& st, const char* op, const std::string& port) {
  if (!err) return st;
  err->op = op, err->port = port;
  return err->status();
}

Status report(FlowError* err, FlowError f) {
  Status st = f.status();
  if (err) *err = std::move(f);
  return st;
}

}  // namespace

FlowAsyncSetup configure_async_at_open(uint16_t port_id) noexcept {
  FlowAsyncSetup s;
  rte_flow_port_info pi;
  rte_flow_queue_info qi;
  rte_flow_error e;
  std::memset(&pi, 0, sizeof pi);
  std::memset(&qi, 0, sizeof qi);
  std::memset(&e, 0, sizeof e);
  if (rte_flow_info_get(port_id, &pi, &qi, &e) != 0 || pi.max_nb_queues == 0) return s;  // not mlx5
  const auto n = static_cast<uint16_t>(pi.max_nb_queues < kFlowQueues ? pi.max_nb_queues : kFlowQueues);
  const uint32_t size = qi.max_size != 0 && qi.max_size < kFlowQueueSize ? qi.max_size : kFlowQueueSize;
  rte_flow_port_attr pa;
  std::memset(&pa, 0, sizeof pa);
  // Counters and aging objects: what the device has, up to a million each
  // (0 would mean "on demand only", which mlx5 HWS does not do).
  pa.nb_counters = pi.max_nb_counters < (1u << 20) ? pi.max_nb_counters : (1u << 20);
  pa.nb_aging_objects = pi.max_nb_aging_objects < (1u << 20) ? pi.max_nb_aging_objects : (1u << 20);
  rte_flow_queue_attr qa;
  std::memset(&qa, 0, sizeof qa);
  qa.size = size;
  const rte_flow_queue_attr* qattrs[kFlowQueues];
  for (auto& q : qattrs) q = &qa;
  std::memset(&e, 0, sizeof e);
  const int rc = rte_flow_configure(port_id, &pa, n, qattrs, &e);
  if (rc != 0) {
    s.errnum = -rc;
    s.message = e.message ? e.message : "";
    return s;
  }
  s.n_queues = n;
  s.queue_size = size;
  return s;
}

DpdkFlowEngine::DpdkFlowEngine(uint16_t port_id, std::string port_name, std::string driver, PortMap ports,
                               FlowAsyncSetup async)
    : port_id_(port_id),
      port_name_(std::move(port_name)),
      driver_(std::move(driver)),
      ports_(std::move(ports)),
      async_(std::move(async)) {
  // A reset or removal forgets the rules; count it for the offload engine.
  const bool a = rte_eth_dev_callback_register(port_id_, RTE_ETH_EVENT_INTR_RESET, &DpdkFlowEngine::on_event,
                                               this) == 0;
  const bool b =
      rte_eth_dev_callback_register(port_id_, RTE_ETH_EVENT_INTR_RMV, &DpdkFlowEngine::on_event, this) == 0;
  callbacks_ = a || b;
}

DpdkFlowEngine::~DpdkFlowEngine() { detach(); }

int DpdkFlowEngine::on_event(uint16_t, rte_eth_event_type, void* self, void*) {
  static_cast<DpdkFlowEngine*>(self)->reset_generation_.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

void DpdkFlowEngine::detach() noexcept {
  std::lock_guard lock(mu_);
  if (detached_) return;
  detached_ = true;
  rte_flow_error e;
  if (!rules_.empty()) (void)rte_flow_flush(port_id_, &e);
  for (rte_flow_template_table* t : tables_)
    if (t) (void)rte_flow_template_table_destroy(port_id_, t, &e);
  for (rte_flow_pattern_template* t : ptpls_)
    if (t) (void)rte_flow_pattern_template_destroy(port_id_, t, &e);
  for (rte_flow_actions_template* t : atpls_)
    if (t) (void)rte_flow_actions_template_destroy(port_id_, t, &e);
  rules_.clear();
  tables_.clear();
  ptpls_.clear();
  atpls_.clear();
  queues_.clear();
  if (callbacks_) {
    (void)rte_eth_dev_callback_unregister(port_id_, RTE_ETH_EVENT_INTR_RESET, &DpdkFlowEngine::on_event, this);
    (void)rte_eth_dev_callback_unregister(port_id_, RTE_ETH_EVENT_INTR_RMV, &DpdkFlowEngine::on_event, this);
    callbacks_ = false;
  }
}

void DpdkFlowEngine::forget_rules() noexcept {
  std::lock_guard lock(mu_);
  if (detached_) return;
  rte_flow_error e;
  if (!rules_.empty()) (void)rte_flow_flush(port_id_, &e);
  rules_.clear();
  reset_generation_.fetch_add(1, std::memory_order_relaxed);
}

size_t DpdkFlowEngine::rule_count() const {
  std::lock_guard lock(mu_);
  return rules_.size();
}

Status DpdkFlowEngine::gone(const char* op, FlowError* err) const {
  return flow_fail(err, op, port_name_, ENODEV, FlowErrorWhere::device, -1, -1, "the port is stopped");
}

FlowEngineInfo DpdkFlowEngine::info() const {
  std::lock_guard lock(mu_);
  FlowEngineInfo i;
  i.reset_generation = reset_generation_.load(std::memory_order_relaxed);
  if (detached_) return i;
  rte_flow_port_info pi;
  rte_flow_queue_info qi;
  rte_flow_error e;
  std::memset(&pi, 0, sizeof pi);
  std::memset(&qi, 0, sizeof qi);
  std::memset(&e, 0, sizeof e);
  // Only mlx5 implements info_get in 22.11; everything else returns
  // -ENOTSUP/-ENOSYS and keeps the synchronous API.
  if (rte_flow_info_get(port_id_, &pi, &qi, &e) == 0) {
    // Usable only as configured at open (a started port can't be again).
    i.async_api = async_.n_queues > 0;
    i.max_queues = async_.n_queues;
    i.queue_size = async_.queue_size;
    i.max_counters = pi.max_nb_counters;
    i.max_aging = pi.max_nb_aging_objects;
  }
  return i;
}

DpdkFlowEngine::RuleInfo DpdkFlowEngine::info_of(const FlowActions& a) {
  return {a.has(FlowActionType::count), a.has(FlowActionType::age)};
}

Status DpdkFlowEngine::refuse_traps(const FlowPattern& p, const FlowActions& a, const char* op,
                                    FlowError* err) const {
  if (driver_ == "net_tap") {
    for (unsigned i = 0; i < p.count; ++i) {
      if (p.items[i].type != FlowItemType::vlan) continue;
      const uint16_t tci = p.items[i].spec.vlan.tci, mask = p.items[i].mask.vlan.tci;
      if ((mask & 0x0fff) == 0) continue;  // no VID matched
      const unsigned asked = tci & mask & 0x0fff;
      const auto swapped = static_cast<uint16_t>((mask >> 8) | (mask << 8));
      const unsigned tap_vid = (tci & swapped & 0x0fff) & 0xff;  // what tap_flow_create_vlan installs
      if (tap_vid != asked || (mask & 0x0fff) != 0x0fff)
        return flow_fail(err, op, port_name_, ENOTSUP, FlowErrorWhere::item, static_cast<int>(i),
                         static_cast<int>(FlowItemType::vlan),
                         "net_tap would install VID " + std::to_string(tap_vid) + " for VID " +
                             std::to_string(asked) +
                             " (DPDK 22.11's tap applies the TCI mask byte-swapped and keeps 8 bits of the VID); "
                             "keel refuses a rule the kernel would apply to other packets");
    }
    for (unsigned i = 0; i < a.count; ++i)
      if (a.actions[i].type == FlowActionType::rss)
        return flow_fail(err, op, port_name_, ENOTSUP, FlowErrorWhere::action, static_cast<int>(i),
                         static_cast<int>(FlowActionType::rss),
                         "keel does not use rss on net_tap: the driver can report success while the kernel "
                         "refused the BPF program it needs (use queue)");
  }
  return {};
}

Status DpdkFlowEngine::validate(const FlowAttr& attr, const FlowPattern& pattern, const FlowActions& actions,
                                FlowError* err) {
  // Convert before locking: the port map takes the backend's lock, which
  // DpdkBackend::shutdown() holds while it detaches engines.
  RteFlowRule r;
  if (Status st = convert(attr, pattern, actions, ports_, r, err); !st.ok()) {
    return conversion_failed(err, st, "validate", port_name_);
  }
  std::lock_guard lock(mu_);
  if (detached_) return gone("validate", err);
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  const int rc = rte_flow_validate(port_id_, &r.attr, r.items.data(), r.actions.data(), &e);
  if (rc == 0) return {};
  return report(err, translate_error(e, last_errno(rc), &r, &pattern, &actions, "validate", port_name_));
}

Result<FlowHandle> DpdkFlowEngine::create(const FlowAttr& attr, const FlowPattern& pattern,
                                          const FlowActions& actions, FlowError* err) {
  // Convert before locking: the port map takes the backend's lock, which
  // DpdkBackend::shutdown() holds while it detaches engines.
  RteFlowRule r;
  if (Status st = convert(attr, pattern, actions, ports_, r, err); !st.ok()) {
    return conversion_failed(err, st, "create", port_name_);
  }
  std::lock_guard lock(mu_);
  if (detached_) return gone("create", err);
  if (Status st = refuse_traps(pattern, actions, "create", err); !st.ok()) return st;
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  rte_errno = 0;
  rte_flow* f = rte_flow_create(port_id_, &r.attr, r.items.data(), r.actions.data(), &e);
  if (f == nullptr) {
    FlowError fe = translate_error(e, last_errno(0), &r, &pattern, &actions, "create", port_name_);
    if (driver_ == "net_tap" && fe.errnum == EEXIST)
      fe.message += fe.message.empty() ? "" : "; ",
          fe.message += "refused by the kernel (TC flower): net_tap reports a refused rule as EEXIST";
    return report(err, std::move(fe));
  }
  const auto h = static_cast<FlowHandle>(reinterpret_cast<uintptr_t>(f));
  rules_[h] = info_of(actions);
  return h;
}

Status DpdkFlowEngine::destroy(FlowHandle h, FlowError* err) {
  std::lock_guard lock(mu_);
  if (detached_) return gone("destroy", err);
  auto it = rules_.find(h);
  if (it == rules_.end())
    return flow_fail(err, "destroy", port_name_, ENOENT, FlowErrorWhere::handle, -1, -1,
                     "no such rule on this port");
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  const int rc = rte_flow_destroy(port_id_, reinterpret_cast<rte_flow*>(static_cast<uintptr_t>(h)), &e);
  if (rc != 0) return report(err, translate_error(e, last_errno(rc), nullptr, nullptr, nullptr, "destroy", port_name_));
  rules_.erase(it);
  return {};
}

Status DpdkFlowEngine::query(FlowHandle h, FlowQuery& q, FlowError* err) {
  std::lock_guard lock(mu_);
  q = FlowQuery{};
  auto fail = [&](Status st) {
    q.ok = false;
    q.errnum = err ? err->errnum : EIO;
    return st;
  };
  FlowError local;
  if (!err) err = &local;
  if (detached_) return fail(gone("query", err));
  auto it = rules_.find(h);
  if (it == rules_.end())
    return fail(flow_fail(err, "query", port_name_, ENOENT, FlowErrorWhere::handle, -1, -1,
                          "no such rule on this port"));
  if (!it->second.has_count)
    return fail(flow_fail(err, "query", port_name_, ENOTSUP, FlowErrorWhere::handle, -1, -1,
                          "the rule has no count action"));
  auto* f = reinterpret_cast<rte_flow*>(static_cast<uintptr_t>(h));
  rte_flow_action count_action{};
  count_action.type = RTE_FLOW_ACTION_TYPE_COUNT;
  rte_flow_query_count c;
  std::memset(&c, 0, sizeof c);
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  int rc = rte_flow_query(port_id_, f, &count_action, &c, &e);
  if (rc != 0) return fail(report(err, translate_error(e, last_errno(rc), nullptr, nullptr, nullptr, "query", port_name_)));
  q.hits = c.hits_set ? c.hits : 0;
  q.bytes = c.bytes_set ? c.bytes : 0;
  if (it->second.has_age) {
    rte_flow_action age_action{};
    age_action.type = RTE_FLOW_ACTION_TYPE_AGE;
    rte_flow_query_age a;
    std::memset(&a, 0, sizeof a);
    rc = rte_flow_query(port_id_, f, &age_action, &a, &e);
    if (rc == 0) {
      q.aged = a.aged != 0;
      if (a.sec_since_last_hit_valid) {
        const uint64_t now = steady_ns();
        const uint64_t ago = uint64_t{a.sec_since_last_hit} * 1'000'000'000ull;
        q.last_hit_ns = now > ago ? now - ago : 1;
      }
    }
  }
  q.ok = true;
  return {};
}

Status DpdkFlowEngine::flush(FlowError* err) {
  std::lock_guard lock(mu_);
  if (detached_) return gone("flush", err);
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  const int rc = rte_flow_flush(port_id_, &e);
  // rte_flow: after a failed flush every handle is invalid all the same.
  rules_.clear();
  if (rc != 0) return report(err, translate_error(e, last_errno(rc), nullptr, nullptr, nullptr, "flush", port_name_));
  return {};
}

// ------------------------------------------------- template + queue API ---

Status DpdkFlowEngine::configure(uint16_t n_queues, uint32_t queue_size, FlowError* err) {
  std::lock_guard lock(mu_);
  if (detached_) return gone("configure", err);
  if (n_queues == 0 || queue_size == 0)
    return flow_fail(err, "configure", port_name_, EINVAL, FlowErrorWhere::queue, -1, -1,
                     "need at least one queue of at least one entry");
  if (async_.n_queues == 0) {
    // Not configured at open: either no template API (every vdev, tap), or
    // configuring it failed then; the port is started, so ask once more
    // only to report the device's own answer.
    if (async_.errnum != 0)
      return flow_fail(err, "configure", port_name_, async_.errnum, FlowErrorWhere::device, -1, -1,
                       "configuring the template API at open failed: " +
                           (async_.message.empty() ? std::string("no message from the driver") : async_.message));
    rte_flow_port_attr pa;
    std::memset(&pa, 0, sizeof pa);
    rte_flow_queue_attr qa;
    std::memset(&qa, 0, sizeof qa);
    qa.size = queue_size;
    std::vector<const rte_flow_queue_attr*> qattrs(n_queues, &qa);
    rte_flow_error e;
    std::memset(&e, 0, sizeof e);
    const int rc = rte_flow_configure(port_id_, &pa, n_queues, qattrs.data(), &e);
    if (rc != 0)
      return report(err, translate_error(e, last_errno(rc), nullptr, nullptr, nullptr, "configure", port_name_));
    async_.n_queues = n_queues;  // a driver that takes it on a started port
    async_.queue_size = queue_size;
  } else if (n_queues > async_.n_queues || queue_size > async_.queue_size) {
    return flow_fail(err, "configure", port_name_, EINVAL, FlowErrorWhere::queue, -1, -1,
                     "the port was configured at open with " + std::to_string(async_.n_queues) + " queues of " +
                         std::to_string(async_.queue_size) +
                         " (rte_flow_configure needs a stopped port); asked for " + std::to_string(n_queues) +
                         " of " + std::to_string(queue_size));
  }
  queues_.assign(n_queues, Queue{});
  for (Queue& q : queues_) {
    q.ops.assign(queue_size, PendingOp{});
    q.free.resize(queue_size);
    for (uint32_t i = 0; i < queue_size; ++i) q.free[i] = queue_size - 1 - i;
  }
  return {};
}

Result<FlowTemplateId> DpdkFlowEngine::pattern_template(const FlowTemplateAttr& attr, const FlowPattern& pattern,
                                                        FlowError* err) {
  RteFlowRule r;  // converted before locking (see create())
  if (Status st = convert_pattern(pattern, ports_, r, err); !st.ok()) {
    return conversion_failed(err, st, "pattern_template_create", port_name_);
  }
  std::lock_guard lock(mu_);
  if (detached_) return gone("pattern_template_create", err);
  rte_flow_pattern_template_attr ta;
  std::memset(&ta, 0, sizeof ta);
  ta.relaxed_matching = attr.relaxed_matching;
  ta.ingress = attr.ingress;
  ta.egress = attr.egress;
  ta.transfer = attr.transfer;
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  rte_errno = 0;
  rte_flow_pattern_template* t = rte_flow_pattern_template_create(port_id_, &ta, r.items.data(), &e);
  if (t == nullptr)
    return report(err, translate_error(e, last_errno(0), &r, &pattern, nullptr, "pattern_template_create", port_name_));
  ptpls_.push_back(t);
  return static_cast<FlowTemplateId>(ptpls_.size());
}

Result<FlowTemplateId> DpdkFlowEngine::actions_template(const FlowTemplateAttr& attr, const FlowActions& actions,
                                                        const FlowActions& masks, FlowError* err) {
  if (masks.count != actions.count)
    return flow_fail(err, "actions_template_create", port_name_, EINVAL, FlowErrorWhere::action, -1, -1,
                     "masks must list the same actions as the template");
  RteFlowRule r, m;
  if (Status st = convert_actions(actions, ports_, r, err); !st.ok()) {
    return conversion_failed(err, st, "actions_template_create", port_name_);
  }
  // Masks name ports by value too (a fixed port is all-ones); map what maps.
  const PortMap mask_ports = [](uint32_t id) -> std::optional<uint16_t> {
    return id == 0 ? uint16_t{0} : uint16_t{0xffff};
  };
  if (Status st = convert_actions(masks, mask_ports, m, err); !st.ok()) {
    return conversion_failed(err, st, "actions_template_create", port_name_);
  }
  std::lock_guard lock(mu_);  // converted before locking (see create())
  if (detached_) return gone("actions_template_create", err);
  rte_flow_actions_template_attr ta;
  std::memset(&ta, 0, sizeof ta);
  ta.ingress = attr.ingress;
  ta.egress = attr.egress;
  ta.transfer = attr.transfer;
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  rte_errno = 0;
  rte_flow_actions_template* t =
      rte_flow_actions_template_create(port_id_, &ta, r.actions.data(), m.actions.data(), &e);
  if (t == nullptr)
    return report(err, translate_error(e, last_errno(0), &r, nullptr, &actions, "actions_template_create", port_name_));
  atpls_.push_back(t);
  return static_cast<FlowTemplateId>(atpls_.size());
}

Result<FlowTableId> DpdkFlowEngine::template_table(const FlowAttr& attr, uint32_t capacity,
                                                   std::span<const FlowTemplateId> pattern_templates,
                                                   std::span<const FlowTemplateId> actions_templates,
                                                   FlowError* err) {
  std::lock_guard lock(mu_);
  if (detached_) return gone("template_table_create", err);
  std::vector<rte_flow_pattern_template*> pt;
  std::vector<rte_flow_actions_template*> at;
  for (FlowTemplateId id : pattern_templates) {
    if (id == 0 || id > ptpls_.size() || ptpls_[id - 1] == nullptr)
      return flow_fail(err, "template_table_create", port_name_, ENOENT, FlowErrorWhere::table, -1, -1,
                       "no pattern template " + std::to_string(id));
    pt.push_back(ptpls_[id - 1]);
  }
  for (FlowTemplateId id : actions_templates) {
    if (id == 0 || id > atpls_.size() || atpls_[id - 1] == nullptr)
      return flow_fail(err, "template_table_create", port_name_, ENOENT, FlowErrorWhere::table, -1, -1,
                       "no actions template " + std::to_string(id));
    at.push_back(atpls_[id - 1]);
  }
  if (pt.empty() || at.empty() || pt.size() > 255 || at.size() > 255)
    return flow_fail(err, "template_table_create", port_name_, EINVAL, FlowErrorWhere::table, -1, -1,
                     "a table needs 1..255 pattern and 1..255 actions templates");
  rte_flow_template_table_attr ta;
  std::memset(&ta, 0, sizeof ta);
  (void)convert_attr(attr, ta.flow_attr);
  ta.nb_flows = capacity;
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  rte_errno = 0;
  rte_flow_template_table* t =
      rte_flow_template_table_create(port_id_, &ta, pt.data(), static_cast<uint8_t>(pt.size()), at.data(),
                                     static_cast<uint8_t>(at.size()), &e);
  if (t == nullptr)
    return report(err, translate_error(e, last_errno(0), nullptr, nullptr, nullptr, "template_table_create", port_name_));
  tables_.push_back(t);
  return static_cast<FlowTableId>(tables_.size());
}

namespace {
// The three template-object destroys: id -> slot (1-based, null when
// destroyed), the rte_flow call, the error in the facade's terms.
template <class T, class DestroyFn>
Status destroy_template_object(std::vector<T*>& slots, uint32_t id, uint16_t port_id, const std::string& port_name,
                               const char* op, const char* what, DestroyFn destroy, FlowError* err) {
  if (id == 0 || id > slots.size() || slots[id - 1] == nullptr)
    return flow_fail(err, op, port_name, ENOENT, FlowErrorWhere::table, -1, -1,
                     std::string("no ") + what + " " + std::to_string(id));
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  const int rc = destroy(port_id, slots[id - 1], &e);
  if (rc != 0) return report(err, translate_error(e, last_errno(rc), nullptr, nullptr, nullptr, op, port_name));
  slots[id - 1] = nullptr;
  return {};
}
}  // namespace

Status DpdkFlowEngine::destroy_template_table(FlowTableId id, FlowError* err) {
  std::lock_guard lock(mu_);
  if (detached_) return gone("template_table_destroy", err);
  return destroy_template_object(tables_, id, port_id_, port_name_, "template_table_destroy", "template table",
                                 rte_flow_template_table_destroy, err);
}

Status DpdkFlowEngine::destroy_pattern_template(FlowTemplateId id, FlowError* err) {
  std::lock_guard lock(mu_);
  if (detached_) return gone("pattern_template_destroy", err);
  return destroy_template_object(ptpls_, id, port_id_, port_name_, "pattern_template_destroy", "pattern template",
                                 rte_flow_pattern_template_destroy, err);
}

Status DpdkFlowEngine::destroy_actions_template(FlowTemplateId id, FlowError* err) {
  std::lock_guard lock(mu_);
  if (detached_) return gone("actions_template_destroy", err);
  return destroy_template_object(atpls_, id, port_id_, port_name_, "actions_template_destroy", "actions template",
                                 rte_flow_actions_template_destroy, err);
}

Status DpdkFlowEngine::async_create(uint16_t queue, FlowTableId table, const FlowPattern& pattern,
                                    uint8_t ptpl_index, const FlowActions& actions, uint8_t atpl_index,
                                    bool postpone, uint64_t user_data, FlowHandle* out, FlowError* err) {
  if (out) *out = kNoFlow;
  RteFlowRule r;  // converted before locking (see create())
  if (Status st = convert_pattern(pattern, ports_, r, err); !st.ok()) {
    return conversion_failed(err, st, "async_create", port_name_);
  }
  if (Status st = convert_actions(actions, ports_, r, err); !st.ok()) {
    return conversion_failed(err, st, "async_create", port_name_);
  }
  std::lock_guard lock(mu_);
  if (detached_) return gone("async_create", err);
  if (queue >= queues_.size())
    return flow_fail(err, "async_create", port_name_, EINVAL, FlowErrorWhere::queue, -1, -1,
                     queues_.empty() ? "the flow engine is not configured (configure() first)"
                                     : "no queue " + std::to_string(queue));
  if (table == 0 || table > tables_.size() || tables_[table - 1] == nullptr)
    return flow_fail(err, "async_create", port_name_, ENOENT, FlowErrorWhere::table, -1, -1,
                     "no template table " + std::to_string(table));
  Queue& q = queues_[queue];
  if (q.free.empty())
    return flow_fail(err, "async_create", port_name_, EAGAIN, FlowErrorWhere::queue, -1, -1,
                     "queue " + std::to_string(queue) + " is full: pull() completions first");
  const uint32_t slot = q.free.back();
  PendingOp& op = q.ops[slot];
  op = PendingOp{user_data, kNoFlow, false, info_of(actions)};
  rte_flow_op_attr oa;
  std::memset(&oa, 0, sizeof oa);
  oa.postpone = postpone ? 1 : 0;
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  rte_errno = 0;
  rte_flow* f = rte_flow_async_create(port_id_, queue, &oa, tables_[table - 1], r.items.data(), ptpl_index,
                                      r.actions.data(), atpl_index, &op, &e);
  if (f == nullptr)
    return report(err, translate_error(e, last_errno(0), &r, &pattern, &actions, "async_create", port_name_));
  q.free.pop_back();
  op.handle = static_cast<FlowHandle>(reinterpret_cast<uintptr_t>(f));
  if (out) *out = op.handle;
  return {};
}

Status DpdkFlowEngine::async_destroy(uint16_t queue, FlowHandle h, bool postpone, uint64_t user_data,
                                     FlowError* err) {
  std::lock_guard lock(mu_);
  if (detached_) return gone("async_destroy", err);
  if (queue >= queues_.size())
    return flow_fail(err, "async_destroy", port_name_, EINVAL, FlowErrorWhere::queue, -1, -1,
                     "no queue " + std::to_string(queue));
  Queue& q = queues_[queue];
  if (q.free.empty())
    return flow_fail(err, "async_destroy", port_name_, EAGAIN, FlowErrorWhere::queue, -1, -1,
                     "queue " + std::to_string(queue) + " is full: pull() completions first");
  const uint32_t slot = q.free.back();
  PendingOp& op = q.ops[slot];
  op = PendingOp{user_data, h, true, {}};
  rte_flow_op_attr oa;
  std::memset(&oa, 0, sizeof oa);
  oa.postpone = postpone ? 1 : 0;
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  const int rc = rte_flow_async_destroy(port_id_, queue, &oa, reinterpret_cast<rte_flow*>(static_cast<uintptr_t>(h)),
                                        &op, &e);
  if (rc != 0) return report(err, translate_error(e, last_errno(rc), nullptr, nullptr, nullptr, "async_destroy", port_name_));
  q.free.pop_back();
  return {};
}

Status DpdkFlowEngine::push(uint16_t queue, FlowError* err) {
  std::lock_guard lock(mu_);
  if (detached_) return gone("push", err);
  if (queue >= queues_.size())
    return flow_fail(err, "push", port_name_, EINVAL, FlowErrorWhere::queue, -1, -1, "no queue " + std::to_string(queue));
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  const int rc = rte_flow_push(port_id_, queue, &e);
  if (rc != 0) return report(err, translate_error(e, last_errno(rc), nullptr, nullptr, nullptr, "push", port_name_));
  return {};
}

unsigned DpdkFlowEngine::pull(uint16_t queue, std::span<FlowOpResult> out, FlowError* err) {
  std::lock_guard lock(mu_);
  if (detached_) {
    (void)gone("pull", err);
    return 0;
  }
  if (queue >= queues_.size()) {
    (void)flow_fail(err, "pull", port_name_, EINVAL, FlowErrorWhere::queue, -1, -1, "no queue " + std::to_string(queue));
    return 0;
  }
  constexpr size_t kChunk = 64;
  rte_flow_op_result res[kChunk];
  const auto want = static_cast<uint16_t>(out.size() < kChunk ? out.size() : kChunk);
  rte_flow_error e;
  std::memset(&e, 0, sizeof e);
  const int n = rte_flow_pull(port_id_, queue, res, want, &e);
  if (n < 0) {
    (void)report(err, translate_error(e, last_errno(n), nullptr, nullptr, nullptr, "pull", port_name_));
    return 0;
  }
  Queue& q = queues_[queue];
  for (int i = 0; i < n; ++i) {
    auto* op = static_cast<PendingOp*>(res[i].user_data);
    const bool ok = res[i].status == RTE_FLOW_OP_SUCCESS;
    out[i] = FlowOpResult{op->user_data, ok, ok ? 0 : EIO, op->handle};
    if (ok && !op->destroy) rules_[op->handle] = op->info;
    if (ok && op->destroy) rules_.erase(op->handle);
    q.free.push_back(static_cast<uint32_t>(op - q.ops.data()));
  }
  return static_cast<unsigned>(n);
}

}  // namespace keel::hal::dpdk

// hal flow facade: builders, testpmd-like text, error text and the
// FlowEngine defaults (flow.h).
//
// Everything here is control-path code (the offload thread, the console):
// builders write into fixed arrays and never allocate; to_string() and
// FlowError::status() build std::strings for humans.
//
// Thread-safety: pure functions on values, plus FlowEngine's default
// methods, which touch only their arguments (the engine's one-thread rule,
// flow.h, applies to the caller).
#include "keel/hal/flow.h"

#include <cerrno>
#include <cstdio>

namespace keel::hal {

const char* to_string(FlowItemType t) {
  switch (t) {
    case FlowItemType::eth: return "eth";
    case FlowItemType::vlan: return "vlan";
    case FlowItemType::ipv4: return "ipv4";
    case FlowItemType::ipv6: return "ipv6";
    case FlowItemType::tcp: return "tcp";
    case FlowItemType::udp: return "udp";
    case FlowItemType::icmp: return "icmp";
    case FlowItemType::icmp6: return "icmp6";
    case FlowItemType::vxlan: return "vxlan";
    case FlowItemType::mark: return "mark";
    case FlowItemType::meta: return "meta";
    case FlowItemType::port_id: return "port_id";
    case FlowItemType::represented_port: return "represented_port";
  }
  return "unknown";
}

const char* to_string(FlowActionType t) {
  switch (t) {
    case FlowActionType::port_id: return "port_id";
    case FlowActionType::represented_port: return "represented_port";
    case FlowActionType::drop: return "drop";
    case FlowActionType::set_mac_src: return "set_mac_src";
    case FlowActionType::set_mac_dst: return "set_mac_dst";
    case FlowActionType::set_ipv4_src: return "set_ipv4_src";
    case FlowActionType::set_ipv4_dst: return "set_ipv4_dst";
    case FlowActionType::set_ipv4_dscp: return "set_ipv4_dscp";
    case FlowActionType::set_ipv4_ttl: return "set_ipv4_ttl";
    case FlowActionType::set_ipv6_src: return "set_ipv6_src";
    case FlowActionType::set_ipv6_dst: return "set_ipv6_dst";
    case FlowActionType::set_ipv6_dscp: return "set_ipv6_dscp";
    case FlowActionType::set_ipv6_hop: return "set_ipv6_hop";
    case FlowActionType::set_tp_src: return "set_tp_src";
    case FlowActionType::set_tp_dst: return "set_tp_dst";
    case FlowActionType::of_push_vlan: return "of_push_vlan";
    case FlowActionType::of_set_vlan_vid: return "of_set_vlan_vid";
    case FlowActionType::of_set_vlan_pcp: return "of_set_vlan_pcp";
    case FlowActionType::of_pop_vlan: return "of_pop_vlan";
    case FlowActionType::mark: return "mark";
    case FlowActionType::count: return "count";
    case FlowActionType::age: return "age";
    case FlowActionType::jump: return "jump";
    case FlowActionType::queue: return "queue";
    case FlowActionType::rss: return "rss";
  }
  return "unknown";
}

const char* to_string(FlowErrorWhere w) {
  switch (w) {
    case FlowErrorWhere::none: return "none";
    case FlowErrorWhere::attr: return "attr";
    case FlowErrorWhere::item: return "item";
    case FlowErrorWhere::action: return "action";
    case FlowErrorWhere::handle: return "handle";
    case FlowErrorWhere::device: return "device";
    case FlowErrorWhere::queue: return "queue";
    case FlowErrorWhere::table: return "table";
  }
  return "unknown";
}

// ---------------------------------------------------------------- masks ---

FlowEth flow_eth_mask_all() {
  FlowEth m{};
  m.dst.fill(0xff);
  m.src.fill(0xff);
  m.type = 0xffff;
  return m;
}

FlowIpv4 flow_ipv4_mask_all() {
  FlowIpv4 m{};
  m.tos = 0xff;
  m.ttl = 0xff;
  m.proto = 0xff;
  m.frag = 0xffff;
  m.src = m.dst = ~0u;
  return m;
}

FlowIpv6 flow_ipv6_mask_all() {
  FlowIpv6 m{};
  m.tclass = 0xff;
  m.flow_label = 0xfffff;
  m.proto = 0xff;
  m.hop_limit = 0xff;
  m.src.fill(0xff);
  m.dst.fill(0xff);
  return m;
}

// -------------------------------------------------------------- pattern ---

bool FlowPattern::add(const FlowItem& it) {
  if (count >= kMaxFlowItems) {
    overflow = true;
    return false;
  }
  items[count++] = it;
  return true;
}

namespace {

// A zeroed item of type t with spec/mask copied into the union member M.
template <typename T>
FlowItem make_item(FlowItemType t, T FlowItemData::*member, const T& spec, const T& mask) {
  FlowItem it;
  std::memset(static_cast<void*>(&it), 0, sizeof it);
  it.type = t;
  // Copy field by field through the member so padding stays zero.
  std::memcpy(static_cast<void*>(&(it.spec.*member)), &spec, sizeof(T));
  std::memcpy(static_cast<void*>(&(it.mask.*member)), &mask, sizeof(T));
  return it;
}

template <typename T>
T zeroed() {
  T v;
  std::memset(static_cast<void*>(&v), 0, sizeof v);
  return v;
}

}  // namespace

// Builders copy the caller's struct bytes; a caller's struct made with `{}`
// may carry garbage padding, so the padding is cleared by re-assigning the
// fields over a zeroed copy.
namespace {
FlowEth clean(const FlowEth& s) {
  FlowEth v = zeroed<FlowEth>();
  v.dst = s.dst, v.src = s.src, v.type = s.type, v.has_vlan = s.has_vlan;
  return v;
}
FlowVlan clean(const FlowVlan& s) {
  FlowVlan v = zeroed<FlowVlan>();
  v.tci = s.tci, v.inner_type = s.inner_type;
  return v;
}
FlowIpv4 clean(const FlowIpv4& s) {
  FlowIpv4 v = zeroed<FlowIpv4>();
  v.tos = s.tos, v.ttl = s.ttl, v.proto = s.proto, v.frag = s.frag, v.src = s.src, v.dst = s.dst;
  return v;
}
FlowIpv6 clean(const FlowIpv6& s) {
  FlowIpv6 v = zeroed<FlowIpv6>();
  v.tclass = s.tclass, v.flow_label = s.flow_label, v.proto = s.proto, v.hop_limit = s.hop_limit;
  v.has_frag_ext = s.has_frag_ext, v.src = s.src, v.dst = s.dst;
  return v;
}
FlowTcp clean(const FlowTcp& s) {
  FlowTcp v = zeroed<FlowTcp>();
  v.src = s.src, v.dst = s.dst, v.flags = s.flags;
  return v;
}
FlowUdp clean(const FlowUdp& s) {
  FlowUdp v = zeroed<FlowUdp>();
  v.src = s.src, v.dst = s.dst;
  return v;
}
FlowIcmp clean(const FlowIcmp& s) {
  FlowIcmp v = zeroed<FlowIcmp>();
  v.type = s.type, v.code = s.code;
  return v;
}
FlowVxlan clean(const FlowVxlan& s) {
  FlowVxlan v = zeroed<FlowVxlan>();
  v.vni = s.vni, v.flags = s.flags;
  return v;
}
}  // namespace

FlowPattern& FlowPattern::eth(const FlowEth& spec, const FlowEth& mask) {
  add(make_item(FlowItemType::eth, &FlowItemData::eth, clean(spec), clean(mask)));
  return *this;
}
FlowPattern& FlowPattern::vlan(const FlowVlan& spec, const FlowVlan& mask) {
  add(make_item(FlowItemType::vlan, &FlowItemData::vlan, clean(spec), clean(mask)));
  return *this;
}
FlowPattern& FlowPattern::ipv4(const FlowIpv4& spec, const FlowIpv4& mask) {
  add(make_item(FlowItemType::ipv4, &FlowItemData::ipv4, clean(spec), clean(mask)));
  return *this;
}
FlowPattern& FlowPattern::ipv6(const FlowIpv6& spec, const FlowIpv6& mask) {
  add(make_item(FlowItemType::ipv6, &FlowItemData::ipv6, clean(spec), clean(mask)));
  return *this;
}
FlowPattern& FlowPattern::tcp(const FlowTcp& spec, const FlowTcp& mask) {
  add(make_item(FlowItemType::tcp, &FlowItemData::tcp, clean(spec), clean(mask)));
  return *this;
}
FlowPattern& FlowPattern::udp(const FlowUdp& spec, const FlowUdp& mask) {
  add(make_item(FlowItemType::udp, &FlowItemData::udp, clean(spec), clean(mask)));
  return *this;
}
FlowPattern& FlowPattern::icmp(const FlowIcmp& spec, const FlowIcmp& mask) {
  add(make_item(FlowItemType::icmp, &FlowItemData::icmp, clean(spec), clean(mask)));
  return *this;
}
FlowPattern& FlowPattern::icmp6(const FlowIcmp& spec, const FlowIcmp& mask) {
  add(make_item(FlowItemType::icmp6, &FlowItemData::icmp, clean(spec), clean(mask)));
  return *this;
}
FlowPattern& FlowPattern::vxlan(const FlowVxlan& spec, const FlowVxlan& mask) {
  add(make_item(FlowItemType::vxlan, &FlowItemData::vxlan, clean(spec), clean(mask)));
  return *this;
}
FlowPattern& FlowPattern::mark(uint32_t id, uint32_t mask) {
  add(make_item(FlowItemType::mark, &FlowItemData::mark, FlowMarkItem{id}, FlowMarkItem{mask}));
  return *this;
}
FlowPattern& FlowPattern::meta(uint32_t data, uint32_t mask) {
  add(make_item(FlowItemType::meta, &FlowItemData::meta, FlowMetaItem{data}, FlowMetaItem{mask}));
  return *this;
}
FlowPattern& FlowPattern::port_id(uint32_t hal_port) {
  add(make_item(FlowItemType::port_id, &FlowItemData::port, FlowPortItem{hal_port}, FlowPortItem{~0u}));
  return *this;
}
FlowPattern& FlowPattern::represented_port(uint32_t hal_port) {
  add(make_item(FlowItemType::represented_port, &FlowItemData::port, FlowPortItem{hal_port}, FlowPortItem{~0u}));
  return *this;
}

bool operator==(const FlowPattern& a, const FlowPattern& b) {
  return a.count == b.count && a.overflow == b.overflow &&
         std::memcmp(a.items.data(), b.items.data(), sizeof(FlowItem) * a.count) == 0;
}

// -------------------------------------------------------------- actions ---

bool FlowActions::add(const FlowAction& a) {
  if (count >= kMaxFlowActions) {
    overflow = true;
    return false;
  }
  actions[count++] = a;
  return true;
}

bool FlowActions::has(FlowActionType t) const {
  for (const FlowAction& a : view())
    if (a.type == t) return true;
  return false;
}

namespace {
FlowAction make_action(FlowActionType t) {
  FlowAction a;
  std::memset(static_cast<void*>(&a), 0, sizeof a);
  a.type = t;
  return a;
}
}  // namespace

#define KEEL_FLOW_ACTION(builder, type_, field, arg_t)   \
  FlowActions& FlowActions::builder(arg_t v) {           \
    FlowAction a = make_action(FlowActionType::type_);   \
    a.conf.field = v;                                    \
    add(a);                                              \
    return *this;                                        \
  }
KEEL_FLOW_ACTION(port, port_id, port, uint32_t)
KEEL_FLOW_ACTION(represented_port, represented_port, port, uint32_t)
KEEL_FLOW_ACTION(set_mac_src, set_mac_src, mac, const FlowMac&)
KEEL_FLOW_ACTION(set_mac_dst, set_mac_dst, mac, const FlowMac&)
KEEL_FLOW_ACTION(set_ipv4_src, set_ipv4_src, ipv4, uint32_t)
KEEL_FLOW_ACTION(set_ipv4_dst, set_ipv4_dst, ipv4, uint32_t)
KEEL_FLOW_ACTION(set_ipv4_dscp, set_ipv4_dscp, dscp, uint8_t)
KEEL_FLOW_ACTION(set_ipv4_ttl, set_ipv4_ttl, ttl, uint8_t)
KEEL_FLOW_ACTION(set_ipv6_src, set_ipv6_src, ipv6, const FlowIpv6Addr&)
KEEL_FLOW_ACTION(set_ipv6_dst, set_ipv6_dst, ipv6, const FlowIpv6Addr&)
KEEL_FLOW_ACTION(set_ipv6_dscp, set_ipv6_dscp, dscp, uint8_t)
KEEL_FLOW_ACTION(set_ipv6_hop, set_ipv6_hop, ttl, uint8_t)
KEEL_FLOW_ACTION(set_tp_src, set_tp_src, tp_port, uint16_t)
KEEL_FLOW_ACTION(set_tp_dst, set_tp_dst, tp_port, uint16_t)
KEEL_FLOW_ACTION(push_vlan, of_push_vlan, ethertype, uint16_t)
KEEL_FLOW_ACTION(set_vlan_vid, of_set_vlan_vid, vid, uint16_t)
KEEL_FLOW_ACTION(set_vlan_pcp, of_set_vlan_pcp, pcp, uint8_t)
KEEL_FLOW_ACTION(mark, mark, mark, uint32_t)
KEEL_FLOW_ACTION(count_hits, count, counter_id, uint32_t)
KEEL_FLOW_ACTION(age, age, age_timeout, uint32_t)
KEEL_FLOW_ACTION(jump, jump, group, uint32_t)
KEEL_FLOW_ACTION(queue, queue, queue, uint16_t)
#undef KEEL_FLOW_ACTION

FlowActions& FlowActions::drop() {
  add(make_action(FlowActionType::drop));
  return *this;
}
FlowActions& FlowActions::pop_vlan() {
  add(make_action(FlowActionType::of_pop_vlan));
  return *this;
}
FlowActions& FlowActions::rss(std::span<const uint16_t> queues, uint32_t types, uint8_t level) {
  FlowAction a = make_action(FlowActionType::rss);
  if (queues.size() > kMaxRssQueues) {
    overflow = true;
    return *this;
  }
  a.conf.rss.types = types;
  a.conf.rss.level = level;
  a.conf.rss.n_queues = static_cast<uint8_t>(queues.size());
  for (size_t i = 0; i < queues.size(); ++i) a.conf.rss.queues[i] = queues[i];
  add(a);
  return *this;
}

bool operator==(const FlowActions& a, const FlowActions& b) {
  return a.count == b.count && a.overflow == b.overflow &&
         std::memcmp(a.actions.data(), b.actions.data(), sizeof(FlowAction) * a.count) == 0;
}

// ----------------------------------------------------------------- text ---

namespace {

std::string hex(uint64_t v, int width = 0) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", width, static_cast<unsigned long long>(v));
  return buf;
}
std::string mac_text(const FlowMac& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buf;
}
std::string ipv4_text(uint32_t a) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
  return buf;
}
std::string ipv6_text(const FlowIpv6Addr& a) {
  // Full form (no :: compression): unambiguous and what a reader can grep.
  std::string s;
  char buf[8];
  for (int i = 0; i < 16; i += 2) {
    if (i) s += ':';
    std::snprintf(buf, sizeof buf, "%x", (a[i] << 8) | a[i + 1]);
    s += buf;
  }
  return s;
}

bool all_ones(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0xff) return false;
  return true;
}
bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

// " name is V" / " name spec V mask M" / "" for a scalar field of `bits` bits.
void field(std::string& s, const char* name, uint64_t spec, uint64_t mask, unsigned bits, bool as_hex = false,
           bool as_ipv4 = false) {
  const uint64_t full = bits >= 64 ? ~uint64_t{0} : ((uint64_t{1} << bits) - 1);
  mask &= full;
  if (mask == 0) return;
  const int digits = static_cast<int>((bits + 3) / 4);
  auto val = [&](uint64_t v) {
    return as_ipv4 ? ipv4_text(static_cast<uint32_t>(v)) : as_hex ? hex(v, digits) : std::to_string(v);
  };
  s += ' ';
  s += name;
  if (mask == full)
    s += " is " + val(spec);
  else
    s += " spec " + val(spec) + " mask " + (as_ipv4 ? ipv4_text(static_cast<uint32_t>(mask)) : hex(mask, digits));
}

template <size_t N>
void bytes_field(std::string& s, const char* name, const std::array<uint8_t, N>& spec,
                 const std::array<uint8_t, N>& mask, std::string (*text)(const std::array<uint8_t, N>&)) {
  if (all_zero(mask.data(), N)) return;
  s += ' ';
  s += name;
  if (all_ones(mask.data(), N))
    s += " is " + text(spec);
  else
    s += " spec " + text(spec) + " mask " + text(mask);
}

}  // namespace

std::string to_string(const FlowItem& it) {
  std::string s = to_string(it.type);
  const FlowItemData& v = it.spec;
  const FlowItemData& m = it.mask;
  switch (it.type) {
    case FlowItemType::eth:
      bytes_field(s, "dst", v.eth.dst, m.eth.dst, mac_text);
      bytes_field(s, "src", v.eth.src, m.eth.src, mac_text);
      field(s, "type", v.eth.type, m.eth.type, 16, true);
      field(s, "has_vlan", v.eth.has_vlan, m.eth.has_vlan, 1);
      break;
    case FlowItemType::vlan:
      field(s, "tci", v.vlan.tci, m.vlan.tci, 16, true);
      field(s, "inner_type", v.vlan.inner_type, m.vlan.inner_type, 16, true);
      break;
    case FlowItemType::ipv4:
      field(s, "src", v.ipv4.src, m.ipv4.src, 32, false, true);
      field(s, "dst", v.ipv4.dst, m.ipv4.dst, 32, false, true);
      field(s, "proto", v.ipv4.proto, m.ipv4.proto, 8);
      field(s, "tos", v.ipv4.tos, m.ipv4.tos, 8);
      field(s, "ttl", v.ipv4.ttl, m.ipv4.ttl, 8);
      field(s, "fragment_offset", v.ipv4.frag, m.ipv4.frag, 16, true);
      break;
    case FlowItemType::ipv6:
      bytes_field(s, "src", v.ipv6.src, m.ipv6.src, ipv6_text);
      bytes_field(s, "dst", v.ipv6.dst, m.ipv6.dst, ipv6_text);
      field(s, "proto", v.ipv6.proto, m.ipv6.proto, 8);
      field(s, "tc", v.ipv6.tclass, m.ipv6.tclass, 8);
      field(s, "flow", v.ipv6.flow_label, m.ipv6.flow_label, 20, true);
      field(s, "hop", v.ipv6.hop_limit, m.ipv6.hop_limit, 8);
      field(s, "has_frag_ext", v.ipv6.has_frag_ext, m.ipv6.has_frag_ext, 1);
      break;
    case FlowItemType::tcp:
      field(s, "src", v.tcp.src, m.tcp.src, 16);
      field(s, "dst", v.tcp.dst, m.tcp.dst, 16);
      field(s, "flags", v.tcp.flags, m.tcp.flags, 8, true);
      break;
    case FlowItemType::udp:
      field(s, "src", v.udp.src, m.udp.src, 16);
      field(s, "dst", v.udp.dst, m.udp.dst, 16);
      break;
    case FlowItemType::icmp:
    case FlowItemType::icmp6:
      field(s, "type", v.icmp.type, m.icmp.type, 8);
      field(s, "code", v.icmp.code, m.icmp.code, 8);
      break;
    case FlowItemType::vxlan:
      field(s, "vni", v.vxlan.vni, m.vxlan.vni, 24);
      field(s, "flags", v.vxlan.flags, m.vxlan.flags, 8, true);
      break;
    case FlowItemType::mark:
      field(s, "id", v.mark.id, m.mark.id, 32);
      break;
    case FlowItemType::meta:
      field(s, "data", v.meta.data, m.meta.data, 32, true);
      break;
    case FlowItemType::port_id:
      field(s, "id", v.port.id, m.port.id, 32);
      break;
    case FlowItemType::represented_port:
      field(s, "ethdev_port_id", v.port.id, m.port.id, 32);
      break;
  }
  return s;
}

std::string to_string(const FlowPattern& p) {
  std::string s;
  for (const FlowItem& it : p.view()) s += to_string(it) + " / ";
  if (p.overflow) s += "(more items than " + std::to_string(kMaxFlowItems) + ") / ";
  return s + "end";
}

std::string to_string(const FlowAction& a) {
  std::string s = to_string(a.type);
  const FlowActionConf& c = a.conf;
  switch (a.type) {
    case FlowActionType::port_id: s += " id " + std::to_string(c.port); break;
    case FlowActionType::represented_port: s += " ethdev_port_id " + std::to_string(c.port); break;
    case FlowActionType::drop:
    case FlowActionType::of_pop_vlan: break;
    case FlowActionType::set_mac_src:
    case FlowActionType::set_mac_dst: s += " mac_addr " + mac_text(c.mac); break;
    case FlowActionType::set_ipv4_src:
    case FlowActionType::set_ipv4_dst: s += " ipv4_addr " + ipv4_text(c.ipv4); break;
    case FlowActionType::set_ipv6_src:
    case FlowActionType::set_ipv6_dst: s += " ipv6_addr " + ipv6_text(c.ipv6); break;
    case FlowActionType::set_ipv4_dscp:
    case FlowActionType::set_ipv6_dscp: s += " dscp_value " + std::to_string(c.dscp); break;
    case FlowActionType::set_ipv4_ttl: s += " ttl_value " + std::to_string(c.ttl); break;
    case FlowActionType::set_ipv6_hop: s += " hop_value " + std::to_string(c.ttl); break;
    case FlowActionType::set_tp_src:
    case FlowActionType::set_tp_dst: s += " port " + std::to_string(c.tp_port); break;
    case FlowActionType::of_push_vlan: s += " ethertype " + hex(c.ethertype, 4); break;
    case FlowActionType::of_set_vlan_vid: s += " vlan_vid " + std::to_string(c.vid); break;
    case FlowActionType::of_set_vlan_pcp: s += " vlan_pcp " + std::to_string(c.pcp); break;
    case FlowActionType::mark: s += " id " + std::to_string(c.mark); break;
    case FlowActionType::count:
      if (c.counter_id) s += " identifier " + std::to_string(c.counter_id);
      break;
    case FlowActionType::age: s += " timeout " + std::to_string(c.age_timeout); break;
    case FlowActionType::jump: s += " group " + std::to_string(c.group); break;
    case FlowActionType::queue: s += " index " + std::to_string(c.queue); break;
    case FlowActionType::rss:
      if (c.rss.types) {
        s += " types";
        if (c.rss.types & kFlowRssIpv4) s += " ipv4";
        if (c.rss.types & kFlowRssIpv6) s += " ipv6";
        if (c.rss.types & kFlowRssTcp) s += " tcp";
        if (c.rss.types & kFlowRssUdp) s += " udp";
        s += " end";
      }
      if (c.rss.level) s += " level " + std::to_string(c.rss.level);
      s += " queues";
      for (unsigned i = 0; i < c.rss.n_queues && i < kMaxRssQueues; ++i) s += " " + std::to_string(c.rss.queues[i]);
      s += " end";
      break;
  }
  return s;
}

std::string to_string(const FlowActions& a) {
  std::string s;
  for (const FlowAction& x : a.view()) s += to_string(x) + " / ";
  if (a.overflow) s += "(more actions than " + std::to_string(kMaxFlowActions) + ") / ";
  return s + "end";
}

// --------------------------------------------------------------- errors ---

const char* errno_name(int e) {
  switch (e) {
    case 0: return "0";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EIO: return "EIO";
    case E2BIG: return "E2BIG";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case EEXIST: return "EEXIST";
    case ENODEV: return "ENODEV";
    case EINVAL: return "EINVAL";
    case ENOSPC: return "ENOSPC";
    case ERANGE: return "ERANGE";
    case ENOSYS: return "ENOSYS";
    case ENOTSUP: return "ENOTSUP";  // == EOPNOTSUPP on Linux
    case ETIMEDOUT: return "ETIMEDOUT";
    case ENOBUFS: return "ENOBUFS";
    case EPROTO: return "EPROTO";
    default: break;
  }
  static thread_local char buf[24];
  std::snprintf(buf, sizeof buf, "errno %d", e);
  return buf;
}

Errc flow_errc(int e) {
  switch (e) {
    case 0: return Errc::ok;
    case ENOSPC:
    case ENOMEM:
    case ENOBUFS:
    case E2BIG: return Errc::resource_exhausted;
    case ENOTSUP:
    case ENOSYS: return Errc::unsupported;
    case EEXIST: return Errc::already_exists;
    case ENODEV:
    case EIO:
    case EBUSY:
    case EAGAIN:
    case ETIMEDOUT: return Errc::unavailable;
    case ENOENT: return Errc::not_found;
    case EINVAL:
    case ERANGE: return Errc::invalid_argument;
    default: return Errc::internal;
  }
}

Status FlowError::status() const {
  if (errnum == 0 && message.empty()) return {};
  std::string s = "rte_flow ";
  s += (op && *op) ? op : "call";
  if (!port.empty()) s += " on port " + port;
  s += ": ";
  switch (where) {
    case FlowErrorWhere::item:
    case FlowErrorWhere::action:
      s += to_string(where);
      if (index >= 0) s += " " + std::to_string(index);
      if (type >= 0)
        s += std::string(" (") +
             (where == FlowErrorWhere::item ? to_string(static_cast<FlowItemType>(type))
                                            : to_string(static_cast<FlowActionType>(type))) +
             ")";
      s += ": ";
      break;
    case FlowErrorWhere::none:
      break;
    default:
      s += to_string(where);
      s += ": ";
      break;
  }
  s += message.empty() ? "no message from the driver" : message;
  s += std::string(" (") + errno_name(errnum) + ")";
  return {errnum ? flow_errc(errnum) : Errc::internal, std::move(s)};
}

Status flow_fail(FlowError* err, const char* op, const std::string& port, int errnum, FlowErrorWhere where,
                 int index, int type, std::string message) {
  FlowError local;
  FlowError& e = err ? *err : local;
  e.errnum = errnum;
  e.where = where;
  e.index = index;
  e.type = type;
  e.message = std::move(message);
  e.op = op;
  e.port = port;
  return e.status();
}

// --------------------------------------------------- engine defaults ---

Status FlowEngine::destroy_counted(FlowHandle h, FlowQuery& final, FlowError* err) {
  final = FlowQuery{};
  (void)query(h, final, nullptr);
  return destroy(h, err);
}

unsigned FlowEngine::query_bulk(std::span<const FlowHandle> handles, std::span<FlowQuery> out) {
  unsigned ok = 0;
  const size_t n = handles.size() < out.size() ? handles.size() : out.size();
  for (size_t i = 0; i < n; ++i) {
    FlowError e;
    out[i] = FlowQuery{};
    if (query(handles[i], out[i], &e).ok())
      ++ok;
    else if (out[i].errnum == 0)
      out[i].errnum = e.errnum ? e.errnum : EIO;
  }
  return ok;
}

Status FlowEngine::no_async(const char* op, FlowError* err) const {
  return flow_fail(err, op, port_name(), ENOTSUP, FlowErrorWhere::device, -1, -1,
                   "the template/queue API is not supported by this device (DPDK: mlx5 only)");
}

Status FlowEngine::configure(uint16_t, uint32_t, FlowError* err) { return no_async("configure", err); }
Result<FlowTemplateId> FlowEngine::pattern_template(const FlowTemplateAttr&, const FlowPattern&, FlowError* err) {
  return no_async("pattern_template_create", err);
}
Result<FlowTemplateId> FlowEngine::actions_template(const FlowTemplateAttr&, const FlowActions&, const FlowActions&,
                                                    FlowError* err) {
  return no_async("actions_template_create", err);
}
Result<FlowTableId> FlowEngine::template_table(const FlowAttr&, uint32_t, std::span<const FlowTemplateId>,
                                               std::span<const FlowTemplateId>, FlowError* err) {
  return no_async("template_table_create", err);
}
Status FlowEngine::destroy_template_table(FlowTableId, FlowError* err) {
  return no_async("template_table_destroy", err);
}
Status FlowEngine::destroy_pattern_template(FlowTemplateId, FlowError* err) {
  return no_async("pattern_template_destroy", err);
}
Status FlowEngine::destroy_actions_template(FlowTemplateId, FlowError* err) {
  return no_async("actions_template_destroy", err);
}
Status FlowEngine::async_create(uint16_t, FlowTableId, const FlowPattern&, uint8_t, const FlowActions&, uint8_t, bool,
                                uint64_t, FlowHandle* out, FlowError* err) {
  if (out) *out = kNoFlow;
  return no_async("async_create", err);
}
Status FlowEngine::async_destroy(uint16_t, FlowHandle, bool, uint64_t, FlowError* err) {
  return no_async("async_destroy", err);
}
Status FlowEngine::push(uint16_t, FlowError* err) { return no_async("push", err); }
unsigned FlowEngine::pull(uint16_t, std::span<FlowOpResult>, FlowError* err) {
  (void)no_async("pull", err);
  return 0;
}

}  // namespace keel::hal

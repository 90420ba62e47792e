// Eligibility — see eligibility.h.
#include "offload/eligibility.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "flow/dp_actions.h"

namespace keel::offload {
namespace {

inline uint16_t be16h(uint16_t v) {
  if constexpr (std::endian::native == std::endian::little) return __builtin_bswap16(v);
  return v;
}
inline uint32_t be32h(uint32_t v) {
  if constexpr (std::endian::native == std::endian::little) return __builtin_bswap32(v);
  return v;
}

template <typename T>
bool nonzero(const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  for (size_t i = 0; i < sizeof(T); ++i)
    if (p[i]) return true;
  return false;
}
template <typename T>
bool all_ones(const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  for (size_t i = 0; i < sizeof(T); ++i)
    if (p[i] != 0xff) return false;
  return true;
}

constexpr uint16_t kEthIpv4 = 0x0800, kEthIpv6 = 0x86dd, kEthArp = 0x0806, kEthRarp = 0x8035;
constexpr uint16_t kVlanCfi = 0x1000;
constexpr uint8_t kProtoTcp = 6, kProtoUdp = 17, kProtoIcmp = 1, kProtoIcmp6 = 58;

std::array<uint8_t, 6> mac(const flow::EthAddr& a) {
  std::array<uint8_t, 6> r;
  std::memcpy(r.data(), a.b, 6);
  return r;
}
std::array<uint8_t, 16> ip6(const flow::In6Addr& a) {
  std::array<uint8_t, 16> r;
  std::memcpy(r.data(), a.b, 16);
  return r;
}

}  // namespace

const char* table_name(Table t) { return t == Table::exact ? "exact-match" : "masked"; }

std::optional<std::string> uncarried_field(const flow::Match& match, Table t) {
  const flow::FlowKey& m = match.mask;
  const flow::FlowKey& k = match.key;
  // Tunnel metadata: words 0..39.
  {
    const uint64_t* w = m.words();
    for (unsigned i = 0; i < KEEL_FLOW_WORD(ct_state); ++i)
      if (w[i]) return std::string("tunnel metadata");
  }
  if (m.ct_state) return std::string("ct_state");
  if (m.ct_zone) return std::string("ct_zone");
  if (m.ct_mark) return std::string("ct_mark");
  if (nonzero(m.ct_label)) return std::string("ct_label");
  if (m.skb_priority) return std::string("skb_priority");
  if (m.pkt_mark) return std::string("skb_mark");
  if (m.dp_hash) return std::string("dp_hash");
  if (m.conj_id) return std::string("conj_id");
  if (m.metadata) return std::string("metadata");
  if (nonzero(m.regs)) return std::string("reg");
  if (nonzero(m.vlans[1])) return std::string("an inner VLAN tag");
  if (nonzero(m.reserved_62)) return std::string("mpls");

  const uint16_t dl_type = be16h(k.dl_type & m.dl_type);
  const bool dl_type_exact = m.dl_type == 0xffff;
  const bool ipv4 = dl_type_exact && dl_type == kEthIpv4;
  const bool ipv6 = dl_type_exact && dl_type == kEthIpv6;
  const bool arp = dl_type_exact && (dl_type == kEthArp || dl_type == kEthRarp);
  if (arp) {
    if (m.nw_src) return std::string("arp_spa");
    if (m.nw_dst) return std::string("arp_tpa");
    if (m.nw_proto) return std::string("arp_op");
    if (nonzero(m.arp_sha)) return std::string("arp_sha");
    if (nonzero(m.arp_tha)) return std::string("arp_tha");
  }
  if (!ipv4 && (m.nw_src || m.nw_dst)) return std::string("nw_src");
  if (!ipv6 && (nonzero(m.ipv6_src) || nonzero(m.ipv6_dst))) return std::string("ipv6_src");
  if (!ipv4 && !ipv6 && !arp && (m.nw_proto || m.nw_tos || m.nw_ttl || m.nw_frag))
    return std::string("nw_proto");
  if (m.ipv6_label && t == Table::exact) return std::string("ipv6_label");
  if (nonzero(m.nd_target)) return std::string("nd_target");
  if (!arp && nonzero(m.arp_sha)) return std::string("nd_sll");
  if (!arp && nonzero(m.arp_tha)) return std::string("nd_tll");
  if (m.tcp_flags) {
    if (t == Table::exact) return std::string("tcp_flags");
    // rte_flow's tcp item has the 8 flag bits (CWR..FIN), not NS.
    if (be16h(m.tcp_flags) & 0xff00) return std::string("tcp_flags (NS)");
  }
  if (m.nw_frag) {
    // Both tables carry "not a fragment" (the rule's frag field is 0);
    // a match on first/later fragments is not expressible.
    if ((k.nw_frag & m.nw_frag) != 0) return std::string("nw_frag");
  }
  if (m.tp_src || m.tp_dst) {
    const bool proto_exact = m.nw_proto == 0xff;
    const uint8_t p = k.nw_proto;
    if (!(ipv4 || ipv6) || !proto_exact ||
        !(p == kProtoTcp || p == kProtoUdp || (ipv4 && p == kProtoIcmp) || (ipv6 && p == kProtoIcmp6)))
      return std::string(p == 132 ? "sctp ports" : "tp_src");
  }
  return std::nullopt;
}

std::optional<hal::FlowPattern> exact_pattern(const datapath::MicroKey& key, std::string* why) {
  hal::FlowPattern p;
  hal::FlowEth es{}, em{};
  es.dst = key.eth_dst;
  es.src = key.eth_src;
  em.dst.fill(0xff);
  em.src.fill(0xff);
  em.has_vlan = 1;
  es.has_vlan = key.vlan_present ? 1 : 0;
  if (!key.vlan_present) {
    es.type = key.eth_type;
    em.type = 0xffff;
  }
  p.eth(es, em);
  if (key.vlan_present) {
    hal::FlowVlan vs{}, vm{};
    // The whole TCI with DEI 0: exact-match tables match whole fields, and
    // keel's key marks "tag present" in that bit (as Open vSwitch's CFI),
    // so the rule takes the usual DEI-0 frames; a DEI-1 frame stays on the
    // PMD (a subset of the microflow either way).
    vs.tci = static_cast<uint16_t>(key.vlan_tci & ~kVlanCfi);
    vm.tci = 0xffff;
    vs.inner_type = key.eth_type;
    vm.inner_type = 0xffff;
    p.vlan(vs, vm);
  }
  if (key.ip_version == 4) {
    if (key.ip_frag) {
      if (why) *why = "an IP fragment";
      return std::nullopt;
    }
    hal::FlowIpv4 s{}, m{};
    s.tos = key.ip_tos;
    s.ttl = key.ip_ttl;
    s.proto = key.ip_proto;
    s.frag = 0;
    s.src = key.ipv4_src;
    s.dst = key.ipv4_dst;
    m.tos = m.ttl = m.proto = 0xff;
    // "Not a fragment" is MF + offset = 0 (0x3fff), a partial mask, which an
    // exact-match (hash) table does not take. With an L4 item the rule
    // needs no fragment bits: a later fragment has no L4 header for the
    // NIC to match; the one packet it then shares with the microflow is a
    // first fragment (MF, offset 0) of the same 5-tuple — Open vSwitch's
    // frag handling "normal" treats it as the unfragmented packet. Without
    // an L4 item the rule keeps the mask (and lands in the masked table).
    const bool l4_item = key.ip_proto == kProtoTcp || key.ip_proto == kProtoUdp || key.ip_proto == kProtoIcmp;
    m.frag = l4_item ? 0 : 0x3fff;
    m.src = m.dst = 0xffffffffu;
    p.ipv4(s, m);
  } else if (key.ip_version == 6) {
    if (key.ip_frag) {
      if (why) *why = "an IP fragment";
      return std::nullopt;
    }
    hal::FlowIpv6 s{}, m{};
    s.tclass = key.ip_tos;
    s.proto = key.ip_proto;
    s.hop_limit = key.ip_ttl;
    s.has_frag_ext = 0;
    s.src = key.ipv6_src;
    s.dst = key.ipv6_dst;
    m.tclass = m.proto = m.hop_limit = 0xff;
    m.has_frag_ext = 1;
    m.src.fill(0xff);
    m.dst.fill(0xff);
    p.ipv6(s, m);
  }
  if (key.ip_version == 4 || key.ip_version == 6) {
    switch (key.ip_proto) {
      case kProtoTcp: {
        hal::FlowTcp s{}, m{};
        s.src = key.tp_src;
        s.dst = key.tp_dst;
        m.src = m.dst = 0xffff;
        p.tcp(s, m);
        break;
      }
      case kProtoUdp: {
        hal::FlowUdp s{}, m{};
        s.src = key.tp_src;
        s.dst = key.tp_dst;
        m.src = m.dst = 0xffff;
        p.udp(s, m);
        break;
      }
      case kProtoIcmp:
      case kProtoIcmp6: {
        if ((key.ip_proto == kProtoIcmp) != (key.ip_version == 4)) break;  // ICMP over the other IP: no L4 item
        hal::FlowIcmp s{}, m{};
        s.type = key.icmp_type;
        s.code = key.icmp_code;
        m.type = m.code = 0xff;
        if (key.ip_proto == kProtoIcmp)
          p.icmp(s, m);
        else
          p.icmp6(s, m);
        break;
      }
      default:
        // Ports of a protocol with no rte_flow item: the rule can't hold
        // them, so it would be broader than the microflow.
        if (key.tp_src || key.tp_dst) {
          if (why) *why = "L4 protocol " + std::to_string(key.ip_proto) + " has no exact-match item";
          return std::nullopt;
        }
        break;
    }
  }
  if (p.overflow) {
    if (why) *why = "too many items";
    return std::nullopt;
  }
  return p;
}

std::optional<hal::FlowPattern> masked_pattern(const flow::Match& match, std::string* why) {
  if (auto f = uncarried_field(match, Table::masked)) {
    if (why) *why = *f;
    return std::nullopt;
  }
  const flow::FlowKey& k = match.key;
  const flow::FlowKey& m = match.mask;
  hal::FlowPattern p;
  const bool vlan_matched = m.vlans[0].tci != 0 || m.vlans[0].tpid != 0;
  const bool vlan_present = (be16h(k.vlans[0].tci) & kVlanCfi) != 0;
  hal::FlowEth es{}, em{};
  es.dst = mac(k.dl_dst);
  es.src = mac(k.dl_src);
  em.dst = mac(m.dl_dst);
  em.src = mac(m.dl_src);
  if (vlan_matched) {
    em.has_vlan = 1;
    es.has_vlan = vlan_present ? 1 : 0;
  }
  if (!vlan_present) {
    es.type = be16h(k.dl_type);
    em.type = be16h(m.dl_type);
  }
  p.eth(es, em);
  if (vlan_present) {
    hal::FlowVlan vs{}, vm{};
    vs.tci = static_cast<uint16_t>(be16h(k.vlans[0].tci) & ~kVlanCfi);
    vm.tci = static_cast<uint16_t>(be16h(m.vlans[0].tci) & ~kVlanCfi);
    vs.inner_type = be16h(k.dl_type);
    vm.inner_type = be16h(m.dl_type);
    p.vlan(vs, vm);
  }
  const uint16_t dl_type = be16h(k.dl_type);
  const bool l3 = m.dl_type == 0xffff && (dl_type == kEthIpv4 || dl_type == kEthIpv6);
  if (l3 && dl_type == kEthIpv4) {
    hal::FlowIpv4 s{}, mm{};
    s.tos = k.nw_tos;
    mm.tos = m.nw_tos;
    s.ttl = k.nw_ttl;
    mm.ttl = m.nw_ttl;
    s.proto = k.nw_proto;
    mm.proto = m.nw_proto;
    if (m.nw_frag) mm.frag = 0x3fff;  // frag=no (uncarried_field refused the others)
    s.src = be32h(k.nw_src);
    mm.src = be32h(m.nw_src);
    s.dst = be32h(k.nw_dst);
    mm.dst = be32h(m.nw_dst);
    p.ipv4(s, mm);
  } else if (l3) {
    hal::FlowIpv6 s{}, mm{};
    s.tclass = k.nw_tos;
    mm.tclass = m.nw_tos;
    s.hop_limit = k.nw_ttl;
    mm.hop_limit = m.nw_ttl;
    s.proto = k.nw_proto;
    mm.proto = m.nw_proto;
    s.flow_label = be32h(k.ipv6_label) & 0xfffff;
    mm.flow_label = be32h(m.ipv6_label) & 0xfffff;
    if (m.nw_frag) mm.has_frag_ext = 1;
    s.src = ip6(k.ipv6_src);
    mm.src = ip6(m.ipv6_src);
    s.dst = ip6(k.ipv6_dst);
    mm.dst = ip6(m.ipv6_dst);
    p.ipv6(s, mm);
  }
  if (l3 && m.nw_proto == 0xff) {
    const uint8_t proto = k.nw_proto;
    if (proto == kProtoTcp) {
      hal::FlowTcp s{}, mm{};
      s.src = be16h(k.tp_src);
      mm.src = be16h(m.tp_src);
      s.dst = be16h(k.tp_dst);
      mm.dst = be16h(m.tp_dst);
      s.flags = static_cast<uint8_t>(be16h(k.tcp_flags));
      mm.flags = static_cast<uint8_t>(be16h(m.tcp_flags));
      p.tcp(s, mm);
    } else if (proto == kProtoUdp) {
      hal::FlowUdp s{}, mm{};
      s.src = be16h(k.tp_src);
      mm.src = be16h(m.tp_src);
      s.dst = be16h(k.tp_dst);
      mm.dst = be16h(m.tp_dst);
      p.udp(s, mm);
    } else if ((proto == kProtoIcmp && dl_type == kEthIpv4) || (proto == kProtoIcmp6 && dl_type == kEthIpv6)) {
      // ICMP type/code live in the low byte of tp_src / tp_dst (match.h).
      hal::FlowIcmp s{}, mm{};
      s.type = static_cast<uint8_t>(be16h(k.tp_src));
      mm.type = static_cast<uint8_t>(be16h(m.tp_src));
      s.code = static_cast<uint8_t>(be16h(k.tp_dst));
      mm.code = static_cast<uint8_t>(be16h(m.tp_dst));
      if (proto == kProtoIcmp)
        p.icmp(s, mm);
      else
        p.icmp6(s, mm);
    }
  }
  if (p.overflow) {
    if (why) *why = "too many items";
    return std::nullopt;
  }
  return p;
}

namespace {

const char* arm_action_name(const flow::DpAction& a) {
  using T = flow::DpActionType;
  switch (a.type) {
    case T::kHash: return "hash";
    case T::kRecirc: return "recirc";
    case T::kClone: return "clone";
    case T::kTrunc: return "trunc";
    case T::kUserspace: return "userspace";
    case T::kMeter: return "meter";
    case T::kLbOutput: return "lb_output";
    case T::kTnlPush: return "tnl_push";
    case T::kTnlPop: return "tnl_pop";
    default: return "?";
  }
}

// A set action's fields -> hal set_* actions; false (with the reason's
// detail) when a field needs the Arm cores.
bool translate_set(const flow::DpAction& a, hal::FlowActions& out, std::string& detail) {
  switch (a.set_header()) {
    case flow::SetHeader::kEth: {
      flow::SetEth k, m;
      a.set_fields(k, m);
      if ((nonzero(m.src) && !all_ones(m.src)) || (nonzero(m.dst) && !all_ones(m.dst))) {
        detail = "set(eth) with a partial mask";
        return false;
      }
      if (all_ones(m.src)) out.set_mac_src(mac(k.src));
      if (all_ones(m.dst)) out.set_mac_dst(mac(k.dst));
      return true;
    }
    case flow::SetHeader::kIpv4: {
      flow::SetIpv4 k, m;
      a.set_fields(k, m);
      if (m.proto || m.frag) {
        detail = "set(ipv4(proto/frag))";
        return false;
      }
      if ((m.src && m.src != 0xffffffffu) || (m.dst && m.dst != 0xffffffffu) || (m.ttl && m.ttl != 0xff) ||
          (m.tos && m.tos != 0xfc)) {
        detail = m.tos && m.tos != 0xfc ? "set(ipv4(tos)) other than DSCP" : "set(ipv4) with a partial mask";
        return false;
      }
      if (m.src) out.set_ipv4_src(be32h(k.src));
      if (m.dst) out.set_ipv4_dst(be32h(k.dst));
      if (m.tos) out.set_ipv4_dscp(static_cast<uint8_t>(k.tos >> 2));
      if (m.ttl) out.set_ipv4_ttl(k.ttl);
      return true;
    }
    case flow::SetHeader::kIpv6: {
      flow::SetIpv6 k, m;
      a.set_fields(k, m);
      if (m.proto || m.frag) {
        detail = "set(ipv6(proto/frag))";
        return false;
      }
      if (m.label) {
        detail = "set(ipv6(label))";
        return false;
      }
      if ((nonzero(m.src) && !all_ones(m.src)) || (nonzero(m.dst) && !all_ones(m.dst)) ||
          (m.hlimit && m.hlimit != 0xff) || (m.tclass && m.tclass != 0xfc)) {
        detail = m.tclass && m.tclass != 0xfc ? "set(ipv6(tclass)) other than DSCP" : "set(ipv6) with a partial mask";
        return false;
      }
      if (all_ones(m.src)) out.set_ipv6_src(ip6(k.src));
      if (all_ones(m.dst)) out.set_ipv6_dst(ip6(k.dst));
      if (m.tclass) out.set_ipv6_dscp(static_cast<uint8_t>(k.tclass >> 2));
      if (m.hlimit) out.set_ipv6_hop(k.hlimit);
      return true;
    }
    case flow::SetHeader::kTcp:
    case flow::SetHeader::kUdp: {
      flow::SetL4 k, m;
      a.set_fields(k, m);
      if ((m.src && m.src != 0xffff) || (m.dst && m.dst != 0xffff)) {
        detail = a.set_header() == flow::SetHeader::kTcp ? "set(tcp) with a partial mask" : "set(udp) with a partial mask";
        return false;
      }
      if (m.src) out.set_tp_src(be16h(k.src));
      if (m.dst) out.set_tp_dst(be16h(k.dst));
      return true;
    }
    case flow::SetHeader::kArp: detail = "set(arp)"; return false;
    case flow::SetHeader::kSctp: detail = "set(sctp)"; return false;
    case flow::SetHeader::kIcmp: detail = "set(icmp)"; return false;
    case flow::SetHeader::kIcmpv6: detail = "set(icmpv6)"; return false;
  }
  detail = "set(?)";
  return false;
}

}  // namespace

ActionPlan translate_actions(std::span<const uint8_t> actions, const PortCapsFn& caps) {
  ActionPlan plan;
  auto arm = [&plan](Reason r, std::string d) {
    plan.full = false;
    plan.reason = r;
    plan.detail = std::move(d);
    plan.actions = hal::FlowActions{};
    plan.out_port = 0;
    return plan;
  };
  bool output_seen = false, drop_seen = false;
  flow::DpActionReader rd(actions);
  while (!rd.done()) {
    const flow::DpAction a = rd.next();
    using T = flow::DpActionType;
    if (output_seen && a.type != T::kDrop) {
      if (a.type == T::kOutput) return arm(Reason::arm_action, "output to several ports");
      if (a.type == T::kPushVlan || a.type == T::kPopVlan || a.type == T::kSet)
        return arm(Reason::arm_action, "an action after the output");
    }
    switch (a.type) {
      case T::kOutput: {
        const uint32_t port = a.port();
        const PortCaps pc = caps ? caps(port) : PortCaps{};
        if (!pc.exists) return arm(Reason::arm_action, "output to unknown port " + std::to_string(port));
        if (pc.vport) return arm(Reason::output_vport, "");
        if (!pc.has_engine)
          return arm(Reason::arm_action, "output to port " + std::to_string(port) + ", which has no flow engine");
        plan.actions.port(port);
        plan.out_port = port;
        output_seen = true;
        break;
      }
      case T::kDrop:
        drop_seen = true;
        break;
      case T::kPushVlan: {
        const uint16_t tpid = a.vlan_tpid(), tci = a.vlan_tci();
        if (tpid != 0x8100 && tpid != 0x88a8) return arm(Reason::arm_action, "push_vlan with TPID " + std::to_string(tpid));
        plan.actions.push_vlan(tpid);
        plan.actions.set_vlan_vid(tci & 0x0fff);
        plan.actions.set_vlan_pcp(static_cast<uint8_t>(tci >> 13));
        break;
      }
      case T::kPopVlan:
        plan.actions.pop_vlan();
        break;
      case T::kSet: {
        std::string d;
        if (!translate_set(a, plan.actions, d)) return arm(Reason::arm_action, d);
        break;
      }
      default:
        return arm(Reason::arm_action, arm_action_name(a));
    }
  }
  if (!output_seen) {
    // The empty list and an explicit drop: the NIC drops. Header changes
    // before a drop are moot.
    (void)drop_seen;
    plan.actions = hal::FlowActions{};
    plan.actions.drop();
  }
  plan.actions.count_hits();
  if (plan.actions.overflow) return arm(Reason::arm_action, "more actions than a hardware rule holds");
  plan.full = true;
  plan.reason = Reason::ok;
  return plan;
}

hal::FlowActions partial_actions(uint32_t mark, int queue, unsigned n_rxq) {
  hal::FlowActions a;
  a.mark(mark);
  if (queue >= 0) {
    a.queue(static_cast<uint16_t>(queue));
  } else {
    std::array<uint16_t, hal::kMaxRssQueues> qs{};
    const unsigned n = std::clamp(n_rxq, 1u, hal::kMaxRssQueues);
    for (unsigned i = 0; i < n; ++i) qs[i] = static_cast<uint16_t>(i);
    a.rss(std::span<const uint16_t>(qs.data(), n));
  }
  a.count_hits();
  return a;
}

datapath::MicroKey micro_key_of(const flow::FlowKey& k) {
  datapath::MicroKey m;
  m.in_port = k.in_port;
  m.eth_dst = mac(k.dl_dst);
  m.eth_src = mac(k.dl_src);
  const uint16_t tci = be16h(k.vlans[0].tci);
  m.vlan_present = (tci & kVlanCfi) != 0;
  m.vlan_tci = m.vlan_present ? tci : 0;
  m.eth_type = be16h(k.dl_type);
  if (m.eth_type == kEthIpv4 || m.eth_type == kEthIpv6) {
    m.ip_version = m.eth_type == kEthIpv4 ? 4 : 6;
    m.ip_proto = k.nw_proto;
    m.ip_tos = k.nw_tos;
    m.ip_ttl = k.nw_ttl;
    m.ip_frag = k.nw_frag;
    if (m.ip_version == 4) {
      m.ipv4_src = be32h(k.nw_src);
      m.ipv4_dst = be32h(k.nw_dst);
    } else {
      m.ipv6_src = ip6(k.ipv6_src);
      m.ipv6_dst = ip6(k.ipv6_dst);
    }
    if (m.ip_proto == kProtoIcmp || m.ip_proto == kProtoIcmp6) {
      m.icmp_type = static_cast<uint8_t>(be16h(k.tp_src));
      m.icmp_code = static_cast<uint8_t>(be16h(k.tp_dst));
    } else {
      m.tp_src = be16h(k.tp_src);
      m.tp_dst = be16h(k.tp_dst);
    }
  }
  return m;
}

}  // namespace keel::offload

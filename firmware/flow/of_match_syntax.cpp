// OpenFlow match syntax: see of_match_syntax.h.
//
// Layout of this file: the field table (name, kind, place in the FlowKey,
// maskable, prerequisite), the tokenizer (ofputil_parse_key_value()'s
// rules), the per-kind value readers, the prerequisite check that runs
// after the whole line, and the printer (match_format()'s order).
#include "flow/of_match_syntax.h"

#include <algorithm>
#include <span>

#include <cstring>
#include <vector>

#include "flow/flow_text.h"
#include "flow/tun_metadata.h"

namespace keel::flow {
namespace {

using namespace text;

enum class Kind : uint8_t {
  u8,
  be16,
  u32,  // host order (metadata)
  be64,
  ipv4,
  ipv6,
  mac,
  label,     // 20-bit IPv6 flow label in a be32
  in_port,   // number, reserved name or port name
  dl_type,   // be16
  vlan_tci,  // vlans[0].tci, maskable
  dl_vlan,   // VID bits of vlans[0].tci (+ CFI)
  dl_vlan_pcp,
  nw_tos,     // DSCP bits of nw_tos, as the byte value (multiple of 4)
  ip_dscp,    // DSCP bits, shifted (0..63)
  nw_ecn,     // ECN bits of nw_tos
  frag,       // no|yes|first|later|not_later
  tcp_flags,  // be16, flag syntax
  tun_flags,  // host u16, flag syntax
  icmp8,      // low byte of tp_src/tp_dst
  arp_op,     // nw_proto
};

enum class Prereq : uint8_t {
  none,
  ipv4_or_arp,    // nw_src, nw_dst (OpenFlow 1.0 uses them for ARP too)
  ip_any_or_arp,  // nw_proto (the ARP opcode under arp)
  ip_any,
  ipv6,
  arp,
  l4,  // tcp, udp or sctp
  tcp,
  udp,
  sctp,
  icmp,
  icmp_any,  // icmp_type/icmp_code: dump-flows prints them for ICMPv6 too
  icmpv6,
  nd,
  nd_sll,
  nd_tll,
};

struct OfField {
  std::string_view name;
  Kind kind;
  size_t offset;
  bool maskable;
  Prereq prereq;
};

#define F(name, kind, field, maskable, prereq) \
  OfField { name, Kind::kind, offsetof(FlowKey, field), maskable, Prereq::prereq }
#define REG(n) \
  OfField { "reg" #n, Kind::u32, offsetof(FlowKey, regs) + sizeof(uint32_t) * (n), true, Prereq::none }
constexpr OfField kFields[] = {
    F("in_port", in_port, in_port, false, none),
    F("metadata", be64, metadata, true, none),
    REG(0),
    REG(1),
    REG(2),
    REG(3),
    REG(4),
    REG(5),
    REG(6),
    REG(7),
    F("pkt_mark", u32, pkt_mark, true, none),
    F("recirc_id", u32, recirc_id, true, none),
    F("dp_hash", u32, dp_hash, true, none),
    F("skb_priority", u32, skb_priority, true, none),
    F("tun_id", be64, tun_id, true, none),
    F("tunnel_id", be64, tun_id, true, none),
    F("tun_src", ipv4, tun_ipv4_src, true, none),
    F("tun_dst", ipv4, tun_ipv4_dst, true, none),
    F("tun_ipv6_src", ipv6, tun_ipv6_src, true, none),
    F("tun_ipv6_dst", ipv6, tun_ipv6_dst, true, none),
    F("tun_tos", u8, tun_tos, false, none),
    F("tun_ttl", u8, tun_ttl, false, none),
    F("tun_flags", tun_flags, tun_flags, true, none),
    F("dl_src", mac, dl_src, true, none),
    F("eth_src", mac, dl_src, true, none),
    F("dl_dst", mac, dl_dst, true, none),
    F("eth_dst", mac, dl_dst, true, none),
    F("dl_type", dl_type, dl_type, false, none),
    F("eth_type", dl_type, dl_type, false, none),
    F("vlan_tci", vlan_tci, vlans[0].tci, true, none),
    F("dl_vlan", dl_vlan, vlans[0].tci, false, none),
    F("dl_vlan_pcp", dl_vlan_pcp, vlans[0].tci, false, none),
    F("nw_src", ipv4, nw_src, true, ipv4_or_arp),
    F("ip_src", ipv4, nw_src, true, ipv4_or_arp),
    F("nw_dst", ipv4, nw_dst, true, ipv4_or_arp),
    F("ip_dst", ipv4, nw_dst, true, ipv4_or_arp),
    F("nw_proto", u8, nw_proto, false, ip_any_or_arp),
    F("ip_proto", u8, nw_proto, false, ip_any_or_arp),
    F("nw_tos", nw_tos, nw_tos, false, ip_any),
    F("ip_dscp", ip_dscp, nw_tos, false, ip_any),
    F("nw_ecn", nw_ecn, nw_tos, false, ip_any),
    F("ip_ecn", nw_ecn, nw_tos, false, ip_any),
    F("nw_ttl", u8, nw_ttl, false, ip_any),
    F("ip_frag", frag, nw_frag, false, ip_any),
    F("nw_frag", frag, nw_frag, false, ip_any),
    F("tp_src", be16, tp_src, true, l4),
    F("tp_dst", be16, tp_dst, true, l4),
    F("tcp_src", be16, tp_src, true, tcp),
    F("tcp_dst", be16, tp_dst, true, tcp),
    F("udp_src", be16, tp_src, true, udp),
    F("udp_dst", be16, tp_dst, true, udp),
    F("sctp_src", be16, tp_src, true, sctp),
    F("sctp_dst", be16, tp_dst, true, sctp),
    F("tcp_flags", tcp_flags, tcp_flags, true, tcp),
    F("icmp_type", icmp8, tp_src, false, icmp_any),
    F("icmp_code", icmp8, tp_dst, false, icmp_any),
    F("icmpv6_type", icmp8, tp_src, false, icmpv6),
    F("icmpv6_code", icmp8, tp_dst, false, icmpv6),
    F("arp_spa", ipv4, nw_src, true, arp),
    F("arp_tpa", ipv4, nw_dst, true, arp),
    F("arp_sha", mac, arp_sha, true, arp),
    F("arp_tha", mac, arp_tha, true, arp),
    F("arp_op", arp_op, nw_proto, false, arp),
    F("ipv6_src", ipv6, ipv6_src, true, ipv6),
    F("ipv6_dst", ipv6, ipv6_dst, true, ipv6),
    F("ipv6_label", label, ipv6_label, true, ipv6),
    F("nd_target", ipv6, nd_target, true, nd),
    F("nd_sll", mac, arp_sha, true, nd_sll),
    F("nd_tll", mac, arp_tha, true, nd_tll),
};
#undef F
#undef REG

const OfField* find_field(std::string_view name) {
  for (const OfField& f : kFields)
    if (f.name == name) return &f;
  return nullptr;
}

struct Shorthand {
  std::string_view name;
  uint16_t dl_type;
  uint8_t nw_proto;  // 0: none
};
constexpr Shorthand kShorthands[] = {
    {"ip", kEthTypeIp, 0},
    {"ipv4", kEthTypeIp, 0},
    {"ip4", kEthTypeIp, 0},
    {"arp", kEthTypeArp, 0},
    {"rarp", kEthTypeRarp, 0},
    {"icmp", kEthTypeIp, kProtoIcmp},
    {"tcp", kEthTypeIp, kProtoTcp},
    {"udp", kEthTypeIp, kProtoUdp},
    {"sctp", kEthTypeIp, kProtoSctp},
    {"ipv6", kEthTypeIpv6, 0},
    {"ip6", kEthTypeIpv6, 0},
    {"icmp6", kEthTypeIpv6, kProtoIcmpv6},
    {"tcp6", kEthTypeIpv6, kProtoTcp},
    {"udp6", kEthTypeIpv6, kProtoUdp},
    {"sctp6", kEthTypeIpv6, kProtoSctp},
};

struct ReservedPort {
  std::string_view name;
  uint32_t number;
};
constexpr ReservedPort kReservedPorts[] = {
    {"UNSET", 0xfff7},     {"IN_PORT", kOfppInPort}, {"TABLE", kOfppTable},           {"NORMAL", kOfppNormal},
    {"FLOOD", kOfppFlood}, {"ALL", kOfppAll},        {"CONTROLLER", kOfppController}, {"LOCAL", kOfppLocal},
    {"ANY", kOfppNone},    {"NONE", kOfppNone},
};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'a' && x <= 'z') x = static_cast<char>(x - 'a' + 'A');
    if (y >= 'a' && y <= 'z') y = static_cast<char>(y - 'a' + 'A');
    if (x != y) return false;
  }
  return true;
}

template <typename T>
T get_at(const FlowKey& k, size_t off) {
  T v;
  std::memcpy(&v, reinterpret_cast<const uint8_t*>(&k) + off, sizeof v);
  return v;
}
template <typename T>
void put_at(FlowKey& k, size_t off, const T& v) {
  std::memcpy(reinterpret_cast<uint8_t*>(&k) + off, &v, sizeof v);
}
template <typename T>
void set_masked(Match& m, size_t off, T v, T mk) {
  put_at<T>(m.key, off, static_cast<T>(v & mk));
  put_at<T>(m.mask, off, mk);
}

// ======================= parser =======================

class OfParser {
 public:
  OfParser(std::string_view text, const OfParseOptions& o, bool match_only)
      : all_{text, 1}, o_(o), match_only_(match_only) {}

  Status parse(OfFlow& out) {
    const Span& s = all_;
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_delimiter(s.text[i])) ++i;
      if (i >= s.size()) break;
      size_t start = i;
      while (i < s.size() && !is_delimiter(s.text[i]) && s.text[i] != '=' && s.text[i] != ':' &&
             s.text[i] != '(')
        ++i;
      Span key = s.sub(start, i - start);
      if (key.empty()) return error_at("unexpected character", s.sub(i, 1), "expected a field name");
      char delim = i < s.size() ? s.text[i] : '\0';
      if (delim == '(') return error_at("unexpected '(' after", key, "expected field=value");
      bool has_value = delim == '=' || delim == ':';
      Span value = s.sub(i, 0);
      if (has_value) {
        ++i;
        if (key.text == "actions" || key.text == "action") {
          if (match_only_) return error_at("unexpected", key, "a match has no actions");
          while (i < s.size() && (s.text[i] == ' ' || s.text[i] == '\t')) ++i;
          size_t end = s.size();
          while (end > i && is_delimiter(s.text[end - 1]) && s.text[end - 1] != ',') --end;
          out.has_actions = true;
          out.actions = std::string(s.text.substr(i, end - i));
          out.actions_column = s.column + i;
          break;
        }
        size_t vstart = i;
        int depth = 0;
        while (i < s.size() && (depth > 0 || !is_delimiter(s.text[i]))) {
          if (s.text[i] == '(')
            ++depth;
          else if (s.text[i] == ')' && depth > 0)
            --depth;
          ++i;
        }
        value = s.sub(vstart, i - vstart);
      } else if (key.text == "actions" || key.text == "action") {
        return error_at("missing '=' after", key, "write actions=<actions>");
      }
      if (Status st = handle(key, has_value, value, out.meta); !st) return st;
    }
    if (Status st = check_prerequisites(); !st) return st;
    out.match = m_;
    return {};
  }

 private:
  Status no_value(const Span& key, bool has_value, const Span& value) {
    if (!has_value) return {};
    return error_at("unexpected value", value, std::string(key.text) + " takes no value");
  }

  Status handle(const Span& key, bool has_value, const Span& value, RuleMeta& meta) {
    std::string_view k = key.text;
    for (const Shorthand& sh : kShorthands) {
      if (k != sh.name) continue;
      if (Status st = no_value(key, has_value, value); !st) return st;
      m_.key.dl_type = hton16(sh.dl_type);
      m_.mask.dl_type = 0xffff;
      if (sh.nw_proto) {
        m_.key.nw_proto = sh.nw_proto;
        m_.mask.nw_proto = 0xff;
        // A later dl_type= may take the IP away from under this nw_proto.
        set_.push_back({find_field("nw_proto"), key});
      }
      return {};
    }
    if (k == "eth" || k == "no_readonly_table" || k == "allow_hidden_fields")
      return no_value(key, has_value, value);
    if (k == "duration" || k == "n_packets" || k == "n_bytes" || k == "idle_age" || k == "hard_age")
      return {};
    if (int idx = tun_metadata_index(k); idx != -2) return parse_tun_metadata(key, idx, has_value, value);
    if (const OfField* f = find_field(k)) {
      if (!has_value || value.empty())
        return error_at("missing value for field", key,
                        std::string(k) + " needs " + std::string(k) + "=<value>");
      if (Status st = parse_field(*f, value); !st) return st;
      set_.push_back({f, key});
      return {};
    }
    if (Status st = parse_rule_key(key, has_value, value, meta); !st) return st;
    return {};
  }

  // tun_metadataN: N (0..7), -1 for a number keel does not have, -2 when
  // the word is not tun_metadata<digits>.
  static int tun_metadata_index(std::string_view k) {
    constexpr std::string_view kName = "tun_metadata";
    if (k.size() <= kName.size() || k.substr(0, kName.size()) != kName) return -2;
    uint64_t n;
    if (!parse_uint(k.substr(kName.size()), n) || k[kName.size()] < '0' || k[kName.size()] > '9') return -2;
    return n < kTunMetadataFields ? static_cast<int>(n) : -1;
  }

  // tun_metadataN[=V[/M]]: the metadata form of tun_metadata.h. A bare name
  // matches "present, any value" (as ovs-ofctl).
  Status parse_tun_metadata(const Span& key, int idx, bool has_value, const Span& value) {
    if (idx < 0)
      return error_at("unknown field", key,
                      "keel has tun_metadata0..tun_metadata" + std::to_string(kTunMetadataFields - 1));
    const TlvMapping* map = o_.tlv ? o_.tlv->at(static_cast<unsigned>(idx)) : nullptr;
    if (o_.tlv && !map)
      return error_at("unmapped field", key,
                      "NXFMFC_INVALID_TLV_FIELD: map it first with add-tlv-map (" + std::string(key.text) +
                          " has no TLV mapping)");
    const size_t off = tun_metadata_slot_offset(static_cast<unsigned>(idx));
    uint8_t* kv = reinterpret_cast<uint8_t*>(&m_.key) + off;
    uint8_t* mv = reinterpret_cast<uint8_t*>(&m_.mask) + off;
    uint8_t v[kTunMetadataSlot], mk[kTunMetadataSlot];
    if (!has_value) {
      std::memset(v, 0, sizeof v);
      std::memset(mk, 0, sizeof mk);
    } else {
      if (value.empty())
        return error_at("missing value for field", key, std::string(key.text) + "=<value>[/<mask>]");
      MaskedSpan ms = split_mask(value);
      // With a mapping, the value and mask hold at most its length.
      const size_t room = map ? map->len : kTunMetadataSlot;
      std::span<uint8_t> vs(v + kTunMetadataSlot - room, room), ms_(mk + kTunMetadataSlot - room, room);
      std::memset(v, 0, sizeof v);
      std::memset(mk, 0, sizeof mk);
      if (Status st = parse_tun_metadata_value(ms.value.text, vs); !st)
        return error_at("bad value for", key, st.message());
      if (ms.has_mask) {
        if (Status st = parse_tun_metadata_value(ms.mask.text, ms_); !st)
          return error_at("bad mask for", key, st.message());
      } else {
        std::memset(mk + kTunMetadataSlot - room, 0xff, room);
      }
      // All ones over the mapped length is exact: the whole slot (the bytes
      // before the option's data are zero in every packet's metadata).
      bool ones = true;
      for (size_t i = kTunMetadataSlot - room; i < kTunMetadataSlot; ++i) ones = ones && mk[i] == 0xff;
      if (ones) std::memset(mk, 0xff, sizeof mk);
      for (size_t i = 0; i < kTunMetadataSlot; ++i) v[i] &= mk[i];
    }
    std::memcpy(kv, v, sizeof v);
    std::memcpy(mv, mk, sizeof mk);
    m_.key.tun_opt_len |= 1u << idx;
    m_.mask.tun_opt_len |= 1u << idx;
    return {};
  }

  Status parse_rule_key(const Span& key, bool has_value, const Span& value, RuleMeta& meta) {
    std::string_view k = key.text;
    bool* flag = k == "send_flow_rem"      ? &meta.send_flow_rem
                 : k == "check_overlap"    ? &meta.check_overlap
                 : k == "reset_counts"     ? &meta.reset_counts
                 : k == "no_packet_counts" ? &meta.no_packet_counts
                 : k == "no_byte_counts"   ? &meta.no_byte_counts
                                           : nullptr;
    uint16_t* u16 = k == "priority"       ? &meta.priority
                    : k == "idle_timeout" ? &meta.idle_timeout
                    : k == "hard_timeout" ? &meta.hard_timeout
                    : k == "importance"   ? &meta.importance
                                          : nullptr;
    bool rule_key = flag || u16 || k == "table" || k == "cookie";
    if (!rule_key) return error_at("unknown field", key);
    if (match_only_) return error_at("unexpected", key, std::string(k) + " is not a match field");
    if (flag) {
      if (Status st = no_value(key, has_value, value); !st) return st;
      *flag = true;
      return {};
    }
    if (!has_value || value.empty())
      return error_at("missing value for", key, std::string(k) + " needs " + std::string(k) + "=<value>");
    uint64_t v;
    if (u16) {
      if (Status st = parse_number(value, 0xffff, k, v); !st) return st;
      *u16 = static_cast<uint16_t>(v);
      return {};
    }
    if (k == "table") {
      if (Status st = parse_number(value, 254, k, v); !st) return st;
      meta.table = static_cast<uint8_t>(v);
      return {};
    }
    // cookie=V or cookie=V/M (M may be -1: all ones, as ovs-ofctl suggests).
    MaskedSpan ms = split_mask(value);
    if (Status st = parse_number(ms.value, UINT64_MAX, "cookie", v); !st) return st;
    uint64_t mk = UINT64_MAX;
    if (ms.has_mask && ms.mask.text != "-1") {
      if (Status st = parse_number(ms.mask, UINT64_MAX, "cookie mask", mk); !st) return st;
    }
    meta.has_cookie = true;
    meta.cookie = v;
    meta.cookie_mask = mk;
    return {};
  }

  // value/mask for a numeric field; a mask on a field that takes none is an
  // error unless it is all ones (ovs-ofctl accepts that too).
  Status number(const OfField& f, const Span& value, uint64_t max, uint64_t& v, uint64_t& mk) {
    MaskedSpan ms = split_mask(value);
    if (ms.has_mask && !f.maskable) {
      uint64_t probe;
      if (!parse_uint(ms.mask.text, probe) || probe != max)
        return error_at("unexpected mask", ms.mask, std::string(f.name) + " does not take a mask");
    }
    return parse_masked_number(value, max, f.name, v, mk);
  }

  Status no_mask(const OfField& f, const Span& value) {
    MaskedSpan ms = split_mask(value);
    if (ms.has_mask)
      return error_at("unexpected mask", ms.mask, std::string(f.name) + " does not take a mask");
    return {};
  }

  Status parse_field(const OfField& f, const Span& value) {
    uint64_t v = 0, mk = 0;
    switch (f.kind) {
      case Kind::u8:
        if (Status st = number(f, value, 0xff, v, mk); !st) return st;
        set_masked<uint8_t>(m_, f.offset, static_cast<uint8_t>(v), static_cast<uint8_t>(mk));
        return {};
      case Kind::be16:
        if (Status st = number(f, value, 0xffff, v, mk); !st) return st;
        set_masked<uint16_t>(m_, f.offset, hton16(static_cast<uint16_t>(v)),
                             hton16(static_cast<uint16_t>(mk)));
        return {};
      case Kind::u32:
        if (Status st = number(f, value, UINT32_MAX, v, mk); !st) return st;
        set_masked<uint32_t>(m_, f.offset, static_cast<uint32_t>(v), static_cast<uint32_t>(mk));
        return {};
      case Kind::be64:
        if (Status st = number(f, value, UINT64_MAX, v, mk); !st) return st;
        set_masked<uint64_t>(m_, f.offset, hton64(v), hton64(mk));
        return {};
      case Kind::label:
        if (Status st = number(f, value, 0xfffff, v, mk); !st) return st;
        set_masked<uint32_t>(m_, f.offset, hton32(static_cast<uint32_t>(v)),
                             hton32(static_cast<uint32_t>(mk)));
        return {};
      case Kind::dl_type:
        if (Status st = number(f, value, 0xffff, v, mk); !st) return st;
        set_masked<uint16_t>(m_, f.offset, hton16(static_cast<uint16_t>(v)), 0xffff);
        return {};
      case Kind::vlan_tci:
        if (Status st = number(f, value, 0xffff, v, mk); !st) return st;
        set_masked<uint16_t>(m_, f.offset, hton16(static_cast<uint16_t>(v)),
                             hton16(static_cast<uint16_t>(mk)));
        return {};
      case Kind::dl_vlan: {
        // OpenFlow 1.0: 0xffff means "no 802.1Q header".
        if (Status st = no_mask(f, value); !st) return st;
        if (Status st = parse_number(value, 0xffff, f.name, v); !st) return st;
        if (v == 0xffff) {
          set_masked<uint16_t>(m_, f.offset, 0, 0xffff);
          return {};
        }
        if (v > kVlanVidMask)
          return error_at("out-of-range value", value, "dl_vlan must be 0..4095 (or 0xffff: none)");
        uint16_t tci = ntoh16(m_.key.vlans[0].tci), tm = ntoh16(m_.mask.vlans[0].tci);
        tci = static_cast<uint16_t>((tci & ~kVlanVidMask) | kVlanCfi | v);
        tm |= kVlanVidMask | kVlanCfi;
        set_masked<uint16_t>(m_, f.offset, hton16(tci), hton16(tm));
        return {};
      }
      case Kind::dl_vlan_pcp: {
        if (Status st = no_mask(f, value); !st) return st;
        if (Status st = parse_number(value, 7, f.name, v); !st) return st;
        uint16_t tci = ntoh16(m_.key.vlans[0].tci), tm = ntoh16(m_.mask.vlans[0].tci);
        tci = static_cast<uint16_t>((tci & ~kVlanPcpMask) | kVlanCfi | (v << 13));
        tm |= kVlanPcpMask | kVlanCfi;
        set_masked<uint16_t>(m_, f.offset, hton16(tci), hton16(tm));
        return {};
      }
      case Kind::nw_tos:
      case Kind::ip_dscp:
      case Kind::nw_ecn: {
        if (Status st = no_mask(f, value); !st) return st;
        uint8_t bits = f.kind == Kind::nw_ecn ? kIpEcnMask : kIpDscpMask;
        uint64_t max = f.kind == Kind::nw_tos ? 0xff : f.kind == Kind::ip_dscp ? 63 : 3;
        if (Status st = parse_number(value, max, f.name, v); !st) return st;
        if (f.kind == Kind::ip_dscp) v <<= 2;
        if (f.kind == Kind::nw_tos && (v & kIpEcnMask))
          return error_at("bad nw_tos value", value,
                          "nw_tos is the DSCP field, a multiple of 4 (use nw_ecn for ECN)");
        m_.key.nw_tos = static_cast<uint8_t>((m_.key.nw_tos & ~bits) | v);
        m_.mask.nw_tos |= bits;
        return {};
      }
      case Kind::frag: {
        // Open vSwitch's frag_handling table: the first row for a name wins.
        struct Row {
          std::string_view name;
          uint8_t mask, value;
        };
        static constexpr Row kRows[] = {
            {"no", kFragMask, 0},        {"first", kFragMask, kFragAny}, {"later", kFragMask, kFragMask},
            {"yes", kFragAny, kFragAny}, {"not_later", kFragLater, 0},
        };
        if (Status st = no_mask(f, value); !st) return st;
        for (const Row& r : kRows) {
          if (value.text != r.name) continue;
          set_masked<uint8_t>(m_, f.offset, r.value, r.mask);
          return {};
        }
        return error_at("bad ip_frag value", value, "expected no, yes, first, later or not_later");
      }
      case Kind::tcp_flags: {
        uint32_t fl, fm;
        if (Status st = parse_flags(value, tcp_flag_name, kTcpFlagsMax, f.name, fl, fm); !st) return st;
        set_masked<uint16_t>(m_, f.offset, hton16(static_cast<uint16_t>(fl)),
                             hton16(static_cast<uint16_t>(fm)));
        return {};
      }
      case Kind::tun_flags: {
        uint32_t fl, fm;
        if (Status st = parse_flags(value, tun_flag_name, kTunFlagsMax, f.name, fl, fm); !st) return st;
        set_masked<uint16_t>(m_, f.offset, static_cast<uint16_t>(fl), static_cast<uint16_t>(fm));
        return {};
      }
      case Kind::icmp8:
        if (Status st = no_mask(f, value); !st) return st;
        if (Status st = parse_number(value, 0xff, f.name, v); !st) return st;
        set_masked<uint16_t>(m_, f.offset, hton16(static_cast<uint16_t>(v)), hton16(0x00ff));
        return {};
      case Kind::arp_op:
        if (Status st = no_mask(f, value); !st) return st;
        if (Status st = parse_number(value, 0xff, f.name, v); !st) return st;
        set_masked<uint8_t>(m_, f.offset, static_cast<uint8_t>(v), 0xff);
        return {};
      case Kind::in_port:
        return parse_in_port(f, value);
      case Kind::ipv4: {  // every IPv4 field is maskable
        be32 a, am;
        if (Status st = parse_masked_ipv4(value, a, am); !st) return st;
        set_masked<uint32_t>(m_, f.offset, a, am);
        return {};
      }
      case Kind::ipv6: {
        In6Addr a, am;
        if (Status st = parse_masked_ipv6(value, a, am); !st) return st;
        put_masked_bytes(m_, f.offset, a.b, am.b, 16);
        return {};
      }
      case Kind::mac: {
        EthAddr a, am;
        if (Status st = parse_masked_mac(value, a, am); !st) return st;
        put_masked_bytes(m_, f.offset, a.b, am.b, 6);
        return {};
      }
    }
    return error_at("internal: unhandled field", value);
  }

  Status parse_in_port(const OfField& f, const Span& value) {
    if (Status st = no_mask(f, value); !st) return st;
    uint64_t v;
    if (parse_uint(value.text, v)) {
      // 16-bit OpenFlow 1.0 numbers, or OpenFlow 1.1+ reserved 32-bit ones.
      if (v >= 0xffffff00 && v <= 0xffffffff) v -= 0xffff0000;
      if (v > 0xffff)
        return error_at("out-of-range port", value, "in_port must be 0..65535 or 0xffffff00..0xffffffff");
    } else {
      bool found = false;
      for (const ReservedPort& r : kReservedPorts) {
        if (iequals(value.text, r.name)) {
          v = r.number;
          found = true;
          break;
        }
      }
      if (!found) {
        std::optional<uint32_t> p;
        if (o_.port_number) p = o_.port_number(value.text);
        if (!p) return error_at("unknown port", value);
        v = *p;
      }
    }
    m_.key.in_port = static_cast<uint32_t>(v);
    m_.mask.in_port = UINT32_MAX;
    return {};
  }

  Status check_prerequisites() const {
    for (const auto& [f, key] : set_) {
      const char* need = nullptr;
      bool l4 = false;
      switch (f->prereq) {
        case Prereq::none:
          break;
        case Prereq::ipv4_or_arp:
          if (!dl_is(m_, kEthTypeIp) && !is_arp_any(m_)) need = "ip or arp (dl_type=0x0800 or 0x0806)";
          break;
        case Prereq::ip_any_or_arp:
          if (!is_ip_any(m_) && !is_arp_any(m_)) need = "ip, ipv6 or arp";
          break;
        case Prereq::ip_any:
          if (!is_ip_any(m_)) need = "ip or ipv6 (dl_type=0x0800 or 0x86dd)";
          break;
        case Prereq::ipv6:
          if (!dl_is(m_, kEthTypeIpv6)) need = "ipv6 (dl_type=0x86dd)";
          break;
        case Prereq::arp:
          if (!is_arp_any(m_)) need = "arp or rarp (dl_type=0x0806 or 0x8035)";
          break;
        case Prereq::l4:
          l4 = true;
          if (!proto_is(m_, kProtoTcp) && !proto_is(m_, kProtoUdp) && !proto_is(m_, kProtoSctp))
            need = "tcp, udp or sctp (nw_proto=6, 17 or 132)";
          break;
        case Prereq::tcp:
          l4 = true;
          if (!proto_is(m_, kProtoTcp)) need = "tcp or tcp6 (nw_proto=6)";
          break;
        case Prereq::udp:
          l4 = true;
          if (!proto_is(m_, kProtoUdp)) need = "udp or udp6 (nw_proto=17)";
          break;
        case Prereq::sctp:
          l4 = true;
          if (!proto_is(m_, kProtoSctp)) need = "sctp or sctp6 (nw_proto=132)";
          break;
        case Prereq::icmp:
          if (!(dl_is(m_, kEthTypeIp) && proto_is(m_, kProtoIcmp))) need = "icmp";
          break;
        case Prereq::icmp_any:
          if (!(dl_is(m_, kEthTypeIp) && proto_is(m_, kProtoIcmp)) &&
              !(dl_is(m_, kEthTypeIpv6) && proto_is(m_, kProtoIcmpv6)))
            need = "icmp or icmp6";
          break;
        case Prereq::icmpv6:
          if (!(dl_is(m_, kEthTypeIpv6) && proto_is(m_, kProtoIcmpv6))) need = "icmp6";
          break;
        case Prereq::nd:
          if (!is_nd(m_)) need = "icmp6 with icmp_type=135 or 136 and icmp_code=0";
          break;
        case Prereq::nd_sll:
          if (!is_nd(m_) || !icmp_type_is(m_, kNdSolicit)) need = "icmp6 with icmp_type=135 and icmp_code=0";
          break;
        case Prereq::nd_tll:
          if (!is_nd(m_) || !icmp_type_is(m_, kNdAdvert)) need = "icmp6 with icmp_type=136 and icmp_code=0";
          break;
      }
      if (need) {
        return error_at("missing prerequisite for", key, std::string(f->name) + " requires " + need);
      }
      if (l4 && later_fragment(m_)) {
        return error_at("missing prerequisite for", key,
                        std::string(f->name) + " cannot match a later fragment (ip_frag=later)");
      }
    }
    return {};
  }

  struct SetField {
    const OfField* field;
    Span key;
  };

  Span all_;
  const OfParseOptions& o_;
  bool match_only_;
  Match m_;
  std::vector<SetField> set_;
};

// ======================= printer =======================

class OfPrinter {
 public:
  OfPrinter(const Match& m, const OfFormatOptions& o, std::string& out) : m_(m), o_(o), out_(out) {}

  void print() {
    const FlowKey& k = m_.key;
    const FlowKey& mk = m_.mask;
    u32("pkt_mark", k.pkt_mark, mk.pkt_mark);
    u32("recirc_id", k.recirc_id, mk.recirc_id);
    u32("dp_hash", k.dp_hash, mk.dp_hash);
    u32("skb_priority", k.skb_priority, mk.skb_priority);

    uint16_t dl = ntoh16(k.dl_type);
    bool skip_type = false, skip_proto = false;
    if (mk.dl_type == 0xffff) {
      skip_type = true;
      bool proto = mk.nw_proto == 0xff;
      if (dl == kEthTypeIp || dl == kEthTypeIpv6) {
        bool v6 = dl == kEthTypeIpv6;
        const char* name = v6 ? "ipv6" : "ip";
        if (proto) {
          skip_proto = true;
          switch (k.nw_proto) {
            case kProtoTcp:
              name = v6 ? "tcp6" : "tcp";
              break;
            case kProtoUdp:
              name = v6 ? "udp6" : "udp";
              break;
            case kProtoSctp:
              name = v6 ? "sctp6" : "sctp";
              break;
            case kProtoIcmp:
              if (!v6)
                name = "icmp";
              else
                skip_proto = false;
              break;
            case kProtoIcmpv6:
              if (v6)
                name = "icmp6";
              else
                skip_proto = false;
              break;
            default:
              skip_proto = false;
          }
        }
        word(name);
      } else if (dl == kEthTypeArp) {
        word("arp");
      } else if (dl == kEthTypeRarp) {
        word("rarp");
      } else {
        skip_type = false;
      }
    }

    for (unsigned i = 0; i < 8; ++i) {
      char name[] = "reg0";
      name[3] = static_cast<char>('0' + i);
      u32(name, k.regs[i], mk.regs[i]);
    }

    be64_masked("tun_id", k.tun_id, mk.tun_id);
    ipv4_netmask("tun_src", k.tun_ipv4_src, mk.tun_ipv4_src);
    ipv4_netmask("tun_dst", k.tun_ipv4_dst, mk.tun_ipv4_dst);
    ipv6_netmask("tun_ipv6_src", k.tun_ipv6_src, mk.tun_ipv6_src);
    ipv6_netmask("tun_ipv6_dst", k.tun_ipv6_dst, mk.tun_ipv6_dst);
    // Open vSwitch prints tun_tos in hex without "0x", which reads back as
    // decimal; keel prints decimal so that it reads back.
    if (mk.tun_tos) field("tun_tos"), put_dec(out_, k.tun_tos);
    if (mk.tun_ttl) field("tun_ttl"), put_dec(out_, k.tun_ttl);
    if (mk.tun_flags & kTunFlagsMax) {
      field("tun_flags");
      put_flags(out_, tun_flag_name, k.tun_flags, mk.tun_flags, kTunFlagsMax);
    }
    put_tun_metadata();
    be64_masked("metadata", k.metadata, mk.metadata);

    if (mk.in_port) {
      field("in_port");
      put_port(k.in_port);
    }
    put_vlan();
    eth_masked("dl_src", k.dl_src, mk.dl_src);
    eth_masked("dl_dst", k.dl_dst, mk.dl_dst);
    if (!skip_type && mk.dl_type) {
      field("dl_type");
      put_hex(out_, dl, 4);
    }

    bool arp = dl == kEthTypeArp || dl == kEthTypeRarp;
    if (dl == kEthTypeIpv6) {
      ipv6_netmask("ipv6_src", k.ipv6_src, mk.ipv6_src);
      ipv6_netmask("ipv6_dst", k.ipv6_dst, mk.ipv6_dst);
      if (mk.ipv6_label) {
        field("ipv6_label");
        put_hex(out_, ntoh32(k.ipv6_label), 5);
        if (mk.ipv6_label != UINT32_MAX && ntoh32(mk.ipv6_label) != 0xfffff)
          out_ += '/', put_hex(out_, ntoh32(mk.ipv6_label), 5);
      }
    } else if (arp) {
      ipv4_netmask("arp_spa", k.nw_src, mk.nw_src);
      ipv4_netmask("arp_tpa", k.nw_dst, mk.nw_dst);
    } else {
      ipv4_netmask("nw_src", k.nw_src, mk.nw_src);
      ipv4_netmask("nw_dst", k.nw_dst, mk.nw_dst);
    }
    if (!skip_proto && mk.nw_proto) {
      field(arp ? "arp_op" : "nw_proto");
      put_dec(out_, k.nw_proto);
    }
    if (arp) {
      eth_masked("arp_sha", k.arp_sha, mk.arp_sha);
      eth_masked("arp_tha", k.arp_tha, mk.arp_tha);
    }
    if (mk.nw_tos & kIpDscpMask) field("nw_tos"), put_dec(out_, k.nw_tos & kIpDscpMask);
    if (mk.nw_tos & kIpEcnMask) field("nw_ecn"), put_dec(out_, k.nw_tos & kIpEcnMask);
    if (mk.nw_ttl) field("nw_ttl"), put_dec(out_, k.nw_ttl);
    put_frag();

    if (dl == kEthTypeIp && k.nw_proto == kProtoIcmp) {
      icmp8("icmp_type", k.tp_src, mk.tp_src);
      icmp8("icmp_code", k.tp_dst, mk.tp_dst);
    } else if (dl == kEthTypeIpv6 && k.nw_proto == kProtoIcmpv6) {
      icmp8("icmp_type", k.tp_src, mk.tp_src);
      icmp8("icmp_code", k.tp_dst, mk.tp_dst);
      ipv6_netmask("nd_target", k.nd_target, mk.nd_target);
      eth_masked("nd_sll", k.arp_sha, mk.arp_sha);
      eth_masked("nd_tll", k.arp_tha, mk.arp_tha);
    } else {
      be16_masked("tp_src", k.tp_src, mk.tp_src);
      be16_masked("tp_dst", k.tp_dst, mk.tp_dst);
    }
    if ((dl == kEthTypeIp || dl == kEthTypeIpv6) && k.nw_proto == kProtoTcp &&
        (ntoh16(mk.tcp_flags) & kTcpFlagsMax)) {
      field("tcp_flags");
      put_flags(out_, tcp_flag_name, ntoh16(k.tcp_flags), ntoh16(mk.tcp_flags), kTcpFlagsMax);
    }
  }

 private:
  void sep() {
    if (!out_.empty()) out_ += ',';
  }
  void word(std::string_view w) {
    sep();
    out_ += w;
  }
  // tun_metadata_match_format(): =NP when matched absent, the bare name
  // when the value is wildcarded, else =value[/mask].
  void put_tun_metadata() {
    for (unsigned i = 0; i < kTunMetadataFields; ++i) {
      if (!(m_.mask.tun_opt_len & (1u << i))) continue;
      sep();
      out_ += "tun_metadata";
      out_ += static_cast<char>('0' + i);
      if (!(m_.key.tun_opt_len & (1u << i))) {
        out_ += "=NP";
        continue;
      }
      const size_t off = tun_metadata_slot_offset(i);
      std::span<const uint8_t> v(reinterpret_cast<const uint8_t*>(&m_.key) + off, kTunMetadataSlot);
      std::span<const uint8_t> mk(reinterpret_cast<const uint8_t*>(&m_.mask) + off, kTunMetadataSlot);
      if (std::all_of(mk.begin(), mk.end(), [](uint8_t b) { return b == 0; })) continue;
      out_ += '=';
      put_tun_metadata_hex(out_, v);
      const TlvMapping* map = o_.tlv ? o_.tlv->at(i) : nullptr;
      auto exact = mk.subspan(map ? kTunMetadataSlot - map->len : 0);
      if (!std::all_of(exact.begin(), exact.end(), [](uint8_t b) { return b == 0xff; })) {
        out_ += '/';
        put_tun_metadata_hex(out_, mk);
      }
    }
  }

  void field(std::string_view name) {
    sep();
    out_ += name;
    out_ += '=';
  }
  // format_uint32_masked()
  void u32(std::string_view name, uint32_t v, uint32_t mk) {
    if (!mk) return;
    field(name);
    put_hex_alt(out_, v);
    if (mk != UINT32_MAX) out_ += '/', put_hex_alt(out_, mk);
  }
  // format_be64_masked()
  void be64_masked(std::string_view name, be64 v, be64 mk) {
    if (!mk) return;
    field(name);
    put_hex_alt(out_, ntoh64(v));
    if (mk != UINT64_MAX) out_ += '/', put_hex_alt(out_, ntoh64(mk));
  }
  // format_be16_masked(): decimal when exact, else "0x../0x..".
  void be16_masked(std::string_view name, be16 v, be16 mk) {
    if (!mk) return;
    field(name);
    if (mk == 0xffff) {
      put_dec(out_, ntoh16(v));
    } else {
      put_hex(out_, ntoh16(v));
      out_ += '/';
      put_hex(out_, ntoh16(mk));
    }
  }
  // ICMP type/code: exact when the low byte is all ones (see match.h).
  void icmp8(std::string_view name, be16 v, be16 mk) {
    if (!mk) return;
    if (!o_.icmp_16bit && (ntoh16(mk) & 0xff) == 0xff) {
      field(name);
      put_dec(out_, ntoh16(v) & 0xff);
    } else {
      be16_masked(name, v, mk);
    }
  }
  void ipv4_netmask(std::string_view name, be32 v, be32 mk) {
    if (!mk) return;
    field(name);
    put_ipv4_masked_cidr(out_, v, mk);
  }
  void ipv6_netmask(std::string_view name, const In6Addr& v, const In6Addr& mk) {
    if (is_zero(mk)) return;
    field(name);
    put_ipv6_masked_cidr(out_, v, mk);
  }
  void eth_masked(std::string_view name, const EthAddr& v, const EthAddr& mk) {
    if (is_zero(mk)) return;
    field(name);
    put_mac(out_, v);
    if (!is_ones(mk)) out_ += '/', put_mac(out_, mk);
  }
  void put_port(uint32_t port) {
    if (o_.port_name) {
      if (std::optional<std::string> n = o_.port_name(port)) {
        out_ += *n;
        return;
      }
    }
    for (const ReservedPort& r : kReservedPorts) {
      if (r.number == port) {
        out_ += r.name;
        return;
      }
    }
    put_dec(out_, port);
  }
  // match_format(): the outer tag as dl_vlan / dl_vlan_pcp / vlan_tci, the
  // inner one (only a packet's flow has it: trace's Flow line under any
  // vlan-limit) with the suffix 1, up to the first level with no TCI mask.
  void put_vlan() {
    for (unsigned i = 0; i < 2; ++i) {
      uint16_t tci = ntoh16(m_.key.vlans[i].tci), mask = ntoh16(m_.mask.vlans[i].tci);
      if (!mask) return;
      const char* sfx = i ? "1" : "";
      uint16_t vid_mask = mask & kVlanVidMask, pcp_mask = mask & kVlanPcpMask;
      if ((mask & kVlanCfi) && (tci & kVlanCfi) && (!vid_mask || vid_mask == kVlanVidMask) &&
          (!pcp_mask || pcp_mask == kVlanPcpMask) && (vid_mask || pcp_mask)) {
        if (vid_mask) field(std::string("dl_vlan") + sfx), put_dec(out_, tci & kVlanVidMask);
        if (pcp_mask) field(std::string("dl_vlan_pcp") + sfx), put_dec(out_, tci >> 13);
      } else {
        field(std::string("vlan_tci") + sfx);
        put_hex(out_, tci, 4);
        if (mask != 0xffff) out_ += '/', put_hex(out_, mask, 4);
      }
    }
  }
  void put_frag() {
    uint8_t f = m_.key.nw_frag;
    switch (m_.mask.nw_frag & kFragMask) {
      case kFragMask:
        field("nw_frag");
        out_ +=
            (f & kFragAny) ? ((f & kFragLater) ? "later" : "first") : ((f & kFragLater) ? "<error>" : "no");
        break;
      case kFragAny:
        field("nw_frag");
        out_ += (f & kFragAny) ? "yes" : "no";
        break;
      case kFragLater:
        field("nw_frag");
        out_ += (f & kFragLater) ? "later" : "not_later";
        break;
      default:
        break;
    }
  }

  const Match& m_;
  const OfFormatOptions& o_;
  std::string& out_;
};

}  // namespace

Result<OfFlow> parse_of_flow(std::string_view text, const OfParseOptions& options) {
  OfFlow flow;
  OfParser p(text, options, false);
  if (Status st = p.parse(flow); !st) return st;
  return flow;
}

Result<Match> parse_of_match(std::string_view text, const OfParseOptions& options) {
  OfFlow flow;
  OfParser p(text, options, true);
  if (Status st = p.parse(flow); !st) return st;
  return flow.match;
}

std::string format_of_match(const Match& match, const OfFormatOptions& options) {
  std::string out;
  OfPrinter(match, options, out).print();
  return out;
}

std::string format_of_flow(const OfFlow& flow, const OfFormatOptions& options) {
  const RuleMeta& r = flow.meta;
  std::string out;
  auto sep = [&] {
    if (!out.empty()) out += ',';
  };
  if (r.has_cookie) {
    sep();
    out += "cookie=";
    put_hex(out, r.cookie);
    if (r.cookie_mask != UINT64_MAX) out += '/', put_hex(out, r.cookie_mask);
  }
  if (r.table) sep(), out += "table=", put_dec(out, *r.table);
  if (r.idle_timeout) sep(), out += "idle_timeout=", put_dec(out, r.idle_timeout);
  if (r.hard_timeout) sep(), out += "hard_timeout=", put_dec(out, r.hard_timeout);
  if (r.importance) sep(), out += "importance=", put_dec(out, r.importance);
  if (r.send_flow_rem) sep(), out += "send_flow_rem";
  if (r.check_overlap) sep(), out += "check_overlap";
  if (r.reset_counts) sep(), out += "reset_counts";
  if (r.no_packet_counts) sep(), out += "no_packet_counts";
  if (r.no_byte_counts) sep(), out += "no_byte_counts";
  if (r.priority != kOfDefaultPriority) sep(), out += "priority=", put_dec(out, r.priority);
  OfPrinter(flow.match, options, out).print();
  if (flow.has_actions) {
    sep();
    out += "actions=";
    out += flow.actions;
  }
  return out;
}

}  // namespace keel::flow

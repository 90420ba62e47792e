// Datapath flow syntax: see dp_flow_syntax.h.
//
// Layout of this file: the per-attribute field tables (one row per
// `field=` of an attribute: its kind and its place in the FlowKey), the
// generic field reader and writer driven by those tables, the parser
// (scan the line into attributes, then interpret one VLAN level at a time,
// then check prerequisites), and the printer (odp_flow_format()'s order).
#include "flow/dp_flow_syntax.h"

#include <cstring>
#include <vector>

#include "flow/flow_text.h"
#include "flow/tun_metadata.h"

namespace keel::flow {
namespace {

using namespace text;

constexpr unsigned kMaxVlans = 2;  // FlowKey::vlans

// --- raw access to a FlowKey field by byte offset ---

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
bool bytes_zero(const FlowKey& k, size_t off, size_t n) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(&k) + off;
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

// --- field tables ---

enum class Kind : uint8_t {
  u8,      // decimal, "/0x.." mask           (format_u8u)
  u8x,     // 0x.. hex                        (format_u8x)
  be16,    // decimal                         (format_be16)
  be64,    // 0x.. hex, always with 0x        (format_be64)
  ipv4,    // dotted, "/dotted" mask          (format_ipv4)
  ipv6,    // inet_ntop, "/addr" mask         (format_in6_addr)
  mac,     // xx:..:xx, "/mac" mask           (format_eth)
  label,   // 20-bit be32, 0x.. hex           (format_ipv6_label)
  frag,    // no|first|later                  (format_frag)
  icmp8,   // u8 kept in the low byte of a be16 (ICMP type/code in tp_src/tp_dst)
  arp_op,  // be16 in text, 8 bits in nw_proto
};

constexpr size_t kind_size(Kind k) {
  switch (k) {
    case Kind::u8:
    case Kind::u8x:
    case Kind::frag:
    case Kind::arp_op:
      return 1;
    case Kind::be16:
    case Kind::icmp8:
      return 2;
    case Kind::label:
      return 4;
    case Kind::be64:
      return 8;
    case Kind::ipv4:
      return 4;
    case Kind::ipv6:
      return 16;
    case Kind::mac:
      return 6;
  }
  return 0;
}

struct FieldDef {
  std::string_view name;
  Kind kind;
  size_t offset;
};

#define KF(name, kind, field) \
  FieldDef { name, Kind::kind, offsetof(FlowKey, field) }
constexpr FieldDef kTunnelFields[] = {
    KF("tun_id", be64, tun_id),
    KF("src", ipv4, tun_ipv4_src),
    KF("dst", ipv4, tun_ipv4_dst),
    KF("ipv6_src", ipv6, tun_ipv6_src),
    KF("ipv6_dst", ipv6, tun_ipv6_dst),
    KF("tos", u8x, tun_tos),
    KF("ttl", u8, tun_ttl),
    KF("tp_src", be16, tun_tp_src),
    KF("tp_dst", be16, tun_tp_dst),
};
constexpr FieldDef kEthFields[] = {KF("src", mac, dl_src), KF("dst", mac, dl_dst)};
constexpr FieldDef kIpv4Fields[] = {
    KF("src", ipv4, nw_src), KF("dst", ipv4, nw_dst), KF("proto", u8, nw_proto),
    KF("tos", u8x, nw_tos),  KF("ttl", u8, nw_ttl),   KF("frag", frag, nw_frag),
};
constexpr FieldDef kIpv6Fields[] = {
    KF("src", ipv6, ipv6_src), KF("dst", ipv6, ipv6_dst), KF("label", label, ipv6_label),
    KF("proto", u8, nw_proto), KF("tclass", u8x, nw_tos), KF("hlimit", u8, nw_ttl),
    KF("frag", frag, nw_frag),
};
constexpr FieldDef kPortFields[] = {KF("src", be16, tp_src), KF("dst", be16, tp_dst)};
constexpr FieldDef kIcmpFields[] = {KF("type", icmp8, tp_src), KF("code", icmp8, tp_dst)};
constexpr FieldDef kArpFields[] = {
    KF("sip", ipv4, nw_src), KF("tip", ipv4, nw_dst), KF("op", arp_op, nw_proto),
    KF("sha", mac, arp_sha), KF("tha", mac, arp_tha),
};
constexpr FieldDef kNdFields[] = {KF("target", ipv6, nd_target), KF("sll", mac, arp_sha),
                                  KF("tll", mac, arp_tha)};
#undef KF

struct FieldTable {
  const FieldDef* begin_;
  const FieldDef* end_;
  const FieldDef* begin() const { return begin_; }
  const FieldDef* end() const { return end_; }
};
template <size_t N>
constexpr FieldTable table(const FieldDef (&a)[N]) {
  return {a, a + N};
}

bool field_wildcarded(const Match& m, const FieldDef& f) {
  return bytes_zero(m.mask, f.offset, kind_size(f.kind));
}
bool table_wildcarded(const Match& m, FieldTable t) {
  for (const FieldDef& f : t)
    if (!field_wildcarded(m, f)) return false;
  return true;
}

// --- small predicates on a match (the rest are in flow_text.h) ---

bool vlan_level_present(const Match& m, unsigned level) {
  return m.mask.vlans[level].tpid != 0 || m.mask.vlans[level].tci != 0;
}

// --- reading one field ---
//
// The parser keeps each value as written, bits outside its mask too (as
// odp_flow_from_string() keeps a key apart from its mask): DpFlow's
// key_as_written. The Match it returns is masked at the end.

void put_raw_bytes(Match& m, size_t off, const uint8_t* v, const uint8_t* mask, size_t n) {
  uint8_t* kp = reinterpret_cast<uint8_t*>(&m.key) + off;
  uint8_t* mp = reinterpret_cast<uint8_t*>(&m.mask) + off;
  for (size_t i = 0; i < n; ++i) {
    kp[i] = v[i];
    mp[i] = mask[i];
  }
}

Status parse_field(Match& m, const FieldDef& f, const Span& value) {
  uint64_t v = 0, mk = 0;
  switch (f.kind) {
    case Kind::u8:
    case Kind::u8x:
      if (Status st = parse_masked_number(value, 0xff, f.name, v, mk); !st) return st;
      put_at<uint8_t>(m.key, f.offset, static_cast<uint8_t>(v));
      put_at<uint8_t>(m.mask, f.offset, static_cast<uint8_t>(mk));
      return {};
    case Kind::be16:
      if (Status st = parse_masked_number(value, 0xffff, f.name, v, mk); !st) return st;
      put_at<uint16_t>(m.key, f.offset, hton16(static_cast<uint16_t>(v)));
      put_at<uint16_t>(m.mask, f.offset, hton16(static_cast<uint16_t>(mk)));
      return {};
    case Kind::icmp8:
      if (Status st = parse_masked_number(value, 0xff, f.name, v, mk); !st) return st;
      put_at<uint16_t>(m.key, f.offset, hton16(static_cast<uint16_t>(v)));
      put_at<uint16_t>(m.mask, f.offset, hton16(static_cast<uint16_t>(mk)));
      return {};
    case Kind::be64:
      if (Status st = parse_masked_number(value, UINT64_MAX, f.name, v, mk); !st) return st;
      put_at<uint64_t>(m.key, f.offset, hton64(v));
      put_at<uint64_t>(m.mask, f.offset, hton64(mk));
      return {};
    case Kind::label:
      if (Status st = parse_masked_number(value, 0xfffff, f.name, v, mk); !st) return st;
      put_at<uint32_t>(m.key, f.offset, hton32(static_cast<uint32_t>(v)));
      put_at<uint32_t>(m.mask, f.offset, hton32(static_cast<uint32_t>(mk)));
      return {};
    case Kind::arp_op: {
      // The opcode is 16 bits on the wire; keel keeps its low 8 bits (the
      // high byte of every real opcode is zero), so the mask's high byte
      // has nothing to select.
      MaskedSpan ms = split_mask(value);
      if (Status st = parse_number(ms.value, 0xff, "ARP op", v); !st) return st;
      mk = 0xff;
      if (ms.has_mask) {
        if (Status st = parse_number(ms.mask, 0xffff, "ARP op mask", mk); !st) return st;
        mk &= 0xff;
      }
      put_at<uint8_t>(m.key, f.offset, static_cast<uint8_t>(v));
      put_at<uint8_t>(m.mask, f.offset, static_cast<uint8_t>(mk));
      return {};
    }
    case Kind::ipv4: {
      be32 a, am;
      if (Status st = parse_masked_ipv4(value, a, am); !st) return st;
      put_raw_bytes(m, f.offset, reinterpret_cast<const uint8_t*>(&a), reinterpret_cast<const uint8_t*>(&am),
                    4);
      return {};
    }
    case Kind::ipv6: {
      In6Addr a, am;
      if (Status st = parse_masked_ipv6(value, a, am); !st) return st;
      put_raw_bytes(m, f.offset, a.b, am.b, 16);
      return {};
    }
    case Kind::mac: {
      EthAddr a, am;
      if (Status st = parse_masked_mac(value, a, am); !st) return st;
      put_raw_bytes(m, f.offset, a.b, am.b, 6);
      return {};
    }
    case Kind::frag: {
      // An enumeration in the datapath: no mask (Open vSwitch refuses one too).
      uint8_t frag;
      if (value.text == "no")
        frag = 0;
      else if (value.text == "first")
        frag = kFragAny;
      else if (value.text == "later")
        frag = kFragAny | kFragLater;
      else
        return error_at("bad frag value", value, "expected no, first or later");
      put_at<uint8_t>(m.key, f.offset, frag);
      put_at<uint8_t>(m.mask, f.offset, kFragMask);
      return {};
    }
  }
  return error_at("internal: unhandled field", value);
}

// --- writing one field ---

struct Body {
  std::string s;
  void sep() {
    if (!s.empty()) s += ',';
  }
};

// Prints `f` as format_*() in odp-util.c would: left out when wildcarded
// unless verbose; "/mask" when partially masked.
void put_field(Body& b, const Match& m, const FieldDef& f, bool verbose) {
  bool wild = field_wildcarded(m, f);
  if (f.kind == Kind::frag) {  // format_frag() ignores verbose
    if (wild) return;
    uint8_t v = get_at<uint8_t>(m.key, f.offset);
    b.sep();
    b.s += f.name;
    b.s += '=';
    b.s += !(v & kFragAny) ? "no" : (v & kFragLater) ? "later" : "first";
    return;
  }
  if (wild && !verbose) return;
  b.sep();
  b.s += f.name;
  b.s += '=';
  std::string& o = b.s;
  switch (f.kind) {
    case Kind::u8:
    case Kind::u8x: {
      uint8_t v = get_at<uint8_t>(m.key, f.offset), mk = get_at<uint8_t>(m.mask, f.offset);
      if (f.kind == Kind::u8)
        put_dec(o, v);
      else
        put_hex_alt(o, v);
      if (mk != 0xff) o += '/', put_hex_alt(o, mk);
      break;
    }
    case Kind::be16: {
      uint16_t v = ntoh16(get_at<uint16_t>(m.key, f.offset)), mk = ntoh16(get_at<uint16_t>(m.mask, f.offset));
      put_dec(o, v);
      if (mk != 0xffff) o += '/', put_hex_alt(o, mk);
      break;
    }
    case Kind::icmp8: {
      uint8_t v = ntoh16(get_at<uint16_t>(m.key, f.offset)) & 0xff;
      uint8_t mk = ntoh16(get_at<uint16_t>(m.mask, f.offset)) & 0xff;
      put_dec(o, v);
      if (mk != 0xff) o += '/', put_hex_alt(o, mk);
      break;
    }
    case Kind::arp_op: {
      uint8_t v = get_at<uint8_t>(m.key, f.offset), mk = get_at<uint8_t>(m.mask, f.offset);
      put_dec(o, v);
      if (mk != 0xff) o += '/', put_hex_alt(o, mk);
      break;
    }
    case Kind::be64: {
      uint64_t v = ntoh64(get_at<uint64_t>(m.key, f.offset)), mk = ntoh64(get_at<uint64_t>(m.mask, f.offset));
      put_hex(o, v);  // "0x%"PRIx64: 0 prints as 0x0
      if (mk != UINT64_MAX) o += '/', put_hex_alt(o, mk);
      break;
    }
    case Kind::label: {
      uint32_t v = ntoh32(get_at<uint32_t>(m.key, f.offset)), mk = ntoh32(get_at<uint32_t>(m.mask, f.offset));
      put_hex_alt(o, v);
      if ((mk & 0xfffff) != 0xfffff) o += '/', put_hex_alt(o, mk);
      break;
    }
    case Kind::ipv4: {
      be32 v = get_at<be32>(m.key, f.offset), mk = get_at<be32>(m.mask, f.offset);
      put_ipv4(o, v);
      if (mk != UINT32_MAX) o += '/', put_ipv4(o, mk);
      break;
    }
    case Kind::ipv6: {
      In6Addr v = get_at<In6Addr>(m.key, f.offset), mk = get_at<In6Addr>(m.mask, f.offset);
      put_ipv6(o, v);
      if (!is_ones(mk)) o += '/', put_ipv6(o, mk);
      break;
    }
    case Kind::mac: {
      EthAddr v = get_at<EthAddr>(m.key, f.offset), mk = get_at<EthAddr>(m.mask, f.offset);
      put_mac(o, v);
      if (!is_ones(mk)) o += '/', put_mac(o, mk);
      break;
    }
    case Kind::frag:
      break;
  }
}

// ======================= parser =======================

struct Attr {
  Span name;
  Span body;  // between the parentheses
};

// One `field=value` or `field(value)` inside an attribute.
struct Item {
  Span name;
  Span value;
  bool paren = false;
};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// 8-4-4-4-12 hex digits, as Open vSwitch prints a ufid.
bool is_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (dash ? c != '-' : !hex) return false;
  }
  return true;
}

Status split_items(const Attr& a, std::vector<Item>& out) {
  out.clear();
  std::vector<Span> parts;
  if (Status st = split_top_level(a.body, ',', parts); !st) return st;
  for (const Span& p : parts) {
    if (p.empty()) return error_at("empty field in", a.name, "two commas in a row, or a trailing comma");
    size_t eq = p.text.find('=');
    size_t paren = p.text.find('(');
    if (eq != std::string_view::npos && (paren == std::string_view::npos || eq < paren)) {
      out.push_back({p.sub(0, eq), p.sub(eq + 1), false});
    } else if (paren != std::string_view::npos && p.text.back() == ')') {
      out.push_back({p.sub(0, paren), p.sub(paren + 1, p.size() - paren - 2), true});
    } else {
      return error_at("bad field", p, "expected field=value");
    }
  }
  return {};
}

const FieldDef* find_field(FieldTable t, std::string_view name) {
  for (const FieldDef& f : t)
    if (f.name == name) return &f;
  return nullptr;
}

Status parse_table_attr(Match& m, const Attr& a, FieldTable t) {
  std::vector<Item> items;
  if (Status st = split_items(a, items); !st) return st;
  for (const Item& it : items) {
    const FieldDef* f = it.paren ? nullptr : find_field(t, it.name.text);
    if (!f)
      return error_at("unknown field", it.name,
                      std::string("not a field of ") + std::string(a.name.text) + "()");
    if (Status st = parse_field(m, *f, it.value); !st) return st;
  }
  return {};
}

class DpParser {
 public:
  DpParser(std::string_view text, const DpParseOptions& options) : all_{text, 1}, options_(options) {}

  Status parse(DpFlow& out, bool allow_tail) {
    std::vector<Attr> attrs;
    if (Status st = scan(all_, true, allow_tail, out, attrs); !st) return st;
    if (Status st = parse_level(attrs, 0); !st) return st;
    out.key_as_written = m_.key;
    m_.apply_mask();
    out.match = m_;
    return {};
  }

 private:
  // Splits a list of attributes. At the top level also takes a leading
  // "ufid:", statistics ("packets:1") and "actions:" (the rest of the line).
  Status scan(const Span& s, bool top, bool allow_tail, DpFlow& flow, std::vector<Attr>& attrs) {
    size_t i = 0;
    bool stats = false;
    while (true) {
      while (i < s.size() && is_delimiter(s.text[i])) ++i;
      if (i >= s.size()) return {};
      size_t start = i;
      while (i < s.size() && is_name_char(s.text[i])) ++i;
      Span name = s.sub(start, i - start);
      if (name.empty())
        return error_at("unexpected character", s.sub(start, 1), "expected an attribute name");
      if (i < s.size() && s.text[i] == '(') {
        size_t close = find_close_paren(s.text, i);
        if (close == std::string_view::npos)
          return error_at("unbalanced '('", s.sub(start), "no matching ')'");
        if (stats) return error_at("attribute", name, "flow key attributes must come before statistics");
        attrs.push_back({name, s.sub(i + 1, close - i - 1)});
        i = close + 1;
        continue;
      }
      if (i < s.size() && s.text[i] == ':' && top) {
        if (!allow_tail) return error_at("unexpected", name, "expected a flow key attribute, not 'name:'");
        ++i;
        if (name.text == "actions") {
          while (i < s.size() && (s.text[i] == ' ' || s.text[i] == '\t')) ++i;
          size_t end = s.size();
          while (end > i && (s.text[end - 1] == ' ' || s.text[end - 1] == '\t' || s.text[end - 1] == '\r' ||
                             s.text[end - 1] == '\n'))
            --end;
          // dpctl/dump-flows -m ends with ", dp-extra-info:..." after the
          // actions (format_dpif_flow()): not an action, left out.
          if (size_t x = s.text.find("dp-extra-info:", i); x != std::string_view::npos && x < end) {
            end = x;
            while (end > i && (is_delimiter(s.text[end - 1]) || s.text[end - 1] == ' ')) --end;
          }
          flow.has_actions = true;
          flow.actions = std::string(s.text.substr(i, end - i));
          flow.actions_column = s.column + i;
          return {};
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
        if (name.text == "ufid") {
          if (!attrs.empty() || !flow.ufid.empty() || stats)
            return error_at("misplaced", name, "ufid: must start the line");
          Span uuid = s.sub(vstart, i - vstart);
          if (!is_uuid(uuid.text))
            return error_at("bad ufid", uuid, "expected a UUID, xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
          flow.ufid = "ufid:" + std::string(uuid.text);
          continue;
        }
        static constexpr std::string_view kStats[] = {"packets", "bytes",     "used",         "flags",
                                                      "dp",      "offloaded", "dp-extra-info"};
        bool known = false;
        for (std::string_view k : kStats) known |= name.text == k;
        if (!known) return error_at("unknown field", name);
        stats = true;
        continue;
      }
      return error_at("unknown attribute", name, "expected 'name(...)'");
    }
  }

  static bool one_of(std::string_view n, std::initializer_list<std::string_view> names) {
    for (std::string_view x : names)
      if (n == x) return true;
    return false;
  }

  // Interprets the attributes of one level: the top level (level 0) or the
  // inside of the level-th encap().
  Status parse_level(const std::vector<Attr>& attrs, unsigned level) {
    for (size_t i = 0; i < attrs.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (attrs[i].name.text == attrs[j].name.text)
          return error_at("duplicate attribute", attrs[i].name, "each attribute may appear once per level");
      }
    }

    const Attr* eth_type = nullptr;
    const Attr* vlan = nullptr;
    const Attr* encap = nullptr;
    for (const Attr& a : attrs) {
      if (a.name.text == "vlan") vlan = &a;
      if (a.name.text == "eth_type") eth_type = &a;
      if (a.name.text == "encap") encap = &a;
    }
    // Open vSwitch leaves vlan() out of a level whose TCI is wildcarded:
    // "eth_type(0x8100),encap(...)" is a tag too.
    bool tag_level = vlan != nullptr;
    if (encap && !vlan && eth_type) {
      uint64_t v, mk;
      if (parse_masked_number(eth_type->body, 0xffff, "eth_type", v, mk) && mk == 0xffff &&
          (v == kEthTypeVlan || v == kEthTypeQinQ))
        tag_level = true;
    }
    if (tag_level && level >= kMaxVlans)
      return error_at("too many VLAN headers at", vlan ? vlan->name : encap->name, "keel matches on two");
    if (encap && !tag_level)
      return error_at("attribute", encap->name, "encap() needs vlan() or a VLAN eth_type at the same level");

    std::vector<const Attr*> l3l4;
    for (const Attr& a : attrs) {
      std::string_view n = a.name.text;
      if (one_of(n, {"recirc_id", "dp_hash", "skb_priority", "skb_mark", "in_port", "tunnel", "eth",
                     "packet_type", "ct_state", "ct_zone", "ct_mark", "ct_label"})) {
        if (level > 0) return error_at("attribute", a.name, "not allowed inside encap()");
        if (Status st = parse_metadata(a); !st) return st;
      } else if (one_of(n, {"eth_type", "vlan", "encap"})) {
        // below
      } else if (one_of(n,
                        {"ipv4", "ipv6", "arp", "tcp", "udp", "sctp", "tcp_flags", "icmp", "icmpv6", "nd"})) {
        if (tag_level) return error_at("attribute", a.name, "must be inside encap() after vlan()");
        if (Status st = parse_l3l4(a); !st) return st;
        l3l4.push_back(&a);
      } else if (one_of(n, {"ct_tuple4", "ct_tuple6", "mpls", "nsh", "nd_ext"})) {
        return error_at("unsupported attribute", a.name, "keel does not match on it");
      } else {
        return error_at("unknown attribute", a.name);
      }
    }

    if (tag_level) {
      VlanHdr& kv = m_.key.vlans[level];
      VlanHdr& mv = m_.mask.vlans[level];
      if (eth_type) {
        uint64_t v, mk;
        if (Status st = parse_masked_number(eth_type->body, 0xffff, "eth_type", v, mk); !st) return st;
        if (mk != 0 && (mk != 0xffff || (v != kEthTypeVlan && v != kEthTypeQinQ)))
          return error_at("bad VLAN eth_type", eth_type->body, "before vlan() it must be 0x8100 or 0x88a8");
        kv.tpid = hton16(static_cast<uint16_t>(v));
        mv.tpid = hton16(static_cast<uint16_t>(mk));
      }
      if (vlan) {
        if (Status st = parse_vlan(*vlan, kv, mv); !st) return st;
      }
      if (encap) {
        std::vector<Attr> inner;
        DpFlow unused;
        if (Status st = scan(encap->body, false, false, unused, inner); !st) return st;
        return parse_level(inner, level + 1);
      }
      return {};
    }

    if (eth_type) {
      uint64_t v, mk;
      if (Status st = parse_masked_number(eth_type->body, 0xffff, "eth_type", v, mk); !st) return st;
      m_.key.dl_type = hton16(static_cast<uint16_t>(v));
      m_.mask.dl_type = hton16(static_cast<uint16_t>(mk));
    }
    for (const Attr* a : l3l4)
      if (Status st = check_prerequisites(*a); !st) return st;
    return {};
  }

  Status parse_u32(const Attr& a, uint32_t& key, uint32_t& mask) {
    uint64_t v, mk;
    if (Status st = parse_masked_number(a.body, UINT32_MAX, a.name.text, v, mk); !st) return st;
    key = static_cast<uint32_t>(v);
    mask = static_cast<uint32_t>(mk);
    return {};
  }

  // Accepts a conntrack attribute only when it matches nothing ("ct_state(0/0)").
  static Status parse_wildcard_only(const Attr& a) {
    MaskedSpan ms = split_mask(a.body);
    uint64_t mk;
    if (ms.has_mask && parse_uint(ms.mask.text, mk) && mk == 0) return {};
    // A 128-bit ct_label mask of zeros is longer than parse_uint takes.
    if (ms.has_mask && ms.mask.text.size() > 2 && ms.mask.text.substr(0, 2) == "0x" &&
        ms.mask.text.find_first_not_of('0', 2) == std::string_view::npos)
      return {};
    return error_at("unsupported attribute", a.name, "keel does not match on conntrack state yet");
  }

  Status parse_metadata(const Attr& a) {
    std::string_view n = a.name.text;
    if (n == "recirc_id") return parse_u32(a, m_.key.recirc_id, m_.mask.recirc_id);
    if (n == "dp_hash") return parse_u32(a, m_.key.dp_hash, m_.mask.dp_hash);
    if (n == "skb_priority") return parse_u32(a, m_.key.skb_priority, m_.mask.skb_priority);
    if (n == "skb_mark") return parse_u32(a, m_.key.pkt_mark, m_.mask.pkt_mark);
    if (n == "in_port") return parse_in_port(a);
    if (n == "eth") return parse_table_attr(m_, a, table(kEthFields));
    if (n == "tunnel") return parse_tunnel(a);
    if (n == "packet_type") return parse_packet_type(a);
    return parse_wildcard_only(a);  // ct_*
  }

  Status parse_in_port(const Attr& a) {
    MaskedSpan ms = split_mask(a.body);
    uint64_t v;
    if (!ms.has_mask && !ms.value.empty() && !parse_uint(ms.value.text, v)) {
      std::optional<uint32_t> port;
      if (options_.port_number) port = options_.port_number(ms.value.text);
      if (!port) return error_at("unknown port", ms.value);
      m_.key.in_port = *port;
      m_.mask.in_port = UINT32_MAX;
      return {};
    }
    return parse_u32(a, m_.key.in_port, m_.mask.in_port);
  }

  Status parse_packet_type(const Attr& a) {
    // keel's packets are Ethernet: packet_type(ns=0,id=0), or wildcarded.
    std::vector<Item> items;
    if (Status st = split_items(a, items); !st) return st;
    for (const Item& it : items) {
      if (it.paren || (it.name.text != "ns" && it.name.text != "id"))
        return error_at("unknown field", it.name, "packet_type() has ns= and id=");
      uint64_t v, mk;
      if (Status st = parse_masked_number(it.value, 0xffff, it.name.text, v, mk); !st) return st;
      if (v & mk)
        return error_at("unsupported packet type", it.value, "keel handles Ethernet (ns=0,id=0) only");
    }
    return {};
  }

  Status parse_tunnel(const Attr& a) {
    std::vector<Item> items;
    if (Status st = split_items(a, items); !st) return st;
    for (const Item& it : items) {
      if (it.paren && it.name.text == "geneve") {
        if (Status st = parse_geneve(it.value); !st) return st;
        continue;
      }
      if (it.paren) {
        if (it.name.text != "flags")
          return error_at("unsupported tunnel field", it.name, "keel matches tunnel flags() and geneve() options");
        uint32_t f, mk;
        if (Status st = parse_flags(it.value, tun_flag_name, kTunFlagsMax, "tunnel flags", f, mk); !st)
          return st;
        m_.key.tun_flags = static_cast<uint16_t>(f);
        m_.mask.tun_flags = static_cast<uint16_t>(mk);
        continue;
      }
      const FieldDef* f = find_field(table(kTunnelFields), it.name.text);
      if (!f) return error_at("unknown field", it.name, "not a field of tunnel()");
      if (Status st = parse_field(m_, *f, it.value); !st) return st;
    }
    return {};
  }

  // geneve({class=C[/M],type=T[/M],len=L[/M],0xDATA[/0xMASK]}...): the
  // raw options (tun_metadata.h) as scan_geneve() reads them, except that
  // an option without data has its data wildcarded (so that what
  // format_geneve_opts() prints reads back the same).
  Status parse_geneve(const Span& v) {
    uint8_t key[kGeneveOptsMax] = {}, mask[kGeneveOptsMax] = {};
    size_t n = 0, i = 0;
    const std::string_view t = v.text;
    auto bad = [&](std::string_view why) { return error_at("bad geneve option", v, why); };
    while (i < t.size()) {
      if (t[i] != '{') return bad("expected {class=..,type=..,len=..[,0x..]}");
      size_t close = t.find('}', i);
      if (close == std::string_view::npos) return bad("missing '}'");
      if (n + 4 > kGeneveOptsMax) return bad("the options exceed 252 bytes");
      std::string_view body = t.substr(i + 1, close - i - 1);
      i = close + 1;
      uint8_t* k = key + n;
      uint8_t* m = mask + n;
      size_t data_len = 0;
      bool have_data = false;
      while (!body.empty()) {
        size_t comma = body.find(',');
        std::string_view part = body.substr(0, comma);
        body = comma == std::string_view::npos ? std::string_view{} : body.substr(comma + 1);
        size_t eq = part.find('=');
        if (eq == std::string_view::npos) {
          // The data, last: 0xVALUE[/0xMASK] in data_len bytes.
          if (have_data || !body.empty()) return bad("the option data comes last, once");
          have_data = true;
          size_t slash = part.find('/');
          std::span<uint8_t> kd(k + 4, data_len), md(m + 4, data_len);
          if (Status st = parse_tun_metadata_value(part.substr(0, slash), kd); !st) return bad(st.message());
          if (slash == std::string_view::npos) {
            std::fill(md.begin(), md.end(), uint8_t{0xff});
          } else if (Status st = parse_tun_metadata_value(part.substr(slash + 1), md); !st) {
            return bad(st.message());
          }
          continue;
        }
        std::string_view name = part.substr(0, eq), val = part.substr(eq + 1);
        size_t slash = val.find('/');
        uint64_t x = 0, xm = 0;
        if (!parse_uint(val.substr(0, slash), x) ||
            (slash != std::string_view::npos && !parse_uint(val.substr(slash + 1), xm)))
          return bad("bad number in '" + std::string(part) + "'");
        if (name == "class") {
          if (x > 0xffff || xm > 0xffff) return bad("class is 16 bits");
          if (slash == std::string_view::npos) xm = 0xffff;
          k[0] = static_cast<uint8_t>(x >> 8), k[1] = static_cast<uint8_t>(x);
          m[0] = static_cast<uint8_t>(xm >> 8), m[1] = static_cast<uint8_t>(xm);
        } else if (name == "type") {
          if (x > 0xff || xm > 0xff) return bad("type is 8 bits");
          k[2] = static_cast<uint8_t>(x);
          m[2] = static_cast<uint8_t>(slash == std::string_view::npos ? 0xff : xm);
        } else if (name == "len") {
          if (x > 124 || x % 4) return bad("len is a multiple of 4, at most 124");
          if (n + 4 + x > kGeneveOptsMax) return bad("the options exceed 252 bytes");
          // The structure of the options follows the lengths: only an exact
          // len, or a wildcarded one of an option without data (how the
          // verbose form prints `{class=0xffff}`: len=0/0).
          if (slash != std::string_view::npos && (xm & 0x1f) != 0x1f && !(x == 0 && (xm & 0x1f) == 0))
            return bad("the len mask must be exact");
          data_len = x;
          k[3] = static_cast<uint8_t>(x / 4);
          // The length is 5 bits of its byte (the other 3 are reserved flags).
          m[3] = static_cast<uint8_t>((slash == std::string_view::npos ? 0xff : xm) & 0x1f);
        } else {
          return bad("unknown field '" + std::string(name) + "' (class, type, len, then the data)");
        }
      }
      n += 4 + data_len;
    }
    std::memcpy(m_.key.tun_opts, key, sizeof key);
    std::memcpy(m_.mask.tun_opts, mask, sizeof mask);
    m_.key.tun_opt_len = static_cast<uint32_t>(n);
    m_.mask.tun_opt_len = kTunOptLenMaskUdpif;
    return {};
  }

  static Status parse_vlan(const Attr& a, VlanHdr& key, VlanHdr& mask) {
    // Like Open vSwitch: the CFI ("802.1Q header present") bit starts as
    // matched and set; vid=, pcp= and cfi= each replace their bits.
    uint16_t k = kVlanCfi, mk = kVlanCfi;
    std::vector<Item> items;
    if (Status st = split_items(a, items); !st) return st;
    for (const Item& it : items) {
      unsigned bits, shift;
      if (it.paren) return error_at("unknown field", it.name, "vlan() has vid=, pcp= and cfi=");
      if (it.name.text == "vid")
        bits = 12, shift = 0;
      else if (it.name.text == "pcp")
        bits = 3, shift = 13;
      else if (it.name.text == "cfi")
        bits = 1, shift = 12;
      else
        return error_at("unknown field", it.name, "vlan() has vid=, pcp= and cfi=");
      uint64_t max = (uint64_t{1} << bits) - 1, v, fm;
      if (Status st = parse_masked_number(it.value, max, it.name.text, v, fm); !st) return st;
      uint16_t field = static_cast<uint16_t>(max << shift);
      k = static_cast<uint16_t>((k & ~field) | (v << shift));
      mk = static_cast<uint16_t>((mk & ~field) | (fm << shift));
    }
    key.tci = hton16(k);
    mask.tci = hton16(mk);
    return {};
  }

  Status parse_l3l4(const Attr& a) {
    std::string_view n = a.name.text;
    if (n == "ipv4") return parse_table_attr(m_, a, table(kIpv4Fields));
    if (n == "ipv6") return parse_table_attr(m_, a, table(kIpv6Fields));
    if (n == "arp") return parse_table_attr(m_, a, table(kArpFields));
    if (n == "tcp" || n == "udp" || n == "sctp") return parse_table_attr(m_, a, table(kPortFields));
    if (n == "icmp" || n == "icmpv6") return parse_table_attr(m_, a, table(kIcmpFields));
    if (n == "nd") return parse_table_attr(m_, a, table(kNdFields));
    // tcp_flags
    uint32_t f, mk;
    if (Status st = parse_flags(a.body, tcp_flag_name, kTcpFlagsMax, "tcp_flags", f, mk); !st) return st;
    m_.key.tcp_flags = hton16(static_cast<uint16_t>(f));
    m_.mask.tcp_flags = hton16(static_cast<uint16_t>(mk));
    return {};
  }

  // As odp_flow_key_to_flow(), a prerequisite is the value as written, its
  // mask aside (`ipv4(proto=17/0),udp(src=1024/0)` from -m reads): m_.key is
  // not masked yet. But a field of the attribute that is matched needs its
  // prerequisite matched exactly too, or keel's match would mean something
  // else than the text.
  bool proto_written(uint8_t p) const { return is_ip_any(m_) && m_.key.nw_proto == p; }
  bool nd_written() const {
    const uint8_t type = ntoh16(m_.key.tp_src) & 0xff;
    return dl_is(m_, kEthTypeIpv6) && proto_written(kProtoIcmpv6) &&
           (type == kNdSolicit || type == kNdAdvert) && (ntoh16(m_.key.tp_dst) & 0xff) == 0;
  }
  bool attr_matches_something(std::string_view n) const {
    FieldTable t = table(kPortFields);
    if (n == "icmp" || n == "icmpv6")
      t = table(kIcmpFields);
    else if (n == "nd")
      t = table(kNdFields);
    else if (n == "tcp_flags")
      return m_.mask.tcp_flags != 0;
    return !table_wildcarded(m_, t);
  }

  Status check_prerequisites(const Attr& a) const {
    std::string_view n = a.name.text;
    auto need = [&](bool ok, const char* what) -> Status {
      if (ok) return {};
      return error_at("attribute", a.name, what);
    };
    const bool l4 = one_of(n, {"tcp", "tcp_flags", "udp", "sctp", "icmp", "icmpv6", "nd"});
    if (l4 && attr_matches_something(n)) {
      if (m_.mask.nw_proto != 0xff)
        return error_at("attribute", a.name, "matching an L4 field needs ipv4/ipv6 proto= matched exactly");
      if (n == "nd" && (ntoh16(m_.mask.tp_src) & 0xff) != 0xff)
        return error_at("attribute", a.name, "matching nd() needs icmpv6(type=) matched exactly");
    }
    if (n == "ipv4") return need(dl_is(m_, kEthTypeIp), "ipv4() needs eth_type(0x0800)");
    if (n == "ipv6") return need(dl_is(m_, kEthTypeIpv6), "ipv6() needs eth_type(0x86dd)");
    if (n == "arp")
      return need(dl_is(m_, kEthTypeArp) || dl_is(m_, kEthTypeRarp),
                  "arp() needs eth_type(0x0806) or eth_type(0x8035)");
    if (later_fragment(m_))
      return error_at("attribute", a.name, "a later fragment (frag=later) has no L4 header");
    if (n == "tcp" || n == "tcp_flags")
      return need(proto_written(kProtoTcp), "needs ipv4(proto=6) or ipv6(proto=6)");
    if (n == "udp") return need(proto_written(kProtoUdp), "udp() needs ipv4(proto=17) or ipv6(proto=17)");
    if (n == "sctp")
      return need(proto_written(kProtoSctp), "sctp() needs ipv4(proto=132) or ipv6(proto=132)");
    if (n == "icmp")
      return need(dl_is(m_, kEthTypeIp) && proto_written(kProtoIcmp), "icmp() needs ipv4(proto=1)");
    if (n == "icmpv6")
      return need(dl_is(m_, kEthTypeIpv6) && proto_written(kProtoIcmpv6), "icmpv6() needs ipv6(proto=58)");
    return need(nd_written(), "nd() needs icmpv6(type=135,code=0) or icmpv6(type=136,code=0)");
  }

  Span all_;
  const DpParseOptions& options_;
  Match m_;
};

// ======================= printer =======================

class DpPrinter {
 public:
  DpPrinter(const Match& m, const DpFormatOptions& o) : m_(m), o_(o) {}

  std::string print() {
    put_u32("skb_priority", m_.key.skb_priority, m_.mask.skb_priority);
    put_tunnel();
    put_u32("skb_mark", m_.key.pkt_mark, m_.mask.pkt_mark);
    if (o_.verbose) {
      // keel keys no conntrack state: always wildcarded, printed where
      // odp_flow_format() puts them.
      attr("ct_state", "0/0");
      attr("ct_zone", "0/0");
      attr("ct_mark", "0/0");
      attr("ct_label", "0/0");
    }
    put_u32("recirc_id", m_.key.recirc_id, m_.mask.recirc_id);
    put_u32("dp_hash", m_.key.dp_hash, m_.mask.dp_hash);
    put_in_port();
    attr("packet_type", "ns=0,id=0");  // keel's packets are Ethernet
    put_table_attr("eth", table(kEthFields), false);
    if (o_.ovs_vlan_limit) {
      put_level_ovs(0);
    } else {
      unsigned levels = vlan_level_present(m_, 1) ? 2 : vlan_level_present(m_, 0) ? 1 : 0;
      put_level(0, levels);
    }
    return std::move(out_);
  }

 private:
  void attr(std::string_view name, std::string_view body) {
    if (!out_.empty()) out_ += ',';
    out_ += name;
    out_ += '(';
    out_ += body;
    out_ += ')';
  }

  void put_u32(std::string_view name, uint32_t v, uint32_t mk) {
    if (!mk && !o_.verbose) return;
    std::string b;
    put_hex_alt(b, v);
    if (mk != UINT32_MAX) b += '/', put_hex_alt(b, mk);
    attr(name, b);
  }

  void put_in_port() {
    uint32_t v = m_.key.in_port, mk = m_.mask.in_port;
    if (!mk && !o_.verbose) return;
    std::string b;
    std::optional<std::string> name;
    if (mk == UINT32_MAX && o_.port_name) name = o_.port_name(v);
    if (name) {
      b = *name;
    } else {
      put_dec(b, v);
      if (mk != UINT32_MAX) b += '/', put_hex_alt(b, mk);
    }
    attr("in_port", b);
  }

  void put_table_attr(std::string_view name, FieldTable t, bool always) {
    if (!always && !o_.verbose && table_wildcarded(m_, t)) return;
    Body b;
    for (const FieldDef& f : t) put_field(b, m_, f, o_.verbose);
    attr(name, b.s);
  }

  void put_tunnel() {
    bool v6 = !bytes_zero(m_.mask, offsetof(FlowKey, tun_ipv6_src), 32);
    if (table_wildcarded(m_, table(kTunnelFields)) && m_.mask.tun_flags == 0 && m_.mask.tun_opt_len == 0) return;
    Body b;
    for (const FieldDef& f : kTunnelFields) {
      // Verbose shows the fields of the tunnel's own address family only.
      bool other_family = (f.kind == Kind::ipv4 && v6) || (f.kind == Kind::ipv6 && !v6);
      put_field(b, m_, f, o_.verbose && !other_family);
    }
    if (m_.mask.tun_opt_len) {
      b.sep();
      b.s += "geneve(";
      put_geneve(b.s);
      b.s += ')';
    }
    if (m_.mask.tun_flags || o_.verbose) {
      b.sep();
      b.s += "flags(";
      put_flags(b.s, tun_flag_name, m_.key.tun_flags, m_.mask.tun_flags, kTunFlagsMax);
      b.s += ')';
    }
    attr("tunnel", b.s);
  }

  // format_geneve_opts(): per option {class=,type=,len=,data[/mask]}, a
  // field left out when its mask is zero (unless verbose).
  void put_geneve(std::string& o) {
    const uint8_t* k = m_.key.tun_opts;
    const uint8_t* m = m_.mask.tun_opts;
    size_t len = std::min<size_t>(m_.key.tun_opt_len, kGeneveOptsMax);
    size_t off = 0;
    while (off < len) {
      if (len - off < 4) {
        o += "opt len " + std::to_string(len - off) + " less than minimum 4";
        return;
      }
      size_t data = size_t{k[off + 3] & 0x1fu} * 4;
      if (4 + data > len - off) {
        o += "opt len " + std::to_string(4 + data) + " greater than remaining " + std::to_string(len - off);
        return;
      }
      Body b;
      uint16_t cls = static_cast<uint16_t>(k[off] << 8 | k[off + 1]);
      uint16_t cls_m = static_cast<uint16_t>(m[off] << 8 | m[off + 1]);
      if (cls_m || o_.verbose) {
        b.sep();
        b.s += "class=";
        put_hex_alt(b.s, cls);
        if (cls_m != 0xffff) b.s += '/', put_hex_alt(b.s, cls_m);
      }
      if (m[off + 2] || o_.verbose) {
        b.sep();
        b.s += "type=";
        put_hex_alt(b.s, k[off + 2]);
        if (m[off + 2] != 0xff) b.s += '/', put_hex_alt(b.s, m[off + 2]);
      }
      uint8_t len_m = (m[off + 3] & 0x1f) == 0x1f ? 0xff : m[off + 3];
      if (len_m || o_.verbose) {
        b.sep();
        b.s += "len=";
        put_dec(b.s, data);
        if (len_m != 0xff) b.s += '/', put_hex_alt(b.s, len_m);
      }
      std::span<const uint8_t> kd(k + off + 4, data), md(m + off + 4, data);
      bool md_zero = std::all_of(md.begin(), md.end(), [](uint8_t x) { return x == 0; });
      if (data && (o_.verbose || !md_zero)) {
        b.sep();
        put_tun_metadata_hex(b.s, kd);
        if (!std::all_of(md.begin(), md.end(), [](uint8_t x) { return x == 0xff; }))
          b.s += '/', put_tun_metadata_hex(b.s, md);
      }
      o += '{';
      o += b.s;
      o += '}';
      off += 4 + data;
    }
  }

  void put_eth_type(be16 v, be16 mk) {
    if (!mk && !o_.verbose) return;
    std::string b;
    put_hex(b, ntoh16(v), 4);
    if (mk != 0xffff) b += '/', put_hex(b, ntoh16(mk), 4);
    attr("eth_type", b);
  }

  // format_vlan_tci(), plus "cfi=0/0" when the CFI bit itself is wildcarded
  // (Open vSwitch never produces that; printing "cfi=0" would not read back).
  void put_vlan(const VlanHdr& k, const VlanHdr& mk) {
    uint16_t tci = ntoh16(k.tci), mask = ntoh16(mk.tci);
    Body b;
    uint16_t vid = tci & kVlanVidMask, vmask = mask & kVlanVidMask;
    unsigned pcp = tci >> 13, pmask = mask >> 13;
    if (o_.verbose || vid || vmask) {
      b.sep();
      b.s += "vid=";
      put_dec(b.s, vid);
      if (vmask != kVlanVidMask) b.s += '/', put_hex(b.s, vmask);
    }
    if (o_.verbose || pcp || pmask) {
      b.sep();
      b.s += "pcp=";
      put_dec(b.s, pcp);
      if (pmask != 7) b.s += '/', put_hex(b.s, pmask);
    }
    if (!(mask & kVlanCfi)) {
      b.sep();
      b.s += "cfi=0/0";
    } else if (!(tci & kVlanCfi)) {
      b.sep();
      b.s += "cfi=0";
    }
    attr("vlan", b.s);
  }

  void put_level(unsigned level, unsigned levels) {
    if (level < levels) {
      put_eth_type(m_.key.vlans[level].tpid, m_.mask.vlans[level].tpid);
      put_vlan(m_.key.vlans[level], m_.mask.vlans[level]);
      std::string outer = std::move(out_);
      out_.clear();
      put_level(level + 1, levels);
      std::string inner = std::move(out_);
      out_ = std::move(outer);
      attr("encap", inner);
      return;
    }
    put_l3();
  }

  // Open vSwitch's datapath view (odp_flow_key_from_flow() under its
  // vlan-limit): a level per tag the packet had (a TPID or CFI in the key), its
  // TPID as an exact eth_type and vlan() only when some TCI bit is matched;
  // an untagged packet has no vlan() at all (the megaflow's "no tag" mask is
  // implied, as in a netlink key); a tag cut short within the limit (the
  // EtherType a TPID, no tag keyed) is eth_type(TPID),vlan(...),encap().
  void put_level_ovs(unsigned level) {
    if (level < kMaxVlans) {
      const VlanHdr& k = m_.key.vlans[level];
      const VlanHdr& mk = m_.mask.vlans[level];
      // A megaflow's key is masked: its TPID (exact for every tag, see
      // ofproto/udpif.cpp) says a tag is there when no TCI bit is matched.
      const bool tag = k.tpid != 0 || (k.tci & hton16(kVlanCfi)) != 0;
      const bool cut_short = !tag && level < o_.ovs_vlan_limit && eth_type_is_vlan(m_.key.dl_type);
      if (tag || cut_short) {
        put_eth_type(tag ? k.tpid : m_.key.dl_type, 0xffff);
        if (mk.tci || o_.verbose) put_vlan(k, mk);
        std::string outer = std::move(out_);
        out_.clear();
        if (tag) put_level_ovs(level + 1);
        std::string inner = std::move(out_);
        out_ = std::move(outer);
        attr("encap", inner);
        return;
      }
    }
    put_l3();
  }

  // Open vSwitch's is_nd() on the flow (the key's values, matched or not).
  bool key_is_nd() const {
    const uint8_t type = ntoh16(m_.key.tp_src) & 0xff;
    return (type == kNdSolicit || type == kNdAdvert) && (ntoh16(m_.key.tp_dst) & 0xff) == 0;
  }

  static bool eth_type_is_vlan(be16 t) { return t == hton16(kEthTypeVlan) || t == hton16(kEthTypeQinQ); }

  // The innermost EtherType and what follows it.
  void put_l3() {
    put_eth_type(m_.key.dl_type, m_.mask.dl_type);
    if (dl_is(m_, kEthTypeIp))
      put_table_attr("ipv4", table(kIpv4Fields), false);
    else if (dl_is(m_, kEthTypeIpv6))
      put_table_attr("ipv6", table(kIpv6Fields), false);
    else if (dl_is(m_, kEthTypeArp) || dl_is(m_, kEthTypeRarp))
      put_table_attr("arp", table(kArpFields), false);
    // As odp_flow_key_from_flow(): the L4 attribute follows the key's
    // protocol, matched or not (a packet's key under a mask that wildcards
    // nw_proto still shows `udp(src=1024/0,dst=4000/0)` with -m).
    if (!is_ip_any(m_) || later_fragment(m_)) return;
    switch (m_.key.nw_proto) {
      case kProtoTcp:
        put_table_attr("tcp", table(kPortFields), false);
        if (m_.mask.tcp_flags) {
          std::string b;
          put_flags(b, tcp_flag_name, ntoh16(m_.key.tcp_flags), ntoh16(m_.mask.tcp_flags), kTcpFlagsMax);
          attr("tcp_flags", b);
        } else if (o_.verbose) {
          attr("tcp_flags", "0/0");  // format_flags_masked() of a zero mask, whatever the value
        }
        break;
      case kProtoUdp:
        put_table_attr("udp", table(kPortFields), false);
        break;
      case kProtoSctp:
        put_table_attr("sctp", table(kPortFields), false);
        break;
      case kProtoIcmp:
        if (dl_is(m_, kEthTypeIp)) put_table_attr("icmp", table(kIcmpFields), false);
        break;
      case kProtoIcmpv6:
        if (!dl_is(m_, kEthTypeIpv6)) break;
        put_table_attr("icmpv6", table(kIcmpFields), false);
        if (key_is_nd()) put_table_attr("nd", table(kNdFields), false);
        break;
      default:
        break;
    }
  }

  const Match& m_;
  const DpFormatOptions& o_;
  std::string out_;
};

}  // namespace

Result<DpFlow> parse_dp_flow(std::string_view text, const DpParseOptions& options) {
  DpFlow flow;
  DpParser p(text, options);
  if (Status st = p.parse(flow, true); !st) return st;
  return flow;
}

Result<Match> parse_dp_match(std::string_view text, const DpParseOptions& options) {
  DpFlow flow;
  DpParser p(text, options);
  if (Status st = p.parse(flow, false); !st) return st;
  return flow.match;
}

std::string format_dp_match(const Match& match, const DpFormatOptions& options) {
  return DpPrinter(match, options).print();
}

std::string format_dp_flow(const DpFlow& flow, const DpFormatOptions& options) {
  std::string s;
  if (!flow.ufid.empty()) s = flow.ufid + " ";
  s += format_dp_match(flow.match, options);
  if (flow.has_actions) {
    s += ", actions:";
    s += flow.actions;
  }
  return s;
}

}  // namespace keel::flow

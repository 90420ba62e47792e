// OpenFlow actions: see of_actions.h.
//
// Layout of this file: the tokenizer (ofputil_parse_key_value()'s rules:
// `key`, `key:value`, `key=value`, `key(value)`, separated by commas or
// white space), ports and numbers, the per-action parsers, set_field/load
// canonicalization into OpenFlow 1.0 actions and NXM reg_loads, the
// printer, and the consistency check.
#include "flow/of_actions.h"

#include <cstring>
#include <type_traits>

#include "flow/flow_text.h"
#include "flow/tun_metadata.h"

namespace keel::flow {
namespace {

using namespace text;

constexpr uint16_t kCfi = 0x1000;

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

struct ReservedPort {
  std::string_view name;
  uint32_t number;
};
// Printed names first (ofputil_port_get_reserved_name()); NONE is read only.
constexpr ReservedPort kReservedPorts[] = {
    {"IN_PORT", kOfppInPort}, {"TABLE", kOfppTable}, {"NORMAL", kOfppNormal},
    {"FLOOD", kOfppFlood},    {"ALL", kOfppAll},     {"CONTROLLER", kOfppController},
    {"LOCAL", kOfppLocal},    {"ANY", kOfppNone},    {"UNSET", 0xfff7},
    {"NONE", kOfppNone},
};

struct ReasonName {
  std::string_view name;
  OfPacketInReason reason;
};
constexpr ReasonName kReasons[] = {
    {"no_match", OfPacketInReason::no_match},
    {"action", OfPacketInReason::action},
    {"invalid_ttl", OfPacketInReason::invalid_ttl},
    {"action_set", OfPacketInReason::action_set},
    {"group", OfPacketInReason::group},
    {"packet_out", OfPacketInReason::packet_out},
};

// Open vSwitch actions keel does not implement: refused by name.
constexpr std::string_view kUnsupported[] = {
    "enqueue",      "set_queue",    "pop_queue",       "group",         "ct",           "ct_clear",
    "nat",          "learn",        "conjunction",     "multipath",     "bundle_load",
    "output_reg",   "output_trunc", "sample",          "clone",         "exit",         "fin_timeout",
    "push_mpls",    "pop_mpls",     "set_mpls_label",  "set_mpls_tc",   "set_mpls_ttl", "dec_mpls_ttl",
    "meter",        "stack_push",   "stack_pop",       "encap",         "decap",        "check_pkt_larger",
    "delete_field", "set_vlan_vid", "set_vlan_pcp",    "set_nw_ttl",    "controller2",  "debug_recirc",
    "debug_slow",   "dec_nsh_ttl",  "set_l4_src_port", "apply_actions",
};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// One `key[:value]` or `key(value)` of the list.
struct Item {
  Span key;
  Span value;
  bool has_value = false;  // ':', '=' or '(' followed the key
  bool paren = false;      // key(value)
};

Status tokenize(const Span& s, std::vector<Item>& out) {
  size_t i = 0;
  while (true) {
    while (i < s.size() && is_delimiter(s.text[i])) ++i;
    if (i >= s.size()) return {};
    size_t start = i;
    while (i < s.size() && !is_delimiter(s.text[i]) && s.text[i] != ':' && s.text[i] != '=' &&
           s.text[i] != '(' && s.text[i] != ')')
      ++i;
    Item it;
    it.key = s.sub(start, i - start);
    if (i < s.size() && s.text[i] == ')') return error_at("unmatched parenthesis", s.sub(i, 1));
    if (it.key.empty()) return error_at("missing action name before", s.sub(i, 1));
    if (i < s.size() && s.text[i] == '(') {
      size_t close = find_close_paren(s.text, i);
      if (close == std::string_view::npos)
        return error_at("unbalanced parenthesis", s.sub(i), "no matching ')'");
      it.value = s.sub(i + 1, close - i - 1);
      it.has_value = it.paren = true;
      i = close + 1;
      if (i < s.size() && !is_delimiter(s.text[i]))
        return error_at("unexpected text after ')'", s.sub(i), "separate actions with ','");
    } else if (i < s.size() && (s.text[i] == ':' || s.text[i] == '=')) {
      ++i;
      size_t vstart = i;
      int depth = 0;
      size_t open_at = 0;
      while (i < s.size() && (depth > 0 || !is_delimiter(s.text[i]))) {
        if (s.text[i] == '(') {
          if (depth++ == 0) open_at = i;
        } else if (s.text[i] == ')') {
          if (depth == 0) return error_at("unmatched parenthesis", s.sub(i, 1));
          --depth;
        }
        ++i;
      }
      if (depth) return error_at("unbalanced parenthesis", s.sub(open_at), "no matching ')'");
      it.value = s.sub(vstart, i - vstart);
      it.has_value = true;
    } else {
      it.value = s.sub(i, 0);
    }
    out.push_back(it);
  }
}

std::string_view reserved_port_name(uint32_t port) {
  for (const ReservedPort& r : kReservedPorts)
    if (r.number == port) return r.name;
  return {};
}

void put_port(std::string& out, uint32_t port, const OfFormatOptions& o) {
  if (std::string_view n = reserved_port_name(port); !n.empty()) {
    out += n;
    return;
  }
  if (o.port_name) {
    if (std::optional<std::string> n = o.port_name(port)) {
      out += *n;
      return;
    }
  }
  put_dec(out, port);
}

// Is `s` a port (a number, reserved name or known port name)? Numbers are
// OpenFlow 1.0's 16 bits or OpenFlow 1.1+'s 0xffffff00..0xffffffff.
enum class PortLookup { ok, not_a_port, out_of_range };
PortLookup lookup_port(std::string_view s, const OfParseOptions& o, uint32_t& port) {
  if (s.empty()) return PortLookup::not_a_port;
  uint64_t v;
  if (parse_uint(s, v)) {
    if (v >= 0xffffff00 && v <= 0xffffffff) v -= 0xffff0000;
    if (v > 0xffff) return PortLookup::out_of_range;
    port = static_cast<uint32_t>(v);
    return PortLookup::ok;
  }
  bool digits = true;
  for (char c : s) digits &= c >= '0' && c <= '9';
  if (digits) return PortLookup::out_of_range;
  for (const ReservedPort& r : kReservedPorts) {
    if (iequals(s, r.name)) {
      port = r.number;
      return PortLookup::ok;
    }
  }
  if (o.port_number) {
    if (std::optional<uint32_t> p = o.port_number(s)) {
      port = *p;
      return PortLookup::ok;
    }
  }
  return PortLookup::not_a_port;
}

Status parse_port(const Span& s, const OfParseOptions& o, std::string_view what, uint32_t& port) {
  switch (lookup_port(s.text, o, port)) {
    case PortLookup::ok:
      return {};
    case PortLookup::out_of_range:
      return error_at("out-of-range port", s, "a port is 0..65535 or 0xffffff00..0xffffffff");
    case PortLookup::not_a_port:
      break;
  }
  return error_at(what, s);
}

Status parse_table(const Span& s, uint8_t& table) {
  uint64_t v;
  if (Status st = parse_number(s, 254, "table", v); !st) return st;
  table = static_cast<uint8_t>(v);
  return {};
}

OfValue value_from_bytes(const uint8_t* p, size_t n) {
  OfValue v;
  std::memcpy(v.b.data() + 16 - n, p, n);
  return v;
}

// "0x..." up to 128 bits or a decimal up to 64 bits (parse_int_string()).
bool parse_wide_uint(std::string_view s, OfValue& out) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    std::string_view d = s.substr(2);
    while (d.size() > 1 && d[0] == '0') d.remove_prefix(1);
    if (d.empty() || d.size() > 32) return false;
    OfValue v;
    for (char c : d) {
      unsigned digit;
      if (c >= '0' && c <= '9')
        digit = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        digit = static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        digit = static_cast<unsigned>(c - 'A' + 10);
      else
        return false;
      v = (v << 4) | OfValue::from_u64(digit);
    }
    out = v;
    return true;
  }
  uint64_t v;
  if (!parse_uint(s, v)) return false;
  out = OfValue::from_u64(v);
  return true;
}

// Appends NXM reg_loads for `value` under `mask` (field bits), one per
// contiguous run of mask bits and at most 64 bits each, lowest first
// (next_load_segment() of Open vSwitch).
bool is_tun_metadata(OfFieldId id) {
  return id >= OfFieldId::tun_metadata0 && id <= OfFieldId::tun_metadata7;
}

void append_loads(OfFieldId id, const OfValue& value, const OfValue& mask, OfActions& out) {
  const unsigned n = of_field(id).n_bits;
  unsigned start = 0;
  while (start < n) {
    unsigned ofs = start;
    while (ofs < n && !mask.bit(ofs)) ++ofs;
    if (ofs >= n) break;
    unsigned end = ofs + 1;
    while (end < n && end < ofs + 64 && mask.bit(end)) ++end;
    OfLoad l;
    l.dst = {id, static_cast<uint8_t>(ofs), static_cast<uint8_t>(end - ofs)};
    l.value = ((value >> ofs) & OfValue::ones(0, end - ofs)).low64();
    l.continues = start > 0 && is_tun_metadata(id);
    out.push_back(l);
    start = end;
  }
}

EthAddr mac_of(const OfValue& v) {
  EthAddr m;
  std::memcpy(m.b, v.b.data() + 10, 6);
  return m;
}
be32 be32_of(const OfValue& v) {
  be32 a;
  std::memcpy(&a, v.b.data() + 12, 4);
  return a;
}

// set_field of `value`/`mask` into a field, as dump-flows shows it.
void append_set_field(OfFieldId id, OfValue value, OfValue mask, OfActions& out) {
  const OfFieldInfo& f = of_field(id);
  OfValue valid = field_valid_bits(id);
  mask = mask & OfValue::ones(0, f.n_bits);
  value = value & mask;
  if ((mask & valid) == valid) {
    uint64_t v = value.low64();
    switch (id) {
      case OfFieldId::eth_src:
        out.push_back(OfSetEthSrc{mac_of(value)});
        return;
      case OfFieldId::eth_dst:
        out.push_back(OfSetEthDst{mac_of(value)});
        return;
      case OfFieldId::ip_src:
        out.push_back(OfSetIpv4Src{be32_of(value), f.prereq});
        return;
      case OfFieldId::ip_dst:
        out.push_back(OfSetIpv4Dst{be32_of(value), f.prereq});
        return;
      case OfFieldId::nw_tos:
        out.push_back(OfSetIpDscp{static_cast<uint8_t>(v & kIpDscpMask), f.prereq});
        return;
      case OfFieldId::ip_dscp:
        out.push_back(OfSetIpDscp{static_cast<uint8_t>((v << 2) & kIpDscpMask), f.prereq});
        return;
      case OfFieldId::tcp_src:
      case OfFieldId::udp_src:
        out.push_back(OfSetL4Src{static_cast<uint16_t>(v), f.prereq});
        return;
      case OfFieldId::tcp_dst:
      case OfFieldId::udp_dst:
        out.push_back(OfSetL4Dst{static_cast<uint16_t>(v), f.prereq});
        return;
      case OfFieldId::vlan_vid:  // OVS's set_field check: vlan_vid needs a tag
        out.push_back(OfSetVlanVid{static_cast<uint16_t>(v & kVlanVidMask), OfPrereq::vlan});
        return;
      case OfFieldId::vlan_pcp:
        out.push_back(OfSetVlanPcp{static_cast<uint8_t>(v & 7), f.prereq});
        return;
      case OfFieldId::vlan_tci:
        if (v & kCfi) {
          OfSetVlanVid vid{static_cast<uint16_t>(v & kVlanVidMask)};
          vid.from_tci = true;
          out.push_back(vid);
          out.push_back(OfSetVlanPcp{static_cast<uint8_t>(v >> 13)});
        } else {
          out.push_back(OfStripVlan{true});  // from_tci
        }
        return;
      default:
        break;
    }
  }
  append_loads(id, value, mask, out);
}

// ======================= parser =======================

// OpenFlow 1.1+'s instruction order (ovs_instruction_type): plain actions are
// the apply-actions instruction.
constexpr std::string_view kInstructions[] = {"apply_actions", "clear_actions", "write_actions",
                                              "write_metadata", "goto_table"};
int instruction_rank(std::string_view key) {
  for (int i = 1; i < 5; ++i)
    if (iequals(key, kInstructions[i])) return i;
  return 0;
}

// action_set_classify() != ACTION_SLOT_INVALID.
bool allowed_in_action_set(const OfAction& a) {
  return !std::holds_alternative<OfController>(a) && !std::holds_alternative<OfOutputReg>(a) &&
         !std::holds_alternative<OfBundle>(a) &&
         !std::holds_alternative<OfGotoTable>(a) &&
         !std::holds_alternative<OfNote>(a) && !std::holds_alternative<OfWriteActions>(a) &&
         !std::holds_alternative<OfClearActions>(a) && !std::holds_alternative<OfWriteMetadata>(a);
}

class ActionParser {
 public:
  ActionParser(const OfParseOptions& o) : o_(o) {}

  // `nested`: the list inside write_actions(...): no instructions, and only
  // actions an action set may hold.
  Status parse(const Span& all, OfActions& out, bool nested = false) {
    std::vector<Item> items;
    if (Status st = tokenize(all, items); !st) return st;
    const Item* drop = nullptr;
    int rank = 0;  // the instruction we are in (kInstructions)
    for (const Item& it : items) {
      if (iequals(it.key.text, "drop")) {
        drop = &it;
        continue;
      }
      const int r = instruction_rank(it.key.text);
      if (nested && r != 0)
        return error_at("instruction not allowed in write_actions", it.key,
                        std::string(kInstructions[r]) + " is an instruction, not an action");
      // ofpacts_verify(): instructions in OpenFlow 1.1's order, each once.
      if (r < rank) {
        if (r == 0 && rank == 4)
          return error_at("action after goto_table", it.key, "goto_table must be the last action");
        return error_at(
            "invalid instruction ordering at", it.key,
            std::string(kInstructions[r]) + " must appear before " + std::string(kInstructions[rank]));
      }
      if (r == rank && r != 0)
        return error_at("duplicate instruction", it.key,
                        std::string(kInstructions[r]) + " may appear only once");
      rank = r;
      const size_t before = out.size();
      if (Status st = parse_item(it, out); !st) return st;
      if (nested)
        for (size_t i = before; i < out.size(); ++i)
          if (!allowed_in_action_set(out[i]))
            return error_at("disallowed action in action set", it.key,
                            "write_actions takes output, resubmit, set and load actions, move, "
                            "push_vlan, strip_vlan, dec_ttl and set_tunnel");
    }
    if (drop && !out.empty())
      return error_at("unexpected", drop->key, "drop must not be accompanied by any other action");
    return {};
  }

 private:
  Status need_value(const Item& it) {
    if (it.value.empty()) return error_at("missing value for", it.key);
    return {};
  }
  Status number(const Item& it, uint64_t max, std::string_view what, uint64_t& v) {
    if (Status st = need_value(it); !st) return st;
    return parse_number(it.value, max, what, v);
  }

  Status parse_item(const Item& it, OfActions& out) {
    std::string_view k = it.key.text;
    uint64_t v;
    if (iequals(k, "output")) return parse_output(it, out);
    if (iequals(k, "controller")) return parse_controller(it, out);
    if (iequals(k, "resubmit")) return parse_resubmit(it, out);
    if (iequals(k, "goto_table")) {
      uint8_t t;
      if (Status st = need_value(it); !st) return st;
      if (Status st = parse_table(it.value, t); !st) return st;
      out.push_back(OfGotoTable{t});
      return {};
    }
    if (iequals(k, "mod_vlan_vid")) {
      if (Status st = number(it, kVlanVidMask, "VLAN VID", v); !st) return st;
      out.push_back(OfSetVlanVid{static_cast<uint16_t>(v)});
      return {};
    }
    if (iequals(k, "mod_vlan_pcp")) {
      if (Status st = number(it, 7, "VLAN PCP", v); !st) return st;
      out.push_back(OfSetVlanPcp{static_cast<uint8_t>(v)});
      return {};
    }
    if (iequals(k, "strip_vlan") || iequals(k, "pop_vlan")) {
      if (!it.value.empty()) return error_at("unexpected argument", it.value, std::string(k) + " takes none");
      out.push_back(OfStripVlan{});
      return {};
    }
    if (iequals(k, "push_vlan")) {
      if (Status st = number(it, 0xffff, "ethertype", v); !st) return st;
      if (v != kEthTypeVlan && v != kEthTypeQinQ)
        return error_at("bad VLAN ethertype", it.value, "push_vlan takes 0x8100 or 0x88a8");
      out.push_back(OfPushVlan{static_cast<uint16_t>(v)});
      return {};
    }
    if (iequals(k, "mod_dl_src") || iequals(k, "mod_dl_dst")) {
      EthAddr mac;
      if (Status st = need_value(it); !st) return st;
      if (!parse_mac(it.value.text, mac)) return error_at("bad Ethernet address", it.value);
      if (iequals(k, "mod_dl_src"))
        out.push_back(OfSetEthSrc{mac});
      else
        out.push_back(OfSetEthDst{mac});
      return {};
    }
    if (iequals(k, "mod_nw_src") || iequals(k, "mod_nw_dst")) {
      be32 a;
      if (Status st = need_value(it); !st) return st;
      if (!parse_ipv4(it.value.text, a)) return error_at("bad IPv4 address", it.value);
      if (iequals(k, "mod_nw_src"))
        out.push_back(OfSetIpv4Src{a});
      else
        out.push_back(OfSetIpv4Dst{a});
      return {};
    }
    if (iequals(k, "mod_nw_tos")) {
      if (Status st = number(it, 0xff, "TOS", v); !st) return st;
      if (v & kIpEcnMask)
        return error_at("bad TOS value", it.value, "mod_nw_tos sets the DSCP bits, a multiple of 4");
      out.push_back(OfSetIpDscp{static_cast<uint8_t>(v)});
      return {};
    }
    if (iequals(k, "mod_nw_ecn")) {
      if (Status st = number(it, 3, "ECN", v); !st) return st;
      out.push_back(OfLoad{OfSubfield::whole(OfFieldId::nw_ecn), v});
      return {};
    }
    if (iequals(k, "mod_nw_ttl")) {
      if (Status st = number(it, 0xff, "TTL", v); !st) return st;
      out.push_back(OfLoad{OfSubfield::whole(OfFieldId::nw_ttl), v});
      return {};
    }
    if (iequals(k, "mod_tp_src") || iequals(k, "mod_tp_dst")) {
      if (Status st = number(it, 0xffff, "port", v); !st) return st;
      if (iequals(k, "mod_tp_src"))
        out.push_back(OfSetL4Src{static_cast<uint16_t>(v)});
      else
        out.push_back(OfSetL4Dst{static_cast<uint16_t>(v)});
      return {};
    }
    if (iequals(k, "write_actions")) {
      OfActions nested;
      ActionParser p(o_);
      if (Status st = p.parse(it.value, nested, true); !st) return st;
      // An empty action set instruction changes nothing; OVS does not keep it.
      if (!nested.empty()) out.push_back(make_write_actions(std::move(nested)));
      return {};
    }
    if (iequals(k, "clear_actions")) {
      out.push_back(OfClearActions{});
      return {};
    }
    if (iequals(k, "write_metadata")) {
      uint64_t value, mask;
      if (Status st = need_value(it); !st) return st;
      if (Status st = parse_masked_number(it.value, UINT64_MAX, "metadata", value, mask); !st) return st;
      out.push_back(OfWriteMetadata{value & mask, mask});
      return {};
    }
    if (iequals(k, "set_field")) return parse_set_field(it, out);
    if (iequals(k, "load")) return parse_load(it, out);
    if (iequals(k, "move")) return parse_move(it, out);
    if (iequals(k, "dec_ttl")) return parse_dec_ttl(it, out);
    if (iequals(k, "bundle")) return parse_bundle(it, out);
    if (iequals(k, "note")) return parse_note(it, out);
    if (iequals(k, "set_tunnel") || iequals(k, "set_tunnel64")) {
      if (Status st = number(it, UINT64_MAX, "tunnel id", v); !st) return st;
      out.push_back(OfSetTunnel{v, iequals(k, "set_tunnel64") || v > UINT32_MAX});
      return {};
    }
    for (std::string_view u : kUnsupported)
      if (iequals(k, u)) return error_at("unsupported action", it.key, "keel does not implement it");
    if (!it.has_value) {  // a bare port: "2", "LOCAL", "in_port", a port name
      uint32_t port;
      switch (lookup_port(k, o_, port)) {
        case PortLookup::ok:
          out.push_back(OfOutput{port, static_cast<uint16_t>(port == kOfppController ? 0xffff : 0)});
          return {};
        case PortLookup::out_of_range:
          return error_at("out-of-range port", it.key, "a port is 0..65535 or 0xffffff00..0xffffffff");
        case PortLookup::not_a_port:
          break;
      }
    }
    return error_at("unknown action", it.key);
  }

  // strtok_r() over a Span: skips leading delimiters, returns the token up
  // to the next delimiter and steps over that one delimiter (as strtok_r
  // overwrites it), so "a , b" read with ", " then ": " gives "a" then ",".
  static std::optional<Span> strtok_span(const Span& s, size_t& pos, std::string_view delims) {
    while (pos < s.size() && delims.find(s.text[pos]) != std::string_view::npos) ++pos;
    if (pos >= s.size()) return std::nullopt;
    const size_t start = pos;
    while (pos < s.size() && delims.find(s.text[pos]) == std::string_view::npos) ++pos;
    Span tok = s.sub(start, pos - start);
    if (pos < s.size()) ++pos;
    return tok;
  }

  // bundle(fields,basis,algorithm,ofport,members:P,...) as bundle_parse()
  // tokenizes it; see bundle.h. Differences from ovs-ofctl, all refusals of
  // what it would silently accept: the basis must be a decimal 0..65535
  // (ovs-ofctl's atoi() reads "abc" as 0 and "0x10" as 0), and more than
  // 2048 members is an error (ovs-ofctl drops the rest).
  Status parse_bundle(const Item& it, OfActions& out) {
    static constexpr std::string_view kUsage = "bundle(fields,basis,algorithm,ofport,members:PORT,...)";
    if (!it.paren) return error_at("bundle takes its arguments in parentheses", it.key, kUsage);
    const Span& a = it.value;
    size_t pos = 0;
    std::optional<Span> fields = strtok_span(a, pos, ", ");
    std::optional<Span> basis = strtok_span(a, pos, ", ");
    std::optional<Span> algorithm = strtok_span(a, pos, ", ");
    std::optional<Span> member_type = strtok_span(a, pos, ", ");
    std::optional<Span> delim = strtok_span(a, pos, ": ");
    if (!delim) return error_at("not enough arguments to bundle action", it.key, kUsage);
    if (!iequals(delim->text, "members") && !iequals(delim->text, "slaves"))
      return error_at("missing member delimiter, expected `members', got", *delim, kUsage);
    OfBundle b;
    while (std::optional<Span> m = strtok_span(a, pos, ", []")) {
      if (b.members.size() >= kBundleMaxMembers)
        return error_at("too many bundle members at", *m, "a bundle has at most 2048 members");
      uint32_t port;
      if (lookup_port(m->text, o_, port) != PortLookup::ok) return error_at("bad port number", *m);
      b.members.push_back(port);
    }
    bool digits = !basis->empty();
    for (char c : basis->text) digits &= c >= '0' && c <= '9';
    uint64_t v = 0;
    if (!digits || !parse_uint(basis->text, v) || v > 0xffff)
      return error_at("bad bundle basis", *basis, "a decimal number 0..65535");
    b.basis = static_cast<uint16_t>(v);
    std::optional<HashFields> f = parse_hash_fields(fields->text);
    if (!f)
      return error_at("unknown bundle fields", *fields,
                      "eth_src, symmetric_l4, symmetric_l3l4, symmetric_l3l4+udp, nw_src, nw_dst or symmetric_l3");
    b.fields = *f;
    std::optional<BundleAlgorithm> alg = parse_bundle_algorithm(algorithm->text);
    if (!alg) return error_at("unknown bundle algorithm", *algorithm, "active_backup or hrw");
    b.algorithm = *alg;
    if (!iequals(member_type->text, "ofport")) return error_at("unknown member_type", *member_type, "ofport");
    out.push_back(std::move(b));
    return {};
  }

  Status parse_output(const Item& it, OfActions& out) {
    if (Status st = need_value(it); !st) return st;
    if (!it.paren && it.value.text.find('[') != std::string_view::npos) {
      OfOutputReg o;
      if (Status st = parse_of_subfield(it.value.text, it.value.column, o.src); !st) return st;
      out.push_back(o);
      return {};
    }
    if (it.paren) {
      // output(port=N,max_len=M): OVS's output_trunc (the packet is cut to
      // M bytes at this output; translation emits trunc(M) before it).
      std::vector<Item> kv;
      if (Status st = tokenize(it.value, kv); !st) return st;
      std::optional<uint32_t> port;
      uint64_t max_len = 0;
      bool have_len = false;
      for (const Item& p : kv) {
        if (p.key.text == "port") {
          uint32_t n;
          if (Status st = parse_port(p.value, o_, "unknown port", n); !st) return st;
          port = n;
        } else if (p.key.text == "max_len") {
          if (Status st = number(p, 0xffff, "max_len", max_len); !st) return st;
          have_len = true;
        } else {
          return error_at("unknown output option", p.key, "expected port and max_len");
        }
      }
      if (!port || !have_len) return error_at("incomplete output", it.value, "output(port=N,max_len=M) needs both");
      if (max_len < 14)
        return error_at("bad max_len", it.value, "max_len " + std::to_string(max_len) +
                                                     " is less than the minimum value 14");
      if (*port == kOfppController) return error_at("bad output port", it.value, "use controller(max_len=M)");
      out.push_back(OfOutput{*port, static_cast<uint16_t>(max_len)});
      return {};
    }
    uint32_t port;
    if (Status st = parse_port(it.value, o_, "unknown port", port); !st) return st;
    out.push_back(OfOutput{port, static_cast<uint16_t>(port == kOfppController ? 0xffff : 0)});
    return {};
  }

  Status parse_controller(const Item& it, OfActions& out) {
    uint64_t max_len = 0xffff, id = 0;
    OfPacketInReason reason = OfPacketInReason::action;
    const Span& a = it.value;
    bool digits = !a.empty();
    for (char c : a.text) digits &= c >= '0' && c <= '9';
    if (digits) {
      if (Status st = parse_number(a, 0xffff, "max_len", max_len); !st) return st;
    } else if (!a.empty()) {
      std::vector<Item> kv;
      if (Status st = tokenize(a, kv); !st) return st;
      for (const Item& p : kv) {
        if (p.key.text == "reason") {
          bool found = false;
          for (const ReasonName& r : kReasons) {
            if (p.value.text == r.name) {
              reason = r.reason;
              found = true;
            }
          }
          if (!found)
            return error_at("unknown controller reason", p.value,
                            "expected no_match, action, invalid_ttl, action_set, group or packet_out");
        } else if (p.key.text == "max_len") {
          if (Status st = number(p, 0xffff, "max_len", max_len); !st) return st;
        } else if (p.key.text == "id") {
          if (Status st = number(p, 0xffff, "id", id); !st) return st;
        } else if (p.key.text == "userdata" || p.key.text == "pause" || p.key.text == "meter_id") {
          return error_at("unsupported controller option", p.key, "keel implements reason, max_len and id");
        } else {
          return error_at("unknown controller option", p.key, "expected reason, max_len or id");
        }
      }
    }
    if (reason == OfPacketInReason::action && id == 0)
      out.push_back(OfOutput{kOfppController, static_cast<uint16_t>(max_len)});
    else
      out.push_back(OfController{static_cast<uint16_t>(max_len), static_cast<uint16_t>(id), reason});
    return {};
  }

  Status parse_resubmit(const Item& it, OfActions& out) {
    if (Status st = need_value(it); !st) return st;
    OfResubmit r;
    // resubmit:P, or resubmit(P,T[,ct]) with either part empty.
    std::vector<Span> parts;
    if (it.paren) {
      size_t i = 0;
      while (true) {
        size_t comma = it.value.text.find(',', i);
        if (comma == std::string_view::npos) {
          parts.push_back(it.value.sub(i));
          break;
        }
        parts.push_back(it.value.sub(i, comma - i));
        i = comma + 1;
      }
    } else {
      parts.push_back(it.value);
    }
    if (parts.size() > 3) return error_at("too many arguments to", it.key, "resubmit(port,table)");
    if (!parts[0].empty()) {
      if (Status st = parse_port(parts[0], o_, "unknown port", r.port); !st) return st;
    }
    if (parts.size() > 1 && !parts[1].empty()) {
      if (Status st = parse_table(parts[1], r.table); !st) return st;
    }
    if (parts.size() > 2 && !parts[2].empty()) {
      if (parts[2].text == "ct")
        return error_at("unsupported resubmit option", parts[2], "keel has no conntrack");
      return error_at("unknown resubmit option", parts[2]);
    }
    if (r.port == kOfppInPort && r.table == kOfTableNone)
      return error_at("bad resubmit", it.value,
                      "give a port or a table (in_port alone resubmits nowhere new)");
    out.push_back(r);
    return {};
  }

  // "VALUE->FIELD": splits at the first "->".
  Status split_arrow(const Item& it, Span& left, Span& right) {
    if (Status st = need_value(it); !st) return st;
    size_t arrow = it.value.text.find("->");
    if (arrow == std::string_view::npos) return error_at("missing '->' in", it.value);
    left = it.value.sub(0, arrow);
    right = it.value.sub(arrow + 2);
    if (right.empty()) return error_at("missing field after '->' in", it.value);
    if (left.empty()) return error_at("missing value before '->' in", it.value);
    return {};
  }

  Status writable(const OfSubfield& sf, const Span& where) {
    const OfFieldInfo& f = of_field(sf.field);
    if (!f.writable) return error_at("read-only field", where, std::string(f.name) + " cannot be written");
    return {};
  }

  Status parse_set_field(const Item& it, OfActions& out) {
    Span vs, fs;
    if (Status st = split_arrow(it, vs, fs); !st) return st;
    const OfFieldInfo* f = find_of_field(fs.text);
    if (!f) return error_at("unknown field", fs);
    if (!f->writable) return error_at("read-only field", fs, std::string(f->name) + " cannot be written");
    MaskedSpan ms = split_mask(vs);
    if (ms.has_mask && !f->maskable)
      return error_at("unexpected mask in", vs, std::string(f->name) + " is not maskable");
    OfValue value, mask;
    switch (f->syntax) {
      case OfFieldSyntax::mac: {
        EthAddr a, am;
        if (Status st = parse_masked_mac(vs, a, am); !st) return st;
        value = value_from_bytes(a.b, 6);
        mask = value_from_bytes(am.b, 6);
        break;
      }
      case OfFieldSyntax::ipv4: {
        be32 a, am;
        if (Status st = parse_masked_ipv4(vs, a, am); !st) return st;
        value = value_from_bytes(reinterpret_cast<const uint8_t*>(&a), 4);
        mask = value_from_bytes(reinterpret_cast<const uint8_t*>(&am), 4);
        break;
      }
      case OfFieldSyntax::ipv6: {
        In6Addr a, am;
        if (Status st = parse_masked_ipv6(vs, a, am); !st) return st;
        value = value_from_bytes(a.b, 16);
        mask = value_from_bytes(am.b, 16);
        break;
      }
      case OfFieldSyntax::port: {
        uint32_t port;
        if (Status st = parse_port(vs, o_, "unknown port", port); !st) return st;
        value = OfValue::from_u64(port);
        mask = OfValue::ones(0, f->n_bits);
        break;
      }
      case OfFieldSyntax::integer:
        if (is_tun_metadata(f->id)) {
          // Up to the field's 16 bytes of hex (OVS: the mapped length).
          if (Status st = parse_tun_metadata_value(ms.value.text, value.b); !st)
            return error_at("bad value in", vs, st.message());
          if (ms.has_mask) {
            if (Status st = parse_tun_metadata_value(ms.mask.text, mask.b); !st)
              return error_at("bad mask in", vs, st.message());
          } else {
            mask = OfValue::ones(0, 128);
          }
          break;
        }
        {
        // vlan_vid may carry OpenFlow 1.2's "present" bit (0x1000).
        uint64_t max = f->id == OfFieldId::vlan_vid ? 0x1fff
                       : f->n_bits >= 64            ? UINT64_MAX
                                                    : (uint64_t{1} << f->n_bits) - 1;
        uint64_t v, m;
        if (Status st = parse_masked_number(vs, max, f->name, v, m); !st) return st;
        if (f->id == OfFieldId::nw_tos && (v & kIpEcnMask))
          return error_at("bad nw_tos value", ms.value, "nw_tos is the DSCP field, a multiple of 4");
        value = OfValue::from_u64(v);
        mask = OfValue::from_u64(m);
        break;
        }
    }
    append_set_field(f->id, value, mask, out);
    return {};
  }

  Status parse_load(const Item& it, OfActions& out) {
    Span vs, ds;
    if (Status st = split_arrow(it, vs, ds); !st) return st;
    OfSubfield dst;
    if (Status st = parse_of_subfield(ds.text, ds.column, dst); !st) return st;
    if (Status st = writable(dst, ds); !st) return st;
    OfValue v;
    if (!parse_wide_uint(vs.text, v))
      return error_at("bad load value", vs, "expected a decimal or 0x-hex number");
    if (v.bit_width() > dst.n_bits)
      return error_at("out-of-range value", vs,
                      "the value does not fit into " + std::to_string(dst.n_bits) + " bits");
    append_loads(dst.field, v << dst.ofs, subfield_mask(dst), out);
    return {};
  }

  Status parse_move(const Item& it, OfActions& out) {
    Span ss, ds;
    if (Status st = split_arrow(it, ss, ds); !st) return st;
    OfMove m;
    if (Status st = parse_of_subfield(ss.text, ss.column, m.src); !st) return st;
    if (Status st = parse_of_subfield(ds.text, ds.column, m.dst); !st) return st;
    if (Status st = writable(m.dst, ds); !st) return st;
    if (m.src.n_bits != m.dst.n_bits)
      return error_at("mismatched widths in", it.value,
                      "the source is " + std::to_string(m.src.n_bits) + " bits wide but the destination is " +
                          std::to_string(m.dst.n_bits));
    out.push_back(m);
    return {};
  }

  Status parse_dec_ttl(const Item& it, OfActions& out) {
    OfDecTtl d;
    size_t i = 0;
    const Span& a = it.value;
    while (i < a.size()) {
      while (i < a.size() && is_delimiter(a.text[i])) ++i;
      if (i >= a.size()) break;
      size_t start = i;
      while (i < a.size() && !is_delimiter(a.text[i])) ++i;
      uint64_t id;
      if (Status st = parse_number(a.sub(start, i - start), 0xffff, "controller id", id); !st) return st;
      d.controller_ids.push_back(static_cast<uint16_t>(id));
    }
    out.push_back(std::move(d));
    return {};
  }

  Status parse_note(const Item& it, OfActions& out) {
    OfNote n;
    const Span& a = it.value;
    size_t i = 0;
    while (i < a.size()) {
      if (a.text[i] == '.') {
        ++i;
        continue;
      }
      auto hex = [](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      if (i + 1 >= a.size() || hex(a.text[i]) < 0 || hex(a.text[i + 1]) < 0)
        return error_at("bad hex digit in note", a.sub(i, 2),
                        "write bytes as pairs of hex digits: note:01.ab.ff");
      n.data.push_back(static_cast<uint8_t>(hex(a.text[i]) * 16 + hex(a.text[i + 1])));
      i += 2;
    }
    // NXAST_NOTE pads the action to a multiple of 8 bytes: 6, 14, 22, ... bytes of note.
    size_t len = 6;
    while (len < n.data.size()) len += 8;
    n.data.resize(len, 0);
    out.push_back(std::move(n));
    return {};
  }

  const OfParseOptions& o_;
};

// ======================= printer =======================

void put_action(std::string& out, const OfAction& action, const OfFormatOptions& o) {
  std::visit(Overloaded{
                 [&](const OfOutput& a) {
                   if (a.port != kOfppController && a.max_len) {  // output_trunc
                     out += "output(port=";
                     put_port(out, a.port, o);
                     out += ",max_len=";
                     put_dec(out, a.max_len);
                     out += ')';
                     return;
                   }
                   if (a.port < kOfppMax) out += "output:";
                   put_port(out, a.port, o);
                   if (a.port == kOfppController) out += ':', put_dec(out, a.max_len);
                 },
                 [&](const OfController& a) {
                   out += "controller(";
                   size_t start = out.size();
                   if (a.reason != OfPacketInReason::action) {
                     out += "reason=";
                     for (const ReasonName& r : kReasons)
                       if (r.reason == a.reason) out += r.name;
                     out += ',';
                   }
                   if (a.max_len != 0xffff) out += "max_len=", put_dec(out, a.max_len), out += ',';
                   if (a.id) out += "id=", put_dec(out, a.id), out += ',';
                   if (out.size() > start) out.pop_back();
                   out += ')';
                 },
                 [&](const OfResubmit& a) {
                   if (a.port != kOfppInPort && a.table == kOfTableNone) {
                     out += "resubmit:";
                     put_port(out, a.port, o);
                     return;
                   }
                   out += "resubmit(";
                   if (a.port != kOfppInPort) put_port(out, a.port, o);
                   out += ',';
                   if (a.table != kOfTableNone) put_dec(out, a.table);
                   out += ')';
                 },
                 [&](const OfGotoTable& a) { out += "goto_table:", put_dec(out, a.table); },
                 [&](const OfSetVlanVid& a) { out += "mod_vlan_vid:", put_dec(out, a.vid); },
                 [&](const OfSetVlanPcp& a) { out += "mod_vlan_pcp:", put_dec(out, a.pcp); },
                 [&](const OfStripVlan&) { out += "strip_vlan"; },
                 [&](const OfPushVlan& a) { out += "push_vlan:", put_hex_alt(out, a.tpid); },
                 [&](const OfSetEthSrc& a) { out += "mod_dl_src:", put_mac(out, a.mac); },
                 [&](const OfSetEthDst& a) { out += "mod_dl_dst:", put_mac(out, a.mac); },
                 [&](const OfSetIpv4Src& a) { out += "mod_nw_src:", put_ipv4(out, a.addr); },
                 [&](const OfSetIpv4Dst& a) { out += "mod_nw_dst:", put_ipv4(out, a.addr); },
                 [&](const OfSetIpDscp& a) { out += "mod_nw_tos:", put_dec(out, a.tos); },
                 [&](const OfSetL4Src& a) { out += "mod_tp_src:", put_dec(out, a.port); },
                 [&](const OfSetL4Dst& a) { out += "mod_tp_dst:", put_dec(out, a.port); },
                 [&](const OfLoad& a) {
                   out += "load:";
                   put_hex_alt(out, a.value);
                   out += "->";
                   format_of_subfield(out, a.dst);
                 },
                 [&](const OfOutputReg& a) {
                   out += "output:";
                   format_of_subfield(out, a.src);
                 },
                 [&](const OfMove& a) {
                   out += "move:";
                   format_of_subfield(out, a.src);
                   out += "->";
                   format_of_subfield(out, a.dst);
                 },
                 [&](const OfDecTtl& a) {
                   out += "dec_ttl";
                   if (a.controller_ids.empty()) return;
                   out += '(';
                   for (size_t i = 0; i < a.controller_ids.size(); ++i) {
                     if (i) out += ',';
                     put_dec(out, a.controller_ids[i]);
                   }
                   out += ')';
                 },
                 [&](const OfNote& a) {
                   static constexpr char kHex[] = "0123456789abcdef";
                   out += "note:";
                   for (size_t i = 0; i < a.data.size(); ++i) {
                     if (i) out += '.';
                     out += kHex[a.data[i] >> 4];
                     out += kHex[a.data[i] & 0xf];
                   }
                 },
                 [&](const OfSetTunnel& a) {
                   out += (a.wide || a.tun_id > UINT32_MAX) ? "set_tunnel64:" : "set_tunnel:";
                   put_hex_alt(out, a.tun_id);
                 },
                 [&](const OfWriteActions& a) {
                   out += "write_actions(";
                   out += format_of_actions(a.set->actions, o);
                   out += ')';
                 },
                 [&](const OfClearActions&) { out += "clear_actions"; },
                 [&](const OfBundle& a) {
                   // bundle_format(): ports as output prints them (names when known).
                   out += "bundle(";
                   out += to_string(a.fields);
                   out += ',';
                   put_dec(out, a.basis);
                   out += ',';
                   out += to_string(a.algorithm);
                   out += ",ofport,members:";
                   for (size_t i = 0; i < a.members.size(); ++i) {
                     if (i) out += ',';
                     put_port(out, a.members[i], o);
                   }
                   out += ')';
                 },
                 [&](const OfWriteMetadata& a) {
                   out += "write_metadata:";
                   put_hex_alt(out, a.value);
                   if (a.mask != UINT64_MAX) out += '/', put_hex_alt(out, a.mask);
                 },
             },
             action);
}

// ======================= check =======================

Status check_error(size_t index, const OfAction& a, std::string_view why) {
  std::string msg = "action ";
  msg += std::to_string(index + 1);
  msg += " '";
  msg += format_of_action(a);
  msg += "': ";
  msg += why;
  return invalid(std::move(msg));
}

Status need(size_t i, const OfAction& a, OfPrereq p, const Match& m, std::string_view who) {
  if (of_prereq_ok(p, m)) return {};
  std::string why(who);
  why += " requires ";
  why += of_prereq_text(p);
  why += " in the match";
  return check_error(i, a, why);
}

// A set_field's prerequisite: Open vSwitch says "set_field F lacks correct
// prerequisites".
Status need_field(size_t i, const OfAction& a, OfPrereq p, const Match& m, std::string_view field) {
  if (of_prereq_ok(p, m)) return {};
  std::string why = "set_field ";
  why += field;
  why += " requires ";
  why += of_prereq_text(p);
  why += " in the match";
  return check_error(i, a, why);
}

// The set_field an OfSetL4Src/Dst was parsed from: tcp_src, udp_dst, ...
std::string l4_field_name(OfPrereq p, std::string_view dir) {
  std::string name = p == OfPrereq::udp ? "udp_" : p == OfPrereq::sctp ? "sctp_" : "tcp_";
  name += dir;
  return name;
}

Status check_subfield(size_t i, const OfAction& a, const OfSubfield& sf, const Match& m, bool dst) {
  const OfFieldInfo& f = of_field(sf.field);
  if (sf.n_bits == 0 || sf.ofs + sf.n_bits > f.n_bits)
    return check_error(i, a, std::string("bit range outside ") + std::string(f.name));
  if (dst && !f.writable) return check_error(i, a, std::string(f.name) + " is read-only");
  if (f.prereq != OfPrereq::none) return need(i, a, f.prereq, m, f.name);
  return {};
}

// The flow after a tag is pushed (flow_push_vlan_uninit() + CFI).
void push_tag(Match& m, uint16_t tpid) {
  m.key.vlans[1] = m.key.vlans[0];
  m.mask.vlans[1] = m.mask.vlans[0];
  m.key.vlans[0] = {hton16(tpid), hton16(kCfi)};
  m.mask.vlans[0] = {0xffff, hton16(kCfi)};
}
void mark_tag(Match& m) {
  if (!(m.key.vlans[0].tci & hton16(kCfi))) {
    m.key.vlans[0].tci |= hton16(kCfi);
    m.mask.vlans[0].tci |= hton16(kCfi);
  }
}

}  // namespace

Result<OfActions> parse_of_actions(std::string_view text, const OfParseOptions& options, size_t column) {
  OfActions out;
  ActionParser p(options);
  if (Status st = p.parse(Span{text, column}, out); !st) return st;
  return out;
}

std::string format_of_action(const OfAction& action, const OfFormatOptions& options) {
  std::string out;
  put_action(out, action, options);
  return out;
}

std::string format_of_actions(const OfActions& actions, const OfFormatOptions& options) {
  if (actions.empty()) return "drop";
  std::string out;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (!out.empty()) out += ',';
    const auto* l = std::get_if<OfLoad>(&actions[i]);
    if (l && is_tun_metadata(l->dst.field)) {
      // OVS's NXAST_REG_LOAD2: one set_field:V[/M]->tun_metadataN for the
      // load and the parts that continue it.
      OfValue v, m;
      for (;;) {
        v = v | (OfValue::from_u64(l->value) << l->dst.ofs);
        m = m | subfield_mask(l->dst);
        const OfLoad* next = i + 1 < actions.size() ? std::get_if<OfLoad>(&actions[i + 1]) : nullptr;
        if (!next || !next->continues || next->dst.field != l->dst.field) break;
        l = next;
        ++i;
      }
      out += "set_field:";
      put_tun_metadata_hex(out, v.b);
      if (m != OfValue::ones(0, 128)) out += '/', put_tun_metadata_hex(out, m.b);
      out += "->";
      out += of_field(l->dst.field).name;
      continue;
    }
    put_action(out, actions[i], options);
  }
  return out;
}

namespace {

// How strictly the OpenFlow 1.0 actions mod_nw_*, mod_tp_*, dec_ttl and
// strip_vlan are checked (what `ovs-ofctl add-flow` accepts, observed on
// Open vSwitch 3.1):
//   of10:       the flow can be sent as OpenFlow 1.0: no prerequisites (the
//               action is a no-op on a packet without the header);
//   of11:       the apply-actions of a flow only OpenFlow 1.1+ carries
//               (instructions, push_vlan): each needs its header in the match,
//               as OVS refuses them there (inconsistent_match() leaves only
//               OpenFlow 1.0 usable);
//   action_set: inside write_actions(...): mod_nw_src/dst and mod_nw_tos are
//               set_fields on the wire and need ip / ip or ipv6; mod_tp_*,
//               dec_ttl and strip_vlan are not checked (OVS checks an action
//               set without narrowing).
// A set_field spelling (OfSet*::need) is checked in every mode.
enum class CheckMode { of10, of11, action_set };

bool needs_of11(const OfActions& actions) {
  for (const OfAction& a : actions)
    if (std::holds_alternative<OfGotoTable>(a) || std::holds_alternative<OfPushVlan>(a) ||
        std::holds_alternative<OfWriteActions>(a) || std::holds_alternative<OfClearActions>(a) ||
        std::holds_alternative<OfWriteMetadata>(a))
      return true;
  return false;
}

Status check_list(const OfActions& actions, Match& m, uint8_t table_id, CheckMode mode) {
  const bool strict = mode == CheckMode::of11;
  const bool set_field_like = mode != CheckMode::of10;  // mod_nw_* checked as their set_field
  auto set_need = [&](size_t i, const OfAction& a, OfPrereq need, OfPrereq mode_need, bool checked,
                      std::string_view who) -> Status {
    if (need != OfPrereq::none) return need_field(i, a, need, m, who);
    if (checked) return need_field(i, a, mode_need, m, who);
    return {};
  };
  for (size_t i = 0; i < actions.size(); ++i) {
    const OfAction& a = actions[i];
    Status st = std::visit(
        Overloaded{
            [&](const OfOutput& o) -> Status {
              switch (o.port) {
                case kOfppInPort:
                case kOfppTable:
                case kOfppNormal:
                case kOfppFlood:
                case kOfppAll:
                case kOfppController:
                case kOfppLocal:
                  return {};
                default:
                  if (o.port < kOfppMax) return {};
                  return check_error(
                      i, a,
                      "invalid output port (ports are below 0xff00, or IN_PORT, TABLE, NORMAL, "
                      "FLOOD, ALL, CONTROLLER, LOCAL)");
              }
            },
            [&](const OfBundle& b) -> Status {
              // bundle_check(): every member but NONE is a valid output
              // port; CONTROLLER is not supported (no max_len).
              for (uint32_t p : b.members) {
                if (p == kOfppNone) continue;
                if (p == kOfppController) return check_error(i, a, "unsupported controller member");
                switch (p) {
                  case kOfppInPort:
                  case kOfppTable:
                  case kOfppNormal:
                  case kOfppFlood:
                  case kOfppAll:
                  case kOfppLocal:
                    continue;
                  default:
                    if (p < kOfppMax) continue;
                }
                return check_error(i, a,
                                   "invalid member " + std::to_string(p) +
                                       " (members are ports below 0xff00, or IN_PORT, TABLE, NORMAL, FLOOD, "
                                       "ALL, LOCAL, NONE)");
              }
              return {};
            },
            [&](const OfGotoTable& g) -> Status {
              if (i + 1 != actions.size()) return check_error(i, a, "goto_table must be the last action");
              if (g.table == kOfTableNone) return check_error(i, a, "table 255 does not exist");
              if (table_id != kOfTableNone && g.table <= table_id)
                return check_error(
                    i, a,
                    "goto_table must go to a later table than this flow's table " + std::to_string(table_id));
              return {};
            },
            [&](const OfSetVlanVid& v) -> Status {
              if (v.need != OfPrereq::none)
                if (Status s = need_field(i, a, v.need, m, "vlan_vid"); !s) return s;
              mark_tag(m);
              return {};
            },
            [&](const OfSetVlanPcp& v) -> Status {
              if (v.need != OfPrereq::none)
                if (Status s = need_field(i, a, v.need, m, "vlan_pcp"); !s) return s;
              mark_tag(m);
              return {};
            },
            [&](const OfStripVlan& sv) -> Status {
              if (strict && !sv.from_tci)
                if (Status s = need(i, a, OfPrereq::vlan, m, "strip_vlan"); !s) return s;
              if (strict && sv.from_tci) {
                // An OpenFlow 1.1+ flow keeps set_field:0->vlan_tci as a write
                // of the outer TCI (as_of11): the tags under it stay, so a
                // later push_vlan may find two (OVS: OFPBAC_BAD_TAG).
                m.key.vlans[0].tci = 0;
                m.mask.vlans[0].tci = 0xffff;
                return {};
              }
              m.key.vlans[0] = m.key.vlans[1];
              m.mask.vlans[0] = m.mask.vlans[1];
              m.key.vlans[1] = {};
              m.mask.vlans[1] = {};
              return {};
            },
            [&](const OfPushVlan& p) -> Status {
              if (m.key.vlans[1].tci & hton16(kCfi))
                return check_error(i, a, "a packet has at most two VLAN tags");
              push_tag(m, p.tpid);
              return {};
            },
            [&](const OfSetIpv4Src& x) {
              return set_need(i, a, x.need, OfPrereq::ipv4, set_field_like, "ip_src");
            },
            [&](const OfSetIpv4Dst& x) {
              return set_need(i, a, x.need, OfPrereq::ipv4, set_field_like, "ip_dst");
            },
            [&](const OfSetIpDscp& x) {
              return set_need(i, a, x.need, OfPrereq::ip_any, set_field_like, "nw_tos");
            },
            [&](const OfDecTtl&) -> Status {
              if (!strict) return {};
              return need(i, a, OfPrereq::ip_any, m, "dec_ttl");
            },
            [&](const OfSetL4Src& x) -> Status {
              if (x.need != OfPrereq::none) return need_field(i, a, x.need, m, l4_field_name(x.need, "src"));
              if (!strict || of_prereq_ok(OfPrereq::tcp, m) || of_prereq_ok(OfPrereq::udp, m) ||
                  of_prereq_ok(OfPrereq::sctp, m))
                return {};
              return check_error(i, a,
                                 "mod_tp_src requires tcp, udp or sctp (not a later fragment) in the match");
            },
            [&](const OfSetL4Dst& x) -> Status {
              if (x.need != OfPrereq::none) return need_field(i, a, x.need, m, l4_field_name(x.need, "dst"));
              if (!strict || of_prereq_ok(OfPrereq::tcp, m) || of_prereq_ok(OfPrereq::udp, m) ||
                  of_prereq_ok(OfPrereq::sctp, m))
                return {};
              return check_error(i, a,
                                 "mod_tp_dst requires tcp, udp or sctp (not a later fragment) in the match");
            },
            [&](const OfLoad& l) -> Status {
              if (Status s = check_subfield(i, a, l.dst, m, true); !s) return s;
              // Open vSwitch's set_field check: writing vlan_vid needs a tag
              // (move into it does not).
              if (l.dst.field == OfFieldId::vlan_vid)
                if (Status s = need(i, a, OfPrereq::vlan, m, "vlan_vid"); !s) return s;
              if (l.dst.n_bits > 64 || (l.dst.n_bits < 64 && (l.value >> l.dst.n_bits)))
                return check_error(i, a, "the value does not fit into the subfield");
              if (l.dst.field == OfFieldId::vlan_tci) {
                // The load may add or remove the tag: follow it.
                OfValue mk = subfield_mask(l.dst);
                write_field(m.key, l.dst.field, OfValue::from_u64(l.value) << l.dst.ofs, mk);
                unwildcard_field(m.mask, l.dst.field, mk);
              }
              return {};
            },
            [&](const OfOutputReg& o) -> Status { return check_subfield(i, a, o.src, m, false); },
            [&](const OfMove& mv) -> Status {
              if (mv.src.n_bits != mv.dst.n_bits)
                return check_error(i, a, "source and destination widths differ");
              if (Status s = check_subfield(i, a, mv.src, m, false); !s) return s;
              return check_subfield(i, a, mv.dst, m, true);
            },
            [&](const OfWriteActions& w) -> Status {
              if (Status s = check_list(w.set->actions, m, table_id, CheckMode::action_set); !s)
                return check_error(i, a, s.message());
              return {};
            },
            [&](const auto&) -> Status { return {}; },
        },
        a);
    if (!st) return st;
  }
  return {};
}

}  // namespace

Status check_of_actions(const OfActions& actions, const Match& match, uint8_t table_id) {
  Match m = match;  // the flow as the actions so far left it
  return check_list(actions, m, table_id, needs_of11(actions) ? CheckMode::of11 : CheckMode::of10);
}

namespace {

void as_of11(const OfActions& in, Match& m, OfActions& out) {
  auto load_tci = [&](uint16_t tci) {
    OfLoad l{OfSubfield::whole(OfFieldId::vlan_tci), tci, /*from_set_field=*/true};
    write_field(m.key, OfFieldId::vlan_tci, OfValue::from_u64(tci), OfValue::from_u64(0xffff));
    unwildcard_field(m.mask, OfFieldId::vlan_tci, OfValue::from_u64(0xffff));
    out.push_back(l);
  };
  for (size_t i = 0; i < in.size(); ++i) {
    const OfAction& a = in[i];
    // set_field:V->vlan_tci: OVS keeps the set_field (it writes vlans[0].tci
    // as is: 0 makes the packet untagged, however many tags it had).
    if (const auto* sv = std::get_if<OfStripVlan>(&a); sv && sv->from_tci) {
      load_tci(0);
      continue;
    }
    if (const auto* vv = std::get_if<OfSetVlanVid>(&a); vv && vv->from_tci && i + 1 < in.size()) {
      if (const auto* pp = std::get_if<OfSetVlanPcp>(&in[i + 1])) {
        load_tci(static_cast<uint16_t>(pp->pcp << 13 | kCfi | vv->vid));
        ++i;
        continue;
      }
    }
    std::visit(Overloaded{
                   [&](const OfSetVlanVid&) {
                     if (!of_prereq_ok(OfPrereq::vlan, m)) out.push_back(OfPushVlan{kEthTypeVlan});
                     mark_tag(m);
                     out.push_back(a);
                   },
                   [&](const OfSetVlanPcp&) {
                     if (!of_prereq_ok(OfPrereq::vlan, m)) out.push_back(OfPushVlan{kEthTypeVlan});
                     mark_tag(m);
                     out.push_back(a);
                   },
                   [&](const OfPushVlan& p) {
                     push_tag(m, p.tpid);
                     out.push_back(a);
                   },
                   [&](const OfStripVlan&) {
                     m.key.vlans[0] = m.key.vlans[1];
                     m.mask.vlans[0] = m.mask.vlans[1];
                     m.key.vlans[1] = {};
                     m.mask.vlans[1] = {};
                     out.push_back(a);
                   },
                   [&](const OfLoad& l) {
                     if (l.dst.field == OfFieldId::vlan_tci) {
                       OfValue mk = subfield_mask(l.dst);
                       write_field(m.key, l.dst.field, OfValue::from_u64(l.value) << l.dst.ofs, mk);
                       unwildcard_field(m.mask, l.dst.field, mk);
                     }
                     out.push_back(a);
                   },
                   [&](const OfWriteActions& w) {
                     OfActions nested;
                     as_of11(w.set->actions, m, nested);
                     out.push_back(make_write_actions(std::move(nested)));
                   },
                   [&](const auto&) { out.push_back(a); },
               },
               a);
  }
}

}  // namespace

OfActions of_actions_as_stored(const OfActions& actions, const Match& match) {
  if (!needs_of11(actions)) return actions;
  Match m = match;
  OfActions out;
  as_of11(actions, m, out);
  return out;
}

OfActions of_action_set_list(const OfActions& set) {
  // ACTION_SET_ORDER slots (the last of each), then the set-or-move actions
  // in order, then the final action: output ranks above resubmit, and of one
  // kind the later wins.
  const OfAction *strip = nullptr, *push = nullptr, *dec_ttl = nullptr, *final = nullptr;
  bool final_is_output = false;
  OfActions sets;
  for (const OfAction& a : set) {
    if (std::holds_alternative<OfStripVlan>(a)) {
      strip = &a;
    } else if (std::holds_alternative<OfPushVlan>(a)) {
      push = &a;
    } else if (std::holds_alternative<OfDecTtl>(a)) {
      dec_ttl = &a;
    } else if (std::holds_alternative<OfOutput>(a)) {
      final = &a;
      final_is_output = true;
    } else if (std::holds_alternative<OfResubmit>(a)) {
      if (!final_is_output) final = &a;
    } else if (allowed_in_action_set(a)) {
      sets.push_back(a);
    }
  }
  OfActions out;
  if (!final) return out;  // an action set without output or resubmit does nothing
  for (const OfAction* a : {strip, push, dec_ttl})
    if (a) out.push_back(*a);
  out.insert(out.end(), sets.begin(), sets.end());
  out.push_back(*final);
  return out;
}

std::optional<OfFieldWrite> of_action_field_write(const OfAction& action) {
  auto whole = [](OfFieldId id, const OfValue& v) {
    return OfFieldWrite{id, v, OfValue::ones(0, of_field(id).n_bits)};
  };
  return std::visit(
      Overloaded{
          [&](const OfSetEthSrc& a) -> std::optional<OfFieldWrite> {
            return whole(OfFieldId::eth_src, value_from_bytes(a.mac.b, 6));
          },
          [&](const OfSetEthDst& a) -> std::optional<OfFieldWrite> {
            return whole(OfFieldId::eth_dst, value_from_bytes(a.mac.b, 6));
          },
          [&](const OfSetIpv4Src& a) -> std::optional<OfFieldWrite> {
            return whole(OfFieldId::ip_src, value_from_bytes(reinterpret_cast<const uint8_t*>(&a.addr), 4));
          },
          [&](const OfSetIpv4Dst& a) -> std::optional<OfFieldWrite> {
            return whole(OfFieldId::ip_dst, value_from_bytes(reinterpret_cast<const uint8_t*>(&a.addr), 4));
          },
          [&](const OfSetIpDscp& a) -> std::optional<OfFieldWrite> {
            return OfFieldWrite{OfFieldId::nw_tos, OfValue::from_u64(a.tos), OfValue::from_u64(kIpDscpMask)};
          },
          [&](const OfSetL4Src& a) -> std::optional<OfFieldWrite> {
            return whole(OfFieldId::tcp_src, OfValue::from_u64(a.port));
          },
          [&](const OfSetL4Dst& a) -> std::optional<OfFieldWrite> {
            return whole(OfFieldId::tcp_dst, OfValue::from_u64(a.port));
          },
          [&](const OfLoad& a) -> std::optional<OfFieldWrite> {
            return OfFieldWrite{a.dst.field, OfValue::from_u64(a.value) << a.dst.ofs, subfield_mask(a.dst)};
          },
          [&](const OfSetTunnel& a) -> std::optional<OfFieldWrite> {
            return whole(OfFieldId::tun_id, OfValue::from_u64(a.tun_id));
          },
          [&](const auto&) -> std::optional<OfFieldWrite> { return std::nullopt; },
      },
      action);
}

}  // namespace keel::flow

// ovs-vsctl column words -> PortOptions, and back (see port_columns.h).
#include "ofproto/port_columns.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <iterator>
#include <cstdlib>
#include <optional>
#include <vector>

#include "datapath/datapath.h"
#include "flow/of_actions.h"

namespace keel::ofproto {

namespace {

// vswitch.ovsschema (Open vSwitch 3.1): the tables, and the columns of the
// two tables a port word may name. Partial matching runs over all of them
// so that an abbreviation is ambiguous or not exactly as in ovs-vsctl.
// clang-format off
constexpr std::string_view kTables[] = {
    "AutoAttach", "Bridge", "CT_Timeout_Policy", "CT_Zone", "Controller", "Datapath",
    "Flow_Sample_Collector_Set", "Flow_Table", "IPFIX", "Interface", "Manager", "Mirror", "NetFlow",
    "Open_vSwitch", "Port", "QoS", "Queue", "SSL", "sFlow"};
constexpr std::string_view kPortColumns[] = {
    "bond_active_slave", "bond_downdelay", "bond_fake_iface", "bond_mode", "bond_updelay", "cvlans",
    "external_ids", "fake_bridge", "interfaces", "lacp", "mac", "name", "other_config", "protected",
    "qos", "rstp_statistics", "rstp_status", "statistics", "status", "tag", "trunks", "vlan_mode"};
constexpr std::string_view kInterfaceColumns[] = {
    "admin_state", "bfd", "bfd_status", "cfm_fault", "cfm_fault_status", "cfm_flap_count", "cfm_health",
    "cfm_mpid", "cfm_remote_mpids", "cfm_remote_opstate", "duplex", "error", "external_ids", "ifindex",
    "ingress_policing_burst", "ingress_policing_kpkts_burst", "ingress_policing_kpkts_rate",
    "ingress_policing_rate", "lacp_current", "link_resets", "link_speed", "link_state", "lldp", "mac",
    "mac_in_use", "mtu", "mtu_request", "name", "ofport", "ofport_request", "options", "other_config",
    "statistics", "status", "type"};
// clang-format on
static_assert(std::size(kPortColumns) == 22 && std::size(kInterfaceColumns) == 35,
              "every column of Port and Interface in vswitch.ovsschema 3.1, or abbreviations match differently");

constexpr uint32_t kMinMtu = PortOptions::kMinMtuRequest, kMaxMtu = PortOptions::kMaxMtuRequest;

char fold(char c) { return c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// db-ctl-base.c score_partial_match(): UINT_MAX exact, UINT_MAX-1 equal but
// for case and '-'/'_', else the length of a prefix match, 0 no match.
unsigned score_partial_match(std::string_view name, std::string_view s) {
  if (name == s) return UINT_MAX;
  size_t i = 0;
  for (;; ++i) {
    const char a = i < name.size() ? fold(name[i]) : '\0';
    const char b = i < s.size() ? fold(s[i]) : '\0';
    if (a != b) break;
    if (a == '\0') return UINT_MAX - 1;
  }
  return i >= s.size() ? static_cast<unsigned>(i) : 0;
}

// The best-matching names; several when ambiguous, none when nothing matches.
std::vector<std::string_view> best_matches(std::span<const std::string_view> names, std::string_view s) {
  std::vector<std::string_view> best;
  unsigned best_score = 0;
  for (std::string_view n : names) {
    const unsigned sc = score_partial_match(n, s);
    if (sc && sc >= best_score) {
      if (sc > best_score) best.clear();
      best.push_back(n);
      best_score = sc;
    }
  }
  std::sort(best.begin(), best.end());
  return best;
}

std::string join(const std::vector<std::string_view>& v) {
  std::string s;
  for (std::string_view x : v) s += (s.empty() ? "" : ", ") + std::string(x);
  return s;
}

// ovsdb-data.c ovsdb_token_is_delim().
bool is_delim(char c) {
  return c == '\0' || std::string_view(":=, []{}!<>").find(c) != std::string_view::npos;
}

// ovsdb-data.c ovsdb_token_parse(): up to the next delimiter outside
// "..."; a backslash takes the next character literally (and stays inside
// quotes). Advances `p`.
Result<std::string> token_parse(std::string_view& p) {
  const std::string_view start = p;
  std::string out;
  bool in_quotes = false;
  size_t i = 0;
  while (i < p.size()) {
    const char c = p[i++];
    if (c == '\\') {
      if (in_quotes) out += '\\';
      if (i >= p.size()) return invalid(std::string(start) + ": backslash at end of argument");
      out += p[i++];
    } else if (!in_quotes && is_delim(c)) {
      --i;
      break;
    } else {
      out += c;
      if (c == '"') in_quotes = !in_quotes;
    }
  }
  if (in_quotes) return invalid(std::string(start) + ": quoted string extends past end of argument");
  p.remove_prefix(i);
  return out;
}

std::string_view skip_spaces(std::string_view p) {
  while (!p.empty() && std::isspace(static_cast<unsigned char>(p.front()))) p.remove_prefix(1);
  return p;
}

// An atom's type in the schema: an integer in [min, max] or a string
// (optionally one of `enum_`).
struct BaseType {
  bool integer = true;
  int64_t min = INT64_MIN, max = INT64_MAX;
  std::span<const std::string_view> enum_{};
};

struct ColumnType {
  BaseType key;
  std::optional<BaseType> value;  // a map
  size_t n_min = 0, n_max = 1;
  const char* english = "";  // ovsdb_type_to_english(), for "unexpected" errors
};

struct Atom {
  int64_t integer = 0;
  std::string string;
  bool operator<(const Atom& o) const {
    return integer != o.integer ? integer < o.integer : string < o.string;
  }
  bool operator==(const Atom& o) const { return integer == o.integer && string == o.string; }
};

// util.c str_to_llong(): strtoll base 10, the whole string.
bool str_to_llong(const std::string& s, const char** tail, long long* x) {
  errno = 0;
  char* end = nullptr;
  *x = std::strtoll(s.c_str(), &end, 10);
  *tail = end;
  return !(errno == EINVAL || errno == ERANGE || end == s.c_str());
}

// ovsdb_atom_check_constraints() on one atom.
Status check_constraints(const Atom& a, const BaseType& t) {
  if (!t.enum_.empty()) {
    for (std::string_view e : t.enum_)
      if (a.string == e) return {};
    std::vector<std::string_view> sorted(t.enum_.begin(), t.enum_.end());
    std::sort(sorted.begin(), sorted.end());
    return invalid("constraint violation: " + a.string + " is not one of the allowed values ([" +
                   join(sorted) + "])");
  }
  if (!t.integer || (a.integer >= t.min && a.integer <= t.max)) return {};
  if (t.min != INT64_MIN && t.max != INT64_MAX)
    return invalid("constraint violation: " + std::to_string(a.integer) + " is not in the valid range " +
                   std::to_string(t.min) + " to " + std::to_string(t.max) + " (inclusive)");
  if (t.min != INT64_MIN)
    return invalid("constraint violation: " + std::to_string(a.integer) +
                   " is less than minimum allowed value " + std::to_string(t.min));
  return invalid("constraint violation: " + std::to_string(a.integer) +
                 " is greater than maximum allowed value " + std::to_string(t.max));
}

// JSON string body (between the quotes) -> text; the escapes of RFC 8259,
// \u only for ASCII (what a port's configuration can use).
Result<std::string> json_unescape(std::string_view quoted, std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i >= body.size())
      return invalid(std::string(quoted) + ": unexpected end of input in quoted string");
    switch (c = body[i]) {
      case '"':
      case '\\':
      case '/':
        out += c;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        unsigned v = 0;
        bool ok = i + 4 < body.size();
        for (int k = 1; ok && k <= 4; ++k) {
          const char h = body[i + k];
          ok = std::isxdigit(static_cast<unsigned char>(h)) != 0;
          v = v * 16 + static_cast<unsigned>(
                           std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        if (!ok || v == 0 || v > 0x7f)
          return invalid(std::string(quoted) + ": unsupported \\u escape in quoted string");
        out += static_cast<char>(v);
        i += 4;
        break;
      }
      default:
        return invalid(std::string(quoted) + ": bad escape in quoted string");
    }
  }
  return out;
}

// ovsdb_atom_from_string(): one atom, plus the end of an integer range
// "A-B" when `range_end` is given.
Status atom_from_string(const std::string& s, const BaseType& t, Atom& a, std::optional<int64_t>* range_end) {
  if (t.integer) {
    long long x = 0, end = 0;
    const char* tail = nullptr;
    bool ok = str_to_llong(s, &tail, &x);
    std::string rest;  // lives as long as `tail` may point into it
    if (ok && range_end && *tail == '-') {
      rest.assign(tail + 1);
      const char* tail2 = nullptr;
      if (str_to_llong(rest, &tail2, &end) && *tail2 == '\0') {
        if (end < x) return invalid("\"" + s + "\" is not a valid range. Range end cannot be before start.");
        *range_end = end;
        tail = tail2;
      }
    }
    if (!ok || *tail != '\0') return invalid("\"" + s + "\" is not a valid integer or range");
    a.integer = x;
  } else if (s.empty()) {
    return invalid("An empty string is not valid as input; use \"\" to represent the empty string");
  } else if (s.front() == '"') {
    if (s.size() < 2 || s.back() != '"') return invalid(s + ": missing quote at end of quoted string");
    auto u = json_unescape(s, std::string_view(s).substr(1, s.size() - 2));
    if (!u) return std::move(u).take_status();
    a.string = std::move(u.value());
  } else {
    a.string = s;
  }
  if (Status st = check_constraints(a, t); !st.ok()) return st;
  if (range_end && *range_end) {
    if (Status st = check_constraints(Atom{**range_end, {}}, t); !st.ok()) return st;
    if (static_cast<uint64_t>(**range_end) - static_cast<uint64_t>(a.integer) >= 4096)
      return invalid("constraint violation: Range \"" + std::to_string(a.integer) + "-" +
                     std::to_string(**range_end) + "\" is too big. Maximum allowed size is 4096.");
  }
  return {};
}

// ovsdb_datum_from_string(): a set ("10,20", "[10, 20]", "10-12", "[]")
// or a map ("{a=b, c=d}", "{}") of `t`, sorted, no duplicates.
Result<std::vector<std::pair<Atom, Atom>>> datum_from_string(std::string_view s, const ColumnType& t) {
  const bool is_map = t.value.has_value();
  std::vector<std::pair<Atom, Atom>> d;
  std::string_view p = skip_spaces(s);
  char end_delim = 0;
  if (!p.empty() && p.front() == (is_map ? '{' : '[')) {
    end_delim = is_map ? '}' : ']';
    p = skip_spaces(p.substr(1));
  } else if (p.empty()) {
    return invalid(is_map ? "use \"{}\" to specify the empty map" : "use \"[]\" to specify the empty set");
  }
  while (!p.empty() && p.front() != end_delim) {
    if (is_delim(p.front()))
      return invalid(std::string(s) + ": unexpected \"" + p.front() + "\" parsing " + t.english);
    const std::string_view start = p;
    auto tok = token_parse(p);
    if (!tok) return std::move(tok).take_status();
    Atom key, value;
    std::optional<int64_t> range_end;
    if (Status st = atom_from_string(*tok, t.key, key, t.key.integer ? &range_end : nullptr); !st.ok())
      return st;
    if (is_map) {
      p = skip_spaces(p);
      if (p.empty() || p.front() != '=')
        // At the end, OVS's "%c" prints a NUL and its message stops there.
        return invalid(std::string(start) + ": syntax error at \"" +
                       (p.empty() ? std::string() : std::string(1, p.front()) + "\" expecting \"=\""));
      p = skip_spaces(p.substr(1));
      auto vtok = token_parse(p);
      if (!vtok) return std::move(vtok).take_status();
      if (Status st = atom_from_string(*vtok, *t.value, value, nullptr); !st.ok()) return st;
    }
    if (range_end) {
      for (int64_t v = key.integer; v <= *range_end; ++v) d.push_back({Atom{v, {}}, {}});
    } else {
      d.emplace_back(std::move(key), std::move(value));
    }
    p = skip_spaces(p);
    if (!p.empty() && p.front() == ',') p = skip_spaces(p.substr(1));
  }
  if (end_delim ? p.empty() : !p.empty())
    return invalid(std::string(s) + ": missing \"" + std::string(1, end_delim) + "\" at end of data");
  if (end_delim && !skip_spaces(p.substr(1)).empty())
    return invalid(std::string(s) + ": trailing garbage after \"" + std::string(1, end_delim) + "\"");
  const char* what = is_map ? "pair(s)" : "value(s)";
  if (d.size() < t.n_min)
    return invalid(std::string(s) + ": " + std::to_string(d.size()) + " " + what +
                   " specified but the minimum number is " + std::to_string(t.n_min));
  if (d.size() > t.n_max)
    return invalid(std::string(s) + ": " + std::to_string(d.size()) + " " + what +
                   " specified but the maximum number is " + std::to_string(t.n_max));
  std::sort(d.begin(), d.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (size_t i = 1; i < d.size(); ++i)
    if (d[i].first == d[i - 1].first)
      return invalid(std::string(s) +
                     (is_map ? ": map contains duplicate key" : ": set contains duplicate value"));
  return d;
}

constexpr std::string_view kVlanModes[] = {"trunk", "access", "native-tagged", "native-untagged",
                                           "dot1q-tunnel"};
const BaseType kVlan{true, 0, 4095, {}};
const ColumnType kTagType{kVlan, std::nullopt, 0, 1, "set of up to 1 integers"};
const ColumnType kTrunksType{kVlan, std::nullopt, 0, 4096, "set of up to 4096 integers"};
const ColumnType kVlanModeType{BaseType{false, 0, 0, kVlanModes}, std::nullopt, 0, 1,
                               "set of up to 1 strings"};
const ColumnType kOfportRequestType{BaseType{true, 1, 65279, {}}, std::nullopt, 0, 1,
                                    "set of up to 1 integers"};
const ColumnType kMtuRequestType{BaseType{true, 1, INT64_MAX, {}}, std::nullopt, 0, 1,
                                 "set of up to 1 integers"};
const ColumnType kTypeType{BaseType{false}, std::nullopt, 1, 1, "string"};
const ColumnType kStringMap{BaseType{false}, BaseType{false}, 0, SIZE_MAX, "map of (string, string) pairs"};

VlanMode vlan_mode_of(std::string_view s) {
  if (s == "access") return VlanMode::access;
  if (s == "native-tagged") return VlanMode::native_tagged;
  if (s == "native-untagged") return VlanMode::native_untagged;
  return VlanMode::trunk;
}

const char* vlan_mode_text(VlanMode m) {
  switch (m) {
    case VlanMode::access:
      return "access";
    case VlanMode::trunk:
      return "trunk";
    case VlanMode::native_tagged:
      return "native-tagged";
    case VlanMode::native_untagged:
      return "native-untagged";
  }
  return "trunk";
}

// A column the word named: which table, which column.
struct Column {
  bool interface = false;
  std::string_view name;
};

Result<Column> find_column(std::string_view name, PortTable table) {
  if (table != PortTable::interface) {
    auto m = best_matches(kPortColumns, name);
    if (m.size() == 1) return Column{false, m[0]};
    if (m.size() > 1)
      return invalid("Port contains more than one column whose name matches \"" + std::string(name) +
                     "\": " + join(m));
    if (table == PortTable::port)
      return invalid("Port does not contain a column whose name matches \"" + std::string(name) + "\"");
  }
  auto m = best_matches(kInterfaceColumns, name);
  if (m.size() == 1) return Column{true, m[0]};
  if (m.size() > 1)
    return invalid("Interface contains more than one column whose name matches \"" + std::string(name) +
                   "\": " + join(m));
  if (table == PortTable::either)
    return invalid("neither Port nor Interface contains a column whose name matches \"" + std::string(name) +
                   "\"");
  return invalid("Interface does not contain a column whose name matches \"" + std::string(name) + "\"");
}

// The value of an optional integer column: absent for "[]".
Result<std::optional<int64_t>> optional_integer(std::string_view value, const ColumnType& t) {
  auto d = datum_from_string(value, t);
  if (!d) return std::move(d).take_status();
  if (d->empty()) return std::optional<int64_t>{};
  return std::optional<int64_t>{d->front().first.integer};
}

}  // namespace

Status apply_port_column(std::string_view word, PortTable table, PortOptions& po) {
  const std::string arg(word);
  std::string_view p = word;
  auto name = token_parse(p);
  if (!name) return std::move(name).take_status();
  if (name->empty()) return invalid(arg + ": missing column name");
  auto col = find_column(*name, table);
  if (!col) return std::move(col).take_status();
  std::optional<std::string> key;
  if (!p.empty() && p.front() == ':') {
    p.remove_prefix(1);
    auto k = token_parse(p);
    if (!k) return std::move(k).take_status();
    key = std::move(k.value());
  }
  if (p.size() < 2 || p.front() != '=')
    return invalid(arg + ": argument does not end in \"=\" followed by a value.");
  const std::string_view value = p.substr(1);
  const std::string_view c = col->name;
  const bool map = c == "options" || c == "other_config" || c == "external_ids";
  if (key && !map) return invalid("cannot specify key to set for non-map column " + std::string(c));
  const char* tbl = col->interface ? "Interface" : "Port";

  if (map) {
    // The keys keel knows: Interface other_config:pmd-rxq-affinity and
    // options:n_rxq. Any other key is named in the error.
    std::vector<std::pair<std::string, std::string>> kv;
    if (key) {
      Atom k, v;
      if (Status st = atom_from_string(*key, BaseType{false}, k, nullptr); !st.ok()) return st;
      if (Status st = atom_from_string(std::string(value), BaseType{false}, v, nullptr); !st.ok()) return st;
      kv.emplace_back(k.string, v.string);
    } else {
      auto d = datum_from_string(value, kStringMap);
      if (!d) return std::move(d).take_status();
      if (d->empty()) return {};  // `options={}`: nothing to set
      for (auto& [k, v] : *d) kv.emplace_back(k.string, v.string);
    }
    PortOptions next = po;
    std::string first;
    for (auto& [k, v] : kv) {
      if ((col->interface || table == PortTable::either) && c == "other_config" && k == "pmd-rxq-affinity") {
        auto a = datapath::Datapath::parse_rxq_affinity(v);
        if (!a) return std::move(a).take_status();
        next.rxq_affinity = v;
      } else if (col->interface && c == "options" && k == "n_rxq") {
        char* end = nullptr;
        errno = 0;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || errno || n < 1 || n > hal::Port::kMaxQueues)
          return invalid("options:n_rxq=" + v + ": the number of rx queues, 1.." +
                         std::to_string(hal::Port::kMaxQueues));
        next.n_rxq = static_cast<uint16_t>(n);
      } else if (col->interface && c == "options") {
        // A tunnel's options (remote_ip, key, ...): read by add_port once
        // the type is known (apply_tunnel_option); refused there for a
        // port that is not a tunnel.
        // (clang 14 can't capture a structured binding: name it first.)
        const std::string& key = k;
        std::erase_if(next.tunnel_options, [&key](const auto& e) { return e.first == key; });
        next.tunnel_options.emplace_back(k, v);
      } else if (first.empty()) {
        first = k;
      }
    }
    if (first.empty()) {
      po = std::move(next);
      return {};
    }
    if (c == "external_ids")
      return invalid(std::string(c) + ":" + first + ": keel does not keep external_ids (" + tbl + " column)");
    if (c == "options")
      return invalid(
          "options:" + first +
          ": keel takes no Interface options but n_rxq (a port's device and its settings are its --port spec)");
    return invalid("other_config:" + first + ": keel knows no " + tbl + " other_config key \"" + first +
                   "\"");
  }

  PortOptions next = po;
  if (c == "tag") {
    auto v = optional_integer(value, kTagType);
    if (!v) return std::move(v).take_status();
    next.tag = v->has_value() ? std::optional<uint16_t>(static_cast<uint16_t>(**v)) : std::nullopt;
  } else if (c == "trunks") {
    auto d = datum_from_string(value, kTrunksType);
    if (!d) return std::move(d).take_status();
    next.trunks.clear();
    for (const auto& [k, v] : *d) next.trunks.push_back(static_cast<uint16_t>(k.integer));
  } else if (c == "vlan_mode") {
    auto d = datum_from_string(value, kVlanModeType);
    if (!d) return std::move(d).take_status();
    if (d->empty()) {
      next.vlan_mode.reset();
    } else {
      const std::string& m = d->front().first.string;
      if (m == "dot1q-tunnel")
        return invalid(
            "vlan_mode dot1q-tunnel is not implemented by keel (it has access, native-tagged, "
            "native-untagged, trunk)");
      next.vlan_mode = vlan_mode_of(m);
    }
  } else if (c == "ofport_request") {
    auto v = optional_integer(value, kOfportRequestType);
    if (!v) return std::move(v).take_status();
    next.ofport = v->has_value() ? std::optional<uint32_t>(static_cast<uint32_t>(**v)) : std::nullopt;
  } else if (c == "mtu_request") {
    auto v = optional_integer(value, kMtuRequestType);
    if (!v) return std::move(v).take_status();
    if (v->has_value() && (**v < kMinMtu || **v > kMaxMtu))
      return invalid("mtu_request " + std::to_string(**v) + " is not in keel's range " +
                     std::to_string(kMinMtu) + " to " + std::to_string(kMaxMtu) + " (inclusive)");
    next.mtu_request = v->has_value() ? std::optional<uint32_t>(static_cast<uint32_t>(**v)) : std::nullopt;
  } else if (c == "type") {
    auto d = datum_from_string(value, kTypeType);
    if (!d) return std::move(d).take_status();
    const std::string& ty = d->front().first.string;
    if (Status st = check_interface_type(ty, {}, {}); !st.ok()) return st;
    next.type = ty;
  } else {
    return invalid(std::string(tbl) + " column " + std::string(c) + " is not implemented by keel (it takes " +
                   (col->interface ? "ofport_request, mtu_request, type" : "tag, trunks, vlan_mode") + ")");
  }
  po = std::move(next);
  return {};
}

Status parse_port_columns(std::span<const std::string> words, std::string_view port, PortOptions& po) {
  PortOptions next = po;
  PortTable table = PortTable::either;  // add-port's own words
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "--") {
      // The next command: empty, or `set TABLE RECORD COLUMN=VALUE...`.
      if (i + 1 >= words.size() || words[i + 1] == "--") continue;
      if (words[i + 1] != "set")
        return invalid("after --, add-port takes only `set Interface " + std::string(port) +
                       " COLUMN=VALUE...` or `set Port " + std::string(port) + " ...` (not '" + words[i + 1] +
                       "')");
      i += 1;
      size_t n = 0;
      while (i + 1 + n < words.size() && words[i + 1 + n] != "--") ++n;
      if (n < 3)
        return invalid(
            "'set' command requires at least 3 arguments (set TABLE RECORD COLUMN[:KEY]=VALUE...)");
      const std::string& tname = words[i + 1];
      auto m = best_matches(kTables, tname);
      if (m.empty()) return invalid("unknown table \"" + tname + "\"");
      if (m.size() > 1) return invalid("\"" + tname + "\" matches multiple table names: " + join(m));
      if (m[0] != "Port" && m[0] != "Interface")
        return invalid("set " + std::string(m[0]) +
                       ": add-port takes only `-- set Port` and `-- set Interface`");
      if (words[i + 2] != port)
        return invalid("no row \"" + words[i + 2] + "\" in table " + std::string(m[0]) +
                       " (add-port sets only " + std::string(port) + ")");
      table = m[0] == "Port" ? PortTable::port : PortTable::interface;
      i += 2;
      continue;
    }
    if (Status st = apply_port_column(words[i], table, next); !st.ok()) return st;
  }
  po = std::move(next);
  return {};
}

namespace {

// COLUMN[:KEY]=VALUE split as apply_port_column() splits it.
struct ColumnWord {
  std::string_view column;  // the schema's name
  std::optional<std::string> key;
  std::string_view value;
};

Result<ColumnWord> split_port_word(std::string_view word) {
  const std::string arg(word);
  std::string_view p = word;
  auto name = token_parse(p);
  if (!name) return std::move(name).take_status();
  if (name->empty()) return invalid(arg + ": missing column name");
  auto col = find_column(*name, PortTable::port);
  if (!col) return std::move(col).take_status();
  ColumnWord w;
  w.column = col->name;
  if (!p.empty() && p.front() == ':') {
    p.remove_prefix(1);
    auto k = token_parse(p);
    if (!k) return std::move(k).take_status();
    Atom a;
    if (Status st = atom_from_string(*k, BaseType{false}, a, nullptr); !st.ok()) return st;
    w.key = std::move(a.string);
  }
  if (p.size() < 2 || p.front() != '=')
    return invalid(arg + ": argument does not end in \"=\" followed by a value.");
  w.value = p.substr(1);
  return w;
}

constexpr std::string_view kBondModes[] = {"active-backup", "balance-slb", "balance-tcp"};
constexpr std::string_view kLacpModes[] = {"active", "passive", "off"};
const ColumnType kBondModeType{BaseType{false, 0, 0, kBondModes}, std::nullopt, 0, 1, "set of up to 1 strings"};
const ColumnType kLacpType{BaseType{false, 0, 0, kLacpModes}, std::nullopt, 0, 1, "set of up to 1 strings"};
const ColumnType kDelayType{BaseType{true}, std::nullopt, 1, 1, "integer"};

Result<uint64_t> other_config_uint(std::string_view key, const std::string& v, uint64_t max) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || v[0] == '-' || *end || errno || n > max)
    return invalid("other_config:" + std::string(key) + "=" + v + ": a number of 0.." + std::to_string(max));
  return static_cast<uint64_t>(n);
}

Result<bool> other_config_bool(std::string_view key, const std::string& v) {
  if (v == "true") return true;
  if (v == "false") return false;
  return invalid("other_config:" + std::string(key) + "=" + v + ": true or false");
}

}  // namespace

Status apply_bond_column(std::string_view word, BondSettings& s, PortOptions& po) {
  auto w = split_port_word(word);
  if (!w) return std::move(w).take_status();
  const std::string_view c = w->column;
  BondSettings next = s;
  if (c == "bond_mode") {
    auto d = datum_from_string(w->value, kBondModeType);
    if (!d) return std::move(d).take_status();
    next.mode = d->empty() ? BondMode::active_backup : *parse_bond_mode(d->front().first.string);
  } else if (c == "lacp") {
    auto d = datum_from_string(w->value, kLacpType);
    if (!d) return std::move(d).take_status();
    next.lacp = d->empty() ? LacpMode::off : *parse_lacp_mode(d->front().first.string);
  } else if (c == "bond_updelay" || c == "bond_downdelay") {
    auto d = datum_from_string(w->value, kDelayType);
    if (!d) return std::move(d).take_status();
    const int64_t ms = d->front().first.integer;
    if (ms < 0 || ms > INT32_MAX)
      return invalid(std::string(c) + "=" + std::to_string(ms) + ": a delay of 0.." + std::to_string(INT32_MAX) +
                     " ms");
    (c == "bond_updelay" ? next.updelay_ms : next.downdelay_ms) = static_cast<uint32_t>(ms);
  } else if (c == "other_config" && w->key) {
    const std::string& k = *w->key;
    Atom v;
    if (k == "bond-rebalance-interval" || k == "lb-output-action" || k == "bond-primary" ||
        k == "bond-hash-basis" || k == "lacp-time" || k == "lacp-fallback-ab") {
      if (Status st = atom_from_string(std::string(w->value), BaseType{false}, v, nullptr); !st.ok()) return st;
    }
    if (k == "bond-rebalance-interval") {
      auto n = other_config_uint(k, v.string, INT32_MAX);
      if (!n) return std::move(n).take_status();
      next.rebalance_interval_ms = static_cast<uint32_t>(*n);
    } else if (k == "bond-hash-basis") {
      auto n = other_config_uint(k, v.string, UINT32_MAX);
      if (!n) return std::move(n).take_status();
      next.hash_basis = static_cast<uint32_t>(*n);
    } else if (k == "lb-output-action" || k == "lacp-fallback-ab") {
      auto b = other_config_bool(k, v.string);
      if (!b) return std::move(b).take_status();
      (k == "lb-output-action" ? next.lb_output_action : next.lacp_fallback_ab) = *b;
    } else if (k == "bond-primary") {
      next.primary = v.string;
    } else if (k == "lacp-time") {
      if (v.string != "fast" && v.string != "slow")
        return invalid("other_config:lacp-time=" + v.string + ": fast or slow");
      next.lacp_fast = v.string == "fast";
    } else {
      return invalid("other_config:" + k +
                     ": keel knows no bond other_config key \"" + k +
                     "\" (it takes bond-rebalance-interval, lb-output-action, bond-primary, bond-hash-basis, "
                     "lacp-time, lacp-fallback-ab)");
    }
  } else {
    // tag, trunks, vlan_mode (and the errors for everything else).
    PortOptions p = po;
    if (Status st = apply_port_column(word, PortTable::port, p); !st.ok()) return st;
    po = std::move(p);
    return {};
  }
  s = std::move(next);
  return {};
}

Status parse_bond_columns(std::span<const std::string> words, std::string_view bond,
                          std::span<const std::string> members, BondColumns& out) {
  BondColumns next = out;
  next.ifaces.resize(members.size());
  // -1: the bond's own words (Port columns); else the member whose
  // Interface columns follow.
  long target = -1;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "--") {
      if (i + 1 >= words.size() || words[i + 1] == "--") continue;
      if (words[i + 1] != "set")
        return invalid("after --, add-bond takes only `set Interface IFACE COLUMN=VALUE...` or `set Port " +
                       std::string(bond) + " ...` (not '" + words[i + 1] + "')");
      i += 1;
      size_t n = 0;
      while (i + 1 + n < words.size() && words[i + 1 + n] != "--") ++n;
      if (n < 3)
        return invalid("'set' command requires at least 3 arguments (set TABLE RECORD COLUMN[:KEY]=VALUE...)");
      const std::string& tname = words[i + 1];
      auto m = best_matches(kTables, tname);
      if (m.empty()) return invalid("unknown table \"" + tname + "\"");
      if (m.size() > 1) return invalid("\"" + tname + "\" matches multiple table names: " + join(m));
      const std::string& rec = words[i + 2];
      if (m[0] == "Port") {
        if (rec != bond)
          return invalid("no row \"" + rec + "\" in table Port (add-bond sets only " + std::string(bond) + ")");
        target = -1;
      } else if (m[0] == "Interface") {
        auto it = std::find(members.begin(), members.end(), rec);
        if (it == members.end())
          return invalid("no row \"" + rec + "\" in table Interface (the bond's interfaces are named before "
                         "its columns)");
        target = it - members.begin();
      } else {
        return invalid("set " + std::string(m[0]) + ": add-bond takes only `-- set Port` and `-- set Interface`");
      }
      i += 2;
      continue;
    }
    if (target < 0) {
      if (Status st = apply_bond_column(words[i], next.settings, next.port); !st.ok()) return st;
    } else if (Status st = apply_port_column(words[i], PortTable::interface, next.ifaces[target]); !st.ok()) {
      return st;
    }
  }
  out = std::move(next);
  return {};
}

std::string format_bond_columns(const BondSettings& s, std::span<const PortConfig> members) {
  std::string out;
  auto add = [&out](const std::string& w) { out += (out.empty() ? "" : " ") + w; };
  const BondSettings d;
  add(std::string("bond_mode=") + to_string(s.mode));
  if (s.lacp != d.lacp) add(std::string("lacp=") + to_string(s.lacp));
  if (s.updelay_ms != d.updelay_ms) add("bond_updelay=" + std::to_string(s.updelay_ms));
  if (s.downdelay_ms != d.downdelay_ms) add("bond_downdelay=" + std::to_string(s.downdelay_ms));
  if (s.rebalance_interval_ms != d.rebalance_interval_ms)
    add("other_config:bond-rebalance-interval=" + std::to_string(s.rebalance_interval_ms));
  if (s.lb_output_action != d.lb_output_action)
    add(std::string("other_config:lb-output-action=") + (s.lb_output_action ? "true" : "false"));
  if (!s.primary.empty()) add("other_config:bond-primary=" + s.primary);
  if (s.hash_basis != d.hash_basis) add("other_config:bond-hash-basis=" + std::to_string(s.hash_basis));
  if (s.lacp_fast != d.lacp_fast) add(std::string("other_config:lacp-time=") + (s.lacp_fast ? "fast" : "slow"));
  if (s.lacp_fallback_ab != d.lacp_fallback_ab)
    add(std::string("other_config:lacp-fallback-ab=") + (s.lacp_fallback_ab ? "true" : "false"));
  if (!members.empty()) {
    // The VLAN words and the Interface words are add-port's.
    const std::string first = format_port_columns(members[0]);
    const size_t cut = first.find("-- set Interface ");
    const std::string vlan = first.substr(0, cut == std::string::npos ? first.size() : cut);
    if (!vlan.empty()) add(vlan.substr(0, vlan.find_last_not_of(' ') + 1));
    for (const PortConfig& m : members) {
      const std::string w = format_port_columns(m);
      const size_t at = w.find("-- set Interface ");
      if (at != std::string::npos) add(w.substr(at));
    }
  }
  return out;
}

bool port_has_tag(const PortConfig& p) {
  return p.tag_set || p.tag != 0 || (p.vlan_mode == VlanMode::access && !p.vlan_mode_set);
}

std::string format_port_columns(const PortConfig& p) {
  std::string s;
  auto add = [&s](const std::string& w) { s += (s.empty() ? "" : " ") + w; };
  const bool has_tag = port_has_tag(p);
  if (has_tag) add("tag=" + std::to_string(p.tag));
  if (!p.trunks.empty()) {
    std::string t;
    for (uint16_t v : p.trunks) t += (t.empty() ? "" : ",") + std::to_string(v);
    add("trunks=" + t);
  }
  if (p.vlan_mode_set || p.vlan_mode != (has_tag ? VlanMode::access : VlanMode::trunk))
    add(std::string("vlan_mode=") + vlan_mode_text(p.vlan_mode));
  if (p.tunnel) {
    // type and options first: ovs-vsctl creates the Interface with them.
    add("-- set Interface " + p.name + " type=" + std::string(tunnel_type_name(p.tunnel->options.type)) + " " +
        format_tunnel_options(p.tunnel->options) + " ofport_request=" + std::to_string(p.ofport));
    return s;
  }
  add("-- set Interface " + p.name + " ofport_request=" + std::to_string(p.ofport));
  if (p.mtu_request) add("mtu_request=" + std::to_string(*p.mtu_request));
  if (p.n_rxq) add("options:n_rxq=" + std::to_string(*p.n_rxq));
  if (!p.rxq_affinity.empty()) add("other_config:pmd-rxq-affinity=" + p.rxq_affinity);
  return s;
}

Status check_interface_type(std::string_view type, std::string_view port, std::string_view kind) {
  // Open vSwitch types keel has no port for (a tunnel or a patch is not a
  // --port spec; vhost-user ports are the host's job here).
  static constexpr std::string_view kOvsOnly[] = {
      "afxdp", "afxdp-nonpmd", "bareudp", "dpdkvhostuser", "dpdkvhostuserclient", "erspan", "gtpu",
      "ip6erspan", "ip6gre", "lisp", "patch", "srv6", "stt"};
  // Tunnels (vxlan, geneve, gre) are ports with no --port spec behind them.
  if (parse_tunnel_type(type)) {
    if (kind.empty()) return {};
    return invalid("type=" + std::string(type) + ": port " + std::string(port) + " is a " + std::string(kind) +
                   " port (a tunnel port is a name no --port spec has)");
  }
  const bool any = type.empty() || type == "system" || type == "internal";
  const bool software = type == "dummy" || type == "dummy-pmd";
  if (!any && !software && type != "dpdk" && type != "tap") {
    for (std::string_view t : kOvsOnly)
      if (t == type)
        return invalid("type=" + std::string(type) + ": keel has no ports of Open vSwitch type " +
                       std::string(type) + " (its ports are its --port specs)");
    return invalid(
        "type=" + std::string(type) +
        ": unknown interface type (keel takes \"\", system, internal, dummy, dummy-pmd, tap, dpdk)");
  }
  if (kind.empty() || any) return {};
  const bool sim = kind == "pcap" || kind == "ring" || kind == "null" || kind == "sample";
  if ((software && sim) || type == kind) return {};
  return invalid("type=" + std::string(type) + ": port " + std::string(port) + " is a " + std::string(kind) +
                 " port (its --port spec decides; type=" + (sim ? "dummy" : std::string(kind)) +
                 " matches it)");
}

}  // namespace keel::ofproto

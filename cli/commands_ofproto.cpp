// OpenFlow commands: bridges and ports (`add-br`, `del-br`, `add-port`,
// `del-port`, bare `show` like `ovs-vsctl show`), rules (`add-flow`,
// `add-flows`, `mod-flows`, `del-flows`, `dump-flows` like `ovs-ofctl`),
// and the controller queue (`dump-controller`). Every command validates
// first and then applies whole or not at all. Running-config: section
// "bridges" (order 200: add-br, add-port with its columns in ovs-vsctl's
// syntax, ofproto/port_columns.h) and section
// "rules" (order 500: add-flow lines).
//
// Threads: the callbacks run on whichever thread executes the tree (the
// console, an SSH session), inside Control::run, which holds the Ofproto
// writer mutex for them (declared locks_ofproto; the maintenance thread
// expires rules under it too).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "control/config_store.h"
#include "control/system.h"
#include "flow/of_actions.h"
#include "flow/of_match_syntax.h"
#include "keel/hal/cpu.h"
#include "keel/hal/port_spec.h"
#include "ofproto/ofproto.h"
#include "ofproto/port_columns.h"
#include "ofproto/tlv_map.h"
#include "ofproto/udpif.h"

namespace keel::cli {

namespace {

using ofproto::Bridge;
using ofproto::FlowMod;
using ofproto::OfRule;
using ofproto::VlanMode;

// Values bound to this file's options; reset before each parse of one of
// its commands (CLI11 leaves a variable alone when its option is absent).
struct OfArgs {
  std::string bridge, port, file, vlan_mode, trunks;
  std::vector<std::string> words, columns;
  uint32_t ofport = 0;
  uint16_t tag = 0;
  bool strict = false, bundle = false, peek = false, no_stats = false;
  void reset() { *this = OfArgs{}; }
};

std::optional<VlanMode> parse_vlan_mode(std::string_view s) {
  if (s == "access") return VlanMode::access;
  if (s == "trunk") return VlanMode::trunk;
  if (s == "native-tagged") return VlanMode::native_tagged;
  if (s == "native-untagged") return VlanMode::native_untagged;
  return std::nullopt;
}

// The value of an Interface mtu_request column (ovs-vsctl: a number, or []
// for none). The range is checked by ofproto.
Result<std::optional<uint32_t>> parse_mtu_request(std::string_view v, bool allow_empty) {
  if (allow_empty && v == "[]") return std::optional<uint32_t>{};
  uint64_t n = 0;
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string_view::npos)
    return invalid("mtu_request: '" + std::string(v) + "' is not a number" +
                   (allow_empty ? " (or [] for none)" : ""));
  for (char c : v) n = n * 10 + static_cast<uint64_t>(c - '0');
  return std::optional<uint32_t>{static_cast<uint32_t>(n)};
}

Result<std::vector<uint16_t>> parse_trunks(std::string_view s) {
  std::vector<uint16_t> v;
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    if (item.empty()) continue;
    unsigned long n = 0;
    bool ok = item.size() <= 4;
    for (char c : item) ok = ok && c >= '0' && c <= '9', n = n * 10 + static_cast<unsigned long>(c - '0');
    if (!ok || n > 4095) return invalid("--trunks: '" + std::string(item) + "' is not a VLAN (0..4095)");
    v.push_back(static_cast<uint16_t>(n));
  }
  return v;
}

std::string trunks_text(const std::vector<uint16_t>& t, const char* sep) {
  std::string s;
  for (uint16_t v : t) s += (s.empty() ? "" : sep) + std::to_string(v);
  return s;
}

// Port names in flows: the bridge's ports and the bridge's own name (LOCAL).
flow::OfParseOptions parse_options(const Bridge& b) {
  flow::OfParseOptions o;
  auto ports = b.ports();
  std::string self = b.name();
  o.port_number = [ports, self](std::string_view name) -> std::optional<uint32_t> {
    if (const auto* p = ports->by_name(name)) return p->ofport;
    if (name == self) return flow::kOfppLocal;
    return std::nullopt;
  };
  o.tlv = ofproto::switch_tlv_maps().table(b.name());  // tun_metadataN as the bridge maps it
  return o;
}

// What ovs-ofctl reads in a mod/del/dump flow text that keel's match parser
// does not: out_port=P, table=255 ("every table"), and whether cookie had a
// mask. Those words are blanked out (same length, so error columns stay
// right) before the text goes to parse_of_flow().
struct Selection {
  std::string text;
  uint32_t out_port = flow::kOfppNone;
  bool cookie_has_mask = false;
};

Result<Selection> pre_parse(std::string text, const flow::OfParseOptions& opts, bool allow_out_port) {
  Selection sel;
  size_t i = 0;
  auto sep = [](char c) { return c == ',' || c == ' ' || c == '\t'; };
  while (i < text.size()) {
    while (i < text.size() && sep(text[i])) ++i;
    size_t start = i;
    while (i < text.size() && !sep(text[i])) ++i;
    std::string_view tok(text.data() + start, i - start);
    if (tok.rfind("actions=", 0) == 0 || tok.rfind("action=", 0) == 0) break;
    size_t eq = tok.find_first_of("=:");
    if (eq == std::string_view::npos) continue;
    std::string_view key = tok.substr(0, eq), value = tok.substr(eq + 1);
    if (key == "out_port") {
      if (!allow_out_port)
        return invalid("out_port at column " + std::to_string(start + 1) + ": only del-flows and dump-flows take it");
      std::optional<uint32_t> p;
      static const std::pair<std::string_view, uint32_t> kReserved[] = {
          {"IN_PORT", flow::kOfppInPort}, {"TABLE", flow::kOfppTable}, {"NORMAL", flow::kOfppNormal},
          {"FLOOD", flow::kOfppFlood},    {"ALL", flow::kOfppAll},     {"CONTROLLER", flow::kOfppController},
          {"LOCAL", flow::kOfppLocal},    {"ANY", flow::kOfppNone},    {"NONE", flow::kOfppNone}};
      for (const auto& [n, v] : kReserved)
        if (value == n) p = v;
      if (!p && !value.empty() && value.find_first_not_of("0123456789") == std::string_view::npos && value.size() <= 5) {
        unsigned long n = std::stoul(std::string(value));
        if (n <= 0xffff) p = static_cast<uint32_t>(n);
      }
      if (!p && opts.port_number) p = opts.port_number(value);
      if (!p)
        return invalid("unknown port '" + std::string(value) + "' at column " + std::to_string(start + eq + 2) +
                       " (out_port)");
      sel.out_port = *p;
      std::fill(text.begin() + static_cast<long>(start), text.begin() + static_cast<long>(i), ' ');
    } else if (key == "table" && value == "255") {
      std::fill(text.begin() + static_cast<long>(start), text.begin() + static_cast<long>(i), ' ');
    } else if (key == "cookie" && value.find('/') != std::string_view::npos) {
      sel.cookie_has_mask = true;
    }
  }
  sel.text = std::move(text);
  return sel;
}

// A flow text -> FlowMod. need_actions: add/modify; no_actions: delete.
Result<FlowMod> make_flow_mod(const Bridge& b, std::string text, FlowMod::Command cmd) {
  const bool add = cmd == FlowMod::Command::add;
  const bool modify = cmd == FlowMod::Command::modify || cmd == FlowMod::Command::modify_strict;
  const flow::OfParseOptions opts = parse_options(b);
  FlowMod fm;
  fm.command = cmd;
  if (!add) {
    auto sel = pre_parse(std::move(text), opts, !modify);
    if (!sel) return std::move(sel).take_status();
    text = std::move(sel->text);
    fm.out_port = sel->out_port;
    fm.cookie_has_mask = sel->cookie_has_mask;
  } else {
    // add: table=255 is an error of the parser's range check; out_port is
    // an unknown field there too.
    for (size_t p = text.find("cookie="); p != std::string::npos; p = text.find("cookie=", p + 1)) {
      size_t end = text.find_first_of(", \t", p);
      if (text.substr(p, end == std::string::npos ? std::string::npos : end - p).find('/') != std::string::npos)
        fm.cookie_has_mask = true;
    }
  }
  auto f = flow::parse_of_flow(text, opts);
  if (!f) return std::move(f).take_status();
  fm.flow = std::move(f.value());
  if ((add || modify) && !fm.flow.has_actions) return invalid("missing 'actions=' (e.g. '... actions=output:2')");
  if (!add && !modify && fm.flow.has_actions) return invalid("a delete takes no actions");
  if (add && fm.cookie_has_mask) return invalid("flow additions cannot use a cookie mask");
  if (add || modify) {
    auto a = flow::parse_of_actions(fm.flow.actions, opts, fm.flow.actions_column);
    if (!a) return std::move(a).take_status();
    fm.actions = std::move(a.value());
  }
  return fm;
}

std::string quote(const std::string& s) {
  if (s.find_first_of(" \t\"'\\") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

// The add-flow text that recreates `r` (numbers for ports: stable across a
// replay because add-port lines carry ofport_request).
std::string rule_text(const OfRule& r) {
  flow::OfFlow f;
  f.match = r.match;
  f.meta.priority = r.priority;
  if (r.table_id) f.meta.table = r.table_id;
  f.meta.has_cookie = r.cookie != 0;
  f.meta.cookie = r.cookie;
  f.meta.cookie_mask = UINT64_MAX;
  f.meta.idle_timeout = r.idle_timeout;
  f.meta.hard_timeout = r.hard_timeout;
  f.meta.importance = r.importance;
  f.meta.send_flow_rem = r.send_flow_rem;
  f.meta.no_packet_counts = r.no_packet_counts;
  f.meta.no_byte_counts = r.no_byte_counts;
  f.has_actions = true;
  f.actions = flow::format_of_actions(r.actions);
  return flow::format_of_flow(f);
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(Errc::not_found, "'" + path + "': cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return error(Errc::io_error, "'" + path + "': read error");
  return ss.str();
}

std::string hex(const std::vector<uint8_t>& d) {
  static const char* x = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) s += x[b >> 4], s += x[b & 15];
  return s;
}

const char* reason_text(flow::OfPacketInReason r) {
  switch (r) {
    case flow::OfPacketInReason::no_match: return "no_match";
    case flow::OfPacketInReason::action: return "action";
    case flow::OfPacketInReason::invalid_ttl: return "invalid_ttl";
    case flow::OfPacketInReason::action_set: return "action_set";
    case flow::OfPacketInReason::group: return "group";
    case flow::OfPacketInReason::packet_out: return "packet_out";
  }
  return "action";
}

// --- show: what `ovs-vsctl show` prints -------------------------------------
//
// ovs-vsctl show (lib/db-ctl-base.c cmd_show_row with ovs-vsctl.c's
// cmd_show_tables) walks the database from the Open_vSwitch row, printed as
// its uuid, and prints of each row only these columns, when not at their
// default: Bridge: controller, fail_mode, datapath_type, ports; Port: tag,
// trunks, interfaces; Interface: type, options, error, bfd_status. A set of
// references (Open_vSwitch bridges, Bridge ports, Port interfaces) is an
// ovsdb set, kept sorted by the referenced rows' uuids: that is the order
// the rows come out in. Values print as ovsdb_datum_to_string() does.
//
// keel's rows: the switch's UUID (ConfigStore::switch_uuid()), and for each
// bridge, port and interface a name-based UUID under it (control::name_uuid),
// so the order is Open vSwitch's rule and stays the same across reboots.
// fail_mode: a keel bridge with no rule for a packet drops it and never
// adds a rule of its own: Open vSwitch's "secure". datapath_type: netdev
// (the userspace datapath). The internal port has type internal; a
// datapath port's type is its --port kind and its options what the spec
// gives (required parameters, and optional ones not at their default).

// ovsdb_atom_to_string() of a string: bare when it looks like an identifier
// (ovsdb-data.c string_needs_quotes), else as a JSON string.
std::string ovsdb_string(std::string_view s) {
  auto alpha = [](unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto digit = [](unsigned char c) { return c >= '0' && c <= '9'; };
  bool bare = !s.empty() && (alpha(static_cast<unsigned char>(s[0])) || s[0] == '_');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (!alpha(c) && !digit(c) && c != '_' && c != '-' && c != '.') bare = false;
  }
  std::string lower(s);
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (s == "true" || s == "false" || control::is_uuid(lower)) bare = false;
  if (bare) return std::string(s);
  std::string q = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        q += "\\\"";
        break;
      case '\\':
        q += "\\\\";
        break;
      case '\b':
        q += "\\b";
        break;
      case '\f':
        q += "\\f";
        break;
      case '\n':
        q += "\\n";
        break;
      case '\r':
        q += "\\r";
        break;
      case '\t':
        q += "\\t";
        break;
      default:
        if (c < 0x20) {
          char u[8];
          snprintf(u, sizeof u, "\\u%04x", c);
          q += u;
        } else {
          q += ch;
        }
    }
  }
  return q + "\"";
}

struct ShowInterface {
  std::string uuid, name, type;
  std::vector<std::pair<std::string, std::string>> options;  // sorted by key
};
struct ShowPort {
  std::string uuid, name;
  std::optional<uint16_t> tag;
  std::vector<uint16_t> trunks;
  std::vector<ShowInterface> ifaces;  // one, or a bond's members (sorted by uuid, as ovsdb sets)
};

// An Interface's type and options from its datapath port's spec.
void describe_interface(const hal::PortSpec& ps, ShowInterface& i) {
  i.type = hal::to_string(ps.kind);
  auto& o = i.options;
  switch (ps.kind) {
    case hal::PortKind::pcap:
      if (!ps.pcap_in.empty()) o.emplace_back("in", ps.pcap_in);
      if (ps.loops != 1) o.emplace_back("loop", std::to_string(ps.loops));
      if (!ps.pcap_out.empty()) o.emplace_back("out", ps.pcap_out);
      break;
    case hal::PortKind::ring:
      if (ps.ring_size != hal::PortSpec{}.ring_size) o.emplace_back("size", std::to_string(ps.ring_size));
      break;
    case hal::PortKind::tap:
      o.emplace_back("ifname", ps.ifname);
      break;
    case hal::PortKind::sample:
      if (ps.pps != hal::PortSpec{}.pps) o.emplace_back("pps", std::to_string(ps.pps));
      break;
    case hal::PortKind::dpdk:
      o.emplace_back("dpdk-devargs", ps.devargs);
      break;
    case hal::PortKind::null:
      break;
  }
  std::sort(o.begin(), o.end());
}

std::string show_switch(CommandTree::Impl& t, bool json) {
  static const std::string boot_uuid = control::random_uuid();  // no config directory
  const std::string& sw = t.config_store ? t.config_store->switch_uuid() : boot_uuid;
  std::map<std::string, hal::PortSpec> specs;  // datapath port name -> spec
  for (const control::PortView& pv : t.sys.ports())
    if (auto ps = hal::parse_port_spec(pv.name, pv.spec)) specs[pv.name] = std::move(ps.value());

  struct ShowBridge {
    std::string uuid, name;
    std::vector<ShowPort> ports;
  };
  std::vector<ShowBridge> bridges;
  {
    ofproto::Ofproto& of = t.sys.ofproto();
    for (Bridge* b : of.bridges()) {
      ShowBridge sb{control::name_uuid(sw, "Bridge " + b->name()), b->name(), {}};
      auto row = [&](const std::string& name) {
        ShowPort p;
        p.uuid = control::name_uuid(sw, "Port " + name);
        p.name = name;
        return p;
      };
      auto iface = [&](const std::string& name) {
        ShowInterface i;
        i.uuid = control::name_uuid(sw, "Interface " + name);
        i.name = name;
        if (auto it = specs.find(name); it != specs.end()) describe_interface(it->second, i);
        return i;
      };
      ShowPort local = row(b->name());
      local.ifaces.push_back(iface(b->name()));
      local.ifaces.back().type = "internal";
      local.ifaces.back().options.clear();
      sb.ports.push_back(std::move(local));
      for (const auto& pc : b->ports()->ports) {
        // A bond is one Port whose Interfaces are its members (listed at
        // its first member).
        if (pc.bond_obj && pc.ofport != pc.bond_ofport) continue;
        ShowPort p = row(pc.bond_obj ? pc.bond : pc.name);
        if (ofproto::port_has_tag(pc)) p.tag = pc.tag;
        p.trunks = pc.trunks;
        std::sort(p.trunks.begin(), p.trunks.end());
        if (pc.bond_obj) {
          for (const auto& m : b->ports()->ports)
            if (m.bond == pc.bond) p.ifaces.push_back(iface(m.name));
          std::sort(p.ifaces.begin(), p.ifaces.end(),
                    [](const ShowInterface& x, const ShowInterface& y) { return x.uuid < y.uuid; });
        } else {
          p.ifaces.push_back(iface(pc.name));
        }
        sb.ports.push_back(std::move(p));
      }
      std::sort(sb.ports.begin(), sb.ports.end(),
                [](const ShowPort& x, const ShowPort& y) { return x.uuid < y.uuid; });
      bridges.push_back(std::move(sb));
    }
  }
  std::sort(bridges.begin(), bridges.end(),
            [](const ShowBridge& x, const ShowBridge& y) { return x.uuid < y.uuid; });

  if (json) {
    Json j;
    j.begin_object().field("uuid", sw).begin_array("bridges");
    for (const ShowBridge& b : bridges) {
      j.begin_object().field("uuid", b.uuid).field("name", b.name).field("fail_mode", "secure");
      j.field("datapath_type", "netdev").begin_array("ports");
      for (const ShowPort& p : b.ports) {
        j.begin_object().field("uuid", p.uuid).field("name", p.name);
        if (p.tag)
          j.field("tag", static_cast<uint64_t>(*p.tag));
        else
          j.null_field("tag");
        j.begin_array("trunks");
        for (uint16_t v : p.trunks) j.field({}, static_cast<uint64_t>(v));
        j.end_array().begin_array("interfaces");
        for (const ShowInterface& i : p.ifaces) {
          j.begin_object().field("uuid", i.uuid).field("name", i.name).field("type", i.type);
          j.begin_object("options");
          for (const auto& [k, v] : i.options) j.field(k, v);
          j.end_object().end_object();
        }
        j.end_array().end_object();
      }
      j.end_array().end_object();
    }
    j.end_array().end_object();
    return j.str() + "\n";
  }
  std::string s = sw + "\n";
  for (const ShowBridge& b : bridges) {
    s += "    Bridge " + ovsdb_string(b.name) + "\n";
    s += "        fail_mode: secure\n";
    s += "        datapath_type: netdev\n";
    for (const ShowPort& p : b.ports) {
      s += "        Port " + ovsdb_string(p.name) + "\n";
      if (p.tag) s += "            tag: " + std::to_string(*p.tag) + "\n";
      if (!p.trunks.empty()) s += "            trunks: [" + trunks_text(p.trunks, ", ") + "]\n";
      for (const ShowInterface& in : p.ifaces) {
        s += "            Interface " + ovsdb_string(in.name) + "\n";
        if (!in.type.empty()) s += "                type: " + ovsdb_string(in.type) + "\n";
        if (!in.options.empty()) {
          s += "                options: {";
          for (size_t i = 0; i < in.options.size(); ++i)
            s += (i ? ", " : "") + ovsdb_string(in.options[i].first) + "=" + ovsdb_string(in.options[i].second);
          s += "}\n";
        }
      }
    }
  }
  return s;
}

}  // namespace

void add_ofproto_commands(CommandTree::Impl& t) {
  // Declarations (command_tree_impl.h: CommandDecl): every bridge, port
  // and rule command holds the Ofproto writer mutex (Control takes it).
  t.declare("show", control::Access::show, false, kLocksOfproto);
  t.declare("add-br", control::Access::change, false, kLocksOfproto);
  t.declare("del-br", control::Access::change, false, kLocksOfproto);
  t.declare("add-port", control::Access::change, false, kLocksOfproto);
  t.declare("set interface", control::Access::change, false, kLocksOfproto);
  t.declare("set port", control::Access::change, false, kLocksOfproto);
  t.declare("del-port", control::Access::change, false, kLocksOfproto);
  t.declare("add-flow", control::Access::change, false, kLocksOfproto);
  t.declare("add-flows", control::Access::change, false, kLocksOfproto);
  t.declare("mod-flows", control::Access::change, false, kLocksOfproto);
  t.declare("del-flows", control::Access::change, false, kLocksOfproto);
  t.declare("dump-flows", control::Access::show, false, kLocksOfproto);
  t.declare("dump-controller", control::Access::change, false, kLocksOfproto);

  auto a = std::make_shared<OfArgs>();
  ofproto::Ofproto& of = t.sys.ofproto();
  // Every command: reset the bound values first; (Control holds the writer
  // lock) reclaim what readers released when done.
  auto cmd = [&t, a](const std::string& name, const std::string& help) {
    CLI::App* c = t.app.add_subcommand(name, help);
    c->preparse_callback([a](size_t) { a->reset(); });
    return c;
  };
  // What translation depends on, cheaply: rule generations and port maps.
  // A command that changes it wakes the revalidator, so forwarding follows
  // at once rather than at the next interval.
  auto xlate_inputs = [&of] {
    uintptr_t sig = of.bridges().size();
    for (Bridge* b : of.bridges())
      sig = sig * 31 + b->rules_generation() + reinterpret_cast<uintptr_t>(b->ports().get());
    return sig;
  };
  auto run = [&t, &of, xlate_inputs](auto&& body) {
    return [&t, &of, xlate_inputs, body] {
      bool changed;
      {
        const uintptr_t before = xlate_inputs();
        body();
        changed = xlate_inputs() != before;
        of.reclaim();
      }
      if (changed)
        if (ofproto::Udpif* u = t.sys.udpif()) u->kick();
    };
  };
  auto need_bridge = [&t, &of](const std::string& name) -> Bridge* {
    Bridge* b = of.find_bridge(name);
    if (!b) t.status = error(Errc::not_found, "no bridge " + name);
    return b;
  };

  // --- bridges and ports ---
  auto* addbr = cmd("add-br", "create a bridge (an OpenFlow switch)");
  addbr->add_option("BR", a->bridge, "bridge name")->required();
  addbr->callback(run([&t, &of, a] { t.status = of.add_bridge(a->bridge); }));

  auto* delbr = cmd("del-br", "delete a bridge, its ports and rules");
  delbr->add_option("BR", a->bridge, "bridge name")->required();
  delbr->callback(run([&t, &of, a] { t.status = of.del_bridge(a->bridge); }));

  // add-port takes ovs-vsctl's column words (ofproto/port_columns.h) or
  // keel's older --ofport/--tag/--trunks/--vlan-mode options (configs saved
  // before the column words print those), not both at once.
  auto* addport = cmd("add-port", "add a datapath port to a bridge: add-port BR PORT [COLUMN=VALUE...] "
                                  "[-- set Interface PORT COLUMN=VALUE...]");
  t.vsctl_commands.push_back("add-port");
  addport->add_option("BR", a->bridge, "bridge name")->required();
  addport->add_option("PORT", a->port, "port name")->required();
  addport->add_option("COLUMNS", a->words,
                      "ovs-vsctl column words: tag=N trunks=N,N vlan_mode=M ofport_request=N mtu_request=N type=T");
  auto* o_ofport = addport->add_option("--ofport", a->ofport, "OpenFlow port number (default: lowest free)")
                       ->check(CLI::Range(1, 0xfeff));
  auto* o_tag = addport->add_option("--tag", a->tag, "VLAN of an access port, native VLAN of a trunk")
                    ->check(CLI::Range(0, 4095));
  auto* o_trunks = addport->add_option("--trunks", a->trunks, "VLANs a trunk carries, e.g. 1,2,3 (default: all)");
  auto* o_mode = addport->add_option("--vlan-mode", a->vlan_mode, "VLAN mode")
                     ->check(CLI::IsMember({"access", "trunk", "native-tagged", "native-untagged"}));
  addport->callback(run([&t, &of, a, o_ofport, o_tag, o_trunks, o_mode] {
    ofproto::PortOptions po;
    const bool dashed = o_ofport->count() || o_tag->count() || o_trunks->count() || o_mode->count();
    if (dashed && !a->words.empty()) {
      t.status = invalid("add-port: give either ovs-vsctl column words (tag=10) or --tag-style options, not both");
      return;
    }
    if (o_ofport->count()) po.ofport = a->ofport;
    if (o_tag->count()) po.tag = a->tag;
    if (o_trunks->count()) {
      auto tr = parse_trunks(a->trunks);
      if (!tr) {
        t.status = std::move(tr).take_status();
        return;
      }
      po.trunks = std::move(tr.value());
    }
    if (o_mode->count()) po.vlan_mode = parse_vlan_mode(a->vlan_mode);
    for (std::string& w : a->words)
      if (w == CommandTree::Impl::kVsctlSeparator) w = "--";
    if (Status st = ofproto::parse_port_columns(a->words, a->port, po); !st.ok()) {
      t.status = std::move(st);
      return;
    }
    t.status = of.add_port(a->bridge, a->port, po);
  }));

  // `set interface PORT mtu_request=N|[]` (ovs-vsctl's form; the only
  // column it sets). `set` itself is the datapath tunables' command.
  if (CLI::App* set = t.app.get_subcommand("set")) {
    auto* setif =
        set->add_subcommand("interface",
                            "set an interface column: set interface PORT mtu_request=N|[] | "
                            "other_config:pmd-rxq-affinity=Q:CORE,... | options:n_rxq=N");
    setif->preparse_callback([a](size_t) { a->reset(); });
    setif->add_option("PORT", a->port, "port name")->required();
    setif
        ->add_option(
            "COLUMN", a->columns,
            "mtu_request=N (68..9216), or mtu_request=[] to drop the request (the MTU stays until del-port); "
            "other_config:pmd-rxq-affinity=Q:CORE,... (rx queue Q on the PMD of core CORE; \"\" removes it); "
            "options:n_rxq=N (1..16 rx queues)")
        ->required()
        ->expected(1);
    setif->callback(run([&t, &of, a] {
      const std::string& c = a->columns.at(0);
      if (c.rfind("other_config", 0) == 0 || c.rfind("options", 0) == 0) {
        // other_config:pmd-rxq-affinity=Q:CORE,... / options:n_rxq=N
        ofproto::PortOptions po;
        if (Status st = ofproto::apply_port_column(c, ofproto::PortTable::interface, po); !st.ok()) {
          t.status = std::move(st);
          return;
        }
        t.status = of.set_interface_queues(a->port, po);
        return;
      }
      if (c.rfind("mtu_request=", 0) != 0) {
        t.status = invalid("set interface: unknown column '" + c +
                           "' (expected mtu_request=N, other_config:pmd-rxq-affinity=Q:CORE,... or options:n_rxq=N)");
        return;
      }
      auto m = parse_mtu_request(std::string_view(c).substr(12), true);
      if (!m) {
        t.status = std::move(m).take_status();
        return;
      }
      t.status = of.set_mtu_request(a->port, m.value());
    }));
  }

  // `set port PORT COLUMN=VALUE...`: ovs-vsctl's `set Port PORT ...` for
  // the VLAN columns of a port already on a bridge; the columns not named
  // keep their values (the port's current options, read back through the
  // running-config words, are the starting point).
  CLI::App* setport = t.app.get_subcommand("set")->add_subcommand(
      "port", "ovs-vsctl set Port: set port PORT tag=N trunks=N,N vlan_mode=M (the others unchanged); for a "
      "bond also bond_mode, lacp, bond_updelay, bond_downdelay, other_config:KEY=VALUE (add-bond's columns)");
  setport->ignore_case();
  setport->preparse_callback([a](size_t) { a->reset(); });
  setport->add_option("PORT", a->port, "a port on a bridge")->required();
  setport->add_option("COLUMNS", a->words, "COLUMN=VALUE words of the Port table: tag, trunks, vlan_mode")->required();
  setport->callback(run([&t, &of, a] {
    if (const ofproto::BondPort* bp = of.find_bond(a->port)) {
      // A bond: its settings and VLAN columns, the ones not named unchanged.
      ofproto::BondSettings s = bp->bond->settings();
      ofproto::PortOptions po;
      if (const auto* m = bp->bridge->ports()->by_name(bp->members.at(0))) {
        std::istringstream in(ofproto::format_port_columns(*m));
        std::vector<std::string> now;
        for (std::string w; in >> w && w != "--";) now.push_back(w);
        if (Status st = ofproto::parse_port_columns(now, a->port, po); !st.ok()) {
          t.status = std::move(st);
          return;
        }
      }
      for (const std::string& w : a->words)
        if (Status st = ofproto::apply_bond_column(w, s, po); !st.ok()) {
          t.status = std::move(st);
          return;
        }
      t.status = of.set_bond(a->port, s, po);
      return;
    }
    const ofproto::PortConfig* cur = nullptr;
    for (Bridge* b : of.bridges())
      if (const auto* p = b->ports()->by_name(a->port)) cur = p;
    if (!cur || cur->bond_obj) {  // a bond's member is an Interface, not a Port
      t.status = error(Errc::not_found, "no row \"" + a->port + "\" in table Port");
      return;
    }
    ofproto::PortOptions po;
    std::vector<std::string> now;
    std::istringstream in(ofproto::format_port_columns(*cur));
    for (std::string w; in >> w;) now.push_back(w);
    if (Status st = ofproto::parse_port_columns(now, a->port, po); !st.ok()) {
      t.status = std::move(st);  // cannot happen: the words are format_port_columns'
      return;
    }
    for (const std::string& w : a->words)
      if (Status st = ofproto::apply_port_column(w, ofproto::PortTable::port, po); !st.ok()) {
        t.status = std::move(st);
        return;
      }
    t.status = of.set_port_vlan(a->port, po);
  }));

  auto* delport = cmd("del-port", "remove a port from its bridge: del-port [BR] PORT");
  delport->add_option("ARGS", a->words, "[bridge] port")->required()->expected(1, 2);
  delport->callback(run([&t, &of, a] {
    if (a->words.size() == 2) t.status = of.del_port(a->words[0], a->words[1]);
    else t.status = of.del_port({}, a->words[0]);
  }));

  // Bare `show`: like `ovs-vsctl show` (see show_switch()).
  CLI::App* show = t.app.get_subcommand("show");
  show->require_subcommand(0, 1);
  show->description("show state: bridges (like ovs-vsctl show), or board, ports, ...");
  t.add_format(show);
  show->callback([&t, show] {
    if (!show->get_subcommands().empty()) return;  // show board, show ports, ...
    t.print(show_switch(t, t.format == "json"));
  });

  // --- rules ---
  auto* addflow = cmd("add-flow", "add a rule: add-flow BR FLOW (ovs-ofctl syntax)");
  addflow->add_option("BR", a->bridge, "bridge name")->required();
  addflow->add_option("FLOW", a->words, "match and actions, e.g. priority=100,ip,nw_dst=10.0.0.0/8,actions=output:2")
      ->required();
  addflow->callback(run([&t, a, need_bridge] {
    Bridge* b = need_bridge(a->bridge);
    if (!b) return;
    auto fm = make_flow_mod(*b, join_words(a->words), FlowMod::Command::add);
    if (!fm) {
      t.status = std::move(fm).take_status();
      return;
    }
    auto r = b->flow_mod(*fm);
    if (!r) t.status = std::move(r).take_status();
  }));

  auto* addflows = cmd("add-flows", "add the rules of FILE (one per line, # comments), all or nothing");
  addflows->add_option("BR", a->bridge, "bridge name")->required();
  addflows->add_option("FILE", a->file, "a file of flows")->required();
  addflows->add_flag("--bundle", a->bundle, "accepted: a file is always one atomic bundle");
  addflows->callback(run([&t, a, need_bridge] {
    Bridge* b = need_bridge(a->bridge);
    if (!b) return;
    auto text = read_file(a->file);
    if (!text) {
      t.status = std::move(text).take_status();
      return;
    }
    std::vector<FlowMod> fms;
    std::vector<size_t> line_of;
    std::istringstream in(*text);
    std::string line;
    for (size_t n = 1; std::getline(in, line); ++n) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      size_t first = line.find_first_not_of(" \t");
      if (first == std::string::npos || line[first] == '#') continue;
      auto fm = make_flow_mod(*b, line, FlowMod::Command::add);
      if (!fm) {
        t.status = std::move(fm).take_status().prefix(a->file + ":" + std::to_string(n));
        return;
      }
      fms.push_back(std::move(fm.value()));
      line_of.push_back(n);
    }
    size_t failed = 0;
    auto r = b->bundle(fms, &failed);
    if (!r) t.status = std::move(r).take_status().prefix(a->file + ":" + std::to_string(line_of[failed]));
  }));

  auto* modflows = cmd("mod-flows", "change the actions of matching rules: mod-flows BR FLOW [--strict]");
  modflows->add_option("BR", a->bridge, "bridge name")->required();
  modflows->add_option("FLOW", a->words, "match (loose unless --strict) and new actions")->required();
  modflows->add_flag("--strict", a->strict, "only the rule with exactly this match and priority");
  modflows->callback(run([&t, a, need_bridge] {
    Bridge* b = need_bridge(a->bridge);
    if (!b) return;
    auto fm = make_flow_mod(*b, join_words(a->words), a->strict ? FlowMod::Command::modify_strict : FlowMod::Command::modify);
    if (!fm) {
      t.status = std::move(fm).take_status();
      return;
    }
    auto r = b->flow_mod(*fm);
    if (!r) t.status = std::move(r).take_status();
  }));

  auto* delflows = cmd("del-flows", "delete rules: del-flows BR [FLOW] [--strict] (no FLOW: all)");
  delflows->add_option("BR", a->bridge, "bridge name")->required();
  delflows->add_option("FLOW", a->words, "match (loose unless --strict); out_port=P, cookie=V/M filter");
  delflows->add_flag("--strict", a->strict, "only the rule with exactly this match and priority");
  delflows->callback(run([&t, a, need_bridge] {
    Bridge* b = need_bridge(a->bridge);
    if (!b) return;
    auto fm = make_flow_mod(*b, join_words(a->words), a->strict ? FlowMod::Command::del_strict : FlowMod::Command::del);
    if (!fm) {
      t.status = std::move(fm).take_status();
      return;
    }
    auto r = b->flow_mod(*fm);
    if (!r) t.status = std::move(r).take_status();
  }));

  auto* dumpflows = cmd("dump-flows",
                        "list rules like ovs-ofctl dump-flows (its NXST_FLOW reply line first): dump-flows "
                        "BR [FLOW] [--strict]");
  dumpflows->add_option("BR", a->bridge, "bridge name")->required();
  dumpflows->add_option("FLOW", a->words, "only rules matching this (loose unless --strict); table=N, cookie=V/M, out_port=P");
  dumpflows->add_flag("--strict", a->strict, "only the rule with exactly this match and priority");
  dumpflows->add_flag(
      "--no-stats", a->no_stats,
      "as ovs-ofctl --no-stats: no reply line, no duration, counters or ages (the text only)");
  t.add_format(dumpflows);
  dumpflows->callback(run([&t, a, need_bridge] {
    Bridge* b = need_bridge(a->bridge);
    if (!b) return;
    auto fm = make_flow_mod(*b, join_words(a->words), FlowMod::Command::del);
    if (!fm) {
      t.status = std::move(fm).take_status();
      return;
    }
    const flow::RuleMeta& meta = fm->flow.meta;
    const bool cookie_masked = meta.has_cookie && (fm->cookie_has_mask || meta.cookie_mask != UINT64_MAX);
    if (meta.has_cookie && !cookie_masked) {
      t.status = invalid("cannot set cookie in dump-flows (select rules with cookie=VALUE/MASK)");
      return;
    }
    const uint8_t table = meta.table.value_or(Bridge::kOfTableAll);
    std::vector<const OfRule*> rules =
        b->dump(&fm->flow.match, table, a->strict ? std::optional<uint16_t>(meta.priority) : std::nullopt);
    const uint64_t now = hal::now_ns();
    flow::OfFormatOptions fmt;
    fmt.tlv = ofproto::switch_tlv_maps().table(b->name());
    Json j;
    j.begin_object().field("bridge", b->name()).begin_array("flows");
    // ovs-ofctl's reply header (OpenFlow 1.0 with Nicira extensions, its
    // default). Its transaction id is the 4th message ovs-ofctl sends, or
    // the 8th when a FLOW was given (it first asks for the port and table
    // names to read FLOW with). Open vSwitch prints the line once per reply
    // message (64 kB, about 800 simple rules; all but the last end in
    // " flags=[more]"); keel prints it once.
    // With --no-stats ovs-ofctl formats the rules itself: no reply line.
    std::string out = a->no_stats                                        ? ""
                      : a->words.empty() || join_words(a->words).empty() ? "NXST_FLOW reply (xid=0x4):\n"
                                                                         : "NXST_FLOW reply (xid=0x8):\n";
    for (const OfRule* r : rules) {
      if (cookie_masked && ((r->cookie ^ meta.cookie) & meta.cookie_mask)) continue;
      if (fm->out_port != flow::kOfppNone) {
        bool hit = false;
        for (const auto& act : r->actions) {
          if (const auto* o = std::get_if<flow::OfOutput>(&act); o && o->port == fm->out_port) hit = true;
          if (std::holds_alternative<flow::OfController>(act) && fm->out_port == flow::kOfppController) hit = true;
        }
        if (!hit) continue;
      }
      if (t.format != "json") {
        out += " " + ofproto::format_flow_stats(*r, now, !a->no_stats, &fmt) + "\n";
        continue;
      }
      char cookie[24];
      snprintf(cookie, sizeof cookie, "0x%" PRIx64, r->cookie);
      auto ms = [&](uint64_t since) { return now > since ? (now - since) / 1'000'000 : uint64_t{0}; };
      j.begin_object()
          .field("table", static_cast<uint64_t>(r->table_id))
          .field("priority", static_cast<uint64_t>(r->priority))
          .field("cookie", std::string(cookie))
          .field("match", flow::format_of_match(r->match, fmt))
          .field("actions", flow::format_of_actions(r->actions))
          .field("duration_ms", ms(r->created_ns))
          .field("n_packets", r->packets.load(std::memory_order_relaxed))
          .field("n_bytes", r->bytes.load(std::memory_order_relaxed))
          .field("idle_timeout", static_cast<uint64_t>(r->idle_timeout))
          .field("hard_timeout", static_cast<uint64_t>(r->hard_timeout))
          .field("importance", static_cast<uint64_t>(r->importance))
          .field("idle_age_ms", ms(std::max(r->used_ns.load(std::memory_order_relaxed), r->created_ns)))
          .field("hard_age_ms", ms(r->modified_ns));
      j.begin_array("flags");
      if (r->send_flow_rem) j.value("send_flow_rem");
      if (r->no_packet_counts) j.value("no_packet_counts");
      if (r->no_byte_counts) j.value("no_byte_counts");
      j.end_array().end_object();
    }
    j.end_array().end_object();
    t.print(t.format == "json" ? j.str() + "\n" : out);
  }));

  auto* dumpctl = cmd("dump-controller", "packets sent to the controller by BR's rules (taken off the queue)");
  dumpctl->add_option("BR", a->bridge, "bridge name")->required();
  dumpctl->add_flag("--peek", a->peek, "show them but leave them queued");
  t.add_format(dumpctl);
  dumpctl->callback(run([&t, &of, a, need_bridge] {
    Bridge* b = need_bridge(a->bridge);
    if (!b) return;
    auto pis = of.packet_ins(b->name(), !a->peek);
    const ofproto::ControllerQueueStats st = of.controller_stats();
    if (t.format == "json") {
      Json j;
      j.begin_object().field("bridge", b->name()).field("queued_total", st.queued).field("dropped", st.dropped);
      j.field("depth", static_cast<uint64_t>(st.depth)).begin_array("packet_ins");
      for (const auto& p : pis) {
        char cookie[24];
        snprintf(cookie, sizeof cookie, "0x%" PRIx64, p.cookie);
        j.begin_object()
            .field("in_port", static_cast<uint64_t>(p.in_port))
            .field("table_id", static_cast<uint64_t>(p.table_id))
            .field("cookie", std::string(cookie))
            .field("reason", reason_text(p.reason))
            .field("controller_id", static_cast<uint64_t>(p.controller_id))
            .field("total_len", static_cast<uint64_t>(p.total_len))
            .field("data", hex(p.data))
            .end_object();
      }
      j.end_array().end_object();
      t.print(j.str() + "\n");
      return;
    }
    std::string s;
    for (const auto& p : pis) {
      char head[200];
      snprintf(head, sizeof head, "packet_in: table_id=%u cookie=0x%" PRIx64 " total_len=%u in_port=%u (via %s) data_len=%zu\n",
               p.table_id, p.cookie, p.total_len, p.in_port, reason_text(p.reason), p.data.size());
      s += head;
      s += "  " + hex(p.data) + "\n";
    }
    s += "queued " + std::to_string(st.queued) + ", dropped " + std::to_string(st.dropped) + " (queue full), waiting " +
         std::to_string(st.depth) + "\n";
    t.print(s);
  }));

  // --- running-config ---
  t.add_config_section({"bridges", 200,
                        [&t, &of](std::vector<std::string>& lines) {
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          for (Bridge* b : of.bridges()) {
                            lines.push_back("add-br " + b->name());
                            for (const auto& p : b->ports()->ports) {
                              if (p.bond_obj) continue;  // the bonds section's add-bond lines
                              if (p.tunnel) continue;    // the tunnels section's (after ip-add)
                              // ovs-vsctl's own syntax (pastes into ovs-vsctl too).
                              lines.push_back("add-port " + b->name() + " " + p.name + " " +
                                              ofproto::format_port_columns(p));
                            }
                          }
                        },
                        [&t, &of] {
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          for (Bridge* b : of.bridges()) (void)of.del_bridge(b->name());
                          of.reclaim();
                        }});
  t.add_config_section({"rules", 500,
                        [&t, &of](std::vector<std::string>& lines) {
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          for (Bridge* b : of.bridges())
                            for (const OfRule* r : b->dump(nullptr))
                              lines.push_back("add-flow " + b->name() + " " + quote(rule_text(*r)));
                        },
                        [&t, &of] {
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          for (Bridge* b : of.bridges()) {
                            FlowMod fm;
                            fm.command = FlowMod::Command::del;
                            (void)b->flow_mod(fm);
                          }
                          of.reclaim();
                        }});
}

}  // namespace keel::cli

// Bond commands: `add-bond` (ovs-vsctl add-bond's syntax,
// ofproto/port_columns.h), `bond-show` (ovs-appctl bond/show),
// `lacp-show` (lacp/show), `bond-set-active-member`, `bond-enable-member`,
// `bond-disable-member` (bond/set-active-member, bond/enable-member,
// bond/disable-member), and the static MAC entries `fdb-add` / `fdb-del`
// (fdb/add, fdb/del). Texts and error words are Open vSwitch 3.1's
// (ofproto/bond.c, lib/lacp.c, ofproto/ofproto-dpif.c). Running-config:
// section "bonds" (order 300: add-bond lines, after the bridges).
//
// Threads: the callbacks run inside Control::run, which holds the Ofproto
// writer mutex for them (declared locks_ofproto; the maintenance thread
// runs the bonds under it too).
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <sstream>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "flow/flow_text.h"
#include "keel/hal/cpu.h"
#include "ofproto/ofproto.h"
#include "ofproto/port_columns.h"
#include "ofproto/udpif.h"

namespace keel::cli {

namespace {

using ofproto::BondPort;
using ofproto::BondView;

std::string bond_mac_text(const flow::EthAddr& a) {
  std::string s;
  flow::text::put_mac(s, a);
  return s;
}

uint64_t bond_now_ms() { return hal::now_ns() / 1'000'000; }

// bond/show's bond_is_balanced(): rebalancing runs (and the hashes print).
bool bond_balanced(const BondView& v) {
  return v.settings.rebalance_interval_ms && v.settings.mode != ofproto::BondMode::active_backup &&
         !(v.settings.lacp_fallback_ab && v.lacp_status == ofproto::LacpStatus::configured);
}

// bond_print_details() of Open vSwitch 3.1.
std::string bond_show_text(const BondView& v) {
  const auto& s = v.settings;
  const bool tcp = v.may_recirc;
  const bool lb = v.lb_output;
  std::string o = "---- " + v.name + " ----\n";
  o += std::string("bond_mode: ") + to_string(s.mode) + "\n";
  o += std::string("bond may use recirculation: ") + (tcp ? "yes" : "no") +
       ", Recirc-ID : " + (tcp ? std::to_string(v.id) : std::string("-1")) + "\n";
  o += "bond-hash-basis: " + std::to_string(s.hash_basis) + "\n";
  o += std::string("lb_output action: ") + (lb ? "enabled" : "disabled") +
       ", bond-id: " + (lb ? std::to_string(v.id) : std::string("-1")) + "\n";
  if (s.mode == ofproto::BondMode::balance_slb) o += "all members active: false\n";
  o += "updelay: " + std::to_string(s.updelay_ms) + " ms\n";
  o += "downdelay: " + std::to_string(s.downdelay_ms) + " ms\n";
  const bool balanced = bond_balanced(v);
  if (balanced && v.next_rebalance_ms)
    o += "next rebalance: " + std::to_string(*v.next_rebalance_ms) + " ms\n";
  o += std::string("lacp_status: ") + to_string(v.lacp_status) + "\n";
  o += std::string("lacp_fallback_ab: ") + (s.lacp_fallback_ab ? "true" : "false") + "\n";
  o += "active-backup primary: " + (s.primary.empty() ? std::string("<none>") : s.primary) +
       (!v.primary_is_member && !s.primary.empty() ? " (no such member)" : "") + "\n";
  // OVS prints the last active member's MAC and the member that has it now.
  o += "active member mac: " + bond_mac_text(v.active_member_mac) + "(";
  std::string holder = "none";
  for (const auto& m : v.members)
    if (m.mac == v.active_member_mac && !(v.active_member_mac == flow::EthAddr{})) {
      holder = m.name;
      break;
    }
  o += holder + ")\n";
  std::vector<const ofproto::BondMemberView*> sorted;
  for (const auto& m : v.members) sorted.push_back(&m);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  for (const auto* m : sorted) {
    o += "\nmember " + m->name + ": " + (m->enabled ? "enabled" : "disabled") + "\n";
    if (m->active) o += "  active member\n";
    if (m->delay_left_ms)
      o += std::string("  ") + (m->enabled ? "downdelay" : "updelay") + " expires in " +
           std::to_string(*m->delay_left_ms) + " ms\n";
    o += std::string("  may_enable: ") + (m->may_enable ? "true" : "false") + "\n";
    if (!balanced) continue;
    auto hashes = m->hashes;
    std::sort(hashes.begin(), hashes.end());
    for (const auto& [bucket, bytes] : hashes)
      if (bytes / 1024)
        o += "  hash " + std::to_string(bucket) + ": " + std::to_string(bytes / 1024) + " kB load\n";
  }
  o += "\n";
  return o;
}

void bond_show_json(Json& j, const BondView& v) {
  const auto& s = v.settings;
  j.begin_object()
      .field("bond", v.name)
      .field("bond_mode", to_string(s.mode))
      .field("may_use_recirculation", v.may_recirc)
      .field("recirc_id", v.may_recirc ? static_cast<int64_t>(v.id) : int64_t{-1})
      .field("bond_hash_basis", uint64_t{s.hash_basis})
      .field("lb_output_action", v.lb_output)
      .field("bond_id", v.lb_output ? static_cast<int64_t>(v.id) : int64_t{-1})
      .field("updelay_ms", uint64_t{s.updelay_ms})
      .field("downdelay_ms", uint64_t{s.downdelay_ms});
  if (bond_balanced(v) && v.next_rebalance_ms) j.field("next_rebalance_ms", *v.next_rebalance_ms);
  j.field("lacp_status", to_string(v.lacp_status))
      .field("lacp_fallback_ab", s.lacp_fallback_ab)
      .field("active_backup_primary", s.primary);
  if (v.active && *v.active < v.members.size()) {
    j.field("active_member", v.members[*v.active].name)
        .field("active_member_mac", bond_mac_text(v.members[*v.active].mac));
  } else {
    j.null_field("active_member").field("active_member_mac", "00:00:00:00:00:00");
  }
  std::vector<const ofproto::BondMemberView*> sorted;
  for (const auto& m : v.members) sorted.push_back(&m);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  j.begin_array("members");
  for (const auto* m : sorted) {
    j.begin_object()
        .field("member", m->name)
        .field("ofport", uint64_t{m->ofport})
        .field("dp_port", uint64_t{m->dp_port})
        .field("enabled", m->enabled)
        .field("active", m->active)
        .field("may_enable", m->may_enable)
        .field("carrier", m->carrier)
        .field("admin_disabled", m->admin_disabled);
    if (m->delay_left_ms) j.field(m->enabled ? "downdelay_left_ms" : "updelay_left_ms", *m->delay_left_ms);
    auto hashes = m->hashes;
    std::sort(hashes.begin(), hashes.end());
    j.begin_array("hashes");
    for (const auto& [bucket, bytes] : hashes)
      j.begin_object()
          .field("hash", bucket)
          .field("bytes", bytes)
          .field("kb_load", bytes / 1024)
          .end_object();
    j.end_array().end_object();
  }
  j.end_array().end_object();
}

struct BondArgs {
  std::string bridge, bond, member, port, vlan, mac;
  std::vector<std::string> words;
  void reset() { *this = BondArgs{}; }
};

// fdb/add's eth_addr_from_string(): six hex bytes separated by ':'.
std::optional<flow::EthAddr> parse_fdb_mac(const std::string& s) {
  unsigned b[6];
  char tail;
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6)
    return std::nullopt;
  flow::EthAddr a{};
  for (int i = 0; i < 6; ++i) {
    if (b[i] > 0xff) return std::nullopt;
    a.b[i] = static_cast<uint8_t>(b[i]);
  }
  return a;
}

// fdb/add's VLAN (OVS takes atoi(); keel wants a VLAN).
std::optional<uint16_t> parse_fdb_vlan(const std::string& s) {
  if (s.empty() || s.size() > 4 || s.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const unsigned long v = std::stoul(s);
  if (v > 4095) return std::nullopt;
  return static_cast<uint16_t>(v);
}

}  // namespace

void add_bond_commands(CommandTree::Impl& t) {
  // Declarations (command_tree_impl.h: CommandDecl).
  t.declare("add-bond", control::Access::change, false, kLocksOfproto);
  t.declare("bond-show", control::Access::show, false, kLocksOfproto);
  t.declare("lacp-show", control::Access::show, false, kLocksOfproto);
  t.declare("bond-set-active-member", control::Access::change, false, kLocksOfproto);
  t.declare("bond-enable-member", control::Access::change, false, kLocksOfproto);
  t.declare("bond-disable-member", control::Access::change, false, kLocksOfproto);
  t.declare("fdb-add", control::Access::change, false, kLocksOfproto);
  t.declare("fdb-del", control::Access::change, false, kLocksOfproto);

  auto a = std::make_shared<BondArgs>();
  ofproto::Ofproto& of = t.sys.ofproto();
  auto cmd = [&t, a](const std::string& name, const std::string& help) {
    CLI::App* c = t.app.add_subcommand(name, help);
    c->preparse_callback([a](size_t) { a->reset(); });
    return c;
  };
  // Changes wake the revalidator (the commands change what translation decides).
  auto changing = [&t, &of](auto&& body) {
    return [&t, &of, body] {
      {
        body();
        of.reclaim();
      }
      if (t.status.ok())
        if (ofproto::Udpif* u = t.sys.udpif()) u->kick();
    };
  };

  // --- add-bond BR BOND IFACE... [COLUMN[:KEY]=VALUE]... [-- set Interface IFACE ...] ---
  auto* add = cmd("add-bond",
                  "add a bond (ovs-vsctl add-bond): add-bond BR BOND IFACE IFACE... [bond_mode=M] [lacp=L] "
                  "[COLUMN[:KEY]=VALUE]... [-- set Interface IFACE COLUMN=VALUE...]");
  t.vsctl_commands.push_back("add-bond");
  add->add_option("BR", a->bridge, "bridge")->required();
  add->add_option("BOND", a->bond, "bond (port) name")->required();
  add->add_option(
      "ARGS", a->words,
      "interfaces, then Port columns: bond_mode=active-backup|balance-slb|balance-tcp "
      "lacp=off|active|passive bond_updelay=MS bond_downdelay=MS other_config:bond-rebalance-interval=MS "
      "other_config:lb-output-action=true|false other_config:bond-primary=IFACE "
      "other_config:bond-hash-basis=N other_config:lacp-time=fast|slow "
      "other_config:lacp-fallback-ab=true|false tag=N trunks=N,N vlan_mode=M");
  add->callback(changing([&t, &of, a] {
    for (std::string& w : a->words)
      if (w == CommandTree::Impl::kVsctlSeparator) w = "--";
    // ovs-vsctl: the interfaces are the words before the first that has
    // a '=' (or the first "--").
    ofproto::BondRequest req;
    size_t i = 0;
    for (; i < a->words.size(); ++i) {
      const std::string& w = a->words[i];
      if (w == "--" || w.find('=') != std::string::npos) break;
      req.members.push_back(w);
    }
    if (req.members.size() < 2) {
      t.status = invalid("add-bond requires at least 2 interfaces, but only " +
                         std::to_string(req.members.size()) + " were specified");
      return;
    }
    ofproto::BondColumns cols;
    std::vector<std::string> rest(a->words.begin() + static_cast<long>(i), a->words.end());
    if (Status st = ofproto::parse_bond_columns(rest, a->bond, req.members, cols); !st.ok()) {
      t.status = std::move(st);
      return;
    }
    req.settings = cols.settings;
    req.port = cols.port;
    req.ifaces = cols.ifaces;
    t.status = of.add_bond(a->bridge, a->bond, req);
  }));

  // --- bond-show [BOND] ---
  auto* show =
      cmd("bond-show", "bonds as ovs-appctl bond/show: mode, recirculation, lb_output, LACP, members");
  show->add_option("BOND", a->bond, "one bond");
  t.add_format(show);
  show->callback([&t, &of, a] {
    std::vector<BondView> views;
    {
      const uint64_t now = bond_now_ms();
      if (!a->bond.empty()) {
        const BondPort* b = of.find_bond(a->bond);
        if (!b) {
          t.status = error(Errc::not_found, "no such bond");
          return;
        }
        views.push_back(b->bond->view(now));
      } else {
        for (const BondPort* b : of.bonds()) views.push_back(b->bond->view(now));
      }
    }
    if (t.format == "json") {
      Json j;
      j.begin_object().begin_array("bonds");
      for (const BondView& v : views) bond_show_json(j, v);
      j.end_array().end_object();
      t.print(j.str() + "\n");
      return;
    }
    std::string s;
    for (const BondView& v : views) s += bond_show_text(v);
    t.print(s);
  });

  // --- lacp-show [BOND] ---
  auto* lacp = cmd("lacp-show", "LACP of bonds as ovs-appctl lacp/show: actor, partner, state per member");
  lacp->add_option("BOND", a->bond, "one bond");
  t.add_format(lacp);
  lacp->callback([&t, &of, a] {
    std::vector<ofproto::LacpView> views;
    {
      if (!a->bond.empty()) {
        const BondPort* b = of.find_bond(a->bond);
        if (!b || !b->lacp) {
          t.status = error(Errc::not_found, "no such lacp object");
          return;
        }
        views.push_back(b->lacp->view());
      } else {
        for (const BondPort* b : of.bonds())
          if (b->lacp) views.push_back(b->lacp->view());
      }
    }
    if (t.format == "json") {
      auto info = [](Json& j, const char* key, const ofproto::LacpInfo& i) {
        j.begin_object(key)
            .field("sys_id", bond_mac_text(i.sys_id))
            .field("sys_priority", uint64_t{i.sys_priority})
            .field("port_id", uint64_t{i.port_id})
            .field("port_priority", uint64_t{i.port_priority})
            .field("key", uint64_t{i.key})
            .field("state", uint64_t{i.state})
            .end_object();
      };
      Json j;
      j.begin_object().begin_array("lacp");
      for (const auto& v : views) {
        j.begin_object()
            .field("bond", v.name)
            .field("active", v.active)
            .field("negotiated", v.negotiated)
            .field("sys_id", bond_mac_text(v.sys_id))
            .field("sys_priority", uint64_t{v.sys_priority})
            .field("aggregation_key", uint64_t{v.key})
            .field("lacp_time", v.fast ? "fast" : "slow")
            .begin_array("members");
        for (const auto& m : v.members) {
          const char* st = m.status == ofproto::LacpMemberStatus::current   ? "current"
                           : m.status == ofproto::LacpMemberStatus::expired ? "expired"
                                                                            : "defaulted";
          j.begin_object()
              .field("member", m.name)
              .field("status", st)
              .field("attached", m.attached)
              .field("may_enable", m.may_enable)
              .field("port_id", uint64_t{m.port_id})
              .field("port_priority", uint64_t{m.port_priority});
          info(j, "actor", m.actor);
          info(j, "partner", m.partner);
          j.field("rx_pdus", m.rx_pdus).field("rx_bad", m.rx_bad).field("tx_pdus", m.tx_pdus).end_object();
        }
        j.end_array().end_object();
      }
      j.end_array().end_object();
      t.print(j.str() + "\n");
      return;
    }
    std::string s;
    for (const auto& v : views) s += ofproto::format_lacp_show(v);
    t.print(s);
  });

  // --- bond-set-active-member / bond-enable-member / bond-disable-member ---
  auto* setact =
      cmd("bond-set-active-member", "make MEMBER the active member of BOND (bond/set-active-member)");
  setact->add_option("BOND", a->bond, "bond")->required();
  setact->add_option("MEMBER", a->member, "member interface")->required();
  setact->callback(changing([&t, &of, a] {
    bool changed = false;
    t.status = of.bond_set_active_member(a->bond, a->member, &changed);
    if (t.status.ok()) t.print(changed ? "done\n" : "no change\n");
  }));
  for (bool enable : {true, false}) {
    auto* c = cmd(enable ? "bond-enable-member" : "bond-disable-member",
                  enable ? "let MEMBER of BOND carry traffic again (bond/enable-member)"
                         : "take MEMBER of BOND out of use (bond/disable-member)");
    c->add_option("BOND", a->bond, "bond")->required();
    c->add_option("MEMBER", a->member, "member interface")->required();
    c->callback(changing([&t, &of, a, enable] {
      t.status = of.bond_enable_member(a->bond, a->member, enable);
      if (t.status.ok()) t.print(enable ? "enabled\n" : "disabled\n");
    }));
  }

  // --- fdb-add BR PORT VLAN MAC / fdb-del BR VLAN MAC (fdb/add, fdb/del) ---
  auto* fadd =
      cmd("fdb-add", "add a static MAC entry (fdb/add): fdb-add BR PORT VLAN MAC (a bond member: its bond)");
  fadd->add_option("BR", a->bridge, "bridge")->required();
  fadd->add_option("PORT", a->port, "port (or bond, or a bond's member)")->required();
  fadd->add_option("VLAN", a->vlan, "VLAN (0..4095)")->required();
  fadd->add_option("MAC", a->mac, "MAC address")->required();
  // Both commands' bridge and MAC, with fdb/add's and fdb/del's errors.
  auto bridge_and_mac = [&t, &of, a]() -> std::pair<ofproto::Bridge*, std::optional<flow::EthAddr>> {
    ofproto::Bridge* br = of.find_bridge(a->bridge);
    if (!br) {
      t.status = error(Errc::not_found, "no such bridge");
      return {};
    }
    auto mac = parse_fdb_mac(a->mac);
    if (!mac) {
      t.status = invalid("bad MAC address");
      return {};
    }
    return {br, mac};
  };
  fadd->callback(changing([&t, a, bridge_and_mac] {
    auto [br, mac] = bridge_and_mac();
    if (!br) return;
    auto vlan = parse_fdb_vlan(a->vlan);
    if (!vlan) {
      t.status = invalid("bad VLAN '" + a->vlan + "' (0..4095)");
      return;
    }
    auto ports = br->ports();
    const ofproto::PortConfig* p = ports->by_name(a->port);
    if (!p)  // keel also takes the bond's own name
      for (const auto& q : ports->ports)
        if (q.bond_obj && q.bond == a->port && q.ofport == q.bond_ofport) p = &q;
    if (!p) {
      t.status = error(Errc::not_found, "software error, odp port is present but no ofp port");
      return;
    }
    // The name of the bundle a MAC table port stands for (OVS compares it).
    auto bundle_name = [&ports](uint32_t ofport) -> std::string {
      const ofproto::PortConfig* q = ports->by_ofport(ofport);
      if (!q) return {};
      return q->bond_obj ? q->bond : q->name;
    };
    std::optional<ofproto::MacEntry> old;
    for (const auto& e : br->mac().entries())
      if (e.vlan == *vlan && e.mac == *mac) old = e;
    std::string reply;
    if (old && (bundle_name(old->ofport) != a->port || !old->is_static))
      reply = std::string("Overriding already existing ") + (old->is_static ? "static" : "dynamic") +
              " entry on " + std::to_string(old->ofport) + "\n";
    (void)br->mac().add_static(*vlan, *mac, p->bundle());
    t.print(reply);
  }));
  auto* fdel = cmd("fdb-del", "remove a static MAC entry (fdb/del): fdb-del BR VLAN MAC");
  fdel->add_option("BR", a->bridge, "bridge")->required();
  fdel->add_option("VLAN", a->vlan, "VLAN")->required();
  fdel->add_option("MAC", a->mac, "MAC address")->required();
  fdel->callback(changing([&t, a, bridge_and_mac] {
    auto [br, mac] = bridge_and_mac();
    if (!br) return;
    auto vlan = parse_fdb_vlan(a->vlan);
    if (!vlan || !br->mac().del_static(*vlan, *mac)) {
      t.status = error(Errc::not_found, "could not find static mac entry");
      return;
    }
  }));

  // --- running-config: add-bond lines after the bridges' add-port lines ---
  t.add_config_section({"bonds", 300,
                        [&t, &of](std::vector<std::string>& lines) {
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          for (const BondPort* b : of.bonds()) {
                            auto ports = b->bridge->ports();
                            std::vector<ofproto::PortConfig> members;
                            for (const std::string& m : b->members)
                              if (const auto* p = ports->by_name(m)) members.push_back(*p);
                            std::string line = "add-bond " + b->bridge->name() + " " + b->name;
                            for (const std::string& m : b->members) line += " " + m;
                            line += " " + ofproto::format_bond_columns(b->bond->settings(), members);
                            lines.push_back(line);
                          }
                        },
                        [&t, &of] {
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          for (const BondPort* b : of.bonds()) (void)of.del_bond({}, std::string(b->name));
                          of.reclaim();
                        }});
}

}  // namespace keel::cli

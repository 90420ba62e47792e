// Slow-path commands: upcall-show (Open vSwitch's upcall/show; keel's own
// counters with --keel, after OVS's lines, and in JSON), revalidate [--full], and the upcall tunables flow-limit,
// max-idle and revalidator-interval, the thread counts n-handler-threads and
// n-revalidator-threads (Open vSwitch's other_config names) and
// megaflows-enable (Open vSwitch's upcall/disable-megaflows and
// enable-megaflows), which are running-config.
#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "cli/view.h"
#include "ofproto/ofproto.h"
#include "ofproto/udpif.h"

namespace keel::cli {

namespace {

// How each port's packets meet a full slow path (datapath.h, offline runs):
// kept apart from the rest of upcall-show, whose layout changes later.
struct PortModes {
  bool offline = false;
  struct Port {
    std::string name;
    const char* input;  // "none", "replay" or "live"
  };
  std::vector<Port> ports;
  uint64_t backpressure = 0, lost = 0, ordered = 0, revalidations = 0;
};

PortModes port_modes(control::System& sys, const ofproto::UdpifStats& s) {
  datapath::Datapath& dp = sys.datapath();
  PortModes m;
  m.offline = dp.offline();
  for (hal::Port* p : dp.ports()) {
    const hal::Port::InputKind k = p->input_kind();
    m.ports.push_back({p->name(), k == hal::Port::InputKind::none            ? "none"
                                  : k == hal::Port::InputKind::finite_replay ? "replay"
                                                                             : "live"});
  }
  for (const auto& pmd : dp.pmds()) {
    const datapath::PmdCounters c = pmd->counters();
    m.backpressure += c.backpressure;
    m.lost += c.lost;
    m.ordered += c.ordered_upcalls;
  }
  m.revalidations = s.offline_revalidations;
  return m;
}

// upcall-show's keel lines (--keel; always in JSON), after Open vSwitch's.
// Labels are padded to 14 columns as the block above them.
void keel_lines(View& k, CommandTree::Impl& t, const ofproto::UdpifStats& s, uint32_t configured,
                const PortModes& modes) {
  auto label = [](std::string l) {
    if (l.size() < 14) l.resize(14, ' ');
    return l;
  };
  auto n = [](uint64_t x) { return std::to_string(x); };
  const bool megaflows = ofproto::Udpif::megaflows_enabled(t.sys.datapath());
  k.field("flow_limit_configured", label("flow limit"), configured,
          n(s.flow_limit) + " (configured " + n(configured) + ")")
      .field("rounds", label("rounds"), s.rounds,
             n(s.rounds) + " (last " + n(s.last_dump_ms) + "ms, avg " + n(s.avg_dump_ms) + "ms, max " +
                 n(s.max_dump_ms) + "ms)")
      .json("dump_duration_ms", s.last_dump_ms)
      .json("dump_duration_avg_ms", s.avg_dump_ms)
      .json("dump_duration_max_ms", s.max_dump_ms)
      .field("megaflows_enabled", label("megaflows"), megaflows, megaflows ? "enabled" : "disabled (exact-match flows)")
      .field("upcalls", label("upcalls"), s.upcalls,
             n(s.upcalls) + " (installed " + n(s.installs) + ", install failed " + n(s.install_failed) +
                 ", at flow limit " + n(s.limit_hits) + ", errors " + n(s.translate_errors) + ", controller " +
                 n(s.action_upcalls) + ")")
      .json("upcall_span_us", (s.last_upcall_ns - s.first_upcall_ns) / 1000)
      .json("installs", s.installs)
      .json("install_failed", s.install_failed)
      .json("flow_limit_hits", s.limit_hits)
      .json("translate_errors", s.translate_errors)
      .json("controller_upcalls", s.action_upcalls)
      .field("no_bridge_drops", label("no bridge"), s.no_bridge_drops, n(s.no_bridge_drops) + " packets dropped")
      .field("tnl_no_port", label("no tunnel port"), s.tnl_no_port,
             n(s.tnl_no_port) + " packets dropped (tunnel packets no tunnel port takes: tnl_no_port)")
      .field("revalidated", label("revalidator"), s.revalidated,
             "re-translated " + n(s.revalidated) + ", modified " + n(s.modified) + ", deleted idle " +
                 n(s.deleted_idle) + ", changed " + n(s.deleted_changed) + ", over limit " + n(s.deleted_limit))
      .json("modified", s.modified)
      .json("deleted_idle", s.deleted_idle)
      .json("deleted_changed", s.deleted_changed)
      .json("deleted_over_limit", s.deleted_limit);
  // The last round alone: what a rule change cost (xlate_deps.h).
  const ofproto::UdpifStats::Round& r = s.last_round;
  k.text_line(label("last round"), n(r.duration_us / 1000) + "ms, looked at " + n(r.looked_at) +
                                       " (rules changed for " + n(r.checked) + ", lookups read for " +
                                       n(r.checked_deep) + "), re-translated " + n(r.revalidated) + ", modified " +
                                       n(r.modified) + ", deleted " + n(r.deleted()));
  k.object("last_round", "")
      .json("duration_us", r.duration_us)
      .json("dumped", r.dumped)
      .json("looked_at", r.looked_at)
      .json("rules_changed", r.checked)
      .json("lookups_read", r.checked_deep)
      .json("revalidated", r.revalidated)
      .json("modified", r.modified)
      .json("deleted", r.deleted())
      .json("deleted_idle", r.deleted_idle)
      .json("deleted_changed", r.deleted_changed)
      .json("deleted_over_limit", r.deleted_limit);
  k.field("ukeys", label("ukeys"), static_cast<uint64_t>(s.ukeys))
      .field("handlers", label("threads"), s.handlers,
             n(s.handlers) + " handlers, " + n(s.revalidators.size()) + " revalidators")
      .json("revalidator_tid", s.revalidator_tid);
  View::List ports = k.list("ports");
  for (const PortModes::Port& p : modes.ports) {
    const bool none = std::string_view(p.input) == "none";
    ports.item("")
        .json("name", p.name)
        .json("input", p.input)
        .field("mode", label("port " + p.name), none ? "none" : modes.offline ? "backpressure" : "drop and count",
               none ? "no input" : modes.offline ? "offline: backpressure" : "live: drop and count");
  }
  k.json("offline", modes.offline)
      .json("backpressure_pauses", modes.backpressure)
      .json("lost", modes.lost)
      .json("ordered_upcalls", modes.ordered)
      .json("offline_revalidations", modes.revalidations);
  if (modes.offline)
    k.text_line(label("offline"), "backpressure pauses " + n(modes.backpressure) + ", lost " + n(modes.lost) +
                                      ", ordered upcalls " + n(modes.ordered) + ", revalidations " +
                                      n(modes.revalidations));
}

}  // namespace

void add_udpif_commands(CommandTree::Impl& t) {
  // Declarations. revalidate waits for a revalidator round, and the thread
  // counts restart the handler/revalidator threads, which take the Ofproto
  // writer mutex: no locks_ofproto for them (they would deadlock).
  t.declare("upcall-show", control::Access::show);
  t.declare("revalidate", control::Access::change);
  t.declare("set flow-limit", control::Access::change, false, kLocksOfproto);
  t.declare("set max-idle", control::Access::change, false, kLocksOfproto);
  t.declare("set revalidator-interval", control::Access::change, false, kLocksOfproto);
  t.declare("set n-handler-threads", control::Access::change);
  t.declare("set n-revalidator-threads", control::Access::change);
  t.declare("set megaflows-enable", control::Access::change);

  auto* show = t.app.add_subcommand("upcall-show",
                                    "upcall handler and revalidator: flows, limit, dump duration (like upcall/show)");
  show->add_flag("--keel", t.flag_keel, "keel's counters after Open vSwitch's lines");
  t.add_format(show);
  show->callback([&t] {
    ofproto::Udpif* u = t.sys.udpif();
    if (!u) {
      t.status = error(Errc::unavailable, "the slow path is not running yet");
      return;
    }
    const ofproto::UdpifStats s = u->stats();
    const uint32_t configured = t.sys.ofproto().flow_limit();
    const PortModes modes = port_modes(t.sys, s);
    const bool json = t.format == "json";
    View v;
    // Open vSwitch 3.1's upcall_unixctl_show(), spacing included (the
    // misaligned "ufid enabled :" is OVS's). The datapath is named as OVS
    // names its userspace datapath, which every bridge shares, so scripts
    // that look for that header find it; one line per revalidator thread,
    // shown by its thread id where OVS shows its revalidators' thread
    // numbers, with the ukeys of its share. JSON: the same values, flat.
    View& ovs = v.group("netdev@ovs-netdev");
    ovs.field("flows", "flows         ", s.flows,
              "(current " + std::to_string(s.flows) + ") (avg " + std::to_string(s.avg_n_flows) + ") (max " +
                  std::to_string(s.max_n_flows) + ") (limit " + std::to_string(s.flow_limit) + ")")
        .json("flow_limit", s.flow_limit)
        .json("flows_avg", s.avg_n_flows)
        .json("flows_max", s.max_n_flows)
        .field("dump_duration_ovs_ms", "dump duration ", s.dump_duration_ms, std::to_string(s.dump_duration_ms) + "ms")
        .field("ufid_enabled", "ufid enabled ", true)
        .blank_line();
    View::List revs = ovs.list("revalidators");
    for (const ofproto::UdpifStats::Revalidator& r : s.revalidators)
      revs.item("").json("tid", r.tid).field("keys", std::to_string(r.tid), r.keys, "(keys " + std::to_string(r.keys) + ")");
    if (json || t.flag_keel) keel_lines(v.group("keel"), t, s, configured, modes);
    t.print(json ? v.json() + "\n" : v.text());
  });

  auto* reval = t.app.add_subcommand("revalidate", "run a revalidation round now and wait for it");
  reval->add_flag("--full", t.flag_m, "dump flows with keys and actions (formatted) instead of the terse statistics dump");
  reval->callback([&t] {
    if (ofproto::Udpif* u = t.sys.udpif()) {
      const bool full = t.flag_m;
      const uint64_t us = u->revalidate_now(!full);
      t.print(std::string("revalidation round") + (full ? " (full dump)" : "") + ": " + std::to_string(us) + " us\n");
    } else {
      t.status = error(Errc::unavailable, "the slow path is not running yet");
    }
  });

  // Tunables, under the datapath's `set` (commands_datapath.cpp makes it).
  CLI::App* set = t.app.get_subcommand("set");
  // flow-limit also restarts the adapted limit from the new value (Open
  // vSwitch's other_config:flow-limit and upcall/set-flow-limit in one).
  auto knob = [&](const char* name, const char* help, const char* range, double lo, double hi,
                  Status (ofproto::Ofproto::*setter)(uint32_t), bool resets_limit = false) {
    auto* c = set->add_subcommand(name, help);
    c->add_option("N", t.arg1, range)->required()->check(CLI::Range(lo, hi));
    c->callback([&t, setter, resets_limit] {
      ofproto::Ofproto& of = t.sys.ofproto();
      t.status = (of.*setter)(static_cast<uint32_t>(std::stoul(t.arg1)));
      if (t.status.ok())
        if (ofproto::Udpif* u = t.sys.udpif()) {
          if (resets_limit) u->reset_flow_limit();
          u->kick();
        }
    });
  };
  knob("flow-limit", "most datapath flows the upcall handler installs (default 200000)", "1..10000000", 1, 1e7,
       &ofproto::Ofproto::set_flow_limit, true);
  knob("max-idle", "ms after which an unused datapath flow is removed (default 10000)", "100..3600000", 100, 3.6e6,
       &ofproto::Ofproto::set_max_idle_ms);
  knob("revalidator-interval", "ms between revalidation rounds (default 500)", "10..60000", 10, 6e4,
       &ofproto::Ofproto::set_revalidate_interval_ms);

  // Thread counts: 0 is Open vSwitch's "unset" (the default, udpif.h).
  auto threads = [&](const char* name, const char* help, bool handlers) {
    auto* c = set->add_subcommand(name, help);
    c->add_option("N", t.arg1, "0..16 (0: the default)")->required()->check(CLI::Range(0, 16));
    c->callback([&t, handlers] {
      datapath::Datapath& dp = t.sys.datapath();
      const unsigned n = static_cast<unsigned>(std::stoul(t.arg1));
      unsigned h = ofproto::Udpif::configured_handlers(dp), r = ofproto::Udpif::configured_revalidators(dp);
      (handlers ? h : r) = n;
      t.status = ofproto::Udpif::set_threads(dp, h, r);
    });
  };
  threads("n-handler-threads",
          "upcall handler threads (0: the default, one per 2 PMDs, at least 1); changing it restarts the handlers",
          true);
  threads("n-revalidator-threads",
          "revalidator threads (0: the default, 1 + one per 8 PMDs); changing it restarts the revalidators", false);

  auto* mf = set->add_subcommand("megaflows-enable",
                                 "false: install exact-match flows (the whole key) instead of megaflows (default true)");
  mf->add_option("BOOL", t.arg1, "true or false")->required()->check(CLI::IsMember({"true", "false"}));
  mf->callback([&t] { ofproto::Udpif::set_megaflows_enabled(t.sys.datapath(), t.arg1 == "true"); });

  t.add_config_section({"upcall tunables", 810,
                        [&t](std::vector<std::string>& lines) {
                          const ofproto::Ofproto& of = t.sys.ofproto();
                          if (of.flow_limit() != 200000) lines.push_back("set flow-limit " + std::to_string(of.flow_limit()));
                          if (of.max_idle_ms() != 10000) lines.push_back("set max-idle " + std::to_string(of.max_idle_ms()));
                          if (of.revalidate_interval_ms() != 500)
                            lines.push_back("set revalidator-interval " + std::to_string(of.revalidate_interval_ms()));
                          if (!ofproto::Udpif::megaflows_enabled(t.sys.datapath()))
                            lines.push_back("set megaflows-enable false");
                          if (unsigned n = ofproto::Udpif::configured_handlers(t.sys.datapath()))
                            lines.push_back("set n-handler-threads " + std::to_string(n));
                          if (unsigned n = ofproto::Udpif::configured_revalidators(t.sys.datapath()))
                            lines.push_back("set n-revalidator-threads " + std::to_string(n));
                        },
                        [&t] {
                          ofproto::Ofproto& of = t.sys.ofproto();
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          (void)of.set_flow_limit(200000);
                          (void)of.set_max_idle_ms(10000);
                          (void)of.set_revalidate_interval_ms(500);
                          ofproto::Udpif::set_megaflows_enabled(t.sys.datapath(), true);
                          (void)ofproto::Udpif::set_threads(t.sys.datapath(), 0, 0);
                        }});
}

}  // namespace keel::cli

// Slow-path commands: upcall-show (Open vSwitch's upcall/show; keel's own
// counters with --keel, after OVS's lines, and in JSON), revalidate [--full], and the upcall tunables flow-limit,
// max-idle and revalidator-interval, the thread counts n-handler-threads and
// n-revalidator-threads (Open vSwitch's other_config names) and
// megaflows-enable (Open vSwitch's upcall/disable-megaflows and
// enable-megaflows), which are running-config.
#include "cli/command_tree_impl.h"
#include "cli/json.h"
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
    if (t.format == "json") {
      Json j;
      j.begin_object()
          .field("flows", static_cast<uint64_t>(s.flows))
          .field("megaflows_enabled", ofproto::Udpif::megaflows_enabled(t.sys.datapath()))
          .field("flow_limit", static_cast<uint64_t>(s.flow_limit))
          .field("flow_limit_configured", static_cast<uint64_t>(configured))
          .field("flows_avg", s.avg_n_flows)
          .field("flows_max", s.max_n_flows)
          .field("dump_duration_ms", s.last_dump_ms)
          .field("dump_duration_ovs_ms", s.dump_duration_ms)
          .field("dump_duration_avg_ms", s.avg_dump_ms)
          .field("dump_duration_max_ms", s.max_dump_ms)
          .field("rounds", s.rounds)
          .field("ukeys", static_cast<uint64_t>(s.ukeys))
          .field("revalidator_tid", static_cast<int64_t>(s.revalidator_tid))
          .field("handlers", static_cast<uint64_t>(s.handlers))
          .begin_array("revalidators");
      for (const ofproto::UdpifStats::Revalidator& r : s.revalidators)
        j.begin_object().field("tid", static_cast<int64_t>(r.tid)).field("keys", static_cast<uint64_t>(r.keys)).end_object();
      j.end_array()
          .field("upcalls", s.upcalls)
          .field("upcall_span_us", (s.last_upcall_ns - s.first_upcall_ns) / 1000)
          .field("installs", s.installs)
          .field("install_failed", s.install_failed)
          .field("flow_limit_hits", s.limit_hits)
          .field("translate_errors", s.translate_errors)
          .field("no_bridge_drops", s.no_bridge_drops)
          .field("tnl_no_port", s.tnl_no_port)
          .field("controller_upcalls", s.action_upcalls)
          .field("revalidated", s.revalidated)
          .field("modified", s.modified)
          .field("deleted_idle", s.deleted_idle)
          .field("deleted_changed", s.deleted_changed)
          .field("deleted_over_limit", s.deleted_limit)
          .field("offline", modes.offline)
          .begin_array("ports");
      for (const PortModes::Port& p : modes.ports)
        j.begin_object()
            .field("name", p.name)
            .field("input", p.input)
            .field("mode", std::string_view(p.input) == "none" ? "none"
                           : modes.offline                    ? "backpressure"
                                                              : "drop and count")
            .end_object();
      j.end_array()
          .field("backpressure_pauses", modes.backpressure)
          .field("lost", modes.lost)
          .field("ordered_upcalls", modes.ordered)
          .field("offline_revalidations", modes.revalidations)
          .end_object();
      t.print(j.str() + "\n");
      return;
    }
    // Open vSwitch 3.1's upcall_unixctl_show(), spacing included (the
    // misaligned "ufid enabled :" is OVS's). The datapath is named as OVS
    // names its userspace datapath, which every bridge shares, so scripts
    // that look for that header find it; one line per revalidator thread,
    // shown by its thread id where OVS shows its revalidators' thread
    // numbers, with the ukeys of its share.
    std::string out = "netdev@ovs-netdev:\n";
    out += "  flows         : (current " + std::to_string(s.flows) + ") (avg " + std::to_string(s.avg_n_flows) +
           ") (max " + std::to_string(s.max_n_flows) + ") (limit " + std::to_string(s.flow_limit) + ")\n";
    out += "  dump duration : " + std::to_string(s.dump_duration_ms) + "ms\n";
    out += "  ufid enabled : true\n";
    out += "\n";
    for (const ofproto::UdpifStats::Revalidator& r : s.revalidators)
      out += "  " + std::to_string(r.tid) + ": (keys " + std::to_string(r.keys) + ")\n";
    if (!t.flag_keel) {
      t.print(out);
      return;
    }
    out += "keel:\n";
    out += "  flow limit    : " + std::to_string(s.flow_limit) + " (configured " + std::to_string(configured) + ")\n";
    out += "  rounds        : " + std::to_string(s.rounds) + " (last " + std::to_string(s.last_dump_ms) + "ms, avg " +
           std::to_string(s.avg_dump_ms) + "ms, max " + std::to_string(s.max_dump_ms) + "ms)\n";
    out += std::string("  megaflows     : ") +
           (ofproto::Udpif::megaflows_enabled(t.sys.datapath()) ? "enabled" : "disabled (exact-match flows)") + "\n";
    out += "  upcalls       : " + std::to_string(s.upcalls) + " (installed " + std::to_string(s.installs) +
           ", install failed " + std::to_string(s.install_failed) + ", at flow limit " +
           std::to_string(s.limit_hits) + ", errors " + std::to_string(s.translate_errors) + ", controller " +
           std::to_string(s.action_upcalls) + ")\n";
    out += "  no bridge     : " + std::to_string(s.no_bridge_drops) + " packets dropped\n";
    out += "  no tunnel port: " + std::to_string(s.tnl_no_port) +
           " packets dropped (tunnel packets no tunnel port takes: tnl_no_port)\n";
    out += "  revalidator   : re-translated " + std::to_string(s.revalidated) + ", modified " +
           std::to_string(s.modified) + ", deleted idle " + std::to_string(s.deleted_idle) + ", changed " +
           std::to_string(s.deleted_changed) + ", over limit " + std::to_string(s.deleted_limit) + "\n";
    out += "  ukeys         : " + std::to_string(s.ukeys) + "\n";
    out += "  threads       : " + std::to_string(s.handlers) + " handlers, " + std::to_string(s.revalidators.size()) +
           " revalidators\n";
    for (const PortModes::Port& p : modes.ports) {
      std::string name = "  port " + p.name;
      if (name.size() < 16) name.resize(16, ' ');
      out += name + ": " +
             (std::string_view(p.input) == "none" ? "no input"
              : modes.offline                    ? "offline: backpressure"
                                                 : "live: drop and count") +
             "\n";
    }
    if (modes.offline)
      out += "  offline       : backpressure pauses " + std::to_string(modes.backpressure) + ", lost " +
             std::to_string(modes.lost) + ", ordered upcalls " + std::to_string(modes.ordered) +
             ", revalidations " + std::to_string(modes.revalidations) + "\n";
    t.print(out);
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
  auto knob = [&](const char* name, const char* help, const char* range, double lo, double hi,
                  Status (ofproto::Ofproto::*setter)(uint32_t)) {
    auto* c = set->add_subcommand(name, help);
    c->add_option("N", t.arg1, range)->required()->check(CLI::Range(lo, hi));
    c->callback([&t, setter] {
      ofproto::Ofproto& of = t.sys.ofproto();
      t.status = (of.*setter)(static_cast<uint32_t>(std::stoul(t.arg1)));
      if (t.status.ok())
        if (ofproto::Udpif* u = t.sys.udpif()) u->kick();
    });
  };
  knob("flow-limit", "most datapath flows the upcall handler installs (default 200000)", "1..10000000", 1, 1e7,
       &ofproto::Ofproto::set_flow_limit);
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

// Offload commands (issue 16): `offload enable|disable`, the `set
// offload-*` settings and their running-config section, `offload-show`,
// and the helpers that `flow-dump` (commands_datapath.cpp) and `trace`
// (commands_trace.cpp) use to say where a flow runs and why
// (cli/offload_text.h). `debug offload-fault` (the sim NIC model's fault
// injection) is in commands_offload_debug.cpp.
//
// The engine is firmware/offload/offload.h (control::System owns it); this
// file only reads its views and calls its setters, on the control thread.
#include <cinttypes>
#include <cstdio>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "cli/offload_text.h"
#include "keel/hal/cpu.h"
#include "offload/offload.h"

namespace keel::cli {

std::string offload_reason_field(const offload::FlowState& s) { return "offload-reason:\"" + s.text() + "\""; }

namespace {

std::string fmt1(double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

double occupancy_pct(const offload::TableStats& t) {
  return t.capacity ? 100.0 * static_cast<double>(t.rules) / static_cast<double>(t.capacity) : 0;
}

// What offload-show reports, computed once: the engine's stats plus the
// totals over every port. Both the text and the JSON are printed from it,
// with the same names (a JSON key is the text's words with '_').
struct OffloadReport {
  offload::OffloadStats s;
  offload::OffloadConfig cfg;
  uint64_t rules_full = 0, rules_partial = 0, pending = 0, evicted = 0, demoted = 0, resets = 0;
  uint64_t uncounted_reset = 0, uncounted_flow_gone = 0;
  std::vector<offload::FailedCount> failed;  // summed over the ports, by reason
  uint64_t now_ns = 0;
};

void add_failed(std::vector<offload::FailedCount>& into, const offload::FailedCount& f) {
  for (auto& x : into)
    if (x.reason == f.reason) {
      x.count += f.count;
      return;
    }
  into.push_back(f);
}

OffloadReport offload_report(const offload::Offload& off) {
  OffloadReport r;
  r.s = off.stats();
  r.cfg = off.config();
  r.now_ns = hal::now_ns();
  for (const auto& p : r.s.ports) {
    r.rules_full += p.rules_full;
    r.rules_partial += p.rules_partial;
    r.pending += p.pending;
    r.resets += p.resets;
    r.uncounted_reset += p.hw_uncounted_reset;
    r.uncounted_flow_gone += p.hw_uncounted_flow_gone;
    for (const auto& t : p.tables) {
      r.evicted += t.evicted;
      r.demoted += t.demoted;
    }
    for (const auto& f : p.failed) add_failed(r.failed, f);
  }
  return r;
}

std::string failed_text(const std::vector<offload::FailedCount>& failed) {
  if (failed.empty()) return "none";
  std::string s;
  for (const auto& f : failed) s += (s.empty() ? "" : ", ") + f.reason + " " + std::to_string(f.count);
  return s;
}

std::string age_text(uint64_t now, uint64_t then) {
  if (!then || then > now) return "";
  return " (" + fmt1(static_cast<double>(now - then) / 1e9) + " s ago)";
}

// Hardware-handled packets in no flow's counts (see PortOffloadStats).
std::string uncounted_text(uint64_t reset, uint64_t flow_gone) {
  return "  hw packets in no flow's counts: " + std::to_string(reset) + " lost at device resets, " +
         std::to_string(flow_gone) + " counted after their flow went\n";
}

std::string report_text(const OffloadReport& r) {
  const offload::OffloadStats& s = r.s;
  std::string out;
  out += std::string("Offload: ") + (s.enabled ? "enabled" : "disabled") + ", mode " + offload::mode_name(s.mode) +
         ", " + std::to_string(s.threads) + (s.threads == 1 ? " thread" : " threads") + "\n";
  out += "  promote: " + std::to_string(r.cfg.promote_packets) + " packets in " +
         std::to_string(r.cfg.promote_window_ns / 1'000'000) + " ms; idle: " +
         (r.cfg.idle_ms ? std::to_string(r.cfg.idle_ms) + " ms" : std::string("never")) + "\n";
  out += "  flows: full " + std::to_string(s.flows_full) + ", partial " + std::to_string(s.flows_partial) + "\n";
  out += "  rules: full " + std::to_string(r.rules_full) + ", partial " + std::to_string(r.rules_partial) +
         ", pending " + std::to_string(r.pending) + ", evicted " + std::to_string(r.evicted) + ", demoted " +
         std::to_string(r.demoted) + "\n";
  out += "  failed: " + failed_text(r.failed) + "\n";
  out += "  device resets: " + std::to_string(r.resets) + "\n";
  out += uncounted_text(r.uncounted_reset, r.uncounted_flow_gone);
  out += "  events: " + std::to_string(s.events) + " (lost " + std::to_string(s.events_lost) + "), hot microflows " +
         std::to_string(s.hot_microflows) + "\n";
  out += "  stats rounds: terse " + std::to_string(s.sync_terse) + ", full " + std::to_string(s.sync_full) +
         " (last " + std::to_string(s.last_sync_us) + " us)\n";
  for (const auto& p : s.ports) {
    out += "port " + p.name + ":";
    if (!p.has_engine) {
      out += " no flow engine\n";
      continue;
    }
    out += std::string(" ") + (p.async_api ? "async (template) API" : "sync API") + "\n";
    out += "  rules: full " + std::to_string(p.rules_full) + ", partial " + std::to_string(p.rules_partial) +
           ", pending " + std::to_string(p.pending) + "\n";
    for (const auto& t : p.tables) {
      out += "  " + t.table + " table: " + std::to_string(t.rules) + "/" +
             (t.capacity ? std::to_string(t.capacity) : std::string("?")) + " rules (" + fmt1(occupancy_pct(t)) +
             " %), pending " + std::to_string(t.pending) + ", inserted " + std::to_string(t.inserted) + " (" +
             fmt1(t.insert_rate) + "/s), deleted " + std::to_string(t.deleted) + " (" + fmt1(t.delete_rate) +
             "/s), failed " + std::to_string(t.failed) + ", evicted " + std::to_string(t.evicted) + ", demoted " +
             std::to_string(t.demoted) + "\n";
    }
    out += "  failed: " + failed_text(p.failed) + "\n";
    out += "  device resets: " + std::to_string(p.resets) + "\n";
    out += uncounted_text(p.hw_uncounted_reset, p.hw_uncounted_flow_gone);
    out += "  last error: " + (p.last_error.empty() ? std::string("none") : p.last_error + age_text(r.now_ns, p.last_error_ns)) +
           "\n";
  }
  return out;
}

void failed_json(Json& j, const std::vector<offload::FailedCount>& failed) {
  j.begin_object("failed");
  for (const auto& f : failed) j.field(f.reason, f.count);
  j.end_object();
}

std::string report_json(const OffloadReport& r) {
  const offload::OffloadStats& s = r.s;
  Json j;
  j.begin_object()
      .field("enabled", s.enabled)
      .field("mode", offload::mode_name(s.mode))
      .field("threads", s.threads)
      .field("promote_packets", static_cast<uint64_t>(r.cfg.promote_packets))
      .field("promote_window_ms", r.cfg.promote_window_ns / 1'000'000)
      .field("idle_ms", static_cast<uint64_t>(r.cfg.idle_ms))
      .field("flows_full", s.flows_full)
      .field("flows_partial", s.flows_partial);
  j.begin_object("totals")
      .field("rules_full", r.rules_full)
      .field("rules_partial", r.rules_partial)
      .field("pending", r.pending)
      .field("evicted", r.evicted)
      .field("demoted", r.demoted)
      .field("device_resets", r.resets)
      .field("hw_uncounted_reset", r.uncounted_reset)
      .field("hw_uncounted_flow_gone", r.uncounted_flow_gone);
  failed_json(j, r.failed);
  j.end_object();
  j.field("events", s.events)
      .field("events_lost", s.events_lost)
      .field("hot_microflows", s.hot_microflows)
      .field("sync_terse", s.sync_terse)
      .field("sync_full", s.sync_full)
      .field("last_sync_us", s.last_sync_us);
  j.begin_array("ports");
  for (const auto& p : s.ports) {
    j.begin_object()
        .field("port", static_cast<uint64_t>(p.port))
        .field("name", p.name)
        .field("has_engine", p.has_engine)
        .field("async_api", p.async_api)
        .field("rules_full", p.rules_full)
        .field("rules_partial", p.rules_partial)
        .field("pending", p.pending);
    j.begin_array("tables");
    for (const auto& t : p.tables)
      j.begin_object()
          .field("table", t.table)
          .field("rules", t.rules)
          .field("capacity", t.capacity)
          .field("occupancy_pct", occupancy_pct(t))
          .field("pending", t.pending)
          .field("inserted", t.inserted)
          .field("deleted", t.deleted)
          .field("failed", t.failed)
          .field("evicted", t.evicted)
          .field("demoted", t.demoted)
          .field("insert_rate", t.insert_rate)
          .field("delete_rate", t.delete_rate)
          .end_object();
    j.end_array();
    failed_json(j, p.failed);
    j.field("device_resets", p.resets)
        .field("hw_uncounted_reset", p.hw_uncounted_reset)
        .field("hw_uncounted_flow_gone", p.hw_uncounted_flow_gone)
        .field("last_error", p.last_error);
    if (p.last_error_ns && p.last_error_ns <= r.now_ns)
      j.field("last_error_age_ms", (r.now_ns - p.last_error_ns) / 1'000'000);
    else
      j.null_field("last_error_age_ms");
    j.end_object();
  }
  j.end_array().end_object();
  return j.str();
}

// A number argument already range-checked by CLI11.
uint32_t u32_arg(const std::string& s) { return static_cast<uint32_t>(std::stoul(s)); }

}  // namespace

void add_offload_commands(CommandTree::Impl& t) {
  // Declarations. The offload engine has its own locks; none is concurrent
  // (offload-show waits on the engine's threads).
  t.declare("offload", control::Access::change);
  t.declare("set offload-mode", control::Access::change);
  t.declare("set n-offload-threads", control::Access::change);
  t.declare("set offload-promote-packets", control::Access::change);
  t.declare("set offload-idle-ms", control::Access::change);
  t.declare("offload-show", control::Access::show);

  // --- offload enable|disable ---
  CLI::App* off = t.app.add_subcommand("offload", "hardware offload of datapath flows (rte_flow): enable or disable");
  off->add_option("STATE", t.arg1, "enable or disable")->required()->check(CLI::IsMember({"enable", "disable"}));
  off->callback([&t] { t.status = t.sys.offload().set_enabled(t.arg1 == "enable").prefix("offload " + t.arg1); });

  // --- set offload-* ---
  CLI::App* set = t.app.get_subcommand("set");
  auto* mode = set->add_subcommand(
      "offload-mode", "exact-match rules for hot microflows (default), one masked rule per megaflow, or both");
  mode->add_option("MODE", t.arg1, "exact, megaflow or both")
      ->required()
      ->check(CLI::IsMember({"exact", "megaflow", "both"}));
  mode->callback([&t] {
    const auto m = offload::parse_mode(t.arg1);
    t.status = m ? t.sys.offload().set_mode(*m).prefix("offload-mode") : invalid("offload-mode: exact, megaflow or both");
  });
  auto* threads = set->add_subcommand("n-offload-threads", "offload engine threads (default 1; each owns a shard of the flows)");
  threads->add_option("N", t.arg1, "1.." + std::to_string(offload::kMaxOffloadThreads))
      ->required()
      ->check(CLI::Range(1.0, static_cast<double>(offload::kMaxOffloadThreads)));
  threads->callback([&t] { t.status = t.sys.offload().set_threads(u32_arg(t.arg1)).prefix("n-offload-threads"); });
  auto* promote = set->add_subcommand(
      "offload-promote-packets",
      "packets a microflow needs within the promote window (1 s) to get an exact-match hardware rule (default 16)");
  promote->add_option("N", t.arg1, "1.." + std::to_string(offload::kMaxPromotePackets))
      ->required()
      ->check(CLI::Range(1.0, static_cast<double>(offload::kMaxPromotePackets)));
  promote->callback(
      [&t] { t.status = t.sys.offload().set_promote_packets(u32_arg(t.arg1)).prefix("offload-promote-packets"); });
  auto* idle = set->add_subcommand("offload-idle-ms",
                                   "demote a hardware rule with no hit for this long (default 2000; 0: never)");
  idle->add_option("MS", t.arg1, "0, or 10.." + std::to_string(offload::kMaxIdleMs))
      ->required()
      ->check(CLI::Range(0.0, static_cast<double>(offload::kMaxIdleMs)));
  idle->callback([&t] { t.status = t.sys.offload().set_idle_ms(u32_arg(t.arg1)).prefix("offload-idle-ms"); });

  // --- offload-show ---
  auto* show = t.app.add_subcommand("offload-show", "hardware offload per port and table: rules, pending, failures, rates");
  t.add_format(show);
  show->callback([&t] {
    const OffloadReport r = offload_report(t.sys.offload());
    t.print(t.format == "json" ? report_json(r) + "\n" : report_text(r));
  });

  // Settings first, `offload enable` last (the engine starts deciding
  // with the settings in place). Reset: the engine's defaults, disabled.
  t.add_config_section({"offload", 820,
                        [&t](std::vector<std::string>& lines) {
                          const offload::OffloadConfig& c = t.sys.offload().config();
                          const offload::OffloadConfig def;
                          if (c.mode != def.mode) lines.push_back(std::string("set offload-mode ") + offload::mode_name(c.mode));
                          if (c.threads != def.threads)
                            lines.push_back("set n-offload-threads " + std::to_string(c.threads));
                          if (c.promote_packets != def.promote_packets)
                            lines.push_back("set offload-promote-packets " + std::to_string(c.promote_packets));
                          if (c.idle_ms != def.idle_ms) lines.push_back("set offload-idle-ms " + std::to_string(c.idle_ms));
                          if (c.enabled != def.enabled) lines.push_back(c.enabled ? "offload enable" : "offload disable");
                        },
                        [&t] {
                          offload::Offload& o = t.sys.offload();
                          const offload::OffloadConfig def;
                          (void)o.set_enabled(def.enabled);
                          (void)o.set_mode(def.mode);
                          (void)o.set_threads(def.threads);
                          (void)o.set_promote_packets(def.promote_packets);
                          (void)o.set_idle_ms(def.idle_ms);
                        }});
}

}  // namespace keel::cli

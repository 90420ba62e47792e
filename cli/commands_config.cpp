// Configuration commands: `show running-config`, `show startup-config`,
// `write memory`, `copy SRC DST`, `configure replace FILE`; the core
// running-config sections (cross-connects, datapath tunables); transactions
// and the boot config (cli/config.h).
#include "cli/config.h"

#include <algorithm>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "core/log.h"
#include "core/version.h"
#include "datapath/pmd.h"
#include "datapath/rxq_sched.h"

namespace keel::cli {

namespace {

KEEL_LOG_MODULE(log_cli, "cli");

// Commands that end a session, save, or run other configs: never lines of a
// configuration applied as a transaction.
constexpr std::string_view kNotConfig[] = {"configure", "copy", "write", "exit", "quit"};

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> v;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    v.emplace_back(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
  }
  return v;
}

std::vector<std::string> running_lines(CommandTree::Impl& t) {
  std::vector<const ConfigSection*> secs;
  for (const ConfigSection& s : t.config_sections) secs.push_back(&s);
  std::stable_sort(secs.begin(), secs.end(), [](auto* a, auto* b) { return a->order < b->order; });
  std::vector<std::string> lines;
  for (const ConfigSection* s : secs)
    if (s->emit) s->emit(lines);
  return lines;
}

std::string header(CommandTree::Impl& t) {
  return std::string("! keel ") + kVersion + " running-config, board " + std::string(t.sys.board().name);
}

// Checks every line before anything is applied: quoting, a known command,
// and a configuration command.
Status validate(CommandTree& tree, std::string_view text, std::string_view origin) {
  const auto names = tree.command_names();
  size_t n = 0;
  for (const std::string& line : split_lines(text)) {
    ++n;
    auto where = [&] { return std::string(origin) + ":" + std::to_string(n) + ": '" + line + "'"; };
    auto words = tokenize(line);
    if (!words) return std::move(words).take_status().prefix(where());
    if (words->empty() || (*words)[0][0] == '#' || (*words)[0][0] == '!') continue;
    const std::string& cmd = (*words)[0];
    if (std::find(names.begin(), names.end(), cmd) == names.end())
      return invalid("unknown command '" + cmd + "'").prefix(where());
    if (std::find(std::begin(kNotConfig), std::end(kNotConfig), cmd) != std::end(kNotConfig))
      return invalid("'" + cmd + "' is not a configuration command").prefix(where());
  }
  return {};
}

// A config file keel saved (startup-config, startup-config.good) ends with
// a newline. One that doesn't was cut short -- a copy or a disk that stopped
// in the middle of a line -- and its last line may still read as a command
// that means something else (`mtu_request=900` of `mtu_request=9000`), so
// the file is refused whole, before any line runs, naming that line.
Status check_not_cut_short(std::string_view text, std::string_view origin) {
  if (text.empty() || text.back() == '\n') return {};
  const size_t n = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  const size_t last = text.rfind('\n');
  const std::string_view line = last == std::string_view::npos ? text : text.substr(last + 1);
  return invalid(std::string(origin) + ":" + std::to_string(n) + ": '" + std::string(line) +
                 "': the file ends in the middle of this line (cut short?): nothing of it was applied");
}

// Applies a startup config (or the last good one) unless it was cut short.
Status apply_saved_config(CommandTree& tree, std::string_view text, const std::string& path, FILE* out) {
  if (Status st = check_not_cut_short(text, path); !st.ok()) return st;
  return apply_config(tree, text, path, out);
}

Result<std::string> read_text(const std::string& path) {
  auto r = control::ConfigStore::read(path);
  if (!r) return std::move(r).take_status();
  if (!r->has_value()) return error(Errc::not_found, "'" + path + "': No such file or directory");
  return std::move(**r);
}

// The core sections: cross-connects (the board default config's subject)
// and the datapath tunables (Open vSwitch other_config names).
void add_core_sections(CommandTree::Impl& t) {
  t.add_config_section({"xconnect", 100,
                        [&t](std::vector<std::string>& lines) {
                          for (const auto& [in, out] : t.sys.xconnects()) lines.push_back("xconnect " + in + " " + out);
                        },
                        [&t] {
                          for (const auto& [in, out] : t.sys.xconnects()) (void)t.sys.no_xconnect(in);
                        }});
  t.add_config_section({"datapath tunables", 800,
                        [&t](std::vector<std::string>& lines) {
                          const auto& pmds = t.sys.datapath().pmds();
                          if (pmds.empty()) return;
                          const datapath::PmdConfig def;  // every PMD is set alike
                          const auto& board = t.sys.board().pmd_cores;
                          const auto& cores = t.sys.datapath().pmd_cores();
                          if (!std::equal(cores.begin(), cores.end(), board.begin(), board.end()))
                            lines.push_back("set pmd-cpu-mask " + datapath::format_cpu_mask(cores));
                          if (pmds[0]->emc_insert_inv_prob() != def.emc_insert_inv_prob)
                            lines.push_back("set emc-insert-inv-prob " + std::to_string(pmds[0]->emc_insert_inv_prob()));
                          if (pmds[0]->smc_enabled() != def.smc_enable)
                            lines.push_back(std::string("set smc-enable ") + (pmds[0]->smc_enabled() ? "true" : "false"));
                          if (t.sys.datapath().vlan_limit() != packet::kDefaultVlanLimit)
                            lines.push_back("set vlan-limit " + std::to_string(t.sys.datapath().vlan_limit()));
                          datapath::Datapath& dp = t.sys.datapath();
                          if (dp.rxq_assign() != datapath::RxqAssignMode::cycles)
                            lines.push_back("set pmd-rxq-assign " + std::string(datapath::to_string(dp.rxq_assign())));
                          if (!dp.rxq_isolate()) lines.push_back("set pmd-rxq-isolate false");
                          const datapath::AutoLbConfig lb = dp.auto_lb().config(), lb_def;
                          if (lb.load_threshold_pct != lb_def.load_threshold_pct)
                            lines.push_back("set pmd-auto-lb-load-threshold " + std::to_string(lb.load_threshold_pct));
                          if (lb.improvement_threshold_pct != lb_def.improvement_threshold_pct)
                            lines.push_back("set pmd-auto-lb-improvement-threshold " +
                                            std::to_string(lb.improvement_threshold_pct));
                          if (lb.rebal_interval_ms != lb_def.rebal_interval_ms)
                            lines.push_back("set pmd-auto-lb-rebal-interval " +
                                            std::to_string(lb.rebal_interval_ms / 60'000));
                          if (lb.enabled != lb_def.enabled) lines.push_back("set pmd-auto-lb true");
                        },
                        [&t] {
                          const datapath::PmdConfig def;
                          const auto& board = t.sys.board().pmd_cores;
                          (void)t.sys.set_pmd_cores({board.begin(), board.end()});
                          t.sys.set_emc_insert_inv_prob(def.emc_insert_inv_prob);
                          t.sys.set_smc_enable(def.smc_enable);
                          t.sys.datapath().set_vlan_limit(packet::kDefaultVlanLimit);
                          datapath::Datapath& dp = t.sys.datapath();
                          dp.configure_auto_lb({});
                          if (dp.rxq_assign() != datapath::RxqAssignMode::cycles || !dp.rxq_isolate()) {
                            dp.set_rxq_assign(datapath::RxqAssignMode::cycles);
                            dp.set_rxq_isolate(true);
                            (void)dp.reschedule();
                          }
                        }});
}

Status save_startup(CommandTree::Impl& t) {
  if (!t.config_store) return error(Errc::unavailable, "no config directory (--config-dir)");
  if (Status st = t.config_store->save_startup(running_config(*t.tree)); !st.ok()) return st;
  t.print("saved the running config to " + t.config_store->startup_path() + "\n");
  return {};
}

}  // namespace

void set_config_store(CommandTree& tree, control::ConfigStore* store) { tree.impl().config_store = store; }

std::string running_config(CommandTree& tree) {
  CommandTree::Impl& t = tree.impl();
  std::string s = header(t) + "\n";
  for (const std::string& l : running_lines(t)) s += l + "\n";
  return s;
}

void reset_config(CommandTree& tree) {
  CommandTree::Impl& t = tree.impl();
  std::vector<const ConfigSection*> secs;
  for (const ConfigSection& s : t.config_sections) secs.push_back(&s);
  std::stable_sort(secs.begin(), secs.end(), [](auto* a, auto* b) { return a->order > b->order; });
  for (const ConfigSection* s : secs)
    if (s->reset) s->reset();
}

Status apply_transaction(CommandTree& tree, std::string_view text, std::string_view origin, bool replace, FILE* out) {
  if (Status st = validate(tree, text, origin); !st.ok()) return st;
  const std::string saved = running_config(tree);
  if (replace) reset_config(tree);
  Status st = apply_config(tree, text, origin, out);
  if (st.ok()) {
    KEEL_LOG(log_cli, info, "%s %.*s", replace ? "replaced the running config with" : "merged",
             static_cast<int>(origin.size()), origin.data());
    return st;
  }
  // Roll back: the saved running config rebuilds the previous state exactly.
  reset_config(tree);
  if (Status back = apply_config(tree, saved, "previous running-config", out); !back.ok())
    return error(Errc::internal, st.message() + "; restoring the previous state failed too: " + back.message());
  KEEL_LOG(log_cli, warn, "%s: rolled back: %s", replace ? "configure replace" : "copy", st.message().c_str());
  return st.prefix("nothing changed");
}

void add_config_commands(CommandTree::Impl& t) {
  // Declarations. write memory / copy / configure replace run other lines
  // (each takes what it needs; the gate is taken once, here), so they hold
  // no writer mutex themselves: pmd-cpu-mask inside a replace would
  // deadlock on it. Running-config sections take it with WriterLock.
  t.declare("show running-config", control::Access::show);
  t.declare("show startup-config", control::Access::show);
  t.declare("write memory", control::Access::admin);
  t.declare("copy", control::Access::admin);
  t.declare("configure replace", control::Access::admin);

  add_core_sections(t);

  CLI::App* show = t.app.get_subcommand("show");
  auto* run = show->add_subcommand("running-config", "the commands that rebuild the current configuration");
  t.add_format(run);
  run->callback([&t] {
    auto lines = running_lines(t);
    // Password hashes are for admins: another role sees "*****" in their
    // place (its copy of the config can't be replayed, nor cracked).
    if (t.tree->session().role != control::Role::admin)
      for (std::string& l : lines)
        if (l.rfind("username ", 0) == 0 && l.find(" secret ") != std::string::npos)
          l = l.substr(0, l.find(" secret ") + 8) + "*****";
    if (t.format == "json") {
      Json j;
      j.begin_object().field("version", kVersion).field("board", t.sys.board().name).begin_array("lines");
      for (const std::string& l : lines) j.value(l);
      j.end_array().end_object();
      t.print(j.str() + "\n");
      return;
    }
    std::string s = header(t) + "\n";
    for (const std::string& l : lines) s += l + "\n";
    t.print(s);
  });

  auto* startup = show->add_subcommand("startup-config", "the config that boot replays (DIR/startup-config)");
  t.add_format(startup);
  startup->callback([&t] {
    if (!t.config_store) {
      t.status = error(Errc::unavailable, "no config directory");
      return;
    }
    auto r = t.config_store->read_startup();
    if (!r) {
      t.status = std::move(r).take_status();
      return;
    }
    if (t.format == "json") {
      Json j;
      j.begin_object().field("path", t.config_store->startup_path()).field("exists", r->has_value());
      j.begin_array("lines");
      if (r->has_value())
        for (const std::string& l : split_lines(**r)) j.value(l);
      j.end_array().end_object();
      t.print(j.str() + "\n");
      return;
    }
    if (!r->has_value()) {
      t.status = error(Errc::not_found, "no startup config (" + t.config_store->startup_path() + ")");
      return;
    }
    t.print(**r);
  });

  // write memory / copy / configure replace run other commands, so they do
  // their work after the parse (Impl::after_parse).
  CLI::App* write = t.app.add_subcommand("write", "save configuration");
  write->require_subcommand(1);
  write->add_subcommand("memory", "save the running config as the startup config (atomic; keeps a .bak)")
      ->callback([&t] {
        t.after_parse = [&t] { return save_startup(t).prefix("write memory"); };
      });

  auto* copy = t.app.add_subcommand(
      "copy", "copy running-config startup-config|FILE, or copy startup-config|FILE running-config (merge, all or nothing)");
  copy->add_option("SRC", t.arg1, "running-config, startup-config or a file")->required();
  copy->add_option("DST", t.arg2, "running-config, startup-config or a file")->required();
  copy->callback([&t] {
    std::string src = t.arg1, dst = t.arg2;
    t.after_parse = [&t, src, dst]() -> Status {
      if (src == "running-config") {
        if (dst == "running-config") return {};
        if (dst == "startup-config") return save_startup(t);
        if (Status st = control::write_file_atomic(dst, running_config(*t.tree)); !st.ok()) return st;
        t.print("saved the running config to " + dst + "\n");
        return {};
      }
      if (dst != "running-config")
        return invalid("copy: copies to running-config, or from running-config (not '" + src + "' to '" + dst + "')");
      std::string path = src;
      if (src == "startup-config") {
        if (!t.config_store) return error(Errc::unavailable, "no config directory (--config-dir)");
        path = t.config_store->startup_path();
      }
      auto text = read_text(path);
      if (!text) return std::move(text).take_status();
      return apply_transaction(*t.tree, *text, path, false, t.out);
    };
  });

  CLI::App* conf = t.app.add_subcommand("configure", "change the configuration");
  conf->require_subcommand(1);
  auto* replace = conf->add_subcommand("replace", "make FILE the whole running config, all or nothing");
  replace->add_option("FILE", t.arg1, "a config file (console commands)")->required();
  replace->callback([&t] {
    std::string path = t.arg1;
    t.after_parse = [&t, path]() -> Status {
      auto text = read_text(path);
      if (!text) return std::move(text).take_status();
      return apply_transaction(*t.tree, *text, path, true, t.out);
    };
  });
}

Result<BootConfig> apply_boot_config(CommandTree& tree, const std::optional<std::string>& explicit_text,
                                     const std::string& explicit_origin, FILE* out, FILE* err) {
  CommandTree::Impl& t = tree.impl();
  if (explicit_text) {
    if (Status st = apply_config(tree, *explicit_text, explicit_origin, out); !st.ok()) return st;
    return BootConfig{*explicit_text, explicit_origin, false};
  }
  auto loud = [&](const std::string& msg) {
    fprintf(err, "keel: error: %s\n", msg.c_str());
    fflush(err);
    log::note(log_cli, log::Level::err, msg);
  };
  std::optional<std::string> startup_text;
  if (t.config_store) {
    const std::string path = t.config_store->startup_path();
    auto startup = t.config_store->read_startup();
    if (!startup) {
      loud("startup config: " + startup.status().message());
    } else if (startup->has_value()) {
      startup_text = **startup;
      Status st = apply_saved_config(tree, *startup_text, path, out);
      if (st.ok()) return BootConfig{*startup_text, path, true};
      reset_config(tree);
      loud("startup config failed: " + st.message());
    }
    if (startup_text || !startup) {
      auto good = t.config_store->read_good();
      if (good && good->has_value() && (!startup_text || **good != *startup_text)) {
        loud("booting the last good config " + t.config_store->good_path() + " instead");
        Status st = apply_saved_config(tree, **good, t.config_store->good_path(), out);
        if (st.ok()) return BootConfig{**good, t.config_store->good_path(), false};
        reset_config(tree);
        loud("last good config failed too: " + st.message());
      }
      loud("booting the board's default config instead");
    }
  }
  BootConfig b{std::string(t.sys.board().default_config),
               "board " + std::string(t.sys.board().name) + " default config", false};
  if (Status st = apply_config(tree, b.text, b.origin, out); !st.ok()) return st;
  return b;
}

void boot_config_succeeded(CommandTree& tree, const BootConfig& booted, FILE* err) {
  CommandTree::Impl& t = tree.impl();
  if (!booted.from_startup || !t.config_store) return;
  if (Status st = t.config_store->mark_good(booted.text); !st.ok()) {
    fprintf(err, "keel: warning: could not record the good config: %s\n", st.message().c_str());
    log::note(log_cli, log::Level::warn, "could not record the good config: " + st.message());
  }
}

}  // namespace keel::cli

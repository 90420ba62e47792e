// CommandTree's insides, shared by the files that add commands to it
// (console.cpp: the core commands; commands_datapath.cpp: datapath flows,
// PMD statistics, dpcls). Only cli/ includes this (it includes CLI11).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "cli/console.h"

namespace keel::datapath {
struct PmdBondView;  // datapath/bond_table.h (only commands_datapath.cpp needs its layout)
}

namespace keel::hal::sim {
class SimNic;  // keel/hal/sim_nic.h
}

namespace keel::control {
class ConfigStore;
}

namespace keel::cli {

// Running-config hook. A command family that holds configuration registers
// one section (from its add_*_commands function, with t.add_config_section):
//   name    what it is, for messages ("logging");
//   order   sections print in ascending order, so a thing is created before
//           what refers to it: 50 users, 100 ports/xconnects, 200 bridges, 300 bonds and
//           tunnels, 400 routes and neighbours, 500 rules, 800 datapath
//           tunables, 900 logging (cli/commands_config.cpp has the core ones);
//   emit    appends the console commands that rebuild the family's current
//           state from boot defaults, one per string, in replay order; only
//           what differs from the default (datapath flows and counters are
//           state, not configuration: they emit nothing);
//   reset   returns the family to its boot defaults; cannot fail. Sections
//           reset in descending order (rules before the bridges they use).
// `show running-config` prints the emitted lines; `write memory` saves them;
// `configure replace` and a failed startup config call reset. A family's
// emit + reset must round-trip: reset, then replaying emit's lines, gives the
// same emit again (tests/integration/test_config.py checks the whole tree).
struct ConfigSection {
  std::string name;
  int order = 0;
  std::function<void(std::vector<std::string>& lines)> emit;
  std::function<void()> reset;
};

// What a command needs from control::Control, declared once per leaf
// command (every path a line can run) by the family that adds it, with
// Impl::declare. A unit test (tests/unit/control_test.cpp) checks that every
// runnable command has exactly one declaration.
//   access         show (every role) / change (operator, admin) / admin;
//   concurrent     may run at once with other concurrent commands (shared
//                  gate): only commands audited to read atomics or state
//                  under its own lock. A command that posts to a PMD's
//                  request ring (SPSC: one producer) is NOT concurrent;
//   locks_ofproto  runs holding Ofproto::writer_mutex(). False for commands
//                  that wait for threads which take it themselves (they
//                  would deadlock), and for commands that run other lines.
struct CommandDecl {
  control::Access access = control::Access::admin;
  bool concurrent = false;
  bool locks_ofproto = false;
};
inline constexpr bool kConcurrent = true;
inline constexpr bool kLocksOfproto = true;

struct CommandTree::Impl {
  explicit Impl(control::System& s) : sys(s) {}

  control::System& sys;
  CommandTree* tree = nullptr;  // the tree this is the inside of
  CLI::App app{"keel console", "keel"};
  FILE* out = nullptr;
  Status status;
  bool* quit = nullptr;
  // Values bound to options and positionals; reset before every parse.
  std::string format, arg1, arg2;
  std::vector<std::string> words;
  bool flag_m = false, flag_terse = false, flag_names = false, flag_no_names = false;
  bool flag_keel = false;  // --keel: keel's own lines after Open vSwitch's
  // Running-config sections (see ConfigSection) and where `write memory`
  // saves (cli/commands_config.cpp; null: no config directory).
  std::vector<ConfigSection> config_sections;
  control::ConfigStore* config_store = nullptr;
  void add_config_section(ConfigSection s) { config_sections.push_back(std::move(s)); }

  // Declarations by command path ("show ports", "set emc-insert-inv-prob").
  std::map<std::string, CommandDecl, std::less<>> decls;
  std::vector<std::string> duplicate_decls;  // declared twice (a bug the unit test reports)
  void declare(const std::string& path, control::Access access, bool concurrent = false, bool locks_ofproto = false) {
    if (!decls.emplace(path, CommandDecl{access, concurrent, locks_ofproto}).second) duplicate_decls.push_back(path);
  }
  // Every command path a line can run (an app without sub-commands, or one
  // whose sub-commands are optional), in tree order.
  std::vector<std::string> runnable_paths() const;
  // Problems with the declarations: runnable commands without one,
  // declarations of no runnable command, duplicates. Empty when all is well.
  std::vector<std::string> declaration_problems() const;
  // The command a line names (walking its words through the sub-command
  // tree as the parse will), and its declaration.
  control::CommandInfo command_info(const std::vector<std::string>& words, std::string& path) const;
  // Work that must run after CLI11's parse returns (a command that runs
  // other commands, like `configure replace`, can't re-enter parse from
  // its callback). execute() runs it and returns its Status.
  std::function<Status()> after_parse;

  // Commands that speak ovs-vsctl, where a lone "--" separates commands
  // (`add-port br0 p1 -- set Interface p1 ofport_request=2`). CLI11 gives
  // "--" a meaning of its own (the end of options, and of a positional
  // list that already has values), so execute() hands those words to it
  // as kVsctlSeparator, an ordinary word, and the command maps them back.
  std::vector<std::string> vsctl_commands;
  static constexpr const char* kVsctlSeparator = "\x1f--";

  void reset() {
    format = "text";
    arg1.clear();
    arg2.clear();
    words.clear();
    flag_m = flag_terse = flag_names = flag_no_names = false;
    flag_keel = false;
    status = {};
    after_parse = nullptr;
  }
  void print(const std::string& s) { fputs(s.c_str(), out); }

  void add_format(CLI::App* cmd) {
    cmd->add_option("--format", format, "output format")->check(CLI::IsMember({"text", "json"}));
  }

  void build();
  void cmd_help();
  void cmd_version();
  void cmd_show_board();
  void cmd_show_ports();
  void cmd_show_control();
};

void add_datapath_commands(CommandTree::Impl& t);
// pmd-bond-show's text (cli/commands_datapath.cpp) from Datapath::bond_dump():
// Open vSwitch 3.1's dpif-netdev/bond-show, and keel's per-PMD view (--pmd).
std::string pmd_bond_show_text(std::span<const datapath::PmdBondView> views);
std::string pmd_bond_show_pmd_text(std::span<const datapath::PmdBondView> views);
void add_config_commands(CommandTree::Impl& t);   // cli/commands_config.cpp
void add_logging_commands(CommandTree::Impl& t);  // cli/commands_logging.cpp
void add_users_commands(CommandTree::Impl& t);    // cli/commands_users.cpp
void add_ssh_commands(CommandTree::Impl& t);      // cli/commands_ssh.cpp (after users)
void add_ofproto_commands(CommandTree::Impl& t);  // cli/commands_ofproto.cpp
void add_trace_commands(CommandTree::Impl& t);    // cli/commands_trace.cpp
void add_udpif_commands(CommandTree::Impl& t);    // cli/commands_udpif.cpp
void add_fdb_commands(CommandTree::Impl& t);      // cli/commands_fdb.cpp
void add_tlv_commands(CommandTree::Impl& t);      // cli/commands_tlv.cpp
void add_bond_commands(CommandTree::Impl& t);     // cli/commands_bond.cpp
void add_perf_commands(CommandTree::Impl& t);     // cli/commands_perf.cpp
void add_tunnel_commands(CommandTree::Impl& t);   // cli/commands_tunnel.cpp
void add_offload_commands(CommandTree::Impl& t);  // cli/commands_offload.cpp (after datapath: uses `set`)
void add_offload_debug_commands(CommandTree::Impl& t);  // cli/commands_offload_debug.cpp (`debug offload-fault`)
void add_drops_commands(CommandTree::Impl& t);    // cli/commands_drops.cpp (`show drops`, `coverage-show`)
// coverage-show's counters now, by name (cli/commands_drops.cpp): what the
// console's periodic work samples for the rates (control/coverage.h).
std::vector<control::Coverage::Counter> coverage_counters(control::System& sys);
void add_fault_debug_commands(CommandTree::Impl& t);    // cli/commands_fault_debug.cpp (`debug fault`; after offload-fault's `debug`)
// The sim NIC model of the first datapath port that has one (`debug
// offload-fault`), or why there is none (cli/commands_offload_debug.cpp).
Result<hal::sim::SimNic*> find_sim_nic(control::System& sys);

// The words of a trailing positional joined by single blanks (a flow or a
// match given as several arguments is one string to its parser).
inline std::string join_words(const std::vector<std::string>& w) {
  std::string s;
  for (const std::string& x : w) s += (s.empty() ? "" : " ") + x;
  return s;
}

}  // namespace keel::cli

// CommandTree's insides, shared by the files that add commands to it
// (console.cpp: the core commands; commands_datapath.cpp: datapath flows,
// PMD statistics, dpcls). Only cli/ includes this (it includes CLI11).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/console.h"

namespace keel::cli {

struct CommandTree::Impl {
  explicit Impl(control::System& s) : sys(s) {}

  control::System& sys;
  CLI::App app{"keel console", "keel"};
  FILE* out = nullptr;
  Status status;
  bool* quit = nullptr;
  // Values bound to options and positionals; reset before every parse.
  std::string format, arg1, arg2;
  std::vector<std::string> words;
  bool flag_m = false, flag_terse = false;

  void reset() {
    format = "text";
    arg1.clear();
    arg2.clear();
    words.clear();
    flag_m = flag_terse = false;
    status = {};
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
};

void add_datapath_commands(CommandTree::Impl& t);

}  // namespace keel::cli

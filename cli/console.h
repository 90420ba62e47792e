// The console: keel's one command tree, and the loop that feeds it lines.
//
// CommandTree holds every console command (built with CLI11, which stays
// inside cli/). The same tree runs the startup config, the serial console on
// stdin/stdout, and (later) SSH sessions. A command either applies whole or
// changes nothing and says why.
//
// Thread-safety: control thread only.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "control/system.h"
#include "core/status.h"

namespace keel::cli {

// Splits a command line into words: blanks separate; '...' and "..." quote;
// backslash escapes the next character outside single quotes. An unclosed
// quote or a trailing backslash is an error.
Result<std::vector<std::string>> tokenize(std::string_view line);

class CommandTree {
 public:
  explicit CommandTree(control::System& sys);
  ~CommandTree();
  CommandTree(const CommandTree&) = delete;
  CommandTree& operator=(const CommandTree&) = delete;

  // Runs one line. Output goes to `out`; the returned Status carries the
  // error message (the caller decides where errors are shown). Blank lines
  // and lines starting with '#' or '!' are comments.
  Status execute(std::string_view line, FILE* out);

  bool quit_requested() const { return quit_; }
  std::vector<std::string> command_names() const;

  struct Impl;  // cli/command_tree_impl.h
  Impl& impl() { return *impl_; }  // for the command families in cli/

 private:
  std::unique_ptr<Impl> impl_;
  bool quit_ = false;
};

// Runs a configuration (one command per line). Stops at the first failing
// line and returns "ORIGIN:LINE: <command>: <reason>".
Status apply_config(CommandTree& tree, std::string_view text, std::string_view origin, FILE* out);

// The serial console on a byte stream. Interactive: a prompt, errors shown
// inline, Ctrl-D or `exit` ends it. Not interactive (a script on stdin): no
// prompt and no echo, one command per line. Returns the process exit status:
// 0, or 1 if any command failed.
int run_console(CommandTree& tree, int in_fd, FILE* out, FILE* err, bool interactive);

}  // namespace keel::cli

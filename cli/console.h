// The console: keel's one command tree, and the loop that feeds it lines.
//
// CommandTree holds every console command (built with CLI11, which stays
// inside cli/). The same tree runs the startup config, the serial console on
// stdin/stdout, `keel --exec` and SSH sessions. A command either applies
// whole or changes nothing and says why.
//
// Each tree serves one session (control/session.h: who, role, terminal) and
// runs every line through control::Control::run with it: the role check
// against the command's declared Access, the gate (shared for concurrent
// show commands, exclusive for everything else), the Ofproto writer lock
// for commands that declare it, and the audit log. Several trees may exist
// at once (one per SSH session), each executing on its own thread.
//
// Thread-safety: one tree is used by one thread at a time (its session,
// bound values, terminal, quit flag and config store are its own); any
// number of trees may execute at once on different threads (Control
// serialises what they change).
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/line_editor.h"
#include "control/system.h"
#include "core/status.h"

namespace keel::cli {

class ControlSocket;  // cli/control_socket.h

// Splits a command line into words: blanks separate; '...' and "..." quote;
// backslash escapes the next character outside single quotes. An unclosed
// quote or a trailing backslash is an error.
Result<std::vector<std::string>> tokenize(std::string_view line);

// Settings of one console session's terminal (`terminal length N`,
// `terminal width N` change them; run_console applies them to its editor).
struct TerminalSettings {
  int length = 24;  // rows per page of output; 0 = no --More-- paging
  int width = 80;   // columns
};

class CommandTree {
 public:
  explicit CommandTree(control::System& sys, control::Session session = {});
  ~CommandTree();
  CommandTree(const CommandTree&) = delete;
  CommandTree& operator=(const CommandTree&) = delete;

  // Runs one line. Output goes to `out`; the returned Status carries the
  // error message (the caller decides where errors are shown). Blank lines
  // and lines starting with '#' or '!' are comments.
  Status execute(std::string_view line, FILE* out);

  // The session this tree runs commands for (the SSH glue updates rows and
  // cols on a window-change; the serial console's login sets user and role).
  const control::Session& session() const { return session_; }
  control::Session& session() { return session_; }

  // `exit`/`quit` ran: the session ends (for an SSH session: that session
  // only, never keel; for the serial console: keel shuts down, as before).
  bool quit_requested() const { return quit_; }
  void clear_quit() { quit_ = false; }
  // The control thread's periodic work, called by the console loops at
  // least every 200 ms while they wait for input: the datapath's automatic
  // load balancer (Datapath::auto_lb_tick) and coverage-show's rate
  // sampling (control/coverage.h), about once a second, under Control's
  // exclusive gate.
  void periodic();
  std::vector<std::string> command_names() const;
  // Every command path a line can run ("show ports", "set flow-limit"), and
  // what is wrong with their declarations (command_tree_impl.h:
  // CommandDecl): missing, duplicate or naming no command. Empty: all
  // declared once.
  std::vector<std::string> command_paths() const;
  std::vector<std::string> declaration_problems() const;
  // The declared access of the command a line runs ("" if none applies).
  std::optional<control::CommandInfo> command_info(std::string_view line) const;

  // Completion data for the line editor. `before_cursor` is the line up to
  // the cursor; the last word is the partial word being completed (empty
  // when the line ends with a blank). Returns what that word can be at this
  // point, already filtered by the partial word: sub-commands and commands
  // (with their help), option names, values of options and positionals that
  // take a fixed set of values, known names (ports; bridges and bonds when
  // they exist) for positionals that name one, and placeholders (literal =
  // false: "IN", "<cr>" when the command can run as typed) for '?'.
  std::vector<Completion> completions(std::string_view before_cursor) const;
  std::vector<Completion> completions(const std::vector<std::string>& words, std::string_view partial) const;

  // The terminal of the session running commands now; `terminal ...`
  // commands change it. Null (a config file, a script): they do nothing.
  void attach_terminal(TerminalSettings* t) { terminal_ = t; }

  struct Impl;  // cli/command_tree_impl.h
  Impl& impl() { return *impl_; }  // for the command families in cli/

 private:
  void add_terminal_commands();

  std::unique_ptr<Impl> impl_;
  control::Session session_;
  bool quit_ = false;
  TerminalSettings* terminal_ = nullptr;
  int terminal_arg_ = 0;  // bound to `terminal length|width N`
  uint64_t last_periodic_ms_ = 0;
};

// The line editor of an interactive session (serial console, SSH pty):
// sized to `term`, completing from `tree`, and `term` attached to the tree
// so `terminal length|width` change it. Both must outlive the editor.
LineEditor make_session_editor(CommandTree& tree, TerminalSettings& term);

// Runs a configuration (one command per line). Stops at the first failing
// line and returns "ORIGIN:LINE: <command>: <reason>".
Status apply_config(CommandTree& tree, std::string_view text, std::string_view origin, FILE* out);

// The serial console on a byte stream. Interactive: a prompt, errors shown
// inline, Ctrl-D or `exit` ends it. Not interactive (a script on stdin): no
// prompt and no echo, one command per line. Returns the process exit status:
// 0, or 1 if any command failed.
//
// Interactive, the line editor (cli/line_editor.h) runs on in_fd and
// fileno(out); when in_fd is a terminal it is put in raw mode for the session
// and restored on return, and on fatal signals (SIGSEGV, SIGABRT, SIGBUS,
// SIGFPE, SIGHUP) before they take their default action. SIGINT and SIGTERM
// (keel's shutdown flag) end the session within 200 ms.
//
// `exec` (may be null): the control socket whose `keel --exec` requests the
// loop runs between its own lines, so the tree only ever runs on this thread.
//
// Login: an interactive session asks `login:` and `Password:` (not echoed)
// first when at least one user is configured (control/users.h). A script on
// stdin is never asked: it is the local operator's own shell (whoever can
// pipe into keel's stdin started keel), like a config file.
int run_console(CommandTree& tree, int in_fd, FILE* out, FILE* err, bool interactive,
                ControlSocket* exec = nullptr);

// The interactive console on a byte stream: the editor reads in_fd and writes
// out_fd (the same fd for a UART). `banner` is shown before the login (if
// users are configured) and the first prompt. Returns 0 when the session ends
// (exit, ^D -- at the prompt or at login:, hangup, shutdown).
//
// Login: "login: " (echoed) then "Password: " (not echoed); a wrong name and
// a wrong password both answer "Login incorrect". After kLoginAttempts
// failures the console waits kLoginDelayMs, dropping what is typed meanwhile,
// then asks again. ^C starts the login over.
int run_terminal(CommandTree& tree, int in_fd, int out_fd, std::string_view banner,
                 ControlSocket* exec = nullptr);
inline constexpr int kLoginAttempts = 3;
inline constexpr int kLoginDelayMs = 3000;

// Opens a UART for the console (--console /dev/ttyX): raw mode, 8N1, no flow
// control, modem lines ignored, at `baud` (the board's console_baud). Returns
// the fd (close it when done) or why not.
Result<int> open_serial_console(const std::string& path, uint32_t baud);

}  // namespace keel::cli

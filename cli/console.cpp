// The command tree and the console loop. CLI11 parses each line: the tree is
// built once; every execute() resets the bound option values and parses.
// CLI11 throws; exceptions end here and become Status messages.
#include "cli/console.h"
#include "cli/command_tree_impl.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <sstream>

#include "boards/board.h"
#include "cli/control_socket.h"
#include "cli/json.h"
#include "cli/table.h"
#include "cli/view.h"
#include "core/log.h"
#include "core/shutdown.h"
#include "core/version.h"
#include "keel/hal/backend.h"
#include "keel/hal/cpu.h"

namespace keel::cli {

Result<std::vector<std::string>> tokenize(std::string_view line) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < line.size()) {
        cur += line[++i];
      } else {
        cur += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\') {
      if (i + 1 == line.size()) return invalid("trailing backslash at column " + std::to_string(i + 1));
      cur += line[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      if (in_word) words.push_back(std::move(cur)), cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote) return invalid(std::string("unclosed ") + quote + " quote");
  if (in_word) words.push_back(std::move(cur));
  return words;
}

namespace {

// CLI11 2.1.2 (Debian 12's) never empties an App's parse order (App::clear()
// leaves it): every value a command line gives appends a pointer to its
// command's list, so a console that runs commands for months grew by ~24
// bytes a command (the soak's RSS slope: 1.3 MiB/min at 1,000 rule changes
// a second). Emptied before each parse, for the tree; nothing of ours reads
// it. (Newer CLI11 clears it in clear(); then this is a no-op.)
void forget_parse_order(CLI::App& app) {
  // The list is an App member behind a const getter; the App is not const.
  const_cast<std::vector<CLI::Option*>&>(app.parse_order()).clear();
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) forget_parse_order(*sub);
}


size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string link_text(const hal::LinkState& l) { return l.up ? "up" : "down"; }

std::string cores_text(std::span<const int> cores) {
  std::string s;
  for (int c : cores) s += (s.empty() ? "" : ",") + (c < 0 ? std::string("unpinned") : std::to_string(c));
  return s.empty() ? "none" : s;
}

}  // namespace

void CommandTree::Impl::build() {
  // Declarations of the core commands (command_tree_impl.h: CommandDecl);
  // each family declares its own in its add_*_commands. help and version
  // read nothing that changes; show board the board (constant); show ports
  // the port counters (relaxed atomics) and the port list (fixed at boot;
  // xconnects change only under the exclusive gate): concurrent.
  declare("help", control::Access::show, kConcurrent);
  declare("version", control::Access::show, kConcurrent);
  declare("show board", control::Access::show, kConcurrent);
  declare("show ports", control::Access::show, kConcurrent);
  declare("show control", control::Access::show, kConcurrent);  // atomics and this tree's session
  declare("xconnect", control::Access::change);
  declare("no xconnect", control::Access::change);
  // Leaving and the terminal settings are the session's own.
  declare("exit", control::Access::show, kConcurrent);
  declare("quit", control::Access::show, kConcurrent);
  declare("terminal length", control::Access::show, kConcurrent);
  declare("terminal width", control::Access::show, kConcurrent);

  app.set_help_flag();  // `help` is a command; `<command> --help` still works
  app.require_subcommand(0, 1);
  app.fallthrough(false);

  app.add_subcommand("help", "list the commands")->callback([this] { cmd_help(); });
  auto* version = app.add_subcommand("version", "show the firmware version");
  add_format(version);
  version->callback([this] { cmd_version(); });

  CLI::App* show = app.add_subcommand("show", "show state (board, ports)");
  show->require_subcommand(1);
  auto* board = show->add_subcommand("board", "the board keel booted on");
  add_format(board);
  board->callback([this] { cmd_show_board(); });
  auto* control = show->add_subcommand("control", "the command gate: commands run, changes, refusals; this session");
  add_format(control);
  control->callback([this] { cmd_show_control(); });
  auto* ports = show->add_subcommand("ports", "ports, their link and packet counters");
  add_format(ports);
  ports->callback([this] { cmd_show_ports(); });

  auto* xc = app.add_subcommand("xconnect", "forward every packet received on IN out of OUT");
  xc->add_option("IN", arg1, "input port")->required();
  xc->add_option("OUT", arg2, "output port")->required();
  xc->callback([this] { status = sys.xconnect(arg1, arg2); });

  CLI::App* no = app.add_subcommand("no", "undo a setting");
  no->require_subcommand(1);
  auto* noxc = no->add_subcommand("xconnect", "stop forwarding packets received on IN");
  noxc->add_option("IN", arg1, "input port")->required();
  noxc->callback([this] { status = sys.no_xconnect(arg1); });

  auto quit_cb = [this] { *quit = true; };
  add_datapath_commands(*this);
  add_ofproto_commands(*this);
  add_trace_commands(*this);
  add_udpif_commands(*this);
  add_fdb_commands(*this);
  add_tlv_commands(*this);
  add_bond_commands(*this);
  add_perf_commands(*this);
  add_tunnel_commands(*this);
  add_offload_commands(*this);
  add_offload_debug_commands(*this);
  add_drops_commands(*this);
  add_fault_debug_commands(*this);
  add_config_commands(*this);
  add_logging_commands(*this);
  add_users_commands(*this);
  add_ssh_commands(*this);  // after users: its config section follows theirs

  app.add_subcommand("exit", "leave the console (shuts keel down)")->callback(quit_cb);
  app.add_subcommand("quit", "same as exit")->callback(quit_cb);
}

void CommandTree::Impl::cmd_help() {
  Table t({"Command", "Description"});
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    auto subs = sub->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) {
      t.add({sub->get_name(), sub->get_description()});
    } else {
      for (const CLI::App* s2 : subs) t.add({sub->get_name() + " " + s2->get_name(), s2->get_description()});
    }
  }
  print(t.str() + "Type '<command> --help' for the arguments of a command.\n");
}

void CommandTree::Impl::cmd_version() {
  std::string be;
  for (const std::string& b : sys.backends()) be += " " + b;
  if (format == "json") {
    Json j;
    j.begin_object().field("version", kVersion).field("git_revision", kGitRevision).field("arch", kBuildArch);
    j.begin_array("backends_built").value("sim");
    if (hal::have_dpdk()) j.value("dpdk");
    j.end_array().begin_array("backends_running");
    for (const std::string& b : sys.backends()) j.value(b);
    j.end_array().end_object();
    print(j.str() + "\n");
    return;
  }
  print(std::string("keel ") + kVersion + " (" + kGitRevision + ", " + kBuildArch + ")\n" +
        "HAL backends in this build: sim" + (hal::have_dpdk() ? " dpdk" : "") + "; running:" + be +
        "\n");
}

void CommandTree::Impl::cmd_show_board() {
  const boards::Board& b = sys.board();
  if (format == "json") {
    Json j;
    j.begin_object()
        .field("name", b.name)
        .field("description", b.description)
        .field("backend", boards::to_string(b.backend));
    j.begin_array("pmd_cores");
    for (int c : b.pmd_cores) j.field({}, static_cast<int64_t>(c));
    j.end_array();
    j.field("control_core", static_cast<int64_t>(b.control_core))
        .field("offload_flows", static_cast<uint64_t>(b.offload_flows))
        .field("console_baud", static_cast<uint64_t>(b.console_baud));
    j.begin_array("ports");
    for (const boards::BoardPort& p : b.ports)
      j.begin_object().field("name", p.name).field("role", hal::to_string(p.role)).field("spec", p.spec).end_object();
    j.end_array().end_object();
    print(j.str() + "\n");
    return;
  }
  std::string s;
  s += "Board:        " + std::string(b.name) + "\n";
  s += "Description:  " + std::string(b.description) + "\n";
  s += "Backend:      " + std::string(boards::to_string(b.backend)) + "\n";
  s += "PMD cores:    " + cores_text(b.pmd_cores) + "\n";
  s += "Control core: " + cores_text(std::span(&b.control_core, 1)) + "\n";
  s += "Offload:      " + std::to_string(b.offload_flows) + " flows\n";
  s += "Console:      " + std::to_string(b.console_baud) + " baud\n";
  s += "Board ports:\n";
  Table t({"  Name", "Role", "Spec"});
  for (const boards::BoardPort& p : b.ports)
    t.add({"  " + std::string(p.name), hal::to_string(p.role), std::string(p.spec)});
  print(s + t.str());
}

void CommandTree::Impl::cmd_show_control() {
  const control::Control& c = sys.control();
  const control::Session& s = tree->session();
  View v;
  v.field("commands", "Commands run", c.commands());
  v.field("changes", "Changes", c.changes());
  v.field("refused", "Refused", c.refused());
  View& me = v.object("session", "This session");
  me.field("id", "Id", s.id);
  me.field("origin", "Origin", control::to_string(s.origin));
  me.field("user", "User", s.user, s.user.empty() ? "-" : s.user);
  me.field("role", "Role", control::to_string(s.role));
  me.field("peer", "Peer", s.peer, s.peer.empty() ? "-" : s.peer);
  me.field("rows", "Rows", s.rows);
  me.field("cols", "Columns", s.cols);
  print(format == "json" ? v.json() + "\n" : v.text());
}

void CommandTree::Impl::cmd_show_ports() {
  auto ports = sys.ports();
  if (format == "json") {
    Json j;
    j.begin_object().begin_array("ports");
    for (const control::PortView& p : ports) {
      j.begin_object()
          .field("name", p.name)
          .field("id", static_cast<uint64_t>(p.id))
          .field("kind", p.kind)
          .field("role", p.role)
          .field("spec", p.spec)
          .field("rx_queues", static_cast<uint64_t>(p.n_rxq))
          .field("tx_queues", static_cast<uint64_t>(p.n_txq))
          .field("mtu", static_cast<uint64_t>(p.mtu));
      j.begin_object("link").field("up", p.link.up).field("speed_mbps", static_cast<uint64_t>(p.link.speed_mbps)).end_object();
      j.begin_object("rx")
          .field("packets", p.counters.rx_packets)
          .field("bytes", p.counters.rx_bytes)
          .field("dropped", p.counters.rx_dropped)
          .field("hw_forwarded", p.counters.rx_hw_forwarded)
          .field("hw_dropped", p.counters.rx_hw_dropped)
          .end_object();
      j.begin_object("tx")
          .field("packets", p.counters.tx_packets)
          .field("bytes", p.counters.tx_bytes)
          .field("dropped", p.counters.tx_dropped)
          .field("mtu_exceeded_drops", p.counters.tx_mtu_exceeded_drops)
          .field("link_down_drops", p.counters.tx_link_down_drops)
          .end_object();
      if (p.xconnect) j.field("xconnect", *p.xconnect);
      else j.null_field("xconnect");
      j.end_object();
    }
    j.end_array().end_object();
    print(j.str() + "\n");
    return;
  }
  Table t({"Port", "Id", "Kind", "Role", "Link", "MTU", "Rx-pkts", "Rx-bytes", "Rx-drop", "Tx-pkts",
           "Tx-bytes", "Tx-drop", "Xconnect"});
  for (const control::PortView& p : ports) {
    const auto& c = p.counters;
    t.add({p.name, std::to_string(p.id), p.kind, p.role, link_text(p.link), std::to_string(p.mtu),
           std::to_string(c.rx_packets), std::to_string(c.rx_bytes), std::to_string(c.rx_dropped),
           std::to_string(c.tx_packets), std::to_string(c.tx_bytes), std::to_string(c.tx_dropped),
           p.xconnect.value_or("-")});
  }
  print(t.str());
}

CommandTree::CommandTree(control::System& sys, control::Session session)
    : impl_(std::make_unique<Impl>(sys)), session_(std::move(session)) {
  if (session_.id == 0) session_.id = control::next_session_id();
  impl_->quit = &quit_;
  impl_->tree = this;
  impl_->build();
  add_terminal_commands();
}

CommandTree::~CommandTree() = default;

std::vector<std::string> CommandTree::command_names() const {
  std::vector<std::string> v;
  for (const CLI::App* sub : impl_->app.get_subcommands([](const CLI::App*) { return true; }))
    v.push_back(sub->get_name());
  return v;
}

void CommandTree::periodic() {
  const uint64_t now_ms = hal::now_ns() / 1'000'000;
  if (now_ms - last_periodic_ms_ < 1000) return;
  last_periodic_ms_ = now_ms;
  impl_->sys.control().exclusive([&] {
    (void)impl_->sys.datapath().auto_lb_tick(now_ms);
    impl_->sys.coverage().run(now_ms, coverage_counters(impl_->sys));  // coverage-show's rates
  });
}

Status CommandTree::execute(std::string_view line, FILE* out) {
  auto words = tokenize(line);
  if (!words) return std::move(words).take_status();
  if (words->empty() || (*words)[0][0] == '#' || (*words)[0][0] == '!') return {};

  const std::string& cmd = (*words)[0];
  auto names = command_names();
  if (std::find(names.begin(), names.end(), cmd) == names.end()) {
    std::string best;
    size_t best_d = 3;
    for (const std::string& n : names) {
      size_t d = n.rfind(cmd, 0) == 0 ? 1 : edit_distance(cmd, n);
      if (d < best_d) best_d = d, best = n;
    }
    return invalid("unknown command '" + cmd + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
  }

  Impl& im = *impl_;
  std::string path;
  const control::CommandInfo info = im.command_info(*words, path);
  // The parse runs the command's callback, so it runs inside Control::run:
  // the role is checked and the gate taken before anything changes.
  return im.sys.control().run(session_, info, line, [&]() -> Status {
    im.reset();
    im.out = out;
    if (std::find(im.vsctl_commands.begin(), im.vsctl_commands.end(), cmd) != im.vsctl_commands.end())
      for (std::string& w : *words)
        if (w == "--") w = Impl::kVsctlSeparator;
    std::vector<std::string> args(words->rbegin(), words->rend());  // CLI11 wants them reversed
    forget_parse_order(im.app);
    try {
      im.app.parse(args);
    } catch (const CLI::CallForHelp&) {
      fputs(im.app.help().c_str(), out);
      return {};
    } catch (const CLI::ParseError& e) {
      return invalid(cmd + ": " + e.what());
    }
    Status st = std::move(im.status);
    if (st.ok() && im.after_parse) st = std::exchange(im.after_parse, nullptr)();
    return st;
  });
}

Status apply_config(CommandTree& tree, std::string_view text, std::string_view origin, FILE* out) {
  // Outermost (boot, a test): the lines are the config file's, Origin::config
  // and admin. Inside a command (configure replace, copy): they run as the
  // session that typed it, under the gate its line holds.
  std::optional<control::Session> saved;
  if (!control::Control::in_command()) {
    saved = tree.session();
    control::Session& s = tree.session();
    s.origin = control::Origin::config;
    s.user.clear();
    s.role = control::Role::admin;
    s.peer = std::string(origin);
  }
  struct Restore {
    CommandTree& tree;
    std::optional<control::Session>& saved;
    ~Restore() {
      if (saved) tree.session() = std::move(*saved);
    }
  } restore{tree, saved};
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    Status st = tree.execute(line, out);
    if (!st.ok())
      return st.prefix(std::string(origin) + ":" + std::to_string(line_no) + ": '" + std::string(line) + "'");
  }
  return {};
}

// --- completion data ---------------------------------------------------------
//
// The completer walks the CLI11 tree the way a parse would: words that name a
// sub-command descend; "-x"/"--name" words are options (one that takes a value
// swallows the next word); the rest fill the positionals in order. What can
// come next is then listed from where the walk stopped.

namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

const CLI::App* find_subcommand(const CLI::App* app, std::string_view name) {
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

const CLI::Option* find_option(const CLI::App* app, std::string_view word) {
  for (const CLI::Option* o : app->get_options()) {
    for (const std::string& l : o->get_lnames())
      if (word.size() == l.size() + 2 && starts_with(word, "--") && word.substr(2) == l) return o;
    for (const std::string& s : o->get_snames())
      if (word.size() == s.size() + 1 && word[0] == '-' && word.substr(1) == s) return o;
  }
  return nullptr;
}

// The values of a CLI::IsMember check: CLI11 describes it as "{a,b,c}" in
// the option's type name ("TEXT:{text,json}").
std::vector<std::string> member_values(const CLI::Option* o) {
  std::string t = o->get_type_name();
  size_t open = t.find('{'), close = t.find('}', open == std::string::npos ? 0 : open);
  std::vector<std::string> v;
  if (open == std::string::npos || close == std::string::npos) return v;
  std::string_view set(t.data() + open + 1, close - open - 1);
  while (!set.empty()) {
    size_t comma = set.find(',');
    if (!set.substr(0, comma).empty()) v.emplace_back(set.substr(0, comma));
    set = comma == std::string_view::npos ? std::string_view{} : set.substr(comma + 1);
  }
  return v;
}

// Which known names a positional takes: a bridge when its name is BR or its
// help has the word "bridge"; a port when its name is PORT, IN or OUT or its
// help has the word "port". (Bonds: the same rule with their word, when they
// exist.)
enum class NameKind { none, port, bridge };

bool has_word(std::string_view text, std::string_view word) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; };
  for (size_t i = text.find(word); i != std::string_view::npos; i = text.find(word, i + 1)) {
    size_t end = i + word.size();
    bool left = i == 0 || !ident(text[i - 1]);
    bool right = end == text.size() || !ident(text[end]) || (text[end] == 's' && (end + 1 == text.size() || !ident(text[end + 1])));
    if (left && right) return true;
  }
  return false;
}

NameKind name_kind(const CLI::Option* o) {
  std::string name = o->get_name(true);
  if (name == "BR" || has_word(o->get_description(), "bridge")) return NameKind::bridge;
  if (name == "PORT" || name == "IN" || name == "OUT" || has_word(o->get_description(), "port")) return NameKind::port;
  return NameKind::none;
}

}  // namespace

// --- command declarations (command_tree_impl.h: CommandDecl) ---------------

namespace {

bool runnable(const CLI::App* app) {
  return app->get_subcommands([](const CLI::App*) { return true; }).empty() || app->get_require_subcommand_min() == 0;
}

void collect_paths(const CLI::App* app, const std::string& prefix, std::vector<std::string>& out) {
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    const std::string path = prefix.empty() ? sub->get_name() : prefix + " " + sub->get_name();
    if (runnable(sub)) out.push_back(path);
    collect_paths(sub, path, out);
  }
}

}  // namespace

std::vector<std::string> CommandTree::command_paths() const { return impl_->runnable_paths(); }
std::vector<std::string> CommandTree::declaration_problems() const { return impl_->declaration_problems(); }
std::optional<control::CommandInfo> CommandTree::command_info(std::string_view line) const {
  auto words = tokenize(line);
  if (!words || words->empty()) return std::nullopt;
  static thread_local std::string path;  // CommandInfo::path views it
  return impl_->command_info(*words, path);
}

std::vector<std::string> CommandTree::Impl::runnable_paths() const {
  std::vector<std::string> v;
  collect_paths(&app, "", v);
  return v;
}

std::vector<std::string> CommandTree::Impl::declaration_problems() const {
  std::vector<std::string> problems;
  const auto paths = runnable_paths();
  for (const std::string& p : paths)
    if (!decls.count(p)) problems.push_back("'" + p + "' has no declaration");
  for (const auto& [p, d] : decls)
    if (std::find(paths.begin(), paths.end(), p) == paths.end()) problems.push_back("'" + p + "' is declared but is no command");
  for (const std::string& p : duplicate_decls) problems.push_back("'" + p + "' is declared twice");
  return problems;
}

control::CommandInfo CommandTree::Impl::command_info(const std::vector<std::string>& words, std::string& path) const {
  const CLI::App* cur = &app;
  path.clear();
  bool positional = false;
  bool help = false;
  const CLI::Option* want_value = nullptr;
  for (const std::string& w : words) {
    if (want_value) {
      want_value = nullptr;
      continue;
    }
    if (w == "--help" || w == "-h") help = true;
    if (!positional) {
      if (const CLI::App* sub = find_subcommand(cur, w)) {
        cur = sub;
        path += (path.empty() ? "" : " ") + w;
        continue;
      }
    }
    if (w.size() > 1 && w[0] == '-') {
      const CLI::Option* o = w.find('=') == std::string::npos ? find_option(cur, w) : nullptr;
      if (o && o->get_type_size_max() > 0) want_value = o;
      continue;
    }
    positional = true;
  }
  // `COMMAND --help` only prints; an incomplete command (`show`) only fails
  // to parse: both are open to every role.
  if (help || !runnable(cur)) return {path, control::Access::show, false, false};
  auto it = decls.find(path);
  if (it == decls.end()) return {path, control::Access::admin, false, false};  // undeclared: the safe side
  return {it->first, it->second.access, it->second.concurrent, it->second.locks_ofproto};
}

std::vector<Completion> CommandTree::completions(std::string_view before_cursor) const {
  auto words = tokenize(before_cursor);
  if (!words) return {};  // inside an open quote, or after a lone backslash
  std::string partial;
  char last = before_cursor.empty() ? ' ' : before_cursor.back();
  if (last != ' ' && last != '\t' && !words->empty()) {
    partial = std::move(words->back());
    words->pop_back();
  }
  return completions(*words, partial);
}

std::vector<Completion> CommandTree::completions(const std::vector<std::string>& words,
                                                 std::string_view partial) const {
  const CLI::App* root = &impl_->app;
  const CLI::App* app = root;
  size_t positional_words = 0;              // words that filled positionals of `app`
  const CLI::Option* want_value = nullptr;  // the previous word was an option taking a value
  for (const std::string& w : words) {
    if (want_value) {
      want_value = nullptr;
      continue;
    }
    if (const CLI::App* sub = find_subcommand(app, w); sub && positional_words == 0) {
      app = sub;
      continue;
    }
    if (app == root) return {};  // not a command: nothing can follow
    if (w.size() > 1 && w[0] == '-') {
      const CLI::Option* o = w.find('=') == std::string::npos ? find_option(app, w) : nullptr;
      if (o && o->get_type_size_max() > 0) want_value = o;
      continue;
    }
    ++positional_words;
  }

  std::vector<Completion> out;
  auto add = [&](std::string word, std::string help, bool literal = true) {
    if (!literal || starts_with(word, partial)) out.push_back({std::move(word), std::move(help), literal});
  };

  if (want_value) {
    for (std::string& v : member_values(want_value)) add(std::move(v), want_value->get_description());
    std::string type = want_value->get_type_name();
    add("<" + type.substr(0, type.find(':')) + ">", want_value->get_description(), false);
    return out;
  }

  if (positional_words == 0 && !starts_with(partial, "-"))
    for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; }))
      add(sub->get_name(), sub->get_description());
  if (app == root) return out;

  // The positional the word under the cursor would fill.
  size_t skip = positional_words;
  size_t required_items = 0;
  const CLI::Option* current = nullptr;
  for (const CLI::Option* o : app->get_options([](const CLI::Option* o) { return o->get_positional(); })) {
    size_t items = static_cast<size_t>(std::max(o->get_items_expected_max(), 1));
    if (o->get_required()) required_items += static_cast<size_t>(std::max(o->get_items_expected_min(), 1));
    if (!current && skip < items) current = o;
    else if (!current) skip -= items;
  }
  if (current && !starts_with(partial, "-")) {
    if (name_kind(current) == NameKind::port)
      for (const std::string& p : impl_->sys.port_names()) add(p, "port");
    if (name_kind(current) == NameKind::bridge)
      for (const std::string& b : impl_->sys.bridge_names()) add(b, "bridge");
    for (std::string& v : member_values(current)) add(std::move(v), current->get_description());
    add(current->get_name(true), current->get_description(), false);
  }

  if (partial.empty() || partial[0] == '-') {
    for (const CLI::Option* o : app->get_options([](const CLI::Option* o) { return o->nonpositional(); })) {
      std::string name = o->get_lnames().empty() ? "-" + o->get_snames()[0] : "--" + o->get_lnames()[0];
      add(name, o->get_description());
    }
  }
  if (partial.empty() && app->get_require_subcommand_min() == 0 && positional_words >= required_items)
    add("<cr>", "run the command", false);
  return out;
}

// --- terminal settings -------------------------------------------------------

void CommandTree::add_terminal_commands() {
  CLI::App* term = impl_->app.add_subcommand("terminal", "settings of this console session");
  term->require_subcommand(1);
  auto* length = term->add_subcommand("length", "rows per page of output before --More-- (0: no paging)");
  length->add_option("N", terminal_arg_, "rows, 0..512")->required()->check(CLI::Range(0, 512));
  length->callback([this] {
    session_.rows = terminal_arg_;
    if (terminal_) terminal_->length = terminal_arg_;
  });
  auto* width = term->add_subcommand("width", "columns of the terminal (longer lines scroll)");
  width->add_option("N", terminal_arg_, "columns, 20..1000")->required()->check(CLI::Range(20, 1000));
  width->callback([this] {
    session_.cols = terminal_arg_;
    if (terminal_) terminal_->width = terminal_arg_;
  });
}

// --- the consoles --------------------------------------------------------------

namespace {

// Raw mode on a terminal for one session. The saved settings also sit in a
// static slot so that a fatal signal can put the terminal back (tcsetattr is
// async-signal-safe) before the signal's default action; one raw terminal at
// a time.
class RawMode {
 public:
  explicit RawMode(int fd) {
    if (!isatty(fd) || tcgetattr(fd, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_iflag &= ~static_cast<tcflag_t>(BRKINT | ICRNL | INPCK | ISTRIP | IXON | INLCR | IGNCR);
    raw.c_cflag |= CS8;
    // ^C, ^Z, ^\ are keys for the editor, not signals. Output processing
    // stays on (ONLCR): the editor writes CRLF itself, and a log line written
    // by another thread to the same terminal still starts at column 0.
    raw.c_lflag &= ~static_cast<tcflag_t>(ECHO | ICANON | IEXTEN | ISIG);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(fd, TCSANOW, &raw) != 0) return;
    fd_ = fd;
    g_saved = saved_;
    g_fd.store(fd, std::memory_order_release);  // the handler reads g_saved after seeing the fd
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~RawMode() {
    if (fd_ < 0) return;
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
    g_fd.store(-1, std::memory_order_release);
    tcsetattr(fd_, TCSADRAIN, &saved_);
  }
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;

 private:
  static constexpr std::array<int, 5> kSignals = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGHUP};
  static void on_fatal_signal(int sig) {
    int fd = g_fd.exchange(-1, std::memory_order_acq_rel);
    if (fd >= 0) tcsetattr(fd, TCSANOW, &g_saved);
    raise(sig);  // SA_RESETHAND: the default action now
  }
  static inline std::atomic<int> g_fd{-1};
  static inline termios g_saved{};

  int fd_ = -1;
  termios saved_{};
  std::array<struct sigaction, kSignals.size()> old_{};
};

// Writes all of `data`; false when the other end is gone.
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        poll(&p, 1, 200);
      }
      continue;
    }
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Runs one line with its output captured, so the editor can page it.
std::string run_captured(CommandTree& tree, const std::string& line) {
  char* text = nullptr;
  size_t size = 0;
  FILE* mem = open_memstream(&text, &size);
  if (!mem) return "error: out of memory\n";
  Status st = tree.execute(line, mem);
  fclose(mem);
  std::string out(text, size);
  free(text);
  if (!st.ok()) out += "error: " + st.message() + "\n";
  return out;
}

// Waits up to timeout_ms for input on in_fd and meanwhile runs a waiting
// `keel --exec` request (with the session's terminal detached: `terminal ...`
// over --exec changes nothing). 1: in_fd is readable (or hung up); 0: not
// yet; -1: poll failed.
int wait_input(int in_fd, CommandTree& tree, ControlSocket* exec, TerminalSettings* term, int timeout_ms) {
  tree.periodic();
  pollfd p[2] = {{in_fd, POLLIN, 0}, {exec ? exec->wake_fd() : -1, POLLIN, 0}};
  int r = poll(p, 2, timeout_ms);
  if (r < 0) return errno == EINTR ? 0 : -1;
  if (exec && (p[1].revents & POLLIN)) {
    tree.attach_terminal(nullptr);
    exec->serve(tree);
    tree.attach_terminal(term);
  }
  return (p[0].revents & (POLLIN | POLLHUP | POLLERR)) ? 1 : 0;
}

KEEL_LOG_MODULE(log_console, "console");

// Line input for the login prompts: printable ASCII (at most kMaxLoginLine
// bytes), Backspace, ^U, ^C (start over), ^D on an empty line (end the
// session); escape sequences are swallowed. Echo is off for the password.
// Bytes typed past the line stay queued for the line editor.
class LoginInput {
 public:
  enum class Read { line, abandon, eof };
  static constexpr size_t kMaxLoginLine = 256;

  LoginInput(int in_fd, int out_fd, CommandTree& tree, ControlSocket* exec, TerminalSettings* term)
      : in_fd_(in_fd), out_fd_(out_fd), tree_(tree), exec_(exec), term_(term) {}

  void write(std::string_view s) { (void)write_all(out_fd_, s); }

  Read read_line(bool echo, std::string& line) {
    line.clear();
    for (;;) {
      while (pos_ < pending_.size()) {
        const auto c = static_cast<unsigned char>(pending_[pos_++]);
        if (esc_ == 1) {  // after ESC: CSI / SS3 introducer, or a lone ESC
          esc_ = (c == '[' || c == 'O') ? 2 : 0;
          continue;
        }
        if (esc_ == 2) {  // parameters until the final byte
          if (c >= 0x40 && c <= 0x7e) esc_ = 0;
          continue;
        }
        if (c == '\n' && last_cr_) {
          last_cr_ = false;
          continue;
        }
        last_cr_ = c == '\r';
        if (c == '\r' || c == '\n') {
          write("\r\n");
          return Read::line;
        }
        if (c == 0x1b) {
          esc_ = 1;
        } else if (c == 0x03) {  // ^C
          write("^C\r\n");
          return Read::abandon;
        } else if (c == 0x04) {  // ^D
          if (line.empty()) {
            write("\r\n");
            return Read::eof;
          }
        } else if (c == 0x7f || c == 0x08) {
          if (!line.empty()) {
            line.pop_back();
            if (echo) write("\b \b");
          }
        } else if (c == 0x15) {  // ^U
          if (echo)
            for (size_t i = 0; i < line.size(); ++i) write("\b \b");
          line.clear();
        } else if (c >= 0x20 && c < 0x7f && line.size() < kMaxLoginLine) {
          line += static_cast<char>(c);
          if (echo) write(std::string_view(&line.back(), 1));
        }
      }
      if (!fill()) return Read::eof;
    }
  }

  // Waits `ms`, dropping what is typed meanwhile. False: the session ended.
  bool discard_for(int ms) {
    pending_.clear();
    pos_ = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      if (shutdown_requested()) return false;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) return true;
      int r = wait_input(in_fd_, tree_, exec_, term_, static_cast<int>(std::min<long long>(left, 200)));
      if (r < 0) return false;
      if (r == 0) continue;
      char chunk[256];
      ssize_t n = ::read(in_fd_, chunk, sizeof chunk);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return false;
    }
  }

  // What was typed after the last line (for the line editor).
  std::string take_pending() {
    if (last_cr_ && pos_ < pending_.size() && pending_[pos_] == '\n') ++pos_;
    std::string rest = pending_.substr(pos_);
    pending_.clear();
    pos_ = 0;
    return rest;
  }

 private:
  bool fill() {
    pending_.erase(0, pos_);
    pos_ = 0;
    for (;;) {
      if (shutdown_requested()) return false;
      int r = wait_input(in_fd_, tree_, exec_, term_, 200);
      if (r < 0) return false;
      if (r == 0) continue;
      char chunk[256];
      ssize_t n = ::read(in_fd_, chunk, sizeof chunk);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return false;  // hangup or end of input
      pending_.append(chunk, static_cast<size_t>(n));
      return true;
    }
  }

  int in_fd_, out_fd_;
  CommandTree& tree_;
  ControlSocket* exec_;
  TerminalSettings* term_;
  std::string pending_;
  size_t pos_ = 0;
  int esc_ = 0;
  bool last_cr_ = false;
};

// The login step: true once a user logged in, false when the session ended
// first (^D, hangup, shutdown).
bool login(LoginInput& in, const control::Users& users, control::Session& session) {
  int failures = 0;
  for (;;) {
    if (users.empty()) return true;  // the last user was removed (keel --exec) meanwhile
    in.write("login: ");
    std::string name, password;
    LoginInput::Read r = in.read_line(true, name);
    if (r == LoginInput::Read::eof) return false;
    if (r == LoginInput::Read::abandon || name.empty()) continue;
    in.write("Password: ");
    r = in.read_line(false, password);
    if (r == LoginInput::Read::eof) return false;
    if (r == LoginInput::Read::abandon) continue;
    const bool ok = users.verify(name, password);
    password.assign(password.size(), '\0');
    if (ok) {
      // The role is read once, at login (a role changed later applies at
      // the next login); a user removed meanwhile has none: read-only.
      session.user = name;
      session.role = users.role(name).value_or(control::Role::read_only);
      KEEL_LOG(log_console, info, "console login: user %s (%s)", name.c_str(), control::to_string(session.role));
      return true;
    }
    KEEL_LOG(log_console, info, "console login failed (user '%s')", name.c_str());
    in.write("Login incorrect\r\n");
    if (++failures >= kLoginAttempts) {
      failures = 0;
      if (!in.discard_for(kLoginDelayMs)) return false;
    }
  }
}

std::optional<speed_t> baud_constant(uint32_t baud) {
  switch (baud) {
    case 9600: return B9600;
    case 19200: return B19200;
    case 38400: return B38400;
    case 57600: return B57600;
    case 115200: return B115200;
    case 230400: return B230400;
    case 460800: return B460800;
    case 921600: return B921600;
    case 1000000: return B1000000;
    case 1500000: return B1500000;
    case 2000000: return B2000000;
    case 3000000: return B3000000;
    default: return std::nullopt;
  }
}

}  // namespace

LineEditor make_session_editor(CommandTree& tree, TerminalSettings& term) {
  LineEditor::Config cfg;
  cfg.height = term.length;
  cfg.width = term.width;
  LineEditor ed(cfg);
  ed.set_completer([&tree](std::string_view before) { return tree.completions(before); });
  tree.attach_terminal(&term);
  return ed;
}

int run_terminal(CommandTree& tree, int in_fd, int out_fd, std::string_view banner, ControlSocket* exec) {
  TerminalSettings term;
  if (winsize ws{}; ioctl(out_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
    term.length = ws.ws_row;
    term.width = ws.ws_col;
  }
  tree.session().rows = term.length;
  tree.session().cols = term.width;
  LineEditor ed = make_session_editor(tree, term);
  RawMode raw(in_fd);

  if (!banner.empty()) ed.write(banner);
  if (const control::Users& users = tree.impl().sys.users(); !users.empty()) {
    (void)write_all(out_fd, ed.take_output());
    LoginInput in(in_fd, out_fd, tree, exec, &term);
    if (!login(in, users, tree.session())) {
      tree.attach_terminal(nullptr);
      return 0;
    }
    ed.feed(in.take_pending());
  }
  bool alive = true;
  while (alive && !tree.quit_requested() && !shutdown_requested()) {
    LineEditor::Event ev = ed.step();
    alive = write_all(out_fd, ed.take_output());
    if (ev == LineEditor::Event::eof) break;
    if (ev == LineEditor::Event::line) {
      std::string out = run_captured(tree, ed.line_text());
      ed.set_height(term.length);
      ed.set_width(term.width);
      if (tree.quit_requested()) ed.set_height(0);  // the last output: no one will page it
      ed.write(out);
      alive = alive && write_all(out_fd, ed.take_output());
      continue;
    }
    // Wait for input; wake up now and then to see the shutdown flag (the
    // signal may have gone to another thread).
    int r = wait_input(in_fd, tree, exec, &term, 200);
    if (r < 0) break;
    if (r == 0) continue;
    char chunk[256];
    ssize_t n = ::read(in_fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // hangup or end of input
    ed.feed(std::string_view(chunk, static_cast<size_t>(n)));
  }
  tree.attach_terminal(nullptr);
  return 0;
}

Result<int> open_serial_console(const std::string& path, uint32_t baud) {
  auto fail = [&](const std::string& why) {
    return error(Errc::io_error, "console '" + path + "': " + why);
  };
  auto speed = baud_constant(baud);
  if (!speed) return fail("baud rate " + std::to_string(baud) + " not supported");
  // O_NONBLOCK: don't wait for carrier on open; cleared once CLOCAL is set.
  int fd = open(path.c_str(), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fail(strerror(errno));
  termios t{};
  if (!isatty(fd) || tcgetattr(fd, &t) != 0) {
    close(fd);
    return fail("not a terminal");
  }
  cfmakeraw(&t);
  t.c_cflag |= CLOCAL | CREAD;
  t.c_cflag &= ~static_cast<tcflag_t>(CSTOPB | PARENB | CRTSCTS);
  t.c_iflag &= ~static_cast<tcflag_t>(IXON | IXOFF | IXANY);
  t.c_cc[VMIN] = 1;
  t.c_cc[VTIME] = 0;
  if (cfsetispeed(&t, *speed) != 0 || cfsetospeed(&t, *speed) != 0 || tcsetattr(fd, TCSANOW, &t) != 0) {
    std::string why = strerror(errno);
    close(fd);
    return fail(why);
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

int run_console(CommandTree& tree, int in_fd, FILE* out, FILE* err, bool interactive, ControlSocket* exec) {
  if (interactive) {
    fflush(out);
    return run_terminal(tree, in_fd, fileno(out), {}, exec);
  }
  // A script: no prompt, no echo, one command per line.
  constexpr size_t kMaxLine = 4096;
  int exit_status = 0;
  std::string buf;
  bool eof = false;
  bool too_long = false;
  bool discarding = false;  // inside a line that is already too long
  while (!tree.quit_requested() && !shutdown_requested()) {
    // Read one line (bytes up to '\n'), bounded: an over-long line is
    // discarded whole and reported, never executed in pieces.
    std::string line;
    for (;;) {
      size_t nl = buf.find('\n');
      if (nl != std::string::npos) {
        line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        if (discarding) too_long = true, discarding = false;
        break;
      }
      if (buf.size() > kMaxLine) {
        discarding = true;
        buf.clear();
      }
      char chunk[1024];
      ssize_t n = 0;  // 0 (end of input) if shutting down while waiting
      if (wait_input(in_fd, tree, exec, nullptr, 200) == 0) {
        if (!shutdown_requested()) continue;
      } else {
        n = read(in_fd, chunk, sizeof chunk);
      }
      if (n < 0 && errno == EINTR && !shutdown_requested()) continue;
      if (n <= 0) {
        eof = true;
        if (discarding) too_long = true, discarding = false;
        line = std::move(buf);
        buf.clear();
        break;
      }
      buf.append(chunk, static_cast<size_t>(n));
    }
    if (too_long) {
      too_long = false;
      fprintf(err, "error: line longer than %zu bytes ignored\n", kMaxLine);
      exit_status = 1;
    } else if (!line.empty()) {
      Status st = tree.execute(line, out);
      fflush(out);
      if (!st.ok()) {
        fprintf(err, "error: %s\n", st.message().c_str());
        fflush(err);
        exit_status = 1;
      }
    }
    if (eof) break;
  }
  fflush(out);
  return exit_status;
}

}  // namespace keel::cli

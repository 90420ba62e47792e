// The command tree and the console loop. CLI11 parses each line: the tree is
// built once; every execute() resets the bound option values and parses.
// CLI11 throws; exceptions end here and become Status messages.
#include "cli/console.h"
#include "cli/command_tree_impl.h"

#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "boards/board.h"
#include "cli/json.h"
#include "cli/table.h"
#include "core/shutdown.h"
#include "core/version.h"
#include "keel/hal/backend.h"

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
  add_config_commands(*this);
  add_logging_commands(*this);

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
          .field("tx_queues", static_cast<uint64_t>(p.n_txq));
      j.begin_object("link").field("up", p.link.up).field("speed_mbps", static_cast<uint64_t>(p.link.speed_mbps)).end_object();
      j.begin_object("rx")
          .field("packets", p.counters.rx_packets)
          .field("bytes", p.counters.rx_bytes)
          .field("dropped", p.counters.rx_dropped)
          .end_object();
      j.begin_object("tx")
          .field("packets", p.counters.tx_packets)
          .field("bytes", p.counters.tx_bytes)
          .field("dropped", p.counters.tx_dropped)
          .end_object();
      if (p.xconnect) j.field("xconnect", *p.xconnect);
      else j.null_field("xconnect");
      j.end_object();
    }
    j.end_array().end_object();
    print(j.str() + "\n");
    return;
  }
  Table t({"Port", "Id", "Kind", "Role", "Link", "Rx-pkts", "Rx-bytes", "Rx-drop", "Tx-pkts", "Tx-bytes",
           "Tx-drop", "Xconnect"});
  for (const control::PortView& p : ports) {
    const auto& c = p.counters;
    t.add({p.name, std::to_string(p.id), p.kind, p.role, link_text(p.link), std::to_string(c.rx_packets),
           std::to_string(c.rx_bytes), std::to_string(c.rx_dropped), std::to_string(c.tx_packets),
           std::to_string(c.tx_bytes), std::to_string(c.tx_dropped), p.xconnect.value_or("-")});
  }
  print(t.str());
}

CommandTree::CommandTree(control::System& sys) : impl_(std::make_unique<Impl>(sys)) {
  impl_->quit = &quit_;
  impl_->tree = this;
  impl_->build();
}

CommandTree::~CommandTree() = default;

std::vector<std::string> CommandTree::command_names() const {
  std::vector<std::string> v;
  for (const CLI::App* sub : impl_->app.get_subcommands([](const CLI::App*) { return true; }))
    v.push_back(sub->get_name());
  return v;
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
  im.reset();
  im.out = out;
  std::vector<std::string> args(words->rbegin(), words->rend());  // CLI11 wants them reversed
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
}

Status apply_config(CommandTree& tree, std::string_view text, std::string_view origin, FILE* out) {
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

int run_console(CommandTree& tree, int in_fd, FILE* out, FILE* err, bool interactive) {
  constexpr size_t kMaxLine = 4096;
  int exit_status = 0;
  std::string buf;
  bool eof = false;
  bool too_long = false;
  bool discarding = false;  // inside a line that is already too long
  while (!tree.quit_requested() && !shutdown_requested()) {
    if (interactive) {
      fputs("keel> ", out);
      fflush(out);
    }
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
      ssize_t n = read(in_fd, chunk, sizeof chunk);
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
  if (interactive && eof) fputs("\n", out);
  fflush(out);
  return interactive ? 0 : exit_status;
}

}  // namespace keel::cli

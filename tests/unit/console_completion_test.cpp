// Completion data from the command tree (CommandTree::completions), alone and
// through the line editor's Tab and '?', and the `terminal` commands.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/command_tree_impl.h"
#include "cli/console.h"
#include "cli/line_editor.h"
#include "control/system.h"

using namespace keel;
using cli::Completion;

namespace {

std::vector<std::string> words_of(const std::vector<Completion>& v, bool literal_only = true) {
  std::vector<std::string> w;
  for (const Completion& c : v)
    if (c.literal || !literal_only) w.push_back(c.word);
  return w;
}

bool has(const std::vector<std::string>& v, const std::string& w) {
  return std::find(v.begin(), v.end(), w) != v.end();
}

struct Fixture {
  std::unique_ptr<control::System> sys;
  std::unique_ptr<cli::CommandTree> tree;
  Fixture() {
    auto s = control::System::boot({});
    REQUIRE_MESSAGE(s.ok(), s.status().message());
    sys = std::move(*s);
    tree = std::make_unique<cli::CommandTree>(*sys);
  }
  // Types keys into an editor completing from the tree; returns the line.
  std::string type(const std::string& keys, std::string* out = nullptr) {
    cli::LineEditor ed;
    ed.set_completer([this](std::string_view b) { return tree->completions(b); });
    ed.feed(keys);
    ed.step();
    if (out) *out = ed.take_output();
    return ed.buffer();
  }
};

}  // namespace

TEST_CASE("commands and sub-commands complete, with their help") {
  Fixture f;
  auto root = f.tree->completions("");
  auto names = words_of(root);
  for (const char* c : {"help", "version", "show", "xconnect", "no", "pmd-stats-show", "terminal", "exit"})
    CHECK_MESSAGE(has(names, c), c);
  for (const Completion& c : root) CHECK_MESSAGE(!c.help.empty(), c.word);

  auto pmd = words_of(f.tree->completions("pmd-st"));
  CHECK(has(pmd, "pmd-stats-show"));
  CHECK(has(pmd, "pmd-stats-clear"));
  CHECK_FALSE(has(pmd, "pmd-rxq-show"));
  CHECK(f.type("pmd-st\t") == "pmd-stats-");

  CHECK(words_of(f.tree->completions("show p")) == std::vector<std::string>{"ports"});
  CHECK(f.type("show p\t") == "show ports ");
  CHECK(f.type("sh\tbo\t") == "show board ");
  CHECK(f.type("no x\t") == "no xconnect ");
  CHECK(f.type("terminal le\t") == "terminal length ");
}

TEST_CASE("options, their values, and known names (ports)") {
  Fixture f;
  CHECK(f.type("show ports --f\t") == "show ports --format ");
  CHECK(f.type("show ports --format j\t") == "show ports --format json ");
  auto fmt = words_of(f.tree->completions("show ports --format "));
  CHECK(has(fmt, "text"));
  CHECK(has(fmt, "json"));

  auto ports = words_of(f.tree->completions("xconnect "));
  CHECK(has(ports, "p0"));
  CHECK(has(ports, "p1"));
  CHECK(f.type("xconnect p0 p\t") == "xconnect p0 p");  // p0 and p1: a common prefix only
  CHECK(words_of(f.tree->completions("no xconnect p")) == std::vector<std::string>{"p0", "p1"});
  CHECK(f.type("set smc-enable t\t") == "set smc-enable true ");
  auto flags = words_of(f.tree->completions("flow-dump -"));
  CHECK(has(flags, "--more"));
  CHECK(has(flags, "--terse"));
}

TEST_CASE("bridge names complete where a command takes a bridge, port names where it takes a port") {
  Fixture f;
  REQUIRE(f.tree->execute("add-br br-int", stdout).ok());
  REQUIRE(f.tree->execute("add-br br-ex", stdout).ok());
  auto br = words_of(f.tree->completions("dump-flows br-"));
  CHECK(has(br, "br-int"));
  CHECK(has(br, "br-ex"));
  CHECK(f.type("add-flow br-i\t") == "add-flow br-int ");
  auto ports = words_of(f.tree->completions("add-port br-int "));
  CHECK_FALSE(has(ports, "br-ex"));  // the first word is done: now a PORT
  auto names = f.sys->port_names();
  REQUIRE(!names.empty());
  CHECK(has(ports, names.front()));
}

TEST_CASE("placeholders and <cr> for '?'; nothing after an unknown command") {
  Fixture f;
  auto xc = words_of(f.tree->completions("xconnect "), false);
  CHECK(has(xc, "IN"));
  CHECK_FALSE(has(xc, "<cr>"));  // IN and OUT are required
  auto xc2 = words_of(f.tree->completions("xconnect p0 p1 "), false);
  CHECK(has(xc2, "<cr>"));
  auto sp = words_of(f.tree->completions("show ports "), false);
  CHECK(has(sp, "<cr>"));
  CHECK(has(sp, "--format"));
  auto show = words_of(f.tree->completions("show "), false);
  CHECK(has(show, "<cr>"));  // bare `show` prints the bridges, like ovs-vsctl show
  CHECK(has(show, "ports"));
  CHECK(f.tree->completions("frobnicate ").empty());
  CHECK(f.tree->completions("show 'po").empty());  // inside a quote

  std::string out;
  f.type("show ?", &out);
  CHECK(out.find("ports, their link and packet counters") != std::string::npos);
  CHECK(out.find("the board keel booted on") != std::string::npos);
  f.type("terminal length ?", &out);
  CHECK(out.find("N") != std::string::npos);
  CHECK(out.find("rows, 0..512") != std::string::npos);
}

TEST_CASE("terminal length and width change the attached session's settings") {
  Fixture f;
  cli::TerminalSettings term;
  // Without a session (a config file, a script) they are accepted and do nothing.
  CHECK(f.tree->execute("terminal length 0", stdout).ok());
  f.tree->attach_terminal(&term);
  CHECK(f.tree->execute("terminal length 0", stdout).ok());
  CHECK(term.length == 0);
  CHECK(f.tree->execute("terminal length 40", stdout).ok());
  CHECK(term.length == 40);
  CHECK(f.tree->execute("terminal width 132", stdout).ok());
  CHECK(term.width == 132);
  CHECK_FALSE(f.tree->execute("terminal length -1", stdout).ok());
  CHECK_FALSE(f.tree->execute("terminal length lots", stdout).ok());
  CHECK(term.length == 40);
  f.tree->attach_terminal(nullptr);
}

// Not completion, but the same tree: CLI11 2.1.2 kept every parsed value's
// option in its command's parse order for ever (~24 bytes a command: the
// soak's RSS slope). The tree forgets it before each parse.
TEST_CASE("the command tree holds no memory per command run") {
  Fixture f;
  FILE* out = tmpfile();
  REQUIRE(out);
  REQUIRE(f.tree->execute("add-br br0", out).ok());
  CLI::App* dump = f.tree->impl().app.get_subcommand("dump-flows");
  for (int i = 0; i < 500; ++i) {
    REQUIRE(f.tree->execute("dump-flows br0 priority=5,in_port=1 --strict", out).ok());
    CHECK(dump->parse_order().size() <= 3);  // this run's values only
  }
  fclose(out);
}

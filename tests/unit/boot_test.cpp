// Boot with the embedded default config, in-process: host-sim's sample port
// is bridged to its null port (br0, NORMAL); the console commands and the
// tokenizer.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "cli/console.h"
#include "control/system.h"
#include "eventually.h"

using namespace keel;

namespace {

// Runs one console command and returns what it printed.
std::string run(cli::CommandTree& tree, const std::string& line, Status* st = nullptr) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  Status s = tree.execute(line, out);
  fclose(out);
  std::string text(buf, len);
  free(buf);
  if (st) *st = s;
  else CHECK_MESSAGE(s.ok(), s.message());
  return text;
}

}  // namespace

TEST_CASE("host-sim boots with its default config and forwards the sample") {
  auto sys = control::System::boot({});
  REQUIRE_MESSAGE(sys.ok(), sys.status().message());
  control::System& s = **sys;
  CHECK(s.board().name == "host-sim");
  cli::CommandTree tree(s);
  REQUIRE(cli::apply_config(tree, s.board().default_config, "default", stdout).ok());
  CHECK(s.xconnects().empty());  // a bridge, not a cross-connect
  REQUIRE(s.start().ok());

  // The sample replays at 1000 packets/s: wait for a few to cross.
  uint64_t tx = 0;
  CHECK(keel::test::eventually([&] {
    for (const auto& p : s.ports())
      if (p.name == "p1") tx = p.counters.tx_packets;
    return tx >= 5;
  }));
  // The bridge learned the sample's source MAC on p0 (port 1) and holds
  // the sample's megaflow, flooded to p1.
  CHECK(keel::test::eventually([&] { return run(tree, "fdb-show br0").find("02:00:00:00:00:01") != std::string::npos; }));
  const std::string flows = run(tree, "flow-dump");
  CHECK(flows.find("eth(src=02:00:00:00:00:01,dst=02:00:00:00:00:02)") != std::string::npos);
  CHECK(flows.find("actions:2") != std::string::npos);
  std::string table = run(tree, "show ports");
  CHECK(table.find("p0") != std::string::npos);
  CHECK(table.find("Rx-pkts") != std::string::npos);
  std::string json = run(tree, "show ports --format json");
  CHECK(json.rfind("{\"ports\":[", 0) == 0);
  CHECK(run(tree, "show board").find("host-sim") != std::string::npos);
  CHECK(run(tree, "version").find("keel ") == 0);
  CHECK_FALSE(tree.quit_requested());
  run(tree, "exit");
  CHECK(tree.quit_requested());
  s.shutdown();
}

TEST_CASE("console errors leave the state unchanged") {
  auto sys = control::System::boot({.board = "host-sim", .ports = {"a=null", "b=null"}});
  REQUIRE(sys.ok());
  cli::CommandTree tree(**sys);
  Status st;
  run(tree, "xconnect a b");
  run(tree, "xconnect a nope", &st);
  CHECK(st.message().find("no port 'nope'") != std::string::npos);
  CHECK((*sys)->xconnects().size() == 1);
  CHECK((*sys)->xconnects()[0].second == "b");

  run(tree, "sohw ports", &st);
  CHECK(st.message() == "unknown command 'sohw'; did you mean 'show'?");
  run(tree, "show nothing", &st);  // (bare `show` is ovs-vsctl show)
  CHECK_FALSE(st.ok());
  run(tree, "show ports --format xml", &st);
  CHECK_FALSE(st.ok());
  run(tree, "xconnect a", &st);
  CHECK_FALSE(st.ok());
  run(tree, "no xconnect a");
  CHECK((*sys)->xconnects().empty());
  // Comments and blank lines are no-ops.
  run(tree, "# a comment");
  run(tree, "   ");
  run(tree, "! also a comment");
}

TEST_CASE("apply_config names the failing line") {
  auto sys = control::System::boot({.board = "host-sim", .ports = {"a=null", "b=null"}});
  REQUIRE(sys.ok());
  cli::CommandTree tree(**sys);
  Status st = cli::apply_config(tree, "xconnect a b\n\nxconnect b c\n", "my.conf", stdout);
  CHECK(st.message().rfind("my.conf:3: 'xconnect b c': ", 0) == 0);
}

TEST_CASE("boot errors name the thing") {
  auto bad_board = control::System::boot({.board = "nosuch"});
  CHECK(bad_board.status().message().find("unknown board 'nosuch'") != std::string::npos);
  auto bad_port = control::System::boot({.board = "host-sim", .ports = {"p0=pcap:in=/nonexistent.pcap"}});
  CHECK(bad_port.status().message().find("/nonexistent.pcap") != std::string::npos);
  auto dup = control::System::boot({.board = "host-sim", .ports = {"p0=null", "p0=ring"}});
  CHECK(dup.status().message().find("p0") != std::string::npos);
}

TEST_CASE("tokenize: blanks, quotes, escapes") {
  using V = std::vector<std::string>;
  CHECK(cli::tokenize("show   ports").value() == V{"show", "ports"});
  CHECK(cli::tokenize("  a 'b c' \"d e\" f\\ g ").value() == V{"a", "b c", "d e", "f g"});
  CHECK(cli::tokenize("x''").value() == V{"x"});
  CHECK(cli::tokenize("''").value() == V{""});
  CHECK(cli::tokenize("\"a\\\"b\"").value() == V{"a\"b"});
  CHECK(cli::tokenize("").value().empty());
  CHECK_FALSE(cli::tokenize("'open").ok());
  CHECK_FALSE(cli::tokenize("trailing\\").ok());
}

// control::Control (control/control.h) and the command tree's declarations:
// every runnable command declared once; roles refused with one clear line
// and the state unchanged; the gate lets shows run beside each other on
// several trees while another tree changes the configuration.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "cli/console.h"
#include "control/control.h"
#include "control/system.h"
#include "core/log.h"
#include "core/shutdown.h"

using namespace keel;

namespace {

struct Sys {
  std::unique_ptr<control::System> sys;
  Sys() {
    auto s = control::System::boot({});
    REQUIRE_MESSAGE(s.ok(), s.status().message());
    sys = std::move(*s);
  }
};

[[maybe_unused]] std::string run(cli::CommandTree& t, const std::string& line, Status* st = nullptr) {
  char* text = nullptr;
  size_t size = 0;
  FILE* mem = open_memstream(&text, &size);
  Status s = t.execute(line, mem);
  fclose(mem);
  std::string out(text, size);
  free(text);
  if (st) *st = std::move(s);
  return out;
}

}  // namespace

TEST_CASE("every runnable command is declared once") {
  Sys s;
  cli::CommandTree tree(*s.sys);
  const auto problems = tree.declaration_problems();
  for (const std::string& p : problems) MESSAGE(p);
  CHECK(problems.empty());
  CHECK(tree.command_paths().size() > 50);
}

namespace {

control::Session session_as(control::Origin o, const std::string& user, control::Role r) {
  control::Session s;
  s.origin = o;
  s.user = user;
  s.role = r;
  s.peer = "127.0.0.1:40312";
  return s;
}

bool audit_logged(const std::string& text) {
  for (const log::Entry& e : log::recent(log::kRingEntries))
    if (e.module == "audit" && e.text.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("names, redaction and the refusal line") {
  CHECK(control::parse_role("read-only") == control::Role::read_only);
  CHECK(control::parse_role("operator") == control::Role::operator_);
  CHECK(control::parse_role("admin") == control::Role::admin);
  CHECK_FALSE(control::parse_role("root").has_value());
  CHECK(std::string(control::to_string(control::Role::read_only)) == "read-only");
  CHECK(session_as(control::Origin::ssh, "admin", control::Role::admin).describe() == "ssh admin@127.0.0.1:40312");
  control::Session cfg;
  cfg.origin = control::Origin::config;
  cfg.peer = "keel-config/startup-config";
  CHECK(cfg.describe() == "config startup-config");
  CHECK(control::Session{}.describe() == "console");
  CHECK(control::Control::redact("username bob password hunter2") == "username bob password *****");
  CHECK(control::Control::redact("username bob secret 'pbkdf2 x'  role admin") ==
        "username bob secret *****  role admin");
  CHECK(control::Control::redact("add-br br0") == "add-br br0");
}

TEST_CASE("roles: read-only runs shows only, operator no admin commands; refusals change nothing") {
  Sys s;
  cli::CommandTree viewer(*s.sys, session_as(control::Origin::ssh, "viewer", control::Role::read_only));
  cli::CommandTree op(*s.sys, session_as(control::Origin::ssh, "op", control::Role::operator_));
  cli::CommandTree admin(*s.sys, session_as(control::Origin::ssh, "admin", control::Role::admin));
  control::Control& c = s.sys->control();
  const uint64_t refused0 = c.refused();

  Status st;
  run(viewer, "add-br br0", &st);
  CHECK(st.code() == Errc::permission_denied);
  CHECK(st.message() == "permission denied: 'add-br' needs role operator (user 'viewer' is read-only)");
  CHECK(s.sys->bridge_names().empty());
  CHECK(c.refused() == refused0 + 1);
  CHECK(audit_logged("ssh viewer@127.0.0.1:40312: refused \"add-br br0\" (needs operator)"));
  run(viewer, "set emc-insert-inv-prob 7", &st);
  CHECK(st.code() == Errc::permission_denied);
  CHECK(s.sys->datapath().pmds()[0]->emc_insert_inv_prob() == 100);
  run(viewer, "username viewer role admin", &st);  // no promoting oneself
  CHECK(st.message() == "permission denied: 'username' needs role admin (user 'viewer' is read-only)");
  // Shows, help and leaving are for everyone.
  CHECK(run(viewer, "show ports", &st).find("Port") != std::string::npos);
  CHECK(st.ok());
  run(viewer, "pmd-stats-show", &st);
  CHECK(st.ok());
  run(viewer, "help", &st);
  CHECK(st.ok());

  // The operator changes forwarding state...
  run(op, "add-br br0", &st);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(s.sys->bridge_names() == std::vector<std::string>{"br0"});
  CHECK(audit_logged("ssh op@127.0.0.1:40312: add-br br0"));
  // ...but not users, whole configs or (when the tree has them) SSH settings.
  run(op, "username eve password secret1", &st);
  CHECK(st.message() == "permission denied: 'username' needs role admin (user 'op' is operator)");
  CHECK(s.sys->users().empty());
  CHECK_FALSE(audit_logged("secret1"));  // the refusal's log line is redacted
  run(op, "configure replace /nonexistent", &st);
  CHECK(st.code() == Errc::permission_denied);
  run(op, "write memory", &st);
  CHECK(st.code() == Errc::permission_denied);
  const auto names = op.command_names();
  if (std::find(names.begin(), names.end(), "ssh") != names.end()) {
    run(op, "ssh port 2022", &st);
    CHECK(st.code() == Errc::permission_denied);
  }

  run(admin, "username eve password secret1", &st);
  REQUIRE(st.ok());
  CHECK(audit_logged("ssh admin@127.0.0.1:40312: username eve password *****"));
  CHECK_FALSE(audit_logged("secret1"));
  // Non-admins don't see password hashes.
  CHECK(run(op, "show running-config").find("username eve secret *****") != std::string::npos);
  CHECK(run(admin, "show running-config").find("username eve secret pbkdf2-sha256$") != std::string::npos);
}

TEST_CASE("exit in an SSH session ends that session, not keel") {
  Sys s;
  cli::CommandTree t(*s.sys, session_as(control::Origin::ssh, "op", control::Role::read_only));
  Status st;
  run(t, "exit", &st);
  CHECK(st.ok());
  CHECK(t.quit_requested());
  CHECK_FALSE(shutdown_requested());
  CHECK(s.sys->running() == false);  // never started: nothing stopped either
}

TEST_CASE("nested lines take the gate once: configure replace with pmd-cpu-mask and bridges") {
  Sys s;
  REQUIRE(s.sys->start().ok());
  cli::CommandTree admin(*s.sys, session_as(control::Origin::ssh, "admin", control::Role::admin));
  char path[] = "/tmp/keel_control_test_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string cfg = "add-br br0\nadd-port br0 p0\nset pmd-cpu-mask 0x1\nadd-flow br0 actions=drop\n";
  REQUIRE(write(fd, cfg.data(), cfg.size()) == static_cast<ssize_t>(cfg.size()));
  close(fd);
  Status st;
  run(admin, std::string("configure replace ") + path, &st);
  CHECK_MESSAGE(st.ok(), st.message());
  CHECK(s.sys->bridge_names() == std::vector<std::string>{"br0"});
  unlink(path);
  s.sys->shutdown();
}

// Two trees show concurrently on two threads while a third changes the
// configuration (tsan: label "threads").
TEST_CASE("concurrent shows on two trees while a third changes the configuration") {
  Sys s;
  REQUIRE(s.sys->start().ok());
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  auto shows = [&](int n) {
    cli::CommandTree t(*s.sys, session_as(control::Origin::ssh, "viewer" + std::to_string(n), control::Role::read_only));
    int rounds = 0;
    while (!stop.load(std::memory_order_relaxed) || rounds < 20) {
      Status st;
      for (const char* line : {"show ports", "pmd-stats-show --format json", "show control", "show users", "version"}) {
        run(t, line, &st);
        if (!st.ok()) failures.fetch_add(1);
      }
      run(t, "add-br nope", &st);  // refused, never applied
      if (st.code() != Errc::permission_denied) failures.fetch_add(1);
      ++rounds;
    }
  };
  std::thread a(shows, 1), b(shows, 2);
  {
    cli::CommandTree admin(*s.sys, session_as(control::Origin::ssh, "admin", control::Role::admin));
    for (int i = 0; i < 30; ++i) {
      Status st;
      run(admin, "add-br br" + std::to_string(i), &st);
      if (!st.ok()) failures.fetch_add(1);
      run(admin, "add-flow br" + std::to_string(i) + " actions=NORMAL", &st);
      if (!st.ok()) failures.fetch_add(1);
      run(admin, "set emc-insert-inv-prob " + std::to_string(i + 1), &st);
      if (!st.ok()) failures.fetch_add(1);
      if (i % 3 == 0) run(admin, "del-br br" + std::to_string(i), &st);
    }
  }
  stop = true;
  a.join();
  b.join();
  CHECK(failures.load() == 0);
  CHECK(s.sys->bridge_names().size() == 20);
  CHECK(s.sys->control().refused() >= 40);
  s.sys->shutdown();
}

// write memory survives being killed at every step of the save: a forked
// keel (System + command tree + ConfigStore, in-process) runs `write memory`
// and dies right after one step through the store's step hook, with _exit
// (no destructors, no flush: as a power cut would leave the process's side);
// then the parent checks that startup-config is the complete old or the
// complete new file, that the backup is the complete old one, and boots what
// is there exactly as keel does (apply_boot_config).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "cli/config.h"
#include "cli/console.h"
#include "control/config_store.h"
#include "control/system.h"
#include "core/fault.h"
#include "sim_test_util.h"

using namespace keel;

namespace {

// The save steps of control/config_store.h, in order.
const char* const kSteps[] = {"tmp-written", "tmp-synced", "bak-linked", "bak-renamed", "renamed", "dir-synced"};
constexpr int kSwitched = 4;  // from "renamed" on, the new file is in place
constexpr int kKilled = 77;

std::optional<std::string> slurp(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string run(cli::CommandTree& tree, const std::string& line, Status* st) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  *st = tree.execute(line, out);
  fclose(out);
  std::string text(buf, len);
  free(buf);
  return text;
}

// A keel on two null ports with DIR as its config directory: boots it as
// keel does, runs the commands, returns `show running-config` after them
// (empty with *ok false if anything failed). `die_at`: the store's hook
// _exits with kKilled right after that step.
std::string run_keel(const std::string& dir, const std::string& commands, bool* ok, const char* die_at = nullptr) {
  *ok = false;
  auto sys = control::System::boot({.board = "host-sim", .ports = {"p0=null", "p1=null"}});
  if (!sys.ok()) return {};
  control::ConfigStore store(dir);
  if (die_at)
    store.set_step_hook([die_at](std::string_view step) {
      if (step == die_at) _exit(kKilled);
    });
  cli::CommandTree tree(**sys);
  cli::set_config_store(tree, &store);
  FILE* devnull = fopen("/dev/null", "w");
  auto booted = cli::apply_boot_config(tree, std::nullopt, "", devnull, devnull);
  fclose(devnull);
  if (!booted.ok()) return {};
  Status st;
  std::istringstream lines(commands);
  for (std::string line; std::getline(lines, line);) {
    run(tree, line, &st);
    if (!st.ok()) return {};
  }
  std::string shown = run(tree, "show running-config", &st);
  *ok = st.ok();
  return shown;
}

}  // namespace

TEST_CASE("write memory killed after each step: startup-config is the complete old or new file, and boots") {
  for (bool first_save : {false, true}) {
    for (int i = 0; i < 6; ++i) {
      const char* step = kSteps[i];
      CAPTURE(first_save);
      CAPTURE(step);
      test::TempDir d;
      const std::string startup = d.file("startup-config");
      bool ok = false;
      std::optional<std::string> old;
      if (!first_save) {
        run_keel(d.path(), "set emc-insert-inv-prob 5\nwrite memory", &ok);
        REQUIRE(ok);
        old = slurp(startup);
        REQUIRE(old);
      }
      // The child: the running config it is about to save, in new.txt (from
      // a boot that saves nothing), then `write memory` of that same state,
      // dying after `step`.
      const pid_t pid = fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        bool child_ok = false;
        const std::string cfg = run_keel(d.path(), "set smc-enable true", &child_ok);
        if (!child_ok) _exit(3);
        spit(d.file("new.txt"), cfg);
        run_keel(d.path(), "set smc-enable true\nwrite memory", &child_ok, step);
        _exit(child_ok ? 0 : 4);
      }
      int status = 0;
      REQUIRE(waitpid(pid, &status, 0) == pid);
      REQUIRE(WIFEXITED(status));
      const bool no_backup_step = first_save && std::string_view(step).starts_with("bak-");
      // No old file: the backup steps don't happen and the save runs to the end.
      CHECK(WEXITSTATUS(status) == (no_backup_step ? 0 : kKilled));
      const std::optional<std::string> now_text = slurp(startup);
      const std::optional<std::string> new_text = slurp(d.file("new.txt"));
      REQUIRE(new_text);
      if (no_backup_step || i >= kSwitched) CHECK(now_text == new_text);
      else CHECK(now_text == old);
      if (old && slurp(startup + ".bak")) CHECK(slurp(startup + ".bak") == old);  // the complete old file
      // The next boot works and runs exactly that file (or the board's
      // default when there is none).
      const std::string after = run_keel(d.path(), "", &ok);
      REQUIRE(ok);
      if (now_text) CHECK(after == *now_text);
      else CHECK(after.find("add-flow br0 priority=0,actions=NORMAL") != std::string::npos);
    }
  }
}

TEST_CASE("switch UUID: made once, kept in DIR/switch-uuid, read back at the next boot") {
  test::TempDir d;
  const std::string dir = d.file("cfg");  // not there yet: made on first use
  std::string first;
  {
    control::ConfigStore store(dir);
    first = store.switch_uuid();
    CHECK(control::is_uuid(first));
    CHECK(first[14] == '4');  // version 4 (random)
    CHECK(store.switch_uuid() == first);
    CHECK(slurp(dir + "/switch-uuid") == first + "\n");
  }
  control::ConfigStore again(dir);
  CHECK(again.switch_uuid() == first);
  CHECK(control::ConfigStore(d.file("other")).switch_uuid() != first);
  // A file that holds no UUID is replaced (and the new one saved).
  {
    std::ofstream f(dir + "/switch-uuid");
    f << "garbage\n";
  }
  control::ConfigStore replaced(dir);
  const std::string fresh = replaced.switch_uuid();
  CHECK(control::is_uuid(fresh));
  CHECK(fresh != first);
  CHECK(slurp(dir + "/switch-uuid") == fresh + "\n");
  // A directory that can't hold it: the UUID lives for this boot only.
  {
    std::ofstream f(d.file("file"));
    f << "x";
  }
  control::ConfigStore unusable(d.file("file") + "/sub");
  CHECK(control::is_uuid(unusable.switch_uuid()));
}

TEST_CASE("UUID text and name-based UUIDs") {
  CHECK(control::is_uuid("c3920538-a3bc-4c50-964e-4de36632fbab"));
  CHECK_FALSE(control::is_uuid("C3920538-a3bc-4c50-964e-4de36632fbab"));  // Open vSwitch prints lowercase
  CHECK_FALSE(control::is_uuid("c3920538-a3bc-4c50-964e-4de36632fba"));
  CHECK_FALSE(control::is_uuid("c3920538ba3bc-4c50-964e-4de36632fbab"));
  const std::string ns = "c3920538-a3bc-4c50-964e-4de36632fbab";
  const std::string a = control::name_uuid(ns, "Port p1");
  CHECK(control::is_uuid(a));
  CHECK(a[14] == '8');                                                    // version 8
  CHECK((a[19] == '8' || a[19] == '9' || a[19] == 'a' || a[19] == 'b'));  // RFC variant
  CHECK(control::name_uuid(ns, "Port p1") == a);                          // stable
  CHECK(control::name_uuid(ns, "Port p2") != a);
  CHECK(control::name_uuid("d3920538-a3bc-4c50-964e-4de36632fbab", "Port p1") != a);
  CHECK(control::name_uuid(ns + "P", "ort p1") != a);  // the separator keeps ns and name apart
  CHECK(control::random_uuid() != control::random_uuid());
}

TEST_CASE("disk full during write memory (debug fault disk-full): the save fails saying so, nothing changes") {
  fault::permit(true);
  for (uint32_t flags : {0u, fault::kShortWrite}) {
    CAPTURE(flags);
    test::TempDir d;
    bool ok = false;
    run_keel(d.path(), "set emc-insert-inv-prob 5\nwrite memory\nwrite memory", &ok);
    REQUIRE(ok);
    const std::string startup = d.file("startup-config");
    const std::optional<std::string> old = slurp(startup), bak = slurp(startup + ".bak");
    REQUIRE(old);
    REQUIRE(bak);
    control::ConfigStore store(d.path());
    REQUIRE(fault::arm(fault::Point::disk_full, {.flags = flags}).ok());
    const Status st = store.save_startup("set smc-enable true\n");
    CHECK(!st.ok());
    CHECK(st.message() == "write '" + startup + ".tmp': No space left on device; " + startup + " is unchanged");
    const Status copy = control::write_file_atomic(d.file("copy.cfg"), "set smc-enable true\n");
    CHECK(copy.message() ==
          "write '" + d.file("copy.cfg") + ".tmp': No space left on device; " + d.file("copy.cfg") + " is unchanged");
    fault::disarm(fault::Point::disk_full);
    CHECK(slurp(startup) == old);
    CHECK(slurp(startup + ".bak") == bak);
    CHECK(!slurp(startup + ".tmp"));
    CHECK(!slurp(d.file("copy.cfg")));
    CHECK(!slurp(d.file("copy.cfg.tmp")));
    // Room again: the save works and the old file becomes the backup.
    REQUIRE(store.save_startup("set smc-enable true\n").ok());
    CHECK(slurp(startup) == "set smc-enable true\n");
    CHECK(slurp(startup + ".bak") == old);
  }
  fault::permit(false);
}

TEST_CASE("a startup config cut short in its last line is refused whole: the last good config boots") {
  test::TempDir d;
  bool ok = false;
  const std::string good = run_keel(d.path(), "set emc-insert-inv-prob 50\nwrite memory", &ok);
  REQUIRE(ok);
  const std::string startup = d.file("startup-config");
  REQUIRE(run_keel(d.path(), "", &ok) == good);  // it boots
  spit(startup + ".good", good);                  // as keel marks a config that booted
  // The file as a copy that stopped early leaves it: its last line reads
  // as a command, with another value.
  const std::string cut = good + "set emc-insert-inv-prob 5";
  spit(startup, cut);
  CHECK(run_keel(d.path(), "", &ok) == good);
  CHECK(ok);
  CHECK(slurp(startup) == cut);  // left for the operator
  CHECK(slurp(startup + ".good") == good);
  // The same line ended: it applies.
  spit(startup, cut + "\n");
  CHECK(run_keel(d.path(), "", &ok).find("set emc-insert-inv-prob 5\n") != std::string::npos);
}

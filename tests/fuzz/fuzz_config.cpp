// Fuzz target: configuration files, the two ways keel reads one
// (cli/config.h): a corrupt or truncated config gives an error naming
// FILE:LINE and never a crash, a hang or a half-applied state.
//
// The input is the file. On a host-sim console (sim_console.h) that holds
// a known state (the board's default bridge, a cross-connect, two
// tunables):
//   1. `configure replace FILE` (the file in a memfd, FILE its
//      /proc/self/fd path). Failed: the message names FILE and the running
//      config is exactly what it was. Succeeded: the running config, saved
//      and replaced back in, gives the same running config.
//   2. `copy FILE running-config` (a merge) on the state the first step
//      left: the same all-or-nothing check.
//   3. Boot: the file is the startup config of the config directory of a
//      console in its boot state (cli::apply_boot_config). Boot always succeeds; what it
//      booted is either the file (whose running config then replays to
//      itself) or, after a failing line, the board's default config and
//      nothing of the file (the running config of a console that booted the
//      default).
// Lines naming files (add-flows FILE; and for the boot, whose lines run
// unvalidated, also write, copy and configure) are turned into comments
// first, so the target reads and writes no file but its own, and so is
// `set pmd-cpu-mask` (too slow to fuzz: sim_console.h).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cli/config.h"
#include "control/config_store.h"
#include "fuzz_util.h"
#include "sim_console.h"

using namespace keel;
using keel::fuzz::check;
using keel::fuzz::MemFile;

namespace {

// The text with every line whose command is in `banned` made a comment
// (so line numbers stay).
std::string neutralize(std::string_view text, std::initializer_list<std::string_view> banned) {
  std::string out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const std::string cmd = fuzz::first_word(line);
    bool bad = false;
    for (std::string_view b : banned) bad |= cmd == b;
    out += bad || fuzz::sets_pmd_cores(line) ? "# dropped" : std::string(line);
    if (nl != std::string_view::npos) out += '\n';
  }
  return out;
}

constexpr std::string_view kState =
    "xconnect p2 p3\n"
    "set emc-insert-inv-prob 7\n"
    "set smc-enable true\n";

// Runs `line` (a config command) and checks it is all or nothing.
void transaction(fuzz::SimConsole& c, const std::string& line, const MemFile& f) {
  const std::string before = cli::running_config(*c.tree);
  Status st = c.tree->execute(line, fuzz::null_out());
  const std::string after = cli::running_config(*c.tree);
  if (!st.ok()) {
    check(st.message().find(f.path) != std::string::npos, "the error does not name the file", st.message());
    check(after == before, "a failed transaction changed the running config",
          line + "\n--- before\n" + before + "--- after\n" + after + "--- error: " + st.message());
  }
}

// The running config, replaced back in, gives itself.
void replays(fuzz::SimConsole& c) {
  const std::string saved = cli::running_config(*c.tree);
  MemFile f(saved);
  Status st = c.tree->execute("configure replace " + f.path, fuzz::null_out());
  check(st.ok(), "the running config does not replace back in", saved + "--- error: " + st.message());
  const std::string again = cli::running_config(*c.tree);
  check(again == saved, "the running config replaced back in differs", saved + "--- again\n" + again);
}

// The running config of a console that booted the board's default config.
const std::string& default_running_config() {
  static const std::string s = [] {
    fuzz::SimConsole& c = fuzz::sim_console(1);
    auto b = cli::apply_boot_config(*c.tree, std::nullopt, "", fuzz::null_out(), fuzz::null_out());
    if (!b.ok()) abort();
    return cli::running_config(*c.tree);
  }();
  return s;
}

// A config directory of the target's own, removed at exit.
const control::ConfigStore& store() {
  static control::ConfigStore* s = [] {
    char tmpl[] = "/tmp/keel-fuzz-config-XXXXXX";
    if (!mkdtemp(tmpl)) abort();
    static std::string dir = tmpl;
    atexit([] {
      for (const char* f : {"startup-config", "switch-uuid", "switch-uuid.tmp"})
        unlink((dir + "/" + f).c_str());
      rmdir(dir.c_str());
    });
    return new control::ConfigStore(dir);
  }();
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)default_running_config();

  {
    fuzz::SimConsole& c = fuzz::sim_console(0);
    Status st = cli::apply_config(*c.tree, std::string(c.sys->board().default_config) + std::string(kState),
                                  "state", fuzz::null_out());
    if (!st.ok()) abort();
    MemFile f(neutralize(text, {"add-flows"}));
    transaction(c, "configure replace " + f.path, f);
    replays(c);
    transaction(c, "copy " + f.path + " running-config", f);
    replays(c);
  }

  // Boot with the input as the startup config.
  fuzz::SimConsole& c = fuzz::sim_console(1);
  const std::string startup = neutralize(text, {"add-flows", "write", "copy", "configure"});
  {
    // Not write_file_atomic: no fsync per input.
    int fd = open(store().startup_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, startup.data(), startup.size()) != static_cast<ssize_t>(startup.size())) abort();
    close(fd);
  }
  cli::set_config_store(*c.tree, const_cast<control::ConfigStore*>(&store()));
  auto booted = cli::apply_boot_config(*c.tree, std::nullopt, "", fuzz::null_out(), fuzz::null_out());
  cli::set_config_store(*c.tree, nullptr);
  check(booted.ok(), "boot failed", booted.ok() ? "" : booted.status().message());
  if (booted->from_startup) {
    replays(c);
  } else {
    const std::string now = cli::running_config(*c.tree);
    check(now == default_running_config(), "a failed startup config left state behind",
          startup + "\n--- running\n" + now + "--- default\n" + default_running_config());
  }
  return 0;
}

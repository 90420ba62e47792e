// Consoles on host-sim systems, for the fuzz targets that run commands
// (fuzz_cli, fuzz_config): four null ports p0..p3 (nothing is received,
// what is sent is dropped), booted once per process and never started (no
// PMD, handler or revalidator thread: an input runs the same way every
// time), each with a command tree.
//
// A boot costs ~0.3 s of CPU under ASan (the sim packet pool and the PMD's
// caches are zeroed), so the consoles live for the whole run and
// reset_console() brings one back to its boot state before each input:
// every running-config section reset (cli::reset_config), the datapath
// flows flushed and every port's link up -- the state the commands the
// targets run can change. It checks that the running config is then what
// it was at boot, so no input's state leaks into the next one unseen.
//
// Thread-safety: the fuzz targets are single-threaded.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "cli/config.h"
#include "cli/console.h"
#include "control/system.h"
#include "core/log.h"

namespace keel::fuzz {

struct SimConsole {
  std::unique_ptr<control::System> sys;
  std::unique_ptr<cli::CommandTree> tree;  // declared last: destroyed before sys
  std::string boot_config;                 // the running config right after boot
};

// Where command output goes: nowhere (the targets check states and
// statuses, not texts).
inline FILE* null_out() {
  static FILE* f = fopen("/dev/null", "w");
  if (!f) abort();
  return f;
}

inline void reset_console(SimConsole& c) {
  cli::reset_config(*c.tree);
  c.sys->datapath().flow_flush();
  for (const std::string& p : c.sys->port_names())
    if (!c.tree->execute("port-link " + p + " up", null_out()).ok()) abort();
  if (cli::running_config(*c.tree) != c.boot_config) {
    fprintf(stderr, "sim_console: the reset left state behind:\n%s--- at boot:\n%s",
            cli::running_config(*c.tree).c_str(), c.boot_config.c_str());
    abort();
  }
}

// Console `i` (0, 1, ...: independent systems), reset to its boot state.
inline SimConsole& sim_console(size_t i) {
  static SimConsole* consoles = new SimConsole[2];  // never destroyed: no teardown at exit
  if (i >= 2) abort();
  SimConsole& c = consoles[i];
  if (!c.sys) {
    log::set_console_fd(-1);  // the log still fills its ring (show logging); stderr stays libFuzzer's
    auto s =
        control::System::boot({.board = "host-sim", .ports = {"p0=null", "p1=null", "p2=null", "p3=null"}});
    if (!s.ok()) abort();
    c.sys = std::move(s).value();
    c.tree = std::make_unique<cli::CommandTree>(*c.sys);
    c.boot_config = cli::running_config(*c.tree);
  }
  reset_console(c);
  return c;
}

// A line's first word, as the tokenizer splits it ("" for none or a bad line).
inline std::string first_word(std::string_view line) {
  auto w = cli::tokenize(line);
  return w.ok() && !w->empty() ? (*w)[0] : std::string();
}

// `set pmd-cpu-mask`: each PMD it makes costs ~0.4 s under ASan (its EMC,
// SMC and flow table are zeroed), so the targets leave it out (its mask
// parser has unit tests) rather than spend their time there.
inline bool sets_pmd_cores(std::string_view line) {
  auto w = cli::tokenize(line);
  if (!w.ok()) return false;
  for (const std::string& word : *w)
    if (word == "pmd-cpu-mask") return true;
  return false;
}

}  // namespace keel::fuzz

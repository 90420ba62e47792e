// keel's command line (the boot contract scripts rely on; see README).
#pragma once

#include <optional>
#include <variant>
#include <string>

#include "control/system.h"

namespace keel::cli {

struct Args {
  control::BootOptions boot;
  std::string config_file;        // --config FILE
  std::string config_dir;         // --config-dir DIR (empty: the board's config_dir)
  bool exit_when_drained = false; // --exit-when-drained
  std::string console_device;     // --console DEV: the console on a UART, not stdin/stdout
  std::optional<std::string> exec; // --exec CMD: run CMD in the running keel, print, exit
};

// Parses argv. Returns the arguments to boot with, or an exit status when
// the command line asked for something else (--help, --version,
// --list-boards: printed, 0) or was wrong (message on stderr, 2).
std::variant<Args, int> parse_args(int argc, char** argv);

}  // namespace keel::cli

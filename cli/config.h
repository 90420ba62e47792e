// Configuration = commands: the running config, transactions, and the
// config boot replays (cli/commands_config.cpp).
//
// The running config is what every command family's ConfigSection emits
// (cli/command_tree_impl.h). The startup config is a saved running config in
// the config directory (firmware/control/config_store.h).
//
// Boot (firmware/main.cpp): an explicit --config FILE is applied and any
// failing line is fatal, as before. Otherwise DIR/startup-config is replayed
// if it exists; if a line fails, the partial state is reset and the last
// config that booted completely (DIR/startup-config.good), else the board's
// default config, is booted instead, after a loud message naming FILE:LINE
// and the reason. A startup config (or good one) that does not end with a
// newline was cut short and is refused the same way, before any line runs
// (its last line may read as another command). The files are never
// rewritten by boot: the one that failed stays for the operator to read
// (`show startup-config`) and fix; `write memory` keeps it as .bak.
//
// Thread-safety: control thread only.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "cli/console.h"
#include "control/config_store.h"

namespace keel::cli {

void set_config_store(CommandTree& tree, control::ConfigStore* store);

// The commands that rebuild the current state, one per line, after a
// "!"-comment header line (version and board).
std::string running_config(CommandTree& tree);
// Every section back to its boot defaults (datapath flows are left alone).
void reset_config(CommandTree& tree);

// Applies `text` as one transaction. replace: the state becomes exactly
// `text` (configure replace); otherwise `text` is merged into the running
// state (copy FILE running-config). Every line is checked first (quoting,
// known command, no commands that aren't configuration), then applied; on a
// failing line the previous running state is restored and the error names
// ORIGIN:LINE.
Status apply_transaction(CommandTree& tree, std::string_view text, std::string_view origin, bool replace, FILE* out);

struct BootConfig {
  std::string text;
  std::string origin;          // a file name, or "board NAME default config"
  bool from_startup = false;   // DIR/startup-config booted: mark it good once running
};

// Applies the boot config as described above. `explicit_text` is the
// --config file's text (origin: its name). Errors are fatal: an explicit
// config that fails, or a board default that fails.
Result<BootConfig> apply_boot_config(CommandTree& tree, const std::optional<std::string>& explicit_text,
                                     const std::string& explicit_origin, FILE* out, FILE* err);
// After the system started: records a startup config that booted as the
// last good one (a warning if that can't be written).
void boot_config_succeeded(CommandTree& tree, const BootConfig& booted, FILE* err);

}  // namespace keel::cli

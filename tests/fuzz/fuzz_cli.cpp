// Fuzz target: arbitrary console lines through the whole command tree, so
// every command's argument parsing (flows, matches, actions, port columns,
// bond and tunnel options, TLV maps, routes, masks, numbers ...) meets
// hostile text the way an operator's typo or a pasted runbook would.
//
// The input is up to 16 lines ('\n'), run one after another on a host-sim
// console in its boot state (sim_console.h: null ports, not started).
// Skipped: lines whose command reads or writes files (write, copy,
// configure, add-flows: fuzz_config covers configure replace and copy) and
// `debug` (the sim NIC model's fault injection: a test seam whose state
// would outlive the input), and `set pmd-cpu-mask` (sim_console.h). Checks:
//   * no crash, hang or sanitizer report;
//   * a line that fails says why (a non-empty message) and changes nothing:
//     the running config is the same text before and after it (console.h:
//     "a command either applies whole or changes nothing and says why");
//   * the completer and command_info take every line;
//   * the running config the lines built replays on another console in its
//     boot state without an error and prints the same running config again (every
//     family's emit + reset round-trip, command_tree_impl.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cli/config.h"
#include "fuzz_util.h"
#include "sim_console.h"

using namespace keel;
using keel::fuzz::check;

namespace {

bool skipped(const std::string& cmd) {
  return cmd == "write" || cmd == "copy" || cmd == "configure" || cmd == "add-flows" || cmd == "debug";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz::SimConsole& c = fuzz::sim_console(0);
  FILE* out = fuzz::null_out();
  int lines = 0;
  while (!text.empty() && lines < 16) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++lines;
    (void)c.tree->completions(line);
    (void)c.tree->command_info(line);
    if (skipped(fuzz::first_word(line)) || fuzz::sets_pmd_cores(line)) continue;
    const std::string before = cli::running_config(*c.tree);
    Status st = c.tree->execute(line, out);
    if (!st.ok()) {
      check(!st.message().empty(), "a failing line with no message", std::string(line));
      const std::string after = cli::running_config(*c.tree);
      check(after == before, "a failing line changed the running config",
            std::string(line) + "\n--- before\n" + before + "--- after\n" + after +
                "--- error: " + st.message());
    }
  }

  // The state the lines built, saved and replayed on another console.
  const std::string saved = cli::running_config(*c.tree);
  fuzz::SimConsole& again = fuzz::sim_console(1);
  Status st = cli::apply_config(*again.tree, saved, "saved", out);
  check(st.ok(), "the running config does not replay", saved + "--- error: " + st.message());
  const std::string replayed = cli::running_config(*again.tree);
  check(replayed == saved, "the replayed running config differs", saved + "--- replayed\n" + replayed);
  return 0;
}

// Fuzz target: the console line editor on random bytes (keys, escape
// sequences, garbage), completing from the real command tree. It never
// crashes, the line stays within its limit and the cursor inside it, and the
// output stays bounded by the input (no runaway redraws).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cli/console.h"
#include "cli/line_editor.h"
#include "control/system.h"

namespace {

keel::cli::CommandTree& tree() {
  // Booted once (not started: no PMD threads), kept for the whole run.
  static keel::control::System* sys = [] {
    auto s = keel::control::System::boot({});
    if (!s.ok()) abort();
    return s.value().release();
  }();
  static keel::cli::CommandTree* t = new keel::cli::CommandTree(*sys);
  return *t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // The first two bytes pick the terminal: height 0..15 (0 = no paging),
  // width 10..137, and a small or the real line limit.
  keel::cli::LineEditor::Config cfg;
  cfg.height = data[0] & 0x0f;
  cfg.width = 10 + (data[1] & 0x7f);
  cfg.max_line = (data[0] & 0x10) ? 4096 : 48;
  cfg.history_size = 8;
  data += 2, size -= 2;

  keel::cli::LineEditor ed(cfg);
  ed.set_completer([](std::string_view before) { return tree().completions(before); });
  size_t out_bytes = 0, written = 0;
  // Feed in chunks of 1..8 bytes so sequences are split at every point.
  size_t i = 0;
  while (i <= size) {
    size_t n = std::min<size_t>(size - i, 1 + (i < size ? data[i] % 8 : 0));
    ed.feed(std::string_view(reinterpret_cast<const char*>(data + i), n));
    i += n;
    for (;;) {
      auto ev = ed.step();
      if (ed.buffer().size() > cfg.max_line || ed.cursor() > ed.buffer().size()) abort();
      if (ev == keel::cli::LineEditor::Event::line) {
        // Echo the line back as command output, three times, to page it.
        std::string out = ed.line_text() + "\n" + ed.line_text() + "\n" + ed.line_text() + "\n";
        written += out.size();
        ed.write(out);
      }
      out_bytes += ed.take_output().size();
      if (ev == keel::cli::LineEditor::Event::none) break;
    }
    if (n == 0) break;
  }
  // Per input byte at most one redraw or one listing ('?' over the whole tree).
  if (out_bytes > 32768 * (size + 1) + 2 * written) abort();
  return 0;
}

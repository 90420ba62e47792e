// Fuzz target: the console tokenizer never crashes, and what it accepts
// re-tokenizes to the same words once each word is quoted.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cli/console.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);
  auto words = keel::cli::tokenize(line);
  if (!words.ok()) return 0;
  std::string again;
  for (const std::string& w : *words) {
    again += '\'';
    for (char c : w) {
      if (c == '\'') again += "'\\''";  // close, escaped quote, reopen
      else again += c;
    }
    again += "' ";
  }
  auto back = keel::cli::tokenize(again);
  if (!back.ok() || *back != *words) abort();
  return 0;
}

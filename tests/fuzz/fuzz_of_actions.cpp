// Fuzz target: the OpenFlow actions parser never crashes, and what it
// accepts prints as text that parses back to the same actions, and printing
// that again gives the same text. The consistency check must not crash on
// any parsed list either.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "flow/of_actions.h"

using namespace keel::flow;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto actions = parse_of_actions(text);
  if (!actions.ok()) {
    if (actions.status().message().empty()) abort();
    return 0;
  }
  std::string printed = format_of_actions(*actions);
  auto back = parse_of_actions(printed);
  if (!back.ok()) abort();
  if (!(*back == *actions)) abort();
  if (format_of_actions(*back) != printed) abort();
  Match any;
  (void)check_of_actions(*actions, any, 0);
  return 0;
}

// Fuzz target: the OpenFlow flow parser never crashes, and what it accepts
// prints as text that parses back to the same match, rule keys and actions,
// and printing that again gives the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "flow/of_match_syntax.h"

using namespace keel::flow;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);
  auto flow = parse_of_flow(line);
  if (!flow.ok()) return 0;
  std::string printed = format_of_flow(*flow);
  auto back = parse_of_flow(printed);
  if (!back.ok()) abort();
  if (!(back->match == flow->match) || !(back->meta == flow->meta) ||
      back->has_actions != flow->has_actions || back->actions != flow->actions)
    abort();
  if (format_of_flow(*back) != printed) abort();
  // The match part alone goes through parse_of_match.
  auto match = parse_of_match(format_of_match(flow->match));
  if (!match.ok() || !(*match == flow->match)) abort();
  return 0;
}

// Fuzz target: the datapath flow parser never crashes, and what it accepts
// prints as text that parses back to the same flow (terse and verbose), and
// printing that again gives the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "flow/dp_flow_syntax.h"

using namespace keel::flow;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);
  auto flow = parse_dp_flow(line);
  if (!flow.ok()) return 0;
  for (bool verbose : {false, true}) {
    DpFormatOptions o;
    o.verbose = verbose;
    std::string printed = format_dp_flow(*flow, o);
    auto back = parse_dp_flow(printed);
    if (!back.ok()) abort();
    if (!(back->match == flow->match) || back->has_actions != flow->has_actions ||
        back->actions != flow->actions || back->ufid != flow->ufid)
      abort();
    if (format_dp_flow(*back, o) != printed) abort();
  }
  // A key alone (no ufid, statistics or actions) goes through parse_dp_match.
  auto match = parse_dp_match(format_dp_match(flow->match));
  if (!match.ok() || !(*match == flow->match)) abort();
  return 0;
}

// Offload — see offload.h. (Interface stub: the engine follows.)
#include "offload/offload.h"

namespace keel::offload {

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::exact: return "exact";
    case Mode::megaflow: return "megaflow";
    case Mode::both: return "both";
  }
  return "?";
}

std::optional<Mode> parse_mode(std::string_view s) {
  if (s == "exact") return Mode::exact;
  if (s == "megaflow") return Mode::megaflow;
  if (s == "both") return Mode::both;
  return std::nullopt;
}

class Engine {};

Offload::Offload(datapath::Datapath& dp, OffloadConfig) : dp_(dp) {}
Offload::~Offload() = default;

}  // namespace keel::offload

// How cli/ words a flow's offload state (flow-dump -m, trace), shared by
// commands_offload.cpp, commands_datapath.cpp and commands_trace.cpp.
#pragma once

#include <string>

#include "offload/offload.h"

namespace keel::cli {

// flow-dump -m's `offload-reason:"..."` (keel's; Open vSwitch prints no
// reason): the engine's reason words with their detail.
std::string offload_reason_field(const offload::FlowState& s);

}  // namespace keel::cli

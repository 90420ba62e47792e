// What the BlueField boards share (the "SoC layer" under bluefield2 and
// bluefield3): the port layout of a dual-port DPU in switchdev mode and the
// default config that connects each uplink to its host PF representor.
#pragma once

#include "boards/board.h"

namespace keel::boards::bluefield {

inline constexpr BoardPort kPorts[] = {
    {"p0", hal::PortRole::uplink, "dpdk:0000:03:00.0"},
    {"p1", hal::PortRole::uplink, "dpdk:0000:03:00.1"},
    // representor=[65535] is mlx5's name for the host PF representor (pfNhpf).
    {"pf0hpf", hal::PortRole::host_representor, "dpdk:0000:03:00.0,representor=[65535]"},
    {"pf1hpf", hal::PortRole::host_representor, "dpdk:0000:03:00.1,representor=[65535]"},
};

inline constexpr std::string_view kDefaultConfig =
    "xconnect p0 pf0hpf\n"
    "xconnect pf0hpf p0\n"
    "xconnect p1 pf1hpf\n"
    "xconnect pf1hpf p1\n";

}  // namespace keel::boards::bluefield

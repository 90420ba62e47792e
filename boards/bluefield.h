// What the BlueField boards share (the "SoC layer" under bluefield2 and
// bluefield3): the port layout of a dual-port DPU in switchdev mode and the
// default config: one bridge per uplink with its host PF representor, NORMAL
// between them, named as NVIDIA's BlueField images name them (ovsbr1, ovsbr2).
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

// The out-of-band 1GbE management port of the DPU's ARM side (what NVIDIA's
// BlueField images call it); the SSH server listens there (Board::ssh_device).
inline constexpr std::string_view kManagementInterface = "oob_net0";

inline constexpr std::string_view kDefaultConfig =
    "add-br ovsbr1\n"
    "add-port ovsbr1 p0\n"
    "add-port ovsbr1 pf0hpf\n"
    "add-flow ovsbr1 priority=0,actions=NORMAL\n"
    "add-br ovsbr2\n"
    "add-port ovsbr2 p1\n"
    "add-port ovsbr2 pf1hpf\n"
    "add-flow ovsbr2 priority=0,actions=NORMAL\n"
    // The NIC's reason to be: exact-match flows into the mlx5 tables
    // (offload/offload.h; host-sim and qemu-virt leave it off).
    "offload enable\n";

}  // namespace keel::boards::bluefield

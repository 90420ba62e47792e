// bluefield2: NVIDIA BlueField-2 DPU (8 Arm A72 cores, ConnectX-6 Dx, mlx5).
// Two uplinks (p0, p1) and the host PF representor of each (pf0hpf,
// pf1hpf), all through the mlx5 PMD in switchdev mode. Core 0 runs control;
// cores 1-7 run PMDs.
#include "boards/bluefield.h"

namespace keel::boards {
namespace {
constexpr int kPmdCores[] = {1, 2, 3, 4, 5, 6, 7};
constexpr std::string_view kEal[] = {"-l",  "0-7", "--file-prefix", "keel",
                                     "-a",  "0000:03:00.0,dv_flow_en=1,representor=[65535]",
                                     "-a",  "0000:03:00.1,dv_flow_en=1,representor=[65535]",
                                     "--no-telemetry"};
}  // namespace

extern const Board kBlueField2{
    .name = "bluefield2",
    .description = "NVIDIA BlueField-2 DPU: 8x A72, ConnectX-6 Dx (mlx5), 2 uplinks",
    .backend = Backend::dpdk,
    .ports = bluefield::kPorts,
    .pmd_cores = kPmdCores,
    .control_core = 0,
    .eal_args = kEal,
    .offload_flows = 524288,
    .pmd_idle_sleep_us = 0,
    .console_baud = 115200,
    .default_config = bluefield::kDefaultConfig,
    // SSH on the out-of-band management port (the DPU's oob_net0), port 22.
    .ssh_device = bluefield::kManagementInterface,
};

}  // namespace keel::boards

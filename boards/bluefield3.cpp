// bluefield3: NVIDIA BlueField-3 DPU (16 Arm A78 cores, ConnectX-7, mlx5
// with hardware steering). Two uplinks and their host PF representors.
// Core 0 runs control; cores 1-15 run PMDs.
#include "boards/bluefield.h"

namespace keel::boards {
namespace {
constexpr int kPmdCores[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
// dv_flow_en=2: mlx5 hardware steering (HWS), the fast insertion path on BF3.
constexpr std::string_view kEal[] = {"-l",  "0-15", "--file-prefix", "keel",
                                     "-a",  "0000:03:00.0,dv_flow_en=2,representor=[65535]",
                                     "-a",  "0000:03:00.1,dv_flow_en=2,representor=[65535]",
                                     "--no-telemetry"};
}  // namespace

extern const Board kBlueField3{
    .name = "bluefield3",
    .description = "NVIDIA BlueField-3 DPU: 16x A78, ConnectX-7 (mlx5 HWS), 2 uplinks",
    .backend = Backend::dpdk,
    .ports = bluefield::kPorts,
    .pmd_cores = kPmdCores,
    .control_core = 0,
    .eal_args = kEal,
    .offload_flows = 2097152,
    .pmd_idle_sleep_us = 0,
    .console_baud = 115200,
    .default_config = bluefield::kDefaultConfig,
    // SSH on the out-of-band management port (the DPU's oob_net0), port 22.
    .ssh_device = bluefield::kManagementInterface,
};

}  // namespace keel::boards

// qemu-virt: keel as PID 1 on qemu-system-aarch64 -M virt (the "flashed onto
// the NIC" rehearsal of tests/e2e). DPDK with real 2 MB hugepages and two
// lcores; the ports are net_pcap vdevs on files of the initramfs.
#include "boards/board.h"

namespace keel::boards {
namespace {
constexpr BoardPort kPorts[] = {
    {"p0", hal::PortRole::uplink, "dpdk:net_pcap0,rx_pcap=/data/in.pcap"},
    {"p1", hal::PortRole::host_representor, "dpdk:net_pcap1,tx_pcap=/data/out.pcap"},
};
constexpr int kPmdCores[] = {1};
constexpr std::string_view kEal[] = {"-l", "0-1", "--file-prefix", "keel", "--no-telemetry"};
}  // namespace

extern const Board kQemuVirt{
    .name = "qemu-virt",
    .description = "QEMU 'virt' machine, aarch64, DPDK with hugepages and pcap vdevs",
    .backend = Backend::dpdk,
    .ports = kPorts,
    .pmd_cores = kPmdCores,
    .control_core = 0,
    .eal_args = kEal,
    .offload_flows = 0,
    .pmd_idle_sleep_us = 0,
    .console_baud = 115200,
    .default_config = kBridgeP0P1,
};

}  // namespace keel::boards

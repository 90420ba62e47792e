// host-sim: the default board. A software NIC on any Linux host: two ports,
// p0 replays keel's built-in traffic sample, p1 drops what it is sent, and
// the default config bridges them (br0, NORMAL: MAC learning, megaflows) as
// an Open vSwitch deployment would. --port replaces the ports.
#include "boards/board.h"

namespace keel::boards {
namespace {
constexpr BoardPort kPorts[] = {
    {"p0", hal::PortRole::uplink, "sample:pps=1000"},
    {"p1", hal::PortRole::host_representor, "null"},
};
constexpr int kPmdCores[] = {kUnpinned};
// Used only when a --port is dpdk: (net_pcap/net_null/net_ring vdevs on a
// host without hugepages or NICs). "%p" is replaced by the process id so runs can overlap.
// "-l 0": one lcore for the EAL's main thread; PMDs are keel's own threads.
constexpr std::string_view kEal[] = {"-l", "0", "--no-huge", "--no-pci", "-m", "512", "--no-telemetry",
                                     "--file-prefix", "keel-host-sim-%p"};
}  // namespace

extern const Board kHostSim{
    .name = "host-sim",
    .description = "software NIC on a Linux host: pcap, ring, TAP and DPDK virtual ports",
    .backend = Backend::sim,
    .ports = kPorts,
    .pmd_cores = kPmdCores,
    .control_core = kUnpinned,
    .eal_args = kEal,
    .offload_flows = 65536,
    .pmd_idle_sleep_us = 100,
    // One PMD takes a host's whole storm: a million new flows in flight.
    .pmd_upcall_records = 1u << 20,
    .console_baud = 115200,
    .default_config = kBridgeP0P1,
    // Relative to the working directory: a laptop has no /etc/keel to own.
    .config_dir = "keel-config",
    // SSH on the loopback only, and only once a user exists.
    .ssh_listen = "127.0.0.1",
    .ssh_port = 2222,
    .ssh_needs_user = true,
    // Tests arm fault points here (core/fault.h, `debug fault`).
    .simulates_faults = true,
};

}  // namespace keel::boards

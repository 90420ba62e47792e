// Boards are data: what a NIC (or a simulated one) has and how keel uses it.
//
// A Board names its HAL backend, its ports (name, role, spec in the
// --port grammar of keel/hal/port_spec.h), the cores for PMD threads and for
// control, the EAL arguments when the backend is DPDK, the capacity of its
// hardware flow table, the console line speed, the configuration it boots
// with when no --config and no startup config is given (console commands, one
// per line), and the directory of its startup config. One file
// per board in boards/; boards/registry.cpp lists them. No board #ifdef
// anywhere else: firmware/ reads these fields and nothing more.
//
// Thread-safety: immutable constants with static storage.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "keel/hal/port.h"

namespace keel::boards {

enum class Backend : uint8_t { sim, dpdk };
const char* to_string(Backend b);

struct BoardPort {
  std::string_view name;
  hal::PortRole role;
  std::string_view spec;  // --port grammar, e.g. "pcap:in=x.pcap" or "dpdk:0000:03:00.0"
};

inline constexpr int kUnpinned = -1;

struct Board {
  std::string_view name;
  std::string_view description;
  Backend backend;
  std::span<const BoardPort> ports;
  std::span<const int> pmd_cores;   // one PMD thread per entry; kUnpinned = let the OS place it
  int control_core;                 // kUnpinned or a core
  // DPDK backend (also used when a --port is dpdk:); "%p" becomes the process id.
  std::span<const std::string_view> eal_args;
  uint32_t offload_flows;           // hardware flow table capacity (rte_flow rules); 0 = none
  uint32_t pmd_idle_sleep_us;       // >0: an idle PMD sleeps this long (shared host CPUs)
  // Per PMD (datapath::PmdConfig): the megaflows its table holds (what a
  // flow limit can put on one PMD) and its upcall records (misses up at
  // once: a burst of new flows at line rate, datapath/upcall.h). Both cost
  // address space up front and memory only as they fill.
  uint32_t pmd_flows = 1u << 20;  // set flow-limit 1000000 on one PMD (PmdConfig::flow_capacity)
  uint32_t pmd_upcall_records = 1u << 18;
  uint32_t console_baud;            // UART speed for --console /dev/ttyX
  std::string_view default_config;  // console commands, one per line
  // Where the startup config lives when --config-dir isn't given
  // (firmware/control/config_store.h): persistent storage on the NIC.
  std::string_view config_dir = "/etc/keel";
  // The SSH server's defaults (firmware/ssh/server.h; `ssh listen|port`
  // change them): hardware boards listen on their management interface
  // (ssh_device: bound with SO_BINDTODEVICE; "" = any interface), port 22.
  // ssh_needs_user: listen only while at least one user is configured (a
  // laptop's host-sim doesn't open a port nobody can log in to).
  std::string_view ssh_listen = "0.0.0.0";
  std::string_view ssh_device = "";
  uint16_t ssh_port = 22;
  bool ssh_needs_user = false;
  // Whether `debug fault ...` may arm keel's fault points (core/fault.h):
  // only a board that simulates its hardware, never a NIC in production.
  bool simulates_faults = false;
};

// The default configuration of a two-port board (host-sim, qemu-virt): one
// bridge between p0 and p1 whose only rule is NORMAL, what a fresh Open
// vSwitch bridge does (fail_mode standalone's priority-0 NORMAL flow): MAC
// learning and megaflows from the first packet. `xconnect` remains a command.
inline constexpr std::string_view kBridgeP0P1 =
    "add-br br0\n"
    "add-port br0 p0\n"
    "add-port br0 p1\n"
    "add-flow br0 priority=0,actions=NORMAL\n";

// Every board, in a stable order; the first is the default.
std::span<const Board* const> all();
const Board* find(std::string_view name);
const Board& default_board();

}  // namespace keel::boards

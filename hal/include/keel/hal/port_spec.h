// PortSpec — what a --port NAME=SPEC (or a board) says a port is.
//
//   pcap:in=FILE[,loop=N][,rxq=Q]     replay FILE N times (loop=0: forever); default 1
//   pcap:out=FILE                     write every transmitted frame to FILE
//   pcap:in=A,out=B[,loop=N][,rxq=Q]  both
//   ring[:size=N][,rxq=Q]             in-memory rings, for tests
//   tap:IFNAME                        a Linux TAP device (created if absent); one rx queue
//   null                      drops what it is sent, receives nothing
//   sample[:pps=N]            replays keel's built-in traffic sample forever
//   dpdk:DEVARGS[,n_rxq=N][,n_txq=N]  an ethdev (vdev string or PCI address + args)
//
// rxq=Q (1..16, default 1; Port::kMaxQueues): rx queues, which the sim NIC
// fills by RSS (keel/hal/rss.h). Refused: 0, more than 16, not a number,
// given twice, and on a pcap port without in= (it receives nothing).
//
// dpdk n_rxq=N / n_txq=N (1..16; Open vSwitch's options:n_rxq / n_txq):
// the device's queues, RSS over the rx queues (hal/dpdk). They are keel's,
// taken out of DEVARGS before the EAL sees it. Default: 1 rx queue, and the
// tx queues the datapath asks for (one per PMD). A device that has fewer
// gets what it has (show ports says how many).
//
// parse_port_spec() validates the syntax only; files and devices are checked
// when the port is opened.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "keel/hal/port.h"

namespace keel::hal {

enum class PortKind : uint8_t { pcap, ring, tap, null, sample, dpdk };
const char* to_string(PortKind k);

struct PortSpec {
  std::string name;
  PortRole role = PortRole::uplink;
  PortKind kind = PortKind::null;
  std::string text;          // the spec as written, for messages and `show ports`
  std::string pcap_in;       // pcap
  std::string pcap_out;      // pcap
  uint64_t loops = 1;        // pcap: times to replay the input, 0 = forever
  uint32_t ring_size = 1024; // ring
  uint16_t rxq = 1;          // pcap (in=), ring, dpdk: rx queues, 1..Port::kMaxQueues
  uint16_t txq = 0;          // dpdk: tx queues, 1..Port::kMaxQueues; 0: as the datapath asks
  std::string ifname;        // tap
  uint64_t pps = 1000;       // sample: packets per second, 0 = as fast as possible
  std::string devargs;       // dpdk
};

// Parses SPEC (the part after NAME=) for port `name`.
Result<PortSpec> parse_port_spec(std::string_view name, std::string_view spec);

// Parses "NAME=SPEC" as given to --port.
Result<PortSpec> parse_port_arg(std::string_view arg);

}  // namespace keel::hal

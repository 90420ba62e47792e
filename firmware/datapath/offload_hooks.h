// Offload hooks — what the datapath hands the hardware offload engine
// (firmware/offload) and what it takes back, as plain data:
//
//   PMD -> engine   OffloadEvent: a megaflow was installed / removed /
//                   modified in a PMD's table (posted when the PMD applies
//                   the request or the upcall answer);
//                   HotMicroflow: a microflow of a megaflow the engine asked
//                   to sample (Megaflow::hw_want == 1) reached the promotion
//                   threshold: its exact key (MicroKey) is what an
//                   exact-match hardware rule matches.
//   engine -> dp    Datapath::offload_flow (what a flow matches and does),
//                   add_hw_stats (hardware counters rolled into the flow),
//                   set_flow_offload (where the flow runs, what to sample),
//                   set_flow_mark / clear_flow_mark (the PMD's mark table,
//                   partial offload), set_offload_sync (the hook flow_stats
//                   and flow_dump call first, so the hardware's counters are
//                   fresh in every revalidator round and every dump).
//
// Every type here is POD (OffloadFlowInfo aside, built on the engine's
// thread under the flow mutex): the PMD copies them into bounded rings
// (one per PMD and kind, pmd.h) and never allocates; a full ring drops the
// item and counts it (PmdCounters::offload_events_lost, offload_hot_lost),
// after which the engine reconciles with Datapath::offload_scan().
//
// Thread-safety: the types carry no shared state. Who posts and who reads
// them is in datapath.h ("Offload") and pmd.h.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "datapath/megaflow.h"
#include "flow/flow_key.h"
#include "flow/match.h"

namespace keel::datapath {

// What an exact-match hardware rule matches: the packet as it came off the
// wire (depth 0, no tunnel metadata), only the fields a NIC's exact-match
// table carries. Numbers in HOST byte order (as hal/flow.h's items); MACs
// and IPv6 addresses as bytes in wire order. Fields that do not apply are 0
// (ip_version 0: not IP; then no L3/L4 field is set).
struct MicroKey {
  uint32_t in_port = 0;  // datapath port number (= hal::Port::id())
  std::array<uint8_t, 6> eth_dst{}, eth_src{};
  uint16_t vlan_tci = 0;       // outer tag's TCI (PCP, CFI, VID) when vlan_present
  bool vlan_present = false;
  uint16_t eth_type = 0;       // the innermost EtherType (after the tags the key has)
  uint8_t ip_version = 0;      // 0, 4 or 6
  uint8_t ip_proto = 0;        // IPv4 protocol / IPv6 next header
  uint8_t ip_tos = 0;          // IPv4 TOS / IPv6 traffic class (DSCP and ECN)
  uint8_t ip_ttl = 0;          // IPv4 TTL / IPv6 hop limit
  uint8_t ip_frag = 0;         // flow::FlowKey's nw_frag bits (0: not a fragment)
  uint32_t ipv4_src = 0, ipv4_dst = 0;
  std::array<uint8_t, 16> ipv6_src{}, ipv6_dst{};
  uint16_t tp_src = 0, tp_dst = 0;  // TCP/UDP/SCTP ports
  uint8_t icmp_type = 0, icmp_code = 0;  // ICMP / ICMPv6 (ip_proto 1 / 58)
  bool operator==(const MicroKey&) const = default;
};

struct OffloadEvent {
  enum class Op : uint8_t { installed, removed, modified };
  Op op = Op::installed;
  uint8_t pmd = 0;    // the PMD's index
  uint32_t slot = 0;  // Megaflow::index in that PMD's table
  Ufid ufid;
};

struct HotMicroflow {
  uint8_t pmd = 0;
  uint16_t rxq = 0;   // the rx queue (of key.in_port) the packets came from
  uint32_t slot = 0;  // the megaflow they hit
  Ufid ufid;
  MicroKey key;
  uint32_t packets = 0;  // counted in the window when it was posted
};

// The MicroKey of a parsed packet key (a depth-0 packet's: in_port set,
// recirc_id 0). False, and nothing to offload exactly, when the key is not
// one the exact-match table carries: tunnel metadata, a recirc_id, or a
// second VLAN tag.
bool make_micro_key(const flow::Miniflow& key, MicroKey* out) noexcept;

// One PMD's flow as the engine needs it (Datapath::offload_flow).
struct OffloadFlowInfo {
  flow::Match match;               // key & mask
  flow::FlowKey shown_key;         // the unmasked key that made it (flow-dump's)
  std::vector<uint8_t> action_bytes;  // encoded datapath actions (empty: drop)
  uint32_t in_port = 0;
  uint32_t mark = 0;               // the PMD's mark for it, 0 = none
};

// What Datapath::offload_poll() drained.
struct OffloadPollResult {
  size_t events = 0, hot = 0;
};

// Promotion defaults (Datapath::set_offload_promote).
inline constexpr uint32_t kDefaultPromotePackets = 16;
inline constexpr uint64_t kDefaultPromoteWindowNs = 1'000'000'000;
// Marks are 24 bits (rte_flow MARK ids of the hardware), never 0.
inline constexpr uint32_t kMaxFlowMark = 0xffffff;

}  // namespace keel::datapath

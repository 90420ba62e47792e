// LACP (IEEE 802.1AX, Link Aggregation Control Protocol) for a bond: the
// actor's and partner's state per member, the receive and periodic
// transmit machines with their fast (1 s, timeout 3 s) and slow (30 s,
// timeout 90 s) timers, the aggregation checks that decide which members
// may be enabled, and LACPDU parsing and composition. Semantics are Open
// vSwitch 3.1's lib/lacp.c (read it to understand; this is keel's code):
//
//   * a member is `current` while PDUs arrive within 3x the actor's own
//     transmit period (lacp-time: 3 s fast, 90 s slow; Open vSwitch arms the
//     receive timer from its own setting), then `expired` for 3 s (the
//     partner is then assumed fast and out of sync), then `defaulted`
//     (partner forgotten). A new member of an active actor starts expired;
//     of a passive one, defaulted;
//   * the bond is negotiated once some member that is not defaulted is
//     attached. The lead is the best-priority current attached member (else
//     the best that attaches now); a member attaches when its partner has
//     the lead's partner's system id and key, and never when it hears its
//     own system id (looped back). A member may be enabled when attached
//     and its partner says synchronized: a member whose partner system or
//     key differs is not enabled (may_enable false). As in Open vSwitch, an
//     expired member still attaches (the bond reads `negotiated` for the
//     first 3 s of an active bond with no partner) yet is never enabled;
//   * PDUs are sent every 1 s or 30 s, as the *partner's* timeout bit asks
//     (so every 30 s while the partner is defaulted, whatever lacp-time),
//     and at once when the actor's state changes or the partner's last PDU
//     showed it holds stale information about us; a passive actor sends
//     only once it has heard a partner; a member with carrier down sends
//     nothing and drops what it receives;
//   * lacp-fallback-ab: defaulted members attach and may be enabled while
//     no member has a partner (status stays `configured`); once one has,
//     the defaulted ones detach.
//
// Bad input: a frame that is not a whole LACPDU (fewer than 110 bytes after
// the EtherType, not EtherType 0x8809 untagged or after one VLAN tag — Open
// vSwitch reads a single-tagged LACPDU too —, subtype other than 1, version 0, actor or
// partner TLV type or length that lies; for version 1 also the collector
// TLV and terminator) is counted (rx_bad) and ignored; a Marker PDU
// (subtype 2) is counted apart (rx_marker); nothing is read past the frame.
// Open vSwitch checks subtype and the actor/partner TLVs only; the rest is
// 802.1AX. tests/fuzz/fuzz_lacp.cpp holds parse_lacpdu and process_packet.
//
// Thread-safety: every method takes the object's own mutex. The writers
// are the maintenance thread (run(), carrier) and the upcall handlers
// (process_packet, when a slow-protocol frame arrives); show commands read
// snapshots. No PMD ever calls it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "flow/flow_key.h"
#include "ofproto/bond.h"

namespace keel::ofproto {

inline constexpr flow::EthAddr kLacpDstMac{{0x01, 0x80, 0xc2, 0x00, 0x00, 0x02}};
inline constexpr uint16_t kEthTypeSlowProtocols = 0x8809;

// One side's information in a LACPDU (802.1AX's actor/partner TLV).
struct LacpInfo {
  uint16_t sys_priority = 0;
  flow::EthAddr sys_id{};
  uint16_t key = 0;
  uint16_t port_priority = 0;
  uint16_t port_id = 0;
  uint8_t state = 0;  // kLacpState* bits
  bool operator==(const LacpInfo&) const = default;
};
inline constexpr uint8_t kLacpStateActivity = 0x01, kLacpStateTimeout = 0x02, kLacpStateAggregation = 0x04,
                         kLacpStateSync = 0x08, kLacpStateCollecting = 0x10, kLacpStateDistributing = 0x20,
                         kLacpStateDefaulted = 0x40, kLacpStateExpired = 0x80;

struct LacpPdu {
  LacpInfo actor, partner;
  uint16_t collector_max_delay = 0;
};
// The LACPDU in an Ethernet frame (dst, src, 0x8809, subtype 1, version 1,
// TLVs); nullopt: not a valid one (never reads past `frame`).
std::optional<LacpPdu> parse_lacpdu(std::span<const uint8_t> frame);
// A whole frame from `src` to kLacpDstMac: the 14-byte Ethernet header and
// the 110-byte LACPDU (124 bytes, as Open vSwitch sends it; the NIC pads
// nothing more, 124 >= 60). Collector TLV, terminator and reserved bytes as
// 802.1AX-2008; Open vSwitch sends a max delay of 0.
std::vector<uint8_t> compose_lacpdu(const LacpPdu& pdu, const flow::EthAddr& src);

struct LacpSettings {
  std::string name;                 // the bond's
  // other_config:lacp-system-id. Open vSwitch's default is the bridge's
  // hardware address (bridge.c: port->bridge->ea); the caller picks keel's.
  // Never zero (Open vSwitch refuses a zero system id).
  flow::EthAddr sys_id{};
  // other_config:lacp-system-priority; Open vSwitch's default is 65534 for
  // a bond of two or more interfaces (65535 for one), as captured.
  uint16_t sys_priority = 65534;
  bool active = true;               // lacp=active|passive
  bool fast = false;                // other_config:lacp-time=fast
  bool fallback_ab = false;         // other_config:lacp-fallback-ab
};
struct LacpMemberSettings {
  std::string name;
  uint16_t port_id = 0;             // Interface other_config:lacp-port-id; OVS's default: the OpenFlow port number
  uint16_t port_priority = 65535;   // Interface other_config:lacp-port-priority (OVS's default)
  uint16_t key = 0;                 // Interface other_config:lacp-aggregation-key; 0: none (see Lacp())
  flow::EthAddr mac{};              // source MAC of its PDUs (Open vSwitch: the interface's MAC)
};

enum class LacpMemberStatus : uint8_t { current, expired, defaulted };

// Open vSwitch's per-member counters (lacp/show-stats). rx_pdus counts
// every slow-protocol frame handed to process_packet, valid or not.
struct LacpCounters {
  uint64_t tx_pdus = 0, rx_pdus = 0, rx_bad = 0, rx_marker = 0;
  uint64_t link_expired = 0, link_defaulted = 0, carrier_changed = 0;
};

struct LacpMemberView {
  std::string name;
  LacpMemberStatus status = LacpMemberStatus::defaulted;
  bool attached = false, may_enable = false;
  uint16_t port_id = 0, port_priority = 0;
  LacpInfo actor, partner;
  uint64_t rx_pdus = 0, rx_bad = 0, tx_pdus = 0;  // also in counters
  LacpCounters counters;
};
struct LacpView {
  std::string name;
  bool active = true, fast = false, negotiated = false;
  flow::EthAddr sys_id{};
  uint16_t sys_priority = 0, key = 0;
  std::vector<LacpMemberView> members;
};

// A frame to send on a member.
struct LacpTx {
  size_t member = 0;
  std::vector<uint8_t> frame;
};

class Lacp {
 public:
  // `members` in the bond's order (the indexes every other call takes).
  // The bond's aggregation key is that of the member with the lowest
  // port_id: its `key`, or its port_id when the key is 0 (Open vSwitch
  // takes the first member it registered, in practice the lowest OpenFlow
  // port). sys_id must not be zero (Open vSwitch refuses it: the caller
  // checks, as bridge.c does).
  Lacp(const LacpSettings& s, std::vector<LacpMemberSettings> members);
  void reconfigure(const LacpSettings& s);

  // A slow-protocol frame received on `member` at now_ms: true if it was a
  // valid LACPDU (processed), false if counted as bad and ignored.
  bool process_packet(size_t member, std::span<const uint8_t> frame, uint64_t now_ms);
  // The member's carrier; acts only on a change (up -> down or back): the
  // member then expires (when current, or the actor is active) and gets 3 s
  // of fast receive timeout. A down member sends nothing and drops the PDUs
  // it receives. Members start with carrier up. now_ms: the time of the
  // change (default: the latest time seen by run/process_packet).
  void set_carrier(size_t member, bool up, std::optional<uint64_t> now_ms = std::nullopt);
  // Timers; appends the PDUs due to `tx`. Call at least every 100 ms.
  void run(uint64_t now_ms, std::vector<LacpTx>& tx);

  LacpStatus status() const;  // configured / negotiated (never off)
  bool may_enable(size_t member) const;
  bool is_current(size_t member) const;  // has partner info (not defaulted): Interface lacp_current
  LacpView view() const;

 private:
  mutable std::mutex mu_;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// `ovs-appctl lacp/show BOND`'s text for one bond (Open vSwitch 3.1's
// layout: members sorted by name, state words in bit order). Several bonds:
// concatenate, in the order lacp/show lists them.
std::string format_lacp_show(const LacpView& v);
// `ovs-appctl lacp/show-stats BOND`'s text for one bond.
std::string format_lacp_stats(const LacpView& v);

}  // namespace keel::ofproto

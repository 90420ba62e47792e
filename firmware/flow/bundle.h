// The OpenFlow `bundle()` action and the flow hashes it and the bonds use.
//
//   bundle(fields,basis,algorithm,ofport,members:P1,P2,...)
//
// picks one of the member OpenFlow ports for a packet and outputs to it
// (Open vSwitch's lib/bundle.c; NXAST_BUNDLE). `fields` says which header
// fields are hashed (flow_hash_fields(): eth_src, symmetric_l4,
// symmetric_l3l4, symmetric_l3l4+udp, nw_src, nw_dst, symmetric_l3), `basis`
// seeds the hash, and `algorithm` is
//   * active_backup: the first member (in the listed order) that is enabled;
//   * hrw: highest random weight — each enabled member i scores
//     hash(i, flow_hash), the highest score wins; the flow's hash fields are
//     unwildcarded when more than one member is listed.
// No member enabled: nothing (the action outputs nothing).
//
// The hash values are keel's own (core/hash.h), not Open vSwitch's jhash:
// which member a given flow picks differs from OVS, the rules (which fields,
// symmetry, what the megaflow must match) are OVS's.
//
// bundle_load(...) (the choice written into a field) is not implemented;
// the action parser refuses it by name.
//
// Also here, for ofproto/bond.cpp: flow_hash_5tuple() (balance-tcp's bucket
// when translation picks the member) and hash_mac() (balance-slb's bucket).
//
// Thread-safety: value types and pure functions; bundle_execute() calls
// `enabled` on the caller's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "flow/flow_key.h"

namespace keel::flow {

// Open vSwitch's enum nx_hash_fields (same numbering).
enum class HashFields : uint8_t {
  eth_src = 0,
  symmetric_l4 = 1,
  symmetric_l3l4 = 2,
  symmetric_l3l4_udp = 3,
  nw_src = 4,
  nw_dst = 5,
  symmetric_l3 = 6,
};
// Open vSwitch's enum nx_bd_algorithm (same numbering).
enum class BundleAlgorithm : uint8_t { active_backup = 0, hrw = 1 };

const char* to_string(HashFields f);       // "eth_src", ..., "symmetric_l3l4+udp", ...
const char* to_string(BundleAlgorithm a);  // "active_backup", "hrw"
// Case-insensitive, as ovs-ofctl.
std::optional<HashFields> parse_hash_fields(std::string_view s);
std::optional<BundleAlgorithm> parse_bundle_algorithm(std::string_view s);

// Open vSwitch limits a bundle to 2048 members (BUNDLE_MAX_MEMBERS).
inline constexpr size_t kBundleMaxMembers = 2048;

// bundle(fields,basis,algorithm,ofport,members:...).
struct OfBundle {
  HashFields fields = HashFields::eth_src;
  uint16_t basis = 0;
  BundleAlgorithm algorithm = BundleAlgorithm::hrw;
  std::vector<uint32_t> members;  // OpenFlow ports, as listed (NONE allowed: choosing it outputs nothing)
  bool operator==(const OfBundle&) const = default;
};

// flow_hash_fields(): the hash of the fields `fields` names.
uint32_t flow_hash_fields(const FlowKey& flow, HashFields fields, uint16_t basis) noexcept;
// flow_mask_hash_fields(): ORs into *wc the bits flow_hash_fields() read
// for this flow (per Open vSwitch: e.g. L4 ports only for TCP/SCTP, and for
// UDP with symmetric_l3l4+udp, unfragmented).
void flow_mask_hash_fields(const FlowKey& flow, FlowKey* wc, HashFields fields) noexcept;

// flow_hash_5tuple(): addresses (IPv4/ARP or IPv6 by dl_type), nw_proto,
// and the ports for TCP, UDP, SCTP, ICMP and ICMPv6. Not symmetric.
uint32_t flow_hash_5tuple(const FlowKey& flow, uint32_t basis) noexcept;
// hash_mac(): an Ethernet address and a VLAN id (balance-slb, bond/hash).
uint32_t hash_mac(const EthAddr& mac, uint16_t vlan, uint32_t basis) noexcept;

// The score of member index `i` for a flow whose hash is `flow_hash` (hrw).
uint32_t bundle_hrw_score(uint32_t i, uint32_t flow_hash) noexcept;

// bundle_execute(): the chosen member's OpenFlow port, or nullopt when no
// member is enabled. `enabled(ofport)` says whether a member may be chosen
// (Open vSwitch's member_enabled_cb: IN_PORT, TABLE, NORMAL, FLOOD, ALL and
// NONE are always "enabled", CONTROLLER never, a port when it exists and
// may be enabled — that policy is the caller's). `wc` (may be null) gets the
// hash fields' bits for hrw with more than one member.
template <class Enabled>
std::optional<uint32_t> bundle_execute(const OfBundle& b, const FlowKey& flow, FlowKey* wc,
                                       Enabled&& enabled) {
  if (b.algorithm == BundleAlgorithm::active_backup) {
    for (uint32_t m : b.members)
      if (enabled(m)) return m;
    return std::nullopt;
  }
  if (b.members.size() > 1 && wc) flow_mask_hash_fields(flow, wc, b.fields);
  const uint32_t h = flow_hash_fields(flow, b.fields, b.basis);
  std::optional<size_t> best;
  uint32_t best_score = 0;
  for (size_t i = 0; i < b.members.size(); ++i) {
    if (!enabled(b.members[i])) continue;
    const uint32_t score = bundle_hrw_score(static_cast<uint32_t>(i), h);
    if (!best || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  if (!best) return std::nullopt;
  return b.members[*best];
}

}  // namespace keel::flow

// Bond — one bonded port of a bridge (ovs-vsctl add-bond): its members,
// its mode, which members are enabled, which member each of its 256 hash
// buckets sends on, and the rebalancing that moves buckets between members.
// The logic is Open vSwitch 3.1's ofproto/bond.c (read it in the OVS source
// to understand; this is keel's own code):
//
//   * active-backup: every packet leaves on the active member; the primary
//     (other_config:bond-primary) is preferred when enabled; packets received
//     on a backup member are dropped (bond_check_admissibility). A change of
//     active member asks for gratuitous learning packets.
//   * balance-slb: bucket = hash(source MAC, VLAN, basis) & 255, no L4;
//     multicast received on a non-active member is dropped, and a packet
//     whose source MAC was learned on another bundle is dropped unless it is
//     a gratuitous ARP (drop_if_moved). A bucket that moves sends learning
//     packets for its MACs.
//   * balance-tcp: bucket = dp_hash & 255 of hash(l4(basis)); needs LACP
//     negotiated (without it nothing is sent or accepted, unless
//     lacp-fallback-ab, which makes it behave as active-backup).
//   * members are enabled after `updelay` ms of carrier (and LACP
//     may_enable), disabled after `downdelay` ms without (a member the bond
//     starts with is taken as its link is, no delay; when every member is
//     down, the first whose updelay runs skips the rest of it); an admin can
//     disable one (bond-disable-member: it stays disabled until
//     bond-enable-member — Open vSwitch 3.1's bond/disable-member is undone
//     by its next link-state poll, observed live). A disabled member's
//     buckets go to enabled members at once (the least loaded first); an
//     enabled member gets buckets at the next rebalance. A hash-basis change
//     keeps the bucket -> member map (OVS empties it).
//   * rebalancing (bond_rebalance): every rebalance interval, from the bytes
//     each bucket carried since the last one (an exponentially decayed sum,
//     halved after each run as in OVS), buckets move from the most to the
//     least loaded member only while a move makes the difference smaller
//     (OVS's choose_entry_to_migrate rule: never a move that makes things
//     worse; nothing moves when the loads are within OVS's threshold).
//
// Ids: every bond has an id, 1..datapath::kMaxBondId, unique in the switch:
// the `lb_output(id)` argument, and the recirc_id of the recirculation
// scheme (lb-output-action=false): `hash(l4(basis)),recirc(id)`, then
// megaflows matching recirc_id(id),dp_hash(B/0xff) that output to bucket B's
// member.
//
// Thread-safety: the control thread and the Ofproto maintenance thread (the
// writers, under the Ofproto writer mutex) configure and run it; the upcall
// handlers and revalidators (translation) and the show commands read it.
// Every method takes the bond's own mutex (never held by a PMD; held only
// for a short computation, no I/O under it).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "datapath/bond_table.h"
#include "flow/flow_key.h"

namespace keel::ofproto {

enum class BondMode : uint8_t { active_backup, balance_slb, balance_tcp };
enum class LacpMode : uint8_t { off, active, passive };
// Open vSwitch's enum lacp_status, as bond/show prints it: "off",
// "configured" (LACP on, no partner), "negotiated".
enum class LacpStatus : uint8_t { off, configured, negotiated };

const char* to_string(BondMode m);   // "active-backup", "balance-slb", "balance-tcp"
const char* to_string(LacpMode m);   // "off", "active", "passive"
const char* to_string(LacpStatus s); // "off", "configured", "negotiated"
std::optional<BondMode> parse_bond_mode(std::string_view s);
std::optional<LacpMode> parse_lacp_mode(std::string_view s);

// ovs-vsctl's Port columns of a bond and their other_config keys.
struct BondSettings {
  BondMode mode = BondMode::active_backup;  // bond_mode (OVS's default)
  LacpMode lacp = LacpMode::off;            // lacp
  bool lacp_fast = false;                   // other_config:lacp-time=fast|slow
  bool lacp_fallback_ab = false;            // other_config:lacp-fallback-ab
  uint32_t rebalance_interval_ms = 10000;   // other_config:bond-rebalance-interval (0: never; 1..999 -> 1000 as OVS)
  uint32_t updelay_ms = 0;                  // bond_updelay
  uint32_t downdelay_ms = 0;                // bond_downdelay
  std::string primary;                      // other_config:bond-primary ("" none)
  uint32_t hash_basis = 0;                  // other_config:bond-hash-basis
  bool lb_output_action = true;             // other_config:lb-output-action (keel's default: true)
  bool operator==(const BondSettings&) const = default;
};

// The settings a bond works with, from the configured ones (bridge.c's
// port_configure_bond): a rebalance interval of 1..999 ms is 1000;
// bond-primary counts only in active-backup or with lacp-fallback-ab;
// lb-output-action only in balance-tcp. Bond::settings() returns what was
// configured, BondView::settings this.
BondSettings bond_effective_settings(const BondSettings& s);

struct BondMemberConfig {
  std::string name;
  uint32_t ofport = 0;
  uint16_t dp_port = 0;
  flow::EthAddr mac{};  // the port's hardware address (active member mac)
};

// What translation must do with a packet received on a member
// (bond_check_admissibility).
enum class BondVerdict : uint8_t { accept, drop, drop_if_moved };

// A learning packet to send (gratuitous RARP-like frame from `mac` on `vlan`,
// as OVS's bond_compose_learning_packet), on the member its hash picks.
struct LearningPacket {
  uint16_t dp_port = 0;
  std::vector<uint8_t> frame;
};

// What run() changed.
struct BondChange {
  bool tables = false;      // the bucket -> member map changed: push dp_buckets() to the datapath
  bool revalidate = false;  // enabled members or the active member changed: re-translate flows
  bool learning = false;    // learning packets are due (take_learning_due())
};

// bond/show's facts (see cli for the layout).
struct BondMemberView {
  std::string name;
  uint32_t ofport = 0;
  uint16_t dp_port = 0;
  flow::EthAddr mac{};
  // may_enable as bond/show prints it (Open vSwitch's: carrier and LACP's verdict).
  bool enabled = false, may_enable = false, active = false;
  bool carrier = false, admin_disabled = false;
  std::optional<uint64_t> delay_left_ms;  // updelay / downdelay running
  // Buckets on this member with the bytes that count for rebalancing
  // (every bucket it holds, loaded or not; empty in active-backup;
  // bond/show prints those with a load of 1 kB or more).
  std::vector<std::pair<unsigned, uint64_t>> hashes;
};
struct BondView {
  std::string name;
  uint32_t id = 0;
  BondSettings settings;  // bond_effective_settings()
  LacpStatus lacp_status = LacpStatus::off;
  bool may_recirc = false;  // "bond may use recirculation" (Bond::may_recirc())
  bool lb_output = false;   // "lb_output action: enabled" (Bond::use_lb_output())
  bool primary_is_member = false;      // false with a bond-primary naming no member: "(no such member)"
  flow::EthAddr active_member_mac{};   // the last active member's MAC (zero: none was ever active)
  std::optional<uint64_t> next_rebalance_ms;  // nullopt: rebalancing off (interval 0 or mode active-backup)
  std::optional<size_t> active;               // index into members
  std::vector<BondMemberView> members;        // in configuration order (bond/show sorts them by name)
};

class Bond {
 public:
  Bond(std::string name, uint32_t id, const BondSettings& s, std::vector<BondMemberConfig> members,
       uint64_t now_ms);

  const std::string& name() const { return name_; }
  uint32_t id() const { return id_; }
  BondSettings settings() const;
  // New settings (members unchanged); the buckets stay where they are.
  void reconfigure(const BondSettings& s, uint64_t now_ms);
  std::vector<BondMemberConfig> members() const;
  std::optional<size_t> member_index(std::string_view name) const;
  std::optional<size_t> member_by_ofport(uint32_t ofport) const;

  // --- inputs (writers) ---
  void set_carrier(size_t member, bool up);
  void set_may_enable(size_t member, bool may);  // LACP's verdict (true when LACP is off)
  void set_lacp_status(LacpStatus s);
  Status set_admin_enabled(size_t member, bool on);  // bond-enable-member / bond-disable-member
  Status set_active_member(size_t member);           // bond-set-active-member (must be enabled)
  // Timers (updelay/downdelay), active member choice, bucket moves off
  // disabled members.
  BondChange run(uint64_t now_ms);
  // Whether a rebalance is due, and the rebalance itself from the
  // datapath's cumulative per-bucket bytes (Datapath::bond_stats); the
  // bond keeps the previous reading and works on the difference. True when
  // buckets moved (push the tables, re-translate).
  bool rebalance_due(uint64_t now_ms) const;
  // The stats are used when output uses lb_output or the recirculation
  // scheme (cumulative: Datapath::bond_stats, or the sum of the second-pass
  // megaflows' bytes per bucket); otherwise (balance-slb, or balance-tcp
  // chosen by translation) the bytes come from account(). A counter that
  // went backwards (the datapath table was recreated) counts as no traffic.
  bool rebalance(const datapath::BondBucketStats& cumulative, uint64_t now_ms);
  // bond_account(): `n_bytes` sent by a flow whose member translation chose
  // (not lb_output/recirc), added to its bucket's load; ignored when the bond
  // does not rebalance.
  void account(const flow::FlowKey& flow, uint16_t vlan, uint64_t n_bytes);
  // Learning packets due after run() said so, for the given (vlan, mac)
  // entries of the bridge's MAC table not learned on this bond; clears the flag.
  std::vector<LearningPacket> take_learning_due(std::span<const std::pair<uint16_t, flow::EthAddr>> macs);

  // --- translation (readers) ---
  LacpStatus lacp_status() const;
  // Whether output uses lb_output (balance-tcp, lb_output_action, not
  // falling back to active-backup) or the recirculation scheme: OVS's
  // bond_use_lb_output() / bond_may_recirc(), which do not look at LACP.
  // Translation asks choose_output(flow, nullptr, vlan) first, as OVS's
  // output_normal() does, and outputs nothing when it says nullopt: a
  // balance-tcp bond without LACP negotiated (lacp=off included) sends
  // nothing and drops what it receives (observed on a live Open vSwitch
  // 3.1: flooding skips the bond, ofproto/trace says "bonding refused
  // admissibility"); only then hash(l4(basis)) + lb_output(id) / recirc(id).
  bool use_lb_output() const;
  bool use_recirc() const;
  // OVS's bond_may_recirc(): balance-tcp not falling back to active-backup
  // (use_lb_output() || use_recirc()).
  bool may_recirc() const;
  // The bucket of a flow in balance-slb (hash of source MAC and vlan) and
  // balance-tcp (5-tuple hash); nullopt in active-backup.
  std::optional<unsigned> bucket_of(const flow::FlowKey& flow, uint16_t vlan) const;
  // The member for a packet of `flow` in `vlan` (active-backup: the active
  // one; slb: its source MAC bucket; tcp without recirc: the 5-tuple bucket)
  // and the key bits consulted ORed into *wc; nullopt: drop (no member).
  std::optional<BondMemberConfig> choose_output(const flow::FlowKey& flow, flow::FlowKey* wc, uint16_t vlan) const;
  // The member of bucket `bucket` (recirculation scheme, second pass).
  std::optional<BondMemberConfig> bucket_member(unsigned bucket) const;
  BondVerdict check_admissibility(size_t member, const flow::FlowKey& flow) const;
  // bucket -> datapath port, kNoBondMember where no member is enabled.
  datapath::BondMembers dp_buckets() const;

  BondView view(uint64_t now_ms) const;

 private:
  mutable std::mutex mu_;
  std::string name_;
  uint32_t id_;
  // the rest is the implementation's
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Bytes of the learning packet for `mac` on `vlan` (0: untagged).
std::vector<uint8_t> compose_learning_packet(const flow::EthAddr& mac, uint16_t vlan);

}  // namespace keel::ofproto

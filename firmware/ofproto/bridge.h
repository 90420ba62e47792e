// Bridge — one OpenFlow switch: its ports (OpenFlow port numbers mapped to
// datapath ports, with their VLAN roles), its 255 rule tables, its MAC
// table, and the flow-mods that change them.
//
// Readers and the writer:
//   * the control thread (consoles, config) is the only writer: ports,
//     flow-mods, bundles, expiry of timed-out rules;
//   * translation (the upcall handler threads, the revalidator threads, and
//     `trace` on the control thread) reads without locks: the port map is an
//     immutable snapshot (PortMap) swapped atomically; the tables are
//     versioned classifiers (classifier.h): a reader takes version() once
//     and sees one consistent set of rules for a whole translation.
//     Memory a reader may hold (rules, port maps, classifier nodes) is freed
//     through the Rcu after every reader slot has quiesced.
//
// Flow-mods follow OpenFlow / ovs-ofctl semantics (Open vSwitch 3.1's
// ofproto.c is the reference):
//   add            into table T (absent: 0); replaces a rule with the same
//                  match and priority in T: the new rule's timeouts, flags,
//                  cookie and creation time are the add's; its counters are
//                  the old rule's unless reset_counts (OVS modify_keep_counts);
//   modify         (loose) every rule whose match is at least as specific as
//                  the given one, in table T (absent or 255: every table),
//                  filtered by cookie=V/M, gets the new actions; timeouts,
//                  flags, importance, creation time and counters are kept
//                  (reset_counts clears the counters); cookie=V without a
//                  mask sets the rules' cookie; if none matched, nothing is
//                  added (OpenFlow 1.1+; OpenFlow 1.0 would add);
//   modify_strict  the rule with exactly this match and priority;
//   del / del_strict  likewise, with an optional out_port filter (rules with
//                  an output, or controller, to that port). A delete only
//                  takes cookie=V/M (cookie=V sets a cookie: refused, as by
//                  ovs-ofctl).
// Every add and modify runs check_of_actions() with the rule's match and
// table. A bundle applies a list of flow-mods as one version: all or
// nothing; later flow-mods see the effect of earlier ones.
// At most kMaxRules rules per bridge (visible ones; an add beyond fails).
//
// Removal protocol. A removed rule stays linked (visible to lookups with
// older versions) until one Rcu grace period after the publish; then
// reclaim() (control thread, after Rcu::reclaim()) erases it from its
// classifier and retires its memory for a second grace period (in-flight
// lookups may still walk it). Without an Rcu (unit tests, no concurrent
// readers) removed rules are erased and freed at once.
//
// Thread-safety: as above. Every writer method is control-thread only.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "flow/of_actions.h"
#include "flow/of_match_syntax.h"
#include "ofproto/classifier.h"
#include "ofproto/mac_learning.h"
#include "ofproto/rule.h"

namespace keel::datapath {
class Rcu;
}

namespace keel::ofproto {

class Bond;
class Lacp;
struct TunnelPort;

// The recirculation scheme's per-bucket traffic of one bond (lb-output-action
// =false): the bytes and packets the second-pass megaflows of each bucket
// carried, added by the revalidator from their statistics (relaxed atomics,
// one writer at a time per flow, any reader); the maintenance tick hands
// them to Bond::rebalance as the datapath's bucket counters are for
// lb_output. Shared by the bond's members' PortConfigs.
struct BondRecircLoads {
  std::array<std::atomic<uint64_t>, 256> bytes{}, packets{};
};

// VLAN role of a port for NORMAL (ovs-vsctl vlan_mode, tag, trunks).
enum class VlanMode : uint8_t {
  trunk,           // tagged frames of `trunks` (empty: all VLANs); untagged = VLAN 0
  access,          // untagged frames only, in VLAN `tag`
  native_tagged,   // trunk, and untagged frames are VLAN `tag` (sent tagged)
  native_untagged  // trunk, and untagged frames are VLAN `tag` (sent untagged)
};

struct PortConfig {
  std::string name;
  uint32_t ofport = 0;    // OpenFlow port number (1..0xfeff)
  uint16_t dp_port = 0;   // datapath port id
  VlanMode vlan_mode = VlanMode::trunk;
  uint16_t tag = 0;              // access / native VLAN
  std::vector<uint16_t> trunks;  // empty: every VLAN
  std::optional<uint32_t> mtu_request;  // ovs-vsctl's Interface mtu_request (68..9216); absent: default
  std::string rxq_affinity;             // Interface other_config:pmd-rxq-affinity ("" none)
  std::optional<uint16_t> n_rxq;        // Interface options:n_rxq; absent: the --port spec's
  // Whether ovs-vsctl's vlan_mode and tag columns were given (vlan_mode not
  // implied by the tag; tag=0 given). Forwarding does not look at them;
  // `show` and the running config print what was given.
  bool vlan_mode_set = false, tag_set = false;
  // A member of a bond (add-bond): the bond's name, its Bond and (when
  // lacp is not off) Lacp, this member's index in Bond::members(), and the
  // OpenFlow port that stands for the whole bond in the MAC table (its
  // first member's: what fdb-show prints, as OVS prints a bundle's first
  // port). Every member carries the bond's VLAN settings. The objects are
  // shared with the Ofproto (which runs them) and live as long as any
  // snapshot that names them; their methods take their own locks.
  std::string bond;
  std::shared_ptr<Bond> bond_obj;
  std::shared_ptr<Lacp> lacp;
  std::shared_ptr<BondRecircLoads> bond_loads;
  size_t bond_member = 0;
  uint32_t bond_ofport = 0;
  // A tunnel port (type=vxlan|geneve|gre): its options and vport; dp_port
  // is then the shared tunnel vport (ofproto/tunnel.h), which several
  // ports of several bridges may have: PortMap::by_dp_port and the
  // Ofproto's dp-port index never return a tunnel port.
  std::shared_ptr<const TunnelPort> tunnel;
  // The port that stands for this one in the MAC table and in "is this the
  // input bundle" checks: the bond's first member, else the port itself.
  uint32_t bundle() const { return bond_obj ? bond_ofport : ofport; }
};

// An immutable snapshot of a bridge's ports.
struct PortMap {
  std::vector<PortConfig> ports;  // in ofport order
  const PortConfig* by_ofport(uint32_t ofport) const;
  const PortConfig* by_dp_port(uint16_t dp_port) const;
  const PortConfig* by_name(std::string_view name) const;
};

struct FlowMod {
  enum class Command : uint8_t { add, modify, modify_strict, del, del_strict };
  Command command = Command::add;
  flow::OfFlow flow;                   // match, RuleMeta (priority, table, cookie...), actions text
  flow::OfActions actions;             // parsed actions (add / modify)
  uint32_t out_port = flow::kOfppNone;  // del: only rules that output to this port
  // The text said cookie=V/M (a selection), not cookie=V (a new cookie).
  // A meta.cookie_mask other than all-ones counts as a mask too.
  bool cookie_has_mask = false;
};

struct FlowModResult {
  size_t added = 0, modified = 0, deleted = 0;
};

class Bridge {
 public:
  Bridge(std::string name, datapath::Rcu* rcu);
  ~Bridge();
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;

  const std::string& name() const { return name_; }

  // --- readers (lock-free; hold results only until the next quiescent point) ---
  std::shared_ptr<const PortMap> ports() const { return std::atomic_load(&ports_); }
  // The bridge-wide published version (one for all 255 tables, so a bundle
  // across tables appears at once): pass it to table(i).lookup().
  Version version() const { return version_.load(std::memory_order_acquire); }
  const Classifier& table(uint8_t id) const { return *tables_[id]; }
  // Whether datapath port `dp_port`'s link is up (the bundle() action's
  // member choice); true when no probe was set (unit tests).
  bool port_link_up(uint16_t dp_port) const { return !link_probe_ || link_probe_(dp_port); }
  MacLearning& mac() { return mac_; }
  const MacLearning& mac() const { return mac_; }
  // Bumped by every rule change (after publish): the revalidator compares.
  uint64_t rules_generation() const { return rules_gen_.load(std::memory_order_acquire); }
  // The rules added or removed (a modify or a replacing add is both: the
  // old rule removed, its successor added) since generation `since`: what
  // lets the revalidator re-translate only the flows a change can affect
  // (ofproto/xlate_deps.h). `rule` identifies the rule for a removal (only
  // compared, never read: it may be freed by the time someone looks).
  // False when the log no longer reaches back that far, or a port changed
  // since: then everything may have. `upto` (when not null) gets the
  // generation the list is complete up to (read with it, so a change
  // committed after it is left for the next look).
  struct RuleChange {
    uint64_t gen;
    const OfRule* rule;
    flow::Match match;
    uint16_t priority;
    uint8_t table;
    bool removed;  // false: added
  };
  bool changes_since(uint64_t since, std::vector<RuleChange>& out, uint64_t* upto = nullptr) const;
  static constexpr size_t kMaxLoggedChanges = 4096;

  // --- writer (control thread) ---
  // Set once, before the bridge is published (Ofproto::add_bridge): reads
  // the datapath port's link state (any thread).
  void set_link_probe(std::function<bool(uint16_t)> probe) { link_probe_ = std::move(probe); }
  Status add_port(const PortConfig& port);  // ofport 0: the lowest free number
  // Several ports at once (a bond's members), all or none: ofport 0 gets
  // the lowest free number; `finish`, when given, sees the ports with
  // their numbers before they are published and may complete them (the
  // bond links) or refuse (nothing changes).
  Status add_ports(std::vector<PortConfig> add,
                   const std::function<Status(std::vector<PortConfig>&)>& finish = nullptr);
  // Edits the ports as one new snapshot (all or nothing: an error from
  // `edit` publishes nothing); translation is told (as for a port change).
  Status edit_ports(const std::function<Status(std::vector<PortConfig>&)>& edit);
  // Something translation reads outside the rules changed (a bond's
  // enabled members or active member): every installed flow of this
  // bridge is re-translated by the next revalidation round.
  void invalidate_translations() { port_changed(); }
  Status set_port_vlan(std::string_view name, VlanMode mode, uint16_t tag, std::vector<uint16_t> trunks);
  // Records a port's mtu_request (Ofproto::set_mtu_request applies it to the datapath port).
  Status set_port_mtu_request(std::string_view name, std::optional<uint32_t> mtu);
  // The Interface's rx queue settings as stored (the datapath applies them).
  Status set_port_queues(std::string_view name, const std::string& rxq_affinity, std::optional<uint16_t> n_rxq);
  // The same with vlan's vlan_mode, tag, trunks, vlan_mode_set and tag_set.
  Status set_port_vlan(std::string_view name, const PortConfig& vlan);
  Status del_port(std::string_view name);  // its rules stay (as in OVS); its MACs are forgotten

  // One flow-mod, applied as its own version. Errors leave the tables unchanged.
  Result<FlowModResult> flow_mod(const FlowMod& fm);
  // Several, all in one version: all applied or none. The first error is
  // returned, prefixed "flow-mod I of N: "; or, with `failed`, unprefixed
  // and its 0-based index stored there.
  Result<FlowModResult> bundle(std::span<const FlowMod> fms, size_t* failed = nullptr);

  // Rules matching `filter` loosely (or strictly with `priority`), in table
  // `table` (kOfTableAll: every table), visible now; sorted by table, then
  // priority descending (ovs-ofctl dump-flows order is unspecified; sorted is
  // what `--sort`-less users can diff).
  static constexpr uint8_t kOfTableAll = 255;
  std::vector<const OfRule*> dump(const flow::Match* filter, uint8_t table = kOfTableAll,
                                  std::optional<uint16_t> strict_priority = std::nullopt) const;
  size_t n_rules() const;

  // Removes rules whose idle or hard timeout passed (idle: since the last
  // packet or the add, whichever is later; hard: since the add or the last
  // modify), as one version; returns how many.
  size_t expire(uint64_t now_ns);

  // Erases and retires the removed rules whose grace period has passed
  // (see "Removal protocol"). Call after Rcu::reclaim(); cheap when idle.
  void reclaim();

  static constexpr size_t kMaxRules = 1'000'000;

 private:
  struct Txn;
  struct Graveyard;
  Status apply(const FlowMod& fm, Txn& txn);
  void commit(Txn& txn);
  void rollback(Txn& txn);
  void bury(std::vector<OfRule*> rules);

  std::string name_;
  std::function<bool(uint16_t)> link_probe_;
  datapath::Rcu* rcu_;
  std::shared_ptr<const PortMap> ports_;
  std::array<std::unique_ptr<Classifier>, kNumTables> tables_;
  MacLearning mac_;
  std::atomic<Version> version_{kVersionMin};
  std::atomic<uint64_t> rules_gen_{0};
  // Change log (writer appends, the revalidator reads; no PMD involved).
  mutable std::mutex changes_mu_;
  std::deque<RuleChange> changes_;
  uint64_t changes_floor_ = 0;  // changes at or below this generation are not listed
  void port_changed();          // bumps rules_gen_; the log can't describe it
  size_t n_rules_ = 0;                    // visible in version()
  std::shared_ptr<Graveyard> graveyard_;  // removed rules waiting for erase
};

}  // namespace keel::ofproto

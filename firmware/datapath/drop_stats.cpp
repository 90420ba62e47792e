// Drop reasons' names and the readers of DropStats (drop_stats.h).
#include "datapath/drop_stats.h"

#include <string>

namespace keel::datapath {

namespace {

struct ReasonInfo {
  const char* name;
  const char* coverage;  // Open vSwitch 3.1's coverage counter, or keel's ("keel_drop_...")
  const char* help;
};

// In DropReason order, up to kTnlPopFirst.
constexpr ReasonInfo kInfo[] = {
    {"none", "", ""},
    {"runt", "datapath_drop_rx_invalid_packet", "shorter than an Ethernet header (14 bytes)"},
    {"upcall_lost", "datapath_drop_upcall_error", "a miss found no upcall record (or budget, or slow path)"},
    {"userspace_lost", "datapath_drop_userspace_action_error",
     "a userspace() packet found no upcall record or slow-path queue room"},
    {"translate_error", "keel_drop_translate_error", "the slow path answered without actions (error, or stopping)"},
    {"drop_action", "drop_action_of_pipeline", "the rules (or NORMAL) send it nowhere"},
    {"no_bridge", "drop_action_bridge_not_found", "its port is in no bridge"},
    {"tnl_no_port", "keel_drop_tnl_no_port", "decapsulated, and no tunnel port takes its VNI/key/remote"},
    {"recursion_too_deep", "drop_action_recursion_too_deep", "translation: resubmits nested too deep"},
    {"too_many_resubmit", "drop_action_too_many_resubmit", "translation: too many resubmits"},
    {"no_recirc_context", "drop_action_no_recirculation_context", "translation: a recirc_id nothing knows"},
    {"actions_too_long", "keel_drop_actions_too_long", "translation: the datapath action list grew too long"},
    {"invalid_tunnel_metadata", "drop_action_invalid_tunnel_metadata", "translation: Geneve options the TLV map refuses"},
    {"tnl_neigh_miss", "keel_drop_tnl_neigh_miss", "tunnel output: next hop not in the neighbour cache (request sent)"},
    {"tnl_output_failed", "keel_drop_tnl_output_failed", "tunnel output: no route, bridge address or header"},
    {"recirc_too_deep", "datapath_drop_recirc_error", "recirculated too many times"},
    {"recirc_queue_full", "keel_drop_recirc_queue_full", "a burst's recirculation queue was full"},
    {"tx_batch_full", "keel_drop_tx_batch_full", "an output batch was full"},
    {"invalid_port", "datapath_drop_invalid_port", "output to a port that does not exist"},
    {"invalid_bond", "datapath_drop_invalid_bond", "lb_output to a bond with no bucket table"},
    {"bond_no_member", "keel_drop_bond_no_member", "lb_output bucket with no live member (members down)"},
    {"tnl_push_no_headroom", "datapath_drop_tunnel_push_error", "tnl_push: no headroom for the tunnel header"},
    {"vlan_no_headroom", "keel_drop_vlan_no_headroom", "push_vlan: no headroom for the tag"},
    {"pool_exhausted", "keel_drop_pool_exhausted", "a copy (flood, clone) found no free packet buffer"},
    {"unsupported_action", "keel_drop_unsupported_action", "an action this build cannot run"},
    {"stopped", "keel_drop_stopped", "discarded when its PMD or the slow path stopped"},
    {"controller_queue_full", "packet_in_overflow", "a packet-in the controller queue had no room for"},
    {"hw_drop", "keel_drop_hw_rule", "a full-offload hardware rule dropped it (no PMD saw it)"},
};
static_assert(std::size(kInfo) == static_cast<size_t>(DropReason::kTnlPopFirst), "one entry per reason");

struct TnlPopNames {
  std::string name[packet::kTnlPopResults], help[packet::kTnlPopResults];
  TnlPopNames() {
    for (unsigned r = 1; r < packet::kTnlPopResults; ++r) {
      const char* n = packet::tnl_pop_result_name(static_cast<packet::TnlPopResult>(r));
      name[r] = std::string("tnl_pop_") + n;
      help[r] = std::string("tnl_pop refused the frame: ") + n;
    }
  }
};
const TnlPopNames& tnl_pop_names() {
  static const TnlPopNames n;
  return n;
}

// The TnlPopResult of a tnl_pop reason, 0 for the others.
unsigned tnl_pop_result(DropReason r) {
  const unsigned v = static_cast<unsigned>(r), first = static_cast<unsigned>(DropReason::kTnlPopFirst);
  return v >= first && v < kDropReasons ? v - first + 1 : 0;
}

}  // namespace

std::string_view drop_reason_name(DropReason r) {
  if (const unsigned t = tnl_pop_result(r)) return tnl_pop_names().name[t];
  const unsigned v = static_cast<unsigned>(r);
  return v < std::size(kInfo) ? kInfo[v].name : "?";
}

std::string_view drop_reason_coverage(DropReason r) {
  if (const unsigned t = tnl_pop_result(r))
    return static_cast<packet::TnlPopResult>(t) == packet::TnlPopResult::kNoVport ? "datapath_drop_invalid_tnl_port"
                                                                                  : "datapath_drop_tunnel_pop_error";
  const unsigned v = static_cast<unsigned>(r);
  return v < std::size(kInfo) ? kInfo[v].coverage : "";
}

std::string_view drop_reason_help(DropReason r) {
  if (const unsigned t = tnl_pop_result(r)) return tnl_pop_names().help[t];
  const unsigned v = static_cast<unsigned>(r);
  return v < std::size(kInfo) ? kInfo[v].help : "";
}

void DropTotals::add(const DropTotals& o) {
  for (unsigned p = 0; p < kDropStatsPorts; ++p) {
    ports[p].forwarded += o.ports[p].forwarded;
    ports[p].slow_path += o.ports[p].slow_path;
    ports[p].in_flight += o.ports[p].in_flight;
    for (unsigned r = 0; r < kDropReasons; ++r) ports[p].dropped[r] += o.ports[p].dropped[r];
  }
  for (unsigned r = 0; r < kDropReasons; ++r) instances[r] += o.instances[r];
}

void DropStats::read(DropTotals& out) const {
  constexpr auto relaxed = std::memory_order_relaxed;
  for (unsigned p = 0; p < kDropStatsPorts; ++p) {
    const Row& row = ports_[p];
    DropTotals::Port& o = out.ports[p];
    o.forwarded += row.forwarded.load(relaxed);
    o.slow_path += row.slow_path.load(relaxed);
    o.in_flight += row.in_flight.load(relaxed);
    for (unsigned r = 0; r < kDropReasons; ++r) o.dropped[r] += row.dropped[r].load(relaxed);
  }
  for (unsigned r = 0; r < kDropReasons; ++r) out.instances[r] += instances_[r].load(relaxed);
}

}  // namespace keel::datapath

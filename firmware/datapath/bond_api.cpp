// Datapath's bond and control-plane packet API (datapath.h, bond_table.h).
// STUB until the datapath bond work lands: every call fails or reports
// nothing, so that the slow path can be built against the interface.
#include "datapath/datapath.h"

namespace keel::datapath {

Status Datapath::bond_set(uint32_t, const BondMembers&) {
  return error(Errc::unsupported, "lb_output bonds: not in this build yet");
}
Status Datapath::bond_del(uint32_t) { return error(Errc::unsupported, "lb_output bonds: not in this build yet"); }
std::vector<uint32_t> Datapath::bond_ids() const { return {}; }
std::optional<BondBucketStats> Datapath::bond_stats(uint32_t) const { return std::nullopt; }
std::vector<PmdBondView> Datapath::bond_dump() const { return {}; }
Status Datapath::send_packet(uint16_t, std::span<const uint8_t>) {
  return error(Errc::unsupported, "control-plane packets: not in this build yet");
}

}  // namespace keel::datapath

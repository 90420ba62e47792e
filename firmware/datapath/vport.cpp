// Datapath virtual ports (datapath.h, "Virtual ports"): tunnel and
// internal ports, which have no hal::Port.
//
// Thread-safety: add_vport/del_vport on the control thread; the table is
// guarded by vport_mu_, which no PMD takes; the PMDs read only
// vport_info_ (one atomic per id, release store here, acquire load there).
#include <string>

#include "datapath/datapath.h"

namespace keel::datapath {

const char* vport_type_name(VportType t) {
  switch (t) {
    case VportType::internal: return "internal";
    case VportType::vxlan: return "vxlan";
    case VportType::geneve: return "geneve";
    case VportType::gre: return "gre";
  }
  return "?";
}

std::string tunnel_vport_name(VportType t, uint16_t udp_port) {
  switch (t) {
    case VportType::vxlan: return "vxlan_sys_" + std::to_string(udp_port);
    case VportType::geneve: return "genev_sys_" + std::to_string(udp_port);
    case VportType::gre: return "gre_sys";
    case VportType::internal: break;
  }
  return {};
}

Result<uint16_t> Datapath::add_vport(std::string name, VportType type, uint16_t udp_port) {
  const bool udp = type == VportType::vxlan || type == VportType::geneve;
  if (name.empty()) return invalid("vport: empty name");
  if (udp && udp_port == 0) return invalid("vport " + name + ": a " + vport_type_name(type) + " vport needs a UDP port");
  if (!udp && udp_port != 0) return invalid("vport " + name + ": a " + vport_type_name(type) + " vport has no UDP port");
  if (find_port(name)) return error(Errc::already_exists, "port " + name + " exists");
  std::lock_guard lk(vport_mu_);
  for (const auto& v : vports_)
    if (v && v->name == name) return error(Errc::already_exists, "vport " + name + " exists");
  for (uint16_t id = 1; id < kMaxPorts; ++id) {
    if (ports_[id] || vports_[id]) continue;
    vports_[id] = Vport{id, std::move(name), type, udp_port};
    vport_info_[id].store((uint32_t{static_cast<uint8_t>(type)} + 1) << 16 | udp_port, std::memory_order_release);
    return id;
  }
  return error(Errc::resource_exhausted, "too many ports");
}

Status Datapath::del_vport(uint16_t id) {
  std::lock_guard lk(vport_mu_);
  if (id >= kMaxPorts || !vports_[id]) return error(Errc::not_found, "no vport " + std::to_string(id));
  vport_info_[id].store(0, std::memory_order_release);
  vports_[id].reset();
  return {};
}

std::optional<Vport> Datapath::vport(uint16_t id) const {
  std::lock_guard lk(vport_mu_);
  if (id >= kMaxPorts) return std::nullopt;
  return vports_[id];
}

std::optional<Vport> Datapath::find_vport(std::string_view name) const {
  std::lock_guard lk(vport_mu_);
  for (const auto& v : vports_)
    if (v && v->name == name) return v;
  return std::nullopt;
}

std::vector<Vport> Datapath::vports() const {
  std::lock_guard lk(vport_mu_);
  std::vector<Vport> out;
  for (const auto& v : vports_)
    if (v) out.push_back(*v);
  return out;
}

}  // namespace keel::datapath

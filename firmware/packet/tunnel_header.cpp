// Tunnel outer headers: build, finish per packet, parse (tunnel_header.h).
#include "packet/tunnel_header.h"

namespace keel::packet {

Result<TunnelHeader> build_tunnel_header(const TunnelHeaderSpec&) {
  return error(Errc::unsupported, "tunnel headers: not implemented yet");
}

Status check_tunnel_header(TnlType, std::span<const uint8_t> header) {
  if (header.size() < sizeof(EthHeader) || header.size() > kMaxTunnelHeaderLen)
    return invalid("header length " + std::to_string(header.size()) + " out of range");
  return {};
}

void finish_tunnel_push(uint8_t*, uint32_t, TnlType, uint32_t, uint32_t) noexcept {}

const char* tnl_pop_result_name(TnlPopResult r) noexcept {
  switch (r) {
    case TnlPopResult::kOk: return "ok";
    case TnlPopResult::kTruncated: return "truncated";
    case TnlPopResult::kNotIp: return "not_ip";
    case TnlPopResult::kBadIpHeader: return "bad_ip_header";
    case TnlPopResult::kBadIpChecksum: return "bad_ip_csum";
    case TnlPopResult::kIpFragment: return "ip_fragment";
    case TnlPopResult::kWrongProto: return "wrong_proto";
    case TnlPopResult::kWrongPort: return "wrong_port";
    case TnlPopResult::kBadUdpChecksum: return "bad_udp_csum";
    case TnlPopResult::kNoVport: return "no_vport";
    case TnlPopResult::kBadVxlanFlags: return "bad_vxlan_flags";
    case TnlPopResult::kBadGeneve: return "bad_geneve";
    case TnlPopResult::kBadGeneveOpts: return "bad_geneve_opts";
    case TnlPopResult::kBadGre: return "bad_gre";
    case TnlPopResult::kBadGreChecksum: return "bad_gre_csum";
    case TnlPopResult::kCount: break;
  }
  return "?";
}

TnlPopResult parse_tunnel_header(TnlPopKind, uint16_t, const uint8_t*, uint32_t, TnlPopInfo&) noexcept {
  return TnlPopResult::kTruncated;
}

}  // namespace keel::packet

// Fuzz target: tnl_pop's decapsulation (packet/tunnel_header.h,
// parse_tunnel_header) on arbitrary bytes never reads past the frame (the
// input is copied into a buffer of its exact size, so ASan sees any
// overread) or crashes, and what it accepts is consistent: the outer length
// fits the frame, the options fit the key, and the tunnel metadata names an
// outer destination. Accepted VXLAN/GRE packets re-encapsulated from the
// metadata with build_tunnel_header + finish_tunnel_push decapsulate again
// to the same metadata (the two halves agree).
//
// Input: byte 0 picks the vport kind (low 2 bits: vxlan, geneve, gre) and
// whether the UDP port is the default (bit 2) or bytes 1-2; the rest is
// the frame.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "packet/tunnel_header.h"

using namespace keel;
using namespace keel::packet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const unsigned k = data[0] & 3u;
  if (k == 3) return 0;
  const TnlPopKind kind = k == 0 ? TnlPopKind::kVxlan : k == 1 ? TnlPopKind::kGeneve : TnlPopKind::kGre;
  const uint16_t port = (data[0] & 4u) ? static_cast<uint16_t>(data[1] << 8 | data[2])
                        : k == 1       ? kGeneveDefaultPort
                                       : kVxlanDefaultPort;
  if (port == 0) return 0;  // no vport listens on UDP port 0 (Datapath::add_vport)
  const size_t n = size - 3;
  auto buf = std::make_unique<uint8_t[]>(n ? n : 1);
  if (n) std::memcpy(buf.get(), data + 3, n);

  TnlPopInfo info;
  const TnlPopResult r = parse_tunnel_header(kind, port, buf.get(), static_cast<uint32_t>(n), info);
  if (static_cast<unsigned>(r) >= kTnlPopResults) abort();
  if (r != TnlPopResult::kOk) return 0;
  if (info.outer_len > n || info.outer_len < 14 + 20 + 4) abort();
  if (info.tunnel.opt_len > kMaxKeyedTunOptWords * 8 || (info.tunnel.opt_len && kind != TnlPopKind::kGeneve))
    abort();
  if (!info.tunnel.is_set()) abort();

  // Re-encapsulate the inner frame from the metadata and decapsulate again.
  const bool v6 = info.tunnel.ipv4_dst == 0;
  TunnelHeaderSpec s;
  s.type = kind == TnlPopKind::kVxlan ? TnlType::kVxlan : kind == TnlPopKind::kGeneve ? TnlType::kGeneve : TnlType::kGre;
  s.ipv6 = v6;
  s.ipv4_src = info.tunnel.ipv4_src;
  s.ipv4_dst = info.tunnel.ipv4_dst;
  s.ipv6_src = info.tunnel.ipv6_src;
  s.ipv6_dst = info.tunnel.ipv6_dst;
  s.tos = info.tunnel.tos;
  s.ttl = info.tunnel.ttl;
  s.udp_dst = port;
  s.csum = (info.tunnel.flags & flow::kTunCsum) != 0;
  s.key_present = (info.tunnel.flags & flow::kTunKey) != 0;
  uint8_t id[8];
  std::memcpy(id, &info.tunnel.tun_id, 8);
  s.key = static_cast<uint32_t>(id[4]) << 24 | static_cast<uint32_t>(id[5]) << 16 | static_cast<uint32_t>(id[6]) << 8 | id[7];
  s.oam = (info.tunnel.flags & flow::kTunOam) != 0;
  s.geneve_opts = std::span<const uint8_t>(info.opts, info.tunnel.opt_len);
  auto h = build_tunnel_header(s);
  if (!h.ok()) abort();  // everything a good packet carries can be sent again
  if (!check_tunnel_header(h->type, h->span()).ok()) abort();
  const size_t inner = n - info.outer_len;
  if (h->len + inner > 65535 - 14) return 0;
  std::vector<uint8_t> f(h->span().begin(), h->span().end());
  f.insert(f.end(), buf.get() + info.outer_len, buf.get() + n);
  finish_tunnel_push(f.data(), static_cast<uint32_t>(f.size()), h->type, h->len, 0x9e3779b9u);
  TnlPopInfo again;
  if (parse_tunnel_header(kind, port, f.data(), static_cast<uint32_t>(f.size()), again) != TnlPopResult::kOk) abort();
  if (again.outer_len != h->len) abort();
  TunnelMetadata a = again.tunnel, b = info.tunnel;
  a.tp_src = b.tp_src = 0;  // the source port comes from the hash
  if (!(a == b)) abort();
  if (std::memcmp(again.opts, info.opts, info.tunnel.opt_len) != 0) abort();
  return 0;
}

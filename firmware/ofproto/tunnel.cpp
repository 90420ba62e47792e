// Tunnel ports, bridge addresses, routes, neighbours, ARP/ND frames
// (tunnel.h says who calls what and from which thread).
#include "ofproto/tunnel.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "flow/flow_text.h"
#include "packet/headers.h"

namespace keel::ofproto {

namespace {

flow::be64 hton64(uint64_t v) {
  uint64_t r = 0;
  for (int i = 0; i < 8; ++i) r = (r << 8) | ((v >> (8 * i)) & 0xff);
  return r;
}

// A 128-bit mask of `bits` leading ones.
flow::In6Addr mask_of(unsigned bits) {
  flow::In6Addr m{};
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned b = bits > 8 * i ? std::min(8u, bits - 8 * i) : 0;
    m.b[i] = static_cast<uint8_t>(b ? 0xff << (8 - b) : 0);
  }
  return m;
}

IpAddr bitand_(const IpAddr& a, const flow::In6Addr& m) {
  IpAddr r = a;
  for (int i = 0; i < 16; ++i) r.a.b[i] &= m.b[i];
  return r;
}

// plen in v6-mapped terms.
unsigned mapped_plen(const IpPrefix& p) { return p.addr.is_v4() ? p.plen + 96u : p.plen; }

bool parse_u64(std::string_view s, uint64_t max, uint64_t& out, int base = 10) {
  if (s.empty() || s.size() > 24) return false;
  std::string t(s);
  if (t[0] == '-' || t[0] == '+' || t[0] == ' ') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(t.c_str(), &end, base);
  if (*end || errno || v > max) return false;
  out = v;
  return true;
}

}  // namespace

// --- addresses ---------------------------------------------------------------

IpAddr IpAddr::v4(flow::be32 addr) {
  IpAddr r;
  r.a.b[10] = r.a.b[11] = 0xff;
  std::memcpy(r.a.b + 12, &addr, 4);
  return r;
}
IpAddr IpAddr::v6(const flow::In6Addr& addr) { return IpAddr{addr}; }

bool IpAddr::is_v4() const {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(a.b, kPrefix, 12) == 0;
}
flow::be32 IpAddr::v4_addr() const {
  flow::be32 v = 0;
  if (is_v4()) std::memcpy(&v, a.b + 12, 4);
  return v;
}
bool IpAddr::is_zero() const {
  static constexpr uint8_t kZero[16] = {};
  return std::memcmp(a.b, kZero, 16) == 0;
}
bool IpAddr::is_multicast() const { return is_v4() ? (a.b[12] & 0xf0) == 0xe0 : a.b[0] == 0xff; }

std::optional<IpAddr> IpAddr::parse(std::string_view s) {
  if (s.empty() || s.size() > 45) return std::nullopt;
  const std::string t(s);
  if (t.find(':') == std::string::npos) {
    in_addr v4{};
    if (inet_pton(AF_INET, t.c_str(), &v4) != 1) return std::nullopt;
    return IpAddr::v4(v4.s_addr);
  }
  flow::In6Addr v6{};
  if (inet_pton(AF_INET6, t.c_str(), v6.b) != 1) return std::nullopt;
  return IpAddr::v6(v6);
}

std::string IpAddr::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (is_v4()) {
    inet_ntop(AF_INET, a.b + 12, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, a.b, buf, sizeof buf);
  }
  return buf;
}

std::optional<IpPrefix> IpPrefix::parse(std::string_view s) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto ip = IpAddr::parse(s.substr(0, slash));
  if (!ip) return std::nullopt;
  uint64_t plen = 0;
  if (!parse_u64(s.substr(slash + 1), ip->is_v4() ? 32 : 128, plen)) return std::nullopt;
  return IpPrefix{*ip, static_cast<uint8_t>(plen)};
}

std::string IpPrefix::to_string() const { return addr.to_string() + "/" + std::to_string(plen); }
IpPrefix IpPrefix::network() const { return IpPrefix{bitand_(addr, mask_of(mapped_plen(*this))), plen}; }
bool IpPrefix::contains(const IpAddr& ip) const {
  if (ip.is_v4() != addr.is_v4()) return false;
  const flow::In6Addr m = mask_of(mapped_plen(*this));
  return bitand_(ip, m) == bitand_(addr, m);
}

std::optional<flow::EthAddr> parse_mac(std::string_view s) {
  if (s.size() != 17) return std::nullopt;
  flow::EthAddr m{};
  for (int i = 0; i < 6; ++i) {
    if (i && s[3 * i - 1] != ':') return std::nullopt;
    uint64_t v = 0;
    if (!std::isxdigit(static_cast<unsigned char>(s[3 * i])) ||
        !std::isxdigit(static_cast<unsigned char>(s[3 * i + 1])) ||
        !parse_u64(s.substr(3 * i, 2), 255, v, 16))
      return std::nullopt;
    m.b[i] = static_cast<uint8_t>(v);
  }
  return m;
}

std::string format_mac(const flow::EthAddr& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m.b[0], m.b[1], m.b[2], m.b[3], m.b[4],
                m.b[5]);
  return buf;
}

// --- tunnel ports ----------------------------------------------------------------

std::string_view tunnel_type_name(TunnelType t) {
  switch (t) {
    case TunnelType::vxlan:
      return "vxlan";
    case TunnelType::geneve:
      return "geneve";
    case TunnelType::gre:
      return "gre";
  }
  return "?";
}

std::optional<TunnelType> parse_tunnel_type(std::string_view s) {
  if (s == "vxlan") return TunnelType::vxlan;
  if (s == "geneve") return TunnelType::geneve;
  if (s == "gre") return TunnelType::gre;
  return std::nullopt;
}

uint8_t ovs_tnl_type(TunnelType t, bool ipv6_underlay) {
  switch (t) {
    case TunnelType::vxlan:
      return kOvsTnlTypeVxlan;
    case TunnelType::geneve:
      return kOvsTnlTypeGeneve;
    case TunnelType::gre:
      return ipv6_underlay ? kOvsTnlTypeIp6Gre : kOvsTnlTypeGre;
  }
  return 0;
}

uint16_t default_dst_port(TunnelType t) {
  return t == TunnelType::vxlan ? 4789 : t == TunnelType::geneve ? 6081 : 0;
}

std::string tunnel_vport_name(TunnelType t, uint16_t dst_port) {
  switch (t) {
    case TunnelType::vxlan:
      return "vxlan_sys_" + std::to_string(dst_port);
    case TunnelType::geneve:
      return "genev_sys_" + std::to_string(dst_port);
    case TunnelType::gre:
      return "gre_sys";
  }
  return {};
}

bool TunnelOptions::ipv6() const {
  if (!remote_ip.is_zero()) return !remote_ip.is_v4();
  if (!local_ip.is_zero()) return !local_ip.is_v4();
  return false;
}

TunnelOptions default_tunnel_options(TunnelType t) {
  TunnelOptions o;
  o.type = t;
  o.dst_port = default_dst_port(t);
  return o;
}

Status apply_tunnel_option(std::string_view port, std::string_view key, std::string_view value,
                           TunnelOptions& o) {
  const std::string p(port), ty(tunnel_type_name(o.type)), k(key), v(value);
  TunnelOptions n = o;
  auto key_value = [&](TunnelKey& tk) -> Status {
    uint64_t x = 0;
    if (v == "flow") {
      tk = TunnelKey{true, true, 0};
    } else if (parse_u64(v, UINT64_MAX, x, 0)) {
      // VXLAN and GENEVE carry 24 bits, GRE 32 (OVS truncates silently; keel refuses).
      const uint64_t max = o.type == TunnelType::gre ? 0xffffffffu : 0xffffffu;
      if (x > max)
        return invalid(p + ": " + k + "=" + v + ": a " + ty + " key is 0.." + std::to_string(max) +
                       " or flow");
      tk = TunnelKey{true, false, x};
    } else {
      return invalid(p + ": " + k + "=" + v + ": a number or flow");
    }
    return {};
  };
  if (k == "remote_ip" || k == "local_ip") {
    const bool remote = k == "remote_ip";
    bool& fl = remote ? n.remote_flow : n.local_flow;
    IpAddr& ip = remote ? n.remote_ip : n.local_ip;
    if (v == "flow") {
      fl = true;
      ip = {};
    } else {
      auto a = IpAddr::parse(v);
      if (!a || a->is_zero() || (a->is_v4() && a->v4_addr() == 0))
        return invalid(p + ": bad " + ty + " '" + k + "'");
      if (remote && a->is_multicast()) return invalid(p + ": multicast remote_ip=" + v + " not allowed");
      fl = false;
      ip = *a;
    }
  } else if (k == "tos") {
    if (v == "inherit") {
      n.tos_inherit = true;
    } else {
      uint64_t x = 0;
      if (!parse_u64(v, 255, x, 0) || (x & ~uint64_t{0xfc})) return invalid(p + ": invalid TOS " + v);
      n.tos_inherit = false;
      n.tos = static_cast<uint8_t>(x);
    }
  } else if (k == "ttl") {
    if (v == "inherit") {
      n.ttl_inherit = true;
    } else {
      uint64_t x = 0;
      if (!parse_u64(v, 255, x, 10)) return invalid(p + ": invalid TTL " + v + " (0..255 or inherit)");
      n.ttl_inherit = false;
      n.ttl = x ? static_cast<uint8_t>(x) : 64;  // OVS: ttl 0 means DEFAULT_TTL
    }
  } else if (k == "dst_port" && o.type != TunnelType::gre) {
    uint64_t x = 0;
    if (!parse_u64(v, 65535, x, 10) || x == 0) return invalid(p + ": invalid dst_port " + v + " (1..65535)");
    n.dst_port = static_cast<uint16_t>(x);
  } else if (k == "csum") {
    if (v != "true" && v != "false") return invalid(p + ": csum=" + v + ": true or false");
    n.csum = v == "true";
  } else if (k == "df_default") {
    if (v != "true" && v != "false") return invalid(p + ": df_default=" + v + ": true or false");
    n.df_default = v != "false";
  } else if (k == "key") {
    TunnelKey tk;
    if (Status st = key_value(tk); !st.ok()) return st;
    // key sets both unless in_key / out_key was given (OVS reads them first).
    n.in_key = tk;
    n.out_key = tk;
  } else if (k == "in_key") {
    if (Status st = key_value(n.in_key); !st.ok()) return st;
  } else if (k == "out_key") {
    if (Status st = key_value(n.out_key); !st.ok()) return st;
  } else {
    return invalid(p + ": unknown " + ty + " argument '" + k +
                   "' (keel takes remote_ip, local_ip, key, in_key, out_key, " +
                   (o.type == TunnelType::gre ? "" : "dst_port, ") + "tos, ttl, csum, df_default)");
  }
  o = n;
  return {};
}

Status check_tunnel_options(std::string_view port, const TunnelOptions& o) {
  const std::string p(port), ty(tunnel_type_name(o.type));
  if (!o.has_remote()) return invalid(p + ": " + ty + " type requires valid 'remote_ip' argument");
  if (o.local_flow && !o.remote_flow)
    return invalid(p + ": " + ty + " type requires 'remote_ip=flow' with 'local_ip=flow'");
  if (!o.remote_ip.is_zero() && !o.local_ip.is_zero() && o.remote_ip.is_v4() != o.local_ip.is_v4())
    return invalid(p + ": 'remote_ip' and 'local_ip' has to be of the same address family");
  return {};
}

namespace {

// OVS's get_tunnel_config, as (key, value) in its order.
std::vector<std::pair<std::string, std::string>> tunnel_config(const TunnelOptions& o) {
  std::vector<std::pair<std::string, std::string>> kv;
  if (o.remote_flow)
    kv.emplace_back("remote_ip", "flow");
  else if (!o.remote_ip.is_zero())
    kv.emplace_back("remote_ip", o.remote_ip.to_string());
  if (o.local_flow)
    kv.emplace_back("local_ip", "flow");
  else if (!o.local_ip.is_zero())
    kv.emplace_back("local_ip", o.local_ip.to_string());
  auto key_text = [](const TunnelKey& k) { return k.flow ? std::string("flow") : std::to_string(k.value); };
  if (o.in_key.flow && o.out_key.flow) {
    kv.emplace_back("key", "flow");
  } else if (o.in_key.present && o.out_key.present && o.in_key == o.out_key) {
    kv.emplace_back("key", key_text(o.in_key));
  } else {
    if (o.in_key.present) kv.emplace_back("in_key", key_text(o.in_key));
    if (o.out_key.present) kv.emplace_back("out_key", key_text(o.out_key));
  }
  if (o.ttl_inherit)
    kv.emplace_back("ttl", "inherit");
  else if (o.ttl != 64)
    kv.emplace_back("ttl", std::to_string(o.ttl));
  if (o.tos_inherit) {
    kv.emplace_back("tos", "inherit");
  } else if (o.tos) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%x", o.tos);
    kv.emplace_back("tos", buf);
  }
  if (o.type != TunnelType::gre && o.dst_port != default_dst_port(o.type))
    kv.emplace_back("dst_port", std::to_string(o.dst_port));
  if (o.csum) kv.emplace_back("csum", "true");
  if (!o.df_default) kv.emplace_back("df_default", "false");
  return kv;
}

}  // namespace

std::string format_tunnel_options(const TunnelOptions& o) {
  std::string s;
  for (auto& [k, v] : tunnel_config(o)) s += (s.empty() ? "" : " ") + ("options:" + k + "=" + v);
  return s;
}

std::string tunnel_summary(const TunnelOptions& o) {
  auto kv = tunnel_config(o);
  std::sort(kv.begin(), kv.end());
  std::string s(tunnel_type_name(o.type));
  s += ":";
  bool first = true;
  for (auto& [k, v] : kv) {
    s += (first ? " " : ", ") + k + "=" + v;
    first = false;
  }
  return s;
}

// --- the receive side (OVS tnl_find) -------------------------------------------

TunnelTable::TunnelTable(std::vector<std::shared_ptr<const TunnelPort>> ports) : ports_(std::move(ports)) {
  std::sort(ports_.begin(), ports_.end(), [](const auto& a, const auto& b) { return a->name < b->name; });
}

const TunnelPort* TunnelTable::find(std::string_view name) const {
  for (const auto& p : ports_)
    if (p->name == name) return p.get();
  return nullptr;
}

const TunnelPort* TunnelTable::find(const Bridge* bridge, uint32_t ofport) const {
  for (const auto& p : ports_)
    if (p->bridge == bridge && p->ofport == ofport) return p.get();
  return nullptr;
}

namespace {

enum class IpSrc : uint8_t { cfg, any, flow };  // OVS's ip_src_type, in its order

IpSrc ip_src_type(const TunnelOptions& o) {
  return o.local_flow ? IpSrc::flow : o.has_local() ? IpSrc::cfg : IpSrc::any;
}

}  // namespace

const TunnelPort* TunnelTable::duplicate_of(const TunnelOptions& o, std::string_view except) const {
  for (const auto& p : ports_) {
    const TunnelOptions& q = p->options;
    if (p->name == except || q.type != o.type || q.dst_port != o.dst_port) continue;
    if (q.in_key.flow != o.in_key.flow || (!o.in_key.flow && q.in_key.value != o.in_key.value)) continue;
    if (q.remote_flow != o.remote_flow || q.remote_ip != o.remote_ip) continue;
    if (q.local_flow != o.local_flow || q.local_ip != o.local_ip) continue;
    return p.get();
  }
  return nullptr;
}

void tnl_wc_init(const flow::FlowKey& f, flow::FlowKey& wc) {
  static constexpr flow::In6Addr kZero6{};
  const bool v4 = f.tun_ipv4_dst != 0;
  if (!v4 && f.tun_ipv6_dst == kZero6) return;
  wc.tun_id = ~flow::be64{0};
  if (v4) {
    wc.tun_ipv4_src = wc.tun_ipv4_dst = ~flow::be32{0};
  } else {
    std::memset(wc.tun_ipv6_src.b, 0xff, 16);
    std::memset(wc.tun_ipv6_dst.b, 0xff, 16);
  }
  wc.tun_flags = flow::kTunDontFragment | flow::kTunCsum | flow::kTunKey;
  wc.tun_tos = 0xff;
  wc.tun_ttl = 0;
  wc.tun_tp_src = wc.tun_tp_dst = 0;
  const bool ip = f.dl_type == __builtin_bswap16(packet::kEthTypeIpv4) ||
                  f.dl_type == __builtin_bswap16(packet::kEthTypeIpv6);
  if (ip && (f.tun_tos & flow::text::kIpEcnMask) == flow::text::kIpEcnMask) wc.nw_tos |= flow::text::kIpEcnMask;
}

TunnelReceive TunnelTable::receive(const flow::FlowKey& f, flow::FlowKey* wc) const {
  const bool v4 = f.tun_ipv4_dst != 0;
  static constexpr flow::In6Addr kZero6{};
  if (!v4 && f.tun_ipv6_dst == kZero6) return {};
  if (wc) tnl_wc_init(f, *wc);
  const IpAddr tun_src = v4 ? IpAddr::v4(f.tun_ipv4_src) : IpAddr::v6(f.tun_ipv6_src);
  const IpAddr tun_dst = v4 ? IpAddr::v4(f.tun_ipv4_dst) : IpAddr::v6(f.tun_ipv6_dst);
  for (int in_key_flow = 0; in_key_flow < 2; ++in_key_flow) {
    for (int ip_dst_flow = 0; ip_dst_flow < 2; ++ip_dst_flow) {
      for (IpSrc src : {IpSrc::cfg, IpSrc::any, IpSrc::flow}) {
        for (const auto& p : ports_) {
          const TunnelOptions& o = p->options;
          if (p->vport != f.in_port || o.in_key.flow != bool(in_key_flow) ||
              o.remote_flow != bool(ip_dst_flow) || ip_src_type(o) != src)
            continue;
          if (!in_key_flow && hton64(o.in_key.value) != f.tun_id) continue;
          if (!ip_dst_flow && o.remote_ip != tun_src) continue;
          if (src == IpSrc::cfg && o.local_ip != tun_dst) continue;
          return TunnelReceive{p.get(), p->bridge, p->ofport};
        }
      }
    }
  }
  return {};
}

// --- bridge addresses ----------------------------------------------------------

BridgeAddrs::BridgeAddrs(std::vector<BridgeAddr> bridges) : bridges_(std::move(bridges)) {
  std::sort(bridges_.begin(), bridges_.end(),
            [](const BridgeAddr& a, const BridgeAddr& b) { return a.bridge_name < b.bridge_name; });
}

const BridgeAddr* BridgeAddrs::find(std::string_view bridge) const {
  for (const auto& b : bridges_)
    if (b.bridge_name == bridge) return &b;
  return nullptr;
}

const BridgeAddr* BridgeAddrs::by_internal_vport(uint16_t vport) const {
  if (!vport) return nullptr;
  for (const auto& b : bridges_)
    if (b.internal_vport == vport) return &b;
  return nullptr;
}

const BridgeAddr* BridgeAddrs::owner(const IpAddr& ip) const {
  for (const auto& b : bridges_)
    for (const auto& a : b.addrs)
      if (a.addr == ip) return &b;
  return nullptr;
}

flow::EthAddr bridge_default_mac(std::string_view bridge) {
  // FNV-1a of the name; locally administered (0x02), unicast.
  uint64_t h = 1469598103934665603ull;
  for (char c : bridge) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  flow::EthAddr m{};
  m.b[0] = 0x02;
  for (int i = 1; i < 6; ++i) m.b[i] = static_cast<uint8_t>(h >> (8 * (i - 1)));
  return m;
}

// --- routes ------------------------------------------------------------------------

uint32_t Route::priority() const {
  const uint32_t plen = mapped_plen(prefix);
  return local ? plen + 64 : user ? plen + 32 : plen;
}

namespace {

void sort_routes(std::vector<Route>& r) {
  std::stable_sort(r.begin(), r.end(), [](const Route& a, const Route& b) {
    if (a.priority() != b.priority()) return a.priority() > b.priority();
    return a.prefix.addr < b.prefix.addr;
  });
}

// OVS ovs_router_get_netdev_source_address: the bridge's address whose
// subnet holds `dst`, the longest such.
std::optional<IpAddr> source_for(const BridgeAddr& b, const IpAddr& dst) {
  std::optional<IpAddr> best;
  int best_plen = -1;
  for (const IpPrefix& a : b.addrs) {
    if (a.contains(dst) && a.plen > best_plen) {
      best = a.addr;
      best_plen = a.plen;
    }
  }
  return best;
}

}  // namespace

RouteTable::RouteTable(std::vector<Route> routes) : routes_(std::move(routes)) { sort_routes(routes_); }

std::optional<RouteLookup> RouteTable::lookup(const IpAddr& dst) const {
  for (const Route& r : routes_)
    if (r.prefix.contains(dst)) return RouteLookup{r.bridge, r.gw, r.src};
  return std::nullopt;
}

std::string RouteTable::format() const {
  std::string s = "Route Table:\n";
  for (const Route& r : routes_) {
    s += r.user ? "User: " : "Cached: ";
    s += r.prefix.addr.to_string() + "/" + std::to_string(r.prefix.plen);
    s += " dev " + r.bridge;
    if (!r.gw.is_zero()) s += " GW " + r.gw.to_string();
    s += " SRC " + r.src.to_string();
    if (r.local) s += " local";
    s += "\n";
  }
  return s;
}

Result<RouteTable> RouteTable::add_user(const RouteTable& t, const IpPrefix& prefix, std::string_view bridge,
                                        const IpAddr& gw, const BridgeAddrs& addrs) {
  if (!gw.is_zero() && gw.is_v4() != prefix.addr.is_v4())
    return invalid(prefix.addr.is_v4() ? "Invalid pkt_mark or gateway" : "Invalid pkt_mark or IPv6 gateway");
  const BridgeAddr* b = addrs.find(bridge);
  const char* fam = prefix.addr.is_v4() ? "IPv4" : "IPv6";
  std::optional<IpAddr> src;
  if (b) src = source_for(*b, prefix.addr);
  if (!src && b && !gw.is_zero()) src = source_for(*b, gw);
  if (!src)
    return invalid("Error while inserting route: bridge " + std::string(bridge) + " has no " + fam +
                   " address on the network of " + prefix.addr.to_string() +
                   (gw.is_zero() ? "" : " or of gateway " + gw.to_string()) + " (ip-add one first)");
  Route r;
  r.prefix = prefix.network();
  r.bridge = std::string(bridge);
  r.gw = gw;
  r.src = *src;
  r.user = true;
  std::vector<Route> v;
  for (const Route& o : t.routes_)
    if (!(o.user && o.prefix == r.prefix)) v.push_back(o);
  v.push_back(r);
  return RouteTable(std::move(v));
}

Result<RouteTable> RouteTable::del_user(const RouteTable& t, const IpPrefix& prefix) {
  const IpPrefix net = prefix.network();
  std::vector<Route> v;
  bool found = false;
  for (const Route& o : t.routes_) {
    if (o.user && o.prefix == net)
      found = true;
    else
      v.push_back(o);
  }
  if (!found) return error(Errc::not_found, "Not found");
  return RouteTable(std::move(v));
}

RouteTable RouteTable::with_connected(const RouteTable& t, const BridgeAddrs& addrs) {
  std::vector<Route> v;
  for (const Route& o : t.routes_)
    if (o.user) v.push_back(o);
  for (const BridgeAddr& b : addrs.all()) {
    for (const IpPrefix& a : b.addrs) {
      // The kernel's two routes for an address: the local host route and
      // the subnet's (OVS route_table reads both: "Cached: ... local").
      Route host;
      host.prefix = IpPrefix{a.addr, static_cast<uint8_t>(a.addr.is_v4() ? 32 : 128)};
      host.bridge = b.bridge_name;
      host.src = a.addr;
      host.local = true;
      v.push_back(host);
      if (a.plen != host.prefix.plen) {
        Route net;
        net.prefix = a.network();
        net.bridge = b.bridge_name;
        net.src = a.addr;
        bool dup = false;
        for (const Route& o : v)
          if (!o.user && !o.local && o.prefix == net.prefix) dup = true;
        if (!dup) v.push_back(net);
      }
    }
  }
  return RouteTable(std::move(v));
}

// --- neighbours ----------------------------------------------------------------------

NeighborCache::NeighborCache(std::function<uint64_t()> now_ms) : now_ms_(std::move(now_ms)) {
  if (!now_ms_)
    now_ms_ = [] {
      return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now().time_since_epoch())
                                       .count());
    };
}

void NeighborCache::set_static(std::string_view bridge, const IpAddr& ip, const flow::EthAddr& mac) {
  std::lock_guard lk(mu_);
  for (Entry& e : entries_) {
    if (e.bridge == bridge && e.ip == ip) {
      if (e.mac != mac) changed();
      e.mac = mac;
      e.is_static = true;
      return;
    }
  }
  entries_.push_back(Entry{ip, mac, std::string(bridge), true, 0});
  changed();
}

void NeighborCache::learn(std::string_view bridge, const IpAddr& ip, const flow::EthAddr& mac) {
  std::lock_guard lk(mu_);
  const uint64_t exp = now_ms_() + kNeighIdleMs;
  for (Entry& e : entries_) {
    if (e.bridge == bridge && e.ip == ip) {
      if (e.is_static) return;
      if (e.mac != mac) changed();
      e.mac = mac;
      e.expires_ms = exp;
      return;
    }
  }
  entries_.push_back(Entry{ip, mac, std::string(bridge), false, exp});
  changed();
}

std::optional<flow::EthAddr> NeighborCache::lookup(std::string_view bridge, const IpAddr& ip) const {
  std::lock_guard lk(mu_);
  const uint64_t now = now_ms_();
  for (const Entry& e : entries_)
    if (e.bridge == bridge && e.ip == ip && (e.is_static || e.expires_ms > now)) return e.mac;
  return std::nullopt;
}

void NeighborCache::flush(std::string_view bridge) {
  std::lock_guard lk(mu_);
  if (std::erase_if(entries_, [&](const Entry& e) { return bridge.empty() || e.bridge == bridge; })) changed();
}

size_t NeighborCache::age() {
  std::lock_guard lk(mu_);
  const uint64_t now = now_ms_();
  const size_t n = std::erase_if(entries_, [&](const Entry& e) { return !e.is_static && e.expires_ms <= now; });
  if (n) changed();
  return n;
}

bool NeighborCache::snoop(const flow::FlowKey& f, flow::FlowKey* wc, std::string_view bridge,
                          bool allow_update) {
  constexpr flow::be16 kArp = __builtin_bswap16(packet::kEthTypeArp);
  constexpr flow::be16 kIpv6 = __builtin_bswap16(packet::kEthTypeIpv6);
  if (wc) wc->dl_type = 0xffff;
  static constexpr flow::EthAddr kZeroMac{};
  if (f.dl_type == kArp) {
    // OVS tnl_arp_snoop: a gratuitous ARP (spa == tpa) or a reply, sha set.
    if (wc) wc->nw_src = wc->nw_dst = ~flow::be32{0};
    const bool garp = f.nw_src == f.nw_dst;
    if (!garp) {
      if (wc) wc->nw_proto = 0xff;
      if (f.nw_proto != 2) return false;
    }
    if (wc) wc->arp_sha = flow::EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
    if (f.arp_sha == kZeroMac) return false;
    if (allow_update) learn(bridge, IpAddr::v4(f.nw_src), f.arp_sha);
    return true;
  }
  if (f.dl_type == kIpv6) {
    // OVS tnl_nd_snoop: a neighbour advert (code 0) with a target link-layer address.
    if (wc) wc->nw_proto = 0xff;
    if (f.nw_proto != 58) return false;
    if (wc) wc->tp_dst = 0xffff;
    if (f.tp_dst != 0) return false;
    if (wc) wc->tp_src = 0xffff;
    if (f.tp_src != __builtin_bswap16(136)) return false;
    if (wc) wc->arp_tha = flow::EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
    if (f.arp_tha == kZeroMac) return false;
    if (wc) {
      std::memset(wc->ipv6_src.b, 0xff, 16);
      std::memset(wc->ipv6_dst.b, 0xff, 16);
      std::memset(wc->nd_target.b, 0xff, 16);
    }
    if (allow_update) learn(bridge, IpAddr::v6(f.nd_target), f.arp_tha);
    return true;
  }
  return false;
}

std::vector<NeighborCache::Entry> NeighborCache::entries() const {
  std::vector<Entry> v;
  {
    std::lock_guard lk(mu_);
    v = entries_;
  }
  std::sort(v.begin(), v.end(), [](const Entry& a, const Entry& b) {
    return a.bridge != b.bridge ? a.bridge < b.bridge : a.ip < b.ip;
  });
  return v;
}

std::vector<NeighborCache::Entry> NeighborCache::static_entries() const {
  auto v = entries();
  std::erase_if(v, [](const Entry& e) { return !e.is_static; });
  return v;
}

std::string NeighborCache::format() const {
  std::string s =
      "IP                                            MAC                 Bridge\n"
      "==========================================================================\n";
  const uint64_t now = now_ms_();
  for (const Entry& e : entries()) {
    std::string ip = e.ip.to_string();
    if (ip.size() < INET6_ADDRSTRLEN) ip.append(INET6_ADDRSTRLEN - ip.size(), ' ');
    s += ip + format_mac(e.mac) + "   " + e.bridge;
    if (!e.is_static && e.expires_ms <= now) s += " STALE";
    s += "\n";
  }
  return s;
}

// --- the snapshot ------------------------------------------------------------------------

const TunnelState::Vport* TunnelState::vport(uint16_t id) const {
  for (const Vport& v : vports)
    if (v.id == id) return &v;
  return nullptr;
}

std::string TunnelState::format_vports() const {
  std::string s = "Listening ports:\n";
  for (const Vport& v : vports)
    s += v.name + " (" + std::to_string(v.id) + ") ref_cnt=" + std::to_string(v.refs) + "\n";
  return s;
}

// --- ARP / ND frames ---------------------------------------------------------------------

namespace {

struct Bytes {
  std::vector<uint8_t> v;
  void u8(uint8_t x) { v.push_back(x); }
  void u16(uint16_t x) {
    u8(static_cast<uint8_t>(x >> 8));
    u8(static_cast<uint8_t>(x));
  }
  void u32(uint32_t x) {
    u16(static_cast<uint16_t>(x >> 16));
    u16(static_cast<uint16_t>(x));
  }
  void mac(const flow::EthAddr& m) { v.insert(v.end(), m.b, m.b + 6); }
  void raw(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    v.insert(v.end(), b, b + n);
  }
};

std::vector<uint8_t> arp(uint16_t op, const flow::EthAddr& eth_dst, const flow::EthAddr& sha, flow::be32 spa,
                         const flow::EthAddr& tha, flow::be32 tpa) {
  Bytes b;
  b.mac(eth_dst);
  b.mac(sha);
  b.u16(packet::kEthTypeArp);
  b.u16(1);       // Ethernet
  b.u16(0x0800);  // IPv4
  b.u8(6);
  b.u8(4);
  b.u16(op);
  b.mac(sha);
  b.raw(&spa, 4);
  b.mac(tha);
  b.raw(&tpa, 4);
  return std::move(b.v);
}

// An ICMPv6 ND message (type 135/136) with one link-layer address option.
std::vector<uint8_t> nd(uint8_t type, uint32_t rso_flags, const flow::EthAddr& eth_dst,
                        const flow::EthAddr& eth_src, const flow::In6Addr& ip_src,
                        const flow::In6Addr& ip_dst, const flow::In6Addr& target, uint8_t opt_type,
                        const flow::EthAddr& opt_mac) {
  constexpr uint16_t kPayload = 24 + 8;
  Bytes b;
  b.mac(eth_dst);
  b.mac(eth_src);
  b.u16(packet::kEthTypeIpv6);
  b.u32(0x60000000);  // version 6, tclass 0, label 0
  b.u16(kPayload);
  b.u8(58);   // ICMPv6
  b.u8(255);  // hop limit (RFC 4861)
  b.raw(ip_src.b, 16);
  b.raw(ip_dst.b, 16);
  const size_t l4 = b.v.size();
  b.u8(type);
  b.u8(0);
  b.u16(0);  // checksum, below
  b.u32(rso_flags);
  b.raw(target.b, 16);
  b.u8(opt_type);
  b.u8(1);  // 8 bytes
  b.mac(opt_mac);
  // Checksum over the pseudo header and the message.
  uint32_t sum = 0;
  auto add16 = [&sum](const uint8_t* p, size_t n) {
    for (size_t i = 0; i + 1 < n; i += 2) sum += (uint32_t{p[i]} << 8) | p[i + 1];
  };
  add16(ip_src.b, 16);
  add16(ip_dst.b, 16);
  sum += kPayload;
  sum += 58;
  add16(b.v.data() + l4, kPayload);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  const uint16_t csum = static_cast<uint16_t>(~sum);
  b.v[l4 + 2] = static_cast<uint8_t>(csum >> 8);
  b.v[l4 + 3] = static_cast<uint8_t>(csum);
  return std::move(b.v);
}

}  // namespace

std::vector<uint8_t> compose_arp_request(const flow::EthAddr& src_mac, flow::be32 src_ip,
                                         flow::be32 target_ip) {
  return arp(1, flow::EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}, src_mac, src_ip, flow::EthAddr{},
             target_ip);
}

std::vector<uint8_t> compose_arp_reply(const flow::EthAddr& mac, flow::be32 ip, const flow::EthAddr& to_mac,
                                       flow::be32 to_ip) {
  return arp(2, to_mac, mac, ip, to_mac, to_ip);
}

std::vector<uint8_t> compose_nd_solicit(const flow::EthAddr& src_mac, const flow::In6Addr& src_ip,
                                        const flow::In6Addr& target) {
  flow::In6Addr sn{};  // ff02::1:ffXX:XXXX
  sn.b[0] = 0xff;
  sn.b[1] = 0x02;
  sn.b[11] = 0x01;
  sn.b[12] = 0xff;
  sn.b[13] = target.b[13];
  sn.b[14] = target.b[14];
  sn.b[15] = target.b[15];
  const flow::EthAddr dst{{0x33, 0x33, sn.b[12], sn.b[13], sn.b[14], sn.b[15]}};
  return nd(135, 0, dst, src_mac, src_ip, sn, target, 1 /* source link-layer address */, src_mac);
}

std::vector<uint8_t> compose_nd_advert(const flow::EthAddr& mac, const flow::In6Addr& ip,
                                       const flow::EthAddr& to_mac, const flow::In6Addr& to_ip) {
  return nd(136, 0x60000000 /* solicited | override */, to_mac, mac, ip, to_ip, ip,
            2 /* target link-layer address */, mac);
}

}  // namespace keel::ofproto

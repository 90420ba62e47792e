// bundle() and the flow hashes: see bundle.h.
#include "flow/bundle.h"

#include <cstring>

#include "core/hash.h"
#include "flow/flow_text.h"

namespace keel::flow {
namespace {

using namespace text;

bool dl_type_is(const FlowKey& f, uint16_t t) { return f.dl_type == hton16(t); }
bool is_ip_any(const FlowKey& f) { return dl_type_is(f, kEthTypeIp) || dl_type_is(f, kEthTypeIpv6); }

// Hash of `n` bytes at p (zero-padded to whole words).
uint32_t hash_bytes(const void* p, size_t n, uint32_t basis) {
  uint64_t w[8] = {};
  std::memcpy(w, p, n);
  return hash_words64(w, (n + 7) / 8, basis);
}

template <class T>
void set_ones(T& x) {
  std::memset(&x, 0xff, sizeof x);
}

uint64_t xor64(const uint8_t* a, const uint8_t* b) {
  uint64_t x, y;
  std::memcpy(&x, a, 8);
  std::memcpy(&y, b, 8);
  return x ^ y;
}

// The symmetric hashes' shared parts: source XOR destination, so both
// directions of a flow hash alike.
void put_symmetric_addr(const FlowKey& f, uint8_t (&addr)[16]) {
  if (dl_type_is(f, kEthTypeIp)) {
    const be32 a = f.nw_src ^ f.nw_dst;
    std::memcpy(addr, &a, 4);
  } else if (dl_type_is(f, kEthTypeIpv6)) {
    for (int i = 0; i < 16; ++i) addr[i] = f.ipv6_src.b[i] ^ f.ipv6_dst.b[i];
  }
}
void put_symmetric_l2(const FlowKey& f, uint8_t (&eth_addr)[6], be16& vlan_tci, be16& eth_type) {
  for (int i = 0; i < 6; ++i) eth_addr[i] = f.dl_src.b[i] ^ f.dl_dst.b[i];
  for (const VlanHdr& v : f.vlans) vlan_tci ^= v.tci & hton16(kVlanVidMask);
  eth_type = f.dl_type;
}

// flow_hash_symmetric_l4(): L2 through L4, the same in both directions.
uint32_t hash_symmetric_l4(const FlowKey& f, uint32_t basis) {
  struct {
    uint8_t addr[16];
    be16 eth_type;
    be16 vlan_tci;
    be16 tp_port;
    uint8_t eth_addr[6];
    uint8_t ip_proto;
    uint8_t pad[3];
  } s;
  static_assert(sizeof s == 32, "four words");
  std::memset(&s, 0, sizeof s);
  put_symmetric_l2(f, s.eth_addr, s.vlan_tci, s.eth_type);
  // UDP ports are left out: they need not be symmetric in a bidirectional flow.
  put_symmetric_addr(f, s.addr);
  if (is_ip_any(f)) {
    s.ip_proto = f.nw_proto;
    if (f.nw_proto == kProtoTcp || f.nw_proto == kProtoSctp) s.tp_port = f.tp_src ^ f.tp_dst;
  }
  return hash_bytes(&s, sizeof s, basis);
}

// flow_hash_symmetric_l2(): Ethernet addresses, VLAN ids, dl_type.
uint32_t hash_symmetric_l2(const FlowKey& f, uint32_t basis) {
  struct {
    be16 eth_type;
    be16 vlan_tci;
    uint8_t eth_addr[6];
    be16 pad;
  } s;
  static_assert(sizeof s == 12, "three 32-bit words");
  std::memset(&s, 0, sizeof s);
  put_symmetric_l2(f, s.eth_addr, s.vlan_tci, s.eth_type);
  return hash_bytes(&s, sizeof s, basis);
}

// flow_hash_symmetric_l3l4(): addresses, protocol and (TCP, SCTP, and UDP
// when asked) the ports, the same in both directions; non-IP: L2.
uint32_t hash_symmetric_l3l4(const FlowKey& f, uint32_t basis, bool udp) {
  uint32_t h = basis;
  if (dl_type_is(f, kEthTypeIp)) {
    h = hash_add64(h, f.nw_src ^ f.nw_dst);
  } else if (dl_type_is(f, kEthTypeIpv6)) {
    h = hash_add64(h, xor64(f.ipv6_src.b, f.ipv6_dst.b));
    h = hash_add64(h, xor64(f.ipv6_src.b + 8, f.ipv6_dst.b + 8));
  } else {
    return hash_symmetric_l2(f, basis);
  }
  h = hash_add64(h, f.nw_proto);
  if (!(f.nw_frag & kFragMask) &&
      (f.nw_proto == kProtoTcp || f.nw_proto == kProtoSctp || (udp && f.nw_proto == kProtoUdp)))
    h = hash_add64(h, static_cast<uint16_t>(f.tp_src ^ f.tp_dst));
  return hash_finish(h, 24);
}

// flow_hash_symmetric_l3(): addresses and dl_type, the same in both directions.
uint32_t hash_symmetric_l3(const FlowKey& f, uint32_t basis) {
  struct {
    uint8_t addr[16];
    be16 eth_type;
    uint8_t pad[6];
  } s;
  static_assert(sizeof s == 24, "three words");
  std::memset(&s, 0, sizeof s);
  s.eth_type = f.dl_type;
  put_symmetric_addr(f, s.addr);
  return hash_bytes(&s, sizeof s, basis);
}

struct HashFieldsName {
  HashFields fields;
  const char* name;
};
constexpr HashFieldsName kHashFieldsNames[] = {
    {HashFields::eth_src, "eth_src"},
    {HashFields::symmetric_l4, "symmetric_l4"},
    {HashFields::symmetric_l3l4, "symmetric_l3l4"},
    {HashFields::symmetric_l3l4_udp, "symmetric_l3l4+udp"},
    {HashFields::nw_src, "nw_src"},
    {HashFields::nw_dst, "nw_dst"},
    {HashFields::symmetric_l3, "symmetric_l3"},
};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace

const char* to_string(HashFields f) {
  for (const HashFieldsName& n : kHashFieldsNames)
    if (n.fields == f) return n.name;
  return "<unknown>";
}

const char* to_string(BundleAlgorithm a) {
  switch (a) {
    case BundleAlgorithm::active_backup:
      return "active_backup";
    case BundleAlgorithm::hrw:
      return "hrw";
  }
  return "<unknown>";
}

std::optional<HashFields> parse_hash_fields(std::string_view s) {
  for (const HashFieldsName& n : kHashFieldsNames)
    if (iequals(s, n.name)) return n.fields;
  return std::nullopt;
}

std::optional<BundleAlgorithm> parse_bundle_algorithm(std::string_view s) {
  if (iequals(s, "active_backup")) return BundleAlgorithm::active_backup;
  if (iequals(s, "hrw")) return BundleAlgorithm::hrw;
  return std::nullopt;
}

uint32_t flow_hash_fields(const FlowKey& f, HashFields fields, uint16_t basis) noexcept {
  switch (fields) {
    case HashFields::eth_src:
      return hash_bytes(f.dl_src.b, 6, basis);
    case HashFields::symmetric_l4:
      return hash_symmetric_l4(f, basis);
    case HashFields::symmetric_l3l4:
      return hash_symmetric_l3l4(f, basis, false);
    case HashFields::symmetric_l3l4_udp:
      return hash_symmetric_l3l4(f, basis, true);
    case HashFields::nw_src:
      if (dl_type_is(f, kEthTypeIp)) return hash_bytes(&f.nw_src, 4, basis);
      if (dl_type_is(f, kEthTypeIpv6)) return hash_bytes(f.ipv6_src.b, 16, basis);
      return basis;
    case HashFields::nw_dst:
      if (dl_type_is(f, kEthTypeIp)) return hash_bytes(&f.nw_dst, 4, basis);
      if (dl_type_is(f, kEthTypeIpv6)) return hash_bytes(f.ipv6_dst.b, 16, basis);
      return basis;
    case HashFields::symmetric_l3:
      return hash_symmetric_l3(f, basis);
  }
  return basis;
}

void flow_mask_hash_fields(const FlowKey& f, FlowKey* wc, HashFields fields) noexcept {
  if (!wc) return;
  const bool ip4 = dl_type_is(f, kEthTypeIp), ip6 = dl_type_is(f, kEthTypeIpv6);
  auto addrs = [&](bool src, bool dst) {
    if (ip4) {
      if (src) set_ones(wc->nw_src);
      if (dst) set_ones(wc->nw_dst);
    } else if (ip6) {
      if (src) set_ones(wc->ipv6_src);
      if (dst) set_ones(wc->ipv6_dst);
    }
  };
  switch (fields) {
    case HashFields::eth_src:
      set_ones(wc->dl_src);
      return;
    case HashFields::symmetric_l4:
      set_ones(wc->dl_src);
      set_ones(wc->dl_dst);
      addrs(true, true);
      if (ip4 || ip6) {
        wc->nw_proto = 0xff;
        // flow_unwildcard_tp_ports(): UDP ports are not hashed.
        if (f.nw_proto != kProtoUdp) {
          if (f.nw_proto == kProtoIcmp) {  // as OVS: ICMPv4's number only
            wc->tp_src |= hton16(0x00ff);
            wc->tp_dst |= hton16(0x00ff);
          } else {
            set_ones(wc->tp_src);
            set_ones(wc->tp_dst);
          }
        }
      }
      for (VlanHdr& v : wc->vlans) v.tci |= hton16(kVlanVidMask | kVlanCfi);
      return;
    case HashFields::symmetric_l3l4_udp:
      if ((ip4 || ip6) && f.nw_proto == kProtoUdp && !(f.nw_frag & kFragMask)) {
        set_ones(wc->tp_src);
        set_ones(wc->tp_dst);
      }
      [[fallthrough]];
    case HashFields::symmetric_l3l4:
      if (!ip4 && !ip6) return;  // non-IP: hashed from L2, which OVS does not unwildcard
      addrs(true, true);
      wc->nw_proto = 0xff;
      if ((f.nw_proto == kProtoTcp || f.nw_proto == kProtoSctp) && !(f.nw_frag & kFragMask)) {
        set_ones(wc->tp_src);
        set_ones(wc->tp_dst);
      }
      return;
    case HashFields::nw_src:
      addrs(true, false);
      return;
    case HashFields::nw_dst:
      addrs(false, true);
      return;
    case HashFields::symmetric_l3:
      addrs(true, true);
      return;
  }
}

uint32_t flow_hash_5tuple(const FlowKey& f, uint32_t basis) noexcept {
  uint32_t h = basis;
  if (dl_type_is(f, kEthTypeIpv6)) {
    uint64_t w[4];
    std::memcpy(w, f.ipv6_src.b, 16);
    std::memcpy(w + 2, f.ipv6_dst.b, 16);
    for (uint64_t x : w) h = hash_add64(h, x);
  } else if (dl_type_is(f, kEthTypeIp) || dl_type_is(f, kEthTypeArp)) {
    h = hash_add64(h, (uint64_t{f.nw_dst} << 32) | f.nw_src);
  } else {
    return hash_finish(h, 42);
  }
  h = hash_add64(h, f.nw_proto);
  if (f.nw_proto == kProtoTcp || f.nw_proto == kProtoUdp || f.nw_proto == kProtoSctp ||
      f.nw_proto == kProtoIcmp || f.nw_proto == kProtoIcmpv6)
    h = hash_add64(h, (uint32_t{f.tp_dst} << 16) | f.tp_src);  // both ports at once
  return hash_finish(h, 42);
}

uint32_t hash_mac(const EthAddr& mac, uint16_t vlan, uint32_t basis) noexcept {
  uint64_t w = 0;
  std::memcpy(&w, mac.b, 6);
  w |= uint64_t{vlan} << 48;
  return hash_finish(hash_add64(basis, w), 8);
}

uint32_t bundle_hrw_score(uint32_t i, uint32_t flow_hash) noexcept {
  return hash_finish(hash_add64(flow_hash, i), 8);
}

}  // namespace keel::flow

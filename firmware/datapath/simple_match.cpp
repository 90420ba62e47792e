// SimpleMatch: see simple_match.h. quick_key() mirrors the checks of the
// full parser (firmware/packet/parser.cpp) for the fields it reads and gives
// up wherever the two could disagree.
#include "datapath/simple_match.h"

#include <cstddef>
#include <cstring>

#include "flow/flow_key.h"
#include "flow/miniflow.h"
#include "packet/headers.h"

namespace keel::datapath {
namespace {

using flow::FlowKey;

inline uint16_t load16(const uint8_t* p) noexcept {  // as in memory (network order kept)
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint16_t ntoh(uint16_t v) noexcept { return __builtin_bswap16(v); }
constexpr uint16_t be(uint16_t v) { return __builtin_bswap16(v); }

constexpr bool is_tpid(uint16_t t) { return t == be(packet::kEthTypeVlan) || t == be(packet::kEthTypeQinQ); }

constexpr SimpleKey pack(uint16_t dl_type, uint16_t tpid, uint16_t tci, uint8_t frag) {
  return SimpleKey{dl_type} | SimpleKey{tpid} << 16 | SimpleKey{tci} << 32 | SimpleKey{frag} << 48;
}

// TCP flags of a TCP header of `size` bytes, as the parser keys them (0 when
// the header is short or its data offset is out of range).
inline uint16_t tcp_flags(const uint8_t* l4, uint32_t size) noexcept {
  if (size < 20) return 0;
  const uint16_t ctl = ntoh(load16(l4 + 12));
  const uint32_t hdr_len = (ctl >> 12) * 4u;
  if (hdr_len < 20 || hdr_len > size) return 0;
  return ctl & 0x0fff;
}

}  // namespace

bool quick_key(const uint8_t* frame, uint32_t len, SimpleQuick* out) noexcept {
  if (len < 14) return false;
  uint32_t off = 12;
  uint16_t type = load16(frame + off);
  uint16_t tpid = 0, tci = 0;
  out->ofs = packet::LayerOffsets{};
  out->ofs.l2 = 0;
  if (is_tpid(type)) {
    if (len < 18) return false;
    out->ofs.l2_5 = 12;
    tpid = type;
    tci = static_cast<uint16_t>(load16(frame + 14) | be(packet::kVlanCfi));
    off = 16;
    type = load16(frame + off);
    if (is_tpid(type)) return false;  // a second tag: the full path keys it
  }
  if (ntoh(type) < packet::kEthTypeMin) return false;  // 802.3 / LLC-SNAP
  off += 2;
  out->ofs.l3 = static_cast<uint16_t>(off);
  uint8_t frag = 0;
  uint16_t flags = 0;
  const uint8_t* l3 = frame + off;
  const uint32_t size = len - off;
  if (type == be(packet::kEthTypeIpv4)) {
    if (size < 20) return false;
    const uint32_t ihl = (l3[0] & 0x0fu) * 4u;
    const uint32_t tot_len = ntoh(load16(l3 + 2));
    if (ihl < 20 || ihl > size || tot_len > size || tot_len < ihl) return false;
    const uint16_t frag_off = ntoh(load16(l3 + 6));
    if (frag_off & 0x3fff) frag = flow::kFragAny | ((frag_off & 0x1fff) ? flow::kFragLater : 0);
    if (l3[9] == packet::kIpProtoTcp && !(frag & flow::kFragLater)) flags = tcp_flags(l3 + ihl, tot_len - ihl);
  } else if (type == be(packet::kEthTypeIpv6)) {
    if (size < 40) return false;
    const uint32_t plen = ntoh(load16(l3 + 4));
    if (plen > size - 40) return false;
    const uint8_t next = l3[6];
    if (next == packet::kIpProtoTcp) {
      flags = tcp_flags(l3 + 40, plen);
    } else if (next != packet::kIpProtoUdp && next != packet::kIpProtoIcmpv6 && next != packet::kIpProtoSctp) {
      return false;  // extension headers decide nw_frag: the full path walks them
    }
  }
  out->key = pack(type, tpid, tci, frag);
  out->tcp_flags = flags;
  return true;
}

bool simple_flow(const Megaflow& f, SimpleKey* value, SimpleKey* mask) {
  FlowKey m, k;
  flow::expand(f.mask(), m);
  flow::expand(f.key, k);
  if (m.in_port != 0xffffffffu || m.recirc_id != 0xffffffffu || k.recirc_id != 0) return false;
  *mask = pack(m.dl_type, m.vlans[0].tpid, m.vlans[0].tci, m.nw_frag);
  *value = pack(k.dl_type, k.vlans[0].tpid, k.vlans[0].tci, k.nw_frag) & *mask;
  // Nothing else may be matched (compared byte by byte: the fields are
  // written as fields, so reading them back as words would alias).
  FlowKey allowed{};
  allowed.in_port = allowed.recirc_id = 0xffffffffu;
  allowed.dl_type = 0xffff;
  allowed.vlans[0] = {0xffff, 0xffff};
  // The second tag only as "absent" (megaflows match each tag's presence up
  // to the first absent one): every packet quick_key() answers for has at
  // most one tag, so vlans[1] is empty in its key under any vlan-limit.
  if ((k.vlans[1].tpid & m.vlans[1].tpid) == 0 && (k.vlans[1].tci & m.vlans[1].tci) == 0)
    allowed.vlans[1] = {0xffff, 0xffff};
  allowed.nw_frag = 0xff;
  const auto* mb = reinterpret_cast<const unsigned char*>(&m);
  const auto* ab = reinterpret_cast<const unsigned char*>(&allowed);
  for (size_t i = 0; i < sizeof(FlowKey); ++i)
    if (mb[i] & ~ab[i]) return false;
  return true;
}

bool outputs_only(const flow::DpActions& actions) {
  flow::DpActionReader r(actions.bytes());
  while (!r.done()) {
    const flow::DpActionType t = r.next().type;
    if (t != flow::DpActionType::kOutput && t != flow::DpActionType::kDrop) return false;
  }
  return true;
}

void SimpleMatch::flow_added(const Megaflow* f) {
  if (f->in_port >= kPorts) return;
  Port& p = ports_[f->in_port];
  SimpleKey value, mask;
  if (p.n == kMaxPerPort || !simple_flow(*f, &value, &mask)) {
    ++p.others;
    return;
  }
  const flow::DpActions* a = f->actions.load(std::memory_order_relaxed);
  p.e[p.n++] = {value, mask, const_cast<Megaflow*>(f), a == nullptr || outputs_only(*a)};
}

void SimpleMatch::flow_removed(const Megaflow* f) {
  if (f->in_port >= kPorts) return;
  Port& p = ports_[f->in_port];
  for (unsigned i = 0; i < p.n; ++i) {
    if (p.e[i].flow == f) {
      p.e[i] = p.e[--p.n];
      p.e[p.n] = {};
      return;
    }
  }
  --p.others;
}

void SimpleMatch::actions_changed(const Megaflow* f) {
  if (f->in_port >= kPorts) return;
  Port& p = ports_[f->in_port];
  for (unsigned i = 0; i < p.n; ++i) {
    if (p.e[i].flow == f) {
      const flow::DpActions* a = f->actions.load(std::memory_order_relaxed);
      p.e[i].outputs_only = a == nullptr || outputs_only(*a);
    }
  }
}

}  // namespace keel::datapath

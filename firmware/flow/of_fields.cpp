// OpenFlow fields: see of_fields.h.
#include "flow/of_fields.h"

#include <bit>
#include <cstring>

#include "flow/flow_text.h"
#include "flow/tun_metadata.h"

namespace keel::flow {

using namespace text;

// --- OfValue ---------------------------------------------------------------

OfValue OfValue::from_u64(uint64_t v) {
  OfValue r;
  for (int i = 0; i < 8; ++i) r.b[15 - i] = static_cast<uint8_t>(v >> (8 * i));
  return r;
}

OfValue OfValue::ones(unsigned ofs, unsigned n_bits) {
  OfValue r;
  for (unsigned i = ofs; i < ofs + n_bits && i < 128; ++i)
    r.b[15 - i / 8] |= static_cast<uint8_t>(1u << (i % 8));
  return r;
}

uint64_t OfValue::low64() const {
  uint64_t v = 0;
  for (int i = 8; i < 16; ++i) v = (v << 8) | b[i];
  return v;
}

uint64_t OfValue::high64() const {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | b[i];
  return v;
}

bool OfValue::is_zero() const {
  for (uint8_t x : b)
    if (x) return false;
  return true;
}

unsigned OfValue::bit_width() const {
  uint64_t hi = high64(), lo = low64();
  if (hi) return 64 + static_cast<unsigned>(std::bit_width(hi));
  return static_cast<unsigned>(std::bit_width(lo));
}

namespace {
OfValue from_pair(uint64_t hi, uint64_t lo) {
  OfValue r = OfValue::from_u64(lo);
  for (int i = 0; i < 8; ++i) r.b[7 - i] = static_cast<uint8_t>(hi >> (8 * i));
  return r;
}
}  // namespace

OfValue OfValue::operator&(const OfValue& o) const {
  OfValue r;
  for (int i = 0; i < 16; ++i) r.b[i] = b[i] & o.b[i];
  return r;
}
OfValue OfValue::operator|(const OfValue& o) const {
  OfValue r;
  for (int i = 0; i < 16; ++i) r.b[i] = b[i] | o.b[i];
  return r;
}
OfValue OfValue::operator~() const {
  OfValue r;
  for (int i = 0; i < 16; ++i) r.b[i] = static_cast<uint8_t>(~b[i]);
  return r;
}
OfValue OfValue::operator<<(unsigned n) const {
  uint64_t hi = high64(), lo = low64();
  if (n >= 128) return {};
  if (n >= 64) return from_pair(lo << (n - 64), 0);
  if (n == 0) return *this;
  return from_pair((hi << n) | (lo >> (64 - n)), lo << n);
}
OfValue OfValue::operator>>(unsigned n) const {
  uint64_t hi = high64(), lo = low64();
  if (n >= 128) return {};
  if (n >= 64) return from_pair(0, hi >> (n - 64));
  if (n == 0) return *this;
  return from_pair(hi >> n, (lo >> n) | (hi << (64 - n)));
}

// --- the registry ------------------------------------------------------------

namespace {

constexpr uint16_t kCfi = 0x1000;

// Big-endian container holding the whole field.
#define BE(id, name, alias, nxm, oxm, bits, member, bytes, maskable, writable, prereq, syntax)           \
  OfFieldInfo {                                                                                          \
    OfFieldId::id, name, alias, nxm, oxm, bits, static_cast<uint16_t>(offsetof(FlowKey, member)), bytes, \
        false, 0, (bytes) >= 8 ? ~uint64_t{0} : ((uint64_t{1} << (8 * (bytes))) - 1), false, maskable,   \
        writable, OfPrereq::prereq, OfFieldSyntax::syntax                                                \
  }
// Host-order container, field in its low `bits` bits.
#define HOST(id, name, nxm, bits, member, maskable, syntax)                                               \
  OfFieldInfo {                                                                                           \
    OfFieldId::id, name, "", nxm, "", bits, static_cast<uint16_t>(offsetof(FlowKey, member)), 4, true, 0, \
        (uint64_t{1} << (bits)) - 1, false, maskable, true, OfPrereq::none, OfFieldSyntax::syntax         \
  }
// Bits of a big-endian container.
#define BITS(id, name, alias, nxm, oxm, bits, offset, bytes, shift, cmask, cfi, maskable, writable, prereq) \
  OfFieldInfo {                                                                                             \
    OfFieldId::id, name, alias, nxm, oxm, bits, static_cast<uint16_t>(offset), bytes, false, shift, cmask,  \
        cfi, maskable, writable, OfPrereq::prereq, OfFieldSyntax::integer                                   \
  }
// tun_metadataN: the low 16 bytes of slot N (tun_metadata.h).
#define TUNMD(n)                                                                                          \
  OfFieldInfo {                                                                                           \
    OfFieldId::tun_metadata##n, "tun_metadata" #n, "", "NXM_NX_TUN_METADATA" #n, "", 128,                 \
        static_cast<uint16_t>(tun_metadata_slot_offset(n) + kTunMetadataSlot - 16), 16, false, 0,         \
        ~uint64_t{0}, false, true, true, OfPrereq::none, OfFieldSyntax::integer                           \
  }
#define REG(n) HOST(reg##n, "reg" #n, "NXM_NX_REG" #n, 32, regs[n], true, integer)

constexpr size_t kTciOffset = offsetof(FlowKey, vlans) + offsetof(VlanHdr, tci);

constexpr OfFieldInfo kFields[] = {
    HOST(in_port, "in_port", "NXM_OF_IN_PORT", 16, in_port, false, port),
    HOST(pkt_mark, "pkt_mark", "NXM_NX_PKT_MARK", 32, pkt_mark, true, integer),
    REG(0),
    REG(1),
    REG(2),
    REG(3),
    REG(4),
    REG(5),
    REG(6),
    REG(7),
    BE(metadata, "metadata", "", "OXM_OF_METADATA", "", 64, metadata, 8, true, true, none, integer),
    BE(tun_id, "tun_id", "tunnel_id", "NXM_NX_TUN_ID", "OXM_OF_TUNNEL_ID", 64, tun_id, 8, true, true, none,
       integer),
    BE(tun_src, "tun_src", "", "NXM_NX_TUN_IPV4_SRC", "", 32, tun_ipv4_src, 4, true, true, none, ipv4),
    BE(tun_dst, "tun_dst", "", "NXM_NX_TUN_IPV4_DST", "", 32, tun_ipv4_dst, 4, true, true, none, ipv4),
    BE(tun_ipv6_src, "tun_ipv6_src", "", "NXM_NX_TUN_IPV6_SRC", "", 128, tun_ipv6_src, 16, true, true, none,
       ipv6),
    BE(tun_ipv6_dst, "tun_ipv6_dst", "", "NXM_NX_TUN_IPV6_DST", "", 128, tun_ipv6_dst, 16, true, true, none,
       ipv6),
    OfFieldInfo{OfFieldId::tun_flags, "tun_flags", "", "NXM_NX_TUN_FLAGS", "", 1,
                static_cast<uint16_t>(offsetof(FlowKey, tun_flags)), 2, true, 0, 0x1, false, true, true,
                OfPrereq::none, OfFieldSyntax::integer},
    TUNMD(0),
    TUNMD(1),
    TUNMD(2),
    TUNMD(3),
    TUNMD(4),
    TUNMD(5),
    TUNMD(6),
    TUNMD(7),
    BE(eth_src, "eth_src", "dl_src", "NXM_OF_ETH_SRC", "OXM_OF_ETH_SRC", 48, dl_src, 6, true, true, none,
       mac),
    BE(eth_dst, "eth_dst", "dl_dst", "NXM_OF_ETH_DST", "OXM_OF_ETH_DST", 48, dl_dst, 6, true, true, none,
       mac),
    BE(eth_type, "eth_type", "dl_type", "NXM_OF_ETH_TYPE", "OXM_OF_ETH_TYPE", 16, dl_type, 2, false, false,
       none, integer),
    BITS(vlan_tci, "vlan_tci", "", "NXM_OF_VLAN_TCI", "", 16, kTciOffset, 2, 0, 0xffff, false, true, true,
         none),
    BITS(vlan_vid, "vlan_vid", "", "OXM_OF_VLAN_VID", "", 12, kTciOffset, 2, 0, 0x0fff, true, true, true,
         none),
    BITS(vlan_pcp, "vlan_pcp", "", "OXM_OF_VLAN_PCP", "", 3, kTciOffset, 2, 13, 0xe000, true, false, true,
         vlan),
    BE(ip_src, "ip_src", "nw_src", "NXM_OF_IP_SRC", "OXM_OF_IPV4_SRC", 32, nw_src, 4, true, true, ipv4, ipv4),
    BE(ip_dst, "ip_dst", "nw_dst", "NXM_OF_IP_DST", "OXM_OF_IPV4_DST", 32, nw_dst, 4, true, true, ipv4, ipv4),
    BE(ipv6_src, "ipv6_src", "", "NXM_NX_IPV6_SRC", "OXM_OF_IPV6_SRC", 128, ipv6_src, 16, true, true, ipv6,
       ipv6),
    BE(ipv6_dst, "ipv6_dst", "", "NXM_NX_IPV6_DST", "OXM_OF_IPV6_DST", 128, ipv6_dst, 16, true, true, ipv6,
       ipv6),
    BITS(ipv6_label, "ipv6_label", "", "NXM_NX_IPV6_LABEL", "OXM_OF_IPV6_FLABEL", 20,
         offsetof(FlowKey, ipv6_label), 4, 0, 0xfffff, false, true, true, ipv6),
    BITS(nw_proto, "nw_proto", "ip_proto", "NXM_OF_IP_PROTO", "OXM_OF_IP_PROTO", 8,
         offsetof(FlowKey, nw_proto), 1, 0, 0xff, false, false, false, ip_any),
    BITS(nw_tos, "nw_tos", "", "NXM_OF_IP_TOS", "", 8, offsetof(FlowKey, nw_tos), 1, 0, 0xfc, false, false,
         true, ip_any),
    BITS(ip_dscp, "ip_dscp", "", "OXM_OF_IP_DSCP", "", 6, offsetof(FlowKey, nw_tos), 1, 2, 0xfc, false, false,
         true, ip_any),
    BITS(nw_ecn, "nw_ecn", "ip_ecn", "NXM_NX_IP_ECN", "OXM_OF_IP_ECN", 2, offsetof(FlowKey, nw_tos), 1, 0,
         0x03, false, false, true, ip_any),
    BITS(nw_ttl, "nw_ttl", "", "NXM_NX_IP_TTL", "", 8, offsetof(FlowKey, nw_ttl), 1, 0, 0xff, false, false,
         true, ip_any),
    BITS(arp_op, "arp_op", "", "NXM_OF_ARP_OP", "OXM_OF_ARP_OP", 16, offsetof(FlowKey, nw_proto), 1, 0, 0xff,
         false, false, true, arp),
    BE(arp_spa, "arp_spa", "", "NXM_OF_ARP_SPA", "OXM_OF_ARP_SPA", 32, nw_src, 4, true, true, arp, ipv4),
    BE(arp_tpa, "arp_tpa", "", "NXM_OF_ARP_TPA", "OXM_OF_ARP_TPA", 32, nw_dst, 4, true, true, arp, ipv4),
    BE(arp_sha, "arp_sha", "", "NXM_NX_ARP_SHA", "OXM_OF_ARP_SHA", 48, arp_sha, 6, true, true, arp, mac),
    BE(arp_tha, "arp_tha", "", "NXM_NX_ARP_THA", "OXM_OF_ARP_THA", 48, arp_tha, 6, true, true, arp, mac),
    BE(tcp_src, "tcp_src", "tp_src", "NXM_OF_TCP_SRC", "OXM_OF_TCP_SRC", 16, tp_src, 2, true, true, tcp,
       integer),
    BE(tcp_dst, "tcp_dst", "tp_dst", "NXM_OF_TCP_DST", "OXM_OF_TCP_DST", 16, tp_dst, 2, true, true, tcp,
       integer),
    BE(udp_src, "udp_src", "", "NXM_OF_UDP_SRC", "OXM_OF_UDP_SRC", 16, tp_src, 2, true, true, udp, integer),
    BE(udp_dst, "udp_dst", "", "NXM_OF_UDP_DST", "OXM_OF_UDP_DST", 16, tp_dst, 2, true, true, udp, integer),
    BE(sctp_src, "sctp_src", "", "OXM_OF_SCTP_SRC", "", 16, tp_src, 2, true, true, sctp, integer),
    BE(sctp_dst, "sctp_dst", "", "OXM_OF_SCTP_DST", "", 16, tp_dst, 2, true, true, sctp, integer),
    BITS(tcp_flags, "tcp_flags", "", "NXM_NX_TCP_FLAGS", "", 12, offsetof(FlowKey, tcp_flags), 2, 0, 0x0fff,
         false, true, false, tcp),
    BITS(icmp_type, "icmp_type", "", "NXM_OF_ICMP_TYPE", "OXM_OF_ICMPV4_TYPE", 8, offsetof(FlowKey, tp_src),
         2, 0, 0x00ff, false, false, true, icmpv4),
    BITS(icmp_code, "icmp_code", "", "NXM_OF_ICMP_CODE", "OXM_OF_ICMPV4_CODE", 8, offsetof(FlowKey, tp_dst),
         2, 0, 0x00ff, false, false, true, icmpv4),
    BITS(icmpv6_type, "icmpv6_type", "", "NXM_NX_ICMPV6_TYPE", "OXM_OF_ICMPV6_TYPE", 8,
         offsetof(FlowKey, tp_src), 2, 0, 0x00ff, false, false, true, icmpv6),
    BITS(icmpv6_code, "icmpv6_code", "", "NXM_NX_ICMPV6_CODE", "OXM_OF_ICMPV6_CODE", 8,
         offsetof(FlowKey, tp_dst), 2, 0, 0x00ff, false, false, true, icmpv6),
    BE(nd_target, "nd_target", "", "NXM_NX_ND_TARGET", "OXM_OF_IPV6_ND_TARGET", 128, nd_target, 16, true,
       true, nd, ipv6),
    BE(nd_sll, "nd_sll", "", "NXM_NX_ND_SLL", "OXM_OF_IPV6_ND_SLL", 48, arp_sha, 6, true, true, nd_solicit,
       mac),
    BE(nd_tll, "nd_tll", "", "NXM_NX_ND_TLL", "OXM_OF_IPV6_ND_TLL", 48, arp_tha, 6, true, true, nd_advert,
       mac),
};
#undef BE
#undef HOST
#undef BITS
#undef REG
#undef TUNMD

static_assert(std::size(kFields) == kOfFieldCount, "one row per OfFieldId");

constexpr bool rows_in_id_order() {
  for (unsigned i = 0; i < kOfFieldCount; ++i)
    if (static_cast<unsigned>(kFields[i].id) != i) return false;
  return true;
}
static_assert(rows_in_id_order(), "kFields is indexed by OfFieldId");

// The container as an integer (containers of at most 8 bytes).
uint64_t load_container(const FlowKey& k, const OfFieldInfo& f) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(&k) + f.offset;
  if (f.host_order && f.bytes == 2) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  if (f.host_order) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < f.bytes; ++i) v = (v << 8) | p[i];
  return v;
}

void store_container(FlowKey& k, const OfFieldInfo& f, uint64_t v) {
  uint8_t* p = reinterpret_cast<uint8_t*>(&k) + f.offset;
  if (f.host_order && f.bytes == 2) {
    uint16_t h = static_cast<uint16_t>(v);
    std::memcpy(p, &h, sizeof h);
    return;
  }
  if (f.host_order) {
    uint32_t h = static_cast<uint32_t>(v);
    std::memcpy(p, &h, sizeof h);
    return;
  }
  for (unsigned i = f.bytes; i-- > 0;) {
    p[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}

bool is_wide(const OfFieldInfo& f) { return f.bytes > 8; }

}  // namespace

std::span<const OfFieldInfo> of_fields() { return kFields; }

const OfFieldInfo& of_field(OfFieldId id) { return kFields[static_cast<unsigned>(id)]; }

const OfFieldInfo* find_of_field(std::string_view name) {
  if (name.empty()) return nullptr;
  for (const OfFieldInfo& f : kFields)
    if (f.name == name || f.alias == name) return &f;
  return nullptr;
}

const OfFieldInfo* find_of_field_any(std::string_view name) {
  if (name.empty()) return nullptr;
  for (const OfFieldInfo& f : kFields)
    if (f.nxm == name || f.oxm == name) return &f;
  return find_of_field(name);
}

OfValue field_valid_bits(OfFieldId id) {
  const OfFieldInfo& f = of_field(id);
  if (is_wide(f)) return OfValue::ones(0, f.n_bits);
  return OfValue::from_u64(f.container_mask >> f.shift) & OfValue::ones(0, f.n_bits);
}

OfValue read_field(const FlowKey& key, OfFieldId id) {
  const OfFieldInfo& f = of_field(id);
  if (is_wide(f)) {
    OfValue v;
    std::memcpy(v.b.data(), reinterpret_cast<const uint8_t*>(&key) + f.offset, 16);
    return v;
  }
  return OfValue::from_u64((load_container(key, f) & f.container_mask) >> f.shift);
}

namespace {
// tun_metadataN's index, or -1.
int tun_md_index(OfFieldId id) {
  auto i = static_cast<int>(id) - static_cast<int>(OfFieldId::tun_metadata0);
  return i >= 0 && i < static_cast<int>(kTunMetadataFields) ? i : -1;
}
}  // namespace

void write_field(FlowKey& key, OfFieldId id, const OfValue& value, const OfValue& mask) {
  const OfFieldInfo& f = of_field(id);
  if (int md = tun_md_index(id); md >= 0 && !mask.is_zero()) {
    // OVS's tun_metadata_write: the field becomes present; a field that
    // was absent reads as zero before the write.
    if (!(key.tun_opt_len & (1u << md))) std::memset(key.tun_opts + md * kTunMetadataSlot, 0, kTunMetadataSlot);
    key.tun_opt_len |= 1u << md;
  }
  if (is_wide(f)) {
    uint8_t* p = reinterpret_cast<uint8_t*>(&key) + f.offset;
    for (int i = 0; i < 16; ++i) p[i] = static_cast<uint8_t>((p[i] & ~mask.b[i]) | (value.b[i] & mask.b[i]));
    return;
  }
  uint64_t cm = (mask.low64() << f.shift) & f.container_mask;
  if (!cm) return;
  uint64_t c = load_container(key, f);
  c = (c & ~cm) | ((value.low64() << f.shift) & cm);
  if (f.sets_cfi) c |= kCfi;
  store_container(key, f, c);
}

void unwildcard_field(FlowKey& mask, OfFieldId id, const OfValue& bits) {
  const OfFieldInfo& f = of_field(id);
  if (int md = tun_md_index(id); md >= 0 && !bits.is_zero()) mask.tun_opt_len |= 1u << md;
  if (is_wide(f)) {
    uint8_t* p = reinterpret_cast<uint8_t*>(&mask) + f.offset;
    for (int i = 0; i < 16; ++i) p[i] |= bits.b[i];
    return;
  }
  uint64_t cm = (bits.low64() << f.shift) & f.container_mask;
  if (!cm) return;
  uint64_t c = load_container(mask, f) | cm;
  if (f.sets_cfi) c |= kCfi;
  store_container(mask, f, c);
}

// --- subfields ---------------------------------------------------------------

OfSubfield OfSubfield::whole(OfFieldId id) { return {id, 0, of_field(id).n_bits}; }

OfValue subfield_mask(const OfSubfield& sf) { return OfValue::ones(sf.ofs, sf.n_bits); }

OfValue read_subfield(const FlowKey& key, const OfSubfield& sf) {
  return (read_field(key, sf.field) >> sf.ofs) & OfValue::ones(0, sf.n_bits);
}

void write_subfield(FlowKey& key, const OfSubfield& sf, const OfValue& value) {
  write_field(key, sf.field, value << sf.ofs, subfield_mask(sf));
}

void unwildcard_subfield(FlowKey& mask, const OfSubfield& sf) {
  unwildcard_field(mask, sf.field, subfield_mask(sf));
}

static bool parse_small(std::string_view s, unsigned& out) {
  if (s.empty() || s.size() > 3) return false;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  out = v;
  return true;
}

Status parse_of_subfield(std::string_view text, size_t column, OfSubfield& out) {
  Span s{text, column};
  size_t br = text.find('[');
  Span name = s.sub(0, br);
  const OfFieldInfo* f = find_of_field_any(name.text);
  if (!f) return error_at("unknown field", name);
  unsigned start = 0, end = f->n_bits - 1u;
  if (br != std::string_view::npos) {
    if (text.back() != ']')
      return error_at("bad subfield", s, "expected NAME[], NAME[BIT] or NAME[START..END]");
    Span inner = s.sub(br + 1, text.size() - br - 2);
    if (!inner.empty()) {
      size_t dots = inner.text.find("..");
      if (dots == std::string_view::npos) {
        if (!parse_small(inner.text, start)) return error_at("bad bit index", inner);
        end = start;
      } else if (!parse_small(inner.text.substr(0, dots), start) ||
                 !parse_small(inner.text.substr(dots + 2), end)) {
        return error_at("bad bit range", inner, "expected START..END");
      }
    }
    if (start > end) return error_at("bad bit range", inner, "the starting bit is after the ending bit");
    if (end >= f->n_bits)
      return error_at("bad bit range", inner,
                      std::string(f->name) + " is only " + std::to_string(f->n_bits) + " bits wide");
  }
  out = {f->id, static_cast<uint8_t>(start), static_cast<uint8_t>(end - start + 1)};
  return {};
}

void format_of_subfield(std::string& out, const OfSubfield& sf) {
  const OfFieldInfo& f = of_field(sf.field);
  out += f.nxm;
  if (sf.ofs == 0 && sf.n_bits == f.n_bits) {
    out += "[]";
  } else {
    out += '[';
    put_dec(out, sf.ofs);
    if (sf.n_bits != 1) {
      out += "..";
      put_dec(out, sf.ofs + sf.n_bits - 1u);
    }
    out += ']';
  }
}

// --- prerequisites -------------------------------------------------------------

namespace {
bool key_dl_is(const Match& m, uint16_t t) { return m.key.dl_type == hton16(t); }
bool key_ip_any(const Match& m) { return key_dl_is(m, kEthTypeIp) || key_dl_is(m, kEthTypeIpv6); }
bool key_l4(const Match& m, uint8_t proto) {
  return key_ip_any(m) && m.key.nw_proto == proto && !(m.key.nw_frag & kFragLater);
}
bool key_icmp_type(const Match& m, uint8_t t) { return (ntoh16(m.key.tp_src) & 0xff) == t; }
bool key_nd(const Match& m) {
  return key_dl_is(m, kEthTypeIpv6) && m.key.nw_proto == kProtoIcmpv6 && (ntoh16(m.key.tp_dst) & 0xff) == 0 &&
         (key_icmp_type(m, kNdSolicit) || key_icmp_type(m, kNdAdvert));
}
}  // namespace

// Open vSwitch checks prerequisites against the match's flow, whose
// wildcarded bits are zero: a field that is not matched does not satisfy
// a prerequisite on it. Match::key is masked the same way.
bool of_prereq_ok(OfPrereq p, const Match& m) {
  switch (p) {
    case OfPrereq::none:
      return true;
    case OfPrereq::vlan:
      return (ntoh16(m.key.vlans[0].tci) & kCfi) != 0;
    case OfPrereq::arp:
      return key_dl_is(m, kEthTypeArp) || key_dl_is(m, kEthTypeRarp);
    case OfPrereq::ipv4:
      return key_dl_is(m, kEthTypeIp);
    case OfPrereq::ipv6:
      return key_dl_is(m, kEthTypeIpv6);
    case OfPrereq::ip_any:
      return key_ip_any(m);
    case OfPrereq::tcp:
      return key_l4(m, kProtoTcp);
    case OfPrereq::udp:
      return key_l4(m, kProtoUdp);
    case OfPrereq::sctp:
      return key_l4(m, kProtoSctp);
    case OfPrereq::icmpv4:
      return key_dl_is(m, kEthTypeIp) && m.key.nw_proto == kProtoIcmp;
    case OfPrereq::icmpv6:
      return key_dl_is(m, kEthTypeIpv6) && m.key.nw_proto == kProtoIcmpv6;
    case OfPrereq::nd:
      return key_nd(m);
    case OfPrereq::nd_solicit:
      return key_nd(m) && key_icmp_type(m, kNdSolicit);
    case OfPrereq::nd_advert:
      return key_nd(m) && key_icmp_type(m, kNdAdvert);
  }
  return false;
}

std::string_view of_prereq_text(OfPrereq p) {
  switch (p) {
    case OfPrereq::none:
      return "nothing";
    case OfPrereq::vlan:
      return "a VLAN tag (match vlan_tci=0x1000/0x1000 or dl_vlan, or push one first)";
    case OfPrereq::arp:
      return "arp or rarp (dl_type=0x0806 or 0x8035)";
    case OfPrereq::ipv4:
      return "ip (dl_type=0x0800)";
    case OfPrereq::ipv6:
      return "ipv6 (dl_type=0x86dd)";
    case OfPrereq::ip_any:
      return "ip or ipv6 (dl_type=0x0800 or 0x86dd)";
    case OfPrereq::tcp:
      return "tcp or tcp6 (nw_proto=6), not a later fragment";
    case OfPrereq::udp:
      return "udp or udp6 (nw_proto=17), not a later fragment";
    case OfPrereq::sctp:
      return "sctp or sctp6 (nw_proto=132), not a later fragment";
    case OfPrereq::icmpv4:
      return "icmp";
    case OfPrereq::icmpv6:
      return "icmp6";
    case OfPrereq::nd:
      return "icmp6 with icmp_type=135 or 136 and icmp_code=0";
    case OfPrereq::nd_solicit:
      return "icmp6 with icmp_type=135 and icmp_code=0";
    case OfPrereq::nd_advert:
      return "icmp6 with icmp_type=136 and icmp_code=0";
  }
  return "?";
}

}  // namespace keel::flow

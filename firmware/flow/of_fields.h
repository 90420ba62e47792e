// OpenFlow fields — the registry of the fields that the OpenFlow actions
// set_field, load and move may name, and the bit-level helpers that
// translation (xlate) uses to read, write and unwildcard them in a FlowKey.
//
// A field has Open vSwitch's name (meta-flow: "eth_src", "reg0", "tun_id"),
// maybe an alias ("dl_src", "tunnel_id", "tp_src"), the NXM/OXM names an
// ovs-ofctl subfield may use ("NXM_OF_ETH_SRC", "OXM_OF_ETH_SRC"; the first
// is the one printed), a width in bits, whether it is maskable and writable,
// its prerequisite (as meta-flow's), and where it lives in flow::FlowKey.
//
// Values. An OfValue is a field value as Open vSwitch's mf_value holds it:
// a big-endian number, here always 128 bits wide and right-aligned, so bit
// 0 of every field is the least significant bit of b[15] and a subfield
// [ofs..ofs+n-1] is the same bits whatever the field's width. IPv6
// addresses fill all 16 bytes; a MAC address is the low 6 bytes; reg0 is
// the low 4 bytes. No allocation.
//
// Storage. Each field maps onto a "container" in the FlowKey: `bytes` bytes
// at `offset`, big-endian (packet fields, metadata, tun_id) or host order
// (regs, pkt_mark, in_port), and within the container the bits of
// `container_mask`, the field's bit 0 at container bit `shift`. So:
//   vlan_tci   the whole vlans[0].tci, CFI bit included (CFI = "present")
//   vlan_vid   tci bits 0-11, vlan_pcp tci bits 13-15; writing either also
//              sets CFI (a tag now exists), as Open vSwitch's flow_set_vid()
//   nw_tos     the DSCP bits of nw_tos in place (mask 0xfc, 8 bits wide)
//   ip_dscp    the same bits shifted down (6 bits), nw_ecn the low 2 bits
//   icmp_type  the low byte of tp_src (match.h: ICMP type/code live there)
//   arp_op     16 bits wide as in OVS, stored in nw_proto: the high byte
//              reads as zero and is dropped on write
//   in_port    16 bits (NXM_OF_IN_PORT) of the 32-bit host-order in_port
//   tun_flags  OVS's NXM_NX_TUN_FLAGS: 1 bit (oam) of the host-order u16
//   tun_metadataN  128 bits: the low 16 bytes of slot N (tun_metadata.h's
//              metadata form; OVS's field is 124 bytes wide, keel's OfValue
//              holds 16); writing any bit also sets present bit N of
//              tun_opt_len, unwildcarding marks it too (OVS's
//              tun_metadata_write and its present.map)
// Bits of a value or mask outside the field are ignored by the writers.
//
// Sharing with of_match_syntax.cpp: that file keeps its own private field
// table (text kinds for the match syntax). This registry is separate but
// consistent with it; tests/unit/of_actions_test.cpp checks that writing a
// field here gives the same Match as parsing "name=value" there.
//
// Thread-safety: constant tables and stateless functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "flow/flow_key.h"
#include "flow/match.h"

namespace keel::flow {

// A field value or mask: a 128-bit big-endian number (see above).
struct OfValue {
  std::array<uint8_t, 16> b{};

  static OfValue from_u64(uint64_t v);
  static OfValue ones(unsigned ofs, unsigned n_bits);  // bits [ofs, ofs + n_bits)
  uint64_t low64() const;                              // bits 0-63
  uint64_t high64() const;                             // bits 64-127
  bool bit(unsigned i) const { return (b[15 - i / 8] >> (i % 8)) & 1; }
  bool is_zero() const;
  // Significant bits: index of the highest 1 bit + 1 (0 for zero).
  unsigned bit_width() const;

  OfValue operator&(const OfValue& o) const;
  OfValue operator|(const OfValue& o) const;
  OfValue operator~() const;
  OfValue operator<<(unsigned n) const;
  OfValue operator>>(unsigned n) const;
  bool operator==(const OfValue&) const = default;
};

enum class OfFieldId : uint8_t {
  in_port,
  pkt_mark,
  reg0,
  reg1,
  reg2,
  reg3,
  reg4,
  reg5,
  reg6,
  reg7,
  metadata,
  tun_id,
  tun_src,
  tun_dst,
  tun_ipv6_src,
  tun_ipv6_dst,
  tun_flags,
  tun_metadata0,  // ..7: Geneve options (flow/tun_metadata.h: metadata form, slot N)
  tun_metadata1,
  tun_metadata2,
  tun_metadata3,
  tun_metadata4,
  tun_metadata5,
  tun_metadata6,
  tun_metadata7,
  eth_src,
  eth_dst,
  eth_type,
  vlan_tci,
  vlan_vid,
  vlan_pcp,
  ip_src,
  ip_dst,
  ipv6_src,
  ipv6_dst,
  ipv6_label,
  nw_proto,
  nw_tos,
  ip_dscp,
  nw_ecn,
  nw_ttl,
  arp_op,
  arp_spa,
  arp_tpa,
  arp_sha,
  arp_tha,
  tcp_src,
  tcp_dst,
  udp_src,
  udp_dst,
  sctp_src,
  sctp_dst,
  tcp_flags,
  icmp_type,
  icmp_code,
  icmpv6_type,
  icmpv6_code,
  nd_target,
  nd_sll,
  nd_tll,
};
inline constexpr unsigned kOfFieldCount = static_cast<unsigned>(OfFieldId::nd_tll) + 1;

// What must hold of the (masked) flow for a field to exist (meta-flow's
// MFP_*); checked against a Match's key values.
enum class OfPrereq : uint8_t {
  none,
  vlan,  // a VLAN tag is present (CFI set): vlan_pcp (OVS's "VLAN VID" prerequisite)
  arp,   // arp or rarp
  ipv4,
  ipv6,
  ip_any,
  tcp,
  udp,
  sctp,
  icmpv4,
  icmpv6,
  nd,
  nd_solicit,
  nd_advert,
};

// How set_field reads the field's value.
enum class OfFieldSyntax : uint8_t { integer, mac, ipv4, ipv6, port };

struct OfFieldInfo {
  OfFieldId id;
  std::string_view name;    // Open vSwitch's name
  std::string_view alias;   // another accepted name, or empty
  std::string_view nxm;     // printed subfield name: NXM_* (or OXM_* when there is no NXM one)
  std::string_view oxm;     // another accepted subfield name, or empty
  uint8_t n_bits;           // width (1..128)
  uint16_t offset;          // container: byte offset in FlowKey
  uint8_t bytes;            // container size: 1, 2, 4, 6, 8 or 16
  bool host_order;          // container is a host-order integer (else big-endian)
  uint8_t shift;            // container bit of the field's bit 0
  uint64_t container_mask;  // container bits the field occupies (containers <= 8 bytes)
  bool sets_cfi;            // writing it also sets the VLAN CFI ("present") bit
  bool maskable;
  bool writable;
  OfPrereq prereq;
  OfFieldSyntax syntax;
};

// Every field, in OfFieldId order.
std::span<const OfFieldInfo> of_fields();
const OfFieldInfo& of_field(OfFieldId id);
// By Open vSwitch name or alias ("eth_src", "dl_src"); nullptr if unknown.
const OfFieldInfo* find_of_field(std::string_view name);
// By name, alias, NXM or OXM name (what a subfield may say); nullptr if unknown.
const OfFieldInfo* find_of_field_any(std::string_view name);

// --- reading and writing a FlowKey ---------------------------------------

// The field's value in `key`.
OfValue read_field(const FlowKey& key, OfFieldId id);
// key's field bits = (old & ~mask) | (value & mask); bits outside the field
// are ignored. vlan_vid/vlan_pcp also set CFI when any bit is written.
void write_field(FlowKey& key, OfFieldId id, const OfValue& value, const OfValue& mask);
// Marks the field bits set in `bits` as matched in `mask` (a megaflow mask:
// xlate consulted or changed them). vlan_vid/vlan_pcp also mark CFI.
void unwildcard_field(FlowKey& mask, OfFieldId id, const OfValue& bits);
// The field's valid bits as an OfValue (ones(0, n_bits), except nw_tos:
// 0xfc, whose low bits are the ECN field).
OfValue field_valid_bits(OfFieldId id);

// --- subfields: FIELD[ofs..ofs+n_bits-1] -----------------------------------

struct OfSubfield {
  OfFieldId field = OfFieldId::reg0;
  uint8_t ofs = 0;
  uint8_t n_bits = 0;  // 1..128

  static OfSubfield whole(OfFieldId id);
  bool operator==(const OfSubfield&) const = default;
};

// Bits [ofs, ofs + n_bits) as a mask over the field.
OfValue subfield_mask(const OfSubfield& sf);
// The subfield's bits, shifted down to bit 0.
OfValue read_subfield(const FlowKey& key, const OfSubfield& sf);
// Writes the low n_bits of `value` into the subfield.
void write_subfield(FlowKey& key, const OfSubfield& sf, const OfValue& value);
void unwildcard_subfield(FlowKey& mask, const OfSubfield& sf);

// "NXM_NX_REG0[]", "reg0[4..11]", "NXM_OF_ETH_DST[40]", "tun_id[0..31]":
// the name (OVS, alias, NXM or OXM), then [] (whole field), [N] or [A..B]
// (OVS also allows no brackets: the whole field). `column` is the 1-based
// column of text[0] in the line, for error messages.
Status parse_of_subfield(std::string_view text, size_t column, OfSubfield& out);
// mf_format_subfield(): the NXM (or OXM) name, then [], [N] or [A..B].
void format_of_subfield(std::string& out, const OfSubfield& sf);

// --- prerequisites ---------------------------------------------------------

// Does the match's (masked) flow satisfy the prerequisite?
bool of_prereq_ok(OfPrereq p, const Match& match);
// "ip or ipv6 (dl_type=0x0800 or 0x86dd)": what the prerequisite requires.
std::string_view of_prereq_text(OfPrereq p);

}  // namespace keel::flow

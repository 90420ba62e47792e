// Tunnel metadata — Geneve options as OpenFlow's tun_metadata0..7 fields,
// and the TLV table that maps an option (class, type, length) to a field,
// as Open vSwitch's lib/tun-metadata.c (tun_table, tun_metadata_*).
//
// Two forms of the same FlowKey words (flow_key.h: tun_opt_len, tun_opts),
// told apart by who holds the key, as OVS's FLOW_TNL_F_UDPIF:
//
//   raw ("udpif") form — every datapath key and megaflow: the packet's
//     Geneve options exactly as on the wire, `tun_opt_len` bytes (0..252,
//     a multiple of 4) of tun_opts[]: per option class(be16) type(8)
//     r1r2r3|length(8, length in 4-byte words) then the data. tnl_pop fills
//     it; dp flow syntax prints it as geneve({class=..,type=..,len=..,0x..}).
//     A megaflow that matched a Geneve packet has mask tun_opt_len = 0xff
//     (exact length, OVS's present.len = 0xff) and, per option, mask header
//     class 0xffff, type 0xff, length byte 0x1f (OVS's
//     tun_metadata_to_geneve_mask__) and the data bits translation consulted.
//
//   OpenFlow ("metadata") form — rules (Match from add-flow), translation's
//     flow, set_field/move/load: `tun_opt_len` is the present bitmap (bit N:
//     tun_metadataN is present; OVS's present.map) and tun_metadataN's value
//     lives in a fixed slot tun_opts[32*N .. 32*N+32), right-aligned (the
//     option data is the slot's last `len` bytes, zeros before it), so the
//     slot read as one big-endian number is the option's value. A rule that
//     matches tun_metadataN has mask bit N of tun_opt_len set (and key bit N
//     set, unless it matches "not present", OVS's =NP), and its value's
//     mask over the slot. Fixed slots (where OVS allocates the 256 bytes as
//     options are mapped) keep the OpenFlow form independent of the map, so
//     a Match parses and prints without one; the cost: keel maps options of
//     at most kTunMetadataSlot (32) data bytes, where OVS takes 124.
//
// Translation converts: from_geneve_udpif() (raw key -> metadata form, per
// the bridge's table) when a packet from a Geneve tunnel is translated;
// to_geneve_options() (metadata form -> option bytes for tnl_push's header);
// to_geneve_udpif_mask() (the metadata-form mask translation built -> the
// raw-form mask of the megaflow).
//
// Thread-safety: TlvTable is a plain value (ofproto/tlv_map.h shares
// immutable snapshots of it); the functions are stateless.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "flow/flow_key.h"

namespace keel::flow {

inline constexpr unsigned kTunMetadataFields = 8;     // tun_metadata0..7 (OVS has 64)
inline constexpr unsigned kTunMetadataSlot = 32;      // bytes per field in the metadata form
inline constexpr unsigned kGeneveOptsMax = 252;       // Geneve's opt_len is 6 bits of 4-byte words
inline constexpr uint8_t kGeneveCritType = 0x80;      // option type bit 7: critical
inline constexpr uint32_t kTunOptLenMaskUdpif = 0xff; // raw form: exact options length
static_assert(kTunMetadataFields * kTunMetadataSlot == sizeof(FlowKey{}.tun_opts),
              "the eight fixed slots fill tun_opts exactly");

// Byte offset of tun_metadataN's slot in FlowKey.
constexpr size_t tun_metadata_slot_offset(unsigned idx) {
  return offsetof(FlowKey, tun_opts) + size_t{idx} * kTunMetadataSlot;
}

// One mapping: {class=C,type=T,len=L}->tun_metadataN.
struct TlvMapping {
  uint16_t opt_class = 0;
  uint8_t type = 0;
  uint8_t len = 0;  // data bytes, a multiple of 4, 0..kTunMetadataSlot
  uint8_t index = 0;
  bool operator==(const TlvMapping&) const = default;
};

// A bridge's TLV table (OVS's struct tun_table): at most one mapping per
// index and per (class, type).
class TlvTable {
 public:
  // nullptr when tun_metadataN is not mapped.
  const TlvMapping* at(unsigned index) const;
  const TlvMapping* find(uint16_t opt_class, uint8_t type) const;
  // The mappings in index order.
  std::span<const TlvMapping> mappings() const { return {list_.data(), n_}; }
  bool empty() const { return n_ == 0; }

  // OVS's checks, in order, named by OVS's error codes: index in range
  // (NXTTMFC_BAD_FIELD_IDX), len a multiple of 4 and within keel's slot
  // (NXTTMFC_BAD_OPT_LEN), index not yet mapped (NXTTMFC_ALREADY_MAPPED),
  // (class, type) not yet mapped (NXTTMFC_DUP_ENTRY). On error the table is
  // unchanged.
  Status add(const TlvMapping& m);
  // Removes the mapping of m.index, whatever its class/type/len (as OVS
  // 3.1, which deletes by index only); an unmapped index is no error.
  void del(unsigned index);
  void clear() { n_ = 0; }
  bool operator==(const TlvTable& o) const;

 private:
  std::array<TlvMapping, kTunMetadataFields> list_{};  // sorted by index
  size_t n_ = 0;
};

// Parses "{class=0xffff,type=0x80,len=4}->tun_metadata0[,{...}->tun_metadataN]"
// (ovs-ofctl add-tlv-map / del-tlv-map's argument).
Result<std::vector<TlvMapping>> parse_tlv_mappings(std::string_view text);
// "{class=0xffff,type=0x80,len=4}->tun_metadata0": one mapping, as a
// running-config line's argument.
std::string format_tlv_mapping(const TlvMapping& m);
// ovs-ofctl dump-tlv-map's text after its first line (NXT_TLV_TABLE_REPLY):
// " max option space=256 max fields=8", " allocated option space=N", "",
// " mapping table:", the column header and one row per mapping.
std::string format_tlv_table(const TlvTable& table);

// --- values ------------------------------------------------------------------

// A tun_metadata value as ovs-ofctl writes it: 0x-hex of any length (or a
// decimal number) into `out`, right-aligned (big-endian). Error when it has
// more significant bytes than out.size().
Status parse_tun_metadata_value(std::string_view text, std::span<uint8_t> out);
// ds_put_hex(): "0x" and the bytes from the first non-zero one ("0" for zero).
void put_tun_metadata_hex(std::string& out, std::span<const uint8_t> bytes);

// --- conversions (translation) ---------------------------------------------

// Raw options (key.tun_opts, key.tun_opt_len bytes) -> metadata form in
// `out` (tun_opt_len = present bitmap, slots filled; other tunnel fields
// untouched). OVS's tun_metadata_from_geneve_udpif: an option whose class
// and type are mapped must have the mapped length, an unmapped option with
// the critical bit (type & 0x80) is an error; both give invalid_argument
// ("Invalid Geneve tunnel metadata" in trace) and the packet is dropped.
Status from_geneve_udpif(const TlvTable& table, const FlowKey& raw, FlowKey& out);

// Metadata form -> Geneve option bytes for a tunnel header, in index order
// (OVS's tun_metadata_to_geneve_header). Returns the byte count written to
// `out` (<= kGeneveOptsMax); *crit is set when an option is critical.
// Present fields whose index the table does not map are skipped.
size_t to_geneve_options(const TlvTable& table, const FlowKey& md, std::span<uint8_t, kGeneveOptsMax> out,
                         bool* crit = nullptr);

// The megaflow mask for the raw form from the metadata-form mask
// translation built (`md_mask`: slot bits consulted), for the packet's raw
// options `raw` (OVS's tun_metadata_to_geneve_udpif_mask): writes
// raw_mask.tun_opt_len = 0xff and, per option of `raw`, the exact header
// mask and the data mask of its mapped slot (zero for unmapped options).
// Call it for every packet that came with raw options (tun_opt_len != 0 or
// from a Geneve vport); other tunnel mask fields are untouched.
void to_geneve_udpif_mask(const TlvTable& table, const FlowKey& raw, const FlowKey& md_mask, FlowKey& raw_mask);

}  // namespace keel::flow

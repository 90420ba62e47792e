// Flow text — the pieces both flow syntaxes share: where a token is, how an
// error names it, numbers, addresses, masks and flag sets, read and written
// exactly as Open vSwitch reads and writes them.
//
// The two syntaxes built on this are dp_flow_syntax.h (datapath flows,
// `ovs-appctl dpctl/dump-flows`) and of_match_syntax.h (OpenFlow matches,
// `ovs-ofctl add-flow`). Everything here is control-path code: it allocates
// std::strings freely and never runs per packet.
//
// Errors: every parse function reports a keel::Status whose message names
// the offending text and its 1-based column in the whole input line, in one
// shape: "<what> '<token>' at column <N>[: <detail>]", for example
// "bad IPv4 address '10.0.0.300' at column 20". A Span carries the column of
// its first character so that sub-spans keep reporting true columns.
//
// It also holds the protocol numbers and the small predicates on a Match
// (dl_is, proto_is, is_nd, ...) that both syntaxes use for prerequisites.
//
// Numbers are decimal or 0x-prefixed hexadecimal (no sign, no octal: Open
// vSwitch's OpenFlow parser reads them so; its datapath parser would read a
// leading 0 as octal, which nothing it prints ever has).
//
// Thread-safety: stateless functions.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "flow/flow_key.h"
#include "flow/match.h"

namespace keel::flow::text {

// --- byte order (FlowKey packet fields are big-endian) ---
constexpr uint16_t hton16(uint16_t v) {
  if constexpr (std::endian::native == std::endian::little)
    return static_cast<uint16_t>((v << 8) | (v >> 8));
  else
    return v;
}
constexpr uint32_t hton32(uint32_t v) {
  if constexpr (std::endian::native == std::endian::little)
    return __builtin_bswap32(v);
  else
    return v;
}
constexpr uint64_t hton64(uint64_t v) {
  if constexpr (std::endian::native == std::endian::little)
    return __builtin_bswap64(v);
  else
    return v;
}
constexpr uint16_t ntoh16(uint16_t v) { return hton16(v); }
constexpr uint32_t ntoh32(uint32_t v) { return hton32(v); }
constexpr uint64_t ntoh64(uint64_t v) { return hton64(v); }

// --- positions and errors ---

// A piece of the input and the 1-based column of its first character.
struct Span {
  std::string_view text;
  size_t column = 1;

  Span sub(size_t pos, size_t n = std::string_view::npos) const {
    if (pos > text.size()) pos = text.size();
    return {text.substr(pos, n), column + pos};
  }
  bool empty() const { return text.empty(); }
  size_t size() const { return text.size(); }
};

// "<what> '<token>' at column <N>[: <detail>]", as Errc::invalid_argument.
Status error_at(std::string_view what, const Span& token, std::string_view detail = {});

// Is c one of the separators between items of a list (", \t\r\n")?
constexpr bool is_delimiter(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Index of the ')' that closes the '(' at s[open], or npos.
size_t find_close_paren(std::string_view s, size_t open);

// Splits s at every `sep` outside parentheses. An empty s gives no items.
// Fails on unbalanced parentheses.
Status split_top_level(const Span& s, char sep, std::vector<Span>& out);

// "value/mask" -> value and mask (mask empty and has_mask false without '/').
struct MaskedSpan {
  Span value;
  Span mask;
  bool has_mask = false;
};
MaskedSpan split_mask(const Span& s);

// --- numbers ---

// Decimal or 0x-hex, no sign; false if not a number or over 64 bits.
bool parse_uint(std::string_view s, uint64_t& out);
// One number no larger than `max`; errors name `field`.
Status parse_number(const Span& s, uint64_t max, std::string_view field, uint64_t& out);
// "value[/mask]"; without a mask, mask = max (exact match).
Status parse_masked_number(const Span& s, uint64_t max, std::string_view field, uint64_t& value,
                           uint64_t& mask);

// --- addresses ---
bool parse_ipv4(std::string_view s, be32& out);  // strict dotted quad
bool parse_ipv6(std::string_view s, In6Addr& out);
bool parse_mac(std::string_view s, EthAddr& out);  // xx:xx:xx:xx:xx:xx, 1-2 hex digits each

be32 ipv4_prefix_mask(unsigned bits);     // bits <= 32
In6Addr ipv6_prefix_mask(unsigned bits);  // bits <= 128
int ipv4_cidr_bits(be32 mask);            // prefix length, or -1 if not contiguous
int ipv6_cidr_bits(const In6Addr& mask);  // prefix length, or -1 if not contiguous

// "a.b.c.d", "a.b.c.d/N" or "a.b.c.d/e.f.g.h".
Status parse_masked_ipv4(const Span& s, be32& value, be32& mask);
// "addr", "addr/N" or "addr/mask-addr".
Status parse_masked_ipv6(const Span& s, In6Addr& value, In6Addr& mask);
// "mac" or "mac/mask-mac".
Status parse_masked_mac(const Span& s, EthAddr& value, EthAddr& mask);
// Writes `n` bytes of value & mask into m.key and of mask into m.mask at byte
// offset `off` of the FlowKey (both syntaxes store fields this way).
void put_masked_bytes(Match& m, size_t off, const uint8_t* v, const uint8_t* mask, size_t n);

inline bool is_zero(const EthAddr& a) { return a == EthAddr{}; }
inline bool is_ones(const EthAddr& a) { return a == EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}; }
bool is_zero(const In6Addr& a);
bool is_ones(const In6Addr& a);

// --- flag sets: tcp_flags(...), tunnel flags(...) ---

using FlagName = const char* (*)(uint32_t bit);   // name of one bit, or nullptr
const char* tcp_flag_name(uint32_t bit);          // fin syn rst psh ack urg ece cwr ns [200] [400] [800]
const char* tun_flag_name(uint32_t bit);          // oam df csum key
inline constexpr uint32_t kTcpFlagsMax = 0x0fff;  // the 12 bits of the TCP header's flags
inline constexpr uint32_t kTunFlagsMax = kTunOam | kTunDontFragment | kTunCsum | kTunKey;

// Accepts "N/M" (numbers), "+a-b..." (each named bit set or clear, the rest
// wildcarded) and "a|b|N" (exactly these bits; mask = allowed).
Status parse_flags(const Span& s, FlagName names, uint32_t allowed, std::string_view field, uint32_t& flags,
                   uint32_t& mask);
// Open vSwitch's format_flags_masked(): "a|b" (or "0") when mask == max,
// "0/0" when mask is empty, "+a-b" otherwise.
void put_flags(std::string& out, FlagName names, uint32_t flags, uint32_t mask, uint32_t max);

// --- writing ---
void put_dec(std::string& out, uint64_t v);
void put_hex(std::string& out, uint64_t v, int min_digits = 1);  // "0x" + lowercase digits
void put_hex_alt(std::string& out, uint64_t v);                  // printf("%#x"): "0" for 0, else "0x.."
void put_ipv4(std::string& out, be32 a);
void put_ipv6(std::string& out, const In6Addr& a);  // inet_ntop's canonical form
void put_mac(std::string& out, const EthAddr& a);
// Open vSwitch's ip_format_masked(): "/N" when contiguous, else "/a.b.c.d".
void put_ipv4_masked_cidr(std::string& out, be32 v, be32 m);
void put_ipv6_masked_cidr(std::string& out, const In6Addr& v, const In6Addr& m);

// --- protocol numbers and match predicates shared by both syntaxes ---
inline constexpr uint16_t kEthTypeIp = 0x0800;
inline constexpr uint16_t kEthTypeArp = 0x0806;
inline constexpr uint16_t kEthTypeRarp = 0x8035;
inline constexpr uint16_t kEthTypeIpv6 = 0x86dd;
inline constexpr uint16_t kEthTypeVlan = 0x8100;
inline constexpr uint16_t kEthTypeQinQ = 0x88a8;
inline constexpr uint8_t kProtoIcmp = 1, kProtoTcp = 6, kProtoUdp = 17, kProtoIcmpv6 = 58, kProtoSctp = 132;
inline constexpr uint16_t kVlanCfi = 0x1000, kVlanVidMask = 0x0fff, kVlanPcpMask = 0xe000;
inline constexpr uint8_t kFragMask = kFragAny | kFragLater;
inline constexpr uint8_t kIpDscpMask = 0xfc, kIpEcnMask = 0x03;
inline constexpr uint8_t kNdSolicit = 135, kNdAdvert = 136;

// dl_type matched exactly and equal to `type`.
inline bool dl_is(const Match& m, uint16_t type) {
  return m.mask.dl_type == 0xffff && m.key.dl_type == hton16(type);
}
inline bool is_ip_any(const Match& m) { return dl_is(m, kEthTypeIp) || dl_is(m, kEthTypeIpv6); }
inline bool is_arp_any(const Match& m) { return dl_is(m, kEthTypeArp) || dl_is(m, kEthTypeRarp); }
// IPv4 or IPv6 with nw_proto matched exactly and equal to `p`.
inline bool proto_is(const Match& m, uint8_t p) {
  return is_ip_any(m) && m.mask.nw_proto == 0xff && m.key.nw_proto == p;
}
inline bool later_fragment(const Match& m) { return (m.key.nw_frag & kFragLater) != 0; }
// ICMP type (low byte of tp_src) matched exactly and equal to `t`.
inline bool icmp_type_is(const Match& m, uint8_t t) {
  return (ntoh16(m.mask.tp_src) & 0xff) == 0xff && (ntoh16(m.key.tp_src) & 0xff) == t;
}
// An IPv6 neighbour solicitation or advertisement (Open vSwitch's is_nd()).
inline bool is_nd(const Match& m) {
  return dl_is(m, kEthTypeIpv6) && proto_is(m, kProtoIcmpv6) &&
         (icmp_type_is(m, kNdSolicit) || icmp_type_is(m, kNdAdvert)) && m.key.tp_dst == 0;
}

}  // namespace keel::flow::text

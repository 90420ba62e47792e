// Tunnel metadata: see tun_metadata.h.
#include "flow/tun_metadata.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "flow/flow_text.h"

namespace keel::flow {

namespace {

const uint8_t* slot(const FlowKey& k, unsigned idx) {
  return reinterpret_cast<const uint8_t*>(&k) + tun_metadata_slot_offset(idx);
}

std::string mapping_text(const TlvMapping& m) { return format_tlv_mapping(m); }

}  // namespace

// --- TlvTable ----------------------------------------------------------------

const TlvMapping* TlvTable::at(unsigned index) const {
  for (size_t i = 0; i < n_; ++i)
    if (list_[i].index == index) return &list_[i];
  return nullptr;
}

const TlvMapping* TlvTable::find(uint16_t opt_class, uint8_t type) const {
  for (size_t i = 0; i < n_; ++i)
    if (list_[i].opt_class == opt_class && list_[i].type == type) return &list_[i];
  return nullptr;
}

Status TlvTable::add(const TlvMapping& m) {
  if (m.index >= kTunMetadataFields)
    return invalid("NXTTMFC_BAD_FIELD_IDX: tlv table field index (" + std::to_string(m.index) +
                   ") is too large (max " + std::to_string(kTunMetadataFields - 1) + ")");
  if (m.len % 4 || m.len > kTunMetadataSlot)
    return invalid("NXTTMFC_BAD_OPT_LEN: tlv table option length (" + std::to_string(m.len) +
                   ") is not a valid option size (a multiple of 4, at most " + std::to_string(kTunMetadataSlot) +
                   " in keel)");
  if (at(m.index)) return invalid("NXTTMFC_ALREADY_MAPPED: tun_metadata" + std::to_string(m.index) + " is already mapped");
  if (find(m.opt_class, m.type))
    return invalid("NXTTMFC_DUP_ENTRY: " + mapping_text(m) + ": this class and type are already mapped");
  size_t pos = 0;
  while (pos < n_ && list_[pos].index < m.index) ++pos;
  for (size_t i = n_; i > pos; --i) list_[i] = list_[i - 1];
  list_[pos] = m;
  ++n_;
  return {};
}

void TlvTable::del(unsigned index) {
  for (size_t i = 0; i < n_; ++i) {
    if (list_[i].index != index) continue;
    for (size_t j = i + 1; j < n_; ++j) list_[j - 1] = list_[j];
    --n_;
    list_[n_] = {};
    return;
  }
}

bool TlvTable::operator==(const TlvTable& o) const {
  return n_ == o.n_ && std::equal(list_.begin(), list_.begin() + static_cast<long>(n_), o.list_.begin());
}

// --- text ----------------------------------------------------------------------

namespace {

// "{class=0xffff,type=0x80,len=4}->tun_metadata0" at s; advances s.
Status parse_one(std::string_view& s, TlvMapping& out) {
  auto bad = [&] { return invalid("invalid tlv mapping '" + std::string(s) +
                                  "' (expected {class=C,type=T,len=L}->tun_metadataN)"); };
  std::string_view in = s;
  if (in.empty() || in[0] != '{') return bad();
  size_t close = in.find('}');
  if (close == std::string_view::npos) return bad();
  std::string_view body = in.substr(1, close - 1);
  bool have[3] = {false, false, false};
  uint64_t vals[3] = {0, 0, 0};
  static constexpr std::string_view kKeys[3] = {"class", "type", "len"};
  static constexpr uint64_t kMax[3] = {0xffff, 0xff, 0xff};
  while (!body.empty()) {
    size_t comma = body.find(',');
    std::string_view kv = body.substr(0, comma);
    body = comma == std::string_view::npos ? std::string_view{} : body.substr(comma + 1);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) return bad();
    std::string_view k = kv.substr(0, eq), v = kv.substr(eq + 1);
    int which = -1;
    for (int i = 0; i < 3; ++i)
      if (k == kKeys[i]) which = i;
    uint64_t n = 0;
    if (which < 0 || have[which] || !text::parse_uint(v, n)) return bad();
    if (n > kMax[which])
      return invalid("invalid tlv mapping: " + std::string(k) + "=" + std::string(v) + " is out of range (max " +
                     std::to_string(kMax[which]) + ")");
    have[which] = true;
    vals[which] = n;
  }
  if (!have[0] || !have[1] || !have[2]) return bad();
  std::string_view rest = in.substr(close + 1);
  constexpr std::string_view kArrow = "->tun_metadata";
  if (rest.substr(0, kArrow.size()) != kArrow) return bad();
  rest.remove_prefix(kArrow.size());
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  uint64_t idx = 0;
  if (!digits || digits > 3 || !text::parse_uint(rest.substr(0, digits), idx)) return bad();
  if (idx > 255) return invalid("invalid tlv mapping: tun_metadata" + std::to_string(idx) + " does not exist");
  out.opt_class = static_cast<uint16_t>(vals[0]);
  out.type = static_cast<uint8_t>(vals[1]);
  out.len = static_cast<uint8_t>(vals[2]);
  out.index = static_cast<uint8_t>(idx);
  s = rest.substr(digits);
  return {};
}

}  // namespace

Result<std::vector<TlvMapping>> parse_tlv_mappings(std::string_view text) {
  std::vector<TlvMapping> out;
  std::string_view s = text;
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.empty()) return invalid("missing tlv mapping ({class=C,type=T,len=L}->tun_metadataN)");
  for (;;) {
    TlvMapping m;
    if (Status st = parse_one(s, m); !st.ok()) return st;
    out.push_back(m);
    if (s.empty()) break;
    if (s[0] != ',') return invalid("invalid tlv mapping: unexpected '" + std::string(s) + "'");
    s.remove_prefix(1);
  }
  return out;
}

std::string format_tlv_mapping(const TlvMapping& m) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "{class=%#x,type=%#x,len=%u}->tun_metadata%u", m.opt_class, m.type, m.len,
                m.index);
  return buf;
}

std::string format_tlv_table(const TlvTable& table) {
  unsigned allocated = 0;
  for (const TlvMapping& m : table.mappings()) allocated += m.len;
  std::string s = " max option space=" + std::to_string(sizeof(FlowKey{}.tun_opts)) +
                  " max fields=" + std::to_string(kTunMetadataFields) + "\n";
  s += " allocated option space=" + std::to_string(allocated) + "\n\n";
  s += " mapping table:\n";
  s += "  class  type  length  match field\n";
  s += " ------  ----  ------  --------------\n";
  for (const TlvMapping& m : table.mappings()) {
    char buf[96];
    // ofp-print's "%#6x  %#4x  %6u  tun_metadata%u" (printf's %#x: "0" for 0).
    std::snprintf(buf, sizeof buf, " %#6x  %#4x  %6u  tun_metadata%u\n", m.opt_class, m.type, m.len, m.index);
    s += buf;
  }
  return s;
}

// --- values ------------------------------------------------------------------

Status parse_tun_metadata_value(std::string_view text, std::span<uint8_t> out) {
  std::fill(out.begin(), out.end(), uint8_t{0});
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    std::string_view h = text.substr(2);
    while (h.size() > 1 && h[0] == '0') h.remove_prefix(1);
    if ((h.size() + 1) / 2 > out.size())
      return invalid("value " + std::string(text) + " is longer than " + std::to_string(out.size()) + " bytes");
    size_t o = out.size();
    for (size_t i = h.size(); i > 0; i -= std::min<size_t>(i, 2)) {
      size_t start = i >= 2 ? i - 2 : 0;
      unsigned byte = 0;
      for (size_t j = start; j < i; ++j) {
        char c = h[j];
        unsigned d = c >= '0' && c <= '9'   ? unsigned(c - '0')
                     : c >= 'a' && c <= 'f' ? unsigned(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? unsigned(c - 'A' + 10)
                                            : 16u;
        if (d > 15) return invalid("bad hex value " + std::string(text));
        byte = byte * 16 + d;
      }
      out[--o] = static_cast<uint8_t>(byte);
    }
    return {};
  }
  uint64_t v = 0;
  if (!text::parse_uint(text, v)) return invalid("bad value " + std::string(text) + " (expected 0x<hex> or a number)");
  for (size_t i = out.size(); i-- > 0 && v;) {
    out[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
  if (v) return invalid("value " + std::string(text) + " is longer than " + std::to_string(out.size()) + " bytes");
  return {};
}

void put_tun_metadata_hex(std::string& out, std::span<const uint8_t> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  bool printed = false;
  for (uint8_t b : bytes) {
    if (!b && !printed) continue;
    if (!printed) {
      out += "0x";
      if (b >> 4) out += kHex[b >> 4];
      out += kHex[b & 15];
      printed = true;
    } else {
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  if (!printed) out += '0';
}

// --- conversions -----------------------------------------------------------

Status from_geneve_udpif(const TlvTable& table, const FlowKey& raw, FlowKey& out) {
  // Read everything first: raw and out may be the same key.
  uint8_t opts[kGeneveOptsMax];
  size_t len = std::min<size_t>(raw.tun_opt_len, kGeneveOptsMax);
  if (raw.tun_opt_len > kGeneveOptsMax) return invalid("Invalid Geneve tunnel metadata");
  std::memcpy(opts, raw.tun_opts, len);
  uint8_t slots[sizeof(FlowKey{}.tun_opts)] = {};
  uint32_t present = 0;
  size_t off = 0;
  while (off < len) {
    if (len - off < 4) return invalid("Invalid Geneve tunnel metadata");
    uint16_t cls = static_cast<uint16_t>(opts[off] << 8 | opts[off + 1]);
    uint8_t type = opts[off + 2];
    size_t data = size_t{opts[off + 3] & 0x1fu} * 4;
    if (4 + data > len - off) return invalid("Invalid Geneve tunnel metadata");
    if (const TlvMapping* m = table.find(cls, type)) {
      if (m->len != data) return invalid("Invalid Geneve tunnel metadata");
      std::memcpy(slots + size_t{m->index} * kTunMetadataSlot + kTunMetadataSlot - data, opts + off + 4, data);
      present |= 1u << m->index;
    } else if (type & kGeneveCritType) {
      return invalid("Invalid Geneve tunnel metadata");
    }
    off += 4 + data;
  }
  std::memcpy(out.tun_opts, slots, sizeof slots);
  out.tun_opt_len = present;
  return {};
}

size_t to_geneve_options(const TlvTable& table, const FlowKey& md, std::span<uint8_t, kGeneveOptsMax> out,
                         bool* crit) {
  size_t n = 0;
  bool c = false;
  for (const TlvMapping& m : table.mappings()) {
    if (!(md.tun_opt_len & (1u << m.index))) continue;
    if (n + 4 + m.len > out.size()) break;
    out[n] = static_cast<uint8_t>(m.opt_class >> 8);
    out[n + 1] = static_cast<uint8_t>(m.opt_class);
    out[n + 2] = m.type;
    out[n + 3] = static_cast<uint8_t>(m.len / 4);
    std::memcpy(out.data() + n + 4, slot(md, m.index) + kTunMetadataSlot - m.len, m.len);
    c |= (m.type & kGeneveCritType) != 0;
    n += 4 + m.len;
  }
  if (crit) *crit = c;
  return n;
}

void to_geneve_udpif_mask(const TlvTable& table, const FlowKey& raw, const FlowKey& md_mask, FlowKey& raw_mask) {
  uint8_t out[sizeof(FlowKey{}.tun_opts)] = {};
  size_t len = std::min<size_t>(raw.tun_opt_len, kGeneveOptsMax);
  size_t off = 0;
  while (off + 4 <= len) {
    uint16_t cls = static_cast<uint16_t>(raw.tun_opts[off] << 8 | raw.tun_opts[off + 1]);
    uint8_t type = raw.tun_opts[off + 2];
    size_t data = size_t{raw.tun_opts[off + 3] & 0x1fu} * 4;
    if (4 + data > len - off) break;
    out[off] = 0xff;
    out[off + 1] = 0xff;
    out[off + 2] = 0xff;
    out[off + 3] = 0x1f;
    const TlvMapping* m = table.find(cls, type);
    if (m && m->len == data)
      std::memcpy(out + off + 4, slot(md_mask, m->index) + kTunMetadataSlot - data, data);
    off += 4 + data;
  }
  std::memcpy(raw_mask.tun_opts, out, sizeof out);
  raw_mask.tun_opt_len = kTunOptLenMaskUdpif;
}

}  // namespace keel::flow

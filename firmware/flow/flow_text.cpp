// Flow text helpers: see flow_text.h.
#include "flow/flow_text.h"

#include <arpa/inet.h>

#include <cstring>

namespace keel::flow::text {

Status error_at(std::string_view what, const Span& token, std::string_view detail) {
  std::string msg(what);
  msg += " '";
  msg += token.text;
  msg += "' at column ";
  msg += std::to_string(token.column);
  if (!detail.empty()) {
    msg += ": ";
    msg += detail;
  }
  return invalid(std::move(msg));
}

size_t find_close_paren(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '(') {
      ++depth;
    } else if (s[i] == ')') {
      if (--depth == 0) return i;
    }
  }
  return std::string_view::npos;
}

Status split_top_level(const Span& s, char sep, std::vector<Span>& out) {
  out.clear();
  if (s.empty()) return {};
  int depth = 0;
  size_t start = 0;
  size_t open_at = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s.text[i];
    if (c == '(') {
      if (depth++ == 0) open_at = i;
    } else if (c == ')') {
      if (depth == 0) return error_at("unbalanced ')'", s.sub(i, 1));
      --depth;
    } else if (c == sep && depth == 0) {
      out.push_back(s.sub(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) return error_at("unbalanced '('", s.sub(open_at), "no matching ')'");
  out.push_back(s.sub(start));
  return {};
}

MaskedSpan split_mask(const Span& s) {
  size_t slash = s.text.find('/');
  if (slash == std::string_view::npos) return {s, s.sub(s.size()), false};
  return {s.sub(0, slash), s.sub(slash + 1), true};
}

// --- numbers ---

bool parse_uint(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    std::string_view d = s.substr(2);
    for (char c : d) {
      unsigned digit;
      if (c >= '0' && c <= '9')
        digit = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        digit = static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        digit = static_cast<unsigned>(c - 'A' + 10);
      else
        return false;
      if (v >> 60) return false;
      v = (v << 4) | digit;
    }
  } else {
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      uint64_t digit = static_cast<uint64_t>(c - '0');
      if (v > (UINT64_MAX - digit) / 10) return false;
      v = v * 10 + digit;
    }
  }
  out = v;
  return true;
}

static std::string range_detail(std::string_view field, uint64_t max) {
  std::string d(field);
  d += " must be 0..";
  d += std::to_string(max);
  return d;
}

Status parse_number(const Span& s, uint64_t max, std::string_view field, uint64_t& out) {
  uint64_t v;
  if (!parse_uint(s.text, v)) {
    // A run of digits too long for 64 bits is out of range, not malformed.
    bool digits = !s.empty();
    for (char c : s.text) digits &= (c >= '0' && c <= '9');
    if (digits) return error_at("out-of-range value", s, range_detail(field, max));
    return error_at("bad " + std::string(field) + " value", s, "expected a decimal or 0x-hex number");
  }
  if (v > max) return error_at("out-of-range value", s, range_detail(field, max));
  out = v;
  return {};
}

Status parse_masked_number(const Span& s, uint64_t max, std::string_view field, uint64_t& value,
                           uint64_t& mask) {
  MaskedSpan ms = split_mask(s);
  if (Status st = parse_number(ms.value, max, field, value); !st) return st;
  if (!ms.has_mask) {
    mask = max;
    return {};
  }
  std::string mfield(field);
  mfield += " mask";
  return parse_number(ms.mask, max, mfield, mask);
}

// --- addresses ---

bool parse_ipv4(std::string_view s, be32& out) {
  uint32_t host = 0;
  int parts = 0;
  size_t i = 0;
  while (parts < 4) {
    unsigned v = 0;
    size_t digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 4) {
      v = v * 10 + static_cast<unsigned>(s[i] - '0');
      ++i;
      ++digits;
    }
    if (digits == 0 || digits > 3 || v > 255) return false;
    host = (host << 8) | v;
    ++parts;
    if (parts < 4) {
      if (i >= s.size() || s[i] != '.') return false;
      ++i;
    }
  }
  if (i != s.size()) return false;
  out = hton32(host);
  return true;
}

bool parse_ipv6(std::string_view s, In6Addr& out) {
  // INET6_ADDRSTRLEN - 1 is the longest text form (an IPv4-mapped address).
  if (s.empty() || s.size() > 45 || s.find('\0') != std::string_view::npos) return false;
  char buf[46];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  In6Addr a;
  if (inet_pton(AF_INET6, buf, a.b) != 1) return false;
  out = a;
  return true;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool parse_mac(std::string_view s, EthAddr& out) {
  EthAddr a;
  size_t i = 0;
  for (int byte = 0; byte < 6; ++byte) {
    int v = 0, digits = 0;
    while (i < s.size() && digits < 3 && hex_digit(s[i]) >= 0) {
      v = v * 16 + hex_digit(s[i]);
      ++i;
      ++digits;
    }
    if (digits == 0 || digits > 2) return false;
    a.b[byte] = static_cast<uint8_t>(v);
    if (byte < 5) {
      if (i >= s.size() || s[i] != ':') return false;
      ++i;
    }
  }
  if (i != s.size()) return false;
  out = a;
  return true;
}

be32 ipv4_prefix_mask(unsigned bits) {
  return bits == 0 ? 0 : hton32(bits >= 32 ? UINT32_MAX : ~uint32_t{0} << (32 - bits));
}

In6Addr ipv6_prefix_mask(unsigned bits) {
  In6Addr m{};
  for (unsigned i = 0; i < 16 && bits > 0; ++i) {
    unsigned take = bits >= 8 ? 8 : bits;
    m.b[i] = static_cast<uint8_t>(0xff00u >> take);
    bits -= take;
  }
  return m;
}

int ipv4_cidr_bits(be32 mask) {
  uint32_t h = ntoh32(mask);
  int ones = std::countl_one(h);
  return (ones == 32 || (h << ones) == 0) ? ones : -1;
}

int ipv6_cidr_bits(const In6Addr& mask) {
  int bits = 0;
  unsigned i = 0;
  for (; i < 16 && mask.b[i] == 0xff; ++i) bits += 8;
  if (i == 16) return bits;
  uint8_t partial = mask.b[i];
  int ones = std::countl_one(partial);
  if (static_cast<uint8_t>(partial << ones) != 0) return -1;
  bits += ones;
  for (++i; i < 16; ++i)
    if (mask.b[i]) return -1;
  return bits;
}

Status parse_masked_ipv4(const Span& s, be32& value, be32& mask) {
  MaskedSpan ms = split_mask(s);
  if (!parse_ipv4(ms.value.text, value)) return error_at("bad IPv4 address", ms.value);
  if (!ms.has_mask) {
    mask = UINT32_MAX;
    return {};
  }
  if (ms.mask.text.find('.') != std::string_view::npos) {
    if (!parse_ipv4(ms.mask.text, mask)) return error_at("bad IPv4 mask", ms.mask);
    return {};
  }
  uint64_t bits;
  if (!parse_uint(ms.mask.text, bits) || bits > 32)
    return error_at("bad IPv4 mask", ms.mask, "a prefix length is 0..32");
  mask = ipv4_prefix_mask(static_cast<unsigned>(bits));
  return {};
}

Status parse_masked_ipv6(const Span& s, In6Addr& value, In6Addr& mask) {
  MaskedSpan ms = split_mask(s);
  if (!parse_ipv6(ms.value.text, value)) return error_at("bad IPv6 address", ms.value);
  if (!ms.has_mask) {
    mask = ipv6_prefix_mask(128);
    return {};
  }
  if (ms.mask.text.find(':') != std::string_view::npos) {
    if (!parse_ipv6(ms.mask.text, mask)) return error_at("bad IPv6 mask", ms.mask);
    return {};
  }
  uint64_t bits;
  if (!parse_uint(ms.mask.text, bits) || bits > 128)
    return error_at("bad IPv6 mask", ms.mask, "a prefix length is 0..128");
  mask = ipv6_prefix_mask(static_cast<unsigned>(bits));
  return {};
}

Status parse_masked_mac(const Span& s, EthAddr& value, EthAddr& mask) {
  MaskedSpan ms = split_mask(s);
  if (!parse_mac(ms.value.text, value)) return error_at("bad Ethernet address", ms.value);
  if (!ms.has_mask) {
    mask = EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
    return {};
  }
  if (!parse_mac(ms.mask.text, mask)) return error_at("bad Ethernet mask", ms.mask);
  return {};
}

bool is_zero(const In6Addr& a) { return a == In6Addr{}; }
bool is_ones(const In6Addr& a) { return ipv6_cidr_bits(a) == 128; }

// --- flags ---

const char* tcp_flag_name(uint32_t bit) {
  switch (bit) {
    case 0x001:
      return "fin";
    case 0x002:
      return "syn";
    case 0x004:
      return "rst";
    case 0x008:
      return "psh";
    case 0x010:
      return "ack";
    case 0x020:
      return "urg";
    case 0x040:
      return "ece";
    case 0x080:
      return "cwr";
    case 0x100:
      return "ns";
    case 0x200:
      return "[200]";
    case 0x400:
      return "[400]";
    case 0x800:
      return "[800]";
    default:
      return nullptr;
  }
}

const char* tun_flag_name(uint32_t bit) {
  switch (bit) {
    case kTunDontFragment:
      return "df";
    case kTunCsum:
      return "csum";
    case kTunKey:
      return "key";
    case kTunOam:
      return "oam";
    default:
      return nullptr;
  }
}

static uint32_t flag_by_name(FlagName names, uint32_t allowed, std::string_view name) {
  for (uint32_t bit = 1; bit && bit <= allowed; bit <<= 1) {
    if (!(allowed & bit)) continue;
    const char* n = names(bit);
    if (n && name == n) return bit;
  }
  return 0;
}

Status parse_flags(const Span& s, FlagName names, uint32_t allowed, std::string_view field, uint32_t& flags,
                   uint32_t& mask) {
  std::string what = "unknown ";
  what += field;
  what += " flag";
  if (s.empty()) return error_at("missing value for", s, std::string(field) + " needs flags");
  if (s.text.find('/') != std::string_view::npos) {  // "value/mask", numbers
    uint64_t v, m;
    if (Status st = parse_masked_number(s, allowed, field, v, m); !st) return st;
    flags = static_cast<uint32_t>(v & m);
    mask = static_cast<uint32_t>(m);
    return {};
  }
  if (s.text[0] == '+' || s.text[0] == '-') {  // "+syn-ack": named bits set or clear
    uint32_t f = 0, m = 0;
    size_t i = 0;
    while (i < s.size()) {
      char sign = s.text[i];
      if (sign != '+' && sign != '-')
        return error_at("bad", s.sub(i), std::string(field) + " flags must each start with '+' or '-'");
      size_t end = s.text.find_first_of("+-", i + 1);
      if (end == std::string_view::npos) end = s.size();
      Span name = s.sub(i + 1, end - i - 1);
      uint32_t bit = flag_by_name(names, allowed, name.text);
      if (!bit) return error_at(what, name);
      if (m & bit) return error_at(std::string("repeated ") + std::string(field) + " flag", name);
      m |= bit;
      if (sign == '+') f |= bit;
      i = end;
    }
    flags = f;
    mask = m;
    return {};
  }
  uint32_t f = 0;  // "syn|ack|0x100": exactly these bits
  size_t i = 0;
  while (i <= s.size()) {
    size_t end = s.text.find('|', i);
    if (end == std::string_view::npos) end = s.size();
    Span part = s.sub(i, end - i);
    uint64_t v;
    if (parse_uint(part.text, v)) {
      if (v & ~uint64_t{allowed}) return error_at(std::string("out-of-range ") + std::string(field), part);
      f |= static_cast<uint32_t>(v);
    } else {
      uint32_t bit = flag_by_name(names, allowed, part.text);
      if (!bit) return error_at(what, part);
      f |= bit;
    }
    i = end + 1;
  }
  flags = f;
  mask = allowed;
  return {};
}

void put_flags(std::string& out, FlagName names, uint32_t flags, uint32_t mask, uint32_t max) {
  mask &= max;
  flags &= mask;
  if (mask == max) {
    if (!flags) {
      out += '0';
      return;
    }
    bool first = true;
    uint32_t unknown = 0;
    for (uint32_t f = flags; f; f &= f - 1) {
      uint32_t bit = f & (~f + 1);
      const char* n = names(bit);
      if (!n) {
        unknown |= bit;
        continue;
      }
      if (!first) out += '|';
      out += n;
      first = false;
    }
    if (unknown) {
      if (!first) out += '|';
      put_hex(out, unknown);
    }
    return;
  }
  if (!mask) {
    out += "0/0";
    return;
  }
  for (uint32_t m = mask; m; m &= m - 1) {
    uint32_t bit = m & (~m + 1);
    const char* n = names(bit);
    out += (flags & bit) ? '+' : '-';
    out += n ? n : "[Unknown]";
  }
}

// --- writing ---

void put_dec(std::string& out, uint64_t v) { out += std::to_string(v); }

void put_hex(std::string& out, uint64_t v, int min_digits) {
  char buf[16];
  int n = 0;
  do {
    buf[n++] = "0123456789abcdef"[v & 0xf];
    v >>= 4;
  } while (v);
  out += "0x";
  for (int i = n; i < min_digits; ++i) out += '0';
  while (n) out += buf[--n];
}

void put_hex_alt(std::string& out, uint64_t v) {
  if (v == 0)
    out += '0';
  else
    put_hex(out, v);
}

void put_ipv4(std::string& out, be32 a) {
  uint32_t h = ntoh32(a);
  for (int i = 3; i >= 0; --i) {
    put_dec(out, (h >> (8 * i)) & 0xff);
    if (i) out += '.';
  }
}

void put_ipv6(std::string& out, const In6Addr& a) {
  char buf[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, a.b, buf, sizeof buf)) out += buf;
}

void put_mac(std::string& out, const EthAddr& a) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 6; ++i) {
    if (i) out += ':';
    out += kHex[a.b[i] >> 4];
    out += kHex[a.b[i] & 0xf];
  }
}

void put_ipv4_masked_cidr(std::string& out, be32 v, be32 m) {
  put_ipv4(out, v);
  if (m == UINT32_MAX) return;
  out += '/';
  int bits = ipv4_cidr_bits(m);
  if (bits >= 0)
    put_dec(out, static_cast<uint64_t>(bits));
  else
    put_ipv4(out, m);
}

void put_ipv6_masked_cidr(std::string& out, const In6Addr& v, const In6Addr& m) {
  put_ipv6(out, v);
  if (is_ones(m)) return;
  out += '/';
  int bits = ipv6_cidr_bits(m);
  if (bits >= 0)
    put_dec(out, static_cast<uint64_t>(bits));
  else
    put_ipv6(out, m);
}

void put_masked_bytes(Match& m, size_t off, const uint8_t* v, const uint8_t* mask, size_t n) {
  uint8_t* kp = reinterpret_cast<uint8_t*>(&m.key) + off;
  uint8_t* mp = reinterpret_cast<uint8_t*>(&m.mask) + off;
  for (size_t i = 0; i < n; ++i) {
    kp[i] = v[i] & mask[i];
    mp[i] = mask[i];
  }
}

}  // namespace keel::flow::text

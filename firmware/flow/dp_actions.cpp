// Datapath actions: see dp_actions.h.
//
// Layout of this file: the set field tables (one row per `field=` of a set
// header: its kind and its offset in SetEth/SetIpv4/SetIpv6/SetL4), shared
// by the builder (normalisation), the validator, the parser and the printer;
// then the builder, the validator, the parser (a recursive descent over the
// text, so that every error keeps its column) and the printer
// (format_odp_action()'s forms).
#include "flow/dp_actions.h"

#include <algorithm>
#include <array>

#include "flow/flow_text.h"
#include "packet/tunnel_header.h"

namespace keel::flow {
namespace {

using namespace text;

// --- set field tables -----------------------------------------------------

enum class FieldKind : uint8_t {
  mac,    // xx:..:xx, "/mac" mask            (format_eth)
  ipv4,   // dotted, "/dotted" mask           (format_ipv4)
  ipv6,   // inet_ntop, "/addr" mask          (format_in6_addr)
  u8,     // decimal, "/0x.." mask            (format_u8u)
  u8x,    // %#x, "/0x.." mask                (format_u8x)
  be16,   // decimal, "/0x.." mask            (format_be16)
  label,  // 20-bit be32, %#x                 (format_ipv6_label)
  frag,   // no|first|later, never masked     (format_frag)
};

constexpr size_t kind_size(FieldKind k) {
  switch (k) {
    case FieldKind::mac:
      return 6;
    case FieldKind::ipv4:
      return 4;
    case FieldKind::ipv6:
      return 16;
    case FieldKind::u8:
    case FieldKind::u8x:
    case FieldKind::frag:
      return 1;
    case FieldKind::be16:
      return 2;
    case FieldKind::label:
      return 4;
  }
  return 0;
}

struct SetField {
  std::string_view name;
  FieldKind kind;
  size_t offset;
};

#define SF(T, name, kind, field) \
  SetField { name, FieldKind::kind, offsetof(T, field) }
// In Open vSwitch's printing order (format_odp_key_attr__()).
constexpr SetField kEthFields[] = {SF(SetEth, "src", mac, src), SF(SetEth, "dst", mac, dst)};
constexpr SetField kIpv4Fields[] = {
    SF(SetIpv4, "src", ipv4, src), SF(SetIpv4, "dst", ipv4, dst), SF(SetIpv4, "proto", u8, proto),
    SF(SetIpv4, "tos", u8x, tos),  SF(SetIpv4, "ttl", u8, ttl),   SF(SetIpv4, "frag", frag, frag),
};
constexpr SetField kIpv6Fields[] = {
    SF(SetIpv6, "src", ipv6, src),   SF(SetIpv6, "dst", ipv6, dst),      SF(SetIpv6, "label", label, label),
    SF(SetIpv6, "proto", u8, proto), SF(SetIpv6, "tclass", u8x, tclass), SF(SetIpv6, "hlimit", u8, hlimit),
    SF(SetIpv6, "frag", frag, frag),
};
constexpr SetField kL4Fields[] = {SF(SetL4, "src", be16, src), SF(SetL4, "dst", be16, dst)};
constexpr SetField kIcmpFields[] = {SF(SetIcmp, "type", u8, type), SF(SetIcmp, "code", u8, code)};
constexpr SetField kArpFields[] = {SF(SetArp, "sip", ipv4, sip), SF(SetArp, "tip", ipv4, tip),
                                   SF(SetArp, "op", be16, op), SF(SetArp, "sha", mac, sha),
                                   SF(SetArp, "tha", mac, tha)};
#undef SF

struct SetSpec {
  SetHeader header;
  std::string_view name;
  size_t size;  // of one of key / mask
  std::span<const SetField> fields;
};
constexpr SetSpec kSetSpecs[] = {
    {SetHeader::kEth, "eth", sizeof(SetEth), kEthFields},
    {SetHeader::kIpv4, "ipv4", sizeof(SetIpv4), kIpv4Fields},
    {SetHeader::kIpv6, "ipv6", sizeof(SetIpv6), kIpv6Fields},
    {SetHeader::kTcp, "tcp", sizeof(SetL4), kL4Fields},
    {SetHeader::kUdp, "udp", sizeof(SetL4), kL4Fields},
    {SetHeader::kArp, "arp", sizeof(SetArp), kArpFields},
    {SetHeader::kSctp, "sctp", sizeof(SetL4), kL4Fields},
    {SetHeader::kIcmp, "icmp", sizeof(SetIcmp), kIcmpFields},
    {SetHeader::kIcmpv6, "icmpv6", sizeof(SetIcmp), kIcmpFields},
};
constexpr size_t kMaxSetSize = sizeof(SetIpv6);

const SetSpec* set_spec(SetHeader h) {
  for (const SetSpec& s : kSetSpecs)
    if (s.header == h) return &s;
  return nullptr;
}
const SetSpec* set_spec(std::string_view name) {
  for (const SetSpec& s : kSetSpecs)
    if (s.name == name) return &s;
  return nullptr;
}

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

constexpr uint32_t kLabelMask = 0x000fffff;
constexpr uint8_t kFragTypeMax = 2;  // OVS_FRAG_TYPE_LATER
constexpr const char* kFragNames[] = {"no", "first", "later"};

uint32_t load_be32_host(const uint8_t* p) {
  be32 v;
  std::memcpy(&v, p, 4);
  return ntoh32(v);
}
uint16_t load_be16_host(const uint8_t* p) {
  be16 v;
  std::memcpy(&v, p, 2);
  return ntoh16(v);
}

// Brings a key/mask pair to the canonical form the encoding promises: a
// field whose mask is zero has key zero; the label keeps its 20 bits.
// Returns false (and leaves them) if a frag field is malformed.
bool normalise_set(const SetSpec& spec, uint8_t* key, uint8_t* mask) {
  for (const SetField& f : spec.fields) {
    uint8_t* k = key + f.offset;
    uint8_t* m = mask + f.offset;
    const size_t n = kind_size(f.kind);
    if (f.kind == FieldKind::label) {
      be32 kv, mv;
      std::memcpy(&kv, k, 4);
      std::memcpy(&mv, m, 4);
      kv &= hton32(kLabelMask);
      mv &= hton32(kLabelMask);
      std::memcpy(k, &kv, 4);
      std::memcpy(m, &mv, 4);
    }
    if (f.kind == FieldKind::frag && *m != 0 && (*m != 0xff || *k > kFragTypeMax)) return false;
    if (all_zero(m, n)) std::memset(k, 0, n);
  }
  return true;
}

}  // namespace

// --- builder ----------------------------------------------------------------

void DpActionsBuilder::fail(std::string msg) {
  if (status_.ok()) status_ = invalid(std::move(msg));
}

uint8_t* DpActionsBuilder::append(DpActionType type, uint8_t sub, uint32_t arg, size_t len) {
  if (!status_.ok()) return nullptr;
  if (size_ + len > kMaxDpActionsLen) {
    fail("datapath actions longer than " + std::to_string(kMaxDpActionsLen) + " bytes");
    return nullptr;
  }
  words_.resize((size_ + len) / 8, 0);
  uint8_t* p = reinterpret_cast<uint8_t*>(words_.data()) + size_;
  DpActionHeader h{type, sub, static_cast<uint16_t>(len), arg};
  std::memcpy(p, &h, sizeof h);
  size_ += len;
  return p + sizeof h;
}

void DpActionsBuilder::output(uint32_t port) { append(DpActionType::kOutput, 0, port, 8); }
void DpActionsBuilder::drop() { append(DpActionType::kDrop, 0, 0, 8); }
void DpActionsBuilder::push_vlan(uint16_t tpid, uint16_t tci) {
  append(DpActionType::kPushVlan, 0, uint32_t{tpid} << 16 | tci, 8);
}
void DpActionsBuilder::pop_vlan() { append(DpActionType::kPopVlan, 0, 0, 8); }
void DpActionsBuilder::hash_l4(uint32_t basis) { append(DpActionType::kHash, kHashAlgL4, basis, 8); }
void DpActionsBuilder::recirc(uint32_t id) { append(DpActionType::kRecirc, 0, id, 8); }
void DpActionsBuilder::lb_output(uint32_t bond_id) {
  if (bond_id < 1 || bond_id > kMaxLbOutputBond) {
    fail("lb_output: bond id " + std::to_string(bond_id) + " is not 1.." + std::to_string(kMaxLbOutputBond));
    return;
  }
  append(DpActionType::kLbOutput, 0, bond_id, 8);
}
void DpActionsBuilder::trunc(uint32_t max_len) { append(DpActionType::kTrunc, 0, max_len, 8); }
void DpActionsBuilder::meter(uint32_t id) { append(DpActionType::kMeter, 0, id, 8); }
void DpActionsBuilder::tnl_push(uint32_t tnl_port, uint32_t out_port, uint8_t tnl_type,
                                std::span<const uint8_t> header) {
  if (Status st = packet::check_tunnel_header(static_cast<packet::TnlType>(tnl_type), header); !st) {
    fail("tnl_push: " + st.message());
    return;
  }
  uint8_t* p = append(DpActionType::kTnlPush, 0, tnl_port, 8 + dp_align8(sizeof(TnlPushArgs) + header.size()));
  if (!p) return;
  TnlPushArgs a{out_port, static_cast<uint16_t>(header.size()), tnl_type, 0};
  std::memcpy(p, &a, sizeof a);
  std::memcpy(p + sizeof a, header.data(), header.size());
}
void DpActionsBuilder::tnl_pop(uint32_t vport) { append(DpActionType::kTnlPop, 0, vport, 8); }

// One body for the five set_*() calls.
#define KEEL_BUILD_SET(T, header)                                                                     \
  do {                                                                                                \
    uint8_t k[sizeof(T)], m[sizeof(T)];                                                               \
    std::memcpy(k, &key, sizeof k);                                                                   \
    std::memcpy(m, &mask, sizeof m);                                                                  \
    if (!normalise_set(*set_spec(header), k, m)) {                                                    \
      fail("set: frag must be no, first or later, matched exactly");                                  \
      return;                                                                                         \
    }                                                                                                 \
    uint8_t* p = append(DpActionType::kSet, static_cast<uint8_t>(header), 0, set_action_len(header)); \
    if (!p) return;                                                                                   \
    std::memcpy(p, k, sizeof k);                                                                      \
    std::memcpy(p + sizeof k, m, sizeof m);                                                           \
  } while (0)

void DpActionsBuilder::set_eth(const SetEth& key, const SetEth& mask) {
  KEEL_BUILD_SET(SetEth, SetHeader::kEth);
}
void DpActionsBuilder::set_ipv4(const SetIpv4& key, const SetIpv4& mask) {
  KEEL_BUILD_SET(SetIpv4, SetHeader::kIpv4);
}
void DpActionsBuilder::set_ipv6(const SetIpv6& key, const SetIpv6& mask) {
  KEEL_BUILD_SET(SetIpv6, SetHeader::kIpv6);
}
void DpActionsBuilder::set_tcp(const SetL4& key, const SetL4& mask) {
  KEEL_BUILD_SET(SetL4, SetHeader::kTcp);
}
void DpActionsBuilder::set_udp(const SetL4& key, const SetL4& mask) {
  KEEL_BUILD_SET(SetL4, SetHeader::kUdp);
}
void DpActionsBuilder::set_arp(const SetArp& key, const SetArp& mask) {
  KEEL_BUILD_SET(SetArp, SetHeader::kArp);
}
void DpActionsBuilder::set_sctp(const SetL4& key, const SetL4& mask) {
  KEEL_BUILD_SET(SetL4, SetHeader::kSctp);
}
void DpActionsBuilder::set_icmp(const SetIcmp& key, const SetIcmp& mask, bool v6) {
  if (v6)
    KEEL_BUILD_SET(SetIcmp, SetHeader::kIcmpv6);
  else
    KEEL_BUILD_SET(SetIcmp, SetHeader::kIcmp);
}
#undef KEEL_BUILD_SET

void DpActionsBuilder::userspace(uint32_t pid, std::span<const uint8_t> userdata, bool has_userdata,
                                 bool include_actions, const uint32_t* tunnel_out_port) {
  if (!has_userdata) userdata = {};
  if (userdata.size() > kMaxUserdataLen) {
    fail("userspace: userdata longer than " + std::to_string(kMaxUserdataLen) + " bytes");
    return;
  }
  uint8_t flags = (has_userdata ? kUserspaceUserdata : 0) | (include_actions ? kUserspaceActions : 0) |
                  (tunnel_out_port ? kUserspaceTunnelOutPort : 0);
  uint8_t* p =
      append(DpActionType::kUserspace, flags, pid, 8 + dp_align8(sizeof(UserspaceArgs) + userdata.size()));
  if (!p) return;
  UserspaceArgs a{tunnel_out_port ? *tunnel_out_port : 0, static_cast<uint16_t>(userdata.size()), 0};
  std::memcpy(p, &a, sizeof a);
  if (!userdata.empty()) std::memcpy(p + sizeof a, userdata.data(), userdata.size());
}

void DpActionsBuilder::begin_clone() {
  if (!status_.ok()) return;
  if (open_clones_.size() >= kMaxCloneDepth) {
    fail("clone() nested more than " + std::to_string(kMaxCloneDepth) + " deep");
    return;
  }
  size_t at = size_;
  if (append(DpActionType::kClone, 0, 0, 8)) open_clones_.push_back(at);
}

void DpActionsBuilder::end_clone() {
  if (!status_.ok()) return;
  if (open_clones_.empty()) {
    fail("end_clone() without begin_clone()");
    return;
  }
  size_t at = open_clones_.back();
  open_clones_.pop_back();
  auto len = static_cast<uint16_t>(size_ - at);
  std::memcpy(reinterpret_cast<uint8_t*>(words_.data()) + at + offsetof(DpActionHeader, len), &len,
              sizeof len);
}

Result<DpActions> DpActionsBuilder::finish() {
  if (status_.ok() && !open_clones_.empty()) fail("clone() not closed");
  if (!status_.ok()) return status_;
  DpActions a;
  a.words_ = std::move(words_);
  a.size_ = size_;
  words_.clear();
  size_ = 0;
  return a;
}

// --- validation ---------------------------------------------------------------

namespace {

Status bad_at(size_t offset, const std::string& what) {
  return invalid("datapath actions: byte " + std::to_string(offset) + ": " + what);
}

Status validate_list(const uint8_t* p, size_t n, size_t base, unsigned depth) {
  size_t off = 0;
  while (off < n) {
    if (n - off < sizeof(DpActionHeader)) return bad_at(base + off, "truncated action header");
    DpActionHeader h = load_action_header(p + off);
    if (h.len < 8 || h.len % 8 || h.len > n - off)
      return bad_at(base + off, "bad length " + std::to_string(h.len));
    const uint8_t* pl = p + off + 8;
    const size_t pn = h.len - 8u;
    switch (h.type) {
      case DpActionType::kOutput:
      case DpActionType::kRecirc:
      case DpActionType::kTrunc:
      case DpActionType::kMeter:
      case DpActionType::kPushVlan:
      case DpActionType::kDrop:
      case DpActionType::kPopVlan:
        if (h.sub != 0 || pn != 0) return bad_at(base + off, "unexpected payload");
        if ((h.type == DpActionType::kDrop || h.type == DpActionType::kPopVlan) && h.arg != 0)
          return bad_at(base + off, "unexpected argument");
        break;
      case DpActionType::kLbOutput:
        if (h.sub != 0 || pn != 0) return bad_at(base + off, "unexpected payload");
        if (h.arg < 1 || h.arg > kMaxLbOutputBond)
          return bad_at(base + off, "lb_output bond id " + std::to_string(h.arg) + " is not 1.." +
                                        std::to_string(kMaxLbOutputBond));
        break;
      case DpActionType::kHash:
        if (h.sub != kHashAlgL4 || pn != 0) return bad_at(base + off, "bad hash action");
        break;
      case DpActionType::kSet: {
        const SetSpec* spec = set_spec(static_cast<SetHeader>(h.sub));
        if (!spec || h.len != set_action_len(spec->header)) return bad_at(base + off, "bad set action");
        uint8_t k[kMaxSetSize], m[kMaxSetSize];
        std::memcpy(k, pl, spec->size);
        std::memcpy(m, pl + spec->size, spec->size);
        if (!normalise_set(*spec, k, m) || std::memcmp(k, pl, spec->size) != 0 ||
            std::memcmp(m, pl + spec->size, spec->size) != 0)
          return bad_at(base + off, "set fields not in canonical form");
        if (!all_zero(pl + 2 * spec->size, pn - 2 * spec->size))
          return bad_at(base + off, "non-zero padding");
        break;
      }
      case DpActionType::kClone:
        if (h.sub != 0 || h.arg != 0) return bad_at(base + off, "bad clone action");
        if (depth + 1 > kMaxCloneDepth) return bad_at(base + off, "clone() nested too deep");
        if (Status st = validate_list(pl, pn, base + off + 8, depth + 1); !st) return st;
        break;
      case DpActionType::kUserspace: {
        if (pn < sizeof(UserspaceArgs) ||
            (h.sub & ~(kUserspaceUserdata | kUserspaceActions | kUserspaceTunnelOutPort)))
          return bad_at(base + off, "bad userspace action");
        UserspaceArgs a;
        std::memcpy(&a, pl, sizeof a);
        if (a.pad != 0 || a.userdata_len > kMaxUserdataLen ||
            (!(h.sub & kUserspaceUserdata) && a.userdata_len != 0) ||
            (!(h.sub & kUserspaceTunnelOutPort) && a.tunnel_out_port != 0) ||
            h.len != 8 + dp_align8(sizeof a + a.userdata_len))
          return bad_at(base + off, "bad userspace action");
        if (!all_zero(pl + sizeof a + a.userdata_len, pn - sizeof a - a.userdata_len))
          return bad_at(base + off, "non-zero padding");
        break;
      }
      case DpActionType::kTnlPop:
        if (h.sub != 0 || pn != 0) return bad_at(base + off, "unexpected payload");
        break;
      case DpActionType::kTnlPush: {
        if (h.sub != 0 || pn < sizeof(TnlPushArgs)) return bad_at(base + off, "bad tnl_push action");
        TnlPushArgs a;
        std::memcpy(&a, pl, sizeof a);
        if (a.pad != 0 || a.header_len > kMaxTnlHeaderLen || h.len != 8 + dp_align8(sizeof a + a.header_len))
          return bad_at(base + off, "bad tnl_push action");
        if (Status st = packet::check_tunnel_header(static_cast<packet::TnlType>(a.tnl_type),
                                                    {pl + sizeof a, a.header_len});
            !st)
          return bad_at(base + off, "tnl_push: " + st.message());
        if (!all_zero(pl + sizeof a + a.header_len, pn - sizeof a - a.header_len))
          return bad_at(base + off, "non-zero padding");
        break;
      }
      default:
        return bad_at(base + off, "unknown action type " + std::to_string(static_cast<unsigned>(h.type)));
    }
    off += h.len;
  }
  return {};
}

}  // namespace

Status validate_dp_actions(std::span<const uint8_t> bytes) {
  if (bytes.size() > kMaxDpActionsLen)
    return invalid("datapath actions longer than " + std::to_string(kMaxDpActionsLen) + " bytes");
  if (bytes.size() % 8) return invalid("datapath actions: length is not a multiple of 8");
  return validate_list(bytes.data(), bytes.size(), 0, 0);
}

Result<DpActions> DpActions::from_bytes(std::span<const uint8_t> bytes) {
  if (Status st = validate_dp_actions(bytes); !st) return st;
  DpActions a;
  a.words_.resize(bytes.size() / 8);
  if (!bytes.empty()) std::memcpy(a.words_.data(), bytes.data(), bytes.size());
  a.size_ = bytes.size();
  return a;
}

// --- parser -------------------------------------------------------------------

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

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

Span trim_delimiters(const Span& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_delimiter(s.text[b])) ++b;
  while (e > b && is_delimiter(s.text[e - 1])) --e;
  return s.sub(b, e - b);
}

// Open vSwitch datapath actions keel does not implement (refused by name, so
// the message says "not supported" rather than "unknown").
constexpr std::string_view kUnsupportedActions[] = {
    "ct",       "ct_clear", "sample",  "push_mpls", "pop_mpls", "add_mpls", "push_eth",      "pop_eth",
    "push_nsh", "pop_nsh",  "dec_ttl", "check_pkt_len",
};
constexpr std::string_view kUnsupportedSetHeaders[] = {
    "tunnel",   "vlan",    "nd",      "nd_extensions", "eth_type", "skb_mark",  "skb_priority", "mpls",
    "ct_state", "ct_zone", "ct_mark", "ct_label",      "nsh",      "tcp_flags", "packet_type",
};
constexpr std::string_view kUserspaceCookies[] = {"sFlow", "slow_path", "flow_sample", "ipfix", "controller"};
// keel's slow_path(REASON) cookies, by name (dp_actions.h).
struct SlowPathName {
  uint8_t reason;
  std::string_view name;
};
constexpr SlowPathName kSlowPathNames[] = {{kSlowPathReasonLacp, "lacp"}, {kSlowPathReasonAction, "action"}};
// The name of `ud` when it is exactly one of those cookies, else empty.
std::string_view slow_path_name(std::span<const uint8_t> ud) {
  if (ud.size() != kSlowPathUserdataBytes || ud[0] != kUserdataKindSlowPath) return {};
  for (size_t i = 2; i < ud.size(); ++i)
    if (ud[i]) return {};
  for (const SlowPathName& n : kSlowPathNames)
    if (n.reason == ud[1]) return n.name;
  return {};
}

template <size_t N>
bool one_of(std::string_view s, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

// One action as scanned: `name` or `name(args)`.
struct ActionToken {
  Span whole;
  Span name;
  Span args;
  bool has_args = false;
};

// "k=v" -> k, v; false without '='.
bool split_kv(const Span& item, Span& k, Span& v) {
  size_t eq = item.text.find('=');
  if (eq == std::string_view::npos) return false;
  k = item.sub(0, eq);
  v = item.sub(eq + 1);
  return true;
}

Status parse_u32(const Span& s, std::string_view field, uint32_t& out) {
  uint64_t v;
  if (Status st = parse_number(s, UINT32_MAX, field, v); !st) return st;
  out = static_cast<uint32_t>(v);
  return {};
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class ActionParser {
 public:
  ActionParser(DpActionsBuilder& b, const DpPortNumber* port_number) : b_(b), port_number_(port_number) {}

  // A list: actions separated by delimiters; the whole list `drop` is empty.
  Status list(const Span& s, unsigned depth) {
    if (iequals(trim_delimiters(s).text, "drop")) return {};
    size_t i = 0;
    const std::string_view t = s.text;
    while (true) {
      while (i < t.size() && is_delimiter(t[i])) ++i;
      if (i >= t.size()) return {};
      const size_t start = i;
      while (i < t.size() && is_name_char(t[i])) ++i;
      ActionToken tok;
      tok.name = s.sub(start, i - start);
      if (tok.name.empty()) {
        if (t[i] == ')') return error_at("unbalanced ')'", s.sub(i, 1));
        return error_at("unexpected character", s.sub(i, 1), "expected an action");
      }
      if (i < t.size() && t[i] == '(') {
        size_t close = find_close_paren(t, i);
        if (close == std::string_view::npos)
          return error_at("unbalanced '('", s.sub(start), "no matching ')'");
        tok.args = s.sub(i + 1, close - i - 1);
        tok.has_args = true;
        i = close + 1;
      }
      tok.whole = s.sub(start, i - start);
      if (i < t.size() && !is_delimiter(t[i])) {
        size_t e = i;
        while (e < t.size() && !is_delimiter(t[e])) ++e;
        return error_at("unexpected text", s.sub(i, e - i),
                        "after action '" + std::string(tok.whole.text) + "'");
      }
      if (Status st = action(tok, depth); !st) return st;
      if (!b_.ok()) return error_at("cannot add action", tok.whole, b_.status().message());
    }
  }

 private:
  Status no_args(const ActionToken& tok) {
    if (tok.has_args)
      return error_at("unexpected arguments", tok.whole, std::string(tok.name.text) + " takes none");
    return {};
  }
  Status need_args(const ActionToken& tok, std::string_view form) {
    if (!tok.has_args) return error_at("missing arguments", tok.whole, "expected " + std::string(form));
    return {};
  }

  Status action(const ActionToken& tok, unsigned depth) {
    const std::string_view name = tok.name.text;
    if (is_digit(name[0])) {
      if (Status st = no_args(tok); !st) return st;
      uint32_t port;
      if (Status st = parse_u32(tok.name, "port", port); !st) return st;
      b_.output(port);
      return {};
    }
    if (!tok.has_args && port_number_ && *port_number_) {
      if (std::optional<uint32_t> port = (*port_number_)(name)) {
        b_.output(*port);
        return {};
      }
    }
    if (name == "drop") {
      if (Status st = no_args(tok); !st) return st;
      b_.drop();
      return {};
    }
    if (name == "pop_vlan") {
      if (Status st = no_args(tok); !st) return st;
      b_.pop_vlan();
      return {};
    }
    if (name == "push_vlan") return push_vlan(tok);
    if (name == "set") return set(tok);
    if (name == "hash") return hash(tok);
    if (name == "recirc" || name == "trunc" || name == "meter") {
      if (Status st = need_args(tok, std::string(name) + "(N)"); !st) return st;
      uint32_t v;
      if (Status st = parse_u32(tok.args,
                                name == "recirc"  ? "recirc id"
                                : name == "trunc" ? "length"
                                                  : "meter id",
                                v);
          !st)
        return st;
      if (name == "recirc") {
        b_.recirc(v);
      } else if (name == "trunc") {
        b_.trunc(v);
      } else {
        b_.meter(v);
      }
      return {};
    }
    if (name == "clone") {
      if (Status st = need_args(tok, "clone(actions)"); !st) return st;
      if (depth + 1 > kMaxCloneDepth) {
        return error_at("clone nested too deeply", tok.whole,
                        "at most " + std::to_string(kMaxCloneDepth) + " levels");
      }
      b_.begin_clone();
      if (Status st = list(tok.args, depth + 1); !st) return st;
      b_.end_clone();
      return {};
    }
    if (name == "userspace") return userspace(tok);
    if (name == "lb_output") return lb_output(tok);
    if (name == "tnl_push") return tnl_push(tok);
    if (name == "tnl_pop") {
      if (Status st = need_args(tok, "tnl_pop(N)"); !st) return st;
      uint32_t port;
      if (Status st = port_arg(tok.args, "tnl_pop port", port); !st) return st;
      b_.tnl_pop(port);
      return {};
    }
    if (one_of(name, kUnsupportedActions)) {
      return error_at("unsupported action", tok.whole,
                      "keel's datapath does not implement " + std::string(name));
    }
    return error_at("unknown action", tok.whole);
  }

  // A port argument: a number, or a name when port names are given.
  Status port_arg(const Span& s, std::string_view field, uint32_t& out) {
    if (!s.empty() && !is_digit(s.text[0]) && port_number_ && *port_number_) {
      if (std::optional<uint32_t> port = (*port_number_)(s.text)) {
        out = *port;
        return {};
      }
      return error_at("unknown port", s);
    }
    return parse_u32(s, field, out);
  }

  // tnl_push(tnl_port(N),header(...),out_port(M)), read as
  // ovs_parse_tnl_push() reads it: a fixed sequence of fields; the header
  // bytes are built from them (IPv4 checksum over a zero total length,
  // UDP length 0) and size= and type= must match what was read.
  Status tnl_push(const ActionToken& tok) {
    if (Status st = need_args(tok, "tnl_push(tnl_port(N),header(...),out_port(M))"); !st) return st;
    TnlScan sc{tok.args, 0};
    uint32_t tnl_port = 0, out_port = 0;
    uint64_t size = 0, type = 0;
    uint8_t h[kMaxTnlHeaderLen] = {};
    if (Status st = sc.lit("tnl_port("); !st) return st;
    if (Status st = sc.port(*this, "tnl_port", tnl_port); !st) return st;
    if (Status st = sc.lit("),header(size="); !st) return st;
    if (Status st = sc.num(kMaxTnlHeaderLen, "size", size); !st) return st;
    if (Status st = sc.lit(",type="); !st) return st;
    if (Status st = sc.num(255, "type", type); !st) return st;
    const size_t hdr_pos = sc.pos;
    EthAddr dst{}, src{};
    uint64_t dl_type = 0;
    if (Status st = sc.lit(",eth(dst="); !st) return st;
    if (Status st = sc.mac(dst); !st) return st;
    if (Status st = sc.lit(",src="); !st) return st;
    if (Status st = sc.mac(src); !st) return st;
    if (Status st = sc.lit(",dl_type=0x"); !st) return st;
    if (Status st = sc.hex(0xffff, "dl_type", dl_type); !st) return st;
    if (Status st = sc.lit("),"); !st) return st;
    std::memcpy(h, dst.b, 6);
    std::memcpy(h + 6, src.b, 6);
    h[12] = static_cast<uint8_t>(dl_type >> 8), h[13] = static_cast<uint8_t>(dl_type);
    size_t off = 14;
    const bool v4 = dl_type == packet::kEthTypeIpv4;
    if (v4) {
      be32 sip = 0, dip = 0;
      uint64_t proto, tos, ttl, frag;
      if (Status st = sc.lit("ipv4(src="); !st) return st;
      if (Status st = sc.ipv4(sip); !st) return st;
      if (Status st = sc.lit(",dst="); !st) return st;
      if (Status st = sc.ipv4(dip); !st) return st;
      if (Status st = sc.lit(",proto="); !st) return st;
      if (Status st = sc.num(255, "proto", proto); !st) return st;
      if (Status st = sc.lit(",tos="); !st) return st;
      if (Status st = sc.num(255, "tos", tos); !st) return st;
      if (Status st = sc.lit(",ttl="); !st) return st;
      if (Status st = sc.num(255, "ttl", ttl); !st) return st;
      if (Status st = sc.lit(",frag=0x"); !st) return st;
      if (Status st = sc.hex(0xffff, "frag", frag); !st) return st;
      if (Status st = sc.lit("),"); !st) return st;
      uint8_t* ip = h + off;
      ip[0] = 0x45;
      ip[1] = static_cast<uint8_t>(tos);
      ip[6] = static_cast<uint8_t>(frag >> 8), ip[7] = static_cast<uint8_t>(frag);
      ip[8] = static_cast<uint8_t>(ttl);
      ip[9] = static_cast<uint8_t>(proto);
      std::memcpy(ip + 12, &sip, 4);
      std::memcpy(ip + 16, &dip, 4);
      uint32_t sum = 0;
      for (int i = 0; i < 20; i += 2) sum += uint32_t{ip[i]} << 8 | ip[i + 1];
      while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
      const uint16_t c = static_cast<uint16_t>(~sum);
      ip[10] = static_cast<uint8_t>(c >> 8), ip[11] = static_cast<uint8_t>(c);
      off += 20;
    } else {
      In6Addr sip{}, dip{};
      uint64_t label, proto, tclass, hlimit;
      if (Status st = sc.lit("ipv6(src="); !st) return st;
      if (Status st = sc.ipv6(sip); !st) return st;
      if (Status st = sc.lit(",dst="); !st) return st;
      if (Status st = sc.ipv6(dip); !st) return st;
      if (Status st = sc.lit(",label="); !st) return st;
      if (Status st = sc.num(0xfffff, "label", label); !st) return st;
      if (Status st = sc.lit(",proto="); !st) return st;
      if (Status st = sc.num(255, "proto", proto); !st) return st;
      if (Status st = sc.lit(",tclass=0x"); !st) return st;
      if (Status st = sc.hex(255, "tclass", tclass); !st) return st;
      if (Status st = sc.lit(",hlimit="); !st) return st;
      if (Status st = sc.num(255, "hlimit", hlimit); !st) return st;
      if (Status st = sc.lit("),"); !st) return st;
      uint8_t* ip6 = h + off;
      const uint32_t flow = 6u << 28 | static_cast<uint32_t>(tclass) << 20 | static_cast<uint32_t>(label);
      ip6[0] = static_cast<uint8_t>(flow >> 24), ip6[1] = static_cast<uint8_t>(flow >> 16);
      ip6[2] = static_cast<uint8_t>(flow >> 8), ip6[3] = static_cast<uint8_t>(flow);
      ip6[6] = static_cast<uint8_t>(proto);
      ip6[7] = static_cast<uint8_t>(hlimit);
      std::memcpy(ip6 + 8, sip.b, 16);
      std::memcpy(ip6 + 24, dip.b, 16);
      off += 40;
    }
    uint8_t read_type;
    if (sc.peek("udp(")) {
      uint64_t usrc, udst, ucsum;
      if (Status st = sc.lit("udp(src="); !st) return st;
      if (Status st = sc.num(0xffff, "udp src", usrc); !st) return st;
      if (Status st = sc.lit(",dst="); !st) return st;
      if (Status st = sc.num(0xffff, "udp dst", udst); !st) return st;
      if (Status st = sc.lit(",csum=0x"); !st) return st;
      if (Status st = sc.hex(0xffff, "udp csum", ucsum); !st) return st;
      if (Status st = sc.lit("),"); !st) return st;
      uint8_t* u = h + off;
      u[0] = static_cast<uint8_t>(usrc >> 8), u[1] = static_cast<uint8_t>(usrc);
      u[2] = static_cast<uint8_t>(udst >> 8), u[3] = static_cast<uint8_t>(udst);
      u[6] = static_cast<uint8_t>(ucsum >> 8), u[7] = static_cast<uint8_t>(ucsum);
      off += 8;
      uint8_t* t = h + off;
      if (sc.peek("vxlan(")) {
        uint64_t flags, vni;
        if (Status st = sc.lit("vxlan(flags=0x"); !st) return st;
        if (Status st = sc.hex(0xffffffff, "vxlan flags", flags); !st) return st;
        if (Status st = sc.lit(",vni=0x"); !st) return st;
        if (Status st = sc.hex(0xffffff, "vni", vni); !st) return st;
        if (Status st = sc.lit("))"); !st) return st;
        put_be32(t, static_cast<uint32_t>(flags));
        put_be32(t + 4, static_cast<uint32_t>(vni << 8));
        off += 8;
        read_type = 4;
      } else if (sc.peek("geneve(")) {
        if (Status st = sc.lit("geneve("); !st) return st;
        if (sc.peek("oam,")) t[1] |= 0x80, sc.pos += 4;
        if (sc.peek("crit,")) t[1] |= 0x40, sc.pos += 5;
        uint64_t vni;
        if (Status st = sc.lit("vni="); !st) return st;
        if (Status st = sc.num(0xffffff, "vni", vni); !st) return st;
        size_t opts = 0;
        if (sc.peek(",options(")) {
          sc.pos += 9;
          if (Status st = sc.geneve_opts(t + 8, kMaxTnlHeaderLen - (off + 8), opts); !st) return st;
          if (Status st = sc.lit(")"); !st) return st;
        }
        if (Status st = sc.lit("))"); !st) return st;
        t[0] = static_cast<uint8_t>(opts / 4);
        t[2] = 0x65, t[3] = 0x58;
        put_be32(t + 4, static_cast<uint32_t>(vni << 8));
        off += 8 + opts;
        read_type = 5;
      } else {
        return error_at("bad tnl_push header", sc.rest(), "expected vxlan(...) or geneve(...) after udp(...)");
      }
    } else if (sc.peek("gre((")) {
      uint64_t flags, proto;
      if (Status st = sc.lit("gre((flags=0x"); !st) return st;
      if (Status st = sc.hex(0xffff, "gre flags", flags); !st) return st;
      if (Status st = sc.lit(",proto=0x"); !st) return st;
      if (Status st = sc.hex(0xffff, "gre proto", proto); !st) return st;
      if (Status st = sc.lit(")"); !st) return st;
      uint8_t* g = h + off;
      g[0] = static_cast<uint8_t>(flags >> 8), g[1] = static_cast<uint8_t>(flags);
      g[2] = static_cast<uint8_t>(proto >> 8), g[3] = static_cast<uint8_t>(proto);
      size_t o = 4;
      if (flags & 0x8000) {
        uint64_t c;
        if (Status st = sc.lit(",csum=0x"); !st) return st;
        if (Status st = sc.hex(0xffff, "gre csum", c); !st) return st;
        g[o] = static_cast<uint8_t>(c >> 8), g[o + 1] = static_cast<uint8_t>(c);
        o += 4;
      }
      if (flags & 0x2000) {
        uint64_t k;
        if (Status st = sc.lit(",key=0x"); !st) return st;
        if (Status st = sc.hex(0xffffffff, "gre key", k); !st) return st;
        put_be32(g + o, static_cast<uint32_t>(k));
        o += 4;
      }
      if (flags & 0x1000) {
        uint64_t q;
        if (Status st = sc.lit(",seq=0x"); !st) return st;
        if (Status st = sc.hex(0xffffffff, "gre seq", q); !st) return st;
        put_be32(g + o, static_cast<uint32_t>(q));
        o += 4;
      }
      if (Status st = sc.lit("))"); !st) return st;
      off += o;
      read_type = v4 ? 3 : 109;
    } else {
      return error_at("bad tnl_push header", sc.rest(), "expected udp(...) or gre(...)");
    }
    const Span hdr = tok.args.sub(hdr_pos, sc.pos - hdr_pos);
    if (type != read_type)
      return error_at("bad tnl_push header", hdr,
                      "type=" + std::to_string(type) + " but the header is of type " + std::to_string(read_type));
    if (size != off)
      return error_at("bad tnl_push header", hdr,
                      "size=" + std::to_string(size) + " but the header is " + std::to_string(off) + " bytes");
    if (Status st = sc.lit(",out_port("); !st) return st;
    if (Status st = sc.port(*this, "out_port", out_port); !st) return st;
    if (Status st = sc.lit(")"); !st) return st;
    if (sc.pos != tok.args.size()) return error_at("unexpected text", sc.rest(), "after out_port(...)");
    if (Status st = packet::check_tunnel_header(static_cast<packet::TnlType>(read_type), {h, off}); !st)
      return error_at("bad tnl_push header", hdr, st.message());
    b_.tnl_push(tnl_port, out_port, read_type, {h, off});
    return {};
  }

  static void put_be32(uint8_t* p, uint32_t v) {
    p[0] = static_cast<uint8_t>(v >> 24), p[1] = static_cast<uint8_t>(v >> 16);
    p[2] = static_cast<uint8_t>(v >> 8), p[3] = static_cast<uint8_t>(v);
  }

  // A cursor over tnl_push's arguments (ovs_scan_len's sequence).
  struct TnlScan {
    Span s;
    size_t pos;

    Span rest() const { return s.sub(pos); }
    bool peek(std::string_view lit) const { return s.text.substr(pos).starts_with(lit); }
    Status lit(std::string_view lit) {
      if (!peek(lit)) {
        Span r = rest();
        return error_at("bad tnl_push", r.sub(0, std::min<size_t>(r.size(), 24)),
                        "expected '" + std::string(lit) + "'");
      }
      pos += lit.size();
      return {};
    }
    // A token of [0-9A-Za-z_:.] (numbers, MACs, addresses, names).
    Span token(bool colon_dot) {
      size_t e = pos;
      while (e < s.size() && (is_name_char(s.text[e]) || (colon_dot && (s.text[e] == ':' || s.text[e] == '.'))))
        ++e;
      Span t = s.sub(pos, e - pos);
      pos = e;
      return t;
    }
    Status num(uint64_t max, std::string_view field, uint64_t& out) {
      return parse_number(token(false), max, field, out);
    }
    // Hex digits after a literal "0x" ("0x%x").
    Status hex(uint64_t max, std::string_view field, uint64_t& out) {
      Span t = token(false);
      uint64_t v = 0;
      if (t.empty()) return error_at("bad " + std::string(field) + " value", t, "expected hex digits");
      for (char c : t.text) {
        const int d = hex_value(c);
        if (d < 0) return error_at("bad " + std::string(field) + " value", t, "expected hex digits");
        if (v >> 60) return error_at("out-of-range value", t, std::string(field));
        v = v << 4 | static_cast<unsigned>(d);
      }
      if (v > max) return error_at("out-of-range value", t, std::string(field));
      out = v;
      return {};
    }
    Status mac(EthAddr& out) {
      Span t = token(true);
      if (!parse_mac(t.text, out)) return error_at("bad MAC address", t);
      return {};
    }
    Status ipv4(be32& out) {
      Span t = token(true);
      if (!parse_ipv4(t.text, out)) return error_at("bad IPv4 address", t);
      return {};
    }
    Status ipv6(In6Addr& out) {
      Span t = token(true);
      if (!parse_ipv6(t.text, out)) return error_at("bad IPv6 address", t);
      return {};
    }
    template <typename P>
    Status port(P& parser, std::string_view field, uint32_t& out) {
      return parser.port_arg(token(false), field, out);
    }
    // {class=0x..,type=0x..,len=N,0xDATA}... as scan_geneve (no masks):
    // writes the TLVs at p (at most room bytes), their length in n.
    Status geneve_opts(uint8_t* p, size_t room, size_t& n) {
      n = 0;
      if (!peek("{")) return error_at("bad GENEVE options", rest(), "expected '{'");
      while (peek("{")) {
        const size_t start = pos;
        ++pos;
        uint64_t cls = 0, type = 0, len = 0;
        if (peek("class=")) {
          pos += 6;
          if (Status st = num(0xffff, "class", cls); !st) return st;
          if (peek(",")) ++pos;
        }
        if (peek("type=")) {
          pos += 5;
          if (Status st = num(0xff, "type", type); !st) return st;
          if (peek(",")) ++pos;
        }
        if (peek("len=")) {
          pos += 4;
          Span lt = s.sub(pos);
          if (Status st = num(124, "len", len); !st) return st;
          if (len % 4) return error_at("bad GENEVE option length", lt, "a multiple of 4 up to 124");
        }
        if (n + 4 + len > room || n + 4 + len > packet::kMaxGeneveOptsLen)
          return error_at("GENEVE options too long", s.sub(start), "");
        uint8_t* o = p + n;
        o[0] = static_cast<uint8_t>(cls >> 8), o[1] = static_cast<uint8_t>(cls);
        o[2] = static_cast<uint8_t>(type);
        o[3] = static_cast<uint8_t>(len / 4);
        if (peek(",")) {
          ++pos;
          // parse_int_string: a 0x-hex or decimal number, right-aligned in len bytes.
          Span d = token(false);
          uint8_t buf[124] = {};
          if (Status st = int_string(d, buf, static_cast<size_t>(len)); !st) return st;
          std::memcpy(o + 4, buf, static_cast<size_t>(len));
        }
        if (Status st = lit("}"); !st) return st;
        n += 4 + static_cast<size_t>(len);
      }
      return {};
    }
    static Status int_string(const Span& d, uint8_t* out, size_t len) {
      std::string_view t = d.text;
      if (t.starts_with("0x") || t.starts_with("0X")) {
        t.remove_prefix(2);
        if (t.empty()) return error_at("bad GENEVE option data", d);
        size_t bytes = (t.size() + 1) / 2;
        if (bytes > len) return error_at("GENEVE option data longer than its len", d);
        uint8_t* w = out + len;
        for (size_t i = t.size(); i > 0;) {
          int lo = hex_value(t[--i]);
          int hi = i > 0 ? hex_value(t[--i]) : 0;
          if (lo < 0 || hi < 0) return error_at("bad GENEVE option data", d);
          *--w = static_cast<uint8_t>(hi << 4 | lo);
        }
        return {};
      }
      uint64_t v;
      if (!parse_uint(t, v)) return error_at("bad GENEVE option data", d);
      for (size_t i = 0; i < len && i < 8; ++i) out[len - 1 - i] = static_cast<uint8_t>(v >> (8 * i));
      if (len < 8 && (v >> (8 * len))) return error_at("GENEVE option data longer than its len", d);
      return {};
    }
  };

  // lb_output(N): N in decimal, as odp-util reads it ("lb_output(%u)").
  Status lb_output(const ActionToken& tok) {
    if (Status st = need_args(tok, "lb_output(N)"); !st) return st;
    const std::string range = "bond id must be 1.." + std::to_string(kMaxLbOutputBond);
    const std::string_view t = tok.args.text;
    bool digits = !t.empty();
    for (char c : t) digits &= is_digit(c);
    if (!digits) return error_at("bad bond id", tok.args, "expected a decimal number; " + range);
    uint64_t v = 0;
    for (char c : t) {
      v = v * 10 + static_cast<unsigned>(c - '0');
      if (v > kMaxLbOutputBond) break;
    }
    if (v < 1 || v > kMaxLbOutputBond) return error_at("out-of-range value", tok.args, range);
    b_.lb_output(static_cast<uint32_t>(v));
    return {};
  }

  Status push_vlan(const ActionToken& tok) {
    if (Status st = need_args(tok, "push_vlan(vid=N,pcp=N)"); !st) return st;
    std::vector<Span> items;
    if (Status st = split_top_level(tok.args, ',', items); !st) return st;
    uint64_t tpid = kEthTypeVlan, vid = 0, pcp = 0, cfi = 1;
    bool seen[4] = {};
    for (const Span& item : items) {
      Span k, v;
      if (!split_kv(item, k, v)) return error_at("bad push_vlan field", item, "expected name=value");
      int idx;
      uint64_t max;
      uint64_t* dst;
      if (k.text == "tpid") {
        idx = 0, max = 0xffff, dst = &tpid;
      } else if (k.text == "vid") {
        idx = 1, max = kVlanVidMask, dst = &vid;
      } else if (k.text == "pcp") {
        idx = 2, max = 7, dst = &pcp;
      } else if (k.text == "cfi") {
        idx = 3, max = 1, dst = &cfi;
      } else {
        return error_at("unknown push_vlan field", k, "expected tpid, vid, pcp or cfi");
      }
      if (seen[idx]) return error_at("duplicate push_vlan field", k);
      seen[idx] = true;
      if (Status st = parse_number(v, max, k.text, *dst); !st) return st;
    }
    if (!seen[1] || !seen[2])
      return error_at("incomplete push_vlan", tok.whole, "vid= and pcp= are required");
    b_.push_vlan(static_cast<uint16_t>(tpid),
                 static_cast<uint16_t>(vid | (pcp << 13) | (cfi ? kVlanCfi : 0)));
    return {};
  }

  Status set(const ActionToken& tok) {
    if (Status st = need_args(tok, "set(header(field=value,...))"); !st) return st;
    const Span& a = tok.args;
    size_t i = 0;
    while (i < a.size() && is_name_char(a.text[i])) ++i;
    Span hname = a.sub(0, i);
    if (hname.empty() || i >= a.size() || a.text[i] != '(')
      return error_at("bad set", tok.whole, "expected set(header(field=value,...))");
    size_t close = find_close_paren(a.text, i);
    if (close == std::string_view::npos) return error_at("unbalanced '('", a, "no matching ')'");
    if (close + 1 != a.size()) return error_at("unexpected text", a.sub(close + 1), "set() takes one header");
    const SetSpec* spec = set_spec(hname.text);
    if (!spec) {
      if (one_of(hname.text, kUnsupportedSetHeaders))
        return error_at("unsupported set field", hname,
                        "keel sets eth, ipv4, ipv6, tcp, udp, sctp, icmp, icmpv6 and arp");
      return error_at("unknown set field", hname);
    }
    uint8_t key[kMaxSetSize] = {}, mask[kMaxSetSize] = {};
    std::vector<Span> items;
    if (Status st = split_top_level(a.sub(i + 1, close - i - 1), ',', items); !st) return st;
    uint32_t seen = 0;
    for (const Span& item : items) {
      Span k, v;
      if (!split_kv(item, k, v)) return error_at("bad field", item, "expected name=value");
      const SetField* f = nullptr;
      for (size_t n = 0; n < spec->fields.size(); ++n) {
        if (spec->fields[n].name == k.text) {
          f = &spec->fields[n];
          if (seen & (1u << n)) return error_at("duplicate field", k);
          seen |= 1u << n;
        }
      }
      if (!f) return error_at("unknown field", k, "in set(" + std::string(spec->name) + "(...))");
      if (Status st = field(*f, v, key + f->offset, mask + f->offset); !st) return st;
    }
    normalise_set(*spec, key, mask);  // frag was checked as read
    switch (spec->header) {
      case SetHeader::kEth:
        return emit<SetEth>(&DpActionsBuilder::set_eth, key, mask);
      case SetHeader::kIpv4:
        return emit<SetIpv4>(&DpActionsBuilder::set_ipv4, key, mask);
      case SetHeader::kIpv6:
        return emit<SetIpv6>(&DpActionsBuilder::set_ipv6, key, mask);
      case SetHeader::kTcp:
        return emit<SetL4>(&DpActionsBuilder::set_tcp, key, mask);
      case SetHeader::kUdp:
        return emit<SetL4>(&DpActionsBuilder::set_udp, key, mask);
      case SetHeader::kArp:
        return emit<SetArp>(&DpActionsBuilder::set_arp, key, mask);
      case SetHeader::kSctp:
        return emit<SetL4>(&DpActionsBuilder::set_sctp, key, mask);
      case SetHeader::kIcmp:
      case SetHeader::kIcmpv6: {
        SetIcmp k, m;
        std::memcpy(&k, key, sizeof k);
        std::memcpy(&m, mask, sizeof m);
        b_.set_icmp(k, m, spec->header == SetHeader::kIcmpv6);
        return {};
      }
    }
    return {};
  }

  template <typename T>
  Status emit(void (DpActionsBuilder::*fn)(const T&, const T&), const uint8_t* key, const uint8_t* mask) {
    T k, m;
    std::memcpy(&k, key, sizeof k);
    std::memcpy(&m, mask, sizeof m);
    (b_.*fn)(k, m);
    return {};
  }

  static Status field(const SetField& f, const Span& v, uint8_t* key, uint8_t* mask) {
    switch (f.kind) {
      case FieldKind::mac: {
        EthAddr val, m;
        if (Status st = parse_masked_mac(v, val, m); !st) return st;
        std::memcpy(key, val.b, 6);
        std::memcpy(mask, m.b, 6);
        return {};
      }
      case FieldKind::ipv4: {
        be32 val, m;
        if (Status st = parse_masked_ipv4(v, val, m); !st) return st;
        std::memcpy(key, &val, 4);
        std::memcpy(mask, &m, 4);
        return {};
      }
      case FieldKind::ipv6: {
        In6Addr val, m;
        if (Status st = parse_masked_ipv6(v, val, m); !st) return st;
        std::memcpy(key, val.b, 16);
        std::memcpy(mask, m.b, 16);
        return {};
      }
      case FieldKind::u8:
      case FieldKind::u8x: {
        uint64_t val, m;
        if (Status st = parse_masked_number(v, 0xff, f.name, val, m); !st) return st;
        *key = static_cast<uint8_t>(val);
        *mask = static_cast<uint8_t>(m);
        return {};
      }
      case FieldKind::be16: {
        uint64_t val, m;
        if (Status st = parse_masked_number(v, 0xffff, f.name, val, m); !st) return st;
        be16 kv = hton16(static_cast<uint16_t>(val)), mv = hton16(static_cast<uint16_t>(m));
        std::memcpy(key, &kv, 2);
        std::memcpy(mask, &mv, 2);
        return {};
      }
      case FieldKind::label: {
        uint64_t val, m;
        if (Status st = parse_masked_number(v, kLabelMask, f.name, val, m); !st) return st;
        be32 kv = hton32(static_cast<uint32_t>(val)), mv = hton32(static_cast<uint32_t>(m));
        std::memcpy(key, &kv, 4);
        std::memcpy(mask, &mv, 4);
        return {};
      }
      case FieldKind::frag: {
        for (uint8_t n = 0; n <= kFragTypeMax; ++n) {
          if (v.text == kFragNames[n]) {
            *key = n;
            *mask = 0xff;
            return {};
          }
        }
        return error_at("bad frag value", v, "expected no, first or later");
      }
    }
    return {};
  }

  Status hash(const ActionToken& tok) {
    if (Status st = need_args(tok, "hash(l4(N))"); !st) return st;
    const Span& a = tok.args;
    size_t open = a.text.find('(');
    if (open == std::string_view::npos || a.text.back() != ')' ||
        find_close_paren(a.text, open) != a.size() - 1)
      return error_at("bad hash", tok.whole, "expected hash(l4(N))");
    Span alg = a.sub(0, open);
    if (alg.text == "sym_l4") return error_at("unsupported hash algorithm", alg, "keel implements l4 only");
    if (alg.text != "l4") return error_at("unknown hash algorithm", alg, "expected l4");
    uint32_t basis;
    if (Status st = parse_u32(a.sub(open + 1, a.size() - open - 2), "hash basis", basis); !st) return st;
    b_.hash_l4(basis);
    return {};
  }

  Status userspace(const ActionToken& tok) {
    if (Status st = need_args(tok, "userspace(pid=N,...)"); !st) return st;
    std::vector<Span> items;
    if (Status st = split_top_level(tok.args, ',', items); !st) return st;
    bool have_pid = false, have_ud = false, have_actions = false, have_tun = false;
    uint32_t pid = 0, tun = 0;
    std::vector<uint8_t> ud;
    for (const Span& item : items) {
      const std::string_view t = item.text;
      Span k, v;
      if (t == "actions") {
        if (have_actions) return error_at("duplicate userspace field", item);
        have_actions = true;
      } else if (t.starts_with("userdata(") && t.back() == ')' && find_close_paren(t, 8) == t.size() - 1) {
        if (have_ud) return error_at("duplicate userspace field", item);
        have_ud = true;
        Span hex = item.sub(9, t.size() - 10);
        if (hex.size() % 2) return error_at("bad userdata", hex, "expected pairs of hex digits");
        if (hex.size() / 2 > kMaxUserdataLen)
          return error_at("userdata too long", hex, "at most " + std::to_string(kMaxUserdataLen) + " bytes");
        for (size_t n = 0; n < hex.size(); n += 2) {
          int hi = hex_value(hex.text[n]), lo = hex_value(hex.text[n + 1]);
          if (hi < 0 || lo < 0) return error_at("bad userdata", hex, "expected pairs of hex digits");
          ud.push_back(static_cast<uint8_t>(hi << 4 | lo));
        }
      } else if (t.size() > 11 && t.substr(0, 10) == "slow_path(" && t.back() == ')' &&
                 std::any_of(std::begin(kSlowPathNames), std::end(kSlowPathNames),
                             [&](const SlowPathName& n) { return t.substr(10, t.size() - 11) == n.name; })) {
        if (have_ud) return error_at("duplicate userspace field", item);
        have_ud = true;
        ud.assign(kSlowPathUserdataBytes, 0);
        ud[0] = kUserdataKindSlowPath;
        for (const SlowPathName& n : kSlowPathNames)
          if (t.substr(10, t.size() - 11) == n.name) ud[1] = n.reason;
      } else if (split_kv(item, k, v) && k.text == "pid") {
        if (have_pid) return error_at("duplicate userspace field", k);
        have_pid = true;
        if (Status st = parse_u32(v, "pid", pid); !st) return st;
      } else if (split_kv(item, k, v) && k.text == "tunnel_out_port") {
        if (have_tun) return error_at("duplicate userspace field", k);
        have_tun = true;
        if (Status st = parse_u32(v, "port", tun); !st) return st;
      } else {
        std::string_view head = t.substr(0, std::min(t.find('('), t.find('=')));
        if (one_of(head, kUserspaceCookies))
          return error_at("unsupported userspace cookie", item, "keel carries opaque userdata(hex) only");
        return error_at("unknown userspace field", item,
                        "expected pid=N, userdata(hex), actions or tunnel_out_port=N");
      }
    }
    if (!have_pid) return error_at("missing pid", tok.whole, "userspace needs pid=N");
    b_.userspace(pid, ud, have_ud, have_actions, have_tun ? &tun : nullptr);
    return {};
  }

  DpActionsBuilder& b_;
  const DpPortNumber* port_number_;
};

}  // namespace

Result<DpActions> parse_dp_actions(std::string_view text, size_t column, const DpPortNumber* port_number) {
  DpActionsBuilder b;
  ActionParser p(b, port_number);
  if (Status st = p.list(Span{text, column}, 0); !st) return st;
  return b.finish();
}

// --- printer ------------------------------------------------------------------

namespace {

void put_set_field(std::string& out, const SetField& f, const uint8_t* k, const uint8_t* m) {
  out += f.name;
  out += '=';
  switch (f.kind) {
    case FieldKind::mac: {
      EthAddr kv, mv;
      std::memcpy(kv.b, k, 6);
      std::memcpy(mv.b, m, 6);
      put_mac(out, kv);
      if (!is_ones(mv)) out += '/', put_mac(out, mv);
      break;
    }
    case FieldKind::ipv4: {
      be32 kv, mv;
      std::memcpy(&kv, k, 4);
      std::memcpy(&mv, m, 4);
      put_ipv4(out, kv);
      if (mv != UINT32_MAX) out += '/', put_ipv4(out, mv);
      break;
    }
    case FieldKind::ipv6: {
      In6Addr kv, mv;
      std::memcpy(kv.b, k, 16);
      std::memcpy(mv.b, m, 16);
      put_ipv6(out, kv);
      if (!is_ones(mv)) out += '/', put_ipv6(out, mv);
      break;
    }
    case FieldKind::u8:
    case FieldKind::u8x:
      if (f.kind == FieldKind::u8) {
        put_dec(out, *k);
      } else {
        put_hex_alt(out, *k);
      }
      if (*m != 0xff) out += '/', put_hex_alt(out, *m);
      break;
    case FieldKind::be16:
      put_dec(out, load_be16_host(k));
      if (load_be16_host(m) != 0xffff) out += '/', put_hex_alt(out, load_be16_host(m));
      break;
    case FieldKind::label:
      put_hex_alt(out, load_be32_host(k));
      if ((load_be32_host(m) & kLabelMask) != kLabelMask) out += '/', put_hex_alt(out, load_be32_host(m));
      break;
    case FieldKind::frag:
      out += kFragNames[*k <= kFragTypeMax ? *k : 0];
      break;
  }
}

void put_port(std::string& out, uint32_t port, const DpPortName* port_name) {
  if (port_name && *port_name) {
    if (std::optional<std::string> n = (*port_name)(port)) {
      out += *n;
      return;
    }
  }
  put_dec(out, port);
}

uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t get32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

// As format_odp_tnl_push_header(); the header passed validate_dp_actions().
void put_tnl_push_header(std::string& out, const TnlPushArgs& a, std::span<const uint8_t> h) {
  const uint8_t* p = h.data();
  out += "header(size=";
  put_dec(out, a.header_len);
  out += ",type=";
  put_dec(out, a.tnl_type);
  out += ",eth(dst=";
  EthAddr mac;
  std::memcpy(mac.b, p, 6);
  put_mac(out, mac);
  out += ",src=";
  std::memcpy(mac.b, p + 6, 6);
  put_mac(out, mac);
  out += ",dl_type=";
  put_hex(out, get16(p + 12), 4);
  out += "),";
  const uint8_t* l4;
  if (get16(p + 12) == packet::kEthTypeIpv4) {
    const uint8_t* ip = p + 14;
    be32 a4;
    out += "ipv4(src=";
    std::memcpy(&a4, ip + 12, 4);
    put_ipv4(out, a4);
    out += ",dst=";
    std::memcpy(&a4, ip + 16, 4);
    put_ipv4(out, a4);
    out += ",proto=";
    put_dec(out, ip[9]);
    out += ",tos=";
    put_hex_alt(out, ip[1]);
    out += ",ttl=";
    put_dec(out, ip[8]);
    out += ",frag=";
    put_hex(out, get16(ip + 6));
    out += "),";
    l4 = ip + 20;
  } else {
    const uint8_t* ip6 = p + 14;
    In6Addr a6;
    out += "ipv6(src=";
    std::memcpy(a6.b, ip6 + 8, 16);
    put_ipv6(out, a6);
    out += ",dst=";
    std::memcpy(a6.b, ip6 + 24, 16);
    put_ipv6(out, a6);
    const uint32_t flow = get32(ip6);
    out += ",label=";
    put_dec(out, flow & 0xfffff);
    out += ",proto=";
    put_dec(out, ip6[6]);
    out += ",tclass=";
    put_hex(out, (flow >> 20) & 0xff);
    out += ",hlimit=";
    put_dec(out, ip6[7]);
    out += "),";
    l4 = ip6 + 40;
  }
  const auto udp = [&] {
    out += "udp(src=";
    put_dec(out, get16(l4));
    out += ",dst=";
    put_dec(out, get16(l4 + 2));
    out += ",csum=";
    put_hex(out, get16(l4 + 6));
    out += "),";
    return l4 + 8;
  };
  if (a.tnl_type == static_cast<uint8_t>(packet::TnlType::kVxlan)) {
    const uint8_t* v = udp();
    out += "vxlan(flags=";
    put_hex(out, get32(v));
    out += ",vni=";
    put_hex(out, get32(v + 4) >> 8);
    out += ')';
  } else if (a.tnl_type == static_cast<uint8_t>(packet::TnlType::kGeneve)) {
    const uint8_t* g = udp();
    out += "geneve(";
    if (g[1] & packet::kGeneveFlagOam) out += "oam,";
    if (g[1] & packet::kGeneveFlagCrit) out += "crit,";
    out += "vni=";
    put_hex(out, get32(g + 4) >> 8);
    const size_t opts = (g[0] & 0x3fu) * 4;
    if (opts) {
      out += ",options(";
      const uint8_t* o = g + 8;
      for (size_t off = 0; off < opts;) {
        const size_t dlen = (o[off + 3] & 0x1fu) * 4;
        out += "{class=";
        put_hex_alt(out, get16(o + off));
        out += ",type=";
        put_hex_alt(out, o[off + 2]);
        out += ",len=";
        put_dec(out, dlen);
        if (dlen) {
          // ds_put_hex(): "0x" and the bytes without leading zeros; "0" if all zero.
          static constexpr char kHex[] = "0123456789abcdef";
          out += ',';
          bool printed = false;
          for (size_t i = 0; i < dlen; ++i) {
            const uint8_t b = o[off + 4 + i];
            if (!printed && b == 0) continue;
            if (!printed) {
              out += "0x";
              if (b >> 4) out += kHex[b >> 4];
              out += kHex[b & 15];
              printed = true;
            } else {
              out += kHex[b >> 4], out += kHex[b & 15];
            }
          }
          if (!printed) out += '0';
        }
        out += '}';
        off += 4 + dlen;
      }
      out += ')';
    }
    out += ')';
  } else {  // gre, ip6gre
    const uint16_t flags = get16(l4);
    out += "gre((flags=";
    put_hex(out, flags);
    out += ",proto=";
    put_hex(out, get16(l4 + 2));
    out += ')';
    const uint8_t* o = l4 + 4;
    if (flags & packet::kGreCsum) {
      out += ",csum=";
      put_hex(out, get16(o));
      o += 4;
    }
    if (flags & packet::kGreKey) {
      out += ",key=";
      put_hex(out, get32(o));
      o += 4;
    }
    out += ')';
  }
  out += ')';
}

void put_action(std::string& out, const DpAction& a, const DpPortName* port_name) {
  switch (a.type) {
    case DpActionType::kOutput:
      if (port_name && *port_name) {
        if (std::optional<std::string> n = (*port_name)(a.port())) {
          out += *n;
          return;
        }
      }
      put_dec(out, a.port());
      return;
    case DpActionType::kDrop:
      out += "drop";
      return;
    case DpActionType::kPushVlan: {
      out += "push_vlan(";
      if (a.vlan_tpid() != kEthTypeVlan) {
        out += "tpid=";
        put_hex(out, a.vlan_tpid(), 4);
        out += ',';
      }
      const uint16_t tci = a.vlan_tci();
      out += "vid=";
      put_dec(out, tci & kVlanVidMask);
      out += ",pcp=";
      put_dec(out, tci >> 13);
      if (!(tci & kVlanCfi)) out += ",cfi=0";
      out += ')';
      return;
    }
    case DpActionType::kPopVlan:
      out += "pop_vlan";
      return;
    case DpActionType::kSet: {
      const SetSpec* spec = set_spec(a.set_header());
      if (!spec) break;
      out += "set(";
      out += spec->name;
      out += '(';
      bool first = true;
      for (const SetField& f : spec->fields) {
        const uint8_t* k = a.payload + f.offset;
        const uint8_t* m = a.payload + spec->size + f.offset;
        if (all_zero(m, kind_size(f.kind))) continue;
        if (!first) out += ',';
        first = false;
        put_set_field(out, f, k, m);
      }
      out += "))";
      return;
    }
    case DpActionType::kHash:
      out += "hash(l4(";
      put_dec(out, a.basis());
      out += "))";
      return;
    case DpActionType::kRecirc:
      out += "recirc(";
      put_hex_alt(out, a.recirc_id());
      out += ')';
      return;
    case DpActionType::kLbOutput:
      out += "lb_output(";
      put_dec(out, a.bond_id());
      out += ')';
      return;
    case DpActionType::kClone:
      out += "clone(";
      put_dp_actions(out, a.nested(), port_name);
      out += ')';
      return;
    case DpActionType::kTrunc:
      out += "trunc(";
      put_dec(out, a.max_len());
      out += ')';
      return;
    case DpActionType::kMeter:
      out += "meter(";
      put_dec(out, a.meter_id());
      out += ')';
      return;
    case DpActionType::kUserspace: {
      out += "userspace(pid=";
      put_dec(out, a.pid());
      const std::span<const uint8_t> ud = a.userdata();
      if (const std::string_view sp = slow_path_name(ud); (a.sub & kUserspaceUserdata) && !sp.empty()) {
        out += ",slow_path(";
        out += sp;
        out += ')';
      } else if (a.sub & kUserspaceUserdata) {
        static constexpr char kHex[] = "0123456789abcdef";
        out += ",userdata(";
        for (uint8_t c : a.userdata()) out += kHex[c >> 4], out += kHex[c & 15];
        out += ')';
      }
      if (a.sub & kUserspaceActions) out += ",actions";
      if (a.sub & kUserspaceTunnelOutPort) {
        out += ",tunnel_out_port=";
        put_dec(out, a.userspace_args().tunnel_out_port);
      }
      out += ')';
      return;
    }
    case DpActionType::kTnlPop:
      out += "tnl_pop(";
      put_port(out, a.tnl_pop_port(), port_name);
      out += ')';
      return;
    case DpActionType::kTnlPush:
      out += "tnl_push(tnl_port(";
      put_port(out, a.tnl_port(), port_name);
      out += "),";
      put_tnl_push_header(out, a.tnl_push_args(), a.tnl_header());
      out += ",out_port(";
      put_port(out, a.tnl_push_args().out_port, port_name);
      out += "))";
      return;
    default:
      break;
  }
  out += "<unknown action type ";
  put_dec(out, static_cast<unsigned>(a.type));
  out += '>';
}

}  // namespace

void put_dp_actions(std::string& out, std::span<const uint8_t> list, const DpPortName* port_name) {
  if (list.empty()) {
    out += "drop";
    return;
  }
  DpActionReader r(list);
  bool first = true;
  while (!r.done()) {
    if (!first) out += ',';
    first = false;
    put_action(out, r.next(), port_name);
  }
}

std::string format_dp_actions(std::span<const uint8_t> list, const DpPortName* port_name) {
  std::string s;
  put_dp_actions(s, list, port_name);
  return s;
}

}  // namespace keel::flow

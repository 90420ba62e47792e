// Datapath actions — what a megaflow does to the packets that match it, in
// the compact encoding the executor (datapath/execute.h) runs, and in the
// text of Open vSwitch 3.1's `dpctl/dump-flows` / `dpctl/add-flow`
// (`actions:2`, `actions:set(ipv4(src=10.0.0.9,ttl=63)),hash(l4(0)),recirc(0x5)`).
//
// Who uses it: translation (ofproto) emits actions with DpActionsBuilder;
// the text parser (for `add-flow` on the datapath and `trace`) builds the
// same encoding; the megaflow table stores an immutable DpActions per flow;
// the PMD's executor walks the bytes with DpActionReader (or its own inline
// loop) for every batch; `flow-dump` prints them with format_dp_actions().
//
// Encoding. A list is a contiguous byte array, 8-byte aligned, no pointers
// (it can be copied, compared and hashed as bytes, and a hardware offload
// layer can read it as is). Each action is a TLV: an 8-byte header
//
//   byte 0    type   (DpActionType)
//   byte 1    sub    set: which header (SetHeader); hash: algorithm;
//                    userspace: flags (kUserspace*)
//   bytes 2-3 len    bytes of the whole action, header included; a multiple of 8
//   bytes 4-7 arg    the action's one 32-bit argument (host order):
//                    output: port; recirc: id; lb_output: bond id; trunc: max length; meter: id;
//                    hash: basis; push_vlan: tpid << 16 | tci; userspace: pid
//
// then `len - 8` payload bytes:
//
//   output, drop, pop_vlan, push_vlan, hash, recirc, lb_output, trunc, meter
//              none (8 bytes in all)
//   set        the header's fields, then a mask of the same layout (a 1 bit is
//              written); SetEth 12+12, SetIpv4 12+12, SetIpv6 40+40,
//              SetL4 (tcp, udp, sctp) 4+4, SetArp 24+24; padded to 8 with zeros
//   clone      the nested action list
//   userspace  UserspaceArgs (8 bytes), then the userdata, padded to 8
//
// Packet fields in the set payloads are in network byte order, as on the
// wire (like FlowKey). A set whose mask is all ones is Open vSwitch's plain
// `set`, anything else its `masked set`; keel has one action for both. Key
// bits outside the mask are kept as written (so text round-trips: OVS prints
// `src=35.8.2.41/255.255.255.0`) and ignored by the executor, which writes
// (packet & ~mask) | (key & mask). A field whose mask is zero has key zero.
//
// Limits, checked when a list is built or parsed (never on the fast path):
// a list is at most kMaxDpActionsLen bytes, clone() nests at most
// kMaxCloneDepth deep, userdata is at most kMaxUserdataLen bytes.
//
// lb_output(N) sends the packet to bucket dp_hash & 255 of bond N's table
// (datapath/bond_table.h); N is 1..kMaxLbOutputBond (the builder, the
// parser and validate_dp_actions() refuse anything else).
//
// tnl_push(tnl_port(N),header(...),out_port(M)) prepends a tunnel's outer
// header (packet/tunnel_header.h builds it); the actions after it see the
// encapsulated packet (as in Open vSwitch's userspace datapath the packet
// itself is modified; in a clone() the clone's copy). N is the tunnel port the slow path translated (kept for
// the text and the slow path), M the underlay bridge's LOCAL vport the
// encapsulated packet continues from. Payload: TnlPushArgs, then the header
// bytes, padded to 8. tnl_pop(N) decapsulates per vport N's type and
// recirculates the inner packet with in_port N. validate_dp_actions() checks
// that the header's layers (Ethernet, IPv4/IPv6, UDP/GRE, tunnel header)
// are consistent with its length and type.
//
// Text. Parsing follows odp_actions_from_string(): actions separated by
// commas or white space; a bare number is output to that datapath port;
// the list `drop` (alone) is the empty list, which prints as `drop`. Each
// action prints as format_odp_action() prints it:
//
//   2                                  output(2)
//   drop                               an explicit drop (in a list with others)
//   push_vlan(vid=10,pcp=0)            tpid 0x8100 omitted; `tpid=0x88a8,` first
//                                      otherwise; `,cfi=0` when CFI is clear
//   pop_vlan
//   set(eth(src=..,dst=..))            fields whose mask is zero are left out;
//   set(ipv4(src=,dst=,proto=,tos=,ttl=,frag=))   a partial mask is printed
//   set(ipv6(src=,dst=,label=,proto=,tclass=,hlimit=,frag=))  `value/mask`
//   set(tcp(src=,dst=)) set(udp(src=,dst=)) set(sctp(src=,dst=))   sctp: the CRC32c follows
//   set(arp(sip=,tip=,op=,sha=,tha=))  Ethernet/IPv4 ARP and RARP bodies
//   set(icmp(type=,code=)) set(icmpv6(type=,code=))  the checksum follows
//   hash(l4(0))                        basis in decimal
//   recirc(0x5)                        %#x: recirc(0) for 0
//   lb_output(1)                       bond id in decimal (read in decimal only)
//   clone(pop_vlan,3)                  an empty nested list prints `drop`
//   trunc(100)
//   userspace(pid=N[,userdata(hex)][,actions][,tunnel_out_port=N])
//   meter(N)
//   tnl_push(tnl_port(N),header(size=50,type=4,eth(dst=..,src=..,dl_type=0x0800),ipv4(src=..,dst=..,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x7b)),out_port(M))
//                                      as format_odp_tnl_push_header(); geneve(..), gre(..), ipv6(..) too
//   tnl_pop(N)
//
// Port names: with a DpPortNames callback (flow-dump -m, dp-flow get/del of
// such a line) an output prints as the port's name and a bare name reads as
// an output to that port, looked up before any action keyword (as
// odp_actions_from_string() with port names); without one, ports are
// numbers. Checking that a number names a port is the caller's job (see
// for_each_output_port()).
// Deliberate differences from Open vSwitch: userspace() keeps its userdata opaque and prints
// it as `userdata(hex)` (OVS decodes its own cookie formats, sFlow(...),
// flow_sample(...), ...; those are refused here), except keel's own
// slow-path cookie, `slow_path(lacp)` as OVS prints it; `userspace(pid=N)` has no
// userdata (OVS would add a zeroed cookie); `set(ipv4(proto=,frag=))` and
// `set(ipv6(proto=,frag=))` are read, kept and printed but not executed, as
// in OVS's userspace datapath; `drop` is also read as an action inside a
// longer list (`2,drop`: OVS 3.1 prints its explicit drop action so, but
// reads `drop` only as a whole list). Actions OVS has and keel does not (ct,
// sample, push_mpls, check_pkt_len, ...) are refused by name.
//
// Thread-safety: DpActions is immutable once built; any number of threads
// may read one at once. A DpActionsBuilder is used by one thread. The text
// functions are stateless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "flow/flow_key.h"

namespace keel::flow {

// --- encoding -------------------------------------------------------------

enum class DpActionType : uint8_t {
  kOutput = 1,
  kDrop = 2,
  kPushVlan = 3,
  kPopVlan = 4,
  kSet = 5,
  kHash = 6,
  kRecirc = 7,
  kClone = 8,
  kTrunc = 9,
  kUserspace = 10,
  kMeter = 11,
  kLbOutput = 16,
  kTnlPush = 17,  // arg: tnl_port; payload: TnlPushArgs + header bytes
  kTnlPop = 18,   // arg: the tunnel vport
};

// Which header a set action writes (DpActionHeader::sub of kSet).
enum class SetHeader : uint8_t {
  kEth = 1,
  kIpv4 = 2,
  kIpv6 = 3,
  kTcp = 4,
  kUdp = 5,
  kArp = 6,
  kSctp = 7,
  kIcmp = 8,
  kIcmpv6 = 9
};

// DpActionHeader::sub of kHash.
inline constexpr uint8_t kHashAlgL4 = 1;  // hash(l4(basis)); sym_l4 is not implemented

// DpActionHeader::sub of kUserspace: which optional parts are present.
inline constexpr uint8_t kUserspaceUserdata = 1 << 0;       // userdata(...) (possibly empty)
inline constexpr uint8_t kUserspaceActions = 1 << 1;        // ",actions": send the flow's actions up too
inline constexpr uint8_t kUserspaceTunnelOutPort = 1 << 2;  // tunnel_out_port=N

// keel's slow-path userdata, Open vSwitch's slow_path(REASON) cookie: a
// frame the slow path itself must process (a bond's LACPDU; an ARP request
// or neighbour solicitation for a bridge's own address, which keel
// answers). 8 bytes: kind kUserdataKindSlowPath, the reason, six zero
// bytes. Inside userspace(...) these exact bytes print and read as
// `slow_path(lacp)` / `slow_path(action)` (Open vSwitch's SLOW_LACP and
// SLOW_ACTION names), as Open vSwitch prints its cookie; any other
// userdata stays `userdata(hex)`.
inline constexpr uint8_t kUserdataKindSlowPath = 2;
inline constexpr uint8_t kSlowPathReasonLacp = 1;
inline constexpr uint8_t kSlowPathReasonAction = 2;
inline constexpr size_t kSlowPathUserdataBytes = 8;

inline constexpr size_t kMaxDpActionsLen = 32768;  // bytes of one list, nested ones included
inline constexpr unsigned kMaxCloneDepth = 8;
inline constexpr size_t kMaxUserdataLen = 256;
inline constexpr uint32_t kMaxLbOutputBond = 255;  // lb_output(1..255): datapath::kMaxBondId

struct DpActionHeader {
  DpActionType type;
  uint8_t sub;
  uint16_t len;  // whole action, header included; multiple of 8
  uint32_t arg;
};
static_assert(sizeof(DpActionHeader) == 8, "one 8-byte word: output, recirc, pop_vlan... are just this");
static_assert(kMaxDpActionsLen + sizeof(DpActionHeader) <= UINT16_MAX,
              "a clone() holding a whole list must fit DpActionHeader::len");

// Set payloads: the fields as on the wire (network byte order), key then mask.
struct SetEth {
  EthAddr dst, src;  // wire order: destination first
};
struct SetIpv4 {
  be32 src, dst;
  uint8_t tos, ttl;
  uint8_t proto;  // kept for the text, not executed (OVS does not either)
  uint8_t frag;   // 0 no, 1 first, 2 later (OVS_FRAG_TYPE); kept, not executed
};
struct SetIpv6 {
  In6Addr src, dst;
  be32 label;  // low 20 bits
  uint8_t tclass, hlimit;
  uint8_t proto, frag;  // kept for the text, not executed
};
struct SetL4 {
  be16 src, dst;  // TCP, UDP or SCTP ports
};
// Ethernet/IPv4 ARP (and RARP): OVS's ovs_key_arp.
struct SetArp {
  be32 sip, tip;
  be16 op;
  EthAddr sha, tha;
  uint8_t pad[2];  // zero
};
// ICMPv4 / ICMPv6 type and code (OVS's ovs_key_icmp, ovs_key_icmpv6).
struct SetIcmp {
  uint8_t type, code;
};
static_assert(sizeof(SetEth) == 12 && sizeof(SetIpv4) == 12 && sizeof(SetIpv6) == 40 && sizeof(SetL4) == 4 &&
                  sizeof(SetArp) == 24 && sizeof(SetIcmp) == 2,
              "set payload layouts are part of the encoding");

// The payload of a tnl_push action before its header bytes.
inline constexpr size_t kMaxTnlHeaderLen = 256;  // packet::kMaxTunnelHeaderLen
struct TnlPushArgs {
  uint32_t out_port;    // out_port(M)
  uint16_t header_len;  // bytes of header that follow, 14..kMaxTnlHeaderLen
  uint8_t tnl_type;     // packet::TnlType (OVS_VPORT_TYPE_*: 3 gre, 4 vxlan, 5 geneve, 109 ip6gre)
  uint8_t pad;          // zero
};
static_assert(sizeof(TnlPushArgs) == 8, "the header bytes start 8-byte aligned");

// The payload of a userspace action before its userdata.
struct UserspaceArgs {
  uint32_t tunnel_out_port;  // valid with kUserspaceTunnelOutPort
  uint16_t userdata_len;
  uint16_t pad;
};
static_assert(sizeof(UserspaceArgs) == 8, "userdata starts 8-byte aligned");

constexpr size_t dp_align8(size_t n) { return (n + 7) & ~size_t{7}; }

// Bytes of a set action of header `h` (header + key + mask + padding), or 0.
constexpr size_t set_action_len(SetHeader h) {
  switch (h) {
    case SetHeader::kEth:
      return 8 + dp_align8(2 * sizeof(SetEth));
    case SetHeader::kIpv4:
      return 8 + dp_align8(2 * sizeof(SetIpv4));
    case SetHeader::kIpv6:
      return 8 + dp_align8(2 * sizeof(SetIpv6));
    case SetHeader::kTcp:
    case SetHeader::kUdp:
    case SetHeader::kSctp:
      return 8 + dp_align8(2 * sizeof(SetL4));
    case SetHeader::kArp:
      return 8 + dp_align8(2 * sizeof(SetArp));
    case SetHeader::kIcmp:
    case SetHeader::kIcmpv6:
      return 8 + dp_align8(2 * sizeof(SetIcmp));
  }
  return 0;
}

// One decoded action: a view into the list, valid while the list lives.
struct DpAction {
  DpActionType type;
  uint8_t sub;
  uint32_t arg;
  const uint8_t* payload;  // len - 8 bytes after the header
  uint32_t payload_len;

  uint32_t port() const { return arg; }                                    // output
  uint32_t recirc_id() const { return arg; }                               // recirc
  uint32_t bond_id() const { return arg; }                                 // lb_output
  uint32_t max_len() const { return arg; }                                 // trunc
  uint32_t meter_id() const { return arg; }                                // meter
  uint32_t basis() const { return arg; }                                   // hash
  uint32_t pid() const { return arg; }                                     // userspace
  uint16_t vlan_tpid() const { return static_cast<uint16_t>(arg >> 16); }  // push_vlan, host order
  uint16_t vlan_tci() const { return static_cast<uint16_t>(arg); }         // push_vlan, host order
  uint32_t tnl_port() const { return arg; }                                // tnl_push
  uint32_t tnl_pop_port() const { return arg; }                            // tnl_pop: the vport
  SetHeader set_header() const { return static_cast<SetHeader>(sub); }
  // tnl_push: the arguments and the header bytes.
  TnlPushArgs tnl_push_args() const {
    TnlPushArgs a;
    std::memcpy(&a, payload, sizeof a);
    return a;
  }
  std::span<const uint8_t> tnl_header() const { return {payload + sizeof(TnlPushArgs), tnl_push_args().header_len}; }
  // clone: the nested list.
  std::span<const uint8_t> nested() const { return {payload, payload_len}; }
  // set: key and mask (T = SetEth, SetIpv4, SetIpv6, SetL4 or SetArp per set_header()).
  template <typename T>
  void set_fields(T& key, T& mask) const {
    std::memcpy(&key, payload, sizeof(T));
    std::memcpy(&mask, payload + sizeof(T), sizeof(T));
  }
  // userspace.
  UserspaceArgs userspace_args() const {
    UserspaceArgs a;
    std::memcpy(&a, payload, sizeof a);
    return a;
  }
  std::span<const uint8_t> userdata() const {
    return {payload + sizeof(UserspaceArgs), userspace_args().userdata_len};
  }
};

inline DpActionHeader load_action_header(const uint8_t* p) noexcept {
  DpActionHeader h;
  std::memcpy(&h, p, sizeof h);
  return h;
}

// Walks a *valid* list (one the builder, the parser or validate_dp_actions()
// accepted) without checking it: the fast-path contract.
class DpActionReader {
 public:
  explicit DpActionReader(std::span<const uint8_t> list) noexcept
      : p_(list.data()), end_(list.data() + list.size()) {}
  // No action left (right after next(): the one returned was the last).
  bool done() const noexcept { return p_ >= end_; }
  DpAction next() noexcept {
    DpActionHeader h = load_action_header(p_);
    DpAction a{h.type, h.sub, h.arg, p_ + sizeof h, static_cast<uint32_t>(h.len - sizeof h)};
    p_ += h.len;
    return a;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// An immutable, owned action list (what a megaflow points to). The bytes are
// 8-byte aligned; an empty list is `drop`.
class DpActions {
 public:
  DpActions() = default;

  std::span<const uint8_t> bytes() const noexcept {
    return {reinterpret_cast<const uint8_t*>(words_.data()), size_};
  }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  bool operator==(const DpActions& o) const noexcept {
    return size_ == o.size_ && (size_ == 0 || std::memcmp(words_.data(), o.words_.data(), size_) == 0);
  }

  // A copy of encoded bytes, after validate_dp_actions().
  static Result<DpActions> from_bytes(std::span<const uint8_t> bytes);

 private:
  friend class DpActionsBuilder;
  std::vector<uint64_t> words_;
  size_t size_ = 0;
};

// Checks an encoded list: lengths, alignment, known and implemented types,
// set payload sizes, clone depth, userdata length, zero padding. The error
// names the byte offset of the bad action.
Status validate_dp_actions(std::span<const uint8_t> bytes);

// Builds a list. Control path: it allocates. A call that would break a limit
// (list too long, clone too deep, userdata too long) records the first error,
// which finish() returns; later calls are then ignored.
class DpActionsBuilder {
 public:
  void output(uint32_t port);
  void drop();
  void push_vlan(uint16_t tpid, uint16_t tci);  // host order; tci with kVlanCfi (0x1000) = OVS's cfi=1
  void pop_vlan();
  // Masked sets: write (packet & ~mask) | (key & mask). Fields with a zero
  // mask get key zero. An all-ones mask is a plain set.
  void set_eth(const SetEth& key, const SetEth& mask);
  void set_ipv4(const SetIpv4& key, const SetIpv4& mask);
  void set_ipv6(const SetIpv6& key, const SetIpv6& mask);
  void set_tcp(const SetL4& key, const SetL4& mask);
  void set_udp(const SetL4& key, const SetL4& mask);
  void set_arp(const SetArp& key, const SetArp& mask);
  void set_sctp(const SetL4& key, const SetL4& mask);
  void set_icmp(const SetIcmp& key, const SetIcmp& mask, bool v6);
  void hash_l4(uint32_t basis);
  void recirc(uint32_t id);
  void lb_output(uint32_t bond_id);  // lb_output(N): bond N's bucket of dp_hash (datapath/bond_table.h)
  void trunc(uint32_t max_len);
  // tnl_push(tnl_port(N),header(...),out_port(M)): `header` is what
  // packet::build_tunnel_header() made (at most kMaxTnlHeaderLen bytes,
  // checked as validate_dp_actions() checks it); tnl_type a packet::TnlType.
  void tnl_push(uint32_t tnl_port, uint32_t out_port, uint8_t tnl_type, std::span<const uint8_t> header);
  void tnl_pop(uint32_t vport);
  void meter(uint32_t id);
  void userspace(uint32_t pid, std::span<const uint8_t> userdata, bool has_userdata = true,
                 bool include_actions = false, const uint32_t* tunnel_out_port = nullptr);
  // clone(...): begin_clone(), the nested actions, end_clone(). Clones nest.
  void begin_clone();
  void end_clone();

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }  // the first error
  size_t size() const { return size_; }             // bytes so far
  // The list, or the first error (also when a clone is left open).
  Result<DpActions> finish();

 private:
  uint8_t* append(DpActionType type, uint8_t sub, uint32_t arg, size_t len);
  void fail(std::string msg);

  std::vector<uint64_t> words_;
  size_t size_ = 0;
  std::vector<size_t> open_clones_;  // byte offsets of the open clones' headers
  Status status_;
};

// Calls f(port) for every output action, clone() contents included, in
// order. For the caller that must refuse "an action refers to a port that
// does not exist" before installing a flow.
template <typename F>
void for_each_output_port(std::span<const uint8_t> list, F&& f) {
  DpActionReader r(list);
  while (!r.done()) {
    DpAction a = r.next();
    if (a.type == DpActionType::kOutput) {
      f(a.port());
    } else if (a.type == DpActionType::kClone) {
      for_each_output_port(a.nested(), f);
    }
  }
}

// --- text -----------------------------------------------------------------

// Parses the actions of a datapath flow (the text after "actions:").
// `column` is the 1-based column of text[0] in the whole input line, so that
// errors point into the line the user typed (DpFlow::actions_column).
// Errors: "<what> '<token>' at column <N>[: <detail>]".
// `port_number` (may be null) resolves a bare name to an output port.
using DpPortNumber = std::function<std::optional<uint32_t>(std::string_view)>;
Result<DpActions> parse_dp_actions(std::string_view text, size_t column = 1,
                                   const DpPortNumber* port_number = nullptr);

// The list as dpctl/dump-flows prints it ("drop" when empty). `port_name`
// (may be null) names output ports; nullopt from it prints the number.
using DpPortName = std::function<std::optional<std::string>(uint32_t)>;
std::string format_dp_actions(std::span<const uint8_t> list, const DpPortName* port_name = nullptr);
inline std::string format_dp_actions(const DpActions& a, const DpPortName* port_name = nullptr) {
  return format_dp_actions(a.bytes(), port_name);
}
void put_dp_actions(std::string& out, std::span<const uint8_t> list, const DpPortName* port_name = nullptr);

}  // namespace keel::flow

// Translation (xlate.h). The structure follows ofproto-dpif-xlate.c so that
// an Open vSwitch engineer finds the same steps under the same names:
// xlate() = xlate_actions(), Ctx::do_actions() = do_xlate_actions(),
// table_action() = xlate_table_action(), commit() = commit_odp_actions(),
// normal() = xlate_normal(); the trace is a tree of nodes printed like
// ofproto-dpif-trace.c's oftrace_node_print_details(). Control path: it
// allocates (action builder, trace strings) and that is fine here.
#include "ofproto/xlate.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>
#include <variant>

#include "flow/flow_text.h"
#include "flow/of_fields.h"
#include "flow/of_match_syntax.h"
#include "flow/tun_metadata.h"
#include "ofproto/bond.h"
#include "ofproto/tlv_map.h"
#include "ofproto/tunnel.h"
#include "packet/tunnel_header.h"

namespace keel::ofproto {

using namespace flow;
using text::hton16;
using text::hton32;
using text::ntoh16;
using text::ntoh32;

namespace {

// --- small predicates on a FlowKey (OVS's is_ip_any(), is_vlan()...) -------

bool is_ipv4(const FlowKey& f) { return f.dl_type == hton16(text::kEthTypeIp); }
bool is_ipv6(const FlowKey& f) { return f.dl_type == hton16(text::kEthTypeIpv6); }
bool is_ip_any(const FlowKey& f) { return is_ipv4(f) || is_ipv6(f); }
bool is_arp(const FlowKey& f) {
  return f.dl_type == hton16(text::kEthTypeArp) || f.dl_type == hton16(text::kEthTypeRarp);
}
bool eth_type_vlan(be16 tpid) { return tpid == hton16(text::kEthTypeVlan) || tpid == hton16(text::kEthTypeQinQ); }
bool tag_present(const VlanHdr& v) { return v.tci & hton16(text::kVlanCfi); }
bool is_multicast(const EthAddr& a) { return a.b[0] & 1; }
// 01:80:c2:00:00:0x, dropped by NORMAL unless forward_bpdu (OVS default: off).
bool is_reserved_mac(const EthAddr& a) {
  return a.b[0] == 0x01 && a.b[1] == 0x80 && a.b[2] == 0xc2 && a.b[3] == 0 && a.b[4] == 0 && (a.b[5] & 0xf0) == 0;
}
bool is_broadcast(const EthAddr& a) {
  for (uint8_t b : a.b)
    if (b != 0xff) return false;
  return true;
}

// flow_count_vlan_headers(): tags with CFI set, outermost first.
int count_vlans(const FlowKey& f) {
  int n = 0;
  while (n < 2 && tag_present(f.vlans[n])) ++n;
  return n;
}

// flow_fix_vlan_tpid(): a write into vlan_tci/vlan_vid/vlan_pcp (set_field,
// load, move) that leaves a TCI on a flow without a TPID makes the tag an
// 802.1Q one, as mf_set_flow_value() does; without it the commit would push
// a tag with TPID 0.
void fix_vlan_tpid(FlowKey& f) {
  if (f.vlans[0].tpid == 0 && f.vlans[0].tci != 0) f.vlans[0].tpid = hton16(text::kEthTypeVlan);
}

template <typename T>
void set_ones(T& field) {
  std::memset(&field, 0xff, sizeof field);
}


// --- the trace tree (ofproto-dpif-trace.c's oftrace_node) -------------------

enum class NodeType { bridge, table, action, detail, warn, error };

struct TraceNode {
  NodeType type;
  std::string text;
  std::vector<std::unique_ptr<TraceNode>> subs;
};

bool terminal(NodeType t) { return t != NodeType::bridge && t != NodeType::table; }

void print_nodes(std::string& out, const std::vector<std::unique_ptr<TraceNode>>& nodes, int level) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const TraceNode& n = *nodes[i];
    if (n.type == NodeType::bridge) out += '\n';
    const int more = (i + 1 < nodes.size() || terminal(n.type)) ? 1 : 0;
    const std::string indent(static_cast<size_t>((level + more) * 4), ' ');
    out += indent;
    switch (n.type) {
      case NodeType::detail:
        out += " -> " + n.text + "\n";
        break;
      case NodeType::warn:
        out += " >> " + n.text + "\n";
        break;
      case NodeType::error:
        out += " >>>> " + n.text + " <<<<\n";
        break;
      case NodeType::bridge:
        out += n.text + "\n" + indent + std::string(n.text.size(), '-') + "\n";
        break;
      case NodeType::table:
      case NodeType::action:
        out += n.text + "\n";
        break;
    }
    print_nodes(out, n.subs, level + more + more);
  }
}

// --- NORMAL's VLAN view of a packet (OVS's struct xvlan) ---------------------

struct XVlan {
  struct Tag {
    uint16_t tpid = 0;  // host order; 0: default 0x8100
    uint16_t vid = 0;
    uint16_t pcp = 0;  // in place (bits 13-15)
  } v[2];
};

// The trunks of a port as OVS's bundle_set() computes them: native modes
// always trunk their native VLAN and never VLAN 0.
bool trunks_vlan(const PortConfig& p, uint16_t vid) {
  if (p.vlan_mode == VlanMode::access) return false;
  auto listed = [&](uint16_t v) {
    for (uint16_t t : p.trunks)
      if (t == v) return true;
    return false;
  };
  const bool native = p.vlan_mode == VlanMode::native_tagged || p.vlan_mode == VlanMode::native_untagged;
  if (native && p.tag != 0 && (p.trunks.empty() || !listed(p.tag) || listed(0))) {
    if (vid == p.tag) return true;
    if (vid == 0) return false;
  }
  return p.trunks.empty() || listed(vid);
}

bool includes_vlan(const PortConfig& p, const XVlan& x) {
  if (p.vlan_mode == VlanMode::access) return x.v[0].vid == p.tag && x.v[1].vid == 0;
  return trunks_vlan(p, x.v[0].vid);
}


// The ports of `br` as translation sees them: with its LOCAL port (the
// internal vport of a bridge with an address) when the port map has none.
std::shared_ptr<const PortMap> with_local(std::shared_ptr<const PortMap> ports, const Bridge& br,
                                          const XlateTunnels* tnl) {
  if (!ports) ports = std::make_shared<const PortMap>();
  if (!tnl) return ports;
  const uint16_t v = tnl->local_vport(br);
  if (!v || ports->by_ofport(kOfppLocal)) return ports;
  auto m = std::make_shared<PortMap>(*ports);
  PortConfig p;
  p.name = br.name();
  p.ofport = kOfppLocal;
  p.dp_port = v;
  m->ports.push_back(std::move(p));  // 0xfffe: after every other OpenFlow port
  return m;
}

// xlate_optimize_odp_actions(): a trailing clone() is unwrapped (nothing
// follows it, so the packet itself may be changed).
DpActions optimize(DpActions acts) {
  const std::span<const uint8_t> all = acts.bytes();
  DpActionReader r(all);
  DpAction last{};
  while (!r.done()) last = r.next();
  if (all.empty() || last.type != DpActionType::kClone) return acts;
  const std::span<const uint8_t> inner = last.nested();
  const size_t head = static_cast<size_t>(inner.data() - all.data()) - sizeof(DpActionHeader);
  std::vector<uint8_t> bytes(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(head));
  bytes.insert(bytes.end(), inner.begin(), inner.end());
  Result<DpActions> out = DpActions::from_bytes(bytes);
  return out.ok() ? std::move(out.value()) : acts;
}

// --- the translation context --------------------------------------------------

class Ctx {
 public:
  Ctx(const XlateIn& in, std::shared_ptr<const PortMap> ports, XlateOut& out)
      : in_(in), br_(&in.bridge), ports_(std::move(ports)), out_(out), wc_(out.wc), tnl_(in.tunnels),
        side_effects_(in.may_learn) {}

  void run();
  // The underlay bridge's pass of a combined tunnel output (OVS's
  // patch_port_output() as native_tunnel_output() calls it): `f` is the
  // outer packet as received on LOCAL, `base` what the datapath has made
  // of it; actions go into `b`, the trace into `list` (may be null).
  void run_underlay(const FlowKey& f, const FlowKey& base, bool last, DpActionsBuilder* b,
                    std::vector<std::unique_ptr<TraceNode>>* list, unsigned depth, unsigned resubmits);

 private:
  // trace
  TraceNode* report(NodeType t, std::string s) {
    if (!trace_list_) return nullptr;
    trace_list_->push_back(std::make_unique<TraceNode>(TraceNode{t, std::move(s), {}}));
    return trace_list_->back().get();
  }
  void report_error(std::string s) { report(NodeType::error, std::move(s)); }
  void report_table(const OfRule* rule, uint8_t table_id);
  // Records a lookup of `table_id` with flow_ as its key (xlate_deps.h).
  void note_lookup(uint8_t table_id, const OfRule* rule) {
    out_.deps.note(br_, table_id, flow_, underlay_pass_ ? nullptr : &start_, rule);
  }

  // actions
  void do_actions(const OfActions& acts, bool last = false);
  void output_action(uint32_t port, uint16_t max_len, bool last = false);
  void compose_output(uint32_t ofport, bool last = false, bool truncate = false);
  // tunnels
  void tunnel_output(const XlateTunnelPort& tp, bool last, bool truncate);
  void tnl_port_send(const XlateTunnelPort& tp);
  void native_tunnel_output(const XlateTunnelPort& tp, bool last, bool truncate);
  void propagate_tunnel_data(FlowKey& dst, const EthAddr& dmac, const EthAddr& smac, const In6Addr& s_ip6,
                             bool ipv6, uint8_t nw_proto);
  void local_output();
  uint16_t tnl_port_lookup(const std::vector<In6Addr>& addrs);
  bool neighbor_reply_correct(const std::vector<In6Addr>& addrs);
  bool is_garp_wc();
  void neigh_snoop();
  bool neigh_request_for_us(const std::vector<In6Addr>& addrs);
  bool tunnel_recirc();  // second pass of a tunnel fallback (recirc_id kRecircBase + M)
  void pipeline(bool last = true);  // table 0 and the action set
  bool process_ecn();    // tnl_process_ecn(); false: drop
  const TlvTable& tlv();  // the bridge's Geneve TLV map (tun_metadataN)
  bool geneve_from_udpif();  // the key's raw Geneve options -> tun_metadataN; false: invalid
  void flood(bool all);
  void controller(uint16_t max_len, OfPacketInReason reason, uint16_t id);
  bool dec_ttl(const OfDecTtl& d);  // true: stop this action list
  void table_action(uint32_t in_port, uint8_t table_id, bool last = false);
  bool resource_check();
  void report_action_set(const char* verb);
  void execute_action_set();
  bool prereqs_ok(OfPrereq p);
  void load(const OfLoad& l);
  void keep_cfi(const OfSubfield& dst, be16 cfi);
  void move(const OfMove& m);
  void output_reg(const OfOutputReg& o);

  // NORMAL
  void normal();
  bool input_vid_is_valid(uint16_t vid, const PortConfig& in);
  void output_normal(const PortConfig& out, const XVlan& x);
  void output_bundle(const PortConfig& out, uint16_t vid);
  bool is_gratuitous_arp();
  bool bundle_member_enabled(uint32_t ofport);
  bool bond_recirc();     // second pass of a bond's recirculation; false: no bond has the id
  bool process_special(); // slow-protocol frames on a LACP bond member; true: done

  // commit
  void commit();
  void commit_eth();
  void commit_ipv4();
  void commit_ipv6();
  void commit_ports();
  void commit_arp();
  void commit_icmp();
  void commit_vlans();

  void wc_init();
  void wc_finish();

  const XlateIn& in_;
  Bridge* br_;
  std::shared_ptr<const PortMap> ports_;
  XlateOut& out_;
  FlowKey& wc_;
  FlowKey flow_{};  // the packet as the actions have changed it
  FlowKey base_{};  // what the committed datapath actions have made of it
  FlowKey orig_{};  // the packet as it came in
  FlowKey start_{};  // the packet as the pipeline started (lookups record what changed since)
  bool underlay_pass_ = false;  // run_underlay: an outer packet made from tunnel state
  DpActionsBuilder own_b_;
  DpActionsBuilder* b_ = &own_b_;  // the underlay pass writes into its caller's builder
  XlateTunnels* tnl_;
  std::shared_ptr<const TlvTable> tlv_;  // loaded on first use
  bool geneve_raw_ = false;              // the key had raw Geneve options (converted)
  FlowKey raw_{};                        // then: the key as it came
  bool side_effects_;  // OVS's allow_side_effects: neighbour requests, learning (not in the underlay pass)
  unsigned depth_ = 0, resubmits_ = 0;
  uint8_t table_id_ = 0;
  const OfRule* rule_ = nullptr;
  uint64_t rule_cookie_ = UINT64_MAX;
  XlateError error_ = XlateError::ok;
  std::vector<std::unique_ptr<TraceNode>> root_;
  std::vector<std::unique_ptr<TraceNode>>* trace_list_ = nullptr;
  // OpenFlow 1.1+ action set: what write_actions added, in order (it runs
  // when the pipeline ends; of_action_set_list() orders it).
  OfActions action_set_;
  bool in_action_set_ = false;
};

void Ctx::wc_init() {
  wc_ = FlowKey{};
  set_ones(wc_.in_port);
  set_ones(wc_.recirc_id);
  set_ones(wc_.dl_type);
  if (is_ip_any(flow_)) wc_.nw_frag |= text::kFragMask;
  // A packet that came from a tunnel matches the tunnel fields tnl_find()
  // reads (not TTL nor the UDP ports).
  tnl_wc_init(flow_, wc_);
}

void Ctx::wc_finish() {
  // flow_wildcards_clear_non_packet_fields()
  wc_.metadata = 0;
  std::memset(wc_.regs, 0, sizeof wc_.regs);
  wc_.conj_id = 0;
  // ICMP type/code are 8 bits in the datapath.
  if ((is_ipv4(flow_) && flow_.nw_proto == text::kProtoIcmp) ||
      (is_ipv6(flow_) && flow_.nw_proto == text::kProtoIcmpv6)) {
    wc_.tp_src &= hton16(0x00ff);
    wc_.tp_dst &= hton16(0x00ff);
  }
  for (auto& v : wc_.vlans)
    if (v.tci) v.tci |= hton16(text::kVlanCfi);
  if (flow_.nw_frag & kFragLater) wc_.tp_src = wc_.tp_dst = 0;
  // Fields the original packet does not have: set by push/set actions only.
  for (int i = 0; i < 2; ++i)
    if (!eth_type_vlan(orig_.vlans[i].tpid)) wc_.vlans[i] = VlanHdr{};
  const bool tunnel = orig_.tun_ipv4_dst != 0 || !text::is_zero(orig_.tun_ipv6_dst);
  if (!tunnel) {
    // Words 0-39: every tunnel field.
    std::memset(&wc_, 0, offsetof(FlowKey, ct_state));
  }
}

void Ctx::run() {
  if (in_.trace) trace_list_ = &root_;
  flow_ = in_.flow;
  orig_ = flow_;
  // Fragments, under Open vSwitch's default frag handling ("normal"): the
  // rules see no L4 ports, in a first fragment too (which carries them), as
  // OVS's xlate_actions() "pretends that transport ports are unavailable".
  // The megaflow's key keeps the packet's own ports (in_.flow); its mask
  // only has the port bits a lookup consulted, which the zeros answer for
  // any port.
  if (flow_.nw_frag & flow::kFragAny) flow_.tp_src = flow_.tp_dst = 0;
  base_ = flow_;
  // The datapath does not keep tunnel metadata across an output.
  std::memset(&base_, 0, offsetof(FlowKey, ct_state));
  wc_init();

  TraceNode* bridge = report(NodeType::bridge, "bridge(\"" + br_->name() + "\")");
  if (bridge) trace_list_ = &bridge->subs;

  if (flow_.recirc_id != 0) {
    if (tunnel_recirc()) {
      pipeline();
    } else if (!bond_recirc()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "Recirculation context not found for ID %x", flow_.recirc_id);
      report_error(buf);
      error_ = XlateError::no_recirc_context;
    }
  } else if (process_special()) {
    // The slow path has it (OVS: "process_special() did all the processing").
  } else if (!geneve_from_udpif()) {
    report_error("Invalid Geneve tunnel metadata");
    error_ = XlateError::invalid_tunnel_metadata;
  } else if (process_ecn()) {
    pipeline();
  }
  wc_finish();
  if (geneve_raw_) {
    // The megaflow matches the raw options (OVS's
    // tun_metadata_to_geneve_udpif_mask()): their headers exactly, the data
    // bits of the tun_metadataN translation consulted.
    const FlowKey md = wc_;
    wc_.tun_opt_len = 0;
    std::memset(wc_.tun_opts, 0, sizeof wc_.tun_opts);
    to_geneve_udpif_mask(tlv(), raw_, md, wc_);
  }
  out_.final_flow = flow_;
  out_.error = error_;
  if (error_ == XlateError::ok) {
    Result<DpActions> a = b_->finish();
    if (a.ok()) {
      out_.actions = optimize(std::move(a.value()));
    } else {
      out_.error = XlateError::actions_too_long;
      if (trace_list_) report_error(a.status().message());
    }
  }
  if (out_.error != XlateError::ok) {
    out_.actions = DpActions{};
    out_.to_controller = false;
  }
  if (in_.trace) print_nodes(*in_.trace, root_, 0);
}

void Ctx::pipeline(bool last) {
  table_id_ = 0;
  start_ = flow_;
  const OfRule* rule = static_cast<const OfRule*>(br_->table(0).lookup(flow_, in_.version, &wc_));
  note_lookup(0, rule);
  report_table(rule, 0);
  if (rule) {
    out_.rules.push_back(rule);
    rule_ = rule;
    rule_cookie_ = rule->cookie;
    do_actions(rule->actions, last);
  } else {
    // OVS's no_packet_in_rule: no actions.
    report(NodeType::action, "drop");
  }
  // The action set runs at the end of the pipeline, also when the last
  // goto_table missed (OVS 3.1: the miss drops, the action set still runs).
  if (error_ == XlateError::ok) execute_action_set();
}

void Ctx::report_table(const OfRule* rule, uint8_t table_id) {
  if (!trace_list_) return;
  char head[8];
  std::snprintf(head, sizeof head, "%2d. ", table_id);
  std::string s = head;
  if (!rule) {
    s += "No match.";
  } else {
    OfFormatOptions fo;
    s += format_of_match(rule->match, fo);
    if (s.back() != ' ') s += ", ";
    s += "priority " + std::to_string(rule->priority);
    if (rule->cookie) {
      char c[32];
      std::snprintf(c, sizeof c, ", cookie %#llx", static_cast<unsigned long long>(rule->cookie));
      s += c;
    }
  }
  TraceNode* n = report(NodeType::table, std::move(s));
  trace_list_ = &n->subs;
}

void Ctx::do_actions(const OfActions& acts, bool last_list) {
  if (acts.empty()) {
    report(NodeType::action, "drop");
    return;
  }
  for (const OfAction& a : acts) {
    if (error_ != XlateError::ok) break;
    // OVS's is_last_action: nothing follows this action in the whole
    // translation (a tunnel output then needs no clone()).
    const bool last = last_list && &a == &acts.back();
    if (trace_list_) report(NodeType::action, format_of_action(a));
    bool stop = false;
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, OfOutput>) {
            output_action(x.port, x.max_len, last);
          } else if constexpr (std::is_same_v<T, OfOutputReg>) {
            output_reg(x);
          } else if constexpr (std::is_same_v<T, OfController>) {
            controller(x.max_len, x.reason, x.id);
          } else if constexpr (std::is_same_v<T, OfResubmit>) {
            const uint32_t port = x.port == kOfppInPort ? flow_.in_port : x.port;
            const uint8_t table = x.table == kOfTableNone ? table_id_ : x.table;
            table_action(port, table, last);
          } else if constexpr (std::is_same_v<T, OfGotoTable>) {
            table_action(flow_.in_port, x.table, last);
          } else if constexpr (std::is_same_v<T, OfSetVlanVid>) {
            // OpenFlow 1.0 mod_vlan_vid pushes a tag when there is none.
            wc_.vlans[0].tci |= hton16(text::kVlanVidMask | text::kVlanCfi);
            if (!flow_.vlans[0].tpid) flow_.vlans[0].tpid = hton16(text::kEthTypeVlan);
            flow_.vlans[0].tci = static_cast<be16>((flow_.vlans[0].tci & ~hton16(text::kVlanVidMask)) |
                                                   hton16(static_cast<uint16_t>(x.vid | text::kVlanCfi)));
          } else if constexpr (std::is_same_v<T, OfSetVlanPcp>) {
            wc_.vlans[0].tci |= hton16(text::kVlanPcpMask | text::kVlanCfi);
            if (!flow_.vlans[0].tpid) flow_.vlans[0].tpid = hton16(text::kEthTypeVlan);
            flow_.vlans[0].tci = static_cast<be16>((flow_.vlans[0].tci & ~hton16(text::kVlanPcpMask)) |
                                                   hton16(static_cast<uint16_t>((x.pcp << 13) | text::kVlanCfi)));
          } else if constexpr (std::is_same_v<T, OfStripVlan>) {
            // flow_pop_vlan()
            const int n = count_vlans(flow_);
            if (n > 1) {
              set_ones(wc_.vlans[1]);
              flow_.vlans[0] = flow_.vlans[1];
            }
            if (n > 0) flow_.vlans[n - 1] = VlanHdr{};
          } else if constexpr (std::is_same_v<T, OfPushVlan>) {
            // flow_push_vlan_uninit()
            const int n = count_vlans(flow_);
            for (int i = 0; i < n; ++i) set_ones(wc_.vlans[i]);
            flow_.vlans[1] = flow_.vlans[0];
            flow_.vlans[0] = VlanHdr{hton16(x.tpid), hton16(text::kVlanCfi)};
          } else if constexpr (std::is_same_v<T, OfSetEthSrc>) {
            set_ones(wc_.dl_src);
            flow_.dl_src = x.mac;
          } else if constexpr (std::is_same_v<T, OfSetEthDst>) {
            set_ones(wc_.dl_dst);
            flow_.dl_dst = x.mac;
          } else if constexpr (std::is_same_v<T, OfSetIpv4Src>) {
            if (is_ipv4(flow_)) {
              set_ones(wc_.nw_src);
              flow_.nw_src = x.addr;
            }
          } else if constexpr (std::is_same_v<T, OfSetIpv4Dst>) {
            if (is_ipv4(flow_)) {
              set_ones(wc_.nw_dst);
              flow_.nw_dst = x.addr;
            }
          } else if constexpr (std::is_same_v<T, OfSetIpDscp>) {
            if (is_ip_any(flow_)) {
              wc_.nw_tos |= text::kIpDscpMask;
              flow_.nw_tos = static_cast<uint8_t>((flow_.nw_tos & ~text::kIpDscpMask) | (x.tos & text::kIpDscpMask));
            }
          } else if constexpr (std::is_same_v<T, OfSetL4Src> || std::is_same_v<T, OfSetL4Dst>) {
            if (is_ip_any(flow_) && !(flow_.nw_frag & kFragLater)) {
              wc_.nw_proto = 0xff;
              if constexpr (std::is_same_v<T, OfSetL4Src>) {
                wc_.tp_src = 0xffff;
                flow_.tp_src = hton16(x.port);
              } else {
                wc_.tp_dst = 0xffff;
                flow_.tp_dst = hton16(x.port);
              }
            }
          } else if constexpr (std::is_same_v<T, OfLoad>) {
            load(x);
          } else if constexpr (std::is_same_v<T, OfMove>) {
            move(x);
          } else if constexpr (std::is_same_v<T, OfDecTtl>) {
            stop = dec_ttl(x);
          } else if constexpr (std::is_same_v<T, OfNote>) {
            // Nothing to do.
          } else if constexpr (std::is_same_v<T, OfSetTunnel>) {
            flow_.tun_id = text::hton64(x.tun_id);
          } else if constexpr (std::is_same_v<T, OfWriteActions>) {
            action_set_.insert(action_set_.end(), x.set->actions.begin(), x.set->actions.end());
            report_action_set("is");
          } else if constexpr (std::is_same_v<T, OfClearActions>) {
            report_action_set("was");
            action_set_.clear();
          } else if constexpr (std::is_same_v<T, OfWriteMetadata>) {
            const uint64_t md = text::ntoh64(flow_.metadata);
            flow_.metadata = text::hton64((md & ~x.mask) | (x.value & x.mask));
          } else if constexpr (std::is_same_v<T, OfBundle>) {
            // xlate_bundle_action(): the member bundle_execute() picks
            // (none enabled: OFPP_NONE, nothing is output).
            const std::optional<uint32_t> port =
                bundle_execute(x, flow_, &wc_, [this](uint32_t p) { return bundle_member_enabled(p); });
            output_action(port.value_or(kOfppNone), 0, last);
          }
        },
        a);
    if (stop) return;
  }
}

void Ctx::output_action(uint32_t port, uint16_t max_len, bool last) {
  switch (port) {
    case kOfppInPort:
      compose_output(flow_.in_port, last);
      break;
    case kOfppTable:
      table_action(flow_.in_port, 0);
      break;
    case kOfppNormal:
      normal();
      break;
    case kOfppFlood:
      flood(false);
      break;
    case kOfppAll:
      flood(true);
      break;
    case kOfppController:
      controller(max_len, in_action_set_ ? OfPacketInReason::action_set : OfPacketInReason::action, 0);
      break;
    case kOfppNone:
      break;
    default:  // LOCAL and ordinary ports
      if (port != flow_.in_port) {
        if (max_len != 0) {
          // output(port=N,max_len=M) (OVS's xlate_output_trunc_action()):
          // trunc(M) then the output, which knows it is truncated.
          b_->trunc(max_len);
          compose_output(port, last, /*truncate=*/true);
        } else {
          compose_output(port, last);
        }
      } else {
        report(NodeType::detail, "skipping output to input port");
      }
      break;
  }
}

void Ctx::compose_output(uint32_t ofport, bool last, bool truncate) {
  const PortConfig* p = ports_->by_ofport(ofport);
  if (!p) {
    report(NodeType::warn, "Nonexistent output port");
    return;
  }
  if (tnl_) {
    if (std::optional<XlateTunnelPort> tp = tnl_->tunnel_port(*p)) {
      tunnel_output(*tp, last, truncate);
      return;
    }
    if (p->ofport == kOfppLocal) {
      // The bridge's internal vport never transmits: what reaches LOCAL is
      // terminated here (tnl_pop, neighbour replies) or consumed.
      commit();
      local_output();
      return;
    }
  }
  commit();
  b_->output(p->dp_port);
}

void Ctx::flood(bool /*all: keel ports have no no-flood flag, so FLOOD and ALL agree*/) {
  for (const PortConfig& p : ports_->ports)
    if (p.ofport != flow_.in_port) compose_output(p.ofport);
}

void Ctx::controller(uint16_t max_len, OfPacketInReason reason, uint16_t id) {
  commit();
  ControllerUserdata c;
  c.reason = reason;
  c.table_id = table_id_;
  c.controller_id = id;
  c.max_len = max_len;
  c.in_ofport = flow_.in_port;
  c.cookie = rule_cookie_;
  uint8_t ud[kControllerUserdataLen];
  encode_controller_userdata(c, ud);
  b_->userspace(0, ud);
  out_.to_controller = true;
}

bool Ctx::dec_ttl(const OfDecTtl& d) {
  wc_.nw_ttl = 0xff;  // OVS un-wildcards it before looking at dl_type
  if (!is_ip_any(flow_)) return false;
  if (flow_.nw_ttl > 1) {
    --flow_.nw_ttl;
    return false;
  }
  // OVS emits the packet-in for every listed controller (plain dec_ttl:
  // controller 0) whether or not one is connected; keel's controller queue
  // is always there.
  if (d.controller_ids.empty()) {
    controller(0xffff, OfPacketInReason::invalid_ttl, 0);
  } else {
    for (uint16_t id : d.controller_ids) controller(0xffff, OfPacketInReason::invalid_ttl, id);
  }
  report(NodeType::warn, is_ipv4(flow_) ? "IPv4 decrement TTL exception" : "IPv6 decrement TTL exception");
  return true;
}

// xlate_report_action_set(): the action list the set would run now.
void Ctx::report_action_set(const char* verb) {
  if (!trace_list_) return;
  const OfActions list = of_action_set_list(action_set_);
  if (list.empty())
    report(NodeType::detail, std::string("action set ") + verb + " empty");
  else
    report(NodeType::detail, std::string("action set ") + verb + ": " + format_of_actions(list));
}

// xlate_action_set(): runs the action set's list once, as a last table.
void Ctx::execute_action_set() {
  const OfActions list = of_action_set_list(action_set_);
  action_set_.clear();
  if (list.empty()) return;
  // Like OVS, the node goes into the list translation ended in (table 0's).
  if (TraceNode* n = report(NodeType::table, "--. Executing action set:")) trace_list_ = &n->subs;
  in_action_set_ = true;
  do_actions(list, /*last=*/true);
  in_action_set_ = false;
}

bool Ctx::resource_check() {
  if (depth_ >= kMaxResubmitDepth) {
    report_error("over max translation depth " + std::to_string(kMaxResubmitDepth));
    error_ = XlateError::recursion_too_deep;
    return false;
  }
  if (resubmits_ >= kMaxResubmits) {
    report_error("over " + std::to_string(kMaxResubmits) + " resubmit actions");
    error_ = XlateError::too_many_resubmits;
    return false;
  }
  return true;
}

void Ctx::table_action(uint32_t in_port, uint8_t table_id, bool last) {
  if (!resource_check()) return;
  if (table_id >= kNumTables) return;
  const uint8_t old_table = table_id_;
  table_id_ = table_id;
  // Look up with `in_port` as the input port, then restore it (otherwise
  // NORMAL and IN_PORT would see the resubmit's port).
  const uint32_t old_in_port = flow_.in_port;
  flow_.in_port = in_port;
  const OfRule* rule = static_cast<const OfRule*>(br_->table(table_id).lookup(flow_, in_.version, &wc_));
  note_lookup(table_id, rule);
  flow_.in_port = old_in_port;

  auto* old_list = trace_list_;
  report_table(rule, table_id);
  // xlate_recursively()
  ++resubmits_;
  const bool deepens = table_id <= old_table;
  depth_ += deepens;
  const OfRule* old_rule = rule_;
  const uint64_t old_cookie = rule_cookie_;
  if (rule) {
    out_.rules.push_back(rule);
    rule_ = rule;
    rule_cookie_ = rule->cookie;
    do_actions(rule->actions, last);
  } else {
    report(NodeType::action, "drop");  // OVS's no_packet_in_rule
  }
  rule_ = old_rule;
  rule_cookie_ = old_cookie;
  depth_ -= deepens;
  trace_list_ = old_list;
  table_id_ = old_table;
}

// mf_are_prereqs_ok() with wildcards: what it consults is un-wildcarded.
bool Ctx::prereqs_ok(OfPrereq p) {
  auto proto_is = [&](uint8_t proto) {
    if (!is_ip_any(flow_)) return false;
    wc_.nw_proto = 0xff;
    return flow_.nw_proto == proto;
  };
  auto icmp_type_is = [&](uint8_t t) {
    wc_.tp_src |= hton16(0x00ff);
    return (ntoh16(flow_.tp_src) & 0xff) == t;
  };
  auto is_nd = [&]() {
    if (!is_ipv6(flow_) || !proto_is(text::kProtoIcmpv6)) return false;
    if (!icmp_type_is(text::kNdSolicit) && (ntoh16(flow_.tp_src) & 0xff) != text::kNdAdvert) return false;
    wc_.tp_dst |= hton16(0x00ff);
    return (ntoh16(flow_.tp_dst) & 0xff) == 0;
  };
  switch (p) {
    case OfPrereq::none:
      return true;
    case OfPrereq::vlan:
      wc_.vlans[0].tci |= hton16(text::kVlanCfi);
      return tag_present(flow_.vlans[0]);
    case OfPrereq::arp:
      return is_arp(flow_);
    case OfPrereq::ipv4:
      return is_ipv4(flow_);
    case OfPrereq::ipv6:
      return is_ipv6(flow_);
    case OfPrereq::ip_any:
      return is_ip_any(flow_);
    case OfPrereq::tcp:
      return proto_is(text::kProtoTcp);
    case OfPrereq::udp:
      return proto_is(text::kProtoUdp);
    case OfPrereq::sctp:
      return proto_is(text::kProtoSctp);
    case OfPrereq::icmpv4:
      return is_ipv4(flow_) && proto_is(text::kProtoIcmp);
    case OfPrereq::icmpv6:
      return is_ipv6(flow_) && proto_is(text::kProtoIcmpv6);
    case OfPrereq::nd:
      return is_nd();
    case OfPrereq::nd_solicit:
      return is_nd() && (ntoh16(flow_.tp_src) & 0xff) == text::kNdSolicit;
    case OfPrereq::nd_advert:
      return is_nd() && (ntoh16(flow_.tp_src) & 0xff) == text::kNdAdvert;
  }
  return false;
}

// A write into bits of vlan_vid keeps the "present" bit as it was (OVS's
// mf_set_flow_value_masked() reads VID|CFI, replaces the bits, writes both
// back): a move into OXM_OF_VLAN_VID on an untagged packet leaves it
// untagged. (write_field() sets CFI for vlan_vid, which is what a match means.)
void Ctx::keep_cfi(const OfSubfield& dst, be16 cfi) {
  if (dst.field != OfFieldId::vlan_vid) return;
  flow_.vlans[0].tci = static_cast<be16>((flow_.vlans[0].tci & ~hton16(text::kVlanCfi)) | cfi);
}

void Ctx::load(const OfLoad& l) {
  const OfFieldInfo& f = of_field(l.dst.field);
  if (!prereqs_ok(f.prereq)) {
    report(NodeType::warn, "unmet prerequisites for " + std::string(f.name) + ", set_field ignored");
    return;
  }
  unwildcard_subfield(wc_, l.dst);
  const be16 cfi = flow_.vlans[0].tci & hton16(text::kVlanCfi);
  write_subfield(flow_, l.dst, OfValue::from_u64(l.value));
  keep_cfi(l.dst, cfi);
  fix_vlan_tpid(flow_);
}

void Ctx::move(const OfMove& m) {
  // mf_subfield_copy(): both fields must exist in the packet.
  if (!prereqs_ok(of_field(m.dst.field).prereq) || !prereqs_ok(of_field(m.src.field).prereq)) return;
  unwildcard_subfield(wc_, m.src);
  unwildcard_subfield(wc_, m.dst);
  const be16 cfi = flow_.vlans[0].tci & hton16(text::kVlanCfi);
  write_subfield(flow_, m.dst, read_subfield(flow_, m.src));
  keep_cfi(m.dst, cfi);
  fix_vlan_tpid(flow_);
}

// xlate_output_reg_action(): the port is read from the flow as it is now;
// only a value that is a 16-bit port un-wildcards the subfield.
void Ctx::output_reg(const OfOutputReg& o) {
  const OfValue v = read_subfield(flow_, o.src);
  bool high = false;  // bits above 64 (a 128-bit field): too big whatever the rest
  uint64_t port = 0;
  for (size_t i = 0; i < 8; ++i) high |= v.b[i] != 0;
  for (size_t i = 8; i < 16; ++i) port = port << 8 | v.b[i];
  if (high || port > 0xffff) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "output port %llu exceeds maximum", static_cast<unsigned long long>(port));
    report_error(buf);
    return;
  }
  unwildcard_subfield(wc_, o.src);
  output_action(static_cast<uint32_t>(port), port == kOfppController ? 0xffff : 0);  // as output:CONTROLLER
}

// --- NORMAL --------------------------------------------------------------------

bool Ctx::input_vid_is_valid(uint16_t vid, const PortConfig& in) {
  char buf[160];
  switch (in.vlan_mode) {
    case VlanMode::access:
      if (vid) {
        std::snprintf(buf, sizeof buf,
                      "dropping VLAN %u tagged packet received on port %s configured as VLAN %u access port", vid,
                      in.name.c_str(), in.tag);
        report_error(buf);
        return false;
      }
      return true;
    case VlanMode::native_tagged:
    case VlanMode::native_untagged:
      if (!vid) return true;  // a port always carries its native VLAN
      [[fallthrough]];
    case VlanMode::trunk:
      if (!trunks_vlan(in, vid)) {
        std::snprintf(buf, sizeof buf,
                      "dropping VLAN %u packet received on port %s not configured for trunking VLAN %u", vid,
                      in.name.c_str(), vid);
        report_error(buf);
        return false;
      }
      return true;
  }
  return false;
}

void Ctx::output_normal(const PortConfig& out, const XVlan& x) {
  // xvlan_output_translate()
  XVlan o = x;
  if (out.vlan_mode == VlanMode::access) {
    o = XVlan{};
  } else if (out.vlan_mode == VlanMode::native_untagged && x.v[0].vid == out.tag) {
    o.v[0] = o.v[1];
    o.v[1] = XVlan::Tag{};
  }
  // xvlan_put() on the flow for this output, then put the flow back.
  const VlanHdr saved[2] = {flow_.vlans[0], flow_.vlans[1]};
  for (int i = 0; i < 2; ++i) {
    uint16_t tci = static_cast<uint16_t>(o.v[i].vid | (o.v[i].pcp & text::kVlanPcpMask));
    if (tci) {
      tci |= text::kVlanCfi;
      flow_.vlans[i].tpid = hton16(o.v[i].tpid ? o.v[i].tpid : text::kEthTypeVlan);
    }
    flow_.vlans[i].tci = hton16(tci);
  }
  output_bundle(out, o.v[0].vid);
  flow_.vlans[0] = saved[0];
  flow_.vlans[1] = saved[1];
}

void Ctx::normal() {
  out_.uses_normal = true;
  set_ones(wc_.dl_src);
  set_ones(wc_.dl_dst);
  wc_.vlans[0].tci |= hton16(text::kVlanVidMask | text::kVlanCfi);

  const PortConfig* in = ports_->by_ofport(flow_.in_port);
  if (!in) {
    report(NodeType::warn, "no input bundle, dropping");
    return;
  }
  // A VLAN ethertype without a tag: a malformed frame.
  if (eth_type_vlan(flow_.dl_type) && !tag_present(flow_.vlans[0])) {
    report(NodeType::warn, "partial VLAN tag, dropping");
    return;
  }
  // xvlan_extract()
  XVlan in_x;
  for (int i = 0; i < 2; ++i) {
    if (!eth_type_vlan(flow_.vlans[i].tpid) || !tag_present(flow_.vlans[i])) break;
    const uint16_t tci = ntoh16(flow_.vlans[i].tci);
    in_x.v[i] = {ntoh16(flow_.vlans[i].tpid), static_cast<uint16_t>(tci & text::kVlanVidMask),
                 static_cast<uint16_t>(tci & text::kVlanPcpMask)};
  }
  if (!input_vid_is_valid(in_x.v[0].vid, *in)) {
    report(NodeType::warn, "disallowed VLAN VID for this input port, dropping");
    return;
  }
  // xvlan_input_translate()
  XVlan x = in_x;
  switch (in->vlan_mode) {
    case VlanMode::access:
      x = XVlan{};
      x.v[0] = {in_x.v[0].tpid ? in_x.v[0].tpid : text::kEthTypeVlan, in->tag, in_x.v[0].pcp};
      break;
    case VlanMode::trunk:
      break;
    case VlanMode::native_tagged:
    case VlanMode::native_untagged:
      if (!in_x.v[0].vid) x.v[0] = {in_x.v[0].tpid ? in_x.v[0].tpid : text::kEthTypeVlan, in->tag, in_x.v[0].pcp};
      break;
  }
  const uint16_t vlan = x.v[0].vid;

  // is_admissible(): reserved multicast destinations are not forwarded.
  if (is_reserved_mac(flow_.dl_dst)) {
    report(NodeType::detail, "packet has reserved destination MAC, dropping");
    return;
  }
  MacLearning& ml = br_->mac();
  if (in->bond_obj) {
    switch (in->bond_obj->check_admissibility(in->bond_member, flow_)) {
      case BondVerdict::accept:
        break;
      case BondVerdict::drop:
        report(NodeType::detail, "bonding refused admissibility, dropping");
        return;
      case BondVerdict::drop_if_moved: {
        const std::optional<uint32_t> at = ml.lookup(vlan, flow_.dl_src, in_.now_ns);
        if (at && *at != in->bundle() && !is_gratuitous_arp()) {
          report(NodeType::detail, "SLB bond thinks this packet looped back, dropping");
          return;
        }
        break;
      }
    }
  }

  // is_gratuitous_arp(): consulted on every NORMAL ARP packet, so its
  // reads are in the mask (it matters for learning on bonds).
  (void)is_gratuitous_arp();

  if (in_.may_learn && !is_multicast(flow_.dl_src)) {
    if (ml.learn(vlan, flow_.dl_src, in->bundle(), in_.now_ns)) out_.mac_changed = true;
  }
  out_.mac_generation = ml.generation();

  std::optional<uint32_t> port = ml.lookup(vlan, flow_.dl_dst, in_.now_ns);
  if (port) {
    const PortConfig* out = ports_->by_ofport(*port);
    if (!out) {
      report(NodeType::warn, "learned port is unknown, dropping");
    } else if (out == in || out->bundle() == in->bundle()) {
      report(NodeType::detail, "learned port is input port, dropping");
    } else {
      report(NodeType::detail, "forwarding to learned port");
      output_normal(*out, x);
    }
    return;
  }
  report(NodeType::detail, "no learned MAC for destination, flooding");
  // Once per bundle: a bond is flooded to through its first member's entry
  // (output_bundle picks the member), and never back into the input bond.
  for (const PortConfig& p : ports_->ports)
    if (p.bundle() != in->bundle() && p.bundle() == p.ofport && includes_vlan(p, x)) output_normal(p, x);
}

// is_gratuitous_arp(): an ARP to broadcast whose sender is its target (a
// request) or any ARP reply to broadcast; what it reads joins the mask.
bool Ctx::is_gratuitous_arp() {
  if (flow_.dl_type != hton16(text::kEthTypeArp)) return false;
  if (!is_broadcast(flow_.dl_dst)) return false;
  wc_.nw_proto = 0xff;
  if (flow_.nw_proto == 2 /* ARP reply */) return true;
  if (flow_.nw_proto == 1 /* ARP request */) {
    set_ones(wc_.nw_src);
    set_ones(wc_.nw_dst);
    return flow_.nw_src == flow_.nw_dst;
  }
  return false;
}

// member_enabled_cb() of Open vSwitch: the reserved ports that are not
// CONTROLLER always; a port when its link is up and, if it is a bond's
// member, the bond has it enabled (OVS's xport->may_enable).
bool Ctx::bundle_member_enabled(uint32_t ofport) {
  switch (ofport) {
    case kOfppInPort:
    case kOfppTable:
    case kOfppNormal:
    case kOfppFlood:
    case kOfppAll:
    case kOfppNone:
      return true;
    case kOfppController:
      return false;
    default:
      break;
  }
  const PortConfig* p = ports_->by_ofport(ofport);
  if (!p || !br_->port_link_up(p->dp_port)) return false;
  if (!p->bond_obj) return true;
  const BondView v = p->bond_obj->view(in_.now_ns / 1'000'000);
  return p->bond_member < v.members.size() && v.members[p->bond_member].enabled;
}

// output_normal()'s choice of port for a bundle (OVS: a bond's
// bond_choose_output_member(), or the recirculation it asks for).
void Ctx::output_bundle(const PortConfig& out, uint16_t vid) {
  if (!out.bond_obj) {
    compose_output(out.ofport);
    return;
  }
  const Bond& bond = *out.bond_obj;
  if (bond.use_lb_output() || bond.use_recirc()) {
    // As OVS's output_normal(): the bond must have a member for the packet
    // at all (balance-tcp needs LACP negotiated: without, or with no member
    // enabled, nothing is sent), asked without a mask. Every L4 flow then
    // shares this megaflow: the hash reads no field into the mask (OVS:
    // "Recirculation does not require unmasking hash fields"); the
    // datapath picks the member per packet.
    if (!bond.choose_output(flow_, nullptr, vid)) return;
    const uint32_t basis = bond.settings().hash_basis;
    commit();
    b_->hash_l4(basis);
    if (bond.use_lb_output())
      b_->lb_output(bond.id());
    else
      b_->recirc(bond.id());
    return;
  }
  std::optional<BondMemberConfig> m = bond.choose_output(flow_, &wc_, vid);
  if (!m) return;  // no member enabled: drop (as OVS, silently)
  if (bond.settings().mode != BondMode::active_backup) out_.bond_choices.push_back({out.bond_obj, flow_, vid});
  compose_output(m->ofport);
}

// The second pass of `hash(l4(B)),recirc(ID)`: Open vSwitch installs one
// rule per bucket in its internal table 254 (bond_update_post_recirc_rules:
// recirc_id=ID,dp_hash=K/0xff -> output:member); keel answers the same
// from the Bond directly, with the same megaflow
// (recirc_id(ID),dp_hash(K/0xff),...).
bool Ctx::bond_recirc() {
  const PortConfig* owner = nullptr;
  for (const PortConfig& p : ports_->ports)
    if (p.bond_obj && p.bond_obj->id() == flow_.recirc_id) {
      owner = &p;
      break;
    }
  if (!owner) return false;
  const unsigned bucket = flow_.dp_hash & datapath::kBondBucketMask;
  wc_.dp_hash |= datapath::kBondBucketMask;
  std::optional<BondMemberConfig> m = owner->bond_obj->bucket_member(bucket);
  if (trace_list_) {
    char head[96];
    std::snprintf(head, sizeof head, "254. recirc_id=%#x,dp_hash=%#x/0xff, priority 20", flow_.recirc_id, bucket);
    TraceNode* n = report(NodeType::table, head);
    trace_list_ = &n->subs;
    report(NodeType::action, m ? "output:" + std::to_string(m->ofport) : std::string("drop"));
  }
  if (m) {
    compose_output(m->ofport);
    if (owner->bond_loads) out_.bond_choices.push_back({owner->bond_obj, {}, 0, owner->bond_loads, bucket});
  }
  return true;
}

// process_special(): a slow-protocol frame (OVS's ETH_TYPE_LACP, 0x8809)
// received on a member of a bond that runs LACP goes to the slow path and
// nowhere else. dl_type is in every megaflow already (wc_init).
bool Ctx::process_special() {
  const PortConfig* in = ports_->by_ofport(flow_.in_port);
  if (!in || !in->lacp || flow_.dl_type != hton16(0x8809)) return false;
  uint8_t ud[kSlowPathUserdataLen];
  encode_slow_path_userdata(SlowPathReason::lacp, ud);
  b_->userspace(0, ud);
  out_.slow_path_lacp = true;
  return true;
}

// --- tunnels (OVS's native tunnelling in ofproto-dpif-xlate.c) ----------------

In6Addr mapped_ipv4(be32 a) {
  In6Addr r{};
  r.b[10] = r.b[11] = 0xff;
  std::memcpy(&r.b[12], &a, 4);
  return r;
}
bool is_v4_mapped(const In6Addr& a) {
  for (int i = 0; i < 10; ++i)
    if (a.b[i]) return false;
  return a.b[10] == 0xff && a.b[11] == 0xff;
}
be32 get_mapped_ipv4(const In6Addr& a) {
  if (!is_v4_mapped(a)) return 0;
  be32 r;
  std::memcpy(&r, &a.b[12], 4);
  return r;
}
// ipv6_string_mapped(): dotted quad for a v4-mapped address.
std::string ip_string_mapped(const In6Addr& a) {
  std::string s;
  if (is_v4_mapped(a))
    text::put_ipv4(s, get_mapped_ipv4(a));
  else
    text::put_ipv6(s, a);
  return s;
}
std::string mac_string(const EthAddr& m) {
  std::string s;
  text::put_mac(s, m);
  return s;
}
bool is_zero_mac(const EthAddr& m) {
  for (uint8_t b : m.b)
    if (b) return false;
  return true;
}

// The outer header bytes from the flow's tunnel fields as tnl_port_send()
// left them (OVS's netdev_init_tnl_build_header_params() +
// tnl_port_build_header(); packet/tunnel_header.h builds the bytes).
bool build_tunnel_header(const XlateTunnelPort& tp, const FlowKey& f, const EthAddr& dmac, const EthAddr& smac,
                         const In6Addr& s_ip6, const TlvTable& tlv, std::vector<uint8_t>& h, uint8_t& tnl_type) {
  packet::TunnelHeaderSpec spec;
  spec.type = tp.type == XlateTunnelType::vxlan    ? packet::TnlType::kVxlan
              : tp.type == XlateTunnelType::geneve ? packet::TnlType::kGeneve
                                                   : packet::TnlType::kGre;
  spec.ipv6 = f.tun_ipv4_dst == 0;
  spec.eth_dst = dmac;
  spec.eth_src = smac;
  if (spec.ipv6) {
    spec.ipv6_src = s_ip6;
    spec.ipv6_dst = f.tun_ipv6_dst;
  } else {
    spec.ipv4_src = get_mapped_ipv4(s_ip6);
    spec.ipv4_dst = f.tun_ipv4_dst;
  }
  spec.tos = f.tun_tos;
  spec.ttl = f.tun_ttl;
  spec.dont_fragment = f.tun_flags & kTunDontFragment;
  spec.udp_dst = ntoh16(f.tun_tp_dst);
  // UDP over IPv6 always carries a checksum (OVS's udp_build_header).
  spec.csum = (f.tun_flags & kTunCsum) || (spec.ipv6 && tp.type != XlateTunnelType::gre);
  spec.key_present = f.tun_flags & kTunKey;
  const uint64_t id = text::ntoh64(f.tun_id);
  spec.key = static_cast<uint32_t>(tp.type == XlateTunnelType::gre ? id : id & 0xffffff);
  spec.oam = f.tun_flags & kTunOam;
  // tun_metadataN (the flow's metadata form) as the bridge's TLV map
  // lays them out (OVS's tun_metadata_to_geneve_header()).
  std::array<uint8_t, kGeneveOptsMax> opts{};
  if (tp.type == XlateTunnelType::geneve && f.tun_opt_len) {
    bool crit = false;
    const size_t n = to_geneve_options(tlv, f, std::span<uint8_t, kGeneveOptsMax>(opts), &crit);
    spec.geneve_opts = std::span<const uint8_t>(opts.data(), n);
    spec.critical = crit;
  }
  Result<packet::TunnelHeader> r = packet::build_tunnel_header(spec);
  if (!r.ok()) return false;
  h.assign(r.value().span().begin(), r.value().span().end());
  tnl_type = static_cast<uint8_t>(r.value().type);
  return true;
}

// compose_output_action__() for a tunnel port with native tunnelling on.
void Ctx::tunnel_output(const XlateTunnelPort& tp, bool last, bool truncate) {
  // The tunnel fields the port sets are not visible to later actions;
  // explicit sets of tunnel fields are (OVS saves flow->tunnel first).
  const FlowKey saved = flow_;
  tnl_port_send(tp);
  const In6Addr dst = flow_.tun_ipv4_dst ? mapped_ipv4(flow_.tun_ipv4_dst) : flow_.tun_ipv6_dst;
  const In6Addr orig_dst = orig_.tun_ipv4_dst ? mapped_ipv4(orig_.tun_ipv4_dst) : orig_.tun_ipv6_dst;
  if (dst == orig_dst) {
    report(NodeType::warn, "Not tunneling to our own address");
  } else {
    report(NodeType::detail, "output to native tunnel");
    commit();
    native_tunnel_output(tp, last, truncate);
  }
  flow_ = saved;
}

// tnl_port_send(): the tunnel fields of the outer header, from the port's
// settings or (remote_ip=flow, key=flow...) from what the actions set.
void Ctx::tnl_port_send(const XlateTunnelPort& tp) {
  auto set_addr = [](const In6Addr& a, be32& v4, In6Addr& v6) {
    v4 = get_mapped_ipv4(a);
    v6 = v4 ? In6Addr{} : a;
  };
  if (!tp.local_flow) set_addr(tp.local, flow_.tun_ipv4_src, flow_.tun_ipv6_src);
  if (!tp.remote_flow) set_addr(tp.remote, flow_.tun_ipv4_dst, flow_.tun_ipv6_dst);
  flow_.tun_tp_dst = hton16(tp.dst_port);
  if (!tp.out_key_flow) flow_.tun_id = text::hton64(tp.out_key);
  const bool ip = is_ip_any(flow_);
  if (tp.ttl_inherit && ip) {
    wc_.nw_ttl = 0xff;
    flow_.tun_ttl = flow_.nw_ttl;
  } else {
    flow_.tun_ttl = tp.ttl;
  }
  if (tp.tos_inherit && ip) {
    wc_.nw_tos |= text::kIpDscpMask;
    flow_.tun_tos = flow_.nw_tos & text::kIpDscpMask;
  } else {
    flow_.tun_tos = tp.tos;
  }
  if (ip) {  // ECN is always inherited; CE becomes ECT(0)
    wc_.nw_tos |= text::kIpEcnMask;
    if ((flow_.nw_tos & text::kIpEcnMask) == text::kIpEcnMask)
      flow_.tun_tos |= 0x02;
    else
      flow_.tun_tos |= flow_.nw_tos & text::kIpEcnMask;
  }
  flow_.tun_flags &= static_cast<uint16_t>(~(kTunDontFragment | kTunCsum | kTunKey));
  flow_.tun_flags |= static_cast<uint16_t>((tp.dont_fragment ? kTunDontFragment : 0) | (tp.csum ? kTunCsum : 0) |
                                           (tp.out_key_present ? kTunKey : 0));
}

// propagate_tunnel_data_to_flow__(): after tnl_push the packet is the outer one.
void Ctx::propagate_tunnel_data(FlowKey& dst, const EthAddr& dmac, const EthAddr& smac, const In6Addr& s_ip6,
                                bool ipv6, uint8_t nw_proto) {
  dst.dl_dst = dmac;
  dst.dl_src = smac;
  dst.vlans[0] = dst.vlans[1] = VlanHdr{};
  dst.nw_dst = flow_.tun_ipv4_dst;
  dst.nw_src = flow_.tun_ipv4_src;
  dst.ipv6_dst = flow_.tun_ipv6_dst;
  dst.ipv6_src = flow_.tun_ipv6_src;
  dst.nw_frag = 0;
  dst.nw_tos = flow_.tun_tos;
  dst.nw_ttl = flow_.tun_ttl;
  dst.tp_dst = flow_.tun_tp_dst;
  dst.tp_src = flow_.tun_tp_src;
  if (ipv6) {
    dst.dl_type = hton16(text::kEthTypeIpv6);
    if (text::is_zero(dst.ipv6_src) && !text::is_zero(s_ip6)) dst.ipv6_src = s_ip6;
  } else {
    dst.dl_type = hton16(text::kEthTypeIp);
    const be32 s_ip = get_mapped_ipv4(s_ip6);
    if (dst.nw_src == 0 && s_ip) dst.nw_src = s_ip;
  }
  dst.nw_proto = nw_proto;
}

// native_tunnel_output(): route, neighbour, header; then the underlay
// bridge's actions for the outer packet in the same pass (combined), or
// tnl_push + recirculation where that is not possible.
void Ctx::native_tunnel_output(const XlateTunnelPort& tp, bool last, bool truncate) {
  const FlowKey old_flow = flow_, old_base = base_;
  In6Addr s_ip6{};
  if (flow_.tun_ipv4_src) s_ip6 = mapped_ipv4(flow_.tun_ipv4_src);
  else if (!text::is_zero(flow_.tun_ipv6_src)) s_ip6 = flow_.tun_ipv6_src;
  const In6Addr dst = flow_.tun_ipv4_dst ? mapped_ipv4(flow_.tun_ipv4_dst) : flow_.tun_ipv6_dst;
  std::optional<XlateRoute> rt = tnl_->route(dst, flow_.pkt_mark);
  if (!rt || !rt->bridge) {
    report(NodeType::warn, "native tunnel routing failed");
    out_.tnl_output_failed = true;
    return;
  }
  // A gateway (not the v4-mapped 0.0.0.0) is the next hop.
  const bool gw = !text::is_zero(rt->gw) && (!is_v4_mapped(rt->gw) || get_mapped_ipv4(rt->gw));
  const In6Addr nh = gw ? rt->gw : dst;
  if (text::is_zero(s_ip6)) s_ip6 = rt->src;
  const std::string nh_str = ip_string_mapped(nh);
  report(NodeType::detail, "tunneling to " + nh_str + " via " + rt->dev);
  Bridge& ubr = *rt->bridge;
  std::optional<EthAddr> smac = tnl_->bridge_mac(ubr);
  if (!smac) {
    report(NodeType::warn, "tunnel output device lacks Ethernet address");
    out_.tnl_output_failed = true;
    return;
  }
  const be32 d_ip = get_mapped_ipv4(nh);
  std::optional<EthAddr> dmac = tnl_->neighbor(ubr, nh);
  if (!dmac) {
    report(NodeType::detail, "neighbor cache miss for " + nh_str + " on bridge " + ubr.name() + ", sending " +
                                 (d_ip ? "ARP" : "ND") + " request");
    if (side_effects_) tnl_->send_neighbor_request(ubr, *smac, rt->src, nh);
    // Dropped now; no megaflow, so the next packet finds the neighbour.
    out_.cacheable = false;
    out_.tnl_neigh_miss = true;
    return;
  }
  report(NodeType::detail, "tunneling from " + mac_string(*smac) + " " + ip_string_mapped(s_ip6) + " to " +
                               mac_string(*dmac) + " " + nh_str);
  const bool ipv6 = flow_.tun_ipv4_dst == 0;
  std::vector<uint8_t> header;
  uint8_t tnl_type = 0;
  if (!build_tunnel_header(tp, flow_, *dmac, *smac, s_ip6, tlv(), header, tnl_type)) {
    report(NodeType::warn, "native tunnel header build failed");
    out_.tnl_output_failed = true;
    return;
  }
  const uint8_t nw_proto = tp.type == XlateTunnelType::gre ? 47 : text::kProtoUdp;
  propagate_tunnel_data(base_, *dmac, *smac, s_ip6, ipv6, nw_proto);
  propagate_tunnel_data(flow_, *dmac, *smac, s_ip6, ipv6, nw_proto);

  // The outer packet as the underlay bridge receives it on LOCAL (OVS's
  // patch_port_output()): no metadata, registers or tunnel.
  FlowKey outer = flow_;
  outer.in_port = kOfppLocal;
  outer.metadata = 0;
  std::memset(outer.regs, 0, sizeof outer.regs);
  std::memset(&outer, 0, offsetof(FlowKey, ct_state));
  const std::shared_ptr<const PortMap> uports = with_local(ubr.ports(), ubr, tnl_);

  // From here on the result depends on the underlay's rules (the dry run's
  // too): its generation before its version is read, as for the bridge.
  if (out_.underlay && out_.underlay != &ubr) out_.underlay_many = true;
  if (!out_.underlay) out_.underlay_rules_generation = ubr.rules_generation();
  out_.underlay = &ubr;
  const char* why = nullptr;
  XlateOut dry_out;
  if (truncate) {
    why = "a trunc action precedes the tunnel output";
  } else if (!tnl_->combine()) {
    why = "tunnel-combine is false";
  } else {
    // A dry run tells whether the underlay does anything (nothing: no
    // tnl_push either, as OVS cancels the clone) and whether it sends to
    // the controller (which must see the packet as it is then: recirculate).
    XlateIn din{ubr, outer, ubr.version(), in_.now_ns, false, true, nullptr, tnl_, kOfppLocal};
    DpActionsBuilder scratch;
    Ctx dry(din, uports, dry_out);
    dry.run_underlay(outer, base_, last, &scratch, nullptr, depth_ + 1, resubmits_);
    // What decided combine or not, and nothing to push at all.
    out_.deps.merge(dry_out.deps);
    if (dry_out.uses_normal) {
      out_.underlay_uses_normal = true;
      out_.underlay_mac_generation = dry_out.mac_generation;
    }
    if (dry.error_ != XlateError::ok) {
      error_ = dry.error_;
      flow_ = old_flow;
      base_ = old_base;
      return;
    }
    if (dry_out.to_controller) {
      why = "the underlay bridge sends the packet to the controller";
    } else if (scratch.size() == 0) {
      flow_ = old_flow;
      base_ = old_base;
      return;
    }
  }
  if (!last) b_->begin_clone();
  b_->tnl_push(tp.vport, rt->local_vport, tnl_type, header);
  if (why) {
    report(NodeType::detail, std::string("tunnel combine: not possible, ") + why + "; recirculating");
    b_->recirc(XlateTunnels::kRecircBase + rt->local_vport);
    out_.tnl_recirc = true;
  } else {
    XlateIn uin{ubr, outer, ubr.version(), in_.now_ns, in_.may_learn, true, nullptr, tnl_, kOfppLocal};
    XlateOut uout;
    Ctx u(uin, uports, uout);
    u.run_underlay(outer, base_, last, b_, trace_list_, depth_ + 1, resubmits_);
    resubmits_ = u.resubmits_;
    if (u.error_ != XlateError::ok) error_ = u.error_;
    out_.rules.insert(out_.rules.end(), uout.rules.begin(), uout.rules.end());
    out_.deps.merge(uout.deps);
    for (auto& c : uout.bond_choices) out_.bond_choices.push_back(std::move(c));
    out_.underlay_uses_normal |= uout.uses_normal;
    if (uout.uses_normal) out_.underlay_mac_generation = uout.mac_generation;
    out_.mac_changed |= uout.mac_changed;
    out_.cacheable &= uout.cacheable;
  }
  if (!last) b_->end_clone();
  flow_ = old_flow;
  base_ = old_base;
}

void Ctx::run_underlay(const FlowKey& f, const FlowKey& base, bool last, DpActionsBuilder* b,
                       std::vector<std::unique_ptr<TraceNode>>* list, unsigned depth, unsigned resubmits) {
  b_ = b;
  trace_list_ = list;
  depth_ = depth;
  resubmits_ = resubmits;
  side_effects_ = false;  // OVS: allow_side_effects = false for the underlay pass
  underlay_pass_ = true;
  flow_ = f;
  orig_ = f;
  base_ = base;
  if (!resource_check()) return;
  TraceNode* bridge = report(NodeType::bridge, "bridge(\"" + br_->name() + "\")");
  if (bridge) trace_list_ = &bridge->subs;
  if (process_special()) return;
  pipeline(last);
}

// The second pass of `clone(tnl_push(...),recirc(kRecircBase + M))`: the
// outer packet in the bridge whose internal vport is M, from LOCAL.
bool Ctx::tunnel_recirc() {
  if (!tnl_ || flow_.recirc_id < XlateTunnels::kRecircBase) return false;
  return tnl_->bridge_of_local_vport(flow_.recirc_id - XlateTunnels::kRecircBase) == br_;
}

const TlvTable& Ctx::tlv() {
  if (!tlv_) tlv_ = switch_tlv_maps().table(br_->name());
  static const TlvTable kEmpty;
  return tlv_ ? *tlv_ : kEmpty;
}

// A datapath key from a Geneve tunnel holds the options as on the wire;
// rules see tun_metadataN (OVS's tun_metadata_from_geneve_udpif()).
bool Ctx::geneve_from_udpif() {
  if (in_.in_port_is_ofport || flow_.tun_opt_len == 0 || (!flow_.tun_ipv4_dst && text::is_zero(flow_.tun_ipv6_dst)))
    return true;
  raw_ = flow_;
  geneve_raw_ = true;
  FlowKey md = flow_;
  if (!from_geneve_udpif(tlv(), raw_, md).ok()) return false;
  flow_ = md;
  orig_ = md;
  return true;
}

// tnl_process_ecn(): an ECN CE outer header marks the inner packet, which
// must be ECN capable.
bool Ctx::process_ecn() {
  if (!flow_.tun_ipv4_dst && text::is_zero(flow_.tun_ipv6_dst)) return true;
  if (!is_ip_any(flow_) || (flow_.tun_tos & text::kIpEcnMask) != text::kIpEcnMask) return true;
  if ((flow_.nw_tos & text::kIpEcnMask) == 0) {
    report(NodeType::warn, "dropping tunnel packet marked ECN CE but is not ECN capable");
    return false;
  }
  flow_.nw_tos |= text::kIpEcnMask;
  return true;
}

// What reaches LOCAL: OVS's terminate_native_tunnel() (tnl_pop for a
// tunnel's packets to one of the bridge's addresses; neighbour snooping),
// then what keel does instead of a host stack: ARP requests and neighbour
// solicitations for an own address go to the slow path, which replies;
// everything else is consumed.
void Ctx::local_output() {
  const std::vector<In6Addr> addrs = tnl_->bridge_addrs(*br_);
  uint16_t vport = 0;
  if (!addrs.empty()) {
    vport = tnl_port_lookup(addrs);
    if (!vport && (neighbor_reply_correct(addrs) || is_garp_wc())) {
      neigh_snoop();
    } else if (vport && side_effects_ && is_ip_any(flow_)) {
      // tnl_neigh_set(): the remote VTEP's MAC, from its packets.
      const In6Addr src = is_ipv4(flow_) ? mapped_ipv4(flow_.nw_src) : flow_.ipv6_src;
      tnl_->neighbor_learn(*br_, src, flow_.dl_src);
    }
  }
  if (vport) {
    b_->tnl_pop(vport);
    return;
  }
  if (!addrs.empty() && neigh_request_for_us(addrs)) {
    report(NodeType::detail, "neighbor request for an address of bridge " + br_->name() + ": the slow path replies");
    uint8_t ud[kSlowPathUserdataLen];
    encode_slow_path_userdata(SlowPathReason::action, ud);
    b_->userspace(0, ud);
    out_.slow_path_neigh = true;
    return;
  }
  report(NodeType::detail, "LOCAL has no host stack in keel: packet consumed");
}

// tnl_port_map_lookup(): the classifier of listening tunnel vports, one
// rule per (vport, bridge address): dl_dst = the bridge MAC, no VLAN, the
// address, the protocol, the UDP port. Its staged lookup un-wildcards L2,
// then L3, then L4 as far as a rule still matched.
uint16_t Ctx::tnl_port_lookup(const std::vector<In6Addr>& addrs) {
  const std::vector<XlateListener> ls = tnl_->listeners();
  if (ls.empty()) return 0;
  const std::optional<EthAddr> mac = tnl_->bridge_mac(*br_);
  set_ones(wc_.dl_dst);
  wc_.vlans[0].tci = 0xffff;
  if (!mac || flow_.dl_dst != *mac || flow_.vlans[0].tci != 0 || !is_ip_any(flow_)) return 0;
  bool fam = false, addr_match = false;
  for (const In6Addr& a : addrs) {
    if (is_v4_mapped(a) != is_ipv4(flow_)) continue;
    fam = true;
    if (is_ipv4(flow_) ? get_mapped_ipv4(a) == flow_.nw_dst : a == flow_.ipv6_dst) addr_match = true;
  }
  if (!fam) return 0;
  if (is_ipv4(flow_))
    set_ones(wc_.nw_dst);
  else
    set_ones(wc_.ipv6_dst);
  wc_.nw_proto = 0xff;
  wc_.nw_frag |= text::kFragMask;
  if (!addr_match || flow_.nw_frag) return 0;
  for (const XlateListener& l : ls)
    if (l.nw_proto == flow_.nw_proto && l.tp_dst == 0) return l.vport;  // GRE
  bool udp = false;
  for (const XlateListener& l : ls) udp |= l.nw_proto == flow_.nw_proto && l.tp_dst != 0;
  if (!udp) return 0;
  wc_.tp_dst = 0xffff;
  for (const XlateListener& l : ls)
    if (l.nw_proto == flow_.nw_proto && hton16(l.tp_dst) == flow_.tp_dst) return l.vport;
  return 0;
}

// is_neighbor_reply_correct() (no wildcards, as OVS).
bool Ctx::neighbor_reply_correct(const std::vector<In6Addr>& addrs) {
  const bool arp = flow_.dl_type == hton16(text::kEthTypeArp);
  if (!arp && flow_.nw_proto != text::kProtoIcmpv6) return false;
  for (const In6Addr& a : addrs) {
    if (is_v4_mapped(a)) {
      if (arp && get_mapped_ipv4(a) == flow_.nw_dst) return true;
    } else {
      const In6Addr& d = flow_.ipv6_dst;  // is_nd_dst_correct()
      const bool solicited = d.b[0] == 0xff && d.b[1] == 0x02 && d.b[11] == 0x01 && d.b[12] == 0xff &&
                             d.b[13] == a.b[13] && d.b[14] == a.b[14] && d.b[15] == a.b[15];
      if (solicited || d == a) return true;
    }
  }
  return false;
}

// is_garp(): ARP whose sender is its target.
bool Ctx::is_garp_wc() {
  if (flow_.dl_type != hton16(text::kEthTypeArp)) return false;
  set_ones(wc_.nw_src);
  set_ones(wc_.nw_dst);
  return flow_.nw_src == flow_.nw_dst;
}

// tnl_neigh_snoop(): ARP replies and gratuitous ARPs, IPv6 neighbour
// advertisements with a target link-layer address.
void Ctx::neigh_snoop() {
  if (flow_.dl_type == hton16(text::kEthTypeArp)) {
    bool ok = is_garp_wc();
    if (!ok) {
      wc_.nw_proto = 0xff;
      ok = flow_.nw_proto == 2;
    }
    if (ok) {
      set_ones(wc_.arp_sha);
      if (!is_zero_mac(flow_.arp_sha)) {
        set_ones(wc_.nw_src);
        if (side_effects_) tnl_->neighbor_learn(*br_, mapped_ipv4(flow_.nw_src), flow_.arp_sha);
        return;
      }
    }
  }
  if (!prereqs_ok(OfPrereq::nd) || (ntoh16(flow_.tp_src) & 0xff) != text::kNdAdvert) return;
  set_ones(wc_.arp_tha);
  if (is_zero_mac(flow_.arp_tha)) return;
  set_ones(wc_.ipv6_src);
  set_ones(wc_.ipv6_dst);
  set_ones(wc_.nd_target);
  if (side_effects_) tnl_->neighbor_learn(*br_, flow_.nd_target, flow_.arp_tha);
}

// An ARP request or a neighbour solicitation for one of the bridge's
// addresses (what a host stack behind LOCAL would answer).
bool Ctx::neigh_request_for_us(const std::vector<In6Addr>& addrs) {
  if (flow_.dl_type == hton16(text::kEthTypeArp)) {
    wc_.nw_proto = 0xff;
    set_ones(wc_.nw_dst);
    if (flow_.nw_proto != 1) return false;
    for (const In6Addr& a : addrs)
      if (is_v4_mapped(a) && get_mapped_ipv4(a) == flow_.nw_dst) return true;
    return false;
  }
  if (!prereqs_ok(OfPrereq::nd) || (ntoh16(flow_.tp_src) & 0xff) != text::kNdSolicit) return false;
  set_ones(wc_.nd_target);
  for (const In6Addr& a : addrs)
    if (!is_v4_mapped(a) && a == flow_.nd_target) return true;
  return false;
}

// --- commit_odp_actions() ------------------------------------------------------
//
// For each datapath header: the fields (at OVS's granularity) whose value
// differs between flow_ and base_ are written, with the megaflow mask of
// those fields as the set's mask (every writer un-wildcarded what it wrote;
// unchanged fields get mask zero). All-ones masks make a plain set.

template <typename T>
bool any(const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  for (size_t i = 0; i < sizeof v; ++i)
    if (p[i]) return true;
  return false;
}
template <typename T>
void and_key(T& key, const T& mask) {
  auto* k = reinterpret_cast<uint8_t*>(&key);
  const auto* m = reinterpret_cast<const uint8_t*>(&mask);
  for (size_t i = 0; i < sizeof key; ++i) k[i] &= m[i];
}

void Ctx::commit() {
  commit_eth();
  if (flow_.nw_proto) {  // OVS: "does the flow really have an L3 header?"
    if (base_.dl_type == hton16(text::kEthTypeIp)) commit_ipv4();
    if (base_.dl_type == hton16(text::kEthTypeIpv6)) commit_ipv6();
    if (base_.dl_type == hton16(text::kEthTypeArp)) commit_arp();  // not RARP, as OVS
    commit_ports();
    commit_icmp();
  }
  commit_vlans();
}

void Ctx::commit_eth() {
  SetEth key{flow_.dl_dst, flow_.dl_src}, mask{};
  bool differ = false;
  if (flow_.dl_dst != base_.dl_dst) mask.dst = wc_.dl_dst, differ = true;
  if (flow_.dl_src != base_.dl_src) mask.src = wc_.dl_src, differ = true;
  if (!differ) return;
  and_key(key, mask);
  b_->set_eth(key, mask);
  base_.dl_dst = flow_.dl_dst;
  base_.dl_src = flow_.dl_src;
}

void Ctx::commit_ipv4() {
  SetIpv4 key{flow_.nw_src, flow_.nw_dst, flow_.nw_tos, flow_.nw_ttl, 0, 0}, mask{};
  bool differ = false;
  if (flow_.nw_src != base_.nw_src) mask.src = wc_.nw_src, differ = true;
  if (flow_.nw_dst != base_.nw_dst) mask.dst = wc_.nw_dst, differ = true;
  if (flow_.nw_tos != base_.nw_tos) mask.tos = wc_.nw_tos, differ = true;
  if (flow_.nw_ttl != base_.nw_ttl) mask.ttl = wc_.nw_ttl, differ = true;
  if (!differ) return;
  and_key(key, mask);
  b_->set_ipv4(key, mask);
  base_.nw_src = flow_.nw_src;
  base_.nw_dst = flow_.nw_dst;
  base_.nw_tos = flow_.nw_tos;
  base_.nw_ttl = flow_.nw_ttl;
}

void Ctx::commit_ipv6() {
  SetIpv6 key{flow_.ipv6_src, flow_.ipv6_dst, flow_.ipv6_label, flow_.nw_tos, flow_.nw_ttl, 0, 0}, mask{};
  bool differ = false;
  if (flow_.ipv6_src != base_.ipv6_src) mask.src = wc_.ipv6_src, differ = true;
  if (flow_.ipv6_dst != base_.ipv6_dst) mask.dst = wc_.ipv6_dst, differ = true;
  if (flow_.ipv6_label != base_.ipv6_label) mask.label = wc_.ipv6_label & hton32(0x000fffff), differ = true;
  if (flow_.nw_tos != base_.nw_tos) mask.tclass = wc_.nw_tos, differ = true;
  if (flow_.nw_ttl != base_.nw_ttl) mask.hlimit = wc_.nw_ttl, differ = true;
  if (!differ) return;
  and_key(key, mask);
  b_->set_ipv6(key, mask);
  base_.ipv6_src = flow_.ipv6_src;
  base_.ipv6_dst = flow_.ipv6_dst;
  base_.ipv6_label = flow_.ipv6_label;
  base_.nw_tos = flow_.nw_tos;
  base_.nw_ttl = flow_.nw_ttl;
}

// commit_set_arp_action(): spa/tpa live in nw_src/nw_dst, the opcode in
// nw_proto (its low 8 bits, as OVS's flow).
void Ctx::commit_arp() {
  SetArp key{}, mask{};
  key.sip = flow_.nw_src;
  key.tip = flow_.nw_dst;
  key.op = hton16(flow_.nw_proto);
  key.sha = flow_.arp_sha;
  key.tha = flow_.arp_tha;
  bool differ = false;
  if (flow_.nw_src != base_.nw_src) mask.sip = wc_.nw_src, differ = true;
  if (flow_.nw_dst != base_.nw_dst) mask.tip = wc_.nw_dst, differ = true;
  // The flow keeps the opcode's low byte; the datapath writes all 16 bits
  // (OVS prints op=2, not op=2/0xff).
  if (flow_.nw_proto != base_.nw_proto) mask.op = wc_.nw_proto ? 0xffff : 0, differ = true;
  if (flow_.arp_sha != base_.arp_sha) mask.sha = wc_.arp_sha, differ = true;
  if (flow_.arp_tha != base_.arp_tha) mask.tha = wc_.arp_tha, differ = true;
  if (!differ) return;
  and_key(key, mask);
  b_->set_arp(key, mask);
  base_.nw_src = flow_.nw_src;
  base_.nw_dst = flow_.nw_dst;
  base_.nw_proto = flow_.nw_proto;
  base_.arp_sha = flow_.arp_sha;
  base_.arp_tha = flow_.arp_tha;
}

// commit_set_icmp_action(): ICMP type and code live in the low bytes of
// tp_src/tp_dst; OVS writes both (an unmasked set) and un-wildcards both.
void Ctx::commit_icmp() {
  const bool v4 = is_ipv4(flow_) && flow_.nw_proto == text::kProtoIcmp;
  const bool v6 = is_ipv6(flow_) && flow_.nw_proto == text::kProtoIcmpv6;
  if (!v4 && !v6) return;
  const uint8_t type = static_cast<uint8_t>(ntoh16(flow_.tp_src)), code = static_cast<uint8_t>(ntoh16(flow_.tp_dst));
  if (type == static_cast<uint8_t>(ntoh16(base_.tp_src)) && code == static_cast<uint8_t>(ntoh16(base_.tp_dst)))
    return;
  b_->set_icmp(SetIcmp{type, code}, SetIcmp{0xff, 0xff}, v6);
  wc_.tp_src |= hton16(0x00ff);
  wc_.tp_dst |= hton16(0x00ff);
  base_.tp_src = flow_.tp_src;
  base_.tp_dst = flow_.tp_dst;
}

void Ctx::commit_ports() {
  if (!is_ip_any(base_)) return;
  const bool tcp = flow_.nw_proto == text::kProtoTcp, udp = flow_.nw_proto == text::kProtoUdp,
             sctp = flow_.nw_proto == text::kProtoSctp;
  if (!tcp && !udp && !sctp) return;
  SetL4 key{flow_.tp_src, flow_.tp_dst}, mask{};
  bool differ = false;
  if (flow_.tp_src != base_.tp_src) mask.src = wc_.tp_src, differ = true;
  if (flow_.tp_dst != base_.tp_dst) mask.dst = wc_.tp_dst, differ = true;
  if (!differ) return;
  and_key(key, mask);
  if (tcp)
    b_->set_tcp(key, mask);
  else if (udp)
    b_->set_udp(key, mask);
  else
    b_->set_sctp(key, mask);
  base_.tp_src = flow_.tp_src;
  base_.tp_dst = flow_.tp_dst;
}

// commit_vlan_action(): pop the tags of base_ that differ from flow_'s
// (comparing from the innermost), then push flow_'s.
void Ctx::commit_vlans() {
  int base_n = count_vlans(base_), flow_n = count_vlans(flow_);
  for (--base_n, --flow_n; base_n >= 0 && flow_n >= 0; --base_n, --flow_n)
    if (base_.vlans[base_n] != flow_.vlans[flow_n]) break;
  for (; base_n >= 0; --base_n) {
    b_->pop_vlan();
    set_ones(wc_.vlans[base_n]);
  }
  for (; flow_n >= 0; --flow_n) b_->push_vlan(ntoh16(flow_.vlans[flow_n].tpid), ntoh16(flow_.vlans[flow_n].tci));
  base_.vlans[0] = flow_.vlans[0];
  base_.vlans[1] = flow_.vlans[1];
}

// --- trace helpers -----------------------------------------------------------

// flow_format(): the flow as a match on every field its packet has.
std::string format_flow(const FlowKey& f) {
  Match m;
  m.key = f;
  FlowKey& k = m.mask;
  if (f.in_port != kOfppNone) set_ones(k.in_port);
  if (f.recirc_id) set_ones(k.recirc_id);
  if (f.dp_hash) set_ones(k.dp_hash);
  if (f.skb_priority) set_ones(k.skb_priority);
  if (f.pkt_mark) set_ones(k.pkt_mark);
  if (f.metadata) set_ones(k.metadata);
  for (int i = 0; i < 8; ++i)
    if (f.regs[i]) set_ones(k.regs[i]);
  if (f.tun_id) set_ones(k.tun_id);
  if (f.tun_ipv4_src) set_ones(k.tun_ipv4_src);
  if (f.tun_ipv4_dst) set_ones(k.tun_ipv4_dst);
  set_ones(k.dl_src);
  set_ones(k.dl_dst);
  set_ones(k.dl_type);
  k.vlans[0].tci = 0xffff;
  if (tag_present(f.vlans[0])) k.vlans[1].tci = 0xffff;  // flow_format(): "vlan_tci1=0x0000" when untagged inside
  if (is_ip_any(f)) {
    if (is_ipv4(f)) {
      set_ones(k.nw_src);
      set_ones(k.nw_dst);
    } else {
      set_ones(k.ipv6_src);
      set_ones(k.ipv6_dst);
      k.ipv6_label = hton32(0x000fffff);
    }
    k.nw_proto = 0xff;
    k.nw_tos = 0xff;
    k.nw_ttl = 0xff;
    k.nw_frag = text::kFragMask;
    if (!(f.nw_frag & kFragLater)) {
      const uint8_t p = f.nw_proto;
      if (p == text::kProtoTcp || p == text::kProtoUdp || p == text::kProtoSctp) {
        set_ones(k.tp_src);
        set_ones(k.tp_dst);
      } else if ((is_ipv4(f) && p == text::kProtoIcmp) || (is_ipv6(f) && p == text::kProtoIcmpv6)) {
        k.tp_src = k.tp_dst = hton16(0x00ff);
      }
      if (p == text::kProtoTcp) k.tcp_flags = hton16(0x0fff);
    }
  } else if (is_arp(f)) {
    set_ones(k.nw_src);
    set_ones(k.nw_dst);
    k.nw_proto = 0xff;
    set_ones(k.arp_sha);
    set_ones(k.arp_tha);
  }
  m.apply_mask();
  return format_of_match(m);
}

// OVS prints "eth" (packet_type=Ethernet, matched by every megaflow) after
// the leading metadata fields; keel's match syntax has no packet_type. ICMP
// type/code print as the 16-bit fields under a megaflow's 0x00ff masks.
std::string format_megaflow(const Match& m) {
  OfFormatOptions o;
  o.icmp_16bit = true;
  std::string s = format_of_match(m, o);
  size_t pos = 0;
  for (const char* lead : {"pkt_mark=", "recirc_id=", "dp_hash=", "skb_priority="}) {
    const size_t n = std::strlen(lead);
    if (s.compare(pos, n, lead) == 0) {
      size_t comma = s.find(',', pos);
      pos = comma == std::string::npos ? s.size() : comma + 1;
    }
  }
  if (pos >= s.size()) {
    if (!s.empty()) s += ',';
    s += "eth";
  } else {
    s.insert(pos, "eth,");
  }
  return s;
}

}  // namespace

const char* to_string(XlateError e) {
  switch (e) {
    case XlateError::ok:
      return "OK";
    case XlateError::recursion_too_deep:
      return "Recursion too deep";
    case XlateError::too_many_resubmits:
      return "Too many resubmits";
    case XlateError::no_recirc_context:
      return "No recirculation context";
    case XlateError::actions_too_long:
      return "Datapath actions too long";
    case XlateError::invalid_tunnel_metadata:
      return "Invalid tunnel metadata";
  }
  return "?";
}

Result<XlateOut> xlate(const XlateIn& in) {
  std::shared_ptr<const PortMap> ports = with_local(in.bridge.ports(), in.bridge, in.tunnels);
  XlateIn mapped = in;
  uint32_t in_ofport = in.flow.in_port;
  if (in.in_ofport) {
    in_ofport = in.in_ofport;
    mapped.flow.in_port = in_ofport;
  } else if (!in.in_port_is_ofport) {
    const PortConfig* p = ports ? ports->by_dp_port(static_cast<uint16_t>(in.flow.in_port)) : nullptr;
    if (!p || in.flow.in_port > UINT16_MAX)
      return error(Errc::not_found, "datapath port " + std::to_string(in.flow.in_port) + " is not a port of bridge " +
                                        in.bridge.name());
    in_ofport = p->ofport;
    mapped.flow.in_port = in_ofport;
  }
  if (!ports) ports = std::make_shared<const PortMap>();
  XlateOut out;
  out.in_ofport = in_ofport;
  Ctx ctx(mapped, std::move(ports), out);
  ctx.run();
  return out;
}

FlowKey tunnel_receive_wc(const FlowKey& flow) {
  FlowKey wc{};
  set_ones(wc.in_port);
  set_ones(wc.recirc_id);
  tnl_wc_init(flow, wc);
  return wc;
}

Match xlate_megaflow(const FlowKey& key, const FlowKey& wc) {
  Match m;
  m.key = key;
  m.mask = wc;
  m.apply_mask();
  return m;
}

std::string xlate_trace(Bridge& bridge, const FlowKey& flow, uint64_t now_ns, XlateTunnels* tunnels) {
  std::string out = "Flow: " + format_flow(flow) + "\n";
  std::string tree;
  XlateIn in{bridge, flow, bridge.version(), now_ns, false, true, &tree, tunnels};
  Result<XlateOut> r = xlate(in);
  if (!r.ok()) return out + "\n" + r.status().message() + "\n";
  const XlateOut& x = r.value();
  out += tree;
  out += "\nFinal flow: ";
  out += x.final_flow == flow ? std::string("unchanged") : format_flow(x.final_flow);
  out += "\nMegaflow: ";
  out += format_megaflow(xlate_megaflow(flow, x.wc));
  out += "\nDatapath actions: ";
  out += format_dp_actions(x.actions);
  out += '\n';
  if (x.slow_path_lacp)
    out += "\nThis flow is handled by the userspace slow path because it:\n  - Consists of LACP packets.\n";
  if (x.error != XlateError::ok)
    out += std::string("\nTranslation failed (") + to_string(x.error) + "), packet is dropped.\n";
  return out;
}

void encode_controller_userdata(const ControllerUserdata& c, uint8_t (&out)[kControllerUserdataLen]) {
  std::memset(out, 0, sizeof out);
  out[0] = kUserdataController;
  out[1] = static_cast<uint8_t>(c.reason);
  out[2] = c.table_id;
  out[4] = static_cast<uint8_t>(c.controller_id >> 8);
  out[5] = static_cast<uint8_t>(c.controller_id);
  out[6] = static_cast<uint8_t>(c.max_len >> 8);
  out[7] = static_cast<uint8_t>(c.max_len);
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<uint8_t>(c.in_ofport >> (24 - 8 * i));
  for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<uint8_t>(c.cookie >> (56 - 8 * i));
}

void encode_slow_path_userdata(SlowPathReason r, uint8_t (&out)[kSlowPathUserdataLen]) {
  std::memset(out, 0, sizeof out);
  out[0] = kUserdataSlowPath;
  out[1] = static_cast<uint8_t>(r);
}

std::optional<SlowPathReason> decode_slow_path_userdata(std::span<const uint8_t> u) {
  if (u.size() != kSlowPathUserdataLen || u[0] != kUserdataSlowPath) return std::nullopt;
  if (u[1] == static_cast<uint8_t>(SlowPathReason::lacp)) return SlowPathReason::lacp;
  if (u[1] == static_cast<uint8_t>(SlowPathReason::action)) return SlowPathReason::action;
  return std::nullopt;
}

std::optional<ControllerUserdata> decode_controller_userdata(std::span<const uint8_t> u) {
  if (u.size() != kControllerUserdataLen || u[0] != kUserdataController) return std::nullopt;
  ControllerUserdata c;
  c.reason = static_cast<OfPacketInReason>(u[1]);
  c.table_id = u[2];
  c.controller_id = static_cast<uint16_t>(u[4] << 8 | u[5]);
  c.max_len = static_cast<uint16_t>(u[6] << 8 | u[7]);
  c.in_ofport = 0;
  for (int i = 0; i < 4; ++i) c.in_ofport = c.in_ofport << 8 | u[8 + i];
  c.cookie = 0;
  for (int i = 0; i < 8; ++i) c.cookie = c.cookie << 8 | u[16 + i];
  return c;
}

}  // namespace keel::ofproto

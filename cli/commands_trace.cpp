// `trace BR FLOW` and `trace BR in_port=P --packet HEX`: Open vSwitch's
// ofproto/trace. FLOW is ovs-ofctl match syntax (in_port=NAME or number;
// fields not given are zero); --packet parses a hex Ethernet frame with the
// datapath's own parser (packet/parser.h) and takes in_port= from FLOW.
// The report (ofproto/xlate.h, xlate_trace()) is the same translation the
// upcall handler runs, without side effects: no MAC learning, no counters.
//
// With the offload enabled (offload enable), the report ends with keel's
// line `Offload: <decision>: <reason>`: what the offload engine would do
// with the megaflow this translation installs (offload::Offload::explain()
// on its match, in_port as the datapath port, and datapath actions).
// Disabled, nothing is added: the report stays Open vSwitch's exactly
// (tests/conformance/layout compares it line by line).
//
// Threads: runs inside Control::run under the Ofproto writer mutex (declared
// locks_ofproto), so
// nothing it reads is reclaimed while it reads.
#include <cctype>
#include <mutex>

#include "cli/command_tree_impl.h"
#include "offload/offload.h"
#include "flow/flow_text.h"
#include "flow/miniflow.h"
#include "flow/of_match_syntax.h"
#include "keel/hal/cpu.h"
#include "ofproto/ofproto.h"
#include "ofproto/slow_path.h"
#include "ofproto/xlate.h"
#include "packet/parser.h"

namespace keel::cli {

namespace {

struct TraceArgs {
  std::string bridge, packet;
  std::vector<std::string> words;
};

Result<std::vector<uint8_t>> parse_hex(std::string_view s) {
  std::vector<uint8_t> out;
  int hi = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == ' ' || c == ':' || c == '-' || c == '\t') continue;
    int v;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v = c - 'A' + 10;
    else
      return invalid(std::string("bad hex digit '") + c + "' at column " + std::to_string(i + 1) + " of --packet");
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<uint8_t>(hi << 4 | v));
      hi = -1;
    }
  }
  if (hi >= 0) return invalid("--packet has an odd number of hex digits");
  if (out.size() < 14) return invalid("--packet is shorter than an Ethernet header (14 bytes)");
  return out;
}

// The flow to trace, in_port as an OpenFlow port number.
// A --packet is parsed under the datapath's VLAN limit, as the PMDs parse it.
Result<flow::FlowKey> trace_flow(const ofproto::Bridge& br, const std::string& text, const std::string& packet,
                                 unsigned vlan_limit) {
  auto ports = br.ports();
  flow::OfParseOptions po;
  po.port_number = [&ports](std::string_view name) -> std::optional<uint32_t> {
    if (const ofproto::PortConfig* p = ports->by_name(name)) return p->ofport;
    return std::nullopt;
  };
  auto m = flow::parse_of_match(text, po);
  if (!m.ok()) return std::move(m).take_status();
  flow::FlowKey k = m->key;
  if (!packet.empty()) {
    // Only in_port may come with a packet: the rest is the frame's.
    flow::FlowKey only_port{};
    only_port.in_port = m->mask.in_port;
    if (!(m->mask == only_port)) return invalid("with --packet, FLOW may only give in_port=");
    auto bytes = parse_hex(packet);
    if (!bytes.ok()) return std::move(bytes).take_status();
    packet::PacketMetadata md;
    md.in_port = k.in_port;
    flow::Miniflow mf;
    packet::LayerOffsets ofs;
    // A malformed frame (a tag or header cut short) is traced by its partial
    // key, as the datapath classifies it and as Open vSwitch's ofproto/trace.
    (void)packet::parse_frame(bytes->data(), static_cast<uint32_t>(bytes->size()), md, mf, ofs, vlan_limit);
    flow::expand(mf, k);
    k.in_port = md.in_port;
  } else if (k.vlans[0].tci && !k.vlans[0].tpid) {
    // A tag given as dl_vlan/vlan_tci: the frame would carry an 802.1Q TPID.
    k.vlans[0].tpid = flow::text::hton16(flow::text::kEthTypeVlan);
  }
  return k;
}

// The Offload: line (see the top): the megaflow and actions the upcall
// handler would install for `k` (in_port an OpenFlow port of `br`).
std::string offload_line(const offload::Offload& off, ofproto::Bridge& br, const flow::FlowKey& k,
                         ofproto::XlateTunnels* tunnels) {
  auto ports = br.ports();
  const ofproto::PortConfig* in = ports->by_ofport(k.in_port);
  if (!in) return {};
  ofproto::XlateIn xin{br, k, br.version(), hal::now_ns(), false, true, nullptr, tunnels};
  auto x = ofproto::xlate(xin);
  if (!x.ok()) return {};
  flow::FlowKey dp_key = k;
  dp_key.in_port = in->dp_port;
  const flow::Match m = ofproto::xlate_megaflow(dp_key, x->wc);
  const offload::DecideResult d = off.explain(m, x->actions.bytes());
  std::string reason = d.text();
  return "\nOffload: " + std::string(offload::decision_name(d.decision)) + (reason.empty() ? "" : ": " + reason) +
         "\n";
}

}  // namespace

void add_trace_commands(CommandTree::Impl& t) {
  // Declarations (command_tree_impl.h: CommandDecl).
  t.declare("trace", control::Access::show, false, kLocksOfproto);

  auto a = std::make_shared<TraceArgs>();
  CLI::App* c = t.app.add_subcommand("trace", "explain what a bridge does with a flow or a packet (ofproto/trace)");
  c->preparse_callback([a](size_t) { *a = TraceArgs{}; });
  c->add_option("BR", a->bridge, "bridge name")->required();
  c->add_option("FLOW", a->words, "flow in ovs-ofctl match syntax, e.g. tcp,in_port=1,nw_dst=10.1.2.3,tp_dst=80");
  c->add_option("--packet", a->packet, "an Ethernet frame in hex (FLOW gives only in_port=)");
  c->callback([&t, a] {
    ofproto::Ofproto& of = t.sys.ofproto();
    ofproto::Bridge* br = of.find_bridge(a->bridge);
    if (!br) {
      t.status = error(Errc::not_found, "no bridge " + a->bridge);
      return;
    }
    std::string text;
    for (const std::string& w : a->words) text += (text.empty() ? "" : ",") + w;
    auto k = trace_flow(*br, text, a->packet, t.sys.datapath().vlan_limit());
    if (!k.ok()) {
      t.status = std::move(k).take_status();
      return;
    }
    // Tunnels as the upcall handler sees them (the tunnel state snapshot,
    // routes, neighbours), without side effects.
    ofproto::OfprotoTunnels tnl(of);
    std::string report = ofproto::xlate_trace(*br, k.value(), hal::now_ns(), tnl.active() ? &tnl : nullptr);
    const offload::Offload& off = t.sys.offload();
    if (off.config().enabled) report += offload_line(off, *br, k.value(), tnl.active() ? &tnl : nullptr);
    t.print(report);
  });
}

}  // namespace keel::cli

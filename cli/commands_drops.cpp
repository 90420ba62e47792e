// `show drops` and `coverage-show`: every packet keel dropped, and why.
//
// show drops [--format json] — per port, what became of every packet it
// received (datapath/drop_stats.h defines the terms): forwarded (a full-
// offload hardware rule's forwards included), consumed by the slow path,
// dropped by reason (a hardware rule's drops as `hw_drop`), in flight, so
// that received = forwarded + slow path + dropped + in flight whenever the
// datapath is idle; then what the port did with what it was given to send
// (sent, and dropped: queue full, over the MTU, link down, refused to a
// hardware rule) and what it dropped before the datapath saw it (Rx-drop:
// the NIC's ring full, a buffer it could not get). Then per PMD every
// buffer it dropped (copies included) by reason, and the control-plane
// frames its tx ring refused; then the upcalls at the flow limit (not a
// drop: the packet is forwarded, the flow not installed; Open vSwitch's
// upcall_flow_limit_hit). Text lists only the reasons that counted; the
// JSON has every reason's key (the `drop_reason_name`s) so scripts see
// stable keys.
//
// coverage-show — Open vSwitch 3.1's `ovs-appctl coverage/show` layout
// (lib/coverage.c): the event counters keel keeps for drops, under Open
// vSwitch's names where keel counts the same event per packet
// (datapath_drop_*, drop_action_*, upcall_flow_limit_hit,
// packet_in_overflow) and keel_drop_* for its own; rates per second over
// the last 5 s, minute and hour (control/coverage.h, sampled by the
// console's periodic work), totals, then "N events never hit".
//
// Thread-safety: control thread, non-concurrent (pmds() is stable while a
// command that is not `concurrent` runs); the counters are relaxed atomics
// (a term may be a burst old).
#include <algorithm>
#include <string>
#include <vector>

#include "cli/command_tree_impl.h"
#include "cli/view.h"
#include "datapath/datapath.h"
#include "datapath/drop_stats.h"
#include "ofproto/udpif.h"

namespace keel::cli {

namespace {

using datapath::DropReason;
using datapath::kDropReasons;

struct PortDrops {
  std::string name;
  uint16_t id = 0;
  hal::PortCounters c;
  datapath::DropTotals::Port fate;  // fates with the hardware's added (hw_drop)
};

struct DropReport {
  std::vector<PortDrops> ports;
  datapath::DropTotals totals;  // per PMD sums; instances with the hardware's drops added
  struct Pmd {
    unsigned index;
    int core;
    std::array<uint64_t, kDropReasons> instances{};
    uint64_t ctl_tx_full = 0;
  };
  std::vector<Pmd> pmds;
  uint64_t flow_limit_hits = 0;
};

DropReport drop_report(control::System& sys) {
  DropReport r;
  datapath::Datapath& dp = sys.datapath();
  r.totals = dp.drop_totals();
  for (hal::Port* p : dp.ports()) {
    PortDrops d;
    d.name = p->name();
    d.id = p->id();
    d.c = p->counters();
    d.fate = r.totals.ports[d.id < datapath::kDropStatsPorts ? d.id : 0];
    // What a full-offload rule did in the NIC, which no PMD saw.
    d.fate.forwarded += d.c.rx_hw_forwarded;
    d.fate.dropped[static_cast<unsigned>(DropReason::kHwDrop)] += d.c.rx_hw_dropped;
    r.totals.instances[static_cast<unsigned>(DropReason::kHwDrop)] += d.c.rx_hw_dropped;
    r.ports.push_back(std::move(d));
  }
  for (const auto& pmd : dp.pmds()) {
    DropReport::Pmd v{pmd->index(), pmd->display_core(), {}, pmd->counters().ctl_tx_full};
    datapath::DropTotals one;
    pmd->drops().read(one);
    v.instances = one.instances;
    r.pmds.push_back(v);
  }
  if (ofproto::Udpif* u = sys.udpif()) r.flow_limit_hits = u->stats().limit_hits;
  return r;
}

// "12 (runt 2, upcall_lost 10)": a total and the reasons that counted.
std::string reasons_text(const std::array<uint64_t, kDropReasons>& by) {
  uint64_t total = 0;
  std::string list;
  for (unsigned i = 1; i < kDropReasons; ++i) {
    if (!by[i]) continue;
    total += by[i];
    list += (list.empty() ? "" : ", ") + std::string(datapath::drop_reason_name(static_cast<DropReason>(i))) + " " +
            std::to_string(by[i]);
  }
  return std::to_string(total) + (list.empty() ? "" : " (" + list + ")");
}

void reasons_json(View& v, const char* key, const std::array<uint64_t, kDropReasons>& by) {
  View& o = v.object(key, "");
  for (unsigned i = 1; i < kDropReasons; ++i)
    o.json(std::string(datapath::drop_reason_name(static_cast<DropReason>(i))), by[i]);
}

uint64_t sum(const std::array<uint64_t, kDropReasons>& by) {
  uint64_t s = 0;
  for (uint64_t x : by) s += x;
  return s;
}

// The receive side of one port (or of all: the totals).
void fate_view(View& v, uint64_t received, uint64_t hw_forwarded, const datapath::DropTotals::Port& f) {
  v.field("received", "received", received);
  v.field("forwarded", "forwarded", f.forwarded,
          std::to_string(f.forwarded) + (hw_forwarded ? " (by a hardware rule " + std::to_string(hw_forwarded) + ")" : ""));
  v.json("hw_forwarded", hw_forwarded);
  v.field("slow_path", "to the slow path", f.slow_path);
  v.field("in_flight", "in flight", f.in_flight);
  v.field("dropped", "dropped", sum(f.dropped), reasons_text(f.dropped));
  reasons_json(v, "reasons", f.dropped);
}

// What the port did with what it was given to send.
void tx_view(View& v, const hal::PortCounters& c) {
  const uint64_t other = c.tx_dropped - std::min(c.tx_dropped, c.tx_mtu_exceeded_drops + c.tx_link_down_drops);
  View& tx = v.object("tx", "");
  tx.json("packets", c.tx_packets)
      .json("dropped", c.tx_dropped + c.tx_hw_dropped)
      .json("queue_full", other)
      .json("mtu_exceeded", c.tx_mtu_exceeded_drops)
      .json("link_down", c.tx_link_down_drops)
      .json("hw_dropped", c.tx_hw_dropped);
  std::string why;
  auto add = [&why](const char* name, uint64_t n) {
    if (n) why += (why.empty() ? "" : ", ") + std::string(name) + " " + std::to_string(n);
  };
  add("queue full", other);
  add("over the MTU", c.tx_mtu_exceeded_drops);
  add("link down", c.tx_link_down_drops);
  add("refused to a hardware rule", c.tx_hw_dropped);
  v.text_line("tx", "sent " + std::to_string(c.tx_packets) + ", dropped " +
                        std::to_string(c.tx_dropped + c.tx_hw_dropped) + (why.empty() ? "" : " (" + why + ")"));
}

View drops_view(const DropReport& r) {
  View v;
  datapath::DropTotals::Port all;
  uint64_t received = 0, hw_fwd = 0;
  hal::PortCounters tx_all;
  View::List ports = v.list("ports");
  for (const PortDrops& p : r.ports) {
    View& pv = ports.item("port " + p.name + " (" + std::to_string(p.id) + ")");
    pv.json("name", p.name).json("id", static_cast<uint64_t>(p.id));
    fate_view(pv, p.c.rx_packets, p.c.rx_hw_forwarded, p.fate);
    tx_view(pv, p.c);
    pv.field("rx_port_dropped", "dropped by the port before the datapath (Rx-drop)", p.c.rx_dropped);
    received += p.c.rx_packets;
    hw_fwd += p.c.rx_hw_forwarded;
    all.forwarded += p.fate.forwarded;
    all.slow_path += p.fate.slow_path;
    all.in_flight += p.fate.in_flight;
    for (unsigned i = 0; i < kDropReasons; ++i) all.dropped[i] += p.fate.dropped[i];
    tx_all.tx_packets += p.c.tx_packets;
    tx_all.tx_dropped += p.c.tx_dropped;
    tx_all.tx_mtu_exceeded_drops += p.c.tx_mtu_exceeded_drops;
    tx_all.tx_link_down_drops += p.c.tx_link_down_drops;
    tx_all.tx_hw_dropped += p.c.tx_hw_dropped;
    tx_all.rx_dropped += p.c.rx_dropped;
  }
  View& tv = v.object("totals", "all ports");
  fate_view(tv, received, hw_fwd, all);
  tx_view(tv, tx_all);
  tv.field("rx_port_dropped", "dropped by the ports before the datapath (Rx-drop)", tx_all.rx_dropped);

  View::List pmds = v.list("pmds");
  for (const DropReport::Pmd& p : r.pmds) {
    // Named as pmd-stats-show names it (an unpinned PMD: the CPU it was last seen on).
    View& pv = pmds.item("pmd thread numa_id 0 core_id " + std::to_string(p.core));
    pv.json("pmd", static_cast<uint64_t>(p.index)).json("core", static_cast<int64_t>(p.core));
    pv.field("dropped", "packets dropped (copies too)", sum(p.instances), reasons_text(p.instances));
    reasons_json(pv, "reasons", p.instances);
    pv.field("ctl_tx_full", "control-plane frames refused (tx ring full)", p.ctl_tx_full);
  }
  View& sp = v.object("slow_path", "slow path");
  sp.field("flow_limit_hits", "upcalls at the flow limit (forwarded, not installed)", r.flow_limit_hits);
  return v;
}

}  // namespace

std::vector<control::Coverage::Counter> coverage_counters(control::System& sys) {
  const DropReport r = drop_report(sys);
  std::vector<control::Coverage::Counter> out;
  auto add = [&out](std::string_view name, uint64_t n) {
    for (auto& c : out)
      if (c.name == name) {
        c.total += n;
        return;
      }
    out.push_back({std::string(name), n});
  };
  // Open vSwitch's names first, in the order its datapath defines them;
  // then keel's reasons in DropReason order.
  for (const char* ovs : {"datapath_drop_rx_invalid_packet", "datapath_drop_upcall_error",
                          "datapath_drop_userspace_action_error", "datapath_drop_recirc_error",
                          "datapath_drop_invalid_port", "datapath_drop_invalid_bond", "datapath_drop_invalid_tnl_port",
                          "datapath_drop_tunnel_pop_error", "datapath_drop_tunnel_push_error", "drop_action_of_pipeline",
                          "drop_action_bridge_not_found", "drop_action_recursion_too_deep",
                          "drop_action_too_many_resubmit", "drop_action_no_recirculation_context",
                          "drop_action_invalid_tunnel_metadata", "packet_in_overflow"})
    add(ovs, 0);
  for (unsigned i = 1; i < kDropReasons; ++i)
    add(datapath::drop_reason_coverage(static_cast<DropReason>(i)), r.totals.instances[i]);
  add("upcall_flow_limit_hit", r.flow_limit_hits);
  uint64_t ctl = 0, queue_full = 0, mtu = 0, link = 0, hw = 0, rx = 0;
  for (const DropReport::Pmd& p : r.pmds) ctl += p.ctl_tx_full;
  for (const PortDrops& p : r.ports) {
    const hal::PortCounters& c = p.c;
    queue_full += c.tx_dropped - std::min(c.tx_dropped, c.tx_mtu_exceeded_drops + c.tx_link_down_drops);
    mtu += c.tx_mtu_exceeded_drops;
    link += c.tx_link_down_drops;
    hw += c.tx_hw_dropped;
    rx += c.rx_dropped;
  }
  add("keel_drop_ctl_tx_full", ctl);
  add("keel_drop_tx_queue_full", queue_full);
  add("keel_drop_tx_mtu_exceeded", mtu);
  add("keel_drop_tx_link_down", link);
  add("keel_drop_tx_hw", hw);
  add("keel_drop_rx_port", rx);
  return out;
}

void add_drops_commands(CommandTree::Impl& t) {
  // Both read relaxed counters, but over pmds(), which a change may
  // replace: not concurrent.
  t.declare("show drops", control::Access::show);
  t.declare("coverage-show", control::Access::show);

  CLI::App* show = t.app.get_subcommand("show");
  auto* drops = show->add_subcommand(
      "drops", "every packet dropped, by reason: per port (received = forwarded + slow path + dropped + in flight) "
               "and per PMD");
  t.add_format(drops);
  drops->callback([&t] {
    const View v = drops_view(drop_report(t.sys));
    t.print(t.format == "json" ? v.json() + "\n" : v.text());
  });

  auto* cov = t.app.add_subcommand("coverage-show",
                                   "drop event counters with rates, like ovs-appctl coverage/show "
                                   "(Open vSwitch's names where keel counts the same event)");
  cov->callback([&t] {
    const std::vector<control::Coverage::Counter> totals = coverage_counters(t.sys);
    t.print(control::Coverage::format(t.sys.coverage().read(totals)));
  });
}

}  // namespace keel::cli

// `debug fault ...`: keel's fault points (firmware/core/fault.h), for the
// tests of issue 19 on host-sim. Admin only, and only on a board that
// simulates faults (Board::simulates_faults): elsewhere arming is refused
// and nothing changes.
//
//   debug fault pool-exhausted [--count N]      every sim buffer allocation fails
//   debug fault upcall-queue-full [--count N]   data misses find no upcall record (lost)
//   debug fault handler-stall MS [--count N]    each upcall handler pass sleeps MS first
//   debug fault revalidator-slow MS [--count N] each revalidation round's dump takes MS longer
//   debug fault disk-full [--short] [--count N] config writes fail with ENOSPC (--short: after half)
//   debug fault control-stall MS                blocks the control thread for MS now, then
//                                               says what the datapath did meanwhile
//   debug fault clear [POINT]                   disarm one point, or all
//   debug fault show [--format json]            what is armed and how often each fired;
//                                               links held down (port-link) and the sim
//                                               NIC's offload faults (debug offload-fault)
// --count N: the point disarms itself after N fires (default: until cleared).
//
// control-stall holds the command gate (exclusively, as any change does)
// but not the Ofproto writer lock, as a slow `write memory` does: the SSH
// sessions' and the control socket's commands wait for it; the PMDs, the
// handlers and the revalidators don't.
#include <chrono>
#include <thread>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "core/fault.h"
#include "keel/hal/sim_nic.h"

namespace keel::cli {

namespace {

struct FaultCmdArgs {
  uint32_t ms = 0, count = 0;
  bool short_write = false;
  std::string point;
};

std::string fault_state_text(const fault::View& v) {
  if (!v.armed) return "off";
  std::string s = "armed";
  if (v.ms) s += " " + std::to_string(v.ms) + " ms";
  if (v.flags & fault::kShortWrite) s += " short";
  if (v.remaining != fault::kForever) s += ", " + std::to_string(v.remaining) + " left";
  return s;
}

// Received and sent packets summed over every port (the control-stall report).
std::pair<uint64_t, uint64_t> datapath_packets(control::System& sys) {
  uint64_t rx = 0, tx = 0;
  for (const hal::Port* p : sys.datapath().ports()) {
    const hal::PortCounters c = p->counters();
    rx += c.rx_packets;
    tx += c.tx_packets;
  }
  return {rx, tx};
}

}  // namespace

void add_fault_debug_commands(CommandTree::Impl& t) {
  struct Armable {
    fault::Point point;
    const char* help;
  };
  static const Armable kArmable[] = {
      {fault::Point::pool_exhausted, "every sim packet buffer allocation fails (a NIC whose pool ran dry)"},
      {fault::Point::upcall_queue_full, "a PMD finds no free upcall record for a data miss: the miss is lost"},
      {fault::Point::handler_stall, "each upcall handler pass first sleeps MS (a stalled handler)"},
      {fault::Point::revalidator_slow, "each revalidation round's flow dump takes MS longer"},
      {fault::Point::disk_full, "writes of config files fail with ENOSPC (write memory, copy)"},
  };
  for (const Armable& a : kArmable)
    t.declare(std::string("debug fault ") + fault::name(a.point), control::Access::admin);
  t.declare("debug fault control-stall", control::Access::admin);
  t.declare("debug fault clear", control::Access::admin);
  t.declare("debug fault show", control::Access::show);

  auto args = std::make_shared<FaultCmdArgs>();
  CLI::App* debug = t.app.get_subcommand("debug");  // made by add_offload_debug_commands
  CLI::App* f = debug->add_subcommand(
      "fault", "arm keel's fault points (boards that simulate faults: host-sim; see debug fault show)");
  f->require_subcommand(1);
  f->preparse_callback([args](size_t) { *args = FaultCmdArgs{}; });

  // Arms `p` from the parsed arguments, or says why not (the board's name
  // when it does not simulate faults).
  auto arm = [&t, args](fault::Point p) {
    fault::Arm a;
    a.count = args->count ? args->count : fault::kForever;
    a.ms = args->ms;
    a.flags = args->short_write ? fault::kShortWrite : 0;
    Status st = fault::arm(p, a);
    if (!st.ok() && !fault::permitted())
      st = error(st.code(), st.message() + " (this board, " + std::string(t.sys.board().name) + ", does not)");
    t.status = st.prefix(std::string("debug fault ") + fault::name(p));
  };
  for (const Armable& a : kArmable) {
    CLI::App* s = f->add_subcommand(fault::name(a.point), a.help);
    if (fault::is_stall(a.point))
      s->add_option("MS", args->ms, "milliseconds")->required()->check(CLI::Range(1u, fault::kMaxStallMs));
    if (a.point == fault::Point::disk_full)
      s->add_flag("--short", args->short_write, "write half of the bytes, then fail (a short write)");
    s->add_option("--count", args->count, "disarm after N fires (default: until cleared)")
        ->check(CLI::Range(1u, 4294967294u));
    const fault::Point p = a.point;
    s->callback([arm, p] { arm(p); });
  }

  CLI::App* cs = f->add_subcommand("control-stall", "block the control thread for MS now (consoles wait; forwarding goes on)");
  cs->add_option("MS", args->ms, "milliseconds")->required()->check(CLI::Range(1u, 60'000u));
  cs->callback([&t, args] {
    fault::Arm a;
    a.count = 1;
    a.ms = args->ms;
    if (Status st = fault::arm(fault::Point::control_stall, a); !st.ok()) {
      if (!fault::permitted())
        st = error(st.code(), st.message() + " (this board, " + std::string(t.sys.board().name) + ", does not)");
      t.status = st.prefix("debug fault control-stall");
      return;
    }
    const auto [rx0, tx0] = datapath_packets(t.sys);
    const auto t0 = std::chrono::steady_clock::now();
    fault::stall(fault::Point::control_stall);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    const auto [rx1, tx1] = datapath_packets(t.sys);
    if (t.format == "json") {
      Json j;
      j.begin_object()
          .field("blocked_ms", static_cast<uint64_t>(ms.count()))
          .field("rx_packets", rx1 - rx0)
          .field("tx_packets", tx1 - tx0)
          .end_object();
      t.print(j.str() + "\n");
      return;
    }
    t.print("control thread blocked for " + std::to_string(ms.count()) + " ms; meanwhile the ports received " +
            std::to_string(rx1 - rx0) + " and sent " + std::to_string(tx1 - tx0) + " packets\n");
  });
  t.add_format(cs);

  CLI::App* clear = f->add_subcommand("clear", "disarm POINT, or every point (fired counts stay)");
  clear->add_option("POINT", args->point, "a point's name (debug fault show lists them)");
  clear->callback([&t, args] {
    if (args->point.empty()) {
      fault::clear_all();
      return;
    }
    auto p = fault::parse(args->point);
    if (!p) {
      t.status = invalid("debug fault clear: no fault point '" + args->point + "' (debug fault show lists them)");
      return;
    }
    fault::disarm(*p);
  });

  CLI::App* show = f->add_subcommand("show", "what is armed, how often each point fired, links held down, offload faults");
  t.add_format(show);
  show->callback([&t] {
    std::vector<std::string> down;
    for (const hal::Port* p : t.sys.datapath().ports())
      if (p->link_forced_down()) down.push_back(p->name());
    auto nic = find_sim_nic(t.sys);
    const std::string offload = nic ? (*nic)->describe() : "";
    if (t.format == "json") {
      Json j;
      j.begin_object().field("enabled", fault::permitted()).field("board", t.sys.board().name).begin_array("points");
      for (unsigned i = 0; i < fault::kPoints; ++i) {
        const fault::View v = fault::view(static_cast<fault::Point>(i));
        j.begin_object()
            .field("name", fault::name(v.point))
            .field("armed", v.armed)
            .field("ms", v.armed ? v.ms : 0)
            .field("short", v.armed && (v.flags & fault::kShortWrite) != 0);
        if (v.armed && v.remaining != fault::kForever) {
          j.field("left", v.remaining);
        } else {
          j.null_field("left");
        }
        j.field("fired", v.fired).field("where", fault::where(v.point)).end_object();
      }
      j.end_array().begin_array("links_down");
      for (const std::string& n : down) j.value(n);
      j.end_array();
      if (nic) {
        j.field("offload_faults", offload);
      } else {
        j.null_field("offload_faults");
      }
      j.end_object();
      t.print(j.str() + "\n");
      return;
    }
    std::string out = std::string("fault injection: ") + (fault::permitted() ? "on" : "off") + " (board " +
                      std::string(t.sys.board().name) + ")\n";
    out += "  point              state                 fired  where\n";
    for (unsigned i = 0; i < fault::kPoints; ++i) {
      const fault::View v = fault::view(static_cast<fault::Point>(i));
      std::string name = fault::name(v.point), state = fault_state_text(v), fired = std::to_string(v.fired);
      name.resize(std::max<size_t>(name.size(), 18), ' ');
      state.resize(std::max<size_t>(state.size(), 20), ' ');
      fired.insert(0, fired.size() < 6 ? 6 - fired.size() : 0, ' ');
      out += "  " + name + " " + state + " " + fired + "  " + fault::where(v.point) + "\n";
    }
    std::string links;
    for (const std::string& n : down) links += (links.empty() ? "" : ", ") + n;
    out += "  links held down (port-link): " + (links.empty() ? std::string("none") : links) + "\n";
    out += "  offload faults (debug offload-fault show): " + (nic ? offload : std::string("no sim NIC model")) + "\n";
    t.print(out);
  });
}

}  // namespace keel::cli

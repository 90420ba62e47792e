// `debug offload-fault ...`: the sim NIC model's fault injection and costs
// (keel/hal/sim_nic.h), for tests and benchmarks on host-sim. Every sim
// port shares one model (an e-switch per sim backend), so the command needs
// no port: it uses the model of the first datapath port whose backend has
// one, and fails, changing nothing, when no port has (DPDK ports, or a
// board without offload capacity).
//
//   debug offload-fault insert-fail N [ERRNO]   next N rule creates fail (default EIO)
//   debug offload-fault delete-fail N [ERRNO]   next N destroys fail
//   debug offload-fault query-fail N [ERRNO]    next N counter queries fail
//   debug offload-fault table-full on|off       every create answers ENOSPC while on
//   debug offload-fault capacity EXACT MASKED   resize the model's tables
//   debug offload-fault reset                   device reset: every rule forgotten
//   debug offload-fault async on|off            offer the template/async API or not
//   debug offload-fault keep-order on|off       keep burst order across the hw/PMD split
//   debug offload-fault clear                   cancel every injected fault
//   debug offload-fault show [--format json]    the faults armed and what the model counted
//
// ERRNO: a name (EIO, ENOSPC, EEXIST, ENOTSUP, ENODEV, EINVAL, EBUSY,
// EAGAIN, ENOMEM, ENOSYS, ENOENT, E2BIG) or a positive number.
#include <cerrno>
#include <cstring>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "keel/hal/sim_nic.h"

namespace keel::cli {

namespace {

struct FaultArgs {
  std::string n, err, state, exact, masked;
};

Result<int> parse_errno(const std::string& s) {
  static const struct {
    const char* name;
    int value;
  } names[] = {{"EIO", EIO},       {"ENOSPC", ENOSPC}, {"EEXIST", EEXIST}, {"ENOTSUP", ENOTSUP},
               {"ENODEV", ENODEV}, {"EINVAL", EINVAL}, {"EBUSY", EBUSY},   {"EAGAIN", EAGAIN},
               {"ENOMEM", ENOMEM}, {"ENOSYS", ENOSYS}, {"ENOENT", ENOENT}, {"E2BIG", E2BIG}};
  if (s.empty()) return EIO;
  for (const auto& n : names)
    if (strcasecmp(s.c_str(), n.name) == 0) return n.value;
  if (s.find_first_not_of("0123456789") == std::string::npos && s.size() <= 4) {
    const int v = std::stoi(s);
    if (v > 0) return v;
  }
  return invalid("debug offload-fault: unknown errno '" + s +
                 "' (a positive number, or EIO, ENOSPC, EEXIST, ENOTSUP, ENODEV, EINVAL, EBUSY, EAGAIN, ENOMEM, "
                 "ENOSYS, ENOENT, E2BIG)");
}

}  // namespace

Result<hal::sim::SimNic*> find_sim_nic(control::System& sys) {
  for (hal::Port* p : sys.datapath().ports()) {
    if (!p->backend()) continue;
    if (hal::sim::SimNic* nic = hal::sim::sim_nic(*p->backend())) return nic;
  }
  return error(Errc::not_found,
               "debug offload-fault: no sim NIC model (no sim port, or the board has no offload capacity): "
               "faults are injected into the sim backend only");
}

void add_offload_debug_commands(CommandTree::Impl& t) {
  // Declarations (command_tree_impl.h: CommandDecl).
  t.declare("debug offload-fault insert-fail", control::Access::change);
  t.declare("debug offload-fault delete-fail", control::Access::change);
  t.declare("debug offload-fault query-fail", control::Access::change);
  t.declare("debug offload-fault table-full", control::Access::change);
  t.declare("debug offload-fault async", control::Access::change);
  t.declare("debug offload-fault keep-order", control::Access::change);
  t.declare("debug offload-fault capacity", control::Access::change);
  t.declare("debug offload-fault reset", control::Access::change);
  t.declare("debug offload-fault clear", control::Access::change);
  t.declare("debug offload-fault show", control::Access::show);

  auto a = std::make_shared<FaultArgs>();
  CLI::App* debug = t.app.add_subcommand("debug", "debugging and test aids (sim backend)");
  debug->require_subcommand(1);
  CLI::App* f = debug->add_subcommand("offload-fault", "inject faults into the sim NIC model's flow engine");
  f->require_subcommand(1);
  f->preparse_callback([a](size_t) { *a = FaultArgs{}; });

  // Runs `fn` on the model, or says why there is none.
  auto with_nic = [&t](auto fn) {
    auto nic = find_sim_nic(t.sys);
    if (!nic) {
      t.status = std::move(nic).take_status();
      return;
    }
    fn(**nic);
  };
  auto counted = [&t, a, with_nic](void (hal::sim::SimNic::*set)(unsigned, int)) {
    auto e = parse_errno(a->err);
    if (!e) {
      t.status = std::move(e).take_status();
      return;
    }
    const auto n = static_cast<unsigned>(std::stoul(a->n));
    const int errnum = *e;
    with_nic([&](hal::sim::SimNic& nic) { (nic.*set)(n, errnum); });
  };
  struct Counted {
    const char* name;
    const char* help;
    void (hal::sim::SimNic::*set)(unsigned, int);
  };
  static const Counted counted_faults[] = {
      {"insert-fail", "the next N rule creates fail with ERRNO (default EIO; N = 0 cancels)",
       &hal::sim::SimNic::fail_next_creates},
      {"delete-fail", "the next N rule destroys fail with ERRNO (default EIO)", &hal::sim::SimNic::fail_next_destroys},
      {"query-fail", "the next N counter queries fail with ERRNO (default EIO)", &hal::sim::SimNic::fail_next_queries},
  };
  for (const Counted& c : counted_faults) {
    CLI::App* s = f->add_subcommand(c.name, c.help);
    s->add_option("N", a->n, "how many (0 cancels)")->required()->check(CLI::Range(0.0, 4294967295.0));
    s->add_option("ERRNO", a->err, "EIO, ENOSPC, EEXIST, ENOTSUP, ENODEV, ... or a number");
    const Counted* cp = &c;
    s->callback([counted, cp] { counted(cp->set); });
  }
  auto on_off = [a, with_nic](const char* name, const char* help, void (hal::sim::SimNic::*set)(bool),
                                  CLI::App* parent) {
    CLI::App* s = parent->add_subcommand(name, help);
    s->add_option("STATE", a->state, "on or off")->required()->check(CLI::IsMember({"on", "off"}));
    s->callback([a, with_nic, set] {
      const bool on = a->state == "on";
      with_nic([&](hal::sim::SimNic& nic) { (nic.*set)(on); });
    });
  };
  on_off("table-full", "every rule create answers ENOSPC while on", &hal::sim::SimNic::set_table_full, f);
  on_off("async", "offer the template/async API (as mlx5) or only the sync one", &hal::sim::SimNic::set_async_api, f);
  on_off("keep-order", "keep burst order across the hardware/PMD split (default off)", &hal::sim::SimNic::set_keep_order,
         f);
  CLI::App* cap = f->add_subcommand("capacity", "resize the model's exact-match and masked tables");
  cap->add_option("EXACT", a->exact, "exact-match rules")->required()->check(CLI::Range(0.0, 4294967295.0));
  cap->add_option("MASKED", a->masked, "masked rules")->required()->check(CLI::Range(0.0, 4294967295.0));
  cap->callback([&t, a, with_nic] {
    const auto e = static_cast<uint32_t>(std::stoul(a->exact));
    const auto m = static_cast<uint32_t>(std::stoul(a->masked));
    with_nic([&](hal::sim::SimNic& nic) { t.status = nic.set_capacity(e, m).prefix("debug offload-fault capacity"); });
  });
  f->add_subcommand("reset", "device reset: the model forgets every rule and queued operation")
      ->callback([with_nic] { with_nic([](hal::sim::SimNic& nic) { nic.reset(); }); });
  f->add_subcommand("clear", "cancel every injected fault (capacities stay)")
      ->callback([with_nic] { with_nic([](hal::sim::SimNic& nic) { nic.clear_faults(); }); });
  CLI::App* show = f->add_subcommand("show", "the faults armed and what the model counted");
  t.add_format(show);
  show->callback([&t, with_nic] {
    with_nic([&](hal::sim::SimNic& nic) {
      const hal::sim::SimNicStats s = nic.stats();
      if (t.format == "json") {
        Json j;
        j.begin_object()
            .field("faults", nic.describe())
            .field("exact_rules", static_cast<uint64_t>(s.exact_rules))
            .field("exact_capacity", static_cast<uint64_t>(s.exact_capacity))
            .field("masked_rules", static_cast<uint64_t>(s.masked_rules))
            .field("masked_capacity", static_cast<uint64_t>(s.masked_capacity))
            .field("reset_generation", s.reset_generation)
            .field("creates", s.creates)
            .field("create_failures", s.create_failures)
            .field("destroys", s.destroys)
            .field("destroy_failures", s.destroy_failures)
            .field("queries", s.queries)
            .field("query_failures", s.query_failures)
            .field("async_pending", s.async_pending)
            .field("hw_forwarded", s.hw_forwarded)
            .field("hw_dropped", s.hw_dropped)
            .field("hw_marked", s.hw_marked)
            .field("hw_to_pmd", s.hw_to_pmd)
            .field("hw_tx_dropped", s.hw_tx_dropped)
            .field("injected_failures", s.injected_failures)
            .end_object();
        t.print(j.str() + "\n");
        return;
      }
      std::string out = "sim NIC: " + nic.describe() + "\n";
      out += "  exact rules " + std::to_string(s.exact_rules) + "/" + std::to_string(s.exact_capacity) +
             ", masked rules " + std::to_string(s.masked_rules) + "/" + std::to_string(s.masked_capacity) + "\n";
      out += "  creates " + std::to_string(s.creates) + " (failed " + std::to_string(s.create_failures) +
             "), destroys " + std::to_string(s.destroys) + " (failed " + std::to_string(s.destroy_failures) +
             "), queries " + std::to_string(s.queries) + " (failed " + std::to_string(s.query_failures) +
             "), async pending " + std::to_string(s.async_pending) + "\n";
      out += "  packets: forwarded " + std::to_string(s.hw_forwarded) + ", dropped " + std::to_string(s.hw_dropped) +
             ", marked " + std::to_string(s.hw_marked) + ", to a PMD " + std::to_string(s.hw_to_pmd) +
             ", egress refused " + std::to_string(s.hw_tx_dropped) + "\n";
      out += "  injected failures " + std::to_string(s.injected_failures) + ", resets " +
             std::to_string(s.reset_generation) + "\n";
      t.print(out);
    });
  });
}

}  // namespace keel::cli

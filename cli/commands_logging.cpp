// Logging commands: `show logging`, `logging level`, `logging console`, and
// the logging running-config section (firmware/core/log.h).
#include <cinttypes>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "cli/table.h"
#include "core/log.h"

namespace keel::cli {

namespace {

constexpr const char* kLevels = "off, emer, err, warn, info, dbg";

Result<log::Level> level_arg(const std::string& s) {
  auto l = log::parse_level(s);
  if (!l) return invalid("unknown level '" + s + "' (levels: " + kLevels + ")");
  return *l;
}

}  // namespace

void add_logging_commands(CommandTree::Impl& t) {
  // Declarations (command_tree_impl.h: CommandDecl).
  t.declare("show logging", control::Access::show);
  t.declare("logging level", control::Access::change);
  t.declare("logging console", control::Access::change);

  t.add_config_section({"logging", 900,
                        [](std::vector<std::string>& lines) {
                          for (const log::Module* m : log::modules())
                            if (m->level() != m->default_level())
                              lines.push_back(std::string("logging level ") + m->name() + " " + log::to_string(m->level()));
                          if (log::console_level() != log::Level::warn)
                            lines.push_back(std::string("logging console ") + log::to_string(log::console_level()));
                        },
                        [] { log::reset_levels(); }});

  CLI::App* show = t.app.get_subcommand("show");
  auto* sl = show->add_subcommand("logging", "log levels per module and the last messages");
  t.add_format(sl);
  sl->add_option("-n,--last", t.arg1, "how many messages (default 20, at most 256)")->check(CLI::Range(0, 256));
  sl->callback([&t] {
    const size_t n = t.arg1.empty() ? 20 : std::stoul(t.arg1);
    const auto mods = log::modules();
    const auto msgs = log::recent(n);
    if (t.format == "json") {
      Json j;
      j.begin_object()
          .field("console_level", log::to_string(log::console_level()))
          .field("ring_size", static_cast<uint64_t>(log::kRingEntries))
          .field("logged", log::logged())
          .field("dropped", log::dropped())
          .field("suppressed", log::suppressed());
      j.begin_array("modules");
      for (const log::Module* m : mods)
        j.begin_object().field("name", m->name()).field("level", log::to_string(m->level())).end_object();
      j.end_array().begin_array("messages");
      for (const log::Entry& e : msgs)
        j.begin_object()
            .field("seq", e.seq)
            .field("time_ns", e.time_ns)
            .field("module", e.module)
            .field("level", log::to_string(e.level))
            .field("text", e.text)
            .end_object();
      j.end_array().end_object();
      t.print(j.str() + "\n");
      return;
    }
    Table tb({"Module", "Level"});
    for (const log::Module* m : mods) tb.add({m->name(), log::to_string(m->level())});
    std::string s = tb.str();
    s += "console: " + std::string(log::to_string(log::console_level())) + "; ring: " +
         std::to_string(log::kRingEntries) + " messages, " + std::to_string(log::logged()) + " logged, " +
         std::to_string(log::dropped()) + " dropped (ring busy), " + std::to_string(log::suppressed()) +
         " suppressed (rate limit)\n";
    if (!msgs.empty()) {
      s += "last " + std::to_string(msgs.size()) + " messages:\n";
      for (const log::Entry& e : msgs) s += log::format_entry(e) + "\n";
    }
    t.print(s);
  });

  CLI::App* lg = t.app.add_subcommand("logging", "log levels");
  lg->require_subcommand(1);
  auto* lvl = lg->add_subcommand("level", "keep messages of MODULE (or all) at LEVEL and above");
  lvl->add_option("MODULE", t.arg1, "a module (see show logging) or all")->required();
  lvl->add_option("LEVEL", t.arg2, kLevels)->required();
  lvl->callback([&t] {
    auto l = level_arg(t.arg2);
    if (!l) {
      t.status = std::move(l).take_status();
      return;
    }
    if (t.arg1 == "all") {
      for (log::Module* m : log::modules()) m->set_level(*l);
      return;
    }
    log::Module* m = log::find_module(t.arg1);
    if (!m) {
      std::string known;
      for (const log::Module* x : log::modules()) known += (known.empty() ? "" : ", ") + std::string(x->name());
      t.status = error(Errc::not_found, "no log module '" + t.arg1 + "' (modules: " + known + ")");
      return;
    }
    m->set_level(*l);
  });
  auto* con = lg->add_subcommand("console", "print messages at LEVEL and above on the console (default warn)");
  con->add_option("LEVEL", t.arg1, kLevels)->required();
  con->callback([&t] {
    auto l = level_arg(t.arg1);
    if (!l) {
      t.status = std::move(l).take_status();
      return;
    }
    log::set_console_level(*l);
  });
}

}  // namespace keel::cli

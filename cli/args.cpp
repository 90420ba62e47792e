// keel's command line, parsed with CLI11.
#include "cli/args.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "boards/board.h"
#include "cli/table.h"
#include "core/version.h"
#include "keel/hal/backend.h"

namespace keel::cli {

std::variant<Args, int> parse_args(int argc, char** argv) {
  Args a;
  bool list_boards = false;
  bool version = false;
  CLI::App app{"keel: SmartNIC virtual switch firmware. With no arguments it boots the host-sim "
               "board and gives a console on stdin/stdout.",
               "keel"};
  app.add_option("--board", a.boot.board, "board to boot (see --list-boards)")->default_str("host-sim");
  app.add_flag("--list-boards", list_boards, "list the boards and exit");
  app.add_option("--config", a.config_file, "startup configuration: a file of console commands")
      ->check(CLI::ExistingFile);
  app.add_option("--config-dir", a.config_dir,
                 "where startup-config lives (write memory saves it, boot replays it); default: the board's, "
                 "/etc/keel on hardware boards, ./keel-config on host-sim");
  app.add_option("--port", a.boot.ports,
                 "NAME=SPEC, repeatable, replaces the board's ports: pcap:in=FILE, pcap:out=FILE, "
                 "pcap:in=A,out=B[,loop=N], ring, tap:IFNAME, null, sample[:pps=N], dpdk:DEVARGS")
      ->allow_extra_args(false);
  app.add_flag("--exit-when-drained", a.exit_when_drained,
               "forward until every pcap input is read and processed, run the commands on stdin, exit");
  app.add_option("--console", a.console_device,
                 "run the console on this serial device (e.g. /dev/ttyS0), raw, at the board's console "
                 "baud rate, instead of stdin/stdout");
  app.add_option("--exec", a.exec,
                 "run one console command in the keel already running with this config directory "
                 "(through DIR/keel.sock), print its output and exit with its status: 0, 1 if it failed, "
                 "2 if no keel answered");
  app.add_flag("--version", version, "print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "keel: error: " << e.what() << "\n";
    return 2;
  }
  if (version) {
    std::cout << "keel " << kVersion << " (" << kGitRevision << ", " << kBuildArch << ")\n";
    return 0;
  }
  if (list_boards) {
    Table t({"Board", "Backend", "Ports", "PMDs", "Description"});
    for (const boards::Board* b : boards::all())
      t.add({std::string(b->name) + (b == &boards::default_board() ? " (default)" : ""),
             boards::to_string(b->backend), std::to_string(b->ports.size()), std::to_string(b->pmd_cores.size()),
             std::string(b->description)});
    std::cout << t.str();
    return 0;
  }
  return a;
}

}  // namespace keel::cli

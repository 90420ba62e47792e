// keel boot: args -> board -> HAL -> datapath -> config -> forwarding -> console.
//
// Every boot failure ends with one line "keel: error: <thing>: <reason>" on
// stderr and exit status 1; nothing is left running.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>

#include "cli/args.h"
#include "cli/config.h"
#include "cli/console.h"
#include "cli/control_socket.h"
#include "cli/ssh_sessions.h"
#include "control/config_store.h"
#include "control/system.h"
#include "core/log.h"
#include "core/shutdown.h"
#include "core/sys_error.h"
#include "core/version.h"

namespace {

KEEL_LOG_MODULE(log_boot, "boot");

void on_signal(int) { keel::request_shutdown(); }

int fail(const keel::Status& st) {
  fprintf(stderr, "keel: error: %s\n", st.message().c_str());
  return 1;
}

keel::Result<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return keel::error(keel::Errc::io_error, "config '" + path + "': " + keel::errno_text(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return keel::error(keel::Errc::io_error, "config '" + path + "': read error");
  return ss.str();
}

int run(int argc, char** argv);

}  // namespace

// Nothing below throws on purpose (firmware/ and hal/ report Status; cli/
// turns CLI11's exceptions into messages), but std::string and the
// containers can still throw std::bad_alloc: that too ends as one error
// line, after the stack unwound (the system shut down by its destructor).
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "keel: error: %s\n", e.what());
  } catch (...) {
    fprintf(stderr, "keel: error: unknown exception\n");
  }
  return 1;
}

namespace {

int run(int argc, char** argv) {
  auto parsed = keel::cli::parse_args(argc, argv);
  if (auto* code = std::get_if<int>(&parsed)) return *code;
  const keel::cli::Args& args = std::get<keel::cli::Args>(parsed);

  // keel --exec CMD: a client of the keel already running with this config
  // directory (cli/control_socket.h); nothing boots.
  if (args.exec) {
    std::string dir = args.config_dir;
    if (dir.empty()) {
      const keel::boards::Board* b = keel::boards::find(args.boot.board);
      if (!b) return fail(keel::invalid("unknown board '" + args.boot.board + "' (see --list-boards)"));
      dir = std::string(b->config_dir);
    }
    return keel::cli::exec_remote(keel::cli::control_socket_path(dir), *args.exec, stdout, stderr);
  }

  // The slow path allocates a ukey, a megaflow and actions per new flow, on
  // the handler threads' malloc arenas; by default an arena grows 128 KiB at
  // a time (a heap-growing call every ~100 flows of a storm). Grow it 64 MiB
  // at a time: address space, not memory, until the pages are used.
  // Measured: a million-flow storm's handler costs ~6 % less CPU per upcall
  // and sets up ~10 % more flows/s (tests/bench/RESULTS.md, issue 18).
  // NOLINTNEXTLINE(concurrency-mt-unsafe): at boot, before any thread is started
  (void)mallopt(M_TOP_PAD, 64 << 20);

  // A closed console pipe must not kill the switch; writes just fail.
  signal(SIGPIPE, SIG_IGN);
  // SIGINT/SIGTERM shut down cleanly (PMDs joined, pcap outputs flushed).
  // No SA_RESTART: a blocked console read returns EINTR and sees the flag.
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  // An explicit --config is read before boot (a typo fails fast); without
  // one, boot replays DIR/startup-config (cli/config.h).
  std::optional<std::string> config_text;
  if (!args.config_file.empty()) {
    auto text = read_file(args.config_file);
    if (!text) return fail(text.status());
    config_text = std::move(text.value());
  }

  auto sys = keel::control::System::boot(args.boot);
  if (!sys) return fail(sys.status());
  keel::control::System& system = **sys;

  KEEL_LOG(log_boot, info, "keel %s booting board %s: %zu ports, %zu PMD threads", keel::kVersion,
           std::string(system.board().name).c_str(), system.port_names().size(), system.datapath().pmds().size());

  keel::control::ConfigStore store(args.config_dir.empty() ? std::string(system.board().config_dir)
                                                           : args.config_dir);
  keel::cli::CommandTree tree(system);
  keel::cli::set_config_store(tree, &store);
  auto booted = keel::cli::apply_boot_config(tree, config_text, args.config_file, stdout, stderr);
  if (!booted) {
    system.shutdown();
    return fail(booted.status());
  }
  KEEL_LOG(log_boot, info, "applied %s", booted->origin.c_str());
  // --exit-when-drained with every input a finite pcap replay: an offline
  // run, lossless and in input order (datapath.h).
  system.datapath().allow_offline(args.exit_when_drained);
  if (auto st = system.start(); !st.ok()) {
    system.shutdown();
    return fail(st);
  }
  keel::cli::boot_config_succeeded(tree, *booted, stderr);

  // --console DEV: the console runs on that UART (raw, at the board's speed)
  // instead of stdin/stdout.
  int console_fd = -1;
  if (!args.console_device.empty()) {
    auto fd = keel::cli::open_serial_console(args.console_device, system.board().console_baud);
    if (!fd) {
      system.shutdown();
      return fail(fd.status());
    }
    console_fd = *fd;
  }

  const bool interactive = console_fd >= 0 || isatty(STDIN_FILENO);
  if (args.exit_when_drained) {
    // Bounded so a port that never drains can't hang a script forever.
    constexpr int kDrainTimeoutS = 10 * 60;
    int waited_ms = 0;
    while (!system.wait_drained(100)) {
      waited_ms += 100;
      if (keel::shutdown_requested() || waited_ms >= kDrainTimeoutS * 1000) {
        system.shutdown();
        return fail(keel::error(keel::Errc::unavailable,
                                keel::shutdown_requested()
                                    ? "--exit-when-drained: interrupted before the inputs drained"
                                    : "--exit-when-drained: inputs did not drain in 10 minutes"));
      }
    }
    // One revalidation round pushes the datapath's statistics to the rules,
    // so the commands on stdin see every packet of the run (dump-flows'
    // n_packets: the upcall credited each miss, this the megaflow hits).
    if (keel::ofproto::Udpif* u = system.udpif()) {
      (void)u->wait_spent(10'000);
      (void)u->revalidate_now();
    }
  }
  char banner[256];
  snprintf(banner, sizeof banner, "keel %s on %s: %zu ports, %zu PMD threads. Type 'help' for the commands.\n",
           keel::kVersion, std::string(system.board().name).c_str(), system.port_names().size(),
           system.datapath().pmds().size());
  // The control socket for `keel --exec` (DIR/keel.sock); its requests run
  // on this thread, between the console's lines. Without it keel still runs.
  std::unique_ptr<keel::cli::ControlSocket> exec_socket;
  if (auto sock = keel::cli::ControlSocket::listen(keel::cli::control_socket_path(store.dir()))) {
    exec_socket = std::move(*sock);
  } else if (sock.status().code() == keel::Errc::already_exists) {
    KEEL_LOG(log_boot, info, "no --exec socket: %s", sock.status().message().c_str());
  } else {
    KEEL_LOG(log_boot, warn, "no --exec socket: %s", sock.status().message().c_str());
  }
  // The SSH server (cli/ssh_sessions.h): the settings the config left in
  // System::ssh_settings(), host keys in the config directory. A port that
  // can't be bound is a warning: keel runs without SSH (`ssh port N` later).
  keel::cli::SshService ssh_service(system, store.dir());
  ssh_service.set_config_store(&store);
  system.attach_ssh(&ssh_service);
  if (auto st = ssh_service.apply(system.ssh_settings()); !st.ok())
    KEEL_LOG(log_boot, warn, "no SSH server: %s", st.message().c_str());
  int status = 0;
  if (console_fd >= 0) {
    status = keel::cli::run_terminal(tree, console_fd, console_fd, banner, exec_socket.get());
    close(console_fd);
  } else {
    if (interactive) fputs(banner, stdout);
    status = keel::cli::run_console(tree, STDIN_FILENO, stdout, stderr, interactive, exec_socket.get());
  }
  exec_socket.reset();
  // SSH sessions end (and their threads are joined) before the system
  // they run commands on shuts down.
  system.attach_ssh(nullptr);
  ssh_service.stop();
  system.shutdown();
  return status;
}

}  // namespace

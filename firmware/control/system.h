// System — the one API that consoles call: boot, the board, the ports, the
// forwarding state, shutdown.
//
// Boot order (firmware/main.cpp drives it):
//   System::boot(options)   board -> HAL backends -> ports -> datapath (idle)
//                           -> ofproto (bridges: none yet)
//   apply the startup config  console commands through cli/
//   start()                 PMD threads begin polling, then the offload
//                           engine's thread(s) (offload/offload.h)
//   ... consoles ...
//   shutdown()              the offload engine first (every hardware rule
//                           destroyed), then PMDs joined, ports stopped
//                           (pcap files flushed), backends shut down
// Forwarding starts only after the config is applied, so a pcap input is
// never half-consumed by a switch that has no rules yet.
//
// Every method that a user can make fail returns a Status whose message
// names the thing and the reason, and leaves the running state unchanged.
//
// Thread-safety: its methods are called by console commands, which run
// through control() (several threads: the serial console, `keel --exec`,
// SSH sessions): changes hold control()'s exclusive gate, so they are
// serialised as if on one thread; concurrent show commands only call the
// methods that read atomics or state under its own lock (ports(),
// users()). The datapath's own rules (datapath.h) govern what PMDs see.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "boards/board.h"
#include "control/control.h"
#include "control/coverage.h"
#include "control/users.h"
#include "core/status.h"
#include "datapath/datapath.h"
#include "keel/hal/backend.h"
#include "keel/hal/port_spec.h"
#include "offload/offload.h"
#include "ofproto/ofproto.h"
#include "ofproto/udpif.h"

namespace keel::ssh {
class Server;  // firmware/ssh/server.h
}

namespace keel::control {

// ---- SSH (issue 17): settings and the running service ----
// The `ssh ...` commands' settings (running-config section "ssh"); the board
// gives the defaults (Board::ssh_*).
struct SshSettings {
  bool enabled = true;
  std::string listen;      // address ("127.0.0.1", "0.0.0.0", "::")
  std::string device;      // interface the listener is bound to ("" = any)
  uint16_t port = 22;      // 0: any free port
  bool needs_user = false; // listen only while at least one user exists
  uint32_t max_sessions = 10;
  uint32_t idle_timeout_s = 0;  // 0: none
  // Algorithms offered to new connections, in preference order, with
  // sshd_config's names (KexAlgorithms, HostKeyAlgorithms, Ciphers, MACs);
  // empty: every one keel has, in its order (the default).
  std::vector<std::string> kex_algorithms, host_key_algorithms, ciphers, macs;
  bool operator==(const SshSettings&) const = default;
};
SshSettings default_ssh_settings(const boards::Board& b);

// The SSH server as the commands see it (cli/ssh_sessions.h implements it;
// main.cpp attaches one). Methods may be called from any command's thread.
class SshService {
 public:
  virtual ~SshService() = default;
  // Makes the server match `s`: starts it, moves its listener, stops
  // listening, changes limits. On failure nothing changed and the message
  // says why ("ssh: listen 127.0.0.1:2222: Address already in use").
  virtual Status apply(const SshSettings& s) = 0;
  // "listening", "disabled", "waiting for a user", "not running (<why>)".
  virtual std::string state() const = 0;
  virtual const ssh::Server* server() const = 0;  // null: not started
  virtual std::vector<std::string> host_key_fingerprints() const = 0;
};
// ---- end SSH ----

struct BootOptions {
  std::string board = "host-sim";
  std::vector<std::string> ports;  // --port NAME=SPEC, replaces the board's ports
};

struct PortView {
  uint16_t id;
  std::string name;
  std::string kind;
  std::string role;
  std::string spec;
  std::string describe;
  hal::LinkState link;
  hal::PortCounters counters;
  uint16_t n_rxq, n_txq;
  std::optional<std::string> xconnect;  // name of the output port
  uint32_t mtu = 0;                     // the port's MTU (mtu_request, default 1500)
};

class System {
 public:
  static Result<std::unique_ptr<System>> boot(const BootOptions& opts);
  ~System();

  const boards::Board& board() const { return board_; }
  std::vector<std::string> backends() const;

  Status start();
  void shutdown();
  bool running() const { return dp_->running(); }

  std::vector<PortView> ports() const;
  std::vector<std::string> port_names() const;
  std::vector<std::string> bridge_names() const;  // sorted (for completion and messages)

  Status xconnect(const std::string& in, const std::string& out);
  Status no_xconnect(const std::string& in);
  std::vector<std::pair<std::string, std::string>> xconnects() const;

  // pmd-cpu-mask (Datapath::set_pmd_cores). While forwarding, the slow
  // path is stopped around the change, losslessly: the PMDs stop polling,
  // the upcalls in flight are answered and executed, the Udpif stops, the
  // PMDs change, the Udpif forgets the ukeys of the PMDs that went and
  // starts again, and the PMDs poll again.
  Status set_pmd_cores(std::vector<int> cores);

  // Per-PMD tunables and requests, set alike on every PMD (the console's
  // `set emc-insert-inv-prob`, `set smc-enable`, pmd-stats-clear,
  // dpcls-show): cli/ asks System, never a PMD directly.
  void set_emc_insert_inv_prob(uint32_t n);
  void set_smc_enable(bool on);
  void clear_pmd_stats();
  // PMD `pmd_index`'s megaflow classifier subtables (a dpcls_info request
  // on its ring, asked again with the size it answered if that was more).
  Result<std::vector<datapath::SubtableInfo>> dpcls_info(size_t pmd_index);

  // For --exit-when-drained; see Datapath::wait_drained.
  bool wait_drained(uint64_t timeout_ms) { return dp_->wait_drained(timeout_ms); }

  datapath::Datapath& datapath() { return *dp_; }
  // Bridges, OpenFlow ports and rules; built right after the datapath.
  ofproto::Ofproto& ofproto() { return *ofproto_; }
  // The upcall handler and revalidator (running between start() and
  // shutdown(); null before start()).
  ofproto::Udpif* udpif() { return udpif_.get(); }
  // The hardware offload engine (made at boot with the datapath, running
  // between start() and shutdown(); `offload enable|disable`, `set
  // offload-*`, offload-show, flow-dump's offload columns).
  offload::Offload& offload() { return *offload_; }
  const offload::Offload& offload() const { return *offload_; }
  // Console (and SSH) login accounts; empty: no login (control/users.h).
  Users& users() { return users_; }
  const Users& users() const { return users_; }
  // The gate every console command passes (control/control.h): role
  // check, serialisation, the Ofproto writer lock, the audit log.
  Control& control() { return *control_; }
  // coverage-show's rates (control/coverage.h): sampled by the console's
  // periodic work, read by the command; its own mutex.
  Coverage& coverage() { return coverage_; }

  // ---- SSH (issue 17) ----
  // The settings (`ssh ...` commands; board defaults at boot) and the
  // service that applies them (null until main.cpp attaches one: a config
  // replayed before that only records the settings).
  SshSettings& ssh_settings() { return ssh_settings_; }
  void attach_ssh(SshService* s) { ssh_ = s; }
  SshService* ssh() { return ssh_; }
  // ---- end SSH ----

 private:
  explicit System(const boards::Board& b) : board_(b) {}
  Result<uint16_t> port_id(const std::string& name) const;

  const boards::Board& board_;
  std::vector<hal::PortSpec> specs_;
  std::unique_ptr<hal::Backend> sim_;
  std::unique_ptr<hal::Backend> dpdk_;
  std::unique_ptr<datapath::Datapath> dp_;
  std::unique_ptr<ofproto::Ofproto> ofproto_;  // refers to *dp_: destroyed first
  std::unique_ptr<ofproto::Udpif> udpif_;      // refers to both: stopped first
  std::unique_ptr<offload::Offload> offload_;  // refers to *dp_: stopped before anything else
  Users users_;
  std::unique_ptr<Control> control_;  // made at boot, holding ofproto's writer mutex
  Coverage coverage_;
  bool shut_down_ = false;
  // ---- SSH (issue 17) ----
  SshSettings ssh_settings_;
  SshService* ssh_ = nullptr;
  // ---- end SSH ----
};

}  // namespace keel::control

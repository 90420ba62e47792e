// SSH sessions: what an SSH channel runs, and the service that owns the SSH
// server (firmware/ssh/server.h) for the rest of keel.
//
// SshService implements control::SshService (the `ssh ...` commands reach it
// through System::ssh()). It owns the ssh::Server, an Authenticator over
// control::Users (passwords: PBKDF2, keys: the user's ssh-key lines), and,
// per authenticated connection, a ChannelHost that runs each exec/shell
// channel on a session thread of its own:
//   * the thread owns a cli::CommandTree made for it, with
//     Session{Origin::ssh, user, role, peer}; commands run through
//     control::Control like every console's (roles, locks, the audit log);
//   * exec: the one line runs with its output captured; stdout becomes
//     channel data, an error message extended data (stderr) ending in "\n",
//     then exit-status 0 (success) or 1, EOF and CLOSE, in that order;
//   * shell with a pty: the console's line editor (cli/line_editor.h) at the
//     pty's size, the console's banner and prompt, Tab completion, --More--
//     paging; window-change resizes the editor and the session's rows/cols;
//     exit, quit or ^D end the session (exit-status 0);
//   * shell without a pty: one command per line (cli/line_reader.h), no
//     prompt, no echo; the exit status is 1 if any command failed (like a
//     script on stdin). Input is acknowledged (the client's window reopens)
//     as its lines run, so a client piping a large file waits for the
//     commands and the session holds at most the window unread.
// A command's output goes to memory while it runs and is handed to the
// server afterwards (Server::write may wait for a slow client; the session
// holds no control lock then).
//
// Settings: apply() starts the server the first time SSH should run (host
// keys are loaded or generated then, in the config directory), moves the
// listener when the address or port changes (open sessions keep running),
// stops listening on `ssh disable` (open sessions keep running too) and
// changes the limits and the algorithms offered (to new connections). A port that can't be bound fails apply() with the
// reason, and the old listener stays; at boot main.cpp logs that as a warning
// and keel runs without SSH.
//
// Thread-safety: apply(), state() and the show accessors run on whichever
// thread runs a command (control::Control serialises the changing ones);
// they take mu_. Session threads touch only their own tree, editor and
// channel; the I/O thread calls the ChannelHost, which hands input to the
// session thread through the session's own mutex and condition variable.
// stop() ends every session and joins its thread before the system shuts down.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "control/system.h"
#include "core/status.h"

namespace keel::ssh {
class Server;
}
namespace keel::control {
class ConfigStore;
}

namespace keel::cli {

class SshService final : public control::SshService {
 public:
  // `config_dir`: where the host keys live (the startup config's directory).
  SshService(control::System& sys, std::string config_dir);
  ~SshService() override;  // stop()
  SshService(const SshService&) = delete;
  SshService& operator=(const SshService&) = delete;

  Status apply(const control::SshSettings& s) override;
  std::string state() const override;
  const ssh::Server* server() const override;
  std::vector<std::string> host_key_fingerprints() const override;
  // Where the sessions' `write memory` saves (null: nowhere).
  void set_config_store(control::ConfigStore* store);
  // Ends every session (DISCONNECT by application) and joins the threads.
  void stop();

  struct Sessions;  // ssh_sessions.cpp: the ChannelHost and its threads

 private:
  control::System& sys_;
  std::string config_dir_;
  mutable std::mutex mu_;
  std::unique_ptr<ssh::Server> server_;
  std::string failure_;  // why the server isn't running (the last apply's error)
  struct Listener {
    std::string listen;
    uint16_t port = 0;
    std::string device;
  } listener_;  // what the server was last told to listen on
  bool enabled_ = false;
  std::shared_ptr<Sessions> sessions_;
  struct Auth;
  std::unique_ptr<Auth> auth_;
};

}  // namespace keel::cli

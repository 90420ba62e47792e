// The local control socket: `keel --exec "CMD"` runs one console command in
// a keel that is already running, the way `ovs-appctl` talks to
// ovs-vswitchd.
//
// Where: DIR/keel.sock, DIR being the config directory (--config-dir DIR, or
// the board's: /etc/keel on hardware boards, ./keel-config on host-sim). The
// socket is created mode 0600 (the directory 0700 when keel creates it):
// whoever may open it may run any command, as on the serial console --
// file permissions are its access control, and it never asks for a login.
// A stale socket left by a crashed keel is replaced; when another keel is
// listening there, this one goes on without a socket (logged).
//
// Protocol (one request per connection):
//   client -> keel   one command line, printable ASCII, ended by '\n',
//                    at most kMaxExecLine bytes, within kExecReadTimeoutMs
//   keel -> client   "KEEL/1 STATUS OUT_BYTES ERR_BYTES\n", then the
//                    command's output and its error text; keel closes.
// STATUS is 0 (the command succeeded) or 1. A line that is too long, not
// ASCII, `exit`/`quit` (they would shut keel down), or that doesn't arrive in
// time gets STATUS 1 and a message; a client that disconnects mid-line is
// dropped without running anything.
//
// Threads: a small I/O thread accepts and reads/writes the connections (one
// at a time, each bounded in time and size), so a slow or broken client never
// blocks the console. The command itself runs on the control thread: the
// console loop polls wake_fd() and calls serve(), which runs the waiting line
// on the CommandTree (control-thread only) between the operator's own
// commands. The I/O thread waits for that answer; the two hand the request
// over under mu_.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/status.h"

namespace keel::cli {

class CommandTree;

inline constexpr size_t kMaxExecLine = 4096;
inline constexpr int kExecReadTimeoutMs = 5000;   // client -> keel: the line
inline constexpr int kExecWriteTimeoutMs = 5000;  // keel -> client: the answer
inline constexpr int kExecClientTimeoutS = 120;   // client waits this long for the answer

// DIR/keel.sock
std::string control_socket_path(const std::string& config_dir);

class ControlSocket {
 public:
  // Listens on `path` and starts the I/O thread. Errc::already_exists when
  // another keel listens there.
  static Result<std::unique_ptr<ControlSocket>> listen(const std::string& path);
  // Stops the I/O thread (a waiting client gets no answer) and removes the
  // socket file if it is still ours.
  ~ControlSocket();
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;

  const std::string& path() const { return path_; }
  // Readable when a request waits for serve(). Control thread.
  int wake_fd() const { return wake_r_; }
  // Runs the waiting request, if any, on `tree` and hands the answer back.
  // Control thread; never blocks on a client.
  void serve(CommandTree& tree);

 private:
  ControlSocket() = default;
  void io_main();
  void handle(int fd);
  bool wait_fd(int fd, short events, int timeout_ms);  // false: timeout, stop, or error

  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  int listen_fd_ = -1;
  int wake_r_ = -1, wake_w_ = -1;  // I/O thread -> control thread: a request waits
  int stop_r_ = -1, stop_w_ = -1;  // destructor -> I/O thread
  std::thread io_;

  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_: the request in flight and its answer.
  bool stopping_ = false;
  bool pending_ = false;  // line_ waits for serve()
  bool answered_ = false;
  std::string line_;
  int status_ = 0;
  std::string out_, err_;
};

// The client side of `keel --exec`: sends `line` to the keel listening on
// `path`, prints its output on `out` and its errors on `err`. Returns the
// command's status (0 or 1), or 2 when no keel answered (a message on `err`).
int exec_remote(const std::string& path, const std::string& line, FILE* out, FILE* err);

}  // namespace keel::cli

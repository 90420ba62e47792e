// ssh::Server — keel's SSH-2 listener and its one I/O thread.
//
// The server owns a listening TCP socket and every SSH connection made to
// it. Per connection it composes the sans-IO pieces: Transport (transport.h:
// version exchange, key exchange, the binary packet protocol), UserAuth
// (userauth.h) until the user is authenticated, then Channels (channels.h).
// Who may log in is asked of an Authenticator; what a channel runs is the
// business of a ChannelHost that the server's user (cli/ssh_sessions.h)
// makes per authenticated connection. The server never runs a console
// command and never includes control/ or cli/.
//
// Limits (ServerConfig): connections at once (max_connections: beyond it a
// new connection gets a "Too many connections" line and is closed) and,
// among them, not yet authenticated ones (max_unauthenticated: while that
// many are logging in, new connections wait in the listen backlog until one
// finishes -- a burst of clients gets in, a flood of half-open logins only
// delays others by at most the grace time); a login grace
// time (a connection not authenticated within login_grace_s is closed);
// an idle timeout (no byte from the client and no channel output for
// idle_timeout_s; 0: none); running sessions across all connections
// (max_sessions: a channel's exec/shell request beyond it is refused); a
// per-source back-off (Backoff below): `backoff_failures` failed
// authentications from one address within `backoff_window_s` make the server
// refuse that address for backoff_initial_s, doubling on each repeat up to
// backoff_max_s (refusals are counted, logged rate-limited).
//
// Bounded buffers: at most kMaxInput bytes are read from a socket ahead of
// what the transport has consumed (a flooding client is simply not read
// further until the state machines catch up), at most kMaxOutput bytes wait
// for a socket; channel output that a session hands over (write()) waits in
// the session's own outbox while the channel's SSH window or the socket's
// buffer are full, so a client that stops reading stalls only the sessions
// that write to it.
//
// Life cycle: start() binds (port 0: any free port; bound_port() says which)
// and starts the I/O thread, which loads (or, the first time, generates) the
// host keys in host_key_dir when the server first listens -- a board that
// never listens (host-sim without users) never pays for an RSA key. While ServerConfig::may_listen returns false the socket is bound
// but not listening (a connection is refused by the kernel); the I/O thread
// checks it every kGateCheckMs. stop() (and the destructor) sends DISCONNECT
// kByApplication to every connection, tells every ChannelHost closed() for
// its open channels, joins the I/O thread and closes the socket.
//
// Thread-safety: one I/O thread runs every connection, its state machines
// and all their cryptography; the Authenticator and the ChannelHosts are
// called on it. write(), exit(), stats() and connections() may be called from
// any thread (session threads, the control thread): they take mu_, which the
// I/O thread holds only to move data between outboxes and connections, never
// across a syscall that can block or a call into a ChannelHost.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/status.h"
#include "ssh/channels.h"
#include "ssh/userauth.h"

namespace keel::ssh {

class HostKeys;
class Random;

inline constexpr size_t kMaxInput = 64 * 1024;    // bytes read ahead of the transport
inline constexpr size_t kMaxOutput = 256 * 1024;  // bytes waiting for the socket
inline constexpr size_t kMaxOutbox = 64 * 1024;   // per channel: write() waits beyond this
inline constexpr int kGateCheckMs = 250;

// Who the client is, for the ChannelHost factory and the logs.
struct ConnectionInfo {
  uint64_t id = 0;    // unique while the process runs
  std::string peer;   // "127.0.0.1:40312", "[::1]:40312"
  std::string user;   // the authenticated user
  std::string method; // "publickey", "password", "keyboard-interactive"
};

// The algorithms offered to new connections, each list in preference order
// with sshd_config's names and meaning (KexAlgorithms, HostKeyAlgorithms,
// Ciphers, MACs); an empty list: all keel has, in its order
// (transport_algorithms()). Names keel doesn't have are left out
// (TransportConfig); the caller (the `ssh ...` commands) refuses them first.
struct AlgorithmLists {
  std::vector<std::string> kex, host_keys, ciphers, macs;
  bool operator==(const AlgorithmLists&) const = default;
};

struct ServerConfig {
  std::string listen = "127.0.0.1";  // an IPv4 or IPv6 address; "0.0.0.0" / "::" for every address
  uint16_t port = 2222;              // 0: any free port
  std::string device;                // non-empty: only on this interface (SO_BINDTODEVICE)
  std::string host_key_dir;          // DIR/ssh_host_ecdsa_key, DIR/ssh_host_rsa_key
  std::string software = "keel";     // the version string's software part
  size_t max_connections = 64;
  size_t max_unauthenticated = 10;
  size_t max_sessions = 10;          // running exec/shell channels, all connections together
  uint32_t login_grace_s = 60;
  uint32_t idle_timeout_s = 0;       // 0: none
  int max_auth_attempts = 3;
  uint32_t backoff_failures = 5;
  uint32_t backoff_window_s = 60;
  uint32_t backoff_initial_s = 10;
  uint32_t backoff_max_s = 600;
  uint64_t rekey_bytes = 1ull << 30;
  uint64_t rekey_ms = 3600 * 1000;
  AlgorithmLists algorithms;
  Authenticator* auth = nullptr;  // outlives the server
  // Makes the ChannelHost of a connection once its user is authenticated
  // (I/O thread). The host lives until the connection is gone.
  std::function<std::unique_ptr<ChannelHost>(const ConnectionInfo&)> make_host;
  // Null: always listen. Called on the I/O thread every kGateCheckMs.
  std::function<bool()> may_listen;
};

struct ServerStats {
  bool listening = false;
  uint64_t accepted = 0;            // TCP connections accepted
  uint64_t refused_limit = 0;       // refused: max_connections open
  uint64_t refused_backoff = 0;     // refused: the address is backing off
  uint64_t auth_successes = 0;
  uint64_t auth_failures = 0;       // failed attempts (a publickey query is none)
  uint64_t grace_timeouts = 0;      // not authenticated within login_grace_s
  uint64_t idle_timeouts = 0;
  uint64_t sessions_started = 0;
  uint64_t sessions_refused = 0;    // beyond max_sessions, or the host refused
  uint64_t protocol_errors = 0;     // connections the transport or a state machine ended
  uint64_t client_disconnects = 0;  // the client sent DISCONNECT (the normal end)
  uint64_t closed = 0;              // connections gone, for any reason
  // Connections the server ended (DISCONNECT sent; kConnectionLost: the
  // socket closed or failed under us), by reason.
  std::map<uint32_t, uint64_t> disconnects;
};

// One connection, for `show ssh sessions`.
struct ConnectionView {
  uint64_t id = 0;
  std::string peer, user, method;
  std::string state;  // "kex", "auth", "open", "closing"
  std::string client_version;
  std::string kex, host_key, cipher, mac;  // client->server cipher/MAC ("" before the first kex)
  size_t channels = 0;
  uint64_t idle_s = 0, age_s = 0;
};

// Per-source back-off bookkeeping (sans-IO: time is passed in, so tests
// drive it). Not thread-safe: the I/O thread owns the server's.
class Backoff {
 public:
  struct Config {
    uint32_t failures = 5, window_s = 60, initial_s = 10, max_s = 600;
  };
  explicit Backoff(Config c) : cfg_(c) {}
  // A failed authentication from `addr` at `now_ms`. True when this failure
  // starts (or extends) a back-off period.
  bool failure(const std::string& addr, uint64_t now_ms);
  // A successful login: the address's failure count is forgotten (its
  // penalty level too).
  void success(const std::string& addr);
  // Milliseconds `addr` is still refused (0: not refused).
  uint64_t refused_for(const std::string& addr, uint64_t now_ms) const;
  // Forgets entries with nothing left to remember (bounded table).
  void expire(uint64_t now_ms);
  size_t size() const { return by_addr_.size(); }
  static constexpr size_t kMaxAddresses = 4096;

 private:
  struct Entry {
    std::vector<uint64_t> recent;  // failure times within the window (at most cfg_.failures)
    uint64_t until_ms = 0;         // refused until
    uint32_t level = 0;            // back-offs so far: the period is initial << (level-1)
  };
  Config cfg_;
  std::map<std::string, Entry, std::less<>> by_addr_;
};

class Server {
 public:
  // Binds, loads/generates the host keys, starts the I/O thread. Fails with
  // the address and the reason ("ssh: listen 127.0.0.1:2222: Address already
  // in use"); nothing is left running then.
  static Result<std::unique_ptr<Server>> start(ServerConfig cfg);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void stop();
  // Moves the listener to another address/port/device; the connections
  // already open keep running. On failure the old listener stays.
  Status relisten(const std::string& listen, uint16_t port, const std::string& device);
  // Stops or resumes listening (connections already open keep running).
  void set_enabled(bool on);
  // New limits apply to new sessions and to idle time from now on.
  void set_limits(size_t max_sessions, uint32_t idle_timeout_s);
  // New algorithm lists apply to connections accepted from now on (open
  // ones keep what they offered, re-keys included).
  void set_algorithms(AlgorithmLists a);
  uint16_t bound_port() const;
  std::string listen_address() const;  // "127.0.0.1:2222", "[::]:22"
  // Host key fingerprints (HostKeys::fingerprints()); empty until the
  // keys are loaded (the first time the server listens).
  std::vector<std::string> host_key_fingerprints() const;
  // Why the host keys couldn't be loaded or generated ("" if they could).
  std::string host_key_error() const;
  // Why listen(2) failed the last time it was tried ("" if it didn't).
  std::string listen_error() const;

  // --- any thread: session output ---
  // Queues channel data (stderr: extended data). Blocks while the channel's
  // outbox holds kMaxOutbox bytes or more (the client isn't reading); returns
  // false when the channel or its connection is gone (drop the output).
  bool write(uint64_t conn, uint32_t channel, std::string_view data, bool is_stderr);
  // The session took `n` bytes of the channel's input: the client's window
  // opens by as much (input beyond the window is never queued for a session).
  void consumed(uint64_t conn, uint32_t channel, size_t n);
  // The session ended: after the queued output, exit-status, EOF and CLOSE.
  void exit(uint64_t conn, uint32_t channel, int status);
  // Closes a connection (DISCONNECT kByApplication with `why`).
  void close(uint64_t conn, std::string_view why);

  ServerStats stats() const;
  std::vector<ConnectionView> connections() const;

  struct Conn;  // server.cpp

 private:
  explicit Server(ServerConfig cfg);
  void io_main();
  void wake();

  ServerConfig cfg_;  // listen/port/device/limits/algorithms guarded by mu_ after start()
  uint16_t port_ = 0;
  int listen_fd_ = -1;  // swapped by relisten() under mu_; the I/O thread re-reads it each round
  bool enabled_ = true;
  int wake_fd_ = -1;  // eventfd: session output, stop
  int pending_listen_fd_ = -1;     // relisten(): the I/O thread swaps it in (mu_)
  bool release_listener_ = false;  // relisten(): the I/O thread closes its socket first (mu_)
  std::unique_ptr<Random> random_;
  std::unique_ptr<HostKeys> host_keys_;  // set once by the I/O thread (under mu_)
  std::string key_error_;                // mu_
  std::string listen_error_;             // mu_
  std::thread io_;

  mutable std::mutex mu_;
  std::condition_variable outbox_cv_;  // a session waits for its outbox to drain
  // Guarded by mu_:
  bool stopping_ = false;
  ServerStats stats_;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;  // I/O thread adds and removes under mu_
  uint64_t next_id_ = 1;
  size_t sessions_ = 0;  // running channels (max_sessions)
};

}  // namespace keel::ssh

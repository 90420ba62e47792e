// ssh::Server: the listener, the poll(2) loop and the connection table
// (server.h has the design and the thread-safety rules).
#include "ssh/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <set>

#include "core/log.h"
#include "core/sys_error.h"
#include "ssh/hostkey.h"
#include "ssh/random.h"
#include "ssh/transport.h"
#include "ssh/wire.h"

namespace keel::ssh {

namespace {

KEEL_LOG_MODULE(log_ssh, "ssh");

uint64_t now_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// Milliseconds from `since` to `now`; 0 when `since` is later (a timestamp
// taken after this round's `now`, e.g. by begin_close: never a wrapped huge
// value that would look like an expired timer).
uint64_t elapsed_ms(uint64_t now, uint64_t since) { return now > since ? now - since : 0; }

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

const char* reason_name(uint32_t r) {
  switch (r) {
    case disconnect::kHostNotAllowedToConnect: return "host not allowed to connect";
    case disconnect::kProtocolError: return "protocol error";
    case disconnect::kKeyExchangeFailed: return "key exchange failed";
    case disconnect::kMacError: return "MAC error";
    case disconnect::kCompressionError: return "compression error";
    case disconnect::kServiceNotAvailable: return "service not available";
    case disconnect::kProtocolVersionNotSupported: return "protocol version not supported";
    case disconnect::kHostKeyNotVerifiable: return "host key not verifiable";
    case disconnect::kConnectionLost: return "connection lost";
    case disconnect::kByApplication: return "by application";
    case disconnect::kTooManyConnections: return "too many connections";
    case disconnect::kAuthCancelledByUser: return "auth cancelled by user";
    case disconnect::kNoMoreAuthMethodsAvailable: return "no more auth methods available";
    case disconnect::kIllegalUserName: return "illegal user name";
    default: return "other";
  }
}

// "a.b.c.d" / "::1" and the port of a peer address.
void describe_peer(const sockaddr_storage& ss, std::string& addr, std::string& peer) {
  char buf[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
    addr = buf;
    peer = addr + ":" + std::to_string(port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
    addr = buf;
    peer = "[" + addr + "]:" + std::to_string(port);
  } else {
    addr = peer = "?";
  }
}

// A bound (not yet listening) TCP socket on listen:port, non-blocking.
Result<int> bind_socket(const std::string& listen, uint16_t port, const std::string& device, uint16_t* bound) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  const std::string where = (listen.find(':') != std::string::npos ? "[" + listen + "]" : listen) + ":" +
                            std::to_string(port) + (device.empty() ? "" : " on " + device);
  if (auto* a4 = reinterpret_cast<sockaddr_in*>(&ss); inet_pton(AF_INET, listen.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
  } else if (auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss); inet_pton(AF_INET6, listen.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
  } else {
    return invalid("ssh: listen address '" + listen + "' is not an IPv4 or IPv6 address");
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return error(Errc::io_error, "ssh: listen " + where + ": " + errno_text(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (!device.empty() &&
      setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, device.c_str(), static_cast<socklen_t>(device.size())) != 0) {
    const int e = errno;
    ::close(fd);
    return error(Errc::io_error, "ssh: listen " + where + ": interface " + device + ": " + errno_text(e));
  }
  if (bind(fd, reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
    const int e = errno;
    ::close(fd);
    return error(e == EADDRINUSE ? Errc::already_exists : Errc::io_error,
                 "ssh: listen " + where + ": " + errno_text(e));
  }
  sockaddr_storage got{};
  socklen_t glen = sizeof got;
  getsockname(fd, reinterpret_cast<sockaddr*>(&got), &glen);
  *bound = ntohs(got.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&got)->sin_port
                                           : reinterpret_cast<sockaddr_in6*>(&got)->sin6_port);
  return fd;
}

}  // namespace

// ---------------------------------------------------------------- Backoff

bool Backoff::failure(const std::string& addr, uint64_t now) {
  if (by_addr_.size() >= kMaxAddresses && !by_addr_.count(addr)) {
    expire(now);
    if (by_addr_.size() >= kMaxAddresses) by_addr_.erase(by_addr_.begin());
  }
  Entry& e = by_addr_[addr];
  const uint64_t window = uint64_t{cfg_.window_s} * 1000;
  e.recent.erase(
      std::remove_if(e.recent.begin(), e.recent.end(), [&](uint64_t t) { return elapsed_ms(now, t) >= window; }),
      e.recent.end());
  e.recent.push_back(now);
  if (e.recent.size() < std::max<uint32_t>(cfg_.failures, 1)) return false;
  e.recent.clear();
  ++e.level;
  uint64_t period = uint64_t{cfg_.initial_s} * 1000;
  for (uint32_t i = 1; i < e.level && period < uint64_t{cfg_.max_s} * 1000; ++i) period *= 2;
  period = std::min<uint64_t>(period, uint64_t{cfg_.max_s} * 1000);
  e.until_ms = std::max(e.until_ms, now + period);
  return true;
}

void Backoff::success(const std::string& addr) { by_addr_.erase(addr); }

uint64_t Backoff::refused_for(const std::string& addr, uint64_t now) const {
  auto it = by_addr_.find(addr);
  if (it == by_addr_.end() || it->second.until_ms <= now) return 0;
  return it->second.until_ms - now;
}

void Backoff::expire(uint64_t now) {
  const uint64_t window = uint64_t{cfg_.window_s} * 1000;
  // An address's penalty level is remembered for max_s after its last
  // back-off ended, so a patient attacker still meets the long delay.
  const uint64_t memory = uint64_t{cfg_.max_s} * 1000;
  for (auto it = by_addr_.begin(); it != by_addr_.end();) {
    const Entry& e = it->second;
    const bool recent = !e.recent.empty() && elapsed_ms(now, e.recent.back()) < window;
    const bool penalised = e.level > 0 && now < e.until_ms + memory;
    it = (recent || penalised) ? std::next(it) : by_addr_.erase(it);
  }
}

// ---------------------------------------------------------------- connections

namespace {

struct Outbox {
  struct Chunk {
    std::string data;
    bool is_stderr;
  };
  std::deque<Chunk> chunks;
  size_t bytes = 0;
  bool exit_pending = false;  // exit() called; exit-status not yet handed to the channel
  size_t acked = 0;           // input the session took (consumed()), not yet told to the channel
  bool exited = false;        // exit() called: write() refuses more
  int exit_status = 0;
};

}  // namespace

struct Server::Conn {
  // Adapter between Channels and the user's ChannelHost: enforces
  // max_sessions and keeps the session outboxes (I/O thread).
  struct Host final : ChannelHost {
    Server* srv = nullptr;
    Conn* conn = nullptr;
    std::unique_ptr<ChannelHost> inner;
    std::set<uint32_t> started;
    std::set<uint32_t> running;  // started and not yet exited: holds a max_sessions slot
    // The session ended (exit() went to the channel) or the channel went:
    // its slot is free for another session.
    void release(uint32_t channel) {
      if (!running.erase(channel)) return;
      std::lock_guard<std::mutex> g(srv->mu_);
      --srv->sessions_;
    }
    bool start(uint32_t channel, bool shell, std::string_view command, const Pty* pty) override {
      {
        std::lock_guard<std::mutex> g(srv->mu_);
        if (srv->sessions_ >= srv->cfg_.max_sessions) {
          ++srv->stats_.sessions_refused;
          KEEL_LOG_RL(log_ssh, warn, 10, 10, "%s: session refused: %zu sessions running (ssh max-sessions)",
                      conn->peer.c_str(), srv->sessions_);
          return false;
        }
        ++srv->sessions_;  // reserved; released below if the host refuses
        conn->outbox[channel];
      }
      const bool ok = inner && inner->start(channel, shell, command, pty);
      std::lock_guard<std::mutex> g(srv->mu_);
      if (!ok) {
        --srv->sessions_;
        conn->outbox.erase(channel);
        ++srv->stats_.sessions_refused;
        return false;
      }
      ++srv->stats_.sessions_started;
      started.insert(channel);
      running.insert(channel);
      return true;
    }
    void input(uint32_t channel, std::string_view data) override {
      if (started.count(channel)) inner->input(channel, data);
    }
    void resize(uint32_t channel, int cols, int rows) override {
      if (started.count(channel)) inner->resize(channel, cols, rows);
    }
    void eof(uint32_t channel) override {
      if (started.count(channel)) inner->eof(channel);
    }
    void closed(uint32_t channel) override {
      if (!started.erase(channel)) return;
      release(channel);
      {
        // The outbox goes first: a session blocked in write() wakes and
        // sees its channel gone before the host is told.
        std::lock_guard<std::mutex> g(srv->mu_);
        conn->outbox.erase(channel);
      }
      srv->outbox_cv_.notify_all();
      inner->closed(channel);
    }
  };

  uint64_t id = 0;
  int fd = -1;
  std::string addr, peer;
  uint64_t created_ms = 0;  // set before the connection is published in conns_
  // Written by the I/O thread, read by connections() (show ssh sessions).
  std::atomic<uint64_t> last_ms{0};
  std::unique_ptr<Transport> tp;
  std::unique_ptr<UserAuth> ua;
  Host host;
  std::unique_ptr<Channels> ch;
  std::string out;             // bytes for the socket
  bool authed = false;
  bool closing = false;        // flush `out`, then close
  uint64_t closing_since = 0;
  bool counted_error = false;
  // Guarded by Server::mu_:
  std::map<uint32_t, Outbox> outbox;
  ConnectionView view;
  bool close_requested = false;
  std::string close_why;
};

Server::Server(ServerConfig cfg) : cfg_(std::move(cfg)) {}

Result<std::unique_ptr<Server>> Server::start(ServerConfig cfg) {
  std::unique_ptr<Server> s(new Server(std::move(cfg)));
  uint16_t bound = 0;
  auto fd = bind_socket(s->cfg_.listen, s->cfg_.port, s->cfg_.device, &bound);
  if (!fd) return std::move(fd).take_status();
  s->listen_fd_ = *fd;
  s->port_ = bound;
  s->random_ = std::make_unique<Random>();
  if (!s->random_->ok()) return error(Errc::internal, "ssh: the random generator could not be seeded");
  s->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->wake_fd_ < 0) return error(Errc::io_error, std::string("ssh: eventfd: ") + errno_text(errno));
  s->io_ = std::thread([p = s.get()] { p->io_main(); });
  return s;
}

Server::~Server() {
  stop();
  close_fd(listen_fd_);
  close_fd(pending_listen_fd_);
  close_fd(wake_fd_);
}

void Server::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  outbox_cv_.notify_all();
  wake();
  if (io_.joinable()) io_.join();
}

void Server::wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

Status Server::relisten(const std::string& listen, uint16_t port, const std::string& device) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (listen == cfg_.listen && device == cfg_.device && (port == cfg_.port && port != 0)) return {};
  }
  // The old socket may hold the very port asked for (a device change):
  // binding beside it works with SO_REUSEADDR unless it listens, so a
  // listening one is closed by the I/O thread first when the port is the same.
  uint16_t bound = 0;
  auto fd = bind_socket(listen, port, device, &bound);
  if (!fd && fd.status().code() == Errc::already_exists && port != 0 && port == bound_port()) {
    // Same port, different address or device: let go of ours, then bind.
    {
      std::unique_lock<std::mutex> lk(mu_);
      release_listener_ = true;
    }
    wake();
    std::unique_lock<std::mutex> lk(mu_);
    outbox_cv_.wait_for(lk, std::chrono::seconds(2), [&] { return !release_listener_ || stopping_; });
    lk.unlock();
    fd = bind_socket(listen, port, device, &bound);
    if (!fd) {
      // Put the old one back where it was.
      uint16_t old_bound = 0;
      std::string old_listen, old_device;
      uint16_t old_port;
      {
        std::lock_guard<std::mutex> g(mu_);
        old_listen = cfg_.listen, old_device = cfg_.device, old_port = port_;
      }
      if (auto back = bind_socket(old_listen, old_port, old_device, &old_bound)) {
        std::lock_guard<std::mutex> g(mu_);
        pending_listen_fd_ = *back;
      }
      wake();
      return std::move(fd).take_status();
    }
  }
  if (!fd) return std::move(fd).take_status();
  {
    std::lock_guard<std::mutex> g(mu_);
    close_fd(pending_listen_fd_);
    pending_listen_fd_ = *fd;
    stats_.listening = false;  // until the I/O thread listens on the new socket
    cfg_.listen = listen;
    cfg_.port = port;
    cfg_.device = device;
    port_ = bound;
  }
  wake();
  KEEL_LOG(log_ssh, info, "listener moved to %s", listen_address().c_str());
  return {};
}

void Server::set_enabled(bool on) {
  {
    std::lock_guard<std::mutex> g(mu_);
    enabled_ = on;
  }
  wake();
}

void Server::set_limits(size_t max_sessions, uint32_t idle_timeout_s) {
  std::lock_guard<std::mutex> g(mu_);
  cfg_.max_sessions = max_sessions;
  cfg_.idle_timeout_s = idle_timeout_s;
}

void Server::set_algorithms(AlgorithmLists a) {
  std::lock_guard<std::mutex> g(mu_);
  cfg_.algorithms = std::move(a);
}

uint16_t Server::bound_port() const {
  std::lock_guard<std::mutex> g(mu_);
  return port_;
}

std::string Server::listen_address() const {
  std::lock_guard<std::mutex> g(mu_);
  const std::string a = cfg_.listen.find(':') != std::string::npos ? "[" + cfg_.listen + "]" : cfg_.listen;
  return a + ":" + std::to_string(port_);
}

std::vector<std::string> Server::host_key_fingerprints() const {
  std::lock_guard<std::mutex> g(mu_);
  return host_keys_ ? host_keys_->fingerprints() : std::vector<std::string>{};
}

std::string Server::host_key_error() const {
  std::lock_guard<std::mutex> g(mu_);
  return key_error_;
}

std::string Server::listen_error() const {
  std::lock_guard<std::mutex> g(mu_);
  return listen_error_;
}

bool Server::write(uint64_t conn, uint32_t channel, std::string_view data, bool is_stderr) {
  std::unique_lock<std::mutex> lk(mu_);
  while (!data.empty()) {
    Outbox* box = nullptr;
    outbox_cv_.wait(lk, [&] {
      box = nullptr;  // a box seen by an earlier check may be gone since (the I/O thread erases it)
      if (stopping_) return true;
      auto c = conns_.find(conn);
      if (c == conns_.end()) return true;
      auto b = c->second->outbox.find(channel);
      if (b == c->second->outbox.end() || b->second.exited) return true;
      box = &b->second;
      return box->bytes < kMaxOutbox;
    });
    if (!box || stopping_) return false;
    const size_t n = std::min(data.size(), kMaxOutbox);
    box->chunks.push_back({std::string(data.substr(0, n)), is_stderr});
    box->bytes += n;
    data.remove_prefix(n);
    lk.unlock();
    wake();
    lk.lock();
  }
  return true;
}

void Server::consumed(uint64_t conn, uint32_t channel, size_t n) {
  if (n == 0) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto c = conns_.find(conn);
    if (c == conns_.end()) return;
    auto b = c->second->outbox.find(channel);
    if (b == c->second->outbox.end()) return;
    b->second.acked += n;
  }
  wake();
}

void Server::exit(uint64_t conn, uint32_t channel, int status) {
  {
    std::lock_guard<std::mutex> g(mu_);
    auto c = conns_.find(conn);
    if (c == conns_.end()) return;
    auto b = c->second->outbox.find(channel);
    if (b == c->second->outbox.end()) return;
    if (b->second.exited) return;
    b->second.exited = b->second.exit_pending = true;
    b->second.exit_status = status;
  }
  wake();
}

void Server::close(uint64_t conn, std::string_view why) {
  {
    std::lock_guard<std::mutex> g(mu_);
    auto c = conns_.find(conn);
    if (c == conns_.end()) return;
    c->second->close_requested = true;
    c->second->close_why = std::string(why);
  }
  wake();
}

ServerStats Server::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

std::vector<ConnectionView> Server::connections() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<ConnectionView> v;
  const uint64_t now = now_ms();
  for (const auto& [id, c] : conns_) {
    ConnectionView cv = c->view;
    cv.idle_s = elapsed_ms(now, c->last_ms) / 1000;
    cv.age_s = elapsed_ms(now, c->created_ms) / 1000;
    v.push_back(std::move(cv));
  }
  return v;
}

// ---------------------------------------------------------------- the I/O thread

void Server::io_main() {
  Backoff backoff({cfg_.backoff_failures, cfg_.backoff_window_s, cfg_.backoff_initial_s, cfg_.backoff_max_s});
  bool listening = false;
  uint64_t last_gate = 0, last_expire = 0;
  std::vector<pollfd> fds;
  std::vector<Conn*> polled;

  auto log_close = [&](Conn& c, uint32_t reason, const std::string& why) {
    {
      std::lock_guard<std::mutex> g(mu_);
      ++stats_.disconnects[reason];
    }
    KEEL_LOG_RL(log_ssh, info, 60, 20, "%s: disconnect (%s): %s", c.peer.c_str(), reason_name(reason), why.c_str());
  };
  // Starts closing: DISCONNECT queued, output flushed for at most 2 s.
  auto begin_close = [&](Conn& c, uint32_t reason, const std::string& why) {
    if (c.closing) return;
    if (!c.tp->closed()) c.tp->disconnect(reason, why);
    c.closing = true;
    c.closing_since = now_ms();
    log_close(c, reason, why);
    std::lock_guard<std::mutex> g(mu_);
    c.view.state = "closing";
  };
  auto protocol_error = [&](Conn& c) {
    if (c.counted_error) return;
    c.counted_error = true;
    std::lock_guard<std::mutex> g(mu_);
    ++stats_.protocol_errors;
  };
  auto unauthenticated = [&]() {
    size_t n = 0;
    for (const auto& [id, c] : conns_)
      if (!c->authed && !c->closing) ++n;
    return n;
  };

  // Runs the state machines above the transport on what it decoded.
  auto dispatch = [&](Conn& c, uint64_t now) {
    std::string payload;
    uint32_t seq = 0;
    std::vector<std::string> replies;
    while (!c.closing && c.tp->poll_message(payload, &seq)) {
      replies.clear();
      const auto type = payload.empty() ? 0 : static_cast<uint8_t>(payload[0]);
      if (!c.authed) {
        if (type < 50 || type >= 80) {
          protocol_error(c);
          begin_close(c, disconnect::kProtocolError, "message " + std::to_string(type) + " before authentication");
          return;
        }
        if (!c.ua) c.ua = std::make_unique<UserAuth>(UserAuthConfig{cfg_.auth, cfg_.max_auth_attempts}, c.tp->session_id());
        std::string user, method;
        if (type == msg::kUserauthRequest) {
          WireReader r(std::string_view(payload).substr(1));
          std::string_view u, s, m;
          if (r.string(u) && r.string(s) && r.string(m)) user = std::string(u.substr(0, 64)), method = std::string(m.substr(0, 32));
        }
        const int before = c.ua->failures();
        const UserAuth::Outcome o = c.ua->handle(payload, replies);
        for (const std::string& p : replies) c.tp->send(p);
        for (int i = before; i < c.ua->failures(); ++i) {
          {
            std::lock_guard<std::mutex> g(mu_);
            ++stats_.auth_failures;
          }
          KEEL_LOG_RL(log_ssh, info, 60, 20, "%s: authentication failed for user '%s' (%s)", c.peer.c_str(),
                      user.c_str(), method.c_str());
          if (backoff.failure(c.addr, now)) {
            KEEL_LOG_RL(log_ssh, warn, 10, 10, "%s: repeated authentication failures: refusing %s for %llu s",
                        c.peer.c_str(), c.addr.c_str(),
                        static_cast<unsigned long long>(backoff.refused_for(c.addr, now) / 1000));
          }
        }
        if (o == UserAuth::Outcome::disconnect) {
          begin_close(c, c.ua->disconnect_reason(), c.ua->disconnect_text());
          return;
        }
        if (o == UserAuth::Outcome::authenticated) {
          c.authed = true;
          backoff.success(c.addr);
          ConnectionInfo info{c.id, c.peer, c.ua->user(), c.ua->method()};
          KEEL_LOG(log_ssh, info, "%s: user %s authenticated (%s)", c.peer.c_str(), info.user.c_str(),
                   info.method.c_str());
          c.host.srv = this;
          c.host.conn = &c;
          c.host.inner = cfg_.make_host ? cfg_.make_host(info) : nullptr;
          ChannelsConfig chc{&c.host, 10};
          // The window opens again only as the session takes its input
          // (Server::consumed), so unread input per channel stays within it.
          chc.input_acks = true;
          c.ch = std::make_unique<Channels>(chc);
          std::lock_guard<std::mutex> g(mu_);
          ++stats_.auth_successes;
          c.view.user = info.user;
          c.view.method = info.method;
          c.view.state = "open";
        }
        continue;
      }
      if (type < 80) continue;  // a user-auth message after success: ignored (RFC 4252 §5.1)
      Status st = c.ch->handle(payload, replies);
      for (const std::string& p : replies) c.tp->send(p);
      if (!st.ok()) {
        if (st.code() == Errc::unsupported) {
          c.tp->unimplemented(seq);
          continue;
        }
        protocol_error(c);
        begin_close(c, disconnect::kProtocolError, st.message());
        return;
      }
    }
  };

  // Moves session output from the outboxes into the channels while the
  // channel's window queue and the socket buffer have room.
  auto pump = [&](Conn& c) {
    if (!c.ch || c.closing) return;
    bool any = false, freed = false;
    for (;;) {
      std::vector<std::pair<uint32_t, Outbox::Chunk>> moved;
      std::vector<std::pair<uint32_t, int>> exits;
      std::vector<std::pair<uint32_t, size_t>> acks;
      {
        std::lock_guard<std::mutex> g(mu_);
        for (auto& [channel, box] : c.outbox) {
          if (box.acked) acks.emplace_back(channel, std::exchange(box.acked, 0));
          // One chunk per channel per pass, while the channel's window
          // queue and the socket's buffer have room.
          if (!box.chunks.empty() && c.ch->pending(channel) < kMaxOutbox &&
              c.out.size() + c.tp->output_size() < kMaxOutput) {
            box.bytes -= box.chunks.front().data.size();
            moved.emplace_back(channel, std::move(box.chunks.front()));
            box.chunks.pop_front();
            freed = true;
          }
          if (box.chunks.empty() && box.exit_pending) {
            exits.emplace_back(channel, box.exit_status);
            box.exit_pending = false;  // sent once; the outbox goes with the channel
          }
        }
      }
      if (moved.empty() && exits.empty() && acks.empty()) break;
      any = true;
      std::vector<std::string> replies;
      for (auto& [channel, n] : acks) c.ch->consumed(channel, n, replies);
      for (auto& [channel, chunk] : moved) c.ch->write(channel, chunk.data, chunk.is_stderr, replies);
      for (auto& [channel, status] : exits) {
        c.ch->exit(channel, status, replies);
        c.host.release(channel);
      }
      for (const std::string& p : replies) c.tp->send(p);
    }
    if (freed) outbox_cv_.notify_all();
    if (any) c.last_ms = now_ms();
  };

  auto teardown = [&](std::map<uint64_t, std::unique_ptr<Conn>>::iterator it) {
    Conn& c = *it->second;
    c.ch.reset();          // the host's closed() for every open channel
    c.host.inner.reset();  // the connection's sessions are told, then gone
    close_fd(c.fd);
    {
      std::lock_guard<std::mutex> g(mu_);
      ++stats_.closed;
      conns_.erase(it);
    }
    outbox_cv_.notify_all();
  };

  for (;;) {
    const uint64_t now = now_ms();
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stopping_) break;
      if (pending_listen_fd_ >= 0) {  // relisten(): the new socket replaces ours
        close_fd(listen_fd_);
        listen_fd_ = std::exchange(pending_listen_fd_, -1);
        listening = false;
        stats_.listening = false;
        last_gate = 0;
      }
      if (release_listener_) {
        close_fd(listen_fd_);
        listening = false;
        release_listener_ = false;
        outbox_cv_.notify_all();
      }
    }
    // The gate: enabled, and (on host-sim) a user exists.
    if (now - last_gate >= kGateCheckMs || last_gate == 0) {
      last_gate = now;
      bool want;
      {
        std::lock_guard<std::mutex> g(mu_);
        want = enabled_ && listen_fd_ >= 0;
      }
      if (want && cfg_.may_listen) want = cfg_.may_listen();
      if (want && !host_keys_) {
        // First time the server is to listen: load (or generate, the
        // first boot: RSA 3072 takes a moment) the host keys. No
        // connection exists yet, so nobody waits for this thread.
        auto keys = cfg_.host_key_dir.empty() ? HostKeys::generate(*random_)
                                              : HostKeys::load_or_generate(cfg_.host_key_dir, *random_);
        std::lock_guard<std::mutex> g(mu_);
        if (keys) {
          host_keys_ = std::move(keys.value());
          key_error_.clear();
        } else if (key_error_.empty()) {
          key_error_ = "ssh: host keys: " + keys.status().message();
          KEEL_LOG(log_ssh, err, "%s; not listening", key_error_.c_str());
        }
        if (!host_keys_) want = false;
      }
      if (want && !listening) {
        if (::listen(listen_fd_, 64) == 0) {
          listening = true;
          {
            std::lock_guard<std::mutex> g(mu_);
            listen_error_.clear();
          }
          KEEL_LOG(log_ssh, info, "listening on %s", listen_address().c_str());
        } else {
          // Another process took the port meanwhile (bound, not listening,
          // sockets may share it): say so once, keep trying every round.
          const std::string why = "listen " + listen_address() + ": " + errno_text(errno);
          std::lock_guard<std::mutex> g(mu_);
          if (listen_error_ != why) {
            listen_error_ = why;
            KEEL_LOG_RL(log_ssh, warn, 5, 5, "%s; SSH is not available until it is free", why.c_str());
          }
        }
      } else if (!want && listening) {
        // Stop accepting but keep the port: a fresh bound socket.
        std::string l, d;
        uint16_t p;
        {
          std::lock_guard<std::mutex> g(mu_);
          l = cfg_.listen, d = cfg_.device, p = port_;
        }
        close_fd(listen_fd_);
        listening = false;
        uint16_t bound = 0;
        if (auto fd = bind_socket(l, p, d, &bound)) {
          std::lock_guard<std::mutex> g(mu_);
          listen_fd_ = *fd;
        } else {
          KEEL_LOG(log_ssh, warn, "%s", fd.status().message().c_str());
        }
        KEEL_LOG(log_ssh, info, "not listening (%s)", enabled_ ? "no user configured" : "disabled");
      }
      std::lock_guard<std::mutex> g(mu_);
      stats_.listening = listening;
    }
    if (now - last_expire >= 10'000) {
      last_expire = now;
      backoff.expire(now);
    }

    // Timers, session output, and the poll set.
    uint32_t grace_s, idle_s;
    {
      std::lock_guard<std::mutex> g(mu_);
      grace_s = cfg_.login_grace_s;
      idle_s = cfg_.idle_timeout_s;
    }
    fds.clear();
    polled.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    // While max_unauthenticated connections are still logging in, new ones
    // wait in the kernel's listen backlog (not refused: a burst of 20
    // clients all get in, a few milliseconds later); a slot frees when one
    // authenticates, fails or times out (login grace).
    const bool room = unauthenticated() < cfg_.max_unauthenticated;
    fds.push_back({listening && room ? listen_fd_ : -1, POLLIN, 0});
    for (auto it = conns_.begin(); it != conns_.end();) {
      Conn& c = *it->second;
      bool close_now = false;
      std::string why;
      {
        std::lock_guard<std::mutex> g(mu_);
        if (c.close_requested && !c.closing) why = c.close_why, c.close_requested = false;
      }
      if (!why.empty()) begin_close(c, disconnect::kByApplication, why);
      if (!c.closing && !c.authed && grace_s && elapsed_ms(now, c.created_ms) >= uint64_t{grace_s} * 1000) {
        {
          std::lock_guard<std::mutex> g(mu_);
          ++stats_.grace_timeouts;
        }
        begin_close(c, disconnect::kByApplication, "not authenticated within " + std::to_string(grace_s) + " s");
      }
      if (!c.closing && c.authed && idle_s && elapsed_ms(now, c.last_ms) >= uint64_t{idle_s} * 1000) {
        {
          std::lock_guard<std::mutex> g(mu_);
          ++stats_.idle_timeouts;
        }
        begin_close(c, disconnect::kByApplication, "idle for " + std::to_string(idle_s) + " s");
      }
      if (!c.closing) {
        c.tp->tick(now);
        pump(c);
      }
      if (c.tp->closed() && !c.closing) {
        c.closing = true;
        c.closing_since = now;
      }
      c.out += c.tp->take_output();
      if (c.closing && (c.out.empty() || elapsed_ms(now, c.closing_since) >= 2000)) close_now = true;
      if (close_now) {
        auto next = std::next(it);
        teardown(it);
        it = next;
        continue;
      }
      short ev = 0;
      if (!c.closing && c.out.size() < kMaxOutput) ev |= POLLIN;  // a client that doesn't read isn't read
      if (!c.out.empty()) ev |= POLLOUT;
      fds.push_back({c.fd, ev, 0});
      polled.push_back(&c);
      ++it;
    }

    int r = poll(fds.data(), fds.size(), 100);
    if (r < 0 && errno != EINTR) {
      KEEL_LOG_RL(log_ssh, err, 5, 5, "poll: %s", errno_text(errno).c_str());
      continue;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      (void)!::read(wake_fd_, &v, sizeof v);
    }
    const uint64_t t = now_ms();

    // New connections.
    if (listening && (fds[1].revents & POLLIN)) {
      for (int i = 0; i < 16 && unauthenticated() < cfg_.max_unauthenticated; ++i) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        std::string addr, peer;
        describe_peer(ss, addr, peer);
        std::lock_guard<std::mutex> g(mu_);
        ++stats_.accepted;
        if (const uint64_t left = backoff.refused_for(addr, t)) {
          ++stats_.refused_backoff;
          KEEL_LOG_RL(log_ssh, warn, 10, 10, "%s: refused: backing off after repeated failures (%llu s left)",
                      peer.c_str(), static_cast<unsigned long long>((left + 999) / 1000));
          ::close(fd);
          continue;
        }
        if (conns_.size() >= cfg_.max_connections) {
          ++stats_.refused_limit;
          KEEL_LOG_RL(log_ssh, warn, 10, 10, "%s: refused: too many connections (%zu open)", peer.c_str(),
                      conns_.size());
          // Before the version exchange DISCONNECT can't be sent; a line of
          // text before the version is allowed (RFC 4253 §4.2).
          static constexpr char kBusy[] = "Too many connections, try again later\r\n";
          (void)!::send(fd, kBusy, sizeof kBusy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
          ::close(fd);
          continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        auto c = std::make_unique<Conn>();
        c->id = next_id_++;
        c->fd = fd;
        c->addr = addr;
        c->peer = peer;
        c->created_ms = t;
        c->last_ms = t;
        TransportConfig tc{cfg_.software, host_keys_.get(), random_.get(), cfg_.rekey_bytes, cfg_.rekey_ms};
        tc.kex = cfg_.algorithms.kex;  // mu_ is held: set_algorithms() may change them
        tc.host_keys_offered = cfg_.algorithms.host_keys;
        tc.ciphers = cfg_.algorithms.ciphers;
        tc.macs = cfg_.algorithms.macs;
        c->tp = std::make_unique<Transport>(std::move(tc));
        c->out = c->tp->take_output();  // our version line
        c->view.id = c->id;
        c->view.peer = peer;
        c->view.state = "kex";
        KEEL_LOG_RL(log_ssh, info, 120, 40, "%s: connected (connection %llu)", peer.c_str(),
                    static_cast<unsigned long long>(c->id));
        conns_.emplace(c->id, std::move(c));
      }
    }

    // Reads and writes.
    for (size_t i = 0; i < polled.size(); ++i) {
      Conn& c = *polled[i];
      const short re = fds[i + 2].revents;
      if (re & POLLOUT && !c.out.empty()) {
        ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (n > 0) c.out.erase(0, static_cast<size_t>(n));
        else if (n < 0 && errno != EAGAIN && errno != EINTR) {
          if (!c.closing) log_close(c, disconnect::kConnectionLost, errno_text(errno));
          c.closing = true;
          c.closing_since = 0;
          c.out.clear();
        }
      }
      if ((re & (POLLIN | POLLHUP | POLLERR)) && !c.closing) {
        char buf[16 * 1024];  // per round: the rest stays in the kernel
        ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          log_close(c, disconnect::kConnectionLost,
                    n == 0 ? "the client closed the connection" : errno_text(errno));
          c.closing = true;
          c.closing_since = 0;
          c.out.clear();
          continue;
        }
        if (n < 0) continue;
        c.last_ms = t;
        Status st = c.tp->feed(std::string_view(buf, static_cast<size_t>(n)), t);
        if (!st.ok()) {
          c.out += c.tp->take_output();
          // The client's own DISCONNECT ends a connection normally; anything
          // else the transport refused is a protocol error (DISCONNECT sent).
          const bool by_client = c.tp->error().rfind("client disconnected", 0) == 0;
          if (by_client) {
            std::lock_guard<std::mutex> g(mu_);
            ++stats_.client_disconnects;
          } else {
            protocol_error(c);
          }
          if (!c.closing) {
            c.closing = true;
            c.closing_since = t;
            if (by_client)
              KEEL_LOG_RL(log_ssh, info, 120, 40, "%s: %s", c.peer.c_str(), c.tp->error().c_str());
            else
              log_close(c, c.tp->disconnect_reason(), c.tp->error().empty() ? st.message() : c.tp->error());
          }
          continue;
        }
        dispatch(c, t);
        if (c.tp->ready() || c.authed) {
          const Transport::Algorithms& a = c.tp->algorithms();
          std::lock_guard<std::mutex> g(mu_);
          if (c.view.kex.empty() && !a.kex.empty()) {
            c.view.kex = a.kex;
            c.view.host_key = a.host_key;
            c.view.cipher = a.cipher_in;
            c.view.mac = a.mac_in;
            c.view.client_version = c.tp->client_version();
            if (!c.authed) c.view.state = "auth";
          }
          c.view.channels = c.ch ? c.ch->open_count() : 0;
        }
        pump(c);
        c.out += c.tp->take_output();
      }
    }
  }

  // Stopping: every connection gets DISCONNECT by application, one try at
  // sending it, and its sessions are told.
  for (auto& [id, c] : conns_) {
    if (!c->closing && !c->tp->closed()) c->tp->disconnect(disconnect::kByApplication, "the server is shutting down");
    c->out += c->tp->take_output();
    if (!c->out.empty()) (void)!::send(c->fd, c->out.data(), c->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  while (!conns_.empty()) teardown(conns_.begin());
  close_fd(listen_fd_);
}

}  // namespace keel::ssh

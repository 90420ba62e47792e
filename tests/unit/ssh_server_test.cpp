// ssh::Server over real TCP sockets with an in-process client
// (ssh_test_client.h): a session runs end to end, and the limits hold --
// unauthenticated connections, login grace time, back-off, garbage, a
// client that never reads, max sessions, several clients at once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <cstdlib>
#include <doctest/doctest.h>
#include <mutex>
#include <optional>
#include <thread>

#include "ssh/server.h"
#include "tests/unit/eventually.h"
#include "tests/unit/ssh_test_client.h"

using namespace keel;
using namespace keel::ssh;
using keel::test::eventually;

namespace {

// One host key directory for the whole run: RSA 3072 is generated once.
const std::string& key_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/keel_ssh_server_test_XXXXXX";
    const char* d = mkdtemp(tmpl);
    REQUIRE(d != nullptr);
    return std::string(d);
  }();
  return dir;
}

struct FakeAuth final : Authenticator {
  std::atomic<int> checks{0};
  bool check_password(std::string_view user, std::string_view password) override {
    ++checks;
    return user == "alice" && password == "pw";
  }
  bool has_key(std::string_view, std::string_view) override { return false; }
};

// Runs each exec command on a thread of its own: "echo X" writes "X";
// "fail" exits 1; "big N" writes N bytes; "hold" waits for release().
struct Sessions {
  std::atomic<Server*> server{nullptr};
  std::mutex mu;
  std::vector<std::thread> threads;
  std::atomic<size_t> big_written{0};
  std::atomic<bool> released{false};
  std::atomic<int> closed{0};

  ~Sessions() { join(); }
  void join() {
    released = true;
    std::lock_guard<std::mutex> g(mu);
    for (auto& t : threads)
      if (t.joinable()) t.join();
    threads.clear();
  }
};

struct FakeHost final : ChannelHost {
  FakeHost(Sessions& s, uint64_t conn) : s_(s), conn_(conn) {}
  bool start(uint32_t channel, bool shell, std::string_view command, const Pty*) override {
    if (shell) return false;
    std::string cmd(command);
    std::lock_guard<std::mutex> g(s_.mu);
    s_.threads.emplace_back([channel, cmd, &s = s_, conn = conn_] {
      Server* srv = s.server.load();
      int status = 0;
      if (cmd.rfind("echo ", 0) == 0) {
        srv->write(conn, channel, cmd.substr(5), false);
      } else if (cmd == "fail") {
        srv->write(conn, channel, "bad\n", true);
        status = 1;
      } else if (cmd.rfind("big ", 0) == 0) {
        const size_t n = std::stoul(cmd.substr(4));
        const std::string chunk(16384, 'x');
        for (size_t done = 0; done < n; done += chunk.size()) {
          if (!srv->write(conn, channel, chunk, false)) break;
          s.big_written += chunk.size();
        }
      } else if (cmd == "hold") {
        while (!s.released) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      srv->exit(conn, channel, status);
    });
    return true;
  }
  void input(uint32_t, std::string_view) override {}
  void resize(uint32_t, int, int) override {}
  void eof(uint32_t) override {}
  void closed(uint32_t) override { ++s_.closed; }
  Sessions& s_;
  uint64_t conn_;
};

struct Fixture {
  FakeAuth auth;
  Sessions sessions;
  std::unique_ptr<Server> server;

  explicit Fixture(ServerConfig cfg = {}) {
    cfg.listen = "127.0.0.1";
    cfg.port = 0;
    cfg.host_key_dir = key_dir();
    cfg.auth = &auth;
    cfg.make_host = [this](const ConnectionInfo& info) { return std::make_unique<FakeHost>(sessions, info.id); };
    auto s = Server::start(std::move(cfg));
    REQUIRE_MESSAGE(s.ok(), s.status().message());
    server = std::move(s.value());
    sessions.server = server.get();
    REQUIRE(eventually([&] { return server->stats().listening; }, std::chrono::seconds(60)));
  }
  ~Fixture() {
    server->stop();  // wakes writers: their write() returns false
    sessions.join();
  }
  uint16_t port() const { return server->bound_port(); }
};

int connect_to(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// True when the server closed fd (EOF or reset) within `ms`; what it sent
// before is appended to *got.
bool closed_by_server(int fd, int ms, std::string* got = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
    if (got) got->append(buf, static_cast<size_t>(n));
  }
}

// The test client over a socket.
struct Client {
  int fd = -1;
  ssh::test::TestClient c;
  bool reading = true;

  explicit Client(uint16_t port, ssh::test::ClientOptions o = {}) : c(std::move(o)) { fd = connect_to(port); }
  ~Client() {
    if (fd >= 0) close(fd);
  }
  bool flush() {
    std::string out = c.take();
    for (std::string_view rest = out; !rest.empty();) {
      ssize_t n = send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      rest.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Runs the exchange until pred() holds; false on timeout, EOF or error.
  template <class Pred>
  bool until(Pred&& pred, int ms = 30000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      if (!flush()) return false;
      if (pred()) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buf[65536];
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return pred();
      if (!c.receive(std::string_view(buf, static_cast<size_t>(n)))) return false;
    }
  }
  bool handshake() {
    c.begin();
    if (!until([&] { return c.kexes >= 1; })) return false;
    c.request_service();
    return until([&] { return c.service_accepted; });
  }
  // The next message of `type` (others before it are dropped).
  std::optional<std::string> next(uint8_t type, int ms = 30000) {
    std::optional<std::string> got;
    until(
        [&] {
          while (!c.messages.empty()) {
            std::string m = std::move(c.messages.front());
            c.messages.pop_front();
            if (static_cast<uint8_t>(m[0]) == type) {
              got = std::move(m);
              return true;
            }
          }
          return c.disconnected;
        },
        ms);
    return got;
  }
  void password(std::string_view user, std::string_view pw) {
    WireWriter w;
    w.u8(msg::kUserauthRequest).string(user).string("ssh-connection").string("password").boolean(false).string(pw);
    c.packet(w.str());
  }
  // 52 (success) or 51 (failure), 0 when disconnected first.
  uint8_t auth_reply() {
    uint8_t got = 0;
    until([&] {
      while (!c.messages.empty()) {
        const auto t = static_cast<uint8_t>(c.messages.front()[0]);
        c.messages.pop_front();
        if (t == msg::kUserauthSuccess || t == msg::kUserauthFailure) {
          got = t;
          return true;
        }
      }
      return c.disconnected;
    });
    return got;
  }
  bool login() {
    if (!handshake()) return false;
    password("alice", "pw");
    return auth_reply() == msg::kUserauthSuccess;
  }
  // Opens a session channel (our id `id`) and asks for exec; returns the
  // server's channel number, or nullopt when refused.
  std::optional<uint32_t> exec(std::string_view command, uint32_t id = 0, uint32_t window = 1u << 20) {
    WireWriter o;
    o.u8(msg::kChannelOpen).string("session").u32(id).u32(window).u32(32768);
    c.packet(o.str());
    auto conf = next(msg::kChannelOpenConfirmation);
    if (!conf) return std::nullopt;
    WireReader r(std::string_view(*conf).substr(1));
    uint32_t mine = 0, theirs = 0;
    r.u32(mine);
    r.u32(theirs);
    peer_of[mine] = theirs;
    WireWriter q;
    q.u8(msg::kChannelRequest).u32(theirs).string("exec").boolean(true).string(command);
    c.packet(q.str());
    std::optional<uint32_t> result;
    until([&] {
      while (!c.messages.empty()) {
        const auto t = static_cast<uint8_t>(c.messages.front()[0]);
        if (t == msg::kChannelSuccess || t == msg::kChannelFailure) {
          c.messages.pop_front();
          if (t == msg::kChannelSuccess) result = theirs;
          return true;
        }
        pending.push_back(std::move(c.messages.front()));
        c.messages.pop_front();
      }
      return c.disconnected;
    });
    return result;
  }
  // Collects channel data until CLOSE; returns stdout, fills err and status.
  std::string collect(std::string* err = nullptr, int* status = nullptr) {
    std::string out;
    bool done = false;
    auto eat = [&](const std::string& m) {
      WireReader r(std::string_view(m).substr(1));
      uint32_t ch = 0;
      r.u32(ch);
      switch (static_cast<uint8_t>(m[0])) {
        case msg::kChannelData: {
          std::string_view d;
          r.string(d);
          out += d;
          break;
        }
        case msg::kChannelExtendedData: {
          uint32_t code = 0;
          std::string_view d;
          r.u32(code);
          r.string(d);
          if (err) *err += d;
          break;
        }
        case msg::kChannelRequest: {
          std::string_view name;
          bool want = false;
          uint32_t st = 0;
          r.string(name);
          r.boolean(want);
          if (name == "exit-status" && r.u32(st) && status) *status = static_cast<int>(st);
          break;
        }
        case msg::kChannelClose: {
          done = true;
          WireWriter w;  // our CLOSE back: the channel is freed
          w.u8(msg::kChannelClose).u32(peer_of[ch]);
          c.packet(w.str());
          break;
        }
      }
    };
    for (auto& m : pending) eat(m);
    pending.clear();
    until([&] {
      while (!c.messages.empty()) {
        eat(c.messages.front());
        c.messages.pop_front();
      }
      return done || c.disconnected;
    });
    flush();  // our CLOSE
    return out;
  }
  std::deque<std::string> pending;
  std::map<uint32_t, uint32_t> peer_of;  // our channel -> the server's
};

}  // namespace

TEST_CASE("backoff: N failures within the window refuse the address, doubling, and a login forgets it") {
  Backoff b({.failures = 3, .window_s = 60, .initial_s = 10, .max_s = 25});
  CHECK_FALSE(b.failure("10.0.0.1", 1000));
  CHECK_FALSE(b.failure("10.0.0.1", 2000));
  CHECK(b.refused_for("10.0.0.1", 2000) == 0);
  CHECK(b.failure("10.0.0.1", 3000));
  CHECK(b.refused_for("10.0.0.1", 3000) == 10'000);
  CHECK(b.refused_for("10.0.0.2", 3000) == 0);  // per address
  CHECK(b.refused_for("10.0.0.1", 13'000) == 0);
  // Failures spread beyond the window don't add up.
  CHECK_FALSE(b.failure("10.0.0.3", 0));
  CHECK_FALSE(b.failure("10.0.0.3", 61'000));
  CHECK_FALSE(b.failure("10.0.0.3", 122'000));
  // The second back-off doubles; the third is capped at max_s.
  for (uint64_t t : {20'000, 21'000}) CHECK_FALSE(b.failure("10.0.0.1", t));
  CHECK(b.failure("10.0.0.1", 22'000));
  CHECK(b.refused_for("10.0.0.1", 22'000) == 20'000);
  for (uint64_t t : {50'000, 51'000}) CHECK_FALSE(b.failure("10.0.0.1", t));
  CHECK(b.failure("10.0.0.1", 52'000));
  CHECK(b.refused_for("10.0.0.1", 52'000) == 25'000);
  b.success("10.0.0.1");
  CHECK(b.refused_for("10.0.0.1", 52'000) == 0);
  // Entries with nothing to remember expire.
  b.expire(10'000'000);
  CHECK(b.size() == 0);
}

TEST_CASE("a client logs in with a password and runs exec sessions: output, stderr, exit status, then CLOSE") {
  Fixture f;
  Client cl(f.port());
  REQUIRE(cl.login());
  auto ch = cl.exec("echo hello");
  REQUIRE(ch);
  int status = -1;
  std::string err;
  CHECK(cl.collect(&err, &status) == "hello");
  CHECK(status == 0);
  CHECK(err.empty());
  // A second channel on the same connection.
  REQUIRE(cl.exec("fail", 1));
  status = -1;
  CHECK(cl.collect(&err, &status).empty());
  CHECK(err == "bad\n");
  CHECK(status == 1);
  const ServerStats st = f.server->stats();
  CHECK(st.auth_successes == 1);
  CHECK(st.sessions_started == 2);
  auto conns = f.server->connections();
  REQUIRE(conns.size() == 1);
  CHECK(conns[0].user == "alice");
  CHECK(conns[0].method == "password");
  CHECK(conns[0].state == "open");
  CHECK(conns[0].cipher == "chacha20-poly1305@openssh.com");
  CHECK(conns[0].kex == "curve25519-sha256");
  CHECK(f.server->host_key_fingerprints().size() == 2);
}

TEST_CASE("beyond max_unauthenticated a new connection waits until a login slot frees; authenticated ones don't count") {
  ServerConfig cfg;
  cfg.max_unauthenticated = 2;
  Fixture f(cfg);
  Client authed(f.port());
  REQUIRE(authed.login());
  int a = connect_to(f.port()), b = connect_to(f.port());
  REQUIRE(eventually([&] { return f.server->connections().size() == 3; }, std::chrono::seconds(10)));
  Client waiting(f.port());  // in the listen backlog: not accepted while a and b log in
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(f.server->stats().accepted == 3);
  // The authenticated client is still served meanwhile.
  REQUIRE(authed.exec("echo still here"));
  CHECK(authed.collect() == "still here");
  close(a);  // a slot frees: the waiting client gets in and logs in
  REQUIRE(waiting.login());
  CHECK(f.server->stats().accepted == 4);
  CHECK(f.server->stats().refused_limit == 0);
  close(b);
}

TEST_CASE("beyond max_connections a new connection is refused with a line") {
  ServerConfig cfg;
  cfg.max_connections = 2;
  Fixture f(cfg);
  Client x(f.port()), y(f.port());
  REQUIRE(x.login());
  REQUIRE(y.login());
  int c = connect_to(f.port());
  std::string got;
  CHECK(closed_by_server(c, 10000, &got));
  CHECK(got.find("Too many connections") != std::string::npos);
  CHECK(f.server->stats().refused_limit == 1);
  close(c);
}

TEST_CASE("a connection not authenticated within the login grace time is closed; others go on") {
  ServerConfig cfg;
  cfg.login_grace_s = 1;
  Fixture f(cfg);
  int silent = connect_to(f.port());
  (void)!send(silent, "SSH-2.0-slow\r\n", 14, MSG_NOSIGNAL);
  Client half(f.port());
  REQUIRE(half.handshake());  // keys agreed, but never authenticates
  CHECK(closed_by_server(silent, 15000));
  CHECK(half.until([&] { return half.c.disconnected; }, 15000));
  CHECK(half.c.disconnect_reason == disconnect::kByApplication);
  CHECK(f.server->stats().grace_timeouts == 2);
  close(silent);
}

TEST_CASE("garbage is a protocol error for that connection only") {
  Fixture f;
  Client good(f.port());
  REQUIRE(good.login());
  for (int i = 0; i < 5; ++i) {
    int g = connect_to(f.port());
    std::string junk = "SSH-2.0-junk\r\n";
    for (int k = 0; k < 2000; ++k) junk += static_cast<char>(rand() & 0xff);
    (void)!send(g, junk.data(), junk.size(), MSG_NOSIGNAL);
    CHECK(closed_by_server(g, 10000));
    close(g);
  }
  CHECK(f.server->stats().protocol_errors >= 5);
  REQUIRE(good.exec("echo fine"));
  CHECK(good.collect() == "fine");
}

TEST_CASE("repeated failed logins from one address back off that address; a refused connection is counted") {
  ServerConfig cfg;
  cfg.backoff_failures = 2;
  cfg.backoff_initial_s = 30;
  Fixture f(cfg);
  Client bad(f.port());
  REQUIRE(bad.handshake());
  bad.password("alice", "wrong");
  CHECK(bad.auth_reply() == msg::kUserauthFailure);
  bad.password("mallory", "pw");
  CHECK(bad.auth_reply() == msg::kUserauthFailure);
  CHECK(f.server->stats().auth_failures == 2);
  int again = connect_to(f.port());
  CHECK(closed_by_server(again, 10000));
  close(again);
  CHECK(eventually([&] { return f.server->stats().refused_backoff == 1; }, std::chrono::seconds(10)));
}

TEST_CASE("after max_auth_attempts failures the connection is disconnected (no more auth methods)") {
  Fixture f;
  Client bad(f.port());
  REQUIRE(bad.handshake());
  for (int i = 0; i < 3; ++i) bad.password("alice", "nope");
  CHECK(bad.until([&] { return bad.c.disconnected; }));
  CHECK(bad.c.disconnect_reason == disconnect::kNoMoreAuthMethodsAvailable);
}

TEST_CASE("a client that never reads stalls only its own session, bounded; other clients are served") {
  Fixture f;
  Client sink(f.port());
  REQUIRE(sink.login());
  REQUIRE(sink.exec("big 100000000", 0, 0xffffffffu));  // a huge window: only the socket holds it back
  // The writer is held back: the socket buffers, kMaxOutput and the outbox
  // are all the server keeps; it stops well short of 100 MB.
  const auto settle = [&] {
    size_t last = 0;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const size_t now = f.sessions.big_written.load();
      if (now == last) return now;
      last = now;
    }
  };
  const size_t written = settle();
  CHECK(written < 16u * 1024 * 1024);
  Client other(f.port());
  REQUIRE(other.login());
  REQUIRE(other.exec("echo served"));
  CHECK(other.collect() == "served");
  // Closing the stalled client releases its writer (write() returns false).
  close(sink.fd);
  sink.fd = -1;
  CHECK(eventually([&] { return f.sessions.closed.load() >= 1; }, std::chrono::seconds(10)));
}

TEST_CASE("max_sessions bounds running sessions across connections; a freed slot is usable again") {
  ServerConfig cfg;
  cfg.max_sessions = 1;
  Fixture f(cfg);
  Client a(f.port()), b(f.port());
  REQUIRE(a.login());
  REQUIRE(b.login());
  REQUIRE(a.exec("hold"));
  CHECK_FALSE(b.exec("echo no room"));
  CHECK(f.server->stats().sessions_refused == 1);
  f.sessions.released = true;
  a.collect();
  CHECK(eventually([&] { return f.sessions.closed.load() >= 1; }, std::chrono::seconds(10)));
  REQUIRE(b.exec("echo room", 1));
  CHECK(b.collect() == "room");
}

TEST_CASE("several clients at once, each with its own sessions") {
  Fixture f;
  constexpr int kClients = 6;
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kClients; ++i)
    ts.emplace_back([&, i] {
      Client cl(f.port());
      if (!cl.login()) return;
      for (uint32_t k = 0; k < 3; ++k) {
        const std::string word = "c" + std::to_string(i) + "-" + std::to_string(k);
        if (!cl.exec("echo " + word, k)) return;
        if (cl.collect() != word) return;
      }
      ++ok;
    });
  for (auto& t : ts) t.join();
  CHECK(ok == kClients);
  CHECK(f.server->stats().sessions_started == kClients * 3);
}

TEST_CASE("stop() disconnects every client by application and ends its sessions") {
  Fixture f;
  Client a(f.port());
  REQUIRE(a.login());
  REQUIRE(a.exec("hold"));
  f.server->stop();
  CHECK(a.until([&] { return a.c.disconnected; }, 10000));
  CHECK(a.c.disconnect_reason == disconnect::kByApplication);
  CHECK(f.sessions.closed.load() == 1);
}

TEST_CASE("relisten moves the listener; the open connection keeps running") {
  Fixture f;
  Client a(f.port());
  REQUIRE(a.login());
  const uint16_t old_port = f.port();
  REQUIRE(f.server->relisten("127.0.0.1", 0, "").ok());
  CHECK(eventually([&] { return f.port() != old_port && f.server->stats().listening; }, std::chrono::seconds(10)));
  Client b(f.port());
  REQUIRE(b.login());
  REQUIRE(a.exec("echo old"));
  CHECK(a.collect() == "old");
  // A port in use is an error, and the listener stays where it was.
  const uint16_t now_port = f.port();
  int busy = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(busy, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(listen(busy, 1) == 0);
  socklen_t len = sizeof sa;
  getsockname(busy, reinterpret_cast<sockaddr*>(&sa), &len);
  Status st = f.server->relisten("127.0.0.1", ntohs(sa.sin_port), "");
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("Address already in use") != std::string::npos);
  CHECK(f.port() == now_port);
  Client c(f.port());
  CHECK(c.login());
  close(busy);
}

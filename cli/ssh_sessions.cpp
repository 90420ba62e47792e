// SSH sessions: the ChannelHost over session threads, the Authenticator over
// control::Users, and SshService (ssh_sessions.h has the design).
#include "cli/ssh_sessions.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <list>
#include <map>
#include <thread>
#include <tuple>

#include "cli/config.h"
#include "cli/console.h"
#include "cli/line_editor.h"
#include "cli/line_reader.h"
#include "control/users.h"
#include "core/log.h"
#include "core/version.h"
#include "ssh/server.h"

namespace keel::cli {

namespace {

KEEL_LOG_MODULE(log_sshs, "ssh");

ssh::AlgorithmLists ssh_algorithm_lists(const control::SshSettings& s) {
  return {s.kex_algorithms, s.host_key_algorithms, s.ciphers, s.macs};
}

// Runs one line with stdout captured; the error (if any) separately.
// The user's role is looked up again for every line: a role changed (or a
// user removed) by an admin applies to the sessions already open.
Status ssh_run_captured(CommandTree& tree, const std::string& line, std::string& out) {
  out.clear();
  control::Session& who = tree.session();
  const std::optional<control::Role> role = tree.impl().sys.users().role(who.user);
  if (!role) return error(Errc::permission_denied, "user '" + who.user + "' no longer exists");
  who.role = *role;
  char* text = nullptr;
  size_t size = 0;
  FILE* mem = open_memstream(&text, &size);
  if (!mem) return error(Errc::resource_exhausted, "out of memory");
  Status st = tree.execute(line, mem);
  fclose(mem);
  out.assign(text, size);
  free(text);
  return st;
}

// What the serial console shows first (firmware/main.cpp prints the same).
std::string ssh_banner(control::System& sys) {
  char banner[256];
  snprintf(banner, sizeof banner, "keel %s on %s: %zu ports, %zu PMD threads. Type 'help' for the commands.\n",
           kVersion, std::string(sys.board().name).c_str(), sys.port_names().size(),
           sys.datapath().pmds().size());
  return banner;
}

}  // namespace

// ---------------------------------------------------------------- Authenticator

struct SshService::Auth final : ssh::Authenticator {
  explicit Auth(control::Users& u) : users(u) {}
  bool check_password(std::string_view user, std::string_view password) override {
    return users.verify(user, password);
  }
  bool has_key(std::string_view user, std::string_view key_blob) override { return users.has_key(user, key_blob); }
  control::Users& users;
};

// ---------------------------------------------------------------- sessions

// One running exec/shell channel: its thread and what the I/O thread hands it.
struct SshSession {
  uint64_t conn = 0;
  uint32_t channel = 0;
  bool shell = false;
  std::string command;
  bool has_pty = false;
  ssh::Pty pty;
  ssh::ConnectionInfo info;

  std::mutex mu;
  std::condition_variable cv;
  // Guarded by mu:
  std::string input;
  bool eof = false;     // the client sent EOF
  bool closed = false;  // the channel is gone: stop
  bool resized = false;
  int cols = 80, rows = 24;

  std::thread thread;
  std::atomic<bool> finished{false};
};

struct SshService::Sessions {
  Sessions(control::System& s) : sys(s) {}
  control::System& sys;
  std::atomic<ssh::Server*> server{nullptr};
  std::atomic<control::ConfigStore*> store{nullptr};
  std::mutex mu;
  std::list<std::shared_ptr<SshSession>> all;  // guarded by mu; joined by reap()/join_all()

  void reap() {
    std::list<std::shared_ptr<SshSession>> done;
    {
      std::lock_guard<std::mutex> g(mu);
      for (auto it = all.begin(); it != all.end();) {
        if ((*it)->finished.load(std::memory_order_acquire)) {
          done.push_back(std::move(*it));
          it = all.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& s : done)
      if (s->thread.joinable()) s->thread.join();
  }
  void join_all() {
    std::list<std::shared_ptr<SshSession>> v;
    {
      std::lock_guard<std::mutex> g(mu);
      v.swap(all);
    }
    for (auto& s : v) {
      {
        std::lock_guard<std::mutex> g(s->mu);
        s->closed = true;
      }
      s->cv.notify_all();
      if (s->thread.joinable()) s->thread.join();
    }
  }

  void run(SshSession& s);
  int run_exec(SshSession& s, CommandTree& tree);
  int run_shell_pty(SshSession& s, CommandTree& tree);
  int run_shell_lines(SshSession& s, CommandTree& tree);
  bool out(SshSession& s, std::string_view data, bool is_stderr) {
    ssh::Server* srv = server.load();
    return srv && !data.empty() ? srv->write(s.conn, s.channel, data, is_stderr) : srv != nullptr;
  }
  // Waits for input (or EOF/close/resize) for at most 200 ms; returns what came.
  // false: the channel is gone. The input is not acknowledged: the caller
  // says with ack() how much it has dealt with.
  bool wait_input(SshSession& s, std::string& in, bool& eof, bool& resized, int& cols, int& rows) {
    std::unique_lock<std::mutex> lk(s.mu);
    s.cv.wait_for(lk, std::chrono::milliseconds(200),
                  [&] { return s.closed || s.eof || s.resized || !s.input.empty(); });
    if (s.closed) return false;
    in = std::exchange(s.input, {});
    eof = s.eof;
    resized = std::exchange(s.resized, false);
    cols = s.cols, rows = s.rows;
    return true;
  }
  // The session dealt with `n` more bytes of its input: the client's window
  // opens by as much. Never called with s.mu held (the server takes its own
  // lock: never both at once).
  void ack(SshSession& s, size_t n) {
    if (n == 0) return;
    if (ssh::Server* srv = server.load()) srv->consumed(s.conn, s.channel, n);
  }
};

namespace {

// The ChannelHost of one authenticated connection (I/O thread).
class SshConnHost final : public ssh::ChannelHost {
 public:
  SshConnHost(std::shared_ptr<SshService::Sessions> ss, ssh::ConnectionInfo info)
      : ss_(std::move(ss)), info_(std::move(info)) {}
  ~SshConnHost() override {
    for (auto& [ch, s] : live_) stop(*s);
  }

  bool start(uint32_t channel, bool shell, std::string_view command, const ssh::Pty* pty) override {
    ss_->reap();
    auto s = std::make_shared<SshSession>();
    s->conn = info_.id;
    s->channel = channel;
    s->shell = shell;
    s->command = std::string(command);
    s->info = info_;
    if (pty) {
      // 0 is "unknown" (ssh -tt without a terminal of its own): 80x24.
      s->has_pty = true;
      s->pty = *pty;
      s->cols = pty->cols > 0 ? pty->cols : 80;
      s->rows = pty->rows > 0 ? pty->rows : 24;
    }
    live_[channel] = s;
    SshService::Sessions* ss = ss_.get();
    {
      std::lock_guard<std::mutex> g(ss->mu);
      ss->all.push_back(s);
    }
    s->thread = std::thread([ss, s] {
      ss->run(*s);
      s->finished.store(true, std::memory_order_release);
    });
    return true;
  }
  void input(uint32_t channel, std::string_view data) override {
    if (auto* s = find(channel)) {
      {
        std::lock_guard<std::mutex> g(s->mu);
        // Bounded: the channel window (2 MiB, reopened only by Server::consumed) bounds what a client may send
        // unread; a line-mode session acknowledges input as its lines run, a pty session as it takes it.
        s->input.append(data);
      }
      s->cv.notify_all();
    }
  }
  void resize(uint32_t channel, int cols, int rows) override {
    if (auto* s = find(channel)) {
      {
        std::lock_guard<std::mutex> g(s->mu);
        s->cols = cols > 0 ? cols : 80, s->rows = rows > 0 ? rows : 24, s->resized = true;
      }
      s->cv.notify_all();
    }
  }
  void eof(uint32_t channel) override {
    if (auto* s = find(channel)) {
      {
        std::lock_guard<std::mutex> g(s->mu);
        s->eof = true;
      }
      s->cv.notify_all();
    }
  }
  void closed(uint32_t channel) override {
    auto it = live_.find(channel);
    if (it == live_.end()) return;
    stop(*it->second);  // never joins here: the thread may be inside a command
    live_.erase(it);
  }

 private:
  static void stop(SshSession& s) {
    {
      std::lock_guard<std::mutex> g(s.mu);
      s.closed = true;
    }
    s.cv.notify_all();
  }
  SshSession* find(uint32_t ch) {
    auto it = live_.find(ch);
    return it == live_.end() ? nullptr : it->second.get();
  }
  std::shared_ptr<SshService::Sessions> ss_;
  ssh::ConnectionInfo info_;
  std::map<uint32_t, std::shared_ptr<SshSession>> live_;
};

}  // namespace

void SshService::Sessions::run(SshSession& s) {
  // The role as it is now; a user removed since the login has none.
  const std::optional<control::Role> role = sys.users().role(s.info.user);
  if (!role) {
    out(s, "error: user '" + s.info.user + "' no longer exists\n", true);
    if (ssh::Server* srv = server.load()) srv->exit(s.conn, s.channel, 1);
    return;
  }
  control::Session who;
  who.origin = control::Origin::ssh;
  who.user = s.info.user;
  who.role = *role;
  who.peer = s.info.peer;
  who.rows = s.has_pty ? s.rows : 0;
  who.cols = s.cols;
  CommandTree tree(sys, std::move(who));
  if (control::ConfigStore* st = store.load()) cli::set_config_store(tree, st);
  int status = 0;
  if (!s.shell) status = run_exec(s, tree);
  else if (s.has_pty) status = run_shell_pty(s, tree);
  else status = run_shell_lines(s, tree);
  if (ssh::Server* srv = server.load()) srv->exit(s.conn, s.channel, status);
}

int SshService::Sessions::run_exec(SshSession& s, CommandTree& tree) {
  std::string text;
  Status st = ssh_run_captured(tree, s.command, text);
  out(s, text, false);
  if (st.ok()) return 0;
  out(s, "error: " + st.message() + "\n", true);
  return 1;
}

int SshService::Sessions::run_shell_pty(SshSession& s, CommandTree& tree) {
  TerminalSettings term;
  term.length = s.rows;
  term.width = s.cols;
  LineEditor ed = make_session_editor(tree, term);
  ed.write(ssh_banner(sys));
  bool alive = out(s, ed.take_output(), false);
  while (alive && !tree.quit_requested()) {
    LineEditor::Event ev = ed.step();
    alive = out(s, ed.take_output(), false);
    if (!alive || ev == LineEditor::Event::eof) break;
    if (ev == LineEditor::Event::line) {
      std::string text;
      Status st = ssh_run_captured(tree, ed.line_text(), text);
      if (!st.ok()) text += "error: " + st.message() + "\n";
      ed.set_height(term.length);
      ed.set_width(term.width);
      if (tree.quit_requested()) ed.set_height(0);  // the last output: nobody will page it
      ed.write(text);
      alive = out(s, ed.take_output(), false);
      continue;
    }
    std::string in;
    bool eof = false, resized = false;
    int cols = 0, rows = 0;
    if (!wait_input(s, in, eof, resized, cols, rows)) return 0;
    ack(s, in.size());  // typed input: the editor takes it all
    if (resized) {
      tree.session().rows = rows;
      tree.session().cols = cols;
      term.length = rows;
      term.width = cols;
      ed.set_height(rows);
      ed.set_width(cols);
    }
    if (!in.empty()) ed.feed(in);
    else if (eof) break;  // the client closed its side and everything typed was run
  }
  tree.attach_terminal(nullptr);
  return 0;
}

int SshService::Sessions::run_shell_lines(SshSession& s, CommandTree& tree) {
  // Input is acknowledged as its lines run (in batches of kAckBatch, and
  // all of it before waiting for more), so what the session holds unread
  // stays within the channel's window: a client piping a large file
  // waits for the commands, the session never buffers the file.
  constexpr size_t kMaxLine = 4096;
  constexpr uint64_t kAckBatch = 64 * 1024;
  LineReader reader(kMaxLine);
  uint64_t acked = 0;
  auto ack_done = [&](uint64_t batch) {
    if (reader.consumed() - acked < batch) return;
    ack(s, static_cast<size_t>(reader.consumed() - acked));
    acked = reader.consumed();
  };
  int status = 0;
  std::string line, text;
  bool eof = false;
  for (;;) {
    LineReader::Got got = reader.next(line);
    if (got == LineReader::Got::none && eof) got = reader.finish(line);
    if (got == LineReader::Got::too_long) {
      out(s, "error: line longer than " + std::to_string(kMaxLine) + " bytes ignored\n", true);
      status = 1;
      continue;
    }
    if (got == LineReader::Got::line) {
      Status st = ssh_run_captured(tree, line, text);
      if (!out(s, text, false)) return status;
      if (!st.ok()) {
        status = 1;
        out(s, "error: " + st.message() + "\n", true);
      }
      if (tree.quit_requested()) return status;
      ack_done(kAckBatch);
      continue;
    }
    if (eof) return status;  // every line run
    ack_done(1);
    std::string in;
    bool resized = false;
    int cols = 0, rows = 0;
    if (!wait_input(s, in, eof, resized, cols, rows)) return status;
    reader.feed(in);
  }
}

// ---------------------------------------------------------------- SshService

SshService::SshService(control::System& sys, std::string config_dir)
    : sys_(sys), config_dir_(std::move(config_dir)), sessions_(std::make_shared<Sessions>(sys)),
      auth_(std::make_unique<Auth>(sys.users())) {}

SshService::~SshService() { stop(); }

void SshService::set_config_store(control::ConfigStore* store) { sessions_->store.store(store); }

void SshService::stop() {
  std::unique_ptr<ssh::Server> srv;
  {
    std::lock_guard<std::mutex> g(mu_);
    srv = std::move(server_);
  }
  if (srv) srv->stop();  // every channel closed: the sessions see it
  sessions_->join_all();
  sessions_->server.store(nullptr);
  srv.reset();
}

Status SshService::apply(const control::SshSettings& s) {
  std::lock_guard<std::mutex> g(mu_);
  if (!s.enabled && !server_) {
    enabled_ = false;
    failure_.clear();
    return {};
  }
  if (!server_) {
    ssh::ServerConfig cfg;
    cfg.listen = s.listen;
    cfg.port = s.port;
    cfg.device = s.device;
    cfg.host_key_dir = config_dir_;
    cfg.software = std::string("keel_") + kVersion;
    cfg.max_sessions = s.max_sessions;
    cfg.idle_timeout_s = s.idle_timeout_s;
    cfg.algorithms = ssh_algorithm_lists(s);
    cfg.auth = auth_.get();
    std::weak_ptr<Sessions> weak = sessions_;
    cfg.make_host = [weak](const ssh::ConnectionInfo& info) -> std::unique_ptr<ssh::ChannelHost> {
      auto ss = weak.lock();
      if (!ss) return nullptr;
      return std::make_unique<SshConnHost>(ss, info);
    };
    if (s.needs_user) {
      control::Users* users = &sys_.users();
      cfg.may_listen = [users] { return !users->empty(); };
    }
    auto srv = ssh::Server::start(std::move(cfg));
    if (!srv) {
      failure_ = srv.status().message();
      return srv.status();
    }
    server_ = std::move(srv.value());
    sessions_->server.store(server_.get());
    server_->set_enabled(s.enabled);
    enabled_ = s.enabled;
    failure_.clear();
    listener_ = {s.listen, s.port, s.device};
    return {};
  }
  // Only an address, port or device change moves the listener: with port 0
  // ("any free port") a relisten would pick another port on every change
  // of another setting.
  if (std::tie(s.listen, s.port, s.device) != std::tie(listener_.listen, listener_.port, listener_.device)) {
    if (Status st = server_->relisten(s.listen, s.port, s.device); !st.ok()) return st;
    listener_ = {s.listen, s.port, s.device};
  }
  server_->set_limits(s.max_sessions, s.idle_timeout_s);
  server_->set_algorithms(ssh_algorithm_lists(s));
  server_->set_enabled(s.enabled);
  enabled_ = s.enabled;
  return {};
}

std::string SshService::state() const {
  std::lock_guard<std::mutex> g(mu_);
  if (!server_) return enabled_ || !failure_.empty() ? "not running (" + failure_ + ")" : "disabled";
  if (!enabled_) return "disabled";
  if (server_->stats().listening) return "listening";
  if (std::string e = server_->host_key_error(); !e.empty()) return "not running (" + e + ")";
  if (std::string e = server_->listen_error(); !e.empty()) return "not listening (" + e + ")";
  if (sys_.users().empty()) return "waiting for a user";
  return "starting";
}

const ssh::Server* SshService::server() const {
  std::lock_guard<std::mutex> g(mu_);
  return server_.get();
}

std::vector<std::string> SshService::host_key_fingerprints() const {
  std::lock_guard<std::mutex> g(mu_);
  return server_ ? server_->host_key_fingerprints() : std::vector<std::string>{};
}

}  // namespace keel::cli

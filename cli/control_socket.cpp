// The local control socket for `keel --exec` (control_socket.h).
#include "cli/control_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "cli/console.h"

namespace keel::cli {

namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

Result<sockaddr_un> unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path)
    return invalid("control socket path '" + path + "' is empty or longer than " +
                   std::to_string(sizeof a.sun_path - 1) + " bytes");
  memcpy(a.sun_path, path.data(), path.size());
  return a;
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool printable_line(std::string_view line) {
  for (char c : line)
    if (!(c == '\t' || (c >= 0x20 && c < 0x7f))) return false;
  return true;
}

// Runs `line` with its output and error captured.
int run_line(CommandTree& tree, const std::string& line, std::string& out, std::string& err) {
  auto words = tokenize(line);
  if (words && !words->empty() && ((*words)[0] == "exit" || (*words)[0] == "quit")) {
    err = "error: '" + (*words)[0] + "' ends a console session; over --exec it would shut keel down (send SIGTERM for that)\n";
    return 1;
  }
  char* text = nullptr;
  size_t size = 0;
  FILE* mem = open_memstream(&text, &size);
  if (!mem) {
    err = "error: out of memory\n";
    return 1;
  }
  // `keel --exec` is the local operator's (whoever can reach the socket in
  // the config directory started keel): Origin::socket, admin, whatever the
  // console session it borrows the tree of is logged in as.
  control::Session saved = tree.session();
  control::Session& s = tree.session();
  s.origin = control::Origin::socket;
  s.user.clear();
  s.role = control::Role::admin;
  s.peer = "keel --exec";
  Status st = tree.execute(line, mem);
  tree.session() = std::move(saved);
  fclose(mem);
  out.assign(text, size);
  free(text);
  if (st.ok()) return 0;
  err = "error: " + st.message() + "\n";
  return 1;
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

std::string control_socket_path(const std::string& config_dir) { return config_dir + "/keel.sock"; }

Result<std::unique_ptr<ControlSocket>> ControlSocket::listen(const std::string& path) {
  auto addr = unix_address(path);
  if (!addr) return std::move(addr).take_status();
  auto fail = [&](const std::string& why) { return error(Errc::io_error, "control socket " + path + ": " + why); };

  const std::string dir = dir_of(path);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return fail("mkdir " + dir + ": " + strerror(errno));

  // Someone there already? A live keel answers connect; a stale socket (a
  // crashed keel) refuses it and is replaced. Anything else is left alone.
  if (struct stat st {}; lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return fail("exists and is not a socket");
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return fail(strerror(errno));
    int r = connect(probe, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr);
    int e = errno;
    close(probe);
    if (r == 0) return error(Errc::already_exists, "another keel is listening on " + path);
    if (e != ECONNREFUSED) return fail(strerror(e));
    unlink(path.c_str());
  }

  std::unique_ptr<ControlSocket> s(new ControlSocket());
  s->path_ = path;
  s->listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->listen_fd_ < 0) return fail(strerror(errno));
  // Mode 0600 from the start: the umask covers bind's window, chmod makes
  // it exact whatever the umask was.
  mode_t old_mask = umask(0177);
  int r = bind(s->listen_fd_, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr);
  int e = errno;
  umask(old_mask);
  if (r != 0) return fail(strerror(e));
  struct stat st {};
  if (chmod(path.c_str(), 0600) != 0 || stat(path.c_str(), &st) != 0 || ::listen(s->listen_fd_, 8) != 0) {
    e = errno;
    unlink(path.c_str());
    return fail(strerror(e));
  }
  s->dev_ = st.st_dev;
  s->ino_ = st.st_ino;
  int wake[2], stop[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return fail(strerror(errno));
  s->wake_r_ = wake[0], s->wake_w_ = wake[1];
  if (pipe2(stop, O_CLOEXEC | O_NONBLOCK) != 0) return fail(strerror(errno));
  s->stop_r_ = stop[0], s->stop_w_ = stop[1];
  s->io_ = std::thread([p = s.get()] { p->io_main(); });
  return s;
}

ControlSocket::~ControlSocket() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (stop_w_ >= 0) (void)!write(stop_w_, "x", 1);
  if (io_.joinable()) io_.join();
  // Remove the socket only if it is still ours (not a newer keel's).
  if (struct stat st {}; !path_.empty() && stat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_)
    unlink(path_.c_str());
  close_fd(listen_fd_);
  close_fd(wake_r_);
  close_fd(wake_w_);
  close_fd(stop_r_);
  close_fd(stop_w_);
}

bool ControlSocket::wait_fd(int fd, short events, int timeout_ms) {
  pollfd p[2] = {{fd, events, 0}, {stop_r_, POLLIN, 0}};
  int r;
  do r = poll(p, 2, timeout_ms);
  while (r < 0 && errno == EINTR);
  if (r <= 0 || (p[1].revents & POLLIN)) return false;
  return (p[0].revents & (events | POLLHUP | POLLERR)) != 0;
}

void ControlSocket::io_main() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_r_, POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents & POLLIN) return;
    if (!(p[0].revents & POLLIN)) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;  // the client went away, or out of fds: try the next
    handle(fd);
    close(fd);
    std::lock_guard<std::mutex> g(mu_);
    if (stopping_) return;
  }
}

void ControlSocket::handle(int fd) {
  // 1. The line, bounded in size and time.
  const auto read_deadline = Clock::now() + std::chrono::milliseconds(kExecReadTimeoutMs);
  std::string buf;
  std::string reject;  // non-empty: answer this error instead of running
  for (;;) {
    size_t nl = buf.find('\n');
    if (nl != std::string::npos) {
      buf.resize(nl);
      if (!buf.empty() && buf.back() == '\r') buf.pop_back();
      break;
    }
    if (buf.size() > kMaxExecLine) {
      reject = "error: line longer than " + std::to_string(kMaxExecLine) + " bytes ignored\n";
      break;
    }
    if (!wait_fd(fd, POLLIN, ms_left(read_deadline))) {
      reject = "error: no complete command line within " + std::to_string(kExecReadTimeoutMs / 1000) + " s\n";
      break;
    }
    char chunk[1024];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;  // gone mid-line: run nothing
    buf.append(chunk, static_cast<size_t>(n));
  }
  if (reject.empty() && buf.size() > kMaxExecLine)
    reject = "error: line longer than " + std::to_string(kMaxExecLine) + " bytes ignored\n";
  if (reject.empty() && !printable_line(buf)) reject = "error: the line has control or non-ASCII bytes\n";

  // 2. The control thread runs it.
  int status = 1;
  std::string out, err = reject;
  if (reject.empty()) {
    std::unique_lock<std::mutex> lk(mu_);
    if (stopping_) return;
    line_ = std::move(buf);
    pending_ = true;
    answered_ = false;
    lk.unlock();
    (void)!write(wake_w_, "r", 1);
    lk.lock();
    cv_.wait(lk, [this] { return answered_ || stopping_; });
    if (!answered_) return;  // shutting down: the client sees EOF
    status = status_;
    out = std::move(out_);
    err = std::move(err_);
    answered_ = false;
  }

  // 3. The answer, bounded in time.
  std::string msg = "KEEL/1 " + std::to_string(status) + " " + std::to_string(out.size()) + " " +
                    std::to_string(err.size()) + "\n" + out + err;
  const auto write_deadline = Clock::now() + std::chrono::milliseconds(kExecWriteTimeoutMs);
  std::string_view rest = msg;
  while (!rest.empty()) {
    ssize_t n = send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n > 0) {
      rest.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN) && wait_fd(fd, POLLOUT, ms_left(write_deadline))) continue;
    return;  // gone, or too slow to read its answer
  }
  // Closing with unread input (a refused over-long line) would reset the
  // connection and lose the answer: end our side, then drain briefly.
  shutdown(fd, SHUT_WR);
  const auto drain_deadline = Clock::now() + std::chrono::milliseconds(200);
  for (size_t drained = 0; drained < 1024 * 1024 && wait_fd(fd, POLLIN, ms_left(drain_deadline));) {
    char chunk[4096];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
}

void ControlSocket::serve(CommandTree& tree) {
  char drain[64];
  while (read(wake_r_, drain, sizeof drain) > 0) {
  }
  std::string line;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!pending_) return;
    pending_ = false;
    line = std::move(line_);
  }
  std::string out, err;
  int status = run_line(tree, line, out, err);
  {
    std::lock_guard<std::mutex> g(mu_);
    status_ = status;
    out_ = std::move(out);
    err_ = std::move(err);
    answered_ = true;
  }
  cv_.notify_all();
}

int exec_remote(const std::string& path, const std::string& line, FILE* out, FILE* err) {
  auto no_keel = [&](const std::string& why) {
    fprintf(err, "keel: error: --exec: %s\n", why.c_str());
    return 2;
  };
  if (line.find('\n') != std::string::npos || line.find('\r') != std::string::npos)
    return no_keel("one command line, without newlines");
  if (line.size() > kMaxExecLine) return no_keel("command longer than " + std::to_string(kMaxExecLine) + " bytes");
  auto addr = unix_address(path);
  if (!addr) return no_keel(addr.status().message());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return no_keel(strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  if (connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0) {
    int e = errno;
    if (e == ENOENT || e == ECONNREFUSED)
      return no_keel("no keel is running with this config directory (nothing listens on " + path + ")");
    return no_keel(path + ": " + strerror(e));
  }
  timeval tv{kExecClientTimeoutS, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string req = line + "\n";
  for (std::string_view rest = req; !rest.empty();) {
    ssize_t n = send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return no_keel(std::string("sending the command: ") + strerror(errno));
    rest.remove_prefix(static_cast<size_t>(n));
  }
  std::string resp;
  for (;;) {
    char chunk[4096];
    ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return no_keel("no answer from keel in " + std::to_string(kExecClientTimeoutS) + " s");
    if (n < 0) return no_keel(std::string("reading the answer: ") + strerror(errno));
    if (n == 0) break;
    resp.append(chunk, static_cast<size_t>(n));
  }
  int status = -1;
  size_t out_n = 0, err_n = 0;
  const size_t nl = resp.find('\n');
  const size_t used = nl == std::string::npos ? 0 : nl + 1;
  if (nl == std::string::npos || nl > 64 ||
      sscanf(resp.substr(0, nl).c_str(), "KEEL/1 %d %zu %zu", &status, &out_n, &err_n) != 3 ||
      (status != 0 && status != 1) || resp.size() - used != out_n + err_n)
    return no_keel(resp.empty() ? "keel closed the connection without an answer (shutting down?)"
                                : "malformed answer from keel");
  fwrite(resp.data() + used, 1, out_n, out);
  fwrite(resp.data() + used + out_n, 1, err_n, err);
  fflush(out);
  fflush(err);
  return status;
}

}  // namespace keel::cli

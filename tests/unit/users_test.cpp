// Password hashes (firmware/ssh/password.h), the user store
// (firmware/control/users.h), the user commands and their running-config
// lines, and the --exec control socket in-process (cli/control_socket.h).
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <cstdio>
#include <string>
#include <thread>

#include "cli/config.h"
#include "cli/console.h"
#include "cli/control_socket.h"
#include "control/system.h"
#include "control/users.h"
#include "ssh/password.h"

using namespace keel;

namespace {

std::string run(cli::CommandTree& tree, const std::string& line, Status* st = nullptr) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  Status s = tree.execute(line, out);
  fclose(out);
  std::string text(buf, len);
  free(buf);
  if (st) *st = s;
  else CHECK_MESSAGE(s.ok(), s.message());
  return text;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> v;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) v.push_back(s.substr(start, i - start)), start = i + 1;
  return v;
}

bool lower_hex(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

TEST_CASE("password hash: stored form pbkdf2-sha256$ITER$SALT_HEX$HASH_HEX") {
  auto h = ssh::hash_password("s3cret pass");
  REQUIRE_MESSAGE(h.ok(), h.status().message());
  auto f = split(*h, '$');
  REQUIRE(f.size() == 4);
  CHECK(f[0] == "pbkdf2-sha256");
  CHECK(std::stoul(f[1]) >= 10000);
  CHECK(f[2].size() == 32);
  CHECK(f[3].size() == 64);
  CHECK(lower_hex(f[2]));
  CHECK(lower_hex(f[3]));
  CHECK(h->find("s3cret") == std::string::npos);
  CHECK(ssh::check_stored_hash(*h).ok());

  // A fresh salt each time: the same password never gives the same line.
  auto h2 = ssh::hash_password("s3cret pass");
  REQUIRE(h2.ok());
  CHECK(*h2 != *h);
  CHECK(split(*h2, '$')[2] != f[2]);
}

TEST_CASE("password verify: right, wrong, and tampered hashes") {
  auto h = ssh::hash_password("correct horse");
  REQUIRE(h.ok());
  CHECK(ssh::verify_password("correct horse", *h));
  CHECK_FALSE(ssh::verify_password("correct hors", *h));
  CHECK_FALSE(ssh::verify_password("correct horse ", *h));
  CHECK_FALSE(ssh::verify_password("", *h));

  // Flip one hex digit of the hash, then of the salt: no longer verifies.
  auto flip = [](std::string s, size_t pos) {
    s[pos] = s[pos] == '0' ? '1' : '0';
    return s;
  };
  const size_t hash_at = h->rfind('$') + 1;
  const size_t salt_at = h->rfind('$', hash_at - 2) + 1;
  CHECK_FALSE(ssh::verify_password("correct horse", flip(*h, hash_at + 5)));
  CHECK_FALSE(ssh::verify_password("correct horse", flip(*h, salt_at + 3)));
  // Another iteration count is another key.
  auto f = split(*h, '$');
  std::string other_iter = f[0] + "$" + std::to_string(std::stoul(f[1]) + 1) + "$" + f[2] + "$" + f[3];
  CHECK(ssh::check_stored_hash(other_iter).ok());
  CHECK_FALSE(ssh::verify_password("correct horse", other_iter));

  // Malformed stored forms are refused with a reason, and never verify.
  for (std::string bad : {std::string(""), std::string("plain"), "sha1$20000$" + f[2] + "$" + f[3],
                          f[0] + "$100$" + f[2] + "$" + f[3],           // too few iterations
                          f[0] + "$99999999999$" + f[2] + "$" + f[3],   // too many
                          f[0] + "$20000$" + f[2].substr(2) + "$" + f[3],  // short salt
                          f[0] + "$20000$" + f[2] + "$" + f[3] + "00",     // long hash
                          f[0] + "$20000$" + f[2] + "$" + std::string(64, 'G'),
                          *h + "$x"}) {
    CAPTURE(bad);
    CHECK_FALSE(ssh::check_stored_hash(bad).ok());
    CHECK_FALSE(ssh::verify_password("correct horse", bad));
  }
  CHECK_FALSE(ssh::hash_password("").ok());
  CHECK_FALSE(ssh::hash_password(std::string(ssh::kMaxPasswordBytes + 1, 'x')).ok());
}

TEST_CASE("user store: add, replace, remove, verify, list") {
  control::Users u;
  CHECK(u.empty());
  REQUIRE(u.set_password("admin", "pw1").ok());
  REQUIRE(u.set_password("bob", "pw2").ok());
  CHECK(u.names() == std::vector<std::string>{"admin", "bob"});
  CHECK(u.verify("admin", "pw1"));
  CHECK_FALSE(u.verify("admin", "pw2"));
  CHECK_FALSE(u.verify("nobody", "pw1"));
  REQUIRE(u.set_password("admin", "new").ok());  // replace
  CHECK(u.verify("admin", "new"));
  CHECK_FALSE(u.verify("admin", "pw1"));
  CHECK(u.list().at(0).hash.rfind("pbkdf2-sha256$", 0) == 0);

  const std::string bob_hash = u.list().at(1).hash;
  control::Users v;
  REQUIRE(v.set_hash("bob", bob_hash).ok());
  CHECK(v.verify("bob", "pw2"));
  CHECK_FALSE(v.set_hash("eve", "pbkdf2-sha256$20000$zz$00").ok());
  CHECK(v.names() == std::vector<std::string>{"bob"});

  CHECK(u.remove("bob").ok());
  CHECK(u.remove("bob").code() == Errc::not_found);
  CHECK(u.names() == std::vector<std::string>{"admin"});
  for (const char* bad : {"", "Admin", "9lives", "a b", "x;rm", "averyveryveryverylongusername_over32"})
    CHECK_FALSE(u.set_password(bad, "pw").ok());
}

TEST_CASE("username commands: hash stored, running config round trip, show users") {
  auto sys = control::System::boot({});
  REQUIRE(sys.ok());
  cli::CommandTree tree(**sys);
  run(tree, "username admin password 'two words'");
  run(tree, "username op password x");
  Status st;
  run(tree, "username Bad password x", &st);
  CHECK_FALSE(st.ok());
  run(tree, "username op secret nonsense", &st);
  CHECK_FALSE(st.ok());
  CHECK((**sys).users().verify("op", "x"));  // the refused secret changed nothing

  const std::string rc = cli::running_config(tree);
  CHECK(rc.find("two words") == std::string::npos);
  CHECK(rc.find("username admin secret pbkdf2-sha256$") != std::string::npos);
  CHECK(rc.find("username op secret pbkdf2-sha256$") != std::string::npos);
  CHECK(rc.find("username admin") < rc.find("username op"));

  // Round trip: a fresh tree from the running config has the same users,
  // and the same running config.
  auto sys2 = control::System::boot({});
  REQUIRE(sys2.ok());
  cli::CommandTree tree2(**sys2);
  REQUIRE(cli::apply_config(tree2, rc, "rc", stdout).ok());
  CHECK(cli::running_config(tree2) == rc);
  CHECK((**sys2).users().verify("admin", "two words"));

  CHECK(run(tree2, "show users --format json") == "{\"login_required\":true,\"users\":[\"admin\",\"op\"]}\n");
  CHECK(run(tree2, "show users").find("admin") != std::string::npos);
  run(tree2, "no username admin");
  run(tree2, "no username admin", &st);
  CHECK(st.code() == Errc::not_found);
  run(tree2, "no username op");
  CHECK(run(tree2, "show users --format json") == "{\"login_required\":false,\"users\":[]}\n");

  // configure replace semantics: reset drops every user.
  cli::reset_config(tree);
  CHECK((**sys).users().empty());
}

TEST_CASE("control socket: a request runs on the serving thread; garbage and hangups are harmless") {
  auto sys = control::System::boot({});
  REQUIRE(sys.ok());
  cli::CommandTree tree(**sys);
  char tmpl[] = "/tmp/keel-users-test-XXXXXX";
  REQUIRE(mkdtemp(tmpl));
  const std::string path = cli::control_socket_path(tmpl);
  auto sock = cli::ControlSocket::listen(path);
  REQUIRE_MESSAGE(sock.ok(), sock.status().message());
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // A second listener on the same path is refused: the first is alive.
  CHECK(cli::ControlSocket::listen(path).status().code() == Errc::already_exists);

  // The "control thread": serves until told to stop.
  std::atomic<bool> stop{false};
  std::thread control([&] {
    while (!stop) {
      pollfd p{(*sock)->wake_fd(), POLLIN, 0};
      if (poll(&p, 1, 50) > 0) (*sock)->serve(tree);
    }
  });

  auto raw = [&](const std::string& bytes, bool close_early) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, path.c_str(), path.size());
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    (void)!write(fd, bytes.data(), bytes.size());
    std::string got;
    if (!close_early) {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return got;
  };
  CHECK(raw("show users\n", false).rfind("KEEL/1 0 ", 0) == 0);
  CHECK(raw("username x password y\n", false).rfind("KEEL/1 0 0 0\n", 0) == 0);
  CHECK((**sys).users().verify("x", "y"));
  CHECK(raw("frobnicate\n", false).find("unknown command 'frobnicate'") != std::string::npos);
  CHECK(raw(std::string("show\x01\xff ports\n"), false).find("control or non-ASCII") != std::string::npos);
  CHECK(raw(std::string(5000, 'a') + "\n", false).find("longer than 4096") != std::string::npos);
  CHECK(raw("exit\n", false).rfind("KEEL/1 1 ", 0) == 0);
  CHECK_FALSE(tree.quit_requested());
  raw("show po", true);  // disconnects mid-line: nothing runs, nothing breaks
  std::string got = raw("show ports --format json\n", false);
  CHECK(got.find("\"ports\"") != std::string::npos);

  // The client side.
  FILE* out = tmpfile();
  FILE* err = tmpfile();
  CHECK(cli::exec_remote(path, "show users --format json", out, err) == 0);
  CHECK(cli::exec_remote(path, "no username nobody", out, err) == 1);
  CHECK(cli::exec_remote(std::string(tmpl) + "/none.sock", "show users", out, err) == 2);
  fclose(out);
  fclose(err);

  stop = true;
  control.join();
  sock->reset();
  CHECK(access(path.c_str(), F_OK) != 0);  // removed on shutdown
  rmdir(tmpl);
}

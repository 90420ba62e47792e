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

  CHECK(run(tree2, "show users --format json") ==
        "{\"login_required\":true,\"users\":[{\"name\":\"admin\",\"role\":\"admin\",\"password\":true,\"keys\":0},"
        "{\"name\":\"op\",\"role\":\"admin\",\"password\":true,\"keys\":0}],\"keys\":[]}\n");
  CHECK(run(tree2, "show users").find("admin") != std::string::npos);
  run(tree2, "no username admin");
  run(tree2, "no username admin", &st);
  CHECK(st.code() == Errc::not_found);
  run(tree2, "no username op");
  CHECK(run(tree2, "show users --format json") == "{\"login_required\":false,\"users\":[],\"keys\":[]}\n");

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

namespace {
constexpr const char* kEcdsaLine =
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBNnBCJYai0RJVLExuJx3TFvjh1m0Ar8Ks0hGNfOMoZ1V/"
    "2g6S1ynSVJ7lwWnNuQQc5dFYy5WFBNIbMZO7E1c71s= alice@laptop";
constexpr const char* kEcdsaBlob64 =
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBNnBCJYai0RJVLExuJx3TFvjh1m0Ar8Ks0hGNfOMoZ1V/"
    "2g6S1ynSVJ7lwWnNuQQc5dFYy5WFBNIbMZO7E1c71s=";
constexpr const char* kRsaLine =
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCp8f9ZpTpp+yEg4eOy1vXgvy/M+YGb/e7Sfs6lSF9a8JbyNKGfVPcDwekizFxZeAtFtgneuHXur37CPOyJA8VeqH2R2ZnVqbU880YHVWO47Y+Ks3ZWEmoE0UCa/"
    "T7EVosyguYhGTWDJJOgRxQhaSIvgGOkYjeP0oso+zWU0EmO2yMWqvn6YM1uvdWWzs01DRfMo0rCDTLmykIod1t17IilBOZ+/"
    "7bvXNvmgS49C7twaW4YHXnozL7oLGC+7sHGFUb0aDPX1vHa/49bGuKnoz3EWB+NJVMgak12A7cUlAXkxL4S9Px4B+5O8WTwWQ9NqbBoGLZB1Hh2iWSmU4kiWvi1 ops key";
constexpr const char* kEd25519Line =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBPiP2kAh4fMvTgrluuMvc6IyYSPslqtoycDnaA79UdJ root@vm";
}  // namespace

TEST_CASE("users: roles and ssh keys, in the store and through the commands") {
  control::Users u;
  CHECK_FALSE(u.role("alice").has_value());
  REQUIRE(u.set_role("alice", control::Role::read_only).ok());  // a user with no password
  CHECK(u.role("alice") == control::Role::read_only);
  CHECK_FALSE(u.verify("alice", ""));  // no password: no password login
  REQUIRE(u.add_key("alice", kEcdsaLine).ok());
  REQUIRE(u.add_key("alice", kEcdsaLine).ok());  // the same key twice is one
  REQUIRE(u.list().at(0).keys.size() == 1);
  const std::string blob = u.list().at(0).keys[0].blob;
  CHECK(u.has_key("alice", blob));
  CHECK_FALSE(u.has_key("bob", blob));
  CHECK(u.list().at(0).keys[0].blob_base64() == kEcdsaBlob64);
  CHECK(u.list().at(0).keys[0].fingerprint() == "SHA256:lvcHAiormL1cNVkDk90Sxj4/KIOcYIh7tBnz/FHBXMU");  // ssh-keygen -lf
  Status st = u.add_key("alice", kEd25519Line);
  CHECK(st.message().find("ssh-ed25519 keys are not supported") != std::string::npos);
  CHECK_FALSE(u.add_key("alice", "ssh-rsa AAAA garbage").ok());
  CHECK(u.list().at(0).keys.size() == 1);  // refusals changed nothing
  CHECK(u.remove_key("alice", "AAAAnope").code() == Errc::not_found);
  CHECK(u.remove_key("alice", kEcdsaBlob64).ok());
  CHECK_FALSE(u.has_key("alice", blob));
  CHECK(u.set_password("bob", "pw").ok());
  CHECK(u.role("bob") == control::Role::admin);  // the default: configs from before roles keep their meaning

  auto sys = control::System::boot({});
  REQUIRE(sys.ok());
  cli::CommandTree tree(**sys);
  run(tree, "username ops role operator", &st);
  REQUIRE(st.ok());
  run(tree, std::string("username ops ssh-key ") + kRsaLine, &st);
  REQUIRE_MESSAGE(st.ok(), st.message());
  run(tree, std::string("username ops ssh-key ") + kEcdsaLine, &st);
  REQUIRE(st.ok());
  run(tree, "username ops role boss", &st);
  CHECK(st.message() == "username ops role: 'boss' is not admin, operator or read-only");
  run(tree, std::string("username ops ssh-key ") + kEd25519Line, &st);
  CHECK_FALSE(st.ok());
  run(tree, "username admin password pw", &st);
  REQUIRE(st.ok());
  const std::string rc = cli::running_config(tree);
  // admin: secret only (role admin is the default); ops: role, then each key.
  CHECK(rc.find("username admin role") == std::string::npos);
  CHECK(rc.find("username ops secret") == std::string::npos);
  CHECK(rc.find("username ops role operator\nusername ops ssh-key ssh-rsa AAAAB3NzaC1yc2E") != std::string::npos);
  CHECK(rc.find(std::string("username ops ssh-key ") + kEcdsaLine + "\n") != std::string::npos);
  CHECK(rc.find("username admin secret") < rc.find("username ops role"));

  auto sys2 = control::System::boot({});
  REQUIRE(sys2.ok());
  cli::CommandTree tree2(**sys2);
  REQUIRE(cli::apply_config(tree2, rc, "rc", stdout).ok());
  CHECK(cli::running_config(tree2) == rc);
  CHECK((**sys2).users().role("ops") == control::Role::operator_);

  const std::string text = run(tree2, "show users");
  CHECK(text.find("ops    operator  no        2") != std::string::npos);
  CHECK(text.find("SHA256:uJmMaKPtfVluHTuLgBO7TwxIhCRxhZbrjpEqhIcSqYw") != std::string::npos);
  const std::string json = run(tree2, "show users --format json");
  CHECK(json.find("{\"name\":\"ops\",\"role\":\"operator\",\"password\":false,\"keys\":2}") != std::string::npos);
  CHECK(json.find("{\"user\":\"ops\",\"type\":\"ssh-rsa\",\"bits\":2048,"
                  "\"fingerprint\":\"SHA256:uJmMaKPtfVluHTuLgBO7TwxIhCRxhZbrjpEqhIcSqYw\",\"comment\":\"ops key\"}") !=
        std::string::npos);

  run(tree2, std::string("no username ops ssh-key ") + kEcdsaBlob64, &st);
  CHECK(st.ok());
  run(tree2, std::string("no username ops ssh-key ") + kEcdsaBlob64, &st);
  CHECK(st.code() == Errc::not_found);
  CHECK((**sys2).users().list().at(1).keys.size() == 1);
  run(tree2, "no username ops ssh-key", &st);
  CHECK_FALSE(st.ok());
  CHECK((**sys2).users().size() == 2);  // nothing removed by the bad line
}

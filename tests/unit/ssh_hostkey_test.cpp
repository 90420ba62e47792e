// Host keys (firmware/ssh/hostkey.h): generated once into the config
// directory (PEM, 0600), the same keys after a reload, never replaced when a
// file does not parse or is damaged, refused when group or others may read
// it, fingerprints and public keys as OpenSSH's own
// ssh-keygen computes them from our files, and signature blobs of the
// right shape for each algorithm.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ssh/hostkey.h"
#include "ssh/wire.h"

using namespace keel::ssh;

namespace {

std::string make_tmpdir() {
  char tmpl[] = "/tmp/keel_hostkey_XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

bool have_ssh_keygen() { return access("/usr/bin/ssh-keygen", X_OK) == 0; }

// The keys are expensive (RSA 3072): one directory for the whole file.
struct Shared {
  std::string dir = make_tmpdir();
  Random rnd;
  std::unique_ptr<HostKeys> keys;
  Shared() {
    auto k = HostKeys::load_or_generate(dir, rnd);
    REQUIRE_MESSAGE(k.ok(), k.status().message());
    keys = std::move(k.value());
  }
};
Shared& shared() {
  static Shared s;
  return s;
}

}  // namespace

TEST_CASE("missing host keys are generated 0600 and loaded unchanged next time") {
  Shared& s = shared();
  for (const char* f : {"ssh_host_ecdsa_key", "ssh_host_rsa_key"}) {
    struct stat st {};
    REQUIRE(stat((s.dir + "/" + f).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(access((s.dir + "/" + f + ".tmp").c_str(), F_OK) != 0);
  }
  CHECK(slurp(s.dir + "/ssh_host_ecdsa_key").find("-----BEGIN EC PRIVATE KEY-----") == 0);
  CHECK(slurp(s.dir + "/ssh_host_rsa_key").find("-----BEGIN RSA PRIVATE KEY-----") == 0);
  auto again = HostKeys::load_or_generate(s.dir, s.rnd);
  REQUIRE(again.ok());
  CHECK(again.value()->fingerprints() == s.keys->fingerprints());
  CHECK(again.value()->public_blob("ecdsa-sha2-nistp256") == s.keys->public_blob("ecdsa-sha2-nistp256"));
  CHECK(again.value()->public_blob("rsa-sha2-512") == s.keys->public_blob("rsa-sha2-256"));
  CHECK(s.keys->algorithms() ==
        std::vector<std::string>{"ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256"});
  const auto fp = s.keys->fingerprints();
  REQUIRE(fp.size() == 2);
  CHECK(fp[0].rfind("256 SHA256:", 0) == 0);
  CHECK(fp[0].size() == std::string("256 SHA256:").size() + 43 + std::string(" (ECDSA)").size());
  CHECK(fp[1].rfind("3072 SHA256:", 0) == 0);
  CHECK(fp[1].find(" (RSA)") != std::string::npos);
}

TEST_CASE("ssh-keygen reads our key files and agrees on public keys and fingerprints") {
  if (!have_ssh_keygen()) {
    MESSAGE("ssh-keygen not installed: skipped");
    return;
  }
  Shared& s = shared();
  const auto lines = s.keys->public_key_lines();
  const auto fps = s.keys->fingerprints();
  const char* files[] = {"ssh_host_ecdsa_key", "ssh_host_rsa_key"};
  for (int i = 0; i < 2; ++i) {
    CAPTURE(files[i]);
    const std::string path = s.dir + "/" + files[i];
    // ssh-keygen -y: the public key derived by OpenSSH from our PEM.
    CHECK(run("ssh-keygen -y -f '" + path + "' 2>&1") == lines[i]);
    const std::string pub = s.dir + "/pub" + std::to_string(i);
    std::ofstream(pub) << lines[i] << " keel\n";
    const std::string lf = run("ssh-keygen -lf '" + pub + "' 2>&1");  // "256 SHA256:... keel (ECDSA)"
    const std::string want = fps[i];
    const size_t sp = want.rfind(' ');
    CHECK(lf == want.substr(0, sp) + " keel" + want.substr(sp));
  }
}

TEST_CASE("a host key file that does not parse is an error naming it, and is left alone") {
  Random rnd;
  const std::string dir = make_tmpdir();
  {
    std::ofstream(dir + "/ssh_host_ecdsa_key")
        << "-----BEGIN EC PRIVATE KEY-----\ngarbage\n-----END EC PRIVATE KEY-----\n";
  }
  REQUIRE(chmod((dir + "/ssh_host_ecdsa_key").c_str(), 0600) == 0);
  auto k = HostKeys::load_or_generate(dir, rnd);
  REQUIRE_FALSE(k.ok());
  CHECK(k.status().message().find(dir + "/ssh_host_ecdsa_key") != std::string::npos);
  CHECK(slurp(dir + "/ssh_host_ecdsa_key").find("garbage") != std::string::npos);
  CHECK(access((dir + "/ssh_host_rsa_key").c_str(), F_OK) != 0);  // nothing half-done after the error

  // The wrong type of key in a file: an error too (copy the shared RSA key as the ECDSA one).
  const std::string dir2 = make_tmpdir();
  { std::ofstream(dir2 + "/ssh_host_ecdsa_key") << slurp(shared().dir + "/ssh_host_rsa_key"); }
  REQUIRE(chmod((dir2 + "/ssh_host_ecdsa_key").c_str(), 0600) == 0);
  auto k2 = HostKeys::load_or_generate(dir2, rnd);
  REQUIRE_FALSE(k2.ok());
  CHECK(k2.status().message().find("not an ECDSA P-256 key") != std::string::npos);

  // A directory that cannot be made.
  auto k3 = HostKeys::load_or_generate("/proc/keel-no-such/dir", rnd);
  CHECK_FALSE(k3.ok());
}

TEST_CASE("a host key file group or others may read or write is refused, named with its mode, left alone") {
  Random rnd;
  const std::string dir = make_tmpdir();
  for (const char* f : {"ssh_host_ecdsa_key", "ssh_host_rsa_key"}) {
    std::ofstream(dir + "/" + f) << slurp(shared().dir + "/" + f);
    REQUIRE(chmod((dir + "/" + f).c_str(), 0600) == 0);
  }
  REQUIRE(HostKeys::load_or_generate(dir, rnd).ok());
  for (const char* f : {"ssh_host_ecdsa_key", "ssh_host_rsa_key"}) {
    for (mode_t mode : {0644, 0640, 0604, 0620, 0602}) {
      CAPTURE(f);
      CAPTURE(mode);
      const std::string path = dir + "/" + f;
      REQUIRE(chmod(path.c_str(), mode) == 0);
      auto k = HostKeys::load_or_generate(dir, rnd);
      REQUIRE_FALSE(k.ok());
      char want[32];
      std::snprintf(want, sizeof want, "permissions %04o", static_cast<unsigned>(mode));
      CHECK(k.status().message().find(path) != std::string::npos);
      CHECK(k.status().message().find(want) != std::string::npos);
      CHECK(k.status().message().find("too open") != std::string::npos);
      struct stat st {};
      REQUIRE(stat(path.c_str(), &st) == 0);
      CHECK((st.st_mode & 0777) == mode);  // not chmodded behind the operator's back
      CHECK(slurp(path) == slurp(shared().dir + "/" + f));
      REQUIRE(chmod(path.c_str(), 0600) == 0);
    }
  }
  // 0400 (read-only for the owner) is fine; the same keys as before.
  REQUIRE(chmod((dir + "/ssh_host_rsa_key").c_str(), 0400) == 0);
  auto k = HostKeys::load_or_generate(dir, rnd);
  REQUIRE_MESSAGE(k.ok(), k.status().message());
  CHECK(k.value()->fingerprints() == shared().keys->fingerprints());
}

TEST_CASE("a damaged host key that still parses is an error naming it, not a key that can't sign") {
  // fuzz_ssh_keys's reproducer: an RSA 2048 key with one flipped bit in its
  // prime q (after the target's mode byte). mbedTLS parses it; its
  // signatures would all fail.
  const auto repro = std::filesystem::path(__FILE__).parent_path() / ".." / "fuzz" / "corpus" / "ssh_keys" /
                     "hostkey_rsa_bit_flipped_q";
  const std::string damaged = slurp(repro.string()).substr(1);
  REQUIRE(damaged.find("-----BEGIN RSA PRIVATE KEY-----") == 0);
  Random rnd;
  const std::string dir = make_tmpdir();
  { std::ofstream(dir + "/ssh_host_ecdsa_key") << slurp(shared().dir + "/ssh_host_ecdsa_key"); }
  { std::ofstream(dir + "/ssh_host_rsa_key") << damaged; }
  for (const char* f : {"ssh_host_ecdsa_key", "ssh_host_rsa_key"}) REQUIRE(chmod((dir + "/" + f).c_str(), 0600) == 0);
  auto k = HostKeys::load_or_generate(dir, rnd);
  REQUIRE_FALSE(k.ok());
  CHECK(k.status().message().find(dir + "/ssh_host_rsa_key") != std::string::npos);
  CHECK(k.status().message().find("do not make a key pair") != std::string::npos);
  CHECK(slurp(dir + "/ssh_host_rsa_key") == damaged);  // left alone
}

TEST_CASE("signature blobs: string algorithm, string signature") {
  Shared& s = shared();
  for (const char* alg : {"ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256"}) {
    CAPTURE(alg);
    auto sig = s.keys->sign(alg, "exchange hash", s.rnd);
    REQUIRE(sig.ok());
    WireReader r(sig.value());
    std::string_view name, blob;
    REQUIRE(r.string(name));
    REQUIRE(r.string(blob));
    CHECK(r.done());
    CHECK(name == alg);
    if (name == "ecdsa-sha2-nistp256") {
      WireReader e(blob);
      std::string_view rr, ss;
      CHECK(e.mpint(rr));
      CHECK(e.mpint(ss));
      CHECK(e.done());
      CHECK(rr.size() <= 32);
    } else {
      CHECK(blob.size() == 384);  // RSA 3072
    }
  }
  CHECK_FALSE(s.keys->sign("ssh-rsa", "x", s.rnd).ok());  // never SHA-1
  CHECK_FALSE(s.keys->sign("ssh-dss", "x", s.rnd).ok());
  CHECK(s.keys->public_blob("ssh-ed25519").empty());
}

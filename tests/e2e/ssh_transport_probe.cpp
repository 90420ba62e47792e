// ssh_transport_probe: a tiny TCP server driving keel's SSH Transport alone,
// for interop tests with real clients (tests/e2e/test_ssh_transport.py,
// ssh-audit). After the transport is ready it answers every
// USERAUTH_REQUEST with USERAUTH_FAILURE "publickey,password", so `ssh -v`
// gets as far as "Authentications that can continue" — the whole transport
// (version exchange, kex, host key signature, ciphers, MACs, strict kex,
// ext-info) has then worked. User "rekey" is let in with any method (so a
// client gets to where re-keys happen); its channels are refused.
//
//   ssh_transport_probe [--port N] [--keys DIR] [--count N] [--rekey-bytes N] [--no-nist]
// prints "port N" once listening; serves connections one at a time, each
// reported on stdout as "conn kex=.. hostkey=.. cipher=../.. mac=../.. kexes=N error=..".
//
// Thread-safety: single-threaded.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ssh/hostkey.h"
#include "ssh/random.h"
#include "ssh/transport.h"
#include "ssh/wire.h"

using namespace keel::ssh;

static uint64_t now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

static bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

int main(int argc, char** argv) {
  int port = 0, count = 1000000;
  std::string keys;
  uint64_t rekey_bytes = 1ull << 30;
  bool no_nist = false;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--no-nist") {
      no_nist = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", argv[0], a.c_str());
      return 2;
    }
    if (a == "--port")
      port = std::atoi(argv[i + 1]);
    else if (a == "--keys")
      keys = argv[i + 1];
    else if (a == "--count")
      count = std::atoi(argv[i + 1]);
    else if (a == "--rekey-bytes")
      rekey_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: %s [--port N] [--keys DIR] [--count N] [--rekey-bytes N] [--no-nist]\n",
                   argv[0]);
      return 2;
    }
  }
  Random rnd;
  auto hk = keys.empty() ? HostKeys::generate(rnd) : HostKeys::load_or_generate(keys, rnd);
  if (!hk) {
    std::fprintf(stderr, "host keys: %s\n", hk.status().message().c_str());
    return 1;
  }
  const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(ls, 16) != 0) {
    std::perror("bind");
    return 1;
  }
  socklen_t sl = sizeof sa;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&sa), &sl);
  std::printf("port %d\n", ntohs(sa.sin_port));
  for (const std::string& f : hk.value()->fingerprints()) std::printf("fingerprint %s\n", f.c_str());
  std::fflush(stdout);
  for (int c = 0; c < count; ++c) {
    const int fd = ::accept(ls, nullptr, nullptr);
    if (fd < 0) continue;
    TransportConfig cfg;
    cfg.host_keys = hk.value().get();
    cfg.random = &rnd;
    cfg.rekey_bytes = rekey_bytes;
    if (no_nist) {  // what ssh-audit 2.5 calls weak: P-256 kex and host key
      cfg.kex = {"curve25519-sha256", "curve25519-sha256@libssh.org"};
      cfg.host_keys_offered = {"rsa-sha2-512", "rsa-sha2-256"};
    }
    Transport t(cfg);
    write_all(fd, t.take_output());
    char buf[65536];
    uint64_t sent_pings = 0;
    while (!t.closed()) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 30000) <= 0) break;
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      (void)t.feed({buf, static_cast<size_t>(n)}, now_ms());
      std::string m;
      uint32_t seq = 0;
      while (t.poll_message(m, &seq)) {
        const auto type = static_cast<uint8_t>(m[0]);
        if (type == msg::kUserauthRequest) {
          WireReader r(std::string_view(m).substr(1));
          std::string_view user;
          r.string(user);
          WireWriter w;
          if (user == "rekey") {
            // Lets a client reach the state where re-keys happen (after authentication).
            w.u8(msg::kUserauthSuccess);
          } else {
            w.u8(msg::kUserauthFailure).name_list({"publickey", "password"}).boolean(false);
          }
          t.send(w.str());
          ++sent_pings;
        } else if (type == msg::kChannelOpen) {
          WireReader r(std::string_view(m).substr(1));
          std::string_view kind;
          uint32_t sender = 0;
          r.string(kind);
          r.u32(sender);
          WireWriter w;
          w.u8(msg::kChannelOpenFailure)
              .u32(sender)
              .u32(open_failure::kAdministrativelyProhibited)
              .string("probe: no channels")
              .string("");
          t.send(w.str());
        } else if (type != msg::kGlobalRequest) {
          t.unimplemented(seq);
        }
      }
      if (!write_all(fd, t.take_output())) break;
    }
    write_all(fd, t.take_output());
    const auto& a = t.algorithms();
    std::printf("conn client=%s kex=%s hostkey=%s cipher=%s/%s mac=%s/%s kexes=%llu ready=%d error=%s\n",
                t.client_version().c_str(), a.kex.c_str(), a.host_key.c_str(), a.cipher_in.c_str(),
                a.cipher_out.c_str(), a.mac_in.empty() ? "-" : a.mac_in.c_str(),
                a.mac_out.empty() ? "-" : a.mac_out.c_str(), static_cast<unsigned long long>(t.kex_count()),
                sent_pings > 0 ? 1 : 0, t.error().c_str());
    std::fflush(stdout);
    ::close(fd);
  }
  return 0;
}

// Fuzz target: the SSH transport state machine (firmware/ssh/transport.h)
// on raw client bytes, with the fuzz build's deterministic Random
// (KEEL_SSH_FUZZ: this target links keel_ssh_fuzz, never the keel binary's
// keel_ssh) and host keys generated once from it, so a recorded client
// session replays past the key exchange into encrypted packets, re-keys
// and all.
//
// Input: records of [uint16 big-endian length][bytes] (a short tail is one
// record); after each record the driver answers like a server would:
// USERAUTH_SUCCESS for the first USERAUTH_REQUEST (which allows re-keys),
// data back for messages >= 80, UNIMPLEMENTED for others, and a clock step
// of 1 s (the re-key interval is 20 s, the byte limit 4 KiB). It never
// crashes, the transport's output stays bounded by what was fed, and a
// closed transport stays closed.
//
// Seeds: KEEL_SSH_FUZZ_WRITE_SEEDS=DIR ./fuzz_ssh_transport writes recorded
// sessions of tests/unit/ssh_test_client.h (every cipher mode, each kex,
// strict and not, client and server re-keys) through this same driver to
// DIR and exits; tests/fuzz/corpus/ssh_transport/ holds them.
//
// Thread-safety: single-threaded.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ssh/hostkey.h"
#include "ssh/random.h"
#include "ssh/transport.h"
#include "ssh/wire.h"
#include "unit/ssh_test_client.h"

#ifndef KEEL_SSH_FUZZ
#error "fuzz_ssh_transport needs the fuzz build of firmware/ssh (keel_ssh_fuzz, KEEL_SSH_FUZZ)"
#endif

using namespace keel::ssh;

namespace {

const HostKeys& host_keys() {
  static HostKeys* k = [] {
    auto rnd = Random::deterministic(1);
    auto r = HostKeys::generate(*rnd, 2048);
    if (!r.ok()) abort();
    return r.value().release();
  }();
  return *k;
}

// One connection of the fuzzed server.
struct Server {
  std::unique_ptr<Random> rnd = Random::deterministic(42);
  Transport t;
  uint64_t now = 1000;
  bool authed = false;
  size_t fed = 0;

  static TransportConfig config(Random* r) {
    TransportConfig c;
    c.host_keys = &host_keys();
    c.random = r;
    c.rekey_bytes = 4096;
    c.rekey_ms = 20000;
    return c;
  }
  Server() : t(config(rnd.get())) {}

  // Feeds one record and answers; returns the transport's output.
  std::string step(std::string_view bytes) {
    const bool was_closed = t.closed();
    (void)t.feed(bytes, now);
    fed += bytes.size();
    if (was_closed && !t.closed()) abort();
    std::string m;
    uint32_t seq = 0;
    while (t.poll_message(m, &seq)) {
      const auto type = static_cast<uint8_t>(m[0]);
      if (type == msg::kUserauthRequest && !authed) {
        authed = true;
        t.send(std::string(1, static_cast<char>(msg::kUserauthSuccess)));
      } else if (type >= msg::kGlobalRequest) {
        WireWriter w;
        w.u8(msg::kChannelData).u32(0).string(m.substr(0, 512));
        t.send(w.str());
      } else {
        t.unimplemented(seq);
      }
    }
    now += 1000;
    t.tick(now);
    std::string out = t.take_output();
    // Output is bounded by the input: a few packets per packet fed, plus
    // the version line, KEXINITs and a DISCONNECT.
    if (out.size() > 16 * 1024 + 4 * bytes.size() + 2 * 512 * (bytes.size() / 16 + 1)) abort();
    return out;
  }
};

// Runs one input through a fresh server; its state at the end.
struct Outcome {
  uint64_t kexes;
  bool authed, closed;
  std::string error;
};
Outcome replay(std::string_view in) {
  Server s;
  while (!in.empty()) {
    size_t n = in.size();
    std::string_view rec = in;
    if (in.size() >= 2) {
      n = (static_cast<size_t>(static_cast<uint8_t>(in[0])) << 8) | static_cast<uint8_t>(in[1]);
      rec = in.substr(2, n);
      in.remove_prefix(std::min(in.size(), 2 + n));
    } else {
      in = {};
    }
    (void)s.step(rec);
  }
  return {s.t.kex_count(), s.authed, s.t.closed(), s.t.error()};
}

// ---- seed writer ----

void put_record(std::string& seed, const std::string& bytes) {
  for (size_t off = 0; off < bytes.size() || (off == 0 && bytes.empty()); off += 0xffff) {
    const std::string part = bytes.substr(off, 0xffff);
    seed.push_back(static_cast<char>(part.size() >> 8));
    seed.push_back(static_cast<char>(part.size() & 0xff));
    seed += part;
    if (bytes.empty()) break;
  }
}

// One recorded session: client bytes per driver step.
std::string record(test::ClientOptions o, int scenario) {
  Server s;
  test::TestClient c(std::move(o));
  std::string seed;
  c.begin();
  auto round = [&] {
    const std::string bytes = c.take();
    put_record(seed, bytes);
    c.receive(s.step(bytes));
  };
  for (int i = 0; i < 4 && c.kexes < 1; ++i) round();
  c.request_service();
  round();
  WireWriter ua;
  ua.u8(msg::kUserauthRequest).string("admin").string("ssh-connection").string("none");
  c.packet(ua.str());
  round();
  WireWriter open;
  open.u8(msg::kChannelOpen).string("session").u32(0).u32(1 << 20).u32(32768);
  c.packet(open.str());
  round();
  if (scenario == 1) {  // the client re-keys
    c.send_kexinit();
    for (int i = 0; i < 4 && c.kexes < 2; ++i) round();
    c.packet(open.str());
    round();
  } else if (scenario == 2) {  // bulk data: the server re-keys by bytes
    WireWriter d;
    d.u8(msg::kChannelData).u32(0).string(std::string(3000, 'x'));
    for (int i = 0; i < 3; ++i) c.packet(d.str());
    for (int i = 0; i < 4; ++i) round();
  } else if (scenario == 3) {  // garbage after the keys
    c.raw(std::string("\x00\x00\x00\x0c\x0a\x15junkjunkjunk", 16));
    round();
  }
  WireWriter bye;
  bye.u8(msg::kDisconnect).u32(disconnect::kByApplication).string("bye").string("");
  c.packet(bye.str());
  round();
  return seed;
}

void write_seeds(const char* dir) {
  ::mkdir(dir, 0755);
  int n = 0;
  auto save = [&](const std::string& name, const std::string& seed) {
    // The seed must replay to where the recording got (deterministic server).
    const Outcome o = replay(seed);
    std::fprintf(stderr, "%s: %zu bytes, kexes %llu, authenticated %d, closed %d (%s)\n", name.c_str(),
                 seed.size(), static_cast<unsigned long long>(o.kexes), o.authed, o.closed, o.error.c_str());
    if (name != "version" && (o.kexes < 1 || !o.authed)) abort();
    const std::string path = std::string(dir) + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) abort();
    std::fwrite(seed.data(), 1, seed.size(), f);
    std::fclose(f);
    ++n;
  };
  const char* modes[][2] = {{"chacha20-poly1305@openssh.com", "hmac-sha2-256-etm@openssh.com"},
                            {"aes256-gcm@openssh.com", "hmac-sha2-256-etm@openssh.com"},
                            {"aes128-gcm@openssh.com", "hmac-sha2-256-etm@openssh.com"},
                            {"aes256-ctr", "hmac-sha2-256-etm@openssh.com"},
                            {"aes128-ctr", "hmac-sha2-512-etm@openssh.com"}};
  int i = 0;
  for (auto& m : modes) {
    test::ClientOptions o;
    o.cipher = m[0];
    o.mac = m[1];
    save("cipher_" + std::to_string(i++), record(o, 0));
  }
  for (const char* kex : {"curve25519-sha256@libssh.org", "ecdh-sha2-nistp256"}) {
    test::ClientOptions o;
    o.kex = kex;
    o.host_key = "rsa-sha2-256";
    save(std::string("kex_") + kex, record(o, 0));
  }
  {
    test::ClientOptions o;
    o.strict = false;
    o.ext_info = false;
    save("nostrict", record(o, 1));
  }
  save("client_rekey", record({}, 1));
  save("server_rekey", record({}, 2));
  save("garbage", record({}, 3));
  {
    test::ClientOptions o;
    o.guess_follows = true;
    o.host_key = "ecdsa-sha2-nistp256";
    save("guess", record(o, 0));
  }
  // The version exchange alone, with preamble lines.
  std::string v;
  put_record(v, "banner line\r\nSSH-2.0-x_1 comment\r\n");
  save("version", v);
  std::fprintf(stderr, "wrote %d seeds to %s\n", n, dir);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)host_keys();
  if (const char* dir = std::getenv("KEEL_SSH_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)replay(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

// The SSH transport state machine (firmware/ssh/transport.h) against a test
// client written from RFC 4253 (ssh_test_client.h): every kex x cipher x MAC
// reaches ready(); strict kex (KEXINIT first, nothing else during the
// initial kex, sequence numbers reset); ext-info-c; re-keys started by
// either side (by bytes, by time, by the client) with messages from above
// held meanwhile; the guessed kex packet; and bad input of every kind
// closing with the right disconnect reason.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "ssh/hostkey.h"
#include "ssh/transport.h"
#include "ssh/wire.h"
#include "unit/ssh_test_client.h"

using namespace keel::ssh;
using keel::ssh::test::ClientOptions;
using keel::ssh::test::pump;
using keel::ssh::test::TestClient;

namespace {

Random& rnd() {
  static Random r;
  return r;
}

const HostKeys& keys() {
  static std::unique_ptr<HostKeys> k = [] {
    auto r = HostKeys::generate(rnd(), 2048);
    REQUIRE(r.ok());
    return std::move(r.value());
  }();
  return *k;
}

TransportConfig config() {
  TransportConfig c;
  c.host_keys = &keys();
  c.random = &rnd();
  return c;
}

// Client and server through the first kex and SERVICE_REQUEST ssh-userauth.
struct Pair {
  Transport t;
  TestClient c;
  explicit Pair(ClientOptions o = {}, TransportConfig cfg = config()) : t(cfg), c(std::move(o)) {
    c.begin();
    pump(c, t);
  }
  void service() {
    c.request_service();
    pump(c, t);
  }
  // As if user authentication succeeded (USERAUTH_SUCCESS through send()).
  void authenticate() {
    t.send(std::string(1, static_cast<char>(msg::kUserauthSuccess)));
    pump(c, t);
  }
};

std::string userauth_request() {
  WireWriter w;
  w.u8(msg::kUserauthRequest).string("admin").string("ssh-connection").string("none");
  return w.take();
}

}  // namespace

TEST_CASE("every kex x host key x cipher x MAC reaches ready()") {
  const char* kexes[] = {"curve25519-sha256", "curve25519-sha256@libssh.org", "ecdh-sha2-nistp256"};
  const char* hks[] = {"ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256"};
  struct Mode {
    const char *cipher, *mac;
  } modes[] = {{"chacha20-poly1305@openssh.com", "hmac-sha2-256-etm@openssh.com"},
               {"aes256-gcm@openssh.com", "hmac-sha2-256-etm@openssh.com"},
               {"aes128-gcm@openssh.com", "hmac-sha2-512-etm@openssh.com"},
               {"aes256-ctr", "hmac-sha2-256-etm@openssh.com"},
               {"aes256-ctr", "hmac-sha2-512-etm@openssh.com"},
               {"aes128-ctr", "hmac-sha2-256-etm@openssh.com"},
               {"aes128-ctr", "hmac-sha2-512-etm@openssh.com"}};
  for (const char* kex : kexes)
    for (const char* hk : hks)
      for (const Mode& m : modes) {
        CAPTURE(kex);
        CAPTURE(hk);
        CAPTURE(m.cipher);
        CAPTURE(m.mac);
        ClientOptions o;
        o.kex = kex;
        o.host_key = hk;
        o.cipher = m.cipher;
        o.mac = m.mac;
        Pair p(o);
        REQUIRE_MESSAGE(p.c.error.empty(), p.c.error);
        CHECK_FALSE(p.t.closed());
        CHECK(p.c.kexes == 1);
        CHECK_FALSE(p.t.ready());  // ssh-userauth not yet accepted
        p.service();
        CHECK(p.c.service_accepted);
        CHECK(p.t.ready());
        CHECK(p.t.kex_count() == 1);
        const auto& a = p.t.algorithms();
        CHECK(a.kex == kex);
        CHECK(a.host_key == hk);
        CHECK(a.cipher_in == m.cipher);
        CHECK(a.cipher_out == m.cipher);
        const bool aead = std::string_view(m.cipher).find("ctr") == std::string_view::npos;
        CHECK(a.mac_in == (aead ? "" : m.mac));
        CHECK(a.mac_out == (aead ? "" : m.mac));
        CHECK(p.t.session_id() == p.c.session_id);
        CHECK(p.c.host_key_blob == keys().public_blob(hk));
        WireReader sig(p.c.signature);
        std::string_view sig_alg;
        CHECK(sig.string(sig_alg));
        CHECK(sig_alg == hk);
        // Messages both ways over the new keys.
        p.c.packet(userauth_request());
        pump(p.c, p.t);
        std::string m1;
        REQUIRE(p.t.poll_message(m1));
        CHECK(m1 == userauth_request());
        p.t.send(std::string("\x33") + "reply");
        pump(p.c, p.t);
        REQUIRE(p.c.messages.size() == 1);
        CHECK(p.c.messages.front() == std::string("\x33") + "reply");
      }
}

TEST_CASE("version exchange: ours first, lines before the client's accepted, bad versions refused") {
  Transport t(config());
  const std::string out = t.take_output();
  CHECK(out.rfind("SSH-2.0-keel_", 0) == 0);
  CHECK(out.find("\r\n") != std::string::npos);
  CHECK(out.size() > out.find("\r\n") + 2);  // our KEXINIT follows at once
  CHECK(t.feed("some banner\r\nanother\n", 1).ok());
  CHECK(t.feed("SSH-2.0-Client_1", 1).ok());
  CHECK(t.feed(".0 comment\r\n", 1).ok());
  CHECK(t.client_version() == "SSH-2.0-Client_1.0 comment");
  CHECK_FALSE(t.closed());

  Transport v1(config());
  CHECK_FALSE(v1.feed("SSH-1.5-OldClient\r\n", 1).ok());
  CHECK(v1.closed());
  CHECK(v1.disconnect_reason() == disconnect::kProtocolVersionNotSupported);
  CHECK(v1.error().find("SSH-1.5-OldClient") != std::string::npos);

  Transport longv(config());
  CHECK_FALSE(longv.feed("SSH-2.0-" + std::string(300, 'x'), 1).ok());
  CHECK(longv.disconnect_reason() == disconnect::kProtocolError);

  Transport ctl(config());
  CHECK_FALSE(ctl.feed(std::string("SSH-2.0-a\x01b\r\n"), 1).ok());

  Transport flood(config());
  keel::Status s;
  for (int i = 0; i < 100 && s.ok(); ++i) s = flood.feed("hello there\r\n", 1);
  CHECK_FALSE(s.ok());
  CHECK(flood.error().find("too many lines") != std::string::npos);

  Transport nover(config());
  CHECK_FALSE(nover.feed(std::string(2000, 'a'), 1).ok());
}

TEST_CASE("strict kex: KEXINIT first, nothing else during the initial kex, sequence numbers reset") {
  SUBCASE("IGNORE before KEXINIT is fatal with strict") {
    Transport t(config());
    // An IGNORE packet between the client's version line and its KEXINIT.
    TestClient c2;
    c2.begin();
    std::string bytes = c2.take();
    const size_t nl = bytes.find('\n');
    WireWriter ign;
    ign.u32(12).u8(10).u8(msg::kIgnore).raw(std::string(10, '\0'));
    std::string in = bytes.substr(0, nl + 1) + ign.str() + bytes.substr(nl + 1);
    CHECK_FALSE(t.feed(in, 1).ok());
    CHECK(t.disconnect_reason() == disconnect::kProtocolError);
    CHECK(t.error().find("KEXINIT was not the first packet") != std::string::npos);
  }
  SUBCASE("...and accepted without strict") {
    Transport t(config());
    ClientOptions o;
    o.strict = false;
    TestClient c(o);
    c.begin();
    std::string bytes = c.take();
    const size_t nl = bytes.find('\n');
    WireWriter ign;
    ign.u32(12).u8(10).u8(msg::kIgnore).raw(std::string(10, '\0'));
    c.set_seq_out(2);  // the IGNORE took a sequence number
    CHECK(t.feed(bytes.substr(0, nl + 1) + ign.str() + bytes.substr(nl + 1), 1).ok());
    c.receive(t.take_output());
    pump(c, t);
    CHECK(c.kexes == 1);
    c.request_service();
    pump(c, t);
    CHECK(t.ready());
  }
  SUBCASE("IGNORE during the initial kex is fatal with strict") {
    Transport t(config());
    TestClient c;
    c.begin();
    c.packet(std::string(1, static_cast<char>(msg::kIgnore)));
    CHECK_FALSE(t.feed(c.take(), 1).ok());
    CHECK(t.error().find("strict KEX violation") != std::string::npos);
  }
  SUBCASE("strict: the client's sequence numbers restart at 0 after NEWKEYS") {
    Pair p;
    CHECK(p.c.seq_out() == 0);  // the test client reset its own
    p.service();
    CHECK(p.t.ready());
  }
  SUBCASE("strict: a client that does not reset fails the MAC") {
    ClientOptions o;
    o.cipher = "aes256-ctr";  // the MAC covers the sequence number
    Pair p(o);
    p.c.set_seq_out(3);
    p.c.request_service();
    pump(p.c, p.t);
    CHECK(p.t.closed());
    CHECK(p.t.disconnect_reason() == disconnect::kMacError);
    // chacha20-poly1305: the length itself decrypts to garbage under the wrong sequence number.
    Pair q;
    q.c.set_seq_out(3);
    q.c.request_service();
    pump(q.c, q.t);
    CHECK(q.t.closed());
  }
  SUBCASE("without strict, sequence numbers continue") {
    ClientOptions o;
    o.strict = false;
    Pair p(o);
    CHECK(p.c.seq_out() == 3);  // KEXINIT, ECDH_INIT, NEWKEYS
    p.service();
    CHECK(p.t.ready());
  }
}

TEST_CASE("EXT_INFO server-sig-algs only when the client offered ext-info-c") {
  Pair with;
  REQUIRE_FALSE(with.c.ext_info.empty());
  WireReader r(std::string_view(with.c.ext_info).substr(1));
  uint32_t n = 0;
  std::string_view name, value;
  CHECK(r.u32(n));
  CHECK(n == 1);
  CHECK(r.string(name));
  CHECK(r.string(value));
  CHECK(r.done());
  CHECK(name == "server-sig-algs");
  CHECK(value == kServerSigAlgs);
  // It comes right after NEWKEYS.
  auto nk = std::find(with.c.types.begin(), with.c.types.end(), msg::kNewKeys);
  REQUIRE(nk + 1 != with.c.types.end());
  CHECK(*(nk + 1) == msg::kExtInfo);

  ClientOptions o;
  o.ext_info = false;
  Pair without(o);
  CHECK(without.c.ext_info.empty());
}

TEST_CASE("services and messages above: ssh-userauth only, nothing >= 50 before it") {
  SUBCASE("a message >= 50 before SERVICE_ACCEPT") {
    Pair p;
    p.c.packet(userauth_request());
    pump(p.c, p.t);
    CHECK(p.t.closed());
    CHECK(p.t.disconnect_reason() == disconnect::kProtocolError);
    CHECK(p.c.disconnected);
    CHECK(p.c.disconnect_reason == disconnect::kProtocolError);
  }
  SUBCASE("another service") {
    Pair p;
    p.c.request_service("ssh-connection");
    pump(p.c, p.t);
    CHECK(p.t.disconnect_reason() == disconnect::kServiceNotAvailable);
    CHECK(p.c.disconnect_reason == disconnect::kServiceNotAvailable);
  }
  SUBCASE("SERVICE_REQUEST during the initial kex (no strict)") {
    Transport t(config());
    ClientOptions o;
    o.strict = false;
    TestClient c(o);
    c.begin();
    c.request_service();
    CHECK_FALSE(t.feed(c.take(), 1).ok());
    CHECK(t.disconnect_reason() == disconnect::kProtocolError);
  }
  SUBCASE("unknown transport messages get UNIMPLEMENTED; ones above are answered via unimplemented()") {
    Pair p;
    p.service();
    p.c.packet(std::string(1, '\x0f'));  // 15: unassigned
    pump(p.c, p.t);
    REQUIRE_FALSE(p.c.messages.empty());
    CHECK(static_cast<uint8_t>(p.c.messages.back()[0]) == msg::kUnimplemented);
    p.c.packet(std::string(1, '\x7f'));
    pump(p.c, p.t);
    std::string m;
    uint32_t seq = 0;
    REQUIRE(p.t.poll_message(m, &seq));
    p.t.unimplemented(seq);
    pump(p.c, p.t);
    WireReader r(std::string_view(p.c.messages.back()).substr(1));
    uint32_t got = 99;
    CHECK(r.u32(got));
    CHECK(got == seq);
    CHECK(p.t.ready());
  }
  SUBCASE("IGNORE and DEBUG are ignored after the kex") {
    Pair p;
    p.service();
    p.c.packet(std::string("\x02\x00\x00\x00\x01x", 6));
    WireWriter d;
    d.u8(msg::kDebug).boolean(true).string("hello").string("");
    p.c.packet(d.str());
    pump(p.c, p.t);
    CHECK(p.t.ready());
    std::string m;
    CHECK_FALSE(p.t.poll_message(m));
  }
  SUBCASE("DISCONNECT from the client") {
    Pair p;
    p.service();
    WireWriter w;
    w.u8(msg::kDisconnect).u32(disconnect::kByApplication).string("bye now").string("");
    p.c.packet(w.str());
    pump(p.c, p.t);
    CHECK(p.t.closed());
    CHECK(p.t.disconnect_reason() == disconnect::kByApplication);
    CHECK(p.t.error().find("bye now") != std::string::npos);
  }
}

TEST_CASE("re-keying: by bytes, by time, by the client; messages from above held meanwhile") {
  SUBCASE("after rekey_bytes") {
    TransportConfig cfg = config();
    cfg.rekey_bytes = 4096;
    Pair p({}, cfg);
    p.service();
    REQUIRE(p.t.ready());
    // Not during user authentication (OpenSSH's client would refuse it).
    for (int i = 0; i < 3; ++i) p.t.send(std::string("\x3c") + std::string(1500, 'a'));
    pump(p.c, p.t);
    CHECK(p.c.kexes == 1);
    p.authenticate();
    CHECK(p.c.kexes == 2);  // bytes were over the limit already
    p.c.messages.clear();
    const std::string sid = std::string(p.t.session_id());
    for (int i = 0; i < 3; ++i) p.t.send(std::string("\x5e") + std::string(1500, 'd'));
    pump(p.c, p.t);
    CHECK(p.c.kexes == 3);
    CHECK(p.t.kex_count() == 3);
    CHECK(p.t.session_id() == sid);  // the session id stays the first exchange hash
    CHECK(p.c.messages.size() == 3);
    CHECK(p.t.ready());
  }
  SUBCASE("after rekey_ms, with messages sent during the kex held until NEWKEYS") {
    TransportConfig cfg = config();
    cfg.rekey_ms = 60000;
    Pair p({}, cfg);
    p.service();
    p.t.tick(1000 + 60000);
    CHECK(p.t.take_output().empty());  // not before authentication
    p.authenticate();                  // the exchanges in pump() run at t=1000: the re-key ends then
    CHECK(p.c.kexes == 2);             // the time was up already
    p.c.messages.clear();
    p.t.tick(1000 + 59999);
    CHECK(p.t.take_output().empty());
    p.t.tick(1000 + 60000);
    const std::string kexinit = p.t.take_output();
    CHECK_FALSE(kexinit.empty());
    p.c.receive(kexinit);  // the client answers KEXINIT + ECDH_INIT
    p.t.send(std::string("\x5e") + "held");
    CHECK(p.t.output_size() == 0);  // held: our KEXINIT is out
    pump(p.c, p.t);
    CHECK(p.c.kexes == 3);
    REQUIRE(p.c.messages.size() == 1);
    CHECK(p.c.messages.front() == std::string("\x5e") + "held");
    // Its NEWKEYS came before the held message.
    auto last_nk = std::find(p.c.types.rbegin(), p.c.types.rend(), msg::kNewKeys);
    CHECK(last_nk != p.c.types.rbegin());
  }
  SUBCASE("started by the client, with its messages >= 50 before its KEXINIT passed up") {
    Pair p;
    p.service();
    p.c.packet(userauth_request());
    p.c.send_kexinit();
    pump(p.c, p.t);
    CHECK(p.c.kexes == 2);
    CHECK(p.t.kex_count() == 2);
    std::string m;
    CHECK(p.t.poll_message(m));
    p.c.packet(userauth_request());
    pump(p.c, p.t);
    CHECK(p.t.poll_message(m));
    CHECK(p.t.ready());
  }
  SUBCASE("a message >= 50 between the client's KEXINIT and NEWKEYS is a protocol error") {
    Pair p;
    p.service();
    p.c.send_kexinit();
    p.c.packet(userauth_request());
    pump(p.c, p.t);
    CHECK(p.t.closed());
    CHECK(p.t.disconnect_reason() == disconnect::kProtocolError);
  }
  SUBCASE("a second KEXINIT during a kex") {
    Pair p;
    p.service();
    p.c.send_kexinit();
    p.c.send_kexinit();
    pump(p.c, p.t);
    CHECK(p.t.closed());
  }
}

TEST_CASE("first_kex_packet_follows: a right guess is used, a wrong one ignored") {
  SUBCASE("right guess") {
    ClientOptions o;
    o.guess_follows = true;  // curve25519-sha256 + ecdsa first: the server's own first choices
    o.host_key = "ecdsa-sha2-nistp256";
    Pair p(o);
    CHECK(p.c.kexes == 1);
    p.service();
    CHECK(p.t.ready());
  }
  SUBCASE("wrong guess") {
    ClientOptions o;
    o.guess_follows = true;
    o.kex = "ecdh-sha2-nistp256,curve25519-sha256";
    Transport t(config());
    TestClient c(o);
    c.begin();
    pump(c, t);
    CHECK_FALSE(t.closed());
    CHECK(c.kexes == 0);  // the guessed ECDH_INIT was dropped; no reply yet
    c.send_ecdh_init();   // the real one
    pump(c, t);
    CHECK(c.kexes == 1);
    CHECK(t.algorithms().kex == "ecdh-sha2-nistp256");
  }
}

TEST_CASE("negotiation failures: KEX_FAILED naming what did not match") {
  struct Case {
    const char *what, *kex, *hk, *cipher, *mac;
  } cases[] = {
      {"key exchange", "diffie-hellman-group14-sha1", "ecdsa-sha2-nistp256", "aes128-ctr",
       "hmac-sha2-256-etm@openssh.com"},
      {"host key", "curve25519-sha256", "ssh-rsa,ssh-dss", "aes128-ctr", "hmac-sha2-256-etm@openssh.com"},
      {"cipher", "curve25519-sha256", "ecdsa-sha2-nistp256", "aes128-cbc,3des-cbc,none",
       "hmac-sha2-256-etm@openssh.com"},
      {"MAC", "curve25519-sha256", "ecdsa-sha2-nistp256", "aes128-ctr", "hmac-sha1,hmac-sha2-256,none"},
  };
  for (const Case& k : cases) {
    CAPTURE(k.what);
    ClientOptions o;
    o.kex = k.kex;
    o.host_key = k.hk;
    o.cipher = k.cipher;
    o.mac = k.mac;
    Transport t(config());
    TestClient c(o);
    c.begin();
    CHECK_FALSE(t.feed(c.take(), 1).ok());
    CHECK(t.disconnect_reason() == disconnect::kKeyExchangeFailed);
    CHECK(t.error().find(std::string("no matching ") + k.what) != std::string::npos);
    c.receive(t.take_output());
    CHECK(c.disconnected);
    CHECK(c.disconnect_reason == disconnect::kKeyExchangeFailed);
  }
  // An AEAD cipher needs no MAC.
  ClientOptions o;
  o.cipher = "aes256-gcm@openssh.com";
  o.mac = "hmac-sha1";
  Pair p(o);
  CHECK(p.c.kexes == 1);
}

TEST_CASE("bad packets: lengths, padding, MAC, malformed kex messages") {
  SUBCASE("length beyond the limit") {
    Transport t(config());
    (void)t.feed("SSH-2.0-X_1\r\n", 1);
    WireWriter w;
    w.u32(1u << 20).u8(4);
    CHECK_FALSE(t.feed(w.str(), 1).ok());
    CHECK(t.error().find("bad packet length") != std::string::npos);
    CHECK(t.disconnect_reason() == disconnect::kProtocolError);
  }
  SUBCASE("length not block aligned") {
    Transport t(config());
    (void)t.feed("SSH-2.0-X_1\r\n", 1);
    WireWriter w;
    w.u32(13).u8(4).raw(std::string(12, 'a'));
    CHECK_FALSE(t.feed(w.str(), 1).ok());
    CHECK(t.error().find("block size") != std::string::npos);
  }
  SUBCASE("padding below 4, and padding that eats the payload") {
    for (uint8_t pad : {uint8_t{3}, uint8_t{11}, uint8_t{200}}) {
      Transport t(config());
      (void)t.feed("SSH-2.0-X_1\r\n", 1);
      WireWriter w;
      w.u32(12).u8(pad).raw(std::string(11, '\x14'));
      CHECK_FALSE(t.feed(w.str(), 1).ok());
      CHECK(t.error().find("padding") != std::string::npos);
    }
  }
  SUBCASE("a flipped bit after the kex: MAC error") {
    for (const char* cipher : {"chacha20-poly1305@openssh.com", "aes128-gcm@openssh.com", "aes256-ctr"}) {
      CAPTURE(cipher);
      ClientOptions o;
      o.cipher = cipher;
      Pair p(o);
      p.c.request_service();
      std::string bytes = p.c.take();
      bytes[bytes.size() / 2] ^= 0x01;
      CHECK_FALSE(p.t.feed(bytes, 1).ok());
      CHECK(p.t.disconnect_reason() == disconnect::kMacError);
      // The DISCONNECT is readable with the keys in use.
      CHECK(p.c.receive(p.t.take_output()));
      CHECK(p.c.disconnect_reason == disconnect::kMacError);
    }
  }
  SUBCASE("malformed KEXINIT and ECDH_INIT") {
    Transport t(config());
    (void)t.feed("SSH-2.0-X_1\r\n", 1);
    TestClient c;
    c.packet(std::string("\x14short"));
    CHECK_FALSE(t.feed(c.take(), 1).ok());
    CHECK(t.error() == "malformed KEXINIT");

    Transport t2(config());
    ClientOptions o;
    TestClient c2(o);
    c2.begin();
    (void)t2.feed(c2.take(), 1);
    WireWriter w;
    w.u8(msg::kKexEcdhInit).string(std::string(31, '\x09'));
    c2.packet(w.str());
    CHECK_FALSE(t2.feed(c2.take(), 1).ok());
    CHECK(t2.disconnect_reason() == disconnect::kKeyExchangeFailed);
  }
  SUBCASE("NEWKEYS and ECDH_INIT out of order") {
    Transport t(config());
    TestClient c;
    c.begin();
    c.packet(std::string(1, static_cast<char>(msg::kNewKeys)));
    CHECK_FALSE(t.feed(c.take(), 1).ok());
    CHECK(t.error() == "unexpected NEWKEYS");
  }
  SUBCASE("after closing, feed refuses and poll yields nothing") {
    Pair p;
    p.service();
    p.t.disconnect(disconnect::kByApplication, "shutting down");
    CHECK(p.t.closed());
    CHECK_FALSE(p.t.ready());
    CHECK_FALSE(p.t.feed("x", 1).ok());
    p.c.receive(p.t.take_output());
    CHECK(p.c.disconnect_text == "shutting down");
  }
}

TEST_CASE("input split at every byte boundary gives the same session") {
  Transport ref(config());
  TestClient c;
  c.begin();
  std::string first = c.take();
  Transport t(config());
  for (char ch : first) REQUIRE(t.feed(std::string_view(&ch, 1), 1).ok());
  c.receive(t.take_output());
  std::string second = c.take();  // ECDH_INIT
  for (char ch : second) REQUIRE(t.feed(std::string_view(&ch, 1), 1).ok());
  c.receive(t.take_output());
  std::string third = c.take();  // NEWKEYS
  c.request_service();
  third += c.take();
  for (char ch : third) REQUIRE(t.feed(std::string_view(&ch, 1), 1).ok());
  c.receive(t.take_output());
  CHECK(c.service_accepted);
  CHECK(t.ready());
}

TEST_CASE("TransportConfig's algorithm lists restrict and reorder what is offered") {
  TransportConfig cfg = config();
  cfg.kex = {"curve25519-sha256", "no-such-kex"};
  cfg.host_keys_offered = {"rsa-sha2-256", "rsa-sha2-512"};
  cfg.ciphers = {"aes128-ctr", "chacha20-poly1305@openssh.com"};
  cfg.macs = {"hmac-sha2-512-etm@openssh.com"};
  {
    ClientOptions o;
    o.kex = "ecdh-sha2-nistp256";
    Transport t(cfg);
    TestClient c(o);
    c.begin();
    CHECK_FALSE(t.feed(c.take(), 1).ok());
    CHECK(t.error().find("no matching key exchange") != std::string::npos);
  }
  {
    ClientOptions o;
    o.host_key = "ecdsa-sha2-nistp256";
    Transport t(cfg);
    TestClient c(o);
    c.begin();
    CHECK_FALSE(t.feed(c.take(), 1).ok());
    CHECK(t.error().find("no matching host key") != std::string::npos);
  }
  {
    ClientOptions o;
    o.cipher = "aes128-ctr";
    o.mac = "hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com";
    Transport t(cfg);
    TestClient c(o);
    c.begin();
    (void)t.feed(c.take(), 1);
    CHECK_FALSE(t.closed());
    CHECK(t.algorithms().host_key.empty());  // not until the reply
    pump(c, t);
    CHECK(t.algorithms().host_key == "rsa-sha2-512");  // the client's order decides
  }
  CHECK(transport_algorithms("cipher").front() == "chacha20-poly1305@openssh.com");
  CHECK(transport_algorithms("kex").size() == 3);
  CHECK(transport_algorithms("mac").size() == 2);
}

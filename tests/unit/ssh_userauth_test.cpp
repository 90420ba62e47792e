// SSH user authentication (firmware/ssh/userauth.h): requests built with
// WireWriter, replies decoded; public-key signatures made by paramiko over
// RFC 4252 §7's data (ssh_test_vectors.h), a stub Authenticator.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ssh/keys.h"
#include "ssh/userauth.h"
#include "ssh/wire.h"
#include "ssh_test_vectors.h"

using namespace keel;
using namespace keel::ssh;
using namespace keel::ssh::testvec;

namespace {

struct StubAuth : Authenticator {
  std::map<std::string, std::string, std::less<>> passwords;
  std::map<std::string, std::set<std::string>, std::less<>> keys;
  std::vector<std::string> password_checks;  // users whose password was checked
  int key_checks = 0;
  bool check_password(std::string_view user, std::string_view password) override {
    password_checks.emplace_back(user);
    auto it = passwords.find(user);
    return it != passwords.end() && it->second == password;
  }
  bool has_key(std::string_view user, std::string_view blob) override {
    ++key_checks;
    auto it = keys.find(user);
    return it != keys.end() && it->second.count(std::string(blob)) != 0;
  }
};

std::string request(std::string_view user, std::string_view method,
                    std::string_view service = "ssh-connection") {
  return WireWriter().u8(msg::kUserauthRequest).string(user).string(service).string(method).take();
}
std::string password_req(std::string_view user, std::string_view pw) {
  return request(user, "password") + WireWriter().boolean(false).string(pw).take();
}
std::string pk_query(std::string_view user, std::string_view alg, std::string_view blob) {
  return request(user, "publickey") + WireWriter().boolean(false).string(alg).string(blob).take();
}
std::string pk_signed(std::string_view user, std::string_view alg, std::string_view blob,
                      std::string_view sig) {
  return request(user, "publickey") + WireWriter().boolean(true).string(alg).string(blob).string(sig).take();
}
std::string kbd_req(std::string_view user) {
  return request(user, "keyboard-interactive") + WireWriter().string("").string("").take();
}
std::string info_response(std::string_view answer) {
  return WireWriter().u8(msg::kUserauthInfoResponse).u32(1).string(answer).take();
}

// The methods of a USERAUTH_FAILURE (fails the test for any other message).
std::string failure_methods(const std::string& m) {
  WireReader r(m);
  uint8_t t = 0;
  std::string_view methods;
  bool partial = true;
  REQUIRE(r.u8(t));
  REQUIRE(t == msg::kUserauthFailure);
  REQUIRE(r.string(methods));
  REQUIRE(r.boolean(partial));
  REQUIRE(r.done());
  CHECK_FALSE(partial);
  return std::string(methods);
}

uint8_t type_of(const std::string& m) { return m.empty() ? 0 : static_cast<uint8_t>(m[0]); }

struct Fixture {
  StubAuth auth;
  std::string ec_blob, rsa_blob;
  Fixture() {
    auth.passwords["alice"] = "s3cret";
    auto ec = parse_public_key_line(kEcLine);
    auto rsa = parse_public_key_line(kRsaLine);
    REQUIRE(ec.ok());
    REQUIRE(rsa.ok());
    ec_blob = ec->blob;
    rsa_blob = rsa->blob;
    auth.keys["alice"] = {ec_blob, rsa_blob};
  }
  UserAuthConfig config() {
    UserAuthConfig c;
    c.auth = &auth;
    return c;
  }
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "\"none\" lists the enabled methods and is not an attempt") {
  UserAuth ua(config(), kSessionId);
  std::vector<std::string> out;
  for (int i = 0; i < 5; ++i) CHECK(ua.handle(request("alice", "none"), out) == UserAuth::Outcome::pending);
  REQUIRE(out.size() == 5);
  CHECK(failure_methods(out[0]) == "publickey,password,keyboard-interactive");
  CHECK(ua.failures() == 0);

  UserAuthConfig c = config();
  c.methods = {"publickey"};
  UserAuth only_keys(c, kSessionId);
  out.clear();
  CHECK(only_keys.handle(request("alice", "none"), out) == UserAuth::Outcome::pending);
  CHECK(failure_methods(out.at(0)) == "publickey");
  // A disabled method is refused like an unknown one, without checking the password.
  out.clear();
  CHECK(only_keys.handle(password_req("alice", "s3cret"), out) == UserAuth::Outcome::pending);
  CHECK(failure_methods(out.at(0)) == "publickey");
  CHECK(auth.password_checks.empty());
  out.clear();
  CHECK(only_keys.handle(request("alice", "gssapi-with-mic") + "xyz", out) == UserAuth::Outcome::pending);
  CHECK(failure_methods(out.at(0)) == "publickey");
}

TEST_CASE_FIXTURE(Fixture, "password: right one succeeds once, change requests refused") {
  UserAuth ua(config(), kSessionId);
  std::vector<std::string> out;
  CHECK(ua.handle(password_req("alice", "wrong"), out) == UserAuth::Outcome::pending);
  CHECK(failure_methods(out.at(0)) == "publickey,password,keyboard-interactive");
  CHECK(ua.failures() == 1);
  out.clear();
  CHECK(ua.handle(password_req("alice", "s3cret"), out) == UserAuth::Outcome::authenticated);
  REQUIRE(out.size() == 1);
  CHECK(out[0] == std::string(1, static_cast<char>(msg::kUserauthSuccess)));
  CHECK(ua.user() == "alice");
  CHECK(ua.method() == "password");
  CHECK(ua.authenticated());
  // Later requests are ignored: no second SUCCESS, no reply at all.
  out.clear();
  CHECK(ua.handle(password_req("alice", "s3cret"), out) == UserAuth::Outcome::authenticated);
  CHECK(out.empty());

  UserAuth change(config(), kSessionId);
  out.clear();
  const std::string req =
      request("alice", "password") + WireWriter().boolean(true).string("s3cret").string("new").take();
  CHECK(change.handle(req, out) == UserAuth::Outcome::pending);
  CHECK(type_of(out.at(0)) == msg::kUserauthFailure);
  CHECK(change.failures() == 1);
}

TEST_CASE_FIXTURE(Fixture,
                  "three failures disconnect with no-more-auth-methods; unknown users look the same") {
  UserAuth ua(config(), kSessionId);
  std::vector<std::string> out;
  CHECK(ua.handle(password_req("alice", "x"), out) == UserAuth::Outcome::pending);
  CHECK(ua.handle(password_req("mallory", "x"), out) == UserAuth::Outcome::pending);
  REQUIRE(out.size() == 2);
  CHECK(out[0] == out[1]);  // same reply for a wrong password and a user who doesn't exist
  // The unknown user's password was checked too (the Authenticator hashes anyway).
  CHECK(auth.password_checks == std::vector<std::string>{"alice", "mallory"});
  out.clear();
  CHECK(ua.handle(password_req("alice", "y"), out) == UserAuth::Outcome::disconnect);
  CHECK(out.empty());
  CHECK(ua.disconnect_reason() == disconnect::kNoMoreAuthMethodsAvailable);
  CHECK(ua.disconnect_text() == "too many authentication failures");
  CHECK(ua.failures() == 3);
  // Dead: even the right password no longer gets in.
  CHECK(ua.handle(password_req("alice", "s3cret"), out) == UserAuth::Outcome::disconnect);
  CHECK(out.empty());
}

TEST_CASE_FIXTURE(Fixture,
                  "publickey: query -> PK_OK (not an attempt), signed request made by paramiko -> SUCCESS") {
  UserAuth ua(config(), kSessionId);
  std::vector<std::string> out;
  for (int i = 0; i < 4; ++i)
    REQUIRE(ua.handle(pk_query("alice", "ecdsa-sha2-nistp256", ec_blob), out) == UserAuth::Outcome::pending);
  CHECK(ua.failures() == 0);
  REQUIRE(out.size() == 4);
  CHECK(out[0] == WireWriter().u8(msg::kUserauthPkOk).string("ecdsa-sha2-nistp256").string(ec_blob).take());

  // Queries for a key the user doesn't have, an unknown user, SHA-1 ssh-rsa,
  // an algorithm that doesn't fit the key, a garbage blob: FAILURE, no attempt.
  out.clear();
  CHECK(ua.handle(pk_query("bob", "ecdsa-sha2-nistp256", ec_blob), out) == UserAuth::Outcome::pending);
  CHECK(ua.handle(pk_query("alice", "ssh-rsa", rsa_blob), out) == UserAuth::Outcome::pending);
  CHECK(ua.handle(pk_query("alice", "rsa-sha2-256", ec_blob), out) == UserAuth::Outcome::pending);
  CHECK(ua.handle(pk_query("alice", "ecdsa-sha2-nistp256", "garbage"), out) == UserAuth::Outcome::pending);
  REQUIRE(out.size() == 4);
  for (const auto& m : out) CHECK(type_of(m) == msg::kUserauthFailure);
  CHECK(ua.failures() == 0);

  out.clear();
  CHECK(ua.handle(pk_signed("alice", "ecdsa-sha2-nistp256", ec_blob, kAliceEcAuthSig), out) ==
        UserAuth::Outcome::authenticated);
  CHECK(type_of(out.at(0)) == msg::kUserauthSuccess);
  CHECK(ua.method() == "publickey");
  CHECK(ua.user() == "alice");
}

TEST_CASE_FIXTURE(
    Fixture, "publickey: rsa-sha2-512 accepted, ssh-rsa (SHA-1) and wrong signatures are failed attempts") {
  std::vector<std::string> out;
  {
    UserAuth ua(config(), kSessionId);
    CHECK(ua.handle(pk_signed("alice", "rsa-sha2-512", rsa_blob, kAliceRsa512AuthSig), out) ==
          UserAuth::Outcome::authenticated);
  }
  UserAuth ua(config(), kSessionId);
  out.clear();
  // A genuine SHA-1 signature: refused.
  CHECK(ua.handle(pk_signed("alice", "ssh-rsa", rsa_blob, kAliceRsaSha1AuthSig), out) ==
        UserAuth::Outcome::pending);
  CHECK(ua.failures() == 1);
  // A valid signature, but over another session id (a replay from another connection).
  UserAuth other(config(), std::string(32, 'x'));
  CHECK(other.handle(pk_signed("alice", "ecdsa-sha2-nistp256", ec_blob, kAliceEcAuthSig), out) ==
        UserAuth::Outcome::pending);
  CHECK(other.failures() == 1);
  // A valid signature for alice presented as bob's (bob has that key: the signed user name differs).
  auth.keys["bob"] = {ec_blob};
  CHECK(ua.handle(pk_signed("bob", "ecdsa-sha2-nistp256", ec_blob, kAliceEcAuthSig), out) ==
        UserAuth::Outcome::pending);
  CHECK(ua.failures() == 2);
  // A correct signature for a key the user no longer has.
  auth.keys["alice"].erase(ec_blob);
  CHECK(ua.handle(pk_signed("alice", "ecdsa-sha2-nistp256", ec_blob, kAliceEcAuthSig), out) ==
        UserAuth::Outcome::disconnect);
  CHECK(ua.disconnect_reason() == disconnect::kNoMoreAuthMethodsAvailable);
}

TEST_CASE_FIXTURE(Fixture, "keyboard-interactive: one non-echoed Password: prompt") {
  UserAuth ua(config(), kSessionId);
  std::vector<std::string> out;
  CHECK(ua.handle(kbd_req("alice"), out) == UserAuth::Outcome::pending);
  REQUIRE(out.size() == 1);
  WireReader r(out[0]);
  uint8_t t = 0;
  std::string_view name, instruction, lang, prompt;
  uint32_t n = 0;
  bool echo = true;
  REQUIRE(r.u8(t));
  CHECK(t == msg::kUserauthInfoRequest);
  REQUIRE((r.string(name) && r.string(instruction) && r.string(lang) && r.u32(n) && r.string(prompt) &&
           r.boolean(echo) && r.done()));
  CHECK(n == 1);
  CHECK(prompt == "Password: ");
  CHECK_FALSE(echo);

  out.clear();
  CHECK(ua.handle(info_response("nope"), out) == UserAuth::Outcome::pending);
  CHECK(type_of(out.at(0)) == msg::kUserauthFailure);
  CHECK(ua.failures() == 1);
  // A response without an outstanding prompt is a protocol error.
  UserAuth stray(config(), kSessionId);
  CHECK(stray.handle(info_response("s3cret"), out) == UserAuth::Outcome::disconnect);
  CHECK(stray.disconnect_reason() == disconnect::kProtocolError);

  out.clear();
  CHECK(ua.handle(kbd_req("alice"), out) == UserAuth::Outcome::pending);
  CHECK(ua.handle(info_response("s3cret"), out) == UserAuth::Outcome::authenticated);
  CHECK(type_of(out.back()) == msg::kUserauthSuccess);
  CHECK(ua.method() == "keyboard-interactive");

  // Two answers to one prompt: protocol error.
  UserAuth two(config(), kSessionId);
  CHECK(two.handle(kbd_req("alice"), out) == UserAuth::Outcome::pending);
  const std::string both = WireWriter().u8(msg::kUserauthInfoResponse).u32(2).string("a").string("b").take();
  CHECK(two.handle(both, out) == UserAuth::Outcome::disconnect);
  CHECK(two.disconnect_reason() == disconnect::kProtocolError);
}

TEST_CASE_FIXTURE(Fixture, "user or service change: allowed, a pending prompt dropped, failures kept") {
  UserAuth ua(config(), kSessionId);
  std::vector<std::string> out;
  CHECK(ua.handle(password_req("bob", "x"), out) == UserAuth::Outcome::pending);
  CHECK(ua.handle(kbd_req("bob"), out) == UserAuth::Outcome::pending);
  // A new request for another user drops bob's prompt: a response now is stray.
  CHECK(ua.handle(password_req("alice", "s3cret"), out) == UserAuth::Outcome::authenticated);
  CHECK(ua.user() == "alice");
  CHECK(ua.failures() == 1);

  UserAuth ub(config(), kSessionId);
  CHECK(ub.handle(kbd_req("bob"), out) == UserAuth::Outcome::pending);
  CHECK(ub.handle(request("alice", "none"), out) == UserAuth::Outcome::pending);
  CHECK(ub.handle(info_response("s3cret"), out) == UserAuth::Outcome::disconnect);
  CHECK(ub.disconnect_reason() == disconnect::kProtocolError);
}

TEST_CASE_FIXTURE(Fixture, "bad requests: service, user names, encodings, unexpected messages") {
  std::vector<std::string> out;
  auto outcome = [&](const std::string& m, uint32_t reason) {
    UserAuth ua(config(), kSessionId);
    out.clear();
    CHECK(ua.handle(m, out) == UserAuth::Outcome::disconnect);
    CHECK(ua.disconnect_reason() == reason);
    CHECK_FALSE(ua.disconnect_text().empty());
    CHECK(out.empty());
  };
  outcome(request("alice", "none", "ssh-userauth"), disconnect::kServiceNotAvailable);
  outcome(request("", "none"), disconnect::kIllegalUserName);
  outcome(request(std::string(65, 'a'), "none"), disconnect::kIllegalUserName);
  outcome(request("al ice", "none"), disconnect::kIllegalUserName);
  outcome(request(std::string("al\0ce", 5), "none"), disconnect::kIllegalUserName);
  outcome("", disconnect::kProtocolError);
  outcome(std::string(1, static_cast<char>(msg::kUserauthRequest)), disconnect::kProtocolError);
  outcome(request("alice", "password"), disconnect::kProtocolError);           // no fields
  outcome(password_req("alice", "s3cret") + "x", disconnect::kProtocolError);  // trailing byte
  outcome(pk_query("alice", "ecdsa-sha2-nistp256", ec_blob) + "x", disconnect::kProtocolError);
  outcome(request("alice", "publickey") +
              WireWriter().boolean(true).string("ecdsa-sha2-nistp256").string(ec_blob).take(),
          disconnect::kProtocolError);  // signed, but no signature
  outcome(WireWriter().u8(msg::kUserauthSuccess).take(), disconnect::kProtocolError);
  outcome(WireWriter().u8(msg::kUserauthFailure).take(), disconnect::kProtocolError);
  outcome(WireWriter().u8(79).take(), disconnect::kProtocolError);

  // 64 printable bytes is the longest name.
  UserAuth ua(config(), kSessionId);
  CHECK(ua.handle(request(std::string(64, 'a'), "none"), out) == UserAuth::Outcome::pending);
  // Loops of requests that are no attempts end too.
  int n = 0;
  while (ua.handle(request("alice", "none"), out) == UserAuth::Outcome::pending && n < 1000) ++n;
  CHECK(n < 1000);
  CHECK(ua.disconnect_reason() == disconnect::kNoMoreAuthMethodsAvailable);
}

TEST_CASE("without an Authenticator nobody gets in") {
  UserAuth ua(UserAuthConfig{}, kSessionId);
  std::vector<std::string> out;
  CHECK(ua.handle(password_req("alice", "s3cret"), out) == UserAuth::Outcome::pending);
  CHECK(type_of(out.at(0)) == msg::kUserauthFailure);
}

// User public keys (firmware/ssh/keys.h): OpenSSH key lines and blobs made by
// ssh-keygen, fingerprints compared with `ssh-keygen -lf`, and signatures
// made by paramiko checked (and tampered with) -- see ssh_test_vectors.h.
#include <doctest/doctest.h>

#include <string>

#include "ssh/keys.h"
#include "ssh/wire.h"
#include "ssh_test_vectors.h"

using namespace keel;
using namespace keel::ssh;
using namespace keel::ssh::testvec;

namespace {

std::string sig_inner(const std::string& sig_blob) {
  WireReader r(sig_blob);
  std::string_view alg, inner;
  REQUIRE(r.string(alg));
  REQUIRE(r.string(inner));
  return std::string(inner);
}

std::string sig_with(std::string_view alg, std::string_view inner) {
  return WireWriter().string(alg).string(inner).take();
}

}  // namespace

TEST_CASE(
    "ECDSA P-256 and RSA key lines from ssh-keygen parse, print back and have ssh-keygen's fingerprint") {
  auto ec = parse_public_key_line(kEcLine);
  REQUIRE_MESSAGE(ec.ok(), ec.status().message());
  CHECK(ec->type == "ecdsa-sha2-nistp256");
  CHECK(ec->bits == 256);
  CHECK(ec->comment == "alice@test");
  CHECK(public_key_line(*ec) == kEcLine);
  CHECK(fingerprint(ec->blob) == kEcFingerprint);

  auto rsa = parse_public_key_line(kRsaLine);
  REQUIRE_MESSAGE(rsa.ok(), rsa.status().message());
  CHECK(rsa->type == "ssh-rsa");
  CHECK(rsa->bits == 3072);
  CHECK(rsa->comment == "bob@test");
  CHECK(public_key_line(*rsa) == kRsaLine);
  CHECK(fingerprint(rsa->blob) == kRsaFingerprint);

  // The blob alone parses the same way (what a client sends).
  auto blob = parse_public_key_blob(rsa->blob);
  REQUIRE(blob.ok());
  CHECK(blob->bits == 3072);
  CHECK(blob->comment.empty());
}

TEST_CASE("key lines: blanks, no comment, comments with spaces") {
  auto k = parse_public_key_line(kEcLine);
  REQUIRE(k.ok());
  const std::string b64 = kEcLine.substr(kEcLine.find(' ') + 1, kEcLine.rfind(' ') - kEcLine.find(' ') - 1);
  auto bare = parse_public_key_line("  ecdsa-sha2-nistp256\t" + b64 + "  \n");
  REQUIRE(bare.ok());
  CHECK(bare->comment.empty());
  CHECK(bare->blob == k->blob);
  CHECK(public_key_line(*bare) == "ecdsa-sha2-nistp256 " + b64);
  auto spaced = parse_public_key_line("ecdsa-sha2-nistp256 " + b64 + " my laptop key");
  REQUIRE(spaced.ok());
  CHECK(spaced->comment == "my laptop key");
}

TEST_CASE("refused keys: Ed25519 with the documented message, other types, small RSA, bad encodings") {
  auto ed = parse_public_key_line(kEd25519Line);
  REQUIRE_FALSE(ed.ok());
  CHECK(ed.status().message() ==
        "ssh-ed25519 keys are not supported (mbedTLS 2.28 has no Ed25519): use ecdsa-sha2-nistp256 or rsa");

  auto p384 = parse_public_key_line(kEc384Line);
  REQUIRE_FALSE(p384.ok());
  CHECK(p384.status().message().find("unknown key type 'ecdsa-sha2-nistp384'") == 0);
  CHECK_FALSE(parse_public_key_line("ssh-dss AAAAB3NzaC1kc3MAAACBAP").ok());

  auto small = parse_public_key_line(kRsa1024Line);
  REQUIRE_FALSE(small.ok());
  CHECK(small.status().message() == "ssh-rsa key has 1024 bits: at least 2048 are needed");

  CHECK(parse_public_key_line("").status().message().find("empty public key line") == 0);
  CHECK(parse_public_key_line("ssh-rsa").status().message().find("no key after") != std::string::npos);
  CHECK(parse_public_key_line("ssh-rsa !!!notbase64!!!").status().message() ==
        "public key is not valid base64");
  CHECK(parse_public_key_line("ssh-rsa " + std::string(9000, 'A')).status().message() ==
        "public key is too long");

  // The line's type must be the blob's type.
  auto ec = parse_public_key_line(kEcLine);
  REQUIRE(ec.ok());
  const std::string b64 = kEcLine.substr(kEcLine.find(' ') + 1, kEcLine.rfind(' ') - kEcLine.find(' ') - 1);
  CHECK(
      parse_public_key_line("ssh-rsa " + b64).status().message().find("but the key is ecdsa-sha2-nistp256") !=
      std::string::npos);

  // A point off the curve, a compressed point, the wrong curve name, trailing bytes.
  WireReader r(ec->blob);
  std::string_view type, curve, point;
  REQUIRE(r.string(type));
  REQUIRE(r.string(curve));
  REQUIRE(r.string(point));
  std::string off(point);
  off[64] = static_cast<char>(off[64] ^ 1);
  CHECK(
      parse_public_key_blob(WireWriter().string(type).string(curve).string(off).take()).status().message() ==
      "ecdsa-sha2-nistp256 key: not a point on the P-256 curve");
  std::string compressed = std::string(1, '\x02') + std::string(point.substr(1, 32));
  CHECK_FALSE(parse_public_key_blob(WireWriter().string(type).string(curve).string(compressed).take()).ok());
  CHECK(parse_public_key_blob(WireWriter().string(type).string("nistp384").string(point).take())
            .status()
            .message()
            .find("expected nistp256") != std::string::npos);
  CHECK(parse_public_key_blob(ec->blob + "x").status().message() == "malformed ecdsa-sha2-nistp256 key");
  CHECK_FALSE(parse_public_key_blob("").ok());
  CHECK_FALSE(parse_public_key_blob(ec->blob.substr(0, ec->blob.size() - 1)).ok());

  // RSA: an even modulus is no RSA key.
  auto rsa = parse_public_key_line(kRsaLine);
  REQUIRE(rsa.ok());
  std::string even = rsa->blob;
  even.back() = static_cast<char>(even.back() & ~1);
  CHECK_FALSE(parse_public_key_blob(even).ok());
}

TEST_CASE("signatures made by paramiko verify; tampered data, signature, key or algorithm don't") {
  auto ec = parse_public_key_line(kEcLine);
  auto rsa = parse_public_key_line(kRsaLine);
  REQUIRE(ec.ok());
  REQUIRE(rsa.ok());

  CHECK(verify_signature(ec->blob, "ecdsa-sha2-nistp256", kEcSig, kData));
  CHECK(verify_signature(rsa->blob, "rsa-sha2-256", kRsa256Sig, kData));
  CHECK(verify_signature(rsa->blob, "rsa-sha2-512", kRsa512Sig, kData));

  // SHA-1 "ssh-rsa" signatures are refused, even when genuine.
  CHECK_FALSE(verify_signature(rsa->blob, "ssh-rsa", kRsaSha1Sig, kData));

  // Other data.
  std::string data = kData;
  data[0] ^= 1;
  CHECK_FALSE(verify_signature(ec->blob, "ecdsa-sha2-nistp256", kEcSig, data));
  CHECK_FALSE(verify_signature(rsa->blob, "rsa-sha2-256", kRsa256Sig, data));
  CHECK_FALSE(verify_signature(rsa->blob, "rsa-sha2-512", kRsa512Sig, data));

  // A flipped signature bit.
  std::string bad = kEcSig;
  bad[bad.size() - 3] ^= 0x10;
  CHECK_FALSE(verify_signature(ec->blob, "ecdsa-sha2-nistp256", bad, kData));
  bad = kRsa256Sig;
  bad[bad.size() - 3] ^= 0x10;
  CHECK_FALSE(verify_signature(rsa->blob, "rsa-sha2-256", bad, kData));

  // The algorithm named in the request must be the one in the blob and fit the key.
  CHECK_FALSE(verify_signature(rsa->blob, "rsa-sha2-512", kRsa256Sig, kData));
  CHECK_FALSE(
      verify_signature(rsa->blob, "rsa-sha2-256", sig_with("rsa-sha2-256", sig_inner(kRsa512Sig)), kData));
  CHECK_FALSE(verify_signature(ec->blob, "rsa-sha2-256", kRsa256Sig, kData));
  CHECK_FALSE(verify_signature(rsa->blob, "ecdsa-sha2-nistp256", kEcSig, kData));
  CHECK_FALSE(verify_signature(ec->blob, "ssh-ed25519", kEcSig, kData));

  // Another key of the same type.
  auto other = parse_public_key_line(kRsa1024Line);  // refused as a key, and no match anyway
  CHECK_FALSE(other.ok());

  // Malformed signature blobs: truncated, trailing bytes, r/s not mpints.
  CHECK_FALSE(verify_signature(ec->blob, "ecdsa-sha2-nistp256", kEcSig.substr(0, kEcSig.size() - 1), kData));
  CHECK_FALSE(verify_signature(ec->blob, "ecdsa-sha2-nistp256", kEcSig + "x", kData));
  CHECK_FALSE(
      verify_signature(ec->blob, "ecdsa-sha2-nistp256", sig_with("ecdsa-sha2-nistp256", "garbage"), kData));
  CHECK_FALSE(verify_signature(ec->blob, "ecdsa-sha2-nistp256",
                               sig_with("ecdsa-sha2-nistp256", WireWriter().string("").string("").take()),
                               kData));
  CHECK_FALSE(verify_signature(rsa->blob, "rsa-sha2-256", sig_with("rsa-sha2-256", ""), kData));
  CHECK_FALSE(verify_signature(rsa->blob, "rsa-sha2-256", sig_with("rsa-sha2-256", std::string(385, '\x01')),
                               kData));  // longer than n
  CHECK_FALSE(verify_signature("", "rsa-sha2-256", kRsa256Sig, kData));
  CHECK_FALSE(verify_signature(rsa->blob, "rsa-sha2-256", "", kData));

  // A signature shorter than the modulus is left-padded (as OpenSSH does):
  // dropping a leading zero byte keeps it valid only if that byte was zero.
  const std::string inner = sig_inner(kRsa256Sig);
  if (inner[0] == 0) {
    CHECK(verify_signature(rsa->blob, "rsa-sha2-256", sig_with("rsa-sha2-256", inner.substr(1)), kData));
  } else {
    CHECK_FALSE(
        verify_signature(rsa->blob, "rsa-sha2-256", sig_with("rsa-sha2-256", inner.substr(1)), kData));
  }
}

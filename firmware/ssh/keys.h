// User public keys for SSH public-key authentication (RFC 4253 §6.6,
// RFC 5656 §3, RFC 8332): the OpenSSH one-line form users paste into the
// config (`username NAME ssh-key TYPE BASE64 [COMMENT]`), the SSH wire
// encoding ("blob") the client sends, OpenSSH's SHA256 fingerprint, and the
// check of a signature made with the matching private key.
//
// Accepted key types: ecdsa-sha2-nistp256 (curve "nistp256", a 65-byte
// uncompressed point that must lie on P-256) and ssh-rsa with a modulus of
// at least 2048 bits. ssh-ed25519 is refused with a clear message: mbedTLS
// 2.28, the only crypto library keel uses, has no Ed25519. Signatures:
// ecdsa-sha2-nistp256 (SHA-256) and rsa-sha2-256 / rsa-sha2-512 (PKCS#1
// v1.5); "ssh-rsa" signatures (SHA-1) are refused.
//
// mbedTLS stays inside keys.cpp (this header includes none of it).
//
// Thread-safety: every function is reentrant (each call has its own mbedTLS
// contexts; no shared state).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace keel::ssh {

inline constexpr std::string_view kEd25519Refused =
    "ssh-ed25519 keys are not supported (mbedTLS 2.28 has no Ed25519): use ecdsa-sha2-nistp256 or rsa";
// An RSA modulus below this many bits is refused.
inline constexpr int kMinRsaBits = 2048;
// A larger RSA modulus is refused too (bounds the cost of one verify).
inline constexpr int kMaxRsaBits = 16384;

struct PublicKey {
  std::string type;     // "ecdsa-sha2-nistp256" | "ssh-rsa"
  std::string blob;     // SSH wire encoding (what the client sends in USERAUTH_REQUEST)
  std::string comment;  // may be empty
  int bits = 0;         // 256 for P-256, the modulus size for RSA
};

// "TYPE BASE64 [COMMENT]" (leading/trailing blanks ignored; the comment is
// the rest of the line). The TYPE must match the type inside the blob.
Result<PublicKey> parse_public_key_line(std::string_view line);
// Checks a wire blob (as a client sends it) and describes it; comment "".
Result<PublicKey> parse_public_key_blob(std::string_view blob);
// TYPE BASE64[ COMMENT]
std::string public_key_line(const PublicKey& k);
// "SHA256:<base64 of SHA-256(blob), no padding>", as `ssh-keygen -lf` prints.
std::string fingerprint(std::string_view blob);
// Checks an SSH signature blob (string alg, string sig) over data with public
// key blob. `sig_alg` is the algorithm the client named in its request; it
// must equal the one inside the signature blob and fit the key type.
bool verify_signature(std::string_view key_blob, std::string_view sig_alg, std::string_view sig_blob,
                      std::string_view data);

}  // namespace keel::ssh

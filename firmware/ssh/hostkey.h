// The server's host keys: ecdsa-sha2-nistp256 (P-256) and RSA 3072 (signing
// with rsa-sha2-512 and rsa-sha2-256, RFC 8332; never ssh-rsa/SHA-1).
//
// load_or_generate(DIR) reads DIR/ssh_host_ecdsa_key (SEC1 "EC PRIVATE KEY"
// PEM) and DIR/ssh_host_rsa_key (PKCS#1 "RSA PRIVATE KEY" PEM) — the formats
// `ssh-keygen -y -f` reads too. A missing file is generated with mbedTLS and
// written atomically (tmp file 0600, fsync, rename, fsync of DIR); a file
// that exists but does not parse, or holds the wrong key type, is an error
// naming the file: it is never silently replaced (that would change the
// host's identity under every client's known_hosts). A file of ours that
// group or others may read or write (mode & 077) is refused as sshd refuses
// it, with an error naming the file and its mode: never used, never
// silently chmodded.
//
// Thread-safety: immutable after load_or_generate(); sign() may run on any
// thread with its own Random (the mbedTLS key contexts are only read).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "ssh/random.h"

namespace keel::ssh {

class HostKeys {
 public:
  ~HostKeys();
  HostKeys(const HostKeys&) = delete;
  HostKeys& operator=(const HostKeys&) = delete;

  // DIR/ssh_host_ecdsa_key and DIR/ssh_host_rsa_key (PEM, mode 0600); missing ones are generated.
  static Result<std::unique_ptr<HostKeys>> load_or_generate(const std::string& dir, Random& rnd);
  // Both keys generated in memory (tests, fuzzing); rsa_bits 3072 by default.
  static Result<std::unique_ptr<HostKeys>> generate(Random& rnd, int rsa_bits = 3072);

  // "ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256" (server preference order).
  std::vector<std::string> algorithms() const { return names(); }
  // The same, without keys (what a configuration may name).
  static const std::vector<std::string>& names();
  // SSH wire public key for a host key algorithm ("" for an unknown one).
  std::string public_blob(std::string_view alg) const;
  // Signature blob (string alg, string signature) over `data`.
  Result<std::string> sign(std::string_view alg, std::string_view data, Random& rnd) const;
  // `ssh-keygen -lf` style: "256 SHA256:<base64, no padding> (ECDSA)", "3072 SHA256:... (RSA)"
  std::vector<std::string> fingerprints() const;
  // OpenSSH public key lines ("ecdsa-sha2-nistp256 AAAA...", "ssh-rsa AAAA...").
  std::vector<std::string> public_key_lines() const;

 private:
  HostKeys();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::ssh

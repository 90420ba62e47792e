// The SSH transport layer (RFC 4253), sans-IO: fed the bytes the client sent,
// it produces the bytes to send back; the server does the socket I/O. It
// handles messages 1-49 itself: the version exchange, the binary packet
// protocol, KEXINIT negotiation, the ECDH key exchanges (curve25519-sha256,
// curve25519-sha256@libssh.org, ecdh-sha2-nistp256), NEWKEYS, strict kex
// (kex-strict-s-v00@openssh.com, OpenSSH's Terrapin countermeasure),
// IGNORE/DEBUG/UNIMPLEMENTED, SERVICE_REQUEST "ssh-userauth", EXT_INFO
// server-sig-algs after the first NEWKEYS when the client offered ext-info-c,
// and re-keying (either side; after rekey_bytes in either direction or
// rekey_ms — the server starts one only once USERAUTH_SUCCESS has gone out
// through send(), as OpenSSH's sshd: its client refuses a KEXINIT during
// user authentication; the client may start one at any time). Messages >= 50 are handed up through
// poll_message() once ssh-userauth was accepted; before that they are a protocol error.
//
// Ciphers: chacha20-poly1305@openssh.com, aes256-gcm@openssh.com,
// aes128-gcm@openssh.com, aes256-ctr and aes128-ctr with
// hmac-sha2-256-etm@openssh.com / hmac-sha2-512-etm@openssh.com. Nothing with
// SHA-1, CBC, DSA, or "none".
//
// Bounds: a version line of at most 255 bytes after at most 32 KiB / 50
// lines of preamble; packets of at most 35000 bytes (+ MAC); incoming
// payloads waiting for poll_message() are bounded by the caller reading
// them (the server stops feeding while output_size() is large).
//
// Every error is a DISCONNECT with the right reason queued in the output,
// closed() true and error() saying why; feed() returns the error too.
//
// Thread-safety: none; a Transport belongs to one connection on the SSH I/O
// thread. The HostKeys and Random in its config are used from that thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "ssh/hostkey.h"
#include "ssh/random.h"

namespace keel::ssh {

struct TransportConfig {
  std::string software = "keel";        // "SSH-2.0-keel_<version>"
  const HostKeys* host_keys = nullptr;  // outlives the transport
  Random* random = nullptr;
  uint64_t rekey_bytes = 1ull << 30;  // either direction
  uint64_t rekey_ms = 3600 * 1000;
  // The algorithms offered, in preference order (addition to the design):
  // empty means all keel has, in its order (transport_algorithms()); a list
  // keeps only the names keel has. E.g. kex {"curve25519-sha256"} and
  // host_keys {"rsa-sha2-512","rsa-sha2-256"} leave out the NIST P-256
  // ones that ssh-audit 2.5 marks [fail].
  std::vector<std::string> kex, host_keys_offered, ciphers, macs;
};

// What keel's transport can do, in its preference order: "kex", "cipher",
// "mac", "host_key" (HostKeys::names()); empty for anything else.
const std::vector<std::string>& transport_algorithms(std::string_view what);

class Transport {
 public:
  explicit Transport(TransportConfig cfg);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  Status feed(std::string_view bytes,
              uint64_t now_ms);  // error: close after flushing output (DISCONNECT queued)
  bool poll_message(std::string& payload, uint32_t* seq = nullptr);  // next message >= 50, in order
  void send(std::string_view payload);  // message >= 50 from above; held during a re-key
  void unimplemented(uint32_t seq);     // SSH_MSG_UNIMPLEMENTED for a message above didn't know
  void disconnect(uint32_t reason, std::string_view text);  // queue DISCONNECT; closed() becomes true
  std::string take_output();
  size_t output_size() const;
  void tick(uint64_t now_ms);  // time-based re-key
  bool closed() const;         // stop feeding; flush output, then close the socket
  bool ready() const;          // first kex done and ssh-userauth accepted
  std::string_view session_id() const;
  struct Algorithms {
    std::string kex, host_key, cipher_in, cipher_out, mac_in, mac_out;
  };
  const Algorithms& algorithms() const;
  const std::string& client_version() const;
  uint32_t disconnect_reason() const;
  const std::string& error() const;  // why it closed (logs)
  // Key exchanges completed (1 after the first; re-keys add one each).
  uint64_t kex_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::ssh

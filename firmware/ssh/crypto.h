// The SSH transport's cryptography on mbedTLS 2.28 (private to firmware/ssh:
// nothing outside it includes this header, and it includes no mbedTLS
// header itself).
//
//   * hashes and HMAC (SHA-256, SHA-512);
//   * Kex: the server's ephemeral side of curve25519-sha256 (RFC 8731, X25519
//     through mbedTLS's Montgomery curve MBEDTLS_ECP_DP_CURVE25519) and
//     ecdh-sha2-nistp256 (RFC 5656); agree() returns the shared secret K as
//     the big-endian magnitude the caller encodes as an mpint;
//   * derive_key(): RFC 4253 §7.2, extended to any length;
//   * PacketCipher: one direction of the binary packet protocol —
//     chacha20-poly1305@openssh.com (PROTOCOL.chacha20poly1305: K_1 = the
//     second 32 key bytes encrypts the length, K_2 = the first 32 the
//     payload from block 1, Poly1305 key from K_2 block 0, nonce = the
//     64-bit sequence number), aes256-gcm@openssh.com / aes128-gcm@openssh.com
//     (RFC 5647 as OpenSSH does it: length in clear as AAD, 12-byte IV whose
//     last 8 bytes are an invocation counter incremented per packet), and
//     aes256-ctr / aes128-ctr with hmac-sha2-256-etm@openssh.com /
//     hmac-sha2-512-etm@openssh.com (length in clear, the MAC over
//     uint32 seq || length || ciphertext). The length field is always the
//     first 4 bytes of a packet (encrypted only by chacha20-poly1305), so
//     every mode aligns packet_length (without the length field) to its
//     block size.
//
// Thread-safety: none; every object belongs to one Transport (one thread).
// The free functions are reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "ssh/random.h"

namespace keel::ssh::crypto {

std::string sha256(std::string_view data);
std::string sha512(std::string_view data);
// HMAC with SHA-256 (bits 256) or SHA-512 (bits 512).
std::string hmac(int bits, std::string_view key, std::string_view data);
// X25519 (RFC 7748 §5) for known-answer tests: false when mbedTLS fails or
// the result is all zero.
bool x25519(const uint8_t scalar[32], const uint8_t u[32], uint8_t out[32]);

// The hash of a key exchange method ("curve25519-sha256" -> SHA-256).
std::string kex_hash(std::string_view kex, std::string_view data);

class Kex {
 public:
  virtual ~Kex() = default;
  // curve25519-sha256, curve25519-sha256@libssh.org, ecdh-sha2-nistp256;
  // nullptr for another name or when key generation fails.
  static std::unique_ptr<Kex> make(std::string_view name, Random& rnd);
  // Q_S, the server's ephemeral public key as sent.
  virtual const std::string& public_key() const = 0;
  // K from the client's Q_C (big-endian magnitude); an error for a point
  // that is not on the curve, of the wrong size, or an all-zero secret.
  virtual Result<std::string> agree(std::string_view client_public, Random& rnd) = 0;
};

// RFC 4253 §7.2: HASH(K || H || letter || session_id), extended with
// HASH(K || H || K1 || ...) to `len` bytes. `k_mpint` is K encoded as an
// mpint (with its length).
std::string derive_key(std::string_view kex, std::string_view k_mpint, std::string_view h, char letter,
                       std::string_view session_id, size_t len);

struct CipherInfo {
  std::string_view name;
  size_t key_len, iv_len, block;
  bool aead;  // carries its own tag: no MAC negotiated
};
struct MacInfo {
  std::string_view name;
  size_t key_len, tag_len;
  int bits;
};
const CipherInfo* find_cipher(std::string_view name);
const MacInfo* find_mac(std::string_view name);

class PacketCipher {
 public:
  virtual ~PacketCipher() = default;
  // `mac` is nullptr for an AEAD cipher. Keys are as derived (key_len,
  // iv_len, mac key_len bytes). nullptr if mbedTLS refuses the key.
  static std::unique_ptr<PacketCipher> make(const CipherInfo& c, const MacInfo* mac, std::string_view key,
                                            std::string_view iv, std::string_view mac_key);
  virtual size_t block_size() const = 0;
  virtual size_t tag_size() const = 0;
  // packet_length from the first 4 bytes of a packet (as received).
  virtual uint32_t length(uint32_t seq, const uint8_t* first4) = 0;
  // Authenticates and decrypts in place the `n` bytes of a packet (the 4
  // length bytes included; they stay as received), `tag` following them.
  // false: bad MAC/tag (nothing usable).
  virtual bool open(uint32_t seq, uint8_t* pkt, size_t n, const uint8_t* tag) = 0;
  // Encrypts in place `n` bytes of a plaintext packet (length included)
  // and writes tag_size() bytes to `tag`.
  virtual void seal(uint32_t seq, uint8_t* pkt, size_t n, uint8_t* tag) = 0;
};

}  // namespace keel::ssh::crypto

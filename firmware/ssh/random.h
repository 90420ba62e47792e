// Random bytes for the SSH server: mbedTLS's CTR-DRBG (AES-256) seeded from
// its entropy pool (getrandom/urandom on Linux). Every nonce, ephemeral kex
// key, padding byte, host key and ECDSA/RSA blinding value comes from here.
//
// In fuzz builds only (KEEL_SSH_FUZZ defined: the keel_ssh_fuzz library the
// fuzz targets link; never the keel binary) Random::deterministic(seed)
// makes a generator whose output depends only on the seed, so a fuzz input
// replays the same key exchange.
//
// Thread-safety: one Random per thread (fill() is not safe concurrently on
// one object). The SSH I/O thread owns the server's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace keel::ssh {

class Random {
 public:
  Random();  // seeded from the entropy pool; ok() false if seeding failed
  ~Random();
  Random(const Random&) = delete;
  Random& operator=(const Random&) = delete;

#ifdef KEEL_SSH_FUZZ
  static std::unique_ptr<Random> deterministic(uint64_t seed);
#endif

  bool ok() const;
  // Fills `n` bytes; false (buffer zeroed) if the DRBG failed.
  bool fill(void* out, size_t n);

  // An mbedTLS f_rng callback (p_rng = this Random).
  static int mbedtls_rng(void* self, unsigned char* out, size_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::ssh

// Password hashing for console logins and (later) SSH password
// authentication: PBKDF2-HMAC-SHA256 from mbedTLS, which stays inside
// firmware/ssh (this header includes none of it).
//
// Stored form, one line, safe to print in the running config:
//
//   pbkdf2-sha256$ITER$SALT_HEX$HASH_HEX
//
//   ITER      decimal iteration count, kMinIterations..kMaxIterations (the
//             upper bound keeps a tampered config from making one login
//             attempt run for minutes)
//   SALT_HEX  16 random bytes (CTR-DRBG seeded from the entropy pool), 32
//             lower-case hex digits
//   HASH_HEX  the 32-byte derived key, 64 lower-case hex digits
//
// Cost: one hash or verify at kDefaultIterations is about 5 ms on an x86
// core and 15-30 ms on a NIC's ARM core -- paid per login attempt and per
// `username ... password`, never on the fast path.
//
// Thread-safety: every function is reentrant (each call has its own mbedTLS
// contexts).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace keel::ssh {

inline constexpr std::string_view kPasswordScheme = "pbkdf2-sha256";
inline constexpr uint32_t kDefaultIterations = 20000;
inline constexpr uint32_t kMinIterations = 10000;
inline constexpr uint32_t kMaxIterations = 1000000;
inline constexpr size_t kSaltBytes = 16;
inline constexpr size_t kHashBytes = 32;
// Longer passwords are refused (they only cost hashing time).
inline constexpr size_t kMaxPasswordBytes = 256;

// Hashes `password` with a fresh random salt. Fails when the password is
// empty or too long, or the random generator can't be seeded.
Result<std::string> hash_password(std::string_view password, uint32_t iterations = kDefaultIterations);

// Checks that `stored` is a well-formed stored hash (scheme, iteration
// bounds, hex lengths); says what is wrong.
Status check_stored_hash(std::string_view stored);

// True when `password` hashes to `stored` (compared in constant time).
// False for a malformed `stored`.
bool verify_password(std::string_view password, std::string_view stored);

}  // namespace keel::ssh

// PBKDF2-HMAC-SHA256 password hashes on mbedTLS 2.28 (see password.h).
#include "ssh/password.h"

// constant_time.h (2.28) lacks the extern "C" guard the other headers have.
extern "C" {
#include <mbedtls/constant_time.h>
}
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/md.h>
#include <mbedtls/pkcs5.h>
#include <mbedtls/platform_util.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace keel::ssh {

namespace {

// RAII for the mbedTLS contexts (they hold no heap until set up, and their
// free functions accept an initialized-but-unused context).
struct Drbg {
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  Drbg() {
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
  }
  ~Drbg() {
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
  }
  Drbg(const Drbg&) = delete;
  Drbg& operator=(const Drbg&) = delete;
};

struct Md {
  mbedtls_md_context_t ctx;
  Md() { mbedtls_md_init(&ctx); }
  ~Md() { mbedtls_md_free(&ctx); }
  Md(const Md&) = delete;
  Md& operator=(const Md&) = delete;
};

std::string to_hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[p[i] >> 4];
    s[2 * i + 1] = kDigits[p[i] & 0xf];
  }
  return s;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is not the stored form
}

template <size_t N>
bool from_hex(std::string_view s, std::array<unsigned char, N>& out) {
  if (s.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return true;
}

struct Parsed {
  uint32_t iterations = 0;
  std::array<unsigned char, kSaltBytes> salt{};
  std::array<unsigned char, kHashBytes> hash{};
};

Result<Parsed> parse(std::string_view stored) {
  auto next = [&stored]() {
    size_t d = stored.find('$');
    std::string_view f = stored.substr(0, d);
    stored = d == std::string_view::npos ? std::string_view{} : stored.substr(d + 1);
    return f;
  };
  const size_t fields = static_cast<size_t>(std::count(stored.begin(), stored.end(), '$')) + 1;
  if (fields != 4) return invalid("a password hash has 4 '$'-separated fields: " + std::string(kPasswordScheme) + "$ITER$SALT$HASH");
  if (next() != kPasswordScheme) return invalid("unknown password hash scheme (expected " + std::string(kPasswordScheme) + ")");
  Parsed p;
  std::string_view iter = next();
  auto [end, ec] = std::from_chars(iter.data(), iter.data() + iter.size(), p.iterations);
  if (ec != std::errc() || end != iter.data() + iter.size() || p.iterations < kMinIterations ||
      p.iterations > kMaxIterations)
    return invalid("password hash iterations must be " + std::to_string(kMinIterations) + ".." +
                   std::to_string(kMaxIterations));
  if (!from_hex(next(), p.salt)) return invalid("password hash salt must be " + std::to_string(2 * kSaltBytes) + " lower-case hex digits");
  if (!from_hex(next(), p.hash)) return invalid("password hash must be " + std::to_string(2 * kHashBytes) + " lower-case hex digits");
  return p;
}

Status derive(std::string_view password, const unsigned char* salt, uint32_t iterations, unsigned char* out) {
  Md md;
  const mbedtls_md_info_t* info = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
  if (!info || mbedtls_md_setup(&md.ctx, info, 1) != 0) return error(Errc::internal, "SHA-256 HMAC unavailable");
  if (mbedtls_pkcs5_pbkdf2_hmac(&md.ctx, reinterpret_cast<const unsigned char*>(password.data()), password.size(),
                                salt, kSaltBytes, iterations, kHashBytes, out) != 0)
    return error(Errc::internal, "PBKDF2 failed");
  return {};
}

}  // namespace

Result<std::string> hash_password(std::string_view password, uint32_t iterations) {
  if (password.empty()) return invalid("empty password");
  if (password.size() > kMaxPasswordBytes) return invalid("password longer than " + std::to_string(kMaxPasswordBytes) + " bytes");
  if (iterations < kMinIterations || iterations > kMaxIterations) return invalid("iterations out of range");
  std::array<unsigned char, kSaltBytes> salt{};
  {
    Drbg rng;
    static constexpr unsigned char kPers[] = "keel password salt";
    if (mbedtls_ctr_drbg_seed(&rng.drbg, mbedtls_entropy_func, &rng.entropy, kPers, sizeof kPers - 1) != 0 ||
        mbedtls_ctr_drbg_random(&rng.drbg, salt.data(), salt.size()) != 0)
      return error(Errc::unavailable, "no entropy for a password salt");
  }
  std::array<unsigned char, kHashBytes> hash{};
  if (Status st = derive(password, salt.data(), iterations, hash.data()); !st.ok()) return st;
  std::string s = std::string(kPasswordScheme) + "$" + std::to_string(iterations) + "$" +
                  to_hex(salt.data(), salt.size()) + "$" + to_hex(hash.data(), hash.size());
  mbedtls_platform_zeroize(hash.data(), hash.size());
  return s;
}

Status check_stored_hash(std::string_view stored) {
  auto p = parse(stored);
  return p ? Status{} : std::move(p).take_status();
}

bool verify_password(std::string_view password, std::string_view stored) {
  auto p = parse(stored);
  if (!p || password.size() > kMaxPasswordBytes) return false;
  std::array<unsigned char, kHashBytes> got{};
  if (!derive(password, p->salt.data(), p->iterations, got.data()).ok()) return false;
  const bool same = mbedtls_ct_memcmp(got.data(), p->hash.data(), kHashBytes) == 0;
  mbedtls_platform_zeroize(got.data(), got.size());
  return same;
}

}  // namespace keel::ssh

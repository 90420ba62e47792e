// Random bytes on mbedTLS's CTR-DRBG (see random.h).
#include "ssh/random.h"

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>

#include <cstring>

namespace keel::ssh {

struct Random::Impl {
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  bool ok = false;
#ifdef KEEL_SSH_FUZZ
  uint64_t seed = 0, counter = 0;
#endif
  Impl() {
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
  }
  ~Impl() {
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
  }
};

Random::Random() : impl_(std::make_unique<Impl>()) {
  static const char kPersonal[] = "keel ssh";
  impl_->ok =
      mbedtls_ctr_drbg_seed(&impl_->drbg, mbedtls_entropy_func, &impl_->entropy,
                            reinterpret_cast<const unsigned char*>(kPersonal), sizeof kPersonal - 1) == 0;
  // Re-seeds from the pool every 10000 requests (CTR-DRBG's default interval).
  mbedtls_ctr_drbg_set_prediction_resistance(&impl_->drbg, MBEDTLS_CTR_DRBG_PR_OFF);
}

Random::~Random() = default;

#ifdef KEEL_SSH_FUZZ
namespace {
// Entropy that depends only on the seed: a splitmix64 stream.
int fuzz_entropy(void* p, unsigned char* out, size_t n) {
  auto* impl = static_cast<uint64_t*>(p);  // {seed, counter}
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = impl[0] + 0x9e3779b97f4a7c15ull * ++impl[1];
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    out[i] = static_cast<unsigned char>(z ^ (z >> 31));
  }
  return 0;
}
}  // namespace

std::unique_ptr<Random> Random::deterministic(uint64_t seed) {
  auto r = std::make_unique<Random>();
  Impl& im = *r->impl_;
  mbedtls_ctr_drbg_free(&im.drbg);
  mbedtls_ctr_drbg_init(&im.drbg);
  im.seed = seed;
  im.counter = 0;
  im.ok = mbedtls_ctr_drbg_seed(&im.drbg, fuzz_entropy, &im.seed, nullptr, 0) == 0;
  // Never re-seed from the pool (the interval is per request; keep it far away).
  mbedtls_ctr_drbg_set_reseed_interval(&im.drbg, 0x7fffffff);
  return r;
}
#endif

bool Random::ok() const { return impl_->ok; }

bool Random::fill(void* out, size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  const size_t total = n;
  while (n > 0) {
    const size_t chunk = n < MBEDTLS_CTR_DRBG_MAX_REQUEST ? n : MBEDTLS_CTR_DRBG_MAX_REQUEST;
    if (!impl_->ok || mbedtls_ctr_drbg_random(&impl_->drbg, p, chunk) != 0) {
      std::memset(out, 0, total);
      return false;
    }
    p += chunk;
    n -= chunk;
  }
  return true;
}

int Random::mbedtls_rng(void* self, unsigned char* out, size_t n) {
  return static_cast<Random*>(self)->fill(out, n) ? 0 : MBEDTLS_ERR_CTR_DRBG_ENTROPY_SOURCE_FAILED;
}

}  // namespace keel::ssh

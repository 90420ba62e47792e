// stub (interface commit)
#include "ssh/random.h"
#include <cstring>
namespace keel::ssh {
struct Random::Impl {};
Random::Random() = default;
Random::~Random() = default;
bool Random::ok() const { return false; }
bool Random::fill(void* out, size_t n) { std::memset(out, 0, n); return false; }
int Random::mbedtls_rng(void* self, unsigned char* out, size_t n) { return static_cast<Random*>(self)->fill(out, n) ? 0 : -1; }
}  // namespace keel::ssh

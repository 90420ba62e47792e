// Fuzz target: the SSH key material keel reads from outside: OpenSSH public
// key lines (`username NAME ssh-key ...`, firmware/ssh/keys.h), public key
// blobs as a client sends them, stored password hashes (`username NAME
// secret HASH`, firmware/ssh/password.h) and the host key files of the
// config directory (firmware/ssh/hostkey.h). Byte 0 picks which; the rest is
// the text or bytes.
//   0 key line:  accepted -> printed and parsed again gives the same key;
//                its blob parses to the same type and size; the
//                fingerprint is "SHA256:" and 43 base64 characters.
//   1 key blob:  accepted -> the line made of it parses to the same blob.
//   2 hash:      accepted exactly when it is pbkdf2-sha256$ITER$SALT$HASH
//                with ITER in bounds, 32 and 64 lower-case hex digits
//                (checked here independently of password.cpp).
//   3 / 4 host key file (the ECDSA / RSA one; the other is a valid key):
//                refused with a message naming the file, or loaded, and
//                then a signature made with the loaded key verifies with
//                the public key it advertises.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "ssh/hostkey.h"
#include "ssh/keys.h"
#include "ssh/password.h"
#include "ssh/random.h"

using namespace keel;
using namespace keel::ssh;
using keel::fuzz::check;

namespace {

bool same(const PublicKey& a, const PublicKey& b) {
  return a.type == b.type && a.blob == b.blob && a.comment == b.comment && a.bits == b.bits;
}

void key_line(std::string_view line) {
  auto k = parse_public_key_line(line);
  if (!k) return;
  auto again = parse_public_key_line(public_key_line(*k));
  check(again && same(*again, *k), "a key line does not round-trip");
  auto blob = parse_public_key_blob(k->blob);
  check(blob && blob->type == k->type && blob->bits == k->bits && blob->blob == k->blob, "its blob differs");
  const std::string fp = fingerprint(k->blob);
  check(fp.size() == 7 + 43 && fp.rfind("SHA256:", 0) == 0, "a bad fingerprint");
}

void key_blob(std::string_view blob) {
  auto k = parse_public_key_blob(blob);
  if (!k) return;
  check(k->blob == blob && k->comment.empty(), "a blob changed");
  auto line = parse_public_key_line(public_key_line(*k));
  check(line && line->blob == blob && line->type == k->type, "a blob's line does not round-trip");
}

bool lower_hex(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The stored form, as password.h describes it.
bool well_formed_hash(std::string_view s) {
  auto field = [&s]() {
    size_t d = s.find('$');
    std::string_view f = s.substr(0, d);
    s = d == std::string_view::npos ? std::string_view{} : s.substr(d + 1);
    return std::pair{f, d != std::string_view::npos};
  };
  auto [scheme, more1] = field();
  auto [iter, more2] = field();
  auto [salt, more3] = field();
  auto [hash, more4] = field();
  if (scheme != kPasswordScheme || !more1 || !more2 || !more3 || more4) return false;
  if (iter.empty()) return false;
  uint64_t n = 0;  // leading zeros are allowed (decimal)
  for (char c : iter) {
    if (c < '0' || c > '9') return false;
    n = std::min<uint64_t>(n * 10 + static_cast<uint64_t>(c - '0'), uint64_t{1} << 40);
  }
  return n >= kMinIterations && n <= kMaxIterations && lower_hex(salt, 2 * kSaltBytes) &&
         lower_hex(hash, 2 * kHashBytes);
}

// Test-only host keys (made with `ssh-keygen -m PEM` for this target; they
// protect nothing).
constexpr std::string_view kEcdsaPem =
    "-----BEGIN EC PRIVATE KEY-----\n"
    "MHcCAQEEIO5OCxs6HKPAZ/fvQPL0gjCTezqUvzJ/Fa2+eevVTEIToAoGCCqGSM49\n"
    "AwEHoUQDQgAEVPAaFNfdHitRMU5DEAZUzzoCHR6OI/HUn2hmD1uyMbfqoZWmY0N5\n"
    "gxJElu/NJuH31TMMOmhR6EOIjvGKYLEd/A==\n"
    "-----END EC PRIVATE KEY-----\n";
constexpr std::string_view kRsaPem =
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA06JlmgRoDdx2E6ObqWwhosDtu/K4mF9aK8RX4AgrEbcgwzah\n"
    "sRkCnUO6oQqUWNOLGeY7PNdqMxcUH1wh8L8moZiCqXh4GNonEwiThKu2uzJGqZ6i\n"
    "tz6LoMSnXmUnQoO9B6rOTHPNMMGGSxHad+Rc0JBRM8ANH7L41n4Se9NKTIyT7FAn\n"
    "JI9pscodKchYmyq6HRmwgiAb9xuMHg8G165d8SBrBHuL/paBO8pa/90aaDDS47/B\n"
    "vgzBxP0FaJjNlovKtswJQ17kmFmo9ttNhE08IP/KIkyo8Ymrv3cuEqxydia7FDmI\n"
    "Gd5fFU9Nkw10TVmRbuAuvdvtTpSt0q+KBmnBYQIDAQABAoIBAATRno8geQ8RvUWK\n"
    "tOVpbyWhz3f3WaEskKTM+nRBM1vap94SDSH3cBINI/99Om4AWRs8nQ4wWHxz0tM4\n"
    "+ZPeAl7tFlKOCewE8Z1TFWrQrx85kJbVpB5Yh/zf5XC2jGuNDN2TE9H1VA9/ZJOq\n"
    "gyc2Na/RDWxIe/QEEvrtUXXs1HUENtM1q+Gp1YY2vxilyuXZPC8f9+aPd5yF2NQL\n"
    "biNIhqqOHGD+2gbhw+FZnB5Yom18HVzFBZmBlRqiPcdMKYyKrWgoQ55Uj+v3GHRW\n"
    "lnkwEi2Szw3CSNyhbd+HfTWlyUkGcabE1+naTPhMQJWC68kr8MH3ZJH0lNvwVYjj\n"
    "9NygMY0CgYEA6+RuZagZ0jx+IP+QbzaCwXVgZarjiYmtP31oFbS+cGoBUGFYcgxm\n"
    "xRkBeTYMDEknNK6wVQp31gKr5NpKCeDX6141Yj+XvKwzUMgp/i5GHajY20YEtGDt\n"
    "QdVPxDSSpy5jpva713iCdWWYlSc1XUiohA3KNoKavmMSf64+JLxwE/0CgYEA5ayd\n"
    "wyTuKUUhNxGTpFGiQvYu4zfCAsDmBqcKf0Y/wGU8MZBw8I/LKOxybLYAcU0imuy6\n"
    "RV4+6TwEdUDnjw0G9LCb1mPcCsvwD8xir2a/IfYd/Y89FXmHsrQCfRnYRbc7b4Q1\n"
    "kEJIK/mHelEUuc5mLnZKKIy3X0tfnenb7gCrdjUCgYAzGbAEm47EaVBVa6dpQCDB\n"
    "MeEpBQT3hXifWVZT5Wyfw4b3V68mPaOBrPIRxPCFNM+mbPVL5tGg7cE4+USysR91\n"
    "IFpmJyqCt7cCF+po4rNTt4EKtzdLr/eVnFUERvNB/h2eTLLScYupTNHp9a1swNGo\n"
    "kagteMt21NVsDV3u7VdGLQKBgQDN8gDtEVp1q0VjaeFoAMNtI+9bU44mhe49nN9u\n"
    "zQExdhWJpCmBrI7RvWPFU1YGQtJ69Tb6KM5kuaqNsYtx3I6WLx8uGREgpUo4AF+l\n"
    "RI6y10yBJ0Xw0a76cSuiHeCucuVa08Rr/ONWe0QeTEI3cnpxwyQwRC3Rx3aP1Tme\n"
    "qv8U2QKBgEHUwysmFM3Hb9CmOY2TwPL0m9Vt/hKAHCVb8G7gOKiqQq74SwnQvwPs\n"
    "YiafJAo/eG4FOe67Ycy9cZHtDpKqXW9BOsJkjH+F+UXVxULDdSUXjDGDwQ+ugLms\n"
    "otk9PzHdOjTdK55S5cVw1z77GlACq6qZOa63l3kV4Mr9idqVvaYH\n"
    "-----END RSA PRIVATE KEY-----\n";

// The target's own host key directory, removed at exit.
const std::string& key_dir() {
  static const std::string* dir = [] {
    char tmpl[] = "/tmp/keel-fuzz-hostkey-XXXXXX";
    if (!mkdtemp(tmpl)) abort();
    auto* d = new std::string(tmpl);  // never freed: the exit handler uses it
    atexit([] {
      for (const char* f : {"ssh_host_ecdsa_key", "ssh_host_rsa_key"}) unlink((key_dir() + "/" + f).c_str());
      rmdir(key_dir().c_str());
    });
    return d;
  }();
  return *dir;
}

void put(const std::string& path, std::string_view text) {
  FILE* f = fopen(path.c_str(), "we");
  if (!f || fwrite(text.data(), 1, text.size(), f) != text.size() || fclose(f) != 0) abort();
  if (chmod(path.c_str(), 0600) != 0) abort();  // a key group or others may read is refused before it parses
}

void host_key(std::string_view file, bool ecdsa) {
  const std::string ec = key_dir() + "/ssh_host_ecdsa_key", rsa = key_dir() + "/ssh_host_rsa_key";
  put(ec, ecdsa ? file : kEcdsaPem);
  put(rsa, ecdsa ? kRsaPem : file);
  auto rnd = Random::deterministic(1);
  auto keys = HostKeys::load_or_generate(key_dir(), *rnd);
  if (!keys) {
    check(keys.status().message().find(ecdsa ? ec : rsa) != std::string::npos,
          "the error does not name the file");
    return;
  }
  const std::string alg = ecdsa ? "ecdsa-sha2-nistp256" : "rsa-sha2-256";
  auto sig = (*keys)->sign(alg, "data", *rnd);
  check(sig.ok(), "a loaded host key does not sign");
  check(verify_signature((*keys)->public_blob(alg), alg, *sig, "data"),
        "a loaded host key's signature does not verify with its public key");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 16384) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 5) {
    case 0:
      key_line(text);
      break;
    case 1:
      key_blob(text);
      break;
    case 2:
      check(check_stored_hash(text).ok() == well_formed_hash(text),
            "check_stored_hash disagrees with the format");
      break;
    case 3:
      host_key(text, true);
      break;
    case 4:
      host_key(text, false);
      break;
  }
  return 0;
}

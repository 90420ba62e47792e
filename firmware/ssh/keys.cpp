// User public keys: parsing the OpenSSH line and wire forms, fingerprints and
// signature checks, on mbedTLS (see keys.h).
//
// Every function builds its own mbedTLS contexts and frees them before it
// returns (RAII holders below), so nothing here is shared between threads.
//
// Thread-safety: reentrant (no shared state).
#include "ssh/keys.h"

#include <mbedtls/base64.h>
#include <mbedtls/bignum.h>
#include <mbedtls/ecdsa.h>
#include <mbedtls/ecp.h>
#include <mbedtls/md.h>
#include <mbedtls/rsa.h>

#include <array>
#include <cstring>

#include "ssh/wire.h"

namespace keel::ssh {
namespace {

constexpr std::string_view kEcdsaType = "ecdsa-sha2-nistp256";
constexpr std::string_view kEcdsaCurve = "nistp256";
constexpr std::string_view kRsaType = "ssh-rsa";
// A base64 text longer than this is refused before decoding (a 16384-bit RSA
// key is ~2.8 KB of base64).
constexpr size_t kMaxBase64 = 8192;
constexpr size_t kP256PointBytes = 65;

const unsigned char* bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

struct Mpi {
  mbedtls_mpi v;
  Mpi() { mbedtls_mpi_init(&v); }
  ~Mpi() { mbedtls_mpi_free(&v); }
  Mpi(const Mpi&) = delete;
  Mpi& operator=(const Mpi&) = delete;
};
struct EcGroup {
  mbedtls_ecp_group g;
  EcGroup() { mbedtls_ecp_group_init(&g); }
  ~EcGroup() { mbedtls_ecp_group_free(&g); }
  EcGroup(const EcGroup&) = delete;
  EcGroup& operator=(const EcGroup&) = delete;
};
struct EcPoint {
  mbedtls_ecp_point p;
  EcPoint() { mbedtls_ecp_point_init(&p); }
  ~EcPoint() { mbedtls_ecp_point_free(&p); }
  EcPoint(const EcPoint&) = delete;
  EcPoint& operator=(const EcPoint&) = delete;
};
struct Rsa {
  mbedtls_rsa_context r;
  Rsa() { mbedtls_rsa_init(&r, MBEDTLS_RSA_PKCS_V15, 0); }
  ~Rsa() { mbedtls_rsa_free(&r); }
  Rsa(const Rsa&) = delete;
  Rsa& operator=(const Rsa&) = delete;
};

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view next_word(std::string_view& s) {
  s = trim(s);
  size_t n = 0;
  while (n < s.size() && !is_blank(s[n])) ++n;
  std::string_view w = s.substr(0, n);
  s = trim(s.substr(n));
  return w;
}

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 40) out += "...";
  return out;
}

Status unknown_type(std::string_view type) {
  if (type == "ssh-ed25519" || type == "sk-ssh-ed25519@openssh.com")
    return invalid(std::string(kEd25519Refused));
  return invalid("unknown key type '" + printable(type) + "' (supported: ecdsa-sha2-nistp256, ssh-rsa)");
}

bool hash(mbedtls_md_type_t type, std::string_view data, unsigned char* out) {
  const mbedtls_md_info_t* info = mbedtls_md_info_from_type(type);
  return info != nullptr && mbedtls_md(info, bytes(data), data.size(), out) == 0;
}

// Loads an ssh-rsa key blob's e and n (already checked by parse_public_key_blob).
bool load_rsa(std::string_view blob, Rsa& rsa) {
  WireReader r(blob);
  std::string_view type, e, n;
  if (!r.string(type) || !r.mpint(e) || !r.mpint(n) || !r.done()) return false;
  if (mbedtls_rsa_import_raw(&rsa.r, bytes(n), n.size(), nullptr, 0, nullptr, 0, nullptr, 0, bytes(e),
                             e.size()) != 0)
    return false;
  return mbedtls_rsa_complete(&rsa.r) == 0 && mbedtls_rsa_check_pubkey(&rsa.r) == 0;
}

bool load_p256(std::string_view point, EcGroup& grp, EcPoint& q) {
  if (point.size() != kP256PointBytes || point[0] != 0x04) return false;  // uncompressed only
  if (mbedtls_ecp_group_load(&grp.g, MBEDTLS_ECP_DP_SECP256R1) != 0) return false;
  if (mbedtls_ecp_point_read_binary(&grp.g, &q.p, bytes(point), point.size()) != 0) return false;
  return mbedtls_ecp_check_pubkey(&grp.g, &q.p) == 0;
}

}  // namespace

Result<PublicKey> parse_public_key_blob(std::string_view blob) {
  WireReader r(blob);
  std::string_view type;
  if (!r.string(type)) return invalid("malformed public key (no key type)");
  PublicKey k;
  k.type = std::string(type);
  k.blob = std::string(blob);
  if (type == kEcdsaType) {
    std::string_view curve, point;
    if (!r.string(curve) || !r.string(point) || !r.done())
      return invalid("malformed ecdsa-sha2-nistp256 key");
    if (curve != kEcdsaCurve)
      return invalid("ecdsa-sha2-nistp256 key names curve '" + printable(curve) + "' (expected nistp256)");
    EcGroup grp;
    EcPoint q;
    if (!load_p256(point, grp, q)) return invalid("ecdsa-sha2-nistp256 key: not a point on the P-256 curve");
    k.bits = 256;
    return k;
  }
  if (type == kRsaType) {
    std::string_view e, n;
    if (!r.mpint(e) || !r.mpint(n) || !r.done()) return invalid("malformed ssh-rsa key");
    size_t bits = n.empty() ? 0 : n.size() * 8;
    for (uint8_t top = n.empty() ? 0 : static_cast<uint8_t>(n[0]); bits > 0 && !(top & 0x80); top <<= 1)
      --bits;
    if (bits < static_cast<size_t>(kMinRsaBits))
      return invalid("ssh-rsa key has " + std::to_string(bits) + " bits: at least " +
                     std::to_string(kMinRsaBits) + " are needed");
    if (bits > static_cast<size_t>(kMaxRsaBits))
      return invalid("ssh-rsa key has " + std::to_string(bits) + " bits: at most " +
                     std::to_string(kMaxRsaBits) + " are accepted");
    Rsa rsa;
    if (!load_rsa(blob, rsa)) return invalid("ssh-rsa key: not a valid RSA public key");
    k.bits = static_cast<int>(bits);
    return k;
  }
  return unknown_type(type);
}

Result<PublicKey> parse_public_key_line(std::string_view line) {
  std::string_view rest = line;
  const std::string_view type = next_word(rest);
  if (type.empty()) return invalid("empty public key line (expected: TYPE BASE64 [COMMENT])");
  if (type != kEcdsaType && type != kRsaType) return unknown_type(type);
  const std::string_view b64 = next_word(rest);
  if (b64.empty()) return invalid("public key line has no key after '" + std::string(type) + "'");
  if (b64.size() > kMaxBase64) return invalid("public key is too long");
  std::string blob(b64.size() * 3 / 4 + 3, '\0');
  size_t len = 0;
  if (mbedtls_base64_decode(reinterpret_cast<unsigned char*>(blob.data()), blob.size(), &len, bytes(b64),
                            b64.size()) != 0)
    return invalid("public key is not valid base64");
  blob.resize(len);
  Result<PublicKey> k = parse_public_key_blob(blob);
  if (!k) return k;
  if (k->type != type)
    return invalid("public key line says '" + std::string(type) + "' but the key is " + k->type);
  k->comment = std::string(rest);
  return k;
}

std::string public_key_line(const PublicKey& k) {
  std::string b64(4 * ((k.blob.size() + 2) / 3) + 1, '\0');
  size_t len = 0;
  if (mbedtls_base64_encode(reinterpret_cast<unsigned char*>(b64.data()), b64.size(), &len, bytes(k.blob),
                            k.blob.size()) != 0)
    len = 0;
  b64.resize(len);
  std::string line = k.type + " " + b64;
  if (!k.comment.empty()) line += " " + k.comment;
  return line;
}

std::string fingerprint(std::string_view blob) {
  std::array<unsigned char, 32> digest{};
  if (!hash(MBEDTLS_MD_SHA256, blob, digest.data())) return "SHA256:?";
  std::array<unsigned char, 64> b64{};
  size_t len = 0;
  if (mbedtls_base64_encode(b64.data(), b64.size(), &len, digest.data(), digest.size()) != 0)
    return "SHA256:?";
  while (len > 0 && b64[len - 1] == '=') --len;
  return "SHA256:" + std::string(reinterpret_cast<const char*>(b64.data()), len);
}

bool verify_signature(std::string_view key_blob, std::string_view sig_alg, std::string_view sig_blob,
                      std::string_view data) {
  WireReader kr(key_blob);
  std::string_view key_type;
  if (!kr.string(key_type)) return false;
  WireReader sr(sig_blob);
  std::string_view inner_alg, sig;
  if (!sr.string(inner_alg) || !sr.string(sig) || !sr.done() || inner_alg != sig_alg) return false;

  if (sig_alg == kEcdsaType) {
    if (key_type != kEcdsaType) return false;
    std::string_view curve, point;
    if (!kr.string(curve) || !kr.string(point) || !kr.done() || curve != kEcdsaCurve) return false;
    EcGroup grp;
    EcPoint q;
    if (!load_p256(point, grp, q)) return false;
    WireReader rs(sig);
    std::string_view r_bytes, s_bytes;
    if (!rs.mpint(r_bytes) || !rs.mpint(s_bytes) || !rs.done() || r_bytes.size() > 32 || s_bytes.size() > 32)
      return false;
    Mpi r, s;
    if (mbedtls_mpi_read_binary(&r.v, bytes(r_bytes), r_bytes.size()) != 0 ||
        mbedtls_mpi_read_binary(&s.v, bytes(s_bytes), s_bytes.size()) != 0)
      return false;
    std::array<unsigned char, 32> digest{};
    if (!hash(MBEDTLS_MD_SHA256, data, digest.data())) return false;
    return mbedtls_ecdsa_verify(&grp.g, digest.data(), digest.size(), &q.p, &r.v, &s.v) == 0;
  }

  mbedtls_md_type_t md = MBEDTLS_MD_NONE;
  size_t md_len = 0;
  if (sig_alg == "rsa-sha2-256") {
    md = MBEDTLS_MD_SHA256;
    md_len = 32;
  } else if (sig_alg == "rsa-sha2-512") {
    md = MBEDTLS_MD_SHA512;
    md_len = 64;
  } else {
    return false;  // "ssh-rsa" (SHA-1) and everything else
  }
  if (key_type != kRsaType || !parse_public_key_blob(key_blob)) return false;
  Rsa rsa;
  if (!load_rsa(key_blob, rsa)) return false;
  const size_t mod_len = mbedtls_rsa_get_len(&rsa.r);
  // Like OpenSSH, a signature shorter than the modulus is left-padded with zeros.
  if (sig.empty() || sig.size() > mod_len) return false;
  std::string padded(mod_len - sig.size(), '\0');
  padded.append(sig);
  std::array<unsigned char, 64> digest{};
  if (!hash(md, data, digest.data())) return false;
  return mbedtls_rsa_pkcs1_verify(&rsa.r, nullptr, nullptr, MBEDTLS_RSA_PUBLIC, md,
                                  static_cast<unsigned>(md_len), digest.data(), bytes(padded)) == 0;
}

}  // namespace keel::ssh

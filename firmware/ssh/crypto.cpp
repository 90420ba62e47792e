// SSH transport cryptography on mbedTLS 2.28 (see crypto.h).
#include "ssh/crypto.h"

extern "C" {
#include <mbedtls/constant_time.h>
}
#include <mbedtls/aes.h>
#include <mbedtls/bignum.h>
#include <mbedtls/chacha20.h>
#include <mbedtls/ecdh.h>
#include <mbedtls/ecp.h>
#include <mbedtls/gcm.h>
#include <mbedtls/md.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/poly1305.h>
#include <mbedtls/sha256.h>
#include <mbedtls/sha512.h>

#include <array>
#include <cstring>

#include "ssh/wire.h"

namespace keel::ssh::crypto {

namespace {

const uint8_t* u8p(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

void put32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
uint32_t get32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

struct Mpi {
  mbedtls_mpi v;
  Mpi() { mbedtls_mpi_init(&v); }
  ~Mpi() { mbedtls_mpi_free(&v); }
};
struct Point {
  mbedtls_ecp_point v;
  Point() { mbedtls_ecp_point_init(&v); }
  ~Point() { mbedtls_ecp_point_free(&v); }
};
struct Group {
  mbedtls_ecp_group v;
  Group() { mbedtls_ecp_group_init(&v); }
  ~Group() { mbedtls_ecp_group_free(&v); }
};

class EcKex final : public Kex {
 public:
  explicit EcKex(bool x25519) : x25519_(x25519) {}
  bool init(Random& rnd) {
    if (mbedtls_ecp_group_load(&grp_.v, x25519_ ? MBEDTLS_ECP_DP_CURVE25519 : MBEDTLS_ECP_DP_SECP256R1) != 0)
      return false;
    if (mbedtls_ecdh_gen_public(&grp_.v, &d_.v, &q_.v, &Random::mbedtls_rng, &rnd) != 0) return false;
    uint8_t buf[65];
    size_t n = 0;
    if (x25519_) {
      // Montgomery points are written as the little-endian u coordinate (RFC 7748).
      if (mbedtls_ecp_point_write_binary(&grp_.v, &q_.v, MBEDTLS_ECP_PF_UNCOMPRESSED, &n, buf, 32) != 0 ||
          n != 32)
        return false;
    } else if (mbedtls_ecp_point_write_binary(&grp_.v, &q_.v, MBEDTLS_ECP_PF_UNCOMPRESSED, &n, buf,
                                              sizeof buf) != 0 ||
               n != 65) {
      return false;
    }
    pub_.assign(reinterpret_cast<char*>(buf), n);
    return true;
  }
  const std::string& public_key() const override { return pub_; }
  Result<std::string> agree(std::string_view peer, Random& rnd) override {
    Point qc;
    if (x25519_) {
      if (peer.size() != 32)
        return invalid("curve25519 public key of " + std::to_string(peer.size()) + " bytes");
      uint8_t u[32];
      std::memcpy(u, peer.data(), 32);
      u[31] &= 0x7f;  // RFC 7748 §5: the top bit is masked
      if (mbedtls_ecp_point_read_binary(&grp_.v, &qc.v, u, 32) != 0)
        return invalid("bad curve25519 public key");
    } else {
      if (peer.size() != 65 || peer[0] != 4)
        return invalid("ecdh-sha2-nistp256 public key is not an uncompressed point");
      if (mbedtls_ecp_point_read_binary(&grp_.v, &qc.v, u8p(peer), peer.size()) != 0 ||
          mbedtls_ecp_check_pubkey(&grp_.v, &qc.v) != 0)
        return invalid("ecdh-sha2-nistp256 public key is not on the curve");
    }
    Mpi z;
    if (mbedtls_ecdh_compute_shared(&grp_.v, &z.v, &qc.v, &d_.v, &Random::mbedtls_rng, &rnd) != 0)
      return invalid("key agreement failed");
    if (mbedtls_mpi_cmp_int(&z.v, 0) == 0) return invalid("key agreement gave an all-zero secret");
    uint8_t k[32];
    if (x25519_) {
      // RFC 8731 §3.1: the X25519 output bytes, read as a big-endian number.
      if (mbedtls_mpi_write_binary_le(&z.v, k, 32) != 0) return invalid("key agreement failed");
    } else if (mbedtls_mpi_write_binary(&z.v, k, 32) != 0) {
      return invalid("key agreement failed");
    }
    std::string out(reinterpret_cast<char*>(k), 32);
    mbedtls_platform_zeroize(k, sizeof k);
    return out;
  }

 private:
  bool x25519_;
  Group grp_;
  Mpi d_;
  Point q_;
  std::string pub_;
};

// ---- ciphers ----

class ChaChaPoly final : public PacketCipher {
 public:
  ChaChaPoly(std::string_view key) {
    mbedtls_chacha20_init(&main_);
    mbedtls_chacha20_init(&header_);
    ok_ = mbedtls_chacha20_setkey(&main_, u8p(key)) == 0 &&
          mbedtls_chacha20_setkey(&header_, u8p(key) + 32) == 0;
  }
  ~ChaChaPoly() override {
    mbedtls_chacha20_free(&main_);
    mbedtls_chacha20_free(&header_);
  }
  bool ok() const { return ok_; }
  size_t block_size() const override { return 8; }
  size_t tag_size() const override { return 16; }
  uint32_t length(uint32_t seq, const uint8_t* first4) override {
    uint8_t out[4];
    crypt(header_, seq, 0, first4, out, 4);
    return get32(out);
  }
  bool open(uint32_t seq, uint8_t* pkt, size_t n, const uint8_t* tag) override {
    uint8_t key[32], mac[16];
    poly_key(seq, key);
    mbedtls_poly1305_mac(key, pkt, n, mac);
    const bool good = mbedtls_ct_memcmp(mac, tag, 16) == 0;
    mbedtls_platform_zeroize(key, sizeof key);
    if (!good) return false;
    crypt(header_, seq, 0, pkt, pkt, 4);
    crypt(main_, seq, 1, pkt + 4, pkt + 4, n - 4);
    return true;
  }
  void seal(uint32_t seq, uint8_t* pkt, size_t n, uint8_t* tag) override {
    crypt(header_, seq, 0, pkt, pkt, 4);
    crypt(main_, seq, 1, pkt + 4, pkt + 4, n - 4);
    uint8_t key[32];
    poly_key(seq, key);
    mbedtls_poly1305_mac(key, pkt, n, tag);
    mbedtls_platform_zeroize(key, sizeof key);
  }

 private:
  // OpenSSH's ChaCha20 has a 64-bit nonce and a 64-bit block counter; the
  // RFC 7539 form with nonce 0^32 || BE64(seq) and a 32-bit counter makes
  // the same key stream while the counter stays below 2^32 blocks.
  static void crypt(mbedtls_chacha20_context& c, uint32_t seq, uint32_t counter, const uint8_t* in,
                    uint8_t* out, size_t n) {
    uint8_t nonce[12] = {0, 0, 0, 0, 0, 0, 0, 0};
    put32(nonce + 8, seq);
    mbedtls_chacha20_starts(&c, nonce, counter);
    mbedtls_chacha20_update(&c, n, in, out);
  }
  void poly_key(uint32_t seq, uint8_t key[32]) {
    static const uint8_t zero[32] = {};
    crypt(main_, seq, 0, zero, key, 32);
  }
  mbedtls_chacha20_context main_, header_;
  bool ok_ = false;
};

class AesGcm final : public PacketCipher {
 public:
  AesGcm(std::string_view key, std::string_view iv) {
    mbedtls_gcm_init(&gcm_);
    std::memcpy(iv_, iv.data(), 12);
    ok_ = mbedtls_gcm_setkey(&gcm_, MBEDTLS_CIPHER_ID_AES, u8p(key), static_cast<unsigned>(key.size() * 8)) ==
          0;
  }
  ~AesGcm() override { mbedtls_gcm_free(&gcm_); }
  bool ok() const { return ok_; }
  size_t block_size() const override { return 16; }
  size_t tag_size() const override { return 16; }
  uint32_t length(uint32_t, const uint8_t* first4) override { return get32(first4); }
  bool open(uint32_t, uint8_t* pkt, size_t n, const uint8_t* tag) override {
    const int rc = mbedtls_gcm_auth_decrypt(&gcm_, n - 4, iv_, 12, pkt, 4, tag, 16, pkt + 4, pkt + 4);
    next_iv();
    return rc == 0;
  }
  void seal(uint32_t, uint8_t* pkt, size_t n, uint8_t* tag) override {
    mbedtls_gcm_crypt_and_tag(&gcm_, MBEDTLS_GCM_ENCRYPT, n - 4, iv_, 12, pkt, 4, pkt + 4, pkt + 4, 16, tag);
    next_iv();
  }

 private:
  // RFC 5647 §7.1: the invocation counter (the last 8 IV bytes) + 1.
  void next_iv() {
    for (int i = 11; i >= 4; --i)
      if (++iv_[i] != 0) break;
  }
  mbedtls_gcm_context gcm_;
  uint8_t iv_[12];
  bool ok_ = false;
};

class AesCtrEtm final : public PacketCipher {
 public:
  AesCtrEtm(std::string_view key, std::string_view iv, const MacInfo& mac, std::string_view mac_key)
      : mac_(mac) {
    mbedtls_aes_init(&aes_);
    mbedtls_md_init(&md_);
    std::memcpy(ctr_, iv.data(), 16);
    const mbedtls_md_info_t* info =
        mbedtls_md_info_from_type(mac.bits == 512 ? MBEDTLS_MD_SHA512 : MBEDTLS_MD_SHA256);
    ok_ = mbedtls_aes_setkey_enc(&aes_, u8p(key), static_cast<unsigned>(key.size() * 8)) == 0 &&
          mbedtls_md_setup(&md_, info, 1) == 0 &&
          mbedtls_md_hmac_starts(&md_, u8p(mac_key), mac_key.size()) == 0;
  }
  ~AesCtrEtm() override {
    mbedtls_aes_free(&aes_);
    mbedtls_md_free(&md_);
  }
  bool ok() const { return ok_; }
  size_t block_size() const override { return 16; }
  size_t tag_size() const override { return mac_.tag_len; }
  uint32_t length(uint32_t, const uint8_t* first4) override { return get32(first4); }
  bool open(uint32_t seq, uint8_t* pkt, size_t n, const uint8_t* tag) override {
    uint8_t mac[64];
    compute(seq, pkt, n, mac);
    if (mbedtls_ct_memcmp(mac, tag, mac_.tag_len) != 0) return false;
    mbedtls_aes_crypt_ctr(&aes_, n - 4, &off_, ctr_, stream_, pkt + 4, pkt + 4);
    return true;
  }
  void seal(uint32_t seq, uint8_t* pkt, size_t n, uint8_t* tag) override {
    mbedtls_aes_crypt_ctr(&aes_, n - 4, &off_, ctr_, stream_, pkt + 4, pkt + 4);
    compute(seq, pkt, n, tag);
  }

 private:
  void compute(uint32_t seq, const uint8_t* pkt, size_t n, uint8_t* out) {
    uint8_t s[4];
    put32(s, seq);
    mbedtls_md_hmac_reset(&md_);
    mbedtls_md_hmac_update(&md_, s, 4);
    mbedtls_md_hmac_update(&md_, pkt, n);
    mbedtls_md_hmac_finish(&md_, out);
  }
  MacInfo mac_;
  mbedtls_aes_context aes_;
  mbedtls_md_context_t md_;
  uint8_t ctr_[16];
  uint8_t stream_[16] = {};
  size_t off_ = 0;
  bool ok_ = false;
};

constexpr CipherInfo kCiphers[] = {
    {"chacha20-poly1305@openssh.com", 64, 0, 8, true},
    {"aes256-gcm@openssh.com", 32, 12, 16, true},
    {"aes128-gcm@openssh.com", 16, 12, 16, true},
    {"aes256-ctr", 32, 16, 16, false},
    {"aes128-ctr", 16, 16, 16, false},
};
constexpr MacInfo kMacs[] = {
    {"hmac-sha2-256-etm@openssh.com", 32, 32, 256},
    {"hmac-sha2-512-etm@openssh.com", 64, 64, 512},
};

}  // namespace

std::string sha256(std::string_view data) {
  std::string out(32, '\0');
  mbedtls_sha256_ret(u8p(data), data.size(), reinterpret_cast<uint8_t*>(out.data()), 0);
  return out;
}

std::string sha512(std::string_view data) {
  std::string out(64, '\0');
  mbedtls_sha512_ret(u8p(data), data.size(), reinterpret_cast<uint8_t*>(out.data()), 0);
  return out;
}

std::string hmac(int bits, std::string_view key, std::string_view data) {
  const mbedtls_md_info_t* info =
      mbedtls_md_info_from_type(bits == 512 ? MBEDTLS_MD_SHA512 : MBEDTLS_MD_SHA256);
  std::string out(mbedtls_md_get_size(info), '\0');
  mbedtls_md_hmac(info, u8p(key), key.size(), u8p(data), data.size(), reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

bool x25519(const uint8_t scalar[32], const uint8_t u[32], uint8_t out[32]) {
  Group grp;
  Mpi d, z;
  Point p;
  if (mbedtls_ecp_group_load(&grp.v, MBEDTLS_ECP_DP_CURVE25519) != 0) return false;
  uint8_t k[32], uu[32];
  std::memcpy(k, scalar, 32);
  // RFC 7748 §5 decodeScalar25519 (mbedTLS does not clamp a loaded scalar).
  k[0] &= 248;
  k[31] &= 127;
  k[31] |= 64;
  std::memcpy(uu, u, 32);
  uu[31] &= 0x7f;
  if (mbedtls_mpi_read_binary_le(&d.v, k, 32) != 0 ||
      mbedtls_ecp_point_read_binary(&grp.v, &p.v, uu, 32) != 0)
    return false;
  Random rnd;
  if (mbedtls_ecdh_compute_shared(&grp.v, &z.v, &p.v, &d.v, &Random::mbedtls_rng, &rnd) != 0) return false;
  if (mbedtls_mpi_cmp_int(&z.v, 0) == 0) return false;
  return mbedtls_mpi_write_binary_le(&z.v, out, 32) == 0;
}

std::string kex_hash(std::string_view, std::string_view data) { return sha256(data); }

std::unique_ptr<Kex> Kex::make(std::string_view name, Random& rnd) {
  bool x = false;
  if (name == "curve25519-sha256" || name == "curve25519-sha256@libssh.org")
    x = true;
  else if (name != "ecdh-sha2-nistp256")
    return nullptr;
  auto k = std::make_unique<EcKex>(x);
  if (!k->init(rnd)) return nullptr;
  return k;
}

std::string derive_key(std::string_view kex, std::string_view k_mpint, std::string_view h, char letter,
                       std::string_view session_id, size_t len) {
  std::string base;
  base.append(k_mpint).append(h);
  std::string out = kex_hash(kex, base + letter + std::string(session_id));
  while (out.size() < len) out += kex_hash(kex, base + out);
  out.resize(len);
  mbedtls_platform_zeroize(base.data(), base.size());
  return out;
}

const CipherInfo* find_cipher(std::string_view name) {
  for (const CipherInfo& c : kCiphers)
    if (c.name == name) return &c;
  return nullptr;
}

const MacInfo* find_mac(std::string_view name) {
  for (const MacInfo& m : kMacs)
    if (m.name == name) return &m;
  return nullptr;
}

std::unique_ptr<PacketCipher> PacketCipher::make(const CipherInfo& c, const MacInfo* mac,
                                                 std::string_view key, std::string_view iv,
                                                 std::string_view mac_key) {
  if (key.size() != c.key_len || iv.size() != c.iv_len) return nullptr;
  if (c.name == "chacha20-poly1305@openssh.com") {
    auto p = std::make_unique<ChaChaPoly>(key);
    if (!p->ok()) return nullptr;
    return p;
  }
  if (c.aead) {
    auto p = std::make_unique<AesGcm>(key, iv);
    if (!p->ok()) return nullptr;
    return p;
  }
  if (!mac || mac_key.size() != mac->key_len) return nullptr;
  auto p = std::make_unique<AesCtrEtm>(key, iv, *mac, mac_key);
  if (!p->ok()) return nullptr;
  return p;
}

}  // namespace keel::ssh::crypto

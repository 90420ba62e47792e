// The SSH transport's primitives (firmware/ssh/crypto.h): X25519 against
// RFC 7748's vectors, HMAC-SHA-256/512 against RFC 4231's, key derivation
// (RFC 4253 §7.2) extension, both ECDH exchanges agreeing and refusing bad
// points, and every packet cipher round-tripping and refusing a flipped bit.
#include <doctest/doctest.h>

#include <string>

#include "ssh/crypto.h"
#include "ssh/random.h"
#include "ssh/wire.h"

using namespace keel::ssh;

namespace {

std::string unhex(std::string_view h) {
  std::string s;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    s.push_back(static_cast<char>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
  return s;
}
std::string hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) {
    h.push_back(d[c >> 4]);
    h.push_back(d[c & 15]);
  }
  return h;
}
const uint8_t* u8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

std::string x25519(const std::string& k, const std::string& u) {
  uint8_t out[32];
  if (!crypto::x25519(u8(k), u8(u), out)) return "failed";
  return hex({reinterpret_cast<char*>(out), 32});
}

}  // namespace

TEST_CASE("X25519 matches RFC 7748 §5.2 and §6.1") {
  CHECK(x25519(unhex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4"),
               unhex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c")) ==
        "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552");
  CHECK(x25519(unhex("4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d"),
               unhex("e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493")) ==
        "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957");  // the u top bit masked
  const std::string alice = unhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  const std::string bob = unhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
  std::string nine(32, '\0');
  nine[0] = 9;
  CHECK(x25519(alice, nine) == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
  CHECK(x25519(bob, nine) == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
  CHECK(x25519(alice, unhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")) ==
        "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
  // A low-order point gives the all-zero secret: refused.
  CHECK(x25519(alice, std::string(32, '\0')) == "failed");
}

TEST_CASE("HMAC-SHA-256/512 match RFC 4231 test cases 1, 2 and 6") {
  const std::string k1(20, '\x0b');
  CHECK(hex(crypto::hmac(256, k1, "Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex(crypto::hmac(512, k1, "Hi There")) ==
        "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cdedaa833b7d6b8a702038b274eaea3f4e4be9d"
        "914eeb61f1702e696c203a126854");
  CHECK(hex(crypto::hmac(256, "Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const std::string k6(131, '\xaa');
  CHECK(hex(crypto::hmac(256, k6, "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("SHA-256 and SHA-512 of 'abc' (FIPS 180-2)") {
  CHECK(hex(crypto::sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex(crypto::sha512("abc")).substr(0, 32) == "ddaf35a193617abacc417349ae204131");
}

TEST_CASE("derive_key: RFC 4253 §7.2, extended with HASH(K || H || K1)") {
  const std::string k = "\x00\x00\x00\x01\x05", h(32, 'h'), sid(32, 's');
  const std::string k1 = crypto::derive_key("curve25519-sha256", k, h, 'C', sid, 32);
  CHECK(k1 == crypto::sha256(k + h + "C" + sid));
  const std::string k64 = crypto::derive_key("curve25519-sha256", k, h, 'C', sid, 64);
  CHECK(k64.substr(0, 32) == k1);
  CHECK(k64.substr(32) == crypto::sha256(k + h + k1));
  CHECK(crypto::derive_key("curve25519-sha256", k, h, 'C', sid, 12) == k1.substr(0, 12));
  CHECK(crypto::derive_key("curve25519-sha256", k, h, 'D', sid, 32) != k1);
}

TEST_CASE("both ECDH exchanges agree, and refuse bad public keys") {
  Random rnd;
  REQUIRE(rnd.ok());
  for (const char* name : {"curve25519-sha256", "curve25519-sha256@libssh.org", "ecdh-sha2-nistp256"}) {
    CAPTURE(name);
    auto a = crypto::Kex::make(name, rnd);
    auto b = crypto::Kex::make(name, rnd);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(a->public_key().size() == (std::string_view(name).substr(0, 5) == "curve" ? 32u : 65u));
    auto ka = a->agree(b->public_key(), rnd);
    auto kb = b->agree(a->public_key(), rnd);
    REQUIRE(ka.ok());
    REQUIRE(kb.ok());
    CHECK(ka.value() == kb.value());
    CHECK(ka.value().size() == 32);
    CHECK_FALSE(a->agree("", rnd).ok());
    CHECK_FALSE(a->agree(std::string(33, '\x01'), rnd).ok());
  }
  auto p = crypto::Kex::make("ecdh-sha2-nistp256", rnd);
  std::string off_curve = p->public_key();
  off_curve[40] ^= 1;
  CHECK_FALSE(p->agree(off_curve, rnd).ok());
  std::string compressed = p->public_key().substr(0, 33);
  compressed[0] = 2;
  CHECK_FALSE(p->agree(compressed, rnd).ok());
  auto x = crypto::Kex::make("curve25519-sha256", rnd);
  CHECK_FALSE(x->agree(std::string(32, '\0'), rnd).ok());  // all-zero secret
  CHECK(crypto::Kex::make("diffie-hellman-group1-sha1", rnd) == nullptr);
}

TEST_CASE("every packet cipher round-trips and refuses a flipped bit") {
  Random rnd;
  struct Mode {
    const char* cipher;
    const char* mac;
  } modes[] = {{"chacha20-poly1305@openssh.com", nullptr},
               {"aes256-gcm@openssh.com", nullptr},
               {"aes128-gcm@openssh.com", nullptr},
               {"aes256-ctr", "hmac-sha2-256-etm@openssh.com"},
               {"aes256-ctr", "hmac-sha2-512-etm@openssh.com"},
               {"aes128-ctr", "hmac-sha2-256-etm@openssh.com"},
               {"aes128-ctr", "hmac-sha2-512-etm@openssh.com"}};
  for (const Mode& m : modes) {
    CAPTURE(m.cipher);
    CAPTURE(m.mac ? m.mac : "-");
    const crypto::CipherInfo* c = crypto::find_cipher(m.cipher);
    REQUIRE(c);
    const crypto::MacInfo* mac = m.mac ? crypto::find_mac(m.mac) : nullptr;
    std::string key(c->key_len, '\0'), iv(c->iv_len, '\0'), mk(mac ? mac->key_len : 0, '\0');
    rnd.fill(key.data(), key.size());
    rnd.fill(iv.data(), iv.size());
    rnd.fill(mk.data(), mk.size());
    auto enc = crypto::PacketCipher::make(*c, mac, key, iv, mk);
    auto dec = crypto::PacketCipher::make(*c, mac, key, iv, mk);
    REQUIRE(enc);
    REQUIRE(dec);
    CHECK(enc->block_size() == c->block);
    CHECK(enc->tag_size() == (mac ? mac->tag_len : 16u));
    for (uint32_t seq = 7; seq < 10; ++seq) {
      keel::ssh::WireWriter w;
      const uint32_t len = 4 * static_cast<uint32_t>(c->block);
      w.u32(len).u8(static_cast<uint8_t>(len - 11)).raw("payload000").raw(std::string(len - 11, 'p'));
      std::string plain = w.take();
      REQUIRE(plain.size() == 4 + len);
      std::string pkt = plain, tag(enc->tag_size(), '\0');
      enc->seal(seq, reinterpret_cast<uint8_t*>(pkt.data()), pkt.size(),
                reinterpret_cast<uint8_t*>(tag.data()));
      CHECK(pkt.substr(5) != plain.substr(5));
      // The length decodes before the packet is authenticated.
      CHECK(dec->length(seq, reinterpret_cast<const uint8_t*>(pkt.data())) == len);
      if (seq == 7) {  // a fresh decryptor at the same point as `dec`
        for (size_t at : {size_t{2}, size_t{9}, pkt.size() - 1}) {
          auto bad = crypto::PacketCipher::make(*c, mac, key, iv, mk);
          std::string flipped = pkt;
          flipped[at] ^= 0x40;
          CHECK_FALSE(bad->open(seq, reinterpret_cast<uint8_t*>(flipped.data()), flipped.size(),
                                reinterpret_cast<const uint8_t*>(tag.data())));
        }
        auto bad = crypto::PacketCipher::make(*c, mac, key, iv, mk);
        std::string t2 = tag;
        t2[0] ^= 1;
        std::string copy = pkt;
        CHECK_FALSE(bad->open(seq, reinterpret_cast<uint8_t*>(copy.data()), copy.size(),
                              reinterpret_cast<const uint8_t*>(t2.data())));
        auto wrong_seq = crypto::PacketCipher::make(*c, mac, key, iv, mk);
        copy = pkt;
        if (!std::string_view(m.cipher).starts_with("aes") || !c->aead)  // GCM's nonce is its own counter
          CHECK_FALSE(wrong_seq->open(seq + 1, reinterpret_cast<uint8_t*>(copy.data()), copy.size(),
                                      reinterpret_cast<const uint8_t*>(tag.data())));
      }
      REQUIRE(dec->open(seq, reinterpret_cast<uint8_t*>(pkt.data()), pkt.size(),
                        reinterpret_cast<const uint8_t*>(tag.data())));
      CHECK(pkt == plain);
    }
  }
  CHECK(crypto::find_cipher("aes128-cbc") == nullptr);
  CHECK(crypto::find_cipher("none") == nullptr);
  CHECK(crypto::find_cipher("3des-cbc") == nullptr);
  CHECK(crypto::find_mac("hmac-sha1") == nullptr);
  CHECK(crypto::find_mac("hmac-sha2-256") == nullptr);  // encrypt-and-MAC: not offered
}

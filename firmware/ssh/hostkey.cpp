// Host keys on mbedTLS 2.28 (see hostkey.h).
#include "ssh/hostkey.h"

#include <fcntl.h>
#include <mbedtls/base64.h>
#include <mbedtls/bignum.h>
#include <mbedtls/ecdsa.h>
#include <mbedtls/ecp.h>
#include <mbedtls/error.h>
#include <mbedtls/md.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/rsa.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/sys_error.h"
#include "ssh/crypto.h"
#include "ssh/wire.h"

namespace keel::ssh {

namespace {

struct Pk {
  mbedtls_pk_context v;
  Pk() { mbedtls_pk_init(&v); }
  ~Pk() { mbedtls_pk_free(&v); }
};
struct Mpi {
  mbedtls_mpi v;
  Mpi() { mbedtls_mpi_init(&v); }
  ~Mpi() { mbedtls_mpi_free(&v); }
};

std::string mpi_bytes(const mbedtls_mpi& m) {
  std::string s(mbedtls_mpi_size(&m), '\0');
  mbedtls_mpi_write_binary(&m, reinterpret_cast<unsigned char*>(s.data()), s.size());
  return s;
}

void put_mpint(WireWriter& w, const std::string& be) {
  w.mpint({reinterpret_cast<const uint8_t*>(be.data()), be.size()});
}

std::string base64(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  size_t n = 0;
  mbedtls_base64_encode(reinterpret_cast<unsigned char*>(out.data()), out.size(), &n,
                        reinterpret_cast<const unsigned char*>(data.data()), data.size());
  out.resize(n);
  return out;
}

std::string errno_text() { return keel::errno_text(errno); }

// Writes `data` to `path` atomically with mode 0600.
Status write_atomic(const std::string& dir, const std::string& path, std::string_view data) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return error(Errc::io_error, "host key '" + tmp + "': " + errno_text());
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string e = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      return error(Errc::io_error, "host key '" + tmp + "': " + e);
    }
    off += static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0600) != 0 || ::fsync(fd) != 0) {
    const std::string e = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    return error(Errc::io_error, "host key '" + tmp + "': " + e);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string e = errno_text();
    ::unlink(tmp.c_str());
    return error(Errc::io_error, "host key '" + path + "': " + e);
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

// The file's contents; not_found when it does not exist. A file of ours
// that group or others may read or write is refused, as sshd refuses it
// (sshkey_perm_ok: "UNPROTECTED PRIVATE KEY FILE! ... This private key will
// be ignored"): the key may have been copied, and quietly tightening the
// mode would hide that. The operator checks, then chmods it to 0600.
Result<std::string> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return error(Errc::not_found, "host key '" + path + "': no such file");
    return error(Errc::io_error, "host key '" + path + "': " + errno_text());
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string e = errno_text();
    ::close(fd);
    return error(Errc::io_error, "host key '" + path + "': " + e);
  }
  if (st.st_uid == ::geteuid() && (st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[16];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 0777));
    return error(Errc::invalid_argument, "host key '" + path + "': permissions " + mode +
                                              " are too open (group or others may read or write it); the key is "
                                              "refused: check who could read it, then chmod 600 it");
  }
  std::string s;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string e = errno_text();
      ::close(fd);
      return error(Errc::io_error, "host key '" + path + "': " + e);
    }
    if (n == 0) break;
    s.append(buf, static_cast<size_t>(n));
    if (s.size() > 64 * 1024) {
      ::close(fd);
      return error(Errc::invalid_argument, "host key '" + path + "': larger than 64 KiB");
    }
  }
  ::close(fd);
  return s;
}

}  // namespace

struct HostKeys::Impl {
  Pk ecdsa, rsa;
  std::string ecdsa_blob, rsa_blob;
  int rsa_bits = 0;

  void make_blobs() {
    const mbedtls_ecp_keypair* ec = mbedtls_pk_ec(ecdsa.v);
    unsigned char q[65];
    size_t n = 0;
    mbedtls_ecp_point_write_binary(&ec->grp, &ec->Q, MBEDTLS_ECP_PF_UNCOMPRESSED, &n, q, sizeof q);
    WireWriter w;
    w.string("ecdsa-sha2-nistp256").string("nistp256").string({reinterpret_cast<char*>(q), n});
    ecdsa_blob = w.take();

    const mbedtls_rsa_context* r = mbedtls_pk_rsa(rsa.v);
    Mpi nn, e;
    mbedtls_rsa_export(r, &nn.v, nullptr, nullptr, nullptr, &e.v);
    WireWriter rw;
    rw.string("ssh-rsa");
    put_mpint(rw, mpi_bytes(e.v));
    put_mpint(rw, mpi_bytes(nn.v));
    rsa_blob = rw.take();
    rsa_bits = static_cast<int>(mbedtls_mpi_bitlen(&nn.v));
  }
};

HostKeys::HostKeys() : impl_(std::make_unique<Impl>()) {}
HostKeys::~HostKeys() = default;

namespace {

Status gen_ecdsa(mbedtls_pk_context& pk, Random& rnd) {
  if (mbedtls_pk_setup(&pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)) != 0 ||
      mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(pk), &Random::mbedtls_rng, &rnd) != 0)
    return error(Errc::internal, "generating the ECDSA P-256 host key failed");
  return {};
}

Status gen_rsa(mbedtls_pk_context& pk, Random& rnd, int bits) {
  if (mbedtls_pk_setup(&pk, mbedtls_pk_info_from_type(MBEDTLS_PK_RSA)) != 0 ||
      mbedtls_rsa_gen_key(mbedtls_pk_rsa(pk), &Random::mbedtls_rng, &rnd, static_cast<unsigned>(bits),
                          65537) != 0)
    return error(Errc::internal, "generating the RSA " + std::to_string(bits) + " host key failed");
  return {};
}

Result<std::string> to_pem(mbedtls_pk_context& pk) {
  std::vector<unsigned char> buf(16384);
  if (mbedtls_pk_write_key_pem(&pk, buf.data(), buf.size()) != 0)
    return error(Errc::internal, "encoding a host key as PEM failed");
  std::string s(reinterpret_cast<char*>(buf.data()));
  mbedtls_platform_zeroize(buf.data(), buf.size());
  return s;
}

// Loads `path` into pk (checked to be of `type`); not_found when missing.
Status load_key(const std::string& path, mbedtls_pk_context& pk, bool want_ec) {
  auto text = read_file(path);
  if (!text) return text.status();
  std::string& s = text.value();
  s.push_back('\0');  // mbedTLS wants PEM NUL-terminated, the NUL counted
  const int rc =
      mbedtls_pk_parse_key(&pk, reinterpret_cast<const unsigned char*>(s.data()), s.size(), nullptr, 0);
  mbedtls_platform_zeroize(s.data(), s.size());
  if (rc != 0) {
    char msg[128];
    mbedtls_strerror(rc, msg, sizeof msg);
    return error(Errc::invalid_argument, "host key '" + path + "': not a PEM private key (" + msg +
                                             "); remove it to have a new one generated");
  }
  if (want_ec) {
    if (mbedtls_pk_get_type(&pk) != MBEDTLS_PK_ECKEY || mbedtls_pk_ec(pk)->grp.id != MBEDTLS_ECP_DP_SECP256R1)
      return error(Errc::invalid_argument, "host key '" + path + "': not an ECDSA P-256 key");
  } else if (mbedtls_pk_get_type(&pk) != MBEDTLS_PK_RSA || mbedtls_pk_get_bitlen(&pk) < 2048) {
    return error(Errc::invalid_argument, "host key '" + path + "': not an RSA key of at least 2048 bits");
  }
  // A damaged file can still parse (mbedTLS checks the encoding, not the
  // numbers: one flipped bit of an RSA prime loads) and then every signature
  // fails. Check that the parts belong together: N = PQ, DE = 1 mod the
  // orders, Q = dG.
  if (mbedtls_pk_check_pair(&pk, &pk) != 0)
    return error(Errc::invalid_argument, "host key '" + path +
                                             "': its numbers do not make a key pair (a damaged file?); remove it "
                                             "to have a new one generated");
  return {};
}

}  // namespace

Result<std::unique_ptr<HostKeys>> HostKeys::generate(Random& rnd, int rsa_bits) {
  std::unique_ptr<HostKeys> k(new HostKeys());
  if (Status s = gen_ecdsa(k->impl_->ecdsa.v, rnd); !s) return s;
  if (Status s = gen_rsa(k->impl_->rsa.v, rnd, rsa_bits); !s) return s;
  k->impl_->make_blobs();
  return k;
}

Result<std::unique_ptr<HostKeys>> HostKeys::load_or_generate(const std::string& dir, Random& rnd) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return error(Errc::io_error, "host key directory '" + dir + "': " + errno_text());
  std::unique_ptr<HostKeys> k(new HostKeys());
  struct One {
    const char* file;
    mbedtls_pk_context* pk;
    bool ec;
  } keys[] = {{"ssh_host_ecdsa_key", &k->impl_->ecdsa.v, true},
              {"ssh_host_rsa_key", &k->impl_->rsa.v, false}};
  for (const One& one : keys) {
    const std::string path = dir + "/" + one.file;
    Status s = load_key(path, *one.pk, one.ec);
    if (s.ok()) continue;
    if (s.code() != Errc::not_found) return s;
    mbedtls_pk_free(one.pk);
    mbedtls_pk_init(one.pk);
    s = one.ec ? gen_ecdsa(*one.pk, rnd) : gen_rsa(*one.pk, rnd, 3072);
    if (!s) return s;
    auto pem = to_pem(*one.pk);
    if (!pem) return pem.status();
    s = write_atomic(dir, path, pem.value());
    mbedtls_platform_zeroize(pem.value().data(), pem.value().size());
    if (!s) return s;
  }
  k->impl_->make_blobs();
  return k;
}

const std::vector<std::string>& HostKeys::names() {
  static const std::vector<std::string> v{"ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256"};
  return v;
}

std::string HostKeys::public_blob(std::string_view alg) const {
  if (alg == "ecdsa-sha2-nistp256") return impl_->ecdsa_blob;
  if (alg == "rsa-sha2-512" || alg == "rsa-sha2-256" || alg == "ssh-rsa") return impl_->rsa_blob;
  return {};
}

Result<std::string> HostKeys::sign(std::string_view alg, std::string_view data, Random& rnd) const {
  WireWriter w;
  if (alg == "ecdsa-sha2-nistp256") {
    const std::string h = crypto::sha256(data);
    mbedtls_ecp_keypair* ec = mbedtls_pk_ec(impl_->ecdsa.v);
    Mpi r, s;
    const int rc =
        mbedtls_ecdsa_sign(&ec->grp, &r.v, &s.v, &ec->d, reinterpret_cast<const unsigned char*>(h.data()),
                           h.size(), &Random::mbedtls_rng, &rnd);
    WireWriter inner;
    if (rc == 0) {
      put_mpint(inner, mpi_bytes(r.v));
      put_mpint(inner, mpi_bytes(s.v));
    }
    if (rc != 0) return error(Errc::internal, "ECDSA host key signature failed");
    w.string(alg).string(inner.str());
    return w.take();
  }
  if (alg == "rsa-sha2-512" || alg == "rsa-sha2-256") {
    const bool s512 = alg == "rsa-sha2-512";
    const std::string h = s512 ? crypto::sha512(data) : crypto::sha256(data);
    mbedtls_rsa_context* r = mbedtls_pk_rsa(impl_->rsa.v);
    std::string sig(mbedtls_rsa_get_len(r), '\0');
    if (mbedtls_rsa_pkcs1_sign(r, &Random::mbedtls_rng, &rnd, MBEDTLS_RSA_PRIVATE,
                               s512 ? MBEDTLS_MD_SHA512 : MBEDTLS_MD_SHA256, static_cast<unsigned>(h.size()),
                               reinterpret_cast<const unsigned char*>(h.data()),
                               reinterpret_cast<unsigned char*>(sig.data())) != 0)
      return error(Errc::internal, "RSA host key signature failed");
    w.string(alg).string(sig);
    return w.take();
  }
  return error(Errc::invalid_argument, "no host key for algorithm '" + std::string(alg) + "'");
}

std::vector<std::string> HostKeys::fingerprints() const {
  auto fp = [](std::string_view blob) {
    std::string b = base64(crypto::sha256(blob));
    while (!b.empty() && b.back() == '=') b.pop_back();
    return "SHA256:" + b;
  };
  return {"256 " + fp(impl_->ecdsa_blob) + " (ECDSA)",
          std::to_string(impl_->rsa_bits) + " " + fp(impl_->rsa_blob) + " (RSA)"};
}

std::vector<std::string> HostKeys::public_key_lines() const {
  return {"ecdsa-sha2-nistp256 " + base64(impl_->ecdsa_blob), "ssh-rsa " + base64(impl_->rsa_blob)};
}

}  // namespace keel::ssh

// The SSH transport layer, sans-IO (see transport.h).
//
// State: `phase_` is the version exchange, then packets. A key exchange is
// two halves: ours (KEXINIT sent .. NEWKEYS sent; messages from above are
// held meanwhile) and the client's (KEXINIT received .. NEWKEYS received;
// only transport messages may arrive meanwhile). The first key exchange sets
// the session id, strict kex and ext-info-c; later ones re-key.
//
// Thread-safety: none (one connection, one thread; see transport.h).
#include "ssh/transport.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/version.h"
#include "ssh/crypto.h"
#include "ssh/wire.h"

namespace keel::ssh {

namespace {

constexpr size_t kMaxPacketLength = 35000;  // packet_length (RFC 4253 §6.1: at least 35000)
constexpr size_t kMaxVersionLine = 255;     // RFC 4253 §4.2, CR LF included
constexpr size_t kMaxPreambleLine = 1024;   // other lines before the version
constexpr size_t kMaxPreambleLines = 50;
constexpr size_t kMaxPreambleBytes = 32 * 1024;

constexpr std::string_view kStrictServer = "kex-strict-s-v00@openssh.com";
constexpr std::string_view kStrictClient = "kex-strict-c-v00@openssh.com";
constexpr std::string_view kExtInfoClient = "ext-info-c";

const std::vector<std::string>& kex_names() {
  static const std::vector<std::string> v = {"curve25519-sha256", "curve25519-sha256@libssh.org",
                                             "ecdh-sha2-nistp256"};
  return v;
}
const std::vector<std::string>& cipher_names() {
  static const std::vector<std::string> v = {"chacha20-poly1305@openssh.com", "aes256-gcm@openssh.com",
                                             "aes128-gcm@openssh.com", "aes256-ctr", "aes128-ctr"};
  return v;
}
const std::vector<std::string>& mac_names() {
  static const std::vector<std::string> v = {"hmac-sha2-256-etm@openssh.com",
                                             "hmac-sha2-512-etm@openssh.com"};
  return v;
}

uint32_t get32(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

void put32(char* p, uint32_t v) {
  p[0] = static_cast<char>(v >> 24);
  p[1] = static_cast<char>(v >> 16);
  p[2] = static_cast<char>(v >> 8);
  p[3] = static_cast<char>(v);
}

bool contains(const std::vector<std::string_view>& list, std::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// RFC 4253 §7.1: the first algorithm of the client's list the server has.
std::string choose(const std::vector<std::string_view>& client, const std::vector<std::string>& server) {
  for (std::string_view c : client)
    for (const std::string& s : server)
      if (c == s) return s;
  return {};
}

std::string join(const std::vector<std::string_view>& v) {
  std::string s;
  for (std::string_view n : v) s.append(s.empty() ? "" : ",").append(n);
  return s.empty() ? "(none)" : s;
}

// `offered` filtered to the names in `have`, or all of `have`.
std::vector<std::string> offer(const std::vector<std::string>& have, const std::vector<std::string>& wanted) {
  if (wanted.empty()) return have;
  std::vector<std::string> v;
  for (const std::string& w : wanted)
    if (std::find(have.begin(), have.end(), w) != have.end() && std::find(v.begin(), v.end(), w) == v.end())
      v.push_back(w);
  return v;
}

}  // namespace

const std::vector<std::string>& transport_algorithms(std::string_view what) {
  static const std::vector<std::string> none;
  if (what == "kex") return kex_names();
  if (what == "cipher") return cipher_names();
  if (what == "mac") return mac_names();
  if (what == "host_key") return HostKeys::names();
  return none;
}

struct Transport::Impl {
  TransportConfig cfg;
  enum class Phase { version, packets } phase = Phase::version;
  bool closed = false;
  std::string in;
  size_t in_off = 0;
  std::string out;
  std::string v_s, v_c;
  size_t preamble_lines = 0, preamble_bytes = 0;

  std::unique_ptr<crypto::PacketCipher> cin, cout, cin_next;
  uint32_t seq_in = 0, seq_out = 0;
  uint64_t bytes_in = 0, bytes_out = 0;  // since the last key exchange
  uint64_t now = 0, last_kex_ms = 0;
  bool clock_set = false;

  // The key exchange in progress.
  bool kex_sent = false;     // our KEXINIT sent, our NEWKEYS not yet
  bool kex_got = false;      // client's KEXINIT received, its NEWKEYS not yet
  bool expect_ecdh = false;  // ECDH_INIT next
  bool expect_newkeys = false;
  bool skip_guess = false;  // the client's guessed kex packet is to be ignored
  std::string i_s, i_c;     // KEXINIT payloads
  Algorithms next;          // negotiated, in effect after NEWKEYS

  bool first_kex_done = false, strict = false, ext_info = false, service_accepted = false;
  // USERAUTH_SUCCESS went out: from then on the server may start re-keys
  // (OpenSSH's client refuses a KEXINIT during user authentication, and its
  // sshd never re-keys before it either).
  bool authenticated = false;
  uint64_t kexes = 0;
  std::string session_id;
  Algorithms alg;
  std::vector<std::string> held;
  std::deque<std::pair<std::string, uint32_t>> up;
  uint32_t reason = 0;
  std::string err;

  std::vector<std::string> my_kex, my_hk, my_ciphers, my_macs;

  explicit Impl(TransportConfig c) : cfg(std::move(c)) {
    my_kex = offer(kex_names(), cfg.kex);
    my_hk = offer(cfg.host_keys ? cfg.host_keys->algorithms() : std::vector<std::string>{},
                  cfg.host_keys_offered);
    my_ciphers = offer(cipher_names(), cfg.ciphers);
    my_macs = offer(mac_names(), cfg.macs);
    v_s = "SSH-2.0-" + cfg.software + "_" + std::string(kVersion);
    out = v_s + "\r\n";
    send_kexinit();
  }

  // ---- output ----

  void send_packet(std::string_view payload) {
    const size_t block = cout ? cout->block_size() : 8;
    const size_t counted = (cout ? 0 : 4) + 1 + payload.size();
    size_t pad = block - counted % block;
    if (pad < 4) pad += block;
    const size_t len = 1 + payload.size() + pad;
    const size_t start = out.size();
    out.resize(start + 4 + len);
    char* p = out.data() + start;
    put32(p, static_cast<uint32_t>(len));
    p[4] = static_cast<char>(pad);
    std::memcpy(p + 5, payload.data(), payload.size());
    if (cfg.random) cfg.random->fill(p + 5 + payload.size(), pad);
    if (cout) {
      const size_t tag = cout->tag_size();
      out.resize(start + 4 + len + tag);
      p = out.data() + start;
      cout->seal(seq_out, reinterpret_cast<uint8_t*>(p), 4 + len, reinterpret_cast<uint8_t*>(p) + 4 + len);
    }
    ++seq_out;
    bytes_out += out.size() - start;
  }

  void send_kexinit() {
    uint8_t cookie[16];
    if (cfg.random) cfg.random->fill(cookie, sizeof cookie);
    std::vector<std::string> kex = my_kex;
    kex.emplace_back(kStrictServer);
    WireWriter w;
    w.u8(msg::kKexInit).raw({reinterpret_cast<char*>(cookie), sizeof cookie});
    w.name_list(kex).name_list(my_hk).name_list(my_ciphers).name_list(my_ciphers);
    w.name_list(my_macs).name_list(my_macs).name_list({"none"}).name_list({"none"});
    w.name_list({}).name_list({}).boolean(false).u32(0);
    i_s = w.take();
    send_packet(i_s);
    kex_sent = true;
  }

  void fail(uint32_t why, std::string text) {
    if (closed) return;
    reason = why;
    err = std::move(text);
    WireWriter w;
    w.u8(msg::kDisconnect).u32(why).string(err).string("");
    send_packet(w.str());
    closed = true;
    up.clear();
    held.clear();
  }

  void maybe_rekey() {
    if (closed || !authenticated || kex_sent || kex_got) return;
    if (bytes_in >= cfg.rekey_bytes || bytes_out >= cfg.rekey_bytes || now - last_kex_ms >= cfg.rekey_ms)
      send_kexinit();
  }

  // ---- input ----

  // One line of the version exchange; false: need more bytes (or failed).
  bool version_step() {
    const size_t avail = in.size() - in_off;
    const size_t nl = in.find('\n', in_off);
    const bool is_version = avail >= 4 && in.compare(in_off, 4, "SSH-") == 0;
    const size_t limit = is_version ? kMaxVersionLine : kMaxPreambleLine;
    if (nl == std::string::npos) {
      if (avail > limit) {
        if (is_version)
          fail(disconnect::kProtocolError, "version line longer than 255 bytes");
        else
          fail(disconnect::kProtocolError, "line of more than 1024 bytes before the version line");
      }
      return false;
    }
    size_t n = nl - in_off + 1;
    if (n > limit) {
      fail(disconnect::kProtocolError, is_version ? "version line longer than 255 bytes"
                                                  : "line of more than 1024 bytes before the version line");
      return false;
    }
    std::string_view line(in.data() + in_off, n - 1);
    in_off += n;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!is_version) {
      if (++preamble_lines > kMaxPreambleLines || (preamble_bytes += n) > kMaxPreambleBytes) {
        fail(disconnect::kProtocolError, "too many lines before the version line");
        return false;
      }
      return true;
    }
    for (char c : line) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) {
        fail(disconnect::kProtocolError, "version line with a control character");
        return false;
      }
    }
    if (line.rfind("SSH-2.0-", 0) != 0 && line.rfind("SSH-1.99-", 0) != 0) {
      fail(disconnect::kProtocolVersionNotSupported,
           "protocol version not supported: '" + std::string(line.substr(0, 64)) + "' (SSH-2.0 only)");
      return false;
    }
    const size_t dash = line.find('-', 4);
    if (dash + 1 >= line.size()) {
      fail(disconnect::kProtocolError, "version line without software version");
      return false;
    }
    v_c = std::string(line);
    phase = Phase::packets;
    return true;
  }

  // One binary packet; false: need more bytes (or failed).
  bool packet_step() {
    const size_t avail = in.size() - in_off;
    if (avail < 4) return false;
    char* p = in.data() + in_off;
    const uint32_t len = cin ? cin->length(seq_in, reinterpret_cast<const uint8_t*>(p)) : get32(p);
    const size_t block = cin ? cin->block_size() : 8;
    if (len < 5 || len > kMaxPacketLength) {
      fail(disconnect::kProtocolError, "bad packet length " + std::to_string(len));
      return false;
    }
    if ((cin ? len : len + 4) % block != 0) {
      fail(disconnect::kProtocolError, "packet length " + std::to_string(len) +
                                           " is not a multiple of the block size " + std::to_string(block));
      return false;
    }
    const size_t tag = cin ? cin->tag_size() : 0;
    if (avail < 4 + len + tag) return false;
    if (cin && !cin->open(seq_in, reinterpret_cast<uint8_t*>(p), 4 + len,
                          reinterpret_cast<const uint8_t*>(p) + 4 + len)) {
      fail(disconnect::kMacError, "corrupted MAC on input");
      return false;
    }
    const uint8_t pad = static_cast<uint8_t>(p[4]);
    if (pad < 4 || pad > len - 2) {  // at least one payload byte
      fail(disconnect::kProtocolError,
           "bad padding length " + std::to_string(pad) + " in a packet of " + std::to_string(len));
      return false;
    }
    in_off += 4 + len + tag;
    bytes_in += 4 + len + tag;
    const uint32_t seq = seq_in++;
    // The payload stays valid until the buffer is compacted (after feed's loop).
    dispatch(std::string_view(p + 5, len - pad - 1), seq);
    return !closed;
  }

  void dispatch(std::string_view payload, uint32_t seq) {
    const uint8_t type = static_cast<uint8_t>(payload[0]);
    if (type == msg::kDisconnect) {
      WireReader r(payload.substr(1));
      uint32_t why = 0;
      std::string_view text;
      r.u32(why);
      r.string(text);
      reason = why;
      err = "client disconnected (reason " + std::to_string(why) +
            "): " + std::string(text.substr(0, std::min<size_t>(text.size(), 128)));
      closed = true;
      up.clear();
      return;
    }
    const bool initial = !first_kex_done;
    const bool in_kex = kex_got || initial;  // the client may send only transport messages
    const bool kex_msg = type == msg::kKexInit || type == msg::kNewKeys || (type >= 30 && type <= 49);
    if (strict && initial && !kex_msg) {
      fail(disconnect::kProtocolError, "strict KEX violation: unexpected message " + std::to_string(type) +
                                           " during the initial key exchange");
      return;
    }
    switch (type) {
      case msg::kIgnore:
      case msg::kDebug:
      case msg::kUnimplemented:
        return;
      case msg::kKexInit:
        return on_kexinit(payload, seq);
      case msg::kKexEcdhInit:
        return on_ecdh_init(payload);
      case msg::kNewKeys:
        return on_newkeys(payload);
      case msg::kServiceRequest:
        if (in_kex) break;
        return on_service_request(payload);
      case msg::kExtInfo:
        if (in_kex) break;
        return;  // a client's EXT_INFO (we don't ask for one): nothing in it for a server
      default:
        if (type >= 50) {
          if (in_kex) {
            fail(disconnect::kProtocolError, "message " + std::to_string(type) + " during a key exchange");
            return;
          }
          if (!service_accepted) {
            fail(disconnect::kProtocolError,
                 "message " + std::to_string(type) + " before the ssh-userauth service was accepted");
            return;
          }
          up.emplace_back(std::string(payload), seq);
          return;
        }
        if (type >= 20) break;  // a key exchange message out of place
        unimplemented(seq);
        return;
    }
    fail(disconnect::kProtocolError, "unexpected message " + std::to_string(type) +
                                         (in_kex ? " during a key exchange" : " outside a key exchange"));
  }

  void on_kexinit(std::string_view payload, uint32_t seq) {
    if (kex_got) {
      fail(disconnect::kProtocolError, "second KEXINIT during a key exchange");
      return;
    }
    WireReader r(payload.substr(1));
    std::string_view cookie;
    std::vector<std::string_view> lists[10];
    bool follows = false;
    uint32_t reserved = 0;
    bool ok = r.remaining() >= 16;
    if (ok) {
      // The 16 cookie bytes: read as raw (no length prefix).
      cookie = payload.substr(1, 16);
      r = WireReader(payload.substr(17));
    }
    for (auto& l : lists) ok = ok && r.name_list(l);
    ok = ok && r.boolean(follows) && r.u32(reserved) && r.done();
    if (!ok) {
      fail(disconnect::kProtocolError, "malformed KEXINIT");
      return;
    }
    (void)cookie;
    if (!first_kex_done) {
      strict = contains(lists[0], kStrictClient);
      ext_info = contains(lists[0], kExtInfoClient);
      if (strict && seq != 0) {
        fail(disconnect::kProtocolError, "strict KEX violation: KEXINIT was not the first packet");
        return;
      }
    }
    kex_got = true;
    i_c = std::string(payload);
    if (!kex_sent) send_kexinit();

    const std::vector<std::string>& hk = my_hk;
    Algorithms a;
    a.kex = choose(lists[0], my_kex);
    a.host_key = choose(lists[1], hk);
    a.cipher_in = choose(lists[2], my_ciphers);
    a.cipher_out = choose(lists[3], my_ciphers);
    struct Need {
      const std::string& got;
      const char* what;
      const std::vector<std::string_view>& offered;
    } needs[] = {{a.kex, "key exchange", lists[0]},
                 {a.host_key, "host key algorithm", lists[1]},
                 {a.cipher_in, "cipher (client to server)", lists[2]},
                 {a.cipher_out, "cipher (server to client)", lists[3]}};
    for (const Need& n : needs) {
      if (n.got.empty()) {
        fail(disconnect::kKeyExchangeFailed,
             std::string("no matching ") + n.what + ": client offered " + join(n.offered).substr(0, 512));
        return;
      }
    }
    const crypto::CipherInfo* ci = crypto::find_cipher(a.cipher_in);
    const crypto::CipherInfo* co = crypto::find_cipher(a.cipher_out);
    if (!ci->aead) {
      a.mac_in = choose(lists[4], my_macs);
      if (a.mac_in.empty()) {
        fail(disconnect::kKeyExchangeFailed,
             "no matching MAC (client to server): client offered " + join(lists[4]).substr(0, 512));
        return;
      }
    }
    if (!co->aead) {
      a.mac_out = choose(lists[5], my_macs);
      if (a.mac_out.empty()) {
        fail(disconnect::kKeyExchangeFailed,
             "no matching MAC (server to client): client offered " + join(lists[5]).substr(0, 512));
        return;
      }
    }
    if (!contains(lists[6], "none") || !contains(lists[7], "none")) {
      fail(disconnect::kKeyExchangeFailed,
           "no matching compression: client offered " + join(lists[6]).substr(0, 256));
      return;
    }
    next = a;
    expect_ecdh = true;
    // RFC 4253 §7: a guessed kex packet follows; it is used only when the
    // guess was right (the client's first kex and host key algorithms are ours).
    if (follows) {
      const std::string first_kex = my_kex.empty() ? std::string() : my_kex.front();
      const std::string first_hk = hk.empty() ? std::string() : hk.front();
      skip_guess = lists[0].empty() || lists[1].empty() || lists[0].front() != first_kex ||
                   lists[1].front() != first_hk;
    }
  }

  void on_ecdh_init(std::string_view payload) {
    if (!kex_got || !expect_ecdh) {
      fail(disconnect::kProtocolError, "unexpected KEX_ECDH_INIT");
      return;
    }
    if (skip_guess) {
      skip_guess = false;
      return;
    }
    expect_ecdh = false;
    WireReader r(payload.substr(1));
    std::string_view q_c;
    if (!r.string(q_c) || !r.done()) {
      fail(disconnect::kProtocolError, "malformed KEX_ECDH_INIT");
      return;
    }
    if (!cfg.random || !cfg.host_keys) {
      fail(disconnect::kKeyExchangeFailed, "no host keys");
      return;
    }
    auto kex = crypto::Kex::make(next.kex, *cfg.random);
    if (!kex) {
      fail(disconnect::kKeyExchangeFailed, "ephemeral key generation failed");
      return;
    }
    auto k = kex->agree(q_c, *cfg.random);
    if (!k) {
      fail(disconnect::kKeyExchangeFailed, next.kex + ": " + k.status().message());
      return;
    }
    WireWriter kw;
    kw.mpint({reinterpret_cast<const uint8_t*>(k.value().data()), k.value().size()});
    const std::string k_mpint = kw.take();
    const std::string k_s = cfg.host_keys->public_blob(next.host_key);
    WireWriter hw;
    hw.string(v_c)
        .string(v_s)
        .string(i_c)
        .string(i_s)
        .string(k_s)
        .string(q_c)
        .string(kex->public_key())
        .raw(k_mpint);
    const std::string h = crypto::kex_hash(next.kex, hw.str());
    if (session_id.empty()) session_id = h;
    auto sig = cfg.host_keys->sign(next.host_key, h, *cfg.random);
    if (!sig) {
      fail(disconnect::kKeyExchangeFailed, sig.status().message());
      return;
    }
    WireWriter reply;
    reply.u8(msg::kKexEcdhReply).string(k_s).string(kex->public_key()).string(sig.value());
    send_packet(reply.str());
    send_packet(std::string(1, static_cast<char>(msg::kNewKeys)));

    auto derive = [&](char letter, size_t n) {
      return crypto::derive_key(next.kex, k_mpint, h, letter, session_id, n);
    };
    const crypto::CipherInfo* ci = crypto::find_cipher(next.cipher_in);
    const crypto::CipherInfo* co = crypto::find_cipher(next.cipher_out);
    const crypto::MacInfo* mi = next.mac_in.empty() ? nullptr : crypto::find_mac(next.mac_in);
    const crypto::MacInfo* mo = next.mac_out.empty() ? nullptr : crypto::find_mac(next.mac_out);
    cout = crypto::PacketCipher::make(*co, mo, derive('D', co->key_len), derive('B', co->iv_len),
                                      mo ? derive('F', mo->key_len) : std::string());
    cin_next = crypto::PacketCipher::make(*ci, mi, derive('C', ci->key_len), derive('A', ci->iv_len),
                                          mi ? derive('E', mi->key_len) : std::string());
    if (!cout || !cin_next) {
      cout.reset();
      fail(disconnect::kKeyExchangeFailed, "setting up the negotiated cipher failed");
      return;
    }
    if (strict) seq_out = 0;
    alg.kex = next.kex;
    alg.host_key = next.host_key;
    alg.cipher_out = next.cipher_out;
    alg.mac_out = next.mac_out;
    kex_sent = false;
    expect_newkeys = true;
    if (!first_kex_done && ext_info) {
      WireWriter e;
      e.u8(msg::kExtInfo).u32(1).string("server-sig-algs").string(kServerSigAlgs);
      send_packet(e.str());
    }
    for (const std::string& m : held) send_packet(m);
    held.clear();
  }

  void on_newkeys(std::string_view payload) {
    if (!expect_newkeys) {
      fail(disconnect::kProtocolError, "unexpected NEWKEYS");
      return;
    }
    if (payload.size() != 1) {
      fail(disconnect::kProtocolError, "malformed NEWKEYS");
      return;
    }
    cin = std::move(cin_next);
    if (strict) seq_in = 0;
    alg.cipher_in = next.cipher_in;
    alg.mac_in = next.mac_in;
    expect_newkeys = false;
    kex_got = false;
    first_kex_done = true;
    ++kexes;
    bytes_in = bytes_out = 0;
    last_kex_ms = now;
  }

  void on_service_request(std::string_view payload) {
    WireReader r(payload.substr(1));
    std::string_view name;
    if (!r.string(name) || !r.done()) {
      fail(disconnect::kProtocolError, "malformed SERVICE_REQUEST");
      return;
    }
    if (name != "ssh-userauth" || service_accepted) {
      fail(disconnect::kServiceNotAvailable,
           "service not available: '" + std::string(name.substr(0, 64)) + "'");
      return;
    }
    service_accepted = true;
    WireWriter w;
    w.u8(msg::kServiceAccept).string(name);
    send_packet(w.str());
  }

  void unimplemented(uint32_t seq) {
    if (closed) return;
    WireWriter w;
    w.u8(msg::kUnimplemented).u32(seq);
    send_packet(w.str());
  }
};

Transport::Transport(TransportConfig cfg) : impl_(std::make_unique<Impl>(std::move(cfg))) {}
Transport::~Transport() = default;

Status Transport::feed(std::string_view bytes, uint64_t now_ms) {
  Impl& m = *impl_;
  if (m.closed) return ::keel::error(Errc::unavailable, m.err.empty() ? "connection closed" : m.err);
  if (!m.clock_set) {
    m.clock_set = true;
    m.last_kex_ms = now_ms;
  }
  m.now = now_ms;
  m.in.append(bytes);
  while (!m.closed) {
    const bool progressed = m.phase == Impl::Phase::version ? m.version_step() : m.packet_step();
    if (!progressed) break;
  }
  m.in.erase(0, m.in_off);
  m.in_off = 0;
  if (m.closed) return ::keel::error(Errc::unavailable, m.err);
  m.maybe_rekey();
  return {};
}

bool Transport::poll_message(std::string& payload, uint32_t* seq) {
  Impl& m = *impl_;
  if (m.up.empty()) return false;
  payload = std::move(m.up.front().first);
  if (seq) *seq = m.up.front().second;
  m.up.pop_front();
  return true;
}

void Transport::send(std::string_view payload) {
  Impl& m = *impl_;
  if (m.closed) return;
  if (!payload.empty() && static_cast<uint8_t>(payload[0]) == msg::kUserauthSuccess) m.authenticated = true;
  if (m.kex_sent || !m.first_kex_done) {
    m.held.emplace_back(payload);
    return;
  }
  m.send_packet(payload);
  m.maybe_rekey();
}

void Transport::unimplemented(uint32_t seq) { impl_->unimplemented(seq); }

void Transport::disconnect(uint32_t reason, std::string_view text) { impl_->fail(reason, std::string(text)); }

std::string Transport::take_output() {
  std::string s;
  s.swap(impl_->out);
  return s;
}

size_t Transport::output_size() const { return impl_->out.size(); }

void Transport::tick(uint64_t now_ms) {
  Impl& m = *impl_;
  if (!m.clock_set) {
    m.clock_set = true;
    m.last_kex_ms = now_ms;
  }
  m.now = now_ms;
  m.maybe_rekey();
}

bool Transport::closed() const { return impl_->closed; }
bool Transport::ready() const { return impl_->first_kex_done && impl_->service_accepted && !impl_->closed; }
std::string_view Transport::session_id() const { return impl_->session_id; }
const Transport::Algorithms& Transport::algorithms() const { return impl_->alg; }
const std::string& Transport::client_version() const { return impl_->v_c; }
uint32_t Transport::disconnect_reason() const { return impl_->reason; }
const std::string& Transport::error() const { return impl_->err; }
uint64_t Transport::kex_count() const { return impl_->kexes; }

}  // namespace keel::ssh

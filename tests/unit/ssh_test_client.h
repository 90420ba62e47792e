// A minimal SSH client transport for tests (unit tests and the fuzz target's
// seed writer): version exchange, KEXINIT, the ECDH exchanges through
// ssh/crypto.h's Kex (the ECDH step is symmetric), key derivation, NEWKEYS,
// and packets in every cipher keel offers. It does not verify the host key
// signature (the interop tests with OpenSSH's client do).
//
// Deliberately written from RFC 4253 apart from firmware/ssh/transport.cpp:
// only the primitives (crypto.h) are shared.
//
// Thread-safety: none (test helper).
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "ssh/crypto.h"
#include "ssh/random.h"
#include "ssh/transport.h"
#include "ssh/wire.h"

namespace keel::ssh::test {

struct ClientOptions {
  std::string kex = "curve25519-sha256";
  std::string host_key = "ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256";
  std::string cipher = "chacha20-poly1305@openssh.com";
  std::string mac = "hmac-sha2-256-etm@openssh.com";
  bool strict = true;
  bool ext_info = true;
  bool guess_follows = false;  // first_kex_packet_follows
  std::string version = "SSH-2.0-KeelTestClient_1.0";
};

class TestClient {
 public:
  explicit TestClient(ClientOptions o = {}, Random* rnd = nullptr)
      : o_(std::move(o)), rnd_(rnd ? rnd : &own_) {}

  // Version line and KEXINIT.
  void begin() {
    out_ += o_.version + "\r\n";
    send_kexinit();
  }

  void send_kexinit() {
    WireWriter w;
    w.u8(msg::kKexInit).raw(std::string(16, 'c'));
    std::string kex = o_.kex;
    if (o_.ext_info) kex += ",ext-info-c";
    if (o_.strict) kex += ",kex-strict-c-v00@openssh.com";
    w.string(kex).string(o_.host_key).string(o_.cipher).string(o_.cipher).string(o_.mac).string(o_.mac);
    w.string("none").string("none").string("").string("").boolean(o_.guess_follows).u32(0);
    i_c_ = w.take();
    packet(i_c_);
    in_kex_ = true;
    if (o_.guess_follows) send_ecdh_init();
  }

  void send_ecdh_init() {
    const std::string name = o_.kex.substr(0, o_.kex.find(','));
    kex_ = crypto::Kex::make(name, *rnd_);
    kex_name_ = name;
    if (!kex_) return;  // a kex the primitives don't have: only the server's refusal matters
    WireWriter w;
    w.u8(msg::kKexEcdhInit).string(kex_->public_key());
    packet(w.str());
  }

  // A payload through the packet layer (encrypted once keys are in use).
  void packet(std::string_view payload) {
    const size_t block = out_c_ ? out_c_->block_size() : 8;
    const size_t counted = (out_c_ ? 0 : 4) + 1 + payload.size();
    size_t pad = block - counted % block;
    if (pad < 4) pad += block;
    std::string p;
    WireWriter w;
    w.u32(static_cast<uint32_t>(1 + payload.size() + pad)).u8(static_cast<uint8_t>(pad)).raw(payload);
    p = w.take();
    p.append(pad, '\0');
    if (out_c_) {
      std::string tag(out_c_->tag_size(), '\0');
      out_c_->seal(seq_out_, reinterpret_cast<uint8_t*>(p.data()), p.size(),
                   reinterpret_cast<uint8_t*>(tag.data()));
      p += tag;
    }
    ++seq_out_;
    out_ += p;
  }
  // Raw bytes (for malformed input).
  void raw(std::string_view bytes) { out_ += bytes; }

  std::string take() {
    std::string s;
    s.swap(out_);
    return s;
  }

  // Server output in; false on a decoding error (error() says).
  bool receive(std::string_view bytes) {
    in_.append(bytes);
    for (;;) {
      if (!got_version_) {
        const size_t nl = in_.find('\n');
        if (nl == std::string::npos) return true;
        std::string line = in_.substr(0, nl);
        in_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.rfind("SSH-", 0) == 0) {
          v_s_ = line;
          got_version_ = true;
        }
        continue;
      }
      if (in_.size() < 4) return true;
      uint8_t* p = reinterpret_cast<uint8_t*>(in_.data());
      const uint32_t len = in_c_ ? in_c_->length(seq_in_, p)
                                 : (uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]);
      if (len > 40000) return failed("bad length from the server");
      const size_t tag = in_c_ ? in_c_->tag_size() : 0;
      if (in_.size() < 4 + len + tag) return true;
      if (in_c_ && !in_c_->open(seq_in_, p, 4 + len, p + 4 + len)) return failed("bad MAC from the server");
      const size_t block = in_c_ ? in_c_->block_size() : 8;
      if ((in_c_ ? len : len + 4) % block != 0) return failed("unaligned packet from the server");
      const uint8_t pad = p[4];
      if (pad < 4 || pad + 1u >= len) return failed("bad padding from the server");
      std::string payload(reinterpret_cast<char*>(p) + 5, len - pad - 1);
      in_.erase(0, 4 + len + tag);
      ++seq_in_;
      if (!handle(payload)) return false;
    }
  }

  bool handle(const std::string& payload) {
    const uint8_t type = static_cast<uint8_t>(payload[0]);
    types.push_back(type);
    switch (type) {
      case msg::kKexInit: {
        i_s_ = payload;
        if (!in_kex_) send_kexinit();  // the server re-keys
        if (!o_.guess_follows || guessed_once_) send_ecdh_init();
        guessed_once_ = true;
        return true;
      }
      case msg::kKexEcdhReply: {
        WireReader r(std::string_view(payload).substr(1));
        std::string_view k_s, q_s, sig;
        if (!r.string(k_s) || !r.string(q_s) || !r.string(sig) || !r.done()) return failed("bad ECDH reply");
        host_key_blob = std::string(k_s);
        signature = std::string(sig);
        if (!kex_) return failed("no kex");
        auto k = kex_->agree(q_s, *rnd_);
        if (!k) return failed("agree: " + k.status().message());
        WireWriter kw;
        kw.mpint({reinterpret_cast<const uint8_t*>(k.value().data()), k.value().size()});
        const std::string k_mpint = kw.take();
        WireWriter hw;
        hw.string(o_.version)
            .string(v_s_)
            .string(i_c_)
            .string(i_s_)
            .string(k_s)
            .string(kex_->public_key())
            .string(q_s)
            .raw(k_mpint);
        exchange_hash = crypto::kex_hash(kex_name_, hw.str());
        if (session_id.empty()) session_id = exchange_hash;
        // Choose as the server does: our own single offers.
        const crypto::CipherInfo* c = crypto::find_cipher(o_.cipher.substr(0, o_.cipher.find(',')));
        const crypto::MacInfo* m = c->aead ? nullptr : crypto::find_mac(o_.mac.substr(0, o_.mac.find(',')));
        auto d = [&](char letter, size_t n) {
          return crypto::derive_key(kex_name_, k_mpint, exchange_hash, letter, session_id, n);
        };
        packet(std::string(1, static_cast<char>(msg::kNewKeys)));
        if (o_.strict) seq_out_ = 0;
        out_c_ = crypto::PacketCipher::make(*c, m, d('C', c->key_len), d('A', c->iv_len),
                                            m ? d('E', m->key_len) : std::string());
        next_in_ = crypto::PacketCipher::make(*c, m, d('D', c->key_len), d('B', c->iv_len),
                                              m ? d('F', m->key_len) : std::string());
        return true;
      }
      case msg::kNewKeys:
        in_c_ = std::move(next_in_);
        if (o_.strict) seq_in_ = 0;
        in_kex_ = false;
        ++kexes;
        return true;
      case msg::kExtInfo:
        ext_info = payload;
        return true;
      case msg::kServiceAccept:
        service_accepted = true;
        return true;
      case msg::kDisconnect: {
        WireReader r(std::string_view(payload).substr(1));
        std::string_view text;
        r.u32(disconnect_reason);
        r.string(text);
        disconnect_text = std::string(text);
        disconnected = true;
        return true;
      }
      default:
        messages.push_back(payload);
        return true;
    }
  }

  void request_service(std::string_view name = "ssh-userauth") {
    WireWriter w;
    w.u8(msg::kServiceRequest).string(name);
    packet(w.str());
  }

  bool failed(std::string why) {
    error = std::move(why);
    return false;
  }

  // Public results.
  std::vector<uint8_t> types;
  std::deque<std::string> messages;  // payloads other than the transport's
  std::string ext_info, host_key_blob, signature, exchange_hash, session_id, error, disconnect_text;
  bool service_accepted = false, disconnected = false;
  uint32_t disconnect_reason = 0;
  int kexes = 0;
  uint32_t seq_out() const { return seq_out_; }
  void set_seq_out(uint32_t s) { seq_out_ = s; }
  bool in_kex() const { return in_kex_; }

 private:
  ClientOptions o_;
  Random own_;
  Random* rnd_;
  std::string out_, in_, v_s_, i_c_, i_s_, kex_name_;
  bool got_version_ = false, in_kex_ = false, guessed_once_ = false;
  std::unique_ptr<crypto::Kex> kex_;
  std::unique_ptr<crypto::PacketCipher> in_c_, out_c_, next_in_;
  uint32_t seq_in_ = 0, seq_out_ = 0;
};

// Shuttles bytes between a client and a server Transport until neither has
// anything to say (or the server closed).
inline void pump(TestClient& c, Transport& t, uint64_t now_ms = 1000) {
  for (int i = 0; i < 100; ++i) {
    std::string to_server = c.take();
    if (!to_server.empty() && !t.closed()) (void)t.feed(to_server, now_ms);
    std::string to_client = t.take_output();
    if (to_client.empty() && to_server.empty()) return;
    if (!c.receive(to_client)) return;
  }
}

}  // namespace keel::ssh::test

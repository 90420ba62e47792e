// Fuzz target: decoded SSH messages (what the transport hands up) fed to user
// authentication and then to the connection protocol, interleaved with the
// host's output and exits, with a stub Authenticator (user "alice", password
// "s3cret", every well-formed key) and a stub ChannelHost that accepts every
// start. Nothing crashes or leaks; every reply is a message of the right
// range; at most max_channels channels are open; the queued output is
// accounted for; a disconnect or protocol error ends the run as the server
// would end the connection.
//
// Input: byte 0 picks the configuration (max channels 1..4, a small or the
// default window, max attempts 1..3, the enabled methods, input acks), then
// records:
//   op % 4 == 0: u16 length, that many bytes: one message
//   op % 4 == 1: channel byte, length byte: write that much (stderr if op & 4)
//   op % 4 == 2: channel byte, status byte: exit
//   op % 8 == 3: skip user authentication (as if it succeeded)
//   op % 8 == 7: channel byte, count byte: the host consumed count * 37 bytes
// The session id is bytes 0..31 (the one the unit tests' paramiko signatures
// were made over, so seeds can carry a valid publickey login).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ssh/channels.h"
#include "ssh/userauth.h"
#include "ssh/wire.h"

namespace {

struct Auth : keel::ssh::Authenticator {
  bool check_password(std::string_view user, std::string_view pw) override {
    return user == "alice" && pw == "s3cret";
  }
  bool has_key(std::string_view user, std::string_view) override { return user == "alice"; }
};

struct Host : keel::ssh::ChannelHost {
  std::vector<bool> live = std::vector<bool>(8, false);
  bool start(uint32_t ch, bool, std::string_view command, const keel::ssh::Pty* pty) override {
    if (ch >= live.size() || live[ch] || command.size() > keel::ssh::kMaxCommand) abort();
    if (pty && (pty->cols < 0 || pty->rows < 0 || pty->cols > keel::ssh::kMaxTermDimension)) abort();
    live[ch] = true;
    return true;
  }
  void input(uint32_t ch, std::string_view) override {
    if (ch >= live.size() || !live[ch]) abort();
  }
  void resize(uint32_t ch, int cols, int rows) override {
    if (ch >= live.size() || !live[ch] || cols < 0 || rows < 0) abort();
  }
  void eof(uint32_t ch) override {
    if (ch >= live.size() || !live[ch]) abort();
  }
  void closed(uint32_t ch) override {
    if (ch >= live.size()) abort();
    live[ch] = false;
  }
};

void check_replies(const std::vector<std::string>& out, uint8_t lo, uint8_t hi) {
  for (const std::string& m : out) {
    if (m.empty()) abort();
    const auto t = static_cast<uint8_t>(m[0]);
    if (t < lo || t > hi) abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t conf = data[0];
  ++data, --size;

  Auth auth;
  keel::ssh::UserAuthConfig ua_cfg;
  ua_cfg.auth = &auth;
  ua_cfg.max_attempts = 1 + (conf >> 2) % 3;
  if (conf & 0x20) ua_cfg.methods = {"publickey"};
  std::string sid;
  for (int i = 0; i < 32; ++i) sid.push_back(static_cast<char>(i));
  keel::ssh::UserAuth ua(ua_cfg, sid);

  Host host;
  keel::ssh::ChannelsConfig ch_cfg;
  ch_cfg.host = &host;
  ch_cfg.max_channels = 1 + (conf & 3);
  if (conf & 0x10) {
    ch_cfg.window = 1024;
    ch_cfg.max_packet = 512;
  }
  ch_cfg.input_acks = (conf & 0x40) != 0;
  bool authenticated = false;
  {
    keel::ssh::Channels ch(ch_cfg);
    std::vector<std::string> out;
    size_t i = 0;
    while (i < size) {
      const uint8_t op = data[i++];
      out.clear();
      switch (op % 4) {
        case 0: {
          if (size - i < 2) break;
          size_t n = (size_t{data[i]} << 8) | data[i + 1];
          i += 2;
          if (n > size - i) n = size - i;
          const std::string_view m(reinterpret_cast<const char*>(data + i), n);
          i += n;
          if (!authenticated) {
            const auto outcome = ua.handle(m, out);
            check_replies(out, keel::ssh::msg::kUserauthFailure, keel::ssh::msg::kUserauthPkOk);
            if (outcome == keel::ssh::UserAuth::Outcome::disconnect) {
              if (ua.disconnect_reason() == 0 || ua.disconnect_text().empty()) abort();
              i = size;
            } else if (outcome == keel::ssh::UserAuth::Outcome::authenticated) {
              if (ua.user() != "alice" || !ua.authenticated()) abort();
              authenticated = true;
            }
          } else {
            const keel::Status s = ch.handle(m, out);
            check_replies(out, keel::ssh::msg::kGlobalRequest, keel::ssh::msg::kChannelFailure);
            if (!s.ok() && s.code() != keel::Errc::unsupported) i = size;  // the server disconnects
          }
          break;
        }
        case 1: {
          if (size - i < 2) {
            i = size;
            break;
          }
          const uint32_t c = data[i] % 8;
          const std::string text(data[i + 1] * 37u, 'x');
          i += 2;
          const size_t before = ch.pending(c);
          ch.write(c, text, op & 4, out);
          check_replies(out, keel::ssh::msg::kChannelData, keel::ssh::msg::kChannelExtendedData);
          size_t sent = 0;
          for (const std::string& m : out) {
            keel::ssh::WireReader r(m);
            uint8_t t = 0;
            uint32_t peer = 0, code = 0;
            std::string_view d;
            if (!r.u8(t) || !r.u32(peer)) abort();
            if (t == keel::ssh::msg::kChannelExtendedData && !r.u32(code)) abort();
            if (!r.string(d) || !r.done()) abort();
            if (d.size() > ch_cfg.max_packet) abort();
            sent += d.size();
          }
          const size_t after = ch.pending(c);
          const bool ignored = after == before && sent == 0;
          const bool taken = after + sent == before + text.size();
          if (!ignored && !taken) abort();
          break;
        }
        case 2:
          if (size - i < 2) {
            i = size;
            break;
          }
          ch.exit(data[i] % 8, data[i + 1], out);
          check_replies(out, keel::ssh::msg::kChannelData, keel::ssh::msg::kChannelRequest);
          i += 2;
          break;
        case 3:
          if (op & 4) {
            if (size - i < 2) {
              i = size;
              break;
            }
            ch.consumed(data[i] % 8, data[i + 1] * 37u, out);
            check_replies(out, keel::ssh::msg::kChannelWindowAdjust, keel::ssh::msg::kChannelWindowAdjust);
            if (out.size() > 1) abort();
            i += 2;
          } else {
            authenticated = true;
          }
          break;
      }
      if (ch.open_count() > ch_cfg.max_channels) abort();
    }
  }
  for (bool l : host.live)
    if (l) abort();  // every started channel was closed
  return 0;
}

// SSH wire encoding (RFC 4251 §5): the data types every SSH message is made
// of, the message numbers and the disconnect reasons. Header-only, no
// mbedTLS: the transport, user authentication, the connection protocol and
// the fuzz targets all read and write messages through these two classes.
//
// WireReader never reads past its input: every getter returns false (and
// leaves the reader failed, so later getters fail too) when the input is too
// short or a value breaks the encoding rules (a boolean is any byte; an mpint
// with a superfluous leading zero byte or a negative value is refused, as
// the server never needs negative numbers). A message is well formed when
// every field was read and done() is true.
//
// Thread-safety: none needed (values, no shared state).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace keel::ssh {

// Message numbers (RFC 4250 §4.1, RFC 8308, RFC 4256).
namespace msg {
inline constexpr uint8_t kDisconnect = 1, kIgnore = 2, kUnimplemented = 3, kDebug = 4, kServiceRequest = 5,
                         kServiceAccept = 6, kExtInfo = 7, kKexInit = 20, kNewKeys = 21, kKexEcdhInit = 30,
                         kKexEcdhReply = 31;
inline constexpr uint8_t kUserauthRequest = 50, kUserauthFailure = 51, kUserauthSuccess = 52,
                         kUserauthBanner = 53, kUserauthPkOk = 60, kUserauthInfoRequest = 60,
                         kUserauthInfoResponse = 61;
inline constexpr uint8_t kGlobalRequest = 80, kRequestSuccess = 81, kRequestFailure = 82, kChannelOpen = 90,
                         kChannelOpenConfirmation = 91, kChannelOpenFailure = 92, kChannelWindowAdjust = 93,
                         kChannelData = 94, kChannelExtendedData = 95, kChannelEof = 96, kChannelClose = 97,
                         kChannelRequest = 98, kChannelSuccess = 99, kChannelFailure = 100;
}  // namespace msg

// SSH_MSG_DISCONNECT reason codes (RFC 4250 §4.2.2).
namespace disconnect {
inline constexpr uint32_t kHostNotAllowedToConnect = 1, kProtocolError = 2, kKeyExchangeFailed = 3,
                          kReserved = 4, kMacError = 5, kCompressionError = 6, kServiceNotAvailable = 7,
                          kProtocolVersionNotSupported = 8, kHostKeyNotVerifiable = 9, kConnectionLost = 10,
                          kByApplication = 11, kTooManyConnections = 12, kAuthCancelledByUser = 13,
                          kNoMoreAuthMethodsAvailable = 14, kIllegalUserName = 15;
}  // namespace disconnect

// SSH_MSG_CHANNEL_OPEN_FAILURE reason codes (RFC 4254 §5.1).
namespace open_failure {
inline constexpr uint32_t kAdministrativelyProhibited = 1, kConnectFailed = 2, kUnknownChannelType = 3,
                          kResourceShortage = 4;
}  // namespace open_failure

// The public-key signature algorithms keel accepts from users, in the
// preference order it announces them (RFC 8308 server-sig-algs).
inline constexpr std::string_view kServerSigAlgs = "ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256";

class WireReader {
 public:
  explicit WireReader(std::string_view data) : d_(data) {}

  bool u8(uint8_t& v) {
    if (!need(1)) return false;
    v = static_cast<uint8_t>(d_[p_++]);
    return true;
  }
  bool boolean(bool& v) {
    uint8_t b = 0;
    if (!u8(b)) return false;
    v = b != 0;
    return true;
  }
  bool u32(uint32_t& v) {
    if (!need(4)) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(d_[p_++]);
    return true;
  }
  bool u64(uint64_t& v) {
    if (!need(8)) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(d_[p_++]);
    return true;
  }
  // A string: uint32 length, then that many bytes (a view into the input).
  bool string(std::string_view& v) {
    uint32_t n = 0;
    if (!u32(n) || !need(n)) return fail();
    v = d_.substr(p_, n);
    p_ += n;
    return true;
  }
  // A name-list: a string of comma-separated names; an empty string is an
  // empty list. Empty names (",," or a trailing comma) are refused.
  bool name_list(std::vector<std::string_view>& v) {
    std::string_view s;
    if (!string(s)) return false;
    v.clear();
    if (s.empty()) return true;
    size_t start = 0;
    for (;;) {
      const size_t comma = s.find(',', start);
      const std::string_view name = s.substr(start, comma == std::string_view::npos ? s.npos : comma - start);
      if (name.empty()) return fail();
      v.push_back(name);
      if (comma == std::string_view::npos) return true;
      start = comma + 1;
    }
  }
  // A non-negative mpint; `magnitude` is its big-endian value without the
  // sign byte (empty for zero).
  bool mpint(std::string_view& magnitude) {
    std::string_view s;
    if (!string(s)) return false;
    if (s.empty()) {
      magnitude = s;
      return true;
    }
    const auto first = static_cast<uint8_t>(s[0]);
    if (first & 0x80) return fail();                                                    // negative
    if (first == 0 && (s.size() == 1 || !(static_cast<uint8_t>(s[1]) & 0x80))) return fail();  // not minimal
    magnitude = first == 0 ? s.substr(1) : s;
    return true;
  }
  // The rest of the input.
  std::string_view rest() {
    std::string_view r = ok_ ? d_.substr(p_) : std::string_view{};
    p_ = d_.size();
    return r;
  }

  bool ok() const { return ok_; }
  size_t remaining() const { return ok_ ? d_.size() - p_ : 0; }
  // Every byte was read and nothing failed.
  bool done() const { return ok_ && p_ == d_.size(); }

 private:
  bool need(size_t n) {
    if (!ok_ || d_.size() - p_ < n) return fail();
    return true;
  }
  bool fail() {
    ok_ = false;
    return false;
  }
  std::string_view d_;
  size_t p_ = 0;
  bool ok_ = true;
};

class WireWriter {
 public:
  WireWriter& u8(uint8_t v) {
    s_.push_back(static_cast<char>(v));
    return *this;
  }
  WireWriter& boolean(bool v) { return u8(v ? 1 : 0); }
  WireWriter& u32(uint32_t v) {
    for (int i = 3; i >= 0; --i) s_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  WireWriter& u64(uint64_t v) {
    for (int i = 7; i >= 0; --i) s_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  WireWriter& string(std::string_view v) {
    u32(static_cast<uint32_t>(v.size()));
    s_.append(v);
    return *this;
  }
  WireWriter& name_list(const std::vector<std::string>& names) {
    std::string joined;
    for (const std::string& n : names) joined += (joined.empty() ? "" : ",") + n;
    return string(joined);
  }
  // A non-negative mpint from its big-endian magnitude (leading zero bytes
  // are dropped; a sign byte is added when the top bit is set).
  WireWriter& mpint(std::span<const uint8_t> be) {
    size_t i = 0;
    while (i < be.size() && be[i] == 0) ++i;
    const bool pad = i < be.size() && (be[i] & 0x80);
    u32(static_cast<uint32_t>(be.size() - i + (pad ? 1 : 0)));
    if (pad) s_.push_back('\0');
    s_.append(reinterpret_cast<const char*>(be.data()) + i, be.size() - i);
    return *this;
  }
  WireWriter& raw(std::string_view v) {
    s_.append(v);
    return *this;
  }

  const std::string& str() const { return s_; }
  std::string take() { return std::move(s_); }

 private:
  std::string s_;
};

}  // namespace keel::ssh

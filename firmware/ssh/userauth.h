// SSH user authentication (RFC 4252, keyboard-interactive RFC 4256), sans-IO:
// fed one decoded message 50..79 at a time (after the transport accepted the
// "ssh-userauth" service), it appends reply payloads for Transport::send.
//
// Methods: "publickey" (a query without signature answered with PK_OK when
// the user has that key; a signed request verified over RFC 4252 §7's data
// with the transport's session id; ecdsa-sha2-nistp256, rsa-sha2-256/512;
// "ssh-rsa" (SHA-1) refused), "password" (no password change) and
// "keyboard-interactive" (one non-echoed "Password: " prompt). "none" and any
// other method get USERAUTH_FAILURE listing the enabled methods. At most
// max_attempts failed attempts (a public-key query is not one), then a
// DISCONNECT kNoMoreAuthMethodsAvailable. The service must be
// "ssh-connection". A client may change user or service between requests
// (RFC 4252 §5): the state (pending keyboard-interactive) is reset, the
// failure count is kept (per connection). Unknown users go through the same
// path as wrong passwords and keys (the Authenticator hashes anyway): the
// replies don't reveal which user names exist.
//
// Thread-safety: none; one UserAuth per connection, used by the SSH I/O
// thread only. The Authenticator is called on that thread and must be safe
// to call there (control::Users has its own mutex).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ssh/wire.h"

namespace keel::ssh {

class Authenticator {  // srv implements it over control::Users
 public:
  virtual ~Authenticator() = default;
  virtual bool check_password(std::string_view user, std::string_view password) = 0;
  virtual bool has_key(std::string_view user, std::string_view key_blob) = 0;
};

struct UserAuthConfig {
  Authenticator* auth = nullptr;
  int max_attempts = 3;
  // The methods offered in USERAUTH_FAILURE, in this order; a method not
  // listed is refused like an unknown one.
  std::vector<std::string> methods = {"publickey", "password", "keyboard-interactive"};
};

// User names: 1..kMaxUserName printable ASCII bytes (0x21..0x7e).
inline constexpr size_t kMaxUserName = 64;

class UserAuth {
 public:
  UserAuth(UserAuthConfig cfg, std::string_view session_id);

  enum class Outcome { pending, authenticated, disconnect };
  // One message 50..79; replies appended to `out` (each a payload for
  // Transport::send). After `authenticated` or `disconnect`, stop feeding.
  Outcome handle(std::string_view payload, std::vector<std::string>& out);

  const std::string& user() const { return user_; }
  const std::string& method() const { return method_; }
  uint32_t disconnect_reason() const { return reason_; }
  const std::string& disconnect_text() const { return reason_text_; }
  int failures() const { return failures_; }
  bool authenticated() const { return done_; }

 private:
  bool enabled(std::string_view method) const;
  Outcome fail_attempt(std::vector<std::string>& out);
  Outcome refuse(std::vector<std::string>& out);
  Outcome protocol_error(std::string text);
  Outcome handle_publickey(std::string_view user, std::string_view service, WireReader& r,
                           std::vector<std::string>& out);
  Outcome handle_password(std::string_view user, WireReader& r, std::vector<std::string>& out);
  Outcome handle_info_response(WireReader& r, std::vector<std::string>& out);
  Outcome succeed(std::string_view user, std::string_view method, std::vector<std::string>& out);

  UserAuthConfig cfg_;
  std::string session_id_;
  std::string user_, method_;
  bool kbd_pending_ = false;  // an INFO_REQUEST is outstanding
  std::string kbd_user_;
  bool done_ = false;
  bool dead_ = false;
  int failures_ = 0;
  int requests_ = 0;
  uint32_t reason_ = 0;
  std::string reason_text_;
};

}  // namespace keel::ssh

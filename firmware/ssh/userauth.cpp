// SSH user authentication (RFC 4252, RFC 4256): see userauth.h.
//
// Per connection: the failed attempts (password, keyboard-interactive
// response, signed public-key request; a public-key query, "none" and
// unknown methods are not attempts), the number of requests (kMaxRequests
// bounds a client that loops on queries; the server's login grace time
// bounds it in time) and an outstanding keyboard-interactive prompt.
//
// Thread-safety: none (one object per connection, on the SSH I/O thread).
#include "ssh/userauth.h"

#include "ssh/keys.h"

namespace keel::ssh {
namespace {

constexpr std::string_view kService = "ssh-connection";
constexpr int kMaxRequests = 64;

bool valid_user_name(std::string_view u) {
  if (u.empty() || u.size() > kMaxUserName) return false;
  for (char c : u)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}

bool sig_alg_fits(std::string_view alg, std::string_view key_type) {
  if (alg == "ecdsa-sha2-nistp256") return key_type == "ecdsa-sha2-nistp256";
  if (alg == "rsa-sha2-256" || alg == "rsa-sha2-512") return key_type == "ssh-rsa";
  return false;  // "ssh-rsa" (SHA-1), ssh-ed25519, certificates, ...
}

std::string key_type_of(std::string_view blob) {
  WireReader r(blob);
  std::string_view t;
  return r.string(t) ? std::string(t) : std::string();
}

}  // namespace

UserAuth::UserAuth(UserAuthConfig cfg, std::string_view session_id)
    : cfg_(std::move(cfg)), session_id_(session_id) {}

bool UserAuth::enabled(std::string_view method) const {
  for (const std::string& m : cfg_.methods)
    if (m == method) return true;
  return false;
}

UserAuth::Outcome UserAuth::protocol_error(std::string text) {
  dead_ = true;
  reason_ = disconnect::kProtocolError;
  reason_text_ = std::move(text);
  return Outcome::disconnect;
}

UserAuth::Outcome UserAuth::refuse(std::vector<std::string>& out) {
  out.push_back(WireWriter().u8(msg::kUserauthFailure).name_list(cfg_.methods).boolean(false).take());
  return Outcome::pending;
}

UserAuth::Outcome UserAuth::fail_attempt(std::vector<std::string>& out) {
  ++failures_;
  if (failures_ >= cfg_.max_attempts) {
    dead_ = true;
    reason_ = disconnect::kNoMoreAuthMethodsAvailable;
    reason_text_ = "too many authentication failures";
    return Outcome::disconnect;
  }
  return refuse(out);
}

UserAuth::Outcome UserAuth::succeed(std::string_view user, std::string_view method,
                                    std::vector<std::string>& out) {
  done_ = true;
  user_ = std::string(user);
  method_ = std::string(method);
  out.push_back(WireWriter().u8(msg::kUserauthSuccess).take());
  return Outcome::authenticated;
}

UserAuth::Outcome UserAuth::handle(std::string_view payload, std::vector<std::string>& out) {
  if (dead_) return Outcome::disconnect;
  WireReader r(payload);
  uint8_t type = 0;
  if (!r.u8(type)) return protocol_error("empty message");
  if (done_) {
    // RFC 4252 §5.1: requests after USERAUTH_SUCCESS are ignored.
    if (type == msg::kUserauthRequest || type == msg::kUserauthInfoResponse) return Outcome::authenticated;
    return protocol_error("unexpected message " + std::to_string(type) + " after authentication");
  }
  if (type == msg::kUserauthInfoResponse) {
    if (!kbd_pending_) return protocol_error("USERAUTH_INFO_RESPONSE without a request");
    return handle_info_response(r, out);
  }
  if (type != msg::kUserauthRequest)
    return protocol_error("unexpected message " + std::to_string(type) + " during user authentication");
  if (++requests_ > kMaxRequests) {
    dead_ = true;
    reason_ = disconnect::kNoMoreAuthMethodsAvailable;
    reason_text_ = "too many authentication requests";
    return Outcome::disconnect;
  }

  std::string_view user, service, method;
  if (!r.string(user) || !r.string(service) || !r.string(method))
    return protocol_error("malformed USERAUTH_REQUEST");
  if (!valid_user_name(user)) {
    dead_ = true;
    reason_ = disconnect::kIllegalUserName;
    reason_text_ = "illegal user name";
    return Outcome::disconnect;
  }
  if (service != kService) {
    dead_ = true;
    reason_ = disconnect::kServiceNotAvailable;
    reason_text_ = "service not available";
    return Outcome::disconnect;
  }
  // RFC 4252 §5: the client may change the user name or service between
  // requests; whatever was in progress (a keyboard-interactive prompt) is
  // dropped, as it is by any new request (RFC 4256 §3.1). The failure count
  // stays: it is per connection.
  kbd_pending_ = false;
  kbd_user_.clear();

  if (method == "none" || !enabled(method)) {
    // Not an attempt (the first request of every client); only lists the methods.
    r.rest();
    return refuse(out);
  }
  if (method == "publickey") return handle_publickey(user, service, r, out);
  if (method == "password") return handle_password(user, r, out);
  if (method == "keyboard-interactive") {
    std::string_view language, submethods;
    if (!r.string(language) || !r.string(submethods) || !r.done())
      return protocol_error("malformed keyboard-interactive request");
    kbd_pending_ = true;
    kbd_user_ = std::string(user);
    out.push_back(WireWriter()
                      .u8(msg::kUserauthInfoRequest)
                      .string("")  // name
                      .string("")  // instruction
                      .string("")  // language tag
                      .u32(1)
                      .string("Password: ")
                      .boolean(false)  // no echo
                      .take());
    return Outcome::pending;
  }
  r.rest();  // an enabled method this class doesn't implement
  return refuse(out);
}

UserAuth::Outcome UserAuth::handle_publickey(std::string_view user, std::string_view service, WireReader& r,
                                             std::vector<std::string>& out) {
  bool has_sig = false;
  std::string_view alg, blob;
  if (!r.boolean(has_sig) || !r.string(alg) || !r.string(blob))
    return protocol_error("malformed publickey request");
  if (!has_sig) {
    if (!r.done()) return protocol_error("malformed publickey request");
    // A query: PK_OK when this user may log in with this key; never an attempt.
    const bool ok = sig_alg_fits(alg, key_type_of(blob)) && parse_public_key_blob(blob).ok() &&
                    cfg_.auth != nullptr && cfg_.auth->has_key(user, blob);
    if (!ok) return refuse(out);
    out.push_back(WireWriter().u8(msg::kUserauthPkOk).string(alg).string(blob).take());
    return Outcome::pending;
  }
  std::string_view sig;
  if (!r.string(sig) || !r.done()) return protocol_error("malformed publickey request");
  if (!sig_alg_fits(alg, key_type_of(blob))) return fail_attempt(out);
  const std::string signed_data = WireWriter()
                                      .string(session_id_)
                                      .u8(msg::kUserauthRequest)
                                      .string(user)
                                      .string(service)
                                      .string("publickey")
                                      .boolean(true)
                                      .string(alg)
                                      .string(blob)
                                      .take();
  // Both checks always run: the time taken doesn't tell whether the user has the key.
  const bool known = cfg_.auth != nullptr && cfg_.auth->has_key(user, blob);
  const bool valid = verify_signature(blob, alg, sig, signed_data);
  if (known && valid) return succeed(user, "publickey", out);
  return fail_attempt(out);
}

UserAuth::Outcome UserAuth::handle_password(std::string_view user, WireReader& r,
                                            std::vector<std::string>& out) {
  bool change = false;
  std::string_view password, new_password;
  if (!r.boolean(change) || !r.string(password)) return protocol_error("malformed password request");
  if (change && !r.string(new_password)) return protocol_error("malformed password request");
  if (!r.done()) return protocol_error("malformed password request");
  if (change) return fail_attempt(out);  // no password changes over SSH
  const bool ok = cfg_.auth != nullptr && cfg_.auth->check_password(user, password);
  if (ok) return succeed(user, "password", out);
  return fail_attempt(out);
}

UserAuth::Outcome UserAuth::handle_info_response(WireReader& r, std::vector<std::string>& out) {
  kbd_pending_ = false;
  const std::string user = std::move(kbd_user_);
  kbd_user_.clear();
  uint32_t n = 0;
  if (!r.u32(n)) return protocol_error("malformed USERAUTH_INFO_RESPONSE");
  if (n != 1)
    return protocol_error("USERAUTH_INFO_RESPONSE with " + std::to_string(n) + " responses to 1 prompt");
  std::string_view response;
  if (!r.string(response) || !r.done()) return protocol_error("malformed USERAUTH_INFO_RESPONSE");
  const bool ok = cfg_.auth != nullptr && cfg_.auth->check_password(user, response);
  if (ok) return succeed(user, "keyboard-interactive", out);
  return fail_attempt(out);
}

}  // namespace keel::ssh

// Users — the accounts that may log in to a console or to the SSH server
// (which reads this store from its I/O thread).
//
// Each user has a name, an optional stored password hash
// (firmware/ssh/password.h: pbkdf2-sha256$ITER$SALT$HASH; the plain text is
// never kept), a role (control/session.h; default admin, so configs written
// before roles existed keep their meaning) and any number of SSH public keys
// (ECDSA P-256 or RSA >= 2048, parsed by ssh::parse_public_key_line). A user
// may have keys and no password. The running config carries a user as
//   username NAME secret HASH                 (when it has a password)
//   username NAME role R                      (when R is not admin)
//   username NAME ssh-key TYPE BASE64 [COMMENT]   (one per key)
// so a saved config round-trips without plain text. With no user configured
// there is no login (a fresh board is reached on its serial console without
// one).
//
// Names: 1..32 characters, a lower-case letter or '_' first, then lower-case
// letters, digits, '_', '-', '.'.
//
// Thread-safety: every method takes an internal mutex, so any thread may
// call any method (the control thread and SSH session threads change users;
// the SSH I/O thread verifies passwords and keys). Password hashing runs
// outside the mutex. Readers get copies (list(), names()), never references.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/session.h"
#include "core/status.h"

namespace keel::control {

// One public key of a user (the parts of an OpenSSH public key line).
struct UserKey {
  std::string type;     // "ecdsa-sha2-nistp256" | "ssh-rsa"
  std::string blob;     // the SSH wire encoding of the key (binary)
  std::string comment;  // may be empty
  int bits = 0;         // 256 for P-256, the modulus size for RSA
  std::string line() const;         // "TYPE BASE64[ COMMENT]"
  std::string blob_base64() const;  // BASE64 of the blob
  std::string fingerprint() const;  // "SHA256:..." (ssh-keygen -lf)
};

struct UserInfo {
  std::string name;
  std::string hash;  // stored password hash; "" when the user has no password
  Role role = Role::admin;
  std::vector<UserKey> keys;  // in the order they were added
};

class Users {
 public:
  // Adds NAME or replaces its password; the password is hashed here.
  Status set_password(std::string_view name, std::string_view password);
  // Adds NAME or replaces its password with an already hashed one (checked).
  Status set_hash(std::string_view name, std::string_view stored_hash);
  // Adds NAME (without a password) or changes its role.
  Status set_role(std::string_view name, Role role);
  // Adds a public key to NAME (adding NAME if needed): `key_line` is an
  // OpenSSH public key line "TYPE BASE64 [COMMENT]", checked by
  // ssh::parse_public_key_line. The same key twice is one key (the newer
  // comment wins).
  Status add_key(std::string_view name, std::string_view key_line);
  // Removes the key whose BASE64 blob is `blob_base64`; not_found if NAME
  // has no such key.
  Status remove_key(std::string_view name, std::string_view blob_base64);
  // Removes NAME; not_found if there is no such user.
  Status remove(std::string_view name);
  void clear();

  // True when NAME exists, has a password and PASSWORD is it. An unknown
  // name (or a user without a password) costs the same hashing work as a
  // wrong password, so the time a failure takes doesn't tell which user
  // names exist.
  bool verify(std::string_view name, std::string_view password) const;
  // NAME's role; nullopt if there is no such user.
  std::optional<Role> role(std::string_view name) const;
  // True when NAME has the public key whose SSH wire encoding is `blob`.
  bool has_key(std::string_view name, std::string_view blob) const;

  bool empty() const;
  size_t size() const;
  std::vector<std::string> names() const;  // sorted
  // Every user, sorted by name (a copy): what show users and the running
  // config print.
  std::vector<UserInfo> list() const;

  static Status check_name(std::string_view name);

 private:
  mutable std::mutex mu_;
  std::map<std::string, UserInfo, std::less<>> users_;  // guarded by mu_
};

}  // namespace keel::control

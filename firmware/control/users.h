// Users — the accounts that may log in to a console (and, later, to the SSH
// server, which shares this store).
//
// Each user is a name and a stored password hash (firmware/ssh/password.h:
// pbkdf2-sha256$ITER$SALT$HASH); the plain text is never kept. The running
// config carries users as `username NAME secret HASH`, so a saved config
// round-trips without plain text. With no user configured there is no login
// (a fresh board is reached on its serial console without one).
//
// Names: 1..32 characters, a lower-case letter or '_' first, then lower-case
// letters, digits, '_', '-', '.'.
//
// Thread-safety: control thread only (the consoles and SSH sessions all run
// there; see ARCHITECTURE.md "Threads").
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace keel::control {

class Users {
 public:
  // Adds NAME or replaces its password; the password is hashed here.
  Status set_password(std::string_view name, std::string_view password);
  // Adds NAME or replaces its password with an already hashed one (checked).
  Status set_hash(std::string_view name, std::string_view stored_hash);
  // Removes NAME; not_found if there is no such user.
  Status remove(std::string_view name);
  void clear() { users_.clear(); }

  // True when NAME exists and PASSWORD is its password. An unknown name
  // costs the same hashing work as a wrong password, so the time a failure
  // takes doesn't tell which user names exist.
  bool verify(std::string_view name, std::string_view password) const;

  bool empty() const { return users_.empty(); }
  size_t size() const { return users_.size(); }
  std::vector<std::string> names() const;  // sorted
  // (name, stored hash), sorted by name: what the running config prints.
  const std::map<std::string, std::string, std::less<>>& entries() const { return users_; }

  static Status check_name(std::string_view name);

 private:
  std::map<std::string, std::string, std::less<>> users_;  // name -> stored hash
};

}  // namespace keel::control

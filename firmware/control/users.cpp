// The user store (users.h); hashing is firmware/ssh/password.h's, key
// parsing firmware/ssh/keys.h's.
#include "control/users.h"

#include "ssh/keys.h"
#include "ssh/password.h"

namespace keel::control {

namespace {

// Verifying against this costs what verifying a real user costs (same
// iteration count as new hashes), and matches no password.
constexpr std::string_view kDummyHash =
    "pbkdf2-sha256$20000$00000000000000000000000000000000$"
    "0000000000000000000000000000000000000000000000000000000000000000";
static_assert(ssh::kDefaultIterations == 20000, "kDummyHash must cost what a default hash costs");

}  // namespace

std::string UserKey::line() const { return ssh::public_key_line({type, blob, comment, 0}); }

std::string UserKey::blob_base64() const {
  std::string l = ssh::public_key_line({type, blob, "", 0});  // "TYPE BASE64"
  return l.substr(l.find(' ') + 1);
}

std::string UserKey::fingerprint() const { return ssh::fingerprint(blob); }

Status Users::check_name(std::string_view name) {
  auto bad = [&] {
    return invalid("bad user name '" + std::string(name) +
                   "': 1-32 characters, a lower-case letter or '_' first, then a-z 0-9 _ - .");
  };
  if (name.empty() || name.size() > 32) return bad();
  if (!((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_')) return bad();
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.')) return bad();
  return {};
}

Status Users::set_password(std::string_view name, std::string_view password) {
  if (Status st = check_name(name); !st.ok()) return st;
  auto h = ssh::hash_password(password);  // slow: outside the mutex
  if (!h) return std::move(h).take_status().prefix("user " + std::string(name));
  std::lock_guard lk(mu_);
  UserInfo& u = users_[std::string(name)];
  u.name = std::string(name);
  u.hash = std::move(*h);
  return {};
}

Status Users::set_hash(std::string_view name, std::string_view stored_hash) {
  if (Status st = check_name(name); !st.ok()) return st;
  if (Status st = ssh::check_stored_hash(stored_hash); !st.ok()) return st.prefix("user " + std::string(name));
  std::lock_guard lk(mu_);
  UserInfo& u = users_[std::string(name)];
  u.name = std::string(name);
  u.hash = std::string(stored_hash);
  return {};
}

Status Users::set_role(std::string_view name, Role role) {
  if (Status st = check_name(name); !st.ok()) return st;
  std::lock_guard lk(mu_);
  UserInfo& u = users_[std::string(name)];
  u.name = std::string(name);
  u.role = role;
  return {};
}

Status Users::add_key(std::string_view name, std::string_view key_line) {
  if (Status st = check_name(name); !st.ok()) return st;
  auto k = ssh::parse_public_key_line(key_line);
  if (!k) return std::move(k).take_status().prefix("user " + std::string(name) + " ssh-key");
  std::lock_guard lk(mu_);
  UserInfo& u = users_[std::string(name)];
  u.name = std::string(name);
  for (UserKey& have : u.keys) {
    if (have.blob == k->blob) {  // the same key again: one key, the newer comment
      have.comment = k->comment;
      return {};
    }
  }
  u.keys.push_back({k->type, std::move(k->blob), std::move(k->comment), k->bits});
  return {};
}

Status Users::remove_key(std::string_view name, std::string_view blob_base64) {
  std::lock_guard lk(mu_);
  auto it = users_.find(name);
  if (it == users_.end()) return error(Errc::not_found, "no user '" + std::string(name) + "'");
  auto& keys = it->second.keys;
  for (auto k = keys.begin(); k != keys.end(); ++k) {
    if (k->blob_base64() == blob_base64) {
      keys.erase(k);
      return {};
    }
  }
  return error(Errc::not_found, "user '" + std::string(name) + "' has no such ssh key");
}

Status Users::remove(std::string_view name) {
  std::lock_guard lk(mu_);
  auto it = users_.find(name);
  if (it == users_.end()) return error(Errc::not_found, "no user '" + std::string(name) + "'");
  users_.erase(it);
  return {};
}

void Users::clear() {
  std::lock_guard lk(mu_);
  users_.clear();
}

bool Users::verify(std::string_view name, std::string_view password) const {
  std::string hash;
  {
    std::lock_guard lk(mu_);
    auto it = users_.find(name);
    if (it != users_.end()) hash = it->second.hash;
  }
  if (hash.empty()) {
    (void)ssh::verify_password(password, kDummyHash);
    return false;
  }
  return ssh::verify_password(password, hash);  // slow: outside the mutex
}

std::optional<Role> Users::role(std::string_view name) const {
  std::lock_guard lk(mu_);
  auto it = users_.find(name);
  if (it == users_.end()) return std::nullopt;
  return it->second.role;
}

bool Users::has_key(std::string_view name, std::string_view blob) const {
  std::lock_guard lk(mu_);
  auto it = users_.find(name);
  if (it == users_.end()) return false;
  for (const UserKey& k : it->second.keys)
    if (k.blob == blob) return true;
  return false;
}

bool Users::empty() const {
  std::lock_guard lk(mu_);
  return users_.empty();
}

size_t Users::size() const {
  std::lock_guard lk(mu_);
  return users_.size();
}

std::vector<std::string> Users::names() const {
  std::lock_guard lk(mu_);
  std::vector<std::string> v;
  for (const auto& [n, u] : users_) v.push_back(n);
  return v;
}

std::vector<UserInfo> Users::list() const {
  std::lock_guard lk(mu_);
  std::vector<UserInfo> v;
  for (const auto& [n, u] : users_) v.push_back(u);
  return v;
}

}  // namespace keel::control

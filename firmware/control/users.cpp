// The user store (users.h); hashing is firmware/ssh/password.h's.
#include "control/users.h"

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
  auto h = ssh::hash_password(password);
  if (!h) return std::move(h).take_status().prefix("user " + std::string(name));
  users_.insert_or_assign(std::string(name), std::move(*h));
  return {};
}

Status Users::set_hash(std::string_view name, std::string_view stored_hash) {
  if (Status st = check_name(name); !st.ok()) return st;
  if (Status st = ssh::check_stored_hash(stored_hash); !st.ok()) return st.prefix("user " + std::string(name));
  users_.insert_or_assign(std::string(name), std::string(stored_hash));
  return {};
}

Status Users::remove(std::string_view name) {
  auto it = users_.find(name);
  if (it == users_.end()) return error(Errc::not_found, "no user '" + std::string(name) + "'");
  users_.erase(it);
  return {};
}

bool Users::verify(std::string_view name, std::string_view password) const {
  auto it = users_.find(name);
  if (it == users_.end()) {
    (void)ssh::verify_password(password, kDummyHash);
    return false;
  }
  return ssh::verify_password(password, it->second);
}

std::vector<std::string> Users::names() const {
  std::vector<std::string> v;
  for (const auto& [n, h] : users_) v.push_back(n);
  return v;
}

}  // namespace keel::control

// Session, Role, Origin and Access names (session.h).
#include "control/session.h"

#include <atomic>

namespace keel::control {

const char* to_string(Role r) {
  switch (r) {
    case Role::read_only: return "read-only";
    case Role::operator_: return "operator";
    case Role::admin: return "admin";
  }
  return "?";
}

std::optional<Role> parse_role(std::string_view s) {
  if (s == "read-only") return Role::read_only;
  if (s == "operator") return Role::operator_;
  if (s == "admin") return Role::admin;
  return std::nullopt;
}

const char* to_string(Origin o) {
  switch (o) {
    case Origin::console: return "console";
    case Origin::ssh: return "ssh";
    case Origin::socket: return "socket";
    case Origin::config: return "config";
  }
  return "?";
}

const char* to_string(Access a) {
  switch (a) {
    case Access::show: return "show";
    case Access::change: return "change";
    case Access::admin: return "admin";
  }
  return "?";
}

Role required_role(Access a) {
  switch (a) {
    case Access::show: return Role::read_only;
    case Access::change: return Role::operator_;
    case Access::admin: return Role::admin;
  }
  return Role::admin;
}

std::string Session::describe() const {
  std::string s = to_string(origin);
  switch (origin) {
    case Origin::ssh:
      return s + " " + (user.empty() ? std::string("?") : user) + "@" + peer;
    case Origin::config: {
      // "keel-config/startup-config" -> "config startup-config"
      size_t slash = peer.rfind('/');
      std::string name = slash == std::string::npos ? peer : peer.substr(slash + 1);
      return name.empty() ? s : s + " " + name;
    }
    case Origin::console:
    case Origin::socket:
      return user.empty() ? s : s + " " + user;
  }
  return s;
}

uint64_t next_session_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace keel::control

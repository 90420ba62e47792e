// Session — who runs a command: where it came from (the serial console, an
// SSH session, `keel --exec`, a config file), the user and role, the peer
// and the terminal. Every command runs through control::Control with one
// (control/control.h), which checks the role against the command's Access
// and names the session in the audit log.
//
// A Session is a plain value. Each command tree (cli/console.h) holds the
// one of the session it serves; the SSH glue updates rows/cols on a
// window-change.
//
// Thread-safety: a value type; a Session is read and written by the thread
// that owns the tree holding it (nothing shares one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace keel::control {

// What a user may do. Printed "read-only", "operator", "admin".
enum class Role : uint8_t { read_only, operator_, admin };
const char* to_string(Role r);
std::optional<Role> parse_role(std::string_view s);

// Where a session comes from. Printed "console", "ssh", "socket", "config".
enum class Origin : uint8_t { console, ssh, socket, config };
const char* to_string(Origin o);

struct Session {
  Origin origin = Origin::console;
  std::string user;         // "" when nobody logged in (console without users, socket, config)
  Role role = Role::admin;  // console/socket/config without a login: admin
  std::string peer;         // "127.0.0.1:40312", "/dev/ttyS0", "stdin", "keel-config/startup-config"
  int rows = 24, cols = 80; // the terminal (rows 0: no paging); window-change updates them
  uint64_t id = 0;          // unique while keel runs (show ssh sessions); next_session_id()
  // "ssh admin@127.0.0.1:40312", "console", "console admin", "socket",
  // "config startup-config": how the audit log names the session.
  std::string describe() const;
};

// A fresh id for a Session (1, 2, ...; thread-safe).
uint64_t next_session_id();

// What a command needs, declared once with the command (cli/).
enum class Access : uint8_t {
  show,    // reads state: every role
  change,  // changes forwarding state: operator and admin
  admin,   // users, SSH settings, whole-config replacement, shutdown: admin only
};
const char* to_string(Access a);  // "show", "change", "admin"
// The least role that may run a command of this access.
Role required_role(Access a);
inline bool allowed(Role r, Access a) { return static_cast<int>(r) >= static_cast<int>(required_role(a)); }

}  // namespace keel::control

// SSH commands: `ssh enable|disable`, `ssh port N`, `ssh listen ADDR`,
// `ssh max-sessions N`, `ssh idle-timeout S`, `[no] ssh kex-algorithms|
// host-key-algorithms|ciphers|macs LIST`, `show ssh`, `show ssh
// host-key`, `show ssh sessions`, and the "ssh" running-config section
// (order 60: after the users it serves).
//
// The algorithm lists have sshd_config's names and meaning (KexAlgorithms,
// HostKeyAlgorithms, Ciphers, MACs): comma-separated, in preference order,
// each name one keel has (else an error naming it, and nothing changes);
// `no ssh kex-algorithms` (or the full list in keel's order) restores the
// default: every algorithm keel has, the issue's list, which running-config
// doesn't print. They apply to
// connections made afterwards. sshd_config's +, - and ^ forms are not
// taken: the list is given whole.
//
// The settings live in System::ssh_settings() (board defaults at boot:
// Board::ssh_*); a change goes through System::ssh() (cli/ssh_sessions.h)
// when one is attached, and is recorded only when it applied: a port that
// can't be bound is an error and the old listener stays. Without a service
// (the startup config runs before main.cpp starts SSH) the settings are only
// recorded. Changing the port or the address moves the listener; sessions
// already open keep running. `ssh disable` stops listening; sessions already
// open keep running too (end them with `no username` or let them exit).
#include <algorithm>
#include <memory>

#include "cli/command_tree_impl.h"
#include "cli/view.h"
#include "core/log.h"
#include "ssh/server.h"
#include "ssh/transport.h"

namespace keel::cli {

namespace {

KEEL_LOG_MODULE(log_sshcmd, "ssh");

struct SshArgs {
  std::string addr;
  std::string list;
  uint32_t n = 0;
};

// One `ssh <command> LIST` algorithm setting.
struct SshAlgorithmSetting {
  const char* command;  // "kex-algorithms"
  const char* what;     // "key exchange", for errors
  const char* have;     // ssh::transport_algorithms()'s key
  const char* json;     // show ssh's JSON key
  std::vector<std::string> control::SshSettings::*list;
};
const SshAlgorithmSetting kSshAlgorithmSettings[] = {
    {"kex-algorithms", "key exchange", "kex", "kex_algorithms", &control::SshSettings::kex_algorithms},
    {"host-key-algorithms", "host key algorithm", "host_key", "host_key_algorithms",
     &control::SshSettings::host_key_algorithms},
    {"ciphers", "cipher", "cipher", "ciphers", &control::SshSettings::ciphers},
    {"macs", "MAC", "mac", "macs", &control::SshSettings::macs},
};

std::string ssh_join_names(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& n : v) out += (out.empty() ? "" : ",") + n;
  return out;
}

// What the setting offers: its list, or everything keel has.
const std::vector<std::string>& ssh_effective(const SshAlgorithmSetting& a, const control::SshSettings& s) {
  const std::vector<std::string>& v = s.*(a.list);
  return v.empty() ? ssh::transport_algorithms(a.have) : v;
}

// LIST ("name,name,...") -> the setting's value (empty: the default).
Result<std::vector<std::string>> ssh_parse_algorithms(const SshAlgorithmSetting& a, const std::string& text) {
  const std::vector<std::string>& have = ssh::transport_algorithms(a.have);
  const std::string cmd = std::string("ssh ") + a.command + ": ";
  std::vector<std::string> v;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    const std::string name = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) return invalid(cmd + "empty name in '" + text + "' (names are separated by single commas)");
    if (std::find(have.begin(), have.end(), name) == have.end())
      return invalid(cmd + "'" + name + "' is not a " + a.what + " keel supports (" + ssh_join_names(have) + ")" +
                     (std::string_view("+-^").find(name[0]) != std::string_view::npos
                          ? "; give the whole list, the +, - and ^ forms are not supported"
                          : ""));
    if (std::find(v.begin(), v.end(), name) != v.end()) return invalid(cmd + "'" + name + "' is listed twice");
    v.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (v == have) v.clear();  // everything, in keel's order: the default
  return v;
}

// The settings' lines that differ from the board's defaults.
void ssh_config_lines(const control::SshSettings& s, const control::SshSettings& d, std::vector<std::string>& lines) {
  if (s.listen != d.listen) lines.push_back("ssh listen " + s.listen);
  if (s.port != d.port) lines.push_back("ssh port " + std::to_string(s.port));
  if (s.max_sessions != d.max_sessions) lines.push_back("ssh max-sessions " + std::to_string(s.max_sessions));
  if (s.idle_timeout_s != d.idle_timeout_s) lines.push_back("ssh idle-timeout " + std::to_string(s.idle_timeout_s));
  for (const SshAlgorithmSetting& a : kSshAlgorithmSettings)
    if (s.*(a.list) != d.*(a.list)) lines.push_back(std::string("ssh ") + a.command + " " + ssh_join_names(s.*(a.list)));
  if (!s.enabled) lines.push_back("ssh disable");
}

// Applies `next` (through the service when there is one) and records it.
Status ssh_change(control::System& sys, const control::SshSettings& next) {
  if (control::SshService* svc = sys.ssh()) {
    if (Status st = svc->apply(next); !st.ok()) return st;
  }
  sys.ssh_settings() = next;
  return {};
}

std::string ssh_reason_text(uint32_t r) {
  switch (r) {
    case ssh::disconnect::kProtocolError: return "protocol_error";
    case ssh::disconnect::kKeyExchangeFailed: return "key_exchange_failed";
    case ssh::disconnect::kMacError: return "mac_error";
    case ssh::disconnect::kServiceNotAvailable: return "service_not_available";
    case ssh::disconnect::kProtocolVersionNotSupported: return "protocol_version_not_supported";
    case ssh::disconnect::kConnectionLost: return "connection_lost";
    case ssh::disconnect::kByApplication: return "by_application";
    case ssh::disconnect::kTooManyConnections: return "too_many_connections";
    case ssh::disconnect::kAuthCancelledByUser: return "auth_cancelled_by_user";
    case ssh::disconnect::kNoMoreAuthMethodsAvailable: return "no_more_auth_methods";
    case ssh::disconnect::kIllegalUserName: return "illegal_user_name";
    default: return "reason_" + std::to_string(r);
  }
}

}  // namespace

void add_ssh_commands(CommandTree::Impl& t) {
  // Declarations (command_tree_impl.h: CommandDecl). Every SSH setting is
  // admin-only; the show commands read settings (written only under the
  // exclusive gate) and the server's state under its own mutex.
  for (const char* c : {"ssh enable", "ssh disable", "ssh port", "ssh listen", "ssh max-sessions", "ssh idle-timeout"})
    t.declare(c, control::Access::admin);
  for (const SshAlgorithmSetting& a : kSshAlgorithmSettings) {
    t.declare(std::string("ssh ") + a.command, control::Access::admin);
    t.declare(std::string("no ssh ") + a.command, control::Access::admin);
  }
  t.declare("show ssh", control::Access::show, kConcurrent);
  t.declare("show ssh host-key", control::Access::show, kConcurrent);
  t.declare("show ssh sessions", control::Access::show, kConcurrent);

  t.add_config_section({"ssh", 60,
                        [&t](std::vector<std::string>& lines) {
                          ssh_config_lines(t.sys.ssh_settings(), control::default_ssh_settings(t.sys.board()), lines);
                        },
                        [&t] {
                          // Back to the board's defaults; a reset cannot fail, so
                          // a listener that can't move is logged and kept.
                          const control::SshSettings d = control::default_ssh_settings(t.sys.board());
                          if (Status st = ssh_change(t.sys, d); !st.ok()) {
                            KEEL_LOG(log_sshcmd, warn, "ssh settings reset: %s", st.message().c_str());
                            t.sys.ssh_settings() = d;
                          }
                        }});

  auto a = std::make_shared<SshArgs>();
  auto* ssh = t.app.add_subcommand("ssh", "the SSH server: ssh enable|disable|port N|listen ADDR|max-sessions N|"
                                          "idle-timeout S|kex-algorithms|host-key-algorithms|ciphers|macs LIST");
  ssh->require_subcommand(1);
  auto set = [&t](auto&& change) {
    return [&t, change] {
      control::SshSettings next = t.sys.ssh_settings();
      change(next);
      t.status = ssh_change(t.sys, next);
    };
  };
  ssh->add_subcommand("enable", "run the SSH server (host-sim: once a user exists)")
      ->callback(set([](control::SshSettings& s) { s.enabled = true; }));
  ssh->add_subcommand("disable", "stop listening for SSH (open sessions keep running)")
      ->callback(set([](control::SshSettings& s) { s.enabled = false; }));
  auto* port = ssh->add_subcommand("port", "listen on TCP port N (0: any free port; show ssh says which)");
  port->add_option("N", a->n, "0..65535")->required()->check(CLI::Range(0, 65535));
  port->callback(set([a](control::SshSettings& s) { s.port = static_cast<uint16_t>(a->n); }));
  auto* listen = ssh->add_subcommand("listen", "listen on address ADDR (127.0.0.1, 0.0.0.0, ::, ...)");
  listen->add_option("ADDR", a->addr, "an IPv4 or IPv6 address")->required();
  listen->callback([&t, a] {
    // Checked here too, so a config replayed before SSH starts fails on it.
    if (a->addr.find_first_not_of("0123456789abcdefABCDEF.:") != std::string::npos || a->addr.empty()) {
      t.status = invalid("ssh listen: '" + a->addr + "' is not an IPv4 or IPv6 address");
      return;
    }
    control::SshSettings next = t.sys.ssh_settings();
    next.listen = a->addr;
    t.status = ssh_change(t.sys, next);
  });
  auto* maxs = ssh->add_subcommand("max-sessions", "at most N exec/shell sessions at once (1..100)");
  maxs->add_option("N", a->n, "1..100")->required()->check(CLI::Range(1, 100));
  maxs->callback(set([a](control::SshSettings& s) { s.max_sessions = a->n; }));
  auto* idle = ssh->add_subcommand("idle-timeout", "close a connection idle for S seconds (0: never)");
  idle->add_option("S", a->n, "0..86400")->required()->check(CLI::Range(0, 86400));
  idle->callback(set([a](control::SshSettings& s) { s.idle_timeout_s = a->n; }));
  for (const SshAlgorithmSetting& alg : kSshAlgorithmSettings) {
    const std::string have = ssh_join_names(ssh::transport_algorithms(alg.have));
    auto* sub = ssh->add_subcommand(alg.command, std::string("offer these ") + alg.what +
                                                     "s to new connections, in preference order (default: " +
                                                     have + ")");
    sub->add_option("LIST", a->list, "comma-separated names, the preferred first")->required();
    sub->callback([&t, a, &alg] {
      auto v = ssh_parse_algorithms(alg, a->list);
      if (!v) {
        t.status = v.status();
        return;
      }
      control::SshSettings next = t.sys.ssh_settings();
      next.*(alg.list) = std::move(v.value());
      t.status = ssh_change(t.sys, next);
    });
  }

  auto* nossh = t.app.get_subcommand("no")->add_subcommand("ssh", "back to a default: no ssh kex-algorithms|"
                                                                  "host-key-algorithms|ciphers|macs");
  nossh->require_subcommand(1);
  for (const SshAlgorithmSetting& alg : kSshAlgorithmSettings)
    nossh->add_subcommand(alg.command, std::string("offer every ") + alg.what + " keel has (the default)")
        ->callback(set([&alg](control::SshSettings& s) { (s.*(alg.list)).clear(); }));

  CLI::App* show = t.app.get_subcommand("show");
  auto* ss = show->add_subcommand("ssh", "the SSH server: state, address, sessions, counters");
  ss->require_subcommand(0, 1);
  t.add_format(ss);
  ss->callback([&t, ss] {
    if (!ss->get_subcommands().empty()) return;  // show ssh host-key / sessions
    const control::SshSettings& s = t.sys.ssh_settings();
    control::SshService* svc = t.sys.ssh();
    const ssh::Server* srv = svc ? svc->server() : nullptr;
    const std::string state = svc ? svc->state() : (s.enabled ? "not started" : "disabled");
    const std::string addr_text = s.listen.find(':') != std::string::npos ? "[" + s.listen + "]" : s.listen;
    const uint16_t port = srv ? srv->bound_port() : s.port;
    const ssh::ServerStats st = srv ? srv->stats() : ssh::ServerStats{};
    const size_t open = srv ? srv->connections().size() : 0;
    View v;
    v.field("state", "SSH server", state);
    v.json("enabled", s.enabled);
    v.json("listen", s.listen);
    v.json("port", uint64_t{port});
    v.json("device", s.device);
    v.text_line("listen", addr_text + ":" + std::to_string(port) + (s.device.empty() ? "" : " on " + s.device));
    v.field("max_sessions", "max-sessions", uint64_t{s.max_sessions});
    v.field("idle_timeout", "idle-timeout", uint64_t{s.idle_timeout_s},
            s.idle_timeout_s ? std::to_string(s.idle_timeout_s) + " s" : "none");
    for (const SshAlgorithmSetting& a : kSshAlgorithmSettings)
      v.field(a.json, a.command, ssh_join_names(ssh_effective(a, s)));
    v.field("connections", "connections", uint64_t{open});
    View& c = v.object("counters", "counters");
    c.field("accepted", "accepted", st.accepted);
    c.field("refused_limit", "refused (limits)", st.refused_limit);
    c.field("refused_backoff", "refused (back-off)", st.refused_backoff);
    c.field("auth_successes", "logins", st.auth_successes);
    c.field("auth_failures", "failed authentications", st.auth_failures);
    c.field("grace_timeouts", "login grace timeouts", st.grace_timeouts);
    c.field("sessions_started", "sessions started", st.sessions_started);
    c.field("sessions_refused", "sessions refused", st.sessions_refused);
    c.field("idle_timeouts", "idle timeouts", st.idle_timeouts);
    c.field("protocol_errors", "protocol errors", st.protocol_errors);
    c.field("client_disconnects", "closed by the client", st.client_disconnects);
    c.field("closed", "closed", st.closed);
    View& d = v.object("disconnects", "disconnects sent");
    for (const auto& [r, n] : st.disconnects) d.field(ssh_reason_text(r), ssh_reason_text(r), n);
    t.print(t.format == "json" ? v.json() + "\n" : v.text());
  });

  auto* hk = ss->add_subcommand("host-key", "the host keys' fingerprints (as ssh-keygen -lf prints them)");
  t.add_format(hk);
  hk->callback([&t] {
    control::SshService* svc = t.sys.ssh();
    const std::vector<std::string> fps = svc ? svc->host_key_fingerprints() : std::vector<std::string>{};
    View v;
    auto rows = v.table("host_keys", {{"fingerprint", "Fingerprint"}},
                        "no host keys yet: they are loaded (or made) when the SSH server first listens\n");
    for (const std::string& f : fps) rows.row({View::value(f)});
    t.print(t.format == "json" ? v.json() + "\n" : v.text());
  });

  auto* sess = ss->add_subcommand("sessions", "the SSH connections: user, peer, algorithms, channels, idle time");
  t.add_format(sess);
  sess->callback([&t] {
    control::SshService* svc = t.sys.ssh();
    const ssh::Server* srv = svc ? svc->server() : nullptr;
    const std::vector<ssh::ConnectionView> conns = srv ? srv->connections() : std::vector<ssh::ConnectionView>{};
    View v;
    auto list = v.list("sessions");
    for (const ssh::ConnectionView& c : conns) {
      View& i = list.item("connection " + std::to_string(c.id) + ": " + (c.user.empty() ? "-" : c.user) + "@" +
                          c.peer);
      i.json("id", c.id);
      i.json("user", c.user);
      i.json("peer", c.peer);
      i.field("state", "state", c.state);
      i.field("method", "auth", c.method.empty() ? "-" : c.method);
      i.field("client", "client", c.client_version);
      i.field("kex", "kex", c.kex);
      i.field("host_key", "host key", c.host_key);
      i.field("cipher", "cipher", c.cipher);
      i.field("mac", "mac", c.mac, c.mac.empty() ? "(implicit)" : c.mac);
      i.field("channels", "channels", uint64_t{c.channels});
      i.field("idle", "idle", c.idle_s, std::to_string(c.idle_s) + " s");
      i.field("age", "connected", c.age_s, std::to_string(c.age_s) + " s");
    }
    if (t.format == "json") t.print(v.json() + "\n");
    else t.print(conns.empty() ? "no SSH sessions\n" : v.text());
  });
}

}  // namespace keel::cli

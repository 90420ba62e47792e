// User commands: `username NAME password PLAIN|secret HASH|role R|ssh-key
// LINE`, `no username NAME [ssh-key BASE64]`, `show users`, and the users
// running-config section (order 50: before everything else). The store is firmware/control/users.h; the running config
// carries only hashes (`username NAME secret HASH`), never plain text.
#include <memory>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "cli/table.h"
#include "cli/view.h"
#include "core/log.h"

namespace keel::cli {

namespace {

KEEL_LOG_MODULE(log_users, "users");

struct UserArgs {
  std::string name, kind;
  std::vector<std::string> value;  // ssh-key: the words of the key line
};

}  // namespace

void add_users_commands(CommandTree::Impl& t) {
  // Declarations (command_tree_impl.h: CommandDecl).
  t.declare("username", control::Access::admin);
  t.declare("no username", control::Access::admin);
  t.declare("show users", control::Access::show, kConcurrent);

  t.add_config_section({"users", 50,
                        [&t](std::vector<std::string>& lines) {
                          for (const control::UserInfo& u : t.sys.users().list()) {
                            if (!u.hash.empty()) lines.push_back("username " + u.name + " secret " + u.hash);
                            if (u.role != control::Role::admin)
                              lines.push_back("username " + u.name + " role " + control::to_string(u.role));
                            for (const control::UserKey& k : u.keys)
                              lines.push_back("username " + u.name + " ssh-key " + k.line());
                          }
                        },
                        [&t] { t.sys.users().clear(); }});

  // Bound values live as long as the callbacks that hold them.
  auto a = std::make_shared<UserArgs>();

  auto* user = t.app.add_subcommand(
      "username",
      "add a login user or change it: username NAME password PLAIN | secret HASH | role admin|operator|read-only "
      "| ssh-key TYPE BASE64 [COMMENT]");
  user->preparse_callback([a](size_t) { a->value.clear(); });
  user->add_option("NAME", a->name, "user name (a-z 0-9 _ - ., 1-32)")->required();
  user->add_option("KIND", a->kind,
                   "password: PLAIN is hashed here; secret: HASH as show running-config prints it; role: what the "
                   "user may do; ssh-key: an OpenSSH public key line (ecdsa-sha2-nistp256, or ssh-rsa of 2048 bits "
                   "or more)")
      ->required()
      ->check(CLI::IsMember({"password", "secret", "role", "ssh-key"}));
  user->add_option("VALUE", a->value, "the password, the stored hash, the role, or the key line")->required();
  user->callback([&t, a] {
    control::Users& users = t.sys.users();
    const bool first = users.empty();
    auto one_word = [&]() -> bool {
      if (a->value.size() == 1) return true;
      t.status = invalid("username " + a->name + " " + a->kind + ": takes one word (got " +
                         std::to_string(a->value.size()) + ")");
      return false;
    };
    std::string what;
    if (a->kind == "password" || a->kind == "secret") {
      if (one_word())
        t.status = a->kind == "password" ? users.set_password(a->name, a->value[0]) : users.set_hash(a->name, a->value[0]);
      for (std::string& v : a->value) v.assign(v.size(), '\0');  // don't keep the plain text around
      what = "password";
    } else if (a->kind == "role") {
      if (!one_word()) return;
      auto role = control::parse_role(a->value[0]);
      if (!role) {
        t.status = invalid("username " + a->name + " role: '" + a->value[0] + "' is not admin, operator or read-only");
        return;
      }
      t.status = users.set_role(a->name, *role);
      what = std::string("role ") + control::to_string(*role);
    } else {
      t.status = users.add_key(a->name, join_words(a->value));
      what = "ssh key";
    }
    a->value.clear();
    if (!t.status.ok()) return;
    KEEL_LOG(log_users, info, "user %s: %s set", a->name.c_str(), what.c_str());
    if (first) KEEL_LOG(log_users, info, "consoles now ask for a login");
  });

  CLI::App* no = t.app.get_subcommand("no");
  auto* nouser = no->add_subcommand("username", "remove a login user (no users: no login), or one of its ssh keys");
  nouser->preparse_callback([a](size_t) { a->value.clear(); });
  nouser->add_option("NAME", a->name, "user name")->required();
  nouser->add_option("KEY", a->value, "ssh-key BASE64: remove only this key (the key's base64 blob)")->expected(0, 2);
  nouser->callback([&t, a] {
    if (a->value.empty()) {
      t.status = t.sys.users().remove(a->name);
      if (t.status.ok()) KEEL_LOG(log_users, info, "user %s removed", a->name.c_str());
      return;
    }
    if (a->value.size() != 2 || a->value[0] != "ssh-key") {
      t.status = invalid("no username " + a->name + ": expected nothing more, or ssh-key BASE64");
      return;
    }
    t.status = t.sys.users().remove_key(a->name, a->value[1]);
    if (t.status.ok()) KEEL_LOG(log_users, info, "user %s: ssh key removed", a->name.c_str());
  });

  CLI::App* show = t.app.get_subcommand("show");
  auto* su = show->add_subcommand("users", "the login users: role, password or not, ssh keys");
  t.add_format(su);
  su->callback([&t] {
    const auto users = t.sys.users().list();
    View v;
    v.json("login_required", !users.empty());
    View::Rows rows = v.table("users",
                              {{"name", "User"}, {"role", "Role"}, {"password", "Password"}, {"keys", "Keys"}},
                              "no users: consoles do not ask for a login");
    for (const control::UserInfo& u : users) {
      rows.row({View::value(u.name), View::value(control::to_string(u.role)), View::value(!u.hash.empty()),
                View::value(u.keys.size())},
               {u.name, control::to_string(u.role), u.hash.empty() ? "no" : "yes", std::to_string(u.keys.size())});
    }
    View::Rows keys = v.table("keys", {{"user", "User"}, {"type", "Key type"}, {"bits", "Bits"},
                                       {"fingerprint", "Fingerprint"}, {"comment", "Comment"}});
    for (const control::UserInfo& u : users)
      for (const control::UserKey& k : u.keys)
        keys.row({View::value(u.name), View::value(k.type), View::value(k.bits), View::value(k.fingerprint()),
                  View::value(k.comment)});
    t.print(t.format == "json" ? v.json() + "\n" : v.text());
  });
}

}  // namespace keel::cli

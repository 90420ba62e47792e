// User commands: `username NAME password PLAIN|secret HASH`, `no username
// NAME`, `show users`, and the users running-config section (order 50: before
// everything else). The store is firmware/control/users.h; the running config
// carries only hashes (`username NAME secret HASH`), never plain text.
#include <memory>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "cli/table.h"
#include "core/log.h"

namespace keel::cli {

namespace {

KEEL_LOG_MODULE(log_users, "users");

struct UserArgs {
  std::string name, kind, value;
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
      "username", "add a login user or change its password: username NAME password PLAIN | secret HASH");
  user->add_option("NAME", a->name, "user name (a-z 0-9 _ - ., 1-32)")->required();
  user->add_option("KIND", a->kind, "password: PLAIN is hashed here; secret: HASH as show running-config prints it")
      ->required()
      ->check(CLI::IsMember({"password", "secret"}));
  user->add_option("VALUE", a->value, "the password, or the stored hash")->required();
  user->callback([&t, a] {
    control::Users& users = t.sys.users();
    const bool first = users.empty();
    t.status = a->kind == "password" ? users.set_password(a->name, a->value) : users.set_hash(a->name, a->value);
    a->value.assign(a->value.size(), '\0');  // don't keep the plain text around
    a->value.clear();
    if (!t.status.ok()) return;
    KEEL_LOG(log_users, info, "user %s set", a->name.c_str());
    if (first) KEEL_LOG(log_users, info, "consoles now ask for a login");
  });

  CLI::App* no = t.app.get_subcommand("no");
  auto* nouser = no->add_subcommand("username", "remove a login user (no users: no login)");
  nouser->add_option("NAME", a->name, "user name")->required();
  nouser->callback([&t, a] {
    t.status = t.sys.users().remove(a->name);
    if (t.status.ok()) KEEL_LOG(log_users, info, "user %s removed", a->name.c_str());
  });

  CLI::App* show = t.app.get_subcommand("show");
  auto* su = show->add_subcommand("users", "the login users (names only)");
  t.add_format(su);
  su->callback([&t] {
    const auto names = t.sys.users().names();
    if (t.format == "json") {
      Json j;
      j.begin_object().field("login_required", !names.empty()).begin_array("users");
      for (const std::string& n : names) j.value(n);
      j.end_array().end_object();
      t.print(j.str() + "\n");
      return;
    }
    if (names.empty()) {
      t.print("no users: consoles do not ask for a login\n");
      return;
    }
    Table tb({"User"});
    for (const std::string& n : names) tb.add({n});
    t.print(tb.str());
  });
}

}  // namespace keel::cli

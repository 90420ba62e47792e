// Control::run: role check, gate, writer lock, audit (control.h).
//
// Nesting: a thread-local record says which Control the thread holds the
// gate of, how (shared or exclusive), and whether it holds the Ofproto
// writer lock, so an inner run() (a line of `configure replace`, of a
// transaction, of the startup config) neither takes the gate again nor
// deadlocks on the writer lock its outer line already holds.
#include "control/control.h"

#include <cctype>
#include <optional>

#include "core/log.h"

namespace keel::control {

namespace {

KEEL_LOG_MODULE(log_audit, "audit");

struct Held {
  const Control* control = nullptr;
  bool exclusive = false;
};
thread_local Held t_held;
// The Ofproto writer mutex this thread holds through Control (run() of a
// locks_ofproto command, or a WriterLock); null: none.
thread_local std::mutex* t_writer = nullptr;

// Restores t_held when a run() returns.
struct HeldScope {
  Held saved = t_held;
  ~HeldScope() { t_held = saved; }
};

}  // namespace

bool Control::in_command() { return t_held.control != nullptr; }

std::string Control::refusal(const Session& s, const CommandInfo& c) {
  std::string who = s.user.empty() ? std::string("session '") + s.describe() + "'" : "user '" + s.user + "'";
  return "permission denied: '" + std::string(c.path) + "' needs role " + to_string(required_role(c.access)) +
         " (" + who + " is " + to_string(s.role) + ")";
}

std::string Control::redact(std::string_view line) {
  std::string out;
  bool hide_next = false;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ' || line[i] == '\t') {
      out += line[i++];
      continue;
    }
    size_t end = i;
    char quote = 0;
    while (end < line.size() && (quote || (line[end] != ' ' && line[end] != '\t'))) {
      if (quote && line[end] == quote) quote = 0;
      else if (!quote && (line[end] == '\'' || line[end] == '"')) quote = line[end];
      ++end;
    }
    std::string_view word = line.substr(i, end - i);
    if (hide_next) {
      out += "*****";
      hide_next = false;
    } else {
      out += word;
      hide_next = word == "password" || word == "secret";
    }
    i = end;
  }
  return out;
}

Status Control::run(const Session& s, const CommandInfo& c, std::string_view line,
                    const std::function<Status()>& fn) {
  if (!allowed(s.role, c.access)) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    const std::string l = redact(line);
    KEEL_LOG_RL(log_audit, warn, 60, 20, "%s: refused \"%s\" (needs %s)", s.describe().c_str(), l.c_str(),
                to_string(required_role(c.access)));
    return error(Errc::permission_denied, refusal(s, c));
  }
  commands_.fetch_add(1, std::memory_order_relaxed);

  HeldScope scope;
  std::unique_lock<std::shared_mutex> excl;
  std::shared_lock<std::shared_mutex> shared;
  const bool nested = t_held.control == this;
  if (nested) {
    // The outermost line holds the gate. A concurrent (shared) outer line
    // runs only concurrent inner lines; anything else would need an upgrade.
    if (!t_held.exclusive && !c.concurrent)
      return error(Errc::internal, "'" + std::string(c.path) + "' can't run inside a concurrent command");
  } else if (c.concurrent) {
    shared = std::shared_lock(gate_);
    t_held = {this, false};
  } else {
    excl = std::unique_lock(gate_);
    t_held = {this, true};
  }
  std::optional<WriterLock> writer;
  if (c.locks_ofproto) writer.emplace(*this);

  Status st = fn();

  if (st.ok() && c.access != Access::show) {
    changes_.fetch_add(1, std::memory_order_relaxed);
    const std::string l = redact(line);
    // The startup config and the lines inside an outer command are recorded
    // by the file / the outer line: debug, not info.
    if (nested || s.origin == Origin::config)
      KEEL_LOG(log_audit, dbg, "%s: %s", s.describe().c_str(), l.c_str());
    else
      KEEL_LOG(log_audit, info, "%s: %s", s.describe().c_str(), l.c_str());
  }
  return st;
}

void Control::exclusive(const std::function<void()>& fn) {
  if (t_held.control == this) {
    fn();
    return;
  }
  HeldScope scope;
  std::unique_lock lk(gate_);
  t_held = {this, true};
  fn();
}

Control::WriterLock::WriterLock(Control& c) {
  if (!c.writer_ || t_writer == c.writer_) return;
  c.writer_->lock();
  taken_ = c.writer_;
  prev_ = t_writer;
  t_writer = taken_;
}

Control::WriterLock::~WriterLock() {
  if (!taken_) return;
  t_writer = prev_;
  taken_->unlock();
}

}  // namespace keel::control

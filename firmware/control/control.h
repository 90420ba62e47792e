// Control — the one gate every console command passes: the role check, the
// serialisation of changes, the Ofproto writer lock, and the audit log.
//
// Control::run(session, command, line, fn) runs `fn` (the command's body,
// which cli/ builds from the parsed line) as `line` for `session`:
//   1. the role check: a session whose role is below what the command's
//      Access needs is refused with Errc::permission_denied and the one line
//        permission denied: 'PATH' needs role operator (user 'NAME' is read-only)
//      logged at warn in module "audit" (`ssh viewer@...: refused "LINE"
//      (needs operator)`) and counted (refused()); fn doesn't run;
//   2. the gate: a std::shared_mutex held shared by `concurrent` commands
//      (audited show commands that read atomics or state with its own lock)
//      and exclusive by every other one, so changes are serialised and no
//      show runs half-way through one; commands that `locks_ofproto` also
//      hold Ofproto::writer_mutex() (after the gate: the lock order is
//      gate -> writer_mutex). Commands that wait for threads that take
//      writer_mutex themselves (pmd-cpu-mask, revalidator waits) declare
//      locks_ofproto = false;
//   3. fn;
//   4. a change/admin command that succeeded is logged at info in module
//      "audit" (`ssh admin@127.0.0.1:40312: LINE`, the word after
//      `password`/`secret` replaced by "*****") and counted (changes()).
// Nested execution (configure replace, copy, a transaction, the startup
// config) takes the gate once, at the outermost line: a run() on a thread
// that already holds the gate runs fn directly (still checking the role).
//
// Thread-safety: run() may be called from any number of threads at once
// (the control thread, SSH session threads); the counters are atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "control/session.h"
#include "core/status.h"

namespace keel::control {

struct CommandInfo {
  std::string_view path;  // "show ports", "add-flow"
  Access access = Access::change;
  bool concurrent = false;     // may run alongside other concurrent commands (shared gate)
  bool locks_ofproto = false;  // holds Ofproto::writer_mutex() while it runs
};

class Control {
 public:
  // `ofproto_writer`: Ofproto::writer_mutex() (null: no writer lock, in tests).
  explicit Control(std::mutex* ofproto_writer = nullptr) : writer_(ofproto_writer) {}
  Control(const Control&) = delete;
  Control& operator=(const Control&) = delete;

  Status run(const Session& s, const CommandInfo& c, std::string_view line, const std::function<Status()>& fn);

  // Runs fn under the exclusive gate (the tree's periodic work, boot steps);
  // re-entrant on a thread that already holds the gate.
  void exclusive(const std::function<void()>& fn);

  // True when the calling thread holds the gate (inside run()/exclusive()).
  static bool in_command();

  // Holds Ofproto::writer_mutex() for code that is not a command body but
  // runs inside one or beside one (running-config sections' emit/reset,
  // boot): a no-op when this thread already holds it through Control
  // (a locks_ofproto command, or an outer WriterLock), so nesting never
  // deadlocks.
  class WriterLock {
   public:
    explicit WriterLock(Control& c);
    ~WriterLock();
    WriterLock(const WriterLock&) = delete;
    WriterLock& operator=(const WriterLock&) = delete;

   private:
    std::mutex* taken_ = nullptr;
    std::mutex* prev_ = nullptr;
  };

  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  uint64_t changes() const { return changes_.load(std::memory_order_relaxed); }
  uint64_t commands() const { return commands_.load(std::memory_order_relaxed); }

  // LINE with the value after each `password`/`secret` word replaced by
  // "*****" (what the audit log prints).
  static std::string redact(std::string_view line);
  // The refusal message (without running anything).
  static std::string refusal(const Session& s, const CommandInfo& c);

 private:
  std::shared_mutex gate_;
  std::mutex* writer_;
  std::atomic<uint64_t> refused_{0}, changes_{0}, commands_{0};
};

}  // namespace keel::control

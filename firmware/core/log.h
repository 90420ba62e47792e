// Logging: leveled, per module, to the console (stderr) and to a bounded
// in-memory ring that `show logging` reads; rate-limited per call site.
//
// Modelled on Open vSwitch's vlog. Levels, most to least severe: emer, err,
// warn, info, dbg ("off" disables a module). A module is a static object in
// the file that logs:
//
//   KEEL_LOG_MODULE(log_boot, "boot");           // file scope, once per module
//   KEEL_LOG(log_boot, info, "booted %s", name);
//   KEEL_LOG_RL(log_pmd, warn, 5, 20, "port %u: rx error", p);  // 5/min, burst 20
//
// A message is kept when its level is at or above its module's level
// (default info): it goes into the ring, and to the console as well when it
// is at or above the console level (default warn). `logging level` and
// `logging console` change them at run time; they are running-config.
//
// Rate limiting (KEEL_LOG_RL) is a token bucket per call site, like OVS's
// VLOG_RATE_LIMIT_INIT(RATE, BURST): RATE messages a minute, at most BURST at
// once. What it suppresses is counted, and the next message that passes says
// how many were suppressed, so a packet storm can't flood the console.
//
// Thread-safety: any thread may log, PMD threads included, and a logger never
// blocks on a lock another thread holds: the ring is guarded by a try-lock
// (a busy ring drops the message and counts it in dropped()); a call site's
// token bucket likewise (contention counts as suppressed); the console is one
// write(2) per message, no stdio lock. Formatting uses a stack buffer, no
// heap. Levels are relaxed atomics. Modules register themselves during static
// initialisation on a lock-free list and are never removed. Reading the ring
// (recent()) and changing levels belong to the control thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::log {

enum class Level : uint8_t { off = 0, emer, err, warn, info, dbg };

const char* to_string(Level l);  // "off", "emer", "err", "warn", "info", "dbg"
std::optional<Level> parse_level(std::string_view s);  // also accepts "emergency", "error", "warning", "debug"

class Module {
 public:
  explicit Module(const char* name, Level default_level = Level::info) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const char* name() const { return name_; }
  Level level() const { return level_.load(std::memory_order_relaxed); }
  Level default_level() const { return default_; }
  void set_level(Level l) { level_.store(l, std::memory_order_relaxed); }
  bool enabled(Level l) const { return l != Level::off && l <= level(); }
  Module* next() const { return next_; }

 private:
  const char* name_;
  Level default_;
  std::atomic<Level> level_;
  Module* next_ = nullptr;  // registry list; written once before publication
};

// A token bucket: `per_minute` tokens a minute, at most `burst` banked.
// constexpr so a function-local static needs no guard.
class RateLimit {
 public:
  constexpr RateLimit(uint32_t per_minute, uint32_t burst) : per_minute_(per_minute), burst_(burst) {}
  // True if a message may pass at `now_ns` (a monotonic clock). When it does,
  // *suppressed receives (and resets) the count of messages refused since
  // the last one that passed.
  bool allow(uint64_t now_ns, uint32_t* suppressed);

 private:
  const uint32_t per_minute_;
  const uint32_t burst_;
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
  bool primed_ = false;       // the first call fills the bucket
  uint64_t credit_ = 0;       // under busy_; see allow()
  uint64_t last_ns_ = 0;      // last refill, under busy_
  std::atomic<uint32_t> suppressed_{0};
};

// Logs unconditionally of the module level check (the macros check first).
void logf(Module& m, Level l, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
void logf_rl(Module& m, RateLimit& rl, Level l, const char* fmt, ...) __attribute__((format(printf, 4, 5)));

// Records `text` in the ring only, for a message the caller has already
// shown the user in its own words (boot errors on stderr).
void note(Module& m, Level l, std::string_view text);

// --- control-thread API: the registry, levels, the ring ---
std::vector<Module*> modules();  // sorted by name
Module* find_module(std::string_view name);
Level console_level();
void set_console_level(Level l);
// Every module to its default level and the console to warn (for a config reset).
void reset_levels();
// Where console messages go: a file descriptor (default 2), -1 for nowhere.
void set_console_fd(int fd);

struct Entry {
  uint64_t seq;      // 1, 2, ... in the order messages entered the ring
  uint64_t time_ns;  // CLOCK_REALTIME
  Level level;
  std::string module;
  std::string text;
};
inline constexpr size_t kRingEntries = 256;  // show logging keeps the last 256 messages
inline constexpr size_t kMaxMessage = 240;   // longer messages are truncated
std::vector<Entry> recent(size_t n);         // the last n messages, oldest first
uint64_t logged();      // messages that entered the ring
uint64_t dropped();     // messages lost because the ring was busy
uint64_t suppressed();  // messages refused by rate limits (all call sites)
void clear_ring();      // for tests

// "2024-05-01T10:00:00.123Z|00042|boot|INFO|text" (OVS's log line).
std::string format_entry(const Entry& e);

}  // namespace keel::log

#define KEEL_LOG_MODULE(var, name) static ::keel::log::Module var{name}

#define KEEL_LOG(mod, lvl, ...)                                                  \
  do {                                                                            \
    if ((mod).enabled(::keel::log::Level::lvl)) ::keel::log::logf((mod), ::keel::log::Level::lvl, __VA_ARGS__); \
  } while (0)

#define KEEL_LOG_RL(mod, lvl, per_minute, burst, ...)                                           \
  do {                                                                                           \
    static ::keel::log::RateLimit keel_rl_{(per_minute), (burst)};                               \
    if ((mod).enabled(::keel::log::Level::lvl))                                                  \
      ::keel::log::logf_rl((mod), keel_rl_, ::keel::log::Level::lvl, __VA_ARGS__);               \
  } while (0)

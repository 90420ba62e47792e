// Logging: the module registry, the ring, the console sink, rate limits.
// See log.h for the design and the thread-safety rules.
#include "core/log.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <thread>

namespace keel::log {

namespace {

constexpr const char* kNames[] = {"off", "emer", "err", "warn", "info", "dbg"};
constexpr const char* kUpper[] = {"OFF", "EMER", "ERR", "WARN", "INFO", "DBG"};

// Registry: a lock-free push-only list; modules have static storage.
constinit std::atomic<Module*> g_modules{nullptr};
constinit std::atomic<Level> g_console_level{Level::warn};
constinit std::atomic<int> g_console_fd{2};
constinit std::atomic<uint64_t> g_dropped{0};
constinit std::atomic<uint64_t> g_suppressed{0};

struct Slot {
  uint64_t seq;
  uint64_t time_ns;
  Level level;
  const char* module;  // a Module's name: static storage
  uint16_t len;
  char text[kMaxMessage];
};

// The ring: kRingEntries slots, written round-robin under a try-lock.
struct Ring {
  std::atomic_flag busy;
  uint64_t next_seq = 1;  // under busy
  std::array<Slot, kRingEntries> slots;
};
constinit Ring g_ring{};

uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// OVS's timestamp: 2024-05-01T10:00:00.123Z
size_t format_time(char* buf, size_t n, uint64_t ns) {
  time_t s = static_cast<time_t>(ns / 1'000'000'000u);
  tm t;
  gmtime_r(&s, &t);
  size_t k = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &t);
  int m = snprintf(buf + k, n - k, ".%03uZ", static_cast<unsigned>((ns / 1'000'000u) % 1000));
  return k + static_cast<size_t>(std::max(m, 0));
}

void emit(Module& m, Level l, const char* text, size_t len, bool console = true) {
  const uint64_t now = realtime_ns();
  uint64_t seq = 0;
  if (!g_ring.busy.test_and_set(std::memory_order_acquire)) {
    seq = g_ring.next_seq++;
    Slot& s = g_ring.slots[seq % kRingEntries];
    s.seq = seq;
    s.time_ns = now;
    s.level = l;
    s.module = m.name();
    s.len = static_cast<uint16_t>(std::min(len, kMaxMessage));
    memcpy(s.text, text, s.len);
    g_ring.busy.clear(std::memory_order_release);
  } else {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
  }
  if (!console || l > g_console_level.load(std::memory_order_relaxed)) return;
  const int fd = g_console_fd.load(std::memory_order_relaxed);
  if (fd < 0) return;
  // One write(2) per line (atomic on a pipe up to PIPE_BUF): no stdio lock.
  char line[64 + kMaxMessage];
  size_t k = format_time(line, sizeof line, now);
  int h = snprintf(line + k, sizeof line - k, "|%05llu|%s|%s|", static_cast<unsigned long long>(seq), m.name(),
                   kUpper[static_cast<int>(l)]);
  k += static_cast<size_t>(std::max(h, 0));
  k = std::min(k, sizeof line - 1);
  size_t body = std::min(len, sizeof line - 1 - k);
  memcpy(line + k, text, body);
  k += body;
  line[k++] = '\n';
  ssize_t w = write(fd, line, k);
  (void)w;  // nowhere to report a failing console
}

void vemit(Module& m, Level l, const char* prefix, const char* fmt, va_list ap) {
  char buf[kMaxMessage + 1];
  int n = 0;
  if (prefix) n = snprintf(buf, sizeof buf, "%s", prefix);
  n = std::clamp(n, 0, static_cast<int>(kMaxMessage));
  int m2 = vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n), fmt, ap);
  size_t len = static_cast<size_t>(n) + static_cast<size_t>(std::max(m2, 0));
  emit(m, l, buf, std::min(len, kMaxMessage));
}

}  // namespace

const char* to_string(Level l) { return kNames[static_cast<int>(l)]; }

std::optional<Level> parse_level(std::string_view s) {
  for (int i = 0; i < 6; ++i)
    if (s == kNames[i]) return static_cast<Level>(i);
  if (s == "emergency") return Level::emer;
  if (s == "error") return Level::err;
  if (s == "warning") return Level::warn;
  if (s == "debug") return Level::dbg;
  return std::nullopt;
}

Module::Module(const char* name, Level default_level) noexcept
    : name_(name), default_(default_level), level_(default_level) {
  Module* head = g_modules.load(std::memory_order_relaxed);
  do {
    next_ = head;
  } while (!g_modules.compare_exchange_weak(head, this, std::memory_order_release, std::memory_order_relaxed));
}

bool RateLimit::allow(uint64_t now_ns, uint32_t* suppressed) {
  if (busy_.test_and_set(std::memory_order_acquire)) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    g_suppressed.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // Credit in ns x messages-per-minute: a message costs one minute's worth
  // (60e9), and elapsed time adds elapsed * per_minute, exactly.
  constexpr uint64_t kToken = 60'000'000'000;
  const uint64_t cap = uint64_t{burst_} * kToken;
  if (!primed_) {
    primed_ = true;
    credit_ = cap;
  } else if (now_ns > last_ns_) {
    const uint64_t elapsed = std::min(now_ns - last_ns_, cap / std::max<uint64_t>(per_minute_, 1) + 1);
    credit_ = std::min(cap, credit_ + elapsed * per_minute_);
  }
  last_ns_ = std::max(last_ns_, now_ns);
  bool ok = credit_ >= kToken;
  if (ok) credit_ -= kToken;
  busy_.clear(std::memory_order_release);
  if (!ok) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    g_suppressed.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (suppressed) *suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
  return true;
}

void logf(Module& m, Level l, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vemit(m, l, nullptr, fmt, ap);
  va_end(ap);
}

void logf_rl(Module& m, RateLimit& rl, Level l, const char* fmt, ...) {
  uint32_t skipped = 0;
  if (!rl.allow(monotonic_ns(), &skipped)) return;
  char prefix[64] = "";
  if (skipped) snprintf(prefix, sizeof prefix, "(%u messages suppressed) ", skipped);
  va_list ap;
  va_start(ap, fmt);
  vemit(m, l, skipped ? prefix : nullptr, fmt, ap);
  va_end(ap);
}

void note(Module& m, Level l, std::string_view text) {
  if (m.enabled(l)) emit(m, l, text.data(), std::min(text.size(), kMaxMessage), false);
}

std::vector<Module*> modules() {
  std::vector<Module*> v;
  for (Module* m = g_modules.load(std::memory_order_acquire); m; m = m->next()) v.push_back(m);
  std::sort(v.begin(), v.end(), [](const Module* a, const Module* b) { return strcmp(a->name(), b->name()) < 0; });
  // Two objects of one name (a header-defined module in several files) show once.
  v.erase(std::unique(v.begin(), v.end(), [](const Module* a, const Module* b) { return !strcmp(a->name(), b->name()); }),
          v.end());
  return v;
}

Module* find_module(std::string_view name) {
  for (Module* m = g_modules.load(std::memory_order_acquire); m; m = m->next())
    if (name == m->name()) return m;
  return nullptr;
}

Level console_level() { return g_console_level.load(std::memory_order_relaxed); }
void set_console_level(Level l) { g_console_level.store(l, std::memory_order_relaxed); }
void set_console_fd(int fd) { g_console_fd.store(fd, std::memory_order_relaxed); }

void reset_levels() {
  for (Module* m = g_modules.load(std::memory_order_acquire); m; m = m->next()) m->set_level(m->default_level());
  set_console_level(Level::warn);
}

namespace {
// The control thread waits for the ring; loggers never do.
void lock_ring() {
  while (g_ring.busy.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
}
void unlock_ring() { g_ring.busy.clear(std::memory_order_release); }
}  // namespace

std::vector<Entry> recent(size_t n) {
  std::vector<Entry> v;
  lock_ring();
  const uint64_t end = g_ring.next_seq;  // one past the newest
  n = std::min({n, kRingEntries, static_cast<size_t>(end - 1)});
  v.reserve(n);
  for (uint64_t seq = end - n; seq < end; ++seq) {
    const Slot& s = g_ring.slots[seq % kRingEntries];
    v.push_back({s.seq, s.time_ns, s.level, s.module, std::string(s.text, s.len)});
  }
  unlock_ring();
  return v;
}

uint64_t logged() {
  lock_ring();
  uint64_t n = g_ring.next_seq - 1;
  unlock_ring();
  return n;
}

uint64_t dropped() { return g_dropped.load(std::memory_order_relaxed); }
uint64_t suppressed() { return g_suppressed.load(std::memory_order_relaxed); }

void clear_ring() {
  lock_ring();
  g_ring.next_seq = 1;
  unlock_ring();
  g_dropped.store(0, std::memory_order_relaxed);
  g_suppressed.store(0, std::memory_order_relaxed);
}

std::string format_entry(const Entry& e) {
  char head[96];
  size_t k = format_time(head, sizeof head, e.time_ns);
  snprintf(head + k, sizeof head - k, "|%05llu|", static_cast<unsigned long long>(e.seq));
  return std::string(head) + e.module + "|" + kUpper[static_cast<int>(e.level)] + "|" + e.text;
}

}  // namespace keel::log

// Fault points (core/fault.h): arming, firing, stalls.
#include "core/fault.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

namespace keel::fault {

PointState g_points[kPoints];

namespace {

std::atomic<bool> g_permitted{false};

struct Info {
  const char* name;
  const char* where;
  bool stall;
};
constexpr Info kInfo[kPoints] = {
    {"pool-exhausted", "sim packet pool: every buffer allocation fails", false},
    {"upcall-queue-full", "PMD upcall records: a data miss finds none free (lost upcall)", false},
    {"handler-stall", "upcall handler threads: each pass first sleeps MS", true},
    {"revalidator-slow", "revalidator: each round's flow dump takes MS longer", true},
    {"disk-full", "config file writes (write memory, copy): ENOSPC", false},
    {"control-stall", "control thread: blocked MS by the command", true},
};

}  // namespace

bool fire(Point p) noexcept {
  PointState& s = state(p);
  if (!s.armed.load(std::memory_order_acquire)) return false;
  uint32_t left = s.remaining.load(std::memory_order_relaxed);
  while (left != kForever) {
    if (left == 0) return false;
    if (s.remaining.compare_exchange_weak(left, left - 1, std::memory_order_acq_rel)) {
      if (left == 1) s.armed.store(false, std::memory_order_release);  // the last fire
      break;
    }
  }
  s.fired.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void stall_fired(Point p, uint64_t generation) noexcept {
  PointState& s = state(p);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.ms.load(std::memory_order_relaxed));
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until || s.generation.load(std::memory_order_acquire) != generation) return;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(5)));
  }
}

void permit(bool allowed) noexcept { g_permitted.store(allowed, std::memory_order_relaxed); }
bool permitted() noexcept { return g_permitted.load(std::memory_order_relaxed); }

Status arm(Point p, const Arm& a) {
  if (!permitted())
    return error(Errc::unsupported, "fault injection is off: only a board that simulates faults (host-sim) takes it");
  if (a.count == 0) return invalid(std::string(name(p)) + ": a count of at least 1");
  if (is_stall(p) && (a.ms == 0 || a.ms > kMaxStallMs))
    return invalid(std::string(name(p)) + ": MS must be 1 to " + std::to_string(kMaxStallMs));
  PointState& s = state(p);
  s.armed.store(false, std::memory_order_relaxed);
  s.generation.fetch_add(1, std::memory_order_acq_rel);  // a stall in progress ends
  s.remaining.store(a.count, std::memory_order_relaxed);
  s.ms.store(a.ms, std::memory_order_relaxed);
  s.flags.store(a.flags, std::memory_order_relaxed);
  s.armed.store(true, std::memory_order_release);
  return {};
}

void disarm(Point p) noexcept {
  PointState& s = state(p);
  s.armed.store(false, std::memory_order_release);
  s.generation.fetch_add(1, std::memory_order_acq_rel);
}

void clear_all() noexcept {
  for (unsigned i = 0; i < kPoints; ++i) disarm(static_cast<Point>(i));
}

const char* name(Point p) noexcept { return kInfo[static_cast<unsigned>(p)].name; }
const char* where(Point p) noexcept { return kInfo[static_cast<unsigned>(p)].where; }
bool is_stall(Point p) noexcept { return kInfo[static_cast<unsigned>(p)].stall; }

std::optional<Point> parse(std::string_view n) noexcept {
  for (unsigned i = 0; i < kPoints; ++i)
    if (n == kInfo[i].name) return static_cast<Point>(i);
  return std::nullopt;
}

View view(Point p) noexcept {
  const PointState& s = state(p);
  return {p,
          s.armed.load(std::memory_order_acquire),
          s.remaining.load(std::memory_order_relaxed),
          s.ms.load(std::memory_order_relaxed),
          s.flags.load(std::memory_order_relaxed),
          s.fired.load(std::memory_order_relaxed)};
}

}  // namespace keel::fault

// Fault injection — named fault points that a test arms to make keel fail
// the way exhausted hardware, a stuck thread or a full disk make it fail
// (issue 19), so that the test can check what must survive: flows that can
// be forwarded keep being forwarded, counters say what was dropped and why,
// keel recovers without a restart, and no state is half-applied.
//
// Where faults can be armed (the decision). Only on a board that simulates
// faults: Board::simulates_faults (boards/board.h; host-sim alone says so).
// System::boot calls permit() with the board's answer, and arm() refuses
// otherwise; `debug fault ...` (cli/commands_fault_debug.cpp, admin only) is
// the one way to arm a point. Nothing here or at a point reads the
// environment, a file or a signal, so the production image on a BlueField
// board carries the points but no way to fire them. Not a build option:
// keel is one binary for every board and backend (README, "one binary
// carries both"), every preset runs the tests that need the points, so a
// build without them would be a variant no test exercises, and what it
// would save is a relaxed load of a false flag at a handful of sites.
// The precedent is `debug offload-fault`, which drives the sim NIC model's
// faults and works only where that model is (sim ports).
//
// Points (the site that calls hit()/stall(), and what a fire does):
//   pool_exhausted     hal/sim/pool.h             every sim packet buffer allocation fails
//   upcall_queue_full  datapath/upcall.h          a PMD finds no free upcall record for a
//                                                 data miss (LACP's reserve still works)
//   handler_stall      ofproto/udpif.cpp          an upcall handler's pass first sleeps MS
//   revalidator_slow   ofproto/udpif.cpp          a revalidation round's dump takes MS longer
//   disk_full          control/config_store.cpp   a config file write fails with ENOSPC
//                                                 (kShortWrite: after writing half the bytes)
//   control_stall      cli (the command itself)   the control thread sleeps MS
// A point is armed until cleared, or for its next `count` fires. Link flaps
// (`port-link`) and the sim NIC's offload faults (`debug offload-fault`) have
// commands of their own; `debug fault show` lists them beside these.
//
// Cost at a site: hit()/stall() inline one relaxed load of the point's
// `armed` flag, false unless a test armed it: no lock, no syscall, no
// shared write. Only an armed point goes out of line (fire(): a CAS on the
// count, a relaxed add on `fired`). stall() sleeps, so it sits on slow-path
// threads only (handler, revalidator, control), never on a PMD; it sleeps in
// steps of at most 5 ms and ends early when the point is disarmed, re-armed
// or cleared, so a test (or shutdown, System::shutdown clears every point)
// never waits for a stall it ended.
//
// Thread-safety: every field is an atomic. arm/disarm/clear_all/permit are
// called by the control thread (the command gate serialises them); hit,
// fire, stall and view from any thread. arm() stores the parameters before
// it sets `armed` (release); fire() reads them after its acquire load of
// `armed`, so a fire sees the parameters of the arm that armed it (or of a
// later one: re-arming a live point is not atomic as a whole, which only a
// test racing itself could notice).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/status.h"

namespace keel::fault {

enum class Point : uint8_t {
  pool_exhausted,
  upcall_queue_full,
  handler_stall,
  revalidator_slow,
  disk_full,
  control_stall,
};
inline constexpr unsigned kPoints = 6;

inline constexpr uint32_t kForever = UINT32_MAX;  // Arm::count: until disarmed
inline constexpr uint32_t kShortWrite = 1;        // Arm::flags of disk_full
inline constexpr uint32_t kMaxStallMs = 600'000;

struct Arm {
  uint32_t count = kForever;  // fires before the point disarms itself (1..), or kForever
  uint32_t ms = 0;            // stall points: how long each fire sleeps
  uint32_t flags = 0;         // point-specific (kShortWrite)
};

// One point's state. Public only so that armed() can be inline.
struct alignas(64) PointState {
  std::atomic<bool> armed{false};
  std::atomic<uint32_t> remaining{0};  // fires left, or kForever
  std::atomic<uint32_t> ms{0};
  std::atomic<uint32_t> flags{0};
  std::atomic<uint64_t> fired{0};       // since boot (clear_all keeps it)
  std::atomic<uint64_t> generation{0};  // bumped by arm/disarm: ends the stalls in progress
};
extern PointState g_points[kPoints];

inline PointState& state(Point p) noexcept { return g_points[static_cast<unsigned>(p)]; }
// The hot-path check: one relaxed load.
inline bool armed(Point p) noexcept { return state(p).armed.load(std::memory_order_relaxed); }
// Out of line, only for an armed point: takes one fire (false when the
// count ran out meanwhile or the point was disarmed).
bool fire(Point p) noexcept;
// Whether the point fires now.
inline bool hit(Point p) noexcept { return armed(p) && fire(p); }
// The fired point's flags (read after hit()).
inline uint32_t flags(Point p) noexcept { return state(p).flags.load(std::memory_order_relaxed); }
// A stall point: when it fires, sleeps its MS (see the top). Slow-path
// threads only.
void stall_fired(Point p, uint64_t generation) noexcept;
inline void stall(Point p) noexcept {
  if (!armed(p)) [[likely]]
    return;
  const uint64_t gen = state(p).generation.load(std::memory_order_acquire);
  if (fire(p)) stall_fired(p, gen);
}

// Whether faults may be armed in this process (System::boot: the board's
// simulates_faults). Starts false.
void permit(bool allowed) noexcept;
bool permitted() noexcept;

// Arms p (replacing how it was armed). Errors, nothing armed: faults not
// permitted, count 0, a stall point without MS or over kMaxStallMs.
Status arm(Point p, const Arm& a);
void disarm(Point p) noexcept;
void clear_all() noexcept;  // every point disarmed; `fired` counts stay

// Names as `debug fault` spells them ("pool-exhausted"), and the site.
const char* name(Point p) noexcept;
const char* where(Point p) noexcept;
std::optional<Point> parse(std::string_view name) noexcept;
bool is_stall(Point p) noexcept;  // takes MS

struct View {
  Point point;
  bool armed;
  uint32_t remaining;  // kForever: until cleared
  uint32_t ms, flags;
  uint64_t fired;
};
View view(Point p) noexcept;

}  // namespace keel::fault

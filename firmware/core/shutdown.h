// Process-wide "please shut down" flag, set from SIGINT/SIGTERM handlers and
// polled by the control thread's loops. Lock-free atomic: async-signal-safe.
#pragma once

#include <atomic>

namespace keel {

inline std::atomic<bool> g_shutdown_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "read and written in a signal handler");

inline bool shutdown_requested() { return g_shutdown_requested.load(std::memory_order_relaxed); }
inline void request_shutdown() { g_shutdown_requested.store(true, std::memory_order_relaxed); }

}  // namespace keel

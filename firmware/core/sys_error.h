// errno_text(): strerror() for messages, safe to call from any thread.
//
// strerror() may return a buffer shared between threads; strerror_r() does
// not, but comes in two flavours (GNU: returns char*, XSI: returns int) and
// which one a libc declares depends on feature macros. The two overloads of
// pick() take whichever it returns.
//
// In firmware/core so every layer uses it (hal, firmware/ssh, control, main).
//
// Thread-safety: reentrant.
#pragma once

#include <string.h>

#include <string>

namespace keel {

namespace sys_error_detail {
inline const char* pick(int rc, const char* buf) { return rc == 0 ? buf : "unknown error"; }  // XSI
inline const char* pick(const char* s, const char*) { return s; }                             // GNU
}  // namespace sys_error_detail

inline std::string errno_text(int e) {
  char buf[128];
  buf[0] = '\0';
  return sys_error_detail::pick(strerror_r(e, buf, sizeof buf), buf);
}

}  // namespace keel

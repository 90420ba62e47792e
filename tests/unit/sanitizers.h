// Which sanitizer a test binary was built with, for test cases that say
// where they are worth running.
//
// A single-threaded test under ThreadSanitizer can find nothing (TSan
// reports races between threads) and only runs 5-20x slower, so heavy
// single-threaded cases in a file that also starts threads (the tsan
// preset builds only such files) are decorated with
// `* doctest::skip(keel::test::kThreadSanitizer)`; every other preset runs them.
#pragma once

namespace keel::test {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

}  // namespace keel::test

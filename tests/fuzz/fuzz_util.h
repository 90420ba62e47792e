// Helpers shared by the fuzz targets (tests/fuzz/fuzz_*.cpp).
//
// Thread-safety: the fuzz targets are single-threaded.
#pragma once

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

namespace keel::fuzz {

// A property the target asserts: when it fails, "fuzz_NAME: what" (the line
// tests/fuzz/run-all reports) and the detail go to stderr, and abort() makes
// it a libFuzzer finding.
inline void check(bool ok, const char* what, const std::string& detail = {}) {
  if (ok) return;
  fprintf(stderr, "%s: %s\n%s\n", program_invocation_short_name, what, detail.c_str());
  abort();
}

// A file that lives in memory (memfd), named by a path the code under test
// opens like any other: /proc/self/fd/N.
struct MemFile {
  int fd;
  std::string path;
  explicit MemFile(std::span<const uint8_t> bytes = {}) : fd(memfd_create("fuzz", MFD_CLOEXEC)) {
    if (fd < 0) abort();
    if (!bytes.empty() && write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
      abort();
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  explicit MemFile(std::string_view text)
      : MemFile(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size())) {}
  ~MemFile() { close(fd); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
};

}  // namespace keel::fuzz

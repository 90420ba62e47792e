// Build identity, generated at configure time (cmake/KeelVersion.cmake).
#pragma once

namespace keel {
extern const char* const kVersion;
extern const char* const kGitRevision;
extern const char* const kBuildArch;
}  // namespace keel

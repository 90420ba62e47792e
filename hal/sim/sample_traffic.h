// keel's built-in traffic sample: what a `sample` port replays, and a ready
// source of valid frames for tests and benchmarks.
//
// 64 frames of 64 bytes (no FCS), Ethernet/IPv4/UDP:
//   02:00:00:00:00:01 -> 02:00:00:00:00:02, 10.0.0.1 -> 10.0.0.2, TTL 64,
//   IP id = frame index, valid IPv4 header and UDP checksums,
//   UDP source port kSampleBaseSport + (index % 8) — 8 flows — to port
//   kSampleDport, 22 payload bytes "keel" + the index.
// The table is built at compile time (constexpr), so it costs nothing at run
// time and its checksums are checked by static_assert.
//
// Thread-safety: immutable.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace keel::hal::sim {

inline constexpr unsigned kSampleFrames = 64;
inline constexpr unsigned kSampleFrameLen = 64;
inline constexpr unsigned kSampleFlows = 8;
inline constexpr uint16_t kSampleBaseSport = 10000;
inline constexpr uint16_t kSampleDport = 5001;

using SampleFrame = std::array<uint8_t, kSampleFrameLen>;

std::span<const SampleFrame, kSampleFrames> sample_traffic();

}  // namespace keel::hal::sim

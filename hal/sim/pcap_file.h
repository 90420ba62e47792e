// Classic libpcap files, read and written without libpcap.
//
// Format (https://www.tcpdump.org/manpages/pcap-savefile.5.html): a 24-byte
// global header (magic, version 2.4, thiszone, sigfigs, snaplen, linktype)
// then records of a 16-byte header (ts_sec, ts_frac, caplen, len) and caplen
// bytes. The magic says the byte order of every header field and the
// timestamp unit: 0xa1b2c3d4 microseconds, 0xa1b23c4d nanoseconds, either
// byte-swapped when the writer's order differs from ours.
//
// PcapReader loads the whole file at open and checks every record then, so
// a port replaying it never meets a bad record on the fast path: frame(i) is
// a bounds-free span into memory. Meant for test and benchmark captures
// (megabytes), not for multi-gigabyte traces.
//
// PcapWriter writes what we send: our byte order, microsecond timestamps,
// snaplen 65535, LINKTYPE_ETHERNET, caplen == len == the frame's length (the
// frame is written whole, byte for byte). It writes through a 1 MiB stdio
// buffer, so a record costs a memcpy, and a write() happens once per MiB.
// close() flushes; the destructor closes.
//
// Thread-safety: a PcapReader is immutable after open(); any number of
// threads may read it. A PcapWriter is used by one thread at a time (the
// thread owning the port's tx queue, then the control thread for close());
// it uses unlocked stdio for that reason.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace keel::hal::sim {

inline constexpr uint32_t kPcapMagicUsec = 0xa1b2c3d4;
inline constexpr uint32_t kPcapMagicNsec = 0xa1b23c4d;
inline constexpr uint32_t kPcapLinktypeEthernet = 1;
inline constexpr size_t kPcapFileHeaderLen = 24;
inline constexpr size_t kPcapRecordHeaderLen = 16;

class PcapReader {
 public:
  // Reads and checks `path`. Every record must fit `max_frame` bytes (the
  // pcap port passes kMaxFrameLen, the frame of the largest MTU) and the
  // file's snaplen. Errors name the file and, for a
  // bad record, its number counted from 1 as Wireshark does.
  static Result<PcapReader> open(const std::string& path, uint32_t max_frame);

  size_t size() const { return records_.size(); }
  std::span<const uint8_t> frame(size_t i) const {
    return {data_.data() + records_[i].offset, records_[i].len};
  }
  // Record timestamp in nanoseconds since the epoch.
  uint64_t timestamp_ns(size_t i) const { return records_[i].ts_ns; }

  bool nanosecond() const { return nanosecond_; }
  bool swapped() const { return swapped_; }  // file byte order differs from ours
  uint32_t snaplen() const { return snaplen_; }

 private:
  struct Record {
    uint64_t offset;  // of the frame bytes in data_
    uint64_t ts_ns;
    uint32_t len;  // caplen
  };
  std::vector<uint8_t> data_;
  std::vector<Record> records_;
  bool nanosecond_ = false;
  bool swapped_ = false;
  uint32_t snaplen_ = 0;
};

class PcapWriter {
 public:
  static constexpr size_t kBufferBytes = 1 << 20;
  static constexpr uint32_t kSnaplen = 65535;

  // Creates (truncates) `path` and writes the global header.
  static Result<std::unique_ptr<PcapWriter>> create(const std::string& path);

  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // Appends one record stamped `ts_ns` (nanoseconds since the epoch, written
  // with microsecond resolution). False when the file is closed or a write
  // failed (disk full): the caller counts the frame as dropped.
  bool write(std::span<const uint8_t> frame, uint64_t ts_ns) noexcept;

  // Flushes and closes; later writes fail. Idempotent. Reports the first
  // write, flush or close error.
  Status close() noexcept;

  bool is_open() const { return f_ != nullptr; }
  const std::string& path() const { return path_; }
  uint64_t records() const { return records_; }

 private:
  PcapWriter(std::string path, FILE* f, std::unique_ptr<char[]> buf);

  std::string path_;
  FILE* f_;
  std::unique_ptr<char[]> buf_;  // the stdio buffer; outlives f_
  uint64_t records_ = 0;
  int write_errno_ = 0;  // first failure, reported by close()
};

// Current wall-clock time in nanoseconds since the epoch (pcap timestamps).
uint64_t wall_clock_ns() noexcept;

}  // namespace keel::hal::sim

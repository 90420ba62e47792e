// PcapReader / PcapWriter (pcap_file.h).
//
// Thread-safety: see pcap_file.h. Everything here except
// PcapWriter::write() runs at setup or teardown on the control thread.
#include "pcap_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bit>
#include <cstring>

#include "core/sys_error.h"

namespace keel::hal::sim {

namespace {

uint32_t load32(const uint8_t* p, bool swap) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return swap ? __builtin_bswap32(v) : v;
}

uint16_t load16(const uint8_t* p, bool swap) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return swap ? __builtin_bswap16(v) : v;
}

std::string hex32(uint32_t v) {
  char b[16];
  snprintf(b, sizeof b, "0x%08x", v);
  return b;
}

// Reads the whole file; fails with strerror.
Status read_file(const std::string& path, std::vector<uint8_t>& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error(Errc::not_found, errno_text(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return error(Errc::io_error, errno_text(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return error(Errc::invalid_argument, "is a directory");
  }
  out.clear();
  out.reserve(st.st_size > 0 ? static_cast<size_t>(st.st_size) : 0);
  uint8_t chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return error(Errc::io_error, errno_text(e));
    }
    if (n == 0) break;
    out.insert(out.end(), chunk, chunk + n);
  }
  ::close(fd);
  return {};
}

}  // namespace

uint64_t wall_clock_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // vDSO: no syscall
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

// --- reader ---

Result<PcapReader> PcapReader::open(const std::string& path, uint32_t max_frame) {
  const std::string what = "pcap file '" + path + "'";
  PcapReader r;
  if (Status s = read_file(path, r.data_); !s.ok()) return s.prefix(what);

  const std::vector<uint8_t>& d = r.data_;
  if (d.size() >= 4) {
    uint32_t be = (uint32_t{d[0]} << 24) | (uint32_t{d[1]} << 16) | (uint32_t{d[2]} << 8) | d[3];
    if (be == 0x0a0d0d0a) {
      return invalid(what + ": is pcapng; keel reads classic pcap (convert it: editcap -F pcap IN OUT)");
    }
  }
  if (d.size() < kPcapFileHeaderLen) {
    return invalid(what + ": truncated pcap header (the file has " + std::to_string(d.size()) +
                   " bytes, the header needs 24)");
  }
  uint32_t magic = load32(d.data(), false);
  switch (magic) {
    case kPcapMagicUsec:
      break;
    case kPcapMagicNsec:
      r.nanosecond_ = true;
      break;
    case __builtin_bswap32(kPcapMagicUsec):
      r.swapped_ = true;
      break;
    case __builtin_bswap32(kPcapMagicNsec):
      r.swapped_ = true;
      r.nanosecond_ = true;
      break;
    default:
      return invalid(what + ": not a pcap file (magic " +
                     hex32(load32(d.data(), std::endian::native == std::endian::little)) + " as written)");
  }
  const bool sw = r.swapped_;
  uint16_t major = load16(d.data() + 4, sw);
  if (major != 2) {
    return invalid(what + ": unsupported pcap version " + std::to_string(major) + "." +
                   std::to_string(load16(d.data() + 6, sw)) + " (expected 2.4)");
  }
  r.snaplen_ = load32(d.data() + 16, sw);
  uint32_t linktype = load32(d.data() + 20, sw) & 0xffff;  // upper bits: FCS info
  if (linktype != kPcapLinktypeEthernet) {
    return invalid(what + ": link type " + std::to_string(linktype) +
                   " is not Ethernet (keel reads LINKTYPE_ETHERNET, 1)");
  }

  const uint64_t frac_to_ns = r.nanosecond_ ? 1 : 1000;
  size_t off = kPcapFileHeaderLen;
  for (size_t index = 1; off < d.size(); ++index) {
    const std::string rec = what + ": record " + std::to_string(index) + " at offset " + std::to_string(off);
    if (d.size() - off < kPcapRecordHeaderLen) {
      return invalid(rec + ": truncated record header (" + std::to_string(d.size() - off) +
                     " of 16 bytes before the end of the file)");
    }
    const uint8_t* h = d.data() + off;
    uint64_t ts_sec = load32(h, sw);
    uint64_t ts_frac = load32(h + 4, sw);
    uint32_t caplen = load32(h + 8, sw);
    if (caplen > max_frame) {
      return invalid(rec + ": caplen " + std::to_string(caplen) + " exceeds the " +
                     std::to_string(max_frame) + "-byte largest frame a port carries");
    }
    if (r.snaplen_ != 0 && caplen > r.snaplen_) {
      return invalid(rec + ": caplen " + std::to_string(caplen) + " exceeds the file's snaplen " +
                     std::to_string(r.snaplen_));
    }
    off += kPcapRecordHeaderLen;
    if (d.size() - off < caplen) {
      return invalid(rec + ": caplen " + std::to_string(caplen) + " runs past the end of the file (" +
                     std::to_string(d.size() - off) + " bytes left)");
    }
    r.records_.push_back({off, ts_sec * 1'000'000'000u + ts_frac * frac_to_ns, caplen});
    off += caplen;
  }
  return r;
}

// --- writer ---

PcapWriter::PcapWriter(std::string path, FILE* f, std::unique_ptr<char[]> buf)
    : path_(std::move(path)), f_(f), buf_(std::move(buf)) {}

PcapWriter::~PcapWriter() { (void)close(); }

Result<std::unique_ptr<PcapWriter>> PcapWriter::create(const std::string& path) {
  const std::string what = "pcap file '" + path + "'";
  FILE* f = fopen(path.c_str(), "wbe");
  if (!f) return error(Errc::io_error, what + ": " + errno_text(errno));
  auto buf = std::make_unique<char[]>(kBufferBytes);
  if (setvbuf(f, buf.get(), _IOFBF, kBufferBytes) != 0) {
    fclose(f);
    return error(Errc::internal, what + ": cannot set the write buffer");
  }
  struct {
    uint32_t magic;
    uint16_t major, minor;
    int32_t thiszone;
    uint32_t sigfigs, snaplen, linktype;
  } hdr{kPcapMagicUsec, 2, 4, 0, 0, kSnaplen, kPcapLinktypeEthernet};
  static_assert(sizeof(hdr) == kPcapFileHeaderLen);
  if (fwrite(&hdr, sizeof hdr, 1, f) != 1) {
    int e = errno;
    fclose(f);
    return error(Errc::io_error, what + ": " + errno_text(e));
  }
  return std::unique_ptr<PcapWriter>(new PcapWriter(path, f, std::move(buf)));
}

bool PcapWriter::write(std::span<const uint8_t> frame, uint64_t ts_ns) noexcept {
  if (!f_ || write_errno_) return false;
  const auto len = static_cast<uint32_t>(frame.size());
  uint32_t rh[4] = {static_cast<uint32_t>(ts_ns / 1'000'000'000u),
                    static_cast<uint32_t>(ts_ns % 1'000'000'000u / 1000u), len, len};
  static_assert(sizeof(rh) == kPcapRecordHeaderLen);
  // One thread owns the writer: skip stdio's per-call lock.
#if defined(__GLIBC__)
  bool ok = fwrite_unlocked(rh, sizeof rh, 1, f_) == 1 &&
            (len == 0 || fwrite_unlocked(frame.data(), len, 1, f_) == 1);
#else
  bool ok = fwrite(rh, sizeof rh, 1, f_) == 1 && (len == 0 || fwrite(frame.data(), len, 1, f_) == 1);
#endif
  if (!ok) {
    write_errno_ = errno ? errno : EIO;
    return false;
  }
  ++records_;
  return true;
}

Status PcapWriter::close() noexcept {
  if (!f_) return {};
  int e = write_errno_;
  if (fflush(f_) != 0 && !e) e = errno;
  if (fclose(f_) != 0 && !e) e = errno;
  f_ = nullptr;
  if (e) return error(Errc::io_error, "pcap file '" + path_ + "': " + errno_text(e));
  return {};
}

}  // namespace keel::hal::sim

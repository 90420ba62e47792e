// ConfigStore: the crash-safe save of the startup config (see config_store.h).
#include "control/config_store.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

#include "core/fault.h"
#include "core/log.h"
#include "core/sys_error.h"

namespace keel::control {

namespace {

KEEL_LOG_MODULE(log_config, "config");

std::string sys_error(const std::string& what, int err) { return what + ": " + errno_text(err); }

Status write_all(int fd, std::string_view text, const std::string& path) {
  // `debug fault disk-full` (core/fault.h): the disk is full, at once or
  // after half the bytes went out (a short write, then ENOSPC), as write(2)
  // reports it.
  if (fault::hit(fault::Point::disk_full)) [[unlikely]] {
    if (fault::flags(fault::Point::disk_full) & fault::kShortWrite) {
      if (write(fd, text.data(), text.size() / 2) < 0) return error(Errc::io_error, sys_error("write '" + path + "'", errno));
    }
    return error(Errc::io_error, sys_error("write '" + path + "'", ENOSPC));
  }
  while (!text.empty()) {
    ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return error(Errc::io_error, sys_error("write '" + path + "'", errno));
    text.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

// Creates `path` (truncating), writes `text`, fsyncs, closes; `written`
// (if given) runs between the write and the fsync.
Status write_synced(const std::string& path, std::string_view text, const std::function<void()>& written = {}) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error(Errc::io_error, sys_error("create '" + path + "'", errno));
  Status st = write_all(fd, text, path);
  if (st.ok() && written) written();
  if (st.ok() && fsync(fd) != 0) st = error(Errc::io_error, sys_error("fsync '" + path + "'", errno));
  if (close(fd) != 0 && st.ok()) st = error(Errc::io_error, sys_error("close '" + path + "'", errno));
  if (!st.ok()) unlink(path.c_str());
  return st;
}

Status fsync_dir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return error(Errc::io_error, sys_error("open directory '" + dir + "'", errno));
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  // Some filesystems can't fsync a directory (EINVAL); the renames are as
  // durable as they can make them.
  if (rc != 0 && err != EINVAL) return error(Errc::io_error, sys_error("fsync directory '" + dir + "'", err));
  return {};
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status make_dirs(const std::string& dir) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    cur = dir.substr(0, pos);
    if (cur.empty()) continue;
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      return error(Errc::io_error, sys_error("create directory '" + cur + "'", errno));
  }
  struct stat sb;
  if (stat(dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) return error(Errc::io_error, "'" + dir + "' is not a directory");
  return {};
}

}  // namespace

Result<std::optional<std::string>> ConfigStore::read(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>{};
    return error(Errc::io_error, sys_error("open '" + path + "'", errno));
  }
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return error(Errc::io_error, sys_error("read '" + path + "'", err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return std::optional<std::string>(std::move(text));
}

Status write_file_atomic(const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp";
  if (Status st = write_synced(tmp, text); !st.ok()) return error(st.code(), st.message() + "; " + path + " is unchanged");
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return error(Errc::io_error, sys_error("rename '" + tmp + "' to '" + path + "'", err) + "; " + path + " is unchanged");
  }
  return fsync_dir(dir_of(path));
}

Status ConfigStore::save_startup(std::string_view text) const {
  if (Status st = make_dirs(dir_); !st.ok()) return st;
  const std::string cur = startup_path();
  const std::string tmp = cur + ".tmp";
  const std::string bak = backup_path();
  const std::string bak_tmp = bak + ".tmp";

  // Until step 3 renames, a failure leaves startup-config as it was (and
  // write_synced removed its temporary file): say so.
  auto unchanged = [&cur](const Status& st) { return error(st.code(), st.message() + "; " + cur + " is unchanged"); };

  // 1. the new file, complete and durable, beside the old one.
  if (Status st = write_synced(tmp, text, [this] { step_done("tmp-written"); }); !st.ok()) return unchanged(st);
  step_done("tmp-synced");

  // 2. the old file becomes the backup: a second name for its inode, then a
  //    rename over the previous backup (so .bak too is always complete).
  struct stat sb;
  if (stat(cur.c_str(), &sb) == 0) {
    unlink(bak_tmp.c_str());
    if (link(cur.c_str(), bak_tmp.c_str()) != 0) {
      // No hard links here (vfat, some overlay setups): copy instead.
      auto old = read(cur);
      if (!old || !old->has_value()) {
        unlink(tmp.c_str());
        return old ? error(Errc::io_error, "'" + cur + "' vanished during the save") : old.status();
      }
      if (Status st = write_synced(bak_tmp, **old); !st.ok()) {
        unlink(tmp.c_str());
        return unchanged(st);
      }
    }
    step_done("bak-linked");
    if (rename(bak_tmp.c_str(), bak.c_str()) != 0) {
      int err = errno;
      unlink(tmp.c_str());
      unlink(bak_tmp.c_str());
      return unchanged(error(Errc::io_error, sys_error("rename '" + bak_tmp + "' to '" + bak + "'", err)));
    }
    step_done("bak-renamed");
  }

  // 3. the switch: one rename.
  if (rename(tmp.c_str(), cur.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return unchanged(error(Errc::io_error, sys_error("rename '" + tmp + "' to '" + cur + "'", err)));
  }
  step_done("renamed");

  // 4. make the renames durable.
  if (Status st = fsync_dir(dir_); !st.ok()) return st;
  step_done("dir-synced");
  KEEL_LOG(log_config, info, "saved the startup config to %s (%zu bytes)", cur.c_str(), text.size());
  return {};
}

Status ConfigStore::mark_good(std::string_view text) const {
  auto cur = read(good_path());
  if (cur && cur->has_value() && **cur == text) return {};
  if (Status st = write_file_atomic(good_path(), text); !st.ok()) return st;
  KEEL_LOG(log_config, info, "%s booted completely; recorded as %s", startup_path().c_str(), good_path().c_str());
  return {};
}

namespace {

std::string uuid_text(uint64_t hi, uint64_t lo) {
  char buf[40];
  snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
           static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
           static_cast<unsigned>(lo >> 48), static_cast<unsigned long long>(lo & 0xffffffffffffull));
  return buf;
}

// Version nibble and RFC 4122 variant bits.
std::string stamp(uint64_t hi, uint64_t lo, unsigned version) {
  hi = (hi & ~uint64_t{0xf000}) | (uint64_t{version} << 12);
  lo = (lo & ~(uint64_t{3} << 62)) | (uint64_t{2} << 62);
  return uuid_text(hi, lo);
}

uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

bool is_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

std::string random_uuid() {
  std::random_device rd;  // the kernel's random source
  auto r64 = [&rd] { return (uint64_t{rd()} << 32) | rd(); };
  const uint64_t hi = r64(), lo = r64();
  return stamp(hi, lo, 4);
}

std::string name_uuid(std::string_view ns, std::string_view name) {
  // Two independent 64-bit FNV-1a passes over ns, a separator and name,
  // each finished by a strong mix.
  uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  auto feed = [&](unsigned char c) {
    a = (a ^ c) * 0x100000001b3ull;
    b = (b ^ c) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
  };
  for (char c : ns) feed(static_cast<unsigned char>(c));
  feed(0);
  for (char c : name) feed(static_cast<unsigned char>(c));
  return stamp(mix64(a), mix64(b ^ a), 8);
}

const std::string& ConfigStore::switch_uuid() const {
  if (!switch_uuid_.empty()) return switch_uuid_;
  const std::string path = switch_uuid_path();
  auto text = read(path);
  if (text && text->has_value()) {
    std::string v = **text;
    while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) v.pop_back();
    if (is_uuid(v)) return switch_uuid_ = v;
    KEEL_LOG(log_config, warn, "%s does not hold a UUID; making a new one", path.c_str());
  }
  switch_uuid_ = random_uuid();
  Status st = make_dirs(dir_);
  if (st.ok()) st = write_file_atomic(path, switch_uuid_ + "\n");
  if (!st.ok())
    KEEL_LOG(log_config, warn, "switch UUID %s is for this boot only: %s", switch_uuid_.c_str(),
             st.message().c_str());
  return switch_uuid_;
}

}  // namespace keel::control

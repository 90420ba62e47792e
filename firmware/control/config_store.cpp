// ConfigStore: the crash-safe save of the startup config (see config_store.h).
#include "control/config_store.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include "core/log.h"

namespace keel::control {

namespace {

KEEL_LOG_MODULE(log_config, "config");

std::string sys_error(const std::string& what, int err) { return what + ": " + strerror(err); }

Status write_all(int fd, std::string_view text, const std::string& path) {
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
  if (Status st = write_synced(tmp, text); !st.ok()) return st;
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return error(Errc::io_error, sys_error("rename '" + tmp + "' to '" + path + "'", err));
  }
  return fsync_dir(dir_of(path));
}

Status ConfigStore::save_startup(std::string_view text) const {
  if (Status st = make_dirs(dir_); !st.ok()) return st;
  const std::string cur = startup_path();
  const std::string tmp = cur + ".tmp";
  const std::string bak = backup_path();
  const std::string bak_tmp = bak + ".tmp";

  // 1. the new file, complete and durable, beside the old one.
  if (Status st = write_synced(tmp, text, [this] { step_done("tmp-written"); }); !st.ok()) return st;
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
        return st;
      }
    }
    step_done("bak-linked");
    if (rename(bak_tmp.c_str(), bak.c_str()) != 0) {
      int err = errno;
      unlink(tmp.c_str());
      unlink(bak_tmp.c_str());
      return error(Errc::io_error, sys_error("rename '" + bak_tmp + "' to '" + bak + "'", err));
    }
    step_done("bak-renamed");
  }

  // 3. the switch: one rename.
  if (rename(tmp.c_str(), cur.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return error(Errc::io_error, sys_error("rename '" + tmp + "' to '" + cur + "'", err));
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

}  // namespace keel::control

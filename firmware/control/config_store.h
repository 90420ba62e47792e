// ConfigStore — where the startup configuration lives, and how it is saved
// so that a crash or power cut at any instant leaves a complete file.
//
// The config directory (--config-dir DIR; default: the board's config_dir,
// /etc/keel on hardware boards, ./keel-config on host-sim) holds:
//
//   startup-config       what boot replays (console commands, one per line)
//   startup-config.bak   the startup config before the last `write memory`
//   startup-config.good  the last startup config that booted completely
//   switch-uuid          the switch's UUID (switch_uuid(): the first line of
//                        `show`, Open vSwitch's Open_vSwitch row uuid)
//
// Save protocol (save_startup), each step durable before the next:
//   1. write startup-config.tmp, fsync it          (the old file untouched)
//   2. link the old startup-config as .bak.tmp,     (.bak is replaced by a
//      rename it over startup-config.bak             rename: old or new .bak)
//   3. rename startup-config.tmp over startup-config (atomic: old or new)
//   4. fsync the directory                           (the renames are durable)
// startup-config itself only ever changes by one rename(2) of a file that is
// already complete and synced, so at every instant it is either the complete
// old or the complete new config; a leftover .tmp is ignored and overwritten
// by the next save. Where hard links are unsupported (vfat), step 2 copies
// the old file to .bak.tmp and fsyncs it instead. A save that fails before
// step 3 (a full disk: ENOSPC at step 1, `debug fault disk-full` makes one)
// removes its temporary files and says "<reason>; DIR/startup-config is
// unchanged".
//
// The steps have names, in order: tmp-written, tmp-synced, bak-linked,
// bak-renamed, renamed, dir-synced. A step hook (set_step_hook; nothing sets
// one in the firmware) is called after each: the kill-during-save test
// (tests/unit/config_store_test.cpp) ends a forked process there, as a
// power cut would, and boots what it left.
//
// Thread-safety: control thread only.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace keel::control {

class ConfigStore {
 public:
  using StepHook = std::function<void(std::string_view step)>;

  explicit ConfigStore(std::string dir) : dir_(std::move(dir)) {}

  // Called after each step of save_startup (see above); for tests.
  void set_step_hook(StepHook hook) { step_hook_ = std::move(hook); }

  const std::string& dir() const { return dir_; }
  std::string startup_path() const { return dir_ + "/startup-config"; }
  std::string backup_path() const { return dir_ + "/startup-config.bak"; }
  std::string good_path() const { return dir_ + "/startup-config.good"; }

  // The file's text, std::nullopt if it does not exist, or an error.
  Result<std::optional<std::string>> read_startup() const { return read(startup_path()); }
  Result<std::optional<std::string>> read_good() const { return read(good_path()); }

  // Saves `text` as the startup config (the protocol above); creates the
  // directory if needed.
  Status save_startup(std::string_view text) const;
  // Records `text` as the last config that booted completely (no-op when
  // the marker already holds it, so a normal boot writes nothing).
  Status mark_good(std::string_view text) const;

  static Result<std::optional<std::string>> read(const std::string& path);

  std::string switch_uuid_path() const { return dir_ + "/switch-uuid"; }
  // The switch's identity, as Open vSwitch's Open_vSwitch row uuid: made
  // once (random, version 4) and kept in DIR/switch-uuid, so it stays the
  // same across reboots as the row does in Open vSwitch's conf.db (it is
  // state, not configuration: a startup config copied to another switch
  // does not carry it). Read or made on first use; when DIR cannot hold it
  // the UUID lives for this boot only (logged once).
  const std::string& switch_uuid() const;

 private:
  void step_done(std::string_view step) const {
    if (step_hook_) step_hook_(step);
  }

  std::string dir_;
  StepHook step_hook_;
  mutable std::string switch_uuid_;  // cached by switch_uuid()
};

// UUIDs in Open vSwitch's text form (8-4-4-4-12 lowercase hex digits).
bool is_uuid(std::string_view s);
std::string random_uuid();  // version 4
// A name-based UUID (RFC 9562 version 8): the same `ns` and `name` always
// give the same UUID, different ones differ (a 128-bit hash; not for
// security). keel's rows that Open vSwitch keeps in its database (bridges,
// ports, interfaces) get one from the switch's UUID and their names, so
// what Open vSwitch orders by row uuid keeps one order across reboots.
std::string name_uuid(std::string_view ns, std::string_view name);

// Writes `text` to `path` atomically: PATH.tmp, fsync, rename, fsync the
// directory. Used for the good marker and `copy running-config FILE`.
Status write_file_atomic(const std::string& path, std::string_view text);

}  // namespace keel::control

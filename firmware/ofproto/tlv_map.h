// TlvMaps — each bridge's Geneve TLV map (OVS: the ofproto's tun_table, set
// by `ovs-ofctl add-tlv-map`), as the console's add-tlv-map / del-tlv-map /
// tlv-map-show (cli/commands_tlv.cpp) change and show it, and as
// translation reads it to convert a packet's raw Geneve options into
// tun_metadata0..7 and back (flow/tun_metadata.h has the table and the
// conversions).
//
// One TlvMaps per switch, reached with switch_tlv_maps(), holding for each
// bridge (by name) an immutable flow::TlvTable snapshot; a bridge with no
// mapping has the empty table. A change builds a new table and swaps the
// snapshot in whole: it applies completely or not at all (a bad mapping in
// a list of several changes nothing). Readers keep the shared_ptr they got
// for as long as they use it (one translation).
//
// Thread-safety: writers (add, del, clear, reset) are the control thread,
// serialised by an internal mutex (never held by a PMD; translation threads
// never take it). Readers (table, tables) are any slow-path thread: one
// atomic shared_ptr load of the whole bridge->table snapshot, lock-free in
// the sense of the rest of ofproto (no lock a writer holds long).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "flow/tun_metadata.h"

namespace keel::ofproto {

class TlvMaps {
 public:
  using Snapshot = std::map<std::string, std::shared_ptr<const flow::TlvTable>, std::less<>>;

  TlvMaps();

  // The bridge's table (the empty table when it has none). Never null.
  std::shared_ptr<const flow::TlvTable> table(std::string_view bridge) const;
  // Every bridge with a non-empty table.
  std::shared_ptr<const Snapshot> tables() const;

  // add-tlv-map: all of `m` or nothing (TlvTable::add's errors).
  Status add(std::string_view bridge, const std::vector<flow::TlvMapping>& m);
  // del-tlv-map with mappings: all of them or nothing; with none: clears
  // the bridge's table (ovs-ofctl del-tlv-map BR without a list).
  Status del(std::string_view bridge, const std::vector<flow::TlvMapping>& m);
  // The bridge is gone: its table goes too.
  void forget(std::string_view bridge);
  // Every table gone (running-config reset).
  void reset();

 private:
  mutable std::mutex writer_;
  std::shared_ptr<const Snapshot> snap_;  // atomic_load / atomic_store
  std::shared_ptr<const flow::TlvTable> empty_;
};

// The switch's TLV maps (one per process, as there is one Ofproto).
TlvMaps& switch_tlv_maps();

}  // namespace keel::ofproto

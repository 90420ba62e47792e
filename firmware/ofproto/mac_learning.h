// MacLearning — a bridge's MAC table for the NORMAL action: (VLAN, MAC) ->
// OpenFlow port, learned from source addresses (or static: fdb-add), aged
// out, bounded in size.
// As Open vSwitch's mac-learning: default aging 300 s, default limit 2048
// entries; when full, the least recently used entry is evicted; a MAC seen
// on another port "moves" (the entry is updated and the move counted).
//
// Thread-safety: learning happens during translation (the upcall handler),
// lookups during translation and trace, show/flush on the control thread:
// every method takes the table's mutex. No PMD ever calls into it.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "flow/flow_key.h"

namespace keel::ofproto {

struct MacEntry {
  uint16_t vlan = 0;
  flow::EthAddr mac{};
  uint32_t ofport = 0;
  uint64_t learned_ns = 0;  // last time the MAC was seen as a source
  bool is_static = false;   // fdb-add: never ages, never moved by learning
};

struct MacLearningStats {
  uint64_t learned = 0, expired = 0, evicted = 0, moved = 0;
};

class MacLearning {
 public:
  static constexpr uint32_t kDefaultAgingS = 300;
  static constexpr uint32_t kDefaultMaxEntries = 2048;

  explicit MacLearning(uint32_t aging_s = kDefaultAgingS, uint32_t max_entries = kDefaultMaxEntries);

  // Learns `mac` on `vlan` at `ofport` at time `now_ns`. Returns true if the
  // table changed (new entry or a move) — flows that depended on the old
  // state must be revalidated.
  bool learn(uint16_t vlan, const flow::EthAddr& mac, uint32_t ofport, uint64_t now_ns);
  // The port `mac` was learned on in `vlan`, if the entry has not aged out.
  std::optional<uint32_t> lookup(uint16_t vlan, const flow::EthAddr& mac, uint64_t now_ns) const;
  // Drops aged entries; returns how many.
  size_t expire(uint64_t now_ns);
  // fdb-add (Open vSwitch's fdb/add): a static entry (never ages, learning
  // does not move it; flush and flush_port remove it as OVS's flush does).
  // Returns the entry it replaced, if any (OVS's "Overriding already
  // existing ... entry" message needs it).
  std::optional<MacEntry> add_static(uint16_t vlan, const flow::EthAddr& mac, uint32_t ofport);
  // fdb-del: false when there is no static entry for (vlan, mac).
  bool del_static(uint16_t vlan, const flow::EthAddr& mac);
  // Forgets everything (fdb-flush), or what was learned on one port (port removed).
  void flush();
  void flush_port(uint32_t ofport);

  void set_aging(uint32_t seconds);
  void set_max_entries(uint32_t n);
  uint32_t aging() const;
  uint32_t max_entries() const;

  // fdb-show: entries sorted by (port, vlan, mac) with their age.
  std::vector<MacEntry> entries() const;
  MacLearningStats stats() const;
  // Bumped on every change (learn of a new MAC, move, flush, expiry):
  // the revalidator re-translates NORMAL flows when it moves.
  uint64_t generation() const;

 private:
  // Implementation: a hash map keyed by (vlan, mac) into an LRU list.
  struct Key {
    uint16_t vlan;
    flow::EthAddr mac;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept;
  };
  bool evict_one();  // the least recently used dynamic entry (under mu_); false: none
  mutable std::mutex mu_;
  uint32_t aging_s_, max_entries_;
  std::list<MacEntry> lru_;  // front = most recently learned
  std::unordered_map<Key, std::list<MacEntry>::iterator, KeyHash> map_;
  MacLearningStats stats_;
  uint64_t generation_ = 0;
};

}  // namespace keel::ofproto

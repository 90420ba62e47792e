// MacLearning (mac_learning.h): a hash map from (VLAN, MAC) into an LRU list
// whose front is the entry learned or refreshed most recently, so the back is
// both the oldest entry (aging walks from there) and the one evicted when the
// table is full. Every method takes mu_; none is called by a PMD.
#include "ofproto/mac_learning.h"

#include <algorithm>
#include <cstring>


namespace keel::ofproto {

namespace {

constexpr uint64_t kNsPerSec = 1'000'000'000ull;

bool is_multicast(const flow::EthAddr& mac) { return mac.b[0] & 1; }

}  // namespace

size_t MacLearning::KeyHash::operator()(const Key& k) const noexcept {
  uint64_t v = uint64_t{k.vlan} << 48;
  for (unsigned i = 0; i < 6; ++i) v |= uint64_t{k.mac.b[i]} << (8 * (5 - i));
  // splitmix64 finalizer: the MACs of one vendor differ in their low bytes.
  v ^= v >> 30;
  v *= 0xbf58476d1ce4e5b9ull;
  v ^= v >> 27;
  v *= 0x94d049bb133111ebull;
  v ^= v >> 31;
  return static_cast<size_t>(v);
}

MacLearning::MacLearning(uint32_t aging_s, uint32_t max_entries)
    : aging_s_(aging_s), max_entries_(max_entries ? max_entries : 1) {}

bool MacLearning::learn(uint16_t vlan, const flow::EthAddr& mac, uint32_t ofport, uint64_t now_ns) {
  if (is_multicast(mac)) return false;  // never a source (mac_learning_may_learn)
  std::lock_guard<std::mutex> g(mu_);
  Key key{vlan, mac};
  auto it = map_.find(key);
  if (it != map_.end()) {
    auto e = it->second;
    if (e->is_static) return false;  // fdb-add's entries stay where they were put
    const uint64_t age_limit = uint64_t{aging_s_} * kNsPerSec;
    const bool aged = now_ns >= e->learned_ns && now_ns - e->learned_ns >= age_limit;
    e->learned_ns = now_ns;
    lru_.splice(lru_.begin(), lru_, e);
    if (e->ofport == ofport) {
      if (!aged) return false;  // a refresh: nothing that depends on it changes
      // An entry that had aged out (but not yet been swept) is learned anew.
      ++stats_.learned;
      ++generation_;
      return true;
    }
    e->ofport = ofport;
    ++stats_.moved;
    ++generation_;
    return true;
  }
  while (map_.size() >= max_entries_ && evict_one()) {
  }
  lru_.push_front(MacEntry{vlan, mac, ofport, now_ns});
  map_.emplace(key, lru_.begin());
  ++stats_.learned;
  ++generation_;
  return true;
}

std::optional<uint32_t> MacLearning::lookup(uint16_t vlan, const flow::EthAddr& mac, uint64_t now_ns) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = map_.find(Key{vlan, mac});
  if (it == map_.end()) return std::nullopt;
  const MacEntry& e = *it->second;
  if (e.is_static) return e.ofport;
  if (now_ns >= e.learned_ns && now_ns - e.learned_ns >= uint64_t{aging_s_} * kNsPerSec) return std::nullopt;
  return e.ofport;
}

size_t MacLearning::expire(uint64_t now_ns) {
  std::lock_guard<std::mutex> g(mu_);
  const uint64_t limit = uint64_t{aging_s_} * kNsPerSec;
  size_t n = 0;
  // The back is the least recently learned; stop at the first live
  // dynamic entry (static ones never age: step over them).
  for (auto it = lru_.end(); it != lru_.begin();) {
    --it;
    if (it->is_static) continue;
    if (now_ns < it->learned_ns || now_ns - it->learned_ns < limit) break;
    map_.erase(Key{it->vlan, it->mac});
    it = lru_.erase(it);
    ++n;
  }
  if (n) {
    stats_.expired += n;
    ++generation_;
  }
  return n;
}

void MacLearning::flush() {
  std::lock_guard<std::mutex> g(mu_);
  if (lru_.empty()) return;
  lru_.clear();
  map_.clear();
  ++generation_;
}

void MacLearning::flush_port(uint32_t ofport) {
  std::lock_guard<std::mutex> g(mu_);
  bool changed = false;
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (it->ofport == ofport) {
      map_.erase(Key{it->vlan, it->mac});
      it = lru_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  if (changed) ++generation_;
}

void MacLearning::set_aging(uint32_t seconds) {
  std::lock_guard<std::mutex> g(mu_);
  if (seconds == aging_s_) return;
  aging_s_ = seconds;
  ++generation_;  // lookups may now answer differently
}

void MacLearning::set_max_entries(uint32_t n) {
  std::lock_guard<std::mutex> g(mu_);
  max_entries_ = n ? n : 1;
  bool changed = false;
  while (map_.size() > max_entries_ && evict_one()) changed = true;
  if (changed) ++generation_;
}

bool MacLearning::evict_one() {
  for (auto it = lru_.end(); it != lru_.begin();) {
    --it;
    if (it->is_static) continue;
    map_.erase(Key{it->vlan, it->mac});
    lru_.erase(it);
    ++stats_.evicted;
    return true;
  }
  return false;
}

std::optional<MacEntry> MacLearning::add_static(uint16_t vlan, const flow::EthAddr& mac, uint32_t ofport) {
  std::lock_guard<std::mutex> g(mu_);
  Key key{vlan, mac};
  std::optional<MacEntry> old;
  if (auto it = map_.find(key); it != map_.end()) {
    old = *it->second;
    lru_.erase(it->second);
    map_.erase(it);
  } else {
    while (map_.size() >= max_entries_ && evict_one()) {
    }
  }
  lru_.push_front(MacEntry{vlan, mac, ofport, 0, true});
  map_.emplace(key, lru_.begin());
  ++generation_;
  return old;
}

bool MacLearning::del_static(uint16_t vlan, const flow::EthAddr& mac) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = map_.find(Key{vlan, mac});
  if (it == map_.end() || !it->second->is_static) return false;
  lru_.erase(it->second);
  map_.erase(it);
  ++generation_;
  return true;
}

uint32_t MacLearning::aging() const {
  std::lock_guard<std::mutex> g(mu_);
  return aging_s_;
}

uint32_t MacLearning::max_entries() const {
  std::lock_guard<std::mutex> g(mu_);
  return max_entries_;
}

std::vector<MacEntry> MacLearning::entries() const {
  std::vector<MacEntry> out;
  {
    std::lock_guard<std::mutex> g(mu_);
    out.assign(lru_.begin(), lru_.end());
  }
  std::sort(out.begin(), out.end(), [](const MacEntry& a, const MacEntry& b) {
    if (a.ofport != b.ofport) return a.ofport < b.ofport;
    if (a.vlan != b.vlan) return a.vlan < b.vlan;
    return std::memcmp(a.mac.b, b.mac.b, 6) < 0;
  });
  return out;
}

MacLearningStats MacLearning::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

uint64_t MacLearning::generation() const {
  std::lock_guard<std::mutex> g(mu_);
  return generation_;
}

}  // namespace keel::ofproto

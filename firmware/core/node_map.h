// NodeMap<K, V, Hash> — a hash map whose entries are nodes with stable
// addresses (as std::unordered_map's: a pointer to an entry stays good until
// that entry is erased, whatever else is inserted or erased), indexed by an
// open-addressing table of {hash, node} slots with linear probing, at most
// half full.
//
// Why: the ukey table (ofproto/udpif.h) looks up every new flow's id in a
// map of up to a million entries while a PMD streams packets through the
// last-level cache on the other core. std::unordered_map's look-up reads
// the bucket, then the node before the bucket's first, then the first (and
// each further node in the chain): up to three dependent cache misses, 33-38 %
// of the upcall handler's time in flow-setup (tests/bench/RESULTS.md). Here
// a look-up reads one 16-byte slot (four to a cache line) and touches a node
// only when the slot's full 64-bit hash matches: one miss for a new key, two
// for one that exists.
//
// Nodes come from a SlabPool (core/slab_allocator.h). Erasing shifts the
// following slots of its run back (no tombstones), so the table never needs
// a clean-up; erase_if() decides for every node first and erases after, so
// each node is seen exactly once.
//
// Thread-safety: none; the caller locks (the ukey shards' mutexes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "core/slab_allocator.h"

namespace keel {

template <typename K, typename V, typename Hash>
class NodeMap {
 public:
  struct Node {
    K key;
    V value;
  };

  NodeMap() = default;
  ~NodeMap() { clear(); }
  NodeMap(const NodeMap&) = delete;
  NodeMap& operator=(const NodeMap&) = delete;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t slot_count() const { return slots_.size(); }

  // Slots for n entries at most half full; never shrinks.
  void reserve(size_t n) {
    size_t want = 16;
    while (want < 2 * n) want *= 2;
    if (want > slots_.size()) rehash(want);
  }

  // The entry for k, made (value-initialised) if there was none.
  std::pair<Node*, bool> try_emplace(const K& k) {
    const uint64_t h = hash_of(k);
    if (slots_.empty()) rehash(16);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.node) break;
      if (s.hash == h && s.node->key == k) return {s.node, false};
    }
    if (2 * (size_ + 1) > slots_.size()) rehash(2 * slots_.size());
    Node* n = alloc().allocate(1);
    try {
      ::new (static_cast<void*>(n)) Node{k, V{}};
    } catch (...) {
      alloc().deallocate(n, 1);
      throw;
    }
    place(h, n);
    ++size_;
    return {n, true};
  }

  Node* find(const K& k) const {
    if (slots_.empty()) return nullptr;
    const uint64_t h = hash_of(k);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.node) return nullptr;
      if (s.hash == h && s.node->key == k) return s.node;
    }
  }

  // Look-ahead for a caller that will find() many keys it already knows (a
  // revalidator's share of a dump): start loading the slot a find(k) reads
  // first; some iterations later, the node that slot points to when its
  // hash is k's (every cache line of it). Each find then waits for
  // neither, where a share of 100k flows spent ~80 % of its time on those
  // two misses. Hints only: a wrong or stale guess costs a wasted load.
  // Always inlined: out of line, GCC finds a function that only prefetches
  // free of side effects and drops every call to it.
  [[gnu::always_inline]] void prefetch_slot(const K& k) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash_of(k) & mask_]);
  }
  [[gnu::always_inline]] void prefetch_node(const K& k) const {
    if (slots_.empty()) return;
    const uint64_t h = hash_of(k);
    const Slot& s = slots_[h & mask_];
    if (!s.node || s.hash != h) return;
    const uintptr_t first = reinterpret_cast<uintptr_t>(s.node) & ~uintptr_t{63};
    const uintptr_t last = reinterpret_cast<uintptr_t>(s.node) + sizeof(Node) - 1;
    for (uintptr_t a = first; a <= last; a += 64) __builtin_prefetch(reinterpret_cast<const void*>(a));
  }

  // n: an entry of this map.
  void erase(Node* n) {
    for (size_t i = hash_of(n->key) & mask_;; i = (i + 1) & mask_)
      if (slots_[i].node == n) {
        remove_slot(i);
        break;
      }
    destroy(n);
    --size_;
  }

  bool erase(const K& k) {
    Node* n = find(k);
    if (n) erase(n);
    return n != nullptr;
  }

  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.node) f(*s.node);
  }

  // Erases the entries pred(Node&) is true of; pred runs once for each
  // entry, all before the first erase. Returns how many went.
  template <typename F>
  size_t erase_if(F&& pred) {
    std::vector<Node*> doomed;
    for (const Slot& s : slots_)
      if (s.node && pred(*s.node)) doomed.push_back(s.node);
    for (Node* n : doomed) erase(n);
    return doomed.size();
  }

  void clear() {
    for (Slot& s : slots_)
      if (s.node) {
        destroy(s.node);
        s = Slot{};
      }
    size_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    Node* node = nullptr;  // null: empty
  };
  using Alloc = SlabAllocator<Node>;
  static Alloc alloc() { return Alloc{}; }
  static uint64_t hash_of(const K& k) { return static_cast<uint64_t>(Hash{}(k)); }

  static void destroy(Node* n) {
    n->~Node();
    alloc().deallocate(n, 1);
  }

  // Into the first empty slot of h's run (the caller made room).
  void place(uint64_t h, Node* n) {
    size_t i = h & mask_;
    while (slots_[i].node) i = (i + 1) & mask_;
    slots_[i] = {h, n};
  }

  // Empties slot i and moves back every later slot of its run that may sit
  // there (its home is not between i and it), so that no look-up stops at
  // a hole before its entry.
  void remove_slot(size_t i) {
    for (size_t j = (i + 1) & mask_; slots_[j].node; j = (j + 1) & mask_) {
      const size_t home = slots_[j].hash & mask_;
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
  }

  void rehash(size_t n_slots) {
    std::vector<Slot> old(n_slots);
    old.swap(slots_);
    mask_ = n_slots - 1;
    for (const Slot& s : old)
      if (s.node) place(s.hash, s.node);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace keel

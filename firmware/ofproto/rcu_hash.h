// RcuHashMap — a 32-bit-hash -> small value multimap with one writer and
// lock-free readers; the building block of the OpenFlow classifier's
// subtables (classifier.h: rules by masked match, the staged indexes).
//
// Layout: a power-of-two array of bucket heads, each a singly linked chain
// of Nodes {next, hash, value}. The caller hashes; the map compares only
// hashes, and a reader's callback compares whatever else it must.
//
// Writer operations (the control thread only):
//   insert: a new Node is filled, then pushed at its chain's head with one
//     release store; amortised O(1). When the map holds more than two nodes
//     per bucket it grows 4x: a new array with *copies* of every node is
//     built aside and published with one release store; the old array and
//     its nodes are retired whole (readers still walking it see a complete,
//     unchanging snapshot). Chains are never relinked in place, so a reader
//     can never be steered into the wrong chain.
//   remove: the predecessor's link is stored (release) past the node, which
//     is retired; a reader standing on it still follows its unchanged next.
// Retired memory is freed through Rcu once every reader has quiesced, or at
// once when the map has no Rcu (no concurrent readers).
//
// Readers (any thread, between two quiescent points): acquire-load the
// array, then acquire-load links; a node's hash and value never change after
// it is published. A reader racing with the writer sees each chain either
// before or after each change.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "datapath/rcu.h"

namespace keel::ofproto {

template <typename V>
class RcuHashMap {
 public:
  explicit RcuHashMap(datapath::Rcu* rcu) noexcept : rcu_(rcu) {}
  ~RcuHashMap() { free_table(table_.load(std::memory_order_relaxed)); }
  RcuHashMap(const RcuHashMap&) = delete;
  RcuHashMap& operator=(const RcuHashMap&) = delete;

  // --- reader (and writer) ---
  // Calls f(value) for each entry with this hash until f returns true;
  // returns whether one did.
  template <typename F>
  bool find(uint32_t hash, F&& f) const noexcept {
    const Table* t = table_.load(std::memory_order_acquire);
    if (!t) return false;
    for (const Node* n = t->buckets[hash & t->mask].load(std::memory_order_acquire); n;
         n = n->next.load(std::memory_order_acquire)) {
      if (n->hash == hash && f(n->value)) return true;
    }
    return false;
  }
  bool contains(uint32_t hash) const noexcept {
    return find(hash, [](const V&) { return true; });
  }

  // --- writer ---
  void insert(uint32_t hash, V value) {
    Table* t = table_.load(std::memory_order_relaxed);
    if (!t || n_ >= 2 * (size_t{t->mask} + 1)) t = grow(t);
    Node* n = new Node;
    n->hash = hash;
    n->value = value;
    std::atomic<Node*>& head = t->buckets[hash & t->mask];
    n->next.store(head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    head.store(n, std::memory_order_release);  // publishes n's fields
    ++n_;
  }

  // Removes the first entry with this hash and value; false if none.
  bool remove(uint32_t hash, const V& value) {
    Table* t = table_.load(std::memory_order_relaxed);
    if (!t) return false;
    std::atomic<Node*>* link = &t->buckets[hash & t->mask];
    for (Node* n = link->load(std::memory_order_relaxed); n; n = link->load(std::memory_order_relaxed)) {
      if (n->hash == hash && n->value == value) {
        link->store(n->next.load(std::memory_order_relaxed), std::memory_order_release);
        if (rcu_) rcu_->retire([n] { delete n; });
        else delete n;
        --n_;
        return true;
      }
      link = &n->next;
    }
    return false;
  }

  // Calls f(hash, value) for every entry (writer; f must not change the map).
  template <typename F>
  void for_each(F&& f) const {
    const Table* t = table_.load(std::memory_order_relaxed);
    if (!t) return;
    for (size_t b = 0; b <= t->mask; ++b)
      for (const Node* n = t->buckets[b].load(std::memory_order_relaxed); n;
           n = n->next.load(std::memory_order_relaxed))
        f(n->hash, n->value);
  }

  size_t size() const noexcept { return n_; }

 private:
  struct Node {
    std::atomic<Node*> next{nullptr};
    uint32_t hash = 0;
    V value{};
  };
  struct Table {
    uint32_t mask = 0;  // buckets - 1
    std::unique_ptr<std::atomic<Node*>[]> buckets;
  };

  static Table* new_table(size_t n_buckets) {
    Table* t = new Table;
    t->mask = static_cast<uint32_t>(n_buckets - 1);
    t->buckets.reset(new std::atomic<Node*>[n_buckets]);
    for (size_t i = 0; i < n_buckets; ++i) t->buckets[i].store(nullptr, std::memory_order_relaxed);
    return t;
  }

  static void free_table(Table* t) {
    if (!t) return;
    for (size_t b = 0; b <= t->mask; ++b) {
      Node* n = t->buckets[b].load(std::memory_order_relaxed);
      while (n) {
        Node* next = n->next.load(std::memory_order_relaxed);
        delete n;
        n = next;
      }
    }
    delete t;
  }

  // A 4x larger array of copies of every node, published; the old one
  // retired whole.
  Table* grow(Table* old) {
    Table* t = new_table(old ? 4 * (size_t{old->mask} + 1) : 4);
    if (old) {
      for (size_t b = 0; b <= old->mask; ++b)
        for (const Node* o = old->buckets[b].load(std::memory_order_relaxed); o;
             o = o->next.load(std::memory_order_relaxed)) {
          Node* n = new Node;
          n->hash = o->hash;
          n->value = o->value;
          std::atomic<Node*>& head = t->buckets[o->hash & t->mask];
          n->next.store(head.load(std::memory_order_relaxed), std::memory_order_relaxed);
          head.store(n, std::memory_order_relaxed);
        }
    }
    table_.store(t, std::memory_order_release);
    if (old) {
      if (rcu_) rcu_->retire([old] { free_table(old); });
      else free_table(old);
    }
    return t;
  }

  std::atomic<Table*> table_{nullptr};
  size_t n_ = 0;
  datapath::Rcu* rcu_;
};

}  // namespace keel::ofproto

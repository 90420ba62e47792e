// PrefixTrie: see prefix_trie.h.
#include "ofproto/prefix_trie.h"

#include <algorithm>
#include <bit>
#include <cassert>

#include "datapath/rcu.h"

namespace keel::ofproto {

namespace {

inline unsigned bit_at(const uint8_t* p, unsigned ofs) noexcept { return (p[ofs / 8] >> (7 - ofs % 8)) & 1; }

inline uint32_t top_mask(unsigned n) noexcept { return n ? ~uint32_t{0} << (32 - n) : 0; }

// Bit i (MSB first) of a node prefix.
inline unsigned prefix_bit(uint32_t prefix, unsigned i) noexcept { return (prefix >> (31 - i)) & 1; }

}  // namespace

PrefixTrie::~PrefixTrie() { free_subtree(root_.load(std::memory_order_relaxed)); }

void PrefixTrie::free_subtree(Node* n) {
  if (!n) return;
  free_subtree(n->edges[0].load(std::memory_order_relaxed));
  free_subtree(n->edges[1].load(std::memory_order_relaxed));
  delete n;
}

void PrefixTrie::retire(Node* n) {
  if (rcu_) rcu_->retire([n] { delete n; });
  else delete n;
}

// Nodes for bits [ofs, plen) of value, the last one counting one rule; built
// bottom up, so the head is complete before the caller publishes it.
PrefixTrie::Node* PrefixTrie::make_chain(const uint8_t* value, unsigned ofs, unsigned plen) const {
  assert(ofs < plen);
  const unsigned n_nodes = (plen - ofs + 31) / 32;
  Node* below = nullptr;
  for (unsigned i = n_nodes; i-- > 0;) {
    const unsigned start = ofs + i * 32;
    const unsigned len = std::min(32u, plen - start);
    Node* n = new Node;
    n->prefix = get_bits(value, start, len);
    n->n_bits = static_cast<uint8_t>(len);
    if (below) {
      n->edges[bit_at(value, start + len)].store(below, std::memory_order_relaxed);
    } else {
      n->n_rules.store(1, std::memory_order_relaxed);
    }
    below = n;
  }
  return below;
}

void PrefixTrie::insert(const uint8_t* value, unsigned plen) {
  assert(plen >= 1 && plen <= n_bits_);
  std::atomic<Node*>* edge = &root_;
  unsigned ofs = 0;
  for (;;) {
    Node* node = edge->load(std::memory_order_relaxed);
    if (!node) {
      edge->store(make_chain(value, ofs, plen), std::memory_order_release);
      return;
    }
    const unsigned avail = std::min<unsigned>(node->n_bits, plen - ofs);
    const uint32_t diff = (get_bits(value, ofs, avail) ^ node->prefix) & top_mask(avail);
    const unsigned eq = diff ? static_cast<unsigned>(std::countl_zero(diff)) : avail;
    if (eq < node->n_bits) {
      // Split: `parent` keeps the first eq bits, `child` the rest of node.
      Node* child = new Node;
      child->prefix = node->prefix << eq;
      child->n_bits = static_cast<uint8_t>(node->n_bits - eq);
      child->n_rules.store(node->n_rules.load(std::memory_order_relaxed), std::memory_order_relaxed);
      for (int e = 0; e < 2; ++e)
        child->edges[e].store(node->edges[e].load(std::memory_order_relaxed), std::memory_order_relaxed);
      Node* parent = new Node;
      parent->prefix = node->prefix & top_mask(eq);
      parent->n_bits = static_cast<uint8_t>(eq);
      parent->edges[prefix_bit(node->prefix, eq)].store(child, std::memory_order_relaxed);
      if (ofs + eq == plen) {
        parent->n_rules.store(1, std::memory_order_relaxed);
      } else {
        // value continues with the other bit at ofs + eq (they differ there).
        parent->edges[bit_at(value, ofs + eq)].store(make_chain(value, ofs + eq, plen),
                                                     std::memory_order_relaxed);
      }
      edge->store(parent, std::memory_order_release);
      retire(node);
      return;
    }
    ofs += node->n_bits;
    if (ofs == plen) {
      node->n_rules.store(node->n_rules.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return;
    }
    edge = &node->edges[bit_at(value, ofs)];
  }
}

void PrefixTrie::remove(const uint8_t* value, unsigned plen) {
  assert(plen >= 1 && plen <= n_bits_);
  std::atomic<Node*>* path[130];  // edges from the root to the prefix's node
  unsigned depth = 0;
  std::atomic<Node*>* edge = &root_;
  unsigned ofs = 0;
  Node* node;
  for (;;) {
    node = edge->load(std::memory_order_relaxed);
    assert(node && "prefix was inserted");
    if (!node) return;
    path[depth++] = edge;
    ofs += node->n_bits;
    if (ofs >= plen) break;
    edge = &node->edges[bit_at(value, ofs)];
  }
  assert(ofs == plen && node->n_rules.load(std::memory_order_relaxed) > 0);
  node->n_rules.store(node->n_rules.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);

  // Tidy up from the bottom: drop rule-less leaves, merge a rule-less node
  // with a single child into that child when both fit one node.
  while (depth > 0) {
    edge = path[--depth];
    node = edge->load(std::memory_order_relaxed);
    if (node->n_rules.load(std::memory_order_relaxed) != 0) break;
    Node* e0 = node->edges[0].load(std::memory_order_relaxed);
    Node* e1 = node->edges[1].load(std::memory_order_relaxed);
    if (!e0 && !e1) {
      edge->store(nullptr, std::memory_order_release);
      retire(node);
      continue;  // the parent may now be a rule-less leaf or single-child node
    }
    if (e0 && e1) break;
    Node* child = e0 ? e0 : e1;
    if (node->n_bits + child->n_bits <= 32) {
      Node* merged = new Node;
      merged->prefix = node->prefix | (child->prefix >> node->n_bits);
      merged->n_bits = static_cast<uint8_t>(node->n_bits + child->n_bits);
      merged->n_rules.store(child->n_rules.load(std::memory_order_relaxed), std::memory_order_relaxed);
      for (int e = 0; e < 2; ++e)
        merged->edges[e].store(child->edges[e].load(std::memory_order_relaxed), std::memory_order_relaxed);
      edge->store(merged, std::memory_order_release);
      retire(node);
      retire(child);
    }
    break;
  }
}

unsigned PrefixTrie::lookup(const uint8_t* x, PlenSet& matched) const noexcept {
  const Node* node = root_.load(std::memory_order_acquire);
  if (!node) return 0;
  unsigned ofs = 0;
  for (;;) {
    if (node->n_bits) {
      const uint32_t diff = get_bits(x, ofs, node->n_bits) ^ node->prefix;
      if (diff) return ofs + static_cast<unsigned>(std::countl_zero(diff)) + 1;
      ofs += node->n_bits;
    }
    if (node->n_rules.load(std::memory_order_relaxed)) matched.set(ofs);
    if (ofs >= n_bits_) return n_bits_;
    const Node* e0 = node->edges[0].load(std::memory_order_acquire);
    const Node* e1 = node->edges[1].load(std::memory_order_acquire);
    if (!e0 && !e1) return ofs;  // nothing longer on this path: bit ofs is irrelevant
    const Node* next = bit_at(x, ofs) ? e1 : e0;
    if (!next) return ofs + 1;
    node = next;
  }
}

}  // namespace keel::ofproto

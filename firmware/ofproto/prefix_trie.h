// PrefixTrie — the prefixes that the OpenFlow classifier's rules have on one
// address field (nw_src, nw_dst, ipv6_src or ipv6_dst), so that a lookup can
// tell from a few bits of a packet's address which prefix lengths can match
// it at all (classifier.h, "prefix tracking"); and, one per subtable whose
// mask has L4 ports, the masked tp_src|tp_dst words of that subtable's
// rules as 32-bit prefixes of one length (classifier.h, "ports tracking").
//
// A binary trie, path-compressed: a Node holds up to 32 bits of prefix (MSB
// first), a count of rules whose prefix ends exactly there, and two edges
// chosen by the next bit. Prefixes longer than 32 bits are chains of nodes.
// A zero-bit node exists only at the root, as the branch point of two
// prefixes that differ in their first bit. Nodes are immutable once
// published except for `n_rules` and the edges: a split or a merge builds
// the replacement nodes aside, publishes them with one release store into
// the parent's edge and retires the nodes they replace.
//
// lookup(x) walks x's bits from the root and returns (a) `matched`: every
// length p such that some rule's prefix of length p equals x's first p bits,
// and (b) how many leading bits of x the walk examined, `maskbits`: the walk
// — hence `matched` — is the same for every address that agrees with x on
// those bits (it stops at the first bit where x leaves the trie, or where no
// longer prefix can continue). So "no rule of prefix length p matches x" is
// proven by x's first min(maskbits, p) bits, which is what the classifier
// un-wildcards when it skips a subtable this way.
//
// Cost: lookup is one node per 32 bits of common prefix plus one per branch
// point on the path — typically 1-3 nodes for IPv4 — and never allocates.
// insert/remove allocate at most three nodes.
//
// Thread-safety: one writer (insert, remove, the destructor: the control
// thread) and any number of concurrent lock-free readers (lookup). Readers
// reach nodes only through acquire loads of edges, and a node the writer
// unlinks is freed through Rcu only after every reader has quiesced (or at
// once when the trie has no Rcu: no concurrent readers). Counts are relaxed
// atomics; a reader racing with insert or remove may see either state,
// which is safe because the classifier only inserts or removes the prefix of
// a rule that no concurrent lookup can see (classifier.h, versions).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace keel::datapath {
class Rcu;
}

namespace keel::ofproto {

// A set of prefix lengths 0..128.
struct PlenSet {
  std::array<uint64_t, 3> w{};
  void set(unsigned p) noexcept { w[p / 64] |= uint64_t{1} << (p % 64); }
  bool test(unsigned p) const noexcept { return (w[p / 64] >> (p % 64)) & 1; }
};

class PrefixTrie {
 public:
  // n_bits: the field's width, 32 or 128. rcu: where unlinked nodes wait for
  // readers; nullptr frees them at once (no concurrent readers).
  PrefixTrie(unsigned n_bits, datapath::Rcu* rcu) noexcept : n_bits_(n_bits), rcu_(rcu) {}
  ~PrefixTrie();  // frees every node: no reader may be inside
  PrefixTrie(const PrefixTrie&) = delete;
  PrefixTrie& operator=(const PrefixTrie&) = delete;

  // --- writer ---
  // Counts one more rule with prefix `value`'s first `plen` bits (1..n_bits;
  // network byte order, MSB first). Bits past plen are ignored.
  void insert(const uint8_t* value, unsigned plen);
  // Counts one rule less; the prefix must have been inserted. Frees nodes
  // that no longer carry a rule or a branch, and merges a node into its only
  // child when the two fit one node.
  void remove(const uint8_t* value, unsigned plen);

  // --- reader ---
  // Adds to `matched` every length p (1..n_bits) of a prefix in the trie
  // that x starts with, and returns maskbits (see the top of the file).
  unsigned lookup(const uint8_t* x, PlenSet& matched) const noexcept;

  unsigned n_bits() const noexcept { return n_bits_; }
  bool empty() const noexcept { return root_.load(std::memory_order_relaxed) == nullptr; }

 private:
  struct Node {
    uint32_t prefix = 0;  // MSB aligned; bits past n_bits are zero
    uint8_t n_bits = 0;   // 0..32 (0 only at the root)
    std::atomic<uint32_t> n_rules{0};
    std::atomic<Node*> edges[2] = {nullptr, nullptr};
  };
  Node* make_chain(const uint8_t* value, unsigned ofs, unsigned plen) const;
  void retire(Node* n);
  static void free_subtree(Node* n);

  unsigned n_bits_;
  datapath::Rcu* rcu_;
  std::atomic<Node*> root_{nullptr};
};

// The first n (0..32) bits of p starting at bit `ofs` (MSB first), MSB
// aligned in the result. Reads only the bytes those bits are in.
inline uint32_t get_bits(const uint8_t* p, unsigned ofs, unsigned n) noexcept {
  if (n == 0) return 0;
  const unsigned first = ofs / 8, last = (ofs + n - 1) / 8;
  uint64_t v = 0;
  for (unsigned b = first; b <= last; ++b) v = (v << 8) | p[b];
  v <<= 64 - (last - first + 1) * 8;  // at most 5 bytes: shift >= 24
  v <<= ofs % 8;
  return static_cast<uint32_t>(v >> 32) & (~uint32_t{0} << (32 - n));
}

}  // namespace keel::ofproto

// PackedMatch — a Match kept in the bytes it needs: the map of the words its
// mask has bits in, then those mask words, then the same words of the key
// (a Match's key is always masked, so every other word of both is zero).
// A megaflow of an exact 5-tuple is about a dozen words: 296 bytes here,
// with no allocation up to 16 words, against a Match's 1,216; a ukey keeps
// one for each of a million flows (ofproto/udpif.h), where every fresh byte
// costs its share of a page fault.
//
// unpack() gives back the Match byte for byte; equals() compares without
// unpacking.
//
// Thread-safety: a plain value type.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>

#include "flow/match.h"
#include "flow/miniflow.h"

namespace keel::flow {

class PackedMatch {
 public:
  // Words kept in the object itself (mask and key words together): an
  // exact IPv4/IPv6 L4 megaflow fits, a longer one takes a heap array.
  static constexpr unsigned kInlineWords = 32;

  PackedMatch() = default;
  explicit PackedMatch(const Match& m) {
    const uint64_t* mw = m.mask.words();
    for (unsigned i = 0; i < kFlowWords; ++i)
      if (mw[i]) map_.set(i);
    n_ = map_.count();
    if (2 * n_ > kInlineWords) heap_ = std::make_unique<uint64_t[]>(size_t{2} * n_);
    uint64_t* v = words();
    const uint64_t* kw = m.key.words();
    unsigned j = 0;
    map_.for_each([&](unsigned w) {
      v[j] = mw[w];
      v[n_ + j] = kw[w];
      ++j;
    });
  }
  PackedMatch(const PackedMatch& o) : map_(o.map_), n_(o.n_) {
    if (o.heap_) heap_ = std::make_unique<uint64_t[]>(size_t{2} * n_);
    std::memcpy(words(), o.words(), sizeof(uint64_t) * 2 * n_);
  }
  PackedMatch& operator=(const PackedMatch& o) {
    if (this != &o) *this = PackedMatch(o);
    return *this;
  }
  PackedMatch(PackedMatch&& o) noexcept : map_(o.map_), n_(o.n_), heap_(std::move(o.heap_)) {
    if (!heap_) std::memcpy(inline_, o.inline_, sizeof(uint64_t) * 2 * n_);
  }
  PackedMatch& operator=(PackedMatch&& o) noexcept {
    if (this != &o) {
      map_ = o.map_;
      n_ = o.n_;
      heap_ = std::move(o.heap_);
      if (!heap_) std::memcpy(inline_, o.inline_, sizeof(uint64_t) * 2 * n_);
    }
    return *this;
  }

  Match unpack() const {
    Match m;
    uint64_t* mw = m.mask.words();
    uint64_t* kw = m.key.words();
    const uint64_t* v = words();
    unsigned j = 0;
    map_.for_each([&](unsigned w) {
      mw[w] = v[j];
      kw[w] = v[n_ + j];
      ++j;
    });
    return m;
  }

  bool equals(const Match& m) const {
    const uint64_t* mw = m.mask.words();
    const uint64_t* kw = m.key.words();
    const uint64_t* v = words();
    unsigned j = 0;
    for (unsigned i = 0; i < kFlowWords; ++i) {
      if (!map_.test(i)) {
        if (mw[i] || kw[i]) return false;
        continue;
      }
      if (mw[i] != v[j] || kw[i] != v[n_ + j]) return false;
      ++j;
    }
    return true;
  }

 private:
  uint64_t* words() { return heap_ ? heap_.get() : inline_; }
  const uint64_t* words() const { return heap_ ? heap_.get() : inline_; }

  FlowMap map_;
  unsigned n_ = 0;
  std::unique_ptr<uint64_t[]> heap_;  // 2 * n_ words when they don't fit inline_
  uint64_t inline_[kInlineWords];     // n_ mask words, then n_ key words
};

}  // namespace keel::flow

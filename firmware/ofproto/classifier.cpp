// Classifier: see classifier.h.
#include "ofproto/classifier.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cstddef>
#include <map>

#include "core/hash.h"
#include "datapath/rcu.h"
#include "ofproto/rcu_hash.h"

namespace keel::ofproto {

using flow::FlowKey;
using flow::kFlowWords;

namespace {

// The stages, as bit masks over the key — Open vSwitch's flow segments
// (FLOW_SEGMENT_*_ENDS_AT: dl_dst, nw_src, nd_target): metadata (tunnel,
// conntrack, metadata words 0-58), L2 (59-63), L3 (64-69: addresses, label,
// frag, tos, ttl, proto), L4 (70-75: ND target, ARP/ND hardware addresses,
// tcp_flags, ports). A subtable's stage s is its mask ANDed with kStage[s].
constexpr unsigned kStages = 4;
constexpr unsigned kStageL3 = 2;
constexpr unsigned kStageEnd[kStages] = {KEEL_FLOW_WORD(dl_dst), flow::kFlowU0Words, KEEL_FLOW_WORD(nd_target),
                                         kFlowWords};
static_assert(KEEL_FLOW_WORD(nd_target) == 70 && KEEL_FLOW_WORD(tcp_flags) > KEEL_FLOW_WORD(nd_target) &&
                  KEEL_FLOW_WORD(tp_src) > KEEL_FLOW_WORD(nd_target),
              "L4 stage = nd_target onwards: ND/ARP hardware addresses, tcp_flags and the ports, as in OVS");

const std::array<FlowKey, kStages>& stage_masks() {
  static const std::array<FlowKey, kStages> masks = [] {
    std::array<FlowKey, kStages> s{};
    for (unsigned st = 0, w = 0; st < kStages; ++st)
      for (; w < kStageEnd[st]; ++w) s[st].words()[w] = ~uint64_t{0};
    return s;
  }();
  return masks;
}

struct PrefixFieldInfo {
  size_t offset;  // bytes into FlowKey
  unsigned n_bits;
};
constexpr PrefixFieldInfo kPrefixFieldInfo[kNumPrefixFields] = {
    {offsetof(FlowKey, nw_src), 32},
    {offsetof(FlowKey, nw_dst), 32},
    {offsetof(FlowKey, ipv6_src), 128},
    {offsetof(FlowKey, ipv6_dst), 128},
};
static_assert(offsetof(FlowKey, nw_src) / 8 >= flow::kFlowU0Words &&
                  offsetof(FlowKey, ipv6_dst) / 8 < KEEL_FLOW_WORD(nd_target),
              "prefix-tracked fields are L3: tries are consulted at a subtable's L3 stage");

inline const uint8_t* field_bytes(const FlowKey& k, unsigned f) {
  return reinterpret_cast<const uint8_t*>(&k) + kPrefixFieldInfo[f].offset;
}

inline unsigned bit_at(const uint8_t* p, unsigned i) { return (p[i / 8] >> (7 - i % 8)) & 1; }

// The prefix length of a CIDR mask; 0 if the mask is empty or not a prefix.
unsigned cidr_plen(const uint8_t* m, unsigned n_bits) {
  unsigned p = 0;
  while (p < n_bits && bit_at(m, p)) ++p;
  for (unsigned q = p; q < n_bits; ++q)
    if (bit_at(m, q)) return 0;
  return p;
}

// Sets the first n bits of a field (MSB first).
inline void set_prefix_bits(uint8_t* p, unsigned n) noexcept {
  unsigned i = 0;
  for (; n >= 8; n -= 8) p[i++] = 0xff;
  if (n) p[i] |= static_cast<uint8_t>(0xff << (8 - n));
}

// Are the first n bits of a field all set?
inline bool prefix_bits_set(const uint8_t* p, unsigned n) noexcept {
  unsigned i = 0;
  for (; n >= 8; n -= 8)
    if (p[i++] != 0xff) return false;
  if (n == 0) return true;  // not a byte past the field
  const uint8_t m = static_cast<uint8_t>(0xff << (8 - n));
  return (p[i] & m) == m;
}

// The order a lookup consults the tries in (OVS: the bridge's `prefixes`
// order, by default nw_dst then nw_src): the first that proves a miss
// decides which field's bits the miss costs.
constexpr unsigned kTrieOrder[kNumPrefixFields] = {kPrefixNwDst, kPrefixNwSrc, kPrefixIpv6Dst, kPrefixIpv6Src};

// The L4 ports as one 32-bit word, tp_src in the high half (Open vSwitch's
// TP_PORTS_OFS32 word, read in network order): what a subtable's ports trie
// holds.
constexpr size_t kPortsOffset = offsetof(FlowKey, tp_src);
static_assert(offsetof(FlowKey, tp_dst) == kPortsOffset + 2, "tp_src|tp_dst: one 32-bit word");
static_assert(kPortsOffset / 8 == KEEL_FLOW_WORD(tp_src) && kPortsOffset % 8 == 0,
              "the ports word is the first half of word 74, in the L4 (final) stage");

inline uint32_t get_ports(const FlowKey& k) noexcept {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(&k) + kPortsOffset;
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
inline void put_be32(uint8_t* p, uint32_t v) noexcept {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline void set_ports(FlowKey& k, uint32_t v) noexcept { put_be32(reinterpret_cast<uint8_t*>(&k) + kPortsOffset, v); }
inline uint32_t prefix_mask32(unsigned n) noexcept { return n ? ~uint32_t{0} << (32 - n) : 0; }

}  // namespace

// A set of rules with one masked match: their list, priority descending.
struct ClsGroup {
  std::atomic<ClsRule*> head{nullptr};
};

struct MaskWord {
  uint32_t word;  // index into FlowKey::words()
  uint64_t mask;
};

// One mask's rules. Everything above "writer only" is immutable after
// creation except through the RcuHashMaps' own protocol.
struct ClsSubtable {
  explicit ClsSubtable(datapath::Rcu* rcu) : rules(rcu) {}

  // Mask words in stage order (the stages are whole words).
  std::vector<MaskWord> words;
  unsigned n_stages = 0;                       // non-empty stages
  std::array<uint8_t, kStages> stage_end{};    // words[0, stage_end[s]) = stages 0..s
  int l3_stage = -1;                           // the stage holding L3 bits, if any
  std::array<uint8_t, kNumPrefixFields> plen{};  // tracked prefix length per field; 0 = none
  bool any_plen = false;
  // The ports trie (OVS's ports_trie) when the mask has bits in the ports
  // word: every rule's masked ports, as a prefix of ports_mask_len bits —
  // the word up to the mask's last bit (tp_dst=53 gives 32, tp_src=1000
  // gives 16, icmp_type=8 16). Per subtable, as the values of one mask.
  uint32_t ports_mask = 0;  // get_ports() of the mask
  unsigned ports_mask_len = 0;
  std::unique_ptr<PrefixTrie> ports_trie;
  RcuHashMap<ClsGroup*> rules;  // full masked-match hash -> group
  // index[s] (s < n_stages - 1): hashes of the groups' stages 0..s.
  std::array<std::unique_ptr<RcuHashMap<uint8_t>>, kStages - 1> index;

  // --- writer only ---
  FlowKey mask{};
  uint32_t mask_hash = 0;
  uint64_t seq = 0;  // creation order: ties of max priority keep it
  std::array<std::unordered_map<uint32_t, uint32_t>, kStages - 1> index_count;
  std::map<uint16_t, uint32_t> prio_count;  // priority -> rules
  uint32_t n_rules = 0;
  int max_priority() const { return prio_count.empty() ? -1 : prio_count.rbegin()->first; }

  // Hashes of stages 0..s of `key` for every s; out[n_stages - 1] (or out[0]
  // when there is no stage) keys `rules`.
  void stage_hashes(const FlowKey& key, uint32_t out[kStages]) const noexcept {
    const uint64_t* kw = key.words();
    uint32_t h = 0;
    unsigned k = 0;
    out[0] = hash_finish(0, 0);
    for (unsigned s = 0; s < n_stages; ++s) {
      for (; k < stage_end[s]; ++k) h = hash_add64(h, kw[words[k].word] & words[k].mask);
      out[s] = hash_finish(h, k * 8);
    }
  }
  uint32_t final_hash(const uint32_t hs[kStages]) const noexcept { return hs[n_stages ? n_stages - 1 : 0]; }

  bool key_equal(const FlowKey& a, const FlowKey& b) const noexcept {
    const uint64_t *aw = a.words(), *bw = b.words();
    for (const MaskWord& m : words)
      if ((aw[m.word] ^ bw[m.word]) & m.mask) return false;
    return true;
  }

  ClsGroup* find_group(uint32_t hash, const FlowKey& key) const {
    ClsGroup* found = nullptr;
    rules.find(hash, [&](ClsGroup* g) {
      const ClsRule* head = g->head.load(std::memory_order_relaxed);
      if (!head || !key_equal(head->match.key, key)) return false;
      found = g;
      return true;
    });
    return found;
  }
};

struct Classifier::SubtableList {
  struct Entry {
    int max_priority;
    const ClsSubtable* st;
  };
  std::vector<Entry> entries;  // max_priority descending
};

struct Classifier::TrieCtx {
  bool done = false;
  unsigned maskbits = 0;
  PlenSet matched;
};

bool ClsRule::is_loose_match(const flow::Match& filter) const noexcept {
  const uint64_t *fm = filter.mask.words(), *fk = filter.key.words();
  const uint64_t *rm = match.mask.words(), *rk = match.key.words();
  for (unsigned w = 0; w < kFlowWords; ++w)
    if ((fm[w] & ~rm[w]) || ((rk[w] ^ fk[w]) & fm[w])) return false;
  return true;
}

Classifier::Classifier(datapath::Rcu* rcu, unsigned prefix_fields) : rcu_(rcu) {
  for (unsigned f = 0; f < kNumPrefixFields; ++f)
    if (prefix_fields & (1u << f)) tries_[f] = std::make_unique<PrefixTrie>(kPrefixFieldInfo[f].n_bits, rcu);
  subtables_.store(new SubtableList, std::memory_order_release);
}

Classifier::~Classifier() {
  for (auto& [h, st] : by_mask_) {
    st->rules.for_each([](uint32_t, ClsGroup* g) { delete g; });
    delete st;
  }
  delete subtables_.load(std::memory_order_relaxed);
}

void Classifier::retire(std::function<void()> fn) {
  if (rcu_) rcu_->retire(std::move(fn));
  else fn();
}

ClsSubtable* Classifier::find_subtable(const FlowKey& mask, uint32_t mask_hash) const {
  auto [b, e] = by_mask_.equal_range(mask_hash);
  for (auto it = b; it != e; ++it)
    if (it->second->mask == mask) return it->second;
  return nullptr;
}

ClsSubtable* Classifier::create_subtable(const FlowKey& mask, uint32_t mask_hash) {
  auto* st = new ClsSubtable(rcu_);
  st->mask = mask;
  st->mask_hash = mask_hash;
  st->seq = next_subtable_seq_++;
  const auto& stages = stage_masks();
  const uint64_t* mw = mask.words();
  for (unsigned s = 0; s < kStages; ++s) {
    const size_t before = st->words.size();
    const uint64_t* sw = stages[s].words();
    for (unsigned w = 0; w < kFlowWords; ++w)
      if (mw[w] & sw[w]) st->words.push_back({w, mw[w] & sw[w]});
    if (st->words.size() == before) continue;
    if (s == kStageL3) st->l3_stage = static_cast<int>(st->n_stages);
    st->stage_end[st->n_stages++] = static_cast<uint8_t>(st->words.size());
  }
  for (unsigned s = 0; s + 1 < st->n_stages; ++s) st->index[s] = std::make_unique<RcuHashMap<uint8_t>>(rcu_);
  for (unsigned f = 0; f < kNumPrefixFields; ++f) {
    if (!tries_[f]) continue;
    st->plen[f] = static_cast<uint8_t>(cidr_plen(field_bytes(mask, f), kPrefixFieldInfo[f].n_bits));
    st->any_plen |= st->plen[f] != 0;
  }
  st->ports_mask = get_ports(mask);
  if (st->ports_mask) {
    st->ports_mask_len = 32 - static_cast<unsigned>(std::countr_zero(st->ports_mask));
    st->ports_trie = std::make_unique<PrefixTrie>(32, rcu_);
  }
  by_mask_.emplace(mask_hash, st);
  return st;
}

void Classifier::publish_subtables() {
  auto* list = new SubtableList;
  list->entries.reserve(by_mask_.size());
  std::vector<const ClsSubtable*> sts;
  for (auto& [h, st] : by_mask_) sts.push_back(st);
  std::sort(sts.begin(), sts.end(), [](const ClsSubtable* a, const ClsSubtable* b) {
    const int pa = a->max_priority(), pb = b->max_priority();
    return pa != pb ? pa > pb : a->seq < b->seq;
  });
  for (const ClsSubtable* st : sts) list->entries.push_back({st->max_priority(), st});
  const SubtableList* old = subtables_.exchange(list, std::memory_order_acq_rel);
  retire([old] { delete old; });
}

void Classifier::destroy_subtable(ClsSubtable* st) {
  auto [b, e] = by_mask_.equal_range(st->mask_hash);
  for (auto it = b; it != e; ++it)
    if (it->second == st) {
      by_mask_.erase(it);
      break;
    }
  publish_subtables();
  retire([st] { delete st; });
}

void Classifier::insert(ClsRule* rule, Version v) {
  assert(!rule->subtable_);
  rule->match.apply_mask();
  rule->add_version_ = v;
  rule->remove_version_.store(kVersionNotRemoved, std::memory_order_relaxed);
  const FlowKey& key = rule->match.key;
  const uint32_t mh = hash_words64(rule->match.mask.words(), kFlowWords, 0);
  ClsSubtable* st = find_subtable(rule->match.mask, mh);
  const bool created = st == nullptr;
  if (created) st = create_subtable(rule->match.mask, mh);

  uint32_t hs[kStages];
  st->stage_hashes(key, hs);
  const uint32_t hash = st->final_hash(hs);
  if (ClsGroup* g = st->find_group(hash, key)) {
    // Before the first rule of lower or equal priority (newest first).
    std::atomic<ClsRule*>* link = &g->head;
    ClsRule* cur;
    while ((cur = link->load(std::memory_order_relaxed)) && cur->priority > rule->priority) link = &cur->next_;
    rule->next_.store(cur, std::memory_order_relaxed);
    link->store(rule, std::memory_order_release);
  } else {
    for (unsigned s = 0; s + 1 < st->n_stages; ++s)
      if (st->index_count[s][hs[s]]++ == 0) st->index[s]->insert(hs[s], 1);
    auto* ng = new ClsGroup;
    rule->next_.store(nullptr, std::memory_order_relaxed);
    ng->head.store(rule, std::memory_order_relaxed);
    st->rules.insert(hash, ng);  // release: publishes ng and the rule
  }
  for (unsigned f = 0; f < kNumPrefixFields; ++f)
    if (st->plen[f]) tries_[f]->insert(field_bytes(key, f), st->plen[f]);
  if (st->ports_trie) {
    uint8_t ports[4];
    put_be32(ports, get_ports(key));  // masked: bits the mask leaves out are 0, as in every lookup value
    st->ports_trie->insert(ports, st->ports_mask_len);
  }

  rule->subtable_ = st;
  const int old_max = st->max_priority();
  ++st->prio_count[rule->priority];
  ++st->n_rules;
  ++n_rules_;
  if (created || rule->priority > old_max) publish_subtables();
}

void Classifier::remove(ClsRule* rule, Version v) noexcept {
  assert(rule->subtable_ && v >= rule->add_version_);
  rule->remove_version_.store(v, std::memory_order_relaxed);
}

void Classifier::restore(ClsRule* rule) noexcept {
  rule->remove_version_.store(kVersionNotRemoved, std::memory_order_relaxed);
}

void Classifier::erase(ClsRule* rule) noexcept {
  ClsSubtable* st = rule->subtable_;
  assert(st);
  if (!st) return;
  const FlowKey& key = rule->match.key;
  uint32_t hs[kStages];
  st->stage_hashes(key, hs);
  const uint32_t hash = st->final_hash(hs);
  ClsGroup* g = st->find_group(hash, key);
  assert(g);

  // Unlink; a reader standing on `rule` still follows its unchanged next_.
  std::atomic<ClsRule*>* link = &g->head;
  while (link->load(std::memory_order_relaxed) != rule) link = &link->load(std::memory_order_relaxed)->next_;
  link->store(rule->next_.load(std::memory_order_relaxed), std::memory_order_release);
  if (!g->head.load(std::memory_order_relaxed)) {
    st->rules.remove(hash, g);
    retire([g] { delete g; });
    for (unsigned s = 0; s + 1 < st->n_stages; ++s) {
      auto it = st->index_count[s].find(hs[s]);
      if (--it->second == 0) {
        st->index_count[s].erase(it);
        st->index[s]->remove(hs[s], 1);
      }
    }
  }
  for (unsigned f = 0; f < kNumPrefixFields; ++f)
    if (st->plen[f]) tries_[f]->remove(field_bytes(key, f), st->plen[f]);
  if (st->ports_trie) {
    uint8_t ports[4];
    put_be32(ports, get_ports(key));
    st->ports_trie->remove(ports, st->ports_mask_len);
  }

  rule->subtable_ = nullptr;
  --n_rules_;
  const int old_max = st->max_priority();
  auto pc = st->prio_count.find(rule->priority);
  if (--pc->second == 0) st->prio_count.erase(pc);
  if (--st->n_rules == 0) destroy_subtable(st);
  else if (st->max_priority() != old_max) publish_subtables();
}

ClsRule* Classifier::find_exactly(const flow::Match& match, uint16_t priority, Version v) const {
  flow::Match m = match;
  m.apply_mask();
  const ClsSubtable* st = find_subtable(m.mask, hash_words64(m.mask.words(), kFlowWords, 0));
  if (!st) return nullptr;
  uint32_t hs[kStages];
  st->stage_hashes(m.key, hs);
  const ClsGroup* g = st->find_group(st->final_hash(hs), m.key);
  if (!g) return nullptr;
  for (ClsRule* r = g->head.load(std::memory_order_relaxed); r; r = r->next_.load(std::memory_order_relaxed))
    if (r->priority == priority && r->visible_in(v)) return r;
  return nullptr;
}

std::vector<ClsRule*> Classifier::collect(const flow::Match* filter, Version v) const {
  std::vector<ClsRule*> out;
  for (const auto& [h, st] : by_mask_) {
    if (filter) {
      // Every rule here is at least as specific as filter only if the
      // subtable's mask covers the filter's.
      bool covers = true;
      for (unsigned w = 0; w < kFlowWords && covers; ++w)
        covers = (filter->mask.words()[w] & ~st->mask.words()[w]) == 0;
      if (!covers) continue;
    }
    st->rules.for_each([&](uint32_t, ClsGroup* g) {
      ClsRule* head = g->head.load(std::memory_order_relaxed);
      if (filter && !head->is_loose_match(*filter)) return;  // same masked match for the whole group
      for (ClsRule* r = head; r; r = r->next_.load(std::memory_order_relaxed))
        if (!filter || r->visible_in(v)) out.push_back(r);
    });
  }
  return out;
}

// ---------------------------------------------------------------- lookup --

const ClsRule* Classifier::lookup_subtable(const ClsSubtable& st, const FlowKey& flow, Version v, FlowKey* wc,
                                           TrieCtx* tries) const noexcept {
  const uint64_t* fw = flow.words();
  auto fold = [&](unsigned n_words) {
    if (!wc) return;
    uint64_t* ww = wc->words();
    for (unsigned i = 0; i < n_words; ++i) ww[st.words[i].word] |= st.words[i].mask;
  };
  uint32_t h = 0;
  unsigned k = 0;
  for (unsigned s = 0; s < st.n_stages; ++s) {
    if (static_cast<int>(s) == st.l3_stage && st.any_plen) {
      bool no_rule = false;  // some trie proved no rule here matches, but could not skip
      for (unsigned f : kTrieOrder) {
        const unsigned plen = st.plen[f];
        if (!plen) continue;
        TrieCtx& c = tries[f];
        if (!c.done) {
          c.maskbits = tries_[f]->lookup(field_bytes(flow, f), c.matched);
          c.done = true;
        }
        if (c.matched.test(plen)) continue;
        // No rule anywhere has a prefix of length plen that this address
        // starts with, and the address's first maskbits bits prove it. As
        // OVS's check_tries(): skip the subtable on those bits only if they
        // are no more than the subtable's own (maskbits <= plen) or already
        // in wc (the trie, shared by every subtable, must not cost a
        // megaflow bits this subtable wouldn't); otherwise try the next
        // field. A skip un-wildcards the stages before this one, as OVS's
        // no_match path does (they were consulted to get here).
        if (!wc) return nullptr;
        uint8_t* wf = reinterpret_cast<uint8_t*>(wc) + kPrefixFieldInfo[f].offset;
        if (c.maskbits <= plen) {
          set_prefix_bits(wf, c.maskbits);
          fold(k);
          return nullptr;
        }
        if (prefix_bits_set(wf, c.maskbits)) {
          fold(k);
          return nullptr;
        }
        no_rule = true;
      }
      if (no_rule) {
        // OVS goes on with the stage here, and its index misses: no rule of
        // this subtable has the packet's plen-bit prefix on that field. The
        // same outcome without hashing or probing: stages 0..s un-wildcarded
        // (they hold those plen bits), no match.
        fold(st.stage_end[s]);
        return nullptr;
      }
    }
    for (; k < st.stage_end[s]; ++k) h = hash_add64(h, fw[st.words[k].word] & st.words[k].mask);
    if (s + 1 < st.n_stages && !st.index[s]->contains(hash_finish(h, k * 8))) {
      fold(k);  // stages 0..s decided the miss
      return nullptr;
    }
  }
  const uint32_t hash = hash_finish(h, k * 8);
  const ClsRule* found = nullptr;
  st.rules.find(hash, [&](ClsGroup* g) {
    const ClsRule* r = g->head.load(std::memory_order_acquire);
    if (!r) return false;
    const uint64_t* rk = r->match.key.words();
    for (const MaskWord& m : st.words)
      if ((fw[m.word] ^ rk[m.word]) & m.mask) return false;
    for (; r; r = r->next_.load(std::memory_order_acquire))
      if (r->visible_in(v)) {
        found = r;
        break;
      }
    return true;
  });
  if (!found && st.ports_trie && wc) {
    // A miss at the final stage of a mask with ports: the whole mask was
    // consulted, but of the ports only the bits that tell this packet's
    // (masked) ports from every rule's are needed — the first maskbits of
    // the word, by the ports trie. Bits the trie adds are kept to what the
    // mask has; what other subtables put into the ports word stays.
    uint8_t value[4];
    put_be32(value, get_ports(flow) & st.ports_mask);
    PlenSet plens;
    const unsigned mbits = st.ports_trie->lookup(value, plens);
    const uint32_t before = get_ports(*wc);
    fold(static_cast<unsigned>(st.words.size()));
    set_ports(*wc, before | (st.ports_mask & prefix_mask32(mbits)));
    return nullptr;
  }
  fold(static_cast<unsigned>(st.words.size()));
  return found;
}

const ClsRule* Classifier::lookup(const FlowKey& flow, Version v, FlowKey* wc) const noexcept {
  const SubtableList* list = subtables_.load(std::memory_order_acquire);
  TrieCtx tries[kNumPrefixFields];
  const ClsRule* best = nullptr;
  for (const SubtableList::Entry& e : list->entries) {
    if (best && e.max_priority <= best->priority) break;  // nothing better further on
    const ClsRule* r = lookup_subtable(*e.st, flow, v, wc, tries);
    if (r && (!best || r->priority > best->priority)) best = r;
  }
  return best;
}

}  // namespace keel::ofproto

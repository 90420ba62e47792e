// Classifier — the OpenFlow rule classifier of one table: given a packet's
// flow key and a version, the highest-priority rule visible in that version
// whose match the packet satisfies, and the bits of the key that decision
// depended on (the wildcards of the megaflow that translation will install).
// The slow path's counterpart of the fast path's dpcls (datapath/dpcls.h):
// rules here overlap and have priorities; megaflows there do not.
//
// Design (Open vSwitch's lib/classifier.c is the model):
//   * Tuple-space search: one Subtable per distinct mask, holding its rules
//     in a hash table keyed by the masked match; rules with the same masked
//     match (different priorities, or the same priority in different
//     versions) form one priority-ordered list. Subtables are searched in
//     order of the highest priority they hold, and the search stops once the
//     best rule found has a priority >= the next subtable's maximum.
//   * Staged lookup: a subtable's mask is split into stages, Open vSwitch's
//     flow segments — metadata (tunnel, conntrack, in_port, registers...),
//     L2, L3 (addresses, IPv6 label, frag, tos, ttl, proto), L4 (ND target,
//     ARP/ND hardware addresses, tcp_flags, ports) — and for every stage but
//     the last the subtable keeps an index of the hashes of its rules'
//     masked fields up to that stage. A lookup hashes the packet stage by
//     stage and leaves the subtable at the first stage no rule has,
//     un-wildcarding only the stages up to there: `tcp,nw_tos=4,tp_dst=80`
//     against a packet with tos 0 consults nothing of L4.
//   * Prefix tracking: a PrefixTrie (prefix_trie.h) per address field
//     (nw_src, nw_dst, ipv6_src, ipv6_dst; the bridges track nw_dst and
//     nw_src, Open vSwitch's default) holds the prefixes of the rules of
//     every subtable whose mask on that field is a CIDR prefix. When a
//     lookup reaches the L3 stage of a subtable with prefix length p on such
//     a field, the trie shows that no rule's prefix of length p matches the
//     packet, and the trie's proof — the field's first maskbits bits — is no
//     wider than the subtable's own (maskbits <= p) or already in wc, the
//     subtable is skipped on those bits: a /8 rule costs a megaflow about 8
//     bits of the address, not 32. Otherwise the lookup goes on with the
//     stage (OVS's check_tries()). Fields are tried nw_dst, nw_src,
//     ipv6_dst, ipv6_src; the first that skips decides.
//   * Ports tracking: a subtable whose mask has bits in the 32-bit
//     tp_src|tp_dst word (ICMP type and code included) keeps its own 32-bit
//     PrefixTrie of its rules' masked ports, as prefixes of the mask's
//     length up to its last set bit (OVS's ports_trie, ports_mask_len). A
//     final-stage miss there un-wildcards of the ports only the bits that
//     tell the packet's masked ports from every rule's — `udp,tp_dst=53`
//     costs a packet to port 80 `tp_dst=0x40/0xffc0`, not all 16 bits. The
//     rest of the final stage (tcp_flags, nd_target) is un-wildcarded in
//     full: the trie proves only that no rule's ports match, and a packet
//     whose ports do match may miss on those fields (OVS 3.1 with "Fix
//     missing masks on a final stage with ports trie", CVE-2023-5366, as
//     Debian's 3.1.0-2+deb12u1 and upstream 3.1.1+ ship it).
//   * What goes into `wc`, per subtable examined: a hit, or a miss after
//     every stage, un-wildcards the subtable's whole mask — but on a
//     final-stage miss in a subtable with ports, of the ports word only the
//     ports trie's first maskbits bits under the mask (what other subtables
//     put there stays); a miss at stage i the mask's stages 0..i; a trie skip
//     at stage i the trie's bits and stages 0..i-1. A subtable not examined
//     (priority) adds nothing. Each is a proof that the subtable gives the
//     same answer for every packet equal to this one on `wc`, so the lookup
//     does too (subtables are searched in the same order with the same
//     outcomes). Index entries and trie prefixes (address and ports tries)
//     may belong to rules invisible in the lookup's version — a version not
//     yet published, or one removed but not yet erased; that only makes wc
//     narrower: such a prefix can only stop a skip or lengthen the trie's
//     proof, never make a rule that matches look absent.
//
// Rules. A ClsRule is embedded (intrusive) in the caller's rule object,
// best as its base class — struct OfRule : ofproto::ClsRule { ...actions,
// cookie, counters } — so that static_cast<const OfRule*> gets from a
// returned ClsRule* back to the caller's object (a member plus a pointer to
// its owner works too). The classifier never allocates, copies or frees a
// ClsRule;
// while inserted (from insert() to erase()) the caller must not change its
// match or priority nor move it.
//
// Versions. Each rule is visible to lookups with version v iff
//   add_version <= v < remove_version.
// The writer keeps a published version (version()); readers take it with
// version() and pass it to lookup(). A batch of changes is made with
// version N = version() + 1 — insert(rule, N), remove(rule, N) — and becomes
// visible atomically with publish(N): a reader sees either all of the batch
// or none of it. Rules removed with remove() stay in the tables and are
// still found by lookups with older versions; erase() unlinks them for good
// once no reader can use such a version (after publish(N) and an Rcu grace
// period — see erase()). Ties: among matching visible rules of equal
// priority the one returned is unspecified (as in OpenFlow and OVS; it
// depends on subtable order), but it is the same for every packet that
// agrees with the original on the returned wc.
//
// Memory. Internal nodes that a reader may be walking (hash-table nodes and
// arrays, trie nodes, subtables, the subtable list) are unlinked by the
// writer and freed through the datapath Rcu (datapath/rcu.h) after every
// reader slot has quiesced; with rcu == nullptr they are freed at once,
// which is right only without concurrent readers (unit tests, tools). A rule
// the caller erase()s may likewise still be read by an in-flight lookup:
// the caller frees it through the same Rcu (rcu.retire([r]{ delete r; })).
// Retire callbacks never refer to the Classifier, so the classifier may be
// destroyed with retirements pending; its destructor frees what is still
// linked (no reader may be inside) but not the rules.
//
// Thread-safety: one writer — insert, remove, restore, erase, publish,
// find_exactly, for_each_*, the destructor: the control thread, or whoever
// holds the control thread's role — and any number of lock-free readers:
// lookup() and version() from any thread that owns an Rcu slot and holds
// the returned pointers only until its next quiescent point. Nothing a
// reader does waits for the writer or for another reader; no lookup
// allocates, locks or throws. Memory ordering: every structure is fully
// built before the release store that links it; readers acquire every link
// they follow; rule fields other than remove_version and the internal list
// link never change while the rule is linked. publish() is a release store
// and version() an acquire load, so a reader that sees version N sees every
// change made for N.
//
// Costs (tests/bench/bench_classifier.cpp): a lookup hashes each stage of
// each subtable it examines (one CRC32-C step per mask word) and probes one
// small hash table per stage; address tries are walked once per lookup and
// field, a subtable's ports trie once per final-stage miss there (with wc).
// Insert/remove are O(stages + trie depth) plus an O(subtables) copy of the
// subtable list when the set of subtables or a maximum priority changes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "flow/flow_key.h"
#include "flow/match.h"
#include "ofproto/prefix_trie.h"

namespace keel::datapath {
class Rcu;
}

namespace keel::ofproto {

using Version = uint64_t;
inline constexpr Version kVersionMin = 0;
inline constexpr Version kVersionNotRemoved = UINT64_MAX;  // remove_version of a live rule

class Classifier;
struct ClsSubtable;  // classifier.cpp

struct ClsRule {
  flow::Match match;  // key & mask == key (insert() masks it)
  uint16_t priority = 0;

  ClsRule() = default;
  ClsRule(const flow::Match& m, uint16_t prio) : match(m), priority(prio) {}
  ClsRule(const ClsRule&) = delete;
  ClsRule& operator=(const ClsRule&) = delete;

  Version add_version() const noexcept { return add_version_; }
  Version remove_version() const noexcept { return remove_version_.load(std::memory_order_relaxed); }
  bool visible_in(Version v) const noexcept { return add_version_ <= v && v < remove_version(); }
  bool is_inserted() const noexcept { return subtable_ != nullptr; }

  // Is this rule's match at least as specific as `filter` (every packet it
  // matches also matches filter)? The "loose" test of OpenFlow flow-mods and
  // dump-flows without --strict.
  bool is_loose_match(const flow::Match& filter) const noexcept;

 private:
  friend class Classifier;
  Version add_version_ = kVersionMin;  // set by insert() before publication
  // Written by the writer (remove/restore) while readers read it; relaxed:
  // every value the writer stores is > any version a concurrent reader uses
  // (or is the one it replaces), so either value gives the reader the same
  // visibility.
  std::atomic<Version> remove_version_{kVersionNotRemoved};
  // Next rule with the same masked match, priority descending. Release
  // stores by the writer, acquire loads by readers.
  std::atomic<ClsRule*> next_{nullptr};
  ClsSubtable* subtable_ = nullptr;  // writer only
};

// Address fields with prefix tracking.
enum PrefixField : unsigned { kPrefixNwSrc = 0, kPrefixNwDst = 1, kPrefixIpv6Src = 2, kPrefixIpv6Dst = 3 };
inline constexpr unsigned kNumPrefixFields = 4;
inline constexpr unsigned kAllPrefixFields = (1u << kNumPrefixFields) - 1;
// What Open vSwitch tracks in every OpenFlow table unless configured
// otherwise (ofproto.c default_prefix_fields: nw_dst, nw_src); the bridges use it.
inline constexpr unsigned kOvsPrefixFields = (1u << kPrefixNwDst) | (1u << kPrefixNwSrc);

class Classifier {
 public:
  // rcu: where unlinked internal memory waits for readers (nullptr: freed at
  // once; no concurrent readers). prefix_fields: a bit mask of PrefixField
  // (1u << kPrefixNwDst, ...) to track; all four by default.
  explicit Classifier(datapath::Rcu* rcu = nullptr, unsigned prefix_fields = kAllPrefixFields);
  ~Classifier();
  Classifier(const Classifier&) = delete;
  Classifier& operator=(const Classifier&) = delete;

  // ------------------------------------------------------------ readers --
  // The highest-priority rule visible in `v` that `flow` matches, or
  // nullptr. ORs into *wc (when not null) the bits that decision consulted
  // (see the top of the file); never clears a bit of *wc.
  const ClsRule* lookup(const flow::FlowKey& flow, Version v, flow::FlowKey* wc) const noexcept;

  // The published version (acquire).
  Version version() const noexcept { return version_.load(std::memory_order_acquire); }

  // ------------------------------------------------------------- writer --
  // The version for the next batch of changes: version() + 1.
  Version next_version() const noexcept { return version_.load(std::memory_order_relaxed) + 1; }
  // Makes every change made with versions <= v visible to new lookups.
  // v must not be lower than version().
  void publish(Version v) noexcept { version_.store(v, std::memory_order_release); }

  // Links `rule` (not inserted, match and priority set), visible from
  // version v on. With concurrent readers v must exceed every version they
  // may use (next_version()). Masks rule->match.key. Cannot fail (memory
  // exhaustion aborts, as everywhere on the control path). Duplicates (same
  // match and priority) are allowed: the caller decides what replaces what,
  // usually by remove(old, v) + insert(new, v).
  void insert(ClsRule* rule, Version v);

  // Makes `rule` invisible from version v on (v > add_version; with
  // concurrent readers, v >= next_version()). It stays linked and visible to
  // older versions until erase().
  void remove(ClsRule* rule, Version v) noexcept;
  // Undoes remove() before the removal version was published.
  void restore(ClsRule* rule) noexcept;

  // Unlinks `rule` for good. Precondition: no lookup will again use a
  // version in [add_version, remove_version) of this rule — i.e. it was
  // remove()d with version N, N was published, and an Rcu grace period has
  // passed since (or there are no concurrent readers, or the rule was never
  // visible: remove_version == add_version). In-flight lookups may still be
  // reading the rule: free it through Rcu.
  void erase(ClsRule* rule) noexcept;

  // The rule with exactly this match and priority visible in v, or nullptr
  // ("strict" flow-mods).
  ClsRule* find_exactly(const flow::Match& match, uint16_t priority, Version v) const;

  // The rules visible in v whose match is at least as specific as `filter`
  // (ClsRule::is_loose_match; a catch-all filter gives every rule), in no
  // particular order. f(ClsRule*) is called after the whole set is
  // collected, so it may remove, insert or erase rules.
  template <typename F>
  void for_each_loose(const flow::Match& filter, Version v, F&& f) const {
    for (ClsRule* r : collect(&filter, v)) f(r);
  }
  // The rule with this match and priority visible in v, if any ("strict").
  template <typename F>
  void for_each_strict(const flow::Match& filter, uint16_t priority, Version v, F&& f) const {
    if (ClsRule* r = find_exactly(filter, priority, v)) f(r);
  }
  // Every rule linked (any version), for teardown.
  std::vector<ClsRule*> all_rules() const { return collect(nullptr, 0); }

  size_t n_rules() const noexcept { return n_rules_; }  // linked, any version
  size_t n_subtables() const noexcept { return by_mask_.size(); }
  bool empty() const noexcept { return n_rules_ == 0; }

 private:
  struct SubtableList;  // immutable snapshot, priority order
  struct TrieCtx;

  ClsSubtable* find_subtable(const flow::FlowKey& mask, uint32_t mask_hash) const;
  ClsSubtable* create_subtable(const flow::FlowKey& mask, uint32_t mask_hash);
  void destroy_subtable(ClsSubtable* st);
  void publish_subtables();  // rebuilds the snapshot from by_mask_
  const ClsRule* lookup_subtable(const ClsSubtable& st, const flow::FlowKey& flow, Version v,
                                 flow::FlowKey* wc, TrieCtx* tries) const noexcept;
  std::vector<ClsRule*> collect(const flow::Match* filter, Version v) const;
  void retire(std::function<void()> fn);

  datapath::Rcu* rcu_;
  std::atomic<Version> version_{kVersionMin};
  std::atomic<const SubtableList*> subtables_{nullptr};  // readers' entry point
  std::unique_ptr<PrefixTrie> tries_[kNumPrefixFields];  // null: field not tracked
  // Writer only.
  std::unordered_multimap<uint32_t, ClsSubtable*> by_mask_;  // mask hash -> subtable
  size_t n_rules_ = 0;
  uint64_t next_subtable_seq_ = 0;
};

}  // namespace keel::ofproto

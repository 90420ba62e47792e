// XlateDeps — what a translation's result depends on in the OpenFlow rule
// tables (every classifier lookup it made), and the rule the revalidator
// applies to decide whether a rule change may alter that result. With it a
// flow-mod re-translates the megaflows it can affect, not every megaflow of
// the bridge (issue 18: one add-flow that no installed flow could match
// re-translated all 100,000).
//
// The overlap rule. A megaflow M — key k, mask m, as installed — covers the
// packets P with P & m == k. Translating P is a walk of lookups (bridge B,
// table T, lookup key F(P)), and every P of M takes k's walk: the mask holds
// every bit the walk consulted, so each lookup returns the same rule (the
// megaflow's own premise). A rule change in (B, T) can change how some P of
// M is forwarded only at the first lookup on that walk whose result
// changes, which is a lookup in (B, T), and only if
//   * R was added (an add, or a modify's new version): R matches F(P) for
//     some P of M — R's match overlaps the set {F(P) : P in M} — and R can
//     win there: the lookup matched nothing, or R's priority is at least the
//     winner's (a tie may go either way);
//   * R was removed (a delete, expiry, a modify's or replacing add's old
//     version): R won that lookup. A rule that lost, or didn't match, never
//     decided anything.
// If no lookup of M's walk is affected, no packet of M forwards differently
// and M's ukey is left untouched (its mask may be wider than a fresh
// translation of k would give now — a rule it can't match may make the
// classifier consult more bits — but never wrong). Priority changes are a
// delete and an add in OpenFlow; a modify is both, so the flows whose lookup
// the old version won are re-translated, and those the new one may win.
//
// The set {F(P)}. Each lookup records the OpenFlow in_port it used (a
// resubmit may give another), the metadata and registers (every packet
// starts with zeros and actions write them with values fixed across M:
// constants, or fields a move un-wildcards into m), the rule that won and
// its priority, and which 64-bit words of the flow the actions had changed
// before the lookup (`dirty`). A word that is not dirty is the packet's own:
// its bits under m are k's for every P, the others may be anything. A dirty
// word may be anything: a set_field before a resubmit or goto_table makes
// the lookup's key differ from the megaflow's, so that table sees every
// change there unless in_port, the registers or the priority rule it out
// (conservative: exactness would mean tracking each write's provenance).
// Read from the key itself: a tunnel packet's ECN bits may be anything
// (translation marks CE from the outer header), its Geneve option words too
// (rules see tun_metadataN, the key the raw options); a packet from a
// non-tunnel port has all tunnel fields zero; a fragment's L4 ports are zero
// to the rules. The underlay bridge's lookups (a combined tunnel output,
// and the dry run that decides whether to combine) see an outer packet made
// from tunnel state and inner fields: there only in_port (LOCAL), the
// registers and the metadata are known — any change in a table the
// underlay looked up that could match LOCAL's packets re-translates.
//
// Not rule changes, and handled by the revalidator with generations (every
// flow that read them is re-translated): the MAC table (NORMAL), ports,
// bonds and the TLV map (Bridge::invalidate_translations), tunnel state
// (Translation::tnl_gen). keel has no groups or meters.
//
// Two levels, so a round after a flow-mod does work in proportion to the
// flows the change may touch: DepsFilter is a 16-byte summary kept in the
// ukey's hot part (tables looked up as a 64-bit bloom, the in_port every
// lookup used, the lowest winning priority); prefilter() answers from it
// alone for most flows a change can't affect (a rule on another in_port,
// in a table not visited, of a priority too low to win) without touching
// the ukey's cold part. may_affect() is the whole rule over the lookups and
// the megaflow, for what the filter can't rule out. Each lookup record is
// 48 bytes; a translation keeps at most kMaxLookups distinct ones (a longer
// walk: every change in any table counts — overflow).
//
// Thread-safety: value types and pure functions. Translation fills an
// XlateDeps on its own thread; once in a ukey, only the revalidator whose
// share holds the ukey's shard reads or replaces it (udpif.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "flow/flow_key.h"
#include "flow/match.h"
#include "ofproto/bridge.h"

namespace keel::ofproto {

// One lookup of a translation (see the top).
struct TableLookup {
  const Bridge* bridge = nullptr;
  const OfRule* winner = nullptr;  // null: no rule matched; compared, never read
  uint64_t dirty[2] = {0, 0};      // word w changed before the lookup: bit w % 64 of dirty[w / 64]
  uint32_t in_port = 0;            // the lookup key's in_port (OpenFlow)
  uint32_t md = 0;                 // 1 + index of its metadata/registers in XlateDeps; 0: all zero
  uint16_t priority = 0;           // the winner's (0 with no winner: anything may win)
  uint8_t table = 0;
  bool dirty_word(unsigned w) const { return (dirty[w / 64] >> (w % 64)) & 1; }
};

// The hot summary of an XlateDeps (16 bytes).
struct DepsFilter {
  static constexpr uint32_t kAnyPort = 0xffffffffu;
  uint64_t tables = 0;          // bit t % 64 for every table looked up (any bridge)
  uint32_t in_port = kAnyPort;  // the in_port of every lookup; kAnyPort: they differ, or none
  uint16_t min_priority = 0;    // the lowest winner priority (0 when a lookup matched nothing)
  uint8_t n_lookups = 0;        // saturates at 255
  bool all = false;             // overflow: every change counts
  bool operator==(const DepsFilter&) const = default;
};

// A logged change (Bridge::RuleChange) prepared for checking many flows.
struct RuleChangeCheck {
  explicit RuleChangeCheck(const Bridge::RuleChange& c);
  const OfRule* rule;
  flow::Match match;
  uint16_t priority;
  uint8_t table;
  bool removed;
  bool in_port_exact = false;  // the rule matches one in_port...
  uint32_t in_port = 0;        // ...this one
  uint8_t n_words = 0;         // the words match.mask has bits in
  uint8_t words[flow::kFlowWords];
};

class XlateDeps {
 public:
  static constexpr size_t kMaxLookups = 64;
  // Words of the flow the lookups always know (in_port/recirc_id, metadata, registers).
  static constexpr unsigned kInPortWord = KEEL_FLOW_WORD(in_port);
  static constexpr unsigned kMdWord = KEEL_FLOW_WORD(metadata);
  static constexpr unsigned kMdWords = 5;  // metadata, regs[0..7]
  static_assert(KEEL_FLOW_WORD(regs) == kMdWord + 1 && sizeof(flow::FlowKey::regs) == 4 * 8,
                "metadata and the registers are the 5 words after in_port");
  static_assert(kInPortWord + 1 == kMdWord, "in_port's word comes right before metadata's");

  // A lookup of `table` in `bridge` with key `flow` (in_port as the lookup
  // had it), won by `winner` (null: none); `base`: the flow as the packet
  // came (its words the actions have not changed stay the packet's), null:
  // every word counts as changed (the underlay's outer packet).
  void note(const Bridge* bridge, uint8_t table, const flow::FlowKey& flow, const flow::FlowKey* base,
            const OfRule* winner);
  // Adds another translation's lookups (a nested underlay pass).
  void merge(const XlateDeps& o);
  // Every change counts (a stand-in translation that can't say what it read).
  void set_all() { overflow_ = true; }
  bool overflow() const { return overflow_; }
  std::span<const TableLookup> lookups() const { return lookups_; }
  // The metadata and registers of a lookup (kMdWords words), null: zeros.
  const uint64_t* md(const TableLookup& l) const { return l.md ? &md_[(l.md - 1) * kMdWords] : nullptr; }
  DepsFilter filter() const;
  void clear();

 private:
  void add(const TableLookup& l, const uint64_t* md);
  std::vector<TableLookup> lookups_;
  std::vector<uint64_t> md_;
  bool overflow_ = false;
};

// What a ukey's hot summary says about a change: certainly not affected,
// or look at the lookups (may_affect).
enum class Affects : uint8_t { no, maybe };
inline Affects prefilter(const RuleChangeCheck& c, const DepsFilter& f) {
  if (f.all) return Affects::maybe;
  if (!((f.tables >> (c.table % 64)) & 1)) return Affects::no;  // no lookup in that table
  // Every lookup used another in_port: the rule matches none of their keys
  // (and, removed, can't have won any).
  if (c.in_port_exact && f.in_port != DepsFilter::kAnyPort && c.in_port != f.in_port) return Affects::no;
  // Added below every lookup's winner: it can't win any.
  if (!c.removed && c.priority < f.min_priority) return Affects::no;
  return Affects::maybe;
}

// The overlap rule (see the top): whether change `c`, made in `bridge`, may
// change how a packet of `megaflow` (key & mask as installed) whose
// translation made `deps`' lookups is forwarded.
bool may_affect(const RuleChangeCheck& c, const Bridge* bridge, const XlateDeps& deps,
                const flow::Match& megaflow);

}  // namespace keel::ofproto

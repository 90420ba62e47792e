// XlateDeps and the overlap rule: see xlate_deps.h.
#include "ofproto/xlate_deps.h"

#include <algorithm>
#include <cstring>

#include "flow/flow_text.h"

namespace keel::ofproto {

using flow::FlowKey;
using flow::kFlowWords;

namespace {

constexpr unsigned kTunnelWords = KEEL_FLOW_WORD(ct_state);   // words 0..39: the tunnel
constexpr unsigned kTunOptWord = KEEL_FLOW_WORD(tun_gbp_id);  // words 7..39: GBP, Geneve options
static_assert(kTunOptWord == 7 && offsetof(FlowKey, tun_opts) / 8 == 8, "options after word 7's GBP/length");
constexpr unsigned kNwTosWord = KEEL_FLOW_WORD(ipv6_label);
static_assert(offsetof(FlowKey, nw_tos) / 8 == kNwTosWord, "nw_tos lives in ipv6_label's word");
constexpr unsigned kTpWord = KEEL_FLOW_WORD(tp_src);
static_assert(offsetof(FlowKey, tp_dst) / 8 == kTpWord, "both L4 ports in one word");

// Word w of a FlowKey this file just wrote field by field, read through
// its bytes: through words() (a uint64_t* over the struct) the compiler
// may read the zeros of the initialization instead of the fields' stores
// (type punning; it did: kTpBits came out 0, and a first fragment's
// lookup was taken to see its L4 ports).
uint64_t word_of(const FlowKey& f, unsigned w) {
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const unsigned char*>(&f) + w * sizeof v, sizeof v);
  return v;
}

// A word's bits of a field, from a FlowKey with the field's bits set.
template <typename Set>
uint64_t word_bits(unsigned w, Set set) {
  FlowKey f{};
  set(f);
  return word_of(f, w);
}

const uint64_t kEcnBits = word_bits(kNwTosWord, [](FlowKey& f) { f.nw_tos = flow::text::kIpEcnMask; });
const uint64_t kTpBits = word_bits(kTpWord, [](FlowKey& f) { f.tp_src = f.tp_dst = 0xffff; });

bool is_tunnel_key(const FlowKey& k) { return k.tun_ipv4_dst != 0 || !flow::text::is_zero(k.tun_ipv6_dst); }

// Can some P of the megaflow (k, m) have a lookup key, as `l` saw it, that
// the change's match accepts? Only the words the match has bits in.
bool overlaps(const RuleChangeCheck& c, const TableLookup& l, const uint64_t* md, const FlowKey& k,
              const FlowKey& m) {
  const uint64_t* ck = c.match.key.words();
  const uint64_t* cm = c.match.mask.words();
  const bool tunnel = is_tunnel_key(k);
  const bool fragment = (k.nw_frag & m.nw_frag & flow::kFragAny) != 0;
  for (unsigned i = 0; i < c.n_words; ++i) {
    const unsigned w = c.words[i];
    uint64_t val, known;
    if (w == XlateDeps::kInPortWord) {
      FlowKey t{};
      t.in_port = l.in_port;      // the lookup's own (a resubmit may set another)
      t.recirc_id = k.recirc_id;  // exact in every megaflow
      val = word_of(t, w);
      known = ~uint64_t{0};
    } else if (w >= XlateDeps::kMdWord && w < XlateDeps::kMdWord + XlateDeps::kMdWords) {
      val = md ? md[w - XlateDeps::kMdWord] : 0;  // packets start with zeros; writes are fixed across M
      known = ~uint64_t{0};
    } else if (l.dirty_word(w)) {
      continue;  // changed by actions before the lookup: anything
    } else {
      val = k.words()[w];
      known = m.words()[w];
      if (w < kTunnelWords) {
        if (!tunnel) {
          val = 0;  // a packet from a non-tunnel port has no tunnel metadata
          known = ~uint64_t{0};
        } else if (w >= kTunOptWord) {
          known = 0;  // raw Geneve options in the key, tun_metadataN to the rules
        }
      }
      if (tunnel && w == kNwTosWord) known &= ~kEcnBits;  // xlate marks ECN CE from the outer header
      if (fragment && w == kTpWord) {                     // rules see a fragment without L4 ports
        val &= ~kTpBits;
        known |= kTpBits;
      }
    }
    if ((ck[w] ^ val) & cm[w] & known) return false;
  }
  return true;
}

}  // namespace

RuleChangeCheck::RuleChangeCheck(const Bridge::RuleChange& c)
    : rule(c.rule), match(c.match), priority(c.priority), table(c.table), removed(c.removed) {
  match.apply_mask();
  in_port_exact = match.mask.in_port == ~uint32_t{0};
  in_port = match.key.in_port;
  const uint64_t* mw = match.mask.words();
  for (unsigned w = 0; w < kFlowWords; ++w)
    if (mw[w]) words[n_words++] = static_cast<uint8_t>(w);
}

void XlateDeps::note(const Bridge* bridge, uint8_t table, const FlowKey& flow, const FlowKey* base,
                     const OfRule* winner) {
  TableLookup l;
  l.bridge = bridge;
  l.winner = winner;
  l.priority = winner ? winner->priority : 0;
  l.table = table;
  l.in_port = flow.in_port;
  const uint64_t* f = flow.words();
  for (unsigned w = 0; w < kFlowWords; ++w) {
    if (w >= kInPortWord && w < kMdWord + kMdWords) continue;  // always known (recorded apart)
    if (!base || f[w] != base->words()[w]) l.dirty[w / 64] |= uint64_t{1} << (w % 64);
  }
  uint64_t md[kMdWords];
  bool any = false;
  for (unsigned i = 0; i < kMdWords; ++i) any |= (md[i] = f[kMdWord + i]) != 0;
  add(l, any ? md : nullptr);
}

void XlateDeps::add(const TableLookup& l, const uint64_t* md) {
  if (overflow_) return;
  for (const TableLookup& o : lookups_) {
    if (o.bridge != l.bridge || o.table != l.table || o.winner != l.winner || o.in_port != l.in_port ||
        o.priority != l.priority || o.dirty[0] != l.dirty[0] || o.dirty[1] != l.dirty[1])
      continue;
    const uint64_t* om = this->md(o);
    if (!om && !md) return;  // the same lookup again (a resubmit loop): nothing new
    if (om && md && std::memcmp(om, md, kMdWords * sizeof(uint64_t)) == 0) return;
  }
  if (lookups_.size() == kMaxLookups) {  // too long a walk to keep: every change counts
    overflow_ = true;
    lookups_.clear();
    md_.clear();
    return;
  }
  TableLookup c = l;
  c.md = 0;
  if (md) {
    md_.insert(md_.end(), md, md + kMdWords);
    c.md = static_cast<uint32_t>(md_.size() / kMdWords);
  }
  lookups_.push_back(c);
}

void XlateDeps::merge(const XlateDeps& o) {
  if (o.overflow_) {
    overflow_ = true;
    lookups_.clear();
    md_.clear();
    return;
  }
  for (const TableLookup& l : o.lookups_) add(l, o.md(l));
}

void XlateDeps::clear() {
  lookups_.clear();
  md_.clear();
  overflow_ = false;
}

DepsFilter XlateDeps::filter() const {
  DepsFilter f;
  if (overflow_) {
    f.all = true;
    f.tables = ~uint64_t{0};
    f.n_lookups = 255;
    return f;
  }
  f.n_lookups = static_cast<uint8_t>(std::min<size_t>(lookups_.size(), 255));
  for (size_t i = 0; i < lookups_.size(); ++i) {
    const TableLookup& l = lookups_[i];
    f.tables |= uint64_t{1} << (l.table % 64);
    f.in_port = i == 0 || f.in_port == l.in_port ? l.in_port : DepsFilter::kAnyPort;
    f.min_priority = i == 0 ? l.priority : std::min(f.min_priority, l.priority);
  }
  return f;
}

bool may_affect(const RuleChangeCheck& c, const Bridge* bridge, const XlateDeps& deps,
                const flow::Match& megaflow) {
  if (deps.overflow()) return true;
  for (const TableLookup& l : deps.lookups()) {
    if (l.bridge != bridge || l.table != c.table) continue;
    if (c.removed) {
      if (l.winner == c.rule) return true;  // it decided this lookup
      continue;
    }
    if (l.winner && c.priority < l.priority) continue;  // can't beat the winner
    if (overlaps(c, l, deps.md(l), megaflow.key, megaflow.mask)) return true;
  }
  return false;
}

}  // namespace keel::ofproto

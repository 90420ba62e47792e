// OpenFlow classifier: priority order, overlapping masks, versions,
// loose/strict iteration, the megaflow masks lookups build (staged lookup,
// prefix tracking, ports tracking — each as Open vSwitch 3.1 builds them),
// a property test against a brute-force classifier
// (same answer, and a wc that is sufficient), 100k rules, and a reader
// looking up while the control thread changes rules (run under TSan by the
// tsan preset, which skips the single-threaded property and scale cases).
#include "ofproto/classifier.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "datapath/rcu.h"
#include "ofproto/prefix_trie.h"
#include "sanitizers.h"

using namespace keel::ofproto;
using keel::flow::FlowKey;
using keel::flow::Match;

namespace {

uint32_t ip(unsigned a, unsigned b, unsigned c, unsigned d) { return (a << 24) | (b << 16) | (c << 8) | d; }
uint32_t plen_mask(unsigned plen) { return plen ? ~0u << (32 - plen) : 0; }

// Builds an OpenFlow match field by field (host-order arguments).
struct MatchBuilder {
  Match m;
  MatchBuilder& in_port(uint32_t p) { return set(m.key.in_port, m.mask.in_port, p, ~0u); }
  MatchBuilder& reg0(uint32_t v, uint32_t mask) { return set(m.key.regs[0], m.mask.regs[0], v, mask); }
  MatchBuilder& dl_type(uint16_t t) { return set(m.key.dl_type, m.mask.dl_type, htons(t), uint16_t{0xffff}); }
  MatchBuilder& ipv4() { return dl_type(0x0800); }
  MatchBuilder& nw_src(uint32_t a, unsigned plen) { return set(m.key.nw_src, m.mask.nw_src, htonl(a), htonl(plen_mask(plen))); }
  MatchBuilder& nw_dst(uint32_t a, unsigned plen) { return set(m.key.nw_dst, m.mask.nw_dst, htonl(a), htonl(plen_mask(plen))); }
  MatchBuilder& nw_proto(uint8_t p) { return set(m.key.nw_proto, m.mask.nw_proto, p, uint8_t{0xff}); }
  MatchBuilder& tp_dst(uint16_t p) { return set(m.key.tp_dst, m.mask.tp_dst, htons(p), uint16_t{0xffff}); }
  MatchBuilder& tp_dst(uint16_t p, uint16_t mask) { return set(m.key.tp_dst, m.mask.tp_dst, htons(p), htons(mask)); }
  MatchBuilder& tp_src(uint16_t p, uint16_t mask = 0xffff) {
    return set(m.key.tp_src, m.mask.tp_src, htons(p), htons(mask));
  }
  // ICMP type/code: the low byte of tp_src/tp_dst, mask 0x00ff (as add-flow's icmp_type=).
  MatchBuilder& icmp_type(uint8_t t) { return set(m.key.tp_src, m.mask.tp_src, htons(t), htons(0x00ff)); }
  MatchBuilder& icmp_code(uint8_t c) { return set(m.key.tp_dst, m.mask.tp_dst, htons(c), htons(0x00ff)); }
  MatchBuilder& tcp_flags(uint16_t f, uint16_t mask) {
    return set(m.key.tcp_flags, m.mask.tcp_flags, htons(f), htons(mask));
  }
  MatchBuilder& nw_tos(uint8_t t) { return set(m.key.nw_tos, m.mask.nw_tos, t, uint8_t{0xff}); }
  MatchBuilder& dl_src_last(uint8_t b) { return set(m.key.dl_src.b[5], m.mask.dl_src.b[5], b, uint8_t{0xff}); }
  MatchBuilder& arp_sha_last(uint8_t b) { return set(m.key.arp_sha.b[5], m.mask.arp_sha.b[5], b, uint8_t{0xff}); }
  MatchBuilder& ipv6_dst(uint8_t first_byte, unsigned plen) {
    m.key.ipv6_dst.b[0] = first_byte;
    for (unsigned i = 0; i < plen; ++i) m.mask.ipv6_dst.b[i / 8] |= static_cast<uint8_t>(0x80 >> (i % 8));
    m.apply_mask();
    return *this;
  }
  template <typename T, typename V, typename M>
  MatchBuilder& set(T& key, T& mask, V v, M mk) {
    key = static_cast<T>(v & mk);
    mask = static_cast<T>(mk);
    return *this;
  }
  operator const Match&() const { return m; }
};
MatchBuilder match() { return {}; }

FlowKey packet(uint32_t in_port, uint16_t dl_type, uint32_t nw_src, uint32_t nw_dst, uint8_t proto,
               uint16_t tp_dst) {
  FlowKey k{};
  k.in_port = in_port;
  k.dl_dst = {{0, 1, 2, 3, 4, 5}};
  k.dl_src = {{0, 6, 7, 8, 9, 10}};
  k.dl_type = htons(dl_type);
  k.nw_src = htonl(nw_src);
  k.nw_dst = htonl(nw_dst);
  k.nw_proto = proto;
  k.nw_ttl = 64;
  k.tp_src = htons(1024);
  k.tp_dst = htons(tp_dst);
  return k;
}
FlowKey tcp_to(uint32_t nw_dst, uint16_t tp_dst, uint32_t in_port = 1) {
  return packet(in_port, 0x0800, ip(192, 168, 0, 1), nw_dst, 6, tp_dst);
}

// A caller's rule: the ClsRule is its base (static_cast gets back to it).
struct Rule : ClsRule {
  Rule(const Match& m, uint16_t prio, int id_) : ClsRule(m, prio), id(id_) {}
  ClsRule& cr = *this;  // the classifier's part, by name
  int id;
};
int id_of(const ClsRule* r) { return r ? static_cast<const Rule*>(r)->id : -1; }

bool matches(const ClsRule& r, const FlowKey& f) {
  const uint64_t *k = r.match.key.words(), *m = r.match.mask.words(), *w = f.words();
  for (unsigned i = 0; i < keel::flow::kFlowWords; ++i)
    if ((w[i] & m[i]) != k[i]) return false;
  return true;
}

// The brute-force classifier: the highest priority of a visible rule
// matching f, or -1.
int brute_priority(const std::vector<std::unique_ptr<Rule>>& rules, const FlowKey& f, Version v) {
  int best = -1;
  for (const auto& r : rules)
    if (r->cr.is_inserted() && r->cr.visible_in(v) && matches(r->cr, f)) best = std::max<int>(best, r->cr.priority);
  return best;
}

bool is_subset(const FlowKey& a, const FlowKey& b) {  // a's bits within b's
  for (unsigned i = 0; i < keel::flow::kFlowWords; ++i)
    if (a.words()[i] & ~b.words()[i]) return false;
  return true;
}

struct Table {
  explicit Table(unsigned prefix_fields = kAllPrefixFields) : cls(nullptr, prefix_fields) {}
  ~Table() {
    for (auto& r : rules)
      if (r->cr.is_inserted()) cls.erase(&r->cr);
  }
  Rule* add(const Match& m, uint16_t prio, Version v = 0) {
    rules.push_back(std::make_unique<Rule>(m, prio, static_cast<int>(rules.size())));
    cls.insert(&rules.back()->cr, v);
    return rules.back().get();
  }
  int lookup(const FlowKey& f, Version v = 0, FlowKey* wc = nullptr) const { return id_of(cls.lookup(f, v, wc)); }
  Classifier cls;
  std::vector<std::unique_ptr<Rule>> rules;
};

}  // namespace

TEST_CASE("priority order across overlapping masks") {
  Table t;
  t.add(match(), 0);                                                     // 0: catch-all
  t.add(match().ipv4(), 10);                                             // 1
  t.add(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8), 20);                  // 2
  t.add(match().ipv4().nw_proto(6).tp_dst(80), 30);                      // 3
  t.add(match().ipv4().nw_dst(ip(10, 1, 0, 0), 16).nw_proto(6), 15);     // 4: shadowed by 2
  t.add(match().in_port(7), 40);                                         // 5
  CHECK(t.cls.n_rules() == 6);
  CHECK(t.cls.n_subtables() == 6);
  CHECK(t.lookup(packet(1, 0x0806, 0, 0, 1, 0)) == 0);
  CHECK(t.lookup(tcp_to(ip(11, 0, 0, 1), 22)) == 1);
  CHECK(t.lookup(tcp_to(ip(10, 1, 0, 1), 22)) == 2);
  CHECK(t.lookup(tcp_to(ip(10, 1, 0, 1), 80)) == 3);
  CHECK(t.lookup(tcp_to(ip(10, 1, 0, 1), 80, 7)) == 5);
  CHECK(t.lookup(packet(7, 0x0806, 0, 0, 1, 0)) == 5);

  // Same masked match, different priorities: one group, best first.
  t.add(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8), 25);  // 6
  t.add(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8), 22);  // 7
  CHECK(t.cls.n_subtables() == 6);
  CHECK(t.lookup(tcp_to(ip(10, 1, 0, 1), 22)) == 6);
  t.cls.erase(&t.rules[6]->cr);
  CHECK(t.lookup(tcp_to(ip(10, 1, 0, 1), 22)) == 7);
  t.cls.erase(&t.rules[7]->cr);
  t.cls.erase(&t.rules[2]->cr);
  CHECK(t.lookup(tcp_to(ip(10, 1, 0, 1), 22)) == 4);
  t.cls.erase(&t.rules[4]->cr);
  CHECK(t.cls.n_subtables() == 4);  // emptied subtables go
  CHECK(t.lookup(tcp_to(ip(10, 1, 0, 1), 22)) == 1);
}

TEST_CASE("versions: removed rules stay visible to older versions, added ones are invisible before theirs") {
  Table t;
  Classifier& cls = t.cls;
  const Match m = match().ipv4().nw_dst(ip(10, 0, 0, 0), 8);
  CHECK(cls.version() == 0);
  const Version v1 = cls.next_version();
  Rule* a = t.add(m, 10, v1);
  CHECK(t.lookup(tcp_to(ip(10, 0, 0, 1), 80), 0) == -1);  // not yet
  cls.publish(v1);
  CHECK(t.lookup(tcp_to(ip(10, 0, 0, 1), 80), cls.version()) == a->id);

  // Replace a by b (same match and priority) in version 2.
  const Version v2 = cls.next_version();
  CHECK(v2 == 2);
  cls.remove(&a->cr, v2);
  Rule* b = t.add(m, 10, v2);
  CHECK(t.lookup(tcp_to(ip(10, 0, 0, 1), 80), v1) == a->id);
  CHECK(t.lookup(tcp_to(ip(10, 0, 0, 1), 80), v2) == b->id);
  CHECK(cls.find_exactly(m, 10, v1) == &a->cr);
  CHECK(cls.find_exactly(m, 10, v2) == &b->cr);
  CHECK(cls.find_exactly(m, 11, v2) == nullptr);
  cls.publish(v2);

  // Remove b in v3, then undo before publishing.
  cls.remove(&b->cr, 3);
  CHECK(t.lookup(tcp_to(ip(10, 0, 0, 1), 80), 3) == -1);
  cls.restore(&b->cr);
  CHECK(t.lookup(tcp_to(ip(10, 0, 0, 1), 80), 3) == b->id);

  // Once no reader uses v1, a goes for good; v1 lookups no longer find it.
  cls.erase(&a->cr);
  CHECK(!a->cr.is_inserted());
  CHECK(t.lookup(tcp_to(ip(10, 0, 0, 1), 80), v2) == b->id);
  CHECK(cls.n_rules() == 1);

  // A higher-priority rule in a new subtable, added in v4: only v4 sees it.
  Rule* c = t.add(match().ipv4().nw_proto(6), 50, 4);
  CHECK(t.lookup(tcp_to(ip(10, 0, 0, 1), 80), 3) == b->id);
  CHECK(t.lookup(tcp_to(ip(10, 0, 0, 1), 80), 4) == c->id);
}

TEST_CASE("loose and strict iteration") {
  Table t;
  Rule* r8 = t.add(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8), 10);
  Rule* r16 = t.add(match().ipv4().nw_dst(ip(10, 1, 0, 0), 16), 20);
  Rule* r32 = t.add(match().ipv4().nw_dst(ip(10, 1, 2, 3), 32).nw_proto(6).tp_dst(80), 30);
  Rule* arp = t.add(match().dl_type(0x0806), 40);
  Rule* other = t.add(match().ipv4().nw_dst(ip(11, 1, 0, 0), 16), 20);
  auto ids = [&](const Match& filter, Version v) {
    std::vector<int> out;
    t.cls.for_each_loose(filter, v, [&](ClsRule* r) { out.push_back(id_of(r)); });
    std::sort(out.begin(), out.end());
    return out;
  };
  CHECK(ids(match(), 0) == std::vector<int>{r8->id, r16->id, r32->id, arp->id, other->id});
  CHECK(ids(match().ipv4(), 0) == std::vector<int>{r8->id, r16->id, r32->id, other->id});
  CHECK(ids(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8), 0) == std::vector<int>{r8->id, r16->id, r32->id});
  CHECK(ids(match().ipv4().nw_dst(ip(10, 1, 0, 0), 16), 0) == std::vector<int>{r16->id, r32->id});
  CHECK(ids(match().ipv4().nw_proto(6), 0) == std::vector<int>{r32->id});
  CHECK(ids(match().dl_type(0x86dd), 0).empty());
  CHECK(r16->cr.is_loose_match(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8)));
  CHECK(!r8->cr.is_loose_match(match().ipv4().nw_dst(ip(10, 1, 0, 0), 16)));

  // Strict: same match and priority only.
  int n = 0;
  t.cls.for_each_strict(match().ipv4().nw_dst(ip(10, 1, 0, 0), 16), 20, 0, [&](ClsRule* r) {
    CHECK(r == &r16->cr);
    ++n;
  });
  t.cls.for_each_strict(match().ipv4().nw_dst(ip(10, 1, 0, 0), 16), 21, 0, [&](ClsRule*) { ++n; });
  t.cls.for_each_strict(match().ipv4().nw_dst(ip(10, 1, 0, 0), 15), 20, 0, [&](ClsRule*) { ++n; });
  CHECK(n == 1);

  // The callback may remove (del-flows): rules removed in v1 are not visited at v1.
  t.cls.for_each_loose(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8), 0, [&](ClsRule* r) { t.cls.remove(r, 1); });
  CHECK(ids(match(), 1) == std::vector<int>{arp->id, other->id});
  CHECK(ids(match(), 0).size() == 5);
  // ... and erase.
  t.cls.for_each_loose(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8), 0, [&](ClsRule* r) { t.cls.erase(r); });
  CHECK(t.cls.n_rules() == 2);
  CHECK(t.cls.all_rules().size() == 2);
}

// ---------------------------------------------------------------- masks --

TEST_CASE("wc: a single /8 rule un-wildcards dl_type and 8 bits of nw_dst") {
  Table t;
  t.add(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8), 10);
  FlowKey wc{};
  CHECK(t.lookup(tcp_to(ip(10, 1, 2, 3), 80), 0, &wc) == 0);
  FlowKey want{};
  want.dl_type = 0xffff;
  want.nw_dst = htonl(0xff000000);
  CHECK(wc == want);

  // A miss: the trie proves it with nw_dst's first 8 bits, and the stage
  // consulted before L3 (dl_type) is un-wildcarded, as OVS's no_match path.
  wc = FlowKey{};
  CHECK(t.lookup(tcp_to(ip(11, 1, 2, 3), 80), 0, &wc) == -1);
  want.nw_dst = htonl(0xff000000);
  CHECK(wc == want);
  wc = FlowKey{};
  CHECK(t.lookup(tcp_to(ip(192, 1, 2, 3), 80), 0, &wc) == -1);
  want.nw_dst = htonl(0x80000000);  // the first bit already differs
  CHECK(wc == want);
}

TEST_CASE("wc: /8 and /24 rules, a packet matching only the /8") {
  Table t;
  t.add(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8), 10);
  t.add(match().ipv4().nw_dst(ip(10, 1, 2, 0), 24), 20);
  FlowKey wc{};
  CHECK(t.lookup(tcp_to(ip(10, 9, 9, 9), 80), 0, &wc) == 0);
  // 10.9 leaves the trie's 10.1.2/24 branch at bit 12: 13 bits tell the /24
  // subtable can't match; the /8 hit adds dl_type and its own 8 bits.
  FlowKey want{};
  want.dl_type = 0xffff;
  want.nw_dst = htonl(0xfff80000);
  CHECK(wc == want);

  // Matching the /24: its mask only; the /8 subtable is skipped by priority.
  wc = FlowKey{};
  CHECK(t.lookup(tcp_to(ip(10, 1, 2, 9), 80), 0, &wc) == 1);
  want.nw_dst = htonl(0xffffff00);
  CHECK(wc == want);

  // Without prefix tracking the /24 subtable costs all its 24 bits.
  Table plain(0);
  plain.add(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8), 10);
  plain.add(match().ipv4().nw_dst(ip(10, 1, 2, 0), 24), 20);
  wc = FlowKey{};
  CHECK(plain.lookup(tcp_to(ip(10, 9, 9, 9), 80), 0, &wc) == 0);
  want.nw_dst = htonl(0xffffff00);
  CHECK(wc == want);
}

TEST_CASE("wc: staged lookup leaves L4 out when L3 already misses") {
  const Match rule = match().ipv4().nw_proto(6).nw_dst(ip(10, 0, 0, 1), 32).tp_dst(80);
  SUBCASE("without prefix tracking: the L3 stage index decides") {
    Table t(0);
    t.add(rule, 10);
    FlowKey wc{};
    CHECK(t.lookup(tcp_to(ip(10, 0, 0, 2), 80), 0, &wc) == -1);
    FlowKey want{};
    want.dl_type = 0xffff;
    want.nw_proto = 0xff;
    want.nw_dst = 0xffffffff;
    CHECK(wc == want);
    CHECK(wc.tp_dst == 0);

    // A non-IP packet leaves at the L2 stage: dl_type only.
    wc = FlowKey{};
    CHECK(t.lookup(packet(1, 0x0806, 0, ip(10, 0, 0, 1), 1, 0), 0, &wc) == -1);
    want = FlowKey{};
    want.dl_type = 0xffff;
    CHECK(wc == want);

    // Right address, wrong port: every stage was consulted.
    wc = FlowKey{};
    CHECK(t.lookup(tcp_to(ip(10, 0, 0, 1), 81), 0, &wc) == -1);
    CHECK(wc.tp_dst == 0xffff);
    CHECK(wc.nw_dst == 0xffffffff);
  }
  SUBCASE("with prefix tracking: 31 bits of nw_dst tell .2 from .1") {
    Table t;
    t.add(rule, 10);
    FlowKey wc{};
    CHECK(t.lookup(tcp_to(ip(10, 0, 0, 2), 80), 0, &wc) == -1);
    FlowKey want{};
    want.dl_type = 0xffff;  // the L2 stage, consulted before the trie
    want.nw_dst = htonl(0xfffffffe);
    CHECK(wc == want);
  }
}

TEST_CASE("wc: in_port-only rules un-wildcard in_port only") {
  Table t;
  t.add(match().in_port(1), 10);
  t.add(match().in_port(2), 10);
  FlowKey want{};
  want.in_port = ~0u;
  for (uint32_t port : {1u, 2u, 3u}) {
    FlowKey wc{};
    CHECK(t.lookup(tcp_to(ip(10, 0, 0, 1), 80, port), 0, &wc) == (port <= 2 ? static_cast<int>(port) - 1 : -1));
    CHECK(wc == want);
  }
}

TEST_CASE("wc: a lookup that misses everything") {
  Table t;
  t.add(match().in_port(5), 10);
  t.add(match().ipv4().nw_proto(6).nw_dst(ip(10, 0, 0, 1), 32).tp_dst(80), 20);
  t.add(match().ipv4().nw_src(ip(172, 16, 0, 0), 12), 30);
  FlowKey wc{};
  CHECK(t.lookup(packet(1, 0x0800, ip(192, 168, 0, 1), ip(192, 168, 0, 2), 17, 53), 0, &wc) == -1);
  // in_port from its subtable; the first bit of each address from the tries
  // and dl_type from the L2 stages before them.
  FlowKey want{};
  want.in_port = ~0u;
  want.dl_type = 0xffff;
  want.nw_dst = htonl(0x80000000);
  want.nw_src = htonl(0xc0000000);  // 192 vs 172: bit 1
  CHECK(wc == want);

  // A subtable skipped because of priority adds nothing.
  t.add(match(), 0);
  wc = FlowKey{};
  CHECK(t.lookup(packet(5, 0x0800, ip(192, 168, 0, 1), ip(192, 168, 0, 2), 17, 53), 0, &wc) == 0);
  CHECK(wc == want);  // the in_port=5 hit (priority 10) ends it before the catch-all
}

// ---------------------------------------------------------- ports trie --
// Every expected wc below is what Open vSwitch 3.1 un-wildcards for the same
// rules and packet (its ofproto/trace Megaflow line, checked live; see
// tests/conformance/layout's ports cases).

namespace {

FlowKey l4_packet(uint8_t proto, uint16_t tp_src, uint16_t tp_dst, uint16_t tcp_flags = 0) {
  FlowKey k = packet(1, 0x0800, ip(192, 168, 0, 1), ip(10, 0, 0, 1), proto, tp_dst);
  k.tp_src = htons(tp_src);
  k.tcp_flags = htons(tcp_flags);
  return k;
}
FlowKey udp_packet(uint16_t tp_src, uint16_t tp_dst) { return l4_packet(17, tp_src, tp_dst); }

// dl_type and nw_proto (the L2 and L3 stages of an L4 rule) plus these.
FlowKey l4_wc(uint16_t tp_src_mask, uint16_t tp_dst_mask, uint16_t tcp_flags_mask = 0) {
  FlowKey w{};
  w.dl_type = 0xffff;
  w.nw_proto = 0xff;
  w.tp_src = htons(tp_src_mask);
  w.tp_dst = htons(tp_dst_mask);
  w.tcp_flags = htons(tcp_flags_mask);
  return w;
}

constexpr uint16_t kSyn = 0x002, kAck = 0x010;

}  // namespace

TEST_CASE("wc: ports trie, udp,tp_dst=53 against packets to 80, 52, 53") {
  Table t;
  t.add(match().ipv4().nw_proto(17).tp_dst(53), 10);
  struct {
    uint16_t port;
    int want;
    uint16_t tp_dst_mask;
  } cases[] = {
      {80, -1, 0xffc0},      // 0x0050 leaves 0x0035 at bit 9 of tp_dst: OVS's tp_dst=0x40/0xffc0
      {52, -1, 0xffff},      // 0x34 vs 0x35: only the last bit tells them apart
      {53, 0, 0xffff},       // a hit: the whole mask
      {0x8035, -1, 0x8000},  // the first bit already differs
  };
  for (const auto& c : cases) {
    CAPTURE(c.port);
    FlowKey wc{};
    CHECK(t.lookup(udp_packet(4000, c.port), 0, &wc) == c.want);
    CHECK(wc == l4_wc(0, c.tp_dst_mask));  // tp_src: not in the mask, never un-wildcarded
  }
}

TEST_CASE("wc: ports trie, tp_src and tp_dst in one mask, and tp_src alone") {
  Table t;
  t.add(match().ipv4().nw_proto(17).tp_src(1000).tp_dst(53), 10);
  FlowKey wc{};
  CHECK(t.lookup(udp_packet(1000, 80), 0, &wc) == -1);
  CHECK(wc == l4_wc(0xffff, 0xffc0));  // tp_src=1000,tp_dst=0x40/0xffc0
  wc = FlowKey{};
  CHECK(t.lookup(udp_packet(999, 53), 0, &wc) == -1);
  CHECK(wc == l4_wc(0xfff8, 0));  // tp_src=0x3e0/0xfff8: tp_src alone tells 999 from 1000
  wc = FlowKey{};
  CHECK(t.lookup(udp_packet(1000, 53), 0, &wc) == 0);
  CHECK(wc == l4_wc(0xffff, 0xffff));

  // tp_src only: the trie tracks 16 bits, tp_dst is never consulted.
  Table s;
  s.add(match().ipv4().nw_proto(17).tp_src(1000), 10);
  wc = FlowKey{};
  CHECK(s.lookup(udp_packet(1001, 53), 0, &wc) == -1);
  CHECK(wc == l4_wc(0xffff, 0));
  wc = FlowKey{};
  CHECK(s.lookup(udp_packet(2000, 53), 0, &wc) == -1);
  CHECK(wc == l4_wc(0xfc00, 0));  // 0x07d0 vs 0x03e8: bit 5
}

TEST_CASE("wc: ports trie, a tp_dst prefix rule (tp_dst=0x1000/0xf000)") {
  Table t;
  t.add(match().ipv4().nw_proto(17).tp_dst(0x1000, 0xf000), 10);
  FlowKey wc{};
  CHECK(t.lookup(udp_packet(5, 0x1234), 0, &wc) == 0);
  CHECK(wc == l4_wc(0, 0xf000));
  wc = FlowKey{};
  CHECK(t.lookup(udp_packet(5, 0x2000), 0, &wc) == -1);
  CHECK(wc == l4_wc(0, 0xe000));  // 0x2 vs 0x1 differ at bit 2: tp_dst=0x2000/0xe000
  wc = FlowKey{};
  CHECK(t.lookup(udp_packet(5, 0x0100), 0, &wc) == -1);
  CHECK(wc == l4_wc(0, 0xf000));  // bit 3: all the mask has
}

TEST_CASE("wc: ports trie, TCP with tcp_flags in the mask: the rest of the final stage stays un-wildcarded") {
  // tcp_flags is in the final (L4) stage with the ports. A miss there
  // un-wildcards the whole final stage but the ports, which get the trie's
  // bits (OVS 3.1 with "classifier: Fix missing masks on a final stage with
  // ports trie", CVE-2023-5366): an ACK to port 80 must not get a megaflow
  // that a SYN to port 80 would hit.
  Table t;
  t.add(match().ipv4().nw_proto(6).tcp_flags(kSyn, kSyn).tp_dst(80), 10);
  FlowKey wc{};
  CHECK(t.lookup(l4_packet(6, 5, 80, kAck), 0, &wc) == -1);
  CHECK(wc == l4_wc(0, 0xffff, kSyn));  // tp_dst=80,tcp_flags=-syn
  wc = FlowKey{};
  CHECK(t.lookup(l4_packet(6, 5, 81, kSyn), 0, &wc) == -1);
  CHECK(wc == l4_wc(0, 0xffff, kSyn));  // tp_dst=81,tcp_flags=+syn
  wc = FlowKey{};
  CHECK(t.lookup(l4_packet(6, 5, 0x8050, kSyn), 0, &wc) == -1);
  CHECK(wc == l4_wc(0, 0x8000, kSyn));
  wc = FlowKey{};
  CHECK(t.lookup(l4_packet(6, 5, 80, kSyn | kAck), 0, &wc) == 0);
  CHECK(wc == l4_wc(0, 0xffff, kSyn));

  // A miss at L3 (nw_tos) consults nothing of L4, tcp_flags included.
  Table u;
  u.add(match().ipv4().nw_proto(6).nw_tos(4).tcp_flags(kSyn, kSyn).tp_dst(80), 10);
  wc = FlowKey{};
  CHECK(u.lookup(l4_packet(6, 5, 80, kSyn), 0, &wc) == -1);
  FlowKey want = l4_wc(0, 0);
  want.nw_tos = 0xff;
  CHECK(wc == want);
}

TEST_CASE("wc: ports trie, ICMP type and code (tp_src/tp_dst's low bytes)") {
  Table t;
  t.add(match().ipv4().nw_proto(1).icmp_type(8).icmp_code(0), 10);
  FlowKey wc{};
  CHECK(t.lookup(l4_packet(1, 0, 0), 0, &wc) == -1);
  CHECK(wc == l4_wc(0x00f8, 0));  // echo reply: icmp_type=0x0/0xf8, the code not consulted
  wc = FlowKey{};
  CHECK(t.lookup(l4_packet(1, 8, 1), 0, &wc) == -1);
  CHECK(wc == l4_wc(0x00ff, 0x00ff));
  wc = FlowKey{};
  CHECK(t.lookup(l4_packet(1, 8, 0), 0, &wc) == 0);
  CHECK(wc == l4_wc(0x00ff, 0x00ff));

  Table s;
  s.add(match().ipv4().nw_proto(1).icmp_type(8), 10);
  wc = FlowKey{};
  CHECK(s.lookup(l4_packet(1, 3, 3), 0, &wc) == -1);
  CHECK(wc == l4_wc(0x00f8, 0));
}

TEST_CASE("wc: ports trie follows rules added and removed, in versions") {
  Table t;
  Rule* r53 = t.add(match().ipv4().nw_proto(17).tp_dst(53), 10);
  auto tp_dst_mask = [&](uint16_t port, Version v, int want) {
    FlowKey wc{};
    CHECK(t.lookup(udp_packet(4000, port), v, &wc) == want);
    CHECK(wc.tp_src == 0);
    return ntohs(wc.tp_dst);
  };
  CHECK(tp_dst_mask(80, 0, -1) == 0xffc0);
  Rule* r67 = t.add(match().ipv4().nw_proto(17).tp_dst(67), 10);  // the same subtable
  CHECK(t.cls.n_subtables() == 1);
  CHECK(tp_dst_mask(80, 0, -1) == 0xfff0);  // 0x50 vs 0x43: bit 12
  t.cls.erase(&r67->cr);
  CHECK(tp_dst_mask(80, 0, -1) == 0xffc0);

  // A rule of a version not yet visible is in the trie already: lookups of
  // the older version get a narrower wc (all of tp_dst), never a wrong one.
  Rule* r81 = t.add(match().ipv4().nw_proto(17).tp_dst(81), 10, 2);
  CHECK(tp_dst_mask(80, 1, -1) == 0xffff);
  CHECK(tp_dst_mask(81, 1, -1) == 0xffff);  // the trie finds 81, the rule is invisible: still a miss
  CHECK(tp_dst_mask(81, 2, r81->id) == 0xffff);
  // Removed from version 3 on: older versions still see it, and the trie
  // keeps it until erase().
  t.cls.remove(&r81->cr, 3);
  CHECK(tp_dst_mask(81, 2, r81->id) == 0xffff);
  CHECK(tp_dst_mask(80, 3, -1) == 0xffff);
  t.cls.erase(&r81->cr);
  CHECK(tp_dst_mask(80, 3, -1) == 0xffc0);

  t.cls.erase(&r53->cr);
  CHECK(t.cls.n_subtables() == 0);
  FlowKey wc{};
  CHECK(t.lookup(udp_packet(4000, 80), 0, &wc) == -1);
  CHECK(wc == FlowKey{});
}

TEST_CASE("wc: ports trie, a final-stage miss adds to what other subtables put in the ports word") {
  Table t;
  t.add(match().ipv4().nw_proto(17).tp_src(7), 20);  // higher priority: searched first
  t.add(match().ipv4().nw_proto(17).tp_dst(53), 10);
  FlowKey wc{};
  CHECK(t.lookup(udp_packet(4000, 80), 0, &wc) == -1);
  // tp_src: 4000 = 0x0fa0 vs 7: bit 4; tp_dst: 0xffc0 from the second.
  CHECK(wc == l4_wc(0xf800, 0xffc0));
}

// ------------------------------------------------- stages, address tries --

TEST_CASE("wc: stages are Open vSwitch's segments: ARP hardware addresses and nd_target are L4") {
  Table t;
  t.add(match().dl_type(0x0806).nw_proto(1).arp_sha_last(9), 10);
  FlowKey arp = packet(1, 0x0806, ip(10, 0, 0, 1), ip(10, 0, 0, 2), 2, 0);  // a reply
  arp.tp_src = arp.tp_dst = 0;
  FlowKey wc{};
  CHECK(t.lookup(arp, 0, &wc) == -1);
  FlowKey want{};
  want.dl_type = 0xffff;
  want.nw_proto = 0xff;  // arp_op=2; arp_sha (L4) not consulted
  CHECK(wc == want);

  // icmp6,icmp_type=135,nd_target=fe80::1 against a solicitation for
  // another target: the final stage misses on nd_target and is
  // un-wildcarded, icmp_type (which matches) included.
  Table n;
  MatchBuilder b;
  b.dl_type(0x86dd).nw_proto(58).icmp_type(135);
  b.m.key.nd_target.b[0] = 0xfe;
  b.m.key.nd_target.b[1] = 0x80;
  b.m.key.nd_target.b[15] = 1;
  for (auto& x : b.m.mask.nd_target.b) x = 0xff;
  n.add(b, 10);
  FlowKey ns = packet(1, 0x86dd, 0, 0, 58, 0);
  ns.tp_src = htons(135);
  ns.nd_target = b.m.key.nd_target;
  ns.nd_target.b[15] = 3;
  wc = FlowKey{};
  CHECK(n.lookup(ns, 0, &wc) == -1);
  want = FlowKey{};
  want.dl_type = 0xffff;
  want.nw_proto = 0xff;
  want.tp_src = htons(0x00ff);
  for (auto& x : want.nd_target.b) x = 0xff;
  CHECK(wc == want);
}

TEST_CASE("wc: address tries skip a subtable as OVS's check_tries() does") {
  SUBCASE("a trie proof wider than the subtable's prefix does not skip") {
    // 10.2.0.0 leaves the trie at bit 14 (of 10.1/16): 15 bits prove the
    // /8 subtable can't match, more than its own 8, so it is looked up
    // (its L3 index misses: nw_tos and the /8 un-wildcarded); the /16
    // subtable is skipped on the 15 bits. OVS: nw_dst=10.2.0.0/15,nw_tos=0.
    Table t(kOvsPrefixFields);
    t.add(match().ipv4().nw_tos(4).nw_dst(ip(11, 0, 0, 0), 8), 10);
    t.add(match().ipv4().nw_dst(ip(10, 1, 0, 0), 16), 5);
    FlowKey wc{};
    CHECK(t.lookup(tcp_to(ip(10, 2, 0, 0), 80), 0, &wc) == -1);
    FlowKey want{};
    want.dl_type = 0xffff;
    want.nw_tos = 0xff;
    want.nw_dst = htonl(0xfffe0000);
    CHECK(wc == want);
  }
  SUBCASE("nw_dst is tried before nw_src") {
    Table t(kOvsPrefixFields);
    t.add(match().ipv4().nw_src(ip(10, 0, 0, 0), 8).nw_dst(ip(20, 0, 0, 0), 8), 10);
    FlowKey wc{};
    CHECK(t.lookup(packet(1, 0x0800, ip(11, 0, 0, 1), ip(21, 0, 0, 1), 17, 2), 0, &wc) == -1);
    FlowKey want{};
    want.dl_type = 0xffff;
    want.nw_dst = htonl(0xff000000);  // 21 vs 20: bit 7; nw_src not consulted
    CHECK(wc == want);
  }
  SUBCASE("a skip un-wildcards the stages before L3") {
    Table t(kOvsPrefixFields);
    t.add(match().ipv4().dl_src_last(10).nw_dst(ip(10, 0, 0, 0), 8), 10);
    FlowKey wc{};
    CHECK(t.lookup(tcp_to(ip(11, 0, 0, 1), 80), 0, &wc) == -1);  // dl_src ends in 10: L2 hits
    FlowKey want{};
    want.dl_src.b[5] = 0xff;
    want.dl_type = 0xffff;
    want.nw_dst = htonl(0xff000000);
    CHECK(wc == want);
  }
}

TEST_CASE("prefix trie: matched lengths and examined bits") {
  PrefixTrie trie(32, nullptr);
  auto be = [](uint32_t a) {
    std::array<uint8_t, 4> b{};
    for (int i = 0; i < 4; ++i) b[i] = static_cast<uint8_t>(a >> (24 - 8 * i));
    return b;
  };
  auto look = [&](uint32_t a, unsigned* bits) {
    PlenSet s;
    auto b = be(a);
    *bits = trie.lookup(b.data(), s);
    std::vector<unsigned> out;
    for (unsigned p = 0; p <= 32; ++p)
      if (s.test(p)) out.push_back(p);
    return out;
  };
  unsigned bits = 99;
  CHECK(look(ip(10, 0, 0, 1), &bits).empty());
  CHECK(bits == 0);
  const uint32_t prefixes[][2] = {{ip(10, 0, 0, 0), 8}, {ip(10, 1, 0, 0), 16}, {ip(10, 1, 2, 0), 24},
                                  {ip(10, 1, 2, 3), 32}, {ip(128, 0, 0, 0), 1}, {ip(10, 1, 0, 0), 16}};
  for (auto& p : prefixes) trie.insert(be(p[0]).data(), p[1]);
  CHECK(look(ip(10, 1, 2, 3), &bits) == std::vector<unsigned>{8, 16, 24, 32});
  CHECK(bits == 32);
  CHECK(look(ip(10, 1, 2, 4), &bits) == std::vector<unsigned>{8, 16, 24});
  CHECK(bits == 30);
  CHECK(look(ip(10, 2, 0, 0), &bits) == std::vector<unsigned>{8});
  CHECK(bits == 15);
  CHECK(look(ip(200, 0, 0, 0), &bits) == std::vector<unsigned>{1});
  CHECK(bits == 1);  // the /1 is a leaf
  for (auto& p : prefixes) trie.remove(be(p[0]).data(), p[1]);
  CHECK(trie.empty());
}

// ------------------------------------------------------------- property --

namespace {

// Random rules and flows over small value pools, so that they overlap.
struct Gen {
  std::mt19937_64 rng;
  bool catchalls = true;  // may rules match every packet?
  explicit Gen(uint64_t seed) : rng(seed) {}
  unsigned below(unsigned n) { return static_cast<unsigned>(rng() % n); }

  uint32_t addr() {
    static const uint32_t pool[] = {ip(10, 0, 0, 1),   ip(10, 0, 0, 2),  ip(10, 1, 2, 3),  ip(10, 1, 200, 3),
                                    ip(10, 128, 0, 1), ip(11, 0, 0, 1),  ip(192, 168, 1, 1), ip(192, 168, 2, 1),
                                    ip(172, 16, 5, 5), ip(0, 0, 0, 1)};
    uint32_t a = pool[below(10)];
    if (below(4) == 0) a ^= static_cast<uint32_t>(rng()) >> below(32);  // nearby addresses
    return a;
  }
  Match rule_match() {
    MatchBuilder b;
    if (below(4) == 0) b.in_port(1 + below(3));
    if (below(6) == 0) b.reg0(below(4), below(2) ? 0xf : 0x5);  // non-CIDR masks too
    unsigned kind = below(8);
    if (kind == 0) return b.dl_type(0x0806);
    if (kind == 1 && catchalls) return b;
    if (kind == 2) return b.dl_type(0x86dd).ipv6_dst(static_cast<uint8_t>(below(2) ? 0xfe : 0x20), 1 + below(16));
    b.ipv4();
    static const unsigned plens[] = {0, 1, 8, 12, 16, 24, 31, 32};
    if (below(2)) b.nw_dst(addr(), plens[below(8)]);
    if (below(3) == 0) b.nw_src(addr(), plens[below(8)]);
    if (below(2)) {
      const unsigned proto = below(5);
      if (proto == 0) {  // ICMP: type/code in tp_src/tp_dst's low bytes
        b.nw_proto(1).icmp_type(static_cast<uint8_t>(below(2) ? 8 : 0));
        if (below(2)) b.icmp_code(static_cast<uint8_t>(below(2)));
        return b;
      }
      b.nw_proto(proto <= 2 ? 6 : 17);
      if (below(2)) b.tp_dst(port());
      if (below(4) == 0) b.tp_dst(port(), static_cast<uint16_t>(~0u << (16 - 1 - below(16))));  // prefixes
      if (below(4) == 0) b.tp_src(port(), below(2) ? 0xffff : 0xff00);
      if (proto <= 2 && below(3) == 0) b.tcp_flags(below(2) ? 0x002 : 0x010, below(2) ? 0x012 : 0x002);
    }
    return b;
  }
  uint16_t port() {
    static const uint16_t pool[] = {80, 81, 443, 53, 0x1000, 0x8050, 1000};
    uint16_t p = pool[below(7)];
    if (below(4) == 0) p ^= static_cast<uint16_t>(1u << below(16));  // nearby ports
    return p;
  }
  FlowKey flow() {
    const uint16_t types[] = {0x0800, 0x0800, 0x0806, 0x86dd, 0x88cc};  // no rule has LLDP
    static const uint8_t protos[] = {6, 6, 17, 17, 1};
    FlowKey k = packet(1 + below(4), types[below(5)], addr(), addr(), protos[below(5)], port());
    k.tp_src = htons(port());
    k.tcp_flags = htons(static_cast<uint16_t>(below(2) ? 0x002 : 0x012));
    if (k.nw_proto == 1) {
      k.tp_src = htons(static_cast<uint16_t>(below(3) ? 8 : below(256)));
      k.tp_dst = htons(static_cast<uint16_t>(below(2)));
    }
    k.regs[0] = below(16);
    k.ipv6_dst.b[0] = static_cast<uint8_t>(below(2) ? 0xfe : 0x20);
    k.ipv6_dst.b[1] = static_cast<uint8_t>(rng());
    return k;
  }
};

}  // namespace

TEST_CASE("property: same answer as a brute-force classifier, and a sufficient wc" *
          doctest::skip(keel::test::kThreadSanitizer)) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    CAPTURE(seed);
    Gen g(seed);
    g.catchalls = seed % 2 == 0;
    Table t(seed % 3 == 0 ? 0 : kAllPrefixFields);
    // Rules in versions 1..4; some removed in later versions.
    for (int i = 0; i < 300; ++i) {
      Rule* r = t.add(g.rule_match(), static_cast<uint16_t>(g.below(60)), 1 + g.below(4));
      if (g.below(5) == 0) t.cls.remove(&r->cr, r->cr.add_version() + 1 + g.below(3));
    }
    // And some erased for good.
    for (auto& r : t.rules)
      if (g.below(10) == 0) t.cls.erase(&r->cr);

    unsigned hits = 0, checked = 0;
    for (int i = 0; i < 3000; ++i) {
      const FlowKey x = g.flow();
      const Version v = 1 + g.below(6);
      FlowKey wc{};
      const ClsRule* r = t.cls.lookup(x, v, &wc);
      const int want = brute_priority(t.rules, x, v);
      REQUIRE((r ? static_cast<int>(r->priority) : -1) == want);
      if (r) {
        ++hits;
        REQUIRE(matches(*r, x));
        REQUIRE(r->visible_in(v));
        REQUIRE(is_subset(r->match.mask, wc));
      }
      // Sufficiency: any flow equal to x on wc gets the same answer.
      for (int j = 0; j < 8; ++j) {
        FlowKey y = g.flow();
        if (j & 1)
          for (unsigned w = 0; w < keel::flow::kFlowWords; ++w) y.words()[w] ^= g.rng() & g.rng();
        for (unsigned w = 0; w < keel::flow::kFlowWords; ++w)
          y.words()[w] = (x.words()[w] & wc.words()[w]) | (y.words()[w] & ~wc.words()[w]);
        const int want_y = brute_priority(t.rules, y, v);
        REQUIRE((r ? static_cast<int>(r->priority) : -1) == want_y);
        if (r) REQUIRE(matches(*r, y));
        ++checked;
      }
    }
    MESSAGE("seed " << seed << ": " << t.cls.n_rules() << " rules, " << t.cls.n_subtables() << " subtables, "
                    << hits << "/3000 hits, " << checked << " wc checks");
    CHECK(hits > 300);
    CHECK((hits < 3000 || g.catchalls));
  }
}

// ---------------------------------------------------------------- scale --

TEST_CASE("100k rules: insert, look up, remove" * doctest::skip(keel::test::kThreadSanitizer)) {
  constexpr unsigned kRules = 100000;
  Classifier cls;
  std::vector<std::unique_ptr<Rule>> rules;
  rules.reserve(kRules);
  std::mt19937 rng(42);
  // 16 masks: nw_dst /16../23, UDP without and TCP with tp_dst; the top 3
  // bits of nw_dst carry the prefix length, so no two rules overlap.
  std::vector<FlowKey> flows;
  flows.reserve(kRules);
  const auto t0 = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < kRules; ++i) {
    const unsigned g = i % 16, plen = 16 + g % 8;
    const bool tcp = g >= 8;
    const uint32_t addr = ((g % 8) << 29) | (((i / 16) << (32 - plen)) & 0x1fffffff);
    const uint16_t port = static_cast<uint16_t>(1000 + i % 500);
    MatchBuilder b;
    b.ipv4().nw_dst(addr, plen).nw_proto(tcp ? 6 : 17);
    if (tcp) b.tp_dst(port);
    rules.push_back(std::make_unique<Rule>(b, static_cast<uint16_t>(rng() % 1000), static_cast<int>(i)));
    cls.insert(&rules.back()->cr, 0);
    flows.push_back(packet(1, 0x0800, ip(1, 2, 3, 4), addr | (rng() & ~plen_mask(plen)), tcp ? 6 : 17, port));
  }
  const auto t1 = std::chrono::steady_clock::now();
  CHECK(cls.n_rules() == kRules);
  CHECK(cls.n_subtables() == 16);
  unsigned found = 0;
  for (unsigned i = 0; i < kRules; ++i) found += cls.lookup(flows[i], 0, nullptr) == &rules[i]->cr;
  const auto t2 = std::chrono::steady_clock::now();
  CHECK(found == kRules);
  for (auto& r : rules) {
    cls.remove(&r->cr, 1);
    cls.erase(&r->cr);
  }
  const auto t3 = std::chrono::steady_clock::now();
  CHECK(cls.n_rules() == 0);
  CHECK(cls.n_subtables() == 0);
  CHECK(cls.lookup(flows[0], 1, nullptr) == nullptr);
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  MESSAGE("100k rules: insert " << ms(t1 - t0) << " ms, lookup " << ms(t2 - t1) << " ms, remove " << ms(t3 - t2)
                                << " ms");
}

// ---------------------------------------------------------- concurrency --

TEST_CASE("a reader looks up while the control thread inserts and removes rules") {
  keel::datapath::Rcu rcu;
  const unsigned slot = rcu.register_slot();
  Classifier cls(&rcu);
  // Always there: a catch-all and 10/8 at priority 100.
  Rule base(match(), 0, 1000000), ten(match().ipv4().nw_dst(ip(10, 0, 0, 0), 8), 100, 1000001);
  cls.insert(&base.cr, 1);
  cls.insert(&ten.cr, 1);
  cls.publish(1);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lookups{0}, errors{0};
  std::thread reader([&] {
    rcu.online(slot);
    Gen g(99);
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 16; ++i) {
        FlowKey x = g.flow();
        const bool in_ten = g.below(2);
        if (in_ten) {
          x.dl_type = htons(0x0800);
          x.nw_dst = htonl(ip(10, 0, 0, 0) | (g.below(1 << 24)));
        }
        const Version v = cls.version();
        FlowKey wc{};
        const ClsRule* r = cls.lookup(x, v, &wc);
        bool ok = r && r->visible_in(v) && matches(*r, x) && is_subset(r->match.mask, wc);
        if (ok && in_ten) ok = r->priority >= 100;
        if (!ok) errors.fetch_add(1, std::memory_order_relaxed);
        lookups.fetch_add(1, std::memory_order_relaxed);
      }
      rcu.quiesce(slot);  // holds nothing from here on
    }
    rcu.offline(slot);
  });

  Gen g(7);
  std::vector<Rule*> live;
  for (int round = 0; round < 200; ++round) {
    // Add a batch in the next version.
    const Version v = cls.next_version();
    for (int i = 0; i < 20; ++i) {
      auto* r = new Rule(g.rule_match(), static_cast<uint16_t>(g.below(200)), round * 100 + i);
      cls.insert(&r->cr, v);
      live.push_back(r);
    }
    cls.publish(v);
    // Remove about half in the following one, then erase them once no
    // reader can use an older version, and free them after the readers
    // that might still hold them have quiesced.
    const Version v2 = cls.next_version();
    std::vector<Rule*> gone;
    for (size_t i = 0; i < live.size();) {
      if (g.below(2)) {
        cls.remove(&live[i]->cr, v2);
        gone.push_back(live[i]);
        live[i] = live.back();
        live.pop_back();
      } else {
        ++i;
      }
    }
    cls.publish(v2);
    rcu.synchronize();  // every reader now uses v2 or later
    for (Rule* r : gone) {
      cls.erase(&r->cr);
      rcu.retire([r] { delete r; });
    }
    rcu.reclaim();
  }
  // Let the reader run at least a little against the final state.
  const uint64_t seen = lookups.load();
  while (lookups.load() < seen + 100) std::this_thread::yield();
  stop.store(true);
  reader.join();
  for (Rule* r : live) {
    cls.erase(&r->cr);
    rcu.retire([r] { delete r; });
  }
  cls.erase(&base.cr);
  cls.erase(&ten.cr);
  rcu.synchronize();
  CHECK(errors.load() == 0);
  CHECK(lookups.load() > 100);
  CHECK(cls.empty());
  MESSAGE(lookups.load() << " concurrent lookups");
}

// Dpcls: insert / find / remove, subtables per mask, first match in rank
// order, resort by hits, info() and the lookup function it names, bursts of
// 32, counters, the force-generic hook.
#include "datapath/dpcls.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "flow/flow_key.h"

using namespace keel::datapath;
using keel::flow::FlowKey;
using keel::flow::Miniflow;

namespace {

// Dpcls::info() into an array of the right size, as dpcls-show does.
std::vector<SubtableInfo> infos(const Dpcls& cls) {
  std::vector<SubtableInfo> v(cls.n_subtables());
  const size_t n = cls.info(v);
  REQUIRE(n == v.size());
  return v;
}

Miniflow mf_of(const FlowKey& k) {
  Miniflow mf;
  REQUIRE(keel::flow::compress(k, mf));
  return mf;
}

// A parsed UDP/IPv4 packet's key (the words the parser fills).
FlowKey udp_packet(uint32_t in_port, uint32_t nw_dst, uint16_t tp_dst, uint32_t nw_src = 0x0a000001) {
  FlowKey k{};
  k.in_port = in_port;
  k.dl_dst = {{0, 1, 2, 3, 4, 5}};
  k.dl_src = {{0, 6, 7, 8, 9, 10}};
  k.dl_type = htons(0x0800);
  k.nw_src = htonl(nw_src);
  k.nw_dst = htonl(nw_dst);
  k.nw_proto = 17;
  k.nw_ttl = 64;
  k.tp_src = htons(1024);
  k.tp_dst = htons(tp_dst);
  return k;
}

// The mask of recirc_id,in_port,eth_type,ipv4(dst=x/plen,frag=no)[,udp(dst)]:
// words 50, 60 | 64, 69 [, 74] -> shape (2,2) or (2,3).
FlowKey megaflow_mask(unsigned plen, bool tp_dst) {
  FlowKey m{};
  m.in_port = ~0u;
  m.recirc_id = ~0u;
  m.dl_type = 0xffff;
  m.nw_dst = htonl(plen ? ~0u << (32 - plen) : 0);
  m.nw_frag = 0xff;
  m.nw_proto = 0xff;
  if (tp_dst) m.tp_dst = 0xffff;
  return m;
}

void* flow_id(uintptr_t i) { return reinterpret_cast<void*>(i); }

}  // namespace

TEST_CASE("insert, find, lookup, remove one megaflow; a duplicate is refused") {
  Dpcls cls;
  const Miniflow mask = mf_of(megaflow_mask(16, false));
  const Miniflow pkt = mf_of(udp_packet(1, 0x0a010203, 53));
  DpclsRule* r = cls.insert(mask, pkt, flow_id(7));
  REQUIRE(r != nullptr);
  CHECK(r->flow == flow_id(7));
  CHECK(cls.n_subtables() == 1);
  CHECK(cls.n_rules() == 1);
  CHECK(cls.find(mask, pkt) == r);
  CHECK(cls.find(mask, mf_of(udp_packet(1, 0x0a01ffff, 9))) == r);  // same masked key
  CHECK(cls.insert(mask, mf_of(udp_packet(1, 0x0a01ffff, 9)), flow_id(8)) == nullptr);
  CHECK(cls.n_rules() == 1);

  const Miniflow same_flow = mf_of(udp_packet(1, 0x0a01fe00, 4000, 0x0b000001));
  const Miniflow other_port = mf_of(udp_packet(2, 0x0a010203, 53));
  const Miniflow other_net = mf_of(udp_packet(1, 0x0a020203, 53));
  const Miniflow* keys[] = {&same_flow, &other_port, &other_net, &pkt};
  DpclsRule* out[4];
  uint32_t probed = 99;
  CHECK(cls.lookup(keys, out, &probed) == 0b1001);
  CHECK(out[0] == r);
  CHECK(out[1] == nullptr);
  CHECK(out[2] == nullptr);
  CHECK(out[3] == r);
  CHECK(probed == 2);  // two hits, both in the first subtable

  cls.remove(r);
  CHECK(cls.n_rules() == 0);
  CHECK(cls.n_subtables() == 0);  // its last rule took the subtable with it
  CHECK(cls.lookup(keys, out, nullptr) == 0);
  for (DpclsRule* o : out) CHECK(o == nullptr);
}

TEST_CASE(
    "one subtable per mask; non-overlapping megaflows each find their own; first match in rank order wins") {
  Dpcls cls;
  std::vector<DpclsRule*> rules;
  // 16 masks as the dpcls-16masks scenario: /16../23 without and with tp_dst.
  for (unsigned g = 0; g < 16; ++g) {
    const Miniflow mask = mf_of(megaflow_mask(16 + g % 8, g >= 8));
    const uint32_t net = (10u << 24) | ((g + 1) << 16);
    rules.push_back(
        cls.insert(mask, mf_of(udp_packet(1, net, static_cast<uint16_t>(1000 + g))), flow_id(g + 1)));
    REQUIRE(rules.back() != nullptr);
  }
  CHECK(cls.n_subtables() == 16);
  auto info = infos(cls);
  REQUIRE(info.size() == 16);
  for (unsigned g = 0; g < 16; ++g) {
    CHECK(info[g].u0 == 2);
    CHECK(info[g].u1 == (g >= 8 ? 3u : 2u));
    CHECK(info[g].n_rules == 1);
  }
  for (unsigned g = 0; g < 16; ++g) {
    const Miniflow k =
        mf_of(udp_packet(1, (10u << 24) | ((g + 1) << 16) | 0x77, static_cast<uint16_t>(1000 + g)));
    const Miniflow* keys[] = {&k};
    DpclsRule* out[1];
    uint32_t probed = 0;
    CHECK(cls.lookup(keys, out, &probed) == 1);
    CHECK(out[0] == rules[g]);
    CHECK(probed == g + 1);  // ranked in insertion order so far
  }

  // Overlapping rules (translation never makes them, but the semantics are
  // defined): the subtable ranked first answers.
  Dpcls ov;
  const Miniflow pkt = mf_of(udp_packet(3, 0x0a090909, 7));
  FlowKey port_only{};
  port_only.in_port = ~0u;
  DpclsRule* wide = ov.insert(mf_of(port_only), pkt, flow_id(1));
  DpclsRule* narrow = ov.insert(mf_of(megaflow_mask(24, true)), pkt, flow_id(2));
  REQUIRE(wide);
  REQUIRE(narrow);
  const Miniflow* keys[] = {&pkt};
  DpclsRule* out[1];
  CHECK(ov.lookup(keys, out, nullptr) == 1);
  CHECK(out[0] == wide);
}

TEST_CASE("resort ranks subtables by hits since the last resort") {
  Dpcls cls;
  std::vector<DpclsRule*> rules;
  std::vector<Miniflow> pkts;
  for (unsigned g = 0; g < 3; ++g) {
    pkts.push_back(mf_of(udp_packet(1, (10u << 24) | ((g + 1) << 16), 1000)));
    rules.push_back(cls.insert(mf_of(megaflow_mask(16 + g, false)), pkts.back(), flow_id(g + 1)));
    REQUIRE(rules.back());
  }
  auto hit = [&](unsigned g, unsigned times) {
    for (unsigned i = 0; i < times; ++i) {
      const Miniflow* keys[] = {&pkts[g]};
      DpclsRule* out[1];
      REQUIRE(cls.lookup(keys, out, nullptr) == 1);
      REQUIRE(out[0] == rules[g]);
    }
  };
  auto order = [&] {
    std::vector<unsigned> o;
    for (const SubtableInfo& i : infos(cls)) {
      for (unsigned g = 0; g < 3; ++g)
        if (i.mask == rules[g]->subtable->mask) o.push_back(g);
    }
    return o;
  };
  CHECK(order() == std::vector<unsigned>{0, 1, 2});
  hit(2, 10);
  hit(1, 5);
  hit(0, 1);
  cls.resort();
  CHECK(order() == std::vector<unsigned>{2, 1, 0});
  const Miniflow* keys[] = {&pkts[2]};
  DpclsRule* out[1];
  uint32_t probed = 0;
  cls.lookup(keys, out, &probed);
  CHECK(probed == 1);
  // Ranked by hits *since* the last resort, not totals: 0 is hot now.
  hit(0, 4);
  hit(1, 2);
  cls.resort();
  CHECK(order() == std::vector<unsigned>{0, 1, 2});
  // No hits at all: the order stays.
  cls.resort();
  CHECK(order() == std::vector<unsigned>{0, 1, 2});
  auto info = infos(cls);
  CHECK(info[0].hits == 5);
  CHECK(info[1].hits == 7);
  CHECK(info[2].hits == 11);
}

TEST_CASE("removing the last rule of a subtable deletes it; others keep their rank") {
  Dpcls cls;
  const Miniflow m16 = mf_of(megaflow_mask(16, false)), m24 = mf_of(megaflow_mask(24, false));
  DpclsRule* a = cls.insert(m16, mf_of(udp_packet(1, 0x0a010000, 1)), flow_id(1));
  DpclsRule* b = cls.insert(m16, mf_of(udp_packet(1, 0x0a020000, 1)), flow_id(2));
  DpclsRule* c = cls.insert(m24, mf_of(udp_packet(1, 0x0a030300, 1)), flow_id(3));
  REQUIRE((a && b && c));
  CHECK(cls.n_subtables() == 2);
  cls.remove(a);
  CHECK(cls.n_subtables() == 2);
  CHECK(cls.find(m16, mf_of(udp_packet(1, 0x0a020000, 1))) == b);
  cls.remove(b);
  CHECK(cls.n_subtables() == 1);
  CHECK(infos(cls)[0].mask == c->subtable->mask);
  CHECK(cls.find(m16, mf_of(udp_packet(1, 0x0a020000, 1))) == nullptr);
  // The mask can come back.
  DpclsRule* d = cls.insert(m16, mf_of(udp_packet(1, 0x0a020000, 1)), flow_id(4));
  REQUIRE(d);
  CHECK(cls.n_subtables() == 2);
  CHECK(cls.counters().n_subtables == 2);
  CHECK(cls.counters().n_rules == 2);
}

TEST_CASE(
    "info() names the specialization for a (2,2) mask, generic for an unspecialized shape or when forced") {
  Dpcls cls;
  const Miniflow pkt = mf_of(udp_packet(1, 0x0a010203, 53));
  REQUIRE(cls.insert(mf_of(megaflow_mask(16, false)), pkt, flow_id(1)));
  // u0 = 7 words: 48, 49, 50, 51, 52, 59, 60 -> no specialization.
  FlowKey wide = megaflow_mask(16, false);
  wide.skb_priority = ~0u;
  wide.dp_hash = ~0u;
  wide.metadata = ~uint64_t{0};
  wide.regs[0] = ~0u;
  wide.dl_dst = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
  REQUIRE(cls.insert(mf_of(wide), pkt, flow_id(2)));
  auto info = infos(cls);
  REQUIRE(info.size() == 2);
  CHECK(info[0].u0 == 2);
  CHECK(info[0].u1 == 2);
  CHECK(info[0].lookup_name() == "specialized(2,2)");
  CHECK(info[0].mask.map.test(50));
  CHECK(info[0].mask.map.test(60));
  CHECK(info[0].mask.map.test(64));
  CHECK(info[0].mask.map.test(69));
  CHECK(info[1].u0 == 7);
  CHECK(info[1].lookup_name() == "generic");

  // Same answers with the generic function forced, and back.
  const Miniflow* keys[] = {&pkt};
  DpclsRule* out[1];
  REQUIRE(cls.lookup(keys, out, nullptr) == 1);
  DpclsRule* first = out[0];
  cls.force_generic_lookup(true);
  CHECK(infos(cls)[0].lookup_name() == "generic");
  REQUIRE(cls.lookup(keys, out, nullptr) == 1);
  CHECK(out[0] == first);
  // A subtable created while forced is generic too.
  REQUIRE(cls.insert(mf_of(megaflow_mask(20, true)), mf_of(udp_packet(1, 0x0b000000, 1)), flow_id(3)));
  CHECK(infos(cls)[2].lookup_name() == "generic");
  cls.force_generic_lookup(false);
  CHECK(infos(cls)[0].lookup_name() == "specialized(2,2)");
  CHECK(infos(cls)[2].lookup_name() == "specialized(2,3)");
}

TEST_CASE("a mask word that is all zeros is dropped: same subtable, same shape") {
  Dpcls cls;
  const Miniflow mask = mf_of(megaflow_mask(16, false));
  Miniflow padded;  // the same mask with word 59 (dl_dst) present but zero
  {
    keel::flow::FlowMap map = mask.map;
    map.set(59);
    FlowKey m = megaflow_mask(16, false);
    REQUIRE(keel::flow::compress(m, map, padded));
    REQUIRE(padded.n_words() == mask.n_words() + 1);
  }
  DpclsRule* a = cls.insert(mask, mf_of(udp_packet(1, 0x0a010000, 1)), flow_id(1));
  DpclsRule* b = cls.insert(padded, mf_of(udp_packet(1, 0x0a020000, 1)), flow_id(2));
  REQUIRE((a && b));
  CHECK(a->subtable == b->subtable);
  CHECK(cls.n_subtables() == 1);
  CHECK(infos(cls)[0].lookup_name() == "specialized(2,2)");
  CHECK(cls.find(padded, mf_of(udp_packet(1, 0x0a010000, 1))) == a);
}

TEST_CASE("a burst of 32 keys over 16 subtables: hit map, out[], probes per hit, counters") {
  Dpcls cls;
  std::mt19937 rng(32);
  std::vector<DpclsRule*> rules;
  for (unsigned g = 0; g < 16; ++g) {
    const Miniflow mask = mf_of(megaflow_mask(16 + g % 8, g >= 8));
    for (uint32_t host = 0; host < 50; ++host) {
      // Group g: 10.(g+1).x.y under /(16 + g%8): the mask keeps the top g%8
      // bits of x, so only min(50, 2^(g%8)) rules are distinct (the rest are
      // refused as duplicates).
      const uint32_t net = (10u << 24) | ((g + 1) << 16) | ((host << (8 - g % 8)) & 0xff) << 8;
      DpclsRule* r = cls.insert(mask, mf_of(udp_packet(1, net, static_cast<uint16_t>(1000 + g))),
                                flow_id(rules.size() + 1));
      if (r) rules.push_back(r);
    }
  }
  CHECK(cls.n_subtables() == 16);
  std::vector<Miniflow> keys(32);
  std::vector<const Miniflow*> ptrs(32);
  std::vector<DpclsRule*> want(32);
  uint32_t want_map = 0, want_probed = 0;
  for (unsigned i = 0; i < 32; ++i) {
    const unsigned g = static_cast<unsigned>(rng() % 16);
    const bool miss = i % 5 == 4;
    const unsigned p = g % 8;
    const uint32_t host = static_cast<uint32_t>(rng() % std::min(50u, 1u << p));
    const uint32_t dst = (10u << 24) | ((miss ? 40 + g : g + 1) << 16) | ((host << (8 - p)) & 0xff) << 8 |
                         (static_cast<uint32_t>(rng()) & ((1u << (16 - p)) - 1));  // bits the mask ignores
    keys[i] = mf_of(udp_packet(1, dst, static_cast<uint16_t>(1000 + g)));
    ptrs[i] = &keys[i];
    if (!miss) {
      want[i] = cls.find(mf_of(megaflow_mask(16 + g % 8, g >= 8)), keys[i]);
      REQUIRE(want[i] != nullptr);
      want_map |= 1u << i;
      want_probed += g + 1;
    }
  }
  DpclsRule* out[32];
  uint32_t probed = 0;
  CHECK(cls.lookup(ptrs, out, &probed) == want_map);
  for (unsigned i = 0; i < 32; ++i) CHECK(out[i] == want[i]);
  CHECK(probed == want_probed);
  const DpclsCounters c = cls.counters();
  CHECK(c.lookups == 32);
  CHECK(c.hits == static_cast<uint64_t>(__builtin_popcount(want_map)));
  CHECK(c.subtables_probed == want_probed);
  CHECK(c.n_rules == rules.size());
  // An empty burst changes nothing.
  CHECK(cls.lookup(std::span<const Miniflow* const>{}, out, &probed) == 0);
  CHECK(probed == 0);
}

TEST_CASE("many rules in one subtable: the table grows, every rule stays findable, removal empties it") {
  Dpcls cls;
  const Miniflow mask = mf_of(megaflow_mask(32, true));
  std::vector<DpclsRule*> rules;
  for (uint32_t i = 0; i < 20000; ++i) {
    rules.push_back(
        cls.insert(mask, mf_of(udp_packet(1, 0x0a000000 + i, static_cast<uint16_t>(i % 7))), flow_id(i + 1)));
    REQUIRE(rules.back());
  }
  for (uint32_t i = 0; i < 20000; i += 32) {
    std::vector<Miniflow> keys;
    for (uint32_t j = i; j < i + 32 && j < 20000; ++j)
      keys.push_back(mf_of(udp_packet(1, 0x0a000000 + j, static_cast<uint16_t>(j % 7))));
    std::vector<const Miniflow*> ptrs;
    for (auto& k : keys) ptrs.push_back(&k);
    DpclsRule* out[32];
    const uint32_t n = static_cast<uint32_t>(keys.size());
    REQUIRE(cls.lookup(ptrs, out, nullptr) == (n == 32 ? ~0u : (1u << n) - 1));
    for (uint32_t j = 0; j < n; ++j) REQUIRE(out[j] == rules[i + j]);
  }
  for (DpclsRule* r : rules) cls.remove(r);
  CHECK(cls.n_subtables() == 0);
  CHECK(cls.n_rules() == 0);
}

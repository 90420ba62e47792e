// Simple match: quick_key() agrees with the full parser whenever it answers;
// which megaflows are simple; when a port is on the simple path; lookups.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "datapath/simple_match.h"
#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "flow/flow_text.h"
#include "flow/miniflow.h"
#include "packet/frame_builder.h"
#include "packet/parser.h"

using namespace keel;
using namespace keel::datapath;
using packet::FrameBuilder;

namespace {

const flow::EthAddr kMacA{{2, 0, 0, 0, 0, 1}}, kMacB{{2, 0, 0, 0, 0, 2}};

// Megaflows of these tests own their actions (the flow table's
// free_megaflow() is not used here).
struct FreeMegaflow {
  void operator()(Megaflow* f) const {
    delete f->actions.load();
    delete f;
  }
};
using MegaflowPtr = std::unique_ptr<Megaflow, FreeMegaflow>;

// A megaflow from datapath flow text (as dp-flow add builds it); `tweak`
// may then change the match (masks the text cannot express).
MegaflowPtr megaflow(const std::string& text, void (*tweak)(flow::Match&) = nullptr) {
  auto dp = flow::parse_dp_flow(text);
  REQUIRE_MESSAGE(dp.ok(), dp.status().message());
  flow::Match m = dp->match;
  if (tweak) tweak(m);
  m.mask.recirc_id = 0xffffffffu;
  m.apply_mask();
  MegaflowPtr f(new Megaflow);
  flow::Miniflow mask;
  REQUIRE(flow::compress(m.mask, mask));
  REQUIRE(flow::compress(m.key, mask.map, f->key));
  f->set_mask(mask);
  f->in_port = m.key.in_port;
  auto acts = flow::parse_dp_actions(dp->actions);
  REQUIRE(acts.ok());
  f->actions.store(new flow::DpActions(acts.value()));
  return f;
}

// What the full parser keys for the fields quick_key() reads.
struct Full {
  SimpleKey key;
  uint16_t tcp_flags;
};
Full full_key(const uint8_t* frame, uint32_t len) {
  packet::PacketMetadata md;
  md.in_port = 1;
  flow::Miniflow mf;
  packet::LayerOffsets ofs;
  (void)packet::parse_frame(frame, len, md, mf, ofs);
  flow::FlowKey k;
  flow::expand(mf, k);
  Full r;
  r.key = SimpleKey{k.dl_type} | SimpleKey{k.vlans[0].tpid} << 16 | SimpleKey{k.vlans[0].tci} << 32 |
          SimpleKey{k.nw_frag} << 48;
  r.tcp_flags = k.nw_proto == packet::kIpProtoTcp ? __builtin_bswap16(k.tcp_flags) : 0;
  return r;
}

}  // namespace

TEST_CASE("quick_key answers for the common frames, and agrees with the parser") {
  FrameBuilder udp4, tagged_tcp4, tcp6, arp;
  udp4.eth(kMacB, kMacA, packet::kEthTypeIpv4).ipv4(0x0a000001, 0x0a000002, packet::kIpProtoUdp).udp(1, 2).payload(18).finish();
  tagged_tcp4.eth(kMacB, kMacA).vlan(0x2064).ethertype(packet::kEthTypeIpv4)
      .ipv4(0x0a000001, 0x0a000002, packet::kIpProtoTcp).tcp(1, 2, 0x012).payload(4).finish();
  tcp6.eth(kMacB, kMacA, packet::kEthTypeIpv6).ipv6({}, {}, packet::kIpProtoTcp).tcp(1, 2, 0x002).finish();
  arp.eth(kMacB, kMacA, packet::kEthTypeArp).arp(1, kMacA, 1, {}, 2).finish();
  for (FrameBuilder* f : {&udp4, &tagged_tcp4, &tcp6, &arp}) {
    SimpleQuick q;
    REQUIRE(quick_key(f->data(), f->size(), &q));
    Full full = full_key(f->data(), f->size());
    CHECK(q.key == full.key);
    CHECK(q.tcp_flags == full.tcp_flags);
  }
  SimpleQuick q;
  REQUIRE(quick_key(tagged_tcp4.data(), tagged_tcp4.size(), &q));
  CHECK(q.tcp_flags == 0x012);
  CHECK(q.ofs.l2_5 == 12);
  CHECK(q.ofs.l3 == 18);
}

TEST_CASE("quick_key: random frames, every answer equals the full parser's key") {
  uint64_t seed = 777;
  auto rnd = [&seed](uint32_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>((seed >> 33) % n);
  };
  unsigned answered = 0, declined = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    FrameBuilder f;
    f.eth(kMacB, kMacA);
    for (uint32_t tags = rnd(3) == 0 ? 1 + rnd(2) : 0; tags > 0; --tags)
      f.vlan(static_cast<uint16_t>(rnd(0x10000)), rnd(2) ? packet::kEthTypeVlan : packet::kEthTypeQinQ);
    const uint32_t l3 = f.size() + 2;
    const uint8_t proto = rnd(4) == 0 ? static_cast<uint8_t>(rnd(256)) : (rnd(2) ? packet::kIpProtoUdp : packet::kIpProtoTcp);
    const uint32_t kind = rnd(8);
    if (kind == 0) {
      f.ethertype(static_cast<uint16_t>(rnd(0x10000)));  // anything, 802.3 lengths included
      f.payload(rnd(60));
    } else if (kind <= 2) {
      f.ethertype(packet::kEthTypeIpv6);
      f.ipv6({}, {}, rnd(6) == 0 ? packet::kIpProtoDstOpts : proto);
      if (rnd(2)) f.tcp(1, 2, static_cast<uint16_t>(rnd(0x1000)), static_cast<uint8_t>(5 + rnd(3)));
    } else {
      f.ethertype(packet::kEthTypeIpv4);
      FrameBuilder::Ipv4Opts o;
      o.option_words = rnd(4) == 0 ? static_cast<uint8_t>(rnd(4)) : 0;
      o.frag_off = rnd(4) == 0 ? static_cast<uint16_t>(rnd(0x10000)) : 0;
      f.ipv4(rnd(0xffffffff), rnd(0xffffffff), proto, o);
      if (proto == packet::kIpProtoTcp) f.tcp(1, 2, static_cast<uint16_t>(rnd(0x1000)), static_cast<uint8_t>(4 + rnd(4)));
      else f.udp(1, 2);
    }
    f.payload(rnd(20)).finish().pad_to(rnd(2) ? 60 : 0);
    if (rnd(8) == 0) f.put8(l3, static_cast<uint8_t>(rnd(256)));  // version / IHL
    if (rnd(8) == 0) f.put16(l3 + (kind <= 2 && kind ? 4 : 2), static_cast<uint16_t>(rnd(f.size())));
    const uint32_t len = rnd(4) == 0 ? rnd(f.size() + 1) : f.size();
    std::unique_ptr<uint8_t[]> exact(new uint8_t[len + 1]);
    std::memcpy(exact.get(), f.data(), len);
    SimpleQuick q;
    if (!quick_key(exact.get(), len, &q)) {
      ++declined;
      continue;
    }
    ++answered;
    Full full = full_key(exact.get(), len);
    CHECK(q.key == full.key);
    CHECK(q.tcp_flags == full.tcp_flags);
  }
  CHECK(answered > 10000);
  CHECK(declined > 1000);
}

TEST_CASE("which megaflows are simple") {
  SimpleKey v, m;
  CHECK(simple_flow(*megaflow("recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no) actions:2"), &v, &m));
  CHECK(simple_flow(*megaflow("recirc_id(0),in_port(1),eth(),eth_type(0x8100),vlan(vid=10),encap(eth_type(0x0800)) actions:2"), &v, &m));
  CHECK(simple_flow(*megaflow("in_port(1) actions:drop"), &v, &m));
  // The upcall handler's masks (ofproto/udpif.cpp): each tag's TPID exact up
  // to the first absent one, so a one-tag megaflow matches "no second tag":
  // still simple (quick_key only answers for frames with at most one tag).
  const char* tagged = "recirc_id(0),in_port(1),eth(),eth_type(0x8100),vlan(vid=10),encap(eth_type(0x0800)) actions:2";
  CHECK(simple_flow(*megaflow(tagged, [](flow::Match& x) { x.mask.vlans[1].tpid = 0xffff; }), &v, &m));
  CHECK(simple_flow(*megaflow("recirc_id(0),in_port(1),eth_type(0x0800) actions:2",
                              [](flow::Match& x) { x.mask.vlans[0] = {0xffff, flow::text::hton16(0x1fff)}; }),
                    &v, &m));
  // A second tag matched as present is not simple.
  CHECK_FALSE(simple_flow(*megaflow(tagged,
                                    [](flow::Match& x) {
                                      x.mask.vlans[1].tpid = 0xffff;
                                      x.key.vlans[1].tpid = flow::text::hton16(0x8100);
                                    }),
                          &v, &m));
  CHECK_FALSE(simple_flow(*megaflow("recirc_id(1),in_port(1) actions:2"), &v, &m));
  CHECK_FALSE(simple_flow(*megaflow("in_port(1),eth_type(0x0800),ipv4(dst=10.0.0.0/8,frag=no) actions:2"), &v, &m));
  CHECK_FALSE(simple_flow(*megaflow("in_port(1),eth(dst=02:00:00:00:00:02) actions:2"), &v, &m));
  CHECK_FALSE(simple_flow(*megaflow("in_port(1),skb_mark(1) actions:2"), &v, &m));
  CHECK(outputs_only(flow::parse_dp_actions("2,3").value()));
  CHECK(outputs_only(flow::parse_dp_actions("drop").value()));
  CHECK_FALSE(outputs_only(flow::parse_dp_actions("pop_vlan,2").value()));
  CHECK_FALSE(outputs_only(flow::parse_dp_actions("set(ipv4(ttl=9)),2").value()));
}

TEST_CASE("a port is on the simple path while all its flows are simple; lookup by key") {
  auto sm = std::make_unique<SimpleMatch>();
  auto ip = megaflow("recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no) actions:2");
  auto arp = megaflow("recirc_id(0),in_port(1),eth_type(0x0806) actions:3");
  auto l3 = megaflow("recirc_id(0),in_port(1),eth_type(0x0800),ipv4(dst=10.0.0.1,frag=no) actions:2");
  auto rewrite = megaflow("recirc_id(0),in_port(2),eth_type(0x0800),ipv4(frag=no) actions:set(ipv4(ttl=9)),1");
  CHECK_FALSE(sm->enabled(1));
  sm->flow_added(ip.get());
  sm->flow_added(arp.get());
  CHECK(sm->enabled(1));
  CHECK_FALSE(sm->enabled(2));

  FrameBuilder udp4, frag4, arpf;
  udp4.eth(kMacB, kMacA, packet::kEthTypeIpv4).ipv4(1, 2, packet::kIpProtoUdp).udp(1, 2).finish();
  FrameBuilder::Ipv4Opts o;
  o.frag_off = 0x2000;  // MF: a first fragment
  frag4.eth(kMacB, kMacA, packet::kEthTypeIpv4).ipv4(1, 2, packet::kIpProtoUdp, o).udp(1, 2).finish();
  arpf.eth(kMacB, kMacA, packet::kEthTypeArp).arp(1, kMacA, 1, {}, 2).finish();
  SimpleQuick q;
  REQUIRE(quick_key(udp4.data(), udp4.size(), &q));
  CHECK(sm->lookup(1, q.key) == ip.get());
  REQUIRE(quick_key(arpf.data(), arpf.size(), &q));
  CHECK(sm->lookup(1, q.key) == arp.get());
  REQUIRE(quick_key(frag4.data(), frag4.size(), &q));
  CHECK(sm->lookup(1, q.key) == nullptr);  // frag=no does not match a fragment

  // One flow that needs the full key takes the whole port off the path.
  sm->flow_added(l3.get());
  CHECK_FALSE(sm->enabled(1));
  sm->flow_removed(l3.get());
  CHECK(sm->enabled(1));
  sm->flow_removed(ip.get());
  sm->flow_removed(arp.get());
  CHECK_FALSE(sm->enabled(1));

  // A simple match whose actions rewrite headers is found by the full path.
  sm->flow_added(rewrite.get());
  CHECK(sm->enabled(2));
  REQUIRE(quick_key(udp4.data(), udp4.size(), &q));
  CHECK(sm->lookup(2, q.key) == nullptr);
  auto* old = rewrite->actions.exchange(new flow::DpActions(flow::parse_dp_actions("1").value()));
  delete old;
  sm->actions_changed(rewrite.get());
  CHECK(sm->lookup(2, q.key) == rewrite.get());
}

TEST_CASE("more simple flows than a port's slots: off the simple path until they fit") {
  auto sm = std::make_unique<SimpleMatch>();
  std::vector<MegaflowPtr> flows;
  for (unsigned vid = 1; vid <= SimpleMatch::kMaxPerPort + 1; ++vid) {
    flows.push_back(megaflow("recirc_id(0),in_port(1),eth_type(0x8100),vlan(vid=" + std::to_string(vid) +
                             "),encap(eth_type(0x0800)) actions:2"));
    sm->flow_added(flows.back().get());
  }
  CHECK_FALSE(sm->enabled(1));
  sm->flow_removed(flows.back().get());  // the one that did not fit
  CHECK(sm->enabled(1));
}

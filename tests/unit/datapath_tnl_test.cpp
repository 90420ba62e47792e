// The tunnel datapath through a running Datapath with ring ports: vports
// (ids, names, errors), flows with a vport as in_port and the refusal of
// outputs to one, tnl_push on the wire (the frame a peer receives decodes
// to the inner frame and the tunnel's fields), tnl_pop recirculating the
// inner frame with in_port = vport and the tunnel metadata in its key (a
// tunnel(...) match selects it), bad tunnel packets dropped and counted by
// reason, and no headroom counted.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "datapath/datapath.h"
#include "eventually.h"
#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "packet/tunnel_header.h"
#include "sim_test_util.h"

using namespace keel;
using namespace keel::datapath;

namespace {

using Bytes = std::vector<uint8_t>;

using test::parse_actions;
using test::parse_match;

// An inner IPv4/UDP frame (checksum 0), distinct per i.
Bytes inner(unsigned i) {
  Bytes f = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00,        // eth
             0x45, 0,    0,    50,   0, 0, 0, 0, 64, 17, 0, 0,                  // ipv4 (csum fixed below)
             10,   0,    0,    1,    10, 0, 0, 2,                               //
             static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i), 0x07, 0xd0, 0, 30, 0, 0};
  f.resize(64, 0xab);
  uint32_t s = 0;
  for (int k = 14; k < 34; k += 2) s += static_cast<uint32_t>(f[k] << 8 | f[k + 1]);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  f[24] = static_cast<uint8_t>(~s >> 8), f[25] = static_cast<uint8_t>(~s);
  return f;
}

const char* kVxlanPush =
    "tnl_push(tnl_port(4),header(size=50,type=4,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x0800),"
    "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),"
    "vxlan(flags=0x8000000,vni=0x7b)),out_port(5))";

struct Rig {
  std::unique_ptr<hal::Backend> backend = test::sim_backend(4096);
  Datapath dp{DatapathConfig{.pmd_cores = {-1}}};
  hal::sim::RingPort* in;      // 1: overlay side
  hal::sim::RingPort* out;     // 2: overlay side, decapsulated frames
  hal::sim::RingPort* uplink;  // 3: underlay
  uint16_t vxlan = 0, local = 0;

  Rig() {
    in = test::add_sim_port(*backend, dp, "in");
    out = test::add_sim_port(*backend, dp, "out");
    uplink = test::add_sim_port(*backend, dp, "uplink");
    auto v = dp.add_vport("vxlan_sys_4789", VportType::vxlan, 4789);
    REQUIRE(v.ok());
    vxlan = *v;
    auto l = dp.add_vport("br-underlay", VportType::internal);
    REQUIRE(l.ok());
    local = *l;
  }
  ~Rig() {
    dp.stop();
    for (auto* r : {out, uplink}) drain(r);
  }
  void inject(hal::sim::RingPort* r, const Bytes& f) {
    hal::Packet* p = nullptr;
    REQUIRE(backend->alloc_burst({&p, 1}) == 1);
    REQUIRE(p->set_len(static_cast<uint32_t>(f.size())));
    std::memcpy(p->data(), f.data(), f.size());
    while (r->inject(std::span(&p, 1)) != 1) std::this_thread::yield();
  }
  static std::vector<Bytes> collect(hal::sim::RingPort* r) {
    std::vector<Bytes> v;
    hal::Packet* got[32];
    size_t m;
    while ((m = r->collect(got)) > 0) {
      for (size_t i = 0; i < m; ++i) {
        v.emplace_back(got[i]->data(), got[i]->data() + got[i]->len());
        hal::release(got[i]);
      }
    }
    return v;
  }
  static void drain(hal::sim::RingPort* r) { (void)collect(r); }
  PmdCounters pmd() const { return dp.pmds()[0]->counters(); }
};

}  // namespace

TEST_CASE("vports: lowest free id after the ports, OVS names, errors change nothing") {
  Rig r;
  CHECK(r.vxlan == 4);
  CHECK(r.local == 5);
  CHECK(tunnel_vport_name(VportType::vxlan, 4789) == "vxlan_sys_4789");
  CHECK(tunnel_vport_name(VportType::geneve, 6081) == "genev_sys_6081");
  CHECK(tunnel_vport_name(VportType::gre, 0) == "gre_sys");
  CHECK(r.dp.add_vport("vxlan_sys_4789", VportType::vxlan, 4789).status().code() == Errc::already_exists);
  CHECK(r.dp.add_vport("uplink", VportType::internal).status().code() == Errc::already_exists);
  CHECK(!r.dp.add_vport("genev_sys_0", VportType::geneve, 0).ok());
  CHECK(!r.dp.add_vport("gre_sys", VportType::gre, 47).ok());
  auto g = r.dp.add_vport("gre_sys", VportType::gre);
  REQUIRE(g.ok());
  CHECK(*g == 6);
  auto vs = r.dp.vports();
  REQUIRE(vs.size() == 3);
  CHECK(vs[0].name == "vxlan_sys_4789");
  CHECK(vs[0].udp_port == 4789);
  CHECK(vs[2].type == VportType::gre);
  CHECK(r.dp.find_vport("gre_sys")->id == 6);
  REQUIRE(r.dp.del_vport(5).ok());
  CHECK(!r.dp.vport(5));
  CHECK(!r.dp.is_vport(5));
  CHECK(r.dp.del_vport(5).code() == Errc::not_found);
  auto again = r.dp.add_vport("br0", VportType::internal);
  REQUIRE(again.ok());
  CHECK(*again == 5);  // the freed id is reused
  CHECK(r.dp.port(5) == nullptr);
}

TEST_CASE("flows: a vport may be in_port; an output to a vport is refused") {
  Rig r;
  CHECK(r.dp.flow_put(parse_match("in_port(4),eth_type(0x0800),ipv4(frag=no)"), parse_actions("2"), std::nullopt,
                      false)
            .ok());
  Status st = r.dp.flow_put(parse_match("in_port(1),eth_type(0x0800),ipv4(frag=no)"), parse_actions("4"),
                            std::nullopt, false);
  CHECK(st.code() == Errc::invalid_argument);
  CHECK(st.message() == "action output:4: a virtual port (vxlan_sys_4789) never transmits");
  st = r.dp.flow_put(parse_match("in_port(1),eth_type(0x0800),ipv4(frag=no)"),
                     parse_actions(std::string("clone(") + kVxlanPush + ",5)"), std::nullopt, false);
  CHECK(st.message() == "action output:5: a virtual port (br-underlay) never transmits");
  CHECK(r.dp.flow_put(parse_match("in_port(9),eth_type(0x0800)"), parse_actions("2"), std::nullopt, false).code() ==
        Errc::not_found);
  CHECK(r.dp.flow_count() == 1);
}

TEST_CASE("tnl_push on the wire, tnl_pop back to the inner frame with its tunnel metadata") {
  Rig r;
  REQUIRE(r.dp.flow_put(parse_match("in_port(1),eth_type(0x0800),ipv4(frag=no)"),
                        parse_actions(std::string(kVxlanPush) + ",3"), std::nullopt, false)
              .ok());
  REQUIRE(r.dp.flow_put(parse_match("in_port(3),eth_type(0x0800),ipv4(proto=17,frag=no)"),
                        parse_actions("tnl_pop(4)"), std::nullopt, false)
              .ok());
  // Only the tunnel with VNI 0x7b from 1.1.2.88 reaches port 2.
  REQUIRE(r.dp.flow_put(parse_match("tunnel(tun_id=0x7b,src=1.1.2.88,dst=1.1.2.92,tp_dst=4789,flags(+key)),"
                                    "in_port(4),eth_type(0x0800),ipv4(frag=no)"),
                        parse_actions("2"), std::nullopt, false)
              .ok());
  REQUIRE(r.dp.start({r.backend.get()}).ok());

  constexpr unsigned kN = 40;
  for (unsigned i = 0; i < kN; ++i) r.inject(r.in, inner(i));
  std::vector<Bytes> wire;
  REQUIRE(test::eventually([&] {
    for (Bytes& b : Rig::collect(r.uplink)) wire.push_back(std::move(b));
    return wire.size() == kN;
  }));
  for (unsigned i = 0; i < kN; ++i) {
    CAPTURE(i);
    const Bytes& f = wire[i];
    REQUIRE(f.size() == 50 + 64);
    packet::TnlPopInfo info;
    REQUIRE(packet::parse_tunnel_header(packet::TnlPopKind::kVxlan, 4789, f.data(), static_cast<uint32_t>(f.size()),
                                        info) == packet::TnlPopResult::kOk);
    CHECK(Bytes(f.begin() + 50, f.end()) == inner(i));
    CHECK(f[16] == 0);
    CHECK(f[17] == 100);  // IPv4 total length
    const uint16_t sport = static_cast<uint16_t>(f[34] << 8 | f[35]);
    CHECK(sport >= 32768);
    CHECK(sport <= 60999);
  }
  CHECK(r.pmd().tnl_pushed == kN);

  // Back in through the underlay: decapsulated, recirculated on vport 4, matched on its tunnel.
  for (const Bytes& f : wire) r.inject(r.uplink, f);
  std::vector<Bytes> got;
  REQUIRE(test::eventually([&] {
    for (Bytes& b : Rig::collect(r.out)) got.push_back(std::move(b));
    return got.size() == kN;
  }));
  for (unsigned i = 0; i < kN; ++i) CHECK(got[i] == inner(i));
  REQUIRE(test::eventually([&] { return r.pmd().tnl_popped == kN; }));

  // Another VNI: decapsulated, but no flow for its tunnel (a miss; no slow path here: lost).
  Bytes other = wire[0];
  other[48] = 0x7c;
  const uint64_t lost = r.pmd().lost;
  r.inject(r.uplink, other);
  REQUIRE(test::eventually([&] { return r.pmd().lost == lost + 1; }));
  CHECK(r.pmd().tnl_popped == kN + 1);

  // Bad tunnel packets: dropped and counted by reason.
  Bytes bad_flags = wire[0];
  bad_flags[42] = 0x0c;
  r.inject(r.uplink, bad_flags);
  Bytes bad_csum = wire[0];
  bad_csum[24] ^= 0xff;
  r.inject(r.uplink, bad_csum);
  REQUIRE(test::eventually([&] { return r.pmd().tnl_pop_errors == 2; }));
  const PmdCounters c = r.pmd();
  CHECK(c.tnl_pop_reasons[static_cast<unsigned>(packet::TnlPopResult::kBadVxlanFlags)] == 1);
  CHECK(c.tnl_pop_reasons[static_cast<unsigned>(packet::TnlPopResult::kBadIpChecksum)] == 1);
  CHECK(Rig::collect(r.out).empty());
}

TEST_CASE("tnl_pop to a vport that is gone drops, counted (no_vport)") {
  Rig r;
  REQUIRE(r.dp.flow_put(parse_match("in_port(3),eth_type(0x0800),ipv4(proto=17,frag=no)"),
                        parse_actions("tnl_pop(4)"), std::nullopt, false)
              .ok());
  REQUIRE(r.dp.del_vport(4).ok());
  REQUIRE(r.dp.start({r.backend.get()}).ok());
  r.inject(r.uplink, inner(1));  // an IPv4/UDP frame; the vport is gone before anything is parsed
  REQUIRE(test::eventually([&] { return r.pmd().tnl_pop_errors == 1; }));
  CHECK(r.pmd().tnl_pop_reasons[static_cast<unsigned>(packet::TnlPopResult::kNoVport)] == 1);
}

// The action executor on real frames in sim-pool buffers: VLAN push/pop
// byte for byte, set actions with every checksum recomputed from scratch
// here (independently of packet/checksum.h), truncation, clones, hash,
// recirculation, the slow-path queue, queue limits and their counters, and
// no leaked buffer at the end of any test.
#include "datapath/execute.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "core/hash.h"
#include "flow/dp_actions.h"
#include "flow/flow_hash.h"
#include "hal/sim/pool.h"
#include "keel/hal/backend.h"
#include "packet/frame_builder.h"
#include "packet/parser.h"

using namespace keel;
using namespace keel::datapath;
using packet::FrameBuilder;
using packet::LayerOffsets;

namespace {

constexpr flow::EthAddr kMacA{{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
constexpr flow::EthAddr kMacB{{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}};
constexpr uint32_t kIpA = 0x0a000001, kIpB = 0x0a000002;  // 10.0.0.1, 10.0.0.2
constexpr uint16_t kNone = LayerOffsets::kNone;

flow::In6Addr v6(uint16_t first, uint8_t last) {
  flow::In6Addr a{};
  a.b[0] = static_cast<uint8_t>(first >> 8);
  a.b[1] = static_cast<uint8_t>(first);
  a.b[15] = last;
  return a;
}

using Bytes = std::vector<uint8_t>;

// --- checksums from scratch (big-endian arithmetic, as a textbook does it) ---

uint16_t get16(const Bytes& f, size_t off) { return static_cast<uint16_t>(f[off] << 8 | f[off + 1]); }
void put16(Bytes& f, size_t off, uint16_t v) {
  f[off] = static_cast<uint8_t>(v >> 8);
  f[off + 1] = static_cast<uint8_t>(v);
}
uint32_t be_sum(const uint8_t* p, size_t n, uint32_t s = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) s += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  if (n & 1) s += static_cast<uint32_t>(p[n - 1] << 8);
  return s;
}
uint16_t finish(uint32_t s) {
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(~s & 0xffff);
}

// The offsets of a parse that keys every tag (vlan-limit 0): a pushed tag
// moves the headers the packet was parsed with, whatever the limit.
LayerOffsets offsets_of(const Bytes& f) {
  flow::Miniflow mf;
  LayerOffsets o;
  packet::PacketMetadata md;
  (void)packet::parse_frame(f.data(), static_cast<uint32_t>(f.size()), md, mf, o, 0);
  return o;
}

uint16_t ipv4_header_csum(const Bytes& f, const LayerOffsets& o) {
  const size_t ihl = size_t{f[o.l3] & 0x0fu} * 4;
  Bytes h(f.begin() + o.l3, f.begin() + o.l3 + static_cast<std::ptrdiff_t>(ihl));
  h[10] = h[11] = 0;
  return finish(be_sum(h.data(), h.size()));
}

size_t l4_csum_offset(uint8_t proto) { return proto == 6 ? 16 : proto == 17 ? 6 : 2; }

// The TCP/UDP/ICMPv6 checksum the segment should carry.
uint16_t l4_csum(const Bytes& f, const LayerOffsets& o, uint8_t proto) {
  const bool v4 = (f[o.l3] >> 4) == 4;
  size_t seg_len;
  uint32_t s = 0;
  if (v4) {
    seg_len = get16(f, o.l3 + 2) - (f[o.l3] & 0x0f) * 4u;
    s = be_sum(&f[o.l3 + 12], 8);
  } else {
    seg_len = get16(f, o.l3 + 4) + 40u - (o.l4 - o.l3);
    s = be_sum(&f[o.l3 + 8], 32);
  }
  s += static_cast<uint32_t>(seg_len >> 16) + static_cast<uint32_t>(seg_len & 0xffff) + proto;
  Bytes seg(f.begin() + o.l4, f.begin() + o.l4 + static_cast<std::ptrdiff_t>(seg_len));
  const size_t c = l4_csum_offset(proto);
  REQUIRE(seg.size() >= c + 2);
  std::fill_n(seg.begin() + static_cast<std::ptrdiff_t>(c), 2, uint8_t{0});
  uint16_t r = finish(be_sum(seg.data(), seg.size(), s));
  if (proto == 17 && r == 0) r = 0xffff;
  return r;
}

// A frame with a correct L4 checksum (FrameBuilder leaves it 0).
Bytes with_l4_csum(const FrameBuilder& fb, uint8_t proto) {
  Bytes f(fb.data(), fb.data() + fb.size());
  LayerOffsets o = offsets_of(f);
  put16(f, o.l4 + l4_csum_offset(proto), l4_csum(f, o, proto));
  return f;
}

Bytes ipv4_udp(uint8_t tos = 0, bool csum = true) {
  FrameBuilder fb;
  fb.eth(kMacB, kMacA, packet::kEthTypeIpv4)
      .ipv4(kIpA, kIpB, packet::kIpProtoUdp, {.tos = tos, .ttl = 64, .id = 0x1234})
      .udp(1234, 4789)
      .payload(18)
      .finish();
  return csum ? with_l4_csum(fb, 17) : Bytes(fb.data(), fb.data() + fb.size());
}
Bytes ipv4_tcp() {
  FrameBuilder fb;
  fb.eth(kMacB, kMacA, packet::kEthTypeIpv4)
      .ipv4(kIpA, kIpB, packet::kIpProtoTcp, {.tos = 0x10, .ttl = 17, .id = 77})
      .tcp(40000, 80, packet::kTcpAck | packet::kTcpPsh)
      .payload(33, 0x5a)
      .finish();
  return with_l4_csum(fb, 6);
}
Bytes ipv6_tcp() {
  FrameBuilder fb;
  fb.eth(kMacB, kMacA, packet::kEthTypeIpv6)
      .ipv6(v6(0x2001, 1), v6(0x2001, 2), packet::kIpProtoTcp,
            {.tclass = 0x28, .flow_label = 0x12345, .hop_limit = 9})
      .tcp(5555, 443, packet::kTcpSyn)
      .payload(21, 0x77)
      .finish();
  return with_l4_csum(fb, 6);
}
Bytes ipv6_udp() {
  FrameBuilder fb;
  fb.eth(kMacB, kMacA, packet::kEthTypeIpv6)
      .ipv6(v6(0xfe80, 1), v6(0xfe80, 2), packet::kIpProtoUdp)
      .udp(546, 547)
      .payload(12)
      .finish();
  return with_l4_csum(fb, 17);
}
Bytes vlan_ipv4_udp(uint16_t tci) {
  FrameBuilder fb;
  fb.eth(kMacB, kMacA)
      .vlan(tci)
      .ethertype(packet::kEthTypeIpv4)
      .ipv4(kIpA, kIpB, packet::kIpProtoUdp)
      .udp(7, 9);
  fb.payload(14).finish();
  return with_l4_csum(fb, 17);
}

// A Backend whose buffers come from a sim pool; it can be told to run dry.
class PoolBackend final : public hal::Backend {
 public:
  explicit PoolBackend(std::shared_ptr<hal::sim::Pool> p) : pool_(std::move(p)) {}
  const char* name() const override { return "test-pool"; }
  Result<std::unique_ptr<hal::Port>> open_port(const hal::PortSpec&, uint16_t, uint16_t) override {
    return Status(Errc::unsupported, "no ports");
  }
  unsigned alloc_burst(std::span<hal::Packet*> out, uint32_t len = 0) noexcept override {
    const size_t n = std::min<size_t>(out.size(), budget);
    const unsigned got = pool_->alloc_burst(out.first(n), len);
    if (budget != UINT_MAX) budget -= got;
    ++calls, given += got;
    return got;
  }
  unsigned budget = UINT_MAX;  // buffers it will still hand out
  unsigned calls = 0, given = 0;  // alloc_burst calls, buffers handed out

 private:
  std::shared_ptr<hal::sim::Pool> pool_;
};

// Packets in pool buffers, parsed as the PMD parses them, and a context.
class Exec {
 public:
  static constexpr unsigned kBuffers = 256;
  static constexpr unsigned kMaxPackets = 96;

  Exec()
      : pool_(hal::sim::Pool::create(kBuffers).value()),
        backend(pool_),
        ctx(std::make_unique<ExecContext>()),
        parsed_(new packet::ParsedPacket[kMaxPackets]) {
    ctx->backend = &backend;
  }
  ~Exec() {
    for (ExecPacket& e : pending_) hal::release(e.pkt);
    ctx->release_all();
    CHECK(pool_->available() == kBuffers);  // no buffer leaked
  }

  // Adds a packet holding `f` (in_port 1); headroom 0 if asked.
  ExecPacket& add(const Bytes& f, bool no_headroom = false) {
    REQUIRE(n_ < kMaxPackets);
    hal::Packet* p = pool_->alloc();
    REQUIRE(p);
    if (no_headroom) {
      REQUIRE(p->push_front(p->headroom()));
      REQUIRE(p->set_len(0));
    }
    REQUIRE(p->set_len(static_cast<uint32_t>(f.size())));
    std::memcpy(p->data(), f.data(), f.size());
    p->set_in_port(1);
    packet::ParsedPacket& pp = parsed_[n_++];
    (void)packet::parse(*p, pp);
    pending_.push_back({p, &pp.ofs, &pp.key});
    return pending_.back();
  }

  // Executes `actions` on every packet added since the last run.
  void run(std::string_view actions) {
    auto a = flow::parse_dp_actions(actions);
    REQUIRE_MESSAGE(a.ok(), a.status().message());
    acts_.push_back(std::move(*a));  // userdata spans point into it
    std::vector<ExecPacket> batch;
    batch.swap(pending_);
    execute_actions(*ctx, batch, acts_.back());
  }

  std::vector<hal::Packet*> tx(uint32_t port) const {
    for (const OutputBatch& b : ctx->tx.active())
      if (b.port == port) return {b.pkts, b.pkts + b.n};
    return {};
  }
  static Bytes bytes(const hal::Packet* p) { return {p->data(), p->data() + p->len()}; }
  const LayerOffsets& ofs(unsigned i) const { return parsed_[i].ofs; }
  const flow::Miniflow& key(unsigned i) const { return parsed_[i].key; }
  size_t available() const { return pool_->available(); }

 private:
  std::shared_ptr<hal::sim::Pool> pool_;

 public:
  PoolBackend backend;
  std::unique_ptr<ExecContext> ctx;

 private:
  std::unique_ptr<packet::ParsedPacket[]> parsed_;
  unsigned n_ = 0;
  std::vector<ExecPacket> pending_;
  std::vector<flow::DpActions> acts_;
};

// Every checksum of an IPv4/IPv6 + TCP/UDP frame is what a from-scratch
// computation gives.
void check_checksums(const Bytes& f, uint8_t proto, bool udp_zero = false) {
  const LayerOffsets o = offsets_of(f);
  REQUIRE(o.l4 != kNone);
  if ((f[o.l3] >> 4) == 4) CHECK(get16(f, o.l3 + 10) == ipv4_header_csum(f, o));
  const uint16_t got = get16(f, o.l4 + l4_csum_offset(proto));
  if (udp_zero) {
    CHECK(got == 0);
  } else {
    CHECK(got == l4_csum(f, o, proto));
  }
}

}  // namespace

TEST_CASE("push_vlan writes the tag, moves the offsets; pop_vlan restores the frame byte for byte") {
  Exec x;
  const Bytes orig = ipv4_udp();
  x.add(orig);
  x.run("push_vlan(vid=10,pcp=3),2");
  auto out = x.tx(2);
  REQUIRE(out.size() == 1);
  Bytes tagged = Exec::bytes(out[0]);
  REQUIRE(tagged.size() == orig.size() + 4);
  CHECK(std::equal(orig.begin(), orig.begin() + 12, tagged.begin()));
  CHECK(get16(tagged, 12) == 0x8100);
  CHECK(get16(tagged, 14) == 0x600a);  // pcp 3, vid 10, DEI written 0
  CHECK(std::equal(orig.begin() + 12, orig.end(), tagged.begin() + 16));
  // The adjusted offsets are what parsing the new frame gives.
  CHECK(x.ofs(0) == offsets_of(tagged));
  CHECK(x.ofs(0).l2_5 == 12);
  CHECK(x.ofs(0).l3 == 18);

  Exec y;
  y.add(orig);
  y.run("push_vlan(vid=10,pcp=3),pop_vlan,2");
  REQUIRE(y.tx(2).size() == 1);
  CHECK(Exec::bytes(y.tx(2)[0]) == orig);
  CHECK(y.ofs(0) == offsets_of(orig));
  CHECK(y.ctx->counters.header_missing == 0);
}

TEST_CASE("pop_vlan on a tagged frame, QinQ push, and offsets that set actions then use") {
  Exec x;
  const Bytes tagged = vlan_ipv4_udp(0x2005);
  x.add(tagged);
  x.run("pop_vlan,set(ipv4(ttl=9)),3");
  auto out = x.tx(3);
  REQUIRE(out.size() == 1);
  Bytes f = Exec::bytes(out[0]);
  CHECK(f.size() == tagged.size() - 4);
  CHECK(get16(f, 12) == 0x0800);
  CHECK(x.ofs(0) == offsets_of(f));
  CHECK(x.ofs(0).l2_5 == kNone);
  CHECK(f[x.ofs(0).l3 + 8] == 9);
  check_checksums(f, 17);

  Exec y;
  y.add(tagged);
  y.run("push_vlan(tpid=0x88a8,vid=100,pcp=0),set(ipv4(ttl=1)),4");
  REQUIRE(y.tx(4).size() == 1);
  Bytes q = Exec::bytes(y.tx(4)[0]);
  CHECK(get16(q, 12) == 0x88a8);
  CHECK(get16(q, 14) == 100);
  CHECK(get16(q, 16) == 0x8100);
  CHECK(get16(q, 18) == 0x2005);
  CHECK(y.ofs(0) == offsets_of(q));
  CHECK(q[y.ofs(0).l3 + 8] == 1);
  check_checksums(q, 17);

  // No tag: pop_vlan leaves the packet alone and counts it.
  Exec z;
  const Bytes plain = ipv4_udp();
  z.add(plain);
  z.run("pop_vlan,5");
  REQUIRE(z.tx(5).size() == 1);
  CHECK(Exec::bytes(z.tx(5)[0]) == plain);
  CHECK(z.ctx->counters.header_missing == 1);
}

TEST_CASE("push_vlan without headroom drops and counts") {
  Exec x;
  x.add(ipv4_udp(), /*no_headroom=*/true);
  x.add(ipv4_udp());
  x.run("push_vlan(vid=1,pcp=0),2");
  CHECK(x.tx(2).size() == 1);
  CHECK(x.ctx->counters.no_headroom == 1);
  CHECK(x.ctx->counters.outputs == 1);
}

TEST_CASE("set(ipv4) of src, dst, ttl and tos keeps the IPv4 and UDP/TCP checksums right") {
  for (bool tcp : {false, true}) {
    CAPTURE(tcp);
    Exec x;
    const Bytes orig = tcp ? ipv4_tcp() : ipv4_udp(0x04);
    check_checksums(orig, tcp ? 6 : 17);
    x.add(orig);
    x.run("set(ipv4(src=192.168.7.9,dst=172.16.254.3,tos=0xb8,ttl=3)),2");
    REQUIRE(x.tx(2).size() == 1);
    Bytes f = Exec::bytes(x.tx(2)[0]);
    const LayerOffsets o = offsets_of(f);
    CHECK(f[o.l3 + 1] == 0xb8);
    CHECK(f[o.l3 + 8] == 3);
    CHECK(Bytes(f.begin() + o.l3 + 12, f.begin() + o.l3 + 20) == Bytes{192, 168, 7, 9, 172, 16, 254, 3});
    check_checksums(f, tcp ? 6 : 17);
    // Nothing else moved.
    Bytes expect = orig;
    std::copy(f.begin() + o.l3, f.begin() + o.l3 + 20, expect.begin() + o.l3);
    put16(expect, o.l4 + l4_csum_offset(tcp ? 6 : 17), get16(f, o.l4 + l4_csum_offset(tcp ? 6 : 17)));
    CHECK(f == expect);
  }
}

TEST_CASE("a UDP checksum of 0 stays 0 through address and port rewrites") {
  Exec x;
  const Bytes orig = ipv4_udp(0, /*csum=*/false);
  x.add(orig);
  x.run("set(ipv4(src=1.2.3.4,dst=5.6.7.8)),set(udp(src=1,dst=2)),2");
  REQUIRE(x.tx(2).size() == 1);
  Bytes f = Exec::bytes(x.tx(2)[0]);
  const LayerOffsets o = offsets_of(f);
  CHECK(get16(f, o.l4) == 1);
  CHECK(get16(f, o.l4 + 2) == 2);
  check_checksums(f, 17, /*udp_zero=*/true);
}

TEST_CASE("set(tcp) and set(udp) ports update their checksums") {
  Exec x;
  x.add(ipv4_tcp());
  x.run("set(tcp(src=1,dst=65535)),2");
  Exec y;
  y.add(ipv6_udp());
  y.run("set(udp(dst=5353)),2");
  REQUIRE(x.tx(2).size() == 1);
  REQUIRE(y.tx(2).size() == 1);
  Bytes t = Exec::bytes(x.tx(2)[0]);
  Bytes u = Exec::bytes(y.tx(2)[0]);
  CHECK(get16(t, 34) == 1);
  CHECK(get16(t, 36) == 65535);
  check_checksums(t, 6);
  CHECK(get16(u, 54 + 2) == 5353);
  CHECK(get16(u, 54) == 546);
  check_checksums(u, 17);

  // The wrong protocol: left alone, counted.
  Exec z;
  const Bytes tcp = ipv4_tcp();
  z.add(tcp);
  z.run("set(udp(dst=1)),2");
  REQUIRE(z.tx(2).size() == 1);
  CHECK(Exec::bytes(z.tx(2)[0]) == tcp);
  CHECK(z.ctx->counters.header_missing == 1);
}

TEST_CASE("set(ipv6) addresses update the TCP checksum; tclass, label and hlimit live in the header") {
  Exec x;
  const Bytes orig = ipv6_tcp();
  check_checksums(orig, 6);
  x.add(orig);
  x.run("set(ipv6(src=2001:db8::99,dst=2001:db8:1::1)),2");
  REQUIRE(x.tx(2).size() == 1);
  Bytes f = Exec::bytes(x.tx(2)[0]);
  flow::In6Addr src, dst;
  std::memcpy(src.b, &f[14 + 8], 16);
  std::memcpy(dst.b, &f[14 + 24], 16);
  flow::In6Addr want_src{}, want_dst{};
  want_src.b[0] = 0x20, want_src.b[1] = 0x01, want_src.b[2] = 0x0d, want_src.b[3] = 0xb8,
  want_src.b[15] = 0x99;
  want_dst.b[0] = 0x20, want_dst.b[1] = 0x01, want_dst.b[2] = 0x0d, want_dst.b[3] = 0xb8, want_dst.b[5] = 1;
  want_dst.b[15] = 1;
  CHECK(src == want_src);
  CHECK(dst == want_dst);
  check_checksums(f, 6);

  Exec y;
  y.add(orig);
  y.run("set(ipv6(label=0xabcde,tclass=0xfc,hlimit=255)),2");
  REQUIRE(y.tx(2).size() == 1);
  Bytes g = Exec::bytes(y.tx(2)[0]);
  const uint32_t w = static_cast<uint32_t>(g[14] << 24 | g[15] << 16 | g[16] << 8 | g[17]);
  CHECK((w >> 28) == 6);
  CHECK(((w >> 20) & 0xff) == 0xfc);
  CHECK((w & 0xfffff) == 0xabcde);
  CHECK(g[14 + 7] == 255);
  CHECK(std::equal(orig.begin() + 18, orig.begin() + 21, g.begin() + 18));  // payload length, next header
  check_checksums(g, 6);  // the label is not in the pseudo-header

  // Masked: only the DSCP bits of tclass, only the low label bits.
  Exec z;
  z.add(orig);
  z.run("set(ipv6(tclass=0x80/0xfc,label=0x5/0xf)),2");
  Bytes h = Exec::bytes(z.tx(2)[0]);
  const uint32_t w2 = static_cast<uint32_t>(h[14] << 24 | h[15] << 16 | h[16] << 8 | h[17]);
  CHECK(((w2 >> 20) & 0xff) == (0x80 | (0x28 & 0x03)));
  CHECK((w2 & 0xfffff) == 0x12345);
}

TEST_CASE("set(ipv6) on an IPv6/UDP packet and set(ipv4) on an IPv6 packet") {
  Exec x;
  x.add(ipv6_udp());
  x.run("set(ipv6(src=fe80::aa)),2");
  REQUIRE(x.tx(2).size() == 1);
  check_checksums(Exec::bytes(x.tx(2)[0]), 17);

  Exec y;
  const Bytes orig = ipv6_tcp();
  y.add(orig);
  y.run("set(ipv4(ttl=1)),2");
  REQUIRE(y.tx(2).size() == 1);
  CHECK(Exec::bytes(y.tx(2)[0]) == orig);
  CHECK(y.ctx->counters.header_missing == 1);
}

TEST_CASE("set(eth) and masked sets of part of an address") {
  Exec x;
  const Bytes orig = ipv4_udp();
  x.add(orig);
  x.run(
      "set(eth(src=0a:0b:0c:0d:0e:0f,dst=aa:bb:cc:00:00:00/ff:ff:ff:00:00:00)),"
      "set(ipv4(src=192.168.0.0/255.255.0.0,dst=0.0.0.99/0.0.0.255)),2");
  REQUIRE(x.tx(2).size() == 1);
  Bytes f = Exec::bytes(x.tx(2)[0]);
  CHECK(Bytes(f.begin(), f.begin() + 12) ==
        Bytes{0xaa, 0xbb, 0xcc, 0x00, 0x00, 0x02, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f});
  CHECK(Bytes(f.begin() + 26, f.begin() + 34) == Bytes{192, 168, 0, 1, 10, 0, 0, 99});
  check_checksums(f, 17);
  // Key bits outside the mask are ignored.
  Exec y;
  y.add(orig);
  y.run("set(ipv4(src=35.8.2.41/255.255.255.0)),2");
  Bytes g = Exec::bytes(y.tx(2)[0]);
  CHECK(Bytes(g.begin() + 26, g.begin() + 30) == Bytes{35, 8, 2, 1});
  check_checksums(g, 17);
}

TEST_CASE("set(arp) rewrites op, sha, spa, tha, tpa of ARP frames, tagged or not, masked or not") {
  // The bytes Open vSwitch 3.1 sent (tx_pcap) for the same rewrites.
  const Bytes arp = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0,    0, 0, 0, 0x01, 0x08, 0x06,  // eth
                     0x00, 0x01, 0x08, 0x00, 6,    4,    0x00, 0x01,                             // htype..op
                     0x02, 0,    0,    0,    0,    0x01, 10,   0,    0, 1,                       // sha, spa
                     0,    0,    0,    0,    0,    0,    10,   0,    0, 2,                       // tha, tpa
                     0,    0,    0,    0,    0,    0,    0,    0,    0, 0, 0, 0,    0,    0,
                     0,    0,    0,    0};  // padding
  Exec x;
  x.add(arp);
  x.run("set(arp(sip=9.9.9.9,tip=1.2.3.4,op=2,sha=00:00:00:00:00:09,tha=00:00:00:00:00:07)),2");
  REQUIRE(x.tx(2).size() == 1);
  Bytes want = arp;
  want[21] = 2;
  want[27] = 9;
  for (int i = 22; i < 27; ++i) want[i] = 0;
  want[28] = want[29] = want[30] = want[31] = 9;
  want[37] = 7;
  want[38] = 1, want[39] = 2, want[40] = 3, want[41] = 4;
  CHECK(Exec::bytes(x.tx(2)[0]) == want);
  CHECK(x.ctx->counters.header_missing == 0);
  // Masked: only the low half of tpa; and behind an 802.1Q tag.
  Bytes tagged(arp.begin(), arp.begin() + 12);
  for (uint8_t b : {0x81, 0x00, 0x00, 0x07}) tagged.push_back(b);
  tagged.insert(tagged.end(), arp.begin() + 12, arp.end());
  Exec y;
  y.add(tagged);
  y.run("set(arp(tip=0.0.3.4/0.0.255.255)),2");
  REQUIRE(y.tx(2).size() == 1);
  Bytes want_t = tagged;
  want_t[44] = 3, want_t[45] = 4;
  CHECK(Exec::bytes(y.tx(2)[0]) == want_t);
  // Not an ARP frame: nothing written, counted.
  Exec z;
  const Bytes ip = ipv4_udp();
  z.add(ip);
  z.run("set(arp(tip=1.2.3.4)),2");
  REQUIRE(z.tx(2).size() == 1);
  CHECK(Exec::bytes(z.tx(2)[0]) == ip);
  CHECK(z.ctx->counters.header_missing == 1);
}

TEST_CASE("set(sctp) rewrites the ports and moves the CRC32c checksum with them") {
  // An IPv4/SCTP DATA frame (scapy) and what Open vSwitch 3.1 sent for
  // mod_tp_src:1: ports 5000 -> 1 and the checksum recomputed.
  auto hex = [](std::string_view h) {
    Bytes b;
    for (size_t i = 0; i + 1 < h.size(); i += 2)
      b.push_back(static_cast<uint8_t>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
    return b;
  };
  const Bytes in =
      hex("02000000000202000000000108004500004400010000408466330a0000010a000002138801bb0000000037b04e73000000"
          "2100000000000000000000000068656c6c6f20776f726c64203132333435000000");
  Exec x;
  x.add(in);
  x.run("set(sctp(src=1)),2");
  REQUIRE(x.tx(2).size() == 1);
  Bytes got = Exec::bytes(x.tx(2)[0]);
  CHECK(get16(got, 34) == 1);
  CHECK(Bytes(got.begin() + 36, got.end()) != Bytes(in.begin() + 36, in.end()));  // the checksum moved
  CHECK(got == hex("02000000000202000000000108004500004400010000408466330a0000010a000002000101bb0000000023d1d"
                   "08c0000002100000000000000000000000068656c6c6f20776f726c64203132333435000000"));
  // Back to 5000: the original frame, checksum and all.
  Exec y;
  y.add(got);
  y.run("set(sctp(src=5000)),2");
  REQUIRE(y.tx(2).size() == 1);
  CHECK(Exec::bytes(y.tx(2)[0]) == in);
  // On UDP: nothing written, counted.
  Exec z;
  z.add(ipv4_udp());
  z.run("set(sctp(src=1)),2");
  CHECK(Exec::bytes(z.tx(2)[0]) == ipv4_udp());
  CHECK(z.ctx->counters.header_missing == 1);
}

TEST_CASE("set(icmp) and set(icmpv6) write type and code and keep the checksum right") {
  // Echo request (type 8) -> echo reply (type 0): the ICMP checksum of the
  // whole message must still be right.
  Bytes f = {0x02, 0,  0, 0, 0, 0x02, 0x02, 0, 0, 0,  0, 0x01, 0x08, 0x00, 0x45, 0, 0, 28,   0,    1, 0,
             0,    64, 1, 0, 0, 10,   0,    0, 1, 10, 0, 0,    2,    8,    0,    0, 0, 0x12, 0x34, 0, 1};
  LayerOffsets o = offsets_of(f);
  auto icmp_sum = [&](const Bytes& g) { return finish(be_sum(g.data() + 34, g.size() - 34)); };
  put16(f, 24, finish(be_sum(f.data() + 14, 20)));
  put16(f, 36, icmp_sum(f));
  REQUIRE(icmp_sum(f) == 0);
  (void)o;
  Exec x;
  x.add(f);
  x.run("set(icmp(type=0,code=0)),2");
  REQUIRE(x.tx(2).size() == 1);
  Bytes g = Exec::bytes(x.tx(2)[0]);
  CHECK(g[34] == 0);
  CHECK(icmp_sum(g) == 0);
  // Not ICMPv6: counted, unchanged.
  Exec y;
  y.add(f);
  y.run("set(icmpv6(type=129,code=0)),2");
  CHECK(Exec::bytes(y.tx(2)[0]) == f);
  CHECK(y.ctx->counters.header_missing == 1);
}

TEST_CASE("trunc applies to the next output only") {
  Exec x;
  const Bytes orig = ipv4_udp();
  REQUIRE(orig.size() == 60);
  x.add(orig);
  x.run("trunc(20),2,3");
  REQUIRE(x.tx(2).size() == 1);
  REQUIRE(x.tx(3).size() == 1);
  CHECK(Exec::bytes(x.tx(2)[0]) == Bytes(orig.begin(), orig.begin() + 20));
  CHECK(Exec::bytes(x.tx(3)[0]) == orig);

  Exec y;  // trunc on the last output truncates the original; below 14 acts as 14
  y.add(orig);
  y.run("trunc(5),2");
  REQUIRE(y.tx(2).size() == 1);
  CHECK(Exec::bytes(y.tx(2)[0]) == Bytes(orig.begin(), orig.begin() + 14));

  Exec z;  // a clone's copies inherit a pending trunc, the originals lose it
  z.add(orig);
  z.run("trunc(30),clone(4),5");
  CHECK(z.tx(4)[0]->len() == 30);
  CHECK(z.tx(5)[0]->len() == 60);

  Exec w;  // longer than the packet: no change
  w.add(orig);
  w.run("trunc(1000),2");
  CHECK(w.tx(2)[0]->len() == 60);
}

TEST_CASE("clone duplicates; the original continues unchanged") {
  Exec x;
  const Bytes orig = ipv4_udp();
  x.add(orig);
  x.add(orig);
  x.run("clone(set(ipv4(ttl=1)),push_vlan(vid=7,pcp=0),3),2");
  auto c = x.tx(3), o = x.tx(2);
  REQUIRE(c.size() == 2);
  REQUIRE(o.size() == 2);
  for (int i = 0; i < 2; ++i) {
    CHECK(Exec::bytes(o[i]) == orig);
    Bytes f = Exec::bytes(c[i]);
    CHECK(f.size() == orig.size() + 4);
    CHECK(f[18 + 8] == 1);
    check_checksums(f, 17);
    CHECK(c[i] != o[i]);
    CHECK(c[i]->in_port() == 1);
  }
  CHECK(x.ctx->counters.outputs == 4);
  CHECK(x.available() == Exec::kBuffers - 4);

  // Several outputs: copies for all but the last.
  Exec y;
  y.add(orig);
  y.run("2,3,4");
  for (uint32_t p : {2u, 3u, 4u}) {
    REQUIRE(y.tx(p).size() == 1);
    CHECK(Exec::bytes(y.tx(p)[0]) == orig);
  }

  // No buffer for the copies: counted, the original still goes out.
  Exec z;
  z.backend.budget = 0;
  z.add(orig);
  z.run("clone(3),2");
  CHECK(z.tx(3).empty());
  CHECK(z.tx(2).size() == 1);
  CHECK(z.ctx->counters.copy_failed == 1);

  // A list that sends packets nowhere drops them (counted).
  Exec w;
  w.add(orig);
  w.run("clone(set(ipv4(ttl=1))),2");
  CHECK(w.tx(2).size() == 1);
  CHECK(w.ctx->counters.dropped == 1);
}

TEST_CASE("copies come from the output port's backend; a clone's from its first output's") {
  // Port 3 is "another NIC" (a DPDK port: its copies would be mbufs); the
  // rest use ctx.backend.
  Exec x;
  auto pool3 = hal::sim::Pool::create(64).value();
  PoolBackend nic(pool3);
  struct Arg {
    PoolBackend* nic;
  } arg{&nic};
  x.ctx->port_backend = [](void* a, uint32_t port) noexcept -> hal::Backend* {
    return port == 3 ? static_cast<Arg*>(a)->nic : nullptr;
  };
  x.ctx->port_backend_arg = &arg;
  const Bytes orig = ipv4_udp();
  x.add(orig);
  x.add(orig);
  x.run("3,2,clone(push_vlan(vid=7,pcp=0),3),clone(set(ipv4(ttl=1)),4),recirc(5),2");
  // 3 (not last): copies from the NIC; 2 (not last): default; the first
  // clone outputs to 3: the NIC; the second to 4: default; recirc: default;
  // the last output takes the originals.
  CHECK(nic.calls == 2);
  CHECK(nic.given == 4);
  CHECK(x.backend.calls == 3);
  CHECK(x.backend.given == 6);
  REQUIRE(x.tx(3).size() == 4);
  for (hal::Packet* p : x.tx(3)) CHECK(p->owner() == pool3.get());
  for (hal::Packet* p : x.tx(4)) CHECK(p->owner() != pool3.get());
  CHECK(Exec::bytes(x.tx(3)[0]) == orig);
  CHECK(Exec::bytes(x.tx(3)[2]).size() == orig.size() + 4);
  CHECK(x.tx(2).size() == 4);
  x.ctx->release_all();
  CHECK(pool3->available() == 64);
}

TEST_CASE("hash(l4) sets dp_hash from the key; recirc queues the packet with its id") {
  Exec x;
  x.add(ipv4_tcp());
  x.add(ipv6_tcp());
  x.run("hash(l4(7)),recirc(0x5)");
  auto q = x.ctx->recirc.packets();
  REQUIRE(q.size() == 2);
  for (unsigned i = 0; i < 2; ++i) {
    CHECK(q[i]->meta().recirc_id == 5);
    CHECK(q[i]->meta().dp_hash == flow::hash_l4(x.key(i), 7));
  }
  CHECK(q[0]->meta().dp_hash != q[1]->meta().dp_hash);
  CHECK(x.ctx->counters.recirculated == 2);

  // Not the last action: a copy recirculates, the original goes on.
  Exec y;
  y.add(ipv4_udp());
  y.run("recirc(0x9),2");
  REQUIRE(y.ctx->recirc.n == 1);
  CHECK(y.ctx->recirc.pkts[0]->meta().recirc_id == 9);
  REQUIRE(y.tx(2).size() == 1);
  CHECK(y.tx(2)[0]->meta().recirc_id == 0);
}

TEST_CASE("hash(l4) reuses the packet's RSS hash: dp_hash = hash_int(rss, basis), as odp-execute") {
  Exec x;
  x.add(ipv4_tcp()).pkt->set_rss_hash(0x12345678);
  x.add(ipv4_tcp());  // no RSS hash: the 5-tuple hash
  x.run("hash(l4(7)),recirc(0x5)");
  auto q = x.ctx->recirc.packets();
  REQUIRE(q.size() == 2);
  CHECK(q[0]->meta().dp_hash == hash_int(0x12345678, 7));
  CHECK(q[0]->meta().dp_hash == 0xc154f9a8u);  // Open vSwitch 3.1's hash_2words(0x12345678, 7)
  CHECK(q[1]->meta().dp_hash == flow::hash_l4(x.key(1), 7));
  CHECK(x.ctx->counters.header_missing == 0);
}

namespace {
// A PMD's bond slots with bond `id` holding `members`, as the PMD installs
// them (bond_table.h); the slots own nothing here: the test frees them.
struct Bonds {
  PmdBondSlots slots;
  BondMembers table{};
  BondBucketCounters counters;
  void set(uint32_t id) {
    slots[id].members.store(&table);
    slots[id].counters.store(&counters);
  }
};
}  // namespace

TEST_CASE("lb_output sends each packet to members[dp_hash & 255] and counts the bucket") {
  Exec x;
  auto bonds = std::make_unique<Bonds>();
  for (unsigned b = 0; b < kBondBuckets; ++b) bonds->table[b] = b % 2 ? 3 : 4;
  bonds->set(1);
  x.ctx->bonds = &bonds->slots;
  // RSS hashes whose buckets are known: hash_int(rss, 0) & 255.
  const uint32_t rss[] = {1, 2, 3, 4, 5, 6, 7, 8};
  unsigned to3 = 0, to4 = 0;
  for (uint32_t r : rss) {
    x.add(ipv4_udp()).pkt->set_rss_hash(r);
    ((hash_int(r, 0) & 255) % 2 ? to3 : to4)++;
  }
  REQUIRE(to3 > 0);
  REQUIRE(to4 > 0);
  x.run("hash(l4(0)),lb_output(1)");
  const auto on3 = x.tx(3), on4 = x.tx(4);
  CHECK(on3.size() == to3);
  CHECK(on4.size() == to4);
  for (hal::Packet* p : on3) CHECK(bonds->table[p->meta().dp_hash & 255] == 3);
  for (hal::Packet* p : on4) CHECK(bonds->table[p->meta().dp_hash & 255] == 4);
  uint64_t packets = 0, bytes = 0;
  for (unsigned b = 0; b < kBondBuckets; ++b) {
    packets += bonds->counters.packets[b].load();
    bytes += bonds->counters.bytes[b].load();
  }
  CHECK(packets == 8);
  CHECK(bytes == 8 * ipv4_udp().size());
  const uint32_t b1 = hash_int(1, 0) & 255;
  CHECK(bonds->counters.packets[b1].load() >= 1);
  CHECK(x.ctx->counters.outputs == 8);
  CHECK(x.ctx->counters.bond_drops == 0);
}

TEST_CASE("lb_output drops and counts without a table, a table array, or a member") {
  auto bonds = std::make_unique<Bonds>();
  bonds->table.fill(kNoBondMember);
  bonds->table[hash_int(9, 0) & 255] = 2;
  bonds->set(5);
  {
    Exec x;  // no bond slots at all
    x.add(ipv4_udp()).pkt->set_rss_hash(9);
    x.run("hash(l4(0)),lb_output(5)");
    CHECK(x.ctx->counters.bond_drops == 1);
    CHECK(x.tx(2).empty());
  }
  {
    Exec x;
    x.ctx->bonds = &bonds->slots;
    uint32_t other = 10;
    while ((hash_int(other, 0) & 255) == (hash_int(9, 0) & 255)) ++other;
    x.add(ipv4_udp()).pkt->set_rss_hash(9);  // the one bucket with a member
    x.add(ipv4_udp()).pkt->set_rss_hash(other);
    x.run("hash(l4(0)),lb_output(5)");
    CHECK(x.tx(2).size() == 1);
    CHECK(x.ctx->counters.bond_drops == 1);
    CHECK(bonds->counters.packets[hash_int(9, 0) & 255].load() == 1);
    CHECK(bonds->counters.packets[hash_int(other, 0) & 255].load() == 0);
    x.add(ipv4_udp()).pkt->set_rss_hash(9);
    x.run("hash(l4(0)),lb_output(6)");  // no bond 6
    CHECK(x.ctx->counters.bond_drops == 2);
  }
  {
    // Not the last action: a copy goes to the member, the original on.
    Exec x;
    x.ctx->bonds = &bonds->slots;
    x.add(ipv4_udp()).pkt->set_rss_hash(9);
    x.run("hash(l4(0)),lb_output(5),7");
    CHECK(x.tx(2).size() == 1);
    CHECK(x.tx(7).size() == 1);
    CHECK(x.tx(2)[0] != x.tx(7)[0]);
  }
}

TEST_CASE("userspace queues an upcall with pid, userdata and key") {
  Exec x;
  x.add(ipv4_udp());
  x.run("userspace(pid=42,userdata(c0ffee),actions),2");
  auto r = x.ctx->upcalls.requests();
  REQUIRE(r.size() == 1);
  CHECK(r[0].pid == 42);
  CHECK(Bytes(r[0].userdata.begin(), r[0].userdata.end()) == Bytes{0xc0, 0xff, 0xee});
  CHECK((r[0].flags & flow::kUserspaceActions));
  CHECK(r[0].key == &x.key(0));
  CHECK(x.tx(2).size() == 1);
  CHECK(r[0].pkt != x.tx(2)[0]);
}

TEST_CASE("drop, meter and batches larger than a burst") {
  Exec x;
  for (int i = 0; i < 40; ++i) x.add(ipv4_udp());
  x.run("meter(1),2");
  CHECK(x.tx(2).size() == 40);
  CHECK(x.ctx->counters.packets == 40);
  CHECK(x.ctx->counters.meter_ignored == 40);

  Exec y;
  y.add(ipv4_udp());
  y.add(ipv4_udp());
  y.run("drop");
  CHECK(y.ctx->counters.dropped == 2);
  CHECK(y.available() == Exec::kBuffers);
  y.add(ipv4_udp());
  y.run("2,drop,3");
  CHECK(y.tx(2).size() == 1);
  CHECK(y.tx(3).empty());
  CHECK(y.ctx->counters.dropped == 3);
}

TEST_CASE("full queues release and count") {
  // One port: capacity kExecOutputBatchCap.
  Exec x;
  for (unsigned i = 0; i < kExecOutputBatchCap + 8; ++i) x.add(ipv4_udp());
  x.run("2");
  CHECK(x.tx(2).size() == kExecOutputBatchCap);
  CHECK(x.ctx->counters.tx_overflow == 8);
  CHECK(x.ctx->counters.outputs == kExecOutputBatchCap);

  // More ports than slots.
  Exec y;
  y.add(ipv4_udp());
  std::string many;
  for (unsigned p = 0; p <= kExecMaxOutputPorts; ++p) many += (p ? "," : "") + std::to_string(p);
  y.run(many);
  CHECK(y.ctx->tx.active().size() == kExecMaxOutputPorts);
  CHECK(y.ctx->counters.tx_overflow == 1);

  // With a flush function nothing is lost: full batches are handed over.
  struct Sink {
    unsigned packets = 0, calls = 0;
    static void flush(void* arg, uint32_t, std::span<hal::Packet* const> pkts) noexcept {
      auto* s = static_cast<Sink*>(arg);
      s->packets += static_cast<unsigned>(pkts.size());
      ++s->calls;
      hal::release_burst(pkts);
    }
  } sink;
  Exec z;
  z.ctx->tx.set_flush(&Sink::flush, &sink);
  for (unsigned i = 0; i < kExecOutputBatchCap + 8; ++i) z.add(ipv4_udp());
  z.run("2");
  CHECK(sink.packets == kExecOutputBatchCap);
  CHECK(z.tx(2).size() == 8);
  CHECK(z.ctx->counters.tx_overflow == 0);
  z.add(ipv4_udp());
  z.run(many);
  // The 17th port found no slot: every batch (16 of them, port 2's holding 9) was flushed first.
  CHECK(sink.calls == 1 + kExecMaxOutputPorts);
  CHECK(sink.packets == kExecOutputBatchCap + 9 + (kExecMaxOutputPorts - 1));
  CHECK(z.ctx->tx.active().size() == 1);
  CHECK(z.tx(kExecMaxOutputPorts).size() == 1);
  CHECK(z.ctx->counters.tx_overflow == 0);

  // Recirculation and slow-path queues.
  Exec r;
  for (unsigned i = 0; i < kExecRecircCap + 3; ++i) r.add(ipv4_udp());
  r.run("recirc(0x1)");
  CHECK(r.ctx->recirc.n == kExecRecircCap);
  CHECK(r.ctx->counters.recirc_overflow == 3);
  Exec u;
  for (unsigned i = 0; i < kExecUpcallCap + 2; ++i) u.add(ipv4_udp());
  u.run("userspace(pid=1)");
  CHECK(u.ctx->upcalls.n == kExecUpcallCap);
  CHECK(u.ctx->counters.upcall_overflow == 2);
}

TEST_CASE("hash without a key and sets on a runt frame leave packets alone") {
  Exec x;
  ExecPacket& e = x.add(ipv4_udp());
  e.key = nullptr;
  x.run("hash(l4(0)),2");
  CHECK(x.ctx->counters.header_missing == 1);
  REQUIRE(x.tx(2).size() == 1);
  CHECK(x.tx(2)[0]->meta().dp_hash == 0);

  Exec y;
  const Bytes runt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  y.add(runt);
  y.run("set(eth(src=00:00:00:00:00:01)),push_vlan(vid=1,pcp=0),pop_vlan,set(ipv4(ttl=1)),set(tcp(src=1)),2");
  REQUIRE(y.tx(2).size() == 1);
  CHECK(Exec::bytes(y.tx(2)[0]) == runt);
  CHECK(y.ctx->counters.header_missing == 5);
}

TEST_CASE("IPv6 extension headers, ICMPv6 and IPv4 options: checksums still right") {
  // Hop-by-hop + destination options before TCP: the executor walks to TCP.
  {
    FrameBuilder fb;
    fb.eth(kMacB, kMacA, packet::kEthTypeIpv6)
        .ipv6(v6(0x2001, 1), v6(0x2001, 2), packet::kIpProtoHopOpts)
        .ipv6_ext(packet::kIpProtoDstOpts, 1)
        .ipv6_ext(packet::kIpProtoTcp)
        .tcp(1, 2, packet::kTcpSyn)
        .payload(9)
        .finish();
    Exec x;
    x.add(with_l4_csum(fb, 6));
    x.run("set(ipv6(src=2001::77,dst=2001::88)),2");
    REQUIRE(x.tx(2).size() == 1);
    check_checksums(Exec::bytes(x.tx(2)[0]), 6);
  }
  // ICMPv6 covers the pseudo-header too.
  {
    FrameBuilder fb;
    fb.eth(kMacB, kMacA, packet::kEthTypeIpv6)
        .ipv6(v6(0xfe80, 1), v6(0xff02, 1), packet::kIpProtoIcmpv6)
        .icmp6(128, 0, 0x00010002)
        .payload(8)
        .finish();
    Exec x;
    x.add(with_l4_csum(fb, 58));
    x.run("set(ipv6(src=fe80::1234)),2");
    REQUIRE(x.tx(2).size() == 1);
    check_checksums(Exec::bytes(x.tx(2)[0]), 58);
  }
  // A routing header with segments left: the pseudo-header's destination is
  // the final one, so rewriting ip6_dst leaves the TCP checksum alone (OVS).
  {
    FrameBuilder fb;
    fb.eth(kMacB, kMacA, packet::kEthTypeIpv6).ipv6(v6(0x2001, 1), v6(0x2001, 2), packet::kIpProtoRouting);
    fb.u8(packet::kIpProtoTcp).u8(0).u8(4).u8(1).u32(0);  // routing type 4, segments left 1
    fb.tcp(1, 2, packet::kTcpAck).payload(4).finish();
    Bytes f(fb.data(), fb.data() + fb.size());
    const LayerOffsets o = offsets_of(f);
    REQUIRE(o.payload != kNone);
    put16(f, o.l4 + 16, 0x1234);
    Exec x;
    x.add(f);
    x.run("set(ipv6(dst=2001::99)),2");
    REQUIRE(x.tx(2).size() == 1);
    Bytes g = Exec::bytes(x.tx(2)[0]);
    CHECK(get16(g, o.l4 + 16) == 0x1234);
    CHECK(g[14 + 24 + 15] == 0x99);
  }
  // IPv4 with options: fields at the same offsets, header checksum over all of it.
  {
    FrameBuilder fb;
    fb.eth(kMacB, kMacA, packet::kEthTypeIpv4)
        .ipv4(kIpA, kIpB, packet::kIpProtoTcp, {.ttl = 200, .option_words = 3})
        .tcp(10, 20, packet::kTcpAck)
        .payload(5)
        .finish();
    Exec x;
    x.add(with_l4_csum(fb, 6));
    x.run("set(ipv4(dst=8.8.4.4,ttl=199,tos=0x2/0x3)),set(tcp(dst=30)),2");
    REQUIRE(x.tx(2).size() == 1);
    Bytes g = Exec::bytes(x.tx(2)[0]);
    CHECK(g[14 + 1] == 0x02);
    check_checksums(g, 6);
  }
}

TEST_CASE("a later IPv4 fragment: addresses change, no L4 checksum is touched") {
  FrameBuilder fb;
  fb.eth(kMacB, kMacA, packet::kEthTypeIpv4)
      .ipv4(kIpA, kIpB, packet::kIpProtoUdp, {.frag_off = 100})
      .payload(24, 0x11)
      .finish();
  const Bytes orig(fb.data(), fb.data() + fb.size());
  Exec x;
  x.add(orig);
  x.run("set(ipv4(src=1.1.1.1)),set(udp(src=5)),2");
  REQUIRE(x.tx(2).size() == 1);
  Bytes g = Exec::bytes(x.tx(2)[0]);
  CHECK(std::equal(orig.begin() + 34, orig.end(), g.begin() + 34));  // the payload is untouched
  const LayerOffsets o = offsets_of(g);
  CHECK(get16(g, o.l3 + 10) == ipv4_header_csum(g, o));
  CHECK(x.ctx->counters.header_missing == 1);  // set(udp): no UDP header in this fragment
}

// --- drop accounting (drop_stats.h): one fate per received packet --------------

namespace {
// An Exec whose packets were received on port 7 (each holds its fate token)
// and whose context counts into `drops`.
struct Fates {
  Exec x;
  DropStats drops;
  Fates() { x.ctx->drops = &drops; }
  ExecPacket& add(const Bytes& f = ipv4_udp(), bool no_headroom = false) {
    ExecPacket& e = x.add(f, no_headroom);
    e.pkt->mark_received(7);
    return e;
  }
  DropTotals::Port port() const {
    x.ctx->flush_forwarded();  // as the PMD does once per iteration
    DropTotals t;
    drops.read(t);
    return t.ports[7];
  }
  uint64_t dropped(DropReason r) const { return port().dropped[static_cast<unsigned>(r)]; }
  uint64_t instances(DropReason r) const {
    DropTotals t;
    drops.read(t);
    return t.instances[static_cast<unsigned>(r)];
  }
};
}  // namespace

TEST_CASE("drop accounting: forwarded once however many outputs; a drop under the flow's reason") {
  Fates f;
  for (int i = 0; i < 3; ++i) f.add();
  f.x.run("2,3,4");  // flooded: three instances each on the wire
  CHECK(f.x.tx(2).size() == 3);
  CHECK(f.x.tx(4).size() == 3);
  CHECK(f.port().forwarded == 3);
  CHECK(f.port().dropped_total() == 0);

  f.add();
  f.add();
  f.x.ctx->drop_reason = DropReason::kNoBridge;  // the flow's (Megaflow::drop_reason)
  f.x.run("drop");
  CHECK(f.dropped(DropReason::kNoBridge) == 2);
  f.add();
  f.x.ctx->drop_reason = DropReason::kDropAction;
  f.x.run("set(ipv4(ttl=9))");  // sends it nowhere
  CHECK(f.dropped(DropReason::kDropAction) == 1);
  f.add();
  f.x.run("2,drop");  // an output, then a drop: forwarded
  CHECK(f.port().forwarded == 4);
  CHECK(f.instances(DropReason::kDropAction) == 2);  // the dropped original counted as a buffer
  CHECK(f.port().dropped_total() == 3);

  // A copy (no token) decides nothing.
  ExecPacket& e = f.x.add(ipv4_udp());
  e.pkt->set_rx_port(7);
  f.x.run("drop");
  CHECK(f.port().dropped_total() == 3);
  CHECK(f.instances(DropReason::kDropAction) == 3);
}

namespace {
// Runs `actions` on packets the test holds (as the PMD does with a
// recirculated packet, or an answer's).
void run_on(ExecContext& ctx, std::vector<hal::Packet*> pkts, std::string_view actions) {
  auto a = flow::parse_dp_actions(actions);
  REQUIRE(a.ok());
  std::vector<LayerOffsets> ofs(pkts.size());
  std::vector<ExecPacket> batch;
  for (size_t i = 0; i < pkts.size(); ++i) {
    ofs[i] = offsets_of(Bytes(pkts[i]->data(), pkts[i]->data() + pkts[i]->len()));
    batch.push_back({pkts[i], &ofs[i], nullptr});
  }
  execute_actions(ctx, batch, *a);
}
}  // namespace

TEST_CASE("drop accounting: the token goes on with a recirculation or the slow path, off when forwarded") {
  Fates f;
  f.add();
  f.x.run("recirc(0x1)");
  REQUIRE(f.x.ctx->recirc.n == 1);
  hal::Packet* p = f.x.ctx->recirc.pkts[0];
  CHECK(p->has_fate_token());  // undecided: its next pass decides
  CHECK(f.port().forwarded + f.port().dropped_total() == 0);
  f.x.ctx->recirc.clear();
  run_on(*f.x.ctx, {p}, "2");  // the second pass
  CHECK(f.port().forwarded == 1);

  // An output and a recirculation: forwarded now; the recirculated
  // instance is a copy from then on (its own drop is counted per buffer).
  f.add();
  f.x.run("2,recirc(0x1)");
  CHECK(f.port().forwarded == 2);
  REQUIRE(f.x.ctx->recirc.n == 1);
  p = f.x.ctx->recirc.pkts[0];
  CHECK_FALSE(p->has_fate_token());
  f.x.ctx->recirc.clear();
  run_on(*f.x.ctx, {p}, "drop");
  CHECK(f.port().dropped_total() == 0);
  CHECK(f.instances(DropReason::kDropAction) == 1);

  // The original dropped, its clone recirculated: the clone carries the
  // packet on, and its pass decides.
  f.add();
  f.x.run("clone(recirc(0x2)),drop");
  REQUIRE(f.x.ctx->recirc.n == 1);
  p = f.x.ctx->recirc.pkts[0];
  CHECK(p->has_fate_token());
  CHECK(f.port().dropped_total() == 0);
  f.x.ctx->recirc.clear();
  f.x.ctx->drop_reason = DropReason::kTooManyResubmit;
  run_on(*f.x.ctx, {p}, "drop");
  f.x.ctx->drop_reason = DropReason::kDropAction;
  CHECK(f.dropped(DropReason::kTooManyResubmit) == 1);

  // userspace() alone: the token goes up with the packet (the PMD counts
  // it as the slow path's when the handler consumed it).
  f.add();
  f.x.run("userspace(pid=1)");
  REQUIRE(f.x.ctx->upcalls.n == 1);
  CHECK(f.x.ctx->upcalls.reqs[0].pkt->has_fate_token());
  f.add();
  f.x.run("userspace(pid=1),2");
  REQUIRE(f.x.ctx->upcalls.n == 2);
  CHECK_FALSE(f.x.ctx->upcalls.reqs[1].pkt->has_fate_token());
  CHECK(f.port().forwarded == 3);
}

TEST_CASE("drop accounting: every drop of the executor under its reason") {
  SUBCASE("lb_output: no table, no member") {
    Fates f;
    auto bonds = std::make_unique<Bonds>();
    bonds->table.fill(kNoBondMember);
    bonds->set(5);
    f.x.ctx->bonds = &bonds->slots;
    f.add();
    f.x.run("hash(l4(0)),lb_output(5)");
    f.add();
    f.x.run("hash(l4(0)),lb_output(6)");
    CHECK(f.dropped(DropReason::kBondNoMember) == 1);
    CHECK(f.dropped(DropReason::kInvalidBond) == 1);
  }
  SUBCASE("push_vlan and tnl_push without headroom, tnl_pop with no vport") {
    Fates f;
    f.add(ipv4_udp(), true);
    f.x.run("push_vlan(vid=10,pcp=0),2");
    CHECK(f.dropped(DropReason::kVlanNoHeadroom) == 1);
    f.add(ipv4_udp(), true);
    f.x.run("tnl_push(tnl_port(3),header(size=50,type=4,eth(dst=02:00:00:00:00:02,src=02:00:00:00:00:01,"
            "dl_type=0x0800),ipv4(src=1.1.1.1,dst=2.2.2.2,proto=17,tos=0,ttl=64,frag=0x4000),"
            "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x7b)),out_port(2))");
    CHECK(f.dropped(DropReason::kTnlPushNoHeadroom) == 1);
    f.add();
    f.x.run("tnl_pop(3)");  // the context has no vport table
    CHECK(f.dropped(tnl_pop_drop_reason(packet::TnlPopResult::kNoVport)) == 1);
    CHECK(drop_reason_name(tnl_pop_drop_reason(packet::TnlPopResult::kNoVport)) == "tnl_pop_no_vport");
    CHECK(drop_reason_coverage(tnl_pop_drop_reason(packet::TnlPopResult::kNoVport)) ==
          "datapath_drop_invalid_tnl_port");
    CHECK(drop_reason_coverage(tnl_pop_drop_reason(packet::TnlPopResult::kTruncated)) ==
          "datapath_drop_tunnel_pop_error");
  }
  SUBCASE("full queues: output batch (no flush), recirculation, slow path") {
    Fates f;
    for (unsigned i = 0; i < kExecOutputBatchCap + 8; ++i) f.add();
    f.x.run("2");
    CHECK(f.dropped(DropReason::kTxBatchFull) == 8);
    CHECK(f.port().forwarded == kExecOutputBatchCap);
    Fates r;
    for (unsigned i = 0; i < kExecRecircCap + 3; ++i) r.add();
    r.x.run("recirc(0x1)");
    CHECK(r.dropped(DropReason::kRecircQueueFull) == 3);
    Fates u;
    for (unsigned i = 0; i < kExecUpcallCap + 2; ++i) u.add();
    u.x.run("userspace(pid=1)");
    CHECK(u.dropped(DropReason::kUserspaceLost) == 2);
  }
  SUBCASE("pool exhausted: a flood's copies not made, the original still forwarded") {
    Fates f;
    f.x.backend.budget = 0;
    for (int i = 0; i < 4; ++i) f.add();
    f.x.run("2,3,4");
    CHECK(f.x.tx(4).size() == 4);
    CHECK(f.x.tx(2).empty());
    CHECK(f.instances(DropReason::kPoolExhausted) == 8);
    CHECK(f.port().forwarded == 4);
    CHECK(f.port().dropped_total() == 0);
  }
}

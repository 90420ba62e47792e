// hal RSS (keel/hal/rss.h) and the sim NIC's multi-queue ports: the Toeplitz
// hash against the published RSS verification suite (Microsoft's "Verifying
// the RSS Hash Calculation", the same table as Intel's 82599 datasheet
// 7.1.2.8.3 and DPDK's app/test/test_thash.c), the frame walk that finds its
// input, the default RETA, and ring/pcap ports with rxq=N: spread, per-flow
// order, one flow one queue, hashes on the packets, and the merged (offline)
// read in file order.
#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "hal/sim/pcap_file.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "keel/hal/rss.h"
#include "sim_test_util.h"

using namespace keel::hal;
using Bytes = std::vector<uint8_t>;

namespace {

struct V4Vector {
  std::array<uint8_t, 4> dst, src;
  uint16_t dst_port, src_port;
  uint32_t hash_ip, hash_ip_l4;
};

// The IPv4 half of the verification suite: destination, source, ports,
// then the hash over the addresses and over addresses and ports.
const V4Vector kV4[] = {
    {{161, 142, 100, 80}, {66, 9, 149, 187}, 1766, 2794, 0x323e8fc2, 0x51ccc178},
    {{65, 69, 140, 83}, {199, 92, 111, 2}, 4739, 14230, 0xd718262a, 0xc626b0ea},
    {{12, 22, 207, 184}, {24, 19, 198, 95}, 38024, 12898, 0xd2d0a5de, 0x5c2b394a},
    {{209, 142, 163, 6}, {38, 27, 205, 30}, 2217, 48228, 0x82989176, 0xafc7327f},
    {{202, 188, 127, 2}, {153, 39, 163, 191}, 1303, 44251, 0x5d1809c5, 0x10e828a2},
};

struct V6Vector {
  std::array<uint8_t, 16> dst, src;
  uint16_t dst_port, src_port;
  uint32_t hash_ip, hash_ip_l4;
};

const V6Vector kV6[] = {
    // 3ffe:2501:200:3::1 <- 3ffe:2501:200:1fff::7
    {{0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x01},
     {0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x07},
     1766,
     2794,
     0x2cc18cd5,
     0x40207d3d},
    // ff02::1 <- 3ffe:501:8::260:97ff:fe40:efab
    {{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01},
     {0x3f, 0xfe, 0x05, 0x01, 0x00, 0x08, 0x00, 0x00, 0x02, 0x60, 0x97, 0xff, 0xfe, 0x40, 0xef, 0xab},
     4739,
     14230,
     0x0f0c461c,
     0xdde51bbf},
    // fe80::200:f8ff:fe21:67cf <- 3ffe:1900:4545:3:200:f8ff:fe21:67cf
    {{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0xf8, 0xff, 0xfe, 0x21, 0x67, 0xcf},
     {0x3f, 0xfe, 0x19, 0x00, 0x45, 0x45, 0x00, 0x03, 0x02, 0x00, 0xf8, 0xff, 0xfe, 0x21, 0x67, 0xcf},
     38024,
     44251,
     0x4b61e985,
     0x02d1feef},
};

void put16(Bytes& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v >> 8);
  b[at + 1] = static_cast<uint8_t>(v);
}

// Ethernet (+ VLAN tags) + IPv4 + an 8-byte L4 header of `proto`.
Bytes ipv4_frame(const std::array<uint8_t, 4>& src, const std::array<uint8_t, 4>& dst, uint8_t proto,
                 uint16_t sport, uint16_t dport, unsigned vlans = 0, uint16_t frag = 0, size_t payload = 18) {
  const size_t l3 = 14 + 4 * vlans;
  Bytes f(l3 + 20 + 8 + payload, 0);
  for (unsigned v = 0; v < vlans; ++v) put16(f, 12 + 4 * v, v == 0 && vlans == 2 ? 0x88a8 : 0x8100);
  put16(f, l3 - 2, 0x0800);
  f[l3] = 0x45;
  put16(f, l3 + 2, static_cast<uint16_t>(20 + 8 + payload));
  put16(f, l3 + 6, frag);
  f[l3 + 8] = 64;
  f[l3 + 9] = proto;
  std::memcpy(&f[l3 + 12], src.data(), 4);
  std::memcpy(&f[l3 + 16], dst.data(), 4);
  put16(f, l3 + 20, sport);
  put16(f, l3 + 22, dport);
  return f;
}

Bytes ipv6_frame(const std::array<uint8_t, 16>& src, const std::array<uint8_t, 16>& dst, uint8_t next,
                 uint16_t sport, uint16_t dport) {
  Bytes f(14 + 40 + 8 + 10, 0);
  put16(f, 12, 0x86dd);
  f[14] = 0x60;
  put16(f, 18, 18);
  f[20] = next;
  f[21] = 64;
  std::memcpy(&f[22], src.data(), 16);
  std::memcpy(&f[38], dst.data(), 16);
  put16(f, 54, sport);
  put16(f, 56, dport);
  return f;
}

uint32_t frame_hash(const Bytes& f) {
  uint32_t h = 0;
  REQUIRE(rss_hash_frame(f.data(), static_cast<uint32_t>(f.size()), h));
  return h;
}

bool hashes(const Bytes& f) {
  uint32_t h = 0;
  return rss_hash_frame(f.data(), static_cast<uint32_t>(f.size()), h);
}

}  // namespace

TEST_CASE("Toeplitz: the IPv4 verification vectors, with and without ports") {
  for (const V4Vector& v : kV4) {
    uint8_t in[12];
    std::memcpy(in, v.src.data(), 4);
    std::memcpy(in + 4, v.dst.data(), 4);
    in[8] = static_cast<uint8_t>(v.src_port >> 8), in[9] = static_cast<uint8_t>(v.src_port);
    in[10] = static_cast<uint8_t>(v.dst_port >> 8), in[11] = static_cast<uint8_t>(v.dst_port);
    CHECK(toeplitz_hash({in, 8}) == v.hash_ip);
    CHECK(toeplitz_hash({in, 12}) == v.hash_ip_l4);
    CHECK(toeplitz_hash_reference(kDefaultRssKey, {in, 8}) == v.hash_ip);
    CHECK(toeplitz_hash_reference(kDefaultRssKey, {in, 12}) == v.hash_ip_l4);
  }
}

TEST_CASE("Toeplitz: the IPv6 verification vectors, with and without ports") {
  for (const V6Vector& v : kV6) {
    uint8_t in[36];
    std::memcpy(in, v.src.data(), 16);
    std::memcpy(in + 16, v.dst.data(), 16);
    in[32] = static_cast<uint8_t>(v.src_port >> 8), in[33] = static_cast<uint8_t>(v.src_port);
    in[34] = static_cast<uint8_t>(v.dst_port >> 8), in[35] = static_cast<uint8_t>(v.dst_port);
    CHECK(toeplitz_hash({in, 32}) == v.hash_ip);
    CHECK(toeplitz_hash({in, 36}) == v.hash_ip_l4);
    CHECK(toeplitz_hash_reference(kDefaultRssKey, {in, 32}) == v.hash_ip);
    CHECK(toeplitz_hash_reference(kDefaultRssKey, {in, 36}) == v.hash_ip_l4);
  }
}

TEST_CASE("Toeplitz: the table equals the bit-by-bit definition on random inputs") {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    uint8_t in[kRssMaxInput];
    for (uint8_t& b : in) b = static_cast<uint8_t>(rng());
    const size_t n = rng() % (kRssMaxInput + 1);
    CHECK(toeplitz_hash({in, n}) == toeplitz_hash_reference(kDefaultRssKey, {in, n}));
  }
}

TEST_CASE("rss_hash_frame: the NIC's default RSS types (ip, tcp, udp) from a frame") {
  const V4Vector& v = kV4[0];
  // TCP and UDP: addresses and ports.
  CHECK(frame_hash(ipv4_frame(v.src, v.dst, 6, v.src_port, v.dst_port)) == v.hash_ip_l4);
  CHECK(frame_hash(ipv4_frame(v.src, v.dst, 17, v.src_port, v.dst_port)) == v.hash_ip_l4);
  // Behind one 802.1Q tag, and behind 802.1ad + 802.1Q.
  CHECK(frame_hash(ipv4_frame(v.src, v.dst, 17, v.src_port, v.dst_port, 1)) == v.hash_ip_l4);
  CHECK(frame_hash(ipv4_frame(v.src, v.dst, 6, v.src_port, v.dst_port, 2)) == v.hash_ip_l4);
  // Other IP protocols (ICMP, SCTP, GRE): addresses only.
  CHECK(frame_hash(ipv4_frame(v.src, v.dst, 1, v.src_port, v.dst_port)) == v.hash_ip);
  CHECK(frame_hash(ipv4_frame(v.src, v.dst, 132, v.src_port, v.dst_port)) == v.hash_ip);
  // Fragments (first: MF set; later: an offset) hash the addresses only,
  // so one datagram's fragments share a queue.
  CHECK(frame_hash(ipv4_frame(v.src, v.dst, 17, v.src_port, v.dst_port, 0, 0x2000)) == v.hash_ip);
  CHECK(frame_hash(ipv4_frame(v.src, v.dst, 17, v.src_port, v.dst_port, 0, 0x0010)) == v.hash_ip);
  // DF alone is no fragment.
  CHECK(frame_hash(ipv4_frame(v.src, v.dst, 17, v.src_port, v.dst_port, 0, 0x4000)) == v.hash_ip_l4);
  // A UDP header cut before its ports: addresses only.
  Bytes cut = ipv4_frame(v.src, v.dst, 17, v.src_port, v.dst_port, 0, 0, 0);
  cut.resize(14 + 20 + 2);
  CHECK(frame_hash(cut) == v.hash_ip);

  const V6Vector& w = kV6[1];
  CHECK(frame_hash(ipv6_frame(w.src, w.dst, 6, w.src_port, w.dst_port)) == w.hash_ip_l4);
  CHECK(frame_hash(ipv6_frame(w.src, w.dst, 17, w.src_port, w.dst_port)) == w.hash_ip_l4);
  CHECK(frame_hash(ipv6_frame(w.src, w.dst, 58, w.src_port, w.dst_port)) == w.hash_ip);  // ICMPv6
  CHECK(frame_hash(ipv6_frame(w.src, w.dst, 0, w.src_port, w.dst_port)) == w.hash_ip);   // hop-by-hop

  // No IP, or a header cut short: no hash.
  Bytes arp(60, 0);
  put16(arp, 12, 0x0806);
  CHECK_FALSE(hashes(arp));
  CHECK_FALSE(hashes(Bytes(13, 0)));
  Bytes short4 = ipv4_frame(v.src, v.dst, 17, 1, 2);
  short4.resize(14 + 19);
  CHECK_FALSE(hashes(short4));
  Bytes badihl = ipv4_frame(v.src, v.dst, 17, 1, 2);
  badihl[14] = 0x44;  // IHL 4
  CHECK_FALSE(hashes(badihl));
  Bytes short6 = ipv6_frame(w.src, w.dst, 17, 1, 2);
  short6.resize(14 + 39);
  CHECK_FALSE(hashes(short6));
}

TEST_CASE("RETA: 128 entries, entry i = i % N") {
  for (unsigned n : {1u, 2u, 3u, 4u, 16u}) {
    const RssReta reta(n);
    for (uint32_t h = 0; h < 1024; ++h) CHECK(reta.queue_for(h) == (h % 128) % n);
    CHECK(reta.queue_for(0xffffff80u) == 0);
  }
}

namespace {

// A UDP frame of flow `flow` carrying `seq` in its payload.
Bytes flow_frame(const std::array<uint8_t, 4>& src, const std::array<uint8_t, 4>& dst, uint16_t sport,
                 uint16_t dport, uint32_t flow, uint32_t seq) {
  Bytes f = ipv4_frame(src, dst, 17, sport, dport);
  std::memcpy(&f[14 + 28], &flow, 4);
  std::memcpy(&f[14 + 32], &seq, 4);
  return f;
}

struct Flow {
  std::array<uint8_t, 4> src, dst;
  uint16_t sport, dport;
};

std::vector<Flow> random_flows(size_t n) {
  std::mt19937 rng(2026);
  std::vector<Flow> v(n);
  for (Flow& f : v) {
    for (auto& b : f.src) b = static_cast<uint8_t>(rng());
    for (auto& b : f.dst) b = static_cast<uint8_t>(rng());
    f.sport = static_cast<uint16_t>(rng());
    f.dport = static_cast<uint16_t>(rng());
  }
  return v;
}

uint32_t u32_at(const Packet* p, size_t at) {
  uint32_t v;
  std::memcpy(&v, p->data() + at, 4);
  return v;
}

// What one queue received: (flow, seq) per packet, in order.
struct Received {
  std::vector<std::pair<uint32_t, uint32_t>> pkts;
};

// Checks queue spread (each of 4 queues within 10 % of flows / 4), that a
// flow's packets all came on one queue, and in order.
void check_spread(const std::array<Received, 4>& got, size_t flows, size_t per_flow) {
  std::map<uint32_t, unsigned> queue_of;
  std::array<size_t, 4> flows_on{};
  size_t total = 0;
  for (unsigned q = 0; q < 4; ++q) {
    std::map<uint32_t, uint32_t> next_seq;
    for (const auto& pkt : got[q].pkts) {
      // Plain variables, not structured bindings: clang 14 can't capture
      // those in doctest's message lambdas.
      const uint32_t flow = pkt.first, seq = pkt.second;
      const auto ins = queue_of.emplace(flow, q);
      if (ins.second) ++flows_on[q];
      const unsigned on = ins.first->second;
      CHECK_MESSAGE(on == q, "flow ", flow, " on queues ", on, " and ", q);
      CHECK_MESSAGE(next_seq[flow]++ == seq, "flow ", flow, " out of order on queue ", q);
    }
    total += got[q].pkts.size();
  }
  CHECK(total == flows * per_flow);
  CHECK(queue_of.size() == flows);
  for (unsigned q = 0; q < 4; ++q) {
    INFO("queue ", q, ": ", flows_on[q], " flows");
    CHECK(flows_on[q] >= flows / 4 * 9 / 10);
    CHECK(flows_on[q] <= flows / 4 * 11 / 10);
  }
}

}  // namespace

TEST_CASE("ring:rxq=4 spreads 10k random 5-tuple flows over 4 queues, one flow one queue, in order") {
  constexpr size_t kFlows = 10000, kPerFlow = 3;
  auto be = keel::test::sim_backend(kFlows * kPerFlow + 1024);
  auto port = keel::test::open_ok(*be, "r0", "ring:size=16384,rxq=4");
  REQUIRE(port->n_rxq() == 4);
  auto& ring = dynamic_cast<sim::RingPort&>(*port);
  const std::vector<Flow> flows = random_flows(kFlows);
  for (uint32_t seq = 0; seq < kPerFlow; ++seq) {
    for (uint32_t i = 0; i < kFlows; ++i) {
      const Flow& fl = flows[i];
      const Bytes f = flow_frame(fl.src, fl.dst, fl.sport, fl.dport, i, seq);
      Packet* p = nullptr;
      REQUIRE(be->alloc_burst({&p, 1}) == 1);
      REQUIRE(p->set_len(static_cast<uint32_t>(f.size())));
      std::memcpy(p->data(), f.data(), f.size());
      REQUIRE(ring.inject({&p, 1}) == 1);
    }
  }
  CHECK(ring.rx_pending() == kFlows * kPerFlow);
  std::array<Received, 4> got;
  for (uint16_t q = 0; q < 4; ++q) {
    std::array<Packet*, kMaxBurst> burst;
    uint16_t n;
    while ((n = port->rx(q, burst)) > 0) {
      for (uint16_t i = 0; i < n; ++i) {
        Packet* p = burst[i];
        REQUIRE(p->has_rss_hash());
        CHECK(p->rss_hash() == frame_hash(Bytes(p->data(), p->data() + p->len())));
        CHECK(RssReta(4).queue_for(p->rss_hash()) == q);
        got[q].pkts.emplace_back(u32_at(p, 14 + 28), u32_at(p, 14 + 32));
      }
      release_burst(std::span(burst.data(), n));
    }
  }
  check_spread(got, kFlows, kPerFlow);
  // Per-queue counters add up to the port's.
  CHECK(port->counters().rx_packets == kFlows * kPerFlow);
}

TEST_CASE("ring:rxq=4: frames without IP go to queue 0 with no hash; rxq=1 hashes nothing") {
  auto be = keel::test::sim_backend();
  auto port = keel::test::open_ok(*be, "r0", "ring:rxq=4");
  auto& ring = dynamic_cast<sim::RingPort&>(*port);
  Packet* p = nullptr;
  REQUIRE(be->alloc_burst({&p, 1}) == 1);
  REQUIRE(p->set_len(60));
  std::memset(p->data(), 0, 60);
  p->data()[12] = 0x08, p->data()[13] = 0x06;  // ARP
  REQUIRE(ring.inject({&p, 1}) == 1);
  CHECK(ring.rx_pending(0) == 1);
  std::array<Packet*, kMaxBurst> burst;
  REQUIRE(port->rx(0, burst) == 1);
  CHECK_FALSE(burst[0]->has_rss_hash());
  release(burst[0]);

  auto one = keel::test::open_ok(*be, "r1", "ring");
  CHECK(one->n_rxq() == 1);
  auto& r1 = dynamic_cast<sim::RingPort&>(*one);
  const Bytes f = ipv4_frame(kV4[0].src, kV4[0].dst, 17, 1, 2);
  REQUIRE(be->alloc_burst({&p, 1}) == 1);
  REQUIRE(p->set_len(static_cast<uint32_t>(f.size())));
  std::memcpy(p->data(), f.data(), f.size());
  REQUIRE(r1.inject({&p, 1}) == 1);
  REQUIRE(one->rx(0, burst) == 1);
  CHECK_FALSE(burst[0]->has_rss_hash());
  release(burst[0]);
  CHECK(port->describe() == "ring size=1024 rxq=4");
}

TEST_CASE("pcap:in=X,rxq=4: each queue replays its flows in file order; merged, the file's order") {
  keel::test::TempDir dir;
  const std::string path = dir.file("in.pcap");
  constexpr size_t kFlows = 10000, kPerFlow = 2, kLoops = 2;
  const std::vector<Flow> flows = random_flows(kFlows);
  std::vector<Bytes> frames;
  {
    auto w = sim::PcapWriter::create(path);
    REQUIRE(w.ok());
    for (uint32_t seq = 0; seq < kPerFlow; ++seq)
      for (uint32_t i = 0; i < kFlows; ++i) {
        const Flow& fl = flows[i];
        frames.push_back(flow_frame(fl.src, fl.dst, fl.sport, fl.dport, i, seq));
        REQUIRE(w.value()->write(frames.back(), 1000 + frames.size()));
      }
    Bytes arp(60, 0);
    put16(arp, 12, 0x0806);
    frames.push_back(arp);
    REQUIRE(w.value()->write(arp, 1000 + frames.size()));
    REQUIRE(w.value()->close().ok());
  }
  auto be = keel::test::sim_backend(8192);

  SUBCASE("four queues") {
    auto port = keel::test::open_ok(*be, "p0", "pcap:in=" + path + ",rxq=4,loop=2");
    REQUIRE(port->n_rxq() == 4);
    CHECK(port->input_state() == InputState::pending);
    std::array<Received, 4> got;
    size_t arps = 0;
    // Poll the queues round-robin, as one PMD polling all four does.
    for (bool any = true; any;) {
      any = false;
      for (uint16_t q = 0; q < 4; ++q) {
        std::array<Packet*, kMaxBurst> burst;
        const uint16_t n = port->rx(q, burst);
        any |= n > 0;
        for (uint16_t i = 0; i < n; ++i) {
          Packet* p = burst[i];
          if (p->data()[12] == 0x08 && p->data()[13] == 0x06) {  // the ARP frame
            CHECK(q == 0);
            CHECK_FALSE(p->has_rss_hash());
            ++arps;
            continue;
          }
          REQUIRE(p->has_rss_hash());
          CHECK(RssReta(4).queue_for(p->rss_hash()) == q);
          // Loop 2 repeats loop 1: seq counts on across loops.
          const uint32_t seq = u32_at(p, 14 + 32);
          got[q].pkts.emplace_back(u32_at(p, 14 + 28), seq);
        }
        release_burst(std::span(burst.data(), n));
      }
    }
    CHECK(port->input_state() == InputState::drained);
    CHECK(arps == kLoops);
    CHECK(port->counters().rx_packets == frames.size() * kLoops);
    // Per flow: seq 0, 1, 0, 1 (two loops) on one queue.
    std::array<Received, 4> renumbered;
    for (unsigned q = 0; q < 4; ++q) {
      std::map<uint32_t, uint32_t> n;
      for (auto [flow, seq] : got[q].pkts) {
        CHECK(seq == n[flow] % kPerFlow);
        renumbered[q].pkts.emplace_back(flow, n[flow]++);
      }
    }
    check_spread(renumbered, kFlows, kPerFlow * kLoops);
  }

  SUBCASE("merged for an offline run: queue 0 hands out the file in order, with the hashes") {
    auto port = keel::test::open_ok(*be, "p0", "pcap:in=" + path + ",rxq=4");
    CHECK(port->merge_rx_queues() == 1);
    std::array<Packet*, kMaxBurst> burst;
    CHECK(port->rx(1, burst) == 0);
    size_t i = 0;
    uint16_t n;
    while ((n = port->rx(0, burst)) > 0) {
      for (uint16_t k = 0; k < n; ++k, ++i) {
        REQUIRE(i < frames.size());
        CHECK(Bytes(burst[k]->data(), burst[k]->data() + burst[k]->len()) == frames[i]);
        CHECK(burst[k]->has_rss_hash() == (i + 1 != frames.size()));  // the ARP frame is last
      }
      release_burst(std::span(burst.data(), n));
    }
    CHECK(i == frames.size());
    CHECK(port->input_state() == InputState::drained);
  }

  SUBCASE("offline with several readers: each queue's timestamps are its own") {
    // The same records stamped 1 us apart (record i at i + 1 us), read by
    // queue without merging, as an offline run with several PMDs does.
    const std::string ts_path = dir.file("ts.pcap");
    {
      auto w = sim::PcapWriter::create(ts_path);
      REQUIRE(w.ok());
      for (size_t i = 0; i < frames.size(); ++i) REQUIRE(w.value()->write(frames[i], (i + 1) * 1000));
      REQUIRE(w.value()->close().ok());
    }
    const RssReta reta(4);
    std::array<std::vector<uint64_t>, 4> stamps;  // per queue, its records' stamps in file order
    for (size_t i = 0; i < frames.size(); ++i)
      stamps[hashes(frames[i]) ? reta.queue_for(frame_hash(frames[i])) : 0].push_back((i + 1) * 1000);
    auto port = keel::test::open_ok(*be, "p0", "pcap:in=" + ts_path + ",rxq=4");
    REQUIRE(port->input_kind() == Port::InputKind::finite_replay);
    for (uint16_t q = 0; q < 4; ++q) {
      REQUIRE(stamps[q].size() > 40);
      CHECK(port->next_rx_timestamp_ns(q) == stamps[q][0]);
      // Records of this queue only: its 5th record's stamp has 4 before it.
      CHECK(port->rx_records_before(q, stamps[q][4], false, 32) == 4);
      CHECK(port->rx_records_before(q, stamps[q][4], true, 32) == 5);
    }
    // Reading queue 0 moves queue 0's answers only.
    std::array<Packet*, kMaxBurst> burst;
    REQUIRE(port->rx(0, std::span(burst.data(), 3)) == 3);
    release_burst(std::span(burst.data(), 3));
    CHECK(port->next_rx_timestamp_ns(0) == stamps[0][3]);
    CHECK(port->rx_records_before(0, stamps[0][4], false, 32) == 1);
    CHECK(port->next_rx_timestamp_ns(1) == stamps[1][0]);
    // Drained queue by queue: a drained queue has no next record, the others still do.
    uint16_t n;
    while ((n = port->rx(1, burst)) > 0) release_burst(std::span(burst.data(), n));
    CHECK(port->next_rx_timestamp_ns(1) == Port::kNoRecord);
    CHECK(port->rx_records_before(1, ~uint64_t{0} - 1, true, 32) == 0);
    CHECK(port->next_rx_timestamp_ns(2) == stamps[2][0]);
    CHECK(port->input_state() == InputState::pending);
    for (uint16_t q : {0, 2, 3})
      while ((n = port->rx(q, burst)) > 0) release_burst(std::span(burst.data(), n));
    CHECK(port->input_state() == InputState::drained);
    for (uint16_t q = 0; q < 4; ++q) CHECK(port->next_rx_timestamp_ns(q) == Port::kNoRecord);
  }

  SUBCASE("an output-only pcap port and a TAP keep one queue") {
    auto out = keel::test::open_ok(*be, "p1", "pcap:out=" + dir.file("out.pcap"));
    CHECK(out->n_rxq() == 1);
    CHECK(out->merge_rx_queues() == 1);
  }
}

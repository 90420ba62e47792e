// bench_parser — what the PMD pays per packet to turn a received frame into
// a flow key: parse + miniflow + hash (packet::parse_burst), in bursts of 32.
//
// Each scenario fills 1024 distinct packets from a sim pool (different
// 5-tuples, so keys and hashes differ) and cycles over them burst by burst,
// so descriptors and headers come from L1/L2 as they would shortly after a
// NIC's DMA, not from one hot line. Hashes are computed in software (the sim
// packets carry no RSS hash) except in the *_rss scenario, which shows what
// the NIC's RSS hash saves.
//
// Reported per benchmark: items_per_second (= packets/s on one core) and
// pkt_time (time per packet; both from CPU time). Run (see
// tests/bench/RESULTS.md):
//   ./build/host/tests/bench/bench_parser --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "hal/sim/pool.h"
#include "keel/hal/packet.h"
#include "packet/frame_builder.h"
#include "packet/parser.h"

using namespace keel;
using namespace keel::packet;

namespace {

constexpr unsigned kPackets = 1024;  // distinct packets cycled over
constexpr unsigned kBurst = hal::kMaxBurst;
static_assert(kPackets % kBurst == 0, "whole bursts");

constexpr flow::EthAddr kMacA{{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
constexpr flow::EthAddr kMacB{{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}};

flow::In6Addr v6(uint16_t first, unsigned low) {
  flow::In6Addr a{};
  a.b[0] = static_cast<uint8_t>(first >> 8);
  a.b[1] = static_cast<uint8_t>(first);
  a.b[14] = static_cast<uint8_t>(low >> 8);
  a.b[15] = static_cast<uint8_t>(low);
  return a;
}

enum class Scenario { ipv4_udp, ipv4_udp_rss, ipv6_tcp, vlan_ipv4_udp, vxlan_decap };

// Frame i of a scenario; 64 bytes (no FCS) unless the headers need more.
FrameBuilder frame(Scenario s, unsigned i) {
  FrameBuilder f;
  const auto sport = static_cast<uint16_t>(10000 + i);
  const uint32_t src = 0x0a000000 | (i & 0xff), dst = 0x0a010000 | (i >> 8);
  switch (s) {
    case Scenario::ipv4_udp:
    case Scenario::ipv4_udp_rss:
    case Scenario::vxlan_decap:  // the inner frame; the outer header is TunnelMetadata
      f.eth(kMacB, kMacA, kEthTypeIpv4).ipv4(src, dst, kIpProtoUdp).udp(sport, 5001).payload(22).finish();
      break;
    case Scenario::ipv6_tcp:
      f.eth(kMacB, kMacA, kEthTypeIpv6).ipv6(v6(0x2001, i), v6(0x2001, 0xffff - i), kIpProtoTcp);
      f.tcp(sport, 443, kTcpAck).payload(12).finish();  // 86 bytes
      break;
    case Scenario::vlan_ipv4_udp:
      f.eth(kMacB, kMacA).vlan(static_cast<uint16_t>(100 + i % 8)).ethertype(kEthTypeIpv4);
      f.ipv4(src, dst, kIpProtoUdp).udp(sport, 5001).payload(22).finish();  // 68 bytes
      break;
  }
  return f;
}

struct Fixture {
  std::shared_ptr<hal::sim::Pool> pool;
  std::vector<hal::Packet*> pkts;
  std::vector<PacketMetadata> md;  // vxlan_decap: per-packet tunnel metadata

  explicit Fixture(Scenario s) {
    pool = hal::sim::Pool::create(kPackets).value();
    for (unsigned i = 0; i < kPackets; ++i) {
      hal::Packet* p = pool->alloc();
      const FrameBuilder f = frame(s, i);
      std::memcpy(p->data(), f.data(), f.size());
      (void)p->set_len(f.size());
      p->set_in_port(1);
      if (s == Scenario::ipv4_udp_rss) p->set_rss_hash(0x9e3779b9u * i);
      pkts.push_back(p);
      if (s == Scenario::vxlan_decap) {
        PacketMetadata m;
        m.in_port = 7;  // the VXLAN port
        m.tunnel.tun_id = flow::be64{hton32((100 + i % 16) << 8)} << 32;
        m.tunnel.ipv4_src = hton32(0xac1f0102);
        m.tunnel.ipv4_dst = hton32(0xac1f0101);
        m.tunnel.flags = flow::kTunKey;
        m.tunnel.ttl = 64;
        m.tunnel.tp_src = hton16(static_cast<uint16_t>(49152 + i % 1024));
        m.tunnel.tp_dst = hton16(4789);
        md.push_back(m);
      }
    }
  }
  ~Fixture() { hal::release_burst(pkts); }
};

void BM_parse(benchmark::State& state, Scenario s) {
  Fixture fx(s);
  alignas(64) static ParsedPacket out[kBurst];
  ParserCounters counters;
  unsigned next = 0;
  uint64_t packets = 0;
  for (auto _ : state) {
    std::span<hal::Packet* const> burst(&fx.pkts[next], kBurst);
    if (s == Scenario::vxlan_decap)
      parse_burst(burst, std::span<const PacketMetadata>(&fx.md[next], kBurst), out, counters);
    else
      parse_burst(burst, out, counters);
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
    next = (next + kBurst) % kPackets;
    packets += kBurst;
  }
  if (counters.read().malformed != 0) state.SkipWithError("malformed packets in a benchmark scenario");
  state.SetItemsProcessed(static_cast<int64_t>(packets));  // items_per_second = packets/s on one core
  // Seconds per packet (printed with an SI prefix: "11.2ns").
  state.counters["pkt_time"] =
      benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK_CAPTURE(BM_parse, ipv4_udp_64B, Scenario::ipv4_udp);
BENCHMARK_CAPTURE(BM_parse, ipv4_udp_64B_rss, Scenario::ipv4_udp_rss);
BENCHMARK_CAPTURE(BM_parse, ipv6_tcp_86B, Scenario::ipv6_tcp);
BENCHMARK_CAPTURE(BM_parse, vlan_ipv4_udp_68B, Scenario::vlan_ipv4_udp);
BENCHMARK_CAPTURE(BM_parse, vxlan_decap_inner_64B, Scenario::vxlan_decap);

BENCHMARK_MAIN();

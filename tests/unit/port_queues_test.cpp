// Port::set_queue_count() on sim ports no PMD polls (the datapath's reload
// around it is tested with the datapath): a ring port's pending packets are
// spread again by RSS over the new rx rings, in order per flow, nothing lost
// or doubled; its tx queues all reach the one tx ring; a pcap replay changes
// its queues before it starts or once it drained and refuses while in
// progress; a pcap port keeps one tx queue; fixed ports (null, sample;
// TAP too, which needs a device) refuse; out-of-range counts are refused with the port unchanged.
//
// Thread-safety: single-threaded (the caller's guarantee set_queue_count
// relies on: nobody polls the port meanwhile).
#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <map>
#include <vector>

#include "hal/sim/pcap_file.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "keel/hal/rss.h"
#include "sim_test_util.h"

using namespace keel::hal;
using Bytes = std::vector<uint8_t>;

namespace {

// An IPv4/UDP frame of flow `flow` (its source port and address), carrying
// flow and seq in its payload.
Bytes udp_frame(uint32_t flow, uint32_t seq) {
  Bytes f(14 + 20 + 8 + 8, 0);
  f[12] = 0x08;
  f[14] = 0x45;
  f[16] = 0, f[17] = 36;
  f[22] = 64;
  f[23] = 17;
  f[26] = 10, f[27] = static_cast<uint8_t>(flow >> 16), f[28] = static_cast<uint8_t>(flow >> 8),
  f[29] = static_cast<uint8_t>(flow);
  f[30] = 10, f[31] = 0, f[32] = 0, f[33] = 1;
  f[34] = static_cast<uint8_t>((1024 + flow % 7) >> 8), f[35] = static_cast<uint8_t>(1024 + flow % 7);
  f[36] = 0x0f, f[37] = 0xa0;
  std::memcpy(&f[42], &flow, 4);
  std::memcpy(&f[46], &seq, 4);
  return f;
}

uint32_t u32_at(const Packet* p, size_t at) {
  uint32_t v;
  std::memcpy(&v, p->data() + at, 4);
  return v;
}

void inject(Backend& be, sim::RingPort& ring, const Bytes& f) {
  Packet* p = nullptr;
  REQUIRE(be.alloc_burst({&p, 1}) == 1);
  REQUIRE(p->set_len(static_cast<uint32_t>(f.size())));
  std::memcpy(p->data(), f.data(), f.size());
  REQUIRE(ring.inject({&p, 1}) == 1);
}

// Receives everything from every queue: per queue, (flow, seq) in order.
std::vector<std::vector<std::pair<uint32_t, uint32_t>>> drain(Port& port) {
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> got(port.n_rxq());
  for (uint16_t q = 0; q < port.n_rxq(); ++q) {
    std::array<Packet*, kMaxBurst> burst;
    uint16_t n;
    while ((n = port.rx(q, burst)) > 0) {
      for (uint16_t i = 0; i < n; ++i) {
        if (port.n_rxq() > 1) {
          REQUIRE(burst[i]->has_rss_hash());
          CHECK(RssReta(port.n_rxq()).queue_for(burst[i]->rss_hash()) == q);
        }
        got[q].emplace_back(u32_at(burst[i], 42), u32_at(burst[i], 46));
      }
      release_burst(std::span(burst.data(), n));
    }
  }
  return got;
}

// Every flow's packets 0..per_flow-1 once, in order, all on one queue.
void check_once_in_order(const std::vector<std::vector<std::pair<uint32_t, uint32_t>>>& got, uint32_t flows,
                         uint32_t per_flow) {
  std::map<uint32_t, uint32_t> next;
  std::map<uint32_t, size_t> queue_of;
  size_t total = 0;
  for (size_t q = 0; q < got.size(); ++q) {
    for (auto [flow, seq] : got[q]) {
      ++total;
      CHECK(seq == next[flow]);
      next[flow] = seq + 1;
      auto [it, fresh] = queue_of.emplace(flow, q);
      CHECK((fresh || it->second == q));
    }
  }
  CHECK(total == size_t{flows} * per_flow);
  CHECK(next.size() == flows);
  for (auto [flow, n] : next) CHECK(n == per_flow);
}

}  // namespace

TEST_CASE("ring: set_queue_count spreads the pending packets again, per flow in order") {
  auto be = keel::test::sim_backend(8192);
  auto port = keel::test::open_ok(*be, "r0", "ring:size=4096");
  auto& ring = dynamic_cast<sim::RingPort&>(*port);
  constexpr uint32_t kFlows = 500, kPerFlow = 4;
  for (uint32_t seq = 0; seq < 2; ++seq)
    for (uint32_t fl = 0; fl < kFlows; ++fl) inject(*be, ring, udp_frame(fl, seq));

  // 1 -> 4 with packets waiting: they are hashed now and go to their queues.
  REQUIRE(port->set_queue_count(4, 2).ok());
  CHECK(port->n_rxq() == 4);
  CHECK(port->n_txq() == 2);
  CHECK(ring.rx_pending() == 2 * kFlows);
  for (uint16_t q = 0; q < 4; ++q) CHECK(ring.rx_pending(q) > 0);
  CHECK(port->describe() == "ring size=4096 rxq=4 txq=2");
  // New traffic lands on the same queues.
  for (uint32_t seq = 2; seq < 3; ++seq)
    for (uint32_t fl = 0; fl < kFlows; ++fl) inject(*be, ring, udp_frame(fl, seq));

  // 4 -> 3: moved queue by queue, in order.
  REQUIRE(port->set_queue_count(3, 2).ok());
  for (uint32_t fl = 0; fl < kFlows; ++fl) inject(*be, ring, udp_frame(fl, 3));
  auto got = drain(*port);
  REQUIRE(got.size() == 3);
  check_once_in_order(got, kFlows, kPerFlow);
  CHECK(port->counters().rx_packets == kFlows * kPerFlow);
  CHECK(port->counters().rx_dropped == 0);

  // Back to one queue: everything on queue 0, hashes kept.
  for (uint32_t fl = 0; fl < kFlows; ++fl) inject(*be, ring, udp_frame(fl, 4));
  REQUIRE(port->set_queue_count(1, 1).ok());
  CHECK(ring.rx_pending(0) == kFlows);
  std::array<Packet*, kMaxBurst> burst;
  REQUIRE(port->rx(0, burst) == kMaxBurst);
  CHECK(burst[0]->has_rss_hash());
  release_burst(burst);
  (void)drain(*port);
}

TEST_CASE("ring: packets that find their new ring full are dropped and counted") {
  auto be = keel::test::sim_backend(8192);
  auto port = keel::test::open_ok(*be, "r0", "ring:size=64,rxq=2");
  auto& ring = dynamic_cast<sim::RingPort&>(*port);
  // Two flows on different queues, 64 packets each: back on one queue of
  // 64 slots, half of them find no room.
  uint32_t a = 0, b = 1;
  auto queue = [](uint32_t fl, unsigned n) {
    const Bytes f = udp_frame(fl, 0);
    uint32_t h = 0;
    REQUIRE(rss_hash_frame(f.data(), static_cast<uint32_t>(f.size()), h));
    return RssReta(n).queue_for(h);
  };
  for (b = 1; b < 10000; ++b)
    if (queue(a, 2) != queue(b, 2)) break;
  REQUIRE(queue(a, 2) != queue(b, 2));
  for (uint32_t s = 0; s < 64; ++s) inject(*be, ring, udp_frame(a, s));
  for (uint32_t s = 0; s < 64; ++s) inject(*be, ring, udp_frame(b, s));
  REQUIRE(port->set_queue_count(1, 1).ok());  // 128 packets, one ring of 64
  CHECK(ring.rx_pending() == 64);
  CHECK(port->counters().rx_dropped == 64);
  (void)drain(*port);
}

TEST_CASE("set_queue_count: out of range is refused, the port unchanged; fixed ports refuse") {
  auto be = keel::test::sim_backend();
  auto ring = keel::test::open_ok(*be, "r0", "ring:rxq=2");
  for (auto [rx, tx] : {std::pair{0, 1}, {17, 1}, {1, 0}, {1, 17}}) {
    const keel::Status st = ring->set_queue_count(static_cast<uint16_t>(rx), static_cast<uint16_t>(tx));
    CHECK_FALSE(st.ok());
    CHECK_MESSAGE(st.message().find("out of range (1..16)") != std::string::npos, st.message());
  }
  CHECK(ring->n_rxq() == 2);
  CHECK(ring->n_txq() == 1);
  for (const char* spec : {"null", "sample"}) {
    auto p = keel::test::open_ok(*be, "x0", spec);
    const keel::Status st = p->set_queue_count(2, 1);
    CHECK_FALSE(st.ok());
    CHECK_MESSAGE(st.message().find("the number of queues is fixed") != std::string::npos, st.message());
    CHECK(p->n_rxq() == 1);
  }
}

TEST_CASE("pcap: queues change before the replay starts or once drained, not in between; one tx queue") {
  keel::test::TempDir dir;
  const std::string path = dir.file("in.pcap");
  constexpr uint32_t kFlows = 200, kPerFlow = 3;
  {
    auto w = sim::PcapWriter::create(path);
    REQUIRE(w.ok());
    for (uint32_t seq = 0; seq < kPerFlow; ++seq)
      for (uint32_t fl = 0; fl < kFlows; ++fl) REQUIRE(w.value()->write(udp_frame(fl, seq), 1000 + seq));
    REQUIRE(w.value()->close().ok());
  }
  auto be = keel::test::sim_backend(8192);
  auto port = keel::test::open_ok(*be, "p0", "pcap:in=" + path + ",out=" + dir.file("out.pcap"));
  REQUIRE(port->set_queue_count(4, 4).ok());
  CHECK(port->n_rxq() == 4);
  CHECK(port->n_txq() == 1);  // the writer is one stream: the datapath shares it
  // Started: a change would lose its place.
  std::array<Packet*, kMaxBurst> burst;
  uint16_t n = port->rx(0, burst);
  REQUIRE(n > 0);
  const keel::Status st = port->set_queue_count(2, 1);
  CHECK_FALSE(st.ok());
  CHECK_MESSAGE(st.message().find("not while in progress") != std::string::npos, st.message());
  CHECK(port->n_rxq() == 4);
  // Unchanged: the rest of the replay still comes, each packet once.
  auto got = drain(*port);
  got[0].insert(got[0].begin(), n, {0, 0});
  for (uint16_t i = 0; i < n; ++i) got[0][i] = {u32_at(burst[i], 42), u32_at(burst[i], 46)};
  release_burst(std::span(burst.data(), n));
  check_once_in_order(got, kFlows, kPerFlow);
  CHECK(port->input_state() == InputState::drained);
  // Drained: nothing left to lose.
  REQUIRE(port->set_queue_count(2, 1).ok());
  CHECK(port->n_rxq() == 2);
  CHECK(port->rx(0, burst) == 0);

  auto out_only = keel::test::open_ok(*be, "p1", "pcap:out=" + dir.file("o2.pcap"));
  const keel::Status st2 = out_only->set_queue_count(2, 1);
  CHECK_FALSE(st2.ok());
  CHECK(st2.message().find("needs in=FILE") != std::string::npos);
  REQUIRE(out_only->set_queue_count(1, 2).ok());  // tx: given what it has
  CHECK(out_only->n_txq() == 1);
}

TEST_CASE("ring: tx queues as asked at open, all onto the one tx ring") {
  auto be = keel::test::sim_backend();
  auto s = parse_port_spec("r0", "ring");
  REQUIRE(s.ok());
  auto r = be->open_port(s.value(), 1, 3);
  REQUIRE(r.ok());
  auto port = std::move(r).value();
  CHECK(port->n_txq() == 3);
  auto& ring = dynamic_cast<sim::RingPort&>(*port);
  for (uint16_t q = 0; q < 3; ++q) {
    Packet* p = nullptr;
    REQUIRE(be->alloc_burst({&p, 1}) == 1);
    REQUIRE(p->set_len(60));
    p->data()[0] = static_cast<uint8_t>(q);
    CHECK(port->tx(q, {&p, 1}) == 1);
  }
  CHECK(ring.tx_pending() == 3);
  std::array<Packet*, 4> out{};
  REQUIRE(ring.collect(out) == 3);
  for (uint16_t q = 0; q < 3; ++q) CHECK(out[q]->data()[0] == q);
  release_burst(std::span(out.data(), 3));
  CHECK(port->counters().tx_packets == 3);
}

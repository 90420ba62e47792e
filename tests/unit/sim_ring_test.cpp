// The sim ring port: inject -> rx -> tx -> collect, a full tx ring dropping
// and counting, packets left in the rings going back to the pool, and the
// pool running dry.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"

using namespace keel::hal;

namespace {

std::unique_ptr<Backend> sim_backend(unsigned buffers) {
  auto b = make_sim_backend(SimOptions{buffers});
  REQUIRE(b.ok());
  return std::move(b).value();
}

std::unique_ptr<Port> open_ring(Backend& b, const std::string& name, const std::string& spec) {
  auto s = parse_port_spec(name, spec);
  REQUIRE_MESSAGE(s.ok(), s.status().message());
  auto p = b.open_port(s.value(), 4, 4);
  REQUIRE_MESSAGE(p.ok(), p.status().message());
  return std::move(p).value();
}

sim::RingPort& ring_of(Port& p) {
  auto* r = dynamic_cast<sim::RingPort*>(&p);
  REQUIRE(r != nullptr);
  return *r;
}

// Allocates n packets, each with `len` bytes of its index.
std::vector<Packet*> make_packets(Backend& b, size_t n, uint32_t len = 64) {
  std::vector<Packet*> v(n);
  REQUIRE(b.alloc_burst(v) == n);
  for (size_t i = 0; i < n; ++i) {
    REQUIRE(v[i]->set_len(len));
    std::memset(v[i]->data(), static_cast<int>(i), len);
  }
  return v;
}

// Counts what the pool can still give by taking it all and giving it back.
size_t free_buffers(Backend& b) {
  std::vector<Packet*> all;
  std::array<Packet*, kMaxBurst> burst;
  unsigned n;
  while ((n = b.alloc_burst(burst)) > 0) all.insert(all.end(), burst.begin(), burst.begin() + n);
  release_burst(all);
  return all.size();
}

}  // namespace

TEST_CASE("inject -> rx -> tx -> collect") {
  auto b = sim_backend(256);
  auto port = open_ring(*b, "r0", "ring:size=64");
  sim::RingPort& ring = ring_of(*port);
  port->set_id(3);
  CHECK(port->kind() == "ring");
  CHECK(port->describe() == "ring size=64 txq=4");
  CHECK(ring.ring_size() == 64);
  CHECK(port->n_rxq() == 1);  // asked for 4: the spec's rxq= (1) decides
  CHECK(port->n_txq() == 4);  // asked for 4: a ring port gives each PMD a tx queue
  CHECK(port->link().up);
  CHECK(port->link().speed_mbps == 10000);
  CHECK(port->input_state() == InputState::live);

  std::vector<Packet*> in = make_packets(*b, 40, 100);
  CHECK(ring.inject(in) == 40);
  CHECK(ring.rx_pending() == 40);

  std::array<Packet*, kMaxBurst> rx;
  uint16_t n1 = port->rx(0, rx);
  CHECK(n1 == kMaxBurst);
  for (uint16_t i = 0; i < n1; ++i) {
    CHECK(rx[i] == in[i]);  // in order, no copy
    CHECK(rx[i]->in_port() == 3);
  }
  CHECK(port->tx(0, std::span<Packet* const>(rx.data(), n1)) == n1);
  uint16_t n2 = port->rx(0, rx);
  CHECK(n2 == 8);
  CHECK(port->tx(0, std::span<Packet* const>(rx.data(), n2)) == n2);
  CHECK(port->rx(0, rx) == 0);

  std::array<Packet*, 64> out;
  CHECK(ring.tx_pending() == 40);
  size_t got = ring.collect(out);
  REQUIRE(got == 40);
  for (size_t i = 0; i < got; ++i) {
    CHECK(out[i] == in[i]);
    CHECK(out[i]->data()[0] == static_cast<uint8_t>(i));
  }
  release_burst(std::span<Packet* const>(out.data(), got));

  PortCounters c = port->counters();
  CHECK(c.rx_packets == 40);
  CHECK(c.rx_bytes == 4000);
  CHECK(c.tx_packets == 40);
  CHECK(c.tx_bytes == 4000);
  CHECK(c.rx_dropped == 0);
  CHECK(c.tx_dropped == 0);
  CHECK(free_buffers(*b) == 256);
}

TEST_CASE("a full tx ring takes what fits; the rest is released and counted") {
  auto b = sim_backend(64);
  auto port = open_ring(*b, "r0", "ring:size=8");
  sim::RingPort& ring = ring_of(*port);

  std::vector<Packet*> pkts = make_packets(*b, 12, 60);
  CHECK(port->tx(0, pkts) == 8);
  PortCounters c = port->counters();
  CHECK(c.tx_packets == 8);
  CHECK(c.tx_bytes == 8 * 60);
  CHECK(c.tx_dropped == 4);
  CHECK(free_buffers(*b) == 64 - 8);  // the 4 dropped went back to the pool

  // Still full: the next burst is dropped whole.
  std::vector<Packet*> more = make_packets(*b, 3);
  CHECK(port->tx(0, more) == 0);
  CHECK(port->counters().tx_dropped == 7);

  // An injected burst larger than the rx ring: the caller keeps the rest.
  std::vector<Packet*> in = make_packets(*b, 10);
  CHECK(ring.inject(in) == 8);
  release_burst(std::span<Packet* const>(in).subspan(8));

  port->clear_counters();
  CHECK(port->counters().tx_dropped == 0);
  CHECK(port->counters().tx_packets == 0);
}

TEST_CASE("packets left in the rings go back to the pool with the port") {
  auto b = sim_backend(32);
  {
    auto port = open_ring(*b, "r0", "ring:size=16");
    sim::RingPort& ring = ring_of(*port);
    std::vector<Packet*> a = make_packets(*b, 10);
    CHECK(port->tx(0, a) == 10);
    std::vector<Packet*> c = make_packets(*b, 12);
    CHECK(ring.inject(c) == 12);
    CHECK(free_buffers(*b) == 10);
  }
  CHECK(free_buffers(*b) == 32);
}

TEST_CASE("the port keeps the pool alive after the backend is gone") {
  auto b = sim_backend(16);
  auto port = open_ring(*b, "r0", "ring");
  std::vector<Packet*> a = make_packets(*b, 5);
  b.reset();
  CHECK(port->tx(0, a) == 5);
  port.reset();  // releases the five into the pool, then frees it (ASan checks)
}

TEST_CASE("pool exhaustion") {
  constexpr unsigned kBuffers = 40;
  auto b = sim_backend(kBuffers);
  std::array<Packet*, kMaxBurst> x, y, z;
  CHECK(b->alloc_burst(x) == kMaxBurst);
  CHECK(b->alloc_burst(y) == kBuffers - kMaxBurst);  // fewer: the pool ran out
  CHECK(b->alloc_burst(z) == 0);

  // Give back through a port: tx on the ring, collect, release.
  auto port = open_ring(*b, "r0", "ring:size=64");
  sim::RingPort& ring = ring_of(*port);
  CHECK(port->tx(0, x) == kMaxBurst);
  CHECK(b->alloc_burst(z) == 0);  // still held by the ring
  std::array<Packet*, 64> out;
  size_t n = ring.collect(out);
  CHECK(n == kMaxBurst);
  release_burst(std::span<Packet* const>(out.data(), n));
  CHECK(b->alloc_burst(z) == kMaxBurst);
  release_burst(z);
  release_burst(std::span<Packet* const>(y.data(), kBuffers - kMaxBurst));
  CHECK(free_buffers(*b) == kBuffers);
}

TEST_CASE("inject and collect from other threads while the PMD forwards") {
  constexpr size_t kPackets = 20000;
  auto b = sim_backend(512);
  auto port = open_ring(*b, "r0", "ring:size=128");
  sim::RingPort& ring = ring_of(*port);

  std::atomic<bool> done{false};
  std::thread producer([&] {
    size_t sent = 0;
    uint32_t seq = 0;
    while (sent < kPackets) {
      Packet* p;
      if (b->alloc_burst(std::span(&p, 1)) == 0) {
        std::this_thread::yield();
        continue;
      }
      (void)p->set_len(64);
      std::memcpy(p->data(), &seq, sizeof seq);
      while (ring.inject(std::span(&p, 1)) == 0) std::this_thread::yield();
      ++seq, ++sent;
    }
  });
  std::thread pmd([&] {
    std::array<Packet*, kMaxBurst> burst;
    while (!done.load(std::memory_order_acquire)) {
      uint16_t n = port->rx(0, burst);
      if (n) port->tx(0, std::span<Packet* const>(burst.data(), n));
    }
  });

  size_t got = 0;
  uint32_t expect = 0;
  bool in_order = true;
  std::array<Packet*, kMaxBurst> out;
  // tx may drop when the collector lags; count what arrives and what dropped.
  while (got + port->counters().tx_dropped < kPackets) {
    size_t n = ring.collect(out);
    for (size_t i = 0; i < n; ++i) {
      uint32_t seq;
      std::memcpy(&seq, out[i]->data(), sizeof seq);
      if (seq < expect) in_order = false;
      expect = seq + 1;
      release(out[i]);
    }
    got += n;
    if (n == 0) std::this_thread::yield();
  }
  done.store(true, std::memory_order_release);
  producer.join();
  pmd.join();
  CHECK(in_order);
  PortCounters c = port->counters();
  CHECK(c.rx_packets == kPackets);
  CHECK(c.tx_packets + c.tx_dropped == kPackets);
  CHECK(got == c.tx_packets);
  port.reset();
  CHECK(free_buffers(*b) == 512);
}

// tx_pending() is what a test waits on before it collects: every element it
// counts must be there to pop, even while producers are mid-push (a slot they
// have claimed but not yet published is not counted).
TEST_CASE("MpmcRing::ready counts only what a consumer can pop, while producers push") {
  keel::MpmcRing<unsigned> ring(64);
  constexpr unsigned kPerProducer = 20000;
  std::atomic<bool> go{false};
  auto produce = [&](unsigned base) {
    while (!go.load()) std::this_thread::yield();
    for (unsigned i = 0; i < kPerProducer; ++i)
      while (!ring.push(base + i)) std::this_thread::yield();
  };
  std::thread a(produce, 0u), b(produce, kPerProducer);
  go = true;
  unsigned popped = 0, short_pops = 0;
  while (popped < 2 * kPerProducer) {
    const size_t r = ring.ready();
    for (size_t k = 0; k < r; ++k) {
      unsigned v;
      if (!ring.pop(v)) {
        ++short_pops;
        break;
      }
      ++popped;
    }
  }
  a.join();
  b.join();
  CHECK(short_pops == 0);
  CHECK(ring.ready() == 0);
  CHECK(ring.push(7));
  CHECK(ring.ready() == 1);
}

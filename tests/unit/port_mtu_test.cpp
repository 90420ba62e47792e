// Per-port MTU (mtu_request) on the sim backend: the jumbo buffer class of
// the pool, tx's frame limit (Open vSwitch netdev-dummy's rule: MTU + 14,
// + 4 when the outer EtherType is 802.1Q), set_mtu()'s range, and a pcap
// port carrying a 9000-byte frame whole. The DPDK side is in
// dpdk_backend_test.cpp; the end-to-end behaviour in
// tests/integration/test_mtu.py.
#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <vector>

#include "hal/sim/pcap_file.h"
#include "hal/sim/pool.h"
#include "hal/sim/ring_port.h"
#include "keel/hal/backend.h"
#include "sim_test_util.h"

using namespace keel::hal;

namespace {

using keel::test::open_ok;
using keel::test::sim_backend;
using keel::test::TempDir;

// A frame of `len` bytes whose EtherType is `ethertype` and whose bytes
// after the header say `seed`.
Packet* frame(Backend& b, uint32_t len, uint16_t ethertype = 0x0800, uint8_t seed = 1) {
  Packet* p = nullptr;
  REQUIRE(b.alloc_burst(std::span(&p, 1), len) == 1);
  REQUIRE(p->set_len(len));
  std::memset(p->data(), seed, len);
  p->data()[12] = static_cast<uint8_t>(ethertype >> 8);
  p->data()[13] = static_cast<uint8_t>(ethertype);
  return p;
}

std::vector<uint32_t> collect_lens(sim::RingPort& r) {
  std::vector<uint32_t> lens;
  std::array<Packet*, kMaxBurst> got;
  size_t n;
  while ((n = r.collect(got)) > 0) {
    for (size_t i = 0; i < n; ++i) lens.push_back(got[i]->len());
    release_burst(std::span<Packet* const>(got.data(), n));
  }
  return lens;
}

}  // namespace

TEST_CASE("sim pool: frames over 2 KB get jumbo buffers, a class of their own") {
  auto pool = sim::Pool::create(4, 2);
  REQUIRE(pool.ok());
  sim::Pool& p = *pool.value();
  Packet* small = p.alloc(1514);
  REQUIRE(small);
  CHECK(small->tailroom() == kBufferSize);
  Packet* big = p.alloc(9000);
  REQUIRE(big);
  CHECK(big->tailroom() == kJumboBufferSize);
  CHECK(big->set_len(kMaxFrameLen));
  CHECK(p.owns(big));
  CHECK(p.alloc(kJumboBufferSize + 1) == nullptr);  // nothing holds it
  CHECK(p.jumbo_available() == 1);
  CHECK(p.available() == 3);

  // The classes run out separately.
  Packet* big2 = p.alloc(kBufferSize + 1);
  REQUIRE(big2);
  CHECK(p.alloc(9000) == nullptr);
  std::array<Packet*, 4> burst{};
  CHECK(p.alloc_burst(burst, 9000) == 0);
  CHECK(p.alloc_burst(burst, 60) == 3);
  release_burst(std::span<Packet* const>(burst.data(), 3));

  // Each goes back to its own class.
  release(big);
  release(big2);
  release(small);
  CHECK(p.jumbo_available() == 2);
  CHECK(p.available() == 4);
}

TEST_CASE("port MTU: default 1500, range 68..9216, errors change nothing") {
  auto b = sim_backend(64);
  auto port = open_ok(*b, "r0", "ring");
  CHECK(port->mtu() == 1500);
  CHECK(port->tx_frame_limit().untagged == 1514);
  CHECK(port->tx_frame_limit().tagged == 1518);
  for (uint32_t bad : {0u, 67u, 9217u, 65535u}) {
    keel::Status st = port->set_mtu(bad);
    CHECK_FALSE(st.ok());
    CHECK(st.message() == "port r0: mtu_request " + std::to_string(bad) + " out of range (68..9216)");
    CHECK(port->mtu() == 1500);
    CHECK(port->tx_frame_limit().untagged == 1514);
  }
  CHECK(port->set_mtu(68).ok());
  CHECK(port->mtu() == 68);
  CHECK(port->set_mtu(9216).ok());
  CHECK(port->mtu() == 9216);
  CHECK(port->tx_frame_limit().untagged == 9230);
}

TEST_CASE("port MTU: tx drops and counts frames over MTU + 14 (+ 4 for 802.1Q), keeps the rest in order") {
  auto b = sim_backend(256);
  auto port = open_ok(*b, "r0", "ring");
  auto& ring = dynamic_cast<sim::RingPort&>(*port);

  // At 1500: 1514 passes, 1515 does not; an 802.1Q frame may be 1518; an
  // 802.1ad (0x88a8) outer tag earns nothing, as in netdev-dummy.
  std::vector<Packet*> burst = {
      frame(*b, 60),           frame(*b, 1514),         frame(*b, 1515), frame(*b, 1518, 0x8100),
      frame(*b, 1519, 0x8100), frame(*b, 1515, 0x88a8), frame(*b, 9000), frame(*b, 64)};
  CHECK(port->tx(0, burst) == 4);
  CHECK(collect_lens(ring) == std::vector<uint32_t>{60, 1514, 1518, 64});
  auto c = port->counters();
  CHECK(c.tx_packets == 4);
  CHECK(c.tx_bytes == 60 + 1514 + 1518 + 64);
  CHECK(c.tx_dropped == 4);
  CHECK(c.tx_mtu_exceeded_drops == 4);

  // At 9216 the 9000-byte frame goes; 9230 is the longest untagged frame.
  REQUIRE(port->set_mtu(9216).ok());
  std::vector<Packet*> jumbo = {frame(*b, 9000), frame(*b, 9230), frame(*b, 9231), frame(*b, 9234, 0x8100)};
  CHECK(port->tx(0, jumbo) == 3);
  CHECK(collect_lens(ring) == std::vector<uint32_t>{9000, 9230, 9234});
  c = port->counters();
  CHECK(c.tx_dropped == 5);
  CHECK(c.tx_mtu_exceeded_drops == 5);

  // A burst longer than kMaxBurst with oversized frames spread through it.
  REQUIRE(port->set_mtu(1500).ok());
  std::vector<Packet*> many;
  for (unsigned i = 0; i < 70; ++i) many.push_back(frame(*b, i % 10 == 3 ? 2000 : 100 + i));
  CHECK(port->tx(0, many) == 63);
  std::vector<uint32_t> want;
  for (unsigned i = 0; i < 70; ++i)
    if (i % 10 != 3) want.push_back(100 + i);
  CHECK(collect_lens(ring) == want);
  CHECK(port->counters().tx_mtu_exceeded_drops == 12);

  port->clear_counters();
  CHECK(port->counters().tx_mtu_exceeded_drops == 0);
}

TEST_CASE("pcap port: a 9000-byte record is received whole, in order with short ones") {
  TempDir dir;
  const std::string in = dir.file("jumbo.pcap");
  std::vector<std::vector<uint8_t>> frames;
  for (uint32_t len : {60u, 9000u, kMaxFrameLen, 1514u}) {
    std::vector<uint8_t> f(len);
    for (uint32_t i = 0; i < len; ++i) f[i] = static_cast<uint8_t>(i * 13 + len);
    frames.push_back(f);
  }
  {
    auto w = sim::PcapWriter::create(in);
    REQUIRE(w.ok());
    for (const auto& f : frames) REQUIRE(w.value()->write(f, 0));
    REQUIRE(w.value()->close().ok());
  }
  auto b = sim_backend(64);
  auto port = open_ok(*b, "p0", "pcap:in=" + in);
  std::array<Packet*, kMaxBurst> got{};
  REQUIRE(port->rx(0, got) == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(std::vector<uint8_t>(got[i]->data(), got[i]->data() + got[i]->len()) == frames[i]);
    release(got[i]);
  }
  CHECK(port->input_state() == InputState::drained);
}

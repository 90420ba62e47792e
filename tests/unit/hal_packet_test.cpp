// hal::Packet bounds (push_front / pull_front / set_len) and the sim pool's
// life cycle: buffers come back on release and can be allocated again.
#include <doctest/doctest.h>

#include <array>
#include <set>
#include <vector>

#include "hal/sim/pool.h"
#include "keel/hal/backend.h"
#include "keel/hal/packet.h"

using namespace keel::hal;

TEST_CASE("packet layout from the pool") {
  auto pool = sim::Pool::create(4);
  REQUIRE(pool.ok());
  Packet* p = pool.value()->alloc();
  REQUIRE(p);
  CHECK(p->source() == BufferSource::sim);
  CHECK(p->owner() == pool.value().get());
  CHECK(p->len() == 0);
  CHECK(p->headroom() == kHeadroom);
  CHECK(p->tailroom() == kBufferSize);
  CHECK(p->in_port() == kInvalidPort);
  CHECK_FALSE(p->has_rss_hash());
  CHECK_FALSE(p->has_flow_mark());
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  // The frame follows the descriptor and the headroom in the same buffer.
  CHECK(p->data() == reinterpret_cast<uint8_t*>(p) + sizeof(Packet) + kHeadroom);
  CHECK(pool.value()->owns(p));
  release(p);
}

TEST_CASE("push_front / pull_front / set_len bounds") {
  auto pool = sim::Pool::create(1);
  REQUIRE(pool.ok());
  Packet* p = pool.value()->alloc();
  REQUIRE(p);
  uint8_t* start = p->data();

  REQUIRE(p->set_len(100));
  CHECK(p->len() == 100);
  CHECK(p->tailroom() == kBufferSize - 100);
  CHECK(p->set_len(kBufferSize));  // all of the tailroom
  CHECK_FALSE(p->set_len(kBufferSize + 1));
  CHECK(p->len() == kBufferSize);  // unchanged by the failed call
  CHECK(p->set_len(60));           // truncate

  // Headroom: exactly kHeadroom can be pushed, one more cannot.
  uint8_t* h = p->push_front(4);
  CHECK(h == start - 4);
  CHECK(p->len() == 64);
  CHECK(p->headroom() == kHeadroom - 4);
  CHECK(p->push_front(kHeadroom - 3) == nullptr);
  CHECK(p->len() == 64);
  CHECK(p->push_front(kHeadroom - 4) == start - kHeadroom);
  CHECK(p->headroom() == 0);
  CHECK(p->push_front(1) == nullptr);

  // Pull back to the original start, then past the frame fails.
  CHECK(p->pull_front(kHeadroom));
  CHECK(p->data() == start);
  CHECK(p->len() == 60);
  CHECK_FALSE(p->pull_front(61));
  CHECK(p->len() == 60);
  CHECK(p->pull_front(60));
  CHECK(p->len() == 0);
  CHECK(p->headroom() == kHeadroom + 60);
  // set_len measures from the current start: what is left after the pulls.
  CHECK(p->set_len(kBufferSize - 60));
  CHECK_FALSE(p->set_len(kBufferSize - 59));

  // Metadata is cleared when the buffer comes round again.
  p->set_rss_hash(0x1234);
  p->set_flow_mark(7);
  p->set_in_port(3);
  p->meta().recirc_id = 9;
  release(p);
  Packet* q = pool.value()->alloc();
  REQUIRE(q == p);
  CHECK(q->data() == start);
  CHECK(q->len() == 0);
  CHECK_FALSE(q->has_rss_hash());
  CHECK_FALSE(q->has_flow_mark());
  CHECK(q->in_port() == kInvalidPort);
  CHECK(q->meta().recirc_id == 0);
  CHECK(q->meta().flow_mark == 0);
  release(q);
}

TEST_CASE("release returns buffers to the pool: alloc all, release, alloc all again") {
  constexpr unsigned kBuffers = 100;
  auto be = make_sim_backend(SimOptions{kBuffers});
  REQUIRE(be.ok());
  Backend& b = *be.value();
  CHECK(std::string(b.name()) == "sim");

  for (int round = 0; round < 3; ++round) {
    std::vector<Packet*> all;
    std::array<Packet*, kMaxBurst> burst;
    unsigned n;
    while ((n = b.alloc_burst(burst)) > 0) all.insert(all.end(), burst.begin(), burst.begin() + n);
    CHECK(all.size() == kBuffers);
    CHECK(std::set<Packet*>(all.begin(), all.end()).size() == kBuffers);  // all distinct
    CHECK(b.alloc_burst(burst) == 0);                                     // empty stays empty
    // Release half one by one and half as a burst.
    release_burst(std::span<Packet* const>(all).first(kBuffers / 2));
    for (size_t i = kBuffers / 2; i < all.size(); ++i) release(all[i]);
  }
}

TEST_CASE("pool errors") {
  auto be = make_sim_backend(SimOptions{0});
  REQUIRE_FALSE(be.ok());
  CHECK(be.status().message().find("at least one buffer") != std::string::npos);
}

TEST_CASE("a packet over caller memory") {
  // Backends build packets with reset(); the accessors need nothing else.
  alignas(64) static uint8_t mem[256];
  Packet p;
  p.reset(BufferSource::sim, nullptr, mem, sizeof mem, mem + 32, 10);
  CHECK(p.headroom() == 32);
  CHECK(p.tailroom() == sizeof mem - 32 - 10);
  CHECK(p.bytes().size() == 10);
  CHECK(p.push_front(32) == mem);
  CHECK(p.push_front(1) == nullptr);
  CHECK(p.set_len(sizeof mem));
  CHECK_FALSE(p.set_len(sizeof mem + 1));
}

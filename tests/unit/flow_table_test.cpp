// FlowTable: what the owning PMD's install/remove answer (codes, no
// message on its thread; the requester's Status names the problem), and the
// dead list: bounded, nothing lost when the reclaim ring is full.
#include "datapath/flow_table.h"

#include <doctest/doctest.h>

#include <vector>

#include "flow/flow_key.h"

using namespace keel;
using namespace keel::datapath;

namespace {
// An exact-match megaflow on (in_port 1, nw_dst ip).
Megaflow* make_flow(uint32_t ip) {
  flow::FlowKey k{}, m{};
  k.in_port = 1;
  k.dl_type = 0x0008;
  k.nw_dst = ip;
  m.in_port = ~0u;
  m.dl_type = 0xffff;
  m.nw_dst = ~0u;
  auto* f = new Megaflow;
  f->in_port = 1;
  REQUIRE(flow::compress(m, f->mask));
  REQUIRE(flow::compress(k, f->mask.map, f->key));
  return f;
}
}  // namespace

TEST_CASE("install answers codes; the requester's Status says what went wrong") {
  FlowTable t(2);
  Megaflow* a = make_flow(1);
  Megaflow* b = make_flow(2);
  Megaflow* a2 = make_flow(1);
  Megaflow* c = make_flow(3);
  CHECK(t.install(a) == FlowResult::ok);
  CHECK(t.install(a2) == FlowResult::exists);
  CHECK(t.install(b) == FlowResult::ok);
  CHECK(t.install(c) == FlowResult::table_full);
  CHECK(t.size() == 2);
  const Status full = flow_result_status(FlowResult::table_full, t.capacity());
  CHECK(full.code() == Errc::resource_exhausted);
  CHECK(full.message().find("flow table full (2 flows)") != std::string::npos);
  CHECK(flow_result_status(FlowResult::exists, 2).code() == Errc::already_exists);
  CHECK(flow_result_status(FlowResult::ok, 2).ok());
  Megaflow bad;
  bad.in_port = kMaxDpPorts;
  CHECK(t.install(&bad) == FlowResult::bad_in_port);
  // Refused flows stay the caller's.
  free_megaflow(a2);
  free_megaflow(c);
}

TEST_CASE("removed flows wait on the dead list, then all reach the control thread") {
  constexpr uint32_t kCap = 6000;  // more than the reclaim ring holds (4096)
  FlowTable t(kCap);
  std::vector<Megaflow*> flows;
  for (uint32_t i = 0; i < kCap; ++i) {
    flows.push_back(make_flow(i + 1));
    REQUIRE(t.install(flows.back()) == FlowResult::ok);
  }
  for (Megaflow* f : flows) REQUIRE(t.remove(f, 10) == FlowResult::ok);
  CHECK(t.size() == 0);
  CHECK(t.has_dead());
  t.release_swept(11);  // one generation later: the EMC may still point to them
  CHECK(t.reclaim() == 0);
  t.release_swept(12);  // the ring takes 4096; the rest stay dead, not lost
  const size_t first = t.reclaim();
  CHECK(first > 0);
  CHECK(first < kCap);
  CHECK(t.has_dead());
  t.release_swept(12);
  CHECK(first + t.reclaim() == kCap);
  CHECK_FALSE(t.has_dead());
}

TEST_CASE("a remove that finds the dead list full is refused and changes nothing") {
  FlowTable t(1);
  Megaflow* a = make_flow(1);
  Megaflow* b = make_flow(2);
  REQUIRE(t.install(a) == FlowResult::ok);
  REQUIRE(t.remove(a, 0) == FlowResult::ok);  // dead, not swept yet
  REQUIRE(t.install(b) == FlowResult::ok);    // its slot is free again
  CHECK(t.remove(b, 0) == FlowResult::busy);  // the dead list holds `capacity` flows
  CHECK(t.size() == 1);
  CHECK(t.find(*b) == b);  // still installed
  CHECK(flow_result_status(FlowResult::busy, 1).code() == Errc::unavailable);
  t.release_swept(2);
  CHECK(t.reclaim() == 1);
  CHECK(t.remove(b, 2) == FlowResult::ok);
}

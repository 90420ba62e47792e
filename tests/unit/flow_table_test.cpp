// FlowTable: what the owning PMD's install/remove answer (codes, no
// message on its thread; the requester's Status names the problem), and the
// dead list: bounded, nothing lost when the reclaim ring is full; the
// slots: committed as they are used (a table sized for millions of flows
// costs its address space), freed ones reused first.
#include "datapath/flow_table.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <fstream>
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
  flow::Miniflow mask;
  REQUIRE(flow::compress(m, mask));
  REQUIRE(flow::compress(k, mask.map, f->key));
  f->set_mask(mask);
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

namespace {
// Resident bytes of this process (/proc/self/statm), 0 when unreadable.
size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  if (!(f >> pages >> resident)) return 0;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}
}  // namespace

TEST_CASE("a table sized for millions of flows commits memory only as slots are used") {
  constexpr uint32_t kCap = 1u << 22;  // 32 MiB of slots alone if they were written up front
  const size_t before = resident_bytes();
  REQUIRE(before > 0);
  FlowTable t(kCap);
  // Sanitizer shadow for the reserved lists is a few MiB at most; an eager
  // table is 32 MiB and more.
  CHECK(resident_bytes() - before < size_t{16} << 20);
  CHECK(t.capacity() == kCap);
  CHECK(t.slots_used() == 0);

  // Slots fill from 0 up; a freed slot is taken again before a new one.
  std::vector<Megaflow*> flows;
  for (uint32_t i = 0; i < 3; ++i) {
    flows.push_back(make_flow(i + 1));
    REQUIRE(t.install(flows.back()) == FlowResult::ok);
    CHECK(flows.back()->index == i);
  }
  CHECK(t.slots_used() == 3);
  REQUIRE(t.remove(flows[1], 0) == FlowResult::ok);
  Megaflow* d = make_flow(4);
  REQUIRE(t.install(d) == FlowResult::ok);
  CHECK(d->index == 1);
  CHECK(t.slots_used() == 3);
  std::vector<uint32_t> seen;
  t.for_each([&](const Megaflow& m) { seen.push_back(m.index); });
  CHECK(seen == std::vector<uint32_t>{0, 1, 2});
  CHECK(t.published(1) == d);
  CHECK(t.published(3) == nullptr);     // never used: a zero page
  CHECK(t.published(kCap - 1) == nullptr);
  t.release_swept(2);
  CHECK(t.reclaim() == 1);
  t.clear();
  CHECK(t.size() == 0);
  CHECK(t.slots_used() == 0);
  Megaflow* e = make_flow(5);
  REQUIRE(t.install(e) == FlowResult::ok);
  CHECK(e->index == 0);
}

TEST_CASE("the high-water mark: a full table refuses, then a removal makes room again") {
  FlowTable t(2);
  Megaflow* a = make_flow(1);
  Megaflow* b = make_flow(2);
  Megaflow* c = make_flow(3);
  REQUIRE(t.install(a) == FlowResult::ok);
  REQUIRE(t.install(b) == FlowResult::ok);
  CHECK(t.install(c) == FlowResult::table_full);
  REQUIRE(t.remove(a, 0) == FlowResult::ok);
  CHECK(t.install(c) == FlowResult::ok);
  CHECK(c->index == 0);
  CHECK(t.slots_used() == 2);
  t.release_swept(2);
  CHECK(t.reclaim() == 1);
}

TEST_CASE("megaflows with one mask share one copy of it; each keeps its own key") {
  auto mask_of = [](uint32_t nw_dst_mask) {
    flow::FlowKey m{};
    m.in_port = ~0u;
    m.dl_type = 0xffff;
    m.nw_dst = nw_dst_mask;
    flow::Miniflow mf;
    REQUIRE(flow::compress(m, mf));
    return mf;
  };
  Megaflow* a = make_flow(0x0a000001);
  Megaflow* b = make_flow(0x0a000002);
  CHECK(&a->mask() == &b->mask());  // one interned copy
  CHECK(a->mask() == mask_of(~0u));
  CHECK(!(a->key == b->key));
  // Another mask: another copy; the first stays as it was for b.
  a->set_mask(mask_of(0x00ffffff));
  CHECK(&a->mask() != &b->mask());
  CHECK(a->mask() == mask_of(0x00ffffff));
  CHECK(b->mask() == mask_of(~0u));
  // The last user of a mask lets it go; the next flow with it gets a copy
  // equal to it (the freed one is not read again: ASan would see it).
  free_megaflow(b);
  Megaflow* c = make_flow(0x0a000003);
  CHECK(c->mask() == mask_of(~0u));
  // A megaflow with no mask set matches on no word.
  Megaflow bare;
  CHECK(bare.mask().map.count() == 0);
  free_megaflow(a);
  free_megaflow(c);
}

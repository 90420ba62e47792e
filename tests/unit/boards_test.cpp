// The board registry: every board is complete and its ports parse.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "boards/board.h"
#include "keel/hal/port_spec.h"

using namespace keel;

TEST_CASE("the registry lists the four boards, host-sim first") {
  auto all = boards::all();
  REQUIRE(all.size() == 4);
  CHECK(all[0]->name == "host-sim");
  CHECK(&boards::default_board() == all[0]);
  for (const char* n : {"host-sim", "qemu-virt", "bluefield2", "bluefield3"}) {
    const boards::Board* b = boards::find(n);
    REQUIRE_MESSAGE(b != nullptr, n);
    CHECK(b->name == n);
  }
  CHECK(boards::find("bluefield4") == nullptr);
  CHECK(boards::find("") == nullptr);
}

TEST_CASE("every board is complete: ports parse, names unique, cores and config set") {
  for (const boards::Board* b : boards::all()) {
    CAPTURE(b->name);
    CHECK(!b->description.empty());
    CHECK(!b->ports.empty());
    CHECK(!b->pmd_cores.empty());
    CHECK(!b->default_config.empty());
    CHECK(b->console_baud > 0);
    std::set<std::string_view> names;
    for (const boards::BoardPort& p : b->ports) {
      CAPTURE(p.name);
      CHECK(names.insert(p.name).second);
      auto spec = hal::parse_port_spec(p.name, p.spec);
      CHECK_MESSAGE(spec.ok(), spec.status().message());
      if (spec.ok() && b->backend == boards::Backend::dpdk) CHECK(spec->kind == hal::PortKind::dpdk);
    }
    // A PMD never shares the control core.
    for (int c : b->pmd_cores)
      if (c >= 0) CHECK(c != b->control_core);
    // DPDK boards have EAL arguments.
    if (b->backend == boards::Backend::dpdk) CHECK(!b->eal_args.empty());
  }
}

TEST_CASE("the BlueField boards put PMDs on every core but the control core") {
  CHECK(boards::find("bluefield2")->pmd_cores.size() == 7);
  CHECK(boards::find("bluefield3")->pmd_cores.size() == 15);
  CHECK(boards::find("bluefield3")->offload_flows > boards::find("bluefield2")->offload_flows);
}

// Rcu: nothing is freed while a reader may hold it; everything is freed once
// every online reader has quiesced; offline readers hold nothing up. The
// threaded case runs under TSan in the tsan preset.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "datapath/rcu.h"

using keel::datapath::Rcu;

TEST_CASE("retired objects wait for every online slot") {
  Rcu rcu;
  unsigned a = rcu.register_slot(), b = rcu.register_slot();
  rcu.online(a);
  rcu.online(b);
  int freed = 0;
  rcu.retire([&] { ++freed; });
  CHECK(rcu.reclaim() == 1);
  rcu.quiesce(a);
  CHECK(rcu.reclaim() == 1);  // b has not quiesced yet
  CHECK(freed == 0);
  rcu.quiesce(b);
  CHECK(rcu.reclaim() == 0);
  CHECK(freed == 1);
  rcu.offline(a);
  rcu.offline(b);
  rcu.retire([&] { ++freed; });
  CHECK(rcu.reclaim() == 0);  // nobody online
  CHECK(freed == 2);
}

TEST_CASE("a reader thread never sees a freed object") {
  struct Obj {
    std::atomic<int> alive{1};
  };
  Rcu rcu;
  unsigned slot = rcu.register_slot();
  std::atomic<Obj*> published{new Obj};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::thread reader([&] {
    rcu.online(slot);
    while (!stop.load(std::memory_order_relaxed)) {
      Obj* o = published.load(std::memory_order_acquire);
      REQUIRE(o->alive.load(std::memory_order_relaxed) == 1);
      reads.fetch_add(1, std::memory_order_relaxed);
      rcu.quiesce(slot);
    }
    rcu.offline(slot);
  });
  // The reader must be running before the churn starts (a loaded machine
  // may not schedule it for a while).
  while (reads.load(std::memory_order_relaxed) == 0) std::this_thread::yield();
  for (int i = 0; i < 2000; ++i) {
    Obj* old = published.exchange(new Obj, std::memory_order_acq_rel);
    rcu.retire([old] {
      old->alive.store(0, std::memory_order_relaxed);
      delete old;
    });
    rcu.reclaim();
  }
  rcu.synchronize();
  stop = true;
  reader.join();
  delete published.load();
  CHECK(reads.load() > 0);
}

// Rcu: nothing is freed while a reader may hold it; everything is freed once
// every online reader has quiesced; offline readers hold nothing up. The
// threaded case runs under TSan in the tsan preset.
#include "datapath/rcu.h"

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <thread>
#include <vector>

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

// The store-buffering case of online(): a reader that comes back online and
// at once loads the published pointer, against a writer that unpublishes,
// retires and frees as soon as it sees every slot past the retirement (or
// offline). Without the fence pair (online()'s and the reclaimer's) the
// writer can read a slot as still offline while the reader already holds
// the old object: a use-after-free that ASan reports (heap-use-after-free)
// and the poisoned `magic` shows in the other presets. Readers cycle
// offline/online after each use of the object, as the upcall handler does on each
// idle wake, until the writer is done; the writer, once every reader runs,
// frees with reclaim() right after each retire (the tightest window) and
// with synchronize() every 16th time. Counts, not timing.
TEST_CASE("readers going offline and online never see a freed object") {
  static constexpr uint64_t kAlive = 0x600dc0de600dc0deull;
  struct Obj {
    std::atomic<uint64_t> magic{kAlive};
    std::atomic<uint64_t> payload{0};
  };
  constexpr unsigned kReaders = 2;
  constexpr uint64_t kRounds = 200'000;
  Rcu rcu;
  std::array<unsigned, kReaders> slots;
  for (auto& s : slots) s = rcu.register_slot();
  std::atomic<Obj*> published{new Obj};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, started{0}, cycles{0}, frees{0};
  std::vector<std::thread> readers;
  for (unsigned r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, slot = slots[r]] {
      uint64_t sum = 0, c = 0;
      started.fetch_add(1, std::memory_order_relaxed);
      while (!stop.load(std::memory_order_relaxed)) {
        rcu.online(slot);
        // The pointer is loaded right after going online (the race) and
        // used for a while after (so that a free in the window lands
        // before a later read and is seen).
        Obj* o = published.load(std::memory_order_acquire);
        for (int k = 0; k < 64; ++k) {
          if (o->magic.load(std::memory_order_relaxed) != kAlive) bad.fetch_add(1, std::memory_order_relaxed);
          sum += o->payload.load(std::memory_order_relaxed);
        }
        rcu.offline(slot);
        ++c;
      }
      (void)sum;
      cycles.fetch_add(c, std::memory_order_relaxed);
    });
  }
  // The churn starts once every reader runs (a loaded machine may not
  // schedule them for a while).
  while (started.load(std::memory_order_relaxed) < kReaders) std::this_thread::yield();
  for (uint64_t round = 1; round <= kRounds; ++round) {
    auto* fresh = new Obj;
    fresh->payload.store(round, std::memory_order_relaxed);
    Obj* old = published.exchange(fresh, std::memory_order_acq_rel);
    rcu.retire([old, &frees] {
      old->magic.store(0, std::memory_order_relaxed);
      delete old;
      frees.fetch_add(1, std::memory_order_relaxed);
    });
    if (round % 16 == 0)
      rcu.synchronize();
    else
      rcu.reclaim();
  }
  stop.store(true, std::memory_order_relaxed);
  for (auto& t : readers) t.join();
  rcu.synchronize();
  delete published.load();
  CHECK(bad.load() == 0);
  CHECK(frees.load() == kRounds);    // everything retired was freed, once
  CHECK(cycles.load() >= kReaders);  // every reader went through the loop
}

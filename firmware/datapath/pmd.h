// Pmd — one poll-mode thread: polls its rx queues in bursts of up to 32 and
// runs each burst to completion.
//
// At this stage a burst is forwarded by the port cross-connect table
// (`xconnect IN OUT`): every packet received on IN is sent out of OUT. The
// classifier (EMC, SMC, dpcls) replaces that lookup in a later step; the
// loop's shape stays: rx burst -> decide -> tx burst, packets every
// iteration, everything else every kHousekeepingEvery iterations.
//
// Thread-safety: the PMD thread is the only writer of its counters and
// iteration count; other threads read them with relaxed (counters) or
// acquire (iterations) loads. Its rx queue list and tx queue assignment are
// fixed before start() and read-only afterwards. The cross-connect table
// belongs to the Datapath (see datapath.h). A tx queue shared with another
// PMD (port with fewer tx queues than PMDs) is taken with its spinlock, as
// Open vSwitch does for its dynamic tx queues; an unshared one takes none.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "keel/hal/backend.h"
#include "keel/hal/port.h"

namespace keel::datapath {

class Datapath;

struct PmdCounters {
  uint64_t iterations = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t dropped_no_route = 0;  // received, no cross-connect for the port
  uint64_t busy_cycles = 0;
  uint64_t idle_cycles = 0;
};

class Pmd {
 public:
  struct RxQueue {
    hal::Port* port;
    uint16_t queue;
  };

  Pmd(Datapath& dp, unsigned index, int core, uint32_t idle_sleep_us);
  ~Pmd();
  Pmd(const Pmd&) = delete;
  Pmd& operator=(const Pmd&) = delete;

  unsigned index() const { return index_; }
  int core() const { return core_; }
  const std::vector<RxQueue>& rx_queues() const { return rxqs_; }

  // Before start() only.
  void add_rx_queue(hal::Port* port, uint16_t q) { rxqs_.push_back({port, q}); }

  Status start(std::vector<hal::Backend*> backends);
  void stop();  // asks the thread to finish and joins it; idempotent

  // Completed loop iterations; a reader that sees N+2 after seeing N knows a
  // whole iteration ran after its first read (used to wait for a drain).
  uint64_t iterations() const { return iterations_.load(std::memory_order_acquire); }
  PmdCounters counters() const;

 private:
  void run();
  void forward(hal::Port& in, uint16_t q, std::span<hal::Packet*> pkts);

  Datapath& dp_;
  const unsigned index_;
  const int core_;
  const uint32_t idle_sleep_us_;
  std::vector<RxQueue> rxqs_;
  std::vector<hal::Backend*> backends_;
  std::thread thread_;
  std::atomic<bool> quit_{false};
  Status start_status_;
  std::atomic<int> started_{0};  // 0 starting, 1 running, -1 failed

  alignas(64) std::atomic<uint64_t> iterations_{0};
  std::atomic<uint64_t> rx_packets_{0}, tx_packets_{0}, dropped_no_route_{0};
  std::atomic<uint64_t> busy_cycles_{0}, idle_cycles_{0};
};

}  // namespace keel::datapath

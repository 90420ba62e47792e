// hal::Port's non-virtual control-path pieces: role names and counter sums.
//
// The per-queue counters live in Port (port.h); each has one writer, the
// thread that owns the queue. counters() runs on the control thread and sums
// every queue with relaxed loads: a total may be one burst old and the rx and
// tx halves are not a snapshot of one instant, which is what `show ports`
// needs and all it can get without making the PMD pay for a lock.
//
// Thread-safety: to_string() is pure. counters() may run concurrently with
// rx()/tx() on any queue. clear_counters() stores zeros with relaxed stores;
// run it only while no PMD polls the port, or a concurrent bump() (a
// load+store, not a read-modify-write) may write back a pre-clear value.
#include "keel/hal/port.h"

namespace keel::hal {

const char* to_string(PortRole r) {
  switch (r) {
    case PortRole::uplink:
      return "uplink";
    case PortRole::host_representor:
      return "host-representor";
    case PortRole::vf:
      return "vf";
    case PortRole::internal:
      return "internal";
  }
  return "unknown";
}

PortCounters Port::counters() const {
  PortCounters c;
  constexpr auto relaxed = std::memory_order_relaxed;
  // All kMaxQueues, not just n_rxq/n_txq: a queue the port no longer uses
  // keeps what it counted.
  for (const QueueCounters& q : rxc_) {
    c.rx_packets += q.packets.load(relaxed);
    c.rx_bytes += q.bytes.load(relaxed);
    c.rx_dropped += q.dropped.load(relaxed);
  }
  for (const QueueCounters& q : txc_) {
    c.tx_packets += q.packets.load(relaxed);
    c.tx_bytes += q.bytes.load(relaxed);
    c.tx_dropped += q.dropped.load(relaxed);
  }
  return c;
}

void Port::clear_counters() {
  constexpr auto relaxed = std::memory_order_relaxed;
  for (auto* set : {&rxc_, &txc_}) {
    for (QueueCounters& q : *set) {
      q.packets.store(0, relaxed);
      q.bytes.store(0, relaxed);
      q.dropped.store(0, relaxed);
    }
  }
}

}  // namespace keel::hal

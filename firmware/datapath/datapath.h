// Datapath — the set of ports and PMD threads, and the forwarding state the
// PMDs read.
//
// Life cycle: add_port() for every port, then start() (spawns the PMDs and
// assigns rx queues round-robin), then forwarding; stop() joins the PMDs;
// ports are stopped (outputs flushed) by stop_ports(). Ports cannot be added
// after start() yet.
//
// Thread-safety: add_port/start/stop/stop_ports are called by the control
// thread only. The cross-connect table is written by the control thread and
// read by the PMDs: each entry is one atomic port index written with a
// release store and read with a relaxed load (the port object it names is
// immutable while PMDs run, so no ordering beyond the index is needed).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/status.h"
#include "datapath/pmd.h"
#include "keel/hal/backend.h"
#include "keel/hal/port.h"

namespace keel::datapath {

inline constexpr unsigned kMaxPorts = 256;

struct DatapathConfig {
  std::vector<int> pmd_cores;    // one PMD per entry; -1 = unpinned
  uint32_t pmd_idle_sleep_us = 0;
};

class Datapath {
 public:
  explicit Datapath(DatapathConfig cfg);
  ~Datapath();

  // Port numbers start at 1 (0 is reserved, as for Open vSwitch's LOCAL).
  Result<uint16_t> add_port(std::unique_ptr<hal::Port> port);
  hal::Port* port(uint16_t id) const;
  hal::Port* find_port(std::string_view name) const;
  std::vector<hal::Port*> ports() const;

  // Every packet received on `in` leaves through `out`; nullopt removes it.
  void set_xconnect(uint16_t in, std::optional<uint16_t> out);
  std::optional<uint16_t> xconnect(uint16_t in) const;

  Status start(std::vector<hal::Backend*> backends);
  bool running() const { return running_; }
  void stop();
  void stop_ports();

  const std::vector<std::unique_ptr<Pmd>>& pmds() const { return pmds_; }

  // Waits until every port whose input can run out has drained and every PMD
  // has finished a whole iteration after that, so everything received has
  // been forwarded. Returns false if `timeout_ms` passed first.
  bool wait_drained(uint64_t timeout_ms);

  // --- PMD side ---
  uint16_t xconnect_fast(uint16_t in) const {
    return xconnect_[in].load(std::memory_order_relaxed);
  }
  hal::Port* port_fast(uint16_t id) const { return ports_[id].get(); }
  // The tx queue PMD `pmd` uses on port `id`, and whether it is shared.
  struct TxQueue {
    uint16_t queue = 0;
    bool shared = false;
  };
  TxQueue txq(unsigned pmd, uint16_t id) const { return txqs_[pmd][id]; }
  void lock_txq(uint16_t id, uint16_t q);
  void unlock_txq(uint16_t id, uint16_t q);

 private:
  DatapathConfig cfg_;
  std::array<std::unique_ptr<hal::Port>, kMaxPorts> ports_{};
  uint16_t n_ports_ = 0;
  std::array<std::atomic<uint16_t>, kMaxPorts> xconnect_{};
  std::vector<std::unique_ptr<Pmd>> pmds_;
  std::vector<std::array<TxQueue, kMaxPorts>> txqs_;
  // One spinlock per (port, tx queue), used only for shared queues.
  std::unique_ptr<std::atomic_flag[]> txq_locks_;
  bool running_ = false;
};

}  // namespace keel::datapath

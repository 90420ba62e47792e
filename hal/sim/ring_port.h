// sim::RingPort — a port made of two in-memory rings, for tests that drive
// the datapath directly (the role netdev-dummy plays in Open vSwitch tests).
//
//   test --inject()--> [rx ring] --rx()--> datapath --tx()--> [tx ring] --collect()--> test
//
// Both rings are keel::MpmcRing<Packet*> of ring_size slots (a power of two,
// checked by parse_port_spec). Open one with `ring[:size=N]` through the sim
// backend and reach these calls with dynamic_cast<sim::RingPort*>(port).
//
// Ownership: inject() takes the packets it accepts (a prefix of its
// argument; the rest stay the caller's). rx() hands them to the datapath.
// tx() puts what fits into the tx ring and Port::tx() releases and counts
// the rest as tx_dropped. collect() hands packets back to the test, which
// releases them. The destructor releases whatever is still in either ring,
// so the packets' pool must outlive the port (the backend guarantees it).
//
// Thread-safety: inject/collect from any thread, concurrently with the PMD's
// rx()/tx() (the rings are multi-producer multi-consumer; each push
// publishes the packet with a release store that the pop acquires).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/ring.h"
#include "keel/hal/port.h"

namespace keel::hal::sim {

class Pool;

class RingPort final : public Port {
 public:
  // `pool` (may be null) is kept alive as long as the port, because the
  // destructor releases packets still in the rings into it.
  RingPort(std::string name, uint32_t ring_size, std::shared_ptr<Pool> pool = {});
  ~RingPort() override;

  // Queues packets for rx; returns how many were taken (a prefix).
  size_t inject(std::span<Packet* const> pkts) noexcept { return rx_ring_.push_bulk(pkts); }
  // Takes up to out.size() transmitted packets; the caller releases them.
  size_t collect(std::span<Packet*> out) noexcept { return tx_ring_.pop_bulk(out); }

  size_t rx_pending() const noexcept { return rx_ring_.size(); }  // injected, not yet received
  size_t tx_pending() const noexcept { return tx_ring_.size(); }  // sent, not yet collected
  uint32_t ring_size() const { return static_cast<uint32_t>(rx_ring_.capacity()); }

  LinkState link() const override;
  std::string describe() const override;

 protected:
  uint16_t rx_burst(uint16_t q, std::span<Packet*> out) noexcept override;
  uint16_t tx_burst(uint16_t q, std::span<Packet* const> pkts) noexcept override;

 private:
  std::shared_ptr<Pool> pool_;  // first: destroyed after the rings are emptied
  MpmcRing<Packet*> rx_ring_;
  MpmcRing<Packet*> tx_ring_;
};

}  // namespace keel::hal::sim

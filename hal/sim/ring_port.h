// sim::RingPort — a port made of two in-memory rings, for tests that drive
// the datapath directly (the role netdev-dummy plays in Open vSwitch tests).
//
//   test --inject()--> [rx ring] --rx()--> datapath --tx()--> [tx ring] --collect()--> test
//
// The rings are keel::MpmcRing<Packet*> of ring_size slots (a power of two,
// checked by parse_port_spec). Open one with `ring[:size=N][,rxq=Q]` through
// the sim backend and reach these calls with dynamic_cast<sim::RingPort*>(port).
//
// rxq=Q > 1: Q rx rings, filled as a NIC fills its queues by RSS
// (keel/hal/rss.h): inject() computes each frame's Toeplitz hash, stores it
// as the packet's RSS hash and pushes the packet onto the rx ring of queue
// reta[hash % 128] (entry i = i % Q); frames without one (not IP) get no hash
// and go to queue 0. rx(q) returns queue q's packets in injection order.
// With rxq=1 (the default) the port hashes nothing, as before (a NIC with
// RSS off, or Open vSwitch's netdev-dummy): the datapath computes its own
// hash.
//
// Tx queues: n_txq of them (what the datapath asks at open, one per PMD,
// up to kMaxQueues), all pushing onto the one tx ring, which is
// multi-producer: so PMDs each get a queue of their own and send without a
// lock, as on a NIC with a tx queue per core. collect() sees the packets of
// one tx queue in the order that queue sent them.
//
// set_queue_count() (port.h): the packets injected and not yet received are
// taken off the old rx rings queue by queue, in order, and spread again over
// the new ones by their RSS hash (computed now if the port hashed nothing
// before; with one queue they all go to queue 0 and keep their hash), so a
// flow's packets stay in order. One that finds its new ring full (the rings
// keep ring_size slots each) is released and counted as rx_dropped. The new
// rings are allocated before anything moves: no memory, nothing changed.
//
// Ownership: inject() takes the packets it accepts (a prefix of its
// argument; the rest stay the caller's). rx() hands them to the datapath.
// tx() puts what fits into the tx ring and Port::tx() releases and counts
// the rest as tx_dropped. collect() hands packets back to the test, which
// releases them. The destructor releases whatever is still in either ring,
// so the packets' pool must outlive the port (the backend guarantees it).
//
// The sim NIC model (sim_flow.h) sends what its rules forward out of this
// port with hw_tx(), onto the same tx ring (collect() sees those packets
// too).
//
// Thread-safety: inject/collect from any thread, concurrently with the PMDs'
// rx()/tx() (the rings are multi-producer multi-consumer; each push
// publishes the packet with a release store that the pop acquires). Per-flow
// order within a queue holds for packets injected by one thread. The RETA and
// the set of rx rings are written in the constructor and by
// set_queue_count(), which the datapath calls only while no PMD uses the
// port and no test injects (the caller's guarantee).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/ring.h"
#include "keel/hal/port.h"
#include "keel/hal/rss.h"
#include "sim_flow.h"

namespace keel::hal::sim {

class Pool;

class RingPort final : public Port, public SimNicPort {
 public:
  // `pool` (may be null) is kept alive as long as the port, because the
  // destructor releases packets still in the rings into it.
  RingPort(std::string name, uint32_t ring_size, std::shared_ptr<Pool> pool = {}, uint16_t n_rxq = 1,
           uint16_t n_txq = 1);
  ~RingPort() override;

  // Queues packets for rx (on their RSS queue when rxq > 1); returns how many
  // were taken (a prefix: it stops at the first packet whose queue is full).
  size_t inject(std::span<Packet* const> pkts) noexcept;
  // Takes up to out.size() transmitted packets; the caller releases them.
  size_t collect(std::span<Packet*> out) noexcept { return tx_ring_.pop_bulk(out); }

  size_t rx_pending() const noexcept;  // injected, not yet received (all queues)
  size_t rx_pending(uint16_t q) const noexcept { return rx_rings_[q]->size(); }
  size_t tx_pending() const noexcept { return tx_ring_.ready(); }  // sent and collectable, not yet collected
  uint32_t ring_size() const { return static_cast<uint32_t>(tx_ring_.capacity()); }

  LinkState link() const override;
  std::string describe() const override;

  FlowEngine* flow_engine() override { return nic_engine(); }
  // The tx ring is multi-producer: the model pushes like any tx queue.
  uint16_t hw_tx(std::span<Packet* const> pkts) noexcept override {
    return static_cast<uint16_t>(tx_ring_.push_bulk(pkts));
  }

 protected:
  uint16_t rx_burst(uint16_t q, std::span<Packet*> out) noexcept override;
  uint16_t tx_burst(uint16_t q, std::span<Packet* const> pkts) noexcept override;
  Status apply_queue_count(uint16_t n_rx, uint16_t& n_tx) override;

 private:
  std::shared_ptr<Pool> pool_;  // first: destroyed after the rings are emptied
  std::array<std::unique_ptr<MpmcRing<Packet*>>, kMaxQueues> rx_rings_;  // [0, n_rxq())
  MpmcRing<Packet*> tx_ring_;
  RssReta reta_;
};

}  // namespace keel::hal::sim

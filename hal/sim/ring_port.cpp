// sim::RingPort (ring_port.h): the burst functions are a bulk pop and a bulk
// push, a few nanoseconds per packet and no copy. With several rx queues,
// inject() adds the RSS hash (a Toeplitz hash over 8-36 bytes, table-driven)
// and one push per packet onto its queue's ring.
//
// Thread-safety: see ring_port.h.
#include "ring_port.h"

#include <algorithm>
#include <memory>
#include <new>
#include <string>

#include "sim_ports.h"

namespace keel::hal::sim {

RingPort::RingPort(std::string name, uint32_t ring_size, std::shared_ptr<Pool> pool, uint16_t n_rxq,
                   uint16_t n_txq)
    : Port(std::move(name), "ring"), pool_(std::move(pool)), tx_ring_(ring_size), reta_(n_rxq) {
  for (uint16_t q = 0; q < n_rxq; ++q) rx_rings_[q] = std::make_unique<MpmcRing<Packet*>>(ring_size);
  set_queues(n_rxq, n_txq);
}

Status RingPort::apply_queue_count(uint16_t n_rx, uint16_t& n_tx) {
  (void)n_tx;  // any count: every tx queue pushes onto the one multi-producer ring
  const uint16_t old = n_rxq();
  if (n_rx == old) return {};
  // Allocate first: a failure changes nothing.
  std::array<std::unique_ptr<MpmcRing<Packet*>>, kMaxQueues> fresh;
  try {
    for (uint16_t q = 0; q < n_rx; ++q) fresh[q] = std::make_unique<MpmcRing<Packet*>>(ring_size());
  } catch (const std::bad_alloc&) {
    return error(Errc::resource_exhausted, "port " + name() + ": out of memory for " + std::to_string(n_rx) +
                                               " rx rings of " + std::to_string(ring_size()) + " slots");
  }
  const RssReta reta(n_rx);
  uint64_t dropped = 0;
  for (uint16_t q = 0; q < old; ++q) {
    Packet* p;
    while (rx_rings_[q]->pop(p)) {
      uint16_t to = 0;
      if (n_rx > 1) {
        uint32_t h = p->rss_hash();
        bool hashed = p->has_rss_hash();
        if (!hashed && (hashed = rss_hash_frame(p->data(), p->len(), h))) p->set_rss_hash(h);
        if (hashed) to = reta.queue_for(h);
      }
      if (!fresh[to]->push(p)) {
        hal::release(p);
        ++dropped;
      }
    }
  }
  for (uint16_t q = 0; q < kMaxQueues; ++q) rx_rings_[q] = std::move(fresh[q]);
  reta_ = reta;
  if (dropped) count_rx_dropped(0, dropped);
  return {};
}

RingPort::~RingPort() {
  detach_from_nic();
  Packet* p;
  for (auto& r : rx_rings_) {
    if (!r) continue;
    while (r->pop(p)) hal::release(p);
  }
  while (tx_ring_.pop(p)) hal::release(p);
}

size_t RingPort::inject(std::span<Packet* const> pkts) noexcept {
  if (n_rxq() == 1) return rx_rings_[0]->push_bulk(pkts);
  size_t n = 0;
  for (Packet* p : pkts) {
    uint32_t h = 0;
    const bool hashed = rss_hash_frame(p->data(), p->len(), h);
    // Before the push, which publishes the packet to the PMD (a packet the
    // full ring refuses goes back to the caller with its hash set).
    if (hashed) p->set_rss_hash(h);
    if (!rx_rings_[hashed ? reta_.queue_for(h) : 0]->push(p)) break;
    ++n;
  }
  return n;
}

size_t RingPort::rx_pending() const noexcept {
  size_t n = 0;
  for (uint16_t q = 0; q < n_rxq(); ++q) n += rx_rings_[q]->size();
  return n;
}

LinkState RingPort::link() const { return sim_link(*this); }

std::string RingPort::describe() const {
  std::string d = "ring size=" + std::to_string(ring_size());
  if (n_rxq() > 1) d += " rxq=" + std::to_string(n_rxq());
  if (n_txq() > 1) d += " txq=" + std::to_string(n_txq());
  return d;
}

uint16_t RingPort::rx_burst(uint16_t q, std::span<Packet*> out) noexcept {
  return static_cast<uint16_t>(rx_rings_[q]->pop_bulk(out));
}

uint16_t RingPort::tx_burst(uint16_t, std::span<Packet* const> pkts) noexcept {
  return static_cast<uint16_t>(tx_ring_.push_bulk(pkts));  // what does not fit stays for Port::tx to drop
}

Result<std::unique_ptr<Port>> open_ring_port(const PortSpec& spec, const std::shared_ptr<Pool>& pool,
                                             uint16_t n_txq) {
  if (spec.ring_size < 2 || (spec.ring_size & (spec.ring_size - 1)) != 0) {
    return invalid("ring size " + std::to_string(spec.ring_size) + " is not a power of two >= 2");
  }
  if (spec.rxq < 1 || spec.rxq > Port::kMaxQueues) {
    return invalid("rxq " + std::to_string(spec.rxq) + " is not from 1 to " +
                   std::to_string(Port::kMaxQueues));
  }
  n_txq = std::clamp<uint16_t>(n_txq, 1, Port::kMaxQueues);
  return std::unique_ptr<Port>(new RingPort(spec.name, spec.ring_size, pool, spec.rxq, n_txq));
}

}  // namespace keel::hal::sim

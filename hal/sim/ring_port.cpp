// sim::RingPort (ring_port.h): the burst functions are a bulk pop and a bulk
// push, a few nanoseconds per packet and no copy.
//
// Thread-safety: see ring_port.h.
#include "ring_port.h"

#include <memory>

#include "sim_ports.h"

namespace keel::hal::sim {

RingPort::RingPort(std::string name, uint32_t ring_size, std::shared_ptr<Pool> pool)
    : Port(std::move(name), "ring"), pool_(std::move(pool)), rx_ring_(ring_size), tx_ring_(ring_size) {
  set_queues(1, 1);
}

RingPort::~RingPort() {
  Packet* p;
  while (rx_ring_.pop(p)) hal::release(p);
  while (tx_ring_.pop(p)) hal::release(p);
}

LinkState RingPort::link() const { return sim_link_up(); }

std::string RingPort::describe() const { return "ring size=" + std::to_string(ring_size()); }

uint16_t RingPort::rx_burst(uint16_t, std::span<Packet*> out) noexcept {
  return static_cast<uint16_t>(rx_ring_.pop_bulk(out));
}

uint16_t RingPort::tx_burst(uint16_t, std::span<Packet* const> pkts) noexcept {
  return static_cast<uint16_t>(tx_ring_.push_bulk(pkts));  // what does not fit stays for Port::tx to drop
}

Result<std::unique_ptr<Port>> open_ring_port(const PortSpec& spec, const std::shared_ptr<Pool>& pool) {
  if (spec.ring_size < 2 || (spec.ring_size & (spec.ring_size - 1)) != 0) {
    return invalid("ring size " + std::to_string(spec.ring_size) + " is not a power of two >= 2");
  }
  return std::unique_ptr<Port>(new RingPort(spec.name, spec.ring_size, pool));
}

}  // namespace keel::hal::sim

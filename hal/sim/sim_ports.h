// The sim backend's port constructors, one per PortKind (internal to hal/sim).
//
// Each port is a SimNicPort (sim_flow.h): the backend attaches it to its
// NIC model, if it has one, after opening it.
//
// Each returns a started port or a Status whose message names what failed
// ("pcap file 'a.pcap': No such file or directory"); SimBackend::open_port
// adds the "port NAME: " prefix. Every sim port has one rx queue, or
// spec.rxq for ring and pcap in= ports (RSS, keel/hal/rss.h); one tx queue,
// or for a ring port the tx queues the caller asks (its tx ring is
// multi-producer); and reports its link up at 10 Gb/s (down after
// Port::set_link(false)).
//
// Thread-safety: called on the control thread while the port is not yet
// visible to any PMD.
#pragma once

#include <memory>

#include "core/status.h"
#include "keel/hal/port.h"
#include "keel/hal/port_spec.h"
#include "pool.h"
#include "sim_flow.h"

namespace keel::hal::sim {

inline constexpr uint32_t kSimLinkSpeedMbps = 10000;

// What a sim port's link() reports: up at 10 Gb/s unless set_link(false).
inline LinkState sim_link(const Port& p) { return LinkState{!p.link_forced_down(), kSimLinkSpeedMbps, true}; }

Result<std::unique_ptr<Port>> open_pcap_port(const PortSpec& spec, const std::shared_ptr<Pool>& pool);
// n_txq: the tx queues the caller asks (Backend::open_port), 1..kMaxQueues.
Result<std::unique_ptr<Port>> open_ring_port(const PortSpec& spec, const std::shared_ptr<Pool>& pool,
                                             uint16_t n_txq = 1);
Result<std::unique_ptr<Port>> open_null_port(const PortSpec& spec, const std::shared_ptr<Pool>& pool);
Result<std::unique_ptr<Port>> open_sample_port(const PortSpec& spec, const std::shared_ptr<Pool>& pool);
Result<std::unique_ptr<Port>> open_tap_port(const PortSpec& spec, const std::shared_ptr<Pool>& pool);

}  // namespace keel::hal::sim

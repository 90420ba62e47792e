// hal::Backend — the NIC: how ports are opened, where packet buffers come
// from, and what each thread must do to use them.
//
// A run has a Sim backend always (software ports: pcap, ring, tap, null,
// sample) and a DPDK backend when the build has DPDK and the board or a
// --port asks for it. Both produce hal::Packet, so the datapath does not
// know which it runs on; a packet received on one backend may be sent on the
// other (DPDK copies a foreign buffer into an mbuf).
//
// Life cycle: make_*_backend() (may fail: EAL arguments, no memory), then
// open_port() per port (may fail: clear Status naming the port), then PMD
// threads call thread_init() once before their first rx, then shutdown()
// after every port is stopped and every PMD joined.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "keel/hal/port.h"
#include "keel/hal/port_spec.h"

namespace keel::hal {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // Opens (configures and starts) a port with n_rxq rx and n_txq tx queues
  // (a backend may give fewer; check Port::n_rxq()/n_txq()).
  virtual Result<std::unique_ptr<Port>> open_port(const PortSpec& spec, uint16_t n_rxq,
                                                  uint16_t n_txq) = 0;

  // Allocates up to out.size() empty packets (for packets the datapath
  // makes) whose tailroom holds `len` bytes each: a standard buffer for len
  // <= kBufferSize, a jumbo one above (none above kJumboBufferSize).
  virtual unsigned alloc_burst(std::span<Packet*> out, uint32_t len = 0) noexcept = 0;

  // Called once on each thread that will use ports (PMDs), before use.
  virtual Status thread_init() { return {}; }
  virtual void thread_exit() {}

  virtual void shutdown() {}
};

struct SimOptions {
  unsigned buffers = 8192;        // standard (2 KB) packet buffers in the sim pool
  unsigned jumbo_buffers = 1024;  // jumbo (9 KB) buffers, for frames over 2 KB (see sim/pool.h)
  // Capacity of the modelled NIC flow tables (the board's offload_flows;
  // host-sim's 65536 by default): 15/16 exact-match, 1/16 masked
  // (keel/hal/sim_nic.h, sim/sim_flow.h). 0: no model, sim ports have no
  // flow engine.
  uint32_t offload_flows = 65536;
};
// The sim NIC model of a sim backend (faults, costs, counts): sim::sim_nic()
// in keel/hal/sim_nic.h.
Result<std::unique_ptr<Backend>> make_sim_backend(const SimOptions& opts);

// Whether this build carries the DPDK backend.
bool have_dpdk();
// Initialises the EAL with `eal_args` (argv[0] is added) and makes the mbuf
// pool, sized for `ports` (the dpdk: specs among them; see
// dpdk::pool_mbufs_for). Fails with the EAL's reason when it refuses the
// arguments, when the pool does not fit the EAL's memory, or when the build
// has no DPDK.
Result<std::unique_ptr<Backend>> make_dpdk_backend(const std::vector<std::string>& eal_args,
                                                   const std::vector<PortSpec>& ports = {});

}  // namespace keel::hal

// The sim backend: software ports over one packet pool, available in every
// build and on every machine (the `host-sim` board runs on it, and so do the
// unit and integration tests).
//
// It owns the sim::Pool (pool.h) and shares it with the ports it opens, so
// the pool lives until the backend and every port are gone. Port kinds and
// what they do are described in their files: pcap_port.cpp, ring_port.h,
// null_port.cpp, sample_port.cpp, tap_port.cpp. Every sim port has one rx
// queue, except ring and pcap in= ports, which have the spec's rxq=
// (PortSpec::rxq) filled by RSS (the n_rxq argument is ignored); one tx
// queue, except ring ports, which take the n_txq asked (one tx ring that
// every queue may push onto). Callers read n_rxq()/n_txq().
//
// Life cycle: make_sim_backend() allocates the pool (may fail: memory);
// open_port() may fail with "port NAME: <reason>"; thread_init() gives the
// calling PMD thread a buffer cache (pool.h), thread_exit() takes it back;
// shutdown() does nothing —
// ports flush in stop().
//
// NIC model: with SimOptions::offload_flows > 0 the backend owns one
// sim::SimNicModel (sim_flow.h), an e-switch shared by every port it opens:
// open_port() attaches each port (its flow engine and the model's
// HwIngress), each port's destructor detaches it; sim::sim_nic() hands the
// model's control API (keel/hal/sim_nic.h) to control/ and cli/. The model
// is declared before the pool and outlives every port (ports die first).
//
// Thread-safety: open_port() on the control thread; alloc_burst() from any
// thread (the pool is lock-free).
#include <exception>
#include <memory>
#include <new>

#include "keel/hal/backend.h"
#include "keel/hal/sim_nic.h"
#include "pool.h"
#include "sim_flow.h"
#include "sim_ports.h"

namespace keel::hal {

namespace {

class SimBackend final : public Backend {
 public:
  SimBackend(std::shared_ptr<sim::Pool> pool, uint32_t offload_flows) : pool_(std::move(pool)) {
    if (offload_flows) nic_ = sim::make_sim_nic(offload_flows);
  }

  sim::SimNicModel* nic() const { return nic_.get(); }

  const char* name() const override { return "sim"; }

  Result<std::unique_ptr<Port>> open_port(const PortSpec& spec, uint16_t, uint16_t n_txq) override {
    auto r = open(spec, n_txq);
    if (!r) return std::move(r).take_status().prefix("port " + spec.name);
    r.value()->set_backend(this);
    if (nic_) {
      auto* hw = dynamic_cast<sim::SimNicPort*>(r.value().get());
      if (hw) sim::attach_port(nic_, *r.value(), *hw);
    }
    return r;
  }

  unsigned alloc_burst(std::span<Packet*> out, uint32_t len = 0) noexcept override {
    return pool_->alloc_burst(out, len);
  }

  // A PMD thread gets a buffer cache (pool.h), given back when it ends.
  Status thread_init() override {
    pool_->attach_cache();
    return {};
  }
  void thread_exit() override { pool_->detach_cache(); }

 private:
  Result<std::unique_ptr<Port>> open(const PortSpec& spec, uint16_t n_txq) {
    // Setup-time code: a failed allocation (a 2^20-slot ring, a path string)
    // becomes a message instead of escaping.
    try {
      switch (spec.kind) {
        case PortKind::pcap:
          return sim::open_pcap_port(spec, pool_);
        case PortKind::ring:
          return sim::open_ring_port(spec, pool_, n_txq);
        case PortKind::null:
          return sim::open_null_port(spec, pool_);
        case PortKind::sample:
          return sim::open_sample_port(spec, pool_);
        case PortKind::tap:
          return sim::open_tap_port(spec, pool_);
        case PortKind::dpdk:
          return error(Errc::unsupported, "dpdk ports need the DPDK backend");
      }
      return error(Errc::internal, "unknown port kind");
    } catch (const std::bad_alloc&) {
      return error(Errc::resource_exhausted, "out of memory opening the port");
    } catch (const std::exception& e) {
      return error(Errc::internal, e.what());
    }
  }

  sim::SimNicPtr nic_;  // null: offload_flows = 0
  std::shared_ptr<sim::Pool> pool_;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_sim_backend(const SimOptions& opts) {
  auto pool = sim::Pool::create(opts.buffers, opts.jumbo_buffers);
  if (!pool) return std::move(pool).take_status();
  try {
    return std::unique_ptr<Backend>(new SimBackend(std::move(pool).value(), opts.offload_flows));
  } catch (const std::bad_alloc&) {
    return error(Errc::resource_exhausted,
                 "out of memory for the NIC model's " + std::to_string(opts.offload_flows) + "-rule tables");
  }
}

namespace sim {
SimNic* sim_nic(Backend& b) {
  auto* s = dynamic_cast<SimBackend*>(&b);
  return s && s->nic() ? &as_control(*s->nic()) : nullptr;
}
}  // namespace sim

}  // namespace keel::hal

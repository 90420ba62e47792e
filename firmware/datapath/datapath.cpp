// Datapath: port table, PMD threads, rx-queue assignment, drain detection.
#include "datapath/datapath.h"

#include <chrono>
#include <thread>

#include "keel/hal/cpu.h"

namespace keel::datapath {

Datapath::Datapath(DatapathConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.pmd_cores.empty()) cfg_.pmd_cores.push_back(-1);
  for (auto& x : xconnect_) x.store(0, std::memory_order_relaxed);
  txq_locks_ = std::make_unique<std::atomic_flag[]>(kMaxPorts * hal::Port::kMaxQueues);
}

Datapath::~Datapath() {
  stop();
  stop_ports();
}

Result<uint16_t> Datapath::add_port(std::unique_ptr<hal::Port> port) {
  if (running_) return error(Errc::unavailable, "ports can't be added while forwarding");
  if (find_port(port->name())) return error(Errc::already_exists, "port " + port->name() + " exists");
  if (n_ports_ + 1u >= kMaxPorts) return error(Errc::resource_exhausted, "too many ports");
  uint16_t id = ++n_ports_;
  port->set_id(id);
  ports_[id] = std::move(port);
  return id;
}

hal::Port* Datapath::port(uint16_t id) const { return id < kMaxPorts ? ports_[id].get() : nullptr; }

hal::Port* Datapath::find_port(std::string_view name) const {
  for (uint16_t i = 1; i <= n_ports_; ++i)
    if (ports_[i] && ports_[i]->name() == name) return ports_[i].get();
  return nullptr;
}

std::vector<hal::Port*> Datapath::ports() const {
  std::vector<hal::Port*> v;
  for (uint16_t i = 1; i <= n_ports_; ++i)
    if (ports_[i]) v.push_back(ports_[i].get());
  return v;
}

void Datapath::set_xconnect(uint16_t in, std::optional<uint16_t> out) {
  // release: pairs with nothing stronger than the PMD's relaxed load; the
  // port object named is fully built before start() (see header).
  xconnect_[in].store(out.value_or(0), std::memory_order_release);
}

std::optional<uint16_t> Datapath::xconnect(uint16_t in) const {
  uint16_t v = xconnect_[in].load(std::memory_order_acquire);
  return v ? std::optional<uint16_t>(v) : std::nullopt;
}

Status Datapath::start(std::vector<hal::Backend*> backends) {
  if (running_) return {};
  const unsigned n = static_cast<unsigned>(cfg_.pmd_cores.size());
  pmds_.clear();
  for (unsigned i = 0; i < n; ++i)
    pmds_.push_back(std::make_unique<Pmd>(*this, i, cfg_.pmd_cores[i], cfg_.pmd_idle_sleep_us));

  // rx queues round-robin over the PMDs, port by port.
  unsigned next = 0;
  for (hal::Port* p : ports())
    for (uint16_t q = 0; q < p->n_rxq(); ++q) pmds_[next++ % n]->add_rx_queue(p, q);

  // tx queue q = pmd % n_txq; shared when the port has fewer queues than PMDs.
  txqs_.assign(n, {});
  for (hal::Port* p : ports())
    for (unsigned i = 0; i < n; ++i)
      txqs_[i][p->id()] = {static_cast<uint16_t>(i % p->n_txq()), p->n_txq() < n};

  for (auto& pmd : pmds_) {
    Status st = pmd->start(backends);
    if (!st.ok()) {
      for (auto& other : pmds_) other->stop();
      pmds_.clear();
      return st;
    }
  }
  running_ = true;
  return {};
}

void Datapath::stop() {
  for (auto& pmd : pmds_) pmd->stop();
  running_ = false;
}

void Datapath::stop_ports() {
  for (hal::Port* p : ports()) p->stop();
}

void Datapath::lock_txq(uint16_t id, uint16_t q) {
  auto& f = txq_locks_[id * hal::Port::kMaxQueues + q];
  while (f.test_and_set(std::memory_order_acquire)) {
  }
}

void Datapath::unlock_txq(uint16_t id, uint16_t q) {
  txq_locks_[id * hal::Port::kMaxQueues + q].clear(std::memory_order_release);
}

bool Datapath::wait_drained(uint64_t timeout_ms) {
  const uint64_t deadline = hal::now_ns() + timeout_ms * 1'000'000;
  auto pending = [this] {
    for (hal::Port* p : ports())
      if (p->input_state() == hal::InputState::pending) return true;
    return false;
  };
  while (pending()) {
    if (hal::now_ns() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Every PMD must finish two more iterations: the first may have started
  // before the last packet was read, the second then began after it.
  std::vector<uint64_t> seen;
  for (auto& pmd : pmds_) seen.push_back(pmd->iterations());
  for (size_t i = 0; i < pmds_.size(); ++i) {
    while (pmds_[i]->iterations() < seen[i] + 2) {
      if (hal::now_ns() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  return true;
}

}  // namespace keel::datapath

// The PMD loop. Cost at this stage: one rx burst, one table load, one tx
// burst per port per iteration; per packet only the port's counter sums.
#include "datapath/pmd.h"

#include <time.h>

#include <array>
#include <string>

#include "datapath/datapath.h"
#include "keel/hal/cpu.h"

namespace keel::datapath {

namespace {
// Housekeeping (idle back-off decisions) runs every this many iterations.
constexpr unsigned kHousekeepingEvery = 1024;

void bump(std::atomic<uint64_t>& c, uint64_t n) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
}  // namespace

Pmd::Pmd(Datapath& dp, unsigned index, int core, uint32_t idle_sleep_us)
    : dp_(dp), index_(index), core_(core), idle_sleep_us_(idle_sleep_us) {}

Pmd::~Pmd() { stop(); }

Status Pmd::start(std::vector<hal::Backend*> backends) {
  backends_ = std::move(backends);
  quit_.store(false, std::memory_order_relaxed);
  started_.store(0, std::memory_order_relaxed);
  thread_ = std::thread([this] { run(); });
  // Wait for the thread to say whether it could pin itself and register
  // with the backends: a PMD that can't run is a boot error, not a log line.
  while (started_.load(std::memory_order_acquire) == 0) std::this_thread::yield();
  if (started_.load(std::memory_order_acquire) < 0) {
    thread_.join();
    return start_status_;
  }
  return {};
}

void Pmd::stop() {
  quit_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

PmdCounters Pmd::counters() const {
  auto ld = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  return {ld(iterations_), ld(rx_packets_),  ld(tx_packets_),
          ld(dropped_no_route_), ld(busy_cycles_), ld(idle_cycles_)};
}

void Pmd::run() {
  hal::name_current_thread("pmd" + std::to_string(index_));
  Status st;
  st = core_ >= 0 ? hal::pin_current_thread(static_cast<unsigned>(core_)) : hal::unpin_current_thread();
  size_t inited = 0;
  for (; st.ok() && inited < backends_.size(); ++inited) st = backends_[inited]->thread_init();
  if (!st.ok()) {
    start_status_ = st.prefix("pmd" + std::to_string(index_));
    for (size_t i = 0; i + 1 < inited; ++i) backends_[i]->thread_exit();
    started_.store(-1, std::memory_order_release);
    return;
  }
  started_.store(1, std::memory_order_release);

  std::array<hal::Packet*, hal::kMaxBurst> burst;
  uint64_t idle_iters = 0;
  uint64_t last = hal::cycles();
  uint64_t iter = 0;
  while (!quit_.load(std::memory_order_relaxed)) {
    unsigned got = 0;
    for (const RxQueue& rxq : rxqs_) {
      uint16_t n = rxq.port->rx(rxq.queue, burst);
      if (n) {
        got += n;
        forward(*rxq.port, rxq.queue, std::span(burst.data(), n));
      }
    }
    uint64_t now = hal::cycles();
    bump(got ? busy_cycles_ : idle_cycles_, now - last);
    last = now;
    if (got) bump(rx_packets_, got);
    idle_iters = got ? 0 : idle_iters + 1;
    iterations_.store(++iter, std::memory_order_release);  // see iterations()

    if (iter % kHousekeepingEvery == 0 || (idle_sleep_us_ && idle_iters > kHousekeepingEvery)) {
      // A host board shares its CPUs: back off while there is nothing to do.
      if (idle_sleep_us_ && idle_iters > kHousekeepingEvery) {
        timespec ts{0, static_cast<long>(idle_sleep_us_) * 1000};
        nanosleep(&ts, nullptr);
        last = hal::cycles();  // sleeping is neither busy nor polling
      }
    }
  }
  for (hal::Backend* b : backends_) b->thread_exit();
}

void Pmd::forward(hal::Port& in, uint16_t q, std::span<hal::Packet*> pkts) {
  uint16_t out_id = dp_.xconnect_fast(in.id());
  hal::Port* out = out_id ? dp_.port_fast(out_id) : nullptr;
  if (!out) {
    hal::release_burst(pkts);
    in.count_rx_dropped(q, pkts.size());
    bump(dropped_no_route_, pkts.size());
    return;
  }
  Datapath::TxQueue tq = dp_.txq(index_, out_id);
  if (tq.shared) dp_.lock_txq(out_id, tq.queue);
  uint16_t sent = out->tx(tq.queue, pkts);
  if (tq.shared) dp_.unlock_txq(out_id, tq.queue);
  bump(tx_packets_, sent);
}

}  // namespace keel::datapath

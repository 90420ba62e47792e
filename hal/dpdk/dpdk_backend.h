// hal/dpdk backend — the EAL, the mbuf pool and the list of open ports.
//
// One DpdkBackend per process (the EAL can be initialised once per process;
// see dpdk_backend.cpp). It owns:
//   * the mbuf pool every port receives into and transmits from
//     (priv_size = sizeof(hal::Packet): the descriptor lives in the mbuf, see
//     mbuf.h), 2 KB of data per mbuf;
//   * a jumbo pool (same layout, kJumboBufferSize of data per mbuf) for
//     frames longer than that: a frame a NIC or vdev delivers as a segment
//     chain is copied into one jumbo mbuf at rx, sim buffers and datapath
//     copies over 2 KB get one (see kJumboMbufs for why this and not a pool
//     sized for the largest MTU);
//   * a DpdkShared record that its ports also hold (shared_ptr), so that
//     shutdown() can stop ports still open, and a port destroyed after the
//     backend does not touch freed memory.
//
// Life cycle: make_dpdk_backend() -> open_port()* -> [PMDs: thread_init(),
// rx/tx, thread_exit()] -> Port::stop()/destruction -> shutdown() (frees the
// pool, rte_eal_cleanup; also run by the destructor). After shutdown() no
// DPDK call may be made in this process, and make_dpdk_backend() fails.
//
// Thread-safety: open_port(), shutdown() and the DpdkShared port list are
// control-thread work, serialised by DpdkShared::mu (never taken on a PMD).
// alloc_burst() may be called from any thread (the mempool is multi-producer
// multi-consumer, with a per-lcore cache on registered threads).
// thread_init()/thread_exit() act on the calling thread only; thread_exit()
// flushes the thread's mempool cache back to the pool.
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "keel/hal/backend.h"

namespace keel::hal::dpdk {

class DpdkPort;

struct DpdkShared {
  std::mutex mu;
  std::vector<DpdkPort*> ports;  // open (constructed, not destroyed) ports
  rte_mempool* pool = nullptr;
  rte_mempool* jumbo_pool = nullptr;
  bool shut_down = false;
};

class DpdkBackend final : public Backend {
 public:
  DpdkBackend(rte_mempool* pool, rte_mempool* jumbo_pool);
  ~DpdkBackend() override;

  const char* name() const override { return "dpdk"; }
  Result<std::unique_ptr<Port>> open_port(const PortSpec& spec, uint16_t n_rxq, uint16_t n_txq) override;
  unsigned alloc_burst(std::span<Packet*> out, uint32_t len = 0) noexcept override;
  Status thread_init() override;
  void thread_exit() override;
  void shutdown() override;

 private:
  std::shared_ptr<DpdkShared> shared_;
  rte_mempool* pool_;        // == shared_->pool while not shut down
  rte_mempool* jumbo_pool_;  // == shared_->jumbo_pool while not shut down
};

// Mbufs in the pool: kPoolMbufs for the rings, caches and packets in flight
// (every rx queue pins its descriptors' worth, 1024), plus kRxDescriptors
// for each rx queue a port's n_rxq= asks beyond its first, plus, for every
// `net_pcap` port replaying files with infinite_rx=1, one mbuf per record of
// those files: the driver keeps the whole file resident in mbufs, and a pool it
// fills leaves nothing to receive into. About 2.3 KB of EAL memory per mbuf
// (37 MB for the base; a 100k-record pcap adds 230 MB).
inline constexpr unsigned kPoolMbufs = 16384;

// Mbufs in the jumbo pool: frames over 2 KB in flight (ports with an
// mtu_request above 2030). 128 + 64 + 128 + 9280 bytes each, about 9.6 KB:
// 2048 of them are 19 MiB of EAL memory. A pool of 9.6 KB mbufs for every
// port would cost 16384 x 9.6 KB = 150 MiB before the first jumbo frame
// (Open vSwitch makes one pool per MTU in use instead; keel's pools are
// made at boot, before configuration sets MTUs). The rx rings are filled
// from the standard pool, so a NIC delivers a jumbo frame as a chain of
// 2 KB segments (RTE_ETH_RX_OFFLOAD_SCATTER where offered; net_pcap always
// chains) and rx copies it into one jumbo mbuf: a 9000-byte memcpy, about
// half a microsecond, paid by jumbo frames only. A frame that finds the
// jumbo pool empty is dropped and counted as rx_dropped.
inline constexpr unsigned kJumboMbufs = 2048;

// The pool size for these ports (the dpdk: ones count). A pcap that can't be
// read counts 0 here: opening the port reports it.
unsigned pool_mbufs_for(const std::vector<PortSpec>& ports);
inline constexpr unsigned kPoolCache = 256;  // per-lcore mempool cache
inline constexpr uint16_t kRxDescriptors = 1024;
inline constexpr uint16_t kTxDescriptors = 1024;

}  // namespace keel::hal::dpdk

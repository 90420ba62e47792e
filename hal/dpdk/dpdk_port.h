// hal/dpdk port — one DPDK ethdev (a vdev such as net_pcap/net_ring/net_null,
// or a PCI device / representor on the NIC) as a hal::Port.
//
// open() hot-plugs the device from the PortSpec's devargs (rte_dev_probe; a
// device the EAL already probed from -a/--vdev is accepted), finds its ethdev
// port, configures the queues (RSS when the NIC can hash), starts it and
// turns promiscuous mode on. Any failure rolls everything back (stop, close,
// detach) and says which step failed, so nothing is left half-applied.
//
// Per burst: rx_burst() turns rte_mbufs into hal::Packets in place (the
// descriptor is in the mbuf's private area, mbuf.h); tx_burst() writes the
// descriptors back into the mbufs, copies foreign (sim) buffers into fresh
// mbufs, and hands the burst to rte_eth_tx_burst(). One indirect call per
// burst, no allocation other than mempool gets for foreign copies, no lock,
// no syscall (input watching reads the vDSO clock once per non-empty burst,
// and only on net_pcap file inputs).
//
// MTU: set_mtu() calls rte_eth_dev_set_mtu (a device without the call,
// -ENOTSUP, keeps keel's tx limit only — Open vSwitch warns and goes on the
// same way); tx's frame limit is netdev-dpdk's MTU + 14 + 4 (its
// MTU_TO_FRAME_LEN: header and CRC, so one VLAN tag fits either way). Frames
// a NIC delivers as segment chains (jumbo frames over the 2 KB mbufs) are
// copied into one jumbo-pool mbuf at rx (dpdk_backend.h, kJumboMbufs).
//
// Queues (port_spec.h's n_rxq/n_txq): min(asked, what the device has,
// kMaxQueues); RSS over IP/TCP/UDP (what the device supports of them, its
// default key) whenever it can hash. set_queue_count() (port.h) stops the
// device, configures it with the new counts and the same RSS and offloads,
// sets every queue up and starts it; a failure configures the old counts
// again and starts it (the port goes on working), and more rx queues than
// the device has is refused before anything stops. Tx queues are given up
// to what the device has (the datapath shares them). A restart is the
// driver's: net_pcap closes its files at stop and opens them again at start
// (a tx_pcap= file starts over), a NIC drops what its rings held.
//
// Flow offload: flow_engine() is a DpdkFlowEngine (dpdk_flow.h) made at
// open: rte_flow on this ethdev, hal port ids in rules mapped to the ethdev
// ids of this backend's open ports. stop() detaches it (flushes its rules)
// before the device closes; set_queue_count() flushes them before the
// restart and moves the engine's reset_generation. Received packets carry the NIC's MARK
// (RTE_MBUF_F_RX_FDIR_ID, negotiated with rte_eth_rx_metadata_negotiate).
//
// Life cycle: open() (may fail) -> rx/tx from PMDs -> stop() (never fails,
// idempotent: rte_eth_dev_stop + rte_eth_dev_close, which is what makes
// net_pcap flush and close its tx_pcap file; then the device is detached when
// no other ethdev port uses it) -> destruction (calls stop()). The backend's
// shutdown() stops ports that are still open.
//
// Thread-safety: the Port contract (port.h): rx queue q is polled by one
// thread, tx queue q is used by one thread at a time; the DPDK PMDs rely on
// the same rule. The input watch (input_state()) is written per rx queue by
// its polling thread with relaxed atomics and read by the control thread.
// open(), stop(), link(), describe(), set_queue_count() and destruction are
// control-thread calls, and stop() and set_queue_count() only while no PMD
// uses the port.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "dpdk/dpdk_backend.h"
#include "dpdk/dpdk_flow.h"
#include "keel/hal/port.h"

struct rte_device;
struct rte_mbuf;

namespace keel::hal::dpdk {

class DpdkPort final : public Port {
 public:
  // Called by DpdkBackend::open_port() with shared->mu held.
  static Result<std::unique_ptr<Port>> open(const std::shared_ptr<DpdkShared>& shared, const PortSpec& spec,
                                            uint16_t n_rxq, uint16_t n_txq);
  ~DpdkPort() override;

  LinkState link() const override;
  InputState input_state() const override;
  std::string describe() const override;
  void stop() noexcept override;
  FlowEngine* flow_engine() override { return flow_.get(); }

  uint16_t port_id() const { return port_id_; }
  const std::string& driver() const { return driver_; }

  // A net_pcap rx file counts as exhausted once every rx queue has been
  // polled empty with nothing received for this long.
  static constexpr uint64_t kInputQuietNs = 200'000'000;

 protected:
  uint16_t rx_burst(uint16_t q, std::span<Packet*> out) noexcept override;
  uint16_t tx_burst(uint16_t q, std::span<Packet* const> pkts) noexcept override;
  Status apply_mtu(uint32_t mtu) override;
  Status apply_link(bool up) override;
  Status apply_queue_count(uint16_t n_rx, uint16_t& n_tx) override;
  TxFrameLimit frame_limit_for(uint32_t mtu) const override {
    return {mtu + kEthHeaderLen + kVlanHeaderLen, mtu + kEthHeaderLen + kVlanHeaderLen};
  }

 private:
  DpdkPort(std::shared_ptr<DpdkShared> shared, const PortSpec& spec, uint16_t port_id, rte_device* device,
           std::string driver, bool watch_input);
  // What configuring the queues needs, found at open and kept for
  // set_queue_count() (the same RSS and offloads with other counts).
  struct QueueSetup {
    uint64_t rss_hf = 0;                // RSS hash types the device supports among IP/TCP/UDP; 0: no RSS
    uint64_t rx_offloads = 0;           // RSS_HASH, SCATTER where offered
    uint16_t max_rxq = 1, max_txq = 1;  // the device's, at most kMaxQueues
    int socket = 0;
    rte_mempool* pool = nullptr;
  };
  static int setup_queues(uint16_t pid, QueueSetup& qs, uint16_t nrx, uint16_t ntx, std::string& step);
  uint16_t tx_chunk(uint16_t q, std::span<Packet* const> pkts) noexcept;
  // A chained mbuf as one contiguous mbuf (the first segment, or a jumbo
  // copy); nullptr when neither has room (the chain is then freed).
  rte_mbuf* linearize(rte_mbuf* m) noexcept;

  // Per rx queue: when the queue last returned packets, and whether it has
  // been polled empty since. Written only by the queue's PMD.
  struct alignas(64) InputWatch {
    std::atomic<uint64_t> last_rx_ns{0};
    std::atomic<bool> empty_since_rx{false};
  };

  // Fast-path fields first.
  uint16_t port_id_;
  bool watch_input_;  // net_pcap rx file read once: input can run out
  rte_mempool* pool_;
  rte_mempool* jumbo_pool_;
  std::array<InputWatch, kMaxQueues> watch_{};

  std::shared_ptr<DpdkShared> shared_;
  rte_device* device_;
  std::string devargs_;
  std::string driver_;
  QueueSetup qs_;
  std::unique_ptr<DpdkFlowEngine> flow_;
  bool stopped_ = false;
};

}  // namespace keel::hal::dpdk

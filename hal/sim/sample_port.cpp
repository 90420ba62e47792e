// The sample port: an endless source of keel's built-in traffic sample
// (sample_traffic.h), for demos (`keel` with no --port) and benchmarks.
//
// rx copies the next frames of the 64-frame table into pool buffers (a
// 64-byte memcpy per packet). With pps > 0 it is paced like a NIC receiving
// pps packets per second (rx_pacer.h, one clock read per burst: vDSO, no
// syscall): a PMD that was descheduled finds up to RxPacer::kRxRing packets
// waiting and takes them in bursts, so the port delivers pps on average
// however the PMD is scheduled; what arrives while that ring is full is
// counted as rx_dropped. pps = 0 fills every burst. An empty pool shortens
// the burst; the frames stay due (in the ring), none is lost to it. tx
// behaves like the null port.
//
// Thread-safety: the cursor and pacing state belong to the thread polling rx
// queue 0; tx is stateless.
#include <algorithm>
#include <cstring>

#include "keel/hal/cpu.h"
#include "rx_pacer.h"
#include "sample_traffic.h"
#include "sim_ports.h"

namespace keel::hal::sim {

namespace {

class SamplePort final : public Port, public SimNicPort {
 public:
  SamplePort(const PortSpec& spec, std::shared_ptr<Pool> pool)
      : Port(spec.name, "sample"), pool_(std::move(pool)), pps_(spec.pps), pacer_(spec.pps, now_ns()) {
    set_queues(1, 1);
  }
  ~SamplePort() override { detach_from_nic(); }

  FlowEngine* flow_engine() override { return nic_engine(); }
  uint16_t hw_tx(std::span<Packet* const> pkts) noexcept override {  // tx releases: any thread
    release_burst(pkts);
    return static_cast<uint16_t>(pkts.size());
  }

  LinkState link() const override { return sim_link(*this); }
  std::string describe() const override { return "sample pps=" + std::to_string(pps_); }

 protected:
  uint16_t rx_burst(uint16_t q, std::span<Packet*> out) noexcept override {
    size_t want = out.size();
    if (pps_ != 0) {
      const uint64_t dropped_before = pacer_.dropped();
      want = pacer_.ready(now_ns(), want);
      if (pacer_.dropped() != dropped_before) count_rx_dropped(q, pacer_.dropped() - dropped_before);
      if (want == 0) return 0;
    }
    const std::span<const SampleFrame, kSampleFrames> frames = sample_traffic();
    unsigned n = pool_->alloc_burst(out.first(want));
    for (unsigned i = 0; i < n; ++i) {
      std::memcpy(out[i]->data(), frames[next_].data(), kSampleFrameLen);
      out[i]->set_len(kSampleFrameLen);
      next_ = (next_ + 1) % kSampleFrames;
    }
    pacer_.took(n);
    return static_cast<uint16_t>(n);
  }

  uint16_t tx_burst(uint16_t, std::span<Packet* const> pkts) noexcept override {
    release_burst(pkts);
    return static_cast<uint16_t>(pkts.size());
  }

 private:
  std::shared_ptr<Pool> pool_;
  const uint64_t pps_;
  RxPacer pacer_;
  unsigned next_ = 0;     // next frame of the table
};

}  // namespace

Result<std::unique_ptr<Port>> open_sample_port(const PortSpec& spec, const std::shared_ptr<Pool>& pool) {
  return std::unique_ptr<Port>(new SamplePort(spec, pool));
}

}  // namespace keel::hal::sim

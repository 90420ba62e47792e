// The sample port: an endless source of keel's built-in traffic sample
// (sample_traffic.h), for demos (`keel` with no --port) and benchmarks.
//
// rx copies the next frames of the 64-frame table into pool buffers (a
// 64-byte memcpy per packet). With pps > 0 it is paced: the packets due are
// elapsed_ns * pps / 1e9 since open, minus those already given, read with
// one clock read per burst (vDSO, no syscall). After a stall the port gives
// at most one burst of catch-up, so a PMD that was descheduled does not get
// a flood; the average rate stays at or below pps. pps = 0 fills every burst.
// An empty pool shortens the burst; the frames are generated later, none is
// lost or counted as dropped. tx behaves like the null port.
//
// Thread-safety: the cursor and pacing state belong to the thread polling rx
// queue 0; tx is stateless.
#include <algorithm>
#include <cstring>

#include "keel/hal/cpu.h"
#include "sample_traffic.h"
#include "sim_ports.h"

namespace keel::hal::sim {

namespace {

class SamplePort final : public Port {
 public:
  SamplePort(const PortSpec& spec, std::shared_ptr<Pool> pool)
      : Port(spec.name, "sample"), pool_(std::move(pool)), pps_(spec.pps), start_ns_(now_ns()) {
    set_queues(1, 1);
  }

  LinkState link() const override { return sim_link_up(); }
  std::string describe() const override { return "sample pps=" + std::to_string(pps_); }

 protected:
  uint16_t rx_burst(uint16_t, std::span<Packet*> out) noexcept override {
    size_t want = out.size();
    if (pps_ != 0) {
      const uint64_t elapsed = now_ns() - start_ns_;
      // 128-bit: elapsed (ns) * pps overflows 64 bits after minutes at Mpps.
      const auto due = static_cast<uint64_t>((unsigned __int128)elapsed * pps_ / 1'000'000'000u);
      if (due <= emitted_) return 0;
      if (due - emitted_ > want) emitted_ = due - want;  // at most one burst of catch-up
      want = std::min<uint64_t>(want, due - emitted_);
    }
    const std::span<const SampleFrame, kSampleFrames> frames = sample_traffic();
    unsigned n = pool_->alloc_burst(out.first(want));
    for (unsigned i = 0; i < n; ++i) {
      std::memcpy(out[i]->data(), frames[next_].data(), kSampleFrameLen);
      out[i]->set_len(kSampleFrameLen);
      next_ = (next_ + 1) % kSampleFrames;
    }
    emitted_ += n;
    return static_cast<uint16_t>(n);
  }

  uint16_t tx_burst(uint16_t, std::span<Packet* const> pkts) noexcept override {
    release_burst(pkts);
    return static_cast<uint16_t>(pkts.size());
  }

 private:
  std::shared_ptr<Pool> pool_;
  const uint64_t pps_;
  const uint64_t start_ns_;
  uint64_t emitted_ = 0;  // packets given (after catch-up trimming)
  unsigned next_ = 0;     // next frame of the table
};

}  // namespace

Result<std::unique_ptr<Port>> open_sample_port(const PortSpec& spec, const std::shared_ptr<Pool>& pool) {
  return std::unique_ptr<Port>(new SamplePort(spec, pool));
}

}  // namespace keel::hal::sim

// The pcap port: replays a capture as received traffic and/or records what
// is sent into a capture, which is how integration tests drive the real
// datapath with packets and compare its output byte for byte.
//
//   in=FILE   rx copies the file's records, in order, into pool buffers,
//             `loops` times (0: forever). The file was read and checked at
//             open (PcapReader: records up to kMaxFrameLen, the frame of
//             the largest MTU), so rx is a memcpy per packet and nothing
//             else: records up to kBufferSize go into standard buffers
//             taken in bulk, longer ones into jumbo buffers taken one by one
//             (sim/pool.h). When the pool (or the class a record needs) is
//             empty rx returns what it has and the next record waits for the
//             next poll: nothing is lost, nothing is counted as dropped. The
//             port's MTU does not limit rx (as in Open vSwitch).
//   out=FILE  tx appends each frame as a record (one timestamp per burst)
//             and releases the packet. Without out=, tx takes nothing and
//             Port::tx() counts the burst as tx_dropped.
//
// input_state(): live without in=; pending until the last loop's last record
// has been handed out, then drained (an empty capture is drained at once).
//
// Thread-safety: rx state (cursor, loop count) belongs to the thread polling
// rx queue 0, the writer to the thread owning tx queue 0 and then to the
// control thread for stop(). input_state is an atomic read by the control
// thread: the PMD's release store of `drained` follows its last rx, so a
// reader that sees drained knows every packet has been handed to the
// datapath.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <string>

#include "pcap_file.h"
#include "sim_ports.h"

namespace keel::hal::sim {

namespace {

class PcapPort final : public Port {
 public:
  PcapPort(const PortSpec& spec, std::shared_ptr<Pool> pool, std::optional<PcapReader> reader,
           std::unique_ptr<PcapWriter> writer)
      : Port(spec.name, "pcap"),
        pool_(std::move(pool)),
        reader_(std::move(reader)),
        writer_(std::move(writer)),
        loops_(spec.loops),
        in_path_(spec.pcap_in),
        out_path_(spec.pcap_out) {
    set_queues(1, 1);
    if (reader_ && reader_->size() == 0) state_.store(InputState::drained, std::memory_order_relaxed);
  }
  ~PcapPort() override { stop(); }

  LinkState link() const override { return sim_link_up(); }

  InputState input_state() const override {
    if (!reader_) return InputState::live;
    return state_.load(std::memory_order_acquire);  // pairs with rx_burst's release
  }

  std::string describe() const override {
    std::string d = "pcap";
    if (!in_path_.empty()) d += " in=" + in_path_;
    if (!out_path_.empty()) d += " out=" + out_path_;
    if (!in_path_.empty()) d += " loop=" + std::to_string(loops_);
    return d;
  }

  void stop() noexcept override {
    if (writer_) (void)writer_->close();  // idempotent; a write error was counted already
  }

 protected:
  uint16_t rx_burst(uint16_t, std::span<Packet*> out) noexcept override {
    if (!reader_ || state_.load(std::memory_order_relaxed) != InputState::pending) return 0;
    const size_t records = reader_->size();
    size_t want = std::min<size_t>(out.size(), kMaxBurst);
    // Stop exactly at the end of the last loop. With more loops left than
    // a burst holds there are more records left than that too (>= 1 each).
    if (loops_ != 0 && loops_ - done_loops_ <= want) {
      want = std::min<uint64_t>(want, (loops_ - done_loops_) * records - next_);
    }
    Packet* standard[kMaxBurst];
    const unsigned have = pool_->alloc_burst({standard, want});
    unsigned used = 0, n = 0;
    for (; n < want; ++n) {
      std::span<const uint8_t> f = reader_->frame(next_);
      Packet* p;
      if (f.size() <= kBufferSize) [[likely]] {
        if (used == have) break;
        p = standard[used++];
      } else if (!(p = pool_->alloc(static_cast<uint32_t>(f.size())))) {
        break;
      }
      out[n] = p;
      std::memcpy(p->data(), f.data(), f.size());
      p->set_len(static_cast<uint32_t>(f.size()));
      if (++next_ == records) {
        next_ = 0;
        if (++done_loops_ == loops_) {  // never true for loops_ == 0 (forever)
          state_.store(InputState::drained, std::memory_order_release);
        }
      }
    }
    for (unsigned i = used; i < have; ++i) pool_->free(standard[i]);  // a jumbo record took their place
    return static_cast<uint16_t>(n);
  }

  uint16_t tx_burst(uint16_t, std::span<Packet* const> pkts) noexcept override {
    if (!writer_ || !writer_->is_open()) return 0;
    const uint64_t ts = wall_clock_ns();  // one clock read per burst
    uint16_t n = 0;
    for (Packet* p : pkts) {
      if (!writer_->write(p->bytes(), ts)) break;  // the rest: Port::tx drops and counts them
      hal::release(p);
      ++n;
    }
    return n;
  }

 private:
  std::shared_ptr<Pool> pool_;
  std::optional<PcapReader> reader_;
  std::unique_ptr<PcapWriter> writer_;
  const uint64_t loops_;
  const std::string in_path_, out_path_;
  // rx side (rx queue owner)
  size_t next_ = 0;
  uint64_t done_loops_ = 0;
  std::atomic<InputState> state_{InputState::pending};
};

}  // namespace

Result<std::unique_ptr<Port>> open_pcap_port(const PortSpec& spec, const std::shared_ptr<Pool>& pool) {
  if (spec.pcap_in.empty() && spec.pcap_out.empty()) return invalid("pcap needs in=FILE, out=FILE or both");
  // Read the input before creating the output, so in= and out= may name the
  // same file (the old contents are replayed).
  std::optional<PcapReader> reader;
  if (!spec.pcap_in.empty()) {
    auto r = PcapReader::open(spec.pcap_in, kMaxFrameLen);
    if (!r) return std::move(r).take_status();
    reader.emplace(std::move(r).value());
  }
  std::unique_ptr<PcapWriter> writer;
  if (!spec.pcap_out.empty()) {
    auto w = PcapWriter::create(spec.pcap_out);
    if (!w) return std::move(w).take_status();
    writer = std::move(w).value();
  }
  return std::unique_ptr<Port>(new PcapPort(spec, pool, std::move(reader), std::move(writer)));
}

}  // namespace keel::hal::sim

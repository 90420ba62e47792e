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
// rxq=Q > 1 (in= only): the capture is spread over Q rx queues as a NIC
// spreads traffic by RSS (keel/hal/rss.h). At open, each record's Toeplitz
// hash is computed once and its queue picked through the 128-entry RETA
// (entry i = i % Q; records without an IP header: no hash, queue 0); queue q
// then replays its own records in file order, `loops` times, each packet
// carrying its RSS hash. Per-flow order is the file's within a queue (a
// flow's records all hash to one queue); across queues there is no order,
// as on a NIC. With rxq=1 nothing is hashed (as before, and as Open
// vSwitch's netdev-dummy): the datapath computes its own hash.
//
// Offline runs (datapath.h): next_rx_timestamp_ns(q) / rx_records_before(q)
// read queue q's cursor and its record list, so each queue's reader merges
// its queues by timestamp without touching another queue's state. With one
// reader, merge_rx_queues() makes queue 0 hand out every record in file
// order, with the same RSS hashes, and the other queues nothing, so one
// reader merging inputs by timestamp keeps the input order.
//
// input_state(): live without in=; pending until the last loop's last record
// has been handed out, then drained (an empty capture is drained at once).
//
// input_kind(): none without in=, live with loop=0 (endless), else a finite
// replay, whose record timestamps an offline run merges by (datapath.h).
// Loop k (from 0) of the capture is stamped k * (span + 1 ns) later than
// the file says, span being its last minus its first timestamp, so that
// the timestamps of a looped replay keep growing as its records do.
//
// Thread-safety: the rx state of queue q (cursor, loop count) belongs to the
// thread polling rx queue q (the single-queue cursor, also used merged, to
// the thread polling queue 0), which alone calls rx(q),
// next_rx_timestamp_ns(q) and rx_records_before(q); the relaxed loads of
// state_ there only end the answers early once the whole input is
// drained. The per-record hashes and queue lists are written at open and
// only read afterwards. The writer is used by the thread owning tx queue 0,
// by the sim NIC model's hardware tx (hw_tx(), on the PMD polling the port
// a forwarding rule matched on) and by the control thread for stop(); a
// spin lock (writer_lock_) serialises the three, one burst at a time.
// merge_rx_queues() runs on the control thread before any rx. input_state is
// an atomic read by the control thread: the PMD's release store of `drained`
// follows its last rx, so a reader that sees drained knows every packet has
// been handed to the datapath. With several queues each queue's end is an
// acq_rel decrement of queues_left_, and the thread whose decrement ends the
// last queue stores drained: the RMW chain orders every queue's last rx
// before that store.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "keel/hal/cpu.h"
#include "keel/hal/rss.h"
#include "pcap_file.h"
#include "sim_ports.h"

namespace keel::hal::sim {

namespace {

class PcapPort final : public Port, public SimNicPort {
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
    const uint16_t nrxq = reader_ ? spec.rxq : 1;
    set_queues(nrxq, 1);
    if (reader_ && reader_->size() == 0) state_.store(InputState::drained, std::memory_order_relaxed);
    if (reader_ && reader_->size() != 0)
      loop_stride_ns_ = reader_->timestamp_ns(reader_->size() - 1) - reader_->timestamp_ns(0) + 1;
    if (nrxq > 1) spread(nrxq);
  }
  ~PcapPort() override {
    detach_from_nic();
    stop();
  }

  FlowEngine* flow_engine() override { return nic_engine(); }
  // The model's hardware tx (another PMD's thread): the writer lock
  // serialises it with tx_burst() and stop().
  uint16_t hw_tx(std::span<Packet* const> pkts) noexcept override { return write_locked(pkts); }

  LinkState link() const override { return sim_link(*this); }

  InputState input_state() const override {
    if (!reader_) return InputState::live;
    return state_.load(std::memory_order_acquire);  // pairs with rx_burst's release
  }

  InputKind input_kind() const override {
    if (!reader_) return InputKind::none;
    return loops_ == 0 ? InputKind::live : InputKind::finite_replay;
  }

  uint64_t next_rx_timestamp_ns(uint16_t q) const noexcept override {
    if (!reader_ || state_.load(std::memory_order_relaxed) != InputState::pending) return kNoRecord;
    if (lists_.empty() || merged_) return q == 0 ? stamp(done_loops_, next_) : kNoRecord;
    const RxQueue& rq = queues_[q];
    if (rq.drained) return kNoRecord;
    return stamp(rq.done_loops, lists_[q][rq.next]);
  }

  unsigned rx_records_before(uint16_t q, uint64_t limit_ns, bool inclusive,
                             unsigned max) const noexcept override {
    if (!reader_ || state_.load(std::memory_order_relaxed) != InputState::pending) return 0;
    if (lists_.empty() || merged_) {
      if (q != 0) return 0;
      return records_before(next_, done_loops_, reader_->size(), limit_ns, inclusive, max,
                            [](size_t i) { return i; });
    }
    const RxQueue& rq = queues_[q];
    if (rq.drained) return 0;
    const std::vector<uint32_t>& list = lists_[q];
    return records_before(rq.next, rq.done_loops, list.size(), limit_ns, inclusive, max,
                          [&list](size_t i) -> size_t { return list[i]; });
  }

  std::string describe() const override {
    std::string d = "pcap";
    if (!in_path_.empty()) d += " in=" + in_path_;
    if (!out_path_.empty()) d += " out=" + out_path_;
    if (!in_path_.empty()) d += " loop=" + std::to_string(loops_);
    if (n_rxq() > 1) d += " rxq=" + std::to_string(n_rxq());
    return d;
  }

  uint16_t merge_rx_queues() noexcept override {
    merged_ = true;
    return 1;
  }

  void stop() noexcept override {
    WriterLock g(writer_lock_);
    if (writer_) (void)writer_->close();  // idempotent; a write error was counted already
  }

 protected:
  uint16_t rx_burst(uint16_t q, std::span<Packet*> out) noexcept override {
    if (!reader_ || state_.load(std::memory_order_relaxed) != InputState::pending) return 0;
    if (lists_.empty() || merged_) {
      if (q != 0) return 0;
      return replay(out, next_, done_loops_, reader_->size(), nullptr, [](size_t i) { return i; });
    }
    RxQueue& rq = queues_[q];
    if (rq.drained) return 0;
    const std::vector<uint32_t>& list = lists_[q];
    return replay(out, rq.next, rq.done_loops, list.size(), &rq.drained,
                  [&list](size_t i) -> size_t { return list[i]; });
  }

  // Copies the next records of one cursor (a position `next` in a list of
  // `records` record numbers, record_of(position) -> record, replayed
  // `loops_` times) into pool buffers; ends the cursor's replay after the
  // last loop's last record.
  template <typename RecordOf>
  uint16_t replay(std::span<Packet*> out, size_t& next, uint64_t& done_loops, size_t records,
                  bool* queue_drained, RecordOf record_of) noexcept {
    size_t want = std::min<size_t>(out.size(), kMaxBurst);
    // Stop exactly at the end of the last loop. With more loops left than
    // a burst holds there are more records left than that too (>= 1 each).
    if (loops_ != 0 && loops_ - done_loops <= want) {
      want = std::min<uint64_t>(want, (loops_ - done_loops) * records - next);
    }
    Packet* standard[kMaxBurst];
    const unsigned have = pool_->alloc_burst({standard, want});
    unsigned used = 0, n = 0;
    for (; n < want; ++n) {
      const size_t rec = record_of(next);
      std::span<const uint8_t> f = reader_->frame(rec);
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
      if (!hashes_.empty() && (hashes_[rec] >> 32)) p->set_rss_hash(static_cast<uint32_t>(hashes_[rec]));
      if (++next == records) {
        next = 0;
        if (++done_loops == loops_) {  // never true for loops_ == 0 (forever)
          end_of_cursor(queue_drained);
          ++n;
          break;
        }
      }
    }
    for (unsigned i = used; i < have; ++i) pool_->free(standard[i]);  // a jumbo record took their place
    return static_cast<uint16_t>(n);
  }

  // A cursor's replay ended. The single (or merged) cursor: the input is
  // drained. A queue's: the queue is, and the input when it was the last.
  void end_of_cursor(bool* queue_drained) noexcept {
    if (queue_drained) {
      *queue_drained = true;  // only the queue's own thread reads it
      if (queues_left_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    }
    state_.store(InputState::drained, std::memory_order_release);
  }

  // Setup (constructor): each record's RSS hash and queue, and the queues'
  // record lists.
  void spread(uint16_t nrxq) {
    const RssReta reta(nrxq);
    const size_t records = reader_->size();
    hashes_.assign(records, 0);
    lists_.assign(nrxq, {});
    for (size_t i = 0; i < records; ++i) {
      std::span<const uint8_t> f = reader_->frame(i);
      uint32_t h = 0;
      uint16_t q = 0;
      if (rss_hash_frame(f.data(), static_cast<uint32_t>(f.size()), h)) {
        hashes_[i] = (uint64_t{1} << 32) | h;
        q = reta.queue_for(h);
      }
      lists_[q].push_back(static_cast<uint32_t>(i));
    }
    unsigned left = 0;
    for (uint16_t q = 0; q < nrxq; ++q) {
      if (lists_[q].empty()) {
        queues_[q].drained = true;
      } else {
        ++left;
      }
    }
    queues_left_.store(left, std::memory_order_relaxed);
  }

  // set_queue_count() (port.h). One tx queue always (the writer is one
  // stream: the datapath shares it between PMDs). The rx queues can change
  // before the replay has handed out a record or once it has drained:
  // in between, each queue is at its own place in its own share of the
  // file, and no cursor of a new spread would say which records are left
  // (Open vSwitch's dummy ports start over on a reconfigure; a NIC drops
  // what its rings held). A replay in progress refuses, saying so.
  Status apply_queue_count(uint16_t n_rx, uint16_t& n_tx) override {
    n_tx = 1;
    if (n_rx == n_rxq()) return {};
    if (!reader_) {
      return invalid("port " + name() + ": pcap rxq=" + std::to_string(n_rx) +
                     " needs in=FILE (an output-only port receives nothing)");
    }
    if (merged_) return invalid("port " + name() + ": an offline run reads its pcap inputs as one queue");
    const InputState st = state_.load(std::memory_order_acquire);
    bool started = next_ != 0 || done_loops_ != 0;
    for (const RxQueue& rq : queues_) started |= rq.next != 0 || rq.done_loops != 0;
    if (st == InputState::pending && started) {
      return error(Errc::unsupported, "port " + name() +
                                          ": the rx queues of a pcap replay can change before it starts "
                                          "or once it has drained, not while in progress");
    }
    try {
      queues_ = {};
      hashes_.clear();
      lists_.clear();
      if (n_rx > 1) spread(n_rx);
    } catch (const std::bad_alloc&) {
      // Read as one queue in file order (rx_burst with no lists) until asked again.
      hashes_.clear();
      lists_.clear();
      return error(Errc::resource_exhausted, "port " + name() + ": out of memory spreading the capture");
    }
    return {};
  }

  // How many of a cursor's next records (see replay()), at most `max`, are
  // stamped before limit_ns (or at it, if inclusive).
  template <typename RecordOf>
  unsigned records_before(size_t next, uint64_t loop, size_t records, uint64_t limit_ns, bool inclusive,
                          unsigned max, RecordOf record_of) const noexcept {
    unsigned n = 0;
    while (n < max && (loops_ == 0 || loop < loops_)) {
      const uint64_t ts = stamp(loop, record_of(next));
      if (inclusive ? ts > limit_ns : ts >= limit_ns) break;
      ++n;
      if (++next == records) next = 0, ++loop;
    }
    return n;
  }

  uint64_t stamp(uint64_t loop, size_t i) const noexcept {
    return reader_->timestamp_ns(i) + loop * loop_stride_ns_;
  }

  uint16_t tx_burst(uint16_t, std::span<Packet* const> pkts) noexcept override { return write_locked(pkts); }

 private:
  // Serialises the writer between the tx queue's owner, the NIC model's
  // hardware tx and stop(): a spin lock held for one burst's writes
  // (uncontended unless a rule forwards to this port: ~20 ns per burst).
  struct WriterLock {
    explicit WriterLock(std::atomic_flag& f) : f_(f) {
      while (f_.test_and_set(std::memory_order_acquire)) cpu_relax();
    }
    ~WriterLock() { f_.clear(std::memory_order_release); }
    std::atomic_flag& f_;
  };
  uint16_t write_locked(std::span<Packet* const> pkts) noexcept {
    WriterLock g(writer_lock_);
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
  std::atomic_flag writer_lock_;  // see write_locked()
  const uint64_t loops_;
  uint64_t loop_stride_ns_ = 0;  // see input_kind()
  const std::string in_path_, out_path_;
  // rx side, one queue or merged (rx queue 0's owner)
  size_t next_ = 0;
  uint64_t done_loops_ = 0;
  std::atomic<InputState> state_{InputState::pending};
  // rx side, rxq > 1 (see the top): written at open, then read-only
  std::vector<uint64_t> hashes_;              // per record: bit 32 = has a hash, low 32 = the hash
  std::vector<std::vector<uint32_t>> lists_;  // per queue: its record numbers, in file order
  bool merged_ = false;                       // merge_rx_queues(): before any rx
  // rx side, rxq > 1: queue q's cursor belongs to rx queue q's owner
  struct alignas(64) RxQueue {
    size_t next = 0;
    uint64_t done_loops = 0;
    bool drained = false;
  };
  std::array<RxQueue, kMaxQueues> queues_{};
  std::atomic<unsigned> queues_left_{0};  // queues not yet drained
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

// The PMD loop and the per-burst pipeline.
//
// Cost per burst: one rx call, parse_burst (see packet/parser.h), one EMC
// probe per packet, SMC/dpcls only for EMC misses, one execute call per
// megaflow in the burst, one tx call per output port; a cycle-counter read
// before the queues are polled and one after each non-empty burst (the
// queues' load, pmd.h).
#include "datapath/pmd.h"

#include <time.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <string>

#include "datapath/datapath.h"
#include "flow/dp_actions.h"
#include "flow/flow_hash.h"
#include "flow/flow_text.h"
#include "keel/hal/cpu.h"

namespace keel::datapath {

namespace {
constexpr unsigned kHousekeepingEvery = 1024;
constexpr unsigned kEmcSweepPerIteration = 256;

// Single-writer counter: load + store, no locked instruction.
inline void bump(std::atomic<uint64_t>& c, uint64_t n) {
  if (n) c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
}  // namespace

Pmd::Pmd(Datapath& dp, unsigned index, int core, uint32_t idle_sleep_us, const PmdConfig& cfg)
    : dp_(dp),
      index_(index),
      core_(core),
      idle_sleep_us_(idle_sleep_us),
      table_(cfg.flow_capacity),
      emc_(std::make_unique<Emc>()),
      smc_(std::make_unique<Smc>()),
      emc_insert_inv_prob_(cfg.emc_insert_inv_prob),
      smc_enable_(cfg.smc_enable),
      held_parsed_(std::make_unique<packet::ParsedPacket[]>(hal::kMaxBurst)),
      exec_(std::make_unique<ExecContext>()),
      parsed_(std::make_unique<packet::ParsedPacket[]>((kMaxRecircDepth + 1) * hal::kMaxBurst)),
      intrvl_ns_(cfg.load_interval_ns) {
  exec_->tx.set_flush(&Pmd::flush_cb, this);
  // Copies for an output come from the output port's backend (execute.h).
  exec_->port_backend = [](void* arg, uint32_t port) noexcept -> hal::Backend* {
    hal::Port* p =
        port < kMaxDpPorts ? static_cast<Pmd*>(arg)->dp_.port_fast(static_cast<uint16_t>(port)) : nullptr;
    return p ? p->backend() : nullptr;
  };
  exec_->port_backend_arg = this;
  exec_->bonds = bonds_.get();
  exec_->vports = dp_.vport_table();
  exec_->drops = &drops_;
  recirc_md_ = std::make_unique<RecircMeta[]>((kMaxRecircDepth + 2) * size_t{kExecRecircCap});
  marks_mask_ = std::bit_ceil(std::max<uint32_t>(cfg.flow_capacity, 64)) - 1;
  marks_ = LazyArray<MarkEntry>(size_t{marks_mask_} + 1);  // zero pages until marks land in them
  samples_ = std::make_unique<HotSample[]>(kHotSamples);
  sample_pp_ = std::make_unique<packet::ParsedPacket>();
  emc_->set_insert_inv_prob(cfg.emc_insert_inv_prob);
  upcall_budget_ = cfg.upcall_budget;
  upcalls_ = std::make_unique<UpcallChannel>(std::max(cfg.upcall_records, kMinUpcallRecords));
  offline_window_ = std::min(kOfflineRecords, upcalls_->capacity());
  // Pending table: a slot per record at least; slots and bitmap are left
  // untouched (new[] of pointers / words does not initialize) except the
  // bitmap, which must read zero: it is small (a bit per slot).
  const uint32_t slots = std::bit_ceil(std::max<uint32_t>(upcalls_->capacity(), 1024));
  pending_mask_ = slots - 1;
  pending_ = LazyArray<Upcall*>(slots);
  pending_bits_ = std::make_unique<uint64_t[]>(slots / 64);
  follower_blocks_ = std::make_unique<FollowerBlock[]>(kUpcallFollowerBlocks);
  for (unsigned i = 0; i < kUpcallFollowerBlocks; ++i)
    follower_blocks_[i].next_free = i + 1 < kUpcallFollowerBlocks ? &follower_blocks_[i + 1] : nullptr;
  free_blocks_ = &follower_blocks_[0];
}

Pmd::~Pmd() {
  stop();
  // The slots own what they point to (bond_table.h).
  for (PmdBondSlot& b : *bonds_) {
    delete b.members.load(std::memory_order_relaxed);
    delete b.counters.load(std::memory_order_relaxed);
  }
}

Status Pmd::start(std::vector<hal::Backend*> backends) {
  backends_ = std::move(backends);
  // The PMD's load window starts afresh; the queues' history stays with
  // the queues (RxqLoad, the Datapath's), their current interval included.
  for (auto& slot : busy_intrvl_) slot.store(0, std::memory_order_relaxed);
  intrvl_idx_.store(0, std::memory_order_relaxed);
  intrvl_cycles_.store(0, std::memory_order_relaxed);
  intrvl_len_ = static_cast<uint64_t>(static_cast<double>(hal::cycles_per_second()) *
                                      (static_cast<double>(intrvl_ns_) / 1e9));
  intrvl_start_ = 0;
  intrvl_busy_mark_ = c_.busy_cycles.load(std::memory_order_relaxed);
  intrvl_kicks_seen_ = intrvl_kicks_.load(std::memory_order_relaxed);
  exec_->backend = backends_.empty() ? nullptr : backends_.front();
  xps_timeout_cycles_ = static_cast<uint64_t>(static_cast<double>(hal::cycles_per_second()) *
                                              (static_cast<double>(kXpsTimeoutNs) / 1e9));
  if (since_ns_.load(std::memory_order_relaxed) == 0)
    since_ns_.store(hal::now_ns(), std::memory_order_relaxed);
  quit_.store(false, std::memory_order_relaxed);
  parked_.store(false, std::memory_order_relaxed);
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
  // Control-plane frames posted after the thread's last look: not sent.
  CtlTx t;
  while (ctl_tx_.pop(t)) drops_.drop(t.pkt, DropReason::kStopped);
  pause_.store(false, std::memory_order_relaxed);
  parked_.store(false, std::memory_order_relaxed);
}

void Pmd::pause() {
  if (!running()) return;
  pause_.store(true, std::memory_order_release);
  // The PMD parks at its next iteration's start: within one iteration.
  while (!parked_.load(std::memory_order_acquire)) {
    timespec ts{0, 20'000};
    nanosleep(&ts, nullptr);
  }
}

void Pmd::resume() {
  if (!running()) return;
  pause_.store(false, std::memory_order_release);
  // Wait until it left the parked state, so that a pause() right after
  // this one can't see the old `parked_`.
  while (parked_.load(std::memory_order_acquire)) {
    timespec ts{0, 20'000};
    nanosleep(&ts, nullptr);
  }
}

void Pmd::park() {
  // Everything received has been processed and sent (receive() and the
  // answers flush their outputs): nothing is held across the pause.
  parked_.store(true, std::memory_order_release);
  while (pause_.load(std::memory_order_acquire) && !quit_.load(std::memory_order_relaxed)) {
    drain_requests();  // a poster waiting on this PMD is answered
    timespec ts{0, 50'000};
    nanosleep(&ts, nullptr);
  }
  parked_.store(false, std::memory_order_release);
}

Status Pmd::request(FlowRequest& req) {
  if (!request_async(req))
    return error(Errc::unavailable, "pmd" + std::to_string(index_) + ": request ring full");
  return wait(req);
}

bool Pmd::request_async(FlowRequest& req) {
  if (!running()) {
    apply(req);
    req.done.store(true, std::memory_order_release);
    return true;
  }
  req.done.store(false, std::memory_order_relaxed);
  return requests_.push(&req);
}

Status Pmd::wait(FlowRequest& req) {
  // The PMD answers within an iteration; bounded so a wedged PMD is an error.
  const uint64_t deadline = hal::now_ns() + 5'000'000'000ull;
  while (!req.done.load(std::memory_order_acquire)) {
    if (hal::now_ns() > deadline) return error(Errc::unavailable, "pmd" + std::to_string(index_) + " did not answer");
    timespec ts{0, 20'000};
    nanosleep(&ts, nullptr);
  }
  // The message is built here, on the requester's thread.
  return flow_result_status(req.result, table_.capacity());
}

void Pmd::apply(FlowRequest& req) {
  req.result = FlowResult::ok;
  switch (req.op) {
    case FlowRequest::Op::bond_set:
    case FlowRequest::Op::bond_del: {
      if (req.bond_id == 0 || req.bond_id > kMaxBondId) {
        req.result = FlowResult::not_found;
        break;
      }
      // Swapped, never freed here: the poster frees what comes back.
      PmdBondSlot& b = (*bonds_)[req.bond_id];
      req.bond_members = b.members.exchange(req.bond_members, std::memory_order_acq_rel);
      if (req.op == FlowRequest::Op::bond_del || req.bond_counters)
        req.bond_counters = b.counters.exchange(req.bond_counters, std::memory_order_acq_rel);
      break;
    }
    case FlowRequest::Op::install:
      req.result = table_.install(req.flow);
      if (req.result == FlowResult::ok) post_offload_event(OffloadEvent::Op::installed, *req.flow);
      break;
    case FlowRequest::Op::remove: {
      Megaflow* f = table_.find(*req.flow);
      req.result = f ? table_.remove(f, emc_->generation()) : FlowResult::not_found;
      if (req.result == FlowResult::ok) {
        req.final_packets = f->packets.load(std::memory_order_relaxed) + f->hw_packets.load(std::memory_order_relaxed);
        req.final_bytes = f->bytes.load(std::memory_order_relaxed) + f->hw_bytes.load(std::memory_order_relaxed);
        forget_mark(*f);  // before the event: the engine may reuse the mark once it sees it
        post_offload_event(OffloadEvent::Op::removed, *f);
      }
      break;
    }
    case FlowRequest::Op::modify: {
      Megaflow* f = table_.find(*req.flow);
      if (!f)
        req.result = FlowResult::not_found;
      else
        set_actions(*f, req.actions);
      break;
    }
    case FlowRequest::Op::modify_slots:
      for (uint32_t i = 0; i < req.n_slot_mods; ++i) {
        FlowRequest::SlotMod& m = req.slot_mods[i];
        Megaflow* f = m.slot < table_.capacity() ? table_.at(m.slot) : nullptr;
        if (!f || !f->alive() || !(f->ufid == m.ufid)) {
          m.result = FlowResult::not_found;
          continue;
        }
        m.result = FlowResult::ok;
        set_actions(*f, m.actions);
      }
      break;
    case FlowRequest::Op::set_mark:
    case FlowRequest::Op::clear_mark:
      apply_mark(req);
      break;
    case FlowRequest::Op::dpcls_info: {
      size_t n = 0;
      for (uint32_t port = 0; port < kMaxDpPorts; ++port) {
        const Dpcls* cls = table_.dpcls(port);
        if (!cls || cls->n_subtables() == 0) continue;
        // Into what is left of the requester's array (a POD copy, no allocation).
        const size_t left = n < req.info_cap ? req.info_cap - n : 0;
        const size_t total = cls->info(left ? std::span(req.info + n, left) : std::span<SubtableInfo>{});
        for (size_t k = 0; k < std::min(left, total); ++k) req.info[n + k].in_port = port;
        n += total;
      }
      req.info_n = n;
      break;
    }
  }
  if (req.result != FlowResult::ok) bump(c_.request_failed, 1);
  if (!running() && (req.op == FlowRequest::Op::install || req.op == FlowRequest::Op::remove ||
                     req.op == FlowRequest::Op::modify || req.op == FlowRequest::Op::modify_slots)) {
    // Nobody will sweep the EMC: forget dead flows now.
    emc_->clear();
    table_.release_swept(~uint64_t{0} - 2);
  }
  req.done.store(true, std::memory_order_release);
}

void Pmd::set_actions(Megaflow& f, const flow::DpActions*& actions) noexcept {
  // release: the control thread reading actions sees a complete list.
  actions = f.actions.exchange(actions, std::memory_order_acq_rel);
  table_.actions_changed(&f);
  if (const uint32_t m = f.mark.load(std::memory_order_relaxed)) {
    const flow::DpActions* a = f.actions.load(std::memory_order_relaxed);
    marks_[m & marks_mask_].light = !a || outputs_only(*a);
  }
  post_offload_event(OffloadEvent::Op::modified, f);
}

void Pmd::apply_mark(FlowRequest& req) noexcept {
  if (req.mark == 0 || req.mark > kMaxFlowMark) {
    req.result = FlowResult::not_found;
    return;
  }
  MarkEntry& e = marks_[req.mark & marks_mask_];
  if (req.op == FlowRequest::Op::clear_mark) {
    if (e.mark == req.mark && e.flow) forget_mark(*e.flow);
    return;
  }
  Megaflow* f = req.slot < table_.capacity() ? table_.at(req.slot) : nullptr;
  if (!f || !f->alive() || !(f->ufid == req.ufid)) {
    req.result = FlowResult::not_found;
    return;
  }
  const uint32_t had = f->mark.load(std::memory_order_relaxed);
  if (had == req.mark) return;  // already
  if (had || e.mark) {          // the flow has another mark, or the entry holds another
    req.result = FlowResult::exists;
    return;
  }
  const flow::DpActions* a = f->actions.load(std::memory_order_relaxed);
  e = {req.mark, !a || outputs_only(*a), f};
  f->mark.store(req.mark, std::memory_order_relaxed);
  ++n_marks_;
}

void Pmd::forget_mark(Megaflow& f) noexcept {
  const uint32_t m = f.mark.load(std::memory_order_relaxed);
  if (!m) return;
  MarkEntry& e = marks_[m & marks_mask_];
  if (e.flow == &f) {
    e = {};
    --n_marks_;
  }
  f.mark.store(0, std::memory_order_relaxed);
}

void Pmd::post_offload_event(OffloadEvent::Op op, const Megaflow& f) noexcept {
  if (!dp_.offload_enabled()) return;
  if (!offload_events_.push({op, static_cast<uint8_t>(index_), f.index, f.ufid})) bump(offload_events_lost_, 1);
}

void Pmd::drain_requests() {
  FlowRequest* req;
  while (requests_.pop(req)) apply(*req);
}

bool Pmd::post_tx(uint16_t port, hal::Packet* pkt) noexcept {
  if (ctl_tx_.push({pkt, port})) return true;
  ctl_tx_full_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void Pmd::drain_ctl_tx() noexcept {
  CtlTx t;
  unsigned sent = 0;
  // At most a ring's worth per iteration: posters can't hold the PMD here.
  for (unsigned i = 0; i < kCtlTxRing && ctl_tx_.pop(t); ++i) {
    hal::Port* out = t.port < kMaxDpPorts ? dp_.port_fast(t.port) : nullptr;
    if (!out) {
      drops_.drop(t.pkt, DropReason::kInvalidPort);
      bump(c_.invalid_port, 1);
      continue;
    }
    send_on(*out, t.port, std::span(&t.pkt, 1));
    ++sent;
  }
  bump(c_.ctl_tx, sent);
}

void Pmd::sync_tnl_counters() noexcept {
  const ExecCounters& e = exec_->counters;
  const uint64_t sum = e.tnl_pushed + e.tnl_push_no_headroom + e.tnl_popped + e.tnl_pop_errors;
  if (sum == tnl_seen_) [[likely]]
    return;
  tnl_seen_ = sum;
  // Single writer: plain relaxed stores of the executor's running totals.
  c_.tnl[0].store(e.tnl_pushed, std::memory_order_relaxed);
  c_.tnl[1].store(e.tnl_push_no_headroom, std::memory_order_relaxed);
  c_.tnl[2].store(e.tnl_popped, std::memory_order_relaxed);
  c_.tnl[3].store(e.tnl_pop_errors, std::memory_order_relaxed);
  for (unsigned r = 0; r < packet::kTnlPopResults; ++r)
    c_.tnl[4 + r].store(e.tnl_pop_reasons[r], std::memory_order_relaxed);
}

PmdCounters Pmd::counters() const {
  auto ld = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  PmdCounters v{ld(c_.iterations),    ld(c_.rx_packets),       ld(c_.recirculations), ld(c_.xconnect_hits),
                ld(c_.simple_hits),   ld(c_.emc_hits),      ld(c_.smc_hits),         ld(c_.megaflow_hits),  ld(c_.subtable_lookups),
                ld(c_.misses),        ld(c_.lost),             ld(c_.recirc_too_deep), ld(c_.malformed),
                ld(c_.runts),         ld(c_.tx_batches),    ld(c_.tx_batch_packets), ld(c_.invalid_port),   ld(c_.exec_dropped),
                ld(c_.busy_cycles),   ld(c_.idle_cycles),      ld(c_.upcalls),        ld(c_.action_upcalls),
                ld(c_.upcall_installs), ld(c_.upcall_followers), ld(c_.install_failed), ld(c_.request_failed),
                ld(c_.ordered_upcalls), ld(c_.backpressure), ld(c_.bond_drops), ld(c_.ctl_tx),
                ld(ctl_tx_full_)};
  const PmdCounters& b = baseline_;
  v.rx_packets -= b.rx_packets, v.recirculations -= b.recirculations, v.xconnect_hits -= b.xconnect_hits;
  v.simple_hits -= b.simple_hits;
  v.emc_hits -= b.emc_hits, v.smc_hits -= b.smc_hits, v.megaflow_hits -= b.megaflow_hits;
  v.subtable_lookups -= b.subtable_lookups, v.misses -= b.misses, v.lost -= b.lost;
  v.recirc_too_deep -= b.recirc_too_deep, v.malformed -= b.malformed, v.runts -= b.runts;
  v.tx_batches -= b.tx_batches;
  v.tx_batch_packets -= b.tx_batch_packets, v.invalid_port -= b.invalid_port;
  v.exec_dropped -= b.exec_dropped, v.busy_cycles -= b.busy_cycles, v.idle_cycles -= b.idle_cycles;
  v.upcalls -= b.upcalls, v.action_upcalls -= b.action_upcalls, v.upcall_installs -= b.upcall_installs;
  v.upcall_followers -= b.upcall_followers;
  v.install_failed -= b.install_failed, v.request_failed -= b.request_failed;
  v.ordered_upcalls -= b.ordered_upcalls, v.backpressure -= b.backpressure;
  v.bond_drops -= b.bond_drops, v.ctl_tx -= b.ctl_tx, v.ctl_tx_full -= b.ctl_tx_full;
  v.tnl_pushed = ld(c_.tnl[0]) - b.tnl_pushed;
  v.tnl_push_no_headroom = ld(c_.tnl[1]) - b.tnl_push_no_headroom;
  v.tnl_popped = ld(c_.tnl[2]) - b.tnl_popped;
  v.tnl_pop_errors = ld(c_.tnl[3]) - b.tnl_pop_errors;
  for (unsigned r = 0; r < packet::kTnlPopResults; ++r) v.tnl_pop_reasons[r] = ld(c_.tnl[4 + r]) - b.tnl_pop_reasons[r];
  v.phwol_hits = ld(phwol_hits_) - b.phwol_hits;
  v.phwol_misses = ld(phwol_misses_) - b.phwol_misses;
  v.offload_events_lost = ld(offload_events_lost_) - b.offload_events_lost;
  v.offload_hot_lost = ld(offload_hot_lost_) - b.offload_hot_lost;
  return v;
}

uint64_t Pmd::rxq_cycles(size_t i, unsigned intervals) const {
  // The queue's own history (it follows the queue from PMD to PMD).
  return i < rxqs_.size() ? rxqs_[i].load->sum(intervals) : 0;
}

Pmd::Load Pmd::load(unsigned intervals) const {
  intervals = std::min(intervals, kPmdIntervalMax);
  Load l;
  const uint32_t closed = intrvl_idx_.load(std::memory_order_acquire);
  l.window_cycles = intrvl_cycles_.load(std::memory_order_relaxed) * intervals;
  for (unsigned k = 1; k <= intervals; ++k)
    l.busy_cycles += busy_intrvl_[(closed + kPmdIntervalMax - k) % kPmdIntervalMax].load(std::memory_order_relaxed);
  l.busy_cycles = std::min(l.busy_cycles, l.window_cycles);
  for (size_t i = 0; i < rxqs_.size(); ++i) l.rxq_cycles.push_back(rxq_cycles(i, intervals));
  return l;
}

void Pmd::end_interval() {
  if (running()) {
    intrvl_kicks_.fetch_add(1, std::memory_order_relaxed);
  } else {
    close_interval(hal::cycles());
  }
}

void Pmd::close_interval(uint64_t now) noexcept {
  const uint32_t idx = intrvl_idx_.load(std::memory_order_relaxed);
  const unsigned slot = idx % kPmdIntervalMax;
  for (const RxQueue& q : rxqs_) q.load->close();
  const uint64_t busy = c_.busy_cycles.load(std::memory_order_relaxed);
  busy_intrvl_[slot].store(busy - intrvl_busy_mark_, std::memory_order_relaxed);
  intrvl_busy_mark_ = busy;
  // The first close has no start mark: the length is known from the second.
  if (intrvl_start_) intrvl_cycles_.store(now - intrvl_start_, std::memory_order_relaxed);
  intrvl_start_ = now;
  intrvl_due_ = now + intrvl_len_;
  intrvl_idx_.store(idx + 1, std::memory_order_release);  // after the slots: see load()
}

void Pmd::clear_counters() {
  baseline_ = {};
  baseline_ = counters();
  baseline_.iterations = 0;
  perf_baseline_ = {};
  perf_baseline_ = perf_counters();
  since_ns_.store(hal::now_ns(), std::memory_order_relaxed);
}

PmdPerfCounters Pmd::perf_counters() const {
  auto ld = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  const PmdPerfCounters& b = perf_baseline_;
  PmdPerfCounters v;
  v.busy_iterations = ld(pc_.busy_iterations) - b.busy_iterations;
  v.sleep_iterations = ld(pc_.sleep_iterations) - b.sleep_iterations;
  v.sleep_cycles = ld(pc_.sleep_cycles) - b.sleep_cycles;
  v.txq_shared_bursts = ld(pc_.txq_shared_bursts) - b.txq_shared_bursts;
  v.txq_lock_waits = ld(pc_.txq_lock_waits) - b.txq_lock_waits;
  v.txq_wait_cycles = ld(pc_.txq_wait_cycles) - b.txq_wait_cycles;
  v.txq_steers = ld(pc_.txq_steers) - b.txq_steers;
  return v;
}

void Pmd::run() {
  hal::name_current_thread("pmd" + std::to_string(index_));
  Status st = core_ >= 0 ? hal::pin_current_thread(static_cast<unsigned>(core_)) : hal::unpin_current_thread();
  size_t inited = 0;
  for (; st.ok() && inited < backends_.size(); ++inited) st = backends_[inited]->thread_init();
  if (!st.ok()) {
    start_status_ = st.prefix("pmd" + std::to_string(index_));
    for (size_t i = 0; i + 1 < inited; ++i) backends_[i]->thread_exit();
    started_.store(-1, std::memory_order_release);
    return;
  }
  last_cpu_.store(hal::current_cpu(), std::memory_order_relaxed);
  started_.store(1, std::memory_order_release);
  emc_->set_insert_inv_prob(emc_insert_inv_prob_.load(std::memory_order_relaxed));

  std::array<hal::Packet*, hal::kMaxBurst> burst;
  uint64_t idle_iters = 0;
  uint64_t last = hal::cycles();
  intrvl_due_ = last + intrvl_len_;
  uint64_t iter = 0;
  while (!quit_.load(std::memory_order_relaxed)) {
    if (pause_.load(std::memory_order_acquire)) {
      // A reload (Datapath: new poll lists, tx queues, a port's queue
      // count): parked between iterations; the pause counts as idle.
      park();
      const uint64_t woke = hal::cycles();
      bump(c_.idle_cycles, woke - last);
      last = woke;
      continue;
    }
    unsigned got = 0;
    const bool poll = !hold_rx_.load(std::memory_order_relaxed);
    // The queues' load (see the top): one cycle-counter read here and one
    // after each burst, so a queue is charged from the end of the previous
    // burst (or this read) to the end of its own.
    uint64_t mark = hal::cycles();
    if (!poll) {
      // Held (the slow path is being stopped): answers and requests only.
    } else if (offline_) {
      const uint64_t t0 = mark;
      got = offline_poll(burst);
      if (got) rxqs_[offline_rxq_].load->curr += hal::cycles() - t0;
    } else {
      if (rxq_paused_ && held_followers_ <= kUpcallHeldFollowers / 2) rxq_paused_ = 0;
      for (size_t i = 0; i < rxqs_.size(); ++i) {
        if (i < 64) {
          if (rxq_paused_ >> i & 1) continue;
          if (rxq_skip_[i]) {
            --rxq_skip_[i];
            continue;
          }
        }
        const RxQueue& rxq = rxqs_[i];
        uint16_t n = rxq.port->rx(rxq.queue, burst);
        if (n) {
          got += n;
          poll_slot_ = i;
          const uint64_t lost0 = c_.lost.load(std::memory_order_relaxed);
          receive(*rxq.port, rxq.queue, std::span(burst.data(), n));
          poll_slot_ = kNoSlot;
          if (i < 64) {
            if ((c_.lost.load(std::memory_order_relaxed) - lost0) * 2 >= n) {
              const unsigned b = rxq_backoff_[i] ? rxq_backoff_[i] * 2u : 1u;
              rxq_backoff_[i] = static_cast<uint8_t>(std::min<unsigned>(b, kStormBackoffMax));
              rxq_skip_[i] = rxq_backoff_[i];
              bump(c_.backpressure, 1);
            } else {
              rxq_backoff_[i] = 0;
            }
          }
          const uint64_t t = hal::cycles();
          rxq.load->curr += t - mark;
          mark = t;
        }
      }
    }
    // A busy iteration ends at its last burst's read (the empty polls after
    // it count in the next iteration: the cycles are all counted once).
    uint64_t now = got && !offline_ ? mark : hal::cycles();
    bump(got ? c_.busy_cycles : c_.idle_cycles, now - last);
    last = now;
    bump(c_.rx_packets, got);
    if (got) bump(pc_.busy_iterations, 1);
    idle_iters = got ? 0 : idle_iters + 1;

    drain_requests();
    handle_answers();
    if (exec_->counters.bond_drops != bond_drops_seen_) [[unlikely]] {
      bump(c_.bond_drops, exec_->counters.bond_drops - bond_drops_seen_);
      bond_drops_seen_ = exec_->counters.bond_drops;
    }
    sync_tnl_counters();
    exec_->flush_forwarded();  // the iteration's forwarded packets (drop_stats.h)
    drain_ctl_tx();
    if (table_.has_dead()) {
      emc_->sweep(kEmcSweepPerIteration);
      table_.release_swept(emc_->generation());
    }
    if (offline_) held_pub_.store(n_held_, std::memory_order_release);  // before iterations: see wait_drained
    c_.iterations.store(++iter, std::memory_order_release);  // see iterations()

    // A PMD with no rx queue (or held) sleeps ~1 ms between looks at its
    // request ring instead of spinning (as Open vSwitch's PMDs with no
    // queue block): idle, and its housekeeping runs every time.
    const bool nothing_to_poll = !poll || (!offline_ && rxqs_.empty());
    if (iter % kHousekeepingEvery == 0 || nothing_to_poll) {
      housekeeping();
    } else if (intrvl_kicks_.load(std::memory_order_relaxed) != intrvl_kicks_seen_) {
      // end_interval(): closed at once (one relaxed load per iteration).
      intrvl_kicks_seen_ = intrvl_kicks_.load(std::memory_order_relaxed);
      close_interval(hal::cycles());
    }
    if (nothing_to_poll && !got && upcalls_->in_flight() == 0) {
      timespec ts{0, 1'000'000};
      nanosleep(&ts, nullptr);
      const uint64_t woke = hal::cycles();
      bump(c_.idle_cycles, woke - last);
      last = woke;
    } else if (idle_sleep_us_ && idle_iters > kHousekeepingEvery) {
      // A host board shares its CPUs: back off while there is nothing to do.
      timespec ts{0, static_cast<long>(idle_sleep_us_) * 1000};
      const uint64_t slept = hal::cycles();
      nanosleep(&ts, nullptr);
      // The sleep is part of this idle iteration (as Open vSwitch counts
      // it): idle, and not carried into the next one, which may be busy.
      const uint64_t woke = hal::cycles();
      bump(c_.idle_cycles, woke - last);
      bump(pc_.sleep_iterations, 1);
      bump(pc_.sleep_cycles, woke - slept);
      last = woke;
    }
  }
  // Answers not executed yet: their packets are dropped (the records go
  // back to the handler as usual).
  Upcall* u;
  while (upcalls_->answered(u)) {
    release_record_packets(u, DropReason::kStopped);
    upcalls_->executed(u);
  }
  pending_clear();
  for (unsigned i = 0; i < n_held_; ++i) drop_up(held_pkts_[held_head_ + i], DropReason::kStopped);
  n_held_ = held_head_ = 0;
  held_pub_.store(0, std::memory_order_release);
  up_ = 0;
  mark_ = submitted_;
  last_up_ = nullptr;
  exec_->release_all();
  exec_->flush_forwarded();
  drain_ctl_tx();  // what was posted before stop() still leaves
  release_txqs();
  for (hal::Backend* b : backends_) b->thread_exit();
}

void Pmd::housekeeping() {
  for (const RxQueue& rxq : rxqs_)
    if (Dpcls* cls = table_.dpcls(rxq.port->id())) cls->resort();
  emc_->set_insert_inv_prob(emc_insert_inv_prob_.load(std::memory_order_relaxed));
  if (core_ < 0) last_cpu_.store(hal::current_cpu(), std::memory_order_relaxed);
  const uint64_t now = hal::cycles();
  const uint32_t kicks = intrvl_kicks_.load(std::memory_order_relaxed);
  if (now >= intrvl_due_ || kicks != intrvl_kicks_seen_) {
    intrvl_kicks_seen_ = kicks;
    close_interval(now);
  }
}

// Packets the executor did not send (pmd-stats' exec_dropped).
static uint64_t exec_drops(const ExecCounters& c) {
  return c.dropped + c.tx_overflow + c.recirc_overflow + c.no_headroom + c.unsupported + c.copy_failed +
         c.bond_drops + c.tnl_push_no_headroom + c.tnl_pop_errors;
}

// The TCP flags of a parsed key, host order (0 unless TCP). Word 69's top
// byte is nw_proto; word 72 carries tcp_flags for TCP only.
static uint16_t tcp_flags_of(const flow::Miniflow& key) {
  if ((key.get(KEEL_FLOW_WORD(ipv6_label)) >> 56) != 6) return 0;
  return flow::text::ntoh16(static_cast<uint16_t>(key.get(KEEL_FLOW_WORD(tcp_flags)) >> 48));
}

unsigned Pmd::drop_runts(std::span<hal::Packet*> pkts) noexcept {
  const unsigned n = static_cast<unsigned>(pkts.size());
  unsigned runts = 0;
  for (unsigned i = 0; i < n; ++i) runts += pkts[i]->len() < sizeof(packet::EthHeader);
  if (!runts) [[likely]]
    return n;
  unsigned kept = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (pkts[i]->len() < sizeof(packet::EthHeader)) {
      drops_.drop(pkts[i], DropReason::kRunt);
    } else {
      pkts[kept++] = pkts[i];
    }
  }
  bump(c_.runts, runts);
  bump(c_.malformed, runts);
  return kept;
}

void Pmd::receive(hal::Port& in, uint16_t q, std::span<hal::Packet*> pkts) {
  // Runts go nowhere, not even through a cross-connect (Open vSwitch drops
  // them before its simple match: coverage datapath_drop_rx_invalid_packet).
  pkts = pkts.first(drop_runts(pkts));
  if (pkts.empty()) return;
  // A cross-connected port skips classification entirely.
  if (uint16_t out_id = dp_.xconnect_fast(in.id())) {
    bump(c_.xconnect_hits, pkts.size());
    drops_.forwarded(in.id(), pkts.size());  // each holds its token: fresh from rx
    send(out_id, pkts);
    return;
  }
  // Offload settings, once per burst (relaxed loads).
  offload_on_ = dp_.offload_enabled();
  if (offload_on_) [[unlikely]] {
    promote_packets_ = dp_.offload_promote_packets();
    promote_window_ns_ = dp_.offload_promote_window_ns();
    cur_rxq_ = q;
  }
  // Partial offload: packets the NIC marked for a flow of this PMD skip
  // parse and classification (one predictable branch while no mark is set).
  if (n_marks_) [[unlikely]] {
    pkts = pkts.first(process_marked(in, pkts));
    if (pkts.empty()) {
      flush_outputs();
      return;
    }
  }
  upcalls_left_ = upcall_budget_;
  // While misses are up, the full path: it knows the keys (see pending_).
  if (misses_up_ == 0 && table_.simple().enabled(in.id())) {
    process_simple(in.id(), pkts);
  } else {
    process(pkts, 0);
  }
  flush_outputs();
}

void Pmd::process_simple(uint32_t port, std::span<hal::Packet* const> pkts) {
  const SimpleMatch& sm = table_.simple();
  const unsigned n = static_cast<unsigned>(pkts.size());
  std::array<SimpleQuick, hal::kMaxBurst> q;
  std::array<Megaflow*, hal::kMaxBurst> flows;
  std::array<ExecPacket, hal::kMaxBurst> ep;
  std::array<uint16_t, hal::kMaxBurst> flags;
  std::array<hal::Packet*, hal::kMaxBurst> rest;
  std::array<uint8_t, hal::kMaxBurst> rest_idx;
  unsigned n_rest = 0;
  for (unsigned i = 0; i < n; ++i) {
    hal::Packet* p = pkts[i];
    if (i + 2 < n) __builtin_prefetch(pkts[i + 2]->data());
    Megaflow* f = quick_key(p->data(), p->len(), &q[i]) ? sm.lookup(port, q[i].key) : nullptr;
    flows[i] = f;
    if (f) {
      ep[i] = {p, &q[i].ofs, nullptr};
      flags[i] = q[i].tcp_flags;
    } else {
      rest[n_rest] = p;
      rest_idx[n_rest++] = static_cast<uint8_t>(i);
    }
  }
  bump(c_.simple_hits, n - n_rest);
  // What the quick look could not decide takes the full path; the results
  // are merged back so that execution sees the burst in its order.
  if (n_rest) {
    packet::ParsedPacket* parsed = &parsed_[0];
    std::array<Megaflow*, hal::kMaxBurst> rf;
    classify(std::span(rest.data(), n_rest), nullptr, parsed, rf.data(), 0);
    for (unsigned r = 0; r < n_rest; ++r) {
      const unsigned i = rest_idx[r];
      flows[i] = rf[r];
      ep[i] = {rest[r], &parsed[r].ofs, &parsed[r].key};
      flags[i] = tcp_flags_of(parsed[r].key);
    }
  }
  execute_grouped(n, flows.data(), ep.data(), flags.data(), 0);
  after_pass(0);
}

void Pmd::classify(std::span<hal::Packet* const> pkts, const packet::PacketMetadata* md,
                   packet::ParsedPacket* parsed, Megaflow** flows, unsigned depth) {
  const unsigned n = static_cast<unsigned>(pkts.size());
  if (md) [[unlikely]]
    bump(c_.malformed, packet::parse_burst(pkts, std::span(md, n), std::span(parsed, n), parser_, dp_.vlan_limit()));
  else
    bump(c_.malformed, packet::parse_burst(pkts, std::span(parsed, n), parser_, dp_.vlan_limit()));
  LookupHits hits;
  lookup(pkts, parsed, flows, depth, hits);

  // 3. Misses: to the slow path (key, hash and offsets go with them).
  uint64_t misses = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (!flows[i]) {
      ++misses;
      upcall_miss(pkts[i], parsed[i], depth);
    }
  }
  bump(c_.emc_hits, std::popcount(hits.emc));
  bump(c_.smc_hits, std::popcount(hits.smc));
  bump(c_.megaflow_hits, std::popcount(hits.megaflow));
  bump(c_.misses, misses);
}

void Pmd::lookup(std::span<hal::Packet* const> pkts, const packet::ParsedPacket* parsed, Megaflow** flows,
                 unsigned depth, LookupHits& hits) {
  const unsigned n = static_cast<unsigned>(pkts.size());
  for (unsigned i = 0; i < n; ++i) flows[i] = nullptr;
  const bool emc_on = emc_->enabled();
  const bool smc_on = smc_enable_.load(std::memory_order_relaxed);

  // 0. Packets whose key has a miss up go the miss path behind it, whatever
  // the caches say (see pending_).
  uint32_t behind = 0;
  if (misses_up_)
    for (unsigned i = 0; i < n; ++i)
      if (pending_for(parsed[i], depth)) behind |= 1u << i;

  // 1. EMC, then SMC (verified against the flow's mask and key). Each stage
  // prefetches what the next one touches for the whole burst first, so the
  // cache misses of 32 packets overlap.
  if (emc_on)
    for (unsigned i = 0; i < n; ++i) emc_->prefetch(parsed[i].hash);
  std::array<uint8_t, hal::kMaxBurst> emc_miss;
  unsigned n_emc_miss = 0;
  for (unsigned i = 0; i < n; ++i) {
    const packet::ParsedPacket& pp = parsed[i];
    if ((behind >> i) & 1) continue;
    if (Megaflow* f = emc_on ? emc_->lookup(pp.key, pp.hash) : nullptr) {
      flows[i] = f;
      hits.emc |= 1u << i;
    } else {
      if (smc_on) smc_->prefetch(pp.hash);
      emc_miss[n_emc_miss++] = static_cast<uint8_t>(i);
    }
  }
  if (smc_on && n_emc_miss) {
    std::array<Megaflow*, hal::kMaxBurst> cand;
    for (unsigned m = 0; m < n_emc_miss; ++m) {
      const uint32_t idx = smc_->lookup(parsed[emc_miss[m]].hash);
      cand[m] = idx != Smc::kNone && idx < table_.capacity() ? table_.at(idx) : nullptr;
      if (cand[m]) {
        __builtin_prefetch(cand[m]);
        __builtin_prefetch(&cand[m]->key);
      }
    }
    for (unsigned m = 0; m < n_emc_miss; ++m) {
      const unsigned i = emc_miss[m];
      const packet::ParsedPacket& pp = parsed[i];
      Megaflow* c = cand[m];
      if (c && c->alive() && flow::equal_masked(pp.key, c->mask(), c->key)) {
        flows[i] = c;
        hits.smc |= 1u << i;
        if (emc_on && emc_->should_insert()) emc_->insert(pp.key, pp.hash, c);
      }
    }
  }
  std::array<const flow::Miniflow*, hal::kMaxBurst> miss_keys;
  std::array<uint8_t, hal::kMaxBurst> miss_idx;
  unsigned n_miss = 0;
  for (unsigned m = 0; m < n_emc_miss; ++m) {
    const unsigned i = emc_miss[m];
    if (flows[i]) continue;
    miss_keys[n_miss] = &parsed[i].key;
    miss_idx[n_miss++] = static_cast<uint8_t>(i);
  }

  // 2. dpcls of the input port (a burst comes from one port; recirculated
  // packets keep their input port).
  if (n_miss) {
    std::array<DpclsRule*, hal::kMaxBurst> rules{};
    uint32_t probed = 0;
    Dpcls* cls = table_.dpcls(pkts[miss_idx[0]]->in_port());
    uint32_t found = cls ? cls->lookup(std::span(miss_keys.data(), n_miss), rules.data(), &probed) : 0;
    bump(c_.subtable_lookups, probed);
    for (unsigned m = 0; m < n_miss; ++m) {
      const unsigned i = miss_idx[m];
      if (!((found >> m) & 1)) continue;
      Megaflow* f = static_cast<Megaflow*>(rules[m]->flow);
      flows[i] = f;
      hits.megaflow |= 1u << i;
      const packet::ParsedPacket& pp = parsed[i];
      if (emc_on && emc_->should_insert()) emc_->insert(pp.key, pp.hash, f);
      if (smc_on) smc_->insert(pp.hash, f->index);
    }
  }
}

Upcall* Pmd::pending_for(const packet::ParsedPacket& pp, unsigned depth) const noexcept {
  const uint32_t slot = pp.hash & pending_mask_;
  if (!((pending_bits_[slot / 64] >> (slot % 64)) & 1)) return nullptr;
  for (Upcall* u = pending_[slot]; u; u = u->pending_next)
    if (u->hash == pp.hash && u->depth == depth && u->key == pp.key) return u;
  return nullptr;
}

void Pmd::pending_remove(Upcall* u) noexcept {
  const uint32_t slot = u->hash & pending_mask_;
  if (!((pending_bits_[slot / 64] >> (slot % 64)) & 1)) return;  // not listed (see below)
  for (Upcall** p = &pending_[slot]; *p; p = &(*p)->pending_next) {
    if (*p == u) {
      *p = u->pending_next;
      u->pending_next = nullptr;
      --misses_up_;
      if (!pending_[slot]) pending_bits_[slot / 64] &= ~(uint64_t{1} << (slot % 64));
      return;
    }
  }
  // Not listed: it went up before this thread last (re)started.
}

void Pmd::pending_clear() noexcept {
  // Only the slots whose bit is set hold a list (the others are garbage).
  for (uint32_t w = 0; w <= pending_mask_ / 64; ++w) {
    for (uint64_t b = pending_bits_[w]; b; b &= b - 1) pending_[w * 64 + std::countr_zero(b)] = nullptr;
    pending_bits_[w] = 0;
  }
  misses_up_ = 0;
}

bool Pmd::stash_frame(Upcall* u, hal::Packet* pkt) noexcept {
  const uint32_t len = pkt->len();
  if (offline_ || len > kUpcallFrameInline) return false;
  std::memcpy(u->frame, pkt->data(), len);
  u->frame_len = static_cast<uint16_t>(len);
  u->frame_in_port = pkt->in_port();
  u->frame_rx_port = pkt->rx_port();
  u->frame_token = pkt->has_fate_token();
  u->frame_rss_valid = pkt->has_rss_hash();
  u->frame_rss = pkt->rss_hash();
  u->frame_mark_valid = pkt->has_flow_mark();
  u->frame_meta = pkt->meta();
  // A fresh buffer comes from the backend the frame came in on (a vport's
  // packets, after tnl_pop: the PMD's first backend).
  hal::Port* in = pkt->in_port() < kMaxDpPorts ? dp_.port_fast(pkt->in_port()) : nullptr;
  u->frame_backend = in ? in->backend() : exec_->backend;
  u->pkt = nullptr;
  hal::release(pkt);  // not a drop: the frame goes on in the record
  return true;
}

hal::Packet* Pmd::unstash_frame(Upcall* u) noexcept {
  hal::Packet* p = nullptr;
  if (!u->frame_backend || u->frame_backend->alloc_burst({&p, 1}, u->frame_len) != 1) return nullptr;
  if (!p->set_len(u->frame_len)) [[unlikely]] {
    hal::release(p);
    return nullptr;
  }
  std::memcpy(p->data(), u->frame, u->frame_len);
  p->set_in_port(u->frame_in_port);
  p->set_rx_port(u->frame_rx_port);
  p->set_fate_token(u->frame_token);
  if (u->frame_rss_valid) p->set_rss_hash(u->frame_rss);
  p->meta() = u->frame_meta;
  if (u->frame_mark_valid) p->set_flow_mark(u->frame_meta.flow_mark);
  return p;
}

void Pmd::record_up(Upcall* u, hal::Packet* pkt) noexcept {
  drops_.up(pkt);
  u->pkt = pkt;
  u->frame_len = 0;
  if (!stash_frame(u, pkt) && !offline_) ++held_bufs_;
}

void Pmd::record_down(Upcall* u) noexcept {
  if (u->pkt) drops_.down(u->pkt);
  else if (u->frame_len && u->frame_token) drops_.down(u->frame_rx_port);
  const unsigned nf = u->type == Upcall::Type::miss ? u->n_followers : 0;
  for (unsigned i = 0; i < nf; ++i) drops_.down(u->followers->pkts[i]);
}

void Pmd::release_record_packets(Upcall* u, DropReason r) noexcept {
  // Back from (or never answered by) the slow path: dropped for r.
  record_down(u);
  if (u->pkt) {
    drops_.drop(u->pkt, r);
    if (!offline_) --held_bufs_;
  } else if (u->frame_len) {
    drops_.instance(r);
    if (u->frame_token) drops_.dropped(u->frame_rx_port, r);
  }
  u->pkt = nullptr;
  u->frame_len = 0;
  release_followers(u, r);
}

void Pmd::release_followers(Upcall* u, DropReason r) noexcept {
  if (FollowerBlock* b = u->followers) {
    for (unsigned i = 0; i < u->n_followers; ++i) drops_.drop(b->pkts[i], r);
    held_followers_ -= u->n_followers;
    b->next_free = free_blocks_;
    free_blocks_ = b;
  }
  u->followers = nullptr;
  u->n_followers = 0;
}

namespace {
// A slow-protocol frame (EtherType 0x8809 — LACP, marker — untagged or
// behind up to two 802.1Q/802.1ad tags): what kUpcallControlReserve is kept
// for. Reads the frame's first bytes only for packets that already missed.
inline bool is_control_frame(const hal::Packet* p) noexcept {
  const uint8_t* d = p->data();
  uint32_t off = 12;
  for (int tags = 0; tags <= 2; ++tags, off += 4) {
    if (p->len() < off + 2) return false;
    const uint16_t type = static_cast<uint16_t>(d[off] << 8 | d[off + 1]);
    if (type == 0x8809) return true;
    if (type != 0x8100 && type != 0x88a8) return false;
  }
  return false;
}
}  // namespace

void Pmd::upcall_miss(hal::Packet* pkt, const packet::ParsedPacket& pp, unsigned depth) {
  Upcall* up = misses_up_ ? pending_for(pp, depth) : nullptr;
  if (up && follow(up, pkt, pp)) return;
  Upcall* u = nullptr;
  const bool control = is_control_frame(pkt);
  // A frame too long to travel in the record keeps its buffer: within the
  // budget of held buffers only (upcall.h).
  const bool fits = pkt->len() <= kUpcallFrameInline || held_bufs_ < kUpcallHeldPackets;
  if (dp_.upcalls_enabled() && fits) {
    if (control) [[unlikely]]
      u = upcalls_->take();  // the reserve and no budget: a bond's LACP must get through a storm
    else if (upcalls_left_)
      u = upcalls_->take_above(kUpcallControlReserve);
  }
  if (!u) {
    drops_.drop(pkt, DropReason::kUpcallLost);
    bump(c_.lost, 1);
    return;
  }
  if (!control) --upcalls_left_;
  submit_miss(u, pkt, pp, depth, false);
}

bool Pmd::follow(Upcall* up, hal::Packet* pkt, const packet::ParsedPacket& pp) noexcept {
  if (up->n_followers >= kUpcallFollowers) return false;
  if (!offline_ && held_followers_ >= kUpcallHeldFollowers) {
    // This one goes up alone: in a record of its own when its frame fits
    // there (no buffer held); a longer one keeps its buffer, so the queue
    // it came from waits (see upcall.h).
    if (pkt->len() > kUpcallFrameInline && poll_slot_ < 64 && !(rxq_paused_ >> poll_slot_ & 1)) {
      rxq_paused_ |= uint64_t{1} << poll_slot_;
      bump(c_.backpressure, 1);
    }
    return false;
  }
  if (!up->followers) {
    if (!free_blocks_) return false;
    up->followers = free_blocks_;
    free_blocks_ = free_blocks_->next_free;
  }
  ++held_followers_;
  up->followers->ofs[up->n_followers] = pp.ofs;
  up->followers->pkts[up->n_followers++] = pkt;
  drops_.up(pkt);
  bump(c_.upcall_followers, 1);
  return true;
}

void Pmd::submit_miss(Upcall* u, hal::Packet* pkt, const packet::ParsedPacket& pp, unsigned depth,
                      bool derived) noexcept {
  u->derived = derived;
  u->type = Upcall::Type::miss;
  u->pmd = static_cast<uint16_t>(index_);
  u->depth = static_cast<uint8_t>(depth);
  u->hash = pp.hash;
  u->ofs = pp.ofs;
  u->key = pp.key;
  u->n_followers = 0;
  u->followers = nullptr;
  record_up(u, pkt);
  const uint32_t slot = pp.hash & pending_mask_;
  uint64_t& bits = pending_bits_[slot / 64];
  const uint64_t bit = uint64_t{1} << (slot % 64);
  u->pending_next = (bits & bit) ? pending_[slot] : nullptr;  // newest first: a full record's successor is found first
  pending_[slot] = u;
  bits |= bit;
  ++misses_up_;
  upcalls_->submit(u, offline_);  // offline: one queue, in order (upcall.h)
  bump(c_.upcalls, 1);
}

void Pmd::handle_answers() {
  Upcall* u;
  unsigned done = 0;
  const uint64_t now = hal::now_ns();
  while (done < kAnswersPerIteration && upcalls_->answered(u)) {
    ++done;
    if (u->type == Upcall::Type::miss) {
      pending_remove(u);
      if (offline_) --up_;
    }
    if (offline_) {
      // What this answer's packets send up now is earlier than what is up.
      in_answer_ = true;
      ++in_exec_;
      mark_ = submitted_;
      last_up_ = nullptr;
    }
    Megaflow* installed = nullptr;
    if (u->install) {
      if (table_.install(u->install) == FlowResult::ok) {
        installed = u->install;
        bump(c_.upcall_installs, 1);
        post_offload_event(OffloadEvent::Op::installed, *installed);
      } else {
        // e.g. another upcall of the same flow won, or the table is full:
        // the handler frees it. A code and a counter, no message.
        u->install_failed = true;
        bump(c_.install_failed, 1);
      }
    }
    const unsigned nf = u->type == Upcall::Type::miss ? u->n_followers : 0;
    if (u->actions && !u->pkt) {
      // The frame travelled in the record: into a fresh buffer (none: the
      // packet and its followers are dropped, kPoolExhausted).
      hal::Packet* p = unstash_frame(u);
      if (p) {
        u->pkt = p;
        u->frame_len = 0;
        if (!offline_) ++held_bufs_;  // given to the executor below
      }
    }
    if (u->actions && u->pkt) {
      // Back from the slow path (drop_stats.h: no longer in flight).
      record_down(u);
      std::array<ExecPacket, 1 + kUpcallFollowers> eps;
      const uint64_t first_bytes = u->pkt->len();
      uint64_t bytes = 0;
      eps[0] = {u->pkt, &u->ofs, &u->key};
      for (unsigned i = 0; i < nf; ++i) {
        eps[1 + i] = {u->followers->pkts[i], &u->followers->ofs[i], &u->key};
        bytes += u->followers->pkts[i]->len();
      }
      // The megaflow the packets count on: the one installed now (its
      // followers only: as in Open vSwitch's userspace datapath, the packet
      // whose upcall installed a flow is not counted on it; the handler
      // credits its rules when it translates it, ofproto/udpif.cpp), or the
      // same megaflow installed by an earlier answer, found again by key
      // (every packet: Open vSwitch's PMD would have found that flow by
      // lookup instead of going up).
      // An install that failed (the flow was there already) was credited
      // by the handler too: its followers only, on the flow that won.
      Megaflow* target = installed;
      unsigned n = nf;
      if (!target && u->install_failed) target = table_.find(*u->install);
      if (!target && u->account_existing) {
        n = 1 + nf;
        bytes += first_bytes;
        if (Dpcls* cls = table_.dpcls(u->pkt->in_port())) {
          const flow::Miniflow* k = &u->key;
          DpclsRule* rule = nullptr;
          uint32_t probed = 0;
          if (cls->lookup(std::span(&k, 1), &rule, &probed) & 1) target = static_cast<Megaflow*>(rule->flow);
        }
      }
      if (target && n) target->account(n, bytes, tcp_flags_of(u->key), now);
      exec_->drop_reason = flow_drop_reason(u->drop_reason);
      // The executor owns the packets now: the record holds no buffer any
      // more; its follower block (whose offsets the packets use) goes back
      // once they are out.
      if (!offline_) --held_bufs_;
      held_followers_ -= nf;
      u->pkt = nullptr;
      u->n_followers = 0;
      execute_actions(*exec_, std::span(eps.data(), 1 + nf), *u->actions);
      after_pass(u->depth);
      if (FollowerBlock* b = u->followers) {
        b->next_free = free_blocks_;
        free_blocks_ = b;
        u->followers = nullptr;
      }
      // Counted on no megaflow (none installed or found): the handler
      // credits their rules when it takes the record back (upcall.h).
      if (!target && n) {
        u->uncounted_packets = static_cast<uint8_t>(n);
        u->uncounted_bytes = static_cast<uint32_t>(bytes);
      }
    } else if (u->actions) {
      // Its frame found no buffer to be executed in.
      release_record_packets(u, DropReason::kPoolExhausted);
    } else if (u->drop_reason) {
      // Answered without being handled (the slow path stopped: kStopped).
      release_record_packets(u, static_cast<DropReason>(u->drop_reason));
    } else if (u->type == Upcall::Type::action) {
      // A userspace() packet the slow path consumed (controller, LACP, ...).
      record_down(u);
      if (u->pkt) {
        if (u->pkt->has_fate_token()) drops_.slow_path(u->pkt->rx_port());
        hal::release(u->pkt);
        if (!offline_) --held_bufs_;
      } else if (u->frame_token) {
        drops_.slow_path(u->frame_rx_port);
      }
      u->pkt = nullptr;
      u->frame_len = 0;
    } else {
      // A miss answered without actions: its translation failed.
      release_record_packets(u, DropReason::kTranslateError);
    }
    if (offline_) {
      in_answer_ = false;
      --in_exec_;
      last_up_ = nullptr;
    }
    upcalls_->executed(u);
  }
  if (done) flush_outputs();
}

void Pmd::process(std::span<hal::Packet* const> pkts, unsigned depth, const packet::PacketMetadata* md) {
  const unsigned n = static_cast<unsigned>(pkts.size());
  packet::ParsedPacket* parsed = &parsed_[depth * hal::kMaxBurst];
  if (offline_) {  // recirculated packets, executed by an earlier packet
    if (md)
      bump(c_.malformed,
           packet::parse_burst(pkts, std::span(md, n), std::span(parsed, n), parser_, dp_.vlan_limit()));
    else
      bump(c_.malformed, packet::parse_burst(pkts, std::span(parsed, n), parser_, dp_.vlan_limit()));
    const unsigned done = process_offline(pkts, parsed, depth);
    for (unsigned i = done; i < n; ++i) drops_.drop(pkts[i], DropReason::kUpcallLost);
    bump(c_.lost, n - done);
    return;
  }
  std::array<Megaflow*, hal::kMaxBurst> flows;
  classify(pkts, md, parsed, flows.data(), depth);
  std::array<ExecPacket, hal::kMaxBurst> ep;
  std::array<uint16_t, hal::kMaxBurst> flags;
  for (unsigned i = 0; i < n; ++i) {
    ep[i] = {pkts[i], &parsed[i].ofs, &parsed[i].key};
    flags[i] = tcp_flags_of(parsed[i].key);
  }
  execute_grouped(n, flows.data(), ep.data(), flags.data(), md ? 1 : depth);
  after_pass(depth);
}

void Pmd::execute_grouped(unsigned n, Megaflow* const* flows, const ExecPacket* ep, const uint16_t* flags,
                          unsigned depth) {
  // Group by megaflow, in first-seen order (so packets of one flow keep
  // their order), and execute each group once.
  const uint64_t now = hal::now_ns();
  const bool sample = offload_on_ && depth == 0;
  const uint64_t exec_dropped_before = exec_drops(exec_->counters);
  std::array<ExecPacket, hal::kMaxBurst> batch;
  uint32_t done = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (!flows[i] || ((done >> i) & 1)) continue;
    Megaflow* f = flows[i];
    unsigned nb = 0;
    uint64_t bytes = 0;
    uint16_t tcp_flags = 0;
    for (unsigned j = i; j < n; ++j) {
      if (flows[j] != f) continue;
      done |= 1u << j;
      batch[nb++] = ep[j];
      bytes += ep[j].pkt->len();
      tcp_flags |= flags[j];
    }
    f->account(nb, bytes, tcp_flags, now);
    // Before execution: the sampler keys the packets as they came in.
    if (sample && f->hw_want.load(std::memory_order_relaxed)) [[unlikely]]
      sample_hot(*f, batch.data(), nb, now);
    const flow::DpActions* acts = f->actions.load(std::memory_order_relaxed);
    exec_->drop_reason = flow_drop_reason(f->drop_reason);
    if (acts) {
      execute_actions(*exec_, std::span(batch.data(), nb), *acts);
    } else {
      for (unsigned b = 0; b < nb; ++b) drops_.drop(batch[b].pkt, exec_->drop_reason);
    }
  }
  bump(c_.exec_dropped, exec_drops(exec_->counters) - exec_dropped_before);
}

void Pmd::after_pass(unsigned depth) {
  // 5. Slow-path requests (userspace()): to the slow path like misses.
  if (exec_->upcalls.n) {
    for (const UpcallRequest& r : exec_->upcalls.requests()) {
      // Live: a control-protocol frame (a bond's LACPDU, slow_path) may take
      // the reserve; other userspace() packets leave it. Offline runs keep
      // their own accounting (kOfflineReserve) and never lose a record here.
      Upcall* u = nullptr;
      const bool fits = offline_ || r.pkt->len() <= kUpcallFrameInline || held_bufs_ < kUpcallHeldPackets;
      if (dp_.upcalls_enabled() && fits) {
        u = offline_ || is_control_frame(r.pkt) ? upcalls_->take() : upcalls_->take_above(kUpcallControlReserve);
      }
      if (!u) {
        drops_.drop(r.pkt, DropReason::kUserspaceLost);
        bump(c_.lost, 1);
        continue;
      }
      u->derived = in_answer_;
      u->type = Upcall::Type::action;
      u->n_followers = 0;
      u->followers = nullptr;
      u->pmd = static_cast<uint16_t>(index_);
      u->depth = static_cast<uint8_t>(depth);
      u->hash = 0;
      // The sink reads the frame; the packet is never executed again.
      record_up(u, r.pkt);
      u->ofs = {};
      if (r.key) u->key = *r.key;
      else u->key = flow::Miniflow{};
      u->pid = r.pid;
      u->userdata_len = static_cast<uint8_t>(std::min<size_t>(r.userdata.size(), kUpcallUserdataMax));
      std::memcpy(u->userdata, r.userdata.data(), u->userdata_len);
      upcalls_->submit(u);
      bump(c_.action_upcalls, 1);
    }
    exec_->upcalls.clear();
  }

  // 6. Recirculation: another pass with the new recirc_id, bounded depth.
  // The queue may mix input ports (tnl_pop gives its packets the vport's)
  // while a pass looks up one port's dpcls: split it into runs of one
  // in_port, each in first-seen order. Packets with a tunnel carry it in a
  // PacketMetadata (slice depth + 1 of recirc_md_).
  if (exec_->recirc.n) {
    RecircQueue& q = exec_->recirc;
    const unsigned nr = q.n;
    const bool tun = q.any_tunnel;
    std::array<hal::Packet*, kExecRecircCap> again;
    for (unsigned i = 0; i < nr; ++i) again[i] = q.pkts[i];
    RecircMeta* rm = &recirc_md_[(depth + 1) * size_t{kExecRecircCap}];
    if (tun) {
      for (unsigned i = 0; i < nr; ++i) {
        packet::PacketMetadata& md = rm[i].md;
        const hal::Packet& p = *again[i];
        md = packet::PacketMetadata::of(p);
        md.tunnel = q.tun[i].tunnel;
        md.tun_opts = nullptr;
        if (md.tunnel.opt_len) {
          std::memcpy(rm[i].opts, q.tun[i].opts, sizeof rm[i].opts);
          md.tun_opts = rm[i].opts;
        }
      }
    }
    q.clear();
    if (depth + 1 > kMaxRecircDepth) {
      for (unsigned i = 0; i < nr; ++i) drops_.drop(again[i], DropReason::kRecircTooDeep);
      bump(c_.recirc_too_deep, nr);
      return;
    }
    bump(c_.recirculations, nr);
    uint64_t done = 0;  // bit i: again[i] handed on
    static_assert(kExecRecircCap <= 64, "one bit per queued packet");
    for (unsigned i = 0; i < nr; ++i) {
      if ((done >> i) & 1) continue;
      const uint16_t in_port = again[i]->in_port();
      std::array<hal::Packet*, hal::kMaxBurst> run;
      std::array<packet::PacketMetadata, hal::kMaxBurst> run_md;
      unsigned cnt = 0;
      for (unsigned j = i; j < nr; ++j) {
        if (((done >> j) & 1) || again[j]->in_port() != in_port) continue;
        done |= uint64_t{1} << j;
        if (again[j]->len() < sizeof(packet::EthHeader)) [[unlikely]] {  // a decapsulated runt, as on rx
          drops_.drop(again[j], DropReason::kRunt);
          bump(c_.runts, 1);
          bump(c_.malformed, 1);
          continue;
        }
        run[cnt] = again[j];
        if (tun) run_md[cnt] = rm[j].md;
        if (++cnt == hal::kMaxBurst) {
          process(std::span(run.data(), cnt), depth + 1, tun ? run_md.data() : nullptr);
          cnt = 0;
        }
      }
      if (cnt) process(std::span(run.data(), cnt), depth + 1, tun ? run_md.data() : nullptr);
    }
  }
}

// --- hardware offload: marks and hot microflows (offload_hooks.h) ---

namespace {
// A field of the key at byte offset `off` of FlowKey (the key's words are
// FlowKey's words in memory order).
template <typename T>
T key_field(const flow::Miniflow& k, size_t off) noexcept {
  uint8_t buf[32];
  const size_t w0 = off / 8, w1 = (off + sizeof(T) - 1) / 8;
  for (size_t w = w0; w <= w1; ++w) {
    const uint64_t v = k.get(static_cast<unsigned>(w));
    std::memcpy(buf + (w - w0) * 8, &v, 8);
  }
  T t;
  std::memcpy(&t, buf + off % 8, sizeof(T));
  return t;
}
#define KEEL_KEY_FIELD(k, field) key_field<decltype(flow::FlowKey::field)>(k, offsetof(flow::FlowKey, field))

// The sampler's hash of a microflow: the words MicroKey is made of (in_port,
// L2, VLAN tags, L3 addresses, frag/tos/ttl/proto, L4 ports; not the IPv6
// label nor the TCP flags, which change within a microflow).
inline uint32_t micro_hash(const flow::Miniflow& k) noexcept {
  constexpr unsigned kWords[] = {
      KEEL_FLOW_WORD(in_port),  KEEL_FLOW_WORD(dl_dst),      KEEL_FLOW_WORD(dl_src) + 1, KEEL_FLOW_WORD(vlans),
      KEEL_FLOW_WORD(nw_src),   KEEL_FLOW_WORD(ipv6_src),    KEEL_FLOW_WORD(ipv6_src) + 1,
      KEEL_FLOW_WORD(ipv6_dst), KEEL_FLOW_WORD(ipv6_dst) + 1, KEEL_FLOW_WORD(tp_src)};
  static_assert(KEEL_FLOW_WORD(dl_type) == KEEL_FLOW_WORD(dl_src) + 1 && KEEL_FLOW_WORD(nw_dst) == KEEL_FLOW_WORD(nw_src),
                "the words listed cover MicroKey's fields");
  uint32_t h = 0;
  for (unsigned w : kWords) h = hash_add64(h, k.get(w));
  // nw_frag, tos, ttl, proto share a word with the IPv6 label: without it.
  constexpr unsigned kLabelWord = KEEL_FLOW_WORD(ipv6_label);
  static_assert(KEEL_FLOW_WORD(nw_proto) == kLabelWord && offsetof(flow::FlowKey, ipv6_label) % 8 == 0,
                "the label is the word's low half");
  h = hash_add64(h, k.get(kLabelWord) & ~uint64_t{0xffffffff});
  return hash_finish(h, 11 * 8);
}
}  // namespace

bool make_micro_key(const flow::Miniflow& k, MicroKey* out) noexcept {
  using flow::text::ntoh16;
  using flow::text::ntoh32;
  // Tunnel metadata (the words the executor checks for a tunnel) or a pass
  // after recirculation: not what the wire carries.
  if (k.get(0) | k.get(1) | k.get(4) | k.get(5)) return false;
  if (KEEL_KEY_FIELD(k, recirc_id) != 0) return false;
  const flow::VlanHdr v1 = key_field<flow::VlanHdr>(k, offsetof(flow::FlowKey, vlans) + sizeof(flow::VlanHdr));
  if (v1.tci & flow::text::hton16(packet::kVlanCfi)) return false;  // a second tag
  MicroKey m;
  m.in_port = KEEL_KEY_FIELD(k, in_port);
  const flow::EthAddr dst = KEEL_KEY_FIELD(k, dl_dst), src = KEEL_KEY_FIELD(k, dl_src);
  std::memcpy(m.eth_dst.data(), dst.b, 6);
  std::memcpy(m.eth_src.data(), src.b, 6);
  const flow::VlanHdr v0 = key_field<flow::VlanHdr>(k, offsetof(flow::FlowKey, vlans));
  const uint16_t tci = ntoh16(v0.tci);
  m.vlan_present = (tci & packet::kVlanCfi) != 0;
  m.vlan_tci = m.vlan_present ? static_cast<uint16_t>(tci & ~packet::kVlanCfi) : 0;
  m.eth_type = ntoh16(KEEL_KEY_FIELD(k, dl_type));
  const bool v4 = m.eth_type == packet::kEthTypeIpv4, v6 = m.eth_type == packet::kEthTypeIpv6;
  if (v4 || v6) {
    m.ip_version = v4 ? 4 : 6;
    m.ip_proto = KEEL_KEY_FIELD(k, nw_proto);
    m.ip_tos = KEEL_KEY_FIELD(k, nw_tos);
    m.ip_ttl = KEEL_KEY_FIELD(k, nw_ttl);
    m.ip_frag = KEEL_KEY_FIELD(k, nw_frag);
    if (v4) {
      m.ipv4_src = ntoh32(KEEL_KEY_FIELD(k, nw_src));
      m.ipv4_dst = ntoh32(KEEL_KEY_FIELD(k, nw_dst));
    } else {
      std::memcpy(m.ipv6_src.data(), KEEL_KEY_FIELD(k, ipv6_src).b, 16);
      std::memcpy(m.ipv6_dst.data(), KEEL_KEY_FIELD(k, ipv6_dst).b, 16);
    }
    const uint16_t tp_src = ntoh16(KEEL_KEY_FIELD(k, tp_src)), tp_dst = ntoh16(KEEL_KEY_FIELD(k, tp_dst));
    if (m.ip_proto == (v4 ? packet::kIpProtoIcmp : packet::kIpProtoIcmpv6)) {
      m.icmp_type = static_cast<uint8_t>(tp_src);
      m.icmp_code = static_cast<uint8_t>(tp_dst);
    } else {
      m.tp_src = tp_src;
      m.tp_dst = tp_dst;
    }
  }
  *out = m;
  return true;
}

unsigned Pmd::process_marked(hal::Port& in, std::span<hal::Packet*> pkts) {
  const unsigned n = static_cast<unsigned>(pkts.size());
  std::array<Megaflow*, hal::kMaxBurst> flows;
  std::array<ExecPacket, hal::kMaxBurst> ep;
  std::array<uint16_t, hal::kMaxBurst> flags;
  std::array<packet::LayerOffsets, hal::kMaxBurst> ofs;
  // Depth 0's parse slice: free until the rest of the burst is classified,
  // which happens after these packets are executed and their passes done.
  packet::ParsedPacket* parsed = &parsed_[0];
  const uint32_t port = in.id();
  const unsigned vlan_limit = dp_.vlan_limit();
  unsigned nm = 0, kept = 0;
  uint64_t misses = 0, malformed = 0;
  for (unsigned i = 0; i < n; ++i) {
    hal::Packet* p = pkts[i];
    if (!p->has_flow_mark()) {
      pkts[kept++] = p;
      continue;
    }
    const uint32_t m = p->meta().flow_mark;
    const MarkEntry& e = marks_[m & marks_mask_];
    Megaflow* f = e.mark == m ? e.flow : nullptr;
    if (!f || !f->alive() || f->in_port != port) [[unlikely]] {
      ++misses;  // stale or foreign: classified as usual
      pkts[kept++] = p;
      continue;
    }
    flows[nm] = f;
    if (e.light) {
      // Outputs and drop only: the executor needs no offsets; the TCP flags
      // for the flow's statistics when a quick look finds them.
      SimpleQuick q;
      if (quick_key(p->data(), p->len(), &q)) {
        ofs[nm] = q.ofs;
        flags[nm] = q.tcp_flags;
      } else {
        ofs[nm] = packet::LayerOffsets{};
        ofs[nm].l2 = 0;
        flags[nm] = 0;
      }
      ep[nm] = {p, &ofs[nm], nullptr};
    } else {
      // Other actions may need any layer, the key (userspace, hash without
      // an RSS hash) or the offsets (set, push/pop, tnl_push): parsed, but
      // not looked up.
      malformed += !packet::parse(*p, parsed[nm], vlan_limit);
      ep[nm] = {p, &parsed[nm].ofs, &parsed[nm].key};
      flags[nm] = tcp_flags_of(parsed[nm].key);
    }
    ++nm;
  }
  bump(phwol_hits_, nm);
  bump(phwol_misses_, misses);
  bump(c_.malformed, malformed);
  if (nm) {
    execute_grouped(nm, flows.data(), ep.data(), flags.data(), 1);  // 1: not sampled (partial offload already)
    after_pass(0);
  }
  return kept;
}

void Pmd::sample_hot(Megaflow& f, const ExecPacket* batch, unsigned n, uint64_t now) noexcept {
  for (unsigned k = 0; k < n; ++k) {
    const flow::Miniflow* key = batch[k].key;
    if (!key) {
      // The simple-match path keys nothing: parse this one for its sample.
      if (!packet::parse(*batch[k].pkt, *sample_pp_, dp_.vlan_limit())) continue;
      key = &sample_pp_->key;
    }
    const uint32_t h = micro_hash(*key);
    HotSample* set = &samples_[(h & (kHotSamples / kHotWays - 1)) * kHotWays];
    HotSample* e = nullptr;
    for (unsigned w = 0; w < kHotWays; ++w) {
      if (set[w].hash == h && set[w].slot == f.index) {
        e = &set[w];
        break;
      }
    }
    if (!e) {
      // A new microflow: the way whose window expired, else the fewest packets.
      e = &set[0];
      for (unsigned w = 0; w < kHotWays; ++w) {
        if (now - set[w].start_ns > promote_window_ns_) {
          e = &set[w];
          break;
        }
        if (set[w].packets < e->packets) e = &set[w];
      }
      *e = {h, f.index, 0, now, 0};
    } else if (now - e->start_ns > promote_window_ns_) {
      // This one's window passed: a new count. A microflow posted within
      // the last window is not posted again.
      *e = {h, f.index, 0, now, e->posted_ns};
    }
    HotSample& s = *e;
    if (++s.packets < promote_packets_) continue;
    // Hot. Posted once; again only if it still reaches this PMD at the rate
    // a window after it was posted (its rule failed, or was demoted).
    if (s.posted_ns && now - s.posted_ns <= promote_window_ns_) continue;
    HotMicroflow hm;
    if (!make_micro_key(*key, &hm.key)) continue;
    hm.pmd = static_cast<uint8_t>(index_);
    hm.rxq = cur_rxq_;
    hm.slot = f.index;
    hm.ufid = f.ufid;
    hm.packets = s.packets;
    s.posted_ns = now ? now : 1;
    if (!offload_hot_.push(hm)) bump(offload_hot_lost_, 1);
  }
}

// --- offline mode (see pmd.h) ---

unsigned Pmd::offline_poll(std::span<hal::Packet*> burst) {
  // 1. Held packets (behind an upcall, or for want of a record) come
  // first; while some remain, the inputs wait.
  if (n_held_) {
    // Held behind an upcall: until nothing is up. For want of a record:
    // until one may be free.
    if (held_for_order_ ? up_ != 0 : upcalls_->in_use() + kOfflineReserve >= offline_window_) return 0;
    resume_held();
    if (n_held_) return 0;
  }
  // Records in use, userspace() ones included: a new burst could need one
  // each (misses, or controller packets of its runs). Wait for the slow path.
  // Records in use, not "in flight": an executed record is free only once
  // the handler recycled it.
  if (upcalls_->in_use() + kOfflineReserve + hal::kMaxBurst >= offline_window_) {
    if (!rx_paused_) bump(c_.backpressure, 1);
    rx_paused_ = true;
    return 0;
  }
  rx_paused_ = false;
  // 2. The queue whose next record is oldest (ties: the first in rxqs_,
  // i.e. port then queue order), and the oldest next record of the others.
  constexpr uint64_t kNone = hal::Port::kNoRecord;
  uint64_t best_ts = kNone, next_ts = kNone;
  size_t best = 0, next = 0;
  for (size_t i = 0; i < rxqs_.size(); ++i) {
    const uint64_t ts = rxqs_[i].port->next_rx_timestamp_ns(rxqs_[i].queue);
    if (ts < best_ts) {
      next_ts = best_ts, next = best;
      best_ts = ts, best = i;
    } else if (ts < next_ts) {
      next_ts = ts, next = i;
    }
  }
  if (best_ts == kNone) return 0;
  offline_rxq_ = best;
  hal::Port& in = *rxqs_[best].port;
  const uint16_t xc = dp_.xconnect_fast(in.id());
  if (xc && up_) return 0;  // cross-connected (no lookup): it waits for what is up to come back
  // Only the records before the other inputs' next one (at it too, when
  // this input comes first in port order).
  unsigned want = hal::kMaxBurst;
  if (next_ts != kNone)
    want = std::max(1u, in.rx_records_before(rxqs_[best].queue, next_ts, best < next, hal::kMaxBurst));
  const uint16_t got = in.rx(rxqs_[best].queue, burst.first(want));
  if (!got) return 0;
  // Runts go nowhere, as in receive().
  const unsigned n = drop_runts(burst.first(got));
  std::span<hal::Packet* const> pkts(burst.data(), n);
  if (xc) {
    bump(c_.xconnect_hits, n);
    drops_.forwarded(in.id(), n);  // each holds its token: fresh from rx
    send(xc, pkts);
    return got;
  }
  mark_ = submitted_ - up_;  // all that is up is earlier
  last_up_ = nullptr;
  // The simple-match path's answers, for packets it can key (see
  // process_simple); they execute from it only while nothing is up.
  std::array<SimpleQuick, hal::kMaxBurst> q;
  std::array<Megaflow*, hal::kMaxBurst> sf{};
  if (up_ == 0 && table_.simple().enabled(in.id())) {
    const SimpleMatch& sm = table_.simple();
    for (unsigned i = 0; i < n; ++i)
      sf[i] = quick_key(pkts[i]->data(), pkts[i]->len(), &q[i]) ? sm.lookup(in.id(), q[i].key) : nullptr;
  }
  unsigned i = 0;
  uint64_t simple_hits = 0;
  while (i < n) {
    if (sf[i] && submitted_ == mark_) {
      std::array<ExecPacket, hal::kMaxBurst> ep;
      unsigned j = i;
      uint16_t tcp_flags = 0;
      for (; j < n && sf[j] == sf[i]; ++j) {
        ep[j - i] = {pkts[j], &q[j].ofs, nullptr};
        tcp_flags |= q[j].tcp_flags;
      }
      execute_run(sf[i], ep.data(), j - i, tcp_flags, 0);
      simple_hits += j - i;
      i = j;
      continue;
    }
    // The full path, up to the next packet the simple path may take.
    unsigned j = i + 1;
    while (j < n && !(sf[j] && submitted_ == mark_)) ++j;
    packet::ParsedPacket* parsed = &parsed_[0];
    bump(c_.malformed,
         packet::parse_burst(pkts.subspan(i, j - i), std::span(parsed, j - i), parser_, dp_.vlan_limit()));
    const unsigned done = process_offline(pkts.subspan(i, j - i), parsed, 0);
    if (i + done < j) {
      // No upcall record: the rest waits, parsed, and so do the inputs.
      n_held_ = 0;
      for (unsigned k = i + done; k < j; ++k) {
        held_parsed_[n_held_] = parsed[k - i];
        held_pkts_[n_held_++] = pkts[k];
      }
      if (j < n) {
        bump(c_.malformed,
             packet::parse_burst(pkts.subspan(j), std::span(held_parsed_.get() + n_held_, n - j), parser_,
                                    dp_.vlan_limit()));
        for (unsigned k = j; k < n; ++k) held_pkts_[n_held_++] = pkts[k];
      }
      held_head_ = 0;
      for (unsigned k = 0; k < n_held_; ++k) drops_.up(held_pkts_[k]);  // in flight while held
      if (!held_for_order_) bump(c_.backpressure, 1);
      break;
    }
    i = j;
  }
  bump(c_.simple_hits, simple_hits);
  flush_outputs();
  return got;
}

void Pmd::resume_held() {
  mark_ = submitted_ - up_;
  last_up_ = nullptr;
  // Out of the held list while they are processed; what stays is held again.
  for (unsigned k = 0; k < n_held_; ++k) drops_.down(held_pkts_[held_head_ + k]);
  const unsigned done =
      process_offline(std::span(held_pkts_.data() + held_head_, n_held_), held_parsed_.get() + held_head_, 0);
  for (unsigned k = done; k < n_held_; ++k) drops_.up(held_pkts_[held_head_ + k]);  // untouched: still ours
  held_head_ += done;
  n_held_ -= done;
  if (n_held_ && !held_for_order_ && done) bump(c_.backpressure, 1);
  if (!n_held_) held_head_ = 0;
  flush_outputs();
}

unsigned Pmd::process_offline(std::span<hal::Packet* const> pkts, packet::ParsedPacket* parsed, unsigned depth) {
  const unsigned n = static_cast<unsigned>(pkts.size());
  std::array<Megaflow*, hal::kMaxBurst> flows;
  LookupHits hits;
  lookup(pkts, parsed, flows.data(), depth, hits);
  uint32_t direct = 0;
  uint64_t misses = 0, ordered = 0;
  unsigned i = 0;
  while (i < n) {
    Megaflow* f = flows[i];
    if (f && submitted_ == mark_) {
      // Nothing earlier is up: the cached answer is the current one.
      unsigned j = i + 1;
      while (j < n && flows[j] == f) ++j;
      for (unsigned k = i; k < j; ++k) direct |= 1u << k;
      execute_run(f, pkts.data() + i, parsed + i, j - i, depth);
      i = j;
      continue;
    }
    // A hit behind an earlier packet's upcall, read from an input: it waits
    // for the answers (they may change what it hits), and so does the rest.
    if (f && in_exec_ == 0) {
      held_for_order_ = true;
      break;
    }
    // A miss, or a hit behind an upcall its own packet's execution sent (it
    // can't wait behind later packets): translated in turn.
    if (!upcall_offline(pkts[i], parsed[i], depth)) {
      held_for_order_ = false;  // no record: backpressure
      break;
    }
    ++(f ? ordered : misses);
    ++i;
  }
  bump(c_.emc_hits, std::popcount(hits.emc & direct));
  bump(c_.smc_hits, std::popcount(hits.smc & direct));
  bump(c_.megaflow_hits, std::popcount(hits.megaflow & direct));
  bump(c_.misses, misses);
  bump(c_.ordered_upcalls, ordered);
  return i;
}

void Pmd::execute_run(Megaflow* f, hal::Packet* const* pkts, packet::ParsedPacket* parsed, unsigned n,
                      unsigned depth) {
  std::array<ExecPacket, hal::kMaxBurst> batch;
  uint16_t tcp_flags = 0;
  for (unsigned k = 0; k < n; ++k) {
    batch[k] = {pkts[k], &parsed[k].ofs, &parsed[k].key};
    tcp_flags |= tcp_flags_of(parsed[k].key);
  }
  execute_run(f, batch.data(), n, tcp_flags, depth);
}

void Pmd::execute_run(Megaflow* f, const ExecPacket* batch, unsigned n, uint16_t tcp_flags, unsigned depth) {
  uint64_t bytes = 0;
  for (unsigned k = 0; k < n; ++k) bytes += batch[k].pkt->len();
  f->account(n, bytes, tcp_flags, hal::now_ns());
  const flow::DpActions* acts = f->actions.load(std::memory_order_relaxed);
  exec_->drop_reason = flow_drop_reason(f->drop_reason);
  if (!acts) {
    for (unsigned k = 0; k < n; ++k) drops_.drop(batch[k].pkt, exec_->drop_reason);
    return;
  }
  // What these packets send up is earlier than what comes after them.
  const uint64_t saved_mark = mark_;
  mark_ = submitted_;
  last_up_ = nullptr;
  ++in_exec_;
  const uint64_t dropped_before = exec_drops(exec_->counters);
  execute_actions(*exec_, std::span(batch, n), *acts);
  bump(c_.exec_dropped, exec_drops(exec_->counters) - dropped_before);
  after_pass(depth);
  --in_exec_;
  last_up_ = nullptr;
  mark_ = saved_mark;
}

bool Pmd::upcall_offline(hal::Packet* pkt, const packet::ParsedPacket& pp, unsigned depth) {
  // Right behind the record sent up last with the same key: ride on it.
  if (last_up_ && misses_up_) {
    Upcall* up = pending_for(pp, depth);
    if (up == last_up_ && follow(up, pkt, pp)) return true;
  }
  if (!dp_.upcalls_enabled()) {  // no slow path (shutting down): nobody would answer
    drops_.drop(pkt, DropReason::kUpcallLost);
    bump(c_.lost, 1);
    return true;
  }
  const bool reading = in_exec_ == 0;  // from an input, not from a packet being executed
  Upcall* u = !reading || upcalls_->in_use() + kOfflineReserve < offline_window_ ? upcalls_->take() : nullptr;
  if (!u) {
    if (reading) return false;  // backpressure
    drops_.drop(pkt, DropReason::kUpcallLost);
    bump(c_.lost, 1);
    return true;
  }
  ++up_;
  ++submitted_;
  last_up_ = u;
  submit_miss(u, pkt, pp, depth, in_answer_);
  return true;
}

void Pmd::flush_cb(void* arg, uint32_t port, std::span<hal::Packet* const> pkts) noexcept {
  static_cast<Pmd*>(arg)->send(port, pkts);
}

void Pmd::flush_outputs() {
  for (const OutputBatch& b : exec_->tx.active()) send(b.port, b.packets());
  exec_->tx.clear();
}

void Pmd::send(uint32_t port_id, std::span<hal::Packet* const> pkts) noexcept {
  hal::Port* out = port_id < kMaxDpPorts ? dp_.port_fast(static_cast<uint16_t>(port_id)) : nullptr;
  if (!out) {
    // Their packets' fates were settled when they were queued (forwarded):
    // counted per instance only.
    hal::release_burst(pkts);
    drops_.instance(DropReason::kInvalidPort, pkts.size());
    bump(c_.invalid_port, pkts.size());
    return;
  }
  bump(c_.tx_batches, 1);
  bump(c_.tx_batch_packets, pkts.size());
  send_on(*out, static_cast<uint16_t>(port_id), pkts);
}

void Pmd::send_on(hal::Port& port, uint16_t id, std::span<hal::Packet* const> pkts) noexcept {
  hal::Port* out = &port;
  const Datapath::TxQueue tq = dp_.txq(index_, id);
  if (!tq.shared) [[likely]] {
    // A queue of its own: no lock. Port::tx takes at most a burst; larger
    // batches go in slices.
    for (size_t off = 0; off < pkts.size(); off += hal::kMaxBurst)
      out->tx(tq.queue, pkts.subspan(off, std::min<size_t>(hal::kMaxBurst, pkts.size() - off)));
    return;
  }
  const uint16_t q = steer_txq(id, out->n_txq(), hal::cycles());
  for (size_t off = 0; off < pkts.size(); off += hal::kMaxBurst) {
    auto slice = pkts.subspan(off, std::min<size_t>(hal::kMaxBurst, pkts.size() - off));
    bump(pc_.txq_shared_bursts, 1);
    if (!dp_.try_lock_txq(id, q)) [[unlikely]] {
      const uint64_t t0 = hal::cycles();
      dp_.lock_txq(id, q);
      bump(pc_.txq_lock_waits, 1);
      bump(pc_.txq_wait_cycles, hal::cycles() - t0);
    }
    out->tx(q, slice);
    dp_.unlock_txq(id, q);
  }
}

uint16_t Pmd::steer_txq(uint16_t port, uint16_t n_txq, uint64_t now) noexcept {
  TxSteer& s = steer_[port];
  if (s.held && s.queue < n_txq && now - s.last_used < xps_timeout_cycles_) [[likely]] {
    s.last_used = now;
    return s.queue;
  }
  if (s.held) dp_.txq_users(port, s.queue).fetch_sub(1, std::memory_order_relaxed);
  // The queue fewest PMDs hold (a relaxed hint: two PMDs choosing at once
  // may pick the same one, as in Open vSwitch; the lock keeps that correct).
  uint16_t best = 0;
  uint32_t fewest = ~0u;
  for (uint16_t q = 0; q < n_txq; ++q) {
    const uint32_t users = dp_.txq_users(port, q).load(std::memory_order_relaxed);
    if (users < fewest) fewest = users, best = q;
  }
  dp_.txq_users(port, best).fetch_add(1, std::memory_order_relaxed);
  s = {now, best, true};
  bump(pc_.txq_steers, 1);
  return best;
}

void Pmd::release_txqs() noexcept {
  for (uint16_t p = 0; p < kMaxDpPorts; ++p) {
    TxSteer& s = steer_[p];
    if (s.held) dp_.txq_users(p, s.queue).fetch_sub(1, std::memory_order_relaxed);
    s = {};
  }
}

}  // namespace keel::datapath

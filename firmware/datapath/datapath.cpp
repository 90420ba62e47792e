// Datapath: port table, PMD threads, rx-queue assignment, datapath flow
// requests, drain detection.
#include "datapath/datapath.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/hash.h"
#include "flow/flow_text.h"
#include "keel/hal/cpu.h"

namespace keel::datapath {

std::string format_ufid(const Ufid& u) {
  char buf[64];
  snprintf(buf, sizeof buf, "ufid:%08x-%04x-%04x-%04x-%04x%08x", static_cast<unsigned>(u.hi >> 32),
           static_cast<unsigned>((u.hi >> 16) & 0xffff), static_cast<unsigned>(u.hi & 0xffff),
           static_cast<unsigned>(u.lo >> 48), static_cast<unsigned>((u.lo >> 32) & 0xffff),
           static_cast<unsigned>(u.lo & 0xffffffff));
  return buf;
}

std::optional<Ufid> parse_ufid(std::string_view s) {
  if (s.substr(0, 5) == "ufid:") s.remove_prefix(5);
  std::string hex;
  for (char c : s) {
    if (c == '-') continue;
    if (!isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    hex += c;
  }
  if (hex.size() != 32) return std::nullopt;
  Ufid u;
  u.hi = std::stoull(hex.substr(0, 16), nullptr, 16);
  u.lo = std::stoull(hex.substr(16), nullptr, 16);
  return u;
}

Datapath::Datapath(DatapathConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.pmd_cores.empty()) cfg_.pmd_cores.push_back(-1);
  for (auto& x : xconnect_) x.store(0, std::memory_order_relaxed);
  txq_locks_ = std::make_unique<std::atomic_flag[]>(kMaxPorts * hal::Port::kMaxQueues);
  txq_users_ = std::make_unique<std::atomic<uint32_t>[]>(kMaxPorts * hal::Port::kMaxQueues);
  for (unsigned i = 0; i < cfg_.pmd_cores.size(); ++i)
    pmds_.push_back(std::make_unique<Pmd>(*this, i, cfg_.pmd_cores[i], cfg_.pmd_idle_sleep_us, cfg_.pmd));
}

Status Datapath::set_pmd_cores(std::vector<int> cores) {
  if (running_) return error(Errc::unavailable, "the PMD cores can't change while forwarding yet");
  if (cores.empty()) return invalid("at least one PMD core");
  // New PMDs take the tunables the others have (every PMD is set alike).
  PmdConfig pcfg = cfg_.pmd;
  pcfg.emc_insert_inv_prob = pmds_[0]->emc_insert_inv_prob();
  pcfg.smc_enable = pmds_[0]->smc_enabled();
  std::vector<std::unique_ptr<Pmd>> next;
  for (int core : cores) {
    std::unique_ptr<Pmd> keep;
    for (auto& p : pmds_)
      if (p && p->core() == core) keep = std::move(p);
    next.push_back(std::move(keep));
  }
  pmds_.clear();
  for (unsigned i = 0; i < next.size(); ++i)
    if (!next[i] || next[i]->index() != i)  // a PMD's index is fixed: rebuild it (its flows go)
      next[i] = std::make_unique<Pmd>(*this, i, cores[i], cfg_.pmd_idle_sleep_us, pcfg);
  pmds_ = std::move(next);
  cfg_.pmd_cores = std::move(cores);
  return {};
}

Datapath::~Datapath() {
  stop();
  stop_ports();
  pmds_.clear();
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

Status Datapath::set_port_mtu(uint16_t id, uint32_t mtu) {
  hal::Port* p = port(id);
  if (!p) return error(Errc::not_found, "no datapath port " + std::to_string(id));
  return p->set_mtu(mtu);
}

std::vector<hal::Port*> Datapath::ports() const {
  std::vector<hal::Port*> v;
  for (uint16_t i = 1; i <= n_ports_; ++i)
    if (ports_[i]) v.push_back(ports_[i].get());
  return v;
}

void Datapath::set_xconnect(uint16_t in, std::optional<uint16_t> out) {
  xconnect_[in].store(out.value_or(0), std::memory_order_release);
}

std::optional<uint16_t> Datapath::xconnect(uint16_t in) const {
  uint16_t v = xconnect_[in].load(std::memory_order_acquire);
  return v ? std::optional<uint16_t>(v) : std::nullopt;
}

void Datapath::drop_pending_upcalls() {
  for (const auto& pmd : pmds_) {
    UpcallChannel& ch = pmd->upcall_channel();
    Upcall* u;
    while (ch.next(u)) {
      hal::release(u->pkt);
      for (unsigned i = 0; u->type == Upcall::Type::miss && i < u->n_followers; ++i) hal::release(u->followers[i]);
      u->n_followers = 0;
      ch.recycle(u);
    }
    while (ch.next_spent(u)) {
      if (u->install_failed) free_megaflow(u->install);
      delete u->actions;
      ch.recycle(u);
    }
  }
}

void Datapath::mask_vlans(flow::Match& m) {
  using flow::text::hton16;
  constexpr uint16_t cfi = hton16(flow::text::kVlanCfi);
  auto is_tpid = [](uint16_t t) {
    return t == hton16(flow::text::kEthTypeVlan) || t == hton16(flow::text::kEthTypeQinQ);
  };
  auto tag = [&](int i) {  // a tag at level i
    return (m.key.vlans[i].tci & m.mask.vlans[i].tci & cfi) != 0 ||
           (m.key.vlans[i].tpid & m.mask.vlans[i].tpid) != 0;
  };
  // The cut-short tag of Open vSwitch's text: a TPID, no CFI, nothing
  // inside (a megaflow's tag always has an exact EtherType inside it).
  for (int i = 0; i < 2; ++i) {
    flow::VlanHdr& k = m.key.vlans[i];
    const flow::VlanHdr& mk = m.mask.vlans[i];
    if (is_tpid(k.tpid & mk.tpid) && !(k.tci & cfi) && m.mask.dl_type == 0 && (i == 1 || !tag(1))) {
      m.key.dl_type = k.tpid;
      m.mask.dl_type = 0xffff;
      k = {};
      break;
    }
    if (!tag(i)) break;
  }
  if (!m.mask.vlans[0].tci) m.mask.vlans[0].tci = hton16(flow::text::kVlanVidMask | flow::text::kVlanCfi);
  for (int i = 0; i < 2; ++i) {
    const bool present = (m.key.vlans[i].tci & cfi) != 0 || (m.key.vlans[i].tpid & m.mask.vlans[i].tpid) != 0;
    m.mask.vlans[i].tpid = 0xffff;
    if (!present) break;
  }
}

Result<Megaflow*> Datapath::build_megaflow(const flow::Match& match, const flow::DpActions* actions,
                                           const Ufid& ufid, const flow::Miniflow* shown_key) const {
  if (match.mask.in_port != 0xffffffffu) return invalid("in_port must be matched exactly");
  if (match.key.in_port == 0 || !port(static_cast<uint16_t>(std::min<uint32_t>(match.key.in_port, kMaxPorts - 1))) ||
      match.key.in_port >= kMaxPorts)
    return error(Errc::not_found, "in_port(" + std::to_string(match.key.in_port) + "): no such port");
  flow::Match m = match;
  m.mask.recirc_id = 0xffffffffu;  // the datapath always matches recirc_id exactly
  m.apply_mask();
  auto f = std::make_unique<Megaflow>();
  if (!flow::compress(m.mask, f->mask)) return invalid("mask matches too many fields");
  if (!flow::compress(m.key, f->mask.map, f->key)) return invalid("key matches too many fields");
  f->in_port = m.key.in_port;
  f->ufid = ufid;
  if (actions) f->actions.store(new flow::DpActions(*actions), std::memory_order_relaxed);
  if (shown_key) f->shown_key = new flow::Miniflow(*shown_key);
  return f.release();
}

namespace {
Ufid ufid_of(const flow::Match& m);
}  // namespace

Ufid Datapath::ufid_for(const flow::Match& match) { return ufid_of(match); }

namespace {
Ufid ufid_of(const flow::Match& m) {
  const uint64_t* k = m.key.words();
  const uint64_t* w = m.mask.words();
  uint32_t a = hash_words64(k, flow::kFlowWords, 0x6b65656c);
  uint32_t b = hash_words64(w, flow::kFlowWords, a);
  uint32_t c = hash_words64(k, flow::kFlowWords, b);
  uint32_t d = hash_words64(w, flow::kFlowWords, c);
  return {uint64_t{a} << 32 | b, uint64_t{c} << 32 | d};
}
}  // namespace

Status Datapath::flow_put(const flow::Match& match, const flow::DpActions& actions, std::optional<Ufid> ufid,
                          bool modify, const flow::FlowKey* key_as_written) {
  std::lock_guard lock(flow_mu_);
  reclaim_locked();
  // Every output port must exist.
  Status bad_port;
  flow::for_each_output_port(actions.bytes(), [&](uint32_t p) {
    if (bad_port.ok() && (p >= kMaxPorts || !port(static_cast<uint16_t>(p))))
      bad_port = error(Errc::not_found, "action output:" + std::to_string(p) + ": no such port");
  });
  if (!bad_port.ok()) return bad_port;

  if (modify) {
    auto tmpl = build_megaflow(match, nullptr, {});
    if (!tmpl) return std::move(tmpl).take_status();
    std::unique_ptr<Megaflow> t(*tmpl);
    Status result;
    for (auto& pmd : pmds_) {
      FlowRequest req;
      req.op = FlowRequest::Op::modify;
      req.flow = t.get();
      req.actions = new flow::DpActions(actions);
      Status st = pmd->request(req);
      delete req.actions;  // the old list (or the new one, if refused)
      if (!st.ok()) result = st;
    }
    return result.ok() ? Status{} : result.prefix("dp-flow mod");
  }

  const Ufid id = ufid.value_or(ufid_of(match));
  // The key as written, if it fits a miniflow (else flow-dump shows the
  // masked key); in_port and recirc_id as the flow has them.
  std::optional<flow::Miniflow> shown;
  if (key_as_written) {
    flow::FlowKey k = *key_as_written;
    k.in_port = match.key.in_port;
    k.recirc_id = match.mask.recirc_id ? match.key.recirc_id : 0;
    if (flow::Miniflow mf; flow::compress(k, mf)) shown = mf;
  }
  for (size_t i = 0; i < pmds_.size(); ++i) {
    auto f = build_megaflow(match, &actions, id, shown ? &*shown : nullptr);
    if (!f) return std::move(f).take_status();
    FlowRequest req;
    req.op = FlowRequest::Op::install;
    req.flow = *f;
    Status st = pmds_[i]->request(req);
    if (!st.ok()) {
      free_megaflow(*f);
      // All or nothing: take back the copies already installed.
      auto tmpl = build_megaflow(match, nullptr, {});
      for (size_t j = 0; j < i && tmpl; ++j) {
        FlowRequest undo;
        undo.op = FlowRequest::Op::remove;
        undo.flow = *tmpl;
        (void)pmds_[j]->request(undo);
      }
      if (tmpl) free_megaflow(*tmpl);
      return st;
    }
  }
  return {};
}

Status Datapath::flow_del(const flow::Match& match) {
  std::lock_guard lock(flow_mu_);
  Status st = flow_del_locked(match);
  if (st.code() != Errc::not_found) return st;
  // Not as written: maybe as Open vSwitch's text means it (flow-dump's line
  // of a megaflow the upcall handler installed, see mask_vlans()).
  flow::Match m = match;
  mask_vlans(m);
  return m == match ? st : flow_del_locked(m);
}

Status Datapath::flow_del_locked(const flow::Match& match) {
  reclaim_locked();
  auto tmpl = build_megaflow(match, nullptr, {});
  if (!tmpl) return std::move(tmpl).take_status();
  std::unique_ptr<Megaflow> t(*tmpl);
  bool any = false;
  for (auto& pmd : pmds_) {
    FlowRequest req;
    req.op = FlowRequest::Op::remove;
    req.flow = t.get();
    any |= pmd->request(req).ok();
  }
  reclaim_locked();
  return any ? Status{} : error(Errc::not_found, "no such flow");
}

Status Datapath::flow_del(const Ufid& ufid) {
  std::lock_guard lock(flow_mu_);
  for (const FlowView& v : flow_dump_locked())
    if (v.ufid == ufid) return flow_del_locked(v.match);
  return error(Errc::not_found, "no flow " + format_ufid(ufid));
}

std::vector<FlowView> Datapath::flow_dump() const {
  std::lock_guard lock(flow_mu_);
  return flow_dump_locked();
}

void Datapath::flow_stats(std::vector<FlowStats>& out) const {
  std::lock_guard lock(flow_mu_);
  out.clear();
  for (const auto& pmd : pmds_) {
    pmd->flows().for_each([&](const Megaflow& m) {
      out.push_back({pmd->index(), m.ufid, m.packets.load(std::memory_order_relaxed),
                     m.bytes.load(std::memory_order_relaxed), m.used_ns.load(std::memory_order_relaxed),
                     m.tcp_flags.load(std::memory_order_relaxed)});
    });
  }
}

size_t Datapath::flow_count() const {
  size_t n = 0;
  for (const auto& pmd : pmds_) n += pmd->flows().size();
  return n;
}

size_t Datapath::flows_del(std::span<const PmdFlowRef> flows) {
  std::lock_guard lock(flow_mu_);
  reclaim_locked();
  size_t removed = 0;
  // Templates and requests in batches that fit a PMD's request ring.
  constexpr size_t kBatch = 128;
  std::vector<std::unique_ptr<Megaflow>> tmpls;
  std::vector<FlowRequest> reqs(kBatch);
  for (size_t off = 0; off < flows.size(); off += kBatch) {
    const size_t n = std::min(kBatch, flows.size() - off);
    tmpls.clear();
    std::vector<std::pair<Pmd*, FlowRequest*>> batch;
    for (size_t i = 0; i < n; ++i) {
      const PmdFlowRef& r = flows[off + i];
      if (r.pmd >= pmds_.size()) continue;
      auto t = build_megaflow(r.match, nullptr, {});
      if (!t) continue;
      tmpls.emplace_back(*t);
      FlowRequest& req = reqs[i];
      req.op = FlowRequest::Op::remove;
      req.flow = tmpls.back().get();
      req.result = {};
      batch.emplace_back(pmds_[r.pmd].get(), &req);
    }
    for (auto& [pmd, req] : batch) removed += pmd->request_async(*req);
    for (auto& [pmd, req] : batch) removed -= !pmd->wait(*req).ok();
  }
  reclaim_locked();
  return removed;
}

Status Datapath::flow_modify(unsigned pmd, const flow::Match& match, const flow::DpActions& actions) {
  std::lock_guard lock(flow_mu_);
  if (pmd >= pmds_.size()) return invalid("no pmd " + std::to_string(pmd));
  auto tmpl = build_megaflow(match, nullptr, {});
  if (!tmpl) return std::move(tmpl).take_status();
  std::unique_ptr<Megaflow> t(*tmpl);
  FlowRequest req;
  req.op = FlowRequest::Op::modify;
  req.flow = t.get();
  req.actions = new flow::DpActions(actions);
  Status st = pmds_[pmd]->request(req);
  delete req.actions;  // the old list (or the new one, if refused)
  return st;
}

std::vector<FlowView> Datapath::flow_dump_locked() const {
  std::vector<FlowView> out;
  for (const auto& pmd : pmds_) {
    pmd->flows().for_each([&](const Megaflow& m) {
      FlowView v;
      v.pmd = pmd->index();
      v.ufid = m.ufid;
      flow::expand(m.mask, v.match.mask);
      flow::expand(m.key, v.match.key);
      if (m.shown_key)
        flow::expand(*m.shown_key, v.shown_key);
      else
        v.shown_key = v.match.key;
      v.pmd_core = pmd->display_core();
      const flow::DpActions* a = m.actions.load(std::memory_order_acquire);
      v.actions = a ? flow::format_dp_actions(*a) : "drop";
      if (a) v.action_bytes.assign(a->bytes().begin(), a->bytes().end());
      v.packets = m.packets.load(std::memory_order_relaxed);
      v.bytes = m.bytes.load(std::memory_order_relaxed);
      v.used_ns = m.used_ns.load(std::memory_order_relaxed);
      v.tcp_flags = m.tcp_flags.load(std::memory_order_relaxed);
      v.mask_u0 = m.mask.map.count_u0();
      v.mask_u1 = m.mask.map.count_u1();
      out.push_back(std::move(v));
    });
  }
  return out;
}

void Datapath::flow_flush() {
  std::lock_guard lock(flow_mu_);
  for (const FlowView& v : flow_dump_locked()) (void)flow_del_locked(v.match);
  reclaim_locked();
}

void Datapath::reclaim() {
  std::lock_guard lock(flow_mu_);
  reclaim_locked();
}

void Datapath::reclaim_locked() {
  for (auto& pmd : pmds_) pmd->flows().reclaim();
}

Status Datapath::start(std::vector<hal::Backend*> backends) {
  if (running_) return {};
  const unsigned n = static_cast<unsigned>(pmds_.size());

  // Offline when allowed and every port with input replays a capture.
  bool any_input = false, all_replay = true;
  for (hal::Port* p : ports()) {
    const hal::Port::InputKind k = p->input_kind();
    any_input |= k != hal::Port::InputKind::none;
    all_replay &= k != hal::Port::InputKind::live;
  }
  const bool offline = offline_allowed_ && any_input && all_replay;
  offline_.store(offline, std::memory_order_relaxed);

  // rx queues round-robin over the PMDs, port by port; offline, as
  // assign_offline_rxqs() says.
  if (offline) {
    assign_offline_rxqs();
  } else {
    unsigned next = 0;
    for (hal::Port* p : ports())
      for (uint16_t q = 0; q < p->n_rxq(); ++q) pmds_[next++ % n]->add_rx_queue(p, q);
  }
  for (auto& pmd : pmds_) pmd->set_offline(offline);

  // tx queue q = pmd % n_txq; shared when the port has fewer queues than PMDs.
  txqs_.assign(n, {});
  for (hal::Port* p : ports())
    for (unsigned i = 0; i < n; ++i) txqs_[i][p->id()] = {static_cast<uint16_t>(i % p->n_txq()), p->n_txq() < n};

  for (auto& pmd : pmds_) {
    Status st = pmd->start(backends);
    if (!st.ok()) {
      for (auto& other : pmds_) other->stop();
      return st;
    }
  }
  running_ = true;
  return {};
}

// Offline rx queues (see the top, "Offline runs"). One reader, PMD 0, for
// every single-queue input and, with one PMD, for every input, a
// multi-queue replay merged into one queue in file order
// (merge_rx_queues): the inputs are read merged by timestamp, so outputs get
// Open vSwitch's order. With several PMDs, a multi-queue replay (the user
// asked for an RSS spread) keeps its queues and queue q goes to PMD q % n:
// a 5-tuple's records are all in one queue, so each flow is read by one PMD
// in file order, and every PMD merges its own queues by timestamp.
void Datapath::assign_offline_rxqs() {
  const size_t n = pmds_.size();
  for (hal::Port* p : ports()) {
    if (n == 1 || p->n_rxq() <= 1) {
      const uint16_t nq = p->merge_rx_queues();
      for (uint16_t q = 0; q < nq; ++q) pmds_[0]->add_rx_queue(p, q);
      continue;
    }
    for (uint16_t q = 0; q < p->n_rxq(); ++q) pmds_[q % n]->add_rx_queue(p, q);
  }
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
  // Test and test-and-set: wait reading (the line stays shared) until the
  // holder lets go, then try again.
  while (f.test_and_set(std::memory_order_acquire)) {
    while (f.test(std::memory_order_relaxed)) hal::cpu_relax();
  }
}

void Datapath::unlock_txq(uint16_t id, uint16_t q) {
  txq_locks_[id * hal::Port::kMaxQueues + q].clear(std::memory_order_release);
}

bool Datapath::wait_drained(uint64_t timeout_ms) {
  const uint64_t deadline = hal::now_ns() + timeout_ms * 1'000'000;
  // Inputs not drained yet, or packets still with the slow path (their
  // answers are executed by the PMDs and may send more).
  auto pending = [this] {
    for (hal::Port* p : ports())
      if (p->input_state() == hal::InputState::pending) return true;
    for (auto& pmd : pmds_) {
      if (upcalls_enabled() && pmd->upcall_channel().in_flight() != 0) return true;
      if (pmd->held() != 0) return true;  // offline: received, waiting for an upcall record
    }
    return false;
  };
  for (;;) {
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
    // Those iterations may have sent packets up: drained only if nothing is.
    if (!pending()) break;
  }
  return true;
}

}  // namespace keel::datapath

#include "control/system.h"

#include <unistd.h>

#include <algorithm>

#include "core/fault.h"
#include "ofproto/slow_path.h"

namespace keel::control {

namespace {

std::vector<std::string> eal_args_for(const boards::Board& b) {
  std::vector<std::string> args;
  const std::string pid = std::to_string(getpid());
  for (std::string_view a : b.eal_args) {
    std::string s(a);
    if (auto at = s.find("%p"); at != std::string::npos) s.replace(at, 2, pid);
    args.push_back(std::move(s));
  }
  return args;
}

}  // namespace

Result<std::unique_ptr<System>> System::boot(const BootOptions& opts) {
  const boards::Board* board = boards::find(opts.board);
  if (!board) {
    std::string known;
    for (const boards::Board* b : boards::all()) known += (known.empty() ? "" : ", ") + std::string(b->name);
    return error(Errc::not_found, "unknown board '" + opts.board + "' (boards: " + known + ")");
  }
  std::unique_ptr<System> sys(new System(*board));
  // Fault points may be armed only on a board that simulates faults
  // (core/fault.h): process-wide, set by the System that boots.
  fault::clear_all();
  fault::permit(board->simulates_faults);
  sys->ssh_settings_ = default_ssh_settings(*board);  // SSH (issue 17)

  // Ports: the board's, or the --port list instead.
  if (opts.ports.empty()) {
    for (const boards::BoardPort& bp : board->ports) {
      auto spec = hal::parse_port_spec(bp.name, bp.spec);
      if (!spec) return std::move(spec).take_status().prefix("board " + std::string(board->name));
      spec->role = bp.role;
      sys->specs_.push_back(std::move(spec.value()));
    }
  } else {
    for (const std::string& arg : opts.ports) {
      auto spec = hal::parse_port_arg(arg);
      if (!spec) return std::move(spec).take_status();
      for (const hal::PortSpec& s : sys->specs_)
        if (s.name == spec->name) return invalid("port " + s.name + " is given twice");
      sys->specs_.push_back(std::move(spec.value()));
    }
  }

  // Backends: sim always (cheap); DPDK when the board or a port needs it.
  bool need_dpdk = board->backend == boards::Backend::dpdk;
  for (const hal::PortSpec& s : sys->specs_) need_dpdk |= s.kind == hal::PortKind::dpdk;
  auto sim = hal::make_sim_backend({.offload_flows = board->offload_flows});  // the sim NIC model's capacity
  if (!sim) return std::move(sim).take_status();
  sys->sim_ = std::move(sim.value());
  if (need_dpdk) {
    auto dpdk = hal::make_dpdk_backend(eal_args_for(*board), sys->specs_);
    if (!dpdk) return std::move(dpdk).take_status();
    sys->dpdk_ = std::move(dpdk.value());
  }

  datapath::DatapathConfig cfg;
  cfg.pmd_cores.assign(board->pmd_cores.begin(), board->pmd_cores.end());
  cfg.pmd_idle_sleep_us = board->pmd_idle_sleep_us;
  cfg.pmd.flow_capacity = board->pmd_flows;
  cfg.pmd.upcall_records = board->pmd_upcall_records;
  sys->dp_ = std::make_unique<datapath::Datapath>(cfg);
  sys->ofproto_ = std::make_unique<ofproto::Ofproto>(*sys->dp_);
  sys->control_ = std::make_unique<Control>(&sys->ofproto_->writer_mutex());
  const auto n_pmds = static_cast<uint16_t>(cfg.pmd_cores.empty() ? 1 : cfg.pmd_cores.size());

  for (const hal::PortSpec& s : sys->specs_) {
    hal::Backend& be = s.kind == hal::PortKind::dpdk ? *sys->dpdk_ : *sys->sim_;
    // One rx queue asked per port for now (sim ring/pcap ports take theirs
    // from the spec's rxq=, spread by RSS); one tx queue per PMD so PMDs
    // never share one.
    auto port = be.open_port(s, 1, n_pmds);
    if (!port) {
      sys->shutdown();
      return std::move(port).take_status();
    }
    auto id = sys->dp_->add_port(std::move(port.value()));
    if (!id) {
      sys->shutdown();
      return std::move(id).take_status();
    }
  }
  // Offload: disabled until `offload enable` (the board's default config
  // says it where the board wants it).
  sys->offload_ = std::make_unique<offload::Offload>(*sys->dp_);
  return sys;
}

System::~System() { shutdown(); }

std::vector<std::string> System::backends() const {
  std::vector<std::string> v;
  if (sim_) v.push_back(sim_->name());
  if (dpdk_) v.push_back(dpdk_->name());
  return v;
}

Status System::start() {
  std::vector<hal::Backend*> bes;
  if (sim_) bes.push_back(sim_.get());
  if (dpdk_) bes.push_back(dpdk_.get());
  // The slow path listens before the first packet arrives.
  udpif_ = ofproto::make_udpif(*ofproto_);
  udpif_->start();
  if (Status st = dp_->start(bes); !st.ok()) {
    udpif_->stop();
    ofproto_->set_revalidate_hook(nullptr);
    udpif_.reset();
    return st;
  }
  ofproto_->start();
  if (Status st = offload_->start(); !st.ok()) return st.prefix("offload");
  return {};
}

void System::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // A stalled handler or revalidator (core/fault.h) wakes now: the threads
  // below are joined.
  fault::clear_all();
  // The offload engine first: its hardware rules go while the PMDs still
  // forward (nothing is lost), and no engine call outlives the ports.
  if (offload_) offload_->stop();
  if (udpif_) udpif_->stop();
  if (ofproto_) ofproto_->stop();
  if (dp_) {
    dp_->stop();
    dp_->drop_pending_upcalls();  // records the handler had not answered
    dp_->stop_ports();
    if (ofproto_) ofproto_->set_revalidate_hook(nullptr);
    udpif_.reset();
    ofproto_.reset();
    offload_.reset();  // its datapath hook goes once nothing calls flow_stats any more
    dp_.reset();  // ports are destroyed before their backends
  }
  if (dpdk_) dpdk_->shutdown();
  if (sim_) sim_->shutdown();
}

Status System::set_pmd_cores(std::vector<int> cores) {
  if (!dp_->running() || !udpif_) return dp_->set_pmd_cores(std::move(cores));
  if (dp_->offline()) return error(Errc::unavailable, "the PMD cores can't change in an offline run");
  if (cores == dp_->pmd_cores()) return {};
  // The offload engine's flows are (PMD, ufid) pairs and its hardware rules
  // serve them: it stops (every rule destroyed, the PMDs still forwarding)
  // and starts again on the new PMDs' flows, re-offloading what gets hot.
  offload_->stop();
  dp_->hold_rx(true);
  // Bounded: a record the handler can't answer in time is dropped by stop().
  (void)dp_->wait_upcalls_idle(2000);
  udpif_->stop();
  std::vector<unsigned> forgotten;
  Status st = dp_->set_pmd_cores(std::move(cores), &forgotten);
  for (unsigned i : forgotten) udpif_->forget_pmd(i);
  udpif_->start();
  dp_->hold_rx(false);
  if (Status ost = offload_->start(); !ost.ok() && st.ok()) return ost.prefix("offload");
  return st;
}

void System::set_emc_insert_inv_prob(uint32_t n) {
  for (const auto& pmd : dp_->pmds()) pmd->set_emc_insert_inv_prob(n);
}

void System::set_smc_enable(bool on) {
  for (const auto& pmd : dp_->pmds()) pmd->set_smc_enable(on);
}

void System::clear_pmd_stats() {
  for (const auto& pmd : dp_->pmds()) pmd->clear_counters();
}

Result<std::vector<datapath::SubtableInfo>> System::dpcls_info(size_t pmd_index) {
  const auto& pmds = dp_->pmds();
  if (pmd_index >= pmds.size()) return error(Errc::not_found, "no pmd" + std::to_string(pmd_index));
  // The PMD copies plain data into this thread's array (it allocates
  // nothing); asked again with the size it answered if that was more.
  std::vector<datapath::SubtableInfo> flat;
  size_t want = 64;
  for (;;) {
    flat.resize(want + 8);
    datapath::FlowRequest req;
    req.op = datapath::FlowRequest::Op::dpcls_info;
    req.info = flat.data();
    req.info_cap = flat.size();
    if (Status st = pmds[pmd_index]->request(req); !st.ok()) return st;
    want = req.info_n;
    if (want <= flat.size()) break;
  }
  flat.resize(want);
  return flat;
}

std::vector<PortView> System::ports() const {
  std::vector<PortView> v;
  for (size_t i = 0; hal::Port* p : dp_->ports()) {
    const hal::PortSpec& s = specs_[i++];
    PortView pv{p->id(), p->name(), p->kind(), hal::to_string(s.role), s.text, p->describe(),
                p->link(), p->counters(), p->n_rxq(), p->n_txq(), std::nullopt};
    if (auto out = dp_->xconnect(p->id())) pv.xconnect = dp_->port(*out)->name();
    pv.mtu = p->mtu();
    v.push_back(std::move(pv));
  }
  return v;
}

std::vector<std::string> System::port_names() const {
  std::vector<std::string> v;
  for (hal::Port* p : dp_->ports()) v.push_back(p->name());
  return v;
}

std::vector<std::string> System::bridge_names() const {
  std::lock_guard lk(ofproto_->writer_mutex());
  std::vector<std::string> v;
  for (const ofproto::Bridge* b : ofproto_->bridges()) v.push_back(b->name());
  return v;
}

Result<uint16_t> System::port_id(const std::string& name) const {
  if (hal::Port* p = dp_->find_port(name)) return p->id();
  std::string known;
  for (const std::string& n : port_names()) known += (known.empty() ? "" : ", ") + n;
  return error(Errc::not_found, "no port '" + name + "' (ports: " + known + ")");
}

Status System::xconnect(const std::string& in, const std::string& out) {
  auto i = port_id(in);
  if (!i) return std::move(i).take_status();
  auto o = port_id(out);
  if (!o) return std::move(o).take_status();
  dp_->set_xconnect(*i, *o);
  return {};
}

Status System::no_xconnect(const std::string& in) {
  auto i = port_id(in);
  if (!i) return std::move(i).take_status();
  dp_->set_xconnect(*i, std::nullopt);
  return {};
}

std::vector<std::pair<std::string, std::string>> System::xconnects() const {
  std::vector<std::pair<std::string, std::string>> v;
  for (hal::Port* p : dp_->ports())
    if (auto out = dp_->xconnect(p->id())) v.emplace_back(p->name(), dp_->port(*out)->name());
  return v;
}

// ---- SSH (issue 17) ----
SshSettings default_ssh_settings(const boards::Board& b) {
  SshSettings s;
  s.listen = std::string(b.ssh_listen);
  s.device = std::string(b.ssh_device);
  s.port = b.ssh_port;
  s.needs_user = b.ssh_needs_user;
  return s;
}
// ---- end SSH ----

}  // namespace keel::control

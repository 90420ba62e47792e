// hal/dpdk port — opening, configuring and driving one ethdev. The design,
// life cycle and thread-safety rules are in dpdk_port.h.
//
// Decisions worth knowing:
//   * Queues: min(asked, what the device offers, Port::kMaxQueues), at least
//     one of each. RSS is configured whenever the device can hash IP/TCP/UDP,
//     with one queue too (OVS does the same), so the datapath gets the NIC's
//     hash instead of computing one; RTE_ETH_RX_OFFLOAD_RSS_HASH is asked for
//     where offered. Descriptors: 1024 each way, clamped by the device.
//   * Rx metadata: USER_MARK/USER_FLAG are negotiated before configure so a
//     NIC delivers rte_flow MARK (it arrives as RTE_MBUF_F_RX_FDIR_ID and
//     becomes Packet::flow_mark()).
//   * Multi-segment mbufs (a PMD chaining a jumbo frame) are linearized into
//     their first segment when it has the room, else copied into one mbuf of
//     the jumbo pool (9280 bytes of data), else dropped and counted as
//     rx_dropped: the datapath only handles contiguous frames. Scatter rx
//     (RTE_ETH_RX_OFFLOAD_SCATTER) is turned on where the device offers it,
//     so a NIC can deliver frames over the 2 KB rx mbufs at all.
//   * Foreign buffers (hal::Packets of the sim backend) are copied into a
//     fresh mbuf at tx; the original is released only once the NIC took the
//     copy, so the prefix the Port contract returns is always right. Frames
//     over 2 KB are copied into jumbo-pool mbufs. A burst stops at a foreign
//     frame that cannot be copied (pool empty); the caller drops the rest.
//   * input_state(): DPDK can't say when net_pcap has read its whole rx file.
//     For `rx_pcap=` without `infinite_rx=1` the port reports `pending` until
//     every rx queue has been polled empty and has received nothing for
//     kInputQuietNs (200 ms, measured with hal::now_ns() at the last
//     non-empty burst), then `drained`. A queue that is never polled keeps the
//     port pending. The heuristic can be fooled only by a gap of 200 ms in a
//     file being read, which happens if the mbuf pool stays empty that long.
//     Every other port is `live`.
//   * Failures name the step and, when the driver logged why, its words.

// rte_devargs_reset() (frees what rte_devargs_parse() allocated) is marked
// experimental in DPDK 22.11; it is exported and stable in practice.
#define ALLOW_EXPERIMENTAL_API 1
#include "dpdk/dpdk_port.h"

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dpdk/mbuf.h"
#include "keel/hal/cpu.h"

namespace keel::hal::dpdk {
namespace {

Errc errc_of(int err) {
  switch (err) {
    case EINVAL:
      return Errc::invalid_argument;
    case ENODEV:
    case ENOENT:
      return Errc::not_found;
    case EEXIST:
    case EBUSY:
      return Errc::already_exists;
    case ENOMEM:
    case ENOSPC:
      return Errc::resource_exhausted;
    case ENOTSUP:
      return Errc::unsupported;
    default:
      return Errc::unavailable;
  }
}

// Collects what the EAL and the drivers log while a port is opened, so a
// failure can say why in the driver's own words (drivers often return a bare
// -1, which rte_strerror renders as "Operation not permitted"). Whatever was
// captured is passed on to the previous log stream unchanged.
//
// The capture stream is one memstream for the life of the process, never
// closed: another thread (an offload thread logging an rte_flow error) may
// have picked it up as the log stream just before it is swapped back, and
// must not write into a closed FILE. Such a line lands in the buffer and is
// either passed on now or dropped at the next capture. stdio's FILE lock
// keeps the buffer consistent while it is read. Control thread only.
class LogCapture {
 public:
  LogCapture() : prev_(rte_log_get_stream()) {
    Sink& s = sink();
    if (s.f == nullptr) return;
    flockfile(s.f);
    (void)fseeko(s.f, 0, SEEK_SET);
    funlockfile(s.f);
    active_ = rte_openlog_stream(s.f) == 0;
  }
  ~LogCapture() { (void)finish(); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // Stops capturing; returns the last line a driver logged, or else the last
  // line the EAL logged, leaving out the EAL's generic failure lines.
  std::string finish() {
    if (!active_) return {};
    active_ = false;
    (void)rte_openlog_stream(prev_);
    Sink& s = sink();
    flockfile(s.f);
    (void)std::fflush(s.f);
    std::string text(s.buf != nullptr ? s.buf : "", s.size);
    (void)fseeko(s.f, 0, SEEK_SET);
    funlockfile(s.f);
    if (!text.empty()) {
      FILE* out = prev_ != nullptr ? prev_ : stderr;
      (void)std::fwrite(text.data(), 1, text.size(), out);
      (void)std::fflush(out);
    }
    std::string last, last_driver;
    for (size_t at = 0; at < text.size();) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(at, end - at);
      at = end + 1;
      if (line.empty() || is_generic(line)) continue;
      if (line.rfind("EAL: ", 0) != 0) last_driver = line;
      last = std::move(line);
    }
    return last_driver.empty() ? last : last_driver;
  }

 private:
  // The EAL's follow-up lines that only repeat that a step failed.
  static bool is_generic(const std::string& line) {
    for (const char* g : {"Failed to attach device on", "Driver cannot attach the device",
                          "Failed to detach device on", "Failed to hotplug"}) {
      if (line.find(g) != std::string::npos) return true;
    }
    return false;
  }

  struct Sink {
    FILE* f = nullptr;
    char* buf = nullptr;
    size_t size = 0;
  };
  static Sink& sink() {
    static Sink s;
    static const bool opened = (s.f = open_memstream(&s.buf, &s.size)) != nullptr;
    (void)opened;
    return s;
  }

  FILE* prev_;
  bool active_ = false;
};

// Detaches a device once no ethdev port uses it any more (an mlx5 PF and its
// representors share one rte_device: closing one representor must not pull
// the others away).
void detach_if_unused(rte_device* dev) {
  if (dev == nullptr || !rte_dev_is_probed(dev)) return;
  uint16_t p;
  RTE_ETH_FOREACH_DEV_OF(p, dev) { return; }
  (void)rte_dev_remove(dev);
}

// The ethdev port for a device string: by device name, or for representors
// (several ports on one device) the first port the devargs select.
bool find_port(const std::string& devargs, const char* dev_name, uint16_t* port_id) {
  bool representor = devargs.find("representor=") != std::string::npos;
  if (!representor && rte_eth_dev_get_port_by_name(dev_name, port_id) == 0) return true;
  rte_dev_iterator it;
  if (rte_eth_iterator_init(&it, devargs.c_str()) != 0) return false;
  uint16_t p = rte_eth_iterator_next(&it);
  if (p >= RTE_MAX_ETHPORTS) return false;  // the iterator cleaned itself up
  rte_eth_iterator_cleanup(&it);
  *port_id = p;
  return true;
}

bool reads_pcap_file_once(const std::string& devargs) {
  return devargs.find("rx_pcap=") != std::string::npos && devargs.find("infinite_rx=1") == std::string::npos;
}

}  // namespace

// rte_eth_dev_configure with RSS when the device hashes, then every queue;
// returns 0 or -errno, with the step that failed in `step`.
int DpdkPort::setup_queues(uint16_t pid, QueueSetup& qs, uint16_t nrx, uint16_t ntx, std::string& step) {
  rte_eth_conf conf;
  std::memset(&conf, 0, sizeof(conf));
  if (qs.rss_hf != 0) {
    // As netdev-dpdk: RSS whenever the device can hash (with one queue too,
    // for the hash), over what it supports of IP/TCP/UDP, with its own
    // default key (rss_key NULL).
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_key = nullptr;
    conf.rx_adv_conf.rss_conf.rss_hf = qs.rss_hf;
  }
  conf.rxmode.offloads = qs.rx_offloads;
  if (int r = rte_eth_dev_configure(pid, nrx, ntx, &conf); r != 0) {
    step = "configure (" + std::to_string(nrx) + " rx, " + std::to_string(ntx) + " tx queues)";
    return r;
  }
  uint16_t nb_rxd = kRxDescriptors, nb_txd = kTxDescriptors;
  if (int r = rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nb_rxd, &nb_txd); r != 0) {
    step = "adjusting descriptor counts";
    return r;
  }
  for (uint16_t q = 0; q < nrx; ++q) {
    if (int r = rte_eth_rx_queue_setup(pid, q, nb_rxd, qs.socket, nullptr, qs.pool); r != 0) {
      step = "rx queue " + std::to_string(q) + " setup";
      return r;
    }
  }
  for (uint16_t q = 0; q < ntx; ++q) {
    if (int r = rte_eth_tx_queue_setup(pid, q, nb_txd, qs.socket, nullptr); r != 0) {
      step = "tx queue " + std::to_string(q) + " setup";
      return r;
    }
  }
  return 0;
}

Status DpdkPort::apply_queue_count(uint16_t n_rx, uint16_t& n_tx) {
  if (stopped_) return error(Errc::unavailable, "port " + name() + ": the port is stopped");
  if (n_rx > qs_.max_rxq) {
    return invalid("port " + name() + ": n_rxq " + std::to_string(n_rx) + ": the device (driver " + driver_ +
                   ") has at most " + std::to_string(qs_.max_rxq) + " rx queues");
  }
  n_tx = std::min(n_tx, qs_.max_txq);  // fewer tx queues: the datapath shares them
  const uint16_t old_rx = n_rxq(), old_tx = n_txq();
  LogCapture log;
  if (flow_) flow_->forget_rules();  // the restart would drop them (dpdk_flow.h)
  (void)rte_eth_dev_stop(port_id_);
  std::string step;
  int r = setup_queues(port_id_, qs_, n_rx, n_tx, step);
  if (r == 0 && (r = rte_eth_dev_start(port_id_)) != 0) step = "start";
  if (r == 0) {
    (void)log.finish();
    return {};
  }
  std::string why = log.finish();
  why = why.empty() ? rte_strerror(-r) : std::string(rte_strerror(-r)) + " (" + why + ")";
  // Back to the queues it had, which worked when it was opened.
  (void)rte_eth_dev_stop(port_id_);
  std::string ignored;
  const bool back =
      setup_queues(port_id_, qs_, old_rx, old_tx, ignored) == 0 && rte_eth_dev_start(port_id_) == 0;
  Status st(errc_of(-r), "port " + name() + ": " + std::to_string(n_rx) + " rx / " + std::to_string(n_tx) +
                             " tx queues: " + step + " failed: " + why);
  return back ? st : st.prefix("(and restoring the old queues failed too: the port is down)");
}

Result<std::unique_ptr<Port>> DpdkPort::open(const std::shared_ptr<DpdkShared>& shared, const PortSpec& spec,
                                             uint16_t n_rxq, uint16_t n_txq) {
  const std::string& devargs = spec.devargs;
  const std::string what = "port " + spec.name + ": dpdk '" + devargs + "'";
  LogCapture log;
  auto fail = [&](const char* step, int err) {
    std::string why = log.finish();
    if (why.empty()) {
      why = rte_strerror(err);
    } else if (err != EPERM) {  // EPERM: a driver's bare -1; its log line says more
      why = std::string(rte_strerror(err)) + " (" + why + ")";
    }
    return Status(errc_of(err), what + ": " + step + " failed: " + why);
  };
  if (devargs.empty()) return invalid("port " + spec.name + ": dpdk: no device arguments given");

  // Which bus and device the string names; rejects malformed strings early.
  rte_devargs da;
  std::memset(&da, 0, sizeof(da));
  if (int rc = rte_devargs_parse(&da, devargs.c_str()); rc != 0) {
    rte_devargs_reset(&da);
    (void)log.finish();
    return Status(Errc::invalid_argument, what + ": no bus or driver recognises device '" +
                                              devargs.substr(0, devargs.find(',')) + "'");
  }
  const std::string dev_name = da.name;
  const std::string bus_name = da.bus != nullptr ? rte_bus_name(da.bus) : "";
  rte_devargs_reset(&da);

  // Hot-plug the device; -EEXIST: the EAL (-a/--vdev) or an earlier open
  // probed it already.
  int rc = rte_dev_probe(devargs.c_str());
  bool probed_here = rc == 0;
  if (rc != 0 && rc != -EEXIST) return fail("probe", -rc);

  uint16_t pid = RTE_MAX_ETHPORTS;
  if (!find_port(devargs, dev_name.c_str(), &pid)) {
    if (probed_here && !bus_name.empty()) {
      (void)rte_eal_hotplug_remove(bus_name.c_str(), dev_name.c_str());
    }
    return Status(Errc::not_found, what + ": no ethdev port matches the device arguments");
  }
  for (DpdkPort* open : shared->ports) {
    if (open->port_id_ == pid) {
      return Status(Errc::already_exists, what + ": ethdev port " + std::to_string(pid) +
                                              " is already open as port " + open->name());
    }
  }

  // From here on a failure closes the ethdev port and detaches the device.
  // (Nothing can fail after rte_eth_dev_start(), so undo never has to stop.)
  rte_device* device = nullptr;
  auto undo = [&] {
    (void)rte_eth_dev_close(pid);
    detach_if_unused(device);
  };
  auto fail_undo = [&](const char* step, int err) {
    undo();
    return fail(step, err);
  };

  rte_eth_dev_info info;
  if (int r = rte_eth_dev_info_get(pid, &info); r != 0) return fail_undo("dev_info", -r);
  device = info.device;
  const std::string driver = info.driver_name ? info.driver_name : "?";

  uint16_t nrx = std::clamp<uint16_t>(
      n_rxq, 1, std::min<uint16_t>(std::max<uint16_t>(info.max_rx_queues, 1), kMaxQueues));
  uint16_t ntx = std::clamp<uint16_t>(
      n_txq, 1, std::min<uint16_t>(std::max<uint16_t>(info.max_tx_queues, 1), kMaxQueues));

  // Ask for rte_flow MARK/FLAG delivery; PMDs without the call don't need it.
  uint64_t meta = RTE_ETH_RX_METADATA_USER_MARK | RTE_ETH_RX_METADATA_USER_FLAG;
  (void)rte_eth_rx_metadata_negotiate(pid, &meta);

  QueueSetup qs;
  qs.rss_hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
  if (qs.rss_hf != 0) qs.rx_offloads |= info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_RSS_HASH;
  // Jumbo frames arrive as chains of 2 KB segments (rx linearizes them).
  qs.rx_offloads |= info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER;
  qs.max_rxq = std::min<uint16_t>(std::max<uint16_t>(info.max_rx_queues, 1), kMaxQueues);
  qs.max_txq = std::min<uint16_t>(std::max<uint16_t>(info.max_tx_queues, 1), kMaxQueues);
  qs.socket = rte_eth_dev_socket_id(pid);
  qs.pool = shared->pool;
  std::string step;
  if (int r = setup_queues(pid, qs, nrx, ntx, step); r != 0) return fail_undo(step.c_str(), -r);
  // The template API can only be configured on a stopped port (mlx5 only;
  // a no-op elsewhere): dpdk_flow.h.
  FlowAsyncSetup async = configure_async_at_open(pid);
  if (int r = rte_eth_dev_start(pid); r != 0) return fail_undo("start", -r);
  (void)rte_eth_promiscuous_enable(pid);  // -ENOTSUP on some vdevs: fine

  std::unique_ptr<DpdkPort> port(
      new DpdkPort(shared, spec, pid, device, driver, reads_pcap_file_once(devargs)));
  port->qs_ = qs;
  port->set_queues(nrx, ntx);
  if (rte_ether_addr a; rte_eth_macaddr_get(pid, &a) == 0) {
    MacAddr m;
    std::memcpy(m.data(), a.addr_bytes, m.size());
    port->set_mac(m);
  }
  const uint64_t now = now_ns();
  for (auto& w : port->watch_) w.last_rx_ns.store(now, std::memory_order_relaxed);
  // hal port id -> ethdev id over this backend's open ports (the offload
  // thread asks; shared->mu is held here by open_port, not by the caller).
  std::weak_ptr<DpdkShared> weak = shared;
  port->flow_ = std::make_unique<DpdkFlowEngine>(
      pid, spec.name, driver,
      [weak](uint32_t hal_id) -> std::optional<uint16_t> {
        std::shared_ptr<DpdkShared> sh = weak.lock();
        if (!sh) return std::nullopt;
        std::lock_guard lock(sh->mu);
        for (DpdkPort* p : sh->ports)
          if (p->id() == hal_id && p->id() != kInvalidPort) return p->port_id();
        return std::nullopt;
      },
      std::move(async));
  shared->ports.push_back(port.get());
  return std::unique_ptr<Port>(std::move(port));
}

DpdkPort::DpdkPort(std::shared_ptr<DpdkShared> shared, const PortSpec& spec, uint16_t port_id,
                   rte_device* device, std::string driver, bool watch_input)
    : Port(spec.name, "dpdk"),
      port_id_(port_id),
      watch_input_(watch_input),
      pool_(shared->pool),
      jumbo_pool_(shared->jumbo_pool),
      shared_(std::move(shared)),
      device_(device),
      devargs_(spec.devargs),
      driver_(std::move(driver)) {
  init_frame_limit();  // netdev-dpdk's rule, not Port's default (netdev-dummy's)
}

DpdkPort::~DpdkPort() {
  stop();
  std::lock_guard lock(shared_->mu);
  auto& v = shared_->ports;
  v.erase(std::remove(v.begin(), v.end(), this), v.end());
}

void DpdkPort::stop() noexcept {
  if (stopped_) return;
  stopped_ = true;
  if (flow_) flow_->detach();         // its rules go before the device closes
  (void)rte_eth_dev_stop(port_id_);   // net_pcap: closes the tx_pcap dumper
  (void)rte_eth_dev_close(port_id_);  // frees the queues' mbufs, releases the port
  detach_if_unused(device_);
}

LinkState DpdkPort::link() const {
  LinkState s;
  if (stopped_) return s;
  rte_eth_link l;
  std::memset(&l, 0, sizeof(l));
  if (rte_eth_link_get_nowait(port_id_, &l) != 0) return s;
  s.up = l.link_status == RTE_ETH_LINK_UP;
  s.speed_mbps = l.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : l.link_speed;
  s.full_duplex = l.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
  return s;
}

InputState DpdkPort::input_state() const {
  if (!watch_input_) return InputState::live;
  if (stopped_) return InputState::drained;
  const uint64_t now = now_ns();
  for (uint16_t q = 0; q < n_rxq(); ++q) {
    const InputWatch& w = watch_[q];
    if (!w.empty_since_rx.load(std::memory_order_relaxed)) return InputState::pending;
    if (now < w.last_rx_ns.load(std::memory_order_relaxed) + kInputQuietNs) return InputState::pending;
  }
  return InputState::drained;
}

std::string DpdkPort::describe() const {
  // The queues, and whether the NIC spreads them by RSS (the device hashes
  // IP/TCP/UDP: rss_hf is what it supports of those).
  return "dpdk " + devargs_ + " (driver " + driver_ + ", port " + std::to_string(port_id_) +
         ", rxq=" + std::to_string(n_rxq()) + " txq=" + std::to_string(n_txq()) +
         (qs_.rss_hf != 0 ? ", rss" : ", no rss") + ")";
}

uint16_t DpdkPort::rx_burst(uint16_t q, std::span<Packet*> out) noexcept {
  rte_mbuf* mbufs[kMaxBurst];
  const auto want = static_cast<uint16_t>(std::min<size_t>(out.size(), kMaxBurst));
  const uint16_t n = rte_eth_rx_burst(port_id_, q, mbufs, want);
  uint16_t kept = 0;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = mbufs[i];
    if (m->nb_segs != 1) [[unlikely]] {
      if (!(m = linearize(m))) continue;
    }
    out[kept++] = from_rx(m);
  }
  if (kept != n) [[unlikely]]
    count_rx_dropped(q, n - kept);
  if (watch_input_) {
    InputWatch& w = watch_[q];
    if (n != 0) {
      // Single writer (this queue's PMD); see input_state() for the reader.
      w.last_rx_ns.store(now_ns(), std::memory_order_relaxed);
      w.empty_since_rx.store(false, std::memory_order_relaxed);
    } else {
      w.empty_since_rx.store(true, std::memory_order_relaxed);
    }
  }
  return kept;
}

rte_mbuf* DpdkPort::linearize(rte_mbuf* m) noexcept {
  if (rte_pktmbuf_linearize(m) == 0) return m;  // the first segment had the room
  rte_mbuf* j = m->pkt_len <= kJumboBufferSize ? rte_pktmbuf_alloc(jumbo_pool_) : nullptr;
  if (j == nullptr) [[unlikely]] {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  auto* dst = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(j, static_cast<uint16_t>(m->pkt_len)));
  for (const rte_mbuf* seg = m; seg != nullptr; seg = seg->next) {
    std::memcpy(dst, rte_pktmbuf_mtod(seg, const uint8_t*), seg->data_len);
    dst += seg->data_len;
  }
  // What from_rx() reads besides the bytes: the NIC's hash and mark.
  j->ol_flags = m->ol_flags & (RTE_MBUF_F_RX_RSS_HASH | RTE_MBUF_F_RX_FDIR_ID | RTE_MBUF_F_RX_FDIR);
  j->hash = m->hash;
  j->port = m->port;
  rte_pktmbuf_free(m);
  return j;
}

Status DpdkPort::apply_mtu(uint32_t mtu) {
  const int rc = rte_eth_dev_set_mtu(port_id_, static_cast<uint16_t>(mtu));
  if (rc == 0 || rc == -ENOTSUP) return {};  // -ENOTSUP: a vdev without an MTU; tx's limit still holds
  return Status(errc_of(-rc), std::string("rte_eth_dev_set_mtu failed: ") + rte_strerror(-rc));
}

Status DpdkPort::apply_link(bool up) {
  if (stopped_) return error(Errc::unavailable, "the port is stopped");
  const int rc = up ? rte_eth_dev_set_link_up(port_id_) : rte_eth_dev_set_link_down(port_id_);
  if (rc == 0) return {};
  if (rc == -ENOTSUP)
    return error(Errc::unsupported, "driver " + driver_ + " cannot set its link " + (up ? "up" : "down"));
  return Status(errc_of(-rc), std::string(up ? "rte_eth_dev_set_link_up" : "rte_eth_dev_set_link_down") +
                                  " failed: " + rte_strerror(-rc));
}

uint16_t DpdkPort::tx_burst(uint16_t q, std::span<Packet* const> pkts) noexcept {
  size_t done = 0;
  while (done < pkts.size()) {
    const size_t chunk = std::min<size_t>(pkts.size() - done, kMaxBurst);
    const uint16_t sent = tx_chunk(q, pkts.subspan(done, chunk));
    done += sent;
    if (sent < chunk) break;
  }
  return static_cast<uint16_t>(done);
}

// Up to kMaxBurst packets: descriptors -> mbufs, then one rte_eth_tx_burst.
uint16_t DpdkPort::tx_chunk(uint16_t q, std::span<Packet* const> pkts) noexcept {
  rte_mbuf* mbufs[kMaxBurst];
  uint32_t copies = 0;  // bit i: mbufs[i] is our copy of foreign packet pkts[i]
  const auto count = static_cast<uint16_t>(pkts.size());  // <= kMaxBurst
  uint16_t n = 0;
  for (; n < count; ++n) {
    Packet* p = pkts[n];
    if (p->source() == BufferSource::dpdk) [[likely]] {
      mbufs[n] = to_tx(p);
      continue;
    }
    rte_mbuf* m = rte_pktmbuf_alloc(p->len() <= kBufferSize ? pool_ : jumbo_pool_);
    if (m == nullptr) [[unlikely]] {
      break;
    }
    if (p->len() > rte_pktmbuf_tailroom(m)) [[unlikely]] {
      rte_pktmbuf_free(m);
      break;
    }
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(p->len())), p->data(), p->len());
    mbufs[n] = m;
    copies |= 1u << n;
  }
  const uint16_t sent = n != 0 ? rte_eth_tx_burst(port_id_, q, mbufs, n) : 0;
  // Copies the NIC took: the originals are done with. Copies it refused: ours
  // to free; their originals go back to the caller with the unsent suffix.
  for (uint32_t bits = copies; bits != 0; bits &= bits - 1) {
    const unsigned i = static_cast<unsigned>(__builtin_ctz(bits));
    if (i < sent) {
      hal::release(pkts[i]);  // the facade: sim::release for a sim buffer
    } else {
      rte_pktmbuf_free(mbufs[i]);
    }
  }
  return sent;
}

}  // namespace keel::hal::dpdk

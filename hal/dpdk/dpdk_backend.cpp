// hal/dpdk backend — EAL start-up, the mbuf pool, per-thread registration and
// shutdown. The design and thread-safety rules are in dpdk_backend.h.
//
// EAL: rte_eal_init() runs with argv = {"keel", [default log level], args...}.
// Unless the caller passes its own --log-level, "--log-level=*:error" keeps
// boot quiet (the EAL's and drivers' informational lines are dropped; errors
// still print). The EAL can be initialised once per process and not again
// after rte_eal_cleanup(), so make_dpdk_backend() succeeds at most once: a
// second call fails with Errc::already_exists while the first backend lives
// and Errc::unavailable after it shut down (it does not hand out the live
// backend a second time: one owner decides when the EAL is cleaned up). A
// failed rte_eal_init() is not retried either: DPDK 22.11 keeps half of the
// first attempt's state (a second `-l` is refused as "already set"), so the
// first error is the one that explains. The argv strings are kept for the
// life of the process, as the EAL may keep pointers into them.
//
// Pools: one rte_pktmbuf pool of pool_mbufs_for(ports) mbufs with a kPoolCache per-lcore
// cache, RTE_MBUF_DEFAULT_BUF_SIZE buffers (128 headroom + 2048 data) and a
// hal::Packet in every mbuf's private area, constructed once when the pool is
// made; and the jumbo pool, kJumboMbufs mbufs of 128 headroom +
// kJumboBufferSize data, made the same way (dpdk_backend.h says why).
// Threads that use them should call thread_init() (rte_thread_register): an
// unregistered thread has no lcore id, so no mempool cache, and every get
// and put goes to the shared ring — correct but slower.
#include "dpdk/dpdk_backend.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>
#include <new>

#include "dpdk/dpdk_port.h"
#include "dpdk/mbuf.h"

namespace keel::hal {

bool have_dpdk() { return true; }

namespace dpdk {
namespace {

enum class EalState { down, up, failed, cleaned_up };
std::mutex g_eal_mu;
EalState g_eal_state = EalState::down;  // guarded by g_eal_mu

thread_local bool t_registered = false;  // this thread got its lcore from thread_init()

// Placement-constructs the hal::Packet in one mbuf's private area; counts
// mbufs whose private area is not cache-line aligned (none expected: the
// mempool aligns objects to a cache line and rte_mbuf is 128 bytes).
void construct_descriptor(rte_mempool*, void* misaligned, void* obj, unsigned) {
  void* priv = rte_mbuf_to_priv(static_cast<rte_mbuf*>(obj));
  if (reinterpret_cast<uintptr_t>(priv) % alignof(Packet) != 0) ++*static_cast<unsigned*>(misaligned);
  new (priv) Packet();
}

std::string join(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

// Records in a pcap file, or 0 if it can't be read as one (the port's open
// will say why). Reads the record headers only.
uint64_t pcap_records(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) return 0;
  uint8_t gh[24];
  uint64_t n = 0;
  if (fread(gh, 1, sizeof gh, f) == sizeof gh) {
    uint32_t magic;
    std::memcpy(&magic, gh, 4);
    const bool native = magic == 0xa1b2c3d4 || magic == 0xa1b23c4d;
    const bool swapped = magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1;
    uint8_t rh[16];
    while ((native || swapped) && fread(rh, 1, sizeof rh, f) == sizeof rh) {
      uint32_t incl;
      std::memcpy(&incl, rh + 8, 4);
      if (swapped) incl = __builtin_bswap32(incl);
      if (fseek(f, static_cast<long>(incl), SEEK_CUR) != 0) break;
      ++n;
    }
  }
  fclose(f);
  return n;
}

// Every value of `key=` in a devargs string ("net_pcap0,rx_pcap=x,rx_pcap=y,infinite_rx=1").
std::vector<std::string> devargs_of(const std::string& devargs, std::string_view key) {
  std::vector<std::string> v;
  size_t pos = 0;
  while ((pos = devargs.find(',', pos)) != std::string::npos) {
    ++pos;
    if (devargs.compare(pos, key.size(), key) == 0 && devargs[pos + key.size()] == '=') {
      size_t start = pos + key.size() + 1;
      v.push_back(devargs.substr(start, devargs.find(',', start) - start));
    }
  }
  return v;
}

// The first value of `key=`, or "".
std::string devarg(const std::string& devargs, std::string_view key) {
  std::vector<std::string> v = devargs_of(devargs, key);
  return v.empty() ? std::string() : v.front();
}

}  // namespace

unsigned pool_mbufs_for(const std::vector<PortSpec>& ports) {
  uint64_t n = kPoolMbufs;
  for (const PortSpec& p : ports) {
    if (p.kind != PortKind::dpdk) continue;
    // Rx queues beyond the first pin their descriptors' worth each (the
    // base covers a few ports' first queues, and queues added at run time
    // by set_queue_count come out of its slack).
    if (p.rxq > 1) n += uint64_t{p.rxq - 1u} * kRxDescriptors;
    if (devarg(p.devargs, "infinite_rx") != "1") continue;
    for (const std::string& file : devargs_of(p.devargs, "rx_pcap")) n += pcap_records(file);  // one queue each
  }
  return static_cast<unsigned>(std::min<uint64_t>(n, 1u << 24));
}

void release(Packet* p) noexcept { rte_pktmbuf_free(mbuf_of(p)); }

DpdkBackend::DpdkBackend(rte_mempool* pool, rte_mempool* jumbo_pool)
    : shared_(std::make_shared<DpdkShared>()), pool_(pool), jumbo_pool_(jumbo_pool) {
  shared_->pool = pool;
  shared_->jumbo_pool = jumbo_pool;
}

DpdkBackend::~DpdkBackend() { shutdown(); }

Result<std::unique_ptr<Port>> DpdkBackend::open_port(const PortSpec& spec, uint16_t n_rxq, uint16_t n_txq) {
  if (spec.kind != PortKind::dpdk)
    return invalid("port " + spec.name + ": the DPDK backend opens only dpdk: ports");
  std::lock_guard lock(shared_->mu);
  if (shared_->shut_down)
    return Status(Errc::unavailable, "port " + spec.name + ": the DPDK backend is shut down");
  // The spec's n_rxq=/n_txq= (port_spec.h) win over what the caller asks
  // (System asks 1 rx queue and one tx queue per PMD).
  if (spec.rxq > 1) n_rxq = spec.rxq;
  if (spec.txq > 0) n_txq = spec.txq;
  auto r = DpdkPort::open(shared_, spec, n_rxq, n_txq);
  if (r) r.value()->set_backend(this);
  return r;
}

unsigned DpdkBackend::alloc_burst(std::span<Packet*> out, uint32_t len) noexcept {
  if (len > kJumboBufferSize) return 0;
  rte_mempool* pool = len > kBufferSize ? jumbo_pool_ : pool_;
  rte_mbuf* mbufs[kMaxBurst];
  unsigned done = 0;
  while (done < out.size()) {
    const auto n = static_cast<unsigned>(std::min<size_t>(out.size() - done, kMaxBurst));
    unsigned got = n;
    if (rte_pktmbuf_alloc_bulk(pool, mbufs, n) != 0) [[unlikely]] {
      // Bulk gets are all-or-nothing; take what is left one by one.
      for (got = 0; got < n; ++got) {
        mbufs[got] = rte_pktmbuf_alloc(pool);
        if (mbufs[got] == nullptr) break;
      }
    }
    for (unsigned i = 0; i < got; ++i) out[done + i] = from_mbuf(mbufs[i]);
    done += got;
    if (got < n) break;
  }
  return done;
}

Status DpdkBackend::thread_init() {
  if (rte_lcore_id() != LCORE_ID_ANY) return {};  // an EAL lcore, or registered already
  if (rte_thread_register() != 0) {
    return Status(Errc::resource_exhausted,
                  std::string("dpdk: registering this thread with the EAL failed: ") +
                      rte_strerror(rte_errno) + " (it works without an lcore id, but with no mempool cache)");
  }
  t_registered = true;
  return {};
}

void DpdkBackend::thread_exit() {
  if (!t_registered) return;
  // Give back the mbufs parked in this lcore's mempool cache: unregistering
  // does not, and the next thread to get this lcore id may never come.
  for (rte_mempool* mp : {pool_, jumbo_pool_}) {
    if (mp == nullptr) continue;
    if (rte_mempool_cache* c = rte_mempool_default_cache(mp, rte_lcore_id())) rte_mempool_cache_flush(c, mp);
  }
  rte_thread_unregister();
  t_registered = false;
}

void DpdkBackend::shutdown() {
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->shut_down) return;
    for (DpdkPort* p : shared_->ports) p->stop();
    shared_->shut_down = true;
    shared_->pool = nullptr;
    shared_->jumbo_pool = nullptr;
  }
  rte_mempool_free(pool_);
  rte_mempool_free(jumbo_pool_);
  pool_ = nullptr;
  jumbo_pool_ = nullptr;
  std::lock_guard lock(g_eal_mu);
  (void)rte_eal_cleanup();
  g_eal_state = EalState::cleaned_up;
}

}  // namespace dpdk

Result<std::unique_ptr<Backend>> make_dpdk_backend(const std::vector<std::string>& eal_args,
                                                   const std::vector<PortSpec>& ports) {
  using namespace dpdk;
  std::lock_guard lock(g_eal_mu);
  switch (g_eal_state) {
    case EalState::down:
      break;
    case EalState::up:
      return Status(Errc::already_exists,
                    "DPDK EAL is already initialised in this process (one DPDK backend per process)");
    case EalState::failed:
      return Status(Errc::unavailable, "DPDK EAL init failed earlier in this process and cannot be retried");
    case EalState::cleaned_up:
      return Status(Errc::unavailable,
                    "DPDK EAL was shut down in this process and cannot be initialised again");
  }

  // Static: the EAL may keep pointers into argv, and it runs once per process.
  static std::vector<std::string> argv_strings;
  static std::vector<char*> argv;
  argv_strings = {"keel"};
  const bool own_log_level = std::any_of(eal_args.begin(), eal_args.end(),
                                         [](const auto& a) { return a.rfind("--log-level", 0) == 0; });
  if (!own_log_level) argv_strings.push_back("--log-level=*:error");
  argv_strings.insert(argv_strings.end(), eal_args.begin(), eal_args.end());
  argv.clear();
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  if (rte_eal_init(static_cast<int>(argv.size() - 1), argv.data()) < 0) {
    const int err = rte_errno;
    g_eal_state = EalState::failed;
    return Status(err == EALREADY ? Errc::already_exists : Errc::invalid_argument,
                  "DPDK EAL init failed (" + join(eal_args) + "): " + rte_strerror(err));
  }

  const unsigned n_mbufs = pool_mbufs_for(ports);
  rte_mempool* pool = rte_pktmbuf_pool_create("keel_mbufs", n_mbufs, kPoolCache, sizeof(Packet),
                                              RTE_MBUF_DEFAULT_BUF_SIZE, static_cast<int>(rte_socket_id()));
  if (pool == nullptr) {
    const int err = rte_errno;
    (void)rte_eal_cleanup();
    g_eal_state = EalState::cleaned_up;
    return Status(Errc::resource_exhausted, "DPDK mbuf pool of " + std::to_string(n_mbufs) +
                                                " mbufs (about " + std::to_string(n_mbufs * 2304ull >> 20) +
                                                " MB; pcap replay ports count one per record) could not be "
                                                "created: " + rte_strerror(err) + " (EAL memory -m too small?)");
  }
  rte_mempool* jumbo =
      rte_pktmbuf_pool_create("keel_jumbo", kJumboMbufs, kPoolCache / 8, sizeof(Packet),
                              RTE_PKTMBUF_HEADROOM + kJumboBufferSize, static_cast<int>(rte_socket_id()));
  if (jumbo == nullptr) {
    const int err = rte_errno;
    rte_mempool_free(pool);
    (void)rte_eal_cleanup();
    g_eal_state = EalState::cleaned_up;
    return Status(Errc::resource_exhausted,
                  "DPDK jumbo mbuf pool of " + std::to_string(kJumboMbufs) + " mbufs (about " +
                      std::to_string(kJumboMbufs * 9600ull >> 20) +
                      " MB) could not be created: " + rte_strerror(err) + " (EAL memory -m too small?)");
  }
  unsigned misaligned = 0;
  rte_mempool_obj_iter(pool, construct_descriptor, &misaligned);
  rte_mempool_obj_iter(jumbo, construct_descriptor, &misaligned);
  if (misaligned != 0) {
    rte_mempool_free(pool);
    rte_mempool_free(jumbo);
    (void)rte_eal_cleanup();
    g_eal_state = EalState::cleaned_up;
    return Status(Errc::internal,
                  "DPDK mbuf pool: " + std::to_string(misaligned) + " mbufs have a misaligned private area");
  }
  g_eal_state = EalState::up;
  return std::unique_ptr<Backend>(new DpdkBackend(pool, jumbo));
}

}  // namespace keel::hal

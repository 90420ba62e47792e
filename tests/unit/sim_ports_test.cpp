// The other sim ports (null, sample, tap) and the backend's refusals.
// The TAP case runs only where /dev/net/tun and CAP_NET_ADMIN are available
// (and its traffic part only with CAP_NET_RAW); elsewhere it says why and skips.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/fault.h"
#include "hal/sim/rx_pacer.h"
#include "hal/sim/sample_traffic.h"
#include "keel/hal/backend.h"
#include "eventually.h"
#include "sim_test_util.h"
#include "keel/hal/cpu.h"

using namespace keel::hal;
using keel::Result;

namespace {

using keel::test::open_ok;
using keel::test::sim_backend;
using keel::test::TempDir;
using keel::test::try_open;

uint16_t csum_fold(const uint8_t* p, size_t n, uint32_t acc = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) acc += uint32_t(p[i] << 8 | p[i + 1]);
  if (n & 1) acc += uint32_t(p[n - 1] << 8);
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(~acc & 0xffff);
}

uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }

// A packet socket bound to interface `ifname` (needs CAP_NET_RAW), reads
// timing out after 1 s; -1 when none can be opened.
int packet_socket(const std::string& ifname) {
  const int sock = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
  if (sock < 0) return -1;
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
  REQUIRE(sll.sll_ifindex > 0);
  REQUIRE(bind(sock, reinterpret_cast<sockaddr*>(&sll), sizeof sll) == 0);
  timeval tv{1, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return sock;
}

}  // namespace

TEST_CASE("null port: receives nothing, sends by releasing") {
  auto b = sim_backend(64);
  auto p = open_ok(*b, "n0", "null");
  CHECK(p->kind() == "null");
  CHECK(p->describe() == "null");
  CHECK(p->link().up);
  std::array<Packet*, kMaxBurst> pkts;
  CHECK(p->rx(0, pkts) == 0);
  for (int round = 0; round < 4; ++round) {  // 4 x 32 > 64 buffers: they come back
    REQUIRE(b->alloc_burst(pkts) == kMaxBurst);
    for (Packet* x : pkts) REQUIRE(x->set_len(60));
    CHECK(p->tx(0, pkts) == kMaxBurst);
  }
  CHECK(p->counters().tx_packets == 4 * kMaxBurst);
  CHECK(p->counters().tx_bytes == 4 * kMaxBurst * 60);
  CHECK(p->counters().tx_dropped == 0);
  p->stop();
}

TEST_CASE("the built-in sample: 64 valid IPv4/UDP frames in 8 flows") {
  auto frames = sim::sample_traffic();
  REQUIRE(frames.size() == 64);
  std::set<uint16_t> sports;
  for (size_t i = 0; i < frames.size(); ++i) {
    CAPTURE(i);
    const uint8_t* f = frames[i].data();
    const uint8_t dst[6] = {2, 0, 0, 0, 0, 2}, src[6] = {2, 0, 0, 0, 0, 1};
    CHECK(std::memcmp(f, dst, 6) == 0);
    CHECK(std::memcmp(f + 6, src, 6) == 0);
    CHECK(be16(f + 12) == 0x0800);
    const uint8_t* ip = f + 14;
    CHECK(ip[0] == 0x45);
    CHECK(be16(ip + 2) == 50);
    CHECK(ip[9] == 17);
    CHECK(csum_fold(ip, 20) == 0);  // valid header checksum
    const uint8_t sip[4] = {10, 0, 0, 1}, dip[4] = {10, 0, 0, 2};
    CHECK(std::memcmp(ip + 12, sip, 4) == 0);
    CHECK(std::memcmp(ip + 16, dip, 4) == 0);
    const uint8_t* udp = ip + 20;
    CHECK(be16(udp + 4) == 30);
    uint32_t pseudo = 0;
    for (int k = 0; k < 8; k += 2) pseudo += be16(ip + 12 + k);
    pseudo += 17 + 30;
    CHECK(csum_fold(udp, 30, pseudo) == 0);  // valid UDP checksum
    sports.insert(be16(udp));
  }
  CHECK(sports.size() == sim::kSampleFlows);
}

TEST_CASE("sample port: unpaced fills bursts; an empty pool shortens them") {
  auto b = sim_backend(256);
  auto fast = open_ok(*b, "s0", "sample:pps=0");
  CHECK(fast->describe() == "sample pps=0");
  CHECK(fast->input_state() == InputState::live);
  std::array<Packet*, kMaxBurst> pkts;
  size_t seen = 0;
  for (int round = 0; round < 5; ++round) {
    REQUIRE(fast->rx(0, pkts) == kMaxBurst);
    for (Packet* p : pkts) {
      REQUIRE(p->len() == 64);
      CHECK(std::memcmp(p->data(), sim::sample_traffic()[seen % 64].data(), 64) == 0);
      ++seen;
    }
    release_burst(pkts);
  }

  // Pool exhaustion shortens the burst, nothing is counted as dropped.
  std::vector<Packet*> hold(256 - 10);
  REQUIRE(b->alloc_burst(hold) == hold.size());
  CHECK(fast->rx(0, pkts) == 10);
  release_burst(std::span<Packet* const>(pkts.data(), 10));
  release_burst(hold);
  CHECK(fast->counters().rx_dropped == 0);
}

// Fault points (core/fault.h), through the one a sim port meets first: the
// pool's allocations.
TEST_CASE("fault points: armed only where permitted, fire N times or until cleared; the pool runs dry") {
  namespace fault = keel::fault;
  fault::clear_all();
  fault::permit(false);
  CHECK(fault::arm(fault::Point::pool_exhausted, {}).code() == keel::Errc::unsupported);
  CHECK(!fault::armed(fault::Point::pool_exhausted));
  fault::permit(true);
  CHECK(fault::arm(fault::Point::pool_exhausted, {.count = 0}).code() == keel::Errc::invalid_argument);
  CHECK(fault::arm(fault::Point::handler_stall, {}).code() == keel::Errc::invalid_argument);  // needs MS
  CHECK(fault::parse("disk-full") == fault::Point::disk_full);
  CHECK(!fault::parse("disk_full"));
  for (unsigned i = 0; i < fault::kPoints; ++i)
    CHECK(fault::parse(fault::name(static_cast<fault::Point>(i))) == static_cast<fault::Point>(i));

  auto b = sim_backend(256);
  auto fast = open_ok(*b, "s0", "sample:pps=0");
  std::array<Packet*, kMaxBurst> pkts;
  const uint64_t fired = fault::view(fault::Point::pool_exhausted).fired;
  // Two fires: two bursts get no buffer (the frames stay due, nothing is
  // dropped), then the point disarms itself.
  REQUIRE(fault::arm(fault::Point::pool_exhausted, {.count = 2}).ok());
  CHECK(fast->rx(0, pkts) == 0);
  CHECK(fault::view(fault::Point::pool_exhausted).remaining == 1);
  CHECK(fast->rx(0, pkts) == 0);
  CHECK(!fault::armed(fault::Point::pool_exhausted));
  REQUIRE(fast->rx(0, pkts) == kMaxBurst);
  CHECK(std::memcmp(pkts[0]->data(), sim::sample_traffic()[0].data(), 64) == 0);  // the first frame, not lost
  release_burst(pkts);
  // Until cleared: every allocation fails, the jumbo class too.
  REQUIRE(fault::arm(fault::Point::pool_exhausted, {}).ok());
  CHECK(fast->rx(0, pkts) == 0);
  CHECK(b->alloc_burst(std::span<Packet*>(pkts.data(), 4), 9000) == 0);
  fault::disarm(fault::Point::pool_exhausted);
  CHECK(b->alloc_burst(std::span<Packet*>(pkts.data(), 4), 9000) == 4);
  release_burst(std::span<Packet* const>(pkts.data(), 4));
  CHECK(fault::view(fault::Point::pool_exhausted).fired == fired + 4);
  CHECK(fast->counters().rx_dropped == 0);
  fault::permit(false);
}

TEST_CASE("fault points: a stall sleeps MS on the thread that meets it, and ends when the point is disarmed") {
  namespace fault = keel::fault;
  fault::permit(true);
  fault::clear_all();
  // Short: sleeps about MS, then returns (the clock reads bound it from below).
  REQUIRE(fault::arm(fault::Point::control_stall, {.count = 1, .ms = 20}).ok());
  auto t0 = std::chrono::steady_clock::now();
  fault::stall(fault::Point::control_stall);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(20));
  CHECK(!fault::armed(fault::Point::control_stall));
  fault::stall(fault::Point::control_stall);  // disarmed: returns at once (no fire)
  CHECK(fault::view(fault::Point::control_stall).fired >= 1);

  // Long: a thread stalls for 10 minutes until the point is disarmed.
  REQUIRE(fault::arm(fault::Point::handler_stall, {.ms = fault::kMaxStallMs}).ok());
  const uint64_t fired = fault::view(fault::Point::handler_stall).fired;
  std::atomic<bool> done{false};
  std::thread stuck([&] {
    fault::stall(fault::Point::handler_stall);
    done = true;
  });
  CHECK(keel::test::eventually([&] { return fault::view(fault::Point::handler_stall).fired == fired + 1; }));
  CHECK(!done);
  t0 = std::chrono::steady_clock::now();
  fault::disarm(fault::Point::handler_stall);
  stuck.join();
  CHECK(done);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::minutes(10));  // ended by the disarm
  fault::permit(false);
}

// The pacing arithmetic, on times the test chooses (no clock is read).
TEST_CASE("rx pacer: delivers pps however the reader is scheduled; a full ring drops and counts") {
  using sim::RxPacer;
  constexpr uint64_t ms = 1'000'000, s = 1000 * ms;
  // Polled every millisecond at 1000 pps: one packet per poll, none dropped.
  {
    RxPacer p(1000, 5 * s);
    uint64_t got = 0;
    for (uint64_t t = 5 * s; t <= 15 * s; t += ms) {
      uint64_t n = p.ready(t, kMaxBurst);
      CHECK(n <= 1);
      p.took(n);
      got += n;
    }
    CHECK(got == 10000);
    CHECK(p.dropped() == 0);
  }
  // Polled every 100 ms (a descheduled PMD): each poll drains the ring in
  // bursts of 32; the long-run rate is still pps, nothing is dropped.
  {
    RxPacer p(1000, 0);
    uint64_t got = 0;
    for (uint64_t t = 100 * ms; t <= 10 * s; t += 100 * ms)
      for (uint64_t n; (n = p.ready(t, kMaxBurst)) != 0;) {
        CHECK(n <= kMaxBurst);
        p.took(n);
        got += n;
      }
    CHECK(got == 10000);
    CHECK(p.dropped() == 0);
  }
  // A 3 s stall at 1000 pps: the ring keeps 1024 packets, the rest is
  // dropped and counted; then the rate resumes.
  {
    RxPacer p(1000, 0);
    CHECK(p.ready(3 * s, kMaxBurst) == kMaxBurst);
    CHECK(p.dropped() == 3000 - RxPacer::kRxRing);
    uint64_t got = 0;
    for (uint64_t n; (n = p.ready(3 * s, kMaxBurst)) != 0;) p.took(n), got += n;
    CHECK(got == RxPacer::kRxRing);
    CHECK(p.ready(3 * s + 5 * ms, kMaxBurst) == 5);
    CHECK(p.taken() + p.dropped() == p.due_at(3 * s));
  }
  // Out of buffers: the reader takes fewer, the rest stays due.
  {
    RxPacer p(1000, 0);
    CHECK(p.ready(20 * ms, kMaxBurst) == 20);
    p.took(5);
    CHECK(p.ready(20 * ms, kMaxBurst) == 15);
    CHECK(p.ready(19 * ms, kMaxBurst) == 14);  // a clock read earlier than the last: nothing extra
  }
  // Line rate for ten minutes: the due count does not overflow.
  {
    RxPacer p(14'880'952, 0);
    CHECK(p.due_at(600 * s) == 600ull * 14'880'952);
    CHECK(p.due_at(0) == 0);
  }
  // Unpaced: every request in full.
  {
    RxPacer p(0, 0);
    CHECK(p.ready(0, kMaxBurst) == kMaxBurst);
    CHECK(p.dropped() == 0);
  }
}

// The paced port on the real clock: only bounds that no scheduling can
// break. Everything it gave or dropped was due by the last clock read after
// it (the port's start is after t_open); everything due by a clock read
// before a poll that came back empty was given or dropped.
TEST_CASE("sample port: paced at pps between clock reads around it") {
  auto b = sim_backend(256);
  std::array<Packet*, kMaxBurst> pkts;
  const uint64_t t_open = now_ns();
  auto slow = open_ok(*b, "s1", "sample:pps=1000");
  const uint64_t t_opened = now_ns();
  auto due = [](uint64_t from, uint64_t to) { return to > from ? (to - from) * 1000 / 1'000'000'000u : 0; };
  uint64_t got = 0, t_before_drain = 0;
  for (int round = 0; round < 4; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    t_before_drain = now_ns();
    for (uint16_t n; (n = slow->rx(0, pkts)) != 0;) {
      got += n;
      release_burst(std::span<Packet* const>(pkts.data(), n));
    }
  }
  const uint64_t t_end = now_ns();
  const PortCounters c = slow->counters();
  CHECK(c.rx_packets == got);
  CHECK(got + c.rx_dropped <= due(t_open, t_end));
  CHECK(got + c.rx_dropped >= due(t_opened, t_before_drain));  // >= 60: 4 x 15 ms slept
}

TEST_CASE("dpdk specs need the DPDK backend; errors name the port") {
  auto b = sim_backend(16);
  auto r = try_open(*b, "d0", "dpdk:net_null0");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "port d0: dpdk ports need the DPDK backend");
  CHECK(r.status().code() == keel::Errc::unsupported);
}

TEST_CASE("tap port (skipped without /dev/net/tun or CAP_NET_ADMIN)") {
  auto b = sim_backend(64);
  const std::string ifname = "keelt" + std::to_string(getpid() % 1000000);
  auto r = try_open(*b, "t0", "tap:" + ifname);
  if (!r.ok()) {
    MESSAGE("skipping the TAP test: " << r.status().message());
    CHECK(r.status().message().rfind("port t0: tap '" + ifname + "': ", 0) == 0);
    return;
  }
  std::unique_ptr<Port> tap = std::move(r).value();
  CHECK(tap->describe() == "tap " + ifname);
  CHECK(tap->link().up);
  std::array<Packet*, kMaxBurst> pkts;
  release_burst(std::span<Packet* const>(pkts.data(), tap->rx(0, pkts)));  // whatever the kernel sent

  // The other end: a packet socket on the interface (needs CAP_NET_RAW).
  const int sock = packet_socket(ifname);
  if (sock < 0) {
    MESSAGE("TAP opened; skipping the traffic part: no packet socket");
    return;
  }

  // tap tx -> the kernel receives it on the interface -> the packet socket.
  const sim::SampleFrame& frame = sim::sample_traffic()[7];
  Packet* p;
  REQUIRE(b->alloc_burst(std::span(&p, 1)) == 1);
  REQUIRE(p->set_len(64));
  std::memcpy(p->data(), frame.data(), 64);
  CHECK(tap->tx(0, std::span(&p, 1)) == 1);
  bool seen = false;
  for (int i = 0; i < 50 && !seen; ++i) {
    uint8_t buf[2048];
    ssize_t n = recv(sock, buf, sizeof buf, 0);
    if (n < 0) break;
    seen = n == 64 && std::memcmp(buf, frame.data(), 64) == 0;
  }
  CHECK(seen);

  // packet socket -> the kernel transmits on the interface -> tap rx.
  const sim::SampleFrame& back = sim::sample_traffic()[9];
  REQUIRE(send(sock, back.data(), back.size(), 0) == 64);
  CHECK(keel::test::eventually([&] {
    bool got = false;
    uint16_t n = tap->rx(0, pkts);
    for (uint16_t k = 0; k < n; ++k) {
      if (pkts[k]->len() == 64 && std::memcmp(pkts[k]->data(), back.data(), 64) == 0) got = true;
    }
    release_burst(std::span<Packet* const>(pkts.data(), n));
    return got;
  }));
  close(sock);
}

TEST_CASE(
    "tap port MTU: sets the kernel MTU, carries 9000-byte frames both ways (skipped without CAP_NET_ADMIN)") {
  auto b = sim_backend(64);
  const std::string ifname = "keelm" + std::to_string(getpid() % 1000000);
  auto r = try_open(*b, "t0", "tap:" + ifname);
  if (!r.ok()) {
    MESSAGE("skipping the TAP MTU test: " << r.status().message());
    return;
  }
  std::unique_ptr<Port> tap = std::move(r).value();
  auto kernel_mtu = [&] {
    FILE* f = fopen(("/sys/class/net/" + ifname + "/mtu").c_str(), "r");
    REQUIRE(f);
    unsigned v = 0;
    CHECK(fscanf(f, "%u", &v) == 1);
    fclose(f);
    return v;
  };
  CHECK(kernel_mtu() == 1500);
  REQUIRE(tap->set_mtu(9000).ok());
  CHECK(tap->mtu() == 9000);
  CHECK(kernel_mtu() == 9000);
  std::array<Packet*, kMaxBurst> pkts;
  release_burst(std::span<Packet* const>(pkts.data(), tap->rx(0, pkts)));  // whatever the kernel sent

  const int sock = packet_socket(ifname);
  if (sock < 0) {
    MESSAGE("TAP opened; skipping the traffic part: no packet socket");
    return;
  }

  // A 9014-byte frame (MTU 9000 + header): local experimental EtherType 0x88b5.
  std::vector<uint8_t> big(9014);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 11);
  const uint8_t head[14] = {0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5};
  std::memcpy(big.data(), head, sizeof head);

  // keel tx -> the packet socket, whole.
  Packet* p;
  REQUIRE(b->alloc_burst(std::span(&p, 1), 9014) == 1);
  REQUIRE(p->set_len(9014));
  std::memcpy(p->data(), big.data(), big.size());
  CHECK(tap->tx(0, std::span(&p, 1)) == 1);
  bool seen = false;
  std::vector<uint8_t> buf(16384);
  for (int i = 0; i < 50 && !seen; ++i) {
    ssize_t n = recv(sock, buf.data(), buf.size(), 0);
    if (n < 0) break;
    seen = n == 9014 && std::memcmp(buf.data(), big.data(), big.size()) == 0;
  }
  CHECK(seen);

  // The packet socket -> keel rx, whole (a jumbo buffer).
  big[20] ^= 0xff;
  REQUIRE(send(sock, big.data(), big.size(), 0) == 9014);
  CHECK(keel::test::eventually([&] {
    bool got = false;
    uint16_t n = tap->rx(0, pkts);
    for (uint16_t k = 0; k < n; ++k)
      if (pkts[k]->len() == 9014 && std::memcmp(pkts[k]->data(), big.data(), big.size()) == 0) got = true;
    release_burst(std::span<Packet* const>(pkts.data(), n));
    return got;
  }));

  // Back at 1500 keel drops the 9014-byte frame on tx and counts it.
  REQUIRE(tap->set_mtu(1500).ok());
  CHECK(kernel_mtu() == 1500);
  REQUIRE(b->alloc_burst(std::span(&p, 1), 9014) == 1);
  REQUIRE(p->set_len(9014));
  CHECK(tap->tx(0, std::span(&p, 1)) == 0);
  CHECK(tap->counters().tx_mtu_exceeded_drops == 1);
  close(sock);
}

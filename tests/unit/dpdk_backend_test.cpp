// Tests of the DPDK backend (hal/dpdk) on virtual devices: net_pcap file in
// -> file out byte for byte, the datapath's edits written back into mbufs,
// oversized (chained) frames dropped and counted, net_ring loopback on
// several queues, a registered PMD thread, sim buffers copied into mbufs,
// errors and rollback, the spec's n_rxq/n_txq and which vdevs take several
// queues and RSS (net_null: any, RSS accepted; net_ring: 16 pairs, no RSS;
// net_pcap: one rx queue per rx_pcap= file), set_queue_count restarting a
// device with other counts (and refusing more than it has, unchanged), no
// mbuf leaked, and one EAL per process.
//
// The EAL can be initialised once per process, so every test case shares one
// backend (made on first use, with --no-huge, --no-shconf and a per-process
// file prefix so parallel runs don't collide) and the last test case shuts
// it down. Test cases run in file order (doctest's default); each also runs
// alone. No DPDK header is included here: the test sees only hal/include.
//
// Thread-safety: single-threaded except the thread_init case, which polls a
// port from one std::thread while the main thread waits for it.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "keel/hal/backend.h"
#include "keel/hal/cpu.h"
#include "keel/hal/port.h"
#include "eventually.h"

namespace hal = keel::hal;
using Frame = std::vector<uint8_t>;

namespace {

std::vector<std::string> eal_args() {
  return {
      "--no-huge",      "--no-pci",    "-m", "256", "--file-prefix", "keeltest" + std::to_string(getpid()),
      "--no-telemetry", "--no-shconf", "-l", "0"};
}

// The EAL can't be retried in a process after it refused its arguments, so
// the refusal is checked in a child forked before this process's EAL starts
// (no threads yet, so fork is safe).
void check_eal_init_failure_in_child() {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(fds[0]);
    auto args = eal_args();
    args.push_back("--no-such-eal-flag");
    auto r = hal::make_dpdk_backend(args);
    std::string msg = r.ok() ? "unexpected success" : r.status().message();
    auto again = hal::make_dpdk_backend(eal_args());
    msg += "\n" + (again.ok() ? std::string("unexpected success") : again.status().message());
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  MESSAGE(msg);
  CHECK(msg.find("DPDK EAL init failed (--no-huge --no-pci") == 0);
  CHECK(msg.find("--no-such-eal-flag): Invalid argument\n") != std::string::npos);
  CHECK(msg.find("\nDPDK EAL init failed earlier in this process") != std::string::npos);
}

hal::Backend& backend() {
  static std::unique_ptr<hal::Backend> b = [] {
    check_eal_init_failure_in_child();
    auto r = hal::make_dpdk_backend(eal_args());
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    return std::move(r).value();
  }();
  return *b;
}

// A temporary directory for the test's pcap files, removed at exit.
const std::filesystem::path& tmpdir() {
  struct TempDir {
    std::filesystem::path path;
    ~TempDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const TempDir dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "keel-dpdk-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    return TempDir{tmpl};
  }();
  return dir.path;
}

hal::PortSpec dpdk_spec(const std::string& name, const std::string& devargs) {
  hal::PortSpec s;
  s.name = name;
  s.kind = hal::PortKind::dpdk;
  s.devargs = devargs;
  s.text = "dpdk:" + devargs;
  return s;
}

// Frames of sizes 60..1514 whose every byte depends on the frame's index.
std::vector<Frame> make_frames(unsigned n) {
  std::vector<Frame> frames;
  for (unsigned i = 0; i < n; ++i) {
    size_t len = 60 + size_t{i} * 337 % (1514 - 60 + 1);
    if (i == 1) len = 1514;
    Frame f(len);
    for (size_t j = 0; j < len; ++j) f[j] = static_cast<uint8_t>(size_t{i} * 31 + j * 7 + (j >> 8));
    const uint8_t hdr[14] = {0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x88, 0xb5};
    std::memcpy(f.data(), hdr, sizeof(hdr));
    f[14] = static_cast<uint8_t>(i);
    frames.push_back(std::move(f));
  }
  return frames;
}

void put32(std::ofstream& o, uint32_t v) { o.write(reinterpret_cast<const char*>(&v), 4); }
void put16(std::ofstream& o, uint16_t v) { o.write(reinterpret_cast<const char*>(&v), 2); }

// Classic libpcap file, microsecond timestamps, Ethernet.
void write_pcap(const std::filesystem::path& path, const std::vector<Frame>& frames) {
  std::ofstream o(path, std::ios::binary);
  put32(o, 0xa1b2c3d4);
  put16(o, 2);
  put16(o, 4);
  put32(o, 0);
  put32(o, 0);
  put32(o, 65535);
  put32(o, 1);
  uint32_t t = 0;
  for (const Frame& f : frames) {
    put32(o, 1700000000);
    put32(o, t++);
    put32(o, static_cast<uint32_t>(f.size()));
    put32(o, static_cast<uint32_t>(f.size()));
    o.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size()));
  }
  REQUIRE(o.good());
}

// Reads a classic pcap file (micro- or nanosecond magic, host byte order).
std::vector<Frame> read_pcap(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::vector<uint8_t> all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(all.size() >= 24);
  uint32_t magic;
  std::memcpy(&magic, all.data(), 4);
  REQUIRE((magic == 0xa1b2c3d4 || magic == 0xa1b23c4d));
  std::vector<Frame> frames;
  size_t off = 24;
  while (off + 16 <= all.size()) {
    uint32_t incl;
    std::memcpy(&incl, all.data() + off + 8, 4);
    off += 16;
    REQUIRE(off + incl <= all.size());
    frames.emplace_back(all.begin() + static_cast<long>(off), all.begin() + static_cast<long>(off + incl));
    off += incl;
  }
  CHECK(off == all.size());
  return frames;
}

uint64_t total_bytes(const std::vector<Frame>& frames) {
  uint64_t n = 0;
  for (const Frame& f : frames) n += f.size();
  return n;
}

std::unique_ptr<hal::Port> open_ok(const std::string& name, const std::string& devargs, uint16_t nrx = 1,
                                   uint16_t ntx = 1) {
  auto r = backend().open_port(dpdk_spec(name, devargs), nrx, ntx);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  return std::move(r).value();
}

}  // namespace

TEST_CASE("dpdk: the build has the backend") { CHECK(hal::have_dpdk()); }

TEST_CASE("dpdk: pcap file in -> pcap file out, byte for byte, in order") {
  const auto frames = make_frames(40);
  const auto in = tmpdir() / "in.pcap";
  const auto out = tmpdir() / "out.pcap";
  write_pcap(in, frames);

  auto p0 = open_ok("p0", "net_pcap0,rx_pcap=" + in.string());
  auto p1 = open_ok("p1", "net_pcap1,tx_pcap=" + out.string());
  p0->set_id(0);
  p1->set_id(1);
  CHECK(p0->kind() == "dpdk");
  CHECK(p0->n_rxq() == 1);
  CHECK(p1->n_txq() == 1);
  CHECK(p0->describe().find("net_pcap0,rx_pcap=") != std::string::npos);
  CHECK(p0->describe().find("driver net_pcap") != std::string::npos);
  CHECK(p0->input_state() == hal::InputState::pending);  // not polled yet
  CHECK(p1->input_state() == hal::InputState::live);
  CHECK(p0->link().up);
  {
    std::array<hal::Packet*, hal::kMaxBurst> none{};
    CHECK(p1->rx(0, none) == 0);  // tx-only net_pcap: nothing to receive
  }

  const uint64_t deadline = hal::now_ns() + keel::test::kPatienceNs;
  std::array<hal::Packet*, hal::kMaxBurst> burst{};
  unsigned received = 0;
  while (p0->input_state() != hal::InputState::drained) {
    REQUIRE(hal::now_ns() < deadline);
    uint16_t n = p0->rx(0, burst);
    for (uint16_t i = 0; i < n; ++i) {
      hal::Packet* p = burst[i];
      CHECK(p->source() == hal::BufferSource::dpdk);
      CHECK(p->in_port() == 0);
      CHECK(p->headroom() == hal::kHeadroom);
      REQUIRE(received + i < frames.size());
      CHECK(p->len() == frames[received + i].size());
    }
    received += n;
    CHECK(p1->tx(0, std::span<hal::Packet* const>(burst.data(), n)) == n);
    if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(received == frames.size());
  p0->stop();
  p1->stop();
  p1->stop();  // idempotent
  CHECK(p0->input_state() == hal::InputState::drained);
  CHECK_FALSE(p0->link().up);

  const auto got = read_pcap(out);
  REQUIRE(got.size() == frames.size());
  for (size_t i = 0; i < frames.size(); ++i) CHECK_MESSAGE(got[i] == frames[i], "frame " << i);

  const auto c0 = p0->counters();
  const auto c1 = p1->counters();
  CHECK(c0.rx_packets == frames.size());
  CHECK(c0.rx_bytes == total_bytes(frames));
  CHECK(c0.rx_dropped == 0);
  CHECK(c1.tx_packets == frames.size());
  CHECK(c1.tx_bytes == total_bytes(frames));
  CHECK(c1.tx_dropped == 0);
}

TEST_CASE("dpdk: the datapath's edits reach the wire (push_front, set_len)") {
  const auto frames = make_frames(3);
  const auto in = tmpdir() / "edit-in.pcap";
  const auto out = tmpdir() / "edit-out.pcap";
  write_pcap(in, frames);
  auto p0 = open_ok("e0", "net_pcap2,rx_pcap=" + in.string());
  auto p1 = open_ok("e1", "net_pcap3,tx_pcap=" + out.string());

  std::array<hal::Packet*, hal::kMaxBurst> burst{};
  unsigned got_n = 0;
  const uint64_t deadline = hal::now_ns() + keel::test::kPatienceNs;
  while (got_n < frames.size()) {
    REQUIRE(hal::now_ns() < deadline);
    uint16_t n = p0->rx(0, burst);
    for (uint16_t i = 0; i < n; ++i) {
      hal::Packet* p = burst[i];
      uint8_t* front = p->push_front(4);  // e.g. a VLAN tag's worth
      REQUIRE(front != nullptr);
      const uint8_t tag[4] = {0xde, 0xad, 0xbe, 0xef};
      std::memcpy(front, tag, sizeof(tag));
      REQUIRE(p->set_len(p->len() - 2));  // and a truncation at the end
    }
    got_n += n;
    (void)p1->tx(0, std::span<hal::Packet* const>(burst.data(), n));
  }
  p0->stop();
  p1->stop();
  const auto got = read_pcap(out);
  REQUIRE(got.size() == frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    Frame want = {0xde, 0xad, 0xbe, 0xef};
    want.insert(want.end(), frames[i].begin(), frames[i].end() - 2);
    CHECK(got[i] == want);
  }
}

TEST_CASE(
    "dpdk: a jumbo frame chained over mbufs arrives whole; one over the jumbo buffer is dropped and "
    "counted") {
  // net_pcap chains a 9000-byte frame over 2 KB mbufs; the first segment has
  // no room to take it whole, so rx copies it into one jumbo-pool mbuf
  // (hal/dpdk/dpdk_port.cpp). A frame longer than a jumbo mbuf holds is
  // dropped and counted as rx_dropped.
  auto frames = make_frames(4);
  frames[1].resize(9000, 0x5a);
  frames[2].resize(hal::kJumboBufferSize + 1, 0x33);
  for (size_t i = 0; i < frames[1].size(); ++i) frames[1][i] = static_cast<uint8_t>(i * 7);
  const auto in = tmpdir() / "jumbo-in.pcap";
  write_pcap(in, frames);
  auto p0 = open_ok("j0", "net_pcap4,rx_pcap=" + in.string());

  std::array<hal::Packet*, hal::kMaxBurst> burst{};
  std::vector<std::vector<uint8_t>> got;
  const uint64_t deadline = hal::now_ns() + keel::test::kPatienceNs;
  while (p0->input_state() != hal::InputState::drained) {
    REQUIRE(hal::now_ns() < deadline);
    uint16_t n = p0->rx(0, burst);
    for (uint16_t i = 0; i < n; ++i) got.emplace_back(burst[i]->data(), burst[i]->data() + burst[i]->len());
    hal::release_burst(std::span<hal::Packet* const>(burst.data(), n));
    if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(got.size() == 3);
  CHECK(got[0] == frames[0]);
  CHECK(got[1] == frames[1]);  // whole, byte for byte
  CHECK(got[2] == frames[3]);
  const auto c = p0->counters();
  CHECK(c.rx_packets == 3);
  CHECK(c.rx_dropped == 1);
}

TEST_CASE("dpdk: mtu_request: frames over MTU + 18 are dropped on tx and counted (netdev-dpdk's rule)") {
  const auto out = tmpdir() / "mtu-out.pcap";
  auto p = open_ok("m0", "net_pcap5,tx_pcap=" + out.string());
  CHECK(p->mtu() == hal::kDefaultMtu);
  CHECK(p->tx_frame_limit().untagged == 1500 + 18);
  CHECK_FALSE(p->set_mtu(67).ok());
  CHECK_FALSE(p->set_mtu(9217).ok());
  CHECK(p->mtu() == hal::kDefaultMtu);
  REQUIRE(p->set_mtu(9216).ok());
  CHECK(p->tx_frame_limit().untagged == 9216 + 18);

  // 9000 bytes (a jumbo buffer) and 9235 (over 9216 + 18) at MTU 9216;
  // then 1518 and 1519 at MTU 1500.
  auto send = [&](uint32_t len) {
    hal::Packet* pkt = nullptr;
    REQUIRE(backend().alloc_burst(std::span(&pkt, 1), len) == 1);
    REQUIRE(pkt->set_len(len));
    std::memset(pkt->data(), 0xab, len);
    p->tx(0, std::span<hal::Packet* const>(&pkt, 1));
  };
  send(9000);
  send(9235);
  REQUIRE(p->set_mtu(1500).ok());
  send(1518);
  send(1519);
  const auto c = p->counters();
  CHECK(c.tx_packets == 2);
  CHECK(c.tx_dropped == 2);
  CHECK(c.tx_mtu_exceeded_drops == 2);
  p->stop();
  std::vector<size_t> lens;
  for (const Frame& f : read_pcap(out)) lens.push_back(f.size());
  CHECK(lens == std::vector<size_t>{9000, 1518});
}

TEST_CASE("dpdk: net_ring loops tx back to rx; several queues") {
  auto r = open_ok("r0", "net_ring0", 2, 2);
  CHECK(r->n_rxq() == 2);
  CHECK(r->n_txq() == 2);
  CHECK(r->input_state() == hal::InputState::live);

  for (uint16_t q = 0; q < 2; ++q) {
    std::array<hal::Packet*, 8> pkts{};
    REQUIRE(backend().alloc_burst(pkts) == pkts.size());
    for (unsigned i = 0; i < pkts.size(); ++i) {
      hal::Packet* p = pkts[i];
      CHECK(p->source() == hal::BufferSource::dpdk);
      CHECK(p->len() == 0);
      CHECK(p->headroom() == hal::kHeadroom);
      CHECK(p->tailroom() >= 2048);
      REQUIRE(p->set_len(64 + i));
      for (unsigned j = 0; j < p->len(); ++j) p->data()[j] = static_cast<uint8_t>(q * 100 + i + j);
    }
    CHECK(r->tx(q, pkts) == pkts.size());

    std::array<hal::Packet*, hal::kMaxBurst> in{};
    uint16_t n = r->rx(q, in);
    REQUIRE(n == pkts.size());
    for (unsigned i = 0; i < n; ++i) {
      REQUIRE(in[i]->len() == 64 + i);
      bool same = true;
      for (unsigned j = 0; j < in[i]->len(); ++j)
        same = same && in[i]->data()[j] == static_cast<uint8_t>(q * 100 + i + j);
      CHECK(same);
      CHECK_FALSE(in[i]->has_rss_hash());
      CHECK_FALSE(in[i]->has_flow_mark());
    }
    hal::release_burst(std::span<hal::Packet* const>(in.data(), n));
  }
  const auto c = r->counters();
  CHECK(c.tx_packets == 16);
  CHECK(c.rx_packets == 16);
}

TEST_CASE("dpdk: a PMD thread registers with the EAL and uses a port") {
  auto r = open_ok("r1", "net_ring1");
  unsigned looped = 0;
  std::string err;
  std::thread pmd([&] {
    keel::Status st = backend().thread_init();
    if (!st.ok()) {
      err = st.message();
      return;
    }
    std::array<hal::Packet*, hal::kMaxBurst> pkts{};
    for (int round = 0; round < 100; ++round) {
      unsigned n = backend().alloc_burst(pkts);
      for (unsigned i = 0; i < n; ++i) (void)pkts[i]->set_len(60);
      (void)r->tx(0, std::span<hal::Packet* const>(pkts.data(), n));
      uint16_t got = r->rx(0, pkts);
      looped += got;
      hal::release_burst(std::span<hal::Packet* const>(pkts.data(), got));
    }
    backend().thread_exit();
  });
  pmd.join();
  CHECK_MESSAGE(err.empty(), err);
  CHECK(looped == 100 * hal::kMaxBurst);
}

TEST_CASE("dpdk: bad device arguments give a clear error and leave nothing behind") {
  SUBCASE("no such driver") {
    auto r = backend().open_port(dpdk_spec("bad", "net_nosuchdriver0,x=1"), 1, 1);
    REQUIRE_FALSE(r.ok());
    MESSAGE(r.status().message());
    CHECK(r.status().message() ==
          "port bad: dpdk 'net_nosuchdriver0,x=1': no bus or driver recognises device "
          "'net_nosuchdriver0'");
    CHECK(r.status().code() == keel::Errc::invalid_argument);
  }
  SUBCASE("missing pcap file, then the same device opens fine") {
    const std::string devargs = "net_pcap7,rx_pcap=" + (tmpdir() / "missing.pcap").string();
    auto r = backend().open_port(dpdk_spec("bad", devargs), 1, 1);
    REQUIRE_FALSE(r.ok());
    MESSAGE(r.status().message());
    CHECK(r.status().message().find("port bad: dpdk '" + devargs + "'") == 0);
    CHECK(r.status().message().find("probe failed: ") != std::string::npos);
    CHECK(r.status().message().find("No such file or directory") != std::string::npos);

    const auto in = tmpdir() / "late.pcap";
    write_pcap(in, make_frames(2));
    auto ok = open_ok("good", "net_pcap7,rx_pcap=" + in.string());
    CHECK(ok->n_rxq() == 1);
  }
  SUBCASE("the same ethdev twice") {
    auto a = open_ok("a", "net_null0");
    auto b = backend().open_port(dpdk_spec("b", "net_null0"), 1, 1);
    REQUIRE_FALSE(b.ok());
    MESSAGE(b.status().message());
    CHECK(b.status().code() == keel::Errc::already_exists);
    CHECK(b.status().message().find("already open as port a") != std::string::npos);
  }
  SUBCASE("not a dpdk spec") {
    hal::PortSpec s = dpdk_spec("x", "net_null1");
    s.kind = hal::PortKind::ring;
    CHECK_FALSE(backend().open_port(s, 1, 1).ok());
  }
}

TEST_CASE("dpdk: a port can be reopened after stop") {
  { auto a = open_ok("n", "net_null2"); }
  auto b = open_ok("n", "net_null2");
  CHECK(b->link().up);
}

TEST_CASE("dpdk: foreign (sim) buffers are copied into mbufs and released once sent") {
  auto sim_r = hal::make_sim_backend({.buffers = 2048});
  REQUIRE_MESSAGE(sim_r.ok(), sim_r.status().message());
  hal::Backend& sim = *sim_r.value();
  auto r = open_ok("fr", "net_ring2");

  // net_ring's ring holds 1023 mbufs: 1100 frames overflow it, so both the
  // sent and the refused path of the copy run.
  constexpr unsigned kFrames = 1100;
  unsigned sent = 0;
  for (unsigned done = 0; done < kFrames;) {
    std::array<hal::Packet*, hal::kMaxBurst> pkts{};
    const unsigned want = std::min<unsigned>(hal::kMaxBurst, kFrames - done);
    REQUIRE(sim.alloc_burst(std::span<hal::Packet*>(pkts.data(), want)) == want);
    for (unsigned i = 0; i < want; ++i) {
      hal::Packet* p = pkts[i];
      CHECK(p->source() == hal::BufferSource::sim);
      REQUIRE(p->set_len(60 + (done + i) % 200));
      for (unsigned j = 0; j < p->len(); ++j) p->data()[j] = static_cast<uint8_t>(done + i + j);
    }
    sent += r->tx(0, std::span<hal::Packet* const>(pkts.data(), want));
    done += want;
  }
  CHECK(sent == 1023);
  CHECK(r->counters().tx_packets == 1023);
  CHECK(r->counters().tx_dropped == kFrames - 1023);

  unsigned got = 0;
  bool same = true;
  for (std::array<hal::Packet*, hal::kMaxBurst> in{};;) {
    uint16_t n = r->rx(0, in);
    if (n == 0) break;
    for (uint16_t i = 0; i < n; ++i, ++got) {
      hal::Packet* p = in[i];
      CHECK(p->source() == hal::BufferSource::dpdk);
      same = same && p->len() == 60 + got % 200;
      for (unsigned j = 0; same && j < p->len(); ++j) same = p->data()[j] == static_cast<uint8_t>(got + j);
    }
    hal::release_burst(std::span<hal::Packet* const>(in.data(), n));
  }
  CHECK(got == 1023);
  CHECK(same);

  // Every sim buffer came back (sent ones by the backend, refused ones by Port::tx).
  std::vector<hal::Packet*> all(4096);
  const unsigned n_sim = sim.alloc_burst(all);
  CHECK(n_sim == 2048);
  hal::release_burst(std::span<hal::Packet* const>(all.data(), n_sim));
  sim.shutdown();
}

namespace {

std::unique_ptr<hal::Port> open_spec(const std::string& name, const std::string& spec, uint16_t ntx = 1) {
  auto ps = hal::parse_port_spec(name, spec);
  REQUIRE_MESSAGE(ps.ok(), ps.status().message());
  auto r = backend().open_port(ps.value(), 1, ntx);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  return std::move(r).value();
}

// Loops `count` frames through queue q of a net_ring port (tx q -> rx q).
void loop_through(hal::Port& r, uint16_t q, unsigned count) {
  std::array<hal::Packet*, hal::kMaxBurst> pkts{};
  REQUIRE(count <= pkts.size());
  REQUIRE(backend().alloc_burst(std::span<hal::Packet*>(pkts.data(), count)) == count);
  for (unsigned i = 0; i < count; ++i) {
    REQUIRE(pkts[i]->set_len(60));
    pkts[i]->data()[0] = static_cast<uint8_t>(q);
  }
  CHECK(r.tx(q, std::span<hal::Packet* const>(pkts.data(), count)) == count);
  const uint16_t n = r.rx(q, pkts);
  CHECK(n == count);
  for (uint16_t i = 0; i < n; ++i) CHECK(pkts[i]->data()[0] == q);
  hal::release_burst(std::span<hal::Packet* const>(pkts.data(), n));
}

}  // namespace

TEST_CASE("dpdk: n_rxq/n_txq from the spec; which vdevs take several queues and RSS") {
  // net_null: any number of queues, and it accepts RSS over IP/TCP/UDP (its
  // flow_type_rss_offloads; it computes no hash, being a null device).
  auto n = open_spec("n4", "dpdk:net_null4,n_rxq=4,n_txq=2");
  MESSAGE(n->describe());
  CHECK(n->n_rxq() == 4);
  CHECK(n->n_txq() == 2);
  CHECK(n->describe().find("net_null4 (driver net_null") != std::string::npos);  // n_rxq= not passed on
  CHECK(n->describe().find("rxq=4 txq=2, rss)") != std::string::npos);
  // Without n_txq the datapath's count (one per PMD).
  auto n2 = open_spec("n5", "dpdk:net_null5,n_rxq=2", 3);
  CHECK(n2->n_txq() == 3);
  // net_ring: up to 16 queue pairs (tx q loops to rx q), no RSS.
  auto r = open_spec("r4", "dpdk:net_ring4,n_rxq=4,n_txq=4");
  MESSAGE(r->describe());
  CHECK(r->n_rxq() == 4);
  CHECK(r->describe().find(", no rss)") != std::string::npos);
  for (uint16_t q = 0; q < 4; ++q) loop_through(*r, q, 8);
  // net_pcap: one rx queue per rx_pcap= file, no RSS; asking more gives what it has.
  const auto a = tmpdir() / "qa.pcap", b = tmpdir() / "qb.pcap";
  write_pcap(a, make_frames(20));
  write_pcap(b, make_frames(30));
  auto pc = open_spec("pc", "dpdk:net_pcap9,rx_pcap=" + a.string() + ",rx_pcap=" + b.string() + ",n_rxq=4");
  MESSAGE(pc->describe());
  CHECK(pc->n_rxq() == 2);
  unsigned got[2] = {0, 0};
  for (int round = 0; round < 100; ++round) {
    for (uint16_t q = 0; q < 2; ++q) {
      std::array<hal::Packet*, hal::kMaxBurst> in{};
      const uint16_t k = pc->rx(q, in);
      got[q] += k;
      hal::release_burst(std::span<hal::Packet* const>(in.data(), k));
    }
  }
  CHECK(got[0] == 20);
  CHECK(got[1] == 30);
}

TEST_CASE("dpdk: set_queue_count restarts the device with the new queues; a refusal changes nothing") {
  auto r = open_spec("rq", "dpdk:net_ring5");
  CHECK(r->n_rxq() == 1);
  loop_through(*r, 0, 4);
  REQUIRE(r->set_queue_count(4, 4).ok());
  CHECK(r->n_rxq() == 4);
  CHECK(r->n_txq() == 4);
  for (uint16_t q = 0; q < 4; ++q) loop_through(*r, q, 8);
  CHECK(r->link().up);
  REQUIRE(r->set_queue_count(2, 1).ok());
  CHECK(r->n_rxq() == 2);
  CHECK(r->n_txq() == 1);
  loop_through(*r, 0, 8);

  // More rx queues than the device has (net_pcap: one per rx_pcap= file):
  // refused before anything stops; the port goes on receiving.
  const auto q1 = tmpdir() / "q1.pcap";
  write_pcap(q1, make_frames(10));
  auto pc = open_spec("q1", "dpdk:net_pcap10,rx_pcap=" + q1.string());
  const keel::Status st = pc->set_queue_count(2, 1);
  REQUIRE_FALSE(st.ok());
  MESSAGE(st.message());
  CHECK(st.message() == "port q1: n_rxq 2: the device (driver net_pcap) has at most 1 rx queues");
  CHECK(pc->n_rxq() == 1);
  unsigned got = 0;
  for (int round = 0; round < 50 && got < 10; ++round) {
    std::array<hal::Packet*, hal::kMaxBurst> pkts{};
    const uint16_t k = pc->rx(0, pkts);
    got += k;
    hal::release_burst(std::span<hal::Packet* const>(pkts.data(), k));
  }
  CHECK(got == 10);

  // net_null with RSS: the same configuration, other counts.
  auto n = open_spec("nq", "dpdk:net_null6,n_rxq=2");
  REQUIRE(n->set_queue_count(8, 2).ok());
  CHECK(n->n_rxq() == 8);
  CHECK(n->describe().find("rxq=8 txq=2, rss)") != std::string::npos);
  std::array<hal::Packet*, hal::kMaxBurst> in{};
  for (uint16_t q = 0; q < 8; ++q) {
    const uint16_t k = n->rx(q, in);  // net_null receives empty frames on every queue
    CHECK(k > 0);
    hal::release_burst(std::span<hal::Packet* const>(in.data(), k));
  }
}

TEST_CASE("dpdk: no mbuf leaked once the ports are closed") {
  // Everything the earlier cases received, sent, refused or allocated is back
  // in the pool (16384 mbufs, hal/dpdk/dpdk_backend.h), including what the PMD
  // thread's mempool cache held when it called thread_exit().
  std::vector<hal::Packet*> all(20000);
  const unsigned n = backend().alloc_burst(all);
  CHECK(n == 16384);
  hal::release_burst(std::span<hal::Packet* const>(all.data(), n));
}

TEST_CASE("dpdk: one EAL per process; shutdown") {
  (void)backend();
  auto again = hal::make_dpdk_backend(eal_args());
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == keel::Errc::already_exists);

  auto left_open = open_ok("left", "net_null3");
  backend().shutdown();  // stops the port still open
  backend().shutdown();  // idempotent
  left_open.reset();     // after shutdown: no DPDK call
  auto after = hal::make_dpdk_backend(eal_args());
  REQUIRE_FALSE(after.ok());
  CHECK(after.status().code() == keel::Errc::unavailable);
}

// The sim pcap port and our pcap reader/writer: byte-exact round trips,
// looping, input_state, clear errors for bad files, both byte orders and
// nanosecond files, pool exhaustion, and tx without out=.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hal/sim/pcap_file.h"
#include "keel/hal/backend.h"
#include "sim_test_util.h"

using namespace keel::hal;
using keel::Result;
using Bytes = std::vector<uint8_t>;

namespace {

using keel::test::open_ok;
using keel::test::sim_backend;
using keel::test::TempDir;
using keel::test::try_open;

std::string open_error(Backend& b, const std::string& name, const std::string& spec) {
  auto p = try_open(b, name, spec);
  REQUIRE_FALSE(p.ok());
  return p.status().message();
}

bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// A recognisable frame of `len` bytes: a header-ish prefix and a pattern.
Bytes make_frame(size_t len, uint32_t seed) {
  Bytes f(len);
  for (size_t i = 0; i < len; ++i)
    f[i] = static_cast<uint8_t>((i * 131 + size_t{seed} * 7 + (i >> 8)) & 0xff);
  if (len >= 4) std::memcpy(f.data(), &seed, 4);
  return f;
}

// Sends frames through `port` in bursts of up to kMaxBurst.
void send(Backend& b, Port& port, const std::vector<Bytes>& frames) {
  for (size_t i = 0; i < frames.size(); i += kMaxBurst) {
    size_t n = std::min<size_t>(kMaxBurst, frames.size() - i);
    std::array<Packet*, kMaxBurst> pkts;
    REQUIRE(b.alloc_burst(std::span(pkts).first(n)) == n);
    for (size_t j = 0; j < n; ++j) {
      const Bytes& f = frames[i + j];
      REQUIRE(pkts[j]->set_len(static_cast<uint32_t>(f.size())));
      std::memcpy(pkts[j]->data(), f.data(), f.size());
    }
    CHECK(port.tx(0, std::span<Packet* const>(pkts.data(), n)) == n);
  }
}

// Receives until rx returns nothing (or `limit` frames), releasing the packets.
std::vector<Bytes> receive(Port& port, size_t limit = SIZE_MAX) {
  std::vector<Bytes> out;
  std::array<Packet*, kMaxBurst> pkts;
  while (out.size() < limit) {
    uint16_t n = port.rx(0, std::span(pkts).first(std::min<size_t>(kMaxBurst, limit - out.size())));
    if (n == 0) break;
    for (uint16_t i = 0; i < n; ++i) {
      CHECK(pkts[i]->in_port() == port.id());
      out.emplace_back(pkts[i]->data(), pkts[i]->data() + pkts[i]->len());
      release(pkts[i]);
    }
  }
  return out;
}

void write_file(const std::string& path, const Bytes& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  REQUIRE(f.good());
}

// Builds a pcap file by hand, in either byte order, with either timestamp unit.
struct PcapBuilder {
  bool big_endian = false;
  bool nsec = false;
  uint32_t snaplen = 65535;
  uint32_t linktype = 1;
  Bytes out;

  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) {
      int shift = big_endian ? 24 - 8 * i : 8 * i;
      out.push_back(static_cast<uint8_t>(v >> shift));
    }
  }
  void u16(uint16_t v) {
    out.push_back(uint8_t(big_endian ? v >> 8 : v));
    out.push_back(uint8_t(big_endian ? v : v >> 8));
  }
  PcapBuilder& header() {
    u32(nsec ? 0xa1b23c4d : 0xa1b2c3d4);
    u16(2), u16(4);
    u32(0), u32(0), u32(snaplen), u32(linktype);
    return *this;
  }
  PcapBuilder& record(const Bytes& frame, uint32_t sec = 1700000000, uint32_t frac = 123) {
    return record_raw(frame, static_cast<uint32_t>(frame.size()), sec, frac);
  }
  PcapBuilder& record_raw(const Bytes& frame, uint32_t caplen, uint32_t sec = 1, uint32_t frac = 0) {
    u32(sec), u32(frac), u32(caplen), u32(static_cast<uint32_t>(frame.size()));
    out.insert(out.end(), frame.begin(), frame.end());
    return *this;
  }
};

}  // namespace

TEST_CASE("pcap out then pcap in: frames of 60..1514 bytes are byte-exact") {
  TempDir dir;
  auto b = sim_backend();
  const std::string path = dir.file("out.pcap");

  std::vector<Bytes> frames;
  for (size_t len = 60; len <= 1514; ++len) frames.push_back(make_frame(len, static_cast<uint32_t>(len)));

  uint64_t t0 = sim::wall_clock_ns();
  {
    auto w = open_ok(*b, "w0", "pcap:out=" + path);
    CHECK(w->describe() == "pcap out=" + path);
    CHECK(w->input_state() == InputState::live);
    send(*b, *w, frames);
    PortCounters c = w->counters();
    CHECK(c.tx_packets == frames.size());
    CHECK(c.tx_dropped == 0);
    uint64_t bytes = 0;
    for (const Bytes& f : frames) bytes += f.size();
    CHECK(c.tx_bytes == bytes);
    w->stop();
    w->stop();  // idempotent
    // After stop, tx takes nothing: the frames are dropped and counted.
    Packet* late;
    REQUIRE(b->alloc_burst(std::span(&late, 1)) == 1);
    CHECK(w->tx(0, std::span(&late, 1)) == 0);
    CHECK(w->counters().tx_dropped == 1);
  }
  uint64_t t1 = sim::wall_clock_ns();

  // The file is exactly header + (16 + len) per frame.
  size_t expect = 24;
  for (const Bytes& f : frames) expect += 16 + f.size();
  CHECK(std::filesystem::file_size(path) == expect);

  // Our reader: our byte order, microseconds, real timestamps.
  auto r = sim::PcapReader::open(path, kBufferSize);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  CHECK_FALSE(r->nanosecond());
  CHECK_FALSE(r->swapped());
  REQUIRE(r->size() == frames.size());
  CHECK(r->timestamp_ns(0) + 1000 >= t0);  // microsecond resolution
  CHECK(r->timestamp_ns(r->size() - 1) <= t1);

  // Replayed through a pcap in= port.
  auto p = open_ok(*b, "r0", "pcap:in=" + path);
  p->set_id(7);
  CHECK(p->input_state() == InputState::pending);
  std::vector<Bytes> got = receive(*p);
  CHECK(p->input_state() == InputState::drained);
  REQUIRE(got.size() == frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    if (got[i] != frames[i]) FAIL_CHECK("frame " << i << " (" << frames[i].size() << " bytes) differs");
  }
  CHECK(p->counters().rx_packets == frames.size());
  CHECK(p->counters().rx_dropped == 0);
}

TEST_CASE("the writer flushes in its destructor without stop()") {
  TempDir dir;
  auto b = sim_backend();
  const std::string path = dir.file("d.pcap");
  {
    auto w = open_ok(*b, "w0", "pcap:out=" + path);
    send(*b, *w, {make_frame(100, 1), make_frame(200, 2)});
  }
  CHECK(std::filesystem::file_size(path) == 24 + 116 + 216);
}

TEST_CASE("loop=3 replays three times, then drained; loop=0 never drains") {
  TempDir dir;
  auto b = sim_backend();
  const std::string path = dir.file("in.pcap");
  PcapBuilder pb;
  pb.header();
  std::vector<Bytes> frames;
  for (uint32_t i = 0; i < 45; ++i) {  // not a multiple of the burst size
    frames.push_back(make_frame(64 + i, i));
    pb.record(frames.back());
  }
  write_file(path, pb.out);

  auto p = open_ok(*b, "p0", "pcap:in=" + path + ",loop=3");
  CHECK(p->describe() == "pcap in=" + path + " loop=3");
  CHECK(p->input_state() == InputState::pending);
  std::vector<Bytes> got = receive(*p, 3 * frames.size() - 1);
  CHECK(p->input_state() == InputState::pending);  // one record left
  std::vector<Bytes> last = receive(*p);
  CHECK(last.size() == 1);
  got.insert(got.end(), last.begin(), last.end());
  CHECK(p->input_state() == InputState::drained);
  REQUIRE(got.size() == 3 * frames.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == frames[i % frames.size()]);
  std::array<Packet*, kMaxBurst> pkts;
  CHECK(p->rx(0, pkts) == 0);  // stays drained

  // Without a limit the bursts cross loop boundaries; the last loop ends exactly.
  auto again = open_ok(*b, "p3", "pcap:in=" + path + ",loop=3");
  CHECK(receive(*again).size() == 3 * frames.size());
  CHECK(again->input_state() == InputState::drained);

  auto f = open_ok(*b, "p1", "pcap:in=" + path + ",loop=0");
  got = receive(*f, 10 * frames.size() + 3);
  CHECK(got.size() == 10 * frames.size() + 3);
  CHECK(got.back() == frames[2]);
  CHECK(f->input_state() == InputState::pending);

  // An empty capture is drained from the start.
  const std::string empty = dir.file("empty.pcap");
  write_file(empty, PcapBuilder{}.header().out);
  auto e = open_ok(*b, "p2", "pcap:in=" + empty + ",loop=0");
  CHECK(e->input_state() == InputState::drained);
  CHECK(e->rx(0, pkts) == 0);
}

TEST_CASE("nanosecond and big-endian files are read") {
  TempDir dir;
  auto b = sim_backend();
  const std::vector<Bytes> frames = {make_frame(60, 1), make_frame(1514, 2), make_frame(333, 3)};
  for (bool big : {false, true}) {
    for (bool nsec : {false, true}) {
      CAPTURE(big);
      CAPTURE(nsec);
      PcapBuilder pb;
      pb.big_endian = big;
      pb.nsec = nsec;
      pb.header();
      for (const Bytes& f : frames) pb.record(f, 1700000000, 999);
      const std::string path = dir.file(std::string("f") + (big ? "b" : "l") + (nsec ? "n" : "u"));
      write_file(path, pb.out);

      auto r = sim::PcapReader::open(path, kBufferSize);
      REQUIRE_MESSAGE(r.ok(), r.status().message());
      CHECK(r->nanosecond() == nsec);
      CHECK(r->swapped() == (big == (std::endian::native == std::endian::little)));
      CHECK(r->timestamp_ns(0) == 1700000000ull * 1'000'000'000 + (nsec ? 999 : 999'000));

      auto p = open_ok(*b, "p0", "pcap:in=" + path);
      CHECK(receive(*p) == frames);
    }
  }
}

TEST_CASE("pcap open errors are clear") {
  TempDir dir;
  auto b = sim_backend();

  // Missing file: strerror, the file, the port.
  const std::string missing = dir.file("nope.pcap");
  CHECK(open_error(*b, "p0", "pcap:in=" + missing) ==
        "port p0: pcap file '" + missing + "': No such file or directory");
  CHECK(has(open_error(*b, "p0", "pcap:out=" + dir.file("no/such/dir.pcap")), "No such file or directory"));

  // Not a pcap.
  const std::string garbage = dir.file("garbage.pcap");
  write_file(garbage, Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '!',
                            '!', '!', '!', '!', '!', '!', '!', '!', '!', '!', '!', '!', '!'});
  CHECK(open_error(*b, "p0", "pcap:in=" + garbage) ==
        "port p0: pcap file '" + garbage + "': not a pcap file (magic 0x68656c6c as written)");

  // pcapng says so.
  const std::string ng = dir.file("ng.pcapng");
  write_file(ng, Bytes{0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0,    0,    0,    0x4d, 0x3c, 0x2b, 0x1a, 1, 0,
                       0,    0,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1c, 0,    0, 0});
  CHECK(has(open_error(*b, "p0", "pcap:in=" + ng), "is pcapng"));

  // Truncated global header, and an empty file.
  const std::string shortf = dir.file("short.pcap");
  Bytes hdr = PcapBuilder{}.header().out;
  write_file(shortf, Bytes(hdr.begin(), hdr.begin() + 10));
  CHECK(has(open_error(*b, "p0", "pcap:in=" + shortf),
            "truncated pcap header (the file has 10 bytes, the header needs 24)"));
  write_file(shortf, {});
  CHECK(has(open_error(*b, "p0", "pcap:in=" + shortf), "the file has 0 bytes"));

  // Not Ethernet.
  PcapBuilder raw;
  raw.linktype = 101;
  write_file(shortf, raw.header().out);
  CHECK(has(open_error(*b, "p0", "pcap:in=" + shortf), "link type 101 is not Ethernet"));

  // Record 3's data runs past the end of the file.
  const std::string trunc = dir.file("trunc.pcap");
  PcapBuilder t;
  t.header().record(make_frame(60, 1)).record(make_frame(70, 2)).record(make_frame(80, 3));
  t.out.resize(t.out.size() - 30);
  write_file(trunc, t.out);
  size_t off3 = 24 + 16 + 60 + 16 + 70;
  CHECK(open_error(*b, "p0", "pcap:in=" + trunc) ==
        "port p0: pcap file '" + trunc + "': record 3 at offset " + std::to_string(off3) +
            ": caplen 80 runs past the end of the file (50 bytes left)");

  // Record 2's header is cut.
  PcapBuilder t2;
  t2.header().record(make_frame(60, 1));
  t2.out.insert(t2.out.end(), {1, 2, 3, 4, 5});
  write_file(trunc, t2.out);
  CHECK(has(open_error(*b, "p0", "pcap:in=" + trunc),
            "record 2 at offset 100: truncated record header (5 of 16 bytes"));

  // A record larger than the largest frame (MTU 9216 + Ethernet header +
  // two VLAN tags), and one larger than the snaplen.
  PcapBuilder big;
  big.header().record(make_frame(60, 1)).record(make_frame(kMaxFrameLen + 1, 2));
  write_file(trunc, big.out);
  CHECK(has(open_error(*b, "p0", "pcap:in=" + trunc),
            "record 2 at offset 100: caplen 9239 exceeds the 9238-byte largest frame a port carries"));
  PcapBuilder snap;
  snap.snaplen = 64;
  snap.header().record(make_frame(100, 1));
  write_file(trunc, snap.out);
  CHECK(has(open_error(*b, "p0", "pcap:in=" + trunc),
            "record 1 at offset 24: caplen 100 exceeds the file's snaplen 64"));

  // A directory.
  CHECK(has(open_error(*b, "p0", "pcap:in=" + dir.file("")), "is a directory"));
}

TEST_CASE("pool exhaustion: rx returns fewer, loses nothing, resumes in order") {
  TempDir dir;
  constexpr unsigned kBuffers = 10;
  auto b = sim_backend(kBuffers);
  const std::string path = dir.file("in.pcap");
  PcapBuilder pb;
  pb.header();
  std::vector<Bytes> frames;
  for (uint32_t i = 0; i < 25; ++i) {
    frames.push_back(make_frame(60 + i, i));
    pb.record(frames.back());
  }
  write_file(path, pb.out);
  auto p = open_ok(*b, "p0", "pcap:in=" + path);

  std::vector<Bytes> got;
  std::array<Packet*, kMaxBurst> pkts;
  while (p->input_state() == InputState::pending) {
    uint16_t n = p->rx(0, pkts);
    REQUIRE(n <= kBuffers);
    REQUIRE(n > 0);
    // With every buffer held, the port has nothing to give.
    if (n == kBuffers) CHECK(p->rx(0, std::span(pkts).subspan(n)) == 0);
    for (uint16_t i = 0; i < n; ++i) {
      got.emplace_back(pkts[i]->data(), pkts[i]->data() + pkts[i]->len());
      release(pkts[i]);
    }
  }
  CHECK(got == frames);
  CHECK(p->counters().rx_dropped == 0);
  CHECK(p->counters().rx_packets == frames.size());
}

TEST_CASE("pcap without out= drops tx; without in= receives nothing") {
  TempDir dir;
  auto b = sim_backend();
  const std::string path = dir.file("in.pcap");
  write_file(path, PcapBuilder{}.header().record(make_frame(64, 1)).out);

  auto in_only = open_ok(*b, "p0", "pcap:in=" + path);
  send(*b, *in_only, {});  // nothing
  std::array<Packet*, 3> pkts;
  REQUIRE(b->alloc_burst(pkts) == 3);
  for (Packet* p : pkts) REQUIRE(p->set_len(64));
  CHECK(in_only->tx(0, pkts) == 0);
  CHECK(in_only->counters().tx_dropped == 3);
  CHECK(in_only->counters().tx_packets == 0);
  CHECK(in_only->link().up);
  CHECK(in_only->link().speed_mbps == 10000);
  CHECK(in_only->n_rxq() == 1);
  CHECK(in_only->n_txq() == 1);
  CHECK(in_only->kind() == "pcap");
  CHECK(in_only->name() == "p0");

  auto out_only = open_ok(*b, "p1", "pcap:out=" + dir.file("o.pcap"));
  std::array<Packet*, kMaxBurst> rx;
  CHECK(out_only->rx(0, rx) == 0);
  CHECK(out_only->input_state() == InputState::live);

  // in= and out= together, and the same file: the old contents are replayed.
  auto both = open_ok(*b, "p2", "pcap:in=" + path + ",out=" + path + ",loop=2");
  CHECK(both->describe() == "pcap in=" + path + " out=" + path + " loop=2");
  std::vector<Bytes> got = receive(*both);
  CHECK(got.size() == 2);
  CHECK(got[0] == make_frame(64, 1));
}

TEST_CASE("counters sum and clear") {
  TempDir dir;
  auto b = sim_backend();
  auto w = open_ok(*b, "w0", "pcap:out=" + dir.file("c.pcap"));
  send(*b, *w, {make_frame(100, 1), make_frame(50, 2)});
  w->count_rx_dropped(0, 5);
  PortCounters c = w->counters();
  CHECK(c.tx_packets == 2);
  CHECK(c.tx_bytes == 150);
  CHECK(c.rx_dropped == 5);
  w->clear_counters();
  c = w->counters();
  CHECK(c.tx_packets == 0);
  CHECK(c.tx_bytes == 0);
  CHECK(c.rx_dropped == 0);
}

TEST_CASE("an offline replay: input kind, the next record's timestamp, records before a time, looped stamps") {
  TempDir dir;
  auto b = sim_backend();
  const std::string path = dir.file("ts.pcap");
  PcapBuilder pb;
  pb.header();
  // Stamps 10 s + 0, 100, 100, 300 us: two equal ones in the middle.
  const uint32_t us[] = {0, 100, 100, 300};
  for (uint32_t i = 0; i < 4; ++i) pb.record(make_frame(64, i), 10, us[i]);
  write_file(path, pb.out);
  const uint64_t t0 = 10'000'000'000ull;

  CHECK(open_ok(*b, "o", "pcap:out=" + dir.file("o.pcap"))->input_kind() == Port::InputKind::none);
  CHECK(open_ok(*b, "f", "pcap:in=" + path + ",loop=0")->input_kind() == Port::InputKind::live);
  auto p = open_ok(*b, "p0", "pcap:in=" + path + ",loop=2");
  CHECK(p->input_kind() == Port::InputKind::finite_replay);

  CHECK(p->next_rx_timestamp_ns(0) == t0);
  CHECK(p->rx_records_before(0, t0, false, 32) == 0);
  CHECK(p->rx_records_before(0, t0, true, 32) == 1);
  CHECK(p->rx_records_before(0, t0 + 100'000, false, 32) == 1);
  CHECK(p->rx_records_before(0, t0 + 100'000, true, 32) == 3);  // both equal stamps
  CHECK(p->rx_records_before(0, t0 + 100'000, true, 2) == 2);   // at most max
  // The second loop comes 300 us + 1 ns after the first (the span + 1 ns).
  const uint64_t loop2 = t0 + 300'001;
  CHECK(p->rx_records_before(0, loop2, false, 32) == 4);
  CHECK(p->rx_records_before(0, loop2, true, 32) == 5);
  CHECK(p->rx_records_before(0, ~uint64_t{0} - 1, true, 32) == 8);  // no further than the last loop

  CHECK(receive(*p, 3).size() == 3);
  CHECK(p->next_rx_timestamp_ns(0) == t0 + 300'000);
  CHECK(receive(*p, 2).size() == 2);
  CHECK(p->next_rx_timestamp_ns(0) == loop2 + 100'000);
  CHECK(receive(*p).size() == 3);
  CHECK(p->input_state() == InputState::drained);
  CHECK(p->next_rx_timestamp_ns(0) == Port::kNoRecord);
  CHECK(p->rx_records_before(0, ~uint64_t{0} - 1, true, 32) == 0);
}

// Fuzz target: pcap files, as the sim backend reads them (hal/sim/pcap_file.h,
// the pcap port of `--port NAME=pcap:in=FILE`).
//
// The input is the file (in a memfd, opened by its /proc/self/fd path).
// PcapReader either refuses it with a message naming the file, or accepts
// it, and then:
//   * its records tile the file exactly (24-byte header, then per record a
//     16-byte header and caplen bytes), every frame at most the file's
//     snaplen (when set) and kMaxFrameLen, each read whole from a copy of
//     its own size (so ASan sees any overread of rss_hash_frame);
//   * the frames written back with PcapWriter read back identical, with
//     the timestamps at microsecond precision;
//   * a pcap port replaying it twice (loop=2) over 1..4 rx queues (the last
//     input byte picks) hands out every record twice: with one queue in
//     file order, unhashed; with several, each queue in file order, every
//     record on the queue its RSS hash picks (queue 0 without one) with
//     that hash -- and then reports its input drained.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "hal/sim/pcap_file.h"
#include "keel/hal/backend.h"
#include "keel/hal/packet.h"
#include "keel/hal/port_spec.h"
#include "keel/hal/rss.h"

using namespace keel;
using namespace keel::hal;
using Bytes = std::vector<uint8_t>;
using keel::fuzz::check;
using keel::fuzz::MemFile;

namespace {

Backend& backend() {
  // A small pool: 64 standard buffers and 8 jumbo ones are plenty for
  // bursts that are released at once.
  static Backend* b = [] {
    auto r = make_sim_backend(SimOptions{.buffers = 64, .jumbo_buffers = 8, .offload_flows = 0});
    if (!r.ok()) abort();
    return r.value().release();
  }();
  return *b;
}

// Receives everything queue `q` hands out, as (bytes, has hash, hash).
struct Rx {
  Bytes bytes;
  bool hashed;
  uint32_t hash;
};
std::vector<Rx> drain(Port& port, uint16_t q) {
  std::vector<Rx> out;
  std::array<Packet*, kMaxBurst> pkts;
  for (;;) {
    const uint16_t n = port.rx(q, pkts);
    if (n == 0) break;
    for (uint16_t i = 0; i < n; ++i) {
      out.push_back({Bytes(pkts[i]->data(), pkts[i]->data() + pkts[i]->len()), pkts[i]->has_rss_hash(),
                     pkts[i]->rss_hash()});
      release(pkts[i]);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const MemFile in{std::span<const uint8_t>(data, size)};
  auto r = sim::PcapReader::open(in.path, kMaxFrameLen);
  if (!r.ok()) {
    check(r.status().message().find(in.path) != std::string::npos, "the error does not name the file");
    return 0;
  }
  const sim::PcapReader& reader = r.value();

  // The records tile the file; each frame read from a copy of its size.
  size_t covered = sim::kPcapFileHeaderLen;
  std::vector<Bytes> frames;
  for (size_t i = 0; i < reader.size(); ++i) {
    const auto f = reader.frame(i);
    check(f.size() <= kMaxFrameLen && (reader.snaplen() == 0 || f.size() <= reader.snaplen()),
          "frame too long");
    covered += sim::kPcapRecordHeaderLen + f.size();
    frames.emplace_back(f.begin(), f.end());
  }
  check(covered == size, "the records do not cover the file");

  // Written back and read again: the same frames, timestamps to the µs.
  {
    const MemFile out;
    auto w = sim::PcapWriter::create(out.path);
    check(w.ok(), "PcapWriter::create failed");
    for (size_t i = 0; i < reader.size(); ++i)
      check(w.value()->write(reader.frame(i), reader.timestamp_ns(i)), "write failed");
    check(w.value()->close().ok(), "close failed");
    auto back = sim::PcapReader::open(out.path, kMaxFrameLen);
    check(back.ok() && back->size() == reader.size(), "the written file does not read back");
    for (size_t i = 0; i < reader.size(); ++i) {
      const auto a = reader.frame(i), b = back->frame(i);
      check(a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin()), "a frame changed");
      const uint64_t ts = reader.timestamp_ns(i);
      if (ts / 1'000'000'000u <= UINT32_MAX)  // seconds the writer's 32-bit field holds
        check(back->timestamp_ns(i) == ts / 1000 * 1000, "a timestamp changed");
    }
  }

  // Replayed by a pcap port, twice, over 1..4 queues.
  const uint16_t n_rxq = size ? 1 + data[size - 1] % 4 : 1;
  auto spec = parse_port_spec("p0", "pcap:in=" + in.path + ",loop=2,rxq=" + std::to_string(n_rxq));
  check(spec.ok(), "port spec refused");
  auto port = backend().open_port(spec.value(), 1, 1);
  check(port.ok(), "a pcap port refused a file the reader accepted");
  std::vector<std::vector<Rx>> got(n_rxq);
  for (uint16_t q = 0; q < n_rxq; ++q) got[q] = drain(*port.value(), q);
  check(port.value()->input_state() == InputState::drained, "not drained");
  // What each record should be on: its queue, its hash.
  RssReta reta(n_rxq);
  std::vector<size_t> next(n_rxq, 0);
  for (int loop = 0; loop < 2; ++loop) {
    for (const Bytes& f : frames) {
      auto copy = std::make_unique<uint8_t[]>(std::max<size_t>(f.size(), 1));
      if (!f.empty()) std::memcpy(copy.get(), f.data(), f.size());
      uint32_t hash = 0;
      const bool hashed = n_rxq > 1 && rss_hash_frame(copy.get(), static_cast<uint32_t>(f.size()), hash);
      const uint16_t q = hashed ? reta.queue_for(hash) : 0;
      check(next[q] < got[q].size(), "a record is missing");
      const Rx& rx = got[q][next[q]++];
      check(rx.bytes == f, "a record changed or came out of order");
      check(rx.hashed == hashed && (!hashed || rx.hash == hash), "wrong RSS hash");
    }
  }
  for (uint16_t q = 0; q < n_rxq; ++q) check(next[q] == got[q].size(), "a record came out too often");
  return 0;
}

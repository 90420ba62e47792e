// Fuzz target: the packet parser on arbitrary frames.
//
// The input is the frame. It is parsed (1) in place with parse_frame — the
// fuzzer's buffer has exactly the input's length, so ASan reports any read
// past the end — and (2) from a sim-pool hal::Packet (length clamped to the
// buffer) with the datapath's single-packet and burst entry points, once
// with plain and once with tunnel/recirculation metadata. Checks:
//   * parsing is deterministic: every path yields the same miniflow and
//     offsets for the same bytes;
//   * the miniflow has at most kMiniflowMaxWords words, only words the
//     parser may push, metadata words exactly as given, and metadata does
//     not change the packet's words;
//   * offsets are ordered and inside the frame; the hash is miniflow_hash.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "flow/flow_hash.h"
#include "hal/sim/pool.h"
#include "keel/hal/packet.h"
#include "packet/parser.h"

using namespace keel;
using namespace keel::packet;

namespace {

void check(bool ok) {
  if (!ok) abort();
}

hal::sim::Pool& pool() {
  static std::shared_ptr<hal::sim::Pool> p = hal::sim::Pool::create(4).value();
  return *p;
}

// Words a parsed packet may hold: tunnel 0-7, metadata 48-50, L2 59-61, L3/L4 64-74.
constexpr flow::FlowMap kParserWords{0xffull | (0x7ull << 48) | (0x7ull << 59), (1ull << 11) - 1};

void check_shape(const flow::Miniflow& mf, const LayerOffsets& ofs, uint32_t len) {
  check(mf.n_words() <= flow::kMiniflowMaxWords);
  check(kParserWords.contains(mf.map));
  check(mf.map.test(KEEL_FLOW_WORD(in_port)));
  const uint32_t n = std::min(len, kMaxParsedLen);
  uint32_t last = 0;
  for (uint16_t o : {ofs.l2, ofs.l2_5, ofs.l3, ofs.l4, ofs.payload}) {
    if (o == LayerOffsets::kNone) continue;
    check(o >= last && o <= n);
    last = o;
  }
  check(ofs.l2_pad <= n);
  // No L3 words without L2, no L4 words without L3.
  if (!mf.map.test(KEEL_FLOW_WORD(dl_dst)))
    check((mf.map.u0 >> KEEL_FLOW_WORD(regs)) == 0 && mf.map.u1 == 0 && ofs.l2 == LayerOffsets::kNone);
  if (mf.map.test(KEEL_FLOW_WORD(tp_src))) check(mf.map.test(KEEL_FLOW_WORD(nw_proto)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto len = static_cast<uint32_t>(std::min<size_t>(size, hal::kBufferSize));

  // (1) In place, plain metadata.
  PacketMetadata plain;
  plain.in_port = 1;
  flow::Miniflow mf;
  LayerOffsets ofs;
  const bool ok = parse_frame(data, len, plain, mf, ofs);
  check_shape(mf, ofs, len);

  // Deterministic.
  flow::Miniflow mf2;
  LayerOffsets ofs2;
  check(parse_frame(data, len, plain, mf2, ofs2) == ok);
  check(mf == mf2 && ofs == ofs2);

  // (2) From a pool packet: single and burst entry points agree with (1).
  hal::Packet* p = pool().alloc();
  check(p != nullptr);
  std::memcpy(p->data(), data, len);
  check(p->set_len(len));
  p->set_in_port(1);
  ParsedPacket one;
  check(parse(*p, one) == ok);
  check(one.key == mf && one.ofs == ofs && one.malformed == !ok);
  check(one.hash == flow::miniflow_hash(one.key));

  ParsedPacket burst[2];
  hal::Packet* pkts[2] = {p, p};
  ParserCounters counters;
  check(parse_burst(pkts, burst, counters) == (ok ? 0u : 2u));
  check(burst[0].key == mf && burst[1].key == mf && burst[0].hash == one.hash);
  check(counters.read().packets == 2);

  // With a tunnel, marks and a recirculation id: the same packet words,
  // metadata words exactly as given.
  PacketMetadata md;
  md.in_port = 7;
  md.recirc_id = 3;
  md.skb_priority = 1;
  md.dp_hash = 0xabcd;
  md.tunnel.tun_id = 42;
  md.tunnel.ipv4_dst = 0x01020304;
  md.tunnel.tp_dst = 0xb512;
  ParsedPacket tnl;
  check(parse(*p, md, tnl) == ok);
  check_shape(tnl.key, tnl.ofs, len);
  check(tnl.ofs == ofs);
  flow::FlowKey k1, k2;
  flow::expand(mf, k1);
  flow::expand(tnl.key, k2);
  check(std::memcmp(&k1.dl_dst, &k2.dl_dst, sizeof k1 - offsetof(flow::FlowKey, dl_dst)) == 0);
  check(k2.tun_id == 42 && k2.tun_ipv4_dst == 0x01020304 && k2.tun_tp_dst == 0xb512);
  check(k2.in_port == 7 && k2.recirc_id == 3 && k2.skb_priority == 1 && k2.dp_hash == 0xabcd);
  check(tnl.key.n_words() == mf.n_words() + 8 + 2);

  // Every present word reads back through the expanded key.
  unsigned i = 0;
  tnl.key.map.for_each([&](unsigned w) { check(k2.words()[w] == tnl.key.values[i++]); });

  // (3) The other vlan-limits (above: the default, 1): every entry point
  // agrees with parse_frame under the same limit; a frame without a second
  // TPID at offset 16 keys the same under every limit.
  const bool two_tpids = len >= 18 && (load<be16>(data + 16) == be16_const(kEthTypeVlan) ||
                                       load<be16>(data + 16) == be16_const(kEthTypeQinQ));
  for (unsigned limit : {0u, 2u}) {
    flow::Miniflow ml;
    LayerOffsets ol;
    const bool okl = parse_frame(data, len, plain, ml, ol, limit);
    check_shape(ml, ol, len);
    ParsedPacket pl;
    check(parse(*p, pl, limit) == okl);
    check(pl.key == ml && pl.ofs == ol);
    check(parse_burst(pkts, burst, counters, limit) == (okl ? 0u : 2u));
    check(burst[0].key == ml);
    if (!two_tpids) check(ml == mf && ol == ofs && okl == ok);
  }

  hal::release(p);
  return 0;
}

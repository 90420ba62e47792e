// Fuzz target: LACPDU parsing (ofproto/lacp.h) on arbitrary bytes never
// reads past the frame (the input is copied into a buffer of its exact
// size, so ASan sees any overread) or crashes; what parse_lacpdu accepts
// composes back into a frame that parses to the same PDU; and a Lacp bond
// fed the bytes on one of its members (the first byte picks which, and how
// far its clock moves) accepts exactly what parse_lacpdu accepts, counts
// every other frame as bad or marker, and keeps running and printing.
//
// The input is also read as a sequence of records — member (1 byte), clock
// step in 100 ms (1 byte), carrier up/down (1 byte, bit 0), length (1 byte),
// then that many bytes of LACPDU body after a fixed Ethernet header — fed
// to a 3-member bond, so the machines see arbitrary partners one after
// another. After every record: a member that may be enabled is attached;
// every attached member hears the same partner system and key (the
// aggregation rule), never its own system id; the actor says synchronized
// exactly when attached.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "ofproto/lacp.h"

using namespace keel;
using namespace keel::ofproto;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto buf = std::make_unique<uint8_t[]>(size ? size : 1);
  if (size) std::memcpy(buf.get(), data, size);
  const std::span<const uint8_t> frame(buf.get(), size);

  const auto pdu = parse_lacpdu(frame);
  if (pdu) {
    const auto again = parse_lacpdu(compose_lacpdu(*pdu, flow::EthAddr{{2, 0, 0, 0, 0, 1}}));
    if (!again || !(again->actor == pdu->actor) || !(again->partner == pdu->partner)) abort();
  }

  static const auto bond = [] {
    LacpSettings s;
    s.name = "bond0";
    s.sys_id = flow::EthAddr{{0xaa, 0x55, 0xaa, 0x55, 0, 0}};
    s.fast = true;
    std::vector<LacpMemberSettings> ms(2);
    ms[0].name = "p1";
    ms[0].port_id = 1;
    ms[1].name = "p2";
    ms[1].port_id = 2;
    return std::make_pair(s, ms);
  }();
  Lacp lacp(bond.first, bond.second);
  std::vector<LacpTx> tx;
  lacp.run(0, tx);
  const size_t member = size ? data[0] & 1 : 0;
  const uint64_t later = size ? 100ull * (data[size - 1] % 128) : 0;
  const bool ok = lacp.process_packet(member, frame, 50);
  if (ok != pdu.has_value()) abort();
  lacp.run(later + 100, tx);
  const auto v = lacp.view();
  const auto& c = v.members[member].counters;
  if (c.rx_pdus != 1 || c.rx_bad + c.rx_marker + (ok ? 1 : 0) != 1) abort();
  if (format_lacp_show(v).empty() || format_lacp_stats(v).empty()) abort();
  (void)lacp.status();
  (void)lacp.may_enable(member);

  LacpSettings s3 = bond.first;
  s3.fallback_ab = size && (data[0] & 2);
  s3.active = !(size && (data[0] & 4));
  std::vector<LacpMemberSettings> ms3 = bond.second;
  ms3.push_back(ms3[1]);
  ms3[2].name = "p3";
  ms3[2].port_id = 3;
  Lacp seq(s3, ms3);
  uint64_t now = 0;
  size_t at = 1;
  while (at + 4 <= size) {
    const size_t m = data[at] % 3;
    now += 100ull * data[at + 1];
    const bool up = data[at + 2] & 1;
    const size_t len = data[at + 3];
    at += 4;
    const size_t take = len < size - at ? len : size - at;
    std::vector<uint8_t> f(14 + take);
    std::memcpy(f.data(), kLacpDstMac.b, 6);
    f[12] = 0x88;
    f[13] = 0x09;
    if (take) std::memcpy(f.data() + 14, data + at, take);
    at += take;
    seq.set_carrier(m, up, now);
    seq.process_packet(m, f, now);
    tx.clear();
    seq.run(now, tx);
    const auto sv = seq.view();
    const LacpMemberView* first = nullptr;
    for (size_t i = 0; i < sv.members.size(); ++i) {
      const auto& mv = sv.members[i];
      if (seq.may_enable(i) && !mv.attached) abort();
      if (((mv.actor.state & kLacpStateSync) != 0) != mv.attached) abort();
      if (!mv.attached) continue;
      if (mv.partner.sys_id == s3.sys_id) abort();
      if (first && (!(first->partner.sys_id == mv.partner.sys_id) || first->partner.key != mv.partner.key)) abort();
      if (!first) first = &mv;
    }
  }
  return 0;
}

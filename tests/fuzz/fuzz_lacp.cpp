// Fuzz target: LACPDU parsing (ofproto/lacp.h) on arbitrary bytes never
// reads past the frame (the input is copied into a buffer of its exact
// size, so ASan sees any overread) or crashes; what parse_lacpdu accepts
// composes back into a frame that parses to the same PDU; and a Lacp bond
// fed the bytes on one of its members (the first byte picks which, and how
// far its clock moves) accepts exactly what parse_lacpdu accepts, counts
// every other frame as bad or marker, and keeps running and printing.
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
  return 0;
}

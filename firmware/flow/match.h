// Match — a FlowKey value and a FlowKey mask: what a rule or a megaflow
// matches.
//
// A 1 bit in `mask` means "this bit of the packet's key must equal the same
// bit of `key`"; a 0 bit is wildcarded. `key` is always already masked
// (key & mask == key), so two matches that match the same packets compare
// equal byte for byte. Both text syntaxes produce Matches: the datapath flow
// syntax (dp_flow_syntax.h, `dpctl/dump-flows`) and the OpenFlow match syntax
// (of_match_syntax.h, `ovs-ofctl add-flow`). The fast path turns a Match into
// two Miniflows (compress() in miniflow.h) for a dpcls subtable.
//
// Field conventions are those of FlowKey (flow_key.h): packet header fields
// in network byte order, metadata in host order. Two encodings the syntaxes
// agree on, chosen so that a rule and the megaflow derived from it compare
// equal:
//   * ICMP/ICMPv6 type and code live in the low byte of tp_src / tp_dst
//     (htons(type)); an exact match masks htons(0x00ff), as an Open vSwitch
//     megaflow does (the high byte is always zero in a packet's key).
//   * The ARP opcode lives in nw_proto (8 bits), exact mask 0xff.
//
// Thread-safety: a plain value type.
#pragma once

#include <cstdint>

#include "flow/flow_key.h"

namespace keel::flow {

struct Match {
  FlowKey key{};   // always key & mask
  FlowKey mask{};  // 1 bits are matched

  bool operator==(const Match& o) const { return key == o.key && mask == o.mask; }

  // key &= mask, word by word.
  void apply_mask() {
    uint64_t* k = key.words();
    const uint64_t* m = mask.words();
    for (unsigned i = 0; i < kFlowWords; ++i) k[i] &= m[i];
  }

  // Matches every packet?
  bool is_catchall() const {
    const uint64_t* m = mask.words();
    for (unsigned i = 0; i < kFlowWords; ++i)
      if (m[i]) return false;
    return true;
  }
};

}  // namespace keel::flow

#include "flow/flow_hash.h"

namespace keel::flow {

uint32_t hash_l4(const Miniflow& key, uint32_t basis) noexcept {
  uint32_t h = basis;
  h = hash_add64(h, key.get(KEEL_FLOW_WORD(nw_src)));                   // IPv4 src/dst
  for (unsigned w = KEEL_FLOW_WORD(ipv6_src); w < KEEL_FLOW_WORD(ipv6_label); ++w)
    h = hash_add64(h, key.get(w));                                       // IPv6 src/dst
  // nw_proto is the top byte of word 69 (little-endian layout: byte 7).
  h = hash_add64(h, key.get(KEEL_FLOW_WORD(ipv6_label)) >> 56);
  h = hash_add64(h, key.get(KEEL_FLOW_WORD(tp_src)) & 0xffffffffu);     // ports
  return hash_finish(h, 40);
}

}  // namespace keel::flow

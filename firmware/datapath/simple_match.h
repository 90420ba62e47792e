// SimpleMatch — the classifier-free path for ports whose megaflows all match
// only what every packet's first bytes say: in_port, recirc_id 0, the
// EtherType, one VLAN tag and the IP fragment bits. Open vSwitch 3.1 has the
// same idea ("simple match"): a port that only cross-connects, or switches by
// VLAN, should not pay for a full parse, a miniflow and the EMC.
//
// A megaflow is *simple* when its mask touches nothing but in_port and
// recirc_id (both exact, recirc_id 0), dl_type, vlans[0] (TPID and TCI, any
// bits), vlans[1] only as "no second tag", and nw_frag, and its actions are outputs (or drop): the executor
// then needs no layer offsets. A port is on the simple path while every
// megaflow of the port in this PMD's table is simple and there are at most
// kMaxPerPort of them (a linear check of a few 64-bit words).
//
// The packet side: quick_key() reads the EtherType, at most one VLAN tag,
// and for clean IPv4 / IPv6 headers the fragment bits and the TCP flags
// (for the megaflow's statistics). It answers only when its result is
// certainly the key the full parser would produce: a second VLAN tag, an
// 802.3 frame, a truncated or malformed IP header, IPv6 extension headers...
// make it decline, and that packet takes the full path (parse -> EMC -> SMC
// -> dpcls), where the same megaflows are found. A packet no simple flow
// matches takes the full path too, so a miss is handled in one place.
//
// Thread-safety: owned by one PMD (inside its FlowTable), its only reader
// and writer.
#pragma once

#include <array>
#include <cstdint>

#include "datapath/megaflow.h"
#include "flow/dp_actions.h"
#include "packet/parser.h"

namespace keel::datapath {

// The fields a simple flow may match, packed: dl_type (be16) in bits 0-15,
// vlans[0].tpid 16-31, vlans[0].tci (with the CFI "present" bit, as the
// parser keys it) 32-47, nw_frag 48-55.
using SimpleKey = uint64_t;

struct SimpleQuick {
  SimpleKey key;
  uint16_t tcp_flags;  // host order; 0 unless TCP
  packet::LayerOffsets ofs;
};

// The simple key of a frame (see above); false: use the full path.
bool quick_key(const uint8_t* frame, uint32_t len, SimpleQuick* out) noexcept;

// Whether a megaflow is simple; if so, its packed value and mask.
bool simple_flow(const Megaflow& f, SimpleKey* value, SimpleKey* mask);

// Whether an action list needs nothing but the packet (outputs and drop).
bool outputs_only(const flow::DpActions& actions);

class SimpleMatch {
 public:
  static constexpr unsigned kMaxPerPort = 8;

  // Called by the owning FlowTable as flows come and go on a port.
  void flow_added(const Megaflow* f);
  void flow_removed(const Megaflow* f);
  // The flow's actions were swapped (modify).
  void actions_changed(const Megaflow* f);

  bool enabled(uint32_t port) const noexcept {
    return port < kPorts && ports_[port].n > 0 && ports_[port].others == 0;
  }
  // The simple flow of `port` matching `key` whose actions are outputs
  // only, or null.
  Megaflow* lookup(uint32_t port, SimpleKey key) const noexcept {
    const Port& p = ports_[port];
    for (unsigned i = 0; i < p.n; ++i) {
      const Entry& e = p.e[i];
      if ((key & e.mask) == e.value) return e.outputs_only ? e.flow : nullptr;
    }
    return nullptr;
  }

 private:
  static constexpr unsigned kPorts = 256;
  struct Entry {
    SimpleKey value = 0, mask = 0;
    Megaflow* flow = nullptr;
    bool outputs_only = false;
  };
  struct Port {
    std::array<Entry, kMaxPerPort> e{};
    uint32_t n = 0;       // simple flows in e[]
    uint32_t others = 0;  // flows of the port that are not in e[] (not simple, or too many)
  };
  std::array<Port, kPorts> ports_{};
};

}  // namespace keel::datapath

// The slow path wired together: a Udpif whose translator is xlate through
// the bridge that owns the packet's input port, and whose userspace()
// packets (the `controller` action) land in the Ofproto's controller queue,
// and whose slow_path(lacp) packets (LACPDUs received on a bond member,
// xlate.h) go to that bond's Lacp::process_packet. make_udpif also sets the
// Ofproto's revalidate hook (bonds ask for a round when they change).
//
// Thread-safety: make_udpif() on the control thread; the Udpif's own rules
// (udpif.h) afterwards.
#pragma once

#include <memory>

#include "ofproto/ofproto.h"
#include "ofproto/udpif.h"

namespace keel::ofproto {

std::unique_ptr<Udpif> make_udpif(Ofproto& ofp);

}  // namespace keel::ofproto

// The slow path wired together: a Udpif whose translator is xlate through
// the bridge that owns the packet's input port, and whose userspace()
// packets (the `controller` action) land in the Ofproto's controller queue,
// and whose slow_path(lacp) packets (LACPDUs received on a bond member,
// xlate.h) go to that bond's Lacp::process_packet. make_udpif also sets the
// Ofproto's revalidate hook (bonds ask for a round when they change).
//
// Tunnels: the translator finds the bridge of a packet from a tunnel vport
// with TunnelTable::receive (none: a drop flow on that tunnel key, counted
// as tnl_no_port), and of a tunnel recirculation (recirc_id kTnlRecircBase
// + M) from the bridge whose internal vport is M, translated as received
// on LOCAL. slow_path(action) packets (an ARP request / neighbour
// solicitation for an address of a bridge, xlate.h) get their reply,
// composed here (ofproto/tunnel.h) and sent out of that bridge
// (Ofproto::send_from_bridge). OfprotoTunnels is what translation reads of
// the Ofproto's tunnel state (one TunnelState snapshot per object: make
// one per translation); trace uses it too.
//
// Thread-safety: make_udpif() on the control thread; the Udpif's own rules
// (udpif.h) afterwards. OfprotoTunnels: the thread that made it, as an Rcu
// reader (its Bridge* are valid until the next quiescent point).
#pragma once

#include <memory>

#include "ofproto/ofproto.h"
#include "ofproto/tunnel.h"
#include "ofproto/udpif.h"
#include "ofproto/xlate.h"

namespace keel::ofproto {

std::unique_ptr<Udpif> make_udpif(Ofproto& ofp);

class OfprotoTunnels final : public XlateTunnels {
 public:
  explicit OfprotoTunnels(Ofproto& ofp);
  // Whether any tunnel or underlay state exists (else nothing reads it).
  bool active() const;

  std::optional<XlateTunnelPort> tunnel_port(const PortConfig& p) const override;
  std::optional<XlateRoute> route(const flow::In6Addr& dst, uint32_t pkt_mark) const override;
  std::optional<flow::EthAddr> neighbor(const Bridge& br, const flow::In6Addr& ip) const override;
  std::optional<flow::EthAddr> bridge_mac(const Bridge& br) const override;
  std::vector<flow::In6Addr> bridge_addrs(const Bridge& br) const override;
  uint16_t local_vport(const Bridge& br) const override;
  std::vector<XlateListener> listeners() const override;
  std::optional<XlateTunnelRx> receive(const flow::FlowKey& flow) const override;
  bool is_tunnel_vport(uint32_t dp_port) const override;
  Bridge* bridge_of_local_vport(uint32_t vport) const override;
  bool combine() const override;
  void send_neighbor_request(Bridge& br, const flow::EthAddr& smac, const flow::In6Addr& src,
                             const flow::In6Addr& dst) override;
  void neighbor_learn(Bridge& br, const flow::In6Addr& ip, const flow::EthAddr& mac) override;
  uint64_t generation() const override;

 private:
  Ofproto& ofp_;
  std::shared_ptr<const TunnelState> st_;
};

// The reply to an ARP request / neighbour solicitation `frame` (received
// on `bridge`) for one of the bridge's addresses; empty when it is not one.
std::vector<uint8_t> neighbor_reply_for(const TunnelState& st, const Bridge& bridge,
                                        std::span<const uint8_t> frame);

}  // namespace keel::ofproto

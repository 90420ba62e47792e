// hal/dpdk mbuf glue — how a hal::Packet lives inside an rte_mbuf.
//
// The DPDK backend's one mempool is created with priv_size = sizeof(Packet)
// (64 bytes), so every mbuf carries its hal::Packet descriptor in the private
// area right after the 128-byte rte_mbuf header (rte_mbuf_to_priv). Layout of
// one pool object:
//
//   [rte_mbuf, 2 cache lines][hal::Packet, 1 cache line][headroom 128][data 2048]
//                                                         ^ buf_addr
//
// The descriptor's owner() points back at the mbuf, buf()/buf_len() mirror
// buf_addr/buf_len, and data()/len() are the frame. The datapath edits only
// the descriptor (push/pull/set_len); to_tx() writes the result back into the
// mbuf just before it is handed to rte_eth_tx_burst(). Everything here is
// inline and runs per packet: no allocation, no call, only loads and stores
// on the mbuf's first cache line and the descriptor's line (not measured on
// its own; the PMD has just touched the mbuf line at rx).
//
// Multi-segment mbufs do not reach the datapath: from_rx() is only called on
// single-segment mbufs; rx linearizes chains first, into the first segment
// when it has the room, else into one mbuf of the jumbo pool (see
// dpdk_port.cpp). Jumbo-pool mbufs have the same layout with
// kJumboBufferSize of data.
//
// Thread-safety: these functions touch one mbuf and its descriptor, which
// belong to exactly one thread at a time (the Packet ownership rule of
// packet.h); nothing here is shared.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "keel/hal/packet.h"

namespace keel::hal::dpdk {

static_assert(sizeof(Packet) % RTE_MBUF_PRIV_ALIGN == 0,
              "the mbuf private area must keep RTE_MBUF_PRIV_ALIGN alignment");
static_assert(sizeof(rte_mbuf) % alignof(Packet) == 0,
              "the descriptor follows the mbuf header and must stay cache-line aligned");
static_assert(RTE_PKTMBUF_HEADROOM == kHeadroom,
              "both backends give the datapath the same headroom for pushes");
static_assert(RTE_MBUF_DEFAULT_DATAROOM == kBufferSize,
              "a standard mbuf holds what a standard sim buffer holds: alloc_burst picks the pool by length");

inline Packet* packet_of(rte_mbuf* m) { return static_cast<Packet*>(rte_mbuf_to_priv(m)); }
inline rte_mbuf* mbuf_of(const Packet* p) { return static_cast<rte_mbuf*>(p->owner()); }

// Points the descriptor of a single-segment mbuf at its frame (rx and alloc).
inline Packet* from_mbuf(rte_mbuf* m) {
  Packet* p = packet_of(m);
  auto* buf = static_cast<uint8_t*>(m->buf_addr);
  p->reset(BufferSource::dpdk, m, buf, m->buf_len, buf + m->data_off, m->pkt_len);
  return p;
}

// An mbuf from rx_burst: frame plus what the NIC computed (RSS hash, rte_flow
// MARK).
inline Packet* from_rx(rte_mbuf* m) {
  Packet* p = from_mbuf(m);
  if (m->ol_flags & RTE_MBUF_F_RX_RSS_HASH) p->set_rss_hash(m->hash.rss);
  if (m->ol_flags & RTE_MBUF_F_RX_FDIR_ID) p->set_flow_mark(m->hash.fdir.hi);
  return p;
}

// Writes the descriptor's frame back into its (single-segment) mbuf.
inline rte_mbuf* to_tx(Packet* p) {
  rte_mbuf* m = mbuf_of(p);
  m->data_off = static_cast<uint16_t>(p->data() - static_cast<uint8_t*>(m->buf_addr));
  m->data_len = static_cast<uint16_t>(p->len());
  m->pkt_len = p->len();
  return m;
}

}  // namespace keel::hal::dpdk

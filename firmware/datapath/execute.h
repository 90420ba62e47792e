// The action executor: runs one megaflow's encoded actions
// (flow/dp_actions.h) on a batch of packets that all matched it.
//
// Where it sits: the PMD parses a burst (packet/parser.h), classifies it
// (EMC, SMC, dpcls), groups the packets by megaflow and calls
// execute_actions() once per group with the flow's actions. Packets leave
// only through the ExecContext the PMD owns; after the burst the PMD sends
// the context's output batches (Port::tx), re-parses and re-classifies the
// recirculation queue, hands the slow-path queue to the upcall handler, and
// clears them.
//
// Contract (who frees what): execute_actions() takes ownership of every
// packet in the batch. Each one ends up in exactly one place: an output
// batch, the recirculation queue, the slow-path queue, or released (and
// counted). Copies the executor makes (for clone() and for an output,
// recirc or userspace action that is not the list's last action) come from
// a backend's alloc_burst(), once per batch, and follow the same rule: a
// copy for an output comes from the output port's own backend
// (ctx.port_backend: an mbuf for a DPDK port, which then sends it as it is
// instead of copying a sim buffer into an mbuf once more), a clone's copies
// from the backend of the first port its actions output to, every other
// copy (recirc, userspace, a clone that outputs nowhere) from ctx.backend.
// Nothing is ever queued without bound: every queue has a fixed capacity;
// what does not fit is released and counted. ExecContext::release_all()
// frees whatever is still queued (shutdown, tests).
//
// Drop accounting (drop_stats.h; when ctx.drops is set): every packet the
// executor releases is counted under its DropReason, and for each packet of
// the batch that holds its received packet's fate token, the call decides
// the fate when it ends: forwarded if any instance of it (itself or a
// copy) went to an output batch; else the token stays with the instance
// that went on to the recirculation or slow-path queue, or moves to a copy
// that did (the token instance itself was dropped); else dropped, under the
// reason its token instance was dropped for (a `drop` or a list that sends
// it nowhere: ctx.drop_reason). Costs per packet a flag test and a bit or
// two in masks, and per batch a loop over the packets holding tokens.
//
// Semantics, as Open vSwitch's userspace datapath (odp_execute_actions() +
// dp_execute_cb()):
//   output(P)    the packet goes to P's output batch. Ports are not checked
//                here: a port that does not exist is the PMD's to count when
//                it flushes (OVS: datapath_drop_invalid_port).
//   trunc(N)     the next output or userspace action sends at most N bytes
//                (N < 14 acts as 14, as dp_packet_set_cutlen()); it is then
//                cleared; the copies a clone() makes inherit it and the
//                originals lose it; recirc clears it.
//   recirc(ID)   meta().recirc_id = ID, into the recirculation queue.
//   userspace    into the slow-path queue with its pid and userdata.
//   clone(A)     A runs on copies; the originals continue. A clone that is
//                the last action runs A on the originals (no copy).
//   drop         releases the batch; nothing after it runs.
//   push_vlan    needs 4 bytes of headroom (hal::Packet::push_front); none:
//                the packet is dropped (no_headroom). DEI/CFI is written 0.
//   pop_vlan     removes the outer 802.1Q/802.1ad tag if there is one.
//   set(...)     masked rewrite at the LayerOffsets, checksums updated
//                incrementally (packet/checksum.h): IPv4 header checksum for
//                src/dst/tos/ttl; TCP and UDP checksums for IPv4 address
//                changes; TCP, UDP and ICMPv6 checksums for IPv6 address
//                changes (not for a destination behind a routing header
//                with segments left, as OVS); TCP/UDP checksums for ports.
//                A UDP checksum of 0 (none) stays 0; an update that computes
//                0 writes 0xffff. IPv6 tclass and label live in the first
//                4 bytes (no checksum covers them). proto= and frag= are not
//                executed. L4 checksums are touched only when the parser saw
//                the whole L4 header (LayerOffsets::payload set).
//   hash(l4(B))  meta().dp_hash = hash_int(rss, B) (core/hash.h) when the
//                packet carries an RSS hash (hal::Packet::has_rss_hash():
//                the NIC's, or a sim port's software one), as OVS's
//                odp-execute; else flow::hash_l4(*key, B), the 5-tuple hash.
//   lb_output(N) the packet goes to the output batch of member
//                table[dp_hash & kBondBucketMask] of the PMD's bond table N
//                (ctx.bonds, bond_table.h), counting the packet and its
//                bytes in that bucket's slot; no table N, no bond table
//                array, or a bucket holding kNoBondMember: released and
//                counted (bond_drops). Always the packet itself when last,
//                a copy from the member's backend otherwise (as output).
//   meter(N)     no meters yet: packets pass (meter_ignored), as OVS does for
//                a meter that does not exist.
//   tnl_push(..) prepends the header (push_front; not enough headroom:
//                released, tnl_push_no_headroom) and finishes it
//                (packet::finish_tunnel_push: IPv4 total length and
//                checksum / IPv6 payload length, UDP length, UDP source
//                port from the packet's RSS hash or else its key's 5-tuple
//                hash, UDP checksum when the header's is non-zero, GRE
//                checksum with the C flag). The actions after it see the
//                outer packet (offsets reset to Ethernet/IP/UDP|GRE); the
//                key stays the inner one. A frame too long for the port it
//                is then sent on is the port's to drop and count
//                (tx_mtu_exceeded_drops; the PMD counts tx_too_big).
//   tnl_pop(N)   validates the outer headers for vport N's type and UDP
//                port (packet::parse_tunnel_header) and strips them; the
//                inner packet gets in_port N, recirc_id 0, no RSS hash and
//                the tunnel metadata, and goes to the recirculation queue.
//                Refused: released, tnl_pop_errors and the reason's counter.
//                Always on the packet itself: a copy first unless last.
// A packet that lacks what an action needs (no IPv4 header for
// set(ipv4(...)), no tag for pop_vlan, neither RSS hash nor key for hash) is left unchanged
// and counted (header_missing); OVS refuses such flows at install time
// through their prerequisites, so this only happens with hand-made flows.
//
// Tunnel metadata: recirc() of a packet whose key has a tunnel (a pass
// after tnl_pop) carries it on (RecircQueue::tun), as Open vSwitch's
// packet metadata does.
//
// Layer offsets: push_vlan/pop_vlan adjust *ofs (l2_5, l3, l4, payload),
// so set actions after them still hit the right bytes. The key is never
// updated: hash(l4) after set(ipv4(...)) hashes the packet as classified.
//
// Cost: one call per batch; per packet and action a few loads and stores,
// inlined (lb_output: a table load, two counter bumps and the output slot
// lookup per packet, no hashing: hash(l4) before it did that). A copy costs an allocation from the pool (per batch) and a memcpy
// of the frame, plus one indirect call per batch to find the output port's
// backend (and for a clone a walk over its nested actions up to the first
// output).
//
// Thread-safety: an ExecContext belongs to one PMD thread, which is its only
// reader and writer (counters included: plain uint64_t, which the PMD adds
// to its relaxed atomics after each execute_actions() call). execute_actions()
// touches only the context, the packets it owns, their offsets, and reads
// the actions and the keys; it allocates nothing (fixed-size queues: what
// does not fit is dropped and counted). Copies take buffers from a
// backend's alloc_burst(), which any thread may call (hal/backend.h); the
// port_backend callback the PMD sets reads the datapath's port table, which
// does not change while PMDs run, and the port's backend pointer, set when
// the port was opened. lb_output reads the PMD's bond slots (ctx.bonds),
// which only that PMD writes, between bursts (bond_table.h), and bumps
// their per-bucket counters (relaxed load + store: single writer). The action bytes must stay alive
// until the context's queues are drained (userdata spans point into them):
// the PMD drains them in the same burst (after_pass copies the userdata into
// the upcall record), and a flow's actions are freed only between bursts
// (a modify's old list once the owning PMD answered, a removed flow's with
// the flow after the EMC sweep; megaflow.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "datapath/bond_table.h"
#include "datapath/drop_stats.h"
#include "flow/dp_actions.h"
#include "flow/miniflow.h"
#include "keel/hal/backend.h"
#include "keel/hal/packet.h"
#include "packet/parser.h"
#include "packet/tunnel_header.h"

namespace keel::datapath {

// One packet of a batch: the buffer, where its headers are, its parsed key.
struct ExecPacket {
  hal::Packet* pkt;
  packet::LayerOffsets* ofs;  // adjusted in place by push_vlan/pop_vlan
  const flow::Miniflow* key;  // as classified; may be null (then hash() skips it)
  // The executor's: which packet of the batch this is (a copy: its
  // original's); execute_actions() numbers them. No default member
  // initializer: arrays of ExecPacket stay trivially constructed.
  uint8_t slot;
};

inline constexpr unsigned kExecMaxOutputPorts = 16;  // distinct output ports queued at once
inline constexpr unsigned kExecOutputBatchCap = 64;  // packets per port between flushes (two bursts)
inline constexpr unsigned kExecRecircCap = 64;       // recirculated packets per burst
inline constexpr unsigned kExecUpcallCap = 64;       // slow-path packets per burst
inline constexpr unsigned kExecMaxVports = 256;      // ExecContext::vports entries (datapath kMaxDpPorts)

// Per-PMD executor statistics. Plain fields: one writer (the PMD).
struct alignas(64) ExecCounters {
  uint64_t packets = 0;          // handed to execute_actions()
  uint64_t outputs = 0;          // queued for tx (copies included)
  uint64_t recirculated = 0;     // queued for recirculation
  uint64_t upcalls = 0;          // queued for the slow path
  uint64_t dropped = 0;          // by `drop`, or at the end of a list that sent them nowhere
  uint64_t tx_overflow = 0;      // output batch full / no free port slot, no flush function: released
  uint64_t recirc_overflow = 0;  // recirculation queue full: released
  uint64_t upcall_overflow = 0;  // slow-path queue full: released
  uint64_t copy_failed = 0;      // a copy (clone, non-final output) could not be made: no buffer
  uint64_t no_headroom = 0;      // push_vlan without 4 bytes of headroom: released
  uint64_t header_missing = 0;   // an action skipped a packet lacking its header (left unchanged)
  uint64_t meter_ignored = 0;    // passed through meter() (no meters yet)
  uint64_t unsupported = 0;      // an action type this build cannot run (reserved types): released
  uint64_t bond_drops = 0;       // lb_output: no such bond, or its bucket has no member: released
  uint64_t tnl_pushed = 0;            // tnl_push: packets encapsulated
  uint64_t tnl_push_no_headroom = 0;  // tnl_push: less headroom than the header: released
  uint64_t tnl_popped = 0;            // tnl_pop: packets decapsulated (and recirculated)
  uint64_t tnl_pop_errors = 0;        // tnl_pop: refused (the sum of tnl_pop_reasons[1..]): released
  uint64_t tnl_pop_reasons[packet::kTnlPopResults] = {};  // by packet::TnlPopResult ([0] unused)
};

// Takes ownership of `pkts` (they are sent or released by the callee).
using OutputFlushFn = void (*)(void* arg, uint32_t port, std::span<hal::Packet* const> pkts) noexcept;

struct OutputBatch {
  uint32_t port = 0;
  uint32_t n = 0;
  hal::Packet* pkts[kExecOutputBatchCap];

  std::span<hal::Packet* const> packets() const noexcept { return {pkts, n}; }
};

// The packets waiting for tx, one batch per output port.
//
// Without a flush function, a full batch (or a port beyond
// kExecMaxOutputPorts) drops what does not fit (tx_overflow). With one
// (set_flush), a full batch is handed to it at once and a new port that
// finds no free slot flushes every batch first, as OVS flushes
// output_pkts when they would overflow NETDEV_MAX_BURST.
class OutputBatches {
 public:
  void set_flush(OutputFlushFn fn, void* arg) noexcept {
    flush_ = fn;
    flush_arg_ = arg;
  }

  // The batches with packets queued since the last clear().
  std::span<OutputBatch> active() noexcept { return {batches_, n_}; }
  std::span<const OutputBatch> active() const noexcept { return {batches_, n_}; }
  // Forgets every batch: call after passing their packets on.
  void clear() noexcept { n_ = 0; }
  // Hands every batch to the flush function (which must be set) and clears.
  void flush_all() noexcept;

  // Queues packets for `port`; what does not fit is released and added to
  // `overflow`.
  void push(uint32_t port, std::span<hal::Packet* const> pkts, uint64_t& overflow) noexcept;
  // Whether push() may drop (no flush function).
  bool may_overflow() const noexcept { return flush_ == nullptr; }

 private:
  OutputBatch* slot(uint32_t port) noexcept;

  OutputFlushFn flush_ = nullptr;
  void* flush_arg_ = nullptr;
  unsigned n_ = 0;
  OutputBatch batches_[kExecMaxOutputPorts];
};

// The tunnel metadata a recirculated packet carries into its next pass
// (tnl_pop's outer header, or the tunnel its key had): the parser puts it in
// key words 0-7 and its GENEVE options in words 8.. (packet_metadata.h).
struct RecircTunnel {
  packet::TunnelMetadata tunnel;  // all zero: none
  alignas(8) uint8_t opts[packet::kMaxKeyedTunOptWords * 8];  // tunnel.opt_len bytes, zero-padded
};

// Packets to classify again; each carries its new recirc_id in meta(),
// and tun[i] its tunnel metadata (valid only when any_tunnel).
struct RecircQueue {
  unsigned n = 0;
  bool any_tunnel = false;
  hal::Packet* pkts[kExecRecircCap];
  RecircTunnel tun[kExecRecircCap];

  std::span<hal::Packet* const> packets() const noexcept { return {pkts, n}; }
  void clear() noexcept {
    n = 0;
    any_tunnel = false;
  }
};

// A packet for the slow path (userspace action).
struct UpcallRequest {
  hal::Packet* pkt;
  const flow::Miniflow* key;          // as classified (may be null): valid until the PMD's next burst
  std::span<const uint8_t> userdata;  // points into the flow's actions (see Thread-safety)
  uint32_t pid;
  uint32_t tunnel_out_port;  // with flow::kUserspaceTunnelOutPort
  uint8_t flags;             // flow::kUserspace*
};

struct SlowPathQueue {
  unsigned n = 0;
  UpcallRequest reqs[kExecUpcallCap];

  std::span<const UpcallRequest> requests() const noexcept { return {reqs, n}; }
  void clear() noexcept { n = 0; }
};

// What one PMD gives the executor: where packets go, and the counters.
// The backend whose buffers suit output port `port` (null: ctx.backend).
using PortBackendFn = hal::Backend* (*)(void* arg, uint32_t port) noexcept;

struct alignas(64) ExecContext {
  hal::Backend* backend = nullptr;  // copies come from here; null: every copy fails (copy_failed)
  PortBackendFn port_backend = nullptr;  // null: every copy from `backend`
  void* port_backend_arg = nullptr;
  // lb_output's tables, indexed by bond id (the PMD's own, bond_table.h);
  // null: every lb_output drops (bond_drops).
  const PmdBondSlots* bonds = nullptr;
  // tnl_pop's vports: the Datapath's packed type+port per id
  // (Datapath::vport_fast); null: every tnl_pop drops (tnl_pop_errors, no_vport).
  const std::atomic<uint32_t>* vports = nullptr;
  // Drop accounting (drop_stats.h): the PMD's counters (null: none kept),
  // and the reason a `drop` action or a list that sends packets nowhere
  // gives (the flow's: Megaflow::drop_reason; the PMD sets it per call).
  DropStats* drops = nullptr;
  DropReason drop_reason = DropReason::kDropAction;
  // Forwarded packets are counted per run of one rx port across calls
  // (one counter bump per burst, not per call): flush_forwarded() puts the
  // run into `drops`; the PMD calls it once per iteration.
  uint16_t fwd_port = 0;
  uint32_t fwd_n = 0;
  void count_forwarded(uint16_t port, uint32_t n) noexcept {
    if (fwd_n && port != fwd_port) flush_forwarded();
    fwd_port = port;
    fwd_n += n;
  }
  void flush_forwarded() noexcept {
    if (!fwd_n) return;
    drops->forwarded(fwd_port, fwd_n);
    fwd_n = 0;
  }
  OutputBatches tx;
  RecircQueue recirc;
  SlowPathQueue upcalls;
  ExecCounters counters;

  // Releases every packet still queued and empties the queues.
  void release_all() noexcept;
};

// Runs `actions` (a valid list) on `batch` (any size; handled kMaxBurst at a
// time), taking ownership of every packet.
void execute_actions(ExecContext& ctx, std::span<const ExecPacket> batch,
                     std::span<const uint8_t> actions) noexcept;
inline void execute_actions(ExecContext& ctx, std::span<const ExecPacket> batch,
                            const flow::DpActions& actions) noexcept {
  execute_actions(ctx, batch, actions.bytes());
}

}  // namespace keel::datapath

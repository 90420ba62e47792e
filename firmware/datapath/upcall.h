// Upcalls — how a packet the fast path can't handle reaches the slow path
// (ofproto's upcall handler threads) and comes back.
//
// Each PMD owns a fixed set of Upcall records and bounded rings:
//
//   free ──PMD──> queue[h] ──handler h──> done ──PMD──> spent ──any handler──> free
//
// On a miss (or a userspace() action) the PMD takes a record from `free`,
// fills it with the packet, the key and hash it already computed (the
// handler never parses or hashes again) and the layer offsets, and pushes
// it to the queue of the handler its key hash picks: queue[hash % n], n the
// channel's queue count (the Udpif's handler count; a userspace() record has
// hash 0: queue 0, so controller packets of one PMD stay in order). No
// record or no budget left in this burst: the packet is dropped and counted
// as lost; the PMD never waits. kUpcallControlReserve records are kept for
// control-protocol frames (LACP), which also bypass the per-burst budget. (In an offline run the PMD stops reading its
// inputs instead, and marks records `derived` that must be translated before
// those already queued: see pmd.h; an offline PMD submits to queue 0 alone,
// which handler 0 alone polls, so it sees them in the order they were sent.) A miss whose key equals
// that of a miss still up (same PMD) rides on that record as a follower
// instead of taking another one: the pending table that finds it is the
// PMD's, whatever handler the record went to, so duplicates of one key on
// one PMD always meet on one record.
//
// The handler translates, and answers on `done` with a megaflow to install
// (built with Datapath::build_megaflow, or none) and the actions to execute
// the packet with (or none: drop). Between bursts the PMD installs the
// megaflow in its own table (it is the table's only writer), executes the
// packet, and passes the record on to `spent`, from where a handler (any:
// the first to look) frees what the answer allocated (the actions; the
// megaflow if the install failed) and returns the record to `free`. Every
// ring can hold every record, so the pushes never fail.
//
// Why one queue per handler and shared done/spent/free rings: the queue is
// where handlers would otherwise compete for records (and where the hash
// must decide who translates what); done is pushed by several handlers and
// popped by the PMD alone, spent the reverse — MPMC rings, so no handler
// owns a record after it answered and a handler count change never strands
// one. Handler h of n polls queue[q] for every q with q % n == h (q below
// kMaxUpcallQueues), so a record pushed under an older count is still
// found after set_queues(): nothing queued is lost when the count changes.
//
// Thread-safety: the PMD pushes `queue[*]` and `spent` and pops `free` and
// `done`; the handlers do the opposite (MpmcRing: several handlers push
// `done` and pop `spent`; each queue[q] is popped by the one handler that
// owns q under the current count, or by whoever drains the channel when
// the slow path stops). The queue count is a relaxed atomic written by the
// Udpif (control or handler thread) and read by the PMD per submit: a
// stale value only picks another handler's queue, never loses a record.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "core/fault.h"
#include "core/ring.h"
#include "datapath/megaflow.h"
#include "flow/dp_actions.h"
#include "flow/miniflow.h"
#include "keel/hal/packet.h"
#include "packet/parser.h"

namespace keel::datapath {

inline constexpr unsigned kUpcallRecords = 512;        // per PMD
// Live runs: records only control-protocol frames (slow protocols, EtherType
// 0x8809: LACP, marker) may take, so that a miss storm of data packets can't
// starve a bond's LACP (its members would expire and go down). Ordinary
// misses and userspace() packets find "no record" while no more than this
// many are free, and are lost (counted) as when none is.
inline constexpr unsigned kUpcallControlReserve = 16;
inline constexpr unsigned kUpcallUserdataMax = 64;     // bytes of userspace() userdata carried
inline constexpr unsigned kUpcallFollowers = 31;       // packets with the same key riding on one miss
// Live runs: followers one PMD may hold at once. Each keeps its packet
// buffer while its miss is up, so without a bound a stalled slow path and a
// storm of repeated new flows would hold every buffer of the pool (512
// records x 31 followers is twice the sim pool) and starve the established
// flows' inputs. A miss past it goes up on a record of its own (or is lost
// and counted when none is free) and its rx queue pauses until half of the
// followers are back (pmd.h: backpressure), as the pool running dry would
// pause every input: the queue's packets wait in the NIC (a replay waits, a
// NIC ring counts what overflows as Rx-drop), other queues keep going.
inline constexpr unsigned kUpcallHeldFollowers = 1024;
inline constexpr unsigned kMaxUpcallQueues = 16;       // per PMD: one per handler thread, at most
static_assert(kUpcallFollowers + 1 <= 255,
              "Upcall::uncounted_packets (uint8_t) holds a packet and its followers");

struct Upcall {
  enum class Type : uint8_t { miss, action };

  // --- filled by the PMD ---
  Type type = Type::miss;
  uint16_t pmd = 0;
  uint8_t depth = 0;  // recirculation depth of the pass that missed
  // Offline mode: sent up while an earlier record's answer was executed (its
  // recirculation, its userspace()): comes before the records queued ahead.
  bool derived = false;
  uint32_t hash = 0;
  hal::Packet* pkt = nullptr;  // owned by the record until the PMD executes it
  packet::LayerOffsets ofs;
  flow::Miniflow key;  // the parsed key (in_port, recirc_id and all)
  // Type::miss: later packets with the very same key that missed while
  // this one was up; executed with its answer (the handler never sees them).
  uint8_t n_followers = 0;
  hal::Packet* followers[kUpcallFollowers];
  packet::LayerOffsets follower_ofs[kUpcallFollowers];
  // Type::miss, PMD-private: the next older miss record up in the same slot
  // of the PMD's pending table (Pmd::pending_); the handler never touches it.
  Upcall* pending_next = nullptr;
  // Type::action: userspace(pid, userdata)
  uint32_t pid = 0;
  uint8_t userdata_len = 0;
  uint8_t userdata[kUpcallUserdataMax];

  // --- filled by the handler ---
  Megaflow* install = nullptr;                  // to install in the PMD's table, or null
  // No install: the megaflow for this key was answered to an earlier miss;
  // the PMD counts the packets on it (it finds it with its dpcls).
  bool account_existing = false;
  const flow::DpActions* actions = nullptr;     // to run on the packet; null: drop it
  uint8_t drop_reason = 0;  // a DropReason for what `actions` send nowhere (0: kDropAction)
  // --- filled by the PMD when it executed ---
  bool install_failed = false;  // the handler frees `install`
  // Packets executed with the answer that no megaflow counted and the
  // handler did not credit when it answered (the followers of a miss that
  // installed nothing; the miss too when the megaflow to count it on was
  // not found): the handler credits them to the rules when it takes the
  // record back (ofproto/udpif.cpp).
  uint8_t uncounted_packets = 0;
  uint32_t uncounted_bytes = 0;
};

class UpcallChannel {
 public:
  UpcallChannel() : records_(std::make_unique<Upcall[]>(kUpcallRecords)) {
    for (unsigned i = 0; i < kUpcallRecords; ++i) (void)free_.push(&records_[i]);
    for (auto& q : queues_) q = std::make_unique<MpmcRing<Upcall*>>(kUpcallRecords);
  }

  // PMD side.
  Upcall* take() noexcept {
    Upcall* u = nullptr;
    return free_.pop(u) ? u : nullptr;
  }
  // Records free now, as the PMD (their one taker) sees them: a lower
  // bound (handlers only add to it meanwhile), give or take a recycle in
  // progress.
  unsigned available() const noexcept { return static_cast<unsigned>(free_.size()); }
  // take() unless no more than `reserve` records are free (the count is
  // read without a lock: handlers recycle concurrently, so it may be a
  // few records stale either way; the reserve stays roughly whole).
  // `debug fault upcall-queue-full` (core/fault.h) makes it find none.
  Upcall* take_above(unsigned reserve) noexcept {
    if (fault::hit(fault::Point::upcall_queue_full)) [[unlikely]]
      return nullptr;
    return free_.size() > reserve ? take() : nullptr;
  }
  // one_queue: queue 0 whatever the count (an offline run's PMD: its one
  // handler must see the records in the order they were sent).
  void submit(Upcall* u, bool one_queue = false) noexcept {
    const unsigned n = one_queue ? 1 : n_queues_.load(std::memory_order_relaxed);
    (void)queues_[n > 1 ? u->hash % n : 0]->push(u);
    in_flight_.store(in_flight_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  bool answered(Upcall*& u) noexcept { return done_.pop(u); }
  void executed(Upcall* u) noexcept {
    (void)spent_.push(u);
    in_flight_.store(in_flight_.load(std::memory_order_relaxed) - 1, std::memory_order_release);
  }
  // Packets handed up and not executed yet (written by the PMD only).
  uint32_t in_flight() const noexcept { return in_flight_.load(std::memory_order_acquire); }

  // Handler side. The queue count: 1..kMaxUpcallQueues (clamped).
  void set_queues(unsigned n) noexcept {
    n_queues_.store(n < 1 ? 1 : n > kMaxUpcallQueues ? kMaxUpcallQueues : n, std::memory_order_relaxed);
  }
  unsigned queues() const noexcept { return n_queues_.load(std::memory_order_relaxed); }
  // A record from queue q (handler h of n polls every q with q % n == h).
  bool next(unsigned q, Upcall*& u) noexcept { return queues_[q]->pop(u); }
  // A record from any queue (draining the channel: nobody else polls).
  bool next(Upcall*& u) noexcept {
    for (auto& q : queues_)
      if (q->pop(u)) return true;
    return false;
  }
  void answer(Upcall* u) noexcept { (void)done_.push(u); }
  bool next_spent(Upcall*& u) noexcept { return spent_.pop(u); }
  void recycle(Upcall* u) noexcept {
    u->install = nullptr;
    u->actions = nullptr;
    u->install_failed = false;
    u->account_existing = false;
    u->drop_reason = 0;
    u->uncounted_packets = 0;
    u->uncounted_bytes = 0;
    u->pkt = nullptr;
    (void)free_.push(u);
  }

 private:
  std::unique_ptr<Upcall[]> records_;
  std::atomic<uint32_t> in_flight_{0};
  std::atomic<unsigned> n_queues_{1};
  std::array<std::unique_ptr<MpmcRing<Upcall*>>, kMaxUpcallQueues> queues_;
  MpmcRing<Upcall*> free_{kUpcallRecords}, done_{kUpcallRecords}, spent_{kUpcallRecords};
};

}  // namespace keel::datapath

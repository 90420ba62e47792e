// Upcalls — how a packet the fast path can't handle reaches the slow path
// (ofproto's upcall handler threads) and comes back.
//
// Each PMD owns a pool of Upcall records and, per handler queue q, three
// bounded single-producer single-consumer rings (a lane):
//
//   free ──PMD──> queue[q] ──handler──> done[q] ──PMD──> spent[q] ──handler──> free
//
// On a miss (or a userspace() action) the PMD takes a record from `free`,
// fills it with the packet, the key and hash it already computed (the
// handler never parses or hashes again) and the layer offsets, and pushes
// it to the queue of the handler its key hash picks: queue[hash % n], n the
// channel's queue count (the Udpif's handler count; a userspace() record has
// hash 0: queue 0, so controller packets of one PMD stay in order). The
// answer and the spent record go back through the same lane (Upcall::queue),
// so each ring has one producer and one consumer: the PMD and the handler
// that owns q (handler h of n polls every lane q with q % n == h).
//
// Storms (live mode): a record holds a copy of its frame when it is no longer
// than kUpcallFrameInline bytes, and the packet buffer goes back to the NIC's
// pool at once; the PMD takes a fresh buffer when it executes the answer. So
// the records, not the buffer pool, bound how many misses may be up: a PMD
// has PmdConfig::upcall_records of them (the board's choice: a burst of new
// flows at line rate), and a record, its ring slots and its pages cost
// memory only once a storm has used it (records are handed out newest-freed
// first and carved from the pool's untouched tail only when none is free).
// A miss that must keep its buffer (a longer frame, the followers below)
// counts against kUpcallHeldPackets per PMD. No record, no budget left in
// this burst, or no room for a held buffer: the packet is dropped and
// counted as lost; the PMD never waits. kUpcallControlReserve records are
// kept for control-protocol frames (LACP), which also bypass the per-burst
// budget. (In an offline run the PMD stops reading its inputs instead, holds
// every buffer, keeps at most kOfflineRecords up, and marks records
// `derived` that must be translated before those already queued: see pmd.h;
// an offline PMD submits to queue 0 alone, which handler 0 alone polls, so
// it sees them in the order they were sent.) A miss whose key equals that of
// a miss still up (same PMD) rides on that record as a follower instead of
// taking another one: the pending table that finds it is the PMD's, whatever
// handler the record went to, so duplicates of one key on one PMD always
// meet on one record. Followers live in the PMD's FollowerBlocks (PMD-only).
//
// The handler translates, and answers on `done` with a megaflow to install
// (built with Datapath::build_megaflow, or none) and the actions to execute
// the packet with (or none: drop). Between bursts the PMD installs the
// megaflow in its own table (it is the table's only writer), executes the
// packet, and passes the record on to `spent`, from where the lane's handler
// frees what the answer allocated (the actions; the megaflow if the install
// failed) and returns the record to `free`. Every ring can hold every
// record, so the pushes never fail.
//
// Why lanes: with one producer and one consumer per ring no push or pop is a
// compare-and-swap, and a handler count change never strands a record
// (handler h of n polls every q with q % n == h, q below kMaxUpcallQueues,
// so a record pushed under an older count is still found after
// set_queues()): nothing queued is lost when the count changes. The free
// pool is an intrusive stack that any handler pushes to (compare-and-swap)
// and the PMD alone takes whole (an exchange), then hands out from its
// private list: no ABA, nothing per record but the link.
//
// Thread-safety: the PMD pushes queue[*] and spent[*], pops done[*], takes
// from the free pool and owns its private list, the fresh-record index and
// taken_; the lane's handler (the one owning q under the current count, or
// whoever drains the channel while no handler runs, Udpif::stop and
// Datapath::drop_pending_upcalls) pops queue[q] and spent[q] and pushes
// done[q]; a thread change on a lane is ordered by the join/start of the
// threads. Records are pushed to the free pool by any handler (release CAS;
// the PMD's acquire exchange sees their contents) and counted in recycled_
// (relaxed; take_above() reads it to estimate what is free). The queue count
// is a relaxed atomic written by the Udpif (control or handler thread) and
// read by the PMD per submit: a stale value only picks another handler's
// queue, never loses a record. in_flight() is the PMD's count, published with
// release stores.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>

#include "core/fault.h"
#include "core/lazy_array.h"
#include "core/ring.h"
#include "datapath/megaflow.h"
#include "flow/dp_actions.h"
#include "flow/miniflow.h"
#include "keel/hal/packet.h"
#include "packet/parser.h"

namespace keel::hal {
class Backend;
}

namespace keel::datapath {

// Records per PMD when the config says nothing (tests, library users): the
// boards size theirs (boards/*.cpp: a burst of new flows at line rate).
inline constexpr uint32_t kDefaultUpcallRecords = 4096;
// Live runs: records only control-protocol frames (slow protocols, EtherType
// 0x8809: LACP, marker) may take, so that a miss storm of data packets can't
// starve a bond's LACP (its members would expire and go down). Ordinary
// misses and userspace() packets find "no record" while no more than this
// many are free, and are lost (counted) as when none is.
inline constexpr unsigned kUpcallControlReserve = 16;
// While the slow path's flow limit is reached, live misses may hold at most
// this many records (kUpcallControlReserve of them kept for control frames):
// a miss then can't become a flow, so queueing a storm's misses deep would
// only make each wait longer and take the handler's and the PMD's time from
// the flows that exist (a sustained storm of new flows: issue 19's
// overload); the rest are lost and counted, as the flow limit refuses their
// flows anyway. Below the limit the whole pool serves: a burst of new
// flows goes up whole (flow-setup).
inline constexpr uint32_t kUpcallShallowRecords = 512;
// Offline runs keep at most this many records up (pmd.h: backpressure).
inline constexpr unsigned kOfflineRecords = 512;
inline constexpr unsigned kUpcallUserdataMax = 64;     // bytes of userspace() userdata carried
inline constexpr unsigned kUpcallFollowers = 31;       // packets with the same key riding on one miss
// Live runs: followers one PMD may hold at once. Each keeps its packet
// buffer while its miss is up, so without a bound a stalled slow path and a
// storm of repeated new flows would hold every buffer of the pool and
// starve the established flows' inputs. A miss past it goes up on a record
// of its own (or is lost and counted when none is free); when its frame is
// too long to travel in the record (kUpcallFrameInline), its rx queue also
// pauses until half of the followers are back (pmd.h: backpressure), as the
// pool running dry would pause every input: the queue's packets wait in the
// NIC (a replay waits, a NIC ring counts what overflows as Rx-drop), other
// queues keep going.
inline constexpr unsigned kUpcallHeldFollowers = 1024;
inline constexpr unsigned kMaxUpcallQueues = 16;       // per PMD: one per handler thread, at most
// Frames up to this long travel in the record (live mode): their buffer goes
// back to the pool when the miss goes up. 192 bytes: a minimum-size frame
// with a tunnel header, or any TCP handshake packet.
inline constexpr unsigned kUpcallFrameInline = 192;
// Live mode: packet buffers the PMD's records may hold at once besides the
// followers (frames longer than kUpcallFrameInline, userspace() packets
// that keep theirs), so a storm can't drain the NIC's buffer pool (the DPDK
// pool has 16384 mbufs for every port and queue). A miss beyond it is lost
// (counted) as when no record is free.
inline constexpr unsigned kUpcallHeldPackets = 2048;
// Follower blocks per PMD: one per held follower, the worst case (every
// follower on a record of its own).
inline constexpr unsigned kUpcallFollowerBlocks = kUpcallHeldFollowers;
static_assert(kUpcallFollowers + 1 <= 255,
              "Upcall::uncounted_packets (uint8_t) holds a packet and its followers");
static_assert(kMaxUpcallQueues <= 256, "Upcall::queue is a uint8_t");

// The packets riding on a miss record (PMD-private: the handler never sees
// them, see Upcall::followers).
struct FollowerBlock {
  hal::Packet* pkts[kUpcallFollowers];
  packet::LayerOffsets ofs[kUpcallFollowers];
  FollowerBlock* next_free;
};

struct Upcall {
  enum class Type : uint8_t { miss, action };

  // --- filled by the PMD ---
  Type type = Type::miss;
  uint8_t depth = 0;  // recirculation depth of the pass that missed
  // Offline mode: sent up while an earlier record's answer was executed (its
  // recirculation, its userspace()): comes before the records queued ahead.
  bool derived = false;
  uint8_t n_followers = 0;
  uint16_t pmd = 0;
  uint8_t queue = 0;  // the lane it went up on: its answer and return take the same one
  uint32_t hash = 0;
  // The packet, owned by the record until the PMD executes it; null while
  // the frame travels in `frame` (live mode, short frames: see the top).
  hal::Packet* pkt = nullptr;
  packet::LayerOffsets ofs;
  flow::Miniflow key;  // the parsed key (in_port, recirc_id and all)
  // Type::miss: later packets with the very same key that missed while
  // this one was up; executed with its answer (the handler never sees them).
  FollowerBlock* followers = nullptr;
  // Type::miss, PMD-private: the next older miss record up in the same slot
  // of the PMD's pending table (Pmd::pending_); the handler never touches it.
  Upcall* pending_next = nullptr;
  Upcall* free_next = nullptr;  // the channel's free pool
  // The frame when pkt is null: its bytes, and what the buffer carried
  // (restored into a fresh buffer of `backend` before execution).
  uint16_t frame_len = 0;
  uint16_t frame_in_port = 0;
  uint16_t frame_rx_port = 0;  // drop accounting (drop_stats.h): the port it was received on
  bool frame_token = false;    // ... and whether it held the received packet's fate token
  bool frame_rss_valid = false, frame_mark_valid = false;
  uint32_t frame_rss = 0;
  hal::PacketMeta frame_meta;
  hal::Backend* frame_backend = nullptr;
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
  // `actions` are the `install` megaflow's (freed with it, never on their
  // own); false: the record's own, freed when it is spent.
  bool actions_shared = false;
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

  alignas(8) uint8_t frame[kUpcallFrameInline];

  // The frame's bytes, wherever they are (the handler's view).
  std::span<const uint8_t> frame_bytes() const noexcept {
    return pkt ? std::span<const uint8_t>(pkt->data(), pkt->len()) : std::span<const uint8_t>(frame, frame_len);
  }
  uint32_t frame_length() const noexcept { return pkt ? pkt->len() : frame_len; }
};

class UpcallChannel {
 public:
  explicit UpcallChannel(uint32_t records = kDefaultUpcallRecords)
      : capacity_(records < kUpcallControlReserve + 1 ? kUpcallControlReserve + 1 : records),
        storage_(sizeof(Upcall) * size_t{capacity_}),
        records_(reinterpret_cast<Upcall*>(storage_.data())) {
    for (auto& l : lanes_) l = std::make_unique<Lane>(capacity_);
  }
  ~UpcallChannel() {
    // Records are trivially destructible; only the carved ones were built.
    // (The mapping goes with storage_.)
  }
  UpcallChannel(const UpcallChannel&) = delete;
  UpcallChannel& operator=(const UpcallChannel&) = delete;

  uint32_t capacity() const noexcept { return capacity_; }
  // Records built so far (the most that were ever in use at once, give or
  // take those on their way back): the PMD thread, or anyone while it is
  // stopped.
  uint32_t carved() const noexcept { return fresh_; }

  // --- PMD side ---
  // A free record (newest freed first), or null when none is.
  Upcall* take() noexcept {
    if (!local_) {
      // What the handlers returned since the last look, whole.
      if (free_head_.load(std::memory_order_relaxed))
        local_ = free_head_.exchange(nullptr, std::memory_order_acquire);
      if (!local_) {
        if (fresh_ == capacity_) return nullptr;
        ++taken_;
        return new (&records_[fresh_++]) Upcall;
      }
    }
    Upcall* u = local_;
    local_ = u->free_next;
    u->free_next = nullptr;
    ++taken_;
    return u;
  }
  // take() unless no more than `reserve` records are free (counted from
  // what the PMD took and the handlers returned, which they count after
  // returning: an estimate on the low side).
  // While the slow path says its flow limit is reached (set_shallow), only
  // kUpcallShallowRecords may be in use: see there.
  // `debug fault upcall-queue-full` (core/fault.h) makes it find none.
  Upcall* take_above(unsigned reserve) noexcept {
    if (fault::hit(fault::Point::upcall_queue_full)) [[unlikely]]
      return nullptr;
    const uint32_t depth = shallow_.load(std::memory_order_relaxed) && capacity_ > kUpcallShallowRecords
                               ? kUpcallShallowRecords
                               : capacity_;
    const uint32_t used = in_use();
    return used < depth && depth - used > reserve ? take() : nullptr;
  }
  // Records taken and not recycled yet (up, answered, executed and not yet
  // back in the free pool): the PMD's view, an estimate on the high side.
  uint32_t in_use() const noexcept {
    return static_cast<uint32_t>(taken_ - recycled_.load(std::memory_order_relaxed));
  }
  // Records take() would hand out now, at least (handlers only add to it).
  uint32_t available() const noexcept { return capacity_ - in_use(); }
  // one_queue: queue 0 whatever the count (an offline run's PMD: its one
  // handler must see the records in the order they were sent).
  void submit(Upcall* u, bool one_queue = false) noexcept {
    const unsigned n = one_queue ? 1 : n_queues_.load(std::memory_order_relaxed);
    const unsigned q = n > 1 ? u->hash % n : 0;
    u->queue = static_cast<uint8_t>(q);
    if (q >= lanes_used_) lanes_used_ = q + 1;
    (void)lanes_[q]->queue.push(u);
    in_flight_.store(in_flight_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  // The next answer, from any lane (each lane in turn).
  bool answered(Upcall*& u) noexcept {
    for (unsigned i = 0; i < lanes_used_; ++i) {
      const unsigned q = answer_lane_ + i < lanes_used_ ? answer_lane_ + i : answer_lane_ + i - lanes_used_;
      if (lanes_[q]->done.pop(u)) {
        answer_lane_ = q + 1 < lanes_used_ ? q + 1 : 0;
        return true;
      }
    }
    return false;
  }
  void executed(Upcall* u) noexcept {
    (void)lanes_[u->queue]->spent.push(u);
    in_flight_.store(in_flight_.load(std::memory_order_relaxed) - 1, std::memory_order_release);
  }
  // Packets handed up and not executed yet (written by the PMD only).
  uint32_t in_flight() const noexcept { return in_flight_.load(std::memory_order_acquire); }

  // --- handler side ---
  // The flow limit is reached (true: misses are answered without installs)
  // or no longer (false): any handler, relaxed (a stale value costs a few
  // records more or fewer up, nothing else).
  void set_shallow(bool on) noexcept {
    if (shallow_.load(std::memory_order_relaxed) != on) shallow_.store(on, std::memory_order_relaxed);
  }
  bool shallow() const noexcept { return shallow_.load(std::memory_order_relaxed); }
  // The queue count: 1..kMaxUpcallQueues (clamped).
  void set_queues(unsigned n) noexcept {
    n_queues_.store(n < 1 ? 1 : n > kMaxUpcallQueues ? kMaxUpcallQueues : n, std::memory_order_relaxed);
  }
  unsigned queues() const noexcept { return n_queues_.load(std::memory_order_relaxed); }
  // A record from queue q (handler h of n polls every q with q % n == h).
  bool next(unsigned q, Upcall*& u) noexcept { return lanes_[q]->queue.pop(u); }
  // A record from any queue (draining the channel: nobody else polls).
  bool next(Upcall*& u) noexcept {
    for (auto& l : lanes_)
      if (l->queue.pop(u)) return true;
    return false;
  }
  void answer(Upcall* u) noexcept { (void)lanes_[u->queue]->done.push(u); }
  // An executed record of lane q (its handler), or of any lane (draining).
  bool next_spent(unsigned q, Upcall*& u) noexcept { return lanes_[q]->spent.pop(u); }
  bool next_spent(Upcall*& u) noexcept {
    for (auto& l : lanes_)
      if (l->spent.pop(u)) return true;
    return false;
  }
  // Clears what the answer and the execution left and returns records to
  // the free pool (any thread; one compare-and-swap per call).
  void recycle(Upcall* u) noexcept { recycle(std::span<Upcall* const>(&u, 1)); }
  void recycle(std::span<Upcall* const> us) noexcept {
    if (us.empty()) return;
    for (size_t i = 0; i < us.size(); ++i) {
      Upcall* u = us[i];
      u->install = nullptr;
      u->actions = nullptr;
      u->actions_shared = false;
      u->install_failed = false;
      u->account_existing = false;
      u->drop_reason = 0;
      u->uncounted_packets = 0;
      u->uncounted_bytes = 0;
      u->pkt = nullptr;
      u->n_followers = 0;
      u->followers = nullptr;
      u->free_next = i + 1 < us.size() ? us[i + 1] : nullptr;
    }
    Upcall* last = us.back();
    Upcall* head = free_head_.load(std::memory_order_relaxed);
    do {
      last->free_next = head;
    } while (!free_head_.compare_exchange_weak(head, us.front(), std::memory_order_release,
                                               std::memory_order_relaxed));
    recycled_.fetch_add(us.size(), std::memory_order_relaxed);
  }

 private:
  struct Lane {
    explicit Lane(uint32_t n) : queue(n), done(n), spent(n) {}
    SpscRing<Upcall*> queue, done, spent;
  };
  const uint32_t capacity_;
  // capacity_ records' room in an anonymous mapping (core/lazy_array.h):
  // address space until a storm carves them, never the malloc heap.
  LazyArray<unsigned char> storage_;
  Upcall* const records_;  // capacity_ records, built when first taken (fresh_)
  std::array<std::unique_ptr<Lane>, kMaxUpcallQueues> lanes_;
  // PMD-private.
  Upcall* local_ = nullptr;   // free records taken from free_head_
  uint32_t fresh_ = 0;        // records_[fresh_..] never handed out
  uint64_t taken_ = 0;        // records ever handed out
  unsigned lanes_used_ = 1;   // lanes [0, lanes_used_) may hold answers
  unsigned answer_lane_ = 0;  // where answered() looks first
  alignas(64) std::atomic<Upcall*> free_head_{nullptr};
  std::atomic<uint64_t> recycled_{0};
  alignas(64) std::atomic<uint32_t> in_flight_{0};
  std::atomic<unsigned> n_queues_{1};
  std::atomic<bool> shallow_{false};
};

}  // namespace keel::datapath

// hal::Packet — the packet buffer the datapath sees, whatever the NIC.
//
// One cache-line descriptor that both backends fill, so the datapath is
// written once and compiled once, with inline accessors and no virtual call
// per packet (OVS's dp_packet plays the same role over DPDK mbufs):
//
//   * sim backend:  the descriptor heads a buffer of a hal::sim pool; the
//                   frame lives in the same allocation after kHeadroom bytes.
//   * dpdk backend: the descriptor lives in the mbuf's private area (the pool
//                   is created with priv_size = sizeof(Packet)), `owner_`
//                   points back to the rte_mbuf; rx fills it, tx writes the
//                   data offset and length back into the mbuf.
//
// Which backend owns a buffer is `source()`; release() switches on it (a
// predictable branch, not an indirect call). A build without DPDK has only
// the sim source.
//
// Life cycle: a Packet is owned by exactly one party at a time. Port::rx()
// hands ownership to the caller; Port::tx() takes ownership of every packet
// passed to it (sent or dropped); anything the datapath drops it releases
// with release()/release_burst(). Packets move between threads only through
// rings, which publish them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace keel::hal {

inline constexpr unsigned kMaxBurst = 32;        // packets per rx/tx burst
inline constexpr unsigned kHeadroom = 128;       // bytes before the frame for pushes
inline constexpr unsigned kBufferSize = 2048;    // frame bytes after the headroom (standard buffer)
inline constexpr uint16_t kInvalidPort = 0xffff;

// Port MTUs (Open vSwitch's Interface mtu_request): the L3 payload size, so
// a frame may be MTU + 14 (Ethernet header) + 4 per VLAN tag bytes long. The
// range is 68 (RFC 791's minimum, OVS's DUMMY_MIN_MTU / RTE_ETHER_MIN_MTU)
// to 9216 (the usual data-centre switch maximum; OVS allows 65535 on dummy
// ports and 9702 on DPDK ports, keel stops at what its buffers carry).
inline constexpr uint32_t kMinMtu = 68;
inline constexpr uint32_t kDefaultMtu = 1500;
inline constexpr uint32_t kMaxMtu = 9216;
inline constexpr uint32_t kEthHeaderLen = 14;
inline constexpr uint32_t kVlanHeaderLen = 4;
// The longest frame a port may receive or send: the largest MTU with an
// Ethernet header and two VLAN tags (OVS's ETHER_HDR_MAX_LEN less the CRC).
inline constexpr uint32_t kMaxFrameLen = kMaxMtu + kEthHeaderLen + 2 * kVlanHeaderLen;  // 9238
// Frame bytes of a jumbo buffer: kMaxFrameLen rounded up so a sim buffer
// (descriptor + headroom + frame) stays a whole number of cache lines.
inline constexpr unsigned kJumboBufferSize = (kMaxFrameLen + 63) / 64 * 64;  // 9280
static_assert(kJumboBufferSize >= kMaxFrameLen && kJumboBufferSize % 64 == 0);
// The largest MTU whose frames (with one VLAN tag) fit a standard buffer.
inline constexpr uint32_t kStandardBufferMtu = kBufferSize - kEthHeaderLen - 2 * kVlanHeaderLen;

enum class BufferSource : uint8_t { sim = 0, dpdk = 1 };

// Datapath metadata carried with a packet; zeroed at rx.
struct PacketMeta {
  uint32_t recirc_id = 0;  // datapath recirculation id
  uint32_t dp_hash = 0;    // set by the hash() action
  uint32_t pkt_mark = 0;   // skb-mark style metadata
  uint32_t flow_mark = 0;  // NIC flow mark (rte_flow MARK) when has_flow_mark()
};

class alignas(64) Packet {
 public:
  // --- frame ---
  uint8_t* data() const { return data_; }
  uint32_t len() const { return len_; }
  std::span<uint8_t> bytes() const { return {data_, len_}; }

  uint32_t headroom() const { return static_cast<uint32_t>(data_ - buf_); }
  uint32_t tailroom() const { return buf_len_ - headroom() - len_; }

  // Grows the frame at the front by n bytes (e.g. push_vlan, tunnel push);
  // returns the new start, or nullptr when the headroom is too small.
  uint8_t* push_front(uint32_t n) {
    if (n > headroom()) return nullptr;
    data_ -= n;
    len_ += n;
    return data_;
  }
  // Removes n bytes at the front (pop_vlan, tunnel pop); false if n > len.
  bool pull_front(uint32_t n) {
    if (n > len_) return false;
    data_ += n;
    len_ -= n;
    return true;
  }
  // Sets the frame length (truncate or extend into the tailroom).
  bool set_len(uint32_t n) {
    if (n > len_ + tailroom()) return false;
    len_ = n;
    return true;
  }

  // --- receive metadata from the NIC ---
  uint16_t in_port() const { return in_port_; }
  void set_in_port(uint16_t p) { in_port_ = p; }
  // Drop accounting (datapath/drop_stats.h). Port::rx marks each packet it
  // hands out as received on its port: rx_port() is that port whatever
  // in_port becomes later (tnl_pop sets in_port to the vport), and the
  // packet carries the one "fate token" of what was received: the
  // datapath counts the received packet's fate (forwarded, to the slow
  // path, dropped and why) exactly once, through the instance that holds
  // the token. A copy (clone, a non-final output) gets the rx port and no
  // token; the datapath moves the token between instances of one packet
  // (execute.cpp). A buffer the datapath makes itself (control-plane
  // frames) has neither.
  uint16_t rx_port() const { return rx_port_; }
  bool has_fate_token() const { return flags_ & kFateToken; }
  void set_fate_token(bool on) {
    flags_ = static_cast<uint8_t>(on ? flags_ | kFateToken : flags_ & ~kFateToken);
  }
  void set_rx_port(uint16_t p) { rx_port_ = p; }
  // What Port::rx does to every packet it returns.
  void mark_received(uint16_t port) {
    in_port_ = rx_port_ = port;
    flags_ |= kFateToken;
  }
  bool has_rss_hash() const { return flags_ & kRssValid; }
  uint32_t rss_hash() const { return rss_hash_; }
  // Forgets the RSS hash (a decapsulated packet: the NIC hashed its outer
  // headers; OVS's dp_packet_reset_offload on tunnel pop).
  void clear_rss_hash() {
    rss_hash_ = 0;
    flags_ &= static_cast<uint8_t>(~kRssValid);
  }
  void set_rss_hash(uint32_t h) {
    rss_hash_ = h;
    flags_ |= kRssValid;
  }
  bool has_flow_mark() const { return flags_ & kMarkValid; }
  void set_flow_mark(uint32_t m) {
    meta_.flow_mark = m;
    flags_ |= kMarkValid;
  }

  PacketMeta& meta() { return meta_; }
  const PacketMeta& meta() const { return meta_; }

  // --- ownership (backends only) ---
  BufferSource source() const { return source_; }
  void* owner() const { return owner_; }

  // Backends call this when a buffer (re)enters the datapath.
  void reset(BufferSource src, void* owner, uint8_t* buf, uint32_t buf_len, uint8_t* data,
             uint32_t len) {
    data_ = data;
    len_ = len;
    in_port_ = kInvalidPort;
    rx_port_ = kInvalidPort;
    flags_ = 0;
    source_ = src;
    rss_hash_ = 0;
    meta_ = {};
    buf_ = buf;
    buf_len_ = buf_len;
    owner_ = owner;
  }

 private:
  static constexpr uint8_t kRssValid = 1;
  static constexpr uint8_t kMarkValid = 2;
  static constexpr uint8_t kFateToken = 4;

  // Hot fields first: the parser and EMC read data_/len_/rss_hash_/in_port_.
  uint8_t* data_ = nullptr;
  uint32_t len_ = 0;
  uint16_t in_port_ = kInvalidPort;
  uint8_t flags_ = 0;
  BufferSource source_ = BufferSource::sim;
  uint32_t rss_hash_ = 0;
  PacketMeta meta_;
  uint16_t rx_port_ = kInvalidPort;  // see rx_port(): in the padding before buf_
  uint8_t* buf_ = nullptr;  // start of the buffer (headroom begins here)
  uint32_t buf_len_ = 0;    // headroom + frame + tailroom
  void* owner_ = nullptr;   // sim::Pool* or rte_mbuf*
};
static_assert(sizeof(Packet) == 64, "one cache line: it sits in the mbuf private area");

// Backend release functions (direct calls, defined in hal/sim and hal/dpdk).
namespace sim {
void release(Packet* p) noexcept;
}
#if KEEL_HAL_WITH_DPDK
namespace dpdk {
void release(Packet* p) noexcept;
}
#endif

inline void release(Packet* p) noexcept {
#if KEEL_HAL_WITH_DPDK
  if (p->source() == BufferSource::dpdk) {
    dpdk::release(p);
    return;
  }
#endif
  sim::release(p);
}

inline void release_burst(std::span<Packet* const> pkts) noexcept {
  for (Packet* p : pkts) release(p);
}

}  // namespace keel::hal

// hal::Port's non-virtual control-path pieces: role names and counter sums.
//
// The per-queue counters live in Port (port.h); each has one writer, the
// thread that owns the queue. counters() runs on the control thread and sums
// every queue with relaxed loads: a total may be one burst old and the rx and
// tx halves are not a snapshot of one instant, which is what `show ports`
// needs and all it can get without making the PMD pay for a lock.
//
// set_mtu(), set_link(), mac(), tx_link_down() and tx_over_mtu() are here too: the first is control-path code,
// the second runs only for a burst that holds a frame over the MTU.
//
// Thread-safety: to_string() is pure. set_mtu() runs on the control thread
// (one at a time, serialised by the ofproto writer lock); its stores are
// relaxed, so a PMD's burst in flight finishes with the old limit.
// tx_over_mtu() is tx(): the thread owning queue q. counters() may run concurrently with
// rx()/tx() on any queue. clear_counters() stores zeros with relaxed stores;
// run it only while no PMD polls the port, or a concurrent bump() (a
// load+store, not a read-modify-write) may write back a pre-clear value.
#include "keel/hal/port.h"

#include "keel/hal/flow.h"

namespace keel::hal {

const char* to_string(PortRole r) {
  switch (r) {
    case PortRole::uplink:
      return "uplink";
    case PortRole::host_representor:
      return "host-representor";
    case PortRole::vf:
      return "vf";
    case PortRole::internal:
      return "internal";
  }
  return "unknown";
}

Status Port::set_mtu(uint32_t mtu) {
  if (mtu < kMinMtu || mtu > kMaxMtu)
    return invalid("port " + name() + ": mtu_request " + std::to_string(mtu) + " out of range (" +
                   std::to_string(kMinMtu) + ".." + std::to_string(kMaxMtu) + ")");
  if (mtu == this->mtu()) return {};
  if (Status st = apply_mtu(mtu); !st.ok())
    return st.prefix("port " + name() + ": mtu_request " + std::to_string(mtu));
  mtu_.store(mtu, std::memory_order_relaxed);
  store_frame_limit(frame_limit_for(mtu));
  return {};
}

Status Port::set_queue_count(uint16_t n_rx, uint16_t n_tx) {
  if (n_rx < 1 || n_rx > kMaxQueues || n_tx < 1 || n_tx > kMaxQueues)
    return invalid("port " + name() + ": " + std::to_string(n_rx) + " rx / " + std::to_string(n_tx) +
                   " tx queues out of range (1.." + std::to_string(kMaxQueues) + ")");
  if (n_rx == n_rxq() && n_tx == n_txq()) return {};
  if (Status st = apply_queue_count(n_rx, n_tx); !st.ok()) return st;
  set_queues(n_rx, n_tx < 1 ? 1 : n_tx);
  return {};
}

uint16_t Port::tx_over_mtu(uint16_t q, std::span<Packet* const> pkts) noexcept {
  const TxFrameLimit lim = tx_frame_limit();
  uint16_t sent = 0;
  uint64_t over = 0;
  Packet* fit[kMaxBurst];
  for (size_t at = 0; at < pkts.size();) {
    unsigned n = 0;
    uint64_t bytes = 0;
    for (; at < pkts.size() && n < kMaxBurst; ++at) {
      Packet* p = pkts[at];
      const uint32_t len = p->len();
      uint32_t max = lim.untagged;
      if (len > max && len >= kEthHeaderLen && p->data()[12] == 0x81 && p->data()[13] == 0x00)
        max = lim.tagged;
      if (len > max) {
        release(p);
        ++over;
        continue;
      }
      fit[n++] = p;
      bytes += len;
    }
    if (n) sent = static_cast<uint16_t>(sent + tx_fitting(q, {fit, n}, bytes));
  }
  if (over) bump(txc_[q].dropped, over), bump(txc_[q].mtu_dropped, over);
  return sent;
}

uint16_t Port::run_hw_ingress(HwIngress& hw, uint16_t q, std::span<Packet*> pkts) noexcept {
  const uint16_t kept = hw.ingress(*this, q, pkts);
  return kept <= pkts.size() ? kept : static_cast<uint16_t>(pkts.size());
}

uint16_t Port::tx_link_down(uint16_t q, std::span<Packet* const> pkts) noexcept {
  release_burst(pkts);
  bump(txc_[q].dropped, pkts.size());
  bump(txc_[q].link_dropped, pkts.size());
  return 0;
}

Status Port::set_link(bool up) {
  if (Status st = apply_link(up); !st.ok()) return st.prefix("port " + name() + ": link " + (up ? "up" : "down"));
  return {};
}

MacAddr Port::mac() const {
  if (has_mac_) return mac_;
  // Open vSwitch's dummy ports: aa:55 then a 32-bit number counting from
  // 0xaa550000 (netdev-dummy.c), so aa:55:aa:55:HH:LL; ours is 0xaa550000
  // plus the datapath port number.
  return {0xaa, 0x55, 0xaa, 0x55, static_cast<uint8_t>(id_ >> 8), static_cast<uint8_t>(id_)};
}

std::string format_mac(const MacAddr& m) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < m.size(); ++i) {
    if (i) s += ':';
    s += kHex[m[i] >> 4];
    s += kHex[m[i] & 15];
  }
  return s;
}

PortCounters Port::counters() const {
  PortCounters c;
  constexpr auto relaxed = std::memory_order_relaxed;
  // All kMaxQueues, not just n_rxq/n_txq: a queue the port no longer uses
  // keeps what it counted.
  for (const QueueCounters& q : rxc_) {
    c.rx_packets += q.packets.load(relaxed);
    c.rx_bytes += q.bytes.load(relaxed);
    c.rx_dropped += q.dropped.load(relaxed);
    c.rx_hw_forwarded += q.hw_forwarded.load(relaxed);
    c.rx_hw_dropped += q.hw_dropped.load(relaxed);
  }
  for (const QueueCounters& q : txc_) {
    c.tx_packets += q.packets.load(relaxed);
    c.tx_bytes += q.bytes.load(relaxed);
    c.tx_dropped += q.dropped.load(relaxed);
    c.tx_mtu_exceeded_drops += q.mtu_dropped.load(relaxed);
    c.tx_link_down_drops += q.link_dropped.load(relaxed);
  }
  c.tx_hw_dropped = hw_tx_dropped_.load(relaxed);
  return c;
}

void Port::clear_counters() {
  constexpr auto relaxed = std::memory_order_relaxed;
  for (auto* set : {&rxc_, &txc_}) {
    for (QueueCounters& q : *set) {
      q.packets.store(0, relaxed);
      q.bytes.store(0, relaxed);
      q.dropped.store(0, relaxed);
      q.mtu_dropped.store(0, relaxed);
      q.link_dropped.store(0, relaxed);
      q.hw_forwarded.store(0, relaxed);
      q.hw_dropped.store(0, relaxed);
    }
  }
  hw_tx_dropped_.store(0, relaxed);
}

}  // namespace keel::hal

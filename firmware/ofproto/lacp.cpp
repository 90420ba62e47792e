// LACP for a bond (lacp.h has the design). The machines follow Open
// vSwitch 3.1's lib/lacp.c state for state, so that keel and Open vSwitch
// agree on every bit of a LACPDU and every line of lacp-show:
//
//   * receive (process_packet): a valid LACPDU makes the member `current`
//     and arms its receive timer for 3x the *actor's* transmit period
//     (lacp-time); a partner that changed asks for update_attached();
//   * timers (run): current -> expired (partner assumed fast and out of
//     sync, 3 s more) -> defaulted (partner forgotten); then the
//     aggregation decision if anything changed; then a PDU on each member
//     that may send when its periodic timer ran out (the *partner's*
//     timeout bit picks 1 s or 30 s) or when what the partner last told us
//     about ourselves differs from what we would now say;
//   * a new member of an active actor starts `expired` (3 s to hear from a
//     partner before it is defaulted), of a passive one `defaulted`.
//
// Time is the caller's now_ms (the maintenance thread's clock, or a test's);
// the member timers are absolute deadlines in that clock. Nothing here
// sleeps, allocates per byte received, or reads past a frame.
//
// Thread-safety: as lacp.h — every public method takes mu_; Impl is only
// touched under it.
#include "ofproto/lacp.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace keel::ofproto {

namespace {

constexpr uint64_t kFastTxMs = 1000;    // LACP_FAST_TIME_TX
constexpr uint64_t kSlowTxMs = 30000;   // LACP_SLOW_TIME_TX
constexpr uint64_t kRxMultiplier = 3;   // receive timeout = 3 transmit periods

// The LACPDU after the Ethernet header: subtype, version, actor TLV (type 1,
// length 20: 15 bytes of info + 3 reserved), partner TLV (2, 20), collector
// TLV (3, 16: max delay + 12 reserved), terminator (0, 0), 50 reserved.
constexpr size_t kEthHeaderLen = 14;
constexpr size_t kPduLen = 110;
constexpr size_t kActorTlv = 2, kPartnerTlv = 22, kCollectorTlv = 42, kTerminatorTlv = 58;
constexpr size_t kInfoTlvLen = 20, kCollectorTlvLen = 16;
static_assert(kTerminatorTlv + 2 + 50 == kPduLen, "802.1AX-2008 LACPDU: 110 bytes after the EtherType");
constexpr uint8_t kSubtypeLacp = 1, kSubtypeMarker = 2;

uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

LacpInfo get_info(const uint8_t* p) {
  LacpInfo i;
  i.sys_priority = get16(p);
  std::memcpy(i.sys_id.b, p + 2, 6);
  i.key = get16(p + 8);
  i.port_priority = get16(p + 10);
  i.port_id = get16(p + 12);
  i.state = p[14];
  return i;
}
void put_info(uint8_t* p, const LacpInfo& i) {
  put16(p, i.sys_priority);
  std::memcpy(p + 2, i.sys_id.b, 6);
  put16(p + 8, i.key);
  put16(p + 10, i.port_priority);
  put16(p + 12, i.port_id);
  p[14] = i.state;
}

enum class PduKind : uint8_t { lacp, marker, bad };

// Classifies `frame` as parse_lacpdu's contract says. Accepted: a
// slow-protocol frame (untagged, or behind one 802.1Q/802.1ad tag, as
// Open vSwitch) with at least 110 bytes after the EtherType (shorter is bad
// whatever its subtype, as Open vSwitch), subtype 1, a
// version other than 0, actor TLV (1, 20), partner TLV (2, 20); version 1
// must also carry the collector TLV (3, 16) and the terminator (0, 0) where
// 802.1AX-2008 puts them. A later version may put other TLVs there
// (802.1AX-2014's v2 has extra TLVs) and a v1 receiver interprets only the
// v1 fields. Subtype 2 is a Marker PDU (counted apart, as Open vSwitch).
PduKind classify(std::span<const uint8_t> frame, LacpPdu* out) {
  // The EtherType, after one VLAN tag if there is one: Open vSwitch hands
  // LACP a frame whose flow dl_type is 0x8809 and reads the PDU at its L3
  // offset; under its default other_config:vlan-limit=1 that is through
  // one tag, never two (checked live: a single-tagged LACPDU is processed,
  // a double-tagged one never reaches LACP).
  size_t type_at = 12;
  if (frame.size() >= 14) {
    const uint16_t t = get16(frame.data() + 12);
    if (t == 0x8100 || t == 0x88a8) type_at = 16;
  }
  const size_t l3 = type_at + 2;
  if (frame.size() < l3 + kPduLen || get16(frame.data() + type_at) != kEthTypeSlowProtocols) return PduKind::bad;
  const uint8_t* p = frame.data() + l3;
  if (p[0] == kSubtypeMarker) return PduKind::marker;
  if (p[0] != kSubtypeLacp || p[1] == 0) return PduKind::bad;
  if (p[kActorTlv] != 1 || p[kActorTlv + 1] != kInfoTlvLen) return PduKind::bad;
  if (p[kPartnerTlv] != 2 || p[kPartnerTlv + 1] != kInfoTlvLen) return PduKind::bad;
  if (p[1] == 1) {
    if (p[kCollectorTlv] != 3 || p[kCollectorTlv + 1] != kCollectorTlvLen) return PduKind::bad;
    if (p[kTerminatorTlv] != 0 || p[kTerminatorTlv + 1] != 0) return PduKind::bad;
  }
  if (out) {
    out->actor = get_info(p + kActorTlv + 2);
    out->partner = get_info(p + kPartnerTlv + 2);
    out->collector_max_delay = p[1] == 1 ? get16(p + kCollectorTlv + 2) : 0;
  }
  return PduKind::lacp;
}

// Whether `a` and `b` differ in a way that needs a PDU (802.1AX: port,
// port priority, system, system priority, key, and the activity, timeout,
// synchronization and aggregation bits).
bool tx_equal(const LacpInfo& a, const LacpInfo& b) {
  constexpr uint8_t bits = kLacpStateActivity | kLacpStateTimeout | kLacpStateSync | kLacpStateAggregation;
  return !((a.state ^ b.state) & bits) && a.port_id == b.port_id && a.port_priority == b.port_priority &&
         a.key == b.key && a.sys_priority == b.sys_priority && a.sys_id == b.sys_id;
}

// Link priority for choosing the lead member: the info of the system with
// the better (lower) priority, then lower MAC; key and state don't count.
// Compared as a tuple in the order Open vSwitch's memcmp of the
// network-order struct gives: system priority, system id, port priority,
// port id.
struct Priority {
  uint16_t sys_priority;
  std::array<uint8_t, 6> sys_id;
  uint16_t port_priority, port_id;
  auto operator<=>(const Priority&) const = default;
};
Priority priority_of(const LacpInfo& i) {
  Priority p{i.sys_priority, {}, i.port_priority, i.port_id};
  std::memcpy(p.sys_id.data(), i.sys_id.b, 6);
  return p;
}

std::string mac_str(const flow::EthAddr& a) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", a.b[0], a.b[1], a.b[2], a.b[3], a.b[4], a.b[5]);
  return buf;
}

void put_state(std::string& s, uint8_t state) {
  static constexpr std::pair<uint8_t, const char*> words[] = {
      {kLacpStateActivity, " activity"},         {kLacpStateTimeout, " timeout"},
      {kLacpStateAggregation, " aggregation"},   {kLacpStateSync, " synchronized"},
      {kLacpStateCollecting, " collecting"},     {kLacpStateDistributing, " distributing"},
      {kLacpStateDefaulted, " defaulted"},       {kLacpStateExpired, " expired"},
  };
  for (auto [bit, word] : words)
    if (state & bit) s += word;
}

const char* status_word(LacpMemberStatus s) {
  switch (s) {
    case LacpMemberStatus::current: return "current";
    case LacpMemberStatus::expired: return "expired";
    case LacpMemberStatus::defaulted: return "defaulted";
  }
  return "defaulted";
}

}  // namespace

std::optional<LacpPdu> parse_lacpdu(std::span<const uint8_t> frame) {
  LacpPdu pdu;
  if (classify(frame, &pdu) != PduKind::lacp) return std::nullopt;
  return pdu;
}

std::vector<uint8_t> compose_lacpdu(const LacpPdu& pdu, const flow::EthAddr& src) {
  std::vector<uint8_t> f(kEthHeaderLen + kPduLen, 0);
  std::memcpy(f.data(), kLacpDstMac.b, 6);
  std::memcpy(f.data() + 6, src.b, 6);
  put16(f.data() + 12, kEthTypeSlowProtocols);
  uint8_t* p = f.data() + kEthHeaderLen;
  p[0] = kSubtypeLacp;
  p[1] = 1;
  p[kActorTlv] = 1;
  p[kActorTlv + 1] = kInfoTlvLen;
  put_info(p + kActorTlv + 2, pdu.actor);
  p[kPartnerTlv] = 2;
  p[kPartnerTlv + 1] = kInfoTlvLen;
  put_info(p + kPartnerTlv + 2, pdu.partner);
  p[kCollectorTlv] = 3;
  p[kCollectorTlv + 1] = kCollectorTlvLen;
  put16(p + kCollectorTlv + 2, pdu.collector_max_delay);
  return f;  // terminator and reserved bytes: zero
}

struct Lacp::Impl {
  struct Member {
    LacpMemberSettings cfg;
    LacpMemberStatus status = LacpMemberStatus::defaulted;
    bool attached = false;
    bool carrier_up = true;
    LacpInfo partner{};
    LacpInfo ntt_actor{};      // what the partner last said we are (or what we last sent)
    uint64_t tx_deadline = 0;  // 0: send at the next run()
    uint64_t rx_deadline = 0;
    LacpCounters counters;
  };

  LacpSettings s;
  std::vector<Member> members;
  size_t key_member = 0;  // whose key (or port id) is the aggregation key
  bool negotiated = false;
  bool update = true;     // update_attached() due
  bool started = false;   // rx deadlines set before the first now_ms are relative
  uint64_t now = 0;       // the latest now_ms seen

  void clock(uint64_t now_ms) {
    if (!started) {
      started = true;
      for (auto& m : members) m.rx_deadline += now_ms;
    }
    now = std::max(now, now_ms);
  }

  void set_defaulted(Member& m) {
    m.partner = LacpInfo{};
    m.status = LacpMemberStatus::defaulted;
    update = true;
  }
  void set_expired(Member& m) {
    m.status = LacpMemberStatus::expired;
    m.partner.state |= kLacpStateTimeout;
    m.partner.state &= static_cast<uint8_t>(~kLacpStateSync);
    m.rx_deadline = (started ? now : 0) + kRxMultiplier * kFastTxMs;
  }

  uint16_t key() const {
    const auto& k = members[key_member].cfg;
    return k.key ? k.key : k.port_id;
  }

  LacpInfo actor(const Member& m) const {
    uint8_t st = 0;
    if (s.active) st |= kLacpStateActivity;
    if (s.fast) st |= kLacpStateTimeout;
    if (m.attached) st |= kLacpStateSync;
    if (m.status == LacpMemberStatus::defaulted) st |= kLacpStateDefaulted;
    if (m.status == LacpMemberStatus::expired) st |= kLacpStateExpired;
    if (members.size() > 1) st |= kLacpStateAggregation;
    if (m.attached || !negotiated) st |= kLacpStateCollecting | kLacpStateDistributing;
    LacpInfo a;
    a.state = st;
    a.key = key();
    a.port_priority = m.cfg.port_priority;
    a.port_id = m.cfg.port_id;
    a.sys_priority = s.sys_priority;
    a.sys_id = s.sys_id;
    return a;
  }

  Priority priority(const Member& m) const {
    const uint16_t ours = s.sys_priority, theirs = m.partner.sys_priority;
    bool use_actor;
    if (ours != theirs)
      use_actor = ours < theirs;
    else
      use_actor = std::memcmp(s.sys_id.b, m.partner.sys_id.b, 6) < 0;
    return priority_of(use_actor ? actor(m) : m.partner);
  }

  bool may_enable(const Member& m) const {
    return m.attached && ((m.partner.state & kLacpStateSync) ||
                          (s.fallback_ab && m.status == LacpMemberStatus::defaulted));
  }
  bool may_tx(const Member& m) const {
    return m.carrier_up && (s.active || m.status != LacpMemberStatus::defaulted);
  }

  // Which members are attached (may aggregate), and whether the bond is
  // negotiated: some member not defaulted is attached. The lead is the
  // working (current, attached) member of best priority, else the best of
  // those that attach now; every member must agree with the lead's partner
  // on system id and key, and a member that hears its own system id
  // (looped back to this bond) never attaches.
  void update_attached() {
    update = false;
    const Member* lead = nullptr;
    const Member* lead_current = nullptr;
    Priority lead_pri{};
    bool lead_enable = false;

    for (const auto& m : members) {
      if (m.status == LacpMemberStatus::current && m.attached) {
        Priority pri = priority(m);
        if (!lead_current || pri < lead_pri) {
          lead_current = lead = &m;
          lead_pri = pri;
          lead_enable = true;
        }
      }
    }
    // (Partners don't change below; only `attached` does.)
    const bool have_current = lead_current != nullptr;
    const flow::EthAddr current_sys = have_current ? lead_current->partner.sys_id : flow::EthAddr{};

    for (auto& m : members) {
      m.attached = false;
      if (m.partner.sys_id == s.sys_id) continue;  // loopback
      if (m.status == LacpMemberStatus::defaulted) {
        if (s.fallback_ab) m.attached = true;
        continue;
      }
      Priority pri = priority(m);
      // Open vSwitch asks member_may_enable here, after clearing `attached`:
      // it is always false at this point, so a member found now never wins
      // over a working lead on "enable" alone.
      const bool enable = may_enable(m);
      if (!have_current || m.partner.sys_id == current_sys) m.attached = true;
      if (m.attached && (!lead || enable > lead_enable || (enable == lead_enable && pri < lead_pri))) {
        lead = &m;
        lead_enable = enable;
        lead_pri = pri;
      }
    }

    negotiated = lead != nullptr;
    if (lead) {
      const LacpInfo lp = lead->partner;
      for (auto& m : members) {
        if ((s.fallback_ab && m.status == LacpMemberStatus::defaulted) || lp.key != m.partner.key ||
            !(lp.sys_id == m.partner.sys_id))
          m.attached = false;
      }
    }
  }
};

Lacp::Lacp(const LacpSettings& s, std::vector<LacpMemberSettings> members) : impl_(std::make_shared<Impl>()) {
  impl_->s = s;
  impl_->members.reserve(members.size());
  for (auto& ms : members) {
    Impl::Member m;
    m.cfg = std::move(ms);
    impl_->members.push_back(std::move(m));
  }
  for (size_t i = 0; i < impl_->members.size(); ++i)
    if (impl_->members[i].cfg.port_id < impl_->members[impl_->key_member].cfg.port_id) impl_->key_member = i;
  // As Open vSwitch registers a member: defaulted, then (its port id being
  // new) expired when the actor is active, giving a partner one fast
  // receive timeout to show up.
  for (auto& m : impl_->members) {
    impl_->set_defaulted(m);
    if (impl_->s.active) impl_->set_expired(m);
  }
}

void Lacp::reconfigure(const LacpSettings& s) {
  std::lock_guard lk(mu_);
  Impl& I = *impl_;
  if (!(I.s.sys_id == s.sys_id) || I.s.sys_priority != s.sys_priority) I.update = true;
  if (I.s.fallback_ab != s.fallback_ab) I.update = true;
  I.s = s;
}

bool Lacp::process_packet(size_t member, std::span<const uint8_t> frame, uint64_t now_ms) {
  std::lock_guard lk(mu_);
  Impl& I = *impl_;
  if (member >= I.members.size()) return false;
  I.clock(now_ms);
  auto& m = I.members[member];
  ++m.counters.rx_pdus;  // every slow-protocol frame, as dot3adAggPortStatsLACPDUsRx in Open vSwitch
  LacpPdu pdu;
  switch (classify(frame, &pdu)) {
    case PduKind::lacp: break;
    case PduKind::marker: ++m.counters.rx_marker; return false;
    case PduKind::bad: ++m.counters.rx_bad; return false;
  }
  // A PDU while the carrier is (still) down is dropped, as Open vSwitch
  // does for NICs slow to report link up.
  if (!m.carrier_up) return false;

  m.status = LacpMemberStatus::current;
  m.rx_deadline = I.now + kRxMultiplier * (I.s.fast ? kFastTxMs : kSlowTxMs);
  m.ntt_actor = pdu.partner;
  if (!(m.partner == pdu.actor)) {
    I.update = true;
    m.partner = pdu.actor;
  }
  return true;
}

void Lacp::set_carrier(size_t member, bool up, std::optional<uint64_t> now_ms) {
  std::lock_guard lk(mu_);
  Impl& I = *impl_;
  if (member >= I.members.size()) return;
  if (now_ms) I.clock(*now_ms);
  auto& m = I.members[member];
  if (m.carrier_up == up) return;
  m.carrier_up = up;
  ++m.counters.carrier_changed;
  if (m.status == LacpMemberStatus::current || I.s.active) I.set_expired(m);
}

void Lacp::run(uint64_t now_ms, std::vector<LacpTx>& tx) {
  std::lock_guard lk(mu_);
  Impl& I = *impl_;
  I.clock(now_ms);
  for (auto& m : I.members) {
    if (I.now < m.rx_deadline) continue;
    if (m.status == LacpMemberStatus::current) {
      I.set_expired(m);
      ++m.counters.link_expired;
    } else if (m.status == LacpMemberStatus::expired) {
      I.set_defaulted(m);
      ++m.counters.link_defaulted;
    }
  }
  if (I.update) I.update_attached();

  for (size_t i = 0; i < I.members.size(); ++i) {
    auto& m = I.members[i];
    if (!I.may_tx(m)) continue;
    LacpInfo a = I.actor(m);
    if (I.now < m.tx_deadline && tx_equal(a, m.ntt_actor)) continue;
    m.ntt_actor = a;
    LacpPdu pdu;
    pdu.actor = a;
    pdu.partner = m.partner;
    tx.push_back(LacpTx{i, compose_lacpdu(pdu, m.cfg.mac)});
    ++m.counters.tx_pdus;
    m.tx_deadline = I.now + ((m.partner.state & kLacpStateTimeout) ? kFastTxMs : kSlowTxMs);
  }
}

LacpStatus Lacp::status() const {
  std::lock_guard lk(mu_);
  return impl_->negotiated ? LacpStatus::negotiated : LacpStatus::configured;
}

bool Lacp::may_enable(size_t member) const {
  std::lock_guard lk(mu_);
  return member < impl_->members.size() && impl_->may_enable(impl_->members[member]);
}

bool Lacp::is_current(size_t member) const {
  std::lock_guard lk(mu_);
  return member < impl_->members.size() && impl_->members[member].status != LacpMemberStatus::defaulted;
}

LacpView Lacp::view() const {
  std::lock_guard lk(mu_);
  const Impl& I = *impl_;
  LacpView v;
  v.name = I.s.name;
  v.active = I.s.active;
  v.fast = I.s.fast;
  v.negotiated = I.negotiated;
  v.sys_id = I.s.sys_id;
  v.sys_priority = I.s.sys_priority;
  v.key = I.members.empty() ? 0 : I.key();
  for (const auto& m : I.members) {
    LacpMemberView mv;
    mv.name = m.cfg.name;
    mv.status = m.status;
    mv.attached = m.attached;
    mv.may_enable = I.may_enable(m);
    mv.port_id = m.cfg.port_id;
    mv.port_priority = m.cfg.port_priority;
    mv.actor = I.actor(m);
    mv.partner = m.partner;
    mv.rx_pdus = m.counters.rx_pdus;
    mv.rx_bad = m.counters.rx_bad;
    mv.tx_pdus = m.counters.tx_pdus;
    mv.counters = m.counters;
    v.members.push_back(std::move(mv));
  }
  return v;
}

namespace {
std::vector<const LacpMemberView*> by_name(const LacpView& v) {
  std::vector<const LacpMemberView*> ms;
  for (const auto& m : v.members) ms.push_back(&m);
  std::stable_sort(ms.begin(), ms.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return ms;
}
}  // namespace

std::string format_lacp_show(const LacpView& v) {
  std::string s;
  auto line = [&s](const std::string& text) { s += text; s += '\n'; };
  auto num = [](unsigned n) { return std::to_string(n); };
  line("---- " + v.name + " ----");
  line(std::string("  status: ") + (v.active ? "active" : "passive") + (v.negotiated ? " negotiated" : ""));
  line("  sys_id: " + mac_str(v.sys_id));
  line("  sys_priority: " + num(v.sys_priority));
  line("  aggregation key: " + (v.members.empty() ? std::string("none") : num(v.key)));
  line(std::string("  lacp_time: ") + (v.fast ? "fast" : "slow"));
  for (const LacpMemberView* m : by_name(v)) {
    s += '\n';
    line("member: " + m->name + ": " + status_word(m->status) + (m->attached ? " attached" : " detached"));
    line("  port_id: " + num(m->port_id));
    line("  port_priority: " + num(m->port_priority));
    line(std::string("  may_enable: ") + (m->may_enable ? "true" : "false"));
    s += '\n';
    line("  actor sys_id: " + mac_str(m->actor.sys_id));
    line("  actor sys_priority: " + num(m->actor.sys_priority));
    line("  actor port_id: " + num(m->actor.port_id));
    line("  actor port_priority: " + num(m->actor.port_priority));
    line("  actor key: " + num(m->actor.key));
    s += "  actor state:";
    put_state(s, m->actor.state);
    s += "\n\n";
    line("  partner sys_id: " + mac_str(m->partner.sys_id));
    line("  partner sys_priority: " + num(m->partner.sys_priority));
    line("  partner port_id: " + num(m->partner.port_id));
    line("  partner port_priority: " + num(m->partner.port_priority));
    line("  partner key: " + num(m->partner.key));
    s += "  partner state:";
    put_state(s, m->partner.state);
    s += '\n';
  }
  return s;
}

std::string format_lacp_stats(const LacpView& v) {
  std::string s = "---- " + v.name + " statistics ----\n";
  for (const LacpMemberView* m : by_name(v)) {
    const LacpCounters& c = m->counters;
    s += "\nmember: " + m->name + ":\n";
    s += "  TX PDUs: " + std::to_string(c.tx_pdus) + "\n";
    s += "  RX PDUs: " + std::to_string(c.rx_pdus) + "\n";
    s += "  RX Bad PDUs: " + std::to_string(c.rx_bad) + "\n";
    s += "  RX Marker Request PDUs: " + std::to_string(c.rx_marker) + "\n";
    s += "  Link Expired: " + std::to_string(c.link_expired) + "\n";
    s += "  Link Defaulted: " + std::to_string(c.link_defaulted) + "\n";
    s += "  Carrier Status Changed: " + std::to_string(c.carrier_changed) + "\n";
  }
  return s;
}

}  // namespace keel::ofproto

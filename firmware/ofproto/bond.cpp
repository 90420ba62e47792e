// Bond: see bond.h. The state machine and the rebalancing rule follow Open
// vSwitch 3.1's ofproto/bond.c; the comments name the OVS function each
// piece corresponds to.
//
// Layout: Impl holds the members (configuration order), the 256 bucket ->
// member indexes, each bucket's decayed load (tx_bytes) and the previous
// cumulative datapath reading per bucket, the active member, and the flags
// run() reports (revalidate, learning). `reported_` is the datapath table
// last handed out (by run() or rebalance()), so that run() can say when
// the table the datapath should hold changed for any reason.
//
// Differences from OVS, on purpose:
//   * the bucket map survives reconfiguration (OVS's bond_entry_reset()
//     clears it on a basis/mode change): a hash-basis change only changes
//     which flows fall in which bucket, it does not empty every bucket at
//     once (the traffic drops users reported with many flows);
//   * buckets of a disabled member move to the least loaded enabled member
//     right away (OVS refills them lazily, at random or round-robin, when a
//     packet or a rule update next touches them);
//   * bond-disable-member sticks until bond-enable-member (in OVS the next
//     link-status poll undoes it);
//   * a balance-slb rebalance that moves buckets asks for learning packets.
//
// Thread-safety: see bond.h; every public method locks mu_.
#include "ofproto/bond.h"

#include <algorithm>
#include <cstring>

#include "flow/bundle.h"

namespace keel::ofproto {

namespace {

constexpr unsigned kBuckets = datapath::kBondBuckets;
constexpr int kNone = -1;

bool is_multicast(const flow::EthAddr& a) { return a.b[0] & 1; }

}  // namespace

const char* to_string(BondMode m) {
  switch (m) {
    case BondMode::active_backup:
      return "active-backup";
    case BondMode::balance_slb:
      return "balance-slb";
    case BondMode::balance_tcp:
      return "balance-tcp";
  }
  return "?";
}

const char* to_string(LacpMode m) {
  switch (m) {
    case LacpMode::off:
      return "off";
    case LacpMode::active:
      return "active";
    case LacpMode::passive:
      return "passive";
  }
  return "?";
}

const char* to_string(LacpStatus s) {
  switch (s) {
    case LacpStatus::off:
      return "off";
    case LacpStatus::configured:
      return "configured";
    case LacpStatus::negotiated:
      return "negotiated";
  }
  return "?";
}

std::optional<BondMode> parse_bond_mode(std::string_view s) {
  if (s == "active-backup") return BondMode::active_backup;
  if (s == "balance-slb") return BondMode::balance_slb;
  if (s == "balance-tcp") return BondMode::balance_tcp;
  return std::nullopt;
}

std::optional<LacpMode> parse_lacp_mode(std::string_view s) {
  if (s == "off") return LacpMode::off;
  if (s == "active") return LacpMode::active;
  if (s == "passive") return LacpMode::passive;
  return std::nullopt;
}

BondSettings bond_effective_settings(const BondSettings& in) {
  BondSettings s = in;
  if (s.rebalance_interval_ms && s.rebalance_interval_ms < 1000) s.rebalance_interval_ms = 1000;
  if (s.mode != BondMode::active_backup && !s.lacp_fallback_ab) s.primary.clear();
  if (s.mode != BondMode::balance_tcp) s.lb_output_action = false;
  return s;
}

struct Bond::Impl {
  struct Member {
    BondMemberConfig cfg;
    bool carrier = false;
    bool may_enable = false;
    bool enabled = false;
    bool admin_disabled = false;
    bool seen = false;                      // run() has looked at it once (registration: no delay)
    std::optional<uint64_t> delay_expires;  // updelay/downdelay running (OVS: != LLONG_MAX)
    uint64_t tx_bytes = 0;                  // rebalance scratch: the sum of its buckets' loads
  };

  BondSettings configured;
  BondSettings s;  // bond_effective_settings(configured)
  std::vector<Member> members;
  std::array<int, kBuckets> bucket{};         // member index or kNone
  std::array<uint64_t, kBuckets> tx_bytes{};  // decayed load per bucket
  std::array<uint64_t, kBuckets> prev{};      // last cumulative datapath reading
  std::optional<size_t> active;
  flow::EthAddr active_mac{};
  LacpStatus lacp = LacpStatus::off;
  uint64_t next_rebalance = 0;
  uint64_t now = 0;  // the latest now_ms seen
  bool revalidate = false;
  bool send_learning = false;     // OVS's send_learning_packets
  bool learning_pending = false;  // run() said learning; take_learning_due() clears
  datapath::BondMembers reported{};

  // --- predicates (OVS's names) ---
  bool falling_back_to_ab() const {
    return s.lacp_fallback_ab && s.mode != BondMode::active_backup && lacp == LacpStatus::configured;
  }
  bool may_recirc() const { return s.mode == BondMode::balance_tcp && !falling_back_to_ab(); }
  bool use_lb_output() const { return may_recirc() && s.lb_output_action; }
  bool is_balanced() const {
    return s.rebalance_interval_ms && s.mode != BondMode::active_backup &&
           !(s.lacp_fallback_ab && lacp == LacpStatus::configured);
  }
  bool may_send_learning() const {
    return ((lacp == LacpStatus::off &&
             (s.mode == BondMode::balance_slb || s.mode == BondMode::active_backup)) ||
            (s.lacp_fallback_ab && lacp == LacpStatus::configured)) &&
           active.has_value();
  }
  bool is_primary(size_t i) const { return !s.primary.empty() && members[i].cfg.name == s.primary; }

  // --- member state ---

  // bond_enable_member()
  void enable_member(size_t i, bool enable) {
    Member& m = members[i];
    m.delay_expires.reset();
    if (enable == m.enabled) return;
    revalidate = true;
    m.enabled = enable;
    if (!enable) send_learning = true;
  }

  // bond_link_status_update()
  void link_status_update(size_t i) {
    Member& m = members[i];
    const bool up = m.carrier && m.may_enable && !m.admin_disabled;
    if (!m.seen) {
      // bond_member_register(): a new member starts as its link is, no delay.
      m.seen = true;
      enable_member(i, up);
      return;
    }
    if ((up == m.enabled) != !m.delay_expires.has_value()) {
      if (up == m.enabled) {
        m.delay_expires.reset();
      } else {
        m.delay_expires = now + (up ? s.updelay_ms : s.downdelay_ms);
      }
    }
    if (m.delay_expires && now >= *m.delay_expires) enable_member(i, up);
  }

  std::optional<size_t> find_by_mac(const flow::EthAddr& mac) const {
    if (mac == flow::EthAddr{}) return std::nullopt;
    for (size_t i = 0; i < members.size(); ++i)
      if (members[i].cfg.mac == mac) return i;
    return std::nullopt;
  }

  // bond_choose_member()
  std::optional<size_t> choose_member() const {
    for (size_t i = 0; i < members.size(); ++i)
      if (is_primary(i) && members[i].enabled) return i;
    if (std::optional<size_t> last = find_by_mac(active_mac); last && members[*last].enabled) return last;
    for (size_t i = 0; i < members.size(); ++i)
      if (members[i].enabled) return i;
    // Every member is disabled: the one whose updelay ends first.
    std::optional<size_t> best;
    for (size_t i = 0; i < members.size(); ++i) {
      const Member& m = members[i];
      if (m.delay_expires && m.carrier && m.may_enable && !m.admin_disabled &&
          (!best || *m.delay_expires < *members[*best].delay_expires))
        best = i;
    }
    return best;
  }

  void active_changed() {
    active_mac = active ? members[*active].cfg.mac : flow::EthAddr{};
    revalidate = true;
  }

  // bond_choose_active_member()
  void choose_active_member() {
    const std::optional<size_t> old = active;
    active = choose_member();
    if (active) {
      // No member was enabled: skip the rest of this one's updelay.
      if (!members[*active].enabled) enable_member(*active, true);
      send_learning = true;
      if (active != old) active_changed();
    } else if (old) {
      active_changed();
    }
  }

  // --- buckets ---

  size_t n_enabled() const {
    size_t n = 0;
    for (const Member& m : members) n += m.enabled;
    return n;
  }

  // The member of bucket b as output uses it: its own when enabled, else
  // (until run() moves it) a deterministic enabled one; kNone if none is.
  int effective_member(unsigned b) const {
    const int m = bucket[b];
    if (m != kNone && members[static_cast<size_t>(m)].enabled) return m;
    const size_t n = n_enabled();
    if (!n) return kNone;
    size_t k = b % n;
    for (size_t i = 0; i < members.size(); ++i) {
      if (!members[i].enabled) continue;
      if (k-- == 0) return static_cast<int>(i);
    }
    return kNone;
  }

  // Moves every bucket whose member is not enabled (or that has none) to an
  // enabled member: heaviest bucket first, each to the member that then
  // carries the least load (ties: fewer buckets, then configuration order).
  // True if any bucket moved.
  bool fix_buckets() {
    if (!n_enabled()) return false;
    std::vector<uint64_t> load(members.size(), 0);
    std::vector<unsigned> count(members.size(), 0);
    std::vector<unsigned> orphans;
    for (unsigned b = 0; b < kBuckets; ++b) {
      const int m = bucket[b];
      if (m != kNone && members[static_cast<size_t>(m)].enabled) {
        load[static_cast<size_t>(m)] += tx_bytes[b];
        ++count[static_cast<size_t>(m)];
      } else {
        orphans.push_back(b);
      }
    }
    if (orphans.empty()) return false;
    std::stable_sort(orphans.begin(), orphans.end(),
                     [&](unsigned a, unsigned b) { return tx_bytes[a] > tx_bytes[b]; });
    for (unsigned b : orphans) {
      std::optional<size_t> best;
      for (size_t i = 0; i < members.size(); ++i) {
        if (!members[i].enabled) continue;
        if (!best || load[i] < load[*best] || (load[i] == load[*best] && count[i] < count[*best])) best = i;
      }
      bucket[b] = static_cast<int>(*best);
      load[*best] += tx_bytes[b];
      ++count[*best];
    }
    revalidate = true;
    return true;
  }

  datapath::BondMembers dp_buckets() const {
    datapath::BondMembers t;
    for (unsigned b = 0; b < kBuckets; ++b) {
      const int m = effective_member(b);
      t[b] = m == kNone ? datapath::kNoBondMember : members[static_cast<size_t>(m)].cfg.dp_port;
    }
    return t;
  }

  // bond_hash()
  std::optional<unsigned> bucket_of(const flow::FlowKey& flow, uint16_t vlan) const {
    switch (s.mode) {
      case BondMode::balance_tcp:
        return flow::flow_hash_5tuple(flow, s.hash_basis) & datapath::kBondBucketMask;
      case BondMode::balance_slb:
        return flow::hash_mac(flow.dl_src, vlan, s.hash_basis) & datapath::kBondBucketMask;
      case BondMode::active_backup:
        break;
    }
    return std::nullopt;
  }

  // choose_output_member()
  std::optional<size_t> choose_output(const flow::FlowKey& flow, flow::FlowKey* wc, uint16_t vlan) const {
    BondMode balance = s.mode;
    if (lacp == LacpStatus::configured) {
      // LACP is on but did not negotiate: active-backup with fallback, else nothing.
      if (!s.lacp_fallback_ab) return std::nullopt;
      balance = BondMode::active_backup;
    }
    switch (balance) {
      case BondMode::active_backup:
        return active;
      case BondMode::balance_tcp:
        if (lacp != LacpStatus::negotiated) return std::nullopt;  // balance-tcp needs LACP
        if (wc) flow::flow_mask_hash_fields(flow, wc, flow::HashFields::symmetric_l3l4_udp);
        break;
      case BondMode::balance_slb:
        if (wc) flow::flow_mask_hash_fields(flow, wc, flow::HashFields::eth_src);
        break;
    }
    const int m = effective_member(*bucket_of(flow, vlan));
    if (m == kNone) return std::nullopt;
    return static_cast<size_t>(m);
  }

  // --- rebalancing (bond_rebalance) ---

  struct Bal {
    size_t member;
    std::vector<unsigned> entries;  // its loaded buckets, heaviest first
  };

  // choose_entries_to_migrate(): buckets of `from` to move to a member
  // carrying `to_tx`, such that the lower of the two loads gets closer to
  // the midpoint by at least 10% of the distance; empty if none.
  std::vector<unsigned> choose_entries_to_migrate(const Bal& from, uint64_t to_tx) const {
    const uint64_t from_tx = members[from.member].tx_bytes;
    const uint64_t ideal_tx = (from_tx + to_tx) / 2;  // the midpoint, which moving does not change
    const uint64_t ideal_delta = ideal_tx - to_tx;
    const uint64_t threshold = ideal_delta / 10;
    uint64_t delta = 0;
    std::vector<unsigned> out;
    // One loaded bucket (or none): moving it would only move the imbalance.
    if (from.entries.size() <= 1) return out;
    for (unsigned b : from.entries) {
      if (delta + tx_bytes[b] <= ideal_delta) {
        out.push_back(b);
        delta += tx_bytes[b];
      }
      if (ideal_delta - delta < threshold) break;  // close enough: leave the light ones
    }
    if (out.empty()) {
      // No bucket fits under the ideal: try the lightest one.
      const unsigned closest = from.entries.back();
      delta = tx_bytes[closest];
      out.push_back(closest);
    }
    const uint64_t new_low = std::min(from_tx - delta, to_tx + delta);
    if (new_low > to_tx && new_low - to_tx >= threshold) return out;
    return {};
  }

  // insert_bal(): keeps `bals` in descending order of load; a member goes
  // after those with the same load.
  void insert_bal(std::vector<Bal>& bals, Bal bal) const {
    auto pos = bals.begin();
    while (pos != bals.end() && !(members[bal.member].tx_bytes > members[pos->member].tx_bytes)) ++pos;
    bals.insert(pos, std::move(bal));
  }
  void reinsert_bal(std::vector<Bal>& bals, size_t member) const {
    auto it = std::find_if(bals.begin(), bals.end(), [&](const Bal& b) { return b.member == member; });
    if (it == bals.end()) return;
    Bal bal = std::move(*it);
    bals.erase(it);
    insert_bal(bals, std::move(bal));
  }

  bool rebalance() {
    // Each bucket in its member's list, heaviest first (ties: bucket order);
    // each member's load is the sum of its buckets'.
    std::array<unsigned, kBuckets> order;
    for (unsigned b = 0; b < kBuckets; ++b) order[b] = b;
    std::stable_sort(order.begin(), order.end(),
                     [&](unsigned a, unsigned b) { return tx_bytes[a] > tx_bytes[b]; });
    std::vector<std::vector<unsigned>> entries(members.size());
    for (Member& m : members) m.tx_bytes = 0;
    for (unsigned b : order) {
      const int m = bucket[b];
      if (m == kNone || !tx_bytes[b]) continue;
      members[static_cast<size_t>(m)].tx_bytes += tx_bytes[b];
      entries[static_cast<size_t>(m)].push_back(b);
    }
    std::vector<Bal> bals;
    for (size_t i = 0; i < members.size(); ++i)
      if (members[i].enabled) insert_bal(bals, Bal{i, std::move(entries[i])});

    bool moved = false;
    while (bals.size() >= 2) {
      Bal& from = bals.front();
      const size_t to = bals.back().member;
      const uint64_t from_tx = members[from.member].tx_bytes, to_tx = members[to].tx_bytes;
      const uint64_t overload = from_tx - to_tx;
      // Less than ~3% more than the least loaded member, or under ~1 Mbps:
      // not worth moving anything.
      if (overload < (to_tx >> 5) || overload < 100000) break;
      std::vector<unsigned> migrate = choose_entries_to_migrate(from, to_tx);
      if (migrate.empty()) {
        // Nothing useful to move off `from`: don't look at it again.
        bals.erase(bals.begin());
        continue;
      }
      const size_t from_member = from.member;
      for (unsigned b : migrate) {
        // bond_shift_load()
        members[from_member].tx_bytes -= tx_bytes[b];
        members[to].tx_bytes += tx_bytes[b];
        bucket[b] = static_cast<int>(to);
        // Off from's list; not onto to's (no second move in this run).
        auto& fe = std::find_if(bals.begin(), bals.end(), [&](const Bal& x) {
                     return x.member == from_member;
                   })->entries;
        fe.erase(std::find(fe.begin(), fe.end(), b));
        reinsert_bal(bals, from_member);
        reinsert_bal(bals, to);
      }
      moved = true;
    }
    // Exponentially weighted moving average: halve every load.
    for (uint64_t& t : tx_bytes) t /= 2;
    return moved;
  }
};

Bond::Bond(std::string name, uint32_t id, const BondSettings& s, std::vector<BondMemberConfig> members,
           uint64_t now_ms)
    : name_(std::move(name)), id_(id), impl_(std::make_shared<Impl>()) {
  Impl& b = *impl_;
  b.configured = s;
  b.s = bond_effective_settings(s);
  b.now = now_ms;
  for (BondMemberConfig& c : members) {
    Impl::Member m;
    m.cfg = std::move(c);
    m.may_enable = b.s.lacp == LacpMode::off;
    b.members.push_back(std::move(m));
  }
  b.bucket.fill(kNone);
  b.lacp = b.s.lacp == LacpMode::off ? LacpStatus::off : LacpStatus::configured;
  b.next_rebalance = now_ms + b.s.rebalance_interval_ms;
  b.reported = b.dp_buckets();
}

BondSettings Bond::settings() const {
  std::lock_guard lock(mu_);
  return impl_->configured;
}

void Bond::reconfigure(const BondSettings& in, uint64_t now_ms) {
  std::lock_guard lock(mu_);
  Impl& b = *impl_;
  const BondSettings s = bond_effective_settings(in);
  b.now = std::max(b.now, now_ms);
  bool reset = false;  // OVS's `revalidate` of bond_reconfigure(): restarts the rebalance timer
  if (s.lacp_fallback_ab != b.s.lacp_fallback_ab || s.rebalance_interval_ms != b.s.rebalance_interval_ms ||
      s.mode != b.s.mode || s.hash_basis != b.s.hash_basis || s.primary != b.s.primary ||
      s.lb_output_action != b.s.lb_output_action)
    reset = true;
  // Loads measured under another basis describe flows now in other buckets.
  if (s.hash_basis != b.s.hash_basis) b.tx_bytes.fill(0);
  if (s.lacp != b.s.lacp) {
    b.lacp = s.lacp == LacpMode::off ? LacpStatus::off : LacpStatus::configured;
    if (s.lacp == LacpMode::off)
      for (Impl::Member& m : b.members) m.may_enable = true;
    reset = true;
  }
  b.configured = in;
  b.s = s;
  if (reset) {
    b.revalidate = true;
    b.next_rebalance = b.now + b.s.rebalance_interval_ms;
  }
}

std::vector<BondMemberConfig> Bond::members() const {
  std::lock_guard lock(mu_);
  std::vector<BondMemberConfig> out;
  for (const Impl::Member& m : impl_->members) out.push_back(m.cfg);
  return out;
}

std::optional<size_t> Bond::member_index(std::string_view name) const {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < impl_->members.size(); ++i)
    if (impl_->members[i].cfg.name == name) return i;
  return std::nullopt;
}

std::optional<size_t> Bond::member_by_ofport(uint32_t ofport) const {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < impl_->members.size(); ++i)
    if (impl_->members[i].cfg.ofport == ofport) return i;
  return std::nullopt;
}

void Bond::set_carrier(size_t member, bool up) {
  std::lock_guard lock(mu_);
  if (member < impl_->members.size()) impl_->members[member].carrier = up;
}

void Bond::set_may_enable(size_t member, bool may) {
  std::lock_guard lock(mu_);
  if (member < impl_->members.size()) impl_->members[member].may_enable = may;
}

void Bond::set_lacp_status(LacpStatus s) {
  std::lock_guard lock(mu_);
  Impl& b = *impl_;
  if (b.lacp == s) return;
  b.lacp = s;
  b.revalidate = true;
}

Status Bond::set_admin_enabled(size_t member, bool on) {
  std::lock_guard lock(mu_);
  Impl& b = *impl_;
  if (member >= b.members.size()) return error(Errc::not_found, "no such member");
  b.members[member].admin_disabled = !on;
  b.members[member].seen = true;
  b.enable_member(member, on);
  b.fix_buckets();
  return {};
}

Status Bond::set_active_member(size_t member) {
  std::lock_guard lock(mu_);
  Impl& b = *impl_;
  if (member >= b.members.size()) return error(Errc::not_found, "no such member");
  if (!b.members[member].enabled) return invalid("cannot make disabled member active");
  if (b.active != member) {
    b.active = member;
    b.send_learning = true;
    b.active_changed();
  }
  return {};
}

BondChange Bond::run(uint64_t now_ms) {
  std::lock_guard lock(mu_);
  Impl& b = *impl_;
  b.now = std::max(b.now, now_ms);
  std::optional<size_t> primary;
  for (size_t i = 0; i < b.members.size(); ++i) {
    b.link_status_update(i);
    if (b.s.mode == BondMode::active_backup && b.is_primary(i) && b.members[i].enabled) primary = i;
  }
  if (!b.active || !b.members[*b.active].enabled || (primary && b.active != primary))
    b.choose_active_member();
  b.fix_buckets();

  BondChange c;
  const datapath::BondMembers t = b.dp_buckets();
  if (t != b.reported) {
    c.tables = true;
    b.reported = t;
  }
  c.revalidate = b.revalidate || c.tables;
  b.revalidate = false;
  // bond_should_send_learning_packets(): asking clears the request.
  if (b.send_learning && b.may_send_learning()) {
    c.learning = true;
    b.learning_pending = true;
  }
  b.send_learning = false;
  return c;
}

bool Bond::rebalance_due(uint64_t now_ms) const {
  std::lock_guard lock(mu_);
  return impl_->is_balanced() && now_ms >= impl_->next_rebalance;
}

bool Bond::rebalance(const datapath::BondBucketStats& cumulative, uint64_t now_ms) {
  std::lock_guard lock(mu_);
  Impl& b = *impl_;
  b.now = std::max(b.now, now_ms);
  if (!b.is_balanced() || now_ms < b.next_rebalance) return false;
  b.next_rebalance = now_ms + b.s.rebalance_interval_ms;
  if (b.may_recirc()) {
    // bond_recirculation_account(): the bytes since the last reading.
    for (unsigned i = 0; i < kBuckets; ++i) {
      const uint64_t cur = cumulative.bytes[i];
      if (cur >= b.prev[i] && b.bucket[i] != kNone) b.tx_bytes[i] += cur - b.prev[i];
      b.prev[i] = cur;
    }
  }
  const bool moved = b.rebalance();
  if (moved) {
    b.reported = b.dp_buckets();
    if (b.s.mode == BondMode::balance_slb) b.send_learning = true;
  }
  return moved;
}

void Bond::account(const flow::FlowKey& flow, uint16_t vlan, uint64_t n_bytes) {
  std::lock_guard lock(mu_);
  Impl& b = *impl_;
  if (!b.is_balanced()) return;
  if (std::optional<unsigned> k = b.bucket_of(flow, vlan)) b.tx_bytes[*k] += n_bytes;
}

std::vector<LearningPacket> Bond::take_learning_due(
    std::span<const std::pair<uint16_t, flow::EthAddr>> macs) {
  std::lock_guard lock(mu_);
  Impl& b = *impl_;
  std::vector<LearningPacket> out;
  if (!b.learning_pending) return out;
  b.learning_pending = false;
  if (!b.may_send_learning()) return out;
  for (const auto& [vlan, mac] : macs) {
    // bond_compose_learning_packet(): the member a packet from `mac` would leave on.
    flow::FlowKey f;
    std::memset(&f, 0, sizeof f);
    f.dl_src = mac;
    const std::optional<size_t> m = b.choose_output(f, nullptr, vlan);
    if (!m) continue;
    out.push_back(LearningPacket{b.members[*m].cfg.dp_port, compose_learning_packet(mac, vlan)});
  }
  return out;
}

LacpStatus Bond::lacp_status() const {
  std::lock_guard lock(mu_);
  return impl_->lacp;
}

bool Bond::use_lb_output() const {
  std::lock_guard lock(mu_);
  return impl_->use_lb_output();
}

bool Bond::use_recirc() const {
  std::lock_guard lock(mu_);
  return impl_->may_recirc() && !impl_->s.lb_output_action;
}

bool Bond::may_recirc() const {
  std::lock_guard lock(mu_);
  return impl_->may_recirc();
}

std::optional<unsigned> Bond::bucket_of(const flow::FlowKey& flow, uint16_t vlan) const {
  std::lock_guard lock(mu_);
  return impl_->bucket_of(flow, vlan);
}

std::optional<BondMemberConfig> Bond::choose_output(const flow::FlowKey& flow, flow::FlowKey* wc,
                                                    uint16_t vlan) const {
  std::lock_guard lock(mu_);
  const std::optional<size_t> m = impl_->choose_output(flow, wc, vlan);
  if (!m) return std::nullopt;
  return impl_->members[*m].cfg;
}

std::optional<BondMemberConfig> Bond::bucket_member(unsigned bucket) const {
  std::lock_guard lock(mu_);
  const int m = impl_->effective_member(bucket & datapath::kBondBucketMask);
  if (m == kNone) return std::nullopt;
  return impl_->members[static_cast<size_t>(m)].cfg;
}

// bond_check_admissibility()
BondVerdict Bond::check_admissibility(size_t member, const flow::FlowKey& flow) const {
  std::lock_guard lock(mu_);
  const Impl& b = *impl_;
  if (member >= b.members.size()) return BondVerdict::drop;
  const Impl::Member& m = b.members[member];
  // LACP bonds: the partner knows about the bond; only disabled members
  // drop (may_enable: LACP is up and the member is about to be enabled).
  // LACP configured but not negotiated: drop unless falling back.
  switch (b.lacp) {
    case LacpStatus::negotiated:
      return (m.enabled || (m.carrier && m.may_enable)) ? BondVerdict::accept : BondVerdict::drop;
    case LacpStatus::configured:
      if (!b.s.lacp_fallback_ab) return BondVerdict::drop;
      break;
    case LacpStatus::off:
      if (b.s.mode == BondMode::balance_tcp) return BondVerdict::drop;
      break;
  }
  // Multicast only on the active member (all-members-active is not offered).
  if (is_multicast(flow.dl_dst) && b.active != member) return BondVerdict::drop;
  switch (b.s.mode) {
    case BondMode::balance_tcp:
      if (!b.s.lacp_fallback_ab) return BondVerdict::drop;
      [[fallthrough]];
    case BondMode::active_backup:
      // Packets on a backup member are dropped (as Linux bonding).
      return b.active == member ? BondVerdict::accept : BondVerdict::drop;
    case BondMode::balance_slb:
      // A MAC learned elsewhere came back on the other member: drop it
      // unless it is a gratuitous ARP (the caller decides).
      return BondVerdict::drop_if_moved;
  }
  return BondVerdict::drop;
}

datapath::BondMembers Bond::dp_buckets() const {
  std::lock_guard lock(mu_);
  return impl_->dp_buckets();
}

BondView Bond::view(uint64_t now_ms) const {
  std::lock_guard lock(mu_);
  const Impl& b = *impl_;
  BondView v;
  v.name = name_;
  v.id = id_;
  v.settings = b.s;
  v.lacp_status = b.lacp;
  v.may_recirc = b.may_recirc();
  v.lb_output = b.use_lb_output();
  v.active = b.active;
  v.active_member_mac = b.active_mac;
  if (b.is_balanced()) v.next_rebalance_ms = b.next_rebalance > now_ms ? b.next_rebalance - now_ms : 0;
  for (size_t i = 0; i < b.members.size(); ++i) {
    const Impl::Member& m = b.members[i];
    if (b.is_primary(i)) v.primary_is_member = true;
    BondMemberView mv;
    mv.name = m.cfg.name;
    mv.ofport = m.cfg.ofport;
    mv.dp_port = m.cfg.dp_port;
    mv.mac = m.cfg.mac;
    mv.enabled = m.enabled;
    mv.may_enable = m.carrier && m.may_enable;  // OVS's may_enable: carrier and LACP
    mv.active = b.active == i;
    mv.carrier = m.carrier;
    mv.admin_disabled = m.admin_disabled;
    if (m.delay_expires) mv.delay_left_ms = *m.delay_expires > now_ms ? *m.delay_expires - now_ms : 0;
    if (b.s.mode != BondMode::active_backup)
      for (unsigned k = 0; k < kBuckets; ++k)
        if (b.bucket[k] == static_cast<int>(i)) mv.hashes.emplace_back(k, b.tx_bytes[k]);
    v.members.push_back(std::move(mv));
  }
  return v;
}

// compose_rarp() (+ eth_push_vlan()): to broadcast from `mac`, ethertype
// RARP, an Ethernet/IPv4 reverse request whose sender and target hardware
// addresses are `mac` and protocol addresses 0.0.0.0; 802.1Q-tagged with
// the VID (CFI clear) when vlan != 0. 42 bytes (46 tagged), not padded.
std::vector<uint8_t> compose_learning_packet(const flow::EthAddr& mac, uint16_t vlan) {
  std::vector<uint8_t> p;
  p.reserve(46);
  auto put16 = [&](uint16_t v) {
    p.push_back(static_cast<uint8_t>(v >> 8));
    p.push_back(static_cast<uint8_t>(v));
  };
  auto put_mac = [&](const flow::EthAddr& a) { p.insert(p.end(), a.b, a.b + 6); };
  put_mac(flow::EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}});
  put_mac(mac);
  if (vlan) {
    put16(0x8100);
    put16(vlan & 0x0fff);
  }
  put16(0x8035);  // RARP
  put16(1);       // hardware: Ethernet
  put16(0x0800);  // protocol: IPv4
  p.push_back(6);
  p.push_back(4);
  put16(3);  // ARP_OP_RARP (reverse request)
  put_mac(mac);
  p.insert(p.end(), 4, 0);
  put_mac(mac);
  p.insert(p.end(), 4, 0);
  return p;
}

}  // namespace keel::ofproto

// Bond (ofproto/bond.h): the member each mode picks for a packet and what
// the megaflow must match for it, admissibility verdicts, link state with
// updelay/downdelay (time is the now_ms the test passes, nothing sleeps),
// active member choice with primary and failover, buckets of a dead member
// moved at once, Open vSwitch's bond_rebalance() rule (including the moves
// it refuses because they would not make things better), the per-bucket
// load bookkeeping from cumulative datapath counters, hash-basis changes,
// and learning packets.
#include "ofproto/bond.h"

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <set>

#include "flow/bundle.h"
#include "flow/flow_text.h"

using namespace keel;
using namespace keel::ofproto;
using keel::datapath::BondBucketStats;
using keel::datapath::BondMembers;
using keel::datapath::kBondBuckets;
using keel::datapath::kNoBondMember;
using keel::flow::EthAddr;
using keel::flow::FlowKey;
using keel::flow::text::hton16;
using keel::flow::text::hton32;

namespace {

FlowKey zero_key() {
  FlowKey k;
  std::memset(&k, 0, sizeof k);
  return k;
}

FlowKey tcp4(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, EthAddr mac = {{2, 0, 0, 0, 0, 1}}) {
  FlowKey k = zero_key();
  k.dl_type = hton16(0x0800);
  k.dl_src = mac;
  k.dl_dst = EthAddr{{2, 0, 0, 0, 0, 0xfe}};
  k.nw_src = hton32(src);
  k.nw_dst = hton32(dst);
  k.nw_proto = 6;
  k.tp_src = hton16(sport);
  k.tp_dst = hton16(dport);
  return k;
}

EthAddr mac_n(uint32_t n) {
  return EthAddr{{2, 0x11, static_cast<uint8_t>(n >> 24), static_cast<uint8_t>(n >> 16),
                  static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)}};
}

std::vector<BondMemberConfig> members(int n) {
  std::vector<BondMemberConfig> m;
  for (int i = 0; i < n; ++i) {
    BondMemberConfig c;
    c.name = std::string("p") + static_cast<char>('a' + i);  // pa, pb, pc
    c.ofport = static_cast<uint32_t>(10 + i);
    c.dp_port = static_cast<uint16_t>(1 + i);
    c.mac = EthAddr{{0xaa, 0, 0, 0, 0, static_cast<uint8_t>(1 + i)}};
    m.push_back(c);
  }
  return m;
}

BondSettings settings(BondMode mode, LacpMode lacp = LacpMode::off) {
  BondSettings s;
  s.mode = mode;
  s.lacp = lacp;
  s.rebalance_interval_ms = 1000;
  return s;
}

// A bond whose members all have carrier and (LACP) may_enable, run once at t=0.
struct Fixture {
  Bond bond;
  explicit Fixture(BondSettings s, int n = 2) : bond("bond0", 7, s, members(n), 0) {
    for (int i = 0; i < n; ++i) {
      bond.set_carrier(static_cast<size_t>(i), true);
      bond.set_may_enable(static_cast<size_t>(i), true);
    }
    if (s.lacp != LacpMode::off) bond.set_lacp_status(LacpStatus::negotiated);
    (void)bond.run(0);
  }
};

size_t count_port(const BondMembers& t, uint16_t port) {
  size_t n = 0;
  for (uint16_t p : t) n += p == port;
  return n;
}

bool is_zero(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

}  // namespace

TEST_CASE(
    "settings as bridge.c: interval 1..999 is 1000, primary only in active-backup, lb_output only in tcp") {
  BondSettings s;
  s.rebalance_interval_ms = 1;
  CHECK(bond_effective_settings(s).rebalance_interval_ms == 1000);
  s.rebalance_interval_ms = 999;
  CHECK(bond_effective_settings(s).rebalance_interval_ms == 1000);
  s.rebalance_interval_ms = 0;
  CHECK(bond_effective_settings(s).rebalance_interval_ms == 0);
  s.rebalance_interval_ms = 1500;
  CHECK(bond_effective_settings(s).rebalance_interval_ms == 1500);
  s.primary = "pb";
  s.mode = BondMode::balance_slb;
  CHECK(bond_effective_settings(s).primary.empty());
  s.lacp_fallback_ab = true;
  CHECK(bond_effective_settings(s).primary == "pb");
  s.lb_output_action = true;
  CHECK_FALSE(bond_effective_settings(s).lb_output_action);
  s.mode = BondMode::balance_tcp;
  CHECK(bond_effective_settings(s).lb_output_action);
  // settings() keeps what was configured (the running config shows it).
  Bond b("b", 1, s, members(2), 0);
  CHECK(b.settings() == s);
}

TEST_CASE("names of modes and LACP states") {
  CHECK(parse_bond_mode("balance-tcp") == BondMode::balance_tcp);
  CHECK(parse_bond_mode("balance-slb") == BondMode::balance_slb);
  CHECK(parse_bond_mode("active-backup") == BondMode::active_backup);
  CHECK_FALSE(parse_bond_mode("balance-rr").has_value());
  CHECK(parse_lacp_mode("passive") == LacpMode::passive);
  CHECK_FALSE(parse_lacp_mode("on").has_value());
  CHECK(std::string(to_string(LacpStatus::negotiated)) == "negotiated");
  CHECK(std::string(to_string(BondMode::balance_slb)) == "balance-slb");
}

TEST_CASE("new bond: buckets alternate over the enabled members") {
  Fixture f(settings(BondMode::balance_tcp, LacpMode::active));
  const BondMembers t = f.bond.dp_buckets();
  for (unsigned b = 0; b < kBondBuckets; ++b) CHECK(t[b] == (b % 2 == 0 ? 1 : 2));
  Fixture f3(settings(BondMode::balance_slb), 3);
  const BondMembers t3 = f3.bond.dp_buckets();
  CHECK(count_port(t3, 1) == 86);
  CHECK(count_port(t3, 2) == 85);
  CHECK(count_port(t3, 3) == 85);
}

TEST_CASE("bucket selection: active-backup sends everything on the active member and reads no field") {
  Fixture f(settings(BondMode::active_backup));
  FlowKey wc = zero_key();
  for (int i = 0; i < 50; ++i) {
    auto m = f.bond.choose_output(tcp4(i, 2, 3, 4, mac_n(i)), &wc, 0);
    REQUIRE(m.has_value());
    CHECK(m->name == "pa");
  }
  CHECK(wc == zero_key());
  CHECK_FALSE(f.bond.bucket_of(tcp4(1, 2, 3, 4), 0).has_value());
  CHECK_FALSE(f.bond.may_recirc());
  CHECK_FALSE(f.bond.use_lb_output());
}

TEST_CASE("bucket selection: balance-slb hashes source MAC and VLAN, nothing of L3/L4") {
  BondSettings s = settings(BondMode::balance_slb);
  s.hash_basis = 99;
  Fixture f(s);
  const BondMembers t = f.bond.dp_buckets();
  std::set<std::string> used;
  for (uint32_t i = 0; i < 64; ++i) {
    const EthAddr mac = mac_n(i);
    const uint16_t vlan = static_cast<uint16_t>(i % 3);
    FlowKey wc = zero_key();
    const FlowKey flow = tcp4(i, 2, static_cast<uint16_t>(i), 4, mac);
    auto bucket = f.bond.bucket_of(flow, vlan);
    REQUIRE(bucket.has_value());
    CHECK(*bucket == (flow::hash_mac(mac, vlan, 99) & 0xff));
    auto m = f.bond.choose_output(flow, &wc, vlan);
    REQUIRE(m.has_value());
    CHECK(m->dp_port == t[*bucket]);
    used.insert(m->name);
    // Another 5-tuple from the same MAC: same member.
    CHECK(f.bond.choose_output(tcp4(i + 1000, 9, 9, 9, mac), nullptr, vlan)->name == m->name);
    // The mask: dl_src, nothing else.
    CHECK(wc.dl_src == EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}});
    wc.dl_src = EthAddr{};
    CHECK(wc == zero_key());
  }
  CHECK(used.size() == 2);
  CHECK_FALSE(f.bond.may_recirc());
}

TEST_CASE("bucket selection: balance-tcp uses the 5-tuple bucket, and only with LACP negotiated") {
  Bond b("bond0", 3, settings(BondMode::balance_tcp, LacpMode::active), members(2), 0);
  b.set_carrier(0, true);
  b.set_carrier(1, true);
  b.set_may_enable(0, true);
  b.set_may_enable(1, true);
  (void)b.run(0);
  // LACP configured, not negotiated: nothing is sent.
  CHECK(b.lacp_status() == LacpStatus::configured);
  CHECK_FALSE(b.choose_output(tcp4(1, 2, 3, 4), nullptr, 0).has_value());
  b.set_lacp_status(LacpStatus::negotiated);
  CHECK(b.run(1).revalidate);
  CHECK(b.may_recirc());
  CHECK(b.use_lb_output());  // keel's default: lb-output-action=true
  CHECK_FALSE(b.use_recirc());
  const BondMembers t = b.dp_buckets();
  std::map<uint16_t, int> per_port;
  for (uint32_t i = 0; i < 512; ++i) {
    const FlowKey flow = tcp4(0x0a000000 + i, 0x0a0000ff, static_cast<uint16_t>(1024 + i), 80);
    FlowKey wc = zero_key();
    auto m = b.choose_output(flow, &wc, 0);
    REQUIRE(m.has_value());
    const unsigned bucket = flow::flow_hash_5tuple(flow, 0) & 0xff;
    CHECK(b.bucket_of(flow, 0) == bucket);
    CHECK(m->dp_port == t[bucket]);
    CHECK(b.bucket_member(bucket)->dp_port == t[bucket]);
    ++per_port[m->dp_port];
    // What the megaflow matches: OVS's symmetric_l3l4+udp fields.
    CHECK(wc.nw_src == 0xffffffffu);
    CHECK(wc.nw_dst == 0xffffffffu);
    CHECK(wc.nw_proto == 0xff);
    CHECK(wc.tp_src == 0xffff);
    CHECK(wc.tp_dst == 0xffff);
    CHECK(is_zero(&wc.dl_src, 6));
  }
  CHECK(per_port[1] > 180);
  CHECK(per_port[2] > 180);
  // lb-output-action=false: the recirculation scheme.
  BondSettings s = settings(BondMode::balance_tcp, LacpMode::active);
  s.lb_output_action = false;
  b.reconfigure(s, 2);
  CHECK(b.use_recirc());
  CHECK_FALSE(b.use_lb_output());
}

TEST_CASE("balance-tcp without LACP: may use recirculation and lb_output (as bond/show says), sends nothing") {
  // A live Open vSwitch 3.1 (balance-tcp, lacp off, lb-output-action=true):
  // "bond may use recirculation: yes", "lb_output action: enabled".
  Fixture f(settings(BondMode::balance_tcp));
  CHECK(f.bond.may_recirc());
  CHECK(f.bond.use_lb_output());
  BondView v = f.bond.view(0);
  CHECK(v.may_recirc);
  CHECK(v.lb_output);
  CHECK(v.lacp_status == LacpStatus::off);
  CHECK_FALSE(f.bond.choose_output(tcp4(1, 2, 3, 4), nullptr, 0).has_value());
}

TEST_CASE("balance-tcp with lacp-fallback-ab and no partner works as active-backup") {
  BondSettings s = settings(BondMode::balance_tcp, LacpMode::active);
  s.lacp_fallback_ab = true;
  Bond b("bond0", 3, s, members(2), 0);
  b.set_carrier(0, true);
  b.set_carrier(1, true);
  b.set_may_enable(0, true);
  b.set_may_enable(1, true);
  (void)b.run(0);
  CHECK(b.lacp_status() == LacpStatus::configured);
  CHECK_FALSE(b.may_recirc());
  CHECK_FALSE(b.use_lb_output());
  CHECK_FALSE(b.rebalance_due(100000));  // falling back: no rebalancing
  FlowKey wc = zero_key();
  for (int i = 0; i < 20; ++i) CHECK(b.choose_output(tcp4(i, 2, 3, 4), &wc, 0)->name == "pa");
  CHECK(wc == zero_key());
}

TEST_CASE("admissibility verdicts") {
  const FlowKey uni = tcp4(1, 2, 3, 4);
  FlowKey multi = uni;
  multi.dl_dst = EthAddr{{0x01, 0x00, 0x5e, 0, 0, 1}};
  FlowKey bcast = uni;
  bcast.dl_dst = EthAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

  SUBCASE("active-backup: the backup member drops everything") {
    Fixture f(settings(BondMode::active_backup));
    CHECK(f.bond.check_admissibility(0, uni) == BondVerdict::accept);
    CHECK(f.bond.check_admissibility(0, multi) == BondVerdict::accept);
    CHECK(f.bond.check_admissibility(1, uni) == BondVerdict::drop);
    CHECK(f.bond.check_admissibility(1, bcast) == BondVerdict::drop);
  }
  SUBCASE("balance-slb: multicast only on the active member; the rest: drop if the MAC moved") {
    Fixture f(settings(BondMode::balance_slb));
    CHECK(f.bond.check_admissibility(0, multi) == BondVerdict::drop_if_moved);
    CHECK(f.bond.check_admissibility(1, multi) == BondVerdict::drop);
    CHECK(f.bond.check_admissibility(1, bcast) == BondVerdict::drop);
    CHECK(f.bond.check_admissibility(1, uni) == BondVerdict::drop_if_moved);
    CHECK(f.bond.check_admissibility(0, uni) == BondVerdict::drop_if_moved);
  }
  SUBCASE("balance-tcp without LACP negotiated drops, unless lacp-fallback-ab") {
    Fixture off(settings(BondMode::balance_tcp));  // lacp=off
    CHECK(off.bond.check_admissibility(0, uni) == BondVerdict::drop);
    CHECK(off.bond.check_admissibility(1, uni) == BondVerdict::drop);

    Bond conf("b", 1, settings(BondMode::balance_tcp, LacpMode::active), members(2), 0);
    conf.set_carrier(0, true);
    conf.set_carrier(1, true);
    conf.set_may_enable(0, true);
    conf.set_may_enable(1, true);
    (void)conf.run(0);
    CHECK(conf.check_admissibility(0, uni) == BondVerdict::drop);

    BondSettings s = settings(BondMode::balance_tcp, LacpMode::active);
    s.lacp_fallback_ab = true;
    conf.reconfigure(s, 1);
    (void)conf.run(1);
    CHECK(conf.check_admissibility(0, uni) == BondVerdict::accept);  // the active member
    CHECK(conf.check_admissibility(1, uni) == BondVerdict::drop);    // a backup
    CHECK(conf.check_admissibility(1, multi) == BondVerdict::drop);
  }
  SUBCASE("LACP negotiated: enabled members, or members LACP just let in, accept anything") {
    Fixture f(settings(BondMode::balance_tcp, LacpMode::active));
    CHECK(f.bond.check_admissibility(0, uni) == BondVerdict::accept);
    CHECK(f.bond.check_admissibility(1, multi) == BondVerdict::accept);
    f.bond.set_may_enable(1, false);  // LACP: partner out of sync
    (void)f.bond.run(10);
    CHECK(f.bond.check_admissibility(1, uni) == BondVerdict::drop);
    f.bond.set_may_enable(1, true);  // in sync again, not yet enabled by run()
    CHECK(f.bond.check_admissibility(1, uni) == BondVerdict::accept);
  }
  CHECK(Fixture(settings(BondMode::active_backup)).bond.check_admissibility(9, uni) == BondVerdict::drop);
}

TEST_CASE(
    "active-backup failover: the primary is preferred, the active moves when it goes down, learning is due") {
  BondSettings s = settings(BondMode::active_backup);
  s.primary = "pb";
  Fixture f(s);
  BondView v = f.bond.view(0);
  REQUIRE(v.active.has_value());
  CHECK(v.members[*v.active].name == "pb");
  CHECK(v.primary_is_member);
  CHECK(v.active_member_mac == v.members[1].mac);

  // The primary goes down: the other member takes over, learning packets due.
  f.bond.set_carrier(1, false);
  BondChange c = f.bond.run(100);
  CHECK(c.revalidate);
  CHECK(c.learning);
  v = f.bond.view(100);
  CHECK(v.members[*v.active].name == "pa");
  CHECK_FALSE(v.members[1].enabled);
  CHECK(f.bond.choose_output(tcp4(1, 2, 3, 4), nullptr, 0)->name == "pa");
  // Nothing changes on the next poll.
  c = f.bond.run(200);
  CHECK_FALSE(c.revalidate);
  CHECK_FALSE(c.learning);

  // The primary comes back: it is active again.
  f.bond.set_carrier(1, true);
  c = f.bond.run(300);
  CHECK(c.revalidate);
  CHECK(c.learning);
  v = f.bond.view(300);
  CHECK(v.members[*v.active].name == "pb");

  // Without a primary the active member stays where it is when the other comes back.
  Fixture g(settings(BondMode::active_backup));
  g.bond.set_carrier(0, false);
  (void)g.bond.run(10);
  g.bond.set_carrier(0, true);
  (void)g.bond.run(20);
  v = g.bond.view(20);
  CHECK(v.members[*v.active].name == "pb");
  CHECK(v.members[0].enabled);
}

TEST_CASE("bond-primary naming no member is allowed and never preferred") {
  BondSettings s = settings(BondMode::active_backup);
  s.primary = "nosuch";
  Fixture f(s);
  BondView v = f.bond.view(0);
  CHECK(v.settings.primary == "nosuch");
  CHECK_FALSE(v.primary_is_member);
  CHECK(v.members[*v.active].name == "pa");
  // In balance-slb bond-primary does not count (bridge.c drops it).
  BondSettings slb = settings(BondMode::balance_slb);
  slb.primary = "pb";
  Fixture g(slb);
  v = g.bond.view(0);
  CHECK(v.settings.primary.empty());
  CHECK(v.members[*v.active].name == "pa");
}

TEST_CASE("updelay and downdelay run on the now_ms given") {
  BondSettings s = settings(BondMode::active_backup);
  s.updelay_ms = 300;
  s.downdelay_ms = 500;
  Fixture f(s);  // members start as their link is, no delay
  CHECK(f.bond.view(0).members[0].enabled);
  CHECK(f.bond.view(0).members[1].enabled);

  f.bond.set_carrier(1, false);
  CHECK_FALSE(f.bond.run(1000).revalidate);
  BondView v = f.bond.view(1100);
  CHECK(v.members[1].enabled);
  REQUIRE(v.members[1].delay_left_ms.has_value());
  CHECK(*v.members[1].delay_left_ms == 400);
  (void)f.bond.run(1499);
  CHECK(f.bond.view(1499).members[1].enabled);
  CHECK(f.bond.run(1500).revalidate);
  v = f.bond.view(1500);
  CHECK_FALSE(v.members[1].enabled);
  CHECK_FALSE(v.members[1].delay_left_ms.has_value());

  // Up for 300 ms before it is enabled.
  f.bond.set_carrier(1, true);
  (void)f.bond.run(2000);
  CHECK_FALSE(f.bond.view(2000).members[1].enabled);
  CHECK(f.bond.view(2000).members[1].delay_left_ms == 300u);
  (void)f.bond.run(2299);
  CHECK_FALSE(f.bond.view(2299).members[1].enabled);
  (void)f.bond.run(2300);
  CHECK(f.bond.view(2300).members[1].enabled);

  // A flap shorter than the downdelay changes nothing.
  f.bond.set_carrier(0, false);
  (void)f.bond.run(3000);
  f.bond.set_carrier(0, true);
  (void)f.bond.run(3200);
  v = f.bond.view(3200);
  CHECK(v.members[0].enabled);
  CHECK_FALSE(v.members[0].delay_left_ms.has_value());
  (void)f.bond.run(4000);
  CHECK(f.bond.view(4000).members[0].enabled);
}

TEST_CASE("every member down: the first to come back skips its updelay and becomes active") {
  BondSettings s = settings(BondMode::active_backup);
  s.updelay_ms = 5000;
  Fixture f(s);
  f.bond.set_carrier(0, false);
  f.bond.set_carrier(1, false);
  (void)f.bond.run(100);
  BondView v = f.bond.view(100);
  CHECK_FALSE(v.active.has_value());
  CHECK_FALSE(f.bond.choose_output(tcp4(1, 2, 3, 4), nullptr, 0).has_value());
  CHECK(count_port(f.bond.dp_buckets(), kNoBondMember) == kBondBuckets);
  f.bond.set_carrier(1, true);
  BondChange c = f.bond.run(200);
  v = f.bond.view(200);
  REQUIRE(v.active.has_value());
  CHECK(v.members[*v.active].name == "pb");
  CHECK(v.members[1].enabled);
  CHECK(c.learning);
}

TEST_CASE("bond-set-active-member and bond-disable-member / bond-enable-member") {
  Fixture f(settings(BondMode::active_backup));
  CHECK(f.bond.set_active_member(1).ok());
  BondChange c = f.bond.run(10);
  CHECK(c.revalidate);
  CHECK(c.learning);
  CHECK(f.bond.choose_output(tcp4(1, 2, 3, 4), nullptr, 0)->name == "pb");

  // An admin-disabled member stays disabled on later polls, and the active moves off it.
  CHECK(f.bond.set_admin_enabled(1, false).ok());
  (void)f.bond.run(20);
  (void)f.bond.run(30);
  BondView v = f.bond.view(30);
  CHECK_FALSE(v.members[1].enabled);
  CHECK(v.members[1].admin_disabled);
  CHECK(v.members[*v.active].name == "pa");
  Status st = f.bond.set_active_member(1);
  CHECK_FALSE(st.ok());
  CHECK(st.message() == "cannot make disabled member active");
  CHECK(f.bond.set_admin_enabled(1, true).ok());
  (void)f.bond.run(40);
  CHECK(f.bond.view(40).members[1].enabled);
  CHECK(f.bond.set_active_member(1).ok());
  CHECK_FALSE(f.bond.set_active_member(5).ok());
  CHECK_FALSE(f.bond.set_admin_enabled(5, false).ok());
}

TEST_CASE("a member going down moves its buckets to live members at once; coming up it is rebalanced in") {
  Fixture f(settings(BondMode::balance_tcp, LacpMode::active), 3);
  BondMembers before = f.bond.dp_buckets();
  CHECK(count_port(before, 2) == 85);
  // Load: 1000 bytes per bucket.
  BondBucketStats st;
  for (unsigned b = 0; b < kBondBuckets; ++b) st.bytes[b] = 1000;
  CHECK_FALSE(f.bond.rebalance(st, 1000));  // balanced: nothing moves

  f.bond.set_carrier(1, false);  // pb, downdelay 0
  BondChange c = f.bond.run(1100);
  CHECK(c.tables);
  CHECK(c.revalidate);
  BondMembers after = f.bond.dp_buckets();
  CHECK(count_port(after, 2) == 0);
  // Split over the two live members, ~evenly; the others' buckets stayed.
  CHECK(count_port(after, 1) == 128);
  CHECK(count_port(after, 3) == 128);
  for (unsigned b = 0; b < kBondBuckets; ++b)
    if (before[b] != 2) CHECK(after[b] == before[b]);
  CHECK_FALSE(f.bond.run(1200).tables);  // reported once

  // Back up: enabled, no buckets yet...
  f.bond.set_carrier(1, true);
  c = f.bond.run(1300);
  CHECK(c.revalidate);
  CHECK(f.bond.view(1300).members[1].enabled);
  CHECK(count_port(f.bond.dp_buckets(), 2) == 0);
  // ...until the next rebalance moves load onto it.
  for (unsigned b = 0; b < kBondBuckets; ++b) st.bytes[b] += 10000;
  CHECK(f.bond.rebalance(st, 2000));
  const BondMembers t = f.bond.dp_buckets();
  CHECK(count_port(t, 2) > 60);
  CHECK(count_port(t, 1) + count_port(t, 2) + count_port(t, 3) == kBondBuckets);
}

TEST_CASE("a dead member's buckets go to the least loaded live member first") {
  Fixture f(settings(BondMode::balance_tcp, LacpMode::active), 3);
  // bucket b is on member b % 3. pa's buckets carry 1000 bytes, pb's 1000,
  // pc's 200: under rebalancing's 100000-byte floor, so nothing moves.
  BondBucketStats st;
  for (unsigned b = 0; b < kBondBuckets; ++b) st.bytes[b] = b % 3 == 2 ? 200 : 1000;
  const BondMembers before = f.bond.dp_buckets();
  CHECK_FALSE(f.bond.rebalance(st, 1000));
  REQUIRE(f.bond.dp_buckets() == before);
  f.bond.set_carrier(1, false);
  (void)f.bond.run(1100);
  const BondMembers after = f.bond.dp_buckets();
  size_t to_a = 0, to_c = 0;
  for (unsigned b = 0; b < kBondBuckets; ++b) {
    if (before[b] != 2) {
      CHECK(after[b] == before[b]);
      continue;
    }
    to_a += after[b] == 1;
    to_c += after[b] == 3;
  }
  CHECK(to_a + to_c == 85);
  // Halved loads: pa 86 x 500, pc 85 x 100; pb's buckets (500 each) fill pc
  // up to pa's load (69 of them), then alternate.
  CHECK(to_c == 77);
  CHECK(to_a == 8);
}

TEST_CASE("rebalance: OVS's rule, never a move that does not make things better") {
  // Two members, buckets even -> pa (port 1), odd -> pb (port 2).
  auto fresh = [] { return std::make_unique<Fixture>(settings(BondMode::balance_tcp, LacpMode::active)); };

  SUBCASE("one heavy bucket on pa, nothing on pb: moving it would only swap the imbalance") {
    auto f = fresh();
    BondBucketStats st;
    st.bytes[0] = 10'000'000;
    CHECK_FALSE(f->bond.rebalance(st, 1000));
    CHECK(f->bond.dp_buckets()[0] == 1);
  }
  SUBCASE("two loaded buckets on pa (600k + 400k), none on pb: the 400k one moves") {
    auto f = fresh();
    BondBucketStats st;
    st.bytes[0] = 600'000;
    st.bytes[2] = 400'000;
    CHECK(f->bond.rebalance(st, 1000));
    CHECK(f->bond.dp_buckets()[0] == 1);
    CHECK(f->bond.dp_buckets()[2] == 2);
  }
  SUBCASE(
      "as a live Open vSwitch 3.1 did (balance-slb, dummy ports, 1038-byte frames): 60+40+1 frames on one "
      "member") {
    // ovs-appctl bond/show before and after: hash 38 (60 frames) stayed on
    // m1, hashes 235 (40 frames) and 230 (1 frame) moved to m2: both fit
    // under the midpoint, taken heaviest first.
    auto f = fresh();
    BondBucketStats st;
    st.bytes[0] = 60 * 1038;
    st.bytes[2] = 40 * 1038;
    st.bytes[4] = 1 * 1038;
    CHECK(f->bond.rebalance(st, 1000));
    CHECK(f->bond.dp_buckets()[0] == 1);
    CHECK(f->bond.dp_buckets()[2] == 2);
    CHECK(f->bond.dp_buckets()[4] == 2);
  }
  SUBCASE("as a live Open vSwitch 3.1 did: 200 frames in one bucket, the other member idle: it stays") {
    auto f = fresh();
    BondBucketStats st;
    st.bytes[0] = 200 * 1038;
    CHECK_FALSE(f->bond.rebalance(st, 1000));
  }
  SUBCASE("a heavy and a tiny bucket: moving the tiny one improves by less than 10%: nothing moves") {
    auto f = fresh();
    BondBucketStats st;
    st.bytes[0] = 1'000'000;
    st.bytes[2] = 10;
    CHECK_FALSE(f->bond.rebalance(st, 1000));
  }
  SUBCASE("no bucket fits under the ideal: the lightest moves if it still brings the loads closer") {
    auto f = fresh();
    BondBucketStats st;
    st.bytes[0] = 2'000'000;
    st.bytes[2] = 1'500'000;
    st.bytes[1] = 1'000'000;  // on pb
    CHECK(f->bond.rebalance(st, 1000));
    CHECK(f->bond.dp_buckets()[2] == 2);
    CHECK(f->bond.dp_buckets()[0] == 1);
  }
  SUBCASE("an imbalance under 100000 bytes (~1 Mbps) or ~3% is left alone") {
    auto f = fresh();
    BondBucketStats st;
    st.bytes[0] = 60'000;
    st.bytes[2] = 30'000;
    CHECK_FALSE(f->bond.rebalance(st, 1000));
    auto g = fresh();
    BondBucketStats big;
    big.bytes[0] = 5'000'000;
    big.bytes[2] = 5'000'000;
    big.bytes[1] = 9'800'000;  // pa 10M, pb 9.8M: 200k over, < 9.8M/32
    CHECK_FALSE(g->bond.rebalance(big, 1000));
  }
  SUBCASE("balanced loads stay put") {
    auto f = fresh();
    BondBucketStats st;
    for (unsigned b = 0; b < kBondBuckets; ++b) st.bytes[b] = 50'000;
    const BondMembers before = f->bond.dp_buckets();
    CHECK_FALSE(f->bond.rebalance(st, 1000));
    CHECK(f->bond.dp_buckets() == before);
  }
}

TEST_CASE("rebalance: all traffic stuck on one member is spread when the loads allow") {
  Fixture f(settings(BondMode::balance_tcp, LacpMode::active));
  // pb down then up: every bucket is on pa.
  f.bond.set_carrier(1, false);
  (void)f.bond.run(10);
  f.bond.set_carrier(1, true);
  (void)f.bond.run(20);
  REQUIRE(count_port(f.bond.dp_buckets(), 1) == kBondBuckets);
  BondBucketStats st;
  for (unsigned b = 0; b < kBondBuckets; ++b) st.bytes[b] = 10'000;
  CHECK(f.bond.rebalance(st, 1000));
  BondMembers t = f.bond.dp_buckets();
  // OVS's arithmetic: a first batch of 116 buckets (it stops within 10% of
  // the midpoint), then 11 more; the remaining 20000-byte difference is
  // under the 100000-byte floor.
  CHECK(count_port(t, 1) == 129);
  CHECK(count_port(t, 2) == 127);
  // The same traffic next interval: balanced, nothing moves (no oscillation).
  for (unsigned b = 0; b < kBondBuckets; ++b) st.bytes[b] += 10'000;
  CHECK_FALSE(f.bond.rebalance(st, 2000));
  CHECK(f.bond.dp_buckets() == t);
}

TEST_CASE("rebalance: loads from cumulative counters, decayed by half after each run") {
  Fixture f(settings(BondMode::balance_tcp, LacpMode::active));
  BondBucketStats st;
  st.bytes[4] = 8192;
  CHECK_FALSE(f.bond.rebalance(st, 999));  // not due yet: nothing read
  CHECK_FALSE(f.bond.rebalance_due(999));
  CHECK(f.bond.rebalance_due(1000));
  (void)f.bond.rebalance(st, 1000);
  auto load_of = [&](unsigned bucket, uint64_t now) -> uint64_t {
    for (const BondMemberView& m : f.bond.view(now).members)
      for (auto [b, bytes] : m.hashes)
        if (b == bucket) return bytes;
    return ~uint64_t{0};
  };
  CHECK(load_of(4, 1000) == 4096);  // 8192, halved after the run
  CHECK(f.bond.view(1000).next_rebalance_ms == 1000u);
  // The same cumulative reading: no new bytes, the load halves again.
  CHECK_FALSE(f.bond.rebalance(st, 1500));  // not due (next at 2000)
  (void)f.bond.rebalance(st, 2000);
  CHECK(load_of(4, 2000) == 2048);
  // 4096 more bytes since the last reading.
  st.bytes[4] += 4096;
  (void)f.bond.rebalance(st, 3000);
  CHECK(load_of(4, 3000) == (2048 + 4096) / 2);
  // A counter that went backwards (table recreated): no traffic, no wrap.
  st.bytes[4] = 10;
  (void)f.bond.rebalance(st, 4000);
  CHECK(load_of(4, 4000) == 3072 / 2);
  st.bytes[4] = 1034;  // 1024 more since the reset
  (void)f.bond.rebalance(st, 5000);
  CHECK(load_of(4, 5000) == (1536 + 1024) / 2);
}

TEST_CASE("rebalance timing: interval, active-backup never, interval 0 never") {
  Fixture ab(settings(BondMode::active_backup));
  CHECK_FALSE(ab.bond.rebalance_due(1'000'000));
  CHECK_FALSE(ab.bond.view(0).next_rebalance_ms.has_value());
  CHECK(ab.bond.view(0).members[0].hashes.empty());
  BondSettings s = settings(BondMode::balance_slb);
  s.rebalance_interval_ms = 0;
  Fixture never(s);
  CHECK_FALSE(never.bond.rebalance_due(1'000'000));
  s.rebalance_interval_ms = 10;  // -> 1000
  Fixture fast(s);
  CHECK_FALSE(fast.bond.rebalance_due(999));
  CHECK(fast.bond.rebalance_due(1000));
  CHECK(fast.bond.view(250).next_rebalance_ms == 750u);
}

TEST_CASE("balance-slb: loads come from account(), a move asks for learning packets") {
  Fixture f(settings(BondMode::balance_slb));
  // Two MACs whose buckets are both on pa.
  std::vector<EthAddr> on_a;
  const BondMembers t = f.bond.dp_buckets();
  for (uint32_t i = 0; on_a.size() < 2 && i < 1000; ++i) {
    const unsigned b = *f.bond.bucket_of(tcp4(1, 2, 3, 4, mac_n(i)), 0);
    if (t[b] != 1) continue;
    if (!on_a.empty() && *f.bond.bucket_of(tcp4(1, 2, 3, 4, on_a[0]), 0) == b) continue;
    on_a.push_back(mac_n(i));
  }
  REQUIRE(on_a.size() == 2);
  f.bond.account(tcp4(1, 2, 3, 4, on_a[0]), 0, 600'000);
  f.bond.account(tcp4(1, 2, 3, 4, on_a[1]), 0, 400'000);
  // The datapath's counters are not used for slb.
  BondBucketStats ignored;
  for (auto& b : ignored.bytes) b = 1'000'000'000;
  CHECK(f.bond.rebalance(ignored, 1000));
  CHECK(f.bond.choose_output(tcp4(1, 2, 3, 4, on_a[1]), nullptr, 0)->name == "pb");
  CHECK(f.bond.choose_output(tcp4(1, 2, 3, 4, on_a[0]), nullptr, 0)->name == "pa");
  BondChange c = f.bond.run(1001);
  CHECK(c.learning);
  std::pair<uint16_t, EthAddr> macs[] = {{0, on_a[0]}, {0, on_a[1]}};
  std::vector<LearningPacket> pk = f.bond.take_learning_due(macs);
  REQUIRE(pk.size() == 2);
  CHECK(pk[0].dp_port == 1);
  CHECK(pk[1].dp_port == 2);
  CHECK(pk[1].frame == compose_learning_packet(on_a[1], 0));
  // Taken: nothing more until the next change.
  CHECK(f.bond.take_learning_due(macs).empty());
  CHECK_FALSE(f.bond.run(1002).learning);
}

TEST_CASE("a hash-basis change keeps the bucket -> member map; only which flows fall where changes") {
  Fixture f(settings(BondMode::balance_tcp, LacpMode::active));
  // Give the map some shape first.
  f.bond.set_carrier(1, false);
  (void)f.bond.run(10);
  f.bond.set_carrier(1, true);
  (void)f.bond.run(20);
  BondBucketStats st;
  for (unsigned b = 0; b < kBondBuckets; ++b) st.bytes[b] = b * 1000;
  (void)f.bond.rebalance(st, 1000);
  const BondMembers before = f.bond.dp_buckets();
  CHECK(count_port(before, 2) > 0);
  BondSettings s = settings(BondMode::balance_tcp, LacpMode::active);
  s.hash_basis = 12345;
  f.bond.reconfigure(s, 1100);
  BondChange c = f.bond.run(1100);
  CHECK(c.revalidate);
  CHECK_FALSE(c.tables);
  CHECK(f.bond.dp_buckets() == before);
  int moved = 0;
  for (uint32_t i = 0; i < 100; ++i) {
    const FlowKey flow = tcp4(i, 2, 3, 4);
    moved += flow::flow_hash_5tuple(flow, 0) % 256 != *f.bond.bucket_of(flow, 0);
    CHECK(*f.bond.bucket_of(flow, 0) == (flow::flow_hash_5tuple(flow, 12345) & 0xff));
  }
  CHECK(moved > 90);
  // The old basis's loads are gone (they described other flows).
  for (const BondMemberView& m : f.bond.view(1100).members)
    for (auto [b, bytes] : m.hashes) CHECK(bytes == 0);
}

TEST_CASE("learning packets: OVS's RARP from the MAC to broadcast, tagged on a VLAN") {
  const EthAddr mac{{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}};
  const std::vector<uint8_t> untagged = {
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x80, 0x35,  // Ethernet, RARP
      0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x03,              // Ethernet/IPv4, op 3
      0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x00, 0x00, 0x00, 0x00,  // sha, spa
      0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x00, 0x00, 0x00, 0x00,  // tha, tpa
  };
  CHECK(compose_learning_packet(mac, 0) == untagged);
  std::vector<uint8_t> tagged = untagged;
  const uint8_t tag[] = {0x81, 0x00, 0x00, 0x0a};
  tagged.insert(tagged.begin() + 12, tag, tag + 4);
  CHECK(compose_learning_packet(mac, 10) == tagged);

  // Active-backup: on the active member; not with LACP negotiated.
  Fixture ab(settings(BondMode::active_backup));
  CHECK(ab.bond.set_active_member(1).ok());
  REQUIRE(ab.bond.run(5).learning);
  std::pair<uint16_t, EthAddr> macs[] = {{10, mac}};
  std::vector<LearningPacket> pk = ab.bond.take_learning_due(macs);
  REQUIRE(pk.size() == 1);
  CHECK(pk[0].dp_port == 2);
  CHECK(pk[0].frame == tagged);

  Fixture tcp(settings(BondMode::balance_tcp, LacpMode::active));
  tcp.bond.set_carrier(0, false);
  CHECK_FALSE(tcp.bond.run(5).learning);
  CHECK(tcp.bond.take_learning_due(macs).empty());
}

TEST_CASE("view: what bond-show prints") {
  BondSettings s = settings(BondMode::balance_tcp, LacpMode::active);
  s.updelay_ms = 100;
  Fixture f(s);
  BondView v = f.bond.view(250);
  CHECK(v.name == "bond0");
  CHECK(v.id == 7);
  CHECK(v.lacp_status == LacpStatus::negotiated);
  CHECK(v.may_recirc);
  CHECK(v.lb_output);
  CHECK(v.next_rebalance_ms == 750u);
  REQUIRE(v.members.size() == 2);
  CHECK(v.members[0].name == "pa");
  CHECK(v.members[0].ofport == 10);
  CHECK(v.members[0].dp_port == 1);
  CHECK(v.members[0].may_enable);
  CHECK(v.members[0].carrier);
  CHECK(v.members[0].hashes.size() == 128);
  CHECK(v.members[0].hashes[1].first == 2);
  CHECK(v.members[*v.active].active);
}

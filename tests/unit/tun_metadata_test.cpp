// Tunnel metadata: the Geneve TLV map (add-tlv-map / dump-tlv-map texts from
// a live Open vSwitch 3.1), tun_metadata0..7 in the OpenFlow match and
// action syntax (texts ovs-ofctl dump-flows printed for the same input),
// geneve(...) options in the datapath flow syntax (texts from Open vSwitch's
// tests/tunnel-push-pop.at, odp.at, tunnel.at), and the conversions between
// the raw (udpif) and the metadata form.
#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>

#include "flow/dp_flow_syntax.h"
#include "flow/of_actions.h"
#include "flow/of_fields.h"
#include "flow/of_match_syntax.h"
#include "flow/tun_metadata.h"
#include "ofproto/tlv_map.h"

using namespace keel::flow;
using keel::Status;

namespace {

TlvTable ovs_table() {
  // ovs-ofctl add-tlv-map br0 "{class=0xffff,type=0x80,len=4}->tun_metadata0,
  //                            {class=0xffff,type=0x1,len=8}->tun_metadata3"
  TlvTable t;
  auto m = parse_tlv_mappings("{class=0xffff,type=0x80,len=4}->tun_metadata0,{class=0xffff,type=0x1,len=8}->tun_metadata3");
  REQUIRE(m.ok());
  for (const TlvMapping& e : *m) REQUIRE(t.add(e).ok());
  return t;
}

std::string of_round_trip(const std::string& in, const TlvTable* tlv = nullptr) {
  OfParseOptions po;
  if (tlv) po.tlv = std::make_shared<const TlvTable>(*tlv);
  auto m = parse_of_match(in, po);
  INFO("input: " << in << " error: " << m.status().message());
  REQUIRE(m.ok());
  OfFormatOptions fo;
  fo.tlv = po.tlv;
  std::string out = format_of_match(*m, fo);
  auto again = parse_of_match(out, po);
  REQUIRE(again.ok());
  CHECK(*again == *m);
  return out;
}

std::string of_err(const std::string& in, const TlvTable* tlv = nullptr) {
  OfParseOptions po;
  if (tlv) po.tlv = std::make_shared<const TlvTable>(*tlv);
  auto m = parse_of_match(in, po);
  REQUIRE(!m.ok());
  return m.status().message();
}

std::string actions_round_trip(const std::string& in) {
  auto a = parse_of_actions(in);
  INFO("input: " << in << " error: " << a.status().message());
  REQUIRE(a.ok());
  std::string out = format_of_actions(*a);
  auto again = parse_of_actions(out);
  REQUIRE(again.ok());
  CHECK(format_of_actions(*again) == out);
  return out;
}

std::string dp_round_trip(const std::string& in) {
  auto m = parse_dp_match(in);
  INFO("input: " << in << " error: " << m.status().message());
  REQUIRE(m.ok());
  std::string out = format_dp_match(*m);
  auto again = parse_dp_match(out);
  REQUIRE(again.ok());
  CHECK(*again == *m);
  return out;
}

}  // namespace

TEST_CASE("tlv map: ovs-ofctl dump-tlv-map's text") {
  TlvTable t;
  CHECK(format_tlv_table(t) ==
        " max option space=256 max fields=8\n"
        " allocated option space=0\n"
        "\n"
        " mapping table:\n"
        "  class  type  length  match field\n"
        " ------  ----  ------  --------------\n");
  t = ovs_table();
  // Open vSwitch 3.1 printed these rows (its header says max fields=64).
  CHECK(format_tlv_table(t) ==
        " max option space=256 max fields=8\n"
        " allocated option space=12\n"
        "\n"
        " mapping table:\n"
        "  class  type  length  match field\n"
        " ------  ----  ------  --------------\n"
        " 0xffff  0x80       4  tun_metadata0\n"
        " 0xffff   0x1       8  tun_metadata3\n");
  CHECK(format_tlv_mapping(*t.at(3)) == "{class=0xffff,type=0x1,len=8}->tun_metadata3");
  TlvMapping zero{0, 0, 4, 1};
  REQUIRE(t.add(zero).ok());
  CHECK(format_tlv_table(t).find("      0     0       4  tun_metadata1\n") != std::string::npos);
}

TEST_CASE("tlv map: Open vSwitch's errors, and nothing changes") {
  TlvTable t = ovs_table();
  const TlvTable before = t;
  auto err = [&](const std::string& text) {
    auto m = parse_tlv_mappings(text);
    REQUIRE(m.ok());
    Status st = t.add((*m)[0]);
    REQUIRE(!st.ok());
    CHECK(t == before);
    return st.message();
  };
  CHECK(err("{class=0xffff,type=0x80,len=4}->tun_metadata1").starts_with("NXTTMFC_DUP_ENTRY"));
  CHECK(err("{class=0xffff,type=0x81,len=4}->tun_metadata0").starts_with("NXTTMFC_ALREADY_MAPPED"));
  CHECK(err("{class=0xffff,type=0x82,len=5}->tun_metadata2").starts_with("NXTTMFC_BAD_OPT_LEN"));
  CHECK(err("{class=0xffff,type=0x82,len=36}->tun_metadata2").starts_with("NXTTMFC_BAD_OPT_LEN"));
  CHECK(err("{class=0xffff,type=0x82,len=4}->tun_metadata8").starts_with("NXTTMFC_BAD_FIELD_IDX"));
  for (const char* bad : {"{class=0xffff,type=0x82}->tun_metadata2", "{class=0xffff,type=0x82,len=4}", "",
                          "{class=0x1ffff,type=0x82,len=4}->tun_metadata2", "{class=1,type=2,len=4}->reg0",
                          "{class=1,type=2,len=4}->tun_metadata1,"}) {
    INFO(bad);
    CHECK(!parse_tlv_mappings(bad).ok());
  }
  // del is by index, as Open vSwitch 3.1 (class/type/len are not compared).
  t.del(0);
  CHECK(t.at(0) == nullptr);
  t.del(5);
  CHECK(t.mappings().size() == 1);
}

TEST_CASE("tlv maps: per bridge, all or nothing") {
  keel::ofproto::TlvMaps maps;
  auto m = parse_tlv_mappings("{class=0xffff,type=0x80,len=4}->tun_metadata0,{class=0xffff,type=0x80,len=4}->tun_metadata1");
  REQUIRE(m.ok());
  CHECK(!maps.add("br0", *m).ok());  // the second is a duplicate: neither is added
  CHECK(maps.table("br0")->empty());
  m->pop_back();
  CHECK(maps.add("br0", *m).ok());
  CHECK(maps.table("br0")->at(0) != nullptr);
  CHECK(maps.table("br1")->empty());
  auto held = maps.table("br0");
  CHECK(maps.del("br0", {}).ok());
  CHECK(maps.table("br0")->empty());
  CHECK(held->at(0) != nullptr);  // a reader's snapshot stays as it was
  CHECK(maps.tables()->empty());
}

TEST_CASE("of match: tun_metadataN as ovs-ofctl dump-flows prints it") {
  const TlvTable t = ovs_table();
  // Input given to ovs-ofctl add-flow -> what dump-flows printed (OVS 3.1).
  CHECK(of_round_trip("tun_metadata0=0xa", &t) == "tun_metadata0=0xa");
  CHECK(of_round_trip("tun_metadata0=0xa/0xf", &t) == "tun_metadata0=0xa/0xf");
  CHECK(of_round_trip("tun_metadata0=0x1/0xffffffff", &t) == "tun_metadata0=0x1");
  CHECK(of_round_trip("tun_metadata0=0/0", &t) == "tun_metadata0");
  CHECK(of_round_trip("tun_metadata0", &t) == "tun_metadata0");
  CHECK(of_round_trip("tun_metadata3=0x1234567890abcdef", &t) == "tun_metadata3=0x1234567890abcdef");
  CHECK(of_round_trip("tun_metadata3=0x00000001", &t) == "tun_metadata3=0x1");
  CHECK(of_round_trip("tun_metadata0=0xff00/0xff00", &t) == "tun_metadata0=0xff00/0xff00");
  CHECK(of_round_trip("tun_metadata0=0x0a0b0c0d/0xffff0000", &t) == "tun_metadata0=0xa0b0000/0xffff0000");
  CHECK(of_round_trip("tun_flags=+oam", &t) == "tun_flags=+oam");
  // After tun_flags and the other tunnel fields, in index order (match_format()).
  CHECK(of_round_trip("tun_metadata3=0x5,tun_metadata0=0xa,tun_id=0x7b,tun_flags=+oam,ip", &t) ==
        "ip,tun_id=0x7b,tun_flags=+oam,tun_metadata0=0xa,tun_metadata3=0x5");
  // Without a map (no bridge): any value up to the slot, exact over it.
  CHECK(of_round_trip("tun_metadata7=0x1234") == "tun_metadata7=0x1234");
  CHECK(of_round_trip("tun_metadata7=0x1/0xffffffff") == "tun_metadata7=0x1/0xffffffff");
}

TEST_CASE("of match: tun_metadataN in the FlowKey's metadata form") {
  const TlvTable t = ovs_table();
  OfParseOptions po;
  po.tlv = std::make_shared<const TlvTable>(t);
  auto m = parse_of_match("tun_metadata3=0x1234567890abcdef/0xffff", po);
  REQUIRE(m.ok());
  CHECK(m->key.tun_opt_len == (1u << 3));
  CHECK(m->mask.tun_opt_len == (1u << 3));
  const uint8_t* slot = reinterpret_cast<const uint8_t*>(&m->key) + tun_metadata_slot_offset(3);
  const uint8_t* mslot = reinterpret_cast<const uint8_t*>(&m->mask) + tun_metadata_slot_offset(3);
  CHECK(slot[30] == 0xcd);
  CHECK(slot[31] == 0xef);
  CHECK(slot[29] == 0);  // value & mask
  CHECK(mslot[30] == 0xff);
  CHECK(mslot[29] == 0);
}

TEST_CASE("of match: tun_metadata errors") {
  const TlvTable t = ovs_table();
  CHECK(of_err("tun_metadata5=1", &t).find("NXFMFC_INVALID_TLV_FIELD") != std::string::npos);
  // Open vSwitch cuts 0x123456789 to the mapped 4 bytes (0x1234567); keel refuses it.
  CHECK(of_err("tun_metadata0=0x123456789", &t).find("longer than 4 bytes") != std::string::npos);
  CHECK(of_err("tun_metadata0=NP", &t).find("tun_metadata0") != std::string::npos);
  CHECK(of_err("tun_metadata8=1").find("tun_metadata0..tun_metadata7") != std::string::npos);
  CHECK(of_err("tun_metadata0=0x" + std::string(66, '1')).find("longer than 32 bytes") != std::string::npos);
  CHECK(of_err("tun_metadata0=0xzz").find("bad hex") != std::string::npos);
}

TEST_CASE("of actions: set_field, load and move on tun_metadataN as ovs-ofctl prints them") {
  // ovs-ofctl add-flow ... actions=X -> dump-flows (OVS 3.1, tun_metadata0 len 4, 3 len 8).
  CHECK(actions_round_trip("set_field:0xb->tun_metadata0") == "set_field:0xb->tun_metadata0");
  CHECK(actions_round_trip("set_field:0xa/0xf->tun_metadata0") == "set_field:0xa/0xf->tun_metadata0");
  CHECK(actions_round_trip("load:0x1->NXM_NX_TUN_METADATA3[0..7]") == "set_field:0x1/0xff->tun_metadata3");
  CHECK(actions_round_trip("load:0xabcdef->tun_metadata3[8..31]") ==
        "set_field:0xabcdef00/0xffffff00->tun_metadata3");
  CHECK(actions_round_trip("set_field:0x1234567890->tun_metadata3") == "set_field:0x1234567890->tun_metadata3");
  CHECK(actions_round_trip("move:NXM_NX_TUN_METADATA0[0..31]->NXM_NX_REG0[]") ==
        "move:NXM_NX_TUN_METADATA0[0..31]->NXM_NX_REG0[]");
  CHECK(actions_round_trip("move:NXM_NX_REG0[]->NXM_NX_TUN_METADATA0[0..31]") ==
        "move:NXM_NX_REG0[]->NXM_NX_TUN_METADATA0[0..31]");
  CHECK(actions_round_trip("set_field:0x1/0x1->tun_flags") == "load:0x1->NXM_NX_TUN_FLAGS[]");
  // Two set_fields stay two.
  CHECK(actions_round_trip("set_field:0x1->tun_metadata1,set_field:0x2->tun_metadata1") ==
        "set_field:0x1->tun_metadata1,set_field:0x2->tun_metadata1");
  CHECK(actions_round_trip("set_field:0x112233445566778899aabbccddeeff00->tun_metadata2") ==
        "set_field:0x112233445566778899aabbccddeeff00->tun_metadata2");
  CHECK(!parse_of_actions("set_field:0x112233445566778899aabbccddeeff0011->tun_metadata2").ok());
}

TEST_CASE("of fields: writing tun_metadataN makes it present") {
  FlowKey k{}, mask{};
  const TlvTable t = ovs_table();
  write_field(k, OfFieldId::tun_metadata3, OfValue::from_u64(0x1234), OfValue::ones(0, 128));
  CHECK(k.tun_opt_len == (1u << 3));
  CHECK(read_field(k, OfFieldId::tun_metadata3) == OfValue::from_u64(0x1234));
  unwildcard_field(mask, OfFieldId::tun_metadata3, OfValue::ones(0, 8));
  CHECK(mask.tun_opt_len == (1u << 3));
  std::array<uint8_t, kGeneveOptsMax> opts{};
  bool crit = true;
  size_t n = to_geneve_options(t, k, opts, &crit);
  REQUIRE(n == 12);
  CHECK(!crit);
  const uint8_t want[12] = {0xff, 0xff, 0x01, 0x02, 0, 0, 0, 0, 0, 0, 0x12, 0x34};
  CHECK(std::memcmp(opts.data(), want, 12) == 0);
}

TEST_CASE("dp flow: geneve() options as Open vSwitch prints them") {
  // tests/tunnel-push-pop.at (a megaflow after tnl_pop, one option consulted).
  CHECK(dp_round_trip("tunnel(tun_id=0x7b,src=1.1.2.92,dst=1.1.2.88,geneve({class=0xffff,type=0x80,len=4,0xa/"
                      "0xf}{class=0xffff,type=0,len=4}),flags(-df-csum+key)),recirc_id(0),in_port(6081),"
                      "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no)") ==
        "tunnel(tun_id=0x7b,src=1.1.2.92,dst=1.1.2.88,geneve({class=0xffff,type=0x80,len=4,0xa/0xf}{class=0xffff,"
        "type=0,len=4}),flags(-df-csum+key)),recirc_id(0),in_port(6081),packet_type(ns=0,id=0),eth_type(0x0800),"
        "ipv4(frag=no)");
  CHECK(dp_round_trip("tunnel(tun_id=0x7b,ipv6_src=2001:cafe::92,ipv6_dst=2001:cafe::88,geneve({class=0xffff,"
                      "type=0x80,len=4,0xa/0xf}{class=0xffff,type=0,len=4}),flags(-df-csum+key)),in_port(6081)")
            .starts_with("tunnel(tun_id=0x7b,ipv6_src=2001:cafe::92,ipv6_dst=2001:cafe::88,geneve({class=0xffff,"
                         "type=0x80,len=4,0xa/0xf}{class=0xffff,type=0,len=4}),flags(-df-csum+key))"));
  // tests/odp.at: masked class/type/len and data.
  CHECK(dp_round_trip("tunnel(tun_id=0x7f10354/0xff,src=10.10.10.10/255.255.255.0,dst=20.20.20.20/255.255.255.0,"
                      "ttl=64,geneve({class=0,type=0,len=4,0xa/0xff}{class=0xffff,type=0x1,len=4,0xffffffff}),"
                      "flags(csum|key))")
            .starts_with("tunnel(tun_id=0x54/0xff,src=10.10.10.0/255.255.255.0,dst=20.20.20.0/255.255.255.0,"
                         "ttl=64,geneve({class=0,type=0,len=4,0xa/0xff}{class=0xffff,type=0x1,len=4,0xffffffff}),"
                         "flags(csum|key))"));
  // tests/tunnel.at (ofproto/trace input keys).
  CHECK(dp_round_trip("tunnel(tun_id=0x0,src=1.1.1.1,dst=1.1.1.2,ttl=64,geneve({class=0xffff,type=0,len=4,0xb}{"
                      "class=0xffff,type=2,len=4,0xc}),flags(df|key)),in_port(6081)")
            .starts_with("tunnel(tun_id=0x0,src=1.1.1.1,dst=1.1.1.2,ttl=64,geneve({class=0xffff,type=0,len=4,0xb}{"
                         "class=0xffff,type=0x2,len=4,0xc}),flags(df|key))"));
  CHECK(dp_round_trip("tunnel(tun_id=0x0,src=1.1.1.1,dst=1.1.1.2,ttl=64,geneve({class=0xffff,type=1,len=0}),"
                      "flags(df|key)),in_port(6081)")
            .starts_with("tunnel(tun_id=0x0,src=1.1.1.1,dst=1.1.1.2,ttl=64,geneve({class=0xffff,type=0x1,len=0}),"));
  CHECK(dp_round_trip("tunnel(dst=1.1.1.1,ttl=64,tp_dst=6081,geneve({class=0xffff,type=0,len=4,0xa}{class=0xffff,"
                      "type=0x1,len=8,0x1234567890abcdef}),flags(df))")
            .starts_with("tunnel(dst=1.1.1.1,ttl=64,tp_dst=6081,geneve({class=0xffff,type=0,len=4,0xa}{"
                         "class=0xffff,type=0x1,len=8,0x1234567890abcdef}),flags(df))"));
  // A Geneve tunnel without options: an empty geneve(), as odp-util prints udpif form.
  CHECK(dp_round_trip("tunnel(tun_id=0x5,geneve()),in_port(1)").starts_with("tunnel(tun_id=0x5,geneve()),"));
}

TEST_CASE("dp flow: geneve() errors never read past the text or the options") {
  for (const char* bad :
       {"tunnel(geneve({class=0xffff,type=0,len=5,0x1}))", "tunnel(geneve({class=0xffff,type=0,len=128}))",
        "tunnel(geneve({class=0x1ffff}))", "tunnel(geneve({class=0xffff,type=0,len=4,0x123456789}))",
        "tunnel(geneve({class=0xffff)", "tunnel(geneve(x))", "tunnel(geneve({bogus=1}))",
        "tunnel(geneve({len=4,0x1,0x2}))"}) {
    INFO(bad);
    CHECK(!parse_dp_match(bad).ok());
  }
  std::string many = "tunnel(geneve(";
  for (int i = 0; i < 3; ++i) many += "{class=1,type=1,len=124}";
  CHECK(!parse_dp_match(many + "))").ok());
}

TEST_CASE("conversions: raw options <-> tun_metadata, and the megaflow mask") {
  const TlvTable t = ovs_table();
  auto raw = parse_dp_match("tunnel(tun_id=0x7b,src=1.1.2.92,dst=1.1.2.88,geneve({class=0xffff,type=0x80,len=4,0xa}"
                            "{class=0xffff,type=0,len=4,0x5}),flags(+key))");
  REQUIRE(raw.ok());
  FlowKey md = raw->key;
  REQUIRE(from_geneve_udpif(t, raw->key, md).ok());
  CHECK(md.tun_opt_len == 1u);  // tun_metadata0 present; class 0xffff type 0 is not mapped, not critical
  CHECK(read_field(md, OfFieldId::tun_metadata0) == OfValue::from_u64(0xa));
  // An OpenFlow rule on the metadata form matches it.
  OfParseOptions po;
  po.tlv = std::make_shared<const TlvTable>(t);
  auto rule = parse_of_match("tun_metadata0=0xa/0xf", po);
  REQUIRE(rule.ok());
  Match md_match{md, rule->mask};
  (void)md_match;
  for (unsigned w = 0; w < kFlowWords; ++w)
    CHECK((md.words()[w] & rule->mask.words()[w]) == rule->key.words()[w]);
  // Translation consulted the low 4 bits of tun_metadata0 -> the raw mask.
  FlowKey md_mask{};
  unwildcard_field(md_mask, OfFieldId::tun_metadata0, OfValue::from_u64(0xf));
  Match mega{raw->key, {}};
  mega.mask.tun_id = ~0ull;
  to_geneve_udpif_mask(t, raw->key, md_mask, mega.mask);
  CHECK(format_dp_match(mega) ==
        "tunnel(tun_id=0x7b,geneve({class=0xffff,type=0x80,len=4,0xa/0xf}{class=0xffff,type=0,len=4})),"
        "packet_type(ns=0,id=0)");
  // A mapped option with another length, or an unmapped critical one: invalid.
  auto badlen = parse_dp_match("tunnel(geneve({class=0xffff,type=0x80,len=8,0x1}))");
  REQUIRE(badlen.ok());
  CHECK(!from_geneve_udpif(t, badlen->key, md).ok());
  auto crit = parse_dp_match("tunnel(geneve({class=0x1,type=0x85,len=4,0x1}))");
  REQUIRE(crit.ok());
  CHECK(!from_geneve_udpif(t, crit->key, md).ok());
  // Truncated raw options (as a bad packet could carry) are refused, not over-read.
  FlowKey trunc = raw->key;
  trunc.tun_opt_len = 6;
  CHECK(!from_geneve_udpif(t, trunc, md).ok());
  trunc.tun_opt_len = 1000;
  CHECK(!from_geneve_udpif(t, trunc, md).ok());
}

TEST_CASE("raw options from any bytes: conversions and printing stay inside the key") {
  // What a bad packet's decapsulation could leave in the key (tnl_pop
  // validates, but translation and flow-dump must not trust it): random
  // bytes and lengths, every length up to beyond the options area.
  const TlvTable t = ovs_table();
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    return seed;
  };
  for (int round = 0; round < 2000; ++round) {
    Match m;
    for (auto& b : m.key.tun_opts) b = static_cast<uint8_t>(next());
    // Bias towards plausible option headers some of the time.
    if (round % 2) m.key.tun_opts[3] = static_cast<uint8_t>(next() % 4);
    m.key.tun_opt_len = static_cast<uint32_t>(next() % 300);
    m.mask.tun_opt_len = kTunOptLenMaskUdpif;
    for (auto& b : m.mask.tun_opts) b = static_cast<uint8_t>(next());
    FlowKey md{};
    (void)from_geneve_udpif(t, m.key, md);
    CHECK(md.tun_opt_len <= 0xffu);  // only present bits of mapped fields
    FlowKey md_mask{}, raw_mask{};
    unwildcard_field(md_mask, OfFieldId::tun_metadata0, OfValue::ones(0, 32));
    to_geneve_udpif_mask(t, m.key, md_mask, raw_mask);
    CHECK(raw_mask.tun_opt_len == kTunOptLenMaskUdpif);
    std::string text = format_dp_match(m);
    CHECK(text.find("geneve(") != std::string::npos);
    std::array<uint8_t, kGeneveOptsMax> opts{};
    CHECK(to_geneve_options(t, md, opts) <= kGeneveOptsMax);
  }
}

// Tests of the DPDK flow engine (hal/dpdk/dpdk_flow.h).
//
// Conversion (no device): every facade item and action type lands in the
// rte_flow struct of its type, in network byte order, with spec and mask
// pointing into the rule's own storage and an END closing each list; hal
// port ids become ethdev ids through the port map, an unknown one is an
// error naming the item/action; rte_flow_error causes (the item/action or
// its spec/mask/conf) resolve to the index and type in FlowError's text.
//
// Calls on vdevs (one EAL per process, --no-huge --no-pci, a per-process
// file prefix): net_null and net_ring have no rte_flow ops, so every call
// fails with an errno and a message and nothing crashes; info() says no
// template API and the template/queue calls fail clearly; a stopped port's
// engine answers ENODEV; a real net_tap on this host (when a TAP can be
// made) shows the validate/EEXIST trap; a queue-count restart moves reset_generation; on net_tap (an engine told so, over net_null)
// create refuses rss and VLAN VIDs tap would install wrongly while validate
// still asks the driver; configure() on a started vdev fails clearly. Real rules are exercised in the qemu-virt boot
// (net_tap on a kernel with TC flower), not here.
//
// Thread-safety: single-threaded.
#include "hal/dpdk/dpdk_flow.h"

#include <doctest/doctest.h>
#include <arpa/inet.h>  // htons/htonl: network order, as rte_flow wants it
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "keel/hal/backend.h"
#include "keel/hal/port.h"
#include "keel/hal/port_spec.h"

namespace hal = keel::hal;
namespace dpdk = keel::hal::dpdk;
using keel::Errc;
using keel::Status;

namespace {

// hal port 3 is ethdev 7, hal port 4 is ethdev 9; nothing else exists.
const dpdk::PortMap kMap = [](uint32_t id) -> std::optional<uint16_t> {
  if (id == 3) return uint16_t{7};
  if (id == 4) return uint16_t{9};
  return std::nullopt;
};

template <typename T>
const T& spec_of(const rte_flow_item& it) {
  return *static_cast<const T*>(it.spec);
}
template <typename T>
const T& mask_of(const rte_flow_item& it) {
  return *static_cast<const T*>(it.mask);
}
template <typename T>
const T& conf_of(const rte_flow_action& a) {
  return *static_cast<const T*>(a.conf);
}

}  // namespace

TEST_CASE("dpdk flow: attr converts field by field") {
  rte_flow_attr a;
  hal::FlowAttr f;
  f.group = 3;
  f.priority = 2;
  f.ingress = false;
  f.transfer = true;
  CHECK(dpdk::convert_attr(f, a).ok());
  CHECK(a.group == 3);
  CHECK(a.priority == 2);
  CHECK(unsigned(a.ingress) == 0);
  CHECK(unsigned(a.egress) == 0);
  CHECK(unsigned(a.transfer) == 1);
}

TEST_CASE("dpdk flow: every item type lands in its rte_flow struct in network order") {
  hal::FlowPattern p;
  hal::FlowEth e{};
  e.dst = {2, 0, 0, 0, 0, 1};
  e.src = {2, 0, 0, 0, 0, 2};
  e.type = 0x8100;
  e.has_vlan = 1;
  hal::FlowEth em = hal::flow_eth_mask_all();
  em.has_vlan = 1;
  hal::FlowIpv4 v4{};
  v4.src = 0x0a000001;
  v4.dst = 0x0a000002;
  v4.proto = 17;
  v4.tos = 0x10;
  v4.ttl = 64;
  v4.frag = 0x4000;
  hal::FlowIpv6 v6{};
  v6.tclass = 0xab;
  v6.flow_label = 0x12345;
  v6.proto = 58;
  v6.hop_limit = 255;
  v6.has_frag_ext = 1;
  v6.src = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  v6.dst = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  p.eth(e, em).vlan({0x2064, 0x0800}, {0x0fff, 0xffff}).ipv4(v4, hal::flow_ipv4_mask_all())
      .udp({1234, 4789}, {0xffff, 0xffff}).vxlan({0x123456, 0x08}, {0xffffff, 0xff}).ipv6(v6, hal::flow_ipv6_mask_all())
      .tcp({80, 443, 0x12}, {0xffff, 0xffff, 0xff}).icmp6({128, 0}, {0xff, 0xff});
  REQUIRE(p.count == 8);
  dpdk::RteFlowRule r;
  REQUIRE(dpdk::convert_pattern(p, kMap, r, nullptr).ok());
  CHECK(r.n_items == 8);
  CHECK(r.items[8].type == RTE_FLOW_ITEM_TYPE_END);

  CHECK(r.items[0].type == RTE_FLOW_ITEM_TYPE_ETH);
  const auto& eth = spec_of<rte_flow_item_eth>(r.items[0]);
  CHECK(eth.hdr.dst_addr.addr_bytes[5] == 1);
  CHECK(eth.hdr.src_addr.addr_bytes[5] == 2);
  CHECK(eth.hdr.ether_type == htons(0x8100));
  CHECK(unsigned(eth.has_vlan) == 1);
  CHECK(mask_of<rte_flow_item_eth>(r.items[0]).hdr.ether_type == 0xffff);
  CHECK(r.items[0].spec == &r.spec[0]);
  CHECK(r.items[0].mask == &r.mask[0]);
  CHECK(r.items[0].last == nullptr);

  CHECK(r.items[1].type == RTE_FLOW_ITEM_TYPE_VLAN);
  CHECK(spec_of<rte_flow_item_vlan>(r.items[1]).hdr.vlan_tci == htons(0x2064));
  CHECK(spec_of<rte_flow_item_vlan>(r.items[1]).hdr.eth_proto == htons(0x0800));
  CHECK(mask_of<rte_flow_item_vlan>(r.items[1]).hdr.vlan_tci == htons(0x0fff));

  CHECK(r.items[2].type == RTE_FLOW_ITEM_TYPE_IPV4);
  const auto& ip = spec_of<rte_flow_item_ipv4>(r.items[2]).hdr;
  CHECK(ip.src_addr == htonl(0x0a000001));
  CHECK(ip.dst_addr == htonl(0x0a000002));
  CHECK(ip.next_proto_id == 17);
  CHECK(ip.type_of_service == 0x10);
  CHECK(ip.time_to_live == 64);
  CHECK(ip.fragment_offset == htons(0x4000));
  CHECK(mask_of<rte_flow_item_ipv4>(r.items[2]).hdr.src_addr == 0xffffffff);

  CHECK(r.items[3].type == RTE_FLOW_ITEM_TYPE_UDP);
  CHECK(spec_of<rte_flow_item_udp>(r.items[3]).hdr.src_port == htons(1234));
  CHECK(spec_of<rte_flow_item_udp>(r.items[3]).hdr.dst_port == htons(4789));

  CHECK(r.items[4].type == RTE_FLOW_ITEM_TYPE_VXLAN);
  const auto& vx = spec_of<rte_flow_item_vxlan>(r.items[4]);
  CHECK(vx.vni[0] == 0x12);
  CHECK(vx.vni[1] == 0x34);
  CHECK(vx.vni[2] == 0x56);
  CHECK(vx.flags == 0x08);

  CHECK(r.items[5].type == RTE_FLOW_ITEM_TYPE_IPV6);
  const auto& i6 = spec_of<rte_flow_item_ipv6>(r.items[5]);
  CHECK(i6.hdr.vtc_flow == htonl((0xabu << 20) | 0x12345));
  CHECK(i6.hdr.proto == 58);
  CHECK(i6.hdr.hop_limits == 255);
  CHECK(i6.hdr.src_addr[0] == 0x20);
  CHECK(i6.hdr.src_addr[15] == 1);
  CHECK(i6.hdr.dst_addr[0] == 0xfe);
  CHECK(unsigned(i6.has_frag_ext) == 1);
  // The version nibble is never matched.
  CHECK(mask_of<rte_flow_item_ipv6>(r.items[5]).hdr.vtc_flow == htonl(0x0fffffff));

  CHECK(r.items[6].type == RTE_FLOW_ITEM_TYPE_TCP);
  CHECK(spec_of<rte_flow_item_tcp>(r.items[6]).hdr.src_port == htons(80));
  CHECK(spec_of<rte_flow_item_tcp>(r.items[6]).hdr.dst_port == htons(443));
  CHECK(spec_of<rte_flow_item_tcp>(r.items[6]).hdr.tcp_flags == 0x12);

  CHECK(r.items[7].type == RTE_FLOW_ITEM_TYPE_ICMP6);
  CHECK(spec_of<rte_flow_item_icmp6>(r.items[7]).type == 128);

  hal::FlowPattern q;
  q.icmp({8, 0}, {0xff, 0xff}).mark(77).meta(0xdead).port_id(3).represented_port(4);
  dpdk::RteFlowRule s;
  REQUIRE(dpdk::convert_pattern(q, kMap, s, nullptr).ok());
  CHECK(s.items[0].type == RTE_FLOW_ITEM_TYPE_ICMP);
  CHECK(spec_of<rte_flow_item_icmp>(s.items[0]).hdr.icmp_type == 8);
  CHECK(s.items[1].type == RTE_FLOW_ITEM_TYPE_MARK);
  CHECK(spec_of<rte_flow_item_mark>(s.items[1]).id == 77);
  CHECK(s.items[2].type == RTE_FLOW_ITEM_TYPE_META);
  CHECK(spec_of<rte_flow_item_meta>(s.items[2]).data == 0xdead);
  CHECK(s.items[3].type == RTE_FLOW_ITEM_TYPE_PORT_ID);
  CHECK(spec_of<rte_flow_item_port_id>(s.items[3]).id == 7);  // hal 3 -> ethdev 7
  CHECK(mask_of<rte_flow_item_port_id>(s.items[3]).id == 0xffffffff);
  CHECK(s.items[4].type == RTE_FLOW_ITEM_TYPE_REPRESENTED_PORT);
  CHECK(spec_of<rte_flow_item_ethdev>(s.items[4]).port_id == 9);
  CHECK(mask_of<rte_flow_item_ethdev>(s.items[4]).port_id == 0xffff);
  CHECK(s.items[5].type == RTE_FLOW_ITEM_TYPE_END);
}

TEST_CASE("dpdk flow: every action type lands in its rte_flow conf") {
  hal::FlowActions a;
  a.port(3).represented_port(4).set_mac_src({1, 2, 3, 4, 5, 6}).set_mac_dst({6, 5, 4, 3, 2, 1})
      .set_ipv4_src(0xc0a80001).set_ipv4_dst(0xc0a80002).set_ipv4_dscp(46).set_ipv4_ttl(9)
      .set_tp_src(1000).set_tp_dst(2000).push_vlan(0x88a8).set_vlan_vid(100).set_vlan_pcp(5).pop_vlan()
      .mark(0xabcdef).count_hits(2);
  REQUIRE(a.count == 16);
  dpdk::RteFlowRule r;
  REQUIRE(dpdk::convert_actions(a, kMap, r, nullptr).ok());
  CHECK(r.actions[16].type == RTE_FLOW_ACTION_TYPE_END);
  CHECK(r.actions[0].type == RTE_FLOW_ACTION_TYPE_PORT_ID);
  CHECK(conf_of<rte_flow_action_port_id>(r.actions[0]).id == 7);
  CHECK(unsigned(conf_of<rte_flow_action_port_id>(r.actions[0]).original) == 0);
  CHECK(r.actions[1].type == RTE_FLOW_ACTION_TYPE_REPRESENTED_PORT);
  CHECK(conf_of<rte_flow_action_ethdev>(r.actions[1]).port_id == 9);
  CHECK(r.actions[2].type == RTE_FLOW_ACTION_TYPE_SET_MAC_SRC);
  CHECK(conf_of<rte_flow_action_set_mac>(r.actions[2]).mac_addr[0] == 1);
  CHECK(r.actions[3].type == RTE_FLOW_ACTION_TYPE_SET_MAC_DST);
  CHECK(conf_of<rte_flow_action_set_mac>(r.actions[3]).mac_addr[0] == 6);
  CHECK(r.actions[4].type == RTE_FLOW_ACTION_TYPE_SET_IPV4_SRC);
  CHECK(conf_of<rte_flow_action_set_ipv4>(r.actions[4]).ipv4_addr == htonl(0xc0a80001));
  CHECK(r.actions[5].type == RTE_FLOW_ACTION_TYPE_SET_IPV4_DST);
  CHECK(r.actions[6].type == RTE_FLOW_ACTION_TYPE_SET_IPV4_DSCP);
  CHECK(conf_of<rte_flow_action_set_dscp>(r.actions[6]).dscp == 46);
  CHECK(r.actions[7].type == RTE_FLOW_ACTION_TYPE_SET_TTL);
  CHECK(conf_of<rte_flow_action_set_ttl>(r.actions[7]).ttl_value == 9);
  CHECK(r.actions[8].type == RTE_FLOW_ACTION_TYPE_SET_TP_SRC);
  CHECK(conf_of<rte_flow_action_set_tp>(r.actions[8]).port == htons(1000));
  CHECK(r.actions[9].type == RTE_FLOW_ACTION_TYPE_SET_TP_DST);
  CHECK(conf_of<rte_flow_action_set_tp>(r.actions[9]).port == htons(2000));
  CHECK(r.actions[10].type == RTE_FLOW_ACTION_TYPE_OF_PUSH_VLAN);
  CHECK(conf_of<rte_flow_action_of_push_vlan>(r.actions[10]).ethertype == htons(0x88a8));
  CHECK(r.actions[11].type == RTE_FLOW_ACTION_TYPE_OF_SET_VLAN_VID);
  CHECK(conf_of<rte_flow_action_of_set_vlan_vid>(r.actions[11]).vlan_vid == htons(100));
  CHECK(r.actions[12].type == RTE_FLOW_ACTION_TYPE_OF_SET_VLAN_PCP);
  CHECK(conf_of<rte_flow_action_of_set_vlan_pcp>(r.actions[12]).vlan_pcp == 5);
  CHECK(r.actions[13].type == RTE_FLOW_ACTION_TYPE_OF_POP_VLAN);
  CHECK(r.actions[13].conf == nullptr);
  CHECK(r.actions[14].type == RTE_FLOW_ACTION_TYPE_MARK);
  CHECK(conf_of<rte_flow_action_mark>(r.actions[14]).id == 0xabcdef);
  CHECK(r.actions[15].type == RTE_FLOW_ACTION_TYPE_COUNT);
  CHECK(conf_of<rte_flow_action_count>(r.actions[15]).id == 2);

  hal::FlowActions b;
  const hal::FlowIpv6Addr six = {0x20, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
  const uint16_t qs[] = {1, 3, 2};
  b.set_ipv6_src(six).set_ipv6_dst(six).set_ipv6_dscp(10).set_ipv6_hop(3).age(30).jump(4).queue(2)
      .rss(qs, hal::kFlowRssIpv4 | hal::kFlowRssTcp, 1).drop();
  dpdk::RteFlowRule s;
  REQUIRE(dpdk::convert_actions(b, kMap, s, nullptr).ok());
  CHECK(s.actions[0].type == RTE_FLOW_ACTION_TYPE_SET_IPV6_SRC);
  CHECK(conf_of<rte_flow_action_set_ipv6>(s.actions[0]).ipv6_addr[15] == 7);
  CHECK(s.actions[1].type == RTE_FLOW_ACTION_TYPE_SET_IPV6_DST);
  CHECK(s.actions[2].type == RTE_FLOW_ACTION_TYPE_SET_IPV6_DSCP);
  CHECK(conf_of<rte_flow_action_set_dscp>(s.actions[2]).dscp == 10);
  CHECK(s.actions[3].type == RTE_FLOW_ACTION_TYPE_SET_TTL);
  CHECK(conf_of<rte_flow_action_set_ttl>(s.actions[3]).ttl_value == 3);
  CHECK(s.actions[4].type == RTE_FLOW_ACTION_TYPE_AGE);
  CHECK(unsigned(conf_of<rte_flow_action_age>(s.actions[4]).timeout) == 30);
  CHECK(conf_of<rte_flow_action_age>(s.actions[4]).context == nullptr);
  CHECK(s.actions[5].type == RTE_FLOW_ACTION_TYPE_JUMP);
  CHECK(conf_of<rte_flow_action_jump>(s.actions[5]).group == 4);
  CHECK(s.actions[6].type == RTE_FLOW_ACTION_TYPE_QUEUE);
  CHECK(conf_of<rte_flow_action_queue>(s.actions[6]).index == 2);
  CHECK(s.actions[7].type == RTE_FLOW_ACTION_TYPE_RSS);
  const auto& rss = conf_of<rte_flow_action_rss>(s.actions[7]);
  CHECK(rss.queue_num == 3);
  REQUIRE(rss.queue != nullptr);
  CHECK(rss.queue[0] == 1);
  CHECK(rss.queue[1] == 3);
  CHECK(rss.queue[2] == 2);
  CHECK(rss.level == 1);
  CHECK((rss.types & RTE_ETH_RSS_IPV4) != 0);
  CHECK((rss.types & RTE_ETH_RSS_NONFRAG_IPV4_TCP) != 0);
  CHECK((rss.types & RTE_ETH_RSS_NONFRAG_IPV4_UDP) == 0);
  CHECK(rss.key == nullptr);
  CHECK(rss.key_len == 0);
  CHECK(s.actions[8].type == RTE_FLOW_ACTION_TYPE_DROP);
  CHECK(s.actions[8].conf == nullptr);
  CHECK(s.actions[9].type == RTE_FLOW_ACTION_TYPE_END);
}

TEST_CASE("dpdk flow: an unknown port or an overflowing list is an error naming the item/action") {
  hal::FlowError err;
  dpdk::RteFlowRule r;
  hal::FlowPattern p;
  p.eth({}, {}).represented_port(42);
  Status st = dpdk::convert_pattern(p, kMap, r, &err);
  CHECK_FALSE(st.ok());
  CHECK(err.errnum == ENODEV);
  CHECK(err.where == hal::FlowErrorWhere::item);
  CHECK(err.index == 1);
  CHECK(st.message().find("item 1 (represented_port): port 42 is not a DPDK port of this process (ENODEV)") !=
        std::string::npos);

  hal::FlowActions a;
  a.count_hits().port(5);
  st = dpdk::convert_actions(a, kMap, r, &err);
  CHECK(err.where == hal::FlowErrorWhere::action);
  CHECK(err.index == 1);
  CHECK(st.message().find("action 1 (port_id): port 5") != std::string::npos);

  hal::FlowPattern over;
  for (unsigned i = 0; i < hal::kMaxFlowItems + 1; ++i) over.mark(1);
  st = dpdk::convert_pattern(over, kMap, r, &err);
  CHECK(err.errnum == EINVAL);
  CHECK(st.code() == Errc::invalid_argument);
  CHECK(r.items[0].type == RTE_FLOW_ITEM_TYPE_END);  // nothing half-converted is handed on
}

TEST_CASE("dpdk flow: an rte_flow_error's cause resolves to the item/action index and type") {
  hal::FlowPattern p;
  p.eth({}, {}).ipv4({}, {}).udp({}, {});
  hal::FlowActions a;
  a.count_hits().push_vlan().port(3);
  dpdk::RteFlowRule r;
  REQUIRE(dpdk::convert(hal::FlowAttr{}, p, a, kMap, r, nullptr).ok());

  rte_flow_error e{};
  e.type = RTE_FLOW_ERROR_TYPE_ACTION;
  e.cause = &r.actions[1];
  e.message = "VLAN push is not supported";
  hal::FlowError f = dpdk::translate_error(e, ENOTSUP, &r, &p, &a, "create", "p0");
  CHECK(f.status().message() ==
        "rte_flow create on port p0: action 1 (of_push_vlan): VLAN push is not supported (ENOTSUP)");

  e.type = RTE_FLOW_ERROR_TYPE_ACTION_CONF;
  e.cause = &r.conf[2];  // the conf, not the action
  CHECK(dpdk::translate_error(e, EINVAL, &r, &p, &a, "create", "p0").index == 2);

  e.type = RTE_FLOW_ERROR_TYPE_ITEM_MASK;
  e.cause = &r.mask[2];
  e.message = "bad mask";
  f = dpdk::translate_error(e, EINVAL, &r, &p, &a, "validate", "p0");
  CHECK(f.where == hal::FlowErrorWhere::item);
  CHECK(f.status().message() == "rte_flow validate on port p0: item 2 (udp): bad mask (EINVAL)");

  e.type = RTE_FLOW_ERROR_TYPE_ITEM;
  e.cause = &e;  // points elsewhere: no index
  CHECK(dpdk::translate_error(e, EINVAL, &r, &p, &a, "create", "p0").index == -1);

  e.type = RTE_FLOW_ERROR_TYPE_ATTR_TRANSFER;
  CHECK(dpdk::translate_error(e, ENOTSUP, &r, &p, &a, "create", "p0").where == hal::FlowErrorWhere::attr);
  e.type = RTE_FLOW_ERROR_TYPE_STATE;
  e.message = nullptr;
  f = dpdk::translate_error(e, EIO, &r, &p, &a, "create", "p0");
  CHECK(f.where == hal::FlowErrorWhere::device);
  CHECK(f.status().message() == "rte_flow create on port p0: device: no message from the driver (EIO)");
}

// ------------------------------------------------------------- on vdevs ---

namespace {

hal::Backend& backend() {
  static std::unique_ptr<hal::Backend> b = [] {
    std::vector<std::string> args = {"--no-huge",     "--no-pci",     "-m", "512", "--file-prefix",
                                     "keelflow" + std::to_string(getpid()), "--no-telemetry",
                                     "--no-shconf",   "-l",           "0"};
    auto r = hal::make_dpdk_backend(args);
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    return std::move(r).value();
  }();
  return *b;
}

std::unique_ptr<hal::Port> open_dpdk(const std::string& name, const std::string& devargs, uint16_t id) {
  hal::PortSpec s;
  s.name = name;
  s.kind = hal::PortKind::dpdk;
  s.devargs = devargs;
  s.text = "dpdk:" + devargs;
  auto r = backend().open_port(s, 1, 1);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  std::unique_ptr<hal::Port> p = std::move(r).value();
  p->set_id(id);
  return p;
}

bool not_supported(int e) { return e == ENOSYS || e == ENOTSUP; }

}  // namespace

TEST_CASE("dpdk flow: net_null and net_ring refuse every rule with an errno and a message, nothing crashes") {
  auto n = open_dpdk("n0", "net_null0", 3);
  auto g = open_dpdk("g0", "net_ring0", 4);
  for (hal::Port* port : {n.get(), g.get()}) {
    CAPTURE(port->name());
    hal::FlowEngine* fe = port->flow_engine();
    REQUIRE(fe != nullptr);
    CHECK(fe->port_name() == port->name());
    const hal::FlowEngineInfo info = fe->info();
    CHECK_FALSE(info.async_api);

    hal::FlowPattern p;
    hal::FlowIpv4 v4{};
    v4.dst = 0x0a000001;
    hal::FlowIpv4 v4m{};
    v4m.dst = ~0u;
    p.eth({}, {}).ipv4(v4, v4m).udp({0, 53}, {0, 0xffff});
    hal::FlowActions a;
    a.count_hits().represented_port(4);  // the ring's hal id: maps to a real ethdev id
    hal::FlowError err;
    Status st = fe->validate({}, p, a, &err);
    CHECK_FALSE(st.ok());
    CHECK(not_supported(err.errnum));
    CHECK(std::string(err.op) == "validate");
    CHECK(st.message().find("rte_flow validate on port " + port->name() + ": ") == 0);
    CHECK_FALSE(err.message.empty());

    auto c = fe->create({}, p, a, &err);
    CHECK_FALSE(c.ok());
    CHECK(not_supported(err.errnum));
    CHECK(c.status().code() == Errc::unsupported);
    CHECK(c.status().message().find("rte_flow create on port " + port->name()) == 0);

    hal::FlowActions drop;
    drop.drop();
    CHECK_FALSE(fe->create({}, p, drop, &err).ok());

    // A port that is not this process's: refused before any driver call.
    hal::FlowActions bad;
    bad.port(99);
    auto b = fe->create({}, p, bad, &err);
    CHECK(err.errnum == ENODEV);
    CHECK(err.index == 0);
    CHECK(b.status().message().find("action 0 (port_id): port 99 is not a DPDK port") != std::string::npos);

    hal::FlowQuery q;
    CHECK_FALSE(fe->query(12345, q, &err).ok());
    CHECK_FALSE(q.ok);
    CHECK(q.errnum == ENOENT);
    CHECK(fe->destroy(12345, &err).code() == Errc::not_found);

    const hal::FlowHandle hs[] = {1, 2};
    hal::FlowQuery qs[2];
    CHECK(fe->query_bulk(hs, qs) == 0);
    CHECK(qs[1].errnum == ENOENT);

    // The template/queue API: info_get fails on vdevs, so configure does too.
    Status cfg = fe->configure(1, 64, &err);
    CHECK_FALSE(cfg.ok());
    CHECK(err.errnum != 0);
    CHECK(cfg.message().find("rte_flow configure on port " + port->name()) == 0);
    CHECK_FALSE(fe->pattern_template({}, p, &err).ok());
    CHECK_FALSE(fe->actions_template({}, a, a, &err).ok());
    const hal::FlowTemplateId none[] = {1};
    CHECK(fe->template_table({}, 16, none, none, &err).status().code() == Errc::not_found);
    hal::FlowHandle h = 7;
    Status ac = fe->async_create(0, 1, p, 0, a, 0, false, 1, &h, &err);
    CHECK_FALSE(ac.ok());
    CHECK(h == hal::kNoFlow);
    CHECK(ac.message().find("not configured") != std::string::npos);
    hal::FlowOpResult res[4];
    CHECK(fe->pull(0, res, &err) == 0);
    CHECK_FALSE(fe->push(0, &err).ok());
    CHECK(fe->flush(&err).ok() == (err.errnum == 0));
  }
}

TEST_CASE("dpdk flow: a stopped port's engine answers ENODEV") {
  auto n = open_dpdk("n1", "net_null1", 5);
  hal::FlowEngine* fe = n->flow_engine();
  REQUIRE(fe != nullptr);
  n->stop();
  hal::FlowError err;
  hal::FlowActions a;
  a.drop();
  auto c = fe->create({}, {}, a, &err);
  CHECK(err.errnum == ENODEV);
  CHECK(c.status().message() == "rte_flow create on port n1: device: the port is stopped (ENODEV)");
  hal::FlowQuery q;
  CHECK_FALSE(fe->query(1, q, &err).ok());
  CHECK(q.errnum == ENODEV);
  CHECK_FALSE(fe->info().async_api);
}

TEST_CASE("dpdk flow: on net_tap, create refuses rss and a VID tap would mangle; validate still asks the driver") {
  // The engine is told its driver is net_tap while it runs on a net_null
  // port: what keel refuses by itself shows apart from what the driver says.
  auto n = open_dpdk("n2", "net_null2", 6);
  const auto* dp = n->flow_engine();
  REQUIRE(dp != nullptr);
  // The port's ethdev id, from describe() ("... port N, ...").
  const std::string d = n->describe();
  const size_t at = d.find(", port ");
  REQUIRE(at != std::string::npos);
  const auto pid = static_cast<uint16_t>(std::stoi(d.substr(at + 7)));
  dpdk::DpdkFlowEngine tap(pid, "t0", "net_tap", kMap);
  hal::FlowPattern p;
  p.eth({}, {});
  const uint16_t qs[] = {0, 1};
  hal::FlowActions a;
  a.rss(qs, hal::kFlowRssIpv4);
  hal::FlowError err;
  auto c = tap.create({}, p, a, &err);
  CHECK(err.errnum == ENOTSUP);
  CHECK(err.where == hal::FlowErrorWhere::action);
  CHECK(err.index == 0);
  CHECK(c.status().message().find("rte_flow create on port t0: action 0 (rss): keel does not use rss on net_tap") ==
        0);
  CHECK(tap.rule_count() == 0);
  // validate goes to the driver (here net_null's ENOSYS): a hint only.
  CHECK_FALSE(tap.validate({}, p, a, &err).ok());
  CHECK(err.errnum == ENOSYS);
  // Anything but rss reaches the driver on create too.
  hal::FlowActions q;
  q.queue(1);
  CHECK_FALSE(tap.create({}, p, q, &err).ok());
  CHECK(err.errnum == ENOSYS);

  // tap's vlan item: a rule whose VID tap would install wrongly is refused
  // at the item; one it installs as asked goes on to the driver.
  auto vlan = [](uint16_t tci, uint16_t mask) {
    hal::FlowPattern v;
    v.eth({}, {}).vlan({tci, 0x0800}, {mask, 0xffff});
    return v;
  };
  hal::FlowActions drop;
  drop.drop();
  auto w = tap.create({}, vlan(0x2123, 0x0fff), drop, &err);
  CHECK(err.errnum == ENOTSUP);
  CHECK(err.where == hal::FlowErrorWhere::item);
  CHECK(err.index == 1);
  CHECK(w.status().message().find("item 1 (vlan): net_tap would install VID 3 for VID 291") != std::string::npos);
  CHECK_FALSE(tap.create({}, vlan(0x2042, 0x0fff), drop, &err).ok());  // 0x2042 & 0xff0f: VID 2
  CHECK(err.errnum == ENOTSUP);
  CHECK_FALSE(tap.create({}, vlan(0x20f0, 0xefff), drop, &err).ok());  // bit 4 of the VID lost
  CHECK(err.errnum == ENOTSUP);
  CHECK_FALSE(tap.create({}, vlan(0x2042, 0xefff), drop, &err).ok());  // what tap gets right
  CHECK(err.errnum == ENOSYS);  // the driver's (net_null) answer: keel let it through
  CHECK_FALSE(tap.create({}, vlan(0xe000, 0xe000), drop, &err).ok());  // PCP only: no VID to get wrong
  CHECK(err.errnum == ENOSYS);

  tap.detach();
  CHECK(tap.create({}, p, q, &err).status().code() == Errc::unavailable);
}

TEST_CASE("dpdk flow: a queue-count restart counts as a reset of the rules (reset_generation moves)") {
  auto n = open_dpdk("n3", "net_null3", 7);
  hal::FlowEngine* fe = n->flow_engine();
  REQUIRE(fe != nullptr);
  const uint64_t g = fe->info().reset_generation;
  REQUIRE_MESSAGE(n->set_queue_count(2, 1).ok(), "net_null takes any number of queues");
  CHECK(fe->info().reset_generation == g + 1);
  CHECK(n->set_queue_count(2, 1).ok());  // no change, no restart
  CHECK(fe->info().reset_generation == g + 1);
}

TEST_CASE("dpdk flow: net_tap on this host: validate only parses, create decides (skipped without a TAP)") {
  const std::string ifname = "kflow" + std::to_string(getpid() % 100000);
  hal::PortSpec sp;
  sp.name = "tp0";
  sp.kind = hal::PortKind::dpdk;
  sp.devargs = "net_tap_kf" + std::to_string(getpid() % 100000) + ",iface=" + ifname;
  sp.text = "dpdk:" + sp.devargs;
  auto r = backend().open_port(sp, 1, 1);
  if (!r.ok()) {
    MESSAGE("skipping the net_tap case: " << r.status().message());
    return;
  }
  std::unique_ptr<hal::Port> port = std::move(r).value();
  port->set_id(8);
  hal::FlowEngine* fe = port->flow_engine();
  REQUIRE(fe != nullptr);
  CHECK_FALSE(fe->info().async_api);  // tap has no rte_flow_info_get
  hal::FlowPattern p;
  hal::FlowIpv4 v4{}, v4m{};
  v4.dst = 0x0a000001;
  v4m.dst = ~0u;
  p.eth({}, {}).ipv4(v4, v4m).udp({0, 53}, {0, 0xffff});
  hal::FlowActions drop;
  drop.drop();
  hal::FlowError err;
  const Status v = fe->validate({}, p, drop, &err);
  auto c = fe->create({}, p, drop, &err);
  MESSAGE("net_tap validate: " << (v.ok() ? "ok" : v.message()) << "; create: "
                               << (c.ok() ? "ok" : c.status().message()));
  if (c.ok()) {
    // A kernel with TC flower: the rule exists and goes again.
    CHECK(fe->destroy(c.value(), &err).ok());
  } else if (err.errnum == EEXIST) {
    // A kernel without cls_flower (this host's): the trap of dpdk_flow.h.
    // validate said yes (it only parses), create says EEXIST, and keel's
    // message says what that EEXIST means.
    CHECK(v.ok());
    CHECK(c.status().code() == Errc::already_exists);
    CHECK(c.status().message().find("rte_flow create on port tp0: ") == 0);
    CHECK(c.status().message().find("refused by the kernel (TC flower): net_tap reports a refused rule as EEXIST") !=
          std::string::npos);
    CHECK(static_cast<dpdk::DpdkFlowEngine*>(fe)->rule_count() == 0);
  } else {
    // No netlink for tap's TC set-up at all (qemu-user answers its requests
    // ENOTSUP: tap logs "Disabling rte flow support"): refused with the
    // driver's reason, nothing installed.
    CHECK(err.errnum == ENOTSUP);
    CHECK(c.status().message().find("rte_flow create on port tp0: ") == 0);
    CHECK(static_cast<dpdk::DpdkFlowEngine*>(fe)->rule_count() == 0);
  }
  CHECK(fe->flush(nullptr).ok());
  port.reset();
}

TEST_CASE("dpdk flow: shutdown") { backend().shutdown(); }

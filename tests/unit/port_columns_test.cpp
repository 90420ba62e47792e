// ovs-vsctl column words on add-port (ofproto/port_columns.h): every form
// Open vSwitch 3.1 accepts for tag, trunks, vlan_mode, ofport_request,
// mtu_request and type parses to the same PortOptions; every refusal
// carries ovs-vsctl's own error text (recorded from `ovs-vsctl add-port`
// against a private ovsdb-server, without the "ovs-vsctl: " prefix) or a
// keel error naming the column or key; an error changes nothing; the
// running-config words parse back to the same port; Ofproto::add_port
// checks type= against the datapath port and adds nothing on an error.
#include "ofproto/port_columns.h"

#include <doctest/doctest.h>

#include <sstream>

#include "datapath/datapath.h"
#include "keel/hal/backend.h"
#include "keel/hal/port_spec.h"
#include "ofproto/ofproto.h"

using namespace keel;
using namespace keel::ofproto;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

PortOptions parse_ok(const std::vector<std::string>& words, const std::string& port = "p1") {
  PortOptions po;
  Status st = parse_port_columns(words, port, po);
  REQUIRE_MESSAGE(st.ok(), st.message());
  return po;
}

std::string parse_error(const std::vector<std::string>& words, const std::string& port = "p1") {
  PortOptions po;
  po.tag = 7;  // an error must leave this alone
  Status st = parse_port_columns(words, port, po);
  REQUIRE_FALSE_MESSAGE(st.ok(), "accepted: ", words.empty() ? "" : words.back());
  CHECK(po.tag == std::optional<uint16_t>(7));
  CHECK(po.trunks.empty());
  CHECK_FALSE(po.ofport);
  CHECK_FALSE(po.mtu_request);
  return std::string(st.message());
}

using V = std::vector<uint16_t>;

}  // namespace

TEST_CASE("port columns: the Port columns in every form ovs-vsctl takes") {
  CHECK(parse_ok({"tag=10"}).tag == std::optional<uint16_t>(10));
  CHECK(parse_ok({"tag=010"}).tag == std::optional<uint16_t>(10));  // base 10, as strtoll(s, 10)
  CHECK(parse_ok({"tag=+10"}).tag == std::optional<uint16_t>(10));
  CHECK(parse_ok({"tag= 10"}).tag == std::optional<uint16_t>(10));
  CHECK(parse_ok({"tag=[10]"}).tag == std::optional<uint16_t>(10));
  CHECK(parse_ok({"tag=0"}).tag == std::optional<uint16_t>(0));
  CHECK(parse_ok({"tag=4095"}).tag == std::optional<uint16_t>(4095));
  CHECK_FALSE(parse_ok({"tag=10", "tag=[]"}).tag);  // the last word wins; [] is "none"
  // Column names: unique case-insensitive prefixes, '-' for '_'.
  CHECK(parse_ok({"Tag=10"}).tag == std::optional<uint16_t>(10));
  CHECK(parse_ok({"ta=10"}).tag == std::optional<uint16_t>(10));
  CHECK(parse_ok({"vlan-mode=trunk"}).vlan_mode == std::optional<VlanMode>(VlanMode::trunk));

  CHECK(parse_ok({"trunks=10,20"}).trunks == V{10, 20});
  CHECK(parse_ok({"trunks=[10,20]"}).trunks == V{10, 20});
  CHECK(parse_ok({"trunks=[10, 20]"}).trunks == V{10, 20});
  CHECK(parse_ok({"trunks=10 20"}).trunks == V{10, 20});
  CHECK(parse_ok({"trunks=20,10"}).trunks == V{10, 20});  // a set: sorted
  CHECK(parse_ok({"trunks=10,"}).trunks == V{10});
  CHECK(parse_ok({"trunks=10-12"}).trunks == V{10, 11, 12});
  CHECK(parse_ok({"trunks=[10-12,20]"}).trunks == V{10, 11, 12, 20});
  CHECK(parse_ok({"trunks=10", "trunks=20"}).trunks == V{20});
  CHECK(parse_ok({"trunks=0-4095"}).trunks.size() == 4096);
  CHECK(parse_ok({"tag=1\\0"}).tag == std::optional<uint16_t>(10));  // a backslash quotes the next character
  CHECK(parse_ok({"trunks=10", "trunks=[]"}).trunks.empty());

  CHECK(parse_ok({"vlan_mode=access", "tag=3"}).vlan_mode == std::optional<VlanMode>(VlanMode::access));
  CHECK(parse_ok({"vlan_mode=trunk"}).vlan_mode == std::optional<VlanMode>(VlanMode::trunk));
  CHECK(parse_ok({"vlan_mode=native-tagged"}).vlan_mode == std::optional<VlanMode>(VlanMode::native_tagged));
  CHECK(parse_ok({"vlan_mode=native-untagged"}).vlan_mode ==
        std::optional<VlanMode>(VlanMode::native_untagged));
  CHECK(parse_ok({"vlan_mode=\"native-tagged\""}).vlan_mode ==
        std::optional<VlanMode>(VlanMode::native_tagged));
  CHECK_FALSE(parse_ok({"vlan_mode=trunk", "vlan_mode=[]"}).vlan_mode);

  const PortOptions all = parse_ok(split("tag=10 trunks=10,20 vlan_mode=native-untagged"));
  CHECK(all.tag == std::optional<uint16_t>(10));
  CHECK(all.trunks == V{10, 20});
  CHECK(all.vlan_mode == std::optional<VlanMode>(VlanMode::native_untagged));
}

TEST_CASE("port columns: Interface columns, on add-port itself or after -- set Interface") {
  // ovs-vsctl's own form: `add-port br0 p1 -- set Interface p1 ...`; empty
  // commands between "--" are nothing, as in ovs-vsctl.
  PortOptions po =
      parse_ok(split("tag=5 -- set Interface p1 ofport_request=7 mtu_request=9000 type=internal"));
  CHECK(po.tag == std::optional<uint16_t>(5));
  CHECK(po.ofport == std::optional<uint32_t>(7));
  CHECK(po.mtu_request == std::optional<uint32_t>(9000));
  CHECK(po.type == std::optional<std::string>("internal"));
  CHECK(parse_ok(split("tag=1 -- -- --")).tag == std::optional<uint16_t>(1));
  po = parse_ok(
      split("-- set int p1 ofport_request=7 -- set Port p1 tag=3 -- set interface p1 mtu_request=1500"));
  CHECK(po.ofport == std::optional<uint32_t>(7));
  CHECK(po.tag == std::optional<uint16_t>(3));
  CHECK(po.mtu_request == std::optional<uint32_t>(1500));
  // keel's shortcut: Interface columns among add-port's own words.
  po = parse_ok(split("ofport_request=2 mtu_request=68 type=dpdk"));
  CHECK(po.ofport == std::optional<uint32_t>(2));
  CHECK(po.mtu_request == std::optional<uint32_t>(68));
  CHECK(po.type == std::optional<std::string>("dpdk"));
  CHECK(parse_ok({"mtu_request=9216"}).mtu_request == std::optional<uint32_t>(9216));
  CHECK(parse_ok({"ofport_request=65279"}).ofport == std::optional<uint32_t>(65279));
  CHECK_FALSE(parse_ok({"ofport_request=3", "ofport_request=[]"}).ofport);
  CHECK(parse_ok({"type=\"\""}).type == std::optional<std::string>(""));
  // An empty map sets nothing.
  CHECK(parse_ok({"other_config={}"}).tag == std::nullopt);
}

TEST_CASE("port columns: what ovs-vsctl refuses, refused with its words") {
  CHECK(parse_error({"foo=1"}) == "neither Port nor Interface contains a column whose name matches \"foo\"");
  CHECK(parse_error({"t=10"}) == "Port contains more than one column whose name matches \"t\": tag, trunks");
  CHECK(parse_error({"tag=abc"}) == "\"abc\" is not a valid integer or range");
  CHECK(parse_error({"tag=0x10"}) == "\"0x10\" is not a valid integer or range");
  CHECK(parse_error({"tag=\"10\""}) == "\"\"10\"\" is not a valid integer or range");
  CHECK(parse_error({"tag=5000"}) ==
        "constraint violation: 5000 is not in the valid range 0 to 4095 (inclusive)");
  CHECK(parse_error({"tag=-1"}) ==
        "constraint violation: -1 is not in the valid range 0 to 4095 (inclusive)");
  CHECK(parse_error({"tag="}) == "tag=: argument does not end in \"=\" followed by a value.");
  CHECK(parse_error({"tag"}) == "tag: argument does not end in \"=\" followed by a value.");
  CHECK(parse_error({"tag:1=2"}) == "cannot specify key to set for non-map column tag");
  CHECK(parse_error({"tag=[10,11]"}) == "[10,11]: 2 value(s) specified but the maximum number is 1");
  CHECK(parse_error({"=3"}) == "=3: missing column name");
  CHECK(parse_error({"trunks=4096"}) ==
        "constraint violation: 4096 is not in the valid range 0 to 4095 (inclusive)");
  CHECK(parse_error({"trunks=20,10,10"}) == "20,10,10: set contains duplicate value");
  CHECK(parse_error({"trunks=\"10,20\""}) == "\"\"10,20\"\" is not a valid integer or range");
  CHECK(parse_error({"trunks={10}"}) == "{10}: unexpected \"{\" parsing set of up to 4096 integers");
  CHECK(parse_error({"trunks=10-5000"}) ==
        "constraint violation: 5000 is not in the valid range 0 to 4095 (inclusive)");
  CHECK(parse_error({"trunks=10-5"}) == "\"10-5\" is not a valid range. Range end cannot be before start.");
  CHECK(parse_error({"trunks=[10"}) == "[10: missing \"]\" at end of data");
  CHECK(parse_error({"trunks=10]"}) == "10]: unexpected \"]\" parsing set of up to 4096 integers");
  CHECK(parse_error({"vlan_mode=bogus"}) ==
        "constraint violation: bogus is not one of the allowed values ([access, dot1q-tunnel, native-tagged, "
        "native-untagged, trunk])");
  CHECK(parse_error({"vlan_mode="}) == "vlan_mode=: argument does not end in \"=\" followed by a value.");
  CHECK(parse_error(split("-- set Interface p1 ofport_request=0")) ==
        "constraint violation: 0 is not in the valid range 1 to 65279 (inclusive)");
  CHECK(parse_error(split("-- set interface p1 mtu_request=0")) ==
        "constraint violation: 0 is less than minimum allowed value 1");
  CHECK(parse_error(split("-- set interface p1 type=[]")) ==
        "[]: 0 value(s) specified but the minimum number is 1");
  CHECK(parse_error(split("-- set interface p1 options:a")) ==
        "options:a: argument does not end in \"=\" followed by a value.");
  CHECK(parse_error(split("-- set i p1 ofport_request=3")) ==
        "\"i\" matches multiple table names: IPFIX, Interface");
  CHECK(parse_error(split("-- set port p1 ofport_request=3")) ==
        "Port does not contain a column whose name matches \"ofport_request\"");
  CHECK(parse_error(split("-- set Interface p2 ofport_request=3"))
            .rfind("no row \"p2\" in table Interface", 0) == 0);
  CHECK(parse_error(split("-- set nosuch p1 tag=1")) == "unknown table \"nosuch\"");
  // `set` is a command only after "--"; before, it is a (bad) column word.
  CHECK(parse_error(split("set Interface p1 ofport_request=3")) ==
        "neither Port nor Interface contains a column whose name matches \"set\"");
  CHECK(parse_error(split("-- set Port p1 set Interface p1 ofport_request=3")) ==
        "Port does not contain a column whose name matches \"set\"");
}

TEST_CASE("port columns: what keel does not implement is an error naming it, never ignored") {
  CHECK(parse_error({"vlan_mode=dot1q-tunnel"}).find("dot1q-tunnel is not implemented by keel") !=
        std::string::npos);
  CHECK(parse_error({"qos=[]"}).find("Port column qos is not implemented by keel") != std::string::npos);
  CHECK(parse_error({"cvlans=10"}).find("Port column cvlans") != std::string::npos);
  CHECK(parse_error(split("-- set Interface p1 ingress_policing_rate=1000"))
            .find("Interface column ingress_policing_rate") != std::string::npos);
  CHECK(parse_error({"other_config:priority-tags=true"}).rfind("other_config:priority-tags: ", 0) == 0);
  CHECK(parse_error({"other_config={a=b}"}).rfind("other_config:a: ", 0) == 0);
  // Interface options other than n_rxq are a tunnel's: kept for add_port,
  // which refuses them for a port that is not a tunnel (tunnel_test.cpp).
  CHECK(parse_ok({"options:dpdk-devargs=net_null1,no-rx=1"}).tunnel_options ==
        std::vector<std::pair<std::string, std::string>>{{"dpdk-devargs", "net_null1,no-rx=1"}});
  CHECK(parse_error({"external_ids:iface-id=vm1"}).rfind("external_ids:iface-id: ", 0) == 0);
  CHECK(parse_error({"mtu_request=67"}) == "mtu_request 67 is not in keel's range 68 to 9216 (inclusive)");
  CHECK(parse_error({"mtu_request=9217"}) ==
        "mtu_request 9217 is not in keel's range 68 to 9216 (inclusive)");
  CHECK(parse_error({"type=ip6gre"}).find("keel has no ports of Open vSwitch type ip6gre") !=
        std::string::npos);
  CHECK(parse_error({"type=bogus"}).find("type=bogus: unknown interface type") == 0);
  CHECK(parse_error(split("-- set Bridge p1 tag=1")).find("add-port takes only") != std::string::npos);
  CHECK(parse_error(split("-- add-port br0 p2")).rfind("after --, add-port takes only", 0) == 0);
  CHECK(parse_error({"--", "set", "Interface"}).rfind("'set' command requires at least 3 arguments", 0) == 0);
  CHECK(
      parse_error({"--", "set", "Interface", "p1"}).rfind("'set' command requires at least 3 arguments", 0) ==
      0);
  // All or nothing: good words before the bad one are not applied either.
  CHECK(parse_error(split("tag=10 trunks=1,2 ofport_request=3 mtu_request=1500 tag=abc")) ==
        "\"abc\" is not a valid integer or range");
}

TEST_CASE("port columns: type= against the datapath port's kind") {
  CHECK(check_interface_type("", "p", "pcap").ok());
  CHECK(check_interface_type("system", "p", "tap").ok());
  CHECK(check_interface_type("internal", "p", "dpdk").ok());
  CHECK(check_interface_type("dummy", "p", "pcap").ok());
  CHECK(check_interface_type("dummy", "p", "ring").ok());
  CHECK(check_interface_type("dummy-pmd", "p", "null").ok());
  CHECK(check_interface_type("dpdk", "p", "dpdk").ok());
  CHECK(check_interface_type("tap", "p", "tap").ok());
  Status st = check_interface_type("dpdk", "p0", "pcap");
  REQUIRE_FALSE(st.ok());
  CHECK(std::string(st.message()) ==
        "type=dpdk: port p0 is a pcap port (its --port spec decides; type=dummy matches it)");
  CHECK_FALSE(check_interface_type("tap", "p0", "ring").ok());
  CHECK_FALSE(check_interface_type("dummy", "p0", "dpdk").ok());
}

TEST_CASE("port columns: the running-config words parse back to the same port") {
  auto round_trip = [](PortConfig p) {
    const std::string text = format_port_columns(p);
    CAPTURE(text);
    const PortOptions po = parse_ok(split(text), p.name);
    CHECK(po.ofport == std::optional<uint32_t>(p.ofport));
    CHECK(po.tag.value_or(0) == p.tag);
    CHECK(po.vlan_mode.value_or(po.tag ? VlanMode::access : VlanMode::trunk) == p.vlan_mode);
    CHECK(po.trunks == p.trunks);
    CHECK(po.mtu_request == p.mtu_request);
    return text;
  };
  PortConfig p;
  p.name = "p1";
  p.ofport = 7;
  CHECK(round_trip(p) == "-- set Interface p1 ofport_request=7");
  p.vlan_mode = VlanMode::access;
  p.tag = 10;
  CHECK(round_trip(p) == "tag=10 -- set Interface p1 ofport_request=7");
  p.tag = 0;
  CHECK(round_trip(p) == "tag=0 -- set Interface p1 ofport_request=7");
  p.vlan_mode = VlanMode::native_untagged;
  p.tag = 5;
  p.trunks = {3, 4, 5};
  p.mtu_request = 9000;
  CHECK(round_trip(p) ==
        "tag=5 trunks=3,4,5 vlan_mode=native-untagged -- set Interface p1 ofport_request=7 mtu_request=9000");
  p.vlan_mode = VlanMode::trunk;
  p.tag = 0;
  p.trunks = {1};
  p.mtu_request.reset();
  CHECK(round_trip(p) == "trunks=1 -- set Interface p1 ofport_request=7");
  p.vlan_mode = VlanMode::native_tagged;
  CHECK(round_trip(p) == "trunks=1 vlan_mode=native-tagged -- set Interface p1 ofport_request=7");
  p.vlan_mode = VlanMode::trunk;
  p.tag = 9;  // a trunk with a tag: vlan_mode must be spelled out
  CHECK(round_trip(p) == "tag=9 trunks=1 vlan_mode=trunk -- set Interface p1 ofport_request=7");
  // What was given is printed (ovs-vsctl's columns), not only what differs.
  p.trunks.clear();
  p.tag = 0;
  p.vlan_mode_set = true;
  CHECK(round_trip(p) == "vlan_mode=trunk -- set Interface p1 ofport_request=7");
  p.vlan_mode = VlanMode::access;
  CHECK(round_trip(p) == "vlan_mode=access -- set Interface p1 ofport_request=7");
  p.tag_set = true;
  CHECK(round_trip(p) == "tag=0 vlan_mode=access -- set Interface p1 ofport_request=7");
  p.vlan_mode_set = false;
  CHECK(round_trip(p) == "tag=0 -- set Interface p1 ofport_request=7");
}

TEST_CASE("Ofproto::add_port: checks type= and mtu_request, and adds nothing on an error; set_port_vlan") {
  auto be = hal::make_sim_backend({.buffers = 256});
  REQUIRE(be.ok());
  datapath::Datapath dp(datapath::DatapathConfig{});
  for (const char* name : {"p0", "p1"}) {
    auto spec = hal::parse_port_spec(name, "ring:size=64");
    REQUIRE(spec.ok());
    auto port = (*be)->open_port(*spec, 1, 1);
    REQUIRE(port.ok());
    REQUIRE(dp.add_port(std::move(port.value())).ok());
  }
  Ofproto of(dp);
  std::lock_guard lk(of.writer_mutex());
  REQUIRE(of.add_bridge("br0").ok());
  Bridge* b = of.find_bridge("br0");

  PortOptions po = parse_ok(split("tag=10 -- set Interface p0 type=dpdk ofport_request=4"), "p0");
  Status st = of.add_port("br0", "p0", po);
  REQUIRE_FALSE(st.ok());
  CHECK(std::string(st.message()).find("port p0 is a ring port") != std::string::npos);
  CHECK(b->ports()->ports.empty());
  po.mtu_request = 10000;  // the API checks the range too
  po.type.reset();
  CHECK_FALSE(of.add_port("br0", "p0", po).ok());
  CHECK(b->ports()->ports.empty());

  po = parse_ok(split("tag=10 trunks=10,20 -- set Interface p0 type=dummy ofport_request=4 mtu_request=1500"),
                "p0");
  REQUIRE(of.add_port("br0", "p0", po).ok());  // access with trunks: kept, ignored, warned (as in OVS)
  REQUIRE(b->ports()->ports.size() == 1);
  const PortConfig& pc = b->ports()->ports[0];
  CHECK(pc.ofport == 4);
  CHECK(pc.vlan_mode == VlanMode::access);
  CHECK(pc.tag == 10);
  CHECK(pc.trunks == V{10, 20});
  CHECK(pc.mtu_request == std::optional<uint32_t>(1500));
  CHECK(format_port_columns(pc) ==
        "tag=10 trunks=10,20 -- set Interface p0 ofport_request=4 mtu_request=1500");

  // An access port without a tag is on VLAN 0, as in OVS; the running
  // config prints what was given.
  REQUIRE(of.add_port("br0", "p1", parse_ok(split("vlan_mode=access"), "p1")).ok());
  const PortConfig* p1 = b->ports()->by_name("p1");
  REQUIRE(p1);
  CHECK(p1->vlan_mode == VlanMode::access);
  CHECK(p1->tag == 0);
  CHECK(format_port_columns(*p1) == "vlan_mode=access -- set Interface p1 ofport_request=1");

  // set_port_vlan: the VLAN columns of a port on some bridge.
  po = parse_ok(split("trunks=5,6 vlan_mode=native-tagged tag=5"));
  REQUIRE(of.set_port_vlan("p1", po).ok());
  p1 = b->ports()->by_name("p1");
  CHECK(format_port_columns(*p1) == "tag=5 trunks=5,6 vlan_mode=native-tagged -- set Interface p1 ofport_request=1");
  CHECK_FALSE(of.set_port_vlan("nope", po).ok());
}

TEST_CASE("port columns: Interface other_config:pmd-rxq-affinity and options:n_rxq (issue 13)") {
  // On add-port itself (keel's one interface per port), after -- set
  // Interface, and as a map; printed back after the Interface columns.
  CHECK(parse_ok({"other_config:pmd-rxq-affinity=0:3,1:7"}).rxq_affinity == std::optional<std::string>("0:3,1:7"));
  CHECK(parse_ok(split("-- set Interface p1 other_config:pmd-rxq-affinity=\"0:1\"")).rxq_affinity ==
        std::optional<std::string>("0:1"));
  CHECK(parse_ok({"other_config={pmd-rxq-affinity=\"2:0\"}"}).rxq_affinity == std::optional<std::string>("2:0"));
  CHECK(parse_ok({"other_config:pmd-rxq-affinity=\"\""}).rxq_affinity == std::optional<std::string>(""));
  CHECK(parse_ok(split("-- set Interface p1 options:n_rxq=4")).n_rxq == std::optional<uint16_t>(4));
  CHECK(parse_ok({"options:n_rxq=1"}).n_rxq == std::optional<uint16_t>(1));
  // Bad values: an error naming the key, nothing applied.
  CHECK(parse_error({"other_config:pmd-rxq-affinity=0:x"}).find("pmd-rxq-affinity \"0:x\"") == 0);
  CHECK(parse_error({"other_config:pmd-rxq-affinity=3"}).find("pmd-rxq-affinity \"3\"") == 0);
  // As Open vSwitch's parse_affinity_list(): a later pair for a queue wins,
  // and a queue no port can have is accepted and ignored.
  CHECK(parse_ok({"other_config:pmd-rxq-affinity=0:1,0:2"}).rxq_affinity.has_value());
  CHECK(parse_ok({"other_config:pmd-rxq-affinity=16:1"}).rxq_affinity.has_value());
  CHECK(datapath::Datapath::parse_rxq_affinity("0:1,0:2").value() == datapath::Datapath::RxqAffinity{{0, 2}});
  CHECK(datapath::Datapath::parse_rxq_affinity("16:1,1:3").value() == datapath::Datapath::RxqAffinity{{1, 3}});
  CHECK(parse_error({"options:n_rxq=0"}).rfind("options:n_rxq=0: ", 0) == 0);
  CHECK(parse_error({"options:n_rxq=17"}).rfind("options:n_rxq=17: ", 0) == 0);
  CHECK(parse_error({"options:n_rxq=two"}).rfind("options:n_rxq=two: ", 0) == 0);
  CHECK(parse_error(split("tag=10 other_config:pmd-rxq-affinity=0:z")).find("pmd-rxq-affinity") == 0);
  // Another key beside a known one is still refused, naming it.
  CHECK(parse_error({"other_config={pmd-rxq-affinity=\"0:1\",priority-tags=true}"})
            .rfind("other_config:priority-tags: ", 0) == 0);
  // The running config's words parse back to the same settings.
  PortConfig p;
  p.name = "p1";
  p.ofport = 3;
  p.n_rxq = 4;
  p.rxq_affinity = "0:3,1:7";
  const std::string text = format_port_columns(p);
  CHECK(text == "-- set Interface p1 ofport_request=3 options:n_rxq=4 other_config:pmd-rxq-affinity=0:3,1:7");
  const PortOptions po = parse_ok(split(text));
  CHECK(po.n_rxq == p.n_rxq);
  CHECK(po.rxq_affinity == std::optional<std::string>(p.rxq_affinity));
}

// The route table (ofproto/tunnel.h RouteTable; OVS lib/ovs-router.c):
// longest-prefix match over IPv4 and IPv6, user routes over connected
// ones, the source address chosen as ovs_router_get_netdev_source_address
// does, the refusals of ovs/route/add and /del, and `ovs/route/show`'s text.
#include <doctest/doctest.h>

#include "ofproto/tunnel.h"

using namespace keel;
using namespace keel::ofproto;

namespace {

IpAddr ip(const char* s) {
  auto a = IpAddr::parse(s);
  REQUIRE(a.has_value());
  return *a;
}
IpPrefix pfx(const char* s) {
  auto p = IpPrefix::parse(s);
  REQUIRE(p.has_value());
  return *p;
}

BridgeAddrs addrs() {
  BridgeAddr phy;
  phy.bridge_name = "br-phy";
  phy.addrs = {pfx("1.1.2.88/24"), pfx("10.0.0.1/8"), pfx("2001:cafe::88/64")};
  BridgeAddr b2;
  b2.bridge_name = "br-2";
  b2.addrs = {pfx("192.168.0.1/16")};
  return BridgeAddrs({phy, b2});
}

}  // namespace

TEST_CASE("addresses and prefixes parse and print as OVS") {
  CHECK(ip("1.2.3.4").is_v4());
  CHECK(ip("1.2.3.4").to_string() == "1.2.3.4");
  CHECK(ip("2001:cafe::88").to_string() == "2001:cafe::88");
  CHECK_FALSE(ip("2001:cafe::88").is_v4());
  CHECK(ip("::ffff:1.2.3.4") == ip("1.2.3.4"));  // v4-mapped, as OVS stores IPv4
  CHECK_FALSE(IpAddr::parse("1.2.3").has_value());
  CHECK_FALSE(IpAddr::parse("").has_value());
  CHECK_FALSE(IpAddr::parse("1.2.3.4.5").has_value());
  CHECK(pfx("1.1.2.88/24").network().to_string() == "1.1.2.0/24");
  CHECK(pfx("2001:cafe::88/24").network().to_string() == "2001:ca00::/24");
  CHECK(pfx("0.0.0.0/0").contains(ip("8.8.8.8")));
  CHECK_FALSE(pfx("0.0.0.0/0").contains(ip("2001::1")));  // families never mix
  CHECK_FALSE(IpPrefix::parse("1.1.2.0/33").has_value());
  CHECK_FALSE(IpPrefix::parse("2001::/129").has_value());
  CHECK_FALSE(IpPrefix::parse("1.1.2.0").has_value());
  CHECK_FALSE(IpPrefix::parse("1.1.2.0/-1").has_value());
  CHECK(parse_mac("aa:55:aa:55:00:0F").has_value());
  CHECK(format_mac(*parse_mac("AA:55:aa:55:00:0f")) == "aa:55:aa:55:00:0f");
  CHECK_FALSE(parse_mac("aa:55:aa:55:00").has_value());
  CHECK_FALSE(parse_mac("aa-55-aa-55-00-00").has_value());
  CHECK_FALSE(parse_mac("ga:55:aa:55:00:00").has_value());
}

TEST_CASE("connected routes of ip-add, LPM, OVS priorities: local > user (plen+32) > connected") {
  const BridgeAddrs a = addrs();
  RouteTable t = RouteTable::with_connected(RouteTable{}, a);
  auto r = t.lookup(ip("1.1.2.92"));
  REQUIRE(r);
  CHECK(r->bridge == "br-phy");
  CHECK(r->gw.is_zero());
  CHECK(r->src == ip("1.1.2.88"));
  CHECK(t.lookup(ip("10.9.9.9"))->src == ip("10.0.0.1"));
  CHECK(t.lookup(ip("192.168.7.7"))->bridge == "br-2");
  CHECK(t.lookup(ip("2001:cafe::92"))->src == ip("2001:cafe::88"));
  CHECK_FALSE(t.lookup(ip("8.8.8.8")));
  CHECK_FALSE(t.lookup(ip("2001:cafd::1")));

  // A default route through a gateway on br-phy's /24; a more specific
  // one through br-2.
  auto u = RouteTable::add_user(t, pfx("0.0.0.0/0"), "br-phy", ip("1.1.2.1"), a);
  REQUIRE(u.ok());
  t = std::move(u.value());
  u = RouteTable::add_user(t, pfx("10.1.0.0/16"), "br-2", ip("192.168.0.254"), a);
  REQUIRE(u.ok());
  t = std::move(u.value());
  CHECK(t.lookup(ip("8.8.8.8"))->gw == ip("1.1.2.1"));
  CHECK(t.lookup(ip("8.8.8.8"))->src == ip("1.1.2.88"));  // the address on the gateway's network
  CHECK(t.lookup(ip("10.1.2.3"))->bridge == "br-2");      // /16 beats the connected /8
  CHECK(t.lookup(ip("10.2.2.3"))->bridge == "br-phy");
  // OVS's priorities: a user route is plen+32 (in v6-mapped bits), a
  // connected one plen, so a user /0 (128) beats a connected /24 (120) —
  // what ovs-router.c does too; a user /0 loses to the local /32 (192).
  CHECK(t.lookup(ip("1.1.2.92"))->gw == ip("1.1.2.1"));
  // A user route of the same prefix as a connected one wins (priority plen+32).
  u = RouteTable::add_user(t, pfx("1.1.2.0/24"), "br-phy", ip("1.1.2.2"), a);
  REQUIRE(u.ok());
  CHECK(u->lookup(ip("1.1.2.92"))->gw == ip("1.1.2.2"));
  // The host's own /32 is local (priority plen+64).
  CHECK(t.lookup(ip("1.1.2.88"))->src == ip("1.1.2.88"));
  // Connected routes are rebuilt from the addresses and the user routes kept.
  RouteTable gone = RouteTable::with_connected(t, BridgeAddrs{});
  CHECK(gone.routes().size() == 2);
  CHECK(gone.lookup(ip("10.1.2.3"))->bridge == "br-2");

  // IPv6 LPM.
  auto v6 = RouteTable::add_user(t, pfx("2001:db8::/32"), "br-phy", ip("2001:cafe::1"), a);
  REQUIRE(v6.ok());
  CHECK(v6->lookup(ip("2001:db8::5"))->gw == ip("2001:cafe::1"));
  CHECK(v6->lookup(ip("2001:db8::5"))->src == ip("2001:cafe::88"));
}

TEST_CASE("route-add / route-del refusals leave the table as it was") {
  const BridgeAddrs a = addrs();
  const RouteTable t = RouteTable::with_connected(RouteTable{}, a);
  // A route to nowhere: no address of the bridge on the prefix's or the gateway's network.
  auto u = RouteTable::add_user(t, pfx("9.9.9.0/24"), "br-phy", IpAddr{}, a);
  CHECK_FALSE(u.ok());
  CHECK(u.status().message().find("Error while inserting route") == 0);
  u = RouteTable::add_user(t, pfx("9.9.9.0/24"), "br-phy", ip("9.9.9.1"), a);
  CHECK_FALSE(u.ok());
  u = RouteTable::add_user(t, pfx("9.9.9.0/24"), "nobr", ip("1.1.2.1"), a);
  CHECK_FALSE(u.ok());
  u = RouteTable::add_user(t, pfx("9.9.9.0/24"), "br-phy", ip("2001:cafe::1"), a);
  CHECK(u.status().message() == "Invalid pkt_mark or gateway");
  auto d = RouteTable::del_user(t, pfx("1.1.2.0/24"));  // connected: not route-del's
  CHECK(d.status().message() == "Not found");
  auto ok = RouteTable::add_user(t, pfx("9.9.9.7/24"), "br-phy", ip("1.1.2.1"), a);
  REQUIRE(ok.ok());
  CHECK(ok->routes().size() == t.routes().size() + 1);
  d = RouteTable::del_user(*ok, pfx("9.9.9.0/24"));  // the stored prefix is the network
  REQUIRE(d.ok());
  CHECK(d->routes().size() == t.routes().size());
  // Replacing: one user route per prefix.
  auto twice = RouteTable::add_user(*ok, pfx("9.9.9.0/24"), "br-phy", ip("1.1.2.2"), a);
  REQUIRE(twice.ok());
  CHECK(twice->routes().size() == ok->routes().size());
  CHECK(twice->lookup(ip("9.9.9.9"))->gw == ip("1.1.2.2"));
}

TEST_CASE("route-show text as ovs-appctl ovs/route/show") {
  BridgeAddr phy;
  phy.bridge_name = "br-phy";
  phy.addrs = {pfx("1.1.2.88/24"), pfx("2001:cafe::88/24")};
  const BridgeAddrs a({phy});
  RouteTable t = RouteTable::with_connected(RouteTable{}, a);
  t = RouteTable::add_user(t, pfx("1.1.3.0/24"), "br-phy", ip("1.1.2.1"), a).value();
  t = RouteTable::add_user(t, pfx("1.1.2.92/24"), "br-phy", IpAddr{}, a).value();
  // The User lines are what ovs-vswitchd 3.1 printed for the same
  // ovs/route/add commands (live, netdev-dummy/ip4addr br-phy 1.1.2.88/24);
  // the Cached lines are the kernel's routes for the addresses, as OVS
  // prints those it reads from the system table.
  CHECK(t.format() ==
        "Route Table:\n"
        "Cached: 1.1.2.88/32 dev br-phy SRC 1.1.2.88 local\n"
        "Cached: 2001:cafe::88/128 dev br-phy SRC 2001:cafe::88 local\n"
        "User: 1.1.2.0/24 dev br-phy SRC 1.1.2.88\n"
        "User: 1.1.3.0/24 dev br-phy GW 1.1.2.1 SRC 1.1.2.88\n"
        "Cached: 1.1.2.0/24 dev br-phy SRC 1.1.2.88\n"
        "Cached: 2001:ca00::/24 dev br-phy SRC 2001:cafe::88\n");
}

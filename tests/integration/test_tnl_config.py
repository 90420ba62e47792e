"""Tunnel configuration through the console: tunnel ports (add-port
type=vxlan|geneve|gre options:*), bridge addresses (ip-add/ip-del), the
bridge MAC (set bridge BR other_config:hwaddr=MAC), routes (route-add /
route-del / route-show), neighbours (neigh-set / neigh-show / neigh-flush),
tnl-ports-show and set tunnel-combine; every refusal leaves the running
config as it was; show running-config round-trips through a reboot.

The layouts are Open vSwitch 3.1's (ovs-appctl ovs/route/show,
tnl/neigh/show, tnl/ports/show), captured live from ovs-vswitchd with a
netdev datapath after the same configuration (tests/unit/route_test.cpp and
neigh_test.cpp hold the captured texts; here the whole command path).
"""
import json
import os

from harness import PATIENCE, check, json_lines, main, run_keel, tmpdir

# p0 and p1 are hal ports 1 and 2: the vports come after them.
PORTS = ["--port", "p0=null", "--port", "p1=null"]

SETUP = ("add-br br-int\n"
         "add-br br-phy\n"
         "add-port br-phy p0\n"
         "ip-add br-phy 1.1.2.88/24\n"
         "ip-add br-phy 2001:cafe::88/64\n"
         "route-add 1.1.3.0/24 br-phy 1.1.2.1\n"
         "route-add 2001:db8::/32 br-phy 2001:cafe::1\n"
         "add-port br-int t1 -- set Interface t1 type=vxlan options:remote_ip=1.1.2.92 options:key=123 "
         "ofport_request=2\n"
         "add-port br-int t2 -- set Interface t2 type=vxlan options:remote_ip=1.1.2.93 options:key=flow "
         "options:local_ip=1.1.2.88 options:csum=true\n"
         "add-port br-int t3 type=gre options:remote_ip=1.1.2.92 options:key=456 options:tos=inherit\n"
         "add-port br-int t4 -- set interface t4 type=geneve options:remote_ip=flow options:key=flow "
         "options:ttl=5 options:df_default=false\n"
         "add-port br-int t6 -- set interface t6 type=vxlan options:remote_ip=2001:cafe::92 options:dst_port=4790\n"
         "neigh-set br-phy 1.1.2.92 f8:bc:12:44:34:b6\n"
         "neigh-set br-phy 2001:cafe::92 f8:bc:12:44:34:b7\n"
         "set bridge br-phy other_config:hwaddr=aa:55:aa:55:00:00\n"
         "set tunnel-combine false\n")


def keel(script, cfg_dir=None, config=True):
    d = cfg_dir or tmpdir()
    args = list(PORTS)
    if config:
        empty = os.path.join(tmpdir(), "empty.cfg")
        open(empty, "w").close()
        args += ["--config", empty]
    return run_keel(*args, "--config-dir", d, stdin=script, timeout=PATIENCE)


def section(stdout, start, end=None):
    i = stdout.index(start)
    j = stdout.index(end, i + len(start)) if end else len(stdout)
    return stdout[i:j]


def running(stdout):
    return section(stdout, "! keel ")


def test_show_commands_layouts():
    p = keel(SETUP + "route-show\nneigh-show\ntnl-ports-show\n")
    check(p.returncode == 0 and "error" not in p.stderr, "setup is accepted", p)
    routes = section(p.stdout, "Route Table:\n", "IP   ")
    check(routes == "Route Table:\n"
                    "Cached: 1.1.2.88/32 dev br-phy SRC 1.1.2.88 local\n"
                    "Cached: 2001:cafe::88/128 dev br-phy SRC 2001:cafe::88 local\n"
                    "User: 1.1.3.0/24 dev br-phy GW 1.1.2.1 SRC 1.1.2.88\n"
                    "Cached: 1.1.2.0/24 dev br-phy SRC 1.1.2.88\n"
                    "User: 2001:db8::/32 dev br-phy GW 2001:cafe::1 SRC 2001:cafe::88\n"
                    "Cached: 2001:cafe::/64 dev br-phy SRC 2001:cafe::88\n",
          "route-show as ovs/route/show:\n" + routes, p)
    neigh = section(p.stdout, "IP   ", "Listening ports:")
    check(neigh == "IP                                            MAC                 Bridge\n"
                   "==========================================================================\n"
                   "1.1.2.92                                      f8:bc:12:44:34:b6   br-phy\n"
                   "2001:cafe::92                                 f8:bc:12:44:34:b7   br-phy\n",
          "neigh-show as tnl/neigh/show:\n" + neigh, p)
    # Highest OVS priority first (local plen+64, user plen+32, connected
    # plen, in v6-mapped bits: an IPv4 /24 is 120).
    # br-phy's internal vport is 3 (the first address); then the tunnel
    # vports in creation order, shared by type and dst_port.
    ports = section(p.stdout, "Listening ports:")
    check(ports == "Listening ports:\n"
                   "vxlan_sys_4789 (4) ref_cnt=2\n"
                   "gre_sys (5) ref_cnt=1\n"
                   "genev_sys_6081 (6) ref_cnt=1\n"
                   "vxlan_sys_4790 (7) ref_cnt=1\n",
          "tnl-ports-show as tnl/ports/show:\n" + ports, p)
    # JSON forms.
    p = keel(SETUP + "route-show --format json\nneigh-show --format json\ntnl-ports-show --format json\n")
    js = json_lines(p.stdout)
    check(len(js) == 3, "three JSON documents", p)
    check({"prefix": "1.1.3.0/24", "dev": "br-phy", "gw": "1.1.2.1", "src": "1.1.2.88", "type": "user",
           "local": False, "priority": 152} in js[0]["routes"], "route JSON", p)
    check({"ip": "1.1.2.92", "mac": "f8:bc:12:44:34:b6", "bridge": "br-phy", "static": True} in js[1]["neighbors"],
          "neighbour JSON", p)
    check({"name": "vxlan_sys_4789", "port": 4, "type": "vxlan", "dst_port": 4789, "ref_cnt": 2} in js[2]["ports"],
          "vport JSON", p)


def test_ports_come_and_go():
    p = keel(SETUP + "del-port t1\ntnl-ports-show\ndel-port br-int t2\ndel-port t6\ntnl-ports-show\n"
             "ip-del br-phy 2001:cafe::88/64\n"
             "route-del 2001:db8::/32\nip-del br-phy 2001:cafe::88/64\nroute-show\n"
             "neigh-flush br-phy\nneigh-show\n")
    check("error" in p.stderr and "route 2001:db8::/32 uses 2001:cafe::88 as its source" in p.stderr,
          "an address a route needs stays", p)
    shows = p.stdout.split("Listening ports:\n")
    check(shows[1].startswith("vxlan_sys_4789 (4) ref_cnt=1\ngre_sys (5) ref_cnt=1\n"), "t1 gone, t2 left", p)
    check(shows[2].startswith("gre_sys (5) ref_cnt=1\ngenev_sys_6081 (6) ref_cnt=1\n") and
          "vxlan" not in shows[2].split("Route Table")[0], "the last vxlan port takes its vport along", p)
    check("2001:cafe" not in section(p.stdout, "Route Table:", "IP   "), "v6 routes gone with the address", p)
    check(p.stdout.rstrip().endswith("=" * 74), "neighbours flushed", p)


# Each bad command, and the words its error must contain.
BAD = [
    ("add-port br-int t9 type=vxlan", "t9: vxlan type requires valid 'remote_ip' argument"),
    ("add-port br-int t9 type=vxlan options:remote_ip=1.1.2.92 options:key=123", "same type, dst_port, key"),
    ("add-port br-int t9 type=vxlan options:remote_ip=1.1.2.92 options:local_ip=9.9.9.9",
     "local_ip=9.9.9.9: no bridge has that address"),
    ("add-port br-int t9 type=vxlan options:remote_ip=224.0.0.1", "multicast remote_ip=224.0.0.1 not allowed"),
    ("add-port br-int t9 type=vxlan options:remote_ip=1.1.2.99 options:tos=3", "t9: invalid TOS 3"),
    ("add-port br-int t9 type=vxlan options:remote_ip=1.1.2.99 options:bogus=1", "unknown vxlan argument 'bogus'"),
    ("add-port br-int t9 type=gre options:remote_ip=1.1.2.99 options:dst_port=1", "unknown gre argument"),
    ("add-port br-int t9 type=vxlan options:remote_ip=1.1.2.99 options:key=16777216", "0..16777215"),
    ("add-port br-int p1 type=vxlan options:remote_ip=1.1.2.99", "is a --port spec's port"),
    ("add-port br-int p1 options:remote_ip=1.1.2.99", "not a tunnel"),
    ("set interface t1 options:ttl=999", "invalid TTL"),
    ("ip-add br-phy 1.1.2.88/16", "already an address of bridge br-phy"),
    ("ip-add br-int 1.1.2.300/24", "is not ADDR/LEN"),
    ("ip-add nobr 5.5.5.5/24", "no bridge nobr"),
    ("ip-del br-phy 1.1.2.88/24", "tunnel port t2 has local_ip=1.1.2.88"),
    ("ip-del br-phy 7.7.7.7/24", "has no address 7.7.7.7/24"),
    ("route-add 9.9.9.0/24 br-phy", "Error while inserting route"),
    ("route-add 9.9.9.0/24 br-phy 2001::1", "Invalid pkt_mark or gateway"),
    ("route-add 9.9.9.0/33 br-phy", "Invalid parameters"),
    ("route-add 9.9.9.0/24 nobr", "no bridge nobr"),
    ("route-del 1.1.2.0/24", "Not found"),
    ("neigh-set br-phy 1.1.2.300 f8:bc:12:44:34:b6", "bad IP address"),
    ("neigh-set br-phy 1.1.2.9 f8:bc:12:44:34", "bad MAC address"),
    ("neigh-set nobr 1.1.2.9 f8:bc:12:44:34:b6", "no bridge nobr"),
    ("set bridge br-phy other_config:hwaddr=01:00:00:00:00:01", "not a unicast MAC"),
    ("set bridge br-phy other_config:hwaddr=zz", "not a MAC"),
    ("set bridge br-phy other_config:foo=1", "only other_config:hwaddr"),
    ("set tunnel-combine maybe", "maybe"),
]


def test_errors_change_nothing():
    p = keel(SETUP + "show running-config\n")
    before = running(p.stdout)
    for cmd, msg in BAD:
        p = keel(SETUP + cmd + "\nshow running-config\n")
        check(p.returncode != 0, "%r fails the script" % cmd, p)
        err = p.stderr
        check("error" in err.lower() and msg in err, "%r is refused saying %r:\n%s" % (cmd, msg, err), p)
        check(running(p.stdout) == before, "%r changed nothing:\n%s" % (cmd, running(p.stdout)), p)


def test_round_trip_through_reboot():
    d = tmpdir()
    cfg = os.path.join(d, "cfg")
    p = keel(SETUP + "show running-config\ntnl-ports-show\nwrite memory\n", cfg_dir=cfg)
    check(p.returncode == 0 and "saved the running" in p.stdout, "build + save", p)
    first = section(p.stdout, "! keel ", "Listening ports:")
    vports = section(p.stdout, "Listening ports:", "saved the running")
    for line in ("add-br br-phy",
                 "set bridge br-phy other_config:hwaddr=aa:55:aa:55:00:00",
                 "ip-add br-phy 1.1.2.88/24",
                 "ip-add br-phy 2001:cafe::88/64",
                 "add-port br-int t1 -- set Interface t1 type=vxlan options:remote_ip=1.1.2.92 options:key=123 "
                 "ofport_request=2",
                 "add-port br-int t2 -- set Interface t2 type=vxlan options:remote_ip=1.1.2.93 "
                 "options:local_ip=1.1.2.88 options:key=flow options:csum=true ofport_request=1",
                 "add-port br-int t4 -- set Interface t4 type=geneve options:remote_ip=flow options:key=flow "
                 "options:ttl=5 options:df_default=false ofport_request=4",
                 "route-add 1.1.3.0/24 br-phy 1.1.2.1",
                 "neigh-set br-phy 2001:cafe::92 f8:bc:12:44:34:b7",
                 "set tunnel-combine false"):
        check(line + "\n" in first, "running-config has %r:\n%s" % (line, first), p)
    check(first.index("ip-add br-phy 1.1.2.88/24") < first.index("add-port br-int t2"),
          "addresses before the tunnels whose local_ip they are", p)
    p = keel("show running-config\ntnl-ports-show\n", cfg_dir=cfg, config=False)
    check(p.returncode == 0 and "error" not in p.stderr, "boots the saved config", p)
    again = section(p.stdout, "! keel ", "Listening ports:")
    check(again == first, "identical after reboot:\n%s\nvs\n%s" % (first, again), p)
    check(section(p.stdout, "Listening ports:") == vports, "same vports after reboot", p)
    # configure replace / reset: back to nothing tunnel-related.
    p = keel(SETUP + "del-br br-int\ndel-br br-phy\nshow running-config\ntnl-ports-show\nroute-show\nneigh-show\n")
    out = p.stdout
    check("ip-add" not in running(out) and "route-add" not in running(out) and "neigh-set" not in running(out),
          "del-br takes the bridge's addresses, routes and neighbours", p)
    check("Listening ports:\nRoute Table:\nIP " in out, "no vports, routes or neighbours left", p)


if __name__ == "__main__":
    main([test_show_commands_layouts, test_ports_come_and_go, test_errors_change_nothing,
          test_round_trip_through_reboot])

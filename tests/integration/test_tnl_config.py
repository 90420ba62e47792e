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
import shutil
import subprocess
import tempfile
import time

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


def cli_errors(p):
    """The console's error lines (not log messages a loaded machine may add)."""
    return [line for line in p.stderr.splitlines() if line.startswith("error: ")]


def section(stdout, start, end=None):
    i = stdout.index(start)
    j = stdout.index(end, i + len(start)) if end else len(stdout)
    return stdout[i:j]


def running(stdout):
    return section(stdout, "! keel ")


def test_show_commands_layouts():
    p = keel(SETUP + "route-show\nneigh-show\ntnl-ports-show\n")
    check(p.returncode == 0 and not cli_errors(p), "setup is accepted", p)
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
    check(any("route 2001:db8::/32 uses 2001:cafe::88 as its source" in e for e in cli_errors(p)),
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
        err = "\n".join(cli_errors(p))
        check(msg in err, "%r is refused saying %r:\n%s" % (cmd, msg, err), p)
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
    check(p.returncode == 0 and not cli_errors(p), "boots the saved config", p)
    again = section(p.stdout, "! keel ", "Listening ports:")
    check(again == first, "identical after reboot:\n%s\nvs\n%s" % (first, again), p)
    check(section(p.stdout, "Listening ports:") == vports, "same vports after reboot", p)
    # configure replace / reset: back to nothing tunnel-related.
    p = keel(SETUP + "del-br br-int\ndel-br br-phy\nshow running-config\ntnl-ports-show\nroute-show\nneigh-show\n")
    out = p.stdout
    check("ip-add" not in running(out) and "route-add" not in running(out) and "neigh-set" not in running(out),
          "del-br takes the bridge's addresses, routes and neighbours", p)
    check("Listening ports:\nRoute Table:\nIP " in out, "no vports, routes or neighbours left", p)


TUNNELS = [  # (bridge, port, ovs-vsctl words after the port name)
    ("br-int", "t1", "-- set Interface t1 type=vxlan options:remote_ip=1.1.2.92 options:key=123 ofport_request=2"),
    ("br-int", "t3", "-- set Interface t3 type=gre options:remote_ip=1.1.2.92 options:key=456 options:tos=inherit"),
    ("br-int", "t4", "-- set Interface t4 type=geneve options:remote_ip=flow options:key=flow options:ttl=5 "
                     "options:df_default=false options:csum=true"),
    ("br-int", "t5", "-- set Interface t5 type=vxlan options:remote_ip=1.1.2.94 options:in_key=5 "
                     "options:out_key=flow options:tos=0x10"),
    ("br-int", "t6", "-- set Interface t6 type=vxlan options:remote_ip=2001:cafe::92 options:dst_port=4790"),
]


class Ovs:
    """A private ovsdb-server + ovs-vswitchd (netdev datapath; real tunnel vports)."""

    def __init__(self):
        self.d = tempfile.mkdtemp(prefix="keel-ovs-tnl-")
        self.env = dict(os.environ, OVS_RUNDIR=self.d, OVS_DBDIR=self.d, OVS_LOGDIR=self.d)
        d = self.d
        self.sh("ovsdb-tool", "create", d + "/conf.db", "/usr/share/openvswitch/vswitch.ovsschema")
        self.sh("ovsdb-server", d + "/conf.db", "--remote=punix:%s/db.sock" % d, "--pidfile=%s/ovsdb.pid" % d,
                "--detach", "--log-file=%s/ovsdb.log" % d)
        self.sh("ovs-vswitchd", "unix:%s/db.sock" % d, "--enable-dummy", "--disable-system",
                "--pidfile=%s/vsw.pid" % d, "--detach", "--log-file=%s/vsw.log" % d)
        with open(d + "/vsw.pid") as f:
            self.ctl = "%s/ovs-vswitchd.%s.ctl" % (d, f.read().strip())

    def sh(self, *args):
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=PATIENCE)

    def vsctl(self, *args):
        return self.sh("ovs-vsctl", "--db=unix:%s/db.sock" % self.d, *args)

    def appctl(self, *args):
        return self.sh("ovs-appctl", "-t", self.ctl, *args)

    def stop(self):
        for f in ("vsw.pid", "ovsdb.pid"):
            try:
                with open(os.path.join(self.d, f)) as fh:
                    os.kill(int(fh.read().strip()), 15)
            except (OSError, ValueError):
                pass
        shutil.rmtree(self.d, True)


def test_against_open_vswitch():
    if not all(shutil.which(t) for t in ("ovs-vsctl", "ovs-appctl", "ovs-vswitchd", "ovsdb-server")):
        print("SKIP test_against_open_vswitch: Open vSwitch is not installed")
        return
    script = "add-br br-int\nadd-br br-phy\n" + "".join(
        "add-port %s %s %s\n" % t for t in TUNNELS) + ("neigh-set br-phy 1.1.2.92 f8:bc:12:44:34:b6\n"
                                                       "neigh-set br-phy 2001:cafe::92 f8:bc:12:44:34:b7\n"
                                                       "tnl-ports-show\nneigh-show\nshow running-config\n")
    p = keel(script)
    check(not cli_errors(p), "keel takes the tunnels", p)
    ovs = Ovs()
    try:
        o = ovs.vsctl("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev",
                      "--", "add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev")
        check(o.returncode == 0, "OVS bridges", o)
        for br, port, words in TUNNELS:
            o = ovs.vsctl("add-port", br, port, *words.split())
            check(o.returncode == 0, "OVS takes %s" % port, o)
        for ip, mac in (("1.1.2.92", "f8:bc:12:44:34:b6"), ("2001:cafe::92", "f8:bc:12:44:34:b7")):
            check(ovs.appctl("tnl/neigh/set", "br-phy", ip, mac).returncode == 0, "OVS neighbour", ovs)
        got = section(p.stdout, "Listening ports:", "IP   ")

        def strip_ids(text):  # the datapath port numbers are each switch's own
            return [line.split(" (")[0] + line[line.index(")") + 1:] if "(" in line else line
                    for line in text.splitlines()]
        # ovs-vswitchd applies the database in its own time: wait until it
        # lists every vport with its final count (or PATIENCE runs out).
        deadline = time.time() + PATIENCE
        while strip_ids(ovs.appctl("tnl/ports/show").stdout) != strip_ids(got) and time.time() < deadline:
            time.sleep(0.1)
        want = ovs.appctl("tnl/ports/show").stdout
        check(strip_ids(got) == strip_ids(want), "tnl-ports-show as OVS's tnl/ports/show:\n%s\nvs\n%s" %
              (got, want), p)
        want = ovs.appctl("tnl/neigh/show").stdout
        got = section(p.stdout, "IP   ", "! keel ")
        # Open vSwitch lists its neighbour cache in hash order (a cmap walk),
        # so the rows are compared as a set; the header and every row's
        # layout must be the same. keel sorts by bridge, then IP.
        gl, wl = got.splitlines(), want.splitlines()
        check(gl[:2] == wl[:2] and sorted(gl[2:]) == sorted(wl[2:]),
              "neigh-show as OVS's tnl/neigh/show (rows in any order):\n%s\nvs\n%s" % (got, want), p)
        # keel's running-config tunnel lines, pasted into ovs-vsctl, give the
        # Interfaces the same type and options as the original commands.
        o = ovs.vsctl("add-br", "br-k", "--", "set", "bridge", "br-k", "datapath_type=netdev")
        for line in running(p.stdout).splitlines():
            if not line.startswith("add-port br-int t"):
                continue
            words = line.split()[3:]
            port = line.split()[2]
            k = "k" + port
            words = [w.replace(port, k) if w == port else w for w in words]
            words = [w for w in words if not w.startswith("ofport_request")]
            o = ovs.vsctl("add-port", "br-k", k, *words)
            check(o.returncode == 0, "OVS takes keel's %r" % line, o)
            for col in ("type", "options"):
                a = ovs.vsctl("get", "interface", port, col).stdout
                b = ovs.vsctl("get", "interface", k, col).stdout
                if col == "options":  # keel's own words for what OVS stores either way
                    a, b = sorted(a.strip("{}\n").split(", ")), sorted(b.strip("{}\n").split(", "))
                check(a == b, "%s %s: OVS has %s, keel's line gives %s" % (port, col, a, b), o)
    finally:
        ovs.stop()


if __name__ == "__main__":
    main([test_show_commands_layouts, test_ports_come_and_go, test_errors_change_nothing,
          test_round_trip_through_reboot, test_against_open_vswitch])

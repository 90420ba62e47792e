"""ovs-vsctl's column words on add-port, through the console: the lines
operators paste from their runbooks (`add-port br0 p1 tag=10
trunks=10,20`, `vlan_mode=...`, `-- set Interface p1 ofport_request=2
mtu_request=9000 type=dummy`) configure the port as Open vSwitch 3.1 does
(`show` prints what `ovs-vsctl show` printed for the same commands); a bad
word is refused with ovs-vsctl's error text and the port is not added;
the running config prints the column form and boots back to the same
config; a startup config in the old --tag form still boots; `set port`
changes the VLAN columns of a port in place. Where Open vSwitch is
installed, the same lines run against a private ovsdb-server too: keel's
errors are ovs-vsctl's, and keel's running-config lines pasted into
ovs-vsctl give the columns the original lines gave."""
import os
import shutil
import subprocess

from harness import EMPTY_CONFIG, PATIENCE, check, main, run_keel, tmpdir

PORTS = ["--port", "p0=null", "--port", "p1=null", "--port", "p2=ring", "--port", "p3=null"]


def keel(script, *extra):
    d = tmpdir()
    empty = os.path.join(d, "empty.cfg")
    open(empty, "w").close()
    # A private config dir: its control socket is this run's alone (tests
    # run in parallel; a shared one makes keel warn on stderr). Its switch
    # uuid is fixed, so `show`'s port order (by row uuid) is too.
    with open(os.path.join(d, "switch-uuid"), "w") as f:
        f.write("5f1a3c4e-8b2d-4e6f-9a0b-1c2d3e4f5a6b\n")
    return run_keel(*PORTS, "--config", empty, "--config-dir", d, *extra, stdin=script, timeout=PATIENCE)


def show_section(stdout):
    """The `show` output (bridges) in stdout."""
    return stdout[stdout.index("    Bridge "):]


def running_config(stdout):
    start = stdout.index("! keel ")
    return stdout[start:]


def test_forms_configure_like_ovs():
    # `ovs-vsctl show` after the same add-port commands (OVS 3.1, ports of
    # type dummy; the Port lines in row-uuid order, as Open vSwitch's; the
    # Interface type is the --port kind, which type= only checks): tag and
    # trunks on p0 (an access port: OVS warns "ignoring trunks in favor of
    # implicit vlan"), p1 a native-untagged trunk.
    p = keel("add-br br0\n"
             "add-port br0 p0 tag=10 trunks=10,20\n"
             "add-port br0 p1 vlan_mode=native-untagged tag=5 'trunks=[5, 6-7]' -- set Interface p1 ofport_request=9\n"
             "add-port br0 p2 trunks=\"30 40\" -- set Interface p2 type=dummy mtu_request=9000\n"
             "add-port br0 p3 Tag=3 ofport_request=4 type=internal\n"
             "show\n")
    check(p.returncode == 0, "every form accepted", p)
    want = ("    Bridge br0\n"
            "        fail_mode: secure\n"
            "        datapath_type: netdev\n"
            "        Port p1\n"
            "            tag: 5\n"
            "            trunks: [5, 6, 7]\n"
            "            Interface p1\n"
            "                type: null\n"
            "        Port p3\n"
            "            tag: 3\n"
            "            Interface p3\n"
            "                type: null\n"
            "        Port p2\n"
            "            trunks: [30, 40]\n"
            "            Interface p2\n"
            "                type: ring\n"
            "        Port p0\n"
            "            tag: 10\n"
            "            trunks: [10, 20]\n"
            "            Interface p0\n"
            "                type: null\n"
            "        Port br0\n"
            "            Interface br0\n"
            "                type: internal\n")
    check(show_section(p.stdout) == want, "show:\n" + p.stdout, p)
    check("port p0: ignoring trunks in favor of implicit vlan" in p.stdout + p.stderr, "OVS's warning", p)
    p = keel("add-br br0\nadd-port br0 p0 tag=10 trunks=10,20\n"
             "add-port br0 p1 vlan_mode=native-untagged tag=5 trunks=5,6,7 -- set Interface p1 ofport_request=9\n"
             "add-port br0 p3 Tag=3 ofport_request=4\nshow running-config\n")
    rc = running_config(p.stdout)
    for line in ("add-port br0 p0 tag=10 trunks=10,20 -- set Interface p0 ofport_request=1",
                 "add-port br0 p1 tag=5 trunks=5,6,7 vlan_mode=native-untagged -- set Interface p1 ofport_request=9",
                 "add-port br0 p3 tag=3 -- set Interface p3 ofport_request=4"):
        check(line + "\n" in rc, "running-config has %r" % line, p)


def test_bad_words_add_nothing():
    cases = [
        ("foo=1", 'neither Port nor Interface contains a column whose name matches "foo"'),
        ("t=10", 'Port contains more than one column whose name matches "t": tag, trunks'),
        ("tag=abc", '"abc" is not a valid integer or range'),
        ("tag=5000", "constraint violation: 5000 is not in the valid range 0 to 4095 (inclusive)"),
        ("tag", 'tag: argument does not end in "=" followed by a value.'),
        ("trunks=20,10,10", "20,10,10: set contains duplicate value"),
        ("vlan_mode=bogus", "constraint violation: bogus is not one of the allowed values ([access, dot1q-tunnel, "
                            "native-tagged, native-untagged, trunk])"),
        ("vlan_mode=dot1q-tunnel", "vlan_mode dot1q-tunnel is not implemented by keel"),
        ("-- set Interface p1 ofport_request=0",
         "constraint violation: 0 is not in the valid range 1 to 65279 (inclusive)"),
        ("-- set Interface p2 ofport_request=3", 'no row "p2" in table Interface'),
        ("-- set port p1 ofport_request=3", 'Port does not contain a column whose name matches "ofport_request"'),
        ("mtu_request=67", "mtu_request 67 is not in keel's range 68 to 9216 (inclusive)"),
        ("mtu_request=9217", "mtu_request 9217 is not in keel's range 68 to 9216 (inclusive)"),
        ("type=vxlan", "type=vxlan: p1 is a --port spec's port (a tunnel port is a name no --port spec has)"),
        ("type=ip6gre", "type=ip6gre: keel has no ports of Open vSwitch type ip6gre"),
        ("type=nonsense", "type=nonsense: unknown interface type"),
        ("type=dpdk", "type=dpdk: port p1 is a null port"),
        ("type=tap", "type=tap: port p1 is a null port"),
        ("options:dpdk-devargs=net_null1", "options:dpdk-devargs: keel takes no Interface options"),
        ("other_config:priority-tags=true", 'other_config:priority-tags: keel knows no Port other_config key'),
        ("external_ids:iface-id=vm1", "external_ids:iface-id: keel does not keep external_ids"),
        ("qos=[]", "Port column qos is not implemented by keel"),
        ("--tag 3 trunks=1", "add-port: give either ovs-vsctl column words (tag=10) or --tag-style options, not both"),
        # Good words before a bad one: nothing applied, no port.
        ("tag=10 trunks=1,2 -- set Interface p1 ofport_request=3 mtu_request=1500 -- set Port p1 tag=abc",
         '"abc" is not a valid integer or range'),
    ]
    for words, err in cases:
        p = keel("add-br br0\nadd-port br0 p1 %s\nshow\nshow running-config\n" % words)
        check(p.returncode != 0, "refused: %s" % words, p)
        check("error: " + err in p.stderr, "%s: error %r in:\n%s" % (words, err, p.stderr), p)
        check("Port p1" not in p.stdout and "add-port" not in p.stdout, "%s: p1 not added" % words, p)


def test_running_config_round_trip():
    d = tmpdir()
    cfg = os.path.join(d, "cfg")
    script = ("add-br br0\n"
              "add-port br0 p0 tag=10 -- set Interface p0 ofport_request=5 mtu_request=9000\n"
              "add-port br0 p1 trunks=[3,4] vlan_mode=native-tagged tag=2\n"
              "add-port br0 p2 trunks=7\n"
              "add-br br1\n"
              "add-port br1 p3 -- set Interface p3 mtu_request=1500 -- set Port p3 vlan_mode=trunk tag=4\n"
              "add-flow br0 in_port=5,actions=output:1\n")
    p = run_keel(*PORTS, "--config", EMPTY_CONFIG, "--config-dir", cfg,
                 stdin=script + "show running-config\nwrite memory\n", timeout=PATIENCE)
    check(p.returncode == 0, "build + save", p)
    first = p.stdout[p.stdout.index("! keel "):p.stdout.index("saved the running")]
    for line in ("add-port br0 p0 tag=10 -- set Interface p0 ofport_request=5 mtu_request=9000",
                 "add-port br0 p1 tag=2 trunks=3,4 vlan_mode=native-tagged -- set Interface p1 ofport_request=1",
                 "add-port br0 p2 trunks=7 -- set Interface p2 ofport_request=2",
                 "add-port br1 p3 tag=4 vlan_mode=trunk -- set Interface p3 ofport_request=1 mtu_request=1500"):
        check(line + "\n" in first, "running-config has %r:\n%s" % (line, first), p)
    p = run_keel(*PORTS, "--config-dir", cfg, stdin="show running-config\nshow\n", timeout=PATIENCE)
    check(p.returncode == 0, "boots the saved config", p)
    # The running config ends where `show` begins: with the switch's uuid.
    again = p.stdout[p.stdout.index("! keel "):p.stdout.rindex("\n", 0, p.stdout.index("    Bridge ") - 1) + 1]
    check(again == first, "identical after reboot:\n%s\nvs\n%s" % (first, again), p)


def test_old_form_config_still_boots():
    # What `write memory` saved before the column words.
    d = tmpdir()
    old = os.path.join(d, "old.cfg")
    with open(old, "w") as f:
        f.write("add-br br0\n"
                "add-port br0 p0 --ofport 5 --tag 10\n"
                "add-port br0 p1 --ofport 1 --tag 2 --trunks 3,4 --vlan-mode native-tagged\n"
                "add-port br0 p2 --ofport 2 --trunks 7\n")
    p = run_keel(*PORTS, "--config", old, stdin="show running-config\n", timeout=PATIENCE)
    check(p.returncode == 0, "old form boots", p)
    rc = running_config(p.stdout)
    for line in ("add-port br0 p0 tag=10 -- set Interface p0 ofport_request=5",
                 "add-port br0 p1 tag=2 trunks=3,4 vlan_mode=native-tagged -- set Interface p1 ofport_request=1",
                 "add-port br0 p2 trunks=7 -- set Interface p2 ofport_request=2"):
        check(line + "\n" in rc, "old config prints as %r:\n%s" % (line, rc), p)
    new = os.path.join(d, "new.cfg")
    with open(new, "w") as f:
        f.write(rc)
    p = run_keel(*PORTS, "--config", new, stdin="show running-config\n", timeout=PATIENCE)
    check(p.returncode == 0 and running_config(p.stdout) == rc, "the new form boots to the same config", p)


def test_set_port():
    p = keel("add-br br0\nadd-port br0 p0 tag=10\nadd-port br0 p1 trunks=1,2\n"
             "set port p0 trunks=5,6 vlan_mode=native-tagged\n"
             "set Port p1 tag=3 trunks=[]\n"
             "show running-config\n")
    check(p.returncode == 0, "set port", p)
    rc = running_config(p.stdout)
    for line in ("add-port br0 p0 tag=10 trunks=5,6 vlan_mode=native-tagged -- set Interface p0 ofport_request=1",
                 "add-port br0 p1 tag=3 -- set Interface p1 ofport_request=2"):
        check(line + "\n" in rc, "running-config has %r" % line, p)
    for words, err in [("p9 tag=1", 'no row "p9" in table Port'),
                       ("p0 ofport_request=3", 'Port does not contain a column whose name matches "ofport_request"'),
                       ("p0 tag=1 trunks=x", '"x" is not a valid integer or range'),
                       ("p0 vlan_mode=dot1q-tunnel", "vlan_mode dot1q-tunnel is not implemented by keel")]:
        p = keel("add-br br0\nadd-port br0 p0 tag=10\nset port %s\nshow running-config\n" % words)
        check("error: " + err in p.stderr, "set port %s: %r" % (words, err), p)
        check("add-port br0 p0 tag=10 -- set Interface p0 ofport_request=1\n" in p.stdout, "p0 unchanged", p)


class Ovsdb:
    """A private ovsdb-server with Open vSwitch's schema; ovs-vsctl --no-wait
    against it (no ovs-vswitchd needed to check column parsing)."""

    def __init__(self):
        self.dir = tmpdir()
        db = os.path.join(self.dir, "conf.db")
        self.sock = os.path.join(self.dir, "db.sock")
        self.pidfile = os.path.join(self.dir, "ovsdb.pid")
        env = dict(os.environ, OVS_RUNDIR=self.dir, OVS_DBDIR=self.dir, OVS_LOGDIR=self.dir)
        self.env = env
        subprocess.run(["ovsdb-tool", "create", db, SCHEMA], check=True, env=env)
        subprocess.run(["ovsdb-server", db, "--remote=punix:" + self.sock, "--pidfile=" + self.pidfile, "--detach",
                        "--log-file=" + os.path.join(self.dir, "ovsdb.log")], check=True, env=env, timeout=PATIENCE,
                       capture_output=True)

    def vsctl(self, *words):
        return subprocess.run(["ovs-vsctl", "--db=unix:" + self.sock, "--no-wait", "--timeout=%d" % PATIENCE] +
                              list(words), capture_output=True, text=True, env=self.env, timeout=PATIENCE)

    def columns(self, port):
        a = self.vsctl("get", "Port", port, "tag", "trunks", "vlan_mode").stdout.split("\n")[:3]
        b = self.vsctl("get", "Interface", port, "mtu_request").stdout.strip()
        return a + [b]

    def stop(self):
        with open(self.pidfile) as f:
            os.kill(int(f.read().strip()), 15)


SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


def test_against_open_vswitch():
    if not all(shutil.which(t) for t in ("ovs-vsctl", "ovsdb-server", "ovsdb-tool")) or not os.path.exists(SCHEMA):
        print("SKIP test_against_open_vswitch: Open vSwitch is not installed")
        return
    good = ["tag=10", "tag=10 trunks=10,20", "trunks=[10,20]", "trunks=10-12,20", "vlan_mode=native-untagged tag=5",
            "vlan_mode=access", "tag=0", "vlan_mode=trunk tag=3", "vlan_mode=trunk", "tag=5 vlan_mode=access",
            "vlan_mode=access tag=0", "Ta=4 vlan-mode=native-tagged", "tag=[]",
            "-- set Interface {P} mtu_request=9000", "tag=3 -- set Port {P} trunks=7 -- set Interface {P} mtu_request=1500"]
    bad = ["foo=1", "t=10", "tag=abc", "tag=5000", "tag", "tag=", "tag:1=2", "tag=[10,11]", "=3", "trunks=20,10,10",
           "trunks={10}", "trunks=10-5", "trunks=[10", "trunks=10]", "trunks=10-5000", "vlan_mode=bogus",
           "-- set Interface {P} ofport_request=0", "-- set i {P} ofport_request=3", "-- set Port {P} ofport_request=3",
           "-- set nosuch {P} tag=1", "-- set Interface {P} type=[]", "-- set Interface {P} mtu_request=0",
           "-- set Interface {P} options:a"]
    ovs = Ovsdb()
    try:
        check(ovs.vsctl("add-br", "brk").returncode == 0 and ovs.vsctl("add-br", "brj").returncode == 0, "OVS bridges")
        for words in bad:
            name = "q%d" % bad.index(words)
            w = words.replace("{P}", name).split()
            o = ovs.vsctl("add-port", "brk", name, *w)
            check(o.returncode != 0 and o.stderr.startswith("ovs-vsctl: "), "OVS refuses %s" % words, o)
            want = o.stderr[len("ovs-vsctl: "):].strip()
            if want.startswith("Port does not contain") and not words.startswith("--"):
                want = want.replace("Port does not contain", "neither Port nor Interface contains")
            p = keel("add-br br0\nadd-port br0 p1 %s\n" % words.replace("{P}", "p1"))
            check(p.stderr.startswith("error: " + want), "%s: OVS says %r; keel:" % (words, want), p)
        # Four keel ports at a time: originals on OVS bridge brk, keel's
        # running-config lines (pasted into ovs-vsctl) on brj.
        for start in range(0, len(good), 4):
            batch = good[start:start + 4]
            script = "add-br br0\n"
            for i, words in enumerate(batch):
                name = "p%d" % i
                oname = "o%d" % (start + i)
                o = ovs.vsctl("add-port", "brk", oname, *words.replace("{P}", oname).split())
                check(o.returncode == 0, "OVS takes %s" % words, o)
                script += "add-port br0 %s %s\n" % (name, words.replace("{P}", name))
            p = keel(script + "show running-config\n")
            check(p.returncode == 0, "keel takes %s" % batch, p)
            for line in running_config(p.stdout).splitlines():
                if not line.startswith("add-port br0 "):
                    continue
                w = line.split()[2:]
                i = int(w[0][1:])
                oname, jname = "o%d" % (start + i), "j%d" % (start + i)
                w = [jname if x == w[0] else x for x in w]
                o = ovs.vsctl("add-port", "brj", *w)
                check(o.returncode == 0, "ovs-vsctl takes keel's %r" % line, o)
                check(ovs.columns(jname) == ovs.columns(oname), "%r: %s (from keel) vs %s (from %r)" %
                      (line, ovs.columns(jname), ovs.columns(oname), batch[i]))
    finally:
        ovs.stop()


if __name__ == "__main__":
    main([test_forms_configure_like_ovs, test_bad_words_add_nothing, test_running_config_round_trip,
          test_old_form_config_still_boots, test_set_port, test_against_open_vswitch])

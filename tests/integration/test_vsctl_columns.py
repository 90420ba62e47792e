"""ovs-vsctl's column words on add-port, through the console: the lines
operators paste from their runbooks (`add-port br0 p1 tag=10
trunks=10,20`, `vlan_mode=...`, `-- set Interface p1 ofport_request=2
mtu_request=9000 type=dummy`) configure the port as Open vSwitch 3.1 does
(`show` prints what `ovs-vsctl show` printed for the same commands); a bad
word is refused with ovs-vsctl's error text and the port is not added;
the running config prints the column form and boots back to the same
config; a startup config in the old --tag form still boots."""
import os

from harness import PATIENCE, check, main, run_keel, tmpdir

PORTS = ["--port", "p0=null", "--port", "p1=null", "--port", "p2=ring", "--port", "p3=null"]


def keel(script, *extra):
    d = tmpdir()
    empty = os.path.join(d, "empty.cfg")
    open(empty, "w").close()
    return run_keel(*PORTS, "--config", empty, *extra, stdin=script, timeout=PATIENCE)


def show_section(stdout):
    """The `show` output (bridges) in stdout."""
    return stdout[stdout.index("    Bridge "):]


def running_config(stdout):
    start = stdout.index("! keel ")
    return stdout[start:]


def test_forms_configure_like_ovs():
    # `ovs-vsctl show` after the same add-port commands (OVS 3.1, ports of
    # type dummy; the order of OVS's Port lines is a hash order, keel's by
    # name): tag and trunks on p0 (an access port: OVS warns "ignoring
    # trunks in favor of implicit vlan"), p1 a native-untagged trunk.
    p = keel("add-br br0\n"
             "add-port br0 p0 tag=10 trunks=10,20\n"
             "add-port br0 p1 vlan_mode=native-untagged tag=5 'trunks=[5, 6-7]' -- set Interface p1 ofport_request=9\n"
             "add-port br0 p2 trunks=\"30 40\" -- set Interface p2 type=dummy mtu_request=9000\n"
             "add-port br0 p3 Tag=3 ofport_request=4 type=internal\n"
             "show\n")
    check(p.returncode == 0, "every form accepted", p)
    want = ("    Bridge br0\n"
            "        Port br0\n"
            "            Interface br0\n"
            "                type: internal\n"
            "        Port p0\n"
            "            tag: 10\n"
            "            trunks: [10, 20]\n"
            "            Interface p0\n"
            "        Port p1\n"
            "            tag: 5\n"
            "            trunks: [5, 6, 7]\n"
            "            vlan_mode: native-untagged\n"
            "            Interface p1\n"
            "        Port p2\n"
            "            trunks: [30, 40]\n"
            "            Interface p2\n"
            "        Port p3\n"
            "            tag: 3\n"
            "            Interface p3\n")
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
        ("type=vxlan", "type=vxlan: keel has no ports of Open vSwitch type vxlan"),
        ("type=nonsense", "type=nonsense: unknown interface type"),
        ("type=dpdk", "type=dpdk: port p1 is a null port"),
        ("type=tap", "type=tap: port p1 is a null port"),
        ("options:dpdk-devargs=net_null1", "options:dpdk-devargs: keel takes no Interface options"),
        ("other_config:priority-tags=true", 'other_config:priority-tags: keel knows no Port other_config key'),
        ("external_ids:iface-id=vm1", "external_ids:iface-id: keel does not keep external_ids"),
        ("qos=[]", "Port column qos is not implemented by keel"),
        ("vlan_mode=access", "vlan_mode access needs a tag"),
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
    p = run_keel(*PORTS, "--config-dir", cfg, stdin=script + "show running-config\nwrite memory\n", timeout=PATIENCE)
    check(p.returncode == 0, "build + save", p)
    first = p.stdout[p.stdout.index("! keel "):p.stdout.index("saved the running")]
    for line in ("add-port br0 p0 tag=10 -- set Interface p0 ofport_request=5 mtu_request=9000",
                 "add-port br0 p1 tag=2 trunks=3,4 vlan_mode=native-tagged -- set Interface p1 ofport_request=1",
                 "add-port br0 p2 trunks=7 -- set Interface p2 ofport_request=2",
                 "add-port br1 p3 tag=4 vlan_mode=trunk -- set Interface p3 ofport_request=1 mtu_request=1500"):
        check(line + "\n" in first, "running-config has %r:\n%s" % (line, first), p)
    p = run_keel(*PORTS, "--config-dir", cfg, stdin="show running-config\nshow\n", timeout=PATIENCE)
    check(p.returncode == 0, "boots the saved config", p)
    again = p.stdout[p.stdout.index("! keel "):p.stdout.index("    Bridge ")]
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


if __name__ == "__main__":
    main([test_forms_configure_like_ovs, test_bad_words_add_nothing, test_running_config_round_trip,
          test_old_form_config_still_boots])

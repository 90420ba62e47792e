#!/usr/bin/env python3
"""Bonds on host-sim (issue 14), offline runs: keel with a pcap input p0 and
a two-member bond (a1, a2 pcap outputs) on bridge br0 whose only rule is
NORMAL, so the input's unknown destination floods into the bond.

  * balance-tcp without LACP sends nothing, as Open vSwitch 3.1 (the
    lb_output and recirculation megaflows need a LACP partner: see
    test_bond_live.py, where the test is the partner);
  * a member whose link is down carries nothing; active-backup and
    balance-slb output through one member;
  * LACPDUs received on members reach the bond's LACP through slow_path
    userspace actions, never NORMAL; bad ones are counted;
  * the bundle() action skips disabled members;
  * configuration errors change nothing; the running config round-trips.
"""
import os
import struct

from harness import (check, json_lines, main, ports_by_name, read_pcap, run_keel, tmpdir,
                     write_pcap)

# --- traffic ------------------------------------------------------------------

SRC = bytes.fromhex("000000000001")
DST = bytes.fromhex("000000000002")


def tcp_frame(i):
    """Flow i: 10.0.x.y:1000+i -> 10.1.0.1:80, one packet per flow."""
    ip_src = bytes([10, 0, (i >> 8) & 255, i & 255])
    ip_dst = bytes([10, 1, 0, 1])
    tcp = struct.pack("!HHIIBBHHH", 1000 + (i % 60000), 80, 0, 0, 5 << 4, 0x02, 8192, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), i & 0xffff, 0, 64, 6, 0, ip_src, ip_dst)
    return DST + SRC + b"\x08\x00" + ip + tcp


def run_bond(bond_words, n_flows=10000, commands=("flow-dump",), pre=()):
    """One offline run; returns (proc, dir, port ids by name, frames). p0 has
    two rx queues so that the sim NIC computes each frame's RSS hash (a
    single-queue pcap port hands packets over without one, and hash(l4)
    then hashes the 5-tuple itself)."""
    d = tmpdir()
    frames = [tcp_frame(i) for i in range(n_flows)]
    write_pcap(os.path.join(d, "in.pcap"), frames)
    cfg = os.path.join(d, "keel.cfg")
    with open(cfg, "w") as f:
        f.write("add-br br0\nadd-port br0 p0\n")
        for line in pre:
            f.write(line + "\n")
        f.write("add-bond br0 bond0 a1 a2 %s\n" % bond_words)
        f.write("add-flow br0 actions=NORMAL\n")
    stdin = "\n".join(list(commands) + ["show ports --format json"]) + "\n"
    p = run_keel("--config", cfg, "--config-dir", d, "--port", "p0=pcap:in=" + os.path.join(d, "in.pcap") + ",rxq=2",
                 "--port", "a1=pcap:out=" + os.path.join(d, "a1.pcap"),
                 "--port", "a2=pcap:out=" + os.path.join(d, "a2.pcap"), "--exit-when-drained", stdin=stdin)
    check(p.returncode == 0, "keel failed", p)
    ports = ports_by_name(json_lines(p.stdout)[-1])
    return p, d, {n: ports[n]["id"] for n in ports}, frames


def flows_of(stdout):
    return [l for l in stdout.splitlines() if l.startswith("recirc_id(")]


def bucket_map(text):
    """pmd-bond-show's `bucket K - member P` lines -> {K: P}."""
    m = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("bucket "):
            k, p = line[len("bucket "):].split(" - member ")
            m[int(k)] = int(p)
    return m


def test_balance_tcp_without_lacp_sends_nothing():
    # Open vSwitch 3.1 accepts balance-tcp with lacp=off and sends nothing on
    # it (bond_choose_output_member() wants LACP negotiated): one drop
    # megaflow. (With a LACP partner: test_bond_live.py.)
    p, d, ids, frames = run_bond("bond_mode=balance-tcp", n_flows=1000, commands=("flow-dump", "bond-show"))
    flows = flows_of(p.stdout)
    check(len(flows) == 1 and flows[0].endswith("actions:drop"), "one drop megaflow: %s" % flows, p)
    check("lb_output action: enabled, bond-id: 1" in p.stdout and "lacp_status: off" in p.stdout,
          "bond-show: lb_output enabled, LACP off", p)
    for name in ("a1", "a2"):
        path = os.path.join(d, name + ".pcap")
        check(not os.path.exists(path) or not read_pcap(path), "nothing sent on " + name)


def test_member_down_carries_nothing():
    # a1's link is down before the bond exists: the bond never enables it.
    p, d, ids, frames = run_bond("bond_mode=balance-slb", n_flows=2000, pre=("port-link a1 down",),
                                 commands=("flow-dump", "bond-show bond0"))
    check("member a1: disabled" in p.stdout and "member a2: enabled" in p.stdout, "bond-show: a1 disabled", p)
    flows = flows_of(p.stdout)
    check(len(flows) == 1 and flows[0].endswith("actions:%d" % ids["a2"]), "the flow outputs to a2: %s" % flows, p)
    check(not os.path.exists(os.path.join(d, "a1.pcap")) or not read_pcap(os.path.join(d, "a1.pcap")),
          "nothing sent on the down member")
    check(len(read_pcap(os.path.join(d, "a2.pcap"))) == len(frames), "everything on a2")


def test_active_backup_and_slb_output():
    for mode in ("active-backup", "balance-slb"):
        p, d, ids, frames = run_bond("bond_mode=" + mode, n_flows=500, commands=("flow-dump", "bond-show"))
        flows = flows_of(p.stdout)
        check(len(flows) == 1, "%s: one megaflow: %s" % (mode, flows), p)
        out = flows[0].rsplit("actions:", 1)[1]
        check(out in (str(ids["a1"]), str(ids["a2"])), "%s outputs to one member: %s" % (mode, out), p)
        name = "a1" if out == str(ids["a1"]) else "a2"
        check(len(read_pcap(os.path.join(d, name + ".pcap"))) == len(frames), "%s: all on %s" % (mode, name))


BAD = [
    ("add-bond br0 b1 a1", "at least 2 interfaces"),
    ("add-bond br0 b1 a1 p0", "cannot create an interface named p0 because an interface named p0 already exists on "
                              "bridge br0"),
    ("add-bond br0 b1 a1 nosuch", "no port 'nosuch'"),
    ("add-bond br0 b1 a1 a1", "named twice"),
    ("add-bond br0 p0 a1 a2", "a datapath port has that name"),
    ("add-bond br0 b1 a1 a2 bond_mode=balance-foo", "is not one of the allowed values"),
    ("add-bond br0 b1 a1 a2 lacp=sometimes", "is not one of the allowed values"),
    ("add-bond br0 b1 a1 a2 other_config:lb-output-action=maybe", "true or false"),
    ("add-bond br0 b1 a1 a2 other_config:lacp-time=medium", "fast or slow"),
    ("add-bond br0 b1 a1 a2 other_config:bond-hash-basis=-1", "a number of 0..4294967295"),
    ("add-bond br0 b1 a1 a2 other_config:frobnicate=1", "no bond other_config key"),
    ("add-bond br0 b1 a1 a2 bond_updelay=-5", "a delay of 0.."),
    ("add-bond br0 b1 a1 a2 -- set Interface a3 ofport_request=5", "no row \"a3\" in table Interface"),
    ("add-bond br0 b1 a1 a2 -- set Interface a2 ofport_request=1", "OpenFlow port 1 is already p0"),
    ("add-bond nobr b1 a1 a2", "no bridge nobr"),
]


def test_config_errors_change_nothing():
    d = tmpdir()
    cfg = os.path.join(d, "keel.cfg")
    with open(cfg, "w") as f:
        f.write("add-br br0\nadd-port br0 p0\n")
    cmds = ["show running-config"]
    for c, _ in BAD:
        cmds += [c, "show running-config"]
    # With a bond in place: its members are taken, its name is a port.
    cmds += ["add-bond br0 bond0 a1 a2 bond_mode=balance-slb", "show running-config",
             "add-bond br0 bond1 a2 a3", "show running-config",
             "add-port br0 a1", "show running-config",
             "add-port br0 bond0", "show running-config",
             "add-bond br0 bond0 a3 a4", "show running-config",
             "set port bond0 bond_mode=round-robin", "show running-config",
             "set port bond0 other_config:lacp-fallback-ab=perhaps", "show running-config",
             "del-port br0 a1", "show running-config"]
    p = run_keel("--config", cfg, "--config-dir", d, "--port", "p0=null", "--port", "a1=null", "--port", "a2=null",
                 "--port", "a3=null", "--port", "a4=null", stdin="\n".join(cmds) + "\n")
    # Each `show running-config` output starts with "! keel"; errors go to stderr.
    shows = p.stdout.split("! keel")[1:]
    check(len(shows) == len(BAD) + 1 + 8, "one running-config per show (%d)" % len(shows), p)
    for i in range(len(BAD)):
        check(shows[i + 1] == shows[0], "%r changed the running config:\n%s" % (BAD[i][0], shows[i + 1]), p)
    for c, want in BAD:
        check(want in p.stderr, "%r: expected an error mentioning %r" % (c, want), p)
    with_bond = shows[len(BAD) + 1]
    check("add-bond br0 bond0 a1 a2 bond_mode=balance-slb" in with_bond, "the bond was added", p)
    for i in range(len(BAD) + 2, len(shows)):
        check(shows[i] == with_bond, "a refused command changed the running config:\n" + shows[i], p)
    for want in ("already exists on bridge br0 (in bond bond0)", "already in bond bond0",
                 "a bond of bridge br0 has that name", "a port named bond0 already exists on bridge br0",
                 "round-robin", "true or false", "is a member of bond bond0"):
        check(want in p.stderr, "expected an error mentioning %r" % want, p)


def test_running_config_round_trip():
    d = tmpdir()
    cfg = os.path.join(d, "keel.cfg")
    with open(cfg, "w") as f:
        f.write("add-br br0\nadd-port br0 p0\n"
                "add-bond br0 bond0 a1 a2 bond_mode=balance-tcp lacp=active bond_updelay=200 bond_downdelay=100 "
                "other_config:bond-rebalance-interval=1000 other_config:lb-output-action=false "
                "other_config:bond-hash-basis=7 other_config:lacp-time=fast other_config:lacp-fallback-ab=true "
                "tag=10 vlan_mode=native-untagged -- set Interface a2 ofport_request=7 mtu_request=9000\n"
                "add-bond br0 bond1 a3 a4 other_config:bond-primary=a4\n"
                "set port bond1 bond_mode=balance-slb trunks=5,6\n")
    ports = ["--port", "p0=null", "--port", "a1=null", "--port", "a2=null", "--port", "a3=null", "--port", "a4=null"]
    p = run_keel("--config", cfg, "--config-dir", d, *ports, stdin="show running-config\n")
    check(p.returncode == 0 and not p.stderr.strip(), "config applies", p)
    first = p.stdout
    for want in ("add-bond br0 bond0 a1 a2 bond_mode=balance-tcp lacp=active bond_updelay=200 bond_downdelay=100 "
                 "other_config:bond-rebalance-interval=1000 other_config:lb-output-action=false "
                 "other_config:bond-hash-basis=7 other_config:lacp-time=fast other_config:lacp-fallback-ab=true "
                 "tag=10 vlan_mode=native-untagged -- set Interface a1 ofport_request=2 "
                 "-- set Interface a2 ofport_request=7 mtu_request=9000",
                 "add-bond br0 bond1 a3 a4 bond_mode=balance-slb other_config:bond-primary=a4 trunks=5,6"):
        check(want in first, "running config has %r" % want, p)
    check("add-port br0 a1" not in first, "members are not add-port lines", p)
    cfg2 = os.path.join(d, "again.cfg")
    with open(cfg2, "w") as f:
        f.write("\n".join(l for l in first.splitlines() if not l.startswith("!")) + "\n")
    p2 = run_keel("--config", cfg2, "--config-dir", d, *ports, stdin="show running-config\n")
    check(p2.stdout == first, "the running config recreates itself:\n%s\n---\n%s" % (first, p2.stdout), p2)


# --- LACP through the slow path ---------------------------------------------

PARTNER = bytes.fromhex("02000000aa00")


def lacpdu(port, key=1, state=0x3d, lie=False):
    """A partner's LACPDU (802.1AX): actor = the partner, partner info zero.
    lie: the actor TLV claims 200 bytes."""
    actor = struct.pack("!BBH6sHHHB3x", 1, 200 if lie else 20, 65535, PARTNER, key, 255, port, state)
    partner = struct.pack("!BB18x", 2, 20)
    collector = struct.pack("!BBH12x", 3, 16, 0)
    body = struct.pack("!BB", 1, 1) + actor + partner + collector + struct.pack("!BB50x", 0, 0)
    src = PARTNER[:5] + bytes([port])
    return bytes.fromhex("0180c2000002") + src + b"\x88\x09" + body


def test_lacpdus_reach_lacp_never_normal():
    d = tmpdir()
    good1, good2 = lacpdu(1), lacpdu(2)
    write_pcap(os.path.join(d, "a1in.pcap"), [good1, good1[:40], lacpdu(1, lie=True)])
    write_pcap(os.path.join(d, "a2in.pcap"), [good2])
    cfg = os.path.join(d, "keel.cfg")
    with open(cfg, "w") as f:
        f.write("add-br br0\nadd-port br0 p0\nadd-bond br0 bond0 a1 a2 bond_mode=balance-tcp lacp=active\n"
                "add-flow br0 actions=NORMAL\n")
    p = run_keel("--config", cfg, "--config-dir", d, "--port", "p0=pcap:out=" + os.path.join(d, "p0.pcap"),
                 "--port", "a1=pcap:in=%s,out=%s" % (os.path.join(d, "a1in.pcap"), os.path.join(d, "a1.pcap")),
                 "--port", "a2=pcap:in=%s,out=%s" % (os.path.join(d, "a2in.pcap"), os.path.join(d, "a2.pcap")),
                 "--exit-when-drained", stdin="flow-dump\nlacp-show bond0 --format json\nlacp-show bond0\n")
    check(p.returncode == 0, "keel failed", p)
    flows = flows_of(p.stdout)
    check(flows and all("actions:userspace(pid=0,userdata(0201" in f for f in flows),
          "LACPDUs go to the slow path and nowhere else: %s" % flows, p)
    check(not os.path.exists(os.path.join(d, "p0.pcap")) or not read_pcap(os.path.join(d, "p0.pcap")),
          "no slow-protocol frame was flooded by NORMAL")
    v = [j for j in json_lines(p.stdout) if "lacp" in j][0]["lacp"][0]
    m = {x["member"]: x for x in v["members"]}
    check(m["a1"]["rx_bad"] == 2, "a truncated and a lying LACPDU are counted as bad: %s" % m["a1"], p)
    for name, port in (("a1", 1), ("a2", 2)):
        check(m[name]["partner"]["sys_id"] == "02:00:00:00:aa:00" and m[name]["partner"]["port_id"] == port,
              "%s learned its partner from its LACPDU: %s" % (name, m[name]["partner"]), p)
    check("---- bond0 ----" in p.stdout and "partner sys_id: 02:00:00:00:aa:00" in p.stdout,
          "lacp-show prints the partner", p)


def test_bundle_action_skips_disabled_members():
    """bundle(...) picks among the enabled members: a bond member the bond
    disabled, or a port whose link is down, is not chosen."""
    cmds = ["del-br br0", "add-br br0", "add-port br0 p0", "add-bond br0 b0 p1 p2 bond_mode=active-backup",
            "add-flow br0 in_port=1,actions=bundle(eth_src,0,active_backup,ofport,members:2,3)",
            "trace br0 in_port=1", "bond-disable-member b0 p1", "trace br0 in_port=1",
            "port-link p2 down", "trace br0 in_port=1"]
    p = run_keel("--port", "p0=null", "--port", "p1=null", "--port", "p2=null", "--config-dir", tmpdir(),
                 stdin="\n".join(cmds) + "\n")
    acts = [l for l in p.stdout.splitlines() if l.startswith("Datapath actions:")]
    check(acts == ["Datapath actions: 2", "Datapath actions: 3", "Datapath actions: drop"],
          "bundle() follows the members' state: %s" % acts, p)


if __name__ == "__main__":
    main([test_balance_tcp_without_lacp_sends_nothing, test_member_down_carries_nothing, test_active_backup_and_slb_output, test_config_errors_change_nothing,
          test_running_config_round_trip, test_lacpdus_reach_lacp_never_normal,
          test_bundle_action_skips_disabled_members])

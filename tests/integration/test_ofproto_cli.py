"""OpenFlow commands on host-sim: add-br/add-port/show, add-flow(s),
mod-flows, del-flows, dump-flows text (as `ovs-ofctl dump-flows |
ofctl_strip`) and JSON, bad input (a clear error naming the token, tables
unchanged), add-flows bundles (all or nothing, FILE:LINE), and the
running-config round trip of bridges, ports and rules."""
import os
import re

from harness import EMPTY_CONFIG, PATIENCE, check, json_lines, main, run_keel, tmpdir

PORTS = ["--port", "p0=null", "--port", "p1=null", "--port", "p2=null"]


def keel(script, extra=()):
    d = tmpdir()
    empty = os.path.join(d, "empty.cfg")
    open(empty, "w").close()
    return run_keel(*PORTS, "--config", empty, *extra, stdin=script, timeout=PATIENCE)


def strip(text):
    """OVS's ofctl_strip: no durations or ages."""
    text = re.sub(r" duration=[0-9.]+s,", "", text)
    text = re.sub(r" idle_age=[0-9]+,", "", text)
    text = re.sub(r" hard_age=[0-9]+,", "", text)
    return text


def dump_lines(stdout):
    return [l for l in stdout.splitlines() if l.startswith(" cookie=")]


SETUP = "add-br br0\nadd-port br0 p0\nadd-port br0 p1 --ofport 7 --tag 10\n"


SWITCH_UUID = "5f1a3c4e-8b2d-4e6f-9a0b-1c2d3e4f5a6b"


def test_show_like_ovs_vsctl():
    # A config directory whose switch-uuid is known: the port order (by row
    # uuid, as ovs-vsctl's) is then fixed.
    d = tmpdir()
    with open(os.path.join(d, "switch-uuid"), "w") as f:
        f.write(SWITCH_UUID + "\n")
    p = keel(SETUP + "add-port br0 p2 --trunks 20,10 --tag 5 --vlan-mode native-untagged\nadd-br br1\nshow\n"
             "show --format json\nshow ports\n", extra=("--config-dir", d))
    check(p.returncode == 0, "show", p)
    want = (SWITCH_UUID + "\n"
            "    Bridge br0\n"
            "        fail_mode: secure\n"
            "        datapath_type: netdev\n"
            "        Port p1\n"
            "            tag: 10\n"
            "            Interface p1\n"
            "                type: null\n"
            "        Port p2\n"
            "            tag: 5\n"
            "            trunks: [10, 20]\n"
            "            Interface p2\n"
            "                type: null\n"
            "        Port p0\n"
            "            Interface p0\n"
            "                type: null\n"
            "        Port br0\n"
            "            Interface br0\n"
            "                type: internal\n"
            "    Bridge br1\n"
            "        fail_mode: secure\n"
            "        datapath_type: netdev\n"
            "        Port br1\n"
            "            Interface br1\n"
            "                type: internal\n")
    check(p.stdout.startswith(want), "ovs-vsctl show layout:\n" + p.stdout, p)
    j = json_lines(p.stdout)[0]
    check(j["uuid"] == SWITCH_UUID, "json: the switch's uuid", p)
    for b in j["bridges"]:
        uuids = [x["uuid"] for x in b["ports"]]
        check(uuids == sorted(uuids) and len(set(uuids)) == len(uuids), "ports in row-uuid order: %s" % uuids, p)
    check([b["uuid"] for b in j["bridges"]] == sorted(b["uuid"] for b in j["bridges"]), "bridges in uuid order", p)
    check(j["bridges"][0]["ports"][1] == {"uuid": j["bridges"][0]["ports"][1]["uuid"], "name": "p2", "tag": 5,
                                          "trunks": [10, 20], "interfaces": [
                                              {"uuid": j["bridges"][0]["ports"][1]["interfaces"][0]["uuid"],
                                               "name": "p2", "type": "null", "options": {}}]},
          "json port: %s" % j["bridges"][0]["ports"][1], p)
    check("Rx-pkts" in p.stdout, "show ports still works", p)


def test_show_switch_uuid_kept():
    """The first line is the switch's UUID: made on first use, kept in the
    config directory across reboots; a file that holds no UUID is replaced."""
    d = tmpdir()
    p1 = keel("show\n", extra=("--config-dir", d))
    first = p1.stdout.splitlines()[0]
    check(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", first),
          "a version-4 uuid: %r" % first, p1)
    check(p1.stdout == first + "\n", "no bridge: the uuid line only", p1)
    check(open(os.path.join(d, "switch-uuid")).read() == first + "\n", "kept in DIR/switch-uuid", p1)
    p2 = keel("show\n", extra=("--config-dir", d))
    check(p2.stdout.splitlines()[0] == first, "the same after a reboot", p2)
    other = tmpdir()
    check(keel("show\n", extra=("--config-dir", other)).stdout.splitlines()[0] != first, "another switch, another uuid")
    with open(os.path.join(d, "switch-uuid"), "w") as f:
        f.write("not a uuid\n")
    p3 = keel("show\n", extra=("--config-dir", d))
    new = p3.stdout.splitlines()[0]
    check(p3.returncode == 0 and new != first and re.fullmatch(r"[0-9a-f-]{36}", new), "garbage replaced", p3)
    check(open(os.path.join(d, "switch-uuid")).read() == new + "\n", "and saved", p3)


def test_show_interfaces():
    """Interface type and options from the --port spec, quoted as ovs-vsctl
    quotes strings; names that need quotes get them."""
    d = tmpdir()
    pc = os.path.join(d, "in.pcap")
    with open(pc, "wb") as f:
        f.write(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
    ports = ["--port", "p0=pcap:in=%s,out=%s/o.pcap,loop=2" % (pc, d), "--port", "1x=ring:size=64",
             "--port", "p2=sample:pps=5", "--port", "p3=null", "--port", "p4=ring"]
    with open(os.path.join(d, "switch-uuid"), "w") as f:
        f.write(SWITCH_UUID + "\n")
    empty = os.path.join(d, "empty.cfg")
    open(empty, "w").close()
    p = run_keel(*ports, "--config", empty, "--config-dir", d, stdin="add-br br0\nadd-port br0 p0\nadd-port br0 1x\n"
                 "add-port br0 p2\nadd-port br0 p3\nadd-port br0 p4\nshow\n", timeout=PATIENCE)
    check(p.returncode == 0, "show", p)
    blocks = {}
    for block in p.stdout.split("        Port ")[1:]:
        name = block.split("\n", 1)[0]
        blocks[name] = block
    check(blocks["p0"].endswith('            Interface p0\n                type: pcap\n'
                                '                options: {in="%s", loop="2", out="%s/o.pcap"}\n' % (pc, d)),
          "pcap: %r" % blocks["p0"], p)
    check(blocks['"1x"'] == '"1x"\n            Interface "1x"\n                type: ring\n'
                            '                options: {size="64"}\n', "ring, quoted name: %r" % blocks.get('"1x"'), p)
    check(blocks["p2"].endswith("type: sample\n                options: {pps=\"5\"}\n"), "sample: %r" % blocks["p2"], p)
    check(blocks["p3"].endswith("Interface p3\n                type: null\n"), "null: no options", p)
    check(blocks["p4"].endswith("Interface p4\n                type: ring\n"), "ring at its defaults", p)


def test_port_errors():
    p = keel(SETUP + "add-port br0 p0\n")
    check(p.returncode != 0 and "already in bridge br0" in p.stderr, "port twice", p)
    p = keel(SETUP + "add-port br0 p2 --ofport 7\n")
    check("OpenFlow port 7 is already p1" in p.stderr, "ofport taken", p)
    p = keel("add-br br0\nadd-port br0 nope\n")
    check("no port 'nope'" in p.stderr, "unknown port", p)
    p = keel("add-port br9 p0\n")
    check("no bridge br9" in p.stderr, "unknown bridge", p)
    p = keel(SETUP + "del-port p1\nshow\n")
    check(p.returncode == 0 and "Port p1" not in p.stdout, "del-port without bridge", p)


def test_dump_flows_text():
    script = SETUP + ("add-flow br0 priority=100,ip,nw_dst=10.0.0.0/8,actions=output:2\n"
                      "add-flow br0 table=1,cookie=0x1f,idle_timeout=10,tcp,tp_dst=80,in_port=p1 actions=output:p0\n"
                      "add-flow br0 actions=NORMAL\n"
                      "dump-flows br0\n")
    p = keel(script)
    check(p.returncode == 0, "dump-flows", p)
    check(p.stdout.startswith("NXST_FLOW reply (xid=0x4):\n cookie="), "ovs-ofctl's reply line first", p)
    got = strip("\n".join(dump_lines(p.stdout)))
    want = (" cookie=0x0, table=0, n_packets=0, n_bytes=0, actions=NORMAL\n"
            " cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2\n"
            " cookie=0x1f, table=1, n_packets=0, n_bytes=0, idle_timeout=10, tcp,in_port=7,tp_dst=80 actions=output:1")
    check(got == want, "dump-flows text:\n%s\nwant\n%s" % (got, want), p)
    check(re.search(r" cookie=0x0, duration=[0-9]+(\.[0-9]{3})?s, table=0, n_packets=0, n_bytes=0, idle_age=[0-9]+, actions=NORMAL",
                    p.stdout), "duration and idle_age in place", p)
    # ovs-ofctl's transaction id: 0x8 when it read a FLOW (it asked for the
    # port names first); a bridge without rules: the reply line alone.
    p = keel(SETUP + "add-flow br0 table=1,actions=drop\ndump-flows br0 table=1\nadd-br br1\ndump-flows br1\n")
    check(p.stdout == "NXST_FLOW reply (xid=0x8):\n" + p.stdout.splitlines()[1] + "\nNXST_FLOW reply (xid=0x4):\n"
          and "table=1" in p.stdout, "reply lines: %r" % p.stdout, p)
    # --no-stats, as ovs-ofctl's: no reply line, no state.
    p = keel(script.replace("dump-flows br0\n", "dump-flows br0 --no-stats\n"))
    want = (" actions=NORMAL\n"
            " priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2\n"
            " cookie=0x1f, table=1, idle_timeout=10, tcp,in_port=7,tp_dst=80 actions=output:1\n")
    check(p.returncode == 0 and p.stdout == want, "--no-stats:\n%s" % p.stdout, p)


def test_mod_del_filters():
    script = SETUP + ("add-flow br0 priority=10,cookie=0x1,ip,actions=output:1\n"
                      "add-flow br0 priority=20,cookie=0x2,ip,nw_dst=10.0.0.0/8,actions=output:7\n"
                      "add-flow br0 table=3,priority=20,cookie=0x2,udp,actions=output:7\n"
                      "mod-flows br0 cookie=0x2/0xff,actions=drop\n"
                      "dump-flows br0 --format json\n"
                      "del-flows br0 table=255,cookie=0x2/-1,out_port=1\n"
                      "dump-flows br0 --format json\n"
                      "del-flows br0 ip --strict\n"
                      "del-flows br0 priority=10,ip --strict\n"
                      "dump-flows br0 --format json\n"
                      "del-flows br0\n"
                      "dump-flows br0 --format json\n")
    p = keel(script)
    check(p.returncode == 0, "mod/del", p)
    j = [x["flows"] for x in json_lines(p.stdout)]
    check([f["actions"] for f in j[0]] == ["drop", "output:1", "drop"], "mod-flows by cookie mask: %s" % j[0], p)
    check(len(j[1]) == 3, "out_port=1 spared drop rules", p)
    check([f["priority"] for f in j[2]] == [20, 20], "strict delete by priority", p)
    check(j[3] == [], "del-flows BR: all", p)
    check(set(j[0][0].keys()) >= {"table", "priority", "cookie", "match", "actions", "duration_ms", "n_packets",
                                  "n_bytes", "idle_timeout", "hard_timeout", "importance", "idle_age_ms",
                                  "hard_age_ms", "flags"}, "json keys", p)


def test_bad_input_changes_nothing():
    base = SETUP + "add-flow br0 priority=1,actions=drop\n"
    cases = [
        ("add-flow br0 tcp,foo=1,actions=drop", "unknown field 'foo'"),
        ("add-flow br0 tp_dst=80,actions=drop", "'tp_dst'"),
        ("add-flow br0 dl_vlan=5000,actions=drop", "'5000'"),
        ("add-flow br0 ip,actions=frobnicate", "'frobnicate'"),
        ("add-flow br0 priority=1", "missing 'actions='"),
        ("mod-flows br0 actions=set_field:80->tcp_dst", "tcp_dst"),
        ("del-flows br0 cookie=0x1", "cannot set cookie"),
        ("add-flow br0 in_port=nosuch,actions=drop", "'nosuch'"),
    ]
    for line, token in cases:
        p = keel(base + line + "\ndump-flows br0\n")
        check(p.returncode != 0 and token in p.stderr, "%r: error names %s" % (line, token), p)
        got = strip("\n".join(dump_lines(p.stdout)))
        check(got == " cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=1 actions=drop",
              "%r: tables unchanged" % line, p)


def test_add_flows_bundle_all_or_nothing():
    d = tmpdir()
    good = os.path.join(d, "good.txt")
    bad = os.path.join(d, "bad.txt")
    with open(good, "w") as f:
        f.write("# comment\n\npriority=5,ip,actions=output:1\n  priority=6,arp,actions=NORMAL\n")
    with open(bad, "w") as f:
        f.write("priority=7,ip,actions=output:1\npriority=8,ip,actions=output:2\n# x\npriority=9,udp,tp_dst=99999,actions=drop\n")
    p = keel(SETUP + "add-flows br0 %s --bundle\nadd-flows br0 %s\ndump-flows br0\n" % (good, bad))
    check(p.returncode != 0, "bad file fails", p)
    check("%s:4:" % bad in p.stderr and "'99999'" in p.stderr, "error names FILE:LINE and the token", p)
    check(len(dump_lines(p.stdout)) == 2, "only the good file's rules", p)
    # A bundle that fails in the tables (not the parser) rolls back too.
    with open(bad, "w") as f:
        f.write("priority=7,ip,actions=output:1\ntable=4,actions=goto_table:2\n")
    p = keel(SETUP + "add-flows br0 %s\ndump-flows br0\n" % bad)
    check("%s:2:" % bad in p.stderr, "goto_table backwards at line 2", p)
    check(len(dump_lines(p.stdout)) == 0, "nothing added", p)


def test_running_config_round_trip():
    d = tmpdir()
    cfg = os.path.join(d, "cfg")
    script = (SETUP + "add-port br0 p2 --trunks 3,4 --tag 2 --vlan-mode native-tagged\nadd-br br1\n"
              "add-flow br0 table=2,cookie=0xab,priority=300,hard_timeout=600,importance=3,send_flow_rem,"
              "udp,in_port=p1,nw_src=192.168.0.0/16,tp_src=53 actions=mod_vlan_vid:5,set_field:10.0.0.1->ip_dst,"
              "output:p2,controller:64\n"
              "add-flow br0 priority=1,actions=NORMAL\n"
              "add-flow br1 in_port=LOCAL,actions=drop\n")
    p = run_keel(*PORTS, "--config", EMPTY_CONFIG, "--config-dir", cfg,
                 stdin=script + "show running-config\nwrite memory\n", timeout=PATIENCE)
    check(p.returncode == 0, "build + save", p)
    first = p.stdout[p.stdout.index("! keel "):p.stdout.index("saved the running")]
    for line in ("add-br br0", "add-port br0 p1 tag=10 -- set Interface p1 ofport_request=7",
                 "add-port br0 p2 tag=2 trunks=3,4 vlan_mode=native-tagged -- set Interface p2 ofport_request=2",
                 "add-br br1"):
        check(line + "\n" in first, "running-config has %r" % line, p)
    check(first.index("add-port br0 p0") < first.index("add-flow"), "bridges before rules", p)
    p = run_keel(*PORTS, "--config-dir", cfg, stdin="show running-config\n", timeout=PATIENCE)
    again = p.stdout[p.stdout.index("! keel "):]
    check(again == first, "identical after reboot:\n%s\nvs\n%s" % (first, again), p)
    # configure replace with an empty file resets bridges and rules.
    empty = os.path.join(d, "e.cfg")
    open(empty, "w").close()
    p = run_keel(*PORTS, "--config-dir", cfg, stdin="configure replace %s\nshow\nshow running-config\n" % empty,
                 timeout=PATIENCE)
    check(p.returncode == 0 and "Bridge" not in p.stdout and "add-br" not in p.stdout, "reset", p)


if __name__ == "__main__":
    main([test_show_like_ovs_vsctl, test_show_switch_uuid_kept, test_show_interfaces, test_port_errors, test_dump_flows_text, test_mod_del_filters,
          test_bad_input_changes_nothing, test_add_flows_bundle_all_or_nothing, test_running_config_round_trip])

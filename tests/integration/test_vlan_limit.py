"""Runts and VLAN stacks, as Open vSwitch 3.1 handles them (issue: runts
forwarded, QinQ keyed unlike OVS).

* `set vlan-limit 0|1|2` (OVS's other_config:vlan-limit, default 1): pcaps
  of untagged, one-tag, double-0x8100, QinQ, triple-tagged, 0x9100-tagged
  and cut-short frames through OpenFlow rules on dl_vlan/dl_type, and
  through pop_vlan + resubmit to a rule on the inner tag, leave by the port
  Open vSwitch sends them to under each limit, byte for byte; flow-dump
  prints the megaflows as `ovs-appctl dpctl/dump-flows` does, and that text
  finds the flow again (dp-flow get / del) (the expected
  strings below were printed by ovs-vswitchd 3.1 with netdev-dummy ports
  fed these frames with netdev-dummy/receive);
* runts (0-13 bytes) are dropped and counted (malformed, runts) on the
  OpenFlow path and through a cross-connect; 14-59-byte frames are keyed and
  forwarded unpadded (as OVS);
* trace --packet parses under the limit, cut-short tags included, and prints
  Open vSwitch's Flow (vlan_tci1 / dl_vlan1) and Megaflow lines;
* the running config carries `set vlan-limit` when it is not the default;
  bad values are refused."""
import os
import struct

from harness import check, json_lines, main, read_pcap, run_keel, tmpdir, write_pcap

ETH = bytes.fromhex("ffffffffffff" "020000000001")


def ip_udp(i):
    """IPv4/UDP, 28 bytes + 2 payload bytes that encode i (frames stay distinct)."""
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 30, i, 0, 64, 17, 0, bytes([192, 168, 0, 1]),
                     bytes([192, 168, 0, 2]))
    return ip + struct.pack("!HHHH", 53, 53, 10, 0) + struct.pack("!H", i)


def tag(tpid, vid):
    return struct.pack("!HH", tpid, vid)


def frames_by_kind(i=0):
    return {
        "untagged": ETH + b"\x08\x00" + ip_udp(i),
        "one": ETH + tag(0x8100, 10) + b"\x08\x00" + ip_udp(i + 1),
        "double": ETH + tag(0x8100, 10) + tag(0x8100, 20) + b"\x08\x00" + ip_udp(i + 2),
        "qinq": ETH + tag(0x88a8, 10) + tag(0x8100, 20) + b"\x08\x00" + ip_udp(i + 3),
        "triple": ETH + tag(0x88a8, 10) + tag(0x8100, 20) + tag(0x8100, 30) + b"\x08\x00" + ip_udp(i + 4),
        "tpid9100": ETH + tag(0x9100, 10) + tag(0x8100, 20) + b"\x08\x00" + ip_udp(i + 5),
        "cut_tag": ETH + b"\x81\x00\x00\x0a",                    # 16 bytes: a tag without its EtherType
        "cut_inner": ETH + tag(0x8100, 10) + b"\x81\x00\x00\x14",  # the second tag cut short
    }


RUNTS = [(ETH + b"\x08\x00")[:n] for n in range(14)]
SHORT = [ETH + b"\x08\x00" + bytes(n - 14) for n in (14, 20, 59)]  # a whole Ethernet header: keyed

# OpenFlow rules on the outer tag and dl_type; ports p0..p3 are OpenFlow 1..4.
BRIDGE = "add-br br0\nadd-port br0 p0\nadd-port br0 p1\nadd-port br0 p2\nadd-port br0 p3\n"
RULES = BRIDGE + ("add-flow br0 priority=30,dl_vlan=10,dl_type=0x0800,actions=output:2\n"
                  "add-flow br0 priority=20,dl_vlan=10,dl_type=0x8100,actions=output:3\n"
                  "add-flow br0 priority=10,actions=output:4\n")
# The inner tag, reached by popping the outer one.
INNER = BRIDGE + ("add-flow br0 table=0,priority=10,dl_vlan=10,actions=pop_vlan,resubmit(,1)\n"
                  "add-flow br0 table=0,priority=0,actions=output:4\n"
                  "add-flow br0 table=1,priority=10,dl_vlan=20,actions=output:2\n"
                  "add-flow br0 table=1,priority=0,actions=output:3\n")

# Where Open vSwitch 3.1 sends each kind (RULES) and the megaflow it prints
# (dpctl/dump-flows), per vlan-limit. 0 and 2 are the same (no limit = the two
# tags a flow holds).
OVS_RULES = {
    1: {"untagged": ("p3", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no)"),
        "one": ("p1", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=10),"
                      "encap(eth_type(0x0800),ipv4(frag=no))"),
        "double": ("p2", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=10),"
                         "encap(eth_type(0x8100))"),
        "qinq": ("p2", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x88a8),vlan(vid=10),"
                       "encap(eth_type(0x8100))"),
        "triple": ("p2", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x88a8),vlan(vid=10),"
                         "encap(eth_type(0x8100))"),
        "tpid9100": ("p3", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x9100)"),
        "cut_tag": ("p3", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=0,cfi=0),"
                          "encap()"),
        "cut_inner": ("p2", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=10),"
                            "encap(eth_type(0x8100))")},
    2: {"untagged": ("p3", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no)"),
        "one": ("p1", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=10),"
                      "encap(eth_type(0x0800),ipv4(frag=no))"),
        "double": ("p1", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=10),"
                         "encap(eth_type(0x8100),encap(eth_type(0x0800),ipv4(frag=no)))"),
        "qinq": ("p1", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x88a8),vlan(vid=10),"
                       "encap(eth_type(0x8100),encap(eth_type(0x0800),ipv4(frag=no)))"),
        "triple": ("p2", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x88a8),vlan(vid=10),"
                         "encap(eth_type(0x8100),encap(eth_type(0x8100)))"),
        "tpid9100": ("p3", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x9100)"),
        "cut_tag": ("p3", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=0,cfi=0),"
                          "encap()"),
        "cut_inner": ("p2", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=10),"
                            "encap(eth_type(0x8100),encap())")},
}
OVS_RULES[0] = OVS_RULES[2]

# INNER: (port, whether the outer tag was popped, megaflow) per limit.
OVS_INNER = {
    1: {k: ("p2", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(%s),vlan(vid=10,pcp=0),"
                  "encap(eth_type(0x8100)),actions:pop_vlan,3" % t)
        for k, t in (("double", "0x8100"), ("qinq", "0x88a8"))},
    2: {k: ("p1", "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(%s),vlan(vid=10,pcp=0),"
                  "encap(eth_type(0x8100),vlan(vid=20,pcp=0),encap(eth_type(0x0800),ipv4(frag=no)))"
                  ",actions:pop_vlan,2" % t)
        for k, t in (("double", "0x8100"), ("qinq", "0x88a8"))},
}


def comparable(match):
    """Open vSwitch's text and keel's without what the two print differently
    whatever the VLANs (packet_type: keel's packets are all Ethernet; keel's
    eth())."""
    return match.replace("packet_type(ns=0,id=0),", "").replace("eth(),", "")


def run(setup, frames, script="", ports=("p0", "p1", "p2", "p3")):
    """Boots keel with `frames` into p0 and the other ports writing pcaps;
    returns (proc, {port: frames out})."""
    d = tmpdir()
    inp = os.path.join(d, "in.pcap")
    write_pcap(inp, frames)
    args = ["--port", "p0=pcap:in=" + inp]
    outs = {}
    for p in ports[1:]:
        outs[p] = os.path.join(d, p + ".pcap")
        args += ["--port", "%s=pcap:out=%s" % (p, outs[p])]
    cfg = os.path.join(d, "keel.conf")
    with open(cfg, "w") as f:
        f.write(setup)
    proc = run_keel("--config", cfg, *args, "--exit-when-drained", stdin=script)
    return proc, {p: read_pcap(path) if os.path.exists(path) else [] for p, path in outs.items()}


def pmd_counters(proc):
    pmds = [j for j in json_lines(proc.stdout) if "pmds" in j][-1]["pmds"]
    return {k: sum(p[k] for p in pmds) for k in ("malformed", "runts", "packets_received")}


def flow_matches(proc):
    flows = [j for j in json_lines(proc.stdout) if "flows" in j][-1]["flows"]
    return sorted(comparable(f["match"] + ",actions:" + f["actions"]) for f in flows)


def pop_outer(f):
    return f[:12] + f[16:]


def test_vlan_limit_forwarding_and_megaflows():
    """Each kind of frame, alone in its run (one megaflow each), under
    the default, 1, 2 and 0: the port Open vSwitch sends it to, byte for
    byte, and the megaflow it prints."""
    for limit in (None, 1, 2, 0):
        want = OVS_RULES[1 if limit is None else limit]
        setup = RULES + ("" if limit is None else "set vlan-limit %d\n" % limit)
        for kind, frame in frames_by_kind().items():
            port, megaflow = want[kind]
            what = "vlan-limit %s, %s" % (limit, kind)
            proc, out = run(setup, [frame], "flow-dump --format json\n")
            check(proc.returncode == 0, what + ": exit 0", proc)
            for p in ("p1", "p2", "p3"):
                check(out[p] == ([frame] if p == port else []), "%s: out of %s only" % (what, port), proc)
            actions = {"p1": "2", "p2": "3", "p3": "4"}[port]
            check(flow_matches(proc) == [comparable(megaflow) + ",actions:" + actions],
                  "%s: megaflow as Open vSwitch's %r" % (what, megaflow), proc)


def test_flow_dump_text_finds_the_flow():
    """Open vSwitch's text of each megaflow (as flow-dump prints it) finds
    that flow: dp-flow get shows it, dp-flow del removes it."""
    for limit in (1, 2):
        for kind, frame in frames_by_kind().items():
            text = OVS_RULES[limit][kind][1].replace("packet_type(ns=0,id=0),", "")
            what = "vlan-limit %d, %s" % (limit, kind)
            proc, _ = run(RULES + "set vlan-limit %d\n" % limit, [frame],
                          "dp-flow get %s\ndp-flow del %s\nflow-dump --format json\n" % (text, text))
            check(proc.returncode == 0, what + ": get and del by the text succeed", proc)
            check(proc.stdout.count("ufid:") == 1, what + ": dp-flow get shows the flow", proc)
            check(flow_matches(proc) == [], what + ": deleted", proc)


def test_inner_tag_rules_per_vlan_limit():
    """pop_vlan + resubmit to a rule on dl_vlan=20: under limit 1 the inner
    tag is not parsed (the popped flow has no tag: the table-1 default),
    under 2 it is (dl_vlan=20 matches). The popped frames are byte for byte
    the frame without its outer tag, as Open vSwitch's."""
    for limit in (1, 2):
        for kind in ("double", "qinq"):
            frame = frames_by_kind()[kind]
            port, megaflow = OVS_INNER[limit][kind]
            proc, out = run(INNER + "set vlan-limit %d\n" % limit, [frame], "flow-dump --format json\n")
            what = "vlan-limit %d, %s" % (limit, kind)
            check(proc.returncode == 0, what + ": exit 0", proc)
            for p in ("p1", "p2", "p3"):
                check(out[p] == ([pop_outer(frame)] if p == port else []), "%s: popped, out of %s" % (what, port),
                      proc)
            check(flow_matches(proc) == [comparable(megaflow)], "%s: megaflow %r" % (what, megaflow), proc)


def test_one_pcap_every_kind():
    """All kinds together in one pcap, twice each (the second of a kind hits
    the megaflow the first set up): per limit, each port gets exactly its
    frames."""
    for limit in (1, 2):
        kinds = frames_by_kind()
        frames = list(kinds.values()) + list(frames_by_kind(100).values())
        proc, out = run(RULES + "set vlan-limit %d\n" % limit, frames)
        check(proc.returncode == 0, "exit 0", proc)
        for p in ("p1", "p2", "p3"):
            want = sorted(f for i, f in enumerate(frames) if OVS_RULES[limit][list(kinds)[i % len(kinds)]][0] == p)
            check(sorted(out[p]) == want, "vlan-limit %d: %s gets its %d frames" % (limit, p, len(want)), proc)


def test_runts_dropped_and_counted():
    """0-13-byte frames go nowhere and are counted (pmd-stats: malformed and
    runts), on the OpenFlow path and through a cross-connect; 14-59-byte
    frames are forwarded as they are (Open vSwitch keys and forwards them,
    unpadded)."""
    script = "pmd-stats-show --format json\npmd-stats-show --keel\n"
    proc, out = run(RULES, RUNTS + SHORT, script)
    check(proc.returncode == 0, "exit 0", proc)
    check(sorted(out["p3"]) == sorted(SHORT) and out["p1"] == [] and out["p2"] == [],
          "OpenFlow: only the 14-59-byte frames out (of p3, the catch-all)", proc)
    c = pmd_counters(proc)
    check(c["runts"] == len(RUNTS), "runts counted: %r" % c, proc)
    check(c["malformed"] >= len(RUNTS), "runts are malformed too: %r" % c, proc)
    check("keel: of which runts dropped (< 14 bytes): %d" % len(RUNTS) in proc.stdout, "pmd-stats-show --keel text",
          proc)

    # No bridge: a cross-connect p0 -> p1 (no parse, no lookup).
    proc, out = run("xconnect p0 p1\n", RUNTS + SHORT, script, ports=("p0", "p1"))
    check(proc.returncode == 0, "exit 0", proc)
    check(out["p1"] == SHORT, "cross-connect: the 14-59-byte frames, in order, nothing shorter", proc)
    c = pmd_counters(proc)
    check(c["runts"] == len(RUNTS) and c["malformed"] == len(RUNTS), "cross-connect: runts counted: %r" % c, proc)


# ofproto/trace of these packets by Open vSwitch 3.1 (catch-all rule
# actions=output:4): the Flow and Megaflow lines, per vlan-limit.
OVS_TRACE = {
    1: {"cut_tag": ("in_port=1,vlan_tci=0x0000,dl_src=02:00:00:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff,dl_type=0x8100",
                    "recirc_id=0,eth,in_port=1,dl_type=0x8100"),
        "double": ("in_port=1,dl_vlan=10,dl_vlan_pcp=0,vlan_tci1=0x0000,dl_src=02:00:00:00:00:01,"
                   "dl_dst=ff:ff:ff:ff:ff:ff,dl_type=0x8100", "recirc_id=0,eth,in_port=1,dl_type=0x8100"),
        "cut_inner": ("in_port=1,dl_vlan=10,dl_vlan_pcp=0,vlan_tci1=0x0000,dl_src=02:00:00:00:00:01,"
                      "dl_dst=ff:ff:ff:ff:ff:ff,dl_type=0x8100", "recirc_id=0,eth,in_port=1,dl_type=0x8100")},
    2: {"cut_tag": ("in_port=1,vlan_tci=0x0000,dl_src=02:00:00:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff,dl_type=0x8100",
                    "recirc_id=0,eth,in_port=1,dl_type=0x8100"),
        "double": ("udp,in_port=1,dl_vlan=10,dl_vlan_pcp=0,dl_vlan1=20,dl_vlan_pcp1=0,dl_src=02:00:00:00:00:01,"
                   "dl_dst=ff:ff:ff:ff:ff:ff,nw_src=192.168.0.1,nw_dst=192.168.0.2,nw_tos=0,nw_ecn=0,nw_ttl=64,"
                   "nw_frag=no,tp_src=53,tp_dst=53", "recirc_id=0,eth,ip,in_port=1,nw_frag=no"),
        "cut_inner": ("in_port=1,dl_vlan=10,dl_vlan_pcp=0,vlan_tci1=0x0000,dl_src=02:00:00:00:00:01,"
                      "dl_dst=ff:ff:ff:ff:ff:ff,dl_type=0x8100", "recirc_id=0,eth,in_port=1,dl_type=0x8100")},
}


def test_trace_per_vlan_limit():
    """trace --packet parses under the datapath's vlan-limit; a frame with a
    tag cut short is traced by its partial key (as the datapath forwards it
    and as ofproto/trace does), not refused."""
    for limit, want in OVS_TRACE.items():
        script = "".join("trace br0 in_port=1 --packet %s\n" % frames_by_kind(0)[k].hex() for k in want)
        proc, _ = run(BRIDGE + "add-flow br0 priority=10,actions=output:4\nset vlan-limit %d\n" % limit, [],
                      script)
        check(proc.returncode == 0, "vlan-limit %d: trace exit 0" % limit, proc)
        flows = [l[len("Flow: "):] for l in proc.stdout.splitlines() if l.startswith("Flow: ")]
        megaflows = [l[len("Megaflow: "):] for l in proc.stdout.splitlines() if l.startswith("Megaflow: ")]
        check(flows == [f for f, _ in want.values()], "vlan-limit %d: Flow lines as OVS's" % limit, proc)
        check(megaflows == [m for _, m in want.values()], "vlan-limit %d: Megaflow lines as OVS's" % limit, proc)
        check(proc.stdout.count("Datapath actions: 4") == len(want), "vlan-limit %d: output 4" % limit, proc)


def test_config_and_errors():
    proc, _ = run("set vlan-limit 2\n", [], "show running-config\nset vlan-limit 1\nshow running-config\n",
                  ports=("p0", "p1"))
    check(proc.returncode == 0, "exit 0", proc)
    blocks = proc.stdout.split("! keel")
    check(len(blocks) == 3 and "set vlan-limit 2" in blocks[1] and "vlan-limit" not in blocks[2],
          "running-config has set vlan-limit 2, then nothing at the default", proc)
    for bad in ("3", "-1", "two", ""):
        proc, _ = run("", [], "set vlan-limit %s\nshow running-config\n" % bad, ports=("p0", "p1"))
        check(proc.returncode != 0 and "error: set" in proc.stderr and "vlan-limit" not in proc.stdout,
              "set vlan-limit %r refused, nothing changed" % bad, proc)


if __name__ == "__main__":
    main([test_vlan_limit_forwarding_and_megaflows, test_flow_dump_text_finds_the_flow, test_inner_tag_rules_per_vlan_limit, test_one_pcap_every_kind,
          test_runts_dropped_and_counted, test_trace_per_vlan_limit, test_config_and_errors])

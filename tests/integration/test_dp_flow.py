"""Datapath flows installed with `dp-flow add` on host-sim: pcap in, pcap
out, compared byte for byte with frames the test computes itself (VLAN
push/pop, IPv4 rewrites with correct IP and UDP checksums), `flow-dump`
statistics, and bad flows refused with nothing installed."""
import os
import re
import struct

from harness import check, csum, json_lines, main, read_pcap, run_keel, tmpdir, write_pcap


def udp_frame(i, src=(10, 0, 0, 1), ttl=64, vlan=None, size=80):
    """Ethernet/IPv4/UDP with a valid IPv4 and UDP checksum."""
    payload = bytes((i * 7 + k) & 0xff for k in range(size - 42))
    sport, dport = 1000 + i, 2000
    ulen = 8 + len(payload)
    ip_src, ip_dst = bytes(src), bytes([10, 0, 1, i & 0xff])
    pseudo = ip_src + ip_dst + struct.pack("!BBH", 0, 17, ulen)
    udp = struct.pack("!HHHH", sport, dport, ulen, 0) + payload
    uc = csum(pseudo + udp) or 0xffff
    udp = udp[:6] + struct.pack("!H", uc) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, i, 0, ttl, 17, 0, ip_src, ip_dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    eth = bytes.fromhex("020000000002020000000001")
    if vlan is not None:
        eth += struct.pack("!HH", 0x8100, vlan)
    return eth + b"\x08\x00" + ip + udp


def run_flows(flows, frames, stdin="flow-dump\npmd-stats-show --format json\n"):
    d = tmpdir()
    inp, outp, cfg = (os.path.join(d, x) for x in ("in.pcap", "out.pcap", "keel.conf"))
    write_pcap(inp, frames)
    with open(cfg, "w") as f:
        f.write("\n".join("dp-flow add " + fl for fl in flows) + "\n")
    p = run_keel("--config", cfg, "--port", "p0=pcap:in=" + inp, "--port", "p1=pcap:out=" + outp,
                 "--exit-when-drained", stdin=stdin)
    return p, (read_pcap(outp) if os.path.exists(outp) else None)


def test_forward_by_megaflow_with_stats():
    frames = [udp_frame(i) for i in range(50)]
    p, out = run_flows(["recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no) actions:2"], frames)
    check(p.returncode == 0, "exit 0", p)
    check(out == frames, "frames forwarded byte for byte", p)
    line = [l for l in p.stdout.splitlines() if l.startswith("recirc_id(0)")]
    check(len(line) == 1, "one flow dumped", p)
    check("packets:50, bytes:%d" % sum(map(len, frames)) in line[0] and line[0].endswith("actions:2"),
          "flow statistics", p)
    pmd = json_lines(p.stdout)[0]["pmds"][0]
    # The flow matches only in_port/eth_type/frag: the simple-match path serves it.
    check(pmd["packets_received"] == 50 and pmd["simple_match_hits"] == 50, "simple match hits", p)


def test_simple_match_keeps_order_and_falls_back():
    """A port whose flows all match only what a packet's first bytes say is
    served without a full parse; frames the quick look can't key (two VLAN
    tags, 802.3) take the full path to the same megaflow, in order."""
    qinq = lambda f: f[:12] + bytes.fromhex("88a8000a81000014") + f[12:]
    llc = lambda i: bytes.fromhex("020000000002020000000001") + struct.pack("!H", 46) + bytes([i]) * 46
    frames = []
    for i in range(60):
        frames.append(udp_frame(i) if i % 3 == 0 else qinq(udp_frame(i)) if i % 3 == 1 else llc(i))
    p, out = run_flows(["recirc_id(0),in_port(1) actions:2"], frames)
    check(p.returncode == 0, "exit 0", p)
    check(out == frames, "every frame forwarded, in order", p)
    pmd = json_lines(p.stdout)[0]["pmds"][0]
    check(pmd["simple_match_hits"] == 20, "20 untagged IPv4 frames by simple match", p)
    check(pmd["emc_hits"] + pmd["megaflow_hits"] == 40, "40 by the full path", p)
    # One flow that needs more than the first bytes: the port leaves the simple path.
    p, out = run_flows(["recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no) actions:2",
                        "recirc_id(0),in_port(1),eth_type(0x0800),ipv4(dst=10.0.1.0/24,frag=no) actions:2"],
                       [udp_frame(i) for i in range(5)])
    check(p.returncode == 0, "exit 0", p)
    pmd = json_lines(p.stdout)[0]["pmds"][0]
    check(pmd["simple_match_hits"] == 0 and pmd["emc_hits"] + pmd["megaflow_hits"] == 5, "full path", p)


def test_push_and_pop_vlan():
    plain = [udp_frame(i) for i in range(20)]
    tagged = [udp_frame(i, vlan=(3 << 13) | 10) for i in range(20)]
    p, out = run_flows(["in_port(1),eth_type(0x0800),ipv4(frag=no) actions:push_vlan(vid=10,pcp=3),2"], plain)
    check(p.returncode == 0, "exit 0", p)
    check(out == tagged, "push_vlan inserts 8100 + TCI after the MACs", p)
    p, out = run_flows(["in_port(1),eth_type(0x8100),vlan(vid=10,pcp=3),encap(eth_type(0x0800)) actions:pop_vlan,2"],
                       tagged)
    check(p.returncode == 0, "exit 0", p)
    check(out == plain, "pop_vlan restores the frames byte for byte", p)


def test_set_ipv4_updates_checksums():
    frames = [udp_frame(i) for i in range(20)]
    expect = [udp_frame(i, src=(10, 9, 9, 9), ttl=9) for i in range(20)]
    p, out = run_flows(["in_port(1),eth_type(0x0800),ipv4(frag=no) actions:set(ipv4(src=10.9.9.9,ttl=9)),2"],
                       frames)
    check(p.returncode == 0, "exit 0", p)
    check(out == expect, "rewritten frames with correct IPv4 and UDP checksums", p)


def test_two_flows_two_masks():
    frames = [udp_frame(i) for i in range(40)]
    flows = ["in_port(1),eth_type(0x0800),ipv4(dst=10.0.1.0/255.255.255.128,frag=no) actions:2",
             "in_port(1),eth_type(0x0800),ipv4(dst=10.0.1.0/255.255.255.0,proto=17,frag=no),udp(dst=2000) actions:drop"]
    p, out = run_flows(flows, frames, stdin="dpcls-show --format json\nflow-dump\n")
    check(p.returncode == 0, "exit 0", p)
    # 10.0.1.0-127 match the /25 flow; both overlap for those, megaflows don't
    # overlap in practice: here every packet's dst is < .128, so the first wins.
    check(len(out) == 40, "forwarded by the /25 flow", p)
    cls = json_lines(p.stdout)[0]["classifiers"][0]
    check(len(cls["subtables"]) == 2, "two subtables", p)
    check(all(s["lookup"].startswith("specialized") for s in cls["subtables"]), "specialized lookups", p)


def test_bad_flows_are_refused_and_nothing_installed():
    frames = [udp_frame(0)]
    for bad, needle in [("in_port(1),eth_type(0x0800) actions:7", "no such port"),
                        ("in_port(9),eth_type(0x0800) actions:2", "in_port(9)"),
                        ("eth_type(0x0800) actions:2", "in_port"),
                        ("in_port(1),eth_typ(0x0800) actions:2", "eth_typ"),
                        ("in_port(1),eth_type(0x0800) actions:push_vlan(vid=5000),2", "5000"),
                        ("in_port(1),eth_type(0x0800)", "actions")]:
        p = run_keel("--port", "p0=null", "--port", "p1=null",
                     stdin="dp-flow add %s\nflow-dump --format json\n" % bad)
        check(p.returncode == 1, "exit 1 for %r" % bad, p)
        check(needle in p.stderr, "error for %r names %r" % (bad, needle), p)
        check(json_lines(p.stdout)[0]["flows"] == [], "nothing installed for %r" % bad, p)
    # The same flow twice: the second is refused.
    flow = "in_port(1),eth_type(0x0800) actions:2"
    p = run_keel("--port", "p0=null", "--port", "p1=null",
                 stdin="dp-flow add %s\ndp-flow add %s\nflow-dump --format json\n" % (flow, flow))
    check(p.returncode == 1 and "exists" in p.stderr, "duplicate refused", p)
    check(len(json_lines(p.stdout)[0]["flows"]) == 1, "one flow", p)


def test_mod_and_del():
    flow = "in_port(1),eth_type(0x0800)"
    p = run_keel("--port", "p0=null", "--port", "p1=null", "--port", "p2=null",
                 stdin=("dp-flow add {0} actions:2\ndp-flow mod {0} actions:3\nflow-dump\n"
                        "dp-flow del {0}\nflow-dump --format json\ndp-flow del {0}\n").format(flow))
    check("actions:3" in p.stdout, "mod replaced the actions", p)
    check(json_lines(p.stdout)[-1]["flows"] == [], "deleted", p)
    check(p.returncode == 1 and "no such flow" in p.stderr, "second delete: no such flow", p)


def test_flow_dump_shows_the_key_as_written():
    """A dp-flow add flow shows its key's values as written, bits outside
    the mask too (Open vSwitch's dpctl/add-flow keeps the key apart from the
    mask: `src=10.0.0.1/255.0.0.0`, and with -m `dst=10.1.2.3/0.0.0.0`,
    `udp(src=5/0,dst=53)`), under a header per PMD."""
    key = ("recirc_id(0),in_port(1),eth_type(0x0800),ipv4(src=10.0.0.1/255.0.0.0,dst=10.1.2.3/0.0.0.0,proto=17,"
           "frag=no),udp(src=5/0,dst=53)")
    p = run_keel("--port", "p0=null", "--port", "p1=null",
                 stdin="dp-flow add %s actions:2\nflow-dump\nflow-dump -m\n" % key)
    check(p.returncode == 0, "exit 0", p)
    lines = p.stdout.splitlines()
    # An unpinned PMD's header names the CPU its thread was last seen on,
    # which the scheduler may change between the two dumps.
    check(len(lines) == 4 and all(re.fullmatch(r"flow-dump from pmd on cpu core: \d+", lines[i]) for i in (0, 2)),
          "a header before each dump's flows", p)
    check(lines[1] == "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),"
          "ipv4(src=10.0.0.1/255.0.0.0,proto=17,frag=no),udp(dst=53), packets:0, bytes:0, used:never, actions:2",
          "flow-dump: the values as written", p)
    check("ipv4(src=10.0.0.1/255.0.0.0,dst=10.1.2.3/0.0.0.0,proto=17,tos=0/0,ttl=0/0,frag=no),"
          "udp(src=5/0,dst=53), packets:0" in lines[3] and "in_port(p0)" in lines[3] and
          re.search(r", dp:ovs, actions:p1, dp-extra-info:miniflow_bits\(\d+,\d+\)$", lines[3]),
          "flow-dump -m: the values as written, ports by name", p)


def test_flow_dump_m_lines_read_back():
    """A whole `flow-dump -m` line of a megaflow the upcall handler made
    (ufid, packet_type, ct_*(0/0), port names, the packet's values under
    zero masks, statistics, dp:ovs, actions by name, dp-extra-info) is a
    key `dp-flow add` reads into the same flow, and one `dp-flow get` and
    `dp-flow del` find."""
    d = tmpdir()
    inp, cfg = os.path.join(d, "in.pcap"), os.path.join(d, "keel.conf")
    write_pcap(inp, [udp_frame(i) for i in range(3)])
    with open(cfg, "w") as f:
        f.write("add-br br0\nadd-port br0 p0 ofport_request=1\nadd-port br0 p1 ofport_request=2\n"
                "add-flow br0 priority=10,ip,nw_dst=10.0.0.0/8,actions=output:2\n")
    p = run_keel("--config", cfg, "--config-dir", d, "--port", "p0=pcap:in=" + inp, "--port", "p1=null",
                 "--exit-when-drained", stdin="flow-dump\nflow-dump -m\n")
    check(p.returncode == 0, "exit 0", p)
    lines = p.stdout.splitlines()
    check(len(lines) == 4, "one flow, two dumps", p)
    plain, line = lines[1], lines[3]
    check("in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(dst=10.0.1.0/255.0.0.0,frag=no), "
          "packets:2, bytes:%d," % (2 * len(udp_frame(0))) in plain,
          "the first packet's nw_dst under the /8; its own packet not counted on the flow", p)
    check("ct_state(0/0),ct_zone(0/0),ct_mark(0/0),ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(p0),"
          "packet_type(ns=0,id=0),eth(src=02:00:00:00:00:01/00:00:00:00:00:00," in line and
          "udp(src=1000/0,dst=2000/0), packets:2" in line and ", dp:ovs, actions:p1, dp-extra-info:" in line,
          "-m: names, ct_*, values under zero masks, the L4 attribute, dp:ovs", p)
    ufid = line.split(",")[0]
    q = run_keel("--port", "p0=null", "--port", "p1=null",
                 stdin="dp-flow add %s\nflow-dump -m\ndp-flow get %s\ndp-flow del %s\nflow-dump\n" %
                 (line, line, line))
    check(q.returncode == 0, "add, get and del take the whole line", q)
    out = q.stdout.splitlines()
    # State aside: statistics, and the lookup shape (keel's: the flow's
    # subtable mask, which an upcall's megaflow may widen to whole words).
    strip = lambda l: re.sub(r"(used:\S+|miniflow_bits\(\d+,\d+\))", "S", re.sub(r"packets:\d+, bytes:\d+", "P", l))
    check(len(out) == 3 and strip(out[1]) == strip(line) and strip(out[2]) == strip(line),
          "the same line back (its ufid, key as written, actions), from flow-dump -m and dp-flow get", q)
    check(out[1].startswith(ufid + ", "), "dp-flow add kept the ufid", q)


if __name__ == "__main__":
    main([test_forward_by_megaflow_with_stats, test_simple_match_keeps_order_and_falls_back,
          test_push_and_pop_vlan, test_set_ipv4_updates_checksums,
          test_two_flows_two_masks, test_bad_flows_are_refused_and_nothing_installed, test_mod_and_del,
          test_flow_dump_shows_the_key_as_written, test_flow_dump_m_lines_read_back])

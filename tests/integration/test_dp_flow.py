"""Datapath flows installed with `dp-flow add` on host-sim: pcap in, pcap
out, compared byte for byte with frames the test computes itself (VLAN
push/pop, IPv4 rewrites with correct IP and UDP checksums), `flow-dump`
statistics, and bad flows refused with nothing installed."""
import os
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


if __name__ == "__main__":
    main([test_forward_by_megaflow_with_stats, test_simple_match_keeps_order_and_falls_back,
          test_push_and_pop_vlan, test_set_ipv4_updates_checksums,
          test_two_flows_two_masks, test_bad_flows_are_refused_and_nothing_installed, test_mod_and_del])

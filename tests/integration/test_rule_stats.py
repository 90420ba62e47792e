"""Rule statistics after an offline run: `dump-flows` counts every packet
the run forwarded, as Open vSwitch's `ovs-ofctl dump-flows` does after the
same frames. Open vSwitch credits the rules a packet went through when its
upcall is translated (so the packet that installed a megaflow counts at
once), the megaflow's later packets when the revalidator pushes the
datapath's statistics; an offline run pushes them (one revalidation round)
after its inputs drained, before it runs the commands on stdin. Also the
packets the slow path executes without installing a flow (at the flow
limit: the followers of a miss too), with megaflows off, and no double
count when a later round pushes again. (tests/conformance/parse_ofp holds
the same counters against the live Open vSwitch.)"""
import os
import re

from harness import PATIENCE, check, json_lines, main, read_pcap, run_keel, tmpdir, udp_frame, write_pcap_ts


def frame(dst_last, size, sport=1):
    """UDP 10.0.0.1 -> 10.0.<dst_last>... of `size` bytes; distinct flows by
    destination address or source port."""
    f = bytearray(udp_frame(dst_last, size))
    f[34:36] = sport.to_bytes(2, "big")
    return bytes(f)


def run(rules, frames, extra_config=(), script="dump-flows br0\ndump-flows br0 --format json\n"):
    d = tmpdir()
    inp = os.path.join(d, "in.pcap")
    write_pcap_ts(inp, [(i, f) for i, f in enumerate(frames)])
    cfg = os.path.join(d, "k.conf")
    with open(cfg, "w") as f:
        f.write("add-br br0\nadd-port br0 p1 ofport_request=1\nadd-port br0 p2 ofport_request=2\n"
                "add-port br0 p3 ofport_request=3\n")
        for line in extra_config:
            f.write(line + "\n")
        for r in rules:
            f.write("add-flow br0 %s\n" % r)
    outs = [os.path.join(d, "o%d.pcap" % i) for i in (1, 2, 3)]
    p = run_keel("--config", cfg, "--config-dir", d, "--port", "p1=pcap:in=%s,out=%s" % (inp, outs[0]),
                 "--port", "p2=pcap:out=" + outs[1], "--port", "p3=pcap:out=" + outs[2], "--exit-when-drained",
                 stdin=script, timeout=PATIENCE)
    check(p.returncode == 0, "offline run", p)
    got = [read_pcap(o) if os.path.exists(o) else [] for o in outs]
    return p, got


def counters(p):
    """{(table, priority, match): (n_packets, n_bytes)} from dump-flows' JSON."""
    return {(r["table"], r["priority"], r["match"]): (r["n_packets"], r["n_bytes"])
            for r in json_lines(p.stdout)[-1]["flows"]}


def test_counts_equal_the_packets_sent():
    rules = ["priority=10,ip,nw_dst=10.0.0.0/24,actions=output:2",
             "priority=5,ip,actions=resubmit(,1)",
             "table=1,priority=5,udp,tp_src=7,actions=output:3",
             "table=1,priority=1,actions=drop",
             "priority=20,arp,actions=NORMAL"]  # nothing hits it
    # 3 frames of one flow to p2 (one upcall, two megaflow hits), 2 + 2 of
    # two flows through table 1 (to p3 and dropped), sizes all different.
    frames = [frame(1, 60), frame(1, 100), frame(1, 70),
              frame(0x0201, 80, sport=7), frame(0x0201, 90, sport=7),
              frame(0x0302, 64), frame(0x0302, 66)]
    p, got = run(rules, frames)
    c = counters(p)
    to_p2 = sum(len(f) for f in frames[:3])
    to_p3 = sum(len(f) for f in frames[3:5])
    dropped = sum(len(f) for f in frames[5:])
    check(len(got[1]) == 3 and sum(map(len, got[1])) == to_p2, "p2 got the first flow", p)
    check(len(got[2]) == 2 and sum(map(len, got[2])) == to_p3, "p3 got the tp_src=7 flow", p)
    want = {(0, 10, "ip,nw_dst=10.0.0.0/24"): (3, to_p2),
            (0, 5, "ip"): (4, to_p3 + dropped),
            (1, 5, "udp,tp_src=7"): (2, to_p3),
            (1, 1, ""): (2, dropped),
            (0, 20, "arp"): (0, 0)}
    check(c == want, "rule counters %s, want %s" % (c, want), p)
    # The text has the same numbers, after ovs-ofctl's reply line.
    text = p.stdout.split("{", 1)[0]
    check(text.startswith("NXST_FLOW reply (xid=0x4):\n"), "reply line", p)
    check(re.search(r"table=0, n_packets=3, n_bytes=%d, idle_age=\d+, priority=10,ip,nw_dst=10.0.0.0/24 "
                    r"actions=output:2\n" % to_p2, text), "text counters", p)


def test_no_double_count_on_later_rounds():
    frames = [frame(1, 60 + i) for i in range(5)]
    p, _ = run(["priority=10,ip,actions=output:2"], frames,
               script="revalidate\nrevalidate\ndump-flows br0 --format json\n")
    want = (5, sum(map(len, frames)))
    check(counters(p) == {(0, 10, "ip"): want}, "after two more rounds: %s, want %s" % (counters(p), want), p)


def test_slow_path_packets_count_at_the_flow_limit():
    # Flow limit 1: the first flow gets the megaflow; the other flow's five
    # packets are each executed by the slow path (they ride one miss as its
    # followers), and every one of them counts.
    rules = ["priority=10,ip,nw_dst=10.0.0.1,actions=output:2", "priority=5,ip,actions=output:3"]
    frames = [frame(1, 60)] + [frame(2, 61 + i) for i in range(5)]
    p, got = run(rules, frames, extra_config=["set flow-limit 1"])
    c = counters(p)
    check(len(got[2]) == 5, "p3 got the five", p)
    want = {(0, 10, "ip,nw_dst=10.0.0.1"): (1, 60), (0, 5, "ip"): (5, sum(len(f) for f in frames[1:]))}
    check(c == want, "at the flow limit: %s, want %s" % (c, want), p)


def test_megaflows_off():
    rules = ["priority=10,ip,actions=output:2"]
    frames = [frame(1, 60), frame(1, 61), frame(2, 62), frame(3, 63), frame(1, 64)]
    p, got = run(rules, frames, extra_config=["set megaflows-enable false"])
    check(len(got[1]) == 5, "forwarded", p)
    check(counters(p) == {(0, 10, "ip"): (5, sum(map(len, frames)))}, "megaflows off: %s" % counters(p), p)


if __name__ == "__main__":
    main([test_counts_equal_the_packets_sent, test_no_double_count_on_later_rounds,
          test_slow_path_packets_count_at_the_flow_limit, test_megaflows_off])

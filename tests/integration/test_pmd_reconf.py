"""PMDs and rx queues reconfigured (issue 13), on host-sim with 2 PMDs
(`set pmd-cpu-mask 0x3`) and a 4-queue input (`pcap:in=X,rxq=4`, live):

* every packet forwarded exactly once (counted by content: each frame
  carries its flow and sequence number), each flow's order kept, and both
  PMDs' pmd-rxq-show usage non-zero (the load interval clock is driven by
  the hidden `pmd-load-interval-close`, never by sleeping);
* pmd-rxq-show with pmd-rxq-affinity (an isolated PMD) and with a PMD that
  has no queue, as Open vSwitch 3.1 prints them (the goldens below were
  recorded from ovs-vswitchd 3.1 --enable-dummy=override with type=dummy-pmd
  ports p0 options:n_rxq=4 and p1, pmd-cpu-mask=0x3);
* pmd-cpu-mask 0x1 -> 0x3 -> 0x2 while traffic flows: every packet once,
  in flow order, and the removed PMD's megaflows gone from flow-dump;
* pmd-rxq-rebalance: roundrobin keeps rx queue order (queues 0 and 2 on
  one PMD), cycles spreads the two busy queues over both PMDs.
"""
import json
import os
import struct
import subprocess
import tempfile
from collections import Counter, defaultdict

from harness import ask_live, check, json_lines, keel_cmd, main, ports_by_name, read_pcap, run_keel, tmpdir, \
    wait_for, write_pcap

RSS_KEY = bytes([0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
                 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
                 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa])


def toeplitz(data):
    """The sim NIC's RSS hash (keel/hal/rss.h: the default 40-byte key)."""
    k = int.from_bytes(RSS_KEY, "big")
    kbits = len(RSS_KEY) * 8
    h = 0
    for i in range(len(data) * 8):
        if data[i // 8] & (0x80 >> (i % 8)):
            h ^= (k >> (kbits - 32 - i)) & 0xffffffff
    return h


def flow_addrs(flow):
    src = bytes([10, 1, (flow >> 8) & 0xff, flow & 0xff])
    dst = bytes([10, 2, 0, (flow * 7) & 0xff])
    return src, dst, 1024 + flow, 4000 + (flow % 13)


def rx_queue(flow, n_rxq=4):
    src, dst, sp, dp = flow_addrs(flow)
    return (toeplitz(src + dst + struct.pack("!HH", sp, dp)) % 128) % n_rxq


def flow_frame(flow, seq):
    """An Ethernet/IPv4/UDP frame of flow `flow` whose payload carries (flow, seq)."""
    src, dst, sp, dp = flow_addrs(flow)
    eth = bytes.fromhex("020000000002" "020000000001" "0800")
    payload = struct.pack("!II", flow, seq) + bytes(10)
    ip_len = 20 + 8 + len(payload)
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, seq & 0xffff, 0, 64, 17, 0, src, dst)
    s = sum((hdr[k] << 8) | hdr[k + 1] for k in range(0, 20, 2))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    hdr = hdr[:10] + struct.pack("!H", ~s & 0xffff) + hdr[12:]
    udp = struct.pack("!HHHH", sp, dp, 8 + len(payload), 0)
    return eth + hdr + udp + payload


def flow_seq(frame):
    return struct.unpack("!II", frame[42:50])


def check_once_in_order(sent, got, loops=1):
    """Every frame sent comes out `loops` times, nothing else, and per flow
    the sequence numbers come out as sent, loop after loop."""
    want = Counter(sent)
    have = Counter(got)
    missing = sum((want[f] * loops - have[f]) for f in want if have[f] < want[f] * loops)
    extra = sum(have[f] - want.get(f, 0) * loops for f in have if have[f] > want.get(f, 0) * loops)
    check(missing == 0 and extra == 0,
          "%d frames sent x %d loops, %d out: %d missing, %d extra (duplicated or foreign)" %
          (len(sent), loops, len(got), missing, extra))
    per_flow = defaultdict(list)
    for f in sent:
        fl, sq = flow_seq(f)
        per_flow[fl].append(sq)
    out = defaultdict(list)
    for f in got:
        fl, sq = flow_seq(f)
        out[fl].append(sq)
    for fl, seqs in per_flow.items():
        check(out[fl] == seqs * loops, "flow %d out of order: %r ..." % (fl, out[fl][:20]))


def write_cfg(d, text):
    cfg = os.path.join(d, "cfg")
    with open(cfg, "w") as f:
        f.write(text)
    return cfg


BRIDGE = "add-br br0\nadd-port br0 p0\nadd-port br0 p1\nadd-flow br0 in_port=1,actions=output:2\n"


def test_four_queues_two_pmds_every_packet_once_both_busy():
    """Must show: a 4-queue input spread over 2 PMDs forwards every packet
    once, in flow order, with both PMDs' pmd-rxq-show usage non-zero."""
    d = tmpdir()
    inp, outp = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    flows, per_flow = 256, 100
    sent = [flow_frame(f, s) for s in range(per_flow) for f in range(flows)]
    write_pcap(inp, sent)
    cfg = write_cfg(d, "set pmd-cpu-mask 0x3\n" + BRIDGE)
    # The load window: two closes after the replay drained, read over 10 s
    # (2 intervals: the one with the traffic and the short one between the
    # closes, whose length x 2 is the window): usage = the traffic's cycles
    # over twice the gap between the two closes, far above 1 %.
    # The ring port p2 keeps the run live (not offline) although the pcap
    # drains, so the PMDs poll their queues as on a NIC.
    p = run_keel("--config", cfg, "--config-dir", d, "--port", "p0=pcap:in=%s,rxq=4" % inp,
                 "--port", "p1=pcap:out=" + outp, "--port", "p2=ring", "--exit-when-drained",
                 stdin="pmd-load-interval-close\npmd-load-interval-close\n"
                       "pmd-rxq-show --secs 10 --format json\npmd-rxq-show --secs 10\nshow ports --format json\n")
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    js = json_lines(p.stdout)
    rxq, ports = js[0], ports_by_name(js[1])
    check(len(rxq["pmds"]) == 2, "two PMDs: %r" % rxq)
    for pmd in rxq["pmds"]:
        mine = [q for q in pmd["rx_queues"] if q["port"] == "p0"]
        check(mine, "PMD on core %d polls some of p0's queues: %r" % (pmd["core"], rxq))
        usage = sum(q.get("usage_pct", 0) for q in mine)
        check(usage > 0, "PMD on core %d: p0's queues' usage is %d %%:\n%s" % (pmd["core"], usage, p.stdout))
    polled = sorted(q["queue"] for pmd in rxq["pmds"] for q in pmd["rx_queues"] if q["port"] == "p0")
    check(polled == [0, 1, 2, 3], "each of p0's queues polled by one PMD: %r" % polled)
    # The text says the same: a usage figure on every PMD, not NOT AVAIL.
    blocks = p.stdout.split("pmd thread numa_id 0 core_id ")[1:]
    check(len(blocks) == 2 and all("port: p0" in b and "NOT AVAIL" not in b for b in blocks),
          "pmd-rxq-show text:\n" + p.stdout)
    check(ports["p0"]["rx"]["packets"] == len(sent), "p0 received %r" % ports["p0"]["rx"])
    check_once_in_order(sent, read_pcap(outp))


# Recorded from Open vSwitch 3.1 (see the top): p0 other_config:pmd-rxq-affinity="0:1,2:1".
GOLDEN_AFFINITY = """Displaying last 60 seconds pmd usage %
pmd thread numa_id 0 core_id 0:
  isolated : false
  port: p0                queue-id:  1 (enabled)   pmd usage: NOT AVAIL
  port: p0                queue-id:  3 (enabled)   pmd usage: NOT AVAIL
  port: p1                queue-id:  0 (enabled)   pmd usage: NOT AVAIL
  overhead: NOT AVAIL
pmd thread numa_id 0 core_id 1:
  isolated : true
  port: p0                queue-id:  0 (enabled)   pmd usage: NOT AVAIL
  port: p0                queue-id:  2 (enabled)   pmd usage: NOT AVAIL
  overhead: NOT AVAIL
"""
# p0 other_config:pmd-rxq-affinity="0:0,1:0,2:0,3:0", p1 "0:0": core 1 has no queue.
GOLDEN_EMPTY_PMD = """Displaying last 60 seconds pmd usage %
pmd thread numa_id 0 core_id 0:
  isolated : true
  port: p0                queue-id:  0 (enabled)   pmd usage: NOT AVAIL
  port: p0                queue-id:  1 (enabled)   pmd usage: NOT AVAIL
  port: p0                queue-id:  2 (enabled)   pmd usage: NOT AVAIL
  port: p0                queue-id:  3 (enabled)   pmd usage: NOT AVAIL
  port: p1                queue-id:  0 (enabled)   pmd usage: NOT AVAIL
  overhead: NOT AVAIL
pmd thread numa_id 0 core_id 1:
  isolated : false
"""


def test_rxq_show_golden_affinity_isolated_and_empty_pmd():
    d = tmpdir()
    cfg = write_cfg(d, "set pmd-cpu-mask 0x3\nadd-br br0\n"
                       "add-port br0 p0 -- set Interface p0 other_config:pmd-rxq-affinity=0:1,2:1\n"
                       "add-port br0 p1\n")
    p = run_keel("--config", cfg, "--config-dir", d, "--port", "p0=ring:rxq=4", "--port", "p1=ring",
                 "--exit-when-drained",
                 stdin="pmd-rxq-show\nshow running-config\n"
                       "set interface p0 other_config:pmd-rxq-affinity=0:0,1:0,2:0,3:0\n"
                       "set interface p1 other_config:pmd-rxq-affinity=0:0\npmd-rxq-show\n"
                       "set interface p0 other_config:pmd-rxq-affinity='\"\"'\n"
                       "set interface p1 other_config:pmd-rxq-affinity='\"\"'\n"
                       "pmd-rxq-show --format json\n"
                       "set interface p0 other_config:pmd-rxq-affinity=0:x\n")
    out = p.stdout
    first = out[:out.index("!") if "!" in out else len(out)]
    check(out.startswith(GOLDEN_AFFINITY), "pmd-rxq-show with affinity 0:1,2:1:\n" + out, p)
    check("other_config:pmd-rxq-affinity=0:1,2:1" in out,
          "the running config prints the affinity back on the add-port line:\n" + out)
    check(GOLDEN_EMPTY_PMD in out, "pmd-rxq-show with every queue on core 0:\n" + out, p)
    js = json_lines(out)[-1]
    check(not any(pmd["isolated"] for pmd in js["pmds"]), "affinity removed: nothing isolated: %r" % js)
    check("pmd-rxq-affinity" in p.stderr and p.returncode != 0, "a bad affinity is refused with a message", p)
    del first


def ask_json(p, err, cmd):
    return json.loads(ask_live(p, err, cmd + " --format json"))


def test_cpu_mask_changes_while_traffic_flows():
    """pmd-cpu-mask 0x1 -> 0x3 -> 0x2 during a replay: every packet once,
    in flow order; after 0x2 only core 1's PMD has megaflows."""
    d = tmpdir()
    inp, outp = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    flows, per_flow, loops = 128, 16, 150
    sent = [flow_frame(f, s) for s in range(per_flow) for f in range(flows)]
    write_pcap(inp, sent)
    cfg = write_cfg(d, "set pmd-cpu-mask 0x1\n" + BRIDGE)
    err = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(keel_cmd("--config", cfg, "--config-dir", d,
                                  "--port", "p0=pcap:in=%s,rxq=4,loop=%d" % (inp, loops),
                                  "--port", "p1=pcap:out=" + outp),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
    total = len(sent) * loops
    try:
        def rx():
            return ports_by_name(ask_json(p, err, "show ports"))["p0"]["rx"]["packets"]

        during = []
        for mask in ("0x3", "0x2"):
            during.append(rx())
            out = ask_live(p, err, "set pmd-cpu-mask " + mask)
            check("error" not in out, "set pmd-cpu-mask %s: %s" % (mask, out))
            pmds = ask_json(p, err, "pmd-rxq-show")["pmds"]
            check(len(pmds) == (2 if mask == "0x3" else 1), "PMDs after %s: %r" % (mask, pmds))
        during.append(rx())
        wait_for(lambda: rx() == total, "the replay to be read")
        wait_for(lambda: ports_by_name(ask_json(p, err, "show ports"))["p1"]["tx"]["packets"] >= total,
                 "every packet forwarded")
        dump = ask_json(p, err, "flow-dump")
        cores = {f["pmd_core"] for f in dump["flows"]}
        check(cores <= {1}, "after 0x2, only core 1's PMD has megaflows: %r" % cores)
        stats = ask_json(p, err, "pmd-stats-show")
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    check(p.returncode == 0, "keel exited %d" % p.returncode)
    if during[-1] >= total:
        print("note: the replay was read before the last mask change (%r of %d)" % (during, total))
    lost = sum(s.get("lost", 0) for s in stats["pmds"])
    check(lost == 0, "no miss lost: %r" % stats)
    check_once_in_order(sent, read_pcap(outp), loops)


def test_rebalance_roundrobin_vs_cycles():
    """Traffic on p0's queues 0 and 2 only: roundrobin puts them on one PMD
    (queue order), cycles (after the load was measured) on two."""
    d = tmpdir()
    inp, outp = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    q0 = [f for f in range(2000) if rx_queue(f) == 0][:64]
    q2 = [f for f in range(2000) if rx_queue(f) == 2][:32]  # lighter than queue 0: no tie
    sent = [flow_frame(f, s) for s in range(40) for f in q0 + q2]
    write_pcap(inp, sent)
    cfg = write_cfg(d, "set pmd-cpu-mask 0x3\nset pmd-rxq-assign roundrobin\nxconnect p0 p1\n")
    p = run_keel("--config", cfg, "--config-dir", d, "--port", "p0=pcap:in=%s,rxq=4" % inp,
                 "--port", "p1=pcap:out=" + outp, "--port", "p2=ring", "--exit-when-drained",
                 stdin="pmd-rxq-show --format json\npmd-load-interval-close\npmd-load-interval-close\n"
                       "pmd-rxq-rebalance\npmd-rxq-show --format json\n"
                       "set pmd-rxq-assign cycles\npmd-rxq-rebalance\npmd-rxq-show --format json\n"
                       "show running-config\n")
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    check(p.stdout.count("pmd rxq rebalance requested.\n") == 2, "OVS's reply to pmd-rxq-rebalance", p)
    js = json_lines(p.stdout)

    def where(rxq):
        return {q["queue"]: pmd["core"] for pmd in rxq["pmds"] for q in pmd["rx_queues"] if q["port"] == "p0"}

    rr, rr2, cyc = where(js[0]), where(js[1]), where(js[2])
    check(rr[0] == rr[2] and rr[1] == rr[3] and rr[0] != rr[1], "roundrobin alternates in queue order: %r" % rr)
    check(rr2 == rr, "roundrobin again: the same: %r vs %r" % (rr2, rr))
    check(cyc[0] != cyc[2], "cycles: the busy queues 0 and 2 on different PMDs: %r" % cyc, p)
    check("set pmd-rxq-assign" not in p.stdout.split("pmd-rxq-show")[-1],
          "cycles is the default: not in the running config")
    check_once_in_order(sent, read_pcap(outp))


def test_port_rx_queue_count_at_run_time():
    """options:n_rxq on add-port and `set interface` (Open vSwitch's
    options:n_rxq): the port restarts with that many queues, all polled,
    printed back in the running config; a bad count changes nothing.
    Needs the sim backend's apply_queue_count (ring ports)."""
    d = tmpdir()
    cfg = write_cfg(d, "set pmd-cpu-mask 0x3\nadd-br br0\n"
                       "add-port br0 p0 -- set Interface p0 options:n_rxq=2\nadd-port br0 p1\n")
    p = run_keel("--config", cfg, "--config-dir", d, "--port", "p0=ring", "--port", "p1=ring",
                 "--exit-when-drained",
                 stdin="show ports --format json\npmd-rxq-show --format json\n"
                       "set interface p0 options:n_rxq=3\nshow ports --format json\npmd-rxq-show --format json\n"
                       "show running-config\nset interface p0 options:n_rxq=0\nshow ports --format json\n")
    js = json_lines(p.stdout)
    check(len(js) == 5, "every command answered", p)

    def polled(rxq):
        return sorted(q["queue"] for pmd in rxq["pmds"] for q in pmd["rx_queues"] if q["port"] == "p0")

    check(ports_by_name(js[0])["p0"]["rx_queues"] == 2 and polled(js[1]) == [0, 1], "n_rxq=2 on add-port", p)
    check(ports_by_name(js[2])["p0"]["rx_queues"] == 3 and polled(js[3]) == [0, 1, 2], "n_rxq=3 at run time", p)
    check("options:n_rxq=3" in p.stdout, "the running config prints n_rxq", p)
    check(ports_by_name(js[4])["p0"]["rx_queues"] == 3, "n_rxq=0 refused, nothing changed", p)
    check("options:n_rxq=0" in p.stderr and p.returncode != 0, "n_rxq=0 refused with a message", p)


if __name__ == "__main__":
    main([test_four_queues_two_pmds_every_packet_once_both_busy,
          test_rxq_show_golden_affinity_isolated_and_empty_pmd,
          test_cpu_mask_changes_while_traffic_flows,
          test_rebalance_roundrobin_vs_cycles,
          test_port_rx_queue_count_at_run_time])

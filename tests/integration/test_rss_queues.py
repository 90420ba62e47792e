"""Multi-queue sim ports (`pcap:in=X,rxq=4`): the sim NIC spreads the
capture's flows over 4 rx queues by RSS (Toeplitz hash, 128-entry RETA),
`show ports` and `pmd-rxq-show` report the 4 queues, the one PMD polls them
all and forwards every packet exactly once with each flow's order kept; an
offline run reads the port as one queue in file order (byte-identical
output)."""
import os
import struct

from harness import (EMPTY_CONFIG, check, json_lines, main, ports_by_name, read_pcap, run_keel,
                     tmpdir, write_pcap)

FLOWS, PER_FLOW = 256, 8


def flow_frame(flow, seq):
    """An Ethernet/IPv4/UDP frame of flow `flow` (its own addresses and
    ports) whose payload carries (flow, seq)."""
    eth = bytes.fromhex("020000000002" "020000000001" "0800")
    payload = struct.pack("!II", flow, seq) + bytes(10)
    ip_len = 20 + 8 + len(payload)
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, seq, 0, 64, 17, 0,
                      bytes([10, 1, flow >> 8, flow & 0xff]), bytes([10, 2, 0, (flow * 7) & 0xff]))
    s = sum((hdr[k] << 8) | hdr[k + 1] for k in range(0, 20, 2))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    hdr = hdr[:10] + struct.pack("!H", ~s & 0xffff) + hdr[12:]
    udp = struct.pack("!HHHH", 1024 + flow, 4000 + (flow % 13), 8 + len(payload), 0)
    return eth + hdr + udp + payload


def frames():
    """PER_FLOW rounds over FLOWS flows, interleaved."""
    return [flow_frame(f, s) for s in range(PER_FLOW) for f in range(FLOWS)]


def flow_seq(frame):
    return struct.unpack("!II", frame[42:50])


def rxq_entries(rxq_json, port):
    return [q for pmd in rxq_json["pmds"] for q in pmd["rx_queues"] if q["port"] == port]


def test_four_queues_forward_every_packet_once_in_flow_order():
    """A live run (a ring port keeps it from being offline) with the 4
    queues of p0 cross-connected to p1: every packet comes out once, each
    flow's packets in their order."""
    d = tmpdir()
    inp, outp, cfg = (os.path.join(d, x) for x in ("in.pcap", "out.pcap", "cfg"))
    sent = frames()
    write_pcap(inp, sent)
    with open(cfg, "w") as f:
        f.write("xconnect p0 p1\n")
    p = run_keel("--config", cfg, "--port", "p0=pcap:in=%s,rxq=4" % inp, "--port", "p1=pcap:out=" + outp,
                 "--port", "p2=ring", "--exit-when-drained",
                 stdin="show ports --format json\npmd-rxq-show --format json\nupcall-show --format json\n")
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    js = json_lines(p.stdout)
    ports = ports_by_name(js[0])
    check(ports["p0"]["rx_queues"] == 4, "p0 has 4 rx queues: %r" % ports["p0"], p)
    check(ports["p1"]["rx_queues"] == 1 and ports["p2"]["rx_queues"] == 1, "others keep one", p)
    check("rxq=4" in ports["p0"]["spec"], "spec as written: %r" % ports["p0"]["spec"], p)
    queues = sorted(q["queue"] for q in rxq_entries(js[1], "p0"))
    check(queues == [0, 1, 2, 3], "pmd-rxq-show polls p0's queues 0-3: %r" % queues, p)
    check(not js[2]["offline"], "the run is live (a ring input)", p)
    check(ports["p0"]["rx"]["packets"] == len(sent), "p0 rx packets %d" % ports["p0"]["rx"]["packets"], p)
    out = read_pcap(outp)
    check(sorted(out) == sorted(sent), "%d frames out, each sent frame exactly once (%d sent)"
          % (len(out), len(sent)), p)
    next_seq = {}
    for fr in out:
        flow, seq = flow_seq(fr)
        check(next_seq.get(flow, 0) == seq, "flow %d: seq %d after %d" % (flow, seq, next_seq.get(flow, 0)))
        next_seq[flow] = seq + 1
    # The queues really interleave: the output is not the file's order.
    check(out != sent, "4 queues polled in turn reorder flows against each other", p)


def test_four_queues_through_the_bridge():
    """The same capture through the default bridge (br0, NORMAL), live: the
    packets carry the sim NIC's RSS hash into the classifier and the slow
    path, and every one is forwarded once, per-flow order kept."""
    d = tmpdir()
    inp, outp = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    sent = frames()
    write_pcap(inp, sent)
    p = run_keel("--port", "p0=pcap:in=%s,rxq=4" % inp, "--port", "p1=pcap:out=" + outp,
                 "--port", "p2=ring", "--exit-when-drained",
                 stdin="show ports --format json\npmd-stats-show --format json\n")
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    js = json_lines(p.stdout)
    pmd = js[1]["pmds"][0]
    check(pmd["lost"] == 0, "nothing lost: %r" % pmd, p)
    out = read_pcap(outp)
    check(sorted(out) == sorted(sent), "%d frames out, each sent frame exactly once (%d sent)"
          % (len(out), len(sent)), p)
    next_seq = {}
    for fr in out:
        flow, seq = flow_seq(fr)
        check(next_seq.get(flow, 0) == seq, "flow %d: seq %d after %d" % (flow, seq, next_seq.get(flow, 0)))
        next_seq[flow] = seq + 1
    check(pmd["packets_received"] == len(sent), "the PMD received every packet: %r" % pmd, p)


def test_offline_reads_the_queues_as_one_in_file_order():
    """--exit-when-drained with only pcap inputs (offline): the 4-queue port
    is read as one queue in file order, so the output is the input, frame
    for frame."""
    d = tmpdir()
    inp, outp = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    sent = frames()
    write_pcap(inp, sent)
    p = run_keel("--port", "p0=pcap:in=%s,rxq=4,loop=2" % inp, "--port", "p1=pcap:out=" + outp,
                 "--exit-when-drained",
                 stdin="show ports --format json\npmd-rxq-show --format json\nupcall-show --format json\n")
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    js = json_lines(p.stdout)
    check(js[2]["offline"], "offline run", p)
    check(ports_by_name(js[0])["p0"]["rx_queues"] == 4, "p0 still reports 4 rx queues", p)
    queues = [q["queue"] for q in rxq_entries(js[1], "p0")]
    check(queues == [0], "offline, only queue 0 is polled: %r" % queues, p)
    out = read_pcap(outp)
    check(out == sent * 2, "output = input twice, in order (%d frames out)" % len(out), p)


def test_bad_rxq_is_refused_at_boot():
    d = tmpdir()
    inp = os.path.join(d, "in.pcap")
    write_pcap(inp, frames()[:4])
    for spec, what in (("pcap:in=%s,rxq=17" % inp, "must be a number of rx queues from 1 to 16"),
                       ("ring:rxq=0", "must be a number of rx queues from 1 to 16"),
                       ("tap:kt0,rxq=2", "tap has one rx queue")):
        p = run_keel("--config", EMPTY_CONFIG, "--port", "p0=" + spec, "--exit-when-drained")
        check(p.returncode != 0, "%s refused" % spec, p)
        check(what in p.stderr, "%s: says %r" % (spec, what), p)


if __name__ == "__main__":
    main([test_four_queues_forward_every_packet_once_in_flow_order, test_four_queues_through_the_bridge,
          test_offline_reads_the_queues_as_one_in_file_order, test_bad_rxq_is_refused_at_boot])

"""Offline runs with several PMDs (`set pmd-cpu-mask 0x3`, issue 13 item 6).

keel --exit-when-drained with every input a finite pcap replay stays
lossless (backpressure, never a drop) with 2 PMDs:

* a multi-queue replay (`pcap:in=X,rxq=2`) is read by both PMDs, queue q
  by PMD q % 2, each with the offline discipline over its own queues:
  flow-setup's shape (new UDP 5-tuples, one pass, megaflows off, rule
  in_port=1,actions=output:2) plus long flows spread over the file: 0 lost,
  every packet out exactly once, each flow's packets in file order, both
  PMDs received packets. The CI size is 100k new 5-tuples; the full 1M is
  KEEL_OFFLINE_FLOWS=1000000 by hand (figures: tests/bench/RESULTS.md);
* single-queue inputs keep one reader (PMD 0) and the exact timestamp
  order, with 2 PMDs as with one;
* NORMAL with MAC learning over two 2-queue inputs and 2 PMDs: lossless,
  every packet out once on the other port, each flow in order;
* a multi-queue replay with one PMD is still merged into file order."""
import collections
import os
import struct

from harness import check, csum, json_lines, main, read_pcap, run_keel, tmpdir, write_pcap_ts

N_FLOWS = int(os.environ.get("KEEL_OFFLINE_FLOWS", "100000"))
LONG_FLOWS = 500   # flows with LONG_LEN packets each, spread over the whole file
LONG_LEN = 8


def frame(flow, seq):
    """Ethernet/IPv4/UDP of 5-tuple `flow` (distinct per flow), with (flow,
    seq) in the payload. UDP checksum 0 (none), as gen_traffic's."""
    sip = struct.pack("!I", (10 << 24) | (flow >> 16))
    dip = struct.pack("!I", (11 << 24) | (flow & 0xffff))
    sport, dport = 1024 + (flow % 50000), 4000 + (flow // 50000) % 1000
    payload = struct.pack("!II", flow, seq) + bytes(10)
    ulen = 8 + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, seq & 0xffff, 0, 64, 17, 0, sip, dip)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return (b"\x02\x00\x00\x00\x00\x02" b"\x02\x00\x00\x00\x00\x01" b"\x08\x00" + ip +
            struct.pack("!HHHH", sport, dport, ulen, 0) + payload)


def flow_seq(fr):
    return struct.unpack_from("!II", fr, 14 + 20 + 8)


def traffic(n_new):
    """n_new one-packet flows, with LONG_FLOWS flows of LONG_LEN packets
    each interleaved at regular intervals over the whole pass."""
    out = []
    long_every = max(1, n_new // (LONG_FLOWS * LONG_LEN))
    long_next = [0] * LONG_FLOWS
    k = 0
    for i in range(n_new):
        out.append(frame(LONG_FLOWS + i, 0))
        if i % long_every == 0 and k < LONG_FLOWS * LONG_LEN:
            f = k % LONG_FLOWS
            out.append(frame(f, long_next[f]))
            long_next[f] += 1
            k += 1
    return out


SETUP = ("add-br br0\nadd-port br0 p1\nadd-port br0 p2\nadd-flow br0 in_port=1,actions=output:2\n"
         "set megaflows-enable false\n")
SCRIPT = "upcall-show --format json\npmd-stats-show --format json\npmd-rxq-show --format json\n"


def run(setup, in_specs, records, out_port="p2"):
    """in_specs: {port: extra spec options}; records: {port: [(ts_us, frame)]}.
    Returns (proc, upcall json, pmd-stats json, pmd-rxq json, output frames)."""
    d = tmpdir()
    args = []
    for p in sorted(in_specs):
        path = os.path.join(d, p + ".pcap")
        write_pcap_ts(path, records[p])
        args += ["--port", "%s=pcap:in=%s%s" % (p, path, in_specs[p])]
    outp = os.path.join(d, "out.pcap")
    args += ["--port", "%s=pcap:out=%s" % (out_port, outp)]
    cfg = os.path.join(d, "keel.conf")
    with open(cfg, "w") as f:
        f.write(setup)
    proc = run_keel("--config", cfg, *args, "--exit-when-drained", stdin=SCRIPT, timeout=900)
    check(proc.returncode == 0, "keel exits 0", proc)
    js = json_lines(proc.stdout)
    up = [j for j in js if "upcalls" in j][0]
    stats = [j for j in js if "pmds" in j and j["pmds"] and "packets_received" in j["pmds"][0]][0]
    rxq = [j for j in js if "pmds" in j and j["pmds"] and "rx_queues" in j["pmds"][0]][0]
    return proc, up, stats, rxq, read_pcap(outp)


def polled(rxq, port):
    """[(pmd index in the listing, queue)] of `port`'s polled rx queues."""
    return sorted((i, q["queue"]) for i, pmd in enumerate(rxq["pmds"]) for q in pmd["rx_queues"]
                  if q["port"] == port)


def check_once_in_flow_order(sent, out, proc):
    check(len(out) == len(sent), "every packet out: %d of %d" % (len(out), len(sent)), proc)
    check(collections.Counter(out) == collections.Counter(sent), "each packet out exactly once", proc)
    by_flow_in, by_flow_out = collections.defaultdict(list), collections.defaultdict(list)
    for fr in sent:
        f, s = flow_seq(fr)
        by_flow_in[f].append(s)
    for fr in out:
        f, s = flow_seq(fr)
        by_flow_out[f].append(s)
    bad = [f for f in by_flow_in if by_flow_in[f] != by_flow_out[f]]
    check(not bad, "per-flow order kept (%d flows out of order, e.g. flow %s: %s)" %
          (len(bad), bad[:1], by_flow_out[bad[0]][:10] if bad else ""), proc)


def test_multiqueue_replay_two_pmds_lossless_per_flow_order():
    sent = traffic(N_FLOWS)
    proc, up, stats, rxq, out = run(SETUP + "set pmd-cpu-mask 0x3\n", {"p1": ",rxq=2"},
                                    {"p1": [(i, f) for i, f in enumerate(sent)]})
    check(up["offline"] is True, "offline run", proc)
    check(up["lost"] == 0, "lost 0 (%d)" % up["lost"], proc)
    check(len(stats["pmds"]) == 2, "two PMDs", proc)
    check(polled(rxq, "p1") == [(0, 0), (1, 1)], "queue 0 on the first PMD, queue 1 on the second: %r" %
          polled(rxq, "p1"), proc)
    rx = [p["packets_received"] for p in stats["pmds"]]
    check(all(r > 0 for r in rx) and sum(rx) == len(sent), "both PMDs read, together every packet: %r" % rx, proc)
    check(sum(p["lost"] for p in stats["pmds"]) == 0, "no PMD lost a packet", proc)
    check(up["upcalls"] >= N_FLOWS + LONG_FLOWS, "one upcall per new 5-tuple at least: %d" % up["upcalls"], proc)
    check_once_in_flow_order(sent, out, proc)


def test_four_queues_two_pmds_megaflows_on():
    # Megaflows on: one megaflow per PMD serves every flow after the first
    # upcall; the hits behind it still keep each flow's order.
    sent = traffic(20000)
    setup = SETUP.replace("set megaflows-enable false\n", "") + "set pmd-cpu-mask 0x3\n"
    proc, up, stats, rxq, out = run(setup, {"p1": ",rxq=4"}, {"p1": [(i, f) for i, f in enumerate(sent)]})
    check(up["offline"] is True and up["lost"] == 0, "offline, lost 0", proc)
    check(polled(rxq, "p1") == [(0, 0), (0, 2), (1, 1), (1, 3)], "queues 0, 2 / 1, 3: %r" % polled(rxq, "p1"),
          proc)
    check(all(p["packets_received"] > 0 for p in stats["pmds"]), "both PMDs read", proc)
    check_once_in_flow_order(sent, out, proc)


def test_single_queue_inputs_keep_one_reader_and_timestamp_order():
    # Two single-queue inputs, interleaved stamps (ties: p1 first), 2 PMDs:
    # PMD 0 reads both, merged, and p3 gets the exact timestamp order.
    n = 20000
    ins = {"p1": [], "p2": []}
    order = []
    for i in range(n):
        ts = i * 3 if not (i % 2 and i % 20 == 1) else (i - 1) * 3
        fr = frame(LONG_FLOWS + i, i)
        ins["p1" if i % 2 == 0 else "p2"].append((ts, fr))
        order.append(fr)
    setup = ("add-br br0\nadd-port br0 p1\nadd-port br0 p2\nadd-port br0 p3\n"
             "add-flow br0 in_port=1,actions=output:3\nadd-flow br0 in_port=2,actions=output:3\n"
             "set megaflows-enable false\nset pmd-cpu-mask 0x3\n")
    proc, up, stats, rxq, out = run(setup, {"p1": "", "p2": ""}, ins, out_port="p3")
    check(up["offline"] is True and up["lost"] == 0, "offline, lost 0", proc)
    check(polled(rxq, "p1") == [(0, 0)] and polled(rxq, "p2") == [(0, 0)], "both inputs on the first PMD", proc)
    check(stats["pmds"][1]["packets_received"] == 0, "the second PMD read nothing", proc)
    check(out == order, "output in timestamp order (%d frames)" % len(out), proc)


def test_normal_mac_learning_two_pmds():
    # NORMAL between two ports, each a 2-queue input read by both PMDs: the
    # first packets of each MAC are flooded and learned (a MAC-table change:
    # the handler's offline revalidation round, with the other PMD's flows
    # in flight). With two ports a flood and a learned unicast both go to
    # the other port, so every packet leaves there exactly once, each flow
    # in order.
    n = 6000
    ins = {"p1": [], "p2": []}
    sent = {"p1": [], "p2": []}
    for i in range(n):
        port = "p1" if i % 2 == 0 else "p2"
        fr = bytearray(frame(LONG_FLOWS + (i % 1500), i))
        fr[0:12] = (b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01" if port == "p1" else
                    b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02")
        fr = bytes(fr)
        ins[port].append((i, fr))
        sent[port].append(fr)
    d = tmpdir()
    args = []
    for p in ("p1", "p2"):
        path = os.path.join(d, p + ".pcap")
        write_pcap_ts(path, ins[p])
        args += ["--port", "%s=pcap:in=%s,out=%s,rxq=2" % (p, path, os.path.join(d, p + ".out.pcap"))]
    cfg = os.path.join(d, "keel.conf")
    with open(cfg, "w") as f:
        f.write("add-br br0\nadd-port br0 p1\nadd-port br0 p2\nadd-flow br0 actions=NORMAL\nset pmd-cpu-mask 0x3\n")
    proc = run_keel("--config", cfg, *args, "--exit-when-drained", stdin=SCRIPT, timeout=600)
    check(proc.returncode == 0, "keel exits 0", proc)
    up = [j for j in json_lines(proc.stdout) if "upcalls" in j][0]
    check(up["offline"] is True and up["lost"] == 0, "offline, lost 0", proc)
    check(up["offline_revalidations"] >= 1, "MAC learning ran offline revalidation rounds", proc)
    check_once_in_flow_order(sent["p1"], read_pcap(os.path.join(d, "p2.out.pcap")), proc)
    check_once_in_flow_order(sent["p2"], read_pcap(os.path.join(d, "p1.out.pcap")), proc)


def test_multiqueue_replay_one_pmd_stays_in_file_order():
    sent = traffic(5000)
    proc, up, stats, rxq, out = run(SETUP, {"p1": ",rxq=2"}, {"p1": [(i, f) for i, f in enumerate(sent)]})
    check(up["offline"] is True and up["lost"] == 0, "offline, lost 0", proc)
    check(polled(rxq, "p1") == [(0, 0)], "one PMD: queue 0 only (merged)", proc)
    check(out == sent, "output = input, in file order", proc)


if __name__ == "__main__":
    main([test_multiqueue_replay_two_pmds_lossless_per_flow_order, test_four_queues_two_pmds_megaflows_on,
          test_single_queue_inputs_keep_one_reader_and_timestamp_order, test_normal_mac_learning_two_pmds,
          test_multiqueue_replay_one_pmd_stays_in_file_order])

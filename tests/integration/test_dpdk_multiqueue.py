"""A DPDK port with several rx queues, end to end: `dpdk:DEVARGS,n_rxq=N`
(net_pcap: one rx queue per rx_pcap= file) polled by two PMDs, one queue
each, through a bridge to a DPDK port with one tx queue that the two PMDs
share (XPS-like steering, a lock per burst): every frame leaves once, each
PMD received its queue, show ports reports the queues; a device that has
fewer queues than asked gets what it has; a bad n_rxq is refused at boot
naming the token; net_af_packet on a veth with qpairs=2 (the kernel's
PACKET_FANOUT hash spreads the flows; the device does no RSS of its own)
feeds both PMDs (skipped where no veth can be made)."""
import collections
import json
import os
import socket
import subprocess
import tempfile

from harness import (EMULATOR, ask_live, check, json_lines, keel_cmd, main, ports_by_name, read_pcap, run_keel, tmpdir,
                     udp_frame, wait_for, write_pcap)

CONFIG = """set pmd-cpu-mask 0x3
add-br br0
add-port br0 p0
add-port br0 p1
add-flow br0 priority=0,actions=output:p1
"""


def config(d):
    path = os.path.join(d, "k.conf")
    with open(path, "w") as f:
        f.write(CONFIG)
    return path


def test_two_queues_two_pmds_every_frame_once():
    d = tmpdir()
    a, b, out = os.path.join(d, "a.pcap"), os.path.join(d, "b.pcap"), os.path.join(d, "out.pcap")
    fa = [udp_frame(i % 50, 64 + i % 3) for i in range(400)]          # 50 flows
    fb = [udp_frame(1000 + i % 30, 128 + i % 5) for i in range(300)]  # 30 other flows
    write_pcap(a, fa)
    write_pcap(b, fb)
    p = run_keel("--config", config(d), "--port", "p0=dpdk:net_pcap0,rx_pcap=%s,rx_pcap=%s,n_rxq=2" % (a, b),
                 "--port", "p1=dpdk:net_pcap1,tx_pcap=" + out, "--exit-when-drained",
                 stdin="show ports --format json\npmd-perf-show --format json\npmd-rxq-show\n", timeout=300)
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    got = read_pcap(out)
    check(collections.Counter(got) == collections.Counter(fa + fb),
          "every frame out once: %d out of %d" % (len(got), len(fa) + len(fb)), p)
    # Per flow, its file's order (one flow, one file, one queue, one PMD): a
    # flow's frames differ only in length.
    def by_flow(frames):
        flows = collections.defaultdict(list)
        for f in frames:
            flows[(f[30:34], f[34:36])].append(len(f))
        return flows
    check(by_flow(got) == by_flow(fa + fb), "per-flow order kept", p)
    js = json_lines(p.stdout)
    ports = ports_by_name(js[0])
    check(ports["p0"]["rx_queues"] == 2 and ports["p1"]["tx_queues"] == 1, "queues as configured", p)
    pmds = {x["core"]: x for x in js[1]["pmds"]}
    check(sorted(pmds) == [0, 1], "two PMDs", p)
    check(sorted(x["rx_packets"] for x in pmds.values()) == sorted([len(fa), len(fb)]),
          "each PMD received one queue: %s" % [x["rx_packets"] for x in pmds.values()], p)
    for x in pmds.values():
        check(x["txq_shared_bursts"] >= 1 and x["txq_steers"] >= 1, "both sent on p1's shared queue", p)
    check("queue-id:  1" in p.stdout, "pmd-rxq-show lists queue 1", p)


def test_fewer_queues_than_asked():
    d = tmpdir()
    a = os.path.join(d, "a.pcap")
    write_pcap(a, [udp_frame(i, 64) for i in range(10)])
    p = run_keel("--config", config(d), "--port", "p0=dpdk:net_pcap0,rx_pcap=%s,n_rxq=4" % a,
                 "--port", "p1=dpdk:net_null1,no-rx=1,n_txq=3", "--exit-when-drained",
                 stdin="show ports --format json\n", timeout=300)
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    ports = ports_by_name(json_lines(p.stdout)[0])
    check(ports["p0"]["rx_queues"] == 1, "net_pcap with one file has one rx queue", p)
    check(ports["p1"]["tx_queues"] == 3, "n_txq=3 on net_null", p)
    check(ports["p1"]["tx"]["packets"] == 10, "forwarded", p)


def test_bad_n_rxq():
    p = run_keel("--port", "p0=dpdk:net_null0,n_rxq=0", "--port", "p1=null", timeout=120)
    check(p.returncode != 0, "non-zero exit", p)
    check("dpdk n_rxq '0' must be a number of rx queues from 1 to 16" in p.stderr, "names the token", p)


def test_af_packet_two_queues_on_a_veth():
    if EMULATOR:
        # qemu-user refuses AF_PACKET's PACKET_VERSION socket option
        # ("Protocol not available"), so net_af_packet can't start there;
        # the host run covers it.
        print("SKIP test_af_packet_two_queues_on_a_veth: net_af_packet needs PACKET_VERSION, which qemu-user lacks")
        return
    a, b = "kmq%d" % (os.getpid() % 10000), "kmr%d" % (os.getpid() % 10000)
    if subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], capture_output=True).returncode:
        print("SKIP test_af_packet_two_queues_on_a_veth: cannot create a veth pair")
        return
    err = tempfile.TemporaryFile(mode="w+")
    proc = None
    try:
        for dev in (a, b):
            subprocess.run(["ip", "link", "set", dev, "up"], check=True)
        d = tmpdir()
        proc = subprocess.Popen(keel_cmd("--config", config(d), "--port",
                                         "p0=dpdk:net_af_packet0,iface=%s,qpairs=2,n_rxq=2" % a, "--port", "p1=null"),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        ports = ports_by_name(json.loads(ask_live(proc, err, "show ports --format json")))
        check(ports["p0"]["rx_queues"] == 2, "qpairs=2: two rx queues")
        frames = [udp_frame(i, 64) for i in range(256)]  # 256 flows
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((b, 0))
        for f in frames:
            s.send(f)
        s.close()

        def received():
            pmds = json.loads(ask_live(proc, err, "pmd-perf-show --format json"))["pmds"]
            return pmds if sum(x["rx_packets"] for x in pmds) >= len(frames) else None
        wait_for(received, "the %d frames to arrive" % len(frames))
        pmds = received()
        check(all(x["rx_packets"] > 0 for x in pmds), "both PMDs received: %s" % [x["rx_packets"] for x in pmds])
        # Received is not yet forwarded: each frame is a new flow, sent on
        # once the slow path answers its upcall.
        def forwarded():
            return ports_by_name(json.loads(ask_live(proc, err, "show ports --format json")))["p1"]["tx"]["packets"]
        wait_for(lambda: forwarded() >= len(frames), "the %d frames forwarded" % len(frames))
    finally:
        if proc is not None and proc.poll() is None:
            proc.stdin.write("exit\n")
            proc.stdin.flush()
            proc.wait(timeout=60)
        subprocess.run(["ip", "link", "del", a], capture_output=True)


if __name__ == "__main__":
    main([test_two_queues_two_pmds_every_frame_once, test_fewer_queues_than_asked, test_bad_n_rxq,
          test_af_packet_two_queues_on_a_veth])

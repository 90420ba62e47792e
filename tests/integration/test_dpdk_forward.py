"""The DPDK backend: the same forwarding as test_forward_pcap, through DPDK's
net_pcap virtual devices (host-sim's EAL arguments: no hugepages, no PCI)."""
import json
import os
import subprocess
import time

from harness import (check, json_lines, keel_cmd, main, ports_by_name, read_pcap, run_keel, tmpdir,
                     udp_frame, varied_frames, write_pcap)


def xconnect_config(d):
    """p0 cross-connected to p1: these tests are about the DPDK backend's
    rx/tx, not the slow path (a DPDK port is a live input: under the default
    bridge, the first packet of each flow waits for its upcall while later
    ones pass, so the output order would be the switch's, not the file's)."""
    path = os.path.join(d, "xconnect.conf")
    with open(path, "w") as f:
        f.write("xconnect p0 p1\n")
    return path


def test_dpdk_pcap_forward():
    d = tmpdir()
    inp, outp = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    frames = varied_frames(500)
    write_pcap(inp, frames)
    p = run_keel("--port", "p0=dpdk:net_pcap0,rx_pcap=" + inp,
                 "--port", "p1=dpdk:net_pcap1,tx_pcap=" + outp, "--config", xconnect_config(d),
                 "--exit-when-drained", stdin="show ports --format json\nversion\n", timeout=300)
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    out = read_pcap(outp)
    check(len(out) == len(frames), "%d frames out of %d" % (len(out), len(frames)), p)
    for i, (a, b) in enumerate(zip(out, frames)):
        check(a == b, "frame %d differs" % i)
    ports = ports_by_name(json_lines(p.stdout)[0])
    check(ports["p0"]["kind"] == "dpdk", "dpdk port", p)
    check(ports["p0"]["rx"]["packets"] == len(frames), "p0 rx", p)
    check(ports["p1"]["tx"]["packets"] == len(frames), "p1 tx", p)
    check(ports["p1"]["tx"]["bytes"] == sum(map(len, frames)), "p1 tx bytes", p)
    check("dpdk" in p.stdout.split("running:")[-1], "version shows the dpdk backend running", p)


def test_dpdk_mixed_with_sim_ports():
    """A sim pcap input forwarded to a DPDK port: the buffer is copied into an mbuf."""
    d = tmpdir()
    inp, outp = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    frames = varied_frames(100)
    write_pcap(inp, frames)
    p = run_keel("--port", "p0=pcap:in=" + inp, "--port", "p1=dpdk:net_pcap0,tx_pcap=" + outp,
                 "--config", xconnect_config(d), "--exit-when-drained", stdin="show ports --format json\n", timeout=300)
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    check(read_pcap(outp) == frames, "frames byte for byte", p)


def test_dpdk_replay_beyond_base_pool():
    """net_pcap with infinite_rx=1 keeps every record of its file in an mbuf:
    the pool grows by the file's record count, so a pcap larger than the
    base pool (16384) replays instead of forwarding nothing."""
    d = tmpdir()
    inp = os.path.join(d, "big.pcap")
    records = 20000
    write_pcap(inp, [udp_frame(i, 64) for i in range(records)])
    proc = subprocess.Popen(keel_cmd("--port", "p0=dpdk:net_pcap0,rx_pcap=%s,infinite_rx=1" % inp,
                                     "--port", "p1=dpdk:net_null1,no-rx=1"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    tx = 0
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None:
            proc.stdin.write("show ports --format json\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            if not line:
                break
            tx = ports_by_name(json.loads(line))["p1"]["tx"]["packets"]
            if tx >= 2 * records:
                break
            time.sleep(0.5)
        proc.stdin.write("exit\n")
        proc.stdin.flush()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    check(proc.returncode == 0, "keel exited %s: %s" % (proc.returncode, err))
    check(tx >= 2 * records, "p1 sent %d packets; the %d-record file replays at least twice" % (tx, records))


def test_dpdk_bad_devargs():
    p = run_keel("--port", "p0=dpdk:net_nosuchdriver0", "--port", "p1=null", timeout=120)
    check(p.returncode != 0, "non-zero exit", p)
    check("net_nosuchdriver0" in p.stderr and "keel: error:" in p.stderr, "names the device", p)


if __name__ == "__main__":
    main([test_dpdk_pcap_forward, test_dpdk_mixed_with_sim_ports, test_dpdk_replay_beyond_base_pool,
          test_dpdk_bad_devargs])

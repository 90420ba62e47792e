"""Boot keel on host-sim with pcap ports; every packet is forwarded byte for
byte and `show ports` agrees."""
import os

from harness import (check, json_lines, main, ports_by_name, read_pcap, run_keel, tmpdir,
                     varied_frames, write_pcap)


def forward(n, loops=1):
    d = tmpdir()
    inp, outp = os.path.join(d, "in.pcap"), os.path.join(d, "out.pcap")
    frames = varied_frames(n)
    write_pcap(inp, frames)
    spec_in = "pcap:in=%s" % inp + (",loop=%d" % loops if loops != 1 else "")
    p = run_keel("--port", "p0=" + spec_in, "--port", "p1=pcap:out=" + outp,
                 "--exit-when-drained", stdin="show ports --format json\nshow ports\nfdb-show br0\n")
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    out = read_pcap(outp)
    expect = frames * loops
    check(len(out) == len(expect), "%d frames out, %d expected" % (len(out), len(expect)), p)
    for i, (a, b) in enumerate(zip(out, expect)):
        check(a == b, "frame %d differs (len %d vs %d)" % (i, len(a), len(b)))
    ports = ports_by_name(json_lines(p.stdout)[0])
    nbytes = sum(len(f) for f in expect)
    check(ports["p0"]["rx"]["packets"] == len(expect), "p0 rx packets", p)
    check(ports["p0"]["rx"]["bytes"] == nbytes, "p0 rx bytes", p)
    check(ports["p1"]["tx"]["packets"] == len(expect), "p1 tx packets", p)
    check(ports["p1"]["tx"]["bytes"] == nbytes, "p1 tx bytes", p)
    check(ports["p1"]["tx"]["dropped"] == 0 and ports["p0"]["rx"]["dropped"] == 0, "no drops", p)
    # The default config bridges p0 and p1 (br0, NORMAL): the frames' source
    # MAC was learned on p0 (port 1), and nothing is cross-connected.
    if expect:
        src = ":".join("%02x" % b for b in expect[0][6:12])
        check(any(l.split()[:1] == ["1"] and src in l for l in p.stdout.splitlines()),
              "default config bridges p0 and p1: %s learned on port 1" % src, p)
    check(ports["p0"]["xconnect"] is None, "nothing cross-connected", p)
    # The text table shows the same counts.
    row = [l for l in p.stdout.splitlines() if l.startswith("p1 ")]
    check(row and str(len(expect)) in row[0].split(), "text table row for p1: %r" % row, p)


def test_forward_1000_packets():
    forward(1000)


def test_forward_replayed_three_times():
    forward(50, loops=3)


def test_empty_pcap():
    forward(0)


def test_no_xconnect_no_flow_is_dropped():
    """Without a cross-connect, a bridge or flows the packets miss, go up to
    the slow path and are dropped there (their port belongs to no bridge):
    one drop flow for the port is installed (test_unbridged_port.py) and
    nothing is forwarded."""
    d = tmpdir()
    inp, outp, cfg = (os.path.join(d, x) for x in ("in.pcap", "out.pcap", "cfg"))
    write_pcap(inp, varied_frames(10))
    with open(cfg, "w") as f:
        f.write("# nothing is forwarded\n")
    p = run_keel("--config", cfg, "--port", "p0=pcap:in=" + inp, "--port", "p1=pcap:out=" + outp,
                 "--exit-when-drained", stdin="show ports --format json\npmd-stats-show --format json\n")
    check(p.returncode == 0, "exit 0", p)
    js = json_lines(p.stdout)
    ports = ports_by_name(js[0])
    check(ports["p0"]["rx"]["packets"] == 10, "rx packets", p)
    pmd = js[1]["pmds"][0]
    check(pmd["misses"] == 10 and pmd["upcalls"] + pmd["upcall_followers"] == 10 and pmd["lost"] == 0,
          "misses went to the slow path", p)
    check(pmd["upcall_installs"] == 1, "one drop flow installed for the unbridged port", p)
    check(read_pcap(outp) == [], "nothing written", p)


if __name__ == "__main__":
    main([test_forward_1000_packets, test_forward_replayed_three_times, test_empty_pcap,
          test_no_xconnect_no_flow_is_dropped])

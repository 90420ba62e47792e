"""pmd-perf-show prints Open vSwitch 3.1's dpif-netdev/pmd-perf-show summary:
the same lines, labels, widths and sections (golden/ovs31_pmd_perf_show.txt
is a live ovs-vswitchd 3.1 with two PMDs, dummy-pmd ports, 20 frames in:
one busy PMD section, then an idle one), with keel's figures: what went in
and out, the upcalls, the iterations and their sleeps. --pmd CORE, --keel
(the tx queue lines) and --format json."""
import os
import re

from harness import check, json_lines, main, run_keel, tmpdir, udp_frame, write_pcap

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = """set pmd-cpu-mask 0x3
add-br br0
add-port br0 p0
add-port br0 p1
add-flow br0 priority=0,actions=output:p1
"""
N = 300  # frames in; 100 flows of 3


def layout(text):
    """The text with every number a placeholder and the padding before it
    (%12 fields, %5.1f percentages) gone: what must equal Open vSwitch's."""
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return re.sub(r"([ (]) +N", r"\1N", text).splitlines()


def run(*cmds):
    d = tmpdir()
    inp, cfg = os.path.join(d, "in.pcap"), os.path.join(d, "k.conf")
    write_pcap(inp, [udp_frame(i % 100, 64) for i in range(N)])
    with open(cfg, "w") as f:
        f.write(CONFIG)
    marks = "".join("%s\nversion --format json\n" % c for c in cmds)
    p = run_keel("--config", cfg, "--port", "p0=pcap:in=" + inp, "--port", "p1=pcap:out=" + os.path.join(d, "o.pcap"),
                 "--exit-when-drained", stdin=marks)
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    outs, cur = [], []
    for line in p.stdout.splitlines(keepends=True):
        if line.startswith('{"version"'):
            outs.append("".join(cur))
            cur = []
        else:
            cur.append(line)
    check(len(outs) == len(cmds), "one output per command", p)
    return outs, p


def section(text, core):
    m = re.search(r"pmd thread numa_id 0 core_id %d:\n\n(.*?)(?=\nTime: |\Z)" % core, text, re.S)
    check(m is not None, "a section for core %d in:\n%s" % (core, text))
    return m.group(1)


def figure(sec, label):
    m = re.search(r"^  %s\s+(\d+)" % re.escape(label), sec, re.M)
    check(m is not None, "%r in:\n%s" % (label, sec))
    return int(m.group(1))


def test_layout_is_open_vswitch_31():
    (text,), p = run("pmd-perf-show")
    with open(os.path.join(HERE, "golden", "ovs31_pmd_perf_show.txt")) as f:
        ovs = f.read()
    got, want = layout(text), layout(ovs)
    check(got == want, "pmd-perf-show's layout differs from Open vSwitch 3.1's:\n--- keel ---\n%s\n--- ovs ---\n%s"
          % ("\n".join(got), "\n".join(want)), p)


def test_figures():
    (text,), p = run("pmd-perf-show")
    # Offline (every input a finite replay): PMD 0 on core 0 reads the input.
    busy, idle = section(text, 0), section(text, 1)
    check(figure(busy, "Rx packets:") == N, "Rx packets", p)
    check(figure(busy, "Datapath passes:") == N, "passes", p)
    check(figure(busy, "Tx packets:") == N, "Tx packets: every frame went out", p)
    hits = sum(figure(busy, l) for l in ("- Simple Match hits:", "- EMC hits:", "- SMC hits:", "- Megaflow hits:"))
    up = figure(busy, "- Upcalls:")
    check(up >= 1 and hits + up + figure(busy, "- Lost upcalls:") == N, "hits + upcalls + lost = passes", p)
    it = figure(busy, "Iterations:")
    check(figure(busy, "- idle iterations:") + figure(busy, "- busy iterations:") == it, "idle + busy = all", p)
    check(figure(busy, "- busy iterations:") >= 1, "busy iterations counted", p)
    check(figure(idle, "Rx packets:") == 0 and figure(idle, "Tx packets:") == 0, "the other PMD idle", p)
    check(figure(idle, "- busy iterations:") == 0, "an idle PMD has no busy iteration", p)
    # host-sim's PMDs sleep when idle: the idle one did, and the time shows.
    check(figure(idle, "- sleep iterations:") > 0 and figure(idle, "Sleep time (us):") > 0, "sleeps counted", p)
    check(re.search(r"^Measurement duration: \d+\.\d{3} s$", text, re.M), "duration line", p)


def test_pmd_keel_json():
    (one, none, extra, js), p = run("pmd-perf-show --pmd 1", "pmd-perf-show --pmd 7", "pmd-perf-show --keel",
                                    "pmd-perf-show --format json")
    check("core_id 1:" in one and "core_id 0:" not in one, "--pmd 1: only core 1", p)
    check(none == "", "--pmd on a core without a PMD prints nothing (as OVS's -pmd)", p)
    check(len(re.findall(r"^  keel: tx bursts on shared queues: \d+ \(lock waits \d+, [\d.]+ %, wait cycles \d+\)$",
                         extra, re.M)) == 2, "--keel: a tx line per PMD", p)
    # p1 (pcap out) has one tx queue for two PMDs: shared, so the sender counts its bursts.
    m = re.search(r"core_id 0:.*?tx bursts on shared queues: (\d+)", extra, re.S)
    check(m and int(m.group(1)) >= 1, "the busy PMD sent on the shared queue", p)
    pmds = {x["core"]: x for x in json_lines(js)[0]["pmds"]}
    check(sorted(pmds) == [0, 1], "json: both PMDs", p)
    check(pmds[0]["rx_packets"] == N and pmds[0]["tx_packets"] == N, "json figures", p)
    check(pmds[0]["txq_shared_bursts"] >= 1 and pmds[0]["txq_steers"] >= 1, "json tx queue figures", p)
    check(pmds[0]["idle_iterations"] + pmds[0]["busy_iterations"] == pmds[0]["iterations"], "json iterations", p)


if __name__ == "__main__":
    main([test_layout_is_open_vswitch_31, test_figures, test_pmd_keel_json])

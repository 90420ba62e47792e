"""pmd-stats-show, pmd-rxq-show and upcall-show print what Open vSwitch 3.1's
dpif-netdev/pmd-stats-show, dpif-netdev/pmd-rxq-show and upcall/show print
for the same case: the same lines in the same order, labels, spacing and
units; the numbers are state and are masked (the two-character usage
fields of pmd-rxq-show keep their width).

The case: bridge br0 (netdev datapath), ports p1 and p2 polled by a PMD
(Open vSwitch: dummy-pmd ports), one rule ip,nw_dst=10.0.0.0/8 -> p2, and
three times the same UDP frame into p1. Three moments:
  * idle: before any packet (Open vSwitch omits the per-packet averages);
  * after: the three packets forwarded (keel: an offline run);
  * measured: after two load intervals closed, when pmd-rxq-show prints
    usage figures instead of NOT AVAIL (keel: live, its sample traffic).

Open vSwitch runs live (a private ovsdb-server + ovs-vswitchd, as
tests/conformance does) when it is installed; otherwise the texts recorded
from it in data/ovs_stats_layout.json are used (KEEL_RECORD_OVS=1 rewrites
them from the live switch). Also checked: `--keel` adds keel's lines after
Open vSwitch's only, and JSON agrees with the text's simple match hits."""
import json
import os
import re
import shutil
import subprocess
import threading
import time

from harness import PATIENCE, Failure, ask_live, check, json_lines, keel_cmd, main, run_keel, tmpdir, udp_frame, \
    wait_for, write_pcap_ts

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDING = os.path.join(HERE, "data", "ovs_stats_layout.json")
RECORD = os.environ.get("KEEL_RECORD_OVS", "") not in ("", "0")
RULE = "priority=10,ip,nw_dst=10.0.0.0/8,actions=output:2"
SETUP = "add-br br0\nadd-port br0 p1 ofport_request=1\nadd-port br0 p2 ofport_request=2\nadd-flow br0 %s\n" % RULE
FRAME = udp_frame(1, 62)
OVS_CMDS = {"pmd-stats-show": "dpif-netdev/pmd-stats-show", "pmd-rxq-show": "dpif-netdev/pmd-rxq-show",
            "upcall-show": "upcall/show"}
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


def layout(text):
    """The text with its numbers masked: N, N.NN, and NN % for the %2
    usage fields (so a missing pad still shows)."""
    text = re.sub(r"(pmd usage|overhead): (?: \d|\d\d+) %", r"\1: NN %", text)
    text = re.sub(r"\d+(\.\d+)?", lambda m: "N.NN" if m.group(1) else "N", text)
    lines = []
    for line in text.splitlines():
        if line == "  N: (keys N)" and lines and lines[-1] == line:
            continue  # one line per revalidator thread: OVS may run several, keel runs one
        lines.append(line)
    return lines


def compare(what, keel_text, ovs_text):
    k, o = layout(keel_text), layout(ovs_text)
    if k != o:
        import difflib
        diff = "\n".join(difflib.unified_diff(o, k, "ovs " + what, "keel " + what, lineterm=""))
        raise Failure("%s: keel's layout differs from Open vSwitch's:\n%s\n--- keel ---\n%s--- ovs ---\n%s"
                      % (what, diff, keel_text, ovs_text))


# --- Open vSwitch, live ------------------------------------------------------------

def ovs_available():
    return all(shutil.which(p) for p in ("ovs-vswitchd", "ovsdb-server", "ovs-vsctl", "ovs-ofctl", "ovs-appctl",
                                         "ovsdb-tool")) and os.path.exists(SCHEMA)


class Ovs:
    def __init__(self):
        self.d = d = tmpdir()
        self.env = dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d, OVS_SYSCONFDIR=d,
                        OVS_PKGDATADIR="/usr/share/openvswitch")
        db = "unix:%s/db.sock" % d
        self.sh("ovsdb-tool", "create", d + "/conf.db", SCHEMA)
        self.sh("ovsdb-server", d + "/conf.db", "--remote=punix:%s/db.sock" % d, "--pidfile=%s/ovsdb.pid" % d,
                "--detach", "--no-chdir", "--log-file=%s/ovsdb.log" % d)
        self.vsctl = ["ovs-vsctl", "--db=" + db, "--timeout=30"]
        self.sh(*self.vsctl, "--no-wait", "init")
        self.sh("ovs-vswitchd", db, "--enable-dummy=override", "--disable-system", "--pidfile=%s/vsw.pid" % d,
                "--detach", "--no-chdir", "--log-file=%s/vsw.log" % d, "-vconsole:off")
        args = ["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", "fail-mode=secure"]
        for i in (1, 2):
            args += ["--", "add-port", "br0", "p%d" % i, "--", "set", "interface", "p%d" % i, "type=dummy-pmd",
                     "ofport_request=%d" % i]
        self.sh(*self.vsctl, *args)
        self.ctl = "%s/ovs-vswitchd.%s.ctl" % (d, open(d + "/vsw.pid").read().strip())
        self.sh("ovs-ofctl", "add-flow", "br0", RULE)

    def sh(self, *args):
        p = subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=60)
        if p.returncode:
            raise Failure("%s: %s" % (" ".join(args), (p.stderr or p.stdout).strip()))
        return p.stdout

    def appctl(self, *args):
        return self.sh("ovs-appctl", "-t", self.ctl, *args)

    def texts(self):
        return {k: self.appctl(v) for k, v in OVS_CMDS.items()}

    def stop(self):
        for name in ("vsw", "ovsdb"):
            try:
                os.kill(int(open("%s/%s.pid" % (self.d, name)).read()), 15)
            except (OSError, ValueError):
                pass
        time.sleep(0.2)
        shutil.rmtree(self.d, ignore_errors=True)


def pmd_part(text):
    return text.split("main thread:")[0]


def ovs_capture():
    """{moment: {command: text}} from a live Open vSwitch."""
    o = Ovs()
    try:
        wait_for(lambda: "idle cycles" in pmd_part(o.appctl("dpif-netdev/pmd-stats-show")), "OVS's PMD to count cycles")
        got = {"idle": o.texts()}
        for _ in range(3):
            o.appctl("netdev-dummy/receive", "p1", FRAME.hex())
        wait_for(lambda: "packets received: 3" in pmd_part(o.appctl("dpif-netdev/pmd-stats-show")),
                 "OVS's PMD to receive 3 packets")
        wait_for(lambda: "(current 1)" in o.appctl("upcall/show"), "OVS's flow")
        got["after"] = o.texts()
        wait_for(lambda: "NOT AVAIL" not in o.appctl("dpif-netdev/pmd-rxq-show"), "OVS's rxq usage")
        got["measured"] = o.texts()
        return got
    finally:
        o.stop()


def ovs_texts():
    if ovs_available():
        got = ovs_capture()
        if RECORD:
            with open(RECORDING, "w") as f:
                json.dump(got, f, indent=1, sort_keys=True)
                f.write("\n")
        return got
    check(os.path.exists(RECORDING), "Open vSwitch is not installed and %s is missing" % RECORDING)
    return json.load(open(RECORDING))


# --- keel ------------------------------------------------------------------------------

def split_outputs(stdout, markers):
    """Splits the output of commands separated by `version --format json`."""
    parts, cur = [], []
    for line in stdout.splitlines(True):
        if line.startswith('{"version"'):
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(line)
    check(len(parts) == len(markers), "one output per command: %r" % parts)
    return dict(zip(markers, parts))


SCRIPT_CMDS = ["pmd-stats-show", "pmd-rxq-show", "upcall-show", "pmd-stats-show --keel", "upcall-show --keel",
               "pmd-stats-show --format json", "pmd-rxq-show --secs 7", "pmd-rxq-show --pmd 4095"]
SCRIPT = "".join(c + "\nversion --format json\n" for c in SCRIPT_CMDS)


def keel_offline(ports, inputs):
    d = tmpdir()
    cfg = os.path.join(d, "keel.conf")
    with open(cfg, "w") as f:
        f.write(SETUP)
    args = []
    for name, spec in ports:
        if spec.startswith("pcap:in="):
            path = os.path.join(d, name + ".pcap")
            write_pcap_ts(path, [(i * 1000, fr) for i, fr in enumerate(inputs)])
            spec = "pcap:in=" + path
        args += ["--port", "%s=%s" % (name, spec)]
    p = run_keel("--config", cfg, "--config-dir", d, *args, "--exit-when-drained", stdin=SCRIPT)
    check(p.returncode == 0, "keel exits 0", p)
    return split_outputs(p.stdout, SCRIPT_CMDS)


def keel_measured():
    """keel live (p1 replays its sample traffic) once two load intervals closed."""
    d = tmpdir()
    cfg = os.path.join(d, "keel.conf")
    with open(cfg, "w") as f:
        f.write(SETUP)
    err = open(os.path.join(d, "stderr"), "w+")
    p = subprocess.Popen(keel_cmd("--config", cfg, "--config-dir", d, "--port", "p1=sample:pps=200", "--port",
                                  "p2=null"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                         bufsize=1)

    def ask(cmds):
        return [ask_live(p, err, c) for c in cmds]

    try:
        wait_for(lambda: json.loads(ask(["pmd-rxq-show --format json"])[0])["pmds"][0]["window_cycles"] > 0,
                 "keel's first measured load window (two 5 s intervals)")
        return dict(zip(SCRIPT_CMDS, ask(SCRIPT_CMDS)))
    finally:
        p.stdin.close()
        p.wait(timeout=PATIENCE)


# Open vSwitch's capture runs in the background while keel's runs start
# (each waits for two 5 s load intervals).
_ovs = {}


def _capture():
    try:
        _ovs["texts"] = ovs_texts()
    except BaseException as e:  # reported by ovs()
        _ovs["error"] = e


_ovs_thread = threading.Thread(target=_capture, daemon=True)


def ovs():
    if not _ovs_thread.is_alive() and not _ovs:
        _ovs_thread.start()
    _ovs_thread.join()
    if "error" in _ovs:
        raise Failure("Open vSwitch's capture failed: %r" % _ovs["error"])
    return _ovs["texts"]


def check_keel_extras(k):
    """--keel: Open vSwitch's lines first, unchanged, keel's after them."""
    stats, stats_keel = k["pmd-stats-show"], k["pmd-stats-show --keel"]
    check("keel" not in stats, "no keel line by default")
    lines = layout(stats_keel)
    check([l for l in lines if not l.startswith("  keel: ")] == layout(stats),
          "--keel: OVS's lines unchanged:\n%s" % stats_keel)
    for i, l in enumerate(lines):
        if l.startswith("  keel: "):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            check(nxt.startswith("  keel: ") or nxt.endswith(":") and not nxt.startswith("  "),
                  "--keel: keel's lines close their PMD's block:\n%s" % stats_keel)
    check("  keel: of which runts dropped (< 14 bytes): 0\n" in stats_keel, "--keel: keel's counters")
    up, up_keel = k["upcall-show"], k["upcall-show --keel"]
    # Two commands, so the numbers may move between them (a revalidation
    # round in between): the layout of OVS's lines must be the same.
    up_lines = layout(up)
    check(layout(up_keel)[:len(up_lines)] == up_lines and "\nkeel:\n" in up_keel and "  ukeys         :" in up_keel,
          "upcall-show --keel: OVS's lines, then keel's:\n%s\nvs\n%s" % (up, up_keel))
    pmd = [j for j in json_lines(k["pmd-stats-show --format json"]) if "pmds" in j][0]["pmds"][0]
    m = re.search(r"simple match hits: (\d+)", stats)
    check(int(m.group(1)) == pmd["simple_match_hits"] == pmd["xconnect_hits"] + pmd["simple_path_hits"],
          "simple match hits: text and JSON agree")
    # An unpinned PMD names the CPU it was last seen on: it may migrate
    # between the two commands, so each must name a CPU, not the same one.
    text_cores = [int(c) for c in re.findall(r"core_id (\d+):", stats)]
    ncpu = os.cpu_count() or 1
    check(text_cores and all(0 <= c < ncpu for c in text_cores) and 0 <= pmd["core"] < ncpu,
          "core_id: a CPU number (text %r, JSON %r, %d CPUs)" % (text_cores, pmd["core"], ncpu))
    # OVS's -secs rounds up to whole 5 s intervals; -pmd of a core no PMD is on prints nothing.
    check(k["pmd-rxq-show --secs 7"].startswith("Displaying last 10 seconds pmd usage %\n"), "--secs 7: 10 s")
    check(k["pmd-rxq-show --pmd 4095"] == "", "--pmd: only that core's PMD")


def test_idle():
    """Before any packet: no per-packet averages, NOT AVAIL usage."""
    k = keel_offline([("p1", "null"), ("p2", "null")], [])
    for cmd in OVS_CMDS:
        compare("idle " + cmd, k[cmd], ovs()["idle"][cmd])
    check_keel_extras(k)


def test_after_three_packets():
    k = keel_offline([("p1", "pcap:in="), ("p2", "null")], [FRAME] * 3)
    check("packets received: 3" in k["pmd-stats-show"], "keel received the 3 packets", None)
    for cmd in OVS_CMDS:
        compare("after " + cmd, k[cmd], ovs()["after"][cmd])
    check_keel_extras(k)


def test_measured_usage():
    """After two load intervals: per-queue usage and overhead figures."""
    k = keel_measured()
    check("NOT AVAIL" not in k["pmd-rxq-show"], "keel prints usage figures", None)
    for cmd in OVS_CMDS:
        compare("measured " + cmd, k[cmd], ovs()["measured"][cmd])
    check_keel_extras(k)


if __name__ == "__main__":
    _ovs_thread.start()
    main([test_idle, test_after_three_packets, test_measured_usage])

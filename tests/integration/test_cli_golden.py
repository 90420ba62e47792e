"""Golden output of each command family, text and JSON, on host-sim with two
null ports (nothing moves, so only clocks and build facts vary; those are
masked). Expected output: tests/integration/golden/NAME.txt. After an
intended change of output, regenerate with KEEL_UPDATE_GOLDEN=1 and review
the diff."""
import difflib
import os
import re

from harness import PATIENCE, check, main, run_keel, tmpdir

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
UPDATE = os.environ.get("KEEL_UPDATE_GOLDEN", "") not in ("", "0")
PORTS = ["--port", "p0=null", "--port", "p1=null"]

MASKS = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"), "TIME"),
    (re.compile(r"(keel |\"version\":\")\d+\.\d+\.\d+"), r"\1VERSION"),
    (re.compile(r"keel VERSION \([^)]*\)"), "keel VERSION (REVISION, ARCH)"),
    (re.compile(r"\"git_revision\":\"[^\"]*\",\"arch\":\"[^\"]*\""), "\"git_revision\":\"REV\",\"arch\":\"ARCH\""),
    (re.compile(r"HAL backends in this build: [^;]*;"), "HAL backends in this build: BUILT;"),
    (re.compile(r"\"backends_built\":\[[^\]]*\]"), "\"backends_built\":[\"BUILT\"]"),
    (re.compile(r"(idle|processing) cycles: \d+ \(\d+\.\d+%\)"), r"\1 cycles: N (P%)"),
    (re.compile(r"(core_id |\"core\":)\d+"), r"\1N"),  # an unpinned PMD: the CPU it was last seen on
    # Measured from the second 5 s interval on (NOT AVAIL before): a slow run may get there.
    (re.compile(r"(pmd usage|overhead): (NOT AVAIL|[ \d]\d %)"), r"\1: U"),
    (re.compile(r"\"(window_cycles|busy_cycles|overhead_cycles|intervals_closed|cycles|iterations)\":\d+"), r'"\1":N'),
    (re.compile(r",\"usage_pct\":\d+"), ""),
    (re.compile(r"\"(idle_cycles|processing_cycles|used_ms|time_ns)\":\d+"), r'"\1":N'),
    (re.compile(r"used:\d+\.\d+s"), "used:Ts"),
    # An unpinned PMD is named by the CPU it was last seen on (Pmd::display_core).
    (re.compile(r"flow-dump from pmd on cpu core: \d+"), "flow-dump from pmd on cpu core: C"),
    (re.compile(r"\"pmd_core\":\d+"), '"pmd_core":N'),
    # A bond's next rebalance counts down from its creation.
    (re.compile(r"next rebalance: \d+ ms"), "next rebalance: N ms"),
    (re.compile(r"\"next_rebalance_ms\":\d+"), '"next_rebalance_ms":N'),
]


def mask(text, d):
    text = text.replace(d, "DIR")
    for rx, rep in MASKS:
        text = rx.sub(rep, text)
    return text


def golden(name, commands):
    d = tmpdir()
    p = run_keel(*PORTS, "--config-dir", d, stdin="".join(c + "\n" for c in commands), timeout=PATIENCE)
    got = "exit %d\n--- stdout ---\n%s--- stderr ---\n%s" % (p.returncode, mask(p.stdout, d), mask(p.stderr, d))
    path = os.path.join(GOLDEN, name + ".txt")
    if UPDATE:
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as f:
            f.write(got)
        return
    check(os.path.exists(path), "no golden file %s (run with KEEL_UPDATE_GOLDEN=1)" % path)
    with open(path) as f:
        want = f.read()
    diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), path, "actual"))
    check(got == want, "%s differs from the golden output:\n%s" % (name, diff))


def test_core():
    golden("core", ["version", "version --format json", "show board", "show board --format json",
                    "show ports", "show ports --format json", "xconnect p0 p1", "xconnect p1 p0", "show ports",
                    "no xconnect p0", "show ports", "xconnect p0 nope", "shwo ports", "show ports --format xml"])


FLOW = "recirc_id(0),in_port(1),eth_type(0x0800),ipv4(src=10.0.0.1,frag=no) actions:2"


def test_datapath():
    golden("datapath", ["dp-flow add " + FLOW, "flow-dump", "flow-dump -m", "flow-dump --terse",
                        "flow-dump --format json", "dp-flow get " + FLOW.split(" ")[0],
                        "pmd-stats-show", "pmd-stats-show --format json", "pmd-rxq-show",
                        "pmd-rxq-show --format json", "dpcls-show", "dpcls-show --format json",
                        "pmd-bond-show", "pmd-bond-show --pmd", "pmd-bond-show --format json",
                        "pmd-bond-show --pmd --format json", "pmd-bond-show 1",
                        "dp-flow add in_port(1) actions:frob", "set emc-insert-inv-prob -1",
                        "set smc-enable maybe", "set vlan-limit 3", "set vlan-limit -1"])


def test_config():
    golden("config", ["show running-config", "set emc-insert-inv-prob 10", "set smc-enable true", "set vlan-limit 2",
                      "no xconnect p0", "xconnect p1 p0", "logging level cli warn",
                      "show running-config", "show running-config --format json",
                      "show startup-config", "show startup-config --format json", "write memory",
                      "show startup-config", "show startup-config --format json",
                      "copy startup-config p0", "configure replace /nonexistent/x.conf"])


def test_logging():
    golden("logging", ["logging level cli dbg", "logging level all warn", "logging level config info",
                       "logging console info", "show logging -n 0", "show running-config",
                       "logging level nosuch dbg", "logging level cli loud", "logging console",
                       "show logging -n 2"])


def test_bonds():
    # A balance-tcp bond without LACP uses lb_output (pmd-bond-show has its
    # table); with lacp=passive and no partner it is "configured" (LACP
    # defaulted, nothing negotiated: no table), stable whatever the timing.
    golden("bonds", ["del-br br0", "add-br br0", "add-bond br0 bond0 p0 p1 bond_mode=balance-tcp", "bond-show",
                     "bond-show bond0 --format json", "pmd-bond-show", "pmd-bond-show --format json",
                     "pmd-bond-show --pmd", "pmd-bond-show bond0", "pmd-bond-show nosuch", "set port bond0 lacp=passive other_config:bond-hash-basis=3",
                     "bond-show bond0", "lacp-show", "lacp-show bond0 --format json", "pmd-bond-show",
                     "bond-disable-member bond0 p1", "bond-show bond0", "bond-enable-member bond0 p1",
                     "set port bond0 bond_mode=active-backup lacp=off", "bond-set-active-member bond0 p1",
                     "bond-set-active-member bond0 p1", "bond-show", "fdb-add br0 p1 0 00:00:00:00:00:01",
                     "fdb-add br0 p0 0 00:00:00:00:00:01", "fdb-show br0", "fdb-del br0 0 00:00:00:00:00:01",
                     "fdb-del br0 0 00:00:00:00:00:01", "show running-config", "bond-show nob", "lacp-show nob",
                     "bond-enable-member bond0 p7", "bond-set-active-member nob p0", "fdb-add br0 p0 0 zz",
                     "fdb-add brx p0 0 00:00:00:00:00:01", "fdb-add br0 p9 0 00:00:00:00:00:01"])


def test_drops():
    golden("drops", ["show drops", "show drops --format json", "coverage-show", "show drops --format xml"])


def test_faults():
    # Nothing moves on null ports, so what fires is only what the commands
    # make fire: the disk-full write memory (no stall point is armed: a
    # handler or revalidator could reach it before a show, and a stall's
    # report has a duration).
    golden("faults", ["debug fault show", "debug fault show --format json", "debug fault pool-exhausted --count 2",
                      "debug fault disk-full --short", "debug fault upcall-queue-full --count 3",
                      "debug fault show", "write memory", "debug fault clear disk-full",
                      "debug fault clear upcall-queue-full",
                      "debug fault show --format json", "write memory",
                      "debug fault clear", "debug fault show", "port-link p1 down", "debug fault show",
                      "debug fault handler-stall", "debug fault revalidator-slow 0", "debug fault disk-full --count 0",
                      "debug fault clear nosuch", "debug fault explode"])


def test_golden_json_parses():
    # Every "--format json" line in the golden files is one valid JSON object.
    import json
    for name in ("core", "datapath", "config", "logging", "bonds", "drops", "faults"):
        path = os.path.join(GOLDEN, name + ".txt")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                if line.startswith("{"):
                    json.loads(line.replace(":N", ":0"))


if __name__ == "__main__":
    main([test_core, test_datapath, test_config, test_logging, test_bonds, test_drops, test_faults, test_golden_json_parses])

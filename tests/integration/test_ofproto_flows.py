"""Every flows*.txt of ../shared/bench/scenarios loads unchanged with
`add-flows`: for each scenario, keel builds the bridges and ports its
topology.vsctl (and scenario.conf's rx port) asks for, on host-sim null
ports, loads each flows file into its bridge (flows.txt and its variants
into FLOWS_BRIDGE, flows.BRIDGE.txt into BRIDGE), and dump-flows shows one
rule per line of the file. Bonds and tunnel ports are stood in for by
plain ports (what is tested here is the rule syntax)."""
import os
import re

from harness import PATIENCE, check, json_lines, main, run_keel, tmpdir

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.environ.get("KEEL_SCENARIOS", os.path.join(HERE, "data", "scenarios"))


def conf(path):
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        m = re.match(r'\s*([A-Z_0-9]+)=("([^"]*)"|(\S*))', line)
        if m:
            out[m.group(1)] = m.group(3) if m.group(3) is not None else m.group(4)
    return out


def topology(d):
    """[(bridge, [(port, ofport or None)])] in file order."""
    bridges = []
    ports = {}

    def bridge(name):
        if name not in ports:
            ports[name] = []
            bridges.append(name)
        return ports[name]

    path = os.path.join(d, "topology.vsctl")
    for line in open(path) if os.path.exists(path) else []:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.split() for p in line.split(" -- ")]
        requested = {}
        for p in parts:
            if len(p) >= 3 and p[0] == "set" and p[1] == "Interface":
                for w in p[3:]:
                    if w.startswith("ofport_request="):
                        requested[p[2]] = int(w.split("=", 1)[1])
        for p in parts:
            if not p:
                continue
            if p[0] == "add-br":
                bridge(p[1])
            elif p[0] == "add-port":
                bridge(p[1]).append((p[2], requested.get(p[2])))
            elif p[0] == "add-bond":
                for member in p[3:]:
                    if "=" in member:
                        break
                    bridge(p[1]).append((member, requested.get(member)))
    c = conf(os.path.join(d, "scenario.conf"))
    if c.get("RX_BRIDGE") and c.get("RX_IFACE"):
        rx = (c["RX_IFACE"], int(c.get("RX_OFPORT", "0")) or None)
        bridge(c["RX_BRIDGE"]).insert(0, rx)
    return bridges, ports, c


def rules_in(path):
    return [l for l in open(path) if l.strip() and not l.strip().startswith("#")]


def flows_files(d, c, bridges):
    """[(file, bridge)]"""
    out = []
    for f in sorted(os.listdir(d)):
        if not re.match(r"flows.*\.txt$", f):
            continue
        m = re.match(r"flows\.(.+)\.txt$", f)
        br = m.group(1) if m and m.group(1) in bridges else c.get("FLOWS_BRIDGE", bridges[0] if bridges else "br0")
        out.append((os.path.join(d, f), br))
    return out


def load_scenario(name):
    d = os.path.join(SCENARIOS, name)
    bridges, ports, c = topology(d)
    check(bridges, "%s: topology has bridges" % name)
    port_args = []
    setup = []
    for br in bridges:
        setup.append("add-br %s" % br)
        for p, ofport in ports[br]:
            port_args += ["--port", "%s=null" % p]
            setup.append("add-port %s %s%s" % (br, p, " --ofport %d" % ofport if ofport else ""))
    empty = os.path.join(tmpdir(), "empty.cfg")  # not the board's default config (it cross-connects p0 p1)
    open(empty, "w").close()
    port_args += ["--config", empty]
    files = flows_files(d, c, bridges)
    check(files, "%s: has flows files" % name)
    for path, br in files:
        script = "\n".join(setup + ["add-flows %s %s" % (br, path), "dump-flows %s" % br,
                                    "dump-flows %s --format json" % br]) + "\n"
        p = run_keel(*port_args, stdin=script, timeout=PATIENCE)
        check(p.returncode == 0, "%s: %s loads" % (name, os.path.basename(path)), p)
        want = len(rules_in(path))
        text_rules = [l for l in p.stdout.splitlines() if l.startswith(" cookie=")]
        check(len(text_rules) == want, "%s: %s: %d rules in dump-flows, want %d" %
              (name, os.path.basename(path), len(text_rules), want), p)
        j = [x for x in json_lines(p.stdout) if "flows" in x]
        check(j and len(j[0]["flows"]) == want, "%s: json dump has %d rules" % (name, want), p)


def make_test(name):
    def t():
        load_scenario(name)
    t.__name__ = "test_scenario_" + name.replace("-", "_")
    return t


def scenario_names():
    if not os.path.isdir(SCENARIOS):
        return []
    return sorted(n for n in os.listdir(SCENARIOS) if os.path.isdir(os.path.join(SCENARIOS, n))
                  and any(re.match(r"flows.*\.txt$", f) for f in os.listdir(os.path.join(SCENARIOS, n))))


def test_scenarios_found():
    check(len(scenario_names()) >= 7, "the seven scenarios under %s" % SCENARIOS)


# The benchmark scenarios live in ../shared/bench/scenarios beside the repo;
# tests/integration/data/scenarios holds copies of their rule and topology
# files so the tests run from any clone. Where the originals are present,
# the copies must not have drifted.
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "bench", "scenarios"))


def test_copies_match_shared_bench():
    if not os.path.isdir(SHARED):
        print("(../shared/bench/scenarios not beside this clone: nothing to compare)")
        return
    for name in sorted(os.listdir(SHARED)):
        for f in sorted(os.listdir(os.path.join(SHARED, name))):
            if not (re.match(r"flows.*\.txt$", f) or
                    f in ("topology.vsctl", "scenario.conf", "setup.appctl", "setup.ip", "post.vsctl")):
                continue
            copy = os.path.join(HERE, "data", "scenarios", name, f)
            check(os.path.exists(copy), "%s/%s is copied into tests/integration/data/scenarios" % (name, f))
            with open(os.path.join(SHARED, name, f), "rb") as a, open(copy, "rb") as b:
                check(a.read() == b.read(), "%s/%s: the copy equals ../shared's" % (name, f))
    # The traffic generator test_drops.py replays the scenarios with.
    gen = os.path.join(os.path.dirname(SHARED), "gen_traffic.py")
    if os.path.exists(gen):
        with open(gen, "rb") as a, open(os.path.join(HERE, "data", "gen_traffic.py"), "rb") as b:
            check(a.read() == b.read(), "gen_traffic.py: the copy equals ../shared/bench's")


if __name__ == "__main__":
    main([test_scenarios_found, test_copies_match_shared_bench] + [make_test(n) for n in scenario_names()])

"""Tunnels for run_scenarios.py (issue 15): VXLAN push, keel's combined
translation (`tnl_push` and the underlay bridge's actions in one datapath
pass) against keel's recirculation mode (`set tunnel-combine false`:
`tnl_push` then `recirc`, the underlay bridge in a second pass) against
Open vSwitch 3.1, and VXLAN decap (`tnl_pop`, then the inner packet
forwarded) against Open vSwitch, at several flow counts, in one run.

Push: shared/bench/scenarios/vxlan-push, read from its own files. br-int: p0
(the pcap, replayed) -> vxlan0 (type=vxlan, key 100, remote 172.31.1.2,
local 172.31.1.1); br-phy owns 172.31.1.1/24 on its LOCAL port (setup.ip's
`ip addr` -> keel's `ip-add`), a route to the remote (ovs/route/add ->
route-add) and a static neighbour (tnl/arp/set -> neigh-set,
setup.appctl); br-phy's rules send LOCAL -> phy0 (net_null). Counted:
encapsulated packets out of phy0.

Decap ("vxlan-pop"): no such scenario in shared/bench, so it is generated
beside the run (a scenario directory in ovs_baseline.sh's format, from the
push scenario's addresses): the pcap is the push scenario's inner traffic
VXLAN-encapsulated by gen_traffic.py --vxlan (VNI = the tunnel's key, outer
source = the remote and its neighbour MAC, outer destination = local_ip and
br-phy's hwaddr, UDP checksum 0), received on br-phy's phy0 (the rx pcap);
br-phy: in_port=phy0 -> LOCAL, where the packet for the local address and
UDP port 4789 gets tnl_pop (OVS's terminate_native_tunnel); br-int:
in_port=vxlan0 -> vm0 (net_null). Counted: inner packets out of vm0.

Both sides get the same topology, the same rules, the same pcap, the same
core placement (PMD on core 1, the rest on core 0). Per round and flow
count, back to back: keel push combined, keel push recirc, Open vSwitch
push, keel decap, Open vSwitch decap; the ratios (combined / recirc,
keel / Open vSwitch) are per round, so the two runs of a ratio share the
load of the same minute.

Each keel run is checked: tx = rx, no misses, the datapath flows (flow-dump)
are what the mode promises: push combined has tnl_push and no recirc, push
recirc has tnl_push and recirc, decap has tnl_pop; recirculations per packet
0 / 1 / 1. A run that fails a check is a PROBLEM line (exit status 1).
Figures only: nothing here asserts a speed."""
import os
import re
import shlex
import shutil
import statistics
import tempfile
import time

PUSH_SCENARIO = "vxlan-push"
POP_SCENARIO = "vxlan-pop"   # generated (decap_scenario)
TUNNEL_TYPES = ("vxlan", "geneve", "gre")
# keel's modes: (who, scenario, extra config)
MODES = (("keel-combined", PUSH_SCENARIO, ""),
         ("keel-recirc", PUSH_SCENARIO, "set tunnel-combine false\n"),
         ("keel-decap", POP_SCENARIO, ""))
# Per round and flow count, in this order (back to back).
STEPS = (("keel-combined", PUSH_SCENARIO), ("keel-recirc", PUSH_SCENARIO), ("ovs", PUSH_SCENARIO),
         ("keel-decap", POP_SCENARIO), ("ovs", POP_SCENARIO))


def flows_label(n):
    if n == 1:
        return "1flow"
    if n % 1000 == 0:
        return "%dkflows" % (n // 1000)
    return "%dflows" % n


def traffic_args(base, n):
    args = list(base)
    if "--flows" in args:
        args[args.index("--flows") + 1] = str(n)
    else:
        args += ["--flows", str(n)]
    return args


# ---------------------------------------------------------------------------
# scenario files -> a model of the topology
# ---------------------------------------------------------------------------
def read_vsctl(path):
    """topology.vsctl -> (bridges {name: {col: value}} in order, ports
    {name: {"bridge": br, col: value}} in order). One ovs-vsctl invocation
    per line, commands split on ' -- '; add-br/add-port and `set
    bridge|Interface NAME col=value...` are understood, anything else is
    an error (the translation must not silently lose a setting)."""
    bridges, ports = {}, {}
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for part in [shlex.split(x) for x in line.split(" -- ")]:
            if not part:
                continue
            if part[0] == "add-br" and len(part) == 2:
                bridges.setdefault(part[1], {})
            elif part[0] == "add-port" and len(part) >= 3:
                cols = ports.setdefault(part[2], {})
                cols["bridge"] = part[1]
                for w in part[3:]:
                    k, _, v = w.partition("=")
                    cols[k] = v
            elif part[0] == "set" and len(part) >= 3 and part[1].lower() in ("bridge", "interface", "port"):
                table = bridges if part[1].lower() == "bridge" else ports
                if part[2] not in table:
                    raise ValueError("%s: set %s %s before it is added" % (path, part[1], part[2]))
                for w in part[3:]:
                    k, _, v = w.partition("=")
                    table[part[2]][k] = v
            else:
                raise ValueError("%s: ovs-vsctl %r is not translated to keel" % (path, " ".join(part)))
    return bridges, ports


def read_lines(path):
    if not os.path.exists(path):
        return []
    return [l.strip() for l in open(path) if l.strip() and not l.strip().startswith("#")]


def underlay_commands(scen_dir):
    """setup.ip and setup.appctl -> keel commands ([ip-add ...], [route-add / neigh-set ...])."""
    ips, rest = [], []
    for l in read_lines(os.path.join(scen_dir, "setup.ip")):
        t = l.split()
        # `addr add|replace A/L dev BR` -> the bridge's LOCAL port holds it.
        if t[0] == "addr" and t[1] in ("add", "replace") and len(t) == 5 and t[3] == "dev":
            ips.append("ip-add %s %s" % (t[4], t[2]))
        elif t[:2] == ["link", "set"] and t[-1] == "up":
            continue  # keel's LOCAL port has no link state
        else:
            raise ValueError("setup.ip %r has no keel equivalent" % l)
    for l in read_lines(os.path.join(scen_dir, "setup.appctl")):
        t = l.split()
        if t[0] == "ovs/route/add" and len(t) in (3, 4):
            rest.append("route-add " + " ".join(t[1:]))
        elif t[0] in ("tnl/arp/set", "tnl/neigh/set") and len(t) == 4:
            rest.append("neigh-set " + " ".join(t[1:]))
        else:
            raise ValueError("setup.appctl %r has no keel equivalent" % l)
    return ips, rest


def keel_config(scen_dir, conf, pcap, extra=""):
    """(config text, [--port specs]) for keel from the scenario's files.
    Order: bridges and their settings, the underlay addresses (a tunnel's
    local_ip must be owned by a bridge when the tunnel is added), the
    DPDK ports, the input port, the tunnel ports, routes and neighbours,
    the rules, then the mode's settings."""
    bridges, ports = read_vsctl(os.path.join(scen_dir, "topology.vsctl"))
    rx, rx_br = conf["RX_IFACE"], conf["RX_BRIDGE"]
    lines, specs, tunnels = [], [], []
    for br, cols in bridges.items():
        lines.append("add-br %s" % br)
        for k, v in cols.items():
            if k == "datapath_type":
                continue  # keel's datapath is the userspace one
            lines.append("set bridge %s %s=%s" % (br, k, v))
    ips, rest = underlay_commands(scen_dir)
    lines += ips
    specs.append("%s=dpdk:net_pcap0,rx_pcap=%s,infinite_rx=1" % (rx, pcap))
    dp_ports = []
    for name, cols in ports.items():
        typ = cols.get("type", "")
        words = []
        for k, v in cols.items():
            if k in ("bridge", "type") or k.startswith("options:dpdk-devargs"):
                continue
            words.append("%s=%s" % (k, v))
        if typ in TUNNEL_TYPES:
            tunnels.append("add-port %s %s type=%s %s" % (cols["bridge"], name, typ, " ".join(words)))
        elif typ == "dpdk":
            dev = cols.get("options:dpdk-devargs")
            if not dev:
                raise ValueError("port %s: type=dpdk without options:dpdk-devargs" % name)
            specs.append("%s=dpdk:%s" % (name, dev))
            dp_ports.append("add-port %s %s %s" % (cols["bridge"], name, " ".join(words)))
        else:
            raise ValueError("port %s: type=%s is not translated to keel" % (name, typ or "(none)"))
    lines += dp_ports
    lines.append("add-port %s %s ofport_request=%s" % (rx_br, rx, conf.get("RX_OFPORT", "1")))
    lines += tunnels + rest
    main_br = conf.get("FLOWS_BRIDGE", rx_br)
    lines.append("add-flows %s %s" % (main_br, os.path.join(scen_dir, "flows.txt")))
    for f in sorted(os.listdir(scen_dir)):
        m = re.fullmatch(r"flows\.(.+)\.txt", f)
        if m and m.group(1) in bridges:
            lines.append("add-flows %s %s" % (m.group(1), os.path.join(scen_dir, f)))
    return "".join(l.rstrip() + "\n" for l in lines) + extra, specs


def scenario_copy(src, dst, flows, traffic=None):
    """A copy of scenario `src` in `dst` whose scenario.conf lists one variant
    per flow count (label flows_label(n)) with that many flows, for
    ovs_baseline.sh (the shared original is not changed); `traffic`
    replaces TRAFFIC."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    path = os.path.join(dst, "scenario.conf")
    conf = open(path).read()
    base = traffic or shlex.split(re.search(r'^TRAFFIC="([^"]*)"', conf, re.M).group(1))
    lines = [l for l in conf.splitlines() if not re.match(r"^(VARIANTS|VARIANT_\w+|TRAFFIC)=", l)]
    lines.append('TRAFFIC="%s"' % " ".join(base))
    lines.append('VARIANTS="%s"' % " ".join(flows_label(n) for n in flows))
    for n in flows:
        lines.append('VARIANT_%s_TRAFFIC="%s"' % (flows_label(n), " ".join(traffic_args(base, n))))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return dst


def decap_scenario(rs, push_dir, dst, flows):
    """The decap scenario, generated from the push scenario's topology and
    addresses (see the module's doc): br-phy receives the encapsulated
    pcap on its uplink, br-int forwards the inner packet to vm0."""
    conf = rs.read_conf(os.path.join(push_dir, "scenario.conf"))
    bridges, ports = read_vsctl(os.path.join(push_dir, "topology.vsctl"))
    tun = [(n, c) for n, c in ports.items() if c.get("type") in TUNNEL_TYPES]
    if len(tun) != 1 or tun[0][1]["type"] != "vxlan":
        raise ValueError("%s: expected one vxlan port" % push_dir)
    tname, tcols = tun[0]
    uplink = [(n, c) for n, c in ports.items() if c.get("type") == "dpdk"]
    if len(uplink) != 1:
        raise ValueError("%s: expected one dpdk uplink port" % push_dir)
    up_name, up_cols = uplink[0]
    phy_br = up_cols["bridge"]
    neigh = [l.split() for l in read_lines(os.path.join(push_dir, "setup.appctl"))
             if l.split()[0] in ("tnl/arp/set", "tnl/neigh/set")]
    remote, local = tcols["options:remote_ip"], tcols["options:local_ip"]
    remote_mac = [t[3] for t in neigh if t[2] == remote]
    hw = bridges[phy_br].get("other_config:hwaddr")
    if not remote_mac or not hw:
        raise ValueError("%s: no neighbour MAC for %s or no hwaddr on %s" % (push_dir, remote, phy_br))
    vni = int(tcols.get("options:key", "0"))
    traffic = shlex.split(conf["TRAFFIC"]) + [
        "--vxlan", "--vxlan-vni", str(vni), "--outer-src-mac", remote_mac[0], "--outer-dst-mac", hw,
        "--outer-src-ip", remote, "--outer-dst-ip", local]
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    in_br = tcols["bridge"]
    tun_of = tcols.get("ofport_request", "2")
    vm_of = "1"
    with open(os.path.join(dst, "topology.vsctl"), "w") as f:
        for line in open(os.path.join(push_dir, "topology.vsctl")):
            # every line but the uplink's (the uplink becomes the rx pcap port)
            if not re.search(r"add-port\s+\S+\s+%s\b" % re.escape(up_name), line):
                f.write(line)
        f.write("add-port %s vm0 -- set Interface vm0 type=dpdk options:dpdk-devargs=net_null1,no-rx=1 "
                "ofport_request=%s\n" % (in_br, vm_of))
    with open(os.path.join(dst, "flows.txt"), "w") as f:
        f.write("in_port=%s,actions=output:%s\n" % (tun_of, vm_of))
    with open(os.path.join(dst, "flows.%s.txt" % phy_br), "w") as f:
        f.write("in_port=LOCAL,actions=output:%s\nin_port=%s,actions=LOCAL\n"
                % (up_cols.get("ofport_request", "1"), up_cols.get("ofport_request", "1")))
    for name in ("setup.ip", "setup.appctl"):
        if os.path.exists(os.path.join(push_dir, name)):
            shutil.copy(os.path.join(push_dir, name), dst)
    with open(os.path.join(dst, "scenario.conf"), "w") as f:
        f.write("# generated by tests/bench/tnl_bench.py from %s: VXLAN decap\n" % push_dir)
        f.write('DESCRIPTION="%s %s (VXLAN pcap) -> LOCAL (tnl_pop) -> %s %s -> vm0"\n'
                % (phy_br, up_name, in_br, tname))
        f.write("MEASURE=throughput\nRX_BRIDGE=%s\nRX_IFACE=%s\nRX_OFPORT=%s\nTX_IFACES=\"vm0\"\n"
                "FLOWS_BRIDGE=%s\n" % (phy_br, up_name, up_cols.get("ofport_request", "1"), in_br))
        f.write('TRAFFIC="%s"\n' % " ".join(traffic))
    return scenario_copy(dst, os.path.join(os.path.dirname(os.path.dirname(dst)), POP_SCENARIO), flows)


# ---------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------
def flow_checks(who, dump, r):
    """What the mode promises of keel's datapath flows and passes."""
    acts = [f.split(" actions:", 1)[1] if " actions:" in f else "" for f in dump]
    problems = []
    if who == "keel-combined":
        if not any("tnl_push(" in a for a in acts):
            problems.append("no tnl_push in the datapath flows")
        if any("recirc(" in a for a in acts):
            problems.append("combined mode, but a datapath flow recirculates")
        want = 0.0
    elif who == "keel-recirc":
        if not any("tnl_push(" in a and "recirc(" in a for a in acts):
            problems.append("recirculation mode, but no flow has tnl_push + recirc")
        want = 1.0
    else:
        if not any("tnl_pop(" in a for a in acts):
            problems.append("no tnl_pop in the datapath flows")
        want = 1.0
    if abs(r.get("recirc_per_pkt", 0.0) - want) > 0.02:
        problems.append("%.2f recirculations per packet, expected %.0f" % (r.get("recirc_per_pkt", 0.0), want))
    return problems


def emit(opt, scenario, variant, who, rnd, r):
    line = "scenario=%s variant=%s who=%s run=%d " % (scenario, variant, who, rnd)
    line += " ".join("%s=%s" % (k, ("%.3f" % v if isinstance(v, float) else
                                   str(v).replace(" ", "_") if v not in ("", None) else "-"))
                     for k, v in r.items() if k not in ("who", "run", "dump"))
    print(line, flush=True)
    if opt.results:
        with open(opt.results, "a") as f:
            f.write(line + "\n")


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def load_results(path):
    results = {}
    for line in open(path):
        if not line.startswith("scenario=") or " who=" not in line:
            continue
        kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
        if kv["scenario"] not in (PUSH_SCENARIO, POP_SCENARIO):
            continue
        r = {k: _num(v) for k, v in kv.items() if k not in ("scenario", "variant", "who")}
        r["problems"] = "" if r.get("problems") in ("-", None) else r["problems"]
        results.setdefault((kv["scenario"], kv["variant"], kv["who"]), []).append(r)
    return results


def configs(rs, opt, workdir, flows):
    """{(scenario, n, who): (config text, port specs)} and the OVS scenario dirs."""
    push_dir = os.path.join(opt.shared, "bench", "scenarios", PUSH_SCENARIO)
    push_conf = rs.read_conf(os.path.join(push_dir, "scenario.conf"))
    pop_dir = decap_scenario(rs, push_dir, os.path.join(workdir, "generated", POP_SCENARIO), flows)
    pop_conf = rs.read_conf(os.path.join(pop_dir, "scenario.conf"))
    push_copy = scenario_copy(push_dir, os.path.join(workdir, PUSH_SCENARIO), flows)
    out, pcaps = {}, {}
    for n in flows:
        for who, scen, extra in MODES:
            if scen == PUSH_SCENARIO and "push" not in opt.tunnel_rows:
                continue
            if scen == POP_SCENARIO and "decap" not in opt.tunnel_rows:
                continue
            d, conf = (push_dir, push_conf) if scen == PUSH_SCENARIO else (pop_dir, pop_conf)
            args = traffic_args(shlex.split(conf["TRAFFIC"]), n)
            if (scen, n) not in pcaps:
                pcaps[(scen, n)] = rs.gen_pcap(opt.shared, opt.cache, args)
            text, specs = keel_config(d, conf, pcaps[(scen, n)], extra)
            head = "# %s %s, %s: generated by tests/bench/tnl_bench.py from %s\n# traffic: %s\n" % (
                scen, flows_label(n), who, d, " ".join(args))
            out[(scen, n, who)] = (head + text, specs, conf)
    return out, {PUSH_SCENARIO: push_copy, POP_SCENARIO: pop_dir}


def report_tunnel(rs, opt):
    """Runs (or, --from-results, reprints) the tunnel tables. rs: the
    run_scenarios module. Returns the exit status."""
    flows = [int(x) for x in opt.tunnel_flows.split(",") if x]
    opt.tunnel_rows = [x for x in opt.tunnel_rows.split(",") if x] if isinstance(opt.tunnel_rows, str) \
        else opt.tunnel_rows
    if opt.from_results:
        results = load_results(opt.from_results)
        print(tables(results, flows, opt))
        loads = [r[k] for rr in results.values() for r in rr for k in ("load_start", "load_end")
                 if isinstance(r.get(k), float)]
        print("\nfrom %s; 1-min load average %s-%s" % (opt.from_results, "%.1f" % min(loads) if loads else "NA",
                                                       "%.1f" % max(loads) if loads else "NA"))
        return 0
    workdir = tempfile.mkdtemp(prefix="keel-tnl-bench-")
    try:
        cfgs, ovs_dirs = configs(rs, opt, workdir, flows)
    except ValueError as e:
        print("PROBLEM: tunnel scenarios: %s" % e)
        return 1
    if opt.show_flows:
        for (scen, n, who), (text, specs, _) in cfgs.items():
            print("## %s / %s / %s\n# keel --config X %s" % (scen, flows_label(n), who,
                                                              " ".join("--port " + s for s in specs)))
            print(text)
        print("# Open vSwitch runs: ovs_baseline.sh %s and %s" % (ovs_dirs[PUSH_SCENARIO], ovs_dirs[POP_SCENARIO]))
        if not opt.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        return 0
    ovs_ok = opt.ovs and os.access(rs.OVS_VSWITCHD, os.X_OK)
    if opt.ovs and not ovs_ok:
        rs.log("--ovs: Open vSwitch with DPDK is not installed (%s)" % rs.OVS_VSWITCHD)
    results, dumps, failures = {}, {}, []
    sides = [x for x in opt.tunnel_sides.split(",") if x]
    if "keel" in sides:
        # A private copy: a rebuild of build/host during the run must not
        # change the binary between rows.
        keel_src = opt.keel
        opt.keel = os.path.join(workdir, "keel")
        shutil.copy2(keel_src, opt.keel)
    t0 = time.time()
    for rnd in range(1, opt.runs + 1):
        for n in flows:
            v = flows_label(n)
            for who, scen in STEPS:
                if who == "ovs":
                    if not ovs_ok or "ovs" not in sides or not any(k[0] == scen for k in cfgs):
                        continue
                    o = rs.run_ovs(opt, ovs_dirs[scen], v, rnd, fields=None)
                    if not o:
                        failures.append("%s %s ovs run %d: ovs_baseline.sh failed" % (scen, v, rnd))
                        continue
                    odump = o.pop("dump", [])
                    o = {k: _num(val) for k, val in o.items() if k not in ("scenario", "variant", "run")}
                    o["ns_per_pkt"] = 1000.0 / o["mpps"] if isinstance(o.get("mpps"), float) and o["mpps"] > 0 \
                        else None
                    o["load_end"] = open("/proc/loadavg").read().split()[0]
                    o["flows"], o["run"] = n, rnd
                    dumps[(scen, v, "ovs")] = odump
                    results.setdefault((scen, v, "ovs"), []).append(o)
                    emit(opt, scen, v, "ovs", rnd, o)
                    continue
                if (scen, n, who) not in cfgs or "keel" not in sides:
                    continue
                text, specs, conf = cfgs[(scen, n, who)]
                p = {"pcap": "", "config": text, "rx": conf["RX_IFACE"], "tx": conf["TX_IFACES"].split()[0]}
                tag = "%s-%s-%s-%d" % (scen, v, who, rnd)
                try:
                    r = rs.run_keel(opt, workdir, tag, p, ports=specs)
                except rs.KeelError as e:
                    errf = os.path.join(workdir, tag + ".stderr")
                    err = open(errf).read().strip()[-600:] if os.path.exists(errf) else ""
                    msg = "%s %s %s run %d: %s%s" % (scen, v, who, rnd, e, (" | stderr: " + err) if err else "")
                    rs.log(msg)
                    failures.append(msg)
                    opt.keep = True
                    continue
                dump = (p.get("keel_dumps") or [[]])[-1]
                r["ns_per_pkt"] = 1000.0 / r["mpps"] if r["mpps"] > 0 else None
                probs = [x for x in [r.get("problems", "")] if x] + flow_checks(who, dump, r)
                r["problems"] = "; ".join(probs)
                r["flows"], r["run"] = n, rnd
                dumps[(scen, v, who)] = dump
                if r["problems"]:
                    failures.append("%s %s %s run %d: %s" % (scen, v, who, rnd, r["problems"]))
                results.setdefault((scen, v, who), []).append(r)
                emit(opt, scen, v, who, rnd, r)
    if not opt.keep and not failures:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        rs.log("work dir kept: " + workdir)
    print()
    print(tables(results, flows, opt))
    print()
    loads = [float(r[k]) for rr in results.values() for r in rr for k in ("load_start", "load_end")
             if isinstance(r.get(k), (str, float)) and re.fullmatch(r"[0-9.]+", str(r[k]))]
    print("runs: %d rounds; window %.0f s after %.0f s warm-up; wall time %.0f s; 1-min load average %s-%s"
          % (opt.runs, opt.seconds, opt.warmup, time.time() - t0,
             "%.1f" % min(loads) if loads else "NA", "%.1f" % max(loads) if loads else "NA"))
    for (scen, v, who), d in sorted(dumps.items()):
        # Open vSwitch's dump also holds the flows of the br-phy tap's own
        # IPv6 packets (main thread): the tunnel flows first.
        shown = sorted(d, key=lambda f: not ("tnl_" in f or "tunnel(" in f)) if who == "ovs" else d
        print("%s flow-dump, %s %s (last round): %d flows%s" % (
            "Open vSwitch dpctl/dump-flows" if who == "ovs" else "keel " + who, scen, v, len(d),
            "".join("\n    " + f for f in shown[:4]) + ("\n    ..." if len(shown) > 4 else "")))
    for f in failures:
        print("PROBLEM: " + f)
    return 1 if failures else 0


# ---------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------
def med_range(vals, nd=2):
    vals = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not vals:
        return "NA"
    if len(vals) == 1:
        return "%.*f" % (nd, vals[0])
    return "%.*f (%.*f-%.*f)" % (nd, statistics.median(vals), nd, min(vals), nd, max(vals))


def per_round(results, key_a, key_b, field="mpps"):
    b = {int(y.get("run", -1)): y for y in results.get(key_b, [])}
    out = []
    for x in results.get(key_a, []):
        y = b.get(int(x.get("run", -2)))
        if y and isinstance(x.get(field), float) and isinstance(y.get(field), float) and y[field] > 0:
            out.append(x[field] / y[field])
    return out


def goal(vals, target):
    vals = [v for v in vals if isinstance(v, float)]
    if not vals:
        return ""
    return " %s %.1fx" % ("≥" if statistics.median(vals) >= target else "**below**", target)


def tables(results, flows, opt):
    out = []
    rows = getattr(opt, "tunnel_rows", ["push", "decap"])
    if "push" in rows:
        hdr = ("| flows | keel combined Mpps | keel recirc Mpps | OVS Mpps | keel combined ns/pkt | "
               "keel recirc ns/pkt | OVS ns/pkt | combined / recirc (per round) | combined / OVS (per round) | "
               "recirc / OVS (per round) | cycles/pkt combined / recirc / OVS | dp flows combined / recirc | "
               "rounds |")
        out += ["VXLAN push (%s): keel combined (clone(tnl_push,...) one pass), keel recirc "
                "(`set tunnel-combine false`: tnl_push + recirc), Open vSwitch 3.1" % PUSH_SCENARIO, "",
                hdr, "|" + "---|" * (hdr.count("|") - 1)]
        for n in flows:
            v = flows_label(n)
            kc = results.get((PUSH_SCENARIO, v, "keel-combined"), [])
            kr = results.get((PUSH_SCENARIO, v, "keel-recirc"), [])
            ov = results.get((PUSH_SCENARIO, v, "ovs"), [])
            c_r = per_round(results, (PUSH_SCENARIO, v, "keel-combined"), (PUSH_SCENARIO, v, "keel-recirc"))
            c_o = per_round(results, (PUSH_SCENARIO, v, "keel-combined"), (PUSH_SCENARIO, v, "ovs"))
            r_o = per_round(results, (PUSH_SCENARIO, v, "keel-recirc"), (PUSH_SCENARIO, v, "ovs"))
            out.append("| %d | %s | %s | %s | %s | %s | %s | %s%s | %s%s | %s | %s / %s / %s | %s / %s | %d |" % (
                n, med_range([r.get("mpps") for r in kc]), med_range([r.get("mpps") for r in kr]),
                med_range([r.get("mpps") for r in ov]),
                med_range([r.get("ns_per_pkt") for r in kc], 1), med_range([r.get("ns_per_pkt") for r in kr], 1),
                med_range([r.get("ns_per_pkt") for r in ov], 1),
                med_range(c_r), goal(c_r, 1.3), med_range(c_o), goal(c_o, 1.5), med_range(r_o),
                med_range([r.get("cycles_per_pkt") for r in kc], 0),
                med_range([r.get("cycles_per_pkt") for r in kr], 0),
                med_range([r.get("cycles_per_pkt") for r in ov], 0),
                med_range([r.get("dp_flows") for r in kc], 0), med_range([r.get("dp_flows") for r in kr], 0),
                max(len(kc), len(kr), len(ov))))
    if "decap" in rows:
        hdr = ("| flows | keel Mpps | OVS Mpps | keel ns/pkt | OVS ns/pkt | keel / OVS (per round) | "
               "cycles/pkt keel / OVS | recirc/pkt keel / OVS | dp flows keel | rounds |")
        out += ["", "VXLAN decap (%s, generated: VXLAN pcap on br-phy -> LOCAL -> tnl_pop -> br-int -> vm0), "
                "keel vs Open vSwitch 3.1" % POP_SCENARIO, "", hdr, "|" + "---|" * (hdr.count("|") - 1)]
        for n in flows:
            v = flows_label(n)
            kd = results.get((POP_SCENARIO, v, "keel-decap"), [])
            ov = results.get((POP_SCENARIO, v, "ovs"), [])
            k_o = per_round(results, (POP_SCENARIO, v, "keel-decap"), (POP_SCENARIO, v, "ovs"))
            out.append("| %d | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s | %d |" % (
                n, med_range([r.get("mpps") for r in kd]), med_range([r.get("mpps") for r in ov]),
                med_range([r.get("ns_per_pkt") for r in kd], 1), med_range([r.get("ns_per_pkt") for r in ov], 1),
                med_range(k_o), med_range([r.get("cycles_per_pkt") for r in kd], 0),
                med_range([r.get("cycles_per_pkt") for r in ov], 0),
                med_range([r.get("recirc_per_pkt") for r in kd]), med_range([r.get("recirc_per_pkt") for r in ov]),
                med_range([r.get("dp_flows") for r in kd], 0), max(len(kd), len(ov))))
    return "\n".join(out)

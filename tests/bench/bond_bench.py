"""bond-balance-tcp for run_scenarios.py (issue 14): keel with
lb-output-action=true and false next to Open vSwitch 3.1 (ovs_baseline.sh)
with the same two settings, at several L4 flow counts, in one run.

The scenario is shared/bench/scenarios/bond-balance-tcp, read from its own
files: p0 (the pcap, replayed) -> NORMAL (flows.txt) -> balance-tcp bond0
{p1, p2} with LACP (topology.vsctl), the traffic's destination MAC a static
FDB entry on the bond (setup.appctl's fdb/add -> keel's fdb-add). keel's
members are what Open vSwitch's are: DPDK net_pcap vdevs whose rx_pcap
holds one LACPDU of a fake partner (gen_traffic.py --lacpdu, the scenario's
AUX_PCAPS) and whose tx drops. keel applies its config before its ports
start, so the partner's PDU arrives once the bond exists (Open vSwitch's
post.vsctl restarts its vdevs for that); with lacp-time=slow the partner
stays current for 90 s, longer than a run. As Open vSwitch's script does,
the input port joins the bridge last: keel boots with p0 outside the bridge
(what it receives is dropped without an upcall), waits for `bond-show` to
say negotiated with both members enabled (15 s, else keel is booted again,
BOOTS times at most), then
`add-port br0 p0`, then the warm-up; a sim input (--bond-rx sim,
--bond-sim-rx) is also held down (`port-link p0 down`) until then. (With p0
bridged from the start, 100k
flows of misses at boot can crowd the partner's one PDU out of the upcall
queue: the bond then stays `configured` and drops everything. Even
unbridged, the misses before p0's drop flow lands lose a member's PDU in
some boots, hence the boots again and, for a sim input, the link held down.)

Flow counts (--bond-flows, default 1,1000,100000,500000) become variants
`lb_output-<N>flows` / `recirc-<N>flows`; Open vSwitch runs them from a
copy of the scenario directory whose scenario.conf lists them (the shared
original is not changed). Per round, for each flow count: keel lb_output,
keel recirc, Open vSwitch lb_output, Open vSwitch recirc, back to back, so
the same-run ratios (keel lb_output / OVS lb_output, keel lb_output / keel
recirc, keel at N flows / keel at 1k) compare runs of the same minute.

keel's input port: DPDK net_pcap with infinite_rx=1 (Open vSwitch's); its
pool holds one mbuf per record, and host-sim's EAL has 512 MB, so rows of
more than --bond-dpdk-max-records records (150k) are not run and say why
(500k: "DPDK mbuf pool of 516384 mbufs (about 1134 MB ...) could not be
created"); --bond-sim-rx runs them with keel's sim pcap port instead
(pcap:in=FILE,loop=0; a different input path, said in the row), and
--bond-rx sim runs every keel row that way (one input path from 1 to 500k
flows: the flatness figure). Open vSwitch with
infinite_rx keeps every record in an mbuf of one mempool of at most 262144
mbufs (shared/bench/README.md; at 500k records ovs-vswitchd says "Not
enough mbufs to accommodate packets in pcap file. At least 500000 mbufs per
queue is required" and the rx port fails), so its rows above
--bond-ovs-max-flows (200k) are not run and say why.

Tx counted: p1 + p2 (keel: show ports; Open vSwitch: TX_IFACES)."""
import json
import os
import re
import shlex
import shutil
import statistics
import tempfile
import time

BOND_SCENARIO = "bond-balance-tcp"
# A keel run whose bond is not negotiated within the readiness wait is
# booted again, up to BOOTS times (the partner's one LACPDU is delivered
# once, at boot; some boots never process it: the bond stays
# `configured`). Each such boot is listed (NOT READY) and the run line
# carries boots=N.
BOOTS = 3


def flows_label(n):
    if n == 1:
        return "1flow"
    if n % 1000 == 0:
        return "%dkflows" % (n // 1000)
    return "%dflows" % n


def bond_variants(flows):
    """[(variant, mode, flows)], the scenario's naming (lb_output-1flow, recirc-10kflows)."""
    out = []
    for n in flows:
        for mode in ("lb_output", "recirc"):
            out.append(("%s-%s" % (mode, flows_label(n)), mode, n))
    return out


def traffic_args(base, n):
    """The scenario's TRAFFIC with --flows n. gen_traffic.py varies the
    source port first (1024-65535: 64512 values); more flows also vary the
    destination address over 16 values (the megaflow NORMAL installs for a
    bond doesn't match addresses: still one flow)."""
    args = list(base)
    args[args.index("--flows") + 1] = str(n)
    if n > 64512 and "--dst-ip" not in args:
        args += ["--dst-ip", "10.1.0.0-10.1.0.15"]
    return args


def scenario_copy(scen_dir, workdir, flows):
    """A copy of the scenario whose scenario.conf lists the variants of
    `flows` (their TRAFFIC and lb-output-action), for ovs_baseline.sh."""
    dst = os.path.join(workdir, BOND_SCENARIO)
    if os.path.exists(dst):
        return dst
    shutil.copytree(scen_dir, dst)
    path = os.path.join(dst, "scenario.conf")
    conf = open(path).read()
    traffic = re.search(r'^TRAFFIC="([^"]*)"', conf, re.M).group(1)
    lines = [l for l in conf.splitlines() if not re.match(r"^(VARIANTS|VARIANT_\w+)=", l)]
    variants = bond_variants(flows)
    lines.append('VARIANTS="%s"' % " ".join(v for v, _, _ in variants))
    for v, mode, n in variants:
        vk = v.replace("-", "_")
        lines.append('VARIANT_%s_VSCTL="set Port bond0 other_config:lb-output-action=%s"'
                     % (vk, "true" if mode == "lb_output" else "false"))
        lines.append('VARIANT_%s_TRAFFIC="%s"' % (vk, " ".join(traffic_args(shlex.split(traffic), n))))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return dst


def keel_config(scen_dir, conf, mode, lacp_pcaps):
    """(config text, {member: port spec}) for keel from the scenario's files."""
    lines, members = [], {}
    for line in open(os.path.join(scen_dir, "topology.vsctl")):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for part in [shlex.split(x) for x in line.split(" -- ")]:
            if not part:
                continue
            if part[0] == "add-br":
                lines.append("add-br %s" % part[1])
            elif part[0] == "add-bond":
                # add-bond BR BOND MEMBER... [column=value...]: keel's
                # add-bond takes Open vSwitch's words; lb-output-action is
                # the variant's.
                words = [w for w in part[1:] if "lb-output-action" not in w]
                words.append("other_config:lb-output-action=%s" % ("true" if mode == "lb_output" else "false"))
                lines.append("add-bond " + " ".join(words))
                for m in part[3:]:
                    if "=" not in m:
                        members[m] = None
            elif part[0] == "set" and part[1] == "Interface":
                for w in part[3:]:
                    mm = re.fullmatch(r"options:dpdk-devargs=(\S+)", w)
                    if mm:
                        dev = mm.group(1)
                        for name, pcap in lacp_pcaps.items():
                            dev = dev.replace("@%s@" % name, pcap)
                        members[part[2]] = "dpdk:" + dev
    rx_br = conf.get("RX_BRIDGE", "br0")
    lines.append("add-flows %s %s" % (conf.get("FLOWS_BRIDGE", rx_br), os.path.join(scen_dir, "flows.txt")))
    for a in open(os.path.join(scen_dir, "setup.appctl")):
        t = a.split()
        if not t or t[0].startswith("#"):
            continue
        if t[0] == "fdb/add" and len(t) == 5:
            lines.append("fdb-add %s" % " ".join(t[1:]))
        else:
            raise ValueError("setup.appctl %r has no keel equivalent" % a.strip())
    missing = [m for m, spec in members.items() if not spec]
    if missing:
        raise ValueError("no dpdk-devargs for bond member(s) %s in topology.vsctl" % ", ".join(missing))
    return "".join(l + "\n" for l in lines), members


def bond_ready(js):
    """bond-show --format json: every bond negotiated with all members enabled."""
    bonds = js.get("bonds", [])
    return bool(bonds) and all(b.get("lacp_status") == "negotiated" and b.get("members") and
                               all(m.get("enabled") for m in b["members"]) for b in bonds)


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def med_range(vals, nd=2):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "NA"
    if len(vals) == 1:
        return "%.*f" % (nd, vals[0])
    return "%.*f (%.*f-%.*f)" % (nd, statistics.median(vals), nd, min(vals), nd, max(vals))


def load_results(path, variants):
    """The table's runs from the lines emit() wrote (--results), for --from-results."""
    results, wanted = {}, {v for v, _, _ in variants}
    for line in open(path):
        if not line.startswith("scenario=%s " % BOND_SCENARIO) or " who=" not in line:
            continue
        kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
        if kv["variant"] not in wanted:
            continue
        r = {k: _num(v) for k, v in kv.items() if k not in ("scenario", "variant", "who")}
        results.setdefault((kv["who"], kv["variant"]), []).append(r)
    return results


def report_bond(rs, opt):
    """Runs the bond table. rs: run_scenarios (its run_keel, run_ovs,
    gen_pcap, Keel...). Returns the exit status."""
    scen_dir = os.path.join(opt.shared, "bench", "scenarios", BOND_SCENARIO)
    if opt.from_results:
        flows = [int(x) for x in opt.bond_flows.split(",") if x]
        variants = bond_variants(flows)
        results = load_results(opt.from_results, variants)
        skipped = {n: "not run" for _, _, n in variants if not results.get(("keel", "lb_output-" + flows_label(n)))}
        print(bond_table(results, variants, opt, any(k[0] == "ovs" for k in results), skipped))
        loads = [r[k] for rr in results.values() for r in rr for k in ("load_start", "load_end")
                 if isinstance(r.get(k), float)]
        print("\nfrom %s; 1-min load average %s-%s" % (opt.from_results, "%.1f" % min(loads) if loads else "NA",
                                                       "%.1f" % max(loads) if loads else "NA"))
        return 0
    conf = rs.read_conf(os.path.join(scen_dir, "scenario.conf"))
    flows = [int(x) for x in opt.bond_flows.split(",") if x]
    variants = bond_variants(flows)
    only = set(v for v in opt.variants.split(",") if v)
    if only:
        variants = [v for v in variants if v[0] in only]
    lacp = {name: rs.gen_pcap(opt.shared, opt.cache, shlex.split(conf["AUX_PCAP_" + name]))
            for name in conf.get("AUX_PCAPS", "").split()}
    base = shlex.split(conf["TRAFFIC"])
    pcaps = {}
    for _, _, n in variants:
        if n not in pcaps:
            pcaps[n] = rs.gen_pcap(opt.shared, opt.cache, traffic_args(base, n))
    ovs_ok = opt.ovs and os.access(rs.OVS_VSWITCHD, os.X_OK)
    if opt.ovs and not ovs_ok:
        rs.log("--ovs: Open vSwitch with DPDK is not installed (%s)" % rs.OVS_VSWITCHD)
    workdir = tempfile.mkdtemp(prefix="keel-bond-bench-")
    keel_src = opt.keel
    opt.keel = os.path.join(workdir, "keel")
    shutil.copy2(keel_src, opt.keel)
    scen_copy = scenario_copy(scen_dir, workdir, flows)
    results = {}  # (who, variant) -> [run dicts]
    dumps = {}    # (variant, round) -> keel's flow-dump at the end of the run
    skipped = {}  # flows -> why keel's rows were not run
    not_ready = []  # boots whose bond never negotiated (booted again)
    failures = []
    t0 = time.time()
    tx_names = conf["TX_IFACES"].split()
    for rnd in range(1, opt.runs + 1):
        for v, mode, n in variants:
            records = rs.pcap_records(pcaps[n])
            sim_rx = records > opt.bond_dpdk_max_records or opt.bond_rx == "sim"
            if sim_rx and not (opt.bond_sim_rx or opt.bond_rx == "sim"):
                results.setdefault(("keel", v), [])
                skipped[n] = ("not run: %d records > %d (keel's DPDK pool, one mbuf a record, in host-sim's "
                              "512 MB EAL)" % (records, opt.bond_dpdk_max_records))
            else:
                try:
                    text, members = keel_config(scen_dir, conf, mode, lacp)
                except ValueError as e:
                    return _fail(rs, "bond-balance-tcp: " + str(e))
                rx = conf["RX_IFACE"]
                ports = [("%s=pcap:in=%s,loop=0" if sim_rx else "%s=dpdk:net_pcap0,rx_pcap=%s,infinite_rx=1")
                         % (rx, pcaps[n])] + ["%s=%s" % (m, spec) for m, spec in members.items()]
                after = ["add-port %s %s" % (conf.get("RX_BRIDGE", "br0"), rx)]
                if sim_rx:
                    # A sim port's link can be down (port-link): it then
                    # receives nothing, not even the misses that precede
                    # the unbridged port's drop flow.
                    text += "port-link %s down\n" % rx
                    after.insert(0, "port-link %s up" % rx)
                p = {"pcap": pcaps[n], "config": text, "rx": rx, "tx": "+".join(tx_names),
                     "ready": ("bond-show --format json", bond_ready,
                               "bond-show: lacp_status negotiated, every member enabled"),
                     "after_ready": after, "ready_timeout": 15}
                r, boots = None, 0
                while r is None and boots < BOOTS:
                    boots += 1
                    tag = "bond-%s-%d-boot%d" % (v, rnd, boots)
                    try:
                        r = rs.run_keel(opt, workdir, tag, p, ports=ports)
                    except rs.KeelError as e:
                        errf = os.path.join(workdir, tag + ".stderr")
                        err = open(errf).read().strip()[-600:] if os.path.exists(errf) else ""
                        msg = "keel %s run %d boot %d: %s%s" % (v, rnd, boots, e, (" | stderr: " + err) if err else "")
                        rs.log(msg)
                        if "not ready" in str(e) and boots < BOOTS:
                            not_ready.append(msg)
                            continue
                        failures.append(msg)
                        opt.keep = True
                        r = None
                        break
                if r is not None:
                    r.update({"who": "keel", "mode": mode, "flows": n, "rx_port": "sim-pcap" if sim_rx else "dpdk",
                              "boots": boots, "run": rnd})
                    dump = (p.get("keel_dumps") or [[]])[-1]
                    dumps[(v, rnd)] = dump
                    if r["problems"]:
                        failures.append("keel %s run %d: %s" % (v, rnd, r["problems"]))
                    results.setdefault(("keel", v), []).append(r)
                    emit(opt, "keel", v, rnd, r)
            if ovs_ok:
                if n > opt.bond_ovs_max_flows:
                    results.setdefault(("ovs", v), [])
                    continue
                o = rs.run_ovs(opt, scen_copy, v, rnd, fields=None)
                if o:
                    o = {k: _num(val) for k, val in o.items() if k not in ("dump", "scenario", "variant", "run")}
                    o.update({"who": "ovs", "mode": mode, "flows": n, "run": rnd,
                              "load_end": open("/proc/loadavg").read().split()[0]})
                    results.setdefault(("ovs", v), []).append(o)
                    emit(opt, "ovs", v, rnd, o)
                else:
                    failures.append("ovs %s run %d: ovs_baseline.sh failed" % (v, rnd))
    if not opt.keep and not failures:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        rs.log("work dir kept: " + workdir)
    print()
    print(bond_table(results, variants, opt, ovs_ok, skipped))
    print()
    loads = [float(r[k]) for rr in results.values() for r in rr for k in ("load_start", "load_end") if k in r]
    print("runs: %d rounds; window %.0f s after %.0f s warm-up; wall time %.0f s; 1-min load average %s-%s"
          % (opt.runs, opt.seconds, opt.warmup, time.time() - t0,
             "%.1f" % min(loads) if loads else "NA", "%.1f" % max(loads) if loads else "NA"))
    # keel's datapath flows of the last round, lb_output and recirc at
    # each flow count (the issue: one megaflow hash(l4(0)),lb_output(N)
    # serves any number of L4 flows; recirc: 1 + one per used bucket).
    for v, _, n in variants:
        d = dumps.get((v, opt.runs))
        if d is not None:
            print("keel flow-dump, %s (round %d): %d flows%s" % (v, opt.runs, len(d), "".join(
                "\n    " + f for f in d[:4]) + ("\n    ..." if len(d) > 4 else "")))
    for f in not_ready:
        print("NOT READY (booted again): " + f)
    for f in failures:
        print("PROBLEM: " + f)
    return 1 if failures else 0


def _fail(rs, msg):
    print("PROBLEM: " + msg)
    return 1


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def emit(opt, who, variant, rnd, r):
    line = "scenario=%s variant=%s who=%s run=%d " % (BOND_SCENARIO, variant, who, rnd)
    line += " ".join("%s=%s" % (k, ("%.3f" % v if isinstance(v, float) else
                                   str(v).replace(" ", "_") if v not in ("", None) else "-"))
                     for k, v in r.items() if k not in ("who", "run"))
    print(line, flush=True)
    if opt.results:
        with open(opt.results, "a") as f:
            f.write(line + "\n")


def per_round(results, key_a, key_b):
    """Same-round ratios a/b (runs paired by their round)."""
    b = {int(y.get("run", -1)): y for y in results.get(key_b, [])}
    out = []
    for x in results.get(key_a, []):
        y = b.get(int(x.get("run", -2)))
        if y and isinstance(x.get("mpps"), float) and isinstance(y.get("mpps"), float) and y["mpps"] > 0:
            out.append(x["mpps"] / y["mpps"])
    return out


def bond_table(results, variants, opt, ovs_ok, skipped):
    flows = []
    for _, _, n in variants:
        if n not in flows:
            flows.append(n)
    hdr = ("| flows | keel lb_output Mpps | keel recirc Mpps | OVS lb_output Mpps | OVS recirc Mpps "
           "| keel lb / OVS lb | keel lb / keel recirc | OVS lb / OVS recirc | keel lb vs 1k flows "
           "| keel cycles/pkt lb / recirc | keel dp flows lb / recirc | keel rx port |")
    out = [hdr, "|" + "---|" * (hdr.count("|") - 1)]
    for n in flows:
        lb, rc = "lb_output-" + flows_label(n), "recirc-" + flows_label(n)
        kl, kr = results.get(("keel", lb), []), results.get(("keel", rc), [])
        ol, orr = results.get(("ovs", lb), []), results.get(("ovs", rc), [])
        if not ovs_ok:
            ovs_l = ovs_r = "not run (--ovs)"
        elif n > opt.bond_ovs_max_flows:
            ovs_l = ovs_r = "not run: net_pcap needs %d mbufs (one a record), OVS's mempool holds 262144" % n
        else:
            ovs_l, ovs_r = med_range([r.get("mpps") for r in ol]), med_range([r.get("mpps") for r in orr])
        base = "lb_output-" + flows_label(1000)
        flat = per_round(results, ("keel", lb), ("keel", base)) if ("keel", base) in results else []
        k_l = skipped.get(n) or med_range([r["mpps"] for r in kl])
        k_r = skipped.get(n) or med_range([r["mpps"] for r in kr])
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s |" % (
            n, k_l, k_r, ovs_l, ovs_r,
            med_range(per_round(results, ("keel", lb), ("ovs", lb))),
            med_range(per_round(results, ("keel", lb), ("keel", rc))),
            med_range(per_round(results, ("ovs", lb), ("ovs", rc))),
            med_range(flat) if flat else "-",
            med_range([r.get("cycles_per_pkt") for r in kl], 0), med_range([r.get("cycles_per_pkt") for r in kr], 0),
            med_range([r.get("dp_flows") for r in kl], 0), med_range([r.get("dp_flows") for r in kr], 0),
            "/".join(sorted({r.get("rx_port", "?") for r in kl + kr})) or "-"))
    return "\n".join(out)

"""offload_bench.py -- p2p-10kflows with hardware offload on (issue 16),
for run_scenarios.py --offload.

keel runs the scenario's OpenFlow rules (the plan row run_scenarios.py
built: add-br, add-flows) on sim ports, because only the sim backend has a
flow engine that accepts rules here (DPDK vdevs answer ENOSYS; net_tap
needs TC flower, which this host kernel lacks):

  p0 = pcap:in=PCAP,loop=0,rxq=Q   (the scenario's pcap, replayed forever;
                                    Q = --offload-rxq, default 2: the sim
                                    NIC's RSS then gives every packet its
                                    hash, as a NIC does, which the PMD's
                                    hot-microflow sampler indexes by; with
                                    rxq=1 nothing is hashed)
  p1 = null

with `offload enable` and `set offload-mode MODE` (--offload-modes,
default exact,megaflow), and the same row with offload disabled in the same
round (the reference). Per run:

  1. boot, then poll offload-show every 0.25 s until the hardware holds a
     rule for every flow (exact: one exact-match rule per microflow, i.e.
     TARGET_FLOWS rules; megaflow: one masked rule per megaflow) or
     --offload-warmup-max s pass: `offload_s` is that time (from boot);
  2. wait --warmup s more, read `show ports` and `pmd-stats-show`, wait
     --seconds, read them again (hardware-forwarded packets count at the
     ingress port, p0's rx hw_forwarded, not in p1's tx):
       hw_share  = (p0 rx hw_forwarded + hw_dropped) / p0 rx packets over
                   the window: the share of packets that never reached a PMD
       pmd_mpps  = what the PMDs received over the window (what remains)
       rx_mpps   = p0's receive rate (the sim port's whole input), tx_mpps
                   = p1's transmit rate (hardware + PMD);
  3. offload-show: rules by table, failures; flow-dump --offloaded: flows.

The sim NIC model forwards a full-offload packet inside the port's rx
(hal::HwIngress) on the PMD's thread -- the "hardware" costs the PMD's CPU
in this simulation, so rx_mpps with offload is NOT a NIC's throughput; the
figures that mean something are hw_share (goal: 100 % after warm-up) and
pmd_mpps (what is left for the Arm cores).

python3 stdlib only; root is not needed (no DPDK port), but run_scenarios.py
asks for it anyway.
"""
import os
import shutil
import statistics
import tempfile
import time

OFFLOAD_SCENARIOS = ("p2p-10kflows",)


def run_one(rs, opt, workdir, tag, p, mode):
    """One keel run of row p with offload in `mode` (None: disabled)."""
    cfg = os.path.join(workdir, tag + ".conf")
    with open(cfg, "w") as f:
        f.write(p["config"])
        if mode:
            f.write("set offload-mode %s\noffload enable\n" % mode)
    argv = [opt.keel, "--config", cfg, "--config-dir", workdir,
            "--port", "%s=pcap:in=%s,loop=0%s" % (p["rx"], p["pcap"], ",rxq=%d" % opt.offload_rxq
                                                  if opt.offload_rxq > 1 else ""),
            "--port", "%s=null" % p["tx"]]
    k = rs.Keel(argv, os.path.join(workdir, tag + ".stderr"))
    res = {"load_start": float(open("/proc/loadavg").read().split()[0])}
    target = p.get("target_flows") or 10000
    try:
        t0 = time.monotonic()
        k.json("show ports --format json", timeout=180)
        res["offload_s"] = None
        if mode:
            deadline = t0 + opt.offload_warmup_max
            want = target if mode == "exact" else 1
            while time.monotonic() < deadline:
                s = k.json("offload-show --format json", timeout=60)
                if s["totals"]["rules_full"] >= want:
                    res["offload_s"] = time.monotonic() - t0
                    break
                time.sleep(0.25)
        time.sleep(opt.warmup)
        k.send("pmd-stats-clear")
        t_a = time.monotonic()
        a = k.json("show ports --format json", timeout=30)
        pa = k.json("pmd-stats-show --format json", timeout=30)
        t_b = time.monotonic()
        time.sleep(opt.seconds)
        t_c = time.monotonic()
        b = k.json("show ports --format json", timeout=30)
        pb = k.json("pmd-stats-show --format json", timeout=30)
        t_d = time.monotonic()
        show = k.json("offload-show --format json", timeout=60)
        off = k.json("flow-dump --offloaded --terse --format json", timeout=120)
        rc = k.exit()
    except BaseException:
        k.kill()
        raise
    elapsed = ((t_c + t_d) - (t_a + t_b)) / 2
    rx_a, rx_b = rs.port_by_name(a, p["rx"])["rx"], rs.port_by_name(b, p["rx"])["rx"]
    tx_a, tx_b = rs.port_by_name(a, p["tx"])["tx"], rs.port_by_name(b, p["tx"])["tx"]
    d_rx = rx_b["packets"] - rx_a["packets"]
    d_hw = (rx_b.get("hw_forwarded", 0) + rx_b.get("hw_dropped", 0)) - \
           (rx_a.get("hw_forwarded", 0) + rx_a.get("hw_dropped", 0))
    pmd = lambda js: sum(x["packets_received"] for x in js["pmds"])
    d_pmd = pmd(pb) - pmd(pa)  # pmd-stats-clear came before a: a is ~0
    phwol = sum(x.get("phwol_hits", 0) for x in pb["pmds"]) - sum(x.get("phwol_hits", 0) for x in pa["pmds"])
    tables = {}
    for port in show["ports"]:
        for t in port["tables"]:
            tables[t["table"]] = tables.get(t["table"], 0) + t["rules"]
    res.update({
        "mode": mode or "off", "keel_rc": rc, "seconds": elapsed,
        "rx_mpps": d_rx / elapsed / 1e6, "tx_mpps": (tx_b["packets"] - tx_a["packets"] + rx_b.get("hw_forwarded", 0) - rx_a.get("hw_forwarded", 0))
        / elapsed / 1e6,
        "pmd_mpps": d_pmd / elapsed / 1e6, "hw_share_pct": 100.0 * d_hw / d_rx if d_rx else 0.0,
        "phwol_hits": phwol, "rules_full": show["totals"]["rules_full"],
        "rules_partial": show["totals"]["rules_partial"],
        "rules_exact": tables.get("exact", 0), "rules_masked": tables.get("masked", 0),
        "failed": sum(show["totals"]["failed"].values()), "flows_offloaded": len(off["flows"]),
        "hot_microflows": show.get("hot_microflows", 0), "events": show.get("events", 0),
        "events_lost": show.get("events_lost", 0),
        "hot_lost": sum(x.get("offload_hot_lost", 0) for x in pb["pmds"]),
        "load_end": float(open("/proc/loadavg").read().split()[0]),
    })
    problems = []
    if rc != 0:
        problems.append("keel exit status %d" % rc)
    if mode and res["offload_s"] is None:
        problems.append("the hardware never held %d rules within %d s" % (
            target if mode == "exact" else 1, opt.offload_warmup_max))
    # Hardware-forwarded packets count at the ingress (rx hw_forwarded), not
    # in the egress port's tx: what came in = what the PMDs sent + hw.
    d_tx = tx_b["packets"] - tx_a["packets"]
    d_fwd = rx_b.get("hw_forwarded", 0) - rx_a.get("hw_forwarded", 0)
    if d_rx and abs(d_rx - (d_tx + d_fwd)) > max(64, d_rx // 100):
        problems.append("rx %d != PMD tx %d + hw forwarded %d over the window" % (d_rx, d_tx, d_fwd))
    res["problems"] = "; ".join(problems)
    return res


def report_offload(rs, opt, plan):
    rows = [p for p in plan if not p["skip"] and p["scenario"] in OFFLOAD_SCENARIOS]
    modes = [m for m in opt.offload_modes.split(",") if m]
    failures = []
    if opt.from_results:
        recs = rs.results_lines(opt.from_results, "offload")
    else:
        recs = []
        workdir = tempfile.mkdtemp(prefix="keel-offload-")
        keel_src = opt.keel
        opt.keel = os.path.join(workdir, "keel")
        shutil.copy2(keel_src, opt.keel)
        for rnd in range(1, opt.runs + 1):
            for p in rows:
                for mode in [None] + modes:
                    tag = "%s-%s-%s-%d" % (p["scenario"], p["variant"], mode or "off", rnd)
                    try:
                        r = run_one(rs, opt, workdir, tag, p, mode)
                    except rs.KeelError as e:
                        failures.append("%s: %s" % (tag, e))
                        rs.log(failures[-1])
                        continue
                    if r["problems"]:
                        failures.append("%s: %s" % (tag, r["problems"]))
                    rec = {"scenario": p["scenario"], "variant": p["variant"], "run": rnd, "kind": "offload"}
                    rec.update({k: v for k, v in r.items() if k != "problems"})
                    rs.emit(opt, rec)
                    recs.append(rec)
        rs.drop_workdir(opt, workdir, failures)
    print()
    print("| scenario | variant | offload | rounds | hw share of rx after warm-up: **median** (min-max) | "
          "PMD Mpps (what remains) | sim rx Mpps | hw rules (exact / masked) | flows offloaded | "
          "time to offload every flow, s | failed inserts | 1-min load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in rows:
        for mode in ["off"] + modes:
            rs_ = [r for r in recs if r["scenario"] == p["scenario"] and r["variant"] == p["variant"]
                   and r["mode"] == mode]
            if not rs_:
                continue
            num = lambda k: [float(r[k]) for r in rs_ if r.get(k) not in (None, "None", "")]
            share = num("hw_share_pct")
            mm = lambda v, nd=1: ("**%.*f** (%.*f-%.*f)" % (nd, statistics.median(v), nd, min(v), nd, max(v))
                                  if v else "NA")
            loads = num("load_start") + num("load_end")
            print("| %s | %s | %s | %d | %s | %s | %s | %s / %s | %s | %s | %s | %s |" % (
                p["scenario"], p["variant"], mode, len(rs_), mm(share) + " %" if share else "NA",
                mm(num("pmd_mpps"), 3), mm(num("rx_mpps"), 3),
                "%d" % statistics.median(num("rules_exact")) if num("rules_exact") else "NA",
                "%d" % statistics.median(num("rules_masked")) if num("rules_masked") else "NA",
                "%d" % statistics.median(num("flows_offloaded")) if num("flows_offloaded") else "NA",
                mm(num("offload_s"), 2), "%d" % max(num("failed")) if num("failed") else "NA",
                "%.1f-%.1f" % (min(loads), max(loads)) if loads else "NA"))
    print("\nkeel on sim ports p0=pcap:in=PCAP,loop=0 -> p1=null (the sim NIC model's flow engine; DPDK vdevs "
          "accept no rte_flow rule here), offload off / `set offload-mode MODE` + `offload enable`; hw share = "
          "p0's rx_hw_forwarded + rx_hw_dropped over its rx packets in the window; PMD Mpps = the PMDs' "
          "packets_received rate. The model forwards inside the port's rx on the PMD's thread, so sim rx Mpps "
          "is not a NIC's rate. %d cores." % os.cpu_count())
    for f in failures:
        print("PROBLEM: " + f)
    return 1 if failures else 0

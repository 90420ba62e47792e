#!/usr/bin/env python3
"""instructions.py -- keel's instructions per packet on each datapath path,
counted with valgrind's cachegrind: a figure the machine's load cannot move.

Runs the host preset's bench_pipeline (tests/bench/bench_pipeline.cpp: the
real PMD pipeline over sim ring ports, N packets on one configured path)
under `valgrind --tool=cachegrind --cache-sim=no` twice per path, with N and
2N packets and the same pool/ring capacity (2N), and reports

    instructions/packet = (Ir(2N) - Ir(N)) / N

so that boot, flow installs and shutdown cancel. The same difference per
function (cachegrind's per-function Ir, inlined code counted in the function
it was inlined into) gives where a path's instructions go. Each run is
checked: every packet forwarded, and the PMD's counters show the path
(e.g. emc: EMC hits; dpcls16: 8.5 subtable lookups per hit).

It builds nothing: build first with
  cmake --preset host && cmake --build --preset host --target bench_pipeline

  tests/bench/instructions.py                       # every path, N = 20000, top 6 functions
  tests/bench/instructions.py --paths emc,smc --packets 40000 --top 10
  tests/bench/instructions.py --markdown t.md       # also write the tables

  tests/bench/instructions.py --repeat 3            # 3 pairs per path: median (min-max)

python3 stdlib only; valgrind (toolchains/setup.sh installs it).
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATHS = [
    ("xconnect", "port cross-connect (no parse, no lookup): ring rx/tx + driver floor"),
    ("simple", "simple match (in_port-only megaflow, 1 flow)"),
    ("emc", "EMC hit (1024 flows, EMC insert 1/1)"),
    ("smc", "SMC hit (1024 flows, EMC off, SMC on)"),
    ("dpcls1", "dpcls hit, 1 subtable probed (EMC, SMC off)"),
    ("dpcls16", "dpcls hit, 16 masks, 8.5 subtables probed (EMC, SMC off)"),
    ("lb_output", "balance-tcp bond: hash(l4(0)),lb_output(1), one megaflow (1024 flows, EMC, SMC off)"),
    ("recirc_bond", "balance-tcp bond by recirculation: hash(l4(0)),recirc, 256 dp_hash megaflows (2 passes)"),
    ("mark", "partial offload: NIC MARK -> mark table, output only (dpcls1's flow and traffic; no parse, no lookup)"),
    ("mark_lb", "partial offload: NIC MARK -> mark table, then a parse for hash(l4(0)),lb_output(1) (no lookup)"),
    ("upcall", "upcall to install (new 5-tuple each, megaflows off, stand-in xlate)"),
]
# What each path's checked counter must say for (nearly) every packet.
EXPECT = {"xconnect": "xconnect", "simple": "simple", "emc": "emc", "smc": "smc", "dpcls1": "megaflow",
          "dpcls16": "megaflow", "lb_output": "megaflow", "recirc_bond": "megaflow", "mark": "phwol", "mark_lb": "phwol",
          "upcall": "installs"}


def run_cg(valgrind, binary, path, n, capacity, workdir):
    """One cachegrind run -> (total Ir, {function: Ir}, the binary's result line)."""
    out = os.path.join(workdir, "cg.%s.%d" % (path, n))
    p = subprocess.run([valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=" + out,
                        binary, path, str(n), str(capacity)], capture_output=True, text=True, timeout=3600)
    line = next((l for l in p.stdout.splitlines() if l.startswith("bench_pipeline ")), "")
    if p.returncode != 0 or not line:
        sys.exit("instructions.py: %s %s %d failed (rc=%d): %s" % (binary, path, n, p.returncode,
                                                                  (p.stderr or p.stdout)[-800:]))
    funcs, total, fn = {}, None, None
    with open(out) as f:
        for l in f:
            if l.startswith("fn="):
                fn = l[3:].strip()
            elif l[:1].isdigit() and fn is not None:
                parts = l.split()
                if len(parts) >= 2:
                    funcs[fn] = funcs.get(fn, 0) + int(parts[1])
            elif l.startswith("summary:"):
                total = int(l.split()[1])
    return total, funcs, line


def short(fn, width=70):
    """A C++ function name without its argument list and namespace noise."""
    fn = re.sub(r" const$", "", fn)
    if fn.endswith(")"):  # drop the last top-level (...) group: the arguments
        depth = 0
        for i in range(len(fn) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(fn[i], 0)
            if depth == 0:
                fn = fn[:i]
                break
    fn = fn.replace("keel::", "").replace("std::", "")
    return fn if len(fn) <= width else fn[:width - 3] + "..."


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(REPO, "build", "host", "tests", "bench", "bench_pipeline"))
    ap.add_argument("--packets", type=int, default=20000, help="N (20000): runs with N and 2N packets")
    ap.add_argument("--paths", default="", help="comma list (all): " + ",".join(p for p, _ in PATHS))
    ap.add_argument("--top", type=int, default=6, help="functions listed per path (6)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="N/2N pairs per path (1); >1: the median, with min-max (the last pair's functions)")
    ap.add_argument("--markdown", default="", help="also write the tables (markdown) to this file")
    ap.add_argument("--valgrind", default=shutil.which("valgrind") or "valgrind")
    opt = ap.parse_args()
    if not os.access(opt.binary, os.X_OK):
        sys.exit("no %s (cmake --preset host && cmake --build --preset host --target bench_pipeline)" % opt.binary)
    if not shutil.which(opt.valgrind):
        sys.exit("no valgrind (toolchains/setup.sh installs it)")
    wanted = [p for p in opt.paths.split(",") if p] or [p for p, _ in PATHS]
    desc = dict(PATHS)
    for p in wanted:
        if p not in desc:
            sys.exit("unknown path %r (%s)" % (p, ",".join(desc)))

    n = opt.packets
    rows, tops, problems, per_path = [], [], [], {}
    workdir = tempfile.mkdtemp(prefix="keel-instructions-")
    try:
        for path in wanted:
            pers = []
            for _ in range(opt.repeat):
                t1, f1, _ = run_cg(opt.valgrind, opt.binary, path, n, 2 * n, workdir)
                t2, f2, line = run_cg(opt.valgrind, opt.binary, path, 2 * n, 2 * n, workdir)
                pers.append((t2 - t1) / n)
            kv = dict(t.split("=", 1) for t in line.split()[1:])
            per = statistics.median(pers)
            spread = " (%.0f-%.0f)" % (min(pers), max(pers)) if len(pers) > 1 else ""
            got = int(kv.get(EXPECT[path], 0))
            share = 100.0 * got / (2 * n)
            if int(kv["forwarded"]) != 2 * n:
                problems.append("%s: %s of %d forwarded" % (path, kv["forwarded"], 2 * n))
            if share < 90:
                problems.append("%s: only %.1f %% of packets on the path (%s)" % (path, share, line))
            check = "%s %.1f %%" % (EXPECT[path], share)
            if path.startswith("dpcls"):
                check += ", %s subtables/hit" % kv["subtable_lookups_per_hit"]
            per_path[path] = per
            floor = per_path.get("xconnect")
            rows.append("| %s | %s | **%.0f**%s | %s | %s | %d / %d |" % (
                path, desc[path], per, spread, "%.0f" % (per - floor) if floor is not None and path != "xconnect" else "",
                check, t1, t2))
            delta = {fn: (f2.get(fn, 0) - f1.get(fn, 0)) / n for fn in set(f1) | set(f2)}
            best = sorted(delta.items(), key=lambda kv_: -kv_[1])[:opt.top]
            tops.append("| %s | %s |" % (path, "; ".join("%s %.0f" % (short(fn), v) for fn, v in best if v >= 0.5)))
            print("%-9s %8.1f instructions/packet%s  (%s)" % (path, per, spread, check), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    rev = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip() or "?"
    head = ("bench_pipeline %s, N = %d and 2N, %d pair(s) per path; source tree: git %s; valgrind %s"
            % (os.path.relpath(opt.binary, REPO), n, opt.repeat, rev,
               subprocess.run([opt.valgrind, "--version"], capture_output=True, text=True).stdout.strip()))
    table = "\n".join(["| path | what | instructions/packet%s | beyond xconnect | PMD counters (2N run) | "
                       "Ir total N / 2N (last pair) |" % (" median (min-max)" if opt.repeat > 1 else ""),
                       "|---|---|---|---|---|---|"] + rows)
    top = "\n".join(["| path | top functions: instructions/packet (inlined code counted in its caller) |",
                     "|---|---|"] + tops)
    print()
    print(head)
    print()
    print(table)
    print()
    print(top)
    for p in problems:
        print("PROBLEM: " + p)
    if opt.markdown:
        with open(opt.markdown, "w") as f:
            f.write(head + "\n\n" + table + "\n\n" + top + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

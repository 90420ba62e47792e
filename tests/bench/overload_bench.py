#!/usr/bin/env python3
"""Overload benchmark (issue 19 part 3): a miss storm and a command flood
against established traffic, figures and same-run ratios printed.

  KEEL=build/host/firmware/keel python3 tests/bench/overload_bench.py \
      [--reps 3] [--seconds 5] [--storm-flows 300000] [--flood-rate 1000]

keel runs on host-sim with live pcap inputs (`pcap:in=FILE,loop=0`: replayed
forever, never backpressured: a full slow path drops and counts), pinned to
--core with one PMD; the outputs are `null` ports.

  storm   p0 replays --est-flows established UDP flows (output p1). Each
          repetition boots keel twice, alternating: `base` (p2 is a null
          port: nothing arrives) and `storm` (p2 replays --storm-flows
          distinct 5-tuples, megaflows disabled, so every packet whose
          flow is not installed is a miss: with the flow limit below
          --storm-flows (`set flow-limit`, --flow-limit), the storm never
          settles). Printed: p0->p1 Mpps in
          each (median), the ratio storm/base (goal >= 0.80), what
          show drops / upcall-show say was refused (upcall lost, flow
          limit), and the worst latency of `show ports` over the control
          socket during the storm (goal < 1 s).
  flood   one boot, established traffic only; windows of --seconds,
          alternating: quiet, control-socket flood (one connection per
          command, `version --format json`, paced at --flood-rate/s), quiet, SSH flood
          (one persistent shell session without a pty, the same lines
          paced at --flood-rate/s, at most 64 unanswered, paramiko). Printed: the achieved command
          rate and the forwarding ratio flood/quiet (median; goal >= 0.95).

The machine is shared: quote medians and the same-run ratios, never the
absolute rates alone.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import udp_frame, write_pcap  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))


def flow_frame(i, src_net):
    """64-byte UDP frame of flow i: src 10.src_net.x.y, sport varies."""
    f = bytearray(udp_frame(0, 64))
    f[26:30] = bytes([10, src_net, (i >> 8) & 0xff, i & 0xff])
    f[34:36] = (1024 + (i >> 16)).to_bytes(2, "big")
    # IPv4 header checksum
    f[24:26] = b"\0\0"
    s = sum((f[14 + k] << 8) | f[15 + k] for k in range(0, 20, 2))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    f[24:26] = (~s & 0xffff).to_bytes(2, "big")
    return bytes(f)


class Keel:
    def __init__(self, keel, workdir, tag, ports, config, core):
        self.dir = os.path.join(workdir, tag)
        os.makedirs(self.dir)
        cfg = os.path.join(self.dir, "startup.conf")
        with open(cfg, "w") as f:
            f.write(config)
        if PMD_MASK[0]:
            config += "set pmd-cpu-mask %s\n" % PMD_MASK[0]
            core = -1
        argv = ["taskset", "-c", str(core)] if core >= 0 else []
        argv += [keel, "--config-dir", self.dir, "--config", cfg]
        for p in ports:
            argv += ["--port", p]
        self.err = open(os.path.join(self.dir, "stderr"), "w")
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.err,
                                  text=True)
        self.sock = os.path.join(self.dir, "keel.sock")
        deadline = time.monotonic() + 120
        while True:
            try:
                self.exec("version")
                break
            except OSError:
                if self.p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("keel did not come up: see " + self.err.name)
                time.sleep(0.1)

    def exec(self, cmd, timeout=120):
        """One command over the control socket: (status, output)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(self.sock)
            s.sendall((cmd + "\n").encode())
            buf = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                buf += b
        finally:
            s.close()
        head, _, rest = buf.partition(b"\n")
        h = head.decode().split()
        if len(h) != 4 or h[0] != "KEEL/1":
            raise OSError("bad answer %r" % head[:80])
        return int(h[1]), rest[:int(h[2])].decode()

    def json(self, cmd):
        st, out = self.exec(cmd + " --format json")
        if st != 0:
            raise RuntimeError("%s: %s" % (cmd, out))
        return json.loads(out)

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.err.close()


def port(js, name):
    return next(p for p in js["ports"] if p["name"] == name)


def tx_rate(k, name, seconds):
    a = k.json("show ports")
    t0 = time.monotonic()
    time.sleep(seconds)
    b = k.json("show ports")
    t1 = time.monotonic()
    return (port(b, name)["tx"]["packets"] - port(a, name)["tx"]["packets"]) / (t1 - t0) / 1e6


PMD_MASK = [""]  # --pmd-mask

# The flooding command: a real console command with a one-line answer (the
# SSH flood counts its answers).
FLOOD_CMD = "version --format json"

CONFIG = """add-br br0
add-port br0 p0
add-port br0 p1
add-port br0 p2
add-port br0 p3
add-flow br0 in_port=p0,actions=output:p1
add-flow br0 in_port=p2,actions=output:p3
set megaflows-enable false
"""


def storm_round(opt, work, pcaps, rep):
    out = {}
    for mode in ("base", "storm"):
        p2 = "p2=pcap:in=%s,loop=0" % pcaps["storm"] if mode == "storm" else "p2=null"
        k = Keel(opt.keel, work, "%s-%d" % (mode, rep),
                 ["p0=pcap:in=%s,loop=0" % pcaps["est"], "p1=null", p2, "p3=null"],
                 CONFIG + "set flow-limit %d\n" % opt.flow_limit, opt.core)
        try:
            time.sleep(opt.warmup)
            worst = [0.0]
            stop = threading.Event()

            def probe():
                while not stop.is_set():
                    t = time.monotonic()
                    k.exec("show ports")
                    worst[0] = max(worst[0], time.monotonic() - t)
                    time.sleep(0.05)
            th = threading.Thread(target=probe, daemon=True)
            d0 = k.json("show drops")
            th.start()
            mpps = tx_rate(k, "p1", opt.seconds)
            stop.set()
            th.join()
            d1 = k.json("show drops")
            u = k.json("upcall-show")
            r = {"mpps": mpps, "worst_s": worst[0]}
            for reason in ("upcall_lost",):
                r["p2_" + reason] = port(d1, "p2")["reasons"][reason] - port(d0, "p2")["reasons"][reason]
            r["p2_received"] = port(d1, "p2")["received"] - port(d0, "p2")["received"]
            r["p2_forwarded"] = port(d1, "p2")["forwarded"] - port(d0, "p2")["forwarded"]
            r["p0_dropped"] = port(d1, "p0")["dropped"] - port(d0, "p0")["dropped"]
            r["flow_limit_hits"] = d1["slow_path"]["flow_limit_hits"] - d0["slow_path"]["flow_limit_hits"]
            r["flow_limit"] = u["flow_limit"]
            r["flows"] = u["flows"]
            r["installs"] = u["installs"]
            out[mode] = r
        finally:
            k.stop()
    return out


def paced(rate, seconds, send):
    """Calls send() `rate` times a second for `seconds`; send() returns
    False when it may not send now (it is retried). Returns the elapsed s."""
    n = 0
    t0 = time.monotonic()
    while True:
        now = time.monotonic()
        if now - t0 >= seconds:
            return now - t0
        target = t0 + n / rate
        if target > now:
            time.sleep(target - now)
        if send():
            n += 1
        else:
            time.sleep(0.0005)


def flood_sock(k, rate, seconds):
    """FLOOD_CMD over the control socket, one connection each, paced at
    `rate`/s (each waits for its answer); returns the commands per second."""
    done = [0]

    def send():
        k.exec(FLOOD_CMD)
        done[0] += 1
        return True
    elapsed = paced(rate, seconds, send)
    return done[0] / elapsed


def flood_ssh(chan, answered, rate, seconds, window=64):
    """Sends FLOOD_CMD lines paced at `rate`/s, at most `window` unanswered;
    returns the answered commands per second."""
    a0 = answered[0]
    sent = [0]

    def send():
        if sent[0] - (answered[0] - a0) >= window:
            return False
        chan.sendall((FLOOD_CMD + "\n").encode())
        sent[0] += 1
        return True
    elapsed = paced(rate, seconds, send)
    return (answered[0] - a0) / elapsed


def flood_run(opt, work, pcaps):
    import paramiko
    pw = "overload-bench-pw"
    cfg = CONFIG + "username admin password '%s'\nusername admin role admin\nssh port 0\n" % pw
    k = Keel(opt.keel, work, "flood", ["p0=pcap:in=%s,loop=0" % pcaps["est"], "p1=null", "p2=null", "p3=null"],
             cfg, opt.core)
    res = {"quiet": [], "sock": [], "ssh": [], "sock_rate": [], "ssh_rate": []}
    try:
        ssh_port = 0
        deadline = time.monotonic() + 60
        while not ssh_port:
            js = k.json("show ssh")
            ssh_port = js["port"] if js.get("state") != "disabled" and "wait" in js.get("state", "") or \
                js.get("state") == "listening" else 0
            if time.monotonic() > deadline:
                raise RuntimeError("ssh not listening: %s" % js)
            time.sleep(0.1)
        cli = paramiko.SSHClient()
        cli.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        cli.connect("127.0.0.1", port=ssh_port, username="admin", password=pw, look_for_keys=False,
                    allow_agent=False, timeout=60)
        chan = cli.get_transport().open_session()
        chan.invoke_shell()
        answered = [0]

        def drain():
            tail = b""
            while True:
                b = chan.recv(1 << 16)
                if not b:
                    return
                buf = tail + b
                answered[0] += buf.count(b'{"version"')
                tail = buf[-16:] if not buf.endswith(b"\n") else b""
                if tail.count(b'{"version"'):
                    tail = b""
        threading.Thread(target=drain, daemon=True).start()
        time.sleep(opt.warmup)
        for _ in range(opt.reps):
            res["quiet"].append(tx_rate(k, "p1", opt.seconds))
            box = {}
            th = threading.Thread(target=lambda: box.update(r=flood_sock(k, opt.flood_rate, opt.seconds + 0.5)))
            th.start()
            time.sleep(0.25)
            res["sock"].append(tx_rate(k, "p1", opt.seconds))
            th.join()
            res["sock_rate"].append(box["r"])
            res["quiet"].append(tx_rate(k, "p1", opt.seconds))
            box = {}
            th = threading.Thread(target=lambda: box.update(
                r=flood_ssh(chan, answered, opt.flood_rate, opt.seconds + 0.5)))
            th.start()
            time.sleep(0.25)
            res["ssh"].append(tx_rate(k, "p1", opt.seconds))
            th.join()
            res["ssh_rate"].append(box["r"])
        cli.close()
    finally:
        k.stop()
    return res


def med(v):
    return statistics.median(v) if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keel", default=os.environ.get("KEEL") or os.path.join(REPO, "build", "host", "firmware", "keel"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--core", type=int, default=1, help="taskset core for all of keel (-1: none)")
    ap.add_argument("--pmd-mask", default="",
                    help="set pmd-cpu-mask MASK instead of taskset: the PMD alone on its core, keel's other "
                         "threads (console, SSH, handler) elsewhere, as on a NIC")
    ap.add_argument("--est-flows", type=int, default=64)
    ap.add_argument("--storm-flows", type=int, default=300000)
    ap.add_argument("--flow-limit", type=int, default=20000, help="storm: set flow-limit N (20000 < --storm-flows)")
    ap.add_argument("--flood-rate", type=float, default=1000)
    ap.add_argument("--only", choices=("storm", "flood"), default=None)
    ap.add_argument("--keep", action="store_true")
    opt = ap.parse_args()
    PMD_MASK[0] = opt.pmd_mask
    work = tempfile.mkdtemp(prefix="keel-overload-")
    pcaps = {"est": os.path.join(work, "est.pcap"), "storm": os.path.join(work, "storm.pcap")}
    write_pcap(pcaps["est"], [flow_frame(i, 1) for i in range(opt.est_flows)])
    write_pcap(pcaps["storm"], [flow_frame(i, 2) for i in range(opt.storm_flows)])
    print("overload: keel %s, core %d, pmd-cpu-mask %s, reps %d x %.0f s, load %s" % (
        opt.keel, opt.core, opt.pmd_mask or "-", opt.reps, opt.seconds, open("/proc/loadavg").read().split()[0]), flush=True)
    rc = 0
    if opt.only in (None, "storm"):
        rounds = []
        for rep in range(opt.reps):
            r = storm_round(opt, work, pcaps, rep)
            rounds.append(r)
            print("storm rep %d: base %.3f Mpps, storm %.3f Mpps (ratio %.2f); storm port: %d received, "
                  "%d forwarded, %d upcall_lost; flow_limit_hits %d, flow limit %d, flows %d; "
                  "established dropped %d; worst show-ports latency %.3f s" % (
                      rep, r["base"]["mpps"], r["storm"]["mpps"], r["storm"]["mpps"] / r["base"]["mpps"],
                      r["storm"]["p2_received"], r["storm"]["p2_forwarded"], r["storm"]["p2_upcall_lost"],
                      r["storm"]["flow_limit_hits"], r["storm"]["flow_limit"], r["storm"]["flows"],
                      r["storm"]["p0_dropped"], r["storm"]["worst_s"]), flush=True)
        ratio = med([r["storm"]["mpps"] / r["base"]["mpps"] for r in rounds])
        worst = max(r["storm"]["worst_s"] for r in rounds)
        print("storm: established %.3f Mpps without, %.3f Mpps with the storm (medians); same-run ratio "
              "median %.2f (goal >= 0.80: %s); worst console latency %.3f s (goal < 1 s: %s)" % (
                  med([r["base"]["mpps"] for r in rounds]), med([r["storm"]["mpps"] for r in rounds]),
                  ratio, "met" if ratio >= 0.8 else "MISSED", worst, "met" if worst < 1 else "MISSED"))
    if opt.only in (None, "flood"):
        f = flood_run(opt, work, pcaps)
        q = med(f["quiet"])
        for kind in ("sock", "ssh"):
            pairs = [f[kind][i] / ((f["quiet"][2 * i] + f["quiet"][2 * i + 1]) / 2) for i in range(len(f[kind]))]
            print("flood %s: %.0f commands/s achieved (median), forwarding %.3f Mpps vs quiet %.3f Mpps; "
                  "ratio median %.3f (per rep %s) (goal >= 0.95: %s)" % (
                      kind, med(f[kind + "_rate"]), med(f[kind]), q, med(pairs),
                      " ".join("%.3f" % x for x in pairs), "met" if med(pairs) >= 0.95 else "MISSED"))
    if not opt.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("work dir kept: " + work)
    return rc


if __name__ == "__main__":
    sys.exit(main())

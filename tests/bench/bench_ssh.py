"""SSH server benchmark (issue 17): keel vs Dropbear vs OpenSSH's sshd, side
by side in one run on the same machine.

  KEEL=build/host/firmware/keel /usr/bin/python3 tests/bench/bench_ssh.py \
      [--servers keel,dropbear,sshd] [--n 100] [--sessions 200] [--parallel 20] \
      [--bulk-mb 100] [--idle 20]

Each server runs privately on a free port of 127.0.0.1 (never a system
service: tests/e2e/ssh_common.py's targets), with an ECDSA P-256 host key
(the client forces HostKeyAlgorithms=ecdsa-sha2-nistp256; keel and sshd
also hold an RSA key, unused here) and one user authenticated by an ECDSA
P-256 key (ssh-keygen). The client is /usr/bin/ssh (OpenSSH 9.2), -F
/dev/null, BatchMode, no multiplexing. Measured:

  setup     time from starting `ssh host CMD` to its exit status, median of
            --n runs, per key exchange (curve25519-sha256, its @libssh.org
            name, ecdh-sha2-nistp256); cipher chacha20-poly1305. CMD is
            `true` on sshd/dropbear; keel has no `true`: `version` (a
            console command with a few lines of output, no lock beyond
            show's). The figure includes the client's own work (its key
            exchange and signature), which is the same for all three.
  exec/s    --sessions exec sessions (same CMD) by --parallel clients at
            once (each runs its share one after the other): sessions / wall
            time. A session that fails is counted and printed (keel refuses
            beyond its unauthenticated-connection limit).
  bulk      --bulk-mb MB from the client to the server per cipher (each
            ctr cipher with hmac-sha2-256-etm): MB/s of wall time from
            start to exit status. keel has no `cat`: it runs a shell
            session without a pty (one console command per line), fed
            lines of 4000 bytes that are comments (`! xxxx...`): the bytes
            cross keel's transport (decrypt, MAC, window) and its line
            reader, and run nothing; the last line is `version`, whose
            output (checked) shows every line before it was read. sshd and dropbear run `cat >/dev/null`
            on the same bytes. Direction client->server on all three
            (keel has no command printing 100 MB, so server->client can't
            be measured the same way on all three).
  memory    resident memory with --idle sessions open and idle (shell
            without a pty waiting for input on keel; `cat` waiting for
            input on sshd/dropbear): sshd and dropbear, the sum over their
            processes (the listener and one or two per connection; the
            `cat`s are printed apart, they are the user's, not the
            server's); keel, its increase over the same process idle
            before the sessions, and the whole process.

Prints one table per measurement and a summary; nothing asserted (a
benchmark, not a test). Figures in tests/bench/RESULTS.md ("SSH").
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import ssh_common as sc  # noqa: E402

KEXES = sc.KEXES
BULK_CIPHERS = [("chacha20-poly1305@openssh.com", None), ("aes128-gcm@openssh.com", None),
                ("aes256-gcm@openssh.com", None), ("aes128-ctr", "hmac-sha2-256-etm@openssh.com"),
                ("aes256-ctr", "hmac-sha2-256-etm@openssh.com")]


class Server:
    """A target and what the benchmark runs on it."""

    def __init__(self, name, target, true_cmd, sink_cmd, idle_cmd):
        self.name, self.t = name, target
        self.true_cmd, self.sink_cmd, self.idle_cmd = true_cmd, sink_cmd, idle_cmd

    def argv(self, *opts):
        return self.t.ssh_argv(self.t.admin, "-o", "HostKeyAlgorithms=ecdsa-sha2-nistp256",
                               "-o", "ControlMaster=no", "-o", "ControlPath=none", *opts,
                               key=self.t.keys.ecdsa)


def start_servers(names, d, keys):
    out = []
    for n in names:
        if n == "keel":
            t = sc.KeelTarget(d, keys, extra=["ssh max-sessions 64"])
            out.append(Server("keel", t, "version", None, None))
        elif n == "sshd":
            t = sc.SshdTarget(d, keys, force_command=False, private_home=True)
            out.append(Server("sshd", t, "true", "cat >/dev/null", "cat"))
        elif n == "dropbear":
            t = sc.DropbearTarget(d, keys)
            out.append(Server("dropbear", t, "true", "cat >/dev/null", "cat"))
        else:
            sys.exit("unknown server %r (keel, dropbear, sshd)" % n)
    return out


def one_session(s, opts=(), cmd=None, source=None):
    if source:
        opts = tuple(opts) + ("-o", "BindAddress=" + source)
    t0 = time.perf_counter()
    p = subprocess.run(s.argv(*opts) + [cmd or s.true_cmd], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=sc.PATIENCE)
    return time.perf_counter() - t0, p.returncode, p.stderr


def bench_setup(servers, n):
    rows = {}
    for kex in KEXES:
        for s in servers:
            times, fails = [], 0
            for _ in range(n):
                dt, rc, err = one_session(s, ("-o", "KexAlgorithms=" + kex,
                                              "-o", "Ciphers=chacha20-poly1305@openssh.com"))
                if rc == 0:
                    times.append(dt)
                else:
                    fails += 1
                    last = err.strip()
            rows[(kex, s.name)] = (statistics.median(times) * 1000 if times else float("nan"),
                                   min(times) * 1000 if times else float("nan"), fails)
            if fails:
                print("  %s %s: %d failed, last: %s" % (s.name, kex, fails, last))
    return rows


def bench_exec_rate(servers, total, parallel):
    rows = {}
    for s in servers:
        fails = [0]
        errs = []
        lock = threading.Lock()
        per = [total // parallel + (1 if i < total % parallel else 0) for i in range(parallel)]

        def worker(k, source):
            for _ in range(k):
                _, rc, err = one_session(s, source=source)
                if rc != 0:
                    with lock:
                        fails[0] += 1
                        errs.append(err.strip())
        # Each client from a loopback address of its own (127.0.0.2...):
        # dropbear allows 5 unauthenticated connections per address.
        threads = [threading.Thread(target=worker, args=(k, "127.0.0.%d" % (2 + i)))
                   for i, k in enumerate(per)]
        t0 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - t0
        rows[s.name] = ((total - fails[0]) / wall, fails[0])
        if fails[0]:
            print("  %s: %d of %d sessions failed, e.g. %s" % (s.name, fails[0], total, errs[:2]))
    return rows


def bulk_file(d, mb):
    """MB of 4000-byte comment lines (`! xxx...`), valid console input for
    keel and just bytes for cat."""
    path = os.path.join(d, "bulk.txt")
    line = b"! " + b"x" * 3997 + b"\n"
    n = mb * 1000 * 1000 // len(line)
    with open(path, "wb") as f:
        for _ in range(n):
            f.write(line)
        # keel's last line: its output proves every line before it was read
        # (a shell runs its lines in order). Just 8 more bytes for cat.
        f.write(b"version\n")
    return path, n * len(line) + 8


def bench_bulk(servers, path, size):
    rows = {}
    for cipher, mac in BULK_CIPHERS:
        for s in servers:
            if s.name == "dropbear" and "gcm" in cipher:
                rows[(cipher, s.name)] = "n/a"   # dropbear 2022.83 has no AES-GCM
                continue
            if s.name == "dropbear" and mac:
                mac = "hmac-sha2-256"            # no -etm MACs in dropbear: encrypt-and-MAC
            opts = ["-o", "Ciphers=" + cipher] + (["-o", "MACs=" + mac] if mac else [])
            argv = s.argv(*opts) + ([s.sink_cmd] if s.sink_cmd else [])
            with open(path, "rb") as f:
                t0 = time.perf_counter()
                p = subprocess.run(argv, stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=20 * sc.PATIENCE)
                dt = time.perf_counter() - t0
            ok = p.returncode == 0 and (s.name != "keel" or b"keel" in p.stdout)
            rows[(cipher, s.name)] = ("%.1f" % (size / dt / 1e6) if ok else "failed") + \
                ("*" if s.name == "dropbear" and mac else "")
            if not ok:
                print("  %s %s: status %d (%d bytes out): %s" % (s.name, cipher, p.returncode, len(p.stdout),
                                                           p.stderr.decode().strip()[-300:]))
    return rows


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid):
    """pid and all its descendants: [(pid, comm)]."""
    children = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append((int(p), comm))
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        for c in children.get(q, []):
            out.append(c)
            todo.append(c[0])
    return out


def server_rss(s):
    """(server KB, session commands KB, whole-process KB for keel)."""
    if s.name == "keel":
        return rss_kb(s.t.proc.pid), 0
    with open("/proc/%d/comm" % s.t.proc.pid) as f:
        procs = [(s.t.proc.pid, f.read().strip())] + descendants(s.t.proc.pid)
    mine = sum(rss_kb(p) for p, comm in procs if comm in ("sshd", "dropbear"))
    user = sum(rss_kb(p) for p, comm in procs if comm not in ("sshd", "dropbear", "unshare", "sh"))
    return mine, user


def bench_memory(servers, idle):
    rows = {}
    for s in servers:
        before, _ = server_rss(s)
        procs = []

        def count():
            if s.name == "keel":
                return s.t.console("show ssh sessions").count("admin")
            return sum(1 for _, comm in descendants(s.t.proc.pid) if comm == "cat")
        # One after the other, each up before the next (dropbear's
        # unauthenticated-per-address limit; no fixed sleeps).
        n = 0
        for i in range(idle):
            procs.append(subprocess.Popen(s.argv() + ([s.idle_cmd] if s.idle_cmd else []),
                                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
            deadline = time.time() + sc.PATIENCE
            while time.time() < deadline:
                n = count()
                if n > i:
                    break
                time.sleep(0.05)
        time.sleep(1)  # let page faults of the start settle (not an assertion)
        after, user = server_rss(s)
        rows[s.name] = (before, after, user, n)
        for p in procs:
            p.stdin.close()
        for p in procs:
            try:
                p.wait(sc.PATIENCE)
            except subprocess.TimeoutExpired:
                p.kill()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--servers", default="keel,dropbear,sshd")
    ap.add_argument("--n", type=int, default=100, help="setup runs per kex and server (median)")
    ap.add_argument("--sessions", type=int, default=200, help="exec sessions for the rate")
    ap.add_argument("--parallel", type=int, default=20)
    ap.add_argument("--bulk-mb", type=int, default=100)
    ap.add_argument("--idle", type=int, default=20)
    ap.add_argument("--skip", default="", help="comma list of setup,exec,bulk,memory to skip")
    a = ap.parse_args()
    names = a.servers.split(",")
    need = [sc.SSH, sc.SSH_KEYGEN] + ([sc.SSHD] if "sshd" in names else []) + \
        ([sc.DROPBEAR, sc.DROPBEARKEY] if "dropbear" in names else [])
    missing = [p for p in need if not os.access(p, os.X_OK)]
    if missing:
        sys.exit("bench_ssh: missing %s (toolchains/setup.sh)" % ", ".join(missing))
    skip = set(filter(None, a.skip.split(",")))
    d = tempfile.mkdtemp(prefix="keel-bench-ssh-")
    servers = []
    try:
        keys = sc.Keys(d)
        servers = start_servers(names, d, keys)
        for s in servers:     # known_hosts filled, everything warm
            dt, rc, err = one_session(s)
            if rc != 0:
                sys.exit("%s: the first session failed: %s" % (s.name, err))
        print("bench_ssh: %s; %s; load %s" % (", ".join("%s port %d" % (s.name, s.t.port) for s in servers),
                                              subprocess.run([sc.SSH, "-V"], capture_output=True,
                                                             text=True).stderr.strip(),
                                              open("/proc/loadavg").read().split()[:3]))
        if "setup" not in skip:
            r = bench_setup(servers, a.n)
            print("\nsetup: connect to exit status, ms, median (min) of %d, cipher chacha20-poly1305" % a.n)
            print("| kex | " + " | ".join(s.name for s in servers) + " |")
            print("|---|" + "---|" * len(servers))
            for kex in KEXES:
                print("| %s | " % kex + " | ".join("%.1f (%.1f)%s" % (r[(kex, s.name)][0], r[(kex, s.name)][1],
                                                                       " %d failed" % r[(kex, s.name)][2]
                                                                       if r[(kex, s.name)][2] else "")
                                                     for s in servers) + " |")
        if "exec" not in skip:
            r = bench_exec_rate(servers, a.sessions, a.parallel)
            print("\nexec sessions/s, %d sessions by %d parallel clients" % (a.sessions, a.parallel))
            print("| server | sessions/s | failed |")
            print("|---|---|---|")
            for s in servers:
                print("| %s | %.1f | %d |" % (s.name, r[s.name][0], r[s.name][1]))
        if "bulk" not in skip:
            path, size = bulk_file(d, a.bulk_mb)
            r = bench_bulk(servers, path, size)
            print("\nbulk client->server, %.0f MB, MB/s" % (size / 1e6))
            print("| cipher | " + " | ".join(s.name for s in servers) + " |")
            print("|---|" + "---|" * len(servers))
            for c, mac in BULK_CIPHERS:
                print("| %s%s | " % (c, " + " + mac if mac else "") +
                      " | ".join(r[(c, s.name)] for s in servers) + " |")
            if any(s.name == "dropbear" for s in servers):
                print("(dropbear: no AES-GCM; * = with hmac-sha2-256, its only SHA-2 MAC, not -etm)")
            os.unlink(path)
        if "memory" not in skip:
            r = bench_memory(servers, a.idle)
            print("\nresident memory with %d idle sessions, KB" % a.idle)
            print("| server | idle server | with sessions | increase | session commands | sessions seen |")
            print("|---|---|---|---|---|---|")
            for s in servers:
                b, af, user, n = r[s.name]
                print("| %s | %d | %d | %d | %s | %d |" % (s.name, b, af, af - b,
                                                           "-" if s.name == "keel" else str(user), n))
            print("(keel: one process, the whole firmware; `increase` is what the sessions cost. "
                  "sshd/dropbear: their own processes summed, the idle server is the listener alone.)")
    finally:
        for s in servers:
            try:
                s.t.stop()
            except Exception as e:
                print("stop %s: %s" % (s.name, e))
        import shutil
        shutil.rmtree(d, True)


if __name__ == "__main__":
    main()

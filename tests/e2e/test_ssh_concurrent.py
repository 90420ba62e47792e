"""20 concurrent SSH exec sessions while a garbage client hammers the port,
and the serial console stays responsive (issue 17).

keel on host-sim with its console on a pty of ours (`--console /dev/pts/N`,
the serial path; logged in as admin), `ssh max-sessions 32`. A garbage
client connects, sends random bytes (sometimes after a valid-looking
version line, sometimes mid-way through a real KEXINIT-sized burst) and
disconnects, in a loop, for the whole test. Meanwhile, three rounds:
  * 20 `ssh admin@... show ports` started at once, each must exit 0 with
    the ports table;
  * while they run, `show ports` typed on the serial console answers (the
    table and the next prompt), within the generous PATIENCE bound only;
then `show ssh` still answers and keel is still running. No speed is
asserted: only that everybody is served.

SSH_TARGET=sshd runs the 20 sessions + garbage part against a private sshd
(no console there)."""
import os
import random
import socket
import subprocess
import threading

from ssh_common import (ADMIN_PASSWORD, PATIENCE, SSH, SSH_KEYGEN, KeelTarget, Keys, SshdTarget, check,
                        cleanup, main, require, target_kind, workdir)

T = None
N = 20
ROUNDS = 3


class Garbage(threading.Thread):
    def __init__(self, host, port):
        super().__init__(daemon=True)
        self.host, self.port = host, port
        self.stop = threading.Event()
        self.rounds = 0
        self.started = threading.Event()
        self.rng = random.Random(17)

    def run(self):
        while not self.stop.is_set():
            try:
                s = socket.create_connection((self.host, self.port), timeout=5)
                kind = self.rounds % 3
                if kind == 1:
                    s.sendall(b"SSH-2.0-garbage_1.0\r\n")
                elif kind == 2:
                    # A plausible packet length, then noise.
                    s.sendall(b"SSH-2.0-garbage_1.0\r\n\x00\x00\x05\xdc\x0a\x14" + os.urandom(200))
                s.sendall(os.urandom(self.rng.randint(1, 4096)))
                if self.rng.random() < 0.5:
                    try:
                        s.recv(4096)
                    except OSError:
                        pass
                s.close()
            except OSError:
                pass  # refused, reset: fine, it's garbage
            self.rounds += 1
            if self.rounds >= 5:
                self.started.set()


def login_console():
    c = T.tty
    c.expect("login: ")
    c.send("admin\r")
    c.expect("Password: ")
    c.send(ADMIN_PASSWORD + "\r")
    c.expect("keel> ")
    c.send("terminal length 0\r")
    c.expect("keel> ")


def console_answers():
    c = T.tty
    c.send("show ports\r")
    c.expect("p1")
    c.expect("keel> ")


def test_concurrent_sessions_with_garbage():
    if isinstance(T, KeelTarget):
        login_console()
    g = Garbage(T.host, T.port)
    g.start()
    try:
        check(g.started.wait(PATIENCE), "the garbage client got going")
        for r in range(ROUNDS):
            procs = [subprocess.Popen(T.ssh_argv(T.admin, key=T.keys.ecdsa) + [T.ok_command],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for _ in range(N)]
            if isinstance(T, KeelTarget):
                console_answers()          # while the 20 sessions run
            results = []
            for p in procs:
                try:
                    out, err = p.communicate(timeout=PATIENCE)
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, err = p.communicate()
                results.append((p.returncode, out, err))
            bad = [(rc, err.strip()) for rc, out, err in results if rc != 0 or T.ok_marker not in out]
            check(not bad, "round %d: %d of %d sessions failed: %s%s" % (
                r, len(bad), N, bad[:5], "\nshow ssh:\n" + T.console("show ssh") if isinstance(T, KeelTarget) else ""))
        check(g.rounds > 5, "the garbage client kept going (%d connections)" % g.rounds)
    finally:
        g.stop.set()
        g.join(PATIENCE)
    if isinstance(T, KeelTarget):
        console_answers()
        out = T.console("show ssh")
        check(out.strip(), "show ssh answers")
        check(T.proc.poll() is None, "keel still runs")
        print("  garbage connections: %d\n  show ssh:\n%s" % (g.rounds, out))


if __name__ == "__main__":
    require("test_ssh_concurrent", SSH, SSH_KEYGEN)
    d = workdir()
    try:
        keys = Keys(d)
        if target_kind() == "sshd":
            T = SshdTarget(d, keys)
        else:
            T = KeelTarget(d, keys, extra=["ssh max-sessions 32"], serial=True)
        main([test_concurrent_sessions_with_garbage])
    finally:
        cleanup(d, *([T] if T else []))

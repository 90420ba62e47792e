"""Console login and `keel --exec`.

Login: a keel whose startup config has a user asks `login:` / `Password:` on
its interactive console (stdin on a pty, and --console on a pty as the serial
path); the password is not echoed; a wrong password and an unknown user get
the same answer; three failures cost a delay; ^D at login ends the session; a
script piped into stdin is not asked. The user survives a running-config
round trip as a hash, never as plain text.

--exec: a running keel answers `keel --exec CMD` through DIR/keel.sock (mode
0600) with the command's output and status; garbage and hang-ups on the
socket don't disturb it; with no keel running, --exec says so (status 2)."""
import json
import os
import socket
import stat
import subprocess
import time

from harness import PATIENCE, Failure, check, keel_cmd, main, run_keel, tmpdir
from test_console_pty import Console


class LoginConsole(Console):
    """Console (test_console_pty.py) with extra keel arguments."""

    def __init__(self, *args, serial=False):
        import pty
        import tempfile
        self.master, self.slave = pty.openpty()
        self.buf = b""
        self.mark = 0
        self.log = tempfile.TemporaryFile()
        if serial:
            self.proc = subprocess.Popen(keel_cmd("--console", os.ttyname(self.slave), *args),
                                         stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                         start_new_session=True)
        else:
            self.proc = subprocess.Popen(keel_cmd(*args), stdin=self.slave, stdout=self.slave,
                                         stderr=self.slave, start_new_session=True)


def config_with_user(name="admin", password="pw one"):
    """A config dir whose startup-config has one user (made by keel itself)."""
    d = tmpdir()
    p = run_keel("--config-dir", d, stdin="username %s password '%s'\nwrite memory\n" % (name, password),
                 timeout=PATIENCE)
    check(p.returncode == 0, "username + write memory", p)
    with open(os.path.join(d, "startup-config")) as f:
        text = f.read()
    check("username %s secret pbkdf2-sha256$" % name in text, "the startup config has the hash: %r" % text)
    check(password not in text, "and not the password")
    return d


def test_login_on_stdin_pty():
    d = config_with_user()
    c = LoginConsole("--config-dir", d)
    try:
        c.expect("Type 'help'")
        c.expect("login: ")
        # Wrong password: refused, and never echoed.
        c.send("admin\r")
        c.expect("Password: ")
        c.send("wrong pw\r")
        seen = c.expect("Login incorrect")
        check("wrong" not in seen, "the password is not echoed: %r" % seen)
        c.expect("login: ")
        # Unknown user: the same answer.
        c.send("nobody\rpw one\r")
        seen = c.expect("Login incorrect")
        check("pw one" not in seen, "not echoed: %r" % seen)
        c.expect("login: ")
        # Third failure: a delay before the next prompt; input typed during
        # the delay is dropped.
        c.send("admin\rnope\r")
        c.expect("Login incorrect")
        t0 = time.time()
        c.send("typed during the delay\r")
        c.expect("login: ")
        waited = time.time() - t0
        check(waited >= 2.0, "three failures cost a delay (waited %.1f s)" % waited)
        # The right password: the prompt, and commands run.
        c.send("admin\r")
        c.expect("Password: ")
        c.send("pw one\r")
        c.expect("keel> ")
        c.send("show users --format json\r")
        c.expect('"users":[{"name":"admin","role":"admin","password":true,"keys":0}]')
        c.expect("keel> ")
        c.send("exit\r")
        check(c.wait() == 0, "exit status 0")
    finally:
        c.close()


def test_ctrl_d_at_login_and_serial_login():
    d = config_with_user("op", "s3cret")
    c = LoginConsole("--config-dir", d)
    try:
        c.expect("login: ")
        c.send("\x04")
        rc = c.wait()
        check(rc == 0, "^D at login ends the session (status %d)" % rc)
    finally:
        c.close()
    c = LoginConsole("--config-dir", d, serial=True)
    try:
        c.expect("login: ")
        c.send("op\r")
        c.expect("Password: ")
        c.send("s3cret\r")
        c.expect("keel> ")
        c.send("vers\t\r")
        c.expect("HAL backends")
        c.expect("keel> ")
        c.send("\x04")
        check(c.wait() == 0, "^D ends the serial session")
    finally:
        c.close()


def test_script_not_asked_and_round_trip():
    d = config_with_user()
    # A script on stdin is the local operator's shell: no login.
    p = run_keel("--config-dir", d, stdin="show users\nshow running-config\n", timeout=PATIENCE)
    check(p.returncode == 0 and "login:" not in p.stdout and "admin" in p.stdout, "no login for a script", p)
    rc1 = p.stdout[p.stdout.index("! keel"):]
    check("username admin secret pbkdf2-sha256$" in rc1, "running-config has the user", p)
    # Round trip: boot from that running config; the same running config,
    # and the password still works (the hash was carried over).
    cfg = os.path.join(d, "rc.txt")
    with open(cfg, "w") as f:
        f.write(rc1)
    p = run_keel("--config", cfg, "--config-dir", tmpdir(), stdin="show running-config\n", timeout=PATIENCE)
    check(p.returncode == 0 and p.stdout[p.stdout.index("! keel"):] == rc1, "running-config round trip", p)
    c = LoginConsole("--config", cfg, "--config-dir", tmpdir())
    try:
        c.expect("login: ")
        c.send("admin\rpw one\r")
        c.expect("keel> ")
        c.send("exit\r")
        c.wait()
    finally:
        c.close()


def read_to_eof(s):
    """Everything a socket receives until the other end closes it."""
    s.settimeout(PATIENCE)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            return got
        got += b


def exec_keel(d, line):
    return subprocess.run(keel_cmd("--config-dir", d, "--exec", line), capture_output=True, text=True,
                          timeout=PATIENCE)


def test_exec_against_running_keel():
    d = tmpdir()
    sock_path = os.path.join(d, "keel.sock")
    p = exec_keel(d, "show ports")
    check(p.returncode == 2 and "no keel is running" in p.stderr, "no keel: a clear error, status 2", p)

    proc = subprocess.Popen(keel_cmd("--config-dir", d), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + PATIENCE
        while not os.path.exists(sock_path):
            check(time.time() < deadline and proc.poll() is None, "keel listens on %s" % sock_path)
            time.sleep(0.05)
        check(stat.S_IMODE(os.stat(sock_path).st_mode) == 0o600, "the socket is mode 0600")

        p = exec_keel(d, "show ports")
        check(p.returncode == 0 and "Rx-pkts" in p.stdout and p.stderr == "", "show ports over --exec", p)
        p = exec_keel(d, "show ports --format json")
        check(p.returncode == 0 and json.loads(p.stdout)["ports"], "JSON over --exec", p)
        p = exec_keel(d, "frobnicate")
        check(p.returncode == 1 and "unknown command 'frobnicate'" in p.stderr, "a failing command: 1", p)
        p = exec_keel(d, "exit")
        check(p.returncode == 1 and proc.poll() is None, "exit refused over --exec", p)

        # Garbage, an over-long line, a hang-up mid-line, a silent client: keel
        # answers or drops them and keeps serving.
        def raw(data, read=True):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sock_path)
            s.sendall(data)
            got = read_to_eof(s) if read else b""
            s.close()
            return got
        check(b"longer than 4096" in raw(b"x" * 10000), "an over-long line is refused")
        check(b"non-ASCII" in raw(b"\x00\xff\x1b[2J show\n"), "binary garbage is refused")
        raw(b"show por", read=False)
        t0 = time.time()
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.connect(sock_path)
        p = exec_keel(d, "username bob password 'b pw'")
        check(p.returncode == 0, "a command after the garbage (and behind a silent client) runs", p)
        # The silent client was answered with the timeout error, not before
        # its 5 s (a lower bound: load can only make it later).
        answer = read_to_eof(silent)
        silent.close()
        check(b"no complete command line within 5 s" in answer, "the silent client is cut off: %r" % answer)
        check(time.time() - t0 >= 4.5, "not before its 5 s")

        # State changed over --exec is the console's state: the stdin script
        # sees it, and it reaches the running config.
        p = exec_keel(d, "show users --format json")
        check(json.loads(p.stdout) == {"login_required": True, "keys": [],
                                       "users": [{"name": "bob", "role": "admin", "password": True, "keys": 0}]},
              "show users JSON", p)
        p = exec_keel(d, "show running-config")
        check("username bob secret pbkdf2-sha256$" in p.stdout and "b pw" not in p.stdout, "hash only", p)
        out, err = proc.communicate("show users\n", timeout=PATIENCE)
        check(proc.returncode == 0 and "bob" in out, "the console saw the user: %r %r" % (out, err))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    check(not os.path.exists(sock_path), "the socket is removed when keel exits")
    p = exec_keel(d, "show ports")
    check(p.returncode == 2 and "no keel is running" in p.stderr, "gone again", p)


if __name__ == "__main__":
    main([test_login_on_stdin_pty, test_ctrl_d_at_login_and_serial_login, test_script_not_asked_and_round_trip,
          test_exec_against_running_keel])

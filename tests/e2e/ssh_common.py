"""Shared helpers of the SSH e2e tests (tests/e2e/test_ssh_*.py) and the SSH
benchmark (tests/bench/bench_ssh.py), issue 17.

A *target* is an SSH server the tests talk to with real clients (OpenSSH's
/usr/bin/ssh, paramiko, ssh-audit):

  KeelTarget      keel on host-sim with a config directory of its own: users
                  `admin` (role admin, an ECDSA P-256 and an RSA 3072 key,
                  password ADMIN_PASSWORD), `viewer` (role read-only,
                  password VIEWER_PASSWORD), `ssh port 0`; the port bound is
                  learnt from `show ssh`, asked on keel's console (its
                  stdin, a pipe: no login).
  SshdTarget      OpenSSH's sshd, run privately (own config, host keys,
                  pid file, free port), never the system service; the
                  user is whoever runs the test. Its ForceCommand is
                  FAKE_KEEL (below), a stand-in for keel's command tree, so
                  the same test drives both: a test that passes against
                  sshd has a client side that is right.
  DropbearTarget  dropbear, run privately the same way (the benchmark).

Select the target of a test with SSH_TARGET=keel|sshd (default keel).
Password logins are only checked against keel (sshd would need a system
account with a known password).

Nothing here waits for a fixed time: waits are polls bounded by PATIENCE,
which only a broken server reaches.

Thread-safety: test helpers, used from one thread, except run() and
ssh_exec() which only start processes and may be called from several.
"""
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from harness import PATIENCE, Failure, ask_live, check, keel_cmd, main, wait_for  # noqa: E402,F401

SSH = "/usr/bin/ssh"
SSH_KEYGEN = "/usr/bin/ssh-keygen"
SSHD = "/usr/sbin/sshd"
DROPBEAR = "/usr/sbin/dropbear"
DROPBEARKEY = "/usr/bin/dropbearkey"
SSH_AUDIT = "/usr/bin/ssh-audit"

ADMIN_PASSWORD = "admin pw 17"
VIEWER_PASSWORD = "viewer pw 17"

# What the issue asks keel to speak, each forced in turn by the OpenSSH test.
CIPHERS = ["chacha20-poly1305@openssh.com", "aes256-gcm@openssh.com", "aes128-gcm@openssh.com",
           "aes256-ctr", "aes128-ctr"]
MACS = ["hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com"]
KEXES = ["curve25519-sha256", "curve25519-sha256@libssh.org", "ecdh-sha2-nistp256"]
HOST_KEY_ALGS = ["ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256"]


def skip(test, why):
    """Prints the SKIP line ctest recognises (SKIP_REGULAR_EXPRESSION) and exits 0."""
    print("SKIP %s: %s" % (test, why))
    sys.exit(0)


def require(test, *paths, keel=True):
    """Skips `test` (clearly) when a binary it needs is missing."""
    missing = [p for p in paths if not os.access(p, os.X_OK)]
    if missing:
        skip(test, "missing %s (toolchains/setup.sh installs it)" % ", ".join(missing))
    if keel and target_kind() == "keel" and not os.environ.get("KEEL"):
        skip(test, "KEEL is not set (run through ctest)")


def target_kind():
    return os.environ.get("SSH_TARGET", "keel")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(argv, timeout=PATIENCE, **kw):
    """subprocess.run with text output captured."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


class Key:
    """A key pair made by ssh-keygen: .path (private), .pub (the public key
    line), .type, .blob (base64 of the wire encoding), .fingerprint."""

    def __init__(self, directory, name, kind, bits=None):
        self.path = os.path.join(directory, name)
        argv = [SSH_KEYGEN, "-q", "-t", kind, "-N", "", "-C", name + "@keel-e2e", "-f", self.path]
        if bits:
            argv[4:4] = ["-b", str(bits)]
        p = run(argv)
        check(p.returncode == 0, "ssh-keygen %s" % kind, p)
        with open(self.path + ".pub") as f:
            self.pub = f.read().strip()
        self.type, self.blob = self.pub.split()[:2]
        p = run([SSH_KEYGEN, "-lf", self.path + ".pub"])
        self.fingerprint = p.stdout.split()[1]


class Keys:
    """The user keys of a test run, in `directory`."""

    def __init__(self, directory):
        self.ecdsa = Key(directory, "id_ecdsa", "ecdsa", 256)
        self.rsa = Key(directory, "id_rsa", "rsa", 3072)
        self.wrong = Key(directory, "id_wrong", "ecdsa", 256)      # nobody's
        self.ed25519 = Key(directory, "id_ed25519", "ed25519")     # refused by keel


class Target:
    """What every target offers the tests."""
    host = "127.0.0.1"
    port = 0
    admin = "admin"          # key user: keys.ecdsa and keys.rsa
    viewer = "viewer"        # read-only password user (keel only)
    has_passwords = False
    # A command whose output and status 0 the tests check, with a line of its output.
    ok_command, ok_marker = "show ports", "p0"
    # Not a command: non-zero status, this on stderr.
    bad_command, bad_marker = "frobnicate now", "frobnicate"
    # A configuration command a read-only user is refused.
    change_command = "ip-add br0 10.9.9.9/24"

    def __init__(self, workdir, keys):
        self.dir = workdir
        self.keys = keys
        self.known_hosts = os.path.join(workdir, "known_hosts")
        open(self.known_hosts, "w").close()

    def ssh_argv(self, user, *opts, key=None, batch=True, verbose=False, tty=False, known_hosts=None):
        """An /usr/bin/ssh command line to this target, ending before the command."""
        argv = [SSH, "-F", "/dev/null", "-p", str(self.port),
                "-o", "UserKnownHostsFile=" + (known_hosts or self.known_hosts),
                "-o", "StrictHostKeyChecking=accept-new",
                "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", "ConnectTimeout=%d" % PATIENCE,
                "-o", "ServerAliveInterval=0",
                "-o", "LogLevel=ERROR" if not verbose else "LogLevel=DEBUG1"]
        if batch:
            argv += ["-o", "BatchMode=yes"]
        if key is not None:
            argv += ["-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-i", key.path]
        else:
            argv += ["-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
                     "-o", "PubkeyAuthentication=no"]
        argv += list(opts)
        argv += ["-tt"] if tty else ["-T"]
        argv += ["%s@%s" % (user, self.host)]
        return argv

    def ssh_exec(self, command, user=None, key=None, opts=(), verbose=False, stdin=None,
                 timeout=PATIENCE, known_hosts=None):
        """Runs `command` over ssh; returns the CompletedProcess (text)."""
        user = user or self.admin
        key = key if key is not None else self.keys.ecdsa
        argv = self.ssh_argv(user, *opts, key=key, verbose=verbose, known_hosts=known_hosts) + [command]
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                              stdin=None if stdin is not None else subprocess.DEVNULL)

    def ssh_password(self, command, user, password, opts=()):
        """Runs `command` over ssh logging in with `password` (keyboard-interactive
        or password, whichever the server offers first), typed by SSH_ASKPASS:
        sshpass is not on the machine. setsid: no controlling terminal."""
        askpass = os.path.join(self.dir, "askpass.sh")
        with open(askpass, "w") as f:
            f.write("#!/bin/sh\nprintf '%s\\n' \"$KEEL_E2E_PASSWORD\"\n")
        os.chmod(askpass, 0o700)
        env = dict(os.environ, SSH_ASKPASS=askpass, SSH_ASKPASS_REQUIRE="force",
                   KEEL_E2E_PASSWORD=password, DISPLAY=":0")
        argv = ["setsid", "-w"] + self.ssh_argv(
            user, "-o", "PreferredAuthentications=keyboard-interactive,password",
            "-o", "NumberOfPasswordPrompts=1", *opts, batch=False) + [command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=PATIENCE,
                              stdin=subprocess.DEVNULL, env=env)

    def host_fingerprints(self):
        """ssh-keyscan's view: {"ECDSA": "SHA256:...", "RSA": "SHA256:..."}."""
        p = run(["/usr/bin/ssh-keyscan", "-p", str(self.port), "-t", "ecdsa,rsa", self.host])
        out = {}
        with tempfile.NamedTemporaryFile("w", suffix=".keys") as f:
            f.write(p.stdout)
            f.flush()
            q = run([SSH_KEYGEN, "-lf", f.name])
        for line in q.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 4:
                out[parts[-1].strip("()")] = parts[1]
        return out

    def log_text(self):
        return ""

    def stop(self):
        pass


# --------------------------------------------------------------------------
# keel

def keel_config_lines(keys, port=0, extra=()):
    return ["username admin password '%s'" % ADMIN_PASSWORD,
            "username admin role admin",
            "username admin ssh-key " + keys.ecdsa.pub,
            "username admin ssh-key " + keys.rsa.pub,
            "username viewer password '%s'" % VIEWER_PASSWORD,
            "username viewer role read-only",
            "ssh port %d" % port] + list(extra)


class KeelTarget(Target):
    has_passwords = True

    def __init__(self, workdir, keys, extra=(), config_dir=None, serial=False):
        super().__init__(workdir, keys)
        self.serial = serial
        self.config_dir = config_dir or os.path.join(workdir, "keel-config")
        if not os.path.exists(os.path.join(self.config_dir, "startup-config")):
            # The board's own config (br0 with p0, p1) plus ours, saved by
            # keel itself as the startup config every (re)boot replays.
            os.makedirs(self.config_dir, exist_ok=True)
            p = subprocess.run(keel_cmd("--config-dir", self.config_dir),
                               input="\n".join(keel_config_lines(keys, 0, extra)) + "\nwrite memory\n",
                               capture_output=True, text=True, timeout=PATIENCE)
            check(p.returncode == 0 and "error" not in p.stdout + p.stderr,
                  "keel saves the test's startup config", p)
        self.proc = None
        self.start()

    def start(self):
        """Boots keel (stdin a pipe kept open: its console, never asked to log
        in) and learns the SSH port from `show ssh`."""
        self.err = tempfile.TemporaryFile(mode="w+")
        if self.serial:
            # The console on a pty of ours (--console: the serial path, with
            # its login); commands of the test go through `keel --exec`.
            import pty
            self.master, slave = pty.openpty()
            self.tty = PtyReader(self.master)
            self.proc = subprocess.Popen(keel_cmd("--config-dir", self.config_dir, "--console", os.ttyname(slave)),
                                         stdin=subprocess.DEVNULL, stdout=self.err, stderr=self.err,
                                         start_new_session=True)
            os.close(slave)
        else:
            self.proc = subprocess.Popen(keel_cmd("--config-dir", self.config_dir),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                         text=True, bufsize=1, start_new_session=True)
        self.port = 0

        def bound():
            self.port = self.ssh_port()
            return self.port != 0
        wait_for(bound, "keel's SSH server to listen (show ssh)")

    def console(self, command):
        """Runs a console command on keel's stdin (or, with the console on a
        pty, through `keel --exec`); returns its output (errors go to
        keel's stderr: use exec() to see them)."""
        if self.serial:
            return self.exec(command)[1]
        return ask_live(self.proc, self.err, command)

    def exec(self, command):
        """`keel --exec command` in this keel: (status, stdout + stderr)."""
        check(self.proc.poll() is None, "keel exited:\n" + self.stderr_text())
        p = subprocess.run(keel_cmd("--config-dir", self.config_dir, "--exec", command),
                           capture_output=True, text=True, timeout=PATIENCE)
        check(p.returncode != 2, "keel --exec %r: no keel answered" % command, p)
        return p.returncode, p.stdout + p.stderr

    def ssh_port(self):
        """The port `show ssh` says it listens on (0: not listening yet):
        `show ssh --format json`'s "port" once "state" is "listening"."""
        if self.serial:
            # keel --exec: the socket appears during boot.
            check(self.proc.poll() is None, "keel exited:\n" + self.stderr_text())
            p = subprocess.run(keel_cmd("--config-dir", self.config_dir, "--exec", "show ssh --format json"),
                               capture_output=True, text=True, timeout=PATIENCE)
            out = p.stdout if p.returncode == 0 else ""
        else:
            out = self.console("show ssh --format json")
        for line in out.splitlines():
            line = line.strip()
            if line.startswith("{"):
                j = json.loads(line)
                if j.get("state") == "listening" and isinstance(j.get("port"), int):
                    return j["port"]
        return 0

    def log_text(self):
        return self.console("show logging")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(PATIENCE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self):
        self.stop()
        self.start()

    def stderr_text(self):
        self.err.seek(0)
        return self.err.read()


class PtyReader:
    """The master side of a pty: expect() text after the last match, send()."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = b""
        self.mark = 0

    def expect(self, needle, timeout=PATIENCE):
        import select
        needle = needle.encode() if isinstance(needle, str) else needle
        deadline = time.time() + timeout
        while True:
            i = self.buf.find(needle, self.mark)
            if i >= 0:
                seen = self.buf[self.mark:i + len(needle)]
                self.mark = i + len(needle)
                return seen.decode(errors="replace")
            check(time.time() < deadline, "no %r on the console after %d s:\n%r"
                  % (needle, timeout, self.buf[-2000:].decode(errors="replace")))
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:
                    data = b""
                check(data, "the console closed; no %r in:\n%r" % (needle, self.buf.decode(errors="replace")))
                self.buf += data

    def send(self, data):
        os.write(self.fd, data.encode() if isinstance(data, str) else data)


# --------------------------------------------------------------------------
# sshd and dropbear, run privately

# The stand-in for keel's command tree behind sshd's ForceCommand: exec runs
# one "command" (show ports: a table and 0; anything else: keel-like error on
# stderr, 1; a config command by a read-only user can't be told apart here);
# a shell on a pty prints a prompt, echoes, completes "show po<Tab>" and
# ends on "exit".
FAKE_KEEL = textwrap.dedent(r'''
    import os, sys, termios, tty
    WORDS = ["show ports", "show version", "show ssh", "exit"]
    def run(line):
        line = line.strip()
        if line == "show ports":
            sys.stdout.write("port  name  kind\n   0  p0    pcap\n   1  p1    pcap\n")
            return 0
        if line in ("true", "version"):
            return 0
        sys.stderr.write("error: unknown command '%s'\n" % line.split()[0] if line else "")
        return 1
    cmd = os.environ.get("SSH_ORIGINAL_COMMAND")
    if cmd is not None:
        sys.stdout.flush()
        rc = run(cmd); sys.stdout.flush(); sys.exit(rc)
    if not os.isatty(0):
        rc = 0
        for line in sys.stdin:
            rc = run(line)
        sys.exit(rc)
    old = termios.tcgetattr(0)
    tty.setraw(0)
    out = lambda s: (os.write(1, s.replace("\n", "\r\n").encode()))
    try:
        line = ""
        out("keel> ")
        while True:
            c = os.read(0, 1).decode()
            if not c or c == "\x04":
                break
            if c == "\t":
                hits = [w for w in WORDS if w.startswith(line)]
                if len(hits) == 1:
                    out(hits[0][len(line):] + " "); line = hits[0] + " "
            elif c in "\r\n":
                out("\n")
                if line.strip() == "exit":
                    break
                if line.strip():
                    sys.stdout.flush()
                    run(line); sys.stdout.flush()
                line = ""
                out("keel> ")
            else:
                line += c; out(c)
    finally:
        termios.tcsetattr(0, termios.TCSADRAIN, old)
''')


class SshdTarget(Target):
    """OpenSSH's sshd on a free port, as the user running the test."""

    def __init__(self, workdir, keys, force_command=True, extra_config="", private_home=False):
        super().__init__(workdir, keys)
        self.admin = pwd.getpwuid(os.getuid()).pw_name
        d = os.path.join(workdir, "sshd")
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o700)
        for kind, bits in (("ecdsa", 256), ("rsa", 3072)):
            run([SSH_KEYGEN, "-q", "-t", kind, "-b", str(bits), "-N", "", "-f",
                 os.path.join(d, "host_%s" % kind)])
        with open(os.path.join(d, "authorized_keys"), "w") as f:
            f.write(keys.ecdsa.pub + "\n" + keys.rsa.pub + "\n")
        fake = os.path.join(d, "fake_keel.py")
        with open(fake, "w") as f:
            f.write(FAKE_KEEL)
        self.port = free_port()
        self.log = os.path.join(d, "sshd.log")
        cfg = os.path.join(d, "sshd_config")
        with open(cfg, "w") as f:
            f.write(textwrap.dedent("""\
                Port %d
                ListenAddress 127.0.0.1
                HostKey %s/host_ecdsa
                HostKey %s/host_rsa
                PidFile %s/sshd.pid
                AuthorizedKeysFile %s/authorized_keys
                StrictModes no
                UsePAM no
                PermitRootLogin prohibit-password
                PasswordAuthentication no
                KbdInteractiveAuthentication no
                MaxStartups 100:30:200
                MaxSessions 100
                LogLevel INFO
                """ % (self.port, d, d, d, d)))
            if force_command:
                f.write("ForceCommand /usr/bin/python3 %s\n" % fake)
            f.write(extra_config)
        # sshd insists on its privilege separation directory (what the
        # service's tmpfiles.d would make): empty, root's, 0755.
        if not os.path.isdir("/run/sshd"):
            os.makedirs("/run/sshd", 0o755, exist_ok=True)
        argv = [SSHD, "-D", "-e", "-f", cfg]
        if private_home:
            # As dropbear's: the user's shell then reads no rc file of the
            # machine's (root's .bashrc would cost every session its time).
            argv = private_home_argv(os.path.join(d, "home"), keys, argv)
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=open(self.log, "w"),
                                     start_new_session=True)
        wait_for(self._listening, "sshd to listen on port %d" % self.port)

    def _listening(self):
        check(self.proc.poll() is None, "sshd exited: " + open(self.log).read())
        try:
            socket.create_connection((self.host, self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(PATIENCE)


def private_home_argv(fake_home, keys, argv):
    """argv run in a mount namespace of its own where `fake_home` (made
    here: .ssh/authorized_keys with the test's user keys, nothing else) is
    bound over the user's home directory. The machine's home is untouched."""
    home = pwd.getpwuid(os.getuid()).pw_dir
    os.makedirs(os.path.join(fake_home, ".ssh"), exist_ok=True)
    os.chmod(fake_home, 0o700)
    os.chmod(os.path.join(fake_home, ".ssh"), 0o700)
    ak = os.path.join(fake_home, ".ssh", "authorized_keys")
    with open(ak, "w") as f:
        f.write(keys.ecdsa.pub + "\n" + keys.rsa.pub + "\n")
    os.chmod(ak, 0o600)
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh", fake_home, home] + list(argv)


class DropbearTarget(Target):
    """dropbear on a free port, as the user running the test. dropbear reads
    ~/.ssh/authorized_keys only (no option to point elsewhere): it runs in a
    mount namespace of its own with a temporary directory bound over $HOME,
    so the machine's own home is never touched (needs root for unshare)."""

    def __init__(self, workdir, keys):
        super().__init__(workdir, keys)
        self.admin = pwd.getpwuid(os.getuid()).pw_name
        d = os.path.join(workdir, "dropbear")
        os.makedirs(d, exist_ok=True)
        hk = os.path.join(d, "host_ecdsa")
        p = run([DROPBEARKEY, "-t", "ecdsa", "-s", "256", "-f", hk])
        check(p.returncode == 0, "dropbearkey", p)
        self.port = free_port()
        self.log = os.path.join(d, "dropbear.log")
        argv = private_home_argv(os.path.join(d, "home"), keys,
                                 [DROPBEAR, "-F", "-E", "-s", "-p", "127.0.0.1:%d" % self.port, "-r", hk,
                                  "-P", os.path.join(d, "dropbear.pid")])
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log, "w"), start_new_session=True)
        wait_for(self._listening, "dropbear to listen on port %d" % self.port)

    _listening = SshdTarget._listening

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(PATIENCE)


def make_target(workdir, keys):
    kind = target_kind()
    if kind == "sshd":
        return SshdTarget(workdir, keys)
    if kind == "keel":
        return KeelTarget(workdir, keys)
    sys.exit("SSH_TARGET must be keel or sshd, not %r" % kind)


def workdir():
    d = tempfile.mkdtemp(prefix="keel-ssh-e2e-")
    return d


def cleanup(d, *targets):
    for t in targets:
        try:
            t.stop()
        except Exception as e:  # a cleanup failure mustn't hide the test's result
            print("cleanup: %s" % e)
    shutil.rmtree(d, True)

"""The SSH server with the real OpenSSH client (/usr/bin/ssh).

One keel on host-sim with its own config directory, `ssh port 0` (the port
comes from `show ssh --format json`), an admin and a read-only user with
ECDSA keys made by ssh-keygen here. What a user depends on:
  * `ssh admin@nic show ports` prints the ports and exits 0;
  * an unknown command exits non-zero with the message on stderr, nothing on stdout;
  * a read-only user may show but is refused a configuration command, with
    one clear line, and the refusal is in `show logging` (module audit);
  * a change over SSH is in the audit log with the user's name;
  * `show ssh host-key` prints the fingerprint the client sees (ssh-keyscan);
  * `show ssh` / `show ssh sessions` / running-config describe the server.
The exhaustive interop (every cipher, paramiko, ssh-audit, 20 sessions) is
tests/e2e/test_ssh_*.py."""
import json
import os
import shutil
import subprocess
import sys
import time

from harness import PATIENCE, Failure, check, keel_cmd, main, tmpdir, wait_for

SSH = shutil.which("ssh")
KEYGEN = shutil.which("ssh-keygen")
KEYSCAN = shutil.which("ssh-keyscan")


class Keel:
    def __init__(self):
        self.dir = tmpdir()
        self.keys = {}
        for user in ("admin", "viewer"):
            k = os.path.join(self.dir, "id_" + user)
            subprocess.run([KEYGEN, "-q", "-t", "ecdsa", "-N", "", "-C", user + "@test", "-f", k], check=True)
            self.keys[user] = k
        pub = {u: open(k + ".pub").read().strip() for u, k in self.keys.items()}
        cfg = os.path.join(self.dir, "ssh.cfg")
        with open(cfg, "w") as f:
            f.write("username admin ssh-key %s\n" % pub["admin"])
            f.write("username viewer role read-only\n")
            f.write("username viewer ssh-key %s\n" % pub["viewer"])
            f.write("ssh port 0\n")
        self.cfg = cfg
        self.err = open(os.path.join(self.dir, "keel.err"), "w+")
        self.start()

    def start(self, wait=True):
        # stdin stays open (a pipe): keel's console waits on it while SSH works.
        self.proc = subprocess.Popen(keel_cmd("--config", self.cfg, "--config-dir", self.dir), stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=self.err, text=True)
        self.port = None
        if wait:
            wait_for(lambda: self.state() == "listening", "show ssh: listening")

    def state(self):
        """show ssh's state ("" while keel isn't answering yet); learns the port once listening."""
        r = self.exec_("show ssh --format json")
        if r.returncode != 0:
            return ""
        j = json.loads(r.stdout)
        if j["state"] == "listening":
            self.port = j["port"]
        return j["state"]

    def exec_(self, line):
        return subprocess.run(keel_cmd("--config-dir", self.dir, "--exec", line), capture_output=True, text=True,
                              timeout=PATIENCE)

    def ssh(self, user, *command, extra=()):
        # `extra` first: ssh takes the first value given for an option.
        args = [SSH, *extra, "-p", str(self.port), "-i", self.keys[user], "-o", "IdentitiesOnly=yes",
                "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "LogLevel=ERROR", user + "@127.0.0.1", *command]
        return subprocess.run(args, capture_output=True, text=True, timeout=PATIENCE, stdin=subprocess.DEVNULL)

    def stop(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.seek(0)
        return self.err.read()


K = None


def keel():
    global K
    if K is None:
        K = Keel()
    return K


def test_exec_prints_output_and_exits_0():
    r = keel().ssh("admin", "show", "ports")
    check(r.returncode == 0, "ssh admin show ports exits 0", r)
    check("p0" in r.stdout and "p1" in r.stdout, "the ports are listed", r)
    check(r.stderr == "", "nothing on stderr", r)
    r = keel().ssh("admin", "show ports --format json")  # one string: the remote line as typed
    check(r.returncode == 0 and json.loads(r.stdout)["ports"][0]["name"] == "p0", "JSON through ssh", r)


def test_unknown_command_fails_with_the_message_on_stderr():
    r = keel().ssh("admin", "bogus-command")
    check(r.returncode == 1, "exit status 1 for an unknown command", r)
    check(r.stdout == "", "nothing on stdout", r)
    check("error: unknown command 'bogus-command'" in r.stderr, "the message on stderr", r)


def test_read_only_user_is_refused_a_change_and_the_refusal_is_logged():
    k = keel()
    r = k.ssh("viewer", "show", "ports")
    check(r.returncode == 0 and "p0" in r.stdout, "a read-only user may show", r)
    r = k.ssh("viewer", "add-br", "br9")
    check(r.returncode == 1, "refused: exit status 1", r)
    check(r.stderr.strip() == "error: permission denied: 'add-br' needs role operator (user 'viewer' is read-only)",
          "one clear line: %r" % r.stderr, r)
    check("br9" not in k.exec_("show running-config").stdout, "nothing was changed")
    log = k.exec_("show logging").stdout
    check('|audit|WARN|ssh viewer@127.0.0.1:' in log and 'refused "add-br br9" (needs operator)' in log,
          "the refusal is in the log:\n" + log)
    r = k.ssh("viewer", "ssh", "port", "0")
    check(r.returncode == 1 and "needs role admin" in r.stderr, "SSH settings are admin-only", r)
    # Datapath flows by hand go through the same gate (dp-flow get is a show).
    flow = "in_port(1),eth_type(0x0800),ipv4(src=10.99.99.99,frag=no) actions:2"
    for line in ("dp-flow add " + flow, "dp-flow mod " + flow, "dp-flow del " + flow.split(" actions")[0]):
        r = k.ssh("viewer", line)
        check(r.returncode == 1 and "permission denied: '%s' needs role operator" % " ".join(line.split()[:2])
              in r.stderr, "%r refused to a read-only user" % line, r)
    r = k.ssh("viewer", "dp-flow get " + flow.split(" actions")[0])
    check(r.returncode == 1 and "no such flow" in r.stderr, "dp-flow get is a show", r)
    check("10.99.99.99" not in k.exec_("flow-dump").stdout, "no flow was added")


def test_a_change_over_ssh_is_audited_with_the_user():
    k = keel()
    r = k.ssh("admin", "add-br", "br7")
    check(r.returncode == 0, "admin may add a bridge", r)
    check("add-br br7" in k.exec_("show running-config").stdout, "the bridge exists")
    log = k.exec_("show logging").stdout
    check("|audit|INFO|ssh admin@127.0.0.1:" in log and ": add-br br7" in log, "audited with the user:\n" + log)
    check(k.ssh("admin", "del-br", "br7").returncode == 0, "and removed again")


def test_host_key_fingerprint_is_what_the_client_sees():
    k = keel()
    shown = k.exec_("show ssh host-key").stdout
    scan = subprocess.run([KEYSCAN, "-p", str(k.port), "-t", "ecdsa", "127.0.0.1"], capture_output=True, text=True,
                          timeout=PATIENCE)
    fp = subprocess.run([KEYGEN, "-lf", "-"], input=scan.stdout, capture_output=True, text=True, timeout=PATIENCE)
    check(fp.returncode == 0, "ssh-keygen -lf of the scanned key", fp)
    want = fp.stdout.split()[1]  # SHA256:...
    check(want in shown, "show ssh host-key %r has the scanned fingerprint %s" % (shown, want))
    for f in ("ssh_host_ecdsa_key", "ssh_host_rsa_key"):
        mode = os.stat(os.path.join(k.dir, f)).st_mode & 0o777
        check(mode == 0o600, "%s is mode 0600 (%o)" % (f, mode))


def test_show_ssh_and_running_config():
    k = keel()
    j = json.loads(k.exec_("show ssh --format json").stdout)
    check(j["state"] == "listening" and j["listen"] == "127.0.0.1" and j["port"] == k.port, "show ssh: %r" % j)
    check(j["counters"]["auth_successes"] >= 1, "logins are counted: %r" % j)
    text = k.exec_("show ssh").stdout
    check("SSH server: listening" in text and "127.0.0.1:%d" % k.port in text, "show ssh text:\n" + text)
    # A session sees itself in show ssh sessions.
    r = k.ssh("admin", "show ssh sessions --format json")
    check(r.returncode == 0, "show ssh sessions over ssh", r)
    mine = [s for s in json.loads(r.stdout)["sessions"] if s["user"] == "admin" and s["state"] == "open"]
    check(len(mine) >= 1 and mine[0]["client"].startswith("SSH-2.0-OpenSSH"), "the session is listed: %r" % r.stdout)
    rc = k.exec_("show running-config").stdout
    check("ssh port 0\n" in rc, "running-config has the port:\n" + rc)
    check(rc.index("username viewer role read-only") < rc.index("ssh port 0"), "ssh after users")
    r = k.exec_("ssh max-sessions 0")
    check(r.returncode == 1 and "not in range 1 to 100" in r.stderr, "max-sessions 0 is refused", r)


def test_shell_without_pty_runs_one_command_per_line():
    k = keel()
    args = [SSH, "-T", "-p", str(k.port), "-i", k.keys["admin"], "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "admin@127.0.0.1"]
    r = subprocess.run(args, input="version\nnot-a-command\nshow users\n", capture_output=True, text=True,
                       timeout=PATIENCE)
    check(r.returncode == 1, "a failed line makes the exit status 1", r)
    check("keel" in r.stdout and "viewer" in r.stdout, "both good lines ran", r)
    check("unknown command 'not-a-command'" in r.stderr, "the bad one is on stderr", r)
    check("keel> " not in r.stdout, "no prompt without a pty", r)


def test_algorithm_settings_apply_to_new_connections():
    """`ssh kex-algorithms|host-key-algorithms|ciphers|macs LIST`: sshd_config's
    names, a bad list refused whole, running-config only when not the
    default, `show ssh` (text and JSON) the lists in effect, a new connection
    offered only what is listed, `no ssh ...` back to everything; admin only."""
    k = keel()
    full = {"kex_algorithms": "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256",
            "host_key_algorithms": "ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256",
            "ciphers": "chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com,"
                       "aes256-ctr,aes128-ctr",
            "macs": "hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com"}
    j = json.loads(k.exec_("show ssh --format json").stdout)
    check({key: j[key] for key in full} == full, "the defaults are the issue's lists: %r" % j)
    for line, why in [("ssh kex-algorithms curve25519-sha256,diffie-hellman-group14-sha1",
                       "'diffie-hellman-group14-sha1' is not a key exchange keel supports (curve25519-sha256,"
                       "curve25519-sha256@libssh.org,ecdh-sha2-nistp256)"),
                      ("ssh ciphers aes128-ctr,,aes256-ctr", "empty name in 'aes128-ctr,,aes256-ctr'"),
                      ("ssh macs hmac-sha2-256-etm@openssh.com,hmac-sha2-256-etm@openssh.com",
                       "'hmac-sha2-256-etm@openssh.com' is listed twice"),
                      ("ssh host-key-algorithms +rsa-sha2-512", "the +, - and ^ forms are not supported"),
                      ("ssh host-key-algorithms ssh-ed25519", "is not a host key algorithm keel supports")]:
        r = k.exec_(line)
        check(r.returncode == 1 and why in r.stderr, "%r refused: %s" % (line, why), r)
    check("ssh kex" not in k.exec_("show running-config").stdout, "nothing changed")

    def ssh_with(*opts):
        # LogLevel INFO: ssh says "Unable to negotiate ..." at that level.
        return k.ssh("admin", "version", extra=("-o", "LogLevel=INFO") + opts)
    check(ssh_with("-o", "KexAlgorithms=ecdh-sha2-nistp256").returncode == 0, "ecdh-sha2-nistp256 by default")
    for line in ("ssh kex-algorithms curve25519-sha256@libssh.org,curve25519-sha256",
                 "ssh host-key-algorithms rsa-sha2-512,rsa-sha2-256",
                 "ssh ciphers aes256-gcm@openssh.com,chacha20-poly1305@openssh.com",
                 "ssh macs hmac-sha2-512-etm@openssh.com"):
        r = k.exec_(line)
        check(r.returncode == 0, line, r)
    rc = k.exec_("show running-config").stdout
    for line in ("ssh kex-algorithms curve25519-sha256@libssh.org,curve25519-sha256\n",
                 "ssh host-key-algorithms rsa-sha2-512,rsa-sha2-256\n",
                 "ssh ciphers aes256-gcm@openssh.com,chacha20-poly1305@openssh.com\n",
                 "ssh macs hmac-sha2-512-etm@openssh.com\n"):
        check(line in rc, "running-config has %r:\n%s" % (line, rc))
    j = json.loads(k.exec_("show ssh --format json").stdout)
    check(j["kex_algorithms"] == "curve25519-sha256@libssh.org,curve25519-sha256" and
          j["host_key_algorithms"] == "rsa-sha2-512,rsa-sha2-256" and
          j["ciphers"] == "aes256-gcm@openssh.com,chacha20-poly1305@openssh.com" and
          j["macs"] == "hmac-sha2-512-etm@openssh.com", "show ssh JSON: %r" % j)
    text = k.exec_("show ssh").stdout
    check("kex-algorithms: curve25519-sha256@libssh.org,curve25519-sha256\n" in text and
          "macs: hmac-sha2-512-etm@openssh.com\n" in text, "show ssh text:\n" + text)
    # A new connection is offered only those.
    r = ssh_with("-o", "KexAlgorithms=ecdh-sha2-nistp256")
    check(r.returncode == 255 and "no matching key exchange method" in r.stderr, "NIST kex no longer offered: %r" % r.stderr, r)
    r = ssh_with("-o", "HostKeyAlgorithms=ecdsa-sha2-nistp256")
    check(r.returncode == 255 and "no matching host key type" in r.stderr, "ECDSA host key no longer offered", r)
    r = ssh_with("-o", "Ciphers=aes128-ctr")
    check(r.returncode == 255 and "no matching cipher" in r.stderr, "aes128-ctr no longer offered", r)
    r = ssh_with("-o", "Ciphers=aes256-ctr", "-o", "MACs=hmac-sha2-256-etm@openssh.com")
    check(r.returncode == 255, "aes256-ctr not offered, nor hmac-sha2-256-etm", r)
    r = ssh_with("-o", "KexAlgorithms=curve25519-sha256,ecdh-sha2-nistp256")
    check(r.returncode == 0 and r.stdout.startswith("keel"), "a listed kex still works", r)
    r = k.ssh("admin", "show ssh sessions --format json")
    mine = [s for s in json.loads(r.stdout)["sessions"] if s["state"] == "open"]
    # (The client's order picks among what both have, RFC 4253 7.1.)
    check(mine and mine[-1]["kex"] in ("curve25519-sha256@libssh.org", "curve25519-sha256") and
          mine[-1]["host_key"] in ("rsa-sha2-512", "rsa-sha2-256") and
          mine[-1]["cipher"] in ("aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com"),
          "a new connection negotiated within the lists: %r" % mine)
    # Back: `no ssh ...`, or the whole list in keel's order (the same thing).
    for line in ("no ssh kex-algorithms", "no ssh host-key-algorithms",
                 "ssh ciphers " + full["ciphers"], "no ssh macs"):
        r = k.exec_(line)
        check(r.returncode == 0, line, r)
    rc = k.exec_("show running-config").stdout
    check(not any(w in rc for w in ("ssh kex-", "ssh host-key-", "ssh ciphers", "ssh macs")),
          "the defaults are not in running-config:\n" + rc)
    j = json.loads(k.exec_("show ssh --format json").stdout)
    check({key: j[key] for key in full} == full, "back to the defaults: %r" % j)
    check(ssh_with("-o", "KexAlgorithms=ecdh-sha2-nistp256", "-o", "HostKeyAlgorithms=ecdsa-sha2-nistp256")
          .returncode == 0, "the NIST algorithms are offered again")
    for line in ("ssh kex-algorithms curve25519-sha256", "no ssh kex-algorithms"):
        r = k.ssh("viewer", line)
        check(r.returncode == 1 and "needs role admin" in r.stderr, "%r is admin-only" % line, r)


def test_host_key_readable_by_others_is_refused_until_0600():
    """As sshd: a private host key file group or others may read is not used
    (nor chmodded); keel says why and listens once it is 0600 again."""
    k = Keel()  # its own config directory: the keys were made when it first listened
    try:
        fps = k.exec_("show ssh host-key").stdout
        k.stop()
        key = os.path.join(k.dir, "ssh_host_ecdsa_key")
        os.chmod(key, 0o644)
        k.start(wait=False)
        wait_for(lambda: "too open" in k.state(), "show ssh: the key's permissions")
        check("not running (ssh: host keys: host key '%s': permissions 0644 are too open" % key in k.state(),
              "show ssh says which file and why: %r" % k.state())
        check(os.stat(key).st_mode & 0o777 == 0o644, "the file is left as it was")
        check("permissions 0644 are too open" in k.exec_("show logging").stdout, "and logs it")
        os.chmod(key, 0o600)
        wait_for(lambda: k.state() == "listening", "keel to listen once the key is 0600")
        check(k.exec_("show ssh host-key").stdout == fps, "the same host keys")
        r = k.ssh("admin", "version")
        check(r.returncode == 0 and r.stdout.startswith("keel"), "a login works", r)
    finally:
        k.stop()


def test_shell_without_pty_runs_a_large_piped_script_to_its_end():
    """`cat file | ssh nic`: 8 MB of lines (comments, an over-long line, a
    failing command) all run in order and the session ends with the last
    line's output, exit-status 1 and CLOSE (the ssh client exits). The line
    reader keeps up with any chunking (issue 17's bulk stall: the session
    erased each line from the front of all its input, quadratic in what it
    held, and held everything the client sent)."""
    k = keel()
    comment = "! " + "x" * 3997 + "\n"
    script = comment * 1000 + "y" * 5000 + "\n" + comment * 1000 + "not-a-command\n" + comment * 50 + "version\n"
    args = [SSH, "-T", "-p", str(k.port), "-i", k.keys["admin"], "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "admin@127.0.0.1"]
    r = subprocess.run(args, input=script, capture_output=True, text=True, timeout=PATIENCE)
    check(r.returncode == 1, "exit status 1 (a line failed), after every line", r)
    check(r.stdout.startswith("keel"), "the last line (version) ran: %r" % r.stdout[:200], r)
    check(r.stderr == "error: line longer than 4096 bytes ignored\n"
          "error: unknown command 'not-a-command'\n", "the two bad lines, in order: %r" % r.stderr, r)


if __name__ == "__main__":
    if not (SSH and KEYGEN and KEYSCAN):
        print("SKIP: no OpenSSH client (ssh, ssh-keygen, ssh-keyscan)")
        sys.exit(0)
    tests = [test_exec_prints_output_and_exits_0, test_unknown_command_fails_with_the_message_on_stderr,
             test_read_only_user_is_refused_a_change_and_the_refusal_is_logged,
             test_a_change_over_ssh_is_audited_with_the_user, test_host_key_fingerprint_is_what_the_client_sees,
             test_show_ssh_and_running_config, test_shell_without_pty_runs_one_command_per_line,
             test_shell_without_pty_runs_a_large_piped_script_to_its_end,
             test_algorithm_settings_apply_to_new_connections,
             test_host_key_readable_by_others_is_refused_until_0600]
    try:
        main(tests)
    finally:
        if K is not None:
            K.stop()

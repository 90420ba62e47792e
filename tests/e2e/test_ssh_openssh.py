"""keel's SSH server against OpenSSH's own client, /usr/bin/ssh (issue 17).

keel on host-sim with a config directory of its own, `ssh port 0` (the port
from `show ssh`), users `admin` (role admin, ECDSA P-256 and RSA 3072 keys
made by ssh-keygen in the test's directory) and `viewer` (read-only,
password). Every ssh runs with -F /dev/null, BatchMode (but the password
logins), its own known_hosts. Asserted:

  * exec `show ports`: its output, exit status 0; an unknown command: a
    non-zero status, the error on stderr (not stdout);
  * `ssh -tt` driven through a pty: the prompt, Tab completes `show po` to
    `show ports`, the command runs, `exit` ends the session with status 0;
  * --More-- over SSH: on a terminal of 6 rows, `help` stops at --More--
    after 5 rows; the terminal resized to 12 rows (the client sends
    window-change), `show control` says so and `help` stops after 11;
  * every cipher (chacha20-poly1305, aes256/128-gcm, aes256/128-ctr), each
    MAC with the ctr ciphers (hmac-sha2-256/512-etm), every kex
    (curve25519-sha256, its @libssh.org name, ecdh-sha2-nistp256) and every
    host key algorithm (ecdsa-sha2-nistp256, rsa-sha2-512, rsa-sha2-256)
    forced in turn: the command works, and `ssh -v`'s "kex: algorithm:",
    "kex: host key algorithm:", "kex: server->client cipher: X MAC: Y" (and
    client->server) lines name what was forced;
  * RSA and ECDSA user keys log in; a key nobody has and a wrong password
    are refused ("Permission denied", status 255);
  * the read-only user is refused a configuration command (non-zero,
    "permission denied" on stderr; the change not made) and the refusal is
    in `show logging`;
  * the host key fingerprints ssh sees match `show ssh host-key` and stay
    the same after keel restarts with the same config directory;
  * an ssh-ed25519 key line is refused by `username NAME ssh-key` with the
    clear message; ssh-rsa (SHA-1) user key signatures are refused.

SSH_TARGET=sshd runs the same client side against a private OpenSSH sshd
(ForceCommand: a stand-in for keel's commands, see ssh_common.py); the
checks only keel can answer (passwords, roles, logging, restart, key lines)
say so and pass."""
import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time

from ssh_common import (PtyReader, CIPHERS, HOST_KEY_ALGS, KEXES, MACS, PATIENCE, SSH, SSH_KEYGEN, VIEWER_PASSWORD,
                        Failure, KeelTarget, Keys, check, cleanup, main, make_target, require, wait_for, workdir)

T = None   # the target, made once in __main__


def keel_only(what):
    if not isinstance(T, KeelTarget):
        print("  (%s: keel only, not checked against %s)" % (what, type(T).__name__))
        return True
    return False


def test_exec_output_and_status():
    p = T.ssh_exec(T.ok_command)
    check(p.returncode == 0, "exec %r: status 0" % T.ok_command, p)
    check(T.ok_marker in p.stdout, "exec %r: its output on stdout" % T.ok_command, p)
    p = T.ssh_exec(T.bad_command)
    check(p.returncode not in (0, 255), "unknown command: a non-zero exit status of the command", p)
    check(T.bad_marker in p.stderr and T.bad_marker not in p.stdout,
          "unknown command: the message on stderr", p)
    # `ssh nic CMD; echo $?` in a script: the status of the command.
    p = subprocess.run(["sh", "-c", " ".join("'%s'" % a for a in T.ssh_argv(T.admin, key=T.keys.ecdsa))
                        + " '%s' </dev/null; echo status=$?" % T.bad_command],
                       capture_output=True, text=True, timeout=PATIENCE)
    check(re.search(r"status=[1-9]", p.stdout) and "status=255" not in p.stdout,
          "the shell sees the command's status", p)


class PtySsh(PtyReader):
    """ssh -tt on a pty of ours (pexpect isn't installed); expect()/send() from PtyReader."""

    def __init__(self, argv, rows=0, cols=0):
        pid, fd = pty.fork()
        if pid == 0:
            if rows:  # the terminal's size, before ssh reads it for its pty-req
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execv(argv[0], argv)
        super().__init__(fd)
        self.pid = pid

    def resize(self, rows, cols):
        """The terminal changes size: the kernel sends ssh SIGWINCH, ssh a window-change."""
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def wait(self, timeout=PATIENCE):
        deadline = time.time() + timeout
        while time.time() < deadline:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(st)
            try:
                r, _, _ = select.select([self.fd], [], [], 0.2)
                if r:
                    self.buf += os.read(self.fd, 4096)
            except OSError:
                time.sleep(0.05)
        self.close()
        raise Failure("ssh -tt did not end:\n%r" % self.buf.decode(errors="replace"))

    def close(self):
        try:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        os.close(self.fd)


def test_interactive_tty():
    s = PtySsh(T.ssh_argv(T.admin, key=T.keys.ecdsa, tty=True))
    try:
        s.expect("keel> ")
        s.send("show po\t")
        s.expect("show ports")          # Tab completed it (echoed by the line editor)
        s.send("\r")
        s.expect(T.ok_marker)
        s.expect("keel> ")
        s.send("exit\r")
        rc = s.wait()
        check(rc == 0, "exit ends the interactive session with status 0 (got %s)" % rc)
    finally:
        try:
            os.close(s.fd)
        except OSError:
            pass


def test_more_paging_and_window_change():
    if keel_only("--More-- and window-change"):
        return
    cols = 300  # wider than any line of `help`: one row per line

    def first_page():
        """Rows `help` shows before --More-- (the prompt's row excluded); q ends the paging."""
        s.send("help\r")
        seen = s.expect("--More--")
        s.send("q")
        s.expect("keel> ")
        return seen.split("help\r\n", 1)[1].count("\r\n")

    def session_rows():
        s.send("show control --format json\r")
        out = s.expect("keel> ")
        return json.loads(out[out.index("{"):out.rindex("}") + 1])["session"]["rows"]

    s = PtySsh(T.ssh_argv(T.admin, key=T.keys.ecdsa, tty=True), rows=6, cols=cols)
    try:
        s.expect("keel> ")
        check(session_rows() == 6, "the pty-req's 6 rows are the session's")
        n = first_page()
        check(n == 5, "a 6-row terminal pages after 5 rows of help, got %d" % n)
        s.resize(12, cols)
        wait_for(lambda: session_rows() == 12, "the window-change to reach the session (show control: rows 12)")
        n = first_page()
        check(n == 11, "a 12-row terminal pages after 11 rows of help, got %d" % n)
        s.send("exit\r")
        check(s.wait() == 0, "exit ends the session with status 0")
    finally:
        try:
            os.close(s.fd)
        except OSError:
            pass


def negotiated(stderr):
    """What `ssh -v` says was chosen."""
    out = {}
    m = re.search(r"kex: algorithm: (\S+)", stderr)
    out["kex"] = m and m.group(1)
    m = re.search(r"kex: host key algorithm: (\S+)", stderr)
    out["hostkey"] = m and m.group(1)
    m = re.search(r"kex: server->client cipher: (\S+) MAC: (\S+)", stderr)
    out["s2c"] = m and (m.group(1), m.group(2))
    m = re.search(r"kex: client->server cipher: (\S+) MAC: (\S+)", stderr)
    out["c2s"] = m and (m.group(1), m.group(2))
    m = re.search(r"Server host key: (\S+) (SHA256:\S+)", stderr)
    out["server_key"] = m and (m.group(1), m.group(2))
    return out


def forced(opts, known_hosts=None):
    p = T.ssh_exec(T.ok_command, opts=opts, verbose=True, known_hosts=known_hosts)
    check(p.returncode == 0 and T.ok_marker in p.stdout, "exec with %s" % " ".join(opts), p)
    return negotiated(p.stderr), p


def test_each_cipher_and_mac():
    for c in CIPHERS:
        macs = MACS if c.endswith("-ctr") else [None]
        for mac in macs:
            opts = ["-o", "Ciphers=" + c] + (["-o", "MACs=" + mac] if mac else [])
            n, p = forced(opts)
            want = (c, mac or "<implicit>")
            check(n["s2c"] == want and n["c2s"] == want,
                  "%s: ssh -v says %s / %s, want %s" % (" ".join(opts), n["s2c"], n["c2s"], want), p)


def test_each_kex():
    for k in KEXES:
        n, p = forced(["-o", "KexAlgorithms=" + k])
        check(n["kex"] == k, "KexAlgorithms=%s: ssh -v says %s" % (k, n["kex"]), p)


def test_each_host_key_algorithm():
    seen = {}
    for a in HOST_KEY_ALGS:
        # known_hosts of its own per algorithm: one with the ECDSA key would
        # (rightly) make ssh refuse the RSA one as a changed host key.
        n, p = forced(["-o", "HostKeyAlgorithms=" + a], known_hosts=os.path.join(T.dir, "known_hosts." + a))
        check(n["hostkey"] == a, "HostKeyAlgorithms=%s: ssh -v says %s" % (a, n["hostkey"]), p)
        key_type = "ECDSA" if a.startswith("ecdsa") else "RSA"
        check(n["server_key"] and n["server_key"][0] == ("ecdsa-sha2-nistp256" if key_type == "ECDSA"
                                                         else "ssh-rsa"),
              "%s: Server host key line %s" % (a, n["server_key"]), p)
        seen[key_type] = n["server_key"][1]
    # Both RSA signature hashes are made by the one RSA key.
    fp = T.host_fingerprints()
    check(fp.get("ECDSA") == seen["ECDSA"] and fp.get("RSA") == seen["RSA"],
          "ssh-keyscan's fingerprints %s are the ones ssh verified %s" % (fp, seen))


def test_user_keys():
    for k in (T.keys.ecdsa, T.keys.rsa):
        p = T.ssh_exec(T.ok_command, key=k, verbose=True)
        check(p.returncode == 0 and T.ok_marker in p.stdout, "login with the %s user key" % k.type, p)
        check("Authenticated to" in p.stderr and "using \"publickey\"" in p.stderr,
              "%s: authenticated with publickey" % k.type, p)
    p = T.ssh_exec(T.ok_command, key=T.keys.rsa, opts=["-o", "PubkeyAcceptedAlgorithms=rsa-sha2-256"],
                   verbose=True)
    check(p.returncode == 0, "RSA user key signing with rsa-sha2-256", p)
    p = T.ssh_exec(T.ok_command, key=T.keys.wrong)
    check(p.returncode == 255 and "Permission denied" in p.stderr, "a key nobody has is refused", p)
    check(T.ok_marker not in p.stdout, "and nothing ran", p)


def test_ssh_rsa_sha1_refused():
    p = T.ssh_exec(T.ok_command, key=T.keys.rsa, opts=["-o", "PubkeyAcceptedAlgorithms=ssh-rsa"])
    check(p.returncode == 255 and "Permission denied" in p.stderr,
          "an ssh-rsa (SHA-1) user key signature is refused", p)


def test_passwords():
    if keel_only("passwords"):
        return
    p = T.ssh_password(T.ok_command, T.viewer, VIEWER_PASSWORD)
    check(p.returncode == 0 and T.ok_marker in p.stdout, "viewer logs in with its password", p)
    p = T.ssh_password(T.ok_command, T.viewer, "not the password")
    check(p.returncode == 255 and "Permission denied" in p.stderr, "a wrong password is refused", p)
    p = T.ssh_password(T.ok_command, "nobody", VIEWER_PASSWORD)
    check(p.returncode == 255 and "Permission denied" in p.stderr, "an unknown user is refused", p)


def test_read_only_refused_and_logged():
    if keel_only("roles"):
        return
    p = T.ssh_password(T.change_command, T.viewer, VIEWER_PASSWORD)
    check(p.returncode not in (0, 255), "the read-only user's config command fails", p)
    check("permission denied" in p.stderr, "with 'permission denied' on stderr", p)
    rc = T.console("show running-config")
    check("10.9.9.9" not in rc, "nothing changed: %s" % rc)
    log = T.log_text()
    check(any("viewer" in l and "refused" in l and T.change_command in l for l in log.splitlines()),
          "the refusal, with the user and the line, is in show logging:\n" + log)
    # An admin's change over SSH works and is logged with the user.
    p = T.ssh_exec(T.change_command)
    check(p.returncode == 0, "admin may", p)
    log = T.log_text()
    check(any("admin@" in l and T.change_command in l and "refused" not in l for l in log.splitlines()),
          "admin's change is logged with the user:\n" + log)
    p = T.ssh_exec("ip-del br0 10.9.9.9/24")
    check(p.returncode == 0, "admin undoes it", p)


def test_host_key_kept_across_restart():
    if keel_only("restart"):
        return
    before = T.host_fingerprints()
    check(set(before) == {"ECDSA", "RSA"}, "both host keys offered: %s" % before)
    shown = T.console("show ssh host-key")
    for kind, fp in before.items():
        check(fp in shown, "show ssh host-key has %s's %s:\n%s" % (kind, fp, shown))
    keys = os.listdir(T.config_dir)
    check("ssh_host_ecdsa_key" in keys and "ssh_host_rsa_key" in keys, "host keys in the config dir: %s" % keys)
    for k in ("ssh_host_ecdsa_key", "ssh_host_rsa_key"):
        mode = os.stat(os.path.join(T.config_dir, k)).st_mode & 0o777
        check(mode == 0o600, "%s is mode 0600 (%o)" % (k, mode))
    T.restart()
    after = T.host_fingerprints()
    check(after == before, "the same host keys after a restart: %s then %s" % (before, after))
    # known_hosts from before the restart still matches: strict checking passes.
    p = T.ssh_exec(T.ok_command, opts=["-o", "StrictHostKeyChecking=yes"])
    check(p.returncode == 0, "known_hosts from before the restart still verifies", p)


def test_ed25519_key_line_refused():
    if keel_only("key lines"):
        return
    rc, out = T.exec("username admin ssh-key " + T.keys.ed25519.pub)
    check(rc == 1 and "ssh-ed25519 keys are not supported" in out and "ecdsa-sha2-nistp256" in out,
          "the ed25519 key line is refused clearly: %d %r" % (rc, out))
    rc = T.console("show running-config")
    check(T.keys.ed25519.blob not in rc, "and not added")
    # An ed25519 key can't log in either (nobody has it, keel doesn't verify it).
    p = T.ssh_exec(T.ok_command, key=T.keys.ed25519)
    check(p.returncode == 255, "ed25519 login refused", p)


if __name__ == "__main__":
    require("test_ssh_openssh", SSH, SSH_KEYGEN, "/usr/bin/ssh-keyscan")
    d = workdir()
    try:
        keys = Keys(d)
        T = make_target(d, keys)
        main([test_exec_output_and_status, test_interactive_tty, test_more_paging_and_window_change,
              test_each_cipher_and_mac,
              test_each_kex, test_each_host_key_algorithm, test_user_keys, test_ssh_rsa_sha1_refused,
              test_passwords, test_read_only_refused_and_logged, test_host_key_kept_across_restart,
              test_ed25519_key_line_refused])
    finally:
        cleanup(d, *([T] if T else []))

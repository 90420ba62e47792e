#!/usr/bin/python3
"""keel's SSH transport against OpenSSH's own client and ssh-audit.

ssh_transport_probe (ssh_transport_probe.cpp) serves keel's Transport alone
on a free loopback port and answers every USERAUTH_REQUEST with
USERAUTH_FAILURE "publickey,password". For EVERY key exchange x host key x
cipher x MAC the server offers, OpenSSH's client (`ssh -vvv`, each forced
with -o KexAlgorithms/HostKeyAlgorithms/Ciphers/MACs) must

  * verify the host key against a known_hosts file holding the probe's keys
    (StrictHostKeyChecking=yes: a bad exchange-hash signature fails here),
  * negotiate exactly the forced algorithms (its "kex: ..." lines and the
    probe's report agree), with strict kex,
  * get EXT_INFO server-sig-algs and SERVICE_ACCEPT over the new keys and
    reach "Authentications that can continue: publickey,password".

Then (as user "rekey", whom the probe lets in: re-keys happen only after
authentication): a re-key started by the server (--rekey-bytes 1) and one
started by the client (RekeyLimit), each followed by a message over the new
keys; the host keys unchanged across a restart; and ssh-audit: no [fail] other than its opinion of
the NIST P-256 algorithms the issue requires (ecdh-sha2-nistp256,
ecdsa-sha2-nistp256: mbedTLS 2.28 has no Ed25519), and none at all with
those left out (--no-nist).

  ssh_transport_interop.py [--probe PATH]   (default: $SSH_TRANSPORT_PROBE)
Skips (exit 0, saying why) without /usr/bin/ssh.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

KEX = ["curve25519-sha256", "curve25519-sha256@libssh.org", "ecdh-sha2-nistp256"]
HOSTKEY = ["ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256"]
MODES = [("chacha20-poly1305@openssh.com", None), ("aes256-gcm@openssh.com", None),
         ("aes128-gcm@openssh.com", None)] + [
    (c, m) for c in ("aes256-ctr", "aes128-ctr")
    for m in ("hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com")]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


class Probe:
    def __init__(self, path, work, *args):
        self.proc = subprocess.Popen([path, "--keys", os.path.join(work, "keys"), *args],
                                     stdout=subprocess.PIPE, text=True)
        self.port = None
        self.lines = []   # public key lines
        self.fingerprints = []
        line = self.proc.stdout.readline()
        m = re.match(r"port (\d+)", line)
        if not m:
            raise SystemExit("probe did not start: %r" % line)
        self.port = int(m.group(1))
        while len(self.fingerprints) < 2:
            self.fingerprints.append(self.proc.stdout.readline().split(" ", 1)[1].strip())

    def report(self):
        """The probe's line for the connection that just ended."""
        return self.proc.stdout.readline().strip()

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def ssh(port, known_hosts, *opts, timeout=30, user="probe"):
    cmd = ["/usr/bin/ssh", "-vvv", "-p", str(port), "-F", "/dev/null",
           "-o", "BatchMode=yes", "-o", "PubkeyAuthentication=no",
           "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + known_hosts,
           "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10"]
    for o in opts:
        cmd += ["-o", o]
    cmd += [user + "@127.0.0.1", "true"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", default=os.environ.get("SSH_TRANSPORT_PROBE", ""))
    args = ap.parse_args()
    if not os.path.exists("/usr/bin/ssh"):
        print("SKIP: /usr/bin/ssh (openssh-client) not installed")
        return 0
    if not args.probe or not os.path.exists(args.probe):
        print("no probe binary (--probe)")
        return 1
    work = tempfile.mkdtemp(prefix="keel_ssh_interop_")
    try:
        return run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def known_hosts_for(work, port):
    # The public keys as ssh-keygen derives them from the probe's PEM files.
    path = os.path.join(work, "known_hosts_%d" % port)
    with open(path, "w") as f:
        for name in ("ssh_host_ecdsa_key", "ssh_host_rsa_key"):
            pub = subprocess.run(["ssh-keygen", "-y", "-f", os.path.join(work, "keys", name)],
                                 capture_output=True, text=True, check=True).stdout.strip()
            f.write("[127.0.0.1]:%d %s\n" % (port, pub))
    return path


def run(args, work):
    probe = Probe(args.probe, work)
    kh = known_hosts_for(work, probe.port)
    # The fingerprints the probe reports are ssh-keygen's.
    for name, fp in zip(("ssh_host_ecdsa_key", "ssh_host_rsa_key"), probe.fingerprints):
        pub = subprocess.run(["ssh-keygen", "-y", "-f", os.path.join(work, "keys", name)],
                             capture_output=True, text=True, check=True).stdout
        lf = subprocess.run(["ssh-keygen", "-lf", "-"], input=pub, capture_output=True, text=True).stdout.split()
        check(lf and fp.split()[:2] == lf[:2] and fp.endswith(lf[-1]), "fingerprint %s: %r vs %r" % (name, fp, lf))
    n = 0
    for kex in KEX:
        for hk in HOSTKEY:
            for cipher, mac in MODES:
                opts = ["KexAlgorithms=" + kex, "HostKeyAlgorithms=" + hk, "Ciphers=" + cipher]
                if mac:
                    opts.append("MACs=" + mac)
                what = "%s %s %s %s" % (kex, hk, cipher, mac or "(aead)")
                err = ssh(probe.port, kh, *opts)
                rep = probe.report()
                n += 1
                ok = check("Authentications that can continue: publickey,password" in err,
                           what + ": no userauth failure reached\n" + err[-1500:])
                ok &= check("kex: algorithm: %s\n" % kex in err, what + ": kex not negotiated")
                ok &= check("kex: host key algorithm: %s\n" % hk in err, what + ": host key alg")
                want = "kex: server->client cipher: %s MAC: %s" % (cipher, mac or "<implicit>")
                ok &= check(want in err, what + ": " + want)
                ok &= check("Host '[127.0.0.1]:%d' is known and matches" % probe.port in err,
                            what + ": host key not verified against known_hosts")
                ok &= check("kex_input_ext_info: server-sig-algs=<ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256>" in err,
                            what + ": no EXT_INFO")
                ok &= check("resetting send seqnr" in err, what + ": strict kex not in use")
                ok &= check(("kex=%s hostkey=%s cipher=%s/%s mac=%s/%s kexes=1 ready=1"
                             % (kex, hk, cipher, cipher, mac or "-", mac or "-")) in rep,
                            what + ": probe says " + rep)
                if ok:
                    print("ok", what, flush=True)
    probe.stop()

    # Re-key started by the server: after 1 byte, so at the first packet after NEWKEYS.
    probe = Probe(args.probe, work, "--rekey-bytes", "1")
    kh = known_hosts_for(work, probe.port)
    err = ssh(probe.port, kh, user="rekey")
    rep = probe.report()
    check(err.count("SSH2_MSG_KEXINIT received") >= 2, "server re-key: client saw one KEXINIT\n" + err[-2000:])
    check("Authenticated to 127.0.0.1" in err, "server re-key: not authenticated")
    check("open failed: administratively prohibited: probe: no channels" in err,
          "server re-key: channel refusal not received over the new keys\n" + err[-2000:])
    check(re.search(r"kexes=[2-9]", rep) is not None, "server re-key: probe says " + rep)
    probe.stop()
    print("ok server-initiated re-key:", rep, flush=True)

    # Re-key started by the client (RekeyLimit in bytes).
    probe = Probe(args.probe, work)
    kh = known_hosts_for(work, probe.port)
    err = ssh(probe.port, kh, "RekeyLimit=16", user="rekey")
    rep = probe.report()
    check(err.count("SSH2_MSG_KEXINIT sent") >= 2, "client re-key: no second KEXINIT sent\n" + err[-2000:])
    check("open failed: administratively prohibited: probe: no channels" in err,
          "client re-key: channel refusal not received over the new keys\n" + err[-2000:])
    check(re.search(r"kexes=[2-9]", rep) is not None, "client re-key: probe says " + rep)
    probe.stop()
    print("ok client-initiated re-key:", rep, flush=True)

    # The host key files were generated once: the same keys on a restart.
    probe = Probe(args.probe, work)
    fps = probe.fingerprints
    probe.stop()
    probe2 = Probe(args.probe, work)
    check(probe2.fingerprints == fps, "host keys changed across a restart")
    probe2.stop()

    if shutil.which("ssh-audit"):
        for extra, allowed in (([], {"ecdh-sha2-nistp256", "ecdsa-sha2-nistp256"}), (["--no-nist"], set())):
            probe = Probe(args.probe, work, *extra)
            r = subprocess.run(["ssh-audit", "-n", "-p", str(probe.port), "127.0.0.1"],
                               capture_output=True, text=True, timeout=120)
            probe.stop()
            fails = [l for l in r.stdout.splitlines() if "[fail]" in l]
            bad = [l for l in fails if not any(a in l for a in allowed)]
            check(not bad, "ssh-audit %s: %s" % (" ".join(extra), bad))
            check("kex-strict-s-v00@openssh.com" in r.stdout, "ssh-audit did not see the strict kex marker")
            print("ssh-audit %s: [fail] lines %d (allowed: %s)" % (" ".join(extra) or "(default)", len(fails),
                                                                    ", ".join(sorted(allowed)) or "none"))
            for l in r.stdout.splitlines():
                if "[warn]" in l or "[fail]" in l:
                    print("   ", l.strip())
    else:
        print("ssh-audit not installed: its part skipped")

    print("%d combinations; %d failures" % (n, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

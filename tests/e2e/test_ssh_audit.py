"""ssh-audit (Debian's 2.5.0) against keel's SSH server (issue 17).

  * `ssh-audit --json`: exactly the algorithms the issue lists are offered:
    kex curve25519-sha256, curve25519-sha256@libssh.org, ecdh-sha2-nistp256
    (plus the kex-strict-s-v00@openssh.com marker), host keys
    ecdsa-sha2-nistp256, rsa-sha2-512, rsa-sha2-256 (RSA 3072), ciphers
    chacha20-poly1305, aes256/128-gcm, aes256/128-ctr, MACs
    hmac-sha2-256/512-etm, no compression: nothing with SHA-1, CBC, DSA or
    `none`; the fingerprints are the ones `show ssh host-key` prints;
  * `ssh-audit` (text): every [fail] and [warn] line it prints is one of
    EXPECTED below, the list README.md explains ("ssh-audit"). A finding
    not in the list fails the test, as does a connection error.

ssh-audit 2.5 marks every NIST P-curve "[fail] using weak elliptic curves"
(a policy about who chose the curves' constants, not a known attack). The
issue requires ecdh-sha2-nistp256 and an ECDSA P-256 host key (mbedTLS 2.28
has no Ed25519, so P-256 is keel's only elliptic-curve host key), so those
two failures are expected and are the only ones allowed; everything else
ssh-audit would call a failure (SHA-1, CBC, small DH groups, small RSA
keys, encrypt-and-MAC) is simply not offered.

A second keel, booted with the hardened algorithm settings README.md
gives (`ssh kex-algorithms curve25519-sha256,curve25519-sha256@libssh.org`,
`ssh host-key-algorithms rsa-sha2-512,rsa-sha2-256`: no NIST P-256), is
audited too: exactly those algorithms offered, no [fail] line at all, and an
exit status that is not FAILURE (its one [warn] is the strict kex marker).

SSH_TARGET=sshd audits private OpenSSH sshds restricted to the same
algorithms (the parser and the expectations checked against the real
thing)."""
import os
import json
import re

from ssh_common import (CIPHERS, HOST_KEY_ALGS, KEXES, MACS, SSH_AUDIT, SSH_KEYGEN, KeelTarget, Keys,
                        SshdTarget, check, cleanup, main, make_target, require, run, target_kind, workdir)

# (level, algorithm, text) ssh-audit 2.5 prints for keel's algorithm set.
EXPECTED = {
    ("fail", "ecdh-sha2-nistp256", "using weak elliptic curves"),
    ("fail", "ecdsa-sha2-nistp256", "using weak elliptic curves"),
    ("warn", "ecdsa-sha2-nistp256", "using weak random number generator could reveal the key"),
    ("warn", "kex-strict-s-v00@openssh.com", "unknown algorithm"),
}
# The hardened settings (README.md "What ssh-audit says"): keel's and sshd's.
HARDENED_KEXES = ["curve25519-sha256", "curve25519-sha256@libssh.org"]
HARDENED_HOST_KEY_ALGS = ["rsa-sha2-512", "rsa-sha2-256"]
HARDENED_CONFIG = ["ssh kex-algorithms " + ",".join(HARDENED_KEXES),
                   "ssh host-key-algorithms " + ",".join(HARDENED_HOST_KEY_ALGS)]
# (What the hardened server may still earn: the marker newer than ssh-audit 2.5.)
HARDENED_EXPECTED = {("warn", "kex-strict-s-v00@openssh.com", "unknown algorithm")}
# ssh-audit's exit codes (ssh_audit/exitcodes.py).
GOOD, CONNECTION_ERROR, WARNING, FAILURE = 0, 1, 2, 3

T = None


def findings(text):
    """[(level, algorithm, text)] of every [fail]/[warn] line of ssh-audit's text."""
    out = []
    alg = None
    for line in text.splitlines():
        m = re.match(r"^\((\w+)\) (\S+?)(?: \(\d+-bit\))?\s+-- \[(\w+)\] (.*)$", line)
        if m:
            alg = m.group(2)
            level, what = m.group(3), m.group(4)
        else:
            m = re.match(r"^\s+`- \[(\w+)\] (.*)$", line)
            if not m:
                m2 = re.match(r"^\((\w+)\) (.*)$", line)
                if m2:
                    alg = None
                    if "[fail]" in line or "[warn]" in line:
                        out.append(("fail" if "[fail]" in line else "warn", m2.group(1), m2.group(2)))
                continue
            level, what = m.group(1), m.group(2)
        if level in ("fail", "warn"):
            out.append((level, alg, what.strip()))
    return out


def test_algorithms_json():
    p = run([SSH_AUDIT, "-j", "-p", str(T.port), T.host])
    check(p.returncode != CONNECTION_ERROR and p.stdout.strip().startswith("{"), "ssh-audit --json ran", p)
    j = json.loads(p.stdout)
    kex = [k["algorithm"] for k in j["kex"]]
    check([k for k in kex if not k.startswith("kex-strict-") and not k.startswith("ext-info-")] == KEXES,
          "kex algorithms %s" % kex)
    check("kex-strict-s-v00@openssh.com" in kex, "strict kex offered: %s" % kex)
    keys = [(k["algorithm"], k.get("keysize")) for k in j["key"]]
    check(keys == [("ecdsa-sha2-nistp256", None), ("rsa-sha2-512", 3072), ("rsa-sha2-256", 3072)],
          "host key algorithms %s" % keys)
    check(j["enc"] == CIPHERS, "ciphers %s" % j["enc"])
    check(j["mac"] == MACS, "MACs %s" % j["mac"])
    check(j["compression"] == ["none"], "compression %s" % j["compression"])
    check(j["banner"]["protocol"] == [2, 0], "SSH-2.0: %s" % j["banner"])
    if isinstance(T, KeelTarget):
        check(j["banner"]["software"].startswith("keel_"), "banner SSH-2.0-keel_<version>: %s" % j["banner"])
        shown = T.console("show ssh host-key")
        for f in j["fingerprints"]:
            if f["hash_alg"] == "SHA256":
                check("SHA256:" + f["hash"] in shown, "ssh-audit's %s fingerprint in show ssh host-key:\n%s"
                      % (f["hostkey"], shown))


def test_findings_are_the_documented_ones():
    p = run([SSH_AUDIT, "-n", "-p", str(T.port), T.host])
    check(p.returncode in (GOOD, WARNING, FAILURE) and "# key exchange algorithms" in p.stdout,
          "ssh-audit audited the server", p)
    got = set(findings(p.stdout))
    unexpected = got - EXPECTED
    check(not unexpected, "findings README.md doesn't explain: %s\n%s" % (sorted(unexpected), p.stdout))
    fails = {f for f in got if f[0] == "fail"}
    check(all(f[1] in ("ecdh-sha2-nistp256", "ecdsa-sha2-nistp256") for f in fails),
          "the only failures are the NIST-curve policy ones: %s" % sorted(fails))
    # The parser sees the lines at all (else "no unexpected finding" means nothing).
    check(("fail", "ecdh-sha2-nistp256", "using weak elliptic curves") in got,
          "the parser finds ssh-audit's findings: %s\n%s" % (sorted(got), p.stdout))
    print("  ssh-audit findings:\n" + "\n".join("    [%s] %s: %s" % f for f in sorted(got)))


def hardened_target():
    d = os.path.join(T.dir, "hardened")
    os.makedirs(d)
    if target_kind() == "sshd":
        return SshdTarget(d, T.keys, extra_config="Ciphers %s\nMACs %s\nKexAlgorithms %s\nHostKeyAlgorithms %s\n"
                          "Compression no\n" % (",".join(CIPHERS), ",".join(MACS), ",".join(HARDENED_KEXES),
                                                 ",".join(HARDENED_HOST_KEY_ALGS)))
    return KeelTarget(d, T.keys, extra=HARDENED_CONFIG)


def test_hardened_config_has_no_failure():
    global H
    H = hardened_target()
    p = run([SSH_AUDIT, "-j", "-p", str(H.port), H.host])
    check(p.returncode != CONNECTION_ERROR and p.stdout.strip().startswith("{"), "ssh-audit --json ran", p)
    j = json.loads(p.stdout)
    kex = [k["algorithm"] for k in j["kex"] if not k["algorithm"].startswith(("kex-strict-", "ext-info-"))]
    check(kex == HARDENED_KEXES, "hardened kex algorithms %s" % kex)
    keys = [(k["algorithm"], k.get("keysize")) for k in j["key"]]
    check(keys == [("rsa-sha2-512", 3072), ("rsa-sha2-256", 3072)], "hardened host key algorithms %s" % keys)
    check(j["enc"] == CIPHERS and j["mac"] == MACS, "ciphers and MACs unchanged: %s %s" % (j["enc"], j["mac"]))
    p = run([SSH_AUDIT, "-n", "-p", str(H.port), H.host])
    check(p.returncode in (GOOD, WARNING) and "# key exchange algorithms" in p.stdout,
          "ssh-audit audited the hardened server, exit status %d (not FAILURE %d)" % (p.returncode, FAILURE), p)
    fail_lines = [line for line in p.stdout.splitlines() if "[fail]" in line]
    check(not fail_lines, "no [fail] line: %s\n%s" % (fail_lines, p.stdout))
    got = set(findings(p.stdout))
    check(got <= HARDENED_EXPECTED, "findings README.md doesn't explain: %s\n%s"
          % (sorted(got - HARDENED_EXPECTED), p.stdout))
    print("  ssh-audit of the hardened config: exit status %d, findings %s" % (p.returncode, sorted(got)))


H = None

if __name__ == "__main__":
    require("test_ssh_audit", SSH_AUDIT, SSH_KEYGEN)
    d = workdir()
    try:
        keys = Keys(d)
        if target_kind() == "sshd":
            T = SshdTarget(d, keys, extra_config="Ciphers %s\nMACs %s\nKexAlgorithms %s\nHostKeyAlgorithms %s\n"
                           "Compression no\n" % (",".join(CIPHERS), ",".join(MACS), ",".join(KEXES),
                                                  ",".join(HOST_KEY_ALGS)))
        else:
            T = make_target(d, keys)
        main([test_algorithms_json, test_findings_are_the_documented_ones, test_hardened_config_has_no_failure])
    finally:
        cleanup(d, *[t for t in (H, T) if t])

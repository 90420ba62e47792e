"""Real LACP partners for keel's bonds (issue 14), shared by
bond_ovs_lacp.py and bond_dpdk_partner.py (registered by
tests/e2e/CMakeLists.txt):

  * private_netns(): re-runs the calling test inside a network namespace of
    its own (unshare --net), so its veths, and everything the peers open on
    them, vanish with it; or says why it can't (not root, under an emulator,
    no unshare);
  * veth_pair(): a veth pair, up, IPv6 off (DPDK's af_packet vdev receives
    whatever the kernel sends on the veth, e.g. router solicitations);
  * Ovs: Open vSwitch 3.1's own ovsdb-server + ovs-vswitchd (plain, no DPDK:
    datapath_type=netdev; --enable-dummy for a traffic source port) under a
    private run directory;
  * LiveKeel: keel booted with DPDK net_af_packet members, asked console
    commands while it runs (harness.ask_live);
  * parse_lacp_show() / parse_bond_show(): the text of `lacp/show` /
    `bond/show`, which keel's `lacp-show` / `bond-show` print in the same
    layout, so one parser reads both sides;
  * mask_layout(): a command's text with its values masked (the layout
    test).

Only the test files call these; python3 stdlib only."""
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

from harness import EMULATOR, Failure, ask_live, csum, keel_cmd

VSWITCHD = "/usr/sbin/ovs-vswitchd"
OVSDB = "/usr/sbin/ovsdb-server"
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
NETNS_MARK = "KEEL_BOND_E2E_NETNS"


def skip_reason():
    """Why this machine can't run the real-peer tests, or ''."""
    if EMULATOR:
        return "net_af_packet needs PACKET_VERSION, which qemu-user lacks"
    if os.environ.get("KEEL_HAVE_DPDK", "ON").upper() not in ("ON", "1", "TRUE", "YES"):
        return "keel was built without the DPDK backend (net_af_packet members)"
    if os.geteuid() != 0:
        return "needs root (network namespace, veths, DPDK EAL)"
    if not shutil.which("unshare") or not shutil.which("ip"):
        return "needs unshare(1) and ip(8)"
    return ""


def ovs_missing():
    for p in (VSWITCHD, OVSDB, SCHEMA):
        if not os.path.exists(p):
            return "Open vSwitch 3.1 is not installed (%s missing)" % p
    for t in ("ovs-vsctl", "ovs-appctl", "ovsdb-tool"):
        if not shutil.which(t):
            return "Open vSwitch 3.1 is not installed (%s missing)" % t
    return ""


def private_netns(test_name):
    """Call first in a test's __main__. Outside the namespace: re-executes
    the script under `unshare --net` and exits with its status (or prints a
    SKIP line and exits 0 when the machine can't). Inside: brings lo up and
    returns."""
    if os.environ.get(NETNS_MARK) == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        # Devices made from now on (veths, taps) start without IPv6: no
        # router solicitations reach the peers' af_packet sockets.
        for k in ("default", "all"):
            with open("/proc/sys/net/ipv6/conf/%s/disable_ipv6" % k, "w") as f:
                f.write("1\n")
        return
    why = skip_reason()
    if why:
        print("SKIP %s: %s" % (test_name, why))
        sys.exit(0)
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("SKIP %s: cannot create a network namespace (%s)" % (test_name, probe.stderr.strip()))
        sys.exit(0)
    env = dict(os.environ, **{NETNS_MARK: "1"})
    rc = subprocess.run(["unshare", "--net", sys.executable] + sys.argv, env=env).returncode
    sys.exit(rc)


def sh(*args, check=True, timeout=60, env=None):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env)
    if check and p.returncode != 0:
        raise Failure("%s failed (%d): %s" % (" ".join(args), p.returncode, (p.stderr or p.stdout).strip()))
    return p.stdout


def veth_pair(a, b):
    sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
    for dev in (a, b):
        with open("/proc/sys/net/ipv6/conf/%s/disable_ipv6" % dev, "w") as f:
            f.write("1\n")
        sh("ip", "link", "set", dev, "up")


def link(dev, up):
    sh("ip", "link", "set", dev, "up" if up else "down")


def wait_until(pred, what, timeout):
    """Polls pred() every 50 ms; returns (its value, seconds waited) once
    truthy, fails naming `what` after `timeout` s."""
    t0 = time.monotonic()
    while True:
        v = pred()
        if v:
            return v, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise Failure("timed out after %d s waiting for %s" % (timeout, what))
        time.sleep(0.05)


class Ovs:
    """ovsdb-server + ovs-vswitchd of the test's own (private run dir)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="keel-ovs-bond-")
        d = self.dir
        self.env = dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d,
                        OVS_PKGDATADIR="/usr/share/openvswitch")
        self.db = "unix:%s/db.sock" % d
        self.ctl = None
        sh("ovsdb-tool", "create", d + "/conf.db", SCHEMA, env=self.env)
        sh(OVSDB, d + "/conf.db", "--remote=punix:%s/db.sock" % d, "--pidfile=%s/ovsdb.pid" % d, "--detach",
           "--log-file=%s/ovsdb.log" % d, env=self.env)
        # --enable-dummy (not =override): system (veth) ports stay real, and
        # dummy ports exist besides, for netdev-dummy/receive.
        sh(VSWITCHD, self.db, "--enable-dummy", "--disable-system", "--pidfile=%s/vsw.pid" % d, "--detach",
           "--log-file=%s/vsw.log" % d, env=self.env)
        self.ctl = "%s/ovs-vswitchd.%s.ctl" % (d, open(d + "/vsw.pid").read().strip())

    def vsctl(self, *args):
        return sh("ovs-vsctl", "--db=" + self.db, "--timeout=30", *args, env=self.env)

    def appctl(self, *args, check=True):
        return sh("ovs-appctl", "-t", self.ctl, *args, env=self.env, check=check)

    def ofctl(self, *args):
        return sh("ovs-ofctl", *args, env=self.env)

    def log(self):
        try:
            return open(self.dir + "/vsw.log").read()[-4000:]
        except OSError:
            return ""

    def stop(self):
        if self.ctl:
            subprocess.run(["ovs-appctl", "-t", self.ctl, "exit"], env=self.env, capture_output=True, timeout=30)
        for pidf in ("vsw.pid", "ovsdb.pid"):
            try:
                os.kill(int(open(os.path.join(self.dir, pidf)).read()), 15)
            except (OSError, ValueError):
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


class LiveKeel:
    """keel running with `config` and `ports` (NAME=SPEC), asked commands live."""

    def __init__(self, config_text, ports):
        self.dir = tempfile.mkdtemp(prefix="keel-bond-e2e-")
        cfg = os.path.join(self.dir, "k.conf")
        with open(cfg, "w") as f:
            f.write(config_text)
        argv = ["--config", cfg]
        for p in ports:
            argv += ["--port", p]
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(keel_cmd(*argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True, bufsize=1)

    def ask(self, cmd):
        return ask_live(self.proc, self.err, cmd)

    def stderr(self):
        self.err.seek(0)
        return self.err.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("exit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree("/var/run/dpdk/keel-host-sim-%d" % self.proc.pid, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def mac_bytes(m):
    return bytes(int(x, 16) for x in m.split(":"))


def l4_frames(dst, src, n_flows, per_flow, size):
    """IPv4/UDP frames of `size` bytes, n_flows distinct source ports."""
    out = []
    for r in range(per_flow):
        for i in range(n_flows):
            ip_len = size - 14
            hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, r, 0, 64, 17, 0,
                              bytes([10, 9, 0, 1]), bytes([10, 9, 1, 1]))
            hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
            udp = struct.pack("!HHHH", 10000 + i, 4789 + 1, ip_len - 20, 0)
            out.append(mac_bytes(dst) + mac_bytes(src) + b"\x08\x00" + hdr + udp + bytes(ip_len - 28))
    return out


def send_frames(iface, frames):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    for f in frames:
        s.send(f)
        time.sleep(0.0002)  # a gentle rate: the tap and af_packet rings are small
    s.close()


# ---------------------------------------------------------------------------
# Open vSwitch's texts (and keel's, which copy their layout)
# ---------------------------------------------------------------------------
def parse_lacp_show(text):
    """lacp/show -> {bond: {"status": ..., key: value..., "members": {name:
    {"state": "current attached", key: value...}}}}. Keys are the labels
    as printed ("sys_id", "partner sys_id", "actor state", ...)."""
    bonds, bond, cur = {}, None, None
    for line in text.splitlines():
        m = re.match(r"^---- (\S+) ----$", line)
        if m:
            bond = bonds.setdefault(m.group(1), {"members": {}})
            cur = bond
            continue
        if bond is None:
            continue
        m = re.match(r"^member: (\S+): (.*)$", line)
        if m:
            cur = bond["members"].setdefault(m.group(1), {"state": m.group(2).strip()})
            continue
        m = re.match(r"^\s+([^:]+):\s*(.*)$", line)
        if m:
            cur[m.group(1).strip()] = m.group(2).strip()
    return bonds


def parse_bond_show(text):
    """bond/show -> {bond: {key: value..., "members": {name: {"state":
    "enabled"|"disabled", "active": bool, key: value..., "hashes": {n: load}}}}}."""
    bonds, bond, cur = {}, None, None
    for line in text.splitlines():
        m = re.match(r"^---- (\S+) ----$", line)
        if m:
            bond = bonds.setdefault(m.group(1), {"members": {}})
            cur = None
            continue
        if bond is None:
            continue
        m = re.match(r"^member (\S+): (\S+)", line)
        if m:
            cur = bond["members"].setdefault(m.group(1), {"state": m.group(2), "active": False, "hashes": {}})
            continue
        if cur is not None:
            if line.strip() == "active member":
                cur["active"] = True
                continue
            m = re.match(r"^\s+hash (\d+): (\d+) kB load", line)
            if m:
                cur["hashes"][int(m.group(1))] = int(m.group(2))
                continue
            m = re.match(r"^\s+([^:]+):\s*(.*)$", line)
            if m:
                cur[m.group(1).strip()] = m.group(2).strip()
            continue
        m = re.match(r"^([^:]+):\s*(.*)$", line)
        if m:
            bond[m.group(1).strip()] = m.group(2).strip()
    return bonds


def parse_dp_bond_show(text):
    """dpif-netdev/bond-show -> {bond_id: {bucket: member dp port}}."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^  bond-id (\d+):$", line)
        if m:
            cur = out.setdefault(int(m.group(1)), {})
            continue
        m = re.match(r"^    bucket (\d+) - member (\d+)$", line)
        if m and cur is not None:
            cur[int(m.group(1))] = int(m.group(2))
    return out


MAC = r"[0-9a-f]{2}(?::[0-9a-f]{2}){5}"


def mask_layout(text, names):
    """`text` with its values masked, one entry per line: MAC addresses ->
    <mac>, numbers -> <n>, the names in `names` (members, bond) -> their
    role (<member>, <bond>). Labels, punctuation, indentation, flag words
    and the order of lines stay as they are: what remains must be equal on
    both sides. A run of lines that are equal once masked (the hash lines of
    a member, the 256 bucket lines) becomes one line followed by `...`: how
    many there are is a value (the traffic, the bucket map), and callers
    check counts themselves where they matter."""
    out = []
    for line in text.rstrip("\n").split("\n"):
        for name, role in sorted(names.items(), key=lambda kv: -len(kv[0])):
            line = re.sub(r"(?<![\w-])%s(?![\w-])" % re.escape(name), role, line)
        line = re.sub(MAC, "<mac>", line)
        line = re.sub(r"(?<![\w<])-?\d+(?:\.\d+)?(?![\w>])", "<n>", line)
        if out and (out[-1] == line or (out[-1] == "..." and len(out) >= 2 and out[-2] == line)):
            if out[-1] != "...":
                out.append("...")
            continue
        out.append(line)
    return out


def layout_diff(ours, theirs, what):
    """'' if the masked layouts are equal, else a readable first difference."""
    if ours == theirs:
        return ""
    for i in range(max(len(ours), len(theirs))):
        a = ours[i] if i < len(ours) else "<end>"
        b = theirs[i] if i < len(theirs) else "<end>"
        if a != b:
            ctx = "\n".join("    %s" % l for l in theirs[max(0, i - 3):i])
            return ("%s: masked line %d differs\n  keel:          %r\n  Open vSwitch:  %r\n  (after)\n%s"
                    % (what, i + 1, a, b, ctx))
    return ""

"""Helpers of the tunnel tests (issue 15) test_tnl_two_bridge.py and
test_tnl_decoders.py:

  * need_scapy(): the tests build and dissect packets with python3-scapy,
    importable by Debian's /usr/bin/python3 only (the pyenv python3 first on
    PATH, which ctest may run, has none): re-executes the test under it, or
    prints SKIP;
  * keel_offline(): keel booted with a config and pcap ports, run offline
    (--exit-when-drained), the frames each port sent;
  * Ovs / ovs_offline(): Open vSwitch 3.1 (ovsdb-server + ovs-vswitchd of
    the test's own, `--enable-dummy` without override so tunnel ports stay
    native vports, bridges of datapath_type=dummy so no system device is
    made) given the same packets in the same order, `revalidator/purge`
    between them, the frames its dummy ports sent (tx_pcap).

No root needed, nothing outside temporary directories touched."""
import os
import shutil
import subprocess
import sys
import tempfile

from harness import check, read_pcap, run_keel, tmpdir, write_pcap_ts

OVS_TOOLS = ("ovs-vswitchd", "ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-appctl", "ovs-ofctl")
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


def need_scapy(test_name):
    try:
        import scapy  # noqa: F401 (only whether it imports)
    except ImportError:
        if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
        print("SKIP %s: needs python3-scapy (Debian's, /usr/bin/python3)" % test_name)
        sys.exit(0)


def keel_offline(config, ports, script):
    """ports: {name: [(ts_us, frame)] or None (output only)}, every port
    recording what it sends. Returns (proc, {name: frames sent})."""
    d = tmpdir()
    args, outs = [], {}
    for p, recs in ports.items():
        outs[p] = os.path.join(d, p + ".out.pcap")
        parts = []
        if recs:
            path = os.path.join(d, p + ".in.pcap")
            write_pcap_ts(path, recs)
            parts.append("in=" + path)
        parts.append("out=" + outs[p])
        args += ["--port", "%s=pcap:%s" % (p, ",".join(parts))]
    cfg = os.path.join(d, "keel.conf")
    with open(cfg, "w") as f:
        f.write(config)
    proc = run_keel("--config", cfg, *args, "--exit-when-drained", stdin=script)
    check(proc.returncode == 0, "keel exits 0", proc)
    got = {p: read_pcap(path) if os.path.exists(path) else [] for p, path in outs.items()}
    shutil.rmtree(d, ignore_errors=True)
    return proc, got


def ovs_available():
    return all(shutil.which(t) for t in OVS_TOOLS) and os.path.exists(SCHEMA)


class Ovs:
    """A private Open vSwitch: vsctl/appctl/ofctl against it; stop() ends it."""

    def __init__(self):
        self.dir = d = tempfile.mkdtemp(prefix="keel-ovs-tnl-")
        self.env = dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d,
                        OVS_PKGDATADIR="/usr/share/openvswitch")
        self.db = "unix:%s/db.sock" % d
        self.ctl = None
        self.sh("ovsdb-tool", "create", d + "/conf.db", SCHEMA)
        self.sh("ovsdb-server", d + "/conf.db", "--remote=punix:%s/db.sock" % d, "--pidfile=%s/ovsdb.pid" % d,
                "--detach", "--log-file=%s/ovsdb.log" % d)
        self.sh("ovs-vswitchd", self.db, "--enable-dummy", "--disable-system", "--pidfile=%s/vsw.pid" % d,
                "--detach", "--log-file=%s/vsw.log" % d)
        self.ctl = "%s/ovs-vswitchd.%s.ctl" % (d, open(d + "/vsw.pid").read().strip())

    def sh(self, *args):
        p = subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(args), (p.stderr or p.stdout).strip()))
        return p.stdout

    def vsctl(self, *args):
        return self.sh("ovs-vsctl", "--db=" + self.db, "--timeout=30", *args)

    def appctl(self, *args):
        return self.sh("ovs-appctl", "-t", self.ctl, *args)

    def ofctl(self, cmd, br, *args):
        return self.sh("ovs-ofctl", cmd, "unix:%s/%s.mgmt" % (self.dir, br), *args)

    def pcap(self, port):
        path = "%s/%s.pcap" % (self.dir, port)
        return read_pcap(path) if os.path.exists(path) else []

    def dummy_port(self, br, port, ofport):
        """vsctl arguments adding a dummy port that records what it sends."""
        return ["--", "add-port", br, port, "--", "set", "interface", port, "type=dummy",
                "ofport_request=%d" % ofport, "options:tx_pcap=%s/%s.pcap" % (self.dir, port)]

    def send_in_order(self, ports):
        """ports: {name: [(ts_us, frame)]}: every frame, by timestamp, one at a
        time with revalidator/purge after each (as keel's offline order)."""
        order = sorted((ts, i, port, fr) for port, recs in ports.items() if recs
                       for i, (ts, fr) in enumerate(recs))
        for _, _, port, fr in order:
            self.appctl("netdev-dummy/receive", port, fr.hex())
            self.appctl("revalidator/purge")

    def stop(self):
        if self.ctl:
            subprocess.run(["ovs-appctl", "-t", self.ctl, "exit"], env=self.env, capture_output=True, timeout=30)
            self.ctl = None
        try:
            os.kill(int(open(self.dir + "/ovsdb.pid").read()), 15)
        except (OSError, ValueError):
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def mask_udp_sport(frames):
    """frames with the outer UDP source port (the datapath's hash) zeroed and
    a non-zero UDP checksum (which covers it) replaced by 0xffff, over IPv4
    and IPv6 (untagged, no IP options): what two datapaths must agree on."""
    out = []
    for f in frames:
        u = None
        if f[12:14] == b"\x08\x00" and f[23] == 17:
            u = 34
        elif f[12:14] == b"\x86\xdd" and f[20] == 17:
            u = 54
        if u is not None and len(f) >= u + 8:
            c = b"\xff\xff" if f[u + 6:u + 8] != b"\0\0" else b"\0\0"
            f = f[:u] + b"\0\0" + f[u + 2:u + 6] + c + f[u + 8:]
        out.append(f)
    return out

"""Open vSwitch 3.1 as the reference for offline runs: a private
ovsdb-server + ovs-vswitchd (netdev datapath, dummy ports writing tx pcaps)
that receives packets one at a time, in the given order, with
`revalidator/purge` between packets, so every packet sees the translation
of the current state (what keel's offline mode must reproduce).

Used by test_offline_order.py when ovs-vswitchd is installed."""
import os
import shutil
import subprocess
import tempfile
import time

from harness import read_pcap

VSWITCHD = shutil.which("ovs-vswitchd") or "/usr/sbin/ovs-vswitchd"
OVSDB = shutil.which("ovsdb-server") or "/usr/sbin/ovsdb-server"
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


def available():
    return all(os.access(p, os.X_OK) for p in (VSWITCHD, OVSDB)) and os.path.exists(SCHEMA) and \
        shutil.which("ovs-vsctl") and shutil.which("ovs-appctl") and shutil.which("ovs-ofctl")


def run(ports, flows, packets):
    """ports: names, given OpenFlow port numbers 1, 2, ... in order; flows:
    ovs-ofctl flow lines for br0; packets: (port name, frame bytes) in input
    order. Returns {port: frames sent}."""
    d = tempfile.mkdtemp(prefix="keel-ovs-")
    env = dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d, OVS_PKGDATADIR="/usr/share/openvswitch")
    db = "unix:%s/db.sock" % d

    def sh(*args, **kw):
        return subprocess.run(list(args), env=env, check=True, capture_output=True, text=True, timeout=60, **kw)

    sh("ovsdb-tool", "create", d + "/conf.db", SCHEMA)
    sh(OVSDB, d + "/conf.db", "--remote=punix:%s/db.sock" % d, "--pidfile=%s/ovsdb.pid" % d, "--detach",
       "--log-file=%s/ovsdb.log" % d)
    try:
        sh(VSWITCHD, db, "--enable-dummy=override", "--disable-system", "--pidfile=%s/vsw.pid" % d, "--detach",
           "--log-file=%s/vsw.log" % d)
        try:
            vs = ["ovs-vsctl", "--db=" + db, "--timeout=30"]
            cmd = vs + ["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]
            for i, p in enumerate(ports):
                cmd += ["--", "add-port", "br0", p, "--", "set", "interface", p, "type=dummy",
                        "ofport_request=%d" % (i + 1), "options:tx_pcap=%s/%s.pcap" % (d, p)]
            sh(*cmd)
            pid = open(d + "/vsw.pid").read().strip()
            ctl = "%s/ovs-vswitchd.%s.ctl" % (d, pid)
            mgmt = "unix:%s/br0.mgmt" % d
            sh("ovs-ofctl", "del-flows", mgmt)
            with open(d + "/flows.txt", "w") as f:
                f.write("\n".join(flows) + "\n")
            sh("ovs-ofctl", "add-flows", mgmt, d + "/flows.txt")
            for port, frame in packets:
                sh("ovs-appctl", "-t", ctl, "netdev-dummy/receive", port, frame.hex())
                sh("ovs-appctl", "-t", ctl, "revalidator/purge")
            sh("ovs-appctl", "-t", ctl, "exit")
        finally:
            pidf = d + "/vsw.pid"
            if os.path.exists(pidf):
                try:
                    os.kill(int(open(pidf).read()), 15)
                except (OSError, ValueError):
                    pass
    finally:
        try:
            os.kill(int(open(d + "/ovsdb.pid").read()), 15)
        except (OSError, ValueError):
            pass
    time.sleep(0.2)
    out = {}
    for p in ports:
        path = "%s/%s.pcap" % (d, p)
        out[p] = read_pcap(path) if os.path.exists(path) else []
    shutil.rmtree(d, ignore_errors=True)
    return out

"""Open vSwitch 3.1 as the oracle: a private ovsdb-server + ovs-vswitchd.

Everything lives in one work directory (OVS_RUNDIR/DBDIR/LOGDIR point
there); the system's Open vSwitch service is never touched. The switch
runs with `--enable-dummy=override` and `datapath_type=netdev`: bridge br0
with dummy ports p1..pN (ofport N = pN) whose transmitted frames go to
`options:tx_pcap` files. A case is applied with ovs-vsctl / ovs-ofctl,
then each input frame is injected with `netdev-dummy/receive` and followed
by `revalidator/purge`, so every frame is translated against the current
state, in input order, as Open vSwitch's own tests do.

Commands to the running vswitchd go over one unixctl connection (the
python3-openvswitch client), not one process per packet.
"""
import glob
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time

import ovs.unixctl.client

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


class OvsError(Exception):
    pass


def available():
    return all(shutil.which(p) for p in ("ovs-vswitchd", "ovsdb-server", "ovs-vsctl", "ovs-ofctl",
                                          "ovsdb-tool")) and os.path.exists(SCHEMA)


def read_pcap(path):
    """Frames of a pcap file (any byte order, microsecond or nanosecond)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    e = "<" if magic in (0xa1b2c3d4, 0xa1b23c4d) else ">"
    out, off = [], 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(e + "IIII", data[off:off + 16])
        off += 16
        if off + incl > len(data):
            break  # a record still being written
        out.append(data[off:off + incl])
        off += incl
    return out


class Ovs:
    def __init__(self, nports, workdir=None, port_type="dummy"):
        self.nports = nports
        # "dummy": polled by the main thread (the conformance run); "dummy-pmd":
        # by a PMD thread, as keel polls every port (the layout test).
        self.port_type = port_type
        self.dir = workdir or tempfile.mkdtemp(prefix="keel-conf-ovs-")
        self.env = dict(os.environ, OVS_RUNDIR=self.dir, OVS_DBDIR=self.dir, OVS_LOGDIR=self.dir,
                        OVS_SYSCONFDIR=self.dir, OVS_PKGDATADIR="/usr/share/openvswitch")
        self.db = "unix:" + os.path.join(self.dir, "db.sock")
        self.client = None
        self.pcap_seen = {}
        self.received = 0  # frames injected so far

    # --- life cycle ---
    def start(self):
        d = self.dir
        self._run(["ovsdb-tool", "create", os.path.join(d, "conf.db"), SCHEMA])
        self._run(["ovsdb-server", os.path.join(d, "conf.db"), "--remote=punix:" + os.path.join(d, "db.sock"),
                   "--pidfile=" + os.path.join(d, "ovsdb-server.pid"), "--detach", "--no-chdir",
                   "--log-file=" + os.path.join(d, "ovsdb-server.log")])
        self.vsctl("--no-wait", "init")
        self._run(["ovs-vswitchd", self.db, "--enable-dummy=override", "--disable-system",
                   "--pidfile=" + os.path.join(d, "ovs-vswitchd.pid"), "--detach", "--no-chdir",
                   "--log-file=" + os.path.join(d, "ovs-vswitchd.log"), "-vconsole:off", "-vfile:info"])
        pid = open(os.path.join(d, "ovs-vswitchd.pid")).read().strip()
        ctl = os.path.join(d, "ovs-vswitchd.%s.ctl" % pid)
        args = ["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev",
                "fail-mode=secure", "other-config:hwaddr=02:00:00:00:00:fe"]
        for i in range(1, self.nports + 1):
            args += ["--", "add-port", "br0", "p%d" % i, "--", "set", "interface", "p%d" % i, "type=" + self.port_type,
                     "ofport_request=%d" % i, "options:tx_pcap=" + self.pcap(i)]
        self.vsctl(*args)
        err, self.client = ovs.unixctl.client.UnixctlClient.create(ctl)
        if err:
            raise OvsError("cannot connect to %s: %s" % (ctl, os.strerror(err)))
        for i in range(1, self.nports + 1):
            self.pcap_seen[i] = 0

    def stop(self):
        if self.client:
            self.client.close()
            self.client = None
        for name in ("ovs-vswitchd", "ovsdb-server"):
            pf = os.path.join(self.dir, name + ".pid")
            try:
                pid = int(open(pf).read())
                os.kill(pid, 15)
                for _ in range(100):
                    os.kill(pid, 0)
                    time.sleep(0.02)
            except (OSError, ValueError):
                pass

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- commands ---
    def _run(self, argv, check=True, input=None):
        p = subprocess.run(argv, env=self.env, capture_output=True, text=True, input=input, timeout=60)
        if check and p.returncode:
            raise OvsError("%s: %s" % (" ".join(argv), (p.stderr or p.stdout).strip()))
        return p

    def vsctl(self, *args):
        return self._run(["ovs-vsctl", "--db=" + self.db, "--timeout=30"] + list(args)).stdout

    def appctl(self, cmd, *args):
        err, error, result = self.client.transact(cmd, list(args))
        if err:
            raise OvsError("%s: %s" % (cmd, os.strerror(err)))
        if error is not None:
            raise OvsError("%s %s: %s" % (cmd, " ".join(args), error.strip()))
        return result

    def ofctl(self, *args, input=None, check=True):
        return self._run(["ovs-ofctl"] + list(args), input=input, check=check)

    def pcap(self, port):
        return os.path.join(self.dir, "p%d-tx.pcap" % port)

    # --- a case ---
    def apply(self, case):
        """Resets the bridge and loads the case; returns None, or the error
        text when Open vSwitch refuses the case's configuration/rules."""
        args = []
        for i in range(1, self.nports + 1):
            args += ["--", "clear", "port", "p%d" % i, "tag", "trunks", "vlan_mode"]
            pc = case.port_config.get(i, {})
            for k, v in pc.items():
                args += ["--", "set", "port", "p%d" % i, "%s=%s" % (k, v)]
            mtu = case.mtu.get(i, 1500)
            args += ["--", "set", "interface", "p%d" % i, "mtu_request=%d" % mtu]
        args += ["--", "set", "Open_vSwitch", ".", "other_config:vlan-limit=%d" % case.vlan_limit]
        if getattr(case, "n_revalidators", 0):
            args += ["--", "set", "Open_vSwitch", ".", "other_config:n-revalidator-threads=%d" % case.n_revalidators]
        self.vsctl(*args)  # without --no-wait: returns once ovs-vswitchd has applied it
        self.appctl("fdb/flush", "br0")
        proto = ["-O", case.of_version] if case.of_version else []
        self.ofctl(*proto, "del-flows", "br0")
        if case.flows:
            flows = "\n".join(case.flows) + "\n"
            p = self.ofctl(*proto, "add-flows", "br0", "-", input=flows, check=False)
            if p.returncode and "usable flow formats (" in p.stderr:
                # No one protocol carries every flow: add them one by one, each
                # in OpenFlow 1.3 if OpenFlow 1.0 + NXM can't carry it, as an
                # operator would (ovs-ofctl -O).
                self.ofctl(*proto, "del-flows", "br0")
                for fl in case.flows:
                    p = self.ofctl(*proto, "add-flow", "br0", fl, check=False)
                    if p.returncode and "usable flow formats (" in p.stderr:
                        case.of_version = "OpenFlow13"
                        p = self.ofctl("-O", "OpenFlow13", "add-flow", "br0", fl, check=False)
                    if p.returncode:
                        break
            if p.returncode:
                return (p.stderr or p.stdout).strip()
        self.appctl("revalidator/purge")
        return None

    def inject(self, case):
        """Feeds the case's frames in order. A frame shorter than an
        Ethernet header is no frame to Open vSwitch (netdev-dummy refuses
        it; no NIC delivers one): it sends nothing for it."""
        for port, frame in case.packets:
            if len(frame) < 14:
                continue
            self.appctl("netdev-dummy/receive", "p%d" % port, frame.hex())
            self.received += 1
            self.wait_processed()
            self.appctl("revalidator/purge")

    def wait_processed(self):
        """Waits until the main thread has processed every frame received.
        netdev-dummy/receive only queues a frame; the main thread (which polls
        dummy ports, upcalls inline and sends) takes it in a later loop
        iteration. It answers unixctl between iterations, so once its
        "packets received" counts a frame, that frame's outputs are written."""
        deadline = time.monotonic() + 60
        while True:
            text = self.appctl("dpif-netdev/pmd-stats-show")
            main = text.split("main thread:", 1)[-1]
            m = re.search(r"packets received: (\d+)", main)
            if m and int(m.group(1)) >= self.received:
                return
            if time.monotonic() > deadline:
                raise OvsError("ovs-vswitchd did not process frame %d:\n%s" % (self.received, text))
            time.sleep(0.001)

    def rx_count(self):
        """Frames the datapath has counted as received, every thread summed."""
        text = self.appctl("dpif-netdev/pmd-stats-show")
        return sum(int(n) for n in re.findall(r"packets received: (\d+)", text))

    def inject_all(self, case):
        """Feeds the case's frames in order, without purging the flows
        between them (a live switch: later frames hit the megaflows the first
        installed), and waits until the datapath has received them all."""
        want = self.rx_count()
        for port, frame in case.packets:
            if len(frame) < 14:
                continue
            self.appctl("netdev-dummy/receive", "p%d" % port, frame.hex())
            want += 1
        deadline = time.monotonic() + 60
        while self.rx_count() < want:
            if time.monotonic() > deadline:
                raise OvsError("ovs-vswitchd did not receive %d frames" % want)
            time.sleep(0.01)
        self.appctl("revalidator/wait")  # a revalidation round: statistics pushed to the rules

    def outputs(self):
        """Frames each port sent since the last call: {port: [bytes]}."""
        self.appctl("revalidator/purge")  # one more round trip of the main loop
        out = {}
        for i in range(1, self.nports + 1):
            frames = read_pcap(self.pcap(i)) if os.path.exists(self.pcap(i)) else []
            out[i] = frames[self.pcap_seen[i]:]
            self.pcap_seen[i] = len(frames)
        return out

    def trace(self, case, port, frame):
        p = self._run(["ovs-appctl", "-t", self._ctl(), "ofproto/trace", "br0", "in_port=%d" % port,
                       frame.hex()], check=False)
        return (p.stdout + p.stderr).strip()

    def _ctl(self):
        return glob.glob(os.path.join(self.dir, "ovs-vswitchd.*.ctl"))[0]

"""keel as the switch under test: one offline run per case.

host-sim with one pcap port per Open vSwitch dummy port (pN, OpenFlow port
N): ports with input replay a pcap whose records carry the case's input
order as timestamps (keel merges several inputs by timestamp), every port
writes what it sends to its own out pcap. The case's configuration is a
startup config of console commands; `--exit-when-drained` ends the run
once every input has been forwarded.
"""
import os
import shlex
import subprocess
import sys

from ovs_switch import read_pcap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import write_pcap_ts  # noqa: E402  (records: (timestamp in us, frame))

PATIENCE = 120


def port_words(case, p):
    """The add-port options of port p: ovs-vsctl's column forms."""
    w = []
    for k, v in sorted(case.port_config.get(p, {}).items()):
        w.append("%s=%s" % (k, v))
    if p in case.mtu and case.mtu[p] != 1500:
        w.append("mtu_request=%d" % case.mtu[p])
    return w


def config(case, flows_file, nports):
    lines = ["add-br br0"]
    for p in range(1, nports + 1):
        lines.append(" ".join(["add-port", "br0", "p%d" % p, "ofport_request=%d" % p] + port_words(case, p)))
    if case.vlan_limit != 1:
        lines.append("set vlan-limit %d" % case.vlan_limit)
    if getattr(case, "n_revalidators", 0):
        lines.append("set n-revalidator-threads %d" % case.n_revalidators)
    if case.flows:
        lines.append("add-flows br0 " + flows_file)
    return "\n".join(lines) + "\n"


class Keel:
    def __init__(self, binary, emulator=()):
        self.binary = binary
        self.emulator = list(emulator)

    def run(self, case, workdir, nports, commands=()):
        """Returns (outputs {port: [frames]} or None, error text, full stdout+stderr).
        `commands` run once the inputs drained; their output is in self.stdout."""
        os.makedirs(workdir, exist_ok=True)
        ports = []
        outs = {}
        for p in range(1, nports + 1):
            recs = [(i, fr) for i, (ip, fr) in enumerate(case.packets) if ip == p]
            outs[p] = os.path.join(workdir, "p%d.out.pcap" % p)
            spec = "out=" + outs[p]
            if recs:
                inp = os.path.join(workdir, "p%d.in.pcap" % p)
                write_pcap_ts(inp, recs)
                spec = "in=%s,%s" % (inp, spec)
            ports += ["--port", "p%d=pcap:%s" % (p, spec)]
        flows = os.path.join(workdir, "flows.txt")
        with open(flows, "w") as f:
            f.write("\n".join(case.flows) + "\n")
        cfg = os.path.join(workdir, "keel.conf")
        with open(cfg, "w") as f:
            f.write(config(case, flows, nports))
        argv = self.emulator + [self.binary, "--config", cfg, "--config-dir", workdir] + ports + \
            ["--exit-when-drained"]
        p = subprocess.run(argv, input="".join(c + "\n" for c in commands), capture_output=True, text=True,
                           timeout=PATIENCE)
        self.stdout = p.stdout
        log = "$ %s\n%s%s" % (" ".join(shlex.quote(a) for a in argv), p.stdout, p.stderr)
        if p.returncode:
            return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1], log
        got = {q: (read_pcap(path) if os.path.exists(path) else []) for q, path in outs.items()}
        return got, None, log

    def trace(self, case, workdir, nports, port, frame):
        """keel's `trace` of one frame in the case's configuration."""
        cfg = os.path.join(workdir, "keel.conf")
        argv = self.emulator + [self.binary, "--config", cfg, "--config-dir", workdir]
        for p in range(1, nports + 1):
            argv += ["--port", "p%d=null" % p]
        argv.append("--exit-when-drained")
        p = subprocess.run(argv, input="trace br0 in_port=%d --packet %s\n" % (port, frame.hex()),
                           capture_output=True, text=True, timeout=PATIENCE)
        return (p.stdout + p.stderr).strip()

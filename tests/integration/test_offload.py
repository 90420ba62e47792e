#!/usr/bin/env python3
"""Hardware offload on host-sim (issue 16): the sim NIC model's flow engine
(hal/sim/sim_flow.h) behind the offload engine (firmware/offload), seen
through the console.

keel runs live: p0 is a TAP this test writes frames into, p1..p3 are
pcap outputs (read after keel exits). Bridge br0 has one rule per output:

  udp,nw_dst=10.0.0.2 -> output:2 (p1)      full offload (exact-match rule)
  udp,nw_dst=10.0.0.3 -> output(port=3,max_len=100) (p2)
                                             partial (trunc needs an Arm core:
                                             MARK rule, phwol hits)
  udp,nw_dst=10.0.0.4 -> output:4 (p3), controller
                                             partial (userspace)

Every flow is ONE microflow (fixed 5-tuple; the payload carries a sequence
number), and each output port gets exactly one flow, so the order of its
pcap is defined: a flow's packets arrive in order on the TAP, and while the
hardware rule is being installed the test sends one frame at a time and
waits until keel received it (never two packets of the flow in one rx
burst, one forwarded by the "hardware" inside rx and the other later by the
PMD). So the output of an offloaded run must be byte-identical to the same
run with offload disabled (which, for a plain output, is the input).

Must show:
* a hot microflow gets an exact-match rule after its first packets; later
  packets bypass the PMD (PMD packets_received stops, p0's rx_hw_forwarded
  and the flow's hardware counters advance); `flow-dump --offloaded` lists
  the flow with counters equal to the packets sent; `dump-flows` (after a
  revalidation round) counts every packet;
* a flow that is not fully offloaded says why in `flow-dump -m`
  (offload-reason:"...");
* partial offload: marked packets counted in phwol hits, truncated output
  correct;
* faults (debug offload-fault): an insert failure, a full table and a
  device reset leave forwarding byte-correct, are counted in offload-show,
  and after a reset the hot flow is offloaded again.

Needs /dev/net/tun and root (skipped without)."""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

from harness import (EMPTY_CONFIG, PATIENCE, ask_live, check, json_lines, keel_cmd, main, read_pcap, run_keel,
                     tap_available, tmpdir, wait_for)

ETH = bytes.fromhex("020000000002" "020000000001" "0800")


def frame(dst_last, seq, size=120, sport=1111, dport=2222):
    """IPv4/UDP 10.0.0.1:sport -> 10.0.0.<dst_last>:dport, `size` bytes; the
    payload's first 4 bytes are seq (so a reordering or a loss shows)."""
    ip_len = size - 14
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, 64, 17, 0,
                      bytes([10, 0, 0, 1]), bytes([10, 0, 0, dst_last]))
    s = sum(struct.unpack("!10H", hdr))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    hdr = hdr[:10] + struct.pack("!H", ~s & 0xffff) + hdr[12:]
    udp_len = ip_len - 20
    payload = struct.pack("!I", seq) + bytes((seq + k) & 0xff for k in range(udp_len - 12))
    return ETH + hdr + struct.pack("!HHHH", sport, dport, udp_len, 0) + payload


RULES = [
    "priority=10,udp,nw_dst=10.0.0.2,actions=output:2",
    "priority=10,udp,nw_dst=10.0.0.3,actions=output(port=3,max_len=100)",
    "priority=10,udp,nw_dst=10.0.0.4,actions=output:4,controller",
    "priority=0,actions=drop",
]


class Live:
    """keel with p0 a TAP the test writes to, p1..p3 pcap outputs (flow
    10.0.0.N leaves on p(N-1))."""

    def __init__(self, extra=(), offload=True, tag=""):
        base = os.getpid() % 10000
        self.ifname = "kof%d%s" % (base, tag)
        self.d = tmpdir()
        cfg = os.path.join(self.d, "cfg")
        with open(cfg, "w") as f:
            f.write("add-br br0\n")
            for i in range(4):  # p0 is OpenFlow port 1, p1 port 2, ...
                f.write("add-port br0 p%d ofport_request=%d\n" % (i, i + 1))
            for r in RULES:
                f.write("add-flow br0 %s\n" % r)
            for line in extra:
                f.write(line + "\n")
            if offload:
                f.write("offload enable\n")
        outs = []
        for i in range(1, 4):
            outs += ["--port", "p%d=pcap:out=%s" % (i, os.path.join(self.d, "p%d.pcap" % i))]
        self.err = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen(
            keel_cmd("--config", cfg, "--config-dir", self.d, "--port", "p0=tap:" + self.ifname, *outs),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True, bufsize=1)
        self.ask("show ports")
        subprocess.run(["sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % self.ifname], capture_output=True)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.sock.bind((self.ifname, 0))
        self.sent = {}  # dst_last -> frames sent

    def ask(self, cmd):
        return ask_live(self.p, self.err, cmd)

    def ask_json(self, cmd):
        return json.loads(self.ask(cmd + " --format json"))

    def port(self, name):
        return [p for p in self.ask_json("show ports")["ports"] if p["name"] == name][0]

    def p0_rx(self):
        return self.port("p0")["rx"]["packets"]

    def pmd_rx(self):
        return sum(p["packets_received"] for p in self.ask_json("pmd-stats-show")["pmds"])

    def phwol(self):
        return sum(p["phwol_hits"] for p in self.ask_json("pmd-stats-show")["pmds"])

    def send(self, dst_last, n, one_by_one=False):
        """Sends n frames of flow dst_last; one_by_one: each waits until
        keel received it (one frame per rx burst)."""
        lst = self.sent.setdefault(dst_last, [])
        for _ in range(n):
            f = frame(dst_last, len(lst))
            rx = self.p0_rx() if one_by_one else 0
            self.sock.send(f)
            lst.append(f)
            if one_by_one:
                wait_for(lambda: self.p0_rx() > rx, "keel received frame %d of flow %d" % (len(lst), dst_last))
            else:
                time.sleep(0.001)  # the TAP's queue holds what keel has not read yet

    def delivered(self, port="p1"):
        """Frames out of `port`: what its PMDs sent plus what the hardware
        forwarded from p0 (counted at the ingress, p0's rx hw_forwarded, not
        in the egress port's tx counters; only flow 10.0.0.2 -> p1 is ever
        fully offloaded here)."""
        return self.port(port)["tx"]["packets"] + self.port("p0")["rx"]["hw_forwarded"]

    def total_sent(self):
        return sum(len(v) for v in self.sent.values())

    def wait_received(self):
        want = self.total_sent()
        wait_for(lambda: self.p0_rx() >= want, "keel received the %d frames sent" % want)

    def flows(self, extra=""):
        return self.ask_json("flow-dump " + extra)["flows"]

    def flow_to(self, dst_last, extra=""):
        """The flow-dump JSON entry of the megaflow of flow dst_last."""
        for f in self.flows(extra):
            if "dst=10.0.0.%d" % dst_last in f["match"]:
                return f
        return None

    def until_offloaded(self, dst_last, state="yes", limit=400):
        """Sends frames of flow dst_last one by one until its megaflow's
        `offloaded` is `state` (the hardware confirmed the rule)."""
        for _ in range(limit):
            f = self.flow_to(dst_last)
            if f and f["offloaded"] == state:
                return f
            self.send(dst_last, 1, one_by_one=True)
        f = self.flow_to(dst_last)
        check(f and f["offloaded"] == state, "flow to 10.0.0.%d offloaded:%s after %d frames: %s\n%s" %
              (dst_last, state, limit, f, self.ask("offload-show")))
        return f

    def offload_show(self):
        return self.ask_json("offload-show")

    def close(self):
        self.sock.close()
        self.p.stdin.close()
        self.p.wait(timeout=PATIENCE)
        self.err.seek(0)
        return self.err.read()

    def frames_on(self, port):
        path = os.path.join(self.d, "p%d.pcap" % port)
        return read_pcap(path) if os.path.exists(path) else []


def rule_packets(k, match):
    rules = k.ask_json("dump-flows br0")["flows"]
    for r in rules:
        if r["match"] == match:
            return r["n_packets"], r["n_bytes"]
    raise AssertionError("no rule %s in %s" % (match, rules))


def test_full_offload_bypasses_the_pmd():
    k = Live()
    try:
        k.until_offloaded(2)
        rx_before = k.p0_rx()
        pmd_before = k.pmd_rx()
        hw_before = k.port("p0")["rx"]["hw_forwarded"]
        k.send(2, 200)
        wait_for(lambda: k.port("p0")["rx"]["hw_forwarded"] - hw_before >= 200,
                 "the hardware forwarded the 200 frames sent after the rule")
        total = len(k.sent[2])
        wait_for(lambda: k.delivered() >= total, "p1 sent the %d frames (PMD + hardware)" % total)
        hw = k.port("p0")["rx"]["hw_forwarded"] - hw_before
        rx = k.p0_rx() - rx_before
        pmd = k.pmd_rx() - pmd_before
        check(hw == 200, "p0 rx_hw_forwarded advanced by exactly 200: %d" % hw)
        # The PMDs saw none of them (only what else the kernel may have
        # put on the TAP: rx - hw, normally 0).
        check(pmd == rx - hw and pmd <= 5, "PMDs received nothing after the rule: %d (p0 rx %d, hw %d)" %
              (pmd, rx, hw))
        # flow-dump --offloaded: the flow, counters = every packet sent
        # (the ones the PMD forwarded before the rule, and the hardware's)
        # but the first, which the upcall executed (a megaflow counts what
        # the datapath forwarded on it, as Open vSwitch's dpctl/dump-flows).
        off = k.flows("--offloaded")
        check(len(off) == 1, "one offloaded flow: %s" % off)
        nbytes = sum(len(f) for f in k.sent[2])
        first = len(k.sent[2][0])
        check(off[0]["packets"] == total - 1 and off[0]["bytes"] == nbytes - first,
              "offloaded flow counters %d/%d, want %d/%d" % (off[0]["packets"], off[0]["bytes"], total - 1,
                                                              nbytes - first))
        check(off[0]["hw_packets"] >= 200, "hardware counted the 200 at least: %s" % off[0])
        text = k.ask("flow-dump -m --offloaded")
        check("offloaded:yes, dp:dpdk" in text and "packets:%d," % (total - 1) in text, "flow-dump -m --offloaded:\n" + text)
        check("offload-reason" not in text, "a fully offloaded flow has no reason:\n" + text)
        # dump-flows after a revalidation round: the rule counted all
        # (the upcall's packet too).
        k.ask("revalidate")
        check(rule_packets(k, "udp,nw_dst=10.0.0.2") == (total, nbytes), "dump-flows counts every packet: %s" %
              (rule_packets(k, "udp,nw_dst=10.0.0.2"),))
        show = k.offload_show()
        check(show["enabled"] and show["totals"]["rules_full"] >= 1, "offload-show: %s" % show)
        # trace ends with the decision.
        tr = k.ask("trace br0 udp,in_port=1,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1111,tp_dst=2222")
        check(tr.rstrip().splitlines()[-1].startswith("Offload: full"), "trace's last line:\n" + tr)
    finally:
        k.close()
    got = k.frames_on(1)
    check(got == k.sent[2], "p1's pcap is exactly the frames sent (%d of %d)" % (len(got), len(k.sent[2])))
    # The same frames with offload disabled give the same pcap.
    ref = Live(offload=False, tag="r")
    try:
        ref.send(2, len(k.sent[2]), one_by_one=False)
        ref.wait_received()
        check(not ref.flows("--offloaded"), "nothing offloaded with offload disabled")
    finally:
        ref.close()
    check(ref.frames_on(1) == got, "offload disabled gives the same p1 pcap")


def test_reasons_and_partial_offload():
    k = Live()
    try:
        # A flow seen once is not hot: it stays on the Arm cores, saying so.
        k.send(2, 1, one_by_one=True)
        # Received is not yet installed: the handler installs the megaflow
        # after the upcall.
        wait_for(lambda: k.flow_to(2), "the megaflow of the first frame installed")
        text = k.ask("flow-dump -m")
        line = [l for l in text.splitlines() if "dst=10.0.0.2" in l][0]
        check('offload-reason:"' in line and "dp:ovs" in line, "a flow not offloaded says why:\n" + line)
        # trunc needs an Arm core: a MARK rule, marked packets skip the lookup.
        k.until_offloaded(3, state="partial")
        line = [l for l in k.ask("flow-dump -m").splitlines() if "dst=10.0.0.3" in l][0]
        check("offloaded:partial, dp:ovs" in line and "actions need the Arm cores: trunc" in line,
              "partial flow's line:\n" + line)
        hits = k.phwol()
        k.send(3, 50)
        k.wait_received()
        wait_for(lambda: k.phwol() >= hits + 50, "50 phwol hits (marked packets)")
        check("phwol hits: %d" % k.phwol() in k.ask("pmd-stats-show"), "pmd-stats-show's phwol hits")
        tr = k.ask("trace br0 udp,in_port=1,nw_dst=10.0.0.3")
        last = tr.rstrip().splitlines()[-1]
        check(last.startswith("Offload: partial (mark): ") and "actions need the Arm cores: trunc" in last,
              "trace's last line:\n" + tr)
    finally:
        k.close()
    got = k.frames_on(2)
    check(got == [f[:100] for f in k.sent[3]], "p2: every frame, truncated to 100 bytes, in order")


def fault_run(fault, reasons):
    """`fault` armed before the flow's first packet: 100 frames one by one;
    the flow is not offloaded, says one of `reasons`, the failure is
    counted in offload-show, and p1 got every frame in order."""
    k = Live()
    try:
        k.ask("debug offload-fault " + fault)
        k.send(2, 100, one_by_one=True)
        k.wait_received()
        f = k.flow_to(2)
        check(f["offloaded"] != "yes", "%s: not offloaded: %s" % (fault, f))
        line = [l for l in k.ask("flow-dump -m").splitlines() if "dst=10.0.0.2" in l][0]
        check(any(r in line for r in reasons), "%s: a reason of %r in\n%s" % (fault, reasons, line))
        show = k.offload_show()
        failed = show["totals"]["failed"]
        check(sum(failed.values()) >= 1, "%s: counted in offload-show: %s" % (fault, show))
        # Forwarding stayed exact (the megaflow counts all but the upcall's).
        check(f["packets"] == 99, "%s: the flow counted 99 of 100: %s" % (fault, f))
    finally:
        k.close()
    check(k.frames_on(1) == k.sent[2], "%s: p1 got every frame, in order" % fault)


def test_fault_insert_failure():
    # ENOTSUP: the driver refuses the rule (EIO / ENODEV would read as a
    # device reset, test_fault_device_reset_reoffloads).
    fault_run("insert-fail 1000 ENOTSUP", ("refused by the driver", "retrying after"))


def test_fault_table_full():
    fault_run("table-full on", ("table full",))


def test_fault_device_reset_reoffloads():
    k = Live()
    try:
        k.until_offloaded(2)
        k.ask("debug offload-fault reset")
        # The hot flow is re-offloaded; until then the PMD forwards it.
        k.until_offloaded(2)
        show = k.offload_show()
        check(show["totals"]["device_resets"] >= 1, "reset counted: %s" % show)
        k.send(2, 50)
        k.wait_received()
        total = len(k.sent[2])
        wait_for(lambda: k.delivered() >= total, "p1 sent every frame (PMD + hardware)")
        f = k.flows("--offloaded")
        check(len(f) == 1 and f[0]["packets"] == total - 1, "counters after the reset: %s, want %d" % (f, total - 1))
    finally:
        k.close()
    check(k.frames_on(1) == k.sent[2], "reset: p1 got every frame, in order")


def test_commands_and_running_config():
    """The settings: bad values refused whole (the previous value stays),
    set values in show running-config, defaults print nothing."""
    script = "\n".join([
        "show running-config",
        "set offload-mode fast", "set n-offload-threads 0", "offload sideways",
        "set offload-promote-packets x", "debug offload-fault explode",
        "set offload-mode both", "set n-offload-threads 2", "set offload-promote-packets 8",
        "set offload-idle-ms 500", "offload enable",
        "set n-offload-threads 99",
        "show running-config", "offload-show --format json"]) + "\n"
    p = run_keel("--config", EMPTY_CONFIG, "--config-dir", tmpdir(), "--port", "p0=null", stdin=script)
    errors = [l for l in p.stderr.splitlines() if l.startswith("error:")]
    check(len(errors) == 6, "six commands refused, each with a message: %s" % errors, p)
    cfgs = [c for c in p.stdout.split("{", 1)[0].split("! keel") if c.strip()]
    check("offload" not in cfgs[0], "defaults print nothing:\n" + cfgs[0], p)
    for c in ("set offload-mode both", "set n-offload-threads 2", "set offload-promote-packets 8",
              "set offload-idle-ms 500", "offload enable"):
        check(c in cfgs[-1], "%r in running-config:\n%s" % (c, cfgs[-1]), p)
    show = json_lines(p.stdout)[-1]
    check(show["enabled"] and show["mode"] == "both" and show["threads"] == 2 and show["promote_packets"] == 8 and
          show["idle_ms"] == 500, "offload-show reports the settings (the refused 99 changed nothing): %s" % show, p)


if __name__ == "__main__":
    if not tap_available():
        print("SKIP: needs /dev/net/tun and root")
        sys.exit(0)
    only = [a for a in sys.argv[1:]]
    tests = [test_commands_and_running_config, test_full_offload_bypasses_the_pmd, test_reasons_and_partial_offload,
             test_fault_insert_failure, test_fault_table_full, test_fault_device_reset_reoffloads]
    main([t for t in tests if not only or t.__name__ in only])

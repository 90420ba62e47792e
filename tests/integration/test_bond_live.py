#!/usr/bin/env python3
"""Bonds in a live keel (issue 14): p0 is a TAP device this test writes
frames into, bridge br0 with NORMAL (the frames' destination is unknown:
they flood into the bond a1+a2). balance-tcp bonds run LACP with the test
as their partner (a1, a2 TAPs; a thread answers keel's LACPDUs and keeps
what else arrives); the other modes have pcap outputs as members.

* Must show: LACP negotiated (bond-show, lacp-show); 10k L4 flows give ONE
  megaflow `hash(l4(0)),lb_output(1)`; pmd-bond-show's bucket map predicts
  the member of every frame; with lb-output-action=false the traffic takes
  `hash(l4(0)),recirc(0x1)` and one `recirc_id(0x1),dp_hash(B/0xff)`
  megaflow per bucket, each frame on its bucket's member.

* A member taken down (`port-link a1 down`) carries nothing once the PMDs
  hold the new table: its buckets are all on a2 in every PMD, and no frame
  sent after that leaves on a1; back up, after bond_updelay, it is enabled
  and rebalancing gives it buckets again while traffic flows.
* active-backup and balance-slb failover: the new member sends learning
  packets for the MACs the bridge learned elsewhere (p0's).
* Rebalancing: traffic stuck on one member (its peer was disabled while
  the traffic started) is moved at a following interval.
* Changing bond-hash-basis with more than 20k flows running loses nothing:
  every frame keel received left on a member.

Needs /dev/net/tun and root (skipped without)."""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from harness import ask_live, check, keel_cmd, main, read_pcap, tap_available, tmpdir, wait_for

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_bond import bucket_map, tcp_frame  # noqa: E402


def marked(i, mark, pad=0, vary_mac=False):
    """tcp_frame(i) with its IPv4 source's first byte = mark (10 + phase),
    and `pad` bytes of trailer (counted in the bond's bucket loads);
    vary_mac: source MAC 00:00:00:00:01:(i % 256) (balance-slb hashes it)."""
    f = bytearray(tcp_frame(i))
    f[26] = mark
    if vary_mac:
        f[10] = 1
        f[11] = i & 255
    # The IPv4 header checksum is 0 in tcp_frame; keel does not check it.
    return bytes(f) + bytes(pad)


# keel's own hash(l4) of a frame without an RSS hash (a TAP port gives
# none): flow::hash_l4 over the miniflow words (CRC32-C per 64-bit word,
# then core/hash.h's hash_finish), for an untagged IPv4 TCP/UDP frame.
def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC = _crc_table()


def _crc64(h, w):
    for i in range(8):
        h = _CRC[(h ^ (w >> (8 * i))) & 0xff] ^ (h >> 8)
    return h


def _finish(h, n):
    h ^= n
    h ^= h >> 16
    h = (h * 0x85ebca6b) & 0xffffffff
    h ^= h >> 13
    h = (h * 0xc2b2ae35) & 0xffffffff
    h ^= h >> 16
    return h


def keel_bucket(frame, basis=0):
    ip = frame[14:]
    ihl = (ip[0] & 15) * 4
    h = basis
    h = _crc64(h, int.from_bytes(ip[12:20], "little"))  # nw_src, nw_dst
    for _ in range(4):
        h = _crc64(h, 0)  # the IPv6 address words
    h = _crc64(h, ip[9])  # nw_proto
    h = _crc64(h, int.from_bytes(ip[ihl:ihl + 4], "little"))  # tp_src, tp_dst
    return _finish(h, 40) & 255


class Live:
    """keel with p0 a TAP the test writes to and the bond's members a1, a2.
    lacp=False: pcap outputs, read at the end. lacp=True: TAPs whose other
    end is this test's LACP partner (a thread answers every LACPDU keel
    sends and keeps the other frames per member)."""

    def __init__(self, bond_words, extra="", lacp=False):
        base = os.getpid() % 10000
        self.ifname = "kbd%d" % base
        self.lacp = lacp
        self.d = tmpdir()
        cfg = os.path.join(self.d, "cfg")
        with open(cfg, "w") as f:
            f.write("add-br br0\nadd-port br0 p0\nadd-bond br0 bond0 a1 a2 %s%s\nadd-flow br0 actions=NORMAL\n%s" %
                    (bond_words, " lacp=active other_config:lacp-time=fast" if lacp else "", extra))
        self.taps = {"a1": "kbe%d" % base, "a2": "kbf%d" % base}
        if lacp:
            members = ["--port", "a1=tap:" + self.taps["a1"], "--port", "a2=tap:" + self.taps["a2"]]
        else:
            members = ["--port", "a1=pcap:out=" + os.path.join(self.d, "a1.pcap"),
                       "--port", "a2=pcap:out=" + os.path.join(self.d, "a2.pcap")]
        self.err = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen(
            keel_cmd("--config", cfg, "--config-dir", self.d, "--port", "p0=tap:" + self.ifname, *members),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True, bufsize=1)
        self.ask("show ports")
        subprocess.run(["sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % self.ifname], capture_output=True)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.sock.bind((self.ifname, 0))
        ports = self.ask_json("show ports")["ports"]
        self.ids = {p["name"]: p["id"] for p in ports}
        self.got = {"a1": [], "a2": []}
        if lacp:
            self.stop = False
            self.msocks = {}
            for i, n in enumerate(("a1", "a2")):
                subprocess.run(["sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % self.taps[n]],
                               capture_output=True)
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
                s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE: keep every frame
                s.bind((self.taps[n], 0))
                s.settimeout(0.02)
                self.msocks[n] = s
            self.partner = threading.Thread(target=self._partner, daemon=True)
            self.partner.start()
            wait_for(lambda: "lacp_status: negotiated" in self.ask("bond-show bond0") and
                     "member a1: enabled" in self.ask("bond-show bond0") and
                     "member a2: enabled" in self.ask("bond-show bond0"), "LACP negotiated with the test's partner")

    def _partner(self):
        while not self.stop:
            for i, n in enumerate(("a1", "a2")):
                try:
                    while True:
                        f, addr = self.msocks[n].recvfrom(4096)
                        if addr[2] == socket.PACKET_OUTGOING:
                            continue  # our own PDUs
                        if f[12:14] == b"\x88\x09":
                            if f[14] == 1:
                                self.msocks[n].send(partner_reply(f, i + 1))
                        else:
                            self.got[n].append(f)
                except (socket.timeout, OSError):
                    pass

    def ask(self, cmd):
        return ask_live(self.p, self.err, cmd)

    def ask_json(self, cmd):
        return json.loads(self.ask(cmd + " --format json"))

    def port(self, name):
        return [p for p in self.ask_json("show ports")["ports"] if p["name"] == name][0]

    def send(self, frames, chunk=0, pause=0.01):
        """chunk: pause after every `chunk` frames (the TAP's queue drops
        what keel has not read yet)."""
        for i, f in enumerate(frames):
            self.sock.send(f)
            if chunk and i % chunk == chunk - 1:
                time.sleep(pause)

    def data_tx(self):
        """Frames the members sent that are not keel's own LACPDUs."""
        tx = self.port("a1")["tx"]["packets"] + self.port("a2")["tx"]["packets"]
        if self.lacp:
            tx -= sum(m["tx_pdus"] for m in self.ask_json("lacp-show bond0")["lacp"][0]["members"])
        return tx

    def buckets(self):
        return bucket_map(self.ask("pmd-bond-show"))

    def close(self):
        if self.lacp:
            time.sleep(0.3)  # the last frames reach the partner's sockets
            self.stop = True
            self.partner.join()
            for s in self.msocks.values():
                s.close()
        self.sock.close()
        self.p.stdin.close()
        self.p.wait(timeout=60)
        self.err.seek(0)
        return self.err.read()

    def frames_on(self, name):
        if self.lacp:
            return [f for f in self.got[name] if len(f) >= 34 and f[12:14] == b"\x08\x00"]
        path = os.path.join(self.d, name + ".pcap")
        return read_pcap(path) if os.path.exists(path) else []


def test_member_down_then_up():
    k = Live("bond_mode=balance-tcp bond_updelay=300 other_config:bond-rebalance-interval=1000", lacp=True)
    try:
        a1, a2 = k.ids["a1"], k.ids["a2"]
        k.send([marked(i, 10) for i in range(500)])
        wait_for(lambda: k.port("p0")["rx"]["packets"] >= 500, "keel received phase 1")
        check(k.ask("port-link a1 down") == "", "port-link a1 down")
        wait_for(lambda: set(k.buckets().values()) == {a2}, "a1's buckets moved to a2")
        # Every PMD holds that table (pmd-bond-show --pmd: what each has).
        text = k.ask("pmd-bond-show --pmd")
        members = {l.split(" - member ")[1] for l in text.splitlines() if " - member " in l}
        check(members == {str(a2)}, "every PMD's table sends on a2 only:\n" + text)
        check("member a1: disabled" in k.ask("bond-show bond0"), "bond-show: a1 disabled")
        before = k.port("a2")["tx"]["packets"]
        k.send([marked(i, 11) for i in range(500)])
        wait_for(lambda: k.port("a2")["tx"]["packets"] >= before + 500, "phase 2 left on a2")
        check(k.ask("port-link a1 up") == "", "port-link a1 up")
        wait_for(lambda: "member a1: enabled" in k.ask("bond-show bond0"), "a1 enabled after updelay")

        def rebalanced_in():
            k.send([marked(i, 12) for i in range(200)])
            time.sleep(0.1)
            return a1 in set(k.buckets().values())
        wait_for(rebalanced_in, "rebalancing gives a1 buckets again")
    finally:
        err = k.close()
    on_a1 = [f for f in k.frames_on("a1") if f[26] == 11]
    check(not on_a1, "%d frames sent while a1 was down left on a1 (stderr: %s)" % (len(on_a1), err))
    check(len([f for f in k.frames_on("a2") if f[26] == 11]) == 500, "phase 2: all 500 on a2")


def learning_packets(frames, mac):
    return [f for f in frames if f[6:12] == mac and f[0:6] == b"\xff" * 6]


def test_failover_sends_learning_packets():
    src = bytes.fromhex("000000000001")  # tcp_frame's source MAC, learned on p0
    for mode in ("active-backup", "balance-slb"):
        k = Live("bond_mode=" + mode)
        try:
            k.send([marked(i, 10) for i in range(50)])
            wait_for(lambda: any(e["port"] == 1 for e in k.ask_json("fdb-show br0")["entries"]),
                     "p0's MAC learned")
            show = k.ask("bond-show bond0")
            active = "a1" if "member a1: enabled\n  active member" in show else "a2"
            other = "a2" if active == "a1" else "a1"
            # The member carrying the traffic goes down.
            frames_before = None
            if mode == "balance-slb":
                # the member of p0's MAC's bucket
                outs = [l for l in k.ask("flow-dump").splitlines() if "actions:" in l]
                port = outs[-1].rsplit("actions:", 1)[1]
                active = "a1" if port == str(k.ids["a1"]) else "a2"
                other = "a2" if active == "a1" else "a1"
            tx0 = k.port(other)["tx"]["packets"]
            check(k.ask("port-link %s down" % active) == "", "port-link down")
            wait_for(lambda: "member %s: disabled" % active in k.ask("bond-show bond0"), "%s disabled" % active)

            # The bond's decision is made; the megaflows that output to the
            # dead member are re-translated by the revalidator after it (a
            # slow machine, qemu: well after bond-show says so). Send once
            # no megaflow outputs to it any more.
            def no_flow_outputs_to_dead_member():
                acts = [l.rsplit("actions:", 1)[1] for l in k.ask("flow-dump").splitlines() if "actions:" in l]
                return all(str(k.ids[active]) not in a.split(",") for a in acts)
            wait_for(no_flow_outputs_to_dead_member, "no megaflow outputs to %s" % active)
            k.send([marked(i, 11) for i in range(50)])
            # The 50 and at least one learning packet (sent by the bond's
            # periodic run after the failover, not with the traffic: wait
            # for it before keel stops, or the race loses it).
            wait_for(lambda: k.port(other)["tx"]["packets"] >= tx0 + 51,
                     "traffic and a learning packet on %s" % other)
        finally:
            k.close()
        got = learning_packets(k.frames_on(other), src)
        check(got, "%s: a learning packet for p0's MAC left on %s after failover" % (mode, other))
        check(len([f for f in k.frames_on(other) if f[26] == 11]) == 50, "%s: traffic on %s" % (mode, other))
        del frames_before


def test_stuck_traffic_is_rebalanced():
    for mode in ("balance-tcp", "balance-tcp other_config:lb-output-action=false", "balance-slb"):
        stuck_traffic_is_rebalanced(mode)


def stuck_traffic_is_rebalanced(mode):
    # balance-tcp: loads from the datapath's bucket counters (lb_output), or
    # the second-pass megaflows' statistics (recirculation); balance-slb:
    # from the megaflows' statistics the revalidator pushes (Bond::account).
    slb = mode == "balance-slb"
    table = mode == "balance-tcp"
    k = Live("bond_mode=%s other_config:bond-rebalance-interval=1000" % mode, lacp=not slb)
    try:
        a1 = k.ids["a1"]
        check(k.ask("bond-disable-member bond0 a2") == "disabled\n", "bond-disable-member")
        wait_for(lambda: "member a2: disabled" in k.ask("bond-show bond0"), "a2 disabled")
        if table:
            wait_for(lambda: set(k.buckets().values()) == {a1}, "everything on a1")
        k.send([marked(i, 10, vary_mac=slb) for i in range(64)])
        check(k.ask("bond-enable-member bond0 a2") == "enabled\n", "bond-enable-member")
        start = k.port("a2")["tx"]["packets"]

        def moved():
            # The same 64 flows, stuck on a1's buckets; 1400-byte frames:
            # Open vSwitch's rule moves nothing for less than 100 kB of
            # imbalance, keel's too.
            k.send([marked(i, 10, pad=1346, vary_mac=slb) for i in range(64)])
            time.sleep(0.1)
            return k.port("a2")["tx"]["packets"] > start
        wait_for(moved, "%s: some of the stuck flows moved to a2 at a rebalance" % mode)
        show = k.ask("bond-show bond0")
        check("kB load" in show, "bond-show lists loaded hashes:\n" + show)
    finally:
        k.close()


def test_hash_basis_change_loses_nothing():
    k = Live("bond_mode=balance-tcp", lacp=True)
    try:
        n = 24000
        half = n // 2
        rx0, tx0 = k.port("p0")["rx"]["packets"], k.data_tx()
        k.send([marked(i, 10) for i in range(half)], chunk=200)
        check(k.ask("set port bond0 other_config:bond-hash-basis=5") == "", "set the hash basis")
        k.send([marked(i, 10) for i in range(half, n)], chunk=200)

        def settled():
            return k.port("p0")["rx"]["packets"] - rx0 == k.data_tx() - tx0

        time.sleep(0.5)
        wait_for(settled, "every frame received left on a member")
        wait_for(lambda: "hash(l4(5)),lb_output(1)" in k.ask("flow-dump"), "the megaflow hashes with basis 5")
        rx = k.port("p0")["rx"]["packets"] - rx0
        check(rx >= n * 0.9, "most frames reached keel (%d of %d; the TAP may drop some)" % (rx, n))
        drops = k.port("a1")["tx"]["dropped"] + k.port("a2")["tx"]["dropped"]
        check(drops == 0, "no drop on the members: %d" % drops)
    finally:
        k.close()


def partner_reply(pdu, port, fast=True):
    """The LACPDU a partner (system 02:00:00:00:aa:00, key 1) answers keel's
    `pdu` with: its own actor info, and keel's actor info as its partner."""
    keel_actor = pdu[16:36]  # TLV 1 (type, len 20, 18 bytes of info)
    state = 0x3d | (0x02 if fast else 0)  # activity aggregation sync collecting distributing (+ fast timeout)
    actor = struct.pack("!BBH6sHHHB3x", 1, 20, 65535, bytes.fromhex("02000000aa00"), 1, 255, port, state)
    partner = b"\x02\x14" + keel_actor[2:]
    collector = struct.pack("!BBH12x", 3, 16, 0)
    body = struct.pack("!BB", 1, 1) + actor + partner + collector + struct.pack("!BB50x", 0, 0)
    return bytes.fromhex("0180c2000002") + bytes.fromhex("02000000aa0%d" % port) + b"\x88\x09" + body


def test_lacp_lb_output_predicts_members_then_recirc():
    """The members' partner is this test (it answers keel's LACPDUs):
    negotiated on both members (lacp-show shows the partner); then 10k L4
    flows give one megaflow hash(l4(0)),lb_output(1) and pmd-bond-show's
    map predicts the member of every frame (keel's hash(l4) of the frame:
    a TAP gives no RSS hash); with lb-output-action=false the same traffic
    takes hash(l4(0)),recirc(0x1) and one recirc_id(0x1),dp_hash(B/0xff)
    megaflow per bucket, each frame on its bucket's member."""
    k = Live("bond_mode=balance-tcp", lacp=True)
    try:
        lacp = k.ask("lacp-show bond0")
        check("status: active negotiated" in lacp and "partner sys_id: 02:00:00:00:aa:00" in lacp,
              "lacp-show: negotiated with the partner:\n" + lacp)
        a1, a2 = k.ids["a1"], k.ids["a2"]
        m = k.buckets()
        check(len(m) == 256 and set(m.values()) == {a1, a2}, "256 buckets on both members")
        rx0, tx0 = k.port("p0")["rx"]["packets"], k.data_tx()
        k.send([marked(i, 10) for i in range(10000)], chunk=200)
        wait_for(lambda: k.data_tx() - tx0 == k.port("p0")["rx"]["packets"] - rx0, "the flows left on the members")
        flows = [l for l in k.ask("flow-dump").splitlines() if "eth_type(0x0800)" in l]
        check(len(flows) == 1 and flows[0].endswith("actions:hash(l4(0)),lb_output(1)"),
              "one lb_output megaflow for 10k L4 flows: %s" % flows)
        check(k.ask("set port bond0 other_config:lb-output-action=false") == "", "lb-output-action=false")
        # Each bucket's first frame misses in the second pass: paced, so
        # that the upcalls keep up (a burst beyond the upcall records is
        # dropped and counted, as Open vSwitch's "miss with failed upcall").
        rx0, tx0 = k.port("p0")["rx"]["packets"], k.data_tx()
        k.send([marked(i, 11) for i in range(3000)], chunk=50, pause=0.02)
        wait_for(lambda: k.data_tx() - tx0 >= 0.9 * (k.port("p0")["rx"]["packets"] - rx0) > 2000,
                 "the recirculated frames left on the members")
        time.sleep(0.5)
        dump = k.ask("flow-dump").splitlines()
        first = [l for l in dump if l.startswith("recirc_id(0),") and "eth_type(0x0800)" in l]
        check(len(first) == 1 and first[0].endswith("actions:hash(l4(0)),recirc(0x1)"),
              "first pass: hash(l4(0)),recirc(0x1): %s" % first)
        second = {}
        for l in dump:
            if l.startswith("recirc_id(0x1),"):
                h = l.split("dp_hash(")[1].split(")")[0]
                check(h.endswith("/0xff"), "the second pass matches dp_hash/0xff: " + l)
                second[int(h.split("/")[0], 16) & 255] = int(l.rsplit("actions:", 1)[1])
    finally:
        k.close()
    for name in ("a1", "a2"):
        for f in k.frames_on(name):
            b = keel_bucket(f)
            if f[26] == 10:
                check(m[b] == k.ids[name], "lb_output: a frame of bucket %d left on %s, pmd-bond-show said %d" %
                      (b, name, m[b]))
            elif f[26] == 11:
                check(second.get(b) == k.ids[name], "recirc: a frame of bucket %d left on %s, its megaflow says %s"
                      % (b, name, second.get(b)))
    check(len(second) > 200, "one second-pass megaflow per bucket used: %d" % len(second))
    seen = len([f for n in ("a1", "a2") for f in k.frames_on(n) if f[26] in (10, 11)])
    check(seen >= 10000, "the partner saw most frames (%d of 13000)" % seen)


if __name__ == "__main__":
    if not tap_available():
        print("SKIP: needs /dev/net/tun and root")
        sys.exit(0)
    main([test_member_down_then_up, test_failover_sends_learning_packets, test_stuck_traffic_is_rebalanced,
          test_hash_basis_change_loses_nothing, test_lacp_lb_output_predicts_members_then_recirc])

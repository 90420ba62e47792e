"""keel's bond against a second independent LACP partner: DPDK's own 802.3ad
bonding PMD (net_bonding, mode=4), driven by tests/e2e/bond_partner.c
($BOND_PARTNER; issue 14).

In a network namespace of the test's own, two veth pairs (da0-kb0,
da1-kb1): the partner bonds net_af_packet vdevs on da0+da1
(`net_bonding0,mode=4,slave=...`: DPDK 22.11's spelling) and loops
rx_burst/tx_burst (the PMD sends its LACPDUs only from tx_burst); keel bonds
its net_af_packet ports on kb0+kb1 (balance-tcp, lacp=active,
lacp-time=fast).

Asserted: DPDK reports both members SELECTED with its actor in sync,
collecting and distributing and keel's system id as partner, keel in sync;
keel's lacp-show is negotiated with both members current and attached and
DPDK's bond MAC as partner system id, its bond-show both members enabled;
L4 flows sent into keel's bridge (a tap port, NORMAL to a static MAC entry
on the bond) reach the DPDK bond, spread over both members (at once, or
after a rebalance: every second here).

Skipped (with the reason) without root, network namespaces, DPDK or the
partner binary, and under qemu-user."""
import json
import os
import re
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "integration")]
from harness import Failure, check  # noqa: E402
import bond_peers as bp  # noqa: E402
from bond_peers import l4_frames, send_frames  # noqa: E402

PARTNER = os.environ.get("BOND_PARTNER", "")
DPDK_DST = "02:0d:00:00:00:01"  # a MAC behind the DPDK bond (static entry in keel)
KEEL_SRC = "02:0b:00:00:00:02"
KEEL_CONFIG = """add-br br0
add-flow br0 actions=NORMAL
add-bond br0 bond0 k0 k1 bond_mode=balance-tcp lacp=active other_config:lacp-time=fast other_config:bond-rebalance-interval=1000
add-port br0 ksrc
fdb-add br0 k0 0 %s
""" % DPDK_DST
KEEL_PORTS = ["k0=dpdk:net_af_packet0,iface=kb0", "k1=dpdk:net_af_packet1,iface=kb1", "ksrc=tap:ktap1"]
TIMEOUT = 60
# DPDK's actor/partner state bits (rte_eth_bond_8023ad.h).
SYNC, COLLECTING, DISTRIBUTING = 0x08, 0x10, 0x20
SELECTED = 2


class Partner:
    """bond_partner running; its latest report per member, read by a thread."""

    def __init__(self):
        self.members, self.rx_data, self.mac, self.lines = {}, 0, None, []
        self.lock = threading.Lock()
        eal = ["--no-huge", "--no-pci", "-m", "256", "--no-shconf", "--no-telemetry", "-l", "0",
               "--file-prefix", "kbp%d" % os.getpid(), "--log-level=lib.eal:error",
               "--vdev", "net_af_packet0,iface=da0", "--vdev", "net_af_packet1,iface=da1",
               "--vdev", "net_bonding0,mode=4,slave=net_af_packet0,slave=net_af_packet1"]
        self.proc = subprocess.Popen([PARTNER, "--"] + eal, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append(line.rstrip("\n"))
                del self.lines[:-200]
                m = re.match(r"bond_partner: ready .* mac (\S+)", line)
                if m:
                    self.mac = m.group(1)
                m = re.match(r"member (\d+) name (\S+) (.*)", line)
                if m:
                    toks = m.group(3).split()
                    self.members[m.group(2)] = dict(zip(toks[::2], toks[1::2]))
                m = re.match(r"rx_data (\d+)", line)
                if m:
                    self.rx_data = int(m.group(1))

    def snapshot(self):
        with self.lock:
            return dict(self.members), self.rx_data, self.mac

    def output(self):
        with self.lock:
            return "\n".join(self.lines[-40:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()  # bond_partner exits on stdin EOF
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        subprocess.run(["rm", "-rf", "/var/run/dpdk/kbp%d" % os.getpid()])


def negotiated(partner, keel):
    members, _, mac = partner.snapshot()
    if len(members) != 2 or mac is None:
        return None
    for m in members.values():
        a, p = int(m["actor_state"], 16), int(m["partner_state"], 16)
        if int(m["selected"]) != SELECTED or (a & (SYNC | COLLECTING | DISTRIBUTING)) != SYNC | COLLECTING | DISTRIBUTING \
                or not p & SYNC:
            return None
    kl = bp.parse_lacp_show(keel.ask("lacp-show bond0")).get("bond0", {})
    if kl.get("status") != "active negotiated" or \
            any(kl.get("members", {}).get(m, {}).get("state") != "current attached" for m in ("k0", "k1")):
        return None
    kb = bp.parse_bond_show(keel.ask("bond-show bond0")).get("bond0", {})
    if any(kb.get("members", {}).get(m, {}).get("state") != "enabled" for m in ("k0", "k1")):
        return None
    return members, mac, kl, kb


def test_negotiated_with_dpdk_bonding(partner, keel):
    (members, mac, kl, kb), secs = bp.wait_until(lambda: negotiated(partner, keel),
                                                 "DPDK's 802.3ad members SELECTED and distributing, keel's bond "
                                                 "negotiated with both members enabled", TIMEOUT)
    print("  negotiated with DPDK's bonding PMD %.2f s after keel answered" % secs)
    for name, m in members.items():
        check(m["partner_sys"] == kl.get("sys_id"),
              "DPDK's %s: partner system %s is keel's system id %s" % (name, m["partner_sys"], kl.get("sys_id")))
    for k in ("k0", "k1"):
        check(kl["members"][k].get("partner sys_id") == mac,
              "keel's %s: partner sys_id %s is the DPDK bond's MAC %s" % (k, kl["members"][k].get("partner sys_id"), mac))
        check("synchronized" in kl["members"][k].get("partner state", "").split(),
              "keel's %s: DPDK in sync (%s)" % (k, kl["members"][k].get("partner state")))
    check(kb.get("lacp_status") == "negotiated", "keel bond-show lacp_status: %s" % kb.get("lacp_status"))


def test_traffic_reaches_dpdk_bond(partner, keel):
    # keel hands every bucket to the first member it enables and, as Open
    # vSwitch, moves buckets to a member enabled later only when it
    # rebalances by load (every second here): when the two members came up
    # in different bond runs, the first burst all leaves on one member.
    # Send bursts of 1,024 frames (256 L4 flows) until both members carry
    # their share of one.
    def tx():
        return {p["name"]: p["tx"]["packets"] for p in json.loads(keel.ask("show ports --format json"))["ports"]}

    d, n, sent = {}, 0, 0
    for burst in range(16):
        _, before, _ = partner.snapshot()
        tx0 = tx()
        frames = l4_frames(DPDK_DST, KEEL_SRC, 256, 4, 200)
        send_frames("ktap1", frames)
        sent = len(frames)

        def arrived():
            _, rx, _ = partner.snapshot()
            return rx - before if rx - before >= sent * 95 // 100 else None
        n, _ = bp.wait_until(arrived, "the %d frames from keel's bridge to reach the DPDK bond" % sent, TIMEOUT)
        tx1 = tx()
        d = {m: tx1[m] - tx0[m] for m in ("k0", "k1")}  # LACPDUs included: at most a few a burst
        if min(d.values()) >= sent // 8:
            break
    print("  the DPDK bond received %d of %d frames of the last burst; keel sent k0 %d, k1 %d (LACPDUs included; "
          "%d bursts)" % (n, sent, d["k0"], d["k1"], burst + 1))
    check(min(d.values()) >= sent // 8, "keel spread 256 flows over both members: %s" % d)


def run():
    bp.private_netns("bond_dpdk_partner")
    if not PARTNER or not os.access(PARTNER, os.X_OK):
        print("SKIP bond_dpdk_partner: no bond_partner binary ($BOND_PARTNER; tests/e2e builds it with DPDK)")
        return 0
    for i in range(2):
        bp.veth_pair("da%d" % i, "kb%d" % i)
    partner = keel = None
    failed, tests = 0, [test_negotiated_with_dpdk_bonding, test_traffic_reaches_dpdk_bond]
    try:
        partner = Partner()
        for attempt in range(3):
            keel = bp.LiveKeel(KEEL_CONFIG, KEEL_PORTS)
            try:
                keel.ask("version")
                break
            except Failure as e:
                # DPDK's af_packet PMD joins a PACKET_FANOUT group whose 16-bit
                # number it derives from the process id and the interface
                # index, and the partner's groups live in this namespace too:
                # with two pids a few apart and consecutive veth indexes the
                # numbers can meet, and the kernel refuses to join a group of
                # another device (EINVAL; seen once in a fresh-clone asan
                # run). A new pid is a new number.
                keel.stop()
                keel = None
                if "PACKET_FANOUT" not in str(e) or attempt == 2:
                    raise
                print("  keel's af_packet fanout group met the partner's (attempt %d); starting keel again" % (attempt + 1))
        bp.sh("ip", "link", "set", "ktap1", "up")
        for t in tests:
            try:
                t(partner, keel)
                print("PASS", t.__name__)
            except Failure as e:
                failed += 1
                print("FAIL", t.__name__, e)
                print("--- bond_partner ---\n" + partner.output())
                for c in ("lacp-show", "bond-show"):
                    try:
                        print("--- keel %s ---\n%s" % (c, keel.ask(c)))
                    except Failure as e2:
                        print("--- keel %s: %s" % (c, e2))
                print("--- keel stderr ---\n" + keel.stderr())
                if t is test_negotiated_with_dpdk_bonding:
                    failed += len(tests) - 1
                    break
    except Failure as e:
        print("FAIL setup", e)
        return 1
    finally:
        if keel:
            keel.stop()
        if partner:
            partner.stop()
    print("%d passed, %d failed" % (len(tests) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run())

"""keel's VXLAN against a VTEP nobody here wrote: the Linux kernel's vxlan
device (issue 15).

In a network namespace of the test's own:

      test netns                                keel (host-sim)
   +--------------------------------+       +--------------------------+
   | vx0  (kernel vxlan, VNI 123,   |       | br-int: NORMAL           |
   |       dstport 4789,            |       |   vx0 type=vxlan         |
   |       10.1.0.1/24)             |       |     remote_ip=192.168.50.1
   |   local 192.168.50.1           |       |     key=123              |
   |   remote 192.168.50.2          |       |   vm  = tap:ktv0 --------+--> VM netns:
   | ktu0 (keel's tap, kernel side: |       | br-phy: NORMAL           |    ktv0 10.1.0.2/24
   |       192.168.50.1/24) <-------+-------+-- uplink = tap:ktu0      |    (a kernel stack,
   +--------------------------------+       |   ip-add 192.168.50.2/24 |     answers ARP/ICMP)
                                            +--------------------------+

keel's VM-side TAP (ktv0) is moved into a second namespace (a child
`unshare --net`), so its 10.1.0.2 is a host of its own, not a local address
of the kernel that owns vx0. Nothing is configured by hand on either side
for the underlay: the kernel ARPs for 192.168.50.2 on ktu0 (keel answers,
as the bridge owning that address), keel ARPs for 192.168.50.1 when it
first encapsulates (the kernel answers; keel learns it, no neigh-set).

Asserted:
  * kernel -> keel -> VM: pings from the kernel's overlay address 10.1.0.1
    to 10.1.0.2 all answered; the kernel's VXLAN packets decapsulated by
    keel (keel's `vm` port transmits), keel's encapsulated replies accepted
    and decapsulated by the kernel (vx0's rx counters grow by the replies);
  * VM -> keel -> kernel: pings the other way (the VM's echo requests
    encapsulated by keel first) all answered;
  * no UDP checksum error in the kernel (Udp InCsumErrors stays 0) and no
    frame dropped by vx0;
  * every VXLAN frame keel sent on ktu0, captured on the kernel side: to
    the kernel's MAC from br-phy's, outer IPv4 192.168.50.2 -> 192.168.50.1
    with a valid header checksum, DF set (df_default), TTL 64, ToS 0, UDP
    dst 4789, src port in Open vSwitch's range (32768..61000), UDP checksum
    0 (csum defaults off over IPv4), VXLAN I flag and VNI 123; the ICMP
    replies inside;
  * keel answered the kernel's ARP request for its underlay address (the
    kernel's neighbour entry for 192.168.50.2 on ktu0 is br-phy's MAC, not
    FAILED), and learned the kernel's MAC for 192.168.50.1 from the
    kernel's ARP reply (`neigh-show`);
  * `tnl-ports-show` lists vxlan_sys_4789; `flow-dump` has tnl_pop and
    tnl_push flows and no recirc after a tnl_push (combined translation).

Skipped (with the reason) without root, network namespaces, TAP devices or
the kernel's vxlan module, and under an emulator."""
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "integration")]
from harness import EMULATOR, Failure, check, csum  # noqa: E402
import bond_peers as bp  # noqa: E402  (sh, wait_until, LiveKeel)

NETNS_MARK = "KEEL_TNL_E2E_NETNS"
VNI = 123
UNDERLAY_KERNEL = "192.168.50.1"
UNDERLAY_KEEL = "192.168.50.2"
OVERLAY_KERNEL = "10.1.0.1"
OVERLAY_VM = "10.1.0.2"
BR_PHY_MAC = "02:00:00:00:50:02"
TIMEOUT = 60  # generous: only a broken side reaches it

KEEL_CONFIG = """add-br br-phy
set bridge br-phy other_config:hwaddr=%s
add-port br-phy uplink
ip-add br-phy %s/24
add-flow br-phy actions=NORMAL
add-br br-int
add-port br-int vm
add-port br-int vx0 type=vxlan options:remote_ip=%s options:key=%d
add-flow br-int actions=NORMAL
""" % (BR_PHY_MAC, UNDERLAY_KEEL, UNDERLAY_KERNEL, VNI)
KEEL_PORTS = ["uplink=tap:ktu0", "vm=tap:ktv0"]


def skip_reason():
    if EMULATOR:
        return "TAP devices and network namespaces are the host kernel's (not under an emulator)"
    if os.geteuid() != 0:
        return "needs root (network namespaces, TAP and vxlan devices)"
    for t in ("unshare", "nsenter", "ip", "ping"):
        if not shutil.which(t):
            return "needs %s" % t
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun (TAP devices)"
    return ""


def private_netns():
    """Re-runs this script in a network namespace of its own (or prints SKIP
    and exits 0 when the machine can't); inside it, returns."""
    if os.environ.get(NETNS_MARK) == "1":
        bp.sh("ip", "link", "set", "lo", "up")
        for k in ("default", "all"):  # no IPv6 chatter on the devices made from now on
            with open("/proc/sys/net/ipv6/conf/%s/disable_ipv6" % k, "w") as f:
                f.write("1\n")
        probe = subprocess.run(["ip", "link", "add", "vxprobe", "type", "vxlan", "id", "1", "dstport", "4789"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            print("SKIP tnl_kernel_vxlan: this kernel has no vxlan device (%s)" % probe.stderr.strip())
            sys.exit(0)
        bp.sh("ip", "link", "del", "vxprobe")
        return
    why = skip_reason()
    if why:
        print("SKIP tnl_kernel_vxlan: %s" % why)
        sys.exit(0)
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("SKIP tnl_kernel_vxlan: cannot create a network namespace (%s)" % probe.stderr.strip())
        sys.exit(0)
    env = dict(os.environ, **{NETNS_MARK: "1"})
    sys.exit(subprocess.run(["unshare", "--net", sys.executable] + sys.argv, env=env).returncode)


def link_stats(dev, ns_pid=None):
    """`ip -s -j link show dev`'s rx/tx counters."""
    cmd = ["ip", "-s", "-j", "link", "show", dev]
    if ns_pid:
        cmd = ["nsenter", "--net=/proc/%d/ns/net" % ns_pid] + cmd
    st = json.loads(bp.sh(*cmd))[0]["stats64"]
    return {"rx": st["rx"]["packets"], "tx": st["tx"]["packets"],
            "rx_dropped": st["rx"]["dropped"], "rx_errors": st["rx"]["errors"]}


def udp_csum_errors():
    lines = [l.split() for l in open("/proc/net/snmp") if l.startswith("Udp:")]
    return int(lines[1][lines[0].index("InCsumErrors")])


def ping(dst, count, ns_pid=None):
    """Runs ping; returns (transmitted, received)."""
    cmd = ["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "2", dst]
    if ns_pid:
        cmd = ["nsenter", "--net=/proc/%d/ns/net" % ns_pid] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    m = re.search(r"(\d+) packets transmitted, (\d+) received", p.stdout)
    if not m:
        raise Failure("ping %s: no summary:\n%s%s" % (dst, p.stdout, p.stderr))
    return int(m.group(1)), int(m.group(2))


class Sniffer:
    """Every frame keel writes to ktu0 (what the kernel receives there), from
    an AF_PACKET socket on the kernel side."""

    def __init__(self, dev):
        self.frames = []
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.sock.bind((dev, 0))
        self.sock.settimeout(0.2)
        self.running = True
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            try:
                data, addr = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                return
            if addr[2] != socket.PACKET_OUTGOING:  # sent by keel, received by the kernel
                with self.lock:
                    self.frames.append(data)

    def snapshot(self):
        with self.lock:
            return list(self.frames)

    def stop(self):
        self.running = False
        self.thread.join(timeout=5)
        self.sock.close()


def mac_text(b):
    return ":".join("%02x" % x for x in b)


def parse_vxlan(frame):
    """The outer headers of an Ethernet/IPv4/UDP/VXLAN frame as a dict, or
    None when the frame is not UDP to 4789."""
    if len(frame) < 14 + 20 + 8 + 8 or frame[12:14] != b"\x08\x00":
        return None
    ip = frame[14:]
    ihl = (ip[0] & 0xf) * 4
    if ip[0] >> 4 != 4 or ip[9] != 17:
        return None
    udp = ip[ihl:]
    sport, dport, ulen, ucsum = struct.unpack("!HHHH", udp[:8])
    if dport != 4789:
        return None
    vx = udp[8:16]
    return {
        "dst": mac_text(frame[0:6]), "src": mac_text(frame[6:12]),
        "ip_src": socket.inet_ntoa(ip[12:16]), "ip_dst": socket.inet_ntoa(ip[16:20]),
        "tos": ip[1], "ttl": ip[8], "df": bool(struct.unpack("!H", ip[6:8])[0] & 0x4000),
        "mf_or_offset": struct.unpack("!H", ip[6:8])[0] & 0x3fff,
        "ip_len": struct.unpack("!H", ip[2:4])[0], "frame_ip_len": len(ip),
        "ip_csum_ok": csum(bytes(ip[:ihl])) == 0,
        "sport": sport, "ulen": ulen, "udp_len": len(udp), "ucsum": ucsum,
        "vx_flags": vx[0], "vni": struct.unpack("!I", vx[4:8])[0] >> 8,
        "inner": bytes(udp[16:]),
    }


class Rig:
    def __init__(self):
        self.keel = self.vm_ns = self.sniffer = None
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self):
        self.keel = bp.LiveKeel(KEEL_CONFIG, KEEL_PORTS)
        self.keel.ask("version")  # booted, config applied: keel made ktu0 and ktv0
        # The VM: keel's VM-side TAP moved into a namespace of its own (a
        # child holding it; keel's descriptor stays attached to the device).
        self.vm_ns = subprocess.Popen(["unshare", "--net", "sleep", "3600"])
        bp.wait_until(lambda: os.readlink("/proc/%d/ns/net" % self.vm_ns.pid) != os.readlink("/proc/self/ns/net"),
                      "the VM's namespace", 10)
        bp.sh("ip", "link", "set", "ktv0", "netns", str(self.vm_ns.pid))
        self.vm("ip", "link", "set", "lo", "up")
        for k in ("all", "default", "ktv0"):  # a namespace's own sysctls: no IPv6 chatter
            self.vm("sysctl", "-q", "-w", "net.ipv6.conf.%s.disable_ipv6=1" % k)
        self.vm("ip", "addr", "add", OVERLAY_VM + "/24", "dev", "ktv0")
        self.vm("ip", "link", "set", "ktv0", "up")
        # The underlay, kernel side.
        self.sniffer = Sniffer("ktu0")
        bp.sh("ip", "addr", "add", UNDERLAY_KERNEL + "/24", "dev", "ktu0")
        bp.sh("ip", "link", "set", "ktu0", "up")
        bp.sh("ip", "link", "add", "vx0", "type", "vxlan", "id", str(VNI), "dstport", "4789",
              "remote", UNDERLAY_KEEL, "local", UNDERLAY_KERNEL, "dev", "ktu0")
        bp.sh("ip", "addr", "add", OVERLAY_KERNEL + "/24", "dev", "vx0")
        bp.sh("ip", "link", "set", "vx0", "up")
        # (ip, not /sys/class/net: sysfs still shows the namespace it was mounted in)
        self.ktu0_mac = json.loads(bp.sh("ip", "-j", "link", "show", "ktu0"))[0]["address"]
        self.vm_mac = json.loads(self.vm("ip", "-j", "link", "show", "ktv0"))[0]["address"]

    def vm(self, *args):
        return bp.sh("nsenter", "--net=/proc/%d/ns/net" % self.vm_ns.pid, *args)

    def diagnostics(self):
        out = []
        for what, f in (("keel show", lambda: self.keel.ask("show")),
                        ("keel neigh-show", lambda: self.keel.ask("neigh-show")),
                        ("keel route-show", lambda: self.keel.ask("route-show")),
                        ("keel tnl-ports-show", lambda: self.keel.ask("tnl-ports-show")),
                        ("keel flow-dump", lambda: self.keel.ask("flow-dump")),
                        ("keel show ports", lambda: self.keel.ask("show ports")),
                        ("keel show drops", lambda: self.keel.ask("show drops")),
                        ("kernel ip neigh", lambda: bp.sh("ip", "neigh")),
                        ("kernel ip -s link vx0", lambda: bp.sh("ip", "-s", "-d", "link", "show", "vx0")),
                        ("kernel bridge fdb vx0", lambda: bp.sh("bridge", "fdb", "show", "dev", "vx0", check=False)),
                        ("VM ip neigh", lambda: self.vm("ip", "neigh")),
                        ("VM ip -s link", lambda: self.vm("ip", "-s", "link", "show", "ktv0"))):
            try:
                out.append("--- %s ---\n%s" % (what, f()))
            except Exception as e:  # noqa: BLE001 (diagnostics only)
                out.append("--- %s: %s" % (what, e))
        if self.sniffer:
            out.append("--- frames keel sent on ktu0: %d" % len(self.sniffer.snapshot()))
            for fr in self.sniffer.snapshot()[:8]:
                out.append("  " + fr[:80].hex())
        if self.keel:
            out.append("--- keel stderr ---\n" + self.keel.stderr())
        return "\n".join(out)

    def stop(self):
        if self.sniffer:
            self.sniffer.stop()
        if self.keel:
            self.keel.stop()
        if self.vm_ns:
            self.vm_ns.kill()
            self.vm_ns.wait()


RIG = None


def first_ping_answered(dst, ns_pid=None):
    """The first pings wait for ARP on both sides of both layers: try until
    one is answered."""
    bp.wait_until(lambda: ping(dst, 1, ns_pid)[1] == 1, "a first ping to %s answered" % dst, TIMEOUT)


def test_kernel_to_vm():
    """The kernel's VXLAN -> keel's tnl_pop -> br-int -> the VM; the VM's
    reply -> keel's tnl_push -> the kernel's vxlan device."""
    first_ping_answered(OVERLAY_VM)
    vx_before, vm_before = link_stats("vx0"), link_stats("ktv0", RIG.vm_ns.pid)
    sent, got = ping(OVERLAY_VM, 5)
    vx_after, vm_after = link_stats("vx0"), link_stats("ktv0", RIG.vm_ns.pid)
    check(sent == 5 and got == 5, "ping %s from the kernel's overlay address: %d of %d answered" %
          (OVERLAY_VM, got, sent))
    # The VM received the echo requests keel decapsulated (and more, ARP
    # may come), the kernel's vxlan device the replies keel encapsulated.
    check(vm_after["rx"] - vm_before["rx"] >= 5, "the VM received %d frames for 5 echo requests" %
          (vm_after["rx"] - vm_before["rx"]))
    check(vx_after["tx"] - vx_before["tx"] >= 5, "vx0 sent %d frames for 5 echo requests" %
          (vx_after["tx"] - vx_before["tx"]))
    check(vx_after["rx"] - vx_before["rx"] >= 5, "vx0 received (decapsulated) %d frames for 5 echo replies" %
          (vx_after["rx"] - vx_before["rx"]))


def test_vm_to_kernel():
    """The other way: the VM's echo requests are encapsulated by keel first."""
    first_ping_answered(OVERLAY_KERNEL, RIG.vm_ns.pid)
    vx_before = link_stats("vx0")
    sent, got = ping(OVERLAY_KERNEL, 5, RIG.vm_ns.pid)
    vx_after = link_stats("vx0")
    check(sent == 5 and got == 5, "ping %s from the VM: %d of %d answered" % (OVERLAY_KERNEL, got, sent))
    check(vx_after["rx"] - vx_before["rx"] >= 5, "vx0 received (decapsulated) %d frames for 5 echo requests" %
          (vx_after["rx"] - vx_before["rx"]))


def test_kernel_saw_no_bad_packet():
    check(udp_csum_errors() == 0, "the kernel counted %d UDP checksum errors (Udp InCsumErrors)" %
          udp_csum_errors())
    st = link_stats("vx0")
    check(st["rx_errors"] == 0 and st["rx_dropped"] == 0, "vx0 counted rx errors/drops: %s" % st)


def test_keel_encapsulation_fields():
    """The outer headers of every VXLAN frame keel sent, read on the
    kernel's side of the wire."""
    vx = [v for v in (parse_vxlan(f) for f in RIG.sniffer.snapshot()) if v]
    check(len(vx) >= 10, "captured %d VXLAN frames from keel on ktu0, want >= 10 (the echo replies and requests)" %
          len(vx))
    sports = set()
    for v in vx:
        what = "keel's VXLAN frame %s" % {k: v[k] for k in v if k != "inner"}
        check(v["dst"] == RIG.ktu0_mac and v["src"] == BR_PHY_MAC, what + ": MACs")
        check(v["ip_src"] == UNDERLAY_KEEL and v["ip_dst"] == UNDERLAY_KERNEL, what + ": IP addresses")
        check(v["ip_csum_ok"], what + ": outer IPv4 header checksum wrong")
        check(v["ip_len"] == v["frame_ip_len"], what + ": IPv4 total length")
        check(v["df"] and v["mf_or_offset"] == 0, what + ": DF (df_default=true), no fragment")
        check(v["ttl"] == 64 and v["tos"] == 0, what + ": TTL 64, ToS 0")
        check(32768 <= v["sport"] < 61000, what + ": UDP source port outside 32768..60999")
        check(v["ulen"] == v["udp_len"], what + ": UDP length")
        check(v["ucsum"] == 0, what + ": UDP checksum not 0 (csum is off by default over IPv4)")
        check(v["vx_flags"] == 0x08 and v["vni"] == VNI, what + ": VXLAN I flag / VNI")
        sports.add(v["sport"])
    inner_icmp = [v["inner"] for v in vx if v["inner"][12:14] == b"\x08\x00" and v["inner"][14 + 9] == 1]
    check(any(i[14 + 20] == 0 for i in inner_icmp), "no ICMP echo reply inside keel's VXLAN frames")
    check(any(i[14 + 20] == 8 for i in inner_icmp), "no ICMP echo request inside keel's VXLAN frames")
    check(all(mac_text(i[6:12]) == RIG.vm_mac for i in inner_icmp), "inner source MAC is not the VM's")


def test_arp_answered_and_learned():
    # The kernel asked for 192.168.50.2 on ktu0; keel's answer is its entry.
    neigh = bp.sh("ip", "neigh", "show", UNDERLAY_KEEL, "dev", "ktu0")
    check(("lladdr %s" % BR_PHY_MAC) in neigh and "FAILED" not in neigh and "INCOMPLETE" not in neigh,
          "the kernel's neighbour entry for keel's underlay address: %r (want lladdr %s)" % (neigh, BR_PHY_MAC))
    # keel asked for 192.168.50.1 before its first encapsulation and learned
    # the kernel's answer (nothing was set by hand).
    shown = RIG.keel.ask("neigh-show")
    check(re.search(r"^%s\s+%s\s+br-phy\s*$" % (re.escape(UNDERLAY_KERNEL), re.escape(RIG.ktu0_mac)), shown, re.M),
          "keel's neigh-show has no entry %s %s br-phy:\n%s" % (UNDERLAY_KERNEL, RIG.ktu0_mac, shown))


def test_tunnel_state():
    ports = RIG.keel.ask("tnl-ports-show")
    check(re.search(r"^vxlan_sys_4789 \(\d+\) ref_cnt=1$", ports, re.M),
          "tnl-ports-show has no vxlan_sys_4789 with one reference:\n" + ports)
    flows = RIG.keel.ask("flow-dump")
    check("tnl_pop(" in flows, "flow-dump has no tnl_pop flow:\n" + flows)
    push = [l for l in flows.splitlines() if "tnl_push(" in l]
    check(push, "flow-dump has no tnl_push flow:\n" + flows)
    hdr = ("header(size=50,type=4,eth(dst=%s,src=%s,dl_type=0x0800),ipv4(src=%s,dst=%s,proto=17,tos=0,ttl=64,"
           "frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x%x))"
           % (RIG.ktu0_mac, BR_PHY_MAC, UNDERLAY_KEEL, UNDERLAY_KERNEL, VNI))
    for l in push:
        check(hdr in l, "a tnl_push flow without the expected header %s:\n%s" % (hdr, l))
        check("recirc(" not in l, "a tnl_push flow recirculates (combined translation expected):\n" + l)


def run():
    global RIG
    private_netns()
    RIG = Rig()
    try:
        tests = [test_kernel_to_vm, test_vm_to_kernel, test_kernel_saw_no_bad_packet,
                 test_keel_encapsulation_fields, test_arp_answered_and_learned, test_tunnel_state]
        failed = 0
        for t in tests:
            try:
                t()
                print("PASS", t.__name__)
            except Failure as e:
                failed += 1
                print("FAIL", t.__name__, e)
        if failed:
            print(RIG.diagnostics())
        print("%d passed, %d failed" % (len(tests) - failed, failed))
    finally:
        RIG.stop()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    run()

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
    kernel's ARP reply (`neigh-show`); the same for IPv6 (NS/NA);
  * the same over an IPv6 underlay (fd00:50::/64 on the same wire, a second
    kernel vxlan device, VNI 456, keel's br-int6): pings both ways, keel's
    UDP checksum (always computed over IPv6) verified by the kernel and on
    the wire, keel's neighbour solicitation answered and the kernel's
    answered by keel;
  * a VM frame of the full 1500 bytes, which cannot be encapsulated within
    the uplink's MTU, is dropped, not fragmented (RFC 7348): unanswered,
    nothing longer than the MTU on the wire; smaller ones still pass;
  * `tnl-ports-show` lists vxlan_sys_4789 (two references: vx0, vx6); `flow-dump` has tnl_pop and
    tnl_push flows and no recirc after a tnl_push (combined translation).

Skipped (with the reason) without root, network namespaces, TAP devices or
the kernel's vxlan module, and under an emulator.

`tnl_kernel_vxlan.py --ovs` runs the same checks with Open vSwitch 3.1 in
keel's place (plain ovs-vswitchd, netdev datapath, in a third namespace,
veths instead of TAPs, its br-phy internal port carrying the underlay
addresses; keel's commands asked as their OVS counterparts: tnl/neigh/show,
tnl/ports/show, dpctl/dump-flows): they all pass there, which is how the
test itself was checked."""
import errno
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "integration")]
from harness import EMULATOR, Failure, check, csum  # noqa: E402
import bond_peers as bp  # noqa: E402  (sh, wait_until, LiveKeel, Ovs)

NETNS_MARK = "KEEL_TNL_E2E_NETNS"
VNI = 123
UNDERLAY_KERNEL = "192.168.50.1"
UNDERLAY_KEEL = "192.168.50.2"
OVERLAY_KERNEL = "10.1.0.1"
OVERLAY_VM = "10.1.0.2"
BR_PHY_MAC = "02:00:00:00:50:02"
# The IPv6 underlay: a second kernel vxlan device over the same wire
# (vx6, VNI 456), a second overlay (br-int6, the VM's second TAP).
VNI6 = 456
UNDERLAY6_KERNEL = "fd00:50::1"
UNDERLAY6_KEEL = "fd00:50::2"
OVERLAY6_KERNEL = "10.6.0.1"
OVERLAY6_VM = "10.6.0.2"
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
ip-add br-phy %s/64
add-br br-int6
add-port br-int6 vm6
add-port br-int6 vx6 type=vxlan options:remote_ip=%s options:key=%d
add-flow br-int6 actions=NORMAL
""" % (BR_PHY_MAC, UNDERLAY_KEEL, UNDERLAY_KERNEL, VNI, UNDERLAY6_KEEL, UNDERLAY6_KERNEL, VNI6)
KEEL_PORTS = ["uplink=tap:ktu0", "vm=tap:ktv0", "vm6=tap:ktv6"]


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
    """The kernel's UDP checksum errors, IPv4 (Udp InCsumErrors) + IPv6
    (Udp6InCsumErrors), of this namespace."""
    lines = [l.split() for l in open("/proc/net/snmp") if l.startswith("Udp:")]
    n = int(lines[1][lines[0].index("InCsumErrors")])
    for l in open("/proc/net/snmp6"):
        k, v = l.split()
        if k == "Udp6InCsumErrors":
            n += int(v)
    return n


def ping(dst, count, ns_pid=None, size=None):
    """Runs ping; returns (transmitted, received). size: the ICMP payload,
    sent with DF (-M do)."""
    cmd = ["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "2", dst]
    if size is not None:
        cmd[1:1] = ["-s", str(size), "-M", "do"]
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
            except OSError as e:
                if e.errno == errno.ENETDOWN:  # once, when bound while the device was down
                    continue
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
    """The outer headers of an Ethernet/IPv4|IPv6/UDP/VXLAN frame as a dict,
    or None when the frame is not UDP to 4789."""
    if len(frame) < 14 + 40 + 16:
        return None
    et = frame[12:14]
    ip = frame[14:]
    if et == b"\x08\x00" and ip[0] >> 4 == 4 and ip[9] == 17:
        ihl = (ip[0] & 0xf) * 4
        frag = struct.unpack("!H", ip[6:8])[0]
        v = {"family": 4, "ip_src": socket.inet_ntoa(ip[12:16]), "ip_dst": socket.inet_ntoa(ip[16:20]),
             "tos": ip[1], "ttl": ip[8], "df": bool(frag & 0x4000), "mf_or_offset": frag & 0x3fff,
             "ip_len_ok": struct.unpack("!H", ip[2:4])[0] == len(ip), "ip_csum_ok": csum(bytes(ip[:ihl])) == 0}
        pseudo = ip[12:20] + struct.pack("!BB", 0, 17)
        udp = ip[ihl:]
    elif et == b"\x86\xdd" and ip[0] >> 4 == 6 and ip[6] == 17:
        vtf = struct.unpack("!I", ip[0:4])[0]
        v = {"family": 6, "ip_src": socket.inet_ntop(socket.AF_INET6, ip[8:24]),
             "ip_dst": socket.inet_ntop(socket.AF_INET6, ip[24:40]), "tos": (vtf >> 20) & 0xff,
             "label": vtf & 0xfffff, "ttl": ip[7], "ip_len_ok": struct.unpack("!H", ip[4:6])[0] == len(ip) - 40}
        pseudo = ip[8:40] + struct.pack("!BB", 0, 17)
        udp = ip[40:]
    else:
        return None
    sport, dport, ulen, ucsum = struct.unpack("!HHHH", udp[:8])
    if dport != 4789:
        return None
    vx = udp[8:16]
    v.update({
        "dst": mac_text(frame[0:6]), "src": mac_text(frame[6:12]),
        "sport": sport, "ulen_ok": ulen == len(udp), "ucsum": ucsum,
        # A UDP checksum that verifies: the sum over pseudo-header and
        # datagram (the checksum included) is 0xffff, i.e. csum() is 0.
        "ucsum_ok": ucsum != 0 and csum(bytes(pseudo) + struct.pack("!H", len(udp)) + bytes(udp)) == 0,
        "vx_flags": vx[0], "vni": struct.unpack("!I", vx[4:8])[0] >> 8,
        "inner": bytes(udp[16:]),
    })
    return v


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
        self.keel.ask("version")  # booted, config applied: keel made ktu0, ktv0 and ktv6
        self._kernel_side()

    def _kernel_side(self):
        """Everything but the VTEP under test: the VM's namespace (keel's
        VM-side TAPs moved there), the kernel's addresses and vxlan devices."""
        # The VM: keel's VM-side TAP moved into a namespace of its own (a
        # child holding it; keel's descriptor stays attached to the device).
        if not self.vm_ns:
            self.vm_ns = subprocess.Popen(["unshare", "--net", "sleep", "3600"])
        bp.wait_until(lambda: os.readlink("/proc/%d/ns/net" % self.vm_ns.pid) != os.readlink("/proc/self/ns/net"),
                      "the VM's namespace", 10)
        bp.sh("ip", "link", "set", "ktv0", "netns", str(self.vm_ns.pid))
        self.vm("ip", "link", "set", "lo", "up")
        for k in ("all", "default", "ktv0"):  # a namespace's own sysctls: no IPv6 chatter
            self.vm("sysctl", "-q", "-w", "net.ipv6.conf.%s.disable_ipv6=1" % k)
        self.vm("ip", "addr", "add", OVERLAY_VM + "/24", "dev", "ktv0")
        self.vm("ip", "link", "set", "ktv0", "up")
        bp.sh("ip", "link", "set", "ktv6", "netns", str(self.vm_ns.pid))
        self.vm("sysctl", "-q", "-w", "net.ipv6.conf.ktv6.disable_ipv6=1")
        self.vm("ip", "addr", "add", OVERLAY6_VM + "/24", "dev", "ktv6")
        self.vm("ip", "link", "set", "ktv6", "up")
        # The underlay, kernel side.
        self.sniffer = Sniffer("ktu0")
        bp.sh("ip", "addr", "add", UNDERLAY_KERNEL + "/24", "dev", "ktu0")
        bp.sh("ip", "link", "set", "ktu0", "up")
        bp.sh("ip", "link", "add", "vx0", "type", "vxlan", "id", str(VNI), "dstport", "4789",
              "remote", UNDERLAY_KEEL, "local", UNDERLAY_KERNEL, "dev", "ktu0")
        bp.sh("ip", "addr", "add", OVERLAY_KERNEL + "/24", "dev", "vx0")
        bp.sh("ip", "link", "set", "vx0", "up")
        # IPv6 on the wire only (ktu0): the kernel asks keel by neighbour
        # solicitation, keel asks it the same way.
        bp.sh("sysctl", "-q", "-w", "net.ipv6.conf.ktu0.disable_ipv6=0")
        bp.sh("ip", "-6", "addr", "add", UNDERLAY6_KERNEL + "/64", "dev", "ktu0", "nodad")
        bp.sh("ip", "link", "add", "vx6", "type", "vxlan", "id", str(VNI6), "dstport", "4789",
              "remote", UNDERLAY6_KEEL, "local", UNDERLAY6_KERNEL, "dev", "ktu0")
        bp.sh("sysctl", "-q", "-w", "net.ipv6.conf.vx6.disable_ipv6=1")
        bp.sh("ip", "addr", "add", OVERLAY6_KERNEL + "/24", "dev", "vx6")
        bp.sh("ip", "link", "set", "vx6", "up")
        # (ip, not /sys/class/net: sysfs still shows the namespace it was mounted in)
        self.ktu0_mac = json.loads(bp.sh("ip", "-j", "link", "show", "ktu0"))[0]["address"]
        self.vm_mac = json.loads(self.vm("ip", "-j", "link", "show", "ktv0"))[0]["address"]
        self.vm6_mac = json.loads(self.vm("ip", "-j", "link", "show", "ktv6"))[0]["address"]

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
                        ("kernel ip neigh", lambda: bp.sh("ip", "neigh")),
                        ("kernel ip -s link vx0", lambda: bp.sh("ip", "-s", "-d", "link", "show", "vx0")),
                        ("kernel ip -s link vx6", lambda: bp.sh("ip", "-s", "-d", "link", "show", "vx6")),
                        ("kernel ip -6 neigh", lambda: bp.sh("ip", "-6", "neigh")),
                        ("kernel bridge fdb vx0", lambda: bp.sh("bridge", "fdb", "show", "dev", "vx0", check=False)),
                        ("VM ip neigh", lambda: self.vm("ip", "neigh")),
                        ("VM ip -s link", lambda: self.vm("ip", "-s", "link"))):
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

# Per underlay: (kernel vxlan device, VM TAP, kernel overlay address, VM
# overlay address, VNI, kernel underlay address, keel underlay address).
UNDERLAYS = {
    4: ("vx0", "ktv0", OVERLAY_KERNEL, OVERLAY_VM, VNI, UNDERLAY_KERNEL, UNDERLAY_KEEL),
    6: ("vx6", "ktv6", OVERLAY6_KERNEL, OVERLAY6_VM, VNI6, UNDERLAY6_KERNEL, UNDERLAY6_KEEL),
}


def first_ping_answered(dst, ns_pid=None):
    """The first pings wait for ARP/ND on both sides of both layers: try
    until one is answered."""
    bp.wait_until(lambda: ping(dst, 1, ns_pid)[1] == 1, "a first ping to %s answered" % dst, TIMEOUT)


def kernel_to_vm(family):
    """The kernel's VXLAN -> keel's tnl_pop -> the overlay bridge -> the VM;
    the VM's reply -> keel's tnl_push -> the kernel's vxlan device."""
    vx, tap, k_ip, vm_ip = UNDERLAYS[family][:4]
    first_ping_answered(vm_ip)
    vx_before, vm_before = link_stats(vx), link_stats(tap, RIG.vm_ns.pid)
    sent, got = ping(vm_ip, 5)
    vx_after, vm_after = link_stats(vx), link_stats(tap, RIG.vm_ns.pid)
    check(sent == 5 and got == 5, "ping %s from the kernel's overlay address %s (IPv%d underlay): %d of %d answered"
          % (vm_ip, k_ip, family, got, sent))
    # The VM received the echo requests keel decapsulated (and more, ARP
    # may come), the kernel's vxlan device the replies keel encapsulated.
    check(vm_after["rx"] - vm_before["rx"] >= 5, "the VM received %d frames for 5 echo requests" %
          (vm_after["rx"] - vm_before["rx"]))
    check(vx_after["tx"] - vx_before["tx"] >= 5, "%s sent %d frames for 5 echo requests" %
          (vx, vx_after["tx"] - vx_before["tx"]))
    check(vx_after["rx"] - vx_before["rx"] >= 5, "%s received (decapsulated) %d frames for 5 echo replies" %
          (vx, vx_after["rx"] - vx_before["rx"]))


def vm_to_kernel(family):
    """The other way: the VM's echo requests are encapsulated by keel first."""
    vx, tap, k_ip, vm_ip = UNDERLAYS[family][:4]
    first_ping_answered(k_ip, RIG.vm_ns.pid)
    vx_before = link_stats(vx)
    sent, got = ping(k_ip, 5, RIG.vm_ns.pid)
    vx_after = link_stats(vx)
    check(sent == 5 and got == 5, "ping %s from the VM (IPv%d underlay): %d of %d answered" %
          (k_ip, family, got, sent))
    check(vx_after["rx"] - vx_before["rx"] >= 5, "%s received (decapsulated) %d frames for 5 echo requests" %
          (vx, vx_after["rx"] - vx_before["rx"]))


def test_kernel_to_vm():
    kernel_to_vm(4)


def test_vm_to_kernel():
    vm_to_kernel(4)


def test_kernel_to_vm_ipv6_underlay():
    kernel_to_vm(6)


def test_vm_to_kernel_ipv6_underlay():
    vm_to_kernel(6)


def test_kernel_saw_no_bad_packet():
    check(udp_csum_errors() == 0, "the kernel counted %d UDP checksum errors (Udp InCsumErrors + Udp6InCsumErrors)"
          % udp_csum_errors())
    for vx in ("vx0", "vx6"):
        st = link_stats(vx)
        check(st["rx_errors"] == 0 and st["rx_dropped"] == 0, "%s counted rx errors/drops: %s" % (vx, st))


def keel_vxlan_frames(family):
    return [v for v in (parse_vxlan(f) for f in RIG.sniffer.snapshot()) if v and v["family"] == family]


def encapsulation_fields(family):
    """The outer headers of every VXLAN frame keel sent, read on the
    kernel's side of the wire."""
    vx, tap, k_ip, vm_ip, vni, k_under, keel_under = UNDERLAYS[family]
    vm_mac = RIG.vm_mac if family == 4 else RIG.vm6_mac
    frames = keel_vxlan_frames(family)
    check(len(frames) >= 10, "captured %d IPv%d VXLAN frames from keel on ktu0, want >= 10 (the echo replies and "
          "requests)" % (len(frames), family))
    for v in frames:
        what = "keel's VXLAN frame %s" % {k: v[k] for k in v if k != "inner"}
        check(v["dst"] == RIG.ktu0_mac and v["src"] == BR_PHY_MAC, what + ": MACs")
        check(v["ip_src"] == keel_under and v["ip_dst"] == k_under, what + ": IP addresses")
        check(v["ip_len_ok"], what + ": IP length")
        check(v["ttl"] == 64 and v["tos"] == 0, what + ": TTL/hop limit 64, ToS/traffic class 0")
        if family == 4:
            check(v["ip_csum_ok"], what + ": outer IPv4 header checksum wrong")
            check(v["df"] and v["mf_or_offset"] == 0, what + ": DF (df_default=true), no fragment")
            check(v["ucsum"] == 0, what + ": UDP checksum not 0 (csum is off by default over IPv4)")
        else:
            check(v["label"] == 0, what + ": flow label 0")
            check(v["ucsum_ok"], what + ": UDP checksum missing or wrong (always computed over IPv6)")
        check(32768 <= v["sport"] < 61000, what + ": UDP source port outside 32768..60999")
        check(v["ulen_ok"], what + ": UDP length")
        check(v["vx_flags"] == 0x08 and v["vni"] == vni, what + ": VXLAN I flag / VNI")
    inner_icmp = [v["inner"] for v in frames if v["inner"][12:14] == b"\x08\x00" and v["inner"][14 + 9] == 1]
    check(any(i[14 + 20] == 0 for i in inner_icmp), "no ICMP echo reply inside keel's VXLAN frames")
    check(any(i[14 + 20] == 8 for i in inner_icmp), "no ICMP echo request inside keel's VXLAN frames")
    check(all(mac_text(i[6:12]) == vm_mac for i in inner_icmp), "inner source MAC is not the VM's")


def test_keel_encapsulation_fields():
    encapsulation_fields(4)


def test_keel_encapsulation_fields_ipv6_underlay():
    encapsulation_fields(6)


def test_arp_nd_answered_and_learned():
    # The kernel asked for keel's underlay addresses on ktu0 (ARP, NS);
    # keel's answers are its entries.
    for fam, addr in ((4, UNDERLAY_KEEL), (6, UNDERLAY6_KEEL)):
        neigh = bp.sh("ip", "-%d" % fam, "neigh", "show", addr, "dev", "ktu0")
        check(("lladdr %s" % BR_PHY_MAC) in neigh and "FAILED" not in neigh and "INCOMPLETE" not in neigh,
              "the kernel's neighbour entry for keel's underlay address %s: %r (want lladdr %s)" %
              (addr, neigh, BR_PHY_MAC))
    # keel asked for the kernel's addresses before its first encapsulation
    # and learned the answers (nothing was set by hand).
    shown = RIG.keel.ask("neigh-show")
    for addr in (UNDERLAY_KERNEL, UNDERLAY6_KERNEL):
        check(re.search(r"^%s\s+%s\s+br-phy\s*$" % (re.escape(addr), re.escape(RIG.ktu0_mac)), shown, re.M),
              "keel's neigh-show has no entry %s %s br-phy:\n%s" % (addr, RIG.ktu0_mac, shown))


def test_too_big_dropped_not_fragmented():
    """A VM frame of the full 1500-byte MTU cannot be encapsulated within
    the uplink's 1500 (50 bytes more): keel drops it rather than fragment
    (RFC 7348 4.3): the ping goes unanswered and nothing larger than the
    uplink's MTU, nor an IP fragment, reaches the kernel."""
    before = len(RIG.sniffer.snapshot())
    sent, got = ping(OVERLAY_KERNEL, 3, RIG.vm_ns.pid, size=1472)
    check(got == 0, "a 1500-byte packet was answered through a 1500-byte underlay: %d of %d" % (got, sent))
    # Still forwarding what fits.
    sent, got = ping(OVERLAY_KERNEL, 2, RIG.vm_ns.pid, size=1400)
    check(got == 2, "1428-byte pings (1478 + 50 fits) answered: %d of %d" % (got, sent))
    frames = RIG.sniffer.snapshot()[before:]
    big = [len(f) for f in frames if len(f) > 1514]
    check(not big, "keel sent frames longer than the uplink's MTU allows: %s" % big)
    frags = [v for v in (parse_vxlan(f) for f in frames) if v and v["family"] == 4 and v["mf_or_offset"]]
    check(not frags, "keel fragmented: %s" % frags)


def test_tunnel_state():
    ports = RIG.keel.ask("tnl-ports-show")
    # vx0 and vx6: two tunnel ports of one type and UDP port, one vport.
    check(re.search(r"^vxlan_sys_4789 \(\d+\) ref_cnt=2$", ports, re.M),
          "tnl-ports-show has no vxlan_sys_4789 with two references (vx0, vx6):\n" + ports)
    flows = RIG.keel.ask("flow-dump")
    check("tnl_pop(" in flows, "flow-dump has no tnl_pop flow:\n" + flows)
    push = [l for l in flows.splitlines() if "tnl_push(" in l]
    check(push, "flow-dump has no tnl_push flow:\n" + flows)
    hdr4 = ("header(size=50,type=4,eth(dst=%s,src=%s,dl_type=0x0800),ipv4(src=%s,dst=%s,proto=17,tos=0,ttl=64,"
            "frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x%x))"
            % (RIG.ktu0_mac, BR_PHY_MAC, UNDERLAY_KEEL, UNDERLAY_KERNEL, VNI))
    hdr6 = ("header(size=70,type=4,eth(dst=%s,src=%s,dl_type=0x86dd),ipv6(src=%s,dst=%s,label=0,proto=17,"
            "tclass=0x0,hlimit=64),udp(src=0,dst=4789,csum=0xffff),vxlan(flags=0x8000000,vni=0x%x))"
            % (RIG.ktu0_mac, BR_PHY_MAC, UNDERLAY6_KEEL, UNDERLAY6_KERNEL, VNI6))
    for l in push:
        check(hdr4 in l or hdr6 in l, "a tnl_push flow without the expected header\n  %s\nor\n  %s:\n%s" %
              (hdr4, hdr6, l))
        check("recirc(" not in l, "a tnl_push flow recirculates (combined translation expected):\n" + l)
    check(any(hdr6 in l for l in push), "no tnl_push flow over the IPv6 underlay:\n" + flows)


# --- Open vSwitch in keel's place (--ovs: checks the test) --------------------

def tx_checksum_off(dev):
    """ethtool -K DEV tx off, by ioctl (no ethtool here): a veth's kernel side
    hands AF_PACKET readers (ovs-vswitchd) UDP checksums still to be filled
    in (CHECKSUM_PARTIAL), which Open vSwitch's tnl_pop refuses. keel's TAP
    gets them complete (a TAP without IFF_VNET_HDR resolves them)."""
    import ctypes
    import fcntl
    ev = ctypes.create_string_buffer(struct.pack("II", 0x17, 0))  # ETHTOOL_STXCSUM, 0
    ifr = struct.pack("16sP", dev.encode(), ctypes.addressof(ev)) + b"\0" * 16
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, 0x8946, ifr)  # SIOCETHTOOL


class OvsInKeelsPlace:
    """ovs-vswitchd in the namespace of process `pid`, asked keel's commands."""

    COMMANDS = {"neigh-show": ["tnl/neigh/show"], "tnl-ports-show": ["tnl/ports/show"],
                "flow-dump": ["dpctl/dump-flows"], "route-show": ["ovs/route/show"]}

    def __init__(self, pid):
        self.nsenter = ["nsenter", "--net=/proc/%d/ns/net" % pid]
        # bond_peers.Ovs's commands and stop(), its daemons started in that
        # namespace (they stay there; the control sockets are files).
        self.ovs = bp.Ovs.__new__(bp.Ovs)
        d = self.ovs.dir = tempfile.mkdtemp(prefix="keel-ovs-tnl-e2e-")
        self.ovs.env = dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d,
                            OVS_PKGDATADIR="/usr/share/openvswitch")
        self.ovs.db = "unix:%s/db.sock" % d
        self.ovs.ctl = None
        ns = self.nsenter
        bp.sh(*ns, "ovsdb-tool", "create", d + "/conf.db", bp.SCHEMA, env=self.ovs.env)
        bp.sh(*ns, bp.OVSDB, d + "/conf.db", "--remote=punix:%s/db.sock" % d, "--pidfile=%s/ovsdb.pid" % d,
              "--detach", "--log-file=%s/ovsdb.log" % d, env=self.ovs.env)
        bp.sh(*ns, bp.VSWITCHD, self.ovs.db, "--enable-dummy", "--disable-system", "--pidfile=%s/vsw.pid" % d,
              "--detach", "--log-file=%s/vsw.log" % d, env=self.ovs.env)
        self.ovs.ctl = "%s/ovs-vswitchd.%s.ctl" % (d, open(d + "/vsw.pid").read().strip())

    def ask(self, cmd):
        args = self.COMMANDS.get(cmd.split()[0])
        if args is None:
            return self.ovs.vsctl("show")
        return self.ovs.appctl(*args)

    def stderr(self):
        return self.ovs.log()

    def stop(self):
        self.ovs.stop()


class OvsRig(Rig):
    """Rig with Open vSwitch as the VTEP: veth pairs ktu0-ou0, ktv0-ov0,
    ktv6-ov6 (ou0/ov0/ov6 in Open vSwitch's namespace), its bridges as
    keel's config, br-phy's internal port holding the underlay addresses."""

    def _start(self):
        self.ovs_ns = subprocess.Popen(["unshare", "--net", "sleep", "3600"])
        self.vm_ns = subprocess.Popen(["unshare", "--net", "sleep", "3600"])
        me = os.readlink("/proc/self/ns/net")
        bp.wait_until(lambda: all(os.readlink("/proc/%d/ns/net" % p.pid) != me for p in (self.ovs_ns, self.vm_ns)),
                      "the namespaces", 10)
        ovs_pid = str(self.ovs_ns.pid)
        ns = ["nsenter", "--net=/proc/%s/ns/net" % ovs_pid]
        bp.sh(*ns, "ip", "link", "set", "lo", "up")
        for k, o in (("ktu0", "ou0"), ("ktv0", "ov0"), ("ktv6", "ov6")):
            bp.sh("ip", "link", "add", k, "type", "veth", "peer", "name", o)
            bp.sh("ip", "link", "set", o, "netns", ovs_pid)
            bp.sh(*ns, "ip", "link", "set", o, "up")
        self.keel = OvsInKeelsPlace(self.ovs_ns.pid)
        vx = []
        for br, vm, tun, remote, key in (("br-int", "ov0", "vx0", UNDERLAY_KERNEL, VNI),
                                         ("br-int6", "ov6", "vx6", UNDERLAY6_KERNEL, VNI6)):
            vx += ["--", "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
                   "--", "add-port", br, vm, "--", "add-port", br, tun, "--", "set", "interface", tun, "type=vxlan",
                   "options:remote_ip=" + remote, "options:key=%d" % key]
        self.keel.ovs.vsctl("add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev",
                            "other_config:hwaddr=" + BR_PHY_MAC, "--", "add-port", "br-phy", "ou0", *vx)
        bp.sh(*ns, "ip", "addr", "add", UNDERLAY_KEEL + "/24", "dev", "br-phy")
        bp.sh(*ns, "ip", "-6", "addr", "add", UNDERLAY6_KEEL + "/64", "dev", "br-phy", "nodad")
        bp.sh(*ns, "ip", "link", "set", "br-phy", "up")
        tx_checksum_off("ktu0")
        self._kernel_side()

    def stop(self):
        super().stop()
        if getattr(self, "ovs_ns", None):
            self.ovs_ns.kill()
            self.ovs_ns.wait()


def run():
    global RIG
    private_netns()
    if "--ovs" in sys.argv[1:] and bp.ovs_missing():
        print("SKIP tnl_kernel_vxlan --ovs: " + bp.ovs_missing())
        sys.exit(0)
    try:
        RIG = OvsRig() if "--ovs" in sys.argv[1:] else Rig()
    except Failure as e:
        print("FAIL setup", e)
        print("0 passed, 1 failed")
        sys.exit(1)
    try:
        tests = [test_kernel_to_vm, test_vm_to_kernel, test_kernel_to_vm_ipv6_underlay,
                 test_vm_to_kernel_ipv6_underlay, test_kernel_saw_no_bad_packet, test_keel_encapsulation_fields,
                 test_keel_encapsulation_fields_ipv6_underlay, test_arp_nd_answered_and_learned,
                 test_too_big_dropped_not_fragmented, test_tunnel_state]
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

"""keel's tunnel output read by decoders nobody here wrote (issue 15):
tshark (Wireshark's dissectors, `tshark -V` with IP and UDP checksum
validation on) and scapy's dissector, for every encapsulation this host's
kernel cannot terminate (GENEVE, GRE) and for VXLAN over both underlays.

host-sim, offline: br-phy owns 192.168.50.2/24 and fd00::2/64 (its uplink
`up` a pcap port whose input holds, first, an ARP reply / a neighbour
advertisement from every remote: the neighbours are learned, not set);
br-int has the VM-side port `vm` and one tunnel port per case, a rule per
case sending the VM's UDP frames to port 2000+i out of tunnel i:

  vx4   vxlan  192.168.50.11 key=123             UDP checksum 0
  vx4c  vxlan  192.168.50.12 key=123 csum=true   UDP checksum computed
  gnv   geneve 192.168.50.13 key=123 + option {class=0xffff,type=0x80,len=4}=0xa
  gre   gre    192.168.50.14 key=456
  grec  gre    192.168.50.15 key=456 csum=true   GRE checksum (C bit)
  vx6   vxlan  fd00::11      key=123             over IPv6: UDP checksum always
  gnv6  geneve fd00::13      key=123 + the option, over IPv6

Asserted, for each case's frame on the uplink:
  * tshark decodes the expected protocol stack down to the inner frame
    (eth:ethertype:ip|ipv6:udp:vxlan|geneve / gre :eth:ethertype:ip:udp)
    with the tunnel's fields (VNI, GRE key, the GENEVE option's class, type
    and data) and reports no malformed packet, no expert error and no bad
    checksum; every checksum present is "[correct]"/Good;
  * scapy dissects the same, the inner frame byte for byte the VM's, and
    every checksum equals the one scapy computes (UDP's 0 where csum is off
    over IPv4);
  * the other way, each remote's packet as scapy encapsulates it (UDP
    checksums computed as Linux sends them, the GENEVE option with the
    critical bit, a GRE checksum for grec) reaches the VM decapsulated, in
    order, the GENEVE ones through a rule matching tun_metadata0=0xa;
  * the checker can fail: a frame whose GENEVE option length runs past
    the packet and one with a wrong UDP checksum are flagged by it;
  * when ovs-vswitchd 3.1 is installed: Open vSwitch, same topology, same
    packets, sends the same frames (UDP source port aside) on the uplink
    and to the VM."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tnl_peers  # noqa: E402

if __name__ == "__main__":
    tnl_peers.need_scapy("test_tnl_decoders")

from scapy.all import ARP, GRE, IP, UDP, Ether, IPv6, Raw  # noqa: E402
from scapy.layers.inet6 import ICMPv6ND_NA, ICMPv6NDOptDstLLAddr  # noqa: E402
from scapy.layers.vxlan import VXLAN  # noqa: E402
from scapy.contrib.geneve import GENEVE  # noqa: E402

from harness import check, main, write_pcap  # noqa: E402

BR_MAC = "02:00:00:00:50:02"
VM_MAC, RVM_MAC = "02:00:00:0a:00:01", "02:00:00:0b:00:01"
LOCAL4, LOCAL6 = "192.168.50.2", "fd00::2"
SEC = 1000000

# name, type, remote, extra options, GENEVE option set by the rule
CASES = [
    ("vx4", "vxlan", "192.168.50.11", "options:key=123", False),
    ("vx4c", "vxlan", "192.168.50.12", "options:key=123 options:csum=true", False),
    ("gnv", "geneve", "192.168.50.13", "options:key=123", True),
    ("gre", "gre", "192.168.50.14", "options:key=456", False),
    ("grec", "gre", "192.168.50.15", "options:key=456 options:csum=true", False),
    ("vx6", "vxlan", "fd00::11", "options:key=123", False),
    ("gnv6", "geneve", "fd00::13", "options:key=123", True),
]
TLV = "{class=0xffff,type=0x80,len=4}->tun_metadata0"


def remote_mac(i):
    return "02:00:00:00:51:%02x" % (i + 1)


def keel_config():
    lines = ["add-br br-phy", "set bridge br-phy other_config:hwaddr=" + BR_MAC, "add-port br-phy up",
             "ip-add br-phy %s/24" % LOCAL4, "ip-add br-phy %s/64" % LOCAL6, "add-flow br-phy actions=NORMAL",
             "add-br br-int", "add-port br-int vm", "add-tlv-map br-int " + TLV]
    for name, typ, remote, opts, _ in CASES:
        lines.append("add-port br-int %s type=%s options:remote_ip=%s %s" % (name, typ, remote, opts))
    lines += rules()
    return "\n".join(lines) + "\n"


def rules():
    out = []
    for i, (name, _, _, _, opt) in enumerate(CASES):
        setf = "set_field:0xa->tun_metadata0," if opt else ""
        out.append("add-flow br-int priority=10,in_port=vm,udp,tp_dst=%d,actions=%soutput:%s" %
                   (2001 + i, setf, name))
        # Received: to the VM, GENEVE only with the option's value.
        match = ",tun_metadata0=0xa" if opt else ""
        out.append("add-flow br-int priority=10,in_port=%s%s,actions=output:vm" % (name, match))
    return out


def neighbour_frame(i, remote):
    """What remote i sends first: an ARP reply / a neighbour advertisement
    to br-phy."""
    mac = remote_mac(i)
    if ":" in remote:
        return bytes(Ether(src=mac, dst=BR_MAC) / IPv6(src=remote, dst=LOCAL6) /
                     ICMPv6ND_NA(tgt=remote, R=0, S=1, O=1) / ICMPv6NDOptDstLLAddr(lladdr=mac))
    return bytes(Ether(src=mac, dst=BR_MAC) / ARP(op=2, hwsrc=mac, psrc=remote, hwdst=BR_MAC, pdst=LOCAL4))


def vm_frame(i):
    return bytes(Ether(src=VM_MAC, dst=RVM_MAC) / IP(src="10.1.0.2", dst="10.1.0.1", id=i) /
                 UDP(sport=1000 + i, dport=2001 + i) / Raw(bytes(range(48))))


def rvm_frame(i):
    """The frame remote i sends the VM through its tunnel."""
    return bytes(Ether(src=RVM_MAC, dst=VM_MAC) / IP(src="10.1.0.1", dst="10.1.0.2", id=100 + i) /
                 UDP(sport=3000 + i, dport=4000) / Raw(b"remote %d " % i * 4))


def tunnel_in(i):
    """What remote i sends keel, built by scapy: UDP checksums computed (as
    the Linux kernel sends them), the GENEVE option {0xffff,0x80,4}=0xa with
    the critical bit, a GRE checksum where the port has csum=true."""
    name, typ, remote, opts, opt = CASES[i]
    six = ":" in remote
    l3 = IPv6(src=remote, dst=LOCAL6) if six else IP(src=remote, dst=LOCAL4, flags="DF")
    eth = Ether(src=remote_mac(i), dst=BR_MAC)
    inner = Raw(rvm_frame(i))
    if typ == "vxlan":
        return bytes(eth / l3 / UDP(sport=50000 + i, dport=4789) / VXLAN(vni=123, flags=0x08) / inner)
    if typ == "geneve":
        hdr = bytes.fromhex("0240655800007b00" "ffff8001" "0000000a")
        return bytes(eth / l3 / UDP(sport=50000 + i, dport=6081) / Raw(hdr) / inner)
    g = GRE(proto=0x6558, key_present=1, key=456, chksum_present=1 if "csum=true" in opts else 0)
    return bytes(eth / l3 / g / inner)


def inputs():
    n = len(CASES)
    return {"up": [(i, neighbour_frame(i, c[2])) for i, c in enumerate(CASES)] +
            [(2 * SEC + i, tunnel_in(i)) for i in range(n)],
            "vm": [(SEC + i, vm_frame(i)) for i in range(n)]}


RUN = {}


def keel_frames():
    """{case name: the frame keel sent on the uplink for it}."""
    if "keel" not in RUN:
        proc, got = tnl_peers.keel_offline(keel_config(), {"up": inputs()["up"], "vm": inputs()["vm"]},
                                           "neigh-show\nflow-dump --names\n")
        RUN["proc"] = proc
        RUN["keel"] = by_case(got["up"], proc)
        RUN["keel_vm"] = got["vm"]
    return RUN["proc"], RUN["keel"]


def outer_dst(frame):
    p = Ether(frame)
    if IPv6 in p:
        return p[IPv6].dst
    if IP in p:
        return p[IP].dst
    return None


def by_case(frames, proc=None):
    remotes = {c[2]: c[0] for c in CASES}
    out = {}
    for f in frames:
        name = remotes.get(outer_dst(f))
        if name:
            check(name not in out, "%s: one frame on the uplink, got more" % name, proc)
            out[name] = f
    missing = [c[0] for c in CASES if c[0] not in out]
    check(not missing, "no frame on the uplink for %s (got %d frames)" % (missing, len(frames)), proc)
    return out


# --- tshark -------------------------------------------------------------------

BAD = re.compile(r"Malformed|Expert Info \(Error|Expert Info \(Warning/Malformed|Bad checksum|incorrect, should be|"
                 r"Checksum Status: Bad|\[Packet size limited|Exception occurred", re.I)


def tshark(frames):
    """tshark -V's text for each frame, checksums validated."""
    d = tempfile.mkdtemp(prefix="keel-tshark-")
    try:
        path = os.path.join(d, "f.pcap")
        write_pcap(path, frames)
        p = subprocess.run(["tshark", "-n", "-r", path, "-V", "-o", "ip.check_checksum:TRUE",
                            "-o", "udp.check_checksum:TRUE"], capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, "tshark failed (%d): %s" % (p.returncode, p.stderr))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    parts = re.split(r"^Frame \d+: ", p.stdout, flags=re.M)[1:]
    check(len(parts) == len(frames), "tshark decoded %d frames of %d" % (len(parts), len(frames)))
    return parts


def tshark_problems(text):
    return [l.strip() for l in text.splitlines() if BAD.search(l)]


def protocols(text):
    m = re.search(r"\[Protocols in frame: ([^\]]+)\]", text)
    return m.group(1) if m else ""


EXPECT_TSHARK = {
    "vxlan": [r"Virtual eXtensible Local Area Network", r"VXLAN Network Identifier \(VNI\): 123\b"],
    "geneve": [r"Generic Network Virtualization Encapsulation, VNI: 0x00007b",
               r"Class: Experimental \(0xffff\)", r"Type: 0x80 \(Critical\)", r"Length: 8 bytes",
               r"Option Data: 0000000a"],
    "gre": [r"Generic Routing Encapsulation \(Transparent Ethernet bridging\)", r"Key: 0x000001c8"],
}


def check_tshark(name, typ, remote, csum_on, text):
    what = "tshark on keel's %s frame" % name
    bad = tshark_problems(text)
    check(not bad, "%s reports: %s" % (what, bad))
    l3 = "ipv6" if ":" in remote else "ip"
    tun = {"vxlan": "udp:vxlan", "geneve": "udp:geneve", "gre": "gre"}[typ]
    want = "eth:ethertype:%s:%s:eth:ethertype:ip:udp" % (l3, tun)  # then whatever it makes of the payload
    check(protocols(text).startswith(want), "%s: protocols %r, want %r..." % (what, protocols(text), want))
    for pat in EXPECT_TSHARK[typ]:
        check(re.search(pat, text), "%s: no %r in\n%s" % (what, pat, text))
    if l3 == "ip":
        check(re.search(r"Header Checksum: 0x[0-9a-f]{4} \[correct\]", text), "%s: outer IPv4 checksum" % what)
    if typ != "gre":
        # The outer UDP's checksum (the first UDP header of the frame).
        outer_udp = text.split("User Datagram Protocol", 2)[1]
        if csum_on or l3 == "ipv6":
            check(re.search(r"\[Checksum Status: Good\]", outer_udp), "%s: outer UDP checksum not Good" % what)
        else:
            check(re.search(r"Checksum: 0x0000 \[zero-value ignored\]", outer_udp), "%s: UDP checksum not 0" % what)
    elif csum_on:
        gre = text.split("Generic Routing Encapsulation", 1)[1]
        check(re.search(r"Checksum Bit: Yes", gre) and re.search(r"Checksum: 0x[0-9a-f]{4} \[correct\]", gre),
              "%s: GRE checksum present and correct" % what)
    else:
        check(re.search(r"Checksum Bit: No", text), "%s: GRE without checksum" % what)


def have_tshark():
    return shutil.which("tshark") is not None


def test_tshark_decodes_keel_output():
    if not have_tshark():
        print("  (tshark not installed: toolchains/setup.sh installs it)")
        return
    proc, frames = keel_frames()
    names = [c[0] for c in CASES]
    texts = tshark([frames[n] for n in names])
    for (name, typ, remote, opts, _), text in zip(CASES, texts):
        check_tshark(name, typ, remote, "csum=true" in opts, text)


def test_tshark_checker_can_fail():
    """The same checks flag a GENEVE option length past the packet's end
    and a wrong UDP checksum."""
    if not have_tshark():
        return
    inner = vm_frame(0)
    short = bytes(Ether(src=BR_MAC, dst=remote_mac(2)) / IP(src=LOCAL4, dst="192.168.50.13", flags="DF") /
                  UDP(sport=40000, dport=6081, chksum=0) /
                  Raw(bytes.fromhex("0200655800007b00") + bytes.fromhex("ffff801f0000000a")))
    wrong = bytearray(bytes(Ether(src=BR_MAC, dst=remote_mac(5)) / IPv6(src=LOCAL6, dst="fd00::11") /
                            UDP(sport=40000, dport=4789) / VXLAN(vni=123, flags=0x08) / Raw(inner)))
    wrong[60] ^= 0x55
    texts = tshark([short, bytes(wrong)])
    check(tshark_problems(texts[0]), "tshark flags the GENEVE option running past the packet:\n" + texts[0])
    check(tshark_problems(texts[1]), "tshark flags the wrong UDP checksum:\n" + texts[1])


# --- scapy --------------------------------------------------------------------

def recomputed(p, layer, field):
    """The checksum scapy computes for `layer` of packet p."""
    q = p.copy()
    setattr(q[layer], field, None)
    return Ether(bytes(q))[layer].getfieldval(field)


def check_scapy(name, typ, remote, csum_on, frame):
    what = "scapy on keel's %s frame %s" % (name, frame.hex())
    p = Ether(frame)
    check(p.dst == remote_mac([c[0] for c in CASES].index(name)) and p.src == BR_MAC, what + ": outer MACs")
    six = ":" in remote
    if six:
        check(IPv6 in p and p[IPv6].src == LOCAL6 and p[IPv6].dst == remote and p[IPv6].hlim == 64 and
              p[IPv6].tc == 0 and p[IPv6].fl == 0, what + ": IPv6 header")
        check(p[IPv6].plen == len(frame) - 54, what + ": IPv6 payload length")
    else:
        ip = p[IP]
        check(ip.src == LOCAL4 and ip.dst == remote and ip.ttl == 64 and ip.tos == 0 and ip.flags == "DF"
              and ip.frag == 0 and ip.ihl == 5 and ip.len == len(frame) - 14, what + ": IPv4 header")
        check(ip.chksum == recomputed(p, IP, "chksum"), what + ": IPv4 checksum")
    if typ == "gre":
        g = p[GRE]
        check(g.version == 0 and g.proto == 0x6558 and g.key_present == 1 and g.key == 456 and
              g.seqnum_present == 0 and g.routing_present == 0, what + ": GRE header")
        check(g.chksum_present == (1 if csum_on else 0), what + ": GRE C bit")
        if csum_on:
            check(g.chksum == recomputed(p, GRE, "chksum"), what + ": GRE checksum")
        inner = bytes(g.payload)
    else:
        u = p[UDP]
        check(u.dport == (4789 if typ == "vxlan" else 6081) and 32768 <= u.sport < 61000, what + ": UDP ports")
        check(u.len == len(bytes(u)), what + ": UDP length")
        if csum_on or six:
            check(u.chksum != 0 and u.chksum == recomputed(p, UDP, "chksum"), what + ": UDP checksum")
        else:
            check(u.chksum == 0, what + ": UDP checksum 0 (csum off over IPv4)")
        if typ == "vxlan":
            v = p[VXLAN]
            check(v.flags == 0x08 and v.vni == 123, what + ": VXLAN I flag, VNI")
            inner = bytes(v.payload)
        else:
            g = GENEVE(bytes(u.payload))
            check(g.version == 0 and g.vni == 123 and g.proto == 0x6558 and g.oam == 0, what + ": GENEVE header")
            check(g.optionlen == 2 and g.critical == 1, what + ": GENEVE one 8-byte option, critical (type 0x80)")
            opt = bytes(u.payload)[8:16]
            check(opt == bytes.fromhex("ffff8001") + bytes.fromhex("0000000a"),
                  what + ": GENEVE option {class=0xffff,type=0x80,len=4,0xa}: %s" % opt.hex())
            inner = bytes(u.payload)[16:]
    i = [c[0] for c in CASES].index(name)
    check(inner == vm_frame(i), what + ": the inner frame is the VM's, byte for byte")


def test_scapy_dissects_keel_output():
    proc, frames = keel_frames()
    for name, typ, remote, opts, _ in CASES:
        check_scapy(name, typ, remote, "csum=true" in opts, frames[name])


def test_decap_to_vm():
    """Each remote's packet (scapy's encapsulation) reaches the VM
    decapsulated, the GENEVE ones through the rule matching the option's
    tun_metadata0 value."""
    proc, _ = keel_frames()
    want = [rvm_frame(i) for i in range(len(CASES))]
    got = RUN["keel_vm"]
    check(got == want, "vm got %d frames, want the %d inner frames in order: %s" %
          (len(got), len(want), [f.hex() for f in got]), proc)


# --- Open vSwitch 3.1 ---------------------------------------------------------

def ovs_frames():
    ovs = tnl_peers.Ovs()
    try:
        args = ["add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=dummy",
                "other_config:hwaddr=" + BR_MAC, *ovs.dummy_port("br-phy", "up", 1),
                "--", "add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=dummy",
                *ovs.dummy_port("br-int", "vm", 1)]
        for n, (name, typ, remote, opts, _) in enumerate(CASES):
            args += ["--", "add-port", "br-int", name, "--", "set", "interface", name, "type=" + typ,
                     "options:remote_ip=" + remote, "ofport_request=%d" % (n + 2)]
            args += opts.split()
        ovs.vsctl(*args)
        ovs.appctl("netdev-dummy/ip4addr", "br-phy", LOCAL4 + "/24")
        ovs.appctl("netdev-dummy/ip6addr", "br-phy", LOCAL6 + "/64")
        ovs.appctl("ovs/route/add", "192.168.50.0/24", "br-phy")
        ovs.appctl("ovs/route/add", "fd00::/64", "br-phy")
        ovs.ofctl("add-tlv-map", "br-int", TLV)
        ovs.ofctl("del-flows", "br-phy")
        ovs.ofctl("add-flow", "br-phy", "actions=NORMAL")
        ovs.ofctl("del-flows", "br-int")
        for r in rules():
            ovs.ofctl("add-flow", "br-int", r.split(" ", 2)[2])
        ovs.send_in_order(inputs())
        return by_case(ovs.pcap("up")), ovs.pcap("vm")
    finally:
        ovs.stop()


def test_same_frames_as_open_vswitch():
    if not tnl_peers.ovs_available():
        print("  (Open vSwitch 3.1 not installed: reference comparison skipped)")
        return
    proc, frames = keel_frames()
    ref, ref_vm = ovs_frames()
    check(RUN["keel_vm"] == ref_vm, "vm: keel sent\n  %s\nOpen vSwitch sent\n  %s" %
          ("\n  ".join(f.hex() for f in RUN["keel_vm"]), "\n  ".join(f.hex() for f in ref_vm)), proc)
    for name, *_ in CASES:
        k, o = tnl_peers.mask_udp_sport([frames[name], ref[name]])
        check(k == o, "%s: keel sent\n  %s\nOpen vSwitch sent\n  %s" % (name, k.hex(), o.hex()), proc)


if __name__ == "__main__":
    main([test_tshark_checker_can_fail, test_tshark_decodes_keel_output, test_scapy_dissects_keel_output,
          test_decap_to_vm, test_same_frames_as_open_vswitch])

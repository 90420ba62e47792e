"""tnl_push and tnl_pop on the wire: host-sim with pcap ports runs
`dp-flow add` flows whose actions are Open vSwitch 3.1's tnl_push(...)
texts (VXLAN over IPv4 and IPv6, GENEVE with an option and a UDP checksum,
GRE with key and checksum, GRE over IPv6) and a flow doing tnl_pop; every
output frame is compared byte for byte with the packet scapy builds for
the same tunnel (scapy computes the lengths and checksums itself). Only
the outer UDP source port is taken from keel's output (it comes from the
packet's hash): it must be in Open vSwitch's range 32768..60999, and the
frames of one inner flow share it."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tnl_peers  # noqa: E402

if __name__ == "__main__":
    tnl_peers.need_scapy("test_tnl_encap_bytes")  # scapy is Debian's: /usr/bin/python3

from harness import check, json_lines, main, read_pcap, run_keel, tmpdir, udp_frame, write_pcap  # noqa: E402

from scapy.all import GRE, IP, UDP, Ether, IPv6, Raw  # noqa: E402  (only under /usr/bin/python3)
from scapy.contrib.geneve import GENEVE, GeneveOptions  # noqa: E402
from scapy.layers.vxlan import VXLAN  # noqa: E402

DST, SRC = "f8:bc:12:44:34:b6", "aa:55:aa:55:00:00"
ETH = "eth(dst=%s,src=%s,dl_type=%%s)" % (DST, SRC)
IP4 = "ipv4(src=1.1.2.88,dst=1.1.2.92,proto=%d,tos=0,ttl=64,frag=0x4000)"
IP6 = "ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=%d,tclass=0x0,hlimit=64)"
MATCH = "recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no)"


def push(size, typ, v6, tail):
    eth = ETH % ("0x86dd" if v6 else "0x0800")
    proto = 47 if "gre(" in tail else 17
    ip = (IP6 if v6 else IP4) % proto
    return "tnl_push(tnl_port(4),header(size=%d,type=%d,%s,%s,%s),out_port(5))" % (size, typ, eth, ip, tail)


def outer4(proto_layer):
    return Ether(dst=DST, src=SRC) / IP(src="1.1.2.88", dst="1.1.2.92", ttl=64, tos=0, id=0, flags="DF") / proto_layer


def outer6(proto_layer):
    return Ether(dst=DST, src=SRC) / IPv6(src="2001:cafe::88", dst="2001:cafe::92", hlim=64, tc=0, fl=0) / proto_layer


def run(flows, frames, extra_ports=(), stdin="pmd-stats-show --format json\n", config_pre=()):
    d = tmpdir()
    inp, outp, cfg = (os.path.join(d, x) for x in ("in.pcap", "out.pcap", "keel.conf"))
    write_pcap(inp, frames)
    with open(cfg, "w") as f:
        f.write("".join(line + "\n" for line in config_pre))
        f.write("".join("dp-flow add %s\n" % fl for fl in flows))
    args = ["--config", cfg, "--port", "p0=pcap:in=" + inp, "--port", "p1=pcap:out=" + outp]
    for a in extra_ports:
        args += ["--port", a]
    p = run_keel(*args, "--exit-when-drained", stdin=stdin)
    return p, (read_pcap(outp) if os.path.exists(outp) else [])


def sport_of(frame, l4):
    return struct.unpack_from("!H", frame, l4)[0]


def check_encap(name, action, build, l4_off, frames):
    """Runs `action`,2 on `frames`; each output must equal build(sport, inner)."""
    p, out = run(["%s actions:%s,2" % (MATCH, action)], frames)
    check(p.returncode == 0, name + ": exit 0", p)
    check(len(out) == len(frames), "%s: %d frames out, got %d" % (name, len(frames), len(out)), p)
    by_flow = {}
    for i, (inner, got) in enumerate(zip(frames, out)):
        sport = sport_of(got, l4_off) if l4_off else None
        if sport is not None:
            check(32768 <= sport <= 60999, "%s: frame %d: UDP source port %d in 32768..60999" % (name, i, sport), p)
            key = inner[26:38]  # the inner flow's addresses and ports
            check(by_flow.setdefault(key, sport) == sport, "%s: one source port per inner flow" % name, p)
        want = bytes(build(sport, inner))
        check(got == want, "%s: frame %d byte for byte\n got  %s\n want %s" % (name, i, got.hex(), want.hex()), p)
    pmd = json_lines(p.stdout)[0]["pmds"][0]
    check(pmd["tnl_pushed"] == len(frames), name + ": pmd-stats-show tnl_pushed", p)
    return out


def inner_frames():
    # Four inner flows (udp_frame(i): ports 1000+i), three packets each, sizes varied.
    return [udp_frame(i % 4, 60 + 37 * i) for i in range(12)]


def test_vxlan_ipv4():
    check_encap("vxlan/ipv4",
                push(50, 4, False, "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x7b)"),
                lambda s, f: outer4(UDP(sport=s, dport=4789, chksum=0) / VXLAN(vni=0x7b, flags=0x08) / Raw(f)),
                34, inner_frames())


def test_vxlan_ipv6_udp_checksum():
    check_encap("vxlan/ipv6",
                push(70, 4, True, "udp(src=0,dst=4789,csum=0xffff),vxlan(flags=0x8000000,vni=0x1c7)"),
                lambda s, f: outer6(UDP(sport=s, dport=4789) / VXLAN(vni=0x1c7, flags=0x08) / Raw(f)),
                54, inner_frames())


def test_geneve_options_checksum():
    opt = GeneveOptions(classid=0xffff, type=0x80, data=b"\x00\x00\x00\x0a")
    check_encap("geneve/ipv4",
                push(58, 5, False, "udp(src=0,dst=6081,csum=0xffff),"
                     "geneve(crit,vni=0x7b,options({class=0xffff,type=0x80,len=4,0xa}))"),
                lambda s, f: outer4(UDP(sport=s, dport=6081) / GENEVE(vni=0x7b, proto=0x6558, critical=1,
                                                                      options=[opt]) / Raw(f)),
                34, inner_frames())


def test_gre_key_checksum():
    check_encap("gre/ipv4",
                push(46, 3, False, "gre((flags=0xa000,proto=0x6558),csum=0x0,key=0x1c8)"),
                lambda s, f: outer4(GRE(chksum_present=1, key_present=1, key=0x1c8, proto=0x6558) / Raw(f)),
                None, inner_frames())


def test_gre_ipv6_no_key():
    check_encap("gre/ipv6",
                push(58, 109, True, "gre((flags=0x0,proto=0x6558))"),
                lambda s, f: outer6(GRE(proto=0x6558) / Raw(f)),
                None, inner_frames())


def test_bad_tnl_push_refused():
    """A header whose size= does not match what it holds installs nothing."""
    bad = push(51, 4, False, "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x7b)")
    p, out = run([], [udp_frame(1, 80)], stdin="dp-flow add %s actions:%s,2\nflow-dump\n" % (MATCH, bad))
    check("size=51 but the header is 50 bytes" in p.stdout + p.stderr, "the reason is given", p)
    check("tnl_push" not in p.stdout.split("size=51 but")[-1], "no flow installed", p)
    check(out == [], "nothing forwarded", p)


def vxlan_in(inner, vni=0x7b, flags=0x08, chksum=None):
    pkt = (Ether(dst=SRC, src=DST) / IP(src="1.1.2.92", dst="1.1.2.88", ttl=64, flags="DF") /
           UDP(sport=40000, dport=4789, chksum=chksum) / VXLAN(vni=vni, flags=flags) / Raw(inner))
    return bytes(pkt)


def test_tnl_pop_to_the_inner_frame():
    """tnl_pop(3) on the vport a VXLAN tunnel port created: the inner frame,
    byte for byte, through a flow on in_port(3) that matches the tunnel's
    VNI and addresses; another VNI finds no such flow; bad packets are
    dropped and counted by reason."""
    inner = inner_frames()
    good = [vxlan_in(f) for f in inner]
    other_vni = vxlan_in(inner[0], vni=0x7c)
    bad_flags = vxlan_in(inner[1], flags=0x0c)
    bad = bytearray(vxlan_in(inner[2], chksum=None))
    bad[-1] ^= 0xff  # the UDP checksum (scapy computed it) no longer verifies
    frames = good + [other_vni, bad_flags, bytes(bad)]
    p, out = run(["recirc_id(0),in_port(1),eth_type(0x0800),ipv4(proto=17,frag=no) actions:tnl_pop(3)",
                  "tunnel(tun_id=0x7b,src=1.1.2.92,dst=1.1.2.88,flags(+key)),recirc_id(0),in_port(3),"
                  "eth_type(0x0800),ipv4(frag=no) actions:2"],
                 frames,
                 stdin="tnl-ports-show\npmd-stats-show --keel\npmd-stats-show --format json\n",
                 config_pre=["add-br br-int",
                             "add-port br-int t1 type=vxlan options:remote_ip=1.1.2.92 options:key=123"])
    check(p.returncode == 0, "exit 0", p)
    check("vxlan_sys_4789 (3)" in p.stdout, "the tunnel port's vport is 3", p)
    check(out == inner, "the decapsulated frames, byte for byte, in order (%d of %d)" % (len(out), len(inner)), p)
    pmd = json_lines(p.stdout)[0]["pmds"][0]
    check(pmd["tnl_popped"] == len(good) + 1, "every good packet decapsulated", p)
    check(pmd["tnl_pop_errors"] == 2, "two bad packets counted", p)
    check("pop errors 2 (bad_udp_csum 1, bad_vxlan_flags 1)" in p.stdout, "by reason in pmd-stats-show --keel", p)


if __name__ == "__main__":
    main([test_vxlan_ipv4, test_vxlan_ipv6_udp_checksum, test_geneve_options_checksum, test_gre_key_checksum,
          test_gre_ipv6_no_key, test_bad_tnl_push_refused, test_tnl_pop_to_the_inner_frame])

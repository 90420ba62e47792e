"""VXLAN through two bridges on host-sim (issue 15): br-int (the VM side:
ports vm, vm2 and the tunnel port vx0) and br-phy (the underlay: the
uplink pcap port `up`, the address 192.168.50.2/24 on its LOCAL port),
NORMAL on both, offline runs (--exit-when-drained: packets in timestamp
order, the state of one packet's translation seen by the next).

The remote VTEP 192.168.50.1 (MAC R) is only known from an ARP reply it
sends first, in the uplink pcap: no neigh-set, no static entry.

Asserted:
  * the ARP reply is learned (`neigh-show`: 192.168.50.1 R br-phy);
  * the VM's frames to a MAC nobody has seen are flooded: to vm2 as they
    are, to the uplink VXLAN-encapsulated, byte for byte the frame built
    here with scapy (Ether R <- br-phy / IPv4 192.168.50.2 -> .1, id 0, DF,
    TTL 64 / UDP -> 4789, checksum 0 / VXLAN I, VNI 123 / the frame), but
    for the UDP source port, which must be in 32768..60999 and the same for
    the same inner flow every time;
  * a VXLAN packet from the remote VTEP (outer UDP checksum set, as the
    Linux kernel sends) is decapsulated and its inner frame switched to
    the VM it is addressed to (learned), only there; one with an unknown
    VNI reaches nobody;
  * once the remote MAC was learned on vx0, the VM's frames to it go to
    the uplink only, encapsulated (unicast);
  * `flow-dump`: one megaflow per inner flow (per MAC pair, as Open
    vSwitch's NORMAL megaflows) whose actions are the tnl_push of the
    complete header (Open vSwitch 3.1's text) and the output to the uplink
    in the same pass: clone(tnl_push(...),up) when more actions follow, a
    bare tnl_push(...),up when it is the last (Open vSwitch removes a
    trailing clone), never a recirc; the uplink's flow for the VXLAN
    packet is tnl_pop(N) of the same vport N, and the inner packet's flow
    matches tunnel(tun_id=0x7b,src=192.168.50.1,dst=192.168.50.2,...);
  * when ovs-vswitchd 3.1 is installed: Open vSwitch given the same
    topology and the same packets in the same order (dummy datapath,
    revalidator/purge between packets) sends the same frames on every port
    (the UDP source port aside: it is the datapath's hash)."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tnl_peers  # noqa: E402

if __name__ == "__main__":
    tnl_peers.need_scapy("test_tnl_two_bridge")

from scapy.all import ARP, IP, UDP, Ether, Raw  # noqa: E402
from scapy.layers.vxlan import VXLAN  # noqa: E402

from harness import check, main  # noqa: E402

R_MAC = "02:00:00:00:50:01"    # the remote VTEP
BR_MAC = "02:00:00:00:50:02"   # br-phy (other_config:hwaddr)
VM_MAC = "02:00:00:0a:00:01"   # the VM behind `vm`, 10.1.0.2
RVM_MAC = "02:00:00:0b:00:01"  # the VM behind the remote VTEP, 10.1.0.1
REMOTE, LOCAL = "192.168.50.1", "192.168.50.2"
VNI = 123
SEC = 1000000

KEEL_CONFIG = """add-br br-phy
set bridge br-phy other_config:hwaddr=%s
add-port br-phy up
ip-add br-phy %s/24
add-flow br-phy actions=NORMAL
add-br br-int
add-port br-int vm
add-port br-int vx0 type=vxlan options:remote_ip=%s options:key=%d
add-port br-int vm2
add-flow br-int actions=NORMAL
""" % (BR_MAC, LOCAL, REMOTE, VNI)

HEADER = ("header(size=50,type=4,eth(dst=%s,src=%s,dl_type=0x0800),ipv4(src=%s,dst=%s,proto=17,tos=0,ttl=64,"
          "frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x%x))"
          % (R_MAC, BR_MAC, LOCAL, REMOTE, VNI))


def arp_reply():
    return bytes(Ether(src=R_MAC, dst=BR_MAC) / ARP(op=2, hwsrc=R_MAC, psrc=REMOTE, hwdst=BR_MAC, pdst=LOCAL))


def vm_frame(sport):
    """The VM's UDP frame of inner flow `sport`."""
    return bytes(Ether(src=VM_MAC, dst=RVM_MAC) / IP(src="10.1.0.2", dst="10.1.0.1", id=sport) /
                 UDP(sport=sport, dport=2000) / Raw(bytes(range(64))))


def rvm_frame():
    """The remote VM's frame to ours (inside the VXLAN packet)."""
    return bytes(Ether(src=RVM_MAC, dst=VM_MAC) / IP(src="10.1.0.1", dst="10.1.0.2", id=7) /
                 UDP(sport=3000, dport=4000) / Raw(b"from the remote VM " * 3))


def vxlan_in(inner, vni=VNI):
    """What the remote VTEP sends: UDP checksum computed (as Linux does)."""
    p = (Ether(src=R_MAC, dst=BR_MAC) / IP(src=REMOTE, dst=LOCAL, ttl=64) / UDP(sport=50123, dport=4789) /
         VXLAN(vni=vni, flags=0x08) / Raw(inner))
    return bytes(p)


def vxlan_out(inner, sport):
    """keel's encapsulation of `inner`, as Open vSwitch builds it (ip id 0,
    DF, TTL 64, UDP checksum 0), with the source port keel chose."""
    return bytes(Ether(src=BR_MAC, dst=R_MAC) / IP(src=LOCAL, dst=REMOTE, id=0, flags="DF", ttl=64, tos=0) /
                 UDP(sport=sport, dport=4789, chksum=0) / VXLAN(vni=VNI, flags=0x08) / Raw(inner))


FLOWS = (1000, 1001, 1002)


def inputs(with_decap=True):
    up = [(0, arp_reply())]
    vm = [(1 * SEC + i, vm_frame(s)) for i, s in enumerate(FLOWS)]
    if with_decap:
        up += [(2 * SEC, vxlan_in(rvm_frame())), (2 * SEC + 1, vxlan_in(rvm_frame(), vni=VNI + 1))]
        vm += [(3 * SEC + i, vm_frame(s)) for i, s in enumerate(FLOWS)]
    return {"up": up, "vm": vm}


def keel_run(ins, script):
    return tnl_peers.keel_offline(KEEL_CONFIG, {"up": ins.get("up"), "vm": ins.get("vm"), "vm2": None}, script)


def udp_sport(frame):
    return int.from_bytes(frame[34:36], "big")


def check_encapsulated(frames, inners, what, proc):
    check(len(frames) == len(inners), "%s: %d frames on the uplink, want %d" % (what, len(frames), len(inners)),
          proc)
    sports = {}
    for fr, inner in zip(frames, inners):
        s = udp_sport(fr)
        want = vxlan_out(inner, s)
        check(fr == want, "%s: the uplink frame\n  %s\nis not\n  %s (scapy)" % (what, fr.hex(), want.hex()), proc)
        check(32768 <= s < 61000, "%s: UDP source port %d outside 32768..60999" % (what, s), proc)
        sports.setdefault(inner[34:36], set()).add(s)
    return sports


RUN = {}


def full_run():
    if "full" not in RUN:
        RUN["full"] = keel_run(inputs(), "neigh-show\nflow-dump --names\n")
    return RUN["full"]


def test_neighbour_learned_from_arp_reply():
    proc, _ = full_run()
    check(re.search(r"^%s\s+%s\s+br-phy\s*$" % (re.escape(REMOTE), re.escape(R_MAC)), proc.stdout, re.M),
          "neigh-show has %s %s br-phy (learned from the ARP reply)" % (REMOTE, R_MAC), proc)


def test_flood_then_unicast_encapsulated():
    proc, got = full_run()
    inners = [vm_frame(s) for s in FLOWS]
    vx = [f for f in got["up"] if f[12:14] == b"\x08\x00"]
    check(len(vx) == len(got["up"]), "only VXLAN frames on the uplink (no ARP request: the neighbour is known)",
          proc)
    sports = check_encapsulated(vx, inners + inners, "flood (t=1 s) then unicast (t=3 s)", proc)
    for inner_sport, s in sports.items():
        check(len(s) == 1, "inner flow %s got UDP source ports %s: one flow, one port (RFC 7348 5)" %
              (inner_sport.hex(), sorted(s)), proc)
    check(got["vm2"] == inners, "vm2 got the 3 flooded frames as they are, and not the unicast ones: %d frames" %
          len(got["vm2"]), proc)


def test_decap_switched_to_vm():
    proc, got = full_run()
    check(got["vm"] == [rvm_frame()], "vm got exactly the decapsulated inner frame (not the unknown VNI's): %s" %
          [f.hex() for f in got["vm"]], proc)


def dp_flows(text):
    return [l for l in text.splitlines() if "actions:" in l]


def tnl_push_check(line, proc):
    """The tnl_push of `line` with the complete header, followed in the
    same action list by the output to the uplink; returns (tnl_port, rest)."""
    m = re.search(r"tnl_push\(tnl_port\(([\w.-]+)\),(header\(.*?\)\)),out_port\(([\w.-]+)\)\),up(\)?)", line)
    check(m, "a tnl_push(...) followed by the output to up:\n" + line, proc)
    check(m.group(2) == HEADER, "tnl_push header\n  %s\nwant\n  %s" % (m.group(2), HEADER), proc)
    return m.group(1)


def test_flow_dump_one_megaflow_per_flow_combined():
    proc, _ = full_run()
    flows = dp_flows(proc.stdout)
    vm_flows = [l for l in flows if "in_port(vm)" in l and "eth(src=%s,dst=%s)" % (VM_MAC, RVM_MAC) in l]
    check(len(vm_flows) == 1, "one megaflow for the VM's frames to the remote VM (3 L4 flows, one MAC pair), "
          "got %d:\n%s" % (len(vm_flows), "\n".join(flows)), proc)
    line = vm_flows[0]
    actions = line.split("actions:", 1)[1]
    check("recirc(" not in actions, "no recirc: the underlay is translated in the same pass:\n" + line, proc)
    check(actions.count("tnl_push(") == 1, "one tnl_push:\n" + line, proc)
    tnl_port = tnl_push_check(line, proc)
    # The remote MAC is known on vx0: the tunnel is the only, last output,
    # so no clone (Open vSwitch drops a trailing clone).
    check(actions.startswith("tnl_push("), "unicast to the tunnel: a bare tnl_push(...),up:\n" + line, proc)
    pops = [l for l in flows if "in_port(up)" in l and "tnl_pop(" in l]
    check(len(pops) == 1, "one megaflow on the uplink popping the tunnel:\n" + "\n".join(flows), proc)
    m = re.search(r"actions:tnl_pop\(([\w.-]+)\)$", pops[0])
    check(m and m.group(1) == tnl_port, "the uplink's flow is tnl_pop(%s), the vport tnl_push uses:\n%s" %
          (tnl_port, pops[0]), proc)
    inner = [l for l in flows if l.lstrip().startswith("tunnel(tun_id=0x%x,src=%s,dst=%s," % (VNI, REMOTE, LOCAL))]
    check(inner and inner[0].endswith("actions:vm"),
          "the decapsulated packet's megaflow matches its tunnel and outputs to vm:\n" + "\n".join(flows), proc)


def test_flood_megaflow_clone():
    """Before the remote MAC is known: a flood to vx0 and vm2 in one megaflow,
    the tunnel's underlay actions inside clone() when vm2's output follows,
    bare when the tunnel output is the last, never recirculated."""
    proc, got = keel_run(inputs(with_decap=False), "flow-dump --names\n")
    check_encapsulated(got["up"], [vm_frame(s) for s in FLOWS], "flood", proc)
    flows = [l for l in dp_flows(proc.stdout) if "in_port(vm)" in l]
    check(len(flows) == 1, "one flood megaflow for the 3 L4 flows:\n" + proc.stdout, proc)
    line = flows[0]
    actions = line.split("actions:", 1)[1]
    check("recirc(" not in actions, "no recirc:\n" + line, proc)
    tnl_push_check(line, proc)
    ok = (re.fullmatch(r"clone\(tnl_push\(.*\),up\),vm2", actions) or
          re.fullmatch(r"vm2,tnl_push\(.*\),up", actions))
    check(ok, "flood actions are clone(tnl_push(...),up),vm2 or vm2,tnl_push(...),up:\n" + line, proc)


# --- Open vSwitch 3.1, same topology, same packets ----------------------------

def ovs_run(ins):
    """Open vSwitch with br-phy/br-int as keel's, the same packets in the same
    order; returns {port: frames sent}."""
    ovs = tnl_peers.Ovs()
    try:
        ovs_setup(ovs)
        ovs.send_in_order(ins)
        return {p: ovs.pcap(p) for p in ("up", "vm", "vm2")}
    finally:
        ovs.stop()


def ovs_setup(ovs):
    """br-phy/br-int as keel's config, NORMAL on both."""
    ovs.vsctl("add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=dummy",
              "other_config:hwaddr=" + BR_MAC, *ovs.dummy_port("br-phy", "up", 1),
              "--", "add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=dummy",
              *ovs.dummy_port("br-int", "vm", 1),
              "--", "add-port", "br-int", "vx0", "--", "set", "interface", "vx0", "type=vxlan",
              "options:remote_ip=" + REMOTE, "options:key=%d" % VNI, "ofport_request=2",
              *ovs.dummy_port("br-int", "vm2", 3))
    ovs.appctl("netdev-dummy/ip4addr", "br-phy", LOCAL + "/24")
    ovs.appctl("ovs/route/add", "192.168.50.0/24", "br-phy")
    for br in ("br-phy", "br-int"):
        ovs.ofctl("del-flows", br)
        ovs.ofctl("add-flow", br, "actions=NORMAL")


def ovs_flow_dump(ins):
    """Open vSwitch's `dpctl/dump-flows --names` after the same packets
    (purged between them up to the decap, as keel's offline order; the
    flows of the last ones kept)."""
    ovs = tnl_peers.Ovs()
    try:
        ovs_setup(ovs)
        order = sorted((ts, i, port, fr) for port, recs in ins.items() for i, (ts, fr) in enumerate(recs))
        for ts, _, port, fr in order:
            ovs.appctl("netdev-dummy/receive", port, fr.hex())
            if ts < 2 * SEC:
                ovs.appctl("revalidator/purge")
        return ovs.appctl("dpctl/dump-flows", "--names")
    finally:
        ovs.stop()


def normalized_flows(text, vports):
    """The megaflows of a dump without statistics, the datapath port numbers
    of `vports` ({number: name}) as names, sorted; only the flows of the VM's
    frames, the uplink's VXLAN and the decapsulated inner packet."""
    out = []
    for l in text.splitlines():
        if "actions:" not in l:
            continue
        key, actions = l.split(", packets:", 1)[0], l.split("actions:", 1)[1]
        flow = key + " actions:" + actions
        for n, name in vports.items():
            flow = re.sub(r"(tnl_port|tnl_pop|out_port|in_port)\(%s\)" % n, r"\1(%s)" % name, flow)
        if "in_port(vm)" in flow or "tnl_pop(" in flow or "tun_id=0x%x," % VNI in flow:
            out.append(flow)
    return sorted(out)


def test_flow_dump_as_open_vswitch():
    """The megaflows (keys, masks, actions) are Open vSwitch's for the same
    packets: the combined tnl_push, the tnl_pop, the inner packet's
    tunnel() match."""
    if not tnl_peers.ovs_available():
        print("  (Open vSwitch 3.1 not installed: reference comparison skipped)")
        return
    proc, _ = full_run()
    ports = RUN.setdefault("tnl_ports", keel_run(inputs(with_decap=False), "tnl-ports-show\n")[0].stdout)
    m = re.search(r"^vxlan_sys_4789 \((\d+)\)", ports, re.M)
    check(m, "tnl-ports-show lists vxlan_sys_4789:\n" + ports, proc)
    pm = re.search(r"out_port\((\d+)\)", proc.stdout)
    vports = {m.group(1): "vxlan_sys_4789"}
    if pm:
        vports[pm.group(1)] = "br-phy"  # the underlay bridge's internal vport
    keel = normalized_flows(proc.stdout, vports)
    ovs = normalized_flows(ovs_flow_dump(inputs()), {})
    check(keel == ovs, "megaflows: keel\n  %s\nOpen vSwitch\n  %s" % ("\n  ".join(keel), "\n  ".join(ovs)), proc)


def test_same_frames_as_open_vswitch():
    if not tnl_peers.ovs_available():
        print("  (Open vSwitch 3.1 not installed: reference comparison skipped)")
        return
    proc, got = full_run()
    ref = ovs_run(inputs())
    for p in ("up", "vm", "vm2"):
        k, o = tnl_peers.mask_udp_sport(got[p]), tnl_peers.mask_udp_sport(ref[p])
        check(k == o, "port %s: keel sent\n  %s\nOpen vSwitch sent\n  %s" %
              (p, "\n  ".join(f.hex() for f in k), "\n  ".join(f.hex() for f in o)), proc)


if __name__ == "__main__":
    main([test_neighbour_learned_from_arp_reply, test_flood_then_unicast_encapsulated, test_decap_switched_to_vm,
          test_flow_dump_one_megaflow_per_flow_combined, test_flood_megaflow_clone,
          test_flow_dump_as_open_vswitch, test_same_frames_as_open_vswitch])

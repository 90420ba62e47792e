"""Tunnel translation on host-sim (issue 15): br-int with a VM port `vm`
and a VXLAN port `vx0`, br-phy with the uplink `up` and the address
172.16.0.1/24 (its route is ip-add's connected one), NORMAL on br-phy.

  * combined (the default): `trace` says "tunneling to 172.16.0.2 via
    br-phy" and shows the nested bridge("br-phy") pass; flow-dump shows
    one megaflow per inner flow whose actions are tnl_push(...) followed
    by br-phy's output, no recirc; the uplink gets each frame VXLAN
    encapsulated (outer MACs, IPs, UDP 4789 with a source port in
    32768..60999, VNI 123, DF, TTL 64, IPv4 checksum right, the inner frame
    unchanged) — checked field by field here, built independently;
  * `set tunnel-combine false`: the trace gives the fallback's reason,
    flow-dump has the clone(tnl_push(...),recirc(...)) megaflows and the
    second pass; the uplink's bytes are identical to the combined run's;
  * no neighbour: the packet is dropped, keel ARPs for 172.16.0.2 out of
    the uplink, and nothing is installed for it;
  * decap: a VXLAN frame for 172.16.0.1 on the uplink reaches the VM
    port decapsulated; one for an unknown VNI is dropped and counted
    (upcall-show tnl_no_port);
  * an ARP request for 172.16.0.1 is answered with br-phy's MAC.
"""
import os
import re
import shutil
import subprocess
import struct
import tempfile

import ovs_reference
from harness import EMPTY_CONFIG, check, csum, json_lines, main, read_pcap, run_keel, tmpdir, write_pcap_ts

BR_MAC = "02:00:00:00:01:01"
NH_MAC = "02:00:00:00:02:02"
VM_A, VM_B = "00:00:00:00:00:0a", "00:00:00:00:00:0b"

BASE = ("add-br br-int\n"
        "add-port br-int vm\n"
        "add-port br-int vx0 -- set Interface vx0 type=vxlan options:remote_ip=172.16.0.2 options:key=123\n"
        "add-br br-phy\n"
        "add-port br-phy up\n"
        "set bridge br-phy other_config:hwaddr=" + BR_MAC + "\n"
        "ip-add br-phy 172.16.0.1/24\n"
        "add-flow br-phy actions=normal\n")
NEIGH = "neigh-set br-phy 172.16.0.2 " + NH_MAC + "\n"
TO_TUNNEL = "add-flow br-int in_port=1,actions=output:2\n"
FROM_TUNNEL = "add-flow br-int in_port=2,actions=output:1\n"


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def ip4(s):
    return bytes(int(x) for x in s.split("."))


def udp_packet(dst, src, sip, dip, sport, dport, payload=b"keel tunnel test"):
    ulen = 8 + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 1, 0, 64, 17, 0, ip4(sip), ip4(dip))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    u = struct.pack("!HHHH", sport, dport, ulen, 0) + payload
    return mac(dst) + mac(src) + b"\x08\x00" + ip + u


def inner_frames(n=3):
    return [udp_packet(VM_B, VM_A, "10.0.0.1", "10.0.0.2", 1000 + i, 2000 + i) for i in range(n)]


def vxlan_frame(inner, vni, sip="172.16.0.2", dip="172.16.0.1", sport=45000):
    vx = struct.pack("!II", 0x08000000, vni << 8)
    return udp_packet(BR_MAC, NH_MAC, sip, dip, sport, 4789, vx + inner)


def arp_request(sha, spa, tpa):
    return (b"\xff" * 6 + mac(sha) + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac(sha) +
            ip4(spa) + b"\x00" * 6 + ip4(tpa))


def run(setup, inputs, outs, script):
    d = tmpdir()
    args, files = [], {}
    for p in sorted(set(inputs) | set(outs)):
        parts = []
        if p in inputs:
            path = os.path.join(d, p + ".in.pcap")
            write_pcap_ts(path, [(i * 1000, f) for i, f in enumerate(inputs[p])])
            parts.append("in=" + path)
        if p in outs:
            files[p] = os.path.join(d, p + ".out.pcap")
            parts.append("out=" + files[p])
        args += ["--port", "%s=pcap:%s" % (p, ",".join(parts))]
    cfg = os.path.join(d, "keel.conf")
    with open(cfg, "w") as f:
        f.write(setup)
    proc = run_keel("--config", cfg, *args, "--exit-when-drained", stdin=script)
    check(proc.returncode == 0, "keel exits 0", proc)
    return proc, {p: read_pcap(path) for p, path in files.items()}


def check_vxlan(frame, inner, proc):
    """The encapsulation of `inner`, field by field (RFC 7348, OVS's header)."""
    check(len(frame) == 50 + len(inner), "50 bytes of outer header", proc)
    check(frame[0:6] == mac(NH_MAC) and frame[6:12] == mac(BR_MAC), "outer MACs: neighbour, bridge", proc)
    check(frame[12:14] == b"\x08\x00", "outer IPv4", proc)
    ip = frame[14:34]
    ver, tos, tot, ident, frag, ttl, proto, _, sip, dip = struct.unpack("!BBHHHBBH4s4s", ip)
    check(ver == 0x45 and tos == 0 and ttl == 64 and proto == 17, "IPv4 header fields (tos 0, ttl 64, UDP)", proc)
    check(frag == 0x4000, "DF set, not a fragment", proc)
    check(tot == len(frame) - 14, "IPv4 total length", proc)
    check(csum(ip) == 0, "IPv4 header checksum", proc)
    check(sip == ip4("172.16.0.1") and dip == ip4("172.16.0.2"), "outer addresses", proc)
    sport, dport, ulen, ucsum = struct.unpack("!HHHH", frame[34:42])
    check(dport == 4789 and 32768 <= sport <= 60999, "UDP 4789 from a hashed source port", proc)
    check(ulen == len(frame) - 34 and ucsum == 0, "UDP length, checksum 0 over IPv4", proc)
    flags, vni = struct.unpack("!II", frame[42:50])
    check(flags == 0x08000000 and vni == 123 << 8, "VXLAN I flag, VNI 123", proc)
    check(frame[50:] == inner, "the inner frame unchanged", proc)
    return sport


def test_combined_push_trace_and_megaflows():
    frames = inner_frames()
    script = ("trace br-int udp,in_port=1,dl_src=%s,dl_dst=%s,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1000,"
              "tp_dst=2000\nflow-dump\n" % (VM_A, VM_B))
    proc, out = run(BASE + NEIGH + TO_TUNNEL, {"vm": frames}, ["up"], script)
    t = proc.stdout
    check("     -> output to native tunnel\n     -> tunneling to 172.16.0.2 via br-phy\n"
          "     -> tunneling from %s 172.16.0.1 to %s 172.16.0.2\n" % (BR_MAC, NH_MAC) in t,
          "the tunnel details of ofproto/trace", proc)
    check('\nbridge("br-phy")\n----------------\n 0. priority 32768\n    NORMAL\n' in t,
          "the underlay bridge's pass, nested", proc)
    acts = [l for l in t.splitlines() if l.startswith("Datapath actions: ")]
    check(len(acts) == 1 and acts[0].startswith("Datapath actions: tnl_push(tnl_port(") and "recirc(" not in acts[0],
          "combined: tnl_push and the underlay's output, no recirc", proc)
    check("header(size=50,type=4,eth(dst=%s,src=%s,dl_type=0x0800),ipv4(src=172.16.0.1,dst=172.16.0.2,proto=17,"
          "tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x7b))"
          % (NH_MAC, BR_MAC) in acts[0], "the header as Open vSwitch prints it", proc)
    flows = [l for l in t.splitlines() if l.startswith("recirc_id(") and "tnl_push" in l]
    # The rule matches in_port only: the three inner flows share one megaflow
    # (the UDP source port comes from the packet hash, no field is read).
    check(len(flows) == 1 and "recirc(" not in flows[0].split("actions:")[1], "one megaflow: tnl_push, no recirc",
          proc)
    check(not any("recirc_id(0x1" in l for l in t.splitlines()), "no second pass", proc)
    got = out["up"]
    check(len(got) == len(frames), "every frame went out of the uplink", proc)
    for f, i in zip(got, frames):
        check_vxlan(f, i, proc)
    return got


def test_fallback_same_bytes():
    combined = test_combined_push_trace_and_megaflows()
    frames = inner_frames()
    script = ("trace br-int udp,in_port=1,dl_src=%s,dl_dst=%s,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1000,"
              "tp_dst=2000\nflow-dump\nshow running-config\n" % (VM_A, VM_B))
    proc, out = run(BASE + NEIGH + TO_TUNNEL + "set tunnel-combine false\n", {"vm": frames}, ["up"], script)
    t = proc.stdout
    check("-> tunnel combine: not possible, tunnel-combine is false; recirculating" in t, "the trace's reason", proc)
    check("set tunnel-combine false" in t, "running-config keeps the knob", proc)
    flows = t.splitlines()
    check(any("tnl_push" in l and "recirc(0x1" in l for l in flows), "first pass: tnl_push + recirc", proc)
    check(any("recirc_id(0x1" in l for l in flows), "the second pass megaflow", proc)
    check(out["up"] == combined, "the recirculated path sends the same bytes as the combined one", proc)


def test_trunc_fallback_reason():
    frames = inner_frames(2)
    script = ("trace br-int udp,in_port=1,dl_src=%s,dl_dst=%s,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1000,"
              "tp_dst=2000\nflow-dump\n" % (VM_A, VM_B))
    proc, out = run(BASE + NEIGH + "add-flow br-int in_port=1,actions=output(port=2,max_len=60)\n", {"vm": frames},
                    ["up"], script)
    t = proc.stdout
    check("    output(port=2,max_len=60)\n" in t, "the rule's action as ovs-ofctl prints it", proc)
    check("-> tunnel combine: not possible, a trunc action precedes the tunnel output; recirculating" in t,
          "the trace says why it recirculates", proc)
    acts = [l for l in t.splitlines() if l.startswith("Datapath actions: ")]
    check(len(acts) == 1 and acts[0].startswith("Datapath actions: trunc(60),tnl_push(") and "recirc(0x1" in acts[0],
          "trunc, tnl_push, recirculation", proc)
    got = out["up"]
    check(len(got) == len(frames), "the truncated frames still leave encapsulated", proc)
    for f in got:
        check(f[12:14] == b"\x08\x00" and f[36:38] == b"\x12\xb5", "VXLAN encapsulated", proc)


def test_neighbour_miss_arps_and_installs_nothing():
    frames = inner_frames(1)
    proc, out = run(BASE + TO_TUNNEL, {"vm": frames}, ["up"], "flow-dump\n")
    got = out["up"]
    arps = [f for f in got if f[12:14] == b"\x08\x06"]
    check(len(arps) >= 1, "an ARP request went out of the uplink", proc)
    a = arps[0]
    check(a[0:6] == b"\xff" * 6 and a[6:12] == mac(BR_MAC), "broadcast from the bridge MAC", proc)
    check(a[20:22] == b"\x00\x01" and a[28:32] == ip4("172.16.0.1") and a[38:42] == ip4("172.16.0.2"),
          "who-has 172.16.0.2 tell 172.16.0.1", proc)
    check(not any(f[12:14] == b"\x08\x00" for f in got), "the packet itself is dropped", proc)
    check("tnl_push" not in proc.stdout, "no megaflow for it", proc)


def test_decap_and_unknown_vni():
    inner = inner_frames(2)
    ins = [vxlan_frame(inner[0], 123), vxlan_frame(inner[1], 999)]
    proc, out = run(BASE + NEIGH + FROM_TUNNEL, {"up": ins}, ["vm"], "upcall-show --format json\nflow-dump\n")
    check(out["vm"] == [inner[0]], "VNI 123 reaches the VM decapsulated; VNI 999 does not", proc)
    up = [j for j in json_lines(proc.stdout) if "upcalls" in j][0]
    check(up.get("tnl_no_port", 0) >= 1, "the unknown VNI is counted (tnl_no_port)", proc)
    check("tnl_pop(" in proc.stdout, "flow-dump shows the tnl_pop megaflow", proc)


def test_arp_reply_for_own_address():
    req = arp_request(NH_MAC, "172.16.0.2", "172.16.0.1")
    proc, out = run(BASE, {"up": [req]}, ["up", "vm"], "")
    replies = [f for f in out["up"] if f[12:14] == b"\x08\x06" and f[20:22] == b"\x00\x02"]
    check(len(replies) == 1, "one ARP reply", proc)
    r = replies[0]
    check(r[0:6] == mac(NH_MAC) and r[6:12] == mac(BR_MAC), "to the asker, from the bridge MAC", proc)
    check(r[22:28] == mac(BR_MAC) and r[28:32] == ip4("172.16.0.1") and r[32:38] == mac(NH_MAC) and
          r[38:42] == ip4("172.16.0.2"), "172.16.0.1 is-at the bridge MAC", proc)


# --- the same config in a private Open vSwitch 3.1: ofproto/trace's text -------

DIFF_TUNNELS = [
    ("vx0", "vxlan", ["options:remote_ip=172.16.0.2", "options:key=123"]),
    ("gre0", "gre", ["options:remote_ip=172.16.0.2", "options:key=456"]),
    ("gnv0", "geneve", ["options:remote_ip=172.16.0.2", "options:key=789"]),
    ("fl0", "vxlan", ["options:remote_ip=flow", "options:key=flow"]),
]
DIFF_RULES = [
    "in_port=1,actions=output:2",
    "in_port=1,actions=output:3",
    "in_port=1,actions=output:4",
    "in_port=1,actions=set_field:0xa->tun_metadata0,output:4",
    "in_port=1,actions=set_field:172.16.0.2->tun_dst,set_tunnel:0x1c8,output:5",
    "in_port=1,actions=output:5",
    "in_port=1,ip,actions=mod_dl_src:00:00:00:00:00:01,output:2,output:4",
    "in_port=1,actions=output(port=2,max_len=100)",
]
DIFF_FLOW = "udp,in_port=1,dl_src=%s,dl_dst=%s,nw_src=10.0.0.1,nw_dst=10.0.0.2,udp_src=1000,udp_dst=2000" % (VM_A, VM_B)
TLV = "{class=0xffff,type=0x80,len=4}->tun_metadata0"


def normalize(text):
    """What may differ: datapath port numbers (keel's vports are 1..255,
    OVS's dummy datapath names them after the UDP port)."""
    text = re.sub(r"tnl_port\(\d+\)", "tnl_port(N)", text)
    text = re.sub(r"out_port\(\d+\)", "out_port(M)", text)
    # The fallback's recirculation id: OVS recirculates with id 0 (the
    # packet re-enters the datapath from LOCAL), keel with 0x10000 + M.
    text = re.sub(r"recirc\((0|0x1[0-9a-f]{4})\)", "recirc(R)", text)
    return re.sub(r"\),\d+(?=[,)]|$)", "),P", text)


def trace_lines(text):
    keep = ("Datapath actions:", "Megaflow:", "-> tunneling", "-> output to native", ">> native tunnel",
            "-> neighbor cache", ">> Not tunneling")
    return [normalize(l.strip()) for l in text.splitlines() if any(k in l for k in keep)]


def ovs_traces():
    d = tempfile.mkdtemp(prefix="keel-ovs-tnl-")
    env = dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d, OVS_PKGDATADIR="/usr/share/openvswitch")
    db = "unix:%s/db.sock" % d

    def sh(*args):
        r = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(args), r.stderr.strip()))
        return r.stdout

    sh("ovsdb-tool", "create", d + "/conf.db", ovs_reference.SCHEMA)
    sh(ovs_reference.OVSDB, d + "/conf.db", "--remote=punix:%s/db.sock" % d, "--pidfile=%s/ovsdb.pid" % d,
       "--detach", "--log-file=%s/ovsdb.log" % d)
    out = []
    try:
        sh(ovs_reference.VSWITCHD, db, "--enable-dummy", "--disable-system", "--disable-system-route",
           "--pidfile=%s/vsw.pid" % d, "--detach", "--log-file=%s/vsw.log" % d)
        try:
            vs = ["ovs-vsctl", "--db=" + db, "--timeout=30"]
            sh(*vs, "add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=dummy",
               "other-config:hwaddr=" + BR_MAC, "--", "add-port", "br-phy", "up", "--", "set", "interface", "up",
               "type=dummy", "ofport_request=1")
            cmd = vs + ["add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=dummy", "--",
                        "add-port", "br-int", "vm", "--", "set", "interface", "vm", "type=dummy", "ofport_request=1"]
            for i, (name, typ, opts) in enumerate(DIFF_TUNNELS):
                cmd += ["--", "add-port", "br-int", name, "--", "set", "interface", name, "type=" + typ,
                        "ofport_request=%d" % (i + 2)] + opts
            sh(*cmd)
            pid = open(d + "/vsw.pid").read().strip()
            ctl = ["ovs-appctl", "-t", "%s/ovs-vswitchd.%s.ctl" % (d, pid)]
            sh(*ctl, "netdev-dummy/ip4addr", "br-phy", "172.16.0.1/24")
            sh(*ctl, "ovs/route/add", "172.16.0.0/24", "br-phy")
            sh(*ctl, "tnl/neigh/set", "br-phy", "172.16.0.2", NH_MAC)
            sh("ovs-ofctl", "add-flow", "unix:%s/br-phy.mgmt" % d, "actions=normal")
            sh("ovs-ofctl", "add-tlv-map", "unix:%s/br-int.mgmt" % d, TLV)
            for r in DIFF_RULES:
                sh("ovs-ofctl", "del-flows", "unix:%s/br-int.mgmt" % d)
                sh("ovs-ofctl", "add-flow", "unix:%s/br-int.mgmt" % d, r)
                out.append(trace_lines(sh(*ctl, "ofproto/trace", "br-int", DIFF_FLOW)))
            sh(*ctl, "exit")
        finally:
            # ovs-vswitchd too when a step above failed before its `exit`
            # (a leaked daemon would keep a core busy for the rest of the run).
            for pidfile in ("vsw.pid", "ovsdb.pid"):
                try:
                    os.kill(int(open(os.path.join(d, pidfile)).read().strip()), 15)
                except (OSError, ValueError):
                    pass
    finally:
        shutil.rmtree(d, True)
    return out


def keel_traces():
    setup = ("add-br br-phy\nadd-port br-phy up\nset bridge br-phy other_config:hwaddr=" + BR_MAC + "\n"
             "ip-add br-phy 172.16.0.1/24\nneigh-set br-phy 172.16.0.2 " + NH_MAC + "\n"
             "add-flow br-phy actions=normal\nadd-br br-int\nadd-port br-int vm\n")
    for name, typ, opts in DIFF_TUNNELS:
        setup += "add-port br-int %s -- set Interface %s type=%s %s\n" % (name, name, typ, " ".join(opts))
    setup += "add-tlv-map br-int %s\n" % TLV
    out = []
    for r in DIFF_RULES:
        p = run_keel("--port", "vm=null", "--port", "up=null", "--config", EMPTY_CONFIG,
                     stdin=setup + "add-flow br-int %s\ntrace br-int %s\n" % (r, DIFF_FLOW))
        check(p.returncode == 0, "keel runs the setup and the trace", p)
        out.append((trace_lines(p.stdout), p))
    return out


def test_trace_equals_open_vswitch():
    if not ovs_reference.available():
        raise SystemExit("Open vSwitch 3.1 (ovs-vswitchd, ovsdb-server) is not installed: toolchains/setup.sh")
    theirs = ovs_traces()
    mine = keel_traces()
    for rule, t, (k, proc) in zip(DIFF_RULES, theirs, mine):
        check(t and k == t, "trace of %r: keel %r, Open vSwitch %r" % (rule, k, t), proc)


if __name__ == "__main__":
    main([test_combined_push_trace_and_megaflows, test_fallback_same_bytes, test_trunc_fallback_reason,
          test_neighbour_miss_arps_and_installs_nothing,
          test_decap_and_unknown_vni, test_arp_reply_for_own_address, test_trace_equals_open_vswitch])

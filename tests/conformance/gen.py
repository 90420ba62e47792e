"""Cases for the differential test: rules + frames, generated from a seed.

A case is a bridge configuration (port VLAN settings, MTUs, vlan-limit), a
list of ovs-ofctl flows and a list of (in_port, frame) in input order.
Nothing here says what the output should be: Open vSwitch says so, live.

Categories (the generator of each draws from one random.Random(seed, i)):
  match      matches on every field keel parses: prefixes, arbitrary masks,
             shorthands (ip, tcp6, arp ...), tcp_flags, IPv6, ARP, ICMP, ND
  rewrite    set_field / mod_* / load / move / dec_ttl / VLAN push, pop and
             rewrite, on frames with right, wrong and zero L4 checksums
  pipeline   resubmit, goto_table, registers, metadata, OF1.3
             write_actions / clear_actions, loops and their limits
  normal     NORMAL with access / trunk / native VLAN ports, moving hosts
  malformed  every truncation point of each header, bad lengths, IPv4
             fragments, IPv6 extension chains, LLC/SNAP, VLAN stacks
             (under vlan-limit 0, 1, 2), runts, jumbo frames and MTUs
"""
import random

from scapy.all import (ARP, ICMP, IP, SCTP, TCP, UDP, Dot1AD, Dot1Q, Ether, ICMPv6EchoRequest,
                       ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr, IPv6,
                       IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, LLC,
                       SNAP, Raw)

NPORTS = 4
CATEGORIES = ("match", "rewrite", "pipeline", "normal", "malformed")


class Case:
    def __init__(self, name, category):
        self.name = name
        self.category = category
        self.flows = []
        self.packets = []        # (in_port, bytes)
        self.port_config = {}    # port -> {"tag": "10", "trunks": "10,20", "vlan_mode": "trunk"}
        self.mtu = {}            # port -> mtu_request (default 1500)
        self.vlan_limit = 1
        self.of_version = None   # e.g. "OpenFlow13" for OF1.1+ instructions
        self.n_revalidators = 0  # other_config:n-revalidator-threads (0: the default)

    def describe(self):
        lines = ["case %s (%s)" % (self.name, self.category)]
        if self.of_version:
            lines.append("  protocol: " + self.of_version)
        if self.vlan_limit != 1:
            lines.append("  vlan-limit: %d" % self.vlan_limit)
        if self.n_revalidators:
            lines.append("  n-revalidator-threads: %d" % self.n_revalidators)
        for p, c in sorted(self.port_config.items()):
            lines.append("  port p%d: %s" % (p, " ".join("%s=%s" % kv for kv in sorted(c.items()))))
        for p, m in sorted(self.mtu.items()):
            lines.append("  port p%d: mtu_request=%d" % (p, m))
        lines += ["  flow: " + f for f in self.flows]
        for i, (p, fr) in enumerate(self.packets):
            lines.append("  packet %d in p%d (%d bytes): %s" % (i, p, len(fr), short_hex(fr)))
        return "\n".join(lines)


def short_hex(fr, limit=128):
    """Hex of a frame, its first `limit` bytes when longer."""
    return fr.hex() if len(fr) <= limit else fr[:limit].hex() + "... (%d more bytes)" % (len(fr) - limit)


# --- values -------------------------------------------------------------------

MACS = ["02:00:00:00:00:%02x" % i for i in range(1, 9)] + ["ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01"]
IP4 = ["10.0.0.%d" % i for i in range(1, 6)] + ["10.1.2.3", "192.168.1.10", "172.16.0.1"]
IP6 = ["2001:db8::1", "2001:db8::2", "2001:db8:1::5", "fe80::1", "ff02::1"]


def rmac(r):
    return r.choice(MACS[:8])


def mask_ip4(r, addr):
    n = r.choice([8, 16, 24, 28, 32, 0])
    if n == 0:  # an arbitrary (non-prefix) mask
        return "%s/%s" % (addr, r.choice(["255.0.255.0", "0.255.0.255", "255.255.0.255"]))
    return "%s/%d" % (addr, n) if n != 32 else addr


def mask_ip6(r, addr):
    n = r.choice([32, 64, 128, 48])
    return "%s/%d" % (addr, n) if n != 128 else addr


# --- frames ---------------------------------------------------------------------

def l4_layer(r, proto, sport=None, dport=None, flags=None):
    sport = sport if sport is not None else r.choice([80, 443, 1000, 5000, 53])
    dport = dport if dport is not None else r.choice([80, 443, 2000, 8080, 53])
    if proto == "tcp":
        return TCP(sport=sport, dport=dport, flags=flags if flags is not None else r.choice(["S", "SA", "A", "F", "R", "PA"]))
    if proto == "udp":
        return UDP(sport=sport, dport=dport)
    if proto == "sctp":
        return SCTP(sport=sport, dport=dport)
    if proto == "icmp":
        return ICMP(type=r.choice([0, 8, 3, 11]), code=r.choice([0, 1]))
    raise ValueError(proto)


def frame(r, kind=None, vlan=None, src=None, dst=None, payload=None):
    """A well-formed frame of `kind` with random addresses; returns (bytes, fields)."""
    kind = kind or r.choice(["tcp", "udp", "icmp", "arp", "tcp6", "udp6", "icmp6", "nd", "ip", "sctp", "other"])
    src = src or rmac(r)
    dst = dst or r.choice(MACS)
    eth = Ether(src=src, dst=dst)
    if vlan is not None:
        eth = eth / Dot1Q(vlan=vlan, prio=r.choice([0, 0, 3, 5]))
    f = {"kind": kind, "dl_src": src, "dl_dst": dst, "vlan": vlan}
    pl = Raw(bytes(r.randrange(256) for _ in range(payload if payload is not None else r.choice([0, 4, 20]))))
    if kind in ("tcp", "udp", "icmp", "ip", "sctp"):
        f.update(nw_src=r.choice(IP4), nw_dst=r.choice(IP4), nw_tos=r.choice([0, 0x10, 0xb8, 0x03]),
                 nw_ttl=r.choice([64, 1, 255]))
        ip = IP(src=f["nw_src"], dst=f["nw_dst"], tos=f["nw_tos"], ttl=f["nw_ttl"], id=r.randrange(65536))
        if kind == "ip":
            ip.proto = r.choice([47, 50, 89])
            pkt = eth / ip / pl
        else:
            l4 = l4_layer(r, kind)
            if kind in ("tcp", "udp", "sctp"):
                f.update(tp_src=l4.sport, tp_dst=l4.dport)
            if kind == "tcp":
                f["tcp_flags"] = int(l4.flags)
            if kind == "icmp":
                f.update(icmp_type=l4.type, icmp_code=l4.code)
            pkt = eth / ip / l4 / pl
    elif kind in ("tcp6", "udp6", "icmp6"):
        f.update(ipv6_src=r.choice(IP6), ipv6_dst=r.choice(IP6), ipv6_label=r.choice([0, 1, 0x12345]))
        ip = IPv6(src=f["ipv6_src"], dst=f["ipv6_dst"], fl=f["ipv6_label"], hlim=r.choice([64, 1]))
        if kind == "icmp6":
            l4 = ICMPv6EchoRequest(id=r.randrange(100))
        else:
            l4 = l4_layer(r, kind[:3])
            f.update(tp_src=l4.sport, tp_dst=l4.dport)
        pkt = eth / ip / l4 / pl
    elif kind == "nd":
        tgt = r.choice(IP6)
        f.update(ipv6_src=r.choice(IP6), nd_target=tgt)
        if r.random() < 0.5:
            pkt = eth / IPv6(src=f["ipv6_src"], dst="ff02::1:ff00:1", hlim=255) / ICMPv6ND_NS(tgt=tgt) / \
                ICMPv6NDOptSrcLLAddr(lladdr=src)
            f["nd_type"] = 135
        else:
            pkt = eth / IPv6(src=f["ipv6_src"], dst="ff02::1", hlim=255) / ICMPv6ND_NA(tgt=tgt, R=0, S=1, O=1) / \
                ICMPv6NDOptDstLLAddr(lladdr=src)
            f["nd_type"] = 136
    elif kind == "arp":
        f.update(arp_op=r.choice([1, 2]), arp_spa=r.choice(IP4), arp_tpa=r.choice(IP4), arp_sha=src,
                 arp_tha=r.choice(["00:00:00:00:00:00", rmac(r)]))
        pkt = eth / ARP(op=f["arp_op"], hwsrc=src, psrc=f["arp_spa"], hwdst=f["arp_tha"], pdst=f["arp_tpa"])
    else:  # other: an unknown ethertype
        pkt = Ether(src=src, dst=dst, type=0x88b5) / Raw(bytes(r.randrange(256) for _ in range(30)))
        b = bytes(pkt)
        return pad(b), f
    return pad(bytes(pkt)), f


def pad(b):
    return b + b"\0" * max(0, 60 - len(b))


# --- matches ----------------------------------------------------------------------

SHORTHAND = {"tcp": "tcp", "udp": "udp", "icmp": "icmp", "ip": "ip", "sctp": "sctp", "arp": "arp",
             "tcp6": "tcp6", "udp6": "udp6", "icmp6": "icmp6", "nd": "icmp6", "other": "dl_type=0x88b5"}


def match_for(r, f, exact=0.7):
    """A match string that the frame with fields `f` hits (mostly), drawing
    each field from the frame with probability `exact`, else a random value."""
    parts = []
    kind = f["kind"]
    if r.random() < 0.8:
        parts.append(SHORTHAND[kind])

    def pick(name, val, other):
        parts.append("%s=%s" % (name, val if r.random() < exact else other))

    if r.random() < 0.3:
        pick("dl_src", f["dl_src"], rmac(r))
    if r.random() < 0.3:
        pick("dl_dst", f["dl_dst"], rmac(r))
    if r.random() < 0.15:
        parts.append("dl_dst=01:00:00:00:00:00/01:00:00:00:00:00")
    if f.get("vlan") is not None and r.random() < 0.4:
        pick("dl_vlan", f["vlan"], r.choice([1, 20, 4000]))
    elif r.random() < 0.1:
        parts.append("vlan_tci=0")
    sh = SHORTHAND[kind]
    if parts and parts[0] == sh and "=" not in sh:
        if kind in ("tcp", "udp", "icmp", "ip", "sctp"):
            if r.random() < 0.5:
                pick("nw_src", mask_ip4(r, f["nw_src"]), mask_ip4(r, r.choice(IP4)))
            if r.random() < 0.5:
                pick("nw_dst", mask_ip4(r, f["nw_dst"]), mask_ip4(r, r.choice(IP4)))
            if r.random() < 0.15:
                pick("nw_tos", f["nw_tos"] & 0xfc, 0x20)
            if r.random() < 0.1:
                pick("nw_ecn", f["nw_tos"] & 3, 1)
            if r.random() < 0.1:
                pick("nw_ttl", f["nw_ttl"], 7)
            if r.random() < 0.1:
                parts.append("ip_frag=no")
        if kind in ("tcp", "udp", "sctp", "tcp6", "udp6"):
            if r.random() < 0.5:
                pick("tp_dst", f["tp_dst"], r.choice([22, 9999]))
            if r.random() < 0.3:
                v = f["tp_src"]
                parts.append("tp_src=0x%x/0x%x" % (v & 0xff00, 0xff00) if r.random() < 0.5 else "tp_src=%d" % v)
        if kind == "tcp" and r.random() < 0.4:
            fl = f["tcp_flags"]
            opts = ["+syn", "-syn", "+ack", "+syn-ack", "+fin", "+rst", "0x%03x/0x%03x" % (fl & 0x12, 0x12)]
            parts.append("tcp_flags=" + r.choice(opts))
        if kind == "icmp" and r.random() < 0.6:
            pick("icmp_type", f["icmp_type"], 5)
            if r.random() < 0.5:
                pick("icmp_code", f["icmp_code"], 9)
        if kind in ("tcp6", "udp6", "icmp6"):
            if r.random() < 0.5:
                pick("ipv6_src", mask_ip6(r, f["ipv6_src"]), mask_ip6(r, r.choice(IP6)))
            if r.random() < 0.4:
                pick("ipv6_dst", mask_ip6(r, f["ipv6_dst"]), mask_ip6(r, r.choice(IP6)))
            if r.random() < 0.15:
                pick("ipv6_label", "0x%x" % f["ipv6_label"], "0x7")
        if kind == "nd" and r.random() < 0.7:
            parts.append("icmp_type=%d" % f["nd_type"])
            if r.random() < 0.6:
                pick("nd_target", f["nd_target"], r.choice(IP6))
            if r.random() < 0.3:
                pick("nd_sll" if f["nd_type"] == 135 else "nd_tll", f["dl_src"], rmac(r))
        if kind == "arp":
            if r.random() < 0.5:
                pick("arp_op", f["arp_op"], 3)
            if r.random() < 0.5:
                pick("arp_spa", mask_ip4(r, f["arp_spa"]), r.choice(IP4))
            if r.random() < 0.4:
                pick("arp_tpa", f["arp_tpa"], r.choice(IP4))
            if r.random() < 0.3:
                pick("arp_sha", f["arp_sha"], rmac(r))
            if r.random() < 0.2:
                pick("arp_tha", f["arp_tha"], rmac(r))
    return parts


def out_actions(r, in_port):
    c = r.random()
    if c < 0.55:
        return "output:%d" % r.choice([p for p in range(1, NPORTS + 1) if p != in_port])
    if c < 0.65:
        return "drop"
    if c < 0.75:
        return "in_port"
    if c < 0.8:
        return "output:%d" % in_port  # output to the input port: dropped
    if c < 0.9:
        ps = r.sample(range(1, NPORTS + 1), 2)
        return ",".join("output:%d" % p for p in ps)
    return r.choice(["ALL", "FLOOD", "output:%d,output:%d" % (in_port % NPORTS + 1, in_port % NPORTS + 1)])


def gen_match(r, name):
    c = Case(name, "match")
    frames = [frame(r) for _ in range(r.randint(3, 8))]
    ins = [r.randint(1, NPORTS) if r.random() < 0.3 else 1 for _ in frames]
    prios = r.sample(range(1, 1000), 6)
    for i in range(r.randint(2, 6)):
        k = r.randrange(len(frames))
        parts = match_for(r, frames[k][1])
        if r.random() < 0.3:
            parts.insert(0, "in_port=%d" % ins[k])
        c.flows.append(",".join(["priority=%d" % prios[i]] + parts + ["actions=" + out_actions(r, ins[k])]))
    if r.random() < 0.5:
        c.flows.append("priority=0,actions=output:%d" % r.randint(1, NPORTS))
    c.packets = [(p, fr) for p, (fr, _) in zip(ins, frames)]
    # Repeat some frames: the second of a flow hits the datapath's caches.
    c.packets += [c.packets[r.randrange(len(c.packets))] for _ in range(r.randint(1, 4))]
    return c


# --- rewrites -----------------------------------------------------------------------

def rewrite_actions(r, f):
    kind = f["kind"]
    acts = []
    opts = ["mod_dl_src:%s" % rmac(r), "mod_dl_dst:%s" % rmac(r), "set_field:%s->eth_dst" % rmac(r)]
    if kind in ("tcp", "udp", "icmp", "ip", "sctp"):
        opts += ["mod_nw_src:%s" % r.choice(IP4), "mod_nw_dst:%s" % r.choice(IP4), "mod_nw_tos:%d" % r.choice([0, 32, 184]),
                 "mod_nw_ecn:%d" % r.choice([1, 3]), "mod_nw_ttl:%d" % r.choice([1, 9]), "dec_ttl",
                 "set_field:%s->ip_dst" % r.choice(IP4), "set_field:%d->ip_dscp" % r.choice([0, 46]),
                 "load:0x0a000063->NXM_OF_IP_SRC[]", "move:NXM_OF_IP_SRC[]->NXM_OF_IP_DST[]"]
    if kind in ("tcp", "udp", "sctp"):
        opts += ["mod_tp_src:%d" % r.choice([1, 4444]), "mod_tp_dst:%d" % r.choice([0, 8443]),
                 "set_field:%d->%s_dst" % (r.choice([7, 65535]), kind), "load:0x1f90->NXM_OF_%s_DST[]" % kind.upper()
                 if kind != "sctp" else "set_field:9->sctp_src"]
    if kind in ("tcp6", "udp6", "icmp6"):
        opts += ["set_field:%s->ipv6_src" % r.choice(IP6), "set_field:%s->ipv6_dst" % r.choice(IP6), "dec_ttl",
                 "set_field:0x54321->ipv6_label"]
        if kind != "icmp6":
            opts += ["mod_tp_dst:%d" % r.choice([22, 8080])]
    if kind == "arp":
        opts += ["set_field:%s->arp_tpa" % r.choice(IP4), "set_field:%s->arp_spa" % r.choice(IP4),
                 "load:0xc0a80001->NXM_OF_ARP_TPA[]", "move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]",
                 "set_field:%s->arp_sha" % rmac(r), "set_field:2->arp_op", "mod_nw_src:%s" % r.choice(IP4)]
    vlan = ["mod_vlan_vid:%d" % r.choice([10, 4095, 1]), "mod_vlan_pcp:%d" % r.choice([0, 7]), "strip_vlan",
            "push_vlan:0x8100", "push_vlan:0x88a8", "set_field:%d->vlan_vid" % (0x1000 | r.choice([5, 300])),
            "set_field:%d->vlan_pcp" % r.choice([2, 6]), "load:0x%x->NXM_OF_VLAN_TCI[]" % r.choice([0, 0x1064, 0x3005]),
            "set_field:0x%x->vlan_tci" % r.choice([0x1001, 0]), "pop_vlan"]
    if f.get("vlan") is None and r.random() < 0.8:
        # OpenFlow 1.2's set_field of vlan_vid / vlan_pcp needs a tag (a
        # prerequisite ovs-ofctl checks): mostly leave them to tagged frames.
        vlan = [a for a in vlan if not a.startswith("set_field") or "vlan_tci" in a]
    for _ in range(r.randint(1, 3)):
        acts.append(r.choice(opts + vlan))
    return acts


def gen_rewrite(r, name):
    c = Case(name, "rewrite")
    for _ in range(r.randint(2, 4)):
        vlan = r.choice([None, None, 10, 20])
        fr, f = frame(r, vlan=vlan)
        if f["kind"] in ("tcp", "udp") and r.random() < 0.4:
            fr = corrupt_l4_csum(r, fr, f, vlan)
        in_port = 1
        acts = rewrite_actions(r, f)
        m = match_for(r, f, exact=1.0)
        if vlan is not None and any(a.startswith("set_field") and "->vlan_" in a for a in acts):
            m.append("vlan_tci=0x1000/0x1000")
        c.flows.append(",".join(["priority=%d" % r.randint(1, 1000), "in_port=1"] + m +
                                ["actions=" + ",".join(acts + ["output:%d" % r.randint(2, NPORTS)])]))
        c.packets.append((in_port, fr))
    if r.random() < 0.25:
        # VLAN writes on a double-tagged frame (the parser keys only the
        # outer tag under the default vlan-limit 1).
        fr = vlan_stack(r, r.choice(["udp", "tcp", "arp"]))
        acts = [r.choice(["push_vlan:0x8100", "push_vlan:0x88a8", "pop_vlan", "strip_vlan", "mod_vlan_vid:7",
                          "mod_vlan_pcp:3", "set_field:4101->vlan_vid", "load:0x1064->NXM_OF_VLAN_TCI[]",
                          "set_field:0->vlan_tci"]) for _ in range(r.randint(1, 3))]
        c.vlan_limit = r.choice([1, 1, 2])
        c.flows.append("priority=1001,in_port=1,dl_vlan=10,actions=" + ",".join(acts + ["output:%d" % r.randint(2, NPORTS)]))
        c.packets.append((1, fr))
    if r.random() < 0.3:
        # Rewrites of a malformed frame: truncated inside L3/L4, or a bad
        # IHL / total length; a catch-all rule rewrites whatever it keys to.
        fr, f = frame(r, kind=r.choice(["tcp", "udp", "icmp", "arp", "tcp6", "udp6"]), payload=0)
        b = bytearray(fr)
        how = r.choice(["cut", "cut", "ihl", "totlen"]) if f["kind"] in ("tcp", "udp", "icmp") else "cut"
        if how == "cut":
            b = b[:r.randrange(15, len(b))]
        elif how == "ihl":
            b[14] = r.choice([0x44, 0x4f, 0x46])
        else:
            b[16:18] = r.choice([8, 30, 1000]).to_bytes(2, "big")
        c.flows.append("priority=0,in_port=1," + SHORTHAND[f["kind"]] + ",actions=" + ",".join(rewrite_actions(r, f) + ["output:%d" % r.randint(2, NPORTS)]))
        c.packets.append((1, bytes(b)))
    c.packets += c.packets[:1]
    return c


def corrupt_l4_csum(r, fr, f, vlan):
    """The frame with its UDP/TCP checksum wrong or zero."""
    eth = 18 if vlan is not None else 14
    off = eth + 20 + (16 if f["kind"] == "tcp" else 6)
    v = 0 if r.random() < 0.5 else 0x1234
    return fr[:off] + bytes([v >> 8, v & 0xff]) + fr[off + 2:]


# --- pipelines ----------------------------------------------------------------------

def gen_pipeline(r, name):
    c = Case(name, "pipeline")
    frames = [frame(r, kind=r.choice(["tcp", "udp", "icmp", "arp", "udp6"])) for _ in range(r.randint(2, 4))]
    style = r.choice(["resubmit", "goto", "regs", "of13", "loop", "of13", "fanout", "ports"])
    out = lambda: "output:%d" % r.randint(2, NPORTS)  # noqa: E731
    f0 = frames[0][1]
    m0 = ",".join(match_for(r, f0, exact=1.0))
    m0 = ("," + m0) if m0 else ""
    if style == "resubmit":
        c.flows += ["table=0,priority=10%s,actions=%s,resubmit(,1),%s" % (m0, r.choice(["mod_dl_src:02:00:00:00:00:09", "load:1->NXM_NX_REG0[]"]), out()),
                    "table=0,priority=1,actions=resubmit(,2)",
                    "table=1,priority=5,reg0=1,actions=%s" % out(),
                    "table=1,priority=1,actions=resubmit(,2)",
                    "table=2,priority=1,ip,actions=%s" % out(),
                    "table=2,priority=0,actions=drop"]
    elif style == "goto":
        c.flows += ["table=0,priority=10%s,actions=goto_table:1" % m0,
                    "table=0,priority=1,actions=%s,goto_table:2" % out(),
                    "table=1,priority=5,ip,actions=%s,goto_table:2" % out(),
                    "table=2,priority=5,udp,actions=%s" % out()]
    elif style == "regs":
        c.flows += ["table=0,priority=10,actions=load:0x%x->NXM_NX_REG%d[0..15],move:NXM_OF_ETH_SRC[0..31]->NXM_NX_REG1[],resubmit(,1)" % (r.randrange(1, 9), r.randrange(3)),
                    "table=1,priority=10,reg0=0x3/0x3,actions=%s" % out(),
                    "table=1,priority=8,reg2=0x5,actions=%s" % out(),
                    "table=1,priority=5,reg1=0x%s,actions=%s" % (f0["dl_src"].replace(":", "")[4:], out()),
                    "table=1,priority=1,actions=write_metadata:0x5/0xff,resubmit(,2)" if r.random() < 0.3 else "table=1,priority=1,actions=resubmit(,2)",
                    "table=2,priority=1,metadata=0x5/0xff,actions=%s" % out(),
                    "table=2,priority=0,actions=%s" % out()]
        if "write_metadata" in c.flows[4]:
            c.of_version = "OpenFlow13"
            c.flows[4] = "table=1,priority=1,actions=write_metadata:0x5/0xff,goto_table:2"
    elif style == "of13":
        c.of_version = "OpenFlow13"
        c.flows += ["table=0,priority=10%s,actions=write_actions(%s),goto_table:1" % (m0, out()),
                    "table=0,priority=1,actions=write_actions(%s,%s),goto_table:%d" % (
                        r.choice(["set_field:02:00:00:00:00:0a->eth_dst", "dec_ttl", "push_vlan:0x8100,set_field:4100->vlan_vid"]),
                        out(), r.choice([1, 3])),
                    "table=1,priority=5,ip,actions=%s" % r.choice(["clear_actions", "set_field:10.9.9.9->ip_dst,goto_table:2",
                                                                   "write_actions(%s)" % out(), "apply_actions(%s),goto_table:2" % out()]),
                    "table=1,priority=1,actions=write_metadata:0x1/0x1,goto_table:2",
                    "table=2,priority=5,metadata=0x1/0x1,actions=write_actions(%s)" % out(),
                    "table=2,priority=1,actions=%s" % r.choice(["clear_actions", "apply_actions(%s)" % out()])]
    elif style == "ports":
        # Output to a port taken from a register or a field; resubmit with a
        # port (in_port rewritten for the lookup).
        c.flows += ["table=0,priority=10,in_port=1,actions=load:%d->NXM_NX_REG0[0..15],resubmit(%d,1)" % (
                        r.randint(1, NPORTS + 1), r.randint(1, NPORTS)),
                    "table=0,priority=5,actions=resubmit:%d" % r.randint(1, NPORTS),
                    "table=1,priority=10,in_port=2,actions=output:NXM_NX_REG0[0..15]",
                    "table=1,priority=5,in_port=3,actions=output:NXM_NX_REG0[0..15],in_port",
                    "table=1,priority=1,actions=%s" % out()]
    elif style == "fanout":
        # Open vSwitch's limit of 4096 resubmits a packet: each table
        # resubmits twice to the next, 2 + 4 + ... + 2^n in all; over the
        # limit the whole translation is dropped.
        n = r.choice([10, 11, 12, 13])
        c.flows.append("table=0,priority=1,actions=resubmit(,1),%s" % out())
        for t in range(1, n + 1):
            c.flows.append("table=%d,priority=1,actions=resubmit(,%d),resubmit(,%d)" % (t, t + 1, t + 1))
    else:  # loop: resubmit loops and their limits
        c.flows += ["table=0,priority=1,actions=resubmit(,1)",
                    "table=1,priority=1,actions=%sresubmit(,%d)" % ("%s," % out() if r.random() < 0.3 else "", r.choice([0, 1, 2])),
                    "table=2,priority=1,actions=resubmit(,0)"]
    c.packets = [(1, fr) for fr, _ in frames]
    return c


# --- NORMAL ---------------------------------------------------------------------------

def gen_normal(r, name):
    c = Case(name, "normal")
    vlans = [10, 20]
    for p in range(1, NPORTS + 1):
        kind = r.choice(["plain", "plain", "access", "trunk", "native-tagged", "native-untagged"])
        if kind == "access":
            c.port_config[p] = {"tag": str(r.choice(vlans))}
        elif kind == "trunk":
            c.port_config[p] = {"trunks": r.choice(["10,20", "10", "20"])}
        elif kind.startswith("native"):
            c.port_config[p] = {"tag": str(r.choice(vlans)), "vlan_mode": kind, "trunks": "10,20"}
    c.flows = ["priority=0,actions=NORMAL"]
    hosts = [(MACS[i], r.randint(1, NPORTS)) for i in range(4)]
    for _ in range(r.randint(6, 12)):
        h = r.randrange(len(hosts))
        if r.random() < 0.15:  # the host moves
            hosts[h] = (hosts[h][0], r.randint(1, NPORTS))
        src, port = hosts[h]
        dst = r.choice([hm for hm, _ in hosts] + ["ff:ff:ff:ff:ff:ff"])
        pc = c.port_config.get(port, {})
        if "trunks" in pc or not pc:
            vlan = r.choice([None, 10, 20, 30]) if "trunks" in pc or r.random() < 0.2 else None
        else:
            vlan = None if r.random() < 0.8 else 10
        fr, _ = frame(r, kind=r.choice(["udp", "tcp", "arp"]), vlan=vlan, src=src, dst=dst)
        c.packets.append((port, fr))
    return c


# --- malformed ----------------------------------------------------------------------------

MALFORMED_FLOWS = ["priority=100,tcp,tp_dst=80,actions=output:2", "priority=90,udp,actions=output:3",
                   "priority=80,ip,actions=output:4", "priority=70,ipv6,actions=output:2,output:3",
                   "priority=60,arp,actions=output:3,output:4", "priority=50,dl_vlan=10,actions=output:4",
                   "priority=40,dl_type=0x8100,actions=output:2,output:4", "priority=30,dl_type=0x88a8,actions=output:3",
                   "priority=20,icmp6,actions=output:4", "priority=10,ip,ip_frag=later,actions=output:2",
                   "priority=9,ip,ip_frag=first,actions=output:3", "priority=1,actions=output:2,output:3,output:4"]


def vlan_stack(r, inner_kind):
    fr, _ = frame(r, kind=inner_kind)
    outer, inner = r.choice([(0x8100, 0x8100), (0x88a8, 0x8100), (0x8100, 0x88a8), (0x88a8, 0x88a8)])
    tags = b"".join(t.to_bytes(2, "big") + v.to_bytes(2, "big") for t, v in ((outer, 10), (inner, 20)))
    if r.random() < 0.3:
        tags += (0x8100).to_bytes(2, "big") + (30).to_bytes(2, "big")
    return fr[:12] + tags + fr[12:]


def gen_malformed(r, name):
    c = Case(name, "malformed")
    c.flows = list(MALFORMED_FLOWS)
    if r.random() < 0.3:
        c.flows.append("priority=95,dl_vlan=20,actions=output:3")
    if r.random() < 0.3:
        c.flows.append("priority=96,vlan_tci=0x1000/0x1000,udp,actions=output:4")
    style = r.choice(["truncate", "truncate", "badlen", "frag", "ipv6ext", "llc", "vlanstack", "vlanstack",
                      "runt", "jumbo"])
    pkts = []
    if style == "truncate":
        fr, _ = frame(r, kind=r.choice(["tcp", "udp", "icmp", "arp", "tcp6", "udp6", "nd"]),
                      vlan=r.choice([None, 10]), payload=0)
        # every truncation point in the headers, a few per case
        cut = sorted(r.sample(range(14, len(fr)), min(6, len(fr) - 14)))
        pkts = [fr[:n] for n in cut]
    elif style == "badlen":
        fr, f = frame(r, kind=r.choice(["tcp", "udp"]))
        b = bytearray(fr)
        what = r.choice(["ihl_small", "ihl_big", "totlen_small", "totlen_big", "udp_len", "tcp_off", "version"])
        if what == "ihl_small":
            b[14] = 0x44
        elif what == "ihl_big":
            b[14] = 0x4f
        elif what == "totlen_small":
            b[16:18] = (10).to_bytes(2, "big")
        elif what == "totlen_big":
            b[16:18] = (1400).to_bytes(2, "big")
        elif what == "udp_len" and f["kind"] == "udp":
            b[38:40] = (r.choice([3, 900])).to_bytes(2, "big")
        elif what == "tcp_off" and f["kind"] == "tcp":
            b[46] = r.choice([0x20, 0xf0])
        else:
            b[14] = 0x65
        pkts = [bytes(b)]
    elif style == "frag":
        for _ in range(3):
            ip = IP(src=r.choice(IP4), dst=r.choice(IP4), id=7, flags=r.choice(["MF", 0, "MF"]),
                    frag=r.choice([0, 0, 3, 185]), proto=r.choice([6, 17]))
            body = bytes(TCP(dport=80)) if ip.proto == 6 else bytes(UDP(dport=53))
            if r.random() < 0.3:
                body = body[:4]
            pkts.append(pad(bytes(Ether(src=rmac(r), dst=rmac(r)) / ip / Raw(body + b"x" * 8))))
    elif style == "ipv6ext":
        chain = [r.choice([IPv6ExtHdrHopByHop(), IPv6ExtHdrRouting(), IPv6ExtHdrDestOpt(),
                           IPv6ExtHdrFragment(m=1, offset=0, id=9), IPv6ExtHdrFragment(m=0, offset=5, id=9)])
                 for _ in range(r.randint(1, 3))]
        l = IPv6(src=r.choice(IP6), dst=r.choice(IP6))
        for e in chain:
            l = l / e
        l4 = r.choice([TCP(dport=80), UDP(dport=53), ICMPv6EchoRequest()])
        fr = pad(bytes(Ether(src=rmac(r), dst=rmac(r)) / l / l4))
        pkts = [fr]
        if r.random() < 0.5:
            pkts.append(fr[:r.randrange(54, len(fr))])
    elif style == "llc":
        body = r.choice([LLC(dsap=0xaa, ssap=0xaa, ctrl=3) / SNAP(OUI=0, code=0x0800) / IP(dst="10.0.0.1") / UDP(),
                         LLC(dsap=0x42, ssap=0x42, ctrl=3) / Raw(b"\0" * 30),
                         LLC(dsap=0xaa, ssap=0xaa, ctrl=3) / SNAP(OUI=0x123, code=0x0800) / Raw(b"\0" * 20)])
        b = bytes(body)
        fr = bytes(Ether(src=rmac(r), dst=rmac(r), type=len(b))) + b
        pkts = [pad(fr)]
        if r.random() < 0.4:
            pkts.append(fr[:14 + r.randrange(1, 8)])
    elif style == "vlanstack":
        c.vlan_limit = r.choice([1, 1, 0, 2])
        pkts = [vlan_stack(r, r.choice(["udp", "tcp", "ip", "arp"])) for _ in range(2)]
        if r.random() < 0.5:
            fr = pkts[0]
            pkts.append(fr[:r.randrange(15, 24)])  # cut inside the tags
    elif style == "runt":
        fr, _ = frame(r, kind="udp")
        pkts = [fr[:n] for n in sorted(r.sample(range(0, 14), 3))]
        pkts.append(fr[:14])
    else:  # jumbo
        big = r.choice([9000, 9018, 1600, 1514, 1515, 1518])
        fr, _ = frame(r, kind="udp", payload=big - 42)
        for p in range(1, NPORTS + 1):
            c.mtu[p] = r.choice([1500, 9216, 9000])
        c.mtu[1] = 9216
        pkts = [fr]
    c.packets = [(1, p) for p in pkts]
    return c


GENERATORS = {"match": gen_match, "rewrite": gen_rewrite, "pipeline": gen_pipeline, "normal": gen_normal,
              "malformed": gen_malformed}


def generate(seed, count, categories=CATEGORIES):
    """`count` cases, round-robin over `categories`; case i depends only on
    (seed, i), so a failing case is reproduced by its name alone."""
    out = []
    for i in range(count):
        cat = categories[i % len(categories)]
        out.append(make(seed, i, cat))
    return out


def make(seed, i, cat):
    r = random.Random("%d/%d/%s" % (seed, i, cat))
    return GENERATORS[cat](r, "%d-%d-%s" % (seed, i, cat))

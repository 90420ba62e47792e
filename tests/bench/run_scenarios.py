#!/usr/bin/env python3
"""run_scenarios.py -- keel on the OVS-DPDK baseline scenarios.

Default (--openflow): every scenario of shared/bench/scenarios from its own
files -- topology.vsctl as add-br/add-port (ports bound to the harness's
DPDK vdevs), flows*.txt loaded unchanged with add-flows, the variant's
other_config / ovs-appctl settings as keel commands -- so every megaflow
comes from an upcall and xlate; vxlan-push runs in the tunnel table
(tnl_bench.py, as --tunnel), bond-balance-tcp points at --bond (its own table). Throughput scenarios are checked as below plus:
megaflows equal to the hand-derived ones and (--ovs) to Open vSwitch's
dpctl/dump-flows of the same round. flow-setup and revalidate-100k
(MEASURE=flowsetup / revalidate) get their own runs and tables
(report_slow). --dp-flows: the previous mode, described next.

For each scenario of shared/bench/scenarios/ that this script knows how to
translate (p2p-1flow, p2p-10kflows, dpcls-16masks) and each of its variants:

  1. generates the scenario's pcap with shared/bench/gen_traffic.py and the
     scenario's TRAFFIC arguments (cached; with --max-records N, capped to
     N records and said so);
  2. writes a keel config: the variant's tunables (`set emc-insert-inv-prob`,
     `set smc-enable`, translated from the variant's ovs-vsctl other_config)
     and the datapath flows (megaflows) Open vSwitch installs for the
     scenario's OpenFlow rules (`dp-flow add ...`, derived from flows*.txt);
  3. boots keel with the DPDK ports the OVS harness uses
     (p0 = net_pcap0 replaying the pcap with infinite_rx=1,
      p1 = net_null1,no-rx=1), waits WARMUP s, `pmd-stats-clear`, reads
     `show ports --format json`, waits SECONDS, reads it again:
     Mpps = delta of p1's tx packets / elapsed; cycles/pkt =
     processing_cycles / packets_received of `pmd-stats-show --format json`;
  4. with --ovs and Open vSwitch installed, runs
     shared/bench/ovs_baseline.sh SCENARIO SECONDS for the same variant right
     after keel exited (keel, OVS, keel, OVS ... round by round), and records
     the round's keel/OVS Mpps ratio (ratio_ovs);
  5. runs shared/bench/io_ceiling (plain rx_burst -> tx_burst) on the same
     pcap for the same number of seconds.

The verdict keel vs Open vSwitch is the median of the per-round ratios with
its min-max and the number of rounds (the "Interleaved" table): the two runs
of a pair share the load of the same minute, which the absolute Mpps of rows
measured minutes apart do not.

Rounds are outermost (every scenario/variant once, then again), as in
shared/bench/run_all.sh, so that background load drifting over time is spread
over all rows. Prints one key=value line per run, then a markdown table:
median (min-max) of keel Mpps, cycles/pkt, cycles/pkt beyond the I/O ceiling's
own cost, the cache path, the I/O ceiling, keel/ceiling, and OVS-DPDK's figures
from shared/bench/BASELINE.md (quoted, not re-measured) or from this
invocation's --ovs runs (then keel/OVS is the median of the per-round ratios). Each run is also checked: keel exits 0, tx = rx,
no misses/lost packets, every datapath pass hit a cache (PROBLEM lines and
exit status 1 otherwise).

keel runs under `taskset -c 1` (--pmd-core): host-sim's PMD thread is
unpinned and inherits that core, EAL pins the main thread to core 0: the OVS
harness's placement (PMD on core 1, main thread on core 0; io_ceiling -l 1).

python3 stdlib only. Must run as root (DPDK EAL). Example:

  tests/bench/run_scenarios.py --runs 3 --seconds 5
  tests/bench/run_scenarios.py --scenarios dpcls-16masks --variants emc-off --runs 1
  tests/bench/run_scenarios.py --show-flows          # print the configs, run nothing
  tests/bench/run_scenarios.py --results r.txt ...; tests/bench/run_scenarios.py --from-results r.txt

Hardware offload (issue 16; offload_bench.py, its own table, run instead of
the others):

  --offload: p2p-10kflows on sim ports (pcap:in=X,loop=0 -> null; the sim
    NIC model is the only flow engine that takes rules on this machine) with
    offload off and with `offload enable` in each --offload-modes mode:
    the share of packets that never reach a PMD after warm-up (goal 100 %),
    the PMD Mpps of what remains, hardware rules used and the time until
    every flow had its rule.

  tests/bench/run_scenarios.py --offload --scenarios p2p-10kflows --runs 3 --seconds 5 --warmup 2

Several PMDs (issue 13; their own tables, run instead of the others):

  --scaling: p2p-10kflows and dpcls-16masks (--variants) with 1 and 2 PMDs,
    the input with 2 rx queues. keel on sim ports (pcap:in=X,rxq=2,loop=0 ->
    null: keel's DPDK ports open one rx queue until n_rxq lands), `set
    pmd-cpu-mask 0x2` / `0x3`; with --ovs, Open vSwitch right after each keel
    run with net_pcap0 given one rx_pcap per queue (the pcap split by
    5-tuple), options:n_rxq=2 and pmd-cpu-mask 0x2 / 0x3, through a patched
    copy of ovs_baseline.sh (it adds the rx port itself; see ovs_script_copy).
  --flowsetup-offline: flow-setup's pcap read once by keel
    --exit-when-drained (offline: lossless) with 1 and 2 PMDs, rxq=2; checks
    lost 0, every packet out once, per-flow order.

  tests/bench/run_scenarios.py --scaling --ovs --scenarios p2p-10kflows,dpcls-16masks \
      --variants default,emc-off --runs 5 --seconds 3 --warmup 2 --results s.txt
  tests/bench/run_scenarios.py --flowsetup-offline --scenarios flow-setup --runs 3 --results o.txt

Bonds (issue 14; bond_bench.py, its own table, run instead of the others):

  --bond: bond-balance-tcp with keel's lb-output-action=true and false at
    --bond-flows L4 flows (1,1000,100000,500000), keel's members DPDK
    net_pcap vdevs holding one LACPDU of a fake partner (tx drops), a wait
    for `bond-show` to say negotiated before the warm-up; with --ovs Open
    vSwitch's lb_output and recirc variants of the same flow counts right
    after keel's, round by round (same-run ratios).

  tests/bench/run_scenarios.py --bond --ovs --runs 3 --seconds 5 --warmup 3 --results b.txt

Tunnels (issue 15; tnl_bench.py, its own tables, run instead of the others):

  --tunnel: vxlan-push with keel combined (one pass), keel `set
    tunnel-combine false` (tnl_push + recirc) and, with --ovs, Open vSwitch;
    and a VXLAN decap scenario generated from vxlan-push's addresses
    (gen_traffic.py --vxlan into br-phy -> tnl_pop -> br-int), keel vs Open
    vSwitch; at --tunnel-flows (1,10000), round by round (same-run ratios).
    --tunnel-rows push,decap and --tunnel-sides keel,ovs select.

  tests/bench/run_scenarios.py --tunnel --ovs --runs 3 --seconds 5 --warmup 3 --results t.txt
"""

import argparse
import hashlib
import json
import os
import queue
import re
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_SCENARIOS = ["p2p-1flow", "p2p-10kflows", "dpcls-16masks"]
TUNNEL_TYPES = ("vxlan", "geneve", "gre")  # ports of tnl_bench.py's scenarios
TSC_HZ = 2.45e9  # this machine's TSC (BASELINE.md), when io_ceiling did not report it

# keel's DPDK pool grows by one mbuf per record of a replayed pcap
# (hal/dpdk/dpdk_backend.h, pool_mbufs_for), so the scenarios' pcaps run
# uncapped; --max-records still caps them (e.g. for a small -m).
DEFAULT_MAX_RECORDS = 0

# ovs-vsctl other_config knobs -> keel console commands.
OTHER_CONFIG_TO_KEEL = {
    "emc-insert-inv-prob": lambda v: "set emc-insert-inv-prob %d" % int(v),
    "smc-enable": lambda v: "set smc-enable %s" % ("true" if v.lower() == "true" else "false"),
    "flow-limit": lambda v: "set flow-limit %d" % int(v),
    "max-idle": lambda v: "set max-idle %d" % int(v),
    "max-revalidator": lambda v: "set revalidator-interval %d" % int(v),
}

# keel's own scenarios, in shared/bench/scenarios' layout (revalidate-1m):
# build_plan looks here for a name shared/bench lacks, and ovs_baseline.sh
# is given the directory.
LOCAL_SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenarios")


def appctl_to_keel(cmd):
    """An ovs-appctl command of setup.appctl / VARIANT_x_APPCTL -> keel console
    command, or None if keel has none."""
    t = cmd.split()
    if t == ["upcall/disable-megaflows"]:
        return "set megaflows-enable false"
    if t == ["upcall/enable-megaflows"]:
        return "set megaflows-enable true"
    if len(t) == 2 and t[0] == "upcall/set-flow-limit":
        return "set flow-limit %d" % int(t[1])
    return None


def log(msg):
    print("[run_scenarios] " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# scenario files
# ---------------------------------------------------------------------------
def read_conf(path):
    """KEY="value" lines of a scenario.conf (a bash-sourced file without code)."""
    conf = {}
    with open(path) as f:
        for line in f:
            toks = shlex.split(line, comments=True)
            if not toks or "=" not in toks[0]:
                continue
            k, v = toks[0].split("=", 1)
            conf[k] = v
    return conf


def topology_ofports(path, rx_iface, rx_ofport):
    """OpenFlow port number -> interface name, from topology.vsctl (ofport_request=)."""
    ports = {int(rx_ofport): rx_iface}
    with open(path) as f:
        for line in f:
            m = re.search(r"add-port\s+\S+\s+(\S+).*ofport_request=(\d+)", line)
            if m:
                ports[int(m.group(2))] = m.group(1)
    return ports


class Rule:
    def __init__(self, text):
        self.text = text
        match, sep, actions = text.partition("actions=")
        if not sep:
            raise ValueError("no actions= in %r" % text)
        self.fields = {}
        self.proto = None  # None (any), "ip", "udp", "tcp"
        for tok in [t.strip() for t in match.split(",") if t.strip()]:
            if tok in ("ip", "udp", "tcp"):
                self.proto = tok
                continue
            if "=" not in tok:
                raise ValueError("unsupported match %r in %r" % (tok, text))
            k, v = tok.split("=", 1)
            if k not in ("priority", "in_port", "nw_dst", "nw_src", "tp_dst", "tp_src"):
                raise ValueError("unsupported field %r in %r (extend run_scenarios.py)" % (k, text))
            self.fields[k] = v
        if any(k.startswith("nw_") for k in self.fields) and self.proto is None:
            raise ValueError("nw_* without ip/udp/tcp in %r" % text)
        if any(k.startswith("tp_") for k in self.fields) and self.proto not in ("udp", "tcp"):
            raise ValueError("tp_* without udp/tcp in %r" % text)
        self.outputs = []
        for a in [a.strip() for a in actions.split(",") if a.strip()]:
            m = re.fullmatch(r"(?:output:)?(\d+)", a)
            if not m:
                raise ValueError("unsupported action %r in %r" % (a, text))
            self.outputs.append(int(m.group(1)))


def read_rules(path):
    rules = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                rules.append(Rule(line))
    return rules


def ipv4_prefix(text):
    """'10.1.0.0/16' -> ('10.1.0.0', '255.255.0.0' or None for /32)."""
    addr, _, plen = text.partition("/")
    plen = int(plen) if plen else 32
    if plen == 32:
        return addr, None
    mask = (0xffffffff << (32 - plen)) & 0xffffffff
    return addr, ".".join(str((mask >> s) & 0xff) for s in (24, 16, 8, 0))


def megaflow(rule, ofport_to_keel, traffic_proto):
    """The datapath flow Open vSwitch 3.1 installs for `rule` on IPv4 traffic of
    `traffic_proto` (gen_traffic.py only makes IPv4 UDP/TCP frames):

    * recirc_id(0), in_port, packet_type(ns=0,id=0) and eth_type are always
      un-wildcarded; for an IP packet so is ipv4(frag=...) (frag=no here);
    * ip/udp/tcp in the rule un-wildcards nw_proto (udp/tcp) and eth_type;
    * nw_src/nw_dst prefixes un-wildcard exactly the prefix (OVS's prefix
      tries: the scenarios' prefixes are disjoint, so the trie never needs
      more bits than the rule's own prefix), tp_src/tp_dst exact values.
    Rules that only match in_port therefore give the in_port/eth_type/frag
    megaflow ("simple match" in OVS 3.1)."""
    f = rule.fields
    parts = ["recirc_id(0)", "in_port(%d)" % ofport_to_keel[int(f["in_port"])],
             "packet_type(ns=0,id=0)", "eth_type(0x0800)"]
    ip = []
    for k, name in (("nw_src", "src"), ("nw_dst", "dst")):
        if k in f:
            addr, mask = ipv4_prefix(f[k])
            ip.append("%s=%s/%s" % (name, addr, mask) if mask else "%s=%s" % (name, addr))
    if rule.proto in ("udp", "tcp"):
        ip.append("proto=%d" % (17 if rule.proto == "udp" else 6))
    ip.append("frag=no")
    parts.append("ipv4(%s)" % ",".join(ip))
    l4 = ["%s=%s" % (name, int(f[k])) for k, name in (("tp_src", "src"), ("tp_dst", "dst")) if k in f]
    if l4:
        parts.append("%s(%s)" % (rule.proto, ",".join(l4)))
    if rule.proto in ("udp", "tcp") and rule.proto != traffic_proto:
        return None  # the rule never matches this traffic: OVS installs no such flow
    acts = ",".join(str(ofport_to_keel[o]) for o in rule.outputs) or "drop"
    return ",".join(parts) + " actions:" + acts


def check_disjoint(rules):
    """The megaflows are installed side by side without priorities, which is
    only what OVS does if no packet can match two rules. Refuse otherwise."""
    def net(r):
        if "nw_dst" not in r.fields:
            return None
        addr, _, plen = r.fields["nw_dst"].partition("/")
        a = struct.unpack("!I", bytes(int(x) for x in addr.split(".")))[0]
        return a, int(plen or 32)

    for i, a in enumerate(rules):
        for b in rules[i + 1:]:
            na, nb = net(a), net(b)
            if na and nb:
                plen = min(na[1], nb[1])
                m = (0xffffffff << (32 - plen)) & 0xffffffff
                if (na[0] & m) != (nb[0] & m):
                    continue
            ta, tb = a.fields.get("tp_dst"), b.fields.get("tp_dst")
            if ta and tb and ta != tb:
                continue
            if a.fields.get("in_port") != b.fields.get("in_port"):
                continue
            raise ValueError("rules overlap, megaflows would need OVS's priorities: %r / %r"
                             % (a.text, b.text))


# ---------------------------------------------------------------------------
# OpenFlow mode: the scenario's topology and rules, unchanged
# ---------------------------------------------------------------------------
def split_top(text, sep=","):
    """Splits on `sep` outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [x.strip() for x in out if x.strip()]


def read_topology(d, conf):
    """topology.vsctl (+ scenario.conf's rx port) -> ([bridge], {bridge: [(port, ofport)]},
    [what keel cannot build]). One ovs-vsctl invocation per line, commands split on ' -- '."""
    bridges, ports, unsupported = [], {}, []

    def bridge(name):
        if name not in ports:
            ports[name] = []
            bridges.append(name)
        return ports[name]

    path = os.path.join(d, "topology.vsctl")
    for line in open(path) if os.path.exists(path) else []:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [shlex.split(x) for x in line.split(" -- ")]
        requested = {}
        for p in parts:
            if len(p) >= 3 and p[0] == "set" and p[1] == "Interface":
                for w in p[3:]:
                    if w.startswith("ofport_request="):
                        requested[p[2]] = int(w.split("=", 1)[1])
                    elif w.split("=", 1)[0] == "type" and w.split("=", 1)[1] in TUNNEL_TYPES:
                        unsupported.append("tunnel %s %s: its own table (tests/bench/tnl_bench.py), "
                                           "run with --tunnel" % (p[2], w))
                    elif w.startswith("type=") and w not in ("type=dpdk",):
                        unsupported.append("interface %s %s (keel has no %s ports yet)"
                                           % (p[2], w, w.split("=", 1)[1]))
        for p in parts:
            if not p:
                continue
            if p[0] == "add-br":
                bridge(p[1])
            elif p[0] == "add-port":
                bridge(p[1]).append((p[2], requested.get(p[2])))
            elif p[0] == "add-bond":
                unsupported.append("bond %s: its own table, run with --bond" % p[2])
    if conf.get("RX_BRIDGE") and conf.get("RX_IFACE"):
        bridge(conf["RX_BRIDGE"]).insert(0, (conf["RX_IFACE"], int(conf.get("RX_OFPORT", "0")) or None))
    return bridges, ports, unsupported


def flows_files(d, conf, bridges, variant_flows):
    """[(path, bridge)]: the variant's flows file into FLOWS_BRIDGE, flows.BR.txt into BR."""
    out = [(os.path.join(d, variant_flows), conf.get("FLOWS_BRIDGE", bridges[0]))]
    for f in sorted(os.listdir(d)):
        m = re.fullmatch(r"flows\.(.+)\.txt", f)
        if m and m.group(1) in bridges:
            out.append((os.path.join(d, f), m.group(1)))
    return out


def openflow_config(d, conf, variant_flows, keel_ports):
    """keel console lines: add-br/add-port for the topology's bridges and the
    ports keel has (the harness's DPDK vdevs), then add-flows of the
    scenario's flows files, unchanged. Returns (lines, skip reason)."""
    bridges, ports, unsupported = read_topology(d, conf)
    if unsupported:
        return [], "; ".join(unsupported)
    lines = []
    for br in bridges:
        lines.append("add-br %s" % br)
        for name, ofport in ports[br]:
            if name not in keel_ports:
                return [], "port %s of %s has no keel counterpart in this harness" % (name, br)
            lines.append("add-port %s %s%s" % (br, name, " --ofport %d" % ofport if ofport else ""))
    for path, br in flows_files(d, conf, bridges, variant_flows):
        lines.append("add-flows %s %s" % (br, path))
    return lines, ""


def full_mask(m):
    m = m.lower()
    return (re.fullmatch(r"0x0*f+", m) is not None or m in ("255.255.255.255", "ff:ff:ff:ff:ff:ff")
            or re.fullmatch(r"(ffff:){7}ffff", m) is not None)


def zero_mask(m):
    m = m.lower()
    return re.fullmatch(r"(0x)?0+", m) is not None or m in ("0.0.0.0", "00:00:00:00:00:00", "::")


def masked(v, m):
    """value & mask for dotted IPv4 and integer values (Open vSwitch prints
    the packet's bits under a partial mask, keel the masked key)."""
    try:
        if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", v) and re.fullmatch(r"\d+\.\d+\.\d+\.\d+", m):
            return ".".join(str(int(a) & int(b)) for a, b in zip(v.split("."), m.split(".")))
        if re.fullmatch(r"(0x)?[0-9a-fA-F]+", v) and m.startswith("0x"):
            return hex(int(v, 0) & int(m, 16))
    except ValueError:
        pass
    return v


def norm_dp_flow(text, rx_dp_port=None):
    """A datapath flow in Open vSwitch's dpctl/dump-flows format (with or
    without -m) or keel's flow-dump -> a frozenset of (field, value, mask),
    wildcarded fields left out, all-ones masks dropped, `in_port` and the
    output port names reduced to their role (there is one rx and one tx port
    in these scenarios, with different numbers in keel and OVS)."""
    text = text.strip()
    m = re.match(r"ufid:\S+,?\s*", text)
    if m:
        text = text[m.end():]
    match, _, actions = text.partition("actions:")
    items = set()
    todo = split_top(match)
    while todo:
        it = todo.pop(0)
        mm = re.fullmatch(r"([\w-]+)\((.*)\)", it)
        if not mm:
            continue  # packets:, bytes:, used:, flags:, dp:...
        name, inner = mm.group(1), mm.group(2)
        # A tagged flow's inner fields (keel before issue 12 also printed the
        # untagged case as vlan(cfi=0),encap(...); --keel may run such a build).
        if name == "encap":
            todo = split_top(inner) + todo
            continue
        if not inner.strip() or name == "packet_type":
            # eth(): nothing matched; packet_type(ns=0,id=0): keel's datapath
            # only has Ethernet packets, Open vSwitch prints it always
            continue
        if name == "vlan" and inner.replace(" ", "") in ("cfi=0", "vid=0/0,pcp=0/0,cfi=0"):
            # "no 802.1Q tag": Open vSwitch's exact eth_type says the same
            # (a tagged frame's outer eth_type is 0x8100)
            continue
        if name == "in_port":
            items.add(("in_port", "rx", ""))
            continue
        if "=" not in inner and "," not in inner:  # recirc_id(0), eth_type(0x0800), skb_mark(0/0)
            v, _, msk = inner.partition("/")
            if msk and zero_mask(msk):
                continue
            if msk and full_mask(msk):
                msk = ""
            items.add((name, v, msk))
            continue
        for kv in split_top(inner):
            k, _, v = kv.partition("=")
            v, _, msk = v.partition("/")
            if msk and zero_mask(msk):
                continue
            if msk and full_mask(msk):
                msk = ""
            if msk:
                v = masked(v, msk)
            items.add(("%s.%s" % (name, k), v, msk))
    acts = []
    for a in split_top(actions.split(" ")[0] if actions.strip() else ""):
        a = a[len("output:"):] if a.startswith("output:") else a
        acts.append("port" if re.fullmatch(r"[\w-]+", a) and a != "drop" else a)
    acts = ",".join(acts) or "drop"
    return frozenset(items), acts


def parse_ovs_dump(path):
    flows = []
    for line in open(path):
        line = line.strip()
        if line and "actions:" in line:
            flows.append(norm_dp_flow(line))
    return flows


def fmt_norm(flow):
    items, acts = flow
    return ",".join("%s=%s%s" % (k, v, "/" + m if m else "") for k, v, m in sorted(items)) + " -> " + acts


def compare_flows(keel_flows, ref_flows):
    """'' if the two lists hold the same normalized flows (as sets), else a description."""
    a, b = set(keel_flows), set(ref_flows)
    if a == b:
        return ""
    only_k = sorted(fmt_norm(f) for f in a - b)[:3]
    only_r = sorted(fmt_norm(f) for f in b - a)[:3]
    return "keel %d flows vs %d: only keel: %s; only reference: %s" % (
        len(a), len(b), " | ".join(only_k) or "-", " | ".join(only_r) or "-")


# ---------------------------------------------------------------------------
# traffic
# ---------------------------------------------------------------------------
def pcap_records(path):
    n = 0
    with open(path, "rb") as f:
        hdr = f.read(24)
        endian = "<" if struct.unpack("<I", hdr[:4])[0] == 0xa1b2c3d4 else ">"
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                break
            incl = struct.unpack(endian + "IIII", rec)[2]
            f.seek(incl, 1)
            n += 1
    return n


def traffic_groups(args):
    """Number of round-robin groups gen_traffic.py makes (max ranges of a spec)."""
    g = 1
    for i, a in enumerate(args[:-1]):
        if a in ("--src-ip", "--dst-ip", "--sport", "--dport"):
            g = max(g, len(args[i + 1].split(",")))
    return g


def expected_records(args):
    flows = packets = 0
    for i, a in enumerate(args[:-1]):
        if a == "--flows":
            flows = int(args[i + 1])
        elif a == "--packets":
            packets = int(args[i + 1])
    flows = flows or 1
    return packets or max(flows, 64), flows


def cap_traffic(args, max_records):
    """Returns (args, note): fewer flows (a multiple of the group count, so every
    group keeps the same share) when the pcap would not fit keel's pool."""
    records, flows = expected_records(args)
    if max_records <= 0 or records <= max_records:
        return args, ""
    g = traffic_groups(args)
    new_flows = max(g, (max_records // g) * g)
    out = list(args)
    for i, a in enumerate(out[:-1]):
        if a == "--flows":
            out[i + 1] = str(new_flows)
        elif a == "--packets":
            out[i + 1] = str(min(int(out[i + 1]), new_flows))
    if "--flows" not in out:
        out += ["--flows", str(new_flows)]
    note = ("pcap capped by --max-records: %d -> %d records/flows (%d per group x %d groups)"
            % (records, new_flows, new_flows // g, g))
    return out, note


def gen_pcap(shared, cache, args):
    gen = os.path.join(shared, "bench", "gen_traffic.py")
    with open(gen, "rb") as f:
        key = hashlib.md5((" ".join(args) + "\n").encode() + f.read()).hexdigest()[:16]
    path = os.path.join(cache, "traffic-%s.pcap" % key)
    if not os.path.exists(path):
        tmp = path + ".tmp%d" % os.getpid()
        subprocess.run([sys.executable, gen, "-o", tmp] + args, check=True,
                       stdout=subprocess.DEVNULL)
        os.replace(tmp, path)
    return path


# ---------------------------------------------------------------------------
# keel
# ---------------------------------------------------------------------------
class KeelError(Exception):
    pass


class Keel:
    """keel with a pipe on stdin: one command per line; JSON commands answer one
    line on stdout (flushed after each command)."""

    def __init__(self, argv, stderr_path):
        self.stderr_f = open(stderr_path, "w")
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.stderr_f, text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, cmd):
        try:
            self.p.stdin.write(cmd + "\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            raise KeelError("keel exited (rc=%s) before %r" % (self.p.poll(), cmd))

    def json(self, cmd, timeout):
        self.send(cmd)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KeelError("no answer to %r within %.0f s (hang?)" % (cmd, timeout))
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise KeelError("keel exited (rc=%s) while answering %r" % (self.p.wait(), cmd))
            line = line.strip()
            if line.startswith("{"):
                return json.loads(line)

    def exit(self, timeout=60):
        try:
            self.send("exit")
            self.p.stdin.close()
        except (KeelError, BrokenPipeError, OSError):
            pass
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise KeelError("keel did not exit within %d s of 'exit' (killed)" % timeout)
        finally:
            self.stderr_f.close()
        return rc

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        if not self.stderr_f.closed:
            self.stderr_f.close()


def port_by_name(js, name):
    for p in js["ports"]:
        if p["name"] == name:
            return p
    raise KeelError("no port %s in show ports" % name)


def probe_commands(keel_bin, cmds):
    """Which console commands this keel binary accepts (sim ports, no traffic)."""
    ok = {}
    for c in cmds:
        p = subprocess.run([keel_bin, "--port", "p0=null", "--port", "p1=null"], input=c + "\n",
                           capture_output=True, text=True, timeout=60)
        ok[c] = p.returncode == 0
    return ok


def drop_workdir(opt, workdir, failures):
    """Removes a scenario's work dir unless --keep or something failed."""
    if not opt.keep and not failures:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        log("work dir kept: " + workdir)


def run_keel(opt, workdir, tag, p, ports=None, extra_config="", pin=True):
    """One throughput run. ports: the --port values instead of the harness's
    DPDK vdevs; extra_config: appended to the row's config; pin=False: no
    taskset (the PMDs are placed by `set pmd-cpu-mask` in extra_config).
    p["tx"] may name several ports ("p1+p2": a bond's members; their tx
    is summed); p["ready"] = (json command, predicate, what): before the
    warm-up, wait (30 s at most, else KeelError naming `what`) until the
    predicate holds for the command's answer (bond-balance-tcp: LACP
    negotiated), then run the commands p["after_ready"] (bond-balance-tcp:
    add the input port to the bridge, as Open vSwitch's script adds it last)."""
    pcap, config_text, rx_name, tx_name = p["pcap"], p["config"] + extra_config, p["rx"], p["tx"]
    cfg = os.path.join(workdir, tag + ".conf")
    with open(cfg, "w") as f:
        f.write(config_text + handlers_line(opt))
    argv = ["taskset", "-c", str(opt.pmd_core)] if opt.pmd_core >= 0 and pin else []
    if ports is None:
        ports = ["%s=dpdk:net_pcap0,rx_pcap=%s,infinite_rx=1" % (rx_name, pcap),
                 "%s=dpdk:net_null1,no-rx=1" % tx_name]
    argv += [opt.keel, "--config", cfg]
    for spec in ports:
        argv += ["--port", spec]
    errf = os.path.join(workdir, tag + ".stderr")
    res = {"load_start": open("/proc/loadavg").read().split()[0]}
    k = Keel(argv, errf)
    t_boot = time.monotonic()
    try:
        boot = k.json("show ports --format json", timeout=180)
        ids = {p["name"]: p["id"] for p in boot["ports"]}
        if p.get("ready"):
            cmd, pred, what = p["ready"]
            deadline = time.monotonic() + p.get("ready_timeout", 30)
            while True:
                answer = k.json(cmd, timeout=30)
                if pred(answer):
                    break
                if time.monotonic() > deadline:
                    raise KeelError("not ready within %d s: %s (%r: %s)" % (p.get("ready_timeout", 30), what, cmd,
                                                                                json.dumps(answer)[:1500]))
                time.sleep(0.1)
            res["ready_s"] = time.monotonic() - t_boot
        for cmd in p.get("after_ready", []):
            k.send(cmd)
        if p.get("after_ready"):
            k.json("show ports --format json", timeout=60)  # the commands above have run
        time.sleep(opt.warmup)
        k.send("pmd-stats-clear")
        t_a = time.monotonic()
        a = k.json("show ports --format json", timeout=30)
        t_b = time.monotonic()
        time.sleep(opt.seconds)
        t_c = time.monotonic()
        b = k.json("show ports --format json", timeout=30)
        t_d = time.monotonic()
        stats = k.json("pmd-stats-show --format json", timeout=30)
        dpcls = k.json("dpcls-show --format json", timeout=30)
        dump = k.json("flow-dump --format json%s" % ("" if opt.openflow else " --terse"), timeout=60)
        upc = k.json("upcall-show --format json", timeout=30) if opt.openflow else {}
        rc = k.exit()
    except BaseException:
        k.kill()
        raise
    finally:
        shutil.rmtree("/var/run/dpdk/keel-host-sim-%d" % k.p.pid, ignore_errors=True)
    elapsed = ((t_c + t_d) - (t_a + t_b)) / 2  # midpoints of the two reads
    tx_names = tx_name.split("+")
    tx0 = {key: sum(port_by_name(a, n)["tx"][key] for n in tx_names) for key in ("packets", "dropped")}
    tx1 = {key: sum(port_by_name(b, n)["tx"][key] for n in tx_names) for key in ("packets", "dropped")}
    rx0, rx1 = port_by_name(a, rx_name)["rx"], port_by_name(b, rx_name)["rx"]
    pmds = stats["pmds"]
    tot = {key: sum(p[key] for p in pmds) for key in pmds[0] if isinstance(pmds[0][key], int)}
    rxp = tot["packets_received"] or 1
    simple = tot.get("simple_path_hits", 0)  # simple_match_hits is it plus xconnect_hits, as the text's line
    hits = tot["emc_hits"] + tot["smc_hits"] + tot["megaflow_hits"] + tot["xconnect_hits"] + simple
    # The counters are read one by one while the PMD runs: the hit counters
    # may be one burst ahead of packets_received.
    passes = rxp + tot.get("recirculations", 0)
    share = max(passes, hits)
    busy, idle = tot["processing_cycles"], tot["idle_cycles"]
    res.update({
        "mpps": (tx1["packets"] - tx0["packets"]) / elapsed / 1e6,
        "rx_mpps": (rx1["packets"] - rx0["packets"]) / elapsed / 1e6,
        "tx_drops": (tx1["dropped"] - tx0["dropped"]),
        "cycles_per_pkt": busy / rxp,
        "pmd_busy_pct": 100.0 * busy / (busy + idle) if busy + idle else 0.0,
        "xconnect_pct": 100.0 * tot["xconnect_hits"] / share,
        "simple_pct": 100.0 * simple / share,
        "emc_pct": 100.0 * tot["emc_hits"] / share,
        "smc_pct": 100.0 * tot["smc_hits"] / share,
        "megaflow_pct": 100.0 * tot["megaflow_hits"] / share,
        "subtable_lookups": (tot["subtable_lookups"] / tot["megaflow_hits"]) if tot["megaflow_hits"] else 0.0,
        "recirc_per_pkt": tot.get("recirculations", 0) / rxp,
        "misses": tot["misses"], "lost": tot["lost"], "exec_dropped": tot.get("exec_dropped", 0),
        "invalid_port": tot.get("invalid_port", 0), "malformed": tot.get("malformed", 0),
        "dp_flows": len(dump["flows"]),
        "dp_masks": sum(len(c["subtables"]) for c in dpcls["classifiers"]),
        "seconds": elapsed, "keel_rc": rc, "pmds": len(pmds),
        "load_end": open("/proc/loadavg").read().split()[0],
        "port_ids": ",".join("%s=%d" % (n, ids[n]) for n in [rx_name] + tx_names),
    })
    if opt.openflow:
        # The slow path's work since boot (warm-up included) and what it installed.
        res.update({"upcalls_total": upc.get("upcalls", 0), "installs_total": upc.get("installs", 0),
                    "install_failed_total": upc.get("install_failed", 0),
                    "translate_errors": upc.get("translate_errors", 0)})
        p.setdefault("keel_dumps", []).append(
            ["%s actions:%s" % (f["match"], f["actions"]) for f in dump["flows"]])
    # Sanity: what went in must come out, every packet must hit a flow.
    problems = []
    if rc != 0:
        problems.append("keel exit status %d" % rc)
    if tot["misses"] or tot["lost"]:
        problems.append("misses=%d lost=%d" % (tot["misses"], tot["lost"]))
    if abs(hits - passes) > max(64, passes // 1000):
        problems.append("hits %d != datapath passes %d" % (hits, passes))
    if res["rx_mpps"] and abs(res["mpps"] - res["rx_mpps"]) / res["rx_mpps"] > 0.01:
        problems.append("tx %.3f Mpps vs rx %.3f Mpps" % (res["mpps"], res["rx_mpps"]))
    if res["mpps"] <= 0:
        problems.append("nothing forwarded")
    if opt.openflow:
        if p.get("expected") is not None:
            keel_norm = [norm_dp_flow(f) for f in p["keel_dumps"][-1]]
            diff = compare_flows(keel_norm, p["expected"])
            res["flows_vs_derived"] = "same" if not diff else "DIFFERENT"
            if diff:
                problems.append("megaflows differ from the hand-derived ones: " + diff)
    res["problems"] = "; ".join(problems)
    return res


# ---------------------------------------------------------------------------
# I/O ceiling and OVS
# ---------------------------------------------------------------------------
def build_io_ceiling(shared, cache):
    src = os.path.join(shared, "bench", "io_ceiling.c")
    out = os.path.join(cache, "io_ceiling")
    if not os.path.exists(out) or os.path.getmtime(src) > os.path.getmtime(out):
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libdpdk"], check=True,
                               capture_output=True, text=True).stdout.split()
        subprocess.run(["cc", "-O3", "-march=native", "-o", out, src] + flags, check=True)
    return out


def run_io_ceiling(opt, binary, pcap):
    prefix = "kscioc%d" % os.getpid()
    argv = [binary, "--no-huge", "--no-pci", "-m", "2048", "-l", str(opt.io_core),
            "--file-prefix", prefix, "--log-level=lib.eal:error", "--no-telemetry",
            "--vdev", "net_pcap0,rx_pcap=%s,infinite_rx=1" % pcap, "--vdev", "net_null1,no-rx=1",
            "--", str(opt.seconds), "1"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=opt.seconds + 180)
    finally:
        shutil.rmtree("/var/run/dpdk/" + prefix, ignore_errors=True)
    m = re.search(r"io_ceiling mpps=([0-9.]+).*cycles_per_pkt=([0-9.]+)", p.stdout)
    if p.returncode != 0 or not m:
        log("io_ceiling failed (rc=%d): %s" % (p.returncode, (p.stderr or p.stdout).strip()[-400:]))
        return None, None, None
    hz = re.search(r"tsc_hz=([0-9]+)", p.stdout)
    return float(m.group(1)), float(m.group(2)), float(hz.group(1)) if hz else None


OVS_VSWITCHD = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"


def run_ovs(opt, scenario, variant, round_no, seconds=None, fields=("mpps", "cycles_per_pkt"), env_extra=None,
            script=None):
    """One ovs_baseline.sh run of one variant -> its key=value fields (those
    named in `fields`; all with fields=None) and, if it saved one,
    "dump": the lines of its dpctl/dump-flows (the work dir is kept with
    KEEP=1 just long enough to read it)."""
    env = dict(os.environ, RUNS="1", RUN_ID=str(round_no), VARIANTS=variant,
               WARMUP=str(int(opt.warmup)), IO_CEILING="0", KEEP="1", **(env_extra or {}))
    script = script or os.path.join(opt.shared, "bench", "ovs_baseline.sh")
    secs = str(int(opt.seconds if seconds is None else seconds))
    p = subprocess.run([script, scenario, secs], capture_output=True, text=True,
                       env=env, timeout=float(secs) + opt.warmup + 900)
    m = re.search(r"work dir (\S+/ovsbench-[A-Za-z0-9]+)", p.stderr)
    work = m.group(1) if m else None
    dump = []
    if work and os.path.isdir(os.path.join(work, "log")):
        for f in sorted(os.listdir(os.path.join(work, "log"))):
            if f.startswith("dump-flows-"):
                dump = [l.strip() for l in open(os.path.join(work, "log", f)) if "actions:" in l]
    for line in p.stdout.splitlines():
        if line.startswith("scenario="):
            kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
            out = {k: kv[k] for k in (fields or kv) if k in kv}
            out["dump"] = dump
            if work and work.startswith(tempfile.gettempdir()):
                shutil.rmtree(work, ignore_errors=True)
            return out
    log("ovs_baseline.sh %s (%s) failed rc=%d: %s" % (scenario, variant, p.returncode,
                                                       p.stderr.strip()[-400:]))
    return None


def read_baseline(path):
    """(scenario, variant) -> {mpps, cycles, ceiling, ratio, path} from BASELINE.md's table."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 7:
                continue
            m = re.search(r"\*\*([0-9.]+)\*\*", cells[2])
            if not m:
                continue
            variant = cells[1].split()[0]
            out[(cells[0], variant)] = {
                "mpps": float(m.group(1)), "mpps_text": cells[2].replace("**", ""),
                "cycles": cells[3].split()[0], "ceiling": cells[4].split()[0],
                "ratio": cells[5], "path": cells[6] if len(cells) > 6 else ""}
    return out


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------
def fmt(x, nd=2):
    return "NA" if x is None else ("%.*f" % (nd, x))


def med_range(vals, nd=2):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "NA"
    if len(vals) == 1:
        return fmt(vals[0], nd)
    return "%s (%s-%s)" % (fmt(statistics.median(vals), nd), fmt(min(vals), nd), fmt(max(vals), nd))


def median_run(runs):
    """The run whose Mpps is the median (lower median for an even count)."""
    s = sorted(runs, key=lambda r: r["mpps"])
    return s[(len(s) - 1) // 2]


def path_text(r):
    parts = []
    for key, name in (("xconnect_pct", "xconnect"), ("simple_pct", "simple match"), ("emc_pct", "EMC"), ("smc_pct", "SMC"),
                      ("megaflow_pct", "dpcls")):
        if r.get(key, 0) >= 0.05:
            parts.append("%s %.1f %%" % (name, r[key]))
    t = ", ".join(parts) or "none"
    if r["megaflow_pct"] >= 0.05:
        t += " (%.1f subtable lookups/hit)" % r["subtable_lookups"]
    return t + "; %d dp flows, %d masks" % (r["dp_flows"], r["dp_masks"])


def build_plan(scen_dir, scenarios, openflow=True, max_records=DEFAULT_MAX_RECORDS, only_variants=()):
    """[one dict per (scenario, variant)]: its traffic (gen_traffic.py
    arguments, and capped to max_records when MEASURE=throughput), the keel
    config text (the variant's tunables, then the topology and rules in
    OpenFlow mode or the hand-derived megaflows), rx/tx ports, and why it is
    skipped ("" when it runs). Also used by tests/integration/test_drops.py."""
    plan = []
    for name in scenarios:
        d = os.path.join(scen_dir, name)
        if not os.path.isdir(d) and os.path.isdir(os.path.join(LOCAL_SCENARIOS, name)):
            d = os.path.join(LOCAL_SCENARIOS, name)
        conf = read_conf(os.path.join(d, "scenario.conf"))
        measure_kind = conf.get("MEASURE", "throughput")
        rx, txs = conf["RX_IFACE"], conf["TX_IFACES"].split()
        tx = txs[0]
        ofports = topology_ofports(os.path.join(d, "topology.vsctl"), rx, conf["RX_OFPORT"])
        keel_ids = {rx: 1, tx: 2}  # --port order: p0 (rx) is port 1, p1 (tx) port 2
        of_to_keel = {of: keel_ids[n] for of, n in ofports.items() if n in keel_ids}
        for v in conf.get("VARIANTS", "default").split():
            if only_variants and v not in only_variants:
                continue
            vk = v.replace("-", "_")
            traffic = shlex.split(conf.get("VARIANT_%s_TRAFFIC" % vk, conf["TRAFFIC"]))
            proto = traffic[traffic.index("--proto") + 1] if "--proto" in traffic else "udp"
            flows_file = conf.get("VARIANT_%s_FLOWS" % vk, "flows.txt")
            cmds, skip = [], ""
            if len(txs) != 1:
                skip = "%d tx ports (%s): the harness has one tx vdev" % (len(txs), " ".join(txs))
            # The hand-derived megaflows: what --dp-flows installs, and the
            # reference the OpenFlow run's flow dump is checked against.
            dpflows, derive_err = None, ""
            try:
                rules = read_rules(os.path.join(d, flows_file))
                check_disjoint(rules)
                dpflows = [f for f in (megaflow(r, of_to_keel, proto) for r in rules) if f]
            except (ValueError, KeyError) as e:
                derive_err = "%s: %s" % (type(e).__name__, e)
            for tok in shlex.split(conf.get("VARIANT_%s_VSCTL" % vk, "")):
                m = re.fullmatch(r"other_config:([\w-]+)=(\S+)", tok)
                if not m:
                    if tok in ("set", "Open_vSwitch", "."):
                        continue
                    skip = skip or "ovs-vsctl setting %r has no keel equivalent" % tok
                elif m.group(1) in OTHER_CONFIG_TO_KEEL:
                    cmds.append(OTHER_CONFIG_TO_KEEL[m.group(1)](m.group(2)))
                else:
                    skip = skip or "other_config:%s has no keel command" % m.group(1)
            appctl = [l.strip() for l in open(os.path.join(d, "setup.appctl"))] \
                if os.path.exists(os.path.join(d, "setup.appctl")) else []
            appctl += [c.strip() for c in conf.get("VARIANT_%s_APPCTL" % vk, "").split(";")]
            for a in [a for a in appctl if a and not a.startswith("#")]:
                k = appctl_to_keel(a)
                if k is None:
                    skip = skip or "ovs-appctl %r has no keel equivalent" % a
                else:
                    cmds.append(k)
            text = ("# %s / %s: generated by tests/bench/run_scenarios.py (%s) from %s\n"
                    % (name, v, "OpenFlow rules" if openflow else "datapath flows",
                       os.path.join(d, flows_file)))
            text += "".join(c + "\n" for c in cmds)
            if openflow:
                of_lines, of_skip = openflow_config(d, conf, flows_file, {rx, tx})
                skip = of_skip or skip  # "no bonds/tunnels yet" says more than "2 tx ports"
                text += "".join(l + "\n" for l in of_lines)
            elif measure_kind != "throughput":
                skip = skip or "MEASURE=%s needs upcalls: only with --openflow" % measure_kind
            elif dpflows is None:
                skip = skip or "no hand-derived datapath flows: %s" % derive_err
            else:
                text += "".join("dp-flow add %s\n" % f for f in dpflows)
            if measure_kind == "throughput":
                capped, note = cap_traffic(traffic, max_records)
            else:
                capped, note = traffic, ""
            # A scenario with tunnel ports runs in tnl_bench.py's table
            # (dispatch), with the flow count of this variant's traffic.
            tunnel = openflow and measure_kind == "throughput" and "run with --tunnel" in skip
            plan.append({"scenario": name, "variant": v, "traffic": traffic, "capped": capped, "tunnel": tunnel,
                         "cap_note": note, "config": text, "cmds": cmds, "skip": skip,
                         "rx": rx, "tx": tx, "flows_file": flows_file, "measure": measure_kind,
                         "infinite_rx": conf.get("INFINITE_RX", "1") == "1",
                         "target_flows": int(conf.get("TARGET_FLOWS", "0") or 0),
                         "reset_flow_limit": int(conf.get("RESET_FLOW_LIMIT", "0") or 0), "dir": d,
                         "expected": [norm_dp_flow(f) for f in dpflows]
                         if dpflows is not None and measure_kind == "throughput" else None,
                         "expected_text": dpflows or [], "derive_err": derive_err})

    return plan


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="rounds (3); each is a fresh keel boot per row")
    ap.add_argument("--seconds", type=float, default=10, help="measurement window (10 s)")
    ap.add_argument("--warmup", type=float, default=5, help="warm-up before the window (5 s)")
    ap.add_argument("--scenarios", default="",
                    help="comma list (OpenFlow mode: every scenario of shared/bench/scenarios, those "
                    "keel can't build yet skipped with the reason; --dp-flows: %s)" % ",".join(DEFAULT_SCENARIOS))
    ap.add_argument("--variants", default="", help="comma list: only these variants (all)")
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(REPO), "shared"),
                    help="the shared/ directory (../shared from the repo root)")
    ap.add_argument("--keel", default=os.path.join(REPO, "build", "host", "firmware", "keel"))
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "keel-scenarios-cache"),
                    help="generated pcaps and the io_ceiling binary")
    ap.add_argument("--max-records", type=int, default=DEFAULT_MAX_RECORDS,
                    help="cap on pcap records (0: none, the default)")
    ap.add_argument("--no-io-ceiling", action="store_true")
    ap.add_argument("--io-core", type=int, default=1, help="core of io_ceiling (1, as the OVS harness)")
    ap.add_argument("--pmd-core", type=int, default=1,
                    help="run keel under taskset -c N, so that host-sim's unpinned PMD thread runs on "
                    "core N while EAL pins the main thread to core 0 (OVS harness: PMD on core 1, "
                    "main on 0); -1: keel as it is, PMD unpinned (1)")
    ap.add_argument("--full-pcap-ceiling", action="store_true",
                    help="for a capped pcap, also run io_ceiling on the uncapped one (what OVS ran)")
    ap.add_argument("--ovs", action="store_true",
                    help="also run shared/bench/ovs_baseline.sh (if Open vSwitch is installed)")
    ap.add_argument("--results", default="", help="append the key=value run lines to this file")
    ap.add_argument("--markdown", default="", help="write the table (markdown) to this file")
    ap.add_argument("--keep", action="store_true", help="keep the work dir (configs, keel stderr)")
    ap.add_argument("--show-flows", action="store_true", help="print the keel configs and exit")
    ap.add_argument("--dp-flows", dest="openflow", action="store_false",
                    help="the previous mode: install hand-derived datapath flows (dp-flow add) "
                    "instead of the scenario's topology and OpenFlow rules")
    ap.add_argument("--openflow", dest="openflow", action="store_true", default=True,
                    help="(default) the scenario's topology.vsctl (add-br/add-port) and flows*.txt "
                    "unchanged (add-flows): traffic goes through upcalls, xlate and megaflows")
    ap.add_argument("--flowsetup-seconds", type=float, default=60,
                    help="flow-setup: longest sampling window (60 s, as run_all.sh gives OVS)")
    ap.add_argument("--flowsetup-replay", action="store_true",
                    help="flow-setup: also a keel-only run with the pcap replayed (infinite_rx=1), "
                    "the handler's sustained rate until every 5-tuple has its flow (needs a DPDK pool "
                    "of one mbuf per record: 1M records = 2.2 GB, more than keel's EAL memory today)")
    ap.add_argument("--scaling", action="store_true",
                    help="only the scaling table: p2p-10kflows and dpcls-16masks (--variants) with 1 and 2 "
                    "PMDs, 2 rx queues on the input; keel on sim ports (pcap:in=X,rxq=2,loop=0 -> null), "
                    "with --ovs Open vSwitch (pmd-cpu-mask, options:n_rxq=2) right after each keel run")
    ap.add_argument("--flowsetup-offline", action="store_true",
                    help="only the offline flow-setup table: the flow-setup pcap read once by keel "
                    "--exit-when-drained (lossless offline mode) with 1 and 2 PMDs (rxq=2); checks 0 lost, "
                    "every packet out once, per-flow order")
    ap.add_argument("--reval-samples", type=int, default=5,
                    help="revalidate-100k: terse and full rounds timed per run (5)")
    ap.add_argument("--handlers", type=int, default=0, metavar="N",
                    help="set n-handler-threads N in keel's config (0: keel's default)")
    ap.add_argument("--bond", action="store_true",
                    help="only the bond-balance-tcp table (tests/bench/bond_bench.py): keel with "
                    "lb-output-action=true and false, with --ovs next to Open vSwitch's same two, at "
                    "--bond-flows L4 flows, round by round")
    ap.add_argument("--bond-flows", default="1,1000,100000,500000",
                    help="--bond: the flow counts (1,1000,100000,500000)")
    ap.add_argument("--bond-dpdk-max-records", type=int, default=150000,
                    help="--bond: keel's input is DPDK net_pcap up to this many pcap records; rows beyond are "
                    "not run (host-sim's EAL memory is 512 MB, ~2.3 KB a record) (150000)")
    ap.add_argument("--bond-sim-rx", action="store_true",
                    help="--bond: rows beyond --bond-dpdk-max-records run with keel's sim pcap port as the "
                    "input (pcap:in=FILE,loop=0) instead of not at all")
    ap.add_argument("--bond-rx", choices=("dpdk", "sim"), default="dpdk",
                    help="--bond: keel's input port, DPDK net_pcap (infinite_rx=1, as Open vSwitch's) or "
                    "keel's sim pcap port (pcap:in=FILE,loop=0) for every row (dpdk)")
    ap.add_argument("--bond-ovs-max-flows", type=int, default=200000,
                    help="--bond: Open vSwitch rows only up to this many flows (its mempool holds at most "
                    "262144 mbufs and infinite_rx keeps every record in one) (200000)")
    ap.add_argument("--tunnel", action="store_true",
                    help="only the tunnel tables (tests/bench/tnl_bench.py): vxlan-push with keel combined, "
                    "keel `set tunnel-combine false` and (--ovs) Open vSwitch, and VXLAN decap (generated "
                    "scenario vxlan-pop) keel vs Open vSwitch, at --tunnel-flows flows, round by round")
    ap.add_argument("--tunnel-flows", default="1,10000", help="--tunnel: the flow counts (1,10000)")
    ap.add_argument("--tunnel-rows", default="push,decap", help="--tunnel: push, decap or both (push,decap)")
    ap.add_argument("--tunnel-sides", default="keel,ovs",
                    help="--tunnel: whose runs, keel, ovs (needs --ovs) or both (keel,ovs)")
    ap.add_argument("--offload", action="store_true",
                    help="only the offload table (tests/bench/offload_bench.py): p2p-10kflows on sim ports with "
                         "offload off and on (--offload-modes): share of packets that never reach a PMD after "
                         "warm-up, the PMD Mpps of what remains")
    ap.add_argument("--offload-modes", default="exact,megaflow", help="--offload: the offload modes (exact,megaflow)")
    ap.add_argument("--offload-rxq", type=int, default=2,
                    help="--offload: rx queues of the sim input (2: RSS hashes on every packet, as a NIC gives)")
    ap.add_argument("--offload-warmup-max", type=float, default=60,
                    help="--offload: longest wait for the hardware to hold every flow's rule (60 s)")
    ap.add_argument("--from-results", default="", metavar="FILE",
                    help="run nothing: print the table of the run lines in FILE (see --results)")
    opt = ap.parse_args()
    opt.keel_src = opt.keel

    opt.shared = os.path.abspath(opt.shared)
    scen_dir = os.path.join(opt.shared, "bench", "scenarios")
    if not os.path.isdir(scen_dir):
        sys.exit("no %s (use --shared)" % scen_dir)
    os.makedirs(opt.cache, exist_ok=True)
    if opt.bond and opt.from_results:
        import bond_bench
        return bond_bench.report_bond(sys.modules[__name__], opt)
    if opt.bond:
        if os.geteuid() != 0:
            sys.exit("run as root (DPDK EAL)")
        if not os.access(opt.keel, os.X_OK):
            sys.exit("no keel binary at %s (cmake --preset host && cmake --build --preset host)" % opt.keel)
        import bond_bench
        return bond_bench.report_bond(sys.modules[__name__], opt)
    if opt.tunnel and (opt.from_results or opt.show_flows):
        import tnl_bench
        return tnl_bench.report_tunnel(sys.modules[__name__], opt)
    if opt.tunnel:
        if os.geteuid() != 0:
            sys.exit("run as root (DPDK EAL)")
        if "keel" in opt.tunnel_sides.split(",") and not os.access(opt.keel, os.X_OK):
            sys.exit("no keel binary at %s (cmake --preset host && cmake --build --preset host)" % opt.keel)
        import tnl_bench
        return tnl_bench.report_tunnel(sys.modules[__name__], opt)
    if not opt.scenarios:
        opt.scenarios = ",".join(sorted(os.listdir(scen_dir)) if opt.openflow else DEFAULT_SCENARIOS)
    only_variants = set(v for v in opt.variants.split(",") if v)

    plan = build_plan(scen_dir, [s for s in opt.scenarios.split(",") if s], opt.openflow, opt.max_records,
                      only_variants)

    if opt.show_flows:
        tunnel = [p for p in plan if p.get("tunnel")]
        for p in plan:
            if p.get("tunnel"):
                continue
            print("## %s / %s%s%s" % (p["scenario"], p["variant"],
                                      " (SKIPPED: %s)" % p["skip"] if p["skip"] else "",
                                      "\n# " + p["cap_note"] if p["cap_note"] else ""))
            print("# traffic: " + " ".join(p["capped"]))
            print(p["config"])
            if opt.openflow and p["measure"] == "throughput":
                if p["expected_text"]:
                    print("# megaflows expected (hand-derived, what Open vSwitch installs):")
                    print("".join("#   %s\n" % f for f in p["expected_text"]))
                elif p["measure"] == "throughput":
                    print("# no hand-derived megaflows: %s\n" % p["derive_err"])
        if tunnel:
            import tnl_bench
            opt.tunnel_flows = ",".join(str(int(p["traffic"][p["traffic"].index("--flows") + 1]))
                                        for p in tunnel if "--flows" in p["traffic"])
            return tnl_bench.report_tunnel(sys.modules[__name__], opt)
        return 0

    if opt.from_results:
        for p in plan:
            p["records"] = 0
        return dispatch(opt, plan)
    if os.geteuid() != 0:
        sys.exit("run as root (DPDK EAL)")
    if not os.access(opt.keel, os.X_OK):
        sys.exit("no keel binary at %s (cmake --preset host && cmake --build --preset host)" % opt.keel)

    # Tunables the binary may not have yet.
    needed = sorted({c for p in plan for c in p["cmds"]})
    if needed:
        ok = probe_commands(opt.keel, needed)
        for p in plan:
            bad = [c for c in p["cmds"] if not ok[c]]
            if bad and not p["skip"]:
                p["skip"] = "keel has no command for: %s" % ", ".join(bad)

    for p in plan:
        if p["skip"]:
            log("%s/%s skipped: %s" % (p["scenario"], p["variant"], p["skip"]))
            continue
        p["pcap"] = gen_pcap(opt.shared, opt.cache, p["capped"])
        n = pcap_records(p["pcap"])
        if opt.max_records > 0 and n > opt.max_records:
            sys.exit("%s: %d records > --max-records %d" % (p["pcap"], n, opt.max_records))
        p["records"] = n
        if p["cap_note"] and opt.full_pcap_ceiling:
            p["full_pcap"] = gen_pcap(opt.shared, opt.cache, p["traffic"])
        if p["cap_note"]:
            log("%s/%s: %s" % (p["scenario"], p["variant"], p["cap_note"]))

    return dispatch(opt, plan)


def dispatch(opt, plan):
    """Throughput rows (rounds outermost, one table), then the slow-path
    scenarios (flow-setup, revalidate-100k: their own tables). --scaling /
    --flowsetup-offline: only those tables (multi_pmd.py's section below)."""
    if opt.offload:
        import offload_bench
        return offload_bench.report_offload(sys.modules[__name__], opt,
                                            [p for p in plan if p["measure"] == "throughput"])
    if opt.scaling or opt.flowsetup_offline:
        rc = 0
        if opt.scaling:
            rc |= report_scaling(opt, [p for p in plan if p["measure"] == "throughput" and
                                       p["scenario"] in SCALING_SCENARIOS])
        if opt.flowsetup_offline:
            rc |= report_offline(opt, [p for p in plan if p["measure"] == "flowsetup"])
        return rc
    rc = 0
    tunnel = [p for p in plan if p.get("tunnel")]
    plan = [p for p in plan if not p.get("tunnel")]
    tp = [p for p in plan if p["measure"] == "throughput"]
    slow = [p for p in plan if p["measure"] != "throughput"]
    for p in plan:
        if p["skip"] and p["measure"] == "throughput":
            print("SKIPPED %s/%s: %s" % (p["scenario"], p["variant"], p["skip"]))
    if tp:
        rc |= report(opt, tp)
    if slow:
        rc |= report_slow(opt, slow)
    if tunnel:
        # vxlan-push (and the decap scenario generated from it): keel
        # combined, keel recirc, Open vSwitch with --ovs (tnl_bench.py).
        import tnl_bench
        opt.tunnel_flows = ",".join(str(int(p["traffic"][p["traffic"].index("--flows") + 1]))
                                    for p in tunnel if "--flows" in p["traffic"])
        print()
        rc |= tnl_bench.report_tunnel(sys.modules[__name__], opt)
    return rc


def report(opt, plan):
    if opt.from_results:
        runs, failures, meta = load_results(opt.from_results, plan)
    else:
        runs, failures, meta = measure(opt, plan)
    table, notes = make_table(opt, plan, runs, meta)
    print()
    print(table)
    print()
    loads = [float(r[k]) for rs in runs.values() for r in rs for k in ("load_start", "load_end")
             if k in r]
    n_runs = {len(rs) for rs in runs.values()}
    print("runs per row: %s; %s1-min load average during the runs: %s-%s"
          % ("/".join(map(str, sorted(n_runs))) or "0", meta.get("timing", ""),
             fmt(min(loads), 1) if loads else "NA", fmt(max(loads), 1) if loads else "NA"))
    if "keel" in meta:
        print(meta["keel"])
    for n in notes:
        print("note: " + n)
    for f in failures:
        print("PROBLEM: " + f)
    if opt.markdown:
        with open(opt.markdown, "w") as f:
            f.write(table + "\n")
    return 1 if failures else 0


def load_results(path, plan):
    """Run lines written by --results, for the plan's rows (table only)."""
    wanted = {(p["scenario"], p["variant"]) for p in plan}
    runs, failures = {}, []
    for line in open(path):
        if not line.startswith("scenario="):
            continue
        kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
        key = (kv.pop("scenario"), kv.pop("variant"))
        if key not in wanted:
            continue
        r = {}
        for k, v in kv.items():
            try:
                r[k] = float(v) if re.fullmatch(r"-?[0-9.]+(e-?[0-9]+)?", v) else v
            except ValueError:
                r[k] = v
        r["problems"] = "" if r.get("problems") in ("-", None) else r["problems"]
        if isinstance(r.get("ovs_mpps"), float) and "ratio_ovs" not in r and r["ovs_mpps"] > 0:
            r["ratio_ovs"] = r["mpps"] / r["ovs_mpps"]  # result files older than the ratio field
        for k in ("dp_flows", "dp_masks"):
            r[k] = int(r.get(k, 0))
        runs.setdefault(key, []).append(r)
        if r["problems"]:
            failures.append("%s run %s: %s" % ("/".join(key), kv.get("run"), r["problems"]))
    ovs_ok = any(isinstance(r.get("ovs_mpps"), float) for rs in runs.values() for r in rs)
    return runs, failures, {"timing": "from %s; " % path, "ovs_ok": ovs_ok}


def measure(opt, plan):
    io_bin = None
    if not opt.no_io_ceiling:
        io_bin = build_io_ceiling(opt.shared, opt.cache)
    ovs_ok = False
    if opt.ovs:
        ovs_ok = os.access(OVS_VSWITCHD, os.X_OK)
        if not ovs_ok:
            log("--ovs: Open vSwitch with DPDK is not installed (%s): OVS figures are quoted "
                "from BASELINE.md instead" % OVS_VSWITCHD)

    workdir = tempfile.mkdtemp(prefix="keel-scenarios-")
    # Run a private copy: a rebuild of build/host during the invocation must
    # not change the binary between rows.
    keel_mtime = os.path.getmtime(opt.keel)
    keel_src = opt.keel
    opt.keel = os.path.join(workdir, "keel")
    shutil.copy2(keel_src, opt.keel)
    results_f = open(opt.results, "a") if opt.results else None
    runs = {}
    failures = []
    t_start = time.time()
    try:
        for rnd in range(1, opt.runs + 1):
            for p in plan:
                if p["skip"]:
                    continue
                key = (p["scenario"], p["variant"])
                tag = "%s-%s-%d" % (p["scenario"], p["variant"], rnd)
                try:
                    r = run_keel(opt, workdir, tag, p)
                except KeelError as e:
                    errf = os.path.join(workdir, tag + ".stderr")
                    err = open(errf).read().strip()[-600:] if os.path.exists(errf) else ""
                    msg = "%s run %d: %s%s" % ("/".join(key), rnd, e, (" | stderr: " + err) if err else "")
                    log(msg)
                    failures.append(msg)
                    opt.keep = True
                    continue
                # Open vSwitch runs right after keel on the same row (A B A B
                # ...): the pair shares the machine's load of that minute, so
                # their ratio is the figure that survives the noise.
                if ovs_ok:
                    o = run_ovs(opt, p["scenario"], p["variant"], rnd)
                    if o:
                        r["ovs_mpps"] = float(o["mpps"])
                        r["ovs_cycles_per_pkt"] = float(o.get("cycles_per_pkt", "nan"))
                        r["ratio_ovs"] = r["mpps"] / r["ovs_mpps"] if r["ovs_mpps"] > 0 else None
                        r["ovs_load_end"] = open("/proc/loadavg").read().split()[0]
                        if opt.openflow and o.get("dump") and p.get("keel_dumps"):
                            # Open vSwitch's own dpctl/dump-flows of this round.
                            diff = compare_flows([norm_dp_flow(f) for f in p["keel_dumps"][-1]],
                                                 [norm_dp_flow(f) for f in o["dump"]])
                            r["flows_vs_ovs"] = "same" if not diff else "DIFFERENT"
                            if diff:
                                r["problems"] = "; ".join(x for x in (r["problems"],
                                    "megaflows differ from Open vSwitch's dump: " + diff) if x)
                if io_bin:
                    r["io_mpps"], r["io_cycles_per_pkt"], r["tsc_hz"] = run_io_ceiling(opt, io_bin, p["pcap"])
                    r["ratio_io"] = r["mpps"] / r["io_mpps"] if r["io_mpps"] else None
                    if p.get("full_pcap"):
                        r["io_mpps_full_pcap"], _, _ = run_io_ceiling(opt, io_bin, p["full_pcap"])
                r["records"] = p["records"]
                runs.setdefault(key, []).append(r)
                line = "scenario=%s variant=%s run=%d " % (p["scenario"], p["variant"], rnd)
                line += " ".join("%s=%s" % (k, ("%.3f" % v if isinstance(v, float) else
                                               str(v).replace(" ", "_") if v not in ("", None) else "-"))
                                 for k, v in r.items())
                print(line, flush=True)
                if results_f:
                    results_f.write(line + "\n")
                    results_f.flush()
                if r["problems"]:
                    failures.append("%s run %d: %s" % ("/".join(key), rnd, r["problems"]))
    finally:
        if results_f:
            results_f.close()
        if opt.keep:
            log("work dir kept: " + workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    rev = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip() or "?"
    meta = {
        "ovs_ok": ovs_ok,
        "timing": "window %.0f s after %.0f s warm-up; wall time %.0f s; "
                  % (opt.seconds, opt.warmup, time.time() - t_start),
        "keel": "keel %s (built %s; source tree at run time: git %s); keel PMD %s; io_ceiling on core %d"
                % (keel_src, time.strftime("%Y-%m-%d %H:%M", time.localtime(keel_mtime)), rev,
                   "on core %d (taskset), main thread core 0" % opt.pmd_core if opt.pmd_core >= 0
                   else "unpinned", opt.io_core),
    }
    return runs, failures, meta


# ---------------------------------------------------------------------------
# slow-path scenarios: flow-setup and revalidate-100k
# ---------------------------------------------------------------------------
def handlers_line(opt):
    """--handlers N: the config line that sets keel's upcall handler count."""
    return "set n-handler-threads %d\n" % opt.handlers if opt.handlers else ""


def thread_cpu_s(pid, comm):
    """CPU seconds (user + system) of the threads of `pid` named `comm`
    followed by digits or nothing (keel names its handlers handler1, handler2, ...)."""
    tot = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                if open("/proc/%d/task/%s/comm" % (pid, tid)).read().strip().rstrip("0123456789") != comm:
                    continue
                f = open("/proc/%d/task/%s/stat" % (pid, tid)).read().rsplit(")", 1)[1].split()
                tot += int(f[11]) + int(f[12])
            except OSError:
                pass
    except OSError:
        return None
    return tot / os.sysconf("SC_CLK_TCK")


def boot_slow(opt, workdir, tag, p, infinite, sim_replay=False):
    """sim_replay: the input is keel's sim pcap port replaying the pcap
    forever (pcap:in=FILE,loop=0), for captures too large for the host-sim
    board's 512 MB of DPDK memory with infinite_rx (revalidate-1m)."""
    cfg = os.path.join(workdir, tag + ".conf")
    with open(cfg, "w") as f:
        f.write(p["config"] + handlers_line(opt))
    argv = ["taskset", "-c", str(opt.pmd_core)] if opt.pmd_core >= 0 else []
    rx = ("%s=pcap:in=%s,loop=0" % (p["rx"], p["pcap"]) if sim_replay else
          "%s=dpdk:net_pcap0,rx_pcap=%s%s" % (p["rx"], p["pcap"], ",infinite_rx=1" if infinite else ""))
    argv += [opt.keel, "--config", cfg, "--port", rx, "--port", "%s=dpdk:net_null1,no-rx=1" % p["tx"]]
    return Keel(argv, os.path.join(workdir, tag + ".stderr"))


def rss_bytes(pid):
    """Resident bytes of process pid (/proc/PID/statm), or -1."""
    try:
        return int(open("/proc/%d/statm" % pid).read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return -1


def pmd_totals(k):
    pmds = k.json("pmd-stats-show --format json", timeout=30)["pmds"]
    return {key: sum(x[key] for x in pmds) for key in pmds[0] if isinstance(pmds[0][key], int)}


def run_flowsetup(opt, workdir, tag, p, infinite):
    """Boots keel with the one-pass (or, infinite, replayed) pcap and samples
    upcall-show / pmd-stats-show every 50 ms until the upcall counter stopped
    growing for 2 s (one pass: the pcap ran out; replay: every 5-tuple has its
    flow or the limit stops installs) or --flowsetup-seconds passed."""
    res = {"load_start": open("/proc/loadavg").read().split()[0], "mode": "replay" if infinite else "once"}
    k = boot_slow(opt, workdir, tag, p, infinite)
    samples = []
    try:
        k.json("show ports --format json", timeout=180)
        t_end = time.monotonic() + opt.flowsetup_seconds
        cpu0 = thread_cpu_s(k.p.pid, "handler")
        last_growth = time.monotonic()
        prev = None
        while time.monotonic() < t_end:
            u = k.json("upcall-show --format json", timeout=30)
            t = time.monotonic()
            samples.append((t, u["upcalls"], u["installs"], u["flows"]))
            if prev is None or u["upcalls"] > prev:
                last_growth = t
            prev = u["upcalls"]
            if u["upcalls"] and t - last_growth > 2:
                break
            time.sleep(0.05)
        cpu1 = thread_cpu_s(k.p.pid, "handler")
        u = k.json("upcall-show --format json", timeout=30)
        tot = pmd_totals(k)
        ports = k.json("show ports --format json", timeout=30)
        rc = k.exit()
    except BaseException:
        k.kill()
        raise
    finally:
        shutil.rmtree("/var/run/dpdk/keel-host-sim-%d" % k.p.pid, ignore_errors=True)
    span = u.get("upcall_span_us", 0) / 1e6
    grow = [s for i, s in enumerate(samples) if i and s[1] > samples[i - 1][1]]
    first = samples[samples.index(grow[0]) - 1] if grow else None
    last = grow[-1] if grow else None
    # best 0.5 s window of the samples
    peak = 0.0
    for i, a in enumerate(samples):
        for b in samples[i + 1:]:
            if b[0] - a[0] >= 0.5:
                peak = max(peak, (b[2] - a[2]) / (b[0] - a[0]))
                break
    rx = port_by_name(ports, p["rx"])["rx"]["packets"]
    res.update({
        "upcalls": u["upcalls"], "installs": u["installs"], "install_failed": u["install_failed"],
        "limit_hits": u["flow_limit_hits"], "flows_end": u["flows"], "flow_limit": u["flow_limit"],
        "dp_flows_max": max([s[3] for s in samples] + [u["flows"]]),
        "upcall_span_s": span,
        "upcalls_per_s": u["upcalls"] / span if span else 0.0,
        "installs_per_s": u["installs"] / span if span else 0.0,
        "sampled_installs_per_s": ((last[2] - first[2]) / (last[0] - first[0])) if first and last[0] > first[0] else 0.0,
        "peak_installs_per_s": peak,
        "handler_cpu_s": (cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else -1,
        "rx_packets": rx, "misses": tot["misses"], "lost": tot["lost"],
        "translate_errors": u["translate_errors"], "keel_rc": rc,
        "load_end": open("/proc/loadavg").read().split()[0],
    })
    res["handler_us_per_upcall"] = (res["handler_cpu_s"] * 1e6 / u["upcalls"]) if u["upcalls"] and res["handler_cpu_s"] >= 0 else -1
    res["wall_us_per_upcall"] = span * 1e6 / u["upcalls"] if u["upcalls"] else -1
    problems = []
    if rc != 0:
        problems.append("keel exit status %d" % rc)
    if not u["installs"]:
        problems.append("no flow installed")
    res["problems"] = "; ".join(problems)
    return res


def run_revalidate(opt, workdir, tag, p):
    """100k exact-match flows kept alive by the replayed pcap; then
    --reval-samples `revalidate` (terse) and `revalidate --full` rounds,
    alternating; then three steady terse rounds and the round after each of
    two flow-mods (OVS_REVAL_FLOWMODS): one no flow can match (goal: nothing
    re-translated, a steady round's time) and one that takes every flow
    (every flow re-translated and modified), each read from upcall-show's
    last_round."""
    res = {"load_start": open("/proc/loadavg").read().split()[0]}
    # A scenario Open vSwitch reads once (revalidate-1m): keel replays it
    # from its sim pcap port (boot_slow).
    k = boot_slow(opt, workdir, tag, p, True, sim_replay=not p["infinite_rx"])
    target = p["target_flows"] or 100000
    rx = lambda text: int(re.search(r": (\d+) us", text).group(1))
    # RESET_FLOW_LIMIT: every measured round starts from the configured flow
    # limit (`set flow-limit`, as Open vSwitch's upcall/set-flow-limit before
    # each of its rounds), so that a slow round's adaptive shrink doesn't make
    # the next one delete flows; its output comes before the next command's.
    reset = ("set flow-limit %d" % p["reset_flow_limit"]) if p["reset_flow_limit"] else None
    try:
        k.json("show ports --format json", timeout=180)
        rss0 = rss_bytes(k.p.pid)
        t0 = last_growth = time.monotonic()
        prev = -1
        resets = 0
        while True:
            u = k.json("upcall-show --format json", timeout=30)
            now = time.monotonic()
            if u["flows"] > prev:
                prev, last_growth = u["flows"], now
            # Target reached, or the datapath holds no more (a PMD's flow
            # table is full).
            if u["flows"] >= target or now - last_growth > 3 or now - t0 > 900:
                break
            # A round of the revalidator's own during the install took long
            # enough to adapt the limit below the target (loaded machine):
            # back to the configured one, counted.
            if reset and u["flow_limit"] < target:
                k.send(reset)
                resets += 1
            time.sleep(0.2)
        res["fill_s"] = time.monotonic() - t0
        res["fill_limit_resets"] = resets
        rss1 = rss_bytes(k.p.pid)
        res["rss_mb_before_fill"] = rss0 / 1e6
        res["rss_mb_filled"] = rss1 / 1e6
        res["rss_bytes_per_flow"] = (rss1 - rss0) / u["flows"] if u["flows"] and rss0 > 0 else -1
        res["flow_limit_filled"] = u["flow_limit"]
        time.sleep(opt.warmup)
        terse, full = [], []
        for i in range(opt.reval_samples):
            for kind in (("full", "terse") if i % 2 else ("terse", "full")):
                if reset:
                    k.send(reset)
                k.send("revalidate%s" % (" --full" if kind == "full" else ""))
                k.send("upcall-show --format json")  # a JSON line marks the end of the answer
                text = ""
                while True:
                    line = k.lines.get(timeout=120)
                    if line is None:
                        raise KeelError("keel exited during revalidate")
                    if line.startswith("{"):
                        u = json.loads(line)
                        break
                    text += line
                (full if kind == "full" else terse).append(rx(text) / 1000.0)
        flows_before = u["flows"]
        # The flow-mod rounds: rounds from now on only when a command changes
        # the rules (it wakes the revalidator) or `revalidate` asks, so the
        # round after each flow-mod is the next one, and upcall-show's
        # last_round is its own. Steady terse rounds right before, for the
        # same-run ratio.
        if reset:
            k.send(reset)  # the knob below wakes the revalidator: not from a full round's adapted limit
        k.send("set revalidator-interval 60000")
        time.sleep(1.5)  # a round on the old interval may still come
        steady = []
        for i in range(3):
            if reset:
                k.send(reset)
            k.send("revalidate")
            steady.append(k.json("upcall-show --format json", 120)["last_round"]["duration_us"] / 1000.0)
        res["steady_ms_median"] = statistics.median(steady)
        for name, fm in OVS_REVAL_FLOWMODS:
            if reset:
                # `set flow-limit` wakes the revalidator: the round it asks
                # for is over when a `revalidate` after it is.
                k.send(reset)
                k.send("revalidate")
                k.json("upcall-show --format json", 120)
            u0 = k.json("upcall-show --format json", 30)
            k.send("add-flow br0 " + fm)
            deadline = time.monotonic() + 300
            # Not asked while the round runs: keel's console thread would take
            # the core the revalidator shares with it (the PMD spins on the
            # other), which the steady rounds, asked with `revalidate` (the
            # console waits), don't pay.
            time.sleep(1.0)
            while True:
                u = k.json("upcall-show --format json", 120)
                if u["rounds"] > u0["rounds"]:
                    break
                if time.monotonic() > deadline:
                    raise KeelError("no revalidation round after add-flow %s" % fm)
                time.sleep(0.1)
            lr = u["last_round"]
            res["flow_limit_after_%s" % name] = u["flow_limit"]
            res["flowmod_%s_ms" % name] = lr["duration_us"] / 1000.0
            for key in ("looked_at", "rules_changed", "lookups_read", "revalidated", "modified", "deleted"):
                res["%s_%s" % (key, name)] = lr[key]
            res["flowmod_%s_over_steady" % name] = lr["duration_us"] / 1000.0 / res["steady_ms_median"]
        time.sleep(3)
        u3 = k.json("upcall-show --format json", timeout=30)
        tot = pmd_totals(k)
        rc = k.exit()
    except BaseException:
        k.kill()
        raise
    finally:
        shutil.rmtree("/var/run/dpdk/keel-host-sim-%d" % k.p.pid, ignore_errors=True)
    ratios = [f / t for t, f in zip(terse, full) if t > 0]
    res.update({
        "dp_flows": flows_before,
        "terse_ms_median": statistics.median(terse), "terse_ms_min": min(terse), "terse_ms_max": max(terse),
        "full_ms_median": statistics.median(full), "full_ms_min": min(full), "full_ms_max": max(full),
        "full_over_terse": statistics.median(ratios) if ratios else 0.0,
        "terse_samples": ",".join("%.1f" % x for x in terse), "full_samples": ",".join("%.1f" % x for x in full),
        "dp_flows_3s_later": u3["flows"], "lost": tot["lost"], "keel_rc": rc,
        "load_end": open("/proc/loadavg").read().split()[0],
    })
    problems = []
    if rc != 0:
        problems.append("keel exit status %d" % rc)
    if flows_before < target:
        problems.append("only %d flows (target %d)" % (flows_before, target))
    if res.get("revalidated_nonoverlap", 0):
        problems.append("the non-overlapping flow-mod re-translated %d flows" % res["revalidated_nonoverlap"])
    # Of the flows the round looked at (the full rounds above may have made
    # the adaptive flow limit delete some since flows_before was read).
    if res.get("revalidated_overlap", 0) < res.get("looked_at_overlap", 0) or not res.get("looked_at_overlap", 0):
        problems.append("the overlapping flow-mod re-translated only %d of the %d flows its round looked at" %
                        (res.get("revalidated_overlap", 0), res.get("looked_at_overlap", 0)))
    res["problems"] = "; ".join(problems)
    return res


def fmtv(v):
    return "%.3f" % v if isinstance(v, float) else (str(v).replace(" ", "_") if v not in ("", None) else "-")


def report_slow(opt, plan):
    """flow-setup and revalidate-100k: keel runs (and with --ovs, ovs_baseline.sh
    right after, same round), rounds outermost; then their tables."""
    runs = {}
    failures = []
    if not opt.from_results:
        ovs_ok = opt.ovs and os.access(OVS_VSWITCHD, os.X_OK)
        workdir = tempfile.mkdtemp(prefix="keel-slow-")
        # A private copy, as for the throughput rows.
        opt.keel = os.path.join(workdir, "keel")
        shutil.copy2(opt.keel_src, opt.keel)
        results_f = open(opt.results, "a") if opt.results else None
        try:
            for rnd in range(1, opt.runs + 1):
                for p in plan:
                    if p["skip"]:
                        continue
                    modes = [None]
                    if p["measure"] == "flowsetup":
                        modes = ["once"] + (["replay"] if opt.flowsetup_replay else [])
                    for mode in modes:
                        variant = p["variant"] + ("" if mode in (None, "once") else "+" + mode)
                        tag = "%s-%s-%d" % (p["scenario"], variant, rnd)
                        try:
                            if p["measure"] == "flowsetup":
                                r = run_flowsetup(opt, workdir, tag, p, mode == "replay")
                            else:
                                r = run_revalidate(opt, workdir, tag, p)
                        except (KeelError, queue.Empty) as e:
                            errf = os.path.join(workdir, tag + ".stderr")
                            err = open(errf).read().strip()[-600:] if os.path.exists(errf) else ""
                            failures.append("%s/%s run %d: %s %s" % (p["scenario"], variant, rnd, e, err))
                            log(failures[-1])
                            continue
                        if ovs_ok and mode in (None, "once"):
                            secs = opt.flowsetup_seconds if p["measure"] == "flowsetup" else opt.reval_samples
                            script = ovs_reval_script_copy(opt, workdir) if p["measure"] == "revalidate" else None
                            # keel's own scenarios (LOCAL_SCENARIOS) by directory
                            o = run_ovs(opt, p["dir"] if p["dir"].startswith(LOCAL_SCENARIOS) else p["scenario"],
                                        p["variant"], rnd, seconds=secs, fields=None, script=script)
                            for kk, vv in (o or {}).items():
                                if kk != "dump":
                                    r["ovs_" + kk] = vv
                        line = "scenario=%s variant=%s run=%d " % (p["scenario"], variant, rnd)
                        line += " ".join("%s=%s" % (kk, fmtv(vv)) for kk, vv in r.items())
                        print(line, flush=True)
                        if results_f:
                            results_f.write(line + "\n")
                            results_f.flush()
                        runs.setdefault((p["scenario"], variant), []).append(r)
                        if r["problems"]:
                            failures.append("%s/%s run %d: %s" % (p["scenario"], variant, rnd, r["problems"]))
        finally:
            if results_f:
                results_f.close()
            drop_workdir(opt, workdir, failures)
    else:
        for line in open(opt.from_results):
            if not line.startswith("scenario="):
                continue
            kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
            if kv["scenario"] not in {p["scenario"] for p in plan}:
                continue
            r = {}
            for kk, vv in kv.items():
                try:
                    r[kk] = float(vv)
                except ValueError:
                    r[kk] = vv
            runs.setdefault((kv["scenario"], kv["variant"]), []).append(r)
    for p in plan:
        if p["skip"]:
            print("SKIPPED %s/%s: %s" % (p["scenario"], p["variant"], p["skip"]))

    def mr(rs, key, nd=0, scale=1.0):
        vals = []
        for r in rs:
            try:
                v = float(r.get(key))
            except (TypeError, ValueError):
                continue
            if v >= 0:
                vals.append(v * scale)
        return med_range(vals, nd)

    fs = [(k, rs) for k, rs in runs.items() if k[0] == "flow-setup"]
    if fs:
        print()
        print("| variant | keel new flows/s (handler busy span) | keel upcalls/s | keel flows/s, sampled 50 ms | "
              "keel flows installed | keel lost (PMD, no upcall record) | keel handler CPU us/upcall | "
              "OVS upcalls/s (ovs_baseline.sh) | OVS us/upcall | OVS flows installed (ok) | "
              "OVS new flows/s (installed / upcall window) | keel/OVS new flows/s | keel flows/s / OVS upcalls/s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")

        def ovs_installs_per_s(r):
            """Open vSwitch's new flows/s: the flows its upcalls installed
            ("ok", BASELINE.md) over its upcall window -- the same quantity
            as keel's installs over its handler's busy span. Its upcalls/s
            also count the translate-only upcalls refused at its flow limit."""
            try:
                ok, secs = float(r["ovs_upcalls_ok"]), float(r["ovs_seconds"])
            except (KeyError, TypeError, ValueError):
                return None
            return ok / secs if secs > 0 else None
        for (sc, v), rs in sorted(fs):
            for r in rs:
                o = ovs_installs_per_s(r)
                if o is not None:
                    r["ovs_installs_per_s"] = o
            ratio = [float(r["installs_per_s"]) / r["ovs_installs_per_s"] for r in rs
                     if r.get("ovs_installs_per_s")]
            ratio_up = [float(r["installs_per_s"]) / float(r["ovs_upcalls_per_s"]) for r in rs
                        if r.get("ovs_upcalls_per_s") not in (None, "", "NA") and float(r["ovs_upcalls_per_s"]) > 0]
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                v, mr(rs, "installs_per_s"), mr(rs, "upcalls_per_s"), mr(rs, "sampled_installs_per_s"),
                mr(rs, "installs"), mr(rs, "lost"), mr(rs, "handler_us_per_upcall", 2),
                mr(rs, "ovs_upcalls_per_s"), mr(rs, "ovs_us_per_upcall", 1), mr(rs, "ovs_upcalls_ok"),
                mr(rs, "ovs_installs_per_s"), med_range(ratio, 1) if ratio else "NA",
                med_range(ratio_up, 1) if ratio_up else "NA"))
    rv = [(k, rs) for k, rs in runs.items() if k[0].startswith("revalidate-")]
    if rv:
        def paired(rs, a, b):
            """Per-run a/b (same run), median (min-max)."""
            v = []
            for r in rs:
                try:
                    x, y = float(r[a]), float(r[b])
                except (KeyError, TypeError, ValueError):
                    continue
                if y > 0:
                    v.append(x / y)
            return med_range(v, 2) if v else "NA"
        print()
        print("| variant | dp flows | keel terse round ms | keel full round ms | full/terse (paired) | "
              "keel steady round before the flow-mods ms | keel round after a non-overlapping flow-mod ms "
              "(re-translated) | its ratio to the steady round | keel round after an overlapping flow-mod ms "
              "(re-translated, modified) | OVS dump ms (steady) | OVS after the non-overlapping flow-mod ms "
              "(xlates) | OVS after the overlapping flow-mod ms (xlates) | keel/OVS overlapping (paired) | "
              "OVS / keel terse | OVS dp flows | keel resident bytes per flow |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for (sc, v), rs in sorted(rv):
            print("| %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s (%s, %s) | %s | %s (%s) | %s (%s) | %s | %s | %s | %s |" % (
                "%s/%s" % (sc, v), mr(rs, "dp_flows"), mr(rs, "terse_ms_median", 1), mr(rs, "full_ms_median", 1),
                mr(rs, "full_over_terse", 1), mr(rs, "steady_ms_median", 1), mr(rs, "flowmod_nonoverlap_ms", 1),
                mr(rs, "revalidated_nonoverlap"), paired(rs, "flowmod_nonoverlap_ms", "steady_ms_median"),
                mr(rs, "flowmod_overlap_ms", 1), mr(rs, "revalidated_overlap"), mr(rs, "modified_overlap"),
                mr(rs, "ovs_dump_ms_median"), mr(rs, "ovs_flowmod_nonoverlap_ms"), mr(rs, "ovs_xlates_nonoverlap"),
                mr(rs, "ovs_flowmod_overlap_ms"), mr(rs, "ovs_xlates_overlap"),
                paired(rs, "flowmod_overlap_ms", "ovs_flowmod_overlap_ms"),
                paired(rs, "ovs_dump_ms_median", "terse_ms_median"), mr(rs, "ovs_dp_flows"),
                mr(rs, "rss_bytes_per_flow")))
    loads = [float(r[k]) for rs in runs.values() for r in rs for k in ("load_start", "load_end") if k in r]
    if loads:
        print("\n1-min load average during the slow-path runs: %.1f-%.1f" % (min(loads), max(loads)))
    for f in failures:
        print("PROBLEM: " + f)
    return 1 if failures else 0


def make_table(opt, plan, runs, meta):
    base = read_baseline(os.path.join(opt.shared, "bench", "BASELINE.md"))
    ovs_ok = meta.get("ovs_ok", False)
    ovs_src = "this run (--ovs)" if ovs_ok else "BASELINE.md: min / median / max of 5"
    lines = ["| scenario | variant | keel Mpps median (min-max) | keel cycles/pkt median (min-max) | "
             "keel cycles/pkt beyond I/O | keel path (median run) | I/O ceiling Mpps median (min-max) | "
             "keel/ceiling median | OVS-DPDK Mpps (%s) | OVS cycles/pkt (beyond I/O) | OVS/ceiling | "
             "keel/OVS Mpps |" % ovs_src,
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    # Interleaved keel / Open vSwitch: per round, keel then Open vSwitch on the
    # same row back to back; the verdict is the median of the per-round ratios.
    interleaved = ["| scenario | variant | rounds | keel Mpps median (min-max) | OVS-DPDK Mpps median (min-max) | "
                   "keel/OVS per-round ratio: **median** (min-max) | per-round ratios (round order) | "
                   "I/O ceiling Mpps median (min-max) | 1-min load average (min-max) |",
                   "|---|---|---|---|---|---|---|---|---|"]
    for p in plan:
        key = (p["scenario"], p["variant"])
        b = base.get(key)
        ovs_cyc = "NA"
        if b:
            try:
                tsc = statistics.median([r["tsc_hz"] for r in runs.get(key, []) if r.get("tsc_hz")] or
                                        [TSC_HZ])
                ovs_cyc = "%s (%.0f)" % (b["cycles"], float(b["cycles"]) - tsc / (float(b["ceiling"]) * 1e6))
            except ValueError:
                ovs_cyc = b["cycles"]
        if p["skip"]:
            lines.append("| %s | %s | not run: %s | | | | | | %s | %s | %s | |"
                         % (key + (p["skip"], b["mpps_text"] if b else "NA", ovs_cyc,
                                   b["ratio"] if b else "NA")))
            continue
        rs = runs.get(key, [])
        if not rs:
            lines.append("| %s | %s | FAILED (see PROBLEM lines) | | | | | | %s | %s | | |"
                         % (key + (b["mpps_text"] if b else "NA", ovs_cyc)))
            continue
        mpps = [r["mpps"] for r in rs]
        io = [r.get("io_mpps") for r in rs]
        ratio = [r.get("ratio_io") for r in rs if r.get("ratio_io")]
        beyond = [r["cycles_per_pkt"] - r["io_cycles_per_pkt"] for r in rs if r.get("io_cycles_per_pkt")]
        round_ratios = [r["ratio_ovs"] for r in rs if r.get("ratio_ovs")]
        if ovs_ok and any(r.get("ovs_mpps") for r in rs):
            ovs_vals = [r["ovs_mpps"] for r in rs if r.get("ovs_mpps")]
            ovs_med, ovs_text, ovs_ratio = statistics.median(ovs_vals), med_range(ovs_vals), ""
            ovs_cyc = med_range([r["ovs_cycles_per_pkt"] for r in rs if r.get("ovs_cycles_per_pkt")], 0)
            load = [float(r[k]) for r in rs for k in ("load_start", "load_end", "ovs_load_end") if k in r]
            interleaved.append("| %s | %s | %d | %s | %s | **%s** (%s-%s) | %s | %s | %s |" % (
                p["scenario"], p["variant"], len(round_ratios), med_range(mpps), ovs_text,
                fmt(statistics.median(round_ratios)), fmt(min(round_ratios)), fmt(max(round_ratios)),
                ", ".join(fmt(x) for x in round_ratios),
                med_range([r["io_mpps"] for r in rs if r.get("io_mpps")], 1),
                "%.1f-%.1f" % (min(load), max(load)) if load else "NA") if round_ratios else
                "| %s | %s | 0 | %s | %s | NA | | | |" % (p["scenario"], p["variant"], med_range(mpps), ovs_text))
        elif b:
            ovs_med, ovs_text, ovs_ratio = b["mpps"], b["mpps_text"], b["ratio"]
        else:
            ovs_med, ovs_text, ovs_ratio = None, "NA", ""
        variant = p["variant"] + (" (capped pcap)" if p["cap_note"] else "")
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            p["scenario"], variant, med_range(mpps), med_range([r["cycles_per_pkt"] for r in rs], 0),
            med_range(beyond, 0), path_text(median_run(rs)), med_range(io, 1),
            fmt(statistics.median(ratio)) if ratio else "NA", ovs_text, ovs_cyc, ovs_ratio,
            "%s (per-round median)" % fmt(statistics.median(round_ratios)) if round_ratios else
            fmt(statistics.median(mpps) / ovs_med) if ovs_med else "NA"))
        if p["cap_note"]:
            full = [r.get("io_mpps_full_pcap") for r in rs if r.get("io_mpps_full_pcap")]
            notes.append("%s/%s: %s%s" % (key + (p["cap_note"],
                         "; I/O ceiling on the uncapped pcap (what OVS ran): %s Mpps" % med_range(full, 1)
                         if full else "")))
    notes.append("cycles/pkt beyond I/O: keel's cycles/pkt minus io_ceiling's cycles/pkt on the same "
                 "pcap in the same round; for OVS, its median cycles/pkt minus TSC Hz / its median "
                 "I/O ceiling (BASELINE.md)")
    if len(interleaved) > 2:
        lines += ["", "Interleaved keel / Open vSwitch (per round and row: keel, then OVS-DPDK%s; "
                  "ratio = keel Mpps / OVS Mpps of the same round):"
                  % (", then the I/O ceiling" if any(r.get("io_mpps") for rs in runs.values() for r in rs)
                     else ""), ""] + interleaved
    return "\n".join(lines), notes

# ---------------------------------------------------------------------------
# several PMDs (issue 13): scaling (--scaling) and offline flow-setup
# (--flowsetup-offline)
# ---------------------------------------------------------------------------
SCALING_SCENARIOS = ("p2p-10kflows", "dpcls-16masks")
PMD_MASKS = {1: "0x2", 2: "0x3"}  # 1 PMD on core 1 (as ovs_baseline.sh's PMD_CORE=1), 2 on cores 0 and 1


def split_pcap_by_flow(pcap, cache, nq=2):
    """Open vSwitch's side of a 2-queue input: net_pcap has one rx queue per
    rx_pcap, so the pcap is split by a hash of the 5-tuple (each flow on one
    queue, as RSS would) into nq files (cached). keel's sim port spreads the
    one pcap itself (Toeplitz + RETA)."""
    import zlib
    outs = [os.path.join(cache, "%s.q%dof%d.pcap" % (os.path.basename(pcap)[:-5], q, nq)) for q in range(nq)]
    if all(os.path.exists(o) and os.path.getmtime(o) >= os.path.getmtime(pcap) for o in outs):
        return outs
    data = open(pcap, "rb").read()
    files = [open(o + ".tmp", "wb") for o in outs]
    for f in files:
        f.write(data[:24])
    e = "<" if struct.unpack_from("<I", data, 0)[0] in (0xa1b2c3d4, 0xa1b23c4d) else ">"
    off = 24
    while off < len(data):
        incl = struct.unpack_from(e + "I", data, off + 8)[0]
        rec = data[off:off + 16 + incl]
        fr = rec[16:]
        l3 = 18 if fr[12:14] == b"\x81\x00" else 14
        key = fr[l3 + 9:l3 + 10] + fr[l3 + 12:l3 + 24]  # proto, addresses, ports (IPv4)
        files[zlib.crc32(key) % nq].write(rec)
        off += 16 + incl
    for f, o in zip(files, outs):
        f.close()
        os.replace(o + ".tmp", o)
    return outs


def ovs_script_copy(opt, workdir):
    """A copy of shared/bench whose ovs_baseline.sh takes the rx port's
    devargs and Interface options from the environment (RX_PCAP_ARGS,
    RX_IFACE_OPTS): the script adds p0 at measurement start, after
    EXTRA_VSCTL, so options:n_rxq can't be set from outside. The original
    is not changed; the patch is checked to apply."""
    def patch(text):
        a = 'local devargs="net_pcap0,rx_pcap=$1"'
        b = '"ofport_request=$RX_OFPORT" >>"$WORK/log/setup.log"'
        if a not in text or b not in text:
            raise KeelError("ovs_baseline.sh changed: cannot add n_rxq to its rx port")
        text = text.replace(a, 'local devargs="net_pcap0,${RX_PCAP_ARGS:-rx_pcap=$1}"')
        return text.replace(b, '"ofport_request=$RX_OFPORT" ${RX_IFACE_OPTS:-} >>"$WORK/log/setup.log"')
    return patched_ovs_script(opt, workdir, "bench", patch)


def patched_ovs_script(opt, workdir, name, patch):
    """shared/bench copied (once) to workdir/name, its ovs_baseline.sh
    rewritten by patch(text); returns the copy's ovs_baseline.sh."""
    dst = os.path.join(workdir, name)
    path = os.path.join(dst, "ovs_baseline.sh")
    if not os.path.exists(dst):
        shutil.copytree(os.path.join(opt.shared, "bench"), dst,
                        ignore=shutil.ignore_patterns("*.pcap", "ovsbench-*"))
        text = open(path).read()
        open(path, "w").write(patch(text))
    return path


# revalidate-100k on Open vSwitch, measured as keel's rounds are: after the
# steady samples, the revalidators are left to dump only when woken
# (max-revalidator and max-idle 60 s), so each flow-mod is followed by exactly
# one dump, whose duration upcall/show reports once it ended (a
# revalidator/wait that times out means it ended before the wait began; no
# other dump ran). Two flow-mods: one no flow can match (in_port=65000) and
# one that takes every flow (in_port=1 at a priority above the scenario's
# rule, actions drop: every flow re-translated and its actions changed).
# coverage/show's xlate_actions total tells how many translations each
# dump made (the counters reach the total within a second).
OVS_REVAL_FLOWMODS = (("nonoverlap", "priority=1,in_port=65000,actions=drop"),
                      ("overlap", "priority=40000,in_port=1,actions=drop"))
OVS_MEASURE_REVALIDATE = r'''measure_revalidate() {
    # Patched by keel's tests/bench/run_scenarios.py (ovs_reval_script_copy).
    # RESET_FLOW_LIMIT (scenario.conf, revalidate-1m): upcall/set-flow-limit
    # before each measured round, as keel's run sets its flow limit.
    local i f target=${TARGET_FLOWS:-100000} last=-1 still=0
    reset_limit() { [ -z "${RESET_FLOW_LIMIT:-}" ] || $APPCTL upcall/set-flow-limit "$RESET_FLOW_LIMIT" >/dev/null; }
    for i in $(seq 1800); do
        f=$(dp_flows); [ "${f:-0}" -ge "$target" ] && break
        # the count stopped growing for 10 s: the pass is over (read once)
        if [ "${f:-0}" = "$last" ]; then still=$((still + 1)); else still=0; last=${f:-0}; fi
        [ "$still" -ge 20 ] && break
        sleep 0.5
    done
    [ "${f:-0}" -ge "$target" ] || log "only ${f:-0} datapath flows (target $target)"
    sleep "$WARMUP"
    local steady="" k before
    dump_ms() { $APPCTL upcall/show | sed -n 's/.*dump duration : *\([0-9]*\)ms.*/\1/p' | head -1; }
    xlates() { $APPCTL coverage/show | awk '/^xlate_actions /{print $NF; exit}'; }
    before=$(dp_flows)
    for k in $(seq "$SECONDS_ARG"); do
        reset_limit
        $APPCTL revalidator/wait >/dev/null
        steady="$steady $(dump_ms)"
    done
    $APPCTL upcall/show >"$WORK/log/upcall-$TAG.txt" 2>&1
    $VSCTL set Open_vSwitch . other_config:max-revalidator=60000 other_config:max-idle=${REVAL_MAX_IDLE:-60000}
    reset_limit
    $APPCTL revalidator/wait >/dev/null; sleep 2
    local out="" name fm x0 x1 d
    for fm in @FLOWMODS@; do
        name=${fm%%=*}; fm=${fm#*=}
        reset_limit
        x0=$(xlates)
        ovs-ofctl add-flow "$FLOWS_BRIDGE" "$fm" >/dev/null 2>&1
        timeout 20 $APPCTL revalidator/wait >/dev/null 2>&1
        d=$(dump_ms); sleep 1.5; x1=$(xlates)
        out="$out flowmod_${name}_ms=$d xlates_${name}=$((x1 - x0)) dp_flows_after_${name}=$(dp_flows) flow_limit_after_${name}=$($APPCTL upcall/show | sed -n 's/.*(limit \([0-9]*\)).*/\1/p' | head -1)"
    done
    local sorted; sorted=$(echo $steady | tr ' ' '\n' | grep . | sort -n)
    printf 'dp_flows=%s dump_ms_min=%s dump_ms_median=%s dump_ms_max=%s dump_ms_samples=[%s]%s revalidators=%s flow_limit=%s' \
        "$before" "$(echo "$sorted" | head -1)" \
        "$(echo "$sorted" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" \
        "$(echo "$sorted" | tail -1)" "$(echo $steady | tr ' ' ',')" "$out" \
        "$(grep -c '^ *[0-9]*: (keys' "$WORK/log/upcall-$TAG.txt")" \
        "$(sed -n 's/.*(limit \([0-9]*\)).*/\1/p' "$WORK/log/upcall-$TAG.txt" | head -1)"
}
'''


def ovs_reval_script_copy(opt, workdir):
    """A copy of shared/bench whose ovs_baseline.sh measures revalidate-100k's
    flow-mod rounds as described at OVS_MEASURE_REVALIDATE (the original
    measures one dump after two revalidator/wait calls, which may be the
    steady dump after the one that re-translated). The original is not
    changed; the function replaced is checked to be there."""
    def patch(text):
        a = text.find("measure_revalidate() {\n")
        b = text.find("\n}\n", a)
        if a < 0 or b < 0 or "revalidator/wait" not in text[a:b]:
            raise KeelError("ovs_baseline.sh changed: cannot patch measure_revalidate")
        fms = " ".join("'%s=%s'" % (n, f) for n, f in OVS_REVAL_FLOWMODS)
        return text[:a] + OVS_MEASURE_REVALIDATE.replace("@FLOWMODS@", fms).rstrip("\n") + text[b + 2:]
    return patched_ovs_script(opt, workdir, "bench-reval", patch)


def results_lines(path, kind):
    out = []
    for line in open(path):
        if line.startswith("scenario=") and " kind=%s " % kind in line:
            kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
            r = {}
            for k, v in kv.items():
                try:
                    r[k] = float(v)
                except ValueError:
                    r[k] = v
            out.append(r)
    return out


def emit(opt, fields):
    line = " ".join("%s=%s" % (k, fmtv(v)) for k, v in fields.items())
    print(line, flush=True)
    if opt.results:
        with open(opt.results, "a") as f:
            f.write(line + "\n")


def report_scaling(opt, plan):
    """Per round and row: keel 1 PMD, OVS 1 PMD, keel 2 PMDs, OVS 2 PMDs
    (A B A B), the input with 2 rx queues in all four."""
    rows = [p for p in plan if not p["skip"]]
    failures = []
    if opt.from_results:
        recs = results_lines(opt.from_results, "scaling")
    else:
        recs = []
        ovs_ok = opt.ovs and os.access(OVS_VSWITCHD, os.X_OK)
        workdir = tempfile.mkdtemp(prefix="keel-scaling-")
        opt.keel = os.path.join(workdir, "keel")
        shutil.copy2(opt.keel_src, opt.keel)
        script = ovs_script_copy(opt, workdir) if ovs_ok else None
        for rnd in range(1, opt.runs + 1):
            for p in rows:
                q = split_pcap_by_flow(p["pcap"], opt.cache) if ovs_ok else None
                for n in (1, 2):
                    tag = "%s-%s-%dpmd-%d" % (p["scenario"], p["variant"], n, rnd)
                    rec = {"scenario": p["scenario"], "variant": p["variant"], "run": rnd, "kind": "scaling",
                           "pmds": n}
                    try:
                        r = run_keel(opt, workdir, tag, p,
                                     ports=["%s=pcap:in=%s,rxq=2,loop=0" % (p["rx"], p["pcap"]), "%s=null" % p["tx"]],
                                     extra_config="set pmd-cpu-mask %s\n" % PMD_MASKS[n], pin=False)
                    except KeelError as e:
                        failures.append("%s: %s" % (tag, e))
                        log(failures[-1])
                        continue
                    rec.update({"mpps": r["mpps"], "cycles_per_pkt": r["cycles_per_pkt"], "keel_pmds": r["pmds"],
                                "load_start": r["load_start"], "load_end": r["load_end"]})
                    if r["problems"]:
                        failures.append("%s: %s" % (tag, r["problems"]))
                    if r["pmds"] != n:
                        failures.append("%s: keel ran %d PMDs" % (tag, r["pmds"]))
                    if ovs_ok:
                        env = {"RX_PCAP_ARGS": ",".join("rx_pcap=" + f for f in q),
                               "RX_IFACE_OPTS": "options:n_rxq=2"}
                        if n == 2:
                            # OVS's cycles assignment, with no cycles measured
                            # yet, put both queues on one PMD (seen in its
                            # log): pin them as keel places them, queue q on
                            # core q (pmd-rxq-affinity; the cores are then
                            # isolated, which p1, no-rx, doesn't mind).
                            env["EXTRA_VSCTL"] = "set Open_vSwitch . other_config:pmd-cpu-mask=0x3"
                            env["RX_IFACE_OPTS"] += " other_config:pmd-rxq-affinity=0:0,1:1"
                        o = run_ovs(opt, p["scenario"], p["variant"], rnd, env_extra=env, script=script)
                        if o:
                            rec["ovs_mpps"] = float(o["mpps"])
                            rec["ovs_load_end"] = open("/proc/loadavg").read().split()[0]
                    emit(opt, rec)
                    recs.append(rec)
        drop_workdir(opt, workdir, failures)
    print()
    print("| scenario | variant | rounds | keel 1 PMD Mpps | keel 2 PMDs Mpps | keel 2/1 per round: **median** "
          "(min-max) | OVS 1 PMD Mpps | OVS 2 PMDs Mpps | OVS 2/1 per round: **median** (min-max) | "
          "keel/OVS at 2 PMDs (per round) | 1-min load (min-max) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for p in rows:
        rs = [r for r in recs if r["scenario"] == p["scenario"] and r["variant"] == p["variant"]]
        by = {}
        for r in rs:
            by.setdefault(int(r["run"]), {})[int(r["pmds"])] = r
        k1 = [b[1]["mpps"] for b in by.values() if 1 in b]
        k2 = [b[2]["mpps"] for b in by.values() if 2 in b]
        kr = [b[2]["mpps"] / b[1]["mpps"] for b in by.values() if 1 in b and 2 in b and b[1]["mpps"]]
        o1 = [b[1]["ovs_mpps"] for b in by.values() if 1 in b and "ovs_mpps" in b[1]]
        o2 = [b[2]["ovs_mpps"] for b in by.values() if 2 in b and "ovs_mpps" in b[2]]
        orr = [b[2]["ovs_mpps"] / b[1]["ovs_mpps"] for b in by.values()
               if 1 in b and 2 in b and b[1].get("ovs_mpps") and b[2].get("ovs_mpps")]
        ko = [b[2]["mpps"] / b[2]["ovs_mpps"] for b in by.values() if 2 in b and b[2].get("ovs_mpps")]
        loads = [float(r[k]) for r in rs for k in ("load_start", "load_end", "ovs_load_end") if k in r]
        mm = lambda v: "**%s** (%s-%s)" % (fmt(statistics.median(v)), fmt(min(v)), fmt(max(v))) if v else "NA"
        print("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            p["scenario"], p["variant"], len(by), med_range(k1) if k1 else "NA", med_range(k2) if k2 else "NA",
            mm(kr), med_range(o1) if o1 else "NA", med_range(o2) if o2 else "NA", mm(orr), mm(ko),
            "%.1f-%.1f" % (min(loads), max(loads)) if loads else "NA"))
    print("\nkeel: sim ports p0=pcap:in=PCAP,rxq=2,loop=0 -> p1=null, `set pmd-cpu-mask` 0x2 (1 PMD, both "
          "queues) / 0x3 (2 PMDs); Open vSwitch: net_pcap0 with one rx_pcap per queue (the pcap split by "
          "5-tuple), options:n_rxq=2, pmd-cpu-mask 0x2 / 0x3 (2 PMDs: pmd-rxq-affinity=0:0,1:1, queue q on core q as keel places them). %d cores: with 2 PMDs the main, handler and "
          "revalidator threads share the PMDs' cores." % os.cpu_count())
    for f in failures:
        print("PROBLEM: " + f)
    return 1 if failures else 0


def check_output_once_in_flow_order(in_pcap, out_pcap):
    """'' if out holds every record of in exactly once and each 5-tuple's
    records in input order; else what differs."""
    def records(path):
        data = open(path, "rb").read()
        e = "<" if struct.unpack_from("<I", data, 0)[0] in (0xa1b2c3d4, 0xa1b23c4d) else ">"
        off, out = 24, []
        while off < len(data):
            incl = struct.unpack_from(e + "I", data, off + 8)[0]
            out.append(data[off + 16:off + 16 + incl])
            off += 16 + incl
        return out
    a, b = records(in_pcap), records(out_pcap)
    if len(a) != len(b):
        return "%d records out of %d" % (len(b), len(a))
    if sorted(a) != sorted(b):
        return "the output is not the input's records once each"
    def flows(frames):
        d = {}
        for fr in frames:
            d.setdefault(fr[23:24] + fr[26:38], []).append(fr)
        return d
    fa, fb = flows(a), flows(b)
    bad = sum(1 for k in fa if fa[k] != fb.get(k))
    return "%d flows out of order" % bad if bad else ""


def report_offline(opt, plan):
    """flow-setup's pcap read once, offline (keel --exit-when-drained), with
    1 and 2 PMDs (the input with 2 rx queues), alternating per round."""
    rows = [p for p in plan if not p["skip"]]
    failures = []
    if opt.from_results:
        recs = results_lines(opt.from_results, "offline")
    else:
        recs = []
        workdir = tempfile.mkdtemp(prefix="keel-offline-")
        opt.keel = os.path.join(workdir, "keel")
        shutil.copy2(opt.keel_src, opt.keel)
        for rnd in range(1, opt.runs + 1):
            for p in rows:
                for n in ((1, 2) if rnd % 2 else (2, 1)):
                    tag = "%s-%s-%dpmd-%d" % (p["scenario"], p["variant"], n, rnd)
                    cfg = os.path.join(workdir, tag + ".conf")
                    outp = os.path.join(workdir, tag + ".out.pcap")
                    with open(cfg, "w") as f:
                        f.write(p["config"] + "set pmd-cpu-mask %s\n" % PMD_MASKS[n])
                    load0 = open("/proc/loadavg").read().split()[0]
                    t0 = time.monotonic()
                    pr = subprocess.run([opt.keel, "--config", cfg,
                                         "--port", "%s=pcap:in=%s,rxq=2" % (p["rx"], p["pcap"]),
                                         "--port", "%s=pcap:out=%s" % (p["tx"], outp), "--exit-when-drained"],
                                        input="upcall-show --format json\npmd-stats-show --format json\n",
                                        capture_output=True, text=True, timeout=1800)
                    wall = time.monotonic() - t0
                    js = [json.loads(l) for l in pr.stdout.splitlines() if l.startswith("{")]
                    up = next((j for j in js if "upcalls" in j), {})
                    st = next((j for j in js if "pmds" in j), {"pmds": []})
                    span = up.get("upcall_span_us", 0) / 1e6
                    rec = {"scenario": p["scenario"], "variant": p["variant"], "run": rnd, "kind": "offline",
                           "pmds": n, "keel_pmds": len(st["pmds"]), "rc": pr.returncode, "wall_s": wall,
                           "upcalls": up.get("upcalls", 0), "installs": up.get("installs", 0),
                           "limit_hits": up.get("flow_limit_hits", 0), "upcall_span_s": span,
                           "upcalls_per_s": up.get("upcalls", 0) / span if span else 0.0,
                           "installs_per_s": up.get("installs", 0) / span if span else 0.0,
                           "packets_per_s_wall": p["records"] / wall if wall else 0.0,
                           "lost": sum(x.get("lost", 0) for x in st["pmds"]) + up.get("lost", 0),
                           "backpressure": up.get("backpressure_pauses", 0),
                           "rx_per_pmd": "/".join(str(x.get("packets_received", 0)) for x in st["pmds"]),
                           "offline": up.get("offline"), "load_start": load0,
                           "load_end": open("/proc/loadavg").read().split()[0]}
                    problems = []
                    if pr.returncode != 0:
                        problems.append("keel exit status %d: %s" % (pr.returncode, pr.stderr.strip()[-300:]))
                    if up.get("offline") is not True:
                        problems.append("not offline")
                    if rec["lost"]:
                        problems.append("lost %d" % rec["lost"])
                    if not problems:
                        bad = check_output_once_in_flow_order(p["pcap"], outp)
                        rec["out_check"] = "every packet once, per-flow order" if not bad else bad
                        if bad:
                            problems.append(bad)
                    if os.path.exists(outp):
                        os.unlink(outp)
                    rec["problems"] = "; ".join(problems)
                    if problems:
                        failures.append("%s: %s" % (tag, rec["problems"]))
                    emit(opt, rec)
                    recs.append(rec)
        drop_workdir(opt, workdir, failures)
    print()
    print("| variant | PMDs | runs | wall time s | packets/s (wall) | upcalls/s (handler busy span) | "
          "installs/s (span) | flows installed | lost | backpressure pauses | rx per PMD (last run) | "
          "output check | 1-min load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in rows:
        for n in (1, 2):
            rs = [r for r in recs if r["scenario"] == p["scenario"] and r["variant"] == p["variant"]
                  and int(r["pmds"]) == n]
            if not rs:
                continue
            v = lambda k, nd=0: med_range([float(r[k]) for r in rs], nd)
            loads = [float(r[k]) for r in rs for k in ("load_start", "load_end")]
            print("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f-%.1f |" % (
                p["variant"], n, len(rs), v("wall_s", 2), v("packets_per_s_wall"), v("upcalls_per_s"),
                v("installs_per_s"), v("installs"), v("lost"), v("backpressure"),
                "%d" % rs[-1]["rx_per_pmd"] if isinstance(rs[-1]["rx_per_pmd"], float) else rs[-1]["rx_per_pmd"],
                "; ".join(sorted({str(r.get("out_check", r.get("problems"))).replace("_", " ") for r in rs})),
                min(loads), max(loads)))
    print("\nkeel --exit-when-drained, p0=pcap:in=PCAP,rxq=2 (read once) -> p1=pcap:out; `set pmd-cpu-mask` "
          "0x2 (1 PMD: the 2 queues merged, file order) / 0x3 (2 PMDs, one queue each); %d cores shared "
          "with the handler, revalidator and main threads." % os.cpu_count())
    for f in failures:
        print("PROBLEM: " + f)
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())

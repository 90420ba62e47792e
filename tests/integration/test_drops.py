"""Drop accounting (issue 19): every packet keel receives is accounted for.

Every scenario of ../shared/bench/scenarios (the copies under
tests/integration/data, which test_ofproto_flows.py holds equal to the
originals), every variant, replayed through host-sim offline (pcap ports,
--exit-when-drained: deterministic, lossless) with a few hundred packets:
the configs come from tests/bench's own translations of the scenarios
(run_scenarios.build_plan for the OpenFlow ones, tnl_bench for vxlan-push
and the VXLAN decap scenario it derives from it, bond_bench for
bond-balance-tcp), the pcaps from gen_traffic.py, the DPDK vdevs of those
configs become sim ports (an rx_pcap vdev a pcap input, a net_null one a
pcap output). After each run `show drops --format json` and `show ports
--format json` must say, for every port:

  received (show ports' rx packets) = forwarded + to the slow path +
  dropped + in flight, in flight = 0 (the run drained), the reasons sum to
  the dropped total, the tx side agrees with show ports, and the totals
  are the ports' sums; every packet a port's fate counts as dropped for a
  reason is also in the PMDs' per-reason counts (which count copies too);

and what the scenario is for happened (p2p: everything forwarded and sent
once on the tx port; vxlan push/decap: every packet out encapsulated /
decapsulated; bond: the partner's LACPDUs consumed by the slow path).

Then cases no scenario reaches, each checking its reason by name and the
same invariant: runts, a drop rule and a table miss, a port in no bridge,
resubmit loops (recursion too deep, too many resubmits), an encapsulated
frame over the uplink's MTU (tx: over the MTU), VXLAN frames tnl_pop
refuses (bad flags, truncated, wrong UDP checksum), a tunnel packet no
tunnel port takes, a link held down (tx: link down), a tx queue nobody
drains (tx: queue full), flooding to several
ports (one received packet, one fate), packet-ins to the controller
(slow path) and beyond its queue (controller_queue_full), a live miss
storm (upcall_lost, however many), and `coverage-show`'s Open vSwitch
names for them."""
import os
import shlex
import shutil
import struct
import sys
from concurrent.futures import ThreadPoolExecutor

from harness import check, json_lines, main, run_keel, tmpdir, udp_frame, write_pcap

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import bond_bench  # noqa: E402
import run_scenarios as rs  # noqa: E402
import tnl_bench  # noqa: E402

DATA = os.path.join(HERE, "data")
RECORDS = 192  # packets per scenario run (a multiple of dpcls-16masks' 16 groups)
# show ports before and after show drops: a bond member's LACP keeps sending
# after the drain, so its tx count may move between the two commands.
SHOW = "show ports --format json\nshow drops --format json\nshow ports --format json\n"


def shared_root(work):
    """A directory laid out as ../shared (bench/gen_traffic.py,
    bench/scenarios) over the repo's copies, for tests/bench's functions."""
    root = os.path.join(work, "shared")
    os.makedirs(os.path.join(root, "bench"), exist_ok=True)
    for name, target in (("gen_traffic.py", os.path.join(DATA, "gen_traffic.py")),
                         ("scenarios", os.path.join(DATA, "scenarios"))):
        link = os.path.join(root, "bench", name)
        if not os.path.lexists(link):
            os.symlink(target, link)
    return root


def sim_spec(name, spec, work):
    """A tests/bench DPDK vdev spec as a sim port: an rx_pcap vdev replays
    its file once (and writes what it is sent), any other writes a pcap."""
    out = os.path.join(work, "%s.out.pcap" % name)
    if not spec.startswith("dpdk:"):
        return "%s=%s" % (name, spec)
    args = dict((kv.split("=", 1) + [""])[:2] for kv in spec[len("dpdk:"):].split(",")[1:])
    if "rx_pcap" in args:
        return "%s=pcap:in=%s,out=%s" % (name, args["rx_pcap"], out)
    return "%s=pcap:out=%s" % (name, out)


def boot_args(config, specs, work):
    cfg = os.path.join(work, "keel.cfg")
    with open(cfg, "w") as f:
        f.write(config)
    args = ["--config", cfg, "--config-dir", work]
    for s in specs:
        args += ["--port", s]
    return args + ["--exit-when-drained"]


def checked(label, r):
    """show drops and show ports of a finished run, the invariant checked:
    ({port: drops}, {port: show ports}, show drops JSON, the run)."""
    check(r.returncode == 0, "%s: keel exits 0" % label, r)
    js = json_lines(r.stdout)
    check(len(js) >= 3 and "pmds" in js[1] and "ports" in js[0] and "ports" in js[2],
          "%s: show ports, show drops, show ports answered" % label, r)
    before, drops, ports = {p["name"]: p for p in js[0]["ports"]}, js[1], {p["name"]: p for p in js[2]["ports"]}
    check_invariant(label, drops, ports, r, before)
    return {p["name"]: p for p in drops["ports"]}, ports, drops, r


def replay(label, config, specs, work, extra=""):
    """Boots keel offline on `specs` with `config`: checked()'s answer."""
    return checked(label, run_keel(*boot_args(config, specs, work), stdin=SHOW + extra))


def replay_all(jobs):
    """replay() of several runs at once ([(label, config, specs, work)]):
    each keel mostly waits (boot, drain, exit), so they overlap; offline
    runs give the same result whatever the load."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = [pool.submit(run_keel, *boot_args(c, s, w), stdin=SHOW) for _, c, s, w in jobs]
        return [checked(j[0], f.result()) for j, f in zip(jobs, runs)]


def check_invariant(label, drops, ports, r, before):
    tot = {"received": 0, "forwarded": 0, "slow_path": 0, "dropped": 0, "in_flight": 0}
    tot_reasons = {}
    for d in drops["ports"]:
        n = d["name"]
        where = "%s: port %s: " % (label, n)
        check(n in ports, where + "in show ports", r)
        sp = ports[n]
        check(d["received"] == sp["rx"]["packets"], where + "received %d = show ports rx %d"
              % (d["received"], sp["rx"]["packets"]), r)
        check(sum(d["reasons"].values()) == d["dropped"], where + "the reasons %s sum to dropped %d"
              % ({k: v for k, v in d["reasons"].items() if v}, d["dropped"]), r)
        check(d["in_flight"] == 0, where + "nothing in flight after the drain (%d)" % d["in_flight"], r)
        check(d["received"] == d["forwarded"] + d["slow_path"] + d["dropped"] + d["in_flight"],
              where + "received %d = forwarded %d + slow path %d + dropped %d + in flight %d"
              % (d["received"], d["forwarded"], d["slow_path"], d["dropped"], d["in_flight"]), r)
        tx, b = d["tx"], before[n]["tx"]
        check(b["packets"] <= tx["packets"] <= sp["tx"]["packets"] and b["dropped"] <= tx["dropped"] <= sp["tx"]["dropped"],
              where + "tx %s agrees with show ports before %s and after %s" % (tx, b, sp["tx"]), r)
        check(tx["queue_full"] + tx["mtu_exceeded"] + tx["link_down"] + tx["hw_dropped"] == tx["dropped"],
              where + "tx drop reasons sum to the tx drops: %s" % tx, r)
        check(d["rx_port_dropped"] == sp["rx"]["dropped"], where + "Rx-drop agrees with show ports", r)
        for k in tot:
            tot[k] += d[k]
        for k, v in d["reasons"].items():
            tot_reasons[k] = tot_reasons.get(k, 0) + v
    t = drops["totals"]
    for k, v in tot.items():
        check(t[k] == v, "%s: totals %s %d = the ports' sum %d" % (label, k, t[k], v), r)
    check(t["reasons"] == tot_reasons, "%s: the totals' reasons are the ports' sums" % label, r)
    # Each packet dropped is a buffer dropped: the PMDs count it too (with
    # the copies; a hardware rule's drops are no PMD's).
    pmd = {}
    for p in drops["pmds"]:
        check(sum(p["reasons"].values()) == p["dropped"], "%s: pmd %d's reasons sum to its drops" % (label, p["pmd"]), r)
        for k, v in p["reasons"].items():
            pmd[k] = pmd.get(k, 0) + v
    for k, v in tot_reasons.items():
        if k != "hw_drop":
            check(v <= pmd.get(k, 0), "%s: %d packets dropped for %s, the PMDs counted %d" % (label, v, k, pmd.get(k, 0)), r)


def gen(shared, work, args):
    cache = os.path.join(work, "cache")
    os.makedirs(cache, exist_ok=True)
    return rs.gen_pcap(shared, cache, args)


def capped(args, n=RECORDS):
    out, _ = rs.cap_traffic(args, n)
    return out


# --- the scenarios -------------------------------------------------------------

def openflow_scenarios():
    """The scenarios run_scenarios.py translates to add-br/add-port/add-flows."""
    work = tmpdir()
    shared = shared_root(work)
    scen = os.path.join(shared, "bench", "scenarios")
    plan = rs.build_plan(scen, sorted(n for n in os.listdir(scen) if os.path.isdir(os.path.join(scen, n))))
    jobs, expect = [], []
    for p in plan:
        if p["tunnel"] or "run with --bond" in p["skip"]:
            continue  # their own tests below
        label = "%s/%s" % (p["scenario"], p["variant"])
        check(not p["skip"], "%s: translated (%s)" % (label, p["skip"]))
        pcap = gen(shared, work, capped(p["traffic"]))
        w = os.path.join(work, label.replace("/", "-"))
        os.makedirs(w)
        specs = [sim_spec(p["rx"], "dpdk:net_pcap0,rx_pcap=%s" % pcap, w), sim_spec(p["tx"], "dpdk:net_null1", w)]
        jobs.append((label, p["config"], specs, w))
        expect.append((p["rx"], p["tx"], rs.pcap_records(pcap)))
    check(len(jobs) >= 10, "the OpenFlow scenarios' variants (%d)" % len(jobs))
    for (label, _, _, _), (rx_name, tx_name, records), (d, _, _, r) in zip(jobs, expect, replay_all(jobs)):
        rx, tx = d[rx_name], d[tx_name]
        check(rx["received"] == records and rx["forwarded"] == records,
              "%s: all %d packets forwarded: %s" % (label, records, rx), r)
        check(tx["tx"]["packets"] == records, "%s: %d sent on %s: %s" % (label, records, tx_name, tx["tx"]), r)


def test_scenarios_openflow():
    openflow_scenarios()


def test_scenario_vxlan_push_and_decap():
    work = tmpdir()
    shared = shared_root(work)
    push_dir = os.path.join(shared, "bench", "scenarios", tnl_bench.PUSH_SCENARIO)
    jobs, expect = [], []
    for n in (1, 10000):
        push_conf = rs.read_conf(os.path.join(push_dir, "scenario.conf"))
        pop_dir = tnl_bench.decap_scenario(rs, push_dir, os.path.join(work, "gen%d" % n, "x", tnl_bench.POP_SCENARIO),
                                           [n])
        pop_conf = rs.read_conf(os.path.join(pop_dir, "scenario.conf"))
        for label, d, conf, extra in (("vxlan-push", push_dir, push_conf, ""),
                                      ("vxlan-push recirc", push_dir, push_conf, "set tunnel-combine false\n"),
                                      ("vxlan-pop", pop_dir, pop_conf, "")):
            label += " %d flows" % n
            pcap = gen(shared, work, capped(tnl_bench.traffic_args(shlex.split(conf["TRAFFIC"]), n)))
            text, specs = tnl_bench.keel_config(d, conf, pcap, extra)
            w = os.path.join(work, label.replace(" ", "-"))
            os.makedirs(w)
            jobs.append((label, text, [sim_spec(*s.split("=", 1), w) for s in specs], w))
            expect.append((conf["RX_IFACE"], conf["TX_IFACES"].split()[0], rs.pcap_records(pcap)))
    for (label, _, _, _), (rx_name, tx_name, records), (dd, _, _, r) in zip(jobs, expect, replay_all(jobs)):
        rx, tx = dd[rx_name], dd[tx_name]
        check(rx["forwarded"] == records, "%s: all %d packets forwarded: %s" % (label, records, rx), r)
        check(tx["tx"]["packets"] == records, "%s: %d sent out: %s" % (label, records, tx["tx"]), r)


def test_scenario_bond():
    work = tmpdir()
    shared = shared_root(work)
    d = os.path.join(shared, "bench", "scenarios", bond_bench.BOND_SCENARIO)
    conf = rs.read_conf(os.path.join(d, "scenario.conf"))
    lacp = {name: gen(shared, work, shlex.split(conf["AUX_PCAP_" + name])) for name in conf["AUX_PCAPS"].split()}
    jobs, expect = [], []
    for v in conf["VARIANTS"].split():
        mode = v.split("-")[0]
        traffic = shlex.split(conf.get("VARIANT_%s_TRAFFIC" % v.replace("-", "_"), conf["TRAFFIC"]))
        pcap = gen(shared, work, capped(traffic))
        text, members = bond_bench.keel_config(d, conf, mode, lacp)
        text += "add-port %s %s\n" % (conf["RX_BRIDGE"], conf["RX_IFACE"])  # as bond_bench adds it
        w = os.path.join(work, v)
        os.makedirs(w)
        specs = [sim_spec(conf["RX_IFACE"], "dpdk:net_pcap0,rx_pcap=%s" % pcap, w)] + \
                [sim_spec(m, spec, w) for m, spec in members.items()]
        jobs.append(("bond-balance-tcp/" + v, text, specs, w))
        expect.append((rs.pcap_records(pcap), list(members)))
    for (label, _, _, _), (records, members), (dd, _, _, r) in zip(jobs, expect, replay_all(jobs)):
        check(dd[conf["RX_IFACE"]]["received"] == records, "%s: the input read whole" % label, r)
        for m in members:
            check(dd[m]["received"] == 1 and dd[m]["slow_path"] == 1,
                  "%s: member %s's partner LACPDU went to the slow path: %s" % (label, m, dd[m]), r)


# --- what no scenario reaches ---------------------------------------------------

def frames(n, start=0, size=100, dst_mac="020000000002"):
    out = []
    for i in range(start, start + n):
        f = udp_frame(i, size)
        out.append(bytes.fromhex(dst_mac) + f[6:])
    return out


def case(label, config, inputs, outputs=(), extra=""):
    """Runs `config` with pcap inputs {port: frames} and outputs [port];
    returns (drops by port, show ports by port, show drops, the run)."""
    w = tmpdir()
    specs = []
    for name, fr in inputs.items():
        path = os.path.join(w, name + ".in.pcap")
        write_pcap(path, fr)
        specs.append("%s=pcap:in=%s,out=%s" % (name, path, os.path.join(w, name + ".out.pcap")))
    for name in outputs:
        specs.append("%s=pcap:out=%s" % (name, os.path.join(w, name + ".out.pcap")))
    return replay(label, config, specs, w, extra)


def test_runts_rules_and_no_bridge():
    runts = [b"\x02" * 10, b"\x02" * 13]
    d, _, js, r = case("runts/rules", "add-br br0\nadd-port br0 p0\nadd-port br0 p1\n"
                       "add-flow br0 priority=10,udp,tp_src=1000,actions=drop\n"
                       "add-flow br0 priority=5,udp,tp_src=1001,actions=output:2\n",
                       {"p0": runts + frames(14), "p2": frames(3)}, ["p1"])
    p0 = d["p0"]
    # udp_frame(i): source port 1000 + i % 7: 2 of 14 go to the drop rule,
    # 2 to p1, the other 10 match nothing (a table miss drops).
    check(p0["reasons"]["runt"] == 2, "two runts: %s" % p0, r)
    check(p0["reasons"]["drop_action"] == 12 and p0["forwarded"] == 2, "12 dropped by the rules, 2 out: %s" % p0, r)
    check(d["p2"]["reasons"]["no_bridge"] == 3, "p2 is in no bridge: %s" % d["p2"], r)


def test_resubmit_limits():
    # A rule that resubmits to its own table forever: recursion too deep
    # (64 levels). 13 tables each resubmitting twice to the next: 2^14 - 2
    # resubmits, 13 deep: too many resubmits (4096).
    cfg = "add-br br0\nadd-port br0 p0\nadd-port br0 p1\n"
    cfg += "add-flow br0 table=0,priority=1,udp,tp_src=1000,actions=resubmit(,0)\n"
    cfg += "add-flow br0 table=0,priority=1,udp,tp_src=1001,actions=resubmit(,1)\n"
    for t in range(1, 14):
        cfg += "add-flow br0 table=%d,actions=resubmit(,%d),resubmit(,%d)\n" % (t, t + 1, t + 1)
    d, _, _, r = case("resubmit", cfg, {"p0": frames(2)}, ["p1"])
    reasons = d["p0"]["reasons"]
    check(reasons["recursion_too_deep"] == 1 and reasons["too_many_resubmit"] == 1,
          "one packet each: %s" % {k: v for k, v in reasons.items() if v}, r)


def test_flood_counts_each_received_packet_once():
    # NORMAL floods an unknown destination to p1 and p2 (two copies on the
    # wire), and p2's link is down: p2's tx drops them (tx: link down), the
    # received packets are forwarded once each.
    d, ports, js, r = case("flood", "add-br br0\nadd-port br0 p0\nadd-port br0 p1\nadd-port br0 p2\n"
                           "add-flow br0 actions=NORMAL\nport-link p2 down\n",
                           {"p0": frames(20, dst_mac="02000000ffff")}, ["p1", "p2"])
    check(d["p0"]["forwarded"] == 20 and d["p0"]["dropped"] == 0, "20 forwarded once each: %s" % d["p0"], r)
    check(d["p1"]["tx"]["packets"] == 20, "p1 sent 20: %s" % d["p1"]["tx"], r)
    check(d["p2"]["tx"]["packets"] == 0 and d["p2"]["tx"]["link_down"] == 20,
          "p2 dropped 20 with its link down: %s" % d["p2"]["tx"], r)


def test_tx_queue_full():
    # A ring port nobody drains takes 16 frames; the rest of the 40 the
    # rule forwards there are the port's tx drops (queue full). The
    # received packets were forwarded: the drops are the port's, on its tx
    # side. (The ring port also makes the run live.)
    w = tmpdir()
    path = os.path.join(w, "in.pcap")
    write_pcap(path, frames(40))
    d, _, _, r = replay("tx queue full", "add-br br0\nadd-port br0 p0\nadd-port br0 p1\n"
                        "add-flow br0 in_port=1,actions=output:2\n",
                        ["p0=pcap:in=%s" % path, "p1=ring:size=16"], w)
    check(d["p0"]["forwarded"] == 40, "40 forwarded: %s" % d["p0"], r)
    tx = d["p1"]["tx"]
    check(tx["packets"] == 16 and tx["queue_full"] == 24 and tx["dropped"] == 24,
          "the ring took 16, the rest dropped as queue full: %s" % tx, r)


def test_controller_is_the_slow_path():
    d, _, js, r = case("controller", "add-br br0\nadd-port br0 p0\nadd-port br0 p1\n"
                       "add-flow br0 udp,tp_src=1000,actions=controller\n"
                       "add-flow br0 udp,tp_src=1001,actions=controller,output:2\n",
                       {"p0": frames(14)}, ["p1"])
    p0 = d["p0"]
    check(p0["slow_path"] == 2 and p0["forwarded"] == 2 and p0["reasons"]["drop_action"] == 10,
          "controller only: slow path; controller and an output: forwarded; the rest: %s" % p0, r)
    # The controller queue holds 1024 packet-ins (nobody reads them here):
    # the rest are dropped (Open vSwitch's packet_in_overflow). Offline, the
    # answers to the first misses (up together before the flow is
    # installed) each need one more upcall record for their userspace()
    # packet, and the ones that find none are lost (userspace_lost: the
    # offline reserve is 64); the later packets hit the flow and wait for
    # records. So of 1500, more than 1024 reach the queue.
    n = 1500
    d, _, js, r = case("controller queue", "add-br br0\nadd-port br0 p0\nadd-flow br0 actions=controller\n",
                       {"p0": frames(n)}, extra="coverage-show\n")
    p0 = d["p0"]
    delivered = p0["slow_path"] + p0["reasons"]["controller_queue_full"]
    check(delivered > 1024 and p0["slow_path"] == 1024 and delivered + p0["reasons"]["userspace_lost"] == n,
          "1024 packet-ins queued, %d dropped at the full queue, %d lost before: %s"
          % (delivered - 1024, n - delivered, {k: v for k, v in p0["reasons"].items() if v}), r)
    cqf = p0["reasons"]["controller_queue_full"]
    check(any(l.startswith("packet_in_overflow ") and l.endswith("total: %d" % cqf) for l in r.stdout.splitlines()),
          "coverage-show: packet_in_overflow", r)


# --- tunnels: MTU, decap errors, no tunnel port ---------------------------------

UNDERLAY = ("add-br br-phy\nset bridge br-phy other_config:hwaddr=02:00:00:00:01:01\nadd-port br-phy up\n"
            "ip-add br-phy 172.31.1.1/24\nadd-flow br-phy in_port=LOCAL,actions=output:1\n"
            "add-flow br-phy in_port=1,actions=LOCAL\n"
            "add-br br-int\nadd-port br-int vm0\n"
            "add-port br-int t1 -- set Interface t1 type=vxlan options:remote_ip=172.31.1.2 "
            "options:local_ip=172.31.1.1 options:key=100\n"
            "neigh-set br-phy 172.31.1.2 02:00:00:00:01:02\n")


def checksum16(data):
    s = 0
    for i in range(0, len(data) - 1, 2):
        s += (data[i] << 8) | data[i + 1]
    if len(data) % 2:
        s += data[-1] << 8
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def vxlan(inner, vni=100, flags=0x08, udp_csum=0, vx_len=8):
    """inner in VXLAN to 172.31.1.1:4789 from 172.31.1.2, as the uplink
    receives it; vx_len < 8: the VXLAN header cut short (lengths agree)."""
    vx = struct.pack("!BBHI", flags, 0, 0, vni << 8)[:vx_len]
    udp = struct.pack("!HHHH", 54321, 4789, 8 + len(vx) + len(inner), udp_csum)
    total = 20 + len(udp) + len(vx) + len(inner)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 17, 0,
                     bytes([172, 31, 1, 2]), bytes([172, 31, 1, 1]))
    ip = ip[:10] + struct.pack("!H", checksum16(ip)) + ip[12:]
    return bytes.fromhex("020000000101" "020000000102" "0800") + ip + udp + vx + inner


def test_tunnel_drops():
    inner = frames(1)[0]
    ups = [vxlan(inner),                      # decapsulated, to vm0
           vxlan(inner, flags=0x0c),          # bad VXLAN flags
           vxlan(b"", vx_len=4),              # truncated: the VXLAN header cut short
           vxlan(inner, udp_csum=0x1234),     # wrong UDP checksum
           vxlan(inner, vni=200)]             # no tunnel port has VNI 200
    cfg = UNDERLAY + "add-flow br-int in_port=t1,actions=output:vm0\n" \
                     "add-flow br-int in_port=vm0,actions=output:t1\nset interface up mtu_request=100\n"
    d, _, js, r = case("tunnels", cfg, {"up": ups, "vm0": frames(3, size=100)})
    up, vm0 = d["up"], d["vm0"]
    reasons = {k: v for k, v in up["reasons"].items() if v}
    check(up["forwarded"] == 1 and reasons == {"tnl_pop_bad_vxlan_flags": 1, "tnl_pop_truncated": 1,
                                                "tnl_pop_bad_udp_csum": 1, "tnl_no_port": 1},
          "one decapsulated, one per reason: %s" % up, r)
    check(vm0["tx"]["packets"] == 1, "vm0 sent the decapsulated one: %s" % vm0["tx"], r)
    # vm0's frames, encapsulated, are over the uplink's MTU of 100: the
    # packets were forwarded, the port dropped them (tx: over the MTU).
    check(vm0["forwarded"] == 3 and up["tx"]["mtu_exceeded"] == 3, "3 over the uplink's MTU: %s / %s" % (vm0, up["tx"]), r)


def test_live_miss_storm():
    # Live (a ring port makes the run live: the PMD never waits for the
    # slow path): 3000 new flows with megaflows off, read as fast as the
    # PMD polls. What the upcall records and per-burst budget can't take is
    # lost; however many that is this time, every packet is accounted for,
    # and the lost ones are pmd-stats-show's "miss with failed upcall".
    w = tmpdir()
    path = os.path.join(w, "storm.pcap")
    write_pcap(path, [udp_frame(i, 64) for i in range(3000)])
    d, ports, js, r = replay("live storm", "add-br br0\nadd-port br0 p0\nadd-port br0 p1\n"
                             "add-flow br0 in_port=1,actions=output:2\nset megaflows-enable false\n",
                             ["p0=pcap:in=%s" % path, "p1=pcap:out=%s" % os.path.join(w, "out.pcap"), "p2=ring"], w,
                             extra="pmd-stats-show --format json\nupcall-show --format json\n")
    stats = json_lines(r.stdout)
    check(not stats[-1]["offline"], "a live run", r)
    p0 = d["p0"]
    check(p0["received"] == 3000, "every frame read: %s" % p0, r)
    lost = sum(p["lost"] for p in stats[3]["pmds"])
    check(p0["reasons"]["upcall_lost"] == lost and p0["forwarded"] == 3000 - lost and p0["dropped"] == lost,
          "forwarded or lost (%d lost): %s" % (lost, p0), r)
    check(d["p1"]["tx"]["packets"] == 3000 - lost, "p1 sent the forwarded ones", r)


def test_coverage_names():
    d, _, js, r = case("coverage", "add-br br0\nadd-port br0 p0\nadd-port br0 p1\n", {"p0": [b"\x02" * 10]}, ["p1"],
                       extra="coverage-show\n")
    out = r.stdout
    check("Event coverage, avg rate over last: 5 seconds, last minute, last hour,  hash=" in out, "the header", r)
    check(any(l.startswith("datapath_drop_rx_invalid_packet ") and l.endswith("total: 1") for l in out.splitlines()),
          "the runt under Open vSwitch's name", r)
    check(any(l.endswith(" events never hit") for l in out.splitlines()), "the never-hit line", r)


if __name__ == "__main__":
    main([test_scenarios_openflow, test_scenario_vxlan_push_and_decap, test_scenario_bond, test_runts_rules_and_no_bridge,
          test_resubmit_limits, test_flood_counts_each_received_packet_once, test_tx_queue_full,
          test_controller_is_the_slow_path,
          test_tunnel_drops, test_live_miss_storm, test_coverage_names])

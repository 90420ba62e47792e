"""Offline runs (keel --exit-when-drained with every input a finite pcap
replay): keel is a what-if tool, not a NIC. Nothing is lost when the slow
path can't keep up (the inputs wait: backpressure), the inputs are read
merged by record timestamp, and every output port gets its packets in the
order their inputs arrived — what Open vSwitch gives processing the packets
one at a time with `revalidator/purge` between them:

* two inputs with interleaved timestamps, thousands of new 5-tuples, one
  output, megaflows on and off: run twice, byte-identical, in timestamp
  order, lost 0, `upcall-show --keel` saying "offline: backpressure";
* a flow-setup-sized pass (60k new 5-tuples, more than the upcall records
  and the flow limit can hold at once): every packet out, in order;
* recirculated packets keep their place among the others;
* NORMAL with a host moving between ports mid-run: every port's output
  equals per-packet translation (a small model of NORMAL here, and Open
  vSwitch 3.1 itself when it is installed: ovs_reference.py);
* a live input (sample port) keeps live mode: "live: drop and count"."""
import os
import struct

import ovs_reference
from harness import check, csum, json_lines, main, read_pcap, run_keel, tmpdir, write_pcap_ts

OVS_SKIP = os.environ.get("KEEL_NO_OVS", "") not in ("", "0")


def mac(n):
    return bytes([2, 0, 0, 0, 0, n])


def udp(i, src=1, dst=2, size=64):
    """Ethernet/IPv4/UDP from MAC `src` to MAC `dst`; i picks a distinct
    5-tuple and is written in the payload."""
    sip = bytes([10, 1, (i >> 16) & 0xff, (i >> 8) & 0xff])
    dip = bytes([10, 2, 0, i & 0xff])
    sport, dport = 1024 + (i % 60000), 4000
    payload = struct.pack("!I", i) + bytes(max(0, size - 14 - 20 - 8 - 4))
    ulen = 8 + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, i & 0xffff, 0, 64, 17, 0, sip, dip)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    u = struct.pack("!HHHH", sport, dport, ulen, 0) + payload
    uc = csum(sip + dip + struct.pack("!BBH", 0, 17, ulen) + u) or 0xffff
    u = u[:6] + struct.pack("!H", uc) + u[8:]
    return mac(dst) + mac(src) + b"\x08\x00" + ip + u


def offline_run(setup, inputs, outs, script="upcall-show --format json\nupcall-show --keel\n", extra=()):
    """inputs: {port: [(ts_us, frame)]}; outs: ports recorded. Ports p1..pN
    in name order. Returns (proc, {port: frames})."""
    d = tmpdir()
    names = sorted(set(inputs) | set(outs))
    args, files = [], {}
    for p in names:
        parts = []
        if p in inputs:
            path = os.path.join(d, p + ".in.pcap")
            write_pcap_ts(path, inputs[p])
            parts.append("in=" + path)
        if p in outs:
            files[p] = os.path.join(d, p + ".out.pcap")
            parts.append("out=" + files[p])
        args += ["--port", "%s=pcap:%s" % (p, ",".join(parts))]
    for e in extra:
        args += ["--port", e]
    cfg = os.path.join(d, "keel.conf")
    with open(cfg, "w") as f:
        f.write(setup)
    proc = run_keel("--config", cfg, *args, "--exit-when-drained", stdin=script)
    check(proc.returncode == 0, "keel exits 0", proc)
    return proc, {p: read_pcap(path) for p, path in files.items()}


def upcall_json(proc):
    return [j for j in json_lines(proc.stdout) if "upcalls" in j][0]


def check_offline_counters(proc, n_inputs):
    up = upcall_json(proc)
    check(up["offline"] is True, "offline mode", proc)
    check(up["lost"] == 0, "lost 0", proc)
    modes = {p["name"]: p["mode"] for p in up["ports"]}
    check(sum(m == "backpressure" for m in modes.values()) == n_inputs, "input ports in backpressure mode", proc)
    check("offline: backpressure" in proc.stdout, "upcall-show says offline: backpressure", proc)
    return up


# --- interleaved inputs, many new flows ------------------------------------------

def interleaved(n):
    """Packet i on p1 (even i) or p2 (odd i), stamped i * 3 us, with ties:
    every tenth odd packet takes the stamp of the even one before it (port
    order breaks the tie: p1 first)."""
    ins = {"p1": [], "p2": []}
    order = []
    for i in range(n):
        ts = i * 3
        if i % 2 and i % 20 == 1:
            ts = (i - 1) * 3
        f = udp(i, src=1 + i % 2, dst=9)
        ins["p1" if i % 2 == 0 else "p2"].append((ts, f))
        order.append(f)
    return ins, order


SETUP2 = ("add-br br0\nadd-port br0 p1\nadd-port br0 p2\nadd-port br0 p3\n"
          "add-flow br0 in_port=1,actions=output:3\nadd-flow br0 in_port=2,actions=output:3\n")


def test_interleaved_inputs_twice_identical_in_timestamp_order():
    ins, order = interleaved(20000)
    for megaflows in ("true", "false"):
        setup = SETUP2 + ("set megaflows-enable false\n" if megaflows == "false" else "")
        p1, out1 = offline_run(setup, ins, ["p3"])
        p2, out2 = offline_run(setup, ins, ["p3"])
        check_offline_counters(p1, 2)
        check(len(out1["p3"]) == len(order), "megaflows %s: every packet out (%d of %d)" %
              (megaflows, len(out1["p3"]), len(order)), p1)
        check(out1["p3"] == order, "megaflows %s: output in timestamp order" % megaflows, p1)
        check(out1 == out2, "megaflows %s: two runs byte-identical" % megaflows, p2)


def test_flow_setup_sized_run_loses_nothing():
    # The flow-setup scenario's shape (one pass of new UDP 5-tuples), cut to
    # a test size; flow limit 20000 so most packets are forwarded without an
    # install, as in the 1M-packet run.
    n = 60000
    frames = [udp(i, size=64) for i in range(n)]
    for megaflows in ("false", "true"):
        setup = ("add-br br0\nadd-port br0 p1\nadd-port br0 p2\nadd-flow br0 in_port=1,actions=output:2\n"
                 "set flow-limit 20000\n" + ("set megaflows-enable false\n" if megaflows == "false" else ""))
        proc, out = offline_run(setup, {"p1": [(i, f) for i, f in enumerate(frames)]}, ["p2"])
        up = check_offline_counters(proc, 1)
        check(len(out["p2"]) == n, "megaflows %s: %d of %d out" % (megaflows, len(out["p2"]), n), proc)
        check(out["p2"] == frames, "megaflows %s: in order" % megaflows, proc)
        if megaflows == "false":
            check(up["upcalls"] == n, "one upcall per new 5-tuple", proc)


# --- NORMAL, a host moving ----------------------------------------------------------

A, B, C = 0x0a, 0x0b, 0x0c
PORTS3 = ["p1", "p2", "p3"]


def host_move_packets(bulk=0):
    """(port, frame) in input order: A on p1, B on p2, C on p3 talk; then A
    moves to p3, later back to p1; B's packets to A follow it. With `bulk`,
    B sends that many new 5-tuples to A before and after A's first move:
    bursts of them miss while B->A's megaflow is up (how many depends on how
    fast the handler answers, so whether the upcall records run out and the
    inputs wait is not asserted), and the packets after the move hit it —
    stale, unless the move's translation revalidated it."""
    seq = [("p1", A, B), ("p2", B, A), ("p3", C, A)]
    seq += [("p2", B, A), ("p3", C, B)] * 4
    seq += [("p2", B, A)] * bulk
    seq += [("p3", A, B)]                      # A moves to p3
    seq += [("p2", B, A)] * bulk
    seq += [("p2", B, A), ("p1", C, A)] * 3    # C moves to p1 too
    seq += [("p1", A, C)]                      # A back to p1 (C is there: dropped)
    seq += [("p2", B, A), ("p3", B, C)] * 3    # B moves to p3
    seq += [("p2", C, B)] * 2
    return [(port, udp(i, src=s, dst=d)) for i, (port, s, d) in enumerate(seq)]


def normal_model(packets, ports):
    """Per-packet NORMAL: learn the source, forward to the learned port of
    the destination (drop if it is the input port), else flood."""
    table, out = {}, {p: [] for p in ports}
    for port, f in packets:
        table[f[6:12]] = port
        dst = table.get(f[0:6])
        if dst is None:
            for p in ports:
                if p != port:
                    out[p].append(f)
        elif dst != port:
            out[dst].append(f)
    return out


def normal_run(packets):
    ins = {p: [] for p in PORTS3}
    for k, (port, f) in enumerate(packets):
        ins[port].append((k * 10, f))
    setup = "add-br br0\n" + "".join("add-port br0 %s\n" % p for p in PORTS3) + "add-flow br0 actions=NORMAL\n"
    return offline_run(setup, ins, PORTS3)


def test_normal_host_move_equals_per_packet_translation():
    packets = host_move_packets(bulk=600)
    proc, out = normal_run(packets)
    proc2, out2 = normal_run(packets)
    up = check_offline_counters(proc, 3)
    check(up["offline_revalidations"] >= 3, "the moves were revalidated before later packets", proc)
    check(out == out2, "two runs byte-identical", proc2)
    want = normal_model(packets, PORTS3)
    for p in PORTS3:
        check(out[p] == want[p], "%s: per-packet NORMAL (%d frames, want %d)" % (p, len(out[p]), len(want[p])), proc)
    # The same story without the bulk, through Open vSwitch itself.
    if ovs_reference.available() and not OVS_SKIP:
        packets = host_move_packets()
        ref = ovs_reference.run(PORTS3, ["actions=NORMAL"], packets)
        proc, out = normal_run(packets)
        check(ref == normal_model(packets, PORTS3), "the model is Open vSwitch's NORMAL", proc)
        for p in PORTS3:
            check(out[p] == ref[p], "%s: as Open vSwitch 3.1 with revalidator/purge between packets "
                  "(%d frames, OVS %d)" % (p, len(out[p]), len(ref[p])), proc)


def test_interleaved_inputs_as_open_vswitch():
    if not ovs_reference.available() or OVS_SKIP:
        return
    ins, order = interleaved(60)
    merged = sorted([(ts, k, port, f) for k, port in enumerate(("p1", "p2")) for ts, f in ins[port]],
                    key=lambda r: (r[0], r[1]))
    ref = ovs_reference.run(["p1", "p2", "p3"], ["in_port=1,actions=output:3", "in_port=2,actions=output:3"],
                            [(port, f) for _, _, port, f in merged])
    proc, out = offline_run(SETUP2, ins, ["p3"])
    check(out["p3"] == ref["p3"], "p3 as Open vSwitch 3.1 (%d frames, OVS %d)" % (len(out["p3"]), len(ref["p3"])),
          proc)


def test_recirculation_keeps_input_order():
    # Packets from MAC 1 take a second pass (recirc), those from MAC 2 go
    # straight out: a live PMD sends a burst's recirculated packets after
    # the others; offline each packet's passes finish before the next one.
    n = 400
    frames = [udp(i, src=1 + i % 2, dst=9) for i in range(n)]
    setup = ("dp-flow add recirc_id(0),in_port(1),eth(src=02:00:00:00:00:01) actions:recirc(0x5)\n"
             "dp-flow add recirc_id(0x5),in_port(1) actions:2\n"
             "dp-flow add recirc_id(0),in_port(1),eth(src=02:00:00:00:00:02) actions:2\n")
    proc, out = offline_run(setup, {"p1": [(i, f) for i, f in enumerate(frames)]}, ["p2"],
                            script="upcall-show --format json\npmd-stats-show --format json\n")
    pmd = [j for j in json_lines(proc.stdout) if "pmds" in j][0]["pmds"][0]
    check(pmd["recirculations"] == n // 2, "every other packet recirculated", proc)
    check(out["p2"] == frames, "recirculated packets keep their place (%d frames)" % len(out["p2"]), proc)


def test_live_input_keeps_live_mode():
    ins, _ = interleaved(10)
    proc, _ = offline_run(SETUP2, ins, ["p3"], extra=["p9=sample:pps=10"])
    up = upcall_json(proc)
    check(up["offline"] is False, "a live input: live mode", proc)
    check("live: drop and count" in proc.stdout, "upcall-show says live: drop and count", proc)


if __name__ == "__main__":
    main([test_interleaved_inputs_twice_identical_in_timestamp_order, test_flow_setup_sized_run_loses_nothing,
          test_normal_host_move_equals_per_packet_translation, test_interleaved_inputs_as_open_vswitch,
          test_recirculation_keeps_input_order, test_live_input_keeps_live_mode])

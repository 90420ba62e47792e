"""Jumbo frames: per-port MTU (`add-port ... mtu_request=N`, `set interface
P mtu_request=N`) on both backends.

What Open vSwitch 3.1 does, checked with ovs-vswitchd and dummy ports
(netdev-dummy/receive, then the ports' tx pcaps and ovs-ofctl dump-ports):
* a 9000-byte frame received on a port with mtu_request=9216 is forwarded
  out of another such port and not out of a 1500-byte one;
* the limit is on tx only and counts the L3 size: a dummy port sends frames
  up to MTU + 14 bytes, MTU + 18 when the outer EtherType is 802.1Q (a
  1515-byte untagged frame is dropped at MTU 1500, a 1518-byte tagged one
  goes); a 9000-byte frame received on a 1500-byte port is forwarded;
* netdev-dpdk allows MTU + 18 (its MTU_TO_FRAME_LEN) whatever the frame and
  counts the drop in tx_dropped (tx_mtu_exceeded_drops); keel counts sim
  drops the same way (netdev-dummy counts nothing);
* mtu_request=[] leaves the MTU as it is; a port deleted and added again
  starts at 1500.
"""
import os
import struct

from harness import PATIENCE, check, json_lines, main, ports_by_name, read_pcap, run_keel, tmpdir, udp_frame, write_pcap


def vlan_frame(i, size, vid=10):
    """An 802.1Q-tagged UDP frame of `size` bytes."""
    f = udp_frame(i, size - 4)
    return f[:12] + struct.pack("!HH", 0x8100, vid) + f[12:]


def qinq_frame(i, size):
    """An 802.1ad outer tag (0x88a8): no allowance on a dummy port."""
    f = udp_frame(i, size - 4)
    return f[:12] + struct.pack("!HH", 0x88a8, 10) + f[12:]


def jumbo(i):
    return udp_frame(i, 9000)


# p0 in, p1 (9216) and p2 (1500) out; every frame to both.
SETUP = ("add-br br0\n"
         "add-port br0 p0 mtu_request=9216\n"
         "add-port br0 p1 mtu_request=9216\n"
         "add-port br0 p2\n"
         "add-flow br0 in_port=1,actions=output:2,output:3\n")


def boot(ports, setup, script, inputs):
    d = tmpdir()
    args = []
    for name, spec in ports:
        if "{in}" in spec:
            path = os.path.join(d, name + ".in.pcap")
            write_pcap(path, inputs[name])
            spec = spec.replace("{in}", path)
        args += ["--port", name + "=" + spec.replace("{d}", d)]
    cfg = os.path.join(d, "keel.conf")
    with open(cfg, "w") as f:
        f.write(setup)
    p = run_keel("--config", cfg, *args, "--exit-when-drained", stdin=script, timeout=300)
    return p, d


def test_sim_pcap_jumbo_forwarded_on_9216_dropped_on_1500():
    frames = [udp_frame(0, 60), jumbo(1), udp_frame(2, 1514), udp_frame(3, 1515), vlan_frame(4, 1518),
              vlan_frame(5, 1519), qinq_frame(6, 1515), jumbo(7), udp_frame(8, 9230), udp_frame(9, 9231)]
    p, d = boot([("p0", "pcap:in={in}"), ("p1", "pcap:out={d}/p1.pcap"), ("p2", "pcap:out={d}/p2.pcap")],
                SETUP, "show ports --format json\nshow ports\n", {"p0": frames})
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    out1, out2 = read_pcap(os.path.join(d, "p1.pcap")), read_pcap(os.path.join(d, "p2.pcap"))
    # 9216: everything up to 9230 bytes (MTU + 14), byte for byte, in order.
    check(out1 == frames[:9], "p1 (mtu 9216) got %s" % [len(f) for f in out1], p)
    # 1500: 1514 untagged, 1518 802.1Q-tagged at most.
    want2 = [frames[0], frames[2], frames[4]]
    check(out2 == want2, "p2 (mtu 1500) got %s" % [len(f) for f in out2], p)
    ports = ports_by_name(json_lines(p.stdout)[0])
    check([ports[n]["mtu"] for n in ("p0", "p1", "p2")] == [9216, 9216, 1500], "show ports mtu", p)
    check(ports["p0"]["rx"]["packets"] == len(frames) and ports["p0"]["rx"]["dropped"] == 0,
          "p0 received every frame (the MTU does not limit rx)", p)
    check(ports["p1"]["tx"]["dropped"] == 1 and ports["p1"]["tx"]["mtu_exceeded_drops"] == 1, "p1 dropped 9231", p)
    check(ports["p2"]["tx"]["packets"] == 3, "p2 sent 3", p)
    check(ports["p2"]["tx"]["dropped"] == 7 and ports["p2"]["tx"]["mtu_exceeded_drops"] == 7,
          "p2 counts 7 frames over its MTU: %s" % ports["p2"]["tx"], p)
    row = [l.split() for l in p.stdout.splitlines() if l.startswith("p1 ")]
    check(row and row[0][5] == "9216", "text table MTU column: %r" % row, p)


def test_sim_rx_not_limited_by_mtu():
    """A 9000-byte frame received on a 1500-byte port goes out of a 9216 one."""
    setup = "add-br br0\nadd-port br0 p0\nadd-port br0 p1 mtu_request=9216\nadd-flow br0 in_port=1,actions=output:2\n"
    frames = [jumbo(1), udp_frame(2, 100)]
    p, d = boot([("p0", "pcap:in={in}"), ("p1", "pcap:out={d}/p1.pcap")], setup, "", {"p0": frames})
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    check(read_pcap(os.path.join(d, "p1.pcap")) == frames, "both frames forwarded", p)


def test_sim_normal_flood_copies_jumbo_frames():
    """NORMAL floods a 9000-byte broadcast to two 9216 ports (the first output is a copy)."""
    setup = ("add-br br0\nadd-port br0 p0 mtu_request=9216\nadd-port br0 p1 mtu_request=9216\n"
             "add-port br0 p2 mtu_request=9216\nadd-port br0 p3\nadd-flow br0 actions=NORMAL\n")
    f = bytearray(jumbo(1))
    f[0:6] = b"\xff" * 6
    frames = [bytes(f)]
    p, d = boot([("p0", "pcap:in={in}"), ("p1", "pcap:out={d}/p1.pcap"), ("p2", "pcap:out={d}/p2.pcap"),
                 ("p3", "pcap:out={d}/p3.pcap")], setup, "show ports --format json\n", {"p0": frames})
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    check(read_pcap(os.path.join(d, "p1.pcap")) == frames, "p1 got the frame", p)
    check(read_pcap(os.path.join(d, "p2.pcap")) == frames, "p2 got the frame", p)
    check(read_pcap(os.path.join(d, "p3.pcap")) == [], "p3 (1500) did not", p)
    ports = ports_by_name(json_lines(p.stdout)[0])
    check(ports["p3"]["tx"]["mtu_exceeded_drops"] == 1, "p3 counted it", p)


def test_dpdk_vdev_jumbo_forwarded_on_9216_dropped_on_1500():
    """The same through DPDK net_pcap vdevs: 9000-byte frames arrive as mbuf
    chains, are linearised into jumbo mbufs and leave through the 9216 port;
    the 1500 port drops them (netdev-dpdk's limit: MTU + 18, so an untagged
    1518 passes and 1519 does not)."""
    frames = [udp_frame(0, 60), jumbo(1), udp_frame(2, 1518), udp_frame(3, 1519), jumbo(4), udp_frame(5, 9234),
              udp_frame(6, 9235)]
    p, d = boot([("p0", "dpdk:net_pcap0,rx_pcap={in}"), ("p1", "dpdk:net_pcap1,tx_pcap={d}/p1.pcap"),
                 ("p2", "dpdk:net_pcap2,tx_pcap={d}/p2.pcap")],
                SETUP, "show ports --format json\n", {"p0": frames})
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    out1, out2 = read_pcap(os.path.join(d, "p1.pcap")), read_pcap(os.path.join(d, "p2.pcap"))
    check(out1 == frames[:6], "p1 (mtu 9216) got %s" % [len(f) for f in out1], p)
    check(out2 == [frames[0], frames[2]], "p2 (mtu 1500) got %s" % [len(f) for f in out2], p)
    ports = ports_by_name(json_lines(p.stdout)[0])
    check(ports["p0"]["kind"] == "dpdk" and ports["p0"]["rx"]["packets"] == len(frames), "p0 rx", p)
    check(ports["p0"]["rx"]["dropped"] == 0, "no rx drops", p)
    check([ports[n]["mtu"] for n in ("p0", "p1", "p2")] == [9216, 9216, 1500], "show ports mtu", p)
    check(ports["p1"]["tx"]["mtu_exceeded_drops"] == 1, "p1 dropped 9235", p)
    check(ports["p2"]["tx"]["dropped"] == 5 and ports["p2"]["tx"]["mtu_exceeded_drops"] == 5,
          "p2 counts 5 frames over its MTU: %s" % ports["p2"]["tx"], p)


def test_dpdk_from_sim_port_copies_into_jumbo_mbuf():
    """A sim pcap port's 9000-byte buffer sent through a DPDK port is copied into a jumbo mbuf."""
    setup = "add-br br0\nadd-port br0 p0\nadd-port br0 p1 mtu_request=9216\nadd-flow br0 in_port=1,actions=output:2\n"
    frames = [jumbo(1), udp_frame(2, 64), jumbo(3)]
    p, d = boot([("p0", "pcap:in={in}"), ("p1", "dpdk:net_pcap0,tx_pcap={d}/p1.pcap")], setup, "", {"p0": frames})
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    check(read_pcap(os.path.join(d, "p1.pcap")) == frames, "frames byte for byte", p)


PORTS = ["--port", "p0=null", "--port", "p1=null", "--port", "p2=null"]


def keel(script):
    d = tmpdir()
    empty = os.path.join(d, "empty.cfg")
    open(empty, "w").close()
    return run_keel(*PORTS, "--config", empty, stdin=script, timeout=PATIENCE)


def mtus(proc, k=-1):
    return {n: v["mtu"] for n, v in ports_by_name([j for j in json_lines(proc.stdout) if "ports" in j][k]).items()}


def test_bad_mtu_request_is_a_clear_error_and_changes_nothing():
    p = keel("add-br br0\n"
             "add-port br0 p1 mtu_request=67\n"
             "add-port br0 p1 mtu_request=9217\n"
             "add-port br0 p1 mtu_request=abc\n"
             "add-port br0 p1 mtu_request=\n"
             "add-port br0 p1 colour=blue\n"
             "add-port br0 p2 mtu_request=9000\n"
             "set interface p2 mtu_request=65536\n"
             "set interface p2 mtu_request=x\n"
             "set interface p0 mtu_request=9000\n"
             "show running-config\nshow ports --format json\n")
    for msg in ("mtu_request 67 is not in keel's range 68 to 9216 (inclusive)",
                "mtu_request 9217 is not in keel's range 68 to 9216 (inclusive)",
                '"abc" is not a valid integer or range',
                'mtu_request=: argument does not end in "=" followed by a value.',
                'neither Port nor Interface contains a column whose name matches "colour"',
                "mtu_request 65536 is not in keel's range 68 to 9216 (inclusive)",
                "mtu_request: 'x' is not a number (or [] for none)",
                "no interface p0 in any bridge"):
        check(msg in p.stdout + p.stderr, "error %r" % msg, p)
    check("add-port br0 p1" not in p.stdout, "p1 was not added", p)
    check(mtus(p) == {"p0": 1500, "p1": 1500, "p2": 9000}, "MTUs unchanged by the errors: %s" % mtus(p), p)


def test_running_config_round_trip_and_set_interface():
    d = tmpdir()
    script = ("add-br br0\nadd-port br0 p0 tag=10 mtu_request=9216\nadd-port br0 p1\nadd-port br0 p2\n"
              "set interface p1 mtu_request=2000\n"
              "set interface p2 mtu_request=9000\nset interface p2 mtu_request=[]\n"
              "show ports --format json\nshow running-config\n")
    p = keel(script)
    check(p.returncode == 0, "keel ran", p)
    check(mtus(p) == {"p0": 9216, "p1": 2000, "p2": 9000}, "MTUs: %s (mtu_request=[] keeps 9000, as OVS)" % mtus(p), p)
    lines = [l for l in p.stdout.splitlines() if l.startswith("add-port")]
    check(lines == ["add-port br0 p0 tag=10 -- set Interface p0 ofport_request=1 mtu_request=9216",
                    "add-port br0 p1 -- set Interface p1 ofport_request=2 mtu_request=2000",
                    "add-port br0 p2 -- set Interface p2 ofport_request=3"], "running-config: %s" % lines, p)
    # Boot from it: the same running config, the requested MTUs.
    cfg = os.path.join(d, "saved.cfg")
    with open(cfg, "w") as f:
        f.write("\n".join(l for l in p.stdout.splitlines() if not l.startswith("{")) + "\n")
    q = run_keel(*PORTS, "--config", cfg, stdin="show ports --format json\nshow running-config\n", timeout=PATIENCE)
    check(q.returncode == 0, "boot from the saved config", q)
    check(mtus(q) == {"p0": 9216, "p1": 2000, "p2": 1500}, "MTUs after the replay: %s" % mtus(q), q)
    check([l for l in q.stdout.splitlines() if l.startswith("add-port")] == lines, "same running-config", q)
    # del-port gives the default back; so does del-br.
    r = keel("add-br br0\nadd-port br0 p0 mtu_request=9216\nadd-port br0 p1 mtu_request=4000\n"
             "del-port br0 p0\nshow ports --format json\ndel-br br0\nshow ports --format json\n")
    check(mtus(r, 0)["p0"] == 1500 and mtus(r, 0)["p1"] == 4000, "del-port: %s" % mtus(r, 0), r)
    check(mtus(r, 1)["p1"] == 1500, "del-br: %s" % mtus(r, 1), r)


if __name__ == "__main__":
    main([v for k, v in sorted(globals().items()) if k.startswith("test_")])

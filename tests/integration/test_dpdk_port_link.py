"""`port-link` on DPDK ports: a driver with the operation takes the device
down and up (rte_eth_dev_set_link_down/up): net_tap's kernel interface
loses and regains IFF_UP (`ip link` says so) and `show ports` follows; a
driver without it (net_af_packet in DPDK 22.11) gives a clear error and
changes nothing."""
import json
import os
import subprocess
import tempfile

from harness import EMULATOR, ask_live, check, keel_cmd, main, ports_by_name, tmpdir, wait_for

CONFIG = """add-br br0
add-port br0 p0
add-port br0 p1
"""


def kernel_up(dev):
    out = subprocess.run(["ip", "-o", "link", "show", dev], capture_output=True, text=True).stdout
    flags = out.split("<", 1)[1].split(">", 1)[0].split(",") if "<" in out else []
    return "UP" in flags


def test_link_down_and_up():
    if EMULATOR:
        print("SKIP test_link_down_and_up: net_tap and net_af_packet need the host kernel")
        return
    tap, a, b = ("k%s%d" % (x, os.getpid() % 10000) for x in ("lt", "la", "lb"))
    if subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], capture_output=True).returncode:
        print("SKIP test_link_down_and_up: cannot create a veth pair")
        return
    err = tempfile.TemporaryFile(mode="w+")
    proc = None
    try:
        for dev in (a, b):
            subprocess.run(["ip", "link", "set", dev, "up"], check=True)
        d = tmpdir()
        cfg = os.path.join(d, "k.conf")
        with open(cfg, "w") as f:
            f.write(CONFIG)
        proc = subprocess.Popen(keel_cmd("--config", cfg, "--port", "p0=dpdk:net_tap0,iface=%s" % tap,
                                         "--port", "p1=dpdk:net_af_packet0,iface=%s" % a),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        ports = lambda: ports_by_name(json.loads(ask_live(proc, err, "show ports --format json")))
        wait_for(lambda: ports()["p0"]["link"]["up"], "p0 (net_tap) up at start")
        check(kernel_up(tap), "%s up at start" % tap)

        ask_live(proc, err, "port-link p0 down")
        check(not kernel_up(tap), "port-link p0 down: %s is down in the kernel" % tap)
        wait_for(lambda: not ports()["p0"]["link"]["up"], "show ports to say p0 is down")
        ask_live(proc, err, "port-link p0 up")
        check(kernel_up(tap), "port-link p0 up: %s is up again" % tap)
        wait_for(lambda: ports()["p0"]["link"]["up"], "show ports to say p0 is up")

        ask_live(proc, err, "port-link p1 down")
        err.seek(0)
        msg = err.read()
        check("port p1: link down: driver net_af_packet cannot set its link down" in msg,
              "net_af_packet: clear error: %r" % msg)
        check(kernel_up(a) and ports()["p1"]["link"]["up"], "p1 unchanged")
    finally:
        if proc is not None and proc.poll() is None:
            proc.stdin.write("exit\n")
            proc.stdin.flush()
            proc.wait(timeout=60)
        subprocess.run(["ip", "link", "del", a], capture_output=True)


if __name__ == "__main__":
    main([test_link_down_and_up])

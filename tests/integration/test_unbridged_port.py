"""A port in no bridge: its packets are dropped, counted, and do not all go
up to the slow path. The first packet's upcall installs a drop flow on the
port's in_port (no actions), so the rest are dropped by the datapath; the
revalidator pushes that flow's packets into upcall-show's no_bridge_drops.
Once the port joins a bridge the drop flow goes (re-translated every
round) and its packets are forwarded."""
import json
import os
import subprocess

from harness import (EMPTY_CONFIG, PATIENCE, check, json_lines, keel_cmd, main, run_keel, tmpdir, udp_frame,
                     wait_for, write_pcap_ts)


def run(frames, script):
    d = tmpdir()
    inp = os.path.join(d, "in.pcap")
    write_pcap_ts(inp, [(i, f) for i, f in enumerate(frames)])
    cfg = os.path.join(d, "k.conf")
    with open(cfg, "w") as f:  # p1 (the input) is in no bridge
        f.write("add-br br0\nadd-port br0 p2 ofport_request=2\nadd-flow br0 actions=NORMAL\n")
    out = os.path.join(d, "o2.pcap")
    p = run_keel("--config", cfg, "--config-dir", d, "--port", "p1=pcap:in=" + inp, "--port", "p2=pcap:out=" + out,
                 "--exit-when-drained", stdin=script, timeout=PATIENCE)
    check(p.returncode == 0, "offline run", p)
    return p


class Keel:
    """A live keel fed commands one at a time (JSON answers read back)."""

    def __init__(self, *args):
        self.proc = subprocess.Popen(keel_cmd(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def json(self, cmd):
        self.proc.stdin.write(cmd + " --format json\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            check(line, "keel answered %r" % cmd)
            if line.startswith("{"):
                return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        check(self.proc.wait(timeout=PATIENCE) == 0, "keel exits cleanly")


def test_live_unbridged_port_upcalls_bounded():
    # host-sim's sample traffic on p1, which is in no bridge (before the fix:
    # every packet an upcall, ~1000 a second).
    d = tmpdir()
    k = Keel("--config", EMPTY_CONFIG, "--config-dir", d, "--port", "p1=sample:pps=2000", "--port", "p2=null")
    try:
        up = {}

        def dropped(n):
            def enough():
                up.update(k.json("upcall-show --keel"))
                return up["no_bridge_drops"] >= n
            return enough

        # Until the drop flow is installed, packets miss (how many depends on
        # how fast this machine answers: no bound on that here). Once it is,
        # the port's packets stop reaching the slow path: after 1000 more
        # drops to settle (misses already queued), 2000 more add no upcall.
        wait_for(lambda: any(f["in_port"] == 1 and f["actions"] == "drop" for f in k.json("flow-dump")["flows"]),
                 "a drop flow for the unbridged port")
        wait_for(dropped(k.json("upcall-show --keel")["no_bridge_drops"] + 1000), "1000 more drops")
        settled = dict(up)
        wait_for(dropped(settled["no_bridge_drops"] + 2000), "2000 more drops")
        check(up["upcalls"] == settled["upcalls"],
              "upcalls bounded while packets keep arriving (%d upcalls, then %d after %d more drops)" %
              (settled["upcalls"], up["upcalls"], up["no_bridge_drops"] - settled["no_bridge_drops"]))
        flows = [f for f in k.json("flow-dump")["flows"] if f["in_port"] == 1]
        check(len(flows) == 1 and flows[0]["actions"] == "drop", "one drop flow on in_port 1: %r" % flows)
        # Joining a bridge ends the drops: the drop flow goes within a round.
        for cmd in ("add-br br0", "add-port br0 p1", "add-port br0 p2", "add-flow br0 actions=output:p2"):
            k.proc.stdin.write(cmd + "\n")
        k.proc.stdin.flush()
        wait_for(lambda: all(f["actions"] != "drop" for f in k.json("flow-dump")["flows"]),
                 "the drop flow replaced once p1 is in br0")
        stopped = k.json("upcall-show --keel")["no_bridge_drops"]
        check(k.json("upcall-show --keel")["no_bridge_drops"] == stopped, "no more drops once bridged")
    finally:
        k.close()


def test_drops_cached_and_counted():
    # Offline, 1000 packets of 50 different flows: one drop flow covers them
    # all (they all miss before it is installed: an offline run answers in
    # order), each packet counted once.
    frames = [udp_frame(i % 50, 60 + i % 7) for i in range(1000)]
    p = run(frames, "upcall-show --keel --format json\nflow-dump --format json\n")
    up, dump = json_lines(p.stdout)[-2:]
    check(up["installs"] == 1, "a flow installed for the unbridged port", p)
    check(up["no_bridge_drops"] == 1000, "every packet counted as a drop (%d)" % up["no_bridge_drops"], p)
    drops = [f for f in dump["flows"] if f["in_port"] == 1]
    check(len(drops) == 1 and drops[0]["actions"] == "drop", "one drop flow on in_port 1: %r" % drops, p)
    check(drops[0]["match"].startswith("recirc_id(0),in_port(1),") and "ipv4" not in drops[0]["match"],
          "it matches the port only: %r" % drops[0]["match"], p)


if __name__ == "__main__":
    main([test_drops_cached_and_counted, test_live_unbridged_port_upcalls_bounded])

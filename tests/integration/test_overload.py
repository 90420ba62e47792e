#!/usr/bin/env python3
"""Overload (issue 19 part 3), the invariants only: a miss storm on a live
port -- p2 replays N_STORM distinct 5-tuples over and over at the full
rate, megaflows off, a flow limit far below N_STORM, so the storm never
settles -- while p0's established flows go on to p1.

Checked (never a rate or a time: the figures are tests/bench/overload_bench.py's):
* the established flows are still forwarded during the storm;
* the storm's excess is refused and counted: flow-limit hits (upcall-show,
  show drops' slow_path), its lost upcalls under p2's `upcall_lost`;
* the console answers during the storm, on stdin and over the control
  socket (`keel --exec`), within PATIENCE;
* once the inputs stop, show drops' per-port equation holds (received =
  forwarded + slow path + dropped + in flight, the reasons sum to dropped),
  every established packet came out on p1 or is a p0 drop with a reason,
  and every packet of the run is accounted for."""
import os
import subprocess

from harness import PATIENCE, check, keel_cmd, main, tmpdir, udp_frame, wait_for, write_pcap
from test_faults import Live, grows

N_STORM = 4000
LIMIT = 500


def test_miss_storm():
    d = tmpdir()
    write_pcap(os.path.join(d, "storm.pcap"), [udp_frame(i, 60) for i in range(N_STORM)])
    k = Live(["set megaflows-enable false", "set flow-limit %d" % LIMIT, "add-br br0", "add-port br0 p0",
              "add-port br0 p1", "add-port br0 p2", "add-port br0 p3", "add-flow br0 in_port=p0,actions=output:p1",
              "add-flow br0 in_port=p2,actions=output:p3", "port-link p2 down"],
             ["p0=sample:pps=2000", "p1=null", "p2=pcap:in=%s,loop=0" % os.path.join(d, "storm.pcap"), "p3=null"],
             config_dir=d)
    try:
        grows(lambda: k.tx("p1"), 300, "p1's tx (p0's flows set up)")
        k.ok("port-link p2 up")
        wait_for(lambda: k.ports()["p2"]["rx"]["packets"] >= 3 * N_STORM, "the storm replayed three times")
        wait_for(lambda: k.upcall()["flow_limit_hits"] > 0, "the flow limit refusing the storm's flows")
        # Established flows keep going while the storm runs.
        grows(lambda: k.tx("p1"), 300, "p1's tx during the storm")
        # The console: stdin (above) and the control socket answer.
        p = subprocess.run(keel_cmd("--config-dir", d, "--exec", "show ports"), capture_output=True, text=True,
                           timeout=PATIENCE)
        check(p.returncode == 0 and "p2" in p.stdout, "keel --exec answers during the storm", p)
        u = k.upcall()
        # The adaptive limit may shrink below LIMIT on a slow round (and flows
        # wait for the next round's eviction), never grow above it; 64: an
        # upcall batch set up while the count is read.
        check(u["flows"] <= LIMIT + 64 and u["flow_limit"] <= LIMIT,
              "the storm's flows stay within the configured limit: %d flows, limit %d" % (u["flows"], u["flow_limit"]))
        drops = k.ask_json("show drops")
        check(drops["slow_path"]["flow_limit_hits"] > 0, "show drops counts the flow-limit refusals")
        k.settle(["p0", "p2"])
        drops = k.ask_json("show drops")
        ports = k.ports()
        lost = sum(m["lost"] for m in k.pmds())
        by = {p["name"]: p for p in drops["ports"]}
        for name, p in by.items():
            check(sum(p["reasons"].values()) == p["dropped"], "%s: the reasons sum to dropped: %s" % (name, p))
            check(p["received"] == p["forwarded"] + p["slow_path"] + p["dropped"] + p["in_flight"],
                  "%s: received = forwarded + slow path + dropped + in flight: %s" % (name, p))
            check(p["received"] == ports[name]["rx"]["packets"], "%s: received agrees with show ports" % name)
        check(by["p2"]["reasons"]["upcall_lost"] + by["p0"]["reasons"]["upcall_lost"] == lost,
              "the PMDs' lost upcalls (%d) are the ports' upcall_lost" % lost)
        p0 = by["p0"]
        check(ports["p1"]["tx"]["packets"] + ports["p1"]["tx"]["dropped"] == p0["forwarded"] + p0["slow_path"],
              "every established packet forwarded or slow-pathed came out on p1 (%d), the rest are p0 drops "
              "with a reason: %s" % (ports["p1"]["tx"]["packets"], p0))
        check(by["p2"]["received"] > N_STORM and
              ports["p3"]["tx"]["packets"] + by["p2"]["dropped"] == by["p2"]["received"],
              "the storm's packets: out on p3 or dropped with a reason: %s, p3 tx %d"
              % (by["p2"], ports["p3"]["tx"]["packets"]))
    finally:
        k.close()


if __name__ == "__main__":
    main([test_miss_storm])

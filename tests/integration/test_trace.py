"""`trace` (ofproto/trace) driven through the console: add-br, add-port,
add-flow with a /8 rule, then trace a flow and a hex packet; the Megaflow
line must un-wildcard only the 8 prefix bits of nw_dst, as Open vSwitch 3.1
prints it. Also: a resubmit loop reports the depth limit, and bad input is a
clear error."""
import re

from harness import EMPTY_CONFIG, check, main, run_keel

SETUP = ("add-br br0\n"
         "add-port br0 p0\n"
         "add-port br0 p1\n"
         "add-flow br0 priority=100,ip,nw_dst=10.0.0.0/8,actions=output:2\n")

# Ethernet/IPv4/UDP 10.0.0.9 -> 10.1.2.3, TTL 64.
FRAME = ("020000000002" "020000000001" "0800"
         "4500001c0001000040110000" "0a000009" "0a010203"
         "03e807d000080000")


def keel(stdin):
    return run_keel("--port", "p0=null", "--port", "p1=null", "--config", EMPTY_CONFIG, stdin=stdin)


def test_trace_flow_megaflow_of_a_prefix_rule():
    p = keel(SETUP + "trace br0 ip,in_port=1,nw_dst=10.1.2.3\n")
    check(p.returncode == 0, "exit 0", p)
    out = p.stdout
    check("Flow: ip,in_port=1," in out, "the flow line", p)
    check('bridge("br0")\n-------------\n 0. ip,nw_dst=10.0.0.0/8, priority 100\n    output:2\n' in out,
          "table 0, the rule and its action", p)
    check("\nMegaflow: recirc_id=0,eth,ip,in_port=1,nw_dst=10.0.0.0/8,nw_frag=no\n" in out,
          "megaflow un-wildcards only the /8 prefix", p)
    check(re.search(r"\nDatapath actions: \d+\n", out) is not None, "one output", p)


def test_trace_packet_and_port_names():
    p = keel(SETUP + "trace br0 in_port=p0 --packet " + FRAME + "\n")
    check(p.returncode == 0, "exit 0", p)
    check("\nMegaflow: recirc_id=0,eth,ip,in_port=1,nw_dst=10.0.0.0/8,nw_frag=no\n" in p.stdout,
          "the packet's megaflow", p)
    check("nw_src=10.0.0.9" in p.stdout and "tp_dst=2000" in p.stdout, "fields from the frame", p)


def test_trace_miss_and_loop():
    p = keel(SETUP + "add-flow br0 table=1,actions=resubmit(,1)\n"
             "add-flow br0 priority=200,udp,actions=resubmit(,1)\n"
             "trace br0 arp,in_port=1\n"
             "trace br0 udp,in_port=1,nw_dst=10.1.2.3\n")
    check(p.returncode == 0, "exit 0", p)
    check(" 0. No match.\n    drop\n" in p.stdout, "a miss drops", p)
    check(">>>> over max translation depth 64 <<<<" in p.stdout, "the depth limit is reported", p)
    check("Translation failed (Recursion too deep), packet is dropped." in p.stdout, "and the drop", p)


def test_trace_bad_input():
    p = keel(SETUP + "trace br9 ip\n")
    check(p.returncode != 0 and "no bridge br9" in p.stderr, "unknown bridge", p)
    p = keel(SETUP + "trace br0 ip,tp_dst=80\n")
    check(p.returncode != 0 and "tp_dst" in p.stderr, "bad flow names the token", p)
    p = keel(SETUP + "trace br0 in_port=1 --packet 0200zz\n")
    check(p.returncode != 0 and "hex" in p.stderr, "bad hex", p)


if __name__ == "__main__":
    main([test_trace_flow_megaflow_of_a_prefix_rule, test_trace_packet_and_port_names, test_trace_miss_and_loop,
          test_trace_bad_input])

"""The fast-path half of bonds on host-sim, through the console:
`pmd-bond-show` prints nothing while no bond uses lb_output (as Open
vSwitch's dpif-netdev/bond-show) and refuses a bad bond id; a datapath flow
with `hash(l4(0)),lb_output(N)` is accepted, dumped as Open vSwitch writes
it, and with no table for bond N every packet is dropped and counted
(pmd-stats-show's bond_drops); `port-link PORT down` makes a sim port drop
what it is given to send (counted as tx drops), and `show ports` says the
link is down; bad `port-link` input is refused. And hash(l4(0)) reuses
the packet's RSS hash as Open vSwitch's odp-execute does: on a multi-queue
sim input (software Toeplitz RSS) dp_hash is hash_int(rss, 0), so which
dp_hash bucket a packet lands in is computed here from its addresses and
ports alone (toeplitz() and ovs_hash_int() below: what a test predicting
lb_output's member per packet needs)."""
import os
import struct

from harness import check, json_lines, main, read_pcap, run_keel, tmpdir, udp_frame, write_pcap


def boot(config_lines, stdin, frames):
    d = tmpdir()
    inp, outp, cfg = (os.path.join(d, x) for x in ("in.pcap", "out.pcap", "keel.conf"))
    write_pcap(inp, frames)
    with open(cfg, "w") as f:
        f.write("\n".join(config_lines) + "\n")
    p = run_keel("--config", cfg, "--port", "p0=pcap:in=" + inp, "--port", "p1=pcap:out=" + outp,
                 "--exit-when-drained", stdin=stdin)
    return p, (read_pcap(outp) if os.path.exists(outp) else None)


RSS_KEY = bytes.fromhex("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa")
M32 = 0xffffffff


def toeplitz(data, key=RSS_KEY):
    """The Toeplitz hash of `data` with the standard 40-byte key (keel/hal/rss.h)."""
    k = int.from_bytes(key, "big")
    klen = len(key) * 8
    h = 0
    for i in range(len(data) * 8):
        if data[i // 8] & (0x80 >> (i % 8)):
            h ^= (k >> (klen - 32 - i)) & M32
    return h


def ovs_hash_int(x, basis):
    """Open vSwitch 3.1's hash_int() (lib/hash.h, generic build): core/hash.h's hash_int()."""
    rot = lambda v, n: ((v << n) | (v >> (32 - n))) & M32

    def add(h, d):
        if d:
            d = (d * 0xcc9e2d51) & M32
            d = rot(d, 15)
            d = (d * 0x1b873593) & M32
            h ^= d
        h = rot(h, 13)
        return (h * 5 + 0xe6546b64) & M32

    h = add(add(x, 0), basis) ^ 8
    h ^= h >> 16
    h = (h * 0x85ebca6b) & M32
    h ^= h >> 13
    h = (h * 0xc2b2ae35) & M32
    return h ^ (h >> 16)


def rss_of_udp4(frame):
    """The sim NIC's RSS hash of an untagged IPv4/UDP frame: src, dst, ports."""
    return toeplitz(frame[26:34] + frame[34:38])


def test_hash_l4_reuses_the_rss_hash():
    check(ovs_hash_int(0x12345678, 7) == 0xc154f9a8, "hash_int reference")  # as core/hash.h's static_assert
    frames = [udp_frame(i, 80) for i in range(96)]
    buckets = [ovs_hash_int(rss_of_udp4(f), 0) & 0xff for f in frames]
    keep = sorted(set(buckets))[: len(set(buckets)) // 2]  # half the buckets seen go to p1
    flows = ["dp-flow add recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no) actions:hash(l4(0)),recirc(0x1)"]
    # Every bucket has a second-pass flow (no miss): half of them output, half drop.
    flows += ["dp-flow add recirc_id(0x1),dp_hash(%#x/0xff),in_port(1),eth_type(0x0800),ipv4(frag=no) actions:%s"
              % (b, "2" if b in keep else "drop") for b in range(256)]
    d = tmpdir()
    inp, outp, cfg = (os.path.join(d, x) for x in ("in.pcap", "out.pcap", "keel.conf"))
    write_pcap(inp, frames)
    with open(cfg, "w") as f:
        f.write("\n".join(flows) + "\n")
    p = run_keel("--config", cfg, "--port", "p0=pcap:in=%s,rxq=2" % inp, "--port", "p1=pcap:out=" + outp,
                 "--exit-when-drained", stdin="")
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    want = [f for f, b in zip(frames, buckets) if b in keep]
    got = read_pcap(outp)
    check(0 < len(want) < len(frames) and got == want,
          "exactly the frames whose bucket hash_int(rss, 0) & 255 has a flow: %d of %d, got %d"
          % (len(want), len(frames), len(got)), p)


def test_lb_output_without_a_bond_table_drops_and_counts():
    frames = [udp_frame(i, 80) for i in range(40)]
    p, out = boot(["dp-flow add recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no) "
                   "actions:hash(l4(0)),lb_output(3)"],
                  "pmd-bond-show\nflow-dump\npmd-stats-show --format json\npmd-stats-show --keel\n"
                  "pmd-bond-show --format json\npmd-bond-show --pmd\n", frames)
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    check(out == [], "nothing sent: bond 3 has no table", p)
    check("Bonds:" not in p.stdout and "Bond cache" not in p.stdout, "pmd-bond-show: nothing without a bond", p)
    line = [l for l in p.stdout.splitlines() if l.startswith("recirc_id(0)")]
    check(len(line) == 1 and line[0].endswith("actions:hash(l4(0)),lb_output(3)"), "flow-dump: %r" % line, p)
    docs = json_lines(p.stdout)
    pmd = docs[0]["pmds"][0]
    check(pmd["bond_drops"] == len(frames), "bond_drops %d" % pmd["bond_drops"], p)
    check("  keel: lb_output drops (no bond table / no member): %d\n" % len(frames) in p.stdout,
          "pmd-stats-show --keel line", p)
    check(docs[1] == {"bonds": []}, "pmd-bond-show json: no bonds: %r" % docs[1], p)


def test_bad_input_is_refused():
    for cmd, needle in [("pmd-bond-show 0", "expected a number 1..255"),
                        ("pmd-bond-show 256", "expected a number 1..255"),
                        ("pmd-bond-show bond0", "expected a number 1..255"),
                        ("pmd-bond-show 7", "no bond with id 7"),
                        ("port-link nosuch down", "no port named 'nosuch'"),
                        ("port-link p1 sideways", "sideways"),
                        ("dp-flow add in_port(1) actions:lb_output(0)", "bond id must be 1..255"),
                        ("dp-flow add in_port(1) actions:lb_output(0x1)", "expected a decimal number")]:
        p, _ = boot([], cmd + "\n", [udp_frame(0, 80)])
        check(p.returncode == 1 and needle in p.stderr, "%r: error naming %r" % (cmd, needle), p)


def test_port_link_down_drops_tx_and_shows_down():
    frames = [udp_frame(i, 80) for i in range(25)]
    p, out = boot(["dp-flow add recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no) actions:2",
                   "port-link p1 down"], "show ports --format json\n", frames)
    check(p.returncode == 0, "keel exited %d" % p.returncode, p)
    check(out == [], "p1 down: nothing written", p)
    ports = {x["name"]: x for x in json_lines(p.stdout)[0]["ports"]}
    check(ports["p1"]["tx"]["dropped"] == len(frames) and ports["p1"]["tx"]["packets"] == 0,
          "p1 counted the drops: %r" % ports["p1"]["tx"], p)
    check(ports["p1"]["link"]["up"] is False and ports["p0"]["link"]["up"] is True, "link states", p)
    # And up again: forwarded.
    p, out = boot(["dp-flow add recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no) actions:2",
                   "port-link p1 down", "port-link p1 up"], "", frames)
    check(p.returncode == 0 and out == frames, "p1 up again: every frame written", p)


if __name__ == "__main__":
    main([test_hash_l4_reuses_the_rss_hash, test_lb_output_without_a_bond_table_drops_and_counts, test_bad_input_is_refused,
          test_port_link_down_drops_tx_and_shows_down])

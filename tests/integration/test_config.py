"""Configuration = commands: show running-config round-trips through a
reboot; a startup config that fails part-way boots the last good one;
configure replace is all or nothing. (write memory killed at every step of
the save: tests/unit/config_store_test.cpp.)"""
import os

from harness import PATIENCE, check, json_lines, main, run_keel, tmpdir

PORTS = ["--port", "p0=null", "--port", "p1=null"]


def keel(cfg_dir, stdin, extra=()):
    return run_keel(*PORTS, "--config-dir", cfg_dir, *extra, stdin=stdin, timeout=PATIENCE)


def running(cfg_dir, stdin=""):
    p = keel(cfg_dir, stdin + "show running-config\n")
    check(p.returncode == 0, "boot and show running-config", p)
    return p.stdout[p.stdout.index("! keel "):], p


def read(path):
    with open(path) as f:
        return f.read()


STATE = ("set smc-enable true\nset emc-insert-inv-prob 7\nxconnect p0 p1\nno xconnect p0\nxconnect p1 p0\n"
         "logging level cli dbg\nlogging console err\n")


def test_round_trip_through_reboot():
    d = os.path.join(tmpdir(), "cfg")  # write memory creates it
    first, p = running(d, STATE)
    for line in ("xconnect p1 p0", "set emc-insert-inv-prob 7", "set smc-enable true",
                 "logging level cli dbg", "logging console err"):
        check(line + "\n" in first, "running-config has %r" % line, p)
    check("xconnect p0 p1" not in first, "removed xconnect gone", p)
    p = keel(d, STATE + "write memory\n")
    check(p.returncode == 0 and "saved the running config" in p.stdout, "write memory", p)
    check(read(os.path.join(d, "startup-config")) == first, "startup-config is the running config", p)
    again, p = running(d)
    check(again == first, "identical running-config after a reboot:\n%s\nvs\n%s" % (first, again), p)
    check(read(os.path.join(d, "startup-config.good")) == first, "booted config marked good", p)
    # The JSON form lists the same lines.
    p = keel(d, "show running-config --format json\n")
    j = json_lines(p.stdout)[0]
    check(j["lines"] == first.splitlines()[1:] and j["board"] == "host-sim", "json lines", p)
    # A second save keeps the first as the backup.
    p = keel(d, "set smc-enable false\nwrite memory\n")
    check(p.returncode == 0, "second write memory", p)
    check(read(os.path.join(d, "startup-config.bak")) == first, ".bak is the previous startup config", p)
    check("set smc-enable" not in read(os.path.join(d, "startup-config")), "new startup config", p)
    p = keel(d, "show startup-config\n")
    check(p.stdout == read(os.path.join(d, "startup-config")), "show startup-config", p)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)

# host-sim's default config (a bridge, NORMAL) as running-config prints it.
BOARD_DEFAULT = ["add-br br0",
                 "add-port br0 p0 -- set Interface p0 ofport_request=1",
                 "add-port br0 p1 -- set Interface p1 ofport_request=2",
                 "add-flow br0 priority=0,actions=NORMAL"]


def test_bad_startup_config_boots_last_good():
    d = tmpdir()
    good = "! good\nxconnect p1 p0\nset emc-insert-inv-prob 9\n"
    write(os.path.join(d, "startup-config.good"), good)
    write(os.path.join(d, "startup-config"),
          "set smc-enable true\nno xconnect p0\nxconnect p0 nope\nset emc-insert-inv-prob 3\n")
    cfg, p = running(d)
    check(os.path.join(d, "startup-config") + ":3" in p.stderr, "names FILE:3", p)
    check("no port 'nope'" in p.stderr, "and the reason", p)
    check("startup-config.good" in p.stderr, "says what it booted instead", p)
    check(cfg.splitlines()[1:] == ["xconnect p1 p0", "set emc-insert-inv-prob 9"],
          "the last good config, none of the partial state", p)
    # The failed file is kept for the operator; the good marker unchanged.
    check(read(os.path.join(d, "startup-config.good")) == good, "good marker kept", p)

    # No good config: the board default.
    os.unlink(os.path.join(d, "startup-config.good"))
    cfg, p = running(d)
    check(":3" in p.stderr and "default config" in p.stderr, "falls back to the board default", p)
    check(cfg.splitlines()[1:] == BOARD_DEFAULT, "board default state only", p)


def test_configure_replace_all_or_nothing():
    d = tmpdir()
    good = os.path.join(d, "good.conf")
    bad = os.path.join(d, "bad.conf")
    write(good, "xconnect p1 p0\nset smc-enable true\n")
    write(bad, "no xconnect p0\nset emc-insert-inv-prob 1\nxconnect p0 nope\nset smc-enable true\n")
    garbage = os.path.join(d, "garbage.conf")
    write(garbage, "set smc-enable true\nfrobnicate\n")
    script = ("set emc-insert-inv-prob 42\nlogging level config dbg\nshow running-config\n"
              "configure replace " + bad + "\nshow running-config\n"
              "configure replace " + garbage + "\nshow running-config\n"
              "configure replace " + good + "\nshow running-config\n"
              "copy running-config " + os.path.join(d, "saved.conf") + "\n"
              "copy " + bad + " running-config\nshow running-config\n")
    p = keel(d, script)
    check(p.returncode == 1, "failed commands set the exit status", p)
    blocks = ["! keel " + b for b in p.stdout.split("! keel ")[1:]]
    blocks = [b.split("saved the")[0] for b in blocks]
    check(len(blocks) == 5, "five running-configs", p)
    check(blocks[0] == blocks[1] == blocks[2], "a failed replace leaves running-config identical", p)
    check("set emc-insert-inv-prob 42" in blocks[0] and all(l in blocks[0] for l in BOARD_DEFAULT), "state before", p)
    check(bad + ":3" in p.stderr and "no port 'nope'" in p.stderr, "replace names FILE:3", p)
    check(garbage + ":2" in p.stderr and "unknown command 'frobnicate'" in p.stderr,
          "validated before anything applied", p)
    check(blocks[3].splitlines()[1:] == ["xconnect p1 p0", "set smc-enable true"],
          "replace makes the file the whole config", p)
    check(read(os.path.join(d, "saved.conf")) == blocks[3], "copy running-config FILE", p)
    check(blocks[4] == blocks[3], "a failed merge (copy FILE running-config) changes nothing", p)


def test_no_config_dir_writable():
    d = tmpdir()
    blocker = os.path.join(d, "file")
    write(blocker, "x")
    p = keel(os.path.join(blocker, "cfg"), "write memory\n")
    check(p.returncode == 1 and "write memory" in p.stderr, "an unwritable config dir is an error", p)


if __name__ == "__main__":
    main([test_round_trip_through_reboot, test_bad_startup_config_boots_last_good,
          test_configure_replace_all_or_nothing, test_no_config_dir_writable])

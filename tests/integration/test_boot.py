"""Boot with the embedded default config, the console commands, and boot
errors: one clear line and a non-zero exit, never a crash or a hang."""
import os

from harness import PATIENCE, check, json_lines, main, run_keel, tmpdir, write_pcap


def test_default_boot_console():
    p = run_keel(stdin="version\nshow board\nshow ports\nhelp\nshow board --format json\nexit\n")
    check(p.returncode == 0, "exit 0", p)
    check("keel " in p.stdout and "host-sim" in p.stdout, "version and board", p)
    check("p0" in p.stdout and "p1" in p.stdout and "sample" in p.stdout, "ports shown", p)
    for cmd in ("help", "version", "show board", "show ports", "exit"):
        check(cmd in p.stdout, "help lists %r" % cmd, p)
    board = json_lines(p.stdout)[0]
    check(board["name"] == "host-sim" and board["backend"] == "sim", "board json", p)
    check("keel>" not in p.stdout, "no prompt when stdin is not a terminal", p)


def test_list_boards():
    p = run_keel("--list-boards")
    check(p.returncode == 0, "exit 0", p)
    for b in ("host-sim", "qemu-virt", "bluefield2", "bluefield3"):
        check(b in p.stdout, "lists " + b, p)


def test_failed_command_sets_exit_status():
    p = run_keel(stdin="show ports\nshwo ports\nversion\n")
    check(p.returncode == 1, "exit 1 when a command failed", p)
    check("unknown command 'shwo'; did you mean 'show'?" in p.stderr, "did-you-mean", p)
    check(p.stdout.count("keel ") >= 1, "later commands still ran", p)


def test_xconnect_errors():
    p = run_keel(stdin="xconnect p0 nope\n")
    check(p.returncode == 1 and "no port 'nope'" in p.stderr, "unknown port named", p)


def boot_error(args, needle, stdin=""):
    p = run_keel(*args, stdin=stdin, timeout=PATIENCE)
    check(p.returncode != 0, "non-zero exit for %s" % (args,), p)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(len(lines) >= 1 and lines[-1].startswith("keel: error:"), "one error line", p)
    check(needle in p.stderr, "error names %r" % needle, p)


def test_unknown_board():
    boot_error(["--board", "nosuch"], "unknown board 'nosuch'")


def test_missing_pcap():
    boot_error(["--port", "p0=pcap:in=/nonexistent/x.pcap"], "/nonexistent/x.pcap")


def test_not_a_pcap():
    d = tmpdir()
    bad = os.path.join(d, "bad.pcap")
    with open(bad, "wb") as f:
        f.write(b"this is not a pcap file at all, sorry")
    boot_error(["--port", "p0=pcap:in=" + bad], bad)


def test_bad_port_spec():
    boot_error(["--port", "p0=pcap:in=x,lop=2"], "lop")
    boot_error(["--port", "p0=warp:9"], "warp")


def test_unreadable_config():
    boot_error(["--config", "/nonexistent/keel.conf"], "/nonexistent/keel.conf")
    d = tmpdir()
    cfg = os.path.join(d, "cfg")
    with open(cfg, "w") as f:
        f.write("xconnect p0 p1\nfrobnicate now\n")
    boot_error(["--config", cfg], cfg + ":2")


def test_duplicate_port():
    boot_error(["--port", "p0=null", "--port", "p0=null"], "p0")


if __name__ == "__main__":
    main([test_default_boot_console, test_list_boards, test_failed_command_sets_exit_status,
          test_xconnect_errors, test_unknown_board, test_missing_pcap, test_not_a_pcap,
          test_bad_port_spec, test_unreadable_config, test_duplicate_port])

"""Shared helpers for keel's integration tests (python3 stdlib only).

The tests boot the real keel binary: $KEEL is its path, $KEEL_EMULATOR an
optional command prefix (qemu-aarch64 in the cross build).
"""
import atexit
import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import time

KEEL = os.environ.get("KEEL", "")
EMULATOR = shlex.split(os.environ.get("KEEL_EMULATOR", ""))
HAVE_DPDK = os.environ.get("KEEL_HAVE_DPDK", "").upper() in ("ON", "1", "TRUE", "YES")

# How long to wait for something that must happen (keel to answer, a packet
# to arrive, a flow to expire) before calling it a hang. Only a broken keel
# reaches it: a loaded machine or an emulator just makes the wait longer.
# Never an assertion about speed (performance lives in tests/bench).
PATIENCE = 120


def keel_cmd(*args):
    if not KEEL:
        sys.exit("KEEL is not set (run through ctest)")
    return EMULATOR + [KEEL] + list(args)


# A startup config with nothing in it, for tests that build their own
# bridges (the boards' default config is a bridge, br0).
_EMPTY_DIR = tempfile.mkdtemp(prefix="keel-it-empty-")
atexit.register(shutil.rmtree, _EMPTY_DIR, True)
EMPTY_CONFIG = os.path.join(_EMPTY_DIR, "empty.cfg")
open(EMPTY_CONFIG, "w").close()


def run_keel(*args, stdin="", timeout=PATIENCE):
    """Runs keel with `stdin` as its (non-terminal) input; returns CompletedProcess."""
    return subprocess.run(keel_cmd(*args), input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def wait_for(pred, what, timeout=PATIENCE):
    """Polls pred() until it is true; fails naming `what` after `timeout` s."""
    deadline = time.time() + timeout
    while not pred():
        check(time.time() < deadline, "timed out after %d s waiting for %s" % (timeout, what))
        time.sleep(0.05)


def tmpdir():
    return tempfile.mkdtemp(prefix="keel-it-")


def udp_frame(i, size):
    """An Ethernet/IPv4/UDP frame of `size` bytes (>= 60) whose payload encodes i."""
    eth = bytes.fromhex("020000000002" "020000000001" "0800")
    ip_len = size - 14
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, i & 0xffff, 0, 64, 17, 0,
                      bytes([10, 0, 0, 1]), bytes([10, 0, (i >> 8) & 0xff, i & 0xff]))
    csum = 0
    for k in range(0, 20, 2):
        csum += (hdr[k] << 8) | hdr[k + 1]
    while csum >> 16:
        csum = (csum & 0xffff) + (csum >> 16)
    hdr = hdr[:10] + struct.pack("!H", ~csum & 0xffff) + hdr[12:]
    udp_len = ip_len - 20
    udp = struct.pack("!HHHH", 1000 + (i % 7), 2000, udp_len, 0)
    payload = bytes((i + k) & 0xff for k in range(udp_len - 8))
    return eth + hdr + udp + payload


def varied_frames(n):
    sizes = [60, 64, 128, 256, 512, 1000, 1514]
    return [udp_frame(i, sizes[i % len(sizes)]) for i in range(n)]


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 1700000000 + i, 0, len(fr), len(fr)))
            f.write(fr)


def write_pcap_ts(path, records):
    """records: (timestamp in microseconds, frame)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for ts, fr in records:
            f.write(struct.pack("<IIII", 1700000000 + ts // 1000000, ts % 1000000, len(fr), len(fr)))
            f.write(fr)


def csum(data):
    """The Internet checksum (RFC 1071) of data."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic in (0xa1b2c3d4, 0xa1b23c4d):
        e = "<"
    elif magic in (0xd4c3b2a1, 0x4d3cb2a1):
        e = ">"
    else:
        raise ValueError("%s: not a pcap file" % path)
    off = 24
    frames = []
    while off < len(data):
        _, _, incl, orig = struct.unpack_from(e + "IIII", data, off)
        off += 16
        frames.append(data[off:off + incl])
        off += incl
    return frames


def json_lines(stdout):
    """The JSON objects printed one per line by `--format json` commands."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def ports_by_name(show_ports_json):
    return {p["name"]: p for p in show_ports_json["ports"]}


class Failure(Exception):
    pass


def ask_live(proc, err, cmd):
    """Runs one console command in a live keel started with stdin/stdout
    pipes (text, line-buffered) and returns its output: the command is
    followed by `version --format json`, whose line marks the end. `err` is
    keel's stderr file, shown if keel exits."""
    proc.stdin.write(cmd + "\nversion --format json\n")
    proc.stdin.flush()
    cur = []
    while True:
        line = proc.stdout.readline()
        if not line:
            err.seek(0)
            raise Failure("keel exited:\n" + err.read())
        if line.startswith('{"version"'):
            return "".join(cur)
        cur.append(line)


def tap_available():
    """Whether keel can be given a TAP port here: /dev/net/tun and root."""
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR)
        os.close(fd)
    except OSError:
        return False
    return os.geteuid() == 0


class TapKeel:
    """keel booted with `config`, p1 a TAP device the test writes frames to
    (they arrive on keel's rx one at a time, exactly counted), p2/p3 null."""

    def __init__(self, config, prefix="kut"):
        import socket
        self.ifname = "%s%d" % (prefix, os.getpid() % 100000)
        d = tmpdir()
        cfg = os.path.join(d, "cfg")
        with open(cfg, "w") as f:
            f.write(config)
        self.err = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen(keel_cmd("--config", cfg, "--config-dir", d, "--port", "p1=tap:" + self.ifname,
                                           "--port", "p2=null", "--port", "p3=null"),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True,
                                  bufsize=1)
        self.ask("show ports")  # booted: the TAP exists and is up
        # No IPv6 chatter from the kernel on it from now on (what came before
        # is counted on the drop rule and in p1's rx like any frame).
        subprocess.run(["sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % self.ifname], capture_output=True)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.sock.bind((self.ifname, 0))
        self.sent = 0

    def ask(self, cmd):
        return ask_live(self.p, self.err, cmd)

    def ask_json(self, cmd):
        return json.loads(self.ask(cmd + " --format json"))

    def send(self, frames):
        for f in frames:
            self.sock.send(f)
        self.sent += len(frames)

    def port(self, name):
        return [p for p in self.ask_json("show ports")["ports"] if p["name"] == name][0]

    def rx(self, port="p1"):
        return self.port(port)["rx"]["packets"]

    def close(self):
        self.sock.close()
        self.p.stdin.close()
        self.p.wait(timeout=60)


def check(cond, msg, proc=None):
    if not cond:
        if proc is not None:
            msg += "\n--- stdout ---\n%s\n--- stderr ---\n%s" % (proc.stdout, proc.stderr)
        raise Failure(msg)


def main(tests):
    failed = 0
    for t in tests:
        try:
            t()
            print("PASS", t.__name__)
        except Failure as e:
            failed += 1
            print("FAIL", t.__name__, e)
    print("%d passed, %d failed" % (len(tests) - failed, failed))
    sys.exit(1 if failed else 0)

#!/usr/bin/env python3
"""Boot rehearsal: the static aarch64 firmware as the payload of an initramfs
on qemu-system-aarch64 (-M virt, cortex-a72, 2 CPUs, 1 GiB), with real 2 MB
hugepages and two lcores -- what qemu-user can't show.

    qemu_boot.py --keel build/aarch64/firmware/keel --init build/aarch64/tests/e2e/keel_qemu_init

The initramfs (a gzip'd newc cpio written here, no cpio tool needed) holds
  /init              the static init (tests/e2e/qemu_init.c)
  /bin/keel          the firmware
  /data/in.pcap      --frames UDP frames of varied sizes (classic pcap)
  /data/console.txt  the console script (`show ports`)
  /data/keel.args    only with --keel-args: keel's arguments, one per line
The init runs `/bin/keel --board qemu-virt --exit-when-drained < /data/console.txt`,
prints `KEEL-PCAP ...` and `KEEL-EXIT <status>`, and ends QEMU with keel's exit
status through semihosting.

Passes when QEMU exits 0, the marker says 0, the `show ports` table shows
p0 Rx-pkts = p1 Tx-pkts = --frames, and /data/out.pcap holds exactly the input
frames (each byte for byte; the default bridge may reorder across flows).

The kernel is Debian's arm64 one (the package linux-image-arm64 points at),
downloaded once through toolchains/arm64-apt.sh and cached as
build/qemu-kernel/vmlinuz-* (an uncompressed arm64 Image). --kernel or
$KEEL_QEMU_KERNEL use another Image.
"""
import argparse
import fcntl
import glob
import gzip
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ARM64_APT = os.path.join(REPO, "toolchains", "arm64-apt.sh")


def log(msg):
    print("qemu_boot: " + msg, flush=True)


def fail(msg):
    print("qemu_boot: FAIL: " + msg, flush=True)
    sys.exit(1)

def run_qemu(cmd, timeout):
    """Runs QEMU with its console on our stdout (echoed line by line);
    returns (exit status, the console text, seconds). Fails the test when it
    is still running after `timeout` s (killed)."""
    log(" ".join(cmd))
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    chunks = []

    def pump():
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").replace("\r", "")
            chunks.append(line)
            sys.stdout.write(line)
            sys.stdout.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        reader.join(5)
        fail("QEMU still running after %.0f s; killed" % timeout)
    reader.join(10)
    elapsed = time.time() - t0
    log("QEMU exited %d after %.1f s" % (rc, elapsed))
    return rc, "".join(chunks), elapsed



# --- kernel -----------------------------------------------------------------

def fetch_kernel(cache):
    """Path of a cached Debian arm64 Image, downloading it the first time."""
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # parallel ctest runs download once
        have = sorted((p for p in glob.glob(os.path.join(cache, "vmlinuz-*")) if not p.endswith(".tmp")),
                      key=os.path.getmtime)
        if have:
            return have[-1]
        t0 = time.time()
        deps = subprocess.run([ARM64_APT, "apt-cache", "depends", "linux-image-arm64"],
                              check=True, capture_output=True, text=True).stdout
        m = re.search(r"Depends:\s*(linux-image-\S+-arm64)\s*$", deps, re.M)
        if not m:
            fail("no kernel package behind linux-image-arm64:\n" + deps)
        pkg = m.group(1)
        log("downloading %s (once; cached in %s)" % (pkg, cache))
        dl = tempfile.mkdtemp(dir=cache)
        try:
            subprocess.run([ARM64_APT, "apt-get", "download", pkg], cwd=dl, check=True)
            deb = glob.glob(os.path.join(dl, "*.deb"))[0]
            # Stream the data tarball and keep only boot/vmlinuz-*.
            p = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE)
            found = None
            with tarfile.open(fileobj=p.stdout, mode="r|") as tf:
                for member in tf:
                    name = member.name.lstrip("./")
                    if member.isfile() and re.fullmatch(r"boot/vmlinuz-.*", name):
                        found = os.path.join(cache, os.path.basename(name))
                        with open(found + ".tmp", "wb") as out:
                            shutil.copyfileobj(tf.extractfile(member), out)
                        os.rename(found + ".tmp", found)
                        break
            p.stdout.close()
            p.kill()
            p.wait()
            if not found:
                fail("%s has no boot/vmlinuz-*" % deb)
        finally:
            shutil.rmtree(dl, ignore_errors=True)
        log("kernel %s ready (%.1f s)" % (found, time.time() - t0))
        return found


# --- packets ----------------------------------------------------------------

def ip_checksum(hdr):
    s = sum(struct.unpack("!%dH" % (len(hdr) // 2), hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_frames(n):
    """n Ethernet/IPv4/UDP frames, 60..1514 bytes, different flows and payloads."""
    frames = []
    for i in range(n):
        size = 60 + (i * 271) % (1514 - 60 + 1)
        payload = bytes((i * 7 + k) & 0xFF for k in range(size - 42))
        udp = struct.pack("!HHHH", 1024 + i % 512, 4789 + i % 3, 8 + len(payload), 0) + payload
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), i & 0xFFFF, 0x4000, 64, 17, 0,
                         bytes([10, 0, i >> 8 & 0xFF, i & 0xFF]), bytes([10, 1, 0, 1]))
        ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
        eth = bytes([0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0x01, i & 0xFF]) + b"\x08\x00"
        frames.append(eth + ip + udp)
    return frames


def pcap_bytes(frames):
    out = io.BytesIO()
    out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))   # LINKTYPE_ETHERNET
    for i, f in enumerate(frames):
        out.write(struct.pack("<IIII", 1700000000 + i // 1000, (i % 1000) * 1000, len(f), len(f)))
        out.write(f)
    return out.getvalue()


def fnv1a(frames):
    """The digest qemu_init.c prints for a pcap's frames: the sum mod 2^64 of
    each frame's FNV-1a (caplen LE + data), whatever their order (the
    default config is a bridge: a live port keeps each flow's order, not the
    order across flows)."""
    total = 0
    for f in frames:
        h = 0xCBF29CE484222325
        for b in struct.pack("<I", len(f)) + f:
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        total = (total + h) & 0xFFFFFFFFFFFFFFFF
    return total


# --- initramfs --------------------------------------------------------------

class Cpio:
    """newc ("070701") archive writer."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.ino = 1

    def _entry(self, name, mode, data=b"", rdev=(0, 0)):
        name_b = name.encode() + b"\0"
        hdr = "070701" + "".join("%08X" % v for v in (
            self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name_b), 0))
        self.ino += 1
        self.buf.write(hdr.encode() + name_b)
        self.buf.write(b"\0" * (-(110 + len(name_b)) % 4))
        self.buf.write(data)
        self.buf.write(b"\0" * (-len(data) % 4))

    def dir(self, name):
        self._entry(name, 0o040755)

    def file(self, name, data, mode=0o644):
        self._entry(name, 0o100000 | mode, data)

    def symlink(self, name, target):
        self._entry(name, 0o120777, target.encode())

    def chardev(self, name, major, minor, mode=0o600):
        self._entry(name, 0o020000 | mode, rdev=(major, minor))

    def finish(self):
        self._entry("TRAILER!!!", 0)
        return self.buf.getvalue()


def build_initramfs(path, init, keel, pcap, console, keel_args):
    c = Cpio()
    for d in ("bin", "data", "dev", "proc", "sys", "run", "tmp", "var", "dev/hugepages"):
        c.dir(d)
    c.chardev("dev/console", 5, 1)
    c.chardev("dev/null", 1, 3, 0o666)
    c.symlink("var/run", "/run")
    with open(init, "rb") as f:
        c.file("init", f.read(), 0o755)
    with open(keel, "rb") as f:
        c.file("bin/keel", f.read(), 0o755)
    c.file("data/in.pcap", pcap)
    c.file("data/console.txt", console.encode())
    if keel_args is not None:
        c.file("data/keel.args", "".join(a + "\n" for a in keel_args).encode())
    with open(path, "wb") as f:
        f.write(gzip.compress(c.finish(), compresslevel=3))


# --- checks -----------------------------------------------------------------

def show_ports_rows(text):
    """{port: {column: cell}} from the last `show ports` text table in text."""
    lines = text.splitlines()
    headers = [i for i, l in enumerate(lines)
               if l.startswith("Port") and "Rx-pkts" in l and "Tx-pkts" in l]
    if not headers:
        return None
    h = headers[-1]
    cols = [(m.group(), m.start()) for m in re.finditer(r"\S+", lines[h])]
    rows = {}
    for line in lines[h + 1:]:
        if not line.strip() or line.startswith(("keel", "[", "KEEL-", "EAL")):
            break
        cells = {}
        for i, (name, start) in enumerate(cols):
            end = cols[i + 1][1] if i + 1 < len(cols) else None
            cells[name] = line[start:end].strip()
        rows[cells[cols[0][0]]] = cells
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keel", required=True, help="static aarch64 firmware (becomes /bin/keel)")
    ap.add_argument("--init", required=True, help="static aarch64 init (tests/e2e/qemu_init.c)")
    ap.add_argument("--kernel", default=os.environ.get("KEEL_QEMU_KERNEL"),
                    help="arm64 Image (default: Debian's, downloaded to --kernel-cache)")
    ap.add_argument("--kernel-cache", default=os.path.join(REPO, "build", "qemu-kernel"))
    ap.add_argument("--work", help="directory for the initramfs (default: a temporary one)")
    ap.add_argument("--frames", type=int, default=100, help="UDP frames in /data/in.pcap")
    ap.add_argument("--console", default="show ports\n", help="console script fed to keel's stdin")
    ap.add_argument("--keel-args", nargs=argparse.REMAINDER,
                    help="keel's arguments instead of --board qemu-virt --exit-when-drained (last option)")
    ap.add_argument("--hugepages", type=int, default=64, help="2 MB pages the init reserves")
    ap.add_argument("--smp", type=int, default=2)
    ap.add_argument("--memory", default="1G")
    ap.add_argument("--cpu", default="cortex-a72")
    ap.add_argument("--timeout", type=float, default=240, help="seconds before QEMU is killed")
    ap.add_argument("--qemu", default="qemu-system-aarch64")
    ap.add_argument("--no-strip", action="store_true", help="pack --keel as is (with debug info)")
    args = ap.parse_args()

    for what, p in (("--keel", args.keel), ("--init", args.init)):
        if not os.path.isfile(p):
            fail("%s %s: no such file" % (what, p))
    if not shutil.which(args.qemu):
        fail("%s not found (apt-get install qemu-system-arm, or run toolchains/setup.sh)" % args.qemu)

    kernel = args.kernel or fetch_kernel(args.kernel_cache)
    work = args.work or tempfile.mkdtemp(prefix="keel-qemu-")
    os.makedirs(work, exist_ok=True)
    initrd = os.path.join(work, "initrd.gz")

    frames = udp_frames(args.frames)
    t0 = time.time()
    keel = args.keel
    strip = shutil.which("aarch64-linux-gnu-strip")
    if strip and not args.no_strip:
        # Debug info triples the initramfs; the guest doesn't need it.
        keel = os.path.join(work, "keel.stripped")
        subprocess.run([strip, "-o", keel, args.keel], check=True)
    build_initramfs(initrd, args.init, keel, pcap_bytes(frames), args.console, args.keel_args)
    log("initramfs %s: %.1f MiB (%.1f s)" % (initrd, os.path.getsize(initrd) / 2**20, time.time() - t0))

    cmd = [args.qemu, "-M", "virt", "-cpu", args.cpu, "-smp", str(args.smp), "-m", args.memory,
           "-nographic", "-no-reboot", "-nic", "none",
           "-kernel", kernel, "-initrd", initrd,
           "-append", "console=ttyAMA0 quiet panic=-1 keel.hugepages=%d" % args.hugepages,
           "-semihosting-config", "enable=on,target=native,userspace=on"]
    rc, out, elapsed = run_qemu(cmd, args.timeout)

    m = re.search(r"^KEEL-EXIT (-?\d+)$", out, re.M)
    if not m:
        fail("no KEEL-EXIT marker: init or the kernel failed (QEMU status %d)" % rc)
    if int(m.group(1)) != 0:
        fail("keel exited %s" % m.group(1))
    if rc != 0:
        fail("QEMU exited %d (semihosting carries keel's status)" % rc)

    rows = show_ports_rows(out)
    if rows is None:
        fail("no `show ports` table (header Port ... Rx-pkts ... Tx-pkts) in the console output")
    n = str(args.frames)
    for port, col in (("p0", "Rx-pkts"), ("p1", "Tx-pkts")):
        got = rows.get(port, {}).get(col)
        if got != n:
            fail("show ports: %s %s is %r, expected %s" % (port, col, got, n))

    m = re.search(r"^KEEL-PCAP /data/out.pcap frames=(\d+) bytes=(\d+) fnv=([0-9a-f]+)(.*)$", out, re.M)
    if not m:
        fail("no /data/out.pcap after keel exited")
    want = (len(frames), sum(map(len, frames)), "%016x" % fnv1a(frames))
    got = (int(m.group(1)), int(m.group(2)), m.group(3))
    if got != want or m.group(4).strip():
        fail("out.pcap has frames=%d bytes=%d fnv=%s%s; expected frames=%d bytes=%d fnv=%s"
             % (got + (m.group(4),) + want))
    log("PASS: booted, bridged %d frames p0 -> p1 byte for byte, exit 0 (%.1f s)"
        % (args.frames, elapsed))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A real rte_flow rule acting on packets: net_tap's rte_flow is kernel TC
flower, which the host kernel lacks (no modules at all) and Debian's arm64
kernel has. So this boots that kernel on qemu-system-aarch64 with the TC
modules in the initramfs and a DPDK program on a net_tap port as the payload:

    qemu_rte_flow.py --probe build/aarch64/tests/e2e/keel_rte_flow_probe \\
                     --init  build/aarch64/tests/e2e/keel_qemu_init

The initramfs holds
  /init                   tests/e2e/qemu_init.c (loads /data/modules in order,
                          then runs /data/program with /data/keel.args)
  /bin/probe              the payload (rte_flow_probe.c: raw rte_flow on tap)
  /lib/modules/*.ko       tun, sch_multiq, sch_ingress, cls_flower, act_gact,
                          act_skbedit, act_mirred and what they depend on
                          (read from each module's .modinfo `depends=`)
The payload prints `PROBE-CHECK <name> ok|FAIL ...` lines and
`PROBE-RESULT PASS|FAIL`; the init prints `KEEL-EXIT <status>` and ends QEMU
with it through semihosting.

Passes when QEMU exits 0, every check in REQUIRED is present and ok, and the
result is PASS: a DROP rule (udp dst A) keeps every A frame from the PMD, a
QUEUE rule (udp dst B -> queue 1) puts every B frame on queue 1 only, C
frames still arrive, the TC filters' action counters in the guest count
exactly the A and B frames, a duplicate rule passes validate but create is
refused (EEXIST, "overlapping rules ...") and changes no filter, an RSS rule
passes validate but create fails (tap's eBPF RSS program is refused by this
kernel's verifier) without a flower filter and without losing its frames, and
once the rules are destroyed A and B reach the PMD again.

Kernel and modules come from the same Debian package (the linux-image-*-arm64
that linux-image-arm64 depends on, or --package), downloaded once through
toolchains/arm64-apt.sh and cached in build/qemu-kernel/tc-<package>/
(vmlinuz + modules/*.ko + modules.order). Modules are decompressed on the
host when the package ships them compressed (.ko.xz: lzma; this kernel's are
plain .ko).
"""
import argparse
import fcntl
import glob
import gzip
import lzma
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import qemu_boot  # noqa: E402  (Cpio, the arm64 apt wrapper)

REPO = qemu_boot.REPO
ARM64_APT = qemu_boot.ARM64_APT

# What net_tap's rte_flow needs from the kernel (tap_tcmsgs.c / tap_flow.c):
# the multiqueue tun, a multiq root qdisc and an ingress qdisc, flower
# filters, and the gact (drop/passthru), skbedit (queue) and mirred (remote)
# actions.
WANT_MODULES = ["tun", "sch_multiq", "sch_ingress", "cls_flower", "act_gact", "act_skbedit", "act_mirred"]
# tap's RSS action runs eBPF programs through cls_bpf and act_bpf (not loaded
# with --no-bpf, which also skips the probe's RSS step).
BPF_MODULES = ["cls_bpf", "act_bpf"]

REQUIRED = [
    "port_setup", "configure_needs_stopped_port", "tap_iface", "packet_socket", "info_get_unsupported",
    "baseline_rx",
    "validate_drop", "create_drop", "create_queue", "tc_filters_installed",
    "trap_validate_only_parses", "trap_refused_is_eexist", "trap_refused_changes_nothing",
    "count_unsupported", "mark_unsupported", "query_unsupported",
    "drop_acts", "queue_acts", "unmatched_rss", "tc_counts_drop", "tc_counts_queue",
    "exact_create", "exact_acts", "exact_ttl_refused", "queue_out_of_range",
    "destroy", "tc_filters_removed", "after_destroy_rx",
]
REQUIRED_RSS = ["rss_validate_lies", "rss_refused_no_flower", "rss_refused_still_forwards"]
# --kind hal --no-flower: the guest without cls_flower.
REQUIRED_NO_FLOWER = [
    "hal_port_spec", "hal_backend", "hal_port", "hal_rxq", "flow_engine", "info_sync_only",
    "tap_iface", "packet_socket", "baseline_rx", "noflower_validate_passes", "noflower_create_refused",
    "noflower_nothing_installed", "noflower_still_forwards",
]
# --kind hal: hal_flow_probe.cpp, the same through keel's hal facade.
REQUIRED_HAL = [
    "hal_port_spec", "hal_backend", "hal_port", "hal_rxq", "flow_engine", "info_sync_only",
    "template_api_unsupported", "tap_iface", "packet_socket", "baseline_rx",
    "validate_drop", "create_drop", "create_queue", "tc_filters_installed",
    "trap_validate_only_parses", "trap_refused_is_eexist", "trap_refused_changes_nothing",
    "count_unsupported", "mark_unsupported", "query_unsupported", "queue_out_of_range",
    "destroy_unknown_handle", "drop_acts", "queue_acts", "unmatched_rss", "tc_counts_drop", "tc_counts_queue",
    "exact_create", "exact_acts", "exact_ttl_refused", "exact_tcp4", "exact_udp6", "vlan_needs_own_priority",
    "tap_vlan_vid_refused", "destroy", "tc_filters_removed", "after_destroy_rx", "flush",
]


def log(msg):
    print("qemu_rte_flow: " + msg, flush=True)


def fail(msg):
    print("qemu_rte_flow: FAIL: " + msg, flush=True)
    sys.exit(1)


# --- kernel + modules ---------------------------------------------------------

def modinfo_depends(data):
    """`depends=` of an ELF64 little-endian kernel module, as a list."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not an ELF64 LE module")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    stro = secs[shstrndx][4]
    for s in secs:
        name_end = data.index(b"\0", stro + s[0])
        if data[stro + s[0]:name_end] == b".modinfo":
            for kv in data[s[4]:s[4] + s[5]].split(b"\0"):
                if kv.startswith(b"depends="):
                    return [d for d in kv[8:].decode().split(",") if d]
            return []
    return []


def module_name(path):
    base = os.path.basename(path)
    base = re.sub(r"\.ko(\.xz|\.zst|\.gz)?$", "", base)
    return base.replace("-", "_")


def read_module(tf, member):
    data = tf.extractfile(member).read()
    if member.name.endswith(".xz"):
        data = lzma.decompress(data)
    elif member.name.endswith(".gz"):
        data = gzip.decompress(data)
    elif member.name.endswith(".zst"):
        raise ValueError("%s: zstd modules need the zstd tool" % member.name)
    return data


def scan_deb(deb, names, want_vmlinuz_to=None):
    """{module name: bytes} for the wanted names (plus vmlinuz to a file)."""
    got = {}
    p = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE)
    with tarfile.open(fileobj=p.stdout, mode="r|") as tf:
        for m in tf:
            name = m.name.lstrip("./")
            if not m.isfile():
                continue
            if want_vmlinuz_to and re.fullmatch(r"boot/vmlinuz-.*", name):
                with open(want_vmlinuz_to, "wb") as out:
                    shutil.copyfileobj(tf.extractfile(m), out)
            elif re.match(r"lib/modules/[^/]+/kernel/.*\.ko(\.xz|\.gz|\.zst)?$", name) and module_name(name) in names:
                got[module_name(name)] = read_module(tf, m)
    p.stdout.close()
    p.wait()
    return got


def fetch_tc_kernel(cache, package=None):
    """(vmlinuz, [module paths in load order]) from one Debian arm64 kernel
    package, downloaded once and cached."""
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not package:
            deps = subprocess.run([ARM64_APT, "apt-cache", "depends", "linux-image-arm64"],
                                  check=True, capture_output=True, text=True).stdout
            m = re.search(r"Depends:\s*(linux-image-\S+-arm64)\s*$", deps, re.M)
            if not m:
                fail("no kernel package behind linux-image-arm64:\n" + deps)
            package = m.group(1)
        d = os.path.join(cache, "tc-" + package)
        order = os.path.join(d, "modules.order")
        if os.path.exists(order):
            return fetch_tc_kernel_paths(d)
        t0 = time.time()
        log("downloading %s for its TC modules (once; cached in %s)" % (package, d))
        dl = tempfile.mkdtemp(dir=cache)
        try:
            subprocess.run([ARM64_APT, "apt-get", "download", package], cwd=dl, check=True)
            deb = glob.glob(os.path.join(dl, "*.deb"))[0]
            tmp = d + ".tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(os.path.join(tmp, "modules"))
            have = {}
            need = set(WANT_MODULES + BPF_MODULES)
            first = True
            while need - set(have):
                got = scan_deb(deb, need - set(have), os.path.join(tmp, "vmlinuz") if first else None)
                first = False
                missing = need - set(have) - set(got)
                if missing:
                    # Built in (modules.builtin) is fine for a dependency; a
                    # wanted module must exist.
                    hard = missing & set(WANT_MODULES + BPF_MODULES)
                    if hard:
                        fail("%s has no module %s (built in? see its config-*)" % (package, ", ".join(sorted(hard))))
                    log("dependencies %s not found as modules: assuming built in" % ", ".join(sorted(missing)))
                    need -= missing
                have.update(got)
                for data in got.values():
                    need.update(modinfo_depends(data))
            # Load order: dependencies first.
            ordered, state = [], {}

            def visit(n):
                if state.get(n) == 2 or n not in have:
                    return
                if state.get(n) == 1:
                    fail("module dependency cycle at %s" % n)
                state[n] = 1
                for dep in modinfo_depends(have[n]):
                    visit(dep)
                state[n] = 2
                ordered.append(n)

            for n in WANT_MODULES + BPF_MODULES:
                visit(n)
            for n in ordered:
                with open(os.path.join(tmp, "modules", n + ".ko"), "wb") as f:
                    f.write(have[n])
            with open(os.path.join(tmp, "modules.order"), "w") as f:
                f.write("".join(n + "\n" for n in ordered))
            if not os.path.exists(os.path.join(tmp, "vmlinuz")):
                fail("%s has no boot/vmlinuz-*" % deb)
            shutil.rmtree(d, ignore_errors=True)
            os.rename(tmp, d)
        finally:
            shutil.rmtree(dl, ignore_errors=True)
        log("kernel and %d modules ready (%.1f s)" % (len(ordered), time.time() - t0))
        return fetch_tc_kernel_paths(d)


def fetch_tc_kernel_paths(d):
    """(vmlinuz, [module paths in load order]) of a cache directory."""
    with open(os.path.join(d, "modules.order")) as f:
        mods = [os.path.join(d, "modules", l.strip() + ".ko") for l in f if l.strip()]
    return os.path.join(d, "vmlinuz"), mods


# --- initramfs ------------------------------------------------------------------

def build_initramfs(path, init, probe, modules, probe_args):
    c = qemu_boot.Cpio()
    for d in ("bin", "data", "dev", "proc", "sys", "run", "tmp", "var", "dev/hugepages", "lib", "lib/modules"):
        c.dir(d)
    c.chardev("dev/console", 5, 1)
    c.chardev("dev/null", 1, 3, 0o666)
    c.symlink("var/run", "/run")
    with open(init, "rb") as f:
        c.file("init", f.read(), 0o755)
    with open(probe, "rb") as f:
        c.file("bin/probe", f.read(), 0o755)
    listed = []
    for m in modules:
        dst = "lib/modules/" + os.path.basename(m)
        with open(m, "rb") as f:
            c.file(dst, f.read())
        listed.append("/" + dst)
    c.file("data/modules", "".join(p + "\n" for p in listed).encode())
    c.file("data/program", b"/bin/probe\n")
    c.file("data/keel.args", "".join(a + "\n" for a in probe_args).encode())
    c.file("data/console.txt", b"")
    with open(path, "wb") as f:
        f.write(gzip.compress(c.finish(), compresslevel=3))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probe", required=True, help="static aarch64 probe (becomes /bin/probe)")
    ap.add_argument("--kind", choices=("raw", "hal"), default="raw",
                    help="raw: rte_flow_probe.c (raw rte_flow); hal: hal_flow_probe.cpp (keel's hal facade)")
    ap.add_argument("--init", required=True, help="static aarch64 init (tests/e2e/qemu_init.c)")
    ap.add_argument("--package", help="Debian arm64 kernel package (default: what linux-image-arm64 depends on)")
    ap.add_argument("--kernel-cache", default=os.path.join(REPO, "build", "qemu-kernel"))
    ap.add_argument("--work", help="directory for the initramfs (default: a temporary one)")
    ap.add_argument("--frames", type=int, default=64, help="frames of each of A, B, C per round")
    ap.add_argument("--hugepages", type=int, default=64)
    ap.add_argument("--smp", type=int, default=1)
    ap.add_argument("--memory", default="1G")
    ap.add_argument("--cpu", default="cortex-a72")
    ap.add_argument("--timeout", type=float, default=150, help="seconds before QEMU is killed")
    ap.add_argument("--qemu", default="qemu-system-aarch64")
    ap.add_argument("--no-bpf", action="store_true",
                    help="do not load cls_bpf and act_bpf (tap's RSS action) and skip the RSS step")
    ap.add_argument("--probe-arg", action="append", default=[], help="extra probe option (before --)")
    ap.add_argument("--no-flower", action="store_true",
                    help="boot without cls_flower (this host kernel's situation; --kind hal): every create must be "
                         "refused (EEXIST), nothing installed, every frame still delivered")
    args = ap.parse_args()

    for what, p in (("--probe", args.probe), ("--init", args.init)):
        if not os.path.isfile(p):
            fail("%s %s: no such file" % (what, p))
    if not shutil.which(args.qemu):
        fail("%s not found (apt-get install qemu-system-arm, or run toolchains/setup.sh)" % args.qemu)

    kernel, modules = fetch_tc_kernel(args.kernel_cache, args.package)
    required = (REQUIRED if args.kind == "raw" else REQUIRED_HAL) + ([] if args.no_bpf else REQUIRED_RSS)
    if args.kind == "raw" and not args.no_bpf:
        required.append("rss_validate_touches_kernel")
    if args.no_bpf:
        modules = [m for m in modules if module_name(m) not in BPF_MODULES]
        args.probe_arg.append("--no-rss")
    if args.no_flower:
        if args.kind != "hal":
            fail("--no-flower needs --kind hal")
        modules = [m for m in modules if module_name(m) != "cls_flower"]
        args.probe_arg.append("--no-flower")
        required = REQUIRED_NO_FLOWER
    log("kernel %s, modules in load order: %s" % (kernel, " ".join(module_name(m) for m in modules)))
    work = args.work or tempfile.mkdtemp(prefix="keel-qemu-rte-flow-")
    os.makedirs(work, exist_ok=True)
    initrd = os.path.join(work, "initrd.gz")
    probe = args.probe
    strip = shutil.which("aarch64-linux-gnu-strip")
    if strip:
        probe = os.path.join(work, "probe.stripped")
        subprocess.run([strip, "-o", probe, args.probe], check=True)
    probe_args = ["--frames", str(args.frames)] + args.probe_arg + ["--",
                  "-l", "0", "--file-prefix", "probe", "--no-telemetry", "--no-pci"]
    if args.kind == "raw":
        probe_args += ["--vdev", "net_tap0,iface=dtap0"]   # hal: open_port() hotplugs it from the port spec
    build_initramfs(initrd, args.init, probe, modules, probe_args)
    log("initramfs %s: %.1f MiB" % (initrd, os.path.getsize(initrd) / 2**20))

    cmd = [args.qemu, "-M", "virt", "-cpu", args.cpu, "-smp", str(args.smp), "-m", args.memory,
           "-nographic", "-no-reboot", "-nic", "none",
           "-kernel", kernel, "-initrd", initrd,
           "-append", "console=ttyAMA0 quiet panic=-1 keel.hugepages=%d" % args.hugepages,
           "-semihosting-config", "enable=on,target=native,userspace=on"]
    rc, out, elapsed = qemu_boot.run_qemu(cmd, args.timeout)

    for m in re.finditer(r"^KEEL-MODULE-FAIL (\S+) (.*)$", out, re.M):
        fail("the guest could not load %s: %s" % (m.group(1), m.group(2)))
    checks = {m.group(1): (m.group(2), m.group(3)) for m in
              re.finditer(r"^PROBE-CHECK (\S+) (ok|FAIL) ?(.*)$", out, re.M)}
    bad = [n for n, (v, _) in checks.items() if v != "ok"]
    missing = [n for n in required if n not in checks]
    if bad:
        fail("checks failed: " + "; ".join("%s: %s" % (n, checks[n][1]) for n in bad))
    if missing:
        fail("checks never ran: " + ", ".join(missing))
    if not re.search(r"^PROBE-RESULT PASS$", out, re.M):
        fail("no PROBE-RESULT PASS")
    m = re.search(r"^KEEL-EXIT (-?\d+)$", out, re.M)
    if not m or int(m.group(1)) != 0:
        fail("the probe exited %s" % (m.group(1) if m else "(no KEEL-EXIT marker)"))
    if rc != 0:
        fail("QEMU exited %d (semihosting carries the probe's status)" % rc)
    log("PASS: %d checks; rte_flow DROP and QUEUE rules%s acted in the guest's kernel (%.1f s)"
        % (len(checks), " installed through keel's hal flow facade" if args.kind == "hal" else "", elapsed))


if __name__ == "__main__":
    main()

/* /init of the qemu-system boot rehearsal (tests/e2e/qemu_boot.py).
 *
 * Runs as PID 1 from the initramfs: mounts proc, sysfs, devtmpfs, tmpfs on
 * /run and /tmp, reserves 2 MB hugepages and mounts hugetlbfs, then runs
 *
 *   /bin/keel --board qemu-virt --exit-when-drained  < /data/console.txt
 *
 * (the arguments come from /data/keel.args, one per line, when that file
 * exists), with stdout/stderr on the serial console. Afterwards it prints
 *
 *   KEEL-PCAP /data/out.pcap frames=N bytes=B fnv=HEX   (when the file exists;
 *                                  HEX: the sum of the frames' FNV-1a hashes)
 *   KEEL-EXIT <status>
 *
 * and ends QEMU with keel's exit status through semihosting SYS_EXIT (QEMU must
 * run with -semihosting-config enable=on,target=native,userspace=on). Without
 * semihosting it powers the machine off (QEMU then exits 0; the test reads the
 * marker line instead).
 *
 * Optional files (tests/e2e/qemu_rte_flow.py writes them):
 *   /data/modules      kernel modules to load before anything runs, one path
 *                      per line, in dependency order (finit_module; a module
 *                      already present, EEXIST, is fine). A module that fails
 *                      to load is reported (`KEEL-MODULE-FAIL <path> <error>`)
 *                      and the payload is not run (exit status 125).
 *   /data/program      the payload to run instead of /bin/keel (a path on its
 *                      first line); /data/keel.args still gives its arguments.
 *
 * Kernel command line options read from /proc/cmdline:
 *   keel.hugepages=N   2 MB pages to reserve (default 64)
 *
 * Statically linked, C only, no libraries beyond libc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEEL "/bin/keel"
#define CONSOLE_SCRIPT "/data/console.txt"
#define ARGS_FILE "/data/keel.args"
#define OUT_PCAP "/data/out.pcap"
#define MODULES_FILE "/data/modules"
#define PROGRAM_FILE "/data/program"

static char program[256] = KEEL;

static double uptime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    printf("[init %7.3f] ", uptime());
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static void do_mount(const char *src, const char *dst, const char *type, const char *opts)
{
    mkdir(dst, 0755);
    if (mount(src, dst, type, MS_NOSUID, opts) != 0 && errno != EBUSY)
        say("mount %s on %s: %s", type, dst, strerror(errno));
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static long read_long(const char *path)
{
    char buf[64] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 ? strtol(buf, NULL, 10) : -1;
}

/* Value of `key=` on the kernel command line, or def. */
static long cmdline_long(const char *key, long def)
{
    static char cmdline[4096];
    int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return def;
    ssize_t n = read(fd, cmdline, sizeof cmdline - 1);
    close(fd);
    if (n <= 0) return def;
    cmdline[n] = 0;
    size_t klen = strlen(key);
    for (char *p = cmdline; (p = strstr(p, key)) != NULL; p += klen)
        if ((p == cmdline || p[-1] == ' ') && p[klen] == '=') return strtol(p + klen + 1, NULL, 10);
    return def;
}

/* argv for keel: /data/keel.args (one argument per line) or the default. */
static char **keel_argv(void)
{
    static char *def[] = {KEEL, "--board", "qemu-virt", "--exit-when-drained", NULL};
    static char buf[4096];
    static char *argv[64];
    int fd = open(ARGS_FILE, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return def;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) return def;
    buf[n] = 0;
    int argc = 0;
    argv[argc++] = program;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line && argc < 63;
         line = strtok_r(NULL, "\n", &save))
        argv[argc++] = line;
    argv[argc] = NULL;
    return argv;
}

/* Loads the modules listed in /data/modules, in order. Returns how many
 * failed. */
static int load_modules(void)
{
    static char buf[8192];
    int fd = open(MODULES_FILE, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    int failed = 0, loaded = 0;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int mfd = open(line, O_RDONLY | O_CLOEXEC);
        long rc = mfd < 0 ? -1 : syscall(SYS_finit_module, mfd, "", 0);
        int err = errno;
        if (mfd >= 0) close(mfd);
        if (rc == 0 || err == EEXIST) {
            loaded++;
            continue;
        }
        printf("KEEL-MODULE-FAIL %s %s\n", line, strerror(err));
        fflush(stdout);
        failed++;
    }
    say("modules: %d loaded, %d failed (%s)", loaded, failed, MODULES_FILE);
    return failed;
}

/* /data/program's first line, when the file exists. */
static void read_program(void)
{
    char buf[sizeof program] = {0};
    int fd = open(PROGRAM_FILE, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = 0;
    buf[strcspn(buf, "\n")] = 0;
    if (buf[0]) snprintf(program, sizeof program, "%s", buf);
}

/* Frames, bytes and the sum (mod 2^64) of each captured frame's FNV-1a hash
 * (caplen + data) of a classic little-endian pcap file, so the test can
 * compare it with its input frame for frame. A sum, not one hash over the
 * file: the default config is a bridge, and on a live port a bridge keeps
 * each flow's order but not the order across flows (the first packet of a
 * flow waits for its upcall). */
static void report_pcap(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return;
    unsigned char hdr[24], rec[16];
    uint64_t frames = 0, bytes = 0, fnv = 0;
    int bad = fread(hdr, 1, sizeof hdr, f) != sizeof hdr;
    while (!bad && fread(rec, 1, sizeof rec, f) == sizeof rec) {
        uint32_t caplen = rec[8] | rec[9] << 8 | rec[10] << 16 | (uint32_t)rec[11] << 24;
        unsigned char lenb[4] = {rec[8], rec[9], rec[10], rec[11]};
        uint64_t h = 0xcbf29ce484222325ull;
        for (int i = 0; i < 4; i++) h = (h ^ lenb[i]) * 0x100000001b3ull;
        for (uint32_t i = 0; i < caplen; i++) {
            int c = fgetc(f);
            if (c == EOF) {
                bad = 1;
                break;
            }
            h = (h ^ (unsigned char)c) * 0x100000001b3ull;
        }
        fnv += h;
        frames++;
        bytes += caplen;
    }
    fclose(f);
    printf("KEEL-PCAP %s frames=%" PRIu64 " bytes=%" PRIu64 " fnv=%016" PRIx64 "%s\n", path, frames, bytes, fnv,
           bad ? " truncated" : "");
    fflush(stdout);
}

/* ARM semihosting SYS_EXIT (0x18) with ADP_Stopped_ApplicationExit: QEMU
 * exits with `code`. Returns only when semihosting is unavailable... which in
 * practice means a SIGTRAP/SIGILL instead, so callers block those first. */
static void semihost_exit(int code)
{
#if defined(__aarch64__)
    uint64_t block[2] = {0x20026, (uint64_t)code};
    register uint64_t x0 __asm__("x0") = 0x18;
    register uint64_t *x1 __asm__("x1") = block;
    __asm__ volatile("hlt #0xf000" : "+r"(x0) : "r"(x1) : "memory");
#else
    (void)code;
#endif
}

static void trap_handler(int sig)
{
    (void)sig;
    /* hlt #0xf000 without semihosting: fall back to powering off. */
    sync();
    reboot(RB_POWER_OFF);
    _exit(1);
}

int main(void)
{
    /* The kernel opened /dev/console (from the initramfs) as fds 0-2. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    say("keel e2e init");

    do_mount("proc", "/proc", "proc", NULL);
    do_mount("sysfs", "/sys", "sysfs", NULL);
    do_mount("devtmpfs", "/dev", "devtmpfs", "mode=0755");
    do_mount("tmpfs", "/run", "tmpfs", "mode=0755");
    do_mount("tmpfs", "/tmp", "tmpfs", "mode=1777");
    mkdir("/var", 0755);
    if (symlink("/run", "/var/run") != 0 && errno != EEXIST) say("symlink /var/run: %s", strerror(errno));

    long want = cmdline_long("keel.hugepages", 64);
    char num[32];
    snprintf(num, sizeof num, "%ld\n", want);
    const char *nr = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
    if (write_file(nr, num) != 0) say("%s: %s", nr, strerror(errno));
    do_mount("hugetlbfs", "/dev/hugepages", "hugetlbfs", "pagesize=2M");
    say("hugepages: %ld of %ld 2 MB pages reserved", read_long(nr), want);

    setenv("PATH", "/bin", 1);
    setenv("HOME", "/", 1);
    setenv("TERM", "dumb", 1);

    int module_failures = load_modules();
    read_program();
    char **argv = keel_argv();
    argv[0] = program;
    printf("[init %7.3f] running", uptime());
    for (char **a = argv; *a; a++) printf(" %s", *a);
    printf(" < %s\n", CONSOLE_SCRIPT);
    fflush(stdout);

    int status = 1;
    pid_t pid = module_failures ? -2 : fork();
    if (pid == 0) {
        int in = open(CONSOLE_SCRIPT, O_RDONLY);
        if (in < 0) in = open("/dev/null", O_RDONLY);
        dup2(in, STDIN_FILENO);
        if (in > STDIN_FILENO) close(in);
        execv(program, argv);
        fprintf(stderr, "init: exec %s: %s\n", program, strerror(errno));
        _exit(127);
    } else if (pid == -2) {
        status = 125;
        say("not running %s: %d module(s) failed to load", program, module_failures);
    } else if (pid < 0) {
        say("fork: %s", strerror(errno));
    } else {
        /* PID 1 also reaps orphans: wait for keel itself. */
        int ws = 0;
        for (;;) {
            pid_t r = waitpid(-1, &ws, 0);
            if (r == pid) break;
            if (r < 0 && errno != EINTR) break;
        }
        if (WIFEXITED(ws)) status = WEXITSTATUS(ws);
        else if (WIFSIGNALED(ws)) status = 128 + WTERMSIG(ws);
    }
    fflush(stdout);
    say("keel finished");
    report_pcap(OUT_PCAP);
    printf("KEEL-EXIT %d\n", status);
    fflush(stdout);
    sync();

    signal(SIGTRAP, trap_handler);
    signal(SIGILL, trap_handler);
    semihost_exit(status);
    reboot(RB_POWER_OFF);
    return status;
}

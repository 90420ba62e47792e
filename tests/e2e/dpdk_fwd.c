/* A minimal static DPDK forwarder: proves the aarch64 static-DPDK recipe and
 * stands in for the firmware in the qemu-system boot rehearsal.
 *
 *   dpdk_fwd [--board qemu-virt] [--exit-when-drained] [--max N] [-- EAL ARGS...]
 *
 * Forwards port 0 -> port 1 (or port 0 -> port 0 with one port). Stops after
 * --max packets, or with --exit-when-drained once port 0 has delivered nothing
 * for a while (a pcap vdev's input is exhausted). Then reads commands from
 * stdin; `show ports` prints a table like the firmware's:
 *
 *   Port  Id  Kind  Role    Link  MTU   Rx-pkts  Rx-bytes  Rx-drop  Tx-pkts  ...
 *   p0    0   dpdk  -       up    1500  100      ...
 *
 * `--board qemu-virt` supplies that board's EAL arguments (real hugepages,
 * two lcores, p0 = net_pcap0 reading /data/in.pcap, p1 = net_pcap1 writing
 * /data/out.pcap).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_version.h>

#define BURST 32

static char *qemu_virt_eal[] = {
    "-l", "0-1", "--file-prefix", "keel", "--no-telemetry",
    "--vdev", "net_pcap0,rx_pcap=/data/in.pcap",
    "--vdev", "net_pcap1,tx_pcap=/data/out.pcap",
};

static int port_init(uint16_t port, struct rte_mempool *pool)
{
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    int rc = rte_eth_dev_configure(port, 1, 1, &conf);
    if (rc == 0) rc = rte_eth_rx_queue_setup(port, 0, 512, rte_eth_dev_socket_id(port), NULL, pool);
    if (rc == 0) rc = rte_eth_tx_queue_setup(port, 0, 512, rte_eth_dev_socket_id(port), NULL);
    if (rc == 0) rc = rte_eth_dev_start(port);
    if (rc != 0) fprintf(stderr, "dpdk_fwd: port %u init failed: %s\n", port, rte_strerror(-rc));
    return rc;
}

static void show_ports(uint16_t nports)
{
    /* Same columns as the firmware's `show ports` (cli/console.cpp). */
    printf("%-4s  %-2s  %-4s  %-6s  %-4s  %-4s  %-7s  %-8s  %-7s  %-7s  %-8s  %-7s  %s\n", "Port", "Id", "Kind",
           "Role", "Link", "MTU", "Rx-pkts", "Rx-bytes", "Rx-drop", "Tx-pkts", "Tx-bytes", "Tx-drop", "Xconnect");
    for (uint16_t p = 0; p < nports; p++) {
        struct rte_eth_stats st;
        char name[8];
        memset(&st, 0, sizeof st);
        rte_eth_stats_get(p, &st);
        uint16_t mtu = 0;
        (void)rte_eth_dev_get_mtu(p, &mtu);
        snprintf(name, sizeof name, "p%u", p);
        printf("%-4s  %-2u  %-4s  %-6s  %-4s  %-4u  %-7" PRIu64 "  %-8" PRIu64 "  %-7" PRIu64 "  %-7" PRIu64
               "  %-8" PRIu64 "  %-7" PRIu64 "  %s\n",
               name, p, "dpdk", "-", "up", (unsigned)mtu, st.ipackets, st.ibytes, st.imissed + st.ierrors, st.opackets,
               st.obytes, st.oerrors, p == 0 && nports > 1 ? "p1" : "-");
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int drained_exit = 0, qemu_virt = 0;
    uint64_t max = 0;
    int eal_argc = 1;
    char *eal_argv[64] = {argv[0]};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--exit-when-drained")) drained_exit = 1;
        else if (!strcmp(argv[i], "--board") && i + 1 < argc) qemu_virt = !strcmp(argv[++i], "qemu-virt");
        else if (!strcmp(argv[i], "--max") && i + 1 < argc) max = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--")) {
            for (i++; i < argc && eal_argc < 63; i++) eal_argv[eal_argc++] = argv[i];
        } else {
            fprintf(stderr, "dpdk_fwd: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (qemu_virt)
        for (size_t i = 0; i < sizeof qemu_virt_eal / sizeof *qemu_virt_eal; i++)
            eal_argv[eal_argc++] = qemu_virt_eal[i];

    printf("dpdk_fwd: %s\n", rte_version());
    fflush(stdout);
    if (rte_eal_init(eal_argc, eal_argv) < 0) {
        fprintf(stderr, "dpdk_fwd: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    uint16_t nports = rte_eth_dev_count_avail();
    printf("dpdk_fwd: %u ports, %u lcores, iova %s\n", nports, rte_lcore_count(),
           rte_eal_iova_mode() == RTE_IOVA_PA ? "PA" : "VA");
    if (nports == 0) return 1;
    struct rte_mempool *pool =
        rte_pktmbuf_pool_create("mbufs", 4095, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
    if (!pool) {
        fprintf(stderr, "dpdk_fwd: mbuf pool: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    for (uint16_t p = 0; p < nports; p++)
        if (port_init(p, pool)) return 1;

    uint16_t out = nports > 1 ? 1 : 0;
    uint64_t fwd = 0, idle = 0;
    struct rte_mbuf *bufs[BURST];
    for (;;) {
        uint16_t n = rte_eth_rx_burst(0, 0, bufs, BURST);
        if (n == 0) {
            if (drained_exit && ++idle > 100000) break;
            continue;
        }
        idle = 0;
        uint16_t sent = rte_eth_tx_burst(out, 0, bufs, n);
        for (uint16_t i = sent; i < n; i++) rte_pktmbuf_free(bufs[i]);
        fwd += sent;
        if (max && fwd >= max) break;
    }
    printf("dpdk_fwd: forwarded %" PRIu64 " packets\n", fwd);

    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        printf("keel> %s\n", line);
        if (!strcmp(line, "show ports")) show_ports(nports);
        else printf("unknown command: %s\n", line);
    }
    fflush(stdout);
    for (uint16_t p = 0; p < nports; p++) {
        rte_eth_dev_stop(p);
        rte_eth_dev_close(p);
    }
    rte_eal_cleanup();
    return 0;
}

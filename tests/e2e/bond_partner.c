/* An independent LACP partner: DPDK's own 802.3ad bonding PMD (net_bonding,
 * mode=4) over the members given as vdevs, driven by a plain loop. Used by
 * tests/integration/test_bond_dpdk_partner.py against keel's bond.
 *
 *   bond_partner [--seconds N] -- EAL ARGS...
 *
 * EAL ARGS must create the members and the bond, e.g.
 *   --vdev net_af_packet0,iface=va0 --vdev net_af_packet1,iface=va1
 *   --vdev net_bonding0,mode=4,slave=net_af_packet0,slave=net_af_packet1
 * (DPDK 22.11 spells the member key `slave=`.)
 *
 * The bonding PMD runs its 802.3ad state machines from an EAL alarm every
 * 100 ms, but it hands LACPDUs to the members only from the application's
 * tx_burst and takes the partner's PDUs out of the members' rx only in
 * rx_burst: the loop calls both continuously (tx_burst with no packets: the
 * PMD still drains its control queue first). Data frames received on the
 * bond are counted and freed. The PMD's own timers are its defaults (DPDK's
 * actor asks for the long timeout: a partner following its timeout bit, as
 * Open vSwitch and keel do, sends every 30 s once negotiated).
 *
 * Output, one line each, flushed:
 *   bond_partner: ready port P members M1,M2 mac XX:..
 *   member M name NAME selected S actor_state 0xAA partner_state 0xPP
 *       partner_sys XX:XX:XX:XX:XX:XX partner_key K partner_port N agg A
 *   rx_data N
 * a `member` block (every member) and `rx_data` every 200 ms, and at exit.
 * Runs until --seconds N (0: until SIGTERM/SIGINT or stdin EOF).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_bond.h>
#include <rte_eth_bond_8023ad.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#define BURST 32

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static void mac_text(const struct rte_ether_addr *a, char *buf, size_t n)
{
    snprintf(buf, n, "%02x:%02x:%02x:%02x:%02x:%02x", a->addr_bytes[0], a->addr_bytes[1], a->addr_bytes[2],
             a->addr_bytes[3], a->addr_bytes[4], a->addr_bytes[5]);
}

static void report(uint16_t bond, const uint16_t *members, int n, uint64_t rx_data)
{
    for (int i = 0; i < n; i++) {
        struct rte_eth_bond_8023ad_slave_info info;
        char name[RTE_ETH_NAME_MAX_LEN] = "?", sys[32];
        memset(&info, 0, sizeof info);
        if (rte_eth_bond_8023ad_slave_info(bond, members[i], &info) != 0) continue;
        rte_eth_dev_get_name_by_port(members[i], name);
        mac_text(&info.partner.system, sys, sizeof sys);
        printf("member %u name %s selected %d actor_state 0x%02x partner_state 0x%02x partner_sys %s "
               "partner_key %u partner_port %u agg %u\n",
               members[i], name, (int)info.selected, info.actor_state, info.partner_state, sys,
               rte_be_to_cpu_16(info.partner.key), rte_be_to_cpu_16(info.partner.port_number),
               info.agg_port_id);
    }
    printf("rx_data %" PRIu64 "\n", rx_data);
    fflush(stdout);
}

static int port_start(uint16_t port, struct rte_mempool *pool)
{
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    int rc = rte_eth_dev_configure(port, 1, 1, &conf);
    if (rc == 0) rc = rte_eth_rx_queue_setup(port, 0, 512, rte_eth_dev_socket_id(port), NULL, pool);
    if (rc == 0) rc = rte_eth_tx_queue_setup(port, 0, 512, rte_eth_dev_socket_id(port), NULL);
    if (rc == 0) rc = rte_eth_dev_start(port);
    if (rc == 0) rc = rte_eth_promiscuous_enable(port);
    if (rc != 0) fprintf(stderr, "bond_partner: port %u: %s\n", port, rte_strerror(-rc));
    return rc;
}

int main(int argc, char **argv)
{
    double seconds = 0;
    int eal_argc = 1;
    char *eal_argv[64] = {argv[0]};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--")) {
            for (i++; i < argc && eal_argc < 63; i++) eal_argv[eal_argc++] = argv[i];
        } else {
            fprintf(stderr, "bond_partner: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    if (rte_eal_init(eal_argc, eal_argv) < 0) {
        fprintf(stderr, "bond_partner: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    uint16_t bond;
    if (rte_eth_dev_get_port_by_name("net_bonding0", &bond) != 0) {
        fprintf(stderr, "bond_partner: no net_bonding0 among the vdevs\n");
        return 1;
    }
    if (rte_eth_bond_mode_get(bond) != BONDING_MODE_8023AD) {
        fprintf(stderr, "bond_partner: net_bonding0 is not mode=4 (802.3ad)\n");
        return 1;
    }
    struct rte_mempool *pool = rte_pktmbuf_pool_create("mbufs", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
    if (!pool) {
        fprintf(stderr, "bond_partner: mbuf pool: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    if (port_start(bond, pool)) return 1;

    uint16_t members[RTE_MAX_ETHPORTS];
    int n = rte_eth_bond_slaves_get(bond, members, RTE_MAX_ETHPORTS);
    if (n < 1) {
        fprintf(stderr, "bond_partner: the bond has no members\n");
        return 1;
    }
    struct rte_ether_addr mac;
    char mtext[32];
    rte_eth_macaddr_get(bond, &mac);
    mac_text(&mac, mtext, sizeof mtext);
    printf("bond_partner: ready port %u members", bond);
    for (int i = 0; i < n; i++) printf("%s%u", i ? "," : " ", members[i]);
    printf(" mac %s\n", mtext);
    fflush(stdout);

    if (seconds <= 0) fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    uint64_t hz = rte_get_tsc_hz(), start = rte_get_tsc_cycles(), next = start;
    uint64_t rx_data = 0;
    struct rte_mbuf *bufs[BURST];
    while (!stop) {
        uint16_t got = rte_eth_rx_burst(bond, 0, bufs, BURST);
        rx_data += got;
        for (uint16_t i = 0; i < got; i++) rte_pktmbuf_free(bufs[i]);
        (void)rte_eth_tx_burst(bond, 0, bufs, 0);
        uint64_t now = rte_get_tsc_cycles();
        if (now >= next) {
            report(bond, members, n, rx_data);
            next = now + hz / 5;
            if (seconds > 0 && (double)(now - start) / hz >= seconds) break;
            if (seconds <= 0) {
                char c;
                ssize_t r = read(0, &c, 1);
                if (r == 0) break; /* stdin closed: the driver is gone */
            }
        }
        if (got == 0) rte_delay_us_sleep(200);
    }
    report(bond, members, n, rx_data);
    rte_eth_dev_stop(bond);
    rte_eth_dev_close(bond);
    rte_eal_cleanup();
    return 0;
}

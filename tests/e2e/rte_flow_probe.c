/* rte_flow on net_tap, for real: the guest program of tests/e2e/qemu_rte_flow.py.
 *
 *   rte_flow_probe [--frames N] [--port-a A] [--port-b B] [--port-c C] [--no-rss]
 *                  -- EAL ARGS
 *
 * Runs inside the qemu-virt guest (Debian's arm64 kernel, with cls_flower,
 * sch_multiq, sch_ingress, act_gact, act_skbedit, act_mirred, tun, and for
 * the RSS step cls_bpf and act_bpf, loaded by the init). EAL must create a
 * tap: `--vdev net_tap0,iface=dtap0`.
 *
 * What it does, with raw rte_flow calls (the traps are what keel's DPDK
 * backend has to handle; this program learns them, it is not keel):
 *   0. rte_flow_configure (the template API's set-up) between
 *      rte_eth_dev_configure and rte_eth_dev_start answers ENOTSUP (tap has
 *      no such op); on the started port DPDK answers EINVAL before asking the
 *      driver -- mlx5's template API must be configured before the port
 *      starts.
 *   1. port 0 (the tap) with 2 rx queues; the guest kernel sends frames into
 *      dtap0 through an AF_PACKET socket: tun hands them to the PMD's queues.
 *      A baseline round of A/B/C frames shows every frame reaches the PMD.
 *   2. rule DROP:  eth / ipv4 / udp dst A -> drop      (flower + gact shot)
 *      rule QUEUE: eth / ipv4 / udp dst B -> queue 1   (flower + skbedit
 *                                                        queue_mapping 1)
 *   3. traps: rte_flow_validate of a copy of the DROP rule succeeds (tap only
 *      parses); rte_flow_create of that copy is refused by the kernel (flower:
 *      same key in the same priority) and tap reports EEXIST with the message
 *      "overlapping rules or Kernel too old for flower support"; the TC
 *      filter set is unchanged afterwards. COUNT and MARK (partial offload's
 *      action): validate refuses them (ENOTSUP at the action); query answers
 *      ENOSYS (tap has no query op).
 *   4. --frames frames each of UDP dst A, B and C (source ports vary, so the
 *      kernel's tun queue selection spreads C): A never reaches the PMD, B
 *      arrives on queue 1 only, C arrives (on the queues the kernel picks);
 *      the TC filters' action counters (RTM_GETTFILTER dump of dtap0's multiq
 *      root, TCA_ACT_STATS basic) count exactly the A and B frames.
 *   4a. an exact-match rule on the full 5-tuple (MACs, EtherType, IPv4
 *      addresses, protocol, UDP ports: what keel's exact-match offload
 *      installs) drops that one microflow only (TC counts 1); with the IPv4
 *      TTL in the mask tap refuses the ipv4 item; a queue index past the
 *      port's queues is refused at the action.
 *   4b. (unless --no-rss) the RSS trap: eth / ipv4 / udp dst D -> rss(0,1):
 *      validate says 0, create fails (tap loads its eBPF RSS programs through
 *      bpf(2); this kernel's verifier refuses the l3_l4 one with EACCES and
 *      tap reports ENOTSUP "Kernel too old or not configured to support BPF
 *      program loading"), no flower filter appears, D frames still reach the
 *      PMD. And validate is not "parse only" for RSS: rte_flow_validate alone
 *      runs tap's rss_enable, which installs two per-queue `bpf` cls_q
 *      filters on the multiq root that nothing removes (not destroy, not
 *      flush) until the port closes (checked: rss_validate_touches_kernel).
 *      Without cls_bpf/act_bpf even validate fails (ENOSYS, no message).
 *   5. both rules destroyed: A and B reach the PMD again, no flower filter
 *      left.
 * Every check prints `PROBE-CHECK <name> ok|FAIL <detail>`; the last line is
 * `PROBE-RESULT PASS` (exit 0) or `PROBE-RESULT FAIL n=<failed checks>`
 * (exit 1). Other guest traffic (IPv6 is disabled on the tap first) is
 * counted as `other` and ignored.
 */
#define _GNU_SOURCE
#define ALLOW_EXPERIMENTAL_API /* rte_flow_info_get (the template API's entry point) */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_mbuf.h>

#include "tap_probe.h"

static int g_rss = 1;

static const char *flow_error_type(enum rte_flow_error_type t)
{
    switch (t) {
    case RTE_FLOW_ERROR_TYPE_NONE: return "none";
    case RTE_FLOW_ERROR_TYPE_UNSPECIFIED: return "unspecified";
    case RTE_FLOW_ERROR_TYPE_HANDLE: return "handle";
    case RTE_FLOW_ERROR_TYPE_ATTR: return "attr";
    case RTE_FLOW_ERROR_TYPE_ITEM: return "item";
    case RTE_FLOW_ERROR_TYPE_ACTION: return "action";
    default: return "other";
    }
}

/* ---- what the PMD sees ----------------------------------------------------- */

/* Polls both queues until `want` of our frames arrived and then 300 ms of
 * silence (so frames that should not come have had their chance), or 20 s
 * (a deadline for a loaded host, not a timing assertion: the counts decide). */
static void drain(uint16_t port, struct seen *s, uint64_t want)
{
    uint64_t start = now_ns(), last = start;
    for (;;) {
        int got_any = 0;
        for (uint16_t q = 0; q < NB_RXQ; q++) {
            struct rte_mbuf *pkts[32];
            uint16_t n = rte_eth_rx_burst(port, q, pkts, 32);
            for (uint16_t i = 0; i < n; i++) {
                classify_frame(rte_pktmbuf_mtod(pkts[i], const uint8_t *), rte_pktmbuf_data_len(pkts[i]), q, s);
                rte_pktmbuf_free(pkts[i]);
            }
            if (n) got_any = 1;
        }
        uint64_t t = now_ns();
        if (got_any) last = t;
        if (ours(s) >= want && t - last > 300000000ull) return;
        if (t - start > 20000000000ull) return;
        if (!got_any) usleep(1000);
    }
}

/* ---- rte_flow ----------------------------------------------------------- */

struct rule_spec {
    struct rte_flow_attr attr;
    struct rte_flow_item_udp udp_spec, udp_mask;
    struct rte_flow_item items[4];
    struct rte_flow_action_queue queue;
    struct rte_flow_action_count count;
    struct rte_flow_action actions[3];
};

enum rule_kind { RULE_DROP, RULE_QUEUE, RULE_COUNT_DROP };

static void rule_init(struct rule_spec *r, enum rule_kind kind, uint16_t dport, uint16_t queue)
{
    memset(r, 0, sizeof *r);
    r->attr.ingress = 1;
    r->udp_spec.hdr.dst_port = htons(dport);
    r->udp_mask.hdr.dst_port = 0xffff;
    r->items[0].type = RTE_FLOW_ITEM_TYPE_ETH;
    r->items[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
    r->items[2].type = RTE_FLOW_ITEM_TYPE_UDP;
    r->items[2].spec = &r->udp_spec;
    r->items[2].mask = &r->udp_mask;
    r->items[3].type = RTE_FLOW_ITEM_TYPE_END;
    int a = 0;
    if (kind == RULE_COUNT_DROP) r->actions[a++] = (struct rte_flow_action){RTE_FLOW_ACTION_TYPE_COUNT, &r->count};
    if (kind == RULE_QUEUE) {
        r->queue.index = queue;
        r->actions[a++] = (struct rte_flow_action){RTE_FLOW_ACTION_TYPE_QUEUE, &r->queue};
    } else {
        r->actions[a++] = (struct rte_flow_action){RTE_FLOW_ACTION_TYPE_DROP, NULL};
    }
    r->actions[a].type = RTE_FLOW_ACTION_TYPE_END;
}

static void print_error(const char *what, int rc, const struct rte_flow_error *e)
{
    note("%s: rc %d (%s) type %s (%d) message \"%s\"", what, rc, errname(-rc), flow_error_type(e->type),
         (int)e->type, e->message ? e->message : "(none)");
}

/* rte_flow_configure (the template API's set-up) before and after
 * rte_eth_dev_start: DPDK 22.11 refuses it on a started port (EINVAL) before
 * asking the driver; tap has no configure op (ENOTSUP). */
static int g_cfg_before = 1, g_cfg_after = 1;

static int flow_configure(uint16_t port)
{
    struct rte_flow_port_attr pa;
    struct rte_flow_queue_attr qa = {.size = 64};
    const struct rte_flow_queue_attr *qas[1] = {&qa};
    struct rte_flow_error e;
    memset(&pa, 0, sizeof pa);
    memset(&e, 0, sizeof e);
    int rc = rte_flow_configure(port, &pa, 1, qas, &e);
    if (rc) print_error("rte_flow_configure", rc, &e);
    return rc;
}

static int port_setup(uint16_t port, struct rte_mempool *pool)
{
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    int rc = rte_eth_dev_configure(port, NB_RXQ, NB_RXQ, &conf);
    for (uint16_t q = 0; rc == 0 && q < NB_RXQ; q++)
        rc = rte_eth_rx_queue_setup(port, q, 512, rte_eth_dev_socket_id(port), NULL, pool);
    for (uint16_t q = 0; rc == 0 && q < NB_RXQ; q++)
        rc = rte_eth_tx_queue_setup(port, q, 512, rte_eth_dev_socket_id(port), NULL);
    if (rc == 0) g_cfg_before = flow_configure(port);
    if (rc == 0) rc = rte_eth_dev_start(port);
    if (rc == 0) g_cfg_after = flow_configure(port);
    if (rc == 0) rc = rte_eth_promiscuous_enable(port);
    return rc;
}

int main(int argc, char **argv)
{
    int frames = 64;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (!strcmp(argv[i], "--frames") && i + 1 < argc) frames = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--port-a") && i + 1 < argc) g_port_a = (uint16_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--port-b") && i + 1 < argc) g_port_b = (uint16_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--port-c") && i + 1 < argc) g_port_c = (uint16_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-rss")) g_rss = 0;
        else {
            fprintf(stderr, "rte_flow_probe: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    char *eal_argv[64] = {argv[0]};
    int eal_argc = 1;
    for (i++; i < argc && eal_argc < 63; i++) eal_argv[eal_argc++] = argv[i];

    /* No IPv6 autoconf chatter on the tap (it would be counted as `other`). */
    write_proc("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1\n");
    write_proc("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1\n");

    if (rte_eal_init(eal_argc, eal_argv) < 0) {
        printf("PROBE-RESULT FAIL rte_eal_init: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    if (rte_eth_dev_count_avail() < 1) {
        printf("PROBE-RESULT FAIL no port (EAL needs --vdev net_tap0,iface=" IFACE ")\n");
        return 1;
    }
    uint16_t port = 0;
    struct rte_mempool *pool = rte_pktmbuf_pool_create("probe", 4095, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    int rc = pool ? port_setup(port, pool) : -ENOMEM;
    check(rc == 0, "port_setup", "net_tap port 0 with %d rx queues: %s", NB_RXQ, rc ? rte_strerror(-rc) : "started");
    if (rc) goto out;
    struct rte_ether_addr mac;
    rte_eth_macaddr_get(port, &mac);
    memcpy(g_mac, mac.addr_bytes, 6);
    g_ifindex = (int)if_nametoindex(IFACE);
    check(g_cfg_before == -ENOTSUP && g_cfg_after == -EINVAL, "configure_needs_stopped_port",
          "rte_flow_configure before dev_start %d (%s), after %d (%s): a started port is refused before the driver "
          "is asked", g_cfg_before, errname(-g_cfg_before), g_cfg_after, errname(-g_cfg_after));
    check(g_ifindex > 0, "tap_iface", "%s ifindex %d", IFACE, g_ifindex);
    if (g_ifindex <= 0) goto out;
    g_pkt_sock = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    check(g_pkt_sock >= 0, "packet_socket", "AF_PACKET socket: %s", g_pkt_sock >= 0 ? "open" : strerror(errno));
    if (g_pkt_sock < 0) goto out;

    {
        /* Flow API info: net_tap has no rte_flow_info_get (the template API is mlx5's). */
        struct rte_flow_port_info pinfo;
        struct rte_flow_queue_info qinfo;
        struct rte_flow_error err;
        memset(&err, 0, sizeof err);
        int r = rte_flow_info_get(port, &pinfo, &qinfo, &err);
        note("rte_flow_info_get: rc %d (%s)%s%s", r, rte_strerror(-r), err.message ? ": " : "",
             err.message ? err.message : "");
        check(r != 0, "info_get_unsupported", "tap has no template/async API: rc %d (%s)", r, rte_strerror(-r));
    }

    const uint16_t abc[3] = {g_port_a, g_port_b, g_port_c};
    const uint16_t ab[2] = {g_port_a, g_port_b};
    struct tc_filter filt[MAX_FILTERS];

    /* 1. baseline: everything reaches the PMD. */
    struct seen base;
    memset(&base, 0, sizeof base);
    int sent = send_round(frames, abc, 3, 1000);
    drain(port, &base, (uint64_t)sent);
    note("baseline: sent %d; PMD got A %" PRIu64 "/%" PRIu64 " B %" PRIu64 "/%" PRIu64 " C %" PRIu64 "/%" PRIu64
         " (queue 0/1) other %" PRIu64,
         sent, base.a[0], base.a[1], base.b[0], base.b[1], base.c[0], base.c[1], base.other);
    check(sent == 3 * frames && sum(base.a) == (uint64_t)frames && sum(base.b) == (uint64_t)frames &&
              sum(base.c) == (uint64_t)frames,
          "baseline_rx", "without rules all %d frames of A, B and C reach the PMD", frames);
    int n0 = dump_filters("before any rule", filt);

    /* 2. the rules. validate, then create: create is what decides. */
    struct rule_spec drop, queue;
    rule_init(&drop, RULE_DROP, g_port_a, 0);
    rule_init(&queue, RULE_QUEUE, g_port_b, 1);
    struct rte_flow_error err;
    memset(&err, 0, sizeof err);
    rc = rte_flow_validate(port, &drop.attr, drop.items, drop.actions, &err);
    check(rc == 0, "validate_drop", "rc %d", rc);
    struct rte_flow *f_drop = rte_flow_create(port, &drop.attr, drop.items, drop.actions, &err);
    if (!f_drop) print_error("create DROP", -rte_errno, &err);
    check(f_drop != NULL, "create_drop", "eth / ipv4 / udp dst %u -> drop", g_port_a);
    memset(&err, 0, sizeof err);
    struct rte_flow *f_queue = rte_flow_create(port, &queue.attr, queue.items, queue.actions, &err);
    if (!f_queue) print_error("create QUEUE", -rte_errno, &err);
    check(f_queue != NULL, "create_queue", "eth / ipv4 / udp dst %u -> queue 1", g_port_b);
    int n1 = dump_filters("after DROP and QUEUE", filt);
    check(n1 == n0 + 2, "tc_filters_installed", "%d filters before, %d after", n0, n1);

    /* 3. the traps. */
    struct rule_spec dup;
    rule_init(&dup, RULE_DROP, g_port_a, 0);
    memset(&err, 0, sizeof err);
    rc = rte_flow_validate(port, &dup.attr, dup.items, dup.actions, &err);
    check(rc == 0, "trap_validate_only_parses", "validate of a duplicate of DROP: rc %d (the kernel is not asked)", rc);
    memset(&err, 0, sizeof err);
    struct rte_flow *f_dup = rte_flow_create(port, &dup.attr, dup.items, dup.actions, &err);
    int dup_errno = f_dup ? 0 : rte_errno;
    if (!f_dup) print_error("create duplicate DROP", -dup_errno, &err);
    check(!f_dup && dup_errno == EEXIST && err.message && strstr(err.message, "overlapping"),
          "trap_refused_is_eexist", "kernel refused the duplicate: rte_errno %d (%s), \"%s\"", dup_errno,
          errname(dup_errno), err.message ? err.message : "");
    if (f_dup) rte_flow_destroy(port, f_dup, &err);
    int n2 = dump_filters("after the refused duplicate", filt);
    check(n2 == n1, "trap_refused_changes_nothing", "%d filters before, %d after", n1, n2);

    struct rule_spec cnt;
    rule_init(&cnt, RULE_COUNT_DROP, g_port_c, 0);
    memset(&err, 0, sizeof err);
    rc = rte_flow_validate(port, &cnt.attr, cnt.items, cnt.actions, &err);
    if (rc) print_error("validate COUNT+DROP", rc, &err);
    check(rc != 0, "count_unsupported", "COUNT action: validate rc %d (%s)", rc, rc ? rte_strerror(-rc) : "accepted");
    {
        /* Partial offload's rule (MARK + QUEUE): tap has no MARK. */
        struct rule_spec mk;
        rule_init(&mk, RULE_QUEUE, g_port_c, 0);
        struct rte_flow_action_mark mark = {.id = 42};
        mk.actions[1] = mk.actions[0];
        mk.actions[0] = (struct rte_flow_action){RTE_FLOW_ACTION_TYPE_MARK, &mark};
        mk.actions[2].type = RTE_FLOW_ACTION_TYPE_END;
        memset(&err, 0, sizeof err);
        rc = rte_flow_validate(port, &mk.attr, mk.items, mk.actions, &err);
        if (rc) print_error("validate MARK+QUEUE", rc, &err);
        check(rc == -ENOTSUP && err.type == RTE_FLOW_ERROR_TYPE_ACTION, "mark_unsupported",
              "MARK action: validate rc %d (%s), error at %s", rc, rc ? rte_strerror(-rc) : "accepted",
              flow_error_type(err.type));
    }
    if (f_drop) {
        struct rte_flow_query_count qc;
        memset(&qc, 0, sizeof qc);
        struct rte_flow_action qa[2] = {{RTE_FLOW_ACTION_TYPE_COUNT, NULL}, {RTE_FLOW_ACTION_TYPE_END, NULL}};
        memset(&err, 0, sizeof err);
        rc = rte_flow_query(port, f_drop, qa, &qc, &err);
        if (rc) print_error("query COUNT of DROP", rc, &err);
        check(rc != 0, "query_unsupported", "rte_flow_query(COUNT): rc %d (%s)", rc,
              rc ? rte_strerror(-rc) : "answered");
    }

    /* 4. the rules acting. */
    struct seen with;
    memset(&with, 0, sizeof with);
    sent = send_round(frames, abc, 3, 2000);
    drain(port, &with, (uint64_t)(2 * frames));
    note("with rules: sent %d; PMD got A %" PRIu64 "/%" PRIu64 " B %" PRIu64 "/%" PRIu64 " C %" PRIu64 "/%" PRIu64
         " (queue 0/1) other %" PRIu64,
         sent, with.a[0], with.a[1], with.b[0], with.b[1], with.c[0], with.c[1], with.other);
    check(sum(with.a) == 0, "drop_acts", "A (udp dst %u): %" PRIu64 " of %d reached the PMD", g_port_a, sum(with.a),
          frames);
    check(with.b[1] == (uint64_t)frames && with.b[0] == 0, "queue_acts",
          "B (udp dst %u): queue 0 %" PRIu64 ", queue 1 %" PRIu64 " of %d", g_port_b, with.b[0], with.b[1], frames);
    check(sum(with.c) == (uint64_t)frames, "unmatched_rss", "C (udp dst %u): %" PRIu64 " of %d, queue 0 %" PRIu64
          ", queue 1 %" PRIu64 " (the kernel's tun queue selection)", g_port_c, sum(with.c), frames, with.c[0], with.c[1]);
    int n3 = dump_filters("after the round with rules", filt);
    const struct tc_filter *fa = find_filter(filt, n3, g_port_a), *fb = find_filter(filt, n3, g_port_b);
    check(fa && !strcmp(fa->act, "gact") && fa->packets == (uint64_t)frames, "tc_counts_drop",
          "flower udp_dst %u action %s packets %" PRIu64 " (sent %d)", g_port_a, fa ? fa->act : "-",
          fa ? fa->packets : 0, frames);
    check(fb && !strcmp(fb->act, "skbedit") && fb->packets == (uint64_t)frames, "tc_counts_queue",
          "flower udp_dst %u action %s packets %" PRIu64 " (sent %d)", g_port_b, fb ? fb->act : "-",
          fb ? fb->packets : 0, frames);

    /* 4a. an exact-match rule on the full 5-tuple (keel's exact-match
     * offload): only udp src 7000 is dropped. With the IPv4 TTL in the mask
     * tap refuses the ipv4 item. A queue index past the port's is refused. */
    {
        struct rte_flow_item_eth es, em;
        struct rte_flow_item_ipv4 is, im;
        struct rte_flow_item_udp us, um;
        memset(&es, 0, sizeof es), memset(&em, 0, sizeof em);
        memset(&is, 0, sizeof is), memset(&im, 0, sizeof im);
        memset(&us, 0, sizeof us), memset(&um, 0, sizeof um);
        memcpy(es.hdr.dst_addr.addr_bytes, g_mac, 6);
        const uint8_t src[6] = {0x02, 0, 0, 0, 0, 0x01};
        memcpy(es.hdr.src_addr.addr_bytes, src, 6);
        es.hdr.ether_type = htons(0x0800);
        memset(em.hdr.dst_addr.addr_bytes, 0xff, 6);
        memset(em.hdr.src_addr.addr_bytes, 0xff, 6);
        em.hdr.ether_type = 0xffff;
        is.hdr.src_addr = htonl(0x0a000001), is.hdr.dst_addr = htonl(0x0a000002), is.hdr.next_proto_id = 17;
        im.hdr.src_addr = im.hdr.dst_addr = 0xffffffff, im.hdr.next_proto_id = 0xff;
        us.hdr.src_port = htons(7000), us.hdr.dst_port = htons(g_port_c);
        um.hdr.src_port = um.hdr.dst_port = 0xffff;
        struct rte_flow_item items[4] = {{RTE_FLOW_ITEM_TYPE_ETH, &es, NULL, &em},
                                         {RTE_FLOW_ITEM_TYPE_IPV4, &is, NULL, &im},
                                         {RTE_FLOW_ITEM_TYPE_UDP, &us, NULL, &um},
                                         {RTE_FLOW_ITEM_TYPE_END, NULL, NULL, NULL}};
        struct rte_flow_action acts[2] = {{RTE_FLOW_ACTION_TYPE_DROP, NULL}, {RTE_FLOW_ACTION_TYPE_END, NULL}};
        struct rte_flow_attr attr = {.ingress = 1};
        memset(&err, 0, sizeof err);
        struct rte_flow *fx = rte_flow_create(port, &attr, items, acts, &err);
        if (!fx) print_error("create exact", -rte_errno, &err);
        check(fx != NULL, "exact_create", "eth dst/src/type / ipv4 src/dst/proto / udp src/dst, all masked: %s",
              fx ? "created" : "refused");
        struct seen ex;
        memset(&ex, 0, sizeof ex);
        const uint16_t c1[1] = {g_port_c};
        sent = send_round(frames, c1, 1, 7000);
        drain(port, &ex, (uint64_t)(frames - 1));
        int ne = dump_filters("with the exact-match rule", filt);
        uint64_t hits = 0;
        for (int k = 0; k < ne; k++)
            if (filt[k].l4_dst == g_port_c && !strcmp(filt[k].act, "gact")) hits = filt[k].packets;
        check(sum(ex.c) == (uint64_t)(frames - 1) && hits == 1, "exact_acts",
              "udp src 7000..%d: %" PRIu64 " of %d reached the PMD, the rule counted %" PRIu64, 7000 + frames - 1,
              sum(ex.c), frames, hits);
        if (fx) rte_flow_destroy(port, fx, &err);
        im.hdr.time_to_live = 0xff;
        memset(&err, 0, sizeof err);
        fx = rte_flow_create(port, &attr, items, acts, &err);
        if (!fx) print_error("create exact + ttl", -rte_errno, &err);
        check(!fx && err.type == RTE_FLOW_ERROR_TYPE_ITEM && err.cause == &items[1], "exact_ttl_refused",
              "ipv4 ttl masked: %s (cause: item %d)", fx ? "created!" : "refused",
              err.cause == &items[1] ? 1 : -1);
        if (fx) rte_flow_destroy(port, fx, &err);
        struct rte_flow_action_queue q5 = {.index = 5};
        struct rte_flow_action qa[2] = {{RTE_FLOW_ACTION_TYPE_QUEUE, &q5}, {RTE_FLOW_ACTION_TYPE_END, NULL}};
        im.hdr.time_to_live = 0;
        memset(&err, 0, sizeof err);
        fx = rte_flow_create(port, &attr, items, qa, &err);
        if (!fx) print_error("create queue 5", -rte_errno, &err);
        check(!fx && err.type == RTE_FLOW_ERROR_TYPE_ACTION && err.cause == &qa[0], "queue_out_of_range",
              "queue 5 of %d: %s", NB_RXQ, fx ? "created!" : "refused at action 0");
        if (fx) rte_flow_destroy(port, fx, &err);
    }

    /* 4b. RSS (the third trap): tap implements it with eBPF programs (cls_bpf
     * + act_bpf) it loads through bpf(2) when the first RSS rule arrives. */
    if (g_rss) {
        static struct rte_flow_item_udp uspec, umask;
        uspec.hdr.dst_port = htons(g_port_d);
        umask.hdr.dst_port = 0xffff;
        struct rte_flow_item items[4] = {{RTE_FLOW_ITEM_TYPE_ETH, NULL, NULL, NULL},
                                         {RTE_FLOW_ITEM_TYPE_IPV4, NULL, NULL, NULL},
                                         {RTE_FLOW_ITEM_TYPE_UDP, &uspec, NULL, &umask},
                                         {RTE_FLOW_ITEM_TYPE_END, NULL, NULL, NULL}};
        static uint16_t queues[NB_RXQ] = {0, 1};
        struct rte_flow_action_rss rss;
        memset(&rss, 0, sizeof rss);
        rss.types = RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP;
        rss.queue_num = NB_RXQ;
        rss.queue = queues;
        struct rte_flow_action acts[2] = {{RTE_FLOW_ACTION_TYPE_RSS, &rss}, {RTE_FLOW_ACTION_TYPE_END, NULL}};
        struct rte_flow_attr attr = {.ingress = 1};
        memset(&err, 0, sizeof err);
        int vr = rte_flow_validate(port, &attr, items, acts, &err);
        if (vr) print_error("validate RSS", vr, &err);
        int nv = dump_filters("after validate of the RSS rule", filt);
        note("rte_flow_validate of an RSS rule left %d bpf filter(s) on %s", count_kind(filt, nv, "bpf"), IFACE);
        check(count_kind(filt, nv, "bpf") > 0 && count_kind(filt, nv, "flower") == n1, "rss_validate_touches_kernel",
              "validate alone installed %d bpf filter(s) (tap's rss_enable), flower filters %d (were %d)",
              count_kind(filt, nv, "bpf"), count_kind(filt, nv, "flower"), n1);
        memset(&err, 0, sizeof err);
        struct rte_flow *f_rss = rte_flow_create(port, &attr, items, acts, &err);
        int cr = f_rss ? 0 : -rte_errno;
        if (!f_rss) print_error("create RSS", cr, &err);
        int nr = dump_filters("after the RSS rule", filt);
        const uint16_t d1p[1] = {g_port_d};
        struct seen rs;
        memset(&rs, 0, sizeof rs);
        uint16_t saved_c = g_port_c;
        g_port_c = g_port_d; /* count D frames as C */
        sent = send_round(frames, d1p, 1, 4000);
        drain(port, &rs, (uint64_t)sent);
        g_port_c = saved_c;
        note("RSS round: sent %d D frames, PMD got queue 0 %" PRIu64 " queue 1 %" PRIu64, sent, rs.c[0], rs.c[1]);
        check(vr == 0 && cr != 0, "rss_validate_lies",
              "RSS udp dst %u -> queues 0,1: validate %d, create %d (%s): \"%s\"", g_port_d, vr, cr, errname(-cr),
              err.message ? err.message : "");
        check(count_kind(filt, nr, "flower") == n1 && find_filter(filt, nr, g_port_d) == NULL,
              "rss_refused_no_flower", "no flower filter for udp dst %u; %d flower filters (were %d)", g_port_d,
              count_kind(filt, nr, "flower"), n1);
        note("after the refused create %d bpf filter(s) (tap's per-queue cls_q programs, from validate) stay on %s",
             count_kind(filt, nr, "bpf"), IFACE);
        check(sum(rs.c) == (uint64_t)frames, "rss_refused_still_forwards",
              "D frames reach the PMD: %" PRIu64 " of %d (queue 0 %" PRIu64 ", queue 1 %" PRIu64 ")", sum(rs.c), frames,
              rs.c[0], rs.c[1]);
        if (f_rss) rte_flow_destroy(port, f_rss, &err);
    }

    /* 5. destroyed: back to the PMD. */
    memset(&err, 0, sizeof err);
    int d1 = f_drop ? rte_flow_destroy(port, f_drop, &err) : -1;
    int d2 = f_queue ? rte_flow_destroy(port, f_queue, &err) : -1;
    check(d1 == 0 && d2 == 0, "destroy", "rc %d, %d", d1, d2);
    int n4 = dump_filters("after destroy", filt);
    check(count_kind(filt, n4, "flower") == n0, "tc_filters_removed", "%d flower filters (%d before any rule)",
          count_kind(filt, n4, "flower"), n0);
    struct seen after;
    memset(&after, 0, sizeof after);
    sent = send_round(frames, ab, 2, 3000);
    drain(port, &after, (uint64_t)sent);
    check(sum(after.a) == (uint64_t)frames && sum(after.b) == (uint64_t)frames, "after_destroy_rx",
          "A %" PRIu64 " and B %" PRIu64 " of %d reach the PMD again", sum(after.a), sum(after.b), frames);

out:
    if (probe_failures) printf("PROBE-RESULT FAIL n=%d\n", probe_failures);
    else printf("PROBE-RESULT PASS\n");
    fflush(stdout);
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
    rte_eal_cleanup();
    return probe_failures ? 1 : 0;
}

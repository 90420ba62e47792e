/* See tap_probe.h. */
#define _GNU_SOURCE
#include "tap_probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/gen_stats.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/rtnetlink.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int probe_failures;

void check(int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void check(int ok, const char *name, const char *fmt, ...)
{
    va_list ap;
    printf("PROBE-CHECK %s %s ", name, ok ? "ok" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
    if (!ok) probe_failures++;
}

void note(const char *fmt, ...)
{
    va_list ap;
    printf("probe: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *errname(int e)
{
    switch (e) {
    case 0: return "0";
    case EEXIST: return "EEXIST";
    case ENOTSUP: return "ENOTSUP";
    case ENOSYS: return "ENOSYS";
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case ENOENT: return "ENOENT";
    case EIO: return "EIO";
    case ERANGE: return "ERANGE";
    default: return "errno";
    }
}

void write_proc(const char *path, const char *v)
{
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(v, f);
    fclose(f);
}

/* ---- frames ------------------------------------------------------------ */

static uint16_t ip_csum(const uint8_t *h, int len)
{
    uint32_t s = 0;
    for (int i = 0; i < len; i += 2) s += (uint32_t)(h[i] << 8 | h[i + 1]);
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

/* Ethernet / IPv4 10.0.0.1 -> 10.0.0.2 / UDP sport -> dport, 64-byte frame
 * (60 + the FCS the kernel doesn't send). */
int make_frame(uint8_t *f, const uint8_t dst[6], uint16_t sport, uint16_t dport)
{
    return make_frame_kind(f, dst, FRAME_UDP4, sport, dport);
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}

uint16_t g_vlan_tci = 0x2042;
const uint8_t kProbeSrcMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
const uint8_t kProbeIp6Src[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0x0a};
const uint8_t kProbeIp6Dst[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 3, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0x0b};

int make_frame_kind(uint8_t *f, const uint8_t dst[6], enum frame_kind kind, uint16_t sport, uint16_t dport)
{
    const int len = kind == FRAME_UDP6 ? 14 + 40 + 8 + 10 : 60;
    memset(f, 0, (size_t)len);
    memcpy(f, dst, 6);
    memcpy(f + 6, kProbeSrcMac, 6);
    uint8_t *l3 = f + 14;
    if (kind == FRAME_VLAN_UDP4) {
        put16(f + 12, 0x8100);
        put16(f + 14, g_vlan_tci);
        l3 = f + 18;
    }
    put16(l3 - 2, kind == FRAME_UDP6 ? 0x86dd : 0x0800);
    const uint8_t proto = kind == FRAME_TCP4 ? 6 : 17;
    uint8_t *l4;
    uint16_t l4len;
    if (kind == FRAME_UDP6) {
        l3[0] = 0x60;
        l4len = (uint16_t)(len - 14 - 40);
        put16(l3 + 4, l4len);
        l3[6] = proto, l3[7] = 64;
        memcpy(l3 + 8, kProbeIp6Src, 16);
        memcpy(l3 + 24, kProbeIp6Dst, 16);
        l4 = l3 + 40;
    } else {
        const uint16_t tot = (uint16_t)(len - (l3 - f));
        l3[0] = 0x45;
        put16(l3 + 2, tot);
        l3[6] = 0x40; /* DF */
        l3[8] = 64, l3[9] = proto;
        l3[12] = 10, l3[13] = 0, l3[14] = 0, l3[15] = 1;
        l3[16] = 10, l3[17] = 0, l3[18] = 0, l3[19] = 2;
        put16(l3 + 10, ip_csum(l3, 20));
        l4 = l3 + 20;
        l4len = (uint16_t)(tot - 20);
    }
    put16(l4, sport);
    put16(l4 + 2, dport);
    if (kind == FRAME_TCP4) {
        l4[12] = 0x50; /* data offset 5 */
        l4[13] = 0x10; /* ACK */
        put16(l4 + 14, 1024);
    } else {
        put16(l4 + 4, l4len);
    }
    /* Checksums of L4 are left 0: nothing on the way checks them. */
    return len;
}

uint16_t g_port_a = 5001, g_port_b = 5002, g_port_c = 5003, g_port_d = 5004;

void classify_frame(const uint8_t *p, uint32_t len, uint16_t q, struct seen *s)
{
    uint16_t dport = 0;
    if (q >= NB_RXQ) q = NB_RXQ - 1;
    uint32_t off = 12;
    if (len >= 18 && p[off] == 0x81 && p[off + 1] == 0x00) off += 4; /* one VLAN tag */
    const uint16_t type = len >= off + 2 ? (uint16_t)(p[off] << 8 | p[off + 1]) : 0;
    off += 2;
    if (type == 0x0800 && len >= off + 24 && (p[off] >> 4) == 4 && (p[off + 9] == 17 || p[off + 9] == 6)) {
        const uint32_t l4 = off + (uint32_t)(p[off] & 0xf) * 4;
        if (len >= l4 + 4) dport = (uint16_t)(p[l4 + 2] << 8 | p[l4 + 3]);
    } else if (type == 0x86dd && len >= off + 44 && (p[off + 6] == 17 || p[off + 6] == 6)) {
        dport = (uint16_t)(p[off + 42] << 8 | p[off + 43]);
    }
    if (dport == g_port_a) s->a[q]++;
    else if (dport == g_port_b) s->b[q]++;
    else if (dport == g_port_c) s->c[q]++;
    else s->other++;
}

uint64_t ours(const struct seen *s)
{
    uint64_t t = 0;
    for (int q = 0; q < NB_RXQ; q++) t += s->a[q] + s->b[q] + s->c[q];
    return t;
}

int g_pkt_sock = -1;
int g_ifindex;
uint8_t g_mac[6];

/* Sends n frames of each of the given destination ports into dtap0 from the
 * kernel side; source ports vary so tun spreads them over its queues. */
int send_round(int n, const uint16_t *dports, int ndports, uint16_t sport_base)
{
    return send_round_kind(FRAME_UDP4, n, dports, ndports, sport_base);
}

int send_round_kind(enum frame_kind kind, int n, const uint16_t *dports, int ndports, uint16_t sport_base)
{
    struct sockaddr_ll to;
    memset(&to, 0, sizeof to);
    to.sll_family = AF_PACKET;
    to.sll_ifindex = g_ifindex;
    to.sll_halen = 6;
    /* skb->protocol: the frame's outer EtherType, as a stack would set it. */
    to.sll_protocol = htons(kind == FRAME_VLAN_UDP4 ? ETH_P_8021Q : kind == FRAME_UDP6 ? ETH_P_IPV6 : ETH_P_IP);
    memcpy(to.sll_addr, g_mac, 6);
    int sent = 0;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < ndports; d++) {
            uint8_t f[128];
            int len = make_frame_kind(f, g_mac, kind, (uint16_t)(sport_base + i), dports[d]);
            if (sendto(g_pkt_sock, f, (size_t)len, 0, (struct sockaddr *)&to, sizeof to) == len) sent++;
            else note("sendto %s: %s", IFACE, strerror(errno));
        }
    return sent;
}

uint64_t sum(const uint64_t *v)
{
    uint64_t t = 0;
    for (int q = 0; q < NB_RXQ; q++) t += v[q];
    return t;
}

/* ---- TC filters through netlink ------------------------------------------- */


static int nl_sock(void)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -1;
    struct sockaddr_nl sa;
    memset(&sa, 0, sizeof sa);
    sa.nl_family = AF_NETLINK;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void parse_act_stats(struct rtattr *stats, int len, struct tc_filter *f)
{
    for (struct rtattr *a = stats; RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type == TCA_STATS_BASIC && RTA_PAYLOAD(a) >= sizeof(struct gnet_stats_basic)) {
            struct gnet_stats_basic b;
            memcpy(&b, RTA_DATA(a), sizeof b);
            f->packets += b.packets;
            f->bytes += b.bytes;
        }
    }
}

static void parse_actions(struct rtattr *acts, int len, struct tc_filter *f)
{
    /* TCA_FLOWER_ACT: nested array indexed 1..N; each: TCA_ACT_KIND, TCA_ACT_STATS. */
    for (struct rtattr *slot = acts; RTA_OK(slot, len); slot = RTA_NEXT(slot, len)) {
        int l2 = (int)RTA_PAYLOAD(slot);
        for (struct rtattr *a = RTA_DATA(slot); RTA_OK(a, l2); a = RTA_NEXT(a, l2)) {
            if (a->rta_type == TCA_ACT_KIND && !f->act[0])
                snprintf(f->act, sizeof f->act, "%s", (const char *)RTA_DATA(a));
            else if (a->rta_type == TCA_ACT_STATS)
                parse_act_stats(RTA_DATA(a), (int)RTA_PAYLOAD(a), f);
        }
    }
}

/* Dumps the filters of ifindex under parent; returns how many, -1 on error. */
int tc_dump(int ifindex, uint32_t parent, struct tc_filter *out, int max)
{
    int fd = nl_sock();
    if (fd < 0) return -1;
    struct {
        struct nlmsghdr nh;
        struct tcmsg t;
    } req;
    memset(&req, 0, sizeof req);
    req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct tcmsg));
    req.nh.nlmsg_type = RTM_GETTFILTER;
    req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.nh.nlmsg_seq = 1;
    req.t.tcm_family = AF_UNSPEC;
    req.t.tcm_ifindex = ifindex;
    req.t.tcm_parent = parent;
    if (send(fd, &req, req.nh.nlmsg_len, 0) < 0) {
        close(fd);
        return -1;
    }
    int n = 0, done = 0;
    static char buf[65536];
    while (!done) {
        ssize_t len = recv(fd, buf, sizeof buf, 0);
        if (len <= 0) {
            n = -1;
            break;
        }
        for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (unsigned)len); nh = NLMSG_NEXT(nh, len)) {
            if (nh->nlmsg_type == NLMSG_DONE) {
                done = 1;
                break;
            }
            if (nh->nlmsg_type == NLMSG_ERROR) {
                struct nlmsgerr *e = NLMSG_DATA(nh);
                note("RTM_GETTFILTER: %s", strerror(-e->error));
                n = -1;
                done = 1;
                break;
            }
            if (nh->nlmsg_type != RTM_NEWTFILTER) continue;
            struct tcmsg *t = NLMSG_DATA(nh);
            if (t->tcm_handle == 0) continue; /* the per-priority chain head, not a filter */
            if (n >= max) continue;
            struct tc_filter *f = &out[n];
            memset(f, 0, sizeof *f);
            f->handle = t->tcm_handle;
            f->prio = t->tcm_info >> 16;
            f->l4_dst = -1;
            f->vlan_id = -1;
            f->protocol = ntohs((uint16_t)(t->tcm_info & 0xffff));
            int alen = (int)(nh->nlmsg_len - NLMSG_LENGTH(sizeof *t));
            for (struct rtattr *a = (struct rtattr *)((char *)t + NLMSG_ALIGN(sizeof *t)); RTA_OK(a, alen);
                 a = RTA_NEXT(a, alen)) {
                if (a->rta_type == TCA_KIND) snprintf(f->kind, sizeof f->kind, "%s", (const char *)RTA_DATA(a));
                if (a->rta_type != TCA_OPTIONS) continue;
                int olen = (int)RTA_PAYLOAD(a);
                for (struct rtattr *o = RTA_DATA(a); RTA_OK(o, olen); o = RTA_NEXT(o, olen)) {
                    if ((o->rta_type == TCA_FLOWER_KEY_UDP_DST || o->rta_type == TCA_FLOWER_KEY_TCP_DST) &&
                        RTA_PAYLOAD(o) >= 2) {
                        uint16_t v;
                        memcpy(&v, RTA_DATA(o), 2);
                        f->l4_dst = ntohs(v);
                    } else if (o->rta_type == TCA_FLOWER_KEY_VLAN_ID && RTA_PAYLOAD(o) >= 2) {
                        uint16_t v;
                        memcpy(&v, RTA_DATA(o), 2); /* host order */
                        f->vlan_id = v;
                    } else if (o->rta_type == TCA_FLOWER_KEY_ETH_TYPE && RTA_PAYLOAD(o) >= 2) {
                        uint16_t v;
                        memcpy(&v, RTA_DATA(o), 2);
                        f->eth_type = ntohs(v);
                    } else if (o->rta_type == TCA_FLOWER_KEY_VLAN_ETH_TYPE && RTA_PAYLOAD(o) >= 2) {
                        uint16_t v;
                        memcpy(&v, RTA_DATA(o), 2);
                        f->vlan_eth_type = ntohs(v);
                    } else if (o->rta_type == TCA_FLOWER_ACT) {
                        parse_actions(RTA_DATA(o), (int)RTA_PAYLOAD(o), f);
                    }
                }
            }
            n++;
        }
    }
    close(fd);
    return n;
}


int dump_filters(const char *when, struct tc_filter *f)
{
    int n = tc_dump(g_ifindex, TAP_MULTIQ_PARENT, f, MAX_FILTERS);
    note("TC filters on %s parent 1: (%s): %d", IFACE, when, n);
    for (int i = 0; i < n; i++)
        note("  filter %s handle 0x%x prio %u protocol 0x%04x eth_type 0x%04x vlan_id %d vlan_eth_type 0x%04x "
             "l4_dst %d action %s packets %" PRIu64 " bytes %" PRIu64,
             f[i].kind, f[i].handle, f[i].prio, f[i].protocol, f[i].eth_type, f[i].vlan_id, f[i].vlan_eth_type,
             f[i].l4_dst, f[i].act[0] ? f[i].act : "-", f[i].packets, f[i].bytes);
    return n;
}

const struct tc_filter *find_filter(const struct tc_filter *f, int n, int l4_dst)
{
    for (int i = 0; i < n; i++)
        if (f[i].l4_dst == l4_dst) return &f[i];
    return NULL;
}

int count_kind(const struct tc_filter *f, int n, const char *kind)
{
    int c = 0;
    for (int i = 0; i < n; i++) c += !strcmp(f[i].kind, kind);
    return c;
}


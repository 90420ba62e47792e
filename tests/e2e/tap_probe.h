/* Helpers shared by the guest programs of tests/e2e/qemu_rte_flow.py
 * (rte_flow_probe.c: raw rte_flow; hal_flow_probe.cpp: keel's hal facade):
 * PROBE-CHECK output, test frames sent into the tap from the kernel side
 * through an AF_PACKET socket, and the tap's TC filters with their action
 * counters read back through netlink (RTM_GETTFILTER dump, TCA_ACT_STATS).
 * C, so both programs use it; not thread-safe (one probe thread). */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IFACE "dtap0"
#define NB_RXQ 2
#define MAX_FILTERS 32

/* The tap PMD puts rte_flow rules on dtap0's egress (kernel view): its multiq
 * root qdisc, handle 1: (MULTIQ_MAJOR_HANDLE in tap_tcmsgs.h). */
#define TAP_MULTIQ_PARENT ((1u << 16) | 0u)

/* Failed checks so far. */
extern int probe_failures;
void check(int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t now_ns(void);
const char *errname(int e);
/* Writes v to a /proc file (best effort). */
void write_proc(const char *path, const char *v);

/* Destination UDP ports of the frame classes A (drop rule), B (queue rule),
 * C (no rule), D (the RSS rule). */
extern uint16_t g_port_a, g_port_b, g_port_c, g_port_d;

/* What the PMD received, per rx queue, by L4 destination port (UDP or TCP,
 * over IPv4 or IPv6, untagged or with one VLAN tag). */
struct seen {
    uint64_t a[NB_RXQ], b[NB_RXQ], c[NB_RXQ], other;
};
void classify_frame(const uint8_t *p, uint32_t len, uint16_t q, struct seen *s);
uint64_t ours(const struct seen *s);
uint64_t sum(const uint64_t *v);

/* The tap: AF_PACKET socket, ifindex and the port's MAC (set by the probe). */
extern int g_pkt_sock;
extern int g_ifindex;
extern uint8_t g_mac[6];
/* Test frames: Ethernet from kProbeSrcMac to dst; IPv4 10.0.0.1 -> 10.0.0.2
 * or IPv6 kProbeIp6Src -> kProbeIp6Dst; UDP or TCP sport -> dport; VLAN:
 * one 802.1Q tag g_vlan_tci. make_frame() is FRAME_UDP4 (60 bytes). */
enum frame_kind { FRAME_UDP4, FRAME_TCP4, FRAME_UDP6, FRAME_VLAN_UDP4 };
extern uint16_t g_vlan_tci; /* the tag of FRAME_VLAN_UDP4 frames; default 0x2042 (PCP 1, VID 66) */
extern const uint8_t kProbeSrcMac[6];
extern const uint8_t kProbeIp6Src[16], kProbeIp6Dst[16];
int make_frame(uint8_t *f, const uint8_t dst[6], uint16_t sport, uint16_t dport);
int make_frame_kind(uint8_t *f, const uint8_t dst[6], enum frame_kind kind, uint16_t sport, uint16_t dport);
/* Sends n frames of each of the given destination ports into dtap0 from the
 * kernel side; returns how many were sent. */
int send_round(int n, const uint16_t *dports, int ndports, uint16_t sport_base);
int send_round_kind(enum frame_kind kind, int n, const uint16_t *dports, int ndports, uint16_t sport_base);

struct tc_filter {
    uint32_t handle, prio;
    char kind[16];   /* "flower" */
    char act[16];    /* first action's kind: gact, skbedit, ... */
    int l4_dst;      /* flower udp_dst or tcp_dst; -1: not matched */
    int vlan_id;     /* flower vlan_id; -1: not matched */
    uint16_t protocol, eth_type, vlan_eth_type; /* TC protocol (tcm_info), flower keys; 0: none */
    uint64_t packets, bytes;
};

/* Dumps the filters of ifindex under parent; returns how many, -1 on error. */
int tc_dump(int ifindex, uint32_t parent, struct tc_filter *out, int max);
/* tc_dump of dtap0's multiq root, printed. */
int dump_filters(const char *when, struct tc_filter *f);
const struct tc_filter *find_filter(const struct tc_filter *f, int n, int l4_dst);
int count_kind(const struct tc_filter *f, int n, const char *kind);

#ifdef __cplusplus
}
#endif

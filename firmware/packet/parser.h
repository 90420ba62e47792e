// The packet parser: frame bytes + metadata -> flow key (a Miniflow), header
// offsets and the EMC/SMC hash, for one packet or a burst of up to 32.
//
// What it extracts follows Open vSwitch's miniflow_extract() (lib/flow.c),
// written into keel's word map (flow/flow_key.h) in ascending word order with
// flow::MiniflowBuilder — no FlowKey is ever filled and nothing is zeroed
// beyond the words pushed:
//
//   0-7    tunnel metadata           decapsulated packets only (TunnelMetadata)
//   48, 49 skb_priority/pkt_mark, dp_hash      only when non-zero
//   50     in_port, recirc_id        always
//   59-60  dl_dst, dl_src, dl_type   any frame of at least 14 bytes
//   61     vlans[0..1]               up to the VLAN limit of tags (0x8100 / 0x88a8), CFI set = present
//   64     nw_src, nw_dst            IPv4; ARP spa/tpa
//   65-68  ipv6_src, ipv6_dst        IPv6
//   69     label, frag, tos, ttl, proto   IPv4/IPv6; ARP: opcode in nw_proto
//   70-71  nd_target                 ICMPv6 NS/NA
//   72     arp_sha / nd_sll, tcp_flags   ARP, TCP, NS/NA (tcp_flags = ND option type, as OVS)
//   73     arp_tha / nd_tll          ARP, NS/NA
//   74     tp_src, tp_dst            TCP, UDP, SCTP ports; ICMP/ICMPv6 type, code
//
// VLAN stacks follow Open vSwitch's parse_vlan() under its `vlan-limit`
// (other_config; `set vlan-limit` here): only 0x8100 and 0x88a8 are TPIDs;
// at most `vlan_limit` tags are keyed (default 1, as OVS; 0 = no limit,
// i.e. the two the key holds; above 2 = 2), and the EtherType after them —
// possibly the TPID of a tag not parsed — is dl_type. So with the default a
// QinQ or double-0x8100 frame keys its outer tag and dl_type = the inner
// TPID, and nothing above L2 is parsed. A tag cut short (fewer than 4 bytes
// of it plus 2 of EtherType left) is not keyed: dl_type stays its TPID and
// the frame is malformed.
//
// Bad input. The parser never reads past `len`. A frame it cannot parse
// completely is *malformed*: the key holds what was parsed before the fault
// and nothing after (e.g. an IPv4 header whose total length runs past the
// frame leaves L2 only; a TCP header with a bad data offset leaves L2+L3 and
// no L4 words), the functions return false, ParsedPacket::malformed is set
// and parse_burst() counts it. Malformed is not "drop": like OVS, the
// datapath classifies the packet by the partial key. Unknown EtherTypes and
// IP protocols are not malformed — there is simply nothing more to parse.
// Malformed cases: frame < 14 bytes (a runt: metadata-only key; the PMD
// drops runts before parsing, as OVS's datapath, see datapath/pmd.h); a
// VLAN tag without its next EtherType;
// ARP shorter than 28 bytes; IPv4 shorter than 20, IHL < 5, IHL past the
// frame, total length past the frame or < IHL; IPv6 shorter than 40, payload
// length past the frame, an extension header running off the end; TCP < 20
// bytes, data offset < 5 or past the datagram; UDP < 8; SCTP < 12; ICMP < 8;
// ICMPv6 < 8; NS/NA without a whole target, an option of length 0 or past
// the end, or a repeated link-layer option (then, as OVS, target and
// addresses are dropped from the key).
//
// Hash (ParsedPacket::hash, for EMC and SMC): the NIC's RSS hash when the
// packet has one (hal::Packet::has_rss_hash()) and it describes these
// headers — i.e. the packet is neither recirculated (recirc_id 0) nor
// decapsulated; otherwise flow::miniflow_hash(key). (The NIC hashed the
// outer headers: every inner flow of a tunnel would share one EMC bucket,
// and a recirculated packet would collide with its first pass. OVS mixes
// the recirculation depth in and resets the RSS hash on tunnel pop.) dpcls
// computes its own masked hashes; this one only picks cache buckets.
//
// Cost: the common shapes (untagged or one-tag Ethernet II, IPv4 without
// fragmentation or IPv6 without extension headers, UDP or TCP, no tunnel)
// take a specialized path that is checked against the generic one; see
// parser.cpp. Figures and the command that made them: tests/bench/RESULTS.md
// ("Parser"); 64-byte IPv4/UDP, parse + miniflow + software hash in bursts
// of 32, is about 11-17 ns per packet on the 2-core bench VM.
//
// Thread-safety: the parse functions are pure (they read the packet and
// metadata, write only `out`), so any thread may call them on packets it
// owns. A ParserCounters has one writer, the PMD that owns it (parse_burst
// adds once per burst); other threads read it with relaxed loads.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "flow/miniflow.h"
#include "keel/hal/packet.h"
#include "packet/headers.h"
#include "packet/packet_metadata.h"

namespace keel::packet {

// Where the headers start, in bytes from the start of the frame
// (hal::Packet::data()), so that actions rewrite fields without parsing
// again. kNone where the packet has no such header or the parser stopped
// before it.
struct LayerOffsets {
  static constexpr uint16_t kNone = 0xffff;

  uint16_t l2 = kNone;       // Ethernet header: 0 for any frame of >= 14 bytes
  uint16_t l2_5 = kNone;     // first VLAN tag (12), kNone when untagged
  uint16_t l3 = kNone;       // after the EtherType (and LLC/SNAP): IPv4/IPv6/ARP/... header
  uint16_t l4 = kNone;       // IP: after the IPv4 header + options / IPv6 header + extension headers
  uint16_t payload = kNone;  // after the TCP (with options), UDP, SCTP, ICMP or ICMPv6 header
  uint16_t l2_pad = 0;       // bytes after the IP datagram (Ethernet padding / trailer)

  bool operator==(const LayerOffsets&) const = default;
};

// One parsed packet: what EMC, SMC and dpcls look up, and what an upcall
// hands to translation (key and hash, never parsed twice).
struct alignas(64) ParsedPacket {
  uint32_t hash;   // EMC/SMC hash: RSS or miniflow_hash (see above)
  bool malformed;  // the key holds only what could be parsed
  LayerOffsets ofs;
  flow::Miniflow key;
};
static_assert(sizeof(ParsedPacket) <= size_t{6} * 64,
              "a burst of 32 ParsedPackets stays within 12 KiB of PMD scratch");

// Per-PMD parser statistics.
//
// Thread-safety: one writer (the owning PMD) adds once per burst with a
// relaxed load + store (no read-modify-write needed: nobody else writes);
// any thread reads with relaxed loads. Values are monotonic.
struct alignas(64) ParserCounters {
  std::atomic<uint64_t> packets{0};    // parsed
  std::atomic<uint64_t> malformed{0};  // of which malformed (partial key)
  std::atomic<uint64_t> sw_hashes{0};  // of which hashed in software (no usable RSS hash)

  struct Snapshot {
    uint64_t packets, malformed, sw_hashes;
  };
  Snapshot read() const noexcept {
    return {packets.load(std::memory_order_relaxed), malformed.load(std::memory_order_relaxed),
            sw_hashes.load(std::memory_order_relaxed)};
  }
  // Owner thread only.
  void add(uint64_t n, uint64_t bad, uint64_t sw) noexcept {
    packets.store(packets.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    malformed.store(malformed.load(std::memory_order_relaxed) + bad, std::memory_order_relaxed);
    sw_hashes.store(sw_hashes.load(std::memory_order_relaxed) + sw, std::memory_order_relaxed);
  }
};

// The VLAN limit Open vSwitch's vlan-limit defaults to (LEGACY_MAX_VLAN_HEADERS).
inline constexpr unsigned kDefaultVlanLimit = 1;

// How many tags a limit keys: 0 (no limit) and anything above the key's
// kMaxVlanTags mean kMaxVlanTags, as OVS's flow_limit_vlans().
constexpr unsigned vlan_tags(unsigned vlan_limit) {
  return vlan_limit == 0 || vlan_limit > kMaxVlanTags ? kMaxVlanTags : vlan_limit;
}

// Frames longer than this are parsed over their first kMaxParsedLen bytes
// (headers are always there), so every offset fits a uint16_t.
inline constexpr uint32_t kMaxParsedLen = 0xfff0;

// Parses `len` bytes at `frame` with metadata `md` into `key` and `ofs`.
// Returns false when the frame is malformed. Never reads outside
// [frame, frame + len). For the slow path (trace, tests) and the functions
// below; no hash.
bool parse_frame(const uint8_t* frame, uint32_t len, const PacketMetadata& md, flow::Miniflow& key,
                 LayerOffsets& ofs, unsigned vlan_limit = kDefaultVlanLimit) noexcept;

// Parses one packet with explicit metadata (recirculated or decapsulated
// packets), fills out.key, out.ofs, out.malformed and out.hash. Returns
// !out.malformed.
bool parse(const hal::Packet& p, const PacketMetadata& md, ParsedPacket& out,
           unsigned vlan_limit = kDefaultVlanLimit) noexcept;

// Parses one packet as received: metadata from the packet
// (PacketMetadata::of(p): in_port, recirc_id, pkt_mark, dp_hash; no tunnel).
bool parse(const hal::Packet& p, ParsedPacket& out, unsigned vlan_limit = kDefaultVlanLimit) noexcept;

// The PMD's entry points: parse a burst (at most hal::kMaxBurst packets;
// out.size() >= pkts.size()) into out[i] for pkts[i], add the burst to
// `counters`, and return how many were malformed. Per-packet work is
// inlined; one call per burst.
//   - rx path: metadata from each packet (as parse(p, out));
//   - recirculation path: md[i] for pkts[i] (md.size() >= pkts.size()).
// Every entry point takes the VLAN limit (see above; the PMD passes the
// datapath's, read once per burst).
unsigned parse_burst(std::span<hal::Packet* const> pkts, std::span<ParsedPacket> out,
                     ParserCounters& counters, unsigned vlan_limit = kDefaultVlanLimit) noexcept;
unsigned parse_burst(std::span<hal::Packet* const> pkts, std::span<const PacketMetadata> md,
                     std::span<ParsedPacket> out, ParserCounters& counters,
                     unsigned vlan_limit = kDefaultVlanLimit) noexcept;

}  // namespace keel::packet

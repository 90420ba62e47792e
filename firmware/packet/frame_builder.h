// FrameBuilder — writes a frame header by header into a fixed buffer:
// Ethernet (+ VLAN tags, 802.3/LLC-SNAP), ARP, IPv4, IPv6 (+ extension
// headers), TCP, UDP, SCTP, ICMP, ICMPv6/ND, payload.
//
// For code that needs well-formed frames off the fast path: unit tests,
// fuzz seeds, benchmarks, and control-path tools (trace of a described
// packet). Not for the datapath: tunnel push uses precomputed header
// templates. No allocation: the frame lives in the builder (kMaxFrame
// bytes); a write past the end is dropped and sets overflowed().
//
// Lengths are filled in by finish(): the IPv4 total length and header
// checksum, the IPv6 payload length and the UDP length of the last header
// of each kind, computed from where the frame ends. A test that wants a bad
// length overwrites it afterwards with put16()/put8().
//
// Thread-safety: a plain value type.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>

#include "flow/flow_key.h"
#include "packet/headers.h"

namespace keel::packet {

class FrameBuilder {
 public:
  static constexpr uint32_t kMaxFrame = 2048;
  static constexpr uint32_t kNone = 0xffffffff;

  // --- raw bytes ---
  FrameBuilder& u8(uint8_t v) {
    if (len_ < kMaxFrame)
      buf_[len_++] = v;
    else
      overflowed_ = true;
    return *this;
  }
  FrameBuilder& u16(uint16_t v) { return u8(static_cast<uint8_t>(v >> 8)).u8(static_cast<uint8_t>(v)); }
  FrameBuilder& u32(uint32_t v) { return u16(static_cast<uint16_t>(v >> 16)).u16(static_cast<uint16_t>(v)); }
  FrameBuilder& bytes(const uint8_t* p, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) u8(p[i]);
    return *this;
  }
  FrameBuilder& bytes(std::initializer_list<uint8_t> b) {
    for (uint8_t v : b) u8(v);
    return *this;
  }
  FrameBuilder& fill(uint32_t n, uint8_t v = 0) {
    for (uint32_t i = 0; i < n; ++i) u8(v);
    return *this;
  }
  // Pads with zeros up to n bytes (e.g. the 60-byte Ethernet minimum).
  FrameBuilder& pad_to(uint32_t n) { return fill(n > len_ ? n - len_ : 0); }

  // Overwrites bytes already written (host-order value, written big-endian).
  void put8(uint32_t off, uint8_t v) {
    if (off < len_) buf_[off] = v;
  }
  void put16(uint32_t off, uint16_t v) {
    put8(off, static_cast<uint8_t>(v >> 8));
    put8(off + 1, static_cast<uint8_t>(v));
  }

  // --- L2 ---
  FrameBuilder& eth(const flow::EthAddr& dst, const flow::EthAddr& src) {
    return bytes(dst.b, 6).bytes(src.b, 6);
  }
  FrameBuilder& eth(const flow::EthAddr& dst, const flow::EthAddr& src, uint16_t type) {
    return eth(dst, src).ethertype(type);
  }
  FrameBuilder& vlan(uint16_t tci, uint16_t tpid = kEthTypeVlan) { return u16(tpid).u16(tci); }
  FrameBuilder& ethertype(uint16_t type) { return u16(type); }
  // 802.3 length field + LLC/SNAP header carrying `type` under `oui`.
  FrameBuilder& llc_snap(uint16_t length, uint16_t type, uint32_t oui = 0) {
    u16(length).u8(kLlcSapSnap).u8(kLlcSapSnap).u8(kLlcControlUi);
    return u8(static_cast<uint8_t>(oui >> 16))
        .u8(static_cast<uint8_t>(oui >> 8))
        .u8(static_cast<uint8_t>(oui))
        .u16(type);
  }

  // --- L3 ---
  FrameBuilder& arp(uint16_t op, const flow::EthAddr& sha, uint32_t spa, const flow::EthAddr& tha,
                    uint32_t tpa) {
    u16(kArpHrdEthernet).u16(kEthTypeIpv4).u8(6).u8(4).u16(op);
    return bytes(sha.b, 6).u32(spa).bytes(tha.b, 6).u32(tpa);
  }

  struct Ipv4Opts {
    uint8_t tos = 0;
    uint8_t ttl = 64;
    uint16_t id = 0;
    uint16_t frag_off = 0;     // flags + offset, host order (e.g. kIpv4MoreFragments | 100)
    uint8_t option_words = 0;  // 32-bit words of options (NOPs) after the 20 bytes
  };
  FrameBuilder& ipv4(uint32_t src, uint32_t dst, uint8_t proto) { return ipv4(src, dst, proto, Ipv4Opts{}); }
  FrameBuilder& ipv4(uint32_t src, uint32_t dst, uint8_t proto, const Ipv4Opts& o) {
    ipv4_ = len_;
    u8(static_cast<uint8_t>(0x45 + o.option_words)).u8(o.tos).u16(0).u16(o.id).u16(o.frag_off);
    u8(o.ttl).u8(proto).u16(0).u32(src).u32(dst);
    return fill(o.option_words * 4u, 1);  // NOP options
  }

  struct Ipv6Opts {
    uint8_t tclass = 0;
    uint32_t flow_label = 0;
    uint8_t hop_limit = 64;
  };
  FrameBuilder& ipv6(const flow::In6Addr& src, const flow::In6Addr& dst, uint8_t next) {
    return ipv6(src, dst, next, Ipv6Opts{});
  }
  FrameBuilder& ipv6(const flow::In6Addr& src, const flow::In6Addr& dst, uint8_t next, const Ipv6Opts& o) {
    ipv6_ = len_;
    u32((6u << 28) | (uint32_t{o.tclass} << 20) | (o.flow_label & kIpv6FlowLabelMask));
    u16(0).u8(next).u8(o.hop_limit);
    return bytes(src.b, 16).bytes(dst.b, 16);
  }
  // Hop-by-hop, routing or destination options: (len_units + 1) * 8 bytes.
  FrameBuilder& ipv6_ext(uint8_t next, uint8_t len_units = 0) {
    u8(next).u8(len_units);
    return fill(6 + len_units * 8u);
  }
  // Authentication header: (len_units + 2) * 4 bytes.
  FrameBuilder& ipv6_ah(uint8_t next, uint8_t len_units = 1) {
    u8(next).u8(len_units);
    return fill((len_units + 2u) * 4 - 2);
  }
  // Fragment header; `offset` in 8-byte units.
  FrameBuilder& ipv6_frag(uint8_t next, uint16_t offset, bool more, uint32_t id = 1) {
    u8(next).u8(0).u16(static_cast<uint16_t>((offset << 3) | (more ? 1 : 0)));
    return u32(id);
  }

  // --- L4 ---
  FrameBuilder& udp(uint16_t sport, uint16_t dport) {
    udp_ = len_;
    return u16(sport).u16(dport).u16(0).u16(0);
  }
  // flags: kTcp* bits (12 bits); data_offset in 32-bit words (options are NOPs).
  FrameBuilder& tcp(uint16_t sport, uint16_t dport, uint16_t flags, uint8_t data_offset = 5) {
    u16(sport).u16(dport).u32(1).u32(0);
    u16(static_cast<uint16_t>((data_offset << 12) | (flags & kTcpFlagsMask))).u16(65535).u16(0).u16(0);
    return fill(data_offset > 5 ? (data_offset - 5u) * 4 : 0, 1);
  }
  FrameBuilder& sctp(uint16_t sport, uint16_t dport) { return u16(sport).u16(dport).u32(7).u32(0); }
  FrameBuilder& icmp(uint8_t type, uint8_t code) { return u8(type).u8(code).u16(0).u32(0); }
  FrameBuilder& icmp6(uint8_t type, uint8_t code, uint32_t data = 0) {
    return u8(type).u8(code).u16(0).u32(data);
  }
  FrameBuilder& nd_target(const flow::In6Addr& t) { return bytes(t.b, 16); }
  FrameBuilder& nd_ll_option(uint8_t type, const flow::EthAddr& mac) {
    return u8(type).u8(1).bytes(mac.b, 6);
  }

  FrameBuilder& payload(uint32_t n, uint8_t v = 0xab) { return fill(n, v); }

  // Fills the length fields (and the IPv4 header checksum) from the current
  // end of the frame. Call once, after the last byte of the IP datagram and
  // before any Ethernet padding.
  FrameBuilder& finish() {
    if (ipv4_ != kNone && ipv4_ + 20 <= len_) {
      put16(ipv4_ + 2, static_cast<uint16_t>(len_ - ipv4_));
      const uint32_t ihl = (buf_[ipv4_] & 0x0fu) * 4;
      uint32_t sum = 0;
      for (uint32_t i = 0; i < ihl && ipv4_ + i + 1 < len_; i += 2)
        if (i != 10) sum += (uint32_t{buf_[ipv4_ + i]} << 8) | buf_[ipv4_ + i + 1];
      while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
      put16(ipv4_ + 10, static_cast<uint16_t>(~sum));
    }
    if (ipv6_ != kNone && ipv6_ + 40 <= len_) put16(ipv6_ + 4, static_cast<uint16_t>(len_ - ipv6_ - 40));
    if (udp_ != kNone && udp_ + 8 <= len_) put16(udp_ + 4, static_cast<uint16_t>(len_ - udp_));
    return *this;
  }

  const uint8_t* data() const { return buf_.data(); }
  uint32_t size() const { return len_; }
  std::span<const uint8_t> span() const { return {buf_.data(), len_}; }
  bool overflowed() const { return overflowed_; }
  // Where the last IPv4 / IPv6 / UDP header starts (kNone if none).
  uint32_t ipv4_offset() const { return ipv4_; }
  uint32_t ipv6_offset() const { return ipv6_; }
  uint32_t udp_offset() const { return udp_; }

 private:
  std::array<uint8_t, kMaxFrame> buf_{};
  uint32_t len_ = 0;
  uint32_t ipv4_ = kNone, ipv6_ = kNone, udp_ = kNone;
  bool overflowed_ = false;
};

}  // namespace keel::packet

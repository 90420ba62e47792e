// The built-in traffic sample (sample_traffic.h), built by constexpr code.
//
// Thread-safety: immutable data.
#include "sample_traffic.h"

namespace keel::hal::sim {

namespace {

constexpr unsigned kEth = 14, kIp = 20, kUdp = 8;

// RFC 1071 one's-complement sum over 16-bit big-endian words.
constexpr uint32_t sum16(const uint8_t* p, unsigned n, uint32_t acc = 0) {
  for (unsigned i = 0; i + 1 < n; i += 2) acc += uint32_t(p[i] << 8 | p[i + 1]);
  if (n & 1) acc += uint32_t(p[n - 1] << 8);
  return acc;
}
constexpr uint16_t fold(uint32_t acc) {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(~acc & 0xffff);
}

constexpr void put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}

constexpr SampleFrame make_frame(unsigned index) {
  SampleFrame f{};
  uint8_t* b = f.data();
  constexpr uint8_t dst[6] = {0x02, 0, 0, 0, 0, 0x02};
  constexpr uint8_t src[6] = {0x02, 0, 0, 0, 0, 0x01};
  for (unsigned i = 0; i < 6; ++i) b[i] = dst[i], b[6 + i] = src[i];
  put16(b + 12, 0x0800);

  uint8_t* ip = b + kEth;
  ip[0] = 0x45;                                     // version 4, IHL 5
  put16(ip + 2, uint16_t(kSampleFrameLen - kEth));  // total length 50
  put16(ip + 4, uint16_t(index));                   // identification
  put16(ip + 6, 0x4000);                            // DF
  ip[8] = 64;                                       // TTL
  ip[9] = 17;                                       // UDP
  constexpr uint8_t sip[4] = {10, 0, 0, 1}, dip[4] = {10, 0, 0, 2};
  for (unsigned i = 0; i < 4; ++i) ip[12 + i] = sip[i], ip[16 + i] = dip[i];
  put16(ip + 10, fold(sum16(ip, kIp)));

  uint8_t* udp = ip + kIp;
  const auto udp_len = uint16_t(kSampleFrameLen - kEth - kIp);  // 30
  put16(udp, uint16_t(kSampleBaseSport + index % kSampleFlows));
  put16(udp + 2, kSampleDport);
  put16(udp + 4, udp_len);
  uint8_t* payload = udp + kUdp;
  payload[0] = 'k', payload[1] = 'e', payload[2] = 'e', payload[3] = 'l';
  payload[4] = uint8_t(index);
  // Pseudo-header: addresses, protocol, UDP length; then header + payload.
  uint32_t acc = sum16(ip + 12, 8) + 17 + udp_len;
  uint16_t c = fold(sum16(udp, udp_len, acc));
  put16(udp + 6, c == 0 ? 0xffff : c);  // 0 means "no checksum" in UDP over IPv4
  return f;
}

constexpr std::array<SampleFrame, kSampleFrames> make_table() {
  std::array<SampleFrame, kSampleFrames> t{};
  for (unsigned i = 0; i < kSampleFrames; ++i) t[i] = make_frame(i);
  return t;
}

constexpr std::array<SampleFrame, kSampleFrames> kTable = make_table();

// A correct header sums (checksum included) to 0xffff, i.e. folds to 0.
static_assert(fold(sum16(kTable[0].data() + kEth, kIp)) == 0, "IPv4 header checksum");
static_assert(fold(sum16(kTable[63].data() + kEth, kIp)) == 0, "IPv4 header checksum");
static_assert(fold(sum16(kTable[5].data() + kEth + kIp, 30, sum16(kTable[5].data() + 26, 8) + 17 + 30)) == 0,
              "UDP checksum over the pseudo-header");

}  // namespace

std::span<const SampleFrame, kSampleFrames> sample_traffic() { return kTable; }

}  // namespace keel::hal::sim

// keel's Lacp (ofproto/lacp.h) as one side of a bond whose members are
// Open vSwitch netdev-dummy stream sockets: the helper of
// tests/conformance/lacp, which puts it against Open vSwitch 3.1's own LACP.
//
//   lacp_peer SOCK1 SOCK2 [fast|slow] [active|passive]
//
// Connects to both sockets (an Open vSwitch dummy port's
// options:pstream=punix:SOCK), member i on SOCKi. netdev-dummy frames a
// packet on the stream as a 2-byte big-endian length and the frame. Then
// reads commands on stdin, answering each with its output and a line "ok":
//   step MS     the clock moves MS ms: frames received so far go to
//               process_packet (slow-protocol ones), then run(), and the
//               PDUs it returns go out on their sockets
//   cut M       member M's cable is cut: its socket is closed and its
//               carrier goes down (the link-state poll's report)
//   show        format_lacp_show then format_lacp_stats
//   status      "negotiated" or "configured", then per member its index,
//               may_enable (0/1)
// Nothing here is timing-dependent: the clock is the one the driver moves.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "ofproto/lacp.h"

using namespace keel;
using namespace keel::ofproto;

namespace {

struct Member {
  int fd = -1;
  std::vector<uint8_t> rx;
};

int connect_unix(const char* path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

bool write_all(int fd, const std::vector<uint8_t>& b) {
  size_t off = 0;
  while (off < b.size()) {
    ssize_t n = write(fd, b.data() + off, b.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      usleep(1000);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: lacp_peer SOCK1 SOCK2 [fast|slow] [active|passive]\n");
    return 2;
  }
  std::vector<Member> members(2);
  for (int i = 0; i < 2; ++i) {
    members[i].fd = connect_unix(argv[1 + i]);
    if (members[i].fd < 0) {
      std::fprintf(stderr, "lacp_peer: connect %s: %s\n", argv[1 + i], std::strerror(errno));
      return 1;
    }
  }
  LacpSettings s;
  s.name = "keel0";
  s.sys_id = flow::EthAddr{{0x02, 0x6b, 0x65, 0x65, 0x6c, 0x00}};
  s.fast = argc > 3 && std::string(argv[3]) == "fast";
  s.active = !(argc > 4 && std::string(argv[4]) == "passive");
  std::vector<LacpMemberSettings> ms(2);
  for (size_t i = 0; i < 2; ++i) {
    ms[i].name = "k" + std::to_string(i + 1);
    ms[i].port_id = static_cast<uint16_t>(i + 1);
    ms[i].mac = flow::EthAddr{{0x02, 0x6b, 0, 0, 0, static_cast<uint8_t>(i + 1)}};
  }
  Lacp lacp(s, ms);
  uint64_t now = 0;

  std::string cmd;
  while (std::cin >> cmd) {
    if (cmd == "step") {
      uint64_t ms_ = 0;
      std::cin >> ms_;
      now += ms_;
      for (size_t i = 0; i < members.size(); ++i) {
        Member& m = members[i];
        if (m.fd < 0) continue;
        uint8_t buf[4096];
        ssize_t n;
        while ((n = read(m.fd, buf, sizeof buf)) > 0) m.rx.insert(m.rx.end(), buf, buf + n);
        while (m.rx.size() >= 2) {
          const size_t len = static_cast<size_t>(m.rx[0] << 8 | m.rx[1]);
          if (m.rx.size() < 2 + len) break;
          std::vector<uint8_t> f(m.rx.begin() + 2, m.rx.begin() + 2 + static_cast<long>(len));
          m.rx.erase(m.rx.begin(), m.rx.begin() + 2 + static_cast<long>(len));
          // What translation sends to the slow path: EtherType 0x8809.
          if (f.size() >= 14 && f[12] == 0x88 && f[13] == 0x09) lacp.process_packet(i, f, now);
        }
      }
      std::vector<LacpTx> tx;
      lacp.run(now, tx);
      for (const LacpTx& t : tx) {
        if (members[t.member].fd < 0) continue;
        std::vector<uint8_t> out{static_cast<uint8_t>(t.frame.size() >> 8), static_cast<uint8_t>(t.frame.size())};
        out.insert(out.end(), t.frame.begin(), t.frame.end());
        if (!write_all(members[t.member].fd, out)) std::fprintf(stderr, "lacp_peer: write: %s\n", std::strerror(errno));
      }
    } else if (cmd == "cut") {
      size_t m = 0;
      std::cin >> m;
      if (m < members.size() && members[m].fd >= 0) {
        close(members[m].fd);
        members[m].fd = -1;
        lacp.set_carrier(m, false, now);
      }
    } else if (cmd == "show") {
      const LacpView v = lacp.view();
      std::cout << format_lacp_show(v) << format_lacp_stats(v);
    } else if (cmd == "status") {
      std::cout << (lacp.status() == LacpStatus::negotiated ? "negotiated" : "configured") << "\n";
      for (size_t i = 0; i < members.size(); ++i) std::cout << i << " " << (lacp.may_enable(i) ? 1 : 0) << "\n";
    } else {
      std::cout << "unknown command " << cmd << "\n";
    }
    std::cout << "ok" << std::endl;
  }
  return 0;
}

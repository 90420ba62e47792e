// The TAP port: a Linux TAP device, so the host's own stack (ping, iperf,
// tcpdump) can talk through keel without a NIC.
//
// Open: /dev/net/tun with O_NONBLOCK, TUNSETIFF with IFF_TAP | IFF_NO_PI
// (frames without the 4-byte packet-info prefix; the device is created if
// absent), then IFF_UP through SIOCSIFFLAGS on an AF_INET datagram socket.
// Closing the descriptor removes a device that TUNSETIFF created.
//
// Cost: a TAP device hands over one frame per read()/write(), so rx and tx
// make one syscall per packet (about 1-2 us each) — inherent to TAP, and why
// this port is for functional tests and demos, not for throughput. rx keeps
// one spare buffer between polls so an empty poll costs one read() that
// returns EAGAIN and no alloc/free. tx stops at the first write() that fails
// (EAGAIN: the kernel queue is full; or the device went away); Port::tx()
// releases and counts the rest as tx_dropped.
//
// MTU: set_mtu() sets the kernel device's MTU too (SIOCSIFMTU, as Open
// vSwitch's netdev-linux does for a tap), so the host stack sends frames up
// to it. rx reads into a buffer that holds the MTU's largest frame (MTU +
// 14 + two VLAN tags): a standard buffer up to MTU 2030, a jumbo one above
// (sim/pool.h); the spare is swapped when the MTU outgrows it. A longer
// frame than the buffer (the device's MTU changed behind keel's back) is
// truncated by the kernel on read.
//
// Thread-safety: rx state (the spare buffer) belongs to the thread polling
// rx queue 0; tx uses only the descriptor, and read()/write() on one
// descriptor from two threads is safe.
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "core/sys_error.h"
#include "sim_ports.h"

namespace keel::hal::sim {

namespace {

class TapPort final : public Port, public SimNicPort {
 public:
  TapPort(const PortSpec& spec, std::shared_ptr<Pool> pool, int fd)
      : Port(spec.name, "tap"), pool_(std::move(pool)), fd_(fd), ifname_(spec.ifname) {
    set_queues(1, 1);
  }
  ~TapPort() override {
    detach_from_nic();
    if (spare_) hal::release(spare_);
    ::close(fd_);
  }

  LinkState link() const override { return sim_link(*this); }
  std::string describe() const override { return "tap " + ifname_; }

  FlowEngine* flow_engine() override { return nic_engine(); }
  // One write(2) per frame is atomic against tx_burst()'s on another thread.
  uint16_t hw_tx(std::span<Packet* const> pkts) noexcept override { return tx_burst(0, pkts); }

 protected:
  Status apply_mtu(uint32_t mtu) override {
    int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
      return error(Errc::unavailable,
                   "tap '" + ifname_ + "': socket for interface ioctls: " + errno_text(errno));
    ifreq ifr;
    std::memset(&ifr, 0, sizeof ifr);
    std::memcpy(ifr.ifr_name, ifname_.data(), ifname_.size());
    ifr.ifr_mtu = static_cast<int>(mtu);
    const int rc = ::ioctl(sock, SIOCSIFMTU, &ifr);
    const int e = errno;
    ::close(sock);
    if (rc < 0)
      return error(Errc::unavailable,
                   "tap '" + ifname_ + "': setting the MTU (SIOCSIFMTU): " + errno_text(e));
    return {};
  }

  uint16_t rx_burst(uint16_t, std::span<Packet*> out) noexcept override {
    uint16_t n = 0;
    while (n < out.size()) {
      // Relaxed: the control thread may raise the MTU; the next poll sees it.
      const uint32_t need = mtu() + kEthHeaderLen + 2 * kVlanHeaderLen;
      if (spare_ && spare_->tailroom() < need) [[unlikely]] {
        hal::release(spare_);
        spare_ = nullptr;
      }
      if (!spare_ && !(spare_ = pool_->alloc(need))) break;  // pool empty: the frame waits in the kernel
      ssize_t got = ::read(fd_, spare_->data(), spare_->tailroom());
      if (got <= 0) break;  // EAGAIN: nothing queued (or the device is gone)
      spare_->set_len(static_cast<uint32_t>(got));
      out[n++] = spare_;
      spare_ = nullptr;
    }
    return n;
  }

  uint16_t tx_burst(uint16_t, std::span<Packet* const> pkts) noexcept override {
    uint16_t n = 0;
    for (Packet* p : pkts) {
      if (::write(fd_, p->data(), p->len()) < 0) break;
      hal::release(p);
      ++n;
    }
    return n;
  }

 private:
  std::shared_ptr<Pool> pool_;
  const int fd_;
  const std::string ifname_;
  Packet* spare_ = nullptr;  // an allocated buffer kept for the next read
};

}  // namespace

Result<std::unique_ptr<Port>> open_tap_port(const PortSpec& spec, const std::shared_ptr<Pool>& pool) {
  const std::string what = "tap '" + spec.ifname + "'";
  if (spec.ifname.empty() || spec.ifname.size() >= IFNAMSIZ) {
    return invalid(what + ": interface names have 1 to 15 characters");
  }
  int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return error(Errc::unavailable, what + ": /dev/net/tun: " + errno_text(errno));

  ifreq ifr;
  std::memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::memcpy(ifr.ifr_name, spec.ifname.data(), spec.ifname.size());
  if (::ioctl(fd, TUNSETIFF, &ifr) < 0) {
    int e = errno;
    ::close(fd);
    return error(Errc::unavailable, what + ": creating the device (TUNSETIFF): " + errno_text(e) +
                                        (e == EPERM ? " (needs CAP_NET_ADMIN)" : ""));
  }

  // Bring it up. A datagram socket is the conventional handle for interface ioctls.
  int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) {
    int e = errno;
    ::close(fd);
    return error(Errc::unavailable, what + ": socket for interface ioctls: " + errno_text(e));
  }
  int e = 0;
  const char* step = "";
  if (::ioctl(sock, SIOCGIFFLAGS, &ifr) < 0) {
    e = errno, step = "reading its flags (SIOCGIFFLAGS)";
  } else if (!(ifr.ifr_flags & IFF_UP)) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    if (::ioctl(sock, SIOCSIFFLAGS, &ifr) < 0) e = errno, step = "bringing it up (SIOCSIFFLAGS)";
  }
  ::close(sock);
  if (e) {
    ::close(fd);
    return error(Errc::unavailable, what + ": " + step + ": " + errno_text(e));
  }
  return std::unique_ptr<Port>(new TapPort(spec, pool, fd));
}

}  // namespace keel::hal::sim

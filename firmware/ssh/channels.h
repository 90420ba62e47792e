// The SSH connection protocol (RFC 4254), sans-IO: fed decoded messages >= 80
// after user authentication, it keeps the channels of one connection and
// appends reply payloads for Transport::send; a ChannelHost (cli's session
// glue) is told what the client asked for and hands back output.
//
// Only "session" channels are opened (at most max_channels at once, counting
// channels whose CLOSE is still outstanding). Other channel types are refused:
// the forwarding and agent ones (direct-tcpip, forwarded-tcpip, x11,
// auth-agent@openssh.com, direct-streamlocal@openssh.com,
// forwarded-streamlocal@openssh.com) with kAdministrativelyProhibited, the
// rest with kUnknownChannelType. Channel requests: pty-req (term and size;
// modes ignored), window-change, exec (a command of at most kMaxCommand
// bytes) and shell (either one, once per channel), env (refused quietly),
// signal (ignored), x11-req / auth-agent-req@openssh.com / subsystem and
// anything else refused with CHANNEL_FAILURE; want_reply is honoured. Global
// requests (tcpip-forward, keepalive@openssh.com, ...) get REQUEST_FAILURE
// when the client wants a reply.
//
// Flow control both ways. Outgoing: the client's window and maximum packet
// size limit what write() sends; the rest waits in the channel (pending())
// until a WINDOW_ADJUST. The caller bounds that queue (stop handing output
// while pending() is large). Incoming: the client may send at most our
// window (cfg.window) of data in packets of at most cfg.max_packet bytes;
// once half the window is consumed we send a WINDOW_ADJUST for what was
// consumed. "Consumed" means handed to host.input() by default; with
// cfg.input_acks it means acknowledged by the host with consumed(), so the
// window bounds what a session holds unread (a client that floods a busy
// session stalls, it can't make the host buffer more than the window).
// Input Channels drops itself (extended data, data before exec/shell or
// after our CLOSE) counts as consumed at once. More data than the window or a bigger packet, data after the
// client's EOF, a window adjust overflowing 2^32-1, a message for a channel
// that doesn't exist, and any malformed message are protocol errors.
//
// exit(): the pending output, then "exit-status", EOF and CLOSE (deferred
// until the pending output went out). The client's EOF -> host.eof; the
// client's CLOSE -> our CLOSE (unless sent) and the channel is freed. The
// host's closed() is called exactly once for every channel that was opened,
// when it is freed (by either side's CLOSE completing) or when Channels is
// destroyed.
//
// Thread-safety: none; one Channels per connection, used by the SSH I/O
// thread only. The ChannelHost is called on that thread, from inside
// handle() and ~Channels(), and must not call back into this Channels from
// its callbacks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "ssh/wire.h"

namespace keel::ssh {

inline constexpr size_t kMaxCommand = 4096;
inline constexpr size_t kMaxTermName = 64;
inline constexpr int kMaxTermDimension = 10000;  // cols and rows are clamped to this

struct Pty {
  std::string term;
  int cols = 80, rows = 24;
};

class ChannelHost {  // srv implements it; called on the I/O thread
 public:
  virtual ~ChannelHost() = default;
  // exec (shell false, command) or shell (shell true, command ""); pty: the
  // channel's pty-req, nullptr without one. false: refuse (CHANNEL_FAILURE).
  virtual bool start(uint32_t channel, bool shell, std::string_view command, const Pty* pty) = 0;
  virtual void input(uint32_t channel, std::string_view data) = 0;
  virtual void resize(uint32_t channel, int cols, int rows) = 0;
  virtual void eof(uint32_t channel) = 0;
  virtual void closed(uint32_t channel) = 0;  // gone: stop its session
};

struct ChannelsConfig {
  ChannelHost* host = nullptr;
  size_t max_channels = 10;
  uint32_t window = 2u << 20;
  uint32_t max_packet = 32768;
  // false: input counts as consumed when handed to host.input(); true: when
  // the host acknowledges it with Channels::consumed().
  bool input_acks = false;
};

class Channels {
 public:
  explicit Channels(ChannelsConfig cfg);
  ~Channels();
  Channels(const Channels&) = delete;
  Channels& operator=(const Channels&) = delete;

  // One message >= 80; replies appended to `out`. An error means: disconnect
  // with kProtocolError (the message says why, for the log) -- except
  // Errc::unsupported, a message number the connection protocol doesn't
  // define: answer it with Transport::unimplemented(seq) and carry on.
  Status handle(std::string_view payload, std::vector<std::string>& out);
  // Output of a started channel (stdout, or stderr as extended data 1);
  // ignored for a channel that is gone, closing or after exit().
  void write(uint32_t channel, std::string_view data, bool is_stderr, std::vector<std::string>& out);
  // With cfg.input_acks: the host has taken `n` bytes of the channel's input
  // (at most what it was given and hasn't acknowledged; more is ignored);
  // may queue a WINDOW_ADJUST.
  void consumed(uint32_t channel, size_t n, std::vector<std::string>& out);
  // The command/shell ended: data, exit-status, EOF, CLOSE.
  void exit(uint32_t channel, int status, std::vector<std::string>& out);
  // Bytes queued for a channel, waiting for the client's window.
  size_t pending(uint32_t channel) const;
  size_t open_count() const;
  // The channel's pty-req, if any (nullptr: no such channel or no pty).
  const Pty* pty(uint32_t channel) const;

 private:
  struct Chunk {
    std::string data;
    size_t off = 0;  // bytes of data already sent
    bool is_stderr = false;
  };
  struct Channel {
    bool used = false;
    uint32_t peer = 0;           // the client's channel number
    uint32_t remote_window = 0;  // what we may still send
    uint32_t remote_max_packet = 0;
    uint32_t local_window = 0;  // what the client may still send
    uint32_t consumed = 0;      // consumed since our last WINDOW_ADJUST
    uint32_t unacked = 0;       // input_acks: given to the host, not yet acknowledged
    std::optional<Pty> pty;
    bool started = false;
    bool eof_received = false;
    bool close_sent = false;
    bool exited = false;  // exit() called: status, EOF, CLOSE follow the pending data
    int exit_status = 0;
    std::deque<Chunk> queue;
    size_t queued = 0;
  };

  Channel* find(uint32_t id);
  const Channel* find(uint32_t id) const;
  Status open(WireReader& r, std::vector<std::string>& out);
  Status request(WireReader& r, std::vector<std::string>& out);
  void flush(uint32_t id, Channel& c, std::vector<std::string>& out);
  void send_close(Channel& c, std::vector<std::string>& out);
  void grant(Channel& c, uint32_t n, std::vector<std::string>& out);
  void release(uint32_t id, Channel& c);

  ChannelsConfig cfg_;
  std::vector<Channel> ch_;
  size_t open_ = 0;
};

}  // namespace keel::ssh

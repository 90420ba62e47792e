// The SSH connection protocol (RFC 4254): see channels.h.
//
// Channels live in a fixed table of max_channels slots; a channel's number
// (ours, the "recipient channel" the client uses) is its slot index. A
// channel's output waits in a queue of chunks (stdout and stderr in the
// order written) and goes out as the client's window allows, in packets of
// at most min(client's max packet, cfg.max_packet) bytes.
//
// Thread-safety: none (one object per connection, on the SSH I/O thread).
#include "ssh/channels.h"

#include <algorithm>

namespace keel::ssh {
namespace {

constexpr uint32_t kStderr = 1;  // SSH_EXTENDED_DATA_STDERR

Status malformed(std::string_view what) { return invalid("malformed " + std::string(what)); }

std::string reply(uint8_t type, uint32_t peer) { return WireWriter().u8(type).u32(peer).take(); }

int clamp_dimension(uint32_t v) { return static_cast<int>(std::min<uint32_t>(v, kMaxTermDimension)); }

// The refusal of a channel type other than "session": reason and text.
std::pair<uint32_t, std::string_view> refusal(std::string_view type) {
  if (type == "direct-tcpip" || type == "forwarded-tcpip" || type == "direct-streamlocal@openssh.com" ||
      type == "forwarded-streamlocal@openssh.com")
    return {open_failure::kAdministrativelyProhibited, "port forwarding is disabled"};
  if (type == "x11") return {open_failure::kAdministrativelyProhibited, "X11 forwarding is disabled"};
  if (type == "auth-agent@openssh.com" || type == "auth-agent")
    return {open_failure::kAdministrativelyProhibited, "agent forwarding is disabled"};
  return {open_failure::kUnknownChannelType, "unknown channel type"};
}

}  // namespace

Channels::Channels(ChannelsConfig cfg) : cfg_(cfg), ch_(cfg.max_channels) {}

Channels::~Channels() {
  for (uint32_t id = 0; id < ch_.size(); ++id)
    if (ch_[id].used) release(id, ch_[id]);
}

Channels::Channel* Channels::find(uint32_t id) {
  return id < ch_.size() && ch_[id].used ? &ch_[id] : nullptr;
}
const Channels::Channel* Channels::find(uint32_t id) const {
  return id < ch_.size() && ch_[id].used ? &ch_[id] : nullptr;
}

size_t Channels::open_count() const { return open_; }

size_t Channels::pending(uint32_t channel) const {
  const Channel* c = find(channel);
  return c ? c->queued : 0;
}

const Pty* Channels::pty(uint32_t channel) const {
  const Channel* c = find(channel);
  return c && c->pty ? &*c->pty : nullptr;
}

void Channels::release(uint32_t id, Channel& c) {
  c = Channel{};
  --open_;
  if (cfg_.host) cfg_.host->closed(id);
}

void Channels::grant(Channel& c, uint32_t n, std::vector<std::string>& out) {
  c.consumed += n;
  if (c.close_sent || c.consumed < cfg_.window / 2) return;
  out.push_back(WireWriter().u8(msg::kChannelWindowAdjust).u32(c.peer).u32(c.consumed).take());
  c.local_window += c.consumed;
  c.consumed = 0;
}

void Channels::consumed(uint32_t channel, size_t n, std::vector<std::string>& out) {
  Channel* c = find(channel);
  if (!c) return;
  const auto k = static_cast<uint32_t>(std::min<size_t>(n, c->unacked));
  c->unacked -= k;
  grant(*c, k, out);
}

void Channels::send_close(Channel& c, std::vector<std::string>& out) {
  if (c.close_sent) return;
  c.close_sent = true;
  c.queue.clear();
  c.queued = 0;
  out.push_back(reply(msg::kChannelClose, c.peer));
}

Status Channels::handle(std::string_view payload, std::vector<std::string>& out) {
  WireReader r(payload);
  uint8_t type = 0;
  if (!r.u8(type)) return invalid("empty message");
  switch (type) {
    case msg::kGlobalRequest: {
      std::string_view name;
      bool want_reply = false;
      if (!r.string(name) || !r.boolean(want_reply)) return malformed("GLOBAL_REQUEST");
      r.rest();  // tcpip-forward, keepalive@openssh.com, ...: all refused
      if (want_reply) out.push_back(WireWriter().u8(msg::kRequestFailure).take());
      return {};
    }
    case msg::kChannelOpen:
      return open(r, out);
    case msg::kChannelRequest:
      return request(r, out);
    case msg::kChannelWindowAdjust: {
      uint32_t id = 0, add = 0;
      if (!r.u32(id) || !r.u32(add) || !r.done()) return malformed("CHANNEL_WINDOW_ADJUST");
      Channel* c = find(id);
      if (!c) return invalid("CHANNEL_WINDOW_ADJUST for unknown channel " + std::to_string(id));
      if (add > UINT32_MAX - c->remote_window)
        return invalid("CHANNEL_WINDOW_ADJUST overflows the window of channel " + std::to_string(id));
      c->remote_window += add;
      flush(id, *c, out);
      return {};
    }
    case msg::kChannelData:
    case msg::kChannelExtendedData: {
      uint32_t id = 0, code = 0;
      std::string_view data;
      if (!r.u32(id) || (type == msg::kChannelExtendedData && !r.u32(code)) || !r.string(data) || !r.done())
        return malformed(type == msg::kChannelData ? "CHANNEL_DATA" : "CHANNEL_EXTENDED_DATA");
      Channel* c = find(id);
      if (!c) return invalid("data for unknown channel " + std::to_string(id));
      if (c->eof_received) return invalid("data after EOF on channel " + std::to_string(id));
      if (data.size() > cfg_.max_packet)
        return invalid("channel " + std::to_string(id) + ": packet of " + std::to_string(data.size()) +
                       " bytes exceeds the maximum " + std::to_string(cfg_.max_packet));
      if (data.size() > c->local_window)
        return invalid("channel " + std::to_string(id) + ": " + std::to_string(data.size()) +
                       " bytes exceed the window (" + std::to_string(c->local_window) + " left)");
      const auto n = static_cast<uint32_t>(data.size());
      c->local_window -= n;
      // Extended data from a client (stderr) has no meaning for a session,
      // nor has data before exec/shell or after our CLOSE (the client just
      // hasn't seen it yet): dropped, and so consumed at once.
      const bool to_host = type == msg::kChannelData && c->started && !c->close_sent && cfg_.host && n > 0;
      if (to_host) cfg_.host->input(id, data);
      if (to_host && cfg_.input_acks)
        c->unacked += n;
      else
        grant(*c, n, out);
      return {};
    }
    case msg::kChannelEof: {
      uint32_t id = 0;
      if (!r.u32(id) || !r.done()) return malformed("CHANNEL_EOF");
      Channel* c = find(id);
      if (!c) return invalid("CHANNEL_EOF for unknown channel " + std::to_string(id));
      if (c->eof_received) return {};
      c->eof_received = true;
      if (c->started && !c->close_sent && cfg_.host) cfg_.host->eof(id);
      return {};
    }
    case msg::kChannelClose: {
      uint32_t id = 0;
      if (!r.u32(id) || !r.done()) return malformed("CHANNEL_CLOSE");
      Channel* c = find(id);
      if (!c) return invalid("CHANNEL_CLOSE for unknown channel " + std::to_string(id));
      send_close(*c, out);
      release(id, *c);
      return {};
    }
    case msg::kRequestSuccess:
    case msg::kRequestFailure:
    case msg::kChannelOpenConfirmation:
    case msg::kChannelOpenFailure:
    case msg::kChannelSuccess:
    case msg::kChannelFailure:
      // Replies to requests this server never makes.
      return invalid("unexpected message " + std::to_string(type) + " (nothing was requested)");
    default:
      if (type < msg::kGlobalRequest) return invalid("unexpected message " + std::to_string(type));
      return error(Errc::unsupported, "unknown message " + std::to_string(type));
  }
}

Status Channels::open(WireReader& r, std::vector<std::string>& out) {
  std::string_view type;
  uint32_t peer = 0, window = 0, max_packet = 0;
  if (!r.string(type) || !r.u32(peer) || !r.u32(window) || !r.u32(max_packet))
    return malformed("CHANNEL_OPEN");
  auto failure = [&](uint32_t reason, std::string_view text) {
    out.push_back(
        WireWriter().u8(msg::kChannelOpenFailure).u32(peer).u32(reason).string(text).string("").take());
    return Status{};
  };
  if (type != "session") {
    r.rest();
    const auto [reason, text] = refusal(type);
    return failure(reason, text);
  }
  if (!r.done()) return malformed("CHANNEL_OPEN session");
  if (max_packet == 0) return invalid("CHANNEL_OPEN with a maximum packet size of 0");
  auto slot = std::find_if(ch_.begin(), ch_.end(), [](const Channel& c) { return !c.used; });
  if (slot == ch_.end()) return failure(open_failure::kResourceShortage, "too many channels");
  const auto id = static_cast<uint32_t>(slot - ch_.begin());
  Channel& c = *slot;
  c = Channel{};
  c.used = true;
  c.peer = peer;
  c.remote_window = window;
  c.remote_max_packet = max_packet;
  c.local_window = cfg_.window;
  ++open_;
  out.push_back(WireWriter()
                    .u8(msg::kChannelOpenConfirmation)
                    .u32(peer)
                    .u32(id)
                    .u32(cfg_.window)
                    .u32(cfg_.max_packet)
                    .take());
  return {};
}

Status Channels::request(WireReader& r, std::vector<std::string>& out) {
  uint32_t id = 0;
  std::string_view type;
  bool want_reply = false;
  if (!r.u32(id) || !r.string(type) || !r.boolean(want_reply)) return malformed("CHANNEL_REQUEST");
  Channel* c = find(id);
  if (!c) return invalid("CHANNEL_REQUEST for unknown channel " + std::to_string(id));
  auto answer = [&](bool ok) {
    if (want_reply && !c->close_sent)
      out.push_back(reply(ok ? msg::kChannelSuccess : msg::kChannelFailure, c->peer));
    return Status{};
  };

  if (type == "pty-req") {
    std::string_view term, modes;
    uint32_t cols = 0, rows = 0, wpx = 0, hpx = 0;
    if (!r.string(term) || !r.u32(cols) || !r.u32(rows) || !r.u32(wpx) || !r.u32(hpx) || !r.string(modes) ||
        !r.done())
      return malformed("pty-req");
    if (c->started || c->close_sent || term.size() > kMaxTermName) return answer(false);
    c->pty = Pty{std::string(term), clamp_dimension(cols), clamp_dimension(rows)};  // modes ignored
    return answer(true);
  }
  if (type == "window-change") {
    uint32_t cols = 0, rows = 0, wpx = 0, hpx = 0;
    if (!r.u32(cols) || !r.u32(rows) || !r.u32(wpx) || !r.u32(hpx) || !r.done())
      return malformed("window-change");
    if (!c->pty || c->close_sent) return answer(false);
    c->pty->cols = clamp_dimension(cols);
    c->pty->rows = clamp_dimension(rows);
    if (c->started && cfg_.host) cfg_.host->resize(id, c->pty->cols, c->pty->rows);
    return answer(true);
  }
  if (type == "exec" || type == "shell") {
    const bool shell = type == "shell";
    std::string_view command;
    if ((!shell && !r.string(command)) || !r.done()) return malformed(type);
    if (c->started || c->close_sent || command.size() > kMaxCommand || !cfg_.host) return answer(false);
    c->started = cfg_.host->start(id, shell, command, c->pty ? &*c->pty : nullptr);
    return answer(c->started);
  }
  if (type == "env") {
    std::string_view name, value;
    if (!r.string(name) || !r.string(value) || !r.done()) return malformed("env");
    return answer(false);  // refused quietly, as sshd does without AcceptEnv
  }
  if (type == "signal") {
    std::string_view name;
    if (!r.string(name) || !r.done()) return malformed("signal");
    return answer(false);  // ignored
  }
  // x11-req, auth-agent-req@openssh.com, subsystem, and anything unknown.
  r.rest();
  return answer(false);
}

void Channels::write(uint32_t channel, std::string_view data, bool is_stderr, std::vector<std::string>& out) {
  Channel* c = find(channel);
  if (!c || !c->started || c->close_sent || c->exited || data.empty()) return;
  if (!c->queue.empty() && c->queue.back().is_stderr == is_stderr &&
      c->queue.back().data.size() < cfg_.max_packet)
    c->queue.back().data.append(data);
  else
    c->queue.push_back(Chunk{std::string(data), 0, is_stderr});
  c->queued += data.size();
  flush(channel, *c, out);
}

void Channels::exit(uint32_t channel, int status, std::vector<std::string>& out) {
  Channel* c = find(channel);
  if (!c || c->close_sent || c->exited) return;
  c->exited = true;
  c->exit_status = status;
  flush(channel, *c, out);
}

void Channels::flush(uint32_t /*id*/, Channel& c, std::vector<std::string>& out) {
  if (c.close_sent) return;
  const size_t packet = std::min<size_t>(c.remote_max_packet, cfg_.max_packet);
  while (!c.queue.empty() && c.remote_window > 0) {
    Chunk& k = c.queue.front();
    const size_t n = std::min({k.data.size() - k.off, static_cast<size_t>(c.remote_window), packet});
    const std::string_view part = std::string_view(k.data).substr(k.off, n);
    if (k.is_stderr)
      out.push_back(WireWriter().u8(msg::kChannelExtendedData).u32(c.peer).u32(kStderr).string(part).take());
    else
      out.push_back(WireWriter().u8(msg::kChannelData).u32(c.peer).string(part).take());
    k.off += n;
    c.remote_window -= static_cast<uint32_t>(n);
    c.queued -= n;
    if (k.off == k.data.size()) c.queue.pop_front();
  }
  if (c.exited && c.queue.empty()) {
    out.push_back(WireWriter()
                      .u8(msg::kChannelRequest)
                      .u32(c.peer)
                      .string("exit-status")
                      .boolean(false)
                      .u32(static_cast<uint32_t>(c.exit_status))
                      .take());
    out.push_back(reply(msg::kChannelEof, c.peer));
    send_close(c, out);
  }
}

}  // namespace keel::ssh

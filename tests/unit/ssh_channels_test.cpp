// The SSH connection protocol (firmware/ssh/channels.h): messages built with
// WireWriter, replies decoded, a recording ChannelHost.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ssh/channels.h"
#include "ssh/wire.h"

using namespace keel;
using namespace keel::ssh;

namespace {

struct RecHost : ChannelHost {
  std::vector<std::string> events;
  bool accept = true;
  Pty last_pty;
  bool had_pty = false;
  bool start(uint32_t ch, bool shell, std::string_view command, const Pty* pty) override {
    events.push_back("start " + std::to_string(ch) + (shell ? " shell" : " exec " + std::string(command)));
    had_pty = pty != nullptr;
    if (pty) last_pty = *pty;
    return accept;
  }
  void input(uint32_t ch, std::string_view data) override {
    events.push_back("input " + std::to_string(ch) + " " + std::string(data.substr(0, 20)) + " " +
                     std::to_string(data.size()));
  }
  void resize(uint32_t ch, int cols, int rows) override {
    events.push_back("resize " + std::to_string(ch) + " " + std::to_string(cols) + "x" +
                     std::to_string(rows));
  }
  void eof(uint32_t ch) override { events.push_back("eof " + std::to_string(ch)); }
  void closed(uint32_t ch) override { events.push_back("closed " + std::to_string(ch)); }
};

std::string open_msg(std::string_view type, uint32_t peer, uint32_t window = 1u << 20,
                     uint32_t max_packet = 32768) {
  return WireWriter().u8(msg::kChannelOpen).string(type).u32(peer).u32(window).u32(max_packet).take();
}
WireWriter req(uint32_t ch, std::string_view type, bool want_reply) {
  WireWriter w;
  w.u8(msg::kChannelRequest).u32(ch).string(type).boolean(want_reply);
  return w;
}
std::string data_msg(uint32_t ch, std::string_view d) {
  return WireWriter().u8(msg::kChannelData).u32(ch).string(d).take();
}
std::string adjust(uint32_t ch, uint32_t n) {
  return WireWriter().u8(msg::kChannelWindowAdjust).u32(ch).u32(n).take();
}
std::string simple(uint8_t type, uint32_t ch) { return WireWriter().u8(type).u32(ch).take(); }

// Decoded replies, one line each: "data PEER LEN", "stderr PEER LEN",
// "exit-status PEER N", "eof PEER", "close PEER", "success PEER", ...
std::vector<std::string> decode(const std::vector<std::string>& msgs) {
  std::vector<std::string> v;
  for (const std::string& m : msgs) {
    WireReader r(m);
    uint8_t t = 0;
    uint32_t peer = 0;
    REQUIRE(r.u8(t));
    if (t == msg::kRequestFailure) {
      CHECK(r.done());
      v.push_back("request-failure");
      continue;
    }
    REQUIRE(r.u32(peer));
    const std::string p = " " + std::to_string(peer);
    std::string_view s;
    uint32_t a = 0, b = 0;
    switch (t) {
      case msg::kChannelOpenConfirmation:
        REQUIRE((r.u32(a) && r.u32(b)));
        r.u32(b);
        v.push_back("confirm" + p + " " + std::to_string(a));
        break;
      case msg::kChannelOpenFailure:
        REQUIRE((r.u32(a) && r.string(s)));
        v.push_back("open-failure" + p + " " + std::to_string(a) + " " + std::string(s));
        r.string(s);
        break;
      case msg::kChannelData:
        REQUIRE(r.string(s));
        v.push_back("data" + p + " " + std::to_string(s.size()));
        break;
      case msg::kChannelExtendedData:
        REQUIRE((r.u32(a) && r.string(s)));
        CHECK(a == 1);
        v.push_back("stderr" + p + " " + std::to_string(s.size()));
        break;
      case msg::kChannelRequest: {
        bool want = true;
        REQUIRE((r.string(s) && r.boolean(want) && r.u32(a)));
        CHECK_FALSE(want);
        v.push_back(std::string(s) + p + " " + std::to_string(a));
        break;
      }
      case msg::kChannelWindowAdjust:
        REQUIRE(r.u32(a));
        v.push_back("adjust" + p + " " + std::to_string(a));
        break;
      case msg::kChannelEof:
        v.push_back("eof" + p);
        break;
      case msg::kChannelClose:
        v.push_back("close" + p);
        break;
      case msg::kChannelSuccess:
        v.push_back("success" + p);
        break;
      case msg::kChannelFailure:
        v.push_back("failure" + p);
        break;
      default:
        FAIL("unexpected reply type " << int(t));
    }
    CHECK(r.done());
  }
  return v;
}

using Lines = std::vector<std::string>;

struct Fixture {
  RecHost host;
  ChannelsConfig config(size_t max = 10) {
    ChannelsConfig c;
    c.host = &host;
    c.max_channels = max;
    return c;
  }
  // Opens a session channel for client channel `peer` and returns ours.
  static uint32_t open_session(Channels& ch, uint32_t peer, uint32_t window = 1u << 20,
                               uint32_t max_packet = 32768) {
    std::vector<std::string> out;
    REQUIRE(ch.handle(open_msg("session", peer, window, max_packet), out).ok());
    REQUIRE(out.size() == 1);
    WireReader r(out[0]);
    uint8_t t = 0;
    uint32_t p = 0, id = 0, win = 0, maxp = 0;
    REQUIRE((r.u8(t) && r.u32(p) && r.u32(id) && r.u32(win) && r.u32(maxp) && r.done()));
    REQUIRE(t == msg::kChannelOpenConfirmation);
    CHECK(p == peer);
    CHECK(win == (2u << 20));
    CHECK(maxp == 32768);
    return id;
  }
};

}  // namespace

TEST_CASE_FIXTURE(Fixture,
                  "exec: start, output, exit-status, EOF, CLOSE; the client's CLOSE frees the channel") {
  Channels ch(config());
  const uint32_t id = open_session(ch, 7);
  CHECK(ch.open_count() == 1);
  std::vector<std::string> out;
  REQUIRE(ch.handle(req(id, "exec", true).string("show ports").take(), out).ok());
  CHECK(decode(out) == Lines{"success 7"});
  CHECK(host.events == Lines{"start " + std::to_string(id) + " exec show ports"});
  CHECK_FALSE(host.had_pty);

  out.clear();
  ch.write(id, "hello\n", false, out);
  ch.write(id, "oops\n", true, out);
  ch.exit(id, 1, out);
  CHECK(decode(out) == Lines{"data 7 6", "stderr 7 5", "exit-status 7 1", "eof 7", "close 7"});
  // Output after exit is ignored.
  out.clear();
  ch.write(id, "late", false, out);
  ch.exit(id, 0, out);
  CHECK(out.empty());
  CHECK(ch.open_count() == 1);  // until the client's CLOSE
  REQUIRE(ch.handle(simple(msg::kChannelClose, id), out).ok());
  CHECK(out.empty());  // our CLOSE went out already
  CHECK(ch.open_count() == 0);
  CHECK(host.events.back() == "closed " + std::to_string(id));
  // The channel is gone: anything for it now is a protocol error.
  CHECK_FALSE(ch.handle(data_msg(id, "x"), out).ok());
}

TEST_CASE_FIXTURE(Fixture, "pty-req, shell, window-change, input, EOF; want_reply honoured") {
  Channels ch(config());
  const uint32_t id = open_session(ch, 0);
  std::vector<std::string> out;
  REQUIRE(ch.handle(req(id, "pty-req", true)
                        .string("xterm-256color")
                        .u32(132)
                        .u32(43)
                        .u32(0)
                        .u32(0)
                        .string(std::string_view("\x81\0\0\x96\0", 5))
                        .take(),
                    out)
              .ok());
  REQUIRE(ch.handle(req(id, "env", true).string("LANG").string("C").take(), out).ok());
  REQUIRE(ch.handle(req(id, "env", false).string("LC_ALL").string("C").take(), out).ok());
  REQUIRE(ch.handle(req(id, "shell", true).take(), out).ok());
  CHECK(decode(out) == Lines{"success 0", "failure 0", "success 0"});
  REQUIRE(host.had_pty);
  CHECK(host.last_pty.term == "xterm-256color");
  CHECK(host.last_pty.cols == 132);
  CHECK(host.last_pty.rows == 43);
  REQUIRE(ch.pty(id) != nullptr);

  out.clear();
  REQUIRE(ch.handle(req(id, "window-change", false).u32(100).u32(30).u32(0).u32(0).take(), out).ok());
  REQUIRE(ch.handle(data_msg(id, "show\r"), out).ok());
  REQUIRE(ch.handle(simple(msg::kChannelEof, id), out).ok());
  CHECK(out.empty());
  CHECK(host.events == Lines{"start 0 shell", "resize 0 100x30", "input 0 show\r 5", "eof 0"});
  CHECK(ch.pty(id)->cols == 100);

  // exec or shell only once; no pty-req once started.
  REQUIRE(ch.handle(req(id, "exec", true).string("x").take(), out).ok());
  REQUIRE(ch.handle(req(id, "shell", true).take(), out).ok());
  REQUIRE(
      ch.handle(req(id, "pty-req", true).string("vt100").u32(80).u32(24).u32(0).u32(0).string("").take(), out)
          .ok());
  CHECK(decode(out) == Lines{"failure 0", "failure 0", "failure 0"});
  // Data after the client's EOF is a protocol error.
  CHECK_FALSE(ch.handle(data_msg(id, "x"), out).ok());
}

TEST_CASE_FIXTURE(Fixture,
                  "refused: other channel types, forwarding/agent/x11/subsystem requests, global requests") {
  Channels ch(config());
  std::vector<std::string> out;
  REQUIRE(
      ch.handle(open_msg("direct-tcpip", 1) + WireWriter().string("h").u32(22).string("o").u32(1).take(), out)
          .ok());
  REQUIRE(ch.handle(open_msg("x11", 2) + WireWriter().string("h").u32(1).take(), out).ok());
  REQUIRE(ch.handle(open_msg("auth-agent@openssh.com", 3), out).ok());
  REQUIRE(ch.handle(open_msg("direct-streamlocal@openssh.com", 4) +
                        WireWriter().string("/s").string("").u32(0).take(),
                    out)
              .ok());
  REQUIRE(ch.handle(open_msg("tun@openssh.com", 5) + WireWriter().u32(1).u32(0).take(), out).ok());
  CHECK(decode(out) ==
        Lines{"open-failure 1 1 port forwarding is disabled", "open-failure 2 1 X11 forwarding is disabled",
              "open-failure 3 1 agent forwarding is disabled", "open-failure 4 1 port forwarding is disabled",
              "open-failure 5 3 unknown channel type"});
  CHECK(ch.open_count() == 0);

  out.clear();
  REQUIRE(ch.handle(WireWriter()
                        .u8(msg::kGlobalRequest)
                        .string("tcpip-forward")
                        .boolean(true)
                        .string("")
                        .u32(8080)
                        .take(),
                    out)
              .ok());
  REQUIRE(ch.handle(WireWriter().u8(msg::kGlobalRequest).string("keepalive@openssh.com").boolean(true).take(),
                    out)
              .ok());
  REQUIRE(
      ch.handle(
            WireWriter().u8(msg::kGlobalRequest).string("no-more-sessions@openssh.com").boolean(false).take(),
            out)
          .ok());
  CHECK(decode(out) == Lines{"request-failure", "request-failure"});

  const uint32_t id = open_session(ch, 9);
  out.clear();
  REQUIRE(
      ch.handle(
            req(id, "x11-req", true).boolean(false).string("MIT-MAGIC-COOKIE-1").string("ab").u32(0).take(),
            out)
          .ok());
  REQUIRE(ch.handle(req(id, "auth-agent-req@openssh.com", true).take(), out).ok());
  REQUIRE(ch.handle(req(id, "subsystem", true).string("sftp").take(), out).ok());
  REQUIRE(ch.handle(req(id, "signal", true).string("INT").take(), out).ok());
  REQUIRE(ch.handle(req(id, "whatever@example.com", true).string("x").take(), out).ok());
  REQUIRE(ch.handle(req(id, "subsystem", false).string("sftp").take(), out).ok());
  CHECK(decode(out) == Lines{"failure 9", "failure 9", "failure 9", "failure 9", "failure 9"});
  CHECK(host.events.empty());
}

TEST_CASE_FIXTURE(Fixture,
                  "max_channels: the next open fails with resource shortage; a freed slot is reused") {
  Channels ch(config(2));
  const uint32_t a = open_session(ch, 0);
  open_session(ch, 1);
  std::vector<std::string> out;
  REQUIRE(ch.handle(open_msg("session", 2), out).ok());
  CHECK(decode(out) == Lines{"open-failure 2 4 too many channels"});
  out.clear();
  REQUIRE(ch.handle(simple(msg::kChannelClose, a), out).ok());
  CHECK(decode(out) == Lines{"close 0"});
  CHECK(ch.open_count() == 1);
  CHECK(open_session(ch, 3) == a);
}

TEST_CASE_FIXTURE(
    Fixture, "our output waits for the client's window and is cut to its max packet; exit follows the data") {
  Channels ch(config());
  const uint32_t id = open_session(ch, 4, /*window=*/10000, /*max_packet=*/4000);
  std::vector<std::string> out;
  REQUIRE(ch.handle(req(id, "exec", false).string("show big").take(), out).ok());
  CHECK(out.empty());  // no want_reply: no reply
  ch.write(id, std::string(25000, 'x'), false, out);
  CHECK(decode(out) == Lines{"data 4 4000", "data 4 4000", "data 4 2000"});
  CHECK(ch.pending(id) == 15000);
  out.clear();
  ch.exit(id, 0, out);
  CHECK(out.empty());  // exit waits for the data
  REQUIRE(ch.handle(adjust(id, 5000), out).ok());
  CHECK(decode(out) == Lines{"data 4 4000", "data 4 1000"});
  CHECK(ch.pending(id) == 10000);
  out.clear();
  REQUIRE(ch.handle(adjust(id, 100000), out).ok());
  CHECK(decode(out) ==
        Lines{"data 4 4000", "data 4 4000", "data 4 2000", "exit-status 4 0", "eof 4", "close 4"});
  CHECK(ch.pending(id) == 0);
  // A window adjust past 2^32-1 is a protocol error.
  Channels ch2(config());
  const uint32_t id2 = open_session(ch2, 0, 0xfffffff0u);
  CHECK_FALSE(ch2.handle(adjust(id2, 0x20), out).ok());
}

TEST_CASE_FIXTURE(
    Fixture,
    "incoming window: adjust once half is consumed; more than the window or max packet is an error") {
  Channels ch(config());
  const uint32_t id = open_session(ch, 5);
  std::vector<std::string> out;
  REQUIRE(ch.handle(req(id, "shell", false).take(), out).ok());
  const std::string chunk(32768, 'a');
  for (int i = 0; i < 31; ++i) REQUIRE(ch.handle(data_msg(id, chunk), out).ok());
  CHECK(out.empty());  // 31 * 32 KiB < 1 MiB
  REQUIRE(ch.handle(data_msg(id, chunk), out).ok());
  CHECK(decode(out) == Lines{"adjust 5 1048576"});
  // A packet bigger than our max packet.
  auto s = ch.handle(data_msg(id, std::string(32769, 'b')), out);
  CHECK_FALSE(s.ok());
  CHECK(s.message().find("exceeds the maximum 32768") != std::string::npos);

  // A client that ignores our window.
  ChannelsConfig small = config();
  small.window = 1000;
  small.max_packet = 800;
  Channels ch2(small);
  std::vector<std::string> o2;
  REQUIRE(ch2.handle(open_msg("session", 0), o2).ok());
  REQUIRE(ch2.handle(data_msg(0, std::string(400, 'c')), o2).ok());
  REQUIRE(o2.size() == 1);  // the confirmation; 400 of 1000 consumed
  REQUIRE(ch2.handle(data_msg(0, std::string(100, 'c')), o2).ok());
  CHECK(decode({o2.back()}) == Lines{"adjust 0 500"});               // half consumed: granted again
  REQUIRE(ch2.handle(data_msg(0, std::string(400, 'c')), o2).ok());  // 600 left
  CHECK(o2.size() == 2);
  s = ch2.handle(data_msg(0, std::string(700, 'c')), o2);
  CHECK_FALSE(s.ok());
  CHECK(s.message() == "channel 0: 700 bytes exceed the window (600 left)");
}

TEST_CASE_FIXTURE(Fixture, "the client's CLOSE: our CLOSE, pending output dropped, host told once") {
  Channels ch(config());
  const uint32_t id = open_session(ch, 3, /*window=*/0);
  std::vector<std::string> out;
  REQUIRE(ch.handle(req(id, "exec", true).string("show").take(), out).ok());
  ch.write(id, "waiting", false, out);
  CHECK(ch.pending(id) == 7);
  out.clear();
  REQUIRE(ch.handle(simple(msg::kChannelClose, id), out).ok());
  CHECK(decode(out) == Lines{"close 3"});
  CHECK(host.events == Lines{"start 0 exec show", "closed 0"});
  CHECK(ch.pending(id) == 0);
  out.clear();
  ch.exit(id, 0, out);
  ch.write(id, "x", false, out);
  CHECK(out.empty());
}

TEST_CASE_FIXTURE(Fixture, "a refused start is CHANNEL_FAILURE; destroying Channels closes what is open") {
  {
    Channels ch(config());
    host.accept = false;
    const uint32_t id = open_session(ch, 1);
    std::vector<std::string> out;
    REQUIRE(ch.handle(req(id, "exec", true).string("show").take(), out).ok());
    CHECK(decode(out) == Lines{"failure 1"});
    out.clear();
    ch.write(id, "not started", false, out);
    CHECK(out.empty());
    host.accept = true;
    REQUIRE(ch.handle(req(id, "exec", true).string(std::string(kMaxCommand + 1, 'x')).take(), out).ok());
    CHECK(decode(out) == Lines{"failure 1"});
    open_session(ch, 2);
  }
  CHECK(host.events == Lines{"start 0 exec show", "closed 0", "closed 1"});
}

TEST_CASE_FIXTURE(Fixture,
                  "malformed and unexpected messages are errors; unknown numbers are 'unsupported'") {
  std::vector<std::string> out;
  auto fails = [&](const std::string& m) {
    Channels ch(config());
    open_session(ch, 0);
    out.clear();
    auto s = ch.handle(m, out);
    CHECK_FALSE(s.ok());
    CHECK(s.code() == Errc::invalid_argument);
    return s.message();
  };
  fails("");
  fails(open_msg("session", 1) + "x");
  fails(open_msg("session", 1, 100, 0));
  fails(WireWriter().u8(msg::kChannelOpen).string("session").u32(1).take());
  fails(simple(msg::kChannelEof, 5));
  fails(simple(msg::kChannelClose, 1));
  fails(simple(msg::kChannelClose, 0) + "x");
  fails(req(0, "exec", true).take());
  fails(req(0, "exec", true).string("a").string("b").take());
  fails(req(0, "pty-req", true).string("xterm").u32(80).take());
  fails(req(3, "shell", true).take());
  fails(WireWriter().u8(msg::kChannelRequest).u32(0).take());
  fails(data_msg(0, "x") + "y");
  fails(WireWriter().u8(msg::kChannelWindowAdjust).u32(0).take());
  fails(WireWriter().u8(msg::kGlobalRequest).string("x").take());
  fails(simple(msg::kChannelSuccess, 0));
  fails(simple(msg::kChannelOpenConfirmation, 0));
  fails(WireWriter().u8(msg::kRequestFailure).take());
  fails(WireWriter().u8(msg::kUserauthRequest).take());
  CHECK(fails(simple(msg::kChannelClose, 1)).find("unknown channel 1") != std::string::npos);

  Channels ch(config());
  auto s = ch.handle(WireWriter().u8(101).take(), out);
  CHECK(s.code() == Errc::unsupported);
  s = ch.handle(WireWriter().u8(200).u32(1).take(), out);
  CHECK(s.code() == Errc::unsupported);
}

TEST_CASE_FIXTURE(Fixture,
                  "terminal sizes are clamped; window-change without a pty is refused; long term names too") {
  Channels ch(config());
  const uint32_t id = open_session(ch, 0);
  std::vector<std::string> out;
  REQUIRE(ch.handle(req(id, "window-change", true).u32(100).u32(30).u32(0).u32(0).take(), out).ok());
  REQUIRE(ch.handle(req(id, "pty-req", true)
                        .string(std::string(65, 't'))
                        .u32(80)
                        .u32(24)
                        .u32(0)
                        .u32(0)
                        .string("")
                        .take(),
                    out)
              .ok());
  REQUIRE(
      ch.handle(
            req(id, "pty-req", true).string("vt100").u32(0xffffffffu).u32(0).u32(0).u32(0).string("").take(),
            out)
          .ok());
  CHECK(decode(out) == Lines{"failure 0", "failure 0", "success 0"});
  REQUIRE(ch.pty(id) != nullptr);
  CHECK(ch.pty(id)->cols == kMaxTermDimension);
  CHECK(ch.pty(id)->rows == 0);
  REQUIRE(ch.handle(req(id, "shell", false).take(), out).ok());
  CHECK(host.last_pty.cols == kMaxTermDimension);
  REQUIRE(ch.handle(req(id, "window-change", false).u32(0x80000000u).u32(50).u32(0).u32(0).take(), out).ok());
  CHECK(host.events.back() == "resize 0 10000x50");
}

TEST_CASE_FIXTURE(Fixture, "input_acks: the window comes back only as the host acknowledges input") {
  ChannelsConfig cfg = config();
  cfg.window = 1000;
  cfg.max_packet = 500;
  cfg.input_acks = true;
  Channels ch(cfg);
  std::vector<std::string> out;
  REQUIRE(ch.handle(open_msg("session", 2), out).ok());
  REQUIRE(ch.handle(req(0, "shell", false).take(), out).ok());
  out.clear();
  REQUIRE(ch.handle(data_msg(0, std::string(500, 'a')), out).ok());
  REQUIRE(ch.handle(data_msg(0, std::string(500, 'a')), out).ok());
  CHECK(out.empty());  // 1000 given to the host, nothing acknowledged: no adjust
  ch.consumed(0, 300, out);
  CHECK(out.empty());         // below half the window
  ch.consumed(0, 5000, out);  // more than was given: only the 700 outstanding count
  CHECK(decode(out) == Lines{"adjust 2 1000"});
  out.clear();
  ch.consumed(0, 100, out);  // nothing outstanding
  ch.consumed(7, 100, out);  // no such channel
  CHECK(out.empty());
  REQUIRE(ch.handle(data_msg(0, std::string(500, 'b')), out).ok());
  REQUIRE(ch.handle(data_msg(0, std::string(500, 'b')), out).ok());
  // Exactly one window again: a client that doesn't wait is a protocol error.
  CHECK_FALSE(ch.handle(data_msg(0, "x"), out).ok());
  CHECK(host.events.size() == 5);  // start + 4 inputs

  // Input Channels drops itself is consumed at once: data before exec/shell, extended data.
  host.events.clear();
  Channels ch2(cfg);
  out.clear();
  REQUIRE(ch2.handle(open_msg("session", 4), out).ok());
  out.clear();
  REQUIRE(ch2.handle(data_msg(0, std::string(500, 'c')), out).ok());
  CHECK(decode(out) == Lines{"adjust 4 500"});
  out.clear();
  REQUIRE(ch2.handle(req(0, "exec", false).string("x").take(), out).ok());
  REQUIRE(
      ch2.handle(
             WireWriter().u8(msg::kChannelExtendedData).u32(0).u32(1).string(std::string(500, 'd')).take(),
             out)
          .ok());
  CHECK(decode(out) == Lines{"adjust 4 500"});
  CHECK(host.events == Lines{"start 0 exec x"});
}

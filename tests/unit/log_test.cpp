// Logging: levels, the bounded ring, the console sink, rate limiting, and
// many threads logging at once while the control thread reads the ring.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"

using namespace keel;

namespace {
KEEL_LOG_MODULE(log_test, "test");
KEEL_LOG_MODULE(log_other, "test-other");

std::string drain(int fd) {
  std::string s;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    s.append(buf, static_cast<size_t>(n));
  }
  return s;
}

struct Quiet {  // console to nowhere, defaults restored
  Quiet() {
    log::set_console_fd(-1);
    log::reset_levels();
    log::clear_ring();
  }
  ~Quiet() {
    log::set_console_fd(2);
    log::reset_levels();
  }
};
}  // namespace

TEST_CASE("levels parse and print like OVS vlog") {
  for (auto l : {log::Level::off, log::Level::emer, log::Level::err, log::Level::warn, log::Level::info, log::Level::dbg})
    CHECK(log::parse_level(log::to_string(l)) == l);
  CHECK(log::parse_level("debug") == log::Level::dbg);
  CHECK(log::parse_level("warning") == log::Level::warn);
  CHECK_FALSE(log::parse_level("loud").has_value());
}

TEST_CASE("modules register themselves and filter by level") {
  Quiet q;
  CHECK(log::find_module("test") == &log_test);
  bool listed = false;
  for (const log::Module* m : log::modules()) listed |= m == &log_other;
  CHECK(listed);
  CHECK(log_test.level() == log::Level::info);
  KEEL_LOG(log_test, dbg, "not kept");
  KEEL_LOG(log_test, info, "kept %d", 1);
  log_test.set_level(log::Level::err);
  KEEL_LOG(log_test, warn, "not kept either");
  KEEL_LOG(log_test, err, "kept %d", 2);
  log_test.set_level(log::Level::off);
  KEEL_LOG(log_test, emer, "off is off");
  auto v = log::recent(10);
  REQUIRE(v.size() == 2);
  CHECK(v[0].text == "kept 1");
  CHECK(v[0].module == "test");
  CHECK(v[1].text == "kept 2");
  CHECK(v[1].level == log::Level::err);
  CHECK(v[1].seq == v[0].seq + 1);
  log::reset_levels();
  CHECK(log_test.level() == log::Level::info);
}

TEST_CASE("the ring keeps the last kRingEntries messages, oldest first, truncated") {
  Quiet q;
  const size_t total = log::kRingEntries + 44;
  for (size_t i = 0; i < total; ++i) KEEL_LOG(log_test, info, "m%zu", i);
  CHECK(log::logged() == total);
  auto v = log::recent(1000);
  REQUIRE(v.size() == log::kRingEntries);
  CHECK(v.front().text == "m44");
  CHECK(v.back().text == "m" + std::to_string(total - 1));
  for (size_t i = 1; i < v.size(); ++i) CHECK(v[i].seq == v[i - 1].seq + 1);
  CHECK(log::recent(3).size() == 3);
  CHECK(log::recent(3).back().text == v.back().text);

  const std::string big(1000, 'x');
  KEEL_LOG(log_test, info, "%s", big.c_str());
  CHECK(log::recent(1)[0].text.size() == log::kMaxMessage);
  CHECK(log::format_entry(log::recent(1)[0]).find("|test|INFO|xxx") != std::string::npos);
}

TEST_CASE("the console gets messages at the console level and above, one line each") {
  Quiet q;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  log::set_console_fd(fds[1]);
  KEEL_LOG(log_test, info, "quiet info");
  KEEL_LOG(log_test, warn, "loud warning");
  log::set_console_level(log::Level::info);
  KEEL_LOG(log_test, info, "now info too");
  log::note(log_test, log::Level::err, "ring only");
  log::set_console_fd(-1);
  close(fds[1]);
  std::string out = drain(fds[0]);
  close(fds[0]);
  CHECK(out.find("quiet info") == std::string::npos);
  CHECK(out.find("|test|WARN|loud warning\n") != std::string::npos);
  CHECK(out.find("|test|INFO|now info too\n") != std::string::npos);
  CHECK(out.find("ring only") == std::string::npos);
  CHECK(log::recent(1)[0].text == "ring only");  // but it is in the ring
}

TEST_CASE("rate limit: a burst, then RATE a minute, and the suppressed count") {
  log::RateLimit rl(5, 20);  // 5 a minute, burst 20: one token every 12 s
  const uint64_t s = 1'000'000'000;
  uint64_t t = 1000 * s;
  uint32_t skipped = 99;
  for (int i = 0; i < 20; ++i) CHECK(rl.allow(t, &skipped));
  CHECK(skipped == 0);
  CHECK_FALSE(rl.allow(t, &skipped));
  CHECK_FALSE(rl.allow(t + 11 * s, &skipped));
  CHECK(rl.allow(t + 12 * s, &skipped));
  CHECK(skipped == 2);  // the two refused above
  CHECK_FALSE(rl.allow(t + 13 * s, &skipped));
  // A long quiet period refills to the burst, no more.
  t += 3600 * s;
  int passed = 0;
  for (int i = 0; i < 100; ++i) passed += rl.allow(t, &skipped);
  CHECK(passed == 20);
}

TEST_CASE("a storm through KEEL_LOG_RL is cut to the burst") {
  Quiet q;
  const uint64_t before = log::suppressed();
  for (int i = 0; i < 10000; ++i) KEEL_LOG_RL(log_test, warn, 5, 20, "storm %d", i);
  CHECK(log::logged() == 20);
  CHECK(log::suppressed() - before == 10000 - 20);
}

TEST_CASE("many threads log while the control thread reads; nothing blocks, every message is counted") {
  Quiet q;
  constexpr int kThreads = 4, kEach = 20000;
  std::atomic<bool> stop{false};
  std::atomic<int> out_of_order{0};
  std::thread reader([&] {
    while (!stop.load()) {
      auto v = log::recent(50);
      for (size_t i = 1; i < v.size(); ++i) out_of_order += v[i].seq != v[i - 1].seq + 1;
    }
  });
  std::vector<std::thread> ws;
  for (int k = 0; k < kThreads; ++k)
    ws.emplace_back([k] {
      for (int i = 0; i < kEach; ++i) KEEL_LOG(log_other, info, "thread %d message %d", k, i);
    });
  for (auto& w : ws) w.join();
  stop = true;
  reader.join();
  CHECK(out_of_order == 0);
  CHECK(log::logged() + log::dropped() == uint64_t{kThreads} * kEach);
}

// Helpers shared by the sim-backend unit tests: a temporary directory and
// opening sim ports from spec strings (failing the test on any error).
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "datapath/datapath.h"
#include "flow/dp_actions.h"
#include "flow/dp_flow_syntax.h"
#include "keel/hal/backend.h"
#include "keel/hal/port_spec.h"
#include "hal/sim/ring_port.h"

namespace keel::test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");  // NOLINT(concurrency-mt-unsafe): no setenv in tests
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/keel-test-XXXXXX";
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::unique_ptr<hal::Backend> sim_backend(unsigned buffers = 4096) {
  auto b = hal::make_sim_backend(hal::SimOptions{buffers});
  REQUIRE(b.ok());
  return std::move(b).value();
}

inline Result<std::unique_ptr<hal::Port>> try_open(hal::Backend& b, const std::string& name,
                                                   const std::string& spec) {
  auto s = hal::parse_port_spec(name, spec);
  REQUIRE_MESSAGE(s.ok(), s.status().message());
  return b.open_port(s.value(), 1, 1);
}

inline std::unique_ptr<hal::Port> open_ok(hal::Backend& b, const std::string& name, const std::string& spec) {
  auto p = try_open(b, name, spec);
  REQUIRE_MESSAGE(p.ok(), p.status().message());
  return std::move(p).value();
}

// Opens a sim port NAME from `spec` (a ring, by default) with `n_txq` tx
// queues on `backend` and adds it to `dp`; its datapath port number goes
// to *id when given. Returns the ring port (null for another kind).
inline hal::sim::RingPort* add_sim_port(hal::Backend& backend, datapath::Datapath& dp, const char* name,
                                        const char* spec = "ring:size=1024", uint16_t n_txq = 1,
                                        uint16_t* id = nullptr) {
  auto parsed = hal::parse_port_spec(name, spec);
  REQUIRE(parsed.ok());
  auto port = backend.open_port(*parsed, 1, n_txq);
  REQUIRE(port.ok());
  auto* raw = dynamic_cast<hal::sim::RingPort*>(port->get());
  auto added = dp.add_port(std::move(port.value()));
  REQUIRE(added.ok());
  if (id) *id = *added;
  return raw;
}

// A datapath match / action list as written (ovs-dpctl text); the test
// stops with the parser's message when the text is wrong.
inline flow::Match parse_match(const std::string& text) {
  auto m = flow::parse_dp_match(text);
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  return *m;
}

inline flow::DpActions parse_actions(const std::string& text) {
  auto a = flow::parse_dp_actions(text);
  REQUIRE_MESSAGE(a.ok(), a.status().message());
  return *a;
}

}  // namespace keel::test

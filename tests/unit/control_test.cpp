// control::Control (control/control.h) and the command tree's declarations:
// every runnable command declared once; roles refused with one clear line
// and the state unchanged; the gate lets shows run beside each other on
// several trees while another tree changes the configuration.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "cli/console.h"
#include "control/control.h"
#include "control/system.h"

using namespace keel;

namespace {

struct Sys {
  std::unique_ptr<control::System> sys;
  Sys() {
    auto s = control::System::boot({});
    REQUIRE_MESSAGE(s.ok(), s.status().message());
    sys = std::move(*s);
  }
};

[[maybe_unused]] std::string run(cli::CommandTree& t, const std::string& line, Status* st = nullptr) {
  char* text = nullptr;
  size_t size = 0;
  FILE* mem = open_memstream(&text, &size);
  Status s = t.execute(line, mem);
  fclose(mem);
  std::string out(text, size);
  free(text);
  if (st) *st = std::move(s);
  return out;
}

}  // namespace

TEST_CASE("every runnable command is declared once") {
  Sys s;
  cli::CommandTree tree(*s.sys);
  const auto problems = tree.declaration_problems();
  for (const std::string& p : problems) MESSAGE(p);
  CHECK(problems.empty());
  CHECK(tree.command_paths().size() > 50);
}

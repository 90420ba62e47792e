// Fuzz target: the datapath actions parser never crashes; what it accepts
// validates, prints as text that parses back to the same encoding, and
// printing that again gives the same text. The input is also tried as an
// encoded list: validate_dp_actions() never crashes, and what it accepts
// prints as text that parses and prints back identically.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "flow/dp_actions.h"

using namespace keel::flow;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto a = parse_dp_actions(text);
  if (a.ok()) {
    if (!validate_dp_actions(a->bytes()).ok()) abort();
    std::string printed = format_dp_actions(*a);
    auto b = parse_dp_actions(printed);
    if (!b.ok() || !(*b == *a)) abort();
    if (format_dp_actions(*b) != printed) abort();
  }

  if (size % 8 == 0 && size <= kMaxDpActionsLen) {
    std::vector<uint64_t> words(size / 8);  // 8-byte aligned, as the encoding requires
    if (size) std::memcpy(words.data(), data, size);
    std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(words.data()), size);
    if (validate_dp_actions(bytes).ok()) {
      std::string printed = format_dp_actions(bytes);
      auto c = parse_dp_actions(printed);
      if (!c.ok()) abort();
      if (format_dp_actions(*c) != printed) abort();
    }
  }
  return 0;
}

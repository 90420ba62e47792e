// The list of boards. Adding a board = one file in boards/ + one line here.
#include <array>

#include "boards/board.h"

namespace keel::boards {

extern const Board kHostSim;
extern const Board kQemuVirt;
extern const Board kBlueField2;
extern const Board kBlueField3;

namespace {
const std::array<const Board*, 4> kBoards = {&kHostSim, &kQemuVirt, &kBlueField2, &kBlueField3};
}

const char* to_string(Backend b) { return b == Backend::sim ? "sim" : "dpdk"; }

std::span<const Board* const> all() { return kBoards; }

const Board* find(std::string_view name) {
  for (const Board* b : kBoards)
    if (b->name == name) return b;
  return nullptr;
}

const Board& default_board() { return *kBoards.front(); }

}  // namespace keel::boards

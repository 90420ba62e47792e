// Rx queue scheduling (rxq_sched.h). First cut: round-robin in every mode,
// affinity honoured, no auto load balancing.
#include "datapath/rxq_sched.h"

#include <algorithm>

namespace keel::datapath {

std::optional<RxqAssignMode> parse_rxq_assign(std::string_view s) {
  if (s == "cycles") return RxqAssignMode::cycles;
  if (s == "roundrobin") return RxqAssignMode::roundrobin;
  if (s == "group") return RxqAssignMode::group;
  return std::nullopt;
}

std::string_view to_string(RxqAssignMode m) {
  switch (m) {
    case RxqAssignMode::cycles: return "cycles";
    case RxqAssignMode::roundrobin: return "roundrobin";
    case RxqAssignMode::group: return "group";
  }
  return "cycles";
}

CpuMask parse_cpu_mask(std::string_view s, unsigned max_cores) {
  CpuMask m;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty()) {
    m.error = "empty mask";
    return m;
  }
  // Hex digits from the right: digit i covers cores 4i..4i+3.
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[s.size() - 1 - i];
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    else {
      m.error = std::string("'") + c + "' is not a hexadecimal digit";
      m.cores.clear();
      return m;
    }
    for (int b = 0; b < 4; ++b) {
      if (!(v & (1 << b))) continue;
      const int core = static_cast<int>(4 * i) + b;
      if (static_cast<unsigned>(core) >= max_cores) {
        m.error = "core " + std::to_string(core) + " does not exist (" + std::to_string(max_cores) + " cores)";
        m.cores.clear();
        return m;
      }
      m.cores.push_back(core);
    }
  }
  std::sort(m.cores.begin(), m.cores.end());
  if (m.cores.empty()) m.error = "the mask names no core";
  return m;
}

std::string format_cpu_mask(std::span<const int> cores) {
  // Nibbles, most significant first.
  int top = -1;
  for (int c : cores) top = std::max(top, c);
  if (top < 0) return "0x0";
  std::string out;
  for (int nib = top / 4; nib >= 0; --nib) {
    int v = 0;
    for (int c : cores)
      if (c >= 0 && c / 4 == nib) v |= 1 << (c % 4);
    out += "0123456789abcdef"[v];
  }
  return "0x" + out;
}

SchedPlan plan_rxqs(std::span<const SchedRxq> rxqs, const SchedConfig& cfg) {
  SchedPlan plan;
  const size_t n = cfg.pmd_cores.size();
  plan.pmd_of.assign(rxqs.size(), -1);
  plan.isolated.assign(n, false);
  if (n == 0) return plan;
  size_t next = 0;
  for (size_t i = 0; i < rxqs.size(); ++i) plan.pmd_of[i] = static_cast<int>(next++ % n);
  return plan;
}

AutoLbEstimate auto_lb_dry_run(std::span<const SchedRxq>, std::span<const int>, std::span<const PmdLoadSample>,
                               const SchedConfig&, const AutoLbConfig&) {
  return {};
}

bool AutoLb::tick(uint64_t, std::span<const SchedRxq>, std::span<const int>, std::span<const PmdLoadSample>,
                  const SchedConfig&) {
  return false;
}

}  // namespace keel::datapath

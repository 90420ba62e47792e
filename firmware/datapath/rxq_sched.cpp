// Rx queue scheduling (rxq_sched.h): Open vSwitch 3.1.0's
// sched_numa_list_schedule() and its pmd-auto-lb (lib/dpif-netdev.c), one
// NUMA node. Each function names the one it mirrors. Control-plane code:
// it allocates and formats freely, and throws nothing.
#include "datapath/rxq_sched.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <climits>
#include <cstdio>

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

namespace {

// printf into a std::string (the log lines keep Open vSwitch's formats).
template <typename... Args>
std::string fmt(const char* f, Args... args) {
  char buf[256];
  const int n = std::snprintf(buf, sizeof buf, f, args...);
  if (n < 0) return {};
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), f, args...);
  out.resize(static_cast<size_t>(n));
  return out;
}

// get_rxq_cyc_log(): the cycles are part of the lines except in roundrobin.
std::string cyc_log(RxqAssignMode mode, uint64_t cycles) {
  if (mode == RxqAssignMode::roundrobin) return {};
  return fmt(" (measured processing cycles %" PRIu64 ")", cycles);
}

// One node's PMDs (struct sched_numa / sched_pmd), sorted by core id.
struct SchedNuma {
  struct Pmd {
    size_t index;  // into SchedConfig::pmd_cores
    int core;
    uint64_t proc_cycles = 0;  // pmd_proc_cycles
    unsigned n_rxq = 0;
    bool isolated = false;
  };
  std::vector<Pmd> pmds;
  unsigned n_isolated = 0;
  size_t rr_cur_index = 0;  // rr_cur_index, rr_idx_inc: sched_numa_list_populate() starts at 0, upwards
  bool rr_idx_inc = true;

  // sched_numa_list_populate() + sort_numa_list_pmds(): compare_poll_thread_list()
  // orders by core_id as unsigned (an unpinned PMD, -1 here, sorts last).
  explicit SchedNuma(const std::vector<int>& cores) {
    for (size_t i = 0; i < cores.size(); ++i) pmds.push_back(Pmd{i, cores[i]});
    std::stable_sort(pmds.begin(), pmds.end(), [](const Pmd& a, const Pmd& b) {
      return static_cast<unsigned>(a.core) < static_cast<unsigned>(b.core);
    });
  }

  // dp_netdev_get_pmd(core) + sched_pmd_find_by_pmd().
  Pmd* find_by_core(int core) {
    if (core < 0) return nullptr;
    for (Pmd& p : pmds)
      if (p.core == core) return &p;
    return nullptr;
  }

  // sched_numa_noniso_pmd_count().
  unsigned noniso_count() const {
    return pmds.size() > n_isolated ? static_cast<unsigned>(pmds.size()) - n_isolated : 0;
  }

  // sched_pmd_next_rr(): updown walks 0,1,2,2,1,0,0,1,..., otherwise 0,1,2,0,1,2.
  Pmd& next_rr(bool updown) {
    const size_t idx = rr_cur_index;
    if (rr_idx_inc) {
      if (rr_cur_index == pmds.size() - 1) {
        if (updown)
          rr_idx_inc = false;
        else
          rr_cur_index = 0;
      } else {
        ++rr_cur_index;
      }
    } else {
      if (rr_cur_index == 0)
        rr_idx_inc = true;
      else
        --rr_cur_index;
    }
    return pmds[idx];
  }

  // sched_pmd_next_noniso_rr(): the walk goes on over isolated PMDs (they
  // keep their turn), up to twice the PMD count.
  Pmd* next_noniso_rr(bool updown) {
    for (size_t i = 0; i < pmds.size() * 2; ++i) {
      Pmd& p = next_rr(updown);
      if (!p.isolated) return &p;
    }
    return nullptr;
  }

  // sched_pmd_get_lowest() / sched_pmd_new_lowest(): the non-isolated PMD
  // with the fewest cycles (the queue has measured cycles) or the fewest
  // queues (it has none); on a tie the first in core order.
  Pmd* lowest(bool has_cyc) {
    Pmd* best = nullptr;
    for (Pmd& p : pmds) {
      if (p.isolated) continue;
      if (!best || (has_cyc ? p.proc_cycles < best->proc_cycles : p.n_rxq < best->n_rxq)) best = &p;
    }
    return best;
  }

  // sched_pmd_next(): group takes the lowest; cycles walks up and down;
  // roundrobin walks around.
  Pmd* next(RxqAssignMode mode, bool has_proc) {
    if (mode == RxqAssignMode::group) return lowest(has_proc);
    return next_noniso_rr(mode == RxqAssignMode::cycles);
  }

  // sched_pmd_add_rxq().
  static void add(Pmd& p, uint64_t cycles) {
    ++p.n_rxq;
    p.proc_cycles += cycles;
  }
};

}  // namespace

bool rxq_isolate_effective(const SchedConfig& cfg) { return cfg.isolate || cfg.mode != RxqAssignMode::group; }

std::string_view rxq_isolate_warning(const SchedConfig& cfg) {
  if (rxq_isolate_effective(cfg) == cfg.isolate) return {};
  return "pmd-rxq-isolate can only be set false when using pmd-rxq-assign=group";
}

// sched_numa_list_schedule() with one numa node (0).
// The core a log line names for PMD p (SchedConfig::shown_cores).
unsigned shown_core(const SchedConfig& cfg, const SchedNuma::Pmd& p) {
  const int c = p.index < cfg.shown_cores.size() ? cfg.shown_cores[p.index] : p.core;
  return static_cast<unsigned>(c < 0 ? 0 : c);
}

SchedPlan plan_rxqs(std::span<const SchedRxq> rxqs, const SchedConfig& cfg) {
  SchedPlan plan;
  plan.pmd_of.assign(rxqs.size(), -1);
  SchedNuma numa(cfg.pmd_cores);
  const bool iso = rxq_isolate_effective(cfg);
  const RxqAssignMode mode = cfg.mode;

  // Pinned queues first, in walk order, onto the PMD of their core; the
  // rest (and those pinned to a core without a PMD) wait in `unpinned`.
  std::vector<size_t> unpinned;
  for (size_t i = 0; i < rxqs.size(); ++i) {
    const SchedRxq& q = rxqs[i];
    if (q.affinity < 0) {
      unpinned.push_back(i);
      continue;
    }
    SchedNuma::Pmd* p = numa.find_by_core(q.affinity);
    if (!p) {
      plan.messages.push_back(
          fmt("Core %2u cannot be pinned with port '%s' rx queue %d. Use pmd-cpu-mask to "
              "enable a pmd on core %u. An alternative core will be assigned.",
              static_cast<unsigned>(q.affinity), q.port_name.c_str(), int{q.queue},
              static_cast<unsigned>(q.affinity)));
      unpinned.push_back(i);
      continue;
    }
    if (iso && !p->isolated) {
      p->isolated = true;
      ++numa.n_isolated;
    }
    plan.info.push_back(fmt("Core %2u on numa node %d is pinned with port '%s' rx queue %d%s",
                            shown_core(cfg, *p), 0, q.port_name.c_str(), int{q.queue},
                            cyc_log(mode, q.cycles).c_str()));
    SchedNuma::add(*p, q.cycles);
    plan.pmd_of[i] = static_cast<int>(p->index);
  }

  // compare_rxq_cycles(): most cycles first; ties by port, then queue.
  if (unpinned.size() > 1 && mode != RxqAssignMode::roundrobin) {
    std::sort(unpinned.begin(), unpinned.end(), [&](size_t a, size_t b) {
      const SchedRxq& qa = rxqs[a];
      const SchedRxq& qb = rxqs[b];
      if (qa.cycles != qb.cycles) return qa.cycles > qb.cycles;
      if (qa.port != qb.port) return qa.port < qb.port;
      return qa.queue < qb.queue;
    });
  }

  bool start_logged = false;
  for (size_t i : unpinned) {
    const SchedRxq& q = rxqs[i];
    if (!start_logged) {
      plan.info.push_back(fmt("Performing pmd to rx queue assignment using %s algorithm.",
                              std::string(to_string(mode)).c_str()));
      start_logged = true;
    }
    // A node without non-isolated PMDs can't take it (and there is no other).
    SchedNuma::Pmd* p = numa.noniso_count() ? numa.next(mode, q.cycles != 0) : nullptr;
    if (!p) {
      plan.messages.push_back(
          fmt("No non-isolated pmd on any numa available for port '%s' rx queue %d%s. "
              "This rx queue will not be polled.",
              q.port_name.c_str(), int{q.queue}, cyc_log(mode, q.cycles).c_str()));
      continue;
    }
    plan.info.push_back(fmt("Core %2u on numa node %d assigned port '%s' rx queue %d%s.",
                            shown_core(cfg, *p), 0, q.port_name.c_str(), int{q.queue},
                            cyc_log(mode, q.cycles).c_str()));
    SchedNuma::add(*p, q.cycles);
    plan.pmd_of[i] = static_cast<int>(p->index);
  }

  // sched_numa_list_put_in_place(): the PMDs take the plan's isolation.
  plan.isolated.assign(cfg.pmd_cores.size(), false);
  plan.pmd_cycles.assign(cfg.pmd_cores.size(), 0);
  for (const SchedNuma::Pmd& p : numa.pmds) {
    plan.isolated[p.index] = p.isolated;
    plan.pmd_cycles[p.index] = p.proc_cycles;
  }
  return plan;
}

// --- pmd-rxq-affinity ---

namespace {

// str_to_int(s, 0, &v): strtoll base 0 over the whole token, within int.
bool ovs_str_to_int(std::string_view s, int* out) {
  size_t i = 0;
  // strtoll skips leading white space; only \v and \f can be left in a token.
  while (i < s.size() && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))) ++i;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  int base = 10;
  if (i < s.size() && s[i] == '0') {
    if (i + 2 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X') &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      base = 16;
      i += 2;
    } else {
      base = 8;  // the 0 itself is a digit
    }
  }
  if (i >= s.size()) return false;  // no digits ("", "+", "-")
  long long v = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'z')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'Z')
      d = c - 'A' + 10;
    else
      return false;
    if (d >= base) return false;  // the tail would not be empty
    v = v * base + d;
    if (v > static_cast<long long>(INT_MAX) + 1) return false;  // out of int either way
  }
  if (neg) v = -v;
  if (v < INT_MIN || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

bool is_one_of(char c, std::string_view set) { return set.find(c) != std::string_view::npos; }

// parse_value(): up to a delimiter, parentheses nesting.
size_t parse_value(std::string_view s, std::string_view delims) {
  size_t n = 0;
  while (n < s.size() && !is_one_of(s[n], delims)) {
    if (s[n] == '(') {
      int level = 0;
      do {
        if (n >= s.size()) return n;
        if (s[n] == '(')
          ++level;
        else if (s[n] == ')')
          --level;
        ++n;
      } while (level > 0);
    } else {
      ++n;
    }
  }
  return n;
}

}  // namespace

// parse_affinity_list() over ofputil_parse_key_value().
RxqAffinity parse_rxq_affinity(std::string_view s) {
  RxqAffinity a;
  constexpr std::string_view kSpaceComma = ", \t\r\n";
  size_t pos = 0;
  for (;;) {
    while (pos < s.size() && is_one_of(s[pos], kSpaceComma)) ++pos;
    if (pos >= s.size()) break;
    const size_t token_start = pos;
    std::string_view rest = s.substr(pos);
    size_t key_len = 0;
    while (key_len < rest.size() && !is_one_of(rest[key_len], ":=(, \t\r\n")) ++key_len;
    const std::string_view key = rest.substr(0, key_len);
    const char key_delim = key_len < rest.size() ? rest[key_len] : '\0';
    pos += key_len + (key_delim != '\0');
    std::string_view value;
    if (key_delim == ':' || key_delim == '=' || key_delim == '(') {
      const std::string_view vdelims = key_delim == '(' ? std::string_view(")") : kSpaceComma;
      rest = s.substr(pos);
      size_t value_len = parse_value(rest, vdelims);
      // "(x)->y" stays one value (then not a number).
      if (key_delim == '(' && value_len + 2 < rest.size() && rest[value_len] == ')' &&
          rest[value_len + 1] == '-' && rest[value_len + 2] == '>')
        value_len += parse_value(rest.substr(value_len), kSpaceComma);
      value = rest.substr(0, value_len);
      pos += value_len + (value_len < rest.size());
    }
    int queue = 0, core = 0;
    std::string_view token = s.substr(token_start, pos - token_start);  // for the error text
    if (!token.empty() && is_one_of(token.back(), kSpaceComma)) token.remove_suffix(1);
    const std::string pair(token);
    if (key_delim != ':' && key_delim != '=' && key_delim != '(') {
      a.error = "pmd-rxq-affinity: '" + pair + "' is not a queue:core pair";
    } else if (!ovs_str_to_int(key, &queue) || queue < 0) {
      a.error =
          "pmd-rxq-affinity: '" + pair + "': '" + std::string(key) + "' is not a queue id (an integer >= 0)";
    } else if (!ovs_str_to_int(value, &core) || core < 0) {
      a.error =
          "pmd-rxq-affinity: '" + pair + "': '" + std::string(value) + "' is not a core id (an integer >= 0)";
    }
    if (!a.error.empty()) {
      a.pairs.clear();
      return a;
    }
    if (queue <= UINT16_MAX) a.pairs.emplace_back(static_cast<uint16_t>(queue), core);
  }
  return a;
}

std::vector<int> rxq_affinity_cores(const RxqAffinity& a, unsigned n_rxq) {
  std::vector<int> cores(n_rxq, -1);
  for (const auto& [queue, core] : a.pairs)
    if (queue < n_rxq) cores[queue] = core;
  return cores;
}

// --- pmd-auto-lb ---

uint64_t auto_lb_rebal_interval_ms(uint64_t minutes) {
  constexpr uint64_t kMinToMs = 60'000, kMax = 20'000,
                     kDefault = 1;  // ALB_REBALANCE_INTERVAL, MAX_ALB_REBALANCE_INTERVAL
  if (minutes > kMax) minutes = kDefault;
  return minutes ? minutes * kMinToMs : kMinToMs;
}
unsigned auto_lb_load_threshold_pct(uint64_t pct) { return pct > 100 ? 95 : static_cast<unsigned>(pct); }
unsigned auto_lb_improvement_threshold_pct(uint64_t pct) {
  return pct > 100 ? 25 : static_cast<unsigned>(pct);
}

// variance(): integer mean, then the mean squared difference (unsigned
// wrap-around in a[i] - mean squares to the same value as mean - a[i]).
uint64_t sched_variance(std::span<const uint64_t> a) {
  const uint64_t n = a.size();
  if (!n) return 0;
  uint64_t sum = 0, sq_diff = 0;
  for (uint64_t v : a) sum += v;
  if (sum) {
    const uint64_t mean = sum / n;
    for (uint64_t v : a) sq_diff += (v - mean) * (v - mean);
  }
  return sq_diff ? sq_diff / n : 0;
}

namespace {

// sched_numa_variance(): the non-isolated PMDs' estimated busy %.
uint64_t numa_variance(const std::vector<uint64_t>& proc_cycles, const std::vector<bool>& isolated,
                       std::span<const PmdLoadSample> pmds) {
  std::vector<uint64_t> percent_busy;
  for (size_t p = 0; p < proc_cycles.size(); ++p) {
    if (isolated[p]) continue;
    const uint64_t total = p < pmds.size() ? pmds[p].window_cycles : 0;
    percent_busy.push_back(total ? proc_cycles[p] * 100 / total : 0);
  }
  return sched_variance(percent_busy);
}

int current_of(std::span<const int> current_pmd_of, size_t i, size_t n_pmds) {
  if (i >= current_pmd_of.size()) return -1;
  const int p = current_pmd_of[i];
  return p >= 0 && static_cast<size_t>(p) < n_pmds ? p : -1;
}

}  // namespace

// pmd_rebalance_dry_run() for one numa node.
AutoLbEstimate auto_lb_dry_run(std::span<const SchedRxq> rxqs, std::span<const int> current_pmd_of,
                               std::span<const PmdLoadSample> pmds, const SchedConfig& cfg,
                               const AutoLbConfig& lb) {
  const size_t n = cfg.pmd_cores.size();
  // sched_numa_list_assignments(): where the queues are now. A PMD with a
  // queue whose affinity is set counts as isolated — even one pinned to a
  // core without a PMD and placed here like an unpinned queue (Open
  // vSwitch tests rxq->core_id, not where the pin took).
  const bool iso = rxq_isolate_effective(cfg);
  std::vector<uint64_t> cur_cycles(n, 0);
  std::vector<bool> cur_isolated(n, false);
  for (size_t i = 0; i < rxqs.size(); ++i) {
    const int p = current_of(current_pmd_of, i, n);
    if (p < 0) continue;
    if (rxqs[i].affinity >= 0 && iso) cur_isolated[static_cast<size_t>(p)] = true;
    cur_cycles[static_cast<size_t>(p)] += rxqs[i].cycles;
  }
  const SchedPlan est = plan_rxqs(rxqs, cfg);

  AutoLbEstimate e;
  e.current_variance = numa_variance(cur_cycles, cur_isolated, pmds);
  e.new_variance = numa_variance(est.pmd_cycles, est.isolated, pmds);
  if (e.new_variance < e.current_variance)
    e.improvement_pct =
        static_cast<unsigned>((e.current_variance - e.new_variance) * 100 / e.current_variance);
  e.rebalance = e.improvement_pct >= lb.improvement_threshold_pct;
  return e;
}

// pmd_rebalance_dry_run_needed() (without its cache of the last answer: the
// answer only changes with the configuration it would be recomputed for).
bool auto_lb_dry_run_needed(std::span<const int> current_pmd_of, std::span<const PmdLoadSample> pmds,
                            const SchedConfig& cfg, std::string* reason) {
  auto no = [&](const char* why) {
    if (reason) *reason = why;
    return false;
  };
  if (cfg.mode == RxqAssignMode::roundrobin)
    return no("PMD auto load balance nothing to do, pmd-rxq-assign=roundrobin assignment type configured.");
  const size_t n = cfg.pmd_cores.size();
  std::vector<unsigned> polled(n, 0);
  for (size_t i = 0; i < current_pmd_of.size(); ++i) {
    const int p = current_of(current_pmd_of, i, n);
    if (p >= 0) ++polled[static_cast<size_t>(p)];
  }
  unsigned cnt = 0;
  bool multi_rxq = false;
  for (size_t p = 0; p < n; ++p) {
    if (p < pmds.size() && pmds[p].isolated) continue;
    if (polled[p] > 1) multi_rxq = true;
    if (cnt && multi_rxq) {
      if (reason) reason->clear();
      return true;
    }
    ++cnt;
  }
  return no("PMD auto load balance nothing to do, not enough non-isolated PMDs or RxQs.");
}

void AutoLb::configure(const AutoLbConfig& c) {
  if (!c.enabled) timer_running_ = false;  // set_pmd_auto_lb(): rebalance_poll_timer = 0
  cfg_ = c;
}

void AutoLb::rebalanced(uint64_t now_ms) {
  last_rebalance_ms_ = now_ms;
  std::fill(overloaded_.begin(), overloaded_.end(), 0u);
}

// dpif_netdev_run()'s pmd-auto-lb block, with the per-interval overload
// count of dp_netdev_pmd_try_optimize() done here from the PMDs' figures.
bool AutoLb::tick(uint64_t now_ms, std::span<const SchedRxq> rxqs, std::span<const int> current_pmd_of,
                  std::span<const PmdLoadSample> pmds, const SchedConfig& cfg) {
  if (!cfg_.enabled) {
    timer_running_ = false;
    return false;
  }
  // A different PMD set: every PMD was (re)started, their runs begin anew.
  if (overloaded_.size() != pmds.size()) {
    overloaded_.assign(pmds.size(), 0);
    seen_intervals_.assign(pmds.size(), 0);
    for (size_t p = 0; p < pmds.size(); ++p) seen_intervals_[p] = pmds[p].intervals_closed;
  }
  for (size_t p = 0; p < pmds.size(); ++p) {
    const PmdLoadSample& s = pmds[p];
    if (s.intervals_closed == seen_intervals_[p]) continue;
    if (s.intervals_closed < seen_intervals_[p]) overloaded_[p] = 0;  // restarted: a reload
    seen_intervals_[p] = s.intervals_closed;
    if (s.isolated) continue;  // only !pmd->isolated PMDs count (the run is left as it is)
    unsigned load = 0;
    if (s.interval_busy_cycles && s.interval_cycles)
      load = static_cast<unsigned>(std::min<uint64_t>(s.interval_busy_cycles * 100 / s.interval_cycles, 100));
    if (load >= cfg_.load_threshold_pct)
      ++overloaded_[p];
    else
      overloaded_[p] = 0;
  }

  if (!timer_running_) {
    timer_running_ = true;
    timer_ms_ = now_ms;
    return false;
  }
  if (!(timer_ms_ + cfg_.rebal_interval_ms < now_ms)) return false;
  timer_ms_ = now_ms;
  bool overloaded = false;
  for (unsigned n : overloaded_)
    if (n >= kAutoLbOverloadIntervals) overloaded = true;
  if (!overloaded) return false;
  if (!auto_lb_dry_run_needed(current_pmd_of, pmds, cfg)) return false;
  last_ = auto_lb_dry_run(rxqs, current_pmd_of, pmds, cfg, cfg_);
  return last_.rebalance;
}

}  // namespace keel::datapath

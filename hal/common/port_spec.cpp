// parse_port_spec / parse_port_arg: the --port NAME=SPEC grammar of
// port_spec.h, checked at configuration time so that a typo is reported with
// the offending token and the whole spec ("port p0: unknown pcap option 'lop'
// in 'pcap:in=a,lop=2'") instead of surfacing later as a missing file.
//
// Only the syntax is checked here; whether a file exists or a TAP device can
// be created is the backend's business when it opens the port.
//
// Thread-safety: pure functions of their arguments; call from any thread.
#include "keel/hal/port_spec.h"

#include <charconv>
#include <string>
#include <string_view>

namespace keel::hal {

const char* to_string(PortKind k) {
  switch (k) {
    case PortKind::pcap:
      return "pcap";
    case PortKind::ring:
      return "ring";
    case PortKind::tap:
      return "tap";
    case PortKind::null:
      return "null";
    case PortKind::sample:
      return "sample";
    case PortKind::dpdk:
      return "dpdk";
  }
  return "unknown";
}

namespace {

constexpr size_t kMaxNameLen = 15;  // fits IFNAMSIZ and `show ports` columns
constexpr uint64_t kMaxRingSize = 1u << 20;

// Builds the error for port `name`, quoting the spec as written.
Status bad(std::string_view name, std::string_view what, std::string_view spec) {
  std::string m = "port ";
  m += name;
  m += ": ";
  m += what;
  m += " in '";
  m += spec;
  m += "'";
  return invalid(std::move(m));
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

bool valid_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

Status check_name(std::string_view name) {
  if (name.empty()) return invalid("port name is empty: use 1 to 15 of A-Z a-z 0-9 _ . -");
  if (name.size() > kMaxNameLen) {
    return invalid("port name " + quoted(name) + " is longer than 15 characters");
  }
  for (char c : name) {
    if (!valid_name_char(c)) {
      return invalid("port name " + quoted(name) + " has " + quoted(std::string_view(&c, 1)) +
                     ": use only A-Z a-z 0-9 _ . -");
    }
  }
  return {};
}

// Decimal unsigned integer, the whole token, no sign.
bool parse_u64(std::string_view s, uint64_t& out) {
  if (s.empty() || s.front() < '0' || s.front() > '9') return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

// rxq=Q of a ring or pcap port: 1..Port::kMaxQueues, once.
Status parse_rxq(PortSpec& ps, bool& have, std::string_view kind, std::string_view value,
                 std::string_view spec) {
  if (have) return bad(ps.name, std::string(kind) + " option 'rxq' given twice", spec);
  have = true;
  uint64_t n = 0;
  if (!parse_u64(value, n) || n < 1 || n > Port::kMaxQueues) {
    return bad(ps.name,
               std::string(kind) + " rxq " + quoted(value) + " must be a number of rx queues from 1 to " +
                   std::to_string(Port::kMaxQueues),
               spec);
  }
  ps.rxq = static_cast<uint16_t>(n);
  return {};
}

struct Option {
  std::string_view key;
  std::string_view value;
};

// Calls fn(Option) for each "key=value" of a comma-separated list; stops at
// the first error (from the syntax or from fn).
template <typename Fn>
Status for_each_option(std::string_view name, std::string_view kind, std::string_view opts,
                       std::string_view spec, Fn&& fn) {
  while (true) {
    size_t comma = opts.find(',');
    std::string_view tok = opts.substr(0, comma);
    if (tok.empty()) return bad(name, "empty " + std::string(kind) + " option", spec);
    size_t eq = tok.find('=');
    if (eq == std::string_view::npos) {
      return bad(name, std::string(kind) + " option " + quoted(tok) + " needs a value (KEY=VALUE)", spec);
    }
    Option o{tok.substr(0, eq), tok.substr(eq + 1)};
    if (o.value.empty()) {
      return bad(name, std::string(kind) + " option " + quoted(tok) + " has an empty value", spec);
    }
    if (Status s = fn(o); !s.ok()) return s;
    if (comma == std::string_view::npos) return {};
    opts.remove_prefix(comma + 1);
  }
}

Status parse_pcap(PortSpec& ps, bool has_opts, std::string_view opts, std::string_view spec) {
  const std::string_view name = ps.name;
  auto needs = [&] { return bad(name, "pcap needs in=FILE, out=FILE or both", spec); };
  if (!has_opts || opts.empty()) return needs();
  bool have_loop = false, have_rxq = false;
  std::string_view loop_tok;
  Status s = for_each_option(name, "pcap", opts, spec, [&](const Option& o) -> Status {
    if (o.key == "in" || o.key == "out") {
      std::string& dst = o.key == "in" ? ps.pcap_in : ps.pcap_out;
      if (!dst.empty()) return bad(name, "pcap option " + quoted(o.key) + " given twice", spec);
      dst = std::string(o.value);
      return {};
    }
    if (o.key == "loop") {
      if (have_loop) return bad(name, "pcap option 'loop' given twice", spec);
      have_loop = true;
      loop_tok = o.value;
      if (!parse_u64(o.value, ps.loops)) {
        return bad(name, "pcap loop " + quoted(o.value) + " is not a number", spec);
      }
      return {};
    }
    if (o.key == "rxq") return parse_rxq(ps, have_rxq, "pcap", o.value, spec);
    return bad(name, "unknown pcap option " + quoted(o.key), spec);
  });
  if (!s.ok()) return s;
  if (ps.pcap_in.empty() && ps.pcap_out.empty()) return needs();
  if (have_loop && ps.pcap_in.empty()) {
    return bad(name, "pcap loop=" + std::string(loop_tok) + " needs in=FILE", spec);
  }
  if (have_rxq && ps.pcap_in.empty()) {
    return bad(name,
               "pcap rxq=" + std::to_string(ps.rxq) + " needs in=FILE (an output-only port receives nothing)",
               spec);
  }
  return {};
}

Status parse_ring(PortSpec& ps, bool has_opts, std::string_view opts, std::string_view spec) {
  if (!has_opts) return {};
  const std::string_view name = ps.name;
  bool have_size = false, have_rxq = false;
  return for_each_option(name, "ring", opts, spec, [&](const Option& o) -> Status {
    if (o.key == "rxq") return parse_rxq(ps, have_rxq, "ring", o.value, spec);
    if (o.key != "size") return bad(name, "unknown ring option " + quoted(o.key), spec);
    if (have_size) return bad(name, "ring option 'size' given twice", spec);
    have_size = true;
    uint64_t n = 0;
    // Power of two: the rings are Vyukov rings indexed by mask, and a size the
    // user asked for should be the capacity they get.
    if (!parse_u64(o.value, n) || n < 2 || n > kMaxRingSize || (n & (n - 1)) != 0) {
      return bad(name,
                 "ring size " + quoted(o.value) + " must be a power of two from 2 to " +
                     std::to_string(kMaxRingSize),
                 spec);
    }
    ps.ring_size = static_cast<uint32_t>(n);
    return {};
  });
}

Status parse_tap(PortSpec& ps, bool has_opts, std::string_view ifname, std::string_view spec) {
  const std::string_view name = ps.name;
  if (!has_opts || ifname.empty()) return bad(name, "tap needs an interface name (tap:IFNAME)", spec);
  if (ifname.find(",rxq=") != std::string_view::npos || ifname.starts_with("rxq=")) {
    return bad(name, "tap has one rx queue: it takes no rxq option", spec);
  }
  // The kernel's dev_valid_name(): < IFNAMSIZ, not "." or "..", no '/', ':'
  // or whitespace.
  if (ifname.size() > kMaxNameLen) {
    return bad(name, "tap interface name " + quoted(ifname) + " is longer than 15 characters", spec);
  }
  if (ifname == "." || ifname == "..") {
    return bad(name, "tap interface name " + quoted(ifname) + " is not allowed", spec);
  }
  for (char c : ifname) {
    if (c == '/' || c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
        c == '=' || c == ',') {
      return bad(
          name,
          "tap interface name " + quoted(ifname) + " may not contain " + quoted(std::string_view(&c, 1)),
          spec);
    }
  }
  ps.ifname = std::string(ifname);
  return {};
}

Status parse_sample(PortSpec& ps, bool has_opts, std::string_view opts, std::string_view spec) {
  if (!has_opts) return {};
  const std::string_view name = ps.name;
  bool have_pps = false;
  return for_each_option(name, "sample", opts, spec, [&](const Option& o) -> Status {
    if (o.key != "pps") return bad(name, "unknown sample option " + quoted(o.key), spec);
    if (have_pps) return bad(name, "sample option 'pps' given twice", spec);
    have_pps = true;
    if (!parse_u64(o.value, ps.pps)) {
      return bad(name, "sample pps " + quoted(o.value) + " is not a number", spec);
    }
    return {};
  });
}

// dpdk:DEVARGS[,n_rxq=N][,n_txq=N]: keel's queue options are taken out of
// the device arguments (no DPDK driver has keys of those names; the EAL
// would refuse them as unknown), wherever they stand after the device name.
Status parse_dpdk(PortSpec& ps, std::string_view opts, std::string_view spec) {
  const std::string_view name = ps.name;
  if (opts.empty() || opts.front() == ',')
    return bad(name, "dpdk needs device arguments (dpdk:DEVARGS: a PCI address or vdev string)", spec);
  std::string devargs;
  bool have_rxq = false, have_txq = false;
  for (size_t at = 0, n = 0; at <= opts.size(); ++n) {
    size_t comma = opts.find(',', at);
    if (comma == std::string_view::npos) comma = opts.size();
    const std::string_view tok = opts.substr(at, comma - at);
    at = comma + 1;
    const bool rxq = tok.starts_with("n_rxq="), txq = tok.starts_with("n_txq=");
    if (n == 0 || (!rxq && !txq)) {
      if (!devargs.empty()) devargs += ',';
      devargs += tok;
      continue;
    }
    const std::string_view key = tok.substr(0, 5), value = tok.substr(6);
    bool& have = rxq ? have_rxq : have_txq;
    if (have) return bad(name, "dpdk option " + quoted(key) + " given twice", spec);
    have = true;
    uint64_t v = 0;
    if (!parse_u64(value, v) || v < 1 || v > Port::kMaxQueues) {
      return bad(name,
                 "dpdk " + std::string(key) + " " + quoted(value) + " must be a number of " +
                     (rxq ? "rx" : "tx") + " queues from 1 to " + std::to_string(Port::kMaxQueues),
                 spec);
    }
    (rxq ? ps.rxq : ps.txq) = static_cast<uint16_t>(v);
  }
  ps.devargs = std::move(devargs);
  return {};
}

}  // namespace

Result<PortSpec> parse_port_spec(std::string_view name, std::string_view spec) {
  if (Status s = check_name(name); !s.ok()) return s;
  PortSpec ps;
  ps.name = std::string(name);
  ps.text = std::string(spec);
  if (spec.empty()) {
    return invalid("port " + ps.name +
                   ": empty spec (expected pcap:, ring, tap:, null, sample or "
                   "dpdk:)");
  }

  size_t colon = spec.find(':');
  std::string_view kind = spec.substr(0, colon);
  bool has_opts = colon != std::string_view::npos;
  std::string_view opts = has_opts ? spec.substr(colon + 1) : std::string_view{};
  if (has_opts && opts.empty() && (kind == "ring" || kind == "null" || kind == "sample")) {
    return bad(name, "nothing after " + quoted(std::string(kind) + ":"), spec);
  }

  Status s;
  if (kind == "pcap") {
    ps.kind = PortKind::pcap;
    s = parse_pcap(ps, has_opts, opts, spec);
  } else if (kind == "ring") {
    ps.kind = PortKind::ring;
    s = parse_ring(ps, has_opts, opts, spec);
  } else if (kind == "tap") {
    ps.kind = PortKind::tap;
    s = parse_tap(ps, has_opts, opts, spec);
  } else if (kind == "null") {
    ps.kind = PortKind::null;
    if (has_opts) s = bad(name, "null takes no options, got " + quoted(opts), spec);
  } else if (kind == "sample") {
    ps.kind = PortKind::sample;
    s = parse_sample(ps, has_opts, opts, spec);
  } else if (kind == "dpdk") {
    ps.kind = PortKind::dpdk;
    s = parse_dpdk(ps, opts, spec);
  } else {
    s = bad(name, "unknown port type " + quoted(kind) + " (expected pcap, ring, tap, null, sample or dpdk)",
            spec);
  }
  if (!s.ok()) return s;
  return ps;
}

Result<PortSpec> parse_port_arg(std::string_view arg) {
  size_t eq = arg.find('=');
  if (eq == std::string_view::npos) {
    return invalid("--port " + quoted(arg) + ": expected NAME=SPEC (e.g. p0=pcap:in=a.pcap)");
  }
  return parse_port_spec(arg.substr(0, eq), arg.substr(eq + 1));
}

}  // namespace keel::hal

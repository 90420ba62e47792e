// parse_port_spec / parse_port_arg: every form of the grammar in port_spec.h,
// and errors that name the offending token and quote the spec.
#include <doctest/doctest.h>

#include <string>

#include "keel/hal/port_spec.h"

using keel::hal::parse_port_arg;
using keel::hal::parse_port_spec;
using keel::hal::PortKind;
using keel::hal::PortRole;

namespace {

std::string err(std::string_view name, std::string_view spec) {
  auto r = parse_port_spec(name, spec);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == keel::Errc::invalid_argument);
  return r.status().message();
}

bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("to_string of roles and kinds") {
  CHECK(std::string(to_string(PortRole::uplink)) == "uplink");
  CHECK(std::string(to_string(PortRole::host_representor)) == "host-representor");
  CHECK(std::string(to_string(PortRole::vf)) == "vf");
  CHECK(std::string(to_string(PortRole::internal)) == "internal");
  CHECK(std::string(to_string(PortKind::pcap)) == "pcap");
  CHECK(std::string(to_string(PortKind::ring)) == "ring");
  CHECK(std::string(to_string(PortKind::tap)) == "tap");
  CHECK(std::string(to_string(PortKind::null)) == "null");
  CHECK(std::string(to_string(PortKind::sample)) == "sample");
  CHECK(std::string(to_string(PortKind::dpdk)) == "dpdk");
}

TEST_CASE("pcap specs") {
  auto r = parse_port_spec("p0", "pcap:in=a.pcap");
  REQUIRE(r.ok());
  CHECK(r->name == "p0");
  CHECK(r->kind == PortKind::pcap);
  CHECK(r->text == "pcap:in=a.pcap");
  CHECK(r->pcap_in == "a.pcap");
  CHECK(r->pcap_out.empty());
  CHECK(r->loops == 1);

  r = parse_port_spec("p0", "pcap:out=/tmp/x/b.pcap");
  REQUIRE(r.ok());
  CHECK(r->pcap_in.empty());
  CHECK(r->pcap_out == "/tmp/x/b.pcap");

  r = parse_port_spec("p0", "pcap:in=a.pcap,out=b.pcap,loop=0");
  REQUIRE(r.ok());
  CHECK(r->pcap_in == "a.pcap");
  CHECK(r->pcap_out == "b.pcap");
  CHECK(r->loops == 0);

  r = parse_port_spec("p0", "pcap:loop=7,in=a.pcap");  // order does not matter
  REQUIRE(r.ok());
  CHECK(r->loops == 7);
}

TEST_CASE("pcap spec errors name the token") {
  CHECK(err("p0", "pcap:in=a,lop=2") == "port p0: unknown pcap option 'lop' in 'pcap:in=a,lop=2'");
  CHECK(err("p0", "pcap:in=a,loop=x") == "port p0: pcap loop 'x' is not a number in 'pcap:in=a,loop=x'");
  CHECK(has(err("p0", "pcap:in=a,loop=-1"), "'-1' is not a number"));
  CHECK(has(err("p0", "pcap:in=a,loop=3x"), "'3x' is not a number"));
  CHECK(has(err("p0", "pcap:in=a,loop=99999999999999999999999"), "is not a number"));
  CHECK(has(err("p0", "pcap"), "pcap needs in=FILE, out=FILE or both in 'pcap'"));
  CHECK(has(err("p0", "pcap:"), "pcap needs in=FILE, out=FILE or both"));
  CHECK(has(err("p0", "pcap:loop=2"), "needs in=FILE"));
  CHECK(has(err("p0", "pcap:out=b,loop=2"), "loop=2 needs in=FILE"));
  CHECK(has(err("p0", "pcap:in"), "pcap option 'in' needs a value"));
  CHECK(has(err("p0", "pcap:in="), "pcap option 'in=' has an empty value"));
  CHECK(has(err("p0", "pcap:in=a,,out=b"), "empty pcap option"));
  CHECK(has(err("p0", "pcap:in=a,"), "empty pcap option"));
  CHECK(has(err("p0", "pcap:in=a,in=b"), "pcap option 'in' given twice"));
}

TEST_CASE("ring, null, sample, tap, dpdk") {
  auto r = parse_port_spec("r0", "ring");
  REQUIRE(r.ok());
  CHECK(r->kind == PortKind::ring);
  CHECK(r->ring_size == 1024);
  r = parse_port_spec("r0", "ring:size=64");
  REQUIRE(r.ok());
  CHECK(r->ring_size == 64);

  r = parse_port_spec("n0", "null");
  REQUIRE(r.ok());
  CHECK(r->kind == PortKind::null);

  r = parse_port_spec("s0", "sample");
  REQUIRE(r.ok());
  CHECK(r->kind == PortKind::sample);
  CHECK(r->pps == 1000);
  r = parse_port_spec("s0", "sample:pps=0");
  REQUIRE(r.ok());
  CHECK(r->pps == 0);

  r = parse_port_spec("t0", "tap:keeltap0");
  REQUIRE(r.ok());
  CHECK(r->kind == PortKind::tap);
  CHECK(r->ifname == "keeltap0");
  CHECK(parse_port_spec("t0", "tap:abcdefghijklmno").ok());  // 15 characters

  r = parse_port_spec("d0", "dpdk:0000:03:00.0,representor=[0-3]");
  REQUIRE(r.ok());
  CHECK(r->kind == PortKind::dpdk);
  CHECK(r->devargs == "0000:03:00.0,representor=[0-3]");
  r = parse_port_spec("d0", "dpdk:net_null0");
  REQUIRE(r.ok());
  CHECK(r->devargs == "net_null0");

  CHECK(r->role == PortRole::uplink);  // roles come from the board, not the spec
}

TEST_CASE("other spec errors") {
  CHECK(has(err("r0", "ring:size=1000"), "ring size '1000' must be a power of two"));
  CHECK(has(err("r0", "ring:size=1"), "ring size '1'"));
  CHECK(has(err("r0", "ring:size=abc"), "ring size 'abc'"));
  CHECK(has(err("r0", "ring:sz=8"), "unknown ring option 'sz' in 'ring:sz=8'"));
  CHECK(has(err("r0", "ring:"), "nothing after 'ring:'"));
  CHECK(has(err("n0", "null:x"), "null takes no options, got 'x'"));
  CHECK(has(err("s0", "sample:pps=fast"), "sample pps 'fast' is not a number"));
  CHECK(has(err("s0", "sample:rate=1"), "unknown sample option 'rate'"));
  CHECK(err("t0", "tap") == "port t0: tap needs an interface name (tap:IFNAME) in 'tap'");
  CHECK(has(err("t0", "tap:"), "tap needs an interface name"));
  CHECK(has(err("t0", "tap:abcdefghijklmnop"), "'abcdefghijklmnop' is longer than 15 characters"));
  CHECK(has(err("t0", "tap:a/b"), "may not contain '/'"));
  CHECK(has(err("t0", "tap:a b"), "may not contain ' '"));
  CHECK(has(err("d0", "dpdk:"), "dpdk needs device arguments"));
  CHECK(has(err("d0", "dpdk"), "dpdk needs device arguments"));
  CHECK(err("x0", "pcip:in=a") ==
        "port x0: unknown port type 'pcip' (expected pcap, ring, tap, null, sample or dpdk) in "
        "'pcip:in=a'");
  CHECK(has(err("x0", ""), "port x0: empty spec"));
}

TEST_CASE("port names") {
  CHECK(parse_port_spec("Up-link_0.1", "null").ok());
  CHECK(parse_port_spec("abcdefghijklmno", "null").ok());  // 15
  CHECK(has(err("abcdefghijklmnop", "null"), "'abcdefghijklmnop' is longer than 15 characters"));
  CHECK(has(err("", "null"), "port name is empty"));
  CHECK(has(err("p 0", "null"), "port name 'p 0' has ' '"));
  CHECK(has(err("p/0", "null"), "has '/'"));
}

TEST_CASE("parse_port_arg") {
  auto r = parse_port_arg("p0=pcap:in=a.pcap,loop=2");
  REQUIRE(r.ok());
  CHECK(r->name == "p0");
  CHECK(r->text == "pcap:in=a.pcap,loop=2");
  CHECK(r->loops == 2);

  r = parse_port_arg("up=dpdk:net_pcap0,iface=eth0");  // only the first '=' splits
  REQUIRE(r.ok());
  CHECK(r->name == "up");
  CHECK(r->devargs == "net_pcap0,iface=eth0");

  r = parse_port_arg("p0");
  REQUIRE_FALSE(r.ok());
  CHECK(has(r.status().message(), "--port 'p0': expected NAME=SPEC"));
  r = parse_port_arg("=null");
  REQUIRE_FALSE(r.ok());
  CHECK(has(r.status().message(), "port name is empty"));
  r = parse_port_arg("p0=");
  REQUIRE_FALSE(r.ok());
  CHECK(has(r.status().message(), "port p0: empty spec"));
}

TEST_CASE("rxq: ring and pcap in= take 1 to 16 rx queues") {
  CHECK(parse_port_spec("p0", "ring").value().rxq == 1);
  CHECK(parse_port_spec("p0", "pcap:in=a.pcap").value().rxq == 1);
  auto r = parse_port_spec("p0", "ring:rxq=4");
  REQUIRE(r.ok());
  CHECK(r.value().rxq == 4);
  CHECK(r.value().ring_size == 1024);
  r = parse_port_spec("p0", "ring:size=64,rxq=16");
  REQUIRE(r.ok());
  CHECK(r.value().rxq == 16);
  CHECK(r.value().ring_size == 64);
  r = parse_port_spec("p0", "pcap:in=a.pcap,rxq=4");
  REQUIRE(r.ok());
  CHECK(r.value().rxq == 4);
  CHECK(r.value().pcap_in == "a.pcap");
  r = parse_port_spec("p0", "pcap:rxq=2,in=a.pcap,out=b.pcap,loop=3");
  REQUIRE(r.ok());
  CHECK(r.value().rxq == 2);
  CHECK(r.value().loops == 3);
  CHECK(parse_port_spec("p0", "pcap:in=a.pcap,rxq=1").value().rxq == 1);
}

TEST_CASE("rxq errors say what is allowed") {
  for (const char* spec : {"ring:rxq=0", "ring:rxq=17", "ring:rxq=x", "ring:rxq=-1", "pcap:in=a,rxq=0",
                           "pcap:in=a,rxq=100", "pcap:in=a,rxq=4x"}) {
    const std::string e = err("p0", spec);
    CHECK_MESSAGE(has(e, "must be a number of rx queues from 1 to 16"), e);
    CHECK_MESSAGE(has(e, std::string("in '") + spec + "'"), e);
  }
  CHECK(has(err("p0", "ring:rxq=2,rxq=2"), "ring option 'rxq' given twice"));
  CHECK(has(err("p0", "pcap:in=a,rxq=2,rxq=2"), "pcap option 'rxq' given twice"));
  CHECK(has(err("p0", "ring:rxq="), "has an empty value"));
  const std::string out_only = err("p0", "pcap:out=b.pcap,rxq=2");
  CHECK_MESSAGE(has(out_only, "pcap rxq=2 needs in=FILE"), out_only);
  CHECK(has(err("p0", "tap:t0,rxq=2"), "tap has one rx queue"));
  CHECK(has(err("p0", "sample:rxq=2"), "unknown sample option 'rxq'"));
  CHECK(has(err("p0", "null:rxq=2"), "null takes no options"));
}

TEST_CASE("dpdk n_rxq/n_txq are keel's: taken out of the device arguments") {
  auto r = parse_port_spec("d0", "dpdk:net_pcap0,rx_pcap=a.pcap,n_rxq=4,rx_pcap=b.pcap,n_txq=2");
  REQUIRE(r.ok());
  CHECK(r->devargs == "net_pcap0,rx_pcap=a.pcap,rx_pcap=b.pcap");
  CHECK(r->rxq == 4);
  CHECK(r->txq == 2);
  r = parse_port_spec("d0", "dpdk:net_null0");
  REQUIRE(r.ok());
  CHECK(r->rxq == 1);
  CHECK(r->txq == 0);  // as the datapath asks
  r = parse_port_spec("d0", "dpdk:0000:03:00.0,n_txq=16");
  REQUIRE(r.ok());
  CHECK(r->devargs == "0000:03:00.0");
  CHECK(r->txq == 16);
  // The device name itself is never taken for an option.
  CHECK(parse_port_spec("d0", "dpdk:n_rxq=2").value().devargs == "n_rxq=2");
}

TEST_CASE("dpdk n_rxq/n_txq errors name the token") {
  for (const char* spec : {"dpdk:net_null0,n_rxq=0", "dpdk:net_null0,n_rxq=17", "dpdk:net_null0,n_rxq=x",
                           "dpdk:net_null0,n_rxq="}) {
    const std::string e = err("d0", spec);
    CHECK_MESSAGE(has(e, "must be a number of rx queues from 1 to 16"), e);
    CHECK_MESSAGE(has(e, std::string("in '") + spec + "'"), e);
  }
  CHECK(has(err("d0", "dpdk:net_null0,n_txq=99"),
            "dpdk n_txq '99' must be a number of tx queues from 1 to 16"));
  CHECK(has(err("d0", "dpdk:net_null0,n_rxq=2,n_rxq=2"), "dpdk option 'n_rxq' given twice"));
  CHECK(has(err("d0", "dpdk:,n_rxq=2"), "dpdk needs device arguments"));
}

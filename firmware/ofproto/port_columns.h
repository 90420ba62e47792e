// ovs-vsctl's column syntax for ports: the words operators paste from
// their runbooks after `add-port BR PORT` (`tag=10`, `trunks=10,20`,
// `vlan_mode=native-untagged`, `-- set Interface PORT ofport_request=2
// mtu_request=9000`, ...), parsed into PortOptions, and the words that
// print a port's configuration back in the same syntax (the running
// config's add-port lines).
//
// The parsing is Open vSwitch 3.1's (lib/db-ctl-base.c set_column(),
// lib/ovsdb-data.c ovsdb_datum_from_string()), on the columns of
// vswitch.ovsschema: a column name matches by unique case-insensitive
// prefix ('-' and '_' alike); `COLUMN=VALUE` sets a column, the last word
// for a column wins; VALUE is an ovsdb datum (`10,20`, `[10, 20]`, `10-12`
// ranges, `[]` for "none", "..." JSON strings); a map column takes
// `COLUMN:KEY=VALUE`. Errors carry ovs-vsctl's own text (without its
// "ovs-vsctl: " prefix) wherever Open vSwitch would refuse the word too.
//
// Where keel is narrower than Open vSwitch the error says so, naming the
// column or key: keel implements the Port columns tag, trunks, vlan_mode
// and the Interface columns ofport_request, mtu_request, type and the
// keys other_config:pmd-rxq-affinity (checked with
// Datapath::parse_rxq_affinity) and options:n_rxq (1..16); any other
// options:KEY=VALUE is kept in PortOptions::tunnel_options for a tunnel
// port (type=vxlan|geneve|gre: Ofproto::add_port reads them with
// apply_tunnel_option and refuses them for any other port); every other
// column of the schema, every other other_config:/external_ids: key, and
// vlan_mode=dot1q-tunnel are refused, never silently ignored.
//
// Where keel is wider: on add-port, a word that names no Port column is
// tried as an Interface column (keel has one interface per port), so
// `add-port br0 p1 ofport_request=2` works although ovs-vsctl wants
// `add-port br0 p1 -- set Interface p1 ofport_request=2` (which keel also
// takes, and prints).
//
// Threads: pure functions on their arguments; any thread.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "ofproto/bond.h"
#include "ofproto/bridge.h"
#include "ofproto/ofproto.h"

namespace keel::ofproto {

// Which OVSDB table a column word is for.
enum class PortTable : uint8_t {
  port,       // `set Port P ...`
  interface,  // `set Interface P ...`
  either,     // add-port's own words: Port first, then Interface
};

// Applies one COLUMN[:KEY]=VALUE word to `po`. On error `po` is unchanged.
Status apply_port_column(std::string_view word, PortTable table, PortOptions& po);

// Parses what follows `add-port BR PORT`: column words (Port, else
// Interface), then any number of `-- set TABLE RECORD COLUMN=VALUE...`
// commands, TABLE Port or Interface and RECORD `port` (ovs-vsctl's `--`
// separates commands; empty ones are skipped). add-bond can reuse it for
// the words after its interfaces. All or nothing: on error `po` is
// unchanged.
Status parse_port_columns(std::span<const std::string> words, std::string_view port, PortOptions& po);

// The words after `add-port BR NAME` that recreate `p`, in ovs-vsctl's
// syntax: Port columns, then `-- set Interface NAME ofport_request=N ...`
// (ofport_request always: rules refer to port numbers). Parsing them with
// parse_port_columns() gives back p's options. vlan_mode is printed when
// it was given or differs from what the tag implies.
std::string format_port_columns(const PortConfig& p);

// --- bonds (ovs-vsctl add-bond BR BOND IFACE... [COLUMN[:KEY]=VALUE]...) ---
//
// The Port columns of a bond: bond_mode (active-backup, balance-slb,
// balance-tcp), lacp (off, active, passive), bond_updelay, bond_downdelay
// (ms, >= 0), the other_config keys bond-rebalance-interval (ms, >= 0),
// lb-output-action (true|false), bond-primary (a member name),
// bond-hash-basis (0..4294967295), lacp-time (fast|slow),
// lacp-fallback-ab (true|false), and the VLAN columns tag, trunks,
// vlan_mode (for the whole bond). Open vSwitch reads the other_config
// values leniently (a bad one means the default); keel refuses them with
// the key and the values it takes. `-- set Interface IFACE COLUMN=...`
// sets one member's Interface columns (ofport_request, mtu_request, type,
// options:n_rxq, other_config:pmd-rxq-affinity).
struct BondColumns {
  BondSettings settings;
  PortOptions port;  // tag, trunks, vlan_mode (the other fields are not read)
  std::vector<PortOptions> ifaces;  // one per member, in the order given
};

// One bond Port column word (as `set port BOND ...` takes them) into s/po.
// On error nothing is changed.
Status apply_bond_column(std::string_view word, BondSettings& s, PortOptions& po);
// What follows add-bond's interfaces; `members` are the interface names.
// All or nothing.
Status parse_bond_columns(std::span<const std::string> words, std::string_view bond,
                          std::span<const std::string> members, BondColumns& out);
// The words after `add-bond BR BOND M1 M2...` that recreate the bond:
// its Port columns (only those that differ from the defaults, in a fixed
// order), then `-- set Interface M ofport_request=N ...` per member.
// `members` are the members' PortConfigs in the bond's order (their VLAN
// settings are the bond's).
std::string format_bond_columns(const BondSettings& s, std::span<const PortConfig> members);

// Whether p's tag column is set (what `show` and the running config print):
// it was given, is not 0, or is what makes the port an access port.
bool port_has_tag(const PortConfig& p);

// The Interface types keel knows (ovs-vsctl's type= column) and whether a
// datapath port of hal kind `kind` ("pcap", "ring", "tap", "dpdk", "null",
// "sample") can be one: "" / "system" / "internal": any port; "dpdk": a
// dpdk port; "tap": a tap port; "dummy" / "dummy-pmd": a software (sim)
// port. Another type: the error to report.
Status check_interface_type(std::string_view type, std::string_view port, std::string_view kind);

}  // namespace keel::ofproto

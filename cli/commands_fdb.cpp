// `fdb-show BR` and `fdb-flush [BR]`: the MAC learning tables of NORMAL,
// as Open vSwitch's ovs-appctl fdb/show and fdb/flush.
//
// Threads: control thread; MacLearning has its own lock (the upcall handler
// learns while these run). The Ofproto writer mutex keeps the bridge alive.
#include <mutex>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "flow/flow_text.h"
#include "keel/hal/cpu.h"
#include "ofproto/ofproto.h"
#include "ofproto/udpif.h"

namespace keel::cli {

namespace {
std::string mac_text(const flow::EthAddr& a) {
  std::string s;
  flow::text::put_mac(s, a);
  return s;
}
}  // namespace

void add_fdb_commands(CommandTree::Impl& t) {
  // Declarations (command_tree_impl.h: CommandDecl).
  t.declare("fdb-show", control::Access::show, false, kLocksOfproto);
  t.declare("fdb-flush", control::Access::change, false, kLocksOfproto);

  auto* show = t.app.add_subcommand("fdb-show", "a bridge's learned MAC addresses: port, VLAN, MAC, age (s)");
  show->add_option("BR", t.arg1, "bridge")->required();
  t.add_format(show);
  show->callback([&t] {
    ofproto::Ofproto& of = t.sys.ofproto();
    ofproto::Bridge* br = of.find_bridge(t.arg1);
    if (!br) {
      t.status = error(Errc::not_found, "no bridge '" + t.arg1 + "'");
      return;
    }
    const uint64_t now = hal::now_ns();
    const auto entries = br->mac().entries();
    const auto age = [now](const ofproto::MacEntry& e) { return (now - std::min(now, e.learned_ns)) / 1'000'000'000; };
    if (t.format == "json") {
      Json j;
      j.begin_object().field("bridge", t.arg1).field("aging_s", br->mac().aging()).begin_array("entries");
      for (const auto& e : entries) {
        j.begin_object()
            .field("port", e.ofport)
            .field("vlan", e.vlan)
            .field("mac", mac_text(e.mac))
            .field("age_s", age(e))
            .field("static", e.is_static)
            .end_object();
      }
      j.end_array().end_object();
      t.print(j.str() + "\n");
      return;
    }
    std::string out = " port  VLAN  MAC                Age\n";
    for (const auto& e : entries) {
      char line[80];
      if (e.is_static)  // fdb-add's entries (OVS: "static" in the age column)
        snprintf(line, sizeof line, "%5u  %4u  %s  static\n", e.ofport, e.vlan, mac_text(e.mac).c_str());
      else
        snprintf(line, sizeof line, "%5u  %4u  %s  %3llu\n", e.ofport, e.vlan, mac_text(e.mac).c_str(),
                 static_cast<unsigned long long>(age(e)));
      out += line;
    }
    t.print(out);
  });

  auto* flush = t.app.add_subcommand("fdb-flush", "forget the learned MAC addresses of BR (all bridges without BR)");
  flush->add_option("BR", t.arg1, "bridge");
  flush->callback([&t] {
    ofproto::Ofproto& of = t.sys.ofproto();
    {
      if (t.arg1.empty()) {
        for (ofproto::Bridge* br : of.bridges()) br->mac().flush();
      } else if (ofproto::Bridge* br = of.find_bridge(t.arg1)) {
        br->mac().flush();
      } else {
        t.status = error(Errc::not_found, "no bridge '" + t.arg1 + "'");
        return;
      }
    }
    t.print("table successfully flushed\n");
    // NORMAL flows learned from the old table must be re-translated now.
    if (ofproto::Udpif* u = t.sys.udpif()) u->kick();
  });
}

}  // namespace keel::cli

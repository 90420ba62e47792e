// `add-tlv-map BR MAPPINGS`, `del-tlv-map BR [MAPPINGS]`, `tlv-map-show BR`:
// a bridge's Geneve TLV map (which option is tun_metadataN), as ovs-ofctl's
// add-tlv-map, del-tlv-map and dump-tlv-map, with the same mapping syntax
// ({class=0xffff,type=0x80,len=4}->tun_metadata0[,...]) and the same
// dump text. Running-config: one add-tlv-map line per bridge (section 450:
// after the bridges, before the rules that match tun_metadataN).
//
// Threads: control thread. The Ofproto writer mutex keeps the bridge alive
// while a command runs; ofproto::TlvMaps has its own writer lock and hands
// translation snapshots (ofproto/tlv_map.h).
#include <mutex>

#include "cli/command_tree_impl.h"
#include "cli/json.h"
#include "flow/tun_metadata.h"
#include "ofproto/ofproto.h"
#include "ofproto/tlv_map.h"

namespace keel::cli {

namespace {

// The mappings of a whole command line (ovs-ofctl takes one argument; a
// list split at blanks is joined back).
Result<std::vector<flow::TlvMapping>> mappings_of(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& w : words) text += w;
  return flow::parse_tlv_mappings(text);
}

std::string tlv_line(const std::string& bridge, const flow::TlvTable& t) {
  std::string line = "add-tlv-map " + bridge + " ";
  bool first = true;
  for (const flow::TlvMapping& m : t.mappings()) {
    if (!first) line += ',';
    first = false;
    line += flow::format_tlv_mapping(m);
  }
  return line;
}

}  // namespace

void add_tlv_commands(CommandTree::Impl& t) {
  // Declarations (command_tree_impl.h: CommandDecl).
  t.declare("add-tlv-map", control::Access::change, false, kLocksOfproto);
  t.declare("del-tlv-map", control::Access::change, false, kLocksOfproto);
  t.declare("tlv-map-show", control::Access::show, false, kLocksOfproto);

  ofproto::TlvMaps& maps = ofproto::switch_tlv_maps();

  auto* add = t.app.add_subcommand(
      "add-tlv-map", "map Geneve options to tun_metadataN on BR ({class=0xffff,type=0x80,len=4}->tun_metadata0,...)");
  add->add_option("BR", t.arg1, "bridge")->required();
  add->add_option("MAPPINGS", t.words, "{class=C,type=T,len=L}->tun_metadataN[,...]")->required();
  add->callback([&t, &maps] {
    ofproto::Ofproto& of = t.sys.ofproto();
    ofproto::Bridge* br = of.find_bridge(t.arg1);
    if (!br) {
      t.status = error(Errc::not_found, "no bridge '" + t.arg1 + "'");
      return;
    }
    auto m = mappings_of(t.words);
    if (!m.ok()) {
      t.status = std::move(m).take_status();
      return;
    }
    if (Status st = maps.add(t.arg1, *m); !st.ok()) {
      t.status = std::move(st);
      return;
    }
    br->invalidate_translations();
  });

  auto* del = t.app.add_subcommand("del-tlv-map",
                                   "remove tun_metadataN mappings from BR (all of them without MAPPINGS)");
  del->add_option("BR", t.arg1, "bridge")->required();
  del->add_option("MAPPINGS", t.words, "{class=C,type=T,len=L}->tun_metadataN[,...]");
  del->callback([&t, &maps] {
    ofproto::Ofproto& of = t.sys.ofproto();
    ofproto::Bridge* br = of.find_bridge(t.arg1);
    if (!br) {
      t.status = error(Errc::not_found, "no bridge '" + t.arg1 + "'");
      return;
    }
    std::vector<flow::TlvMapping> list;
    if (!t.words.empty()) {
      auto m = mappings_of(t.words);
      if (!m.ok()) {
        t.status = std::move(m).take_status();
        return;
      }
      list = std::move(*m);
    }
    if (Status st = maps.del(t.arg1, list); !st.ok()) {
      t.status = std::move(st);
      return;
    }
    br->invalidate_translations();
  });

  auto* show = t.app.add_subcommand("tlv-map-show", "BR's Geneve option mappings, as ovs-ofctl dump-tlv-map");
  show->add_option("BR", t.arg1, "bridge")->required();
  t.add_format(show);
  show->callback([&t, &maps] {
    ofproto::Ofproto& of = t.sys.ofproto();
    if (!of.find_bridge(t.arg1)) {
      t.status = error(Errc::not_found, "no bridge '" + t.arg1 + "'");
      return;
    }
    auto table = maps.table(t.arg1);
    if (t.format == "json") {
      unsigned allocated = 0;
      for (const flow::TlvMapping& m : table->mappings()) allocated += m.len;
      Json j;
      j.begin_object()
          .field("bridge", t.arg1)
          .field("max_option_space", unsigned{sizeof(flow::FlowKey{}.tun_opts)})
          .field("max_fields", flow::kTunMetadataFields)
          .field("allocated_option_space", allocated)
          .begin_array("mappings");
      for (const flow::TlvMapping& m : table->mappings()) {
        j.begin_object()
            .field("class", unsigned{m.opt_class})
            .field("type", unsigned{m.type})
            .field("length", unsigned{m.len})
            .field("match_field", "tun_metadata" + std::to_string(m.index))
            .end_object();
      }
      j.end_array().end_object();
      t.print(j.str() + "\n");
      return;
    }
    // ovs-ofctl dump-tlv-map prints the reply's header line first.
    t.print("NXT_TLV_TABLE_REPLY (xid=0x2):\n" + flow::format_tlv_table(*table));
  });

  t.add_config_section({"tlv maps", 450,
                        [&t, &maps](std::vector<std::string>& lines) {
                          ofproto::Ofproto& of = t.sys.ofproto();
                          control::Control::WriterLock lk(t.sys.control());  // inside a command or not
                          auto all = maps.tables();
                          for (ofproto::Bridge* br : of.bridges()) {
                            auto it = all->find(br->name());
                            if (it != all->end() && !it->second->empty())
                              lines.push_back(tlv_line(br->name(), *it->second));
                          }
                        },
                        [&maps] { maps.reset(); }});
}

}  // namespace keel::cli

// TlvMaps: see tlv_map.h.
#include "ofproto/tlv_map.h"

namespace keel::ofproto {

TlvMaps::TlvMaps()
    : snap_(std::make_shared<const Snapshot>()), empty_(std::make_shared<const flow::TlvTable>()) {}

std::shared_ptr<const flow::TlvTable> TlvMaps::table(std::string_view bridge) const {
  auto s = std::atomic_load(&snap_);
  auto it = s->find(bridge);
  return it == s->end() ? empty_ : it->second;
}

std::shared_ptr<const TlvMaps::Snapshot> TlvMaps::tables() const { return std::atomic_load(&snap_); }

Status TlvMaps::add(std::string_view bridge, const std::vector<flow::TlvMapping>& m) {
  std::lock_guard lock(writer_);
  flow::TlvTable t = *table(bridge);
  for (const flow::TlvMapping& e : m)
    if (Status st = t.add(e); !st.ok()) return st;
  auto next = std::make_shared<Snapshot>(*std::atomic_load(&snap_));
  (*next)[std::string(bridge)] = std::make_shared<const flow::TlvTable>(t);
  std::atomic_store(&snap_, std::shared_ptr<const Snapshot>(std::move(next)));
  return {};
}

Status TlvMaps::del(std::string_view bridge, const std::vector<flow::TlvMapping>& m) {
  std::lock_guard lock(writer_);
  flow::TlvTable t = *table(bridge);
  if (m.empty()) t.clear();
  for (const flow::TlvMapping& e : m) t.del(e.index);
  auto next = std::make_shared<Snapshot>(*std::atomic_load(&snap_));
  if (t.empty())
    next->erase(std::string(bridge));
  else
    (*next)[std::string(bridge)] = std::make_shared<const flow::TlvTable>(t);
  std::atomic_store(&snap_, std::shared_ptr<const Snapshot>(std::move(next)));
  return {};
}

void TlvMaps::forget(std::string_view bridge) { (void)del(bridge, {}); }

void TlvMaps::reset() {
  std::lock_guard lock(writer_);
  std::atomic_store(&snap_, std::make_shared<const Snapshot>());
}

TlvMaps& switch_tlv_maps() {
  static TlvMaps maps;
  return maps;
}

}  // namespace keel::ofproto

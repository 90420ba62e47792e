#include "datapath/flow_table.h"

#include "flow/dp_actions.h"

namespace keel::datapath {

void free_megaflow(Megaflow* f) {
  delete f->actions.load(std::memory_order_relaxed);
  delete f->shown_key;
  delete f;
}

FlowTable::FlowTable(uint32_t capacity)
    : capacity_(capacity), slots_(std::make_unique<std::atomic<Megaflow*>[]>(capacity)), reclaim_(4096) {
  free_.reserve(capacity);
  for (uint32_t i = capacity; i > 0; --i) free_.push_back(i - 1);  // lowest index first
  for (uint32_t i = 0; i < capacity; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
}

FlowTable::~FlowTable() { clear(); }

Megaflow* FlowTable::find(const Megaflow& f) const {
  const Dpcls* cls = dpcls(f.in_port);
  if (!cls) return nullptr;
  DpclsRule* r = cls->find(f.mask, f.key);
  return r ? static_cast<Megaflow*>(r->flow) : nullptr;
}

Status FlowTable::install(Megaflow* f) {
  if (f->in_port >= kMaxDpPorts) return invalid("in_port " + std::to_string(f->in_port) + " out of range");
  if (free_.empty())
    return error(Errc::resource_exhausted, "flow table full (" + std::to_string(capacity_) + " flows)");
  if (find(*f)) return error(Errc::already_exists, "a flow with the same key and mask exists");
  if (!dpcls_[f->in_port]) dpcls_[f->in_port] = std::make_unique<Dpcls>();
  DpclsRule* rule = dpcls_[f->in_port]->insert(f->mask, f->key, f);
  if (!rule) return error(Errc::resource_exhausted, "classifier out of memory");
  f->dpcls_rule = rule;
  f->index = free_.back();
  free_.pop_back();
  slots_[f->index].store(f, std::memory_order_release);  // publish to dump readers
  n_flows_.fetch_add(1, std::memory_order_relaxed);
  simple_->flow_added(f);
  return {};
}

void FlowTable::remove(Megaflow* f, uint64_t emc_generation) {
  slots_[f->index].store(nullptr, std::memory_order_release);
  simple_->flow_removed(f);
  dpcls_[f->in_port]->remove(static_cast<DpclsRule*>(f->dpcls_rule));
  f->dpcls_rule = nullptr;
  f->dead.store(true, std::memory_order_relaxed);
  f->dead_sweep = emc_generation;
  free_.push_back(f->index);
  n_flows_.fetch_sub(1, std::memory_order_relaxed);
  dead_.push_back(f);
}

void FlowTable::release_swept(uint64_t emc_generation) {
  size_t kept = 0;
  for (Megaflow* f : dead_) {
    if (emc_generation >= f->dead_sweep + 2) {
      if (!reclaim_.push(f)) overflow_.push_back(f);
    } else {
      dead_[kept++] = f;
    }
  }
  dead_.resize(kept);
  while (!overflow_.empty() && reclaim_.push(overflow_.back())) overflow_.pop_back();
}

size_t FlowTable::reclaim() {
  size_t n = 0;
  Megaflow* f;
  while (reclaim_.pop(f)) free_megaflow(f), ++n;
  return n;
}

void FlowTable::clear() {
  for (uint32_t i = 0; i < capacity_; ++i)
    if (Megaflow* f = slots_[i].exchange(nullptr, std::memory_order_relaxed)) free_megaflow(f);
  for (Megaflow* f : dead_) free_megaflow(f);
  for (Megaflow* f : overflow_) free_megaflow(f);
  dead_.clear();
  overflow_.clear();
  reclaim();
  for (auto& d : dpcls_) d.reset();
  simple_ = std::make_unique<SimpleMatch>();
  n_flows_.store(0, std::memory_order_relaxed);
  free_.clear();
  for (uint32_t i = capacity_; i > 0; --i) free_.push_back(i - 1);
}

}  // namespace keel::datapath

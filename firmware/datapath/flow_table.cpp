// FlowTable: install/remove on the owning PMD, the dead list and the
// reclaim ring to the control thread. See flow_table.h.
//
// Thread-safety: as flow_table.h says — install, find, remove and
// release_swept on the owner (no allocation: the slots and the free and dead
// lists are allocated at construction, the classifier allocates nothrow); reclaim() and
// clear() on the control thread (clear() only while the owner is stopped).
#include "datapath/flow_table.h"

#include <new>
#include <string>

#include "flow/dp_actions.h"

namespace keel::datapath {

void free_megaflow(Megaflow* f) {
  delete f->actions.load(std::memory_order_relaxed);
  delete f->shown_key;
  delete f;
}

FlowTable::FlowTable(uint32_t capacity)
    : capacity_(capacity),
      slots_(static_cast<std::atomic<Megaflow*>*>(::operator new(sizeof(std::atomic<Megaflow*>) * size_t{capacity}))),
      free_(new uint32_t[capacity]),  // default-initialized: untouched until used
      dead_(new Megaflow*[capacity]),
      reclaim_(4096) {}

FlowTable::~FlowTable() { clear(); }

Megaflow* FlowTable::find(const Megaflow& f) const {
  const Dpcls* cls = dpcls(f.in_port);
  if (!cls) return nullptr;
  DpclsRule* r = cls->find(f.mask, f.key);
  return r ? static_cast<Megaflow*>(r->flow) : nullptr;
}

Status flow_result_status(FlowResult r, uint32_t capacity) {
  switch (r) {
    case FlowResult::ok:
      return {};
    case FlowResult::bad_in_port:
      return invalid("in_port out of range (at most " + std::to_string(kMaxDpPorts - 1) + ")");
    case FlowResult::table_full:
      return error(Errc::resource_exhausted, "flow table full (" + std::to_string(capacity) + " flows)");
    case FlowResult::exists:
      return error(Errc::already_exists, "a flow with the same key and mask exists");
    case FlowResult::no_memory:
      return error(Errc::resource_exhausted, "classifier out of memory");
    case FlowResult::not_found:
      return error(Errc::not_found, "no such flow");
    case FlowResult::busy:
      return error(Errc::unavailable, "removed flows not swept yet, try again");
  }
  return error(Errc::internal, "unknown flow result");
}

FlowResult FlowTable::install(Megaflow* f) noexcept {
  if (f->in_port >= kMaxDpPorts) return FlowResult::bad_in_port;
  if (free_n_ == 0 && fresh_ == capacity_) return FlowResult::table_full;
  if (find(*f)) return FlowResult::exists;
  if (!dpcls_[f->in_port]) {
    dpcls_[f->in_port].reset(new (std::nothrow) Dpcls);
    if (!dpcls_[f->in_port]) return FlowResult::no_memory;
  }
  DpclsRule* rule = dpcls_[f->in_port]->insert(f->mask, f->key, f);
  if (!rule) return FlowResult::no_memory;  // not `exists`: find() said no
  f->dpcls_rule = rule;
  if (free_n_) {
    f->index = free_[--free_n_];
    slots_[f->index].store(f, std::memory_order_release);  // publish to dump readers
  } else {
    f->index = fresh_++;
    new (&slots_[f->index]) std::atomic<Megaflow*>(f);
    high_water_.store(fresh_, std::memory_order_release);  // the slot is built and holds f
  }
  n_flows_.fetch_add(1, std::memory_order_relaxed);
  simple_->flow_added(f);
  return FlowResult::ok;
}

FlowResult FlowTable::remove(Megaflow* f, uint64_t emc_generation) noexcept {
  if (dead_n_ == capacity_) return FlowResult::busy;  // no allocation, ever
  slots_[f->index].store(nullptr, std::memory_order_release);
  simple_->flow_removed(f);
  dpcls_[f->in_port]->remove(static_cast<DpclsRule*>(f->dpcls_rule));
  f->dpcls_rule = nullptr;
  f->dead.store(true, std::memory_order_relaxed);
  f->dead_sweep = emc_generation;
  free_[free_n_++] = f->index;  // within capacity_: the slot was taken from it
  n_flows_.fetch_sub(1, std::memory_order_relaxed);
  dead_[(dead_head_ + dead_n_++) % capacity_] = f;  // within capacity_: checked above
  return FlowResult::ok;
}

void FlowTable::release_swept(uint64_t emc_generation) noexcept {
  // Oldest first; the sweep generations only grow along the list, so the
  // first flow still reachable from the EMC (or a full ring) ends the pass.
  while (dead_n_) {
    Megaflow* f = dead_[dead_head_];
    if (emc_generation < f->dead_sweep + 2 || !reclaim_.push(f)) break;
    dead_head_ = dead_head_ + 1 == capacity_ ? 0 : dead_head_ + 1;
    --dead_n_;
  }
}

size_t FlowTable::reclaim() {
  size_t n = 0;
  Megaflow* f;
  while (reclaim_.pop(f)) free_megaflow(f), ++n;
  return n;
}

void FlowTable::clear() {
  for (uint32_t i = 0; i < fresh_; ++i)
    if (Megaflow* f = slots_[i].exchange(nullptr, std::memory_order_relaxed)) free_megaflow(f);
  for (; dead_n_; --dead_n_, dead_head_ = dead_head_ + 1 == capacity_ ? 0 : dead_head_ + 1)
    free_megaflow(dead_[dead_head_]);
  dead_head_ = 0;
  reclaim();
  for (auto& d : dpcls_) d.reset();
  simple_ = std::make_unique<SimpleMatch>();
  n_flows_.store(0, std::memory_order_relaxed);
  // Every built slot is free again, lowest index handed out first.
  free_n_ = 0;
  for (uint32_t i = fresh_; i > 0; --i) free_[free_n_++] = i - 1;
}

}  // namespace keel::datapath

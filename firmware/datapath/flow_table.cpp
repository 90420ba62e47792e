// FlowTable: install/remove on the owning PMD, the dead list and the
// reclaim ring to the control thread. See flow_table.h.
//
// Thread-safety: as flow_table.h says — install, find, remove and
// release_swept on the owner (no allocation: the slots are mapped and the free
// and dead lists reserved at construction, the classifier allocates nothrow); reclaim() and
// clear() on the control thread (clear() only while the owner is stopped).
#include "datapath/flow_table.h"

#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "core/hash.h"
#include "core/slab_pool.h"
#include "flow/dp_actions.h"

namespace keel::datapath {

namespace {
// Never destroyed: a megaflow may be freed by another static's destructor.
SlabPool& megaflow_pool() {
  static SlabPool* const pool = new SlabPool(sizeof(Megaflow), alignof(Megaflow));
  return *pool;
}

// The megaflows' masks, one copy of each, counted (Megaflow::set_mask).
// Thread-safety: acquire() and release() from any thread but a PMD's (mu_).
class MaskPool {
 public:
  const flow::Miniflow* acquire(const flow::Miniflow& m) {
    const uint32_t h = hash_of(m);
    std::lock_guard lock(mu_);
    for (auto [it, end] = by_hash_.equal_range(h); it != end; ++it)
      if (it->second->mask == m) {
        ++it->second->refs;
        return &it->second->mask;
      }
    auto* e = new Entry{m, 1};
    by_hash_.emplace(h, e);
    return &e->mask;
  }
  void release(const flow::Miniflow* p) noexcept {
    // `mask` is Entry's first member (standard layout).
    Entry* e = reinterpret_cast<Entry*>(const_cast<flow::Miniflow*>(p));
    std::lock_guard lock(mu_);
    if (--e->refs) return;
    for (auto [it, end] = by_hash_.equal_range(hash_of(e->mask)); it != end; ++it)
      if (it->second == e) {
        by_hash_.erase(it);
        break;
      }
    delete e;
  }

 private:
  struct Entry {
    flow::Miniflow mask;
    size_t refs;  // under mu_
  };
  static_assert(std::is_standard_layout_v<Entry>);
  static uint32_t hash_of(const flow::Miniflow& m) {
    return hash_words64(m.values, m.n_words(), static_cast<uint32_t>(m.map.u0 ^ (m.map.u0 >> 32) ^ m.map.u1));
  }
  std::mutex mu_;
  std::unordered_multimap<uint32_t, Entry*> by_hash_;  // under mu_
};
// Never destroyed, as the slab pool.
MaskPool& mask_pool() {
  static MaskPool* const pool = new MaskPool;
  return *pool;
}
}  // namespace

const flow::Miniflow Megaflow::kNoMask{};

void Megaflow::set_mask(const flow::Miniflow& m) {
  const flow::Miniflow* old = mask_;
  mask_ = mask_pool().acquire(m);
  if (old != &kNoMask) mask_pool().release(old);
}

Megaflow::~Megaflow() {
  if (mask_ != &kNoMask) mask_pool().release(mask_);
}

void* Megaflow::operator new(std::size_t n) {
  if (n != sizeof(Megaflow)) throw std::bad_alloc();  // no class derives from Megaflow
  return megaflow_pool().alloc();
}
void* Megaflow::operator new(std::size_t n, std::align_val_t) { return Megaflow::operator new(n); }
void Megaflow::operator delete(void* p) noexcept { megaflow_pool().release(p); }
void Megaflow::operator delete(void* p, std::align_val_t) noexcept { megaflow_pool().release(p); }

void free_megaflow(Megaflow* f) {
  delete f->actions.load(std::memory_order_relaxed);
  delete f->shown_key;
  delete f;
}

FlowTable::FlowTable(uint32_t capacity) : capacity_(capacity), slots_(capacity), reclaim_(4096) {
  // Reserved, not written: the pages come when removals use them.
  free_.reserve(capacity);
  dead_.reserve(capacity);
}

FlowTable::~FlowTable() { clear(); }

Megaflow* FlowTable::find(const Megaflow& f) const {
  const Dpcls* cls = dpcls(f.in_port);
  if (!cls) return nullptr;
  DpclsRule* r = cls->find(f.mask(), f.key);
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
  const uint32_t used = high_water_.load(std::memory_order_relaxed);
  if (free_.empty() && used == capacity_) return FlowResult::table_full;
  if (find(*f)) return FlowResult::exists;
  if (!dpcls_[f->in_port]) {
    dpcls_[f->in_port].reset(new (std::nothrow) Dpcls);
    if (!dpcls_[f->in_port]) return FlowResult::no_memory;
  }
  DpclsRule* rule = dpcls_[f->in_port]->insert(f->mask(), f->key, f);
  if (!rule) return FlowResult::no_memory;  // not `exists`: find() said no
  f->dpcls_rule = rule;
  // A freed slot first (the lowest indexes stay in use: the SMC caches
  // only the first 65535), else the next never used.
  if (!free_.empty()) {
    f->index = free_.back();
    free_.pop_back();
    slot(f->index).store(f, std::memory_order_release);  // publish to dump readers
  } else {
    f->index = used;
    slot(f->index).store(f, std::memory_order_release);
    high_water_.store(used + 1, std::memory_order_release);  // after the publish: for_each
  }
  n_flows_.fetch_add(1, std::memory_order_relaxed);
  simple_->flow_added(f);
  return FlowResult::ok;
}

FlowResult FlowTable::remove(Megaflow* f, uint64_t emc_generation) noexcept {
  if (dead_.size() == dead_.capacity()) return FlowResult::busy;  // no allocation, ever
  slot(f->index).store(nullptr, std::memory_order_release);
  simple_->flow_removed(f);
  dpcls_[f->in_port]->remove(static_cast<DpclsRule*>(f->dpcls_rule));
  f->dpcls_rule = nullptr;
  f->dead.store(true, std::memory_order_relaxed);
  f->dead_sweep = emc_generation;
  free_.push_back(f->index);  // within its reserve: the slot was taken from it
  n_flows_.fetch_sub(1, std::memory_order_relaxed);
  dead_.push_back(f);  // within its reserve: checked above
  return FlowResult::ok;
}

void FlowTable::release_swept(uint64_t emc_generation) noexcept {
  size_t kept = 0;
  for (Megaflow* f : dead_) {
    if (emc_generation >= f->dead_sweep + 2 && reclaim_.push(f)) continue;
    dead_[kept++] = f;  // still reachable from the EMC, or the ring is full
  }
  dead_.resize(kept);  // shrinks: no allocation
}

size_t FlowTable::reclaim() {
  size_t n = 0;
  Megaflow* f;
  while (reclaim_.pop(f)) free_megaflow(f), ++n;
  return n;
}

void FlowTable::clear() {
  const uint32_t used = high_water_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < used; ++i)
    if (Megaflow* f = slot(i).exchange(nullptr, std::memory_order_relaxed)) free_megaflow(f);
  for (Megaflow* f : dead_) free_megaflow(f);
  dead_.clear();
  reclaim();
  for (auto& d : dpcls_) d.reset();
  simple_ = std::make_unique<SimpleMatch>();
  n_flows_.store(0, std::memory_order_relaxed);
  free_.clear();
  high_water_.store(0, std::memory_order_release);
}

}  // namespace keel::datapath

// Datapath's bond and control-plane packet API (datapath.h, bond_table.h).
//
// bond_set/bond_del allocate everything on this (the control) thread — one
// table copy per PMD, one zeroed counter block per PMD when the id is new —
// post one request per PMD, wait for every answer, and free what the PMDs
// swapped out. A PMD that is not running applies the request on this
// thread (Pmd::request_async). The master copy of each table (bonds_) is
// what a PMD started later gets (change_pmds, datapath.cpp). Everything
// here runs under bond_mu_, which no PMD takes.
#include <time.h>

#include <cstring>
#include <memory>

#include "datapath/datapath.h"

namespace keel::datapath {

static_assert(kMaxBondId == flow::kMaxLbOutputBond, "lb_output's argument is a bond id");

namespace {

std::string bond_name(uint32_t id) { return "bond " + std::to_string(id); }

// Posts every request (a full ring is retried for a while: the PMD drains
// it every iteration), then waits for each posted one. Returns how many
// were posted (a prefix) and the first error. A request that was posted
// but not answered is leaked on purpose (the PMD may still write to it).
size_t post_and_wait(const std::vector<std::unique_ptr<Pmd>>& pmds, std::vector<std::unique_ptr<FlowRequest>>& reqs,
                     Status& st) {
  size_t posted = 0;
  for (; posted < pmds.size(); ++posted) {
    bool ok = pmds[posted]->request_async(*reqs[posted]);
    for (int tries = 0; !ok && tries < 5000; ++tries) {  // ~1 s
      timespec ts{0, 200'000};
      nanosleep(&ts, nullptr);
      ok = pmds[posted]->request_async(*reqs[posted]);
    }
    if (!ok) {
      st = error(Errc::unavailable, "pmd" + std::to_string(pmds[posted]->index()) + ": request ring full");
      break;
    }
  }
  for (size_t i = 0; i < posted; ++i) {
    Status w = pmds[i]->wait(*reqs[i]);
    if (!w.ok()) {
      if (!reqs[i]->done.load(std::memory_order_acquire)) (void)reqs[i].release();  // see above
      if (st.ok()) st = w;
    }
  }
  return posted;
}

// Frees what a PMD swapped out of its slot (the request's answer).
void free_answer(FlowRequest* r) {
  if (!r || !r->done.load(std::memory_order_acquire)) return;
  delete r->bond_members;
  delete r->bond_counters;
  r->bond_members = nullptr;
  r->bond_counters = nullptr;
}

std::unique_ptr<FlowRequest> bond_request(FlowRequest::Op op, uint32_t id, const BondMembers* members,
                                          bool fresh_counters) {
  auto r = std::make_unique<FlowRequest>();
  r->op = op;
  r->bond_id = id;
  if (members) r->bond_members = new BondMembers(*members);
  if (fresh_counters) r->bond_counters = new BondBucketCounters();
  return r;
}

}  // namespace

Status Datapath::bond_set(uint32_t id, const BondMembers& members) {
  if (id < 1 || id > kMaxBondId)
    return invalid("bond id " + std::to_string(id) + ": must be 1.." + std::to_string(kMaxBondId));
  for (unsigned b = 0; b < kBondBuckets; ++b) {
    const uint16_t m = members[b];
    if (m != kNoBondMember && (m >= kMaxPorts || !port(m)))
      return error(Errc::not_found, bond_name(id) + ": bucket " + std::to_string(b) + ": member " +
                                        std::to_string(m) + " is not a datapath port");
  }
  std::lock_guard lock(bond_mu_);
  const bool create = !bonds_[id];
  std::vector<std::unique_ptr<FlowRequest>> reqs;
  for (size_t i = 0; i < pmds_.size(); ++i)
    reqs.push_back(bond_request(FlowRequest::Op::bond_set, id, &members, create));
  Status st;
  const size_t posted = post_and_wait(pmds_, reqs, st);
  if (!st.ok()) {
    // All or nothing: the PMDs that took the new table get the old one
    // back (or lose the new id).
    std::vector<std::unique_ptr<FlowRequest>> undo;
    for (size_t i = 0; i < posted; ++i) {
      if (!reqs[i] || !reqs[i]->done.load(std::memory_order_acquire) || reqs[i]->result != FlowResult::ok)
        continue;
      undo.push_back(create ? bond_request(FlowRequest::Op::bond_del, id, nullptr, false)
                            : bond_request(FlowRequest::Op::bond_set, id, bonds_[id].get(), false));
      Status u = pmds_[i]->request(*undo.back());
      if (!u.ok() && !undo.back()->done.load(std::memory_order_acquire)) (void)undo.back().release();
    }
    for (auto& r : undo) free_answer(r.get());
    for (auto& r : reqs) free_answer(r.get());
    return st.prefix(bond_name(id));
  }
  for (auto& r : reqs) free_answer(r.get());
  if (create) {
    bonds_[id] = std::make_unique<BondMembers>(members);
    bond_retired_[id].reset();
  } else {
    *bonds_[id] = members;
  }
  return {};
}

Status Datapath::bond_del(uint32_t id) {
  if (id < 1 || id > kMaxBondId)
    return invalid("bond id " + std::to_string(id) + ": must be 1.." + std::to_string(kMaxBondId));
  std::lock_guard lock(bond_mu_);
  if (!bonds_[id]) return error(Errc::not_found, bond_name(id) + ": no such bond in the datapath");
  std::vector<std::unique_ptr<FlowRequest>> reqs;
  for (size_t i = 0; i < pmds_.size(); ++i) reqs.push_back(bond_request(FlowRequest::Op::bond_del, id, nullptr, false));
  Status st;
  (void)post_and_wait(pmds_, reqs, st);
  for (auto& r : reqs) free_answer(r.get());
  if (!st.ok()) return st.prefix(bond_name(id));
  bonds_[id].reset();
  bond_retired_[id].reset();
  return {};
}

std::vector<uint32_t> Datapath::bond_ids() const {
  std::lock_guard lock(bond_mu_);
  std::vector<uint32_t> ids;
  for (uint32_t id = 1; id <= kMaxBondId; ++id)
    if (bonds_[id]) ids.push_back(id);
  return ids;
}

std::optional<BondBucketStats> Datapath::bond_stats(uint32_t id) const {
  if (id < 1 || id > kMaxBondId) return std::nullopt;
  std::lock_guard lock(bond_mu_);
  if (!bonds_[id]) return std::nullopt;
  BondBucketStats s = bond_retired_[id] ? *bond_retired_[id] : BondBucketStats{};
  for (const auto& pmd : pmds_) add_bond_counters(*pmd, id, s);
  return s;
}

void Datapath::add_bond_counters(const Pmd& pmd, uint32_t id, BondBucketStats& s) {
  const BondBucketCounters* c = pmd.bonds()[id].counters.load(std::memory_order_acquire);
  if (!c) return;
  for (unsigned b = 0; b < kBondBuckets; ++b) {
    s.packets[b] += c->packets[b].load(std::memory_order_relaxed);
    s.bytes[b] += c->bytes[b].load(std::memory_order_relaxed);
  }
}

void Datapath::retire_bond_counters(const Pmd& pmd) {
  for (uint32_t id = 1; id <= kMaxBondId; ++id) {
    if (!bonds_[id] || !pmd.bonds()[id].counters.load(std::memory_order_acquire)) continue;
    if (!bond_retired_[id]) bond_retired_[id] = std::make_unique<BondBucketStats>();
    add_bond_counters(pmd, id, *bond_retired_[id]);
  }
}

void Datapath::install_bonds(Pmd& pmd) {
  for (uint32_t id = 1; id <= kMaxBondId; ++id) {
    if (!bonds_[id]) continue;
    auto r = bond_request(FlowRequest::Op::bond_set, id, bonds_[id].get(), true);
    (void)pmd.request(*r);  // not running yet: applied here, cannot fail
    free_answer(r.get());
  }
}

std::vector<PmdBondView> Datapath::bond_dump() const {
  std::lock_guard lock(bond_mu_);
  std::vector<PmdBondView> out;
  for (const auto& pmd : pmds_) {
    for (uint32_t id = 1; id <= kMaxBondId; ++id) {
      const BondMembers* m = pmd->bonds()[id].members.load(std::memory_order_acquire);
      if (m) out.push_back({pmd->index(), pmd->display_core(), id, *m});
    }
  }
  return out;
}

Status Datapath::send_packet(uint16_t port_id, std::span<const uint8_t> frame) {
  hal::Port* out = port(port_id);
  if (!out) return error(Errc::not_found, "send_packet: no datapath port " + std::to_string(port_id));
  if (frame.size() < hal::kEthHeaderLen)
    return invalid("send_packet: a frame of " + std::to_string(frame.size()) + " bytes is shorter than an Ethernet header");
  hal::Backend* from = out->backend();
  if (!from && !backends_.empty()) from = backends_.front();
  if (!from) return error(Errc::unavailable, "send_packet: port " + out->name() + " has no buffer pool");
  hal::Packet* p = nullptr;
  if (from->alloc_burst({&p, 1}, static_cast<uint32_t>(frame.size())) != 1)
    return error(Errc::resource_exhausted, "send_packet: no packet buffer free for port " + out->name());
  if (!p->set_len(static_cast<uint32_t>(frame.size()))) {
    hal::release(p);
    return invalid("send_packet: a frame of " + std::to_string(frame.size()) + " bytes does not fit a buffer");
  }
  std::memcpy(p->data(), frame.data(), frame.size());
  p->set_in_port(port_id);

  std::lock_guard lock(bond_mu_);  // pmds_ (set_pmd_cores takes it too)
  for (const auto& pmd : pmds_) {
    if (!pmd->running()) continue;
    if (pmd->post_tx(port_id, p)) return {};
    hal::release(p);
    return error(Errc::unavailable, "send_packet: pmd" + std::to_string(pmd->index()) +
                                        "'s control-plane tx ring is full (" + std::to_string(Pmd::kCtlTxRing) +
                                        " frames)");
  }
  // No PMD runs (before start(), after stop()): sent here, on queue 0.
  (void)out->tx(0, std::span(&p, 1));
  return {};
}

}  // namespace keel::datapath

// hal/dpdk flow engine — the hal flow facade (keel/hal/flow.h) on rte_flow.
//
// Two parts:
//   * RteFlowRule / convert(): pure conversion of a FlowAttr + FlowPattern +
//     FlowActions into rte_flow_attr / rte_flow_item[] / rte_flow_action[]
//     with the specs, masks and confs stored in the RteFlowRule itself (no
//     allocation, no device: unit-tested alone). Host-order facade fields
//     become network order (rte_be16_t/rte_be32_t); hal port ids become
//     ethdev port ids through a PortMap; an END item/action closes each list.
//   * DpdkFlowEngine: one per DpdkPort (DpdkPort::flow_engine()), calling
//     rte_flow_validate/create/destroy/query/flush and, on devices that
//     answer rte_flow_info_get (mlx5 only in DPDK 22.11: BlueField
//     hardware), the template + queue API (configure, pattern/actions
//     templates, template tables, async_create/async_destroy, push, pull).
//     Every other device (net_tap, net_ring, net_null, net_pcap, ...) fails
//     info_get, so info().async_api is false and the offload engine uses the
//     synchronous calls. The template/async path is compiled and its
//     conversion unit-tested here; it runs only on hardware (mlx5 with
//     HW steering, devarg dv_flow_en=2; call configure() before the first
//     rule). Not run on hardware yet: what BlueField says is still to see.
//     pull() takes at most 64 completions per call; rte_flow_op_result
//     carries no errno, so a failed op completes with EIO.
//
// Errors: rte_flow_error becomes a FlowError: its type says where (item,
// action, attr, handle, device), its cause (a pointer into our arrays or
// their spec/mask/conf storage) gives the item/action index, its message is
// kept word for word, and rte_errno is the errnum.
//
// Driver traps (seen on this machine and in DPDK 22.11's net_tap; keel never
// trusts a validate alone, create() decides):
//   * net_tap's rte_flow_validate only parses: it never asks the kernel, so
//     a rule the kernel's TC flower will refuse validates fine.
//   * net_tap reports a rule the kernel refused (no cls_flower/act_* module,
//     or an unsupported combination) as EEXIST on create; the message says
//     so ("refused by the kernel (TC flower); net_tap reports it as EEXIST").
//   * net_tap's RSS action validates, and its create can return success
//     while the kernel refused the BPF program it needs (in the qemu-virt
//     guest the verifier rejects it and create fails, leaving cls_bpf
//     filters behind), so create() on net_tap refuses an rss action before
//     the driver sees it (ENOTSUP, the message says why): what cannot be
//     checked is not trusted. validate() still passes it to the driver (a
//     hint, see above). Use queue (one queue) on net_tap.
//   * net_tap's vlan item (DPDK 22.11 tap_flow_create_vlan) ANDs the TCI
//     with the byte-swapped mask and keeps 8 bits of the VID: VID 0x123
//     under mask 0x0fff becomes flower vlan_id 3 (the qemu-virt probe saw
//     it), a rule that would act on other packets than asked. create() on
//     net_tap computes the VID tap would install and refuses the rule
//     (ENOTSUP at the vlan item) when it differs from the asked one.
//   * net_tap files a rule with a vlan item under TC protocol 802.1Q and
//     the others under ETH_P_ALL, and the kernel keeps one protocol per
//     priority: a VLAN rule at the priority of live non-VLAN rules is
//     refused (EEXIST). Not rewritten here (the priority is the caller's):
//     a caller driving net_tap must give VLAN rules a priority of their own
//     (the qemu-virt probe does; the offload engine targets the sim and mlx5).
// configure(): the queues were set up at open (configure_async_at_open());
// configure() checks the request fits them (a started port cannot be
// configured again).
// query_bulk() is a loop of rte_flow_query (22.11 has no bulk query of
// plain rules; mlx5's indirect counters and age objects could, which keel
// does not use yet). A rule's last hit comes from its AGE action when it has
// one (sec_since_last_hit), else last_hit_ns is 0 (unknown).
//
// Device reset: RTE_ETH_EVENT_INTR_RESET / INTR_RMV callbacks bump
// info().reset_generation, and so does a queue-count restart (which flushes
// the rules: forget_rules()); after stop() (the port closed) every call
// fails with ENODEV.
//
// Life cycle: made by DpdkPort::open() after the device started; detach()
// from DpdkPort::stop() before the device is closed (flushes the rules,
// unregisters the callbacks); destroyed with the port.
//
// Thread-safety: the FlowEngine contract (one thread at a time, the offload
// thread), plus a mutex of its own so that detach() (control thread, port
// removal) cannot race a call in flight; it also serialises calls from
// several offload threads sharing a port. No PMD ever takes it. The port
// map is consulted before the mutex is taken (it takes the backend's lock,
// which DpdkBackend::shutdown() holds while it detaches engines). The reset
// counter is an atomic written by the EAL's interrupt thread.
#pragma once

#include <rte_ethdev.h>
#include <rte_flow.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "keel/hal/flow.h"

namespace keel::hal::dpdk {

// hal::Port::id() -> ethdev port id (nullopt: not a DPDK port of this process).
using PortMap = std::function<std::optional<uint16_t>(uint32_t hal_port)>;

// A rule in rte_flow's structs, with the storage its pointers point into.
// Not copyable or movable (pointers into itself).
struct RteFlowRule {
  union ItemStore {
    rte_flow_item_eth eth;
    rte_flow_item_vlan vlan;
    rte_flow_item_ipv4 ipv4;
    rte_flow_item_ipv6 ipv6;
    rte_flow_item_tcp tcp;
    rte_flow_item_udp udp;
    rte_flow_item_icmp icmp;
    rte_flow_item_icmp6 icmp6;
    rte_flow_item_vxlan vxlan;
    rte_flow_item_mark mark;
    rte_flow_item_meta meta;
    rte_flow_item_port_id port_id;
    rte_flow_item_ethdev ethdev;
  };
  union ActionStore {
    rte_flow_action_port_id port_id;
    rte_flow_action_ethdev ethdev;
    rte_flow_action_set_mac mac;
    rte_flow_action_set_ipv4 ipv4;
    rte_flow_action_set_ipv6 ipv6;
    rte_flow_action_set_dscp dscp;
    rte_flow_action_set_ttl ttl;
    rte_flow_action_set_tp tp;
    rte_flow_action_of_push_vlan push_vlan;
    rte_flow_action_of_set_vlan_vid vid;
    rte_flow_action_of_set_vlan_pcp pcp;
    rte_flow_action_mark mark;
    rte_flow_action_count count;
    rte_flow_action_age age;
    rte_flow_action_jump jump;
    rte_flow_action_queue queue;
    rte_flow_action_rss rss;
  };

  rte_flow_attr attr;
  std::array<rte_flow_item, kMaxFlowItems + 1> items;        // END-terminated
  std::array<ItemStore, kMaxFlowItems> spec, mask;
  std::array<rte_flow_action, kMaxFlowActions + 1> actions;  // END-terminated
  std::array<ActionStore, kMaxFlowActions> conf;
  std::array<std::array<uint16_t, kMaxRssQueues>, kMaxFlowActions> rss_queues;
  uint8_t n_items = 0, n_actions = 0;

  RteFlowRule();
  RteFlowRule(const RteFlowRule&) = delete;
  RteFlowRule& operator=(const RteFlowRule&) = delete;

  // Which item/action an rte_flow_error cause points at (the rte_flow_item
  // or rte_flow_action itself, or its spec/mask/conf); -1 none.
  int item_index_of(const void* cause) const;
  int action_index_of(const void* cause) const;
};

// Fills `out` (pure; no device). Errors name the item/action: an unknown
// port id, an overflowing pattern/action list, an RSS queue list too long.
Status convert_attr(const FlowAttr& a, rte_flow_attr& out);
Status convert_pattern(const FlowPattern& p, const PortMap& ports, RteFlowRule& out, FlowError* err);
Status convert_actions(const FlowActions& a, const PortMap& ports, RteFlowRule& out, FlowError* err);
Status convert(const FlowAttr& attr, const FlowPattern& p, const FlowActions& a, const PortMap& ports,
               RteFlowRule& out, FlowError* err);
// RTE_ETH_RSS_* for kFlowRss* bits.
uint64_t rss_types_to_dpdk(uint32_t types);
// rte_flow_error (with rte_errno `errnum`) as a FlowError for `rule` (null:
// no index resolution). `op`/`port` give the context of status().
FlowError translate_error(const rte_flow_error& e, int errnum, const RteFlowRule* rule, const FlowPattern* p,
                          const FlowActions* a, const char* op, const std::string& port);

// The template API's set-up at open. rte_flow_configure must run while the
// port is stopped (DPDK 22.11 refuses a started port with EINVAL before the
// driver sees it, as the qemu-virt probe shows), and keel starts a port at
// open, so DpdkPort::open() calls this between rte_eth_dev_configure and
// rte_eth_dev_start: when rte_flow_info_get answers (mlx5), it configures
// min(max queues, kFlowQueues) queues of min(max size, kFlowQueueSize)
// entries; elsewhere it does nothing (n_queues 0).
struct FlowAsyncSetup {
  uint16_t n_queues = 0;
  uint32_t queue_size = 0;
  int errnum = 0;       // rte_flow_configure's error when info_get answered but configure failed
  std::string message;  // its driver message
};
inline constexpr uint16_t kFlowQueues = 4;        // offload threads that may each own a queue
inline constexpr uint32_t kFlowQueueSize = 1024;  // ops in flight per queue
FlowAsyncSetup configure_async_at_open(uint16_t port_id) noexcept;

class DpdkFlowEngine final : public FlowEngine {
 public:
  DpdkFlowEngine(uint16_t port_id, std::string port_name, std::string driver, PortMap ports,
                 FlowAsyncSetup async = {});
  ~DpdkFlowEngine() override;

  FlowEngineInfo info() const override;
  const std::string& port_name() const override { return port_name_; }

  Status validate(const FlowAttr& attr, const FlowPattern& pattern, const FlowActions& actions,
                  FlowError* err) override;
  Result<FlowHandle> create(const FlowAttr& attr, const FlowPattern& pattern, const FlowActions& actions,
                            FlowError* err) override;
  Status destroy(FlowHandle h, FlowError* err) override;
  Status query(FlowHandle h, FlowQuery& q, FlowError* err) override;
  Status flush(FlowError* err) override;

  Status configure(uint16_t n_queues, uint32_t queue_size, FlowError* err) override;
  Result<FlowTemplateId> pattern_template(const FlowTemplateAttr& attr, const FlowPattern& pattern,
                                          FlowError* err) override;
  Result<FlowTemplateId> actions_template(const FlowTemplateAttr& attr, const FlowActions& actions,
                                          const FlowActions& masks, FlowError* err) override;
  Result<FlowTableId> template_table(const FlowAttr& attr, uint32_t capacity,
                                     std::span<const FlowTemplateId> pattern_templates,
                                     std::span<const FlowTemplateId> actions_templates, FlowError* err) override;
  Status destroy_template_table(FlowTableId t, FlowError* err) override;
  Status destroy_pattern_template(FlowTemplateId t, FlowError* err) override;
  Status destroy_actions_template(FlowTemplateId t, FlowError* err) override;
  Status async_create(uint16_t queue, FlowTableId table, const FlowPattern& pattern, uint8_t ptpl_index,
                      const FlowActions& actions, uint8_t atpl_index, bool postpone, uint64_t user_data,
                      FlowHandle* out, FlowError* err) override;
  Status async_destroy(uint16_t queue, FlowHandle h, bool postpone, uint64_t user_data, FlowError* err) override;
  Status push(uint16_t queue, FlowError* err) override;
  unsigned pull(uint16_t queue, std::span<FlowOpResult> out, FlowError* err) override;

  // DpdkPort::stop(), before the device closes: flushes the rules and
  // makes every later call fail with ENODEV.
  void detach() noexcept;
  // DpdkPort::set_queue_count(), before the device restarts: a restart
  // drops a driver's rules unless it keeps them (RTE_ETH_DEV_CAPA_FLOW_RULE_KEEP),
  // and queue actions may name queues the port no longer has, so every rule
  // is flushed and reset_generation moves, as after a device reset (the
  // offload engine re-offloads what is still hot). Templates stay.
  void forget_rules() noexcept;
  size_t rule_count() const;

 private:
  struct RuleInfo {
    bool has_count = false, has_age = false;
  };
  // An operation in flight on a queue: rte_flow_op_result gives back only
  // our user_data pointer, so it points at one of these.
  struct PendingOp {
    uint64_t user_data = 0;
    FlowHandle handle = kNoFlow;
    bool destroy = false;
    RuleInfo info;
  };
  struct Queue {
    std::vector<PendingOp> ops;  // queue_size slots
    std::vector<uint32_t> free;  // free slot indexes
  };
  Status gone(const char* op, FlowError* err) const;  // after detach()
  Status refuse_traps(const FlowPattern& p, const FlowActions& a, const char* op, FlowError* err) const;
  static RuleInfo info_of(const FlowActions& a);

  mutable std::mutex mu_;
  uint16_t port_id_;
  std::string port_name_;
  std::string driver_;
  PortMap ports_;
  bool detached_ = false;
  std::unordered_map<FlowHandle, RuleInfo> rules_;  // rules created and not destroyed
  std::vector<rte_flow_pattern_template*> ptpls_;   // id - 1 -> template (null: destroyed)
  std::vector<rte_flow_actions_template*> atpls_;
  std::vector<rte_flow_template_table*> tables_;
  std::vector<Queue> queues_;
  FlowAsyncSetup async_;  // what configure_async_at_open() did
  std::atomic<uint64_t> reset_generation_{0};
  bool callbacks_ = false;
  static int on_event(uint16_t port_id, rte_eth_event_type event, void* self, void* ret);
};

}  // namespace keel::hal::dpdk

// The null port: receives nothing, and "sends" by releasing (DPDK's net_null
// in its default mode). A sink for benchmarks and for ports a test does not
// look at; what it is sent shows up in tx_packets, not tx_dropped.
//
// Thread-safety: stateless; the counters are Port's.
#include "sim_ports.h"

namespace keel::hal::sim {

namespace {

class NullPort final : public Port, public SimNicPort {
 public:
  explicit NullPort(const PortSpec& spec) : Port(spec.name, "null") { set_queues(1, 1); }
  ~NullPort() override { detach_from_nic(); }

  FlowEngine* flow_engine() override { return nic_engine(); }
  uint16_t hw_tx(std::span<Packet* const> pkts) noexcept override {  // stateless: any thread
    release_burst(pkts);
    return static_cast<uint16_t>(pkts.size());
  }

  LinkState link() const override { return sim_link(*this); }
  std::string describe() const override { return "null"; }
  InputKind input_kind() const override { return InputKind::none; }

 protected:
  uint16_t rx_burst(uint16_t, std::span<Packet*>) noexcept override { return 0; }
  uint16_t tx_burst(uint16_t, std::span<Packet* const> pkts) noexcept override {
    release_burst(pkts);
    return static_cast<uint16_t>(pkts.size());
  }
};

}  // namespace

Result<std::unique_ptr<Port>> open_null_port(const PortSpec& spec, const std::shared_ptr<Pool>&) {
  return std::unique_ptr<Port>(new NullPort(spec));
}

}  // namespace keel::hal::sim

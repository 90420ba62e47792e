// Built instead of hal/dpdk/ when the build has no DPDK.
#include "keel/hal/backend.h"

namespace keel::hal {

bool have_dpdk() { return false; }

Result<std::unique_ptr<Backend>> make_dpdk_backend(const std::vector<std::string>&, const std::vector<PortSpec>&) {
  return error(Errc::unsupported, "this build of keel has no DPDK backend");
}

}  // namespace keel::hal

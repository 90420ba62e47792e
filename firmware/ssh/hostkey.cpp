// stub (interface commit)
#include "ssh/hostkey.h"
namespace keel::ssh {
struct HostKeys::Impl {};
HostKeys::HostKeys() = default;
HostKeys::~HostKeys() = default;
Result<std::unique_ptr<HostKeys>> HostKeys::load_or_generate(const std::string&, Random&) { return Status(Errc::unsupported, "stub"); }
Result<std::unique_ptr<HostKeys>> HostKeys::generate(Random&, int) { return Status(Errc::unsupported, "stub"); }
std::vector<std::string> HostKeys::algorithms() const { return {}; }
std::string HostKeys::public_blob(std::string_view) const { return {}; }
Result<std::string> HostKeys::sign(std::string_view, std::string_view, Random&) const { return Status(Errc::unsupported, "stub"); }
std::vector<std::string> HostKeys::fingerprints() const { return {}; }
std::vector<std::string> HostKeys::public_key_lines() const { return {}; }
}  // namespace keel::ssh

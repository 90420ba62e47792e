// stub (interface commit)
#include "ssh/transport.h"
namespace keel::ssh {
struct Transport::Impl { Algorithms alg; std::string s; };
Transport::Transport(TransportConfig) : impl_(std::make_unique<Impl>()) {}
Transport::~Transport() = default;
Status Transport::feed(std::string_view, uint64_t) { return Status(Errc::unsupported, "stub"); }
bool Transport::poll_message(std::string&, uint32_t*) { return false; }
void Transport::send(std::string_view) {}
void Transport::unimplemented(uint32_t) {}
void Transport::disconnect(uint32_t, std::string_view) {}
std::string Transport::take_output() { return {}; }
size_t Transport::output_size() const { return 0; }
void Transport::tick(uint64_t) {}
bool Transport::closed() const { return true; }
bool Transport::ready() const { return false; }
std::string_view Transport::session_id() const { return {}; }
const Transport::Algorithms& Transport::algorithms() const { return impl_->alg; }
const std::string& Transport::client_version() const { return impl_->s; }
uint32_t Transport::disconnect_reason() const { return 0; }
const std::string& Transport::error() const { return impl_->s; }
uint64_t Transport::kex_count() const { return 0; }
}  // namespace keel::ssh

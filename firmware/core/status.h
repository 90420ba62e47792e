// Status and Result<T>: how firmware/ and hal/ report errors.
//
// Below the CLI nothing throws across a module boundary: a function that can
// fail returns a [[nodiscard]] Status (or Result<T>, a value or a Status).
// The message is for a human at the console: it names the thing and the
// reason ("port p0: pcap file 'x.pcap': No such file or directory").
// Fast-path code does not use these; failures there are counters.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace keel {

enum class Errc {
  ok = 0,
  invalid_argument,
  not_found,
  already_exists,
  io_error,
  unavailable,
  resource_exhausted,
  unsupported,
  internal,
  permission_denied,  // the session's role may not do this (control/control.h)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }

  bool ok() const { return code_ == Errc::ok; }
  explicit operator bool() const { return ok(); }
  Errc code() const { return code_; }
  const std::string& message() const { return message_; }

  // Adds context in front of the message: "port p0: " + "file not found".
  Status& prefix(std::string_view what) {
    if (!ok()) message_ = std::string(what) + ": " + message_;
    return *this;
  }

 private:
  Errc code_ = Errc::ok;
  std::string message_;
};

inline Status error(Errc code, std::string message) { return {code, std::move(message)}; }
inline Status invalid(std::string message) { return {Errc::invalid_argument, std::move(message)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& value() const& { return std::get<T>(v_); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

  const Status& status() const {
    static const Status ok_status;
    return ok() ? ok_status : std::get<Status>(v_);
  }
  Status take_status() && { return ok() ? Status{} : std::get<Status>(std::move(v_)); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace keel

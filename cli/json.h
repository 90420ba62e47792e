// A small streaming JSON writer for `--format json` output: one object per
// command, keys in a stable order, strings escaped per RFC 8259.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace keel::cli {

class Json {
 public:
  Json& begin_object(std::string_view key = {}) { return open(key, '{'); }
  Json& end_object() { return close('}'); }
  Json& begin_array(std::string_view key = {}) { return open(key, '['); }
  Json& end_array() { return close(']'); }

  Json& field(std::string_view key, std::string_view v) {
    prefix(key);
    quote(v);
    return *this;
  }
  Json& field(std::string_view key, const char* v) { return field(key, std::string_view(v)); }
  Json& field(std::string_view key, const std::string& v) { return field(key, std::string_view(v)); }
  Json& field(std::string_view key, bool v) {
    prefix(key);
    out_ += v ? "true" : "false";
    return *this;
  }
  Json& field(std::string_view key, uint64_t v) {
    prefix(key);
    out_ += std::to_string(v);
    return *this;
  }
  Json& field(std::string_view key, int64_t v) {
    prefix(key);
    out_ += std::to_string(v);
    return *this;
  }
  Json& field(std::string_view key, int v) { return field(key, static_cast<int64_t>(v)); }
  Json& field(std::string_view key, unsigned v) { return field(key, static_cast<uint64_t>(v)); }
  // One decimal more than the text forms print (rates, percentages).
  Json& field(std::string_view key, double v) {
    prefix(key);
    char buf[40];
    snprintf(buf, sizeof buf, "%.2f", v);
    out_ += buf;
    return *this;
  }
  Json& null_field(std::string_view key) {
    prefix(key);
    out_ += "null";
    return *this;
  }
  Json& value(std::string_view v) { return field({}, v); }

  const std::string& str() const { return out_; }

 private:
  Json& open(std::string_view key, char c) {
    prefix(key);
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  Json& close(char c) {
    first_.pop_back();
    out_ += c;
    return *this;
  }
  void prefix(std::string_view key) {
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
    }
    if (!key.empty()) {
      quote(key);
      out_ += ':';
    }
  }
  void quote(std::string_view s) {
    out_ += '"';
    for (unsigned char c : s) {
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\u%04x", c);
            out_ += buf;
          } else {
            out_ += static_cast<char>(c);
          }
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<bool> first_;
};

}  // namespace keel::cli

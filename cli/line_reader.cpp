// LineReader: see line_reader.h.
#include "cli/line_reader.h"

#include <utility>

namespace keel::cli {

void LineReader::feed(std::string_view data) {
  if (discarding_) {
    // Inside an over-long line: its bytes up to the '\n' are dropped here,
    // the '\n' goes in so next() reports the line's end.
    const size_t nl = data.find('\n');
    const size_t drop = nl == std::string_view::npos ? data.size() : nl;
    consumed_ += drop;
    data.remove_prefix(drop);
    if (data.empty()) return;
  }
  // Compact: what was taken goes, in one move of what wasn't (at most a
  // partial line when the caller took every line).
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    scan_ -= pos_;
    pos_ = 0;
  }
  buf_.append(data);
}

LineReader::Got LineReader::next(std::string& line) {
  const size_t nl = buf_.find('\n', scan_);
  if (nl == std::string::npos) {
    scan_ = buf_.size();
    if (held() > max_line_ && !discarding_) {
      // A line longer than max_line without its end yet: drop what we
      // have, and the rest of it as it comes (feed()).
      consumed_ += held();
      buf_.clear();
      pos_ = scan_ = 0;
      discarding_ = true;
    }
    return Got::none;
  }
  const size_t len = nl - pos_;
  consumed_ += len + 1;
  const size_t start = pos_;
  pos_ = scan_ = nl + 1;
  if (discarding_ || len > max_line_) {
    discarding_ = false;
    return Got::too_long;
  }
  line.assign(buf_, start, len);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return Got::line;
}

LineReader::Got LineReader::finish(std::string& line) {
  const bool was_discarding = std::exchange(discarding_, false);
  if (held() == 0) return was_discarding ? Got::too_long : Got::none;
  const size_t len = held();
  consumed_ += len;
  const bool too_long = was_discarding || len > max_line_;
  if (!too_long) {
    line.assign(buf_, pos_, len);
    if (!line.empty() && line.back() == '\r') line.pop_back();
  }
  buf_.clear();
  pos_ = scan_ = 0;
  return too_long ? Got::too_long : Got::line;
}

}  // namespace keel::cli

// LineReader: a byte stream split into command lines, for input that is read
// without a line editor (an SSH shell without a pty: `ssh -T nic < script`,
// `cat file | ssh nic`).
//
// feed() appends bytes; next() hands back the complete lines in order ('\n'
// ends a line, a '\r' before it is dropped); at the end of the input,
// finish() hands back a last line that had no '\n'. A line longer than
// max_line bytes is never handed back, not even truncated: its bytes are
// dropped as they come and next() reports Got::too_long once, at its end, so
// the caller can say so and go on with the next line.
//
// Cost and memory, the reason this is a class (issue 17's bulk stall): the
// bytes of lines already taken are not moved per line; the buffer is
// compacted once per feed(), which moves only what was not yet taken. A
// caller that takes every line after each feed() therefore copies each byte
// at most twice however large the chunks, and the reader then holds at most
// one partial line (max_line bytes): held() says how much. (The loop this
// replaced erased each line from the front of the whole buffer: quadratic in
// the chunk, 6 s for a 30 MB chunk of 4000-byte lines.)
//
// consumed(): bytes dealt with so far (taken in lines, their '\n' included,
// or dropped as too long) -- what the caller may acknowledge to the sender
// (an SSH channel's window) without holding more than it says.
//
// Thread-safety: none; one reader per session, used by its thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace keel::cli {

class LineReader {
 public:
  explicit LineReader(size_t max_line = 4096) : max_line_(max_line) {}

  enum class Got {
    none,      // no complete line (feed more, or call finish() at the end)
    line,      // a line: in `line`
    too_long,  // a line longer than max_line ended (dropped)
  };

  void feed(std::string_view data);
  Got next(std::string& line);
  // At the end of the input: the last line if it had no '\n' (Got::line),
  // Got::too_long if it was too long, then Got::none.
  Got finish(std::string& line);

  uint64_t consumed() const { return consumed_; }
  size_t held() const { return buf_.size() - pos_; }

 private:
  size_t max_line_;
  std::string buf_;
  size_t pos_ = 0;           // bytes of buf_ already taken
  size_t scan_ = 0;          // buf_ up to here holds no '\n' after pos_ (not searched again)
  bool discarding_ = false;  // inside a line longer than max_line_: dropping until its '\n'
  uint64_t consumed_ = 0;
};

}  // namespace keel::cli

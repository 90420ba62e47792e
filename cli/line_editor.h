// The console's line editor: a pure state machine on a byte stream.
//
// Bytes typed by the operator go in (feed), bytes for the terminal come out
// (take_output), and step() hands back completed lines. Nothing here touches
// a file descriptor or termios, so the same editor runs on a local terminal,
// a UART (--console /dev/ttyX) and, later, an SSH channel; tests drive it with
// scripted keystrokes. run_console (cli/console.cpp) owns the fd and the raw
// mode around it.
//
// Keys (emacs/readline and network-gear conventions):
//   printable ASCII     insert at the cursor (bytes >= 0x80 and other control
//                       bytes are swallowed: the command language is ASCII)
//   Left/Right, ^B/^F   cursor            Home/End, ^A/^E    line start/end
//   Backspace (7f, 08)  delete before     Delete (ESC[3~)    delete under
//   ^D                  delete under the cursor; on an empty line: end of session
//   ^K / ^U / ^W        kill to end / kill to start / kill the word before
//   ^Y                  yank the last kill
//   ^L                  clear the screen, redraw   ^C  abandon the line
//   Up/Down, ^P/^N      history (per editor, bounded)
//   Tab                 complete the word under the cursor to the longest
//                       common prefix; a second Tab lists the candidates
//   ?                   list what can come next, with help (literal inside
//                       quotes or after a backslash)
//   Enter (CR, LF, CRLF) the line is done
// Escape sequences (CSI "ESC [ params final" and SS3 "ESC O x") are parsed by
// a small state machine; sequences it doesn't know are swallowed whole.
//
// Output of commands goes through write(): LF becomes CRLF, and after a
// screenful (height - 1 rows) the editor shows --More-- and waits: space =
// next page, Enter = next line, q (or ^C) = drop the rest. Height 0 disables
// paging.
//
// Long lines scroll horizontally inside one terminal row (width columns), so
// a redraw never depends on how the terminal wraps.
//
// Bounds: the line holds at most max_line bytes; more input on the same line
// makes Enter refuse it with a message (never run a truncated command). The
// history holds history_size entries; output waiting for --More-- is bounded
// by what the caller writes.
//
// Thread-safety: none; one editor per session, used by that session's thread.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::cli {

// One thing that can come next on a command line.
struct Completion {
  std::string word;     // "ports", "--format", "p0", or a placeholder "<cr>", "IN"
  std::string help;     // one line
  bool literal = true;  // false: a placeholder, listed by '?' but never inserted by Tab
};

// Given the line up to the cursor, returns what the word under the cursor can
// become (the candidates already filtered by the partial word typed so far).
using Completer = std::function<std::vector<Completion>(std::string_view before_cursor)>;

class LineEditor {
 public:
  struct Config {
    std::string prompt = "keel> ";
    size_t max_line = 4096;
    size_t history_size = 100;
    int height = 24;  // rows; 0 = no paging
    int width = 80;   // columns
  };

  enum class Event {
    none,  // more input needed (call feed, then step again)
    line,  // a line is complete: take it with line_text()
    eof,   // ^D on an empty line: the session ends
  };

  LineEditor();
  explicit LineEditor(Config cfg);

  void set_completer(Completer c) { completer_ = std::move(c); }
  void set_height(int rows) { cfg_.height = rows < 0 ? 0 : rows; }
  void set_width(int cols) { cfg_.width = cols < 10 ? 10 : cols; }
  int height() const { return cfg_.height; }
  int width() const { return cfg_.width; }

  // Queues input bytes; step() consumes them.
  void feed(std::string_view bytes) { in_.append(bytes); }
  // Consumes queued input until a line is complete, the session ends, or the
  // input runs out. Shows the prompt first when none is shown and no output
  // is waiting behind --More--. After Event::line the editor shows nothing
  // until the next step(): the caller runs the command and write()s its output.
  Event step();
  // The completed line (valid after Event::line until the next step()).
  const std::string& line_text() const { return done_; }

  // Writes command output to the terminal, paged. Must be called between
  // lines (after Event::line, before the next step()).
  void write(std::string_view text);
  // Drops paged output that is still waiting (e.g. the session ends).
  void drop_pending_output() { more_.clear(); paging_ = false; }

  // Bytes for the terminal, accumulated since the last call.
  std::string take_output() { return std::exchange(out_, {}); }
  size_t output_size() const { return out_.size(); }
  // True while output waits behind --More-- for a key.
  bool paging() const { return paging_; }

  // For tests: the line being edited and the cursor (a byte offset).
  const std::string& buffer() const { return buf_; }
  size_t cursor() const { return pos_; }
  const std::deque<std::string>& history() const { return history_; }

 private:
  enum class Key {
    none, insert, enter, left, right, home, end, backspace, del, ctrl_d, kill_end, kill_start,
    kill_word, yank, redraw, abandon, up, down, tab, help,
  };
  enum class Esc { ground, esc, csi, ss3 };

  Key decode(unsigned char c);
  void handle(Key k, char c);
  void handle_paging(Key k, char c);

  void insert(char c);
  void refresh();
  void show_prompt();
  void history_move(int dir);
  void complete();
  void list_help();
  void set_buffer(std::string s);
  void newline_and_redraw();
  void emit_rows(std::string_view text);
  void page(size_t rows);
  void kill(size_t from, size_t to);

  Config cfg_;
  Completer completer_;
  std::string in_;     // queued input
  size_t in_pos_ = 0;  // consumed prefix of in_
  std::string out_;    // output for the terminal
  std::string buf_;    // the line being edited
  size_t pos_ = 0;     // cursor in buf_
  std::string done_;   // the last completed line
  std::string yank_;   // the last killed text
  bool prompt_shown_ = false;
  bool overflow_ = false;       // input was dropped: the line is too long
  bool last_was_cr_ = false;    // swallow the LF of a CRLF
  bool last_was_tab_ = false;   // a second Tab lists the candidates
  Esc esc_ = Esc::ground;
  std::string esc_params_;      // CSI parameter bytes (bounded)

  std::deque<std::string> history_;
  size_t hist_idx_ = 0;         // == history_.size(): editing a new line
  std::string hist_saved_;      // the new line, kept while browsing history

  std::string more_;            // output waiting behind --More--
  bool paging_ = false;
  int rows_shown_ = 0;          // rows written since the last prompt or page break
};

}  // namespace keel::cli

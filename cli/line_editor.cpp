// The line editor state machine (see line_editor.h for the keys and bounds).
//
// Redraw model: the line lives on one terminal row. A full refresh is
// "CR, prompt, the visible slice of the line, erase to end of row, CR, move
// right to the cursor" (at most about width + 16 bytes); typing at the end of
// a line that fits echoes just the byte. Listings (second Tab, '?') end on a
// fresh row and redraw the prompt and the line.
#include "cli/line_editor.h"

#include <algorithm>

namespace keel::cli {

namespace {

constexpr char kBell = '\x07';

bool printable(char c) { return c >= 0x20 && c < 0x7f; }

// Only printable ASCII reaches the terminal from the completer's strings.
std::string sanitize(std::string_view s) {
  std::string r;
  for (char c : s) r += printable(c) ? c : '?';
  return r;
}

// True when the cursor is inside quotes or right after a backslash (the
// tokenizer's rules): there '?' is a character, not a request for help.
bool literal_context(std::string_view s) {
  char quote = 0;
  bool escaped = false;
  for (char c : s) {
    if (escaped) {
      escaped = false;
    } else if (quote == '\'') {
      if (c == '\'') quote = 0;
    } else if (c == '\\') {
      escaped = true;
    } else if (quote == '"') {
      if (c == '"') quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    }
  }
  return quote != 0 || escaped;
}

size_t word_start(std::string_view before) {
  size_t i = before.find_last_of(" \t");
  return i == std::string_view::npos ? 0 : i + 1;
}

}  // namespace

LineEditor::LineEditor() : LineEditor(Config{}) {}

LineEditor::LineEditor(Config cfg) : cfg_(std::move(cfg)) {
  set_height(cfg_.height);
  set_width(cfg_.width);
}

// --- input decoding: bytes -> keys -----------------------------------------

LineEditor::Key LineEditor::decode(unsigned char c) {
  switch (esc_) {
    case Esc::ground:
      break;
    case Esc::esc:
      last_was_cr_ = false;
      if (c == '[') {
        esc_ = Esc::csi;
        esc_params_.clear();
        return Key::none;
      }
      if (c == 'O') {
        esc_ = Esc::ss3;
        return Key::none;
      }
      if (c == 0x1b) return Key::none;  // ESC ESC: still one escape
      esc_ = Esc::ground;
      // A lone ESC followed by a control key: the key still counts. ESC and a
      // printable byte (Alt-x) or a high byte: not bound, swallowed.
      if (c < 0x20 || c == 0x7f) return decode(c);
      return Key::none;
    case Esc::csi:
      last_was_cr_ = false;
      if (c >= 0x20 && c <= 0x3f) {  // parameter and intermediate bytes
        constexpr size_t kMaxParams = 16;
        if (esc_params_.size() < kMaxParams) esc_params_ += static_cast<char>(c);
        else esc_params_ = "!";  // too long: no known sequence, swallow until the final byte
        return Key::none;
      }
      if (c >= 0x40 && c <= 0x7e) {
        esc_ = Esc::ground;
        const std::string& p = esc_params_;
        bool plain = p.empty() || p == "1";
        switch (c) {
          case 'A': return plain ? Key::up : Key::none;
          case 'B': return plain ? Key::down : Key::none;
          case 'C': return plain ? Key::right : Key::none;
          case 'D': return plain ? Key::left : Key::none;
          case 'H': return plain ? Key::home : Key::none;
          case 'F': return plain ? Key::end : Key::none;
          case '~':
            if (p == "1" || p == "7") return Key::home;
            if (p == "4" || p == "8") return Key::end;
            if (p == "3") return Key::del;
            return Key::none;
          default: return Key::none;
        }
      }
      // Anything else ends the sequence: a new ESC starts another one, a
      // control byte (Enter, ^C) still acts, a high byte is swallowed.
      esc_ = Esc::ground;
      if (c == 0x1b || c < 0x20) return decode(c);
      return Key::none;
    case Esc::ss3:
      last_was_cr_ = false;
      esc_ = Esc::ground;
      switch (c) {
        case 'A': return Key::up;
        case 'B': return Key::down;
        case 'C': return Key::right;
        case 'D': return Key::left;
        case 'H': return Key::home;
        case 'F': return Key::end;
        default: return c == 0x1b || c < 0x20 ? decode(c) : Key::none;
      }
  }

  if (c == '\n' && last_was_cr_) {  // CRLF from a serial line or a script: one Enter
    last_was_cr_ = false;
    return Key::none;
  }
  last_was_cr_ = c == '\r';
  switch (c) {
    case 0x1b: esc_ = Esc::esc; return Key::none;
    case '\r':
    case '\n': return Key::enter;
    case 0x01: return Key::home;        // ^A
    case 0x02: return Key::left;        // ^B
    case 0x03: return Key::abandon;     // ^C
    case 0x04: return Key::ctrl_d;      // ^D
    case 0x05: return Key::end;         // ^E
    case 0x06: return Key::right;       // ^F
    case 0x08:                          // ^H
    case 0x7f: return Key::backspace;   // DEL, what most terminals send for Backspace
    case 0x09: return Key::tab;
    case 0x0b: return Key::kill_end;    // ^K
    case 0x0c: return Key::redraw;      // ^L
    case 0x0e: return Key::down;        // ^N
    case 0x10: return Key::up;          // ^P
    case 0x15: return Key::kill_start;  // ^U
    case 0x17: return Key::kill_word;   // ^W
    case 0x19: return Key::yank;        // ^Y
    case '?': return Key::help;
    default: return printable(static_cast<char>(c)) ? Key::insert : Key::none;
  }
}

// --- the editing loop --------------------------------------------------------

LineEditor::Event LineEditor::step() {
  Event ev = Event::none;
  while (ev == Event::none) {
    if (!paging_ && !prompt_shown_) show_prompt();
    if (in_pos_ >= in_.size()) break;
    unsigned char c = static_cast<unsigned char>(in_[in_pos_++]);
    Key k = decode(c);
    if (k == Key::none) continue;
    if (paging_) {
      handle_paging(k, static_cast<char>(c));
      continue;
    }
    if (k == Key::enter) {
      last_was_tab_ = false;
      out_ += "\r\n";
      prompt_shown_ = false;
      if (overflow_) {
        out_ += "% line longer than " + std::to_string(cfg_.max_line) + " bytes ignored\r\n";
      } else {
        done_ = buf_;
        bool blank = buf_.find_first_not_of(" \t") == std::string::npos;
        if (!blank && (history_.empty() || history_.back() != buf_)) {
          history_.push_back(buf_);
          while (history_.size() > cfg_.history_size) history_.pop_front();
        }
        ev = Event::line;
      }
      buf_.clear();
      pos_ = 0;
      overflow_ = false;
      hist_idx_ = history_.size();
      hist_saved_.clear();
    } else if (k == Key::ctrl_d && buf_.empty()) {
      out_ += "\r\n";
      prompt_shown_ = false;
      ev = Event::eof;
    } else {
      handle(k, static_cast<char>(c));
    }
  }
  if (in_pos_ >= in_.size()) {
    in_.clear();
    in_pos_ = 0;
  } else if (in_pos_ > 0) {
    in_.erase(0, in_pos_);
    in_pos_ = 0;
  }
  return ev;
}

void LineEditor::handle(Key k, char c) {
  bool was_tab = last_was_tab_;
  last_was_tab_ = false;
  switch (k) {
    case Key::insert:
      insert(c);
      break;
    case Key::help:
      if (literal_context(std::string_view(buf_).substr(0, pos_))) insert('?');
      else list_help();
      break;
    case Key::left:
      if (pos_ > 0) --pos_, refresh();
      break;
    case Key::right:
      if (pos_ < buf_.size()) ++pos_, refresh();
      break;
    case Key::home:
      pos_ = 0;
      refresh();
      break;
    case Key::end:
      pos_ = buf_.size();
      refresh();
      break;
    case Key::backspace:
      if (pos_ == 0) break;
      buf_.erase(--pos_, 1);
      refresh();
      break;
    case Key::del:
    case Key::ctrl_d:
      if (pos_ < buf_.size()) buf_.erase(pos_, 1), refresh();
      break;
    case Key::kill_end:
      kill(pos_, buf_.size());
      break;
    case Key::kill_start:
      kill(0, pos_);
      break;
    case Key::kill_word: {
      size_t i = pos_;
      while (i > 0 && (buf_[i - 1] == ' ' || buf_[i - 1] == '\t')) --i;
      while (i > 0 && buf_[i - 1] != ' ' && buf_[i - 1] != '\t') --i;
      kill(i, pos_);
      break;
    }
    case Key::yank:
      for (char y : std::string(yank_)) insert(y);
      break;
    case Key::redraw:
      out_ += "\x1b[H\x1b[2J";
      refresh();
      break;
    case Key::abandon:
      out_ += "^C\r\n";
      buf_.clear();
      pos_ = 0;
      overflow_ = false;
      hist_idx_ = history_.size();
      hist_saved_.clear();
      prompt_shown_ = false;
      break;
    case Key::up:
      history_move(-1);
      break;
    case Key::down:
      history_move(+1);
      break;
    case Key::tab:
      last_was_tab_ = was_tab;
      complete();
      last_was_tab_ = true;
      break;
    case Key::none:
    case Key::enter:
      break;
  }
}

void LineEditor::insert(char c) {
  if (!printable(c)) return;
  if (buf_.size() >= cfg_.max_line) {
    if (!overflow_) out_ += kBell;
    overflow_ = true;
    return;
  }
  buf_.insert(pos_++, 1, c);
  // Typing at the end of a line that still fits: echo the byte, no redraw.
  if (pos_ == buf_.size() && cfg_.prompt.size() + buf_.size() < static_cast<size_t>(cfg_.width)) out_ += c;
  else refresh();
}

void LineEditor::kill(size_t from, size_t to) {
  if (from >= to) return;
  yank_ = buf_.substr(from, to - from);
  buf_.erase(from, to - from);
  pos_ = from;
  refresh();
}

void LineEditor::set_buffer(std::string s) {
  buf_ = std::move(s);
  pos_ = buf_.size();
  refresh();
}

void LineEditor::history_move(int dir) {
  if (dir < 0) {
    if (hist_idx_ == 0 || history_.empty()) return;
    if (hist_idx_ >= history_.size()) hist_saved_ = buf_;
    --hist_idx_;
    set_buffer(history_[hist_idx_]);
  } else {
    if (hist_idx_ >= history_.size()) return;
    ++hist_idx_;
    set_buffer(hist_idx_ == history_.size() ? hist_saved_ : history_[hist_idx_]);
  }
}

void LineEditor::show_prompt() {
  out_ += cfg_.prompt;
  prompt_shown_ = true;
  rows_shown_ = 0;
  if (!buf_.empty()) refresh();
}

void LineEditor::refresh() {
  // One row, scrolled horizontally so that the cursor is always visible.
  const size_t plen = cfg_.prompt.size();
  const size_t cols = std::max(static_cast<size_t>(cfg_.width), plen + 2);
  size_t start = 0, len = buf_.size(), pos = pos_;
  if (plen + pos >= cols) {
    size_t shift = plen + pos - cols + 1;
    start += shift, len -= shift, pos -= shift;
  }
  if (plen + len > cols) len = cols - plen;
  out_ += '\r';
  out_ += cfg_.prompt;
  out_.append(buf_, start, len);
  out_ += "\x1b[K\r";
  if (plen + pos > 0) out_ += "\x1b[" + std::to_string(plen + pos) + "C";
}

// --- completion and help -----------------------------------------------------

void LineEditor::complete() {
  if (!completer_) {
    out_ += kBell;
    return;
  }
  std::string_view before = std::string_view(buf_).substr(0, pos_);
  std::string partial(before.substr(word_start(before)));
  std::vector<std::string> words;
  for (Completion& c : completer_(before))
    if (c.literal && !c.word.empty() && c.word.rfind(partial, 0) == 0 &&
        std::all_of(c.word.begin(), c.word.end(), printable))
      words.push_back(std::move(c.word));
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  if (words.empty()) {
    out_ += kBell;
    return;
  }
  std::string lcp = words[0];
  for (const std::string& w : words) {
    size_t n = 0;
    while (n < lcp.size() && n < w.size() && lcp[n] == w[n]) ++n;
    lcp.resize(n);
  }
  std::string add = lcp.substr(partial.size());
  // A unique candidate is a whole word: finish it with a blank, unless it is
  // an option that takes its value after '='.
  if (words.size() == 1 && (lcp.empty() || lcp.back() != '=')) add += ' ';
  if (!add.empty()) {
    for (char c : add) {
      if (buf_.size() >= cfg_.max_line) break;
      buf_.insert(pos_++, 1, c);
    }
    refresh();
    return;
  }
  if (!last_was_tab_) {
    out_ += kBell;
    return;
  }
  // Second Tab: the candidates in columns, then the line again.
  size_t colw = 0;
  for (const std::string& w : words) colw = std::max(colw, w.size() + 2);
  size_t per_row = std::max<size_t>(1, static_cast<size_t>(cfg_.width) / colw);
  out_ += "\r\n";
  for (size_t i = 0; i < words.size(); ++i) {
    out_ += words[i];
    if ((i + 1) % per_row == 0 || i + 1 == words.size()) out_ += "\r\n";
    else out_.append(colw - words[i].size(), ' ');
  }
  refresh();
}

void LineEditor::list_help() {
  out_ += "?\r\n";
  std::vector<Completion> cands;
  if (completer_) cands = completer_(std::string_view(buf_).substr(0, pos_));
  if (cands.empty()) {
    out_ += "% nothing matches here\r\n";
  } else {
    size_t colw = 0;
    for (const Completion& c : cands) colw = std::max(colw, std::min<size_t>(c.word.size(), 32) + 2);
    for (const Completion& c : cands) {
      std::string w = sanitize(c.word).substr(0, 32);
      out_ += "  " + w;
      if (!c.help.empty()) out_.append(colw - w.size(), ' ') += sanitize(c.help).substr(0, 200);
      out_ += "\r\n";
    }
  }
  refresh();
}

// --- paged output ------------------------------------------------------------

void LineEditor::write(std::string_view text) {
  more_.append(text);
  if (paging_) return;
  if (cfg_.height <= 0) {
    page(static_cast<size_t>(-1));
    return;
  }
  int room = cfg_.height - 1 - rows_shown_;
  page(room > 0 ? static_cast<size_t>(room) : 0);
}

// Writes up to `rows` terminal rows of the waiting output (a row ends at LF
// or after width columns), then --More-- if some is left.
void LineEditor::page(size_t rows) {
  const size_t cols = static_cast<size_t>(cfg_.width);
  size_t i = 0, col = 0, shown = 0;
  while (i < more_.size() && shown < rows) {
    char c = more_[i++];
    if (c == '\n') {
      out_ += "\r\n";
      ++shown, col = 0;
    } else if (c == '\r') {
      if (i < more_.size() && more_[i] == '\n') continue;  // CRLF: written once by the LF
      out_ += c;
      col = 0;
    } else {
      out_ += c;
      if (++col == cols) {
        ++shown, col = 0;
        // A row exactly as wide as the terminal: its LF is the wrap.
        if (i < more_.size() && more_[i] == '\n') ++i, out_ += "\r\n";
      }
    }
  }
  more_.erase(0, i);
  if (cfg_.height > 0) rows_shown_ += static_cast<int>(shown);  // shown <= rows < height
  if (!more_.empty()) {
    out_ += "--More--";
    paging_ = true;
  } else {
    paging_ = false;
  }
}

void LineEditor::handle_paging(Key k, char c) {
  constexpr std::string_view kClearMore = "\r\x1b[K";
  if (k == Key::insert && c == ' ') {
    out_ += kClearMore;
    rows_shown_ = 0;
    page(static_cast<size_t>(cfg_.height > 1 ? cfg_.height - 1 : 1));
  } else if (k == Key::enter) {
    out_ += kClearMore;
    page(1);
  } else if ((k == Key::insert && (c == 'q' || c == 'Q')) || k == Key::abandon) {
    out_ += kClearMore;
    more_.clear();
    paging_ = false;
  }
  // Anything else waits at --More--.
}

}  // namespace keel::cli

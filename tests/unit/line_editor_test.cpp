// The console line editor driven by scripted keystrokes: every key, history,
// completion (second-Tab listing, '?'), paging, and bad input (unknown escape
// sequences, control bytes, binary garbage, an over-long line); and the
// LineReader of the line-mode SSH shell.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "cli/line_editor.h"
#include "cli/line_reader.h"

using keel::cli::Completion;
using keel::cli::LineEditor;

namespace {

// Types bytes into an editor and collects what comes out; `run` plays the
// command tree: what it returns for a line is written back through the pager.
struct Term {
  LineEditor ed;
  std::vector<std::string> lines;
  std::string out;
  bool eof = false;
  std::function<std::string(const std::string&)> run;

  explicit Term(LineEditor::Config cfg = {}) : ed(std::move(cfg)) { type(""); }

  void type(std::string_view keys) {
    ed.feed(keys);
    while (!eof) {
      LineEditor::Event ev = ed.step();
      out += ed.take_output();
      if (ev == LineEditor::Event::line) {
        lines.push_back(ed.line_text());
        if (run) ed.write(run(ed.line_text()));
      } else if (ev == LineEditor::Event::eof) eof = true;
      else break;
    }
  }
  std::string take() { return std::exchange(out, {}); }
};

// A completer over a fixed word list (the real one is CommandTree's).
keel::cli::Completer words_completer(std::vector<Completion> all) {
  return [all](std::string_view before) {
    size_t ws = before.find_last_of(' ');
    std::string_view partial = ws == std::string_view::npos ? before : before.substr(ws + 1);
    std::vector<Completion> r;
    for (const Completion& c : all)
      if (!c.literal || c.word.rfind(partial, 0) == 0) r.push_back(c);
    return r;
  };
}

const std::string kLeft = "\x1b[D", kRight = "\x1b[C", kUp = "\x1b[A", kDown = "\x1b[B";

}  // namespace

TEST_CASE("prompt, typing, Enter (CR, LF, CRLF)") {
  Term t;
  CHECK(t.take() == "keel> ");
  t.type("show ports\r");
  REQUIRE(t.lines.size() == 1);
  CHECK(t.lines[0] == "show ports");
  CHECK(t.take() == "show ports\r\nkeel> ");  // echo, a new row, the next prompt
  t.type("a\r\nb\nc\r");
  CHECK(t.lines == std::vector<std::string>{"show ports", "a", "b", "c"});
  t.type("\r");  // an empty line is still a line (the caller ignores it)
  CHECK(t.lines.size() == 5);
  CHECK(t.lines[4].empty());
}

TEST_CASE("cursor movement: arrows, ^B/^F, Home/End in all their forms") {
  Term t;
  t.type("ac" + kLeft + "b");
  CHECK(t.ed.buffer() == "abc");
  CHECK(t.ed.cursor() == 2);
  t.type(kRight + "d");
  CHECK(t.ed.buffer() == "abcd");
  t.type("\x02\x02X\x06Y");  // ^B ^B X ^F Y
  CHECK(t.ed.buffer() == "abXcYd");
  t.type("\x01<\x05>");  // ^A ^E
  CHECK(t.ed.buffer() == "<abXcYd>");
  for (std::string home : {"\x1b[H", "\x1b[1~", "\x1b[7~", "\x1bOH"}) {
    t.type(home);
    CHECK_MESSAGE(t.ed.cursor() == 0, "home form " << home.substr(1));
    t.type("\x05");
  }
  for (std::string end : {"\x1b[F", "\x1b[4~", "\x1b[8~", "\x1bOF"}) {
    t.type("\x01" + end);
    CHECK_MESSAGE(t.ed.cursor() == t.ed.buffer().size(), "end form " << end.substr(1));
  }
  t.type("\x1bOD\x1bOD\x1bOC");  // SS3 arrows (application cursor mode)
  CHECK(t.ed.cursor() == t.ed.buffer().size() - 1);
  // Left at the start and Right at the end stay put.
  t.type("\x01" + kLeft);
  CHECK(t.ed.cursor() == 0);
  t.type("\x05" + kRight);
  CHECK(t.ed.cursor() == t.ed.buffer().size());
}

TEST_CASE("deleting: Backspace (7f and 08), Delete, ^D, ^K, ^U, ^W, ^Y") {
  Term t;
  t.type("abcd\x7f");
  CHECK(t.ed.buffer() == "abc");
  t.type("\x08");
  CHECK(t.ed.buffer() == "ab");
  t.type("\x01\x7f");  // Backspace at the start: nothing
  CHECK(t.ed.buffer() == "ab");
  t.type("\x1b[3~");  // Delete under the cursor
  CHECK(t.ed.buffer() == "b");
  t.type("\x04");  // ^D on a non-empty line deletes under the cursor
  CHECK(t.ed.buffer().empty());
  CHECK_FALSE(t.eof);

  t.type("show ports --format json");
  t.type("\x17");  // ^W: the word before the cursor
  CHECK(t.ed.buffer() == "show ports --format ");
  t.type("\x17");
  CHECK(t.ed.buffer() == "show ports ");
  t.type("\x19");  // ^Y yanks the last kill back
  CHECK(t.ed.buffer() == "show ports --format ");
  t.type("\x01\x06\x06\x06\x06\x0b");  // ^K after "show"
  CHECK(t.ed.buffer() == "show");
  t.type("\x05 ports\x02\x02\x15");  // ^U kills up to the cursor
  CHECK(t.ed.buffer() == "ts");
  CHECK(t.ed.cursor() == 0);
}

TEST_CASE("^L clears the screen and redraws; ^C abandons the line") {
  Term t;
  t.type("show bo");
  t.take();
  t.type("\x0c");
  std::string o = t.take();
  CHECK(o.find("\x1b[2J") != std::string::npos);
  CHECK(o.find("keel> show bo") != std::string::npos);
  CHECK(t.ed.buffer() == "show bo");

  t.type("\x03");
  CHECK(t.take() == "^C\r\nkeel> ");
  CHECK(t.ed.buffer().empty());
  CHECK(t.lines.empty());
  t.type("version\r");
  CHECK(t.lines == std::vector<std::string>{"version"});
}

TEST_CASE("^D on an empty line ends the session") {
  Term t;
  t.type("\x04");
  CHECK(t.eof);
  CHECK(t.lines.empty());
}

TEST_CASE("history: Up/Down and ^P/^N, the draft kept, bounded, no blanks or repeats") {
  Term t;
  t.type("one\rtwo\rtwo\r   \rthree\r");
  CHECK(t.ed.history() == std::deque<std::string>{"one", "two", "three"});
  t.type("dra");
  t.type(kUp);
  CHECK(t.ed.buffer() == "three");
  t.type(kUp + kUp);
  CHECK(t.ed.buffer() == "one");
  t.type(kUp);  // the oldest: stays
  CHECK(t.ed.buffer() == "one");
  t.type(kDown);
  CHECK(t.ed.buffer() == "two");
  t.type("\x0e\x0e");  // ^N ^N: back to the draft
  CHECK(t.ed.buffer() == "dra");
  t.type("\x10");  // ^P
  CHECK(t.ed.buffer() == "three");
  t.type("\x7f\x7f\r");  // edit a recalled line and run it: history keeps the original
  CHECK(t.lines.back() == "thr");
  CHECK(t.ed.history() == std::deque<std::string>{"one", "two", "three", "thr"});
  t.type(kUp + "\r");  // Up + Enter re-runs the last command
  CHECK(t.lines.back() == "thr");

  LineEditor::Config small;
  small.history_size = 100;
  Term u(small);
  for (int i = 0; i < 150; ++i) u.type("cmd" + std::to_string(i) + "\r");
  CHECK(u.ed.history().size() == 100);
  CHECK(u.ed.history().front() == "cmd50");
  CHECK(u.ed.history().back() == "cmd149");
}

TEST_CASE("unknown escape sequences, control bytes and binary garbage change nothing") {
  Term t;
  t.type("ab");
  t.take();
  std::string junk = std::string("\x1b[1;5C")   // Ctrl-Right (modifier params)
                     + "\x1b[200~"              // bracketed paste start
                     + "\x1b[?25h"              // a private CSI
                     + "\x1b[99999999999999999999999999999A"  // parameters past the bound
                     + "\x1bx"                  // Alt-x
                     + "\x1bOZ"                 // unknown SS3
                     + "\x1b[2~"                // Insert
                     + std::string("\x00\x0f\x12\x13\x14\x16\x1a\x1c\x1d\x1e\x1f", 11)
                     + "\x80\xff\xc3\xa9\x9b\xfe";  // high bytes, UTF-8, 8-bit CSI
  t.type(junk);
  t.type("c");
  CHECK(t.ed.buffer() == "abc");
  CHECK(t.ed.cursor() == 3);
  std::string o = t.take();
  for (unsigned char c : o) {
    bool ok = (c >= 0x20 && c < 0x7f) || c == 0x1b || c == '\r' || c == '\n' || c == 0x07;
    CHECK_MESSAGE(ok, "byte " << int(c));
  }
  // A control key right after a lone ESC still works; so does Enter inside a CSI.
  t.type("\x1b\x01X");
  CHECK(t.ed.buffer() == "Xabc");
  t.type("\x1b[12\r");
  CHECK(t.lines == std::vector<std::string>{"Xabc"});
}

TEST_CASE("a line longer than the limit is refused whole, with a message") {
  Term t;
  t.type(std::string(5000, 'x') + "\r");
  CHECK(t.lines.empty());
  std::string o = t.take();
  CHECK(o.find("% line longer than 4096 bytes ignored") != std::string::npos);
  CHECK(o.find('\x07') != std::string::npos);
  CHECK(t.ed.buffer().empty());
  t.type("version\r");
  CHECK(t.lines == std::vector<std::string>{"version"});
  t.type(std::string(4096, 'y') + "\r");  // exactly the limit is fine
  REQUIRE(t.lines.size() == 2);
  CHECK(t.lines[1].size() == 4096);
}

TEST_CASE("Tab completes to the longest common prefix; a second Tab lists") {
  Term t;
  t.ed.set_completer(words_completer({{"pmd-stats-show", "PMD statistics"},
                                      {"pmd-stats-clear", "reset"},
                                      {"pmd-rxq-show", "rx queues"},
                                      {"show", "show state"},
                                      {"<cr>", "run", false}}));
  t.type("pmd-st\t");
  CHECK(t.ed.buffer() == "pmd-stats-");
  t.take();
  t.type("\t");  // no progress after a Tab: list the candidates
  std::string o = t.take();
  CHECK(o.find("pmd-stats-clear") != std::string::npos);
  CHECK(o.find("pmd-stats-show") != std::string::npos);
  CHECK(o.find("pmd-rxq-show") == std::string::npos);
  CHECK(o.find("<cr>") == std::string::npos);  // placeholders are never offered by Tab
  CHECK(o.find("keel> pmd-stats-") != std::string::npos);  // the line comes back
  CHECK(t.ed.buffer() == "pmd-stats-");
  t.type("s\t\r");
  CHECK(t.lines == std::vector<std::string>{"pmd-stats-show "});

  t.type("pmd-\t");  // ambiguous, no progress: first Tab rings, second lists
  CHECK(t.ed.buffer() == "pmd-");
  o = t.take();
  CHECK(o.find('\x07') != std::string::npos);
  CHECK(o.find("pmd-rxq-show") == std::string::npos);
  t.type("\t");
  CHECK(t.take().find("pmd-rxq-show") != std::string::npos);

  t.type("\x03sh\t");  // unique: completed with a blank
  CHECK(t.ed.buffer() == "show ");
  t.type("\x03zz\t");  // nothing: a bell, the line unchanged
  CHECK(t.ed.buffer() == "zz");
  // Completing in the middle of a line.
  t.type("\x03pmd-r --x\x01\x06\x06\x06\x06\x06\t");
  CHECK(t.ed.buffer() == "pmd-rxq-show  --x");
}

TEST_CASE("'?' lists what can come next, with help, and redraws the line") {
  Term t;
  t.ed.set_completer(words_completer({{"board", "the board keel booted on"},
                                      {"ports", "ports, their link and packet counters"},
                                      {"<cr>", "run the command", false}}));
  t.type("show ");
  t.take();
  t.type("?");
  std::string o = t.take();
  CHECK(o.find("board") != std::string::npos);
  CHECK(o.find("the board keel booted on") != std::string::npos);
  CHECK(o.find("<cr>") != std::string::npos);
  CHECK(o.find("keel> show ") != std::string::npos);
  CHECK(t.ed.buffer() == "show ");
  t.type("p?");
  o = t.take();
  CHECK(o.find("ports, their link") != std::string::npos);
  CHECK(o.find("the board keel") == std::string::npos);
  CHECK(t.ed.buffer() == "show p");
  // Inside quotes or after a backslash, '?' is a character.
  t.type("\x03say '?' \\?");
  CHECK(t.ed.buffer() == "say '?' \\?");
  // Nothing can follow: said so.
  Term u;
  u.type("?");
  CHECK(u.take().find("% nothing matches") != std::string::npos);
}

TEST_CASE("paging: --More--, space = page, Enter = line, q = stop; length 0 = off") {
  LineEditor::Config cfg;
  cfg.height = 5;
  Term t(cfg);
  std::string text;
  for (int i = 0; i < 12; ++i) text += "line" + std::to_string(i) + "\n";
  t.run = [&](const std::string& line) {
    if (line == "wide") return std::string(200, 'w') + "\nnext\nmore\n";  // 3 rows of 80, then more
    if (line == "all") return text + text + text;
    return text;
  };
  t.take();
  t.type("show\r");
  std::string o = t.take();
  CHECK(o == "show\r\nline0\r\nline1\r\nline2\r\nline3\r\n--More--");
  CHECK(t.ed.paging());
  t.type("x");  // other keys wait
  CHECK(t.take().empty());
  t.type(" ");
  o = t.take();
  CHECK(o.find("line4\r\n") != std::string::npos);
  CHECK(o.find("line7\r\n--More--") != std::string::npos);
  CHECK(o.find("line8") == std::string::npos);
  t.type("\r");
  o = t.take();
  CHECK(o.find("line8\r\n--More--") != std::string::npos);
  CHECK(o.find("line9") == std::string::npos);
  t.type("q");
  o = t.take();
  CHECK(o.find("line9") == std::string::npos);
  CHECK(o.find("keel> ") != std::string::npos);
  CHECK_FALSE(t.ed.paging());
  CHECK(t.lines.size() == 1);  // the keys at --More-- were not typed into a line

  // To the end with spaces: the prompt comes back after the last page.
  t.type("again\r  ");
  o = t.take();
  CHECK(o.find("line11\r\n") != std::string::npos);
  CHECK(o.rfind("keel> ") > o.find("line11"));
  CHECK_FALSE(t.ed.paging());

  // A long output row counts as the rows it wraps to.
  t.type("wide\r");
  o = t.take();
  CHECK(o.find("--More--") != std::string::npos);
  CHECK_MESSAGE(o.find("next") != std::string::npos, o);
  CHECK(o.find("more") == std::string::npos);
  t.type("q");

  t.ed.set_height(0);  // terminal length 0
  t.type("all\r");
  o = t.take();
  CHECK(o.find("--More--") == std::string::npos);
  CHECK(o.find("line11\r\nline0") != std::string::npos);
  CHECK(!t.ed.paging());
}

TEST_CASE("a line wider than the terminal scrolls inside one row") {
  LineEditor::Config cfg;
  cfg.width = 20;
  Term t(cfg);
  std::string long_line = "abcdefghijklmnopqrstuvwxyz0123456789";
  t.type(long_line);
  CHECK(t.ed.buffer() == long_line);
  t.take();
  t.type("\x01");
  std::string o = t.take();
  // The redraw shows the start of the line, cut at the width.
  CHECK(o.find("keel> abcdefghijklmn\x1b[K") != std::string::npos);
  t.type("\x05");
  o = t.take();
  CHECK(o.find("0123456789\x1b[K") != std::string::npos);
  t.type("\r");
  CHECK(t.lines == std::vector<std::string>{long_line});
}

// ---------------------------------------------------------------- LineReader
// The line-mode SSH shell's reader (cli/line_reader.h): lines out of a byte
// stream in any chunking, over-long lines refused whole, and what it holds
// and has consumed (the SSH window is acknowledged from consumed()).

namespace {

using keel::cli::LineReader;

// Every line next() hands back after feeding `chunk`; too-long lines as "<too long>".
std::vector<std::string> drain(LineReader& r, std::string_view chunk) {
  r.feed(chunk);
  std::vector<std::string> got;
  std::string line;
  for (LineReader::Got g; (g = r.next(line)) != LineReader::Got::none;)
    got.push_back(g == LineReader::Got::line ? line : "<too long>");
  return got;
}

}  // namespace

TEST_CASE("line reader: lines in order whatever the chunks, CR LF, empty lines, the last line at the end") {
  LineReader r;
  CHECK(drain(r, "show ports\r\nver") == std::vector<std::string>{"show ports"});
  CHECK(r.held() == 3);
  CHECK(r.consumed() == 12);
  CHECK(drain(r, "sion\n\n") == std::vector<std::string>{"version", ""});
  CHECK(drain(r, "q").empty());
  CHECK(drain(r, "uit").empty());
  std::string line;
  CHECK(r.finish(line) == LineReader::Got::line);
  CHECK(line == "quit");
  CHECK(r.finish(line) == LineReader::Got::none);
  CHECK(r.held() == 0);
  CHECK(r.consumed() == 12 + 9 + 4);
}

TEST_CASE("line reader: a large chunk of lines comes out whole; it holds only the partial line after") {
  // The bulk case of issue 17 (`cat file | ssh nic`): 4 MB in one chunk.
  const std::string one = "! " + std::string(3997, 'x') + "\n";
  std::string chunk;
  for (int i = 0; i < 1000; ++i) chunk += one;
  chunk += "versi";
  LineReader r;
  const std::vector<std::string> got = drain(r, chunk);
  REQUIRE(got.size() == 1000);
  CHECK(got.front() == one.substr(0, one.size() - 1));
  CHECK(got.back() == got.front());
  CHECK(r.held() == 5);
  CHECK(r.consumed() == chunk.size() - 5);
  CHECK(drain(r, "on\n") == std::vector<std::string>{"version"});
  CHECK(r.held() == 0);
}

TEST_CASE("line reader: a line longer than max_line is refused whole, never held, and the next line runs") {
  LineReader r(16);
  // Complete in one chunk.
  CHECK(drain(r, std::string(17, 'a') + "\nok\n") == std::vector<std::string>{"<too long>", "ok"});
  CHECK(drain(r, std::string(16, 'b') + "\n") == std::vector<std::string>{std::string(16, 'b')});
  // Arriving in pieces: dropped as it comes, reported once at its end.
  for (int i = 0; i < 50; ++i) {
    CHECK(drain(r, std::string(10, 'c')).empty());
    CHECK(r.held() <= 16);
  }
  CHECK(drain(r, "cc\nshow\n") == std::vector<std::string>{"<too long>", "show"});
  CHECK(r.consumed() == 18 + 3 + 17 + 500 + 8);
  // At the end of the input.
  CHECK(drain(r, std::string(40, 'd')).empty());
  std::string line;
  CHECK(r.finish(line) == LineReader::Got::too_long);
  CHECK(r.finish(line) == LineReader::Got::none);
  CHECK(r.consumed() == 18 + 3 + 17 + 500 + 8 + 40);
}

// View — one description of a show command's result, rendered as text or as
// JSON, so the two forms can't disagree (ARCHITECTURE.md: "A command's text
// and JSON output come from one description of its result").
//
// A View is an ordered tree:
//   * fields: a value (number, string, bool, null) under a JSON key, with
//     the label its text line carries ("packets received"). A field with no
//     label is JSON-only (an id the text puts in a heading); a field with no
//     key is text-only (a line that combines several JSON fields, like
//     "keel: upcalls: 5 (followers 1, ...)"); `text` overrides how the text
//     shows the value ("675519522 (52.98%)"); hidden_text() leaves a line
//     out of the text where Open vSwitch prints none (JSON keeps the value);
//   * objects: a nested View under a key, with a text heading ("pmd thread
//     numa_id 0 core_id 1") whose fields print indented below it;
//   * groups: a text heading with its fields indented below it, as an
//     object's, whose fields stay in this object's JSON (Open vSwitch's
//     "netdev@ovs-netdev:" block, whose values JSON keeps flat);
//   * blank lines: text only;
//   * lists of objects (View::list): JSON arrays; text prints each item as
//     an object; text_only() items (Open vSwitch's "main thread" stand-in)
//     stay out of the JSON;
//   * tables (View::table): a JSON array of row objects keyed by the column
//     keys, a text table (cli/table.h) headed by the column labels, after a
//     blank line if text came before it; with no rows the text prints the
//     table's empty text (or nothing).
// Text: "LABEL: TEXT" per field, a heading line "HEADING:" before an
// object's fields, every level indented by `indent` more blanks. JSON: one
// object (json.h), keys in insertion order; numbers stay numbers (doubles
// with two decimals, as the text prints them).
//
// Thread-safety: a value built and rendered by one command on one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "cli/json.h"
#include "cli/table.h"

namespace keel::cli {

class View {
 public:
  struct Null {};
  using Value = std::variant<Null, bool, uint64_t, int64_t, double, std::string>;

  // A value from any number, bool or string type.
  template <class T>
  static Value value(T v) {
    if constexpr (std::is_same_v<T, bool>) return Value(v);
    else if constexpr (std::is_floating_point_v<T>) return Value(static_cast<double>(v));
    else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return Value(static_cast<int64_t>(v));
    else if constexpr (std::is_integral_v<T>) return Value(static_cast<uint64_t>(v));
    else if constexpr (std::is_same_v<T, Value>) return v;
    else if constexpr (std::is_same_v<T, Null>) return Value(v);
    else return Value(std::string(v));
  }

  // A field. key "": text only; label "": JSON only.
  template <class T>
  View& field(std::string key, std::string label, T v, std::string text = {}) {
    items_.push_back(Item{Kind::field, std::move(key), std::move(label), value(std::move(v)), std::move(text)});
    return *this;
  }
  template <class T>
  View& json(std::string key, T v) {
    return field(std::move(key), {}, std::move(v));
  }
  View& text_line(std::string label, std::string text) { return field({}, std::move(label), Null{}, std::move(text)); }
  // The last field added prints no text line (its JSON stays).
  View& hidden_text() {
    if (!items_.empty()) items_.back().hide_text = true;
    return *this;
  }
  // This view is a list item that only the text shows.
  View& text_only() {
    text_only_ = true;
    return *this;
  }

  // A nested object: JSON `key: {...}`, text "HEADING:" then its fields
  // indented (heading ""): its fields at this level's indent).
  View& object(std::string key, std::string heading) {
    Item it{Kind::object, std::move(key), std::move(heading), Null{}, {}};
    it.children.push_back(std::make_unique<View>());
    items_.push_back(std::move(it));
    return *items_.back().children.back();
  }

  // A group (see the top): text "HEADING:" then its fields indented; JSON:
  // its fields in this object.
  View& group(std::string heading) {
    Item it{Kind::group, {}, std::move(heading), Null{}, {}};
    it.children.push_back(std::make_unique<View>());
    items_.push_back(std::move(it));
    return *items_.back().children.back();
  }
  // An empty text line.
  View& blank_line() {
    items_.push_back(Item{Kind::blank, {}, {}, Null{}, {}});
    return *this;
  }

  // A list of objects: JSON `key: [...]`; add items with item().
  class List {
   public:
    View& item(std::string heading) {
      auto& it = v_->items_[i_];
      it.children.push_back(std::make_unique<View>());
      it.headings.push_back(std::move(heading));
      return *it.children.back();
    }

   private:
    friend class View;
    List(View* v, size_t i) : v_(v), i_(i) {}
    View* v_;
    size_t i_;  // an index: items_ may grow meanwhile
  };
  List list(std::string key) {
    items_.push_back(Item{Kind::list, std::move(key), {}, Null{}, {}});
    return List(this, items_.size() - 1);
  }

  // A table: JSON `key: [{col: cell...}...]`, text a Table with the labels.
  struct Column {
    std::string key, label;
  };
  class Rows {
   public:
    // One row; cells in column order. `text` (optional) overrides the
    // text cells (same count), e.g. "-" for a JSON null.
    void row(std::vector<Value> cells, std::vector<std::string> text = {}) {
      auto& it = v_->items_[i_];
      it.rows.push_back(std::move(cells));
      it.row_text.push_back(std::move(text));
    }

   private:
    friend class View;
    Rows(View* v, size_t i) : v_(v), i_(i) {}
    View* v_;
    size_t i_;
  };
  // `empty_text`: what the text prints instead of a table with no rows.
  Rows table(std::string key, std::vector<Column> columns, std::string empty_text = {}) {
    Item it{Kind::table, std::move(key), std::move(empty_text), Null{}, {}};
    it.columns = std::move(columns);
    items_.push_back(std::move(it));
    return Rows(this, items_.size() - 1);
  }

  std::string text(int indent = 2) const {
    std::string out;
    render_text(out, 0, indent);
    return out;
  }
  std::string json() const {
    Json j;
    j.begin_object();
    render_json(j);
    j.end_object();
    return j.str();
  }

  static std::string value_text(const Value& v) {
    struct {
      std::string operator()(Null) const { return "null"; }
      std::string operator()(bool b) const { return b ? "true" : "false"; }
      std::string operator()(uint64_t u) const { return std::to_string(u); }
      std::string operator()(int64_t i) const { return std::to_string(i); }
      std::string operator()(double d) const {
        char buf[40];
        snprintf(buf, sizeof buf, "%.2f", d);
        return buf;
      }
      std::string operator()(const std::string& s) const { return s; }
    } visit;
    return std::visit(visit, v);
  }

 private:
  enum class Kind { field, object, list, table, group, blank };
  struct Item {
    Kind kind;
    std::string key, label;  // label: the field's label, the object's heading, the table's empty text
    Value value;
    std::string text;
    bool hide_text = false;
    std::vector<std::unique_ptr<View>> children;  // object: one; list: the items
    std::vector<std::string> headings;            // list: each item's heading
    std::vector<Column> columns;                  // table
    std::vector<std::vector<Value>> rows;
    std::vector<std::vector<std::string>> row_text;
  };

  static void json_value(Json& j, const std::string& key, const Value& v) {
    struct {
      Json& j;
      const std::string& k;
      void operator()(Null) const { j.null_field(k); }
      void operator()(bool b) const { j.field(k, b); }
      void operator()(uint64_t u) const { j.field(k, u); }
      void operator()(int64_t i) const { j.field(k, i); }
      void operator()(double d) const { j.field(k, d); }
      void operator()(const std::string& s) const { j.field(k, s); }
    } visit{j, key};
    std::visit(visit, v);
  }

  void render_json(Json& j) const {
    for (const Item& it : items_) {
      if (it.kind == Kind::group) it.children[0]->render_json(j);  // flat
      if (it.key.empty()) continue;  // text only
      switch (it.kind) {
        case Kind::field: json_value(j, it.key, it.value); break;
        case Kind::object:
          j.begin_object(it.key);
          it.children[0]->render_json(j);
          j.end_object();
          break;
        case Kind::list:
          j.begin_array(it.key);
          for (const auto& c : it.children) {
            if (c->text_only_) continue;
            j.begin_object();
            c->render_json(j);
            j.end_object();
          }
          j.end_array();
          break;
        case Kind::table:
          j.begin_array(it.key);
          for (const auto& r : it.rows) {
            j.begin_object();
            for (size_t c = 0; c < it.columns.size() && c < r.size(); ++c) json_value(j, it.columns[c].key, r[c]);
            j.end_object();
          }
          j.end_array();
          break;
        case Kind::group:
        case Kind::blank:
          break;
      }
    }
  }

  void render_text(std::string& out, int depth, int indent) const {
    const std::string pad(static_cast<size_t>(depth * indent), ' ');
    for (const Item& it : items_) {
      switch (it.kind) {
        case Kind::field:
          if (it.label.empty() || it.hide_text) break;
          out += pad + it.label + ": " + (it.text.empty() ? value_text(it.value) : it.text) + "\n";
          break;
        case Kind::object:
        case Kind::group:
          if (!it.label.empty()) out += pad + it.label + ":\n";
          it.children[0]->render_text(out, it.label.empty() ? depth : depth + 1, indent);
          break;
        case Kind::blank:
          out += "\n";
          break;
        case Kind::list:
          for (size_t i = 0; i < it.children.size(); ++i) {
            if (!it.headings[i].empty()) out += pad + it.headings[i] + ":\n";
            it.children[i]->render_text(out, it.headings[i].empty() ? depth : depth + 1, indent);
          }
          break;
        case Kind::table: {
          if (it.rows.empty()) {  // the empty text, or nothing
            if (!it.label.empty()) out += pad + it.label + "\n";
            break;
          }
          if (!out.empty()) out += "\n";  // a blank line after what came before
          std::vector<std::string> header;
          for (const Column& c : it.columns) header.push_back(c.label);
          Table t(header);
          for (size_t r = 0; r < it.rows.size(); ++r) {
            std::vector<std::string> cells;
            for (size_t c = 0; c < it.columns.size(); ++c)
              cells.push_back(c < it.row_text[r].size() ? it.row_text[r][c]
                                                        : (c < it.rows[r].size() ? value_text(it.rows[r][c]) : ""));
            t.add(std::move(cells));
          }
          std::string s = t.str();
          if (!pad.empty()) {
            std::string indented;
            size_t pos = 0;
            while (pos < s.size()) {
              size_t nl = s.find('\n', pos);
              indented += pad + s.substr(pos, nl - pos + 1);
              pos = nl + 1;
            }
            s = std::move(indented);
          }
          out += s;
          break;
        }
      }
    }
  }

  std::vector<Item> items_;
  bool text_only_ = false;
};

}  // namespace keel::cli

#include "compile/text_canonical.h"

#include <cctype>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

namespace kiln {
namespace {

// The canonical form must never merge two programs MLIR reads differently, so this scan follows
// MLIR's lexer (mlir/lib/AsmParser/Lexer.cpp) wherever it changes something:
//  - whitespace and comments collapse to one space, only where the source had some, so no two
//    tokens ever join or split;
//  - SSA values and block labels are renumbered by first appearance (a bijection: names never
//    change what a program means);
//  - a trailing debug location `loc(...)` keeps its place but loses its content, and only when
//    that content is a well-formed location: programs that differ in where a location stands,
//    or whose location MLIR would reject, keep different keys;
//  - strings, symbol names (`@loc` is a symbol, not a location) and dialect attribute and type
//    bodies (`#dialect.name<...>`, `!dialect.name<...>`) are copied verbatim.
// Anything the scan is not sure of makes it give up (nullopt), and the caller canonicalises with
// MLIR itself.

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
// bare-id continuation characters.
bool is_bare(char c) { return is_alpha(c) || is_digit(c) || c == '_' || c == '$' || c == '.'; }
// suffix-id punctuation (after %, ^, #, !).
bool is_suffix_punct(char c) { return c == '$' || c == '.' || c == '_' || c == '-'; }

// End of the suffix-id starting at `i` (MLIR: all digits, or a letter/punctuation then letters,
// digits and punctuation), or `i` when there is none.
size_t suffix_id_end(std::string_view s, size_t i) {
  size_t n = s.size();
  if (i < n && is_digit(s[i])) {
    while (i < n && is_digit(s[i])) ++i;
    return i;
  }
  if (i < n && (is_alpha(s[i]) || is_suffix_punct(s[i]))) {
    while (i < n && (is_alpha(s[i]) || is_digit(s[i]) || is_suffix_punct(s[i]))) ++i;
  }
  return i;
}

// End (one past the closing quote) of the string literal opening at `i`, or npos when MLIR's
// lexer would reject it: unterminated, a raw newline, or an escape other than \" \\ \n \t \XX.
size_t string_end(std::string_view s, size_t i) {
  size_t n = s.size();
  for (size_t j = i + 1; j < n; ++j) {
    char c = s[j];
    if (c == '"') return j + 1;
    if (c == '\n' || c == '\v' || c == '\f' || c == '\0') return std::string_view::npos;
    if (c == '\\') {
      if (j + 1 >= n) return std::string_view::npos;
      char e = s[j + 1];
      if (e == '"' || e == '\\' || e == 'n' || e == 't') {
        ++j;
      } else if (j + 2 < n && is_hex(e) && is_hex(s[j + 2])) {
        j += 2;
      } else {
        return std::string_view::npos;
      }
    }
  }
  return std::string_view::npos;
}

// End of the dialect body `<...>` opening at `i` (nested brackets and strings balanced, `->`
// not a closer), or npos when unbalanced.
size_t dialect_body_end(std::string_view s, size_t i) {
  std::string closers;
  for (size_t j = i; j < s.size(); ++j) {
    char c = s[j];
    if (c == '"') {
      size_t e = string_end(s, j);
      if (e == std::string_view::npos) return e;
      j = e - 1;
    } else if (c == '<') {
      closers += '>';
    } else if (c == '(') {
      closers += ')';
    } else if (c == '[') {
      closers += ']';
    } else if (c == '{') {
      closers += '}';
    } else if (c == '>' && j > i && s[j - 1] == '-') {
      continue;  // an arrow inside the body
    } else if (c == '>' || c == ')' || c == ']' || c == '}') {
      if (closers.empty() || closers.back() != c) return std::string_view::npos;
      closers.pop_back();
      if (closers.empty()) return j + 1;
    }
  }
  return std::string_view::npos;
}

// A recursive-descent check of a location's content (between `loc(` and its `)`), on MLIR's
// grammar: unknown | #alias | "name" | "file":line:col | "name"(loc) | callsite(loc at loc) |
// fused[loc, ...]. Collects the alias references it meets, in order.
class LocationChecker {
 public:
  LocationChecker(std::string_view s, size_t pos) : s_(s), pos_(pos) {}

  // Parses one location; on success `pos()` is just past it.
  bool location(int depth = 0) {
    if (depth > 64) return false;
    skip_space();
    if (take_word("unknown")) return true;
    if (peek() == '#') {
      size_t start = pos_;
      size_t end = suffix_id_end(s_, pos_ + 1);
      if (end == pos_ + 1) return false;
      aliases_.emplace_back(s_.substr(start, end - start));
      pos_ = end;
      return true;
    }
    if (take_word("callsite")) {
      return take('(') && location(depth + 1) && take_word("at") && location(depth + 1) &&
             take(')');
    }
    if (take_word("fused")) {
      if (!take('[')) return false;  // fused<metadata>[...] is left verbatim
      do {
        if (!location(depth + 1)) return false;
      } while (take(','));
      return take(']');
    }
    if (peek() != '"') return false;
    size_t end = string_end(s_, pos_);
    if (end == std::string_view::npos) return false;
    pos_ = end;
    skip_space();
    if (peek() == ':') {
      ++pos_;
      return number() && take(':') && number();
    }
    if (peek() == '(') {
      ++pos_;
      return location(depth + 1) && take(')');
    }
    return true;
  }

  size_t pos() const { return pos_; }
  const std::vector<std::string>& aliases() const { return aliases_; }

  bool take(char c) {
    skip_space();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }
  bool take_word(std::string_view word) {
    skip_space();
    if (s_.compare(pos_, word.size(), word) != 0) return false;
    size_t end = pos_ + word.size();
    if (end < s_.size() && is_bare(s_[end])) return false;
    pos_ = end;
    return true;
  }
  // A line or column: decimal, small enough for MLIR's unsigned.
  bool number() {
    skip_space();
    size_t start = pos_;
    while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
    size_t digits = pos_ - start;
    return digits > 0 && digits <= 9 && (pos_ >= s_.size() || !is_bare(s_[pos_]));
  }

  std::string_view s_;
  size_t pos_;
  std::vector<std::string> aliases_;
};

// The @name of the first module operation outside any braces, or "module".
std::string module_name_of(const std::string& text) {
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      size_t e = string_end(text, i);
      if (e == std::string::npos) return "module";
      i = e - 1;
    } else if (c == '{' || c == '(' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ')' || c == ']') {
      --depth;
    } else if (depth == 0 && text.compare(i, 6, "module") == 0 &&
               (i == 0 || !is_bare(text[i - 1])) &&
               (i + 6 >= text.size() || !is_bare(text[i + 6]))) {
      if (text.compare(i + 6, 2, " @") != 0) return "module";
      size_t start = i + 8, end = start;
      if (end < text.size() && text[end] == '"') {
        end = string_end(text, start);
        return end == std::string::npos ? "module" : text.substr(start + 1, end - start - 2);
      }
      while (end < text.size() && is_bare(text[end])) ++end;
      return end > start ? text.substr(start, end - start) : "module";
    }
  }
  return "module";
}

class Canonicalizer {
 public:
  Canonicalizer(std::string_view s, bool keep_locations, const std::set<std::string>& verbatim)
      : s_(s), keep_locations_(keep_locations), verbatim_aliases_(verbatim) {}

  bool run() {
    out_.reserve(s_.size());
    size_t n = s_.size();
    for (size_t i = 0; i < n;) {
      char c = s_[i];
      if (c == '\0') return false;
      if (is_space(c)) {
        space_ = true;
        ++i;
      } else if (c == '/' && i + 1 < n && s_[i + 1] == '/') {
        while (i < n && s_[i] != '\n') ++i;
        space_ = true;
      } else if (c == '"') {
        size_t e = string_end(s_, i);
        if (e == std::string_view::npos) return false;
        emit(s_.substr(i, e - i));
        i = e;
      } else if (c == '@') {
        // A symbol: @"any string" or @bare-id, verbatim (so `@loc(...)` is a call, never a loc).
        size_t e = i + 1;
        if (e < n && s_[e] == '"') {
          e = string_end(s_, e);
          if (e == std::string_view::npos) return false;
        } else {
          while (e < n && is_bare(s_[e])) ++e;
        }
        emit(s_.substr(i, e - i));
        i = e;
      } else if (c == '%' || c == '^') {
        size_t e = suffix_id_end(s_, i + 1);
        if (e == i + 1) return false;
        auto& names = c == '%' ? values_ : blocks_;
        size_t id = names.emplace(s_.substr(i + 1, e - i - 1), names.size()).first->second;
        emit(std::string(1, c) + std::to_string(id));
        i = e;
      } else if (c == '#' || c == '!') {
        size_t e = suffix_id_end(s_, i + 1);
        std::string_view name = s_.substr(i, e - i);
        // A dialect attribute or type with a body: the dialect parses the body, so it stays as is.
        if (e < n && s_[e] == '<' && name.size() > 1) {
          size_t end = dialect_body_end(s_, e);
          if (end == std::string_view::npos) return false;
          emit(s_.substr(i, end - i));
          i = end;
          continue;
        }
        if (c == '#' && name.size() > 1) {
          alias_just_emitted_ = std::string(name);
          emit(name);
          alias_just_emitted_pos_ = out_.size();
          ++alias_uses_[std::string(name)];
        } else {
          emit(name);
        }
        i = e;
      } else if (is_alpha(c) || c == '_' || is_digit(c)) {
        size_t e = i;
        while (e < n && is_bare(s_[e])) ++e;
        std::string_view word = s_.substr(i, e - i);
        if (word == "loc" && !keep_locations_) {
          size_t consumed = location(e);
          if (consumed != 0) {
            i = consumed;
            continue;
          }
        }
        emit(word);
        i = e;
      } else {
        emit(std::string_view(&s_[i], 1));
        ++i;
      }
    }
    return true;
  }

  std::string& text() { return out_; }
  // Aliases whose definitions were normalised but which something other than a location uses.
  std::set<std::string> misused_aliases() const {
    std::set<std::string> out;
    for (const std::string& a : normalized_aliases_) {
      auto it = alias_uses_.find(a);
      if (it != alias_uses_.end() && it->second > 0) out.insert(a);
    }
    return out;
  }

 private:
  void emit(std::string_view token) {
    if (space_ && !out_.empty()) out_ += ' ';
    space_ = false;
    out_.append(token);
  }

  // `loc` at `s_[after - 3]`: when it opens a well-formed trailing location, emits its canonical
  // form and returns the index just past it; otherwise 0 (the caller copies the word).
  size_t location(size_t after) {
    size_t open = after;
    while (open < s_.size() && is_space(s_[open])) ++open;
    if (open >= s_.size() || s_[open] != '(') return 0;
    // Where an attribute value stands (`= loc(..)`, `[loc(..), ...]`), a location is data.
    char before = last_significant();
    bool alias_definition = false;
    if (before == '=') {
      // `#name = loc(...)` defines a location alias; any other `=` is an attribute value.
      if (alias_just_emitted_.empty() || !equals_follows_alias()) return 0;
      if (verbatim_aliases_.count(alias_just_emitted_)) return 0;
      alias_definition = true;
    } else if (before == '\0' || before == '[' || before == '(' || before == '{' || before == '<' ||
               before == ',' || before == ':') {
      return 0;
    }
    LocationChecker checker(s_, open + 1);
    if (!checker.location() || !checker.take(')')) return 0;
    if (alias_definition) {
      normalized_aliases_.insert(alias_just_emitted_);
      --alias_uses_[alias_just_emitted_];  // its definition, not a use
    }
    // The references stay: an undefined or non-location alias must still fail to parse.
    std::string canonical = "loc(";
    for (size_t k = 0; k < checker.aliases().size(); ++k)
      canonical += (k ? " " : "") + checker.aliases()[k];
    emit(canonical + ")");
    return checker.pos();
  }

  char last_significant() const { return out_.empty() ? '\0' : out_.back(); }
  // out_ ends with "#alias =" or "#alias=" (the alias emitted last, then only '=').
  bool equals_follows_alias() const {
    size_t p = alias_just_emitted_pos_;
    if (p > out_.size()) return false;
    std::string_view rest(out_.data() + p, out_.size() - p);
    return rest == "=" || rest == " =";
  }

  std::string_view s_;
  bool keep_locations_;
  const std::set<std::string>& verbatim_aliases_;
  std::string out_;
  bool space_ = false;
  std::unordered_map<std::string_view, size_t> values_, blocks_;
  std::string alias_just_emitted_;
  size_t alias_just_emitted_pos_ = 0;
  std::set<std::string> normalized_aliases_;
  std::map<std::string, int> alias_uses_;  // outside location contents
};

}  // namespace

std::optional<TextCanonical> canonicalize_mlir_text(std::string_view s, bool keep_locations) {
  if (s.size() >= 4 && s.substr(0, 4) == std::string_view("ML\xefR", 4)) return std::nullopt;
  std::set<std::string> verbatim;
  Canonicalizer first(s, keep_locations, verbatim);
  if (!first.run()) return std::nullopt;
  TextCanonical result;
  std::set<std::string> misused = first.misused_aliases();
  if (misused.empty()) {
    result.text = std::move(first.text());
  } else {
    // A location alias also used as an attribute: its content is data, keep it.
    Canonicalizer second(s, keep_locations, misused);
    if (!second.run() || !second.misused_aliases().empty()) return std::nullopt;
    result.text = std::move(second.text());
  }
  result.module_name = module_name_of(result.text);
  return result;
}

}  // namespace kiln

#include "compile/text_canonical.h"

#include <cctype>
#include <cstring>
#include <unordered_map>

namespace kiln {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Characters of MLIR's suffix identifiers (%value, ^block, @symbol, #alias names).
bool is_ident(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.' ||
         c == '-';
}

// Characters that could merge with a neighbour into another token if the space between them
// went: generous on purpose, since keeping a space is always safe.
bool is_word(char c) { return is_ident(c) || std::strchr("@%#!^\"?+*", c) != nullptr; }

// Index of the ')' closing the '(' at `open`, skipping strings; npos when unbalanced.
size_t closing_paren(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i)
        if (s[i] == '\\') ++i;
      if (i >= s.size()) return std::string_view::npos;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')' && --depth == 0) {
      return i;
    }
  }
  return std::string_view::npos;
}

// "#loc3 = loc(...)" defines a location alias: with the location gone, drop "#loc3=" too.
void drop_alias_definition(std::string& out) {
  if (out.empty() || out.back() != '=') return;
  size_t p = out.size() - 1;
  while (p > 0 && is_ident(out[p - 1])) --p;
  if (p > 0 && out[p - 1] == '#') out.resize(p - 1);
}

// The @name of the first module operation outside any braces, or "module".
std::string module_name_of(const std::string& text) {
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (c == '{' || c == '(' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ')' || c == ']') {
      --depth;
    } else if (depth == 0 && text.compare(i, 6, "module") == 0 &&
               (i == 0 || !is_ident(text[i - 1])) &&
               (i + 6 >= text.size() || !is_ident(text[i + 6]))) {
      if (text.compare(i + 6, 2, " @") != 0) return "module";
      size_t start = i + 8, end = start;
      if (end < text.size() && text[end] == '"') {
        end = text.find('"', start + 1);
        return end == std::string::npos ? "module" : text.substr(start + 1, end - start - 1);
      }
      while (end < text.size() && is_ident(text[end])) ++end;
      return end > start ? text.substr(start, end - start) : "module";
    }
  }
  return "module";
}

}  // namespace

std::optional<TextCanonical> canonicalize_mlir_text(std::string_view s, bool keep_locations) {
  if (s.size() >= 4 && s.substr(0, 4) == std::string_view("ML\xefR", 4)) return std::nullopt;
  TextCanonical result;
  std::string& out = result.text;
  out.reserve(s.size());
  std::unordered_map<std::string_view, size_t> values, blocks;
  bool space = false;  // whitespace or a comment since the last emitted character
  auto emit = [&](char c) {
    if (space && !out.empty() && is_word(out.back()) && is_word(c)) out += ' ';
    space = false;
    out += c;
  };
  size_t n = s.size();
  for (size_t i = 0; i < n;) {
    char c = s[i];
    if (c == '\0') return std::nullopt;
    if (is_space(c)) {
      space = true;
      ++i;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') ++i;
      space = true;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < n && s[j] != '"'; ++j)
        if (s[j] == '\\') ++j;
      if (j >= n) return std::nullopt;
      emit('"');
      out.append(s.substr(i + 1, j - i));  // the body and the closing quote, verbatim
      i = j + 1;
    } else if (!keep_locations && c == 'l' && s.compare(i, 3, "loc") == 0 &&
               (i == 0 || !is_ident(s[i - 1])) && (i + 3 >= n || !is_ident(s[i + 3]))) {
      size_t open = i + 3;
      while (open < n && is_space(s[open])) ++open;
      if (open >= n || s[open] != '(') {
        emit(c);
        ++i;
        continue;
      }
      size_t close = closing_paren(s, open);
      if (close == std::string_view::npos) return std::nullopt;
      drop_alias_definition(out);
      i = close + 1;
      space = true;
    } else if ((c == '%' || c == '^') && i + 1 < n && is_ident(s[i + 1])) {
      size_t j = i + 1;
      while (j < n && is_ident(s[j])) ++j;
      auto& names = c == '%' ? values : blocks;
      size_t id = names.emplace(s.substr(i + 1, j - i - 1), names.size()).first->second;
      emit(c);
      out += std::to_string(id);
      i = j;
    } else {
      emit(c);
      ++i;
    }
  }
  result.module_name = module_name_of(out);
  return result;
}

}  // namespace kiln

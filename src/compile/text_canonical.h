// The canonical form of MLIR text for cache keys, computed without MLIR: a linear scan that keeps
// every token and drops what does not change the program.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln {

struct TextCanonical {
  std::string module_name;  // the top-level module's @name, or "module"
  std::string text;
};

// Drops comments and layout (whitespace survives only between two word characters), debug
// locations (`loc(...)` and `#loc = loc(...)` aliases) unless `keep_locations`, and renames SSA
// values and block labels by order of first appearance. Equal results mean the programs differ at
// most by such a renaming, so they compile to the same code. Returns nullopt for input this scan
// does not handle (MLIR bytecode, NUL bytes, unterminated strings or locations): the caller
// canonicalises those with MLIR instead.
std::optional<TextCanonical> canonicalize_mlir_text(std::string_view source, bool keep_locations);

}  // namespace kiln

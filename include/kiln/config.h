// kiln's flags: typed entries named KILN_*, read from the environment when first used and
// settable from code (and from the command line) afterwards. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/status.h"

namespace kiln::config {

// Values are kept as text; the typed getters parse them. Unknown names are errors.
KILN_EXPORT Result<std::string> get_string(const std::string& name);
KILN_EXPORT bool get_bool(const std::string& name);
KILN_EXPORT int64_t get_int(const std::string& name);
KILN_EXPORT double get_double(const std::string& name);

// Overrides the value for this process (environment values are read only once). A value that is
// not valid for the flag (a boolean, an integer in range, one of its choices) is refused.
KILN_EXPORT Status set(const std::string& name, const std::string& value);
// Environment values that were not valid (each is ignored: its flag keeps the default).
KILN_EXPORT Status check_environment();
// The same for one flag: for code that must refuse to go on with its default.
KILN_EXPORT Status check_environment_of(const std::string& name);
// Forgets overrides and re-reads the environment (for tests).
KILN_EXPORT void reset();

struct KILN_EXPORT FlagInfo {
  std::string name;
  std::string default_value;
  std::string help;
  bool affects_codegen;  // part of the cache key
};
KILN_EXPORT const std::vector<FlagInfo>& all_flags();

// A flag as it stands now, for `kiln flags` and docs/FLAGS.md.
struct KILN_EXPORT FlagState {
  FlagInfo info;
  std::string type;    // "boolean", "integer from -1 to ...", "one of a, b", "effort level", "text"
  std::string value;   // the value in effect
  std::string source;  // "default", "environment" or "set" (from code or --set)
  // How it reaches the cache key: "as a flag", "through the compile options", "as the key's tag",
  // "in how the module is hashed", or "no" (it never changes generated code).
  std::string in_key;
};
KILN_EXPORT std::vector<FlagState> flag_states();

// name → value of the flags that change generated code, sorted by name (a cache key component).
KILN_EXPORT std::map<std::string, std::string> codegen_flag_values();

}  // namespace kiln::config

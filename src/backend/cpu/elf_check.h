// Structural checks on a shared object before anyone hands it to dlopen, which trusts its input:
// a malformed header or table there crashes the process instead of returning an error.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "kiln/status.h"

namespace kiln::cpu {

// Checks that `object` is a 64-bit little-endian shared object for this machine whose program
// headers, section headers and dynamic symbol table lie inside it, and returns the names of the
// symbols it defines. kCorruption, naming the first problem, otherwise.
Result<std::set<std::string>> checked_dynamic_symbols(std::string_view object);

}  // namespace kiln::cpu

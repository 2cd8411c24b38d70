// Whole-file reads and writes without iostreams (whose first use costs milliseconds, which a
// cache hit in a fresh process cannot afford).
#pragma once

#include <string>
#include <string_view>

#include "kiln/status.h"

namespace kiln {

// Returns the file's bytes, or kInvalidArgument naming the path and the OS error.
Result<std::string> read_file(const std::string& path);
// Replaces the file's contents (not atomically).
Status write_file(const std::string& path, std::string_view bytes);

}  // namespace kiln

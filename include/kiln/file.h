// Whole-file reads and writes without iostreams (whose first use costs milliseconds, which a
// cache hit in a fresh process cannot afford).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kiln/export.h"
#include "kiln/status.h"

namespace kiln {

// Returns the file's bytes, or kInvalidArgument naming the path and the OS error.
KILN_EXPORT Result<std::string> read_file(const std::string& path);
// A file's bytes in one block that large files get on huge pages (a 45 MB model read into
// 4 KiB pages costs 11,000 page faults); `data` keeps the block alive.
struct KILN_EXPORT FileBytes {
  std::shared_ptr<const char> data;
  size_t size = 0;
  std::string_view view() const { return std::string_view(data.get(), size); }
};
KILN_EXPORT Result<FileBytes> read_file_bytes(const std::string& path);
// Replaces the file's contents (not atomically).
KILN_EXPORT Status write_file(const std::string& path, std::string_view bytes);

// A file name stem for something named by a program (a module name): a readable prefix of the
// name's safe characters, then a digest of the whole name, so no name can leave the directory
// ("../../x"), hide ("."), or share a file with another name ("a/b" vs "a_b").
KILN_EXPORT std::string file_name_for_module(const std::string& module_name);

}  // namespace kiln

// mlir-runner's spelling of `kiln run`: -O0..-O3, --entry-point-result=void|i32|i64|f32,
// --shared-libs, long options after a single dash. Programs written for mlir-runner run under kiln
// with the same command line.
#pragma once

#include <string>
#include <vector>

#include "kiln/buffer.h"
#include "kiln/executable.h"
#include "kiln/status.h"

namespace kiln::cli {

// argv with mlir-runner's spellings made kiln's: effort flags (-O2, --O2) become --effort O2, long
// options after one dash (-entry-point-result=void, -shared-libs=...) get their second dash.
std::vector<std::string> with_runner_spelling(int argc, char** argv);

// What --entry-point-result asks for: "" (kiln's own summary), "void" (print only what the
// program prints) or a scalar type the entry returns, printed as mlir-runner prints it.
struct EntryPointResult {
  std::string kind;
  bool runner_mode() const { return !kind.empty(); }
  bool scalar() const { return runner_mode() && kind != "void"; }
};
Result<EntryPointResult> parse_entry_point_result(const std::string& text);

// Refuses an entry mlir-runner would not call for that result kind: a scalar result needs a
// function without arguments returning one value of that type.
Status check_entry_for_result(const EntryPoint& entry, const EntryPointResult& result);

// The value as mlir-runner prints a result (integers in decimal, f32 as "%e").
std::string runner_text(const Buffer& scalar);

// --shared-libs=a.so,b.so (or the option repeated): MLIR's runner utility libraries are kiln's own
// runtime (skipped); other libraries are loaded so the program's calls into them resolve.
Status load_shared_libraries(const std::vector<std::string>& paths);

}  // namespace kiln::cli

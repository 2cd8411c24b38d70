// What the kiln command's subcommands share: error printing, compile options from flags, where
// PGLE profiles are kept.
#pragma once

#include <string>
#include <vector>

#include "kiln/buffer.h"
#include "kiln/options.h"
#include "kiln/status.h"

namespace kiln::cli {

// Prints `status` as compilers print errors; returns the exit code (1).
int fail(const Status& status);

// This process's resident high-water mark (VmHWM), in MiB.
double peak_memory_mib();

// Whether `bytes` are a serialised executable (.kx) rather than a program.
bool looks_like_executable(const std::string& bytes);

// Compile options from the command line's -O and --disable-pass.
Result<CompileOptions> compile_options(const std::string& effort,
                                       const std::vector<std::string>& disabled);

// A tensor's type and first elements, for printing results.
std::string summarize(const Buffer& buffer);

// Where `kiln run --pgle` keeps profiles (next to the cache's entries), and one module's file.
std::string stored_profiles_directory();
std::string stored_profile_path(const std::string& module_name);

}  // namespace kiln::cli

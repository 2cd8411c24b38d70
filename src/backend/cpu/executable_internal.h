// What the three parts of an Executable share: its serialised format (executable_format.cc),
// loading its code (executable_loader.cc) and calling it (executable_invoke.cc). Internal to
// libkiln; no MLIR or LLVM (this is the code a cache hit runs).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kiln/executable.h"

namespace kiln::cpu {

// Every symbol the metadata promises must be defined by the code, checked without loading it.
Status check_code_matches_metadata(const ExecutableInfo& info,
                                   const std::vector<EntryPoint>& entries,
                                   const std::vector<HostCallbackSignature>& callbacks,
                                   std::string_view object);

}  // namespace kiln::cpu

namespace kiln {

// Called by PGLE builds at the start (phase 0, returns the candidate to run) and end (phase 1) of
// each kernel; the loader points an instrumented executable's profiling slot at it.
extern "C" int64_t kiln_profile_event(const void* site, int64_t kernel, int64_t phase);

}  // namespace kiln

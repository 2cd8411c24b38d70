// Turns LLVM's and MLIR's fatal errors and crashes during a compile into kiln errors.
#pragma once

#include <functional>
#include <string>

#include "kiln/status.h"

namespace kiln::cpu {

// Runs `work` on this thread (one call at a time per process) so that a fatal error LLVM or MLIR
// reports inside it (report_fatal_error, an abort, a segmentation fault) returns a compile error
// naming the source, the stage ("compiling") and LLVM's message instead of ending the process. What
// `work` allocated before the failure is leaked: LLVM's state past a fatal error cannot be unwound,
// only abandoned.
Status run_recovering_from_crashes(const std::string& source_name, const std::string& stage,
                                   const std::function<void()>& work);

// In a child process forked during `work`: failures there end the child (as the parent expects
// of it) instead of resuming the parent's code in the child.
void end_crash_recovery_in_child();

}  // namespace kiln::cpu

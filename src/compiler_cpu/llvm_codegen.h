// kiln's LLVM back half: LLVM IR module -> optimised module -> native object -> shared object,
// plus the entry and host-callback glue the loader expects. LLVM headers only (no MLIR).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/compiler_interface.h"
#include "kiln/status.h"
#include "llvm/ADT/SmallVector.h"

namespace llvm {
class DiagnosticInfo;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::cpu {

// A target machine for `triple` / `cpu` / `features` at LLVM optimisation level 0-3 (fast
// instruction selection at 0 and 1); an unknown target or CPU is an invalid argument.
Result<std::unique_ptr<llvm::TargetMachine>> create_target_machine(int opt_level,
                                                                   const std::string& triple,
                                                                   const std::string& cpu,
                                                                   const std::string& features);

// LLVM's default pipeline at `opt_level` (coroutine splitting and matrix lowering even at 0),
// with glibc's vector math library where the target has it.
void optimize(llvm::Module& module, llvm::TargetMachine& machine, int opt_level);

// The module as a relocatable object.
Status emit_object(llvm::Module& module, llvm::TargetMachine& machine, const std::string& triple,
                   llvm::SmallVector<char, 0>& object);

// The objects linked into one shared object: by the system linker, or by LLVM's lld for a
// `foreign` architecture.
Result<std::string> link_shared_object(const std::vector<llvm::SmallVector<char, 0>>& objects,
                                       bool foreign);

// The glue the loader calls: host callback thunks and one packed entry per entry point.
Status add_host_callback_thunks(llvm::Module& module,
                                const std::vector<HostCallbackSignature>& callbacks);
Status add_packed_entries(llvm::Module& module, const std::vector<EntryPoint>& entries);

// An LLVMContext diagnostic handler collecting distinct errors into a std::string (`errors`).
void collect_llvm_errors(const llvm::DiagnosticInfo* info, void* errors);

}  // namespace kiln::cpu

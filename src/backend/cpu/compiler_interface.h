// The boundary between the always-loaded runtime (libkiln) and the compiler half
// (libkiln_compiler, which links libMLIR and libLLVM). The runtime dlopens the compiler only when
// it has to compile, so this header must not include MLIR or LLVM.
#pragma once

#include <string>
#include <vector>

#include "backend/cpu/generated_code_contract.h"
#include "kiln/client.h"
#include "kiln/executable.h"
#include "kiln/host_callback.h"
#include "kiln/options.h"
#include "kiln/status.h"

namespace kiln::cpu {

// What the compiler hands back: everything Executable::load needs.
struct CompiledModule {
  ExecutableInfo info;
  std::vector<EntryPoint> entry_points;
  std::string shared_object;  // an ELF shared object exporting one packed entry per EntryPoint
  std::vector<HostCallbackSignature> callbacks;
};

// This machine in LLVM's terms: what a compile for the host generates code for.
struct HostDescription {
  std::string triple;
  std::string cpu;
  std::string features;  // sorted, comma-separated, "+name" / "-name"
};

class ModuleCompiler {
 public:
  virtual ~ModuleCompiler() = default;
  virtual HostDescription describe_host() = 0;
  // The module printed in a canonical form: comments, formatting and (unless `keep_locations`)
  // debug locations do not change it.
  virtual Result<CanonicalModule> canonicalize(const ModuleSource& source, bool keep_locations) = 0;
  virtual Result<CompiledModule> compile(const ModuleSource& source,
                                         const CompileOptions& options) = 0;
};

// libkiln_compiler exports this factory with C linkage.
using CreateModuleCompilerFn = ModuleCompiler* (*)();
inline constexpr const char* kCreateModuleCompilerSymbol = "kiln_cpu_create_module_compiler";

}  // namespace kiln::cpu

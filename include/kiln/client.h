// Client: the CPU backend. Owns the virtual devices, compiles modules and loads executables.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/executable.h"
#include "kiln/export.h"
#include "kiln/options.h"
#include "kiln/status.h"

namespace kiln {

struct KILN_EXPORT Device {
  int id = 0;             // global id
  int process_index = 0;  // which process of the job owns it
  std::string kind = "cpu";
};

// MLIR source to compile: text or bytecode, with a name for diagnostics ("model.mlir").
struct KILN_EXPORT ModuleSource {
  std::string bytes;
  std::string name = "<memory>";
  // For programs that are not MLIR (ONNX models): `bytes` then only identifies the program (its
  // raw-bytes alias), and this produces the MLIR when a key or a compile needs it, at most once.
  // A cache hit through the alias never calls it.
  struct Lazy;
  std::shared_ptr<Lazy> lazy = nullptr;

  static Result<ModuleSource> from_file(const std::string& path);
  // A source whose MLIR `produce` makes on demand (see `lazy`), identified by `identity`.
  static ModuleSource produced_by(std::string identity, std::string name,
                                  std::function<Result<std::string>()> produce);
  // The MLIR itself: this source, or (for a lazy one) the produced text under the same name.
  Result<ModuleSource> mlir() const;
};

struct KILN_EXPORT CanonicalModule {
  std::string module_name;  // the module's sym_name, or "module"
  std::string text;         // deterministic canonical bytes (MLIR bytecode)
  double parse_ms = 0;      // of the time canonicalize took, parsing (and verifying) the input
};

class KILN_EXPORT Client {
 public:
  // The CPU client. Device count: `device_count` if > 0, else $KILN_CPU_DEVICE_COUNT, else 1.
  static Result<std::unique_ptr<Client>> create_cpu(int device_count = 0, int process_index = 0);
  // A client for process `process_index` of a job of `num_processes`, each owning `device_count`
  // local devices (0 = $KILN_CPU_DEVICE_COUNT or 1). devices() lists every device of the job with
  // its global id (process_index * device_count + local index) and owning process.
  static Result<std::unique_ptr<Client>> create_cpu_for_job(int device_count, int process_index,
                                                            int num_processes);

  // A client for another machine (or this one, described explicitly): it compiles for `target`
  // (triple required; CPU "generic" when empty; features as given) with `device_count` devices and
  // loads nothing, so executables come back serialised (compile_serialized,
  // compile_or_get_cached_serialized). Its platform version is the one a real client on such a
  // machine reports, so its cache keys are that client's keys.
  static Result<std::unique_ptr<Client>> create_compile_only(const CompileTarget& target,
                                                             int device_count = 1);
  bool compile_only() const { return compile_only_; }
  // The machine this client compiles for in LLVM's terms. For a real client, this host: read from
  // the host description kept next to the cache, or (once per machine type) asked of LLVM.
  Result<CompileTarget> target() const;

  std::string platform() const { return "cpu"; }
  // Pins everything that changes generated code: kiln and LLVM versions, and the target in LLVM's
  // terms (triple, CPU name, CPU features). Executables compiled under another platform version
  // may differ. Computed on first use (see target()).
  const std::string& platform_version() const;
  const std::vector<Device>& devices() const { return devices_; }
  std::vector<Device> local_devices() const;
  int num_processes() const { return num_processes_; }
  int process_index() const { return process_index_; }

  // Compiles `source` with `options`. The first call loads the compiler library (libMLIR/libLLVM).
  Result<std::shared_ptr<Executable>> compile(const ModuleSource& source,
                                              const CompileOptions& options) const;
  // The device of each replica for `options` (validated: partitions, assignment, device ids).
  Result<std::vector<int>> replica_devices(const CompileOptions& options) const;
  // Compiles and serialises without loading: for CompileOptions::target machines other than this
  // one (the result loads there, not here).
  Result<std::string> compile_serialized(const ModuleSource& source,
                                         const CompileOptions& options) const;
  // Parses and prints `source` canonically (loads the compiler library).
  Result<CanonicalModule> canonicalize(const ModuleSource& source, bool keep_locations) const;
  std::string serialize(const Executable& executable) const { return executable.serialize(); }
  Result<std::shared_ptr<Executable>> deserialize(std::string_view bytes) const {
    return Executable::deserialize(bytes);
  }

 private:
  Client() = default;
  bool compile_only_ = false;
  CompileTarget target_;  // compile-only clients
  mutable std::once_flag platform_once_;
  mutable std::string platform_version_;
  std::vector<Device> devices_;
  int process_index_ = 0;
  int num_processes_ = 1;
};

// kiln's own version, "0.2.0" (part of every cache key).
KILN_EXPORT const char* kiln_version();
// The LLVM/MLIR release kiln was built against, "22.1.8".
KILN_EXPORT const char* llvm_version();

}  // namespace kiln

// Executable: a compiled module, loaded and ready to run on the host CPU.
//
// The serialised form holds a native shared object plus metadata; loading it needs neither libMLIR
// nor libLLVM, so a process that only runs cached programs starts in milliseconds.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/buffer.h"
#include "kiln/export.h"
#include "kiln/host_callback.h"
#include "kiln/pgle.h"
#include "kiln/status.h"

namespace kiln {

// One callable function of the module, as the caller sees it.
struct KILN_EXPORT EntryPoint {
  std::string name;
  std::vector<TensorType> inputs;
  std::vector<TensorType> outputs;
  // Results come from a tensor-level function: kiln's bufferisation makes each result a fresh
  // allocation the caller owns. Memref-level functions may return views of globals or inputs.
  bool results_owned = false;
};

// Where compile time went, in milliseconds.
struct KILN_EXPORT CompileTimings {
  double parse_ms = 0;
  double passes_ms = 0;
  double llvm_ms = 0;     // translation to LLVM IR and LLVM's optimisation pipeline
  double codegen_ms = 0;  // machine code emission and linking the shared object
  double total_ms() const { return parse_ms + passes_ms + llvm_ms + codegen_ms; }
};

struct KILN_EXPORT ExecutableInfo {
  std::string module_name;
  std::string platform_version;  // the client's platform version at compile time
  std::string effort_level;      // "O2", ...
  std::string target_triple;     // the target the code was generated for
  std::string target_cpu;        // LLVM's name of the CPU the code was generated for
  std::string target_features;   // LLVM feature string used for code generation
  CompileTimings timings;
  int num_replicas = 1;
  // Device id of each replica (one partition each on the CPU backend).
  std::vector<int> replica_devices = {0};
  // The instrumented kernels (PGLE builds only; empty otherwise), by the ids the code reports.
  std::vector<KernelInfo> kernels;
};

// One replica's results, and the device it ran on.
struct KILN_EXPORT ReplicaResult {
  int device = 0;
  std::vector<Buffer> outputs;
};

class KILN_EXPORT Executable {
 public:
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Loads a serialised executable. Fails with kCorruption when the bytes are damaged, with
  // kInvalidArgument when they are not a kiln executable.
  static Result<std::shared_ptr<Executable>> deserialize(std::string_view bytes);
  // Every check deserialize makes (header, checksum, metadata, the code's structure and the symbols
  // the metadata names) without loading the code, so no constructor in it runs.
  static Status check_serialized(std::string_view bytes);
  // The native code inside serialised bytes, as code_bytes() gives it once loaded (compile-only
  // clients compare builds for another machine this way).
  static Result<std::string> serialized_code(std::string_view bytes);
  // Same as deserialize(read_file(path)), with fewer copies: the file is mapped, not read.
  static Result<std::shared_ptr<Executable>> deserialize_file(const std::string& path);
  // Builds an executable from its parts (used by the compiler; callers use Client::compile).
  // Fails with kNotFound naming any host callback in `callbacks` that is not registered.
  static Result<std::shared_ptr<Executable>> load(
      ExecutableInfo info, std::vector<EntryPoint> entry_points, std::string_view shared_object,
      std::vector<HostCallbackSignature> callbacks = {});

  std::string serialize() const;
  // The serialised form of parts that need not load here (ahead-of-time builds for other CPUs).
  static std::string serialize_parts(const ExecutableInfo& info,
                                     const std::vector<EntryPoint>& entry_points,
                                     std::string_view shared_object,
                                     const std::vector<HostCallbackSignature>& callbacks);
  // The native code alone (deterministic for the same module and options; used to verify caches).
  std::string code_bytes() const;

  const ExecutableInfo& info() const { return info_; }
  const std::vector<EntryPoint>& entry_points() const { return entry_points_; }
  // The host callbacks the code calls (bound by name when loaded).
  const std::vector<HostCallbackSignature>& host_callbacks() const { return callbacks_; }
  // Size of the native code (the shared object) in bytes.
  size_t code_size() const { return code_size_; }
  // Milliseconds spent making the code runnable in this process (dlopen and symbol lookup).
  double load_ms() const { return load_ms_; }
  // REQUIRES: nothing. Returns kNotFound naming the available entries when `name` is unknown.
  Result<const EntryPoint*> find_entry(const std::string& name) const;

  // Runs `entry` with `inputs` (checked against its signature) and returns its results.
  // Tensor inputs are never written: an entry that computes into one of its arguments
  // (`outs(%arg)`) gets a copy, so every run sees the caller's values. Memref-level programs
  // (mlir-runner style) may write their memref arguments, as they would under mlir-runner.
  Result<std::vector<Buffer>> execute(const std::string& entry,
                                      const std::vector<Buffer>& inputs) const;
  // The same, timing each kernel of a PGLE build into `profiler` (and, in a first pass, running
  // the candidate it picks). The profiler belongs to this call, not to the executable, which the
  // cache shares between all its callers: without one, the default candidates run untimed.
  Result<std::vector<Buffer>> execute(const std::string& entry, const std::vector<Buffer>& inputs,
                                      PgleProfiler* profiler) const;
  // Runs every replica on its own inputs (`inputs_per_replica[r]`), concurrently, each on its
  // assigned device; results come back in replica order.
  Result<std::vector<ReplicaResult>> execute_replicated(
      const std::string& entry, const std::vector<std::vector<Buffer>>& inputs_per_replica) const;

 private:
  Executable() = default;

  ExecutableInfo info_;
  std::vector<EntryPoint> entry_points_;
  std::vector<HostCallbackSignature> callbacks_;  // never resized after load: the code points at it
  // The native code lives only in an anonymous memory file (the one dlopen mapped); serialize()
  // reads it back from there rather than keeping a second copy in the heap.
  int code_fd_ = -1;
  size_t code_size_ = 0;
  double load_ms_ = 0;
  void* library_handle_ = nullptr;
  std::vector<void*> entry_functions_;  // parallel to entry_points_
};

}  // namespace kiln

// The PGLE flow for one program: profile the first runs, recompile once with the profile, then run
// the optimised executable — with the cache rules of compile_or_get_cached.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/buffer.h"
#include "kiln/client.h"
#include "kiln/compile.h"
#include "kiln/executable.h"
#include "kiln/export.h"
#include "kiln/pgle.h"

namespace kiln {

class KILN_EXPORT ProfileGuidedProgram {
 public:
  // Gets the first executable through compile_or_get_cached: the PGLE-optimised one when the cache
  // has it (nothing is profiled then), else the instrumented first pass. With KILN_ENABLE_PGLE off
  // it is the plain build and nothing is profiled.
  static Result<std::unique_ptr<ProfileGuidedProgram>> create(const Client& client,
                                                              ModuleSource source,
                                                              CompileOptions options);
  // The same through `cache` (its options' enable_pgle decides instead of KILN_ENABLE_PGLE).
  static Result<std::unique_ptr<ProfileGuidedProgram>> create(
      const Client& client, ModuleSource source, CompileOptions options,
      std::shared_ptr<CompilationCache> cache);

  // Runs the current executable. The run that completes KILN_PGLE_PROFILING_RUNS profiled runs
  // triggers the one recompile with the aggregated profile; later runs use its result. A failed
  // recompile is logged and the first-pass executable stays.
  Result<std::vector<Buffer>> execute(const std::string& entry, const std::vector<Buffer>& inputs);

  const std::shared_ptr<Executable>& executable() const { return executable_; }
  bool profiling() const;
  int recompiles() const { return recompiles_; }
  // The aggregated profile the recompile used ("" before it).
  const std::string& fdo_profile() const { return fdo_profile_; }
  const CompileReport& first_report() const { return first_report_; }
  const CompileReport& last_report() const { return last_report_; }
  const std::shared_ptr<PgleProfiler>& profiler() const { return profiler_; }
  // Times every later run into `costs` (e.g. the optimised build's kernels); null stops it.
  void observe_runs(std::shared_ptr<PgleProfiler> costs) { observer_ = std::move(costs); }
  // Wall time of the recompile (key, cache lookup, compile, load) inside the execute that did it.
  double recompile_ms() const { return recompile_ms_; }

 private:
  ProfileGuidedProgram() = default;

  Result<std::shared_ptr<Executable>> compile(const CompileOptions& options, CompileReport* report);

  const Client* client_ = nullptr;
  std::shared_ptr<CompilationCache> cache_;  // null: the process default
  ModuleSource source_;
  CompileOptions options_;
  std::shared_ptr<PgleProfiler> profiler_;
  std::shared_ptr<PgleProfiler> observer_;
  std::shared_ptr<Executable> executable_;
  std::string fdo_profile_;
  int recompiles_ = 0;
  double recompile_ms_ = 0;
  CompileReport first_report_;
  CompileReport last_report_;
};

}  // namespace kiln

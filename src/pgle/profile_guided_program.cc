#include <chrono>

#include "kiln/config.h"
#include "kiln/logging.h"
#include "kiln/profile_guided.h"

namespace kiln {

Result<std::unique_ptr<ProfileGuidedProgram>> ProfileGuidedProgram::create(const Client& client,
                                                                           ModuleSource source,
                                                                           CompileOptions options) {
  return create(client, std::move(source), std::move(options), nullptr);
}

Result<std::unique_ptr<ProfileGuidedProgram>> ProfileGuidedProgram::create(
    const Client& client, ModuleSource source, CompileOptions options,
    std::shared_ptr<CompilationCache> cache) {
  std::unique_ptr<ProfileGuidedProgram> program(new ProfileGuidedProgram());
  program->client_ = &client;
  program->cache_ = std::move(cache);
  program->source_ = std::move(source);
  program->options_ = std::move(options);
  program->profiler_ = PgleProfiler::from_flags();
  bool enabled = program->cache_ ? program->cache_->options().enable_pgle
                                 : config::get_bool("KILN_ENABLE_PGLE");
  if (!enabled) program->profiler_->disable();
  KILN_ASSIGN_OR_RETURN(program->executable_,
                        program->compile(program->options_, &program->first_report_));
  program->last_report_ = program->first_report_;
  // Only an instrumented first pass has anything to measure.
  if (program->executable_->info().kernels.empty() ||
      program->first_report_.pgle != PgleStage::kFirstPass)
    program->profiler_->disable();
  return program;
}

Result<std::shared_ptr<Executable>> ProfileGuidedProgram::compile(const CompileOptions& options,
                                                                  CompileReport* report) {
  if (cache_)
    return cache_->compile_or_get_cached(*client_, source_, options, report, profiler_.get());
  return compile_or_get_cached(*client_, source_, options, report, profiler_.get());
}

bool ProfileGuidedProgram::profiling() const { return profiler_->enabled() && !profiler_->done(); }

Result<std::vector<Buffer>> ProfileGuidedProgram::execute(const std::string& entry,
                                                          const std::vector<Buffer>& inputs) {
  // The profiler goes with each call: the executable itself is the cache's, shared and immutable.
  PgleProfiler* timing =
      profiler_->enabled() && !profiler_->done() ? profiler_.get() : observer_.get();
  KILN_ASSIGN_OR_RETURN(std::vector<Buffer> outputs, executable_->execute(entry, inputs, timing));
  if (recompiles_ == 0 && profiler_->enabled() && profiler_->done()) {
    profiler_->disable();
    fdo_profile_ = profiler_->fdo_profile();
    CompileOptions with_profile = options_;
    with_profile.fdo_profile = fdo_profile_;
    ++recompiles_;
    auto start = std::chrono::steady_clock::now();
    auto optimised = compile(with_profile, &last_report_);
    recompile_ms_ =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (optimised.ok()) {
      executable_ = std::move(optimised).value();
    } else {
      log::warning(
          "the PGLE recompile of " + source_.name +
          " failed; going on with the first-pass executable: " + optimised.status().to_string());
    }
  }
  return outputs;
}

}  // namespace kiln

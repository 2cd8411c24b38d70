// Effort levels and the options that steer one compilation.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/export.h"
#include "kiln/status.h"

namespace kiln {

// How hard the compiler works for run-time speed. The numbers match the seed's enum.
enum class EffortLevel { kUnknown = 0, kO0 = 9, kO1 = 19, kO2 = 29, kO3 = 39 };

KILN_EXPORT const char* effort_level_name(EffortLevel level);
// Accepts "O0".."O3", "UNKNOWN" and the numbers 0, 9, 19, 29, 39.
KILN_EXPORT Result<EffortLevel> parse_effort_level(const std::string& text);
// UNKNOWN means "the backend's default", which is O2 on the CPU.
KILN_EXPORT EffortLevel resolve_effort_level(EffortLevel level);

// The machine to generate code for; empty fields mean "this host".
struct KILN_EXPORT CompileTarget {
  std::string triple;    // e.g. "aarch64-unknown-linux-gnu"
  std::string cpu;       // LLVM CPU name, e.g. "x86-64-v2", "neoverse-v1"
  std::string features;  // LLVM feature string, e.g. "+avx2,-avx512f"; empty = the CPU's own
  bool is_host() const { return triple.empty() && cpu.empty() && features.empty(); }
};

// Which build of a program profile-guided recompilation (PGLE) asks for. kiln's PGLE flow sets it;
// an application leaves kPlain.
enum class PgleBuild {
  kPlain,
  kInstrumented,  // the first pass: per-kernel timers, every tile candidate in rotation
  kOptimized,     // built with `fdo_profile`; keyed as "some PGLE profile", not by its bytes
};
KILN_EXPORT const char* pgle_build_name(PgleBuild build);

// The profile version that means "no profile; do not try to fetch one".
inline constexpr int64_t kNoProfileDontRetrieve = -1;

struct KILN_EXPORT CompileOptions {
  EffortLevel optimization_level = EffortLevel::kUnknown;
  EffortLevel memory_fitting_level = EffortLevel::kO2;
  // Names of pipeline passes to leave out (e.g. "linalg-fuse-elementwise-ops").
  std::vector<std::string> disabled_passes;
  int num_replicas = 1;
  int num_partitions = 1;
  // Device ids, replicas × partitions; empty = the backend's default assignment.
  std::vector<std::vector<int>> device_assignment;
  // Backend option overrides, in order (compile_or_get_cached refuses names kiln does not know).
  std::vector<std::pair<std::string, std::string>> env_option_overrides;
  // Feedback-directed optimisation profile bytes (PGLE); empty = none.
  std::string fdo_profile;
  PgleBuild pgle_build = PgleBuild::kPlain;
  // 0 = none; kNoProfileDontRetrieve = -1; positive = a profile version to fetch.
  int64_t profile_version = 0;
  // Per-stage compile logs for big modules. Does not change the code, so not part of the key.
  bool detailed_logging = false;
  // Ahead-of-time builds for another machine (part of the key).
  CompileTarget target;
};

// A function the embedding application can register to supply a profile version.
using ProfileVersionHook = std::function<int64_t()>;
KILN_EXPORT void set_profile_version_hook(ProfileVersionHook hook);

// The seed's get_compile_options: validates the device assignment (2-D replicas × partitions, or
// 1-D when num_partitions == 1; a mismatch names both numbers), takes "optimization_level" and
// "memory_fitting_level" out of `env_option_overrides` onto the options (keeping the rest in
// order) and "disabled_passes" onto `disabled_passes`; any other name is refused ("No such compile
// option"). Applies KILN_DISABLE_MOST_OPTIMIZATIONS and KILN_COMPILER_ENABLE_REMAT_PASS=false
// (which adds "linalg-fuse-elementwise-ops" to `disabled_passes` without dropping the caller's
// names), picks the profile version as the seed does (a positive KILN_PROFILE_VERSION; else the
// hook's version unless it is 0; else kNoProfileDontRetrieve) and sets detailed logging when
// `module_op_count` reaches KILN_COMPILER_DETAILED_LOGGING_MIN_OPS.
KILN_EXPORT Result<CompileOptions> get_compile_options(
    int num_replicas, int num_partitions, const std::vector<std::vector<int>>& device_assignment,
    const std::vector<std::pair<std::string, std::string>>& env_option_overrides = {},
    std::string fdo_profile = "", int64_t module_op_count = 0);
// Flat form: accepted when num_partitions == 1 (one device per replica).
KILN_EXPORT Result<CompileOptions> get_compile_options(int num_replicas, int num_partitions,
                                                       const std::vector<int>& device_assignment);

}  // namespace kiln

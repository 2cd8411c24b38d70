// Effort levels and the options that steer one compilation.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/status.h"

namespace kiln {

// How hard the compiler works for run-time speed. The numbers match the seed's enum.
enum class EffortLevel { kUnknown = 0, kO0 = 9, kO1 = 19, kO2 = 29, kO3 = 39 };

const char* effort_level_name(EffortLevel level);
// Accepts "O0".."O3", "UNKNOWN" and the numbers 0, 9, 19, 29, 39.
Result<EffortLevel> parse_effort_level(const std::string& text);
// UNKNOWN means "the backend's default", which is O2 on the CPU.
EffortLevel resolve_effort_level(EffortLevel level);

struct CompileOptions {
  EffortLevel optimization_level = EffortLevel::kUnknown;
  EffortLevel memory_fitting_level = EffortLevel::kO2;
  // Names of pipeline passes to leave out (e.g. "linalg-fuse-elementwise-ops").
  std::vector<std::string> disabled_passes;
  int num_replicas = 1;
  int num_partitions = 1;
};

}  // namespace kiln

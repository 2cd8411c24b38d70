// The MLIR pass pipeline per effort level, as a list of named passes: printable, and filterable by
// the disabled-pass list. No MLIR headers here.
#pragma once

#include <string>
#include <vector>

#include "kiln/options.h"

namespace kiln::cpu {

struct PipelineStep {
  std::string pass;           // the pass's registered name, e.g. "canonicalize"
  std::string options;        // "{...}" or empty
  bool on_functions = false;  // nested under func.func
};

// The step name for kiln's own contraction tiling + vectorisation (a transform-dialect script).
inline constexpr const char* kTileAndVectorizeStep = "kiln-tile-and-vectorize";

struct Pipeline {
  std::vector<PipelineStep> before_vectorize;  // TOSA → linalg, clean-up, bufferisation
  bool tile_and_vectorize = false;
  std::vector<PipelineStep> after_vectorize;  // deallocation, lowering to the LLVM dialect
  int llvm_opt_level = 2;
};

// REQUIRES: level resolved (not kUnknown). Passes named in `disabled` are left out.
// `program_frees_buffers`: the module deallocates memory itself, so kiln adds no deallocation.
Pipeline build_pipeline(EffortLevel level, const std::vector<std::string>& disabled,
                        bool program_frees_buffers = false);

// "builtin.module(a, func.func(b), ...)".
std::string pipeline_text(const std::vector<PipelineStep>& steps);

}  // namespace kiln::cpu

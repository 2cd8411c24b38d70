// The MLIR pass pipeline per effort level, as a list of named passes: printable, and filterable by
// the disabled-pass list. No MLIR headers here.
#pragma once

#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/options.h"

namespace kiln::cpu {

struct PipelineStep {
  std::string pass;           // the pass's registered name, e.g. "canonicalize"
  std::string options;        // "{...}" or empty
  bool on_functions = false;  // nested under func.func
};

// Step names of kiln's own transform-dialect scripts (usable in the disabled-pass list).
inline constexpr const char* kVectorizeConvolutionsStep = "kiln-vectorize-convolutions";
inline constexpr const char* kTileAndVectorizeStep = "kiln-tile-and-vectorize";
inline constexpr const char* kVectorizeElementwiseStep = "kiln-vectorize-elementwise";
inline constexpr const char* kFuseEpiloguesStep = "kiln-fuse-epilogues";
// kiln's own step that lowers cf.assert to a report that does not stop the program.
inline constexpr const char* kReportFailedChecksStep = "kiln-report-failed-checks";
// kiln's own step that frees each buffer after its last use (compiler_cpu/early_free.h).
inline constexpr const char* kFreeAfterLastUseStep = "kiln-free-after-last-use";
// kiln's own step that runs parallel loops on the thread pool (compiler_cpu/parallel_loops.h).
inline constexpr const char* kParallelizeStep = "kiln-parallelize";

struct Pipeline {
  std::vector<PipelineStep> tensor_passes;  // TOSA → linalg, elementwise fusion
  bool fuse_epilogues = false;              // on tensors: bias/activation into product tiles
  bool vectorize_convolutions = false;      // on tensors: decompose to 1-D, vectorise
  std::vector<PipelineStep> bufferize_passes;
  bool tile_and_vectorize = false;            // on buffers: matmul / batch_matmul register tiles
  bool vectorize_elementwise = false;         // on buffers: elementwise kernels along their rows
  std::vector<PipelineStep> lowering_passes;  // deallocation, loops, LLVM dialect
  int llvm_opt_level = 2;
};

// REQUIRES: level resolved (not kUnknown). Passes named in `disabled` are left out.
// `program_frees_buffers`: the module deallocates memory itself, so kiln adds no deallocation.
// Exported for libkiln_compiler, which builds the same pipeline.
KILN_EXPORT Pipeline build_pipeline(EffortLevel level, const std::vector<std::string>& disabled,
                                    bool program_frees_buffers = false);

// "builtin.module(a, func.func(b), ...)".
KILN_EXPORT std::string pipeline_text(const std::vector<PipelineStep>& steps);

}  // namespace kiln::cpu

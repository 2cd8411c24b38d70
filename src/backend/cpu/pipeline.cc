#include "backend/cpu/pipeline.h"

#include <algorithm>

namespace kiln::cpu {

Pipeline build_pipeline(EffortLevel level, const std::vector<std::string>& disabled,
                        bool program_frees_buffers) {
  bool vectorize = level >= EffortLevel::kO2;
  Pipeline p;
  p.before_vectorize = {
      {"tosa-to-linalg-named", "", true},
      {"tosa-to-linalg", "", true},
      {"tosa-to-arith", "", true},
      {"tosa-to-tensor", "", true},
      {"convert-elementwise-to-linalg", "", true},
      {"canonicalize", "", false},
      {"linalg-fuse-elementwise-ops", "", false},
      {"canonicalize", "", false},
      {"one-shot-bufferize",
       "{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}",
       false},
      {"canonicalize", "", false},
  };
  p.tile_and_vectorize = vectorize;
  p.after_vectorize = {
      {"buffer-deallocation-pipeline", "", false},
      {"convert-bufferization-to-memref", "", false},
      {"convert-linalg-to-loops", "", true},
      {"lower-vector-mask", "", true},
      {"convert-vector-to-scf", "{full-unroll}", true},
      {"expand-strided-metadata", "", false},
      {"lower-affine", "", false},
      {"convert-scf-to-cf", "", false},
      {"convert-vector-to-llvm", "", false},
      {"convert-math-to-llvm", "", false},
      {"convert-math-to-libm", "", false},
      {"convert-arith-to-llvm", "", false},
      {"convert-index-to-llvm", "", false},
      {"finalize-memref-to-llvm", "", false},
      {"convert-func-to-llvm", "", false},
      {"convert-cf-to-llvm", "", false},
      {"convert-ub-to-llvm", "", false},
      {"reconcile-unrealized-casts", "", false},
  };
  auto is_disabled = [&](const PipelineStep& s) {
    // Ownership-based deallocation rejects programs that call memref.dealloc themselves; such
    // (mlir-runner style) programs keep control of their memory.
    if (program_frees_buffers && s.pass == "buffer-deallocation-pipeline") return true;
    return std::find(disabled.begin(), disabled.end(), s.pass) != disabled.end();
  };
  std::erase_if(p.before_vectorize, is_disabled);
  std::erase_if(p.after_vectorize, is_disabled);
  if (std::find(disabled.begin(), disabled.end(), kTileAndVectorizeStep) != disabled.end())
    p.tile_and_vectorize = false;
  switch (level) {
    case EffortLevel::kO0:
      p.llvm_opt_level = 0;
      break;
    case EffortLevel::kO1:
      p.llvm_opt_level = 1;
      break;
    case EffortLevel::kO3:
      p.llvm_opt_level = 3;
      break;
    default:
      p.llvm_opt_level = 2;
      break;
  }
  return p;
}

std::string pipeline_text(const std::vector<PipelineStep>& steps) {
  std::string out = "builtin.module(";
  for (size_t i = 0; i < steps.size(); ++i) {
    if (i) out += ", ";
    std::string pass = steps[i].pass + steps[i].options;
    out += steps[i].on_functions ? "func.func(" + pass + ")" : pass;
  }
  return out + ")";
}

}  // namespace kiln::cpu

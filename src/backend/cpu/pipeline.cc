#include "backend/cpu/pipeline.h"

#include <algorithm>

#include "kiln/compile.h"

namespace kiln::cpu {

namespace {

// Takes out the steps the user disabled by name, and those a program or level cannot use.
void leave_out_disabled(Pipeline& p, EffortLevel level, const std::vector<std::string>& disabled,
                        bool program_frees_buffers) {
  auto is_disabled = [&](const PipelineStep& s) {
    // Ownership-based deallocation rejects programs that call memref.dealloc themselves; such
    // (mlir-runner style) programs keep control of their memory.
    if (program_frees_buffers &&
        (s.pass == "buffer-deallocation-pipeline" || s.pass == kFreeAfterLastUseStep))
      return true;
    return std::find(disabled.begin(), disabled.end(), s.pass) != disabled.end();
  };
  // At O0 every loop stays on the calling thread: no coroutines to split, the fastest compile.
  if (level == EffortLevel::kO0)
    std::erase_if(p.lowering_passes, [](const PipelineStep& s) {
      return s.pass == kParallelizeStep || s.pass.rfind("async-", 0) == 0 ||
             s.pass == "convert-async-to-llvm";
    });
  std::erase_if(p.tensor_passes, is_disabled);
  std::erase_if(p.bufferize_passes, is_disabled);
  std::erase_if(p.lowering_passes, is_disabled);
  auto named = [&](const char* step) {
    return std::find(disabled.begin(), disabled.end(), step) != disabled.end();
  };
  if (named(kFuseEpiloguesStep)) p.fuse_epilogues = false;
  if (named(kVectorizeConvolutionsStep)) p.vectorize_convolutions = false;
  if (named(kTileAndVectorizeStep)) p.tile_and_vectorize = false;
  if (named(kVectorizeElementwiseStep)) p.vectorize_elementwise = false;
}

int llvm_opt_level(EffortLevel level) {
  switch (level) {
    case EffortLevel::kO0:
      return 0;
    case EffortLevel::kO1:
      return 1;
    case EffortLevel::kO3:
      return 3;
    default:
      return 2;
  }
}

}  // namespace

Pipeline build_pipeline(EffortLevel level, const std::vector<std::string>& disabled,
                        bool program_frees_buffers) {
  bool vectorize = level >= EffortLevel::kO2;
  Pipeline p;
  p.tensor_passes = {
      {"tosa-to-linalg-named", "", true},
      {"tosa-to-linalg", "", true},
      {"tosa-to-arith", "", true},
      {"tosa-to-tensor", "", true},
      {"convert-elementwise-to-linalg", "", true},
      {"canonicalize", "", false},
      {"linalg-fuse-elementwise-ops", "", false},
  };
  p.fuse_epilogues = vectorize;
  p.vectorize_convolutions = vectorize;
  p.bufferize_passes = {
      {"canonicalize", "", false},
      // A producer whose result is inserted into a bigger tensor (padding) writes into that
      // tensor's buffer directly instead of a buffer of its own that is then copied.
      {"eliminate-empty-tensors", "", false},
      {"one-shot-bufferize",
       "{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}",
       false},
      // A tile of a fused epilogue is written back onto itself (the same subview taken twice):
      // once the two views are one, canonicalisation drops the copy.
      {"cse", "", false},
      {"canonicalize", "", false},
  };
  p.tile_and_vectorize = vectorize;
  p.vectorize_elementwise = vectorize;
  p.lowering_passes = {
      {"buffer-deallocation-pipeline", "", false},
      // The pipeline frees buffers when the function returns: kiln frees them after their last
      // use, so the next kernels reuse memory still in cache.
      {kFreeAfterLastUseStep, "", false},
      // memref.realloc as alloc, copy and dealloc of the old buffer (the deallocation pipeline
      // expands it too, but it is left out for programs that free their own buffers).
      {"expand-realloc", "", false},
      {"convert-bufferization-to-memref", "", false},
      // Tiles of an scf.forall (kiln's fused epilogues, or the program's own) are independent:
      // a parallel loop, which kiln's thread pool may share out.
      {"scf-forall-to-parallel", "", false},
      {"convert-linalg-to-parallel-loops", "", true},
      // Parallel loops become tasks for kiln's thread pool (coroutines on MLIR's async runtime
      // interface, which libkiln implements).
      {kParallelizeStep, "", false},
      {"async-to-async-runtime", "", false},
      {"async-runtime-ref-counting", "", false},
      {"async-runtime-ref-counting-opt", "", false},
      {"convert-async-to-llvm", "", false},
      {"lower-vector-mask", "", true},
      {"convert-vector-to-scf", "{full-unroll}", true},
      {"expand-strided-metadata", "", false},
      {"lower-affine", "", false},
      {"convert-scf-to-cf", "", false},
      // x86vector ops (AVX, AVX-512 intrinsics spelled in MLIR) lower to their LLVM intrinsics;
      // on a CPU without the feature, LLVM's instruction selection refuses them (a compile error).
      {"convert-vector-to-llvm", "{enable-x86vector=true}", false},
      // Complex arithmetic becomes arithmetic on the parts; the parts then become LLVM structs.
      {"convert-complex-to-standard", "", true},
      // Integer and float-to-integer powers (math.ipowi, math.fpowi) have no LLVM lowering: they
      // become calls to generated functions.
      {"convert-math-to-funcs", "", false},
      {"convert-math-to-llvm", "", false},
      {"convert-math-to-libm", "", false},
      {"convert-arith-to-llvm", "", false},
      {"convert-index-to-llvm", "", false},
      {"convert-complex-to-llvm", "", false},
      // Allocations go through kiln's checking allocator (backend/cpu/checked_alloc.h).
      {"finalize-memref-to-llvm", "{use-generic-functions=true}", false},
      {"convert-func-to-llvm", "", false},
      {"convert-cf-to-llvm", "", false},
      {"convert-ub-to-llvm", "", false},
      {"reconcile-unrealized-casts", "", false},
  };
  leave_out_disabled(p, level, disabled, program_frees_buffers);
  p.llvm_opt_level = llvm_opt_level(level);
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

namespace kiln {

Result<std::string> describe_pipeline(EffortLevel level,
                                      const std::vector<std::string>& disabled_passes) {
  cpu::Pipeline p = cpu::build_pipeline(resolve_effort_level(level), disabled_passes);
  std::string text = cpu::pipeline_text(p.tensor_passes) + "\n";
  if (p.fuse_epilogues) text += std::string(cpu::kFuseEpiloguesStep) + "\n";
  if (p.vectorize_convolutions) text += std::string(cpu::kVectorizeConvolutionsStep) + "\n";
  text += cpu::pipeline_text(p.bufferize_passes) + "\n";
  if (p.tile_and_vectorize) text += std::string(cpu::kTileAndVectorizeStep) + "\n";
  text += cpu::pipeline_text(p.lowering_passes) + "\n";
  return text + "llvm -O" + std::to_string(p.llvm_opt_level) + "\n";
}

}  // namespace kiln

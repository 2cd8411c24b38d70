// ONNX models exported by PyTorch (tests/onnx/export_models.py, run by the OnnxExportModels
// fixture) through `kiln run`: outputs against PyTorch eager, the cache rules for weights, shapes
// and repeat runs, and bad input.
#include "kiln/onnx.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "kiln/file.h"
#include "kiln/npy.h"
#include "test_support.h"

using ::testing::HasSubstr;

namespace kiln {
namespace {

using namespace kiln::testing;

std::string model(const std::string& name) {
  return std::string(KILN_ONNX_MODELS_DIR) + "/" + name;
}

ProcessResult kiln_run(const std::string& cache, std::vector<std::string> args,
                       const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {kiln_binary(), "--cache-dir", cache, "run"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, env);
}

// max |got - want| <= 1e-4 * max |want|, the bar for agreement with PyTorch, and NaN
// exactly where PyTorch has NaN.
void expect_matches_reference(const std::string& got_path, const std::string& want_path) {
  auto got = read_npy(got_path);
  auto want = read_npy(want_path);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(want.ok()) << want.status().message();
  ASSERT_EQ(got->shape(), want->shape());
  double max_ref = 0, max_diff = 0;
  int64_t nan_mismatches = 0, first_mismatch = -1;
  for (int64_t i = 0; i < want->element_count(); ++i) {
    double g = got->element_as_double(i), w = want->element_as_double(i);
    if (std::isnan(g) != std::isnan(w)) {
      if (nan_mismatches++ == 0) first_mismatch = i;
      continue;
    }
    if (std::isnan(w)) continue;
    max_ref = std::max(max_ref, std::fabs(w));
    max_diff = std::max(max_diff, std::fabs(g - w));
  }
  EXPECT_EQ(nan_mismatches, 0) << got_path
                               << ": NaN where PyTorch has none or the reverse, first at "
                               << first_mismatch;
  EXPECT_LE(max_diff, 1e-4 * max_ref) << got_path << " differs from PyTorch";
}

void expect_model_matches_pytorch(const std::string& name) {
  TempDir dir;
  for (int opset : {13, 17}) {
    std::string file = model(name + "_opset" + std::to_string(opset) + ".onnx");
    std::string out = dir.file(name + std::to_string(opset) + ".npy");
    ProcessResult r =
        kiln_run(dir.file("cache"), {file, "--input", model(name + ".input.npy"), "--output", out});
    ASSERT_EQ(r.exit_code, 0) << file << ": " << r.err;
    // Opset 17 imports to the same MLIR as 13 for most models: then it shares the entry.
    if (opset == 13) {
      EXPECT_THAT(r.out, HasSubstr("cache: miss"));
    }
    expect_matches_reference(out, model(name + ".expected.npy"));
  }
}

TEST(OnnxModelsTest, MlpMatchesPyTorch) { expect_model_matches_pytorch("mlp"); }
TEST(OnnxModelsTest, SmallCnnMatchesPyTorch) { expect_model_matches_pytorch("small_cnn"); }
// `name` at O0 and O2 with 1-4 threads: PyTorch's values, and the same bits at every thread
// count of a level.
void expect_matches_pytorch_at_every_level_and_thread_count(const std::string& name) {
  TempDir dir;
  std::string file = model(name + "_opset13.onnx");
  for (const char* level : {"O0", "O2"}) {
    std::string first;
    for (const char* threads : {"1", "2", "3", "4"}) {
      std::string out = dir.file(name + level + threads + ".npy");
      ProcessResult r = kiln_run(
          dir.file("cache"), {file, "--input", model(name + ".input.npy"), "--output", out, "-O",
                              level, "--set", std::string("KILN_NUM_THREADS=") + threads});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      expect_matches_reference(out, model(name + ".expected.npy"));
      auto bytes = read_file(out);
      ASSERT_TRUE(bytes.ok());
      if (first.empty()) first = *bytes;
      EXPECT_EQ(*bytes, first) << level << " with " << threads << " threads";
    }
  }
}

// Depthwise convolutions: stride 1 as vectorised taps, stride 2 as loops.
TEST(OnnxModelsTest, DepthwiseConvolutionsMatchPyTorchAtEveryLevelAndThreadCount) {
  expect_matches_pytorch_at_every_level_and_thread_count("depthwise");
}

// SiLU on rows shorter than a vector, a squeeze-and-excitation gate and global average pools
// (reassociated sums).
TEST(OnnxModelsTest, SqueezeExcitationMatchesPyTorchAtEveryLevelAndThreadCount) {
  expect_matches_pytorch_at_every_level_and_thread_count("squeeze_excite");
}

// Dense stride-1 convolutions as one product per kernel tap over the padded width: odd channel
// counts, a 3x5 kernel with uneven pads, dilation, no padding.
TEST(OnnxModelsTest, ShiftedTapConvolutionsMatchPyTorchAtEveryLevelAndThreadCount) {
  expect_matches_pytorch_at_every_level_and_thread_count("shifted_convs");
}

// Bias, activations and residual adds after pointwise convolutions computed in the product's
// layout, inside its tiles; chains that end in padding or a concatenation keep their own layout.
TEST(OnnxModelsTest, PointwiseConvolutionChainsMatchPyTorchAtEveryLevelAndThreadCount) {
  expect_matches_pytorch_at_every_level_and_thread_count("pointwise_chains");
}

// Deep layers (more filters than pixels): transposed products, channels-last depthwise
// convolutions (stride 1 and 2) and the bias, activations, SiLU, residual add and padding between
// them, computed channels-last; a dense convolution, a concatenation and the output take NCHW.
TEST(OnnxModelsTest, ChannelsLastBlocksMatchPyTorchAtEveryLevelAndThreadCount) {
  expect_matches_pytorch_at_every_level_and_thread_count("channels_last_blocks");
}

// The program kiln compiles for test model `name` at one stage of its pipeline (the dump file
// whose name ends in `stage`), from a run of the model with KILN_DUMP_IR_TO; "" (and a failure)
// when the run fails or dumps no such stage.
std::string dumped_stage(const std::string& name, const std::string& stage) {
  TempDir dir;
  ProcessResult r = kiln_run(dir.file("cache"),
                             {model(name + "_opset13.onnx"), "--input", model(name + ".input.npy"),
                              "--no-cache", "--set", "KILN_DUMP_IR_TO=" + dir.file("dump")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return "";
  return dumped_stage_in(dir.file("dump"), stage);
}

// Between channels-last layers the feature maps stay channels-last: the program transposes only
// where a layer needs NCHW (the input into the first product, and the dense convolution's,
// the concatenation's two inputs), not back and forth around every layer; global pools read the
// channels-last value.
TEST(OnnxModelsTest, ChannelsLastLayersPassFeatureMapsOnWithoutTransposes) {
  std::string bufferized = dumped_stage("channels_last_blocks", "1-bufferized.mlir");
  // The main function only: the weights' one-time re-layout (kiln_prepare) is transposes too.
  size_t main_at = bufferized.find("func.func @main(");
  ASSERT_NE(main_at, std::string::npos) << bufferized.substr(0, 2000);
  size_t main_end = bufferized.find("\n  func.func ", main_at);
  std::string main_body = bufferized.substr(main_at, main_end - main_at);
  size_t transposes = 0;
  for (size_t at = main_body.find("linalg.transpose"); at != std::string::npos;
       at = main_body.find("linalg.transpose", at + 1))
    ++transposes;
  EXPECT_LE(transposes, 4u) << main_body;
}

// Strided depthwise convolutions of NCHW feature maps as taps over phase planes: stride 2 and 3,
// 3x3, 5x5, 4x4 and 3x5 kernels, with and without padding, odd and even sizes.
TEST(OnnxModelsTest, StridedDepthwiseConvolutionsMatchPyTorchAtEveryLevelAndThreadCount) {
  expect_matches_pytorch_at_every_level_and_thread_count("strided_depthwise");
}

// Each of them vectorises: no kernel of the program is left as a loop over the window (a
// reduction), which would read every other pixel one at a time. A producer's plain arithmetic
// moves into the copies that build the phase planes.
TEST(OnnxModelsTest, StridedDepthwiseConvolutionsVectorise) {
  std::string vectorized = dumped_stage("strided_depthwise", "2-vectorized.mlir");
  ASSERT_NE(vectorized.find("func.func @main("), std::string::npos) << vectorized.substr(0, 2000);
  EXPECT_EQ(vectorized.find("\"reduction\""), std::string::npos) << vectorized;
  // The pointwise convolution's bias and ReLU6 are computed by the copies into the phase planes:
  // its activated output (12 channels, 37x41) is never written out, padded or not.
  EXPECT_EQ(vectorized.find("memref.alloc() {alignment = 64 : i64} : memref<1x12x37x41xf32>"),
            std::string::npos)
      << vectorized;
}

// Pointwise expansions computed on the phase planes of their input, their activation and the
// planes' zero padding in the product's epilogue: ReLU6, SiLU and ReLU, strides 2 and 3.
TEST(OnnxModelsTest, ExpansionsOnPhasePlanesMatchPyTorchAtEveryLevelAndThreadCount) {
  expect_matches_pytorch_at_every_level_and_thread_count("expanded_depthwise");
}

// Each expansion is one product whose columns are the phase planes (4 planes of 48x47 pixels,
// 4 of 49x48, 9 of 31x30), not one over the input's 93x91 pixels whose output is then split. The
// columns are rounded up to whole 128-column tiles (9024 -> 9088, 9408 -> 9472, 8370 -> 8448),
// and the planes are views of the product's operand and result, written and read in place.
TEST(OnnxModelsTest, ExpansionsOnPhasePlanesAreProductsOverThePlanes) {
  std::string input = dumped_stage("expanded_depthwise", "0-input.mlir");
  ASSERT_NE(input.find("func.func @main("), std::string::npos) << input.substr(0, 2000);
  for (const char* product :
       {"tensor<12x5xf32>, tensor<5x9088xf32>", "tensor<8x5xf32>, tensor<5x9472xf32>",
        "tensor<6x5xf32>, tensor<5x8448xf32>"})
    EXPECT_NE(input.find(product), std::string::npos) << product;
  std::string bufferized = dumped_stage("expanded_depthwise", "1-bufferized.mlir");
  EXPECT_EQ(bufferized.find("x8463xf32>"), std::string::npos) << bufferized;
  for (const char* planes : {"memref<5x4x48x47xf32, strided<[9088, 2256, 47, 1]>>",
                             "memref<12x4x48x47xf32, strided<[9088, 2256, 47, 1]>>"})
    EXPECT_NE(bufferized.find(planes), std::string::npos) << planes;
  EXPECT_EQ(bufferized.find("memref<5x4x48x47xf32>"), std::string::npos) << "planes copied";
  // Reshapes of those strided views still let the products be tiled and vectorised.
  std::string vectorized = dumped_stage("expanded_depthwise", "2-vectorized.mlir");
  EXPECT_NE(vectorized.find("vector.fma"), std::string::npos);
  EXPECT_EQ(vectorized.find("linalg.matmul"), std::string::npos) << "products left as loops";
}

// 3x3 convolutions by Winograd's F(2x2, 3x3): 16 products of transformed weights and inputs,
// chained, with and without bias, on odd sides, channels-last where the blocks are fewer than the
// filters, beside the direct path. Bound weights are transformed at load; `kiln compile` folds
// the weights in, transformed at import.
TEST(OnnxModelsTest, WinogradConvolutionsMatchPyTorchAtEveryLevelAndThreadCount) {
  expect_matches_pytorch_at_every_level_and_thread_count("winograd_convs");
  TempDir dir;
  ProcessResult compiled =
      run_process({kiln_binary(), "--cache-dir", dir.file("cache"), "compile",
                   model("winograd_convs_opset13.onnx"), "-o", dir.file("w.kx")});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  ProcessResult r =
      kiln_run(dir.file("cache"), {dir.file("w.kx"), "--input", model("winograd_convs.input.npy"),
                                   "--output", dir.file("o.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_matches_reference(dir.file("o.npy"), model("winograd_convs.expected.npy"));
}

// The five eligible convolutions are one batch of 16 products each; the narrow one is not. With
// more blocks than filters a product is (filters, C) by (C, blocks); with fewer, (blocks, C) by
// (C, filters), so its register tiles run along the longer side.
TEST(OnnxModelsTest, WinogradConvolutionsAreSixteenProducts) {
  std::string input = dumped_stage("winograd_convs", "0-input.mlir");
  ASSERT_NE(input.find("func.func @main("), std::string::npos) << input.substr(0, 2000);
  size_t products = 0;
  for (size_t at = input.find("linalg.batch_matmul"); at != std::string::npos;
       at = input.find("linalg.batch_matmul", at + 1))
    ++products;
  EXPECT_EQ(products, 5u) << input;
  EXPECT_NE(input.find("tensor<16x72x64xf32>"), std::string::npos) << input;  // U of the first
  EXPECT_NE(input.find("tensor<16x72x90xf32>"), std::string::npos) << input;  // its 10x9 blocks
  EXPECT_NE(input.find("tensor<16x56x64xf32>"), std::string::npos) << input;  // 8x7 blocks by C
  EXPECT_NE(input.find("tensor<16x64x80xf32>"), std::string::npos) << input;  // by U transposed
  EXPECT_NE(input.find("tensor<16x56x80xf32>"), std::string::npos) << input;  // the products
}

// Max pools with output rows shorter than a vector's worth computed channels-last: ceil-mode
// windows over the end, padding, dilation.
TEST(OnnxModelsTest, ShortRowMaxPoolsMatchPyTorchAtEveryLevelAndThreadCount) {
  expect_matches_pytorch_at_every_level_and_thread_count("short_row_pools");
}

// Max pools over their taps as one kernel (strided reads vectorised): a ReLU pooled before it is
// applied, strides 1-3, padding, ceil mode, and NaNs kept.
TEST(OnnxModelsTest, TapMaxPoolsMatchPyTorchNaNsIncludedAtEveryLevelAndThreadCount) {
  auto want = read_npy(model("tap_pools.expected.npy"));
  ASSERT_TRUE(want.ok()) << want.status().message();
  int64_t nans = 0;
  for (int64_t i = 0; i < want->element_count(); ++i)
    nans += std::isnan(want->element_as_double(i));
  EXPECT_GT(nans, 0) << "the model's logarithms should give NaNs for the pools to keep";
  EXPECT_LT(nans, want->element_count() / 2);
  expect_matches_pytorch_at_every_level_and_thread_count("tap_pools");
}

// The bias and ReLU after a convolution are applied after the pool, to its output: no kernel
// computes a maximum over the convolution's full 6x40x43 result, the pool's kernel (6x20x21 out)
// adds the bias and computes one maximum per output (not one per tap, as a ReLU merged into the
// pool's taps would).
TEST(OnnxModelsTest, AMaxPoolOfAReluPoolsFirst) {
  std::string bufferized = dumped_stage("tap_pools", "1-bufferized.mlir");
  ASSERT_NE(bufferized.find("func.func @main("), std::string::npos) << bufferized.substr(0, 2000);
  bool pooled_relu = false;
  for (size_t at = bufferized.find("linalg.generic"); at != std::string::npos;) {
    size_t next = bufferized.find("linalg.generic", at + 1);
    std::string kernel = bufferized.substr(at, next == std::string::npos ? next : next - at);
    std::string outs = kernel.substr(kernel.find("outs("), 40);
    bool maximum = kernel.find("arith.maximumf") != std::string::npos;
    EXPECT_FALSE(maximum && outs.find("memref<1x6x40x43") != std::string::npos) << kernel;
    if (maximum && outs.find("memref<1x6x20x21") != std::string::npos) {
      pooled_relu = true;
      EXPECT_EQ(kernel.find("arith.maximumf"), kernel.rfind("arith.maximumf")) << kernel;
      EXPECT_NE(kernel.find("memref<6x1x1xf32>"), std::string::npos) << kernel;
    }
    at = next;
  }
  EXPECT_TRUE(pooled_relu) << bufferized;
}

// `kiln run model.onnx --pgle`: the model's own weights through the instrumented and the
// optimised build, the profile written, the optimised build's output still PyTorch's.
TEST(OnnxModelsTest, PgleProfilesAndRecompilesAModelWithItsWeights) {
  TempDir dir;
  std::string out = dir.file("out.npy"), profile = dir.file("profile");
  // Without a cache nothing else holds the first pass: the optimised runs must not need it.
  for (bool cached : {false, true}) {
    std::vector<std::string> args = {model("squeeze_excite_opset13.onnx"),
                                     "--input",
                                     model("squeeze_excite.input.npy"),
                                     "--pgle",
                                     "--pgle-runs",
                                     "2",
                                     "--repeat",
                                     "5",
                                     "--output",
                                     out,
                                     "--profile-out",
                                     profile};
    if (!cached) args.push_back("--no-cache");
    ProcessResult r = kiln_run(dir.file("cache"), args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("built the instrumented first pass"));
    EXPECT_THAT(r.out, HasSubstr("pgle: recompiled with the profile of 2 runs"));
    expect_matches_reference(out, model("squeeze_excite.expected.npy"));
  }
  ProcessResult show = run_process({kiln_binary(), "profile", "show", profile});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("main/matmul"));
  // Run again: the optimised build is in the cache and nothing is profiled.
  ProcessResult r = kiln_run(dir.file("cache"), {model("squeeze_excite_opset13.onnx"), "--input",
                                                 model("squeeze_excite.input.npy"), "--pgle",
                                                 "--repeat", "2", "--output", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("the PGLE-optimised executable came from the cache"));
  expect_matches_reference(out, model("squeeze_excite.expected.npy"));
}

TEST(OnnxModelsTest, TransformerEncoderMatchesPyTorch) {
  expect_model_matches_pytorch("transformer");
}
TEST(OnnxModelsTest, LstmAndGruMatchPyTorch) { expect_model_matches_pytorch("recurrent"); }
TEST(OnnxModelsTest, Resnet18MatchesPyTorch) { expect_model_matches_pytorch("resnet18"); }
TEST(OnnxModelsTest, MobilenetV2MatchesPyTorch) { expect_model_matches_pytorch("mobilenet_v2"); }

// A repeat run is a hit that needs neither the ONNX importer (protobuf, libonnx) nor the compiler
// (MLIR, LLVM): both libraries are made unloadable for it.
TEST(OnnxCacheTest, SecondRunIsAHitWithoutImporterOrCompiler) {
  TempDir dir;
  std::string file = model("small_cnn_opset13.onnx");
  ProcessResult first =
      kiln_run(dir.file("cache"), {file, "--input", model("small_cnn.input.npy")});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("cache: miss"));
  ProcessResult second =
      kiln_run(dir.file("cache"),
               {file, "--input", model("small_cnn.input.npy"), "--output", dir.file("out.npy")},
               {"KILN_COMPILER_LIBRARY=/nonexistent/libkiln_compiler.so",
                "KILN_ONNX_IMPORT_LIBRARY=/nonexistent/libkiln_onnx_import.so"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("cache: hit"));
  EXPECT_THAT(second.out, HasSubstr("time: no compile"));
  expect_matches_reference(dir.file("out.npy"), model("small_cnn.expected.npy"));
}

// Weights are bound at load time: another checkpoint of the same architecture is a hit (without
// the importer), and it computes with its own weights, not the cached model's.
TEST(OnnxCacheTest, OtherWeightsOfTheSameArchitectureAreAHitWithTheirOwnValues) {
  TempDir dir;
  ProcessResult first =
      kiln_run(dir.file("cache"), {model("mlp_opset13.onnx"), "--input", model("mlp.input.npy")});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ProcessResult other = kiln_run(dir.file("cache"),
                                 {model("mlp_reseeded_opset13.onnx"), "--input",
                                  model("mlp_reseeded.input.npy"), "--output", dir.file("out.npy")},
                                 {"KILN_ONNX_IMPORT_LIBRARY=/nonexistent/libkiln_onnx_import.so"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_THAT(other.out, HasSubstr("cache: hit"));
  expect_matches_reference(dir.file("out.npy"), model("mlp_reseeded.expected.npy"));
  auto entries = run_process({kiln_binary(), "--cache-dir", dir.file("cache"), "cache", "ls"});
  EXPECT_EQ(std::count(entries.out.begin(), entries.out.end(), '\n'), 1) << entries.out;
}

// A convolution with more filters than output pixels multiplies by its transposed weights, which
// the program computes once when it is loaded: from the weights it is loaded with, so a second
// checkpoint hits the entry and still gets its own results.
// The program keeps only the prepared copy of such a weight (main takes an empty placeholder in its
// place) and needs nothing of the model once it is built.
TEST(OnnxCacheTest, WeightsPreparedAtLoadComeFromTheCheckpointBeingRun) {
  std::optional<Result<OnnxModel>> loaded = OnnxModel::from_file(model("deep_conv_opset13.onnx"));
  ASSERT_TRUE(loaded->ok()) << loaded->status().to_string();
  auto shapes = (*loaded)->resolve_input_shapes({{1, 8, 4, 4}});
  ASSERT_TRUE(shapes.ok()) << shapes.status().to_string();
  auto program = compile_onnx_or_get_cached(shared_client(), **loaded, *shapes, CompileOptions());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  loaded.reset();
  bool has_prepare = false;
  for (const EntryPoint& e : program->executable()->entry_points())
    has_prepare = has_prepare || e.name == "kiln_prepare";
  EXPECT_TRUE(has_prepare) << "the transposed weights are not prepared at load";
  auto main_entry = program->executable()->find_entry("main");
  ASSERT_TRUE(main_entry.ok());
  size_t placeholders = 0;
  for (const TensorType& t : (*main_entry)->inputs)
    placeholders += t.shape == std::vector<int64_t>{0};
  EXPECT_GE(placeholders, 1u) << "main still takes the weights only kiln_prepare reads";
  auto input = read_npy(model("deep_conv.input.npy"));
  ASSERT_TRUE(input.ok());
  auto result = program->run({*input});
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  TempDir scratch;
  ASSERT_TRUE(write_npy(scratch.file("out.npy"), (*result)[0]).ok());
  expect_matches_reference(scratch.file("out.npy"), model("deep_conv.expected.npy"));

  TempDir dir;
  for (std::string name : {"deep_conv", "deep_conv_reseeded"}) {
    std::string out = dir.file(name + ".npy");
    ProcessResult r = kiln_run(dir.file("cache"), {model(name + "_opset13.onnx"), "--input",
                                                   model(name + ".input.npy"), "--output", out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (name == "deep_conv_reseeded") {
      EXPECT_THAT(r.out, HasSubstr("cache: hit"));
    }
    expect_matches_reference(out, model(name + ".expected.npy"));
  }
}

// A dynamic batch takes its size from the input; each size is its own program.
TEST(OnnxCacheTest, DynamicBatchComesFromTheInputAndEachShapeIsItsOwnEntry) {
  TempDir dir;
  std::string file = model("mlp_dynamic_opset13.onnx");
  ProcessResult batch3 =
      kiln_run(dir.file("cache"),
               {file, "--input", model("mlp_dynamic.input.npy"), "--output", dir.file("out.npy")});
  ASSERT_EQ(batch3.exit_code, 0) << batch3.err;
  EXPECT_THAT(batch3.out, HasSubstr("cache: miss"));
  EXPECT_THAT(batch3.out, HasSubstr("tensor<3x10xf32>"));
  expect_matches_reference(dir.file("out.npy"), model("mlp_dynamic.expected.npy"));
  ProcessResult batch1 = kiln_run(dir.file("cache"), {file, "--input", model("mlp.input.npy")});
  ASSERT_EQ(batch1.exit_code, 0) << batch1.err;
  EXPECT_THAT(batch1.out, HasSubstr("cache: miss"));
  ProcessResult again =
      kiln_run(dir.file("cache"), {file, "--input", model("mlp_dynamic.input.npy")});
  EXPECT_THAT(again.out, HasSubstr("cache: hit"));
  // By name, too.
  ProcessResult named =
      kiln_run(dir.file("cache"), {file, "--input", "input=" + model("mlp_dynamic.input.npy")});
  EXPECT_THAT(named.out, HasSubstr("cache: hit"));
}

// An input a Reshape reads as its shape is static: its values are compiled in and keyed, so the
// same values hit and other values are another program (ONNX's own test model and data).
TEST(OnnxCacheTest, AnInputThatShapesTheProgramIsCompiledInAndKeyedByItsValues) {
  TempDir dir;
  std::string test = "/usr/share/libonnx-testdata/data/node/test_reshape_reordered_all_dims";
  std::string data = test + "/test_data_set_0/input_0.pb",
              shape = test + "/test_data_set_0/input_1.pb";
  ProcessResult first = kiln_run(
      dir.file("cache"),
      {test + "/model.onnx", "--input", data, "--input", shape, "--output", dir.file("a.npy")});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("cache: miss"));
  auto want = read_onnx_tensor_file(test + "/test_data_set_0/output_0.pb");
  auto got = read_npy(dir.file("a.npy"));
  ASSERT_TRUE(want.ok() && got.ok());
  ASSERT_EQ(got->shape(), want->shape());
  for (int64_t i = 0; i < want->element_count(); ++i)
    ASSERT_EQ(got->element_as_double(i), want->element_as_double(i)) << "element " << i;
  ProcessResult again =
      kiln_run(dir.file("cache"), {test + "/model.onnx", "--input", data, "--input", shape});
  EXPECT_THAT(again.out, HasSubstr("cache: hit"));
  // The same data reshaped to 2 x 4 x 3: a miss, and the result has the new shape.
  auto data_shape = read_onnx_tensor_file(data);
  ASSERT_TRUE(data_shape.ok());
  ASSERT_EQ(data_shape->element_count(), 24);
  Buffer other(DType::kI64, {3});
  other.as<int64_t>()[0] = 2;
  other.as<int64_t>()[1] = 4;
  other.as<int64_t>()[2] = 3;
  ASSERT_TRUE(write_npy(dir.file("shape.npy"), other).ok());
  ProcessResult reshaped =
      kiln_run(dir.file("cache"), {test + "/model.onnx", "--input", data, "--input",
                                   dir.file("shape.npy"), "--output", dir.file("b.npy"), "--json"});
  ASSERT_EQ(reshaped.exit_code, 0) << reshaped.err;
  EXPECT_THAT(reshaped.out, HasSubstr("\"cache\":\"miss\""));
  auto b = read_npy(dir.file("b.npy"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->shape(), (std::vector<int64_t>{2, 4, 3}));
}

TEST(OnnxModelsTest, WeightsInAnExternalDataFileAreRead) {
  TempDir dir;
  std::filesystem::copy(model("external"), dir.file("model"));
  std::string file = dir.file("model/mlp_external.onnx");
  ProcessResult r = kiln_run(dir.file("cache"), {file, "--input", model("mlp_reseeded.input.npy"),
                                                 "--output", dir.file("out.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_matches_reference(dir.file("out.npy"), model("mlp_reseeded.expected.npy"));
  std::filesystem::remove(dir.file("model/mlp_external.weights"));
  ProcessResult missing = kiln_run(dir.file("cache"), {file, "--fill", "ones"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("mlp_external.weights"));
}

// With --fold-weights the weights are compiled in, so their values are part of the key: a model
// whose external weights file differs is another program (not the first one's cached code).
TEST(OnnxCacheTest, FoldedWeightsInAnExternalFileAreKeyedByTheirValues) {
  TempDir dir;
  std::filesystem::copy(model("external"), dir.file("a"));
  std::filesystem::copy(model("external"), dir.file("b"));
  {  // b: the same graph with other weight values
    std::string weights = dir.file("b/mlp_external.weights");
    auto bytes = read_file(weights);
    ASSERT_TRUE(bytes.ok());
    std::string halved = *bytes;
    for (size_t i = 0; i + 4 <= halved.size(); i += 4) {
      float v;
      std::memcpy(&v, halved.data() + i, 4);
      v *= 0.5f;
      std::memcpy(halved.data() + i, &v, 4);
    }
    ASSERT_TRUE(write_file(weights, halved).ok());
  }
  std::vector<std::string> input = {"--input", model("mlp_reseeded.input.npy"), "--fold-weights"};
  auto run = [&](const std::string& which, const std::string& out) {
    std::vector<std::string> args = {dir.file(which + "/mlp_external.onnx"), "--output", out};
    args.insert(args.end(), input.begin(), input.end());
    return kiln_run(dir.file("cache"), args);
  };
  ProcessResult a = run("a", dir.file("a.npy"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_THAT(a.out, HasSubstr("cache: miss"));
  expect_matches_reference(dir.file("a.npy"), model("mlp_reseeded.expected.npy"));
  ProcessResult b = run("b", dir.file("b.npy"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_THAT(b.out, HasSubstr("cache: miss"));
  auto got_a = read_npy(dir.file("a.npy")), got_b = read_npy(dir.file("b.npy"));
  ASSERT_TRUE(got_a.ok() && got_b.ok());
  bool differ = false;
  for (int64_t i = 0; i < got_a->element_count(); ++i)
    differ |= got_a->element_as_double(i) != got_b->element_as_double(i);
  EXPECT_TRUE(differ) << "b ran a's code";
  // Folded and bound compiles of one model are different programs too.
  ProcessResult bound = kiln_run(dir.file("cache"), {dir.file("a/mlp_external.onnx"), "--input",
                                                     model("mlp_reseeded.input.npy")});
  EXPECT_THAT(bound.out, HasSubstr("cache: miss"));
}

// `kiln cache explain model.onnx` names what of the model the key covers and finds the entry a
// run stored (the same key).
TEST(OnnxCacheTest, ExplainNamesTheOnnxComponentsAndFindsTheRunsEntry) {
  TempDir dir;
  ProcessResult run = kiln_run(dir.file("cache"), {model("mlp_opset13.onnx"), "--fill", "ones"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ProcessResult explain = run_process({kiln_binary(), "--cache-dir", dir.file("cache"), "cache",
                                       "explain", model("mlp_opset13.onnx")});
  ASSERT_EQ(explain.exit_code, 0) << explain.err;
  EXPECT_THAT(explain.out, HasSubstr("input shapes [1, 64]"));
  EXPECT_THAT(explain.out, HasSubstr("6 bound weights (values not in the key)"));
  EXPECT_THAT(explain.out, HasSubstr("stored: yes"));
}

// `kiln compile model.onnx -o m.kx` folds the weights in: the .kx runs alone, with PyTorch's
// results; `--output x.pb` writes a TensorProto that reads back the same.
TEST(OnnxModelsTest, ACompiledKxHoldsTheWeightsAndOutputsCanBeTensorProtos) {
  TempDir dir;
  ProcessResult compiled = run_process({kiln_binary(), "--cache-dir", dir.file("cache"), "compile",
                                        model("mlp_opset13.onnx"), "-o", dir.file("mlp.kx")});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  ProcessResult r = kiln_run(
      dir.file("cache"),
      {dir.file("mlp.kx"), "--input", model("mlp.input.npy"), "--output", dir.file("o.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_matches_reference(dir.file("o.npy"), model("mlp.expected.npy"));
  ProcessResult pb = kiln_run(
      dir.file("cache"),
      {model("mlp_opset13.onnx"), "--input", model("mlp.input.npy"), "--output", dir.file("o.pb")});
  ASSERT_EQ(pb.exit_code, 0) << pb.err;
  auto tensor = read_onnx_tensor_file(dir.file("o.pb"));
  ASSERT_TRUE(tensor.ok()) << tensor.status().message();
  ASSERT_TRUE(write_npy(dir.file("pb.npy"), *tensor).ok());
  expect_matches_reference(dir.file("pb.npy"), model("mlp.expected.npy"));
}

// `kiln inspect` names the interface, the operators and every unsupported node (exit 1 then).
TEST(OnnxModelsTest, InspectDescribesTheModelAndItsUnsupportedNodes) {
  ProcessResult ok = run_process({kiln_binary(), "inspect", model("recurrent_opset13.onnx")});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("input: float[2x7x16]"));
  EXPECT_THAT(ok.out, HasSubstr("LSTM 2"));
  EXPECT_THAT(ok.out, HasSubstr("every operator is supported"));
  ProcessResult bad = run_process({kiln_binary(), "inspect", model("unsupported.onnx")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.out, HasSubstr("NonMaxSuppression (node 'nms'"));
  EXPECT_THAT(bad.out, HasSubstr("FancyOp (node 'custom', domain 'com.example'"));
}

TEST(OnnxErrorsTest, UnsupportedOperatorsAreAllNamedAndNothingIsCached) {
  TempDir dir;
  ProcessResult r = kiln_run(dir.file("cache"), {model("unsupported.onnx"), "--fill", "ones"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("2 node(s) use operators kiln does not support"));
  EXPECT_THAT(r.err, HasSubstr("NonMaxSuppression (node 'nms', domain 'ai.onnx'"));
  EXPECT_THAT(r.err, HasSubstr("FancyOp (node 'custom', domain 'com.example'"));
  auto entries = run_process({kiln_binary(), "--cache-dir", dir.file("cache"), "cache", "ls"});
  EXPECT_EQ(std::count(entries.out.begin(), entries.out.end(), '\n'), 0) << entries.out;
}

TEST(OnnxErrorsTest, TruncatedModelsAndMismatchedInputsAreClearErrors) {
  TempDir dir;
  auto bytes = read_file(model("mlp_opset13.onnx"));
  ASSERT_TRUE(bytes.ok());
  for (size_t cut : {size_t(1), size_t(100), bytes->size() / 2, bytes->size() - 3}) {
    std::string path = dir.file("cut.onnx");
    std::ofstream(path, std::ios::binary) << bytes->substr(0, cut);
    ProcessResult r = kiln_run(dir.file("cache"), {path, "--fill", "ones"});
    EXPECT_EQ(r.exit_code, 1) << cut << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("error:")) << cut;
  }
  Buffer ints(DType::kI64, {1, 64});
  ASSERT_TRUE(write_npy(dir.file("ints.npy"), ints).ok());
  ProcessResult dtype =
      kiln_run(dir.file("cache"), {model("mlp_opset13.onnx"), "--input", dir.file("ints.npy")});
  EXPECT_EQ(dtype.exit_code, 1);
  EXPECT_THAT(dtype.err, HasSubstr("input 'input' is float"));
  Buffer wide(DType::kF32, {1, 65});
  ASSERT_TRUE(write_npy(dir.file("wide.npy"), wide).ok());
  ProcessResult shape =
      kiln_run(dir.file("cache"), {model("mlp_opset13.onnx"), "--input", dir.file("wide.npy")});
  EXPECT_EQ(shape.exit_code, 1);
  EXPECT_THAT(shape.err, HasSubstr("input 'input' dimension 1 is 64"));
  ProcessResult name = kiln_run(
      dir.file("cache"), {model("mlp_opset13.onnx"), "--input", "x=" + dir.file("wide.npy")});
  EXPECT_EQ(name.exit_code, 1);
  EXPECT_THAT(name.err, HasSubstr("the model has no input 'x' (its inputs: input)"));
}

// A model that protobuf accepts but whose attributes are malformed (a Conv whose weights have the
// wrong rank; found by fuzz_onnx_model, where it read past a vector) is a clear error, exit 1,
// nothing cached.
TEST(OnnxErrorsTest, AMalformedConvIsAClearError) {
  TempDir dir;
  ProcessResult r = kiln_run(
      dir.file("cache"), {std::string(KILN_TEST_PROGRAMS_DIR) + "/onnx/conv_with_short_pads.onnx"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("node 'Conv' (Conv)"));
  auto entries = run_process({kiln_binary(), "--cache-dir", dir.file("cache"), "cache", "ls"});
  EXPECT_EQ(std::count(entries.out.begin(), entries.out.end(), '\n'), 0) << entries.out;
}

// The importer runs in a child process: one that dies of a signal on some model is an error
// naming the signal, not the end of kiln.
TEST(OnnxErrorsTest, AnImporterThatCrashesIsAnErrorNotACrash) {
  TempDir dir;
  ProcessResult r = kiln_run(dir.file("cache"), {model("mlp_opset13.onnx")},
                             {std::string("KILN_ONNX_IMPORT_LIBRARY=") + KILN_CRASHING_IMPORTER});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // (signal 11); under AddressSanitizer its handler turns the signal into an exit code.
  EXPECT_THAT(r.err, HasSubstr("the ONNX importer failed ("));
}

TEST(OnnxModelsTest, RepeatReportsMedianAndMinimum) {
  TempDir dir;
  ProcessResult r = kiln_run(
      dir.file("cache"), {model("mlp_opset13.onnx"), "--fill", "ones", "--repeat", "5", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto json = nlohmann::json::parse(r.out);
  EXPECT_GT(json["timings_ms"]["run_median"].get<double>(), 0);
  EXPECT_LE(json["timings_ms"]["run_min"].get<double>(),
            json["timings_ms"]["run_median"].get<double>());
  EXPECT_EQ(json["outputs"][0]["shape"], nlohmann::json({1, 10}));
  // The process's peak resident memory: at least the model's weights, far below a gigabyte for
  // this small MLP.
  double peak = json["peak_memory_mib"].get<double>();
  EXPECT_GT(peak, 1.0);
  EXPECT_LT(peak, 1024.0);

  ProcessResult text =
      kiln_run(dir.file("cache"), {model("mlp_opset13.onnx"), "--fill", "ones", "--repeat", "3"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("memory: peak "));
}

}  // namespace
}  // namespace kiln

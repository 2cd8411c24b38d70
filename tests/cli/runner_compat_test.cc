// mlir-runner compatibility: the same programs run through mlir-opt + mlir-runner (with MLIR's own
// runner utility libraries) and through `kiln run --entry-point-result=void` print the same text.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "kiln/file.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

std::string mask_addresses(const std::string& text) {
  return std::regex_replace(text, std::regex("base@ = 0x[0-9a-f]+"), "base@ = ADDR");
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream s(text);
  for (std::string line; std::getline(s, line);) lines.push_back(line);
  return lines;
}

// Runs the program the reference way, with kiln's O1 pass list (printed by `kiln pipeline`).
std::string reference_output(const std::string& program, const std::string& entry = "main",
                             const std::string& result = "void") {
  ProcessResult pipeline = run_process(
      {kiln_binary(), "pipeline", "-O", "O1", "--disable-pass", "buffer-deallocation-pipeline",
       // mlir-opt knows no kiln step (and mlir-runner runs on one thread anyway).
       "--disable-pass", "kiln-parallelize", "--disable-pass", "kiln-free-after-last-use"});
  EXPECT_EQ(pipeline.exit_code, 0) << pipeline.err;
  std::vector<std::string> stages;
  for (const std::string& line : lines_of(pipeline.out))
    if (line.rfind("builtin.module(", 0) == 0) {
      // mlir-runner has no kiln runtime: its code allocates with plain malloc, not kiln's
      // checking allocator.
      stages.push_back(std::regex_replace(line, std::regex("use-generic-functions=true"),
                                          "use-generic-functions=false"));
    }
  EXPECT_EQ(stages.size(), 3u) << pipeline.out;  // O1 has no transform steps, three pass lists
  TempDir dir;
  std::string current = program;
  for (size_t i = 0; i < stages.size(); ++i) {
    std::string next = dir.file("stage" + std::to_string(i) + ".mlir");
    ProcessResult opt =
        run_process({MLIR_OPT, current, "--pass-pipeline=" + stages[i], "-o", next});
    EXPECT_EQ(opt.exit_code, 0) << opt.err;
    current = next;
  }
  std::string libs = std::string(MLIR_RUNTIME_DIR) + "/libmlir_runner_utils.so," +
                     MLIR_RUNTIME_DIR + "/libmlir_c_runner_utils.so";
  ProcessResult run = run_process({MLIR_RUNNER, current, "-e", entry,
                                   "--entry-point-result=" + result, "--shared-libs=" + libs});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return run.out;
}

class RunnerCompatTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RunnerCompatTest, KilnPrintsWhatMlirRunnerPrints) {
  std::string program = program_path("runner/" + GetParam());
  std::string want = reference_output(program);
  ASSERT_FALSE(want.empty()) << "mlir-runner printed nothing for " << program;
  for (const char* level : {"O0", "O2"}) {
    ProcessResult kiln = run_process(
        {kiln_binary(), "run", program, "-e", "main", "--entry-point-result=void", "-O", level});
    ASSERT_EQ(kiln.exit_code, 0) << kiln.err;
    EXPECT_EQ(mask_addresses(kiln.out), mask_addresses(want)) << "at " << level;
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, RunnerCompatTest,
                         ::testing::Values("memrefs.mlir", "tensors.mlir", "accumulators.mlir",
                                           "print_types.mlir", "x86vector.mlir",
                                           "verify_memref.mlir", "powers.mlir", "random_sort.mlir",
                                           "forall.mlir", "realloc.mlir"),
                         [](const auto& info) {
                           return info.param.substr(0, info.param.find('.'));
                         });

// vector.scan: mlir-opt lowers it only with a test pass (-test-vector-scan-lowering) in front of
// its LLVM lowering; kiln lowers it itself, at every level.
TEST(RunnerOpsTest, VectorScanPrintsWhatMlirRunnerPrintsAfterItsScanLowering) {
  std::string program = program_path("runner/scan.mlir");
  TempDir dir;
  std::string lowered = dir.file("lowered.mlir");
  ProcessResult opt = run_process(
      {MLIR_OPT, program, "-test-vector-scan-lowering", "-test-lower-to-llvm", "-o", lowered});
  ASSERT_EQ(opt.exit_code, 0) << opt.err;
  ProcessResult want =
      run_process({MLIR_RUNNER, lowered, "-e", "main", "-entry-point-result=void",
                   std::string("-shared-libs=") + MLIR_RUNTIME_DIR + "/libmlir_c_runner_utils.so"});
  ASSERT_EQ(want.exit_code, 0) << want.err;
  ASSERT_FALSE(want.out.empty());
  for (const char* level : {"O0", "O2"}) {
    ProcessResult kiln = run_process({kiln_binary(), "run", program, "-e", "main",
                                      "--entry-point-result=void", "-O", level, "--no-cache"});
    ASSERT_EQ(kiln.exit_code, 0) << kiln.err;
    EXPECT_EQ(kiln.out, want.out) << "at " << level;
  }
}

using ::testing::HasSubstr;

// The last JSON object a `kiln run --json` printed on stderr (runner mode keeps stdout for the
// program).
nlohmann::json json_on_stderr(const ProcessResult& run) {
  std::vector<std::string> lines = lines_of(run.err);
  for (auto line = lines.rbegin(); line != lines.rend(); ++line)
    if (!line->empty() && line->front() == '{') return nlohmann::json::parse(*line);
  ADD_FAILURE() << "no JSON object on stderr: " << run.err;
  return {};
}

TEST(RunnerFlagsTest, ScalarResultsPrintAsMlirRunnerPrintsThem) {
  std::string program = program_path("runner/scalar_results.mlir");
  for (std::string kind : {"i32", "i64", "f32"}) {
    std::string entry = "answer_" + kind;
    std::string want = reference_output(program, entry, kind);
    ASSERT_FALSE(want.empty()) << "mlir-runner printed nothing for " << entry;
    ProcessResult kiln = run_process(
        {kiln_binary(), "run", program, "-e", entry, "--entry-point-result=" + kind, "--no-cache"});
    EXPECT_EQ(kiln.exit_code, 0) << kiln.err;
    EXPECT_EQ(kiln.out, want) << entry;
  }
}

TEST(RunnerFlagsTest, ScalarResultsThatDoNotFitTheEntryAreClearErrors) {
  std::string program = program_path("runner/scalar_results.mlir");
  ProcessResult wrong_type = run_process({kiln_binary(), "run", program, "-e", "answer_i32",
                                          "--entry-point-result=i64", "--no-cache"});
  EXPECT_EQ(wrong_type.exit_code, 1);
  EXPECT_THAT(wrong_type.err, HasSubstr("'answer_i32' returns i32, not one i64"));
  ProcessResult with_argument =
      run_process({kiln_binary(), "run", program, "-e", "takes_an_argument",
                   "--entry-point-result=i32", "--no-cache"});
  EXPECT_EQ(with_argument.exit_code, 1);
  EXPECT_THAT(with_argument.err, HasSubstr("takes 1 argument(s)"));
  ProcessResult unknown =
      run_process({kiln_binary(), "run", program, "-e", "answer_i32", "--entry-point-result=f64"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("expected void, i32, i64 or f32"));
  EXPECT_TRUE(unknown.out.empty());
}

TEST(RunnerFlagsTest, EffortFlagsSpelledAsMlirRunnerAndJsonOnStderr) {
  std::string program = program_path("runner/scalar_results.mlir");
  for (const auto& [flag, level] : std::vector<std::pair<std::string, std::string>>{
           {"-O0", "O0"}, {"-O3", "O3"}, {"--O1", "O1"}, {"-O2", "O2"}}) {
    ProcessResult run = run_process({kiln_binary(), "run", program, flag, "-e", "answer_i32",
                                     "--entry-point-result=i32", "--json", "--no-cache"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.out, "42\n") << flag;  // only what mlir-runner would print
    nlohmann::json report = json_on_stderr(run);
    EXPECT_EQ(report.value("effort_level", ""), level) << flag;
    EXPECT_EQ(report.value("entry", ""), "answer_i32");
  }
}

TEST(RunnerFlagsTest, LongOptionsAfterOneDashAsLlvmToolsTakeThem) {
  // mlir-runner (LLVM's option parser) reads -entry-point-result=... and -shared-libs=... as
  // their double-dash forms; so does kiln run, instead of taking them for -e ntry-point-result.
  std::string program = program_path("runner/scalar_results.mlir");
  ProcessResult run =
      run_process({kiln_binary(), "run", program, "-e", "answer_i32", "-entry-point-result=i32",
                   "-shared-libs=" + std::string(MLIR_RUNTIME_DIR) + "/libmlir_c_runner_utils.so",
                   "--no-cache"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "42\n");
}

// mlir-runner hands -enable-matrix, -matrix-allow-contract and -matrix-default-layout to LLVM's
// matrix lowering; kiln takes the same spelling. The layout changes what the program computes, so
// it is part of the key: one cache serves both layouts, each with its own code.
TEST(RunnerFlagsTest, MatrixLayoutFlagsAsMlirRunnerTakesThemEachWithItsOwnCacheEntry) {
  std::string program = program_path("runner/matrix_intrinsics.mlir");
  TempDir dir;
  std::string lowered = dir.file("lowered.mlir");
  ProcessResult opt = run_process({MLIR_OPT, program, "-test-lower-to-llvm", "-o", lowered});
  ASSERT_EQ(opt.exit_code, 0) << opt.err;
  std::string libs = std::string("-shared-libs=") + MLIR_RUNTIME_DIR + "/libmlir_c_runner_utils.so";
  std::vector<std::string> env = {"KILN_CACHE_DIR=" + dir.file("cache")};
  std::set<std::string> outputs;
  for (const char* layout : {"row-major", "column-major"}) {
    std::vector<std::string> flags = {"-e",
                                      "main",
                                      "-entry-point-result=void",
                                      "-O0",
                                      "-enable-matrix",
                                      "-matrix-allow-contract",
                                      std::string("-matrix-default-layout=") + layout,
                                      libs};
    std::vector<std::string> reference = {MLIR_RUNNER, lowered};
    reference.insert(reference.end(), flags.begin(), flags.end());
    ProcessResult want = run_process(reference);
    ASSERT_EQ(want.exit_code, 0) << want.err;
    ASSERT_FALSE(want.out.empty());
    for (int run = 0; run < 2; ++run) {  // compiled, then from the cache
      std::vector<std::string> command = {kiln_binary(), "run", program};
      command.insert(command.end(), flags.begin(), flags.end());
      ProcessResult kiln = run_process(command, env);
      ASSERT_EQ(kiln.exit_code, 0) << kiln.err;
      EXPECT_EQ(kiln.out, want.out) << layout << ", run " << run;
    }
    outputs.insert(want.out);
  }
  EXPECT_EQ(outputs.size(), 2u) << "the layouts should compute different things";
  ProcessResult bad =
      run_process({kiln_binary(), "run", program, "--no-cache", "-matrix-default-layout=diagonal"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("KILN_MATRIX_DEFAULT_LAYOUT"));
}

TEST(RunnerFlagsTest, SharedLibsResolveTheFunctionsAProgramCalls) {
  std::string program = program_path("runner/calls_extern.mlir");
  ProcessResult missing =
      run_process({kiln_binary(), "run", program, "--entry-point-result=i32", "--no-cache"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("calls 'kiln_test_add_seven'"));
  EXPECT_THAT(missing.err, HasSubstr("--shared-libs"));
  // MLIR's runner utility libraries are kiln's own runtime; the test library is loaded.
  std::string libs =
      std::string(MLIR_RUNTIME_DIR) + "/libmlir_c_runner_utils.so," + KILN_TEST_EXTERN_LIBRARY;
  ProcessResult run = run_process({kiln_binary(), "run", program, "--entry-point-result=i32",
                                   "--shared-libs=" + libs, "--no-cache"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "42\n42\n");  // vector.print, then the result
  // The option repeated, as LLVM's runtime-verification tests pass it, adds up the same.
  ProcessResult repeated =
      run_process({kiln_binary(), "run", program, "--entry-point-result=i32",
                   "-shared-libs=" + std::string(MLIR_RUNTIME_DIR) + "/libmlir_runner_utils.so",
                   "-shared-libs=" + std::string(KILN_TEST_EXTERN_LIBRARY), "--no-cache"});
  EXPECT_EQ(repeated.exit_code, 0) << repeated.err;
  EXPECT_EQ(repeated.out, "42\n42\n");
  ProcessResult absent = run_process({kiln_binary(), "run", program, "--entry-point-result=i32",
                                      "--shared-libs=/nonexistent/libnothing.so", "--no-cache"});
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_THAT(absent.err, HasSubstr("cannot load '/nonexistent/libnothing.so'"));
}

TEST(RuntimeVerificationTest, ContinueModeReportsEveryFailedCheckAndRunsToTheEnd) {
  std::string program = program_path("runner/two_bad_loads.mlir");
  TempDir dir;
  std::vector<std::string> env = {"KILN_CACHE_DIR=" + dir.file("cache")};
  for (const char* level : {"O0", "O2"}) {
    ProcessResult run =
        run_process({kiln_binary(), "run", program, "-e", "main", "--entry-point-result=void",
                     "--verify-runtime-continue", "-O", level},
                    env);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    size_t reports = 0;
    for (size_t at = run.out.find("ERROR: Runtime op verification failed"); at != std::string::npos;
         at = run.out.find("ERROR: Runtime op verification failed", at + 1))
      ++reports;
    EXPECT_EQ(reports, 2u) << run.out;
    EXPECT_THAT(run.out, HasSubstr("^ out-of-bounds access\nLocation: loc(\""));
    EXPECT_THAT(run.out, HasSubstr("two_bad_loads.mlir\":4:8)"));
    // The good loads around the bad ones ran, the last one after both reports.
    EXPECT_EQ(run.out.substr(0, 4), "1.5\n") << level;
    EXPECT_EQ(run.out.substr(run.out.size() - 4), "1.5\n") << level;
  }
  // Continuing is part of the key: the aborting build of the same program is another entry.
  ProcessResult aborting =
      run_process({kiln_binary(), "run", program, "-e", "main", "--entry-point-result=void",
                   "--verify-runtime", "-O", "O2"},
                  env);
  EXPECT_EQ(aborting.exit_code, 128 + SIGABRT) << aborting.err;
}

TEST(RuntimeVerificationTest, OutOfBoundsAccessStopsWithMlirRunnersMessage) {
  std::string program = program_path("runner/out_of_bounds.mlir");
  TempDir dir;
  std::vector<std::string> env = {"KILN_CACHE_DIR=" + dir.file("cache")};
  for (const char* level : {"O0", "O2"}) {
    ProcessResult run = run_process({kiln_binary(), "run", program, "--entry-point-result=void",
                                     "--verify-runtime", "-O", level},
                                    env);
    EXPECT_EQ(run.exit_code, 128 + SIGABRT) << run.err;
    EXPECT_THAT(run.out, HasSubstr("ERROR: Runtime op verification failed\n"
                                   "%0 = memref.load %alloca[%c5] : memref<4xf32>\n"
                                   "^ out-of-bounds access\n"
                                   "Location: loc(\""));
    EXPECT_THAT(run.out, HasSubstr("out_of_bounds.mlir\":6:8)")) << level;
  }
  // The checks are part of the key: the same program without them is another entry, and runs
  // unchecked (the flag's environment spelling does the same as --verify-runtime).
  ProcessResult unchecked = run_process(
      {kiln_binary(), "run", program, "--entry-point-result=void", "-O", "O2", "--json"}, env);
  EXPECT_EQ(unchecked.exit_code, 0) << unchecked.err;
  EXPECT_EQ(json_on_stderr(unchecked).value("cache", ""), "miss");
  std::vector<std::string> checked_env = env;
  checked_env.push_back("KILN_VERIFY_RUNTIME=true");
  ProcessResult checked = run_process(
      {kiln_binary(), "run", program, "--entry-point-result=void", "-O", "O2"}, checked_env);
  EXPECT_EQ(checked.exit_code, 128 + SIGABRT);
  EXPECT_THAT(checked.out, HasSubstr("out-of-bounds access"));
}

TEST(PackUnpackTest, PadsIntoTilesAndUnpacksBackAtEveryLevel) {
  const std::string want =
      "Unranked Memref base@ = ADDR rank = 4 offset = 0 sizes = [2, 3, 2, 2] strides = [12, 4, 2, "
      "1] data = \n"
      "[[[[1,     2], \n   [6,     7]], \n  [[3,     4], \n   [8,     9]], \n"
      "  [[5,     0], \n   [10,     0]]], \n [[[11,     12], \n   [0,     0]], \n"
      "  [[13,     14], \n   [0,     0]], \n  [[15,     0], \n   [0,     0]]]]\n"
      "Unranked Memref base@ = ADDR rank = 2 offset = 0 sizes = [3, 5] strides = [5, 1] data = \n"
      "[[1,   2,   3,   4,   5], \n [6,   7,   8,   9,   10], \n [11,   12,   13,   14,   15]]\n";
  for (const char* level : {"O0", "O2"}) {
    ProcessResult run = run_process({kiln_binary(), "run", program_path("runner/pack_unpack.mlir"),
                                     "--entry-point-result=void", "--no-cache", "-O", level});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(mask_addresses(run.out), want) << level;
  }
}

TEST(SmallFloatTypesTest, ComputedAndPrintedAsMlirRunnerWithApFloat) {
  std::string program = program_path("runner/small_floats.mlir");
  TempDir dir;
  std::string lowered = dir.file("lowered.mlir");
  ProcessResult opt =
      run_process({MLIR_OPT, program, "--convert-arith-to-apfloat", "--convert-vector-to-scf",
                   "--convert-scf-to-cf", "--convert-to-llvm", "-o", lowered});
  ASSERT_EQ(opt.exit_code, 0) << opt.err;
  ProcessResult want = run_process(
      {MLIR_RUNNER, lowered, "-e", "main", "--entry-point-result=void",
       "--shared-libs=" + std::string(MLIR_RUNTIME_DIR) + "/libmlir_c_runner_utils.so"});
  ASSERT_EQ(want.exit_code, 0) << want.err;
  ASSERT_THAT(want.out, HasSubstr("( 1.5, 2.25, 4.5, 96, 0.1875, nan )"));
  for (const char* level : {"O0", "O2"}) {
    ProcessResult kiln = run_process({kiln_binary(), "run", program, "-e", "main",
                                      "--entry-point-result=void", "--no-cache", "-O", level});
    ASSERT_EQ(kiln.exit_code, 0) << kiln.err;
    EXPECT_EQ(kiln.out, want.out) << level;
  }
}

// The module as KILN_DUMP_IR_TO wrote it at `stage` ("1-bufferized", ...), or "".
std::string dumped_stage(const TempDir& dump, const std::string& stage) {
  for (const auto& file : std::filesystem::directory_iterator(dump.path()))
    if (file.path().string().find(stage) != std::string::npos)
      if (auto text = read_file(file.path().string()); text.ok()) return *text;
  return "";
}

TEST(EmbeddedScheduleTest, AppliedAsTheTransformInterpreterWouldThenErased) {
  std::string program = program_path("runner/transform_schedule.mlir");
  for (const char* level : {"O0", "O2"}) {
    TempDir dump;
    ProcessResult run = run_process(
        {kiln_binary(), "run", program, "--entry-point-result=void", "--no-cache", "-O", level},
        {"KILN_DUMP_IR_TO=" + dump.path()});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_THAT(run.out, HasSubstr("[[4,   5,   5], \n [10,   11,   14], \n [16,   17,   23]]"));
    // The schedule's 2x2 tiles are loops in the program kiln compiled; no transform op is left.
    std::string bufferized = dumped_stage(dump, "1-bufferized");
    EXPECT_THAT(bufferized, HasSubstr("scf.for")) << level;
    EXPECT_THAT(bufferized, ::testing::Not(HasSubstr("transform."))) << level;
  }
}

TEST(EmbeddedScheduleTest, ScheduleInANestedModuleAppliesToTheWholeFile) {
  std::string program = program_path("runner/nested_schedule.mlir");
  TempDir dump;
  ProcessResult run = run_process(
      {kiln_binary(), "run", program, "-e", "main", "-entry-point-result=void", "--no-cache"},
      {"KILN_DUMP_IR_TO=" + dump.path()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("[[4,   5,   5], \n [10,   11,   14], \n [16,   17,   23]]"));
  std::string bufferized = dumped_stage(dump, "1-bufferized");
  EXPECT_THAT(bufferized, HasSubstr("scf.for"));  // the schedule's 1x2 tiles
  EXPECT_THAT(bufferized, ::testing::Not(HasSubstr("transform.")));
  EXPECT_THAT(bufferized, ::testing::Not(HasSubstr("@schedule")));
}

TEST(EmbeddedScheduleTest, AScheduleThatFailsIsACompileErrorNamingIt) {
  TempDir dir;
  std::string bad = dir.file("bad_schedule.mlir");
  // The cast fails when the interpreter runs it: the payload is a matmul, not a generic.
  ASSERT_TRUE(write_file(bad, R"mlir(
module attributes {transform.with_named_sequence} {
  func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %c: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %r = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>)
                       outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32>
    return %r : tensor<4x4xf32>
  }
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %matmul = transform.structured.match ops{["linalg.matmul"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %generic = transform.cast %matmul : !transform.any_op to !transform.op<"linalg.generic">
    transform.yield
  }
}
)mlir")
                  .ok());
  ProcessResult run = run_process({kiln_binary(), "run", bad, "--no-cache"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("transform schedule (@__transform_main) failed"));
  EXPECT_THAT(run.err, HasSubstr("bad_schedule.mlir:"));
}

}  // namespace
}  // namespace kiln::testing

// mlir-runner compatibility: the same programs run through mlir-opt + mlir-runner (with MLIR's own
// runner utility libraries) and through `kiln run --entry-point-result=void` print the same text.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

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
std::string reference_output(const std::string& program) {
  ProcessResult pipeline = run_process(
      {kiln_binary(), "pipeline", "-O", "O1", "--disable-pass", "buffer-deallocation-pipeline",
       // mlir-opt knows no kiln step (and mlir-runner runs on one thread anyway).
       "--disable-pass", "kiln-parallelize"});
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
  ProcessResult run = run_process(
      {MLIR_RUNNER, current, "-e", "main", "--entry-point-result=void", "--shared-libs=" + libs});
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
                         ::testing::Values("memrefs.mlir", "tensors.mlir", "accumulators.mlir"),
                         [](const auto& info) {
                           return info.param.substr(0, info.param.find('.'));
                         });

}  // namespace
}  // namespace kiln::testing

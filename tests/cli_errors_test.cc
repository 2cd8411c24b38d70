// Bad input through the real `kiln` binary: each case names what is wrong, where, and exits
// non-zero.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "kiln/npy.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

ProcessResult kiln(std::vector<std::string> args) {
  args.insert(args.begin(), kiln_binary());
  return run_process(args);
}

TEST(CliErrorsTest, ParseErrorHasFileLineColumn) {
  std::string file = program_path("bad/syntax_error.mlir");
  ProcessResult r = kiln({"run", file});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(file + ":3:12: error: expected ':'"));
}

TEST(CliErrorsTest, VerifierErrorHasFileLineColumn) {
  std::string file = program_path("bad/verifier_error.mlir");
  ProcessResult r = kiln({"run", file});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(file + ":6:3: error: type of return operand 0"));
}

TEST(CliErrorsTest, UnsupportedOpNamesTheOpAndThePass) {
  std::string file = program_path("bad/unsupported_op.mlir");
  ProcessResult r = kiln({"run", file});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(file + ":2:8: error: failed to legalize operation 'tosa.custom'"));
  EXPECT_THAT(r.err, HasSubstr("the pass 'tosa-to-linalg' failed"));
}

TEST(CliErrorsTest, WrongInputShapeNamesArgumentExpectedAndGiven) {
  TempDir dir;
  ASSERT_TRUE(write_npy(dir.file("a.npy"), Buffer(DType::kF32, {2, 2})).ok());
  ProcessResult r =
      kiln({"run", program_path("matmul_odd.mlir"), "-O", "O0", "--input", dir.file("a.npy")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("argument 0 of 'matmul': expected tensor<37x53xf32>, given "
                               "tensor<2x2xf32>"));
}

TEST(CliErrorsTest, WrongInputDtypeNamesBoth) {
  TempDir dir;
  ASSERT_TRUE(write_npy(dir.file("a.npy"), Buffer(DType::kI32, {37, 53})).ok());
  ProcessResult r =
      kiln({"run", program_path("matmul_odd.mlir"), "-O", "O0", "--input", dir.file("a.npy")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("expected tensor<37x53xf32>, given tensor<37x53xi32>"));
}

TEST(CliErrorsTest, TooManyInputs) {
  TempDir dir;
  ASSERT_TRUE(write_npy(dir.file("a.npy"), Buffer(DType::kF32, {13, 17})).ok());
  ProcessResult r = kiln({"run", program_path("reductions.mlir"), "-O", "O0", "--input",
                          dir.file("a.npy"), "--input", dir.file("a.npy")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("2 --input file(s) given but 'reductions' takes 1 argument(s)"));
}

TEST(CliErrorsTest, DynamicArgumentNeedsAnInput) {
  ProcessResult r = kiln({"run", program_path("dynamic.mlir"), "-O", "O0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("argument 0 of 'dynamic' has a dynamic shape tensor<?x?xf32>"));
}

TEST(CliErrorsTest, UnknownEntryListsTheAvailableOnes) {
  ProcessResult r = kiln({"run", program_path("matmul_odd.mlir"), "-O", "O0", "-e", "nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("no entry function 'nope'"));
  EXPECT_THAT(r.err, HasSubstr("its public functions are: matmul"));
}

TEST(CliErrorsTest, MissingFileAndBadEffortLevelAndCorruptExecutable) {
  ProcessResult missing = kiln({"run", "/nonexistent/model.mlir"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("cannot open /nonexistent/model.mlir"));

  ProcessResult level = kiln({"run", program_path("matmul_odd.mlir"), "-O", "O7"});
  EXPECT_EQ(level.exit_code, 1);
  EXPECT_THAT(level.err, HasSubstr("unknown effort level 'O7'"));

  TempDir dir;
  std::string kx = dir.file("m.kx");
  ProcessResult compiled = kiln({"compile", program_path("reductions.mlir"), "-o", kx});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  {
    std::fstream f(kx, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  ProcessResult corrupt = kiln({"run", kx});
  EXPECT_EQ(corrupt.exit_code, 1);
  EXPECT_THAT(corrupt.err, HasSubstr("checksum mismatch"));
}

TEST(CliErrorsTest, BadNpyInputIsNamed) {
  TempDir dir;
  {
    std::ofstream f(dir.file("junk.npy"));
    f << "not numpy";
  }
  ProcessResult r =
      kiln({"run", program_path("reductions.mlir"), "-O", "O0", "--input", dir.file("junk.npy")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(dir.file("junk.npy") + ": not a NumPy .npy file"));
}

TEST(CliTest, CompileThenRunTheExecutableWithoutCompiling) {
  TempDir dir;
  std::string kx = dir.file("mlp.kx");
  ProcessResult compiled = kiln({"compile", program_path("../../examples/mlp.mlir"), "-o", kx});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  ProcessResult run = kiln({"run", kx, "--fill", "ones", "--output", dir.file("o.npy")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("result 0: tensor<1x8x10xf32>"));
  EXPECT_THAT(run.out, HasSubstr("cache: off (ran a compiled executable file)"));
  EXPECT_THAT(run.out, HasSubstr("time: no compile"));
  auto out = read_npy(dir.file("o.npy"));
  ASSERT_TRUE(out.ok());
  // With all-ones inputs: hidden = 64 + 1 = 65 per unit, output = 128 * 65 + 1.
  EXPECT_FLOAT_EQ(out->as<float>()[0], 128 * 65 + 1);
}

}  // namespace
}  // namespace kiln::testing

// Bad input through the real `kiln` binary: each case names what is wrong, where, and exits
// non-zero.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/config.h"
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

// Each of these once aborted, hung, or was silently replaced by a default.
TEST(CliErrorsTest, BadFlagValuesAndUrlsAreRefusedBeforeAnyWork) {
  TempDir dir;
  struct Case {
    std::string setting;
    std::string message;
  };
  std::vector<Case> cases = {
      {"KILN_COMPILATION_CACHE_MAX_SIZE=lots",
       "KILN_COMPILATION_CACHE_MAX_SIZE='lots' is not valid: use an integer"},
      {"KILN_ENABLE_COMPILATION_CACHE=maybe", "use true or false"},
      {"KILN_LOG_LEVEL=loud", "use one of debug, info, warning, error"},
      {"KILN_OPTIMIZATION_LEVEL=O9", "unknown effort level 'O9'"},
      {"KILN_REMOTE_CACHE_TIMEOUT_MS=0", "use a value from 1 to 3600000"},
      {"KILN_PGLE_PROFILING_RUNS=99999999999", "use a value from 0 to 1000000"},
      {"KILN_REMOTE_CACHE=redis://127.0.0.1:99999", "has port 99999; it must be at most 65535"},
      {"KILN_REMOTE_CACHE=redis://h:1/99999999999999999999", "has database 99999999999999999999"},
      {"KILN_REMOTE_CACHE=http://h", "is not a Redis URL"},
      {"KILN_COORDINATOR=redis://127.0.0.1:6379/99999999999999", "has database"},
      {"KILN_COORDINATOR=redis://127.0.0.1:1", "cannot connect"},
  };
  for (const Case& c : cases) {
    for (bool from_environment : {true, false}) {
      // The coordinator is read from the environment only.
      if (!from_environment && c.setting.rfind("KILN_COORDINATOR", 0) == 0) continue;
      std::vector<std::string> argv = {kiln_binary(), "--cache-dir", dir.path()};
      std::vector<std::string> env;
      if (from_environment) {
        env.push_back(c.setting);
      } else {
        argv.insert(argv.end(), {"--set", c.setting});
      }
      argv.insert(argv.end(), {"run", program_path("../../examples/mlp.mlir")});
      ProcessResult r = run_process(argv, env);
      EXPECT_EQ(r.exit_code, 1) << c.setting << (from_environment ? " (env)" : " (--set)");
      EXPECT_THAT(r.err, HasSubstr(c.message)) << c.setting;
      EXPECT_THAT(r.err, ::testing::Not(HasSubstr("terminate called")));
    }
  }
  ProcessResult huge_job =
      run_process({kiln_binary(), "run", program_path("../../examples/mlp.mlir")},
                  {"KILN_COORDINATOR=redis://127.0.0.1:1", "KILN_NUM_PROCESSES=99999999999"});
  EXPECT_EQ(huge_job.exit_code, 1);
  EXPECT_THAT(
      huge_job.err,
      HasSubstr("KILN_NUM_PROCESSES='99999999999' is not valid: use a value from 1 to 65536"));
}

// Programs built to crash MLIR or kiln (stack overflow in the parser, input MLIR's parser
// crashes on, constants or tensors too
// big to exist, names JSON cannot hold, results and intermediates larger than memory) are errors
// with a location or the entry's name.
TEST(CliErrorsTest, HostileProgramsAreClearErrorsNotSignals) {
  TempDir dir;
  const std::string t = "tensor<4xf32>";
  std::string deep_regions = "func.func @f(%a: " + t + ") -> " + t + " {\n  %r = ";
  for (int i = 0; i < 5000; ++i) deep_regions += "scf.execute_region -> " + t + " { ";
  deep_regions += "scf.yield %a : " + t;
  for (int i = 0; i < 5000; ++i) deep_regions += " }";
  deep_regions += "\n  return %r : " + t + "\n}\n";
  std::string deep_type = "func.func @f(%a: tensor<4x";
  for (int i = 0; i < 100000; ++i) deep_type += "tensor<";
  deep_type += "f32" + std::string(100000, '>') + ">) {\n  return\n}\n";
  struct Case {
    std::string name;
    std::string text;
    std::string message;
  };
  std::vector<Case> cases = {
      {"deep_regions", deep_regions, ":2:"},
      {"deep_type", deep_type, ":1:"},
      // linalg.reduce without its dimensions list: MLIR 22's parser dereferences null on it.
      {"parser_crash",
       "func.func @f(%x: tensor<3x5xf32>, %acc: tensor<3xf32>) -> tensor<3xf32> {\n"
       "  %s = linalg.reduce ins(%x : tensor<3x5xf32>) outs(%acc : tensor<3xf32>) dimensions =\n"
       "    (%in: f32, %out: f32) {\n      %t = arith.addf %in, %out : f32\n"
       "      linalg.yield %t : f32\n    }\n  return %s : tensor<3xf32>\n}\n",
       "error: MLIR's parser crashed ("},
      {"huge_splat",
       "func.func @f() -> tensor<100000000000xf32> {\n"
       "  %c = arith.constant dense<1.0> : tensor<100000000000xf32>\n"
       "  return %c : tensor<100000000000xf32>\n}\n",
       ":2:8: error: a constant of 400000000000 bytes is larger than kiln embeds in code"},
      {"overflowing_shape",
       "func.func @f(%a: tensor<4294967296x4294967296x4294967296xf32>) {\n  return\n}\n",
       ":1:1: error: 'tensor<4294967296x4294967296x4294967296xf32>' needs more than 2^64 bytes"},
      {"escaped_non_utf8_name",
       "func.func @\"f\\FF\"(%a: " + t + ") -> " + t + " {\n  return %a : " + t + "\n}\n",
       ":1:1: error: the symbol name of 'func.func' is not valid UTF-8"},
      {"raw_non_utf8_module_name",
       "module @\"m\xff\" {\n  func.func @f(%a: " + t + ") -> " + t + " {\n    return %a : " + t +
           "\n  }\n}\n",
       ":1:1: error: the symbol name of 'builtin.module' is not valid UTF-8"},
      {"argument_larger_than_memory",
       "func.func @f(%a: tensor<1000000x1000000xf32>) -> tensor<1000000x1000000xf32> {\n"
       "  return %a : tensor<1000000x1000000xf32>\n}\n",
       "argument 0 of 'f': cannot allocate 4000000000000 bytes"},
      {"result_larger_than_memory",
       "func.func @f() -> tensor<1000000x1000000xf32> {\n"
       "  %e = tensor.empty() : tensor<1000000x1000000xf32>\n  %c = arith.constant 1.0 : f32\n"
       "  %f = linalg.fill ins(%c : f32) outs(%e : tensor<1000000x1000000xf32>)"
       " -> tensor<1000000x1000000xf32>\n  return %f : tensor<1000000x1000000xf32>\n}\n",
       "result 0 of 'f' (tensor<1000000x1000000xf32>) needs 4000000000000 bytes, more than this "
       "machine's memory and swap"},
      {"intermediate_larger_than_memory",
       "func.func @f(%a: " + t + ") -> " + t +
           " {\n"
           "  %e = tensor.empty() : tensor<1000000x1000000xf32>\n  %c = arith.constant 1.0 : f32\n"
           "  %f = linalg.fill ins(%c : f32) outs(%e : tensor<1000000x1000000xf32>)"
           " -> tensor<1000000x1000000xf32>\n"
           "  %s = tensor.extract_slice %f[0, 0] [1, 4] [1, 1] : tensor<1000000x1000000xf32> to " +
           t + "\n  %r = arith.addf %s, %a : " + t + "\n  return %r : " + t + "\n}\n",
       "'f': the program could not allocate 4000000000064 bytes for an intermediate buffer"},
  };
  for (const Case& c : cases) {
    std::string file = dir.file(c.name + ".mlir");
    std::ofstream(file, std::ios::binary) << c.text;
    ProcessResult r = kiln({"--cache-dir", dir.file("cache"), "run", file, "--fill", "ones"});
    EXPECT_EQ(r.exit_code, 1) << c.name << ": " << r.err.substr(0, 300);
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.name;
    if (c.name.rfind("deep", 0) == 0) {
      EXPECT_THAT(r.err, HasSubstr("nested deeper than 512 levels")) << c.name;
    }
  }
  // Only the three programs that compiled (and failed at run time) are cached.
  ProcessResult listing = kiln({"--cache-dir", dir.file("cache"), "cache", "ls"});
  EXPECT_EQ(listing.exit_code, 0);
  EXPECT_EQ(std::count(listing.out.begin(), listing.out.end(), '\n'), 3) << listing.out;
}

// Bytecode cannot be depth-checked before MLIR reads it, so the nesting bound is also applied to
// the parsed module, before any pass recurses through it.
TEST(CliErrorsTest, DeeplyNestedBytecodeIsRefusedBeforeThePasses) {
  TempDir dir;
  const int depth = 600;
  const std::string t = "tensor<4xf32>";
  std::string text = "func.func @f(%a: " + t + ") -> " + t + " {\n";
  for (int k = depth; k >= 1; --k)
    text += "%r" + std::to_string(k) + " = scf.execute_region -> " + t + " {\n";
  text += "scf.yield %a : " + t + "\n}\n";
  for (int k = 1; k < depth; ++k) text += "scf.yield %r" + std::to_string(k) + " : " + t + "\n}\n";
  text += "return %r" + std::to_string(depth) + " : " + t + "\n}\n";
  std::string source = dir.file("deep.mlir"), bytecode = dir.file("deep.mlirbc");
  std::ofstream(source) << text;
  ProcessResult opt = run_process({MLIR_OPT, source, "--emit-bytecode", "-o", bytecode});
  ASSERT_EQ(opt.exit_code, 0) << opt.err;

  ProcessResult from_text = kiln({"run", source, "--no-cache", "--fill", "ones"});
  EXPECT_EQ(from_text.exit_code, 1);
  EXPECT_THAT(from_text.err, HasSubstr("nested deeper than 512 levels"));
  ProcessResult from_bytecode = kiln({"run", bytecode, "--no-cache", "--fill", "ones"});
  EXPECT_EQ(from_bytecode.exit_code, 1) << from_bytecode.err;
  EXPECT_THAT(from_bytecode.err,
              HasSubstr("error: operations nested deeper than 512 levels, more than kiln "
                        "compiles safely"));
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

// Buffers are freed after their last use, not when the entry returns: a chain of six products
// whose 4 MiB results are each read only by the next never holds more than two of them, where
// the same program built without the step (kiln-free-after-last-use) holds all six at the end.
TEST(CliTest, IntermediatesAreFreedAfterTheirLastUse) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer holds freed memory in quarantine instead of reusing it";
#endif
  TempDir dir;
  auto peak_mib = [&](const std::vector<std::string>& extra) {
    std::string kx = dir.file("chain" + std::to_string(extra.size()) + ".kx");
    std::vector<std::string> compile = {"compile", program_path("product_chain.mlir"), "-o", kx};
    compile.insert(compile.end(), extra.begin(), extra.end());
    ProcessResult compiled = kiln(compile);
    EXPECT_EQ(compiled.exit_code, 0) << compiled.err;
    ProcessResult run = kiln({"run", kx, "-e", "chain", "--fill", "random", "--json"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return nlohmann::json::parse(run.out)["peak_memory_mib"].get<double>();
  };
  double early = peak_mib({});
  double at_return = peak_mib({"--disable-pass", "kiln-free-after-last-use"});
  // Four 4 MiB intermediates fewer alive at once (16 MiB; some slack for the allocator).
  EXPECT_LE(early + 10, at_return) << "freed early: " << early << " MiB, at return: " << at_return;
}

// `--repeat N --json` reports the median and fastest run for a serialised executable (and an MLIR
// program) as it does for an ONNX model: benchmarks of .kx files read these fields.
TEST(CliTest, RepeatedRunsOfAnExecutableReportMedianAndMinimum) {
  TempDir dir;
  std::string kx = dir.file("chain.kx");
  ProcessResult compiled = kiln({"compile", program_path("product_chain.mlir"), "-o", kx});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  ProcessResult run = kiln({"run", kx, "-e", "chain", "--fill", "ones", "--repeat", "4", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json timings = nlohmann::json::parse(run.out)["timings_ms"];
  ASSERT_TRUE(timings.contains("run_median")) << run.out;
  ASSERT_TRUE(timings.contains("run_min")) << run.out;
  EXPECT_GT(timings["run_median"].get<double>(), 0);
  EXPECT_LE(timings["run_min"].get<double>(), timings["run_median"].get<double>());
}

// `kiln flags` lists every flag with the value in effect and where it came from.
TEST(FlagsCommandTest, ListsEveryFlagWithItsValueAndSource) {
  ProcessResult r = run_process({kiln_binary(), "--set", "KILN_LOG_COMPILES=true", "flags"},
                                {"KILN_CACHE_WRITER=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const config::FlagInfo& f : config::all_flags())
    EXPECT_THAT(r.out, HasSubstr(f.name + " = ")) << f.name << " is not listed";
  EXPECT_THAT(r.out, HasSubstr("KILN_LOG_COMPILES = true (set)"));
  EXPECT_THAT(r.out, HasSubstr("KILN_CACHE_WRITER = 3 (environment)"));
  EXPECT_THAT(r.out, HasSubstr("KILN_ENABLE_COMPILATION_CACHE = true (default)"));
  EXPECT_THAT(r.out, HasSubstr("integer from -1 to 65535"));
  EXPECT_THAT(r.out, HasSubstr("in the cache key: as a flag"));
  EXPECT_THAT(r.out, HasSubstr("in the cache key: through the compile options"));
}

// docs/FLAGS.md is what `kiln flags --markdown` prints: regenerate it when a flag changes.
TEST(FlagsCommandTest, DocsFlagsMdIsGeneratedFromTheRegistry) {
  ProcessResult r = run_process({kiln_binary(), "flags", "--markdown"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream doc(std::string(KILN_TEST_PROGRAMS_DIR) + "/../../docs/FLAGS.md");
  ASSERT_TRUE(doc) << "docs/FLAGS.md is missing";
  std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, r.out) << "regenerate: build/bin/kiln flags --markdown > docs/FLAGS.md";
}

}  // namespace
}  // namespace kiln::testing

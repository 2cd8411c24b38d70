// What LLVM cannot do is an error, never the end of the process: fatal errors and crashes inside
// LLVM become compile errors (nothing cached, the next compile in the same process works), LLVM's
// error diagnostics become errors instead of exiting, and the LLVM features that used to abort
// (inline assembly, matrix intrinsics) are compiled.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/compile.h"
#include "test_support.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

// A compile LLVM abandons mid-way leaks what it had allocated (LLVM's state past a fatal error
// cannot be unwound); leak checking ignores allocations made while this is alive.
#if defined(__SANITIZE_ADDRESS__)
class [[maybe_unused]] AbandonedCompileLeaksAllowed {
 public:
  AbandonedCompileLeaksAllowed() { __lsan_disable(); }
  ~AbandonedCompileLeaksAllowed() { __lsan_enable(); }
};
#else
class [[maybe_unused]] AbandonedCompileLeaksAllowed {};
#endif
// The same for a child process: the kiln command line under AddressSanitizer.
const std::vector<std::string> kNoLeakCheck = {"ASAN_OPTIONS=detect_leaks=0"};

CompileOptions for_cpu(std::string cpu) {
  CompileOptions options;
  options.target.cpu = std::move(cpu);
  return options;
}

Result<ModuleSource> source_of(const std::string& name) {
  return ModuleSource::from_file(program_path("llvm/" + name));
}

TEST(CompilerFailureTest, LlvmFatalErrorIsACompileErrorAndTheSameProcessCompilesOn) {
  auto avx512 = source_of("avx512_intrinsic.mlir");
  ASSERT_TRUE(avx512.ok()) << avx512.status().to_string();
  for (int attempt = 0; attempt < 2; ++attempt) {
    Result<std::string> failed = internal_error("not run");
    {
      [[maybe_unused]] AbandonedCompileLeaksAllowed leaks;
      // A CPU without AVX-512: LLVM's instruction selection gives up with a fatal error.
      failed = shared_client().compile_serialized(*avx512, for_cpu("x86-64"));
    }
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), StatusCode::kCompileError);
    EXPECT_THAT(failed.status().message(), HasSubstr("avx512_intrinsic.mlir: error: LLVM failed"));
    EXPECT_THAT(failed.status().message(), HasSubstr("Do not know how to split"));
    EXPECT_THAT(failed.status().message(), HasSubstr("Nothing was cached"));
    // The same compiler, in the same process, still compiles and the code still runs.
    auto matmul = ModuleSource::from_file(program_path("matmul_odd.mlir"));
    ASSERT_TRUE(matmul.ok());
    auto executable = shared_client().compile(*matmul, {});
    ASSERT_TRUE(executable.ok()) << executable.status().to_string();
    Buffer a = random_f32({37, 53}, 1), b = random_f32({53, 29}, 2);
    auto product = (*executable)->execute("matmul", {a, b});
    ASSERT_TRUE(product.ok()) << product.status().to_string();
    double want = 0;
    for (int k = 0; k < 53; ++k) want += double(a.as<float>()[k]) * b.as<float>()[k * 29];
    EXPECT_NEAR((*product)[0].as<float>()[0], want, 1e-4);
  }
  // The host has AVX-512 here? Then the same program compiles for it.
  auto host = shared_client().target();
  ASSERT_TRUE(host.ok());
  if (host->features.find("+avx512f") != std::string::npos) {
    auto native = shared_client().compile(*avx512, {});
    EXPECT_TRUE(native.ok()) << native.status().to_string();
  }
}

TEST(CompilerFailureTest, CommandLineExitsOneAndCachesNothing) {
  TempDir dir;
  ProcessResult failed = run_process(
      {kiln_binary(), "--cache-dir", dir.file("cache"), "compile",
       program_path("llvm/avx512_intrinsic.mlir"), "--target-cpu", "x86-64", "--fill-cache"},
      kNoLeakCheck);
  EXPECT_EQ(failed.exit_code, 1) << failed.err;
  EXPECT_THAT(failed.err, HasSubstr("LLVM failed while compiling this module"));
  EXPECT_THAT(failed.err, ::testing::Not(HasSubstr("PLEASE submit a bug report")));
  ProcessResult stats =
      run_process({kiln_binary(), "--cache-dir", dir.file("cache"), "cache", "stats"});
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_THAT(stats.out, ::testing::ContainsRegex("entries +0\n"));
  EXPECT_THAT(stats.out, ::testing::ContainsRegex("writes +0\n"));
}

TEST(CompilerFailureTest, InlineAssemblyRunsAtEveryEffortLevel) {
  for (const char* level : {"O0", "O2"}) {
    ProcessResult run = run_process({kiln_binary(), "run", program_path("llvm/inline_asm.mlir"),
                                     "--entry-point-result=void", "--no-cache", "-O", level});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.out, "42\n") << "at " << level;
  }
}

TEST(CompilerFailureTest, InlineAssemblyTheAssemblerRejectsIsAnErrorNamingTheInstruction) {
  auto bad = source_of("bad_inline_asm.mlir");
  ASSERT_TRUE(bad.ok());
  auto failed = shared_client().compile(*bad, {});
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("LLVM rejected the program"));
  EXPECT_THAT(failed.status().message(), HasSubstr("invalid instruction mnemonic"));
  auto good = source_of("inline_asm.mlir");
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(shared_client().compile(*good, {}).ok());
}

TEST(CompilerFailureTest, MatrixIntrinsicsAreLoweredAtEveryEffortLevel) {
  for (const char* level : {"O0", "O2"}) {
    ProcessResult run =
        run_process({kiln_binary(), "run", program_path("llvm/matrix_multiply.mlir"),
                     "--entry-point-result=void", "--no-cache", "-O", level});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.out, "( 6, 8, 5, 8 )\n") << "at " << level;
  }
}

}  // namespace
}  // namespace kiln::testing

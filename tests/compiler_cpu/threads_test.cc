// Compiled programs run their parallel loops on kiln's thread pool: the same executable at any
// KILN_NUM_THREADS, from several application threads at once, with the same results, and with
// workers that sleep when there is nothing to do.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "kiln/config.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

constexpr const char* kProgram = "parallel_kernels.mlir";

struct Case {
  const char* entry;
  std::vector<std::vector<int64_t>> input_shapes;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> list = {
      {"matmul", {{301, 203}, {203, 259}}},
      {"matmul_few_rows", {{96, 40}, {40, 1100}}},
      {"matmul_narrow", {{49, 160}, {160, 150}}},
      {"batch_matmul", {{3, 130, 70}, {3, 70, 190}}},
      {"map", {{517, 1031}}},
      {"row_sums", {{777, 513}}},
  };
  return list;
}

std::vector<Buffer> inputs_for(const Case& c, uint32_t seed) {
  std::vector<Buffer> inputs;
  for (const auto& shape : c.input_shapes) inputs.push_back(random_f32(shape, seed++));
  return inputs;
}

bool same_bytes(const Buffer& a, const Buffer& b) {
  return a.shape() == b.shape() && a.byte_size() == b.byte_size() &&
         std::memcmp(a.data(), b.data(), a.byte_size()) == 0;
}

// What each entry computes, in double precision.
std::vector<double> reference(const Case& c, const std::vector<Buffer>& in) {
  std::string entry = c.entry;
  std::vector<double> out;
  if (entry.rfind("matmul", 0) == 0 || entry == "batch_matmul") {
    bool batch = entry == "batch_matmul";
    int64_t batches = batch ? in[0].shape()[0] : 1;
    int64_t m = in[0].shape()[batch ? 1 : 0], k = in[0].shape()[batch ? 2 : 1];
    int64_t n = in[1].shape()[batch ? 2 : 1];
    const float* a = in[0].as<float>();
    const float* b = in[1].as<float>();
    for (int64_t p = 0; p < batches; ++p)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t q = 0; q < k; ++q)
            s += double(a[(p * m + i) * k + q]) * b[(p * k + q) * n + j];
          out.push_back(s);
        }
  } else if (entry == "map") {
    const float* x = in[0].as<float>();
    for (int64_t i = 0; i < in[0].element_count(); ++i) out.push_back(std::tanh(x[i]) * x[i]);
  } else {
    const float* x = in[0].as<float>();
    int64_t rows = in[0].shape()[0], cols = in[0].shape()[1];
    for (int64_t i = 0; i < rows; ++i) {
      double s = 0;
      for (int64_t j = 0; j < cols; ++j) s += x[i * cols + j];
      out.push_back(s);
    }
  }
  return out;
}

void check_every_thread_count(EffortLevel level);

class ThreadsTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(config::set("KILN_NUM_THREADS", "0").ok()); }
};

TEST_F(ThreadsTest, EveryThreadCountGivesTheSameBitsAsOneThread) {
  // O1 runs linalg's own multi-dimensional loops in parallel; O2 the tiled contractions.
  for (EffortLevel level : {EffortLevel::kO1, EffortLevel::kO2}) {
    SCOPED_TRACE(level == EffortLevel::kO1 ? "O1" : "O2");
    check_every_thread_count(level);
  }
}

void check_every_thread_count(EffortLevel level) {
  auto exe = compile_file(program_path(kProgram), level);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  for (const Case& c : cases()) {
    std::vector<Buffer> inputs = inputs_for(c, 7);
    ASSERT_TRUE(config::set("KILN_NUM_THREADS", "1").ok());
    auto one = (*exe)->execute(c.entry, inputs);
    ASSERT_TRUE(one.ok()) << c.entry << ": " << one.status().to_string();
    expect_close((*one)[0], reference(c, inputs), 1e-3);
    for (const char* threads : {"2", "3", "5"}) {
      ASSERT_TRUE(config::set("KILN_NUM_THREADS", threads).ok());
      auto many = (*exe)->execute(c.entry, inputs);
      ASSERT_TRUE(many.ok()) << c.entry << ": " << many.status().to_string();
      // Each result element is computed by one task, in the same order: not one bit differs.
      EXPECT_TRUE(same_bytes((*one)[0], (*many)[0]))
          << c.entry << " at " << threads << " threads differs from one thread";
    }
  }
}

TEST_F(ThreadsTest, SeveralApplicationThreadsRunOneExecutableAtOnce) {
  auto exe = compile_file(program_path(kProgram), EffortLevel::kO2);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  ASSERT_TRUE(config::set("KILN_NUM_THREADS", "3").ok());
  // Expected results first, one call at a time.
  std::vector<std::vector<Buffer>> inputs;
  std::vector<Buffer> expected;
  for (size_t i = 0; i < cases().size(); ++i) {
    inputs.push_back(inputs_for(cases()[i], 100 + 10 * static_cast<uint32_t>(i)));
    auto out = (*exe)->execute(cases()[i].entry, inputs.back());
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    expected.push_back((*out)[0]);
  }
  constexpr int kCallers = 4;
  constexpr int kCallsEach = 6;
  std::vector<int> mismatches(kCallers, 0);
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t)
    callers.emplace_back([&, t] {
      for (int call = 0; call < kCallsEach; ++call) {
        size_t which = static_cast<size_t>(t + call) % cases().size();
        auto out = (*exe)->execute(cases()[which].entry, inputs[which]);
        if (!out.ok() || !same_bytes((*out)[0], expected[which])) ++mismatches[t];
      }
    });
  for (std::thread& t : callers) t.join();
  for (int t = 0; t < kCallers; ++t) EXPECT_EQ(mismatches[t], 0) << "caller " << t;
}

// Runs `entry` of test program `name` at one thread, checks it against `want`, then at 2, 3 and
// 5 threads against one thread's bits.
void expect_one_threads_bits(const std::string& name, const std::string& entry,
                             const std::vector<Buffer>& inputs, const std::vector<double>& want,
                             double tolerance) {
  auto exe = compile_file(program_path(name), EffortLevel::kO2);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  ASSERT_TRUE(config::set("KILN_NUM_THREADS", "1").ok());
  auto one = (*exe)->execute(entry, inputs);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  expect_close((*one)[0], want, tolerance);
  for (const char* threads : {"2", "3", "5"}) {
    ASSERT_TRUE(config::set("KILN_NUM_THREADS", threads).ok());
    auto many = (*exe)->execute(entry, inputs);
    ASSERT_TRUE(many.ok()) << many.status().to_string();
    EXPECT_TRUE(same_bytes((*one)[0], (*many)[0])) << threads << " threads differ from one";
  }
}

// Eight elementwise kernels, each too small to split, each writing its own slice of the result
// (independent_slices.mlir), run as two shares of four, one per thread: one parallel function
// for them all (none before), and every thread count gives one thread's bits.
TEST_F(ThreadsTest, SmallIndependentKernelsRunAsTwoShares) {
  std::string lowered = compiled_stage("independent_slices.mlir", "3-llvm-dialect.mlir");
  EXPECT_NE(lowered.find("@parallel_compute_fn("), std::string::npos)
      << "the kernels stayed on one thread";
  EXPECT_EQ(lowered.find("@parallel_compute_fn_"), std::string::npos)
      << "the kernels should be one parallel loop of two shares, not several";

  std::vector<Buffer> inputs = {random_f32({8, 64, 600}, 11)};
  const float* x = inputs[0].as<float>();
  constexpr int64_t kSlice = 64 * 600;
  std::vector<double> want;
  for (int64_t p = 0; p < 8; ++p)
    for (int64_t i = 0; i < kSlice; ++i)
      want.push_back(double(x[p * kSlice + i]) * double(p + 1) - x[(7 - p) * kSlice + i]);
  expect_one_threads_bits("independent_slices.mlir", "slices", inputs, want, 1e-5);
}

// Eight small products in a chain, each a single tile reading the one before
// (dependent_products.mlir): never shared out, and right at every thread count.
TEST_F(ThreadsTest, SmallKernelsThatReadEachOthersResultsStayInOrder) {
  std::string lowered = compiled_stage("dependent_products.mlir", "3-llvm-dialect.mlir");
  EXPECT_NE(lowered.find("llvm.func"), std::string::npos);
  EXPECT_EQ(lowered.find("@parallel_compute_fn"), std::string::npos)
      << "a product ran beside the one whose result it reads";

  std::vector<Buffer> inputs = {random_f32({48, 48}, 21), random_f32({48, 48}, 22)};
  // Weights of variance 1/48 (uniform in [-1/4, 1/4)): each step's 48 terms keep the values' scale.
  float* w = inputs[1].as<float>();
  for (int64_t i = 0; i < 48 * 48; ++i) w[i] *= 0.25f;
  std::vector<double> y(inputs[0].as<float>(), inputs[0].as<float>() + 48 * 48);
  for (int step = 0; step < 8; ++step) {
    std::vector<double> next(48 * 48, 0.0);
    for (int i = 0; i < 48; ++i)
      for (int k = 0; k < 48; ++k)
        for (int j = 0; j < 48; ++j) next[i * 48 + j] += y[i * 48 + k] * w[k * 48 + j];
    y = std::move(next);
  }
  expect_one_threads_bits("dependent_products.mlir", "chain", inputs, y, 1e-4);
}

int thread_count() {
  int count = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* entry = readdir(dir))
    if (entry->d_name[0] != '.') ++count;
  closedir(dir);
  return count;
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

TEST_F(ThreadsTest, ThePoolHasTheAskedThreadsAndTheySleepWhenIdle) {
  auto exe = compile_file(program_path(kProgram), EffortLevel::kO2);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  const Case& c = cases()[0];
  std::vector<Buffer> inputs = inputs_for(c, 3);
  int before = thread_count();
  ASSERT_TRUE(config::set("KILN_NUM_THREADS", "4").ok());
  ASSERT_TRUE((*exe)->execute(c.entry, inputs).ok());
  // The calling thread is one of the four: three workers at most were started for the run.
  int during = thread_count();
  EXPECT_GE(during, 3);
  EXPECT_LE(during - before, 3);
  // Idle workers wait on a condition variable: half a second of idleness costs no CPU.
  double cpu_before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_LT(process_cpu_seconds() - cpu_before, 0.05);
}

TEST_F(ThreadsTest, TheThreadCountIsNotPartOfTheKeyAndBadCountsAreRefused) {
  TempDir cache;
  std::string program = program_path(kProgram);
  ProcessResult first =
      run_process({kiln_binary(), "--cache-dir", cache.path(), "--set", "KILN_NUM_THREADS=1", "run",
                   program, "--entry", "map", "--fill", "ones"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ProcessResult second =
      run_process({kiln_binary(), "--cache-dir", cache.path(), "--set", "KILN_NUM_THREADS=2", "run",
                   program, "--entry", "map", "--fill", "ones"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("cache: hit"), std::string::npos) << second.out;
  // The same numbers either way.
  auto result_line = [](const std::string& out) { return out.substr(0, out.find('\n')); };
  EXPECT_EQ(result_line(first.out), result_line(second.out));

  ProcessResult bad = run_process({kiln_binary(), "--set", "KILN_NUM_THREADS=-3", "run", program,
                                   "--entry", "map", "--fill", "ones"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("KILN_NUM_THREADS"), std::string::npos) << bad.err;
  EXPECT_FALSE(config::set("KILN_NUM_THREADS", "many").ok());
}

// A task may still be leaving its coroutine when the run that spawned it returns: unloading the
// executable right after a run must wait for it (under load this crashed at exit).
TEST_F(ThreadsTest, AnExecutableUnloadedRightAfterARunLeavesNoTaskInItsCode) {
  auto exe = compile_file(program_path(kProgram), EffortLevel::kO2);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  std::string bytes = (*exe)->serialize();
  ASSERT_TRUE(config::set("KILN_NUM_THREADS", "3").ok());
  const Case& c = cases()[2];
  std::vector<Buffer> inputs = inputs_for(c, 9);
  auto want = (*exe)->execute(c.entry, inputs);
  ASSERT_TRUE(want.ok());
  for (int round = 0; round < 30; ++round) {
    auto loaded = Executable::deserialize(bytes);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    auto got = (*loaded)->execute(c.entry, inputs);
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(same_bytes((*got)[0], (*want)[0]));
  }  // each loaded copy is unloaded here, its tasks possibly still returning
}

long minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Temporaries and results are malloc'd on every run; freed blocks must come back from the heap,
// not from fresh pages the kernel faults in each time (glibc maps blocks over its mmap threshold).
TEST_F(ThreadsTest, RepeatedRunsReuseTheirMemoryInsteadOfFaultingItIn) {
#if defined(__SANITIZE_ADDRESS__)
  // The property is glibc malloc's; AddressSanitizer replaces it (and quarantines freed blocks).
  GTEST_SKIP() << "AddressSanitizer's allocator is not glibc's";
#endif
  auto exe = compile_file(program_path(kProgram), EffortLevel::kO2);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  ASSERT_TRUE(config::set("KILN_NUM_THREADS", "1").ok());
  const Case& c = cases()[2];  // map: a 2 MiB result
  std::vector<Buffer> inputs = inputs_for(c, 5);
  for (int warm = 0; warm < 3; ++warm) ASSERT_TRUE((*exe)->execute(c.entry, inputs).ok());
  long before = minor_page_faults();
  constexpr int kRuns = 10;
  for (int run = 0; run < kRuns; ++run) ASSERT_TRUE((*exe)->execute(c.entry, inputs).ok());
  long per_run = (minor_page_faults() - before) / kRuns;
  // A fresh 2 MiB block would be 512 faults per run.
  EXPECT_LT(per_run, 64) << per_run << " page faults per run";
}

}  // namespace
}  // namespace kiln::testing

// Shapes of real programs that once went wrong: model-shaped contractions that made the O2/O3
// tiling step run forever, and entries that wrote their result into the caller's input.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "test_support.h"

namespace kiln::testing {
namespace {

// out[i][j] = sum_p a[i][p] * b[p][j] (+ acc[i][j]), row-major, in double precision.
std::vector<double> matmul(const float* a, const float* b, int64_t m, int64_t k, int64_t n,
                           const float* acc = nullptr) {
  std::vector<double> c(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = acc ? acc[i * n + j] : 0.0;
      for (int64_t p = 0; p < k; ++p) s += double(a[i * k + p]) * b[p * n + j];
      c[i * n + j] = s;
    }
  return c;
}

class ModelShapedTest : public ::testing::TestWithParam<EffortLevel> {
 protected:
  std::vector<Buffer> compile_and_run(const std::string& program,
                                      const std::vector<Buffer>& inputs) {
    auto start = std::chrono::steady_clock::now();
    auto exe = compile_file(program_path(program), GetParam());
    EXPECT_TRUE(exe.ok()) << exe.status().to_string();
    if (!exe.ok()) return {};
    // Not a speed check: a record of the compile time next to the result, for regressions.
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    RecordProperty("compile_seconds", std::to_string(seconds));
    auto out = (*exe)->execute("main", inputs);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? *out : std::vector<Buffer>{};
  }
};

TEST_P(ModelShapedTest, ReshapedArgumentFeedingBatchMatmul) {
  Buffer a = random_f32({16, 8}, 1), b = random_f32({1, 8, 4}, 2);
  auto out = compile_and_run("model_shaped/reshape_batch_matmul.mlir", {a, b});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 16, 4}));
  expect_close(out[0], matmul(a.as<float>(), b.as<float>(), 16, 8, 4));
}

TEST_P(ModelShapedTest, DynamicReshapeFallsBackToLoops) {
  Buffer a = random_f32({21, 8}, 3), b = random_f32({1, 8, 4}, 4);
  auto out = compile_and_run("model_shaped/dynamic_reshape_batch_matmul.mlir", {a, b});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 21, 4}));
  expect_close(out[0], matmul(a.as<float>(), b.as<float>(), 21, 8, 4));
}

TEST_P(ModelShapedTest, LenetShapedFlattenIntoFullyConnected) {
  Buffer x = random_f32({1, 1, 12, 12}, 5), k = random_f32({4, 1, 3, 3}, 6),
         w = random_f32({100, 10}, 7);
  // Reference: 3x3 convolution, ReLU, 2x2 max pooling, flatten, fully connected.
  std::vector<float> pooled(100);
  for (int c = 0; c < 4; ++c)
    for (int py = 0; py < 5; ++py)
      for (int px = 0; px < 5; ++px) {
        double best = -1e30;
        for (int oy = 2 * py; oy < 2 * py + 2; ++oy)
          for (int ox = 2 * px; ox < 2 * px + 2; ++ox) {
            double s = 0;
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx)
                s += double(x.as<float>()[(oy + ky) * 12 + ox + kx]) *
                     k.as<float>()[c * 9 + ky * 3 + kx];
            best = std::max(best, std::max(s, 0.0));
          }
        pooled[c * 25 + py * 5 + px] = float(best);
      }
  auto out = compile_and_run("model_shaped/lenet_shaped.mlir", {x, k, w});
  ASSERT_EQ(out.size(), 1u);
  expect_close(out[0], matmul(pooled.data(), w.as<float>(), 1, 100, 10));
}

INSTANTIATE_TEST_SUITE_P(EffortLevels, ModelShapedTest,
                         ::testing::Values(EffortLevel::kO1, EffortLevel::kO2, EffortLevel::kO3),
                         [](const auto& info) {
                           return std::string(effort_level_name(info.param));
                         });

class ArgumentsNeverWrittenTest : public ::testing::TestWithParam<EffortLevel> {};

TEST_P(ArgumentsNeverWrittenTest, AccumulatingEntryLeavesItsInputAlone) {
  auto exe = compile_file(program_path("accumulate_into_argument.mlir"), GetParam());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  Buffer a = random_f32({4, 4}, 8), b = random_f32({4, 4}, 9), acc = random_f32({4, 4}, 10);
  std::vector<float> acc_before(acc.as<float>(), acc.as<float>() + 16);
  std::vector<double> want = matmul(a.as<float>(), b.as<float>(), 4, 4, 4, acc_before.data());
  for (int run = 0; run < 3; ++run) {
    auto out = (*exe)->execute("main", {a, b, acc});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    SCOPED_TRACE("run " + std::to_string(run));
    expect_close((*out)[0], want);
    EXPECT_EQ(std::memcmp(acc.as<float>(), acc_before.data(), 16 * sizeof(float)), 0)
        << "the caller's accumulator was overwritten";
  }
}

INSTANTIATE_TEST_SUITE_P(EffortLevels, ArgumentsNeverWrittenTest,
                         ::testing::Values(EffortLevel::kO0, EffortLevel::kO2),
                         [](const auto& info) {
                           return std::string(effort_level_name(info.param));
                         });

TEST(ArgumentsNeverWrittenCli, RepeatedRunsGiveTheSameResult) {
  TempDir dir;
  ProcessResult r =
      run_process({kiln_binary(), "run", "--no-cache", "--fill", "ones", "--repeat", "3",
                   "--output", dir.file("out.npy"), program_path("accumulate_into_argument.mlir")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // ones(4x4) @ ones(4x4) + ones = 5 everywhere, however many times it ran.
  EXPECT_NE(r.out.find("[5, 5, 5, 5, 5, 5,"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kiln::testing

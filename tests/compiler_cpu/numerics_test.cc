// Numerical results of compiled programs against references computed here with plain loops in
// double precision, at every effort level.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "test_support.h"

namespace kiln::testing {
namespace {

Buffer random_i32(std::vector<int64_t> shape, uint32_t seed) {
  Buffer b(DType::kI32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(-50, 50);
  for (int64_t i = 0; i < b.element_count(); ++i) b.as<int32_t>()[i] = dist(rng);
  return b;
}

class NumericsTest : public ::testing::TestWithParam<EffortLevel> {
 public:
  std::vector<Buffer> run(const std::string& program, const std::string& entry,
                          const std::vector<Buffer>& inputs) {
    auto exe = compile_file(program_path(program), GetParam());
    EXPECT_TRUE(exe.ok()) << exe.status().to_string();
    if (!exe.ok()) return {};
    EXPECT_EQ((*exe)->info().effort_level, effort_level_name(GetParam()));
    auto out = (*exe)->execute(entry, inputs);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? *out : std::vector<Buffer>{};
  }
};

std::vector<double> matmul_reference(const Buffer& a, const Buffer& b, int64_t m, int64_t k,
                                     int64_t n) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += double(a.as<float>()[i * k + p]) * b.as<float>()[p * n + j];
      c[i * n + j] = s;
    }
  return c;
}

// Runs `entry` of `program` on random (m, k) and (k, n) operands and checks its product, which
// the entry returns in `shape` (the same elements, possibly reshaped).
void expect_product(NumericsTest& test, const std::string& program, const std::string& entry,
                    int64_t m, int64_t k, int64_t n, std::vector<int64_t> shape, uint32_t seed) {
  Buffer a = random_f32({m, k}, seed), b = random_f32({k, n}, seed + 1);
  auto out = test.run(program, entry, {a, b});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), shape);
  expect_close(out[0], matmul_reference(a, b, m, k, n), 1e-4);
}

TEST_P(NumericsTest, MatmulOfOddSizes) {
  expect_product(*this, "matmul_odd.mlir", "matmul", 37, 53, 29, {37, 29}, 1);
}

TEST_P(NumericsTest, MatmulWithRegisterRowsFittedToFewRows) {
  expect_product(*this, "matmul_fitted_rows.mlir", "rows49", 49, 70, 45, {49, 45}, 3);
  expect_product(*this, "matmul_fitted_rows.mlir", "rows30", 30, 70, 45, {30, 45}, 5);
  expect_product(*this, "matmul_fitted_rows.mlir", "rows25", 25, 70, 45, {25, 45}, 7);
}

TEST_P(NumericsTest, MatmulOfOneCacheTile) {
  expect_product(*this, "matmul_one_tile.mlir", "rows49", 49, 70, 64, {49, 64}, 17);
  expect_product(*this, "matmul_one_tile.mlir", "rows40", 40, 24, 96, {40, 96}, 19);
}

// A product no larger than one cache tile is tiled by its own size: with the tile's size left as
// min(tile, size - offset), the register tiles could not be seen to be whole and every FMA was
// masked (a select after each one; resnet18's 49-row products, mobilenet_v2's 48-row tiles).
TEST(ProductRegisterTiles, AreUnmaskedWhenTheyDivideTheProduct) {
  std::string vectorized = compiled_stage("matmul_one_tile.mlir", "2-vectorized.mlir");
  EXPECT_NE(vectorized.find("vector.fma"), std::string::npos) << "no tiled product";
  EXPECT_EQ(vectorized.find("arith.select"), std::string::npos) << vectorized.substr(0, 4000);
  EXPECT_EQ(vectorized.find("vector.create_mask"), std::string::npos) << vectorized.substr(0, 4000);
}

TEST_P(NumericsTest, MatmulWhoseResultIsReshaped) {
  expect_product(*this, "matmul_reshaped.mlir", "matmul_reshaped", 70, 300, 150, {7, 10, 150}, 11);
}

TEST_P(NumericsTest, MatmulWithOneReductionBlock) {
  expect_product(*this, "matmul_reshaped.mlir", "short_reduction", 70, 20, 150, {7, 10, 150}, 13);
}

// A product's zero fill goes into its tiles whether it has one reduction block or several
// (matmul_reshaped.mlir: 300 deep, three blocks of 128): each tile starts from zero on its first
// block, and no pass over the result zeroes it before the product (at two threads that pass ran
// on the calling thread alone, the worker then reading its zeros from the other core).
TEST(ProductFills, GoIntoTheFirstReductionBlock) {
  std::string vectorized = compiled_stage("matmul_reshaped.mlir", "2-vectorized.mlir");
  EXPECT_NE(vectorized.find("vector.fma"), std::string::npos) << "no tiled product";
  EXPECT_EQ(vectorized.find("linalg.fill"), std::string::npos) << vectorized.substr(0, 3000);
}

// Products computed tile by tile with their epilogue (matmul_epilogue.mlir: bias and ReLU, a
// residual add after three reduction blocks) start each tile from zero too: no tile is zeroed
// before its product.
TEST(ProductFills, GoIntoEpilogueFusedTiles) {
  std::string vectorized = compiled_stage("matmul_epilogue.mlir", "2-vectorized.mlir");
  EXPECT_NE(vectorized.find("scf.forall"), std::string::npos) << "no epilogue-fused product";
  EXPECT_EQ(vectorized.find("linalg.fill"), std::string::npos) << vectorized.substr(0, 3000);
}

TEST_P(NumericsTest, TosaMlp) {
  Buffer x = random_f32({1, 8, 64}, 3), w1 = random_f32({1, 64, 128}, 4),
         b1 = random_f32({1, 1, 128}, 5), w2 = random_f32({1, 128, 10}, 6),
         b2 = random_f32({1, 1, 10}, 7);
  auto out = run("../../examples/mlp.mlir", "main", {x, w1, b1, w2, b2});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> h = matmul_reference(x, w1, 8, 64, 128);
  Buffer relu(DType::kF32, {8, 128});
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 128; ++j)
      relu.as<float>()[i * 128 + j] = float(std::max(0.0, h[i * 128 + j] + b1.as<float>()[j]));
  std::vector<double> o = matmul_reference(relu, w2, 8, 128, 10);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 10; ++j) o[i * 10 + j] += b2.as<float>()[j];
  expect_close(out[0], o, 1e-4);
}

TEST_P(NumericsTest, Conv2d) {
  Buffer x = random_f32({2, 10, 9, 3}, 8), w = random_f32({3, 3, 3, 8}, 9);
  auto out = run("conv2d.mlir", "conv", {x, w});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> want(2 * 8 * 7 * 8, 0.0);
  for (int n = 0; n < 2; ++n)
    for (int oh = 0; oh < 8; ++oh)
      for (int ow = 0; ow < 7; ++ow)
        for (int f = 0; f < 8; ++f) {
          double s = 0;
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw)
              for (int c = 0; c < 3; ++c)
                s += double(x.as<float>()[((n * 10 + oh + kh) * 9 + ow + kw) * 3 + c]) *
                     w.as<float>()[((kh * 3 + kw) * 3 + c) * 8 + f];
          want[((n * 8 + oh) * 7 + ow) * 8 + f] = s;
        }
  expect_close(out[0], want, 1e-4);
}

TEST_P(NumericsTest, Reductions) {
  Buffer x = random_f32({13, 17}, 10);
  auto out = run("reductions.mlir", "reductions", {x});
  ASSERT_EQ(out.size(), 2u);
  std::vector<double> sums(13, 0.0), maxima(17, -1e30);
  for (int i = 0; i < 13; ++i)
    for (int j = 0; j < 17; ++j) {
      sums[i] += x.as<float>()[i * 17 + j];
      maxima[j] = std::max<double>(maxima[j], x.as<float>()[i * 17 + j]);
    }
  expect_close(out[0], sums, 1e-5);
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{1, 17}));
  expect_close(out[1], maxima, 0);
}

TEST_P(NumericsTest, Softmax) {
  Buffer x = random_f32({6, 33}, 11);
  auto out = run("softmax.mlir", "softmax", {x});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> want(6 * 33);
  for (int i = 0; i < 6; ++i) {
    double mx = -1e30, sum = 0;
    for (int j = 0; j < 33; ++j) mx = std::max<double>(mx, x.as<float>()[i * 33 + j]);
    for (int j = 0; j < 33; ++j) sum += std::exp(x.as<float>()[i * 33 + j] - mx);
    for (int j = 0; j < 33; ++j) want[i * 33 + j] = std::exp(x.as<float>()[i * 33 + j] - mx) / sum;
  }
  expect_close(out[0], want, 1e-5);
}

TEST_P(NumericsTest, ElementwiseChain) {
  Buffer x = random_f32({7, 19}, 12), a = random_f32({7, 19}, 13), b = random_f32({7, 19}, 14);
  auto out = run("elementwise.mlir", "chain", {x, a, b});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> want(7 * 19);
  for (int i = 0; i < 7 * 19; ++i) {
    double xv = x.as<float>()[i];
    want[i] = std::tanh(xv * a.as<float>()[i] + b.as<float>()[i]) + std::exp(-xv * xv) -
              std::max(xv, 0.0);
  }
  expect_close(out[0], want, 1e-5);
}

TEST_P(NumericsTest, BiasAndSiluOverRowsWithRemainders) {
  Buffer x = random_f32({2, 3, 5, 37}, 21), b = random_f32({3, 1, 1}, 22);
  auto out = run("bias_activation.mlir", "silu_with_bias", {x, b});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> want(x.element_count());
  for (int64_t i = 0; i < x.element_count(); ++i) {
    int64_t channel = (i / (5 * 37)) % 3;
    double s = double(x.as<float>()[i]) + b.as<float>()[channel];
    want[i] = s / (1.0 + std::exp(-s));
  }
  expect_close(out[0], want, 1e-5);
}

// The product's (m, n) element plus the row's bias, as `finish` makes it.
std::vector<double> product_epilogue(const Buffer& a, const Buffer& b, const Buffer& bias,
                                     int64_t m, int64_t k, int64_t n,
                                     const std::function<double(double, int64_t)>& finish) {
  std::vector<double> c = matmul_reference(a, b, m, k, n);
  for (int64_t i = 0; i < m * n; ++i) c[i] = finish(c[i] + bias.as<float>()[i / n], i);
  return c;
}

TEST_P(NumericsTest, ProductEpiloguesComputedPerTile) {
  Buffer a = random_f32({96, 24}, 41), b = random_f32({24, 200}, 42),
         bias = random_f32({96, 1}, 43);
  auto out = run("matmul_epilogue.mlir", "bias_relu", {a, b, bias});
  ASSERT_EQ(out.size(), 1u);
  expect_close(
      out[0],
      product_epilogue(a, b, bias, 96, 24, 200, [](double s, int64_t) { return std::max(s, 0.0); }),
      1e-4);

  Buffer a2 = random_f32({40, 300}, 44), b2 = random_f32({300, 605}, 45);
  Buffer r = random_f32({40, 605}, 46), bias2 = random_f32({40, 1}, 47);
  out = run("matmul_epilogue.mlir", "residual", {a2, b2, r, bias2});
  ASSERT_EQ(out.size(), 1u);
  expect_close(out[0],
               product_epilogue(a2, b2, bias2, 40, 300, 605,
                                [&](double s, int64_t i) { return s + r.as<float>()[i]; }),
               1e-4);

  Buffer a3 = random_f32({100, 24}, 48), b3 = random_f32({24, 64}, 49);
  Buffer bias3 = random_f32({100, 1}, 50);
  out = run("matmul_epilogue.mlir", "silu", {a3, b3, bias3});
  ASSERT_EQ(out.size(), 1u);
  expect_close(out[0],
               product_epilogue(a3, b3, bias3, 100, 24, 64,
                                [](double s, int64_t) { return s / (1.0 + std::exp(-s)); }),
               1e-4);
}

TEST_P(NumericsTest, TransposesWithPartialTiles) {
  Buffer x = random_f32({37, 29}, 31);
  auto swapped = run("transposes.mlir", "swap", {x});
  ASSERT_EQ(swapped.size(), 1u);
  ASSERT_EQ(swapped[0].shape(), (std::vector<int64_t>{29, 37}));
  for (int64_t i = 0; i < 37; ++i)
    for (int64_t j = 0; j < 29; ++j)
      ASSERT_EQ(swapped[0].as<float>()[j * 37 + i], x.as<float>()[i * 29 + j]) << i << "," << j;

  Buffer image = random_f32({2, 19, 5, 11}, 32);
  auto moved = run("transposes.mlir", "channels_last", {image});
  ASSERT_EQ(moved.size(), 1u);
  ASSERT_EQ(moved[0].shape(), (std::vector<int64_t>{2, 5, 11, 19}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 19; ++c)
      for (int64_t h = 0; h < 5; ++h)
        for (int64_t w = 0; w < 11; ++w)
          ASSERT_EQ(moved[0].as<float>()[((n * 5 + h) * 11 + w) * 19 + c],
                    image.as<float>()[((n * 19 + c) * 5 + h) * 11 + w]);
}

TEST_P(NumericsTest, DynamicShapes) {
  auto exe = compile_file(program_path("dynamic.mlir"), GetParam());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  // The same executable serves two different problem sizes.
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{5, 11, 3}, {17, 4, 9}}) {
    Buffer x = random_f32({m, k}, 15), y = random_f32({m, k}, 16), w = random_f32({k, n}, 17);
    auto out = (*exe)->execute("dynamic", {x, y, w});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ((*out)[0].shape(), (std::vector<int64_t>{m, n}));
    Buffer sum(DType::kF32, {m, k});
    for (int64_t i = 0; i < m * k; ++i) sum.as<float>()[i] = x.as<float>()[i] + y.as<float>()[i];
    expect_close((*out)[0], matmul_reference(sum, w, m, k, n), 1e-4);
  }
}

TEST_P(NumericsTest, IntegerBatchMatmulAndBooleans) {
  Buffer a = random_i32({3, 5, 7}, 18), b = random_i32({3, 7, 4}, 19);
  auto out = run("batch_matmul_i32.mlir", "bmm", {a, b});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].dtype(), DType::kI1);
  std::vector<double> want(60), positive(60);
  for (int bi = 0; bi < 3; ++bi)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 4; ++j) {
        int64_t s = 0;
        for (int p = 0; p < 7; ++p)
          s += int64_t(a.as<int32_t>()[(bi * 5 + i) * 7 + p]) *
               b.as<int32_t>()[(bi * 7 + p) * 4 + j];
        want[(bi * 5 + i) * 4 + j] = double(s);
        positive[(bi * 5 + i) * 4 + j] = s > 0 ? 1 : 0;
      }
  expect_close(out[0], want, 0);
  expect_close(out[1], positive, 0);
}

TEST_P(NumericsTest, ScalarArguments) {
  Buffer x = random_f32({5}, 20), alpha(DType::kF32, {}), n(DType::kI64, {});
  alpha.as<float>()[0] = 2.5f;
  n.as<int64_t>()[0] = 7;
  auto exe = compile_file(program_path("scalars.mlir"), GetParam());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  const EntryPoint& entry = (*exe)->entry_points()[0];
  ASSERT_EQ(entry.inputs.size(), 3u);
  EXPECT_TRUE(entry.inputs[1].scalar);
  EXPECT_EQ(entry.inputs[2].to_string(), "i64");  // index is passed as i64
  auto out = (*exe)->execute("axpn", {x, alpha, n});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  std::vector<double> want(5);
  for (int i = 0; i < 5; ++i) want[i] = 2.5 * x.as<float>()[i] + 7;
  expect_close((*out)[0], want, 1e-6);
  auto wrong = (*exe)->execute("axpn", {x, Buffer(DType::kF64, {}), n});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("argument 1 of 'axpn': expected f32, given f64"),
            std::string::npos)
      << wrong.status().message();
}

TEST_P(NumericsTest, StridedAndShiftedReads) {
  Buffer x = random_f32({5, 75}, 40);
  auto out = run("strided_reads.mlir", "every_other", {x});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> want(5 * 37);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 37; ++j) want[i * 37 + j] = x.as<float>()[i * 75 + 2 * j + 1];
  expect_close(out[0], want, 0);

  Buffer row = random_f32({31}, 41);
  out = run("strided_reads.mlir", "every_other_to_the_end", {row});
  ASSERT_EQ(out.size(), 1u);
  want.assign(16, 0);
  for (int j = 0; j < 16; ++j) want[j] = row.as<float>()[2 * j];
  expect_close(out[0], want, 0);

  Buffer wide = random_f32({4, 140}, 42), bias = random_f32({4}, 43), c = random_f32({4, 34}, 44);
  out = run("strided_reads.mlir", "mixed_strides", {wide, bias, c});
  ASSERT_EQ(out.size(), 1u);
  want.assign(4 * 33, 0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 33; ++j) {
      const float* w = wide.as<float>() + i * 140;
      want[i * 33 + j] =
          double(w[3 * j]) * 2 + bias.as<float>()[i] - w[4 * j + 3] + c.as<float>()[i * 34 + j + 1];
    }
  expect_close(out[0], want, 1e-5);

  Buffer image = random_f32({6, 50}, 45);
  for (int64_t k = 0; k < image.element_count(); ++k) image.as<float>()[k] *= 100;
  Buffer ints(DType::kI32, {6, 50});
  for (int64_t k = 0; k < ints.element_count(); ++k)
    ints.as<int32_t>()[k] = int32_t(image.as<float>()[k]);
  out = run("strided_reads.mlir", "every_other_i32", {ints});
  ASSERT_EQ(out.size(), 1u);
  want.assign(3 * 24, 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 24; ++j) want[i * 24 + j] = ints.as<int32_t>()[2 * i * 50 + 2 * j + 1] + 7;
  expect_close(out[0], want, 0);
}

// Integer division never runs on a partial vector's unused lanes (x86 divides lane by lane; a
// zero there trapped with SIGFPE).
TEST_P(NumericsTest, IntegerDivisionOnRowsWithPartialVectors) {
  Buffer x(DType::kI32, {2, 74}), d(DType::kI32, {2, 37});
  for (int64_t k = 0; k < x.element_count(); ++k) x.as<int32_t>()[k] = int32_t(k * 7 - 200);
  for (int64_t k = 0; k < d.element_count(); ++k) d.as<int32_t>()[k] = int32_t(k % 5 + 1);
  auto out = run("strided_reads.mlir", "every_other_divided", {x, d});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> want(2 * 37);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 37; ++j)
      want[i * 37 + j] = x.as<int32_t>()[i * 74 + 2 * j] / d.as<int32_t>()[i * 37 + j];
  expect_close(out[0], want, 0);

  // The same rows read in place: a remainder (a ones-filled run trapped here before the fix).
  Buffer a(DType::kI32, {2, 37});
  for (int64_t k = 0; k < a.element_count(); ++k) a.as<int32_t>()[k] = int32_t(k * 13 - 300);
  out = run("strided_reads.mlir", "divided", {a, d});
  ASSERT_EQ(out.size(), 1u);
  for (int64_t k = 0; k < a.element_count(); ++k) want[k] = a.as<int32_t>()[k] % d.as<int32_t>()[k];
  expect_close(out[0], want, 0);
}

TEST_P(NumericsTest, OutputsInterleavedAlongRows) {
  Buffer x = random_f32({3, 19}, 47), y = random_f32({3, 18}, 48);
  auto out = run("strided_reads.mlir", "interleaved_columns", {x, y});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> want(3 * 37);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 37; ++j)
      want[i * 37 + j] = j % 2 == 0 ? double(x.as<float>()[i * 19 + j / 2]) + 1
                                    : double(y.as<float>()[i * 18 + j / 2]) * 2;
  expect_close(out[0], want, 0);
}

TEST_P(NumericsTest, StridedWindowMaximumKeepsNaNs) {
  Buffer x = random_f32({3, 41}, 46);
  const float nan = std::nanf("");
  x.as<float>()[5] = nan;        // row 0: windows 1 and 2 (a window's middle tap, then its first)
  x.as<float>()[41 + 40] = nan;  // row 1: the last window's last tap, in the partial vector
  auto out = run("strided_reads.mlir", "window_max", {x});
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 20; ++j) {
      const float* r = x.as<float>() + i * 41 + 2 * j;
      float got = out[0].as<float>()[i * 20 + j];
      if (std::isnan(r[0]) || std::isnan(r[1]) || std::isnan(r[2])) {
        EXPECT_TRUE(std::isnan(got)) << i << "," << j;
      } else {
        EXPECT_EQ(got, std::max({r[0], r[1], r[2]})) << i << "," << j;
      }
    }
}

// exp(x) as the C library computes it, within 2e-6 relative where that is a normal float; below
// the normal range, 0 or a subnormal; +inf and NaN where the library has them.
void expect_exp(float got, double want, const std::string& where) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << where;
  } else if (want > double(std::numeric_limits<float>::max())) {
    EXPECT_EQ(got, std::numeric_limits<float>::infinity()) << where;
  } else if (want < double(std::numeric_limits<float>::min())) {
    EXPECT_GE(got, 0.0f) << where;
    EXPECT_LT(got, std::numeric_limits<float>::min()) << where;
  } else {
    EXPECT_NEAR(got / want, 1.0, 2e-6) << where << ": exp = " << want << ", got " << got;
  }
}

TEST_P(NumericsTest, ExponentialsAcrossTheFloatRange) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> edges = {
      -inf,     -1000, -104,       -103.9f, -90,     -87.4f, -87.3366f, -87.33f, -87.3f,
      -50,      -10,   -1,         -0.5f,   -1e-30f, -0.0f,  0.0f,      1e-30f,  1e-7f,
      0.25f,    0.5f,  0.6931472f, 1,       2,       10,     50,        88,      88.37f,
      88.3763f, 88.5f, 88.72f,     88.73f,  88.8f,   100,    1000,      inf,     std::nanf("")};
  Buffer x = random_f32({4, 37}, 47);
  for (int64_t k = 0; k < x.element_count(); ++k) {
    float& v = x.as<float>()[k];
    v = k < int64_t(edges.size()) ? edges[k] : v * 40;  // random_f32 is in [-1, 1)
  }
  auto out = run("exponentials.mlir", "exp_rows", {x});
  ASSERT_EQ(out.size(), 1u);
  for (int64_t k = 0; k < x.element_count(); ++k)
    expect_exp(out[0].as<float>()[k], std::exp(double(x.as<float>()[k])),
               "exp(" + std::to_string(x.as<float>()[k]) + ")");

  Buffer wide = random_f32({3, 70}, 48);
  for (int64_t k = 0; k < wide.element_count(); ++k) wide.as<float>()[k] *= 90;
  out = run("exponentials.mlir", "exp_every_other", {wide});
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 35; ++j) {
      float v = wide.as<float>()[i * 70 + 2 * j];
      expect_exp(out[0].as<float>()[i * 35 + j], std::exp(double(v)),
                 "exp(" + std::to_string(v) + ")");
    }
}

TEST_P(NumericsTest, SigmoidWeightedUnits) {
  Buffer x = random_f32({6, 50}, 49), b = random_f32({6, 1}, 50);
  for (int64_t k = 0; k < x.element_count(); ++k) x.as<float>()[k] *= 30;
  x.as<float>()[7] = std::nanf("");
  x.as<float>()[60] = -200;  // exp(200) overflows: the unit is -0
  auto out = run("exponentials.mlir", "silu", {x, b});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> want(x.element_count());
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 50; ++j) {
      double v = double(x.as<float>()[i * 50 + j]) + b.as<float>()[i];
      want[i * 50 + j] = v / (1 + std::exp(-v));
    }
  EXPECT_TRUE(std::isnan(out[0].as<float>()[7]));
  want[7] = 0;
  out[0].as<float>()[7] = 0;
  expect_close(out[0], want, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(EffortLevels, NumericsTest,
                         ::testing::Values(EffortLevel::kO0, EffortLevel::kO1, EffortLevel::kO2,
                                           EffortLevel::kO3),
                         [](const auto& info) {
                           return std::string(effort_level_name(info.param));
                         });

}  // namespace
}  // namespace kiln::testing

#include "compiler_cpu/fast_exp.h"

#include <vector>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln::cpu {
namespace {

// ln(2^-126), the smallest exponent whose power of two is a normal float, and ln(FLT_MAX).
constexpr float kLowest = -87.33654475f;
constexpr float kHighest = 88.37626266f;
constexpr float kLog2E = 1.44269504088896341f;
// ln 2 in two parts: k * kLn2High is exact for the k that occur.
constexpr float kLn2High = 0.693359375f;
constexpr float kLn2Low = -2.12194440e-4f;
// 1.5 * 2^23 + 127: adding it rounds x / ln 2 to an integer k and leaves k + 127 (the biased
// exponent of 2^k) in the low bits of the sum.
constexpr float kRoundAndBias = 12583039.0f;
// p(r) = 1 + r + r^2 q(r), q of degree 5 (Cephes' expf), highest power first.
constexpr float kCoefficients[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                   4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

class ExpBuilder {
 public:
  ExpBuilder(mlir::OpBuilder& b, mlir::Location loc) : b_(b), loc_(loc) {}

  mlir::Value build(mlir::Value x) {
    // k from x clamped to the normal range; r from x itself, so NaN stays NaN and anything above
    // the range overflows to +inf through the polynomial.
    mlir::Value clamped = select(less(x, constant(kHighest)), x, constant(kHighest));
    clamped = select(less(constant(kLowest), clamped), clamped, constant(kLowest));
    mlir::Value shifted = fma(clamped, constant(kLog2E), constant(kRoundAndBias));
    mlir::Value k = mlir::arith::SubFOp::create(b_, loc_, shifted, constant(kRoundAndBias));
    mlir::Value r = fma(k, constant(-kLn2High), x);
    r = fma(k, constant(-kLn2Low), r);
    mlir::Value p = constant(kCoefficients[0]);
    for (size_t i = 1; i < std::size(kCoefficients); ++i) p = fma(p, r, constant(kCoefficients[i]));
    mlir::Value r2 = mlir::arith::MulFOp::create(b_, loc_, r, r);
    p = fma(p, r2, r);
    p = mlir::arith::AddFOp::create(b_, loc_, p, constant(1.0f));
    mlir::Type i32 = b_.getI32Type();
    mlir::Value bits = mlir::arith::BitcastOp::create(b_, loc_, i32, shifted);
    mlir::Value exponent = mlir::arith::ShLIOp::create(
        b_, loc_, bits, mlir::arith::ConstantIntOp::create(b_, loc_, i32, 23));
    mlir::Value scale = mlir::arith::BitcastOp::create(b_, loc_, b_.getF32Type(), exponent);
    mlir::Value result = mlir::arith::MulFOp::create(b_, loc_, p, scale);
    return select(less(x, constant(kLowest)), constant(0.0f), result);
  }

 private:
  mlir::Value constant(float v) {
    return mlir::arith::ConstantOp::create(b_, loc_, b_.getF32FloatAttr(v));
  }
  mlir::Value less(mlir::Value a, mlir::Value c) {
    return mlir::arith::CmpFOp::create(b_, loc_, mlir::arith::CmpFPredicate::OLT, a, c);
  }
  // A compare and select of this shape is one vminps / vmaxps on x86.
  mlir::Value select(mlir::Value condition, mlir::Value a, mlir::Value c) {
    return mlir::arith::SelectOp::create(b_, loc_, condition, a, c);
  }
  mlir::Value fma(mlir::Value a, mlir::Value m, mlir::Value c) {
    return mlir::math::FmaOp::create(b_, loc_, a, m, c);
  }

  mlir::OpBuilder& b_;
  mlir::Location loc_;
};

}  // namespace

void expand_exponentials(mlir::ModuleOp module) {
  std::vector<mlir::math::ExpOp> found;
  module.walk([&](mlir::linalg::GenericOp generic) {
    generic.getRegion().walk([&](mlir::math::ExpOp exp) {
      if (exp.getType().isF32()) found.push_back(exp);
    });
  });
  for (mlir::math::ExpOp exp : found) {
    mlir::OpBuilder b(exp);
    mlir::Value result = ExpBuilder(b, exp.getLoc()).build(exp.getOperand());
    exp.getResult().replaceAllUsesWith(result);
    exp.erase();
  }
}

}  // namespace kiln::cpu

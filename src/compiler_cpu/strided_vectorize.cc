#include "compiler_cpu/strided_vectorize.h"

#include <optional>
#include <vector>

#include "compiler_cpu/elementwise_vectorize.h"
#include "compiler_cpu/parallel_loops.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace kiln::cpu {
namespace {

// A zmm register of f32; bodies that call library math functions use 8 (glibc's vector math
// library has no 16-lane forms LLVM maps to).
constexpr int64_t kVector = 16;
constexpr int64_t kMathVector = 8;
constexpr int64_t kMinRow = 8;
// Wider strides would load more than they keep.
constexpr int64_t kMaxStride = 4;

// The coefficient of `dim` in a pure affine expression (sums of constant multiples of dimensions
// and constants); none for symbols, divisions and remainders.
std::optional<int64_t> coefficient(mlir::AffineExpr e, unsigned dim) {
  if (auto d = mlir::dyn_cast<mlir::AffineDimExpr>(e)) return d.getPosition() == dim ? 1 : 0;
  if (mlir::isa<mlir::AffineConstantExpr>(e)) return 0;
  auto binary = mlir::dyn_cast<mlir::AffineBinaryOpExpr>(e);
  if (!binary) return std::nullopt;
  std::optional<int64_t> lhs = coefficient(binary.getLHS(), dim);
  std::optional<int64_t> rhs = coefficient(binary.getRHS(), dim);
  if (!lhs || !rhs) return std::nullopt;
  if (e.getKind() == mlir::AffineExprKind::Add) return *lhs + *rhs;
  if (e.getKind() != mlir::AffineExprKind::Mul) return std::nullopt;
  if (auto c = mlir::dyn_cast<mlir::AffineConstantExpr>(binary.getRHS()))
    return *lhs * c.getValue();
  if (auto c = mlir::dyn_cast<mlir::AffineConstantExpr>(binary.getLHS()))
    return *rhs * c.getValue();
  return std::nullopt;
}

// The constant term of a pure affine expression.
int64_t constant_term(mlir::AffineExpr e) {
  if (auto c = mlir::dyn_cast<mlir::AffineConstantExpr>(e)) return c.getValue();
  auto binary = mlir::dyn_cast<mlir::AffineBinaryOpExpr>(e);
  if (!binary) return 0;
  int64_t lhs = constant_term(binary.getLHS()), rhs = constant_term(binary.getRHS());
  return e.getKind() == mlir::AffineExprKind::Add ? lhs + rhs : lhs * rhs;
}

// An output written every other element along its rows: a view (memref.subview, static offsets
// and strides, stride 2 in the innermost dimension) of a buffer with contiguous rows, the view
// reaching its rows' ends (so lanes past it fall outside the buffer's rows). Winograd's output
// transforms write such views, one per output pixel of a 2x2 block.
mlir::memref::SubViewOp interleaved_view(mlir::Value output) {
  auto view = output.getDefiningOp<mlir::memref::SubViewOp>();
  if (!view) return {};
  auto source = mlir::dyn_cast<mlir::MemRefType>(view.getSource().getType());
  auto type = mlir::cast<mlir::MemRefType>(output.getType());
  if (!source || !source.hasStaticShape() || !source.isLastDimUnitStride() ||
      source.getRank() != type.getRank() || type.getRank() == 0)
    return {};
  for (llvm::ArrayRef<int64_t> values :
       {view.getStaticOffsets(), view.getStaticStrides(), view.getStaticSizes()})
    if (llvm::any_of(values, mlir::ShapedType::isDynamic)) return {};
  int64_t stride = view.getStaticStrides().back(), offset = view.getStaticOffsets().back();
  if (stride != 2 || offset + 2 * view.getStaticSizes().back() < source.getShape().back())
    return {};
  return view;
}

struct Plan {
  std::vector<int64_t> strides;  // each input's stride along the innermost loop (0: broadcast)
  mlir::memref::SubViewOp interleaved;  // the output's interleaved_view, if it is one
};

// How the generic is vectorised, when it qualifies.
std::optional<Plan> plan_for(mlir::linalg::GenericOp op) {
  if (op->hasAttr(kElementwiseAttr) || op.getNumDpsInits() != 1 || op.getNumLoops() == 0 ||
      op.getNumReductionLoops() != 0)
    return std::nullopt;
  Plan plan;
  mlir::Value output = op.getDpsInitOperand(0)->get();
  for (mlir::Value v : op->getOperands()) {
    auto type = mlir::dyn_cast<mlir::MemRefType>(v.getType());
    if (!type || !type.hasStaticShape() || !vector_element(type.getElementType()))
      return std::nullopt;
    if (type.getRank() == 0 || type.isLastDimUnitStride()) continue;
    if (v != output) return std::nullopt;
    plan.interleaved = interleaved_view(v);
    if (!plan.interleaved) return std::nullopt;
  }
  mlir::Block& body = op.getRegion().front();
  if (plan.interleaved && !body.getArgument(body.getNumArguments() - 1).use_empty())
    return std::nullopt;
  llvm::SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  unsigned innermost = op.getNumLoops() - 1;
  if (ranges.back() < kMinRow || !plain_arithmetic(op)) return std::nullopt;
  llvm::SmallVector<mlir::AffineMap> maps = op.getIndexingMapsArray();
  if (!maps.back().isIdentity()) return std::nullopt;
  auto yield = mlir::cast<mlir::linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1) return std::nullopt;
  std::vector<int64_t>& strides = plan.strides;
  for (size_t i = 0; i + 1 < maps.size(); ++i) {
    mlir::AffineMap map = maps[i];
    if (map.getNumSymbols() != 0) return std::nullopt;
    if (map.getNumResults() == 0) {
      strides.push_back(0);
      continue;
    }
    for (unsigned r = 0; r + 1 < map.getNumResults(); ++r)
      if (map.getResult(r).isFunctionOfDim(innermost)) return std::nullopt;
    std::optional<int64_t> stride = coefficient(map.getResults().back(), innermost);
    if (!stride || *stride < 0 || *stride > kMaxStride) return std::nullopt;
    strides.push_back(*stride);
  }
  return plan;
}

class StridedRows {
 public:
  StridedRows(mlir::linalg::GenericOp op, Plan plan)
      : op_(op),
        strides_(std::move(plan.strides)),
        interleaved_(plan.interleaved),
        loc_(op.getLoc()) {
    width_ = calls_library_math(op) ? kMathVector : kVector;
  }

  void rewrite() {
    mlir::OpBuilder b(op_);
    llvm::SmallVector<int64_t> ranges = op_.getStaticLoopRanges();
    size_t innermost = ranges.size() - 1;
    llvm::SmallVector<mlir::Value> ivs;
    for (size_t d = 0; d < innermost; ++d) {
      auto loop = mlir::scf::ForOp::create(b, loc_, index(b, 0), index(b, ranges[d]), index(b, 1));
      loop->setAttr(kParallelLoopAttr, b.getUnitAttr());
      b.setInsertionPointToStart(loop.getBody());
      ivs.push_back(loop.getInductionVar());
    }
    int64_t row = ranges[innermost];
    whole_ = row / width_ * width_;
    if (whole_ > 0) {
      auto loop =
          mlir::scf::ForOp::create(b, loc_, index(b, 0), index(b, whole_), index(b, width_));
      loop->setAttr(kParallelLoopAttr, b.getUnitAttr());
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      ivs.push_back(loop.getInductionVar());
      step(b, ivs, /*in_bounds=*/true);
      ivs.pop_back();
    }
    if (whole_ < row) {
      // The last, partial vector: transfers masked to the row's end.
      ivs.push_back(index(b, whole_));
      step(b, ivs, /*in_bounds=*/false);
    }
    op_.erase();
  }

 private:
  mlir::Value index(mlir::OpBuilder& b, int64_t v) {
    return mlir::arith::ConstantIndexOp::create(b, loc_, v);
  }

  mlir::VectorType vector_of(mlir::Type element, int64_t lanes = 0) {
    return mlir::VectorType::get({lanes ? lanes : width_}, element);
  }

  llvm::SmallVector<mlir::Value> indices(mlir::OpBuilder& b, mlir::AffineMap map,
                                         mlir::ValueRange ivs) {
    llvm::SmallVector<mlir::Value> out;
    for (mlir::AffineExpr e : map.getResults())
      out.push_back(mlir::affine::AffineApplyOp::create(
          b, loc_, mlir::AffineMap::get(map.getNumDims(), 0, e), ivs));
    return out;
  }

  // Whether every whole vector step's read of `stride` full vectors from an input stays inside
  // its innermost dimension (the span's last stride - 1 elements lie past the lanes used).
  bool span_in_bounds(mlir::Value memref, mlir::AffineMap map, int64_t stride) {
    auto type = mlir::cast<mlir::MemRefType>(memref.getType());
    llvm::SmallVector<int64_t> ranges = op_.getStaticLoopRanges();
    mlir::AffineExpr e = map.getResults().back();
    int64_t largest = constant_term(e);
    for (unsigned d = 0; d < ranges.size(); ++d) {
      int64_t top = d + 1 == ranges.size() ? whole_ - width_ : ranges[d] - 1;
      int64_t c = coefficient(e, d).value_or(0);
      if (c > 0) largest += c * top;
    }
    return largest + stride * width_ <= type.getShape().back();
  }

  // One input's vector at the row position `ivs`.
  mlir::Value read(mlir::OpBuilder& b, mlir::Value memref, mlir::AffineMap map, int64_t stride,
                   mlir::ValueRange ivs, bool in_bounds) {
    mlir::Type element = mlir::cast<mlir::MemRefType>(memref.getType()).getElementType();
    llvm::SmallVector<mlir::Value> at = indices(b, map, ivs);
    if (stride == 0) {
      mlir::Value scalar = mlir::memref::LoadOp::create(b, loc_, memref, at);
      return mlir::vector::BroadcastOp::create(b, loc_, vector_of(element), scalar);
    }
    if (stride == 1)
      return mlir::vector::TransferReadOp::create(b, loc_, vector_of(element), memref, at,
                                                  std::nullopt, llvm::ArrayRef<bool>{in_bounds});
    if (stride == 2) {
      // Two vectors, then the even lanes of both: as one shuffle of one double-width read, LLVM
      // moves the shuffle after the arithmetic, which then runs on twice the lanes.
      bool whole = in_bounds && span_in_bounds(memref, map, stride);
      mlir::VectorType v = vector_of(element);
      mlir::Value low = mlir::vector::TransferReadOp::create(b, loc_, v, memref, at, std::nullopt,
                                                             llvm::ArrayRef<bool>{whole});
      llvm::SmallVector<mlir::Value> next = at;
      next.back() = mlir::affine::AffineApplyOp::create(
          b, loc_, mlir::AffineMap::get(1, 0, b.getAffineDimExpr(0) + width_), at.back());
      mlir::Value high = mlir::vector::TransferReadOp::create(
          b, loc_, v, memref, next, std::nullopt, llvm::ArrayRef<bool>{whole});
      llvm::SmallVector<int64_t> even;
      for (int64_t k = 0; k < width_; ++k) even.push_back(2 * k);
      return mlir::vector::ShuffleOp::create(b, loc_, low, high, even);
    }
    // The span the lanes cover, read whole (its last stride - 1 elements may lie past the
    // buffer's end: masked), then every stride-th element kept.
    mlir::Value span =
        mlir::vector::TransferReadOp::create(b, loc_, vector_of(element, stride * width_), memref,
                                             at, std::nullopt, llvm::ArrayRef<bool>{false});
    llvm::SmallVector<int64_t> lanes;
    for (int64_t k = 0; k < width_; ++k) lanes.push_back(k * stride);
    return mlir::vector::ShuffleOp::create(b, loc_, span, span, lanes);
  }

  mlir::Value broadcast(mlir::OpBuilder& b, mlir::Value scalar) {
    return mlir::vector::BroadcastOp::create(b, loc_, vector_of(scalar.getType()), scalar);
  }

  // The body on vectors at the row position `ivs`, written to the output.
  void step(mlir::OpBuilder& b, mlir::ValueRange ivs, bool in_bounds) {
    mlir::Block& body = op_.getRegion().front();
    llvm::SmallVector<mlir::AffineMap> maps = op_.getIndexingMapsArray();
    mlir::Value output = op_.getDpsInitOperand(0)->get();
    mlir::IRMapping values;
    unsigned inputs = op_.getNumDpsInputs();
    for (unsigned i = 0; i < inputs; ++i) {
      mlir::BlockArgument arg = body.getArgument(i);
      if (arg.use_empty()) continue;
      values.map(arg,
                 read(b, op_.getDpsInputOperand(i)->get(), maps[i], strides_[i], ivs, in_bounds));
    }
    mlir::BlockArgument out_arg = body.getArgument(inputs);
    if (!out_arg.use_empty()) values.map(out_arg, read(b, output, maps.back(), 1, ivs, in_bounds));
    auto vector_value = [&](mlir::Value v) {
      return values.contains(v) ? values.lookup(v) : broadcast(b, v);
    };
    for (mlir::Operation& inner : body.without_terminator()) {
      if (inner.getNumOperands() == 0) {
        // A constant: made once as a scalar, used as a vector.
        mlir::Operation* scalar = b.clone(inner);
        for (auto [from, to] : llvm::zip(inner.getResults(), scalar->getResults()))
          values.map(from, broadcast(b, to));
        continue;
      }
      mlir::OperationState state(inner.getLoc(), inner.getName());
      for (mlir::Value operand : inner.getOperands()) state.addOperands(vector_value(operand));
      for (mlir::Type t : inner.getResultTypes()) state.addTypes(vector_of(t));
      state.addAttributes(inner.getAttrs());
      mlir::Operation* made = b.create(state);
      values.map(inner.getResults(), made->getResults());
    }
    mlir::Value result = vector_value(body.getTerminator()->getOperand(0));
    if (interleaved_) {
      write_interleaved(b, result, ivs, in_bounds);
      return;
    }
    mlir::vector::TransferWriteOp::create(b, loc_, result, output, ivs,
                                          llvm::ArrayRef<bool>{in_bounds});
  }

  // The lanes written every other element of the view's buffer: the span of 2 vectors they fall
  // in is read, the lanes put in its even (view) places, the span written back. Each step's span
  // ends before the next step's begins, so parallel steps never write the same element; the
  // other elements are written back as they were (the kernel writing them runs before or after).
  void write_interleaved(mlir::OpBuilder& b, mlir::Value lanes, mlir::ValueRange ivs,
                         bool in_bounds) {
    mlir::memref::SubViewOp view = interleaved_;
    mlir::Value source = view.getSource();
    llvm::SmallVector<mlir::Value> at;
    for (size_t d = 0; d < ivs.size(); ++d) {
      mlir::AffineExpr place =
          view.getStaticOffsets()[d] + view.getStaticStrides()[d] * b.getAffineDimExpr(0);
      at.push_back(
          mlir::affine::AffineApplyOp::create(b, loc_, mlir::AffineMap::get(1, 0, place), ivs[d]));
    }
    int64_t row = mlir::cast<mlir::MemRefType>(source.getType()).getShape().back();
    bool whole = in_bounds && view.getStaticOffsets().back() + 2 * whole_ <= row;
    mlir::Type element = mlir::cast<mlir::VectorType>(lanes.getType()).getElementType();
    mlir::Value span =
        mlir::vector::TransferReadOp::create(b, loc_, vector_of(element, 2 * width_), source, at,
                                             std::nullopt, llvm::ArrayRef<bool>{whole});
    llvm::SmallVector<int64_t> merge;
    for (int64_t k = 0; k < 2 * width_; ++k) merge.push_back(k % 2 == 0 ? k / 2 : width_ + k);
    mlir::Value merged = mlir::vector::ShuffleOp::create(b, loc_, lanes, span, merge);
    mlir::vector::TransferWriteOp::create(b, loc_, merged, source, at, llvm::ArrayRef<bool>{whole});
  }

  mlir::linalg::GenericOp op_;
  std::vector<int64_t> strides_;
  mlir::memref::SubViewOp interleaved_;  // null: the output is written directly
  mlir::Location loc_;
  int64_t width_;
  int64_t whole_ = 0;  // the row's part in whole vectors
};

}  // namespace

void vectorize_strided_generics(mlir::ModuleOp module) {
  std::vector<std::pair<mlir::linalg::GenericOp, Plan>> selected;
  module.walk([&](mlir::linalg::GenericOp op) {
    if (std::optional<Plan> plan = plan_for(op)) selected.emplace_back(op, std::move(*plan));
  });
  for (auto& [op, plan] : selected) StridedRows(op, std::move(plan)).rewrite();
}

}  // namespace kiln::cpu

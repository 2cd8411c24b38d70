#include "compiler_cpu/elementwise_vectorize.h"

#include "compiler_cpu/parallel_loops.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln::cpu {
namespace {

// One AVX2 register of f32: the widest glibc's vector math library has exp, tanh... for.
constexpr int64_t kElementwiseVector = 8;
// Innermost sizes below this stay scalar loops: a vector would be mostly mask.
constexpr int64_t kMinRow = 8;

// Math functions whose vector form lowers to LLVM intrinsics (and from there to libmvec or
// instructions). Others (erf, atan...) only lower one element at a time: their kernels stay loops.
bool vector_math(llvm::StringRef name) {
  static const llvm::StringSet<> known = {
      "math.exp",   "math.exp2", "math.log",   "math.log2",      "math.log10",
      "math.log1p", "math.tanh", "math.sqrt",  "math.rsqrt",     "math.absf",
      "math.floor", "math.ceil", "math.round", "math.roundeven", "math.trunc",
      "math.fma",   "math.powf", "math.sin",   "math.cos",       "math.copysign"};
  return known.contains(name);
}

// The body computes with arith and the math above only (what the vectoriser turns into vector
// ops that lower).
bool plain_arithmetic(mlir::linalg::GenericOp op) {
  for (mlir::Operation& inner : op.getRegion().front()) {
    mlir::Dialect* dialect = inner.getDialect();
    if (mlir::isa<mlir::linalg::YieldOp>(inner)) continue;
    if (dialect == nullptr || inner.getNumRegions() != 0) return false;
    llvm::StringRef ns = dialect->getNamespace();
    if (ns == "math" && vector_math(inner.getName().getStringRef())) continue;
    if (ns != "arith") return false;
  }
  return true;
}

// An input read along the innermost loop contiguously (that loop is its map's last result) or
// not at all (broadcast); any other use of the innermost loop is a strided walk.
bool contiguous_or_broadcast(mlir::AffineMap map, unsigned innermost) {
  if (!map.isProjectedPermutation(/*allowZeroInResults=*/true)) return false;
  for (unsigned r = 0; r < map.getNumResults(); ++r)
    if (map.getResult(r).isFunctionOfDim(innermost) && r + 1 != map.getNumResults()) return false;
  return true;
}

bool vectorizes_along_rows(mlir::linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumLoops() == 0) return false;
  if (op.getNumReductionLoops() != 0) return false;
  for (mlir::Value v : op->getOperands()) {
    auto shaped = mlir::dyn_cast<mlir::MemRefType>(v.getType());
    // (A 0-d operand's vector read leaves casts the LLVM lowering does not remove.)
    // Views (a padded buffer's interior) qualify when their rows are contiguous.
    if (!shaped || shaped.getRank() == 0 || !shaped.hasStaticShape() ||
        !shaped.isLastDimUnitStride())
      return false;
    if (!shaped.getElementType().isIntOrIndexOrFloat()) return false;
  }
  llvm::SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  unsigned innermost = op.getNumLoops() - 1;
  if (ranges.back() < kMinRow) return false;
  llvm::SmallVector<mlir::AffineMap> maps = op.getIndexingMapsArray();
  if (!maps.back().isIdentity()) return false;
  for (size_t i = 0; i + 1 < maps.size(); ++i)
    if (!contiguous_or_broadcast(maps[i], innermost)) return false;
  return plain_arithmetic(op);
}

std::string sizes_text(int rank, int64_t last) {
  std::string out = "[";
  for (int d = 0; d < rank; ++d) out += (d ? ", " : "") + std::to_string(d + 1 == rank ? last : 1);
  return out + "]";
}

}  // namespace

std::set<int> prepare_elementwise(mlir::ModuleOp module) {
  std::set<int> ranks;
  mlir::Builder b(module.getContext());
  module.walk([&](mlir::linalg::GenericOp op) {
    if (!vectorizes_along_rows(op)) return;
    int rank = static_cast<int>(op.getNumLoops());
    op->setAttr(kElementwiseAttr, b.getI64IntegerAttr(rank));
    ranks.insert(rank);
  });
  return ranks;
}

std::string elementwise_group_script(int rank) {
  std::string any = "!transform.any_op";
  std::string results = "(" + any;
  for (int d = 0; d < rank; ++d) results += ", " + any;
  results += ")";
  std::string s = R"mlir(
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
)mlir";
  s += "    %op = transform.structured.match ops{[\"linalg.generic\"]} attributes{" +
       std::string(kElementwiseAttr) + " = " + std::to_string(rank) +
       " : i64} in %root : (!transform.any_op) -> !transform.any_op\n";
  s += "    %tile, %loops:" + std::to_string(rank) +
       " = transform.structured.tile_using_for %op tile_sizes " +
       sizes_text(rank, kElementwiseVector) + " : (!transform.any_op) -> " + results + "\n";
  // Tiles of an elementwise kernel write disjoint blocks: any of its loops may run in parallel.
  for (int d = 0; d < rank; ++d)
    s += "    transform.annotate %loops#" + std::to_string(d) + " \"" + kParallelLoopAttr +
         "\" : !transform.any_op\n";
  s += "    transform.structured.vectorize %tile vector_sizes " +
       sizes_text(rank, kElementwiseVector) + " : !transform.any_op\n";
  s += R"mlir(    transform.yield
  }
}
)mlir";
  return s;
}

}  // namespace kiln::cpu

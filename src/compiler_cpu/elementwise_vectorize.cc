#include "compiler_cpu/elementwise_vectorize.h"

#include "compiler_cpu/parallel_loops.h"
#include "llvm/ADT/StringMap.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln::cpu {
namespace {

// One AVX2 register of f32: the widest glibc's vector math library has exp, tanh... for (LLVM
// maps no 16-lane form to it). Kernels without such calls use 16 lanes, a zmm register.
constexpr int64_t kElementwiseVector = 8;
constexpr int64_t kWideVector = 16;
// Innermost sizes below this stay scalar loops: a vector would be mostly mask.
constexpr int64_t kMinRow = 8;
// ...unless the body calls math functions: one masked vector of them (a libmvec call, an inline
// exp) beats one libm call per element even half masked (a SiLU writing 7-wide rows into a padded
// buffer for the next depthwise convolution: efficientnet_b0 15.2-15.6 -> 14.6-15.1 ms).
constexpr int64_t kMinMathRow = 4;
// Transposes are marked kTransposeGroups + rank * kMaxTransposeRank + (the output dimension the
// input's rows run along): one script per such shape of tile.
constexpr int kTransposeGroups = 1000;
// Elementwise kernels are marked their rank. Kernels of 16 lanes (transposes: 16x16 tiles) have
// kWideGroups added to their mark.
constexpr int kWideGroups = 500;
constexpr int kMaxTransposeRank = 8;

// Math functions whose vector form lowers to LLVM intrinsics, each with whether that form becomes
// a call into glibc's vector math library (libmvec) rather than instructions. Others (erf,
// atan...) only lower one element at a time: their kernels stay loops.
const llvm::StringMap<bool>& vector_math_functions() {
  static const llvm::StringMap<bool> known = {
      {"math.exp", true},    {"math.exp2", true},       {"math.log", true},
      {"math.log2", true},   {"math.log10", true},      {"math.log1p", true},
      {"math.tanh", true},   {"math.powf", true},       {"math.sin", true},
      {"math.cos", true},    {"math.sqrt", false},      {"math.rsqrt", false},
      {"math.absf", false},  {"math.floor", false},     {"math.ceil", false},
      {"math.round", false}, {"math.roundeven", false}, {"math.trunc", false},
      {"math.fma", false},   {"math.copysign", false}};
  return known;
}

bool vector_math(llvm::StringRef name) { return vector_math_functions().contains(name); }

bool library_math(llvm::StringRef name) { return vector_math_functions().lookup(name); }

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
    // Views (a padded buffer's interior) qualify when their rows are contiguous. (A 0-d
    // operand's vector read leaves casts the LLVM lowering does not remove.)
    if (!shaped || shaped.getRank() == 0 || !shaped.hasStaticShape() ||
        !shaped.isLastDimUnitStride())
      return false;
    if (!vector_element(shaped.getElementType())) return false;
  }
  llvm::SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  unsigned innermost = op.getNumLoops() - 1;
  if (ranges.back() < (calls_math(op) ? kMinMathRow : kMinRow)) return false;
  llvm::SmallVector<mlir::AffineMap> maps = op.getIndexingMapsArray();
  if (!maps.back().isIdentity()) return false;
  for (size_t i = 0; i + 1 < maps.size(); ++i)
    if (!contiguous_or_broadcast(maps[i], innermost)) return false;
  return plain_arithmetic(op);
}

// The output dimension a transpose's input rows run along (the input's innermost dimension),
// when both that and the output's innermost dimension are long enough for square vector tiles.
std::optional<int> transpose_tile_dimension(mlir::linalg::TransposeOp op) {
  auto input = mlir::dyn_cast<mlir::MemRefType>(op.getInput().getType());
  auto output = mlir::dyn_cast<mlir::MemRefType>(op.getInit().getType());
  if (!input || !output || !input.hasStaticShape() || !output.hasStaticShape() ||
      !input.isLastDimUnitStride() || !output.isLastDimUnitStride())
    return std::nullopt;
  llvm::ArrayRef<int64_t> perm = op.getPermutation();
  int rank = static_cast<int>(perm.size());
  if (rank < 2 || rank > kMaxTransposeRank) return std::nullopt;
  int along = -1;
  for (int d = 0; d < rank; ++d)
    if (perm[d] == rank - 1) along = d;
  if (along < 0 || along == rank - 1) return std::nullopt;  // rows stay rows: not a transpose
  if (output.getDimSize(along) < kElementwiseVector ||
      output.getDimSize(rank - 1) < kElementwiseVector)
    return std::nullopt;
  return along;
}

std::string tile_sizes_text(int rank, int square_dimension, int64_t lanes) {
  std::string out = "[";
  for (int d = 0; d < rank; ++d)
    out += (d ? ", " : "") + std::to_string(d + 1 == rank || d == square_dimension ? lanes : 1);
  return out + "]";
}

}  // namespace

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
    // A vector's lanes past the end of a row hold whatever its masked reads left there, and x86
    // divides integers lane by lane: a zero there traps (SIGFPE). Such kernels stay loops.
    if (mlir::isa<mlir::arith::DivSIOp, mlir::arith::DivUIOp, mlir::arith::RemSIOp,
                  mlir::arith::RemUIOp, mlir::arith::CeilDivSIOp, mlir::arith::CeilDivUIOp,
                  mlir::arith::FloorDivSIOp>(inner))
      return false;
  }
  return true;
}

bool vector_element(mlir::Type type) {
  if (!type.isIntOrIndexOrFloat()) return false;
  // A vector of i1 is stored as packed bits, a memref of i1 one byte per element.
  auto integer = mlir::dyn_cast<mlir::IntegerType>(type);
  return !integer || integer.getWidth() % 8 == 0;
}

bool calls_library_math(mlir::linalg::GenericOp op) {
  for (mlir::Operation& inner : op.getRegion().front())
    if (library_math(inner.getName().getStringRef())) return true;
  return false;
}

bool calls_math(mlir::linalg::GenericOp op) {
  for (mlir::Operation& inner : op.getRegion().front())
    if (inner.getDialect() != nullptr && inner.getDialect()->getNamespace() == "math") return true;
  return false;
}

std::set<int> prepare_elementwise(mlir::ModuleOp module) {
  std::set<int> groups;
  mlir::Builder b(module.getContext());
  module.walk([&](mlir::linalg::GenericOp op) {
    if (!vectorizes_along_rows(op)) return;
    int rank = static_cast<int>(op.getNumLoops());
    int group = calls_library_math(op) ? rank : kWideGroups + rank;
    op->setAttr(kElementwiseAttr, b.getI64IntegerAttr(group));
    groups.insert(group);
  });
  module.walk([&](mlir::linalg::TransposeOp op) {
    std::optional<int> along = transpose_tile_dimension(op);
    if (!along) return;
    int rank = static_cast<int>(op.getPermutation().size());
    int group = kTransposeGroups + rank * kMaxTransposeRank + *along;
    auto output = mlir::cast<mlir::MemRefType>(op.getInit().getType());
    if (output.getDimSize(*along) >= kWideVector && output.getDimSize(rank - 1) >= kWideVector)
      group += kWideGroups;
    op->setAttr(kElementwiseAttr, b.getI64IntegerAttr(group));
    groups.insert(group);
  });
  return groups;
}

std::string elementwise_group_script(int group) {
  bool transpose = group >= kTransposeGroups;
  bool wide = group % kTransposeGroups >= kWideGroups;
  int shape = group - (wide ? kWideGroups : 0) - (transpose ? kTransposeGroups : 0);
  int rank = transpose ? shape / kMaxTransposeRank : shape;
  int square = transpose ? shape % kMaxTransposeRank : -1;
  std::string sizes = tile_sizes_text(rank, square, wide ? kWideVector : kElementwiseVector);
  std::string any = "!transform.any_op";
  std::string results = "(" + any;
  for (int d = 0; d < rank; ++d) results += ", " + any;
  results += ")";
  std::string s = R"mlir(
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
)mlir";
  s += "    %op = transform.structured.match ops{[\"" +
       std::string(transpose ? "linalg.transpose" : "linalg.generic") + "\"]} attributes{" +
       std::string(kElementwiseAttr) + " = " + std::to_string(group) +
       " : i64} in %root : (!transform.any_op) -> !transform.any_op\n";
  s += "    %tile, %loops:" + std::to_string(rank) +
       " = transform.structured.tile_using_for %op tile_sizes " + sizes +
       " : (!transform.any_op) -> " + results + "\n";
  // Tiles of an elementwise kernel write disjoint blocks: any of its loops may run in parallel.
  for (int d = 0; d < rank; ++d)
    s += "    transform.annotate %loops#" + std::to_string(d) + " \"" + kParallelLoopAttr +
         "\" : !transform.any_op\n";
  s += "    transform.structured.vectorize %tile vector_sizes " + sizes + " : !transform.any_op\n";
  s += R"mlir(    transform.yield
  }
}
)mlir";
  return s;
}

}  // namespace kiln::cpu

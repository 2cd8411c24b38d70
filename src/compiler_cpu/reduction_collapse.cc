#include "compiler_cpu/reduction_collapse.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace kiln::cpu {
namespace {

using Groups = llvm::SmallVector<mlir::ReassociationIndices>;

// Runs of two or more adjacent reduction loops.
Groups adjacent_reductions(mlir::linalg::GenericOp op) {
  Groups runs;
  llvm::SmallVector<mlir::utils::IteratorType> types = op.getIteratorTypesArray();
  for (int64_t d = 0; d < static_cast<int64_t>(types.size()); ++d) {
    if (types[d] != mlir::utils::IteratorType::reduction) continue;
    if (!runs.empty() && runs.back().back() + 1 == d)
      runs.back().push_back(d);
    else
      runs.push_back({d});
  }
  llvm::erase_if(runs, [](const mlir::ReassociationIndices& run) { return run.size() < 2; });
  return runs;
}

// How `map`'s results (an operand's dimensions) group when the loops of `runs` collapse: a run's
// loops become one dimension, each other result stays its own; empty when the operand's
// dimensions do not follow the loops in order (a transposed or windowed read).
Groups operand_groups(mlir::AffineMap map, const Groups& runs) {
  Groups groups;
  int64_t previous = -1;
  for (unsigned r = 0; r < map.getNumResults(); ++r) {
    auto dim = mlir::dyn_cast<mlir::AffineDimExpr>(map.getResult(r));
    if (!dim || static_cast<int64_t>(dim.getPosition()) <= previous) return {};
    int64_t d = dim.getPosition();
    bool continues_run = false;
    for (const auto& run : runs)
      if (previous >= run.front() && d <= run.back() && d == previous + 1) continues_run = true;
    if (continues_run)
      groups.back().push_back(r);
    else
      groups.push_back({static_cast<int64_t>(r)});
    previous = d;
  }
  return groups;
}

bool collapsible(mlir::linalg::GenericOp op, const Groups& runs) {
  if (!op.hasPureBufferSemantics()) return false;
  if (!mlir::linalg::areDimSequencesPreserved(op.getIndexingMapsArray(), runs)) return false;
  for (mlir::OpOperand& operand : op->getOpOperands()) {
    auto type = mlir::dyn_cast<mlir::MemRefType>(operand.get().getType());
    if (!type || !type.hasStaticShape()) return false;
    Groups groups = operand_groups(op.getMatchingIndexingMap(&operand), runs);
    if (groups.empty() && type.getRank() != 0) return false;
    if (type.getRank() != 0 &&
        !mlir::memref::CollapseShapeOp::isGuaranteedCollapsible(type, groups))
      return false;
  }
  return true;
}

}  // namespace

void collapse_reduction_loops(mlir::ModuleOp module) {
  llvm::SmallVector<mlir::linalg::GenericOp> candidates;
  module.walk([&](mlir::linalg::GenericOp op) {
    if (op.getNumReductionLoops() >= 2) candidates.push_back(op);
  });
  mlir::IRRewriter rewriter(module.getContext());
  for (mlir::linalg::GenericOp op : candidates) {
    Groups runs = adjacent_reductions(op);
    if (runs.empty() || !collapsible(op, runs)) continue;
    rewriter.setInsertionPoint(op);
    mlir::FailureOr<mlir::linalg::CollapseResult> collapsed =
        mlir::linalg::collapseOpIterationDims(op, runs, rewriter);
    if (mlir::failed(collapsed)) continue;
    rewriter.replaceOp(op, collapsed->results);
  }
}

}  // namespace kiln::cpu

#include "compiler_cpu/loop_collapse.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace kiln::cpu {
namespace {

using Groups = llvm::SmallVector<mlir::ReassociationIndices>;

bool uses_dims_from(mlir::AffineExpr expr, unsigned first) {
  bool uses = false;
  expr.walk([&](mlir::AffineExpr e) {
    if (auto dim = mlir::dyn_cast<mlir::AffineDimExpr>(e)) uses |= dim.getPosition() >= first;
  });
  return uses;
}

// An operand's dimensions grouped for a collapse: each of the first `head` alone, the rest as one.
Groups head_then_tail(unsigned head, unsigned results) {
  Groups groups;
  for (unsigned r = 0; r < head; ++r) groups.push_back({static_cast<int64_t>(r)});
  groups.push_back({});
  for (unsigned r = head; r < results; ++r) groups.back().push_back(r);
  return groups;
}

// How an elementwise kernel's operand reads its trailing loops [first, loops).
enum class TailRead {
  kWalks,    // as its own trailing dimensions, in loop order, contiguous in memory
  kIgnores,  // not at all (a broadcast along them)
  kOther,
};

TailRead tail_read(mlir::AffineMap map, mlir::MemRefType type, unsigned first, unsigned loops) {
  unsigned results = map.getNumResults();
  unsigned tail = loops - first;
  bool walks = results >= tail;
  for (unsigned i = 0; walks && i < tail; ++i) {
    auto dim = mlir::dyn_cast<mlir::AffineDimExpr>(map.getResult(results - tail + i));
    walks = dim && dim.getPosition() == first + i;
  }
  unsigned head = walks ? results - tail : results;
  for (unsigned r = 0; r < head; ++r)
    if (uses_dims_from(map.getResult(r), first)) return TailRead::kOther;
  if (!walks) return TailRead::kIgnores;
  return mlir::memref::CollapseShapeOp::isGuaranteedCollapsible(type, head_then_tail(head, results))
             ? TailRead::kWalks
             : TailRead::kOther;
}

bool has_index_ops(mlir::linalg::GenericOp op) {
  return !op.getRegion().front().getOps<mlir::linalg::IndexOp>().empty();
}

// The first loop of the longest tail of loops every operand walks or ignores (the output always
// walks it), or `loops - 1` when there is nothing to merge.
unsigned mergeable_tail(mlir::linalg::GenericOp op) {
  unsigned loops = op.getNumLoops();
  for (unsigned first = 0; first + 1 < loops; ++first) {
    bool all = true;
    for (mlir::OpOperand& operand : op->getOpOperands()) {
      auto type = mlir::cast<mlir::MemRefType>(operand.get().getType());
      TailRead read = tail_read(op.getMatchingIndexingMap(&operand), type, first, loops);
      bool is_output = op.isDpsInit(&operand);
      if (read == TailRead::kOther || (is_output && read != TailRead::kWalks)) all = false;
    }
    if (all) return first;
  }
  return loops - 1;
}

bool elementwise_on_static_buffers(mlir::linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumLoops() < 2 || op.getNumReductionLoops() != 0 ||
      op.getNumDpsInits() != 1 || has_index_ops(op))
    return false;
  for (mlir::Value v : op->getOperands()) {
    auto type = mlir::dyn_cast<mlir::MemRefType>(v.getType());
    if (!type || !type.hasStaticShape()) return false;
  }
  return true;
}

void merge_trailing_loops(mlir::linalg::GenericOp op, unsigned first, mlir::IRRewriter& rewriter) {
  unsigned loops = op.getNumLoops();
  mlir::MLIRContext* context = op.getContext();
  mlir::Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  llvm::SmallVector<mlir::Value> inputs, outputs;
  llvm::SmallVector<mlir::AffineMap> maps;
  for (mlir::OpOperand& operand : op->getOpOperands()) {
    mlir::AffineMap map = op.getMatchingIndexingMap(&operand);
    auto type = mlir::cast<mlir::MemRefType>(operand.get().getType());
    mlir::Value value = operand.get();
    llvm::SmallVector<mlir::AffineExpr> results(map.getResults());
    if (tail_read(map, type, first, loops) == TailRead::kWalks) {
      unsigned head = map.getNumResults() - (loops - first);
      value = mlir::memref::CollapseShapeOp::create(rewriter, loc, value,
                                                    head_then_tail(head, map.getNumResults()));
      results.resize(head);
      results.push_back(mlir::getAffineDimExpr(first, context));
    }
    maps.push_back(mlir::AffineMap::get(first + 1, 0, results, context));
    (op.isDpsInit(&operand) ? outputs : inputs).push_back(value);
  }
  llvm::SmallVector<mlir::utils::IteratorType> iterators(first + 1,
                                                         mlir::utils::IteratorType::parallel);
  auto merged = mlir::linalg::GenericOp::create(rewriter, loc, mlir::TypeRange{}, inputs, outputs,
                                                maps, iterators);
  merged->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  rewriter.inlineRegionBefore(op.getRegion(), merged.getRegion(), merged.getRegion().begin());
  rewriter.eraseOp(op);
}

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

bool reductions_collapsible(mlir::linalg::GenericOp op, const Groups& runs) {
  if (!op.hasPureBufferSemantics()) return false;
  if (!mlir::linalg::areDimSequencesPreserved(op.getIndexingMapsArray(), runs)) return false;
  for (mlir::OpOperand& operand : op->getOpOperands()) {
    auto type = mlir::dyn_cast<mlir::MemRefType>(operand.get().getType());
    if (!type || !type.hasStaticShape()) return false;
    if (type.getRank() == 0) continue;
    Groups groups = operand_groups(op.getMatchingIndexingMap(&operand), runs);
    if (groups.empty() || !mlir::memref::CollapseShapeOp::isGuaranteedCollapsible(type, groups))
      return false;
  }
  return true;
}

}  // namespace

void collapse_short_loops(mlir::ModuleOp module) {
  llvm::SmallVector<mlir::linalg::GenericOp> elementwise, reductions;
  module.walk([&](mlir::linalg::GenericOp op) {
    if (elementwise_on_static_buffers(op)) elementwise.push_back(op);
    if (op.getNumReductionLoops() >= 2) reductions.push_back(op);
  });
  mlir::IRRewriter rewriter(module.getContext());
  for (mlir::linalg::GenericOp op : elementwise) {
    unsigned first = mergeable_tail(op);
    if (first + 1 < op.getNumLoops()) merge_trailing_loops(op, first, rewriter);
  }
  for (mlir::linalg::GenericOp op : reductions) {
    Groups runs = adjacent_reductions(op);
    if (runs.empty() || !reductions_collapsible(op, runs)) continue;
    rewriter.setInsertionPoint(op);
    mlir::FailureOr<mlir::linalg::CollapseResult> collapsed =
        mlir::linalg::collapseOpIterationDims(op, runs, rewriter);
    if (mlir::failed(collapsed)) continue;
    rewriter.replaceOp(op, collapsed->results);
  }
}

}  // namespace kiln::cpu

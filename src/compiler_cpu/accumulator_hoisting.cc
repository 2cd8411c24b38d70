#include "compiler_cpu/accumulator_hoisting.h"

#include <optional>
#include <vector>

#include "compiler_cpu/parallel_loops.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kiln::cpu {
namespace {

// The buffer a memref value is a view of. Views are listed by op (not by interface: interface and
// trait ids are not reliable across this hidden-visibility library and libMLIR).
mlir::Value root_buffer(mlir::Value memref) {
  while (mlir::Operation* def = memref.getDefiningOp()) {
    if (!mlir::isa<mlir::memref::SubViewOp, mlir::memref::ExpandShapeOp,
                   mlir::memref::CollapseShapeOp, mlir::memref::ReinterpretCastOp,
                   mlir::memref::CastOp, mlir::memref::TransposeOp>(def))
      break;
    memref = def->getOperand(0);
  }
  return memref;
}

bool is_fresh_allocation(mlir::Value buffer) {
  return buffer.getDefiningOp<mlir::memref::AllocOp>() ||
         buffer.getDefiningOp<mlir::memref::AllocaOp>();
}

// A buffer that cannot be a view of a fresh allocation: an argument of the function, a global, or
// another allocation. (A memref from anywhere else might be one.)
bool is_known_buffer(mlir::Value buffer) {
  if (auto argument = mlir::dyn_cast<mlir::BlockArgument>(buffer))
    return mlir::isa<mlir::func::FuncOp>(argument.getOwner()->getParentOp());
  return is_fresh_allocation(buffer) || buffer.getDefiningOp<mlir::memref::GetGlobalOp>();
}

// The memref a memory access of a kind kiln's kernels use reads or writes; null for other ops.
mlir::Value accessed_memref(mlir::Operation* op) {
  if (auto read = mlir::dyn_cast<mlir::vector::TransferReadOp>(op)) return read.getBase();
  if (auto write = mlir::dyn_cast<mlir::vector::TransferWriteOp>(op)) return write.getBase();
  if (auto load = mlir::dyn_cast<mlir::memref::LoadOp>(op)) return load.getMemRef();
  if (auto store = mlir::dyn_cast<mlir::memref::StoreOp>(op)) return store.getMemRef();
  if (auto load = mlir::dyn_cast<mlir::vector::LoadOp>(op)) return load.getBase();
  if (auto store = mlir::dyn_cast<mlir::vector::StoreOp>(op)) return store.getBase();
  return {};
}

// Whether `loop` touches `buffer` (or any view of it) only through `read` and `write`, and calls
// nothing that might.
bool only_pair_touches(mlir::scf::ForOp loop, mlir::Value buffer, mlir::Operation* read,
                       mlir::Operation* write) {
  bool alone = true;
  loop.getBody()->walk([&](mlir::Operation* op) {
    if (op == read || op == write) return mlir::WalkResult::advance();
    if (mlir::isa<mlir::scf::ForOp, mlir::scf::IfOp, mlir::scf::YieldOp>(op))
      return mlir::WalkResult::advance();  // their bodies are walked op by op
    if (mlir::Value memref = accessed_memref(op)) {
      mlir::Value other = root_buffer(memref);
      if (other != buffer && is_known_buffer(other)) return mlir::WalkResult::advance();
    } else if (mlir::isMemoryEffectFree(op)) {
      return mlir::WalkResult::advance();
    }
    alone = false;
    return mlir::WalkResult::interrupt();
  });
  return alone;
}

bool same_place(mlir::vector::TransferReadOp read, mlir::vector::TransferWriteOp write) {
  return read.getBase() == write.getBase() && read.getIndices() == write.getIndices() &&
         read.getVectorType() == write.getVectorType() &&
         read.getPermutationMap() == write.getPermutationMap() && read.getMask() == write.getMask();
}

struct Pair {
  mlir::vector::TransferReadOp read;
  mlir::vector::TransferWriteOp write;
};

// A read/write pair directly in the loop's body that can move out of it.
std::optional<Pair> find_pair(mlir::scf::ForOp loop) {
  mlir::Block* body = loop.getBody();
  for (auto write : body->getOps<mlir::vector::TransferWriteOp>()) {
    if (!mlir::isa<mlir::MemRefType>(write.getBase().getType())) continue;
    mlir::Value buffer = root_buffer(write.getBase());
    if (!is_fresh_allocation(buffer)) continue;
    for (auto read : body->getOps<mlir::vector::TransferReadOp>()) {
      if (!read->isBeforeInBlock(write) || !same_place(read, write)) continue;
      bool invariant = llvm::all_of(read->getOperands(),
                                    [&](mlir::Value v) { return loop.isDefinedOutsideOfLoop(v); });
      if (invariant && only_pair_touches(loop, buffer, read, write)) return Pair{read, write};
    }
  }
  return std::nullopt;
}

// Index arithmetic that does not change across iterations moves in front of the loop, so the
// accumulator's indices are visibly invariant.
void hoist_invariant_arithmetic(mlir::scf::ForOp loop) {
  // In order, so an op whose operands were just moved can follow them.
  for (mlir::Operation& op : llvm::make_early_inc_range(loop.getBody()->without_terminator())) {
    if (op.getNumRegions() != 0 || !mlir::isMemoryEffectFree(&op) || !mlir::isSpeculatable(&op))
      continue;
    if (llvm::all_of(op.getOperands(),
                     [&](mlir::Value v) { return loop.isDefinedOutsideOfLoop(v); }))
      op.moveBefore(loop);
  }
}

// Read before the loop, the tile carried as an iteration value, written after it.
mlir::scf::ForOp hoist(mlir::scf::ForOp loop, Pair pair, mlir::RewriterBase& rewriter) {
  pair.read->moveBefore(loop);
  mlir::Value stored = pair.write.getValueToStore();
  auto grown = loop.replaceWithAdditionalYields(
      rewriter, mlir::ValueRange{pair.read.getResult()}, /*replaceInitOperandUsesInLoop=*/true,
      [&](mlir::OpBuilder&, mlir::Location, llvm::ArrayRef<mlir::BlockArgument>) {
        return llvm::SmallVector<mlir::Value>{stored};
      });
  auto next = mlir::cast<mlir::scf::ForOp>(grown->getOperation());
  pair.write->moveAfter(next);
  pair.write.getValueToStoreMutable().assign(next.getResults().back());
  return next;
}

}  // namespace

void hoist_accumulators(mlir::ModuleOp module) {
  // Innermost loops first: a pair moved out of one loop may move out of the next one too.
  std::vector<mlir::scf::ForOp> loops;
  module.walk([&](mlir::scf::ForOp loop) { loops.push_back(loop); });
  mlir::IRRewriter rewriter(module.getContext());
  for (mlir::scf::ForOp loop : loops) {
    hoist_invariant_arithmetic(loop);
    while (std::optional<Pair> pair = find_pair(loop)) loop = hoist(loop, *pair, rewriter);
  }
}

namespace {

constexpr const char* kAbsorbableAttr = "kiln.absorbable_fill";

// Whether `value` is computed from `iv` (through ops, not through memory).
bool depends_on(mlir::Value value, mlir::Value iv, int depth = 0) {
  if (value == iv) return true;
  mlir::Operation* def = value.getDefiningOp();
  if (def == nullptr || depth > 16) return false;
  for (mlir::Value operand : def->getOperands())
    if (depends_on(operand, iv, depth + 1)) return true;
  return false;
}

// The loops from `read` up to `top` that do not move the place it reads (a contraction's
// reduction tile loop revisits each accumulator tile once per reduction block), or nullopt where
// the read is not in such a nest: under another op than scf.for and scf.if, or under a loop that
// will run in parallel (threads at different iterations would each take theirs as the first).
// Every other loop moves the place, so each place is read first in the iteration where all the
// returned loops are at their lower bound.
std::optional<std::vector<mlir::scf::ForOp>> revisiting_loops(mlir::vector::TransferReadOp read,
                                                              mlir::Operation* top) {
  std::vector<mlir::scf::ForOp> revisiting;
  for (mlir::Operation* at = read->getParentOp(); at != nullptr; at = at->getParentOp()) {
    auto loop = mlir::dyn_cast<mlir::scf::ForOp>(at);
    if (!loop) {
      if (!mlir::isa<mlir::scf::IfOp>(at)) return std::nullopt;
    } else if (!llvm::any_of(read.getIndices(), [&](mlir::Value index) {
                 return depends_on(index, loop.getInductionVar());
               })) {
      if (loop->hasAttr(kParallelLoopAttr)) return std::nullopt;
      revisiting.push_back(loop);
    }
    if (at == top) return revisiting;
  }
  return std::nullopt;
}

bool touches(mlir::Operation* op, mlir::Value buffer) {
  bool found = false;
  op->walk([&](mlir::Operation* inner) {
    for (mlir::Value operand : inner->getOperands())
      if (mlir::isa<mlir::MemRefType>(operand.getType()) && root_buffer(operand) == buffer)
        found = true;
    return found ? mlir::WalkResult::interrupt() : mlir::WalkResult::advance();
  });
  return found;
}

// Whether `op` only reads `buffer` (vector and scalar loads, directly or through views): a
// consumer of the contraction's result, not more of the contraction.
bool only_reads(mlir::Operation* op, mlir::Value buffer) {
  bool reads = true;
  op->walk([&](mlir::Operation* inner) {
    bool touching = false;
    for (mlir::Value operand : inner->getOperands())
      if (mlir::isa<mlir::MemRefType>(operand.getType()) && root_buffer(operand) == buffer)
        touching = true;
    if (!touching) return mlir::WalkResult::advance();
    if (mlir::isa<mlir::vector::TransferReadOp, mlir::memref::LoadOp, mlir::vector::LoadOp,
                  mlir::memref::SubViewOp, mlir::memref::ExpandShapeOp,
                  mlir::memref::CollapseShapeOp, mlir::memref::ReinterpretCastOp>(inner))
      return mlir::WalkResult::advance();
    reads = false;
    return mlir::WalkResult::interrupt();
  });
  return reads;
}

// Whether `op` holds part of a contraction: its vector contractions, or a linalg kernel with a
// reduction that was not vectorised. (An elementwise epilogue updating the result in place holds
// none.)
bool holds_contraction(mlir::Operation* op) {
  bool found = false;
  op->walk([&](mlir::Operation* inner) {
    if (mlir::isa<mlir::vector::ContractionOp, mlir::vector::OuterProductOp, mlir::vector::FMAOp>(
            inner))
      found = true;
    if (auto linalg_op = mlir::dyn_cast<mlir::linalg::LinalgOp>(inner))
      found |= linalg_op.getNumReductionLoops() > 0;
    return found ? mlir::WalkResult::interrupt() : mlir::WalkResult::advance();
  });
  return found;
}

// The loop nest a marked fill's contraction became, when the fill can go: every access to the
// buffer in it is a vector transfer, and every read is in a nest of loops that either move its
// place or revisit it (revisiting_loops). Null otherwise.
mlir::scf::ForOp absorbing_nest(mlir::linalg::FillOp fill, mlir::Value buffer) {
  mlir::Operation* next = fill->getNextNode();
  while (next != nullptr && !touches(next, buffer)) next = next->getNextNode();
  auto nest = mlir::dyn_cast_or_null<mlir::scf::ForOp>(next);
  if (!nest) return {};
  // The whole contraction must be this nest: the next op to touch the buffer is a consumer (a
  // view, a kernel, a return, an epilogue updating the tile in place), not more loops or tiles
  // of the contraction (a remainder left outside the nest when single-trip loops fold away).
  mlir::Operation* after = nest->getNextNode();
  while (after != nullptr && !touches(after, buffer)) after = after->getNextNode();
  if (after != nullptr &&
      ((after->getNumRegions() != 0 && !only_reads(after, buffer) && holds_contraction(after)) ||
       mlir::isa<mlir::vector::TransferReadOp, mlir::vector::TransferWriteOp>(after)))
    return {};
  bool ok = true;
  nest->walk([&](mlir::Operation* op) {
    mlir::Value memref = accessed_memref(op);
    if (!memref) {
      // Any other op handing the buffer on (a view, a call) hides accesses.
      for (mlir::Value operand : op->getOperands())
        if (mlir::isa<mlir::MemRefType>(operand.getType()) && root_buffer(operand) == buffer &&
            !mlir::isa<mlir::memref::SubViewOp, mlir::memref::ReinterpretCastOp>(op))
          ok = false;
      return;
    }
    if (root_buffer(memref) != buffer) return;
    if (auto read = mlir::dyn_cast<mlir::vector::TransferReadOp>(op))
      ok &= revisiting_loops(read, nest).has_value();
    else
      ok &= mlir::isa<mlir::vector::TransferWriteOp>(op);
  });
  return ok ? nest : mlir::scf::ForOp();
}

}  // namespace

void mark_absorbable_fills(mlir::ModuleOp module) {
  mlir::Builder b(module.getContext());
  module.walk([&](mlir::Operation* op) {
    if (!mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(op)) return;
    auto linalg_op = mlir::cast<mlir::linalg::LinalgOp>(op);
    // The result's own buffer, or its tile of one (an epilogue-fused product's forall tile).
    mlir::Value out = linalg_op.getDpsInitOperand(0)->get();
    auto tile = out.getDefiningOp<mlir::memref::SubViewOp>();
    if (!out.getDefiningOp<mlir::memref::AllocOp>() &&
        !(tile && tile.getSource().getDefiningOp<mlir::memref::AllocOp>()))
      return;
    // No reduction step at all would leave the buffer unwritten.
    auto lhs = mlir::dyn_cast<mlir::MemRefType>(op->getOperand(0).getType());
    if (!lhs || !lhs.hasStaticShape() || lhs.getShape().back() < 1) return;
    // Ops between that never see the buffer (a PGLE build's profile calls around each kernel)
    // do not keep the fill apart from its contraction.
    mlir::Operation* before = op->getPrevNode();
    while (before != nullptr && !mlir::isa<mlir::linalg::FillOp>(before) &&
           before->getNumRegions() == 0 && !touches(before, out))
      before = before->getPrevNode();
    auto fill = mlir::dyn_cast_or_null<mlir::linalg::FillOp>(before);
    if (!fill || fill.getDpsInitOperand(0)->get() != out) return;
    fill->setAttr(kAbsorbableAttr, b.getUnitAttr());
  });
}

void absorb_fills(mlir::ModuleOp module) {
  std::vector<mlir::linalg::FillOp> fills;
  module.walk([&](mlir::linalg::FillOp fill) {
    if (fill->hasAttr(kAbsorbableAttr)) fills.push_back(fill);
  });
  for (mlir::linalg::FillOp fill : fills) {
    fill->removeAttr(kAbsorbableAttr);
    mlir::Value buffer = root_buffer(fill.getDpsInitOperand(0)->get());
    mlir::scf::ForOp nest = absorbing_nest(fill, buffer);
    if (!nest) continue;
    mlir::Value value = fill.getDpsInputOperand(0)->get();
    auto reads_of_buffer = [&](mlir::Operation* within) {
      std::vector<mlir::vector::TransferReadOp> reads;
      within->walk([&](mlir::vector::TransferReadOp read) {
        if (root_buffer(read.getBase()) == buffer) reads.push_back(read);
      });
      return reads;
    };
    // The loops that revisit a place more than once (a single-trip loop visits it once).
    std::vector<mlir::scf::ForOp> revisiting;
    for (mlir::vector::TransferReadOp read : reads_of_buffer(nest)) {
      std::vector<mlir::scf::ForOp> loops = *revisiting_loops(read, nest);
      for (mlir::scf::ForOp loop : loops) {
        std::optional<llvm::APInt> trips = loop.getStaticTripCount();
        bool once = trips && trips->isOne();
        if (!once && llvm::find(revisiting, loop) == revisiting.end()) revisiting.push_back(loop);
      }
    }
    // One reduction block loop: its first iteration, peeled off, takes the fill's value; the
    // others read the partial sums. (A branch per tile on the block instead ran large products
    // slower: 1024^3 12.9 -> 13.5 ms, not interleaved.) Several such loops, or a read outside
    // the one: the fill stays.
    mlir::Operation* first_visits = nest;
    if (revisiting.size() > 1) continue;
    if (revisiting.size() == 1) {
      mlir::Operation* loop = revisiting[0];
      if (llvm::any_of(reads_of_buffer(nest),
                       [&](mlir::vector::TransferReadOp read) { return !loop->isAncestor(read); }))
        continue;
      mlir::IRRewriter rewriter(fill->getContext());
      mlir::scf::ForOp first;
      if (mlir::failed(mlir::scf::peelForLoopFirstIteration(rewriter, revisiting[0], first)))
        continue;
      first_visits = first;
    }
    for (mlir::vector::TransferReadOp read : reads_of_buffer(first_visits)) {
      mlir::OpBuilder b(read);
      mlir::Value splat =
          mlir::vector::BroadcastOp::create(b, read.getLoc(), read.getVectorType(), value);
      read.getResult().replaceAllUsesWith(splat);
      read->erase();
    }
    fill->erase();
  }
}

}  // namespace kiln::cpu

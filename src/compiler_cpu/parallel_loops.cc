#include "compiler_cpu/parallel_loops.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <vector>

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Async/IR/Async.h"
#include "mlir/Dialect/Async/Transforms.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln::cpu {
namespace {

// Rough cost units (about one scalar operation each; a vector operation a quarter of its lanes).
// A task must hold at least this much work to pay for its dispatch (a coroutine, a queue round
// trip, the wake-up of a worker: microseconds, and the cache lines of its block moving between
// cores); a loop with less than two tasks' worth stays sequential. 40k, the first value, split
// mobilenet_v2's elementwise kernels into 16 tasks each: at T=2 it ran slower than at T=1 on the
// Zen 5 of session 18, where 640k won. On the Intel VM of session 23, 640k left Winograd's
// transforms (~250k units, ~100 us each) and most of mobilenet_v2's elementwise kernels on one
// thread; 80k, interleaved at T=2: resnet18 25.8 -> 24.0 ms, mobilenet_v2 9.1 -> 7.7,
// efficientnet_b0 18.1 -> 16.3, squeezenet1_1 7.38 -> 7.03; 160k and 320k within the noise.
// At T=1 a parallel loop is one block called directly, so the value does not matter there.
constexpr int64_t kMinTaskWork = 80000;
// Trip count assumed for loops whose bounds are only known at run time.
constexpr int64_t kUnknownTrips = 16;

// (Not m_ConstantInt: its trait check compares type ids, which differ between this
// hidden-visibility module and libMLIR; the helper below runs inside libMLIR.)
int64_t constant_index(mlir::Value v) {
  std::optional<int64_t> value = mlir::getConstantIntValue(v);
  return value ? *value : -1;
}

// The loop's trip count when its bounds are constants.
std::optional<int64_t> static_trip_count(mlir::Value lower, mlir::Value upper, mlir::Value step) {
  int64_t lb = constant_index(lower), ub = constant_index(upper), st = constant_index(step);
  if (lb < 0 || ub < 0 || st <= 0) return std::nullopt;
  return std::max<int64_t>(0, (ub - lb + st - 1) / st);
}

int64_t trip_count(mlir::Value lower, mlir::Value upper, mlir::Value step) {
  return static_trip_count(lower, upper, step).value_or(kUnknownTrips);
}

int64_t saturating_multiply(int64_t a, int64_t b) {
  constexpr int64_t kCap = int64_t{1} << 40;
  if (a == 0 || b == 0) return 0;
  if (a > kCap / b) return kCap;
  return a * b;
}

int64_t block_work(mlir::Block& block);

int64_t op_work(mlir::Operation& op) {
  if (auto loop = mlir::dyn_cast<mlir::scf::ForOp>(op))
    return saturating_multiply(
        trip_count(loop.getLowerBound(), loop.getUpperBound(), loop.getStep()),
        block_work(*loop.getBody()));
  if (auto loop = mlir::dyn_cast<mlir::scf::ParallelOp>(op)) {
    int64_t trips = 1;
    for (size_t d = 0; d < loop.getNumLoops(); ++d)
      trips = saturating_multiply(
          trips, trip_count(loop.getLowerBound()[d], loop.getUpperBound()[d], loop.getStep()[d]));
    return saturating_multiply(trips, block_work(*loop.getBody()));
  }
  int64_t work = 1;
  for (mlir::Region& region : op.getRegions())
    for (mlir::Block& block : region) work = std::max(work, block_work(block));
  // A vector operation does a vector's worth of lanes, several per cycle.
  for (mlir::Type type : op.getResultTypes())
    if (auto vector = mlir::dyn_cast<mlir::VectorType>(type))
      work = std::max<int64_t>(work, vector.getNumElements() / 4);
  return work;
}

int64_t block_work(mlir::Block& block) {
  int64_t work = 0;
  for (mlir::Operation& op : block) work = std::min<int64_t>(work + op_work(op), int64_t{1} << 40);
  return std::max<int64_t>(work, 1);
}

// Nothing inside may allocate (the checking allocator reports failures on the calling thread
// only) or call out (host callbacks, printing, user functions expect the program's thread).
bool safe_to_run_on_workers(mlir::Operation* loop) {
  bool safe = true;
  loop->walk([&](mlir::Operation* op) {
    if (mlir::isa<mlir::memref::AllocOp, mlir::memref::ReallocOp, mlir::memref::DeallocOp,
                  mlir::func::CallOp, mlir::func::CallIndirectOp>(op))
      safe = false;
  });
  return safe;
}

// Operations that may move from a loop's body into the loop nested in it: computations without
// effects whose values only the nested loop, or another such computation, uses (a product's tile
// loops compute the bound of the remainder tile between the row and the column loop).
bool movable_into(mlir::Operation& op, mlir::scf::ForOp inner) {
  if (op.getNumRegions() != 0 || !mlir::isMemoryEffectFree(&op) || !mlir::isSpeculatable(&op))
    return false;
  // (Users in the same body move along, in order.)
  for (mlir::Operation* user : op.getUsers())
    if (!inner->isAncestor(user) && user->getBlock() != op.getBlock()) return false;
  return true;
}

// The marked loop nested in `outer` as the last operation of its body, everything before it
// movable into it.
mlir::scf::ForOp nested_marked_loop(mlir::scf::ForOp outer) {
  mlir::Block* body = outer.getBody();
  if (body->getOperations().size() < 2) return nullptr;
  auto inner = mlir::dyn_cast<mlir::scf::ForOp>(*std::prev(body->end(), 2));
  if (!inner || !inner->hasAttr(kParallelLoopAttr) || inner.getNumRegionIterArgs() != 0)
    return nullptr;
  for (mlir::Operation& op : *body) {
    if (&op == inner.getOperation() || &op == body->getTerminator()) continue;
    if (!movable_into(op, inner)) return nullptr;
  }
  return inner;
}

// Nested marked loops (outer to inner): each one's body is the next loop, after index
// computations only that loop uses.
std::vector<mlir::scf::ForOp> marked_nest(mlir::scf::ForOp outer) {
  std::vector<mlir::scf::ForOp> nest = {outer};
  for (;;) {
    mlir::scf::ForOp inner = nested_marked_loop(nest.back());
    if (!inner) break;
    bool invariant = true;
    for (mlir::Value bound : {inner.getLowerBound(), inner.getUpperBound(), inner.getStep()})
      if (!outer.isDefinedOutsideOfLoop(bound)) invariant = false;
    if (!invariant) break;
    nest.push_back(inner);
  }
  return nest;
}

// The marked scf.for nest becomes one scf.parallel over all of its dimensions.
mlir::scf::ParallelOp to_parallel(std::vector<mlir::scf::ForOp> nest) {
  mlir::scf::ForOp outer = nest.front();
  mlir::OpBuilder builder(outer);
  std::vector<mlir::Value> lower, upper, step;
  for (mlir::scf::ForOp loop : nest) {
    lower.push_back(loop.getLowerBound());
    upper.push_back(loop.getUpperBound());
    step.push_back(loop.getStep());
  }
  auto parallel =
      mlir::scf::ParallelOp::create(builder, outer.getLoc(), lower, upper, step, nullptr);
  parallel->setAttr(kParallelLoopAttr, builder.getUnitAttr());
  mlir::Block* target = parallel.getBody();
  for (size_t d = 0; d < nest.size(); ++d)
    nest[d].getInductionVar().replaceAllUsesWith(target->getArgument(d));
  // Each level's index computations, outer first, then everything but the innermost loop's
  // yield, move in front of the parallel loop's terminator.
  for (size_t d = 0; d < nest.size(); ++d) {
    mlir::Block* source = nest[d].getBody();
    auto end = d + 1 < nest.size() ? mlir::Block::iterator(nest[d + 1].getOperation())
                                   : std::prev(source->end());
    target->getOperations().splice(mlir::Block::iterator(target->getTerminator()),
                                   source->getOperations(), source->begin(), end);
  }
  outer.erase();
  return parallel;
}

// two_thread_imbalance for a loop's bounds; unknown bounds count as even.
double loop_imbalance(mlir::Value lower, mlir::Value upper, mlir::Value step) {
  int64_t lb = constant_index(lower), ub = constant_index(upper), st = constant_index(step);
  if (lb < 0 || ub < 0 || st <= 0) return 1.0;
  return two_thread_imbalance(ub - lb, st);
}

// The loop, split into a one-dimensional parallel loop over its best dimension around a (later
// sequential) loop over the others. Any dimension may go outside: the iterations of a parallel
// loop are independent. The best is the outermost with enough iterations to share out, else the
// outermost that splits (nearly) as evenly between two threads as any. (One dimension also
// keeps clear of async-parallel-for's block-aligned multi-dimensional path, which computes some
// blocks twice when its aligned block size overshoots the block count.)
mlir::scf::ParallelOp to_one_dimension(mlir::scf::ParallelOp loop) {
  size_t dims = loop.getNumLoops();
  if (dims == 1) return loop;
  std::vector<int64_t> trips;
  std::vector<double> imbalance;
  for (size_t d = 0; d < dims; ++d) {
    mlir::Value lb = loop.getLowerBound()[d], ub = loop.getUpperBound()[d], st = loop.getStep()[d];
    // Bounds known only at run time: assume plenty.
    trips.push_back(static_trip_count(lb, ub, st).value_or(int64_t{1} << 30));
    imbalance.push_back(loop_imbalance(lb, ub, st));
  }
  // The innermost dimension is the one that runs along memory: moved outside, every other
  // dimension's step would stride through it (a 7x7x3x3x512 window gather ran 10x slower). It
  // may go outside when its iterations are blocks of at least 64 elements (a product's column
  // tiles: 96x16 by 16x12544 has 2 row tiles and 98 column tiles), or when no other dimension
  // has two iterations to share out.
  constexpr int64_t kWholeBlock = 64;
  std::vector<size_t> eligible;
  for (size_t d = 0; d + 1 < dims; ++d) eligible.push_back(d);
  if (constant_index(loop.getStep()[dims - 1]) >= kWholeBlock) eligible.push_back(dims - 1);
  size_t chosen = eligible.front();
  for (size_t d : eligible)
    if (imbalance[d] < imbalance[chosen]) chosen = d;
  // Nearly as even, the outer dimension still wins: resnet18's products kept on their row tiles
  // ran 3% faster at T=2 than split by columns (docs/BENCHMARKS.md, session 27).
  constexpr double kNearlyAsEven = 0.1;
  for (size_t d : eligible)
    if (imbalance[d] <= imbalance[chosen] + kNearlyAsEven) {
      chosen = d;
      break;
    }
  if (trips[chosen] < 2) chosen = dims - 1;
  for (size_t d : eligible)
    if (trips[d] >= kEnoughIterationsToShare) {
      chosen = d;
      break;
    }
  mlir::OpBuilder builder(loop);
  mlir::Location loc = loop.getLoc();
  auto outer =
      mlir::scf::ParallelOp::create(builder, loc, mlir::ValueRange{loop.getLowerBound()[chosen]},
                                    mlir::ValueRange{loop.getUpperBound()[chosen]},
                                    mlir::ValueRange{loop.getStep()[chosen]}, nullptr);
  std::vector<mlir::Value> lower, upper, step;
  for (size_t d = 0; d < dims; ++d) {
    if (d == chosen) continue;
    lower.push_back(loop.getLowerBound()[d]);
    upper.push_back(loop.getUpperBound()[d]);
    step.push_back(loop.getStep()[d]);
  }
  builder.setInsertionPoint(outer.getBody()->getTerminator());
  auto inner = mlir::scf::ParallelOp::create(builder, loc, lower, upper, step, nullptr);
  mlir::Block* source = loop.getBody();
  for (size_t d = 0, next = 0; d < dims; ++d)
    source->getArgument(d).replaceAllUsesWith(d == chosen ? outer.getBody()->getArgument(0)
                                                          : inner.getBody()->getArgument(next++));
  mlir::Block* target = inner.getBody();
  target->getOperations().splice(mlir::Block::iterator(target->getTerminator()),
                                 source->getOperations(), source->begin(),
                                 std::prev(source->end()));
  loop.erase();
  return outer;
}

bool inside_a_loop(mlir::Operation* op) {
  for (mlir::Operation* parent = op->getParentOp(); parent != nullptr;
       parent = parent->getParentOp()) {
    if (mlir::isa<mlir::func::FuncOp>(parent)) return false;
    if (mlir::isa<mlir::scf::ForOp, mlir::scf::ParallelOp, mlir::scf::WhileOp>(parent)) return true;
  }
  return false;
}

bool inside_a_parallel_loop(mlir::Operation* op) {
  return op->getParentOfType<mlir::scf::ParallelOp>() != nullptr;
}

// Iterations per task: one task per thread, or fewer tasks where that would make them smaller
// than kMinTaskWork. Equal shares, taken in order, keep each thread on the same part of the data
// from one kernel to the next (the calling thread runs the first share, the worker the next), so
// what a kernel wrote is mostly still in the cache of the core that reads it next; a late worker
// costs nothing more than its share, which the calling thread takes over if it is still queued.
// On the Intel VM of session 25, against up to four tasks per thread (MLIR's default), interleaved
// at T=2: squeezenet1_1 4.71 -> 4.39 ms, mobilenet_v2 6.44 -> 6.04, efficientnet_b0 9.30 -> 8.79,
// resnet18 11.77 -> 11.46 (docs/BENCHMARKS.md, session 25). The loop is one-dimensional
// (to_one_dimension).
mlir::Value task_size(mlir::ImplicitLocOpBuilder& builder, mlir::scf::ParallelOp loop) {
  int64_t per_iteration = block_work(*loop.getBody());
  mlir::Value minimum = mlir::arith::ConstantIndexOp::create(
      builder, std::max<int64_t>(1, kMinTaskWork / per_iteration));
  // The pool's workers, plus the calling thread; read at run time (KILN_NUM_THREADS).
  mlir::Value workers =
      mlir::async::RuntimeNumWorkerThreadsOp::create(builder, builder.getIndexType());
  mlir::Value threads = mlir::arith::AddIOp::create(
      builder, workers, mlir::arith::ConstantIndexOp::create(builder, 1));
  mlir::Value span =
      mlir::arith::SubIOp::create(builder, loop.getUpperBound()[0], loop.getLowerBound()[0]);
  mlir::Value trips = mlir::arith::CeilDivUIOp::create(builder, span, loop.getStep()[0]);
  mlir::Value share = mlir::arith::CeilDivUIOp::create(builder, trips, threads);
  return mlir::arith::MaxUIOp::create(builder, share, minimum);
}

// The part of a buffer one memory access of a kernel may touch: the allocation (or argument) it
// reaches through views, and per dimension of it the index range, where it is known statically.
struct Access {
  mlir::Value root;
  bool write = false;
  std::vector<std::optional<std::pair<int64_t, int64_t>>> box;  // [first, end) per dimension
  // Per dimension, where every index touched is `residue` modulo `modulus` (modulus 0: unknown):
  // the rows 2r and 2r + 1 Winograd's output transform writes from separate kernels.
  std::vector<std::pair<int64_t, int64_t>> residues;  // (modulus, residue)
  // The elements of the buffer, in memory order, between the first and the last it may touch:
  // known through any view with a static layout (a collapsed slice of a bigger buffer).
  std::optional<std::pair<int64_t, int64_t>> span;  // [first, end)
};

// The span of the elements of `type`, a view with a static strided layout, that the index
// ranges `box` cover (an unknown range: the whole dimension).
std::optional<std::pair<int64_t, int64_t>> linear_span(
    mlir::MemRefType type, const std::vector<std::optional<std::pair<int64_t, int64_t>>>& box) {
  llvm::SmallVector<int64_t> strides;
  int64_t offset;
  if (!type.hasStaticShape() || box.size() != size_t(type.getRank()) ||
      mlir::failed(type.getStridesAndOffset(strides, offset)) ||
      mlir::ShapedType::isDynamic(offset))
    return std::nullopt;
  int64_t first = offset, last = offset;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (mlir::ShapedType::isDynamic(strides[d]) || strides[d] < 0) return std::nullopt;
    std::pair<int64_t, int64_t> range = box[d].value_or(std::make_pair(0, type.getDimSize(d)));
    if (range.second <= range.first) return std::nullopt;
    first += range.first * strides[d];
    last += (range.second - 1) * strides[d];
  }
  return std::make_pair(first, last + 1);
}

// Follows `memref` through views to the buffer they view. Static subviews of the same rank keep
// the access's box and residues in the viewed buffer's indices; any other view loses them.
mlir::Value resolve_view(mlir::Value memref, Access& access) {
  auto& box = access.box;
  auto& residues = access.residues;
  residues.resize(box.size(), {0, 0});
  while (mlir::Operation* def = memref.getDefiningOp()) {
    if (auto subview = mlir::dyn_cast<mlir::memref::SubViewOp>(def)) {
      bool known = subview.getSourceType().getRank() == subview.getType().getRank() &&
                   box.size() == size_t(subview.getType().getRank()) &&
                   !mlir::ShapedType::isDynamicShape(subview.getStaticOffsets()) &&
                   !mlir::ShapedType::isDynamicShape(subview.getStaticStrides());
      for (size_t d = 0; d < box.size(); ++d) {
        if (!known) {
          box[d].reset();
          residues[d] = {0, 0};
          continue;
        }
        // Index i of the view is offset + i * stride of its source.
        int64_t offset = subview.getStaticOffsets()[d], stride = subview.getStaticStrides()[d];
        auto [modulus, residue] = residues[d];
        if (modulus != 0)
          residues[d] = {modulus * stride, offset + residue * stride};
        else if (stride > 1)
          residues[d] = {stride, offset % stride};
        // An index not known to the access still lies inside the view.
        if (!box[d] && !mlir::ShapedType::isDynamic(subview.getStaticSizes()[d]))
          box[d] = std::make_pair(int64_t{0}, subview.getStaticSizes()[d]);
        if (box[d] && box[d]->second > box[d]->first)
          box[d] = std::make_pair(offset + box[d]->first * stride,
                                  offset + (box[d]->second - 1) * stride + 1);
        else
          box[d].reset();
      }
      memref = subview.getSource();
      continue;
    }
    auto view = mlir::dyn_cast<mlir::ViewLikeOpInterface>(def);
    if (!view) break;
    memref = view.getViewSource();
    box.clear();
    residues.clear();
  }
  if (auto type = mlir::dyn_cast<mlir::MemRefType>(memref.getType())) {
    box.resize(type.getRank());  // unknown where the views lost track
    residues.resize(type.getRank(), {0, 0});
  }
  return memref;
}

// The range [first, last] of a loop's induction variable with constant bounds.
std::optional<std::pair<int64_t, int64_t>> induction_range(mlir::Value value) {
  auto arg = mlir::dyn_cast<mlir::BlockArgument>(value);
  if (!arg) return std::nullopt;
  mlir::Operation* owner = arg.getOwner()->getParentOp();
  mlir::Value lower, upper, step;
  if (auto loop = mlir::dyn_cast<mlir::scf::ForOp>(owner); loop && arg.getArgNumber() == 0) {
    lower = loop.getLowerBound();
    upper = loop.getUpperBound();
    step = loop.getStep();
  } else if (auto loop = mlir::dyn_cast<mlir::scf::ParallelOp>(owner);
             loop && arg.getArgNumber() < loop.getNumLoops()) {
    lower = loop.getLowerBound()[arg.getArgNumber()];
    upper = loop.getUpperBound()[arg.getArgNumber()];
    step = loop.getStep()[arg.getArgNumber()];
  } else {
    return std::nullopt;
  }
  int64_t lb = constant_index(lower), ub = constant_index(upper), st = constant_index(step);
  if (lb < 0 || ub <= lb || st <= 0) return std::nullopt;
  return std::make_pair(lb, lb + (ub - lb - 1) / st * st);
}

// An index that is a value times a factor plus a constant: a loop's induction variable itself,
// or iv * s + c computed by an affine.apply.
struct ScaledIndex {
  mlir::Value base;
  int64_t factor = 1;
  int64_t constant = 0;
};

std::optional<ScaledIndex> scaled_index(mlir::Value index) {
  if (mlir::isa<mlir::BlockArgument>(index)) return ScaledIndex{index};
  auto apply = index.getDefiningOp<mlir::affine::AffineApplyOp>();
  if (!apply || apply.getAffineMap().getNumResults() != 1 || apply->getNumOperands() != 1)
    return std::nullopt;
  ScaledIndex scaled{apply->getOperand(0)};
  mlir::AffineExpr expr = apply.getAffineMap().getResult(0);
  if (auto sum = mlir::dyn_cast<mlir::AffineBinaryOpExpr>(expr);
      sum && sum.getKind() == mlir::AffineExprKind::Add) {
    auto c = mlir::dyn_cast<mlir::AffineConstantExpr>(sum.getRHS());
    if (!c) return std::nullopt;
    scaled.constant = c.getValue();
    expr = sum.getLHS();
  }
  if (auto product = mlir::dyn_cast<mlir::AffineBinaryOpExpr>(expr);
      product && product.getKind() == mlir::AffineExprKind::Mul) {
    auto c = mlir::dyn_cast<mlir::AffineConstantExpr>(product.getRHS());
    if (!c || c.getValue() < 1) return std::nullopt;
    scaled.factor = c.getValue();
    expr = product.getLHS();
  }
  if (!mlir::isa<mlir::AffineDimExpr, mlir::AffineSymbolExpr>(expr)) return std::nullopt;
  return scaled;
}

// The index range [first, end) an access `extent` long from `index` covers: a constant, or a
// scaled induction variable of a loop with constant bounds.
std::optional<std::pair<int64_t, int64_t>> index_range(mlir::Value index, int64_t extent) {
  if (int64_t first = constant_index(index); first >= 0)
    return std::make_pair(first, first + extent);
  std::optional<ScaledIndex> scaled = scaled_index(index);
  if (!scaled) return std::nullopt;
  std::optional<std::pair<int64_t, int64_t>> range = induction_range(scaled->base);
  if (!range) return std::nullopt;
  int64_t first = range->first * scaled->factor + scaled->constant;
  if (first < 0) return std::nullopt;
  return std::make_pair(first, range->second * scaled->factor + scaled->constant + extent);
}

// The modulus and residue of an index iv * s + c with s > 1, or (0, 0).
std::pair<int64_t, int64_t> index_residue(mlir::Value index) {
  std::optional<ScaledIndex> scaled = scaled_index(index);
  if (!scaled || scaled->factor < 2) return {0, 0};
  int64_t modulus = scaled->factor;
  return {modulus, ((scaled->constant % modulus) + modulus) % modulus};
}

// The static index range a vector transfer covers along each dimension of its buffer, and the
// residues of the dimensions it reads or writes one index of.
template <typename Transfer>
void transfer_extent(Transfer op, Access& access) {
  auto type = mlir::cast<mlir::MemRefType>(op.getBase().getType());
  std::vector<int64_t> extent(type.getRank(), 1);
  mlir::AffineMap map = op.getPermutationMap();
  for (unsigned v = 0; v < map.getNumResults(); ++v)
    if (auto dim = mlir::dyn_cast<mlir::AffineDimExpr>(map.getResult(v)))
      extent[dim.getPosition()] = op.getVectorType().getDimSize(v);
  access.box.assign(type.getRank(), std::nullopt);
  access.residues.assign(type.getRank(), {0, 0});
  for (int64_t d = 0; d < type.getRank(); ++d) {
    access.box[d] = index_range(op.getIndices()[d], extent[d]);
    // A transfer stays inside its buffer (masked or in bounds) wherever its ranges reach.
    if (access.box[d] && !type.isDynamicDim(d))
      access.box[d]->second = std::min(access.box[d]->second, type.getDimSize(d));
    if (extent[d] == 1) access.residues[d] = index_residue(op.getIndices()[d]);
  }
}

// Every buffer access inside `kernel`. Accesses other than vector transfers and scalar loads and
// stores count as writes of the whole buffer.
std::vector<Access> kernel_accesses(mlir::Operation* kernel) {
  std::vector<Access> accesses;
  kernel->walk([&](mlir::Operation* op) {
    Access access;
    mlir::Value base;
    if (auto read = mlir::dyn_cast<mlir::vector::TransferReadOp>(op)) {
      base = read.getBase();
      transfer_extent(read, access);
    } else if (auto write = mlir::dyn_cast<mlir::vector::TransferWriteOp>(op)) {
      base = write.getBase();
      transfer_extent(write, access);
      access.write = true;
    } else if (mlir::isa<mlir::memref::LoadOp, mlir::memref::StoreOp>(op)) {
      auto load = mlir::dyn_cast<mlir::memref::LoadOp>(op);
      auto store = mlir::dyn_cast<mlir::memref::StoreOp>(op);
      base = load ? load.getMemRef() : store.getMemRef();
      access.write = static_cast<bool>(store);
      for (mlir::Value index : load ? load.getIndices() : store.getIndices()) {
        access.box.push_back(index_range(index, 1));
        access.residues.push_back(index_residue(index));
      }
    } else if (mlir::isa<mlir::ViewLikeOpInterface>(op)) {
      return;  // a view touches nothing itself
    }
    if (base) {
      auto type = mlir::dyn_cast<mlir::MemRefType>(base.getType());
      if (!type) return;
      access.span = linear_span(type, access.box);
      access.root = resolve_view(base, access);
      accesses.push_back(std::move(access));
      return;
    }
    for (mlir::Value operand : op->getOperands()) {
      if (!mlir::isa<mlir::MemRefType>(operand.getType())) continue;
      Access whole;
      whole.write = true;
      whole.root = resolve_view(operand, whole);
      std::fill(whole.box.begin(), whole.box.end(), std::nullopt);
      std::fill(whole.residues.begin(), whole.residues.end(), std::make_pair(0, 0));
      accesses.push_back(std::move(whole));
    }
  });
  return accesses;
}

// Whether `root` is an argument of its function: the caller's buffer, which another argument
// may share.
bool is_argument(mlir::Value root) {
  auto arg = mlir::dyn_cast<mlir::BlockArgument>(root);
  return arg && mlir::isa<mlir::func::FuncOp>(arg.getOwner()->getParentOp());
}

bool may_conflict(const Access& a, const Access& b) {
  if (!a.write && !b.write) return false;
  if (a.root != b.root) return is_argument(a.root) && is_argument(b.root);
  if (a.span && b.span && (a.span->second <= b.span->first || b.span->second <= a.span->first))
    return false;
  for (size_t d = 0; d < a.box.size() && d < b.box.size(); ++d) {
    if (a.box[d] && b.box[d] &&
        (a.box[d]->second <= b.box[d]->first || b.box[d]->second <= a.box[d]->first))
      return false;
    auto [m, r] = a.residues[d];
    if (m != 0 && b.residues[d].first == m && b.residues[d].second % m != r % m) return false;
  }
  return true;
}

// A kernel left on one thread, as it may be moved into one of two shares: a loop nest without
// results, allocations, calls or a loop that runs on several threads itself (a worker would
// dispatch it).
bool sequential_kernel(mlir::Operation& op, const std::vector<mlir::scf::ParallelOp>& parallel) {
  if (op.getNumResults() != 0 || !mlir::isa<mlir::scf::ParallelOp, mlir::scf::ForOp>(op))
    return false;
  if (auto loop = mlir::dyn_cast<mlir::scf::ParallelOp>(op); loop && loop.getNumReductions() != 0)
    return false;
  if (!safe_to_run_on_workers(&op)) return false;
  bool nested_parallel = false;
  op.walk([&](mlir::scf::ParallelOp nested) {
    if (std::find(parallel.begin(), parallel.end(), nested) != parallel.end())
      nested_parallel = true;
  });
  return !nested_parallel;
}

// Between kernels: computations without effects and allocations, which may move in front of them.
bool movable_before(mlir::Operation& op) {
  if (mlir::isa<mlir::memref::AllocOp>(op)) return true;
  return op.getNumRegions() == 0 && mlir::isMemoryEffectFree(&op);
}

// Two iterations of a parallel loop, the first running `first` and the second `second`
// (scf.index_switch), in front of `before`: the calling thread runs the first, a worker the
// second.
mlir::scf::ParallelOp two_shares(const std::vector<mlir::Operation*>& first,
                                 const std::vector<mlir::Operation*>& second,
                                 mlir::Operation* before) {
  mlir::OpBuilder builder(before);
  mlir::Location loc = first.front()->getLoc();
  mlir::Value zero = mlir::arith::ConstantIndexOp::create(builder, loc, 0);
  mlir::Value one = mlir::arith::ConstantIndexOp::create(builder, loc, 1);
  mlir::Value two = mlir::arith::ConstantIndexOp::create(builder, loc, 2);
  auto loop = mlir::scf::ParallelOp::create(builder, loc, mlir::ValueRange{zero},
                                            mlir::ValueRange{two}, mlir::ValueRange{one}, nullptr);
  builder.setInsertionPoint(loop.getBody()->getTerminator());
  auto halves = mlir::scf::IndexSwitchOp::create(builder, loc, mlir::TypeRange{},
                                                 loop.getBody()->getArgument(0),
                                                 llvm::ArrayRef<int64_t>{0}, 1);
  for (int h = 0; h < 2; ++h) {
    mlir::Region& region = h == 0 ? halves.getCaseRegions()[0] : halves.getDefaultRegion();
    mlir::Block* block = builder.createBlock(&region);
    builder.setInsertionPointToEnd(block);
    auto yield = mlir::scf::YieldOp::create(builder, loc);
    for (mlir::Operation* kernel : h == 0 ? first : second) kernel->moveBefore(yield);
  }
  return loop;
}

bool conflicts(const std::vector<Access>& a, const std::vector<Access>& b) {
  for (const Access& x : a)
    for (const Access& y : b)
      if (may_conflict(x, y)) return true;
  return false;
}

// Consecutive kernels, each too small to share out and none touching what another writes
// (share_kernel_runs), as two shares (two_shares) of about equal work in program order, where
// they hold enough work: Winograd's 16 input transforms per convolution (~100k units each) ran on
// one thread while the other waited; shared, the first eight positions are computed by the thread
// whose share of the batched product after them multiplies those positions (conv3_64_56 at T=2:
// 0.96 -> 0.75 ms). `between[k]` are the operations between kernel k and the next: computations
// without effects, which move in front of the shares, and deallocations, which move after them.
std::optional<mlir::scf::ParallelOp> share_segment(
    const std::vector<mlir::Operation*>& kernels,
    const std::vector<std::vector<mlir::Operation*>>& between) {
  std::vector<int64_t> work;
  int64_t total = 0;
  for (mlir::Operation* kernel : kernels) {
    work.push_back(op_work(*kernel));
    total += work.back();
  }
  if (kernels.size() < 2 || total < 2 * kMinTaskWork) return std::nullopt;
  // The split that evens the shares' work out best.
  size_t split = 1;
  int64_t before = 0, best = std::numeric_limits<int64_t>::max();
  for (size_t k = 0; k + 1 < kernels.size(); ++k) {
    before += work[k];
    if (int64_t difference = std::abs(total - 2 * before); difference < best) {
      best = difference;
      split = k + 1;
    }
  }
  // Kernels of unlike sizes (a padded buffer's border fills beside the kernel writing its
  // interior) share out unevenly: one thread would wait for the other, and the next kernel,
  // split evenly, would read most of its input from the other core (mobilenet_v2 at T=2 ran 6%
  // slower with such shares).
  constexpr double kMostUneven = 1.15;
  if (double(total + best) / double(total) > kMostUneven) return std::nullopt;
  std::vector<mlir::Operation*> freed;
  for (size_t k = 0; k + 1 < kernels.size(); ++k)
    for (mlir::Operation* op : between[k]) {
      if (mlir::isa<mlir::memref::DeallocOp>(op))
        freed.push_back(op);
      else
        op->moveBefore(kernels.front());
    }
  std::vector<mlir::Operation*> first(kernels.begin(), kernels.begin() + split);
  std::vector<mlir::Operation*> second(kernels.begin() + split, kernels.end());
  mlir::scf::ParallelOp loop = two_shares(first, second, kernels.front());
  for (auto it = freed.rbegin(); it != freed.rend(); ++it) (*it)->moveAfter(loop);
  return loop;
}

// Runs share_segment over each function's top level: maximal sequences of sequential kernels
// with only movable operations and deallocations between them, cut after the last kernel that a
// kernel may conflict with (which it depends on).
std::vector<mlir::scf::ParallelOp> share_kernel_runs(
    mlir::ModuleOp module, const std::vector<mlir::scf::ParallelOp>& parallel) {
  std::vector<mlir::scf::ParallelOp> shared;
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    if (func.isExternal()) continue;
    for (mlir::Block& block : func.getBody()) {
      std::vector<mlir::Operation*> kernels;
      std::vector<std::vector<mlir::Operation*>> between;
      std::vector<std::vector<Access>> accesses;
      // Shares the first `count` kernels of the sequence (where they are enough) and drops them.
      auto finish = [&](size_t count) {
        std::vector<mlir::Operation*> done(kernels.begin(), kernels.begin() + count);
        std::vector<std::vector<mlir::Operation*>> done_between(between.begin(),
                                                                between.begin() + count);
        if (auto loop = share_segment(done, done_between)) shared.push_back(*loop);
        kernels.erase(kernels.begin(), kernels.begin() + count);
        between.erase(between.begin(), between.begin() + count);
        accesses.erase(accesses.begin(), accesses.begin() + count);
      };
      for (mlir::Operation& op : llvm::make_early_inc_range(block)) {
        if (sequential_kernel(op, parallel)) {
          std::vector<Access> mine = kernel_accesses(&op);
          // A kernel that depends on one of the sequence starts a new one after it.
          for (size_t j = kernels.size(); j-- > 0;)
            if (conflicts(accesses[j], mine)) {
              finish(j + 1);
              break;
            }
          kernels.push_back(&op);
          between.emplace_back();
          accesses.push_back(std::move(mine));
        } else if (!kernels.empty() &&
                   (movable_before(op) || mlir::isa<mlir::memref::DeallocOp>(op))) {
          between.back().push_back(&op);
        } else {
          finish(kernels.size());
        }
      }
      finish(kernels.size());
    }
  }
  return shared;
}

}  // namespace

double two_thread_imbalance(int64_t extent, int64_t step) {
  int64_t trips = (extent + step - 1) / step;
  if (trips < 2) return std::numeric_limits<double>::infinity();
  int64_t first = std::min(extent, (trips + 1) / 2 * step);
  return static_cast<double>(std::max(first, extent - first)) / (static_cast<double>(extent) / 2);
}

void parallelize_loops(mlir::ModuleOp module) {
  // The rewrites create async operations: their dialect must be loaded (a pass would declare it).
  module.getContext()->getOrLoadDialect<mlir::async::AsyncDialect>();
  std::vector<mlir::scf::ForOp> marked;
  module.walk([&](mlir::scf::ForOp loop) {
    if (loop->hasAttr(kParallelLoopAttr) && loop.getNumRegionIterArgs() == 0)
      marked.push_back(loop);
  });
  // Outermost first; loops already folded into an outer nest are skipped.
  std::vector<mlir::Operation*> erased;
  for (mlir::scf::ForOp loop : marked) {
    if (std::find(erased.begin(), erased.end(), loop.getOperation()) != erased.end()) continue;
    if (auto parent = loop->getParentOfType<mlir::scf::ForOp>();
        parent && parent->hasAttr(kParallelLoopAttr))
      continue;
    std::vector<mlir::scf::ForOp> nest = marked_nest(loop);
    for (mlir::scf::ForOp l : nest) erased.push_back(l.getOperation());
    to_parallel(nest);
  }

  std::vector<mlir::scf::ParallelOp> candidates;
  module.walk([&](mlir::scf::ParallelOp loop) {
    if (loop.getNumReductions() != 0 || inside_a_parallel_loop(loop)) return;
    // A loop nested in a sequential one would dispatch once per outer iteration; only a marked
    // contraction loop (inside a batch loop at most) is big enough for that.
    if (inside_a_loop(loop) && !loop->hasAttr(kParallelLoopAttr)) return;
    if (!safe_to_run_on_workers(loop)) return;
    if (op_work(*loop) < 2 * kMinTaskWork) return;
    candidates.push_back(loop);
  });
  std::vector<mlir::Operation*> chosen;
  for (mlir::scf::ParallelOp loop : share_kernel_runs(module, candidates)) chosen.push_back(loop);
  for (mlir::scf::ParallelOp loop : candidates) chosen.push_back(to_one_dimension(loop));
  module.walk([&](mlir::Operation* op) { op->removeAttr(kParallelLoopAttr); });
  if (chosen.empty()) return;

  mlir::MLIRContext* context = module.getContext();
  mlir::RewritePatternSet patterns(context);
  mlir::async::populateAsyncParallelForPatterns(
      patterns, /*asyncDispatch=*/true, /*numWorkerThreads=*/-1,
      [](mlir::ImplicitLocOpBuilder builder, mlir::scf::ParallelOp loop) -> mlir::Value {
        return task_size(builder, loop);
      });
  mlir::GreedyRewriteConfig config;
  config.setStrictness(mlir::GreedyRewriteStrictness::ExistingOps);
  (void)mlir::applyOpPatternsGreedily(chosen, std::move(patterns), config);
}

}  // namespace kiln::cpu

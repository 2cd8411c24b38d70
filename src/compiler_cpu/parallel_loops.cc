#include "compiler_cpu/parallel_loops.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Async/IR/Async.h"
#include "mlir/Dialect/Async/Transforms.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
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
bool safe_to_run_on_workers(mlir::scf::ParallelOp loop) {
  bool safe = true;
  loop.getBody()->walk([&](mlir::Operation* op) {
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

}  // namespace

double two_thread_imbalance(int64_t extent, int64_t step) {
  int64_t trips = (extent + step - 1) / step;
  if (trips < 2) return std::numeric_limits<double>::infinity();
  int64_t first = std::min(extent, (trips + 1) / 2 * step);
  return static_cast<double>(std::max(first, extent - first)) / (static_cast<double>(extent) / 2);
}

void parallelize_loops(mlir::ModuleOp module) {
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
  for (mlir::scf::ParallelOp loop : candidates) chosen.push_back(to_one_dimension(loop));
  module.walk([&](mlir::Operation* op) { op->removeAttr(kParallelLoopAttr); });
  if (chosen.empty()) return;

  mlir::MLIRContext* context = module.getContext();
  // The rewrite creates async operations: their dialect must be loaded (a pass would declare it).
  context->getOrLoadDialect<mlir::async::AsyncDialect>();
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

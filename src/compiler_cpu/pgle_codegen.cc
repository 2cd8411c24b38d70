#include "compiler_cpu/pgle_codegen.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "backend/cpu/generated_code_contract.h"
#include "compiler_cpu/parallel_loops.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/CodeExtractor.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace kiln::cpu {
namespace {

constexpr const char* kBeginFunction = kProfileBegin;
constexpr const char* kEndFunction = kProfileEnd;
constexpr const char* kCandidateAttr = "kiln.tile";
constexpr const char* kPeelAttr = "kiln.peel";
constexpr const char* kCacheMAttr = "kiln.cache_m";
constexpr const char* kCacheNAttr = "kiln.cache_n";

// A way to tile and vectorise a contraction: cache tile (m, n, k), then a register tile (m, n)
// with a unit reduction step. Index 0 is the default every plain build uses.
// `peel` splits the register-tile loops into full tiles (vectorised without masks) and a remainder
// (masked): more code, much faster when sizes are not multiples of the tile.
struct TileCandidate {
  const char* name;
  int64_t cache[3];
  int64_t reg[2];
  bool peel;
};

const std::vector<TileCandidate>& candidates() {
  // 8x32 with a 64-row cache tile is the safe default at every shape measured (docs/PGLE.md).
  // The others win or lose by context: a 256-row cache tile reads each weight block once (1.2-1.5x
  // on an encoder's MLP layers, 2.5x slower on a batch-200 MLP); 4x64 wins for small batches.
  // The profile decides per kernel.
  static const std::vector<TileCandidate> list = {
      {"8x32", {64, 128, 128}, {8, 32}, true},
      {"8x32/m256", {256, 128, 128}, {8, 32}, true},
      {"4x64", {32, 256, 128}, {4, 64}, true},
      // Not profiled: cold contractions get this one, vectorised but unpeeled (little code to
      // compile) and one row at a time (no guarded rows; cold kernels are tiny anyway).
      {"1x32m", {64, 128, 128}, {1, 32}, false},
      // The default's register rows fitted to a product with fewer rows than its cache tile that
      // 8 does not divide (resnet18's last convolutions are 49 x 4608 by 4608 x 512): 7 full
      // tiles of 7 rows instead of 6 of 8 and a masked one. Its reduction steps 64 at a time:
      // those products read weights too big for the caches once, and a 64-deep block of them
      // stays in L1 across the row tiles (eight such products with their own weights, 49x4608 by
      // 4608x512, bench/matmul_shapes.py --chain 8: 2.86 -> ~2.3 ms each; resnet18 T=1 29.2 ->
      // 28.4 ms, docs/BENCHMARKS.md).
      {"7x32", {63, 128, 64}, {7, 32}, true},
      {"6x32", {60, 128, 128}, {6, 32}, true},
      {"5x32", {60, 128, 128}, {5, 32}, true},
  };
  return list;
}

// Candidate 0 (8x32) with its register rows fitted to `rows` (see candidates()).
int fitted_default(int64_t rows) {
  if (rows >= 64 || rows % 8 == 0) return 0;
  const int first_fitted = 4;
  for (int c = first_fitted; c < int(candidates().size()); ++c)
    if (rows % candidates()[c].reg[0] == 0) return c;
  return 0;
}

// The candidates the profiling runs try; later entries are for internal use.
constexpr size_t kProfiledCandidates = 3;
constexpr int kColdCandidate = 3;

bool is_kernel(mlir::Operation* op) {
  return mlir::isa<mlir::linalg::LinalgOp>(op) || mlir::isa<mlir::tensor::PadOp>(op) ||
         mlir::isa<mlir::scf::ForOp, mlir::scf::WhileOp, mlir::scf::ForallOp,
                   mlir::scf::ParallelOp>(op);
}

// Contractions the tiling script handles: matmul and batch_matmul with static shapes.
bool is_tunable_contraction(mlir::Operation* op) {
  if (!mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(op)) return false;
  for (mlir::Value v : op->getOperands()) {
    auto shaped = mlir::dyn_cast<mlir::ShapedType>(v.getType());
    if (!shaped || !shaped.hasStaticShape()) return false;
  }
  return true;
}

std::string shape_text(mlir::Type type) {
  auto shaped = mlir::dyn_cast<mlir::ShapedType>(type);
  if (!shaped || !shaped.hasRank()) return "";
  std::string out;
  for (int64_t d : shaped.getShape()) {
    if (!out.empty()) out += 'x';
    out += mlir::ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
  }
  return out.empty() ? "scalar" : out;
}

// "main/matmul[100x300,300x77->100x77]"
std::string kernel_name(mlir::func::FuncOp func, mlir::Operation* op) {
  std::string name = op->getName().getStringRef().str();
  if (name.rfind("linalg.", 0) == 0) name = name.substr(7);
  std::string shapes;
  for (mlir::Value v : op->getOperands())
    if (std::string s = shape_text(v.getType()); !s.empty())
      shapes += (shapes.empty() ? "" : ",") + s;
  std::string results;
  for (mlir::Type t : op->getResultTypes())
    if (std::string s = shape_text(t); !s.empty()) results += (results.empty() ? "" : ",") + s;
  if (!results.empty()) shapes += "->" + results;
  return func.getSymName().str() + "/" + name + "[" + shapes + "]";
}

// The op's structure printed alone: operands defined outside print as unknown values, so the text
// depends on what the kernel computes, not on the SSA numbering around it.
std::string structure_text(mlir::Operation* op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(
      os, mlir::OpPrintingFlags().printGenericOpForm().useLocalScope().elideLargeElementsAttrs(64));
  return text;
}

mlir::func::FuncOp declare(mlir::ModuleOp module, const char* name, mlir::FunctionType type) {
  if (auto existing = module.lookupSymbol<mlir::func::FuncOp>(name)) return existing;
  mlir::OpBuilder b(module.getBodyRegion());
  auto func = mlir::func::FuncOp::create(b, module.getLoc(), name, type);
  func.setPrivate();
  return func;
}

// The kernels of the module's public functions, in order, each with its fingerprint: the
// function, the op's structure, and how many identical kernels came before it.
std::vector<KernelInfo> find_kernels(mlir::ModuleOp module, const PglePlan& plan,
                                     std::vector<mlir::Operation*>& ops) {
  std::vector<KernelInfo> kernels;
  std::map<uint64_t, int> occurrences;
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    if (func.isExternal() || func.isPrivate()) continue;
    for (mlir::Operation& op : func.getBody().front()) {
      if (!is_kernel(&op)) continue;
      std::string text = func.getSymName().str() + "\n" + structure_text(&op);
      uint64_t structure = llvm::xxh3_64bits(text);
      text += "\n#" + std::to_string(occurrences[structure]++);
      KernelInfo info;
      info.fingerprint = llvm::xxh3_64bits(text);
      info.name = kernel_name(func, &op);
      if (plan.instrument && is_tunable_contraction(&op))
        for (size_t c = 0; c < kProfiledCandidates; ++c)
          info.candidate_names.push_back(candidates()[c].name);
      kernels.push_back(std::move(info));
      ops.push_back(&op);
    }
  }
  return kernels;
}

// With a profile: the fastest measured candidate per contraction (`chosen`), and the cold set (the
// cheapest kernels whose costs together stay under the cold share).
void choose_from_profile(const PglePlan& plan, const std::vector<KernelInfo>& kernels,
                         const std::vector<mlir::Operation*>& ops, std::vector<int>& chosen,
                         std::vector<bool>& cold) {
  const FdoProfile& profile = *plan.profile;
  std::vector<std::pair<int64_t, size_t>> by_cost;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const KernelProfile* measured = profile.find(kernels[k].fingerprint);
    if (measured == nullptr) continue;
    if (is_tunable_contraction(ops[k]) && measured->best_candidate() >= 0 &&
        measured->best_candidate() < int(kProfiledCandidates))
      chosen[k] = measured->best_candidate();
    by_cost.emplace_back(measured->best_ns(), k);
  }
  std::sort(by_cost.begin(), by_cost.end());
  // The costliest kernel stays out of the total the budget is a share of: one kernel stalled in a
  // profiling run must not make others look negligible.
  double total =
      double(profile.total_ns()) - (by_cost.empty() ? 0.0 : double(by_cost.back().first));
  double budget = total * plan.cold_share_percent / 100.0;
  double spent = 0;
  // Low effort loses vectorisation: a kernel with real work runs many times slower, so only
  // kernels whose absolute cost is tiny qualify, however small their share.
  for (const auto& [ns, k] : by_cost) {
    if (ns > plan.cold_max_ns || spent + double(ns) > budget) break;
    spent += double(ns);
    cold[k] = true;
  }
}

// One copy of `op` per candidate under an scf.index_switch on `selector` (the runtime's answer to
// the begin call); returns the switch, which replaces `op`.
mlir::Operation* dispatch_candidates(mlir::OpBuilder& b, mlir::Operation* op, mlir::Value selector,
                                     int count) {
  mlir::Location loc = op->getLoc();
  mlir::Value index = mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(), selector);
  std::vector<int64_t> cases;
  for (int c = 0; c + 1 < count; ++c) cases.push_back(c);
  auto dispatch = mlir::scf::IndexSwitchOp::create(b, loc, op->getResultTypes(), index, cases,
                                                   static_cast<unsigned>(cases.size()));
  for (int c = 0; c < count; ++c) {
    mlir::Region& region =
        c + 1 < count ? dispatch.getCaseRegions()[c] : dispatch.getDefaultRegion();
    mlir::Block* block = b.createBlock(&region);
    b.setInsertionPointToStart(block);
    mlir::Operation* copy = b.clone(*op);
    copy->setAttr(kCandidateAttr, b.getI64IntegerAttr(c));
    mlir::scf::YieldOp::create(b, loc, copy->getResults());
  }
  op->replaceAllUsesWith(dispatch->getResults());
  op->erase();
  return dispatch;
}

}  // namespace

std::vector<KernelInfo> instrument_kernels(mlir::ModuleOp module, const PglePlan& plan,
                                           std::vector<int64_t>* cold_kernels) {
  mlir::MLIRContext* ctx = module.getContext();
  mlir::Type i64 = mlir::IntegerType::get(ctx, 64);
  std::vector<mlir::Operation*> ops;
  std::vector<KernelInfo> kernels = find_kernels(module, plan, ops);
  if (kernels.empty()) return kernels;
  std::vector<int> chosen(kernels.size(), 0);
  std::vector<bool> cold(kernels.size(), false);
  if (plan.profile) choose_from_profile(plan, kernels, ops, chosen, cold);

  auto begin_fn = declare(module, kBeginFunction, mlir::FunctionType::get(ctx, {i64}, {i64}));
  auto end_fn = declare(module, kEndFunction, mlir::FunctionType::get(ctx, {i64}, {}));
  for (size_t k = 0; k < kernels.size(); ++k) {
    mlir::Operation* op = ops[k];
    mlir::Location loc = op->getLoc();
    mlir::OpBuilder b(op);
    mlir::Value id = mlir::arith::ConstantIntOp::create(b, loc, static_cast<int64_t>(k), 64);
    auto begin = mlir::func::CallOp::create(b, loc, begin_fn, mlir::ValueRange{id});
    mlir::Operation* last = op;
    if (int count = kernels[k].candidates(); count > 1)
      last = dispatch_candidates(b, op, begin.getResult(0), count);
    else if (is_tunable_contraction(op))
      op->setAttr(kCandidateAttr, b.getI64IntegerAttr(cold[k] ? kColdCandidate : chosen[k]));
    b.setInsertionPointAfter(last);
    mlir::func::CallOp::create(b, loc, end_fn, mlir::ValueRange{id});
    if (cold[k] && cold_kernels) cold_kernels->push_back(static_cast<int64_t>(k));
  }
  return kernels;
}

int64_t balanced_cache_tile(int64_t size, int64_t tile, int64_t granule) {
  // Enough tiles share out evenly as they are; one tile is not split at all.
  constexpr double kEvenEnough = 1.07;
  // A dimension no larger than the tile is one tile of exactly its size: a larger tile would
  // leave its size as min(tile, size - offset), which the register tiling cannot see is a
  // multiple of the register tile, and every register tile (each FMA) would be masked.
  if (size <= tile) return size;
  if ((size + tile - 1) / tile >= kEnoughIterationsToShare) return tile;
  int64_t best = tile;
  double best_imbalance = two_thread_imbalance(size, tile);
  // An even number of tiles, the fewest that splits evenly enough (the larger a row tile, the
  // fewer times the other operand's block is read), else the most even.
  for (int64_t count = 2; count <= kEnoughIterationsToShare; count += 2) {
    int64_t per_tile = (size + count - 1) / count;
    int64_t candidate = (per_tile + granule - 1) / granule * granule;
    if (candidate > 2 * tile) continue;
    double imbalance = two_thread_imbalance(size, candidate);
    if (imbalance <= kEvenEnough) return candidate;
    if (imbalance < best_imbalance) {
      best = candidate;
      best_imbalance = imbalance;
    }
  }
  return best;
}

std::vector<TileGroup> prepare_contractions(mlir::ModuleOp module) {
  mlir::Builder b(module.getContext());
  std::set<std::tuple<int, int, bool, int64_t, int64_t>> groups;
  module.walk([&](mlir::Operation* op) {
    bool batch = mlir::isa<mlir::linalg::BatchMatmulOp>(op);
    if (!batch && !mlir::isa<mlir::linalg::MatmulOp>(op)) return;
    if (!op->hasAttr(kCandidateAttr)) op->setAttr(kCandidateAttr, b.getI64IntegerAttr(0));
    int64_t candidate = mlir::cast<mlir::IntegerAttr>(op->getAttr(kCandidateAttr)).getInt();
    auto out = mlir::dyn_cast<mlir::ShapedType>(op->getOperand(2).getType());
    if (candidate == 0 && out && out.hasStaticShape()) {
      candidate = fitted_default(out.getShape()[out.getRank() - 2]);
      op->setAttr(kCandidateAttr, b.getI64IntegerAttr(candidate));
    }
    if (candidate < 0 || candidate >= int64_t(candidates().size())) return;  // left as loops
    const TileCandidate& c = candidates()[candidate];
    int64_t sizes[2], cache[2];
    for (int d = 0; d < 2; ++d) {
      sizes[d] = out && out.hasStaticShape() ? out.getShape()[out.getRank() - 2 + d]
                                             : mlir::ShapedType::kDynamic;
      cache[d] = sizes[d] == mlir::ShapedType::kDynamic
                     ? c.cache[d]
                     : balanced_cache_tile(sizes[d], c.cache[d], c.reg[d]);
    }
    // Peel the register loop of m (bit 0) and n (bit 1) unless it is statically divisible:
    // peeling such a loop has nothing to split and fails.
    int peel = 0;
    for (int d = 0; c.peel && d < 2; ++d) {
      int64_t size = sizes[d];
      bool static_bound =
          size != mlir::ShapedType::kDynamic && (size % cache[d] == 0 || size <= cache[d]);
      int64_t bound = static_bound ? std::min(size, cache[d]) : 0;
      if (!static_bound || bound % c.reg[d] != 0) peel |= 1 << d;
    }
    op->setAttr(kPeelAttr, b.getI64IntegerAttr(peel));
    op->setAttr(kCacheMAttr, b.getI64IntegerAttr(cache[0]));
    op->setAttr(kCacheNAttr, b.getI64IntegerAttr(cache[1]));
    groups.insert({static_cast<int>(candidate), peel, batch, cache[0], cache[1]});
  });
  std::vector<TileGroup> out;
  for (const auto& [candidate, peel, batch, cache_m, cache_n] : groups)
    out.push_back({candidate, peel, batch, cache_m, cache_n});
  return out;
}

namespace {

std::string list_text(std::initializer_list<int64_t> sizes) {
  std::string out;
  for (int64_t v : sizes) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return "[" + out + "]";
}

constexpr const char* kScriptHead = R"mlir(
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
)mlir";
constexpr const char* kScriptTail = R"mlir(    transform.yield
  }
}
)mlir";

}  // namespace

std::string tile_group_script(const TileGroup& group) {
  const TileCandidate& c = candidates()[group.candidate];
  bool batch = group.batch;
  std::string op = batch ? "linalg.batch_matmul" : "linalg.matmul";
  std::string types =
      batch ? "(!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op, "
              "!transform.any_op)"
            : "(!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)";
  std::string loops = batch ? ":4" : ":3";
  auto sizes = [&](int64_t m, int64_t n, int64_t k) {
    return batch ? list_text({1, m, n, k}) : list_text({m, n, k});
  };
  std::string match = "transform.structured.match ops{[\"" + op + "\"]} attributes{" +
                      kCandidateAttr + " = " + std::to_string(group.candidate) + " : i64, " +
                      kPeelAttr + " = " + std::to_string(group.peel) + " : i64, " + kCacheMAttr +
                      " = " + std::to_string(group.cache_m) + " : i64, " + kCacheNAttr + " = " +
                      std::to_string(group.cache_n) +
                      " : i64} in %root : (!transform.any_op) -> !transform.any_op\n";
  // Tile for the caches, then to a register tile with a unit reduction step.
  std::string s = kScriptHead;
  s += "    %op = " + match;
  s += "    %l2, %outer" + loops + " = transform.structured.tile_using_for %op tile_sizes " +
       sizes(group.cache_m, group.cache_n, c.cache[2]) + " : (!transform.any_op) -> " + types +
       "\n";
  // Cache tiles along the parallel dimensions write disjoint blocks of the result: those loops may
  // run on several threads (compiler_cpu/parallel_loops.h).
  for (int d = 0; d < (batch ? 3 : 2); ++d)
    s += "    transform.annotate %outer#" + std::to_string(d) + " \"" + kParallelLoopAttr +
         "\" : !transform.any_op\n";
  s += "    %reg, %inner" + loops + " = transform.structured.tile_using_for %l2 tile_sizes " +
       sizes(c.reg[0], c.reg[1], 1) + " : (!transform.any_op) -> " + types + "\n";
  // Full tiles vectorise without masks; peeling the outer loop consumes handles nested in it, so
  // the inner (n) loop goes first and the tiles are matched again afterwards.
  int m_loop = batch ? 1 : 0;
  for (int d : {1, 0}) {
    if (!(group.peel & (1 << d))) continue;
    std::string f = "%for" + std::to_string(d);
    s += "    " + f + " = transform.cast %inner#" + std::to_string(m_loop + d) +
         " : !transform.any_op to !transform.op<\"scf.for\">\n";
    s += "    " + f + "_main, " + f + "_rest = transform.loop.peel " + f +
         " : (!transform.op<\"scf.for\">) -> (!transform.any_op, !transform.any_op)\n";
  }
  s += "    %tiles = " + match;
  s += "    transform.structured.vectorize %tiles vector_sizes " + sizes(c.reg[0], c.reg[1], 1) +
       " : !transform.any_op\n";
  return s + kScriptTail;
}

std::string contraction_cleanup_script() {
  // The reduction becomes a contraction; masked transfers of remainder tiles are lowered, and
  // subviews fold into the transfers' indices so each accumulator is addressed on its base buffer
  // (what hoist_accumulators needs).
  std::string s = kScriptHead;
  s += R"mlir(
    %funcs = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.lower_masked_transfers
    } : !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
    } : !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.canonicalization
      transform.apply_patterns.memref.fold_memref_alias_ops
    } : !transform.any_op
    transform.apply_cse to %funcs : !transform.any_op
)mlir";
  return s + kScriptTail;
}

std::string contraction_lowering_script() {
  // After the accumulators left their reduction loops: contractions lowered to outer products
  // (FMAs).
  std::string s = kScriptHead;
  s += R"mlir(
    %funcs = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.canonicalization
    } : !transform.any_op
)mlir";
  return s + kScriptTail;
}

void add_profile_thunks(llvm::Module& module) {
  llvm::LLVMContext& ctx = module.getContext();
  auto* ptr = llvm::PointerType::getUnqual(ctx);
  auto* i64 = llvm::Type::getInt64Ty(ctx);
  // int64_t event(void* site, int64_t kernel, int64_t phase): phase 0 begins a kernel and returns
  // the candidate to run; phase 1 ends it.
  auto* event_type = llvm::FunctionType::get(i64, {ptr, i64, i64}, false);
  llvm::GlobalVariable* fn_slot = nullptr;
  llvm::GlobalVariable* site_slot = nullptr;
  for (int phase = 0; phase < 2; ++phase) {
    llvm::Function* thunk = module.getFunction(phase == 0 ? kBeginFunction : kEndFunction);
    if (thunk == nullptr || !thunk->isDeclaration()) continue;
    if (fn_slot == nullptr) {
      auto slot = [&](const char* name) {
        return new llvm::GlobalVariable(module, ptr, /*isConstant=*/false,
                                        llvm::GlobalValue::ExternalLinkage,
                                        llvm::ConstantPointerNull::get(ptr), name);
      };
      fn_slot = slot(kProfileFunctionSlot);
      site_slot = slot(kProfileSiteSlot);
    }
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", thunk));
    llvm::Value* fn = b.CreateLoad(ptr, fn_slot);
    llvm::Value* site = b.CreateLoad(ptr, site_slot);
    llvm::Value* result = b.CreateCall(event_type, fn, {site, thunk->getArg(0), b.getInt64(phase)});
    if (thunk->getReturnType()->isVoidTy())
      b.CreateRetVoid();
    else
      b.CreateRet(result);
  }
}

std::set<std::string> outline_kernels(llvm::Module& module, const std::vector<int64_t>& kernels) {
  std::set<std::string> outlined;
  llvm::Function* begin_fn = module.getFunction(kBeginFunction);
  llvm::Function* end_fn = module.getFunction(kEndFunction);
  if (begin_fn == nullptr || end_fn == nullptr) return outlined;
  auto find_call = [](llvm::Function* callee, int64_t kernel) -> llvm::CallInst* {
    for (llvm::User* user : callee->users()) {
      auto* call = llvm::dyn_cast<llvm::CallInst>(user);
      if (call == nullptr || call->getCalledFunction() != callee) continue;
      auto* id = llvm::dyn_cast<llvm::ConstantInt>(call->getArgOperand(0));
      if (id != nullptr && id->getSExtValue() == kernel) return call;
    }
    return nullptr;
  };
  for (int64_t kernel : kernels) {
    llvm::CallInst* begin = find_call(begin_fn, kernel);
    llvm::CallInst* end = find_call(end_fn, kernel);
    if (begin == nullptr || end == nullptr || begin->getFunction() != end->getFunction()) continue;
    llvm::Function* owner = begin->getFunction();
    llvm::BasicBlock* entry = begin->getParent()->splitBasicBlock(begin->getNextNode(), "kernel");
    llvm::BasicBlock* exit = end->getParent()->splitBasicBlock(end, "kernel.done");
    // The kernel's blocks: everything reachable from its entry before the end call.
    std::vector<llvm::BasicBlock*> blocks{entry};
    std::set<llvm::BasicBlock*> seen{entry, exit};
    bool closed = true;
    for (size_t i = 0; i < blocks.size(); ++i) {
      llvm::Instruction* terminator = blocks[i]->getTerminator();
      if (terminator->getNumSuccessors() == 0) closed = false;  // leaves the function: not SESE
      for (llvm::BasicBlock* next : llvm::successors(blocks[i]))
        if (seen.insert(next).second) blocks.push_back(next);
    }
    if (!closed) continue;
    llvm::CodeExtractorAnalysisCache cache(*owner);
    llvm::CodeExtractor extractor(blocks, nullptr, false, nullptr, nullptr, nullptr, false,
                                  /*AllowAlloca=*/true, nullptr,
                                  "kiln_kernel_" + std::to_string(kernel));
    if (!extractor.isEligible()) continue;
    llvm::Function* function = extractor.extractCodeRegion(cache);
    if (function == nullptr) continue;
    function->addFnAttr(llvm::Attribute::NoInline);
    outlined.insert(function->getName().str());
  }
  return outlined;
}

std::unique_ptr<llvm::Module> split_functions(llvm::Module& module,
                                              const std::set<std::string>& names) {
  int anonymous = 0;
  for (llvm::GlobalValue& value : module.global_values()) {
    if (!value.hasLocalLinkage()) continue;
    if (!value.hasName()) value.setName("kiln.local." + std::to_string(anonymous++));
    value.setLinkage(llvm::GlobalValue::ExternalLinkage);
    value.setVisibility(llvm::GlobalValue::HiddenVisibility);
  }
  llvm::ValueToValueMapTy map;
  std::unique_ptr<llvm::Module> split =
      llvm::CloneModule(module, map, [&](const llvm::GlobalValue* value) {
        return llvm::isa<llvm::Function>(value) && names.count(value->getName().str()) > 0;
      });
  for (const std::string& name : names)
    if (llvm::Function* f = module.getFunction(name)) f->deleteBody();
  return split;
}

}  // namespace kiln::cpu

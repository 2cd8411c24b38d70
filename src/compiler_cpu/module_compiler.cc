// kiln's CPU compiler: MLIR text/bytecode → MLIR passes → LLVM IR → native object → shared object.
// With llvm_codegen.cc (its LLVM half), the translation units that include MLIR and LLVM headers;
// they are built into libkiln_compiler, which the runtime loads on the first compile.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <set>
#include <sstream>

#include "backend/cpu/compiler_interface.h"
#include "backend/cpu/pipeline.h"
#include "compiler_cpu/accumulator_hoisting.h"
#include "compiler_cpu/crash_recovery.h"
#include "compiler_cpu/early_free.h"
#include "compiler_cpu/elementwise_vectorize.h"
#include "compiler_cpu/epilogue_fusion.h"
#include "compiler_cpu/fast_exp.h"
#include "compiler_cpu/llvm_codegen.h"
#include "compiler_cpu/loop_collapse.h"
#include "compiler_cpu/parallel_loops.h"
#include "compiler_cpu/pgle_codegen.h"
#include "compiler_cpu/strided_vectorize.h"
#include "compiler_cpu/transform_scripts.h"
#include "kiln/config.h"
#include "kiln/file.h"
#include "kiln/logging.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/CodeGen/ReplaceWithVeclib.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Scalar/LowerMatrixIntrinsics.h"
#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Transform/IR/TransformOps.h"
#include "mlir/Dialect/Transform/Transforms/TransformInterpreterUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln::cpu {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Remembers which pass failed, so errors can name it.
class FailedPassRecorder : public mlir::PassInstrumentation {
 public:
  explicit FailedPassRecorder(std::string* failed) : failed_(failed) {}
  void runAfterPassFailed(mlir::Pass* pass, mlir::Operation*) override {
    if (failed_->empty()) *failed_ = pass->getArgument().str();
  }

 private:
  std::string* failed_;
};

Result<TensorType> tensor_type_of(mlir::Type type, bool allow_scalar = false) {
  auto shaped = mlir::dyn_cast<mlir::ShapedType>(type);
  bool ranked = mlir::isa<mlir::RankedTensorType>(type) || mlir::isa<mlir::MemRefType>(type);
  TensorType out;
  mlir::Type element = type;
  if (shaped && ranked) {
    element = shaped.getElementType();
  } else if (allow_scalar && (type.isIntOrIndexOrFloat())) {
    out.scalar = true;
    if (type.isIndex()) element = mlir::IntegerType::get(type.getContext(), 64);  // index is i64
  } else {
    return unimplemented(
        "only ranked tensor, memref and scalar arguments (tensor or memref results, or one "
        "scalar result) are supported");
  }
  if (element.isF32())
    out.dtype = DType::kF32;
  else if (element.isF64())
    out.dtype = DType::kF64;
  else if (element.isInteger(1))
    out.dtype = DType::kI1;
  else if (element.isInteger(8))
    out.dtype = DType::kI8;
  else if (element.isInteger(16))
    out.dtype = DType::kI16;
  else if (element.isInteger(32))
    out.dtype = DType::kI32;
  else if (element.isInteger(64))
    out.dtype = DType::kI64;
  else
    return unimplemented("element type is not one of f32, f64, i1, i8, i16, i32, i64");
  if (!out.scalar)
    for (int64_t d : shaped.getShape())
      out.shape.push_back(mlir::ShapedType::isDynamic(d) ? kDynamicDim : d);
  return out;
}

std::string location_text(mlir::Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto file = mlir::dyn_cast<mlir::FileLineColLoc>(loc)) {
    os << file.getFilename().getValue() << ":" << file.getLine() << ":" << file.getColumn();
  } else {
    loc.print(os);
  }
  return text;
}

// Bounds on what kiln hands to MLIR. Its parsers and passes recurse once per nesting level
// (a 5,000-deep program overflows the stack), and it materialises every constant in full (a
// splat over 10^11 elements exhausts memory): no real program comes near these.
constexpr int kMaxNestingDepth = 512;
constexpr uint64_t kMaxConstantBytes = uint64_t{1} << 30;
// No tensor can be larger than a process's address space (47 bits on x86-64 and AArch64 Linux).
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 47;

// Where MLIR text first nests brackets deeper than kMaxNestingDepth, or an empty string. Strings
// and comments are skipped; `->` and `>=` are not brackets. Miscounting is harmless: a real
// program's depth is a few dozen.
std::string excess_nesting(std::string_view text) {
  int depth = 0;
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    } else if (c == '"') {
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\') ++i;
      if (i < text.size() && text[i] == '\n') --i;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '(' || c == '[' || c == '{' ||
               (c == '<' && (i + 1 >= text.size() || text[i + 1] != '='))) {
      if (++depth > kMaxNestingDepth)
        return std::to_string(line) + ":" + std::to_string(i - line_start + 1);
    } else if (c == ')' || c == ']' || c == '}' ||
               (c == '>' && (i == 0 || text[i - 1] != '-') &&
                (i + 1 >= text.size() || text[i + 1] != '='))) {
      depth = depth > 0 ? depth - 1 : 0;
    }
  }
  return "";
}

// Bytes a value of `type` occupies when all its static dimensions are counted, saturating at
// UINT64_MAX; 0 for types that are not shaped.
uint64_t static_byte_size(mlir::Type type) {
  auto shaped = mlir::dyn_cast<mlir::ShapedType>(type);
  if (!shaped || !shaped.hasRank()) return 0;
  mlir::Type element = shaped.getElementType();
  uint64_t bits = element.isIntOrFloat() ? element.getIntOrFloatBitWidth() : 64;
  uint64_t bytes = std::max<uint64_t>(1, (bits + 7) / 8);
  for (int64_t d : shaped.getShape()) {
    if (mlir::ShapedType::isDynamic(d)) continue;
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) return UINT64_MAX;
  }
  return bytes;
}

std::string byte_count_text(uint64_t bytes) {
  return bytes == UINT64_MAX ? "more than 2^64 bytes" : std::to_string(bytes) + " bytes";
}

// Refuses what kiln cannot compile or describe safely: symbol names that are not UTF-8 (they
// are recorded in JSON metadata), tensors larger than any address space, constants too big to
// embed in code.
Status check_module_limits(mlir::ModuleOp module) {
  Status status;
  auto fail = [&](mlir::Operation* op, const std::string& what) {
    status = invalid_argument(location_text(op->getLoc()) + ": error: " + what);
    return mlir::WalkResult::interrupt();
  };
  auto check_type = [&](mlir::Operation* op, mlir::Type type) {
    uint64_t bytes = static_byte_size(type);
    if (bytes <= kMaxTensorBytes) return true;
    std::string text;
    llvm::raw_string_ostream os(text);
    type.print(os);
    fail(op, "'" + text + "' needs " + byte_count_text(bytes) +
                 ", more than a process can address (2^47 bytes); reduce its shape");
    return false;
  };
  module->walk([&](mlir::Operation* op) -> mlir::WalkResult {
    // Bytecode is not depth-checked before parsing; the passes recurse per nesting level too.
    int depth = 0;
    for (mlir::Operation* parent = op->getParentOp(); parent && depth <= kMaxNestingDepth;
         parent = parent->getParentOp())
      ++depth;
    if (depth > kMaxNestingDepth)
      return fail(op, "operations nested deeper than " + std::to_string(kMaxNestingDepth) +
                          " levels, more than kiln compiles safely; flatten the program");
    if (auto name = op->getAttrOfType<mlir::StringAttr>(mlir::SymbolTable::getSymbolAttrName()))
      if (!llvm::json::isUTF8(name.getValue()))
        return fail(op, "the symbol name of '" + op->getName().getStringRef().str() +
                            "' is not valid UTF-8; kiln records module and function names in "
                            "JSON metadata: rename it");
    for (mlir::Type t : op->getResultTypes())
      if (!check_type(op, t)) return mlir::WalkResult::interrupt();
    for (mlir::Region& region : op->getRegions())
      for (mlir::Block& block : region)
        for (mlir::BlockArgument arg : block.getArguments())
          if (!check_type(op, arg.getType())) return mlir::WalkResult::interrupt();
    if (auto func = mlir::dyn_cast<mlir::FunctionOpInterface>(op))
      for (mlir::Type t :
           llvm::concat<const mlir::Type>(func.getArgumentTypes(), func.getResultTypes()))
        if (!check_type(op, t)) return mlir::WalkResult::interrupt();
    for (mlir::NamedAttribute attr : op->getAttrs()) {
      auto elements = mlir::dyn_cast<mlir::ElementsAttr>(attr.getValue());
      if (!elements) continue;
      uint64_t bytes = static_byte_size(elements.getType());  // the tighter of the two bounds
      if (bytes > kMaxConstantBytes)
        return fail(op, "a constant of " + byte_count_text(bytes) +
                            " is larger than kiln embeds in code (1 GiB); pass it as an argument");
    }
    return mlir::WalkResult::advance();
  });
  return status;
}

// Kernels PGLE found cold are compiled with LLVM's O1 pipeline and fast instruction selection.
constexpr int kColdOptLevel = 1;

// What PGLE asks of this compile: a first pass (instrumented, rotating candidates) or a recompile
// with a measured profile. A profile that does not decode is refused loudly and the plain build is
// made instead.
PglePlan pgle_plan(const CompileOptions& options, const std::string& module_name) {
  PglePlan plan;
  plan.instrument = options.pgle_build == PgleBuild::kInstrumented;
  if (!options.fdo_profile.empty()) {
    Result<FdoProfile> profile = decode_fdo_profile(options.fdo_profile);
    if (!profile.ok()) {
      log::warning("the FDO profile given for '" + module_name + "' cannot be used: " +
                   profile.status().message() + "; compiling the plain build without it");
      plan.instrument = false;
    } else {
      plan.profile = std::move(profile).value();
      plan.instrument = false;
    }
  }
  plan.cold_share_percent = config::get_double("KILN_PGLE_COLD_SHARE_PERCENT");
  plan.cold_max_ns = config::get_int("KILN_PGLE_COLD_MAX_NS");
  return plan;
}

// Whether the module holds an op of one of these names.
bool has_op(mlir::ModuleOp module, std::initializer_list<llvm::StringRef> names) {
  bool found = false;
  module->walk([&](mlir::Operation* op) {
    found = llvm::is_contained(names, op->getName().getStringRef());
    return found ? mlir::WalkResult::interrupt() : mlir::WalkResult::advance();
  });
  return found;
}

// cf.assert (what runtime verification's checks are) lowered to a message that lets the program go
// on, as mlir-opt -test-cf-assert does, instead of one that aborts it. Runs on LLVM-dialect
// functions, just before convert-cf-to-llvm (which would lower the asserts to aborts).
Status report_failed_checks(mlir::ModuleOp module, std::string& diagnostics) {
  mlir::MLIRContext* context = module.getContext();
  mlir::LLVMTypeConverter converter(context);
  mlir::RewritePatternSet patterns(context);
  mlir::cf::populateAssertToLLVMConversionPattern(converter, patterns, /*abortOnFailure=*/false);
  mlir::ConversionTarget target(*context);
  target.addIllegalOp<mlir::cf::AssertOp>();
  target.markUnknownOpDynamicallyLegal([](mlir::Operation*) { return true; });
  if (mlir::failed(mlir::applyPartialConversion(module, target, std::move(patterns))))
    return compile_error("lowering runtime checks to reports failed:\n" + diagnostics);
  return Status();
}

// Whether `module` computes with floating-point types the CPU has no instructions for (8-, 6- and
// 4-bit floats, tf32). Such a module's float arithmetic becomes calls into kiln's runtime
// (backend/cpu/small_floats.h). (Concrete types, not FloatType: interface ids are not reliable
// across this library and libMLIR.)
bool uses_emulated_floats(mlir::ModuleOp module) {
  auto emulated = [](mlir::Type type) {
    return mlir::isa<mlir::Float8E5M2Type, mlir::Float8E4M3Type, mlir::Float8E4M3FNType,
                     mlir::Float8E5M2FNUZType, mlir::Float8E4M3FNUZType,
                     mlir::Float8E4M3B11FNUZType, mlir::Float8E3M4Type, mlir::Float8E8M0FNUType,
                     mlir::Float6E2M3FNType, mlir::Float6E3M2FNType, mlir::Float4E2M1FNType,
                     mlir::FloatTF32Type>(mlir::getElementTypeOrSelf(type));
  };
  bool found = false;
  module->walk([&](mlir::Operation* op) {
    for (mlir::Type type : op->getResultTypes()) found |= emulated(type);
    for (mlir::Value operand : op->getOperands()) found |= emulated(operand.getType());
    return found ? mlir::WalkResult::interrupt() : mlir::WalkResult::advance();
  });
  return found;
}

// Whether ownership-based deallocation has work in `module`: buffers to free, or buffers a
// function returns (which it must hand over owned, copying a global or an argument).
bool needs_buffer_deallocation(mlir::ModuleOp module) {
  for (auto func : module.getOps<mlir::func::FuncOp>())
    for (mlir::Type type : func.getFunctionType().getResults())
      if (mlir::isa<mlir::BaseMemRefType>(type)) return true;
  bool allocates = false;
  module->walk([&](mlir::Operation* op) {
    llvm::StringRef name = op->getName().getStringRef();
    if (name == "memref.alloc" || name == "memref.realloc" || name == "bufferization.alloc_tensor")
      allocates = true;
    return allocates ? mlir::WalkResult::interrupt() : mlir::WalkResult::advance();
  });
  return allocates;
}

// The name under which kiln's elementwise fusion appears in the pipeline (and is disabled).
constexpr const char* kElementwiseFusionStep = "linalg-fuse-elementwise-ops";

// Whether a kernel's body does more than plain arithmetic: math functions (exp, log, ...) or
// division, each far dearer than an add or a multiply.
bool computes_costly_math(mlir::linalg::GenericOp op) {
  if (calls_math(op)) return true;
  for (mlir::Operation& inner : op.getRegion().front())
    if (mlir::isa<mlir::arith::DivFOp, mlir::arith::RemFOp>(inner)) return true;
  return false;
}

// Whether fusing `operand`'s producer into its consumer would compute the producer's math (exp,
// log, division...) once per consumer element instead of once per producer element: the consumer
// broadcasts the producer's result. A squeeze-and-excitation gate's 144 sigmoids became 451,584
// when fused into the multiplication that scales the feature map with them.
bool recomputes_costly_math(mlir::OpOperand* operand) {
  auto producer = operand->get().getDefiningOp<mlir::linalg::GenericOp>();
  auto consumer = mlir::dyn_cast<mlir::linalg::GenericOp>(operand->getOwner());
  if (!producer || !consumer || consumer.getMatchingIndexingMap(operand).isPermutation())
    return false;
  return computes_costly_math(producer);
}

// A copy kernel (its body yields its one input) that reads its input through a map other than a
// projected permutation: every S-th pixel, a window, a shifted view.
bool is_gathering_copy(mlir::Operation* op, mlir::OpOperand* operand) {
  auto copy = mlir::dyn_cast<mlir::linalg::GenericOp>(op);
  if (!copy || copy.getNumDpsInputs() != 1 || copy.getNumReductionLoops() != 0) return false;
  if (copy.getMatchingIndexingMap(operand).isProjectedPermutation()) return false;
  auto yield = mlir::dyn_cast<mlir::linalg::YieldOp>(copy.getBody()->getTerminator());
  return yield && yield.getNumOperands() == 1 &&
         yield.getOperand(0) == copy.getBody()->getArgument(0);
}

// A kernel of plain arithmetic (no math functions, no division) computing a new tensor
// elementwise, read only by gathering copies: the phase planes of a strided depthwise convolution,
// each taking every S-th pixel of it. Each copy gets a clone of its own, which elementwise fusion
// then merges into it, so the kernel's pass over memory goes and each copy computes what it takes.
// (The copies read every S-th pixel, one at a time or through LLVM's interleaved loads: math
// functions there would run one call per element, slower than the pass saved; a copy that reads an
// element more than once recomputes it.)
void clone_into_gathering_copies(mlir::ModuleOp module) {
  std::vector<mlir::linalg::GenericOp> shared;
  module.walk([&](mlir::linalg::GenericOp producer) {
    if (producer.getNumDpsInits() != 1 || producer.getNumReductionLoops() != 0 ||
        producer->getNumResults() != 1 || producer->getResult(0).hasOneUse() ||
        producer->getResult(0).use_empty())
      return;
    if (!producer.getIndexingMapsArray().back().isIdentity() || computes_costly_math(producer))
      return;
    for (mlir::OpOperand& use : producer->getResult(0).getUses())
      if (!is_gathering_copy(use.getOwner(), &use)) return;
    shared.push_back(producer);
  });
  for (mlir::linalg::GenericOp producer : shared) {
    std::vector<mlir::OpOperand*> uses;
    for (mlir::OpOperand& use : producer->getResult(0).getUses()) uses.push_back(&use);
    mlir::OpBuilder builder(producer);
    for (size_t k = 1; k < uses.size(); ++k) uses[k]->set(builder.clone(*producer)->getResult(0));
  }
}

// Upstream's elementwise fusion, except that reshapes are never folded into a named contraction:
// that would turn a matmul into a generic contraction the tiling scripts do not know, and the
// projections of an attention block would run untiled.
void fuse_elementwise_ops(mlir::ModuleOp module) {
  mlir::MLIRContext* context = module.getContext();
  auto single_use_producer = [](mlir::OpOperand* operand) {
    mlir::Operation* producer = operand->get().getDefiningOp();
    return producer != nullptr && producer->hasOneUse();
  };
  auto fusable = [&](mlir::OpOperand* operand) {
    return single_use_producer(operand) && !recomputes_costly_math(operand);
  };
  auto is_named = [](mlir::Operation* op) {
    return op != nullptr && mlir::isa<mlir::linalg::LinalgOp>(op) &&
           !mlir::isa<mlir::linalg::GenericOp>(op);
  };
  // A kernel that reads a product's result keeps the product's shape: reshaped, it would read the
  // product through a reshape and could no longer be computed in the product's tiles
  // (kiln-fuse-epilogues).
  auto reads_named_result = [&](mlir::Operation* op) {
    if (!op) return false;
    for (mlir::Value v : op->getOperands())
      if (is_named(v.getDefiningOp())) return true;
    return false;
  };
  auto reshape_control = [&](mlir::OpOperand* operand) {
    mlir::Operation* producer = operand->get().getDefiningOp();
    return single_use_producer(operand) && !is_named(producer) && !is_named(operand->getOwner()) &&
           !reads_named_result(producer) && !reads_named_result(operand->getOwner());
  };
  // Kernels that read each other directly merge first: a bias and the activation after it, before
  // a reshape of the activation's result could be folded into the activation alone (it would
  // then read the bias's result through a reshape, and the two could no longer merge).
  {
    mlir::RewritePatternSet direct(context);
    mlir::linalg::populateElementwiseOpsFusionPatterns(direct, fusable);
    (void)mlir::applyPatternsGreedily(module, std::move(direct));
  }
  clone_into_gathering_copies(module);
  mlir::RewritePatternSet patterns(context);
  mlir::linalg::populateElementwiseOpsFusionPatterns(patterns, fusable);
  mlir::linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, reshape_control);
  mlir::affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
  mlir::linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
  mlir::tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
  mlir::tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
  context->getLoadedDialect<mlir::linalg::LinalgDialect>()->getCanonicalizationPatterns(patterns);
  mlir::linalg::populateConstantFoldLinalgOperations(patterns, single_use_producer);
  (void)mlir::applyPatternsGreedily(module, std::move(patterns));
}

// The caller's input tensors are values: an entry that writes into one (`outs(%arg)`) must not
// change the caller's buffer, or a second run would see the first run's result. Marked read-only,
// bufferisation gives such a write a fresh buffer.
void protect_entry_arguments(mlir::ModuleOp module) {
  mlir::Builder b(module.getContext());
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    if (func.isPrivate() || func.isExternal()) continue;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (mlir::isa<mlir::TensorType>(func.getArgument(i).getType()))
        func.setArgAttr(i, "bufferization.writable", b.getBoolAttr(false));
  }
}

// Whether `op`'s result reaches a kernel kiln vectorises, directly or through views of it.
bool feeds_vectorized_kernel(mlir::Operation* op) {
  return llvm::any_of(op->getUsers(), [](mlir::Operation* user) {
    if (mlir::isa<mlir::memref::SubViewOp>(user)) return feeds_vectorized_kernel(user);
    return mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(user) ||
           user->hasAttr(kElementwiseAttr);
  });
}

// A reshape of a contiguous buffer is only a new view of the same bytes. Feeding a contraction or
// a kernel kiln vectorises, memref.expand_shape / collapse_shape make memref's alias folding and
// the greedy driver's dead-code elimination undo each other forever (LLVM 22); the same view as a
// reinterpret_cast tiles cleanly.
void reshapes_to_reinterpret_casts(mlir::ModuleOp module) {
  std::vector<mlir::Operation*> reshapes;
  module.walk([&](mlir::Operation* op) {
    if (mlir::isa<mlir::memref::ExpandShapeOp, mlir::memref::CollapseShapeOp>(op))
      reshapes.push_back(op);
  });
  for (mlir::Operation* op : reshapes) {
    auto source = mlir::dyn_cast<mlir::MemRefType>(op->getOperand(0).getType());
    auto target = mlir::dyn_cast<mlir::MemRefType>(op->getResult(0).getType());
    if (!source || !target || !source.hasStaticShape() || !target.hasStaticShape()) continue;
    // Static strided layouts (a reshape of a slice of wider rows) too: the cast names the
    // target's offset and strides on the same base buffer.
    llvm::SmallVector<int64_t> strides;
    int64_t offset = 0;
    if (mlir::failed(target.getStridesAndOffset(strides, offset)) ||
        mlir::ShapedType::isDynamic(offset) ||
        llvm::any_of(strides, [](int64_t s) { return mlir::ShapedType::isDynamic(s); }))
      continue;
    if (!feeds_vectorized_kernel(op)) continue;
    mlir::OpBuilder b(op);
    auto cast = mlir::memref::ReinterpretCastOp::create(b, op->getLoc(), target, op->getOperand(0),
                                                        offset, target.getShape(), strides);
    op->getResult(0).replaceAllUsesWith(cast.getResult());
    op->erase();
  }
}

// A masked n-D transfer (a remainder tile) would still form the addresses of its fully masked
// rows, past the end of the buffer; where no page is mapped there, every such access needs a
// fault-suppression assist (measured 20x slower; docs/PGLE.md). Marking the leading dimensions as
// possibly out of bounds makes the lowering branch around those rows instead.
void guard_masked_rows(mlir::ModuleOp module) {
  auto guard = [](auto op) {
    if (!op.getMask() || !mlir::isa<mlir::MemRefType>(op.getShapedType())) return;
    int64_t rank = op.getVectorType().getRank();
    if (rank < 2) return;
    llvm::SmallVector<bool> in_bounds = op.getInBoundsValues();
    // A dimension of vector size 1 only runs where the loops put it, inside the buffer.
    for (int64_t d = 0; d + 1 < rank; ++d)
      if (op.getVectorType().getDimSize(d) > 1) in_bounds[d] = false;
    op.setInBoundsAttr(mlir::Builder(op.getContext()).getBoolArrayAttr(in_bounds));
  };
  module.walk([&](mlir::vector::TransferReadOp op) { guard(op); });
  module.walk([&](mlir::vector::TransferWriteOp op) { guard(op); });
}

// $KILN_DUMP_IR_TO=DIR writes the module at each stage to DIR/<module>-<digest>.<stage>.{mlir,ll}
// (file_name_for_module: a module's name never leads outside DIR).
class IrDumper {
 public:
  explicit IrDumper(const std::string& module_name)
      : module_name_(file_name_for_module(module_name)) {
    dir_ = *config::get_string("KILN_DUMP_IR_TO");
  }
  void mlir(const std::string& stage, mlir::ModuleOp module) {
    if (auto os = open(stage + ".mlir")) module->print(*os);
  }
  void llvm(const std::string& stage, llvm::Module& module) {
    if (auto os = open(stage + ".ll")) module.print(*os, nullptr);
  }

 private:
  std::unique_ptr<llvm::raw_fd_ostream> open(const std::string& suffix) {
    if (dir_.empty()) return nullptr;
    std::error_code ec;
    llvm::sys::fs::create_directories(dir_);
    auto os = std::make_unique<llvm::raw_fd_ostream>(dir_ + "/" + module_name_ + "." + suffix, ec);
    if (ec) return nullptr;  // dumps are a debugging aid; never fail a compile over them
    return os;
  }
  std::string module_name_;
  std::string dir_;
};

// Bounds on each greedy pattern application inside kiln's transform scripts: ample for the
// rewrites a script really needs (a handful per op), finite when patterns undo each other.
constexpr int64_t kMaxGreedyIterations = 10;
constexpr int64_t kRewritesPerOp = 50;
constexpr int64_t kMinRewriteBound = 10000;

class MlirModuleCompiler : public ModuleCompiler {
 public:
  static constexpr int kChildParseFailed = 3;

  MlirModuleCompiler() {
    mlir::registerAllDialects(registry_);
    mlir::registerAllExtensions(registry_);
    mlir::registerAllToLLVMIRTranslations(registry_);
    mlir::registerAllPasses();
    // Every target, so ahead-of-time builds can serve other machines.
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    // Inline assembly (llvm.inline_asm) is parsed by the target's assembler when emitting objects.
    llvm::InitializeAllAsmParsers();
    host_cpu_ = llvm::sys::getHostCPUName().str();
    std::vector<std::string> features;
    for (const auto& f : llvm::sys::getHostCPUFeatures())
      features.push_back((f.getValue() ? "+" : "-") + f.getKey().str());
    std::sort(features.begin(), features.end());
    for (const std::string& f : features) host_features_ += (host_features_.empty() ? "" : ",") + f;
    triple_ = llvm::sys::getProcessTriple();
  }

  // Parses text or bytecode; errors come back as `file:line:col: error: ...` with the source line.
  Result<mlir::OwningOpRef<mlir::ModuleOp>> parse(const ModuleSource& source,
                                                  mlir::MLIRContext& context) {
    llvm::SourceMgr source_mgr;
    source_mgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(source.bytes, source.name),
                                  llvm::SMLoc());
    std::string diagnostics;
    llvm::raw_string_ostream diagnostic_stream(diagnostics);
    mlir::SourceMgrDiagnosticHandler handler(source_mgr, &context, diagnostic_stream);
    bool bytecode = source.bytes.compare(0, 4, "ML\xefR") == 0;
    if (!bytecode) {
      std::string where = excess_nesting(source.bytes);
      if (!where.empty())
        return invalid_argument(source.name + ":" + where + ": error: nested deeper than " +
                                std::to_string(kMaxNestingDepth) +
                                " levels, more than kiln parses safely; flatten the program");
    }
    KILN_RETURN_IF_ERROR(parse_in_child(source));
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceFile<mlir::ModuleOp>(source_mgr, mlir::ParserConfig(&context));
    if (!module) {
      return invalid_argument(diagnostics.empty() ? source.name + ": cannot parse the module"
                                                  : diagnostics);
    }
    KILN_RETURN_IF_ERROR(check_module_limits(*module));
    return module;
  }

  // MLIR's parsers are not hardened against every malformed input (some crash, and bytecode
  // nested deep enough overflows the reader's stack), so a module is first parsed in a forked
  // child: a crash there is an error about the input, not the end of this process. The parse in
  // this process follows only once the child parsed it (or failed cleanly, for the diagnostics).
  // Bytes vetted once (the canonicaliser's output, a recompile) are not forked for again.
  Status parse_in_child(const ModuleSource& source) {
    std::string digest = std::to_string(std::hash<std::string>{}(source.bytes));
    if (vetted_.count(digest)) return Status::ok_status();
    pid_t pid = fork();
    if (pid < 0) return Status::ok_status();  // no child to spare: parse here, as before
    if (pid == 0) {
      end_crash_recovery_in_child();
      mlir::MLIRContext child_context(registry_, mlir::MLIRContext::Threading::DISABLED);
      child_context.getDiagEngine().registerHandler([](mlir::Diagnostic&) {});
      llvm::SourceMgr child_source;
      child_source.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(source.bytes, source.name),
                                      llvm::SMLoc());
      bool parsed = static_cast<bool>(
          mlir::parseSourceFile<mlir::ModuleOp>(child_source, mlir::ParserConfig(&child_context)));
      _exit(parsed ? 0 : kChildParseFailed);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) &&
        (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == kChildParseFailed)) {
      if (vetted_.size() > 64) vetted_.clear();
      vetted_.insert(digest);
      return Status::ok_status();
    }
    std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                          : "exit code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      return resource_exhausted(source.name + ": error: MLIR's parser was killed (" + how +
                                ") reading this module, most likely out of memory");
    return invalid_argument(source.name + ": error: MLIR's parser crashed (" + how +
                            ") reading this module; it is malformed in a way MLIR does not "
                            "diagnose: check it with mlir-opt-22");
  }

  HostDescription describe_host() override { return {triple_, host_cpu_, host_features_}; }

  Result<CanonicalModule> canonicalize(const ModuleSource& source, bool keep_locations) override {
    std::lock_guard<std::mutex> lock(mutex_);
    Result<CanonicalModule> result = internal_error("not canonicalised");
    KILN_RETURN_IF_ERROR(run_recovering_from_crashes(
        source.name, "reading", [&] { result = canonicalize_locked(source, keep_locations); }));
    return result;
  }

  Result<CompiledModule> compile(const ModuleSource& source,
                                 const CompileOptions& options) override {
    // One compile at a time per compiler: MLIR contexts are cheap, but pass registration and
    // LLVM's command-line state are process-global.
    std::lock_guard<std::mutex> lock(mutex_);
    Result<CompiledModule> result = internal_error("not compiled");
    KILN_RETURN_IF_ERROR(run_recovering_from_crashes(
        source.name, "compiling", [&] { result = compile_locked(source, options); }));
    return result;
  }

 private:
  Result<CanonicalModule> canonicalize_locked(const ModuleSource& source, bool keep_locations) {
    mlir::MLIRContext context(registry_);
    auto start = Clock::now();
    KILN_ASSIGN_OR_RETURN(mlir::OwningOpRef<mlir::ModuleOp> module, parse(source, context));
    CanonicalModule out;
    out.parse_ms = elapsed_ms(start);
    out.module_name = module->getSymName() ? module->getSymName()->str() : "module";
    // MLIR bytecode of the parsed module: independent of the input's spelling, comments and
    // layout, deterministic, and cheaper to produce than printed text. Debug locations are
    // replaced by unknown ones unless they are part of the key.
    if (!keep_locations) {
      mlir::Location unknown = mlir::UnknownLoc::get(&context);
      module->walk([&](mlir::Operation* op) {
        op->setLoc(unknown);
        for (mlir::Region& region : op->getRegions())
          for (mlir::Block& block : region)
            for (mlir::BlockArgument arg : block.getArguments()) arg.setLoc(unknown);
      });
    }
    llvm::raw_string_ostream os(out.text);
    if (mlir::failed(mlir::writeBytecodeToFile(*module, os)))
      return internal_error("cannot write the canonical form of " + source.name);
    return out;
  }

  Result<CompiledModule> compile_locked(const ModuleSource& source, const CompileOptions& options) {
    EffortLevel level = resolve_effort_level(options.optimization_level);
    CompiledModule result;
    result.info.effort_level = effort_level_name(level);
    resolve_target(options.target, result.info);

    mlir::MLIRContext context(registry_);
    // Diagnostics of later stages (passes, translation) also print as file:line:col.
    llvm::SourceMgr source_mgr;
    source_mgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(source.bytes, source.name),
                                  llvm::SMLoc());
    std::string diagnostics;
    llvm::raw_string_ostream diagnostic_stream(diagnostics);
    auto start = Clock::now();
    KILN_ASSIGN_OR_RETURN(mlir::OwningOpRef<mlir::ModuleOp> module, parse(source, context));
    result.info.timings.parse_ms = elapsed_ms(start);
    mlir::SourceMgrDiagnosticHandler handler(source_mgr, &context, diagnostic_stream);
    result.info.module_name = module->getSymName() ? module->getSymName()->str() : "module";

    KILN_RETURN_IF_ERROR(apply_embedded_schedule(*module, diagnostics));
    KILN_RETURN_IF_ERROR(collect_entry_points(*module, result.entry_points));
    KILN_RETURN_IF_ERROR(collect_host_callbacks(*module, result.callbacks));
    bool detailed = options.detailed_logging || reaches_detailed_logging_size(*module);

    start = Clock::now();
    IrDumper dump(result.info.module_name);
    std::vector<int64_t> cold_kernels;
    KILN_ASSIGN_OR_RETURN(
        Pipeline pipeline,
        lower_to_llvm_dialect(module, options, level, result, dump, diagnostics, cold_kernels));
    result.info.timings.passes_ms = elapsed_ms(start);

    start = Clock::now();
    llvm::LLVMContext llvm_context;
    // LLVM's default for an error diagnostic (bad inline assembly, say) is to exit the process.
    std::string llvm_errors;
    llvm_context.setDiagnosticHandlerCallBack(collect_llvm_errors, &llvm_errors);
    KILN_ASSIGN_OR_RETURN(LlvmModules llvm,
                          translate_and_optimize(*module, llvm_context, pipeline, cold_kernels,
                                                 result, dump, diagnostics));
    result.info.timings.llvm_ms = elapsed_ms(start);

    start = Clock::now();
    KILN_RETURN_IF_ERROR(emit_and_link(llvm, source.name, llvm_errors, result));
    result.info.timings.codegen_ms = elapsed_ms(start);
    if (detailed) log_compile_stages(result, pipeline.llvm_opt_level);
    return result;
  }

  // The machine a build is for: the host, or the one an ahead-of-time build names.
  void resolve_target(const CompileTarget& target, ExecutableInfo& info) const {
    info.target_triple = target.triple.empty() ? triple_ : target.triple;
    info.target_cpu =
        target.cpu.empty() ? (target.triple.empty() ? host_cpu_ : "generic") : target.cpu;
    info.target_features =
        !target.features.empty() ? target.features : (target.is_host() ? host_features_ : "");
  }

  // Detailed logs only for modules big enough to be interesting; the walk stops at the bound.
  static bool reaches_detailed_logging_size(mlir::ModuleOp module) {
    int64_t min_ops = config::get_int("KILN_COMPILER_DETAILED_LOGGING_MIN_OPS");
    int64_t ops = 0;
    module->walk([&](mlir::Operation*) {
      return ++ops >= min_ops ? mlir::WalkResult::interrupt() : mlir::WalkResult::advance();
    });
    return ops >= min_ops;
  }

  // The pipeline for this module and these options: kiln's step that reports failed run-time
  // checks goes in front of the control-flow lowering when they must not stop the program.
  static Pipeline pipeline_for(mlir::ModuleOp module, const CompileOptions& options,
                               EffortLevel level) {
    bool frees_buffers = false;
    module->walk([&](mlir::Operation* op) {
      if (op->getName().getStringRef() == "memref.dealloc") frees_buffers = true;
    });
    Pipeline pipeline = build_pipeline(level, options.disabled_passes, frees_buffers);
    if (config::get_bool("KILN_VERIFY_RUNTIME") &&
        config::get_bool("KILN_VERIFY_RUNTIME_CONTINUE")) {
      auto cf_to_llvm =
          std::find_if(pipeline.lowering_passes.begin(), pipeline.lowering_passes.end(),
                       [](const PipelineStep& s) { return s.pass == "convert-cf-to-llvm"; });
      pipeline.lowering_passes.insert(cf_to_llvm, {kReportFailedChecksStep, "", false});
    }
    return pipeline;
  }

  // MLIR: from the module as written to the LLVM dialect. PGLE's instrumentation goes in after
  // the tensor passes; `cold_kernels` are the kernels its profile found cold.
  Result<Pipeline> lower_to_llvm_dialect(mlir::OwningOpRef<mlir::ModuleOp>& module,
                                         const CompileOptions& options, EffortLevel level,
                                         CompiledModule& result, IrDumper& dump,
                                         std::string& diagnostics,
                                         std::vector<int64_t>& cold_kernels) {
    Pipeline pipeline = pipeline_for(*module, options, level);
    PglePlan pgle = pgle_plan(options, result.info.module_name);
    dump.mlir("0-input", *module);
    // Checks go in first, while every op they verify is still there (as mlir-opt
    // -generate-runtime-verification in front of a lowering pipeline).
    if (config::get_bool("KILN_VERIFY_RUNTIME"))
      KILN_RETURN_IF_ERROR(
          run_passes(*module, {{"generate-runtime-verification", "", false}}, diagnostics));
    // Small float types first, while their arithmetic is still arith and math ops (in kernels'
    // bodies too): every float op of such a module becomes a call into kiln's runtime.
    if (uses_emulated_floats(*module))
      KILN_RETURN_IF_ERROR(run_passes(
          *module,
          {{"convert-arith-to-apfloat", "", false}, {"convert-math-to-apfloat", "", false}},
          diagnostics));
    KILN_RETURN_IF_ERROR(run_passes(*module, pipeline.tensor_passes, diagnostics));
    if (pgle.active()) result.info.kernels = instrument_kernels(*module, pgle, &cold_kernels);
    if (has_op(*module, {"linalg.pack", "linalg.unpack"}))
      apply_optional_transform(module, kLowerPackUnpackScript);
    // vector.scan has no lowering in convert-vector-to-llvm (mlir-opt needs a test pass for it).
    if (has_op(*module, {"vector.scan"})) apply_optional_transform(module, kLowerScanScript);
    if (pipeline.fuse_epilogues && pipeline.tile_and_vectorize) {
      for (const std::string& script : prepare_epilogue_fusion(*module))
        apply_optional_transform(module, script.c_str());
      clear_epilogue_marks(*module);
    }
    if (pipeline.vectorize_convolutions)
      apply_optional_transform(module, kVectorizeConvolutionsScript);
    protect_entry_arguments(*module);
    KILN_RETURN_IF_ERROR(run_passes(*module, pipeline.bufferize_passes, diagnostics));
    dump.mlir("1-bufferized", *module);
    // Ownership-based deallocation refuses ops it cannot reason about (LLVM dialect ops, inline
    // assembly) even where it has nothing to do.
    if (!needs_buffer_deallocation(*module))
      std::erase_if(pipeline.lowering_passes, [](const PipelineStep& step) {
        return step.pass == "buffer-deallocation-pipeline" || step.pass == kFreeAfterLastUseStep;
      });
    if (pipeline.tile_and_vectorize) {
      tile_and_vectorize(module, pipeline.vectorize_elementwise, result.info.module_name);
      dump.mlir("2-vectorized", *module);
    }
    KILN_RETURN_IF_ERROR(run_passes(*module, pipeline.lowering_passes, diagnostics));
    dump.mlir("3-llvm-dialect", *module);
    KILN_RETURN_IF_ERROR(check_fully_lowered(*module));
    return pipeline;
  }

  // The LLVM modules of one compile, each with the machine that optimises and emits it: the
  // program, and (with a PGLE profile) its cold kernels at low effort.
  struct LlvmModules {
    std::unique_ptr<llvm::Module> main, cold;
    std::unique_ptr<llvm::TargetMachine> machine, cold_machine;
  };

  // LLVM: translation, kiln's entry and callback thunks, the cold kernels split off, and LLVM's
  // optimisation pipelines.
  Result<LlvmModules> translate_and_optimize(mlir::ModuleOp module, llvm::LLVMContext& context,
                                             Pipeline& pipeline,
                                             const std::vector<int64_t>& cold_kernels,
                                             CompiledModule& result, IrDumper& dump,
                                             const std::string& diagnostics) {
    LlvmModules llvm;
    llvm.main = mlir::translateModuleToLLVMIR(module, context);
    if (!llvm.main) return compile_error("translation to LLVM IR failed:\n" + diagnostics);
    KILN_RETURN_IF_ERROR(add_host_callback_thunks(*llvm.main, result.callbacks));
    add_profile_thunks(*llvm.main);
    KILN_RETURN_IF_ERROR(add_packed_entries(*llvm.main, result.entry_points));
    // Kernels with a negligible share of the run time go into a second module compiled at low
    // effort; the rest keeps the level asked for.
    if (!cold_kernels.empty()) {
      std::set<std::string> outlined = outline_kernels(*llvm.main, cold_kernels);
      if (!outlined.empty()) llvm.cold = split_functions(*llvm.main, outlined);
      log::debug("PGLE: " + std::to_string(outlined.size()) + " of " +
                 std::to_string(result.info.kernels.size()) + " kernels of '" +
                 result.info.module_name + "' compiled at low effort");
    }
    // LLVM's O3 unrolling explodes on big straight-line modules (seconds for no run-time gain, see
    // docs/BENCHMARKS.md); above this size O3 programs get LLVM's O2 pipeline.
    constexpr size_t kLargeModuleInstructions = 20000;
    if (pipeline.llvm_opt_level == 3 && llvm.main->getInstructionCount() > kLargeModuleInstructions)
      pipeline.llvm_opt_level = 2;
    const ExecutableInfo& info = result.info;
    KILN_ASSIGN_OR_RETURN(llvm.machine,
                          create_target_machine(pipeline.llvm_opt_level, info.target_triple,
                                                info.target_cpu, info.target_features));
    if (llvm.cold) {
      KILN_ASSIGN_OR_RETURN(llvm.cold_machine,
                            create_target_machine(kColdOptLevel, info.target_triple,
                                                  info.target_cpu, info.target_features));
      llvm.cold->setDataLayout(llvm.cold_machine->createDataLayout());
      llvm.cold->setTargetTriple(llvm.cold_machine->getTargetTriple());
      auto cold_start = Clock::now();
      optimize(*llvm.cold, *llvm.cold_machine, kColdOptLevel);
      log::debug("PGLE: LLVM optimisation of the low-effort kernels took " +
                 std::to_string(elapsed_ms(cold_start)) + " ms");
    }
    llvm.main->setDataLayout(llvm.machine->createDataLayout());
    llvm.main->setTargetTriple(llvm.machine->getTargetTriple());
    optimize(*llvm.main, *llvm.machine, pipeline.llvm_opt_level);
    dump.llvm("4-optimized", *llvm.main);
    if (llvm.cold) dump.llvm("4-optimized-cold", *llvm.cold);
    return llvm;
  }

  // Code generation: one object per module, linked into the executable's shared object.
  static Status emit_and_link(LlvmModules& llvm, const std::string& source_name,
                              const std::string& llvm_errors, CompiledModule& result) {
    const std::string& triple = result.info.target_triple;
    std::vector<llvm::SmallVector<char, 0>> objects(llvm.cold ? 2 : 1);
    if (llvm.cold) {
      auto cold_start = Clock::now();
      KILN_RETURN_IF_ERROR(emit_object(*llvm.cold, *llvm.cold_machine, triple, objects[1]));
      log::debug("PGLE: code generation for the low-effort kernels took " +
                 std::to_string(elapsed_ms(cold_start)) + " ms");
    }
    KILN_RETURN_IF_ERROR(emit_object(*llvm.main, *llvm.machine, triple, objects[0]));
    if (!llvm_errors.empty())
      return compile_error(source_name + ": error: LLVM rejected the program:\n" + llvm_errors);
    KILN_ASSIGN_OR_RETURN(result.shared_object,
                          link_shared_object(objects, triple.rfind("x86_64", 0) != 0));
    return Status();
  }

  static void log_compile_stages(const CompiledModule& result, int llvm_opt_level) {
    const CompileTimings& t = result.info.timings;
    log::info("compiled '" + result.info.module_name + "' at " + result.info.effort_level +
              ": parse " + std::to_string(t.parse_ms) + " ms, passes " +
              std::to_string(t.passes_ms) + " ms, llvm " + std::to_string(t.llvm_ms) +
              " ms (LLVM -O" + std::to_string(llvm_opt_level) + "), codegen " +
              std::to_string(t.codegen_ms) + " ms, " + std::to_string(result.shared_object.size()) +
              " bytes of code");
  }

  // kiln's tiling and vectorisation of a bufferized module: elementwise kernels along their rows,
  // contractions in cache and register tiles. Vectorised tiles need the cleanup to lower their
  // masks: if it cannot apply, the whole step is undone and the contractions stay loops.
  void tile_and_vectorize(mlir::OwningOpRef<mlir::ModuleOp>& module, bool elementwise,
                          const std::string& module_name) {
    std::set<int> elementwise_groups;
    if (elementwise) {
      expand_exponentials(*module);
      collapse_short_loops(*module);
      elementwise_groups = prepare_elementwise(*module);
    }
    reshapes_to_reinterpret_casts(*module);
    mark_absorbable_fills(*module);
    mlir::OwningOpRef<mlir::ModuleOp> untiled(module->clone());
    if (elementwise) vectorize_strided_generics(*module);
    // Each group on its own: one that cannot apply leaves the others' code vectorised.
    for (int group : elementwise_groups)
      apply_optional_transform(module, elementwise_group_script(group).c_str());
    for (const TileGroup& group : prepare_contractions(*module))
      apply_optional_transform(module, tile_group_script(group).c_str());
    bool lowered = apply_optional_transform(module, contraction_cleanup_script().c_str());
    if (lowered) {
      hoist_accumulators(*module);
      absorb_fills(*module);
      lowered = apply_optional_transform(module, contraction_lowering_script().c_str());
    }
    if (lowered) {
      guard_masked_rows(*module);
      return;
    }
    log::info("kiln-tile-and-vectorize did not apply to '" + module_name +
              "'; its contractions are compiled as loops");
    module = std::move(untiled);
  }

  // Declarations marked kiln.host_callback: functions the host provides, called through slots.
  Status collect_host_callbacks(mlir::ModuleOp module, std::vector<HostCallbackSignature>& out) {
    for (auto func : module.getOps<mlir::func::FuncOp>()) {
      if (!func->hasAttr("kiln.host_callback")) continue;
      std::string where = location_text(func.getLoc());
      std::string name = func.getSymName().str();
      if (!func.isExternal())
        return invalid_argument(where + ": error: host callback '" + name +
                                "' must be a declaration without a body");
      if (func.getFunctionType().getNumResults() != 0)
        return unimplemented(where + ": error: host callback '" + name +
                             "' returns values; host callbacks return nothing");
      HostCallbackSignature signature{name, {}};
      for (mlir::Type t : func.getFunctionType().getInputs()) {
        Result<TensorType> tt = tensor_type_of(t);
        if (!tt.ok())
          return unimplemented(where + ": error: host callback '" + name +
                               "': " + tt.status().message());
        signature.args.push_back(*tt);
      }
      func->setAttr("llvm.emit_c_interface", mlir::UnitAttr::get(func.getContext()));
      out.push_back(std::move(signature));
    }
    return Status();
  }

  Status collect_entry_points(mlir::ModuleOp module, std::vector<EntryPoint>& entries) {
    for (auto func : module.getOps<mlir::func::FuncOp>()) {
      if (func.isPrivate() || func.isExternal()) continue;
      EntryPoint entry;
      entry.name = func.getSymName().str();
      bool callable = true;
      auto type = func.getFunctionType();
      for (mlir::Type t : type.getInputs()) {
        Result<TensorType> tt = tensor_type_of(t, /*allow_scalar=*/true);
        if (!tt.ok()) {
          callable = false;
          break;
        }
        entry.inputs.push_back(*tt);
      }
      // A scalar result only alone: the C interface returns it by value then, while several
      // results come back in one struct whose layout kiln reads as descriptors.
      bool single_result = type.getNumResults() == 1;
      for (mlir::Type t : type.getResults()) {
        Result<TensorType> tt = tensor_type_of(t, /*allow_scalar=*/single_result);
        if (!tt.ok()) {
          callable = false;
          break;
        }
        entry.outputs.push_back(*tt);
        if (mlir::isa<mlir::RankedTensorType>(t)) entry.results_owned = true;
      }
      // Functions with scalar or unranked arguments stay in the module, just not callable.
      if (!callable) continue;
      func->setAttr("llvm.emit_c_interface", mlir::UnitAttr::get(func.getContext()));
      entries.push_back(std::move(entry));
    }
    return Status();
  }

  Status run_passes(mlir::ModuleOp module, const std::vector<PipelineStep>& steps,
                    std::string& diagnostics) {
    // kiln's own steps split the list: passes before one, the step, passes after it.
    for (size_t i = 0; i < steps.size(); ++i) {
      const std::string& pass = steps[i].pass;
      if (pass != kElementwiseFusionStep && pass != kParallelizeStep &&
          pass != kReportFailedChecksStep && pass != kFreeAfterLastUseStep)
        continue;
      KILN_RETURN_IF_ERROR(run_pass_list(
          module, std::vector<PipelineStep>(steps.begin(), steps.begin() + i), diagnostics));
      if (pass == kElementwiseFusionStep)
        fuse_elementwise_ops(module);
      else if (pass == kParallelizeStep)
        parallelize_loops(module);
      else if (pass == kFreeAfterLastUseStep)
        free_buffers_after_last_use(module);
      else
        KILN_RETURN_IF_ERROR(report_failed_checks(module, diagnostics));
      return run_passes(module, std::vector<PipelineStep>(steps.begin() + i + 1, steps.end()),
                        diagnostics);
    }
    return run_pass_list(module, steps, diagnostics);
  }

  Status run_pass_list(mlir::ModuleOp module, const std::vector<PipelineStep>& steps,
                       std::string& diagnostics) {
    if (steps.empty()) return Status();
    mlir::PassManager pm(module->getContext());
    // The manager is anchored on builtin.module already: parse the list inside the wrapper.
    std::string text = pipeline_text(steps);
    text = text.substr(std::strlen("builtin.module("),
                       text.size() - std::strlen("builtin.module(") - 1);
    std::string parse_errors;
    llvm::raw_string_ostream parse_stream(parse_errors);
    if (mlir::failed(mlir::parsePassPipeline(text, pm, parse_stream)))
      return internal_error("kiln's pass pipeline does not parse: " + parse_errors);
    std::string failed_pass;
    pm.addInstrumentation(std::make_unique<FailedPassRecorder>(&failed_pass));
    if (mlir::failed(pm.run(module))) {
      return compile_error(diagnostics + "note: the pass '" + failed_pass +
                           "' failed on this program (kiln pipeline prints the whole list)");
    }
    return Status();
  }

  // Transform scripts are optimisations: when one cannot apply (a shape it does not handle), the
  // module goes on unchanged. The script runs on a clone so a half-applied script leaves no trace.
  // Returns whether the script applied.
  // A module that carries its own transform schedule (`module attributes
  // {transform.with_named_sequence}` with a @__transform_main sequence) has it applied first, as
  // `mlir-opt -transform-interpreter` would, and every transform op erased afterwards: the rest of
  // the pipeline sees only the program the schedule produced.
  Status apply_embedded_schedule(mlir::ModuleOp module, std::string& diagnostics) {
    constexpr const char* kScheduleAttr = "transform.with_named_sequence";
    // The schedule is on the module itself, or in a module nested in it (a file holding the
    // payload's functions and a `module attributes {transform.with_named_sequence}`).
    std::vector<mlir::ModuleOp> libraries;
    if (module->hasAttr(kScheduleAttr)) libraries.push_back(module);
    for (auto nested : module.getOps<mlir::ModuleOp>())
      if (nested->hasAttr(kScheduleAttr)) libraries.push_back(nested);
    if (libraries.empty()) return Status();
    mlir::transform::NamedSequenceOp entry;
    mlir::ModuleOp library;
    for (mlir::ModuleOp candidate : libraries)
      for (auto sequence : candidate.getOps<mlir::transform::NamedSequenceOp>())
        if (!entry && sequence.getSymName() == "__transform_main") {
          entry = sequence;
          library = candidate;
        }
    if (entry && mlir::failed(mlir::transform::applyTransformNamedSequence(
                     module, entry, library, mlir::transform::TransformOptions())))
      return compile_error("the module's transform schedule (@__transform_main) failed:\n" +
                           diagnostics);
    for (mlir::ModuleOp candidate : libraries) {
      std::vector<mlir::Operation*> schedule;
      for (mlir::Operation& op : candidate.getBody()->getOperations())
        if (op.getDialect() && op.getDialect()->getNamespace() == "transform")
          schedule.push_back(&op);
      for (mlir::Operation* op : schedule) op->erase();
      if (candidate == module)
        module->removeAttr(kScheduleAttr);
      else if (candidate.getBody()->empty())
        candidate->erase();
    }
    return Status();
  }

  bool apply_optional_transform(mlir::OwningOpRef<mlir::ModuleOp>& module, const char* script) {
    mlir::MLIRContext* context = module->getContext();
    mlir::OwningOpRef<mlir::ModuleOp> transforms =
        mlir::parseSourceString<mlir::ModuleOp>(script, context);
    if (!transforms) return false;
    mlir::Operation* entry = nullptr;
    transforms->walk([&](mlir::transform::NamedSequenceOp seq) {
      if (seq.getSymName() == "__transform_main") entry = seq;
    });
    if (entry == nullptr) return false;
    // Every greedy rewrite in a script gets a bound on its work: two patterns that undo each
    // other (seen with reshapes feeding contractions) would otherwise run forever. A script that
    // reaches the bound fails like any other, and the module goes on without it.
    int64_t payload_ops = 0;
    module->walk([&](mlir::Operation*) { ++payload_ops; });
    const int64_t rewrite_bound = kRewritesPerOp * payload_ops + kMinRewriteBound;
    mlir::Builder builder(context);
    transforms->walk([&](mlir::transform::ApplyPatternsOp apply) {
      apply.setMaxIterationsAttr(builder.getI64IntegerAttr(kMaxGreedyIterations));
      apply.setMaxNumRewritesAttr(builder.getI64IntegerAttr(rewrite_bound));
    });
    mlir::OwningOpRef<mlir::ModuleOp> candidate(module->clone());
    // Its diagnostics are not the user's errors: keep them out of the compile's output.
    std::string why;
    mlir::ScopedDiagnosticHandler quiet(context, [&](mlir::Diagnostic& d) {
      if (why.empty()) why = d.str();
      return mlir::success();
    });
    if (mlir::succeeded(mlir::transform::applyTransformNamedSequence(
            *candidate, entry, *transforms, mlir::transform::TransformOptions())) &&
        mlir::succeeded(mlir::verify(*candidate))) {
      module = std::move(candidate);
      return true;
    }
    log::debug("an optional transform did not apply; the module goes on without it: " + why);
    if (why.find("greedy pattern application failed") != std::string::npos)
      log::info("a tiling/vectorisation step reached its bound (" +
                std::to_string(kMaxGreedyIterations) + " iterations, " +
                std::to_string(rewrite_bound) + " rewrites) and was skipped");
    return false;
  }

  Status check_fully_lowered(mlir::ModuleOp module) {
    Status status;
    module.walk([&](mlir::Operation* op) {
      if (!status.ok() || op == module.getOperation()) return;
      llvm::StringRef ns = op->getName().getDialectNamespace();
      if (ns == "llvm") return;
      status = unimplemented(location_text(op->getLoc()) + ": error: operation '" +
                             op->getName().getStringRef().str() +
                             "' is not supported by kiln's CPU pipeline: no pass lowered it to "
                             "the LLVM dialect (last pass: reconcile-unrealized-casts)");
    });
    return status;
  }

  std::mutex mutex_;
  std::set<std::string> vetted_;  // digests of sources a child parsed without crashing
  mlir::DialectRegistry registry_;
  std::string host_cpu_;
  std::string host_features_;
  std::string triple_;
};

}  // namespace
}  // namespace kiln::cpu

extern "C" __attribute__((visibility("default"))) kiln::cpu::ModuleCompiler*
kiln_cpu_create_module_compiler() {
  static kiln::cpu::MlirModuleCompiler compiler;
  return &compiler;
}

#include "compiler_cpu/epilogue_fusion.h"

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln::cpu {
namespace {

constexpr const char* kEpilogueAttr = "kiln.epilogue";

// A tile of the product: the rows of the default register and cache tiles (8 and 64), columns as
// the default cache tile (128). Sizes that divide the product keep every tile static (the
// contraction's register tiling and vectorisation need no masks for them); nullopt where none do.
std::optional<int64_t> tile_rows(int64_t rows) {
  if (rows <= 64) return rows;
  for (int64_t t = 64; t >= 32; t -= 8)
    if (rows % t == 0) return t;
  return std::nullopt;
}

std::optional<int64_t> tile_columns(int64_t columns) {
  if (columns % 128 == 0) return 128;
  if (columns <= 256) return columns;
  for (int64_t t = 256; t >= 64; t -= 8)
    if (columns % t == 0) return t;
  // Odd sizes (55x55 pixels): any divisor, the register tiles' remainder masked as in any tile.
  for (int64_t t = 256; t >= 64; --t)
    if (columns % t == 0) return t;
  return std::nullopt;
}

bool static_2d(mlir::Type type) {
  auto ranked = mlir::dyn_cast<mlir::RankedTensorType>(type);
  return ranked && ranked.getRank() == 2 && ranked.hasStaticShape();
}

// The input of `op` that is a fusible product's result, or -1.
int product_input(mlir::linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumReductionLoops() != 0 || op.getNumLoops() != 2)
    return -1;
  if (!static_2d(op->getResult(0).getType())) return -1;
  llvm::SmallVector<mlir::AffineMap> maps = op.getIndexingMapsArray();
  if (!maps.back().isIdentity()) return -1;
  // The init is only a destination (its value unused): the product can take its place.
  mlir::Block& body = op.getRegion().front();
  if (!body.getArgument(body.getNumArguments() - 1).use_empty()) return -1;
  for (unsigned k = 0; k < op.getNumDpsInputs(); ++k) {
    mlir::Value in = op.getDpsInputOperand(k)->get();
    auto product = in.getDefiningOp<mlir::linalg::MatmulOp>();
    if (!product || !in.hasOneUse() || !maps[k].isIdentity()) continue;
    if (in.getType() != op->getResult(0).getType()) continue;
    if (!product.getDpsInitOperand(0)->get().getDefiningOp<mlir::linalg::FillOp>()) continue;
    if (!product.getDpsInitOperand(0)->get().hasOneUse()) continue;
    // Kernels at a function's top level, next to their product (not inside a loop, nor a PGLE
    // first pass's candidate dispatch).
    if (!mlir::isa<mlir::func::FuncOp>(op->getParentOp()) || product->getBlock() != op->getBlock())
      continue;
    return static_cast<int>(k);
  }
  return -1;
}

// `op` with input `k` (the product) moved to the init: the body reads the product through the
// init's block argument. Returns the new kernel.
mlir::linalg::GenericOp update_in_place(mlir::linalg::GenericOp op, unsigned k) {
  mlir::OpBuilder b(op);
  llvm::SmallVector<mlir::Value> inputs;
  llvm::SmallVector<mlir::AffineMap> maps;
  llvm::SmallVector<mlir::AffineMap> old_maps = op.getIndexingMapsArray();
  for (unsigned i = 0; i < op.getNumDpsInputs(); ++i) {
    if (i == k) continue;
    inputs.push_back(op.getDpsInputOperand(i)->get());
    maps.push_back(old_maps[i]);
  }
  maps.push_back(old_maps.back());
  mlir::Value product = op.getDpsInputOperand(k)->get();
  auto updated =
      mlir::linalg::GenericOp::create(b, op.getLoc(), op->getResultTypes(), inputs,
                                      mlir::ValueRange{product}, maps, op.getIteratorTypesArray());
  mlir::Block& body = op.getRegion().front();
  mlir::BlockArgument init = body.getArgument(body.getNumArguments() - 1);
  body.getArgument(k).replaceAllUsesWith(init);
  body.eraseArgument(k);
  updated.getRegion().takeBody(op.getRegion());
  op->replaceAllUsesWith(updated->getResults());
  op->erase();
  return updated;
}

std::string script(int64_t group, int64_t init_operand, int64_t rows, int64_t columns) {
  std::string any = "!transform.any_op";
  std::string s = R"mlir(
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
)mlir";
  s += "    %kernels = transform.structured.match ops{[\"linalg.generic\"]} attributes{" +
       std::string(kEpilogueAttr) + " = " + std::to_string(group) + " : i64} in %root : (" + any +
       ") -> " + any + "\n";
  s += "    transform.foreach %kernels : " + any + " {\n    ^bb0(%kernel: " + any + "):\n";
  s += "      %product = transform.get_producer_of_operand %kernel[" +
       std::to_string(init_operand) + "] : (" + any + ") -> " + any + "\n";
  s += "      %fill = transform.get_producer_of_operand %product[2] : (" + any + ") -> " + any +
       "\n";
  s += "      %tiled, %tiles = transform.structured.tile_using_forall %kernel tile_sizes [" +
       std::to_string(rows) + ", " + std::to_string(columns) + "] : (" + any + ") -> (" + any +
       ", " + any + ")\n";
  // The product (then its fill) is the forall's destination: fused through its block argument,
  // each tile computes into its own slice of the output.
  s += "      %p, %tiles2 = transform.structured.fuse_into_containing_op %product into %tiles : (" +
       any + ", " + any + ") -> (" + any + ", " + any + ")\n";
  s += "      %f, %tiles3 = transform.structured.fuse_into_containing_op %fill into %tiles2 : (" +
       any + ", " + any + ") -> (" + any + ", " + any + ")\n";
  s += "    }\n";
  s += "    %funcs = transform.structured.match ops{[\"func.func\"]} in %root : (" + any + ") -> " +
       any + "\n";
  s += "    transform.apply_dce to %funcs : " + any + "\n";
  s += R"mlir(    transform.yield
  }
}
)mlir";
  return s;
}

}  // namespace

std::vector<std::string> prepare_epilogue_fusion(mlir::ModuleOp module) {
  std::vector<std::pair<mlir::linalg::GenericOp, int>> found;
  module.walk([&](mlir::linalg::GenericOp op) {
    int k = product_input(op);
    if (k >= 0) found.emplace_back(op, k);
  });
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> groups;
  mlir::Builder b(module.getContext());
  for (auto [op, k] : found) {
    auto shape = mlir::cast<mlir::RankedTensorType>(op->getResult(0).getType()).getShape();
    std::optional<int64_t> rows = tile_rows(shape[0]), columns = tile_columns(shape[1]);
    if (!rows || !columns) continue;
    mlir::linalg::GenericOp updated = update_in_place(op, static_cast<unsigned>(k));
    int64_t init_operand = updated.getNumDpsInputs();
    auto key = std::make_tuple(*rows, *columns, init_operand);
    auto [it, inserted] = groups.emplace(key, static_cast<int64_t>(groups.size()));
    updated->setAttr(kEpilogueAttr, b.getI64IntegerAttr(it->second));
  }
  std::vector<std::string> scripts(groups.size());
  for (const auto& [key, group] : groups) {
    auto [rows, columns, init_operand] = key;
    scripts[group] = script(group, init_operand, rows, columns);
  }
  return scripts;
}

void clear_epilogue_marks(mlir::ModuleOp module) {
  module.walk([](mlir::linalg::GenericOp op) { op->removeAttr(kEpilogueAttr); });
}

}  // namespace kiln::cpu

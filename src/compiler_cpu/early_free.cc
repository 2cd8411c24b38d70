#include "compiler_cpu/early_free.h"

#include <vector>

#include "llvm/ADT/SmallPtrSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln::cpu {
namespace {

// The buffer and every value that may alias it: results of any op that takes one of them
// (views, casts, reshapes, loops carrying it). Over-approximate: an alias too many only keeps the
// buffer alive longer.
std::vector<mlir::Value> aliases_of(mlir::Value buffer) {
  std::vector<mlir::Value> found = {buffer};
  llvm::SmallPtrSet<mlir::Operation*, 16> seen;
  for (size_t i = 0; i < found.size(); ++i)
    for (mlir::Operation* user : found[i].getUsers()) {
      if (!seen.insert(user).second) continue;
      for (mlir::Value result : user->getResults())
        if (mlir::isa<mlir::BaseMemRefType>(result.getType())) found.push_back(result);
    }
  return found;
}

// Moves `dealloc` right after the last op of its block that uses its buffer; leaves it where it
// is when the buffer was not allocated in that block or may outlive it (returned by a
// terminator).
void free_early(mlir::memref::DeallocOp dealloc) {
  mlir::Block* block = dealloc->getBlock();
  mlir::Value buffer = dealloc.getMemref();
  mlir::Operation* alloc = buffer.getDefiningOp();
  if (!mlir::isa_and_nonnull<mlir::memref::AllocOp>(alloc) || alloc->getBlock() != block) return;
  mlir::Operation* last = alloc;
  for (mlir::Value alias : aliases_of(buffer))
    for (mlir::Operation* user : alias.getUsers()) {
      if (user == dealloc.getOperation()) continue;
      mlir::Operation* in_block = block->findAncestorOpInBlock(*user);
      if (in_block == nullptr || in_block->hasTrait<mlir::OpTrait::IsTerminator>()) return;
      if (mlir::isa<mlir::memref::DeallocOp>(in_block)) return;  // freed through another name
      if (last->isBeforeInBlock(in_block)) last = in_block;
    }
  if (last->isBeforeInBlock(dealloc)) dealloc->moveAfter(last);
}

}  // namespace

void free_buffers_after_last_use(mlir::ModuleOp module) {
  module.walk([](mlir::func::FuncOp func) {
    if (func.isExternal()) return;
    for (mlir::Block& block : func.getBody()) {
      std::vector<mlir::memref::DeallocOp> deallocs;
      for (mlir::Operation& op : block)
        if (auto dealloc = mlir::dyn_cast<mlir::memref::DeallocOp>(op)) deallocs.push_back(dealloc);
      for (mlir::memref::DeallocOp dealloc : deallocs) free_early(dealloc);
    }
  });
}

}  // namespace kiln::cpu

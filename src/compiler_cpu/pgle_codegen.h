// PGLE in the compiler: finds the kernels of a module, instruments them, gives contractions several
// tiling candidates, and applies a measured profile (fastest candidate per contraction, low effort
// for kernels with a negligible share of the run time). Included only by module_compiler.cc.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/compile.h"
#include "kiln/pgle.h"
#include "kiln/status.h"
#include "llvm/IR/Module.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln::cpu {

struct PglePlan {
  bool instrument = false;  // time every kernel; contractions rotate their candidates
  std::optional<FdoProfile> profile;
  double cold_share_percent = 0;  // kernels whose costs add up to this share get low effort
  int64_t cold_max_ns = 0;        // ... each costing at most this much
  bool active() const { return instrument || profile.has_value(); }
};

// Wraps every kernel of every entry function in timing calls and, for a first pass, each static
// contraction in a switch over its candidates; with a profile, tags each contraction with its
// fastest candidate and collects the ids of cold kernels. Runs on tensors, after fusion.
std::vector<KernelInfo> instrument_kernels(mlir::ModuleOp module, const PglePlan& plan,
                                           std::vector<int64_t>* cold_kernels);

// One tiling script applies to the contractions of one candidate, rank, peeling need and cache
// tile (the candidate's, evened out for the threads: balanced_cache_tile).
struct TileGroup {
  int candidate;
  int peel;  // bit 0: peel the m loop, bit 1: the n loop
  bool batch;
  int64_t cache_m;
  int64_t cache_n;
};
// The cache tile for a dimension of `size` whose candidate tile is `tile` and register tile
// `granule`: the candidate's, unless its few tiles would share out unevenly between two threads
// (96 rows in 64-row tiles: 64 and 32), then one of up to twice the size that splits evenly (48);
// a dimension no larger than the tile is one tile of its own size.
int64_t balanced_cache_tile(int64_t size, int64_t tile, int64_t granule);
// Gives contractions without a candidate the default one, records which of their register loops
// need peeling, and returns the groups present.
std::vector<TileGroup> prepare_contractions(mlir::ModuleOp module);
std::string tile_group_script(const TileGroup& group);
// After the groups: reductions as contractions, masks lowered, transfers on base buffers; then
// (after hoist_accumulators) contractions to FMAs.
std::string contraction_cleanup_script();
std::string contraction_lowering_script();

// Gives the timing calls bodies that call the runtime through exported slots.
void add_profile_thunks(llvm::Module& module);

// Moves each listed kernel's code into a function of its own and returns those functions' names;
// kernels that cannot be outlined stay where they are.
std::set<std::string> outline_kernels(llvm::Module& module, const std::vector<int64_t>& kernels);

// Moves the named functions' definitions into a new module (same context); `module` keeps
// declarations, and local symbols become hidden globals so the two objects link together.
std::unique_ptr<llvm::Module> split_functions(llvm::Module& module,
                                              const std::set<std::string>& names);

}  // namespace kiln::cpu

// The contract between the code kiln generates and the runtime that loads it: the symbols an
// executable's shared object defines and what the loader does with them. The compiler library
// and libkiln both include this header. Changing any of it changes kGeneratedCodeContract, which
// every executable records (as `_kiln_contract_version`) and the loader checks before it calls
// anything: an executable built for another contract is refused with the reason, never called.
// No MLIR or LLVM here.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::cpu {

// 1: packed entries, host-callback slots, PGLE slots, a scalar result's slot after the arguments.
inline constexpr uint32_t kGeneratedCodeContract = 1;
// A `const uint32_t` holding kGeneratedCodeContract.
inline constexpr const char* kContractVersionSymbol = "_kiln_contract_version";

// `void _kiln_entry_F(void** args)` for each entry F. args[i] points at the i-th argument of
// MLIR's C-interface wrapper `_mlir_ciface_F` (the result descriptors first when F returns
// memrefs, then the inputs' descriptors or scalars); when F returns one scalar, args[n], n being
// that wrapper's argument count, points at where the result is stored.
inline constexpr const char* kEntryPrefix = "_kiln_entry_";
inline std::string packed_entry_symbol(const std::string& function_name) {
  return kEntryPrefix + function_name;
}

// Per host callback, two pointer slots the loader fills before the first call: the dispatcher
// (`void(void* site, void** args)`) and the callback's site (its signature).
inline constexpr const char* kCallbackPrefix = "_kiln_cb_";
inline std::string callback_function_slot(const std::string& name) {
  return std::string(kCallbackPrefix) + "fn_" + name;
}
inline std::string callback_site_slot(const std::string& name) {
  return std::string(kCallbackPrefix) + "site_" + name;
}

// PGLE's instrumented builds: every kernel calls `int64 _kiln_prof_begin(int64 kernel)` (returns
// the tile candidate to run) and `_kiln_prof_end(int64 kernel)`, thunks inside the executable
// that call through two slots the loader fills: the profiler and its site.
inline constexpr const char* kProfilePrefix = "_kiln_prof_";
inline constexpr const char* kProfileBegin = "_kiln_prof_begin";
inline constexpr const char* kProfileEnd = "_kiln_prof_end";
inline constexpr const char* kProfileFunctionSlot = "_kiln_prof_fn";
inline constexpr const char* kProfileSiteSlot = "_kiln_prof_site";

}  // namespace kiln::cpu

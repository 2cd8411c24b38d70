// The canonical form behind cache keys, computed from MLIR text without MLIR: any bytes give a
// result or nullopt, the same twice over.
#include <cstdlib>

#include "compile/text_canonical.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = kiln::fuzz::as_view(data, size);
  for (bool keep_locations : {false, true}) {
    auto first = kiln::canonicalize_mlir_text(text, keep_locations);
    auto second = kiln::canonicalize_mlir_text(text, keep_locations);
    if (first.has_value() != second.has_value()) std::abort();
    if (first && (first->text != second->text || first->module_name != second->module_name))
      std::abort();
  }
  return 0;
}

// The boundary between libkiln and libkiln_onnx_import (which links protobuf and libonnx). The
// runtime dlopens the importer only on a cache miss, so this header includes neither.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/buffer.h"
#include "kiln/status.h"

namespace kiln::onnx_import {

struct ImportRequest {
  std::string_view model_bytes;
  std::string model_name;       // for messages
  std::string model_directory;  // where external data files are
  // The initializers bound at run time (OnnxModel::weights), in order: function arguments.
  std::vector<std::string> bound_weights;
  // Every graph input's static shape, in graph order.
  std::vector<std::vector<int64_t>> input_shapes;
  // Per graph input: the values of a static input (compiled in as constants), else null.
  std::vector<const Buffer*> static_values;
  // Only list the nodes whose operators are not supported (the result; "" when none).
  bool check_only = false;
};

// MLIR text: `func.func @main(inputs..., bound weights..., prepared...) -> (outputs...)`, and when
// there are prepared values (weights re-laid-out for the kernels, e.g. transposed),
// `func.func @kiln_prepare(bound weights...) -> (prepared...)`, which the program runs once when it
// is loaded. A bound weight main does not read keeps its place in main's signature as
// `tensor<0xT>`: the caller passes an empty tensor there and may free the weight after prepare.
// Written through `out` (a C-linkage function cannot return a C++ class cleanly).
using ImportFn = void (*)(const ImportRequest& request, Result<std::string>* out);
inline constexpr const char* kImportSymbol = "kiln_onnx_import_to_mlir";
inline constexpr const char* kPrepareEntry = "kiln_prepare";

}  // namespace kiln::onnx_import

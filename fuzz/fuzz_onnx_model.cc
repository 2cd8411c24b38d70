// The ONNX readers: libkiln's wire-format reader (interface, weights, structure digest), the
// TensorProto decoder behind `--input x.pb`, and the importer that turns an accepted model into
// MLIR. Any bytes give a model and MLIR, or an error; never a crash, a hang or an unbounded
// allocation.
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "kiln/onnx.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(kiln::fuzz::as_view(data, size));
  if (auto tensor = kiln::decode_onnx_tensor(bytes, "fuzz.pb"); tensor.ok()) {
    volatile double sum = 0;
    for (int64_t i = 0; i < tensor->element_count(); ++i) sum = sum + tensor->element_as_double(i);
  }
  auto model = kiln::OnnxModel::from_bytes(bytes, "fuzz.onnx", "/nonexistent");
  if (!model.ok()) return 0;
  // The same bytes read twice agree (the digest is the cache key's model component).
  auto again = kiln::OnnxModel::from_bytes(bytes, "fuzz.onnx", "/nonexistent");
  if (!again.ok() || again->structure_digest() != model->structure_digest()) std::abort();
  for (size_t k = 0; k < model->weights().size(); ++k) (void)model->read_weight(k);
  auto shapes = model->resolve_input_shapes({});
  if (!shapes.ok()) return 0;
  for (const auto& shape : *shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d > 0 ? d : 1;
    if (n > (1 << 16)) return 0;  // the importer's work is proportional to the shapes given
  }
  (void)kiln::import_onnx_to_mlir(*model, *shapes);
  return 0;
}

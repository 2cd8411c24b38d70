// ONNX models: read without protobuf or libonnx (a warm cache hit loads neither), compiled
// through compile_or_get_cached like MLIR, run with their weights bound at load time.
//
// Large floating-point initializers ("weights") are not part of the compiled code: they are passed
// to it as extra arguments, so two checkpoints of one architecture share a cache entry. Every
// other initializer (integer tensors, scalars, small tensors: the ones shape arithmetic and
// attributes read) is folded into the code and so is part of the key. docs/ONNX.md.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/buffer.h"
#include "kiln/client.h"
#include "kiln/compile.h"
#include "kiln/executable.h"
#include "kiln/export.h"
#include "kiln/file.h"
#include "kiln/status.h"

namespace kiln {

// ONNX TensorProto.DataType values kiln reads.
enum class OnnxElementType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kBfloat16 = 16,
};
// "float", "int64", ... (ONNX's names), for messages.
KILN_EXPORT std::string onnx_element_type_name(int32_t type);
// The kiln element type of an ONNX one, or an error naming it.
KILN_EXPORT Result<DType> dtype_of_onnx(int32_t type);

// A graph input or output: name, element type and dimensions (kDynamicDim where the model gives a
// symbolic or no size).
struct KILN_EXPORT OnnxValueInfo {
  std::string name;
  int32_t element_type = 0;
  std::vector<int64_t> dims;
  std::vector<std::string> dim_params;  // the symbolic names ("batch"), "" where numeric
  bool has_shape = false;
  // Read as values when the program is built (a Reshape's shape, a Slice's bounds, a Clip's
  // limits): its values are compiled in and keyed, like JAX's static arguments, so a run with
  // other values is another program. See onnx_input_is_static_slot.
  bool is_static = false;
};

// An initializer whose values reach the code at run time (see the header comment).
struct KILN_EXPORT OnnxWeight {
  std::string name;
  int32_t element_type = 0;
  std::vector<int64_t> dims;
};

// Whether an initializer of this type and element count is bound at run time rather than folded
// into the code: floating tensors of two or more elements, unless an op reads their values at
// import time (`read_at_import`: Resize's roi and scales). OnnxModel decides with this rule and
// hands its decision to the importer, so the key and the code always agree.
KILN_EXPORT bool onnx_initializer_is_bound(int32_t element_type, int64_t element_count,
                                           bool read_at_import);
KILN_EXPORT bool onnx_input_read_at_import(const std::string& op_type, int input_index);
// Whether input `input_index` of `op_type` is read as values to build the program (shapes, axes,
// pads, bounds, counts). A graph input feeding such a slot is static (OnnxValueInfo::is_static).
KILN_EXPORT bool onnx_input_is_static_slot(const std::string& op_type, int input_index);

// A model as the runtime reads it: its interface, its bound weights, and a digest of everything
// else.
class KILN_EXPORT OnnxModel {
 public:
  // `directory` is where external data files are looked up (the model's directory). With
  // `fold_weights`, no initializer is bound: every value is compiled into the code (and so is
  // part of the key), which makes a self-contained executable (`kiln compile model.onnx`).
  static Result<OnnxModel> from_bytes(std::string bytes, std::string name, std::string directory,
                                      bool fold_weights = false);
  static Result<OnnxModel> from_file(const std::string& path, bool fold_weights = false);
  bool fold_weights() const { return fold_weights_; }

  const std::string& name() const { return name_; }
  std::string_view bytes() const { return bytes_.view(); }
  const std::string& directory() const { return directory_; }
  int64_t ir_version() const { return ir_version_; }
  // Operator set versions by domain ("" is the default domain).
  const std::map<std::string, int64_t>& opsets() const { return opsets_; }
  // Graph inputs in order, initializers excluded.
  const std::vector<OnnxValueInfo>& inputs() const { return inputs_; }
  const std::vector<OnnxValueInfo>& outputs() const { return outputs_; }
  // Bound weights, in initializer order: the code's arguments after the inputs.
  const std::vector<OnnxWeight>& weights() const { return weights_; }
  // SHA-256 (hex) of the model with the bound weights' values left out (their names, types and
  // dimensions stay in), and the external data of folded initializers added: equal for two
  // checkpoints of one architecture.
  const std::string& structure_digest() const { return structure_digest_; }
  // Op type counts ("Conv" -> 20), domain-qualified outside the default domain.
  const std::map<std::string, int>& op_counts() const { return op_counts_; }

  // The values of bound weight `index` (read from the model or its external data file).
  Result<Buffer> read_weight(size_t index) const;

  // The input shapes for a run: each input's dimensions with dynamic ones taken from `given`
  // (same order; empty: every dynamic dimension is 1). Errors name the input and dimension.
  Result<std::vector<std::vector<int64_t>>> resolve_input_shapes(
      const std::vector<std::vector<int64_t>>& given) const;

 private:
  friend class OnnxModelParser;
  static Result<OnnxModel> parse(FileBytes bytes, std::string name, std::string directory,
                                 bool fold_weights);
  struct WeightPayload {
    // Exactly one of: the bytes in the model (raw_data or a packed repeated field), an external
    // file with offset and length, or a non-packed repeated field to decode.
    size_t offset = 0, size = 0;
    std::string external_location;
    int64_t external_offset = 0, external_length = -1;
    bool packed = true;
  };
  std::string name_, directory_;
  FileBytes bytes_;
  int64_t ir_version_ = 0;
  std::map<std::string, int64_t> opsets_;
  std::vector<OnnxValueInfo> inputs_, outputs_;
  std::vector<OnnxWeight> weights_;
  std::vector<WeightPayload> payloads_;
  std::string structure_digest_;
  std::map<std::string, int> op_counts_;
  bool fold_weights_ = false;
};

// A serialised ONNX TensorProto (the backend tests' input_N.pb / output_N.pb) as a Buffer.
KILN_EXPORT Result<Buffer> decode_onnx_tensor(std::string_view bytes, const std::string& name);
KILN_EXPORT Result<Buffer> read_onnx_tensor_file(const std::string& path);
// `buffer` as a serialised TensorProto named `name` (raw_data), as `kiln run --output x.pb` writes.
KILN_EXPORT std::string encode_onnx_tensor(const Buffer& buffer, const std::string& name);

// Every node of `model` whose operator kiln cannot import, one per line ("" when all can), as the
// importer reports them before any compile (loads the importer).
KILN_EXPORT Result<std::string> unsupported_onnx_nodes(const OnnxModel& model);

// Whether `bytes` look like an ONNX ModelProto rather than MLIR text, bytecode or a .kx: the
// first field is ir_version (field 1, varint), as every exporter writes it.
inline bool looks_like_onnx(std::string_view bytes) { return !bytes.empty() && bytes[0] == 0x08; }
// Whether the file at `path` is an ONNX model: a `.onnx` name, or a first byte as above (reads
// one byte).
KILN_EXPORT bool is_onnx_file(const std::string& path);

// An ONNX model compiled for fixed input shapes, with its weights loaded: ready to run.
class KILN_EXPORT OnnxProgram {
 public:
  // The compiled function: inputs first, then the weights.
  const std::shared_ptr<Executable>& executable() const { return executable_; }
  const std::string& entry() const { return entry_; }
  const std::vector<std::vector<int64_t>>& input_shapes() const { return input_shapes_; }
  // Runs the model on `inputs` (graph order, checked against the compiled shapes; static inputs
  // must hold the values the program was compiled for).
  Result<std::vector<Buffer>> run(const std::vector<Buffer>& inputs) const;
  // What run passes to the executable's entry for `inputs`: the run-time inputs, then the bound
  // (and prepared) weights. For running another build of the same source, e.g. a PGLE flow.
  Result<std::vector<Buffer>> arguments(const std::vector<Buffer>& inputs) const;

 private:
  friend Result<OnnxProgram> compile_onnx_or_get_cached(const Client&, const OnnxModel&,
                                                        const std::vector<std::vector<int64_t>>&,
                                                        const CompileOptions&, CompileReport*,
                                                        const std::vector<Buffer>*,
                                                        CompilationCache*);
  std::shared_ptr<Executable> executable_;
  std::string entry_;
  std::vector<std::vector<int64_t>> input_shapes_;
  std::vector<Buffer> weights_;
  // Per graph input: the values compiled in (static inputs), else empty.
  std::vector<std::optional<Buffer>> static_values_;
  std::vector<std::string> input_names_;
};

// The MLIR kiln compiles for `model` at `input_shapes` (loads the ONNX importer; errors name every
// unsupported node). For `kiln inspect` and tests.
// `input_values` (graph order) supplies the static inputs' values; may be null when there are none.
KILN_EXPORT Result<std::string> import_onnx_to_mlir(
    const OnnxModel& model, const std::vector<std::vector<int64_t>>& input_shapes,
    const std::vector<Buffer>* input_values = nullptr);

// The source compile_onnx_or_get_cached compiles: identified (its raw-bytes alias) by the weights
// mode, the structure digest, the input shapes and the static inputs' values; it produces the MLIR
// only when a key or a compile needs it. `model` must outlive it. For `kiln cache explain`.
KILN_EXPORT Result<ModuleSource> onnx_module_source(
    const OnnxModel& model, const std::vector<std::vector<int64_t>>& input_shapes,
    const std::vector<Buffer>* input_values = nullptr);

// compile_or_get_cached for an ONNX model at `input_shapes` (from resolve_input_shapes). A repeat
// (same structure, shapes and options, any weights) is found without loading the importer,
// protobuf or MLIR. A model with static inputs needs `input_values` (the run's inputs, graph
// order): their values are part of the key.
// `cache` (null: the process default, from the KILN_* flags) is the cache it goes through.
KILN_EXPORT Result<OnnxProgram> compile_onnx_or_get_cached(
    const Client& client, const OnnxModel& model,
    const std::vector<std::vector<int64_t>>& input_shapes, const CompileOptions& options,
    CompileReport* report = nullptr, const std::vector<Buffer>* input_values = nullptr,
    CompilationCache* cache = nullptr);

}  // namespace kiln

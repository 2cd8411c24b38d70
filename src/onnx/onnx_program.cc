// ONNX models through compile_or_get_cached. The model's identity for the raw-bytes alias is its
// structure digest plus the input shapes, so a repeat run (or another checkpoint of the same
// architecture) finds its key without the importer; only a miss loads libkiln_onnx_import.
#include <dlfcn.h>

#include <mutex>

#include "kiln/onnx.h"
#include "onnx_import/onnx_import_interface.h"

namespace kiln {
namespace {

// The importer lives next to libkiln; $KILN_ONNX_IMPORT_LIBRARY overrides the path.
std::string importer_library_path() {
  if (const char* env = std::getenv("KILN_ONNX_IMPORT_LIBRARY")) return env;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&kiln_version), &info) != 0 && info.dli_fname != nullptr) {
    std::string self = info.dli_fname;
    size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + "libkiln_onnx_import.so";
  }
  return "libkiln_onnx_import.so";
}

Result<onnx_import::ImportFn> importer() {
  static std::once_flag once;
  static onnx_import::ImportFn function = nullptr;
  static Status load_status;
  std::call_once(once, [] {
    std::string path = importer_library_path();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      load_status =
          internal_error("cannot load kiln's ONNX importer " + path + ": " +
                         (why ? why : "unknown") + "; set KILN_ONNX_IMPORT_LIBRARY to its path");
      return;
    }
    function = reinterpret_cast<onnx_import::ImportFn>(dlsym(handle, onnx_import::kImportSymbol));
    if (function == nullptr)
      load_status = internal_error(path + " does not export " + onnx_import::kImportSymbol);
  });
  if (!load_status.ok()) return load_status;
  return function;
}

std::string shapes_text(const std::vector<std::vector<int64_t>>& shapes) {
  std::string out;
  for (const auto& s : shapes) out += (out.empty() ? "" : ", ") + shape_to_string(s);
  return out;
}

}  // namespace

Result<std::string> import_onnx_to_mlir(const OnnxModel& model,
                                        const std::vector<std::vector<int64_t>>& input_shapes) {
  KILN_ASSIGN_OR_RETURN(onnx_import::ImportFn import, importer());
  onnx_import::ImportRequest request;
  request.model_bytes = &model.bytes();
  request.model_name = model.name();
  request.input_shapes = input_shapes;
  request.model_directory = model.directory();
  for (const OnnxWeight& w : model.weights()) request.bound_weights.push_back(w.name);
  return import(request);
}

Result<OnnxProgram> compile_onnx_or_get_cached(
    const Client& client, const OnnxModel& model,
    const std::vector<std::vector<int64_t>>& input_shapes, const CompileOptions& options,
    CompileReport* report) {
  if (input_shapes.size() != model.inputs().size())
    return invalid_argument(model.name() + ": " + std::to_string(input_shapes.size()) +
                            " input shapes for " + std::to_string(model.inputs().size()) +
                            " inputs");
  std::string identity = "kiln onnx model v1\nstructure " + model.structure_digest() +
                         "\ninput shapes " + shapes_text(input_shapes) + "\n";
  // The model stays alive while compile_or_get_cached may produce the MLIR (this call).
  ModuleSource source = ModuleSource::produced_by(identity, model.name(), [&model, input_shapes] {
    return import_onnx_to_mlir(model, input_shapes);
  });
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Executable> executable,
                        compile_or_get_cached(client, source, options, report));
  OnnxProgram program;
  program.executable_ = std::move(executable);
  program.entry_ = "main";
  program.input_shapes_ = input_shapes;
  KILN_ASSIGN_OR_RETURN(const EntryPoint* entry, program.executable_->find_entry("main"));
  if (entry->inputs.size() != input_shapes.size() + model.weights().size())
    return internal_error(model.name() + ": the compiled program takes " +
                          std::to_string(entry->inputs.size()) + " arguments, the model has " +
                          std::to_string(input_shapes.size()) + " inputs and " +
                          std::to_string(model.weights().size()) + " bound weights");
  for (size_t k = 0; k < model.weights().size(); ++k) {
    KILN_ASSIGN_OR_RETURN(Buffer weight, model.read_weight(k));
    const TensorType& want = entry->inputs[input_shapes.size() + k];
    if (!(weight.type() == want))
      return internal_error(model.name() + ": weight '" + model.weights()[k].name + "' is " +
                            weight.type().to_string() + ", the program expects " +
                            want.to_string());
    program.weights_.push_back(std::move(weight));
  }
  return program;
}

Result<std::vector<Buffer>> OnnxProgram::run(const std::vector<Buffer>& inputs) const {
  if (inputs.size() != input_shapes_.size())
    return invalid_argument("the model takes " + std::to_string(input_shapes_.size()) +
                            " inputs, " + std::to_string(inputs.size()) + " were given");
  std::vector<Buffer> arguments = inputs;
  arguments.insert(arguments.end(), weights_.begin(), weights_.end());
  return executable_->execute(entry_, arguments);
}

}  // namespace kiln

// ONNX models through compile_or_get_cached. The model's identity for the raw-bytes alias is its
// structure digest plus the input shapes, so a repeat run (or another checkpoint of the same
// architecture) finds its key without the importer; only a miss loads libkiln_onnx_import.
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "core/digest.h"
#include "kiln/config.h"
#include "kiln/onnx.h"
#include "onnx_import/onnx_import_interface.h"

namespace kiln {
namespace {

// Values compiled in from one static input at most: shapes, axes and bounds are small.
constexpr int64_t kMaxStaticElements = 4096;

// The importer lives next to libkiln; $KILN_ONNX_IMPORT_LIBRARY overrides the path.
std::string importer_library_path() {
  if (std::string path = *config::get_string("KILN_ONNX_IMPORT_LIBRARY"); !path.empty())
    return path;
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

// The static inputs' values, checked against the model (null when it has none).
Result<std::vector<const Buffer*>> static_values_of(const OnnxModel& model,
                                                    const std::vector<Buffer>* input_values) {
  std::vector<const Buffer*> out(model.inputs().size(), nullptr);
  for (size_t k = 0; k < model.inputs().size(); ++k) {
    const OnnxValueInfo& info = model.inputs()[k];
    if (!info.is_static) continue;
    if (input_values == nullptr || k >= input_values->size())
      return invalid_argument(model.name() + ": input '" + info.name +
                              "' is read to build the program (a shape, axes or bounds): give "
                              "its values to compile");
    const Buffer& value = (*input_values)[k];
    KILN_ASSIGN_OR_RETURN(DType want, dtype_of_onnx(info.element_type));
    if (value.dtype() != want)
      return invalid_argument(model.name() + ": input '" + info.name + "' is " +
                              onnx_element_type_name(info.element_type) + ", got " +
                              dtype_name(value.dtype()));
    if (value.element_count() > kMaxStaticElements)
      return invalid_argument(model.name() + ": input '" + info.name + "' has " +
                              std::to_string(value.element_count()) +
                              " elements; kiln compiles in at most " +
                              std::to_string(kMaxStaticElements) +
                              " values of an input read to "
                              "build the program");
    out[k] = &value;
  }
  return out;
}

// A private copy (Buffer copies share storage; the caller may reuse its input afterwards).
Buffer copy_of(const Buffer& b) {
  Buffer out(b.dtype(), b.shape());
  if (b.byte_size() > 0) std::memcpy(out.data(), b.data(), b.byte_size());
  return out;
}

// The importer trusts what protobuf accepted, and a malformed model (attributes of the wrong
// length, say) can make it fail badly; it runs in a forked child, built with bounds-checked
// containers, so such a model is an error naming the signal, never the end of the caller or
// MLIR from a wrong read. The child writes "<status code>\n<message or MLIR>" to a pipe.
Result<std::string> import_in_child(onnx_import::ImportFn import,
                                    const onnx_import::ImportRequest& request) {
  int fds[2];
  if (pipe(fds) != 0) return internal_error("cannot create a pipe for the ONNX importer");
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return resource_exhausted("cannot fork the ONNX importer: " + std::string(strerror(errno)));
  }
  if (pid == 0) {
    close(fds[0]);
    Result<std::string> mlir = internal_error("the ONNX importer returned nothing");
    import(request, &mlir);
    std::string reply =
        mlir.ok() ? "0\n" + *mlir
                  : std::to_string(int(mlir.status().code())) + "\n" + mlir.status().message();
    for (size_t at = 0; at < reply.size();) {
      ssize_t n = write(fds[1], reply.data() + at, reply.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(3);
      at += size_t(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string reply;
  char chunk[65536];
  for (;;) {
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(chunk, size_t(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  size_t newline = reply.find('\n');
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || newline == std::string::npos) {
    std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                          : "exit code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      return resource_exhausted(request.model_name + ": error: the ONNX importer was killed (" +
                                how + "), most likely out of memory");
    return invalid_argument(request.model_name + ": error: the ONNX importer failed (" + how +
                            ") on this model: it is malformed in a way kiln does not diagnose "
                            "(check it with onnx.checker.check_model)");
  }
  int code = std::atoi(reply.substr(0, newline).c_str());
  std::string body = reply.substr(newline + 1);
  if (code == 0) return body;
  return Status(static_cast<StatusCode>(code), body);
}

bool same_values(const Buffer& a, const Buffer& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.byte_size()) == 0;
}

}  // namespace

Result<std::string> import_onnx_to_mlir(const OnnxModel& model,
                                        const std::vector<std::vector<int64_t>>& input_shapes,
                                        const std::vector<Buffer>* input_values) {
  KILN_ASSIGN_OR_RETURN(std::vector<const Buffer*> statics, static_values_of(model, input_values));
  KILN_ASSIGN_OR_RETURN(onnx_import::ImportFn import, importer());
  onnx_import::ImportRequest request;
  request.model_bytes = model.bytes();
  request.model_name = model.name();
  request.input_shapes = input_shapes;
  request.static_values = statics;
  request.model_directory = model.directory();
  for (const OnnxWeight& w : model.weights()) request.bound_weights.push_back(w.name);
  return import_in_child(import, request);
}

Result<ModuleSource> onnx_module_source(const OnnxModel& model,
                                        const std::vector<std::vector<int64_t>>& input_shapes,
                                        const std::vector<Buffer>* input_values) {
  if (input_shapes.size() != model.inputs().size())
    return invalid_argument(model.name() + ": " + std::to_string(input_shapes.size()) +
                            " input shapes for " + std::to_string(model.inputs().size()) +
                            " inputs");
  KILN_ASSIGN_OR_RETURN(std::vector<const Buffer*> statics, static_values_of(model, input_values));
  // The importer's output is part of what this names: bump the version when the lowering changes.
  std::string identity = "kiln onnx model v22\n" +
                         std::string(model.fold_weights() ? "weights folded\n" : "") +
                         "structure " + model.structure_digest() + "\ninput shapes " +
                         shapes_text(input_shapes) + "\n";
  for (size_t k = 0; k < statics.size(); ++k) {
    if (statics[k] == nullptr) continue;
    Sha256 digest;
    digest.update_framed(dtype_name(statics[k]->dtype()));
    digest.update_framed(shape_to_string(statics[k]->shape()));
    digest.update_framed(
        std::string_view(static_cast<const char*>(statics[k]->data()), statics[k]->byte_size()));
    identity += "static input " + std::to_string(k) + " " + digest.hex() + "\n";
  }
  // The model must stay alive while the source may produce its MLIR.
  return ModuleSource::produced_by(identity, model.name(), [&model, input_shapes, input_values] {
    return import_onnx_to_mlir(model, input_shapes, input_values);
  });
}

Result<std::string> unsupported_onnx_nodes(const OnnxModel& model) {
  KILN_ASSIGN_OR_RETURN(onnx_import::ImportFn import, importer());
  onnx_import::ImportRequest request;
  request.model_bytes = model.bytes();
  request.model_name = model.name();
  request.model_directory = model.directory();
  request.check_only = true;
  return import_in_child(import, request);
}

namespace {

// main's arguments after the run-time inputs: the model's weights (a weight main does not read is
// an empty placeholder there, and only prepare sees its values), then what prepare computes.
Result<std::vector<Buffer>> bound_arguments(const Executable& executable, const OnnxModel& model,
                                            const EntryPoint& entry, size_t runtime_inputs,
                                            const EntryPoint* prepare) {
  std::vector<Buffer> arguments;
  std::vector<Buffer> weights;
  for (size_t k = 0; k < model.weights().size(); ++k) {
    KILN_ASSIGN_OR_RETURN(Buffer weight, model.read_weight(k));
    const TensorType& want = entry.inputs[runtime_inputs + k];
    bool placeholder = want.dtype == weight.dtype() && want.shape == std::vector<int64_t>{0};
    if (!(weight.type() == want) && !placeholder)
      return internal_error(model.name() + ": weight '" + model.weights()[k].name + "' is " +
                            weight.type().to_string() + ", the program expects " +
                            want.to_string());
    if (weight.type() == want) {
      arguments.push_back(weight);
    } else {
      KILN_ASSIGN_OR_RETURN(Buffer empty, Buffer::allocate(want.dtype, want.shape));
      arguments.push_back(std::move(empty));
    }
    weights.push_back(std::move(weight));
  }
  if (prepare == nullptr) return arguments;
  KILN_ASSIGN_OR_RETURN(std::vector<Buffer> values, executable.execute(prepare->name, weights));
  weights.clear();  // what main does not read is freed here
  for (size_t k = 0; k < values.size(); ++k) {
    const TensorType& want = entry.inputs[runtime_inputs + model.weights().size() + k];
    if (!(values[k].type() == want))
      return internal_error(model.name() + ": prepared weight " + std::to_string(k) + " is " +
                            values[k].type().to_string() + ", the program expects " +
                            want.to_string());
    arguments.push_back(std::move(values[k]));
  }
  return arguments;
}

}  // namespace

Result<OnnxProgram> compile_onnx_or_get_cached(
    const Client& client, const OnnxModel& model,
    const std::vector<std::vector<int64_t>>& input_shapes, const CompileOptions& options,
    CompileReport* report, const std::vector<Buffer>* input_values, CompilationCache* cache) {
  // onnx_module_source has checked the static inputs' values; here they are only copied.
  KILN_ASSIGN_OR_RETURN(ModuleSource source, onnx_module_source(model, input_shapes, input_values));
  size_t static_count = 0;
  for (const OnnxValueInfo& input : model.inputs()) static_count += input.is_static;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Executable> executable,
                        cache ? cache->compile_or_get_cached(client, source, options, report)
                              : compile_or_get_cached(client, source, options, report));
  OnnxProgram program;
  program.executable_ = std::move(executable);
  program.entry_ = "main";
  program.input_shapes_ = input_shapes;
  for (size_t k = 0; k < model.inputs().size(); ++k) {
    program.input_names_.push_back(model.inputs()[k].name);
    program.static_values_.push_back(model.inputs()[k].is_static
                                         ? std::optional<Buffer>(copy_of((*input_values)[k]))
                                         : std::nullopt);
  }
  KILN_ASSIGN_OR_RETURN(const EntryPoint* entry, program.executable_->find_entry("main"));
  size_t runtime_inputs = input_shapes.size() - static_count;
  // Weights re-laid-out for the kernels are computed once, here, by the program's prepare entry.
  const EntryPoint* prepare = nullptr;
  for (const EntryPoint& e : program.executable_->entry_points())
    if (e.name == onnx_import::kPrepareEntry) prepare = &e;
  size_t prepared = prepare != nullptr ? prepare->outputs.size() : 0;
  if (entry->inputs.size() != runtime_inputs + model.weights().size() + prepared)
    return internal_error(model.name() + ": the compiled program takes " +
                          std::to_string(entry->inputs.size()) + " arguments, the model has " +
                          std::to_string(runtime_inputs) + " run-time inputs and " +
                          std::to_string(model.weights().size()) + " bound weights (and " +
                          std::to_string(prepared) + " prepared from them)");
  KILN_ASSIGN_OR_RETURN(program.weights_, bound_arguments(*program.executable_, model, *entry,
                                                          runtime_inputs, prepare));
  return program;
}

Result<std::vector<Buffer>> OnnxProgram::arguments(const std::vector<Buffer>& inputs) const {
  if (inputs.size() != input_shapes_.size())
    return invalid_argument("the model takes " + std::to_string(input_shapes_.size()) +
                            " inputs, " + std::to_string(inputs.size()) + " were given");
  std::vector<Buffer> arguments;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (k < static_values_.size() && static_values_[k]) {
      if (!same_values(inputs[k], *static_values_[k]))
        return invalid_argument("input '" + input_names_[k] +
                                "' is compiled into this program (it shapes it) and holds other "
                                "values now; compile the model again for these values");
      continue;
    }
    arguments.push_back(inputs[k]);
  }
  arguments.insert(arguments.end(), weights_.begin(), weights_.end());
  return arguments;
}

Result<std::vector<Buffer>> OnnxProgram::run(const std::vector<Buffer>& inputs) const {
  KILN_ASSIGN_OR_RETURN(std::vector<Buffer> arguments, this->arguments(inputs));
  return executable_->execute(entry_, arguments);
}

}  // namespace kiln

// kiln's Python extension: the C++ API under kiln/__init__.py's Pythonic layer. Importing it
// loads libkiln only; the compiler library is loaded by the first compile that misses the cache.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "kiln/buffer.h"
#include "kiln/client.h"
#include "kiln/compilation_cache.h"
#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/distributed.h"
#include "kiln/executable.h"
#include "kiln/host_callback.h"
#include "kiln/onnx.h"
#include "kiln/profile_guided.h"

namespace py = pybind11;

namespace {

// Raised for every kiln error; kiln/__init__.py turns it into the kiln.Error subclass of its code.
PyObject* status_error = nullptr;

[[noreturn]] void raise(const kiln::Status& status) {
  py::object error = py::reinterpret_borrow<py::object>(status_error);
  PyErr_SetObject(status_error,
                  py::make_tuple(kiln::status_code_name(status.code()), status.message()).ptr());
  throw py::error_already_set();
}

template <typename T>
T value_or_raise(kiln::Result<T> result) {
  if (!result.ok()) raise(result.status());
  return std::move(*result);
}

std::atomic<bool> client_created{false};

// The process's client: one process of the job kiln.distributed.initialize (or KILN_COORDINATOR)
// set up, else alone.
const kiln::Client& client() {
  static std::once_flag once;
  static std::unique_ptr<kiln::Client> instance;
  static kiln::Status failure;
  std::call_once(once, [] {
    client_created = true;
    failure = kiln::distributed::context() ? kiln::Status()
                                           : kiln::distributed::initialize_from_environment();
    if (!failure.ok()) return;
    auto job = kiln::distributed::context();
    auto created = job ? kiln::Client::create_cpu_for_job(0, job->process_id, job->num_processes)
                       : kiln::Client::create_cpu();
    if (created.ok())
      instance = std::move(*created);
    else
      failure = created.status();
  });
  if (!instance) raise(failure);
  return *instance;
}

void distributed_initialize(const std::string& coordinator, int num_processes, int process_id,
                            const std::string& job) {
  if (client_created)
    raise(kiln::invalid_argument(
        "kiln.distributed.initialize must come before the first compile in this process (its "
        "client is made for the job then)"));
  kiln::Status status;
  {
    py::gil_scoped_release release;
    status = kiln::distributed::initialize(coordinator, num_processes, process_id, job);
  }
  if (!status.ok()) raise(status);
}

// NumPy's dtype for a kiln element type.
py::dtype numpy_dtype(kiln::DType dtype) {
  switch (dtype) {
    case kiln::DType::kF32:
      return py::dtype::of<float>();
    case kiln::DType::kF64:
      return py::dtype::of<double>();
    case kiln::DType::kI1:
      return py::dtype::of<bool>();
    case kiln::DType::kI8:
      return py::dtype::of<int8_t>();
    case kiln::DType::kI16:
      return py::dtype::of<int16_t>();
    case kiln::DType::kI32:
      return py::dtype::of<int32_t>();
    case kiln::DType::kI64:
      return py::dtype::of<int64_t>();
  }
  return py::dtype::of<float>();
}

std::string type_text(const kiln::TensorType& type) {
  return type.scalar ? kiln::dtype_name(type.dtype) : type.to_string();
}

py::dict entry_description(const kiln::EntryPoint& entry) {
  py::list inputs, outputs;
  for (const kiln::TensorType& t : entry.inputs) inputs.append(type_text(t));
  for (const kiln::TensorType& t : entry.outputs) outputs.append(type_text(t));
  py::dict d;
  d["name"] = entry.name;
  d["inputs"] = inputs;
  d["outputs"] = outputs;
  return d;
}

// A result as NumPy owns it: the array keeps the Buffer (and so kiln's memory) alive, no copy.
py::object to_python(const kiln::Buffer& buffer, bool scalar) {
  py::dtype dtype = numpy_dtype(buffer.dtype());
  if (scalar) {
    py::array value(dtype, std::vector<py::ssize_t>{}, buffer.data());
    return value.attr("item")();
  }
  auto* kept = new kiln::Buffer(buffer);
  py::capsule owner(kept, [](void* p) { delete static_cast<kiln::Buffer*>(p); });
  std::vector<py::ssize_t> shape(buffer.shape().begin(), buffer.shape().end());
  return py::array(dtype, shape, buffer.data(), owner);
}

// An argument for `type`: the array itself where its layout allows (C order, same dtype), held
// alive in `keep`; Python numbers for scalar arguments.
kiln::Buffer to_buffer(const py::handle& value, const kiln::TensorType& type, size_t index,
                       const std::string& entry, std::vector<py::object>& keep) {
  std::string where = "argument " + std::to_string(index) + " of '" + entry + "'";
  py::dtype want = numpy_dtype(type.dtype);
  if (type.scalar) {
    if (!py::isinstance<py::int_>(value) && !py::isinstance<py::float_>(value) &&
        !py::isinstance<py::bool_>(value) && !py::isinstance<py::array>(value))
      throw py::type_error(where + ": expected a number (" + type_text(type) + "), given " +
                           std::string(py::str(py::type::of(value))));
    py::array a = py::array::ensure(value);
    if (a.ndim() != 0)
      throw py::value_error(where + ": expected a scalar " + type_text(type) + ", given an array");
    py::array cast = a.attr("astype")(want);
    kiln::Buffer b(type.dtype, {});
    std::memcpy(b.data(), cast.data(), b.byte_size());
    return b;
  }
  if (!py::isinstance<py::array>(value))
    throw py::type_error(where + ": expected a NumPy array (" + type.to_string() + "), given " +
                         std::string(py::str(py::type::of(value))));
  py::array a = py::reinterpret_borrow<py::array>(value);
  if (!a.dtype().is(want))
    throw py::type_error(where + ": expected dtype " + std::string(py::str(want)) + " (" +
                         type.to_string() + "), given " + std::string(py::str(a.dtype())));
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  bool fits = shape.size() == type.shape.size();
  for (size_t d = 0; fits && d < shape.size(); ++d)
    fits = type.shape[d] == kiln::kDynamicDim || type.shape[d] == shape[d];
  if (!fits)
    throw py::value_error(where + ": expected shape " + type.to_string() + ", given " +
                          kiln::shape_to_string(shape));
  py::array contiguous = py::array::ensure(a, py::array::c_style);
  keep.push_back(contiguous);
  // The caller keeps the array alive for the call: the Buffer only borrows its memory.
  return kiln::Buffer(type.dtype, shape, const_cast<void*>(contiguous.data()),
                      std::shared_ptr<void>());
}

py::dict report_dict(const kiln::CompileReport& r) {
  py::dict d;
  d["cache"] = kiln::to_string(r.cache);
  d["from_memory"] = r.from_memory;
  d["key"] = r.key;
  d["module"] = r.module_name;
  d["compiled"] = r.compiled;
  d["write_skip"] = kiln::to_string(r.write_skip);
  d["skipped_write"] = r.skipped_write;
  d["key_ms"] = r.key_ms;
  d["retrieval_ms"] = r.retrieval_ms;
  d["compile_ms"] = r.compile_ms;
  d["pgle"] = kiln::to_string(r.pgle);
  d["shared"] = kiln::to_string(r.shared);
  return d;
}

// The call's arguments for `entry`, checked for count, dtype and shape (held alive in `keep`).
std::vector<kiln::Buffer> arguments_for(const kiln::EntryPoint& entry, const py::args& args,
                                        std::vector<py::object>& keep) {
  if (args.size() != entry.inputs.size())
    throw py::type_error("'" + entry.name + "' takes " + std::to_string(entry.inputs.size()) +
                         " argument(s), " + std::to_string(args.size()) + " given");
  std::vector<kiln::Buffer> inputs;
  for (size_t i = 0; i < args.size(); ++i)
    inputs.push_back(to_buffer(args[i], entry.inputs[i], i, entry.name, keep));
  return inputs;
}

// One result as a NumPy array (or number), several as a tuple.
py::object outputs_to_python(const std::vector<kiln::Buffer>& outputs,
                             const kiln::EntryPoint& entry) {
  if (outputs.size() == 1) return to_python(outputs[0], entry.outputs[0].scalar);
  py::tuple out(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    out[i] = to_python(outputs[i], entry.outputs[i].scalar);
  return out;
}

// A compiled MLIR program (or a loaded .kx).
class PyExecutable {
 public:
  PyExecutable(std::shared_ptr<kiln::Executable> exe, py::dict report)
      : exe_(std::move(exe)), report_(std::move(report)) {}

  py::list entries() const {
    py::list out;
    for (const kiln::EntryPoint& e : exe_->entry_points()) out.append(entry_description(e));
    return out;
  }

  py::object call(const std::string& requested, const py::args& args) const {
    const kiln::EntryPoint* entry = this->entry(requested);
    std::vector<py::object> keep;
    std::vector<kiln::Buffer> inputs = arguments_for(*entry, args, keep);
    kiln::Result<std::vector<kiln::Buffer>> results = kiln::internal_error("not run");
    {
      py::gil_scoped_release release;
      results = exe_->execute(entry->name, inputs);
    }
    return outputs_to_python(value_or_raise(std::move(results)), *entry);
  }

  // For bench/python_overhead.py: `runs` calls of execute from C++ (arguments converted once),
  // in seconds, to set Python's per-call cost against.
  double time_execute(const std::string& requested, int runs, const py::args& args) const {
    const kiln::EntryPoint* entry = this->entry(requested);
    std::vector<py::object> keep;
    std::vector<kiln::Buffer> inputs;
    for (size_t i = 0; i < args.size() && i < entry->inputs.size(); ++i)
      inputs.push_back(to_buffer(args[i], entry->inputs[i], i, entry->name, keep));
    py::gil_scoped_release release;
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < runs; ++r) {
      auto out = exe_->execute(entry->name, inputs);
      if (!out.ok()) return -1;
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  py::dict report() const { return report_; }
  std::string effort_level() const { return exe_->info().effort_level; }
  py::bytes serialize() const { return py::bytes(exe_->serialize()); }

  // The entry `requested` names, or the program's only (or main) one.
  const kiln::EntryPoint* entry(const std::string& requested) const {
    const auto& entries = exe_->entry_points();
    if (!requested.empty()) return value_or_raise(exe_->find_entry(requested));
    if (entries.size() == 1) return &entries[0];
    for (const auto& e : entries)
      if (e.name == "main") return &e;
    std::string names;
    for (const auto& e : entries) names += (names.empty() ? "" : ", ") + e.name;
    raise(kiln::invalid_argument(
        entries.empty() ? "the program has no entry function (a public function with tensor, "
                          "memref or scalar arguments)"
                        : "the program has several entry functions (" + names +
                              "); choose one with entry=..."));
  }

 private:
  std::shared_ptr<kiln::Executable> exe_;
  py::dict report_;
};

// An ONNX model compiled for the input shapes it was first called with (one program per shape).
class PyOnnxExecutable {
 public:
  PyOnnxExecutable(kiln::OnnxModel model, kiln::CompileOptions options,
                   std::shared_ptr<kiln::CompilationCache> cache)
      : client_(&client()),  // created here, with the GIL: run() has none to raise with
        model_(std::move(model)),
        options_(std::move(options)),
        cache_(std::move(cache)) {}

  py::list input_names() const {
    py::list names;
    for (const auto& i : model_.inputs()) names.append(i.name);
    return names;
  }
  py::list output_names() const {
    py::list names;
    for (const auto& o : model_.outputs()) names.append(o.name);
    return names;
  }

  py::object call(const py::args& args) {
    if (args.size() != model_.inputs().size())
      throw py::type_error("the model takes " + std::to_string(model_.inputs().size()) +
                           " input(s), " + std::to_string(args.size()) + " given");
    std::vector<py::object> keep;
    std::vector<kiln::Buffer> inputs;
    std::vector<std::vector<int64_t>> given;
    for (size_t i = 0; i < args.size(); ++i) {
      const kiln::OnnxValueInfo& info = model_.inputs()[i];
      kiln::DType dtype = value_or_raise(kiln::dtype_of_onnx(info.element_type));
      if (!py::isinstance<py::array>(args[i]))
        throw py::type_error("input '" + info.name + "': expected a NumPy array");
      py::array a = py::reinterpret_borrow<py::array>(args[i]);
      std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
      kiln::TensorType type{dtype, shape};
      inputs.push_back(to_buffer(a, type, i, "the model", keep));
      given.push_back(shape);
    }
    kiln::Result<std::vector<kiln::Buffer>> results = kiln::internal_error("not run");
    {
      py::gil_scoped_release release;
      results = run(given, inputs);
    }
    std::vector<kiln::Buffer> outputs = value_or_raise(std::move(results));
    if (outputs.size() == 1) return to_python(outputs[0], false);
    py::tuple out(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) out[i] = to_python(outputs[i], false);
    return out;
  }

  py::dict report() const { return report_dict(last_report_); }

 private:
  kiln::Result<std::vector<kiln::Buffer>> run(const std::vector<std::vector<int64_t>>& given,
                                              const std::vector<kiln::Buffer>& inputs) {
    std::lock_guard<std::mutex> lock(mutex_);
    KILN_ASSIGN_OR_RETURN(auto shapes, model_.resolve_input_shapes(given));
    auto found = programs_.find(shapes);
    if (found == programs_.end()) {
      kiln::CompileReport report;
      KILN_ASSIGN_OR_RETURN(kiln::OnnxProgram program,
                            kiln::compile_onnx_or_get_cached(*client_, model_, shapes, options_,
                                                             &report, &inputs, cache_.get()));
      last_report_ = report;
      found = programs_.emplace(shapes, std::move(program)).first;
    }
    return found->second.run(inputs);
  }

  const kiln::Client* client_;
  kiln::OnnxModel model_;
  kiln::CompileOptions options_;
  std::shared_ptr<kiln::CompilationCache> cache_;
  std::mutex mutex_;
  std::map<std::vector<std::vector<int64_t>>, kiln::OnnxProgram> programs_;
  kiln::CompileReport last_report_;
};

// What kiln.compile's keywords ask for: the effort level, passes left out, and compile option
// overrides (refused by name when kiln knows no such option, as JAX does).
struct PyCompileOptions {
  std::string optimization_level = "UNKNOWN";
  std::vector<std::string> disabled_passes;
  std::vector<std::pair<std::string, std::string>> overrides;
};

kiln::CompileOptions options_for(const PyCompileOptions& requested) {
  kiln::CompileOptions options;
  options.optimization_level =
      value_or_raise(kiln::parse_effort_level(requested.optimization_level));
  options.disabled_passes = requested.disabled_passes;
  options.env_option_overrides = requested.overrides;
  return options;
}

// Compiles MLIR (text or bytecode) or loads a .kx, through `cache` or the process default.
PyExecutable compile_mlir(const py::bytes& bytes, const std::string& name,
                          const PyCompileOptions& requested,
                          const std::shared_ptr<kiln::CompilationCache>& cache) {
  kiln::ModuleSource source;
  source.bytes = std::string(bytes);
  source.name = name;
  kiln::CompileOptions options = options_for(requested);
  kiln::CompileReport report;
  kiln::Result<std::shared_ptr<kiln::Executable>> exe = kiln::internal_error("not compiled");
  const kiln::Client& c = client();
  {
    py::gil_scoped_release release;
    if (source.bytes.rfind("KILNEXE", 0) == 0)
      exe = kiln::Executable::deserialize(source.bytes);
    else if (cache)
      exe = cache->compile_or_get_cached(c, source, options, &report);
    else
      exe = kiln::compile_or_get_cached(c, source, options, &report);
  }
  return PyExecutable(value_or_raise(std::move(exe)), report_dict(report));
}

std::unique_ptr<PyOnnxExecutable> load_onnx(const py::bytes& bytes, const std::string& name,
                                            const std::string& directory,
                                            const PyCompileOptions& requested,
                                            const std::shared_ptr<kiln::CompilationCache>& cache) {
  kiln::OnnxModel model =
      value_or_raise(kiln::OnnxModel::from_bytes(std::string(bytes), name, directory));
  return std::make_unique<PyOnnxExecutable>(std::move(model), options_for(requested), cache);
}

// The key `bytes` (MLIR) would have in `cache` at `optimization_level`, what it is made of, and
// whether the cache holds an entry under it.
// An ONNX model's source for explain: the model at its declared input shapes (dynamic ones 1).
kiln::Result<kiln::ModuleSource> onnx_explain_source(const kiln::OnnxModel& model) {
  for (const kiln::OnnxValueInfo& input : model.inputs())
    if (input.is_static)
      return kiln::invalid_argument(model.name() + ": input '" + input.name +
                                    "' is compiled in by value; its key depends on the values a "
                                    "call gives (the executable's report has the key)");
  KILN_ASSIGN_OR_RETURN(auto shapes, model.resolve_input_shapes({}));
  return kiln::onnx_module_source(model, shapes);
}

py::dict explain(const std::shared_ptr<kiln::CompilationCache>& cache, const py::bytes& bytes,
                 const std::string& name, const std::string& directory, bool onnx,
                 const PyCompileOptions& requested) {
  std::optional<kiln::OnnxModel> model;  // outlives the source made from it
  kiln::ModuleSource source;
  if (onnx) {
    model = value_or_raise(kiln::OnnxModel::from_bytes(std::string(bytes), name, directory));
    source = value_or_raise(onnx_explain_source(*model));
  } else {
    source.bytes = std::string(bytes);
    source.name = name;
  }
  kiln::CompileOptions options = options_for(requested);
  const kiln::Client& c = client();
  kiln::Result<kiln::CacheKey> key = kiln::internal_error("no key");
  kiln::Result<std::optional<std::string>> stored = std::optional<std::string>();
  {
    py::gil_scoped_release release;
    key = cache->compute_key(c, source, options);
    if (key.ok() && cache->store() != nullptr) stored = cache->store()->get(key->key);
  }
  kiln::CacheKey k = value_or_raise(std::move(key));
  py::list components;
  for (const kiln::KeyComponent& component : k.components) {
    py::dict d;
    d["name"] = component.name;
    d["digest"] = component.digest;
    d["description"] = component.description;
    components.append(d);
  }
  py::dict out;
  out["key"] = k.key;
  out["module"] = k.module_name;
  out["components"] = components;
  out["stored"] = stored.ok() && stored->has_value();
  return out;
}

// A Python callable as a host callback: called with the GIL taken, each argument a NumPy copy
// (the program's buffers are valid during the call only); an exception it raises becomes the
// error of the execute that called it.
void register_callback(const std::string& name, const py::function& function) {
  // The callable outlives any one call; it is released with the GIL held (or leaked at exit, when
  // the interpreter is gone).
  std::shared_ptr<py::object> callable(new py::object(function), [](py::object* object) {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    delete object;
  });
  kiln::register_host_callback(
      name, [name, callable](const std::vector<kiln::Buffer>& args) -> kiln::Status {
        py::gil_scoped_acquire gil;
        try {
          py::tuple arrays(args.size());
          for (size_t i = 0; i < args.size(); ++i) {
            std::vector<py::ssize_t> shape(args[i].shape().begin(), args[i].shape().end());
            arrays[i] = py::array(numpy_dtype(args[i].dtype()), shape, args[i].data());
          }
          (*callable)(*arrays);
          return kiln::Status();
        } catch (py::error_already_set& error) {
          return kiln::invalid_argument("host callback '" + name + "' raised " + error.what());
        }
      });
}

// A cache from the KILN_* flags with what the caller gave changed: a directory, bounds (>= 0),
// a remote tier, whether it stores at all, PGLE.
std::shared_ptr<kiln::CompilationCache> open_cache(const std::string& directory,
                                                   int64_t max_size_bytes, int64_t max_entries,
                                                   const std::string& remote_url, bool enabled,
                                                   bool pgle) {
  kiln::CompilationCacheOptions options = kiln::CompilationCacheOptions::from_flags();
  options.enabled = enabled;
  if (!directory.empty()) options.directory = directory;
  if (max_size_bytes >= 0) options.max_size_bytes = max_size_bytes;
  if (max_entries >= 0) options.max_entries = max_entries;
  if (!remote_url.empty()) options.remote_url = remote_url;
  options.enable_pgle = options.enable_pgle || pgle;
  return value_or_raise(kiln::CompilationCache::open(options));
}

// A program run through PGLE: its first runs profiled, then recompiled once with the profile.
class PyProfileGuided {
 public:
  explicit PyProfileGuided(std::unique_ptr<kiln::ProfileGuidedProgram> program)
      : program_(std::move(program)) {}

  py::object call(const std::string& requested, const py::args& args) {
    PyExecutable current(program_->executable(), py::dict());
    const kiln::EntryPoint* entry = current.entry(requested);
    std::vector<py::object> keep;
    std::vector<kiln::Buffer> inputs = arguments_for(*entry, args, keep);
    kiln::Result<std::vector<kiln::Buffer>> results = kiln::internal_error("not run");
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      results = program_->execute(entry->name, inputs);
    }
    return outputs_to_python(value_or_raise(std::move(results)), *entry);
  }

  py::list entries() const { return PyExecutable(program_->executable(), py::dict()).entries(); }
  bool profiling() const { return program_->profiling(); }
  int recompiles() const { return program_->recompiles(); }
  py::dict first_report() const { return report_dict(program_->first_report()); }
  py::dict last_report() const { return report_dict(program_->last_report()); }

 private:
  std::unique_ptr<kiln::ProfileGuidedProgram> program_;
  std::mutex mutex_;  // the profile and the one recompile belong to one caller at a time
};

std::unique_ptr<PyProfileGuided> compile_pgle(
    const py::bytes& bytes, const std::string& name, const PyCompileOptions& requested,
    const std::shared_ptr<kiln::CompilationCache>& cache) {
  kiln::ModuleSource source;
  source.bytes = std::string(bytes);
  source.name = name;
  kiln::CompileOptions options = options_for(requested);
  const kiln::Client& c = client();
  kiln::Result<std::unique_ptr<kiln::ProfileGuidedProgram>> program =
      kiln::internal_error("not compiled");
  {
    py::gil_scoped_release release;
    program = kiln::ProfileGuidedProgram::create(c, std::move(source), options, cache);
  }
  return std::make_unique<PyProfileGuided>(value_or_raise(std::move(program)));
}

}  // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln's C++ API (use the kiln package)";
  py::class_<PyCompileOptions>(m, "CompileOptions")
      .def(py::init<>())
      .def_readwrite("optimization_level", &PyCompileOptions::optimization_level)
      .def_readwrite("disabled_passes", &PyCompileOptions::disabled_passes)
      .def_readwrite("overrides", &PyCompileOptions::overrides);
  status_error = PyErr_NewException("kiln._kiln.StatusError", PyExc_RuntimeError, nullptr);
  m.attr("StatusError") = py::reinterpret_borrow<py::object>(status_error);

  py::class_<PyExecutable>(m, "Executable")
      .def("entries", &PyExecutable::entries)
      .def("call", &PyExecutable::call)
      .def("time_execute", &PyExecutable::time_execute)
      .def("report", &PyExecutable::report)
      .def("effort_level", &PyExecutable::effort_level)
      .def("serialize", &PyExecutable::serialize);
  py::class_<PyOnnxExecutable>(m, "OnnxExecutable")
      .def("input_names", &PyOnnxExecutable::input_names)
      .def("output_names", &PyOnnxExecutable::output_names)
      .def("call", &PyOnnxExecutable::call)
      .def("report", &PyOnnxExecutable::report);
  py::class_<kiln::CompilationCache, std::shared_ptr<kiln::CompilationCache>>(m, "CompilationCache")
      .def("counters", &kiln::CompilationCache::counters)
      .def("directory", [](const kiln::CompilationCache& c) { return c.options().directory; });

  m.def("compile_mlir", &compile_mlir, py::arg("bytes"), py::arg("name"), py::arg("options"),
        py::arg("cache"));
  m.def("load_onnx", &load_onnx, py::arg("bytes"), py::arg("name"), py::arg("directory"),
        py::arg("options"), py::arg("cache"));
  m.def("explain", &explain, py::arg("cache"), py::arg("bytes"), py::arg("name"),
        py::arg("directory"), py::arg("onnx"), py::arg("options"));
  m.def("open_cache", &open_cache, py::arg("directory"), py::arg("max_size_bytes"),
        py::arg("max_entries"), py::arg("remote_url"), py::arg("enabled"), py::arg("pgle"));
  py::class_<PyProfileGuided>(m, "ProfileGuided")
      .def("call", &PyProfileGuided::call)
      .def("entries", &PyProfileGuided::entries)
      .def("profiling", &PyProfileGuided::profiling)
      .def("recompiles", &PyProfileGuided::recompiles)
      .def("first_report", &PyProfileGuided::first_report)
      .def("last_report", &PyProfileGuided::last_report);
  m.def("compile_pgle", &compile_pgle, py::arg("bytes"), py::arg("name"), py::arg("options"),
        py::arg("cache"));
  m.def("distributed_initialize", &distributed_initialize, py::arg("coordinator"),
        py::arg("num_processes"), py::arg("process_id"), py::arg("job"));
  m.def("distributed_context", []() -> py::object {
    auto job = kiln::distributed::context();
    if (!job) return py::none();
    py::dict d;
    d["coordinator"] = job->coordinator;
    d["num_processes"] = job->num_processes;
    d["process_id"] = job->process_id;
    d["job"] = job->job;
    return d;
  });
  m.def("register_host_callback", &register_callback, py::arg("name"), py::arg("function"));
  m.def("unregister_host_callback",
        [](const std::string& name) { kiln::unregister_host_callback(name); });
  m.def("config_get",
        [](const std::string& name) { return value_or_raise(kiln::config::get_string(name)); });
  m.def("config_set", [](const std::string& name, const std::string& value) {
    kiln::Status s = kiln::config::set(name, value);
    if (!s.ok()) raise(s);
  });
  m.def("config_flags", [] {
    py::dict out;
    for (const kiln::config::FlagState& f : kiln::config::flag_states()) {
      py::dict d;
      d["value"] = f.value;
      d["type"] = f.type;
      d["source"] = f.source;
      d["in_key"] = f.in_key;
      out[py::str(f.info.name)] = d;
    }
    return out;
  });
}

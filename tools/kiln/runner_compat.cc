#include "runner_compat.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

namespace kiln::cli {

std::vector<std::string> with_runner_spelling(int argc, char** argv) {
  // mlir-runner's long options, which LLVM's option parser also takes after one dash.
  static const char* const kLongOptions[] = {"entry-point-result", "shared-libs", "enable-matrix",
                                             "matrix-allow-contract", "matrix-default-layout"};
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    bool effort_flag = (arg.size() == 3 && arg.rfind("-O", 0) == 0) ||
                       (arg.size() == 4 && arg.rfind("--O", 0) == 0);
    char level = arg.empty() ? 0 : arg.back();
    if (i > 0 && effort_flag && level >= '0' && level <= '3') {
      out.push_back("--effort");
      out.push_back(std::string("O") + level);
      continue;
    }
    if (i > 0 && arg.size() > 2 && arg[0] == '-' && arg[1] != '-') {
      std::string name = arg.substr(1, arg.find('=') - 1);
      for (const char* option : kLongOptions)
        if (name == option) arg = "-" + arg;
    }
    out.push_back(std::move(arg));
  }
  return out;
}

Result<EntryPointResult> parse_entry_point_result(const std::string& text) {
  if (text.empty() || text == "void" || text == "i32" || text == "i64" || text == "f32")
    return EntryPointResult{text};
  return invalid_argument("--entry-point-result=" + text +
                          ": expected void, i32, i64 or f32 (as mlir-runner)");
}

Status check_entry_for_result(const EntryPoint& entry, const EntryPointResult& result) {
  if (!result.scalar()) return Status::ok_status();
  if (!entry.inputs.empty())
    return invalid_argument("--entry-point-result=" + result.kind + ": '" + entry.name +
                            "' takes " + std::to_string(entry.inputs.size()) +
                            " argument(s); like mlir-runner, kiln calls a scalar-returning entry "
                            "without arguments");
  bool matches = entry.outputs.size() == 1 && entry.outputs[0].scalar &&
                 dtype_name(entry.outputs[0].dtype) == result.kind;
  if (!matches) {
    std::string returns;
    for (const TensorType& t : entry.outputs)
      returns += (returns.empty() ? "" : ", ") + (t.scalar ? dtype_name(t.dtype) : t.to_string());
    return invalid_argument("--entry-point-result=" + result.kind + ": '" + entry.name +
                            "' returns " + (returns.empty() ? "nothing" : returns) + ", not one " +
                            result.kind);
  }
  return Status::ok_status();
}

std::string runner_text(const Buffer& scalar) {
  char text[64];
  switch (scalar.dtype()) {
    case DType::kI32:
      std::snprintf(text, sizeof text, "%d", *static_cast<const int32_t*>(scalar.data()));
      return text;
    case DType::kI64:
      std::snprintf(text, sizeof text, "%lld",
                    static_cast<long long>(*static_cast<const int64_t*>(scalar.data())));
      return text;
    default: {
      // LLVM's raw_ostream prints a float this way (mlir-runner prints through it).
      double value = scalar.element_as_double(0);
      if (std::isnan(value)) return "nan";
      if (std::isinf(value)) return std::signbit(value) ? "-INF" : "INF";
      std::snprintf(text, sizeof text, "%e", value);
      return text;
    }
  }
}

Status load_shared_libraries(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    if (path.empty()) continue;
    std::string name = std::filesystem::path(path).filename().string();
    // kiln's runtime exports what these provide (printMemref*, the async runtime...).
    if (name.rfind("libmlir_runner_utils", 0) == 0 ||
        name.rfind("libmlir_c_runner_utils", 0) == 0 || name.rfind("libmlir_async_runtime", 0) == 0)
      continue;
    // Global, so the executable loaded afterwards resolves its undefined symbols against it.
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr)
      return invalid_argument("--shared-libs: cannot load '" + path + "': " + dlerror());
  }
  return Status::ok_status();
}

}  // namespace kiln::cli

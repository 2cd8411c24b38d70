// The kiln command line: run, compile, devices, version.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "cache_command.h"
#include "cli_support.h"
#include "flags_command.h"
#include "kiln/cache.h"
#include "kiln/client.h"
#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/distributed.h"
#include "kiln/env.h"
#include "kiln/file.h"
#include "kiln/host_callback.h"
#include "kiln/kv_store.h"
#include "kiln/npy.h"
#include "kiln/onnx.h"
#include "kiln/pgle.h"
#include "kiln/profile_guided.h"
#include "run_command.h"
#include "runner_compat.h"

namespace {

using Clock = std::chrono::steady_clock;
using kiln::cli::compile_options;
using kiln::cli::fail;
using kiln::cli::looks_like_executable;
using kiln::cli::RunArgs;
using kiln::cli::stored_profile_path;
using kiln::cli::stored_profiles_directory;
using kiln::cli::summarize;

// `kiln profile show [MODULE|FILE]`: a stored PGLE profile as a table; without an argument, the
// profiles the cache directory holds.
int profile_show_command(const std::string& what) {
  std::string dir = stored_profiles_directory();
  if (what.empty()) {
    auto names = kiln::Env::posix()->list_dir(dir);
    if (!names.ok() || names->empty()) {
      std::printf("no stored profiles in %s (kiln run FILE --pgle writes one)\n", dir.c_str());
      return 0;
    }
    for (const std::string& n : *names) std::printf("%s/%s\n", dir.c_str(), n.c_str());
    return 0;
  }
  auto bytes = kiln::read_file(what);
  if (!bytes.ok()) {
    auto stored = kiln::read_file(stored_profile_path(what));
    if (!stored.ok())
      return fail(kiln::not_found("no profile file '" + what +
                                  "' and no stored profile for module '" + what + "' in " + dir +
                                  "; run it with kiln run FILE --pgle"));
    bytes = std::move(stored);
  }
  auto profile = kiln::decode_fdo_profile(*bytes);
  if (!profile.ok())
    return fail(kiln::Status(profile.status().code(), what + ": " + profile.status().message()));
  std::printf("%s", kiln::format_fdo_profile(*profile).c_str());
  return 0;
}

std::string target_description(const kiln::CompileTarget& t) {
  if (t.is_host()) return "this machine";
  return (t.cpu.empty() ? std::string("generic CPU") : "CPU " + t.cpu) +
         (t.triple.empty() ? "" : " on " + t.triple) +
         (t.features.empty() ? ""
          : t.features.size() <= 60
              ? " with " + t.features
              : " with " +
                    std::to_string(std::count(t.features.begin(), t.features.end(), ',') + 1) +
                    " features");
}

struct CompileArgs {
  std::string file, output, effort = "UNKNOWN";
  std::vector<std::string> disabled;
  kiln::CompileTarget target;
  int devices = 0;  // 0: this machine's (KILN_CPU_DEVICE_COUNT), or 1 for another target
  bool fill_cache = false;
};

// `kiln compile`: for this machine through its client, or for another target through a
// compile-only client whose keys are those of a real client there.
// An ONNX model as MLIR for `kiln compile`: weights folded in, so the .kx runs alone; dynamic
// dimensions are 1. Inputs that shape the program have no values here: refused.
kiln::Result<kiln::ModuleSource> onnx_source(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(kiln::OnnxModel model, kiln::OnnxModel::from_file(path, true));
  for (const auto& input : model.inputs())
    if (input.is_static)
      return kiln::invalid_argument(
          path + ": input '" + input.name +
          "' shapes the program (its values are compiled in); kiln compile has no values for it: "
          "use kiln run with --input");
  KILN_ASSIGN_OR_RETURN(auto shapes, model.resolve_input_shapes({}));
  KILN_ASSIGN_OR_RETURN(std::string mlir, kiln::import_onnx_to_mlir(model, shapes));
  kiln::ModuleSource source;
  source.bytes = std::move(mlir);
  source.name = path;
  return source;
}

// `kiln inspect model.onnx`: what the model takes and gives, and whether kiln can import it.
int inspect_command(const std::string& path) {
  auto model = kiln::OnnxModel::from_file(path);
  if (!model.ok()) return fail(model.status());
  std::printf("model %s (ONNX IR version %lld)\nopsets:", path.c_str(),
              static_cast<long long>(model->ir_version()));
  for (const auto& [domain, version] : model->opsets())
    std::printf(" %s %lld", domain.empty() ? "ai.onnx" : domain.c_str(),
                static_cast<long long>(version));
  auto describe = [](const kiln::OnnxValueInfo& v) {
    std::string dims;
    for (size_t k = 0; k < v.dims.size(); ++k) {
      dims += k ? "x" : "";
      dims += v.dims[k] == kiln::kDynamicDim
                  ? (k < v.dim_params.size() && !v.dim_params[k].empty() ? v.dim_params[k] : "?")
                  : std::to_string(v.dims[k]);
    }
    return "  " + v.name + ": " + kiln::onnx_element_type_name(v.element_type) + "[" + dims + "]" +
           (v.is_static ? " (static: its values are compiled in)" : "");
  };
  std::printf("\ninputs:\n");
  for (const auto& v : model->inputs()) std::printf("%s\n", describe(v).c_str());
  std::printf("outputs:\n");
  for (const auto& v : model->outputs()) std::printf("%s\n", describe(v).c_str());
  int64_t weight_elements = 0;
  for (const auto& w : model->weights()) {
    int64_t n = 1;
    for (int64_t d : w.dims) n *= d;
    weight_elements += n;
  }
  std::printf("bound weights: %zu (%lld values, bound at load time)\noperators:",
              model->weights().size(), static_cast<long long>(weight_elements));
  for (const auto& [op, count] : model->op_counts()) std::printf(" %s %d", op.c_str(), count);
  std::printf("\n");
  auto unsupported = kiln::unsupported_onnx_nodes(*model);
  if (!unsupported.ok()) return fail(unsupported.status());
  if (unsupported->empty()) {
    std::printf("every operator is supported\n");
    return 0;
  }
  std::printf("%s\n", unsupported->c_str());
  return 1;
}

int compile_command(const CompileArgs& args) {
  if (args.output.empty() && !args.fill_cache)
    return fail(kiln::invalid_argument(
        "kiln compile needs somewhere to put the result: -o FILE.kx, --fill-cache, or both"));
  auto options = compile_options(args.effort, args.disabled);
  if (!options.ok()) return fail(options.status());
  auto source = kiln::is_onnx_file(args.file) ? onnx_source(args.file)
                                              : kiln::ModuleSource::from_file(args.file);
  if (!source.ok()) return fail(source.status());
  bool other_target = !args.target.is_host() || args.devices > 0;
  auto client = kiln::Client::create_cpu(args.devices);
  if (!client.ok()) return fail(client.status());
  if (other_target) {
    kiln::CompileTarget target = args.target;
    if (target.triple.empty()) {  // this machine's architecture, another CPU or device count
      auto host = (*client)->target();
      if (!host.ok()) return fail(host.status());
      target.triple = host->triple;
      if (args.target.is_host()) target = *host;
    }
    client = kiln::Client::create_compile_only(target, std::max(1, args.devices));
    if (!client.ok()) return fail(client.status());
  }
  // Serialised without loading: the target may be another machine.
  auto start = Clock::now();
  kiln::CompileReport report;
  kiln::Result<std::string> bytes = kiln::internal_error("not compiled");
  if (args.fill_cache && !other_target) {
    auto exe = kiln::compile_or_get_cached(**client, *source, *options, &report);
    bytes = exe.ok() ? kiln::Result<std::string>((*exe)->serialize())
                     : kiln::Result<std::string>(exe.status());
  } else if (args.fill_cache) {
    bytes = kiln::compile_or_get_cached_serialized(**client, *source, *options, &report);
  } else {
    bytes = (*client)->compile_serialized(*source, *options);
  }
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!bytes.ok()) return fail(bytes.status());
  std::string target_text =
      other_target ? target_description(*(*client)->target()) : "this machine";
  if (!args.output.empty()) {
    kiln::Status written = kiln::write_file(args.output, *bytes);
    if (!written.ok()) return fail(written);
    std::printf("wrote %s (%zu bytes) for %s, compiled in %.0f ms\n", args.output.c_str(),
                bytes->size(), target_text.c_str(), ms);
  }
  if (args.fill_cache) {
    std::printf(
        "cache: %s, key %s (%s, %zu devices)%s\n", kiln::to_string(report.cache), report.key.c_str(),
        target_text.c_str(), (*client)->devices().size(),
        report.skipped_write.empty() ? "" : ("; not stored: " + report.skipped_write).c_str());
  }
  return 0;
}

// Built-in host callbacks for programs run by `kiln run`.
void register_builtin_callbacks() {
  kiln::register_host_callback("kiln_print", [](const std::vector<kiln::Buffer>& args) {
    for (const kiln::Buffer& b : args) std::cout << "kiln_print: " << summarize(b) << "\n";
    return kiln::Status();
  });
  kiln::register_host_callback("kiln_record_sum", [](const std::vector<kiln::Buffer>& args) {
    double sum = 0;
    for (const kiln::Buffer& b : args)
      for (int64_t i = 0; i < b.element_count(); ++i) sum += b.element_as_double(i);
    std::cout << "kiln_record_sum: " << sum << "\n";
    return kiln::Status();
  });
}

CLI::App* add_compile_command(CLI::App& app, CompileArgs& compile_args) {
  CLI::App* compile_cmd =
      app.add_subcommand("compile",
                         "compile to a serialised executable (.kx) and/or into the cache, for this "
                         "machine or another target");
  compile_cmd->add_option("file", compile_args.file, "MLIR file or ONNX model")->required();
  compile_cmd->add_option("-o,--output", compile_args.output, "output .kx file");
  compile_cmd->add_flag("--fill-cache", compile_args.fill_cache,
                        "store the executable in the cache under the target's key");
  compile_cmd->add_option("-O,--effort", compile_args.effort, "effort level O0..O3");
  compile_cmd->add_option("--disable-pass", compile_args.disabled, "leave a pipeline pass out");
  compile_cmd->add_option("--devices", compile_args.devices,
                          "device count of the target machine (compile-only client)");
  kiln::CompileTarget& compile_target = compile_args.target;
  compile_cmd->add_option("--target-triple", compile_target.triple,
                          "generate code for this triple (e.g. aarch64-unknown-linux-gnu)");
  compile_cmd->add_option("--target-cpu", compile_target.cpu, "LLVM CPU name (e.g. x86-64-v2)");
  compile_cmd->add_option("--target-features", compile_target.features,
                          "LLVM features (e.g. +avx2,-avx512f)");
  return compile_cmd;
}

// --set and --cache-dir, applied after the environment is checked. The library fails open on a bad
// remote URL (a warning, then no cache); a command line with a typo in it is refused before any
// work.
kiln::Status apply_global_options(const std::vector<std::string>& flag_settings,
                                  const std::string& cache_dir) {
  if (kiln::Status env = kiln::config::check_environment(); !env.ok()) return env;
  for (const std::string& setting : flag_settings) {
    size_t eq = setting.find('=');
    kiln::Status s = eq == std::string::npos
                         ? kiln::invalid_argument("--set expects NAME=value, got '" + setting + "'")
                         : kiln::config::set(setting.substr(0, eq), setting.substr(eq + 1));
    if (!s.ok()) return s;
  }
  if (!cache_dir.empty()) (void)kiln::config::set("KILN_CACHE_DIR", cache_dir);
  if (std::string remote = *kiln::config::get_string("KILN_REMOTE_CACHE"); !remote.empty()) {
    if (auto address = kiln::parse_redis_url(remote); !address.ok())
      return kiln::invalid_argument("KILN_REMOTE_CACHE: " + address.status().message());
  }
  return kiln::Status();
}

int pipeline_command(const std::string& effort, const std::vector<std::string>& disabled) {
  auto level = kiln::parse_effort_level(effort);
  if (!level.ok()) return fail(level.status());
  // Each pass list is an mlir-opt --pass-pipeline; transform steps print by name between them.
  auto text = kiln::describe_pipeline(*level, disabled);
  if (!text.ok()) return fail(text.status());
  std::fputs(text->c_str(), stdout);
  return 0;
}

int devices_command() {
  auto client = kiln::Client::create_cpu();
  if (!client.ok()) return fail(client.status());
  for (const auto& d : (*client)->devices())
    std::printf("device %d: kind %s, process %d\n", d.id, d.kind.c_str(), d.process_index);
  return 0;
}

int version_command() {
  auto client = kiln::Client::create_cpu();
  if (!client.ok()) return fail(client.status());
  std::printf("kiln %s\nllvm %s\nplatform %s\nplatform version %s\n", kiln::kiln_version(),
              kiln::llvm_version(), (*client)->platform().c_str(),
              (*client)->platform_version().c_str());
  // What `kiln compile --target-triple T --target-cpu C --target-features F` needs to build
  // for this machine elsewhere.
  if (auto target = (*client)->target(); target.ok())
    std::printf("target triple %s\ntarget cpu %s\ntarget features %s\n", target->triple.c_str(),
                target->cpu.c_str(), target->features.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  register_builtin_callbacks();
  CLI::App app{"kiln: compile MLIR tensor programs once, run them from the cache"};
  app.require_subcommand(1);
  app.fallthrough();  // --set and --cache-dir work before or after the subcommand

  RunArgs run;
  CLI::App* run_cmd = add_run_command(app, run);

  CompileArgs compile_args;
  CLI::App* compile_cmd = add_compile_command(app, compile_args);

  std::string pipeline_effort = "UNKNOWN";
  std::vector<std::string> pipeline_disabled;
  CLI::App* pipeline_cmd =
      app.add_subcommand("pipeline", "print the MLIR pass pipeline for an effort level");
  pipeline_cmd->add_option("-O,--effort", pipeline_effort, "effort level O0..O3");
  pipeline_cmd->add_option("--disable-pass", pipeline_disabled, "leave a pipeline pass out");

  CLI::App* profile_cmd = app.add_subcommand("profile", "inspect PGLE profiles");
  profile_cmd->require_subcommand(1);
  std::string profile_what;
  CLI::App* profile_show_cmd =
      profile_cmd->add_subcommand("show", "print a stored PGLE profile (module name or file)");
  profile_show_cmd->add_option("what", profile_what, "module name or .kprof file");

  std::string inspect_file;
  CLI::App* inspect_cmd =
      app.add_subcommand("inspect", "describe an ONNX model: inputs, outputs, opsets, operators");
  inspect_cmd->add_option("file", inspect_file, "ONNX model")->required();

  CLI::App* devices_cmd = app.add_subcommand("devices", "list the CPU devices");
  CLI::App* version_cmd = app.add_subcommand("version", "print versions and the platform version");

  std::vector<std::string> flag_settings;
  std::string cache_dir;
  app.add_option("--set", flag_settings, "set a kiln flag: --set KILN_NAME=value (repeatable)");
  app.add_option("--cache-dir", cache_dir, "the persistent cache directory (KILN_CACHE_DIR)");
  kiln::cli::add_cache_command(app);
  kiln::cli::add_flags_command(app);

  std::vector<std::string> arguments = kiln::cli::with_runner_spelling(argc, argv);
  std::vector<const char*> argument_pointers;
  for (const std::string& a : arguments) argument_pointers.push_back(a.c_str());
  CLI11_PARSE(app, static_cast<int>(argument_pointers.size()), argument_pointers.data());
  if (kiln::Status s = apply_global_options(flag_settings, cache_dir); !s.ok()) return fail(s);
  if (kiln::cli::cache_command_parsed()) return kiln::cli::run_cache_command();
  if (kiln::cli::flags_command_parsed()) return kiln::cli::run_flags_command();

  if (run_cmd->parsed()) return run_command(run);
  if (profile_show_cmd->parsed()) return profile_show_command(profile_what);
  if (compile_cmd->parsed()) return compile_command(compile_args);
  if (inspect_cmd->parsed()) return inspect_command(inspect_file);
  if (pipeline_cmd->parsed()) return pipeline_command(pipeline_effort, pipeline_disabled);
  if (devices_cmd->parsed()) return devices_command();
  if (version_cmd->parsed()) return version_command();
  return 0;
}

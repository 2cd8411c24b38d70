#include "run_command.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "cli_support.h"
#include "kiln/cache.h"
#include "kiln/client.h"
#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/distributed.h"
#include "kiln/env.h"
#include "kiln/file.h"
#include "kiln/npy.h"
#include "kiln/onnx.h"
#include "kiln/pgle.h"
#include "kiln/profile_guided.h"
#include "runner_compat.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The client for this process: alone, or one process of a job coordinated through Redis.
kiln::Result<std::unique_ptr<kiln::Client>> make_client(const RunArgs& args) {
  if (!args.coordinator.empty()) {
    KILN_RETURN_IF_ERROR(kiln::distributed::initialize(
        args.coordinator, std::max(1, args.num_processes), std::max(0, args.process_id), args.job));
  } else {
    KILN_RETURN_IF_ERROR(kiln::distributed::initialize_from_environment());
  }
  auto job = kiln::distributed::context();
  if (!job) return kiln::Client::create_cpu();
  return kiln::Client::create_cpu_for_job(0, job->process_id, job->num_processes);
}

// Loads a .kx (setting `loaded_compiled`), or gets MLIR text/bytecode compiled through the cache.
kiln::Result<std::shared_ptr<kiln::Executable>> obtain_executable(
    const kiln::Client& client, const std::string& file, const kiln::CompileOptions& options,
    bool& loaded_compiled, kiln::CompileReport& report) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, kiln::read_file(file));
  loaded_compiled = looks_like_executable(bytes);
  if (loaded_compiled) return kiln::Executable::deserialize(bytes);
  kiln::ModuleSource source{std::move(bytes), file};
  return kiln::compile_or_get_cached(client, source, options, &report);
}

kiln::Result<const kiln::EntryPoint*> choose_entry(const kiln::Executable& exe,
                                                   const std::string& requested) {
  if (!requested.empty()) return exe.find_entry(requested);
  const auto& entries = exe.entry_points();
  if (entries.size() == 1) return &entries[0];
  for (const auto& e : entries)
    if (e.name == "main") return &e;
  std::string names;
  for (const auto& e : entries) names += (names.empty() ? "" : ", ") + e.name;
  return kiln::invalid_argument(
      entries.empty()
          ? "the module has no public function with tensor or memref arguments to run"
          : "the module has several entry functions (" + names + "); choose one with -e");
}

kiln::Result<kiln::Buffer> filled_buffer(const kiln::TensorType& type, const std::string& fill,
                                         std::mt19937& rng) {
  KILN_ASSIGN_OR_RETURN(kiln::Buffer b, kiln::Buffer::allocate(type.dtype, type.shape));
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (int64_t i = 0; i < b.element_count(); ++i) {
    double v = fill == "ones" ? 1.0 : fill == "zeros" ? 0.0 : uniform(rng);
    switch (type.dtype) {
      case kiln::DType::kF32:
        b.as<float>()[i] = static_cast<float>(v);
        break;
      case kiln::DType::kF64:
        b.as<double>()[i] = v;
        break;
      case kiln::DType::kI1:
        b.as<uint8_t>()[i] = fill == "random" ? (v > 0) : static_cast<uint8_t>(v);
        break;
      case kiln::DType::kI8:
        b.as<int8_t>()[i] = static_cast<int8_t>(fill == "random" ? v * 100 : v);
        break;
      case kiln::DType::kI16:
        b.as<int16_t>()[i] = static_cast<int16_t>(fill == "random" ? v * 1000 : v);
        break;
      case kiln::DType::kI32:
        b.as<int32_t>()[i] = static_cast<int32_t>(fill == "random" ? v * 1000 : v);
        break;
      case kiln::DType::kI64:
        b.as<int64_t>()[i] = static_cast<int64_t>(fill == "random" ? v * 1000 : v);
        break;
    }
  }
  return b;
}

// Every replica on its own inputs and device; results printed (and written) replica by replica.
int run_replicas(const kiln::Executable& exe, const kiln::EntryPoint& ep,
                 const std::vector<std::vector<kiln::Buffer>>& input_sets, const RunArgs& args) {
  auto start = Clock::now();
  auto results = exe.execute_replicated(ep.name, input_sets);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!results.ok()) return fail(results.status());
  size_t expected_outputs = results->size() * ep.outputs.size();
  if (!args.outputs.empty() && args.outputs.size() != expected_outputs) {
    return fail(kiln::invalid_argument(
        std::to_string(args.outputs.size()) + " --output file(s) given; " +
        std::to_string(results->size()) + " replicas of '" + ep.name + "' make " +
        std::to_string(expected_outputs) + " results (replica by replica)"));
  }
  for (size_t r = 0; r < results->size(); ++r) {
    const auto& replica = (*results)[r];
    for (size_t i = 0; i < replica.outputs.size(); ++i) {
      std::cout << "replica " << r << " (device " << replica.device << ") result " << i << ": "
                << summarize(replica.outputs[i]) << "\n";
      if (!args.outputs.empty()) {
        kiln::Status s =
            kiln::write_npy(args.outputs[r * ep.outputs.size() + i], replica.outputs[i]);
        if (!s.ok()) return fail(s);
      }
    }
  }
  std::printf("time: %zu replicas ran concurrently in %.3f ms\n", results->size(), ms);
  return 0;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  return kiln::percentile_of(std::move(v), 50);
}

// Into the cache directory as every cache file goes: a private temp file renamed into place.
kiln::Status store_profile(const std::string& path, const std::string& bytes) {
  kiln::Env* env = kiln::Env::posix();
  KILN_RETURN_IF_ERROR(env->create_dirs(stored_profiles_directory()));
  std::random_device random;
  std::string tmp = path + ".tmp-" + std::to_string(random()) + std::to_string(random());
  kiln::Status s = env->write_file(tmp, bytes, /*sync=*/true);
  if (s.ok()) s = env->rename_file(tmp, path);
  if (!s.ok()) (void)env->remove_file(tmp);
  return s;
}

void apply_pgle_flags(const RunArgs& args) {
  (void)kiln::config::set("KILN_ENABLE_PGLE", "true");
  if (args.pgle_runs >= 0)
    (void)kiln::config::set("KILN_PGLE_PROFILING_RUNS", std::to_string(args.pgle_runs));
  if (args.pgle_percentile >= 0)
    (void)kiln::config::set("KILN_PGLE_AGGREGATION_PERCENTILE",
                            std::to_string(args.pgle_percentile));
}

// What the runs of `kiln run --pgle` measured: wall times by kind, the optimised build's kernel
// costs, the last run's results.
struct PgleRuns {
  std::vector<double> profiling_ms, optimised_ms;
  std::shared_ptr<kiln::PgleProfiler> final_costs;
  std::vector<kiln::Buffer> results;
};

// Profiling runs, the one recompile, optimised runs, each printed as it goes. The entry is named
// by value: the recompile replaces (and may free) the executable it came from.
kiln::Result<PgleRuns> pgle_runs(kiln::ProfileGuidedProgram& program, const std::string& entry,
                                 const std::vector<kiln::Buffer>& inputs, int repeat) {
  PgleRuns runs;
  double percentile = kiln::config::get_double("KILN_PGLE_AGGREGATION_PERCENTILE");
  for (int r = 0; r < std::max(1, repeat); ++r) {
    bool profiling = program.profiling();
    bool warmup = profiling && program.profiler()->warming_up();
    int recompiles = program.recompiles();
    // The last run's results go first: held across the next run they would make it allocate
    // (and fault in) fresh memory, which the profile would charge to whichever candidate ran.
    runs.results.clear();
    auto start = Clock::now();
    KILN_ASSIGN_OR_RETURN(runs.results, program.execute(entry, inputs));
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (program.recompiles() != recompiles) ms -= program.recompile_ms();  // reported below
    if (!warmup) (profiling ? runs.profiling_ms : runs.optimised_ms).push_back(ms);
    std::printf("run %2d: %9.3f ms  %s\n", r + 1, ms,
                warmup      ? "warm-up (not measured)"
                : profiling ? "profiling (contractions rotate their candidates)"
                            : "optimised");
    if (program.recompiles() == recompiles) continue;
    const kiln::CompileReport& re = program.last_report();
    std::printf(
        "pgle: recompiled with the profile of %d runs: cache %s, key %s, %.0f ms (compile "
        "%.0f ms)\n"
        "pgle: profile measured here %s, compiled with %s\n",
        program.profiler()->runs_recorded(), kiln::to_string(re.cache), re.key.c_str(),
        program.recompile_ms(), re.compile_ms,
        kiln::fdo_profile_digest(program.fdo_profile()).substr(0, 16).c_str(),
        re.profile_digest.substr(0, 16).c_str());
    if (!program.executable()->info().kernels.empty()) {
      runs.final_costs = std::make_shared<kiln::PgleProfiler>(1 << 30, percentile);
      program.observe_runs(runs.final_costs);
    }
  }
  return runs;
}

// Into --profile-out, else (in the cache's writer process, with the cache on) the cache
// directory's profiles, a side cache.
kiln::Status write_pgle_profile(const kiln::ProfileGuidedProgram& program, const RunArgs& args,
                                int process_index) {
  std::string path = args.profile_out;
  bool into_cache = path.empty() && kiln::config::get_bool("KILN_ENABLE_COMPILATION_CACHE") &&
                    process_index == kiln::config::get_int("KILN_CACHE_WRITER");
  if (into_cache) path = stored_profile_path(program.executable()->info().module_name);
  if (path.empty()) return kiln::Status();
  KILN_RETURN_IF_ERROR(into_cache ? store_profile(path, program.fdo_profile())
                                  : kiln::write_file(path, program.fdo_profile()));
  std::printf("pgle: profile written to %s (kiln profile show prints it)\n", path.c_str());
  return kiln::Status();
}

// The hottest kernels: what the plain build's choice (candidate 0) cost in the first pass, what
// PGLE chose, and what the optimised build measured; then the totals.
void print_hottest_kernels(const kiln::FdoProfile& profile, const PgleRuns& runs) {
  kiln::FdoProfile final_profile;
  if (runs.final_costs) final_profile = runs.final_costs->aggregate();
  std::vector<const kiln::KernelProfile*> order;
  for (const auto& k : profile.kernels) order.push_back(&k);
  auto plain_cost = [](const kiln::KernelProfile* k) {
    return k->candidate_ns.empty() || k->candidate_ns[0] < 0 ? k->best_ns() : k->candidate_ns[0];
  };
  std::sort(order.begin(), order.end(),
            [&](auto* a, auto* b) { return plain_cost(a) > plain_cost(b); });
  std::printf("%-48s %12s %10s %12s\n", "hottest kernels", "first pass", "chosen", "final");
  int64_t plain_total = 0, final_total = 0;
  for (const auto* k : order) {
    plain_total += plain_cost(k);
    const kiln::KernelProfile* measured = final_profile.find(k->fingerprint);
    if (measured) final_total += measured->best_ns();
  }
  for (size_t i = 0; i < order.size() && i < 10; ++i) {
    const auto* k = order[i];
    const kiln::KernelProfile* measured = final_profile.find(k->fingerprint);
    int best = k->best_candidate();
    std::string chosen =
        k->candidate_names.size() > 1 && best >= 0 ? k->candidate_names[best] : "-";
    std::string name = k->name.size() > 48 ? k->name.substr(0, 45) + "..." : k->name;
    std::printf("%-48s %12s %10s %12s\n", name.c_str(),
                kiln::format_duration_ns(plain_cost(k)).c_str(), chosen.c_str(),
                measured ? kiln::format_duration_ns(measured->best_ns()).c_str() : "-");
  }
  if (final_total > 0)
    std::printf("kernels: %s in the first pass (plain choices), %s optimised: %.2fx\n",
                kiln::format_duration_ns(plain_total).c_str(),
                kiln::format_duration_ns(final_total).c_str(),
                double(plain_total) / double(final_total));
  if (!runs.profiling_ms.empty() && !runs.optimised_ms.empty())
    std::printf("runs: median %.3f ms profiling, %.3f ms optimised: %.2fx\n",
                median_of(runs.profiling_ms), median_of(runs.optimised_ms),
                median_of(runs.profiling_ms) / median_of(runs.optimised_ms));
}

// `kiln run --pgle`: the runs, the results, the profile written, the hottest kernels.
int run_pgle(kiln::ProfileGuidedProgram& program, const std::string& entry,
             const std::vector<kiln::Buffer>& inputs, const RunArgs& args, int process_index) {
  const kiln::CompileReport& first = program.first_report();
  std::printf("pgle: %s (%s, key %s)\n",
              first.pgle == kiln::PgleStage::kOptimisedCached
                  ? "the PGLE-optimised executable came from the cache; nothing to profile"
              : first.pgle == kiln::PgleStage::kFirstPass ? "built the instrumented first pass"
                                                          : "PGLE is not in effect",
              kiln::to_string(first.cache), first.key.c_str());
  auto runs = pgle_runs(program, entry, inputs, args.repeat);
  if (!runs.ok()) return fail(runs.status());
  if (program.recompiles() == 0 && first.pgle == kiln::PgleStage::kFirstPass) {
    std::printf("pgle: no recompile yet: %d of %d profiling runs done (raise --repeat)\n",
                program.profiler()->runs_recorded(), program.profiler()->runs_wanted());
  }
  for (size_t i = 0; i < runs->results.size(); ++i) {
    std::cout << "result " << i << ": " << summarize(runs->results[i]) << "\n";
    if (i < args.outputs.size()) {
      kiln::Status s = kiln::write_npy(args.outputs[i], runs->results[i]);
      if (!s.ok()) return fail(s);
    }
  }
  if (program.fdo_profile().empty()) return 0;
  auto profile = kiln::decode_fdo_profile(program.fdo_profile());
  if (!profile.ok()) return fail(profile.status());
  if (kiln::Status s = write_pgle_profile(program, args, process_index); !s.ok()) return fail(s);
  print_hottest_kernels(*profile, *runs);
  return 0;
}

void print_cache_line(const kiln::CompileReport& report, bool loaded_compiled) {
  if (loaded_compiled) {
    std::printf("cache: off (ran a compiled executable file)\n");
  } else if (report.cache == kiln::CacheOutcome::kHit) {
    std::printf("cache: hit%s, key %s (%.2f ms key, %.2f ms retrieval)\n",
                report.from_memory ? " (memory)" : "", report.key.c_str(), report.key_ms,
                report.retrieval_ms);
  } else if (report.shared == kiln::SharedRole::kFollower) {
    std::printf("cache: miss, key %s; loaded the executable the job's leader compiled\n",
                report.key.c_str());
  } else {
    std::printf(
        "cache: %s%s%s\n", kiln::to_string(report.cache),
        report.key.empty() ? "" : (", key " + report.key).c_str(),
        report.skipped_write.empty() ? "" : ("; not stored: " + report.skipped_write).c_str());
  }
}

kiln::Result<kiln::Buffer> read_tensor_file(const std::string& path) {
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".pb") == 0)
    return kiln::read_onnx_tensor_file(path);
  return kiln::read_npy(path);
}

// The model's run-time inputs: files by position or NAME=FILE (.npy or TensorProto .pb), the rest
// filled as --fill says; dynamic dimensions from the files (1 where no file gives them).
struct OnnxInputs {
  std::vector<kiln::Buffer> values;
  std::vector<std::vector<int64_t>> shapes;
};

kiln::Result<OnnxInputs> onnx_inputs(const RunArgs& args, const kiln::OnnxModel& model) {
  const auto& graph_inputs = model.inputs();
  OnnxInputs inputs;
  inputs.values.resize(graph_inputs.size());
  std::vector<bool> given(graph_inputs.size(), false);
  size_t next = 0;
  for (const std::string& spec : args.inputs) {
    size_t eq = spec.find('=');
    size_t index = next;
    std::string path = spec;
    if (eq != std::string::npos) {
      std::string name = spec.substr(0, eq);
      path = spec.substr(eq + 1);
      index = graph_inputs.size();
      for (size_t k = 0; k < graph_inputs.size(); ++k)
        if (graph_inputs[k].name == name) index = k;
      if (index == graph_inputs.size()) {
        std::string names;
        for (const auto& in : graph_inputs) names += (names.empty() ? "" : ", ") + in.name;
        return kiln::invalid_argument("--input " + spec + ": the model has no input '" + name +
                                      "' (its inputs: " + names + ")");
      }
    } else {
      ++next;
    }
    if (index >= graph_inputs.size())
      return kiln::invalid_argument(std::to_string(args.inputs.size()) +
                                    " --input files given; the model takes " +
                                    std::to_string(graph_inputs.size()) + " input(s)");
    KILN_ASSIGN_OR_RETURN(kiln::Buffer b, read_tensor_file(path));
    KILN_ASSIGN_OR_RETURN(kiln::DType want, kiln::dtype_of_onnx(graph_inputs[index].element_type));
    if (b.dtype() != want)
      return kiln::invalid_argument(path + ": input '" + graph_inputs[index].name + "' is " +
                                    kiln::onnx_element_type_name(graph_inputs[index].element_type) +
                                    " (" + kiln::dtype_name(want) + "), the file holds " +
                                    kiln::dtype_name(b.dtype()));
    inputs.values[index] = b;
    given[index] = true;
  }
  std::vector<std::vector<int64_t>> shapes;
  if (std::find(given.begin(), given.end(), true) != given.end()) {
    for (size_t k = 0; k < inputs.values.size(); ++k) {
      std::vector<int64_t> dims = given[k] ? inputs.values[k].shape() : graph_inputs[k].dims;
      for (int64_t& d : dims)
        if (d == kiln::kDynamicDim) d = 1;
      shapes.push_back(dims);
    }
  }
  KILN_ASSIGN_OR_RETURN(inputs.shapes, model.resolve_input_shapes(shapes));
  std::mt19937 rng(42);
  for (size_t k = 0; k < inputs.values.size(); ++k) {
    if (given[k]) continue;
    KILN_ASSIGN_OR_RETURN(kiln::DType dtype, kiln::dtype_of_onnx(graph_inputs[k].element_type));
    KILN_ASSIGN_OR_RETURN(inputs.values[k],
                          filled_buffer(kiln::TensorType{dtype, inputs.shapes[k]}, args.fill, rng));
  }
  return inputs;
}

// `kiln run model.onnx --pgle`: the plain program binds (and prepares) the weights; the PGLE flow
// builds the same source instrumented, then optimised, and runs both on those arguments.
int run_onnx_pgle(const RunArgs& args, const kiln::Client& client,
                  const kiln::CompileOptions& options, const kiln::OnnxModel& model,
                  const OnnxInputs& inputs, const kiln::OnnxProgram& plain) {
  auto arguments = plain.arguments(inputs.values);
  if (!arguments.ok()) return fail(arguments.status());
  apply_pgle_flags(args);
  auto source = kiln::onnx_module_source(model, inputs.shapes, &inputs.values);
  if (!source.ok()) return fail(source.status());
  auto created = kiln::ProfileGuidedProgram::create(client, std::move(*source), options);
  if (!created.ok()) return fail(created.status());
  return run_pgle(**created, plain.entry(), *arguments, args, client.process_index());
}

// `kiln run model.onnx`: weights bound from the model, inputs as onnx_inputs reads them.
// --json's "outputs": each result's name (where it has one), type, shape and first values.
nlohmann::json outputs_json(const std::vector<kiln::Buffer>& results,
                            const std::vector<std::string>& names) {
  nlohmann::json outputs = nlohmann::json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    std::vector<double> head;
    for (int64_t j = 0; j < std::min<int64_t>(results[i].element_count(), 6); ++j)
      head.push_back(results[i].element_as_double(j));
    nlohmann::json output = {{"dtype", kiln::dtype_name(results[i].dtype())},
                             {"shape", results[i].shape()},
                             {"head", head}};
    if (!names.empty()) output["name"] = i < names.size() ? names[i] : "";
    outputs.push_back(output);
  }
  return outputs;
}

// A program's runs: each run's time, and the last run's results.
struct TimedRuns {
  std::vector<kiln::Buffer> results;
  std::vector<double> run_ms;
  double first_ms() const { return run_ms.front(); }
  double min_ms() const { return *std::min_element(run_ms.begin(), run_ms.end()); }
};

// The time line's tail after repeated runs: their median and the fastest.
void print_repeat_clause(const TimedRuns& runs, int repeat) {
  if (repeat <= 1) return;
  std::printf(" (%d runs: median %.3f ms, min %.3f ms)", repeat, median_of(runs.run_ms),
              runs.min_ms());
}

kiln::Result<TimedRuns> run_timed(
    int repeat, const std::function<kiln::Result<std::vector<kiln::Buffer>>()>& run) {
  TimedRuns runs;
  for (int r = 0; r < std::max(1, repeat); ++r) {
    runs.results.clear();  // so a repeat reuses their memory instead of faulting in more
    auto start = Clock::now();
    auto out = run();
    runs.run_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!out.ok()) return out.status();
    runs.results = std::move(*out);
  }
  return runs;
}

// "time: ..." up to the first run's time: the compile's stages when this process compiled.
void print_time_line(bool compiled_now, const kiln::Executable& exe, double first_run_ms) {
  const auto& t = exe.info().timings;
  if (compiled_now)
    std::printf("time: parse %.2f ms, passes %.2f ms, llvm %.2f ms, codegen %.2f ms, ", t.parse_ms,
                t.passes_ms, t.llvm_ms, t.codegen_ms);
  else
    std::printf("time: no compile, ");
  std::printf("load %.2f ms, run %.3f ms", exe.load_ms(), first_run_ms);
}

nlohmann::json onnx_run_json(const kiln::CompileReport& report, const kiln::Executable& exe,
                             const TimedRuns& runs, const std::vector<std::string>& names) {
  nlohmann::json out;
  out["cache"] = kiln::to_string(report.cache);
  out["key"] = report.key;
  out["module"] = exe.info().module_name;
  out["compiled"] = report.compiled;
  out["timings_ms"] = {{"key", report.key_ms},         {"retrieval", report.retrieval_ms},
                       {"compile", report.compile_ms}, {"load", exe.load_ms()},
                       {"run", runs.first_ms()},       {"run_median", median_of(runs.run_ms)},
                       {"run_min", runs.min_ms()}};
  out["peak_memory_mib"] = peak_memory_mib();
  out["outputs"] = outputs_json(runs.results, names);
  return out;
}

// Result `i` to `path`: a TensorProto for .pb, else .npy.
kiln::Status write_onnx_output(const std::string& path, const kiln::Buffer& result,
                               const std::string& name) {
  bool pb = path.size() > 3 && path.compare(path.size() - 3, 3, ".pb") == 0;
  return pb ? kiln::write_file(path, kiln::encode_onnx_tensor(result, name))
            : kiln::write_npy(path, result);
}

void print_onnx_summary(const kiln::CompileReport& report, const kiln::Executable& exe,
                        const TimedRuns& runs, int repeat) {
  print_cache_line(report, false);
  print_time_line(report.compiled, exe, runs.first_ms());
  print_repeat_clause(runs, repeat);
  std::printf("\nmemory: peak %.1f MiB resident (this process)\n", peak_memory_mib());
}

int run_onnx(const RunArgs& args, const kiln::Client& client, const kiln::CompileOptions& options) {
  auto loaded = kiln::OnnxModel::from_file(args.file, args.fold_weights);
  if (!loaded.ok()) return fail(loaded.status());
  std::optional<kiln::OnnxModel> model(std::move(*loaded));
  auto read = onnx_inputs(args, *model);
  if (!read.ok()) return fail(read.status());
  kiln::CompileReport report;
  auto program = kiln::compile_onnx_or_get_cached(client, *model, read->shapes, options, &report,
                                                  &read->values);
  if (!program.ok()) return fail(program.status());
  if (args.pgle) return run_onnx_pgle(args, client, options, *model, *read, *program);
  // The program holds what it needs; the model's bytes (the size of its weights) go now.
  std::vector<std::string> names;
  for (const auto& output : model->outputs()) names.push_back(output.name);
  model.reset();
  auto runs = run_timed(args.repeat, [&] { return program->run(read->values); });
  if (!runs.ok()) return fail(runs.status());
  const kiln::Executable& exe = *program->executable();
  if (args.json) std::printf("%s\n", onnx_run_json(report, exe, *runs, names).dump().c_str());
  for (size_t i = 0; i < runs->results.size(); ++i) {
    std::string name = i < names.size() ? names[i] : "";
    if (!args.json)
      std::cout << "result " << i << " (" << name << "): " << summarize(runs->results[i]) << "\n";
    if (i < args.outputs.size()) {
      kiln::Status s = write_onnx_output(args.outputs[i], runs->results[i], name);
      if (!s.ok()) return fail(s);
    }
  }
  if (!args.json) print_onnx_summary(report, exe, *runs, args.repeat);
  return 0;
}

// A program that stops itself (a failed run-time check prints its message with puts, then
// aborts) must not lose what it printed: stdout is flushed before the abort goes on.
void flush_output_then_abort(int signal_number) {
  std::fflush(stdout);
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunArgs& run) {
  CLI::App* run_cmd =
      app.add_subcommand("run", "compile (or load a .kx) and run an entry function");
  run_cmd
      ->add_option("file", run.file, "MLIR file (text or bytecode), ONNX model or .kx executable")
      ->required();
  run_cmd->add_option("-e,--entry", run.entry, "function to run (default: the only one, or main)");
  run_cmd->add_option("--input", run.inputs, ".npy file per argument, in order");
  run_cmd->add_option("--output", run.outputs,
                      ".npy (or, for ONNX, .pb) file per result, in order");
  run_cmd->add_option("--fill", run.fill, "arguments without --input: random|zeros|ones")
      ->check(CLI::IsMember({"random", "zeros", "ones"}));
  run_cmd->add_option("-O,--effort", run.effort, "effort level O0..O3 (or -O0..-O3)");
  run_cmd->add_option("--entry-point-result", run.entry_point_result,
                      "mlir-runner mode: 'void' prints only what the program prints; i32, i64 "
                      "or f32 also prints the value the entry (without arguments) returns");
  // As mlir-runner's: repeated, or several separated by commas.
  run_cmd
      ->add_option("--shared-libs", run.shared_libs,
                   "libraries whose functions the program calls, comma-separated or the option "
                   "repeated (MLIR's runner utility libraries are built into kiln)")
      ->delimiter(',')
      ->allow_extra_args(false);
  run_cmd->add_option("--disable-pass", run.disabled_passes, "leave a pipeline pass out");
  run_cmd->add_flag("--verify-runtime", run.verify_runtime,
                    "insert run-time checks that stop an out-of-bounds program with "
                    "mlir-runner's message (KILN_VERIFY_RUNTIME)");
  run_cmd->add_flag("--verify-runtime-continue", run.verify_runtime_continue,
                    "the same checks, but a failed one prints its message and the program goes "
                    "on, so one run shows every failure (KILN_VERIFY_RUNTIME_CONTINUE)");
  // mlir-runner passes these to LLVM's matrix lowering; kiln lowers matrix intrinsics always.
  run_cmd->add_flag("--enable-matrix", run.enable_matrix,
                    "accepted for mlir-runner's spelling (kiln always lowers matrix intrinsics)");
  run_cmd->add_flag("--matrix-allow-contract", run.matrix_allow_contract,
                    "matrix intrinsics may fuse multiplies and adds (KILN_MATRIX_ALLOW_CONTRACT)");
  run_cmd->add_option("--matrix-default-layout", run.matrix_default_layout,
                      "column-major or row-major: the layout matrix intrinsics assume "
                      "(KILN_MATRIX_DEFAULT_LAYOUT)");
  run_cmd->add_option("--repeat", run.repeat, "run the entry this many times");
  run_cmd->add_flag("--pgle", run.pgle,
                    "profile-guided: profile the first runs, recompile once with the profile");
  run_cmd->add_option("--pgle-runs", run.pgle_runs, "profiling runs (KILN_PGLE_PROFILING_RUNS)");
  run_cmd->add_flag("--expect-pgle", run.expect_pgle,
                    "expect a PGLE-optimised cache entry; warn on a miss or a write "
                    "(KILN_COMPILATION_CACHE_EXPECT_PGLE)");
  run_cmd->add_option("--pgle-percentile", run.pgle_percentile,
                      "aggregation percentile (KILN_PGLE_AGGREGATION_PERCENTILE)");
  run_cmd->add_option("--profile-out", run.profile_out, "write the PGLE profile to this file");
  run_cmd->add_flag("--json", run.json, "print one JSON object instead of the summary");
  run_cmd->add_flag("--no-cache", run.no_cache, "compile without the persistent cache");
  run_cmd->add_option("--coordinator", run.coordinator,
                      "redis://host:port of the job's coordinator (or $KILN_COORDINATOR)");
  run_cmd->add_option("--num-processes", run.num_processes, "processes in the job");
  run_cmd->add_option("--process-id", run.process_id, "this process's id in the job");
  run_cmd->add_option("--job", run.job, "job id: namespaces the job's keys");
  run_cmd->add_flag("--fold-weights", run.fold_weights,
                    "ONNX: compile the weights into the code (the key then covers their values)");
  run_cmd->add_option("--replicas", run.replicas,
                      "run R replicas, one per device (KILN_CPU_DEVICE_COUNT >= R)");
  return run_cmd;
}

// The flags `kiln run`'s options set for this process.
kiln::Status apply_run_flags(const RunArgs& args) {
  if (args.no_cache) (void)kiln::config::set("KILN_ENABLE_COMPILATION_CACHE", "false");
  if (args.expect_pgle) (void)kiln::config::set("KILN_COMPILATION_CACHE_EXPECT_PGLE", "true");
  if (args.verify_runtime || args.verify_runtime_continue)
    (void)kiln::config::set("KILN_VERIFY_RUNTIME", "true");
  if (args.verify_runtime_continue) (void)kiln::config::set("KILN_VERIFY_RUNTIME_CONTINUE", "true");
  if (args.matrix_allow_contract) (void)kiln::config::set("KILN_MATRIX_ALLOW_CONTRACT", "true");
  if (!args.matrix_default_layout.empty())
    return kiln::config::set("KILN_MATRIX_DEFAULT_LAYOUT", args.matrix_default_layout);
  return kiln::Status();
}

// An MLIR program's executable: from the cache, a compile or a compiled file, or (--pgle) the
// first build of a profile-guided program.
struct ObtainedProgram {
  std::shared_ptr<kiln::Executable> executable;
  kiln::CompileReport report;
  std::unique_ptr<kiln::ProfileGuidedProgram> pgle;
  bool loaded_compiled = false;  // a compiled executable file, run as it is
};

kiln::Result<ObtainedProgram> obtain_program(const RunArgs& args, const kiln::Client& client,
                                             const kiln::CompileOptions& options) {
  ObtainedProgram out;
  if (!args.pgle) {
    KILN_ASSIGN_OR_RETURN(out.executable, obtain_executable(client, args.file, options,
                                                            out.loaded_compiled, out.report));
    return out;
  }
  apply_pgle_flags(args);
  KILN_ASSIGN_OR_RETURN(kiln::ModuleSource source, kiln::ModuleSource::from_file(args.file));
  if (looks_like_executable(source.bytes))
    return kiln::invalid_argument(
        "--pgle recompiles the program, so it needs the MLIR file, not a compiled executable: " +
        args.file);
  KILN_ASSIGN_OR_RETURN(out.pgle,
                        kiln::ProfileGuidedProgram::create(client, std::move(source), options));
  out.executable = out.pgle->executable();
  out.report = out.pgle->first_report();
  return out;
}

// Argument `i` of `ep`: its --input file, or filled as --fill asks when its shape is static.
kiln::Result<kiln::Buffer> run_argument(const RunArgs& args, const kiln::EntryPoint& ep, size_t i,
                                        size_t file, std::mt19937& rng) {
  if (file < args.inputs.size()) return kiln::read_npy(args.inputs[file]);
  if (!ep.inputs[i].is_static())
    return kiln::invalid_argument("argument " + std::to_string(i) + " of '" + ep.name +
                                  "' has a dynamic shape " + ep.inputs[i].to_string() +
                                  "; pass it with --input FILE.npy");
  auto b = filled_buffer(ep.inputs[i], args.fill, rng);
  if (!b.ok())
    return kiln::Status(b.status().code(), "argument " + std::to_string(i) + " of '" + ep.name +
                                               "': " + b.status().message());
  return b;
}

// The arguments of each replica: one file per argument (shared by every replica), or one per
// argument per replica.
kiln::Result<std::vector<std::vector<kiln::Buffer>>> run_arguments(const RunArgs& args,
                                                                   const kiln::EntryPoint& ep,
                                                                   int replicas) {
  size_t per_set = ep.inputs.size();
  bool per_replica_files = replicas > 1 && per_set > 0 && args.inputs.size() == per_set * replicas;
  if (args.inputs.size() > per_set && !per_replica_files) {
    return kiln::invalid_argument(
        std::to_string(args.inputs.size()) + " --input file(s) given but '" + ep.name + "' takes " +
        std::to_string(per_set) + " argument(s)" +
        (replicas > 1 ? " (or " + std::to_string(per_set * replicas) + " for " +
                            std::to_string(replicas) + " replicas, replica by replica)"
                      : ""));
  }
  std::vector<std::vector<kiln::Buffer>> sets;
  std::mt19937 rng(42);
  for (int r = 0; r < replicas; ++r) {
    std::vector<kiln::Buffer> inputs;
    for (size_t i = 0; i < per_set; ++i) {
      size_t file = per_replica_files ? r * per_set + i : i;
      KILN_ASSIGN_OR_RETURN(kiln::Buffer b, run_argument(args, ep, i, file, rng));
      inputs.push_back(std::move(b));
    }
    sets.push_back(std::move(inputs));
  }
  return sets;
}

// `kiln run --json`'s object for a run of an MLIR program.
nlohmann::json run_json(const ObtainedProgram& program, const kiln::EntryPoint& ep,
                        const TimedRuns& runs, int process_index) {
  const kiln::Executable& exe = *program.executable;
  const kiln::CompileReport& report = program.report;
  const auto& t = exe.info().timings;
  bool compiled_now = !program.loaded_compiled && report.compiled;
  nlohmann::json out;
  out["cache"] = program.loaded_compiled ? "off" : kiln::to_string(report.cache);
  out["key"] = report.key;
  out["module"] = exe.info().module_name;
  out["entry"] = ep.name;
  out["effort_level"] = exe.info().effort_level;
  out["compiled"] = compiled_now;
  out["shared"] = kiln::to_string(report.shared);
  out["process"] = process_index;
  out["timings_ms"] = {{"key", report.key_ms},
                       {"retrieval", report.retrieval_ms},
                       {"compile", report.compile_ms},
                       {"parse", compiled_now ? t.parse_ms : 0},
                       {"passes", compiled_now ? t.passes_ms : 0},
                       {"llvm", compiled_now ? t.llvm_ms : 0},
                       {"codegen", compiled_now ? t.codegen_ms : 0},
                       {"load", exe.load_ms()},
                       {"run", runs.first_ms()},
                       {"run_median", median_of(runs.run_ms)},
                       {"run_min", runs.min_ms()}};
  out["peak_memory_mib"] = peak_memory_mib();
  out["outputs"] = outputs_json(runs.results, {});
  return out;
}

// The summary after the results: where the executable came from, the times, the memory.
void print_run_summary(const ObtainedProgram& program, const TimedRuns& runs, int repeat) {
  print_cache_line(program.report, program.loaded_compiled);
  print_time_line(!program.loaded_compiled && program.report.compiled, *program.executable,
                  runs.first_ms());
  print_repeat_clause(runs, repeat);
  std::printf("\nmemory: peak %.1f MiB resident (this process)\n", peak_memory_mib());
}

// An MLIR program: the runs, then the results (printed, written to --output), then the summary
// (or the --json object; in mlir-runner mode only what the program prints, and its result).
int run_mlir(const RunArgs& args, const kiln::Client& client, const kiln::CompileOptions& options,
             const kiln::cli::EntryPointResult& result_kind) {
  auto program = obtain_program(args, client, options);
  if (!program.ok()) return fail(program.status());
  auto entry = choose_entry(*program->executable, args.entry);
  if (!entry.ok()) return fail(entry.status());
  const kiln::EntryPoint& ep = **entry;
  if (kiln::Status s = kiln::cli::check_entry_for_result(ep, result_kind); !s.ok()) return fail(s);
  int replicas = program->executable->info().num_replicas;
  auto input_sets = run_arguments(args, ep, replicas);
  if (!input_sets.ok()) return fail(input_sets.status());
  if (replicas > 1) return run_replicas(*program->executable, ep, *input_sets, args);
  if (program->pgle)
    return run_pgle(*program->pgle, ep.name, (*input_sets)[0], args, client.process_index());
  auto runs = run_timed(args.repeat,
                        [&] { return program->executable->execute(ep.name, (*input_sets)[0]); });
  if (!runs.ok()) return fail(runs.status());
  std::fflush(stdout);
  bool runner_mode = result_kind.runner_mode();
  if (args.json) {
    nlohmann::json out = run_json(*program, ep, *runs, client.process_index());
    std::fprintf(runner_mode ? stderr : stdout, "%s\n", out.dump().c_str());
  }
  if (runner_mode) {
    if (result_kind.scalar()) std::printf("%s\n", kiln::cli::runner_text(runs->results[0]).c_str());
    return 0;
  }
  for (size_t i = 0; i < runs->results.size(); ++i) {
    if (!args.json) std::cout << "result " << i << ": " << summarize(runs->results[i]) << "\n";
    if (i < args.outputs.size()) {
      kiln::Status s = kiln::write_npy(args.outputs[i], runs->results[i]);
      if (!s.ok()) return fail(s);
    }
  }
  if (!args.json) print_run_summary(*program, *runs, args.repeat);
  return 0;
}

int run_command(const RunArgs& args) {
  std::signal(SIGABRT, flush_output_then_abort);
  auto client = make_client(args);
  if (!client.ok()) return fail(client.status());
  auto options = compile_options(args.effort, args.disabled_passes);
  if (!options.ok()) return fail(options.status());
  auto result_kind = kiln::cli::parse_entry_point_result(args.entry_point_result);
  if (!result_kind.ok()) return fail(result_kind.status());
  if (kiln::Status s = kiln::cli::load_shared_libraries(args.shared_libs); !s.ok()) return fail(s);
  options->num_replicas = std::max(1, args.replicas);
  if (kiln::Status s = apply_run_flags(args); !s.ok()) return fail(s);
  if (kiln::is_onnx_file(args.file)) {
    if (options->num_replicas > 1 || !args.entry.empty())
      return fail(kiln::invalid_argument(
          "--replicas and -e are not supported for ONNX models yet: " + args.file));
    return run_onnx(args, **client, *options);
  }
  return run_mlir(args, **client, *options, *result_kind);
}

}  // namespace kiln::cli

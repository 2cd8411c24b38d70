// PGLE against the plain build, in one process: compile times, then run times measured by
// interleaving the two executables (so machine noise hits both alike), and the results compared.
//
//   kiln_pgle_bench MODEL.mlir [--level O2] [--runs 40]
//
// The plain build at --level is the anchor: "speed-up" is its median run time over PGLE's, and
// "compile ratio" is PGLE's recompile time over its compile time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "kiln/client.h"
#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/pgle.h"
#include "kiln/profile_guided.h"

namespace {

using Clock = std::chrono::steady_clock;

int fail(const kiln::Status& s) {
  std::fprintf(stderr, "kiln_pgle_bench: %s\n", s.to_string().c_str());
  return 1;
}

double median(std::vector<double> v) { return kiln::percentile_of(std::move(v), 50); }

double time_run(const kiln::Executable& exe, const std::string& entry,
                const std::vector<kiln::Buffer>& inputs) {
  auto start = Clock::now();
  auto out = exe.execute(entry, inputs);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!out.ok()) std::exit(fail(out.status()));
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kiln_pgle_bench MODEL.mlir [--level O2] [--runs 40]\n");
    return 2;
  }
  std::string path = argv[1], level_name = "O2";
  int runs = 40;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--level") == 0) level_name = argv[i + 1];
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
  }
  auto level = kiln::parse_effort_level(level_name);
  if (!level.ok()) return fail(level.status());
  auto client = kiln::Client::create_cpu();
  if (!client.ok()) return fail(client.status());
  auto source = kiln::ModuleSource::from_file(path);
  if (!source.ok()) return fail(source.status());
  kiln::CompileOptions options;
  options.optimization_level = *level;
  // Every compile is real: no cache.
  (void)kiln::config::set("KILN_ENABLE_COMPILATION_CACHE", "false");

  (void)kiln::config::set("KILN_ENABLE_PGLE", "false");
  kiln::CompileReport plain_report;
  auto plain = kiln::compile_or_get_cached(**client, *source, options, &plain_report);
  if (!plain.ok()) return fail(plain.status());

  (void)kiln::config::set("KILN_ENABLE_PGLE", "true");
  auto program = kiln::ProfileGuidedProgram::create(**client, *source, options);
  if (!program.ok()) return fail(program.status());
  const kiln::Executable& first = *(*program)->executable();
  std::string entry = first.entry_points().empty() ? "main" : first.entry_points()[0].name;
  for (const auto& e : first.entry_points())
    if (e.name == "main") entry = e.name;
  const kiln::EntryPoint* ep = *first.find_entry(entry);
  std::vector<kiln::Buffer> inputs;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const kiln::TensorType& t : ep->inputs) {
    kiln::Buffer b(t.dtype, t.shape);
    for (int64_t i = 0; i < b.element_count(); ++i) b.as<float>()[i] = uniform(rng);
    inputs.push_back(std::move(b));
  }
  int profiling_runs = 0;
  while ((*program)->recompiles() == 0 && profiling_runs < 1000) {
    auto out = (*program)->execute(entry, inputs);
    if (!out.ok()) return fail(out.status());
    ++profiling_runs;
  }
  const kiln::Executable& pgle = *(*program)->executable();
  auto profile = kiln::decode_fdo_profile((*program)->fdo_profile());
  if (!profile.ok()) return fail(profile.status());

  // Same inputs, same results (up to float reassociation-free tolerance).
  auto a = (*plain)->execute(entry, inputs);
  auto b = pgle.execute(entry, inputs);
  if (!a.ok() || !b.ok()) return fail(a.ok() ? b.status() : a.status());
  double worst = 0;
  for (size_t r = 0; r < a->size(); ++r)
    for (int64_t i = 0; i < (*a)[r].element_count(); ++i) {
      double x = (*a)[r].element_as_double(i), y = (*b)[r].element_as_double(i);
      worst = std::max(worst, std::fabs(x - y) / (1 + std::fabs(x)));
    }

  std::vector<double> plain_ms, pgle_ms;
  for (int i = 0; i < 3; ++i) time_run(**plain, entry, inputs), time_run(pgle, entry, inputs);
  for (int i = 0; i < runs; ++i) {
    if (i % 2 == 0) {
      plain_ms.push_back(time_run(**plain, entry, inputs));
      pgle_ms.push_back(time_run(pgle, entry, inputs));
    } else {
      pgle_ms.push_back(time_run(pgle, entry, inputs));
      plain_ms.push_back(time_run(**plain, entry, inputs));
    }
  }
  double plain_run = median(plain_ms), pgle_run = median(pgle_ms);
  double recompile = (*program)->last_report().compile_ms;
  std::printf("model %s at %s: %zu kernels, %d profiling runs\n", pgle.info().module_name.c_str(),
              level_name.c_str(), profile->kernels.size(), profiling_runs);
  std::printf("compile: plain %.0f ms, PGLE first pass %.0f ms, PGLE recompile %.0f ms\n",
              plain_report.compile_ms, (*program)->first_report().compile_ms, recompile);
  std::printf("run (median of %d, interleaved): plain %.3f ms, PGLE %.3f ms\n", runs, plain_run,
              pgle_run);
  std::printf("%s", kiln::format_fdo_profile(*profile).c_str());
  std::printf("speed-up %.2fx, compile ratio %.2f, run ratio %.3f, max relative difference %.1e\n",
              plain_run / pgle_run, recompile / plain_report.compile_ms, pgle_run / plain_run,
              worst);
  return 0;
}

// kiln_bench: one run, side by side — kiln's compile stages, executable size, fresh-process load
// time, and f32 matmul GFLOP/s at O2/O3 against OpenBLAS's cblas_sgemm on one thread (its default
// kernel and OPENBLAS_CORETYPE=SkylakeX, each measured in its own child process).
#include <cblas.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/client.h"
#include "kiln/config.h"

extern "C" void openblas_set_num_threads(int);

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string matmul_module(int n, const std::string& name = "matmul") {
  std::string t = "tensor<" + std::to_string(n) + "x" + std::to_string(n) + "xf32>";
  return "func.func @" + name + "(%a: " + t + ", %b: " + t + ") -> " + t + " {\n" +
         "  %zero = arith.constant 0.0 : f32\n  %init = tensor.empty() : " + t + "\n" +
         "  %acc = linalg.fill ins(%zero : f32) outs(%init : " + t + ") -> " + t + "\n" +
         "  %r = linalg.matmul ins(%a, %b : " + t + ", " + t + ") outs(%acc : " + t + ") -> " + t +
         "\n  return %r : " + t + "\n}\n";
}

kiln::Buffer random_matrix(int n, uint32_t seed) {
  kiln::Buffer b(kiln::DType::kF32, {n, n});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < b.element_count(); ++i) b.as<float>()[i] = dist(rng);
  return b;
}

template <typename F>
double best_ms(F&& run, int repeat) {
  run();  // warm caches and the allocator
  double best = 1e300;
  for (int i = 0; i < repeat; ++i) {
    auto start = Clock::now();
    run();
    best = std::min(best, ms_since(start));
  }
  return best;
}

template <typename F>
double median_ms(F&& run, int repeat) {
  run();
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) {
    auto start = Clock::now();
    run();
    times.push_back(ms_since(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double gflops(int n, double ms) { return 2.0 * n * n * n / (ms * 1e6); }

// Child mode: OpenBLAS's sgemm GFLOP/s for each size, one per line, on OPENBLAS_NUM_THREADS
// threads; best of `repeat`, or the median with `median`.
int openblas_only(const std::vector<int>& sizes, int repeat, bool median) {
  const char* threads = std::getenv("OPENBLAS_NUM_THREADS");
  openblas_set_num_threads(threads ? std::max(1, std::atoi(threads)) : 1);
  for (int n : sizes) {
    kiln::Buffer a = random_matrix(n, 1), b = random_matrix(n, 2), c(kiln::DType::kF32, {n, n});
    auto time = median ? median_ms<std::function<void()>> : best_ms<std::function<void()>>;
    double ms = time(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.as<float>(), n,
                      b.as<float>(), n, 0.0f, c.as<float>(), n);
        },
        repeat);
    std::printf("%d %.1f\n", n, gflops(n, ms));
  }
  return 0;
}

std::string run_capture(std::vector<std::string> argv, const std::vector<std::string>& env_extra) {
  std::string out_path = "/tmp/kiln-bench-" + std::to_string(getpid()) + ".out";
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.push_back(*e);
  for (const auto& e : env_extra) env_strings.push_back(e);
  std::vector<char*> env;
  for (auto& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data()) != 0) return "";
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream in(out_path);
  std::stringstream s;
  s << in.rdbuf();
  std::remove(out_path.c_str());
  return s.str();
}

std::vector<double> parse_openblas(const std::string& text, size_t count) {
  std::vector<double> out;
  std::stringstream s(text);
  int n = 0;
  double g = 0;
  while (s >> n >> g) out.push_back(g);
  out.resize(count, 0.0);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {512, 1024};
  int repeat = 10;
  if (argc > 1 && std::strcmp(argv[1], "--openblas-only") == 0)
    return openblas_only(sizes, repeat, false);
  // Thread scaling: medians of 20 runs, 1024 only.
  constexpr int kThreadRuns = 20;
  if (argc > 1 && std::strcmp(argv[1], "--openblas-threads") == 0)
    return openblas_only({1024}, kThreadRuns, true);

  auto client = kiln::Client::create_cpu(1);
  if (!client.ok()) return 1;
  std::printf("kiln_bench — %s\n\n", (*client)->platform_version().c_str());

  // OpenBLAS in child processes: the core type is read once, when the library initialises.
  std::string self = "/proc/self/exe";
  char path[4096] = {};
  ssize_t len = readlink(self.c_str(), path, sizeof(path) - 1);
  std::string me = len > 0 ? std::string(path, len) : argv[0];
  auto blas_default = parse_openblas(
      run_capture({me, "--openblas-only"}, {"OPENBLAS_NUM_THREADS=1"}), sizes.size());
  auto blas_skx =
      parse_openblas(run_capture({me, "--openblas-only"},
                                 {"OPENBLAS_NUM_THREADS=1", "OPENBLAS_CORETYPE=SkylakeX"}),
                     sizes.size());

  // The one-core table runs kiln on one thread too (the default is every CPU).
  (void)kiln::config::set("KILN_NUM_THREADS", "1");
  std::printf("f32 matmul, one core, GFLOP/s (best of %d)\n", repeat);
  std::printf("%-6s %10s %10s %16s %18s %14s\n", "n", "kiln O2", "kiln O3", "OpenBLAS default",
              "OpenBLAS SkylakeX", "O2 / best BLAS");
  std::string kx_path = "/tmp/kiln-bench-" + std::to_string(getpid()) + ".kx";
  std::printf("\n");
  std::vector<std::string> stage_lines;
  for (size_t i = 0; i < sizes.size(); ++i) {
    int n = sizes[i];
    kiln::Buffer a = random_matrix(n, 1), b = random_matrix(n, 2);
    double g[2] = {0, 0};
    int level_index = 0;
    for (kiln::EffortLevel level : {kiln::EffortLevel::kO2, kiln::EffortLevel::kO3}) {
      kiln::CompileOptions options;
      options.optimization_level = level;
      auto exe = (*client)->compile({matmul_module(n), "matmul.mlir"}, options);
      if (!exe.ok()) {
        std::fprintf(stderr, "%s\n", exe.status().to_string().c_str());
        return 1;
      }
      double ms = best_ms([&] { (void)(*exe)->execute("matmul", {a, b}); }, repeat);
      g[level_index++] = gflops(n, ms);
      const auto& t = (*exe)->info().timings;
      char line[256];
      std::snprintf(
          line, sizeof(line),
          "matmul %4d %s: parse %6.2f  passes %6.2f  llvm %6.2f  codegen %6.2f  total %7.2f ms, "
          "code %zu bytes",
          n, kiln::effort_level_name(level), t.parse_ms, t.passes_ms, t.llvm_ms, t.codegen_ms,
          t.total_ms(), (*exe)->code_size());
      stage_lines.push_back(line);
    }
    double best_blas = std::max(blas_default[i], blas_skx[i]);
    std::printf("%-6d %10.1f %10.1f %16.1f %18.1f %13.2fx\n", n, g[0], g[1], blas_default[i],
                blas_skx[i], best_blas > 0 ? g[0] / best_blas : 0.0);
  }

  // The same executable at 1 and 2 threads (KILN_NUM_THREADS is read at run time), beside
  // OpenBLAS at 1 and 2 threads.
  {
    int n = 1024;
    kiln::Buffer a = random_matrix(n, 1), b = random_matrix(n, 2);
    kiln::CompileOptions options;
    options.optimization_level = kiln::EffortLevel::kO2;
    auto exe = (*client)->compile({matmul_module(n), "matmul.mlir"}, options);
    if (!exe.ok()) {
      std::fprintf(stderr, "%s\n", exe.status().to_string().c_str());
      return 1;
    }
    double kiln_g[2], blas_g[2];
    for (int t = 1; t <= 2; ++t) {
      (void)kiln::config::set("KILN_NUM_THREADS", std::to_string(t));
      kiln_g[t - 1] = gflops(n, median_ms(
                                    [&] {
                                      (void)(*exe)->execute("matmul", {a, b});
                                    },
                                    kThreadRuns));
      blas_g[t - 1] = parse_openblas(
          run_capture({me, "--openblas-threads"}, {"OPENBLAS_NUM_THREADS=" + std::to_string(t)}),
          1)[0];
    }
    (void)kiln::config::set("KILN_NUM_THREADS", "0");
    std::printf("\nf32 matmul %d, GFLOP/s by thread count (median of %d)\n", n, kThreadRuns);
    std::printf("%-8s %10s %10s %16s %16s\n", "threads", "kiln O2", "OpenBLAS", "kiln / OpenBLAS",
                "kiln / kiln 1T");
    for (int t = 1; t <= 2; ++t)
      std::printf("%-8d %10.1f %10.1f %15.2fx %15.2fx\n", t, kiln_g[t - 1], blas_g[t - 1],
                  blas_g[t - 1] > 0 ? kiln_g[t - 1] / blas_g[t - 1] : 0.0,
                  kiln_g[t - 1] / kiln_g[0]);
  }

  std::printf("\ncompile time per stage (ms) and executable size\n");
  for (const auto& l : stage_lines) std::printf("  %s\n", l.c_str());

  // Fresh-process load of a ~1 MB executable: 20 matmul kernels and 1 MB of constant weights.
  std::string big =
      "func.func @weights(%x: tensor<512x512xf32>) -> tensor<512x512xf32> {\n"
      "  %w = arith.constant dense<1.5> : tensor<512x512xf32>\n"
      "  %init = tensor.empty() : tensor<512x512xf32>\n"
      "  %r = linalg.add ins(%x, %w : tensor<512x512xf32>, tensor<512x512xf32>)\n"
      "      outs(%init : tensor<512x512xf32>) -> tensor<512x512xf32>\n"
      "  return %r : tensor<512x512xf32>\n}\n";
  for (int f = 0; f < 20; ++f) big += matmul_module(64 + f, "mm" + std::to_string(f));
  kiln::CompileOptions options;
  options.optimization_level = kiln::EffortLevel::kO2;
  auto start = Clock::now();
  auto exe = (*client)->compile({big, "many_matmuls.mlir"}, options);
  double compile_ms = ms_since(start);
  if (!exe.ok()) {
    std::fprintf(stderr, "%s\n", exe.status().to_string().c_str());
    return 1;
  }
  std::string bytes = (*exe)->serialize();
  {
    std::ofstream out(kx_path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::vector<double> ready, process;
  for (int i = 0; i < 20; ++i) {
    auto t0 = Clock::now();
    std::string out = run_capture({KILN_BENCH_LOAD, kx_path}, {});
    process.push_back(ms_since(t0));
    ready.push_back(std::atof(out.c_str()));
  }
  std::sort(ready.begin(), ready.end());
  std::sort(process.begin(), process.end());
  std::remove(kx_path.c_str());
  std::printf("\nfresh-process load of a %.2f MB executable (21 functions, compiled in %.0f ms):\n",
              bytes.size() / 1048576.0, compile_ms);
  std::printf("  deserialise + ready to run: median %.2f ms (min %.2f)\n", ready[ready.size() / 2],
              ready[0]);
  std::printf("  whole process (spawn to exit): median %.2f ms\n", process[process.size() / 2]);
  return 0;
}

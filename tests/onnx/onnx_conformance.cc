// ONNX's own backend tests (Debian's libonnx-testdata) through kiln: every test whose inputs and
// outputs are float32, integer or bool tensors is imported, compiled, run on test_data_set_0 and
// compared with ONNX's expected outputs at ONNX's tolerances (rtol 1e-3, atol 1e-7). Each test
// runs in its own child process so a compiler failure is a failed test, not the end of the run.
//
// usage: kiln_onnx_conformance [--min-pass-percent P] [--jobs N] [--filter TEXT] SUITE_DIR...
// Prints every result, then `onnx node tests: P passed, F failed` per suite.
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "kiln/client.h"
#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/logging.h"
#include "kiln/onnx.h"

namespace {

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool exists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// Why a test is outside the set kiln is measured on ("" when it is in): what its operators do
// (random draws, training updates, quantized arithmetic, sequences, optionals, strings) or the
// element types it reads and writes. Decided from the model's operators, not from test names.
std::string out_of_scope(const std::string& name, const kiln::OnnxModel& model) {
  static const std::vector<std::pair<std::string, std::string>> categories = {
      {"Random", "random"},
      {"Bernoulli", "random"},
      {"Multinomial", "random"},
      {"Quantize", "quantized"},
      {"QLinear", "quantized"},
      {"Integer", "quantized"},
      {"Sequence", "sequence"},
      {"Optional", "optional"},
      {"StringNormalizer", "string"},
      {"RegexFull", "string"},
      {"ai.onnx.preview.training", "training"}};
  for (const auto& [op, count] : model.op_counts())
    for (const auto& [word, category] : categories)
      if (op.find(word) != std::string::npos) return "category: " + category;
  for (const auto& [domain, version] : model.opsets())
    if (domain == "ai.onnx.preview.training") return "category: training";
  // BatchNormalization in training mode updates running statistics: a training step; Dropout in
  // training mode (test_training_dropout*) draws random masks.
  if (name.find("training_mode") != std::string::npos) return "category: training";
  if (name.rfind("test_training_", 0) == 0) return "category: random";
  auto allowed = [](int32_t t) {
    using T = kiln::OnnxElementType;
    return t == int32_t(T::kFloat) || t == int32_t(T::kInt8) || t == int32_t(T::kInt16) ||
           t == int32_t(T::kInt32) || t == int32_t(T::kInt64) || t == int32_t(T::kBool) ||
           t == int32_t(T::kUint8) || t == int32_t(T::kUint16) || t == int32_t(T::kUint32) ||
           t == int32_t(T::kUint64);
  };
  for (const auto& v : model.inputs())
    if (!allowed(v.element_type))
      return "input type " + kiln::onnx_element_type_name(v.element_type);
  for (const auto& v : model.outputs())
    if (!allowed(v.element_type))
      return "output type " + kiln::onnx_element_type_name(v.element_type);
  return "";
}

bool close_enough(const kiln::Buffer& got, const kiln::Buffer& want, std::string* why) {
  if (got.dtype() != want.dtype()) {
    *why = std::string("dtype ") + kiln::dtype_name(got.dtype()) + ", expected " +
           kiln::dtype_name(want.dtype());
    return false;
  }
  if (got.shape() != want.shape()) {
    *why = "shape " + kiln::shape_to_string(got.shape()) + ", expected " +
           kiln::shape_to_string(want.shape());
    return false;
  }
  bool floating = got.dtype() == kiln::DType::kF32 || got.dtype() == kiln::DType::kF64;
  for (int64_t i = 0; i < got.element_count(); ++i) {
    double g = got.element_as_double(i), w = want.element_as_double(i);
    bool ok = floating ? (std::isnan(g) && std::isnan(w)) || g == w ||
                             std::fabs(g - w) <= 1e-7 + 1e-3 * std::fabs(w)
                       : g == w;
    if (!ok) {
      *why = "element " + std::to_string(i) + " is " + std::to_string(g) + ", expected " +
             std::to_string(w);
      return false;
    }
  }
  return true;
}

// Runs one test in this (child) process; returns "" on success or the reason it failed.
std::string run_test(const std::string& dir) {
  auto model = kiln::OnnxModel::from_file(dir + "/model.onnx");
  if (!model.ok()) return model.status().message();
  std::string data = dir + "/test_data_set_0";
  std::vector<kiln::Buffer> inputs;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t k = 0; k < model->inputs().size(); ++k) {
    auto b = kiln::read_onnx_tensor_file(data + "/input_" + std::to_string(k) + ".pb");
    if (!b.ok()) return b.status().message();
    shapes.push_back(b->shape());
    inputs.push_back(*b);
  }
  auto resolved = model->resolve_input_shapes(shapes);
  if (!resolved.ok()) return resolved.status().message();
  auto client = kiln::Client::create_cpu();
  if (!client.ok()) return client.status().message();
  kiln::CompileOptions options;
  options.optimization_level = kiln::EffortLevel::kO1;
  auto program =
      kiln::compile_onnx_or_get_cached(**client, *model, *resolved, options, nullptr, &inputs);
  if (!program.ok()) return program.status().message();
  auto results = program->run(inputs);
  if (!results.ok()) return results.status().message();
  for (size_t k = 0; k < results->size(); ++k) {
    auto want = kiln::read_onnx_tensor_file(data + "/output_" + std::to_string(k) + ".pb");
    if (!want.ok()) return want.status().message();
    std::string why;
    if (!close_enough((*results)[k], *want, &why))
      return "output " + std::to_string(k) + ": " + why;
  }
  return "";
}

std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > 220 ? line.substr(0, 217) + "..." : line;
}

struct Child {
  pid_t pid;
  int fd;
  std::string name;
};

}  // namespace

int main(int argc, char** argv) {
  double min_pass_percent = 0;
  int jobs = 2;
  std::string filter;  // run only tests whose name contains this
  std::vector<std::string> suites;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--min-pass-percent" && i + 1 < argc)
      min_pass_percent = std::atof(argv[++i]);
    else if (a == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else if (a == "--jobs" && i + 1 < argc)
      jobs = std::max(1, std::atoi(argv[++i]));
    else
      suites.push_back(a);
  }
  if (suites.empty()) {
    std::cerr << "usage: kiln_onnx_conformance [--min-pass-percent P] [--jobs N] [--filter TEXT] "
                 "SUITE_DIR...\n";
    return 2;
  }
  (void)kiln::config::set("KILN_ENABLE_COMPILATION_CACHE", "false");
  (void)kiln::config::set("KILN_LOG_LEVEL", "error");
  bool all_ok = true;
  for (const std::string& suite : suites) {
    std::vector<std::string> tests;
    int skipped = 0;
    std::map<std::string, int> skip_reasons;
    for (const std::string& name : list_dir(suite)) {
      std::string dir = suite + "/" + name;
      if (!exists(dir + "/model.onnx") || !exists(dir + "/test_data_set_0")) continue;
      if (!filter.empty() && name.find(filter) == std::string::npos) continue;
      auto model = kiln::OnnxModel::from_file(dir + "/model.onnx");
      std::string why = model.ok() ? out_of_scope(name, *model) : "unreadable";
      if (!why.empty()) {
        ++skipped;
        skip_reasons[why]++;
        continue;
      }
      tests.push_back(name);
    }
    int passed = 0, failed = 0;
    std::map<std::string, std::string> outcome;
    std::vector<Child> running;
    size_t next = 0;
    auto reap = [&](bool block) {
      for (auto it = running.begin(); it != running.end();) {
        int status = 0;
        pid_t r = waitpid(it->pid, &status, block ? 0 : WNOHANG);
        if (r == 0) {
          ++it;
          continue;
        }
        std::string message;
        char buf[4096];
        for (ssize_t n; (n = read(it->fd, buf, sizeof buf)) > 0;) message.append(buf, size_t(n));
        close(it->fd);
        bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && message.empty())
          message = WIFSIGNALED(status)
                        ? "crashed (signal " + std::to_string(WTERMSIG(status)) + ")"
                        : "failed";
        outcome[it->name] = ok ? "" : message;
        (ok ? passed : failed)++;
        it = running.erase(it);
        block = false;
      }
    };
    while (next < tests.size() || !running.empty()) {
      while (next < tests.size() && int(running.size()) < jobs) {
        int fds[2];
        if (pipe(fds) != 0) return 2;
        std::string name = tests[next++];
        pid_t pid = fork();
        if (pid == 0) {
          close(fds[0]);
          alarm(120);
          std::string why = run_test(suite + "/" + name);
          if (!why.empty()) {
            std::string line = first_line(why);
            ssize_t ignored = write(fds[1], line.data(), line.size());
            (void)ignored;
          }
          _exit(why.empty() ? 0 : 1);
        }
        close(fds[1]);
        running.push_back({pid, fds[0], name});
      }
      reap(true);
    }
    for (const auto& [name, why] : outcome)
      std::cout << (why.empty() ? "PASS " : "FAIL ") << name << (why.empty() ? "" : ": " + why)
                << "\n";
    std::string label = suite.substr(suite.find_last_of('/') + 1);
    double percent = tests.empty() ? 0 : 100.0 * passed / double(tests.size());
    std::cout << "skipped " << skipped << " out-of-scope tests:";
    for (const auto& [why, n] : skip_reasons) std::cout << " " << why << " (" << n << ");";
    std::cout << "\nonnx " << label << " tests: " << passed << " passed, " << failed << " failed ("
              << percent << "% of " << tests.size() << ")\n";
    if (percent < min_pass_percent) {
      std::cout << label << ": below the floor of " << min_pass_percent << "%\n";
      all_ok = false;
    }
  }
  return all_ok ? 0 : 1;
}

// `kiln run`: compile (or load) a program and run an entry, with PGLE, replicas, ONNX models and
// mlir-runner's spelling (runner_compat.h).
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace kiln::cli {

struct RunArgs {
  std::string file;
  std::string entry;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::string fill = "random";
  std::string effort = "UNKNOWN";
  std::string entry_point_result;
  std::vector<std::string> shared_libs;  // --shared-libs, repeated or comma-separated
  bool verify_runtime = false;
  bool verify_runtime_continue = false;
  bool enable_matrix = false;  // accepted: kiln always lowers matrix intrinsics
  bool matrix_allow_contract = false;
  std::string matrix_default_layout;
  std::vector<std::string> disabled_passes;
  int repeat = 1;
  bool json = false;
  bool no_cache = false;
  std::string coordinator;  // a job of several processes (or $KILN_COORDINATOR)
  int num_processes = 0;
  int process_id = -1;
  std::string job;
  int replicas = 1;
  bool pgle = false;
  bool expect_pgle = false;
  int pgle_runs = -1;
  double pgle_percentile = -1;
  std::string profile_out;
  bool fold_weights = false;  // ONNX: weights compiled into the code
};

// The `run` subcommand and its options, parsed into `run`.
CLI::App* add_run_command(CLI::App& app, RunArgs& run);
int run_command(const RunArgs& args);

}  // namespace kiln::cli

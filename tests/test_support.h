// Helpers shared by kiln's tests: paths of the built tools and test programs, child processes.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/client.h"

namespace kiln::testing {

inline std::string program_path(const std::string& name) {
  return std::string(KILN_TEST_PROGRAMS_DIR) + "/" + name;
}
inline std::string kiln_binary() { return KILN_BINARY; }

struct ProcessResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs argv[0] with argv (no shell), with extra environment "NAME=value" entries.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::vector<std::string>& extra_env = {});

// Starts a process without waiting; stdout/stderr go to the given files ("" = inherited).
// Returns -1 when it cannot start.
pid_t spawn_process(const std::vector<std::string>& argv,
                    const std::vector<std::string>& extra_env = {},
                    const std::string& stdout_path = "", const std::string& stderr_path = "");
// Waits for it; returns the exit code, or 128 + the signal that killed it.
int wait_process(pid_t pid);

// A scratch directory removed at the end of the test.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The process-wide CPU client tests share (compiler loaded once).
const Client& shared_client();

Result<std::shared_ptr<Executable>> compile_file(const std::string& path, EffortLevel level);

// The program kiln compiles for test program `name` (tests/programs) at one stage of its
// pipeline: the dump whose file name ends in `stage` ("2-vectorized.mlir", "3-llvm-dialect.mlir")
// from `kiln compile` with KILN_DUMP_IR_TO; "" and a test failure where there is none.
std::string compiled_stage(const std::string& name, const std::string& stage);
// The dump in `dump_dir` (a KILN_DUMP_IR_TO directory) whose file name ends in `stage`; "" and a
// test failure where there is none.
std::string dumped_stage_in(const std::string& dump_dir, const std::string& stage);

// Uniform values in [-1, 1), the same for the same seed.
Buffer random_f32(std::vector<int64_t> shape, uint32_t seed);
// Fails the test (naming at most five elements) unless `got` holds `want` within a relative
// `tolerance`.
void expect_close(const Buffer& got, const std::vector<double>& want, double tolerance = 1e-4);

}  // namespace kiln::testing

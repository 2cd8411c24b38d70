#include "test_support.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace kiln::testing {

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

pid_t spawn_process(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                    const std::string& stdout_path, const std::string& stderr_path) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Extra entries replace inherited ones of the same name (getenv takes the first it finds).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('=') + 1);
    bool overridden = false;
    for (const auto& x : extra_env) overridden = overridden || x.rfind(name, 0) == 0;
    if (!overridden) env_strings.push_back(entry);
  }
  for (const auto& e : extra_env) env_strings.push_back(e);
  std::vector<char*> env;
  for (auto& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!stdout_path.empty())
    posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
  if (!stderr_path.empty())
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

int wait_process(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::vector<std::string>& extra_env) {
  TempDir dir;
  ProcessResult result;
  pid_t pid = spawn_process(argv, extra_env, dir.file("stdout"), dir.file("stderr"));
  if (pid < 0) {
    result.err = "cannot start " + argv[0];
    return result;
  }
  result.exit_code = wait_process(pid);
  result.out = slurp(dir.file("stdout"));
  result.err = slurp(dir.file("stderr"));
  return result;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-test-XXXXXX").string();
  char* made = mkdtemp(tmpl.data());
  path_ = made ? made : "";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

const Client& shared_client() {
  static std::unique_ptr<Client> client = [] {
    auto c = Client::create_cpu(1);
    if (!c.ok()) std::abort();
    return std::move(c).value();
  }();
  return *client;
}

Result<std::shared_ptr<Executable>> compile_file(const std::string& path, EffortLevel level) {
  KILN_ASSIGN_OR_RETURN(ModuleSource source, ModuleSource::from_file(path));
  CompileOptions options;
  options.optimization_level = level;
  return shared_client().compile(source, options);
}

Buffer random_f32(std::vector<int64_t> shape, uint32_t seed) {
  Buffer b(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < b.element_count(); ++i) b.as<float>()[i] = dist(rng);
  return b;
}

void expect_close(const Buffer& got, const std::vector<double>& want, double tolerance) {
  ASSERT_EQ(got.element_count(), static_cast<int64_t>(want.size()));
  int reported = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.element_as_double(static_cast<int64_t>(i));
    if (std::abs(g - want[i]) > tolerance * (1 + std::abs(want[i])) && reported++ < 5) {
      ADD_FAILURE() << "element " << i << ": got " << g << ", want " << want[i];
    }
  }
}

std::string compiled_stage(const std::string& name, const std::string& stage) {
  TempDir dir;
  ProcessResult r = run_process({kiln_binary(), "--cache-dir", dir.file("cache"), "--set",
                                 "KILN_DUMP_IR_TO=" + dir.file("dump"), "compile",
                                 program_path(name), "-o", dir.file("out.kx")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return "";
  return dumped_stage_in(dir.file("dump"), stage);
}

std::string dumped_stage_in(const std::string& dump_dir, const std::string& stage) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dump_dir, error))
    if (entry.path().string().ends_with(stage)) return slurp(entry.path().string());
  ADD_FAILURE() << "no dump in " << dump_dir << " ends in " << stage;
  return "";
}

}  // namespace kiln::testing

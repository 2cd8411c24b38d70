#include "kiln/options.h"

#include <algorithm>
#include <mutex>

#include "kiln/config.h"
#include "kiln/logging.h"

namespace kiln {

const char* effort_level_name(EffortLevel level) {
  switch (level) {
    case EffortLevel::kUnknown:
      return "UNKNOWN";
    case EffortLevel::kO0:
      return "O0";
    case EffortLevel::kO1:
      return "O1";
    case EffortLevel::kO2:
      return "O2";
    case EffortLevel::kO3:
      return "O3";
  }
  return "UNKNOWN";
}

const char* pgle_build_name(PgleBuild build) {
  switch (build) {
    case PgleBuild::kPlain:
      return "plain";
    case PgleBuild::kInstrumented:
      return "instrumented";
    case PgleBuild::kOptimized:
      return "optimized";
  }
  return "plain";
}

Result<EffortLevel> parse_effort_level(const std::string& text) {
  struct Name {
    const char* name;
    const char* number;
    EffortLevel level;
  };
  static const Name kNames[] = {{"UNKNOWN", "0", EffortLevel::kUnknown},
                                {"O0", "9", EffortLevel::kO0},
                                {"O1", "19", EffortLevel::kO1},
                                {"O2", "29", EffortLevel::kO2},
                                {"O3", "39", EffortLevel::kO3}};
  for (const Name& n : kNames) {
    if (text == n.name || text == n.number) return n.level;
  }
  return invalid_argument("unknown effort level '" + text +
                          "': use O0, O1, O2, O3 or UNKNOWN (or 9, 19, 29, 39, 0)");
}

EffortLevel resolve_effort_level(EffortLevel level) {
  return level == EffortLevel::kUnknown ? EffortLevel::kO2 : level;
}

namespace {

std::mutex& hook_mutex() {
  static std::mutex m;
  return m;
}
ProfileVersionHook& hook() {
  static ProfileVersionHook h;
  return h;
}

std::string trim(std::string text) {
  text.erase(0, text.find_first_not_of(" \t"));
  text.erase(text.find_last_not_of(" \t") + 1);
  return text;
}

// The pass that rematerialisation control maps to: elementwise fusion recomputes a producer in
// every consumer it is fused into.
constexpr const char* kRematPass = "linalg-fuse-elementwise-ops";

}  // namespace

void set_profile_version_hook(ProfileVersionHook h) {
  std::lock_guard<std::mutex> lock(hook_mutex());
  hook() = std::move(h);
}

namespace {

Status check_device_assignment(int num_replicas, int num_partitions,
                               const std::vector<std::vector<int>>& device_assignment) {
  if (num_replicas < 1 || num_partitions < 1)
    return invalid_argument("num_replicas (" + std::to_string(num_replicas) +
                            ") and num_partitions (" + std::to_string(num_partitions) +
                            ") must be at least 1");
  if (device_assignment.empty()) return Status();
  bool rows_ok = static_cast<int>(device_assignment.size()) == num_replicas;
  for (const auto& row : device_assignment)
    rows_ok = rows_ok && static_cast<int>(row.size()) == num_partitions;
  if (rows_ok) return Status();
  std::string shape =
      std::to_string(device_assignment.size()) + "x" + std::to_string(device_assignment[0].size());
  return invalid_argument("device_assignment has shape " + shape + ", but num_replicas is " +
                          std::to_string(num_replicas) + " and num_partitions is " +
                          std::to_string(num_partitions));
}

// A comma-separated list of pass names, trimmed, each added once.
void add_disabled_passes(CompileOptions& o, const std::string& list) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string p = trim(list.substr(start, comma == std::string::npos ? comma : comma - start));
    if (!p.empty() &&
        std::find(o.disabled_passes.begin(), o.disabled_passes.end(), p) == o.disabled_passes.end())
      o.disabled_passes.push_back(p);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}

Status apply_overrides(CompileOptions& o,
                       const std::vector<std::pair<std::string, std::string>>& overrides) {
  for (const auto& [name, value] : overrides) {
    if (name == "optimization_level" || name == "memory_fitting_level") {
      KILN_ASSIGN_OR_RETURN(EffortLevel level, parse_effort_level(value));
      (name == "optimization_level" ? o.optimization_level : o.memory_fitting_level) = level;
    } else if (name == "disabled_passes") {
      add_disabled_passes(o, value);
    } else {
      // As XLA does: a name the compiler does not know would change the key and nothing else.
      return invalid_argument("No such compile option: '" + name +
                              "' (kiln's compile options: optimization_level, "
                              "memory_fitting_level, disabled_passes)");
    }
  }
  return Status();
}

// The seed's precedence: a positive flag; else the hook's version, where it gives one other than 0
// (0 is an error of the hook's); else "none, do not retrieve".
int64_t resolve_profile_version() {
  int64_t flag_version = config::get_int("KILN_PROFILE_VERSION");
  if (flag_version > 0) return flag_version;
  std::lock_guard<std::mutex> lock(hook_mutex());
  int64_t hooked = hook() ? hook()() : kNoProfileDontRetrieve;
  if (hooked != 0) return hooked;
  log::error("the profile version hook returned 0; this should not happen (using " +
             std::to_string(kNoProfileDontRetrieve) + ")");
  return kNoProfileDontRetrieve;
}

}  // namespace

Result<CompileOptions> get_compile_options(
    int num_replicas, int num_partitions, const std::vector<std::vector<int>>& device_assignment,
    const std::vector<std::pair<std::string, std::string>>& env_option_overrides,
    std::string fdo_profile, int64_t module_op_count) {
  KILN_RETURN_IF_ERROR(check_device_assignment(num_replicas, num_partitions, device_assignment));
  CompileOptions o;
  o.num_replicas = num_replicas;
  o.num_partitions = num_partitions;
  o.device_assignment = device_assignment;
  KILN_RETURN_IF_ERROR(apply_overrides(o, env_option_overrides));
  if (config::get_bool("KILN_DISABLE_MOST_OPTIMIZATIONS")) o.optimization_level = EffortLevel::kO0;
  auto remat = config::get_string("KILN_COMPILER_ENABLE_REMAT_PASS");
  if (remat.ok() && !remat->empty() && !config::get_bool("KILN_COMPILER_ENABLE_REMAT_PASS"))
    add_disabled_passes(o, kRematPass);  // added to, never replacing, the caller's list
  o.fdo_profile = std::move(fdo_profile);
  o.profile_version = resolve_profile_version();
  o.detailed_logging = module_op_count >= config::get_int("KILN_COMPILER_DETAILED_LOGGING_MIN_OPS");
  return o;
}

Result<CompileOptions> get_compile_options(int num_replicas, int num_partitions,
                                           const std::vector<int>& device_assignment) {
  if (device_assignment.empty())
    return get_compile_options(num_replicas, num_partitions, std::vector<std::vector<int>>{});
  if (num_partitions != 1)
    return invalid_argument("a flat device_assignment of " +
                            std::to_string(device_assignment.size()) +
                            " devices needs num_partitions == 1, but num_partitions is " +
                            std::to_string(num_partitions));
  std::vector<std::vector<int>> rows;
  for (int d : device_assignment) rows.push_back({d});
  return get_compile_options(num_replicas, num_partitions, rows);
}

}  // namespace kiln

#include "cli_support.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "kiln/cache.h"
#include "kiln/file.h"

namespace kiln::cli {
// This process's resident high-water mark (VmHWM), in MiB: its peak memory so far (compile, load
// and runs). Not getrusage's ru_maxrss: that keeps the
// parent's resident size at fork time across exec (a Python parent adds its own).
double peak_memory_mib() {
  auto status = kiln::read_file("/proc/self/status");
  if (status.ok()) {
    size_t at = status->find("VmHWM:");
    if (at != std::string::npos) return std::strtod(status->c_str() + at + 6, nullptr) / 1024.0;
  }
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return double(usage.ru_maxrss) / 1024.0;  // in KiB on Linux
}

// Prints an error the way compilers do; messages that already carry "error:" print as they are.
int fail(const kiln::Status& status) {
  std::string message = status.message();
  if (message.find("error:") == std::string::npos) message = "kiln: error: " + message;
  std::cerr << message << (message.empty() || message.back() != '\n' ? "\n" : "");
  return 1;
}

bool looks_like_executable(const std::string& bytes) { return bytes.rfind("KILNEXE", 0) == 0; }

kiln::Result<kiln::CompileOptions> compile_options(const std::string& effort,
                                                   const std::vector<std::string>& disabled) {
  kiln::CompileOptions options;
  KILN_ASSIGN_OR_RETURN(options.optimization_level, kiln::parse_effort_level(effort));
  options.disabled_passes = disabled;
  return options;
}

// Where `kiln run --pgle` keeps the profile of a module: next to the cache's entries.
std::string stored_profiles_directory() { return kiln::cache_directory() + "/profiles"; }

// Named by a digest of the module's name: a name like "../../x" stays inside the directory.
std::string stored_profile_path(const std::string& module_name) {
  return stored_profiles_directory() + "/" + kiln::file_name_for_module(module_name) + ".kprof";
}

std::string summarize(const Buffer& b) {
  std::ostringstream os;
  os << b.type().to_string() << " [";
  int64_t n = b.element_count(), shown = std::min<int64_t>(n, 6);
  for (int64_t i = 0; i < shown; ++i) os << (i ? ", " : "") << b.element_as_double(i);
  if (n > shown) os << ", ... (" << n << " elements)";
  os << "]";
  return os.str();
}

}  // namespace kiln::cli

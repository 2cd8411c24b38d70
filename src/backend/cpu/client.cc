#include "kiln/client.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>

#include "backend/cpu/compiler_interface.h"
#include "backend/cpu/host_description_cache.h"
#include "kiln/config.h"
#include "kiln/file.h"
#include "kiln/logging.h"
#include "kiln_build_info.h"
#include "kiln_compiler_fingerprint.h"

namespace kiln {
namespace {

// A stable description of this CPU without asking LLVM (which the runtime must not load): the
// vendor, family/model/stepping and every feature word LLVM's host detection reads.
std::string host_cpu_identity() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  char vendor[13] = {};
  __get_cpuid(0, &a, &b, &c, &d);
  unsigned max_leaf = a;
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  std::ostringstream out;
  out << vendor;
  __get_cpuid(1, &a, &b, &c, &d);
  out << std::hex << ";sig=" << a << ";f1=" << c << "." << d;
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    out << ";f7=" << b << "." << c << "." << d;
    __cpuid_count(7, 1, a, b, c, d);
    out << ";f7s1=" << a;
  }
  __get_cpuid(0x80000001, &a, &b, &c, &d);
  out << ";fx=" << c << "." << d;
  return out.str();
}

// The compiler half lives next to libkiln; $KILN_COMPILER_LIBRARY overrides the path.
std::string compiler_library_path() {
  if (std::string path = *config::get_string("KILN_COMPILER_LIBRARY"); !path.empty()) return path;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&kiln_version), &info) != 0 && info.dli_fname != nullptr) {
    std::string self = info.dli_fname;
    size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + "libkiln_compiler.so";
  }
  return "libkiln_compiler.so";
}

Result<cpu::ModuleCompiler*> module_compiler() {
  static std::once_flag once;
  static cpu::ModuleCompiler* compiler = nullptr;
  static Status load_status;
  std::call_once(once, [] {
    std::string path = compiler_library_path();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      load_status =
          internal_error("cannot load kiln's compiler library " + path + ": " +
                         (why ? why : "unknown") + "; set KILN_COMPILER_LIBRARY to its path");
      return;
    }
    auto create = reinterpret_cast<cpu::CreateModuleCompilerFn>(
        dlsym(handle, cpu::kCreateModuleCompilerSymbol));
    if (create == nullptr) {
      load_status = internal_error(path + " does not export " +
                                   std::string(cpu::kCreateModuleCompilerSymbol));
      return;
    }
    compiler = create();
  });
  if (!load_status.ok()) return load_status;
  return compiler;
}

std::string describe_platform(const std::string& triple, const std::string& cpu,
                              const std::string& features) {
  return std::string("kiln ") + KILN_VERSION + " (code generation " + KILN_COMPILER_FINGERPRINT +
         "); llvm " + KILN_LLVM_VERSION + "; " + triple + "; " + cpu + "; " + features;
}

std::mutex& host_cache_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::shared_ptr<cpu::HostDescriptionCache>& host_cache() {
  static std::shared_ptr<cpu::HostDescriptionCache> cache;
  return cache;
}

// This host in LLVM's terms, without loading LLVM on the hit path: the installed host description
// cache (the compilation cache's, while one is open) answers, so only the first process on a
// machine type asks LLVM.
Result<cpu::HostDescription> host_description(int process_index) {
  static std::mutex mutex;
  static std::optional<cpu::HostDescription> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (known) return *known;
  std::string identity =
      host_cpu_identity() + ";kiln " + KILN_VERSION + ";llvm " + KILN_LLVM_VERSION;
  std::shared_ptr<cpu::HostDescriptionCache> cache = cpu::installed_host_description_cache();
  if (cache)
    if (std::optional<cpu::HostDescription> stored = cache->load(identity)) {
      known = *stored;
      return *known;
    }
  KILN_ASSIGN_OR_RETURN(cpu::ModuleCompiler * compiler, module_compiler());
  known = compiler->describe_host();
  if (cache) cache->save(identity, *known, process_index);
  return *known;
}

// Compiles and stamps what the client knows: its platform version and each replica's device.
// A compile-only client compiles for its target.
Result<cpu::CompiledModule> compile_module(const Client& client, const ModuleSource& source,
                                           const CompileOptions& raw_options) {
  CompileOptions options = raw_options;
  if (client.compile_only()) {
    if (!options.target.is_host())
      return invalid_argument(
          "a compile-only client compiles for its own target; leave CompileOptions::target empty");
    options.target = *client.target();
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int> replicas, client.replica_devices(options));
  KILN_ASSIGN_OR_RETURN(cpu::ModuleCompiler * compiler, module_compiler());
  KILN_ASSIGN_OR_RETURN(cpu::CompiledModule compiled, compiler->compile(source, options));
  compiled.info.platform_version = client.platform_version();
  compiled.info.num_replicas = options.num_replicas;
  compiled.info.replica_devices = std::move(replicas);
  return compiled;
}

}  // namespace

const char* kiln_version() { return KILN_VERSION; }
const char* llvm_version() { return KILN_LLVM_VERSION; }

struct ModuleSource::Lazy {
  std::once_flag once;
  std::function<Result<std::string>()> produce;
  Result<std::string> text = internal_error("not produced");
};

ModuleSource ModuleSource::produced_by(std::string identity, std::string name,
                                       std::function<Result<std::string>()> produce) {
  ModuleSource source;
  source.bytes = std::move(identity);
  source.name = std::move(name);
  source.lazy = std::make_shared<Lazy>();
  source.lazy->produce = std::move(produce);
  return source;
}

Result<ModuleSource> ModuleSource::mlir() const {
  if (!lazy) return *this;
  std::call_once(lazy->once, [&] { lazy->text = lazy->produce(); });
  if (!lazy->text.ok()) return lazy->text.status();
  ModuleSource out;
  out.bytes = *lazy->text;
  out.name = name;
  return out;
}

Result<ModuleSource> ModuleSource::from_file(const std::string& path) {
  ModuleSource source;
  KILN_ASSIGN_OR_RETURN(source.bytes, read_file(path));
  source.name = path;
  return source;
}

Result<std::unique_ptr<Client>> Client::create_cpu(int device_count, int process_index) {
  if (device_count <= 0) {
    KILN_RETURN_IF_ERROR(config::check_environment_of("KILN_CPU_DEVICE_COUNT"));
    device_count = static_cast<int>(config::get_int("KILN_CPU_DEVICE_COUNT"));
  }
  std::unique_ptr<Client> client(new Client());
  client->process_index_ = process_index;
  for (int i = 0; i < device_count; ++i)
    client->devices_.push_back(Device{i, process_index, "cpu"});
  return client;
}

Result<std::unique_ptr<Client>> Client::create_compile_only(const CompileTarget& target,
                                                            int device_count) {
  if (target.triple.empty())
    return invalid_argument(
        "a compile-only client needs a target triple (e.g. x86_64-pc-linux-gnu, "
        "aarch64-unknown-linux-gnu); `kiln version` prints this machine's");
  if (device_count < 1 || device_count > 4096)
    return invalid_argument(std::to_string(device_count) +
                            " is not a device count between 1 and 4096");
  std::unique_ptr<Client> client(new Client());
  client->compile_only_ = true;
  client->target_ = target;
  if (client->target_.cpu.empty()) client->target_.cpu = "generic";
  for (int i = 0; i < device_count; ++i) client->devices_.push_back(Device{i, 0, "cpu"});
  client->platform_version_ =
      describe_platform(client->target_.triple, client->target_.cpu, client->target_.features);
  std::call_once(client->platform_once_, [] {});
  return client;
}

Result<CompileTarget> Client::target() const {
  if (compile_only_) return target_;
  KILN_ASSIGN_OR_RETURN(cpu::HostDescription d, host_description(process_index_));
  return CompileTarget{d.triple, d.cpu, d.features};
}

const std::string& Client::platform_version() const {
  std::call_once(platform_once_, [this] {
    auto d = host_description(process_index_);
    // Without the compiler library the CPU cannot be named in LLVM's terms; the cpuid identity
    // still keeps keys of different machines apart.
    platform_version_ = d.ok()
                            ? describe_platform(d->triple, d->cpu, d->features)
                            : describe_platform(KILN_TARGET_TRIPLE, "unknown", host_cpu_identity());
  });
  return platform_version_;
}

Result<CanonicalModule> Client::canonicalize(const ModuleSource& lazy_source,
                                             bool keep_locations) const {
  KILN_ASSIGN_OR_RETURN(ModuleSource source, lazy_source.mlir());
  KILN_ASSIGN_OR_RETURN(cpu::ModuleCompiler * compiler, module_compiler());
  return compiler->canonicalize(source, keep_locations);
}

Result<std::unique_ptr<Client>> Client::create_cpu_for_job(int device_count, int process_index,
                                                           int num_processes) {
  if (num_processes < 1 || process_index < 0 || process_index >= num_processes)
    return invalid_argument("process id " + std::to_string(process_index) + " is not in a job of " +
                            std::to_string(num_processes) + " processes");
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, create_cpu(device_count, process_index));
  int local = static_cast<int>(client->devices_.size());
  client->devices_.clear();
  for (int p = 0; p < num_processes; ++p)
    for (int d = 0; d < local; ++d) client->devices_.push_back(Device{p * local + d, p, "cpu"});
  client->num_processes_ = num_processes;
  return client;
}

std::vector<Device> Client::local_devices() const {
  std::vector<Device> out;
  for (const Device& d : devices_)
    if (d.process_index == process_index_) out.push_back(d);
  return out;
}

Result<std::string> Client::compile_serialized(const ModuleSource& lazy_source,
                                               const CompileOptions& options) const {
  KILN_ASSIGN_OR_RETURN(ModuleSource source, lazy_source.mlir());
  if (compile_only_ && options.target.is_host()) {
    // The seed's rule: a real client of the same platform version and device count compiles
    // instead (it could measure), unless the module has host callbacks. The code is the same.
    auto host = Client::create_cpu();
    bool callbacks = source.bytes.find("kiln.host_callback") != std::string::npos;
    if (host.ok() && !callbacks && (*host)->platform_version() == platform_version_ &&
        (*host)->devices().size() == devices_.size()) {
      log::debug("compile-only client for " + target_.triple + "/" + target_.cpu +
                 ": compiling through this machine's client (same platform version and device "
                 "count, no host callbacks)");
      return (*host)->compile_serialized(source, options);
    }
  }
  KILN_ASSIGN_OR_RETURN(cpu::CompiledModule compiled, compile_module(*this, source, options));
  return Executable::serialize_parts(compiled.info, compiled.entry_points, compiled.shared_object,
                                     compiled.callbacks);
}

Result<std::vector<int>> Client::replica_devices(const CompileOptions& options) const {
  if (options.num_partitions > 1) {
    return unimplemented("num_partitions = " + std::to_string(options.num_partitions) +
                         " is not supported by the CPU backend yet (no SPMD partitioning); use "
                         "replicas with one partition each");
  }
  std::vector<int> devices;
  if (!options.device_assignment.empty()) {
    if (static_cast<int>(options.device_assignment.size()) != options.num_replicas)
      return invalid_argument(
          "device_assignment has " + std::to_string(options.device_assignment.size()) +
          " replica rows, but num_replicas is " + std::to_string(options.num_replicas));
    for (const auto& row : options.device_assignment) {
      if (row.size() != 1)
        return invalid_argument("device_assignment rows must have num_partitions = 1 entries");
      devices.push_back(row[0]);
    }
  } else {
    std::vector<Device> local = local_devices();
    if (static_cast<int>(local.size()) < options.num_replicas)
      return invalid_argument(std::to_string(options.num_replicas) + " replicas need " +
                              std::to_string(options.num_replicas) +
                              " devices, but this process has " + std::to_string(local.size()) +
                              " (set KILN_CPU_DEVICE_COUNT)");
    for (int r = 0; r < options.num_replicas; ++r) devices.push_back(local[r].id);
  }
  for (int id : devices) {
    bool found = false;
    for (const Device& d : devices_) found = found || d.id == id;
    if (!found)
      return invalid_argument("device_assignment names device " + std::to_string(id) +
                              ", which does not exist (devices 0.." +
                              std::to_string(devices_.size() - 1) + ")");
  }
  return devices;
}

Result<std::shared_ptr<Executable>> Client::compile(const ModuleSource& lazy_source,
                                                    const CompileOptions& options) const {
  KILN_ASSIGN_OR_RETURN(ModuleSource source, lazy_source.mlir());
  if (compile_only_)
    return unimplemented("the compile-only client for " + target_.triple + "/" + target_.cpu +
                         " loads nothing; use compile_serialized or "
                         "compile_or_get_cached_serialized (kiln compile ... -o FILE / "
                         "--fill-cache)");
  KILN_ASSIGN_OR_RETURN(cpu::CompiledModule compiled, compile_module(*this, source, options));
  return Executable::load(std::move(compiled.info), std::move(compiled.entry_points),
                          compiled.shared_object, std::move(compiled.callbacks));
}

namespace cpu {

void install_host_description_cache(std::shared_ptr<HostDescriptionCache> cache) {
  std::lock_guard<std::mutex> lock(host_cache_mutex());
  host_cache() = std::move(cache);
}

std::shared_ptr<HostDescriptionCache> installed_host_description_cache() {
  std::lock_guard<std::mutex> lock(host_cache_mutex());
  return host_cache();
}

}  // namespace cpu

}  // namespace kiln

// Loading and running a compiled executable. Deliberately free of MLIR and LLVM: this is the code a
// cache hit runs.
#include "kiln/executable.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "backend/cpu/async_runtime.h"
#include "backend/cpu/checked_alloc.h"
#include "backend/cpu/compiler_interface.h"
#include "backend/cpu/elf_check.h"
#include "backend/cpu/host_callback_dispatch.h"
#include "backend/cpu/host_features.h"
#include "core/machine_memory.h"
#include "core/tensor_memory.h"

namespace kiln {
namespace {

// Generated code calls libkiln's runtime (allocation, the thread pool, printMemref...) by name.
// A host that loaded libkiln into a local scope (Python's extension modules, plugins) hides those
// names from later libraries: the first load promotes libkiln to the global scope.
void make_runtime_global() {
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info self;
    if (dladdr(reinterpret_cast<void*>(&make_runtime_global), &self) != 0 && self.dli_fname)
      dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  });
}

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'E', 'X', 'E', '1'};
constexpr uint32_t kFormatVersion = 1;

// Fixed-size header in front of the metadata and the shared object; all fields little-endian.
struct SerializedHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t reserved;
  uint64_t metadata_size;
  uint64_t object_size;
  uint64_t checksum;  // XXH3-64 over metadata and object bytes
};
static_assert(sizeof(SerializedHeader) == 40);

using cpu::PackedEntry;

nlohmann::json tensor_type_to_json(const TensorType& type) {
  nlohmann::json j{{"dtype", dtype_name(type.dtype)}, {"shape", type.shape}};
  if (type.scalar) j["scalar"] = true;
  return j;
}

Result<TensorType> tensor_type_from_json(const nlohmann::json& j) {
  KILN_ASSIGN_OR_RETURN(DType dtype, parse_dtype(j.at("dtype").get<std::string>()));
  return TensorType{dtype, j.at("shape").get<std::vector<int64_t>>(), j.value("scalar", false)};
}

// Generated code allocates its temporaries on every call; glibc's default trimming and mmap
// thresholds would hand blocks back to the kernel each time and fault them in again. (Blocks of
// 1 MiB and more do not come from malloc at all: core/tensor_memory.h.)
void keep_freed_memory_for_reuse() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
  });
}

// MLIR's strided memref descriptor, rank-erased: {allocated, aligned, offset, sizes[r],
// strides[r]}.
struct DescriptorView {
  int64_t* slots;
  int rank;
  void* allocated() const { return reinterpret_cast<void*>(slots[0]); }
  char* aligned() const { return reinterpret_cast<char*>(slots[1]); }
  int64_t offset() const { return slots[2]; }
  int64_t size(int i) const { return slots[3 + i]; }
  int64_t stride(int i) const { return slots[3 + rank + i]; }
};

size_t descriptor_slots(size_t rank) { return 3 + 2 * rank; }

void fill_input_descriptor(int64_t* slots, const Buffer& buffer) {
  size_t rank = buffer.shape().size();
  slots[0] = reinterpret_cast<int64_t>(buffer.data());
  slots[1] = reinterpret_cast<int64_t>(buffer.data());
  slots[2] = 0;
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    slots[3 + i] = buffer.shape()[i];
    slots[3 + rank + i] = stride;
    stride *= buffer.shape()[i];
  }
}

// Copies a possibly strided result into a fresh dense buffer.
void copy_strided(const DescriptorView& d, size_t element_size, char* out) {
  std::vector<int64_t> index(d.rank, 0);
  int64_t total = 1;
  for (int i = 0; i < d.rank; ++i) total *= d.size(i);
  for (int64_t n = 0; n < total; ++n) {
    int64_t offset = d.offset();
    for (int i = 0; i < d.rank; ++i) offset += index[i] * d.stride(i);
    std::memcpy(out + n * element_size, d.aligned() + offset * element_size, element_size);
    for (int i = d.rank; i-- > 0;) {
      if (++index[i] < d.size(i)) break;
      index[i] = 0;
    }
  }
}

bool is_dense_row_major(const DescriptorView& d) {
  int64_t expected = 1;
  for (int i = d.rank; i-- > 0;) {
    if (d.size(i) != 1 && d.stride(i) != expected) return false;
    expected *= d.size(i);
  }
  return true;
}

// The run of an instrumented executable in progress on this thread (null when nobody profiles).
struct ActiveRun {
  const Executable* executable;
  uint64_t run;
  const std::vector<KernelInfo>* kernels;
  std::vector<KernelSample> samples;
  std::vector<std::chrono::steady_clock::time_point> started;
};
thread_local ActiveRun* t_active_run = nullptr;

// Maps in every page of the loaded object's code now, so no kernel (or candidate) pays page faults
// on its first run: a first-pass build runs each candidate once per profiling run, and first-touch
// faults would otherwise dominate what the profile measures.
void prefault_code(const std::string& path) {
  struct Search {
    const std::string* path;
    std::vector<std::pair<uintptr_t, size_t>> ranges;
  } search{&path, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name == nullptr || *s->path != info->dlpi_name) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            s->ranges.emplace_back(info->dlpi_addr + ph.p_vaddr, ph.p_memsz);
        }
        return 1;
      },
      &search);
  long page = sysconf(_SC_PAGESIZE);
  for (auto [start, size] : search.ranges) {
    uintptr_t first = start & ~uintptr_t(page - 1);
    size_t length = start + size - first;
    if (madvise(reinterpret_cast<void*>(first), length, MADV_POPULATE_READ) == 0) continue;
    // Older kernels: touch one byte per page instead.
    for (uintptr_t p = first; p < start + size; p += page)
      (void)*reinterpret_cast<const volatile char*>(p);
  }
}

// Every symbol the metadata promises must be defined by the code, checked without loading it.
Status check_code_matches_metadata(const ExecutableInfo& info,
                                   const std::vector<EntryPoint>& entries,
                                   const std::vector<HostCallbackSignature>& callbacks,
                                   std::string_view object) {
  KILN_ASSIGN_OR_RETURN(std::set<std::string> symbols, cpu::checked_dynamic_symbols(object));
  auto require = [&](const std::string& symbol, const std::string& what) -> Status {
    if (symbols.count(symbol) != 0) return Status();
    return corruption("executable '" + info.module_name + "' lists " + what +
                      ", but its code does not define " + symbol);
  };
  if (symbols.count(cpu::kContractVersionSymbol) == 0)
    return invalid_argument("executable '" + info.module_name +
                            "' was built by a kiln whose generated code follows another contract "
                            "(it defines no " +
                            cpu::kContractVersionSymbol + "); this kiln loads contract version " +
                            std::to_string(cpu::kGeneratedCodeContract) + ": build it again");
  for (const EntryPoint& e : entries)
    KILN_RETURN_IF_ERROR(require(cpu::packed_entry_symbol(e.name), "entry '" + e.name + "'"));
  for (const HostCallbackSignature& cb : callbacks) {
    KILN_RETURN_IF_ERROR(
        require(cpu::callback_function_slot(cb.name), "host callback '" + cb.name + "'"));
    KILN_RETURN_IF_ERROR(
        require(cpu::callback_site_slot(cb.name), "host callback '" + cb.name + "'"));
  }
  if (!info.kernels.empty()) {
    KILN_RETURN_IF_ERROR(require(cpu::kProfileFunctionSlot, "profiled kernels"));
    KILN_RETURN_IF_ERROR(require(cpu::kProfileSiteSlot, "profiled kernels"));
  }
  return Status();
}

}  // namespace

// Called by PGLE builds at the start (phase 0, returns the candidate to run) and end (phase 1) of
// each kernel.
extern "C" int64_t kiln_profile_event(const void* site, int64_t kernel, int64_t phase) {
  ActiveRun* run = t_active_run;
  if (run == nullptr || run->executable != site || kernel < 0 ||
      static_cast<size_t>(kernel) >= run->samples.size())
    return 0;
  KernelSample& sample = run->samples[kernel];
  if (phase == 0) {
    sample.candidate = static_cast<int>(run->run % (*run->kernels)[kernel].candidates());
    run->started[kernel] = std::chrono::steady_clock::now();
    return sample.candidate;
  }
  sample.ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - run->started[kernel])
                   .count();
  sample.ran = true;
  return 0;
}

Executable::~Executable() {
  if (library_handle_ != nullptr) {
    cpu::wait_for_started_tasks();
    dlclose(library_handle_);
  }
  if (code_fd_ >= 0) close(code_fd_);
}

Result<std::shared_ptr<Executable>> Executable::load(ExecutableInfo info,
                                                     std::vector<EntryPoint> entry_points,
                                                     std::string_view shared_object,
                                                     std::vector<HostCallbackSignature> callbacks) {
  // Code for another architecture cannot run here at all.
  std::string arch = info.target_triple.substr(0, info.target_triple.find('-'));
  if (!arch.empty() && arch != "x86_64") {
    return unimplemented("executable '" + info.module_name + "' was compiled for " +
                         info.target_triple + "; this machine is x86_64. Load it on a " + arch +
                         " machine, or recompile it for this one");
  }
  // Code for CPU features this machine lacks would die of an illegal instruction: refuse it.
  if (std::vector<std::string> missing = cpu::missing_features(info.target_features);
      !missing.empty()) {
    std::string names;
    for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
    return unimplemented(
        "executable '" + info.module_name + "' was compiled for " +
        (info.target_cpu.empty() ? "another CPU" : "CPU '" + info.target_cpu + "'") +
        " and needs CPU features this machine lacks: " + names +
        "; recompile it here or for a baseline target");
  }
  for (const HostCallbackSignature& cb : callbacks) {
    if (!host_callback_registered(cb.name)) {
      std::string types;
      for (const TensorType& t : cb.args) types += (types.empty() ? "" : ", ") + t.to_string();
      return not_found("executable '" + info.module_name + "' calls host callback '" + cb.name +
                       "(" + types +
                       ")', but no callable is registered under that name; "
                       "register one with kiln::register_host_callback before loading");
    }
  }
  // dlopen trusts its input: check the object's structure and symbols first.
  KILN_RETURN_IF_ERROR(check_code_matches_metadata(info, entry_points, callbacks, shared_object));
  auto start = std::chrono::steady_clock::now();
  keep_freed_memory_for_reuse();
  std::shared_ptr<Executable> exe(new Executable());
  exe->info_ = std::move(info);
  exe->entry_points_ = std::move(entry_points);
  exe->code_size_ = shared_object.size();
  exe->callbacks_ = std::move(callbacks);

  // dlopen needs a path; an anonymous memory file gives one without touching the disk.
  int fd = memfd_create("kiln-executable", MFD_CLOEXEC);
  if (fd < 0) return io_error(std::string("memfd_create failed: ") + std::strerror(errno));
  exe->code_fd_ = fd;
  const char* data = shared_object.data();
  size_t left = shared_object.size();
  while (left > 0) {
    ssize_t n = write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(std::string("writing executable to memory file failed: ") +
                      std::strerror(errno));
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  make_runtime_global();
  exe->library_handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (exe->library_handle_ == nullptr) {
    const char* error = dlerror();
    std::string why = error ? error : "unknown";
    // A function the program declares and calls but nothing loaded defines: the program's
    // environment, not a damaged executable (which the cache would drop and compile again).
    size_t undefined = why.find("undefined symbol: ");
    if (undefined != std::string::npos)
      return not_found("the program calls '" + why.substr(undefined + 18) +
                       "', which no library loaded in this process defines: load the library "
                       "that does first (kiln run --shared-libs=LIB.so; from C++, dlopen it with "
                       "RTLD_GLOBAL before loading the executable)");
    return corruption("cannot load executable code: " + why);
  }
  const auto* contract =
      static_cast<const uint32_t*>(dlsym(exe->library_handle_, cpu::kContractVersionSymbol));
  if (contract == nullptr || *contract != cpu::kGeneratedCodeContract)
    return invalid_argument("executable '" + exe->info_.module_name +
                            "' follows generated-code contract version " +
                            (contract ? std::to_string(*contract) : std::string("(none)")) +
                            "; this kiln loads version " +
                            std::to_string(cpu::kGeneratedCodeContract) + ": build it again");
  for (const EntryPoint& entry : exe->entry_points_) {
    std::string symbol = cpu::packed_entry_symbol(entry.name);
    void* fn = dlsym(exe->library_handle_, symbol.c_str());
    if (fn == nullptr) {
      return corruption("executable has no code for entry '" + entry.name + "' (symbol " + symbol +
                        ")");
    }
    exe->entry_functions_.push_back(fn);
  }
  // Point each callback's slots at the dispatcher and at its signature (which names it).
  for (const HostCallbackSignature& cb : exe->callbacks_) {
    auto* fn_slot = static_cast<void**>(
        dlsym(exe->library_handle_, cpu::callback_function_slot(cb.name).c_str()));
    auto* site_slot = static_cast<const void**>(
        dlsym(exe->library_handle_, cpu::callback_site_slot(cb.name).c_str()));
    if (fn_slot == nullptr || site_slot == nullptr)
      return corruption("executable has no slots for host callback '" + cb.name + "'");
    *fn_slot = reinterpret_cast<void*>(&kiln_host_callback_dispatch);
    *site_slot = &cb;
  }
  // PGLE builds report kernel times through two slots.
  if (!exe->info_.kernels.empty()) {
    prefault_code(path);
    auto* fn_slot = static_cast<void**>(dlsym(exe->library_handle_, cpu::kProfileFunctionSlot));
    auto* site_slot = static_cast<const void**>(dlsym(exe->library_handle_, cpu::kProfileSiteSlot));
    if (fn_slot == nullptr || site_slot == nullptr)
      return corruption("executable lists kernels but has no profiling slots");
    *fn_slot = reinterpret_cast<void*>(&kiln_profile_event);
    *site_slot = exe.get();
  }
  exe->load_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return exe;
}

std::string Executable::serialize() const {
  return serialize_parts(info_, entry_points_, code_bytes(), callbacks_);
}

std::string Executable::serialize_parts(const ExecutableInfo& info_,
                                        const std::vector<EntryPoint>& entry_points_,
                                        std::string_view code,
                                        const std::vector<HostCallbackSignature>& callbacks_) {
  nlohmann::json meta;
  meta["module_name"] = info_.module_name;
  meta["platform_version"] = info_.platform_version;
  meta["effort_level"] = info_.effort_level;
  meta["target_triple"] = info_.target_triple;
  meta["target_cpu"] = info_.target_cpu;
  meta["target_features"] = info_.target_features;
  meta["num_replicas"] = info_.num_replicas;
  meta["replica_devices"] = info_.replica_devices;
  meta["timings_ms"] = {{"parse", info_.timings.parse_ms},
                        {"passes", info_.timings.passes_ms},
                        {"llvm", info_.timings.llvm_ms},
                        {"codegen", info_.timings.codegen_ms}};
  nlohmann::json entries = nlohmann::json::array();
  for (const EntryPoint& e : entry_points_) {
    nlohmann::json in = nlohmann::json::array(), out = nlohmann::json::array();
    for (const TensorType& t : e.inputs) in.push_back(tensor_type_to_json(t));
    for (const TensorType& t : e.outputs) out.push_back(tensor_type_to_json(t));
    entries.push_back(
        {{"name", e.name}, {"inputs", in}, {"outputs", out}, {"results_owned", e.results_owned}});
  }
  meta["entries"] = entries;
  nlohmann::json callbacks = nlohmann::json::array();
  for (const HostCallbackSignature& cb : callbacks_) {
    nlohmann::json args = nlohmann::json::array();
    for (const TensorType& t : cb.args) args.push_back(tensor_type_to_json(t));
    callbacks.push_back({{"name", cb.name}, {"args", args}});
  }
  meta["host_callbacks"] = callbacks;
  if (!info_.kernels.empty()) {
    nlohmann::json kernels = nlohmann::json::array();
    for (const KernelInfo& k : info_.kernels)
      kernels.push_back(
          {{"fingerprint", k.fingerprint}, {"name", k.name}, {"candidates", k.candidate_names}});
    meta["kernels"] = kernels;
  }
  std::string metadata = meta.dump();

  SerializedHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.format_version = kFormatVersion;
  header.metadata_size = metadata.size();
  header.object_size = code.size();
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, metadata.data(), metadata.size());
  XXH3_64bits_update(state, code.data(), code.size());
  header.checksum = XXH3_64bits_digest(state);
  XXH3_freeState(state);

  std::string out;
  out.reserve(sizeof(header) + metadata.size() + code.size());
  out.append(reinterpret_cast<const char*>(&header), sizeof(header));
  out += metadata;
  out += code;
  return out;
}

std::string Executable::code_bytes() const {
  std::string code(code_size_, '\0');
  for (size_t done = 0; done < code.size();) {
    ssize_t n = pread(code_fd_, code.data() + done, code.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // cannot happen for a memfd we wrote; checksums would expose it
    done += static_cast<size_t>(n);
  }
  return code;
}

namespace {

// A serialised executable taken apart and checked, but not loaded.
struct ParsedExecutable {
  ExecutableInfo info;
  std::vector<EntryPoint> entries;
  std::vector<HostCallbackSignature> callbacks;
  std::string_view object;
};

Result<ParsedExecutable> parse_serialized(std::string_view bytes) {
  SerializedHeader header;
  if (bytes.size() < sizeof(header) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return invalid_argument("not a kiln executable (bad magic); compile one with `kiln compile`");
  }
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (header.format_version != kFormatVersion) {
    return invalid_argument("kiln executable format version " +
                            std::to_string(header.format_version) +
                            " is not supported (this kiln "
                            "reads version " +
                            std::to_string(kFormatVersion) + "); recompile it");
  }
  if (header.reserved != 0) return corruption("kiln executable header is damaged");
  uint64_t body = bytes.size() - sizeof(header);
  if (header.metadata_size > body || header.object_size != body - header.metadata_size) {
    return corruption("kiln executable is truncated or has trailing bytes");
  }
  std::string_view metadata = bytes.substr(sizeof(header), header.metadata_size);
  std::string_view object = bytes.substr(sizeof(header) + header.metadata_size);
  if (XXH3_64bits(bytes.data() + sizeof(header), body) != header.checksum) {
    return corruption("kiln executable checksum mismatch: the bytes were damaged");
  }
  ParsedExecutable parsed;
  parsed.object = object;
  ExecutableInfo& info = parsed.info;
  std::vector<EntryPoint>& entries = parsed.entries;
  std::vector<HostCallbackSignature>& callbacks = parsed.callbacks;
  try {
    nlohmann::json meta = nlohmann::json::parse(metadata);
    info.module_name = meta.at("module_name").get<std::string>();
    info.platform_version = meta.at("platform_version").get<std::string>();
    info.effort_level = meta.at("effort_level").get<std::string>();
    info.target_triple = meta.value("target_triple", std::string());
    info.target_cpu = meta.at("target_cpu").get<std::string>();
    info.target_features = meta.at("target_features").get<std::string>();
    info.num_replicas = meta.value("num_replicas", 1);
    info.replica_devices = meta.value("replica_devices", std::vector<int>{0});
    const auto& t = meta.at("timings_ms");
    info.timings = {t.at("parse").get<double>(), t.at("passes").get<double>(),
                    t.at("llvm").get<double>(), t.at("codegen").get<double>()};
    for (const auto& e : meta.at("entries")) {
      EntryPoint entry;
      entry.name = e.at("name").get<std::string>();
      entry.results_owned = e.at("results_owned").get<bool>();
      for (const auto& in : e.at("inputs")) {
        KILN_ASSIGN_OR_RETURN(TensorType type, tensor_type_from_json(in));
        entry.inputs.push_back(type);
      }
      for (const auto& out : e.at("outputs")) {
        KILN_ASSIGN_OR_RETURN(TensorType type, tensor_type_from_json(out));
        entry.outputs.push_back(type);
      }
      entries.push_back(std::move(entry));
    }
    for (const auto& c : meta.value("host_callbacks", nlohmann::json::array())) {
      HostCallbackSignature cb;
      cb.name = c.at("name").get<std::string>();
      for (const auto& a : c.at("args")) {
        KILN_ASSIGN_OR_RETURN(TensorType type, tensor_type_from_json(a));
        cb.args.push_back(type);
      }
      callbacks.push_back(std::move(cb));
    }
    for (const auto& k : meta.value("kernels", nlohmann::json::array())) {
      KernelInfo kernel;
      kernel.fingerprint = k.at("fingerprint").get<uint64_t>();
      kernel.name = k.at("name").get<std::string>();
      kernel.candidate_names = k.at("candidates").get<std::vector<std::string>>();
      info.kernels.push_back(std::move(kernel));
    }
  } catch (const nlohmann::json::exception& e) {
    return corruption(std::string("kiln executable metadata is malformed: ") + e.what());
  }
  return parsed;
}

}  // namespace

Result<std::shared_ptr<Executable>> Executable::deserialize(std::string_view bytes) {
  KILN_ASSIGN_OR_RETURN(ParsedExecutable parsed, parse_serialized(bytes));
  return load(std::move(parsed.info), std::move(parsed.entries), parsed.object,
              std::move(parsed.callbacks));
}

Status Executable::check_serialized(std::string_view bytes) {
  KILN_ASSIGN_OR_RETURN(ParsedExecutable parsed, parse_serialized(bytes));
  return check_code_matches_metadata(parsed.info, parsed.entries, parsed.callbacks, parsed.object);
}

Result<std::string> Executable::serialized_code(std::string_view bytes) {
  KILN_ASSIGN_OR_RETURN(ParsedExecutable parsed, parse_serialized(bytes));
  return std::string(parsed.object);
}

Result<std::shared_ptr<Executable>> Executable::deserialize_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return invalid_argument("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size == 0) {
    close(fd);
    return invalid_argument("not a kiln executable (empty or unreadable): " + path);
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) return io_error("cannot map " + path + ": " + std::strerror(errno));
  auto result = deserialize(std::string_view(static_cast<const char*>(mapped), size));
  munmap(mapped, size);
  return result;
}

Result<std::vector<ReplicaResult>> Executable::execute_replicated(
    const std::string& entry, const std::vector<std::vector<Buffer>>& inputs_per_replica) const {
  if (static_cast<int>(inputs_per_replica.size()) != info_.num_replicas) {
    return invalid_argument("executable '" + info_.module_name + "' has " +
                            std::to_string(info_.num_replicas) + " replica(s), but " +
                            std::to_string(inputs_per_replica.size()) +
                            " set(s) of inputs were given (one per replica)");
  }
  std::vector<Result<std::vector<Buffer>>> results(inputs_per_replica.size(),
                                                   Result<std::vector<Buffer>>(Status()));
  std::vector<std::thread> threads;
  for (size_t r = 0; r < inputs_per_replica.size(); ++r)
    threads.emplace_back([&, r] { results[r] = execute(entry, inputs_per_replica[r]); });
  for (auto& t : threads) t.join();
  std::vector<ReplicaResult> out;
  for (size_t r = 0; r < results.size(); ++r) {
    if (!results[r].ok()) {
      return Status(results[r].status().code(),
                    "replica " + std::to_string(r) + ": " + results[r].status().message());
    }
    out.push_back({info_.replica_devices[r], std::move(results[r]).value()});
  }
  return out;
}

Result<const EntryPoint*> Executable::find_entry(const std::string& name) const {
  std::string names;
  for (const EntryPoint& e : entry_points_) {
    if (e.name == name) return &e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  return not_found("no entry function '" + name + "' in module '" + info_.module_name +
                   "'; its public functions are: " + (names.empty() ? "(none)" : names));
}

Result<std::vector<Buffer>> Executable::execute(const std::string& entry_name,
                                                const std::vector<Buffer>& inputs) const {
  return execute(entry_name, inputs, nullptr);
}

Result<std::vector<Buffer>> Executable::execute(const std::string& entry_name,
                                                const std::vector<Buffer>& inputs,
                                                PgleProfiler* profiler) const {
  KILN_ASSIGN_OR_RETURN(const EntryPoint* entry, find_entry(entry_name));
  if (inputs.size() != entry->inputs.size()) {
    return invalid_argument("entry '" + entry->name + "' takes " +
                            std::to_string(entry->inputs.size()) + " argument(s), " +
                            std::to_string(inputs.size()) + " given");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = entry->inputs[i];
    const Buffer& got = inputs[i];
    bool shape_ok = got.shape().size() == want.shape.size();
    for (size_t d = 0; shape_ok && d < want.shape.size(); ++d)
      shape_ok = want.shape[d] == kDynamicDim || want.shape[d] == got.shape()[d];
    if (got.dtype() != want.dtype || !shape_ok) {
      TensorType given = got.type();
      given.scalar = want.scalar && got.shape().empty();
      return invalid_argument("argument " + std::to_string(i) + " of '" + entry->name +
                              "': expected " + want.to_string() + ", given " + given.to_string());
    }
  }

  // A static result larger than this machine's memory and swap is refused before any work, with
  // the result named (the checking allocator would only stop the call when it got there).
  for (size_t i = 0; i < entry->outputs.size(); ++i) {
    const TensorType& out = entry->outputs[i];
    if (!out.is_static()) continue;
    Result<size_t> bytes = dense_byte_size(out.dtype, out.shape);
    uint64_t memory = machine_memory_bytes();
    if (!bytes.ok() || (memory > 0 && *bytes > memory))
      return resource_exhausted(
          "result " + std::to_string(i) + " of '" + entry->name + "' (" + out.to_string() +
          ") needs " + (bytes.ok() ? std::to_string(*bytes) : std::string("more than 2^64")) +
          " bytes, more than this machine's memory and swap (" + std::to_string(memory) +
          " bytes)");
  }

  // Packed call: args[0] points at the results slot (if any), then one slot per input. A lone
  // scalar result is returned by value instead: its slot comes after the inputs.
  bool scalar_result = entry->outputs.size() == 1 && entry->outputs[0].scalar;
  size_t result_slots = scalar_result ? 1 : 0;
  for (const TensorType& t : entry->outputs)
    if (!t.scalar) result_slots += descriptor_slots(t.shape.size());
  std::vector<int64_t> result_storage(result_slots, 0);
  std::vector<std::vector<int64_t>> input_storage(inputs.size());
  std::vector<void*> pointers;  // the values the packed args point at
  pointers.reserve(inputs.size() + 1);
  if (!entry->outputs.empty() && !scalar_result) pointers.push_back(result_storage.data());
  for (size_t i = 0; i < inputs.size(); ++i) {
    input_storage[i].resize(descriptor_slots(inputs[i].shape().size()));
    fill_input_descriptor(input_storage[i].data(), inputs[i]);
    pointers.push_back(input_storage[i].data());
  }
  std::vector<void*> args(pointers.size());
  for (size_t i = 0; i < pointers.size(); ++i) args[i] = &pointers[i];
  // Scalars are passed by value: the packed entry loads them straight from the buffer.
  size_t first_input = entry->outputs.empty() || scalar_result ? 0 : 1;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (entry->inputs[i].scalar) args[first_input + i] = inputs[i].data();
  if (scalar_result) args.push_back(result_storage.data());

  size_t entry_index = static_cast<size_t>(entry - entry_points_.data());
  auto entry_function = reinterpret_cast<PackedEntry>(entry_functions_[entry_index]);
  bool called = false;
  std::string allocation_error;
  cpu::CallbackErrorScope callback_errors;
  if (info_.kernels.empty()) profiler = nullptr;
  if (profiler && profiler->enabled()) {
    ActiveRun run{this, profiler->begin_run(), &info_.kernels,
                  std::vector<KernelSample>(info_.kernels.size()),
                  std::vector<std::chrono::steady_clock::time_point>(info_.kernels.size())};
    ActiveRun* outer = t_active_run;
    t_active_run = &run;
    called = cpu::call_checking_allocations(entry_function, args.data(), allocation_error);
    t_active_run = outer;
    if (called) profiler->record(info_.kernels, run.samples);
  } else {
    called = cpu::call_checking_allocations(entry_function, args.data(), allocation_error);
  }
  if (!called) return resource_exhausted("'" + entry->name + "': " + allocation_error);

  std::vector<Buffer> results;
  if (scalar_result) {
    KILN_ASSIGN_OR_RETURN(Buffer value, Buffer::allocate(entry->outputs[0].dtype, {}));
    std::memcpy(value.data(), result_storage.data(), dtype_size(entry->outputs[0].dtype));
    results.push_back(std::move(value));
  }
  std::map<void*, std::shared_ptr<void>> owners;  // one owner per allocation, even if shared
  size_t slot = 0;
  for (const TensorType& type : entry->outputs) {
    if (type.scalar) continue;
    DescriptorView d{result_storage.data() + slot, static_cast<int>(type.shape.size())};
    slot += descriptor_slots(type.shape.size());
    std::vector<int64_t> shape(d.rank);
    for (int i = 0; i < d.rank; ++i) shape[i] = d.size(i);
    size_t element_size = dtype_size(type.dtype);
    if (entry->results_owned) {
      std::shared_ptr<void>& owner = owners[d.allocated()];
      if (!owner) owner = std::shared_ptr<void>(d.allocated(), release_tensor_memory);
      if (is_dense_row_major(d)) {
        results.emplace_back(type.dtype, shape, d.aligned() + d.offset() * element_size, owner);
        continue;
      }
    }
    KILN_ASSIGN_OR_RETURN(Buffer copy, Buffer::allocate(type.dtype, shape));
    copy_strided(d, element_size, static_cast<char*>(copy.data()));
    results.push_back(std::move(copy));
  }
  if (!callback_errors.status().ok()) return callback_errors.status();
  return results;
}

}  // namespace kiln

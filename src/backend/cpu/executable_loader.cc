// Loading an executable's code: checked first, then mapped from an anonymous memory file and its
// symbols bound. Deliberately free of MLIR and LLVM: this is the code a cache hit runs.
#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <mutex>

#include "backend/cpu/async_runtime.h"
#include "backend/cpu/elf_check.h"
#include "backend/cpu/executable_internal.h"
#include "backend/cpu/generated_code_contract.h"
#include "backend/cpu/host_callback_dispatch.h"
#include "backend/cpu/host_features.h"
#include "kiln/executable.h"
#include "kiln/host_callback.h"

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
}  // namespace

namespace cpu {

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
}  // namespace cpu

Executable::~Executable() {
  if (library_handle_ != nullptr) {
    cpu::wait_for_started_tasks();
    dlclose(library_handle_);
  }
  if (code_fd_ >= 0) close(code_fd_);
}

namespace {

// Code for another architecture, for CPU features this machine lacks (it would die of an illegal
// instruction) or calling host callbacks nobody registered: refused before anything is mapped.
Status check_runnable_here(const ExecutableInfo& info,
                           const std::vector<HostCallbackSignature>& callbacks) {
  std::string arch = info.target_triple.substr(0, info.target_triple.find('-'));
  if (!arch.empty() && arch != "x86_64") {
    return unimplemented("executable '" + info.module_name + "' was compiled for " +
                         info.target_triple + "; this machine is x86_64. Load it on a " + arch +
                         " machine, or recompile it for this one");
  }
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
    if (host_callback_registered(cb.name)) continue;
    std::string types;
    for (const TensorType& t : cb.args) types += (types.empty() ? "" : ", ") + t.to_string();
    return not_found("executable '" + info.module_name + "' calls host callback '" + cb.name + "(" +
                     types +
                     ")', but no callable is registered under that name; "
                     "register one with kiln::register_host_callback before loading");
  }
  return Status();
}

// dlopen needs a path; an anonymous memory file gives one without touching the disk.
Result<int> write_to_memory_file(std::string_view bytes) {
  int fd = memfd_create("kiln-executable", MFD_CLOEXEC);
  if (fd < 0) return io_error(std::string("memfd_create failed: ") + std::strerror(errno));
  const char* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      return io_error(std::string("writing executable to memory file failed: ") +
                      std::strerror(errno));
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  return fd;
}

Result<void*> open_code(const std::string& path) {
  make_runtime_global();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) return handle;
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

Status check_contract(void* handle, const std::string& module_name) {
  const auto* contract = static_cast<const uint32_t*>(dlsym(handle, cpu::kContractVersionSymbol));
  if (contract != nullptr && *contract == cpu::kGeneratedCodeContract) return Status();
  return invalid_argument("executable '" + module_name +
                          "' follows generated-code contract version " +
                          (contract ? std::to_string(*contract) : std::string("(none)")) +
                          "; this kiln loads version " +
                          std::to_string(cpu::kGeneratedCodeContract) + ": build it again");
}

Result<std::vector<void*>> find_entry_functions(void* handle,
                                                const std::vector<EntryPoint>& entries) {
  std::vector<void*> functions;
  for (const EntryPoint& entry : entries) {
    std::string symbol = cpu::packed_entry_symbol(entry.name);
    void* fn = dlsym(handle, symbol.c_str());
    if (fn == nullptr)
      return corruption("executable has no code for entry '" + entry.name + "' (symbol " + symbol +
                        ")");
    functions.push_back(fn);
  }
  return functions;
}

// Points each callback's slots at the dispatcher and at its signature (which names it).
Status bind_callback_slots(void* handle, const std::vector<HostCallbackSignature>& callbacks) {
  for (const HostCallbackSignature& cb : callbacks) {
    auto* fn_slot =
        static_cast<void**>(dlsym(handle, cpu::callback_function_slot(cb.name).c_str()));
    auto* site_slot =
        static_cast<const void**>(dlsym(handle, cpu::callback_site_slot(cb.name).c_str()));
    if (fn_slot == nullptr || site_slot == nullptr)
      return corruption("executable has no slots for host callback '" + cb.name + "'");
    *fn_slot = reinterpret_cast<void*>(&kiln_host_callback_dispatch);
    *site_slot = &cb;
  }
  return Status();
}

// PGLE builds report kernel times through two slots; `site` tells the runs of executables apart.
Status bind_profiling_slots(void* handle, const void* site) {
  auto* fn_slot = static_cast<void**>(dlsym(handle, cpu::kProfileFunctionSlot));
  auto* site_slot = static_cast<const void**>(dlsym(handle, cpu::kProfileSiteSlot));
  if (fn_slot == nullptr || site_slot == nullptr)
    return corruption("executable lists kernels but has no profiling slots");
  *fn_slot = reinterpret_cast<void*>(&kiln_profile_event);
  *site_slot = site;
  return Status();
}

}  // namespace

Result<std::shared_ptr<Executable>> Executable::load(ExecutableInfo info,
                                                     std::vector<EntryPoint> entry_points,
                                                     std::string_view shared_object,
                                                     std::vector<HostCallbackSignature> callbacks) {
  KILN_RETURN_IF_ERROR(check_runnable_here(info, callbacks));
  // dlopen trusts its input: check the object's structure and symbols first.
  KILN_RETURN_IF_ERROR(
      cpu::check_code_matches_metadata(info, entry_points, callbacks, shared_object));
  auto start = std::chrono::steady_clock::now();
  keep_freed_memory_for_reuse();
  std::shared_ptr<Executable> exe(new Executable());
  exe->info_ = std::move(info);
  exe->entry_points_ = std::move(entry_points);
  exe->code_size_ = shared_object.size();
  exe->callbacks_ = std::move(callbacks);
  KILN_ASSIGN_OR_RETURN(exe->code_fd_, write_to_memory_file(shared_object));
  std::string path = "/proc/self/fd/" + std::to_string(exe->code_fd_);
  KILN_ASSIGN_OR_RETURN(exe->library_handle_, open_code(path));
  KILN_RETURN_IF_ERROR(check_contract(exe->library_handle_, exe->info_.module_name));
  KILN_ASSIGN_OR_RETURN(exe->entry_functions_,
                        find_entry_functions(exe->library_handle_, exe->entry_points_));
  KILN_RETURN_IF_ERROR(bind_callback_slots(exe->library_handle_, exe->callbacks_));
  if (!exe->info_.kernels.empty()) {
    prefault_code(path);
    KILN_RETURN_IF_ERROR(bind_profiling_slots(exe->library_handle_, exe.get()));
  }
  exe->load_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return exe;
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

}  // namespace kiln

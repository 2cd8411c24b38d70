#include "backend/cpu/checked_alloc.h"

#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "core/tensor_memory.h"
#include "kiln/export.h"

namespace kiln::cpu {
namespace {

struct AllocationTrap {
  std::jmp_buf jump;
  size_t failed_bytes = 0;
};
thread_local AllocationTrap* t_trap = nullptr;

[[noreturn]] void allocation_failed(size_t bytes) {
  if (t_trap == nullptr) {
    // Only compiled code calls these, and only inside call_checking_allocations.
    std::fprintf(stderr, "kiln: compiled code could not allocate %zu bytes\n", bytes);
    std::abort();
  }
  t_trap->failed_bytes = bytes;
  // Unwinds only frames of MLIR-generated code, which hold no C++ objects.
  std::longjmp(t_trap->jump, 1);
}

}  // namespace

bool call_checking_allocations(PackedEntry entry, void** args, std::string& error) {
  AllocationTrap trap;
  AllocationTrap* outer = t_trap;
  t_trap = &trap;
  if (setjmp(trap.jump) != 0) {
    t_trap = outer;
    error = "the program could not allocate " + std::to_string(trap.failed_bytes) +
            " bytes for an intermediate buffer: out of memory";
    return false;
  }
  entry(args);
  t_trap = outer;
  return true;
}

}  // namespace kiln::cpu

// The generic allocation functions MLIR's memref lowering calls (exported: generated code
// resolves them in libkiln). Buffers returned to the caller
// are released the same way, with release_tensor_memory.
extern "C" KILN_EXPORT void* _mlir_memref_to_llvm_alloc(size_t size) {
  void* p = kiln::allocate_tensor_memory(size, alignof(std::max_align_t));
  if (p == nullptr) kiln::cpu::allocation_failed(size);
  return p;
}

extern "C" KILN_EXPORT void* _mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  void* p = kiln::allocate_tensor_memory(size, alignment);
  if (p == nullptr) kiln::cpu::allocation_failed(size);
  return p;
}

extern "C" KILN_EXPORT void _mlir_memref_to_llvm_free(void* p) { kiln::release_tensor_memory(p); }

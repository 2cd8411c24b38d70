// Memory for tensors: what Buffer::allocate, file reads and compiled code's allocations get.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

// `size` bytes aligned to at least `alignment` (a power of two); null when out of memory. Release
// with release_tensor_memory, never free().
//
// Large blocks do not come from malloc's heap: generated code allocates and frees the same large
// buffers on every run, and in one heap those leave gaps that stay resident (resnet18 peaked at
// 262 MiB for 149 MiB ever live at once). They are mapped on their own, reused by later requests
// of a size they fit, and those of 4 MiB and more are backed by transparent huge pages where the
// kernel offers them (a first run otherwise takes one page fault per 4 KiB: 44,000 for resnet18).
void* allocate_tensor_memory(size_t size, size_t alignment);
void release_tensor_memory(void* pointer);

// A one-off block of `size` bytes of its own (huge pages where it is large enough), for memory
// that is filled once and dropped, like a model file's bytes; null when out of memory.
void* map_memory(size_t size);
void unmap_memory(void* pointer, size_t size);

struct TensorMemoryStats {
  int64_t mapped_bytes = 0;       // large blocks in use or kept for reuse
  int64_t kept_bytes = 0;         // of those, kept for reuse
  int64_t peak_in_use_bytes = 0;  // the most ever in use at once
};
TensorMemoryStats tensor_memory_stats();

}  // namespace kiln

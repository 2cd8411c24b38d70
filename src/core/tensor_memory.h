// Memory for tensors: what Buffer::allocate and compiled code's allocations get.
#pragma once

#include <cstddef>

namespace kiln {

// `size` bytes aligned to at least `alignment` (a power of two), released with std::free; null
// when out of memory. Large blocks are backed by transparent huge pages where the kernel offers
// them: a model's first run otherwise takes one page fault per 4 KiB of its weights and
// activations (resnet18: 44,000 faults, most of a warm start), and its kernels miss the TLB.
void* allocate_tensor_memory(size_t size, size_t alignment);

}  // namespace kiln
